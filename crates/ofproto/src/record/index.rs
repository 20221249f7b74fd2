//! The table of record's index: OpenFlow's identity of a flow — (table, priority, match) —
//! to the flow's id, as the low 32 bits of the identity's 64-bit hash beside the id. The
//! identity itself is not stored: a hit on the hash is confirmed on the flow (the caller's
//! `is`), so a collision costs a compare, never a wrong answer.
//!
//! It replaced a map keyed by the identity (a `Match` is two wide keys and two port ranges,
//! ~250 bytes an entry): with it the switch's peak memory at acl1_500k's 677K flows was
//! 255 MB higher, every probe compared 250-byte keys in a table that fits no cache, and
//! growing it rehashed every key. Here an entry is 8 bytes, the identity is compared only on
//! a hash hit, on the flow, and growing rehashes nothing (the hash bits are stored).
//!
//! An open-addressing table of our own (linear probing, at most half full, removal by
//! shifting the entries after back, so no tombstones), not hashbrown's: a run of flow-mods
//! asks for the line each one will probe ([`FlowIndex::prefetch`]) several flow-mods ahead,
//! which needs the slot to be a function of the hash. At 500K flows the table is 8 MB and
//! every probe was a miss, taken one after another (docs/openflow-bench.md, "The connection's
//! share").

use std::fmt;
use std::hash::BuildHasher;

use hashbrown::DefaultHashBuilder;
use rqvs_flow::{Match, RuleId};

/// A flow's identity in the table of record: (table, priority, match), borrowed (a `Match`
/// is ~250 bytes: hashed and compared where it is, not copied into a key).
pub(crate) type Identity<'a> = (u8, u32, &'a Match);

/// An entry: the hash's low 32 bits (its slot is their low bits) and the flow's id.
#[derive(Clone, Copy)]
struct Entry {
    lo: u32,
    id: u32,
}

/// A free slot's id: [`crate::NO_RULE`]'s, which no flow has ([`crate::record`] hands out ids
/// below it).
const FREE: u32 = u32::MAX;
const EMPTY: Entry = Entry { lo: 0, id: FREE };
/// Slots of a new index.
const MIN_SLOTS: usize = 16;

/// The index (module docs).
#[derive(Clone)]
pub(crate) struct FlowIndex {
    /// A power of two long, at most half full.
    slots: Box<[Entry]>,
    len: usize,
    hasher: DefaultHashBuilder,
}

impl Default for FlowIndex {
    fn default() -> FlowIndex {
        FlowIndex::with_capacity(0)
    }
}

impl FlowIndex {
    pub(crate) fn with_capacity(n: usize) -> FlowIndex {
        let slots = (n.saturating_mul(2)).next_power_of_two().max(MIN_SLOTS);
        FlowIndex { slots: vec![EMPTY; slots].into_boxed_slice(), len: 0, hasher: DefaultHashBuilder::default() }
    }

    /// The hash every other call takes for `key`.
    #[inline]
    pub(crate) fn hash(&self, key: Identity<'_>) -> u64 {
        self.hasher.hash_one(key)
    }

    #[inline(always)]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The slot a probe for hash bits `lo` starts at.
    #[inline(always)]
    fn home(&self, lo: u32) -> usize {
        lo as usize & self.mask()
    }

    /// Asks for the line a probe for `h` starts at (a hint: nothing changes).
    #[inline]
    pub(crate) fn prefetch(&self, h: u64) {
        rqvs_classify::prefetch::prefetch(&self.slots[self.home(h as u32)]);
    }

    /// The slot of the first entry of hash `h` for which `pick` holds; `Err` with the free
    /// slot the probe ended at when none does.
    #[inline]
    fn probe(&self, h: u64, mut pick: impl FnMut(u32) -> bool) -> Result<usize, usize> {
        let lo = h as u32;
        let mut i = self.home(lo);
        loop {
            let e = self.slots[i];
            if e.id == FREE {
                return Err(i);
            }
            if e.lo == lo && pick(e.id) {
                return Ok(i);
            }
            i = (i + 1) & self.mask();
        }
    }

    /// The flow whose identity hashes to `h` and for which `is` (does this flow have the
    /// identity?) holds.
    #[inline]
    pub(crate) fn get(&self, h: u64, is: impl Fn(RuleId) -> bool) -> Option<RuleId> {
        self.probe(h, |id| is(RuleId(id))).ok().map(|i| RuleId(self.slots[i].id))
    }

    /// Makes `id` the flow at the identity hashed `h` (`is` as in [`get`](Self::get), asked of
    /// the flows already there): the id it replaces, if any.
    ///
    /// # Panics
    /// For [`crate::NO_RULE`]'s id, which no flow has.
    pub(crate) fn insert(&mut self, h: u64, id: RuleId, is: impl Fn(RuleId) -> bool) -> Option<RuleId> {
        assert!(id.0 != FREE, "the index holds no flow of id {FREE} (NO_RULE)");
        match self.probe(h, |o| is(RuleId(o))) {
            Ok(i) => Some(RuleId(std::mem::replace(&mut self.slots[i].id, id.0))),
            Err(mut i) => {
                if (self.len + 1) * 2 > self.slots.len() {
                    self.grow();
                    i = self.free_slot(h);
                }
                self.slots[i] = Entry { lo: h as u32, id: id.0 };
                self.len += 1;
                None
            }
        }
    }

    /// Removes flow `id` from the identity hashed `h`; false when it is not the flow there.
    pub(crate) fn remove(&mut self, h: u64, id: RuleId) -> bool {
        let Ok(mut hole) = self.probe(h, |o| o == id.0) else { return false };
        // Backward shift: each entry after the hole, up to the next free slot, moves into the
        // hole when the hole lies between its home and where it is (cyclically), so every
        // probe still reaches it without crossing a free slot.
        let mut j = hole;
        loop {
            j = (j + 1) & self.mask();
            let e = self.slots[j];
            if e.id == FREE {
                break;
            }
            let home = self.home(e.lo);
            let dist_home = j.wrapping_sub(home) & self.mask();
            let dist_hole = j.wrapping_sub(hole) & self.mask();
            if dist_home >= dist_hole {
                self.slots[hole] = e;
                hole = j;
            }
        }
        self.slots[hole] = EMPTY;
        self.len -= 1;
        true
    }

    /// Twice the slots, every entry placed again from its stored hash bits.
    fn grow(&mut self) {
        let doubled = vec![EMPTY; self.slots.len() * 2].into_boxed_slice();
        let old = std::mem::replace(&mut self.slots, doubled);
        for e in old.iter().filter(|e| e.id != FREE) {
            let i = self.free_slot(u64::from(e.lo));
            self.slots[i] = *e;
        }
    }

    /// The free slot a probe for hash `h` ends at.
    fn free_slot(&self, h: u64) -> usize {
        self.probe(h, |_| false).expect_err("only free slots end a probe that picks nothing")
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Every (hash bits, id), sorted: what two indexes are compared by.
    fn sorted(&self) -> Vec<(u32, RuleId)> {
        let mut v: Vec<(u32, RuleId)> =
            self.slots.iter().filter(|e| e.id != FREE).map(|e| (e.lo, RuleId(e.id))).collect();
        v.sort_unstable();
        v
    }
}

/// Equal when they hold the same (hash, id) entries (indexes cloned from one another share
/// their hasher; otherwise the hashes differ).
impl PartialEq for FlowIndex {
    fn eq(&self, other: &FlowIndex) -> bool {
        self.sorted() == other.sorted()
    }
}

impl fmt::Debug for FlowIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.sorted().iter().map(|e| e.1)).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hash that every identity shares: the flows are told apart by `is` alone.
    #[test]
    fn colliding_hashes_are_told_apart_on_the_flow() {
        let mut ix = FlowIndex::default();
        let owner = |id: RuleId| id.0 % 10; // the "identity" of flow id: its last digit
        let is = |want: u32| move |id: RuleId| owner(id) == want;
        assert_eq!(ix.insert(7, RuleId(1), is(1)), None);
        assert_eq!(ix.insert(7, RuleId(2), is(2)), None);
        assert_eq!(ix.get(7, is(1)), Some(RuleId(1)));
        assert_eq!(ix.get(7, is(2)), Some(RuleId(2)));
        assert_eq!(ix.get(7, is(3)), None);
        assert_eq!(ix.get(8, is(1)), None, "another hash");
        // Flow 11 takes identity 1's place from flow 1.
        assert_eq!(ix.insert(7, RuleId(11), is(1)), Some(RuleId(1)));
        assert_eq!(ix.get(7, is(1)), Some(RuleId(11)));
        assert_eq!(ix.len(), 2);
        assert!(!ix.remove(7, RuleId(1)), "no longer there");
        assert!(ix.remove(7, RuleId(11)));
        assert_eq!(ix.get(7, is(1)), None);
        assert_eq!(ix.get(7, is(2)), Some(RuleId(2)));
        assert_eq!(ix.len(), 1);
    }

    proptest::proptest! {
        /// Inserts and removes under few hash values (long runs that wrap around the end of
        /// the slots, removals that shift entries back across it) against a list of the
        /// (hash, identity, id) entries.
        #[test]
        fn the_index_is_its_entries(ops in proptest::collection::vec((0u8..3, 0u64..6, 0u32..8, any_top()), 1..300)) {
            let mut ix = FlowIndex::default();
            let mut model: Vec<(u64, u32, u32)> = Vec::new(); // (hash, identity, id)
            let mut next = 0u32;
            for (what, h, identity, top) in ops {
                // Hash bits above the slot's: entries of one slot that differ there.
                let h = h * 15 + (u64::from(top) << 40) + (u64::from(top & 1) << 31);
                let ident_of = |model: &Vec<(u64, u32, u32)>, id: RuleId| {
                    model.iter().find(|e| e.2 == id.0).map(|e| e.1)
                };
                match what {
                    0 => {
                        let id = RuleId(next);
                        next += 1;
                        let m = model.clone();
                        let got = ix.insert(h, id, |o| ident_of(&m, o) == Some(identity));
                        let at = model.iter().position(|e| (e.0 as u32, e.1) == (h as u32, identity));
                        let want = at.map(|p| RuleId(std::mem::replace(&mut model[p].2, id.0)));
                        if at.is_none() {
                            model.push((h, identity, id.0));
                        }
                        proptest::prop_assert_eq!(got, want);
                    }
                    1 => {
                        // Remove some flow of the model (or one that is not there).
                        let pick = model.iter().position(|e| e.1 == identity);
                        let (hh, id) = pick.map_or((h, RuleId(next + 7)), |p| (model[p].0, RuleId(model[p].2)));
                        let want = pick.is_some();
                        if let Some(p) = pick {
                            model.remove(p);
                        }
                        proptest::prop_assert_eq!(ix.remove(hh, id), want);
                    }
                    _ => {}
                }
                proptest::prop_assert_eq!(ix.len(), model.len());
                for &(eh, ident, id) in &model {
                    let m = model.clone();
                    proptest::prop_assert_eq!(ix.get(eh, |o| ident_of(&m, o) == Some(ident)), Some(RuleId(id)));
                }
                proptest::prop_assert_eq!(ix.get(h, |_| false), None);
            }
        }
    }

    fn any_top() -> impl proptest::strategy::Strategy<Value = u8> {
        0u8..4
    }

    #[test]
    fn growing_keeps_every_entry() {
        let mut ix = FlowIndex::with_capacity(1);
        for i in 0..10_000u32 {
            let h = u64::from(i % 97); // many collisions per hash
            assert_eq!(ix.insert(h, RuleId(i), |id| id == RuleId(i)), None);
        }
        assert_eq!(ix.len(), 10_000);
        for i in 0..10_000u32 {
            assert_eq!(ix.get(u64::from(i % 97), |id| id == RuleId(i)), Some(RuleId(i)));
        }
        let clone = ix.clone();
        assert_eq!(clone, ix);
        assert!(ix.remove(3, RuleId(3)));
        assert_ne!(clone, ix);
    }
}
