//! Header traces for a rule-set.
//!
//! Each header is aimed at a rule chosen uniformly at random (the original `trace_generator`'s
//! choice) and drawn from it:
//! - [`Mode::Inside`] (default): every field uniformly inside the rule's match — addresses
//!   uniformly in the prefix, ports uniformly in the range, the protocol uniformly in 0..=255 when
//!   wildcarded, the TCP flag byte uniformly on its unmatched bits (0 for other protocols). ICMP
//!   type/code (kept in the port fields, as OVS does) are drawn in 0..=255 when the rule allows it,
//!   so they survive a real packet (ICMPv6's too). A non-prefix mask is honoured bit by bit.
//!   Wide rules (OpenFlow sets, [`crate::ofrules`]; IPv6 sets, [`crate::ipv6`]): IPv6 addresses
//!   are drawn like IPv4 ones (the key is an IPv6 one when the rule matches `dl_type=0x86dd`); a
//!   MAC the rule masks in part gets random bits where unmasked, an exact one is the rule's;
//!   `in_port`, VLAN and ToS take the rule's value (`in_port` 1 and no tag when not matched), and
//!   MACs the rule does not match stay zero, as in 5-tuple traces.
//! - [`Mode::Corner`]: the original's behaviour — each field at the low or high end of its range,
//!   flags at the rule's value; kept for compatibility with published ClassBench traces.
//!
//! Popularity ([`Locality`]):
//! - `pareto:a,b` — the original's bursts: a header is repeated `ceil(b / (1−p)^(1/a))` times in
//!   a row (b = 0: once). With a = 1 the mean burst is infinite, and one burst can be most of a
//!   trace; rqvs caps every header at `max_share` of the trace (default 5%) over all its bursts,
//!   and every burst at `max_burst` (default the same count). A burst that would overflow a cap
//!   is shortened; a header already at its cap is redrawn.
//! - `zipf:s[,F]` — F flows (default: one per rule), each a header drawn as above from a random
//!   rule; each packet picks a flow with probability ∝ 1/rank^s. A flow at its cap is skipped (the
//!   next unsaturated rank is taken), so the cap bends the head of the distribution.
//! - `uniform` — every packet a fresh header from a fresh random rule.
//!
//! The trace has exactly `packets` headers (the original overshoots by its last burst). The
//! *intended* rule is recorded; the **true winner** is computed with TupleMerge (checked against
//! the definition in tests). With `wire`, each header is first reduced to what a real frame carries
//! ([`FlowKey::wire`]: no ports on protocols other than TCP/UDP/SCTP/ICMP), and the winner is the
//! winner of that — use it for pcap output.

use hashbrown::HashMap;
use rqvs_classify::{Classifier, NuevoMatchUp, TupleMerge};
use rqvs_flow::key::{ETH_TYPE_IPV6, IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_TCP};
use rqvs_flow::prefix::min_masked_at_least;
use rqvs_flow::{FlowKey, Match, PortRange, Rule, RuleId};

use crate::rng::Rng;

/// Flow popularity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Locality {
    Pareto { a: f64, b: f64 },
    Zipf { s: f64, flows: Option<usize> },
    Uniform,
}

impl Locality {
    /// `pareto:A,B`, `zipf:S` or `zipf:S,FLOWS`, `uniform`.
    pub fn parse(s: &str) -> Result<Locality, String> {
        let bad =
            || format!("expected --locality pareto:A,B (0<A<=1... , B>=0) | zipf:S[,FLOWS] | uniform, found '{s}'");
        if s == "uniform" {
            return Ok(Locality::Uniform);
        }
        let (kind, args) = s.split_once(':').ok_or_else(bad)?;
        let nums: Vec<&str> = args.split(',').collect();
        match (kind, nums.as_slice()) {
            ("pareto", [a, b]) => {
                let (a, b): (f64, f64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if !(a > 0.0 && a.is_finite() && b >= 0.0 && b.is_finite()) {
                    return Err(bad());
                }
                Ok(Locality::Pareto { a, b })
            }
            ("zipf", [z]) | ("zipf", [z, _]) => {
                let s: f64 = z.parse().map_err(|_| bad())?;
                if !(s >= 0.0 && s.is_finite()) {
                    return Err(bad());
                }
                let flows = match nums.get(1) {
                    Some(f) => Some(f.parse::<usize>().ok().filter(|&f| f > 0).ok_or_else(bad)?),
                    None => None,
                };
                Ok(Locality::Zipf { s, flows })
            }
            _ => Err(bad()),
        }
    }
}

/// Where inside a rule headers are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Inside,
    Corner,
}

/// What to generate.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub packets: usize,
    pub locality: Locality,
    pub mode: Mode,
    pub rng_seed: u64,
    /// Most packets one header may have, as a share of the trace (1.0 = no cap).
    pub max_share: f64,
    /// Longest burst (Pareto); `None` = the per-header cap.
    pub max_burst: Option<usize>,
    /// Reduce headers to what a real frame carries before classifying them.
    pub wire: bool,
}

impl Params {
    pub fn new(packets: usize, locality: Locality, rng_seed: u64) -> Params {
        Params { packets, locality, mode: Mode::Inside, rng_seed, max_share: 0.05, max_burst: None, wire: false }
    }
}

/// One packet of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    pub key: FlowKey,
    pub intended: RuleId,
    pub winner: Option<RuleId>,
}

/// How a trace came out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceStats {
    pub packets: usize,
    /// Distinct headers.
    pub flows: usize,
    /// Packets of the most frequent header / packets.
    pub top_share: f64,
    /// Flow sizes (packets per distinct header): `(lo, hi, flows, packets)` for power-of-2 buckets.
    pub flow_sizes: Vec<(u64, u64, u64, u64)>,
    pub flow_size_p50: u64,
    pub flow_size_p90: u64,
    pub flow_size_p99: u64,
    pub flow_size_max: u64,
    /// Packets whose true winner is not the intended rule.
    pub intended_differs: usize,
    /// Packets no rule matches (possible only with `wire`).
    pub unmatched: usize,
    /// Distinct true winners.
    pub rules_hit: usize,
    /// Bursts shortened, or headers redrawn, because of a cap.
    pub capped: usize,
}

/// The most packets [`generate`] draws: every packet is held in memory (to count flows and
/// compute true winners): about 220 bytes each with its text, 2.2 GB at the limit.
pub const MAX_PACKETS: usize = 10_000_000;

/// Draws `params.packets` headers for `rules`.
pub fn generate(rules: &[Rule], params: &Params) -> Result<(Vec<Packet>, TraceStats), String> {
    if rules.is_empty() {
        return Err("expected at least one rule to aim headers at".into());
    }
    if params.packets == 0 || params.packets > MAX_PACKETS {
        return Err(format!("expected --packets in 1..={MAX_PACKETS}, found {}", params.packets));
    }
    if !(params.max_share > 0.0 && params.max_share <= 1.0) {
        return Err("expected a per-header cap (share) in (0, 1]".into());
    }
    let n = params.packets;
    let limit = ((params.max_share * n as f64).floor() as usize).max(1);
    let max_burst = params.max_burst.unwrap_or(limit).max(1);
    let mut rng = Rng::new(params.rng_seed);
    let mut counts: HashMap<FlowKey, usize> = HashMap::new();
    let mut out: Vec<(FlowKey, RuleId)> = Vec::with_capacity(n);
    let mut capped = 0usize;
    let draw = |rng: &mut Rng, r: &Rule| match params.mode {
        Mode::Inside => header_inside(&r.matches, rng),
        Mode::Corner => header_corner(&r.matches, rng),
    };
    match params.locality {
        Locality::Pareto { .. } | Locality::Uniform => {
            let mut stuck = 0usize;
            while out.len() < n {
                let r = &rules[rng.below(rules.len() as u64) as usize];
                let key = draw(&mut rng, r);
                let want = match params.locality {
                    Locality::Pareto { a, b } => pareto(&mut rng, a, b),
                    _ => 1,
                };
                let c = counts.entry(key).or_insert(0);
                let room = limit - *c;
                if room == 0 {
                    capped += 1;
                    stuck += 1;
                    if stuck > 100_000 {
                        return Err(format!(
                            "cannot fill {n} packets with no header above {:.1}%: the rules allow too few distinct headers (raise the cap)",
                            params.max_share * 100.0
                        ));
                    }
                    continue;
                }
                stuck = 0;
                let burst = want.min(room).min(max_burst).min(n - out.len());
                if burst < want.min(n - out.len()) {
                    capped += 1;
                }
                *c += burst;
                out.resize(out.len() + burst, (key, r.id));
            }
        }
        Locality::Zipf { s, flows } => {
            let f = flows.unwrap_or(rules.len());
            if f.saturating_mul(limit) < n {
                return Err(format!(
                    "{f} flows cannot carry {n} packets with no flow above {:.1}%: use more flows (zipf:{s},F) or raise the cap",
                    params.max_share * 100.0
                ));
            }
            let pool: Vec<(FlowKey, RuleId)> = (0..f)
                .map(|_| {
                    let r = &rules[rng.below(rules.len() as u64) as usize];
                    (draw(&mut rng, r), r.id)
                })
                .collect();
            let mut acc = 0.0;
            let cum: Vec<f64> = (1..=f)
                .map(|k| {
                    acc += 1.0 / (k as f64).powf(s);
                    acc
                })
                .collect();
            let total = acc;
            let mut used = vec![0usize; f];
            while out.len() < n {
                let x = rng.f64() * total;
                let mut i = cum.partition_point(|&c| c <= x).min(f - 1);
                if used[i] >= limit {
                    capped += 1;
                    let mut scanned = 0;
                    while used[i] >= limit {
                        i = (i + 1) % f;
                        scanned += 1;
                        if scanned > f {
                            return Err(format!(
                                "every flow reached the {:.1}% cap after {} packets (flows share headers): use more flows or raise the cap",
                                params.max_share * 100.0,
                                out.len()
                            ));
                        }
                    }
                }
                used[i] += 1;
                // Distinct rules can give equal headers: the cap is on headers, so count them too.
                let c = counts.entry(pool[i].0).or_insert(0);
                if *c >= limit {
                    used[i] = limit;
                    continue;
                }
                *c += 1;
                out.push(pool[i]);
            }
        }
    }
    let keys: Vec<FlowKey> = out.iter().map(|&(k, _)| if params.wire { k.wire() } else { k }).collect();
    let winners = winners(rules, &keys)?;
    let packets: Vec<Packet> = keys
        .iter()
        .zip(&out)
        .zip(&winners)
        .map(|((&key, &(_, intended)), &winner)| Packet { key, intended, winner })
        .collect();
    let mut stats = trace_stats(&packets);
    stats.capped = capped;
    Ok((packets, stats))
}

/// The true winner of every key. TupleMerge (which the classify tests hold equal to the
/// definition) for 5-tuple rules; for rules that also match a wide field or a MAC (OpenFlow and
/// IPv6 sets), NuevoMatchUP with iSets at every size (held equal to the definition too): its
/// iSets index the MAC and IPv6 windows (chosen when TupleMerge's tuples hashed the 5-tuple
/// only; TupleMerge now hashes the wide fields too, and either is exact), so that a 1M-packet
/// trace of an of1 100K set takes seconds, not minutes.
pub fn winners(rules: &[Rule], keys: &[FlowKey]) -> Result<Vec<Option<RuleId>>, String> {
    let fail = |e: rqvs_classify::ClassifierError| format!("cannot build the classifier for true winners: {e}");
    let wide = rules.iter().any(|r| {
        let m = r.matches.mask();
        m.ipv6_src != 0 || m.ipv6_dst != 0 || m.dl_src != [0; 6] || m.dl_dst != [0; 6] || m.metadata != 0
    });
    let c: Box<dyn Classifier> = if wide {
        let config = rqvs_classify::nuevomatch::NuevoMatchConfig::always_learned();
        Box::new(NuevoMatchUp::build_with(rules, config, TupleMerge::build).map_err(fail)?)
    } else {
        Box::new(TupleMerge::build(rules).map_err(fail)?)
    };
    let mut out = vec![None; keys.len()];
    for (k, o) in keys.chunks(rqvs_classify::BATCH).zip(out.chunks_mut(rqvs_classify::BATCH)) {
        c.lookup_batch(k, o);
    }
    Ok(out)
}

/// Flow-size and winner statistics of a trace.
pub fn trace_stats(packets: &[Packet]) -> TraceStats {
    let mut counts: HashMap<FlowKey, u64> = HashMap::new();
    let mut hit = hashbrown::HashSet::new();
    let mut s = TraceStats { packets: packets.len(), ..TraceStats::default() };
    for p in packets {
        *counts.entry(p.key).or_default() += 1;
        match p.winner {
            Some(w) => {
                hit.insert(w);
                if w != p.intended {
                    s.intended_differs += 1;
                }
            }
            None => {
                s.unmatched += 1;
                s.intended_differs += 1;
            }
        }
    }
    s.flows = counts.len();
    s.rules_hit = hit.len();
    let mut sizes: Vec<u64> = counts.into_values().collect();
    sizes.sort_unstable();
    let q = |f: f64| sizes.get(((sizes.len() as f64 - 1.0) * f).round() as usize).copied().unwrap_or(0);
    s.flow_size_p50 = q(0.5);
    s.flow_size_p90 = q(0.9);
    s.flow_size_p99 = q(0.99);
    s.flow_size_max = sizes.last().copied().unwrap_or(0);
    s.top_share = s.flow_size_max as f64 / packets.len().max(1) as f64;
    let mut lo = 1u64;
    while lo <= s.flow_size_max {
        let hi = lo * 2 - 1;
        let in_bucket = sizes.iter().filter(|&&x| x >= lo && x <= hi);
        let (f, p) = in_bucket.fold((0, 0), |(f, p), &x| (f + 1, p + x));
        if f > 0 {
            s.flow_sizes.push((lo, hi, f, p));
        }
        lo *= 2;
    }
    s
}

fn pareto(rng: &mut Rng, a: f64, b: f64) -> usize {
    if b == 0.0 {
        return 1;
    }
    let p = rng.f64();
    let x = b / (1.0 - p).powf(1.0 / a);
    if x >= 1e9 {
        1_000_000_000
    } else {
        (x.ceil() as usize).max(1)
    }
}

/// A header uniformly inside `m` (see the module docs).
pub fn header_inside(m: &Match, rng: &mut Rng) -> FlowKey {
    let (v, k) = (m.value(), m.mask());
    let mut key = FlowKey::ipv4(0, 0, 0, 0, 0);
    key.in_port = if k.in_port != 0 { v.in_port } else { 1 };
    key.dl_type = v.dl_type | (key.dl_type & !k.dl_type);
    key.dl_src = mac_inside(v.dl_src, k.dl_src, rng);
    key.dl_dst = mac_inside(v.dl_dst, k.dl_dst, rng);
    key.vlan_tci = v.vlan_tci;
    key.nw_tos = v.nw_tos;
    key.nw_frag = v.nw_frag;
    if key.dl_type == ETH_TYPE_IPV6 {
        key.ipv6_src = v.ipv6_src | (u128_random(rng) & !k.ipv6_src);
        key.ipv6_dst = v.ipv6_dst | (u128_random(rng) & !k.ipv6_dst);
    } else {
        key.nw_src = v.nw_src | (rng.next_u32() & !k.nw_src);
        key.nw_dst = v.nw_dst | (rng.next_u32() & !k.nw_dst);
    }
    key.nw_proto = v.nw_proto | (rng.next_u32() as u8 & !k.nw_proto);
    let icmp = key.nw_proto == IPPROTO_ICMP || (key.dl_type == ETH_TYPE_IPV6 && key.nw_proto == IPPROTO_ICMPV6);
    key.tp_src = port_inside(m.tp_src_range(), v.tp_src, k.tp_src, icmp, rng);
    key.tp_dst = port_inside(m.tp_dst_range(), v.tp_dst, k.tp_dst, icmp, rng);
    if key.nw_proto == IPPROTO_TCP {
        key.tcp_flags = v.tcp_flags | (rng.next_u32() as u16 & 0xff & !k.tcp_flags);
    }
    if !m.matches(&key) {
        // A protocol-dependent constraint the field-by-field draw missed: the corner always fits
        // when anything does.
        return header_corner_low(m);
    }
    key
}

/// A MAC inside `value`/`mask`: the masked bits from the rule, the others random — or all zero
/// when the rule does not look at the field (5-tuple traces keep their zero MACs).
fn mac_inside(value: [u8; 6], mask: [u8; 6], rng: &mut Rng) -> [u8; 6] {
    if mask == [0; 6] || mask == [0xff; 6] {
        return value;
    }
    let r = rng.next_u64().to_be_bytes();
    std::array::from_fn(|i| value[i] | (r[i + 2] & !mask[i]))
}

fn u128_random(rng: &mut Rng) -> u128 {
    u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64())
}

fn port_inside(range: PortRange, value: u16, mask: u16, icmp: bool, rng: &mut Rng) -> u16 {
    let mut r = range;
    if icmp && r.lo <= 255 {
        r.hi = r.hi.min(255);
    }
    let x = rng.range_u32(u32::from(r.lo), u32::from(r.hi)) as u16;
    let x = (x & !mask) | (value & mask);
    if r.contains(x) {
        return x;
    }
    match min_masked_at_least(u32::from(r.lo), u32::from(value & mask), u32::from(mask), 16) {
        Some(y) if y <= u32::from(r.hi) => y as u16,
        _ => x,
    }
}

fn header_corner_low(m: &Match) -> FlowKey {
    let (v, k) = (m.value(), m.mask());
    let mut key = FlowKey::ipv4(v.nw_src, v.nw_dst, v.nw_proto, 0, 0);
    key.in_port = if k.in_port != 0 { v.in_port } else { 1 };
    key.dl_type = v.dl_type | (key.dl_type & !k.dl_type);
    key.dl_src = v.dl_src;
    key.dl_dst = v.dl_dst;
    key.vlan_tci = v.vlan_tci;
    key.nw_tos = v.nw_tos;
    key.nw_frag = v.nw_frag;
    key.ipv6_src = v.ipv6_src;
    key.ipv6_dst = v.ipv6_dst;
    key.tcp_flags = if v.nw_proto == IPPROTO_TCP { v.tcp_flags } else { 0 };
    for (port, range, value, mask) in [
        (&mut key.tp_src, m.tp_src_range(), v.tp_src, k.tp_src),
        (&mut key.tp_dst, m.tp_dst_range(), v.tp_dst, k.tp_dst),
    ] {
        *port = min_masked_at_least(u32::from(range.lo), u32::from(value & mask), u32::from(mask), 16)
            .filter(|&y| y <= u32::from(range.hi))
            .map_or(range.lo, |y| y as u16);
    }
    key
}

/// A header at a random corner of `m` (the original generator's choice).
pub fn header_corner(m: &Match, rng: &mut Rng) -> FlowKey {
    let (v, k) = (m.value(), m.mask());
    let mut bit = || rng.next_u32() & 1 == 1;
    let mut key = header_corner_low(m);
    if key.dl_type == ETH_TYPE_IPV6 {
        if bit() {
            key.ipv6_src = v.ipv6_src | !k.ipv6_src;
        }
        if bit() {
            key.ipv6_dst = v.ipv6_dst | !k.ipv6_dst;
        }
    } else {
        if bit() {
            key.nw_src = v.nw_src | !k.nw_src;
        }
        if bit() {
            key.nw_dst = v.nw_dst | !k.nw_dst;
        }
    }
    if bit() {
        key.tp_src = m.tp_src_range().hi;
    }
    if bit() {
        key.tp_dst = m.tp_dst_range().hi;
    }
    if bit() {
        key.nw_proto = v.nw_proto | !k.nw_proto;
    }
    key.tcp_flags = if key.nw_proto == IPPROTO_TCP { v.tcp_flags } else { 0 };
    if !m.matches(&key) {
        return header_corner_low(m);
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_flow::formats::classbench::parse_rules;

    const RULES: &str = "@10.0.0.0/8\t0.0.0.0/0\t1024 : 65535\t20 : 21\t0x11/0xFF\t0x0000/0x0000\t\n\
@0.0.0.0/0\t192.168.0.0/16\t0 : 65535\t0 : 65535\t0x01/0xFF\t0x0800/0xff00\t\n\
@1.2.3.4/32\t5.6.7.8/32\t80 : 80\t443 : 443\t0x11/0xFF\t0x0000/0x0000\t\n\
@1.2.3.0/24\t5.6.7.8/32\t80 : 80\t443 : 443\t0x06/0xFF\t0x1000/0x1000\t\n\
@0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000\t\n";

    #[test]
    fn headers_fall_inside_their_rule() {
        let rules = parse_rules("t", RULES).unwrap();
        let mut rng = Rng::new(3);
        for r in &rules {
            for _ in 0..2000 {
                let h = header_inside(&r.matches, &mut rng);
                assert!(r.matches.matches(&h), "{h:?} outside rule {}", r.id);
                let c = header_corner(&r.matches, &mut rng);
                assert!(r.matches.matches(&c), "{c:?} outside rule {}", r.id);
            }
        }
        // ICMP type/code stay within a byte so they survive a frame
        let h = header_inside(&rules[1].matches, &mut rng);
        assert_eq!((h.tp_src, h.nw_proto), (8, 1));
        assert!(h.tp_dst <= 255);
    }

    #[test]
    fn pareto_one_exact_rule_respects_the_cap() {
        // One exact rule + the catch-all: the exact rule's single header must stay at 5%.
        let rules = parse_rules("t", RULES).unwrap();
        let p = Params::new(10_000, Locality::Pareto { a: 1.0, b: 1.0 }, 9);
        let (pk, st) = generate(&rules, &p).unwrap();
        assert_eq!(pk.len(), 10_000);
        assert!(st.top_share <= 0.05, "{st:?}");
        let mut uncapped = p;
        uncapped.max_share = 1.0;
        let (_, st2) = generate(&rules[2..3], &uncapped).unwrap();
        assert_eq!(st2.top_share, 1.0, "one exact rule: without a cap one header is everything");
        assert!(generate(&rules[2..3], &p).is_err(), "one header cannot fill a trace under a 5% cap");
    }

    #[test]
    fn locality_parses() {
        assert_eq!(Locality::parse("pareto:1,0.1").unwrap(), Locality::Pareto { a: 1.0, b: 0.1 });
        assert_eq!(Locality::parse("zipf:1.1").unwrap(), Locality::Zipf { s: 1.1, flows: None });
        assert_eq!(Locality::parse("zipf:1,500").unwrap(), Locality::Zipf { s: 1.0, flows: Some(500) });
        assert_eq!(Locality::parse("uniform").unwrap(), Locality::Uniform);
        for bad in ["pareto:1", "pareto:x,1", "zipf:", "zipf:-1", "normal", "pareto:0,1"] {
            assert!(Locality::parse(bad).is_err(), "{bad}");
        }
    }
}
