//! The switch's OpenFlow table of record ([`FlowTable`]): the flows by id, an index by
//! (priority, match) — OpenFlow's identity of a flow — and the next id to give; and the one
//! way it changes, a transaction ([`Txn`]) of flow-mods ([`FlowOp`]).
//!
//! A transaction applies its flow-mods to the record in order, keeping an undo log, and yields
//! the **net change** against the record as it was: the flows removed that existed before, and
//! the flows added that still exist at the end (a flow added and then deleted inside one
//! transaction never reaches the datapath). The caller commits that net change to the shared
//! OpenFlow table and the PMDs ([`crate::Control`]) and then keeps the transaction, or aborts it
//! (the record goes back to what it was). Each flow-mod is checked before it touches the record,
//! so a refused one changes nothing: a bundle aborts the whole transaction, a run of single
//! flow-mods ([`crate::Control::apply_each`]) just leaves the refused one out.
//!
//! Costs: an add, a strict modify and a strict delete find their flow through the index (no
//! scan); a non-strict modify or delete scans the table, as its selection is by match
//! containment. So one flow-mod costs O(1) or O(flows it selects), never a copy of the table.

use std::collections::{BTreeMap, HashMap};

use rqvs_flow::{Action, Actions, Match, Rule, RuleId};

use crate::{check_rules, Error};

/// One flow-mod against the table of record.
#[derive(Clone, Debug)]
pub enum FlowOp {
    /// Add (replacing the flow of equal match and priority); the id is ignored.
    Add(Rule),
    /// Replace the actions of the selected flows.
    Modify(FlowFilter, Actions),
    /// Remove the selected flows.
    Delete(FlowFilter),
}

/// Which flows an OpenFlow modify, delete or flow-stats request selects.
#[derive(Clone, Debug)]
pub struct FlowFilter {
    /// The match: non-strict, every flow whose match is at least as specific (`None`: all);
    /// strict, the flow with exactly this match and `strict`'s priority.
    pub matches: Option<Match>,
    /// `Some(priority)`: strict.
    pub strict: Option<u32>,
    /// `(cookie, mask)`: only flows whose cookie agrees on the mask's bits (mask 0: all).
    pub cookie: (u64, u64),
    /// Only flows with an `output:N` to this port.
    pub out_port: Option<u32>,
}

impl FlowFilter {
    /// Every flow.
    pub fn all() -> FlowFilter {
        FlowFilter { matches: None, strict: None, cookie: (0, 0), out_port: None }
    }

    /// Does it select `r`?
    pub fn selects(&self, r: &Rule) -> bool {
        let m = match (&self.matches, self.strict) {
            (None, None) => true,
            (Some(m), None) => covers(m, &r.matches),
            (m, Some(p)) => r.priority == p && m.is_none_or(|m| m == r.matches),
        };
        let (cookie, mask) = self.cookie;
        m && (r.cookie & mask) == (cookie & mask)
            && self.out_port.is_none_or(|p| r.actions.0.contains(&Action::Output(p)))
    }
}

/// Does `general` match every packet `specific` matches? (Sound: value/mask containment on
/// every field and range containment on the ports.)
pub(crate) fn covers(general: &Match, specific: &Match) -> bool {
    let (gm, sm) = (general.mask(), specific.mask());
    gm.is_subset_of(sm)
        && specific.value().masked(gm) == *general.value()
        && range_within(specific.tp_src_range(), general.tp_src_range())
        && range_within(specific.tp_dst_range(), general.tp_dst_range())
}

fn range_within(inner: rqvs_flow::PortRange, outer: rqvs_flow::PortRange) -> bool {
    outer.lo <= inner.lo && inner.hi <= outer.hi
}

/// The table of record (module docs).
pub struct FlowTable {
    by_id: BTreeMap<RuleId, Rule>,
    index: HashMap<(u32, Match), RuleId>,
    next_id: u32,
}

impl FlowTable {
    /// The table holding `rules` (their ids kept; a later duplicate of a (priority, match)
    /// pair replaces the earlier one, as a sequence of adds would).
    pub fn new(rules: Vec<Rule>) -> FlowTable {
        let next_id = rules.iter().map(|r| r.id.0 + 1).max().unwrap_or(0);
        let mut t = FlowTable { by_id: BTreeMap::new(), index: HashMap::with_capacity(rules.len()), next_id };
        for r in rules {
            if let Some(old) = t.index.insert((r.priority, r.matches), r.id) {
                t.by_id.remove(&old);
            }
            t.by_id.insert(r.id, r);
        }
        t
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn get(&self, id: RuleId) -> Option<&Rule> {
        self.by_id.get(&id)
    }

    /// The flows in id order.
    pub fn iter(&self) -> impl Iterator<Item = &Rule> {
        self.by_id.values()
    }

    /// The ids of the flows `f` selects: through the index when `f` is strict with a match.
    pub fn select(&self, f: &FlowFilter) -> Vec<RuleId> {
        match (&f.matches, f.strict) {
            (Some(m), Some(p)) => self
                .index
                .get(&(p, *m))
                .filter(|id| self.by_id.get(id).is_some_and(|r| f.selects(r)))
                .map(|&id| vec![id])
                .unwrap_or_default(),
            _ => self.by_id.values().filter(|r| f.selects(r)).map(|r| r.id).collect(),
        }
    }

    /// A transaction on the table (module docs).
    pub fn txn(&mut self) -> Txn<'_> {
        let next_id = self.next_id;
        Txn { table: self, undo: Vec::new(), next_id, added: HashMap::new(), removed: Vec::new() }
    }

    fn insert(&mut self, r: Rule) -> Option<Rule> {
        let old = self.index.insert((r.priority, r.matches), r.id).and_then(|old| self.by_id.remove(&old));
        self.by_id.insert(r.id, r);
        old
    }

    fn remove(&mut self, id: RuleId) -> Option<Rule> {
        let r = self.by_id.remove(&id)?;
        if self.index.get(&(r.priority, r.matches)) == Some(&id) {
            self.index.remove(&(r.priority, r.matches));
        }
        Some(r)
    }
}

/// What one flow-mod did to the table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpEffect {
    /// Flows added (an add, or a modify's replacements).
    pub added: usize,
    /// Flows removed (a delete's, a modify's originals, the flow an add replaced).
    pub removed: usize,
}

/// The net change of a transaction against the table as it was before it.
#[derive(Debug, Default)]
pub struct NetChange {
    /// Flows that exist after it and did not before (id order).
    pub added: Vec<Rule>,
    /// Flows that existed before it and do not after.
    pub removed: Vec<Rule>,
}

impl NetChange {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }
}

enum Undo {
    /// A flow was inserted (and replaced this one, if any).
    Inserted(RuleId, Option<Rule>),
    Removed(Rule),
}

/// A transaction of flow-mods on a [`FlowTable`] (module docs). Dropping it without
/// [`Txn::keep`] undoes it.
pub struct Txn<'a> {
    table: &'a mut FlowTable,
    undo: Vec<Undo>,
    next_id: u32,
    /// Flows this transaction added that still exist.
    added: HashMap<RuleId, ()>,
    /// Flows that existed before it and it removed.
    removed: Vec<Rule>,
}

impl Txn<'_> {
    /// Applies one flow-mod: checked first (an error changes nothing), then applied.
    pub fn apply(&mut self, op: &FlowOp) -> Result<OpEffect, Error> {
        match op {
            FlowOp::Add(r) => {
                check_rules(std::slice::from_ref(r))?;
                let mut r = r.clone();
                r.id = self.new_id();
                let replaced = self.insert(r);
                Ok(OpEffect { added: 1, removed: usize::from(replaced) })
            }
            FlowOp::Modify(f, actions) => {
                let ids = self.table.select(f);
                let mut new: Vec<Rule> = ids
                    .iter()
                    .filter_map(|id| self.table.get(*id))
                    .map(|o| Rule { actions: actions.clone(), ..o.clone() })
                    .collect();
                check_rules(&new)?;
                for (id, r) in ids.iter().zip(&mut new) {
                    self.remove(*id);
                    r.id = self.new_id();
                }
                let n = new.len();
                for r in new {
                    self.insert(r);
                }
                Ok(OpEffect { added: n, removed: n })
            }
            FlowOp::Delete(f) => {
                let ids = self.table.select(f);
                for id in &ids {
                    self.remove(*id);
                }
                Ok(OpEffect { added: 0, removed: ids.len() })
            }
        }
    }

    /// The change so far against the table as it was (module docs).
    pub fn net(&self) -> NetChange {
        let mut added: Vec<Rule> = self.added.keys().filter_map(|id| self.table.get(*id)).cloned().collect();
        added.sort_by_key(|r| r.id);
        NetChange { added, removed: self.removed.clone() }
    }

    /// Keeps the changes (the transaction was committed downstream).
    pub fn keep(mut self) {
        self.table.next_id = self.next_id;
        self.undo.clear();
    }

    fn new_id(&mut self) -> RuleId {
        let id = RuleId(self.next_id);
        self.next_id += 1;
        id
    }

    /// Inserts `r`; true when it replaced a flow.
    fn insert(&mut self, r: Rule) -> bool {
        let id = r.id;
        let old = self.table.insert(r);
        self.added.insert(id, ());
        if let Some(o) = &old {
            self.forget(o.clone());
        }
        let replaced = old.is_some();
        self.undo.push(Undo::Inserted(id, old));
        replaced
    }

    fn remove(&mut self, id: RuleId) {
        if let Some(r) = self.table.remove(id) {
            self.forget(r.clone());
            self.undo.push(Undo::Removed(r));
        }
    }

    /// A flow left the table: net, it was added here (and is no more) or it existed before.
    fn forget(&mut self, r: Rule) {
        if self.added.remove(&r.id).is_none() {
            self.removed.push(r);
        }
    }
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        for u in self.undo.drain(..).rev() {
            match u {
                Undo::Inserted(id, old) => {
                    self.table.remove(id);
                    if let Some(o) = old {
                        self.table.insert(o);
                    }
                }
                Undo::Removed(r) => {
                    self.table.insert(r);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_flow::formats::ofctl;

    fn rules(text: &str) -> Vec<Rule> {
        ofctl::parse_flows("t", text).unwrap()
    }

    fn texts(t: &FlowTable) -> Vec<String> {
        let mut v: Vec<String> = t.iter().flat_map(|r| ofctl::format_flows(r).unwrap()).collect();
        v.sort();
        v
    }

    fn table() -> FlowTable {
        FlowTable::new(rules(
            "priority=10,tcp,tp_dst=80,actions=output:2\n\
             priority=20,ip,nw_src=10.0.0.0/8,actions=output:3\n\
             cookie=0x5,priority=30,udp,actions=drop\n",
        ))
    }

    #[test]
    fn a_dropped_transaction_leaves_the_table_as_it_was() {
        let mut t = table();
        let before = texts(&t);
        let index_before = t.index.clone();
        {
            let mut x = t.txn();
            x.apply(&FlowOp::Add(rules("priority=10,tcp,tp_dst=80,actions=output:1").remove(0))).unwrap();
            x.apply(&FlowOp::Delete(FlowFilter::all())).unwrap();
            x.apply(&FlowOp::Add(rules("priority=5,arp,actions=output:1").remove(0))).unwrap();
        }
        assert_eq!(texts(&t), before);
        assert_eq!(t.index, index_before);
        assert_eq!(t.next_id, 3);
    }

    #[test]
    fn net_change_counts_only_what_crosses_the_transaction() {
        let mut t = table();
        let mut x = t.txn();
        // Replaces flow 0: removed (existed before), and the new one added.
        let e = x.apply(&FlowOp::Add(rules("priority=10,tcp,tp_dst=80,actions=output:1").remove(0))).unwrap();
        assert_eq!(e, OpEffect { added: 1, removed: 1 });
        // Added then deleted inside: never crosses.
        x.apply(&FlowOp::Add(rules("priority=5,arp,actions=output:1").remove(0))).unwrap();
        let strict = |text: &str| {
            let r = rules(text).remove(0);
            FlowFilter { matches: Some(r.matches), strict: Some(r.priority), cookie: (0, 0), out_port: None }
        };
        assert_eq!(x.apply(&FlowOp::Delete(strict("priority=5,arp,actions=drop"))).unwrap().removed, 1);
        // A modify by cookie: the original removed, a replacement added.
        let by_cookie = FlowFilter { cookie: (5, u64::MAX), ..FlowFilter::all() };
        let m = x.apply(&FlowOp::Modify(by_cookie, Actions(vec![Action::Output(1)]))).unwrap();
        assert_eq!(m, OpEffect { added: 1, removed: 1 });
        let net = x.net();
        let ids = |v: &[Rule]| v.iter().map(|r| r.id.0).collect::<Vec<_>>();
        assert_eq!(ids(&net.removed), vec![0, 2]);
        assert_eq!(ids(&net.added), vec![3, 5]);
        x.keep();
        assert_eq!(t.len(), 3);
        assert_eq!(t.next_id, 6);
        assert_eq!(t.select(&strict("priority=10,tcp,tp_dst=80,actions=drop")), vec![RuleId(3)]);
    }

    #[test]
    fn a_refused_flow_mod_changes_nothing() {
        let mut t = table();
        let before = texts(&t);
        let mut x = t.txn();
        let mut bad = rules("priority=1,actions=output:1").remove(0);
        bad.table = 3;
        assert!(x.apply(&FlowOp::Add(bad)).is_err());
        assert!(x.net().is_empty());
        x.keep();
        assert_eq!(texts(&t), before);
    }

    #[test]
    fn strict_selection_through_the_index_equals_the_scan() {
        let t = table();
        for r in t.iter() {
            for p in [r.priority, r.priority + 1] {
                let f = FlowFilter { matches: Some(r.matches), strict: Some(p), cookie: (0, 0), out_port: None };
                let scan: Vec<RuleId> = t.iter().filter(|o| f.selects(o)).map(|o| o.id).collect();
                assert_eq!(t.select(&f), scan);
            }
        }
    }

    /// The table's flows as comparable text: (priority, match, cookie, actions).
    fn contents<'a>(rules: impl Iterator<Item = &'a Rule>) -> Vec<String> {
        let mut v: Vec<String> =
            rules.map(|r| format!("{:?}|{:?}|{}|{:?}", r.priority, r.matches, r.cookie, r.actions)).collect();
        v.sort();
        v
    }

    const MATCHES: [&str; 7] =
        ["", "ip,", "tcp,", "tcp,tp_dst=80,", "ip,nw_src=10.0.0.0/8,", "ip,nw_src=10.1.0.0/16,", "udp,"];

    fn op_of(kind: u8, p: u32, m: usize, cookie: u64, out: u32, strict: bool, any_match: bool) -> FlowOp {
        let r = rules(&format!("cookie={cookie},priority={p},{}actions=output:{out}", MATCHES[m])).remove(0);
        let filter = FlowFilter {
            matches: (!any_match).then_some(r.matches),
            strict: strict.then_some(p),
            cookie: if cookie == 2 { (0, 0) } else { (cookie, u64::MAX) },
            out_port: None,
        };
        match kind % 3 {
            0 => FlowOp::Add(r),
            1 => FlowOp::Modify(filter, r.actions),
            _ => FlowOp::Delete(filter),
        }
    }

    /// The definition: each op on a plain list, scanning it.
    fn naive(list: &mut Vec<Rule>, op: &FlowOp) {
        match op {
            FlowOp::Add(r) => {
                list.retain(|o| !(o.priority == r.priority && o.matches == r.matches));
                list.push(r.clone());
            }
            FlowOp::Modify(f, a) => {
                for r in list.iter_mut().filter(|r| f.selects(r)) {
                    r.actions = a.clone();
                }
            }
            FlowOp::Delete(f) => list.retain(|r| !f.selects(r)),
        }
    }

    proptest::proptest! {
        #[test]
        fn transactions_agree_with_the_definition(
            start in proptest::collection::vec((1u32..4, 0usize..7, 0u64..3, 1u32..4), 0..12),
            ops in proptest::collection::vec((0u8..3, 1u32..4, 0usize..7, 0u64..3, 1u32..4, proptest::bool::ANY, proptest::bool::ANY), 1..20),
            keep in proptest::bool::ANY,
        ) {
            let start: Vec<Rule> = start
                .iter()
                .enumerate()
                .map(|(i, &(p, m, c, o))| {
                    let mut r = rules(&format!("cookie={c},priority={p},{}actions=output:{o}", MATCHES[m])).remove(0);
                    r.id = RuleId(i as u32);
                    r
                })
                .collect();
            let mut t = FlowTable::new(start.clone());
            let mut list: Vec<Rule> = t.iter().cloned().collect();
            let before = contents(t.iter());
            let ops: Vec<FlowOp> = ops.iter().map(|&(k, p, m, c, o, s, a)| op_of(k, p, m, c, o, s, a)).collect();
            let mut x = t.txn();
            for op in &ops {
                x.apply(op).unwrap();
                naive(&mut list, op);
            }
            let net = x.net();
            if keep {
                x.keep();
                proptest::prop_assert_eq!(contents(t.iter()), contents(list.iter()));
                // Before − removed + added = after.
                let removed: std::collections::HashSet<RuleId> = net.removed.iter().map(|r| r.id).collect();
                // Removed: flows of the table before, once each; added: flows of the table after.
                let was = FlowTable::new(start.clone());
                proptest::prop_assert_eq!(removed.len(), net.removed.len());
                proptest::prop_assert!(net.removed.iter().all(|r| was.get(r.id).is_some()));
                proptest::prop_assert!(net.added.iter().all(|r| was.get(r.id).is_none() && t.get(r.id).is_some()));
                let mut rebuilt: Vec<Rule> = FlowTable::new(start.clone()).iter().filter(|r| !removed.contains(&r.id)).cloned().collect();
                rebuilt.extend(net.added.iter().cloned());
                proptest::prop_assert_eq!(contents(rebuilt.iter()), contents(t.iter()));
                // The index holds exactly the table.
                proptest::prop_assert_eq!(t.index.len(), t.len());
                for r in t.iter() {
                    proptest::prop_assert_eq!(t.index.get(&(r.priority, r.matches)), Some(&r.id));
                }
            } else {
                drop(x);
                proptest::prop_assert_eq!(contents(t.iter()), before);
            }
        }
    }
}
