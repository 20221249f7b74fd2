//! Ranges and prefixes on fields of up to 32 bits: range-to-prefix expansion and back.
//!
//! A *prefix* is a value/mask pair whose mask is contiguous ones from the top bit of the field
//! (`10.0.0.0/8`, `0x400/0xfc00`). Every prefix is a range; a range is a prefix only when its size is
//! a power of two and its low end is aligned to it. Any range over a `bits`-wide field splits into at
//! most `2 * bits - 2` disjoint prefixes.

/// The mask of a `bits`-wide field.
#[inline]
pub fn field_mask(bits: u32) -> u32 {
    if bits >= 32 {
        u32::MAX
    } else {
        (1u32 << bits) - 1
    }
}

/// The mask of the `len` top bits of a `bits`-wide field (`prefix_mask(8, 32) == 0xff00_0000`).
#[inline]
pub fn prefix_mask(len: u32, bits: u32) -> u32 {
    debug_assert!(len <= bits && bits <= 32);
    if len == 0 {
        0
    } else {
        (u32::MAX << (32 - len)) >> (32 - bits)
    }
}

/// The prefix length of `mask` when it is a prefix mask of a `bits`-wide field.
pub fn prefix_len(mask: u32, bits: u32) -> Option<u32> {
    let ones = mask.count_ones();
    (prefix_mask(ones, bits) == mask).then_some(ones)
}

/// `[lo, hi]` as one value/mask prefix, when it is one.
pub fn range_as_prefix(lo: u32, hi: u32, bits: u32) -> Option<(u32, u32)> {
    if lo > hi || hi > field_mask(bits) {
        return None;
    }
    let size = u64::from(hi - lo) + 1;
    if !size.is_power_of_two() || u64::from(lo) % size != 0 {
        return None;
    }
    let host_bits = size.trailing_zeros();
    Some((lo, prefix_mask(bits - host_bits, bits)))
}

/// The inclusive range covered by a value/mask pair, when the mask is a prefix mask.
pub fn mask_as_range(value: u32, mask: u32, bits: u32) -> Option<(u32, u32)> {
    prefix_len(mask, bits)?;
    let lo = value & mask;
    Some((lo, lo | (field_mask(bits) & !mask)))
}

/// The shortest list of disjoint value/mask prefixes whose union is exactly `[lo, hi]`, in
/// ascending order. Empty when `lo > hi`.
pub fn range_to_prefixes(lo: u32, hi: u32, bits: u32) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    if lo > hi {
        return out;
    }
    let (mut lo, hi) = (u64::from(lo), u64::from(hi));
    while lo <= hi {
        // Largest aligned block starting at `lo` that stays inside the range.
        let mut size: u64 = if lo == 0 { 1u64 << bits } else { 1u64 << lo.trailing_zeros() };
        while lo + size - 1 > hi {
            size >>= 1;
        }
        let host_bits = size.trailing_zeros();
        out.push((lo as u32, prefix_mask(bits - host_bits, bits)));
        lo += size;
    }
    out
}

/// The smallest `x >= lo` (within a `bits`-wide field) with `x & mask == value`, if any.
/// `value` must have no bits outside `mask`.
pub fn min_masked_at_least(lo: u32, value: u32, mask: u32, bits: u32) -> Option<u32> {
    debug_assert_eq!(value & !mask, 0);
    let conflicts = (lo ^ value) & mask;
    if conflicts == 0 {
        return Some(lo);
    }
    // Diverge upward from `lo` at the lowest bit i at or above the highest conflict where lo has a
    // 0 and x may have a 1; above i, x copies lo (no conflicts there); below i, x is minimal.
    let c = 31 - conflicts.leading_zeros();
    for i in c..bits {
        let bit = 1u32 << i;
        let settable = mask & bit == 0 || value & bit != 0;
        if lo & bit == 0 && settable {
            let above = if i == 31 { 0 } else { lo & !((bit << 1).wrapping_sub(1)) };
            return Some(above | bit | (value & (bit - 1)));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_expansions() {
        assert_eq!(range_to_prefixes(0, 65535, 16), vec![(0, 0)]);
        assert_eq!(range_to_prefixes(80, 80, 16), vec![(80, 0xffff)]);
        assert_eq!(range_to_prefixes(1024, 65535, 16).len(), 6);
        assert_eq!(range_to_prefixes(1, 65534, 16).len(), 30);
        assert_eq!(range_to_prefixes(0, u32::MAX, 32), vec![(0, 0)]);
        assert_eq!(range_as_prefix(1024, 2047, 16), Some((1024, 0xfc00)));
        assert_eq!(range_as_prefix(1024, 2048, 16), None);
        assert_eq!(mask_as_range(0x0a00_0000, 0xff00_0000, 32), Some((0x0a00_0000, 0x0aff_ffff)));
        assert_eq!(mask_as_range(0x35, 0xff, 16), None);
        assert_eq!(prefix_len(0xffff_ff00, 32), Some(24));
        assert_eq!(prefix_len(0xff, 16), None);
    }

    proptest! {
        #[test]
        fn expansion_is_exact_and_disjoint(lo in 0u32..4096, len in 0u32..4096, x in 0u32..8192) {
            let hi = (lo + len).min(4095);
            let ps = range_to_prefixes(lo, hi, 12);
            let hits = ps.iter().filter(|&&(v, m)| x & m == v && x <= 4095).count();
            prop_assert_eq!(hits, usize::from(lo <= x && x <= hi));
            prop_assert!(ps.len() <= 2 * 12 - 2);
            for &(v, m) in &ps {
                let (a, b) = mask_as_range(v, m, 12).unwrap();
                prop_assert_eq!(range_as_prefix(a, b, 12), Some((v, m)));
            }
        }

        #[test]
        fn min_masked_matches_brute_force(lo in 0u32..1024, v in 0u32..1024, m in 0u32..1024) {
            let v = v & m;
            let brute = (lo..1024).find(|x| x & m == v);
            prop_assert_eq!(min_masked_at_least(lo, v, m, 10), brute);
        }
    }
}
