//! `TupleSpace`: tuple space search (Srinivasan et al. 1999) as Open vSwitch's classifier does it.
//!
//! One *subtable* per distinct mask; each hashes the packet's key under its mask and finds the
//! rules whose masked value is exactly that. Port ranges cannot be hashed, so each rule is
//! **expanded** into the exact prefix combinations of its port ranges (`Match::expand_port_ranges`;
//! the number of extra entries is reported by [`TupleSpace::expansion`]); every entry of one rule
//! shares its id and priority.
//!
//! **Priority sorting** (OVS's pvector): subtables are kept in descending order of the highest
//! priority they hold, and a lookup stops as soon as the best match found outranks every remaining
//! subtable. Insert and remove touch one hash table per entry plus a reposition of the subtable in
//! the order — O(1) hashing and O(subtables) for the reposition, independent of the rule count.
//!
//! Keys are hashed as the five words of [`FlowKey::to_words`], only over the words the subtable's
//! mask uses.

use std::collections::{BTreeMap, HashMap};

use hashbrown::HashTable;
use rqvs_flow::key::word_map;
use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::classifier::{Classifier, ClassifierError, Remainder};

type Words = rqvs_flow::key::KeyWords;

/// Hash of the words `w & mask` over the words set in `active` (bit i = word i; the mask's
/// [`word_map`]): only the words a subtable's mask uses are read, so a 5-tuple subtable hashes
/// its few narrow words whatever the width of the key.
#[inline(always)]
pub(crate) fn hash_words(w: &Words, mask: &Words, active: u16) -> u64 {
    let mut h: u64 = 0x243f_6a88_85a3_08d3;
    let mut bits = active;
    while bits != 0 {
        let i = bits.trailing_zeros() as usize;
        h = (h.rotate_left(23) ^ (w[i] & mask[i])).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        bits &= bits - 1;
    }
    h ^ (h >> 29)
}

/// Does the stored (masked) `key` equal `w & mask` on the words of `active`? (The stored key is
/// zero outside them.)
#[inline(always)]
fn equal_words(key: &Words, w: &Words, mask: &Words, active: u16) -> bool {
    let mut bits = active;
    while bits != 0 {
        let i = bits.trailing_zeros() as usize;
        if key[i] != w[i] & mask[i] {
            return false;
        }
        bits &= bits - 1;
    }
    true
}

/// All rules (entries) whose masked value is `key`, best first.
struct Bucket {
    key: Words,
    hash: u64,
    /// (priority, id), in winner order.
    rules: Vec<(u32, RuleId)>,
}

struct Subtable {
    mask: Words,
    active: u16,
    table: HashTable<Bucket>,
    /// priority → number of entries with it (for the max after removals).
    priorities: BTreeMap<u32, u32>,
    entries: usize,
}

impl Subtable {
    fn max_priority(&self) -> u32 {
        self.priorities.keys().next_back().copied().unwrap_or(0)
    }
}

/// Where one entry of a rule lives.
struct Placement {
    subtable: u32,
    key: Words,
}

struct Record {
    rule: Rule,
    placements: Vec<Placement>,
}

/// Tuple space search with priority sorting and exact port-range expansion.
#[derive(Default)]
pub struct TupleSpace {
    /// Subtable slots; `None` when freed (its index may be reused).
    subtables: Vec<Option<Subtable>>,
    free: Vec<u32>,
    /// Live subtable indexes, by descending max priority.
    order: Vec<u32>,
    /// Cached max priority of each slot (parallel to `subtables`), read by lookups.
    max_priority: Vec<u32>,
    by_mask: HashMap<Words, u32>,
    rules: HashMap<RuleId, Record>,
    entries: usize,
}

impl TupleSpace {
    /// Builds from rules in any order; duplicate ids are an error.
    pub fn build(rules: &[Rule]) -> Result<TupleSpace, ClassifierError> {
        let mut t = TupleSpace::default();
        for r in rules {
            t.insert(r.clone())?;
        }
        Ok(t)
    }

    /// Number of distinct masks (subtables).
    pub fn subtables(&self) -> usize {
        self.order.len()
    }

    /// Entries added by port-range expansion beyond one per rule.
    pub fn expansion(&self) -> usize {
        self.entries - self.rules.len()
    }

    fn subtable_for(&mut self, mask: Words) -> u32 {
        if let Some(&i) = self.by_mask.get(&mask) {
            return i;
        }
        let active = word_map(&mask);
        let st = Subtable { mask, active, table: HashTable::new(), priorities: BTreeMap::new(), entries: 0 };
        let i = match self.free.pop() {
            Some(i) => {
                self.subtables[i as usize] = Some(st);
                // The slot's cached max belongs to the freed subtable; a new, empty one ranks
                // last, or `order` stops being sorted and `reposition` misplaces its neighbours.
                self.max_priority[i as usize] = 0;
                i
            }
            None => {
                self.subtables.push(Some(st));
                self.max_priority.push(0);
                (self.subtables.len() - 1) as u32
            }
        };
        self.by_mask.insert(mask, i);
        self.order.push(i);
        i
    }

    /// Puts subtable `i` back in its place in `order` after its max priority changed.
    fn reposition(&mut self, i: u32) {
        let Some(st) = self.subtables[i as usize].as_ref() else { return };
        let max = st.max_priority();
        self.max_priority[i as usize] = max;
        if let Some(p) = self.order.iter().position(|&x| x == i) {
            self.order.remove(p);
        }
        let maxes = &self.max_priority;
        let at = self.order.partition_point(|&x| maxes[x as usize] >= max);
        self.order.insert(at, i);
    }

    fn release_if_empty(&mut self, i: u32) {
        let empty = self.subtables[i as usize].as_ref().is_some_and(|s| s.entries == 0);
        if empty {
            let st = self.subtables[i as usize].take().expect("checked above");
            self.by_mask.remove(&st.mask);
            self.order.retain(|&x| x != i);
            self.free.push(i);
        } else {
            self.reposition(i);
        }
    }

    /// The invariant lookups rely on: `order` by descending max priority, and the cache true.
    fn order_is_sorted(&self) -> bool {
        let cached_ok = self.order.iter().all(|&i| {
            self.subtables[i as usize].as_ref().is_some_and(|s| s.max_priority() == self.max_priority[i as usize])
        });
        cached_ok && self.order.windows(2).all(|w| self.max_priority[w[0] as usize] >= self.max_priority[w[1] as usize])
    }

    fn add_entry(&mut self, i: u32, key: Words, prio: u32, id: RuleId) {
        let st = self.subtables[i as usize].as_mut().expect("live subtable");
        let hash = hash_words(&key, &st.mask, st.active);
        let rank = |&(p, id): &(u32, RuleId)| (std::cmp::Reverse(p), id);
        match st.table.find_mut(hash, |b| b.key == key) {
            Some(b) => {
                let at = b.rules.partition_point(|e| rank(e) < (std::cmp::Reverse(prio), id));
                b.rules.insert(at, (prio, id));
            }
            None => {
                st.table.insert_unique(hash, Bucket { key, hash, rules: vec![(prio, id)] }, |b| b.hash);
            }
        }
        *st.priorities.entry(prio).or_insert(0) += 1;
        st.entries += 1;
        self.entries += 1;
    }

    fn remove_entry(&mut self, i: u32, key: &Words, prio: u32, id: RuleId) {
        let st = self.subtables[i as usize].as_mut().expect("live subtable");
        let hash = hash_words(key, &st.mask, st.active);
        if let Ok(mut entry) = st.table.find_entry(hash, |b| b.key == *key) {
            let b = entry.get_mut();
            b.rules.retain(|&(_, x)| x != id);
            if b.rules.is_empty() {
                entry.remove();
            }
        }
        if let Some(n) = st.priorities.get_mut(&prio) {
            *n -= 1;
            if *n == 0 {
                st.priorities.remove(&prio);
            }
        }
        st.entries -= 1;
        self.entries -= 1;
    }
}

impl TupleSpace {
    /// The best of `best` and the rules matching `key`.
    #[inline]
    fn search(&self, key: &FlowKey, mut best: Option<(u32, RuleId)>) -> Option<(u32, RuleId)> {
        let words = key.to_words();
        for &i in &self.order {
            if let Some((bp, _)) = best {
                if self.max_priority[i as usize] < bp {
                    break;
                }
            }
            let Some(st) = self.subtables[i as usize].as_ref() else { continue };
            let hash = hash_words(&words, &st.mask, st.active);
            if let Some(b) = st.table.find(hash, |b| equal_words(&b.key, &words, &st.mask, st.active)) {
                let (p, id) = b.rules[0];
                if best.is_none_or(|(bp, bid)| rqvs_flow::rule::beats(p, id, bp, bid)) {
                    best = Some((p, id));
                }
            }
        }
        best
    }
}

impl Remainder for TupleSpace {
    fn lookup_beating(&self, key: &FlowKey, floor: Option<(u32, RuleId)>) -> Option<(u32, RuleId)> {
        self.search(key, floor).filter(|b| Some(*b) != floor)
    }
}

impl Classifier for TupleSpace {
    fn name(&self) -> &'static str {
        "tss"
    }

    fn lookup(&self, key: &FlowKey) -> Option<RuleId> {
        self.search(key, None).map(|(_, id)| id)
    }

    fn insert(&mut self, rule: Rule) -> Result<(), ClassifierError> {
        if self.rules.contains_key(&rule.id) {
            return Err(ClassifierError::DuplicateId(rule.id));
        }
        let expanded = rule.matches.expand_port_ranges();
        if self.entries + expanded.len() > crate::ofproto::MAX_EXPANDED {
            return Err(ClassifierError::Unsupported(
                rule.id,
                format!(
                    "its port ranges expand to {} prefixes, past the limit of {} expanded entries ({} already)",
                    expanded.len(),
                    crate::ofproto::MAX_EXPANDED,
                    self.entries
                ),
            ));
        }
        let mut placements = Vec::new();
        let mut touched = Vec::new();
        for m in expanded {
            let mask = m.mask().to_words();
            let key = m.value().to_words();
            let i = self.subtable_for(mask);
            self.add_entry(i, key, rule.priority, rule.id);
            placements.push(Placement { subtable: i, key });
            touched.push(i);
        }
        touched.sort_unstable();
        touched.dedup();
        for i in touched {
            self.reposition(i);
        }
        self.rules.insert(rule.id, Record { rule, placements });
        debug_assert!(self.order_is_sorted());
        Ok(())
    }

    fn remove(&mut self, id: RuleId) -> Option<Rule> {
        let rec = self.rules.remove(&id)?;
        let mut touched = Vec::new();
        for p in &rec.placements {
            self.remove_entry(p.subtable, &p.key, rec.rule.priority, id);
            touched.push(p.subtable);
        }
        touched.sort_unstable();
        touched.dedup();
        for i in touched {
            self.release_if_empty(i);
        }
        debug_assert!(self.order_is_sorted());
        Some(rec.rule)
    }

    fn len(&self) -> usize {
        self.rules.len()
    }

    fn stats(&self) -> Vec<(&'static str, f64)> {
        vec![("subtables", self.subtables() as f64), ("expansion", self.expansion() as f64)]
    }

    fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        let mut bytes = size_of::<Self>()
            + self.subtables.capacity() * size_of::<Option<Subtable>>()
            + self.order.capacity() * 4
            + self.max_priority.capacity() * 4
            + self.by_mask.capacity() * (size_of::<Words>() + 4)
            + self.rules.capacity() * (size_of::<RuleId>() + size_of::<Record>());
        for st in self.subtables.iter().flatten() {
            bytes += st.table.capacity() * (size_of::<Bucket>() + 1);
            bytes += st.table.iter().map(|b| b.rules.capacity() * size_of::<(u32, RuleId)>()).sum::<usize>();
            bytes += st.priorities.len() * 16;
        }
        bytes += self.rules.values().map(|r| r.placements.capacity() * size_of::<Placement>()).sum::<usize>();
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn remainder_lookups(case in testing::arb_case()) {
            testing::check_remainder(&case, &TupleSpace::build(&case.rules).unwrap())?;
        }

        #[test]
        fn differential_with_updates(case in testing::arb_case()) {
            testing::check_differential(&case, |rules| Box::new(TupleSpace::build(rules).unwrap()))?;
        }

        /// Churn that frees and reuses subtable slots keeps `order` sorted after every update
        /// (a reused slot once kept its old cached max and broke lookups after re-insertion).
        #[test]
        fn order_stays_sorted_under_churn(case in testing::arb_case(), picks in prop::collection::vec(any::<prop::sample::Index>(), 1..40)) {
            let mut t = TupleSpace::build(&case.rules).unwrap();
            let mut out: Vec<Rule> = Vec::new();
            for (n, ix) in picks.iter().enumerate() {
                if n % 3 == 2 && !out.is_empty() {
                    t.insert(out.remove(ix.index(out.len()))).unwrap();
                } else {
                    let live: Vec<RuleId> = case.rules.iter().map(|r| r.id).filter(|id| t.rules.contains_key(id)).collect();
                    if live.is_empty() { continue; }
                    out.push(t.remove(live[ix.index(live.len())]).unwrap());
                }
                prop_assert!(t.order_is_sorted(), "after update {}", n);
            }
            for r in out { t.insert(r).unwrap(); prop_assert!(t.order_is_sorted()); }
        }
    }

    #[test]
    fn empty_subtables_are_released_and_reused() {
        let rules = rqvs_flow::formats::classbench::parse_rules(
            "t",
            "@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t1024 : 65535\t0x06/0xFF\t0x0000/0x0000\t\n\
             @10.0.0.0/16\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x06/0xFF\t0x0000/0x0000\t\n",
        )
        .unwrap();
        let mut t = TupleSpace::build(&rules).unwrap();
        assert_eq!(t.expansion(), 5);
        assert_eq!(t.subtables(), 7);
        t.remove(RuleId(0)).unwrap();
        assert_eq!((t.subtables(), t.expansion(), t.len()), (1, 0, 1));
        t.insert(rules[0].clone()).unwrap();
        assert_eq!(t.subtables(), 7);
        assert_eq!(t.subtables.len(), 7, "slots are reused");
    }
}
