//! The pipeline's messages against real Open vSwitch (3.1, `ovs-ofctl`), in OpenFlow 1.3 and 1.4:
//!
//! - **Instructions and actions.** `ovs-ofctl add-flow` of flows with goto_table,
//!   write_metadata, write_actions, clear_actions, meter, set_field of many fields, push_vlan,
//!   group and Nicira resubmit is captured by a listener playing the switch; rqvs decodes each
//!   FLOW_MOD to the action list written here by hand, and encodes it back to the same bytes.
//! - **Groups.** `ovs-ofctl add-group/mod-group/del-groups` likewise, for the four group types,
//!   weights, watch ports and groups.
//! - **Replies.** rqvs's GROUP_DESC, GROUP stats, GROUP_FEATURES, METER_FEATURES, SET_ASYNC,
//!   GET_ASYNC_REPLY and PORT_MOD are given to `ovs-ofctl ofp-print`, which must print what rqvs
//!   put there without complaint.
//! - **Round trips** (no OVS needed): random pipeline action lists, group mods, async configs and
//!   port mods encode and decode back equal.
//!
//! The OVS parts skip with a printed reason when `ovs-ofctl` is missing, unless
//! `RQVS_REQUIRE_OVS=1`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use rqvs_flow::field::Field;
use rqvs_flow::group::{Bucket, Group, GroupType, OFPG_ANY, OFPP_ANY};
use rqvs_flow::{Action, Actions, Match};
use rqvs_openflow::async_config::{AsyncConfig, PortMod};
use rqvs_openflow::flow_mod::FlowMod;
use rqvs_openflow::group::{GroupFeatures, GroupMod, GroupModCommand, GroupStats, MeterFeatures};
use rqvs_openflow::message::kind;
use rqvs_openflow::multipart::{MultipartReply, MultipartReplyBody};
use rqvs_openflow::{decode, encode, Header, Message, Writer, OFP13, OFP14};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn read_message(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut head = [0u8; 8];
    s.read_exact(&mut head).ok()?;
    let len = usize::from(u16::from_be_bytes([head[2], head[3]]));
    let mut m = head.to_vec();
    m.resize(len.max(8), 0);
    s.read_exact(&mut m[8..]).ok()?;
    Some(m)
}

/// Runs `ovs-ofctl --no-names -O VERSION CMD tcp:127.0.0.1:PORT ARG` against a listener that
/// answers HELLO, echoes and barriers; the messages of type `want` it sent.
fn capture(version: u8, cmd: &str, arg: &str, want: u8) -> Vec<Vec<u8>> {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let proto = if version == OFP13 { "OpenFlow13" } else { "OpenFlow14" };
    let mut child = Command::new("ovs-ofctl")
        .args(["--no-names", "-O", proto, cmd, &format!("tcp:127.0.0.1:{port}"), arg])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    listener.set_nonblocking(true).unwrap();
    let start = Instant::now();
    let mut s = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(_) => {
                if let Some(st) = child.try_wait().unwrap() {
                    let mut err = String::new();
                    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
                    panic!("ovs-ofctl {cmd} {arg:?} exited ({st}) without connecting: {err}");
                }
                assert!(start.elapsed() < Duration::from_secs(20), "ovs-ofctl did not connect");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    };
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut hello = Writer::new();
    Header { version, kind: 0, length: 0, xid: 1 }.write(&mut hello);
    s.write_all(&hello.finish_message().unwrap()).unwrap();
    let mut got = Vec::new();
    while let Some(m) = read_message(&mut s) {
        match m[1] {
            0 => assert_eq!(m[0], version, "ovs-ofctl's HELLO"),
            2 => s.write_all(&[&[version, 3], &m[2..]].concat()).unwrap(),
            20 => s.write_all(&[&[version, 21], &m[2..]].concat()).unwrap(),
            t if t == want => got.push(m),
            t => panic!("ovs-ofctl sent message type {t}: {m:02x?}"),
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "ovs-ofctl {cmd} {arg:?}: {}", String::from_utf8_lossy(&out.stderr));
    got
}

fn f(name: &str) -> &'static Field {
    Field::by_name(name).unwrap_or_else(|| panic!("no field {name}"))
}

fn set(name: &str, value: u128) -> Action {
    let field = f(name);
    Action::SetField { field, value, mask: field.all_ones() }
}

/// ovs-ofctl text, the table it names, and the action list rqvs must decode from what OVS sends.
fn pipeline_flows() -> Vec<(&'static str, u8, Vec<Action>)> {
    use Action::*;
    vec![
        ("table=1,actions=goto_table:2", 1, vec![GotoTable(2)]),
        ("ip,actions=write_metadata:0x5/0xf,goto_table:3", 0, vec![WriteMetadata { value: 5, mask: 0xf }, GotoTable(3)]),
        ("table=7,actions=write_metadata:0xfedcba9876543210", 7, vec![WriteMetadata { value: 0xfedc_ba98_7654_3210, mask: u64::MAX }]),
        (
            "actions=meter:3,output:2,clear_actions,write_actions(output:1,group:2)",
            0,
            vec![Meter(3), Output(2), ClearActions, WriteActions(vec![Output(1), Group(2)])],
        ),
        ("ip,actions=clear_actions", 0, vec![ClearActions]),
        (
            "ip,actions=dec_ttl,write_actions(output:3),goto_table:1",
            0,
            vec![DecTtl, WriteActions(vec![Output(3)]), GotoTable(1)],
        ),
        (
            "actions=resubmit(,3),resubmit(2,4),resubmit(5)",
            0,
            vec![
                Resubmit { in_port: None, table: Some(3) },
                Resubmit { in_port: Some(2), table: Some(4) },
                Resubmit { in_port: Some(5), table: None },
            ],
        ),
        ("ip,actions=set_field:1.2.3.4->ip_src,mod_nw_dst:5.6.7.8", 0, vec![set("nw_src", 0x0102_0304), set("nw_dst", 0x0506_0708)]),
        ("tcp,actions=set_field:80->tcp_dst,mod_tp_src:1000,output:1", 0, vec![set("tcp_dst", 80), set("tcp_src", 1000), Output(1)]),
        ("udp6,actions=set_field:2001:db8::1->ipv6_dst,set_field:53->udp_src", 0, vec![set("ipv6_dst", 0x2001_0db8 << 96 | 1), set("udp_src", 53)]),
        (
            "arp,actions=set_field:2->arp_op,set_field:00:00:00:00:00:09->arp_sha,set_field:10.0.0.1->arp_tpa",
            0,
            vec![set("arp_op", 2), set("arp_sha", 9), set("arp_tpa", 0x0a00_0001)],
        ),
        ("icmp,actions=set_field:3->icmp_type,set_field:1->icmp_code", 0, vec![set("icmp_type", 3), set("icmp_code", 1)]),
        ("ip,actions=set_field:2->ip_ecn,mod_nw_tos:16", 0, vec![set("nw_ecn", 2), SetNwTos(16)]),
        ("actions=set_field:0x1234->metadata,output:1", 0, vec![set("metadata", 0x1234), Output(1)]),
        ("actions=push_vlan:0x88a8,set_field:4097->vlan_vid", 0, vec![PushVlan(0x88a8), SetVlanVid(1)]),
        (
            "dl_vlan=5,actions=push_vlan:0x8100,set_field:4098->vlan_vid,set_field:3->vlan_pcp",
            0,
            vec![PushVlan(0x8100), SetVlanVid(2), set("vlan_pcp", 3)],
        ),
        ("actions=push_vlan:0x8100,set_field:4196->vlan_vid,output:2", 0, vec![SetVlanVid(100), Output(2)]),
        ("actions=group:5", 0, vec![Group(5)]),
        (
            "table=2,actions=write_actions(push_vlan:0x8100,set_field:4196->vlan_vid,output:2)",
            2,
            vec![WriteActions(vec![SetVlanVid(100), Output(2)])],
        ),
        // Faucet's shapes: a VLAN table pushing the native VLAN and going on; a flood table.
        (
            "table=0,priority=9000,in_port=1,vlan_tci=0x0000/0x1fff,actions=push_vlan:0x8100,set_field:4196->vlan_vid,goto_table:1",
            0,
            vec![SetVlanVid(100), GotoTable(1)],
        ),
        (
            "table=3,priority=8192,dl_vlan=100,actions=pop_vlan,output:1,output:2",
            3,
            vec![StripVlan, Output(1), Output(2)],
        ),
    ]
}

#[test]
fn ovs_ofctl_pipeline_flow_mods_decode_and_reencode_byte_for_byte() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    for version in [OFP13, OFP14] {
        for (text, table, actions) in pipeline_flows() {
            let mods = capture(version, "add-flow", text, kind::FLOW_MOD);
            assert_eq!(mods.len(), 1, "{text}");
            let body = &mods[0][8..];
            let fm = FlowMod::decode(version, body)
                .unwrap_or_else(|e| panic!("{text}: rqvs cannot decode OVS's FLOW_MOD {}: {e}", hex(&mods[0])));
            assert_eq!(fm.table_id, table, "{text}");
            assert_eq!(fm.actions, Actions(actions.clone()), "{text}");
            let mut w = Writer::new();
            fm.encode(version, &mut w).unwrap();
            assert_eq!(hex(&w.bytes), hex(body), "{text}: rqvs's bytes (left) differ from OVS's (right)");
        }
    }
}

fn groups() -> Vec<(&'static str, Group)> {
    let b = |weight, watch_port, watch_group, actions: Vec<Action>| Bucket {
        weight,
        watch_port,
        watch_group,
        actions: Actions(actions),
    };
    let mac1 = [0, 0, 0, 0, 0, 1];
    vec![
        (
            "group_id=1,type=all,bucket=output:1,bucket=output:2",
            Group {
                id: 1,
                kind: GroupType::All,
                buckets: vec![
                    b(0, OFPP_ANY, OFPG_ANY, vec![Action::Output(1)]),
                    b(0, OFPP_ANY, OFPG_ANY, vec![Action::Output(2)]),
                ],
            },
        ),
        (
            "group_id=2,type=select,bucket=weight:3,actions=output:1,bucket=weight:5,actions=mod_dl_src:00:00:00:00:00:01,output:2",
            Group {
                id: 2,
                kind: GroupType::Select,
                buckets: vec![
                    b(3, OFPP_ANY, OFPG_ANY, vec![Action::Output(1)]),
                    b(5, OFPP_ANY, OFPG_ANY, vec![Action::SetDlSrc(mac1), Action::Output(2)]),
                ],
            },
        ),
        (
            "group_id=3,type=fast_failover,bucket=watch_port:1,actions=output:1,bucket=watch_group:1,actions=group:1",
            Group {
                id: 3,
                kind: GroupType::FastFailover,
                buckets: vec![
                    b(0, 1, OFPG_ANY, vec![Action::Output(1)]),
                    b(0, OFPP_ANY, 1, vec![Action::Group(1)]),
                ],
            },
        ),
        (
            "group_id=4,type=indirect,bucket=actions=push_vlan:0x8100,set_field:4097->vlan_vid,output:3",
            Group {
                id: 4,
                kind: GroupType::Indirect,
                buckets: vec![b(0, OFPP_ANY, OFPG_ANY, vec![Action::SetVlanVid(1), Action::Output(3)])],
            },
        ),
    ]
}

#[test]
fn ovs_ofctl_group_mods_decode_and_reencode_byte_for_byte() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    for version in [OFP13, OFP14] {
        let mut cases: Vec<(&str, &str, GroupMod)> = Vec::new();
        for (text, group) in groups() {
            cases.push(("add-group", text, GroupMod { command: GroupModCommand::Add, group: group.clone() }));
            cases.push(("mod-group", text, GroupMod { command: GroupModCommand::Modify, group }));
        }
        let del = |id| GroupMod {
            command: GroupModCommand::Delete,
            group: Group { id, kind: GroupType::All, buckets: vec![] },
        };
        cases.push(("del-groups", "group_id=3", del(3)));
        cases.push(("del-groups", "", del(rqvs_openflow::group::OFPG_ALL)));
        for (cmd, text, want) in cases {
            let mods = capture(version, cmd, text, kind::GROUP_MOD);
            assert_eq!(mods.len(), 1, "{cmd} {text}");
            let (h, m) = decode(&mods[0]).unwrap_or_else(|e| panic!("{cmd} {text}: {e}"));
            assert_eq!(m, Message::GroupMod(want), "{cmd} {text}");
            assert_eq!(hex(&encode(version, h.xid, &m).unwrap()), hex(&mods[0]), "{cmd} {text}: re-encoded vs OVS");
        }
    }
}

fn ofp_print(msg: &[u8]) -> String {
    let out = Command::new("ovs-ofctl").args(["ofp-print", &hex(msg)]).output().unwrap();
    assert!(out.status.success(), "ofp-print failed: {}", String::from_utf8_lossy(&out.stderr));
    let s = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!s.contains("***"), "OVS reports a decode problem: {s}");
    s
}

#[test]
fn ovs_ofctl_prints_rqvs_group_meter_async_and_port_mod_messages() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let reply = |body| Message::MultipartReply(MultipartReply { flags: 0, body });
    for version in [OFP13, OFP14] {
        let v = if version == OFP13 { "OF1.3" } else { "OF1.4" };
        let all: Vec<Group> = groups().into_iter().map(|(_, g)| g).collect();
        let p = ofp_print(&encode(version, 1, &reply(MultipartReplyBody::GroupDesc(all))).unwrap());
        for want in [
            "group_id=1,type=all,bucket=actions=output:1,bucket=actions=output:2",
            "group_id=2,type=select,bucket=weight:3,actions=output:1,bucket=weight:5,actions=set_field:00:00:00:00:00:01->eth_src,output:2",
            "group_id=3,type=ff,bucket=watch_port:1,actions=output:1,bucket=watch_group:1,actions=group:1",
            "group_id=4,type=indirect,bucket=actions=push_vlan:0x8100,set_field:4097->vlan_vid,output:3",
        ] {
            assert!(p.contains(want), "{v}: {want} not in {p}");
        }
        let st = GroupStats {
            group_id: 7,
            ref_count: 2,
            packet_count: 11,
            byte_count: 1234,
            duration_sec: 3,
            duration_nsec: 500_000_000,
            buckets: vec![(5, 600), (6, 634)],
        };
        let p = ofp_print(&encode(version, 1, &reply(MultipartReplyBody::GroupStats(vec![st]))).unwrap());
        assert!(
            p.contains(
                "group_id=7,duration=3.500s,ref_count=2,packet_count=11,byte_count=1234,bucket0:packet_count=5,byte_count=600,bucket1:packet_count=6,byte_count=634"
            ),
            "{p}"
        );
        let p =
            ofp_print(&encode(version, 1, &reply(MultipartReplyBody::GroupFeatures(GroupFeatures::rqvs()))).unwrap());
        // OVS prints the type and capability bits in hex: the four types, weight, liveness,
        // chaining and chaining checks.
        assert!(p.contains("Group table:") && p.contains("Types:  0xf") && p.contains("Capabilities:  0xf"), "{p}");
        assert!(p.contains("actions: output group set_field strip_vlan push_vlan dec_ttl"), "{p}");
        assert!(p.contains("max_groups=0x10000"), "{p}");
        let p =
            ofp_print(&encode(version, 1, &reply(MultipartReplyBody::MeterFeatures(MeterFeatures::rqvs()))).unwrap());
        assert!(p.contains("max_meter:262144 max_bands:8 max_color:0"), "{p}");
        assert!(p.contains("band_types: drop") && p.contains("capabilities: kbps pktps burst stats"), "{p}");

        let cfg = AsyncConfig::ovs_default(version);
        let p = ofp_print(&encode(version, 1, &Message::GetAsyncReply(cfg.clone())).unwrap());
        let primary = p.split("secondary:").next().unwrap();
        // 1.3 names reasons 0 and 1 only; 1.4 also action_set, group, packet_out. Never invalid_ttl.
        let pin = if version == OFP13 {
            "PACKET_IN: no_match action\n"
        } else {
            "PACKET_IN: no_match action action_set group packet_out\n"
        };
        assert!(primary.contains(pin), "{p}");
        assert!(p.contains("OFPT_GET_ASYNC_REPLY"), "{p}");
        let p = ofp_print(&encode(version, 1, &Message::SetAsync(cfg)).unwrap());
        assert!(p.contains("OFPT_SET_ASYNC") && p.contains("PORT_STATUS: add delete modify"), "{p}");

        let pm = PortMod { port_no: 1, hw_addr: [2, 0, 0, 0, 0, 1], config: 1, mask: 1, advertise: 0 };
        let p = ofp_print(&encode(version, 1, &Message::PortMod(pm)).unwrap());
        assert!(p.contains("port: 1: addr:02:00:00:00:00:01") && p.contains("config: PORT_DOWN"), "{p}");
    }
}

fn any_field_action() -> impl Strategy<Value = Action> {
    let writable: Vec<&'static Field> = rqvs_openflow::action::set_fields()
        .filter(|f| !matches!(f.name, "dl_src" | "dl_dst" | "vlan_vid" | "ip_dscp" | "in_port"))
        .collect();
    (proptest::sample::select(writable), any::<u128>()).prop_map(|(field, v)| Action::SetField {
        field,
        value: v & field.all_ones(),
        mask: field.all_ones(),
    })
}

fn list_action() -> impl Strategy<Value = Action> {
    prop_oneof![
        (1u32..0xff00).prop_map(Action::Output),
        Just(Action::Flood),
        Just(Action::Normal),
        proptest::option::of(any::<u16>()).prop_map(Action::Controller),
        any::<[u8; 6]>().prop_map(Action::SetDlSrc),
        (0u16..4096).prop_map(Action::SetVlanVid),
        Just(Action::StripVlan),
        Just(Action::DecTtl),
        (0u32..=0xffff_ff00).prop_map(Action::Group),
        (proptest::option::of(0u32..0xff00), proptest::option::of(0u8..255))
            .prop_filter("one of the two", |(p, t)| p.is_some() || t.is_some())
            .prop_map(|(in_port, table)| Action::Resubmit { in_port, table }),
        Just(Action::PushVlan(0x88a8)),
        any_field_action(),
    ]
}

fn pipeline_actions() -> impl Strategy<Value = Actions> {
    (
        proptest::option::of(any::<u32>()),
        proptest::collection::vec(list_action(), 0..5),
        any::<bool>(),
        proptest::option::of(proptest::collection::vec(list_action(), 0..4)),
        proptest::option::of(any::<(u64, u64)>()),
        proptest::option::of(0u8..255),
    )
        .prop_map(|(meter, apply, clear, write, meta, goto)| {
            let mut out = Vec::new();
            out.extend(meter.map(Action::Meter));
            out.extend(apply);
            if clear {
                out.push(Action::ClearActions);
            }
            out.extend(write.map(Action::WriteActions));
            out.extend(meta.map(|(v, m)| Action::WriteMetadata { value: v & m, mask: m }));
            out.extend(goto.map(Action::GotoTable));
            if out.is_empty() {
                Actions::drop()
            } else {
                Actions(out)
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Random pipeline action lists (every instruction, set_field of random writable fields,
    /// groups, resubmits) encode and decode back equal. (The generator leaves out the two
    /// spellings the decoder normalises: a SetField of a field with a typed action, and
    /// push_vlan:0x8100 right before a SetVlanVid on an untagged frame.)
    #[test]
    fn pipeline_actions_round_trip(actions in pipeline_actions()) {
        let mut w = Writer::new();
        rqvs_openflow::action::encode_instructions(&actions, &Match::ANY, &mut w)
            .map_err(|e| TestCaseError::fail(format!("{actions}: {e}")))?;
        let back = rqvs_openflow::action::decode_instructions(&w.bytes)
            .map_err(|e| TestCaseError::fail(format!("{actions}: {e}")))?;
        prop_assert_eq!(back, actions);
    }

    /// Random group mods, async configs and port mods round-trip through whole messages.
    #[test]
    fn group_async_and_port_mods_round_trip(
        v13 in any::<bool>(),
        id in 0u32..=0xffff_ff00,
        kind in 0usize..4,
        command in 0usize..2,
        buckets in proptest::collection::vec(
            (any::<u16>(), any::<u32>(), any::<u32>(), proptest::collection::vec(list_action(), 0..3)),
            0..4,
        ),
        masks in any::<[u32; 6]>(),
        pm in any::<(u32, [u8; 6], u32, u32, u32)>(),
    ) {
        let version = if v13 { OFP13 } else { OFP14 };
        let kind = [GroupType::All, GroupType::Select, GroupType::Indirect, GroupType::FastFailover][kind];
        let buckets = buckets
            .into_iter()
            .map(|(weight, watch_port, watch_group, a)| Bucket {
                weight,
                watch_port,
                watch_group,
                actions: if a.is_empty() { Actions::drop() } else { Actions(a) },
            })
            .collect();
        let command = [GroupModCommand::Add, GroupModCommand::Modify][command];
        let mut msgs = vec![Message::GroupMod(GroupMod { command, group: Group { id, kind, buckets } })];
        let props = (0..6u16).map(|k| (k, masks[usize::from(k)])).collect();
        msgs.push(Message::SetAsync(AsyncConfig { props }));
        msgs.push(Message::GetAsyncRequest);
        let (port_no, hw_addr, config, mask, advertise) = pm;
        msgs.push(Message::PortMod(PortMod { port_no, hw_addr, config, mask, advertise }));
        for m in msgs {
            let bytes = encode(version, 9, &m).map_err(|e| TestCaseError::fail(format!("{m:?}: {e}")))?;
            let (_, back) = decode(&bytes).map_err(|e| TestCaseError::fail(format!("{m:?}: {e}")))?;
            let m = match m {
                // 1.3's fixed layout lists the six masks master first.
                Message::SetAsync(mut c) => {
                    c.props.sort_by_key(|p| (p.0 / 2, std::cmp::Reverse(p.0)));
                    if version == OFP14 {
                        c.props.sort_by_key(|p| p.0);
                    }
                    Message::SetAsync(c)
                }
                m => m,
            };
            let back = match back {
                Message::SetAsync(mut c) if version == OFP14 => {
                    c.props.sort_by_key(|p| p.0);
                    Message::SetAsync(c)
                }
                b => b,
            };
            prop_assert_eq!(back, m);
        }
    }

    /// Arbitrary bytes as GROUP_MOD, SET_ASYNC and PORT_MOD bodies never panic the decoder.
    #[test]
    fn random_bodies_decode_or_fail_cleanly(kind in prop::sample::select(vec![15u8, 16, 26, 27, 28]), body in proptest::collection::vec(any::<u8>(), 0..80), v13 in any::<bool>()) {
        let version = if v13 { OFP13 } else { OFP14 };
        let mut w = Writer::new();
        Header { version, kind, length: 0, xid: 1 }.write(&mut w);
        w.put(&body);
        if let Ok(msg) = w.finish_message() {
            let _ = decode(&msg);
        }
    }
}

/// `ovs-ofctl add-meter/mod-meter/del-meter(s)` (OpenFlow 1.3 and 1.4): rqvs decodes each
/// METER_MOD to the meter written here by hand and encodes it back to the same bytes.
#[test]
fn ovs_ofctl_meter_mods_decode_and_reencode_byte_for_byte() {
    use rqvs_openflow::meter::*;
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let m = |id, flags, bands: Vec<Band>| Meter { id, flags, bands };
    let cases: Vec<(&str, &str, MeterModCommand, Meter)> = vec![
        (
            "add-meter",
            "meter=1,pktps,burst,stats,bands=type=drop,rate=100,burst_size=10",
            MeterModCommand::Add,
            m(1, OFPMF_PKTPS | OFPMF_BURST | OFPMF_STATS, vec![Band::drop(100, 10)]),
        ),
        (
            "mod-meter",
            "meter=2,kbps,bands=type=drop,rate=1000,type=drop,rate=2000",
            MeterModCommand::Modify,
            m(2, OFPMF_KBPS, vec![Band::drop(1000, 0), Band::drop(2000, 0)]),
        ),
        (
            "add-meter",
            "meter=controller,pktps,bands=type=drop,rate=10",
            MeterModCommand::Add,
            m(OFPM_CONTROLLER, OFPMF_PKTPS, vec![Band::drop(10, 0)]),
        ),
        (
            "add-meter",
            "meter=5,kbps,bands=type=dscp_remark,rate=100,prec_level=1",
            MeterModCommand::Add,
            m(
                5,
                OFPMF_KBPS,
                vec![Band { kind: OFPMBT_DSCP_REMARK, rate: 100, burst_size: 0, prec_level: 1, experimenter: 0 }],
            ),
        ),
        ("del-meter", "meter=3", MeterModCommand::Delete, m(3, 0, vec![])),
        ("del-meters", "meter=all", MeterModCommand::Delete, m(OFPM_ALL, 0, vec![])),
    ];
    for version in [OFP13, OFP14] {
        for (cmd, text, command, meter) in &cases {
            let got = capture(version, cmd, text, kind::METER_MOD);
            assert_eq!(got.len(), 1, "{cmd} {text}");
            let (h, msg) = decode(&got[0]).unwrap();
            let Message::Other { kind: k, body } = msg else { panic!("{cmd} {text}: {msg:?}") };
            assert_eq!(k, kind::METER_MOD);
            let mm = MeterMod::decode(&body).unwrap();
            let want = MeterMod { command: *command, meter: meter.clone() };
            assert_eq!(mm, want, "{cmd} {text}");
            let again =
                encode(version, h.xid, &Message::Other { kind: kind::METER_MOD, body: want.to_body() }).unwrap();
            assert_eq!(hex(&again), hex(&got[0]), "{cmd} {text}");
        }
    }
}

/// rqvs's METER and METER_CONFIG replies, as `ovs-ofctl ofp-print` reads them (what
/// `meter-stats` and `dump-meters` print).
#[test]
fn ovs_ofctl_prints_rqvs_meter_stats_and_config() {
    use rqvs_openflow::meter::*;
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let reply = |kind, body| {
        Message::MultipartReply(MultipartReply { flags: 0, body: MultipartReplyBody::Other { kind, body } })
    };
    for version in [OFP13, OFP14] {
        let st = vec![
            MeterStats {
                meter_id: 1,
                flow_count: 2,
                packet_in_count: 2000,
                byte_in_count: 120_000,
                duration_sec: 9,
                duration_nsec: 708_000_000,
                bands: vec![(1800, 108_000)],
            },
            MeterStats { meter_id: OFPM_CONTROLLER, bands: vec![(0, 0), (0, 0)], ..MeterStats::default() },
        ];
        let p = ofp_print(&encode(version, 2, &reply(MP_METER, encode_meter_stats(&st))).unwrap());
        assert!(
            p.contains("meter:1 flow_count:2 packet_in_count:2000 byte_in_count:120000 duration:9.708s bands:\n0: packet_count:1800 byte_count:108000"),
            "{p}"
        );
        assert!(p.contains("meter:controller flow_count:0"), "{p}");
        assert!(p.contains("1: packet_count:0 byte_count:0"), "{p}");
        let cfg = vec![
            Meter { id: 1, flags: OFPMF_PKTPS | OFPMF_BURST | OFPMF_STATS, bands: vec![Band::drop(100, 10)] },
            Meter { id: 4, flags: OFPMF_KBPS, bands: vec![Band::drop(100, 0), Band::drop(200, 0)] },
        ];
        let p = ofp_print(&encode(version, 2, &reply(MP_METER_CONFIG, encode_meter_configs(&cfg))).unwrap());
        assert!(p.contains("meter=1 pktps burst stats bands=\ntype=drop rate=100 burst_size=10"), "{p}");
        assert!(p.contains("meter=4 kbps bands=\ntype=drop rate=100\ntype=drop rate=200"), "{p}");
    }
}
