use super::*;
use proptest::prelude::*;
use std::borrow::Cow;
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter as FilePcapWriter};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{InterfaceDescriptionBlock, InterfaceDescriptionOption};
use pcap_file::pcapng::blocks::simple_packet::SimplePacketBlock;
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::{DataLink, Endianness, TsResolution};

use crate::frame::*;
use crate::key::*;

/// TCP SYN 10.0.0.1:12345 → 192.168.1.2:80 in VLAN 100 (PCP 5), DSCP EF, TTL 64. Checksums
/// computed independently (Python).
#[rustfmt::skip]
const TCP_SYN_VLAN: [u8; 60] = [
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, // dst
    0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, // src
    0x81, 0x00, 0xa0, 0x64,             // 802.1Q, PCP 5, VID 100
    0x08, 0x00,                         // IPv4
    0x45, 0xb8, 0x00, 0x28, 0x00, 0x00, 0x00, 0x00, 0x40, 0x06, 0xae, 0x6d,
    0x0a, 0x00, 0x00, 0x01, 0xc0, 0xa8, 0x01, 0x02,
    0x30, 0x39, 0x00, 0x50,             // ports 12345 → 80
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x50, 0x02, 0xff, 0xff, 0xb3, 0xae, 0x00, 0x00, // offset 5, SYN, window, checksum
    0x00, 0x00,                         // Ethernet padding
];

fn golden_syn_key() -> FlowKey {
    FlowKey {
        in_port: 7,
        dl_dst: [0x00, 0x11, 0x22, 0x33, 0x44, 0x55],
        dl_src: [0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb],
        dl_type: ETH_TYPE_IP,
        vlan_tci: 0xa064 | VLAN_CFI,
        nw_src: 0x0a00_0001,
        nw_dst: 0xc0a8_0102,
        nw_proto: IPPROTO_TCP,
        nw_tos: 0xb8,
        nw_frag: 0,
        tp_src: 12345,
        tp_dst: 80,
        tcp_flags: 0x002,
        nw_ttl: 64,
        ..FlowKey::ZERO
    }
}

#[test]
fn golden_tcp_syn_with_vlan() {
    assert_eq!(extract(&TCP_SYN_VLAN, 7), Extract::Ipv4(golden_syn_key()));
    // build_frame makes the same choices as the hand-written frame, checksums included.
    assert_eq!(build_frame(&golden_syn_key()), TCP_SYN_VLAN.to_vec());
    // ECN bits are part of nw_tos, as in OVS; the wire CFI/DEI bit is folded into "tag present".
    let mut f = TCP_SYN_VLAN;
    f[19] = 0xbb;
    f[14] = 0xb0;
    assert_eq!(extract(&f, 7), Extract::Ipv4(FlowKey { nw_tos: 0xbb, ..golden_syn_key() }));
}

#[test]
fn golden_icmp_echo() {
    #[rustfmt::skip]
    let frame = [
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00,
        0x45, 0x00, 0x00, 0x20, 0xab, 0xcd, 0x40, 0x00, 0x40, 0x01, 0x79, 0x0b,
        10, 1, 1, 1, 10, 1, 1, 2,
        0x08, 0x00, 0x21, 0x04, 0x12, 0x34, 0x00, 0x01, b'a', b'b', b'c', b'd',
        // 14 bytes of padding to 60
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let want = FlowKey {
        in_port: 1,
        dl_dst: [2, 0, 0, 0, 0, 2],
        dl_src: [2, 0, 0, 0, 0, 1],
        dl_type: ETH_TYPE_IP,
        nw_src: 0x0a01_0101,
        nw_dst: 0x0a01_0102,
        nw_proto: IPPROTO_ICMP,
        tp_src: 8,
        tp_dst: 0,
        nw_ttl: 64,
        ..FlowKey::default()
    };
    assert_eq!(extract(&frame, 1), Extract::Ipv4(want));
    // Echo reply code 0 type 0; destination unreachable type 3 code 13.
    let mut unreach = frame;
    unreach[34] = 3;
    unreach[35] = 13;
    let k = *extract(&unreach, 1).key().unwrap();
    assert_eq!((k.tp_src, k.tp_dst), (3, 13));
}

#[test]
fn golden_arp_request() {
    #[rustfmt::skip]
    let frame = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x08, 0x06,
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01,
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 192, 168, 1, 2,
        0, 0, 0, 0, 0, 0, 192, 168, 1, 1,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let want = FlowKey {
        in_port: 3,
        dl_dst: [0xff; 6],
        dl_src: [0x52, 0x54, 0x00, 0x12, 0x34, 0x56],
        dl_type: ETH_TYPE_ARP,
        nw_src: 0xc0a8_0102,
        nw_dst: 0xc0a8_0101,
        nw_proto: 1,
        arp_sha: [0x52, 0x54, 0x00, 0x12, 0x34, 0x56],
        ..FlowKey::default()
    };
    assert_eq!(extract(&frame, 3), Extract::Other(want));
    // Opcode above 255: OVS keeps only the addresses.
    let mut big_op = frame;
    big_op[20] = 0x01;
    assert_eq!(extract(&big_op, 3).key().unwrap().nw_proto, 0);
    // Not Ethernet/IPv4 ARP: L2 fields only.
    let mut other_hw = frame;
    other_hw[15] = 6;
    let l2_only = FlowKey { nw_src: 0, nw_dst: 0, nw_proto: 0, arp_sha: [0; 6], ..want };
    assert_eq!(extract(&other_hw, 3), Extract::Other(l2_only));
    // Cut inside the ARP body.
    assert_eq!(extract(&frame[..41], 3), Extract::Truncated { layer: "arp" });
    // The builder writes the same ARP body (sender and target MAC from arp_sha/arp_tha).
    assert_eq!(build_frame(&want), frame.to_vec());
}

#[test]
fn ipv6_bare_header() {
    let mut frame = vec![0u8; 14 + 40 + 8];
    frame[..6].copy_from_slice(&[0x33, 0x33, 0, 0, 0, 1]);
    frame[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
    frame[12..14].copy_from_slice(&ETH_TYPE_IPV6.to_be_bytes());
    frame[14] = 0x60;
    frame[20] = IPPROTO_UDP;
    let want = FlowKey {
        in_port: 2,
        dl_dst: [0x33, 0x33, 0, 0, 0, 1],
        dl_src: [2, 0, 0, 0, 0, 9],
        dl_type: ETH_TYPE_IPV6,
        nw_proto: IPPROTO_UDP,
        ..FlowKey::default()
    };
    // Payload length 0 (as a TSO capture): the frame's end is used; a UDP header of zeros.
    assert_eq!(extract(&frame, 2), Extract::Other(want));
    // A bare IPv6 ethertype with nothing after it announces a header it does not have.
    assert_eq!(extract(&frame[..14], 2), Extract::Truncated { layer: "ipv6" });
    assert_eq!(extract(&frame[..14 + 39], 2), Extract::Truncated { layer: "ipv6" });
}

#[test]
fn qinq_keeps_outer_tci_and_inner_type() {
    let mut f = TCP_SYN_VLAN.to_vec();
    // Insert an 802.1ad outer tag (VID 7) before the 802.1Q tag.
    f.splice(12..12, [0x88, 0xa8, 0x00, 0x07]);
    let k = *extract(&f, 7).key().unwrap();
    assert_eq!(k.vlan_tci, 0x0007 | VLAN_CFI);
    assert_eq!(k.dl_type, ETH_TYPE_IP);
    assert_eq!((k.tp_src, k.tp_dst, k.tcp_flags), (12345, 80, 2));
    assert_eq!(extract(&f[..19], 7), Extract::Truncated { layer: "vlan" });
    assert_eq!(extract(&f[..13], 7), Extract::Truncated { layer: "ethernet" });
}

#[test]
fn ipv4_options_padding_and_total_length() {
    let mut key = golden_syn_key();
    key.vlan_tci = 0;
    let plain = build_frame(&key);
    // Add 4 bytes of options (IHL 6): total length 44, checksum not verified (as OVS).
    let mut f = plain[..34].to_vec();
    f.extend_from_slice(&[1, 1, 1, 0]);
    f.extend_from_slice(&plain[34..54]);
    f[14] = 0x46;
    f[16..18].copy_from_slice(&44u16.to_be_bytes());
    f.extend_from_slice(&[0xee; 100]); // trailing garbage/padding past the total length
    assert_eq!(extract(&f, 7), Extract::Ipv4(key));
    // IHL covering more than the frame: truncated IPv4; IHL < 5 or total < header: malformed.
    let mut g = f.clone();
    g[14] = 0x4f;
    assert_eq!(extract(&g[..60], 7), Extract::Truncated { layer: "ipv4" });
    g[14] = 0x44;
    assert!(matches!(extract(&g, 7), Extract::Malformed { layer: "ipv4", .. }));
    let mut h = f.clone();
    h[16..18].copy_from_slice(&20u16.to_be_bytes());
    assert!(matches!(extract(&h, 7), Extract::Malformed { layer: "ipv4", .. }));
    let mut v6 = f.clone();
    v6[14] = 0x66;
    assert!(matches!(extract(&v6, 7), Extract::Malformed { layer: "ipv4", .. }));
    // Total length 40 (header + 16 bytes): the TCP header is cut by the IP length itself.
    let mut short = f.clone();
    short[16..18].copy_from_slice(&40u16.to_be_bytes());
    assert_eq!(extract(&short, 7), Extract::Truncated { layer: "tcp" });
    // Total length 0 (TSO): the frame's end is used.
    let mut tso = f.clone();
    tso[16..18].copy_from_slice(&0u16.to_be_bytes());
    assert_eq!(extract(&tso, 7), Extract::Ipv4(key));
    // Snap length cut after the TCP header: the total length may exceed the frame.
    let mut snapped = f[..58].to_vec();
    snapped[16..18].copy_from_slice(&1500u16.to_be_bytes());
    assert_eq!(extract(&snapped, 7), Extract::Ipv4(key));
    // TCP data offset below 5.
    let mut bad_tcp = f.clone();
    bad_tcp[38 + 12] = 0x40;
    assert_eq!(extract(&bad_tcp, 7), Extract::Malformed { layer: "tcp", reason: "data offset below 5 words" });
}

#[test]
fn fragments() {
    let mut key = golden_syn_key();
    key.nw_frag = FLOW_NW_FRAG_ANY;
    // First fragment (MF): L4 fields present.
    let first = build_frame(&key);
    assert_eq!(first[18 + 6], 0x20);
    assert_eq!(extract(&first, 7), Extract::Ipv4(key));
    // Later fragment (offset != 0, MF clear): no L4 fields, even though bytes follow.
    let mut later = first.clone();
    later[18 + 6..18 + 8].copy_from_slice(&0x0001u16.to_be_bytes());
    let k = *extract(&later, 7).key().unwrap();
    assert_eq!(k.nw_frag, FLOW_NW_FRAG_ANY | FLOW_NW_FRAG_LATER);
    assert_eq!((k.tp_src, k.tp_dst, k.tcp_flags), (0, 0, 0));
    // A later fragment too short for any L4 header is still a complete key.
    assert!(matches!(extract(&later[..18 + 20], 7), Extract::Ipv4(_)));
}

#[test]
fn llc_snap_as_ovs() {
    let mut f = vec![0u8; 60];
    f[12..14].copy_from_slice(&46u16.to_be_bytes()); // 802.3 length
    f[14..17].copy_from_slice(&[0x42, 0x42, 0x03]); // STP LLC
    assert_eq!(extract(&f, 1).key().unwrap().dl_type, FLOW_DL_TYPE_NONE);
    // SNAP with OUI 0 carrying IPv4: parsed as IPv4 after the 8-byte LLC/SNAP header.
    let mut key = golden_syn_key();
    key.vlan_tci = 0;
    let plain = build_frame(&key);
    let mut snap = plain[..12].to_vec();
    snap.extend_from_slice(&[0x00, 0x30, 0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00]);
    snap.extend_from_slice(&plain[14..]);
    assert_eq!(extract(&snap, 7), Extract::Ipv4(key));
}

#[test]
fn udp_sctp_other_proto_and_crc32c() {
    // RFC 3720 B.4 check value of CRC32c.
    assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    for proto in [IPPROTO_UDP, IPPROTO_SCTP] {
        let key = FlowKey::ipv4(0x0102_0304, 0x0506_0708, proto, 53, 5353);
        let f = build_frame(&key);
        assert_eq!(f.len(), MIN_FRAME_LEN);
        assert_eq!(extract(&f, 1), Extract::Ipv4(FlowKey { nw_ttl: 64, ..key }));
    }
    // GRE: ports cannot be carried.
    let gre = FlowKey::ipv4(1, 2, 47, 1000, 2000);
    let k = *extract(&build_frame(&gre), 1).key().unwrap();
    assert_eq!((k.nw_proto, k.tp_src, k.tp_dst), (47, 0, 0));
    assert_eq!(k, gre.wire());
}

/// Checksums of built frames verify (sum over header incl. checksum folds to 0).
#[test]
fn built_checksums_verify() {
    for proto in [IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMP] {
        let key = FlowKey::ipv4(0xc0a8_0001, 0x0a00_00fe, proto, 40000, 443);
        let key = FlowKey { tp_src: key.tp_src & 0xff, ..key };
        let f = build_frame(&key);
        let ip = &f[14..34];
        assert_eq!(fold(sum16(0, ip)), 0);
        let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
        let l4 = &f[34..14 + total];
        let mut pseudo = sum16(0, &f[26..34]);
        pseudo += u64::from(proto) + l4.len() as u64;
        let sum = if proto == IPPROTO_ICMP { sum16(0, l4) } else { sum16(pseudo, l4) };
        assert_eq!(fold(sum), 0, "proto {proto}");
    }
}

fn arb_ipv4_key() -> impl Strategy<Value = FlowKey> {
    (
        any::<[u8; 6]>(),
        any::<[u8; 6]>(),
        prop_oneof![Just(0u16), any::<u16>().prop_map(|t| t | VLAN_CFI)],
        any::<(u32, u32, u32)>(),
        prop_oneof![Just(IPPROTO_TCP), Just(IPPROTO_UDP), Just(IPPROTO_ICMP), Just(IPPROTO_SCTP), any::<u8>()],
        any::<u8>(),
        prop_oneof![Just(0u8), Just(FLOW_NW_FRAG_ANY), Just(FLOW_NW_FRAG_ANY | FLOW_NW_FRAG_LATER)],
        any::<(u16, u16, u16)>(),
    )
        .prop_map(|(dl_src, dl_dst, vlan_tci, (nw_src, nw_dst, in_port), proto, tos, frag, (sp, dp, flags))| {
            let mut k = FlowKey {
                in_port,
                dl_src,
                dl_dst,
                dl_type: ETH_TYPE_IP,
                vlan_tci,
                nw_src,
                nw_dst,
                nw_proto: proto,
                nw_tos: tos,
                nw_frag: frag,
                nw_ttl: tos.rotate_left(3) | 1,
                ..FlowKey::default()
            };
            if frag & FLOW_NW_FRAG_LATER == 0 {
                match proto {
                    IPPROTO_TCP => (k.tp_src, k.tp_dst, k.tcp_flags) = (sp, dp, flags & TCP_FLAGS_MASK),
                    IPPROTO_UDP | IPPROTO_SCTP => (k.tp_src, k.tp_dst) = (sp, dp),
                    IPPROTO_ICMP => (k.tp_src, k.tp_dst) = (sp & 0xff, dp & 0xff),
                    _ => {}
                }
            }
            k
        })
}

/// Bytes up to the end of the last header extract needs for a frame built from `key`.
fn headers_len(key: &FlowKey) -> usize {
    let l2 = if key.vlan_tci & VLAN_CFI != 0 { 18 } else { 14 };
    if key.nw_frag & FLOW_NW_FRAG_LATER != 0 {
        return l2 + 20;
    }
    l2 + 20
        + match key.nw_proto {
            IPPROTO_TCP => 20,
            IPPROTO_UDP | IPPROTO_ICMP => 8,
            IPPROTO_SCTP => 12,
            _ => 0,
        }
}

fn arb_any_key() -> impl Strategy<Value = FlowKey> {
    (
        any::<([u8; 6], [u8; 6], u32, u16, u32, u32)>(),
        prop_oneof![
            Just(ETH_TYPE_IP),
            Just(ETH_TYPE_ARP),
            Just(ETH_TYPE_RARP),
            Just(ETH_TYPE_IPV6),
            Just(ETH_TYPE_VLAN),
            Just(0x0100u16),
            any::<u16>()
        ],
        any::<(u16, u16, u16, u8, u8, u8)>(),
    )
        .prop_map(|((dl_src, dl_dst, in_port, vlan_tci, nw_src, nw_dst), dl_type, t)| {
            let (tp_src, tp_dst, tcp_flags, nw_proto, nw_tos, nw_frag) = t;
            let nw_proto =
                [IPPROTO_TCP, IPPROTO_UDP, IPPROTO_SCTP, IPPROTO_ICMP, nw_proto][usize::from(nw_frag >> 5) % 5];
            FlowKey {
                nw_src,
                nw_dst,
                tp_src,
                tp_dst,
                in_port,
                dl_type,
                vlan_tci,
                tcp_flags,
                nw_proto,
                nw_tos,
                nw_frag: nw_frag & 3,
                nw_ttl: nw_tos.wrapping_mul(7).max(1),
                dl_src,
                dl_dst,
                ..FlowKey::ZERO
            }
        })
}

proptest! {
    #[test]
    fn ipv4_round_trip(key in arb_ipv4_key()) {
        let frame = build_frame(&key);
        // Headers, a first fragment's payload rounded up to 8 bytes, padding to 60.
        let l2 = headers_len(&FlowKey { nw_frag: FLOW_NW_FRAG_LATER, ..key });
        let l4 = headers_len(&key) - l2;
        let l4 = if key.nw_frag == FLOW_NW_FRAG_ANY { l4.div_ceil(8) * 8 } else { l4 };
        prop_assert_eq!(frame.len(), MIN_FRAME_LEN.max(l2 + l4));
        prop_assert_eq!(key.wire(), key);
        prop_assert_eq!(extract(&frame, key.in_port), Extract::Ipv4(key));
    }

    #[test]
    fn truncated_at_every_length(key in arb_ipv4_key()) {
        let frame = build_frame(&key);
        let need = headers_len(&key);
        for len in 0..frame.len() {
            let got = extract(&frame[..len], key.in_port);
            if len < need {
                prop_assert!(matches!(got, Extract::Truncated { .. }), "len {}: {:?}", len, got);
            } else {
                prop_assert_eq!(got, Extract::Ipv4(key), "len {}", len);
            }
        }
    }

    #[test]
    fn any_key_reads_back_as_wire_key(key in arb_any_key()) {
        let got = extract(&build_frame(&key), key.in_port);
        prop_assert_eq!(got.key(), Some(&key.wire()));
        let (_, stats) = write_pcap(&[key], None);
        let w = key.wire();
        prop_assert_eq!(stats.ports_dropped == 1, (key.tp_src, key.tp_dst) != (w.tp_src, w.tp_dst));
    }

    #[test]
    fn extract_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128), port in any::<u32>()) {
        if let Some(k) = extract(&bytes, port).key() {
            prop_assert_eq!(k.in_port, port);
        }
    }

    #[test]
    fn extract_never_panics_on_mutated_frames(
        key in arb_ipv4_key(),
        edits in proptest::collection::vec((0usize..60, any::<u8>()), 1..6),
        cut in 0usize..=60,
    ) {
        let mut frame = build_frame(&key);
        for (at, b) in edits {
            frame[at] = b;
        }
        let _ = extract(&frame[..cut], key.in_port);
    }

    #[test]
    fn parse_capture_never_panics_on_damaged_files(
        keys in proptest::collection::vec(arb_ipv4_key(), 0..4),
        ng in any::<bool>(),
        big in any::<bool>(),
        edits in proptest::collection::vec((any::<proptest::sample::Index>(), any::<u8>(), any::<bool>()), 0..8),
        cut in any::<proptest::sample::Index>(),
    ) {
        let endianness = if big { Endianness::Big } else { Endianness::Little };
        let mut bytes = if ng { pcapng_of(&keys, endianness, None) } else { write_pcap(&keys, None).0 };
        // Half the edits hit the file, section and interface headers.
        for (at, b, near_start) in edits {
            let i = at.index(if near_start { bytes.len().min(64) } else { bytes.len() });
            bytes[i] = b;
        }
        let n = cut.index(bytes.len() + 1);
        if let Ok(c) = parse_capture("fuzz", &bytes[..n], 1) {
            let s = c.stats;
            prop_assert_eq!(s.frames, s.ipv4 + s.other + s.truncated + s.malformed);
            prop_assert_eq!(c.keys.len(), s.ipv4 + s.other);
            prop_assert_eq!(c.keys.len(), c.timestamps_ns.len());
        }
    }

    #[test]
    fn pcap_round_trip(keys in proptest::collection::vec(arb_ipv4_key(), 0..20), in_port in any::<u32>()) {
        let timestamps: Vec<u64> = (0..keys.len() as u64).map(|i| 1_700_000_000_000_000_000 + i * 1_234_000).collect();
        let (bytes, stats) = write_pcap(&keys, Some(&timestamps));
        prop_assert_eq!(stats, WriteStats { packets: keys.len(), ..WriteStats::default() });
        let c = parse_capture("rt.pcap", &bytes, in_port).unwrap();
        let want: Vec<FlowKey> = keys.iter().map(|k| FlowKey { in_port, ..*k }).collect();
        prop_assert_eq!(c.keys, want);
        prop_assert_eq!(c.timestamps_ns, timestamps);
        prop_assert_eq!(c.stats, CaptureStats { frames: keys.len(), ipv4: keys.len(), ..CaptureStats::default() });
    }
}

/// A pcapng of `keys` built with pcap-file's writer: interface 0 Ethernet (`tsresol` given or
/// the default microseconds), packets `i` at `i * 1000 + 7` units.
fn pcapng_of(keys: &[FlowKey], endianness: Endianness, tsresol: Option<u8>) -> Vec<u8> {
    let mut w = PcapNgWriter::with_endianness(Vec::new(), endianness).unwrap();
    let options = tsresol.map(InterfaceDescriptionOption::IfTsResol).into_iter().collect();
    w.write_pcapng_block(InterfaceDescriptionBlock { linktype: DataLink::ETHERNET, snaplen: 0xffff, options }).unwrap();
    for (i, key) in keys.iter().enumerate() {
        let frame = build_frame(key);
        let epb = EnhancedPacketBlock {
            interface_id: 0,
            timestamp: Duration::from_nanos(i as u64 * 1000 + 7),
            original_len: frame.len() as u32,
            data: Cow::Owned(frame),
            options: vec![],
        };
        w.write_pcapng_block(epb).unwrap();
    }
    w.into_inner()
}

fn some_keys() -> Vec<FlowKey> {
    vec![
        golden_syn_key(),
        FlowKey::ipv4(0x0a00_0001, 0x0a00_0002, IPPROTO_UDP, 1000, 53).wire(),
        FlowKey::ipv4(0x0a00_0003, 0x0a00_0004, IPPROTO_ICMP, 8, 0).wire(),
    ]
}

#[test]
fn pcapng_read_back_both_byte_orders() {
    let keys = some_keys();
    for endianness in [Endianness::Little, Endianness::Big] {
        let bytes = pcapng_of(&keys, endianness, Some(9));
        let c = parse_capture("t.pcapng", &bytes, 7).unwrap();
        let want: Vec<FlowKey> = keys.iter().map(|k| FlowKey { in_port: 7, ..*k }).collect();
        assert_eq!(c.keys, want);
        assert_eq!(c.timestamps_ns, vec![7, 1007, 2007]);
        assert_eq!(c.stats.ipv4, 3);
    }
    // Default resolution: microseconds.
    let c = parse_capture("t.pcapng", &pcapng_of(&keys, Endianness::Little, None), 7).unwrap();
    assert_eq!(c.timestamps_ns, vec![7_000, 1_007_000, 2_007_000]);
    // Binary resolution 2^-10 s: 1024 units = 1 s.
    let c = parse_capture("t.pcapng", &pcapng_of(&keys[..1], Endianness::Little, Some(0x8a)), 7).unwrap();
    assert_eq!(c.timestamps_ns, vec![7 * 1_000_000_000 / 1024]);
}

#[test]
fn pcapng_non_ethernet_interfaces_and_simple_packets() {
    let key = golden_syn_key();
    let frame = build_frame(&key);
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    w.write_pcapng_block(InterfaceDescriptionBlock { linktype: DataLink::ETHERNET, snaplen: 0, options: vec![] })
        .unwrap();
    w.write_pcapng_block(InterfaceDescriptionBlock { linktype: DataLink::RAW, snaplen: 0, options: vec![] }).unwrap();
    let epb = |iface: u32, us: u64| EnhancedPacketBlock {
        interface_id: iface,
        timestamp: Duration::from_nanos(us),
        original_len: frame.len() as u32,
        data: Cow::Borrowed(&frame),
        options: vec![],
    };
    w.write_pcapng_block(epb(0, 5)).unwrap();
    // Interface 1 is raw IP: the same packet without its Ethernet header and VLAN tag.
    let mut raw = Vec::new();
    assert!(link::from_ethernet(LinkType::Raw, &frame, &mut raw));
    w.write_pcapng_block(EnhancedPacketBlock { data: Cow::Owned(raw.clone()), ..epb(1, 6) }).unwrap();
    // A simple packet block (no timestamp: gets the previous packet's) of a 46-byte frame,
    // stored padded to 48 bytes: only 46 bytes are the frame.
    let arp = FlowKey { dl_type: ETH_TYPE_ARP, nw_src: 1, nw_dst: 2, nw_proto: 2, ..key };
    let arp_frame = build_frame(&arp)[..46].to_vec();
    w.write_pcapng_block(SimplePacketBlock { original_len: 46, data: Cow::Owned(arp_frame) }).unwrap();
    let bytes = w.into_inner();
    let c = parse_capture("mixed.pcapng", &bytes, 7).unwrap();
    let raw_key = FlowKey { dl_src: [0; 6], dl_dst: [0; 6], vlan_tci: 0, ..key };
    assert_eq!(c.keys, vec![key, raw_key, arp.wire()]);
    assert_eq!(c.timestamps_ns, vec![5_000, 6_000, 6_000]);
    assert_eq!(c.stats, CaptureStats { frames: 3, ipv4: 2, other: 1, ..CaptureStats::default() });

    // A packet on an interface of a link type rqvs does not read: an error naming the link type
    // and the packet.
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    w.write_pcapng_block(InterfaceDescriptionBlock { linktype: DataLink::ETHERNET, snaplen: 0, options: vec![] })
        .unwrap();
    w.write_pcapng_block(InterfaceDescriptionBlock { linktype: DataLink::USER0, snaplen: 0, options: vec![] }).unwrap();
    w.write_pcapng_block(epb(0, 1)).unwrap();
    w.write_pcapng_block(epb(1, 1)).unwrap();
    let e = parse_capture("user.pcapng", &w.into_inner(), 1).unwrap_err().to_string();
    assert!(e.starts_with("user.pcapng: packet 2 (byte "), "{e}");
    assert!(e.contains("interface 1, whose link type 147 (USER) is not one rqvs reads"), "{e}");

    // A packet naming an interface the section does not describe.
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    w.write_pcapng_block(InterfaceDescriptionBlock { linktype: DataLink::ETHERNET, snaplen: 0, options: vec![] })
        .unwrap();
    w.write_pcapng_block(epb(0, 1)).unwrap();
    let mut bytes = w.into_inner();
    let good_len = bytes.len();
    let mut w2 = PcapNgWriter::new(Vec::new()).unwrap();
    w2.write_pcapng_block(InterfaceDescriptionBlock { linktype: DataLink::ETHERNET, snaplen: 0, options: vec![] })
        .unwrap();
    w2.write_pcapng_block(InterfaceDescriptionBlock { linktype: DataLink::ETHERNET, snaplen: 0, options: vec![] })
        .unwrap();
    w2.write_pcapng_block(epb(1, 1)).unwrap();
    let other = w2.into_inner();
    // Append just the EPB naming interface 1 (the last block of `other`).
    let epb_len = good_len - 28 - 20; // SHB 28 bytes, IDB 20 bytes in `bytes`
    bytes.extend_from_slice(&other[other.len() - epb_len..]);
    let e = parse_capture("iface.pcapng", &bytes, 1).unwrap_err().to_string();
    assert!(e.contains("packet 2"), "{e}");
    assert!(e.contains("names interface 1, but its section describes 1 interface"), "{e}");
}

#[test]
fn pcap_big_endian_nanosecond_and_snaplen_cut_frames() {
    let key = golden_syn_key();
    let frame = build_frame(&key);
    let header = PcapHeader {
        endianness: Endianness::Big,
        ts_resolution: TsResolution::NanoSecond,
        snaplen: 58,
        ..PcapHeader::default()
    };
    let mut w = FilePcapWriter::with_header(Vec::new(), header).unwrap();
    // orig_len 60 > snaplen 58: valid for a capture (pcap-file's checked packets reject it).
    let mut raw = Vec::new();
    for (i, len) in [(1u32, 58usize), (2, 40)] {
        raw.push((i, len));
    }
    for (i, len) in raw {
        let p = PcapPacket::new(Duration::new(10, i), len as u32, &frame[..len]);
        w.write_packet(&p).unwrap();
    }
    let mut bytes = w.into_writer();
    // Rewrite the first record's orig_len (bytes 12..16 of the record) to 60.
    bytes[24 + 12..24 + 16].copy_from_slice(&60u32.to_be_bytes());
    let c = parse_capture("be.pcap", &bytes, 7).unwrap();
    assert_eq!(c.keys, vec![key]);
    assert_eq!(c.timestamps_ns, vec![10_000_000_001]);
    assert_eq!(c.stats, CaptureStats { frames: 2, ipv4: 1, truncated: 1, ..CaptureStats::default() });
}

#[test]
fn write_pcap_layout_and_stats() {
    let keys = vec![
        FlowKey::ipv4(1, 2, IPPROTO_TCP, 10, 20),
        FlowKey::ipv4(1, 2, 47, 10, 20),           // GRE: ports lost
        FlowKey::ipv4(1, 2, IPPROTO_ICMP, 300, 0), // ICMP type > 255: lost
        FlowKey::ipv4(1, 2, 47, 0, 0),             // no ports to lose
        FlowKey { nw_frag: 3, ..FlowKey::ipv4(1, 2, IPPROTO_UDP, 1, 2) }, // later fragment
    ];
    let (bytes, stats) = write_pcap(&keys, None);
    assert_eq!(stats, WriteStats { packets: 5, ports_dropped: 3, not_carried: 0 });
    assert_eq!(bytes.len(), 24 + 5 * (16 + 60));
    assert_eq!(bytes[..4], [0xd4, 0xc3, 0xb2, 0xa1]);
    assert_eq!(bytes[16..20], 65535u32.to_le_bytes());
    assert_eq!(bytes[20..24], 1u32.to_le_bytes());
    let c = parse_capture("w.pcap", &bytes, 1).unwrap();
    assert_eq!(c.timestamps_ns, vec![0, 1_000, 2_000, 3_000, 4_000]);
    let want: Vec<FlowKey> = keys.iter().map(FlowKey::wire).collect();
    assert_eq!(c.keys, want);
    // Timestamps shorter than the keys: continue 1 µs apart.
    let (bytes, _) = write_pcap(&keys[..3], Some(&[5_000_000_000]));
    let c = parse_capture("w.pcap", &bytes, 1).unwrap();
    assert_eq!(c.timestamps_ns, vec![5_000_000_000, 5_000_001_000, 5_000_002_000]);
}

#[test]
fn damaged_files_name_packet_and_offset() {
    let (bytes, _) = write_pcap(&some_keys(), None);
    // Cut 20 bytes into the data of packet 2 (record at byte 24 + 76 = 100).
    let e = parse_capture("cut.pcap", &bytes[..24 + 76 + 16 + 20], 1).unwrap_err();
    assert_eq!(e.position, crate::Position::Packet { index: 2, offset: 100 });
    assert_eq!(
        e.to_string(),
        "cut.pcap: packet 2 (byte 100): capture ends inside the packet data: the record header \
         promises 60 bytes of packet data, 20 remain"
    );
    // Cut inside the record header of packet 3.
    let e = parse_capture("cut.pcap", &bytes[..24 + 2 * 76 + 5], 1).unwrap_err().to_string();
    assert!(e.contains("packet 3 (byte 176)"), "{e}");
    assert!(e.contains("16-byte record header: 5 bytes remain"), "{e}");
    // Cut inside the file header.
    let e = parse_capture("cut.pcap", &bytes[..10], 1).unwrap_err().to_string();
    assert_eq!(e, "cut.pcap: capture ends inside the 24-byte pcap file header (10 bytes)");
    // Cut at a record boundary: fine.
    assert_eq!(parse_capture("cut.pcap", &bytes[..100], 1).unwrap().keys.len(), 1);
    // A link type rqvs does not read.
    let mut user = bytes.clone();
    user[20] = 147;
    let e = parse_capture("user.pcap", &user, 1).unwrap_err().to_string();
    assert!(e.starts_with("user.pcap: link type 147 (USER) is not one rqvs reads (it reads ETHERNET (1), RAW"), "{e}");

    // pcapng cut inside the second packet block.
    let ng = pcapng_of(&some_keys(), Endianness::Little, None);
    let epb_start = 28 + 20 + (ng.len() - 48) / 3;
    let e = parse_capture("cut.pcapng", &ng[..epb_start + 30], 1).unwrap_err();
    assert_eq!(e.position, crate::Position::Packet { index: 2, offset: epb_start as u64 });
    let e = e.to_string();
    assert!(e.contains("capture ends inside this enhanced packet block: its header promises"), "{e}");
    // pcapng with a corrupt trailer length.
    let mut bad = ng.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0x40;
    let e = parse_capture("bad.pcapng", &bad, 1).unwrap_err().to_string();
    assert!(e.contains("packet 3") && e.contains("corrupt enhanced packet block"), "{e}");
}

#[test]
fn empty_garbage_and_compressed_files() {
    let e = parse_capture("e.pcap", &[], 1).unwrap_err();
    assert_eq!(e.position, crate::Position::File);
    assert_eq!(e.to_string(), "e.pcap: empty file: expected a pcap or pcapng capture");
    let e = parse_capture("s.pcap", &[0xd4, 0xc3], 1).unwrap_err().to_string();
    assert!(e.contains("2 bytes long, too short"), "{e}");
    let e = parse_capture("g.pcap", b"hello, world\n", 1).unwrap_err().to_string();
    assert!(e.starts_with("g.pcap: not a pcap or pcapng capture: the file starts with 68 65 6c 6c"), "{e}");
    let e = parse_capture("g.pcap.gz", &[0x1f, 0x8b, 8, 0, 0, 0], 1).unwrap_err().to_string();
    assert!(e.starts_with("g.pcap.gz: corrupt gzip data"), "{e}");
    let e = parse_capture("n.pcapng", &[0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 1, 2, 3, 4], 1).unwrap_err().to_string();
    assert!(e.contains("invalid byte-order magic 01 02 03 04"), "{e}");
    // xz, gzip and zstd captures are decompressed (told apart by magic, not name).
    let (bytes, _) = write_pcap(&some_keys(), None);
    for (name, packed) in compressed(&bytes) {
        assert_eq!(parse_capture(name, &packed, 1).unwrap().keys.len(), 3, "{name}");
        // Cut short: an error naming the file, never a panic.
        let e = parse_capture(name, &packed[..packed.len() / 2], 1).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{name}: corrupt")), "{e}");
    }
}

/// `bytes` compressed as xz, gzip and zstd.
pub(crate) fn compressed(bytes: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    use std::io::Write as _;
    let mut xz = liblzma::write::XzEncoder::new(Vec::new(), 1);
    xz.write_all(bytes).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).unwrap();
    vec![
        ("c.xz", xz.finish().unwrap()),
        ("c.gz", gz.finish().unwrap()),
        ("c.zst", zstd::stream::encode_all(bytes, 1).unwrap()),
    ]
}

#[test]
fn read_capture_from_disk() {
    let dir = std::env::temp_dir().join(format!("rqvs-pcap-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.pcap");
    let (bytes, _) = write_pcap(&some_keys(), None);
    std::fs::write(&path, &bytes).unwrap();
    let c = read_capture(&path, 4).unwrap();
    assert_eq!(c.keys.len(), 3);
    assert!(c.keys.iter().all(|k| k.in_port == 4));
    std::fs::remove_dir_all(&dir).unwrap();
    let e = read_capture(&path, 4).unwrap_err().to_string();
    assert!(e.contains("cannot read"), "{e}");
}

/// The key a frame of `link` gives for a key whose Ethernet frame was converted to it.
fn as_link_gives(link: LinkType, key: &FlowKey) -> FlowKey {
    let w = key.wire();
    match link {
        LinkType::Ethernet => w,
        LinkType::LinuxSll | LinkType::LinuxSll2 => FlowKey { dl_dst: [0; 6], ..w },
        _ => FlowKey { dl_dst: [0; 6], dl_src: [0; 6], vlan_tci: 0, ..w },
    }
}

const ALL_LINKS: [LinkType; 8] = [
    LinkType::Ethernet,
    LinkType::Raw,
    LinkType::Ipv4,
    LinkType::Ipv6,
    LinkType::Null,
    LinkType::Loop,
    LinkType::LinuxSll,
    LinkType::LinuxSll2,
];

/// A classic pcap of `keys` as link type `link`.
fn pcap_as(link: LinkType, keys: &[FlowKey]) -> (Vec<u8>, WriteStats) {
    let mut w = PcapWriter::new(Vec::new(), link).unwrap();
    for (i, k) in keys.iter().enumerate() {
        w.write_key(k, Some(1_000_000_000 + i as u64 * 1_000)).unwrap();
    }
    w.finish().unwrap()
}

proptest! {
    /// Every link type gives the key its Ethernet equivalent gives (with the link type's MACs
    /// and VLAN), for IPv4, IPv6, ARP and other frames; non-IP frames are not carried by the
    /// IP-only link types.
    #[test]
    fn every_link_type_reads_as_its_ethernet_equivalent(keys in proptest::collection::vec(arb_any_key(), 1..12), in_port in any::<u32>()) {
        for link in ALL_LINKS {
            let (bytes, stats) = pcap_as(link, &keys);
            let c = parse_capture("l.pcap", &bytes, in_port).unwrap();
            let want: Vec<FlowKey> = keys
                .iter()
                .filter(|k| match link {
                    LinkType::Ethernet | LinkType::LinuxSll | LinkType::LinuxSll2 => true,
                    // A raw frame is told apart by its IP version.
                    LinkType::Ipv4 => k.dl_type == ETH_TYPE_IP,
                    LinkType::Ipv6 => k.dl_type == link::ETH_TYPE_IPV6,
                    _ => k.dl_type == ETH_TYPE_IP || k.dl_type == link::ETH_TYPE_IPV6,
                })
                .map(|k| FlowKey { in_port, ..as_link_gives(link, k) })
                .collect();
            prop_assert_eq!(stats.packets + stats.not_carried, keys.len());
            prop_assert_eq!(&c.keys, &want, "{:?}", link);
            prop_assert_eq!(c.stats.ipv4 + c.stats.other, want.len());
        }
    }

    /// Damaged captures of every link type: an error or counted frames, never a panic.
    #[test]
    fn damaged_captures_of_every_link_type_never_panic(
        keys in proptest::collection::vec(arb_ipv4_key(), 0..4),
        link in proptest::sample::select(ALL_LINKS.to_vec()),
        edits in proptest::collection::vec((any::<proptest::sample::Index>(), any::<u8>()), 0..8),
        cut in any::<proptest::sample::Index>(),
    ) {
        let (mut bytes, _) = pcap_as(link, &keys);
        for (at, b) in edits {
            let i = at.index(bytes.len());
            if i != 20 { bytes[i] = b; } // keep the link type
        }
        let n = cut.index(bytes.len() + 1);
        if let Ok(c) = parse_capture("fuzz", &bytes[..n], 1) {
            let s = c.stats;
            prop_assert_eq!(s.frames, s.ipv4 + s.other + s.truncated + s.malformed);
        }
    }
}

/// Frames shorter than their link-layer header are truncated frames; records cut short are
/// errors naming the file, the packet and its byte — for every link type.
#[test]
fn truncated_frames_and_records_of_every_link_type() {
    let key = FlowKey::ipv4(0x0a00_0001, 0x0a00_0002, IPPROTO_TCP, 1000, 80);
    // (IPV6 carries no IPv4 key; rqvs reads no IPv6 header, so it has nothing to truncate.)
    for link in ALL_LINKS.into_iter().filter(|&l| l != LinkType::Ipv6) {
        let (bytes, _) = pcap_as(link, &[key, key]);
        let record = (bytes.len() - 24) / 2;
        // A frame of 2 bytes: shorter than any link-layer header but RAW's (whose IP header
        // is then cut).
        let mut short = bytes[..24 + 16 + 2].to_vec();
        short[24 + 8..24 + 12].copy_from_slice(&2u32.to_le_bytes());
        let c = parse_capture("short.pcap", &short, 1).unwrap();
        assert_eq!(c.stats, CaptureStats { frames: 1, truncated: 1, ..CaptureStats::default() }, "{link:?}");
        // Record 2 cut inside its data.
        let e = parse_capture("cut.pcap", &bytes[..bytes.len() - 3], 1).unwrap_err();
        assert_eq!(e.position, crate::Position::Packet { index: 2, offset: (24 + record) as u64 }, "{link:?}");
        assert!(e.to_string().starts_with("cut.pcap: packet 2 (byte "), "{e}");
        // Cut inside the record header of packet 2.
        let e = parse_capture("cut.pcap", &bytes[..24 + record + 7], 1).unwrap_err().to_string();
        assert!(e.contains("16-byte record header: 7 bytes remain"), "{e}");
    }
    // Raw IP of another version: malformed.
    let mut bad = pcap_as(LinkType::Raw, &[key]).0;
    bad[24 + 16] = 0x55;
    let c = parse_capture("v5.pcap", &bad, 1).unwrap();
    assert_eq!(c.stats, CaptureStats { frames: 1, malformed: 1, ..CaptureStats::default() });
}

/// What the cooked and loopback headers say, read as documented.
#[test]
fn cooked_and_loopback_header_fields() {
    let key =
        FlowKey { dl_src: [2, 0, 0, 0, 0, 9], dl_dst: [2, 0, 0, 0, 0, 8], ..FlowKey::ipv4(1, 2, IPPROTO_UDP, 5, 6) }
            .wire();
    let frame = build_frame(&key);
    let mut sll = Vec::new();
    assert!(link::from_ethernet(LinkType::LinuxSll, &frame, &mut sll));
    let mut eth = Vec::new();
    // The sender's address is dl_src on an Ethernet interface; on another (ARPHRD 65534, a
    // tunnel) it is not a MAC: zero.
    link::ethernet_equivalent(LinkType::LinuxSll, &sll, &mut eth).unwrap();
    assert_eq!(extract(&eth, 1), Extract::Ipv4(FlowKey { dl_dst: [0; 6], ..key }));
    sll[2..4].copy_from_slice(&65534u16.to_be_bytes());
    link::ethernet_equivalent(LinkType::LinuxSll, &sll, &mut eth).unwrap();
    assert_eq!(extract(&eth, 1), Extract::Ipv4(FlowKey { dl_dst: [0; 6], dl_src: [0; 6], ..key }));
    // Protocol ETH_P_802_2: an LLC frame follows, read as 802.3 (here SNAP with ethertype ARP
    // but too short for ARP: truncated; OUI not 0: OVS's 0x05ff).
    let mut llc = sll[..16].to_vec();
    llc[14..16].copy_from_slice(&4u16.to_be_bytes());
    llc.extend_from_slice(&[0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x06]);
    link::ethernet_equivalent(LinkType::LinuxSll, &llc, &mut eth).unwrap();
    assert_eq!(extract(&eth, 1), Extract::Truncated { layer: "arp" });
    llc[16 + 3] = 1;
    link::ethernet_equivalent(LinkType::LinuxSll, &llc, &mut eth).unwrap();
    assert_eq!(extract(&eth, 1).key().map(|k| k.dl_type), Some(FLOW_DL_TYPE_NONE));
    // NULL in either byte order; an address family that is not IP: 0x05ff, L2 fields only.
    for h in [2u32.to_le_bytes(), 2u32.to_be_bytes()] {
        let mut null = h.to_vec();
        null.extend_from_slice(&frame[14..]);
        link::ethernet_equivalent(LinkType::Null, &null, &mut eth).unwrap();
        assert_eq!(extract(&eth, 1), Extract::Ipv4(FlowKey { dl_dst: [0; 6], dl_src: [0; 6], ..key }));
        null[..4].copy_from_slice(&7u32.to_le_bytes());
        link::ethernet_equivalent(LinkType::Loop, &null, &mut eth).unwrap();
        assert_eq!(
            extract(&eth, 1),
            Extract::Other(FlowKey { in_port: 1, dl_type: FLOW_DL_TYPE_NONE, ..FlowKey::default() })
        );
    }
}
