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
//! rqvs therefore generates the IPv4 set ([`crate::rules::generate`], the same draws) and maps
//! each rule with [`ipv6_match`]. The mapping is injective and keeps prefix containment, so two
//! IPv6 rules overlap exactly when their IPv4 rules do: the OpenFlow priorities (and winners) of
//! the IPv4 set carry over ([`to_flows`] computes them on the IPv4 rules, where the layered
//! assignment's address index applies, and maps the flows).

use rqvs_flow::convert::Conversion;
use rqvs_flow::key::{ETH_TYPE_IP, ETH_TYPE_IPV6, IPPROTO_ICMP, IPPROTO_ICMPV6};
use rqvs_flow::{Actions, FlowKey, Match, Rule};

/// The IPv6 form of an IPv4 5-tuple match (module docs). Fields other than `dl_type`, the
/// addresses and the protocol are kept; a match on another ethertype is returned unchanged.
pub fn ipv6_match(m: &Match) -> Match {
    let (v, k) = (*m.value(), *m.mask());
    if k.dl_type != u16::MAX || v.dl_type != ETH_TYPE_IP {
        return *m;
    }
    let swap = |p: u8| match p {
        IPPROTO_ICMP => IPPROTO_ICMPV6,
        IPPROTO_ICMPV6 => IPPROTO_ICMP,
        p => p,
    };
    let map = |x: FlowKey, is_mask: bool| FlowKey {
        nw_src: 0,
        nw_dst: 0,
        ipv6_src: u128::from(x.nw_src) << 96,
        ipv6_dst: u128::from(x.nw_dst) << 96,
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
    let mut conv = rqvs_flow::convert::classbench_to_openflow(rules, &Actions::drop())?;
    for f in &mut conv.flows {
        f.matches = ipv6_match(&f.matches);
        f.actions = Actions::output(f.cookie as u32 + 1);
    }
    Ok(conv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_flow::formats::classbench;

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
