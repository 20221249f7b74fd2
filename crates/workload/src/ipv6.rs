//! IPv6 5-tuple rule-sets from the classic ClassBench seeds, with ClassBench-ng's IPv6 prefixes.
//!
//! ClassBench-ng's `-6` mode (its patch to `db_generator`) runs ClassBench's algorithm unchanged
//! over 128-bit addresses: the source and destination tries get 129 levels, each level with the
//! seed's skew, nesting and correlation parameters, and prefix lengths are the seed's. Given an
//! IPv4 seed, every total and source length is at most 32 and the trie parameters beyond level
//! 32 are never reached, so a rule's IPv6 prefix is *its IPv4 prefix placed in the top 32 bits*:
//!
//! | IPv4 (classic generator) | IPv6 (`--ipv6`) |
//! |---|---|
//! | `a.b.c.d/l`, 0 ≤ l ≤ 32 | `(a.b.c.d << 96)/l`: the address's first 32 bits are `a.b.c.d`, the other 96 zero; same length `l` (`10.1.0.0/16` → `a01::/16`) |
//! | prefix nesting, skew, source/destination correlation | unchanged (the same trie, read on the top bits) |
//! | `/32` (a host) | `/32`: a prefix, not a host route — ClassBench-ng's output too |
//! | protocol 1 (ICMP) | 58 (ICMPv6), and 58 → 1, so the mapping stays one to one |
//! | ports, TCP flags | unchanged |
//!
//! ## Longer prefixes: [`Prefixes::Spread`] (`--ipv6-prefixes spread`)
//!
//! ClassBench-ng reaches lengths beyond /32 only from a seed analysed from an IPv6 rule-set (its
//! patched `db_generator` then reads per-level parameters and lengths up to 128); none ships with
//! it, and the 12 ClassBench seeds are IPv4. rqvs's extension, seeded and documented: each IPv4
//! length `l` becomes the IPv6 length [`SPREAD_LENGTHS`]`[l]` — `l ≤ 16`: `2l` (a /16 becomes a
//! /32, an LIR allocation); 17..24: `32 + 2(l − 16)` (a /24 becomes a /48, a site); 25..28:
//! `48 + 4(l − 24)` (a /28 becomes a /64, a subnet); 29..31: `64 + 16(l − 28)`; 32: 128 (a host).
//! The address spreads the same way: IPv4 bit `i` (from the top) becomes the last bit of the
//! block `[len(i), len(i + 1))`, and the block's other bits are a hash of the rng-seed, `i` and
//! the IPv4 bits above `i` (so they are fixed by the prefix a rule has there). A prefix's first
//! `len(l)` IPv6 bits then depend only on its first `l` IPv4 bits: the map is injective and
//! keeps containment both ways, so overlaps, priorities and winners are the IPv4 set's, as for
//! the top-32 mapping, and the set is deterministic by `--rng-seed`.
//!
//! rqvs therefore generates the IPv4 set ([`crate::rules::generate`], the same draws) and maps
//! each rule with [`ipv6_match`] (or [`ipv6_match_with`]). The mapping is injective and keeps prefix containment, so two
//! IPv6 rules overlap exactly when their IPv4 rules do: the OpenFlow priorities (and winners) of
//! the IPv4 set carry over ([`to_flows`] computes them on the IPv4 rules, where the layered
//! assignment's address index applies, and maps the flows).

use rqvs_flow::convert::Conversion;
use rqvs_flow::key::{ETH_TYPE_IP, ETH_TYPE_IPV6, IPPROTO_ICMP, IPPROTO_ICMPV6};
use rqvs_flow::{Actions, FlowKey, Match, Rule};

/// How IPv4 prefixes become IPv6 prefixes (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefixes {
    /// ClassBench-ng's output from an IPv4 seed: the prefix in the top 32 bits, same length.
    Top32,
    /// rqvs's extension: lengths up to 128 ([`SPREAD_LENGTHS`]), filler bits from this seed.
    Spread { seed: u64 },
}

/// The IPv6 length of each IPv4 length under [`Prefixes::Spread`] (strictly increasing).
pub const SPREAD_LENGTHS: [u32; 33] = {
    let mut t = [0u32; 33];
    let mut l = 0;
    while l <= 32 {
        t[l] = match l as u32 {
            l @ 0..=16 => 2 * l,
            l @ 17..=24 => 32 + 2 * (l - 16),
            l @ 25..=28 => 48 + 4 * (l - 24),
            l @ 29..=31 => 64 + 16 * (l - 28),
            _ => 128,
        };
        l += 1;
    }
    t
};

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The IPv6 address of IPv4 address `a` under `p` (for a prefix, mask it to the mapped length:
/// its bits there depend only on the prefix's bits).
pub fn ipv6_address(a: u32, p: Prefixes) -> u128 {
    let Prefixes::Spread { seed } = p else { return u128::from(a) << 96 };
    let mut out: u128 = 0;
    for i in 0..32u32 {
        let (from, to) = (SPREAD_LENGTHS[i as usize], SPREAD_LENGTHS[i as usize + 1]);
        let above = if i == 0 { 0 } else { u64::from(a >> (32 - i)) };
        let fill_bits = to - from - 1;
        // Filler bits (at most 15), then the IPv4 bit, at positions from..to from the top.
        let fill = if fill_bits == 0 {
            0
        } else {
            u128::from(splitmix(seed ^ splitmix(u64::from(i) << 40 ^ above)) & ((1u64 << fill_bits) - 1))
        };
        let block = fill << 1 | u128::from(a >> (31 - i) & 1);
        out |= block << (128 - to);
    }
    out
}

/// The IPv6 prefix (value, mask) of IPv4 prefix `v & m` (a prefix mask) under `p`.
fn ipv6_prefix(v: u32, m: u32, p: Prefixes) -> (u128, u128) {
    let l = m.leading_ones();
    let len6 = match p {
        Prefixes::Top32 => l,
        Prefixes::Spread { .. } => SPREAD_LENGTHS[l as usize],
    };
    if m != 0 && m.count_ones() != l {
        // Not a prefix (ClassBench sets have none): the bits as they are, in the top 32 bits.
        return (u128::from(v) << 96, u128::from(m) << 96);
    }
    let mask = if len6 == 0 { 0 } else { u128::MAX << (128 - len6) };
    (ipv6_address(v, p) & mask, mask)
}

/// The IPv6 form of an IPv4 5-tuple match (module docs), with ClassBench-ng's prefixes. Fields
/// other than `dl_type`, the addresses and the protocol are kept; a match on another ethertype is
/// returned unchanged.
pub fn ipv6_match(m: &Match) -> Match {
    ipv6_match_with(m, Prefixes::Top32)
}

/// [`ipv6_match`] with prefixes mapped as `p` says.
pub fn ipv6_match_with(m: &Match, p: Prefixes) -> Match {
    let (v, k) = (*m.value(), *m.mask());
    if k.dl_type != u16::MAX || v.dl_type != ETH_TYPE_IP {
        return *m;
    }
    let swap = |p: u8| match p {
        IPPROTO_ICMP => IPPROTO_ICMPV6,
        IPPROTO_ICMPV6 => IPPROTO_ICMP,
        p => p,
    };
    let (src, src_m) = ipv6_prefix(v.nw_src, k.nw_src, p);
    let (dst, dst_m) = ipv6_prefix(v.nw_dst, k.nw_dst, p);
    let map = |x: FlowKey, is_mask: bool| FlowKey {
        nw_src: 0,
        nw_dst: 0,
        ipv6_src: if is_mask { src_m } else { src },
        ipv6_dst: if is_mask { dst_m } else { dst },
        dl_type: x.dl_type,
        nw_proto: if is_mask { x.nw_proto } else { swap(x.nw_proto) },
        ..x
    };
    let mut value = map(v, false);
    value.dl_type = ETH_TYPE_IPV6;
    let mask = map(k, true);
    // A masked protocol would not survive the swap bit for bit: keep it as it was.
    if k.nw_proto != 0 && k.nw_proto != u8::MAX {
        value.nw_proto = v.nw_proto;
    }
    Match::new(value, mask, m.tp_src_range(), m.tp_dst_range()).expect("the mapping keeps value bits inside the mask")
}

/// The IPv6 form of IPv4 rules (same ids and priorities), each with `output:(id + 1)`.
pub fn ipv6_rules(rules: &[Rule]) -> Vec<Rule> {
    rules
        .iter()
        .map(|r| {
            let mut out = Rule::new(r.id.0, r.priority, ipv6_match(&r.matches), Actions::output(r.id.0 + 1));
            out.cookie = r.cookie;
            out
        })
        .collect()
}

/// The OpenFlow table of the IPv6 form of IPv4 `rules` (ids 0..): priorities, port-range
/// expansion and the rules left out as [`rqvs_flow::convert::classbench_to_openflow`] gives them
/// for the IPv4 rules; `cookie` = the rule's id, action `output:(id + 1)`.
pub fn to_flows(rules: &[Rule]) -> Result<Conversion, String> {
    to_flows_with(rules, Prefixes::Top32)
}

/// [`to_flows`] with prefixes mapped as `p` says.
pub fn to_flows_with(rules: &[Rule], p: Prefixes) -> Result<Conversion, String> {
    let mut conv = rqvs_flow::convert::classbench_to_openflow(rules, &Actions::drop())?;
    for f in &mut conv.flows {
        f.matches = ipv6_match_with(&f.matches, p);
        f.actions = Actions::output(f.cookie as u32 + 1);
    }
    Ok(conv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_flow::formats::classbench;

    /// The spread mapping: lengths as the table says, containment kept both ways, injective on
    /// addresses, deterministic by seed and different between seeds.
    #[test]
    fn spread_prefixes_keep_containment() {
        assert!(SPREAD_LENGTHS.windows(2).all(|w| w[0] < w[1]));
        assert_eq!([SPREAD_LENGTHS[8], SPREAD_LENGTHS[16], SPREAD_LENGTHS[24], SPREAD_LENGTHS[28]], [16, 32, 48, 64]);
        assert_eq!(SPREAD_LENGTHS[32], 128);
        let p = Prefixes::Spread { seed: 7 };
        let mut rng = rqvs_flow::rng::Rng::new(3);
        let prefix = |a: u32, l: u32| {
            let m = rqvs_flow::prefix::prefix_mask(l, 32);
            ipv6_prefix(a & m, m, p)
        };
        let mut seen = std::collections::HashSet::new();
        for _ in 0..2000 {
            let (a, b) = (rng.next_u64() as u32, rng.next_u64() as u32);
            let b = if rng.next_u64().is_multiple_of(2) { a ^ (b >> (b % 32)) } else { b };
            let (la, lb) = ((rng.next_u64() % 33) as u32, (rng.next_u64() % 33) as u32);
            let ((va, ma), (vb, mb)) = (prefix(a, la), prefix(b, lb));
            assert_eq!(ma.leading_ones(), SPREAD_LENGTHS[la as usize]);
            let m4 = |l| rqvs_flow::prefix::prefix_mask(l, 32);
            let nest4 = la <= lb && (a & m4(la)) == (b & m4(la));
            let nest6 = ma.count_ones() <= mb.count_ones() && (vb & ma) == va;
            assert_eq!(nest4, nest6, "{a:#x}/{la} in {b:#x}/{lb}");
            // The host bits of an address match its own /32 prefix.
            assert_eq!(ipv6_address(a, p), prefix(a, 32).0);
            seen.insert((a, ipv6_address(a, p)));
        }
        let addrs: std::collections::HashSet<u128> = seen.iter().map(|x| x.1).collect();
        let v4: std::collections::HashSet<u32> = seen.iter().map(|x| x.0).collect();
        assert_eq!(addrs.len(), v4.len(), "injective");
        assert_ne!(ipv6_address(0x0a01_0203, p), ipv6_address(0x0a01_0203, Prefixes::Spread { seed: 8 }));
        assert_eq!(ipv6_address(0x0a01_0203, Prefixes::Top32), 0x0a01_0203u128 << 96);
    }

    #[test]
    fn prefixes_move_to_the_top_bits() {
        let r = classbench::parse_rules(
            "t",
            "@10.1.0.0/16\t192.168.1.7/32\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0000/0x0000\t\n\
             @0.0.0.0/0\t1.0.0.0/8\t0 : 65535\t0 : 65535\t0x01/0xFF\t0x0000/0x0000\t\n",
        )
        .unwrap();
        let six = ipv6_rules(&r);
        let (v, k) = (six[0].matches.value(), six[0].matches.mask());
        assert_eq!((v.dl_type, v.nw_src, k.nw_src), (ETH_TYPE_IPV6, 0, 0));
        assert_eq!(v.ipv6_src, 0x0a01u128 << 112);
        assert_eq!(k.ipv6_src, 0xffffu128 << 112);
        assert_eq!(v.ipv6_dst, 0xc0a8_0107u128 << 96);
        assert_eq!(k.ipv6_dst, 0xffff_ffffu128 << 96);
        assert_eq!((v.nw_proto, six[0].matches.tp_dst_range().lo), (6, 80));
        assert_eq!(six[1].matches.value().nw_proto, IPPROTO_ICMPV6);
        let k4 = FlowKey::ipv4(0x0a01_0203, 0xc0a8_0107, 6, 5, 80);
        let k6 = FlowKey::ipv6(u128::from(k4.nw_src) << 96, u128::from(k4.nw_dst) << 96, 6, 5, 80);
        assert!(r[0].matches.matches(&k4) && six[0].matches.matches(&k6));
        assert!(!six[0].matches.matches(&k4));
    }
}
