//! The prefix trie: which prefix lengths of a 32-bit or 128-bit field hold rules, and how many
//! leading bits of a packet's value must be examined to know it.
//!
//! OVS keeps one trie per prefix field of the classifier (`Flow_Table:prefixes`, default
//! `nw_dst`, `nw_src`; also `ipv6_src`, `ipv6_dst`) and one per subtable over the concatenated
//! transport ports. A lookup answers two things:
//!
//! - `plens`: the prefix lengths at which some stored prefix equals the packet's leading bits. A
//!   subtable whose prefix length on the field is not among them cannot match, and can be
//!   skipped without examining the rest of its fields.
//! - `maskbits`: how many leading bits of the packet's value determine that answer: the depth of
//!   the deepest stored prefix path the value follows, plus one when a longer stored prefix
//!   branches off right there (that bit rules it out), capped at the field's width.
//!
//! OVS stores path-compressed nodes; the answers above depend only on the set of stored prefixes,
//! so this trie keeps one node per bit (simpler, and at most 32 or 128 nodes per prefix) and
//! gives the same answers. Nodes are counted so that removing a rule prunes what only it used.
//! The trie is generic over the key ([`TrieKey`]: `u32` for IPv4 and the ports, `u128` for
//! IPv6), so the IPv4 lookup is the same code it was before IPv6 was added.

use std::marker::PhantomData;

/// A value a [`PrefixTrie`] holds prefixes of: an unsigned integer whose most significant bit is
/// the first bit of the prefix.
pub trait TrieKey: Copy + std::fmt::Debug {
    /// Width in bits (at most 128).
    const BITS: u32;
    /// The prefix-length bitmap a lookup collects (bit `L - 1` for length `L`), as narrow as
    /// the key allows: a `u32` key's lookup does no 128-bit arithmetic.
    type Plens: Copy + Default + std::ops::BitOrAssign + Into<u128>;
    /// Bit `depth` (0: the most significant) as 0 or 1.
    fn bit_at(self, depth: u32) -> usize;
    /// The bitmap bit of prefix length `plen` (1..=BITS).
    fn plen_bit(plen: u32) -> Self::Plens;
}

impl TrieKey for u32 {
    const BITS: u32 = 32;
    type Plens = u32;
    #[inline(always)]
    fn bit_at(self, depth: u32) -> usize {
        ((self >> (31 - depth)) & 1) as usize
    }
    #[inline(always)]
    fn plen_bit(plen: u32) -> u32 {
        1 << (plen - 1)
    }
}

impl TrieKey for u128 {
    const BITS: u32 = 128;
    type Plens = u128;
    #[inline(always)]
    fn bit_at(self, depth: u32) -> usize {
        ((self >> (127 - depth)) & 1) as usize
    }
    #[inline(always)]
    fn plen_bit(plen: u32) -> u128 {
        1 << (plen - 1)
    }
}

/// Sentinel "no child".
const NONE: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Node {
    children: [u32; 2],
    /// Number of rules whose prefix ends exactly here.
    n_rules: u32,
}

impl Node {
    const EMPTY: Node = Node { children: [NONE, NONE], n_rules: 0 };
}

/// A binary trie of prefixes of `K` values (bit 0 is the most significant); `u32` by default.
#[derive(Clone, Debug)]
pub struct PrefixTrie<K: TrieKey = u32> {
    nodes: Vec<Node>,
    free: Vec<u32>,
    key: PhantomData<K>,
}

impl<K: TrieKey> Default for PrefixTrie<K> {
    fn default() -> Self {
        PrefixTrie { nodes: vec![Node::EMPTY], free: Vec::new(), key: PhantomData }
    }
}

/// What a trie lookup found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrieLookup {
    /// Leading bits of the value that had to be examined (0 to the field's width).
    pub maskbits: u32,
    /// Bit `L - 1` is set when some rule's prefix of length `L` (1..=128) equals the value's
    /// first `L` bits (OVS's `match_plens`, bit `plen - 1`).
    pub plens: u128,
}

impl TrieLookup {
    /// The answer when the field does not apply to the packet (OVS: prerequisites not met): every
    /// prefix length "may match", so nothing can be skipped, and no bit is examined.
    pub const ALL: TrieLookup = TrieLookup { maskbits: 0, plens: u128::MAX };

    /// May rules with this prefix length (1..=128) match? (Length 0 always may.)
    #[inline]
    pub fn has_plen(&self, plen: u32) -> bool {
        plen == 0 || self.plens & (1u128 << ((plen - 1) & 127)) != 0
    }
}

#[inline(always)]
fn bit_at<K: TrieKey>(value: K, depth: u32) -> usize {
    value.bit_at(depth)
}

impl<K: TrieKey> PrefixTrie<K> {
    /// Adds one rule with the prefix of length `plen` (1 to the key's width) of `value`.
    pub fn insert(&mut self, value: K, plen: u32) {
        debug_assert!((1..=K::BITS).contains(&plen));
        let mut node = 0u32;
        for depth in 0..plen {
            let b = bit_at(value, depth);
            let next = self.nodes[node as usize].children[b];
            node = if next == NONE {
                let n = self.alloc();
                self.nodes[node as usize].children[b] = n;
                n
            } else {
                next
            };
        }
        self.nodes[node as usize].n_rules += 1;
    }

    /// Removes one rule with this prefix; returns false when there was none.
    pub fn remove(&mut self, value: K, plen: u32) -> bool {
        // The nodes from the root down, on the stack (a flow-mod removes a rule from every
        // trie: no allocation per call).
        let mut path = [0u32; 129];
        let mut node = 0u32;
        for depth in 0..plen {
            node = self.nodes[node as usize].children[bit_at(value, depth)];
            if node == NONE {
                return false;
            }
            path[depth as usize + 1] = node;
        }
        let path = &path[..plen as usize + 1];
        if self.nodes[node as usize].n_rules == 0 {
            return false;
        }
        self.nodes[node as usize].n_rules -= 1;
        // Prune nodes that hold no rule and lead nowhere, bottom up (never the root).
        for depth in (1..path.len()).rev() {
            let n = path[depth] as usize;
            if self.nodes[n].n_rules > 0 || self.nodes[n].children != [NONE, NONE] {
                break;
            }
            let parent = path[depth - 1] as usize;
            self.nodes[parent].children[bit_at(value, depth as u32 - 1)] = NONE;
            self.free.push(path[depth]);
        }
        true
    }

    /// Looks `value` up: which prefix lengths hold rules along its path, and how many leading
    /// bits decide that (see the module docs).
    #[inline]
    pub fn lookup(&self, value: K) -> TrieLookup {
        let mut node = 0usize;
        let mut plens = K::Plens::default();
        for depth in 0..K::BITS {
            let n = &self.nodes[node];
            if depth > 0 && n.n_rules > 0 {
                plens |= K::plen_bit(depth);
            }
            let b = bit_at(value, depth);
            let next = n.children[b];
            if next == NONE {
                // A longer prefix branching off the other way is ruled out by this bit.
                let maskbits = if n.children[1 - b] != NONE { depth + 1 } else { depth };
                return TrieLookup { maskbits, plens: plens.into() };
            }
            node = next as usize;
        }
        if self.nodes[node].n_rules > 0 {
            plens |= K::plen_bit(K::BITS);
        }
        TrieLookup { maskbits: K::BITS, plens: plens.into() }
    }

    /// [`PrefixTrie::lookup`]'s `maskbits` alone (what the ports trie needs), without collecting
    /// the prefix lengths.
    #[inline]
    pub fn maskbits(&self, value: K) -> u32 {
        let mut node = 0usize;
        for depth in 0..K::BITS {
            let n = &self.nodes[node];
            let b = bit_at(value, depth);
            let next = n.children[b];
            if next == NONE {
                return if n.children[1 - b] != NONE { depth + 1 } else { depth };
            }
            node = next as usize;
        }
        K::BITS
    }

    /// True when no prefix is stored.
    pub fn is_empty(&self) -> bool {
        self.nodes[0].children == [NONE, NONE]
    }

    /// Bytes held by the nodes.
    pub fn memory_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>() + self.free.capacity() * 4
    }

    fn alloc(&mut self) -> u32 {
        if let Some(n) = self.free.pop() {
            self.nodes[n as usize] = Node::EMPTY;
            n
        } else {
            self.nodes.push(Node::EMPTY);
            (self.nodes.len() - 1) as u32
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The first `len` of `width` bits, right-aligned in a u128.
    fn pmask(len: u32, width: u32) -> u128 {
        let ones = if width == 128 { u128::MAX } else { (1u128 << width) - 1 };
        if len == 0 {
            0
        } else {
            (ones << (width - len)) & ones
        }
    }

    /// The answers computed from the set of prefixes alone (the definition in the module docs),
    /// for values of `width` bits.
    fn by_definition(prefixes: &[(u128, u32)], value: u128, width: u32) -> TrieLookup {
        let mut plens = 0u128;
        let mut d = 0u32;
        let lead = 128 - width;
        for &(v, len) in prefixes {
            if (value ^ v) & pmask(len, width) == 0 {
                plens |= 1 << (len - 1);
            }
            let lcp = (((value ^ v) & pmask(len, width)) << lead).leading_zeros().min(len);
            d = d.max(lcp);
        }
        let longer_branches = prefixes.iter().any(|&(v, len)| len > d && (value ^ v) & pmask(d, width) == 0);
        let maskbits = if d == width {
            width
        } else if longer_branches {
            d + 1
        } else {
            d
        };
        TrieLookup { maskbits, plens }
    }

    #[test]
    fn ovs_examples() {
        let mut t = PrefixTrie::<u32>::default();
        assert_eq!(t.lookup(0x0102_0304), TrieLookup { maskbits: 0, plens: 0 });
        t.insert(0x0a00_0000, 8); // 10.0.0.0/8
                                  // 1.2.3.4 differs from 10/8 at bit 4: five bits decide.
        assert_eq!(t.lookup(0x0102_0304).maskbits, 5);
        let l = t.lookup(0x0a01_0203);
        assert_eq!(l.maskbits, 8);
        assert!(l.has_plen(8));
        t.insert(0xc0a8_0200, 24);
        t.insert(0xc0a8_0000, 16);
        let l = t.lookup(0xc0a8_0307); // 192.168.3.7: /16 matches, /24 ruled out at bit 23
        assert_eq!(l.maskbits, 24);
        assert!(l.has_plen(16) && !l.has_plen(24));
        assert_eq!(t.lookup(0x0203_0405).maskbits, 5);
    }

    #[test]
    fn ipv6_examples() {
        let a = |s: &str| u128::from(s.parse::<std::net::Ipv6Addr>().unwrap());
        let mut t = PrefixTrie::<u128>::default();
        t.insert(a("2001:db8::"), 32);
        t.insert(a("2001:db8:1::"), 48);
        t.insert(a("2001:db8:1:2::1"), 128);
        // Under 2001:db8:1::/48 but not the /128: ::2 leaves ::1 at bit 126, so 127 bits decide.
        let l = t.lookup(a("2001:db8:1:2::2"));
        assert!(l.has_plen(32) && l.has_plen(48) && !l.has_plen(128));
        assert_eq!(l.maskbits, 127);
        let l = t.lookup(a("2001:db8:1:2::1"));
        assert_eq!(l.maskbits, 128);
        assert!(l.has_plen(128));
        // 2001:db9:: leaves the /32 at bit 31 (0xb8 vs 0xb9 in the last bit of the second group).
        let l = t.lookup(a("2001:db9::"));
        assert_eq!((l.maskbits, l.plens), (32, 0));
        assert!(t.remove(a("2001:db8:1:2::1"), 128));
        assert!(!t.remove(a("2001:db8:1:2::1"), 128));
        assert_eq!(t.lookup(a("2001:db8:1:2::2")).maskbits, 48);
        assert!(t.remove(a("2001:db8::"), 32) && t.remove(a("2001:db8:1::"), 48));
        assert!(t.is_empty());
    }

    fn check<K: TrieKey>(
        width: u32,
        to_key: impl Fn(u128) -> K,
        prefixes: &[(u128, u32)],
        values: &[u128],
        remove: &[bool],
    ) -> Result<(), TestCaseError> {
        // Values near the stored prefixes exercise long common prefixes.
        let prefixes: Vec<(u128, u32)> = prefixes.iter().map(|&(v, l)| (v & pmask(l, width), l)).collect();
        let mut t = PrefixTrie::<K>::default();
        for &(v, l) in &prefixes {
            t.insert(to_key(v), l);
        }
        let mut kept = Vec::new();
        for (i, &(v, l)) in prefixes.iter().enumerate() {
            if remove[i] {
                prop_assert!(t.remove(to_key(v), l));
            } else {
                kept.push((v, l));
            }
        }
        let mut probes: Vec<u128> = values.iter().map(|&x| x & pmask(width, width)).collect();
        for (&(v, l), &x) in kept.iter().zip(values) {
            // A value sharing the prefix's first bits up to a random point, then random.
            let cut = (x as u32) % (l + 1);
            probes.push((v & pmask(cut, width)) | (x.rotate_left(17) & !pmask(cut, width) & pmask(width, width)));
            probes.push(v ^ (x & 0xff));
        }
        for value in probes {
            prop_assert_eq!(t.lookup(to_key(value)), by_definition(&kept, value, width));
            prop_assert_eq!(t.maskbits(to_key(value)), t.lookup(to_key(value)).maskbits);
        }
        if kept.is_empty() {
            prop_assert!(t.is_empty());
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn lookup_equals_definition(
            prefixes in proptest::collection::vec((any::<u32>(), 1u32..=32), 0..12),
            values in proptest::collection::vec(any::<u32>(), 1..8),
            remove in proptest::collection::vec(any::<bool>(), 12),
        ) {
            let prefixes: Vec<(u128, u32)> = prefixes.iter().map(|&(v, l)| (u128::from(v), l)).collect();
            let values: Vec<u128> = values.iter().map(|&v| u128::from(v)).collect();
            check::<u32>(32, |v| v as u32, &prefixes, &values, &remove)?;
        }

        /// The 128-bit trie against the same brute-force definition (the un-wildcarded prefix
        /// length and the matching prefix lengths), with prefixes sharing long common parts.
        #[test]
        fn lookup_equals_definition_128(
            base in any::<u128>(),
            prefixes in proptest::collection::vec((any::<u128>(), 1u32..=128, 0u32..=128), 0..12),
            values in proptest::collection::vec(any::<u128>(), 1..8),
            remove in proptest::collection::vec(any::<bool>(), 12),
        ) {
            // Each prefix is `base` up to a random bit, then random: deep shared paths.
            let prefixes: Vec<(u128, u32)> = prefixes
                .iter()
                .map(|&(v, l, share)| ((base & pmask(share, 128)) | (v & !pmask(share, 128)), l))
                .collect();
            check::<u128>(128, |v| v, &prefixes, &values, &remove)?;
        }
    }
}
