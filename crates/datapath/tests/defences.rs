//! The defences against Tuple Space Explosion (a mask limit with its eviction policy, MFCGuard),
//! differentially: with a tiny limit (1–4 masks) and MFCGuard on, on random rules with rule
//! changes mid-run and on the real ClassBench sets, mixed with many-mask traffic
//! ([`common::many_mask_keys`]), every packet's action and rule equal the reference
//! classifier's, the counters sum to packets received, and the subtables never exceed the
//! limit — after every install and every batch boundary. With the revalidator thread, the
//! evictions reach its copy of the megaflows (the journal), so a rule change leaves no stale
//! megaflow. MFCGuard deletes the subtables that hold only drop megaflows and keeps the others.

mod common;

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rqvs_classify::Reference;
use rqvs_datapath::ccache::CcacheConfig;
use rqvs_datapath::orig::{MegaflowDatapath, ModelStage};
use rqvs_datapath::pmd::Pmd;
use rqvs_datapath::revalidator::RevalidatorMode;
use rqvs_datapath::{
    assign_rule_outputs, Ccache, Clock, Counters, DatapathConfig, MaskEviction, MaskLimit, Orig, OrigConfig, BATCH,
};
use rqvs_flow::{formats, FlowKey, Rule, RuleId};
use rqvs_ofproto::{DpAction, NO_RULE};

use common::{interleave, many_mask_keys, random_packets, random_rules};

/// What a checked run found.
#[derive(Debug, Default)]
struct Found {
    /// Packets whose action or rule differs from the reference's.
    bad: usize,
    /// The most subtables seen at any point.
    max_masks: usize,
}

/// Replays `keys` batch by batch, checking every packet against `reference` and the subtables
/// against `limit` after the handler (installs) and after the housekeeping (MFCGuard, sweeps,
/// ranking, model swaps).
fn run_checked<S: ModelStage>(
    dp: &mut MegaflowDatapath<S>,
    reference: &Reference,
    keys: &[FlowKey],
    found: &mut Found,
) {
    let mut pmd = Pmd::new();
    let check = |k: &FlowKey, a: DpAction, r: RuleId, found: &mut Found| {
        let w = reference.lookup_rule(&k.wire());
        if a != DpAction::Lost && (a != DpAction::of_rule(w) || r != w.map_or(NO_RULE, |w| w.id)) {
            found.bad += 1;
        }
    };
    for (b, chunk) in keys.chunks(BATCH).enumerate() {
        let base = b * BATCH;
        let (_, actions) = pmd.receive(dp, chunk, base as u64);
        let actions = actions[..chunk.len()].to_vec();
        let rules = rqvs_datapath::Design::batch_rules(dp).to_vec();
        for (i, k) in chunk.iter().enumerate() {
            if actions[i] != DpAction::Pending {
                check(k, actions[i], rules[i], found);
            }
        }
        let upcalls = pmd.handle(dp).to_vec();
        let upcall_rules = rqvs_datapath::Design::upcall_rules(dp).to_vec();
        for (i, &(seq, a)) in upcalls.iter().enumerate() {
            check(&keys[seq as usize], a, upcall_rules[i], found);
        }
        found.max_masks = found.max_masks.max(dp.dpcls().masks());
        pmd.housekeep(dp);
        found.max_masks = found.max_masks.max(dp.dpcls().masks());
    }
}

/// A random configuration with the defences on: a limit of 1–4 masks, either policy,
/// MFCGuard on most of the time; CCACHE half the time.
struct Config {
    dp: DatapathConfig,
    orig: OrigConfig,
    ccache: Option<CcacheConfig>,
    limit: usize,
}

fn config(rng: &mut StdRng, revalidator: RevalidatorMode) -> Config {
    let limit = rng.random_range(1..=4);
    let eviction = [MaskEviction::LeastHit, MaskEviction::Refuse, MaskEviction::Narrow][rng.random_range(0..3)];
    let orig = OrigConfig {
        cd: rng.random_bool(0.5),
        flow_limit: [50, 200_000][rng.random_range(0..2)],
        idle_ns: 300_000_000,
        revalidator,
        mask_limit: Some(MaskLimit { masks: limit, eviction }),
        mfcguard: rng.random_bool(0.7).then(|| [20_000_000, 200_000_000][rng.random_range(0..2)]),
        ..OrigConfig::default()
    };
    // 4 ms per packet: ranking (the eviction's window), CD decisions, sweeps and MFCGuard all
    // happen within a run.
    let clock = Clock::Virtual { packet_ns: 4_000_000, upcall_ns: 1_000_000 };
    let dp = DatapathConfig {
        emc: rng.random_bool(0.7),
        emc_insert_prob: [1.0, 0.2][rng.random_range(0..2)],
        // Tiny EMCs too: every key's two slots collide with others'.
        emc_entries: rqvs_datapath::emc::EmcEntries::new([2, 64, 8192][rng.random_range(0..3)]).unwrap(),
        clock,
        seed: rng.random(),
        wire_keys: true,
    };
    let ccache = rng.random_bool(0.5).then_some(CcacheConfig {
        train_interval_ns: 50_000_000,
        retrain_threshold: 0.1,
        min_megaflows: 2,
    });
    Config { dp, orig, ccache, limit }
}

/// Three phases (initial rules; held-out rules added; some removed), each a random benign mix
/// with many-mask keys interleaved. With the revalidator thread, each rule change is settled
/// before its phase (one table to check against).
fn run_case(seed: u64, revalidator: RevalidatorMode) -> (Found, Counters, usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let n = rng.random_range(2..40);
    let rules = random_rules(&mut rng, n);
    let (held, initial): (Vec<Rule>, Vec<Rule>) = rules.iter().cloned().partition(|_| rng.random_bool(0.3));
    let cfg = config(&mut rng, revalidator);
    let limit = cfg.limit;
    let (found, c) = match cfg.ccache {
        Some(cc) => phases(&mut rng, Ccache::new(&initial, cfg.dp, cfg.orig, cc).unwrap(), &rules, held, &initial),
        None => phases(&mut rng, Orig::new(&initial, cfg.dp, cfg.orig).unwrap(), &rules, held, &initial),
    };
    (found, c, limit)
}

fn phases<S: ModelStage>(
    rng: &mut StdRng,
    mut dp: MegaflowDatapath<S>,
    rules: &[Rule],
    held: Vec<Rule>,
    initial: &[Rule],
) -> (Found, Counters) {
    let mut found = Found::default();
    let traffic = |rng: &mut StdRng, table: &[Rule]| {
        let benign = random_packets(rng, 40, 300);
        let attack = many_mask_keys(table, rng.random(), 60, rng.random_bool(0.5));
        interleave(&benign, &attack, rng.random_range(1..6))
    };
    let keys = traffic(rng, initial);
    run_checked(&mut dp, &Reference::build(initial).unwrap(), &keys, &mut found);
    dp.train_model_now();
    run_checked(&mut dp, &Reference::build(initial).unwrap(), &keys, &mut found);
    dp.add_rules(held).unwrap();
    dp.settle_revalidation();
    let keys = traffic(rng, rules);
    run_checked(&mut dp, &Reference::build(rules).unwrap(), &keys, &mut found);
    let removed: Vec<RuleId> = rules.iter().filter(|_| rng.random_bool(0.3)).map(|r| r.id).collect();
    dp.remove_rules(&removed);
    dp.settle_revalidation();
    let remaining: Vec<Rule> = rules.iter().filter(|r| !removed.contains(&r.id)).cloned().collect();
    let keys = traffic(rng, &remaining);
    run_checked(&mut dp, &Reference::build(&remaining).unwrap(), &keys, &mut found);
    (found, dp.counters())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn defended_datapath_action_equals_reference(seed in any::<u64>(), thread in any::<bool>()) {
        let mode = if thread { RevalidatorMode::Thread } else { RevalidatorMode::Inline };
        let (found, c, limit) = run_case(seed, mode);
        prop_assert_eq!(found.bad, 0, "action or rule mismatches");
        prop_assert!(found.max_masks <= limit, "{} masks over a limit of {}", found.max_masks, limit);
        prop_assert!(c.outcome_sum_ok(), "{:?}", c);
        prop_assert_eq!(c.lost, 0);
    }
}

#[test]
fn the_defences_act_over_many_cases() {
    // Over many cases, every defence acts, so the property test above checks them.
    let mut total = Counters::default();
    for seed in 0..48 {
        let mode = if seed % 2 == 0 { RevalidatorMode::Inline } else { RevalidatorMode::Thread };
        let (found, c, limit) = run_case(seed, mode);
        assert_eq!(found.bad, 0, "seed {seed}");
        assert!(found.max_masks <= limit, "seed {seed}: {} masks over {limit}", found.max_masks);
        assert!(c.outcome_sum_ok(), "seed {seed}: {c:?}");
        total.masks_evicted += c.masks_evicted;
        total.megaflows_evicted += c.megaflows_evicted;
        total.install_mask_refused += c.install_mask_refused;
        total.install_mask_narrowed += c.install_mask_narrowed;
        total.mfcguard_masks += c.mfcguard_masks;
        total.mfcguard_removed += c.mfcguard_removed;
        total.model_hit += c.model_hit;
        total.emc_hit += c.emc_hit;
        total.cd_hit += c.cd_hit;
        total.deleted_revalidated += c.deleted_revalidated;
    }
    assert!(total.masks_evicted > 0 && total.megaflows_evicted >= total.masks_evicted, "{total:?}");
    assert!(total.install_mask_refused > 0 && total.install_mask_narrowed > 0, "{total:?}");
    assert!(total.mfcguard_masks > 0 && total.mfcguard_removed >= total.mfcguard_masks, "{total:?}");
    assert!(total.model_hit > 0 && total.emc_hit > 0 && total.cd_hit > 0, "{total:?}");
    assert!(total.deleted_revalidated > 0, "{total:?}");
}

/// With no defences, the same many-mask traffic makes many more masks than the limits above:
/// the tests would notice a limit that does nothing.
#[test]
fn many_mask_traffic_makes_many_masks_undefended() {
    let mut rng = StdRng::seed_from_u64(7);
    let rules = random_rules(&mut rng, 30);
    let keys = many_mask_keys(&rules, 1, 200, false);
    assert!(keys.len() >= 20, "{} keys", keys.len());
    let mut dp = Orig::new(&rules, DatapathConfig::default(), OrigConfig::default()).unwrap();
    dp.run_keys(&keys);
    assert!(dp.dpcls().masks() >= 20, "{} masks", dp.dpcls().masks());
}

/// MFCGuard at the datapath: after its interval, the subtables that hold only drop megaflows
/// are gone, every other subtable is kept (a drop megaflow sharing its subtable with an output
/// one stays), and packets keep their actions.
#[test]
fn mfcguard_removes_drop_only_subtables_and_keeps_the_others() {
    let mut rng = StdRng::seed_from_u64(3);
    let rules = random_rules(&mut rng, 30);
    let cfg =
        DatapathConfig { clock: Clock::Virtual { packet_ns: 1_000, upcall_ns: 1_000 }, ..DatapathConfig::default() };
    let orig = OrigConfig { mfcguard: Some(1_000_000_000), ..OrigConfig::default() };
    let mut dp = Orig::new(&rules, cfg, orig).unwrap();
    let mut keys = random_packets(&mut rng, 200, 2000);
    keys.extend(many_mask_keys(&rules, 2, 100, false));
    let reference = Reference::build(&rules).unwrap();
    let mut found = Found::default();
    run_checked(&mut dp, &reference, &keys, &mut found);
    assert_eq!(found.bad, 0);
    // Before the interval: nothing removed yet; both kinds of subtable are there.
    assert_eq!(dp.counters().mfcguard_masks, 0);
    let by_mask = |dp: &Orig| {
        let mut m: std::collections::HashMap<FlowKey, (usize, usize)> = Default::default();
        for e in dp.dpcls().iter() {
            let x = m.entry(e.megaflow.mask).or_default();
            if e.action == DpAction::Drop {
                x.0 += 1
            } else {
                x.1 += 1
            }
        }
        m
    };
    let before = by_mask(&dp);
    let drop_only: Vec<FlowKey> = before.iter().filter(|(_, &(_, out))| out == 0).map(|(m, _)| *m).collect();
    let kept: Vec<FlowKey> = before.iter().filter(|(_, &(_, out))| out > 0).map(|(m, _)| *m).collect();
    assert!(!drop_only.is_empty() && !kept.is_empty(), "{before:?}");
    assert!(before.values().any(|&(d, o)| d > 0 && o > 0), "a subtable mixing drop and output: {before:?}");
    dp.advance_clock(1_000_000_000);
    dp.maintain();
    let after = by_mask(&dp);
    for m in &drop_only {
        assert!(!after.contains_key(m), "drop-only mask {m:?} kept");
    }
    for m in &kept {
        assert_eq!(after.get(m), before.get(m), "mask {m:?} with output megaflows changed");
    }
    let c = dp.counters();
    assert_eq!(c.mfcguard_masks, drop_only.len() as u64);
    assert_eq!(c.mfcguard_removed, drop_only.iter().map(|m| before[m].0 as u64).sum::<u64>());
    assert_eq!(dp.dpcls().masks(), kept.len());
    // The dropped traffic upcalls again and gets its action.
    run_checked(&mut dp, &reference, &keys, &mut found);
    assert_eq!(found.bad, 0);
    assert!(dp.counters().outcome_sum_ok());
}

/// The real ClassBench sets (1K, every seed) with their traces and many-mask traffic
/// interleaved, ORIG and CCACHE, the limit at 4 masks (each policy) and MFCGuard on.
#[test]
fn classbench_with_defences_matches_reference() {
    let Some(dir) = rqvs_testkit::data::classbench_dir() else { return };
    for (i, seed) in rqvs_testkit::data::SEEDS.iter().enumerate() {
        let mut rules = formats::read_rules(&rqvs_testkit::data::rules_path(&dir, seed, "1k")).unwrap();
        assign_rule_outputs(&mut rules);
        let trace: Vec<FlowKey> = formats::trace::read_trace(&rqvs_testkit::data::trace_path(&dir, seed, "1k"))
            .unwrap()
            .into_iter()
            .map(|e| e.key)
            .take(20_000)
            .collect();
        let attack = many_mask_keys(&rules, i as u64, 2_000, false);
        let keys = interleave(&trace, &attack, 4);
        let reference = Reference::build(&rules).unwrap();
        let eviction = [MaskEviction::LeastHit, MaskEviction::Refuse, MaskEviction::Narrow][i % 3];
        let orig = OrigConfig {
            mask_limit: Some(MaskLimit { masks: 4, eviction }),
            mfcguard: Some(5_000_000),
            ..OrigConfig::default()
        };
        let cfg = DatapathConfig {
            emc_insert_prob: 0.2,
            clock: Clock::Virtual { packet_ns: 10_000, upcall_ns: 20_000 },
            ..DatapathConfig::default()
        };
        let mut found = Found::default();
        let c = if i % 2 == 1 {
            let cc = CcacheConfig { train_interval_ns: 20_000_000, min_megaflows: 16, ..CcacheConfig::default() };
            let mut dp = Ccache::new(&rules, cfg, orig, cc).unwrap();
            run_checked(&mut dp, &reference, &keys, &mut found);
            dp.counters()
        } else {
            let mut dp = Orig::new(&rules, cfg, orig).unwrap();
            run_checked(&mut dp, &reference, &keys, &mut found);
            dp.counters()
        };
        eprintln!(
            "{seed}_1k {}: {} packets ({} many-mask), {} masks evicted ({} megaflows), {} refused, {} narrowed, mfcguard {} masks",
            eviction.name(),
            c.received,
            attack.len(),
            c.masks_evicted,
            c.megaflows_evicted,
            c.install_mask_refused,
            c.install_mask_narrowed,
            c.mfcguard_masks
        );
        assert_eq!(found.bad, 0, "{seed}_1k: mismatches");
        assert!(found.max_masks <= 4, "{seed}_1k: {} masks", found.max_masks);
        assert!(c.outcome_sum_ok(), "{seed}_1k: {c:?}");
        assert_eq!(c.received, keys.len() as u64);
        assert!(attack.len() > 50, "{seed}_1k: {} many-mask keys", attack.len());
        assert!(c.masks_evicted + c.install_mask_refused + c.install_mask_narrowed > 0, "{seed}_1k: {c:?}");
    }
}
