//! The table of record's index: OpenFlow's identity of a flow — (table, priority, match) —
//! to the flow's id, as the identity's 64-bit hash beside the id. The identity itself is not
//! stored: a hit on the hash is confirmed on the flow (the caller's `is`), so a collision
//! costs a compare, never a wrong answer.
//!
//! It replaced a map keyed by the identity (a `Match` is two wide keys and two port ranges,
//! ~250 bytes an entry): with it the switch's peak memory at acl1_500k's 677K flows was
//! 255 MB higher, every probe compared 250-byte keys in a table that fits no cache, and
//! growing it rehashed every key. Here an entry is 16 bytes, the identity is compared only on
//! a hash hit, on the flow, and growing rehashes nothing (the hash is stored). A flow-mod still
//! hashes its identity twice (an add: find, insert; a strict delete: find, remove), where the
//! map hashed it two or three times.

use std::fmt;
use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};
use rqvs_flow::{Match, RuleId};

/// A flow's identity in the table of record: (table, priority, match), borrowed (a `Match`
/// is ~250 bytes: hashed and compared where it is, not copied into a key).
pub(crate) type Identity<'a> = (u8, u32, &'a Match);

/// The index (module docs).
#[derive(Clone, Default)]
pub(crate) struct FlowIndex {
    entries: HashTable<(u64, RuleId)>,
    hasher: DefaultHashBuilder,
}

impl FlowIndex {
    pub(crate) fn with_capacity(n: usize) -> FlowIndex {
        FlowIndex { entries: HashTable::with_capacity(n), hasher: DefaultHashBuilder::default() }
    }

    /// The hash every other call takes for `key`.
    #[inline]
    pub(crate) fn hash(&self, key: Identity<'_>) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The flow whose identity hashes to `h` and for which `is` (does this flow have the
    /// identity?) holds.
    #[inline]
    pub(crate) fn get(&self, h: u64, is: impl Fn(RuleId) -> bool) -> Option<RuleId> {
        self.entries.find(h, |&(eh, id)| eh == h && is(id)).map(|e| e.1)
    }

    /// Makes `id` the flow at the identity hashed `h` (`is` as in [`get`](Self::get), asked of
    /// the flows already there): the id it replaces, if any.
    pub(crate) fn insert(&mut self, h: u64, id: RuleId, is: impl Fn(RuleId) -> bool) -> Option<RuleId> {
        if let Some(e) = self.entries.find_mut(h, |&(eh, o)| eh == h && is(o)) {
            return Some(std::mem::replace(&mut e.1, id));
        }
        self.entries.insert_unique(h, (h, id), |e| e.0);
        None
    }

    /// Removes flow `id` from the identity hashed `h`; false when it is not the flow there.
    pub(crate) fn remove(&mut self, h: u64, id: RuleId) -> bool {
        match self.entries.find_entry(h, |&(eh, o)| eh == h && o == id) {
            Ok(e) => {
                e.remove();
                true
            }
            Err(_) => false,
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Every (hash, id), sorted: what two indexes are compared by.
    fn sorted(&self) -> Vec<(u64, RuleId)> {
        let mut v: Vec<(u64, RuleId)> = self.entries.iter().copied().collect();
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
