//! Agreement with real Open vSwitch (3.1, `ovs-ofctl`) on FLOW_MOD, in OpenFlow 1.3 and 1.4:
//!
//! - **What OVS sends.** `ovs-ofctl add-flow tcp:127.0.0.1:PORT FLOW` is pointed at a listener
//!   in the test, which answers its HELLO with a HELLO of the same version, echoes and barriers
//!   with replies, and keeps the FLOW_MOD. rqvs must decode it to the match, priority, cookie,
//!   table and actions `ofctl::parse_flow` reads from the same text, and must encode that rule
//!   to the same bytes, byte for byte. For a list of flows covering every field and action, and
//!   for a converted ClassBench set (`add-flows`, one connection).
//! - **What OVS reads.** rqvs's FLOW_MOD for a rule, given to `ovs-ofctl ofp-print`, must print
//!   a flow that `ofctl::parse_flow` reads back as the same rule (after mapping OVS's 1.3 action
//!   names — `set_field:...->vlan_vid`, `pop_vlan`, `CONTROLLER:65535` — to rqvs's).
//!
//! Skips with a printed reason when `ovs-ofctl` is missing, unless `RQVS_REQUIRE_OVS=1`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rqvs_flow::formats::ofctl;
use rqvs_flow::{Actions, FlowKey, Match, PortRange, Rule};
use rqvs_openflow::flow_mod::{FlowMod, FlowModCommand};
use rqvs_openflow::{Header, Writer, OFP13, OFP14};
use rqvs_testkit::data::{classbench_dir, rules_path, SEEDS};

const OFPT_FLOW_MOD: u8 = 14;

/// Flows covering every field and action rqvs maps.
const FLOWS: &[&str] = &[
    "priority=5,in_port=3,actions=output:2",
    "priority=7,cookie=0x1234,in_port=LOCAL,dl_src=01:02:03:04:05:06,dl_dst=0a:00:00:00:00:00/ff:00:00:00:00:00,actions=all",
    "dl_vlan=7,actions=mod_vlan_vid:5,strip_vlan,flood",
    "dl_vlan=0xffff,actions=mod_vlan_vid:9,output:1",
    "vlan_tci=0x1000/0x1000,dl_vlan_pcp=3,actions=strip_vlan,in_port",
    "dl_vlan=5,dl_vlan_pcp=6,actions=controller",
    "ip,nw_src=10.0.0.0/8,nw_dst=192.168.1.1,nw_tos=8,actions=mod_nw_tos:16,dec_ttl,output:4",
    "ip,nw_frag=first,actions=drop",
    "ip,nw_frag=later,actions=drop",
    "ip,nw_frag=no,actions=drop",
    "ip,nw_frag=yes,actions=drop",
    "ip,nw_frag=not_later,actions=drop",
    "tcp,tp_src=0x1000/0xf000,tp_dst=80,tcp_flags=+syn-ack,actions=controller:100",
    "tcp,tcp_flags=0x012,actions=drop",
    "udp,udp_src=53,udp_dst=1024/0xfc00,actions=mod_dl_src:02:00:00:00:00:01,mod_dl_dst:02:00:00:00:00:02,output:1",
    "sctp,tp_src=9,tp_dst=10,actions=NORMAL",
    "icmp,icmp_type=3,icmp_code=1,actions=LOCAL",
    "arp,arp_op=2,arp_spa=10.0.0.0/8,arp_tpa=1.1.1.1,actions=flood",
    "dl_type=0x88cc,actions=drop",
    "ip,nw_proto=47,actions=drop",
    "table=3,priority=0,actions=drop",
    "priority=65535,ip,nw_dst=1.2.3.0/255.255.0.255,actions=output:65279",
    "ip,actions=mod_vlan_vid:4095,output:3",
    // The wide key (issue 35): IPv6, ICMPv6 and ND, ARP hardware addresses, metadata, TTL.
    "ipv6,actions=drop",
    "ipv6,ipv6_src=2001:db8::/32,ipv6_dst=fe80::1,ipv6_label=0x12345,actions=output:1",
    "ipv6,ipv6_src=2001:db8::/ffff:0:ffff::,nw_tos=8,nw_ecn=2,nw_ttl=3,nw_frag=first,actions=drop",
    "ip,nw_ttl=64,nw_ecn=1,actions=drop",
    "tcp6,tp_src=0x1000/0xf000,tp_dst=443,tcp_flags=+syn-ack,actions=drop",
    "udp6,udp_dst=53,actions=drop",
    "sctp6,tp_dst=7,actions=drop",
    "icmp6,icmp_type=1,icmp_code=4,actions=drop",
    "icmp6,icmp_type=135,icmp_code=0,nd_target=fe80::1,nd_sll=01:02:03:04:05:06,actions=drop",
    "icmp6,icmp_type=136,icmp_code=0,nd_target=fe80::/10,nd_tll=01:02:03:00:00:00/ff:ff:ff:00:00:00,actions=drop",
    "arp,arp_op=1,arp_sha=01:02:03:04:05:06,arp_tha=0a:00:00:00:00:00/ff:00:00:00:00:00,actions=flood",
    "rarp,arp_op=3,actions=drop",
    "metadata=0x5/0xf,actions=drop",
    "metadata=0xfedcba9876543210,in_port=2,dl_vlan=9,dl_vlan_pcp=5,actions=drop",
    "dl_dst=33:33:00:00:00:00/ff:ff:00:00:00:00,vlan_tci=0x1000/0x1000,actions=drop",
];

fn message(version: u8, kind: u8, body: &[u8]) -> Vec<u8> {
    let mut w = Writer::new();
    Header { version, kind, length: 0, xid: 1 }.write(&mut w);
    w.put(body);
    w.finish_message().unwrap()
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
/// plays the switch; the FLOW_MODs it sent.
fn capture(version: u8, cmd: &str, arg: &str) -> Vec<Vec<u8>> {
    capture_with(version, &[], cmd, arg)
}

/// [`capture`] with options before the command (`--strict`).
fn capture_with(version: u8, opts: &[&str], cmd: &str, arg: &str) -> Vec<Vec<u8>> {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let proto = if version == OFP13 { "OpenFlow13" } else { "OpenFlow14" };
    let mut child = Command::new("ovs-ofctl")
        .args(["--no-names", "-O", proto])
        .args(opts)
        .args([cmd, &format!("tcp:127.0.0.1:{port}"), arg])
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
    s.write_all(&message(version, 0, &[])).unwrap();
    let mut mods = Vec::new();
    while let Some(m) = read_message(&mut s) {
        match m[1] {
            0 => assert_eq!(m[0], version, "ovs-ofctl's HELLO"),
            2 => s.write_all(&[&[version, 3], &m[2..]].concat()).unwrap(),
            20 => s.write_all(&[&[version, 21], &m[2..]].concat()).unwrap(),
            OFPT_FLOW_MOD => mods.push(m),
            t => panic!("ovs-ofctl sent message type {t}: {m:02x?}"),
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "ovs-ofctl {cmd} {arg:?}: {}", String::from_utf8_lossy(&out.stderr));
    mods
}

fn parse(text: &str) -> Rule {
    ofctl::parse_flow("test", 1, text, 0).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// Checks one captured FLOW_MOD against the rule rqvs reads from the same text.
fn check_captured(version: u8, text: &str, captured: &[u8], ours: &Rule) {
    assert_eq!(captured[0], version);
    let fm = FlowMod::decode(version, &captured[8..])
        .unwrap_or_else(|e| panic!("{text}: rqvs cannot decode OVS's FLOW_MOD {}: {e}", hex(captured)));
    assert_eq!(fm.command, FlowModCommand::Add, "{text}");
    assert_eq!(fm.matches, ours.matches, "{text}: match");
    assert_eq!(
        (u32::from(fm.priority), fm.cookie, fm.table_id),
        (ours.priority, ours.cookie, ours.table),
        "{text}: priority, cookie, table"
    );
    assert_eq!(fm.actions, ours.actions, "{text}: actions");
    // Byte for byte: rqvs's encoding of the rule is what OVS sent.
    let mine = FlowMod::from_rule(ours, FlowModCommand::Add).unwrap();
    assert_eq!(mine.len(), 1);
    let mut w = Writer::new();
    mine[0].encode(version, &mut w).unwrap();
    assert_eq!(hex(&w.bytes), hex(&captured[8..]), "{text}: rqvs's bytes (left) differ from OVS's (right)");
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn rqvs_decodes_and_reencodes_what_ovs_ofctl_sends() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    for version in [OFP13, OFP14] {
        for text in FLOWS {
            let mods = capture(version, "add-flow", text);
            assert_eq!(mods.len(), 1, "{text}: OVS sent {} FLOW_MODs", mods.len());
            check_captured(version, text, &mods[0], &parse(text));
        }
    }
}

#[test]
fn rqvs_decodes_ovs_ofctl_add_flows_of_converted_classbench() {
    let Some(dir) = classbench_dir() else { return };
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    for seed in SEEDS {
        let rules = rqvs_flow::formats::classbench::read_rules(&rules_path(&dir, seed, "1k")).unwrap();
        let conv = rqvs_flow::convert::classbench_to_openflow(&rules, &Actions::output(1)).unwrap();
        let text = ofctl::write_flows(&conv.flows).unwrap();
        let tmp = rqvs_testkit::TempDir::new("openflow-ovs");
        let file = tmp.join("flows.ofctl");
        std::fs::write(&file, &text).unwrap();
        // And OVS reads rqvs's encoding of the first rules (one ofp-print each).
        if seed == SEEDS[0] {
            for r in conv.flows.iter().take(100) {
                check_printed(OFP13, r, &format!("{seed} rule {}", r.id));
            }
        }
        for version in [OFP13, OFP14] {
            let mods = capture(version, "add-flows", file.to_str().unwrap());
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(mods.len(), lines.len(), "{seed}: one FLOW_MOD per line");
            for (line, m) in lines.iter().zip(&mods) {
                check_captured(version, line, m, &parse(line));
            }
        }
    }
}

/// Timeouts, flags, importance, cookie masks, out_port and the modify/delete commands: what OVS
/// sends decodes to what the command line says, and re-encodes to the same bytes.
#[test]
fn flow_mod_header_fields_agree_with_ovs() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    use rqvs_openflow::flow_mod::*;
    use FlowModCommand::*;
    type Check = fn(&FlowMod, u8);
    let cases: &[(&[&str], &str, &str, Check)] = &[
        (
            &[],
            "add-flow",
            "priority=3,idle_timeout=10,hard_timeout=20,send_flow_rem,check_overlap,ip,actions=drop",
            |f, _| {
                assert_eq!((f.command, f.idle_timeout, f.hard_timeout, f.priority), (Add, 10, 20, 3));
                assert_eq!(f.flags, OFPFF_SEND_FLOW_REM | OFPFF_CHECK_OVERLAP);
                assert_eq!((f.buffer_id, f.out_port, f.out_group), (OFP_NO_BUFFER, 0xffff_ffff, OFPG_ANY));
            },
        ),
        (&[], "mod-flows", "cookie=0x10/0xff,ip,actions=output:1", |f, _| {
            assert_eq!((f.command, f.cookie, f.cookie_mask, f.table_id), (Modify, 0x10, 0xff, 0));
        }),
        (&["--strict"], "mod-flows", "priority=3,reset_counts,ip,actions=output:1", |f, _| {
            assert_eq!((f.command, f.priority, f.flags), (ModifyStrict, 3, OFPFF_RESET_COUNTS));
        }),
        (&[], "del-flows", "out_port=2,ip", |f, _| {
            assert_eq!((f.command, f.out_port, f.table_id), (Delete, 2, OFPTT_ALL));
        }),
        (&["--strict"], "del-flows", "priority=3,tcp,tp_dst=80", |f, _| {
            assert_eq!((f.command, f.priority), (DeleteStrict, 3));
        }),
        (&[], "add-flow", "importance=7,ip,actions=drop", |f, v| {
            assert_eq!(f.importance, if v == OFP14 { 7 } else { 0 });
        }),
    ];
    for version in [OFP13, OFP14] {
        for (opts, cmd, arg, check) in cases {
            if arg.contains("importance") && version == OFP13 {
                continue; // importance is 1.4.
            }
            let mods = capture_with(version, opts, cmd, arg);
            assert_eq!(mods.len(), 1, "{cmd} {arg}");
            let body = &mods[0][8..];
            let fm = FlowMod::decode(version, body).unwrap_or_else(|e| panic!("{cmd} {arg}: {e}"));
            check(&fm, version);
            let mut w = Writer::new();
            fm.encode(version, &mut w).unwrap();
            assert_eq!(hex(&w.bytes), hex(body), "{cmd} {arg}: re-encoded (left) vs OVS (right)");
        }
    }
}

/// OVS's 1.3 action words as rqvs's ofctl words.
fn ovs_actions_to_rqvs(actions: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    for a in actions.split(',') {
        let word = if let Some(rest) = a.strip_prefix("set_field:") {
            let (val, field) = rest.split_once("->").unwrap();
            let n = || val.parse::<u32>().unwrap();
            match field {
                "vlan_vid" => format!("mod_vlan_vid:{}", n() & 0xfff),
                "ip_dscp" => format!("mod_nw_tos:{}", n() * 4),
                "eth_src" => format!("mod_dl_src:{val}"),
                "eth_dst" => format!("mod_dl_dst:{val}"),
                f => panic!("unexpected set_field of {f}"),
            }
        } else {
            match a {
                "push_vlan:0x8100" => continue,
                "pop_vlan" => "strip_vlan".into(),
                "CONTROLLER:65535" => "controller".into(),
                "IN_PORT" => "in_port".into(),
                "ALL" => "all".into(),
                "FLOOD" => "flood".into(),
                a => match a.strip_prefix("CONTROLLER:") {
                    Some(n) => format!("controller:{n}"),
                    None => a.to_string(),
                },
            }
        };
        out.push(word);
    }
    out.join(",")
}

/// "No VLAN" is `vlan_tci=0/0xffff` in rqvs's reading of `dl_vlan=0xffff` and 0/0x1fff in OVS's
/// reading of VLAN_VID=NONE: the same packets (rqvs's frames without a tag have a zero TCI).
fn normalise(m: &Match) -> Match {
    let (mut v, mut k): (FlowKey, FlowKey) = (*m.value(), *m.mask());
    if v.vlan_tci == 0 && k.vlan_tci == 0x1fff {
        k.vlan_tci = 0xffff;
    }
    v = v.masked(&k);
    Match::new(v, k, m.tp_src_range(), m.tp_dst_range()).unwrap()
}

/// OVS prints exact `tcp_flags` by name (`tcp_flags=syn|ack`); rqvs reads numbers.
fn ovs_tcp_flags_to_rqvs(item: &str) -> String {
    const NAMES: [&str; 9] = ["fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns"];
    match item.strip_prefix("tcp_flags=") {
        Some(v) if v.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) => {
            let bits = v.split('|').map(|n| 1u16 << NAMES.iter().position(|x| *x == n).unwrap()).fold(0, |a, b| a | b);
            format!("tcp_flags={bits:#05x}/0xfff")
        }
        _ => item.to_string(),
    }
}

/// `ovs-ofctl ofp-print` of a FLOW_MOD as an ofctl line.
fn ovs_print(version: u8, msg: &[u8]) -> String {
    let out = Command::new("ovs-ofctl").args(["ofp-print", &hex(msg)]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "ofp-print failed: {}", String::from_utf8_lossy(&out.stderr));
    let vname = if version == OFP13 { "OF1.3" } else { "OF1.4" };
    let line = stdout.lines().next().unwrap_or("");
    let rest = line
        .strip_prefix(&format!("OFPT_FLOW_MOD ({vname}) (xid=0x1): ADD "))
        .unwrap_or_else(|| panic!("unexpected ofp-print output: {stdout}"));
    assert!(!stdout.contains("***"), "OVS reports a decode problem: {stdout}");
    let (flow, actions) = rest.rsplit_once("actions=").unwrap();
    let flow = flow.replace("table:", "table=").replace("cookie:", "cookie=");
    let flow: Vec<String> = flow.trim().split(',').map(ovs_tcp_flags_to_rqvs).collect();
    let flow = flow.join(",");
    format!("{} actions={}", flow.trim(), ovs_actions_to_rqvs(actions.trim()))
}

fn check_printed(version: u8, rule: &Rule, what: &str) {
    for fm in FlowMod::from_rule(rule, FlowModCommand::Add).unwrap() {
        let mut w = Writer::new();
        fm.encode(version, &mut w).unwrap();
        let msg = message(version, OFPT_FLOW_MOD, &w.bytes);
        let printed = ovs_print(version, &msg);
        let back = ofctl::parse_flow("ovs-ofctl ofp-print", 1, &printed, 0)
            .unwrap_or_else(|e| panic!("{what}: cannot read OVS's {printed:?}: {e}"));
        assert_eq!(normalise(&back.matches), normalise(&fm.matches), "{what}: OVS printed {printed:?}");
        assert_eq!(
            (back.priority, back.cookie, back.table),
            (u32::from(fm.priority), fm.cookie, fm.table_id),
            "{what}"
        );
        assert_eq!(back.actions, rule.actions, "{what}: OVS printed {printed:?}");
    }
}

#[test]
fn ovs_ofctl_prints_rqvs_flow_mods_as_rqvs_means_them() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    for version in [OFP13, OFP14] {
        for text in FLOWS {
            check_printed(version, &parse(text), text);
        }
        // A rule with a port range: one FLOW_MOD per prefix.
        let value = FlowKey { dl_type: 0x0800, nw_proto: 17, ..FlowKey::default() };
        let mask = FlowKey { dl_type: 0xffff, nw_proto: 0xff, ..FlowKey::default() };
        let m = Match::new(value, mask, PortRange::new(20, 21).unwrap(), PortRange::new(1000, 1100).unwrap()).unwrap();
        check_printed(version, &Rule::new(0, 9, m, Actions::output(2)), "port ranges");
    }
}

fn ofp_print(msg: &[u8]) -> String {
    let out = Command::new("ovs-ofctl").args(["ofp-print", &hex(msg)]).output().unwrap();
    assert!(out.status.success(), "ofp-print failed: {}", String::from_utf8_lossy(&out.stderr));
    let s = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!s.contains("***"), "OVS reports a decode problem: {s}");
    s
}

fn multipart(version: u8, kind: u8, mp_type: u16, body: &[u8]) -> Vec<u8> {
    let mut w = Writer::new();
    w.u16(mp_type);
    w.u16(0);
    w.zeros(4);
    w.put(body);
    message(version, kind, &w.bytes)
}

/// The other flow messages: OVS decodes rqvs's bytes without complaint and prints the fields
/// rqvs put there.
#[test]
fn ovs_ofctl_prints_rqvs_flow_removed_packet_in_out_and_stats() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    use rqvs_openflow::flow_mod::*;
    let rule = parse("priority=5,cookie=0x77,tcp,nw_src=10.0.0.0/8,tp_dst=80,actions=mod_vlan_vid:5,output:3");
    for version in [OFP13, OFP14] {
        let v = if version == OFP13 { "OF1.3" } else { "OF1.4" };
        let body = |f: &dyn Fn(&mut Writer)| {
            let mut w = Writer::new();
            f(&mut w);
            w.bytes
        };
        let fr = FlowRemoved {
            cookie: 0x77,
            priority: 5,
            reason: OFPRR_IDLE_TIMEOUT,
            table_id: 0,
            duration_sec: 3,
            duration_nsec: 500_000_000,
            idle_timeout: 10,
            hard_timeout: 20,
            packet_count: 11,
            byte_count: 1234,
            matches: rule.matches,
        };
        let p = ofp_print(&message(version, 11, &body(&|w| fr.encode(version, w).unwrap())));
        assert!(
            p.starts_with(&format!(
                "OFPT_FLOW_REMOVED ({v}) (xid=0x1): priority=5,tcp,nw_src=10.0.0.0/8,tp_dst=80 reason=idle"
            )),
            "{p}"
        );
        assert!(
            p.contains("cookie:0x77")
                && p.contains("duration3.500s")
                && p.contains("idle10")
                && p.contains("hard20")
                && p.contains("pkts11")
                && p.contains("bytes1234"),
            "{p}"
        );

        let frame: Vec<u8> = (0..60).collect();
        let pi = PacketIn {
            buffer_id: OFP_NO_BUFFER,
            total_len: 60,
            reason: OFPR_ACTION,
            table_id: 0,
            cookie: 0x77,
            matches: parse("in_port=3,actions=drop").matches,
            data: frame.clone(),
        };
        let p = ofp_print(&message(version, 10, &body(&|w| pi.encode(version, w).unwrap())));
        assert!(p.contains("cookie=0x77") && p.contains("total_len=60 in_port=3 (via action) data_len=60"), "{p}");

        let po =
            PacketOut { buffer_id: OFP_NO_BUFFER, in_port: 0xffff_fffd, actions: rule.actions.clone(), data: frame };
        let p = ofp_print(&message(version, 13, &body(&|w| po.encode(version, w).unwrap())));
        assert!(
            p.contains("in_port=CONTROLLER actions=push_vlan:0x8100,set_field:4101->vlan_vid,output:3 data_len=60"),
            "{p}"
        );

        let req = FlowStatsRequest { table_id: 0, matches: rule.matches, ..FlowStatsRequest::all() };
        let p = ofp_print(&multipart(version, 18, 1, &body(&|w| req.encode(version, w).unwrap())));
        assert!(p.contains("OFPST_FLOW request") && p.contains("tcp,nw_src=10.0.0.0/8,tp_dst=80"), "{p}");
        let p = ofp_print(&multipart(version, 18, 2, &body(&|w| FlowStatsRequest::all().encode(version, w).unwrap())));
        assert!(p.contains("OFPST_AGGREGATE request"), "{p}");

        let st = FlowStats {
            table_id: 0,
            duration_sec: 3,
            duration_nsec: 0,
            priority: 5,
            idle_timeout: 0,
            hard_timeout: 0,
            flags: 0,
            importance: 0,
            cookie: 0x77,
            packet_count: 11,
            byte_count: 1234,
            matches: rule.matches,
            actions: rule.actions.clone(),
        };
        let p = ofp_print(&multipart(version, 19, 1, &body(&|w| st.encode(version, w).unwrap())));
        let line = p.lines().nth(1).unwrap_or("").trim().to_string();
        assert_eq!(
            line,
            "cookie=0x77, duration=3s, table=0, n_packets=11, n_bytes=1234, priority=5,tcp,nw_src=10.0.0.0/8,tp_dst=80 actions=push_vlan:0x8100,set_field:4101->vlan_vid,output:3",
            "{p}"
        );
        let agg = AggregateStats { packet_count: 11, byte_count: 1234, flow_count: 2 };
        let p = ofp_print(&multipart(version, 19, 2, &body(&|w| agg.encode(version, w).unwrap())));
        assert!(p.contains("packet_count=11 byte_count=1234 flow_count=2"), "{p}");
    }
}

/// What OVS sends for flows rqvs cannot honour is refused with the OpenFlow error a switch
/// answers with, naming the field or action.
#[test]
fn rqvs_refuses_what_it_cannot_honour_in_ovs_flow_mods() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    use rqvs_openflow::OfError;
    let cases: &[(&str, OfError, &str)] = &[
        // IPv6, ARP hardware addresses, metadata and nw_ttl are accepted now (FLOWS has them).
        ("tun_id=5,actions=drop", OfError::BAD_MATCH_BAD_FIELD, "tunnel_id"),
        ("reg0=1,actions=drop", OfError::BAD_MATCH_BAD_FIELD, "NXM_NX"),
        ("ct_state=+trk,actions=drop", OfError::BAD_MATCH_BAD_FIELD, "NXM_NX"),
        ("packet_type=(1,0x800),actions=drop", OfError::BAD_MATCH_BAD_VALUE, "packet_type"),
        // The pipeline's instructions and actions decode now (tests/ovs_pipeline.rs).
        ("ip,actions=load:1->NXM_NX_REG0[]", OfError { kind: 2, code: 3 }, "subtype 7"),
        ("ip,actions=mod_nw_ttl:5", OfError::BAD_ACTION_BAD_TYPE, "set_nw_ttl"),
        ("actions=push_mpls:0x8847", OfError::BAD_ACTION_BAD_TYPE, "push_mpls"),
        ("ip,actions=set_queue:1", OfError::BAD_ACTION_BAD_TYPE, "set_queue"),
        ("ip,actions=learn(table=1)", OfError { kind: 2, code: 3 }, "Nicira"),
    ];
    for version in [OFP13, OFP14] {
        for (text, error, named) in cases {
            let mods = capture(version, "add-flow", text);
            assert_eq!(mods.len(), 1, "{text}");
            let e = FlowMod::decode(version, &mods[0][8..]).expect_err(text);
            assert_eq!(e.of_error(), *error, "{text}: {e}");
            assert!(e.to_string().contains(named), "{text}: {e} should name {named}");
        }
    }
}
