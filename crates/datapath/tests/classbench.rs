//! The megaflow property on the real ClassBench sets: every packet of the 12 seeds' 1K traces and
//! a stride of the 10K traces, replayed in order through the ORIG datapath (EMC insertion 1/5,
//! with and without the cuckoo distributor), gets the action of the reference classifier's winning
//! rule and the slow path's action. Counters sum exactly. The learned designs (CCACHE with a
//! model retrained as megaflows accumulate — every 10K packets at most —, and CFLOWS) are held to
//! the same: every packet's action equals the reference's. In every design each packet is
//! attributed to the reference's winning rule (what the switch's per-flow counters count).

// One copy, shared by the crates whose tests read the ClassBench data.
use rqvs_testkit::data as shared_data;

use rqvs_classify::Reference;
use rqvs_datapath::ccache::CcacheConfig;
use rqvs_datapath::{
    assign_rule_outputs, pmd, Ccache, Cflows, CflowsConfig, Clock, DatapathConfig, Design, Orig, OrigConfig,
};
use rqvs_flow::{formats, RuleId};
use rqvs_ofproto::{DpAction, NO_RULE};
use shared_data::{classbench_dir, rules_path, trace_path, SEEDS};

fn check(size: &str, stride: usize, cd: bool) {
    let Some(dir) = classbench_dir() else { return };
    for seed in SEEDS {
        let mut rules = formats::read_rules(&rules_path(&dir, seed, size)).unwrap();
        assign_rule_outputs(&mut rules);
        let keys: Vec<_> =
            formats::trace::read_trace(&trace_path(&dir, seed, size)).unwrap().into_iter().map(|e| e.key).collect();
        let cfg = DatapathConfig {
            emc_insert_prob: 0.2,
            clock: Clock::Virtual { packet_ns: 100, upcall_ns: 20_000 },
            ..DatapathConfig::default()
        };
        let mut dp = Orig::new(&rules, cfg, OrigConfig { cd, ..OrigConfig::default() }).unwrap();
        let (got, attributed) = pmd::run_keys_with_rules(&mut dp, &keys);
        let reference = Reference::build(&rules).unwrap();
        let mut bad = 0;
        let mut checked = 0;
        for (i, ((k, a), r)) in keys.iter().zip(&got).zip(&attributed).enumerate() {
            if i % stride == 0 {
                if *a != dp.table().classify(&k.wire()).action {
                    bad += 1;
                }
                checked += 1;
                let winner = reference.lookup_rule(&k.wire());
                if *a != DpAction::of_rule(winner) || *r != winner.map_or(NO_RULE, |w| w.id) {
                    bad += 1;
                }
            }
        }
        let c = dp.counters();
        assert_eq!(bad, 0, "{seed}_{size}: {bad} action or rule mismatches ({checked} checked against the reference)");
        assert!(c.outcome_sum_ok(), "{seed}_{size}: {c:?}");
        assert_eq!(c.received, keys.len() as u64);
        assert_eq!(c.lost, 0);
        assert!(c.upcall > 0 && c.megaflow_hit + c.emc_hit + c.cd_hit > 0, "{seed}_{size}: {c:?}");
        eprintln!(
            "{seed}_{size} cd={cd}: {} packets, emc {} cd {} megaflow {} upcall {}, {} megaflows, {} masks, {:.1} subtables/hit",
            c.received,
            c.emc_hit,
            c.cd_hit,
            c.megaflow_hit,
            c.upcall,
            c.megaflows,
            c.masks,
            c.avg_subtables_per_hit()
        );
    }
}

#[test]
fn every_packet_of_the_1k_traces() {
    check("1k", 1, false);
}

#[test]
fn every_packet_of_the_1k_traces_with_cd() {
    check("1k", 1, true);
}

#[test]
fn stride_of_the_10k_traces() {
    check("10k", 7, true);
}

fn check_learned(size: &str, stride: usize) {
    let Some(dir) = classbench_dir() else { return };
    for seed in SEEDS {
        let mut rules = formats::read_rules(&rules_path(&dir, seed, size)).unwrap();
        assign_rule_outputs(&mut rules);
        let keys: Vec<_> = formats::trace::read_trace(&trace_path(&dir, seed, size))
            .unwrap()
            .into_iter()
            .map(|e| e.key)
            .step_by(stride)
            .collect();
        let reference = Reference::build(&rules).unwrap();
        let want: Vec<DpAction> = keys.iter().map(|k| DpAction::of_rule(reference.lookup_rule(&k.wire()))).collect();
        let winners: Vec<RuleId> =
            keys.iter().map(|k| reference.lookup_rule(&k.wire()).map_or(NO_RULE, |r| r.id)).collect();
        let cfg = DatapathConfig {
            emc_insert_prob: 0.2,
            clock: Clock::Virtual { packet_ns: 100, upcall_ns: 20_000 },
            ..DatapathConfig::default()
        };
        let ccache = CcacheConfig { train_interval_ns: 1_000_000, ..CcacheConfig::default() };
        let designs: Vec<Box<dyn Design>> = vec![
            Box::new(Ccache::new(&rules, cfg, OrigConfig::default(), ccache).unwrap()),
            Box::new(Cflows::new(&rules, cfg, CflowsConfig::default()).unwrap()),
        ];
        for mut d in designs {
            // Twice: the second pass meets trained models and warm caches.
            for pass in 0..2 {
                let (got, attributed) = pmd::run_keys_with_rules(d.as_mut(), &keys);
                let bad = got.iter().zip(&want).filter(|(a, b)| a != b).count()
                    + attributed.iter().zip(&winners).filter(|(a, b)| a != b).count();
                let c = d.counters();
                assert_eq!(bad, 0, "{seed}_{size} {} pass {pass}: {bad} of {} mismatch", d.name(), keys.len());
                assert!(c.outcome_sum_ok(), "{seed}_{size} {}: {c:?}", d.name());
            }
            let c = d.counters();
            assert!(c.model_hit > 0, "{seed}_{size} {}: the model served nothing: {c:?}", d.name());
            eprintln!(
                "{seed}_{size} {}: emc {} megaflow {} model {} remainder {} upcall {}, model entries {}, swaps {}",
                d.name(),
                c.emc_hit,
                c.megaflow_hit,
                c.model_hit,
                c.remainder_hit,
                c.upcall,
                c.model_entries,
                c.model_swaps
            );
        }
    }
}

#[test]
fn learned_designs_every_packet_of_the_1k_traces() {
    check_learned("1k", 1);
}

#[test]
fn learned_designs_stride_of_the_10k_traces() {
    check_learned("10k", 7);
}
