//! iSets with buckets (NSDI'22 §5.1, "relaxed iSets").
//!
//! An **iSet** is a set of rules and one of the indexed fields (nw_src, nw_dst, tp_src,
//! tp_dst, nw_proto, and 32-bit windows of IPv6 addresses, MACs and metadata: [`Field`]) on which its rules are grouped into **buckets**: disjoint ranges of the field,
//! each holding at most `c` rules whose ranges on the field lie inside the bucket. A packet's value
//! on the field falls in at most one bucket, so one bucket scan per iSet finds every candidate.
//!
//! Construction, per field, over the rules still unassigned (a rule is eligible on a field when
//! its match there is one interval — prefixes, port ranges, exact or wildcard protocol):
//! 1. sort the intervals by high end (then low end), and sweep: an interval that starts after the
//!    current bucket ends opens a new bucket; one that overlaps it joins it while the bucket has
//!    fewer than `c` rules (`cluster_size`) and the grown bucket stays clear of the previous one;
//!    any other is left for the next iSet or the remainder. With `c = 1` this is interval
//!    scheduling by earliest end, the maximum set of non-overlapping intervals; wide intervals
//!    (wildcards) end last and rarely fit;
//! 2. merge adjacent buckets while the merged bucket holds at most `l` rules (`bucket_size`;
//!    fewer, wider ranges for the index to learn, as the paper does).
//!
//! The paper has one size, `l = c = 40`. rqvs keeps `c = 40` — a chain of rules that overlap on
//! the field cannot be split, and a smaller `c` sends them to the remainder (acl1 IPv6 at 100K: coverage
//! 99.8% with 40, 96.8% with 8) — but merges disjoint buckets only up to `l = 8`, one pre-filter
//! group: most keys then scan two cache lines of pre-filter and one slot instead of five groups
//! (docs/nuevomatch.md, "Bucket size").
//!
//! The field giving the most rules becomes the iSet; repeat on what is left while the next iSet
//! would cover at least `min_coverage` of all rules and fewer than `max_isets` exist. The rest is
//! the remainder's.

use std::borrow::Borrow;

use rqvs_flow::field::Member;
use rqvs_flow::prefix::mask_as_range;
use rqvs_flow::{FlowKey, Match, Rule};

/// The fields iSets are built on: the five 32-bit-or-narrower fields of the 5-tuple, and 32-bit
/// **windows** of the wide fields (IPv6 addresses, MACs, metadata).
///
/// A window is bits `shift..shift + 32` of a wide field (`ipv6_src[96..127]` is the top word of
/// the source address, in OVS's subfield notation). A rule is eligible on a window when its mask
/// there is a prefix mask — every prefix of the field is, on each of its windows: the windows
/// above the prefix's end are exact, the one it ends in is a prefix, the ones below wildcards —
/// and its interval there is a necessary condition of a match, which is all an iSet bucket needs:
/// the candidates are validated on the whole rule (every field, 128-bit ones included, through
/// `compact.rs`'s extras), so a bucket found by one window never answers wrongly.
///
/// Why windows and not a 64- or 128-bit model input: the RQ-RMI's error bound is sound because
/// the key converts to `f64` exactly (`rqvs_rqrmi::Key`); 64-bit keys do not (53-bit mantissa)
/// and would need their own rounding analysis. A 32-bit window keeps the model, its bound, its
/// SIMD kernels and the model file unchanged, and the partition chooses among the windows like
/// among the narrow fields — the one that holds the most rules wins, so sets whose IPv6 prefixes
/// are at most /32 long (ClassBench-ng's IPv6 mapping) index the top word, and sets of longer
/// prefixes or hosts a lower one. MACs get their top and bottom 32 bits (exact MACs of one OUI
/// differ only in the bottom ones); metadata its two halves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Field {
    NwSrc = 0,
    NwDst = 1,
    TpSrc = 2,
    TpDst = 3,
    NwProto = 4,
    Ipv6Src0 = 5,
    Ipv6Src1 = 6,
    Ipv6Src2 = 7,
    Ipv6Src3 = 8,
    Ipv6Dst0 = 9,
    Ipv6Dst1 = 10,
    Ipv6Dst2 = 11,
    Ipv6Dst3 = 12,
    DlSrcHi = 13,
    DlSrcLo = 14,
    DlDstHi = 15,
    DlDstLo = 16,
    MetadataHi = 17,
    MetadataLo = 18,
}

impl Field {
    /// Every field, in code order (a saved model names its iSets' fields by code).
    pub const ALL: [Field; 19] = [
        Field::NwSrc,
        Field::NwDst,
        Field::TpSrc,
        Field::TpDst,
        Field::NwProto,
        Field::Ipv6Src0,
        Field::Ipv6Src1,
        Field::Ipv6Src2,
        Field::Ipv6Src3,
        Field::Ipv6Dst0,
        Field::Ipv6Dst1,
        Field::Ipv6Dst2,
        Field::Ipv6Dst3,
        Field::DlSrcHi,
        Field::DlSrcLo,
        Field::DlDstHi,
        Field::DlDstLo,
        Field::MetadataHi,
        Field::MetadataLo,
    ];

    /// The fields of the 5-tuple.
    pub const NARROW: [Field; 5] = [Field::NwSrc, Field::NwDst, Field::TpSrc, Field::TpDst, Field::NwProto];

    pub fn name(self) -> &'static str {
        match self {
            Field::NwSrc => "nw_src",
            Field::NwDst => "nw_dst",
            Field::TpSrc => "tp_src",
            Field::TpDst => "tp_dst",
            Field::NwProto => "nw_proto",
            Field::Ipv6Src0 => "ipv6_src[96..127]",
            Field::Ipv6Src1 => "ipv6_src[64..95]",
            Field::Ipv6Src2 => "ipv6_src[32..63]",
            Field::Ipv6Src3 => "ipv6_src[0..31]",
            Field::Ipv6Dst0 => "ipv6_dst[96..127]",
            Field::Ipv6Dst1 => "ipv6_dst[64..95]",
            Field::Ipv6Dst2 => "ipv6_dst[32..63]",
            Field::Ipv6Dst3 => "ipv6_dst[0..31]",
            Field::DlSrcHi => "eth_src[16..47]",
            Field::DlSrcLo => "eth_src[0..31]",
            Field::DlDstHi => "eth_dst[16..47]",
            Field::DlDstLo => "eth_dst[0..31]",
            Field::MetadataHi => "metadata[32..63]",
            Field::MetadataLo => "metadata[0..31]",
        }
    }

    /// The wide field and the low bit of the window, for a window; `None` for a narrow field.
    pub fn window(self) -> Option<(Member, u32)> {
        Some(match self {
            Field::NwSrc | Field::NwDst | Field::TpSrc | Field::TpDst | Field::NwProto => return None,
            Field::Ipv6Src0 => (Member::Ipv6Src, 96),
            Field::Ipv6Src1 => (Member::Ipv6Src, 64),
            Field::Ipv6Src2 => (Member::Ipv6Src, 32),
            Field::Ipv6Src3 => (Member::Ipv6Src, 0),
            Field::Ipv6Dst0 => (Member::Ipv6Dst, 96),
            Field::Ipv6Dst1 => (Member::Ipv6Dst, 64),
            Field::Ipv6Dst2 => (Member::Ipv6Dst, 32),
            Field::Ipv6Dst3 => (Member::Ipv6Dst, 0),
            Field::DlSrcHi => (Member::DlSrc, 16),
            Field::DlSrcLo => (Member::DlSrc, 0),
            Field::DlDstHi => (Member::DlDst, 16),
            Field::DlDstLo => (Member::DlDst, 0),
            Field::MetadataHi => (Member::Metadata, 32),
            Field::MetadataLo => (Member::Metadata, 0),
        })
    }

    /// The window's 32 bits of `k`.
    #[inline]
    fn window_of(member: Member, shift: u32, k: &FlowKey) -> u32 {
        (member.get(k) >> shift) as u32
    }

    /// The packet's value on this field.
    #[inline(always)]
    pub fn value(self, k: &FlowKey) -> u32 {
        self.value_of(k)
    }

    /// [`Field::value`] of a key of either kind.
    #[inline(always)]
    pub(crate) fn value_of<K: crate::compact::Key>(self, k: &K) -> u32 {
        match self {
            Field::NwSrc => k.nw_src(),
            Field::NwDst => k.nw_dst(),
            Field::TpSrc => u32::from(k.tp_src()),
            Field::TpDst => u32::from(k.tp_dst()),
            Field::NwProto => u32::from(k.nw_proto()),
            Field::Ipv6Src0 => (k.ipv6_src() >> 96) as u32,
            Field::Ipv6Src1 => (k.ipv6_src() >> 64) as u32,
            Field::Ipv6Src2 => (k.ipv6_src() >> 32) as u32,
            Field::Ipv6Src3 => k.ipv6_src() as u32,
            Field::Ipv6Dst0 => (k.ipv6_dst() >> 96) as u32,
            Field::Ipv6Dst1 => (k.ipv6_dst() >> 64) as u32,
            Field::Ipv6Dst2 => (k.ipv6_dst() >> 32) as u32,
            Field::Ipv6Dst3 => k.ipv6_dst() as u32,
            // A key's own accessors (a narrow key has its MACs: no whole key is made).
            Field::DlSrcHi => (mac48(k.dl_src()) >> 16) as u32,
            Field::DlSrcLo => mac48(k.dl_src()) as u32,
            Field::DlDstHi => (mac48(k.dl_dst()) >> 16) as u32,
            Field::DlDstLo => mac48(k.dl_dst()) as u32,
            Field::MetadataHi => (k.metadata() >> 32) as u32,
            Field::MetadataLo => k.metadata() as u32,
        }
    }

    /// The field's 32 bits (a narrow field's value, zero-extended) of a whole key — a match's
    /// value or mask: what the pre-filter of a bucket compares ([`prefilter_words`]).
    pub(crate) fn word(self, k: &FlowKey) -> u32 {
        match self.window() {
            Some((member, shift)) => Self::window_of(member, shift, k),
            None => self.value(k),
        }
    }

    /// Clears the field's 32 bits in `k` (a copy of a match's mask: what remains is what the
    /// pre-filter does not check).
    pub(crate) fn clear(self, k: &mut FlowKey) {
        self.set_word(k, 0);
    }

    /// Writes `w` as the field's 32 bits of `k` (the other bits as they are): the inverse of
    /// [`Field::word`], to make a match back from a pre-filter entry.
    pub(crate) fn set_word(self, k: &mut FlowKey, w: u32) {
        match self {
            Field::NwSrc => k.nw_src = w,
            Field::NwDst => k.nw_dst = w,
            Field::TpSrc => k.tp_src = w as u16,
            Field::TpDst => k.tp_dst = w as u16,
            Field::NwProto => k.nw_proto = w as u8,
            wide => {
                let (member, shift) = wide.window().expect("a window");
                let window = u128::from(u32::MAX) << shift;
                member.set(k, (member.get(k) & !window) | (u128::from(w) << shift));
            }
        }
    }

    /// The values a match accepts on this field, when they form one interval.
    pub fn interval(self, m: &Match) -> Option<(u32, u32)> {
        let (v, k) = (m.value(), m.mask());
        match self {
            Field::NwSrc => mask_as_range(v.nw_src, k.nw_src, 32),
            Field::NwDst => mask_as_range(v.nw_dst, k.nw_dst, 32),
            Field::TpSrc => m.tp_src_interval().map(|r| (u32::from(r.lo), u32::from(r.hi))),
            Field::TpDst => m.tp_dst_interval().map(|r| (u32::from(r.lo), u32::from(r.hi))),
            Field::NwProto => mask_as_range(u32::from(v.nw_proto), u32::from(k.nw_proto), 8),
            wide => {
                let (member, shift) = wide.window().expect("a window");
                mask_as_range(Self::window_of(member, shift, v), Self::window_of(member, shift, k), 32)
            }
        }
    }

    /// Does any of these rules match on the field (a mask not zero there)? The partition tries a
    /// window only then, so 5-tuple sets pay nothing for the windows.
    fn used_by<B: Borrow<Rule>>(self, rules: &[B], candidates: &[usize]) -> bool {
        match self.window() {
            None => true,
            Some((member, shift)) => {
                candidates.iter().any(|&i| Self::window_of(member, shift, rules[i].borrow().matches.mask()) != 0)
            }
        }
    }
}

/// A MAC as a number, its first byte on top.
#[inline(always)]
fn mac48(m: [u8; 6]) -> u64 {
    u64::from_be_bytes([0, 0, m[0], m[1], m[2], m[3], m[4], m[5]])
}

/// The fields a bucket's pre-filter may compare: 32-bit words a rule matches with any mask.
const PREFILTER_FIELDS: [Field; 16] = [
    Field::NwSrc,
    Field::NwDst,
    Field::Ipv6Src0,
    Field::Ipv6Src1,
    Field::Ipv6Src2,
    Field::Ipv6Src3,
    Field::Ipv6Dst0,
    Field::Ipv6Dst1,
    Field::Ipv6Dst2,
    Field::Ipv6Dst3,
    Field::DlSrcHi,
    Field::DlSrcLo,
    Field::DlDstHi,
    Field::DlDstLo,
    Field::MetadataHi,
    Field::MetadataLo,
];

/// Buckets sampled by [`prefilter_words`] (evenly spread), to bound its cost on big sets.
const PREFILTER_SAMPLE: usize = 1024;

/// The two 32-bit words an iSet's pre-filter compares before a candidate is read
/// (NuevoMatchUP's buckets: `(key_word & mask) == value` on both, eight slots at a time).
///
/// When no rule of the iSet matches on a wide field, the IPv4 addresses (`nw_src`, `nw_dst`):
/// what the pre-filter always compared, so 5-tuple sets build and look up as before. Otherwise
/// the two words, among the addresses and the 32-bit windows of IPv6 addresses, MACs and
/// metadata ([`Field`]), that tell the most pairs of rules of one bucket apart (two rules are
/// told apart by a word when their values differ on bits both masks hold: no packet matches
/// both), chosen greedily: the best word, then the one that adds the most pairs to it. A pair
/// told apart is a candidate the pre-filter rejects for a packet of the other rule.
pub fn prefilter_words<B: Borrow<Rule>>(rules: &[B], plan: &PlannedISet) -> [Field; 2] {
    const IPV4: [Field; 2] = [Field::NwSrc, Field::NwDst];
    let members: Vec<usize> = plan.buckets.iter().flat_map(|b| b.rules.iter().copied()).collect();
    // One pass first: does any rule match on a window at all (5-tuple sets: no)?
    let wide = members.iter().any(|&i| {
        let k = rules[i].borrow().matches.mask();
        k.ipv6_src != 0 || k.ipv6_dst != 0 || k.dl_src != [0; 6] || k.dl_dst != [0; 6] || k.metadata != 0
    });
    if !wide {
        return IPV4;
    }
    let fields: Vec<Field> =
        PREFILTER_FIELDS.iter().copied().filter(|f| f.window().is_none() || f.used_by(rules, &members)).collect();
    if fields.len() == IPV4.len() {
        return IPV4;
    }
    let step = plan.buckets.len().div_ceil(PREFILTER_SAMPLE).max(1);
    let sampled: Vec<&PlannedBucket> = plan.buckets.iter().step_by(step).collect();
    // Per sampled bucket, per field, each member's (value, mask) word.
    let words: Vec<Vec<Vec<(u32, u32)>>> = sampled
        .iter()
        .map(|b| {
            fields
                .iter()
                .map(|f| {
                    b.rules
                        .iter()
                        .map(|&i| {
                            let m = &rules[i].borrow().matches;
                            (f.word(m.value()), f.word(m.mask()))
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let apart = |w: &[(u32, u32)], i: usize, j: usize| ((w[i].0 ^ w[j].0) & w[i].1 & w[j].1) != 0;
    // Pairs told apart by field `f` and not by field `given`.
    let score = |f: usize, given: Option<usize>| -> u64 {
        let mut n = 0u64;
        for b in &words {
            let w = &b[f];
            for i in 0..w.len() {
                for j in i + 1..w.len() {
                    n += u64::from(apart(w, i, j) && given.is_none_or(|g| !apart(&b[g], i, j)));
                }
            }
        }
        n
    };
    // Mask bits on field `f` over the sampled members: what a candidate's check leaves to the
    // pre-filter (when every bit outside the compact entry is in the two words, no rest
    // is read at all).
    let bits = |f: usize| -> u64 { words.iter().flat_map(|b| &b[f]).map(|&(_, m)| u64::from(m.count_ones())).sum() };
    // Ties go to the word holding more mask bits, then to the earlier field (IPv4 first).
    let best = |given: Option<usize>| {
        (0..fields.len())
            .filter(|&f| Some(f) != given)
            .max_by_key(|&f| (score(f, given), bits(f), std::cmp::Reverse(f)))
    };
    let first = best(None).expect("at least the IPv4 addresses");
    let second = best(Some(first)).expect("at least two fields");
    [fields[first], fields[second]]
}

/// iSet construction parameters.
#[derive(Clone, Copy, Debug)]
pub struct ISetConfig {
    /// Most rules of a bucket made by merging disjoint ones (`l`; paper: 40). rqvs's default
    /// is 8, one pre-filter group: a key's scan is then two cache lines of pre-filter and one
    /// slot, and the RQ-RMI's larger index costs less than the groups it saves
    /// (docs/nuevomatch.md, "Bucket size").
    pub bucket_size: usize,
    /// Most rules of a bucket whose intervals form one chain of overlaps (`c`: no bucket boundary
    /// can split it without leaving rules out; paper: 40, the same as `l`). Taken as at least
    /// `bucket_size`.
    pub cluster_size: usize,
    /// Most iSets (paper: 2).
    pub max_isets: usize,
    /// Least share of all rules a new iSet must hold (paper: 0.45).
    pub min_coverage: f64,
    /// Also index 32-bit windows of the wide fields ([`Field`]); `false`: the five 5-tuple
    /// fields only (what rqvs did before, kept to measure what the windows bring).
    pub wide: bool,
}

impl Default for ISetConfig {
    fn default() -> Self {
        ISetConfig { bucket_size: 8, cluster_size: 40, max_isets: 2, min_coverage: 0.45, wide: true }
    }
}

/// One bucket of a planned iSet: its range and its rules (indexes into the input).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedBucket {
    pub lo: u32,
    pub hi: u32,
    pub rules: Vec<usize>,
}

/// A planned iSet.
#[derive(Clone, Debug)]
pub struct PlannedISet {
    pub field: Field,
    pub buckets: Vec<PlannedBucket>,
}

impl PlannedISet {
    pub fn rules(&self) -> usize {
        self.buckets.iter().map(|b| b.rules.len()).sum()
    }
}

/// Buckets on `field` over the rules `candidates` (indexes into `rules`), of at most `l` rules
/// (`bucket_size` and `cluster_size` both `l`, as the paper has it).
pub fn buckets_on<B: Borrow<Rule>>(rules: &[B], candidates: &[usize], field: Field, l: usize) -> Vec<PlannedBucket> {
    sweep(rules, candidates, field, l, l).planned()
}

/// Buckets as the sweep makes them, without an allocation per bucket: bucket `b` is
/// `(lo[b], hi[b])` holding `members[start[b]..start[b + 1]]`.
struct Swept {
    lo: Vec<u32>,
    hi: Vec<u32>,
    start: Vec<usize>,
    members: Vec<usize>,
}

impl Swept {
    fn rules(&self) -> usize {
        self.members.len()
    }

    fn planned(self) -> Vec<PlannedBucket> {
        (0..self.lo.len())
            .map(|b| PlannedBucket {
                lo: self.lo[b],
                hi: self.hi[b],
                rules: self.members[self.start[b]..self.start[b + 1]].to_vec(),
            })
            .collect()
    }
}

/// The sweep of the module docs (step 1: clusters of at most `c` rules), then the merge of
/// adjacent small buckets (step 2: up to `l` rules).
fn sweep<B: Borrow<Rule>>(rules: &[B], candidates: &[usize], field: Field, l: usize, c: usize) -> Swept {
    let mut iv: Vec<(u32, u32, usize)> = candidates
        .iter()
        .filter_map(|&i| field.interval(&rules[i].borrow().matches).map(|(lo, hi)| (lo, hi, i)))
        .collect();
    iv.sort_unstable_by_key(|&(lo, hi, i)| (hi, lo, i));
    let mut out = Swept { lo: Vec::new(), hi: Vec::new(), start: Vec::new(), members: Vec::with_capacity(iv.len()) };
    // The open bucket is the last one; `prev_hi` is the end of the one before it.
    let mut prev_hi: Option<u32> = None;
    for (lo, hi, i) in iv {
        let open = out.lo.len().checked_sub(1);
        match open {
            Some(b) if lo <= out.hi[b] => {
                // Overlaps the open bucket (sorted by high end, so hi >= its end).
                let size = out.members.len() - out.start[b];
                if size < c && prev_hi.is_none_or(|p| lo > p) {
                    out.lo[b] = out.lo[b].min(lo);
                    out.hi[b] = hi;
                    out.members.push(i);
                }
            }
            _ => {
                prev_hi = open.map(|b| out.hi[b]);
                out.lo.push(lo);
                out.hi.push(hi);
                out.start.push(out.members.len());
                out.members.push(i);
            }
        }
    }
    out.start.push(out.members.len());
    merge_small(out, l)
}

/// Merges adjacent buckets while the merged bucket holds at most `l` rules (their members are
/// adjacent already).
fn merge_small(s: Swept, l: usize) -> Swept {
    let n = s.lo.len();
    let mut out = Swept {
        lo: Vec::with_capacity(n),
        hi: Vec::with_capacity(n),
        start: Vec::with_capacity(n + 1),
        members: s.members,
    };
    for b in 0..n {
        let size = s.start[b + 1] - s.start[b];
        match out.lo.len().checked_sub(1) {
            Some(last) if s.start[b] - out.start[last] + size <= l => out.hi[last] = s.hi[b],
            _ => {
                out.lo.push(s.lo[b]);
                out.hi.push(s.hi[b]);
                out.start.push(s.start[b]);
            }
        }
    }
    out.start.push(out.members.len());
    out
}

/// Partitions `rules` into iSets and the remainder (indexes into `rules`).
pub fn partition<B: Borrow<Rule>>(rules: &[B], cfg: &ISetConfig) -> (Vec<PlannedISet>, Vec<usize>) {
    let mut left: Vec<usize> = (0..rules.len()).collect();
    let mut isets = Vec::new();
    let l = cfg.bucket_size.max(1);
    let c = cfg.cluster_size.max(l);
    while isets.len() < cfg.max_isets && !left.is_empty() {
        let best = Field::ALL
            .iter()
            .filter(|f| (cfg.wide || f.window().is_none()) && f.used_by(rules, &left))
            .map(|&f| (f, sweep(rules, &left, f, l, c)))
            .max_by_key(|(f, b)| (b.rules(), std::cmp::Reverse(*f as u8)));
        let Some((field, swept)) = best else { break };
        let iset = PlannedISet { field, buckets: swept.planned() };
        let n = iset.rules();
        if n == 0 || (n as f64) < cfg.min_coverage * rules.len() as f64 {
            break;
        }
        let mut taken = vec![false; rules.len()];
        for b in &iset.buckets {
            for &i in &b.rules {
                taken[i] = true;
            }
        }
        left.retain(|&i| !taken[i]);
        isets.push(iset);
    }
    (isets, left)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use proptest::prelude::*;

    proptest! {
        /// Buckets are disjoint, sorted, hold at most `c` rules (at most `l` unless their rules'
        /// intervals form one chain of overlaps: a merge of disjoint parts is `l` at most), and contain their
        /// rules' intervals; every rule is in exactly one iSet or the remainder.
        #[test]
        fn partition_invariants(
            case in testing::arb_case(), l in 1usize..6, more in 0usize..4, max_isets in 0usize..4, cov in 0.0f64..0.6,
        ) {
            let rules = &case.rules;
            let cfg = ISetConfig { bucket_size: l, cluster_size: l + more, max_isets, min_coverage: cov, wide: true };
            let (isets, rest) = partition(rules, &cfg);
            prop_assert!(isets.len() <= max_isets);
            let mut seen = vec![0u32; rules.len()];
            for s in &isets {
                prop_assert!(s.rules() as f64 >= cov * rules.len() as f64);
                for w in s.buckets.windows(2) {
                    prop_assert!(w[0].hi < w[1].lo, "buckets overlap or are unsorted");
                }
                for b in &s.buckets {
                    prop_assert!(b.lo <= b.hi && !b.rules.is_empty() && b.rules.len() <= l + more);
                    if b.rules.len() > l {
                        // A cluster: its intervals, by low end, each overlap those before them.
                        let mut ivs: Vec<(u32, u32)> =
                            b.rules.iter().map(|&i| s.field.interval(&rules[i].matches).expect("eligible")).collect();
                        ivs.sort_unstable();
                        let mut reach = ivs[0].1;
                        for &(lo, hi) in &ivs[1..] {
                            prop_assert!(lo <= reach, "a cluster of disjoint parts: {:?}", ivs);
                            reach = reach.max(hi);
                        }
                    }
                    for &i in &b.rules {
                        let (lo, hi) = s.field.interval(&rules[i].matches).expect("eligible");
                        prop_assert!(b.lo <= lo && hi <= b.hi);
                        seen[i] += 1;
                    }
                }
            }
            for &i in &rest { seen[i] += 1; }
            prop_assert!(seen.iter().all(|&n| n == 1));
        }
    }

    #[test]
    fn wildcards_are_left_out_and_l1_is_interval_scheduling() {
        let text = "@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x06/0xFF\t0x0000/0x0000\t\n\
                    @10.1.0.0/16\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x06/0xFF\t0x0000/0x0000\t\n\
                    @11.0.0.0/8\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x06/0xFF\t0x0000/0x0000\t\n\
                    @0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000\t\n";
        let rules = rqvs_flow::formats::classbench::parse_rules("t", text).unwrap();
        let b = buckets_on(&rules, &[0, 1, 2, 3], Field::NwSrc, 1);
        // 10.1/16 ends first, then 11/8: two non-overlapping; 10/8 overlaps 10.1/16; 0/0 all.
        assert_eq!(b.iter().map(|b| b.rules.clone()).collect::<Vec<_>>(), vec![vec![1], vec![2]]);
        let b = buckets_on(&rules, &[0, 1, 2, 3], Field::NwSrc, 2);
        assert_eq!(b.iter().map(|b| b.rules.len()).sum::<usize>(), 3);
    }
}
