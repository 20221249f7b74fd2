//! The message codec: round trips of every message kind in 1.3 and 1.4 (proptest), arbitrary
//! bytes never panic `decode`, byte layouts from the OpenFlow 1.3.5 and 1.4.1 specifications,
//! length/version/type errors, and version negotiation.

use proptest::prelude::*;
use rqvs_openflow::bundle::{self, BundleAdd, BundleControl};
use rqvs_openflow::message::{
    kind, ErrorMsg, Experimenter, Features, Hello, HelloElement, PortStatus, Role, SwitchConfig,
};
use rqvs_openflow::multipart::{
    Desc, MultipartReply, MultipartReplyBody, MultipartRequest, MultipartRequestBody, PortStats, PortStatsEthernet,
    TableStats,
};
use rqvs_openflow::port::{Port, PortEthernet, Property};
use rqvs_openflow::table_features::{Id, OxmId, PropValue, TableFeatureProp, TableFeatures};
use rqvs_openflow::{decode, encode, negotiate, DecodeError, Message, OfError, OFP13, OFP14};

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

fn properties() -> impl Strategy<Value = Vec<Property>> {
    proptest::collection::vec((1u16.., bytes(20)).prop_map(|(kind, data)| Property { kind, data }), 0..3)
}

fn port(v: u8) -> BoxedStrategy<Port> {
    let eth = (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()).prop_map(
        |(curr, advertised, supported, peer, curr_speed, max_speed)| PortEthernet {
            curr,
            advertised,
            supported,
            peer,
            curr_speed,
            max_speed,
        },
    );
    let (eth, props) = if v == OFP13 {
        (eth.prop_map(Some).boxed(), Just(vec![]).boxed())
    } else {
        (proptest::option::of(eth).boxed(), properties().boxed())
    };
    (any::<u32>(), any::<[u8; 6]>(), "[a-z0-9-]{0,15}", any::<u32>(), any::<u32>(), eth, props)
        .prop_map(|(port_no, hw_addr, name, config, state, ethernet, properties)| Port {
            port_no,
            hw_addr,
            name,
            config,
            state,
            ethernet,
            properties,
        })
        .boxed()
}

fn port_stats(v: u8) -> BoxedStrategy<PortStats> {
    let eth = any::<[u64; 4]>().prop_map(|[a, b, c, d]| PortStatsEthernet {
        rx_frame_err: a,
        rx_over_err: b,
        rx_crc_err: c,
        collisions: d,
    });
    let (eth, props) = if v == OFP13 {
        (eth.prop_map(Some).boxed(), Just(vec![]).boxed())
    } else {
        (proptest::option::of(eth).boxed(), properties().boxed())
    };
    (any::<(u32, u32, u32)>(), any::<[u64; 8]>(), eth, props)
        .prop_map(|((port_no, duration_sec, duration_nsec), c, ethernet, properties)| PortStats {
            port_no,
            duration_sec,
            duration_nsec,
            rx_packets: c[0],
            tx_packets: c[1],
            rx_bytes: c[2],
            tx_bytes: c[3],
            rx_dropped: c[4],
            tx_dropped: c[5],
            rx_errors: c[6],
            tx_errors: c[7],
            ethernet,
            properties,
        })
        .boxed()
}

fn other_mp_kind() -> impl Strategy<Value = u16> {
    any::<u16>().prop_filter("own variant", |k| !matches!(k, 0..=4 | 6..=8 | 11..=13))
}

/// Table features with properties of every shape (ids, tables, OXM headers, raw).
fn table_features() -> impl Strategy<Value = Vec<TableFeatures>> {
    let id = (any::<u16>(), prop_oneof![Just(vec![]), bytes(8)]).prop_map(|(kind, data)| Id { kind, data });
    let oxm = any::<u32>()
        .prop_map(|header| OxmId { header, experimenter: ((header >> 16) == 0xffff).then_some(header.rotate_left(7)) });
    let prop = prop_oneof![
        (prop::sample::select(vec![0u16, 1, 4, 5, 6, 7]), proptest::collection::vec(id, 0..4))
            .prop_map(|(kind, ids)| TableFeatureProp { kind, value: PropValue::Ids(ids) }),
        (2u16..4, bytes(10)).prop_map(|(kind, t)| TableFeatureProp { kind, value: PropValue::Tables(t) }),
        (prop::sample::select(vec![8u16, 10, 12, 13, 14, 15]), proptest::collection::vec(oxm, 0..5))
            .prop_map(|(kind, o)| TableFeatureProp { kind, value: PropValue::Oxms(o) }),
        (prop::sample::select(vec![9u16, 11, 16, 0xfffe, 0xffff]), bytes(12))
            .prop_map(|(kind, b)| TableFeatureProp { kind, value: PropValue::Raw(b) }),
    ];
    let one = (any::<(u8, u64, u64, u32, u32)>(), "[a-z0-9 ]{0,31}", proptest::collection::vec(prop, 0..6)).prop_map(
        |((table_id, metadata_match, metadata_write, capabilities, max_entries), name, properties)| TableFeatures {
            table_id,
            name,
            metadata_match,
            metadata_write,
            capabilities,
            max_entries,
            properties,
        },
    );
    proptest::collection::vec(one, 0..3)
}

fn multipart_request(v: u8) -> BoxedStrategy<MultipartRequest> {
    let _ = v;
    let body = prop_oneof![
        Just(MultipartRequestBody::Desc),
        Just(MultipartRequestBody::Table),
        Just(MultipartRequestBody::PortDesc),
        any::<u32>().prop_map(|port_no| MultipartRequestBody::PortStats { port_no }),
        table_features().prop_map(MultipartRequestBody::TableFeatures),
        (other_mp_kind(), bytes(40)).prop_map(|(kind, body)| MultipartRequestBody::Other { kind, body }),
    ];
    (any::<u16>(), body).prop_map(|(flags, body)| MultipartRequest { flags, body }).boxed()
}

fn multipart_reply(v: u8) -> BoxedStrategy<MultipartReply> {
    let s = || "[ -~]{0,30}";
    let desc = (s(), s(), s(), "[ -~]{0,31}", s()).prop_map(|(mfr_desc, hw_desc, sw_desc, serial_num, dp_desc)| Desc {
        mfr_desc,
        hw_desc,
        sw_desc,
        serial_num,
        dp_desc,
    });
    let table = any::<(u8, u32, u64, u64)>().prop_map(|(table_id, active_count, lookup_count, matched_count)| {
        TableStats { table_id, active_count, lookup_count, matched_count }
    });
    let body = prop_oneof![
        desc.prop_map(MultipartReplyBody::Desc),
        proptest::collection::vec(table, 0..5).prop_map(MultipartReplyBody::Table),
        proptest::collection::vec(port_stats(v), 0..4).prop_map(MultipartReplyBody::PortStats),
        proptest::collection::vec(port(v), 0..4).prop_map(MultipartReplyBody::PortDesc),
        table_features().prop_map(MultipartReplyBody::TableFeatures),
        (other_mp_kind(), bytes(40)).prop_map(|(kind, body)| MultipartReplyBody::Other { kind, body }),
    ];
    (any::<u16>(), body).prop_map(|(flags, body)| MultipartReply { flags, body }).boxed()
}

/// A whole TABLE_MOD-typed message (a type left raw) of `v` and `xid` with an arbitrary body,
/// for bundling.
fn inner_message(v: u8, xid: u32) -> impl Strategy<Value = Vec<u8>> {
    bytes(60).prop_map(move |body| encode(v, xid, &Message::Other { kind: 17, body }).unwrap())
}

fn other_kinds(v: u8) -> Vec<u8> {
    (0..=40).filter(|&k| rqvs_openflow::message::is_other_kind(v, k)).collect()
}

/// A version, an xid and a message of that version.
fn message() -> impl Strategy<Value = (u8, u32, Message)> {
    (prop_oneof![Just(OFP13), Just(OFP14)], any::<u32>()).prop_flat_map(|(v, xid)| {
        let hello_elem = prop_oneof![
            proptest::collection::vec(any::<u32>(), 1..4).prop_map(HelloElement::VersionBitmap),
            (2u16.., bytes(12)).prop_map(|(kind, data)| HelloElement::Unknown { kind, data }),
        ];
        let experimenter = (any::<u32>(), any::<u32>(), bytes(30))
            .prop_filter("ONF bundle types are their own variants in 1.3", move |(e, t, _)| {
                !(v == OFP13 && *e == bundle::ONF_EXPERIMENTER_ID && (*t == 2300 || *t == 2301))
            })
            .prop_map(|(experimenter, exp_type, data)| {
                Message::Experimenter(Experimenter { experimenter, exp_type, data })
            });
        let features = any::<(u64, u32, u8, u8, u32)>().prop_map(
            |(datapath_id, n_buffers, n_tables, auxiliary_id, capabilities)| {
                Message::FeaturesReply(Features { datapath_id, n_buffers, n_tables, auxiliary_id, capabilities })
            },
        );
        let config = any::<(u16, u16, bool)>().prop_map(|(flags, miss_send_len, set)| {
            let c = SwitchConfig { flags, miss_send_len };
            if set {
                Message::SetConfig(c)
            } else {
                Message::GetConfigReply(c)
            }
        });
        let role = any::<(u32, u64, bool)>().prop_map(|(role, generation_id, req)| {
            let r = Role { role, generation_id };
            if req {
                Message::RoleRequest(r)
            } else {
                Message::RoleReply(r)
            }
        });
        let bundle_ctl = (any::<(u32, u16, u16)>(), properties()).prop_map(|((bundle_id, kind, flags), properties)| {
            Message::BundleControl(BundleControl { bundle_id, kind, flags, properties })
        });
        let bundle_add = (any::<(u32, u16)>(), inner_message(v, xid), properties()).prop_map(
            |((bundle_id, flags), message, properties)| {
                Message::BundleAdd(BundleAdd { bundle_id, flags, message, properties })
            },
        );
        let other = (proptest::sample::select(other_kinds(v)), bytes(40))
            .prop_map(|(kind, body)| Message::Other { kind, body });
        let msg = prop_oneof![
            proptest::collection::vec(hello_elem, 0..3).prop_map(|elements| Message::Hello(Hello { elements })),
            (any::<(u16, u16)>(), bytes(40)).prop_map(|((kind, code), data)| Message::Error(ErrorMsg {
                kind,
                code,
                data
            })),
            bytes(40).prop_map(Message::EchoRequest),
            bytes(40).prop_map(Message::EchoReply),
            experimenter,
            Just(Message::FeaturesRequest),
            features,
            Just(Message::GetConfigRequest),
            config,
            (any::<u8>(), port(v)).prop_map(|(reason, port)| Message::PortStatus(PortStatus { reason, port })),
            multipart_request(v).prop_map(Message::MultipartRequest),
            multipart_reply(v).prop_map(Message::MultipartReply),
            Just(Message::BarrierRequest),
            Just(Message::BarrierReply),
            role,
            bundle_ctl,
            bundle_add,
            other,
        ];
        (Just(v), Just(xid), msg)
    })
}

/// 2000 cases unless `PROPTEST_CASES` says otherwise; no failure files.
fn config() -> ProptestConfig {
    let mut c = ProptestConfig::default();
    if std::env::var("PROPTEST_CASES").is_err() {
        c.cases = 2000;
    }
    c.failure_persistence = None;
    c
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_message_round_trips((v, xid, msg) in message()) {
        let wire = encode(v, xid, &msg).unwrap();
        let (h, back) = decode(&wire).unwrap();
        prop_assert_eq!(h.version, v);
        prop_assert_eq!(h.xid, xid);
        prop_assert_eq!(usize::from(h.length), wire.len());
        prop_assert_eq!(&back, &msg);
        // Encoding what was decoded gives the same bytes.
        prop_assert_eq!(encode(v, xid, &back).unwrap(), wire);
    }

    #[test]
    fn arbitrary_bytes_never_panic(b in bytes(300)) {
        let _ = decode(&b);
    }

    #[test]
    fn arbitrary_bodies_behind_a_valid_header_never_panic(
        v in prop_oneof![Just(OFP13), Just(OFP14)], k in 0u8..40, xid: u32, body in bytes(300),
    ) {
        let mut b = vec![v, k, 0, 0];
        b.extend_from_slice(&xid.to_be_bytes());
        b.extend_from_slice(&body);
        let n = b.len() as u16;
        b[2..4].copy_from_slice(&n.to_be_bytes());
        if let Ok((h, m)) = decode(&b) {
            // What decodes re-encodes, and decodes to the same.
            let again = encode(h.version, h.xid, &m).unwrap();
            prop_assert_eq!(decode(&again).unwrap().1, m);
        }
    }

    #[test]
    fn mutated_messages_never_panic((v, xid, msg) in message(), at: prop::sample::Index, byte: u8, cut: prop::sample::Index) {
        let mut wire = encode(v, xid, &msg).unwrap();
        let i = at.index(wire.len());
        wire[i] = byte;
        if let Ok((h, m)) = decode(&wire) {
            let again = encode(h.version, h.xid, &m).unwrap();
            prop_assert_eq!(decode(&again).unwrap().1, m);
        }
        let c = cut.index(wire.len());
        let _ = decode(&wire[..c]);
    }
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn hello_with_version_bitmap_layout() {
    // 1.3.5 §7.5.1: ofp_hello_elem_versionbitmap, type 1, length 8, one bitmap word (1.3 and 1.4).
    let wire = hex("05 00 0010 0000002a  0001 0008 00000030");
    let (h, m) = decode(&wire).unwrap();
    assert_eq!((h.version, h.kind, h.xid), (OFP14, 0, 42));
    assert_eq!(m, Message::Hello(Hello::with_versions(&[OFP13, OFP14])));
    assert_eq!(encode(OFP14, 42, &m).unwrap(), wire);
    // A bare HELLO, and a 1.0 HELLO (no elements before 1.3).
    assert_eq!(decode(&hex("04 00 0008 00000001")).unwrap().1, Message::Hello(Hello::default()));
    assert_eq!(decode(&hex("01 00 0008 00000001")).unwrap().1, Message::Hello(Hello::default()));
    // Two bitmap words (length 12) are padded to 16; without the padding the element is cut.
    let two = hex("06 00 0018 00000001  0001 000c 00000050 00000001 00000000");
    let (h, m) = decode(&two).unwrap();
    assert_eq!(m, Message::Hello(Hello { elements: vec![HelloElement::VersionBitmap(vec![0x50, 1])] }));
    let Message::Hello(hello) = &m else { unreachable!() };
    // Bits 4 and 6 (and 32 in the second word): 1.3 is the common one.
    assert_eq!(negotiate(rqvs_openflow::message::bitmap_of(&[OFP13, OFP14]), h.version, hello), Some(OFP13));
    assert!(matches!(
        decode(&hex("06 00 0014 00000001  0001 000c 00000050 00000001")),
        Err(DecodeError::Truncated { .. })
    ));
    // Elements shorter than their own header.
    assert!(matches!(decode(&hex("04 00 0010 00000001  0001 0002 00000000")), Err(DecodeError::BadLength { .. })));
}

#[test]
fn negotiation_follows_the_spec() {
    let ours = rqvs_openflow::message::bitmap_of(&[OFP13, OFP14]);
    // Both bitmaps: the highest common version.
    assert_eq!(negotiate(ours, 6, &Hello::with_versions(&[1, 4, 5, 6])), Some(OFP14));
    assert_eq!(negotiate(ours, 6, &Hello::with_versions(&[1, 4, 6])), Some(OFP13));
    assert_eq!(negotiate(ours, 6, &Hello::with_versions(&[1, 6])), None);
    // No bitmap from the peer: the smaller of the two highest versions, if we support it.
    let bare = Hello::default();
    assert_eq!(negotiate(ours, 6, &bare), Some(OFP14));
    assert_eq!(negotiate(ours, OFP13, &bare), Some(OFP13));
    assert_eq!(negotiate(ours, 1, &bare), None);
    assert_eq!(negotiate(rqvs_openflow::message::bitmap_of(&[OFP13]), OFP14, &bare), Some(OFP13));
    assert_eq!(negotiate(0, OFP14, &bare), None);
    // An element of another type is no bitmap.
    let other = Hello { elements: vec![HelloElement::Unknown { kind: 7, data: vec![] }] };
    assert_eq!(negotiate(ours, OFP14, &other), Some(OFP14));
}

#[test]
fn features_reply_layout() {
    // ofp_switch_features: datapath_id, n_buffers, n_tables, auxiliary_id, pad[2], capabilities, reserved.
    let f = Features {
        datapath_id: 0x0102_0304_0506_0708,
        n_buffers: 256,
        n_tables: 254,
        auxiliary_id: 1,
        capabilities: 0x4f,
    };
    let wire = encode(OFP13, 7, &Message::FeaturesReply(f)).unwrap();
    assert_eq!(wire, hex("04 06 0020 00000007  0102030405060708 00000100 fe 01 0000 0000004f 00000000"));
}

#[test]
fn ports_differ_between_versions() {
    let p = Port {
        port_no: 1,
        hw_addr: [2, 0, 0, 0, 0, 1],
        name: "eth0".into(),
        config: 0,
        state: 4,
        ethernet: Some(PortEthernet {
            curr: 0x840,
            advertised: 0,
            supported: 0,
            peer: 0,
            curr_speed: 10_000_000,
            max_speed: 0,
        }),
        properties: vec![],
    };
    let m = Message::PortStatus(PortStatus { reason: 2, port: p });
    let w13 = encode(OFP13, 1, &m).unwrap();
    assert_eq!(w13.len(), 8 + 8 + 64);
    assert_eq!(
        &w13[16..],
        &hex("00000001 00000000 020000000001 0000 6574683000000000 0000000000000000 00000000 00000004
              00000840 00000000 00000000 00000000 00989680 00000000")[..]
    );
    let w14 = encode(OFP14, 1, &m).unwrap();
    assert_eq!(w14.len(), 8 + 8 + 40 + 32);
    assert_eq!(
        &w14[16..],
        &hex("00000001 0048 0000 020000000001 0000 6574683000000000 0000000000000000 00000000 00000004
              0000 0020 00000000 00000840 00000000 00000000 00000000 00989680 00000000")[..]
    );
    assert_eq!(decode(&w13).unwrap().1, m);
    assert_eq!(decode(&w14).unwrap().1, m);
}

#[test]
fn port_stats_differ_between_versions() {
    let s = PortStats {
        port_no: 3,
        rx_packets: 5,
        tx_errors: 9,
        duration_sec: 11,
        ethernet: Some(PortStatsEthernet { collisions: 1, ..Default::default() }),
        ..Default::default()
    };
    let m = Message::MultipartReply(MultipartReply { flags: 1, body: MultipartReplyBody::PortStats(vec![s]) });
    let w13 = encode(OFP13, 1, &m).unwrap();
    assert_eq!(w13.len(), 16 + 112);
    assert_eq!(&w13[8..16], &hex("0004 0001 00000000")[..]);
    let w14 = encode(OFP14, 1, &m).unwrap();
    assert_eq!(w14.len(), 16 + 80 + 40);
    assert_eq!(&w14[16..32], &hex("0078 0000 00000003 0000000b 00000000")[..]);
    assert_eq!(&w14[96..104], &hex("0000 0028 00000000")[..]);
}

#[test]
fn bundle_messages_in_both_versions() {
    let c = Message::BundleControl(BundleControl {
        bundle_id: 9,
        kind: bundle::OPEN_REQUEST,
        flags: bundle::ATOMIC,
        properties: vec![],
    });
    // OpenFlow 1.4: type 33, ofp_bundle_ctrl_msg.
    assert_eq!(encode(OFP14, 5, &c).unwrap(), hex("05 21 0010 00000005  00000009 0000 0001"));
    // OpenFlow 1.3: ONF EXT-230 experimenter message, exp_type 2300.
    assert_eq!(encode(OFP13, 5, &c).unwrap(), hex("04 04 0018 00000005  4f4e4600 000008fc 00000009 0000 0001"));
    let inner = hex("05 11 000c 00000005 01020304");
    let a = Message::BundleAdd(BundleAdd { bundle_id: 9, flags: 1, message: inner.clone(), properties: vec![] });
    let w = encode(OFP14, 5, &a).unwrap();
    assert_eq!(w, hex("05 22 001c 00000005  00000009 0000 0001  05 11 000c 00000005 01020304"));
    let (_, back) = decode(&w).unwrap();
    assert_eq!(back, a);
    let Message::BundleAdd(b) = back else { unreachable!() };
    assert_eq!(b.inner().unwrap().1, Message::Other { kind: 17, body: vec![1, 2, 3, 4] });
    // The inner message's xid must be the outer one's, its version too, and its length must fit.
    let mut bad = w.clone();
    bad[23] = 6;
    assert_eq!(decode(&bad).unwrap_err().of_error(), OfError::BUNDLE_FAILED_MSG_BAD_XID);
    let mut bad = w.clone();
    bad[16] = 4;
    assert_eq!(decode(&bad).unwrap_err(), DecodeError::BadVersion(4));
    let mut bad = w.clone();
    bad[19] = 0x0d;
    assert_eq!(decode(&bad).unwrap_err().of_error(), OfError::BUNDLE_FAILED_MSG_BAD_LEN);
    let mut bad = w;
    bad[19] = 0x07;
    assert_eq!(decode(&bad).unwrap_err().of_error(), OfError::BUNDLE_FAILED_MSG_BAD_LEN);
    // Type 33 does not exist in 1.3.
    assert_eq!(decode(&hex("04 21 0010 00000005  00000009 0000 0001")).unwrap_err(), DecodeError::BadType(33));
}

#[test]
fn lengths_versions_and_types_are_checked() {
    // A body longer than the type allows.
    assert!(matches!(decode(&hex("04 05 0009 00000001 00")), Err(DecodeError::BadLength { .. })));
    assert!(matches!(decode(&hex("04 09 000d 00000001 0000 0080 00")), Err(DecodeError::BadLength { .. })));
    // Shorter.
    assert!(matches!(decode(&hex("04 06 0010 00000001 0000000000000001")), Err(DecodeError::Truncated { .. })));
    assert!(matches!(decode(&hex("04 18 0010 00000001 00000002 00000000")), Err(DecodeError::Truncated { .. })));
    // Fewer bytes than the header's length; more.
    assert!(matches!(decode(&hex("04 02 000c 00000001 00")), Err(DecodeError::Truncated { .. })));
    assert!(matches!(decode(&hex("04 02 0008 00000001 00")), Err(DecodeError::BadLength { .. })));
    // Version and type.
    assert_eq!(decode(&hex("06 05 0008 00000001")).unwrap_err(), DecodeError::BadVersion(6));
    assert_eq!(decode(&hex("01 05 0008 00000001")).unwrap_err(), DecodeError::BadVersion(1));
    assert_eq!(decode(&hex("04 1e 0008 00000001")).unwrap_err(), DecodeError::BadType(30));
    assert_eq!(decode(&hex("05 23 0008 00000001")).unwrap_err(), DecodeError::BadType(35));
    assert_eq!(encode(6, 1, &Message::BarrierRequest).unwrap_err(), DecodeError::BadVersion(6).into());
    // Types left raw.
    assert_eq!(
        decode(&hex("04 11 000a 00000001 abcd")).unwrap().1,
        Message::Other { kind: 17, body: vec![0xab, 0xcd] }
    );
    assert_eq!(decode(&hex("05 1e 0008 00000001")).unwrap().1, Message::Other { kind: 30, body: vec![] });
    assert!(encode(OFP13, 1, &Message::Other { kind: kind::HELLO, body: vec![] }).is_err());
    // Multipart METER stats stay raw; TABLE_FEATURES has its variant (empty: a query; a body
    // cut short: BAD_LEN); a DESC request with a body is too long.
    let group = hex("04 12 0018 00000001 0009 0000 00000000 ff000000 00000000");
    assert_eq!(
        decode(&group).unwrap().1,
        Message::MultipartRequest(MultipartRequest {
            flags: 0,
            body: MultipartRequestBody::Other { kind: 9, body: hex("ff000000 00000000") }
        })
    );
    assert_eq!(
        decode(&hex("05 12 0010 00000001 000c 0000 00000000")).unwrap().1,
        Message::MultipartRequest(MultipartRequest { flags: 0, body: MultipartRequestBody::TableFeatures(vec![]) })
    );
    let features = hex("04 12 0018 00000001 000c 0000 00000000 ff000000 00000000");
    assert_eq!(decode(&features).unwrap_err().of_error(), OfError::BAD_REQUEST_BAD_LEN);
    // FLOW and AGGREGATE requests and replies have their own variants.
    for v in [OFP13, OFP14] {
        for body in [
            MultipartRequestBody::Flow(rqvs_openflow::flow_mod::FlowStatsRequest::all()),
            MultipartRequestBody::Aggregate(rqvs_openflow::flow_mod::FlowStatsRequest::all()),
        ] {
            let m = Message::MultipartRequest(MultipartRequest { flags: 0, body });
            assert_eq!(decode(&encode(v, 3, &m).unwrap()).unwrap().1, m);
        }
        let m = Message::MultipartReply(MultipartReply {
            flags: 0,
            body: MultipartReplyBody::Aggregate(rqvs_openflow::flow_mod::AggregateStats {
                packet_count: 5,
                byte_count: 320,
                flow_count: 2,
            }),
        });
        assert_eq!(decode(&encode(v, 3, &m).unwrap()).unwrap().1, m);
    }
    assert!(matches!(
        decode(&hex("04 12 0018 00000001 0000 0000 00000000 ff000000 00000000")),
        Err(DecodeError::BadLength { .. })
    ));
    // A 1.4 port whose length is below 40.
    assert!(matches!(
        decode(&hex("05 0c 0018 00000001 00 00000000000000 00000001 0010 0000")),
        Err(DecodeError::BadLength { .. })
    ));
    // A reply over 64 KiB cannot be one message (the caller splits it with MORE).
    let many = MultipartReply { flags: 0, body: MultipartReplyBody::PortDesc(vec![Port::default(); 1100]) };
    assert!(encode(OFP13, 1, &Message::MultipartReply(many)).unwrap_err().0.contains("65535"));
    // Names too long for their fields.
    let long = Port { name: "a-name-of-16-chr".into(), ..Default::default() };
    let status = Message::PortStatus(PortStatus { reason: 0, port: long });
    assert!(encode(OFP13, 1, &status).is_err());
    // A name filling its field (no NUL) or not UTF-8 decodes shortened, so it encodes again.
    let mut wire = encode(OFP13, 1, &Message::PortStatus(PortStatus::default())).unwrap();
    wire[32..48].copy_from_slice(b"abcdefghijklmno\xff");
    let (_, m) = decode(&wire).unwrap();
    let Message::PortStatus(p) = &m else { unreachable!() };
    assert_eq!(p.port.name, "abcdefghijklmno");
    wire[32..48].copy_from_slice(&[0xff; 16]);
    let (_, m) = decode(&wire).unwrap();
    assert!(encode(OFP13, 1, &m).is_ok());
}
