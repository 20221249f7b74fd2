//! OpenFlow rule-sets the ClassBench-ng way, from a seed with an `-openflow` section
//! ([`crate::ofseed`]; the embedded `of1` and `of2`).
//!
//! The method (ClassBench-ng's generator, re-implemented from its description and sources):
//!
//! 1. The **5-tuple part** comes from the seed's classic sections, with rqvs' ClassBench generator
//!    ([`crate::rules::generate`], duplicates removed there as always, order kept).
//! 2. Each classic rule then takes a **field combination** drawn from `rule_distribution` (weights:
//!    the counts) among the combinations *compatible* with it, as ClassBench-ng's rejection loop
//!    does: a combination lists `nw_proto` exactly when the classic rule has a protocol, `tp_src`
//!    exactly when its source port is not the whole range, `tp_dst` likewise. The classic fields
//!    the combination does not list are dropped (an `nw_dst`-only rule keeps only its destination
//!    prefix); classic TCP flags are dropped too (not a ClassBench-ng attribute).
//! 3. Values for the other listed fields are drawn from the `-openflow` section:
//!    `in_port` from its values by count; `dl_src`/`dl_dst` an OUI by count and a uniformly random
//!    NIC part (3 bytes; ClassBench-ng draws each byte in 0..254, rqvs in 0..=255), matched
//!    exactly; `eth_type` by count; `dl_vlan` the i-th of ClassBench-ng's VLAN pool (10, 20, …,
//!    4090, then the other ids) with i uniform below `unique_vlan_ids_count`; `dl_pcp` uniform
//!    0..7 (with "a tag is present"); `nw_tos` a DSCP of IANA's pool 1 (CS0–CS7, AF11–AF43, EF),
//!    written as `ip_dscp` (ClassBench-ng writes the DSCP into `nw_tos` directly, which OpenFlow
//!    rejects for values not a multiple of 4).
//! 4. **Prerequisites as OVS enforces them** (ClassBench-ng's output ignores them, since its
//!    analyser counted the `ip`/`tcp` shorthands as no field): any IPv4 field (addresses,
//!    protocol, ToS, ports) makes `dl_type=0x0800` — also when the combination lists `eth_type`,
//!    whose drawn value is then 0x0800 whatever the section's mix; ports without `nw_proto` (the
//!    combinations such as `nw_dst,tp_dst,tp_src`, drawn for classic rules of protocol "any") get
//!    TCP or UDP, drawn with the weights the seed's `-prots` gives them. These rules are counted
//!    ([`OpenFlowSet::protocols_added`]).
//!
//! 5. **Duplicates**: the classic generator's duplicate removal is deferred (most classic
//!    duplicates become distinct once MACs are drawn: of1's classic part alone repeats 80% of
//!    its 5-tuples at 100K); a rule whose final match equals an earlier rule's is removed, so the
//!    set can be smaller than asked, as with ClassBench.
//! 6. **Order**: most specific first, by ClassBench's scope extended to the OpenFlow fields
//!    ([`scope`]: the wildcarded bits), then by mask (rules of one shape together), the classic
//!    order among equals. ClassBench-ng keeps the
//!    classic order, which after fields are dropped is unrelated to the final matches: a
//!    `dl_dst`-only rule would sit above a more specific one, and chains of alternately
//!    overlapping rules (`dl_dst`-only, `dl_src`-only, `dl_dst`-only, …: equal scope, different
//!    fields) would grow with the set — 5,232 layers at 100K, more than OpenFlow's 65,535
//!    priorities could order at 1M.
//!
//! Every rule gets `output:(index + 1)` as its action, so an action names its rule. Rules stay in
//! the classic generator's order (most specific first); [`to_flows`] gives them OpenFlow's 16-bit
//! priorities (distinct, in that order, up to 65,534 rules; layered by overlap above, as
//! [`rqvs_flow::convert`] does) and expands port ranges to prefixes.
//!
//! Not generated, stated: `empty_rules_count` (rules matching everything) is not used — nor is it
//! by ClassBench-ng's generator: in one table, every such rule but the first would be dead.
//! Combinations whose value space is small saturate: of1's `in_port`-only rules can take only
//! the seed's 141 ports, so at 100K rules their share falls below the seed's (duplicates removed,
//! [`OpenFlowSet::duplicate_matches`]).

use hashbrown::HashSet;
use rqvs_flow::key::{ETH_TYPE_IP, IPPROTO_TCP, IPPROTO_UDP, VLAN_CFI, VLAN_PCP_MASK, VLAN_VID_MASK};
use rqvs_flow::prefix::prefix_mask;
use rqvs_flow::{Actions, FlowKey, Match, PortRange, Rule};

use crate::ofseed::{Attr, Combination, OpenFlowSection};
use crate::rng::Rng;
use crate::rules::{self, Cdf};
use crate::seedfile::{SeedFile, PORT_PAIR_CLASSES};

/// IANA's DSCP pool 1 codepoints: CS0–CS7, AF11–AF43, EF.
pub const DSCP_POOL: [u8; 21] = [0, 8, 16, 24, 32, 40, 48, 56, 10, 12, 14, 18, 20, 22, 26, 28, 30, 34, 36, 38, 46];

/// The label of the OpenFlow part's random stream ([`Rng::fork`]), so the classic part draws
/// exactly what `gen rules` draws for the same seed.
const RNG_LABEL: u64 = 0x6f66_7365_6564; // "ofseed"

/// A generated OpenFlow rule-set.
#[derive(Clone, Debug)]
pub struct OpenFlowSet {
    /// The rules in the generator's order: rule `i` has id `i`, priority `n − i` and action
    /// `output:(i + 1)`; matches may hold port ranges ([`to_flows`] expands them).
    pub rules: Vec<Rule>,
    /// The field combination each rule was given.
    pub combinations: Vec<Combination>,
    /// Rules drawn (= the requested count).
    pub drawn: usize,
    /// Of them, classic 5-tuples equal to an earlier one (what the classic generator removes;
    /// here they are kept until their OpenFlow fields are drawn).
    pub classic_duplicates: usize,
    /// Rules removed because their match equalled an earlier rule's (`drawn` − this = rules).
    pub duplicate_matches: usize,
    /// Rules given TCP or UDP because their combination had ports but no `nw_proto`.
    pub protocols_added: usize,
}

/// The compatibility class of a classic rule: (protocol given, source port given, destination
/// port given), as an index 0..8.
fn class_of(proto: bool, sport: bool, dport: bool) -> usize {
    usize::from(proto) << 2 | usize::from(sport) << 1 | usize::from(dport)
}

fn class_of_combination(c: Combination) -> usize {
    class_of(c.has(Attr::NwProto), c.has(Attr::TpSrc), c.has(Attr::TpDst))
}

fn class_label(class: usize) -> String {
    let part = |bit: usize, yes: &str, no: &str| if class & bit != 0 { yes.to_string() } else { no.to_string() };
    format!(
        "{}, {}, {}",
        part(4, "a protocol", "protocol any"),
        part(2, "a source port", "any source port"),
        part(1, "a destination port", "any destination port")
    )
}

/// Generates an OpenFlow rule-set (module docs).
pub fn generate(seed: &SeedFile, of: &OpenFlowSection, params: &rules::Params) -> Result<OpenFlowSet, String> {
    // Combinations by compatibility class.
    let mut by_class: Vec<(Vec<Combination>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); 8];
    for c in &of.rule_distribution {
        let k = class_of_combination(c.combination);
        by_class[k].0.push(c.combination);
        by_class[k].1.push(c.count as f64);
    }
    // Every class the classic part can draw must have a combination.
    for p in &seed.protocols {
        if p.prob <= 0.0 {
            continue;
        }
        for (ci, &pp) in p.port_pairs.iter().enumerate() {
            let name = PORT_PAIR_CLASSES[ci];
            let k = class_of(p.proto != 0, &name[..2] != "wc", &name[3..] != "wc");
            if pp > 0.0 && by_class[k].0.is_empty() {
                return Err(format!(
                    "{}:{}: protocol {} with port-pair class {name} makes rules with {}, but no combination of rule_distribution (line {}) is compatible with them",
                    seed.name,
                    p.line,
                    p.proto,
                    class_label(k),
                    of.line
                ));
            }
        }
    }
    let cdfs: Vec<Option<Cdf>> =
        by_class.iter().map(|(c, w)| (!c.is_empty()).then(|| Cdf::new(w.iter().copied()))).collect();
    let classic = rules::generate_with_duplicates(seed, params)?;
    let mut rng = Rng::fork(params.rng_seed, RNG_LABEL);
    let pool = |v: &[(u32, u64)]| (v.iter().map(|x| x.0).collect::<Vec<_>>(), Cdf::new(v.iter().map(|x| x.1 as f64)));
    let in_ports = (!of.in_port.is_empty()).then(|| pool(&of.in_port));
    let widen = |v: &[(u16, u64)]| v.iter().map(|&(a, n)| (u32::from(a), n)).collect::<Vec<_>>();
    let eth_types = (!of.eth_type.is_empty()).then(|| pool(&widen(&of.eth_type)));
    let oui = |v: &[([u8; 3], u64)]| {
        let as_u32: Vec<(u32, u64)> =
            v.iter().map(|&(o, n)| (u32::from(o[0]) << 16 | u32::from(o[1]) << 8 | u32::from(o[2]), n)).collect();
        (!as_u32.is_empty()).then(|| pool(&as_u32))
    };
    let (dl_srcs, dl_dsts) = (oui(&of.dl_src), oui(&of.dl_dst));
    // TCP/UDP for ports without a protocol, weighted as the seed's -prots weighs them.
    let weight = |proto: u8| seed.protocols.iter().filter(|p| p.proto == proto).map(|p| p.prob).sum::<f64>();
    let (wt, wu) = (weight(IPPROTO_TCP), weight(IPPROTO_UDP));
    let tcp_share = if wt + wu > 0.0 { wt / (wt + wu) } else { 1.0 };

    let draw = |rng: &mut Rng, p: &Option<(Vec<u32>, Cdf)>| p.as_ref().map(|(v, c)| v[c.pick(rng.f64())]);
    let mac = |rng: &mut Rng, oui: u32| -> [u8; 6] {
        let nic = rng.next_u32();
        [(oui >> 16) as u8, (oui >> 8) as u8, oui as u8, (nic >> 16) as u8, (nic >> 8) as u8, nic as u8]
    };
    let n = classic.rules.len();
    let mut out: Vec<Match> = Vec::with_capacity(n);
    let mut combinations = Vec::with_capacity(n);
    let mut seen: HashSet<Match> = HashSet::with_capacity(n);
    let (mut duplicate_matches, mut protocols_added) = (0, 0);
    for (i, f) in classic.fields.iter().enumerate() {
        let has_proto = f.proto.1 != 0;
        let k = class_of(has_proto, !f.sport.is_any(), !f.dport.is_any());
        let Some(cdf) = &cdfs[k] else {
            return Err(format!(
                "{}: generated rule {i} has {}, but no combination of rule_distribution (line {}) is compatible with it",
                seed.name,
                class_label(k),
                of.line
            ));
        };
        let comb = by_class[k].0[cdf.pick(rng.f64())];
        let (mut v, mut m) = (FlowKey::ZERO, FlowKey::ZERO);
        let (mut sport, mut dport) = (PortRange::ANY, PortRange::ANY);
        if comb.has(Attr::InPort) {
            v.in_port = draw(&mut rng, &in_ports).ok_or("in_port has no values")?;
            m.in_port = u32::MAX;
        }
        if comb.has(Attr::DlSrc) {
            let oui = draw(&mut rng, &dl_srcs).ok_or("dl_src has no OUIs")?;
            v.dl_src = mac(&mut rng, oui);
            m.dl_src = [0xff; 6];
        }
        if comb.has(Attr::DlDst) {
            let oui = draw(&mut rng, &dl_dsts).ok_or("dl_dst has no OUIs")?;
            v.dl_dst = mac(&mut rng, oui);
            m.dl_dst = [0xff; 6];
        }
        if comb.has(Attr::EthType) && !comb.has_ip() {
            v.dl_type = draw(&mut rng, &eth_types).ok_or("eth_type has no values")? as u16;
            m.dl_type = u16::MAX;
        }
        if comb.has(Attr::DlVlan) {
            let idx = rng.below(of.unique_vlan_ids_count) as u16;
            v.vlan_tci |= VLAN_CFI | vlan_pool(idx);
            m.vlan_tci |= VLAN_CFI | VLAN_VID_MASK;
        }
        if comb.has(Attr::DlPcp) {
            v.vlan_tci |= VLAN_CFI | (rng.below(8) as u16) << 13;
            m.vlan_tci |= VLAN_CFI | VLAN_PCP_MASK;
        }
        if comb.has_ip() {
            v.dl_type = ETH_TYPE_IP;
            m.dl_type = u16::MAX;
        }
        if comb.has(Attr::NwSrc) {
            m.nw_src = prefix_mask(u32::from(f.src.1), 32);
            v.nw_src = f.src.0 & m.nw_src;
        }
        if comb.has(Attr::NwDst) {
            m.nw_dst = prefix_mask(u32::from(f.dst.1), 32);
            v.nw_dst = f.dst.0 & m.nw_dst;
        }
        if comb.has(Attr::NwTos) {
            v.nw_tos = DSCP_POOL[rng.index(DSCP_POOL.len())] << 2;
            m.nw_tos = 0xfc;
        }
        if comb.has(Attr::NwProto) {
            v.nw_proto = f.proto.0;
            m.nw_proto = 0xff;
        }
        if comb.has(Attr::TpSrc) {
            sport = f.sport;
        }
        if comb.has(Attr::TpDst) {
            dport = f.dport;
        }
        if (comb.has(Attr::TpSrc) || comb.has(Attr::TpDst)) && !comb.has(Attr::NwProto) {
            v.nw_proto = if rng.chance(tcp_share) { IPPROTO_TCP } else { IPPROTO_UDP };
            m.nw_proto = 0xff;
            protocols_added += 1;
        }
        let matches = Match::new(v, m, sport, dport).map_err(|e| format!("{}: generated rule {i}: {e}", seed.name))?;
        if !seen.insert(matches) {
            duplicate_matches += 1;
            continue;
        }
        out.push(matches);
        combinations.push(comb);
    }
    // Most specific first (the classic order was the 5-tuple's, before fields were dropped).
    let mut order: Vec<usize> = (0..out.len()).collect();
    order.sort_by_cached_key(|&i| (scope(&out[i]), *out[i].mask(), i));
    let n = out.len();
    let combinations: Vec<Combination> = order.iter().map(|&i| combinations[i]).collect();
    let out: Vec<Rule> = order
        .iter()
        .enumerate()
        .map(|(pos, &i)| Rule::new(pos as u32, (n - pos) as u32, out[i], Actions::output(pos as u32 + 1)))
        .collect();
    Ok(OpenFlowSet {
        rules: out,
        combinations,
        drawn: classic.drawn,
        classic_duplicates: classic.duplicates,
        duplicate_matches,
        protocols_added,
    })
}

/// ClassBench's scope extended to the OpenFlow fields: the bits a match leaves wildcarded, over
/// `in_port`, the MACs, `dl_type`, the VLAN TCI, the IPv4 addresses, protocol and ToS, plus
/// log2 of each port range's width.
pub fn scope(m: &Match) -> u32 {
    let k = m.mask();
    let zeros = |bits: u32, ones: u32| bits - ones;
    let mac = |x: [u8; 6]| x.iter().map(|b| b.count_ones()).sum::<u32>();
    let port = |r: PortRange| 31 - r.len().leading_zeros();
    zeros(32, k.in_port.count_ones())
        + zeros(48, mac(k.dl_src))
        + zeros(48, mac(k.dl_dst))
        + zeros(16, k.dl_type.count_ones())
        + zeros(16, k.vlan_tci.count_ones())
        + zeros(32, k.nw_src.count_ones())
        + zeros(32, k.nw_dst.count_ones())
        + zeros(8, k.nw_proto.count_ones())
        + zeros(8, k.nw_tos.count_ones())
        + port(m.tp_src_range())
        + port(m.tp_dst_range())
}

/// ClassBench-ng's VLAN pool, entry `i` (0-based): 10, 20, …, 4090, then the ids 1..4094 that
/// are not multiples of 10, in order.
pub fn vlan_pool(i: u16) -> u16 {
    if i < 409 {
        return (i + 1) * 10;
    }
    let j = i - 409; // the j-th id (0-based) that is not a multiple of 10: 9 per ten.
    (j / 9) * 10 + (j % 9) + 1
}

/// The OpenFlow table of generated rules (written with [`rqvs_flow::formats::ofctl`]): 16-bit
/// priorities, port ranges expanded to prefixes, `cookie` = the rule's id, each flow with its
/// rule's action. Rules OpenFlow cannot express (ports on a protocol other than TCP, UDP or
/// SCTP, ICMP type/code ranges) are left out and returned with the reason.
///
/// Priorities: up to 65,534 rules, `n − position` (distinct, in the generator's order). More
/// rules get *layered* priorities, as [`rqvs_flow::convert`] gives them — a rule one above the
/// highest priority of any later rule it overlaps — found through an index that also keys on
/// the exact `in_port`/`dl_src`/`dl_dst` a rule matches ([`layered_priorities`]): the address
/// index of `convert` alone degrades to a scan for rules without addresses, 8% of of1, which
/// made 1M rules take more than 10 minutes.
pub fn to_flows(rules: &[Rule]) -> Result<rqvs_flow::convert::Conversion, String> {
    use rqvs_flow::convert::{openflow_obstacle, Conversion, MAX_FLOWS};
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
    let priorities = if kept.len() < 0xffff {
        (0..kept.len()).map(|i| (kept.len() - i) as u32).collect()
    } else {
        layered_priorities(&kept)?
    };
    for (r, &prio) in kept.iter().zip(&priorities) {
        conv.converted += 1;
        conv.max_priority = conv.max_priority.max(prio);
        let expanded = r.matches.expand_port_ranges();
        if conv.flows.len() + expanded.len() > MAX_FLOWS {
            return Err(format!(
                "port-range expansion makes more than the limit of {MAX_FLOWS} OpenFlow flows (at rule {} of {})",
                conv.converted,
                kept.len()
            ));
        }
        for m in expanded {
            let mut flow = Rule::new(conv.flows.len() as u32, prio, m, r.actions.clone());
            flow.cookie = u64::from(r.id.0);
            conv.flows.push(flow);
        }
    }
    Ok(conv)
}

/// The exact L2 fields of a match the index keys on: `in_port`, `dl_src`, `dl_dst`, as bits 0..3.
fn l2_fields(m: &Match) -> u8 {
    let k = m.mask();
    u8::from(k.in_port == u32::MAX) | u8::from(k.dl_src == [0xff; 6]) << 1 | u8::from(k.dl_dst == [0xff; 6]) << 2
}

/// The values of `fields` ([`l2_fields`] bits) of a match; the others zero.
fn l2_key(m: &Match, fields: u8) -> (u32, [u8; 6], [u8; 6]) {
    let v = m.value();
    (
        if fields & 1 != 0 { v.in_port } else { 0 },
        if fields & 2 != 0 { v.dl_src } else { [0; 6] },
        if fields & 4 != 0 { v.dl_dst } else { [0; 6] },
    )
}

/// Rules of one priority level with the same exact L2 fields and address prefix lengths.
#[derive(Default)]
struct Group {
    /// By the values of the group's L2 fields.
    by_l2: hashbrown::HashMap<(u32, [u8; 6], [u8; 6]), Vec<usize>>,
    /// By address key ([`FlowKey::addr_key`]), source first and destination first.
    by_addr: [std::collections::BTreeMap<u64, Vec<usize>>; 2],
}

/// (L2 fields, source prefix bits, destination prefix bits) → group.
#[derive(Default)]
struct Level(hashbrown::HashMap<(u8, u32, u32), Group>);

fn addr_bits(m: &Match) -> (u32, u32) {
    (m.mask().nw_src.leading_ones(), m.mask().nw_dst.leading_ones())
}

impl Level {
    fn insert(&mut self, i: usize, m: &Match) {
        let fields = l2_fields(m);
        let (s, d) = addr_bits(m);
        let g = self.0.entry((fields, s, d)).or_default();
        g.by_l2.entry(l2_key(m, fields)).or_default().push(i);
        for (order, index) in g.by_addr.iter_mut().enumerate() {
            index.entry(m.value().addr_key(order == 1)).or_default().push(i);
        }
    }

    /// Does a rule of the level overlap `m`? A group whose L2 fields `m` also matches is looked
    /// up by their values; any other by the leading address bits both specify. Candidates are
    /// then checked in full ([`Match::overlaps`]).
    fn any_overlap(&self, rules: &[&Rule], m: &Match) -> bool {
        let (fields, (ms, md)) = (l2_fields(m), addr_bits(m));
        self.0.iter().any(|(&(gf, gs, gd), g)| {
            if gf != 0 && gf & !fields == 0 {
                return g.by_l2.get(&l2_key(m, gf)).is_some_and(|v| v.iter().any(|&j| rules[j].matches.overlaps(m)));
            }
            let common =
                FlowKey { nw_src: prefix_mask(ms.min(gs), 32), nw_dst: prefix_mask(md.min(gd), 32), ..FlowKey::ZERO };
            let (dst_first, range) = m.value().addr_range(&common);
            g.by_addr[usize::from(dst_first)].range(range).flat_map(|(_, v)| v).any(|&j| rules[j].matches.overlaps(m))
        })
    }
}

/// Layered 16-bit priorities for rules in winner order (see [`to_flows`]): the last rule gets 1,
/// each rule one more than the highest priority of any later rule it overlaps. An error when
/// a chain of more than 65,534 mutually ordered overlapping rules exists.
pub fn layered_priorities(rules: &[&Rule]) -> Result<Vec<u32>, String> {
    let n = rules.len();
    let mut prio = vec![0u32; n];
    let mut levels: Vec<Level> = Vec::new();
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
            levels.push(Level::default());
        }
        levels[above].insert(i, m);
        prio[i] = above as u32 + 1;
    }
    Ok(prio)
}

/// The statistics generated OpenFlow sets are compared with their seed on.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpenFlowStats {
    pub rules: usize,
    /// `(combination, rules)`, most frequent first.
    pub combinations: Vec<(Combination, usize)>,
    /// `(OUI, rules)` of exact `dl_src` / `dl_dst` matches, most frequent first.
    pub dl_src_ouis: Vec<([u8; 3], usize)>,
    pub dl_dst_ouis: Vec<([u8; 3], usize)>,
    /// `(in_port, rules)`, most frequent first.
    pub in_ports: Vec<(u32, usize)>,
    /// Distinct VLAN ids matched.
    pub vlan_ids: usize,
}

fn ranked<K: Ord + Copy + std::hash::Hash>(it: impl Iterator<Item = K>) -> Vec<(K, usize)> {
    let mut m: hashbrown::HashMap<K, usize> = hashbrown::HashMap::new();
    for k in it {
        *m.entry(k).or_default() += 1;
    }
    let mut v: Vec<(K, usize)> = m.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

impl OpenFlowStats {
    /// The statistics of a generated set.
    pub fn of(set: &OpenFlowSet) -> OpenFlowStats {
        let exact = |rules: &[Rule], pick: fn(&FlowKey) -> [u8; 6]| -> Vec<([u8; 3], usize)> {
            ranked(rules.iter().filter(|r| pick(r.matches.mask()) == [0xff; 6]).map(|r| {
                let m = pick(r.matches.value());
                [m[0], m[1], m[2]]
            }))
        };
        let r = &set.rules;
        OpenFlowStats {
            rules: r.len(),
            combinations: ranked(set.combinations.iter().copied()),
            dl_src_ouis: exact(r, |k| k.dl_src),
            dl_dst_ouis: exact(r, |k| k.dl_dst),
            in_ports: ranked(r.iter().filter(|r| r.matches.mask().in_port != 0).map(|r| r.matches.value().in_port)),
            vlan_ids: r
                .iter()
                .filter(|r| r.matches.mask().vlan_tci & VLAN_VID_MASK != 0)
                .map(|r| r.matches.value().vlan_tci & VLAN_VID_MASK)
                .collect::<HashSet<_>>()
                .len(),
        }
    }

    /// The largest absolute difference between a combination's share here and in the seed's
    /// `rule_distribution` (total variation would halve the sum; this is the worst single one),
    /// with the combination.
    pub fn worst_combination_share_gap(&self, of: &OpenFlowSection) -> (f64, Combination) {
        let total: u64 = of.rule_distribution.iter().map(|c| c.count).sum();
        let mut worst = (0.0, Combination::default());
        for c in &of.rule_distribution {
            let want = c.count as f64 / total as f64;
            let got = self.combinations.iter().find(|x| x.0 == c.combination).map_or(0, |x| x.1) as f64
                / self.rules.max(1) as f64;
            if (got - want).abs() > worst.0 {
                worst = ((got - want).abs(), c.combination);
            }
        }
        worst
    }
}

/// Formats an OUI as `fa:16:3e`.
pub fn fmt_oui(o: [u8; 3]) -> String {
    format!("{:02x}:{:02x}:{:02x}", o[0], o[1], o[2])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The indexed layering equals its definition (each rule one above the highest later rule
    /// it overlaps), checked pair by pair on an of2 set whose rules overlap in every way.
    #[test]
    fn layered_priorities_follow_the_definition() {
        let (file, text) = crate::seedfile::read("of2").unwrap();
        let seed = crate::seedfile::parse(&file, &text).unwrap();
        let of = crate::ofseed::parse(&file, &text).unwrap().unwrap();
        for rng in [1, 2] {
            let set = generate(&seed, &of, &rules::Params::new(1500, rng)).unwrap();
            let order: Vec<&Rule> = set.rules.iter().collect();
            let prio = layered_priorities(&order).unwrap();
            let mut overlapping = 0;
            for i in 0..order.len() {
                let above = (i + 1..order.len())
                    .filter(|&j| order[i].matches.overlaps(&order[j].matches))
                    .map(|j| prio[j])
                    .max()
                    .unwrap_or(0);
                overlapping += usize::from(above > 0);
                assert_eq!(prio[i], above + 1, "rule {i}");
            }
            assert!(overlapping > 100, "the set must test overlaps: {overlapping}");
            assert!(*prio.iter().max().unwrap() < 200, "layers stay few");
        }
    }

    #[test]
    fn vlan_pool_is_classbench_ngs() {
        assert_eq!((vlan_pool(0), vlan_pool(1), vlan_pool(408)), (10, 20, 4090));
        assert_eq!((vlan_pool(409), vlan_pool(417), vlan_pool(418)), (1, 9, 11));
        let all: HashSet<u16> = (0..4094).map(vlan_pool).collect();
        assert_eq!(all.len(), 4094);
        assert!(all.iter().all(|&v| (1..=4094).contains(&v)));
    }
}
