//! Tests of IPv6, ICMPv6 ND and ARP frames: round trips through [`build_frame`], golden bytes,
//! and damaged headers handled as OVS does.

use super::ipv6::{IPPROTO_AH, IPPROTO_DSTOPTS, IPPROTO_FRAGMENT, IPPROTO_HOPOPTS, IPPROTO_NONE, IPPROTO_ROUTING};
use super::{build_frame, extract, extract_datapath, fold, sum16, Extract, ETH_TYPE_RARP};
use crate::key::{
    FlowKey, ETH_TYPE_ARP, ETH_TYPE_IPV6, FLOW_NW_FRAG_ANY, FLOW_NW_FRAG_LATER, IPPROTO_ICMPV6, IPPROTO_SCTP,
    IPPROTO_TCP, IPPROTO_UDP, VLAN_CFI,
};
use proptest::prelude::*;

const SRC: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0001;
const DST: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0002;

fn wide_key() -> impl Strategy<Value = FlowKey> {
    let dl_type = prop_oneof![6 => Just(ETH_TYPE_IPV6), 1 => Just(ETH_TYPE_ARP), 1 => Just(ETH_TYPE_RARP)];
    let proto = prop_oneof![
        1 => Just(IPPROTO_TCP),
        1 => Just(IPPROTO_UDP),
        1 => Just(IPPROTO_SCTP),
        3 => Just(IPPROTO_ICMPV6),
        1 => prop::sample::select(vec![IPPROTO_HOPOPTS, IPPROTO_ROUTING, IPPROTO_FRAGMENT, IPPROTO_AH, IPPROTO_DSTOPTS]),
        1 => any::<u8>(),
    ];
    let icmp = prop_oneof![Just((135u16, 0u16)), Just((136, 0)), Just((136, 1)), any::<(u16, u16)>()];
    let macs = prop_oneof![Just([0u8; 6]), any::<[u8; 6]>()];
    (
        (dl_type, proto, any::<[u128; 3]>(), any::<(u16, u16, u16)>(), icmp),
        (any::<(u8, u8, u32)>(), 0u8..4, any::<bool>(), any::<u16>(), macs.clone(), macs, any::<[u32; 2]>()),
    )
        .prop_map(|((dl_type, nw_proto, [s, d, t], (sp, dp, flags), (it, ic)), rest)| {
            let ((nw_tos, nw_ttl, label), nw_frag, tagged, tci, sha, tha, [a, b]) = rest;
            let icmp = nw_proto == IPPROTO_ICMPV6;
            FlowKey {
                in_port: 4,
                dl_src: [2, 0, 0, 0, 0, 1],
                dl_dst: [0x33, 0x33, 0, 0, 0, 1],
                dl_type,
                vlan_tci: if tagged { tci | VLAN_CFI } else { 0 },
                nw_src: a,
                nw_dst: b,
                ipv6_src: s,
                ipv6_dst: d,
                nd_target: t,
                ipv6_label: label,
                nw_proto,
                nw_tos,
                nw_ttl,
                nw_frag,
                tp_src: if icmp { it } else { sp },
                tp_dst: if icmp { ic } else { dp },
                tcp_flags: flags,
                arp_sha: sha,
                arp_tha: tha,
                ..FlowKey::ZERO
            }
        })
}

/// The upper-layer checksum of a built IPv6 frame verifies (pseudo-header included).
fn upper_checksum_ok(f: &[u8], k: &FlowKey) -> bool {
    let l3 = if k.vlan_tci & VLAN_CFI != 0 { 18 } else { 14 };
    let plen = usize::from(u16::from_be_bytes([f[l3 + 4], f[l3 + 5]]));
    let mut upper = &f[l3 + 40..l3 + 40 + plen];
    if k.nw_frag & FLOW_NW_FRAG_ANY != 0 {
        upper = &upper[8..];
    }
    let mut pseudo = [0u8; 40];
    pseudo[..32].copy_from_slice(&f[l3 + 8..l3 + 40]);
    pseudo[32..36].copy_from_slice(&(upper.len() as u32).to_be_bytes());
    pseudo[39] = k.nw_proto;
    fold(sum16(sum16(0, &pseudo), upper)) == 0
}

proptest! {
    /// Both parsers read back what `build_frame` wrote: `k.wire()` (the datapath without a
    /// fragment's ports, as for IPv4).
    #[test]
    fn ipv6_arp_nd_round_trip(k in wide_key()) {
        let f = build_frame(&k);
        let w = k.wire();
        prop_assert_eq!(extract(&f, 4).key().copied(), Some(w));
        let mut dp = w;
        if dp.nw_frag != 0 {
            (dp.tp_src, dp.tp_dst) = (0, 0);
        }
        prop_assert_eq!(extract_datapath(&f, 4), Some(dp));
        prop_assert_eq!(w.wire(), w, "wire() is idempotent");
        if k.dl_type == ETH_TYPE_IPV6
            && k.nw_frag & FLOW_NW_FRAG_LATER == 0
            && matches!(k.nw_proto, IPPROTO_TCP | IPPROTO_UDP | IPPROTO_ICMPV6)
        {
            prop_assert!(upper_checksum_ok(&f, &k));
        }
    }

    /// A frame cut anywhere: no panic; the capture parser gives the whole key (but for ND options)
    /// or says truncated;
    /// the datapath keeps the L2 fields.
    #[test]
    fn cut_ipv6_frames(k in wide_key(), cut in 0usize..120) {
        let f = build_frame(&k);
        let cut = cut.min(f.len());
        match extract(&f[..cut], 4) {
            Extract::Truncated { .. } => {}
            // ND's target and options are read as OVS's parse_icmpv6 does, which ends the walk
            // at a cut without an error: a snapped capture keeps what it has of them.
            Extract::Other(got) => {
                let w = k.wire();
                let no_tll = FlowKey { arp_tha: [0; 6], ..w };
                let no_opts = FlowKey { arp_sha: [0; 6], ..no_tll };
                let no_nd = FlowKey { nd_target: 0, ..no_opts };
                prop_assert!([w, no_tll, no_opts, no_nd].contains(&got), "{:?} from {:?}", got, w);
            }
            other => prop_assert!(false, "{:?}", other),
        }
        if let Some(g) = extract_datapath(&f[..cut], 4) {
            prop_assert_eq!(g.dl_src, k.dl_src);
        }
    }
}

#[rustfmt::skip]
const TCP6_SYN: [u8; 74] = [
    0x33, 0x33, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 0x01, 0x86, 0xdd,
    0x6b, 0x81, 0x23, 0x45,         // version 6, class 0xb8, label 0x12345
    0x00, 0x14, 0x06, 0x40,         // payload 20, TCP, hop limit 64
    0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
    0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
    0x9c, 0x40, 0x01, 0xbb,         // 40000 → 443
    0, 0, 0, 0, 0, 0, 0, 0,
    0x50, 0x02, 0xff, 0xff, 0xb6, 0x72, 0x00, 0x00, // offset 5, SYN, window, checksum
];

fn syn_key() -> FlowKey {
    FlowKey {
        in_port: 4,
        dl_src: [2, 0, 0, 0, 0, 1],
        dl_dst: [0x33, 0x33, 0, 0, 0, 1],
        nw_tos: 0xb8,
        nw_ttl: 64,
        ipv6_label: 0x12345,
        tcp_flags: 0x002,
        ..FlowKey::ipv6(SRC, DST, IPPROTO_TCP, 40000, 443)
    }
}

#[test]
fn golden_ipv6_tcp_syn() {
    assert_eq!(extract(&TCP6_SYN, 4), Extract::Other(syn_key()));
    assert_eq!(extract_datapath(&TCP6_SYN, 4), Some(syn_key()));
    assert_eq!(build_frame(&syn_key()), TCP6_SYN.to_vec());
}

#[rustfmt::skip]
const ICMP6_NS: [u8; 86] = [
    0x33, 0x33, 0xff, 0, 0, 2, 0x02, 0, 0, 0, 0, 0x01, 0x86, 0xdd,
    0x60, 0, 0, 0, 0x00, 0x20, 0x3a, 0xff, // payload 32, ICMPv6, hop limit 255
    0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
    0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 2,
    0x87, 0x00, 0x7a, 0x97, 0, 0, 0, 0, // NS, checksum, reserved
    0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, // target
    0x01, 0x01, 0x02, 0, 0, 0, 0, 0x01, // SLL option
];

fn ns_key() -> FlowKey {
    FlowKey {
        in_port: 4,
        dl_src: [2, 0, 0, 0, 0, 1],
        dl_dst: [0x33, 0x33, 0xff, 0, 0, 2],
        nw_ttl: 255,
        nd_target: 0xfe80_0000_0000_0000_0000_0000_0000_0002,
        arp_sha: [2, 0, 0, 0, 0, 1],
        ..FlowKey::ipv6(
            0xfe80_0000_0000_0000_0000_0000_0000_0001,
            0xff02_0000_0000_0000_0000_0001_ff00_0002,
            IPPROTO_ICMPV6,
            135,
            0,
        )
    }
}

#[test]
fn golden_icmpv6_ns_with_sll() {
    assert_eq!(extract(&ICMP6_NS, 4), Extract::Other(ns_key()));
    assert_eq!(extract_datapath(&ICMP6_NS, 4), Some(ns_key()));
    assert_eq!(build_frame(&ns_key()), ICMP6_NS.to_vec());
    // OVS's parse_icmpv6: a second SLL option makes the ND fields all zero.
    let mut dup = ICMP6_NS.to_vec();
    dup.extend_from_slice(&[0x01, 0x01, 0x02, 0, 0, 0, 0, 0x09]);
    dup[18..20].copy_from_slice(&40u16.to_be_bytes());
    let none = FlowKey { nd_target: 0, arp_sha: [0; 6], ..ns_key() };
    assert_eq!(extract_datapath(&dup, 4), Some(none));
    assert_eq!(extract(&dup, 4), Extract::Other(none));
    // An option of length 0 ends the walk; what was read stays (here: nothing yet).
    let mut zero = ICMP6_NS;
    zero[79] = 0;
    assert_eq!(extract_datapath(&zero, 4), Some(FlowKey { arp_sha: [0; 6], ..ns_key() }));
    // A target cut short: type and code only.
    let mut short = ICMP6_NS[..70].to_vec();
    short[18..20].copy_from_slice(&16u16.to_be_bytes());
    assert_eq!(extract_datapath(&short, 4), Some(none));
    // Code 1 is not ND: no ND fields.
    let mut code1 = ICMP6_NS;
    code1[55] = 1;
    assert_eq!(extract_datapath(&code1, 4), Some(FlowKey { tp_dst: 1, ..none }));
}

#[test]
fn golden_arp_reply_with_both_hardware_addresses() {
    #[rustfmt::skip]
    let frame = [
        0x52, 0x54, 0, 0x12, 0x34, 0x56, 0x02, 0, 0, 0, 0, 0x07, 0x08, 0x06,
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02,
        0x02, 0, 0, 0, 0, 0x07, 192, 168, 1, 1,
        0x52, 0x54, 0, 0x12, 0x34, 0x56, 192, 168, 1, 2,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let want = FlowKey {
        in_port: 4,
        dl_dst: [0x52, 0x54, 0, 0x12, 0x34, 0x56],
        dl_src: [2, 0, 0, 0, 0, 7],
        dl_type: ETH_TYPE_ARP,
        nw_src: 0xc0a8_0101,
        nw_dst: 0xc0a8_0102,
        nw_proto: 2,
        arp_sha: [2, 0, 0, 0, 0, 7],
        arp_tha: [0x52, 0x54, 0, 0x12, 0x34, 0x56],
        ..FlowKey::ZERO
    };
    assert_eq!(extract(&frame, 4), Extract::Other(want));
    assert_eq!(extract_datapath(&frame, 4), Some(want));
    assert_eq!(build_frame(&want), frame.to_vec());
    // A short ARP body: OVS keeps the L2 fields; the capture parser says truncated.
    let l2 = FlowKey { nw_src: 0, nw_dst: 0, nw_proto: 0, arp_sha: [0; 6], arp_tha: [0; 6], ..want };
    assert_eq!(extract_datapath(&frame[..14 + 27], 4), Some(l2));
    assert_eq!(extract(&frame[..14 + 27], 4), Extract::Truncated { layer: "arp" });
}

#[test]
fn extension_headers_and_fragments_as_ovs() {
    // Hop-by-hop (8 bytes) then TCP: nw_proto is TCP.
    let mut f = TCP6_SYN[..54].to_vec();
    f[20] = IPPROTO_HOPOPTS;
    f[18..20].copy_from_slice(&28u16.to_be_bytes());
    f.extend_from_slice(&[IPPROTO_TCP, 0, 1, 4, 0, 0, 0, 0]);
    f.extend_from_slice(&TCP6_SYN[54..]);
    assert_eq!(extract_datapath(&f, 4), Some(syn_key()));
    assert_eq!(extract(&f, 4), Extract::Other(syn_key()));
    // The hop-by-hop header says 16 bytes but the payload ends first: OVS keeps the addresses
    // only; a capture is truncated.
    let mut cut = f[..54 + 8].to_vec();
    cut[18..20].copy_from_slice(&8u16.to_be_bytes());
    cut[55] = 1;
    let addrs = FlowKey {
        in_port: 4,
        dl_src: syn_key().dl_src,
        dl_dst: syn_key().dl_dst,
        dl_type: ETH_TYPE_IPV6,
        ipv6_src: SRC,
        ipv6_dst: DST,
        ..FlowKey::ZERO
    };
    assert_eq!(extract_datapath(&cut, 4), Some(addrs));
    assert_eq!(extract(&cut, 4), Extract::Truncated { layer: "ipv6 extension header" });
    // Fewer than 8 bytes for an extension header: the same.
    cut.truncate(54 + 4);
    cut[18..20].copy_from_slice(&4u16.to_be_bytes());
    assert_eq!(extract_datapath(&cut, 4), Some(addrs));
    // A later fragment: nw_proto 44 (OVS), no L4 fields.
    let later = build_frame(&FlowKey { nw_frag: FLOW_NW_FRAG_LATER, ..syn_key() });
    let k = extract_datapath(&later, 4).unwrap();
    assert_eq!((k.nw_proto, k.nw_frag, k.tp_src, k.tcp_flags), (IPPROTO_FRAGMENT, 3, 0, 0));
    // A first fragment: the TCP flags, no ports in the datapath (as for IPv4).
    let first = build_frame(&FlowKey { nw_frag: FLOW_NW_FRAG_ANY, ..syn_key() });
    let k = extract_datapath(&first, 4).unwrap();
    assert_eq!((k.nw_proto, k.nw_frag, k.tp_src, k.tcp_flags), (IPPROTO_TCP, 1, 0, 2));
    // An empty destination-options header announcing "no next header".
    let none = build_frame(&FlowKey { nw_proto: IPPROTO_DSTOPTS, ..syn_key() });
    assert_eq!(extract_datapath(&none, 4).unwrap().nw_proto, IPPROTO_NONE);
    // A payload length past the frame: OVS drops the IPv6 fields; a capture uses what is there.
    let mut long = TCP6_SYN;
    long[19] = 0x40;
    let l2 =
        FlowKey { in_port: 4, dl_src: addrs.dl_src, dl_dst: addrs.dl_dst, dl_type: ETH_TYPE_IPV6, ..FlowKey::ZERO };
    assert_eq!(extract_datapath(&long, 4), Some(l2));
    assert_eq!(extract(&long, 4), Extract::Other(syn_key()));
    // Version 4 in an IPv6 header: malformed for a capture; OVS does not look.
    let mut v4 = TCP6_SYN;
    v4[14] = 0x4b;
    assert!(matches!(extract(&v4, 4), Extract::Malformed { layer: "ipv6", .. }));
    assert_eq!(extract_datapath(&v4, 4), Some(syn_key()));
}

proptest! {
    /// The view's IPv6 setters: new addresses and a decremented hop limit read back, and the
    /// upper-layer checksum still verifies.
    #[test]
    fn ipv6_setters_keep_the_checksum(k in wide_key(), src in any::<u128>(), dst in any::<u128>()) {
        prop_assume!(k.dl_type == ETH_TYPE_IPV6);
        let mut f = build_frame(&k);
        let mut v = super::Frame::new_checked(&mut f[..]).unwrap();
        prop_assert!(v.set_ipv6_src(src));
        prop_assert!(v.set_ipv6_dst(dst));
        let w = k.wire();
        prop_assert_eq!(v.dec_hop_limit(), Some(w.nw_ttl - 1));
        prop_assert_eq!(v.ipv6_addrs(), Some((src, dst)));
        let want = FlowKey { ipv6_src: src, ipv6_dst: dst, nw_ttl: w.nw_ttl - 1, ..w };
        prop_assert_eq!(extract(&f, 4).key().copied(), Some(want));
        if k.nw_frag & FLOW_NW_FRAG_LATER == 0 && matches!(k.nw_proto, IPPROTO_TCP | IPPROTO_UDP | IPPROTO_ICMPV6) {
            prop_assert!(upper_checksum_ok(&f, &k));
        }
    }
}

#[test]
fn view_setters_need_a_usable_ipv6_header() {
    let mut long = TCP6_SYN;
    long[19] = 0x40; // payload length past the frame
    let mut v = super::Frame::new_checked(&mut long[..]).unwrap();
    assert_eq!((v.hop_limit(), v.dec_hop_limit(), v.set_ipv6_src(1)), (None, None, false));
    let mut zero = TCP6_SYN;
    zero[21] = 0;
    let mut v = super::Frame::new_checked(&mut zero[..]).unwrap();
    assert_eq!(v.dec_hop_limit(), Some(0));
}

proptest! {
    /// The datapath's narrow form of a key on the wire is the wire key narrowed, for every type
    /// (IPv6 and ARP, which have wide fields, and IPv4, VLAN, 802.3 and other ethertypes, which
    /// have none), with or without wide members set on the way in.
    #[test]
    fn wire_narrow_is_the_wire_key_narrowed(
        k in wide_key(),
        dl_type in prop_oneof![Just(None), Just(Some(crate::key::ETH_TYPE_IP)), Just(Some(0x8100)), Just(Some(0x0500)), Just(Some(0x88cc))],
        metadata in prop_oneof![Just(0u64), any::<u64>()],
        plain in any::<bool>(),
    ) {
        let mut k = FlowKey { dl_type: dl_type.unwrap_or(k.dl_type), metadata, ..k };
        if plain {
            k = k.narrow_part().widen();
        }
        prop_assert_eq!(k.wire_narrow(), k.wire().narrow());
        prop_assert_eq!(k.narrow(), (k.narrow_part().widen() == k).then(|| k.narrow_part()));
        let mask = k.narrow_part();
        let mut wc = FlowKey { ipv6_src: 7, ..FlowKey::ZERO };
        mask.or_into(&mut wc);
        prop_assert_eq!(wc, FlowKey { ipv6_src: 7, ..FlowKey::ZERO }.union(&mask.widen()));
    }
}
