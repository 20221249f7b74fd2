//! `gen_attack`: the attacks' effect on ORIG over real ClassBench sets, TSE 2.0's ranking
//! property, determinism, 0 mismatches.

use std::collections::HashSet;
use std::path::PathBuf;

use rqvs_classify::ofproto::OfprotoClassifier;
use rqvs_datapath::{assign_rule_outputs, Clock, DatapathConfig, Orig, OrigConfig};
use rqvs_experiment::gen::{self, AttackRequest, TraceFormat};
use rqvs_flow::FlowKey;
use rqvs_testkit::data;
use rqvs_workload::attack::{self, Kind, Params, Variant};
use rqvs_workload::trace;

fn rules_file(name: &str) -> Option<PathBuf> {
    let Some(dir) = data::classbench_dir() else {
        eprintln!("skipping: ClassBench data not found");
        return None;
    };
    let (seed, size) = name.split_once('_').unwrap();
    Some(data::rules_path(&dir, seed, size))
}

fn run(file: &std::path::Path, kind: Kind, variant: Variant, packets: usize, seed: u64) -> gen::AttackOutput {
    let mut params = Params::new(kind, packets, seed);
    params.variant = variant;
    gen::gen_attack(&AttackRequest { rules: file.to_path_buf(), params, format: TraceFormat::Pcap }).unwrap()
}

#[test]
fn co_located_tse_makes_many_more_masks_in_orig_than_flood_and_general() {
    for set in ["acl1_1k", "fw1_1k", "ipc1_1k"] {
        let Some(f) = rules_file(set) else { return };
        let tse = run(&f, Kind::Tse, Variant::CoLocated, 5000, 1);
        let general = run(&f, Kind::Tse, Variant::General, 5000, 1);
        let flood = tse.flood.expect("the flood comparison");
        for (what, e) in [("tse", &tse.effect), ("general", &general.effect), ("flood", &flood)] {
            assert_eq!(e.mismatches, 0, "{set} {what}");
            assert_eq!(e.packets, 5000, "{set} {what}");
        }
        let (t, g, fl) = (tse.effect.masks, general.effect.masks, flood.masks);
        eprintln!("{set}: masks tse {t} general {g} flood {fl}");
        assert!(t >= 4 * fl.max(1) && t >= 2 * g.max(1), "{set}: tse {t} general {g} flood {fl}");
        // Every attack packet is a new microflow: almost nothing hits the EMC.
        assert!(tse.effect.emc_hits * 100 < 5000, "{set}: {} EMC hits", tse.effect.emc_hits);
    }
}

#[test]
fn attacks_are_deterministic_per_seed() {
    let Some(f) = rules_file("acl1_1k") else { return };
    for (kind, variant) in [
        (Kind::Tse, Variant::CoLocated),
        (Kind::Tse, Variant::General),
        (Kind::Tse2, Variant::CoLocated),
        (Kind::Flood, Variant::General),
    ] {
        let a = run(&f, kind, variant, 1000, 5);
        let b = run(&f, kind, variant, 1000, 5);
        let c = run(&f, kind, variant, 1000, 6);
        assert_eq!(a.bytes, b.bytes, "{kind:?} {variant:?}");
        assert_ne!(a.bytes, c.bytes, "{kind:?} {variant:?}");
        assert_eq!(
            a.fields,
            b.fields
                .clone()
                .into_iter()
                .map(|(k, v)| if k == "seconds" { (k, a.fields["seconds"].clone()) } else { (k, v) })
                .collect(),
            "{kind:?}"
        );
    }
}

/// TSE 2.0's property: interleaved with a benign trace, after one ranking interval every attack
/// subtable is walked before every benign-only subtable (tested against ORIG directly).
#[test]
fn tse2_subtables_outrank_benign_ones_after_a_ranking_interval() {
    let Some(f) = rules_file("acl1_1k") else { return };
    let mut rules = rqvs_experiment::inputs::load_rules(Some(&f)).unwrap();
    assign_rule_outputs(&mut rules);
    let n = 60_000;
    let mut tp = trace::Params::new(n, trace::Locality::parse("pareto:1,0.1").unwrap(), 3);
    tp.wire = true;
    let benign: Vec<FlowKey> = trace::generate(&rules, &tp).unwrap().0.into_iter().map(|p| p.key).collect();
    let mut p = Params::new(Kind::Tse2, n, 3);
    p.tse2_masks = 4;
    let att = attack::generate(&rules, &p).unwrap();
    assert_eq!(att.masks_used, 4);
    // One attack packet per benign one; 20 µs a packet: 50K packets a ranking interval.
    let mixed: Vec<FlowKey> = benign.iter().zip(&att.keys).flat_map(|(b, a)| [*b, *a]).collect();
    let clock = Clock::Virtual { packet_ns: 20_000, upcall_ns: 10_000 };
    let mut orig =
        Orig::new(&rules, DatapathConfig { clock, ..DatapathConfig::default() }, OrigConfig::default()).unwrap();
    orig.run_keys(&mixed);
    assert!(orig.now_ns() > 1_000_000_000, "past one ranking interval: {} ns", orig.now_ns());
    let clf = OfprotoClassifier::build(&rules).unwrap();
    let mask_of = |k: &FlowKey| clf.lookup_wc(k).megaflow(k).mask;
    let attack_masks: HashSet<FlowKey> = att.keys.iter().map(mask_of).collect();
    let benign_masks: HashSet<FlowKey> = benign.iter().map(mask_of).collect();
    let ranked = orig.dpcls().ranked_masks();
    let pos = |m: &FlowKey| ranked.iter().position(|x| x == m);
    let last_attack = attack_masks.iter().filter_map(pos).max().expect("attack masks installed");
    let benign_only: Vec<usize> = benign_masks.difference(&attack_masks).filter_map(pos).collect();
    assert!(!benign_only.is_empty());
    let first_benign = *benign_only.iter().min().unwrap();
    eprintln!("{} subtables; attack ranks ≤ {last_attack}, benign-only ranks ≥ {first_benign}", ranked.len());
    assert!(last_attack < first_benign, "attack ranks up to {last_attack}, a benign-only subtable at {first_benign}");
}

#[test]
fn bad_requests_are_errors() {
    let req = |file: &str, params| AttackRequest { rules: PathBuf::from(file), params, format: TraceFormat::Pcap };
    let e = gen::gen_attack(&req("/nonexistent/rules", Params::new(Kind::Tse, 10, 1))).err().unwrap();
    assert!(e.0.contains("/nonexistent/rules"), "{e}");
    let Some(f) = rules_file("acl1_1k") else { return };
    let f = f.to_str().unwrap();
    let e = gen::gen_attack(&req(f, Params::new(Kind::Tse, 0, 1))).err().unwrap();
    assert!(e.0.contains("packets"), "{e}");
    let mut p = Params::new(Kind::Tse2, 10, 1);
    p.variant = Variant::General;
    let e = gen::gen_attack(&req(f, p)).err().unwrap();
    assert!(e.0.contains("co-located"), "{e}");
}
