//! NuevoMatchUP's rule map: every rule's id, where it lives, and — only when its iSet candidate
//! cannot give it back — its stored form. A slot is 16 bytes (id, a location packed in 32 bits,
//! an optional shared pointer), in a hash table keyed by hand (a `HashMap<RuleId, (…)>` would
//! pad its slot to 24).
//!
//! A plain 5-tuple rule (action `drop`, cookie 0, table 0, nothing its slot and pre-filter entry
//! do not hold) held by an iSet keeps no stored rule: its slot holds every bit of it
//! (`slot::Slot::whole_rule`), and the rule is made from it when asked for
//! (`remove`, `rules`, a trainer's snapshot). Whether a rule may do without is decided by making
//! it back from its candidate and comparing with the rule itself, never by looking at its fields.

use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::hash_table::Entry;
use hashbrown::{DefaultHashBuilder, HashTable};
use rqvs_flow::RuleId;

use crate::stored::StoredRule;

/// Where a rule lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Location {
    ISet { iset: usize, bucket: usize },
    Remainder,
}

/// A [`Location`] in 32 bits: the iSet in the top 8, the bucket in the low 24; all ones for the
/// remainder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct At(u32);

impl At {
    /// iSets a location can name (the all-ones value is the remainder's).
    pub(crate) const MAX_ISETS: usize = 255;
    /// Buckets per iSet a location can name.
    pub(crate) const MAX_BUCKETS: usize = 1 << 24;
    pub(crate) const REMAINDER: At = At(u32::MAX);

    /// The packed location; `None` when the iSet or the bucket is beyond the limits above.
    pub(crate) fn new(loc: Location) -> Option<At> {
        match loc {
            Location::Remainder => Some(At::REMAINDER),
            Location::ISet { iset, bucket } if iset < Self::MAX_ISETS && bucket < Self::MAX_BUCKETS => {
                Some(At(((iset as u32) << 24) | bucket as u32))
            }
            Location::ISet { .. } => None,
        }
    }

    pub(crate) fn get(self) -> Location {
        if self == At::REMAINDER {
            Location::Remainder
        } else {
            Location::ISet { iset: (self.0 >> 24) as usize, bucket: (self.0 & 0xFF_FFFF) as usize }
        }
    }
}

/// One rule of the map.
#[derive(Clone, Debug)]
pub(crate) struct Kept {
    pub(crate) id: RuleId,
    pub(crate) at: At,
    /// The rule's stored form; `None` when its iSet candidate gives it back whole.
    pub(crate) stored: Option<Arc<StoredRule>>,
}

/// The rules by id.
#[derive(Clone, Default)]
pub(crate) struct RuleMap {
    table: HashTable<Kept>,
    hasher: DefaultHashBuilder,
}

impl RuleMap {
    pub(crate) fn with_capacity(n: usize) -> RuleMap {
        RuleMap { table: HashTable::with_capacity(n), hasher: DefaultHashBuilder::default() }
    }

    #[inline]
    fn hash(&self, id: RuleId) -> u64 {
        self.hasher.hash_one(id)
    }

    /// Adds `k`; `false` (and the map unchanged) when its id is there already.
    pub(crate) fn insert(&mut self, k: Kept) -> bool {
        let h = self.hash(k.id);
        let hasher = &self.hasher;
        match self.table.entry(h, |x| x.id == k.id, |x| hasher.hash_one(x.id)) {
            Entry::Occupied(_) => false,
            Entry::Vacant(v) => {
                v.insert(k);
                true
            }
        }
    }

    pub(crate) fn get(&self, id: RuleId) -> Option<&Kept> {
        self.table.find(self.hash(id), |x| x.id == id)
    }

    pub(crate) fn contains(&self, id: RuleId) -> bool {
        self.get(id).is_some()
    }

    pub(crate) fn remove(&mut self, id: RuleId) -> Option<Kept> {
        let h = self.hash(id);
        self.table.find_entry(h, |x| x.id == id).ok().map(|e| e.remove().0)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Kept> {
        self.table.iter()
    }

    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Bytes: the table's whole allocation (slots and control bytes, at its real bucket count),
    /// and the stored rules it keeps (each with its `Arc` counts and heap words).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.table.allocation_size()
            + self
                .table
                .iter()
                .filter_map(|k| k.stored.as_ref())
                .map(|r| std::mem::size_of::<StoredRule>() + 2 * std::mem::size_of::<usize>() + r.heap_bytes())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_16_bytes() {
        assert_eq!(std::mem::size_of::<Kept>(), 16);
    }

    #[test]
    fn locations_pack_and_unpack() {
        for loc in [
            Location::Remainder,
            Location::ISet { iset: 0, bucket: 0 },
            Location::ISet { iset: 3, bucket: 12_345 },
            Location::ISet { iset: At::MAX_ISETS - 1, bucket: At::MAX_BUCKETS - 1 },
        ] {
            assert_eq!(At::new(loc).unwrap().get(), loc);
        }
        assert_eq!(At::new(Location::ISet { iset: At::MAX_ISETS, bucket: 0 }), None);
        assert_eq!(At::new(Location::ISet { iset: 0, bucket: At::MAX_BUCKETS }), None);
    }

    #[test]
    fn insert_get_remove() {
        let mut m = RuleMap::default();
        for i in 0..1000 {
            assert!(m.insert(Kept { id: RuleId(i), at: At::REMAINDER, stored: None }));
        }
        assert!(!m.insert(Kept {
            id: RuleId(7),
            at: At::new(Location::ISet { iset: 1, bucket: 2 }).unwrap(),
            stored: None
        }));
        assert_eq!(m.get(RuleId(7)).unwrap().at, At::REMAINDER);
        assert_eq!(m.len(), 1000);
        assert_eq!(m.remove(RuleId(7)).unwrap().id, RuleId(7));
        assert!(m.remove(RuleId(7)).is_none() && !m.contains(RuleId(7)) && m.contains(RuleId(8)));
        assert_eq!(m.iter().count(), 999);
    }
}
