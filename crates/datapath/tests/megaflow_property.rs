//! The megaflow property, differentially: on random overlapping rule-sets with updates mid-run,
//! every packet's datapath action equals the action of the reference classifier's winning rule
//! (on the packet's wire key), whatever served it (EMC, CD, megaflow cache or upcall). Also:
//! counters sum to packets received, lost packets are counted, runs are deterministic. With the
//! revalidator thread, rule changes land while packets flow: every packet's action is one of the
//! reference's over the tables from the oldest not yet revalidated to the current, and once the
//! thread is settled no stale megaflow is left. Every packet is also attributed to the
//! reference's winning rule (per-flow counters), also after rule changes that keep megaflows
//! whose winner changed (re-attribution; after the thread settled, with the thread).

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rqvs_classify::Reference;
use rqvs_datapath::ccache::CcacheConfig;
use rqvs_datapath::orig::{MegaflowDatapath, ModelStage};
use rqvs_datapath::pmd::run_keys_with_rules;
use rqvs_datapath::revalidator::RevalidatorMode;
use rqvs_datapath::{assign_rule_outputs, Ccache, Clock, DatapathConfig, Orig, OrigConfig};
use rqvs_flow::matching::PortRange;
use rqvs_flow::{FlowKey, Match, Rule, RuleId};
use rqvs_ofproto::{DpAction, NO_RULE};

const BASES: [u32; 5] = [0x0a00_0000, 0x0a01_0000, 0x0a01_0200, 0xc0a8_0000, 0xc0a8_0180];
const PLENS: [u32; 7] = [0, 8, 16, 23, 24, 28, 32];
const PORTS: [u16; 7] = [53, 80, 85, 443, 1000, 2000, 40000];

fn prefix_mask(plen: u32) -> u32 {
    if plen == 0 {
        0
    } else {
        u32::MAX << (32 - plen)
    }
}

fn random_rules(rng: &mut StdRng, n: usize) -> Vec<Rule> {
    let ranges = [
        PortRange::ANY,
        PortRange::exact(80),
        PortRange::new(1024, 65535).unwrap(),
        PortRange::new(0, 1023).unwrap(),
        PortRange::new(80, 90).unwrap(),
    ];
    let mut rules = Vec::new();
    for i in 0..n {
        let mut v = FlowKey::default();
        let mut m = FlowKey::default();
        v.dl_type = 0x0800;
        m.dl_type = 0xffff;
        m.nw_src = prefix_mask(PLENS[rng.random_range(0..PLENS.len())]);
        v.nw_src = BASES[rng.random_range(0..BASES.len())] & m.nw_src;
        m.nw_dst = prefix_mask(PLENS[rng.random_range(0..PLENS.len())]);
        v.nw_dst = BASES[rng.random_range(0..BASES.len())] & m.nw_dst;
        let (mut src, mut dst) = (PortRange::ANY, PortRange::ANY);
        match rng.random_range(0..4) {
            0 => {}
            p => {
                v.nw_proto = [6, 17, 1][p - 1];
                m.nw_proto = 0xff;
                if v.nw_proto != 1 {
                    src = ranges[rng.random_range(0..ranges.len())];
                    dst = ranges[rng.random_range(0..ranges.len())];
                }
                if v.nw_proto == 6 && rng.random_bool(0.25) {
                    v.tcp_flags = 0x10;
                    m.tcp_flags = 0x10;
                }
            }
        }
        let matches = Match::new(v, m, src, dst).unwrap();
        rules.push(Rule::new(i as u32, rng.random_range(0..20), matches, rqvs_flow::Actions::drop()));
    }
    assign_rule_outputs(&mut rules);
    // Some rules drop, so drop is an action the check must also get right.
    for r in rules.iter_mut().filter(|r| r.id.0 % 5 == 0) {
        r.actions = rqvs_flow::Actions::drop();
    }
    rules
}

fn random_packets(rng: &mut StdRng, pool: usize, n: usize) -> Vec<FlowKey> {
    let pool: Vec<FlowKey> = (0..pool)
        .map(|_| {
            let mut k = FlowKey::ipv4(
                BASES[rng.random_range(0..BASES.len())] | (rng.random::<u32>() >> rng.random_range(8..32)),
                BASES[rng.random_range(0..BASES.len())] | (rng.random::<u32>() >> rng.random_range(8..32)),
                [6, 17, 1, 47][rng.random_range(0..4)],
                PORTS[rng.random_range(0..PORTS.len())],
                PORTS[rng.random_range(0..PORTS.len())],
            );
            k.tcp_flags = [0, 0x10, 0x12][rng.random_range(0..3)];
            k
        })
        .collect();
    (0..n).map(|_| pool[rng.random_range(0..pool.len())]).collect()
}

fn expected(reference: &Reference, k: &FlowKey) -> DpAction {
    DpAction::of_rule(reference.lookup_rule(&k.wire()))
}

/// The reference's winner for `k` ([`NO_RULE`] when none matches).
fn winner(reference: &Reference, k: &FlowKey) -> RuleId {
    reference.lookup_rule(&k.wire()).map_or(NO_RULE, |r| r.id)
}

/// A random configuration: ORIG's settings, and CCACHE's half the time.
struct Config {
    dp: DatapathConfig,
    orig: OrigConfig,
    ccache: Option<CcacheConfig>,
}

fn config(rng: &mut StdRng) -> Config {
    let emc = rng.random_bool(0.7);
    let emc_insert_prob = [1.0, 0.2, 0.01][rng.random_range(0..3)];
    let cd = rng.random_bool(0.5);
    let flow_limit = [5, 50, 200_000][rng.random_range(0..3)];
    let orig = OrigConfig {
        cd,
        flow_limit,
        idle_ns: 300_000_000,
        upcall_queue: 4096,
        revalidator: RevalidatorMode::Inline,
        ..OrigConfig::default()
    };
    // 4 ms per packet: 250 packets per second of PMD clock, so ranking, CD decisions and idle
    // expiry all happen within a run.
    let clock = Clock::Virtual { packet_ns: 4_000_000, upcall_ns: 1_000_000 };
    let dp = DatapathConfig {
        emc,
        emc_insert_prob,
        // Tiny EMCs too: every key's two slots collide with others'.
        emc_entries: rqvs_datapath::emc::EmcEntries::new([2, 64, 8192][rng.random_range(0..3)]).unwrap(),
        clock,
        seed: rng.random(),
        wire_keys: true,
    };
    // CCACHE half the time: a model over the megaflows trained in the background every 50 ms of
    // PMD clock (and synchronously between phases, see `run_case`).
    let ccache = rng.random_bool(0.5).then_some(CcacheConfig {
        train_interval_ns: 50_000_000,
        retrain_threshold: 0.1,
        min_megaflows: 2,
    });
    Config { dp, orig, ccache }
}

/// Replays three phases (initial rules; held-out rules added; some rules removed) and returns
/// the number of packets whose action, or whose rule, differs from the reference's.
fn run_case(seed: u64) -> (usize, rqvs_datapath::Counters) {
    let mut rng = StdRng::seed_from_u64(seed);
    let n = rng.random_range(1..40);
    let rules = random_rules(&mut rng, n);
    let (held, initial): (Vec<Rule>, Vec<Rule>) = rules.iter().cloned().partition(|_| rng.random_bool(0.3));
    let cfg = config(&mut rng);
    match cfg.ccache {
        Some(cc) => run_phases(&mut rng, Ccache::new(&initial, cfg.dp, cfg.orig, cc).unwrap(), &rules, held, &initial),
        None => run_phases(&mut rng, Orig::new(&initial, cfg.dp, cfg.orig).unwrap(), &rules, held, &initial),
    }
}

fn run_phases<S: ModelStage>(
    rng: &mut StdRng,
    mut dp: MegaflowDatapath<S>,
    rules: &[Rule],
    held: Vec<Rule>,
    initial: &[Rule],
) -> (usize, rqvs_datapath::Counters) {
    let mut bad = 0;
    let mut check = |dp: &mut MegaflowDatapath<S>, table: &[Rule], keys: &[FlowKey]| {
        let reference = Reference::build(table).unwrap();
        let (got, rules) = run_keys_with_rules(dp, keys);
        for ((k, a), r) in keys.iter().zip(&got).zip(&rules) {
            if *a != DpAction::Lost && (*a != expected(&reference, k) || *r != winner(&reference, k)) {
                bad += 1;
            }
        }
    };
    let keys = random_packets(rng, 60, 400);
    check(&mut dp, initial, &keys);
    dp.train_model_now();
    check(&mut dp, initial, &keys);
    dp.add_rules(held).unwrap();
    check(&mut dp, rules, &keys);
    let removed: Vec<RuleId> = rules.iter().filter(|_| rng.random_bool(0.3)).map(|r| r.id).collect();
    dp.remove_rules(&removed);
    let remaining: Vec<Rule> = rules.iter().filter(|r| !removed.contains(&r.id)).cloned().collect();
    check(&mut dp, &remaining, &keys);
    (bad, dp.counters())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn datapath_action_equals_reference(seed in any::<u64>()) {
        let (bad, c) = run_case(seed);
        prop_assert_eq!(bad, 0, "action mismatches");
        prop_assert!(c.outcome_sum_ok(), "{:?}", c);
        prop_assert_eq!(c.lost, 0);
    }
}

#[test]
fn every_path_is_exercised_and_counters_sum() {
    // Over many cases, each way of serving a packet happens, so the property test above checks
    // all of them.
    let mut total = rqvs_datapath::Counters::default();
    for seed in 0..64 {
        let (bad, c) = run_case(seed);
        assert_eq!(bad, 0, "seed {seed}");
        assert_eq!(c.emc_hit + c.cd_hit + c.megaflow_hit + c.model_hit + c.upcall + c.lost, c.received, "seed {seed}");
        assert_eq!(c.remainder_hit, 0, "ORIG and CCACHE have no remainder stage");
        total.model_hit += c.model_hit;
        total.emc_hit += c.emc_hit;
        total.cd_hit += c.cd_hit;
        total.megaflow_hit += c.megaflow_hit;
        total.upcall += c.upcall;
        total.deleted_revalidated += c.deleted_revalidated;
        total.deleted_idle += c.deleted_idle;
        total.deleted_limit += c.deleted_limit;
        total.install_refused += c.install_refused;
    }
    assert!(total.emc_hit > 0 && total.cd_hit > 0 && total.megaflow_hit > 0 && total.upcall > 0, "{total:?}");
    assert!(total.model_hit > 0, "CCACHE's model served packets: {total:?}");
    assert!(total.deleted_revalidated > 0 && total.deleted_idle > 0 && total.install_refused > 0, "{total:?}");
}

#[test]
fn overflowing_upcalls_are_lost_and_counted() {
    let mut rng = StdRng::seed_from_u64(5);
    let rules = random_rules(&mut rng, 30);
    let cfg =
        DatapathConfig { clock: Clock::Virtual { packet_ns: 1000, upcall_ns: 1000 }, ..DatapathConfig::default() };
    let mut dp = Orig::new(&rules, cfg, OrigConfig { upcall_queue: 3, ..OrigConfig::default() }).unwrap();
    let keys = random_packets(&mut rng, 200, 640);
    let got = dp.run_keys(&keys);
    let c = dp.counters();
    assert!(c.lost > 0, "{c:?}");
    assert_eq!(got.iter().filter(|a| **a == DpAction::Lost).count() as u64, c.lost);
    assert!(c.outcome_sum_ok(), "{c:?}");
    assert_eq!(c.received, 640);
}

#[test]
fn virtual_clock_runs_are_deterministic() {
    let a = run_case(42).1;
    let b = run_case(42).1;
    assert_eq!(a, b);
}

/// Replays `keys` batch by batch with a rule change every few batches (adds of held-out rules,
/// removals), the revalidator on its own thread: each packet's action must be the reference's
/// for one of the tables in the window `[oldest_epoch, epoch]` at the time its batch ran.
/// Returns (packets outside their window, packets checked with a window wider than one table,
/// megaflows the thread deleted).
fn run_threaded_case(seed: u64) -> (usize, usize, u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let n = rng.random_range(2..40);
    let rules = random_rules(&mut rng, n);
    let (held, initial): (Vec<Rule>, Vec<Rule>) = rules.iter().cloned().partition(|_| rng.random_bool(0.4));
    let cfg = config(&mut rng);
    let orig = OrigConfig { revalidator: RevalidatorMode::Thread, ..cfg.orig };
    match cfg.ccache {
        Some(cc) => threaded_phases(&mut rng, Ccache::new(&initial, cfg.dp, orig, cc).unwrap(), held, initial),
        None => threaded_phases(&mut rng, Orig::new(&initial, cfg.dp, orig).unwrap(), held, initial),
    }
}

fn threaded_phases<S: ModelStage>(
    rng: &mut StdRng,
    mut dp: MegaflowDatapath<S>,
    mut held: Vec<Rule>,
    initial: Vec<Rule>,
) -> (usize, usize, u64) {
    // tables[e]: the rule table after e changes.
    let mut table = initial.clone();
    let mut tables = vec![Reference::build(&table).unwrap()];
    let keys = random_packets(rng, 60, 2_000);
    let (mut bad, mut windowed) = (0, 0);
    let mut out = [DpAction::Drop; rqvs_datapath::BATCH];
    for (b, chunk) in keys.chunks(rqvs_datapath::BATCH).enumerate() {
        if b % 3 == 2 {
            if !held.is_empty() && rng.random_bool(0.6) {
                let k = rng.random_range(1..=held.len());
                let add: Vec<Rule> = held.drain(..k).collect();
                table.extend(add.iter().cloned());
                dp.add_rules(add).unwrap();
            } else {
                let gone: Vec<RuleId> = table.iter().filter(|_| rng.random_bool(0.2)).map(|r| r.id).collect();
                table.retain(|r| !gone.contains(&r.id));
                dp.remove_rules(&gone);
            }
            tables.push(Reference::build(&table).unwrap());
            assert_eq!(dp.epoch() as usize, tables.len() - 1);
        }
        let (lo, hi) = (dp.oldest_epoch() as usize, dp.epoch() as usize);
        assert!(lo <= hi);
        windowed += if lo < hi { chunk.len() } else { 0 };
        let seq0 = (b * rqvs_datapath::BATCH) as u64;
        dp.process_batch(chunk, seq0, &mut out);
        let mut got: Vec<DpAction> = out[..chunk.len()].to_vec();
        for &(seq, a) in dp.handle_upcalls() {
            got[(seq - seq0) as usize] = a;
        }
        for (k, a) in chunk.iter().zip(&got) {
            if *a != DpAction::Lost && !(lo..=hi).any(|e| *a == expected(&tables[e], k)) {
                bad += 1;
            }
        }
        dp.maintain();
    }
    dp.settle_revalidation();
    assert_eq!(dp.oldest_epoch(), dp.epoch());
    // Settled: every megaflow left is exact for the current table — its key and packets drawn
    // across its region (the key on the mask's bits, another packet elsewhere) get its action
    // and its rule. (A fresh lookup of the key may examine more bits than the megaflow's mask
    // when a rule that meets no packet of it was added: incremental revalidation leaves such a
    // megaflow, exact, where a full pass would replace it.)
    let now = tables.last().unwrap();
    let others = random_packets(rng, 60, 16);
    for f in dp.dpcls().megaflow_refs() {
        let e = dp.dpcls().get(f).unwrap();
        let mask = e.megaflow.mask;
        for o in std::iter::once(e.key).chain(others.iter().map(|o| {
            let (k, m, o) = (e.key.to_words(), mask.to_words(), o.to_words());
            FlowKey::from_words(&std::array::from_fn(|i| (k[i] & m[i]) | (o[i] & !m[i])))
        })) {
            assert_eq!(expected(now, &o), e.action, "stale megaflow {e:?} for {o:?}");
            assert_eq!(
                e.rule.unwrap_or(NO_RULE),
                winner(now, &o),
                "a kept megaflow not re-attributed: {e:?} for {o:?}"
            );
        }
    }
    // And every packet now gets the current table's action, attributed to its winner.
    let (got, rules) = run_keys_with_rules(&mut dp, &keys);
    for ((k, a), r) in keys.iter().zip(&got).zip(&rules) {
        if *a != DpAction::Lost && (*a != expected(now, k) || *r != winner(now, k)) {
            bad += 1;
        }
    }
    let deleted = dp.counters().deleted_revalidated;
    (bad, windowed, deleted)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn revalidator_thread_keeps_every_action_within_its_window(seed in any::<u64>()) {
        let (bad, _, _) = run_threaded_case(seed);
        prop_assert_eq!(bad, 0, "actions outside their window of tables");
    }
}

#[test]
fn revalidator_thread_deletes_and_windows_happen() {
    // Over many cases the thread deletes megaflows and packets do run while a revalidation is
    // pending, so the property above checks the window, not only the settled state.
    let (mut windowed, mut deleted) = (0, 0);
    for seed in 0..32 {
        let (bad, w, d) = run_threaded_case(seed);
        assert_eq!(bad, 0, "seed {seed}");
        windowed += w;
        deleted += d;
    }
    assert!(deleted > 0 && windowed > 0, "deleted {deleted}, windowed {windowed}");
}

/// The megaflows (key, mask, action, rule) a datapath holds, sorted.
fn megaflow_set<S: ModelStage>(dp: &MegaflowDatapath<S>) -> Vec<String> {
    let mut v: Vec<String> = dp
        .dpcls()
        .megaflow_refs()
        .into_iter()
        .map(|f| {
            let e = dp.dpcls().get(f).unwrap();
            format!("{:?} {:?} {:?} {:?}", e.key, e.megaflow.mask, e.action, e.rule)
        })
        .collect();
    v.sort();
    v
}

/// Two PMDs over one OpenFlow table and one revalidator thread (the switch's arrangement): each
/// keeps exactly the megaflows a twin revalidating inline keeps — the thread never mixes one
/// PMD's megaflows (whose handles collide with the other's) with the other's.
#[test]
fn one_revalidator_thread_serves_two_pmds_apart() {
    use rqvs_datapath::revalidator::RevalidatorService;
    use rqvs_ofproto::table::RuleChange;
    use rqvs_ofproto::OfprotoTable;
    for seed in 0..20u64 {
        let mut rng = StdRng::seed_from_u64(1000 + seed);
        let rules = random_rules(&mut rng, 30);
        let (held, initial): (Vec<Rule>, Vec<Rule>) = rules.iter().cloned().partition(|_| rng.random_bool(0.3));
        let cfg =
            DatapathConfig { clock: Clock::Virtual { packet_ns: 1000, upcall_ns: 1000 }, ..DatapathConfig::default() };
        let inline = OrigConfig { revalidator: RevalidatorMode::Inline, ..OrigConfig::default() };
        let shared = OfprotoTable::build(&initial).unwrap();
        let twin_table = OfprotoTable::build(&initial).unwrap();
        let mut service = RevalidatorService::spawn(shared.clone());
        let mut pmds: Vec<(Orig, Orig)> = (0..2)
            .map(|_| {
                let mut t = Orig::with_table(shared.clone(), cfg, inline);
                t.set_revalidator(service.connect());
                (t, Orig::with_table(twin_table.clone(), cfg, inline))
            })
            .collect();
        drop(service);
        for (t, twin) in &mut pmds {
            let keys = random_packets(&mut rng, 40, 400);
            t.run_keys(&keys);
            twin.run_keys(&keys);
            assert_eq!(megaflow_set(t), megaflow_set(twin));
        }
        // One commit to both tables, then every PMD revalidates.
        let mut changes: Vec<RuleChange> = held.into_iter().map(RuleChange::Add).collect();
        changes.extend(initial.iter().filter(|_| rng.random_bool(0.2)).map(|r| RuleChange::Remove(r.id)));
        shared.commit(changes.clone()).unwrap();
        twin_table.commit(changes).unwrap();
        for (t, twin) in &mut pmds {
            t.table_changed();
            twin.table_changed();
        }
        for (t, twin) in &mut pmds {
            t.settle_revalidation();
            assert_eq!(t.oldest_epoch(), t.epoch());
            assert_eq!(megaflow_set(t), megaflow_set(twin), "seed {seed}");
        }
    }
}

/// A flow replaced by one with the same match, priority and actions under a new id (what the
/// switch's OpenFlow modify does): revalidation keeps every megaflow (same action, same mask)
/// and re-attributes them, so every packet — served by the EMC, the model or the megaflow
/// cache, no upcall — counts for the new rule; inline, and with the revalidator thread once it
/// has settled. ORIG and CCACHE.
#[test]
fn a_kept_megaflow_is_reattributed_to_the_new_winner() {
    for (ccache, mode) in
        [false, true].into_iter().flat_map(|c| [(c, RevalidatorMode::Inline), (c, RevalidatorMode::Thread)])
    {
        let mut rng = StdRng::seed_from_u64(77);
        let rules = random_rules(&mut rng, 30);
        let keys = random_packets(&mut rng, 60, 600);
        let dp = DatapathConfig {
            emc_insert_prob: 1.0,
            clock: Clock::Virtual { packet_ns: 1000, upcall_ns: 1000 },
            ..DatapathConfig::default()
        };
        let orig = OrigConfig { revalidator: mode, ..OrigConfig::default() };
        let cc = CcacheConfig { train_interval_ns: 1_000_000, retrain_threshold: 0.1, min_megaflows: 2 };
        let what = format!("ccache {ccache}, {mode:?}");
        if ccache {
            reattribution_case(Ccache::new(&rules, dp, orig, cc).unwrap(), &rules, &keys, &what);
        } else {
            reattribution_case(Orig::new(&rules, dp, orig).unwrap(), &rules, &keys, &what);
        }
    }
}

fn reattribution_case<S: ModelStage>(mut dp: MegaflowDatapath<S>, rules: &[Rule], keys: &[FlowKey], what: &str) {
    let reference = Reference::build(rules).unwrap();
    run_keys_with_rules(&mut dp, keys);
    dp.train_model_now();
    // The rule that wins the most packets, replaced by its twin under a new id — among rules whose
    // priority no other rule has: with an equal-priority rule beside it, the new (higher) id
    // could lose a tie the old one won, and the megaflows it decides would rightly change.
    let mut wins = std::collections::HashMap::new();
    for k in keys {
        *wins.entry(winner(&reference, k)).or_insert(0) += 1;
    }
    let alone = |id: RuleId| {
        let p = rules.iter().find(|r| r.id == id).map(|r| r.priority);
        rules.iter().filter(|r| Some(r.priority) == p).count() == 1
    };
    let (&old, _) = wins
        .iter()
        .filter(|(id, _)| **id != NO_RULE && alone(**id))
        .max_by_key(|(id, n)| (**n, **id))
        .expect("a winning rule with a priority of its own");
    let mut twin = rules.iter().find(|r| r.id == old).unwrap().clone();
    twin.id = RuleId(1000);
    let now: Vec<Rule> = rules.iter().filter(|r| r.id != old).cloned().chain([twin.clone()]).collect();
    let reference = Reference::build(&now).unwrap();
    let before = dp.counters();
    use rqvs_ofproto::table::RuleChange;
    dp.table().commit(vec![RuleChange::Remove(old), RuleChange::Add(twin)]).unwrap();
    dp.table_changed();
    dp.settle_revalidation();
    let after = dp.counters();
    assert_eq!(after.deleted_revalidated, before.deleted_revalidated, "{what}: the replacement kept every megaflow");
    let (got, attributed) = run_keys_with_rules(&mut dp, keys);
    assert_eq!(dp.counters().upcall, after.upcall, "{what}: every packet served from the caches");
    let mut moved = 0;
    for ((k, a), r) in keys.iter().zip(&got).zip(&attributed) {
        assert_eq!(*a, expected(&reference, k), "{what}");
        assert_eq!(*r, winner(&reference, k), "{what}: packet {k:?}");
        moved += usize::from(r.0 == 1000);
    }
    assert!(moved > 0, "{what}: no packet of the replaced rule");
}
