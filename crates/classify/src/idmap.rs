//! A map from rule id to a small fixed-size slot, for the classifiers' update paths (never on
//! a lookup's): an open-addressing table of the slots themselves — linear probing from the id's
//! home slot in *Robin Hood* order (along a run, slots sit in non-decreasing distance from their
//! home, so a search for an absent id stops at the first slot nearer its home than the id would
//! be, not at the run's end: at 80% load plain linear probing reads ~13 slots for an insert's
//! miss), removal by backward shift (no tombstones), and a slot count that is not a power of
//! two. A map built for `n` rules holds `1.25 n` slots (80% full), where a `hashbrown` table
//! rounds its buckets up to a power of two (47% full at 500K rules) and adds a control byte
//! each. NuevoMatchUP's rule map (16-byte slots: `nuevomatch::rulemap`) and TupleMerge's index
//! of its records ([`IdIndex`], 8 bytes) are two of them.

use std::hash::BuildHasher;

use rqvs_flow::RuleId;

/// What an [`IdMap`] holds: a slot that names its rule, and an empty value no rule's slot has.
pub(crate) trait IdSlot: Clone {
    fn empty() -> Self;
    fn is_empty(&self) -> bool;
    fn id(&self) -> RuleId;
}

/// A rule id and an index (TupleMerge: its record's slot in the slab); `u32::MAX` marks an
/// empty slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IdIndex {
    pub(crate) id: RuleId,
    pub(crate) index: u32,
}

impl IdSlot for IdIndex {
    fn empty() -> Self {
        IdIndex { id: RuleId(0), index: u32::MAX }
    }
    fn is_empty(&self) -> bool {
        self.index == u32::MAX
    }
    fn id(&self) -> RuleId {
        self.id
    }
}

/// Slots by rule id.
#[derive(Clone)]
pub(crate) struct IdMap<S: IdSlot> {
    /// Every slot; an empty one [`IdSlot::is_empty`].
    slots: Box<[S]>,
    len: usize,
    /// Mixed into every id before it is hashed (a map of its own per build).
    seed: u64,
}

impl<S: IdSlot> Default for IdMap<S> {
    fn default() -> Self {
        IdMap::with_capacity(0)
    }
}

/// The most a map is filled before it doubles: 85%.
const MAX_LOAD: (usize, usize) = (17, 20);

impl<S: IdSlot> IdMap<S> {
    /// A map for `n` rules, 80% full when they are all in.
    pub(crate) fn with_capacity(n: usize) -> IdMap<S> {
        let seed = std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64);
        IdMap { slots: Self::empty_slots(n + n / 4 + 1), len: 0, seed }
    }

    fn empty_slots(n: usize) -> Box<[S]> {
        (0..n).map(|_| S::empty()).collect()
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

    /// How far slot `i`'s id sits from its home slot.
    #[inline]
    fn distance(&self, i: usize, id: RuleId) -> usize {
        let h = self.home(id);
        if i >= h {
            i - h
        } else {
            i + self.slots.len() - h
        }
    }

    /// The slot holding `id`; `None` when it is absent (the search stops at an empty slot or at
    /// one nearer its home than `id` would be there: Robin Hood order, module docs).
    fn probe(&self, id: RuleId) -> Option<usize> {
        let mut i = self.home(id);
        let mut d = 0;
        loop {
            let k = &self.slots[i];
            if k.is_empty() || self.distance(i, k.id()) < d {
                return None;
            }
            if k.id() == id {
                return Some(i);
            }
            i = self.next(i);
            d += 1;
        }
    }

    /// Adds `k`; `false` (and the map unchanged) when its id is there already.
    pub(crate) fn insert(&mut self, k: S) -> bool {
        debug_assert!(!k.is_empty(), "not an empty slot");
        if self.probe(k.id()).is_some() {
            return false;
        }
        if (self.len + 1) * MAX_LOAD.1 > self.slots.len() * MAX_LOAD.0 {
            self.grow();
        }
        self.place(k);
        self.len += 1;
        true
    }

    /// Puts `k` (an id not in the map) in Robin Hood order: it takes the first slot whose id
    /// is nearer its home than `k` would be there, and that id goes on looking further.
    fn place(&mut self, mut k: S) {
        let mut i = self.home(k.id());
        let mut d = 0;
        loop {
            if self.slots[i].is_empty() {
                self.slots[i] = k;
                return;
            }
            let theirs = self.distance(i, self.slots[i].id());
            if theirs < d {
                std::mem::swap(&mut self.slots[i], &mut k);
                d = theirs;
            }
            i = self.next(i);
            d += 1;
        }
    }

    /// Doubles the slot count (at least 8) and puts every rule back.
    fn grow(&mut self) {
        let bigger = Self::empty_slots((self.slots.len() * 2).max(8));
        let old = std::mem::replace(&mut self.slots, bigger);
        for k in old.into_vec().into_iter().filter(|k| !k.is_empty()) {
            self.place(k);
        }
    }

    /// Asks for the line of `id`'s home slot (a hint: a search for `id` a few updates later
    /// finds it in cache; nothing changes).
    #[inline]
    pub(crate) fn prefetch(&self, id: RuleId) {
        if !self.slots.is_empty() {
            crate::prefetch::prefetch(&self.slots[self.home(id)]);
        }
    }

    pub(crate) fn get(&self, id: RuleId) -> Option<&S> {
        if self.len == 0 {
            return None;
        }
        self.probe(id).map(|i| &self.slots[i])
    }

    pub(crate) fn contains(&self, id: RuleId) -> bool {
        self.get(id).is_some()
    }

    /// Takes `id` out, shifting back by one the slots after it up to the first empty one or
    /// the first at its home (Robin Hood order stays: each moved slot comes one nearer its
    /// home), so that every search still finds its id.
    pub(crate) fn remove(&mut self, id: RuleId) -> Option<S> {
        if self.len == 0 {
            return None;
        }
        let i = self.probe(id)?;
        let gone = std::mem::replace(&mut self.slots[i], S::empty());
        self.len -= 1;
        let (mut hole, mut j) = (i, self.next(i));
        while !self.slots[j].is_empty() && self.distance(j, self.slots[j].id()) > 0 {
            self.slots.swap(hole, j);
            hole = j;
            j = self.next(j);
        }
        Some(gone)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &S> {
        self.slots.iter().filter(|k| !k.is_empty())
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes: the slots.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<S>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(id: u32, index: u32) -> IdIndex {
        IdIndex { id: RuleId(id), index }
    }

    #[test]
    fn a_slot_is_8_bytes() {
        assert_eq!(std::mem::size_of::<IdIndex>(), 8);
    }

    proptest::proptest! {
        /// The map against a `HashMap` through random inserts, duplicate inserts, removes and
        /// lookups over a small id space (long probe runs, wrap-around at the table's end,
        /// backward shifts across it, growth from empty and from a sized map). Fails when a
        /// slot that must stay is shifted back or one that must move is not.
        #[test]
        fn the_map_is_a_map(ops in proptest::collection::vec((0u8..4, 0u32..64), 0..400), sized in 0usize..40) {
            let mut m = IdMap::with_capacity(sized);
            let mut model = std::collections::HashMap::new();
            for (n, (op, id)) in ops.into_iter().enumerate() {
                let index = n as u32;
                match op {
                    0 | 1 => {
                        let added = m.insert(slot(id, index));
                        proptest::prop_assert_eq!(added, !model.contains_key(&id));
                        model.entry(id).or_insert(index);
                    }
                    2 => proptest::prop_assert_eq!(m.remove(RuleId(id)).map(|k| k.index), model.remove(&id)),
                    _ => proptest::prop_assert_eq!(m.get(RuleId(id)).map(|k| k.index), model.get(&id).copied()),
                }
                proptest::prop_assert_eq!(m.len(), model.len());
            }
            for (id, index) in &model {
                proptest::prop_assert_eq!(m.get(RuleId(*id)).map(|k| k.index), Some(*index));
            }
            // Robin Hood order: along a run, each slot is at most one further from its home
            // than the slot before it (what lets a miss stop early).
            for i in 0..m.slots.len() {
                let j = m.next(i);
                if !m.slots[i].is_empty() && !m.slots[j].is_empty() {
                    let (di, dj) = (m.distance(i, m.slots[i].id), m.distance(j, m.slots[j].id));
                    proptest::prop_assert!(dj <= di + 1, "slot {j} at distance {dj} after {di}");
                }
            }
            let mut ids: Vec<u32> = m.iter().map(|k| k.id.0).collect();
            ids.sort_unstable();
            let mut want: Vec<u32> = model.keys().copied().collect();
            want.sort_unstable();
            proptest::prop_assert_eq!(ids, want);
        }
    }

    /// A map built for `n` rules holds them in 1.25 `n` slots, not a power of two.
    #[test]
    fn a_sized_map_is_80_percent_full() {
        let n = 497_820;
        let mut m = IdMap::with_capacity(n);
        for i in 0..n as u32 {
            assert!(m.insert(slot(i * 3, i)));
        }
        assert_eq!(m.memory_bytes(), (n + n / 4 + 1) * 8);
        assert!(m.get(RuleId(3 * 1000)).is_some() && m.get(RuleId(3 * 1000 + 1)).is_none());
    }

    #[test]
    fn insert_get_remove() {
        let mut m = IdMap::default();
        for i in 0..1000 {
            assert!(m.insert(slot(i, i)));
        }
        assert!(!m.insert(slot(7, 99)));
        assert_eq!(m.get(RuleId(7)).unwrap().index, 7);
        assert_eq!(m.len(), 1000);
        assert_eq!(m.remove(RuleId(7)).unwrap().id, RuleId(7));
        assert!(m.remove(RuleId(7)).is_none() && !m.contains(RuleId(7)) && m.contains(RuleId(8)));
        assert_eq!(m.iter().count(), 999);
    }
}
