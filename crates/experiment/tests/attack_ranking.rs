//! TSE 2.0 against subtable ranking (`rqvs gen attack --kind tse2`): ORIG ranks its megaflow
//! subtables by hits every second of PMD time, which keeps benign subtables first under the
//! plain TSE attack (thousands of masks, each hit rarely) — but not under TSE 2.0, whose few
//! masks each take more hits than the benign ones: after a ranking, benign packets probe the
//! attack's subtables first. Deterministic (virtual clock), against ORIG directly.

use rqvs_datapath::pmd::Pmd;
use rqvs_datapath::{assign_rule_outputs, Clock, Counters, DatapathConfig, Orig, OrigConfig, BATCH};
use rqvs_experiment::inputs;
use rqvs_flow::FlowKey;
use rqvs_workload::attack::{self, Kind, Params};

/// Distinct benign flows.
const FLOWS: usize = 16;

/// Benign batches alternating with `attack_per_benign` attack batches; returns the benign
/// packets' subtables probed per megaflow hit over the second half of the run (after the
/// rankings of the first).
fn benign_subtables_per_hit(attack: &[FlowKey], attack_per_benign: usize) -> f64 {
    let mut rules = inputs::load_rules(None).unwrap();
    assign_rule_outputs(&mut rules);
    // Benign traffic of a few flows (as real traffic concentrates on few megaflows): its
    // subtables take many hits each.
    let mut benign: Vec<FlowKey> =
        inputs::load_packets(None, 1).unwrap().entries.iter().map(|e| e.key.wire()).collect();
    benign.sort_unstable_by_key(|k| k.nw_src);
    benign.dedup();
    benign.truncate(FLOWS);
    // 0.1 ms of PMD time per packet: a ranking interval (1 s) is 10,000 packets.
    let cfg = DatapathConfig {
        clock: Clock::Virtual { packet_ns: 100_000, upcall_ns: 100_000 },
        emc: false,
        ..DatapathConfig::default()
    };
    let mut dp = Orig::new(&rules, cfg, OrigConfig::default()).unwrap();
    let mut pmd = Pmd::new();
    let (mut seq, mut b, mut a) = (0u64, 0usize, 0usize);
    let (mut probes, mut hits) = (0u64, 0u64);
    let rounds = 2000;
    for round in 0..rounds {
        let batch: Vec<FlowKey> = (0..BATCH).map(|i| benign[(b + i) % benign.len()]).collect();
        b += BATCH;
        let before: Counters = dp.counters();
        pmd.run_batch(&mut dp, &batch, seq);
        seq += BATCH as u64;
        let after = dp.counters();
        if round >= rounds / 2 {
            probes += after.megaflow_subtables - before.megaflow_subtables;
            hits += after.megaflow_hit - before.megaflow_hit;
        }
        for _ in 0..attack_per_benign {
            let batch: Vec<FlowKey> = (0..BATCH).map(|i| attack[(a + i) % attack.len()]).collect();
            a += BATCH;
            pmd.run_batch(&mut dp, &batch, seq);
            seq += BATCH as u64;
        }
    }
    assert!(dp.now_ns() > 5_000_000_000, "the run spans several ranking intervals");
    probes as f64 / hits.max(1) as f64
}

#[test]
fn tse2_pushes_benign_subtables_down_the_ranking_and_tse_does_not() {
    let rules = inputs::load_rules(None).unwrap();
    let gen = |kind, masks| attack::generate(&rules, &Params { masks, ..Params::new(kind, 50_000, 5) }).unwrap().0;
    let clean = benign_subtables_per_hit(&gen(Kind::Flood, 1)[..1], 0);
    // The same attack rate (4 attack packets per benign one) either way.
    let tse = benign_subtables_per_hit(&gen(Kind::Tse, 0), 4);
    let tse2 = benign_subtables_per_hit(&gen(Kind::Tse2, 8), 4);
    eprintln!("benign subtables per megaflow hit: clean {clean:.1}, under tse {tse:.1}, under tse2 {tse2:.1}");
    assert!(
        tse < clean + 2.0,
        "the plain attack's subtables are ranked behind the benign ones: {tse:.1} vs {clean:.1}"
    );
    assert!(tse2 > clean + 6.0, "tse2's 8 subtables are ranked before the benign ones: {tse2:.1} vs {clean:.1}");
}
