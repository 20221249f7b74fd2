//! Damaged and unusual frames through `rqvs switch` as through real Open vSwitch 3.1.
//!
//! A datapath classifies every frame that has an Ethernet header, however damaged the rest:
//! frames cut inside any header, IPv4 headers with a wrong version, IHL or total length, TCP
//! data offsets below 5 or past the frame, QinQ and 802.1ad tags, tags cut short, 802.3/SNAP,
//! ARP cut short, fragments, protocol 0. For each such frame, OVS's `ofproto/trace` (on the raw
//! bytes) gives the flow it extracts and the datapath actions; this test checks that
//! - `extract_datapath` makes the same key (the "Flow:" line, every field rqvs has), and
//! - the switch (offline ports, every design) sends out exactly the frames those datapath
//!   actions make: which frames leave, how many copies, with the TOS and TTL bytes OVS writes —
//!   including OVS's rules that a damaged IPv4 header's TTL is 0 (`dec_ttl` expires it) and that
//!   a protocol-0 packet's IPv4 fields are never written.
//!
//! Skips without Open vSwitch, unless `RQVS_REQUIRE_OVS=1` (set by `.ci/run`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use rqvs_datapath::DesignKind;
use rqvs_flow::formats::ofctl;
use rqvs_flow::frame::{build_frame, extract_datapath, Frame};
use rqvs_flow::key::*;
use rqvs_flow::FlowKey;
use rqvs_switch::{PortSource, Switch, SwitchConfig};
use rqvs_testkit::ovs;

mod common;
use common::Rng;

/// The table, in rqvs's (OpenFlow 1.0) notation; OVS gets it with `set_field` for the TOS.
const FLOWS: &str = "\
priority=40,tcp,tp_dst=80,actions=drop
priority=35,udp,tp_src=53,actions=output:2,output:2
priority=30,dl_type=0x8100,actions=drop
priority=25,ip,nw_proto=47,actions=dec_ttl,output:2
priority=20,ip,actions=mod_nw_tos:32,output:2,dec_ttl,output:2
priority=10,arp,actions=drop
priority=0,actions=output:2
";

fn base_key(rng: &mut Rng) -> FlowKey {
    let proto = [IPPROTO_TCP, IPPROTO_UDP, IPPROTO_SCTP, IPPROTO_ICMP, 47, 0, 2][rng.below(7) as usize];
    let mut k = FlowKey::ipv4(0x0a00_0000 | rng.below(256) as u32, 0xc0a8_0001, proto, 53, 80);
    if rng.below(2) == 0 {
        k.tp_src = rng.below(65536) as u16;
        k.tp_dst = [80, 81, 53][rng.below(3) as usize];
    }
    k.dl_src = [2, 0, 0, 0, 0, 1];
    k.dl_dst = [2, 0, 0, 0, 0, 2];
    k.nw_tos = rng.below(256) as u8;
    k.tcp_flags = rng.below(0x1000) as u16;
    k.nw_frag = [0, 0, 0, FLOW_NW_FRAG_ANY, FLOW_NW_FRAG_ANY | FLOW_NW_FRAG_LATER][rng.below(5) as usize];
    match rng.below(8) {
        0 => k.vlan_tci = VLAN_CFI | rng.below(0x1000) as u16,
        1 => k = FlowKey { dl_type: ETH_TYPE_ARP, nw_proto: 1, ..k },
        _ => {}
    }
    k.wire()
}

/// IPv6 (TCP, UDP, SCTP, ICMPv6, ND with SLL/TLL options, extension headers, fragments) and
/// ARP frames with both hardware addresses, about half of them damaged: cut anywhere, a byte
/// changed, the payload length or an extension header's length wrong, ND options repeated.
fn wide_frames() -> Vec<Vec<u8>> {
    let mut rng = Rng(0x1f6_a4b);
    let mut out = Vec::new();
    for _ in 0..400 {
        let proto =
            [IPPROTO_TCP, IPPROTO_UDP, IPPROTO_SCTP, IPPROTO_ICMPV6, IPPROTO_ICMPV6, 60, 0, 47][rng.below(8) as usize];
        let mut k = FlowKey::ipv6(
            0x2001_0db8 << 96 | u128::from(rng.below(1 << 32)),
            0xfe80 << 112 | u128::from(rng.below(1 << 32)),
            proto,
            rng.below(65536) as u16,
            rng.below(65536) as u16,
        );
        k.dl_src = [2, 0, 0, 0, 0, 1];
        k.dl_dst = [0x33, 0x33, 0, 0, 0, 2];
        k.nw_tos = rng.below(256) as u8;
        k.nw_ttl = rng.below(256) as u8;
        k.ipv6_label = rng.below(1 << 20) as u32;
        k.tcp_flags = rng.below(0x1000) as u16;
        k.nw_frag = [0, 0, 0, FLOW_NW_FRAG_ANY, FLOW_NW_FRAG_ANY | FLOW_NW_FRAG_LATER][rng.below(5) as usize];
        if proto == IPPROTO_ICMPV6 {
            (k.tp_src, k.tp_dst) = [(135, 0), (136, 0), (135, 1), (128, 0)][rng.below(4) as usize];
            k.nd_target = 0xfe80 << 112 | u128::from(rng.below(1 << 32));
            let mac = |r: &mut Rng| if r.below(3) == 0 { [0; 6] } else { [2, 0, 0, 0, 1, r.below(256) as u8] };
            (k.arp_sha, k.arp_tha) = (mac(&mut rng), mac(&mut rng));
        }
        match rng.below(6) {
            0 => k.vlan_tci = VLAN_CFI | rng.below(0x1000) as u16,
            1 => {
                k = FlowKey {
                    dl_type: ETH_TYPE_ARP,
                    nw_proto: 1 + rng.below(2) as u8,
                    nw_src: rng.below(1 << 32) as u32,
                    nw_dst: rng.below(1 << 32) as u32,
                    arp_sha: [2, 0, 0, 0, 0, rng.below(256) as u8],
                    arp_tha: [2, 0, 0, 0, 1, rng.below(256) as u8],
                    ..k
                }
            }
            _ => {}
        }
        let k = k.wire();
        let mut f = build_frame(&k);
        let l3 = 14 + if k.vlan_tci != 0 { 4 } else { 0 };
        match rng.below(8) {
            0..=3 => {}
            4 => f.truncate(14 + rng.below(f.len() as u64 - 13) as usize),
            5 if k.dl_type == ETH_TYPE_IPV6 => f[l3 + 5] = f[l3 + 5].wrapping_add(1 + rng.below(40) as u8), // payload length
            6 if k.dl_type == ETH_TYPE_IPV6 && f.len() > l3 + 44 => f[l3 + 41] = rng.below(8) as u8, // extension header length
            7 if k.dl_type == ETH_TYPE_IPV6 && k.nd_target != 0 && k.arp_sha != [0; 6] => {
                // The SLL option once more, after the others.
                let plen = u16::from_be_bytes([f[l3 + 4], f[l3 + 5]]) + 8;
                let end = l3 + 40 + usize::from(plen) - 8;
                f.truncate(end);
                f.extend_from_slice(&[1, 1, 2, 0, 0, 0, 0, 9]);
                f[l3 + 4..l3 + 6].copy_from_slice(&plen.to_be_bytes());
            }
            _ => {
                let at = 12 + rng.below(f.len() as u64 - 12) as usize;
                f[at] = rng.below(256) as u8;
            }
        }
        out.push(f);
    }
    out
}

/// Frames of every kind, most of them damaged on purpose; distinct.
fn frames() -> Vec<Vec<u8>> {
    let mut rng = Rng(0x0f5_f4a3e5);
    let mut out = BTreeSet::new();
    for _ in 0..700 {
        let k = base_key(&mut rng);
        let mut f = build_frame(&k);
        let ip = 14 + if k.vlan_tci != 0 { 4 } else { 0 };
        match rng.below(12) {
            0 => {}
            1 => f.truncate(14 + rng.below(f.len() as u64 - 13) as usize),
            2 => f[ip] = (rng.below(16) as u8) << 4 | (f[ip] & 0x0f), // version
            3 => f[ip] = 0x40 | rng.below(16) as u8,                  // IHL
            4 => f[ip + 3] = rng.below(80) as u8,                     // total length
            5 => f[ip + 2] = 1 + rng.below(3) as u8,                  // total length past the frame
            6 => f[ip + 20 + 12] = (rng.below(16) as u8) << 4,        // TCP data offset
            7 => {
                // A second tag (QinQ), or an 802.1ad outer tag.
                let tpid: [u8; 2] = if rng.below(2) == 0 { [0x81, 0x00] } else { [0x88, 0xa8] };
                f.splice(12..12, [tpid[0], tpid[1], 0x20, 0x07]);
            }
            8 => f[ip + 9] = 0, // protocol 0
            9 => {
                // An 802.3 frame, with or without an LLC/SNAP header carrying IPv4.
                let snap = [0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00];
                let tail = f.split_off(12 + 2);
                f[12..14].copy_from_slice(&[0x00, 0x40]);
                if rng.below(2) == 0 {
                    f.extend_from_slice(&snap);
                }
                f.extend_from_slice(&tail);
            }
            10 => f[ip + 8] = rng.below(3) as u8, // TTL 0, 1 or 2 (checksum left wrong)
            _ => {
                let at = 12 + rng.below(f.len() as u64 - 12) as usize;
                f[at] = rng.below(256) as u8;
            }
        }
        out.insert(f);
    }
    out.extend(wide_frames());
    // Every length from an Ethernet header up, of one tagged TCP frame.
    let k = FlowKey { vlan_tci: VLAN_CFI | 9, ..base_key(&mut Rng(7)) };
    let f = build_frame(&FlowKey { dl_type: ETH_TYPE_IP, nw_proto: IPPROTO_TCP, ..k });
    for n in 14..=f.len() {
        out.insert(f[..n].to_vec());
    }
    out.into_iter().collect()
}

/// OVS's "Flow:" line as a key (every field rqvs has; others skipped).
fn parse_flow_line(line: &str) -> FlowKey {
    let mut k = FlowKey::default();
    let (mut tos, mut ecn, mut vid, mut pcp, mut tagged) = (0u8, 0u8, 0u16, 0u16, false);
    let num = |v: &str| -> u32 {
        match v.strip_prefix("0x") {
            Some(h) => u32::from_str_radix(h, 16).unwrap(),
            None => v.parse().unwrap_or_else(|_| panic!("number {v:?} in {line}")),
        }
    };
    let mac = |v: &str| -> [u8; 6] {
        let b: Vec<u8> = v.split(':').map(|x| u8::from_str_radix(x, 16).unwrap()).collect();
        b.try_into().unwrap()
    };
    let ip = |v: &str| -> u32 { u32::from(v.parse::<std::net::Ipv4Addr>().unwrap()) };
    let ip6 = |v: &str| -> u128 { u128::from(v.parse::<std::net::Ipv6Addr>().unwrap()) };
    for item in line.trim().split(',') {
        let (name, v) = item.split_once('=').unwrap_or((item, ""));
        match name {
            "ip" => k.dl_type = ETH_TYPE_IP,
            "tcp" | "udp" | "sctp" | "icmp" => {
                k.dl_type = ETH_TYPE_IP;
                k.nw_proto = match name {
                    "tcp" => IPPROTO_TCP,
                    "udp" => IPPROTO_UDP,
                    "sctp" => IPPROTO_SCTP,
                    _ => IPPROTO_ICMP,
                };
            }
            "ipv6" => k.dl_type = ETH_TYPE_IPV6,
            "tcp6" | "udp6" | "sctp6" | "icmp6" => {
                k.dl_type = ETH_TYPE_IPV6;
                k.nw_proto = match name {
                    "tcp6" => IPPROTO_TCP,
                    "udp6" => IPPROTO_UDP,
                    "sctp6" => IPPROTO_SCTP,
                    _ => IPPROTO_ICMPV6,
                };
            }
            "ipv6_src" => k.ipv6_src = ip6(v),
            "ipv6_dst" => k.ipv6_dst = ip6(v),
            "nd_target" => k.nd_target = ip6(v),
            "ipv6_label" => k.ipv6_label = num(v),
            "arp" => k.dl_type = ETH_TYPE_ARP,
            "rarp" => k.dl_type = 0x8035,
            "dl_type" => k.dl_type = num(v) as u16,
            "in_port" => k.in_port = num(v),
            "dl_src" => k.dl_src = mac(v),
            "dl_dst" => k.dl_dst = mac(v),
            "vlan_tci" => k.vlan_tci = num(v) as u16,
            "dl_vlan" => (vid, tagged) = (num(v) as u16, true),
            "dl_vlan_pcp" => pcp = num(v) as u16,
            "nw_src" | "arp_spa" => k.nw_src = ip(v),
            "nw_dst" | "arp_tpa" => k.nw_dst = ip(v),
            "nw_proto" | "arp_op" => k.nw_proto = num(v) as u8,
            "nw_tos" => tos = num(v) as u8,
            "nw_ecn" => ecn = num(v) as u8,
            "nw_frag" => {
                k.nw_frag = match v {
                    "no" => 0,
                    "first" => FLOW_NW_FRAG_ANY,
                    "later" => FLOW_NW_FRAG_ANY | FLOW_NW_FRAG_LATER,
                    _ => panic!("nw_frag={v} in {line}"),
                }
            }
            "tp_src" | "icmp_type" => k.tp_src = num(v) as u16,
            "tp_dst" | "icmp_code" => k.tp_dst = num(v) as u16,
            "tcp_flags" => k.tcp_flags = tcp_flags(v),
            "nw_ttl" => k.nw_ttl = num(v) as u8,
            "arp_sha" | "nd_sll" => k.arp_sha = mac(v),
            "arp_tha" | "nd_tll" => k.arp_tha = mac(v),
            // Fields rqvs's key does not have (OVS keeps ND's reserved word and first option
            // type); no rqvs rule can match them.
            "vlan_tci1" | "nd_reserved" | "nd_options_type" => {}
            _ => panic!("unknown field {name:?} in OVS's flow {line}"),
        }
    }
    if tagged {
        k.vlan_tci = VLAN_CFI | pcp << 13 | vid;
    }
    k.nw_tos = tos | ecn;
    // What OVS classifies a fragment on (see `extract_datapath`): its slow path pretends that
    // transport ports are unavailable; the Flow line is miniflow_extract's, ports included.
    if k.nw_frag != 0 {
        (k.tp_src, k.tp_dst) = (0, 0);
    }
    // The one departure (see `extract_datapath`): IGMP type and code are not kept.
    if k.dl_type == ETH_TYPE_IP && k.nw_proto == 2 {
        (k.tp_src, k.tp_dst) = (0, 0);
    }
    k
}

fn tcp_flags(v: &str) -> u16 {
    if v == "0" {
        return 0;
    }
    let names = ["fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns"];
    v.split('|')
        .map(|f| match names.iter().position(|n| *n == f) {
            Some(bit) => 1 << bit,
            None => u16::from_str_radix(f.trim_start_matches('[').trim_end_matches(']'), 16)
                .unwrap_or_else(|_| panic!("tcp flag {f:?}")),
        })
        .sum()
}

/// The frames OVS's datapath actions make of `frame`, out of port 2.
fn apply_datapath_actions(frame: &[u8], actions: &str) -> Vec<Vec<u8>> {
    let mut f = frame.to_vec();
    let mut out = Vec::new();
    // Top-level comma-separated actions.
    let (mut depth, mut start, mut acts) = (0, 0, Vec::new());
    for (i, c) in actions.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                acts.push(&actions[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    acts.push(&actions[start..]);
    for a in acts {
        let a = a.trim();
        if a == "2" {
            out.push(f.clone());
        } else if a == "drop" {
        } else if let Some(set) = a.strip_prefix("set(ipv4(").and_then(|s| s.strip_suffix("))")) {
            for field in set.split(',') {
                let (name, v) = field.split_once('=').unwrap();
                let v = v.split('/').next().unwrap();
                let v =
                    u8::from_str_radix(v.trim_start_matches("0x"), if v.starts_with("0x") { 16 } else { 10 }).unwrap();
                let mut fr = Frame::new_checked(&mut f[..]).unwrap();
                match name {
                    "tos" => assert!(fr.set_nw_tos(v), "OVS sets the TOS of a frame rqvs sees no IPv4 header in"),
                    "ttl" => assert_eq!(fr.dec_ttl(), Some(v), "OVS's TTL is one below the frame's"),
                    _ => panic!("unexpected ipv4 field {name} in {actions}"),
                }
            }
        } else if a.starts_with("userspace(") && a.contains("controller(reason=2") {
            // dec_ttl expired: to the controller (none here); nothing after it.
            break;
        } else {
            panic!("unexpected datapath action {a:?} in {actions}");
        }
    }
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn damaged_frames_are_classified_and_rewritten_as_ovs_does() {
    let Some(o) = ovs::start_or_skip("frames") else { return };
    o.replace_flows(&FLOWS.replace("mod_nw_tos:32", "set_field:32->nw_tos")).unwrap();
    let frames = frames();
    let params: Vec<Vec<String>> =
        frames.iter().map(|f| vec!["br0".to_string(), "in_port=1".to_string(), hex(f)]).collect();
    let traces = o.call_many("ofproto/trace", &params, 64).unwrap();

    let mut want: Vec<Vec<u8>> = Vec::new();
    let (mut keys_checked, mut expired, mut damaged) = (0, 0, 0);
    for (f, t) in frames.iter().zip(&traces) {
        let flow = t.lines().find_map(|l| l.strip_prefix("Flow: ")).unwrap_or_else(|| panic!("no Flow line:\n{t}"));
        let acts = t.lines().find_map(|l| l.strip_prefix("Datapath actions: ")).expect("no Datapath actions line");
        let theirs = parse_flow_line(flow);
        let ours = extract_datapath(f, 1).unwrap();
        assert_eq!(ours, theirs, "frame {}\nOVS: {flow}", hex(f));
        keys_checked += 1;
        expired += usize::from(acts.contains("controller(reason=2"));
        damaged += usize::from(rqvs_flow::frame::extract(f, 1).key().is_none());
        want.extend(apply_datapath_actions(f, acts));
    }
    want.sort();
    eprintln!("{keys_checked} frames ({damaged} a capture would refuse), {expired} TTLs expired, {} out", want.len());
    assert!(damaged > 200 && expired > 20, "a weak corpus");

    let rules = ofctl::parse_flows("FLOWS", FLOWS).unwrap();
    for design in [DesignKind::Orig, DesignKind::Ccache, DesignKind::Cflows] {
        let dir = rqvs_testkit::TempDir::new(&format!("ovs-frames-{}", design.name()));
        let out = dir.join("p2.pcap");
        let ports = vec![
            PortSource::Frames { name: "in".into(), frames: frames.clone() },
            PortSource::Spec(format!("pcap-out:{}", out.display()).parse().unwrap()),
        ];
        let sw = Switch::start(SwitchConfig::new(ports, rules.clone(), design)).unwrap();
        let t0 = Instant::now();
        while !sw.is_finished() && t0.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let report = sw.stop().unwrap();
        let mut got = Vec::new();
        let mut r = pcap_file::pcap::PcapReader::new(std::fs::File::open(&out).unwrap()).unwrap();
        while let Some(p) = r.next_packet() {
            got.push(p.unwrap().data.into_owned());
        }
        drop(dir);
        got.sort();
        assert!(report.balanced(), "{}", report.format());
        assert_eq!(report.total.malformed, 0, "every frame has an Ethernet header");
        if got != want {
            let norm = |f: &Vec<u8>| {
                let mut f = f.clone();
                if let Some(ip) = Frame::new_checked(&f[..]).ok().and_then(|x| x.layout().ipv4) {
                    for i in [ip + 1, ip + 8, ip + 10, ip + 11] {
                        f[i] = 0;
                    }
                }
                f
            };
            let count = |v: &[Vec<u8>]| {
                let mut m: BTreeMap<Vec<u8>, Vec<Vec<u8>>> = BTreeMap::new();
                for f in v {
                    m.entry(norm(f)).or_default().push(f.clone());
                }
                m
            };
            let (g, w) = (count(&got), count(&want));
            for (f, t) in frames.iter().zip(&traces) {
                let n = norm(f);
                if g.get(&n) != w.get(&n) {
                    eprintln!(
                        "frame {}\n  ours {:?}\n  OVS  {:?}\n{}",
                        hex(f),
                        g.get(&n).map(|v| v.iter().map(|x| hex(x)).collect::<Vec<_>>()),
                        w.get(&n).map(|v| v.iter().map(|x| hex(x)).collect::<Vec<_>>()),
                        t.lines()
                            .filter(|l| l.starts_with("Flow") || l.starts_with("Datapath"))
                            .collect::<Vec<_>>()
                            .join("\n")
                    );
                }
            }
        }
        assert_eq!(got.len(), want.len(), "{}: frames out of port 2\n{}", design.name(), report.format());
        let diff: BTreeMap<_, _> = got.iter().zip(&want).enumerate().filter(|(_, (g, w))| g != w).take(3).collect();
        assert!(diff.is_empty(), "{}: frames differ from OVS's: {diff:?}", design.name());
    }
}
