//! ClassBench → OpenFlow: the same first-match semantics as an OpenFlow table.
//!
//! Each ClassBench rule becomes one OpenFlow flow per combination of its port ranges' exact
//! prefix expansions (so the flows of one rule are disjoint), tagged with `cookie` = the ClassBench
//! rule id so a match in OVS names the rule it came from. Priorities are 16-bit:
//! - up to 65,535 rules: priority = `n - line` (distinct, first line highest);
//! - more: *layered* priorities — a rule gets one more than the highest priority of any later rule
//!   it overlaps, so only overlapping rules need distinct priorities. This fails (with an error) if
//!   a chain of more than 65,535 mutually ordered overlapping rules exists.
//!
//! Not every ClassBench rule has an OpenFlow form: OpenFlow matches ports only under TCP, UDP or
//! SCTP (and ICMP type/code only exactly). Seeds fw2 and fw4 put port ranges on other protocols
//! (and on "any protocol"); such rules are *skipped*, counted and listed with their reason, and the
//! table then differs from the ClassBench file for packets those rules would have won.

use crate::key::FlowKey;
use crate::key::{IPPROTO_ICMP, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP};
use crate::matching::Match;
use crate::prefix::prefix_mask;
use crate::rule::{Actions, Rule, RuleId};

/// The OpenFlow table made from a ClassBench rule-set.
#[derive(Clone, Debug, Default)]
pub struct Conversion {
    /// The flows, ids 0.., in the order of the ClassBench file; `cookie` holds the source rule id.
    pub flows: Vec<Rule>,
    /// Rules with no OpenFlow form, with the reason.
    pub skipped: Vec<(RuleId, String)>,
    /// Number of source rules converted (flows may be more: port-range expansion).
    pub converted: usize,
    /// Highest priority used.
    pub max_priority: u32,
}

impl Conversion {
    /// Flows added by port-range expansion beyond one per converted rule.
    pub fn expansion(&self) -> usize {
        self.flows.len() - self.converted
    }
}

/// Why a rule has no OpenFlow form, if it has none.
pub fn openflow_obstacle(rule: &Rule) -> Option<String> {
    let (v, k) = (rule.matches.value(), rule.matches.mask());
    let proto = (k.nw_proto == u8::MAX).then_some(v.nw_proto);
    let has_ports = rule.matches.has_port_ranges() || k.tp_src != 0 || k.tp_dst != 0;
    match proto {
        Some(IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP) => None,
        Some(IPPROTO_ICMP) => {
            let exact = |m: u16| m == 0 || m == u16::MAX;
            (rule.matches.has_port_ranges() || !exact(k.tp_src) || !exact(k.tp_dst))
                .then(|| "ICMP type/code must be exact in OpenFlow, found a range or partial mask".to_string())
        }
        Some(p) if has_ports => {
            Some(format!("ports on protocol {p}: OpenFlow matches ports only for TCP, UDP and SCTP"))
        }
        None if has_ports => {
            Some("ports with any protocol: OpenFlow matches ports only for TCP, UDP and SCTP".to_string())
        }
        _ => None,
    }
}

/// The most OpenFlow flows a conversion may make: port-range expansion multiplies a rule by up
/// to 30 × 30 prefixes (a 10K-rule set of wide ranges makes 9M flows, gigabytes in a
/// classifier); the largest shared ClassBench set, fw1_500k, makes 1.6M.
pub const MAX_FLOWS: usize = 2_000_000;

/// Converts ClassBench rules (first-match order = winner order) to an OpenFlow table whose
/// winners are the same for every packet, with `actions` on every flow. More than [`MAX_FLOWS`]
/// flows is an error naming the limit.
pub fn classbench_to_openflow(rules: &[Rule], actions: &Actions) -> Result<Conversion, String> {
    let mut order: Vec<&Rule> = rules.iter().collect();
    order.sort_by_key(|r| r.rank());
    let mut conv = Conversion::default();
    let mut kept: Vec<&Rule> = Vec::with_capacity(order.len());
    for r in order {
        match openflow_obstacle(r) {
            Some(why) => conv.skipped.push((r.id, why)),
            None => kept.push(r),
        }
    }
    let priorities = assign_priorities(&kept, 0xffff)?;
    for (r, &prio) in kept.iter().zip(&priorities) {
        conv.converted += 1;
        conv.max_priority = conv.max_priority.max(prio);
        let expanded = r.matches.expand_port_ranges();
        if conv.flows.len() + expanded.len() > MAX_FLOWS {
            return Err(format!(
                "port-range expansion makes more than the limit of {MAX_FLOWS} OpenFlow flows (at rule {} of {}, which expands to {}): split the rule-set or use ClassBench tools on it",
                conv.converted,
                kept.len(),
                expanded.len()
            ));
        }
        for m in expanded {
            let id = conv.flows.len() as u32;
            let mut flow = Rule::new(id, prio, m, actions.clone());
            flow.cookie = u64::from(r.id.0);
            conv.flows.push(flow);
        }
    }
    Ok(conv)
}

/// 16-bit priorities for rules given in winner order (see the module docs): distinct when fewer
/// than `distinct_limit` rules, layered otherwise. The layered walk looks for the highest level
/// holding a rule that overlaps the new one, through each level's [`LevelIndex`] (only rules
/// that agree on the leading address bits both specify are compared in full), so a set of 500K
/// rules with few overlaps converts in seconds, not minutes.
fn assign_priorities(rules: &[&Rule], distinct_limit: usize) -> Result<Vec<u32>, String> {
    let n = rules.len();
    if n < distinct_limit {
        return Ok((0..n).map(|i| (n - i) as u32).collect());
    }
    // Layered: walk from the last rule up; levels[p] holds the rules given priority p + 1.
    let mut prio = vec![0u32; n];
    let mut levels: Vec<LevelIndex> = Vec::new();
    for i in (0..n).rev() {
        let m = &rules[i].matches;
        let above = levels.iter().rposition(|level| level.any_overlap(rules, m)).map_or(0, |p| p + 1);
        if above >= 0xffff {
            return Err(format!(
                "rule {} sits above a chain of {above} overlapping rules: more than OpenFlow's 16-bit priorities can order",
                rules[i].id
            ));
        }
        if levels.len() == above {
            levels.push(LevelIndex::default());
        }
        levels[above].insert(i, m);
        prio[i] = above as u32 + 1;
    }
    Ok(prio)
}

/// The rules of one priority level, grouped by how many leading bits of each address their
/// masks specify, each group sorted by address (source first and destination first).
#[derive(Default)]
struct LevelIndex {
    /// (source bits, destination bits) → [by `src:dst`, by `dst:src`].
    groups: std::collections::HashMap<(u32, u32), [ByAddress; 2]>,
}

/// Rule indices by address key.
type ByAddress = std::collections::BTreeMap<u64, Vec<usize>>;

/// Leading bits of each address the match's mask specifies.
fn addr_bits(m: &Match) -> (u32, u32) {
    (m.mask().nw_src.leading_ones(), m.mask().nw_dst.leading_ones())
}

impl LevelIndex {
    fn insert(&mut self, i: usize, m: &Match) {
        let g = self.groups.entry(addr_bits(m)).or_default();
        for (order, index) in g.iter_mut().enumerate() {
            index.entry(m.value().addr_key(order == 1)).or_default().push(i);
        }
    }

    /// Does any rule of the level overlap `m`? Candidates agree with `m` on the leading address
    /// bits both specify; each is then checked in full ([`Match::overlaps`]).
    fn any_overlap(&self, rules: &[&Rule], m: &Match) -> bool {
        let (ms, md) = addr_bits(m);
        self.groups.iter().any(|(&(gs, gd), g)| {
            // The leading address bits both specify.
            let common = FlowKey {
                nw_src: prefix_mask(ms.min(gs), 32),
                nw_dst: prefix_mask(md.min(gd), 32),
                ..FlowKey::default()
            };
            let (dst_first, range) = m.value().addr_range(&common);
            g[usize::from(dst_first)].range(range).flat_map(|(_, v)| v).any(|&j| rules[j].matches.overlaps(m))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::{classbench, ofctl};
    use crate::key::FlowKey;

    const SET: &str = "@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t1024 : 65535\t0x06/0xFF\t0x0000/0x0000\t\n\
@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000\t\n\
@0.0.0.0/0\t0.0.0.0/0\t5 : 9\t0 : 65535\t0x2f/0xFF\t0x0000/0x0000\t\n";

    #[test]
    fn converts_expands_and_skips() {
        let rules = classbench::parse_rules("s", SET).unwrap();
        let conv = classbench_to_openflow(&rules, &Actions::drop()).unwrap();
        assert_eq!(conv.converted, 2);
        assert_eq!(conv.skipped.len(), 1);
        assert_eq!(conv.skipped[0].0, RuleId(2));
        assert_eq!(conv.flows.len(), 6 + 1);
        assert_eq!(conv.expansion(), 5);
        assert!(conv.flows[..6].iter().all(|f| f.cookie == 0 && f.priority == 2));
        assert_eq!(conv.flows[6].priority, 1);
        let text = ofctl::write_flows(&conv.flows).unwrap();
        let back = ofctl::parse_flows("w", &text).unwrap();
        assert_eq!(back, conv.flows);
        let k = FlowKey::ipv4(0x0a00_0001, 7, 6, 1, 2000);
        let win = back.iter().filter(|f| f.matches.matches(&k)).min_by_key(|f| f.rank()).unwrap();
        assert_eq!(win.cookie, 0);
        let k = FlowKey::ipv4(0x0a00_0001, 7, 6, 1, 80);
        let win = back.iter().filter(|f| f.matches.matches(&k)).min_by_key(|f| f.rank()).unwrap();
        assert_eq!(win.cookie, 1);
    }

    /// The layering's definition, rule by rule (what the index must equal).
    fn assign_priorities_naive(rules: &[&Rule]) -> Vec<u32> {
        let n = rules.len();
        let mut prio = vec![0u32; n];
        let mut levels: Vec<Vec<usize>> = Vec::new();
        for i in (0..n).rev() {
            let m = &rules[i].matches;
            let above = levels
                .iter()
                .rposition(|level| level.iter().any(|&j| rules[j].matches.overlaps(m)))
                .map_or(0, |p| p + 1);
            if levels.len() == above {
                levels.push(Vec::new());
            }
            levels[above].push(i);
            prio[i] = above as u32 + 1;
        }
        prio
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 200, ..Default::default() })]
        /// The indexed layering equals the definition on random overlapping prefix rules (a few
        /// shared base addresses, every prefix length, port ranges, protocols).
        #[test]
        fn indexed_layering_equals_the_definition(
            specs in proptest::collection::vec(
                (0usize..4, 0u32..=32, 0usize..4, 0u32..=32, 0u16..3, 0u16..3, proptest::bool::ANY),
                1..120,
            ),
        ) {
            const BASES: [u32; 4] = [0x0a00_0000, 0x0a01_0200, 0xc0a8_0100, 0x8000_0000];
            let plen = |a: u32, l: u32| format!("{}/{l}", std::net::Ipv4Addr::from(if l == 0 { 0 } else { a & (u32::MAX << (32 - l)) }));
            let text: String = specs
                .iter()
                .map(|&(sb, sl, db, dl, sp, dp, tcp)| {
                    let ports = |k: u16| match k { 0 => "0 : 65535".to_string(), 1 => "80 : 80".into(), _ => "1024 : 65535".into() };
                    format!(
                        "@{}\t{}\t{}\t{}\t{}\t0x0000/0x0000\t\n",
                        plen(BASES[sb], sl),
                        plen(BASES[db], dl),
                        ports(sp),
                        ports(dp),
                        if tcp { "0x06/0xFF" } else { "0x00/0x00" }
                    )
                })
                .collect();
            let rules = classbench::parse_rules("p", &text).unwrap();
            let order: Vec<&Rule> = rules.iter().collect();
            proptest::prop_assert_eq!(assign_priorities(&order, 0).unwrap(), assign_priorities_naive(&order));
        }
    }

    #[test]
    fn layered_priorities_order_only_overlaps() {
        // 300 disjoint /32 rules, a /8 over half of them, then a catch-all: three layers.
        let mut text = String::new();
        for i in 0..300u32 {
            let a = std::net::Ipv4Addr::from(if i % 2 == 0 { 0x0a00_0000 + i } else { 0x0b00_0000 + i });
            text.push_str(&format!("@{a}/32\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000\t\n"));
        }
        text.push_str("@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000\t\n");
        text.push_str("@0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000\t\n");
        let rules = classbench::parse_rules("big", &text).unwrap();
        let order: Vec<&Rule> = rules.iter().collect();
        let prio = assign_priorities(&order, 10).unwrap();
        assert_eq!(prio[301], 1);
        assert_eq!(prio[300], 2);
        assert_eq!(prio[0], 3, "10.0.0.0/32 overlaps the /8");
        assert_eq!(prio[1], 2, "11.0.0.1/32 overlaps only the catch-all");
        // Same winners as first match, for a few probes.
        for k in [
            FlowKey::ipv4(0x0a00_0000, 1, 6, 1, 1),
            FlowKey::ipv4(0x0a00_0001, 1, 6, 1, 1),
            FlowKey::ipv4(0x0b00_0001, 1, 6, 1, 1),
            FlowKey::ipv4(0x0c00_0000, 1, 6, 1, 1),
        ] {
            let first = rules.iter().position(|r| r.matches.matches(&k)).unwrap();
            let by_prio = (0..rules.len())
                .filter(|&i| rules[i].matches.matches(&k))
                .max_by_key(|&i| (prio[i], std::cmp::Reverse(i)))
                .unwrap();
            assert_eq!(first, by_prio);
            let best = prio[first];
            assert_eq!((0..rules.len()).filter(|&i| rules[i].matches.matches(&k) && prio[i] == best).count(), 1);
        }
    }
}
