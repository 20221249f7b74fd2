//! Rule chains as attribution ids: every rule a packet passes in the pipeline is credited
//! (OVS's xlate cache on a megaflow credits each rule of the translation), yet the fast path
//! attributes a packet with one `Copy` id (`rqvs_datapath::Design::batch_rules`,
//! `rqvs_datapath::dpcls::MegaflowEntry::rule`, [`crate::table::Verdict::rule`]).
//!
//! A chain of one rule is that rule's id, as before pipelines existed. A longer chain is
//! **interned**: equal chains get the same id, a [`RuleId`] with [`CHAIN_BIT`] set (rule ids of
//! the switch and of rule files stay far below 2^31), which [`for_each_rule`] expands. So a
//! revalidation that finds the same chain keeps the megaflow's id (ids compare equal exactly
//! when the chains do), and the per-flow counters credit each rule of the chain.
//!
//! **Pipeline credits.** An interned chain also carries what the pipeline's counters credit
//! besides the rules ([`Credit`]): each lookup after the packet's first (in table 0) with its
//! table and whether a rule matched (OpenFlow TABLE stats: OVS counts a lookup per table
//! visited, a match when a flow matched), and each group the packet went through with the
//! buckets it took (GROUP stats). A chain with any credit is interned even when it holds one
//! rule ([`attribution_of`]), so a packet's id says all of it; one lookup in table 0 that
//! matched is that rule's id, as before.
//!
//! The table is append-only and read without a lock (segments of slots written once), like the
//! action table ([`crate::actions`]); it grows with the number of distinct chains ever seen,
//! never with packets. Past [`LIMIT`] chains a new chain is attributed to its first rule only
//! (the others' counters then miss those packets; [`stats`] counts such chains).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use hashbrown::HashMap;
use rqvs_flow::RuleId;

/// Set in the id of an interned chain of two rules or more.
pub const CHAIN_BIT: u32 = 1 << 31;
/// Chains the table holds at most (2^20).
pub const LIMIT: usize = 1 << 20;
const SEGMENTS: usize = 21;

/// What a packet's pass through the pipeline credits besides its rules (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Credit {
    /// A lookup in `table` (after the packet's first), which a rule matched or not.
    Lookup { table: u8, matched: bool },
    /// The packet went through group `group` (once per time).
    Group(u32),
    /// ... and took its bucket number `bucket` (0-based, in the group's order).
    Bucket { group: u32, bucket: u32 },
}

/// An interned chain: its rules and its credits.
type Entry = (Box<[RuleId]>, Box<[Credit]>);
type Slot = OnceLock<Entry>;

struct Table {
    /// Segment `s` holds `2^s` slots: chain `i` is in segment `log2(i + 1)`.
    segments: [OnceLock<Box<[Slot]>>; SEGMENTS],
    index: Mutex<HashMap<Entry, u32>>,
    len: AtomicUsize,
    refused: AtomicU64,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| Table {
        segments: std::array::from_fn(|_| OnceLock::new()),
        index: Mutex::new(HashMap::new()),
        len: AtomicUsize::new(0),
        refused: AtomicU64::new(0),
    })
}

fn slot_of(i: u32) -> (usize, usize) {
    let n = i + 1;
    let seg = (31 - n.leading_zeros()) as usize;
    (seg, (n - (1 << seg)) as usize)
}

/// The attribution id of the chain `rules` (in order, each once): `None` for no rule, the rule
/// itself for one, an interned id for more (module docs).
pub fn attribution(rules: &[RuleId]) -> Option<RuleId> {
    attribution_with(rules, &[])
}

/// The attribution id of a translation: its rules and its credits ([`Credit`]: the lookups
/// after the first, the groups and buckets), `None` when no rule matched.
pub fn attribution_of(x: &crate::xlate::Xlate) -> Option<RuleId> {
    let mut credits: Vec<Credit> =
        x.chain.iter().skip(1).map(|l| Credit::Lookup { table: l.table, matched: l.rule.is_some() }).collect();
    for (g, buckets) in &x.groups {
        credits.push(Credit::Group(*g));
        credits.extend(buckets.iter().map(|&b| Credit::Bucket { group: *g, bucket: b }));
    }
    attribution_with(&x.rules(), &credits)
}

/// [`attribution`] with credits: interned whenever there are any.
pub fn attribution_with(rules: &[RuleId], credits: &[Credit]) -> Option<RuleId> {
    match (rules, credits) {
        ([], _) => None,
        ([one], []) => Some(*one),
        _ => Some(intern(rules, credits)),
    }
}

fn intern(rules: &[RuleId], credits: &[Credit]) -> RuleId {
    let t = table();
    let mut index = t.index.lock().unwrap_or_else(|e| e.into_inner());
    let key: Entry = (rules.into(), credits.into());
    if let Some(&i) = index.get(&key) {
        return RuleId(CHAIN_BIT | i);
    }
    let i = t.len.load(Ordering::Relaxed);
    if i >= LIMIT {
        t.refused.fetch_add(1, Ordering::Relaxed);
        return rules[0];
    }
    let (seg, off) = slot_of(i as u32);
    let segment = t.segments[seg].get_or_init(|| (0..1usize << seg).map(|_| OnceLock::new()).collect());
    // The slot is new (the index did not know the chain, and `len` only grows under the lock).
    let _ = segment[off].set(key.clone());
    index.insert(key, i as u32);
    t.len.store(i + 1, Ordering::Release);
    RuleId(CHAIN_BIT | i as u32)
}

/// Calls `f` on each rule of attribution id `id` (module docs): the rule itself, or each rule
/// of the chain. [`crate::NO_RULE`] and unknown chains: nothing.
#[inline]
pub fn for_each_rule(id: RuleId, mut f: impl FnMut(RuleId)) {
    if id == crate::NO_RULE {
        return;
    }
    if id.0 & CHAIN_BIT == 0 {
        f(id);
        return;
    }
    for &r in rules(id) {
        f(r);
    }
}

fn entry(id: RuleId) -> Option<&'static Entry> {
    if id.0 & CHAIN_BIT == 0 || id == crate::NO_RULE {
        return None;
    }
    let (seg, off) = slot_of(id.0 & !CHAIN_BIT);
    table().segments.get(seg).and_then(OnceLock::get).and_then(|s| s.get(off)).and_then(OnceLock::get)
}

/// The rules of an interned chain (empty for an id that is not one).
pub fn rules(id: RuleId) -> &'static [RuleId] {
    entry(id).map_or(&[], |e| &e.0)
}

/// The credits of an interned chain (empty for an id that is not one: a single rule's lookup
/// in table 0).
pub fn credits(id: RuleId) -> &'static [Credit] {
    entry(id).map_or(&[], |e| &e.1)
}

/// The first rule of attribution id `id` (table 0's, for a chain).
pub fn first_rule(id: RuleId) -> Option<RuleId> {
    let mut first = None;
    for_each_rule(id, |r| {
        first.get_or_insert(r);
    });
    first
}

/// Chains held, and chains attributed to their first rule because the table was full.
pub fn stats() -> (usize, u64) {
    let t = table();
    (t.len.load(Ordering::Acquire), t.refused.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_intern_and_expand() {
        assert_eq!(attribution(&[]), None);
        assert_eq!(attribution(&[RuleId(7)]), Some(RuleId(7)));
        let a = attribution(&[RuleId(1), RuleId(2), RuleId(3)]).unwrap();
        let b = attribution(&[RuleId(1), RuleId(2), RuleId(3)]).unwrap();
        let c = attribution(&[RuleId(1), RuleId(3)]).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.0 & CHAIN_BIT != 0);
        let mut seen = Vec::new();
        for_each_rule(a, |r| seen.push(r));
        assert_eq!(seen, [RuleId(1), RuleId(2), RuleId(3)]);
        let mut one = Vec::new();
        for_each_rule(RuleId(9), |r| one.push(r));
        assert_eq!(one, [RuleId(9)]);
        for_each_rule(crate::NO_RULE, |_| panic!("no rule"));
        assert_eq!(first_rule(c), Some(RuleId(1)));
        for i in 0..100u32 {
            let id = attribution(&[RuleId(i), RuleId(i + 1000)]).unwrap();
            assert_eq!(rules(id), [RuleId(i), RuleId(i + 1000)]);
        }
        // One rule with credits is interned; equal credits, equal ids.
        let cr =
            [Credit::Lookup { table: 1, matched: false }, Credit::Group(4), Credit::Bucket { group: 4, bucket: 1 }];
        let d = attribution_with(&[RuleId(7)], &cr).unwrap();
        assert!(d.0 & CHAIN_BIT != 0);
        assert_eq!((rules(d), credits(d)), (&[RuleId(7)][..], &cr[..]));
        assert_eq!(attribution_with(&[RuleId(7)], &cr), Some(d));
        assert_ne!(attribution_with(&[RuleId(7)], &cr[..1]), Some(d));
        assert!(credits(RuleId(7)).is_empty());
    }
}
