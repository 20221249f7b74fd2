//! NuevoMatchUP's rule map: every rule's id, where it lives, and — only when neither its iSet
//! candidate nor the remainder can give it back — its stored form. A slot is 16 bytes (id, a
//! location packed in 32 bits, an optional shared pointer), in an [`IdMap`] (open addressing,
//! 1.25 slots a rule: 20 bytes a rule, where a `hashbrown` table was 47% full at 500K rules,
//! ≈ 36 bytes a rule with its control bytes).
//!
//! A plain 5-tuple rule (action `drop`, cookie 0, table 0, nothing its slot and pre-filter entry
//! do not hold) held by an iSet keeps no stored rule: its slot holds every bit of it
//! (`slot::Slot::whole_rule`), and the rule is made from it when asked for
//! (`remove`, `rules`, a trainer's snapshot). Whether a rule may do without is decided by making
//! it back from its candidate and comparing with the rule itself, never by looking at its fields.

use std::sync::Arc;

use rqvs_flow::RuleId;

use crate::idmap::{IdMap, IdSlot};
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
    /// No location [`At::new`] makes (iSet 255 is beyond the limit): marks an empty map slot.
    const EMPTY: At = At(0xFF00_0000);

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

impl IdSlot for Kept {
    fn empty() -> Self {
        Kept { id: RuleId(0), at: At::EMPTY, stored: None }
    }
    fn is_empty(&self) -> bool {
        self.at == At::EMPTY
    }
    fn id(&self) -> RuleId {
        self.id
    }
}

/// The rules by id, 16 bytes a slot (see [`IdMap`]).
pub(crate) type RuleMap = IdMap<Kept>;

impl RuleMap {
    /// Bytes: the slots, and the stored rules the map keeps (each with its `Arc` counts and heap
    /// words).
    pub(crate) fn bytes_with_stored(&self) -> usize {
        self.memory_bytes()
            + self
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

    /// A map built for `n` rules holds them in 1.25 `n` slots (20 bytes a rule), not a power of
    /// two.
    #[test]
    fn a_sized_map_is_80_percent_full() {
        let n = 497_820;
        let mut m = RuleMap::with_capacity(n);
        for i in 0..n as u32 {
            assert!(m.insert(Kept { id: RuleId(i * 3), at: At::REMAINDER, stored: None }));
        }
        assert_eq!(m.bytes_with_stored(), (n + n / 4 + 1) * 16);
        assert!(m.get(RuleId(3 * 1000)).is_some() && m.get(RuleId(3 * 1000 + 1)).is_none());
    }
}
