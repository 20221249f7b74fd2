//! Range indexes: key → the index of the range (iSet bucket) containing it.
//!
//! The iSet layer asks one question of its index: which of these sorted, disjoint, inclusive
//! ranges holds this key, if any. [`SortedRanges`] answers it exactly by binary search;
//! [`LearnedRanges`] (the RQ-RMI model) answers it by inference plus a search bounded by the
//! model's sound error bound — exact too, whatever the model's quality.

/// Maps a key to the index of the range that contains it.
pub trait RangeIndex: Send + Sync {
    /// Index of the range holding `key`, or `None` when `key` falls in a gap.
    fn find(&self, key: u32) -> Option<usize>;

    /// [`RangeIndex::find`] for every key of `keys` into `out` (same length).
    fn find_batch(&self, keys: &[u32], out: &mut [Option<usize>]) {
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = self.find(*k);
        }
    }

    /// Bytes of the index itself (model and range arrays).
    fn memory_bytes(&self) -> usize;

    /// Range `i`, when the index can tell.
    fn range(&self, _i: usize) -> Option<(u32, u32)> {
        None
    }

    /// The index in a file format of its own, when it has one (the learned model does).
    fn to_bytes(&self) -> Option<Vec<u8>> {
        None
    }

    /// The learned index's error bound in positions of the range array: `(max, mean)` over its
    /// leaves (the mean weighted by the range pieces each leaf serves); `None` for exact indexes.
    fn error_bound(&self) -> Option<(u64, f64)> {
        None
    }

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

    fn range(&self, i: usize) -> Option<(u32, u32)> {
        Some((*self.lo.get(i)?, *self.hi.get(i)?))
    }

    fn name(&self) -> &'static str {
        "binary-search"
    }
}

/// The learned index: RQ-RMI inference, then a binary search bounded by the model's (sound)
/// error bound over the same ranges (`rqvs-rqrmi`).
pub struct LearnedRanges(pub rqvs_rqrmi::RqRmi<u32>);

impl LearnedRanges {
    /// Trains a model over sorted, disjoint, inclusive ranges with the default configuration
    /// (4K samples per submodel, error target 128, at most 6 sessions).
    pub fn train(ranges: &[(u32, u32)]) -> Result<LearnedRanges, String> {
        Self::train_with(ranges, &rqvs_rqrmi::TrainConfig::default())
    }

    /// Trains a model over sorted, disjoint, inclusive ranges with `cfg`.
    pub fn train_with(ranges: &[(u32, u32)], cfg: &rqvs_rqrmi::TrainConfig) -> Result<LearnedRanges, String> {
        rqvs_rqrmi::RqRmi::train(ranges, cfg).map(LearnedRanges).map_err(|e| format!("{e:?}"))
    }
}

impl RangeIndex for LearnedRanges {
    #[inline]
    fn find(&self, key: u32) -> Option<usize> {
        self.0.lookup(key)
    }

    /// Batched inference (AVX2 when the CPU has it, bit-identical to scalar).
    fn find_batch(&self, keys: &[u32], out: &mut [Option<usize>]) {
        self.0.lookup_batch(keys, out)
    }

    fn memory_bytes(&self) -> usize {
        self.0.memory_bytes()
    }

    fn range(&self, i: usize) -> Option<(u32, u32)> {
        (i < self.0.len()).then(|| self.0.range(i))
    }

    fn to_bytes(&self) -> Option<Vec<u8>> {
        Some(self.0.to_bytes())
    }

    fn error_bound(&self) -> Option<(u64, f64)> {
        Some((self.0.max_error(), self.0.mean_error()))
    }

    fn name(&self) -> &'static str {
        "rq-rmi"
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn learned_equals_binary_search(mut points in prop::collection::btree_set(any::<u32>(), 2..400), keys in prop::collection::vec(any::<u32>(), 1..200)) {
            let mut pts: Vec<u32> = std::mem::take(&mut points).into_iter().collect();
            if pts.len() % 2 == 1 { pts.pop(); }
            let ranges: Vec<(u32, u32)> = pts.chunks(2).map(|c| (c[0], c[1])).collect();
            let exact = SortedRanges::new(&ranges).unwrap();
            let learned = LearnedRanges::train(&ranges).unwrap();
            for k in keys.into_iter().chain(pts.iter().copied()).chain(pts.iter().map(|p| p.wrapping_add(1))) {
                prop_assert_eq!(learned.find(k), exact.find(k));
            }
        }
    }

    #[test]
    fn rejects_overlaps() {
        assert!(SortedRanges::new(&[(0, 5), (5, 9)]).unwrap_err().contains("range 1"));
        assert!(SortedRanges::new(&[(3, 2)]).unwrap_err().contains("reversed"));
    }
}
