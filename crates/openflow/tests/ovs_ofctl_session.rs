//! Real Open vSwitch talks to a switch that speaks through rqvs's codec: a tiny switch on
//! 127.0.0.1 decodes every message `ovs-ofctl` sends with [`rqvs_openflow::decode`] and answers
//! with messages [`rqvs_openflow::encode`] builds (HELLO with a version bitmap, FEATURES_REPLY,
//! PORT_DESC and DESC replies, GET_CONFIG_REPLY, BARRIER_REPLY, ECHO_REPLY, bundle control
//! replies, DESC/TABLE/PORT_STATS replies, and a TABLE_FEATURES reply of rqvs's table). The
//! tests check what rqvs decoded and what `ovs-ofctl` printed of rqvs's answers.
//!
//! What OVS 3.1 sends, as seen here: `show` opens two connections (HELLO, FEATURES_REQUEST,
//! PORT_DESC; HELLO, GET_CONFIG_REQUEST); `--bundle add-flow` opens three (TABLE_FEATURES;
//! PORT_DESC; bundle OPEN_REQUEST, BUNDLE_ADD of the FLOW_MOD, BARRIER, COMMIT_REQUEST), in
//! OpenFlow 1.3 as ONF EXT-230 experimenter messages (exp_type 2300/2301), in 1.4 as types 33/34.
//!
//! Skips when `ovs-ofctl` is not installed, unless `RQVS_REQUIRE_OVS=1` (set by `.ci/run`).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use rqvs_openflow::bundle::{self, BundleControl};
use rqvs_openflow::message::{bitmap_of, kind, ErrorMsg, Features, Hello, SwitchConfig};
use rqvs_openflow::multipart::{
    Desc, MultipartReply, MultipartReplyBody, MultipartRequest, MultipartRequestBody, PortStats, PortStatsEthernet,
    TableStats, OFPP_ANY,
};
use rqvs_openflow::port::{Port, PortEthernet};
use rqvs_openflow::table_features::TableFeatures;
use rqvs_openflow::{decode, encode, negotiate, DecodeError, Header, Message, OfError, OFP13, OFP14};

/// One message off the stream (header, then the rest of its length); `None` at EOF.
fn read_message(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; Header::LEN];
    s.read_exact(&mut buf).ok()?;
    let h = Header::peek(&buf).ok()?;
    buf.resize(usize::from(h.length), 0);
    s.read_exact(&mut buf[Header::LEN..]).ok()?;
    Some(buf)
}

fn port(n: u32) -> Port {
    Port {
        port_no: n,
        hw_addr: [0x02, 0, 0, 0, 0, n as u8],
        name: format!("rqvs{n}"),
        config: 0,
        state: 4,
        ethernet: Some(PortEthernet {
            curr: 0x840,
            curr_speed: 10_000_000,
            max_speed: 10_000_000,
            ..Default::default()
        }),
        properties: vec![],
    }
}

/// rqvs's table features ([`TableFeatures::rqvs`]), the table named "classifier".
fn table_features() -> Vec<TableFeatures> {
    vec![TableFeatures { name: "classifier".into(), ..TableFeatures::rqvs() }]
}

/// The switch: answers one connection until the peer closes it; returns every decode result.
fn serve(mut s: TcpStream) -> Seen {
    let ours = bitmap_of(&[OFP13, OFP14]);
    let mut seen = Vec::new();
    let mut version = OFP14;
    let send = |s: &mut TcpStream, v: u8, xid: u32, m: &Message| {
        let _ = s.write_all(&encode(v, xid, m).unwrap());
    };
    send(&mut s, version, 1, &Message::Hello(Hello::with_versions(&[OFP13, OFP14])));
    while let Some(bytes) = read_message(&mut s) {
        let d = decode(&bytes);
        if let Ok((h, m)) = &d {
            let xid = h.xid;
            let reply = match m {
                Message::Hello(hello) => {
                    version = negotiate(ours, h.version, hello).expect("a common version");
                    None
                }
                Message::EchoRequest(d) => Some(Message::EchoReply(d.clone())),
                Message::FeaturesRequest => Some(Message::FeaturesReply(Features {
                    datapath_id: 0x00_0000_5eed_c0de,
                    n_buffers: 0,
                    n_tables: 254,
                    auxiliary_id: 0,
                    capabilities: 0x4f,
                })),
                Message::GetConfigRequest => {
                    Some(Message::GetConfigReply(SwitchConfig { flags: 0, miss_send_len: 128 }))
                }
                Message::BarrierRequest => Some(Message::BarrierReply),
                Message::MultipartRequest(MultipartRequest { body: MultipartRequestBody::PortDesc, .. }) => {
                    Some(Message::MultipartReply(MultipartReply {
                        flags: 0,
                        body: MultipartReplyBody::PortDesc(vec![port(1), port(2)]),
                    }))
                }
                Message::MultipartRequest(MultipartRequest { body: MultipartRequestBody::Desc, .. }) => {
                    Some(Message::MultipartReply(MultipartReply {
                        flags: 0,
                        body: MultipartReplyBody::Desc(Desc {
                            mfr_desc: "rqvs".into(),
                            dp_desc: "fake".into(),
                            ..Default::default()
                        }),
                    }))
                }
                Message::MultipartRequest(MultipartRequest { body: MultipartRequestBody::Table, .. }) => {
                    let t = |table_id, active_count| TableStats {
                        table_id,
                        active_count,
                        lookup_count: 9328,
                        matched_count: 9000,
                    };
                    Some(Message::MultipartReply(MultipartReply {
                        flags: 0,
                        body: MultipartReplyBody::Table(vec![t(0, 927), t(1, 0)]),
                    }))
                }
                Message::MultipartRequest(MultipartRequest {
                    body: MultipartRequestBody::PortStats { port_no },
                    ..
                }) => {
                    let stats = |n: u32| PortStats {
                        port_no: n,
                        rx_packets: 1000 + u64::from(n),
                        tx_bytes: 64_000,
                        duration_sec: 3,
                        ethernet: Some(PortStatsEthernet { collisions: 2, ..Default::default() }),
                        ..Default::default()
                    };
                    let ports = if *port_no == OFPP_ANY { vec![stats(1), stats(2)] } else { vec![stats(*port_no)] };
                    Some(Message::MultipartReply(MultipartReply {
                        flags: 0,
                        body: MultipartReplyBody::PortStats(ports),
                    }))
                }
                // TABLE_FEATURES (asked before a flow mod): rqvs's one table.
                Message::MultipartRequest(MultipartRequest {
                    body: MultipartRequestBody::TableFeatures(_), ..
                }) => Some(Message::MultipartReply(MultipartReply {
                    flags: 0,
                    body: MultipartReplyBody::TableFeatures(table_features()),
                })),
                Message::MultipartRequest(MultipartRequest { body: MultipartRequestBody::Other { .. }, .. }) => {
                    Some(Message::Error(ErrorMsg::new(OfError::BAD_REQUEST_BAD_MULTIPART, &bytes)))
                }
                Message::BundleControl(c) if c.kind % 2 == 0 && c.kind <= bundle::DISCARD_REQUEST => {
                    Some(Message::BundleControl(BundleControl { kind: c.kind + 1, properties: vec![], ..c.clone() }))
                }
                _ => None,
            };
            if let Some(r) = reply {
                send(&mut s, version, xid, &r);
            }
        }
        seen.push(d);
    }
    seen
}

type Seen = Vec<Result<(Header, Message), DecodeError>>;

/// Runs `ovs-ofctl args...` with `TARGET` replaced by `tcp:127.0.0.1:PORT` against the switch
/// (which serves every connection: `ovs-ofctl show` opens a second one); its stdout and what
/// the switch decoded, connection after connection.
fn session(args: &[&str]) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = Arc::clone(&stop);
    let acceptor = thread::spawn(move || {
        let mut conns = Vec::new();
        for s in listener.incoming() {
            if stop2.load(Ordering::SeqCst) {
                break;
            }
            conns.push(thread::spawn(move || serve(s.unwrap())));
        }
        conns.into_iter().flat_map(|c| c.join().unwrap()).collect::<Seen>()
    });
    let mut cmd = Command::new("ovs-ofctl");
    cmd.arg("--timeout=10");
    cmd.arg("-vvconn:dbg");
    for a in args {
        cmd.arg(a.replace("TARGET", &format!("tcp:{addr}")));
    }
    let out = cmd.output().unwrap();
    stop.store(true, Ordering::SeqCst);
    drop(TcpStream::connect(addr)); // wakes the acceptor up
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "ovs-ofctl {args:?} failed: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    let seen = acceptor.join().unwrap();
    for d in &seen {
        assert!(d.is_ok(), "rqvs could not decode what ovs-ofctl sent: {d:?}");
    }
    eprintln!("{}\n{stdout}\n{seen:#?}", String::from_utf8_lossy(&out.stderr));
    (stdout, seen)
}

fn messages(seen: &Seen) -> Vec<(Header, Message)> {
    seen.iter().filter_map(|d| d.clone().ok()).collect()
}

#[test]
fn ovs_ofctl_show_against_an_rqvs_encoded_switch() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    for (flag, v) in [("OpenFlow13", OFP13), ("OpenFlow14", OFP14)] {
        let (out, seen) = session(&["-O", flag, "show", "TARGET"]);
        let ms = messages(&seen);
        // OVS's HELLO carries a bitmap with the asked-for version; the rest is in that version.
        let (h0, Message::Hello(hello)) = &ms[0] else { panic!("first message {:?}", ms[0]) };
        assert_eq!(negotiate(bitmap_of(&[OFP13, OFP14]), h0.version, hello), Some(v));
        assert!(ms[1..].iter().all(|(h, _)| h.version == v));
        assert!(ms.iter().any(|(_, m)| *m == Message::FeaturesRequest));
        assert!(ms.iter().any(|(_, m)| matches!(
            m,
            Message::MultipartRequest(MultipartRequest { body: MultipartRequestBody::PortDesc, .. })
        )));
        assert!(ms.iter().any(|(_, m)| *m == Message::GetConfigRequest));
        for p in [
            "dpid:000000005eedc0de",
            "n_tables:254",
            " 1(rqvs1): addr:02:00:00:00:00:01",
            " 2(rqvs2): addr:02:00:00:00:00:02",
            "speed: 10000 Mbps now",
            "miss_send_len=128",
        ] {
            assert!(out.contains(p), "ovs-ofctl show printed no {p:?}:\n{out}");
        }
    }
}

#[test]
fn ovs_ofctl_bundle_add_flow_sends_onf_bundles_in_13_and_standard_ones_in_14() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    for (flag, v) in [("OpenFlow13", OFP13), ("OpenFlow14", OFP14)] {
        let (_, seen) = session(&["-O", flag, "--bundle", "add-flow", "TARGET", "priority=7,ip,actions=drop"]);
        let ms = messages(&seen);
        let controls: Vec<&BundleControl> = ms
            .iter()
            .filter_map(|(_, m)| match m {
                Message::BundleControl(c) => Some(c),
                _ => None,
            })
            .collect();
        let kinds: Vec<u16> = controls.iter().map(|c| c.kind).collect();
        assert_eq!(kinds, [bundle::OPEN_REQUEST, bundle::COMMIT_REQUEST], "{flag}: {ms:#?}");
        let adds: Vec<_> = ms
            .iter()
            .filter_map(|(h, m)| match m {
                Message::BundleAdd(a) => Some((h, a)),
                _ => None,
            })
            .collect();
        assert_eq!(adds.len(), 1, "{flag}: {ms:#?}");
        let (h, add) = adds[0];
        assert_eq!(h.version, v);
        assert_eq!(add.bundle_id, controls[0].bundle_id);
        // The bundled message is a whole FLOW_MOD of the same version: the flow the command gave.
        let (ih, inner) = add.inner().unwrap();
        assert_eq!((ih.version, ih.xid), (v, h.xid));
        let Message::FlowMod(f) = &inner else { panic!("a FLOW_MOD, found {inner:?}") };
        assert_eq!((f.priority, &f.actions), (7, &rqvs_flow::Actions::drop()), "{f:?}");
        if v == OFP13 {
            // On the wire: an EXPERIMENTER message, ONF's id, exp_type 2301.
            let raw = encode(v, h.xid, &Message::BundleAdd(add.clone())).unwrap();
            assert_eq!(raw[1], kind::EXPERIMENTER);
            assert_eq!(&raw[8..16], &[0x4f, 0x4e, 0x46, 0x00, 0, 0, 0x08, 0xfd]);
        }
    }
}

#[test]
fn ovs_ofctl_dump_desc_ports_and_tables() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    for flag in ["OpenFlow13", "OpenFlow14"] {
        let (out, _) = session(&["-O", flag, "dump-desc", "TARGET"]);
        assert!(out.contains("Manufacturer: rqvs") && out.contains("DP Description: fake"), "{out}");
        let (out, _) = session(&["-O", flag, "dump-ports", "TARGET"]);
        for p in ["2 ports", "port  1: rx pkts=1001", "port  2: rx pkts=1002", "bytes=64000", "coll=2", "duration=3s"] {
            assert!(out.contains(p), "dump-ports printed no {p:?}:\n{out}");
        }
        let (out, seen) = session(&["-O", flag, "dump-ports", "TARGET", "2"]);
        assert!(out.contains("1 ports") && out.contains("port  2:"), "{out}");
        assert!(messages(&seen).iter().any(|(_, m)| matches!(
            m,
            Message::MultipartRequest(MultipartRequest { body: MultipartRequestBody::PortStats { port_no: 2 }, .. })
        )));
        let (out, _) = session(&["-O", flag, "dump-tables", "TARGET"]);
        for p in ["table 0", "active=927, lookup=9328, matched=9000"] {
            assert!(out.contains(p), "dump-tables printed no {p:?}:\n{out}");
        }
    }
}
