//! The revalidator's index over megaflows, to find the ones a changed rule can affect without
//! looking at every megaflow (the module docs of [`crate::revalidator`], *Incremental
//! revalidation*).
//!
//! A megaflow with key `k` and mask `m` covers the packets `p` with `p & m == k & m`; a rule with
//! match `r` can change the translation of one of them only if the two regions intersect
//! ([`Match::overlaps`] of the rule's match and [`region`]). The index narrows the candidates by
//! one IPv4 address field: megaflows are bucketed by the length of their mask's leading run of
//! ones on `nw_src` (and, separately, on `nw_dst`) — `g` — and ordered by the key's address in
//! each bucket. A rule whose mask on that field starts with `l` ones, value `v`, can only meet a
//! megaflow of bucket `g` whose key agrees with `v` on the first `min(l, g)` bits: one range of
//! the bucket's order. The query uses the field on which the rule is longer and returns a
//! superset of the megaflows whose regions meet the rule (the caller tests each with
//! [`Match::overlaps`]); a rule that wildcards both addresses gets every megaflow.

use std::collections::BTreeMap;
use std::hash::Hash;

use hashbrown::HashMap;
use rqvs_flow::{FlowKey, Match};

/// The packets a megaflow covers, as a match.
pub fn region(key: &FlowKey, mask: &FlowKey) -> Match {
    Match::from_masked(*key, *mask)
}

/// Buckets per address field: leading-ones lengths 0..=32.
const BUCKETS: usize = 33;

/// One address field's index: per leading-ones length of the megaflow's mask, megaflows by
/// the key's address.
struct FieldIndex<R> {
    buckets: Vec<BTreeMap<u32, Vec<R>>>,
}

impl<R: Copy + Eq> FieldIndex<R> {
    fn new() -> Self {
        FieldIndex { buckets: (0..BUCKETS).map(|_| BTreeMap::new()).collect() }
    }

    fn insert(&mut self, r: R, addr: u32, g: usize) {
        self.buckets[g].entry(addr).or_default().push(r);
    }

    fn remove(&mut self, r: R, addr: u32, g: usize) {
        if let Some(v) = self.buckets[g].get_mut(&addr) {
            if let Some(i) = v.iter().position(|&x| x == r) {
                v.swap_remove(i);
            }
            if v.is_empty() {
                self.buckets[g].remove(&addr);
            }
        }
    }

    /// Every megaflow whose key agrees with `v` on the first `min(l, g)` bits.
    fn query(&self, v: u32, l: usize, out: &mut Vec<R>) {
        for (g, bucket) in self.buckets.iter().enumerate() {
            if bucket.is_empty() {
                continue;
            }
            let c = l.min(g);
            let pfx = prefix_mask(c);
            let lo = v & pfx;
            let hi = lo | !pfx;
            for refs in bucket.range(lo..=hi).map(|(_, refs)| refs) {
                out.extend_from_slice(refs);
            }
        }
    }
}

/// The first `len` bits of a 32-bit address set.
fn prefix_mask(len: usize) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len.min(32))
    }
}

/// The length of a mask's leading run of ones.
fn leading(mask: u32) -> usize {
    mask.leading_ones() as usize
}

/// Megaflows by handle `R`, each with its key and mask, indexed by `nw_src` and `nw_dst` (module
/// docs).
pub struct MegaflowIndex<R> {
    entries: HashMap<R, (FlowKey, FlowKey)>,
    src: FieldIndex<R>,
    dst: FieldIndex<R>,
}

impl<R: Copy + Eq + Hash> Default for MegaflowIndex<R> {
    fn default() -> Self {
        MegaflowIndex { entries: HashMap::new(), src: FieldIndex::new(), dst: FieldIndex::new() }
    }
}

impl<R: Copy + Eq + Hash> MegaflowIndex<R> {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds (or replaces) the megaflow `r`.
    pub fn insert(&mut self, r: R, key: FlowKey, mask: FlowKey) {
        self.remove(r);
        self.src.insert(r, key.nw_src, leading(mask.nw_src));
        self.dst.insert(r, key.nw_dst, leading(mask.nw_dst));
        self.entries.insert(r, (key, mask));
    }

    /// Removes the megaflow `r` (absent: nothing).
    pub fn remove(&mut self, r: R) {
        if let Some((key, mask)) = self.entries.remove(&r) {
            self.src.remove(r, key.nw_src, leading(mask.nw_src));
            self.dst.remove(r, key.nw_dst, leading(mask.nw_dst));
        }
    }

    /// Appends to `out` every megaflow whose region meets `m` (exactly those: the index's
    /// candidates are tested with [`Match::overlaps`]).
    pub fn overlapping(&self, m: &Match, out: &mut Vec<R>) {
        let (ls, ld) = (leading(m.mask().nw_src), leading(m.mask().nw_dst));
        let mut cand = Vec::new();
        if ls == 0 && ld == 0 {
            cand.extend(self.entries.keys().copied());
        } else if ls >= ld {
            self.src.query(m.value().nw_src, ls, &mut cand);
        } else {
            self.dst.query(m.value().nw_dst, ld, &mut cand);
        }
        out.extend(cand.into_iter().filter(|r| {
            let (key, mask) = &self.entries[r];
            region(key, mask).overlaps(m)
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rqvs_flow::PortRange;

    fn key(src: u32, dst: u32, sport: u16, dport: u16) -> FlowKey {
        FlowKey::ipv4(src, dst, 6, sport, dport)
    }

    fn prefix_key(src_len: usize, dst_len: usize, ports: u16) -> FlowKey {
        let mut m = FlowKey::default();
        m.nw_src = prefix_mask(src_len);
        m.nw_dst = prefix_mask(dst_len);
        m.tp_src = ports;
        m.tp_dst = ports;
        m.nw_proto = 0xff;
        m
    }

    proptest! {
        /// The index finds exactly the megaflows a linear scan with `overlaps` finds, for
        /// prefix and non-prefix masks, port ranges, and removals.
        #[test]
        fn index_equals_scan(
            flows in prop::collection::vec((0u32..16, 0u32..16, 0usize..=32, 0usize..=32, any::<bool>(), any::<u32>()), 1..60),
            rules in prop::collection::vec((0u32..16, 0u32..16, 0usize..=32, 0usize..=32, 0u16..4, 0u16..4, any::<u32>()), 1..20),
            removed in prop::collection::vec(0usize..60, 0..20),
        ) {
            // Addresses drawn from few high-bit patterns so that prefixes collide.
            let spread = |a: u32, noise: u32| (a << 28) | (noise & 0x0fff_ffff);
            let mut idx = MegaflowIndex::default();
            let mut all = Vec::new();
            for (i, &(s, d, sl, dl, odd, noise)) in flows.iter().enumerate() {
                let k = key(spread(s, noise), spread(d, noise.rotate_left(7)), (noise % 5) as u16, (noise % 3) as u16);
                let mut m = prefix_key(sl, dl, if odd { 0xffff } else { 0 });
                if odd {
                    // A mask that is not a prefix.
                    m.nw_src ^= 0x0000_0100;
                }
                idx.insert(i, k, m);
                all.push((i, k, m));
            }
            for &r in &removed {
                idx.remove(r);
                all.retain(|&(i, _, _)| i != r);
            }
            for &(s, d, sl, dl, lo, span, noise) in &rules {
                let v = key(spread(s, noise), spread(d, noise.rotate_left(3)), 0, 0);
                let mut mask = prefix_key(sl, dl, 0);
                mask.nw_proto = 0xff;
                let m = Match::new(v.masked(&mask), mask, PortRange::new(lo, lo + span).unwrap(), PortRange::ANY).unwrap();
                let mut got = Vec::new();
                idx.overlapping(&m, &mut got);
                got.sort();
                let want: Vec<usize> = all.iter().filter(|(_, k, mk)| region(k, mk).overlaps(&m)).map(|&(i, _, _)| i).collect();
                prop_assert_eq!(got, want);
            }
            prop_assert_eq!(idx.len(), all.len());
        }
    }
}
