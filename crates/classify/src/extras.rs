//! `Extras`: the side slab of the fields a rule's compact entry does not hold.
//!
//! A TupleMerge or reference entry ([`crate::compact::CompactMatch`]) and a NuevoMatchUP slot
//! (`nuevomatch/slot.rs`) hold what ClassBench rules use — IPv4 addresses, ports, protocol, TCP
//! flags, `dl_type` — and check it themselves. A rule that matches anything else (in_port, MACs,
//! VLAN, ToS, fragments, TTL, metadata, IPv6, ND, ARP hardware addresses: OpenStack's and
//! Faucet's rules) keeps **only the rest** here, the way OVS's minimatch keeps only the words a
//! match uses: for each 64-bit word of [`FlowKey::to_words`] in which the rest has a bit, the
//! word's mask and masked value, behind a header that is the bitmap of those words. An OpenStack
//! rule (in_port, MACs, VLAN, ToS) takes four words: 72 bytes instead of the 232 of a whole
//! [`Match`], and its check is four masked compares against the key's packed words instead of
//! masking and comparing all of the key's members.
//!
//! Entries live in one `Vec<u64>` at stable offsets (the index the entry holds); a freed entry's
//! room is reused by the next entry of the same number of words.

use rqvs_flow::key::{KeyWords, KEY_WORDS};
use rqvs_flow::{FlowKey, Match};

/// The rests of the rules whose compact entry is not enough (see the module docs).
#[derive(Clone, Debug, Default)]
pub(crate) struct Extras {
    /// Entries: a header word (bit `i` set for each key word `i` stored), then `[mask, value]`
    /// for each of those words in increasing order.
    words: Vec<u64>,
    /// Offsets of freed entries, by their number of key words (index 1..=KEY_WORDS; grown on
    /// the first free of each size, so that an empty slab stays three words).
    free: Vec<Vec<u32>>,
    /// Entries stored and not freed.
    live: usize,
}

impl Extras {
    /// Stores the bits of `m` that `rest` (a part of `m`'s mask: what the caller's entry does not
    /// check) selects, and returns the entry's index for [`Extras::matches`]. `rest` must not be
    /// zero (there would be nothing to check: the caller keeps no index then).
    pub(crate) fn add(&mut self, m: &Match, rest: &FlowKey) -> u32 {
        let (mask, value) = (rest.to_words(), m.value().to_words());
        let map = rqvs_flow::key::word_map(&mask);
        debug_assert!(map != 0, "an empty rest is not stored");
        let n = map.count_ones() as usize;
        let entry = std::iter::once(u64::from(map))
            .chain((0..KEY_WORDS).filter(|&w| mask[w] != 0).flat_map(|w| [mask[w], value[w] & mask[w]]));
        self.live += 1;
        match self.free.get_mut(n).and_then(Vec::pop) {
            Some(at) => {
                let at = at as usize;
                for (slot, x) in self.words[at..at + 1 + 2 * n].iter_mut().zip(entry) {
                    *slot = x;
                }
                at as u32
            }
            None => {
                let at = self.words.len();
                self.words.extend(entry);
                u32::try_from(at).expect("the side slab holds fewer than 2^32 words")
            }
        }
    }

    /// Frees the entry at `i` (its room goes to the next entry of as many words).
    pub(crate) fn free(&mut self, i: u32) {
        let n = (self.words[i as usize] as u16).count_ones() as usize;
        // A freed entry is never reached again: the slot or entry that held its index is gone.
        if self.free.len() <= n {
            self.free.resize_with(n + 1, Vec::new);
        }
        self.free[n].push(i);
        self.live -= 1;
    }

    /// Does `key` (packed by [`FlowKey::to_words`]) agree with the entry at `i` on every bit the
    /// entry stores?
    #[inline]
    pub(crate) fn matches(&self, i: u32, key: &KeyWords) -> bool {
        let at = i as usize;
        let mut map = self.words[at] as u16;
        let pairs = &self.words[at + 1..at + 1 + 2 * map.count_ones() as usize];
        let mut j = 0;
        while map != 0 {
            let w = map.trailing_zeros() as usize;
            if key[w] & pairs[j] != pairs[j + 1] {
                return false;
            }
            j += 2;
            map &= map - 1;
        }
        true
    }

    /// Gives back the slab's unused room (after a build: the doubling growth leaves up to half
    /// of it empty; later inserts grow it again).
    pub(crate) fn shrink_to_fit(&mut self) {
        self.words.shrink_to_fit();
        for f in &mut self.free {
            f.shrink_to_fit();
        }
    }

    /// True when no entry is in the slab (nothing to prefetch).
    pub(crate) fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Prefetches the entry at index `i` of the slab, if there is one (`u32::MAX`: none): its
    /// first two cache lines (an OpenStack rule's four words span one or two).
    #[inline(always)]
    pub(crate) fn prefetch_at(&self, i: u32) {
        if let Some(w) = self.words.get(i as usize) {
            crate::prefetch::prefetch(w);
            if let Some(w) = self.words.get(i as usize + 8) {
                crate::prefetch::prefetch(w);
            }
        }
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.words.capacity() * 8
            + self.free.capacity() * std::mem::size_of::<Vec<u32>>()
            + self.free.iter().map(|f| f.capacity() * 4).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// An entry accepts exactly the keys that agree with its match on the bits of its rest,
        /// whatever was added and freed before it (freed rooms are reused by later entries).
        #[test]
        fn an_entry_checks_its_rest(case in testing::arb_case(), drop_every in 2usize..5) {
            let mut extras = Extras::default();
            let mut kept = Vec::new();
            for (n, r) in case.rules.iter().enumerate() {
                let m = &r.matches;
                // The rest: every field but the addresses, as a compact entry leaves it.
                let rest = FlowKey { nw_src: 0, nw_dst: 0, ..*m.mask() };
                if rest == FlowKey::ZERO {
                    continue;
                }
                let i = extras.add(m, &rest);
                if n % drop_every == 0 {
                    extras.free(i);
                } else {
                    kept.push((i, *m, rest));
                }
            }
            prop_assert_eq!(extras.is_empty(), kept.is_empty());
            for (i, m, rest) in &kept {
                let edges = [FlowKey { nw_src: !m.value().nw_src, ..*m.value() }, *m.value()];
                for k in case.keys.iter().chain(&edges) {
                    let want = k.masked(rest) == m.value().masked(rest);
                    prop_assert_eq!(extras.matches(*i, &k.to_words()), want, "{:?} {:?}", m, k);
                }
            }
        }
    }

    #[test]
    fn an_openstack_rule_takes_four_words() {
        let value = FlowKey {
            in_port: 3,
            dl_src: [0xfa, 0x16, 0x3e, 0, 0, 1],
            dl_dst: [0xfa, 0x16, 0x3e, 0, 0, 2],
            vlan_tci: 0x1005,
            nw_tos: 32,
            dl_type: 0x0800,
            ..FlowKey::ZERO
        };
        let mask = FlowKey {
            in_port: u32::MAX,
            dl_src: [0xff; 6],
            dl_dst: [0xff; 6],
            vlan_tci: 0x1fff,
            nw_tos: 0xfc,
            dl_type: u16::MAX,
            ..FlowKey::ZERO
        };
        let m = Match::from_masked(value, mask);
        let rest = FlowKey { dl_type: 0, ..*m.mask() };
        let mut extras = Extras::default();
        let i = extras.add(&m, &rest);
        extras.shrink_to_fit();
        assert_eq!(extras.memory_bytes(), (1 + 2 * 4) * 8);
        assert!(extras.matches(i, &m.value().to_words()));
        assert!(!extras.matches(i, &FlowKey { in_port: 4, ..*m.value() }.to_words()));
    }
}
