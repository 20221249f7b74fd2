//! The prefix trie: which prefix lengths of a 32-bit field hold rules, and how many leading bits
//! of a packet's value must be examined to know it.
//!
//! OVS keeps one trie per prefix field of the classifier (`nw_dst`, `nw_src` by default) and one
//! per subtable over the concatenated transport ports. A lookup answers two things:
//!
//! - `plens`: the prefix lengths at which some stored prefix equals the packet's leading bits. A
//!   subtable whose prefix length on the field is not among them cannot match, and can be
//!   skipped without examining the rest of its fields.
//! - `maskbits`: how many leading bits of the packet's value determine that answer: the depth of
//!   the deepest stored prefix path the value follows, plus one when a longer stored prefix
//!   branches off right there (that bit rules it out), capped at 32.
//!
//! OVS stores path-compressed nodes; the answers above depend only on the set of stored prefixes,
//! so this trie keeps one node per bit (simpler, and at most 32 nodes per prefix) and gives the
//! same answers. Nodes are counted so that removing a rule prunes what only it used.

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

/// A binary trie of prefixes of 32-bit values (bit 0 is the most significant).
#[derive(Clone, Debug)]
pub struct PrefixTrie {
    nodes: Vec<Node>,
    free: Vec<u32>,
}

impl Default for PrefixTrie {
    fn default() -> Self {
        PrefixTrie { nodes: vec![Node::EMPTY], free: Vec::new() }
    }
}

/// What a trie lookup found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrieLookup {
    /// Leading bits of the value that had to be examined (0..=32).
    pub maskbits: u32,
    /// Bit `L` (1..=32) is set when some rule's prefix of length `L` equals the value's first `L`
    /// bits.
    pub plens: u64,
}

impl TrieLookup {
    /// The answer when the field does not apply to the packet (OVS: prerequisites not met): every
    /// prefix length "may match", so nothing can be skipped, and no bit is examined.
    pub const ALL: TrieLookup = TrieLookup { maskbits: 0, plens: u64::MAX };

    /// May rules with this prefix length match?
    #[inline]
    pub fn has_plen(&self, plen: u32) -> bool {
        self.plens & (1u64 << plen) != 0
    }
}

#[inline]
fn bit_at(value: u32, depth: u32) -> usize {
    ((value >> (31 - depth)) & 1) as usize
}

impl PrefixTrie {
    /// Adds one rule with the prefix of length `plen` (1..=32) of `value`.
    pub fn insert(&mut self, value: u32, plen: u32) {
        debug_assert!((1..=32).contains(&plen));
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
    pub fn remove(&mut self, value: u32, plen: u32) -> bool {
        let mut path = Vec::with_capacity(plen as usize + 1);
        let mut node = 0u32;
        path.push(node);
        for depth in 0..plen {
            node = self.nodes[node as usize].children[bit_at(value, depth)];
            if node == NONE {
                return false;
            }
            path.push(node);
        }
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
    pub fn lookup(&self, value: u32) -> TrieLookup {
        let mut node = 0usize;
        let mut plens = 0u64;
        for depth in 0..32u32 {
            let n = &self.nodes[node];
            if depth > 0 && n.n_rules > 0 {
                plens |= 1u64 << depth;
            }
            let b = bit_at(value, depth);
            let next = n.children[b];
            if next == NONE {
                // A longer prefix branching off the other way is ruled out by this bit.
                let maskbits = if n.children[1 - b] != NONE { depth + 1 } else { depth };
                return TrieLookup { maskbits, plens };
            }
            node = next as usize;
        }
        if self.nodes[node].n_rules > 0 {
            plens |= 1u64 << 32;
        }
        TrieLookup { maskbits: 32, plens }
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

    fn pmask(len: u32) -> u32 {
        if len == 0 {
            0
        } else {
            u32::MAX << (32 - len)
        }
    }

    /// The answers computed from the set of prefixes alone (the definition in the module docs).
    fn by_definition(prefixes: &[(u32, u32)], value: u32) -> TrieLookup {
        let mut plens = 0u64;
        let mut d = 0u32;
        for &(v, len) in prefixes {
            if (value ^ v) & pmask(len) == 0 {
                plens |= 1 << len;
            }
            let lcp = ((value ^ v) & pmask(len)).leading_zeros().min(len);
            d = d.max(lcp);
        }
        let longer_branches = prefixes.iter().any(|&(v, len)| len > d && (value ^ v) & pmask(d) == 0);
        let maskbits = if d == 32 {
            32
        } else if longer_branches {
            d + 1
        } else {
            d
        };
        TrieLookup { maskbits, plens }
    }

    #[test]
    fn ovs_examples() {
        let mut t = PrefixTrie::default();
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

    proptest! {
        #[test]
        fn lookup_equals_definition(
            prefixes in proptest::collection::vec((any::<u32>(), 1u32..=32), 0..12),
            values in proptest::collection::vec(any::<u32>(), 1..8),
            remove in proptest::collection::vec(any::<bool>(), 12),
        ) {
            // Values near the stored prefixes exercise long common prefixes.
            let prefixes: Vec<(u32, u32)> = prefixes.iter().map(|&(v, l)| (v & pmask(l), l)).collect();
            let mut t = PrefixTrie::default();
            for &(v, l) in &prefixes {
                t.insert(v, l);
            }
            let mut kept = Vec::new();
            for (i, &(v, l)) in prefixes.iter().enumerate() {
                if remove[i] {
                    prop_assert!(t.remove(v, l));
                } else {
                    kept.push((v, l));
                }
            }
            let mut probes = values.clone();
            probes.extend(kept.iter().zip(&values).map(|(&(v, _), &x)| v ^ (x & 0xff)));
            for value in probes {
                prop_assert_eq!(t.lookup(value), by_definition(&kept, value));
            }
            if kept.is_empty() {
                prop_assert!(t.is_empty());
            }
        }
    }
}
