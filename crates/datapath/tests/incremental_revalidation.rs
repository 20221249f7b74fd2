//! Incremental revalidation ([`rqvs_datapath::revalidator`], *Incremental revalidation*): a rule
//! change re-checks only the megaflows whose region meets a changed rule's match, and the
//! megaflow cache stays exact.
//!
//! - Differentially, on random overlapping rule sets with random priorities, traffic interleaved
//!   with change sets of one to three flow-mods (adds, strict deletes, modifies: a rule replaced
//!   by one with the same match and priority and another action): after every change set every
//!   packet's answer (action and rule) equals the reference classifier's, and every megaflow left
//!   is exact over its region — for ORIG and CCACHE, revalidating inline and on the thread.
//! - A change re-checks fewer megaflows than are installed when it meets few of them (and at
//!   least the ones it meets).
//! - A two-table pipeline whose first table rewrites the key before the second looks it up: a
//!   change to table 1 meets no megaflow's region on the wire key, yet must re-check them all;
//!   every answer equals a fresh translation after each change.

mod common;

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rqvs_classify::Reference;
use rqvs_datapath::ccache::CcacheConfig;
use rqvs_datapath::orig::{MegaflowDatapath, ModelStage};
use rqvs_datapath::pmd::run_keys_with_rules;
use rqvs_datapath::revalidator::RevalidatorMode;
use rqvs_datapath::{Ccache, Clock, DatapathConfig, Orig, OrigConfig};
use rqvs_flow::field::FIELDS;
use rqvs_flow::{Action, Actions, FlowKey, Match, Rule, RuleId};
use rqvs_ofproto::table::{Changes, RuleChange};
use rqvs_ofproto::{DpAction, OfprotoTable, NO_RULE};

fn config() -> DatapathConfig {
    DatapathConfig {
        emc: true,
        emc_insert_prob: 1.0,
        clock: Clock::Virtual { packet_ns: 1_000, upcall_ns: 1_000 },
        ..DatapathConfig::default()
    }
}

fn orig_config(mode: RevalidatorMode) -> OrigConfig {
    OrigConfig { revalidator: mode, ..OrigConfig::default() }
}

const CCACHE: CcacheConfig = CcacheConfig { train_interval_ns: 50_000_000, retrain_threshold: 0.1, min_megaflows: 2 };

/// Packets whose answer (action or rule) differs from the reference over `rules`.
fn mismatches<S: ModelStage>(dp: &mut MegaflowDatapath<S>, rules: &[Rule], keys: &[FlowKey]) -> usize {
    let reference = Reference::build(rules).unwrap();
    let (got, winners) = run_keys_with_rules(dp, keys);
    keys.iter()
        .zip(&got)
        .zip(&winners)
        .filter(|((k, a), r)| {
            let want = reference.lookup_rule(&k.wire());
            **a != DpAction::Lost && (**a != DpAction::of_rule(want) || **r != want.map_or(NO_RULE, |w| w.id))
        })
        .count()
}

/// Megaflows not exact over their region: their key, and packets equal to it on the mask's bits
/// and to one of `others` elsewhere, must get the megaflow's action and rule from the reference.
fn inexact_megaflows<S: ModelStage>(dp: &MegaflowDatapath<S>, rules: &[Rule], others: &[FlowKey]) -> usize {
    let reference = Reference::build(rules).unwrap();
    dp.dpcls()
        .iter()
        .filter(|e| {
            let (k, m) = (e.key.to_words(), e.megaflow.mask.to_words());
            std::iter::once(e.key)
                .chain(others.iter().map(|o| {
                    let o = o.wire().to_words();
                    FlowKey::from_words(&std::array::from_fn(|i| (k[i] & m[i]) | (o[i] & !m[i])))
                }))
                .any(|p| {
                    let want = reference.lookup_rule(&p);
                    DpAction::of_rule(want) != e.action || want.map(|w| w.id) != e.rule
                })
        })
        .count()
}

/// One random change set of 1–3 flow-mods over `table` (the rules installed), drawing new rules
/// from `pool`; applies it to `table` and returns it.
fn change_set(rng: &mut StdRng, table: &mut Vec<Rule>, pool: &mut Vec<Rule>, next_id: &mut u32) -> Vec<RuleChange> {
    let mut changes = Vec::new();
    for _ in 0..rng.random_range(1..=3) {
        match rng.random_range(0..3) {
            0 if !pool.is_empty() => {
                let mut r = pool.swap_remove(rng.random_range(0..pool.len()));
                r.id = RuleId(*next_id);
                *next_id += 1;
                r.priority = rng.random_range(0..20);
                table.push(r.clone());
                changes.push(RuleChange::Add(r));
            }
            1 if !table.is_empty() => {
                let r = table.swap_remove(rng.random_range(0..table.len()));
                changes.push(RuleChange::Remove(r.id));
                pool.push(r);
            }
            _ if !table.is_empty() => {
                // Modify: same id, match and priority, another action.
                let i = rng.random_range(0..table.len());
                let mut r = table[i].clone();
                r.actions = if matches!(r.actions.0.first(), Some(Action::Output(_))) {
                    Actions::drop()
                } else {
                    Actions::output(1 + rng.random_range(0..8u32))
                };
                table[i] = r.clone();
                changes.push(RuleChange::Remove(r.id));
                changes.push(RuleChange::Add(r));
            }
            _ => {}
        }
    }
    changes
}

/// Runs traffic and change sets alternately; returns (answer mismatches, inexact megaflows,
/// megaflows re-checked, megaflows installed at the changes: what full passes would re-check).
fn interleaved<S: ModelStage>(
    rng: &mut StdRng,
    mut dp: MegaflowDatapath<S>,
    table: OfprotoTable,
    mut rules: Vec<Rule>,
    mut pool: Vec<Rule>,
    threaded: bool,
) -> (usize, usize, u64, u64) {
    let keys = common::random_packets(rng, 80, 400);
    let others = common::random_packets(rng, 40, 8);
    let mut next_id = 10_000;
    let (mut bad, mut inexact, mut checked, mut full) = (0, 0, 0, 0);
    for step in 0..24 {
        let batch: Vec<FlowKey> = (0..64).map(|_| keys[rng.random_range(0..keys.len())]).collect();
        bad += mismatches(&mut dp, &rules, &batch);
        if step % 2 == 1 {
            dp.train_model_now();
        }
        let changes = change_set(rng, &mut rules, &mut pool, &mut next_id);
        full += dp.dpcls().len() as u64;
        table.commit(changes).unwrap();
        dp.table_changed();
        if threaded {
            dp.settle_revalidation();
            checked += dp.take_revalidations().iter().map(|r| r.checked).sum::<u64>();
        }
        inexact += inexact_megaflows(&dp, &rules, &others);
        bad += mismatches(&mut dp, &rules, &keys);
    }
    if !threaded {
        checked = dp.revalidation_checks();
    }
    (bad, inexact, checked, full)
}

fn interleaved_case(seed: u64, ccache: bool, mode: RevalidatorMode) -> (usize, usize, u64, u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let n = rng.random_range(4..40);
    let mut all = common::random_rules(&mut rng, n);
    let pool = all.split_off(n / 2);
    let table = OfprotoTable::build(&all).unwrap();
    let threaded = mode == RevalidatorMode::Thread;
    if ccache {
        let dp = Ccache::with_table(table.clone(), config(), orig_config(mode), CCACHE);
        interleaved(&mut rng, dp, table, all, pool, threaded)
    } else {
        let dp = Orig::with_table(table.clone(), config(), orig_config(mode));
        interleaved(&mut rng, dp, table, all, pool, threaded)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn interleaved_flow_mods_keep_every_answer_exact(seed in any::<u64>()) {
        for ccache in [false, true] {
            for mode in [RevalidatorMode::Inline, RevalidatorMode::Thread] {
                let (bad, inexact, checked, full) = interleaved_case(seed, ccache, mode);
                prop_assert_eq!(bad, 0, "answers differ (ccache {}, {:?})", ccache, mode);
                prop_assert_eq!(inexact, 0, "megaflows not exact (ccache {}, {:?})", ccache, mode);
                prop_assert!(checked <= full, "re-checked {} of {} (ccache {}, {:?})", checked, full, ccache, mode);
            }
        }
    }
}

/// 64 rules on 10.0.x.0/24 destinations (one per x), each to its own port.
fn block_rules() -> Vec<Rule> {
    (0..64u32)
        .map(|x| {
            let (mut v, mut m) = (FlowKey::default(), FlowKey::default());
            v.dl_type = 0x0800;
            m.dl_type = 0xffff;
            v.nw_dst = 0x0a00_0000 | (x << 8);
            m.nw_dst = 0xffff_ff00;
            Rule::new(x, 10, Match::from_masked(v, m), Actions::output(1 + x % 8))
        })
        .collect()
}

fn block_keys() -> Vec<FlowKey> {
    (0..64u32 * 8)
        .map(|i| FlowKey::ipv4(0xc0a8_0001 + i % 5, 0x0a00_0000 | ((i / 8) << 8) | (i % 8), 6, 1000, 80))
        .collect()
}

/// A higher-priority rule on 10.0.5.0/24 from one source.
fn narrow_rule(id: u32) -> Rule {
    let (mut v, mut m) = (FlowKey::default(), FlowKey::default());
    v.dl_type = 0x0800;
    m.dl_type = 0xffff;
    v.nw_dst = 0x0a00_0500;
    m.nw_dst = 0xffff_ff00;
    v.nw_src = 0xc0a8_0001;
    m.nw_src = u32::MAX;
    Rule::new(id, 20, Match::from_masked(v, m), Actions::drop())
}

#[test]
fn a_flow_mod_rechecks_only_the_megaflows_it_meets() {
    let rules = block_rules();
    let keys = block_keys();
    for mode in [RevalidatorMode::Inline, RevalidatorMode::Thread] {
        let table = OfprotoTable::build(&rules).unwrap();
        let mut dp = Orig::with_table(table.clone(), config(), orig_config(mode));
        assert_eq!(mismatches(&mut dp, &rules, &keys), 0);
        let installed = dp.dpcls().len() as u64;
        // The megaflows on 10.0.5.0/24: the only ones the new rule meets.
        let meeting = dp.dpcls().iter().filter(|e| e.key.nw_dst >> 8 == 0x0a_0005).count() as u64;
        assert!(installed >= 64 && meeting >= 1, "{installed} {meeting}");
        let (version, _) = table.commit(vec![RuleChange::Add(narrow_rule(100))]).unwrap();
        assert_eq!(table.read().changes_since(version - 1), Changes::Rules(vec![narrow_rule(100).matches]));
        dp.table_changed();
        dp.settle_revalidation();
        let checked = match mode {
            RevalidatorMode::Inline => dp.revalidation_checks(),
            RevalidatorMode::Thread => {
                let r = dp.take_revalidations();
                assert_eq!(r.iter().map(|r| r.held).max(), Some(installed), "{mode:?}");
                r.iter().map(|r| r.checked).sum()
            }
        };
        assert!(
            checked >= meeting && checked < installed,
            "{mode:?}: re-checked {checked} of {installed}, {meeting} meet"
        );
        let mut now = rules.clone();
        now.push(narrow_rule(100));
        assert_eq!(mismatches(&mut dp, &now, &keys), 0, "{mode:?}");
        assert_eq!(inexact_megaflows(&dp, &now, &keys), 0, "{mode:?}");
    }
}

fn set_field(name: &str, value: u128) -> Action {
    let field = FIELDS.iter().find(|f| f.name == name).unwrap();
    Action::SetField { field, value, mask: u128::MAX }
}

fn in_table(mut r: Rule, table: u8) -> Rule {
    r.table = table;
    r
}

#[test]
fn a_pipeline_change_rechecks_every_megaflow() {
    // Table 0: packets to 10.0.0.0/26 have their destination rewritten to 10.9.9.9, then
    // every packet goes to table 1, which forwards by destination.
    let mut rewrite = narrow_rule(200);
    rewrite.matches = {
        let (mut v, mut m) = (FlowKey::default(), FlowKey::default());
        v.dl_type = 0x0800;
        m.dl_type = 0xffff;
        v.nw_dst = 0x0a00_0000;
        m.nw_dst = 0xffff_ffc0;
        Match::from_masked(v, m)
    };
    rewrite.priority = 20;
    rewrite.actions = Actions(vec![set_field("nw_dst", 0x0a09_0909), Action::GotoTable(1)]);
    let mut to_1 = rewrite.clone();
    to_1.id = RuleId(201);
    to_1.priority = 10;
    to_1.matches = Match::ANY;
    to_1.actions = Actions(vec![Action::GotoTable(1)]);
    let mut rules: Vec<Rule> = block_rules().into_iter().map(|r| in_table(r, 1)).collect();
    let rewritten = {
        let (mut v, mut m) = (FlowKey::default(), FlowKey::default());
        v.dl_type = 0x0800;
        m.dl_type = 0xffff;
        v.nw_dst = 0x0a09_0909;
        m.nw_dst = u32::MAX;
        in_table(Rule::new(300, 10, Match::from_masked(v, m), Actions::output(7)), 1)
    };
    rules.extend([rewrite, to_1, rewritten.clone()]);
    let keys = block_keys();
    for mode in [RevalidatorMode::Inline, RevalidatorMode::Thread] {
        let table = OfprotoTable::build(&rules).unwrap();
        let mut dp = Orig::with_table(table.clone(), config(), orig_config(mode));
        let fresh = |dp: &mut Orig, table: &OfprotoTable, what: &str| {
            let (got, _) = run_keys_with_rules(dp, &keys);
            for (k, a) in keys.iter().zip(&got) {
                assert_eq!(*a, table.classify(&k.wire()).action, "{mode:?} {what}: {k:?}");
            }
        };
        fresh(&mut dp, &table, "before");
        let installed = dp.dpcls().len() as u64;
        // Table 1's rule for the rewritten destination now drops: no wire key meets its match.
        let mut changed = rewritten.clone();
        changed.actions = Actions::drop();
        let (version, _) = table.commit(vec![RuleChange::Remove(changed.id), RuleChange::Add(changed)]).unwrap();
        assert_eq!(table.read().changes_since(version - 1), Changes::Any);
        dp.table_changed();
        dp.settle_revalidation();
        let checked = match mode {
            RevalidatorMode::Inline => dp.revalidation_checks(),
            RevalidatorMode::Thread => dp.take_revalidations().iter().map(|r| r.checked).sum(),
        };
        assert_eq!(checked, installed, "{mode:?}: every megaflow re-checked");
        fresh(&mut dp, &table, "after the table-1 change");
        // And a table-0 change while the pipeline is there: also every megaflow.
        table.commit(vec![RuleChange::Remove(RuleId(200))]).unwrap();
        dp.table_changed();
        dp.settle_revalidation();
        fresh(&mut dp, &table, "after the table-0 change");
    }
}

#[test]
fn groups_and_port_liveness_read_as_any_change() {
    let table = OfprotoTable::build(&block_rules()).unwrap();
    let (v, _) = table.commit(vec![RuleChange::PortLive(3, false)]).unwrap();
    assert_eq!(table.read().changes_since(v - 1), Changes::Any);
    let (v, _) = table.commit(vec![RuleChange::Add(narrow_rule(100))]).unwrap();
    assert_eq!(table.read().changes_since(v - 1), Changes::Rules(vec![narrow_rule(100).matches]));
    // Since before the port change: anything.
    assert_eq!(table.read().changes_since(v - 2), Changes::Any);
    assert_eq!(table.read().changes_since(v), Changes::Rules(Vec::new()));
}
