//! What the `serde` feature needs beyond derives: the checked forms [`Match`] and [`PortRange`]
//! are deserialized through, so that no invariant of theirs can be skipped by deserializing.

use crate::{FlowKey, Match, PortRange};

/// [`PortRange`] as written; becomes one only when `lo <= hi`.
#[derive(serde::Deserialize)]
pub(crate) struct PortRangeRepr {
    lo: u16,
    hi: u16,
}

impl TryFrom<PortRangeRepr> for PortRange {
    type Error = String;

    fn try_from(r: PortRangeRepr) -> Result<PortRange, String> {
        PortRange::new(r.lo, r.hi).ok_or_else(|| format!("port range {}..{} is empty (lo > hi)", r.lo, r.hi))
    }
}

/// [`Match`] as written; becomes one only through [`Match::new`]'s checks.
#[derive(serde::Deserialize)]
pub(crate) struct MatchRepr {
    value: FlowKey,
    mask: FlowKey,
    tp_src_range: PortRange,
    tp_dst_range: PortRange,
}

impl TryFrom<MatchRepr> for Match {
    type Error = crate::MatchError;

    fn try_from(r: MatchRepr) -> Result<Match, crate::MatchError> {
        Match::new(r.value, r.mask, r.tp_src_range, r.tp_dst_range)
    }
}
