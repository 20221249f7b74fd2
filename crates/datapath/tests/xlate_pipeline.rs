//! The translation over random pipelines against a reference walk.
//!
//! Random pipelines (2–4 tables; gotos, resubmits, metadata writes and matches, set_field,
//! push/strip VLAN, dec_ttl, the action set, groups of every type) are translated twice: by
//! [`xlate`] over the OpenFlow slow path (`OfprotoClassifier`, wildcard tracking) and by the
//! same walk over a **reference lookup** (per table, the winner by definition; no wildcards).
//! The ops, the final key, the rule chain and the error must be equal; and the megaflow must be
//! sound: keys that agree with the packet on every bit of its mask (the other bits drawn at
//! random) translate to the same ops and chain.

use std::collections::HashMap;

use proptest::prelude::*;
use rqvs_classify::ofproto::OfprotoClassifier;
use rqvs_classify::winner_by_definition;
use rqvs_flow::field::{Field, FIELDS};
use rqvs_flow::group::{Bucket, Group, GroupType};
use rqvs_flow::key::*;
use rqvs_flow::rng::Rng;
use rqvs_flow::{Action, Actions, FlowKey, Match, Rule};
use rqvs_ofproto::xlate::{xlate, Pipeline, Xlate};

/// The reference lookup: rules per table in winner order, the first that matches; it examines
/// nothing.
struct Reference {
    tables: Vec<Vec<Rule>>,
}

impl Reference {
    fn new(rules: &[Rule]) -> Reference {
        let mut tables: Vec<Vec<Rule>> = Vec::new();
        for r in rules {
            let t = usize::from(r.table);
            if tables.len() <= t {
                tables.resize_with(t + 1, Vec::new);
            }
            tables[t].push(r.clone());
        }
        for t in &mut tables {
            t.sort_by_key(Rule::rank);
        }
        Reference { tables }
    }
}

impl Pipeline for Reference {
    fn lookup(&self, table: u8, key: &FlowKey, _wc: &mut FlowKey) -> Option<Rule> {
        let t = self.tables.get(usize::from(table))?;
        let id = winner_by_definition(t, key)?;
        t.iter().find(|r| r.id == id).cloned()
    }
}

fn field(name: &str) -> &'static Field {
    Field::by_name(name).unwrap()
}

fn one_in(rng: &mut Rng, n: u32) -> bool {
    rng.next_u32().is_multiple_of(n)
}

fn pick<T: Copy>(rng: &mut Rng, xs: &[T]) -> T {
    xs[rng.next_u32() as usize % xs.len()]
}

const SRCS: [u32; 4] = [0x0a00_0001, 0x0a00_0102, 0x0a01_0001, 0x0b00_0001];
const DSTS: [u32; 3] = [0xc0a8_0001, 0xc0a8_0101, 0x0a09_0909];
const PORTS: [u16; 3] = [22, 80, 443];

/// A random action the parser would accept in a `tcp` rule of table `table` of `tables`.
fn action(rng: &mut Rng, table: u8, tables: u8, in_set: bool) -> Action {
    loop {
        let a = match rng.next_u32() % 14 {
            0..=2 => Action::Output(1 + rng.next_u32() % 4),
            3 => Action::SetField { field: field("nw_dst"), value: u128::from(pick(rng, &DSTS)), mask: 0xffff_ffff },
            4 => Action::SetField { field: field("tcp_dst"), value: u128::from(pick(rng, &PORTS)), mask: 0xffff },
            5 => Action::SetField { field: field("nw_src"), value: u128::from(pick(rng, &SRCS)), mask: 0xffff_0000 },
            6 => Action::SetField { field: field("metadata"), value: u128::from(rng.next_u32() % 4), mask: 3 },
            7 => Action::PushVlan(0x8100),
            8 => Action::StripVlan,
            9 => Action::DecTtl,
            10 => Action::Group(1 + rng.next_u32() % 4),
            11 if !in_set => {
                Action::Resubmit { in_port: None, table: Some((rng.next_u32() % u32::from(tables)) as u8) }
            }
            12 if !in_set => Action::Resubmit { in_port: Some(1 + rng.next_u32() % 3), table: None },
            13 => Action::SetField {
                field: field("vlan_vid"),
                value: 0x1000 | u128::from(rng.next_u32() % 4),
                mask: 0x1fff,
            },
            _ => continue,
        };
        // vlan_vid needs a tag in the match; rules here never match one, so only after a push.
        if matches!(&a, Action::SetField { field, .. } if field.name == "vlan_vid") && table == u8::MAX {
            continue;
        }
        return a;
    }
}

fn actions(rng: &mut Rng, table: u8, tables: u8) -> Actions {
    let mut list = Vec::new();
    let mut tagged = false;
    for _ in 0..rng.next_u32() % 5 {
        let a = action(rng, table, tables, false);
        match &a {
            Action::PushVlan(_) => tagged = true,
            Action::StripVlan => tagged = false,
            Action::SetField { field, .. } if field.name == "vlan_vid" && !tagged => continue,
            _ => {}
        }
        list.push(a);
    }
    if one_in(rng, 4) {
        list.push(Action::ClearActions);
    }
    if one_in(rng, 2) {
        let n = 1 + rng.next_u32() % 3;
        let set: Vec<Action> = (0..n)
            .map(|_| action(rng, table, tables, true))
            .filter(|a| !matches!(a, Action::SetField { field, .. } if field.name == "vlan_vid"))
            .collect();
        list.push(Action::WriteActions(set));
    }
    if one_in(rng, 3) {
        list.push(Action::WriteMetadata { value: u64::from(rng.next_u32() % 4), mask: 3 });
    }
    if table + 1 < tables && one_in(rng, 2) {
        list.push(Action::GotoTable(table + 1 + (rng.next_u32() % u32::from(tables - table - 1)) as u8));
    }
    Actions(list)
}

fn rule(rng: &mut Rng, id: u32, table: u8, tables: u8, priority: u32) -> Rule {
    let (mut v, mut m) = (FlowKey::ZERO, FlowKey::ZERO);
    v.dl_type = ETH_TYPE_IP;
    m.dl_type = u16::MAX;
    v.nw_proto = IPPROTO_TCP;
    m.nw_proto = u8::MAX;
    if one_in(rng, 3) {
        v.in_port = 1 + rng.next_u32() % 3;
        m.in_port = u32::MAX;
    }
    if one_in(rng, 2) {
        m.nw_src = pick(rng, &[0xffff_0000u32, 0xffff_ffff, 0xff00_0000]);
        v.nw_src = pick(rng, &SRCS) & m.nw_src;
    }
    if one_in(rng, 2) {
        m.nw_dst = pick(rng, &[0xffff_ff00u32, 0xffff_ffff]);
        v.nw_dst = pick(rng, &DSTS) & m.nw_dst;
    }
    if one_in(rng, 3) {
        m.tp_dst = u16::MAX;
        v.tp_dst = pick(rng, &PORTS);
    }
    if table > 0 && one_in(rng, 2) {
        m.metadata = 3;
        v.metadata = u64::from(rng.next_u32() % 4);
    }
    if one_in(rng, 4) {
        m.vlan_tci = VLAN_CFI;
        v.vlan_tci = if one_in(rng, 2) { VLAN_CFI } else { 0 };
    }
    let mut r = Rule::new(id, priority, Match::from_masked(v, m), actions(rng, table, tables));
    r.table = table;
    r
}

fn pipeline(seed: u64) -> (Vec<Rule>, HashMap<u32, Group>) {
    let mut rng = Rng::new(seed);
    let tables = 2 + (rng.next_u32() % 3) as u8;
    let mut rules = Vec::new();
    for t in 0..tables {
        let n = 1 + rng.next_u32() % 6;
        for i in 0..n {
            let id = rules.len() as u32;
            rules.push(rule(&mut rng, id, t, tables, 100 - i * 10));
        }
    }
    let kinds = [GroupType::All, GroupType::Indirect, GroupType::Select, GroupType::FastFailover];
    let mut groups = HashMap::new();
    for id in 1..=4u32 {
        let kind = pick(&mut rng, &kinds);
        let n = if kind == GroupType::Indirect { 1 } else { 1 + rng.next_u32() % 3 };
        let buckets = (0..n)
            .map(|_| {
                let list: Vec<Action> = (0..1 + rng.next_u32() % 2)
                    .map(|_| action(&mut rng, u8::MAX, 1, true))
                    .filter(|a| !matches!(a, Action::SetField { field, .. } if field.name == "vlan_vid"))
                    .collect();
                Bucket {
                    watch_port: if kind == GroupType::FastFailover { rng.next_u32() % 4 } else { u32::MAX },
                    ..Bucket::new(Actions(list))
                }
            })
            .collect();
        groups.insert(id, Group { id, kind, buckets });
    }
    (rules, groups)
}

fn key(rng: &mut Rng) -> FlowKey {
    let mut k = FlowKey::ipv4(pick(rng, &SRCS), pick(rng, &DSTS), IPPROTO_TCP, pick(rng, &PORTS), pick(rng, &PORTS));
    k.dl_type = ETH_TYPE_IP;
    k.in_port = 1 + rng.next_u32() % 3;
    k.nw_ttl = (rng.next_u32() % 3) as u8;
    if one_in(rng, 3) {
        k.vlan_tci = VLAN_CFI | (rng.next_u32() % 4) as u16;
    }
    k
}

/// A key equal to `k` on every bit of `mask`, random elsewhere (metadata 0: packets enter with
/// none).
fn agreeing(rng: &mut Rng, k: &FlowKey, mask: &FlowKey) -> FlowKey {
    let mut k2 = *k;
    for f in FIELDS {
        let m = f.get(mask);
        let r = (u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64())) & f.all_ones();
        // Draw from the small value sets too, so that other rules' values come up.
        let r = match (f.name, rng.next_u32() % 2) {
            ("nw_src", 0) => u128::from(pick(rng, &SRCS)),
            ("nw_dst", 0) => u128::from(pick(rng, &DSTS)),
            ("tcp_dst" | "tcp_src", 0) => u128::from(pick(rng, &PORTS)),
            _ => r,
        };
        f.set(&mut k2, (f.get(k) & m) | (r & !m));
    }
    k2.metadata = 0;
    k2
}

fn same(a: &Xlate, b: &Xlate) -> bool {
    a.ops == b.ops
        && a.final_key == b.final_key
        && a.chain == b.chain
        && a.error == b.error
        && a.table_miss == b.table_miss
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn xlate_equals_the_reference_walk_and_its_megaflow_is_sound(seed in any::<u64>()) {
        let (rules, groups) = pipeline(seed);
        let of = OfprotoClassifier::build(&rules).unwrap();
        let reference = Reference::new(&rules);
        let mut rng = Rng::new(seed ^ 0x5eed);
        for _ in 0..30 {
            let k = key(&mut rng);
            let x = xlate(&of, &groups, &k);
            let r = xlate(&reference, &groups, &k);
            prop_assert!(same(&x, &r), "key {:?}\nxlate {:?}\nreference {:?}\nrules {:#?}", k, x, r, rules);
            prop_assert!(x.megaflow.contains(&k));
            prop_assert_eq!(x.megaflow.mask.metadata, 0);
            for _ in 0..20 {
                let k2 = agreeing(&mut rng, &k, &x.megaflow.mask);
                prop_assert!(x.megaflow.contains(&k2));
                let r2 = xlate(&reference, &groups, &k2);
                prop_assert!(
                    r2.ops == x.ops && r2.chain == x.chain && r2.error == x.error,
                    "unsound megaflow {:?}/{:?}\nkey {:?} -> {:?}\nkey {:?} -> {:?}",
                    x.megaflow.value, x.megaflow.mask, k, x.ops, k2, r2.ops
                );
            }
        }
    }
}

#[test]
fn single_table_translation_is_the_rules_action() {
    // One table, output-only rules: the translation's action is the rule's, its megaflow the
    // lookup's (what the single-table datapath always installed).
    let mut rng = Rng::new(7);
    let rules: Vec<Rule> = (0..40u32)
        .map(|i| {
            let mut r = rule(&mut rng, i, 0, 1, 1000 - i);
            r.actions = Actions::output(i + 1);
            r.matches = {
                let (mut v, mut m) = (*r.matches.value(), *r.matches.mask());
                v.metadata = 0;
                m.metadata = 0;
                Match::from_masked(v, m)
            };
            r
        })
        .collect();
    let of = OfprotoClassifier::build(&rules).unwrap();
    for _ in 0..500 {
        let k = key(&mut rng);
        let x = xlate(&of, &rqvs_ofproto::xlate::NoGroups, &k);
        let l = of.lookup_wc(&k);
        assert_eq!(x.first_rule(), l.rule);
        assert_eq!(x.megaflow, l.megaflow(&k));
        assert_eq!(x.action(), rqvs_ofproto::DpAction::of_rule(l.rule.and_then(|id| of.rule(id))));
    }
}

/// Every design runs the pipeline: ORIG and CCACHE through the slow path's translation and
/// their megaflows, CFLOWS through its learned table 0 and the walk of the other tables
/// (`rqvs_datapath::cflows_pipeline`). For random pipelines (groups included) each packet's
/// action and its rule chain's attribution equal the reference walk's, before and after a
/// change of rules in any table.
mod designs {
    use super::*;
    use rqvs_datapath::ccache::CcacheConfig;
    use rqvs_datapath::pmd::run_keys_with_rules;
    use rqvs_datapath::{Ccache, Cflows, CflowsConfig, Clock, DatapathConfig, Design, Orig, OrigConfig};
    use rqvs_flow::RuleId;
    use rqvs_ofproto::table::RuleChange;
    use rqvs_ofproto::{chain, OfprotoTable};

    type Expected = (Vec<rqvs_ofproto::DpAction>, Vec<RuleId>);

    /// The reference walk's action and chain per key; and CFLOWS' expectation, which differs
    /// in the action only where the packet's table-0 rule ends the pipeline: CFLOWS then applies
    /// that rule's own op list (`DpAction::from_rule`, as one-table CFLOWS always did; the
    /// executor decides TTL expiry and prerequisites per frame), not the translation's.
    fn expected(rules: &[Rule], groups: &HashMap<u32, Group>, keys: &[FlowKey]) -> (Expected, Expected) {
        let reference = Reference::new(rules);
        let (mut all, mut cflows): (Expected, Expected) = Default::default();
        for k in keys {
            let x = xlate(&reference, groups, k);
            let chain = chain::attribution_of(&x).unwrap_or(rqvs_ofproto::NO_RULE);
            let first = x.first_rule().and_then(|id| rules.iter().find(|r| r.id == id));
            let cf = match first {
                Some(r) if !rqvs_datapath::cflows_pipeline::continues(r) => rqvs_ofproto::DpAction::from_rule(r),
                _ => x.action(),
            };
            all.0.push(x.action());
            all.1.push(chain);
            cflows.0.push(cf);
            cflows.1.push(chain);
        }
        (all, cflows)
    }

    fn check(name: &str, got: &Expected, want: &Expected, keys: &[FlowKey]) -> Result<(), TestCaseError> {
        if let Some(i) = (0..keys.len()).find(|&i| got.0[i] != want.0[i] || got.1[i] != want.1[i]) {
            prop_assert!(
                false,
                "{}: key {:?}: got {:?} {:?}, want {:?} {:?}",
                name,
                keys[i],
                got.0[i].to_ops(),
                chain::rules(got.1[i]),
                want.0[i].to_ops(),
                chain::rules(want.1[i])
            );
        }
        Ok(())
    }

    fn with_groups(rules: &[Rule], groups: &HashMap<u32, Group>) -> OfprotoTable {
        let t = OfprotoTable::build(rules).unwrap();
        t.commit(groups.values().cloned().map(RuleChange::Group).collect()).unwrap();
        t
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 60, ..ProptestConfig::default() })]

        #[test]
        fn every_design_equals_the_reference_walk(seed in any::<u64>()) {
            let (rules, groups) = pipeline(seed);
            let mut rng = Rng::new(seed ^ 0xd351);
            let keys: Vec<FlowKey> = (0..200).map(|_| key(&mut rng)).collect();
            // Keys repeat, so the EMC and the caches serve some.
            let keys: Vec<FlowKey> = keys.iter().chain(keys.iter()).copied().collect();
            let cfg = DatapathConfig {
                clock: Clock::Virtual { packet_ns: 100, upcall_ns: 1000 },
                wire_keys: false,
                emc_insert_prob: 1.0,
                ..DatapathConfig::default()
            };
            // A change: the last rule of every table removed, one rule of table 1 re-added
            // under a new id with other actions.
            let mut removed: Vec<RuleId> = Vec::new();
            for t in 0..4u8 {
                if let Some(r) = rules.iter().rfind(|r| r.table == t) {
                    removed.push(r.id);
                }
            }
            let mut added = rules.iter().find(|r| r.table == 1).cloned().unwrap();
            added.id = RuleId(1000);
            added.priority += 1;
            added.actions = Actions::output(3);
            // And a second one, so that table 1 grows by one (past the learned index's threshold
            // in a third of the cases).
            let mut added2 = rules.iter().rfind(|r| r.table == 1).cloned().unwrap();
            added2.id = RuleId(1001);
            added2.priority = 95;
            added2.actions = Actions::output(4);
            let mut after: Vec<Rule> = rules.iter().filter(|r| !removed.contains(&r.id)).cloned().collect();
            after.push(added.clone());
            after.push(added2.clone());
            // CFLOWS' index of the tables after 0 (`rqvs_ofproto::later_tables`): a NuevoMatchUP
            // for every table from the start, one for table 1 trained in the background once the
            // change takes it past the threshold, or TupleMerge for all.
            let table1 = rules.iter().filter(|r| r.table == 1).count();
            let later_learned_min = [0, table1 + 1, usize::MAX][(seed % 3) as usize];
            let fresh: Vec<FlowKey> = (0..200).map(|_| key(&mut rng)).collect();
            let want2 = expected(&after, &groups, &fresh);

            let want0 = expected(&rules, &groups, &keys);
            let want1 = expected(&after, &groups, &keys);

            let table = with_groups(&rules, &groups);
            let mut orig = Orig::with_table(table.clone(), cfg, OrigConfig::default());
            let ctable = with_groups(&rules, &groups);
            let mut ccache = Ccache::with_table(ctable.clone(), cfg, OrigConfig::default(), CcacheConfig::default());
            let mut cflows =
                Cflows::new(&rules, cfg, CflowsConfig { later_learned_min, ..CflowsConfig::default() }).unwrap();
            let index = cflows.later_tables();
            prop_assert!(index.iter().all(|t| t.learned.is_some() == (t.rules >= later_learned_min)), "{:?}", index);
            cflows.commit_pipeline(groups.values().cloned().map(RuleChange::Group).collect()).unwrap();

            for (name, dp) in [("orig", &mut orig as &mut dyn Design), ("ccache", &mut ccache), ("cflows", &mut cflows)] {
                let got = run_keys_with_rules(dp, &keys);
                check(name, &got, if name == "cflows" { &want0.1 } else { &want0.0 }, &keys)?;
            }
            let changes = || {
                let mut c: Vec<RuleChange> = removed.iter().map(|&id| RuleChange::Remove(id)).collect();
                c.push(RuleChange::Add(added.clone()));
                c.push(RuleChange::Add(added2.clone()));
                c
            };
            table.commit(changes()).unwrap();
            orig.table_changed();
            ctable.commit(changes()).unwrap();
            ccache.table_changed();
            cflows.remove_rules(&removed);
            cflows.add_rules(vec![added.clone(), added2.clone()]).unwrap();
            for (name, dp) in [("orig", &mut orig as &mut dyn Design), ("ccache", &mut ccache), ("cflows", &mut cflows)] {
                let got = run_keys_with_rules(dp, &keys);
                check(&format!("{name} after the change"), &got, if name == "cflows" { &want1.1 } else { &want1.0 }, &keys)?;
            }
            // Once the background training has ended, table 1 is learned unless TupleMerge
            // serves all; packets the caches have not seen walk it.
            cflows.settle();
            let t1 = cflows.later_tables().into_iter().find(|t| t.table == 1).expect("table 1 indexed");
            prop_assert_eq!(t1.learned.is_some(), later_learned_min != usize::MAX, "{:?}", t1);
            prop_assert!(!t1.training);
            let got = run_keys_with_rules(&mut cflows, &fresh);
            check("cflows after the training", &got, &want2.1, &fresh)?;
        }
    }
}
