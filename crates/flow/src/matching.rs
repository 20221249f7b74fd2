//! `Match`: what a rule requires of a packet.
//!
//! A match is a value/mask pair over every `FlowKey` field, plus a native inclusive range on each
//! of `tp_src` and `tp_dst`: ClassBench port ranges such as `1024 : 65535` or `20 : 21` are not
//! prefixes, and classifiers that can use ranges directly (iSets, TupleMerge) should not pay for
//! their expansion. A packet matches when every masked field is equal *and* both ports fall in
//! their ranges; a mask on a port and a range on the same port are both required (intersection).
//!
//! Invariant (checked by [`Match::new`]): `value == value & mask`, and `lo <= hi` for both ranges.

use crate::key::FlowKey;
use crate::prefix;

/// An inclusive range of 16-bit values (`lo..=hi`), never empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(try_from = "crate::serde_impls::PortRangeRepr"))]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

impl PortRange {
    /// Every port.
    pub const ANY: PortRange = PortRange { lo: 0, hi: u16::MAX };

    /// A range, or `None` when `lo > hi`.
    pub fn new(lo: u16, hi: u16) -> Option<PortRange> {
        (lo <= hi).then_some(PortRange { lo, hi })
    }

    pub fn exact(v: u16) -> PortRange {
        PortRange { lo: v, hi: v }
    }

    #[inline]
    pub fn contains(&self, v: u16) -> bool {
        self.lo <= v && v <= self.hi
    }

    pub fn is_any(&self) -> bool {
        *self == PortRange::ANY
    }

    pub fn intersects(&self, other: &PortRange) -> bool {
        self.lo <= other.hi && other.lo <= self.hi
    }

    /// Number of values in the range.
    pub fn len(&self) -> u32 {
        u32::from(self.hi) - u32::from(self.lo) + 1
    }

    /// Never true: a `PortRange` always holds at least one value.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The range as one value/mask prefix, when it is one.
    pub fn as_prefix(&self) -> Option<(u16, u16)> {
        prefix::range_as_prefix(u32::from(self.lo), u32::from(self.hi), 16).map(|(v, m)| (v as u16, m as u16))
    }

    /// The exact list of value/mask prefixes whose union is this range (at most 30).
    pub fn to_prefixes(&self) -> Vec<(u16, u16)> {
        prefix::range_to_prefixes(u32::from(self.lo), u32::from(self.hi), 16)
            .into_iter()
            .map(|(v, m)| (v as u16, m as u16))
            .collect()
    }
}

/// Why a `Match` could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchError {
    /// The value has a bit set outside its mask in the named field.
    ValueOutsideMask(&'static str),
}

impl std::fmt::Display for MatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MatchError::ValueOutsideMask(field) => {
                write!(f, "{field}: value has bits set outside its mask")
            }
        }
    }
}

impl std::error::Error for MatchError {}

/// A rule's match: value/mask on every field, and inclusive ranges on the two ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(try_from = "crate::serde_impls::MatchRepr"))]
pub struct Match {
    value: FlowKey,
    mask: FlowKey,
    tp_src_range: PortRange,
    tp_dst_range: PortRange,
}

impl Default for Match {
    fn default() -> Self {
        Match::ANY
    }
}

impl Match {
    /// The match every packet satisfies.
    pub const ANY: Match =
        Match { value: FlowKey::ZERO, mask: FlowKey::ZERO, tp_src_range: PortRange::ANY, tp_dst_range: PortRange::ANY };

    /// A match from value/mask and port ranges; fails when the value has bits outside the mask.
    pub fn new(
        value: FlowKey,
        mask: FlowKey,
        tp_src_range: PortRange,
        tp_dst_range: PortRange,
    ) -> Result<Match, MatchError> {
        if let Some(field) = first_bits_outside_mask(&value, &mask) {
            return Err(MatchError::ValueOutsideMask(field));
        }
        Ok(Match { value, mask, tp_src_range, tp_dst_range })
    }

    /// A pure value/mask match (no port ranges); the value is masked first.
    pub fn from_masked(value: FlowKey, mask: FlowKey) -> Match {
        Match { value: value.masked(&mask), mask, tp_src_range: PortRange::ANY, tp_dst_range: PortRange::ANY }
    }

    /// The match that accepts exactly `key` on every field.
    pub fn exact(key: &FlowKey) -> Match {
        Match::from_masked(*key, FlowKey::EXACT)
    }

    pub fn value(&self) -> &FlowKey {
        &self.value
    }

    pub fn mask(&self) -> &FlowKey {
        &self.mask
    }

    pub fn tp_src_range(&self) -> PortRange {
        self.tp_src_range
    }

    pub fn tp_dst_range(&self) -> PortRange {
        self.tp_dst_range
    }

    /// Does `key` satisfy this match?
    #[inline]
    pub fn matches(&self, key: &FlowKey) -> bool {
        key.masked(&self.mask) == self.value
            && self.tp_src_range.contains(key.tp_src)
            && self.tp_dst_range.contains(key.tp_dst)
    }

    /// True when this match uses a port range that is not the whole port space.
    pub fn has_port_ranges(&self) -> bool {
        !self.tp_src_range.is_any() || !self.tp_dst_range.is_any()
    }

    /// The interval of `tp_src` values accepted, when it is one interval (range ∩ prefix mask).
    pub fn tp_src_interval(&self) -> Option<PortRange> {
        port_interval(self.tp_src_range, self.value.tp_src, self.mask.tp_src)
    }

    /// The interval of `tp_dst` values accepted, when it is one interval.
    pub fn tp_dst_interval(&self) -> Option<PortRange> {
        port_interval(self.tp_dst_range, self.value.tp_dst, self.mask.tp_dst)
    }

    /// The same match with each port range replaced by one value/mask, for every combination of
    /// the ranges' prefix expansions: the union of the results accepts exactly the packets this
    /// match accepts. Port masks already present are intersected with each prefix; combinations
    /// that cannot match anything are dropped.
    pub fn expand_port_ranges(&self) -> Vec<Match> {
        if !self.has_port_ranges() {
            return vec![*self];
        }
        let srcs = self.tp_src_range.to_prefixes();
        let dsts = self.tp_dst_range.to_prefixes();
        let mut out = Vec::with_capacity(srcs.len() * dsts.len());
        for &(sv, sm) in &srcs {
            let Some((sv, sm)) = and_prefix(self.value.tp_src, self.mask.tp_src, sv, sm) else {
                continue;
            };
            for &(dv, dm) in &dsts {
                let Some((dv, dm)) = and_prefix(self.value.tp_dst, self.mask.tp_dst, dv, dm) else {
                    continue;
                };
                let mut value = self.value;
                let mut mask = self.mask;
                value.tp_src = sv;
                mask.tp_src = sm;
                value.tp_dst = dv;
                mask.tp_dst = dm;
                out.push(Match { value, mask, tp_src_range: PortRange::ANY, tp_dst_range: PortRange::ANY });
            }
        }
        out
    }

    /// Could some packet satisfy both matches? Exact for value/mask fields and ranges.
    pub fn overlaps(&self, other: &Match) -> bool {
        let common = self.mask.masked(&other.mask);
        self.value.masked(&common) == other.value.masked(&common)
            && ports_overlap(
                self.tp_src_range,
                self.value.tp_src,
                self.mask.tp_src,
                other.tp_src_range,
                other.value.tp_src,
                other.mask.tp_src,
            )
            && ports_overlap(
                self.tp_dst_range,
                self.value.tp_dst,
                self.mask.tp_dst,
                other.tp_dst_range,
                other.value.tp_dst,
                other.mask.tp_dst,
            )
    }
}

/// Combine two value/mask pairs on one field; `None` when they contradict.
fn and_prefix(v1: u16, m1: u16, v2: u16, m2: u16) -> Option<(u16, u16)> {
    let common = m1 & m2;
    ((v1 & common) == (v2 & common)).then_some((v1 | v2, m1 | m2))
}

/// Is there a port in `r1 ∩ r2` that also satisfies both masks?
fn ports_overlap(r1: PortRange, v1: u16, m1: u16, r2: PortRange, v2: u16, m2: u16) -> bool {
    let Some((v, m)) = and_prefix(v1, m1, v2, m2) else {
        return false;
    };
    let lo = r1.lo.max(r2.lo);
    let hi = r1.hi.min(r2.hi);
    if lo > hi {
        return false;
    }
    if m == 0 {
        return true;
    }
    // Smallest x >= lo with x & m == v, compared with hi.
    prefix::min_masked_at_least(u32::from(lo), u32::from(v), u32::from(m), 16).is_some_and(|x| x <= u32::from(hi))
}

fn port_interval(range: PortRange, v: u16, m: u16) -> Option<PortRange> {
    if m == 0 {
        return Some(range);
    }
    let (plo, phi) = prefix::mask_as_range(u32::from(v), u32::from(m), 16)?;
    PortRange::new(range.lo.max(plo as u16), range.hi.min(phi as u16))
}

fn first_bits_outside_mask(value: &FlowKey, mask: &FlowKey) -> Option<&'static str> {
    value.first_bits_outside(mask)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn port_match(r: PortRange) -> Match {
        Match::new(FlowKey::default(), FlowKey::default(), r, PortRange::ANY).unwrap()
    }

    #[test]
    fn new_rejects_value_outside_mask() {
        let mut v = FlowKey::default();
        v.nw_src = 1;
        assert_eq!(
            Match::new(v, FlowKey::default(), PortRange::ANY, PortRange::ANY),
            Err(MatchError::ValueOutsideMask("nw_src"))
        );
    }

    proptest! {
        #[test]
        fn expansion_accepts_same_ports(lo in 0u16.., len in 0u16..3000, p in 0u16..,
                                         mv in 0u16.., mm in 0u16..) {
            let hi = lo.saturating_add(len);
            let mut value = FlowKey::default();
            let mut mask = FlowKey::default();
            mask.tp_src = mm;
            value.tp_src = mv & mm;
            let m = Match::new(value, mask, PortRange::new(lo, hi).unwrap(), PortRange::ANY).unwrap();
            let key = FlowKey { tp_src: p, ..FlowKey::default() };
            let expanded = m.expand_port_ranges();
            prop_assert_eq!(m.matches(&key), expanded.iter().any(|e| e.matches(&key)));
            prop_assert!(expanded.iter().all(|e| !e.has_port_ranges()));
        }

        #[test]
        fn overlap_is_exact_on_ports(a in 0u16..200, b in 0u16..200, c in 0u16..200, d in 0u16..200,
                                      mv in 0u16..256, mm in 0u16..256) {
            let r1 = PortRange::new(a.min(b), a.max(b)).unwrap();
            let r2 = PortRange::new(c.min(d), c.max(d)).unwrap();
            let m1 = port_match(r1);
            let mut value = FlowKey::default();
            let mut mask = FlowKey::default();
            mask.tp_src = mm;
            value.tp_src = mv & mm;
            let m2 = Match::new(value, mask, r2, PortRange::ANY).unwrap();
            let brute = (0u16..=255).any(|p| {
                let k = FlowKey { tp_src: p, ..FlowKey::default() };
                m1.matches(&k) && m2.matches(&k)
            });
            prop_assert_eq!(m1.overlaps(&m2), brute);
        }
    }
}
