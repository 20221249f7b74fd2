//! The reference classifier on the real ClassBench sets, and the ClassBench → OpenFlow conversion
//! checked packet by packet.

mod shared_data;

use rqvs_classify::{winner_by_definition, Classifier, Reference};
use rqvs_flow::formats::{classbench, ofctl, openflow, trace};
use rqvs_flow::{Actions, FlowKey, Rule, RuleId};
use shared_data::*;

fn load(dir: &std::path::Path, seed: &str, size: &str) -> (Vec<Rule>, Vec<FlowKey>) {
    let rules = classbench::read_rules(&rules_path(dir, seed, size)).unwrap();
    let keys = trace::read_trace(&trace_path(dir, seed, size)).unwrap().into_iter().map(|e| e.key).collect();
    (rules, keys)
}

fn batch(c: &dyn Classifier, keys: &[FlowKey]) -> Vec<Option<RuleId>> {
    let mut out = vec![None; keys.len()];
    for (k, o) in keys.chunks(32).zip(out.chunks_mut(32)) {
        c.lookup_batch(k, o);
    }
    out
}

/// The reference equals the definition (winner-ordered scan of `Match::matches`) on every packet
/// of every 1K trace, and on every 7th packet of every 10K trace.
#[test]
fn reference_equals_definition_on_real_sets() {
    let Some(dir) = classbench_dir() else { return };
    for seed in SEEDS {
        for (size, step) in [("1k", 1), ("10k", 7)] {
            let (rules, keys) = load(&dir, seed, size);
            let r = Reference::build(&rules).unwrap();
            let got = batch(&r, &keys);
            let mut sorted = rules.clone();
            sorted.sort_by_key(|r| r.rank());
            let mut mismatches = 0;
            for i in (0..keys.len()).step_by(step) {
                let want = winner_by_definition(&sorted, &keys[i]);
                mismatches += usize::from(got[i] != want || r.lookup(&keys[i]) != want);
            }
            assert_eq!(mismatches, 0, "{seed}_{size}");
        }
    }
}

/// For the seeds OpenFlow can express, the converted table (written as ofctl text and read back)
/// gives the ClassBench winner for every trace packet; fw2 and fw4 report what they skip.
#[test]
fn openflow_conversion_keeps_every_winner() {
    let Some(dir) = classbench_dir() else { return };
    for seed in SEEDS {
        for size in ["1k", "10k"] {
            let (rules, keys) = load(&dir, seed, size);
            let conv = openflow::classbench_to_openflow(&rules, &Actions::drop()).unwrap();
            let convertible = !matches!(seed, "fw2" | "fw4");
            assert_eq!(conv.skipped.is_empty(), convertible, "{seed}_{size}: skipped {}", conv.skipped.len());
            let text = ofctl::write_flows(&conv.flows).unwrap();
            let flows = ofctl::parse_flows("converted", &text).unwrap();
            assert_eq!(flows, conv.flows, "{seed}_{size}: ofctl round trip");
            if !convertible {
                continue;
            }
            let cb = batch(&Reference::build(&rules).unwrap(), &keys);
            let of = Reference::build(&flows).unwrap();
            let got = batch(&of, &keys);
            let cookie_of = |id: RuleId| RuleId(of.rule(id).unwrap().cookie as u32);
            let mismatches = cb.iter().zip(&got).filter(|(c, o)| **c != o.map(cookie_of)).count();
            assert_eq!(mismatches, 0, "{seed}_{size}: OpenFlow winners differ from ClassBench winners");
        }
    }
}
