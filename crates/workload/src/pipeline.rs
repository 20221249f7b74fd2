//! A generated two-table OpenFlow pipeline (issue 36's benchmark and OVS oracle): table 0 an
//! ACL from a ClassBench seed, table 1 forwarding on destination prefixes from another seed,
//! and a trace whose headers pass table 0's rules and then reach table 1's prefixes.
//!
//! - **Table 0 (ACL).** The rules of [`crate::rules::generate`] on the ACL seed, converted to
//!   OpenFlow flows (port ranges expanded to prefixes, [`rqvs_flow::convert`]); each ClassBench
//!   rule is a *permit* (`goto_table:1`) or, for [`Params::drop_share`] of them, a *drop*. With
//!   [`Params::extras`], a share of the permits also write metadata (`write_metadata:0x1/0xff`),
//!   push a VLAN tag (`push_vlan:0x8100,set_field:4196->vlan_vid`) or put an output in the
//!   action set (`write_actions(output:P)`), each before their `goto_table:1`. No miss flow: a
//!   packet no ACL rule matches is dropped (OpenFlow 1.3's table miss).
//! - **Table 1 (forwarding).** Distinct `nw_dst` prefixes of rules generated from the
//!   forwarding seed (drawn with more rng seeds until [`Params::fwd`] are found or 16 rounds
//!   have passed), each `priority=LEN+1,ip,nw_dst=P/LEN,actions=output:PORT` (longest prefix
//!   first; the port a hash of the prefix, 2..=[`Params::ports`]+1, so port 1 is free to be the
//!   trace's in_port), and a miss flow `priority=0,actions=drop`. The seed's destinations and
//!   the ACL's rarely meet (ClassBench draws addresses per seed), so [`Params::overlap`] of the
//!   prefixes (default half) are moved under a random ACL flow's destination prefix — their
//!   leading bits, up to the shorter of the two lengths, replaced by the flow's: a prefix shorter
//!   than the flow's then holds the flow's destinations, a longer one lies inside them. Lengths
//!   and the rest of the bits stay the seed's; the other prefixes keep the seed's addresses.
//! - **The trace** ([`trace()`]): headers drawn inside table 0's flows by
//!   [`crate::trace::generate`] (the locality given), then each header's `nw_dst` moved inside a
//!   table-1 prefix that lies within the ACL flow's destination prefix when there is one (chosen
//!   at random), so that permitted packets spread over the forwarding table; otherwise it keeps
//!   its address (and reaches the longest forwarding prefix holding it, or the miss flow).
//!   [`TraceStats`] says what the packets reach, counted by a classifier per table.
//!
//! Not generated (yet): groups, `pop_vlan`, tables past 1, metadata matched in table 1.

use std::collections::HashSet;

use rqvs_flow::field::Field;
use rqvs_flow::key::ETH_TYPE_IP;
use rqvs_flow::rng::Rng;
use rqvs_flow::{Action, Actions, FlowKey, Match, Rule, RuleId};

use crate::rules;
use crate::seedfile::SeedFile;
use crate::trace::{self, Packet};

/// What to generate.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// ClassBench rules drawn for table 0 (duplicates removed, then port ranges expanded: the
    /// flow count differs).
    pub acl: usize,
    /// Forwarding prefixes wanted in table 1.
    pub fwd: usize,
    pub rng_seed: u64,
    /// Share of the ACL's rules that drop.
    pub drop_share: f64,
    /// Metadata, VLAN push and write_actions on a share of the permits.
    pub extras: bool,
    /// Output ports of the forwarding table: 2..=ports+1.
    pub ports: u32,
    /// Share of the forwarding prefixes moved under the ACL's destination prefixes (module docs).
    pub overlap: f64,
}

impl Params {
    pub fn new(acl: usize, fwd: usize, rng_seed: u64) -> Params {
        Params { acl, fwd, rng_seed, drop_share: 0.1, extras: false, ports: 8, overlap: 0.5 }
    }
}

/// A generated pipeline.
#[derive(Clone, Debug)]
pub struct Pipeline {
    /// Table 0's flows then table 1's (ids 0.. in that order).
    pub rules: Vec<Rule>,
    /// Flows of table 0.
    pub acl_flows: usize,
    /// ClassBench rules behind them, of which `drops` drop.
    pub acl_rules: usize,
    pub drops: usize,
    /// Permits with metadata, a pushed VLAN, an action set ([`Params::extras`]).
    pub metadata: usize,
    pub vlan: usize,
    pub action_set: usize,
    /// Table 1's prefixes (its miss flow not counted).
    pub fwd_prefixes: usize,
    /// ClassBench rules of the ACL that have no OpenFlow form (left out).
    pub skipped: usize,
}

impl Pipeline {
    /// Table 0's flows.
    pub fn acl(&self) -> &[Rule] {
        &self.rules[..self.acl_flows]
    }

    /// Table 1's flows (the miss flow last).
    pub fn fwd(&self) -> &[Rule] {
        &self.rules[self.acl_flows..]
    }
}

/// Most ClassBench rules of either table (each flow held in memory, twice while converting).
pub const MAX_RULES: usize = 1_000_000;

fn check(p: &Params) -> Result<(), String> {
    if p.acl == 0 || p.acl > MAX_RULES {
        return Err(format!("expected an ACL of 1..={MAX_RULES} rules, found {}", p.acl));
    }
    if p.fwd == 0 || p.fwd > MAX_RULES {
        return Err(format!("expected 1..={MAX_RULES} forwarding prefixes, found {}", p.fwd));
    }
    if !(0.0..=1.0).contains(&p.overlap) {
        return Err(format!("expected an overlap share in 0..=1, found {}", p.overlap));
    }
    if !(0.0..=1.0).contains(&p.drop_share) {
        return Err(format!("expected a drop share in 0..=1, found {}", p.drop_share));
    }
    if p.ports == 0 || p.ports > 0xff00 - 2 {
        return Err(format!("expected 1..={} forwarding ports, found {}", 0xff00 - 2, p.ports));
    }
    Ok(())
}

fn field(name: &str) -> &'static Field {
    Field::by_name(name).unwrap_or_else(|| panic!("rqvs_flow names the field {name}"))
}

/// What a permit does besides `goto_table:1` ([`Params::extras`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Drop,
    Permit,
    Metadata,
    Vlan,
    ActionSet,
}

fn actions(kind: Kind, port: u32) -> Actions {
    let goto = Action::GotoTable(1);
    Actions(match kind {
        Kind::Drop => vec![Action::Drop],
        Kind::Permit => vec![goto],
        Kind::Metadata => vec![Action::WriteMetadata { value: 1, mask: 0xff }, goto],
        Kind::Vlan => vec![
            Action::PushVlan(0x8100),
            Action::SetField { field: field("vlan_vid"), value: 0x1000 | 100, mask: 0x1fff },
            goto,
        ],
        Kind::ActionSet => vec![Action::WriteActions(vec![Action::Output(port)]), goto],
    })
}

/// The port of a forwarding prefix (a hash of it), 2..=ports+1.
fn port_of(value: u32, len: u8, ports: u32) -> u32 {
    let h = (u64::from(value) << 8 | u64::from(len)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
    2 + (h % u64::from(ports)) as u32
}

fn prefix_mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

/// Generates the pipeline (module docs) from the ACL seed and the forwarding seed.
pub fn generate(acl_seed: &SeedFile, fwd_seed: &SeedFile, p: &Params) -> Result<Pipeline, String> {
    check(p)?;
    let mut rng = Rng::new(p.rng_seed ^ 0x7069_7065);
    // Table 0.
    let acl = rules::generate(acl_seed, &rules::Params::new(p.acl, p.rng_seed))?;
    let conv = rqvs_flow::convert::classbench_to_openflow(&acl.rules, &Actions(vec![Action::GotoTable(1)]))?;
    let mut kinds = Vec::with_capacity(acl.rules.len());
    let (mut drops, mut metadata, mut vlan, mut action_set) = (0, 0, 0, 0);
    for _ in 0..acl.rules.len() {
        let k = if rng.chance(p.drop_share) {
            drops += 1;
            Kind::Drop
        } else if p.extras && rng.chance(0.3) {
            match rng.below(3) {
                0 => {
                    metadata += 1;
                    Kind::Metadata
                }
                1 => {
                    vlan += 1;
                    Kind::Vlan
                }
                _ => {
                    action_set += 1;
                    Kind::ActionSet
                }
            }
        } else {
            Kind::Permit
        };
        kinds.push(k);
    }
    let mut out: Vec<Rule> = Vec::with_capacity(conv.flows.len() + p.fwd + 1);
    for f in conv.flows {
        // The flow's cookie is its ClassBench rule's id (the flows of one rule share a kind).
        let kind = kinds[f.cookie as usize];
        let port = port_of(f.cookie as u32, 0, p.ports);
        let id = out.len() as u32;
        let mut r = Rule::new(id, f.priority, f.matches, actions(kind, port));
        r.cookie = f.cookie;
        out.push(r);
    }
    let acl_flows = out.len();
    // Table 1: distinct destination prefixes of the forwarding seed's rules.
    let mut seen: HashSet<(u32, u8)> = HashSet::new();
    let mut prefixes: Vec<(u32, u8)> = Vec::new();
    for round in 0..16u64 {
        if prefixes.len() >= p.fwd {
            break;
        }
        let want = (p.fwd - prefixes.len()).max(64) * 2;
        let g =
            rules::generate(fwd_seed, &rules::Params::new(want.min(MAX_RULES), p.rng_seed.wrapping_add(1 + round)))?;
        for r in &g.rules {
            let len = r.matches.mask().nw_dst.count_ones() as u8;
            let mut v = r.matches.value().nw_dst & prefix_mask(len);
            if rng.chance(p.overlap) {
                // Moved under a random ACL flow's destination: its leading bits, up to the
                // shorter of the two lengths, replaced by the flow's.
                let f = &out[rng.below(acl_flows as u64) as usize];
                let (av, am) = (f.matches.value().nw_dst, f.matches.mask().nw_dst);
                let keep = prefix_mask(len) & am;
                v = (av & keep) | (v & !keep);
            }
            if prefixes.len() < p.fwd && seen.insert((v, len)) {
                prefixes.push((v, len));
            }
        }
    }
    for &(v, len) in &prefixes {
        let (mut val, mut mask) = (FlowKey::ZERO, FlowKey::ZERO);
        val.dl_type = ETH_TYPE_IP;
        mask.dl_type = u16::MAX;
        val.nw_dst = v;
        mask.nw_dst = prefix_mask(len);
        let id = out.len() as u32;
        let mut r = Rule::new(
            id,
            u32::from(len) + 1,
            Match::from_masked(val, mask),
            Actions(vec![Action::Output(port_of(v, len, p.ports))]),
        );
        r.table = 1;
        out.push(r);
    }
    let id = out.len() as u32;
    let mut miss = Rule::new(id, 0, Match::from_masked(FlowKey::ZERO, FlowKey::ZERO), Actions::drop());
    miss.table = 1;
    out.push(miss);
    Ok(Pipeline {
        rules: out,
        acl_flows,
        acl_rules: acl.rules.len(),
        drops,
        metadata,
        vlan,
        action_set,
        fwd_prefixes: prefixes.len(),
        skipped: conv.skipped.len(),
    })
}

/// What a pipeline trace's packets reach.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceStats {
    /// Table 0's statistics (flows, locality) of the headers as drawn.
    pub acl: trace::TraceStats,
    /// Packets whose `nw_dst` was moved into a forwarding prefix.
    pub retargeted: usize,
    /// Packets table 0 drops (a drop rule or no rule).
    pub dropped: usize,
    /// Packets that reach table 1, and of those the ones its miss flow takes.
    pub forwarded: usize,
    pub fwd_miss: usize,
    /// Distinct rules of table 0 and of table 1 the packets reach.
    pub acl_hit: usize,
    pub fwd_hit: usize,
}

/// Draws `params.packets` headers for the pipeline (module docs). The packets' `winner` is
/// table 0's winner; `intended` the ACL flow the header was drawn in.
pub fn trace(pl: &Pipeline, params: &trace::Params) -> Result<(Vec<Packet>, TraceStats), String> {
    let (mut packets, acl_stats) = trace::generate(pl.acl(), params)?;
    let mut rng = Rng::new(params.rng_seed ^ 0x6677_6421);
    // Forwarding prefixes sorted by address, for the ones inside a destination prefix.
    let fwd = pl.fwd();
    let mut sorted: Vec<(u32, u8)> = fwd[..fwd.len() - 1]
        .iter()
        .map(|r| (r.matches.value().nw_dst, r.matches.mask().nw_dst.count_ones() as u8))
        .collect();
    sorted.sort_unstable();
    // One choice per drawn header (a flow keeps its packets together).
    let mut moved: std::collections::HashMap<FlowKey, u32> = std::collections::HashMap::new();
    let mut retargeted = 0;
    for pk in &mut packets {
        let r = &pl.rules[pk.intended.0 as usize];
        let (dv, dm) = (r.matches.value().nw_dst, r.matches.mask().nw_dst);
        let dst = *moved.entry(pk.key).or_insert_with(|| {
            let (lo, hi) = (dv & dm, (dv & dm) | !dm);
            let from = sorted.partition_point(|&(v, _)| v < lo);
            let to = sorted.partition_point(|&(v, _)| v <= hi);
            let inside: Vec<(u32, u8)> =
                sorted[from..to].iter().copied().filter(|&(_, l)| prefix_mask(l) & dm == dm).collect();
            if inside.is_empty() {
                return pk.key.nw_dst;
            }
            let (v, l) = inside[rng.below(inside.len() as u64) as usize];
            let m = prefix_mask(l);
            v | (rng.next_u64() as u32 & !m)
        });
        if dst != pk.key.nw_dst {
            retargeted += 1;
            pk.key.nw_dst = dst;
        }
    }
    let keys: Vec<FlowKey> = packets.iter().map(|p| p.key).collect();
    let acl_winners = trace::winners(pl.acl(), &keys)?;
    let fwd_winners = trace::winners(fwd, &keys)?;
    let mut st = TraceStats { acl: acl_stats, retargeted, ..TraceStats::default() };
    let (mut acl_hit, mut fwd_hit): (HashSet<RuleId>, HashSet<RuleId>) = Default::default();
    let miss_id = fwd[fwd.len() - 1].id;
    for (i, pk) in packets.iter_mut().enumerate() {
        pk.winner = acl_winners[i];
        let permit = acl_winners[i]
            .map(|id| &pl.rules[id.0 as usize])
            .is_some_and(|r| r.actions.0.iter().any(|a| matches!(a, Action::GotoTable(1))));
        if let Some(id) = acl_winners[i] {
            acl_hit.insert(id);
        }
        if !permit {
            st.dropped += 1;
            continue;
        }
        st.forwarded += 1;
        if let Some(id) = fwd_winners[i] {
            fwd_hit.insert(id);
            st.fwd_miss += usize::from(id == miss_id);
        }
    }
    st.acl_hit = acl_hit.len();
    st.fwd_hit = fwd_hit.len();
    Ok((packets, st))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seedfile;

    fn seed(name: &str) -> SeedFile {
        let (n, text) = seedfile::read(name).unwrap();
        seedfile::parse(&n, &text).unwrap()
    }

    #[test]
    fn two_tables_with_permits_drops_and_a_miss_flow() {
        let p = Params { extras: true, ..Params::new(500, 300, 3) };
        let pl = generate(&seed("acl1"), &seed("ipc1"), &p).unwrap();
        assert!(pl.acl().iter().all(|r| r.table == 0));
        assert!(pl.fwd().iter().all(|r| r.table == 1));
        assert_eq!(pl.fwd_prefixes, 300);
        assert_eq!(pl.fwd().len(), 301);
        let miss = pl.fwd().last().unwrap();
        assert_eq!((miss.priority, miss.matches.mask()), (0, &FlowKey::ZERO));
        assert!(pl.drops > 0 && pl.drops < pl.acl_rules / 4, "{} drops of {}", pl.drops, pl.acl_rules);
        assert!(pl.metadata > 0 && pl.vlan > 0 && pl.action_set > 0);
        // Every forwarding rule outputs to 2..=9, LPM priorities.
        for r in &pl.fwd()[..300] {
            let len = r.matches.mask().nw_dst.count_ones();
            assert_eq!(r.priority, len + 1);
            assert!(matches!(r.actions.0[..], [Action::Output(2..=9)]));
        }
        // The ofctl text parses back to the same two tables.
        let text = rqvs_flow::formats::ofctl::write_flows(&pl.rules).unwrap();
        let back = rqvs_flow::formats::ofctl::parse_flows("p.flows", &text).unwrap();
        assert_eq!(back.len(), pl.rules.len());
        assert_eq!(back.iter().filter(|r| r.table == 1).count(), 301);
        for (a, b) in back.iter().zip(&pl.rules) {
            assert_eq!((a.table, a.priority, &a.matches, &a.actions), (b.table, b.priority, &b.matches, &b.actions));
        }
    }

    #[test]
    fn the_trace_reaches_many_forwarding_prefixes() {
        let pl = generate(&seed("acl1"), &seed("ipc1"), &Params::new(1000, 1000, 1)).unwrap();
        let (packets, st) = trace(&pl, &trace::Params::new(5000, trace::Locality::Uniform, 2)).unwrap();
        assert_eq!(packets.len(), 5000);
        assert_eq!(st.dropped + st.forwarded, 5000);
        assert!(st.forwarded > 2500, "{st:?}");
        assert!(st.retargeted > 0 && st.fwd_hit > 50, "{st:?}");
        // Every packet is still inside the ACL flow it was drawn in.
        for p in &packets {
            assert!(pl.rules[p.intended.0 as usize].matches.matches(&p.key));
        }
        let again = trace(&pl, &trace::Params::new(5000, trace::Locality::Uniform, 2)).unwrap();
        assert_eq!(again.0, packets);
    }
}
