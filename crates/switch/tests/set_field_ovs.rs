//! `set_field` on the fields the executor writes besides addresses and TCP/UDP ports — SCTP
//! ports, ICMPv4/ICMPv6 type and code, the IPv6 flow label, the ARP fields, the ND target and
//! link-layer addresses — byte for byte as real Open vSwitch 3.1 writes them: each frame goes
//! into a private OVS (a dummy port, `netdev-dummy/receive`) whose flow sets the field and
//! outputs to port 2 (its frames written by `tx_pcap`), and through rqvs's translation and
//! executor with the same flow; the two output frames must be equal (checksums included).
//!
//! Skips without Open vSwitch, unless `RQVS_REQUIRE_OVS=1`.

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rqvs_classify::ofproto::OfprotoClassifier;
use rqvs_flow::formats::ofctl;
use rqvs_flow::frame::{build_frame, extract_datapath};
use rqvs_flow::key::*;
use rqvs_flow::FlowKey;
use rqvs_ofproto::xlate::{xlate, NoGroups};
use rqvs_ports::{open_tap, PortConfig, TxQueue};
use rqvs_switch::execute::Executor;
use rqvs_switch::normal::MacTable;
use rqvs_testkit::ovs;

fn v4(proto: u8, sport: u16, dport: u16) -> FlowKey {
    let mut k = FlowKey::ipv4(0x0a00_0001, 0x0a00_0002, proto, sport, dport);
    k.dl_type = ETH_TYPE_IP;
    k.nw_ttl = 64;
    k.dl_src = [2, 0, 0, 0, 0, 1];
    k.dl_dst = [2, 0, 0, 0, 0, 2];
    k
}

fn v6(proto: u8, sport: u16, dport: u16) -> FlowKey {
    let mut k = FlowKey::ipv6(0xfd00 << 112 | 1, 0xfd00 << 112 | 2, proto, sport, dport);
    k.nw_ttl = 64;
    k.dl_src = [2, 0, 0, 0, 0, 1];
    k.dl_dst = [2, 0, 0, 0, 0, 2];
    k
}

/// (flow match, set_field action, the frame's key).
fn cases() -> Vec<(&'static str, &'static str, FlowKey)> {
    let arp = {
        let mut k = FlowKey { dl_type: ETH_TYPE_ARP, nw_proto: 1, ..FlowKey::default() };
        k.dl_src = [2, 0, 0, 0, 0, 1];
        k.dl_dst = [0xff; 6];
        k.nw_src = 0x0a00_0001;
        k.nw_dst = 0x0a00_0002;
        k.arp_sha = [2, 0, 0, 0, 0, 1];
        k
    };
    let mut ns = v6(IPPROTO_ICMPV6, 135, 0);
    ns.nd_target = 0xfd00 << 112 | 9;
    ns.arp_sha = [2, 0, 0, 0, 0, 7];
    let mut na = v6(IPPROTO_ICMPV6, 136, 0);
    na.nd_target = 0xfd00 << 112 | 9;
    na.arp_tha = [2, 0, 0, 0, 0, 8];
    let mut labelled = v6(IPPROTO_UDP, 1000, 53);
    labelled.ipv6_label = 0x54321;
    vec![
        ("sctp", "set_field:443->sctp_dst", v4(IPPROTO_SCTP, 5000, 80)),
        ("sctp", "set_field:6001->sctp_src", v4(IPPROTO_SCTP, 5000, 80)),
        ("sctp6", "set_field:6001->sctp_src", v6(IPPROTO_SCTP, 5000, 80)),
        ("icmp", "set_field:13->icmp_type", v4(IPPROTO_ICMP, 8, 0)),
        ("icmp", "set_field:3->icmp_code", v4(IPPROTO_ICMP, 8, 0)),
        ("icmp6", "set_field:129->icmpv6_type", v6(IPPROTO_ICMPV6, 128, 0)),
        ("icmp6", "set_field:7->icmpv6_code", v6(IPPROTO_ICMPV6, 128, 0)),
        ("udp6", "set_field:0x12345->ipv6_label", labelled),
        ("arp", "set_field:2->arp_op", arp),
        ("arp", "set_field:192.168.1.1->arp_spa", arp),
        ("arp", "set_field:192.168.1.2->arp_tpa", arp),
        ("arp", "set_field:02:00:00:00:00:99->arp_sha", arp),
        ("arp", "set_field:02:00:00:00:00:98->arp_tha", arp),
        ("icmp6,icmpv6_type=135,icmpv6_code=0", "set_field:fd00::99->nd_target", ns),
        ("icmp6,icmpv6_type=135,icmpv6_code=0", "set_field:02:00:00:00:00:42->nd_sll", ns),
        ("icmp6,icmpv6_type=136,icmpv6_code=0", "set_field:fd00::98->nd_target", na),
        ("icmp6,icmpv6_type=136,icmpv6_code=0", "set_field:02:00:00:00:00:43->nd_tll", na),
    ]
}

/// The frames of a pcap file (classic format, microsecond or nanosecond).
fn pcap_frames(path: &std::path::Path) -> Vec<Vec<u8>> {
    let Ok(d) = std::fs::read(path) else { return Vec::new() };
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= d.len() {
        let len = u32::from_le_bytes([d[at + 8], d[at + 9], d[at + 10], d[at + 11]]) as usize;
        if at + 16 + len > d.len() {
            break;
        }
        out.push(d[at + 16..at + 16 + len].to_vec());
        at += 16 + len;
    }
    out
}

/// rqvs: the flow translated for the frame's key, the ops run by the executor; the frame out
/// on port 2.
fn rqvs_output(flow: &str, frame: &[u8]) -> Vec<Vec<u8>> {
    let rules = ofctl::parse_flows("case", flow).unwrap();
    let table = OfprotoClassifier::build(&rules).unwrap();
    let key = extract_datapath(frame, 1).unwrap();
    let x = xlate(&table, &NoGroups, &key);
    let got: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let mut tx: Vec<TxQueue> = (1..=2)
        .map(|p| {
            let sink = got.clone();
            let keep = p == 2;
            let tap: rqvs_ports::FrameTap = Arc::new(move |f: &[u8]| {
                if keep {
                    sink.lock().unwrap().push(f.to_vec());
                }
            });
            let (_, _, mut t) = open_tap(&format!("p{p}"), tap, &PortConfig::default()).split();
            t.remove(0)
        })
        .collect();
    let mut exec = Executor::new(Arc::new(MacTable::new()), None);
    exec.execute(frame, 1, x.action(), &mut tx);
    for q in tx.iter_mut() {
        q.flush();
    }
    let out = got.lock().unwrap().clone();
    out
}

#[test]
fn set_field_on_sctp_icmp_arp_nd_and_flow_label_as_ovs_writes_it() {
    let Some(o) = ovs::start_or_skip("set_field_ovs") else { return };
    let pcap = o.dir.join("p2.pcap");
    let db = format!("--db=unix:{}", o.dir.join("db.sock").display());
    let st = Command::new("ovs-vsctl")
        .args([&db, "set", "interface", "p2", &format!("options:tx_pcap={}", pcap.display())])
        .status()
        .unwrap();
    assert!(st.success());
    for (i, (m, action, key)) in cases().into_iter().enumerate() {
        let flow = format!("priority=10,{m},actions={action},output:2\n");
        o.replace_flows(&flow).unwrap();
        let frame = build_frame(&key.wire());
        let hex: String = frame.iter().map(|b| format!("{b:02x}")).collect();
        o.appctl(&["netdev-dummy/receive", "p1", &hex]).unwrap();
        let t0 = Instant::now();
        let theirs = loop {
            let all = pcap_frames(&pcap);
            if all.len() > i {
                assert_eq!(all.len(), i + 1, "{action}: OVS sent more than one frame");
                break all[i].clone();
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "{action}: OVS sent nothing");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_ne!(theirs, frame, "{action}: OVS changed nothing");
        let ours = rqvs_output(&flow, &frame);
        assert_eq!(ours, vec![theirs], "{m} {action}");
    }
}
