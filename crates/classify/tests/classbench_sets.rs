//! The reference classifier on the real ClassBench sets, and the ClassBench → OpenFlow conversion
//! checked packet by packet.

// One copy, shared by the crates whose tests read the ClassBench data.
use rqvs_testkit::data as shared_data;

use rqvs_classify::{winner_by_definition, Classifier, Reference};
use rqvs_flow::formats::{classbench, ofctl, trace};
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
            let conv = rqvs_flow::convert::classbench_to_openflow(&rules, &Actions::drop()).unwrap();
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

/// Every classifier gives the reference's winner on every packet of every 1K and 10K trace, also
/// after 10% of the rules are removed and re-inserted in a shuffled order.
#[test]
fn every_classifier_agrees_with_the_reference_on_real_sets() {
    let Some(dir) = classbench_dir() else { return };
    for seed in SEEDS {
        for size in ["1k", "10k"] {
            let (rules, keys) = load(&dir, seed, size);
            let want = batch(&Reference::build(&rules).unwrap(), &keys);
            for name in rqvs_classify::CLASSIFIER_NAMES.iter().filter(|&&n| n != "ref") {
                let mut c = rqvs_classify::build_by_name(name, &rules).unwrap();
                let got = batch(c.as_ref(), &keys);
                let bad = got.iter().zip(&want).filter(|(g, w)| g != w).count();
                assert_eq!(bad, 0, "{name} on {seed}_{size}: mismatches after build");
                // Remove and re-insert every 10th rule, in a scrambled order.
                let mut victims: Vec<&Rule> = rules.iter().step_by(10).collect();
                victims.sort_by_key(|r| (r.id.0.wrapping_mul(2_654_435_761), r.id));
                for r in &victims {
                    assert!(c.remove(r.id).is_some());
                }
                for r in victims.iter().rev() {
                    c.insert((*r).clone()).unwrap();
                }
                let got = batch(c.as_ref(), &keys);
                let bad = got.iter().zip(&want).filter(|(g, w)| g != w).count();
                assert_eq!(bad, 0, "{name} on {seed}_{size}: mismatches after remove/re-insert");
            }
        }
    }
}

/// TupleMerge's table-by-table batch path (used from 100K rules) on every 1K and 10K trace.
#[test]
fn tuplemerge_table_major_batches_agree_on_real_sets() {
    let Some(dir) = classbench_dir() else { return };
    for seed in SEEDS {
        for size in ["1k", "10k"] {
            let (rules, keys) = load(&dir, seed, size);
            let want = batch(&Reference::build(&rules).unwrap(), &keys);
            let mut tm = rqvs_classify::TupleMerge::build(&rules).unwrap();
            tm.set_table_major_batch_from(0);
            let got = batch(&tm, &keys);
            assert_eq!(got.iter().zip(&want).filter(|(g, w)| g != w).count(), 0, "{seed}_{size}");
        }
    }
}
