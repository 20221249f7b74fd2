//! The megaflow cache (OVS's `dpcls`): tuple space search over megaflow masks.
//!
//! - One **subtable** per distinct megaflow mask: a hash table from the packet's masked key words
//!   ([`FlowKey::to_words`] AND the mask's words) to the megaflow. No priorities: megaflows never
//!   overlap in effect (any two that a packet could both hit give it the same action), so the
//!   **first hit wins** and the walk stops there.
//! - Subtables are walked in **rank order**: every second of PMD time ([`RANK_INTERVAL_NS`]) they
//!   are re-sorted by the hits they took in the past interval (stable sort, as OVS's pvector
//!   `dpcls_sort_subtable_vector`), so the busiest subtable is probed first. An empty subtable is
//!   destroyed, as OVS does.
//! - **Megaflows** live in a slab of slots with generation numbers; a [`MegaflowRef`] (slot,
//!   generation) is how the EMC and the cuckoo distributor point at one, and goes stale when the
//!   megaflow is deleted — so a deletion never has to find the EMC entries that point at it.
//! - **Per-megaflow stats**: hits and last-used time (PMD clock), for idle expiry and reports.
//!
//! Lookups allocate nothing: the hash tables are `hashbrown` maps keyed by `[u64; 5]`.

use hashbrown::HashMap;
use rqvs_classify::ofproto::Megaflow;
use rqvs_flow::{FlowKey, RuleId};

use crate::ofproto::Verdict;
use crate::{DpAction, NO_RULE};

/// Subtables are re-ranked by hits this often (PMD clock), as OVS does every second.
pub const RANK_INTERVAL_NS: u64 = 1_000_000_000;

/// `MegaflowEntry::subtable` of a detached megaflow ([`Dpcls::detach`]).
const DETACHED: u32 = u32::MAX;

/// A megaflow's handle: slot and generation. Stale once the megaflow is deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MegaflowRef {
    pub slot: u32,
    pub gen: u32,
}

impl MegaflowRef {
    /// A handle that never refers to a live megaflow.
    pub const NONE: MegaflowRef = MegaflowRef { slot: u32::MAX, gen: 0 };
}

/// One installed megaflow.
#[derive(Clone, Debug)]
pub struct MegaflowEntry {
    /// The packet whose upcall created it (the revalidator re-classifies this key, as OVS's
    /// ukeys hold the flow key).
    pub key: FlowKey,
    pub megaflow: Megaflow,
    pub action: DpAction,
    /// The OpenFlow rule the slow path matched: the packets that hit the megaflow are
    /// attributed to it (per-flow counters; [`Dpcls::hit`]). Revalidation updates it when it
    /// keeps the megaflow but the table's winner for its key changed ([`Dpcls::set_rule`]).
    /// Correctness rests on `action`.
    pub rule: Option<RuleId>,
    pub hits: u64,
    /// PMD clock (ns) of creation and of the last hit.
    pub created_ns: u64,
    pub last_used_ns: u64,
    subtable: u32,
}

struct Slot {
    gen: u32,
    megaflow: Option<MegaflowEntry>,
}

struct Subtable {
    mask: FlowKey,
    mask_words: [u64; 5],
    table: HashMap<[u64; 5], u32>,
    /// Hits in the current ranking interval.
    hits: u64,
}

/// What [`Dpcls::install`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Install {
    Installed(MegaflowRef),
    /// An installed megaflow already covered the key (its handle).
    Existing(MegaflowRef),
    /// The flow limit was reached.
    Refused,
}

impl Install {
    /// The megaflow the key now hits, if any.
    pub fn megaflow(self) -> Option<MegaflowRef> {
        match self {
            Install::Installed(f) | Install::Existing(f) => Some(f),
            Install::Refused => None,
        }
    }
}

/// The result of a subtable walk.
#[derive(Clone, Copy, Debug)]
pub struct Hit {
    pub megaflow: MegaflowRef,
    /// The subtable's index (stable while it lives; what the cuckoo distributor remembers).
    pub subtable: u32,
    /// Subtables probed, including the one that hit.
    pub probed: u32,
}

/// The megaflow cache (module docs).
#[derive(Default)]
pub struct Dpcls {
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    n_megaflows: usize,
    subtables: Vec<Option<Subtable>>,
    free_subtables: Vec<u32>,
    by_mask: HashMap<FlowKey, u32>,
    /// Live subtable indices in walk order.
    order: Vec<u32>,
    next_rank_ns: u64,
    /// Share of the last ranking interval's hits taken by the top subtable (1.0 when no hits).
    top_share: f64,
    /// Installs and deletions since the last [`Dpcls::take_journal`], when enabled (for the
    /// revalidator thread's copy of the megaflows, [`crate::revalidator::RevalidatorThread`]).
    journal: Option<Journal>,
}

/// Megaflows installed and deleted, in order of each kind, since the journal was last taken.
#[derive(Clone, Debug, Default)]
pub struct Journal {
    pub installed: Vec<MegaflowRef>,
    pub removed: Vec<MegaflowRef>,
}

impl Journal {
    pub fn is_empty(&self) -> bool {
        self.installed.is_empty() && self.removed.is_empty()
    }
}

#[inline]
fn and_words(a: &[u64; 5], m: &[u64; 5]) -> [u64; 5] {
    [a[0] & m[0], a[1] & m[1], a[2] & m[2], a[3] & m[3], a[4] & m[4]]
}

impl Dpcls {
    pub fn new() -> Dpcls {
        Dpcls { next_rank_ns: RANK_INTERVAL_NS, top_share: 1.0, ..Dpcls::default() }
    }

    /// Megaflows installed.
    pub fn len(&self) -> usize {
        self.n_megaflows
    }

    pub fn is_empty(&self) -> bool {
        self.n_megaflows == 0
    }

    /// Distinct masks (subtables).
    pub fn masks(&self) -> usize {
        self.order.len()
    }

    /// Every installed megaflow (CCACHE's learned ones included), in slot order.
    pub fn iter(&self) -> impl Iterator<Item = &MegaflowEntry> {
        self.slots.iter().filter_map(|s| s.megaflow.as_ref())
    }

    /// The megaflow behind a handle, if it is still installed.
    #[inline]
    pub fn get(&self, f: MegaflowRef) -> Option<&MegaflowEntry> {
        let s = self.slots.get(f.slot as usize)?;
        if s.gen == f.gen {
            s.megaflow.as_ref()
        } else {
            None
        }
    }

    /// Records a hit on a live megaflow (per-flow stats).
    #[inline]
    pub fn touch(&mut self, f: MegaflowRef, now_ns: u64) {
        if let Some(s) = self.slots.get_mut(f.slot as usize) {
            if s.gen == f.gen {
                if let Some(e) = s.megaflow.as_mut() {
                    e.hits += 1;
                    e.last_used_ns = now_ns;
                }
            }
        }
    }

    /// A packet hit a megaflow: records the hit ([`Dpcls::touch`]) and returns the megaflow's
    /// action and the rule it is attributed to (drop and [`NO_RULE`] for a stale handle).
    #[inline]
    pub fn hit(&mut self, f: MegaflowRef, now_ns: u64) -> (DpAction, RuleId) {
        match self.slots.get_mut(f.slot as usize) {
            Some(Slot { gen, megaflow: Some(e) }) if *gen == f.gen => {
                e.hits += 1;
                e.last_used_ns = now_ns;
                (e.action, e.rule.unwrap_or(NO_RULE))
            }
            _ => (DpAction::Drop, NO_RULE),
        }
    }

    /// Attributes a live megaflow's packets to `rule` from now on: revalidation kept it (same
    /// action, mask not narrower) but the table now gives its key another rule
    /// ([`crate::revalidator`]). False for a stale handle.
    pub fn set_rule(&mut self, f: MegaflowRef, rule: Option<RuleId>) -> bool {
        match self.slots.get_mut(f.slot as usize) {
            Some(Slot { gen, megaflow: Some(e) }) if *gen == f.gen => {
                e.rule = rule;
                true
            }
            _ => false,
        }
    }

    /// Probes one subtable (by index; a dead or reused index is simply probed as it is now).
    #[inline]
    pub fn lookup_in(&mut self, subtable: u32, words: &[u64; 5]) -> Option<MegaflowRef> {
        let st = self.subtables.get_mut(subtable as usize)?.as_mut()?;
        let slot = *st.table.get(&and_words(words, &st.mask_words))?;
        st.hits += 1;
        Some(MegaflowRef { slot, gen: self.slots[slot as usize].gen })
    }

    /// Walks the subtables in rank order; first hit wins. `probed` is also reported on a miss
    /// through the second value.
    #[inline]
    pub fn lookup(&mut self, words: &[u64; 5]) -> (Option<Hit>, u32) {
        for (i, &si) in self.order.iter().enumerate() {
            let st = self.subtables[si as usize].as_mut().expect("ranked subtable is live");
            if let Some(&slot) = st.table.get(&and_words(words, &st.mask_words)) {
                st.hits += 1;
                let megaflow = MegaflowRef { slot, gen: self.slots[slot as usize].gen };
                return (Some(Hit { megaflow, subtable: si, probed: i as u32 + 1 }), i as u32 + 1);
            }
        }
        (None, self.order.len() as u32)
    }

    /// The first installed megaflow covering these key words, without counting a hit.
    pub fn peek(&self, words: &[u64; 5]) -> Option<MegaflowRef> {
        self.order.iter().find_map(|&si| {
            let st = self.subtables[si as usize].as_ref().expect("ranked subtable is live");
            let slot = *st.table.get(&and_words(words, &st.mask_words))?;
            Some(MegaflowRef { slot, gen: self.slots[slot as usize].gen })
        })
    }

    /// The installed megaflow with exactly this mask and value, if any.
    pub fn find(&self, mf: &Megaflow) -> Option<MegaflowRef> {
        let si = *self.by_mask.get(&mf.mask)?;
        let st = self.subtables[si as usize].as_ref()?;
        let slot = *st.table.get(&mf.value.to_words())?;
        Some(MegaflowRef { slot, gen: self.slots[slot as usize].gen })
    }

    /// Installs a megaflow created by `key`'s upcall (or returns the identical one installed).
    pub fn insert(
        &mut self,
        key: FlowKey,
        megaflow: Megaflow,
        action: DpAction,
        rule: Option<RuleId>,
        now_ns: u64,
    ) -> MegaflowRef {
        if let Some(f) = self.find(&megaflow) {
            return f;
        }
        let si = self.subtable_for(&megaflow.mask);
        let entry = MegaflowEntry {
            key,
            megaflow,
            action,
            rule,
            hits: 0,
            created_ns: now_ns,
            last_used_ns: now_ns,
            subtable: si,
        };
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.slots[s as usize].megaflow = Some(entry);
                s
            }
            None => {
                self.slots.push(Slot { gen: 0, megaflow: Some(entry) });
                (self.slots.len() - 1) as u32
            }
        };
        let st = self.subtables[si as usize].as_mut().expect("live");
        st.table.insert(megaflow.value.to_words(), slot);
        self.n_megaflows += 1;
        let f = MegaflowRef { slot, gen: self.slots[slot as usize].gen };
        if let Some(j) = self.journal.as_mut() {
            j.installed.push(f);
        }
        f
    }

    /// Installs the slow path's megaflow for an upcall of `key`, as OVS's handler does: an
    /// installed megaflow with the same mask and value, or one already covering `key` (another
    /// upcall of the same batch installed it), is reused; at `flow_limit` megaflows nothing is
    /// installed. The one place megaflows are installed (upcalls and flow prediction).
    pub fn install(&mut self, key: FlowKey, v: &Verdict, flow_limit: usize, now_ns: u64) -> Install {
        if let Some(f) = self.find(&v.megaflow).or_else(|| self.peek(&key.to_words())) {
            return Install::Existing(f);
        }
        if self.len() >= flow_limit {
            return Install::Refused;
        }
        Install::Installed(self.insert(key, v.megaflow, v.action, v.rule, now_ns))
    }

    /// Starts recording installs and deletions ([`Journal`]).
    pub fn enable_journal(&mut self) {
        self.journal.get_or_insert_with(Journal::default);
    }

    /// Entries in the journal.
    pub fn journal_len(&self) -> usize {
        self.journal.as_ref().map_or(0, |j| j.installed.len() + j.removed.len())
    }

    /// What was installed and deleted since the last call (empty when not enabled). A handle in
    /// `installed` may be stale already (deleted since); it is then in `removed` too.
    pub fn take_journal(&mut self) -> Journal {
        self.journal.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Deletes a megaflow; its handle (and every EMC/CD reference) goes stale. False when it was
    /// not installed.
    pub fn remove(&mut self, f: MegaflowRef) -> bool {
        let Some(s) = self.slots.get_mut(f.slot as usize) else { return false };
        if s.gen != f.gen || s.megaflow.is_none() {
            return false;
        }
        let e = s.megaflow.take().expect("checked");
        s.gen = s.gen.wrapping_add(1);
        self.free_slots.push(f.slot);
        self.n_megaflows -= 1;
        if let Some(j) = self.journal.as_mut() {
            j.removed.push(f);
        }
        if e.subtable != DETACHED {
            self.unlink(e.subtable, &e.megaflow);
        }
        true
    }

    /// Takes `megaflow` out of subtable `si`, destroying the subtable when it empties.
    fn unlink(&mut self, si: u32, megaflow: &Megaflow) {
        let st = self.subtables[si as usize].as_mut().expect("live");
        st.table.remove(&megaflow.value.to_words());
        if st.table.is_empty() {
            let mask = st.mask;
            self.subtables[si as usize] = None;
            self.free_subtables.push(si);
            self.by_mask.remove(&mask);
            self.order.retain(|&x| x != si);
        }
    }

    /// The subtable for `mask`, created (last in walk order) when missing.
    fn subtable_for(&mut self, mask: &FlowKey) -> u32 {
        if let Some(&si) = self.by_mask.get(mask) {
            return si;
        }
        let st = Subtable { mask: *mask, mask_words: mask.to_words(), table: HashMap::new(), hits: 0 };
        let si = match self.free_subtables.pop() {
            Some(si) => {
                self.subtables[si as usize] = Some(st);
                si
            }
            None => {
                self.subtables.push(Some(st));
                (self.subtables.len() - 1) as u32
            }
        };
        self.by_mask.insert(*mask, si);
        self.order.push(si);
        si
    }

    /// CCACHE: takes a live megaflow out of the subtables (a learned model serves it now). It
    /// stays installed — its handle, stats, expiry and revalidation are unchanged — but the
    /// subtable walk no longer finds it. False when stale or already detached.
    pub fn detach(&mut self, f: MegaflowRef) -> bool {
        let Some(e) = self.get(f) else { return false };
        if e.subtable == DETACHED {
            return false;
        }
        let (si, mf) = (e.subtable, e.megaflow);
        self.unlink(si, &mf);
        self.slots[f.slot as usize].megaflow.as_mut().expect("live").subtable = DETACHED;
        true
    }

    /// CCACHE: puts a detached megaflow back into the subtables. False when stale or attached.
    pub fn attach(&mut self, f: MegaflowRef) -> bool {
        let Some(e) = self.get(f) else { return false };
        if e.subtable != DETACHED {
            return false;
        }
        let mf = e.megaflow;
        let si = self.subtable_for(&mf.mask);
        let st = self.subtables[si as usize].as_mut().expect("live");
        st.table.insert(mf.value.to_words(), f.slot);
        self.slots[f.slot as usize].megaflow.as_mut().expect("live").subtable = si;
        true
    }

    /// True for a live megaflow that is detached (served by a model).
    pub fn is_detached(&self, f: MegaflowRef) -> bool {
        self.get(f).is_some_and(|e| e.subtable == DETACHED)
    }

    /// Handles of every installed megaflow (for the revalidator; allocates).
    pub fn megaflow_refs(&self) -> Vec<MegaflowRef> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.megaflow.is_some())
            .map(|(i, s)| MegaflowRef { slot: i as u32, gen: s.gen })
            .collect()
    }

    /// Re-ranks subtables by their hits in the past interval when the interval is over. Returns
    /// true when it re-ranked.
    pub fn maybe_rank(&mut self, now_ns: u64) -> bool {
        if now_ns < self.next_rank_ns {
            return false;
        }
        self.next_rank_ns = now_ns + RANK_INTERVAL_NS;
        let subtables = &self.subtables;
        let hits = |si: &u32| subtables[*si as usize].as_ref().map_or(0, |s| s.hits);
        self.order.sort_by_key(|si| std::cmp::Reverse(hits(si)));
        let total: u64 = self.order.iter().map(hits).sum();
        let top = self.order.first().map_or(0, hits);
        self.top_share = if total == 0 { 1.0 } else { top as f64 / total as f64 };
        for s in self.subtables.iter_mut().flatten() {
            s.hits = 0;
        }
        true
    }

    /// Share of the last ranking interval's hits the top-ranked subtable took.
    pub fn top_share(&self) -> f64 {
        self.top_share
    }

    /// Masks in walk order (for tests and reports).
    pub fn ranked_masks(&self) -> Vec<FlowKey> {
        self.order.iter().map(|&si| self.subtables[si as usize].as_ref().expect("live").mask).collect()
    }

    /// Approximate heap bytes.
    pub fn memory_bytes(&self) -> usize {
        let per_flow = std::mem::size_of::<Slot>() + 5 * 8 + 4 + 8;
        self.slots.capacity() * per_flow + self.order.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mf(key: FlowKey, mask: FlowKey) -> Megaflow {
        Megaflow { value: key.masked(&mask), mask }
    }

    #[test]
    fn insert_lookup_remove_and_stale_handles() {
        let mut d = Dpcls::new();
        let mut m1 = FlowKey::default();
        m1.nw_dst = 0xffff_0000;
        let mut m2 = FlowKey::default();
        m2.tp_dst = 0xffff;
        let k = FlowKey::ipv4(1, 0x0a01_0203, 6, 5, 80);
        let f1 = d.insert(k, mf(k, m1), DpAction::Output(1), None, 0);
        let f2 = d.insert(k, mf(k, m2), DpAction::Output(1), None, 0);
        assert_eq!(d.insert(k, mf(k, m1), DpAction::Output(1), None, 0), f1, "no duplicates");
        assert_eq!((d.len(), d.masks()), (2, 2));
        let other = FlowKey::ipv4(9, 0x0a01_9999, 17, 5, 81);
        let (hit, _) = d.lookup(&other.to_words());
        assert_eq!(hit.map(|h| h.megaflow), Some(f1));
        assert!(d.remove(f1));
        assert!(!d.remove(f1));
        assert!(d.get(f1).is_none(), "stale handle");
        assert_eq!(d.masks(), 1, "empty subtable destroyed");
        assert!(d.lookup(&other.to_words()).0.is_none());
        let (hit, probed) = d.lookup(&k.to_words());
        assert_eq!((hit.map(|h| h.megaflow), probed), (Some(f2), 1));
        // A reused slot gives a new generation.
        let f3 = d.insert(other, mf(other, m1), DpAction::Drop, None, 0);
        assert_eq!(f3.slot, f1.slot);
        assert_ne!(f3, f1);
    }

    #[test]
    fn ranking_puts_busiest_subtable_first() {
        let mut d = Dpcls::new();
        let mut m1 = FlowKey::default();
        m1.nw_src = u32::MAX;
        let mut m2 = FlowKey::default();
        m2.nw_dst = u32::MAX;
        let a = FlowKey::ipv4(1, 2, 6, 0, 0);
        let b = FlowKey::ipv4(3, 4, 6, 0, 0);
        d.insert(a, mf(a, m1), DpAction::Drop, None, 0);
        d.insert(b, mf(b, m2), DpAction::Drop, None, 0);
        for _ in 0..10 {
            assert!(d.lookup(&b.to_words()).0.is_some());
        }
        assert_eq!(d.lookup(&b.to_words()).1, 2);
        assert!(!d.maybe_rank(RANK_INTERVAL_NS - 1));
        assert!(d.maybe_rank(RANK_INTERVAL_NS));
        assert_eq!(d.ranked_masks()[0], m2);
        assert_eq!(d.lookup(&b.to_words()).1, 1);
        assert!(d.top_share() > 0.9);
    }
}
