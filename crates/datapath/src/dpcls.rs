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
//! - **Mask limit** (off by default, as OVS; [`MaskLimit`]): a defence against Tuple Space
//!   Explosion, whose packets make the slow path install megaflows with ever new masks until the
//!   walk probes hundreds of subtables. When installing a megaflow would create a subtable beyond
//!   the limit, [`MaskEviction::LeastHit`] first deletes the subtable (all its megaflows) whose
//!   megaflows decided the fewest packets — by any path: EMC, cuckoo distributor or walk — in the
//!   current and the past ranking interval (ties: the oldest subtable), and
//!   [`MaskEviction::Refuse`] installs nothing (the packet has its action from the slow path; the
//!   next packets of its flow upcall again), and [`MaskEviction::Narrow`] installs the megaflow
//!   under an installed mask that examines every bit it needs, or exact-match (one subtable for
//!   all of those) — always correct, since a megaflow may examine more bits than the slow path
//!   asked for, and revalidation keeps a megaflow whose mask is not wider than the new lookup's. Deletions go through [`Dpcls::remove`], so they are
//!   journaled for the revalidator thread, and the EMC's and the cuckoo distributor's references
//!   to evicted megaflows go stale by generation like any deletion's. Only subtables are evicted:
//!   a megaflow CCACHE's model holds is detached from them and never evicted, so the model never
//!   has to hear of an eviction.
//! - **Drop-only subtables** ([`Dpcls::remove_drop_only`]): MFCGuard's deletion (the datapath's
//!   `mfcguard` option, [`crate::orig::OrigConfig::mfcguard`]).
//!
//! Lookups allocate nothing: the hash tables are `hashbrown` maps keyed by the masked key's words (the narrow five, or all of them for a wide mask).

use hashbrown::HashMap;
use rqvs_classify::ofproto::Megaflow;
use rqvs_flow::key::{mask_words, KeyWords, NarrowWords};
use rqvs_flow::{FlowKey, RuleId};

use rqvs_ofproto::table::Verdict;
use rqvs_ofproto::{DpAction, NO_RULE};

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

/// One installed megaflow. The fields a hit reads and writes come first (`repr(C)`), so that with
/// the slot's generation they share one cache line (the slot is aligned to 64 bytes); the keys, which only upcalls and
/// the revalidator read, follow.
#[derive(Clone, Debug)]
#[repr(C)]
pub struct MegaflowEntry {
    pub action: DpAction,
    /// The OpenFlow rule the slow path matched: the packets that hit the megaflow are
    /// attributed to it (per-flow counters; [`Dpcls::hit`]). Revalidation updates it when it
    /// keeps the megaflow but the table's winner for its key changed ([`Dpcls::set_rule`]).
    /// Correctness rests on `action`.
    pub rule: Option<RuleId>,
    pub hits: u64,
    /// PMD clock (ns) of the last hit and of creation.
    pub last_used_ns: u64,
    pub created_ns: u64,
    subtable: u32,
    /// The packet whose upcall created it (the revalidator re-classifies this key, as OVS's
    /// ukeys hold the flow key).
    pub key: FlowKey,
    pub megaflow: Megaflow,
}

/// A megaflow's place in [`Dpcls`]: its generation and entry, aligned to a cache line so that a
/// hit (the generation check, the action, the counters) touches one line.
#[repr(C, align(64))]
struct Slot {
    gen: u32,
    megaflow: Option<MegaflowEntry>,
}

struct Subtable {
    mask: FlowKey,
    table: Table,
    /// Hits in the current ranking interval.
    hits: u64,
    /// Packets its megaflows decided (any path) in the current and in the past ranking interval
    /// (kept only under a mask limit: the eviction's ranking).
    used: u64,
    used_past: u64,
    /// Creation order (the eviction's tie-break: oldest first).
    seq: u64,
}

/// What to do when installing a megaflow would create a subtable beyond the mask limit
/// (module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MaskEviction {
    /// Delete the subtable whose megaflows decided the fewest packets lately, then install.
    LeastHit,
    /// Install nothing.
    Refuse,
    /// Install the megaflow under a mask already there that examines every bit it needs (the
    /// most general such), or exact-match: a megaflow may always examine more bits than the
    /// slow path asked for. The exact-match subtable, when it is missing, takes the place of the
    /// least-hit one. The default: the policy that keeps a recurring attack cheap (README,
    /// *Defences against TSE*).
    #[default]
    Narrow,
}

impl MaskEviction {
    /// The policy as command lines and reports spell it.
    pub fn name(self) -> &'static str {
        match self {
            MaskEviction::LeastHit => "least-hit",
            MaskEviction::Refuse => "refuse",
            MaskEviction::Narrow => "narrow",
        }
    }

    /// The policy called `name` ([`MaskEviction::name`]).
    pub fn from_name(name: &str) -> Option<MaskEviction> {
        [MaskEviction::LeastHit, MaskEviction::Refuse, MaskEviction::Narrow].into_iter().find(|m| m.name() == name)
    }
}

/// A per-PMD limit on megaflow masks (subtables) and what happens at it (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaskLimit {
    /// Subtables at most (at least 1).
    pub masks: usize,
    pub eviction: MaskEviction,
}

/// What the mask limit and MFCGuard did, since the megaflow cache was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DefenceStats {
    /// Subtables evicted at the mask limit, and the megaflows they held.
    pub masks_evicted: u64,
    pub megaflows_evicted: u64,
    /// Installs refused at the mask limit ([`MaskEviction::Refuse`]).
    pub mask_refused: u64,
    /// Megaflows installed under a narrower mask at the limit ([`MaskEviction::Narrow`]).
    pub mask_narrowed: u64,
    /// Drop-only subtables MFCGuard deleted, and their megaflows.
    pub mfcguard_masks: u64,
    pub mfcguard_removed: u64,
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

/// The most slots [`Dpcls::reserve`] reserves ahead (a million: 448 MB of address space).
pub const RESERVE_SLOTS_MAX: usize = 1 << 20;

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
    /// The mask limit (module docs); `None`: none, as OVS.
    mask_limit: Option<MaskLimit>,
    next_seq: u64,
    defence: DefenceStats,
}

impl Drop for Dpcls {
    /// The megaflows still installed release their actions' lists.
    fn drop(&mut self) {
        rqvs_ofproto::actions::release_actions(self.slots.iter().filter_map(|s| s.megaflow.as_ref().map(|e| e.action)));
    }
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

/// One subtable's hash table, from masked key words to the megaflow's slot. A mask that examines
/// only narrow words (every 5-tuple megaflow) stores and hashes those five alone, so the 5-tuple
/// path pays nothing for the wide key; a wide mask stores every word (OVS's miniflow keeps only
/// the words a mask uses; two fixed widths are the simple version of that).
enum Table {
    Narrow { mask: NarrowWords, map: HashMap<NarrowWords, u32> },
    Wide { mask: KeyWords, map: HashMap<KeyWords, u32> },
}

impl Table {
    fn new(mask: &FlowKey) -> Table {
        if mask.is_narrow_mask() {
            Table::Narrow { mask: mask.to_narrow_words(), map: HashMap::new() }
        } else {
            Table::Wide { mask: mask.to_words(), map: HashMap::new() }
        }
    }

    /// The slot of the megaflow whose value is `words` under this table's mask.
    #[inline]
    fn get(&self, words: &KeyWords) -> Option<u32> {
        match self {
            Table::Narrow { mask, map } => map.get(&std::array::from_fn(|i| words[i] & mask[i])).copied(),
            Table::Wide { mask, map } => map.get(&mask_words(words, mask)).copied(),
        }
    }

    /// The slot of the megaflow whose (masked) value is `value`.
    fn get_value(&self, value: &FlowKey) -> Option<u32> {
        match self {
            Table::Narrow { map, .. } => map.get(&value.to_narrow_words()).copied(),
            Table::Wide { map, .. } => map.get(&value.to_words()).copied(),
        }
    }

    fn insert(&mut self, value: &FlowKey, slot: u32) {
        match self {
            Table::Narrow { map, .. } => map.insert(value.to_narrow_words(), slot),
            Table::Wide { map, .. } => map.insert(value.to_words(), slot),
        };
    }

    fn remove(&mut self, value: &FlowKey) {
        match self {
            Table::Narrow { map, .. } => map.remove(&value.to_narrow_words()),
            Table::Wide { map, .. } => map.remove(&value.to_words()),
        };
    }

    /// The slots of every megaflow in the table.
    fn values(&self) -> Box<dyn Iterator<Item = &u32> + '_> {
        match self {
            Table::Narrow { map, .. } => Box::new(map.values()),
            Table::Wide { map, .. } => Box::new(map.values()),
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Table::Narrow { map, .. } => map.is_empty(),
            Table::Wide { map, .. } => map.is_empty(),
        }
    }
}

impl Dpcls {
    pub fn new() -> Dpcls {
        let mut d = Dpcls::default();
        d.next_rank_ns = RANK_INTERVAL_NS;
        d.top_share = 1.0;
        d
    }

    /// Reserves room for `megaflows` slots (at most [`RESERVE_SLOTS_MAX`]): the slots are never
    /// moved by a growing vector while upcalls install (the address space is reserved; pages are
    /// touched only as slots are used).
    pub fn reserve(&mut self, megaflows: usize) {
        self.slots.reserve(megaflows.min(RESERVE_SLOTS_MAX).saturating_sub(self.slots.len()));
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
        self.hit(f, now_ns);
    }

    /// A packet hit a megaflow: records the hit ([`Dpcls::touch`]) and returns the megaflow's
    /// action and the rule it is attributed to (drop and [`NO_RULE`] for a stale handle).
    #[inline]
    pub fn hit(&mut self, f: MegaflowRef, now_ns: u64) -> (DpAction, RuleId) {
        match self.slots.get_mut(f.slot as usize) {
            Some(Slot { gen, megaflow: Some(e) }) if *gen == f.gen => {
                e.hits += 1;
                e.last_used_ns = now_ns;
                let out = (e.action, e.rule.unwrap_or(NO_RULE));
                if self.mask_limit.is_some() {
                    let si = e.subtable;
                    if let Some(Some(st)) = self.subtables.get_mut(si as usize) {
                        st.used += 1;
                    }
                }
                out
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
    pub fn lookup_in(&mut self, subtable: u32, words: &KeyWords) -> Option<MegaflowRef> {
        let st = self.subtables.get_mut(subtable as usize)?.as_mut()?;
        let slot = st.table.get(words)?;
        st.hits += 1;
        Some(MegaflowRef { slot, gen: self.slots[slot as usize].gen })
    }

    /// Walks the subtables in rank order; first hit wins. `probed` is also reported on a miss
    /// through the second value.
    #[inline]
    pub fn lookup(&mut self, words: &KeyWords) -> (Option<Hit>, u32) {
        for (i, &si) in self.order.iter().enumerate() {
            let st = self.subtables[si as usize].as_mut().expect("ranked subtable is live");
            if let Some(slot) = st.table.get(words) {
                st.hits += 1;
                let megaflow = MegaflowRef { slot, gen: self.slots[slot as usize].gen };
                return (Some(Hit { megaflow, subtable: si, probed: i as u32 + 1 }), i as u32 + 1);
            }
        }
        (None, self.order.len() as u32)
    }

    /// The first installed megaflow covering these key words, without counting a hit.
    pub fn peek(&self, words: &KeyWords) -> Option<MegaflowRef> {
        self.order.iter().find_map(|&si| {
            let st = self.subtables[si as usize].as_ref().expect("ranked subtable is live");
            let slot = st.table.get(words)?;
            Some(MegaflowRef { slot, gen: self.slots[slot as usize].gen })
        })
    }

    /// The installed megaflow with exactly this mask and value, if any.
    pub fn find(&self, mf: &Megaflow) -> Option<MegaflowRef> {
        let si = *self.by_mask.get(&mf.mask)?;
        let st = self.subtables[si as usize].as_ref()?;
        let slot = st.table.get_value(&mf.value)?;
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
        // The megaflow holds its action's list while installed (`rqvs_ofproto::actions`, *Freeing*).
        rqvs_ofproto::actions::hold_action(action);
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
        st.table.insert(&megaflow.value, slot);
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
    /// installed. Under a mask limit, a megaflow that needs a new subtable at the limit first
    /// evicts one, or is refused (module docs). The one place megaflows are installed (upcalls
    /// and flow prediction).
    pub fn install(&mut self, key: FlowKey, v: &Verdict, flow_limit: usize, now_ns: u64) -> Install {
        if let Some(f) = self.find(&v.megaflow).or_else(|| self.peek(&key.to_words())) {
            return Install::Existing(f);
        }
        if self.len() >= flow_limit {
            return Install::Refused;
        }
        if let Some(limit) = self.mask_limit {
            if !self.by_mask.contains_key(&v.megaflow.mask) && self.masks() >= limit.masks {
                match limit.eviction {
                    MaskEviction::Refuse => {
                        self.defence.mask_refused += 1;
                        return Install::Refused;
                    }
                    MaskEviction::LeastHit => self.evict_down_to(limit.masks - 1),
                    MaskEviction::Narrow => {
                        let mask = match self.narrowest_cover(&v.megaflow.mask) {
                            Some(m) => m,
                            None => {
                                self.evict_down_to(limit.masks - 1);
                                FlowKey::EXACT
                            }
                        };
                        self.defence.mask_narrowed += 1;
                        let mf = Megaflow { value: key.masked(&mask), mask };
                        return Install::Installed(self.insert(key, mf, v.action, v.rule, now_ns));
                    }
                }
            }
        }
        Install::Installed(self.insert(key, v.megaflow, v.action, v.rule, now_ns))
    }

    /// Sets the mask limit (`None`: none). A limit below the subtables already there applies
    /// from the next install on.
    pub fn set_mask_limit(&mut self, limit: Option<MaskLimit>) {
        self.mask_limit = limit.map(|l| MaskLimit { masks: l.masks.max(1), ..l });
    }

    pub fn mask_limit(&self) -> Option<MaskLimit> {
        self.mask_limit
    }

    /// What the mask limit and MFCGuard did so far.
    pub fn defence_stats(&self) -> DefenceStats {
        self.defence
    }

    /// Evicts least-hit subtables until at most `masks` are left.
    fn evict_down_to(&mut self, masks: usize) {
        while self.masks() > masks {
            let Some(si) = self.eviction_victim() else { break };
            self.defence.masks_evicted += 1;
            self.defence.megaflows_evicted += self.remove_subtable(si);
        }
    }

    /// The installed mask examining every bit `needed` examines with the fewest bits, if any.
    fn narrowest_cover(&self, needed: &FlowKey) -> Option<FlowKey> {
        self.order
            .iter()
            .map(|&si| &self.subtables[si as usize].as_ref().expect("ranked subtable is live").mask)
            .filter(|m| needed.is_subset_of(m))
            .min_by_key(|m| m.to_words().iter().map(|w| w.count_ones()).sum::<u32>())
            .copied()
    }

    /// The subtable to evict: fewest packets decided in the current and past ranking interval,
    /// the oldest among equals.
    fn eviction_victim(&self) -> Option<u32> {
        self.order.iter().copied().min_by_key(|&si| {
            let st = self.subtables[si as usize].as_ref().expect("ranked subtable is live");
            (st.used + st.used_past, st.seq)
        })
    }

    /// Deletes every megaflow of subtable `si` (which goes with the last); returns how many.
    fn remove_subtable(&mut self, si: u32) -> u64 {
        let Some(st) = self.subtables[si as usize].as_ref() else { return 0 };
        let slots: Vec<u32> = st.table.values().copied().collect();
        let mut n = 0;
        for slot in slots {
            let gen = self.slots[slot as usize].gen;
            n += u64::from(self.remove(MegaflowRef { slot, gen }));
        }
        n
    }

    /// MFCGuard: deletes every subtable whose megaflows all drop — masks that exist only for
    /// dropped traffic (module docs). Returns (subtables, megaflows) deleted.
    pub fn remove_drop_only(&mut self) -> (u64, u64) {
        let victims: Vec<u32> = self
            .order
            .iter()
            .copied()
            .filter(|&si| {
                let st = self.subtables[si as usize].as_ref().expect("ranked subtable is live");
                st.table.values().all(|&slot| {
                    self.slots[slot as usize].megaflow.as_ref().is_some_and(|e| e.action == DpAction::Drop)
                })
            })
            .collect();
        let (masks, mut megaflows) = (victims.len() as u64, 0);
        for si in victims {
            megaflows += self.remove_subtable(si);
        }
        self.defence.mfcguard_masks += masks;
        self.defence.mfcguard_removed += megaflows;
        (masks, megaflows)
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
        rqvs_ofproto::actions::release_action(e.action);
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
        st.table.remove(&megaflow.value);
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
        let st = Subtable { mask: *mask, table: Table::new(mask), hits: 0, used: 0, used_past: 0, seq: self.next_seq };
        self.next_seq += 1;
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
    /// Under a mask limit, one that would need a new subtable at the limit is deleted instead
    /// (counted as evicted; evicting another subtable could delete megaflows a model is about to
    /// hold). One whose mask and value an attached megaflow has already (installed by an upcall
    /// while it was detached, where lookups do not see it) is deleted too: a subtable holds one
    /// megaflow per value, and the other would be left pointing at a subtable that no longer
    /// lists it.
    pub fn attach(&mut self, f: MegaflowRef) -> bool {
        let Some(e) = self.get(f) else { return false };
        if e.subtable != DETACHED {
            return false;
        }
        let mf = e.megaflow;
        if self.find(&mf).is_some() {
            self.remove(f);
            return false;
        }
        if let Some(limit) = self.mask_limit {
            if !self.by_mask.contains_key(&mf.mask) && self.masks() >= limit.masks {
                self.remove(f);
                self.defence.megaflows_evicted += 1;
                return false;
            }
        }
        let si = self.subtable_for(&mf.mask);
        let st = self.subtables[si as usize].as_mut().expect("live");
        st.table.insert(&mf.value, f.slot);
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
            s.used_past = std::mem::take(&mut s.used);
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
    /// A hit's fields (the generation, the action, the rule, the counters) lie in the slot's
    /// first cache line.
    #[test]
    fn a_hit_reads_one_cache_line() {
        let e = std::mem::offset_of!(MegaflowEntry, subtable) + 4;
        let slot = std::mem::offset_of!(Slot, megaflow);
        // `Option` adds no tag before the entry (its niche is the action's).
        assert_eq!(std::mem::size_of::<Option<MegaflowEntry>>(), std::mem::size_of::<MegaflowEntry>());
        assert!(slot + e <= 64, "the hot fields end at byte {}", slot + e);
        assert_eq!(std::mem::align_of::<Slot>(), 64);
    }
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

    /// A verdict for `key` with a mask that examines `bits` high bits of the source address and
    /// the whole destination (one mask per `bits`).
    fn verdict(key: FlowKey, bits: u32, action: DpAction) -> Verdict {
        let mut m = FlowKey::default();
        m.nw_src = u32::MAX << (32 - bits);
        m.nw_dst = u32::MAX;
        Verdict { megaflow: mf(key, m), action, rule: None }
    }

    #[test]
    fn mask_limit_evicts_the_least_hit_subtable() {
        let mut d = Dpcls::new();
        d.set_mask_limit(Some(MaskLimit { masks: 3, eviction: MaskEviction::LeastHit }));
        let k = |bits: u32| FlowKey::ipv4(1 << (32 - bits), 0, 6, 0, 0);
        let busy = d.install(k(1), &verdict(k(1), 1, DpAction::Output(1)), usize::MAX, 0).megaflow().unwrap();
        for bits in 2..=3 {
            d.install(k(bits), &verdict(k(bits), bits, DpAction::Output(1)), usize::MAX, 0);
        }
        // The busy subtable takes hits (from any path: `hit`), the others none.
        for _ in 0..5 {
            d.hit(busy, 1);
        }
        assert_eq!(d.masks(), 3);
        for bits in 4..=10 {
            let o = d.install(k(bits), &verdict(k(bits), bits, DpAction::Output(1)), usize::MAX, 0);
            assert!(matches!(o, Install::Installed(_)), "{o:?}");
            assert!(d.masks() <= 3, "{} masks", d.masks());
            assert!(d.get(busy).is_some(), "the busy subtable was evicted at {bits} bits");
        }
        let s = d.defence_stats();
        assert_eq!((s.masks_evicted, s.megaflows_evicted, s.mask_refused), (7, 7, 0));
        // The oldest of the unused ones goes first: the newest is still there.
        let mut m10 = FlowKey::default();
        m10.nw_src = u32::MAX << 22;
        m10.nw_dst = u32::MAX;
        assert!(d.ranked_masks().contains(&m10));
        // After two ranking intervals without hits, the busy subtable is as cold as the others,
        // and the oldest: the next eviction takes it.
        d.maybe_rank(RANK_INTERVAL_NS);
        d.maybe_rank(3 * RANK_INTERVAL_NS);
        d.install(k(11), &verdict(k(11), 11, DpAction::Output(1)), usize::MAX, 0);
        assert!(d.get(busy).is_none());
    }

    #[test]
    fn mask_limit_refuses_new_masks_but_not_new_megaflows_of_known_ones() {
        let mut d = Dpcls::new();
        d.set_mask_limit(Some(MaskLimit { masks: 2, eviction: MaskEviction::Refuse }));
        let k = |bits: u32| FlowKey::ipv4(1 << (32 - bits), 0, 6, 0, 0);
        for bits in 1..=2 {
            assert!(matches!(
                d.install(k(bits), &verdict(k(bits), bits, DpAction::Drop), 100, 0),
                Install::Installed(_)
            ));
        }
        assert_eq!(d.install(k(3), &verdict(k(3), 3, DpAction::Drop), 100, 0), Install::Refused);
        // Same mask as an existing subtable, another value: installed.
        let other = FlowKey::ipv4(0, 1, 6, 0, 0);
        assert!(matches!(d.install(other, &verdict(other, 1, DpAction::Drop), 100, 0), Install::Installed(_)));
        assert_eq!((d.masks(), d.len(), d.defence_stats().mask_refused), (2, 3, 1));
    }

    #[test]
    fn remove_drop_only_keeps_subtables_with_any_other_action() {
        let mut d = Dpcls::new();
        d.enable_journal();
        let k = |bits: u32| FlowKey::ipv4(1 << (32 - bits), 0, 6, 0, 0);
        let k2 = FlowKey::ipv4(0, 1, 6, 0, 0);
        // Mask 1: drop only (two megaflows). Mask 2: drop and output. Mask 3: output only.
        let a = d.install(k(1), &verdict(k(1), 1, DpAction::Drop), 100, 0).megaflow().unwrap();
        let b = d.install(k2, &verdict(k2, 1, DpAction::Drop), 100, 0).megaflow().unwrap();
        d.install(k(2), &verdict(k(2), 2, DpAction::Drop), 100, 0);
        let k3 = FlowKey::ipv4(0, 2, 6, 0, 0);
        d.install(k3, &verdict(k3, 2, DpAction::Output(3)), 100, 0);
        d.install(k(3), &verdict(k(3), 3, DpAction::Output(3)), 100, 0);
        d.take_journal();
        assert_eq!((d.masks(), d.len()), (3, 5));
        assert_eq!(d.remove_drop_only(), (1, 2));
        assert_eq!((d.masks(), d.len()), (2, 3));
        assert!(d.get(a).is_none() && d.get(b).is_none());
        // Deleted through `remove`: journaled for the revalidator thread.
        let j = d.take_journal();
        assert_eq!(j.removed.len(), 2);
        assert_eq!(d.remove_drop_only(), (0, 0));
        let s = d.defence_stats();
        assert_eq!((s.mfcguard_masks, s.mfcguard_removed), (1, 2));
    }

    #[test]
    fn attach_at_the_mask_limit_deletes_instead_of_exceeding_it() {
        let mut d = Dpcls::new();
        d.set_mask_limit(Some(MaskLimit { masks: 2, eviction: MaskEviction::LeastHit }));
        let k = |bits: u32| FlowKey::ipv4(1 << (32 - bits), 0, 6, 0, 0);
        let a = d.install(k(1), &verdict(k(1), 1, DpAction::Drop), 100, 0).megaflow().unwrap();
        assert!(d.detach(a));
        for bits in 2..=3 {
            d.install(k(bits), &verdict(k(bits), bits, DpAction::Drop), 100, 0);
        }
        assert_eq!((d.masks(), d.len()), (2, 3));
        assert!(!d.attach(a));
        assert!(d.get(a).is_none(), "deleted, not left detached where nothing finds it");
        assert_eq!((d.masks(), d.len(), d.defence_stats().megaflows_evicted), (2, 2, 1));
        // Into an existing subtable it goes back as usual.
        let mut m2 = FlowKey::default();
        m2.nw_src = u32::MAX << 30;
        m2.nw_dst = u32::MAX;
        let same_mask = FlowKey::ipv4(0, 5, 6, 0, 0);
        let b = d.insert(same_mask, mf(same_mask, m2), DpAction::Drop, None, 0);
        assert!(d.detach(b) && d.attach(b));
        assert_eq!(d.masks(), 2);
    }

    /// A detached megaflow whose twin (same mask and value) was installed meanwhile is deleted
    /// when attached, not linked over the twin: removing either afterwards leaves the subtables
    /// consistent (this panicked in CCACHE's model swap under a TSE attack with defences).
    #[test]
    fn attach_over_an_identical_attached_megaflow_deletes_the_detached_one() {
        let mut d = Dpcls::new();
        let k = FlowKey::ipv4(1 << 31, 0, 6, 0, 0);
        let a = d.install(k, &verdict(k, 1, DpAction::Drop), 100, 0).megaflow().unwrap();
        assert!(d.detach(a));
        // Lookups do not see a detached megaflow: the upcall installs its twin.
        let b = d.install(k, &verdict(k, 1, DpAction::Drop), 100, 0).megaflow().unwrap();
        assert_ne!(a, b);
        assert!(!d.attach(a));
        assert!(d.get(a).is_none() && d.get(b).is_some());
        assert_eq!((d.masks(), d.len()), (1, 1));
        assert!(d.remove(b));
        assert_eq!((d.masks(), d.len()), (0, 0));
        // Its subtable gone, a new install makes it again.
        d.install(k, &verdict(k, 1, DpAction::Drop), 100, 0);
        assert_eq!((d.masks(), d.len()), (1, 1));
    }

    #[test]
    fn narrow_installs_under_a_covering_mask_or_exact_match() {
        let mut d = Dpcls::new();
        d.set_mask_limit(Some(MaskLimit { masks: 2, eviction: MaskEviction::Narrow }));
        let k = |bits: u32| FlowKey::ipv4(1 << (32 - bits), 0, 6, 0, 0);
        for bits in [3, 5] {
            d.install(k(bits), &verdict(k(bits), bits, DpAction::Output(1)), 100, 0);
        }
        // Needs 1 bit: both installed masks examine it; the one with fewer bits (3) takes it.
        let f = d.install(k(1), &verdict(k(1), 1, DpAction::Output(2)), 100, 0).megaflow().unwrap();
        let e = d.get(f).unwrap();
        assert_eq!((e.megaflow.mask.nw_src, e.megaflow.value.nw_src), (u32::MAX << 29, 0x8000_0000));
        assert_eq!((d.masks(), d.defence_stats().mask_narrowed, d.defence_stats().masks_evicted), (2, 1, 0));
        // Needs a port nobody examines: exact-match, in place of the least-hit subtable.
        let mut port = FlowKey::default();
        port.tp_dst = u16::MAX;
        let p = FlowKey::ipv4(7, 7, 6, 1, 99);
        let v = Verdict { megaflow: mf(p, port), action: DpAction::Drop, rule: None };
        let f = d.install(p, &v, 100, 0).megaflow().unwrap();
        assert_eq!(d.get(f).unwrap().megaflow.mask, FlowKey::EXACT);
        assert_eq!((d.masks(), d.defence_stats().masks_evicted), (2, 1));
        // The next one joins the exact-match subtable: nothing more evicted.
        let q = FlowKey::ipv4(8, 8, 6, 1, 98);
        let v = Verdict { megaflow: mf(q, port), action: DpAction::Drop, rule: None };
        assert!(matches!(d.install(q, &v, 100, 0), Install::Installed(_)));
        assert_eq!((d.masks(), d.defence_stats().masks_evicted, d.defence_stats().mask_narrowed), (2, 1, 3));
        // Each covers its own packet only where the slow path's mask would have.
        assert_eq!(d.peek(&q.to_words()).map(|f| d.get(f).unwrap().action), Some(DpAction::Drop));
        let mut q2 = q;
        q2.tp_src = 2;
        assert!(d.peek(&q2.to_words()).is_none(), "exact-match: another microflow upcalls");
    }
}
