//! A match over every field of `rqvs_flow::field`'s table, for the property tests of the
//! ovs-ofctl text (`rqvs-flow`) and the OXM codec (`rqvs-openflow`): both draw from one
//! generator, so a field one of them covers the other covers too.

use rqvs_flow::field::{Field, Format, Maskable, FIELDS};
use rqvs_flow::key::{
    ETH_TYPE_ARP, ETH_TYPE_IP, ETH_TYPE_IPV6, IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP,
    VLAN_CFI, VLAN_VID_MASK,
};
use rqvs_flow::{FlowKey, Match};

/// A random match over every field of the table: a protocol context (`ctx`), then each
/// field whose prerequisite holds, with probability 1/2, a random value and (when maskable)
/// a random or prefix mask; one view per member.
pub fn wide_match(ctx: u8, picks: &[(bool, u128, u128, u8)]) -> Match {
    let (mut v, mut m) = (FlowKey::ZERO, FlowKey::ZERO);
    let set = |name: &str, x: u128, v: &mut FlowKey, m: &mut FlowKey| {
        let f = Field::by_name(name).unwrap();
        f.set_masked(v, m, x, u128::MAX);
    };
    let (dl, proto, icmp): (Option<u16>, Option<u8>, Option<u16>) = match ctx % 15 {
        0 => (None, None, None),
        1 => (Some(ETH_TYPE_IP), None, None),
        2 => (Some(ETH_TYPE_IP), Some(IPPROTO_TCP), None),
        3 => (Some(ETH_TYPE_IP), Some(IPPROTO_UDP), None),
        4 => (Some(ETH_TYPE_IPV6), Some(IPPROTO_SCTP), None),
        5 => (Some(ETH_TYPE_IP), Some(IPPROTO_ICMP), None),
        6 => (Some(ETH_TYPE_IPV6), None, None),
        7 => (Some(ETH_TYPE_IPV6), Some(IPPROTO_TCP), None),
        8 => (Some(ETH_TYPE_IPV6), Some(IPPROTO_UDP), None),
        9 => (Some(ETH_TYPE_IPV6), Some(IPPROTO_ICMPV6), Some(135)),
        10 => (Some(ETH_TYPE_IPV6), Some(IPPROTO_ICMPV6), Some(136)),
        11 => (Some(ETH_TYPE_IPV6), Some(IPPROTO_ICMPV6), None),
        12 => (Some(ETH_TYPE_ARP), None, None),
        13 => (Some(rqvs_flow::field::ETH_TYPE_RARP), None, None),
        _ => (Some(0x88cc), None, None),
    };
    if let Some(t) = dl {
        set("dl_type", t.into(), &mut v, &mut m);
    }
    if let Some(p) = proto {
        set("nw_proto", p.into(), &mut v, &mut m);
    }
    if let Some(t) = icmp {
        (v.tp_src, m.tp_src, v.tp_dst, m.tp_dst) = (t, u16::MAX, 0, u16::MAX);
    }
    if ctx >= 15 {
        // A present VLAN tag (vlan_pcp's prerequisite).
        v.vlan_tci |= VLAN_CFI | u16::from(ctx) & VLAN_VID_MASK;
        m.vlan_tci |= VLAN_CFI | VLAN_VID_MASK;
    }
    for (f, &(on, x, mask, len)) in FIELDS.iter().zip(picks) {
        if !on || f.member.get(&m) != 0 || !f.prereq.satisfied(&v, &m) {
            continue;
        }
        let ones = f.all_ones();
        let x = if f.name == "in_port" { x % 0xff00 } else { x };
        let mask = match (f.maskable, len % 3) {
            (Maskable::No, _) => ones,
            (_, 0) => ones,
            (_, 1) => ones & !ones.checked_shr(u32::from(len) % f.bits + 1).unwrap_or(0),
            _ => mask & ones,
        };
        if f.format == Format::Frag {
            let (fv, fm) = [(0, 1), (1, 1), (1, 3), (3, 3), (0, 2)][usize::from(len) % 5];
            f.set_masked(&mut v, &mut m, fv, fm);
            continue;
        }
        if mask == 0 {
            continue;
        }
        f.set_masked(&mut v, &mut m, x, mask);
        if f.name.starts_with("icmp") {
            // ICMP type and code are matched over the whole tp_src/tp_dst (as ofctl reads them).
            f.member.set(&mut m, 0xffff);
        }
    }
    Match::from_masked(v, m)
}
