//! NuevoMatchUP's rule map: every rule's id, where it lives, and — only when its iSet candidate
//! cannot give it back — its stored form. A slot is 16 bytes (id, a location packed in 32 bits,
//! an optional shared pointer), in an open-addressing table of its own: linear probing from the
//! id's home slot, removal by backward shift (no tombstones), and a slot count that is not a power
//! of two — a map built for `n` rules holds `1.25 n` slots (80% full, 20 bytes a rule), where a
//! `hashbrown` table rounds its buckets up to a power of two and was 47% full at 500K rules
//! (≈ 36 bytes a rule with its control bytes).
//!
//! A plain 5-tuple rule (action `drop`, cookie 0, table 0, nothing its slot and pre-filter entry
//! do not hold) held by an iSet keeps no stored rule: its slot holds every bit of it
//! (`slot::Slot::whole_rule`), and the rule is made from it when asked for
//! (`remove`, `rules`, a trainer's snapshot). Whether a rule may do without is decided by making
//! it back from its candidate and comparing with the rule itself, never by looking at its fields.

use std::hash::BuildHasher;
use std::sync::Arc;

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

/// The rules by id.
#[derive(Clone)]
pub(crate) struct RuleMap {
    /// Every slot; an empty one has `at == At::EMPTY`.
    slots: Box<[Kept]>,
    len: usize,
    /// Mixed into every id before it is hashed (a map of its own per build).
    seed: u64,
}

impl Default for RuleMap {
    fn default() -> Self {
        RuleMap::with_capacity(0)
    }
}

/// The most a map is filled before it doubles: 85%.
const MAX_LOAD: (usize, usize) = (17, 20);

fn empty_slot() -> Kept {
    Kept { id: RuleId(0), at: At::EMPTY, stored: None }
}

impl RuleMap {
    /// A map for `n` rules, 80% full when they are all in.
    pub(crate) fn with_capacity(n: usize) -> RuleMap {
        let seed = std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64);
        RuleMap { slots: Self::empty_slots(n + n / 4 + 1), len: 0, seed }
    }

    fn empty_slots(n: usize) -> Box<[Kept]> {
        (0..n).map(|_| empty_slot()).collect()
    }

    /// The id's home slot: a multiplicative hash of the seeded id, scaled to the slot count
    /// (its top bits: sequential ids spread evenly).
    #[inline]
    fn home(&self, id: RuleId) -> usize {
        let h = (u64::from(id.0) ^ self.seed).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        ((u128::from(h) * self.slots.len() as u128) >> 64) as usize
    }

    #[inline]
    fn next(&self, i: usize) -> usize {
        if i + 1 == self.slots.len() {
            0
        } else {
            i + 1
        }
    }

    /// The slot holding `id`, or the empty slot where it would go.
    fn probe(&self, id: RuleId) -> Result<usize, usize> {
        let mut i = self.home(id);
        loop {
            let k = &self.slots[i];
            if k.at == At::EMPTY {
                return Err(i);
            }
            if k.id == id {
                return Ok(i);
            }
            i = self.next(i);
        }
    }

    /// Adds `k`; `false` (and the map unchanged) when its id is there already.
    pub(crate) fn insert(&mut self, k: Kept) -> bool {
        debug_assert!(k.at != At::EMPTY, "not a location");
        let mut at = match self.probe(k.id) {
            Ok(_) => return false,
            Err(i) => i,
        };
        if (self.len + 1) * MAX_LOAD.1 > self.slots.len() * MAX_LOAD.0 {
            self.grow();
            at = self.probe(k.id).expect_err("not in the map");
        }
        self.slots[at] = k;
        self.len += 1;
        true
    }

    /// Doubles the slot count (at least 8) and puts every rule back.
    fn grow(&mut self) {
        let bigger = Self::empty_slots((self.slots.len() * 2).max(8));
        let old = std::mem::replace(&mut self.slots, bigger);
        for k in old.into_vec().into_iter().filter(|k| k.at != At::EMPTY) {
            let i = self.probe(k.id).expect_err("ids are unique");
            self.slots[i] = k;
        }
    }

    pub(crate) fn get(&self, id: RuleId) -> Option<&Kept> {
        if self.len == 0 {
            return None;
        }
        self.probe(id).ok().map(|i| &self.slots[i])
    }

    pub(crate) fn contains(&self, id: RuleId) -> bool {
        self.get(id).is_some()
    }

    /// Takes `id` out, shifting back the slots after it that probed past it (each moves into the
    /// hole when its home slot does not lie between the hole and itself), so that every lookup
    /// still finds its rule before the first empty slot.
    pub(crate) fn remove(&mut self, id: RuleId) -> Option<Kept> {
        if self.len == 0 {
            return None;
        }
        let i = self.probe(id).ok()?;
        let gone = std::mem::replace(&mut self.slots[i], empty_slot());
        self.len -= 1;
        let (mut hole, mut j) = (i, self.next(i));
        while self.slots[j].at != At::EMPTY {
            let h = self.home(self.slots[j].id);
            // Is `h` cyclically in (hole, j]? Then slot j must stay.
            let stays = if hole <= j { hole < h && h <= j } else { hole < h || h <= j };
            if !stays {
                self.slots.swap(hole, j);
                hole = j;
            }
            j = self.next(j);
        }
        Some(gone)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Kept> {
        self.slots.iter().filter(|k| k.at != At::EMPTY)
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes: the slots, and the stored rules the map keeps (each with its `Arc` counts and heap
    /// words).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<Kept>()
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

    proptest::proptest! {
        /// The map against a `HashMap` through random inserts, duplicate inserts, removes and
        /// lookups over a small id space (long probe runs, wrap-around at the table's end,
        /// backward shifts across it, growth from empty and from a sized map).
        #[test]
        fn the_map_is_a_map(ops in proptest::collection::vec((0u8..4, 0u32..64), 0..400), sized in 0usize..40) {
            let mut m = RuleMap::with_capacity(sized);
            let mut model = std::collections::HashMap::new();
            for (n, (op, id)) in ops.into_iter().enumerate() {
                let at = At::new(Location::ISet { iset: n % 3, bucket: n }).unwrap();
                match op {
                    0 | 1 => {
                        let added = m.insert(Kept { id: RuleId(id), at, stored: None });
                        proptest::prop_assert_eq!(added, !model.contains_key(&id));
                        model.entry(id).or_insert(at);
                    }
                    2 => proptest::prop_assert_eq!(m.remove(RuleId(id)).map(|k| k.at), model.remove(&id)),
                    _ => proptest::prop_assert_eq!(m.get(RuleId(id)).map(|k| k.at), model.get(&id).copied()),
                }
                proptest::prop_assert_eq!(m.len(), model.len());
            }
            for (id, at) in &model {
                proptest::prop_assert_eq!(m.get(RuleId(*id)).map(|k| k.at), Some(*at));
            }
            let mut ids: Vec<u32> = m.iter().map(|k| k.id.0).collect();
            ids.sort_unstable();
            let mut want: Vec<u32> = model.keys().copied().collect();
            want.sort_unstable();
            proptest::prop_assert_eq!(ids, want);
        }
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
        assert_eq!(m.memory_bytes(), (n + n / 4 + 1) * 16);
        assert!(m.get(RuleId(3 * 1000)).is_some() && m.get(RuleId(3 * 1000 + 1)).is_none());
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
