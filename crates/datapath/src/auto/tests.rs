//! Tests of the adaptive design: switches forced or requested mid-run keep every action and
//! counter, upcalls parked at a handler cross a swap, no packet is lost across one, low coverage
//! moves CFLOWS to TupleMerge alone, attack keys explode ORIG's masks, and a property test
//! interleaves random rule changes, attacks and switches.

use super::*;
use crate::ccache::CcacheConfig;
use crate::testutil::{attack_keys, expect, expect_rules, keys, rules};
use crate::{Ccache, Cflows, CflowsConfig, DatapathConfig, Orig, OrigConfig, BATCH};
use rqvs_classify::nuevomatch::live::Policy;
use std::sync::Arc;

pub(super) fn virtual_cfg() -> DatapathConfig {
    DatapathConfig {
        emc_insert_prob: 0.2,
        clock: Clock::Virtual { packet_ns: 100, upcall_ns: 2000 },
        ..DatapathConfig::default()
    }
}

pub(super) fn builder(policy: Policy) -> Builder {
    Arc::new(move |to: Target, rules: &[Rule]| -> Result<Box<dyn Design + Send>, ClassifierError> {
        let cfg = virtual_cfg();
        let cc = CcacheConfig { train_interval_ns: 10_000, min_megaflows: 8, ..CcacheConfig::default() };
        let classifier =
            if to.tm_alone { crate::CflowsClassifier::TupleMerge } else { crate::CflowsClassifier::NuevoMatch };
        Ok(match to.kind {
            DesignKind::Orig => Box::new(Orig::new(rules, cfg, OrigConfig::default())?),
            DesignKind::Ccache => Box::new(Ccache::new(rules, cfg, OrigConfig::default(), cc)?),
            DesignKind::Cflows => Box::new(Cflows::new(
                rules,
                cfg,
                CflowsConfig { policy, retrain_threshold: 0.05, classifier, ..CflowsConfig::default() },
            )?),
            DesignKind::Auto => return Err(ClassifierError::Config("fixed designs only".into())),
        })
    })
}

/// Thresholds that always want to leave: ORIG/CCACHE → CFLOWS on any window, CFLOWS → ORIG
/// on any window; short windows and dwell.
pub(super) fn flapping(initial: DesignKind) -> AutoConfig {
    AutoConfig {
        initial: Some(initial),
        window_ns: 20_000,
        min_window_packets: 32,
        min_dwell_ns: 50_000,
        to_cflows_upcall_share: 0.0,
        leave_cflows_coverage: 2.0,
        leave_cflows_emc_share: 0.0,
        ..AutoConfig::default()
    }
}

/// Runs `keys` batch by batch; every packet's final action and attribution must be the
/// reference's over the rules visible at its batch (not staged; the visible set changes at
/// a swap or a model swap, in housekeeping, between batches).
fn check(dp: &mut Auto, live: &[Rule], keys: &[FlowKey], at: &str) {
    let mut pmd = crate::pmd::Pmd::new();
    let mut epoch = None;
    let (mut want, mut winners) = (Vec::new(), Vec::new());
    for (b, chunk) in keys.chunks(BATCH).enumerate() {
        let (e0, s0) = (dp.visible_epoch(), dp.report_now().design_switches);
        if epoch != Some(e0) {
            let staged = dp.staged_rules();
            let visible: Vec<Rule> = live.iter().filter(|r| !staged.contains(&r.id)).cloned().collect();
            (want, winners) = (expect(&visible, keys), expect_rules(&visible, keys));
            epoch = Some(e0);
        }
        let base = b * BATCH;
        let (_, actions) = pmd.receive(dp, chunk, base as u64);
        let actions = actions.to_vec();
        let rules = dp.batch_rules().to_vec();
        for (i, a) in actions.iter().enumerate() {
            assert_ne!(*a, DpAction::Lost, "{at}: batch {b}");
            if *a != DpAction::Pending {
                assert_eq!((*a, rules[i]), (want[base + i], winners[base + i]), "{at}: batch {b} packet {i}");
            }
        }
        let upcalls = pmd.handle(dp).to_vec();
        let urules = dp.upcall_rules().to_vec();
        assert_eq!(upcalls.len(), actions.iter().filter(|a| **a == DpAction::Pending).count(), "{at}: batch {b}");
        for (i, &(seq, a)) in upcalls.iter().enumerate() {
            let q = seq as usize;
            assert_eq!((a, urules[i]), (want[q], winners[q]), "{at}: batch {b} upcall {seq}");
        }
        pmd.housekeep(dp);
        // Every swap is a new epoch (the verification window never spans one).
        let (e1, s1) = (dp.visible_epoch(), dp.report_now().design_switches);
        assert!(e1 >= e0 + (s1 - s0), "{at}: epochs {e0} -> {e1} over {} swaps", s1 - s0);
        assert!(dp.oldest_epoch() <= e1);
    }
    let c = dp.counters();
    assert!(c.outcome_sum_ok(), "{at}: {c:?}");
}

/// Switches forced in each direction (ORIG → CFLOWS → ORIG → ..., CCACHE → CFLOWS), with rule
/// changes between the runs and while a candidate waits: every packet's action is the
/// reference's, counters sum to the packets received, the time per design adds up to the
/// PMD clock.
#[test]
fn forced_switches_keep_every_action_and_counters() {
    let pool = rules(400);
    let ks = keys(4000, 3);
    for initial in [DesignKind::Orig, DesignKind::Ccache, DesignKind::Cflows] {
        let mut live: Vec<Rule> = pool[..300].to_vec();
        let mut dp = Auto::new(&live, virtual_cfg().clock, true, flapping(initial), builder(Policy::Instant)).unwrap();
        let mut sent = 0u64;
        for step in 0..8 {
            check(&mut dp, &live, &ks, &format!("{initial:?} step {step}"));
            sent += ks.len() as u64;
            // A candidate built now takes the change below from the journal.
            let to = DesignKind::ALL[(step + 1) % 3];
            dp.request(to, "test");
            if step % 2 == 0 {
                let add: Vec<Rule> = pool[300 + step * 10..310 + step * 10].to_vec();
                live.extend(add.iter().cloned());
                dp.add_rules(add).unwrap();
            } else {
                let gone: Vec<RuleId> = live.iter().skip(step * 7).step_by(29).map(|r| r.id).collect();
                live.retain(|r| !gone.contains(&r.id));
                dp.remove_rules(&gone);
            }
        }
        let r = dp.report_now();
        let c = dp.counters();
        assert_eq!(c.received, sent);
        assert!(c.outcome_sum_ok(), "{c:?}");
        assert_eq!(r.time_ns.iter().sum::<u64>(), dp.now_ns(), "{r:?}");
        assert!(r.design_switches >= 4, "{initial:?}: {r:?}");
        assert!(r.log.iter().any(|e| e.to == DesignKind::Cflows), "{r:?}");
        assert!(r.log.iter().any(|e| e.from == DesignKind::Cflows && e.to == DesignKind::Orig), "{r:?}");
        // The warm-up ran: a new ORIG was given the recent flows' megaflows.
        assert!(r.log.iter().filter(|e| e.to == DesignKind::Orig).all(|e| e.preinstalled > 0), "{r:?}");
    }
}

/// A request made while a candidate is being built is not lost: the latest one is acted on
/// once the candidate is swapped in (ORIG → CFLOWS requested, then CCACHE while CFLOWS is
/// building: CCACHE is where it ends), and a request for the design being built changes
/// nothing. The thresholds never switch on their own here.
#[test]
fn a_request_while_switching_is_kept() {
    let rs = rules(300);
    let ks = keys(4000, 7);
    for policy in [Policy::Instant, Policy::Delayed] {
        let cfg = AutoConfig { initial: Some(DesignKind::Orig), ..AutoConfig::default() };
        let mut dp = Auto::new(&rs, virtual_cfg().clock, true, cfg, builder(policy)).unwrap();
        dp.request(DesignKind::Cflows, "first");
        assert!(dp.switching());
        dp.request(DesignKind::Cflows, "the same again");
        dp.request(DesignKind::Ccache, "second");
        check(&mut dp, &rs, &ks, &format!("{policy:?}"));
        let r = dp.report_now();
        let moves: Vec<(DesignKind, DesignKind, &str)> =
            r.log.iter().map(|e| (e.from, e.to, e.reason.as_str())).collect();
        assert_eq!(
            moves,
            [(DesignKind::Orig, DesignKind::Cflows, "first"), (DesignKind::Cflows, DesignKind::Ccache, "second")],
            "{policy:?}"
        );
        assert_eq!(dp.current(), DesignKind::Ccache);
        assert!(!dp.switching());
        // A request back to the design being left, made while switching, returns to it.
        dp.request(DesignKind::Orig, "third");
        dp.request(DesignKind::Ccache, "stay");
        check(&mut dp, &rs, &ks, &format!("{policy:?} back"));
        let r = dp.report_now();
        assert_eq!(r.design_switches, 4, "{policy:?}: {r:?}");
        assert_eq!(dp.current(), DesignKind::Ccache);
    }
}

/// Upcalls at a handler thread across a swap (the switch's arrangement): they go back to
/// the design that handed them out, which gives each its action and counts it; it is
/// retired with the last. Every packet gets the reference's action, counters sum to the
/// packets received, and no second swap happens while one design drains.
#[test]
fn upcalls_at_a_handler_cross_a_swap() {
    let rs = rules(300);
    let ks = keys(4000, 11);
    let want = expect(&rs, &ks);
    let table = rqvs_ofproto::OfprotoTable::build(&rs).unwrap();
    for to in [DesignKind::Cflows, DesignKind::Ccache] {
        let cfg = AutoConfig { initial: Some(DesignKind::Orig), ..AutoConfig::default() };
        let mut dp = Auto::new(&rs, virtual_cfg().clock, true, cfg, builder(Policy::Instant)).unwrap();
        let mut held: Vec<Upcall> = Vec::new();
        let mut out = [DpAction::Drop; BATCH];
        for (b, chunk) in ks.chunks(BATCH).enumerate() {
            let seq0 = (b * BATCH) as u64;
            dp.process_batch(chunk, seq0, &mut out[..chunk.len()]);
            for (i, a) in out[..chunk.len()].iter().enumerate() {
                assert_ne!(*a, DpAction::Lost);
                if *a != DpAction::Pending {
                    assert_eq!(*a, want[b * BATCH + i], "{to:?}: batch {b} packet {i}");
                }
            }
            dp.take_upcalls(&mut held);
            // The handler answers every other batch. The switch is asked for at batch 20,
            // upcalls out; and back at once: that swap waits until the first design drained.
            if b % 2 == 1 {
                for u in held.drain(..) {
                    let a = dp.complete_upcall(&u, Some(&table.classify(&u.key)), true);
                    assert_eq!(a, want[u.seq as usize], "{to:?}: upcall {}", u.seq);
                }
            }
            if b == 20 {
                assert!(!held.is_empty());
                dp.request(to, "test");
                dp.maintain();
                assert_eq!((dp.current(), dp.draining.is_some()), (to, true));
                dp.request(DesignKind::Orig, "back");
                dp.maintain();
                assert_eq!(dp.report_now().design_switches, 1, "{to:?}: swapped while draining");
            }
            dp.maintain();
        }
        for u in held.drain(..) {
            assert_eq!(dp.complete_upcall(&u, Some(&table.classify(&u.key)), true), want[u.seq as usize]);
        }
        let r = dp.report_now();
        assert_eq!(r.design_switches, 2, "{to:?}: {r:?}");
        assert!(dp.draining.is_none());
        let c = dp.counters();
        assert_eq!(c.received, ks.len() as u64);
        assert!(c.outcome_sum_ok(), "{to:?}: {c:?}");
        assert_eq!(c.tx + c.dropped_by_action, c.received - c.lost, "{to:?}: {c:?}");
    }
}

/// With a coverage threshold above what the learned classifier reaches, CFLOWS moves to
/// CFLOWS with TupleMerge alone, once (no reversal: TupleMerge alone has no coverage to
/// measure), logged with its reason, every action the reference's throughout.
#[test]
fn low_coverage_moves_cflows_to_tuple_merge_alone() {
    let rs = rules(300);
    let ks = keys(4000, 13);
    let cfg = AutoConfig {
        initial: Some(DesignKind::Cflows),
        window_ns: 20_000,
        min_window_packets: 32,
        min_dwell_ns: 50_000,
        leave_cflows_emc_share: f64::INFINITY,
        cflows_tm_coverage: 2.0,
        ..AutoConfig::default()
    };
    let mut dp = Auto::new(&rs, virtual_cfg().clock, true, cfg, builder(Policy::Instant)).unwrap();
    for step in 0..4 {
        check(&mut dp, &rs, &ks, &format!("step {step}"));
    }
    let r = dp.report_now();
    assert_eq!(r.design_switches, 1, "{r:?}");
    let e = &r.log[0];
    assert_eq!((e.from, e.to, e.to_tm_alone, r.tm_alone), (DesignKind::Cflows, DesignKind::Cflows, true, true));
    assert!(e.reason.contains("TupleMerge alone"), "{}", e.reason);
    assert_eq!(dp.counters().model_entries, 0, "TupleMerge alone has no learned index");
}

/// A batch-level check: no batch loses a packet across a swap (none is `Lost`, every
/// `Pending` one comes back from the handler).
#[test]
fn no_packet_is_lost_across_a_swap() {
    let rs = rules(300);
    let ks = keys(6000, 9);
    let mut dp =
        Auto::new(&rs, virtual_cfg().clock, true, flapping(DesignKind::Cflows), builder(Policy::Delayed)).unwrap();
    let mut pmd = crate::pmd::Pmd::new();
    let want = expect(&rs, &ks);
    for (b, chunk) in ks.chunks(BATCH).enumerate() {
        let o = pmd.run_batch(&mut dp, chunk, (b * BATCH) as u64);
        let mut pending = 0;
        for (i, a) in o.actions.iter().enumerate() {
            assert_ne!(*a, DpAction::Lost);
            if *a == DpAction::Pending {
                pending += 1;
            } else {
                assert_eq!(*a, want[b * BATCH + i], "batch {b} packet {i}");
            }
        }
        assert_eq!(o.upcalls.len(), pending, "batch {b}");
        for &(s, a) in o.upcalls {
            assert_eq!(a, want[s as usize]);
        }
    }
    assert!(dp.report_now().design_switches >= 2);
}

#[derive(Clone, Debug)]
enum Op {
    Batches(usize),
    Add(usize),
    Remove(usize),
    Switch(usize),
    /// Batches of many-mask packets ([`attack_keys`]).
    Attack(usize),
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        (1usize..40).prop_map(Op::Batches),
        (1usize..20).prop_map(Op::Add),
        (1usize..20).prop_map(Op::Remove),
        (0usize..3).prop_map(Op::Switch),
        (1usize..20).prop_map(Op::Attack),
    ]
}

/// The property test's attack is one: in ORIG its packets make several times (4× here) the megaflow
/// masks of the same number of benign packets.
#[test]
fn attack_keys_explode_the_megaflow_masks() {
    let live = rules(150);
    let masks = |ks: &[FlowKey]| {
        let mut dp = Orig::new(&live, virtual_cfg(), OrigConfig::default()).unwrap();
        let mut pmd = crate::pmd::Pmd::new();
        for (b, chunk) in ks.chunks(BATCH).enumerate() {
            pmd.run_batch(&mut dp, chunk, (b * BATCH) as u64);
        }
        dp.counters().masks
    };
    let (benign, attack) = (masks(&keys(3000, 7)), masks(&attack_keys(3000, 7)));
    assert!(attack >= 3 * benign, "attack {attack} masks, benign {benign}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
    /// Random rule changes, attack traffic and design switches (forced, and by flapping
    /// thresholds) interleaved under both policies: every packet's action is the
    /// reference's over the visible rules, and the counters sum to the packets received.
    #[test]
    fn random_changes_and_switches(ops in proptest::collection::vec(op(), 1..24), delayed: bool, salt in 0u32..1000) {
        let pool = rules(300);
        let ks = keys(3000, salt);
        let attack = attack_keys(3000, salt);
        let mut at_attack = 0usize;
        let policy = if delayed { Policy::Delayed } else { Policy::Instant };
        let mut live: Vec<Rule> = pool[..150].to_vec();
        let mut next = 150;
        let mut dp = Auto::new(&live, virtual_cfg().clock, true, flapping(DesignKind::Orig), builder(policy)).unwrap();
        let mut sent = 0u64;
        let mut at = 0usize;
        for (i, o) in ops.iter().enumerate() {
            match *o {
                Op::Batches(n) => {
                    let n = (n * BATCH).min(ks.len() - at);
                    check(&mut dp, &live, &ks[at..at + n], &format!("op {i}"));
                    sent += n as u64;
                    at = (at + n) % (ks.len() - BATCH);
                }
                Op::Add(n) => {
                    let add: Vec<Rule> = pool[next.min(pool.len())..(next + n).min(pool.len())].to_vec();
                    next += n;
                    live.extend(add.iter().cloned());
                    dp.add_rules(add).unwrap();
                }
                Op::Remove(n) => {
                    let gone: Vec<RuleId> = live.iter().step_by(live.len().max(1) / n.max(1) + 1).map(|r| r.id).collect();
                    live.retain(|r| !gone.contains(&r.id));
                    dp.remove_rules(&gone);
                }
                Op::Switch(k) => dp.request(DesignKind::ALL[k], "proptest"),
                Op::Attack(n) => {
                    let n = (n * BATCH).min(attack.len() - at_attack);
                    check(&mut dp, &live, &attack[at_attack..at_attack + n], &format!("op {i} (attack)"));
                    sent += n as u64;
                    at_attack = (at_attack + n) % (attack.len() - BATCH);
                }
            }
        }
        let c = dp.counters();
        proptest::prop_assert_eq!(c.received, sent);
        proptest::prop_assert!(c.outcome_sum_ok(), "{:?}", c);
    }
}
