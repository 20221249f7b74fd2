//! Real Open vSwitch reads the messages rqvs encodes as rqvs means them: each kind is encoded,
//! given to `ovs-ofctl ofp-print HEX` (Debian package `openvswitch-switch`), which must decode
//! it without complaint (no `***` remarks, no "bad"/"too short") and print the fields rqvs put in.
//!
//! Skips when `ovs-ofctl` is not installed, unless `RQVS_REQUIRE_OVS=1` (set by `.ci/run`).

use std::process::Command;

use rqvs_openflow::bundle::{self, BundleAdd, BundleControl};
use rqvs_openflow::message::{ErrorMsg, Features, Hello, PortStatus, Role, SwitchConfig};
use rqvs_openflow::multipart::{
    Desc, MultipartReply, MultipartReplyBody, MultipartRequest, MultipartRequestBody, PortStats, PortStatsEthernet,
    TableStats, MORE,
};
use rqvs_openflow::port::{Port, PortEthernet};
use rqvs_openflow::{decode, encode, Message, OfError, OFP13, OFP14};

/// What `ovs-ofctl ofp-print` prints for `msg` encoded as `version`, after checking that OVS
/// decoded it cleanly and that rqvs decodes its own bytes back to `msg`.
fn ovs_print(version: u8, xid: u32, msg: &Message) -> String {
    let wire = encode(version, xid, msg).unwrap();
    assert_eq!(&decode(&wire).unwrap().1, msg);
    let hex: String = wire.iter().map(|b| format!("{b:02x}")).collect();
    let out = Command::new("ovs-ofctl").arg("ofp-print").arg(&hex).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ovs-ofctl ofp-print {hex} failed: {stderr}");
    for bad in ["***", "too short", "(unknown", "OFPERR"] {
        assert!(!stdout.contains(bad), "OVS complained ({bad:?}) about {hex}:\n{stdout}");
    }
    let vname = if version == OFP13 { "(OF1.3)" } else { "(OF1.4)" };
    assert!(stdout.contains(vname), "{stdout}");
    assert!(stdout.contains(&format!("(xid={xid:#x})")), "{stdout}");
    eprintln!("{stdout}");
    stdout
}

fn has(out: &str, parts: &[&str]) {
    for p in parts {
        assert!(out.contains(p), "OVS's print lacks {p:?}:\n{out}");
    }
}

const BOTH: [u8; 2] = [OFP13, OFP14];

fn sample_port() -> Port {
    Port {
        port_no: 7,
        hw_addr: [0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0x07],
        name: "rqvs-p7".into(),
        config: 1, // OFPPC_PORT_DOWN
        state: 4,  // OFPPS_LIVE
        ethernet: Some(PortEthernet {
            curr: 0x840, // 10GB_FD, COPPER
            advertised: 0,
            supported: 0x20, // 1GB_FD
            peer: 0,
            curr_speed: 10_000_000,
            max_speed: 10_000_000,
        }),
        properties: vec![],
    }
}

#[test]
fn hello() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    for v in BOTH {
        let out = ovs_print(v, 1, &Message::Hello(Hello::with_versions(&[OFP13, OFP14])));
        has(&out, &["OFPT_HELLO", "version bitmap: 0x04, 0x05"]);
    }
}

#[test]
fn error_echo_barrier() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    for v in BOTH {
        // The offending message is quoted, and OVS decodes the quote.
        let offending = encode(v, 9, &Message::EchoRequest(vec![1, 2])).unwrap();
        let out = ovs_print(v, 9, &Message::Error(ErrorMsg::new(OfError::BAD_REQUEST_BAD_TYPE, &offending)));
        has(&out, &["OFPT_ERROR", "OFPBRC_BAD_TYPE", "OFPT_ECHO_REQUEST (OF1.", "2 bytes of payload"]);
        has(
            &ovs_print(v, 2, &Message::EchoRequest(b"ping".to_vec())),
            &["OFPT_ECHO_REQUEST", "4 bytes of payload", "70 69 6e 67"],
        );
        has(
            &ovs_print(v, 3, &Message::EchoReply(b"pong".to_vec())),
            &["OFPT_ECHO_REPLY", "4 bytes of payload", "70 6f 6e 67"],
        );
        has(&ovs_print(v, 4, &Message::BarrierRequest), &["OFPT_BARRIER_REQUEST"]);
        has(&ovs_print(v, 5, &Message::BarrierReply), &["OFPT_BARRIER_REPLY"]);
    }
}

#[test]
fn features_and_config() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    for v in BOTH {
        has(&ovs_print(v, 1, &Message::FeaturesRequest), &["OFPT_FEATURES_REQUEST"]);
        let f = Features { datapath_id: 0xabc, n_buffers: 256, n_tables: 254, auxiliary_id: 0, capabilities: 0x4f };
        has(
            &ovs_print(v, 2, &Message::FeaturesReply(f)),
            &[
                "OFPT_FEATURES_REPLY",
                "dpid:0000000000000abc",
                "n_tables:254, n_buffers:256",
                "capabilities: FLOW_STATS TABLE_STATS PORT_STATS GROUP_STATS QUEUE_STATS",
            ],
        );
        has(&ovs_print(v, 3, &Message::GetConfigRequest), &["OFPT_GET_CONFIG_REQUEST"]);
        let c = SwitchConfig { flags: 1, miss_send_len: 1234 };
        has(
            &ovs_print(v, 4, &Message::GetConfigReply(c)),
            &["OFPT_GET_CONFIG_REPLY", "frags=drop", "miss_send_len=1234"],
        );
        has(&ovs_print(v, 5, &Message::SetConfig(c)), &["OFPT_SET_CONFIG", "frags=drop", "miss_send_len=1234"]);
    }
}

#[test]
fn role() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    for v in BOTH {
        let r = Role { role: 2, generation_id: 77 };
        has(&ovs_print(v, 1, &Message::RoleRequest(r)), &["OFPT_ROLE_REQUEST", "role=primary", "generation_id=77"]);
        let r = Role { role: 3, generation_id: 78 };
        has(&ovs_print(v, 2, &Message::RoleReply(r)), &["OFPT_ROLE_REPLY", "role=secondary", "generation_id=78"]);
    }
}

#[test]
fn port_status() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    for v in BOTH {
        let out = ovs_print(v, 1, &Message::PortStatus(PortStatus { reason: 2, port: sample_port() }));
        has(
            &out,
            &[
                "OFPT_PORT_STATUS",
                "MOD:",
                "7(rqvs-p7): addr:02:aa:bb:cc:dd:07",
                "config:     PORT_DOWN",
                "state:      LIVE",
                "current:    10GB-FD COPPER",
                "supported:  1GB-FD",
                "speed: 10000 Mbps now, 10000 Mbps max",
            ],
        );
    }
}

#[test]
fn multipart_desc_table_ports() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    for v in BOTH {
        let req = |body| Message::MultipartRequest(MultipartRequest { flags: 0, body });
        let rep = |flags, body| Message::MultipartReply(MultipartReply { flags, body });
        has(&ovs_print(v, 1, &req(MultipartRequestBody::Desc)), &["OFPST_DESC request"]);
        let d = Desc {
            mfr_desc: "rqvs project".into(),
            hw_desc: "userspace".into(),
            sw_desc: "rqvs 0.1.0".into(),
            serial_num: "42".into(),
            dp_desc: "br0".into(),
        };
        has(
            &ovs_print(v, 2, &rep(0, MultipartReplyBody::Desc(d))),
            &[
                "OFPST_DESC reply",
                "Manufacturer: rqvs project",
                "Hardware: userspace",
                "Software: rqvs 0.1.0",
                "Serial Num: 42",
                "DP Description: br0",
            ],
        );
        has(&ovs_print(v, 3, &req(MultipartRequestBody::Table)), &["OFPST_TABLE request"]);
        let t = vec![
            TableStats { table_id: 0, active_count: 927, lookup_count: 9328, matched_count: 9000 },
            TableStats { table_id: 1, active_count: 3, lookup_count: 5, matched_count: 4 },
        ];
        has(
            &ovs_print(v, 4, &rep(MORE, MultipartReplyBody::Table(t))),
            &[
                "OFPST_TABLE reply",
                "flags=[more]",
                "table 0:",
                "active=927, lookup=9328, matched=9000",
                "table 1:",
                "active=3, lookup=5, matched=4",
            ],
        );
        has(
            &ovs_print(v, 5, &req(MultipartRequestBody::PortStats { port_no: 7 })),
            &["OFPST_PORT request", "port_no=7"],
        );
        has(
            &ovs_print(v, 6, &req(MultipartRequestBody::PortStats { port_no: rqvs_openflow::multipart::OFPP_ANY })),
            &["OFPST_PORT request", "port_no=ANY"],
        );
        let s = PortStats {
            port_no: 7,
            duration_sec: 12,
            duration_nsec: 500_000_000,
            rx_packets: 100,
            tx_packets: 200,
            rx_bytes: 6400,
            tx_bytes: 12800,
            rx_dropped: 1,
            tx_dropped: 2,
            rx_errors: 3,
            tx_errors: 4,
            ethernet: Some(PortStatsEthernet { rx_frame_err: 5, rx_over_err: 6, rx_crc_err: 7, collisions: 8 }),
            properties: vec![],
        };
        has(
            &ovs_print(v, 7, &rep(0, MultipartReplyBody::PortStats(vec![s]))),
            &[
                "OFPST_PORT reply",
                "1 ports",
                "port  7: rx pkts=100, bytes=6400, drop=1, errs=3, frame=5, over=6, crc=7",
                "tx pkts=200, bytes=12800, drop=2, errs=4, coll=8",
                "duration=12.500s",
            ],
        );
        has(&ovs_print(v, 8, &req(MultipartRequestBody::PortDesc)), &["OFPST_PORT_DESC request"]);
        let mut p2 = sample_port();
        p2.port_no = 8;
        p2.name = "rqvs-p8".into();
        has(
            &ovs_print(v, 9, &rep(0, MultipartReplyBody::PortDesc(vec![sample_port(), p2]))),
            &["OFPST_PORT_DESC reply", "7(rqvs-p7): addr:02:aa:bb:cc:dd:07", "8(rqvs-p8):", "speed: 10000 Mbps now"],
        );
    }
}

/// A FLOW_MOD deleting every flow of every table, written by hand from the 1.3/1.4 layout
/// (`ofp_flow_mod` with an empty OXM match): the FLOW_MOD codec is another module's.
fn delete_all_flows(version: u8, xid: u32) -> Vec<u8> {
    let mut b = vec![version, 14, 0, 56];
    b.extend_from_slice(&xid.to_be_bytes());
    b.extend_from_slice(&[0; 16]); // cookie, cookie_mask
    b.extend_from_slice(&[0xff, 3, 0, 0, 0, 0, 0, 0]); // table all, OFPFC_DELETE, timeouts, priority
    b.extend_from_slice(&[0xff; 12]); // buffer_id, out_port, out_group: none/any
    b.extend_from_slice(&[0; 4]); // flags, pad
    b.extend_from_slice(&[0, 1, 0, 4, 0, 0, 0, 0]); // OFPMT_OXM, length 4, padding
    b
}

#[test]
fn bundles() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    for v in BOTH {
        let c =
            |kind| BundleControl { bundle_id: 0x42, kind, flags: bundle::ATOMIC | bundle::ORDERED, properties: vec![] };
        let name = if v == OFP13 { "ONFT_BUNDLE_CONTROL" } else { "OFPT_BUNDLE_CONTROL" };
        let out = ovs_print(v, 1, &Message::BundleControl(c(bundle::OPEN_REQUEST)));
        has(&out, &[name, "bundle_id=0x42 type=OPEN_REQUEST flags=atomic ordered"]);
        let out = ovs_print(v, 2, &Message::BundleControl(c(bundle::COMMIT_REPLY)));
        has(&out, &[name, "bundle_id=0x42 type=COMMIT_REPLY"]);
        let add =
            BundleAdd { bundle_id: 0x42, flags: bundle::ATOMIC, message: delete_all_flows(v, 3), properties: vec![] };
        let out = ovs_print(v, 3, &Message::BundleAdd(add));
        let name = if v == OFP13 { "ONFT_BUNDLE_ADD_MESSAGE" } else { "OFPT_BUNDLE_ADD_MESSAGE" };
        has(&out, &[name, "bundle_id=0x42 flags=atomic", "OFPT_FLOW_MOD", "DEL"]);
    }
}

/// An Ethernet/IPv4/UDP frame of `len` bytes (OVS decodes and prints its headers).
fn udp_frame(len: usize) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00];
    let ip_len = (len - 14) as u16;
    f.extend_from_slice(&[0x45, 0, (ip_len >> 8) as u8, ip_len as u8, 0, 0, 0, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    let udp_len = ip_len - 20;
    f.extend_from_slice(&[0x04, 0x00, 0, 53, (udp_len >> 8) as u8, udp_len as u8, 0, 0]);
    f.resize(len, 0xab);
    f
}

#[test]
fn packet_in_and_packet_out() {
    use rqvs_flow::{Action, Actions, FlowKey, Match};
    use rqvs_openflow::flow_mod::{PacketIn, PacketOut, OFPR_ACTION, OFPR_NO_MATCH, OFPR_PACKET_OUT, OFP_NO_BUFFER};
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let in_port = |p: u32| {
        Match::from_masked(
            FlowKey { in_port: p, ..FlowKey::default() },
            FlowKey { in_port: u32::MAX, ..FlowKey::default() },
        )
    };
    let frame = udp_frame(90);
    for v in BOTH {
        // What the switch sends: unbuffered, the whole frame, in_port in the match.
        for (reason, cookie, via) in [
            (OFPR_NO_MATCH, 0x0, "(via no_match)"),
            (OFPR_ACTION, 0x1234, "(via action)"),
            (OFPR_PACKET_OUT, u64::MAX, "(via packet_out)"),
        ] {
            if v == OFP13 && reason == OFPR_PACKET_OUT {
                continue; // not a 1.3 reason: the switch sends ACTION there
            }
            let pi = PacketIn {
                buffer_id: OFP_NO_BUFFER,
                total_len: frame.len() as u16,
                reason,
                table_id: 0,
                cookie,
                matches: in_port(3),
                data: frame.clone(),
            };
            let out = ovs_print(v, 7, &Message::PacketIn(pi));
            let cookie_text = if cookie == u64::MAX { String::new() } else { format!("cookie={cookie:#x} ") };
            has(
                &out,
                &[
                    "OFPT_PACKET_IN",
                    &format!("{cookie_text}total_len=90 in_port=3 {via} data_len=90 (unbuffered)"),
                    "udp,vlan_tci=0x0000,dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:02,nw_src=10.0.0.1,nw_dst=10.0.0.2",
                    "tp_src=1024,tp_dst=53",
                ],
            );
        }
        // What a controller sends.
        let po = PacketOut {
            buffer_id: OFP_NO_BUFFER,
            in_port: 0xffff_fffd,
            actions: Actions(vec![Action::SetDlDst([2, 0, 0, 0, 0, 9]), Action::Output(2), Action::Flood]),
            data: frame.clone(),
        };
        has(
            &ovs_print(v, 8, &Message::PacketOut(po)),
            &[
                "OFPT_PACKET_OUT",
                "in_port=CONTROLLER actions=set_field:02:00:00:00:00:09->eth_dst,output:2,FLOOD data_len=90",
                "udp,vlan_tci=0x0000,dl_src=02:00:00:00:00:01",
            ],
        );
        let po = PacketOut {
            buffer_id: OFP_NO_BUFFER,
            in_port: 1,
            actions: Actions(vec![Action::Other("TABLE".into()), Action::Normal, Action::Controller(Some(64))]),
            data: frame.clone(),
        };
        has(&ovs_print(v, 9, &Message::PacketOut(po)), &["in_port=1 actions=TABLE,NORMAL,CONTROLLER:64 data_len=90"]);
    }
}
