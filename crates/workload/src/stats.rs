//! The statistics a generated rule-set is compared on with a real one.
//!
//! - prefix-length histograms of source and destination (0..32);
//! - port classes of each port: WC 0:65535, HI 1024:65535, LO 0:1023, EM one port, AR the rest;
//! - protocol mix (protocol value, with 0 for the wildcard);
//! - the share of rules with a flags match;
//! - distinct tuples `(source length, destination length, protocol wildcarded?)` — the tuples a
//!   tuple-space classifier would hash before port expansion.
//!
//! Distances between two histograms are total variation distances (half the L1 distance of the
//! normalised histograms, 0 = identical, 1 = disjoint).

use std::collections::{BTreeMap, BTreeSet};

use rqvs_flow::formats::classbench::from_match;
use rqvs_flow::{PortRange, Rule};

/// Port classes, in this order in [`RuleStats::sport_class`]/[`RuleStats::dport_class`].
pub const PORT_CLASSES: [&str; 5] = ["WC", "HI", "LO", "EM", "AR"];

/// The class of a port range (index into [`PORT_CLASSES`]).
pub fn port_class(r: PortRange) -> usize {
    match (r.lo, r.hi) {
        (0, 65535) => 0,
        (1024, 65535) => 1,
        (0, 1023) => 2,
        (lo, hi) if lo == hi => 3,
        _ => 4,
    }
}

/// Statistics of one rule-set.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RuleStats {
    pub rules: usize,
    /// Rules per source prefix length 0..=32.
    pub src_len: Vec<u64>,
    pub dst_len: Vec<u64>,
    pub sport_class: [u64; 5],
    pub dport_class: [u64; 5],
    /// Rules per protocol value (0 = wildcard).
    pub protocols: BTreeMap<u8, u64>,
    pub flags_matched: u64,
    pub tuples: usize,
    /// Distinct source prefixes, destination prefixes (the shape of the address tries).
    pub src_prefixes: usize,
    pub dst_prefixes: usize,
}

impl RuleStats {
    /// Statistics of ClassBench-shaped rules (others are an error naming the rule).
    pub fn of(rules: &[Rule]) -> Result<RuleStats, String> {
        let mut s =
            RuleStats { rules: rules.len(), src_len: vec![0; 33], dst_len: vec![0; 33], ..RuleStats::default() };
        let mut tuples = BTreeSet::new();
        let (mut sp, mut dp) = (hashbrown::HashSet::new(), hashbrown::HashSet::new());
        for r in rules {
            let f = from_match(&r.matches).map_err(|e| format!("rule {}: {e}", r.id))?;
            s.src_len[usize::from(f.src.1)] += 1;
            s.dst_len[usize::from(f.dst.1)] += 1;
            s.sport_class[port_class(f.sport)] += 1;
            s.dport_class[port_class(f.dport)] += 1;
            *s.protocols.entry(if f.proto.1 == 0 { 0 } else { f.proto.0 }).or_default() += 1;
            if f.flags.1 != 0 {
                s.flags_matched += 1;
            }
            tuples.insert((f.src.1, f.dst.1, f.proto.1 == 0));
            sp.insert(f.src);
            dp.insert(f.dst);
        }
        s.tuples = tuples.len();
        s.src_prefixes = sp.len();
        s.dst_prefixes = dp.len();
        Ok(s)
    }

    /// Share of rules with each protocol value.
    pub fn protocol_shares(&self) -> BTreeMap<u8, f64> {
        self.protocols.iter().map(|(&p, &c)| (p, c as f64 / self.rules.max(1) as f64)).collect()
    }

    /// The largest distances to `other`, field by field.
    pub fn compare(&self, other: &RuleStats) -> Comparison {
        let protos: BTreeSet<u8> = self.protocols.keys().chain(other.protocols.keys()).copied().collect();
        let pa: Vec<u64> = protos.iter().map(|p| self.protocols.get(p).copied().unwrap_or(0)).collect();
        let pb: Vec<u64> = protos.iter().map(|p| other.protocols.get(p).copied().unwrap_or(0)).collect();
        Comparison {
            src_len: tvd(&self.src_len, &other.src_len),
            dst_len: tvd(&self.dst_len, &other.dst_len),
            sport_class: tvd(&self.sport_class, &other.sport_class),
            dport_class: tvd(&self.dport_class, &other.dport_class),
            protocol: tvd(&pa, &pb),
            flags: (self.flags_matched as f64 / self.rules.max(1) as f64
                - other.flags_matched as f64 / other.rules.max(1) as f64)
                .abs(),
            tuples_ratio: self.tuples as f64 / other.tuples.max(1) as f64,
            rules_ratio: self.rules as f64 / other.rules.max(1) as f64,
            src_prefixes_ratio: self.src_prefixes as f64 / other.src_prefixes.max(1) as f64,
            dst_prefixes_ratio: self.dst_prefixes as f64 / other.dst_prefixes.max(1) as f64,
        }
    }
}

/// Distances between two rule-sets' statistics.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Comparison {
    pub src_len: f64,
    pub dst_len: f64,
    pub sport_class: f64,
    pub dport_class: f64,
    pub protocol: f64,
    /// Absolute difference of the shares of rules with a flags match.
    pub flags: f64,
    /// Distinct tuples of the first set / distinct tuples of the second.
    pub tuples_ratio: f64,
    /// Rules / rules (after duplicates are removed: sensitive to the address tries).
    pub rules_ratio: f64,
    /// Distinct source (destination) prefixes / the other set's.
    pub src_prefixes_ratio: f64,
    pub dst_prefixes_ratio: f64,
}

impl std::fmt::Display for Comparison {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "TVD src_len {:.3} dst_len {:.3} sport {:.3} dport {:.3} proto {:.3}; flags Δ {:.3}; tuples ×{:.2}; rules ×{:.3}; src prefixes ×{:.2}; dst prefixes ×{:.2}",
            self.src_len,
            self.dst_len,
            self.sport_class,
            self.dport_class,
            self.protocol,
            self.flags,
            self.tuples_ratio,
            self.rules_ratio,
            self.src_prefixes_ratio,
            self.dst_prefixes_ratio
        )
    }
}

/// Total variation distance of two histograms.
pub fn tvd(a: &[u64], b: &[u64]) -> f64 {
    let (ta, tb) = (a.iter().sum::<u64>().max(1) as f64, b.iter().sum::<u64>().max(1) as f64);
    a.iter().zip(b).map(|(&x, &y)| (x as f64 / ta - y as f64 / tb).abs()).sum::<f64>() / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_and_tvd() {
        assert_eq!(port_class(PortRange::ANY), 0);
        assert_eq!(port_class(PortRange { lo: 1024, hi: 65535 }), 1);
        assert_eq!(port_class(PortRange { lo: 0, hi: 1023 }), 2);
        assert_eq!(port_class(PortRange::exact(80)), 3);
        assert_eq!(port_class(PortRange { lo: 80, hi: 81 }), 4);
        assert_eq!(tvd(&[1, 0], &[0, 1]), 1.0);
        assert_eq!(tvd(&[2, 2], &[1, 1]), 0.0);
    }
}
