//! The exact-match cache (OVS's EMC): whole packet keys → what classified them last.
//!
//! - [`EMC_ENTRIES`] = 8192 entries by default, as OVS; any power of two from 2 to 2^21 (2M, the
//!   largest of the paper's Fig. 9) with [`EmcEntries`] ([`crate::DatapathConfig::emc_entries`],
//!   `--emc-entries`). A key has **2 candidate slots**, taken from two `log2(entries)`-bit
//!   segments of its flow hash (OVS's `EM_FLOW_HASH_SEGS` = 2, `EM_FLOW_HASH_SHIFT` = 13 at 8192
//!   entries; above 2^16 entries the second segment has fewer than `log2(entries)` bits left in
//!   the 32-bit hash, so second slots fall in the first `2^(32 - log2(entries))` entries, as they
//!   would in OVS built with a larger shift).
//! - **Entries hold narrow keys** ([`NarrowKey`], 40 bytes: the 5-tuple and L2 members), as OVS's
//!   EMC holds miniflows (only the words a packet fills): a packet with a wide member (IPv6,
//!   ARP/ND addresses, metadata) keeps its whole key in a side array, allocated on the first such
//!   packet and read only for them, so a 5-tuple workload's EMC is the size it was before the
//!   key grew (an entry of 48 bytes, not 120).
//! - A hit compares the stored hash and the whole key, then asks the owner whether what the
//!   entry points at is still there ([`EmcTarget::is_live`]), so deleting a megaflow or retiring
//!   a rule table needs no EMC sweep.
//! - **Probabilistic insertion**: after a megaflow hit or an upcall, the key is inserted with
//!   probability `p` (OVS's `emc-insert-inv-prob`, default 1/100; the paper used 1/5), drawn from
//!   a seeded xorshift generator so runs are reproducible. `p = 0` never inserts.
//! - **Replacement**, as OVS's `emc_insert`: a candidate holding the same key is updated; else an
//!   empty or dead candidate is used; else the candidate whose stored hash is smaller (a cheap
//!   pseudo-random choice).
//! - The EMC can be disabled ([`crate::DatapathConfig::emc`]): no lookups, no insertions.
//! - **What an entry points at** is the type parameter `R` ([`EmcRef`]): a [`MegaflowRef`] in
//!   ORIG and CCACHE (live while the megaflow is installed), a [`crate::cflows::RuleRef`] in
//!   CFLOWS (a rule of one table generation).

use rqvs_flow::key::NarrowKey;
use rqvs_flow::FlowKey;

use crate::dpcls::{Dpcls, MegaflowRef};

/// What an EMC entry holds: a small `Copy` handle with a value that is never live.
pub trait EmcRef: Copy + PartialEq + std::fmt::Debug {
    /// A handle no owner considers live (empty entries hold it).
    const NONE: Self;
}

impl EmcRef for MegaflowRef {
    const NONE: MegaflowRef = MegaflowRef::NONE;
}

/// Whatever an EMC entry's handle points into, and whether it is still there.
pub trait EmcTarget<R> {
    fn is_live(&self, r: R) -> bool;
}

impl EmcTarget<MegaflowRef> for Dpcls {
    #[inline]
    fn is_live(&self, f: MegaflowRef) -> bool {
        self.get(f).is_some()
    }
}

/// OVS's EMC size (the default of [`EmcEntries`]).
pub const EMC_ENTRIES: usize = 8192;

/// The EMC's number of entries: a power of two from 2 to [`EmcEntries::MAX`] (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmcEntries {
    /// log2 of the entries.
    shift: u32,
}

impl EmcEntries {
    /// The most entries (2^21, the paper's largest EMC).
    pub const MAX: usize = 1 << 21;

    /// `n` entries, or why not (the message names the rule, for the option that gave `n`).
    pub fn new(n: usize) -> Result<EmcEntries, String> {
        if !n.is_power_of_two() || !(2..=Self::MAX).contains(&n) {
            return Err(format!("expected a power of two from 2 to {} (2^21), found {n}", Self::MAX));
        }
        Ok(EmcEntries { shift: n.trailing_zeros() })
    }

    pub fn get(self) -> usize {
        1 << self.shift
    }
}

impl Default for EmcEntries {
    /// OVS's [`EMC_ENTRIES`].
    fn default() -> Self {
        EmcEntries { shift: EMC_ENTRIES.trailing_zeros() }
    }
}

#[derive(Clone, Copy)]
struct Entry<R> {
    hash: u32,
    /// The key has a wide member: it is in [`Emc::wide`] at the entry's index, `key` unused.
    wide: bool,
    target: R,
    key: NarrowKey,
}

/// A key as the EMC compares it: its narrow form, or the whole key when it has a wide member.
#[derive(Clone, Copy)]
enum Stored<'a> {
    Narrow(NarrowKey),
    Wide(&'a FlowKey),
}

impl Stored<'_> {
    #[inline]
    fn of(key: &FlowKey) -> Stored<'_> {
        key.narrow().map_or(Stored::Wide(key), Stored::Narrow)
    }
}

/// The exact-match cache (module docs), its entries pointing at `R`s.
pub struct Emc<R: EmcRef> {
    entries: Vec<Entry<R>>,
    /// The whole keys of the entries whose key is wide (module docs); empty until one is.
    wide: Vec<FlowKey>,
    /// `entries.len() - 1` and `log2(entries.len())`: the hash segments' mask and shift.
    mask: u32,
    shift: u32,
    /// Insert when a uniform u32 draw is below this (`p · 2³²`, saturating).
    threshold: u64,
    rng: u64,
    pub inserts: u64,
}

impl<R: EmcRef> Emc<R> {
    /// An empty EMC of OVS's [`EMC_ENTRIES`] inserting with probability `insert_prob`
    /// (clamped to 0..=1).
    pub fn new(insert_prob: f64, seed: u64) -> Emc<R> {
        Self::with_entries(EmcEntries::default(), insert_prob, seed)
    }

    /// [`Emc::new`] with `entries` entries.
    pub fn with_entries(entries: EmcEntries, insert_prob: f64, seed: u64) -> Emc<R> {
        let p = insert_prob.clamp(0.0, 1.0);
        // Empty entries point at nothing live, so their key never matters.
        let never = FlowKey::ZERO.narrow().expect("the zero key is narrow");
        let empty = Entry { hash: 0, wide: false, target: R::NONE, key: never };
        Emc {
            entries: vec![empty; entries.get()],
            wide: Vec::new(),
            mask: entries.get() as u32 - 1,
            shift: entries.shift,
            threshold: (p * 4_294_967_296.0) as u64,
            rng: seed | 1,
            inserts: 0,
        }
    }

    /// The number of entries.
    pub fn entries(&self) -> usize {
        self.entries.len()
    }

    #[inline]
    fn slots(&self, hash: u32) -> [usize; 2] {
        [(hash & self.mask) as usize, ((hash >> self.shift) & self.mask) as usize]
    }

    /// Does entry `i` hold `key`?
    #[inline]
    fn holds(&self, i: usize, key: Stored) -> bool {
        let e = &self.entries[i];
        match key {
            Stored::Narrow(n) => !e.wide && e.key == n,
            Stored::Wide(k) => e.wide && self.wide[i] == *k,
        }
    }

    /// The live target `key` maps to, if any.
    #[inline]
    pub fn lookup(&self, hash: u32, key: &FlowKey, owner: &impl EmcTarget<R>) -> Option<R> {
        self.lookup_stored(hash, Stored::of(key), owner)
    }

    /// [`Emc::lookup`] of a narrow key (`hash` its [`crate::flow_hash_narrow`]).
    #[inline]
    pub fn lookup_narrow(&self, hash: u32, key: &NarrowKey, owner: &impl EmcTarget<R>) -> Option<R> {
        self.lookup_stored(hash, Stored::Narrow(*key), owner)
    }

    #[inline]
    fn lookup_stored(&self, hash: u32, key: Stored, owner: &impl EmcTarget<R>) -> Option<R> {
        for i in self.slots(hash) {
            let e = &self.entries[i];
            if e.hash == hash && self.holds(i, key) && owner.is_live(e.target) {
                return Some(e.target);
            }
        }
        None
    }

    #[inline]
    fn draw(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x >> 32
    }

    /// Inserts with the configured probability.
    #[inline]
    pub fn probabilistic_insert(&mut self, hash: u32, key: &FlowKey, target: R, owner: &impl EmcTarget<R>) {
        if self.admits() {
            self.insert(hash, key, target, owner);
        }
    }

    /// [`Emc::probabilistic_insert`] of a narrow key (`hash` its [`crate::flow_hash_narrow`]).
    #[inline]
    pub fn probabilistic_insert_narrow(&mut self, hash: u32, key: &NarrowKey, target: R, owner: &impl EmcTarget<R>) {
        if self.admits() {
            self.insert_stored(hash, Stored::Narrow(*key), target, owner);
        }
    }

    /// Does this insertion happen (a draw below the configured probability)?
    #[inline]
    fn admits(&mut self) -> bool {
        self.threshold != 0 && self.draw() < self.threshold
    }

    /// Inserts unconditionally (module docs for the replacement rule).
    pub fn insert(&mut self, hash: u32, key: &FlowKey, target: R, owner: &impl EmcTarget<R>) {
        self.insert_stored(hash, Stored::of(key), target, owner)
    }

    fn insert_stored(&mut self, hash: u32, stored: Stored, target: R, owner: &impl EmcTarget<R>) {
        self.inserts += 1;
        let [a, b] = self.slots(hash);
        let mut victim = None;
        for i in [a, b] {
            let e = &self.entries[i];
            if e.hash == hash && self.holds(i, stored) {
                self.entries[i].target = target;
                return;
            }
            if victim.is_none() && !owner.is_live(e.target) {
                victim = Some(i);
            }
        }
        let i = victim.unwrap_or(if self.entries[a].hash <= self.entries[b].hash { a } else { b });
        let e = &mut self.entries[i];
        (e.hash, e.target) = (hash, target);
        match stored {
            Stored::Narrow(n) => (e.wide, e.key) = (false, n),
            Stored::Wide(k) => {
                e.wide = true;
                if self.wide.is_empty() {
                    self.wide = vec![FlowKey::EXACT; self.entries.len()];
                }
                self.wide[i] = *k;
            }
        }
    }

    /// Live entries (for reports and tests).
    pub fn occupancy(&self, owner: &impl EmcTarget<R>) -> usize {
        self.entries.iter().filter(|e| owner.is_live(e.target)).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_classify::ofproto::Megaflow;
    use rqvs_ofproto::DpAction;

    #[test]
    fn hit_after_insert_and_stale_after_megaflow_deleted() {
        let mut d = Dpcls::new();
        let k = FlowKey::ipv4(1, 2, 6, 3, 4);
        let f = d.insert(k, Megaflow { value: k, mask: FlowKey::EXACT }, DpAction::Drop, None, 0);
        let mut emc: Emc<MegaflowRef> = Emc::new(1.0, 7);
        let h = crate::flow_hash(&k);
        assert!(emc.lookup(h, &k, &d).is_none());
        emc.probabilistic_insert(h, &k, f, &d);
        assert_eq!(emc.lookup(h, &k, &d), Some(f));
        let mut k2 = k;
        k2.tp_dst = 5;
        assert!(emc.lookup(h, &k2, &d).is_none(), "whole key compared");
        d.remove(f);
        assert!(emc.lookup(h, &k, &d).is_none());
    }

    /// Sizes other than powers of two from 2 to 2^21 are errors; a larger EMC holds more keys
    /// (every key's two slots from its hash's segments at the size's width).
    #[test]
    fn sizes_are_checked_and_used() {
        for bad in [0, 1, 3, 8191, 8193, EmcEntries::MAX * 2] {
            let e = EmcEntries::new(bad).unwrap_err();
            assert!(e.contains("power of two from 2 to 2097152") && e.ends_with(&format!("found {bad}")), "{e}");
        }
        assert_eq!(EmcEntries::default().get(), EMC_ENTRIES);
        let mut d = Dpcls::new();
        let mut live = |n: usize| {
            let mut emc: Emc<MegaflowRef> = Emc::with_entries(EmcEntries::new(n).unwrap(), 1.0, 7);
            assert_eq!(emc.entries(), n);
            for i in 0..20_000u32 {
                let k = FlowKey::ipv4(i, 2, 6, 3, 4);
                let f = d.insert(k, Megaflow { value: k, mask: FlowKey::EXACT }, DpAction::Drop, None, 0);
                emc.insert(crate::flow_hash(&k), &k, f, &d);
            }
            emc.occupancy(&d)
        };
        let (small, default, large) = (live(1024), live(EMC_ENTRIES), live(1 << 17));
        assert!(small <= 1024 && default <= EMC_ENTRIES, "{small} {default}");
        assert!(small < default && default < large && large > 15_000, "{small} {default} {large}");
    }

    /// Wide keys (IPv6, metadata) live in the side array: a hit needs the whole key, a narrow
    /// key equal in its narrow members does not hit a wide entry nor the other way round, and
    /// an entry changes kind when a key of the other kind takes its slot.
    #[test]
    fn wide_keys_are_compared_whole() {
        let mut d = Dpcls::new();
        let mut emc: Emc<MegaflowRef> = Emc::with_entries(EmcEntries::new(2).unwrap(), 1.0, 1);
        let narrow = FlowKey::ipv4(1, 2, 6, 3, 4);
        let mut wide = narrow;
        wide.metadata = 7;
        let mut wide2 = wide;
        wide2.ipv6_dst = 9;
        let f = d.insert(narrow, Megaflow { value: narrow, mask: FlowKey::EXACT }, DpAction::Drop, None, 0);
        let g = d.insert(wide, Megaflow { value: wide, mask: FlowKey::EXACT }, DpAction::Drop, None, 0);
        // One hash for all three: they share the slots.
        emc.insert(5, &wide, g, &d);
        assert_eq!(emc.lookup(5, &wide, &d), Some(g));
        assert_eq!(emc.lookup(5, &narrow, &d), None, "a narrow key does not hit a wide entry");
        assert_eq!(emc.lookup(5, &wide2, &d), None, "the wide members are compared");
        emc.insert(5, &narrow, f, &d);
        assert_eq!(emc.lookup(5, &narrow, &d), Some(f));
        assert_eq!(emc.lookup(5, &wide, &d), Some(g), "the other slot still holds the wide key");
        // Both slots taken: a third key replaces one, and the entry takes the new key's kind.
        emc.insert(5, &wide2, g, &d);
        let hits = [&narrow, &wide, &wide2].iter().filter(|k| emc.lookup(5, k, &d).is_some()).count();
        assert_eq!(hits, 2);
        assert_eq!(emc.lookup(5, &wide2, &d), Some(g));
    }

    #[test]
    fn insertion_probability_is_respected() {
        let d = Dpcls::new();
        let k = FlowKey::ipv4(1, 2, 6, 3, 4);
        let mut emc: Emc<MegaflowRef> = Emc::new(0.2, 99);
        for _ in 0..10_000 {
            emc.probabilistic_insert(1, &k, MegaflowRef::NONE, &d);
        }
        assert!((1_700..2_300).contains(&emc.inserts), "{}", emc.inserts);
        let mut never: Emc<MegaflowRef> = Emc::new(0.0, 99);
        for _ in 0..1000 {
            never.probabilistic_insert(1, &k, MegaflowRef::NONE, &d);
        }
        assert_eq!(never.inserts, 0);
    }
}
