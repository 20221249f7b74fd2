//! Shared helpers: range-set generators and the brute-force truth.
#![allow(dead_code)]

use proptest::prelude::*;

/// The true answer: the index of the range containing `k` (binary search over all ranges).
pub fn truth(r: &[(u32, u32)], k: u32) -> Option<usize> {
    let p = r.partition_point(|&(lo, _)| lo <= k);
    (p > 0 && k <= r[p - 1].1).then(|| p - 1)
}

/// Builds disjoint sorted ranges from (gap, len) pairs, stopping at the end of the key space.
pub fn from_gaps(start: u32, parts: &[(u64, u64)]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut at = u64::from(start);
    for &(gap, len) in parts {
        let lo = at + gap;
        let hi = lo + len;
        if hi > u64::from(u32::MAX) {
            break;
        }
        out.push((lo as u32, hi as u32));
        at = hi + 1;
    }
    if out.is_empty() {
        out.push((start, start));
    }
    out
}

/// A gap or length drawn from several scales: adjacent/single keys, small, medium, huge.
pub fn scale() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => Just(0u64),
        3 => 0u64..4,
        3 => 0u64..300,
        2 => 0u64..70_000,
        1 => 0u64..(1 << 26),
    ]
}

/// Random range sets: structured mixes of scales, `1..max` ranges.
pub fn range_set(max: usize) -> impl Strategy<Value = Vec<(u32, u32)>> {
    (any::<u32>().prop_map(|s| s >> 4), proptest::collection::vec((scale(), scale()), 1..max))
        .prop_map(|(start, parts)| from_gaps(start, &parts))
}

/// Keys to probe: every range's ends and their neighbours, a few interior points.
pub fn probe_keys(r: &[(u32, u32)], extra: &[u32]) -> Vec<u32> {
    let mut ks = Vec::with_capacity(r.len() * 6 + extra.len());
    for &(lo, hi) in r {
        ks.extend([lo, hi, lo.wrapping_sub(1), hi.wrapping_add(1), lo + (hi - lo) / 2, lo + (hi - lo) / 3]);
    }
    ks.extend_from_slice(extra);
    ks
}
