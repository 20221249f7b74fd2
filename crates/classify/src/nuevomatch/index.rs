//! Range indexes: key → the index of the range (iSet bucket) containing it.
//!
//! The iSet layer asks one question of its index: which of these sorted, disjoint, inclusive
//! ranges holds this key, if any. [`SortedRanges`] answers it exactly by binary search; the
//! learned RQ-RMI model answers it by inference plus a search bounded by the model's error.

/// Maps a key to the index of the range that contains it.
pub trait RangeIndex: Send + Sync {
    /// Index of the range holding `key`, or `None` when `key` falls in a gap.
    fn find(&self, key: u32) -> Option<usize>;

    /// Bytes of the index itself (model and range arrays).
    fn memory_bytes(&self) -> usize;

    /// Short name for reports.
    fn name(&self) -> &'static str;
}

/// Binary search over the ranges' low ends: exact, `O(log n)`.
#[derive(Clone, Debug, Default)]
pub struct SortedRanges {
    lo: Vec<u32>,
    hi: Vec<u32>,
}

impl SortedRanges {
    /// From sorted, disjoint, inclusive ranges (checked: an error names the first bad index).
    pub fn new(ranges: &[(u32, u32)]) -> Result<SortedRanges, String> {
        for (i, w) in ranges.windows(2).enumerate() {
            if w[1].0 <= w[0].1 {
                return Err(format!(
                    "range {} starts at {} inside or before range {} ending at {}",
                    i + 1,
                    w[1].0,
                    i,
                    w[0].1
                ));
            }
        }
        if let Some((i, r)) = ranges.iter().enumerate().find(|(_, r)| r.0 > r.1) {
            return Err(format!("range {i} is reversed: {} > {}", r.0, r.1));
        }
        Ok(SortedRanges { lo: ranges.iter().map(|r| r.0).collect(), hi: ranges.iter().map(|r| r.1).collect() })
    }
}

impl RangeIndex for SortedRanges {
    #[inline]
    fn find(&self, key: u32) -> Option<usize> {
        let i = self.lo.partition_point(|&lo| lo <= key);
        (i > 0 && key <= self.hi[i - 1]).then(|| i - 1)
    }

    fn memory_bytes(&self) -> usize {
        (self.lo.capacity() + self.hi.capacity()) * 4
    }

    fn name(&self) -> &'static str {
        "binary-search"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn finds_the_containing_range(mut points in prop::collection::btree_set(any::<u32>(), 0..64), keys in prop::collection::vec(any::<u32>(), 1..64)) {
            let mut pts: Vec<u32> = std::mem::take(&mut points).into_iter().collect();
            if pts.len() % 2 == 1 { pts.pop(); }
            let ranges: Vec<(u32, u32)> = pts.chunks(2).map(|c| (c[0], c[1])).collect();
            let idx = SortedRanges::new(&ranges).unwrap();
            for k in keys.into_iter().chain(pts.iter().copied()) {
                let want = ranges.iter().position(|&(lo, hi)| lo <= k && k <= hi);
                prop_assert_eq!(idx.find(k), want);
            }
        }
    }

    #[test]
    fn rejects_overlaps() {
        assert!(SortedRanges::new(&[(0, 5), (5, 9)]).unwrap_err().contains("range 1"));
        assert!(SortedRanges::new(&[(3, 2)]).unwrap_err().contains("reversed"));
    }
}
