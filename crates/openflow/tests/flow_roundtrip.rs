//! Round trips (decode ∘ encode = identity) for matches, actions and every flow message body,
//! over arbitrary OXM-expressible matches and action lists; and no decoder panics on arbitrary
//! bytes.

use proptest::prelude::*;
use rqvs_flow::key::*;
use rqvs_flow::{Action, Actions, FlowKey, Match};
use rqvs_openflow::flow_mod::*;
use rqvs_openflow::oxm::{decode_match, encode_match};
use rqvs_openflow::{Reader, Writer, OFP13, OFP14};

fn pick<T: Copy>(s: u64, xs: &[T]) -> T {
    xs[(s % xs.len() as u64) as usize]
}

/// A match OXM can express, in the canonical form decoding produces, from random words.
fn match_from(s: [u64; 8]) -> Match {
    let mut v = FlowKey::default();
    let mut m = FlowKey::default();
    let bit = |i: u32| s[0] >> i & 1 == 1;
    if bit(0) {
        v.in_port = pick(s[1], &[1, 2, 77, 0xfeff, 0xfffe, 0xff00]);
        m.in_port = u32::MAX;
    }
    if bit(1) {
        v.dl_src = (s[1] >> 8).to_be_bytes()[2..].try_into().unwrap();
        m.dl_src = if bit(2) { [0xff; 6] } else { (s[2] >> 3).to_be_bytes()[2..].try_into().unwrap() };
    }
    if bit(3) {
        v.dl_dst = (s[2] >> 11).to_be_bytes()[2..].try_into().unwrap();
        m.dl_dst = if bit(4) { [0xff; 6] } else { s[3].to_be_bytes()[2..].try_into().unwrap() };
    }
    let vid = (s[3] >> 48) as u16 & VLAN_VID_MASK;
    let pcp = (s[3] >> 60) as u16 & 7;
    match s[4] % 6 {
        1 => (v.vlan_tci, m.vlan_tci) = (VLAN_CFI | vid, 0x1fff),
        2 => (v.vlan_tci, m.vlan_tci) = (VLAN_CFI, VLAN_CFI),
        3 => (v.vlan_tci, m.vlan_tci) = (VLAN_CFI | vid | pcp << 13, 0xffff),
        4 => (v.vlan_tci, m.vlan_tci) = (0, 0xffff),
        5 => (v.vlan_tci, m.vlan_tci) = (VLAN_CFI | vid & 0xf0 | pcp << 13, VLAN_CFI | 0xf0 | VLAN_PCP_MASK),
        _ => {}
    }
    match (s[4] >> 8) % 4 {
        0 => {}
        1 => {
            v.dl_type = ETH_TYPE_ARP;
            if bit(5) {
                v.nw_proto = (s[5] >> 40) as u8;
                m.nw_proto = 0xff;
            }
            m.nw_src = if bit(6) { (s[5] as u32).wrapping_shl(s[6] as u32 % 33) } else { 0 };
            m.nw_dst = (s[6] >> 32) as u32;
        }
        2 => v.dl_type = pick(s[5], &[0x88cc, 0x8847, 0x0842]),
        _ => {
            v.dl_type = ETH_TYPE_IP;
            m.nw_src = if bit(6) { u32::MAX << (s[6] % 32) } else { s[5] as u32 };
            m.nw_dst = (s[6] >> 32) as u32;
            m.nw_tos = pick(s[6], &[0, 0xfc, 3, 0xff]);
            m.nw_frag = (s[6] >> 8) as u8 & 3;
            let proto = pick(s[7], &[0, IPPROTO_TCP, IPPROTO_UDP, IPPROTO_SCTP, IPPROTO_ICMP, 47]);
            if proto != 0 {
                v.nw_proto = proto;
                m.nw_proto = 0xff;
            }
            match proto {
                IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP => {
                    m.tp_src = (s[7] >> 8) as u16;
                    m.tp_dst = if bit(7) { 0xffff } else { (s[7] >> 24) as u16 };
                    if proto == IPPROTO_TCP {
                        m.tcp_flags = (s[7] >> 40) as u16 & TCP_FLAGS_MASK;
                    }
                }
                IPPROTO_ICMP => {
                    m.tp_src = if bit(8) { 0xffff } else { 0 };
                    m.tp_dst = if bit(9) { 0xffff } else { 0 };
                    v.tp_src = (s[2] & 0xff) as u16;
                    v.tp_dst = (s[2] >> 56) as u16;
                }
                _ => {}
            }
        }
    }
    if m.dl_type == 0 && v.dl_type != 0 {
        m.dl_type = u16::MAX;
    }
    // Random values everywhere, masked.
    let r = FlowKey {
        nw_src: s[1] as u32,
        nw_dst: (s[1] >> 32) as u32,
        nw_tos: (s[2] >> 20) as u8,
        nw_frag: (s[3] >> 20) as u8,
        tcp_flags: (s[4] >> 32) as u16,
        tp_src: (s[5] >> 16) as u16,
        tp_dst: (s[5] >> 32) as u16,
        ..FlowKey::default()
    };
    let mut fixed = v;
    if !matches!(v.nw_proto, IPPROTO_ICMP) || m.nw_proto == 0 {
        fixed.tp_src = r.tp_src;
        fixed.tp_dst = r.tp_dst;
    }
    if v.dl_type == ETH_TYPE_IP || v.dl_type == ETH_TYPE_ARP {
        fixed.nw_src = r.nw_src;
        fixed.nw_dst = r.nw_dst;
    }
    fixed.nw_tos = r.nw_tos;
    fixed.nw_frag = r.nw_frag;
    fixed.tcp_flags = r.tcp_flags;
    // "Not a fragment" decodes to its canonical form, 0/1 (see oxm.rs).
    if fixed.nw_frag & m.nw_frag == 0 && m.nw_frag == 3 {
        m.nw_frag = 1;
    }
    Match::from_masked(fixed, m)
}

fn actions_from(s: Vec<u64>) -> Actions {
    let mut out = Vec::new();
    for x in s {
        out.push(match x % 13 {
            0 => Action::Output((x >> 8) as u32 % 0xfeff + 1),
            1 => Action::InPort,
            2 => Action::All,
            3 => Action::Flood,
            4 => Action::Controller(Some((x >> 8) as u16 % 0xffff)),
            5 => Action::Controller(None),
            6 => Action::SetDlSrc((x >> 8).to_be_bytes()[2..].try_into().unwrap()),
            7 => Action::SetDlDst((x >> 8).to_be_bytes()[2..].try_into().unwrap()),
            8 => Action::SetVlanVid((x >> 8) as u16 & 0xfff),
            9 => Action::StripVlan,
            10 => Action::SetNwTos((x >> 8) as u8 & 0xfc),
            11 => Action::DecTtl,
            12 if x & 256 == 0 => Action::Normal,
            _ if x & 512 == 0 => Action::Other("TABLE".into()),
            _ => Action::Output(0xfffe),
        });
    }
    if out.is_empty() {
        Actions::drop()
    } else {
        Actions(out)
    }
}

fn version() -> impl Strategy<Value = u8> {
    prop_oneof![Just(OFP13), Just(OFP14)]
}

fn acts() -> impl Strategy<Value = Actions> {
    proptest::collection::vec(any::<u64>(), 0..8).prop_map(actions_from)
}

fn body<F: FnOnce(&mut Writer)>(f: F) -> Vec<u8> {
    let mut w = Writer::new();
    f(&mut w);
    w.bytes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn match_round_trips(s: [u64; 8]) {
        let m = match_from(s);
        let mut w = Writer::new();
        encode_match(&m, &mut w).unwrap();
        prop_assert_eq!(w.len() % 8, 0);
        let mut r = Reader::new(&w.bytes, "t");
        prop_assert_eq!(decode_match(&mut r).unwrap(), m);
        prop_assert!(r.is_empty());
    }

    #[test]
    fn flow_mod_round_trips(s: [u64; 8], v in version(), a in acts(), cookie: u64, cookie_mask: u64, table_id: u8,
                             cmd in 0u8..5, idle: u16, hard: u16, priority: u16, buffer_id: u32, out_port: u32,
                             out_group: u32, flags in 0u16..32, importance: u16) {
        let fm = FlowMod {
            cookie, cookie_mask, table_id, command: FlowModCommand::from_code(cmd).unwrap(), idle_timeout: idle,
            hard_timeout: hard, priority, buffer_id, out_port, out_group, flags,
            importance: if v == OFP14 { importance } else { 0 }, matches: match_from(s), actions: a,
        };
        let b = body(|w| fm.encode(v, w).unwrap());
        prop_assert_eq!(FlowMod::decode(v, &b).unwrap(), fm);
    }

    #[test]
    fn flow_removed_round_trips(s: [u64; 8], v in version(), cookie: u64, priority: u16, reason: u8, table_id: u8,
                                 duration_sec: u32, duration_nsec: u32, idle_timeout: u16, hard_timeout: u16,
                                 packet_count: u64, byte_count: u64) {
        let fr = FlowRemoved { cookie, priority, reason, table_id, duration_sec, duration_nsec, idle_timeout,
                               hard_timeout, packet_count, byte_count, matches: match_from(s) };
        let b = body(|w| fr.encode(v, w).unwrap());
        prop_assert_eq!(FlowRemoved::decode(v, &b).unwrap(), fr);
    }

    #[test]
    fn packet_in_and_out_round_trip(s: [u64; 8], v in version(), a in acts(), buffer_id: u32, total_len: u16,
                                     reason: u8, table_id: u8, cookie: u64, in_port: u32,
                                     data in proptest::collection::vec(any::<u8>(), 0..200)) {
        let pi = PacketIn { buffer_id, total_len, reason, table_id, cookie, matches: match_from(s), data: data.clone() };
        let b = body(|w| pi.encode(v, w).unwrap());
        prop_assert_eq!(PacketIn::decode(v, &b).unwrap(), pi);
        let po = PacketOut { buffer_id, in_port, actions: a, data };
        let b = body(|w| po.encode(v, w).unwrap());
        prop_assert_eq!(PacketOut::decode(v, &b).unwrap(), po);
    }

    #[test]
    fn multipart_flow_bodies_round_trip(s: [u64; 8], s2: [u64; 8], v in version(), a in acts(), table_id: u8,
                                         out_port: u32, out_group: u32, cookie: u64, cookie_mask: u64,
                                         d: (u32, u32), pri: u16, idle: u16, hard: u16, flags in 0u16..32,
                                         importance: u16, counts: (u64, u64, u32)) {
        let req = FlowStatsRequest { table_id, out_port, out_group, cookie, cookie_mask, matches: match_from(s) };
        let b = body(|w| req.encode(v, w).unwrap());
        prop_assert_eq!(FlowStatsRequest::decode(v, &b).unwrap(), req);
        let importance = if v == OFP14 { importance } else { 0 };
        let e1 = FlowStats { table_id, duration_sec: d.0, duration_nsec: d.1, priority: pri, idle_timeout: idle,
                             hard_timeout: hard, flags, importance, cookie, packet_count: counts.0,
                             byte_count: counts.1, matches: match_from(s), actions: a };
        let e2 = FlowStats { matches: match_from(s2), actions: Actions::drop(), ..e1.clone() };
        let b = body(|w| { e1.encode(v, w).unwrap(); e2.encode(v, w).unwrap(); });
        prop_assert_eq!(FlowStats::decode_all(v, &b).unwrap(), vec![e1, e2]);
        let agg = AggregateStats { packet_count: counts.0, byte_count: counts.1, flow_count: counts.2 };
        let b = body(|w| agg.encode(v, w).unwrap());
        prop_assert_eq!(AggregateStats::decode(v, &b).unwrap(), agg);
    }

    #[test]
    fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), v in 0u8..8) {
        let _ = FlowMod::decode(v, &bytes);
        let _ = FlowRemoved::decode(v, &bytes);
        let _ = PacketIn::decode(v, &bytes);
        let _ = PacketOut::decode(v, &bytes);
        let _ = FlowStatsRequest::decode(v, &bytes);
        let _ = FlowStats::decode_all(v, &bytes);
        let _ = AggregateStats::decode(v, &bytes);
        let _ = decode_match(&mut Reader::new(&bytes, "t"));
        let _ = rqvs_openflow::action::decode_actions(&bytes);
        let _ = rqvs_openflow::action::decode_instructions(&bytes);
    }

    /// Random OXM TLV lists (known classes and fields, random masks and payload sizes) reach
    /// the field checks; decoding returns, never panics, and accepts only what re-encodes.
    #[test]
    fn random_oxm_lists_never_panic(tlvs in proptest::collection::vec(
        (0usize..4, 0u8..45, any::<bool>(), proptest::collection::vec(any::<u8>(), 0..14)), 0..8)) {
        let mut w = Writer::new();
        w.u16(1);
        w.u16(0);
        for (class, field, mask, payload) in &tlvs {
            let class: u32 = [0x8000, 0x0001, 0xffff, 0x0000][*class];
            let mut p = payload.clone();
            if class == 0xffff {
                p.splice(0..0, 0x4f4e_4600u32.to_be_bytes());
            }
            w.u32(class << 16 | u32::from(*field) << 9 | u32::from(*mask) << 8 | p.len() as u32);
            w.put(&p);
        }
        let len = w.len() as u16;
        w.patch_u16(2, len);
        w.pad8();
        if let Ok(m) = decode_match(&mut Reader::new(&w.bytes, "t")) {
            let mut again = Writer::new();
            encode_match(&m, &mut again).unwrap();
            prop_assert_eq!(decode_match(&mut Reader::new(&again.bytes, "t")).unwrap(), m);
        }
    }

    /// Mutations of valid messages reach deeper than random bytes.
    #[test]
    fn mutated_messages_never_panic(s: [u64; 8], a in acts(), v in version(), at: usize, x: u8, cut: usize) {
        let fm = FlowMod::add(7, match_from(s), a);
        let mut b = body(|w| fm.encode(v, w).unwrap());
        let i = at % b.len();
        b[i] ^= x;
        b.truncate(b.len() - cut % 9);
        let _ = FlowMod::decode(v, &b);
        let _ = FlowStats::decode_all(v, &b[8..]);
        let _ = FlowRemoved::decode(v, &b[8..]);
    }
}

#[test]
fn from_rule_splits_port_ranges() {
    let value = FlowKey { dl_type: ETH_TYPE_IP, nw_proto: IPPROTO_TCP, ..FlowKey::default() };
    let mask = FlowKey { dl_type: u16::MAX, nw_proto: u8::MAX, ..FlowKey::default() };
    let ranged = Match::new(value, mask, rqvs_flow::PortRange::ANY, rqvs_flow::PortRange::new(1024, 65535).unwrap());
    let r = &rqvs_flow::Rule::new(0, 9, ranged.unwrap(), Actions::output(2));
    let fms = FlowMod::from_rule(r, FlowModCommand::Add).unwrap();
    assert_eq!(fms.len(), r.matches.expand_port_ranges().len());
    assert_eq!(fms.len(), 6);
    for (fm, m) in fms.iter().zip(r.matches.expand_port_ranges()) {
        let b = body(|w| fm.encode(OFP13, w).unwrap());
        assert_eq!(FlowMod::decode(OFP13, &b).unwrap().matches, m);
    }
    let mut too_high = r.clone();
    too_high.priority = 70_000;
    assert!(FlowMod::from_rule(&too_high, FlowModCommand::Add).is_err());
}

#[test]
fn bad_command_flags_and_version() {
    let fm = FlowMod::add(1, Match::ANY, Actions::drop());
    let mut b = body(|w| fm.encode(OFP13, w).unwrap());
    assert!(matches!(FlowMod::decode(3, &b), Err(rqvs_openflow::DecodeError::BadVersion(3))));
    b[17] = 9;
    assert_eq!(FlowMod::decode(OFP13, &b).unwrap_err().of_error(), rqvs_openflow::OfError::FLOW_MOD_FAILED_BAD_COMMAND);
    b[17] = 0;
    b[36] = 0x80;
    assert_eq!(FlowMod::decode(OFP13, &b).unwrap_err().of_error(), rqvs_openflow::OfError::FLOW_MOD_FAILED_BAD_FLAGS);
}
