//! A subtable: the rules of one OpenFlow table that share one mask, and the staged lookup.
//!
//! **Stages.** A subtable's mask is split into the four segments of OVS 3.1's `struct flow`
//! (`FLOW_SEGMENT_*_ENDS_AT`): metadata (`in_port`), L2 (`dl_dst`, `dl_src`, `dl_type`,
//! `vlan_tci`), L3 (`nw_src`, `nw_dst`, `nw_frag`, `nw_tos`, `nw_proto`) and L4 (`tcp_flags`,
//! `tp_src`, `tp_dst` — in OVS 3.1 `tcp_flags` lies after `nd_target`, so in the L4 segment).
//! Only segments where the mask has bits become stages; the last of them is the final stage.
//! For every stage but the final one the subtable keeps an index of the rules' values masked
//! with the mask of that stage *and all earlier ones* (OVS chains the stage hashes); a packet
//! whose masked value is not in the index cannot match any rule of the subtable, and only the
//! stages examined so far are added to the wildcards. The final stage looks the packet up among
//! the rules themselves.
//!
//! **Tries.** Before a stage that holds a prefix field (the table's [`super::prefixes`]: by
//! default `nw_dst`, then `nw_src`; any of `ipv6_src`, `ipv6_dst` too — all in the L3 segment),
//! the classifier-wide tries are consulted in order (`check_tries` in OVS): if no rule of any subtable has this
//! subtable's prefix length matching the packet, the subtable is skipped after adding only the
//! trie's `maskbits` bits of the field to the wildcards (and the stages before this one), provided
//! that is not more bits than the subtable itself would examine, or those bits are already
//! examined.
//!
//! **Ports trie.** When the final stage finds no rule and the mask has port bits, every bit of the
//! subtable's mask is added except the ports, of which only as many leading bits of
//! `tp_src:tp_dst` (as one 32-bit value, `tp_src` high) are added as the subtable's own ports trie
//! needs to rule the packet out. (OVS before commit 489553b1c, "classifier: Fix missing masks on a
//! final stage with ports trie", added only the ports bits and dropped the final stage's other
//! fields such as `tcp_flags`, a real megaflow bug; the OVS 3.1 Debian ships behaves as fixed,
//! and so does rqvs.)

use std::cmp::Reverse;
use std::collections::BTreeMap;

use hashbrown::HashMap;

use rqvs_flow::key::{mask_words, NarrowKey, NarrowWords};
use rqvs_flow::{FlowKey, RuleId};

use super::prefixes::{prefix_mask32, PrefixFields, Tries, MAX_PREFIX_FIELDS};
use super::trie::TrieLookup;

/// The four segments of a flow, in lookup order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Segment {
    Metadata,
    L2,
    L3,
    L4,
}

impl Segment {
    pub const ALL: [Segment; 4] = [Segment::Metadata, Segment::L2, Segment::L3, Segment::L4];

    /// The part of `mask` that lies in this segment.
    pub fn restrict(self, mask: &FlowKey) -> FlowKey {
        let mut m = FlowKey::default();
        match self {
            Segment::Metadata => {
                m.in_port = mask.in_port;
                m.metadata = mask.metadata;
            }
            Segment::L2 => {
                m.dl_src = mask.dl_src;
                m.dl_dst = mask.dl_dst;
                m.dl_type = mask.dl_type;
                m.vlan_tci = mask.vlan_tci;
            }
            Segment::L3 => {
                m.nw_src = mask.nw_src;
                m.nw_dst = mask.nw_dst;
                m.nw_frag = mask.nw_frag;
                m.nw_tos = mask.nw_tos;
                m.nw_proto = mask.nw_proto;
                m.nw_ttl = mask.nw_ttl;
                m.ipv6_src = mask.ipv6_src;
                m.ipv6_dst = mask.ipv6_dst;
                m.ipv6_label = mask.ipv6_label;
            }
            // OVS 3.1's L4 segment starts at `nd_target` (`FLOW_SEGMENT_3_ENDS_AT`), so the
            // ND target and link-layer addresses (ARP's hardware addresses share them) and the
            // TCP flags are looked up with the ports.
            Segment::L4 => {
                m.nd_target = mask.nd_target;
                m.arp_sha = mask.arp_sha;
                m.arp_tha = mask.arp_tha;
                m.tcp_flags = mask.tcp_flags;
                m.tp_src = mask.tp_src;
                m.tp_dst = mask.tp_dst;
            }
        }
        m
    }
}

/// `tp_src:tp_dst` as one 32-bit value, `tp_src` in the high half (OVS's `TP_PORTS_OFS32`).
#[inline]
pub fn ports_of(k: &FlowKey) -> u32 {
    (u32::from(k.tp_src) << 16) | u32::from(k.tp_dst)
}

/// One stage of a subtable.
#[derive(Clone, Debug)]
struct Stage {
    segment: Segment,
    /// The mask bits of this stage and all earlier ones (what a lookup that stops after this
    /// stage has examined).
    cumulative: Mask,
    /// `cumulative` as the words of [`FlowKey::to_words`] (what the stage index is keyed by).
    cumulative_words: Words,
}

/// A mask, and its narrow form when it has no wide member: adding it to wildcards then touches
/// the narrow members only ([`NarrowKey::or_into`]).
#[derive(Clone, Debug)]
struct Mask {
    key: FlowKey,
    narrow: Option<NarrowKey>,
}

impl Mask {
    fn new(key: FlowKey) -> Mask {
        Mask { key, narrow: key.narrow() }
    }

    /// `wc |= self`.
    #[inline]
    fn add_to(&self, wc: &mut FlowKey) {
        match &self.narrow {
            Some(n) => n.or_into(wc),
            None => *wc = wc.union(&self.key),
        }
    }
}

/// A key as the five words of [`FlowKey::to_words`].
type Words = rqvs_flow::key::KeyWords;

/// A hash map keyed by masked key words: the five narrow words when the subtable's mask uses no
/// wide word (every 5-tuple rule), all of them otherwise — so a 5-tuple slow path stores 40-byte
/// keys, not 120-byte ones.
#[derive(Clone, Debug)]
enum WordMap<V> {
    Narrow(HashMap<NarrowWords, V>),
    Wide(HashMap<Words, V>),
}

#[inline(always)]
fn narrow(w: &Words) -> NarrowWords {
    [w[0], w[1], w[2], w[3], w[4]]
}

impl<V: Default> WordMap<V> {
    fn new(wide: bool) -> WordMap<V> {
        if wide {
            WordMap::Wide(HashMap::new())
        } else {
            WordMap::Narrow(HashMap::new())
        }
    }

    #[inline]
    fn get(&self, w: &Words) -> Option<&V> {
        match self {
            WordMap::Narrow(m) => m.get(&narrow(w)),
            WordMap::Wide(m) => m.get(w),
        }
    }

    #[inline]
    fn contains_key(&self, w: &Words) -> bool {
        self.get(w).is_some()
    }

    fn get_mut(&mut self, w: &Words) -> Option<&mut V> {
        match self {
            WordMap::Narrow(m) => m.get_mut(&narrow(w)),
            WordMap::Wide(m) => m.get_mut(w),
        }
    }

    /// The value for `w`, inserted as `V::default()` when missing.
    fn entry(&mut self, w: &Words) -> &mut V {
        match self {
            WordMap::Narrow(m) => m.entry(narrow(w)).or_default(),
            WordMap::Wide(m) => m.entry(*w).or_default(),
        }
    }

    fn remove(&mut self, w: &Words) -> Option<V> {
        match self {
            WordMap::Narrow(m) => m.remove(&narrow(w)),
            WordMap::Wide(m) => m.remove(w),
        }
    }

    fn capacity(&self) -> usize {
        match self {
            WordMap::Narrow(m) => m.capacity(),
            WordMap::Wide(m) => m.capacity(),
        }
    }

    fn values(&self) -> Box<dyn Iterator<Item = &V> + '_> {
        match self {
            WordMap::Narrow(m) => Box::new(m.values()),
            WordMap::Wide(m) => Box::new(m.values()),
        }
    }

    /// Bytes of one key.
    fn key_bytes(&self) -> usize {
        match self {
            WordMap::Narrow(_) => std::mem::size_of::<NarrowWords>(),
            WordMap::Wide(_) => std::mem::size_of::<Words>(),
        }
    }
}

/// A rule as a subtable holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub priority: u32,
    pub id: RuleId,
}

impl Entry {
    #[inline]
    pub fn rank(&self) -> (Reverse<u32>, RuleId) {
        (Reverse(self.priority), self.id)
    }
}

/// The per-lookup state of the classifier-wide tries (looked up on demand, once per packet).
#[derive(Clone, Copy, Debug)]
pub struct TrieCtx {
    /// Bit `j` set: `result[j]` holds trie `j`'s answer.
    done: u8,
    result: [TrieLookup; MAX_PREFIX_FIELDS],
}

impl Default for TrieCtx {
    fn default() -> Self {
        TrieCtx { done: 0, result: [TrieLookup::ALL; MAX_PREFIX_FIELDS] }
    }
}

/// Rules sharing one mask.
#[derive(Clone, Debug)]
pub struct Subtable {
    pub mask: FlowKey,
    /// `mask` as a [`Mask`] (its narrow form when it has one).
    full_mask: Mask,
    stages: Vec<Stage>,
    /// For each stage but the final one: masked values (this stage and earlier, as words) → rule
    /// count.
    indices: Vec<WordMap<u32>>,
    /// Masked value (as words) → its rules in winner order.
    rules: WordMap<Vec<Entry>>,
    mask_words: Words,
    /// Every rule's rank → its number of parts here, for the maximum priority and the best rank.
    ranks: BTreeMap<(Reverse<u32>, RuleId), u32>,
    /// The first key of `ranks`, cached: lookups read it for every subtable they consider.
    best: Option<(Reverse<u32>, RuleId)>,
    /// Prefix length on each of the table's prefix fields, in their order (0: not in that
    /// trie).
    pub trie_plen: [u32; MAX_PREFIX_FIELDS],
    /// OVS's `ports_mask_len`: 32 minus the trailing zeros of the ports mask as one 32-bit value.
    ports_mask_len: u32,
    ports_trie: PortsTrie,
    /// Creation order (ties among equal maximum priorities keep it, as OVS's stable pvector sort).
    pub seq: u64,
}

impl Subtable {
    pub fn new(mask: FlowKey, seq: u64, prefixes: &PrefixFields) -> Subtable {
        let mut stages = Vec::new();
        let mut cumulative = FlowKey::default();
        for seg in Segment::ALL {
            let m = seg.restrict(&mask);
            if m != FlowKey::default() {
                cumulative = cumulative.union(&m);
                stages.push(Stage {
                    segment: seg,
                    cumulative: Mask::new(cumulative),
                    cumulative_words: cumulative.to_words(),
                });
            }
        }
        let n_indices = stages.len().saturating_sub(1);
        let ports_mask = ports_of(&mask);
        let wide = !mask.is_narrow_mask();
        Subtable {
            mask,
            full_mask: Mask::new(mask),
            stages,
            indices: (0..n_indices).map(|_| WordMap::new(wide)).collect(),
            rules: WordMap::new(wide),
            mask_words: mask.to_words(),
            ranks: BTreeMap::new(),
            best: None,
            trie_plen: Self::trie_plens(&mask, prefixes),
            ports_mask_len: if ports_mask == 0 { 0 } else { 32 - ports_mask.trailing_zeros() },
            ports_trie: PortsTrie::default(),
            seq,
        }
    }

    /// The subtable's prefix length on each prefix field (OVS's `trie_plen`).
    fn trie_plens(mask: &FlowKey, prefixes: &PrefixFields) -> [u32; MAX_PREFIX_FIELDS] {
        let mut plens = [0; MAX_PREFIX_FIELDS];
        for (p, f) in plens.iter_mut().zip(prefixes.fields()) {
            *p = f.plen(mask);
        }
        plens
    }

    /// Recomputes the prefix lengths for a new set of prefix fields.
    pub fn set_prefix_fields(&mut self, prefixes: &PrefixFields) {
        self.trie_plen = Self::trie_plens(&self.mask, prefixes);
    }

    /// Number of rules held (a rule split into several parts here counts once).
    pub fn len(&self) -> usize {
        self.ranks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }

    /// The best rank held (its priority is the subtable's place in the search order).
    pub fn best_rank(&self) -> Option<(Reverse<u32>, RuleId)> {
        self.best
    }

    /// Adds a rule whose value is already masked with this subtable's mask.
    pub fn insert(&mut self, value: FlowKey, entry: Entry) {
        let words = value.to_words();
        for (stage, index) in self.stages.iter().zip(&mut self.indices) {
            *index.entry(&mask_words(&words, &stage.cumulative_words)) += 1;
        }
        let list = self.rules.entry(&words);
        let at = list.partition_point(|e| e.rank() < entry.rank());
        list.insert(at, entry);
        *self.ranks.entry(entry.rank()).or_insert(0) += 1;
        self.best = self.ranks.keys().next().copied();
        if self.ports_mask_len > 0 {
            self.ports_trie.insert(ports_of(&value));
        }
    }

    /// Removes a rule; returns false when it is not here.
    pub fn remove(&mut self, value: FlowKey, entry: Entry) -> bool {
        let words = value.to_words();
        let Some(list) = self.rules.get_mut(&words) else {
            return false;
        };
        let Some(at) = list.iter().position(|e| *e == entry) else {
            return false;
        };
        list.remove(at);
        if list.is_empty() {
            self.rules.remove(&words);
        }
        for (stage, index) in self.stages.iter().zip(&mut self.indices) {
            let key = mask_words(&words, &stage.cumulative_words);
            if let Some(n) = index.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    index.remove(&key);
                }
            }
        }
        if let Some(n) = self.ranks.get_mut(&entry.rank()) {
            *n -= 1;
            if *n == 0 {
                self.ranks.remove(&entry.rank());
            }
        }
        self.best = self.ranks.keys().next().copied();
        if self.ports_mask_len > 0 {
            self.ports_trie.remove(ports_of(&value));
        }
        true
    }

    /// The best rule of this subtable matching `key` (no wildcard tracking).
    pub fn find(&self, key: &FlowKey) -> Option<Entry> {
        self.find_words(&key.to_words())
    }

    /// [`Subtable::find`] on a key already packed with [`FlowKey::to_words`].
    #[inline]
    fn find_words(&self, kw: &Words) -> Option<Entry> {
        self.rules.get(&mask_words(kw, &self.mask_words)).map(|l| l[0])
    }

    /// The staged lookup of OVS's `find_match_wc`: the best rule of this subtable matching `key`,
    /// adding to `wc` every bit the lookup examined. `tries` holds the classifier-wide tries.
    ///
    /// `tries_checked`: the caller has already asked [`check_tries`] for this subtable, which
    /// found no proof (only allowed when [`Subtable::tries_first`]).
    pub fn find_wc(
        &self,
        key: &FlowKey,
        kw: &Words,
        tries: &Tries,
        ctx: &mut TrieCtx,
        wc: &mut FlowKey,
        tries_checked: bool,
    ) -> Option<Entry> {
        debug_assert!(!tries_checked || self.tries_first());
        // The stages examined so far: the previous stage's cumulative mask.
        let mut so_far: Option<&Mask> = None;
        let last = self.stages.len().saturating_sub(1);
        for (i, stage) in self.stages.iter().enumerate() {
            if stage.segment == Segment::L3 && !tries_checked && check_tries(&self.trie_plen, key, tries, ctx, wc) {
                if let Some(m) = so_far {
                    m.add_to(wc);
                }
                return None;
            }
            if i == last {
                break;
            }
            so_far = Some(&stage.cumulative);
            if !self.indices[i].contains_key(&mask_words(kw, &stage.cumulative_words)) {
                stage.cumulative.add_to(wc);
                return None;
            }
        }
        let found = self.find_words(kw);
        if found.is_none() && self.ports_mask_len > 0 {
            let pmask = ports_of(&self.mask);
            let mbits = self.ports_trie.maskbits(ports_of(key) & pmask, self.ports_mask_len);
            // Every bit of the subtable was used to decide there is no match, but the ports
            // examined are only those the ports trie needs (OVS fix 489553b1c).
            let ports = ports_of(wc) | (pmask & prefix_mask32(mbits));
            self.full_mask.add_to(wc);
            wc.tp_src = (ports >> 16) as u16;
            wc.tp_dst = ports as u16;
            return None;
        }
        self.full_mask.add_to(wc);
        found
    }

    /// True when the subtable's first stage is L3 (no metadata or L2 bits in its mask): then the
    /// tries are the first thing its lookup consults, and a caller can run [`check_tries`] with
    /// [`Subtable::trie_plen`] alone, before touching the subtable.
    pub fn tries_first(&self) -> bool {
        self.stages.first().is_some_and(|s| s.segment == Segment::L3)
    }

    /// Bytes held (estimate: every allocation this subtable makes).
    pub fn memory_bytes(&self) -> usize {
        let idx: usize = self.indices.iter().map(|i| i.capacity() * (i.key_bytes() + 8)).sum();
        let rules: usize = self.rules.values().map(|l| l.capacity() * std::mem::size_of::<Entry>()).sum::<usize>()
            + self.rules.capacity() * (self.rules.key_bytes() + 32);
        std::mem::size_of::<Self>() + idx + rules + self.ranks.len() * 32 + self.ports_trie.memory_bytes()
    }
}

/// OVS's `check_tries`: true when the tries prove no rule of a subtable with prefix lengths
/// `trie_plen` ([`Subtable::trie_plen`]) can match, after
/// adding the bits that proof needs to `wc`.
#[inline]
pub fn check_tries(
    trie_plen: &[u32; MAX_PREFIX_FIELDS],
    key: &FlowKey,
    tries: &Tries,
    ctx: &mut TrieCtx,
    wc: &mut FlowKey,
) -> bool {
    // trie_plen is 0 past the table's fields: no slice of them, no bounds to check.
    for (j, &plen) in trie_plen.iter().enumerate() {
        if plen == 0 {
            continue;
        }
        // On-demand lookup, once per packet; a packet without the field's prerequisite
        // gets "every length may match" (OVS's `trie_lookup`).
        if ctx.done & (1 << j) == 0 {
            ctx.result[j] = tries.lookup(j, key);
            ctx.done |= 1 << j;
        }
        let res = ctx.result[j];
        if !res.has_plen(plen) {
            let field = tries.fields.field(j);
            // The trie is shared by the whole table: its bits must not un-wildcard more
            // than this subtable would examine, unless they already are.
            if res.maskbits <= plen {
                field.set_prefix_bits(wc, res.maskbits);
                return true;
            }
            if field.prefix_bits_set(wc, res.maskbits) {
                return true;
            }
        }
    }
    false
}

/// A subtable's ports trie (OVS's `ports_trie`): the masked `tp_src:tp_dst` values of its rules,
/// answering how many leading bits of a packet's ports rule all of them out.
///
/// Every value a subtable holds has the same prefix length (the subtable's `ports_mask_len`),
/// so the trie's answer — the depth where the packet's path leaves every stored path, plus the
/// bit that leaves it, at most the length — is one more than the longest common prefix of the
/// packet's value with a stored one, and the longest is with its neighbour on either side in
/// sorted order. So the values are kept sorted, with a count each (rules sharing a value): a
/// lookup is one binary search over contiguous memory instead of a walk of up to 32 nodes.
/// Tested against [`super::trie::PrefixTrie::maskbits`] in `tests::ports_trie_is_the_prefix_trie`.
#[derive(Clone, Debug, Default)]
struct PortsTrie {
    values: Vec<(u32, u32)>,
}

impl PortsTrie {
    fn insert(&mut self, value: u32) {
        match self.values.binary_search_by_key(&value, |&(v, _)| v) {
            Ok(i) => self.values[i].1 += 1,
            Err(i) => self.values.insert(i, (value, 1)),
        }
    }

    fn remove(&mut self, value: u32) {
        if let Ok(i) = self.values.binary_search_by_key(&value, |&(v, _)| v) {
            self.values[i].1 -= 1;
            if self.values[i].1 == 0 {
                self.values.remove(i);
            }
        }
    }

    /// The leading bits of `value` (masked to `len` bits) that decide no stored value of
    /// length `len` matches it, or `len` when one does.
    #[inline]
    fn maskbits(&self, value: u32, len: u32) -> u32 {
        if self.values.is_empty() {
            return 0;
        }
        let i = self.values.partition_point(|&(v, _)| v < value);
        let lcp = |j: usize| self.values.get(j).map_or(0, |&(v, _)| (v ^ value).leading_zeros());
        let common = lcp(i).max(if i > 0 { lcp(i - 1) } else { 0 });
        (common + 1).min(len)
    }

    fn memory_bytes(&self) -> usize {
        self.values.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::super::trie::PrefixTrie;
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The sorted ports trie answers as the bit-per-node prefix trie does, through inserts
        /// and removes, for values of one prefix length as a subtable holds them.
        #[test]
        fn ports_trie_is_the_prefix_trie(
            len in 1u32..=32,
            values in prop::collection::vec(any::<u32>(), 0..40),
            removes in prop::collection::vec(any::<prop::sample::Index>(), 0..20),
            probes in prop::collection::vec(any::<u32>(), 1..40),
        ) {
            let mask = u32::MAX << (32 - len);
            let mut sorted = PortsTrie::default();
            let mut trie = PrefixTrie::<u32>::default();
            let mut held: Vec<u32> = Vec::new();
            for v in values {
                let v = v & mask;
                sorted.insert(v);
                trie.insert(v, len);
                held.push(v);
            }
            for r in removes {
                if held.is_empty() {
                    break;
                }
                let v = held.swap_remove(r.index(held.len()));
                sorted.remove(v);
                prop_assert!(trie.remove(v, len));
            }
            // Probes near the held values as well as anywhere.
            let near = held.iter().map(|v| v ^ 1u32 << (32 - len));
            for p in probes.into_iter().chain(held.iter().copied()).chain(near) {
                let p = p & mask;
                prop_assert_eq!(sorted.maskbits(p, len), trie.maskbits(p), "value {:#x} len {}", p, len);
            }
        }
    }
}
