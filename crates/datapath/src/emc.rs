//! The exact-match cache (OVS's EMC): whole packet keys → the megaflow they hit.
//!
//! - [`EMC_ENTRIES`] = 8192 entries; a key has **2 candidate slots**, taken from two 13-bit
//!   segments of its flow hash (OVS's `EM_FLOW_HASH_SEGS` = 2, `EM_FLOW_HASH_SHIFT` = 13).
//! - A hit compares the stored hash and the whole key, then checks that the megaflow it points at
//!   is still installed (the [`FlowRef`] generation), so deleting a megaflow needs no EMC sweep.
//! - **Probabilistic insertion**: after a megaflow hit or an upcall, the key is inserted with
//!   probability `p` (OVS's `emc-insert-inv-prob`, default 1/100; the paper used 1/5), drawn from
//!   a seeded xorshift generator so runs are reproducible. `p = 0` never inserts.
//! - **Replacement**, as OVS's `emc_insert`: a candidate holding the same key is updated; else an
//!   empty or dead candidate is used; else the candidate whose stored hash is smaller (a cheap
//!   pseudo-random choice).
//! - The EMC can be disabled ([`crate::Config::emc`]): no lookups, no insertions.
//! - **What an entry points at** is a [`FlowRef`] whose liveness the owner decides
//!   ([`EmcTarget`]): a megaflow of the [`Dpcls`] in ORIG and CCACHE, a rule of the current table
//!   version in CFLOWS (stale after any rule update).

use rqvs_flow::FlowKey;

use crate::dpcls::{Dpcls, FlowRef};

/// Whatever an EMC entry's [`FlowRef`] points into, and whether it is still there.
pub trait EmcTarget {
    fn is_live(&self, f: FlowRef) -> bool;
}

impl EmcTarget for Dpcls {
    #[inline]
    fn is_live(&self, f: FlowRef) -> bool {
        self.get(f).is_some()
    }
}

pub const EMC_ENTRIES: usize = 8192;
const MASK: u32 = EMC_ENTRIES as u32 - 1;
const SHIFT: u32 = 13;

#[derive(Clone, Copy)]
struct Entry {
    hash: u32,
    flow: FlowRef,
    key: FlowKey,
}

const EMPTY: Entry = Entry { hash: 0, flow: FlowRef::NONE, key: FlowKey::EXACT };

pub struct Emc {
    entries: Vec<Entry>,
    /// Insert when a uniform u32 draw is below this (`p · 2³²`, saturating).
    threshold: u64,
    rng: u64,
    pub inserts: u64,
}

impl Emc {
    /// An empty EMC inserting with probability `insert_prob` (clamped to 0..=1).
    pub fn new(insert_prob: f64, seed: u64) -> Emc {
        let p = insert_prob.clamp(0.0, 1.0);
        Emc { entries: vec![EMPTY; EMC_ENTRIES], threshold: (p * 4_294_967_296.0) as u64, rng: seed | 1, inserts: 0 }
    }

    #[inline]
    fn slots(hash: u32) -> [usize; 2] {
        [(hash & MASK) as usize, ((hash >> SHIFT) & MASK) as usize]
    }

    /// The live megaflow `key` maps to, if any.
    #[inline]
    pub fn lookup(&self, hash: u32, key: &FlowKey, dpcls: &impl EmcTarget) -> Option<FlowRef> {
        for i in Self::slots(hash) {
            let e = &self.entries[i];
            if e.hash == hash && e.key == *key && dpcls.is_live(e.flow) {
                return Some(e.flow);
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
    pub fn probabilistic_insert(&mut self, hash: u32, key: &FlowKey, flow: FlowRef, dpcls: &impl EmcTarget) {
        if self.threshold == 0 || self.draw() >= self.threshold {
            return;
        }
        self.insert(hash, key, flow, dpcls);
    }

    /// Inserts unconditionally (module docs for the replacement rule).
    pub fn insert(&mut self, hash: u32, key: &FlowKey, flow: FlowRef, dpcls: &impl EmcTarget) {
        self.inserts += 1;
        let [a, b] = Self::slots(hash);
        let mut victim = None;
        for i in [a, b] {
            let e = &self.entries[i];
            if e.hash == hash && e.key == *key {
                self.entries[i].flow = flow;
                return;
            }
            if victim.is_none() && !dpcls.is_live(e.flow) {
                victim = Some(i);
            }
        }
        let i = victim.unwrap_or(if self.entries[a].hash <= self.entries[b].hash { a } else { b });
        self.entries[i] = Entry { hash, flow, key: *key };
    }

    /// Live entries (for reports and tests).
    pub fn occupancy(&self, dpcls: &impl EmcTarget) -> usize {
        self.entries.iter().filter(|e| dpcls.is_live(e.flow)).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DpAction;
    use rqvs_classify::ofproto::Megaflow;

    #[test]
    fn hit_after_insert_and_stale_after_megaflow_deleted() {
        let mut d = Dpcls::new();
        let k = FlowKey::ipv4(1, 2, 6, 3, 4);
        let f = d.insert(k, Megaflow { value: k, mask: FlowKey::EXACT }, DpAction::Drop, None, 0);
        let mut emc = Emc::new(1.0, 7);
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

    #[test]
    fn insertion_probability_is_respected() {
        let d = Dpcls::new();
        let k = FlowKey::ipv4(1, 2, 6, 3, 4);
        let mut emc = Emc::new(0.2, 99);
        for _ in 0..10_000 {
            emc.probabilistic_insert(1, &k, FlowRef::NONE, &d);
        }
        assert!((1_700..2_300).contains(&emc.inserts), "{}", emc.inserts);
        let mut never = Emc::new(0.0, 99);
        for _ in 0..1000 {
            never.probabilistic_insert(1, &k, FlowRef::NONE, &d);
        }
        assert_eq!(never.inserts, 0);
    }
}
