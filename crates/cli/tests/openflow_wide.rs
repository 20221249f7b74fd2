//! The wide key over OpenFlow (issue 35): `ovs-ofctl -O OpenFlow13 add-flow` of flows matching
//! IPv6 (prefixes, flow label, TTL, ECN), ICMPv6 neighbour discovery (`nd_target`, `nd_sll`,
//! `nd_tll`), ARP hardware addresses, `metadata` and `vlan_vid`/`vlan_pcp`, into
//! `rqvs switch --openflow`; `dump-flows` (in 1.3 and 1.4) prints each flow exactly as OVS
//! itself formats the FLOW_MOD it sent (`ovs-ofctl parse-flow` of the same text, the oracle) and
//! as rqvs's own writer (`ofctl::format_match`) prints it,
//! `rqvs ctl dump-rules` agrees, and `del-flows --strict` of a wide flow removes only it.
//!
//! Skipped (with the reason printed) when `ovs-ofctl` is missing, unless `RQVS_REQUIRE_OVS=1`.
//! The switch runs on pcap-out ports (no traffic is sent here).

mod common;
mod ofswitch;
use common::TempDir;
use ofswitch::{normal, OfSwitch};

use std::collections::BTreeSet;
use std::process::Command;

/// Flows over the wide fields, one per shape.
const WIDE: &[&str] = &[
    "priority=100,ipv6,ipv6_src=2001:db8::/32,ipv6_dst=2001:db8:1::1,ipv6_label=0x12345,actions=output:2",
    "priority=101,tcp6,ipv6_dst=fe80::/10,tp_dst=443,actions=drop",
    "priority=102,icmp6,icmp_type=135,icmp_code=0,nd_target=fe80::1,nd_sll=02:00:00:00:00:01,actions=output:3",
    "priority=103,icmp6,icmp_type=136,icmp_code=0,nd_target=2001:db8::/64,nd_tll=02:00:00:00:00:02,actions=drop",
    "priority=104,arp,arp_op=1,arp_spa=10.0.0.1,arp_tpa=10.0.0.0/24,arp_sha=02:00:00:00:00:03,arp_tha=00:00:00:00:00:00,actions=flood",
    "priority=105,metadata=0x5/0xf,actions=drop",
    "priority=106,dl_vlan=10,dl_vlan_pcp=3,actions=drop",
    "priority=107,vlan_tci=0x1000/0x1000,dl_dst=33:33:00:00:00:00/ff:ff:00:00:00:00,actions=drop",
    "priority=108,udp6,nw_ttl=3,udp_dst=547,actions=drop",
    "priority=109,ipv6,ipv6_src=2001:db8::/ffff:0:ffff::,nw_tos=32,nw_ecn=1,nw_frag=later,actions=drop",
    "priority=110,icmp6,icmp_type=128,actions=drop",
    "priority=111,vlan_tci=0x1000/0x1000,dl_vlan_pcp=3,actions=drop",
    "priority=112,rarp,arp_op=3,arp_sha=02:00:00:00:00:04/ff:ff:ff:00:00:00,actions=drop",
    "priority=113,sctp6,nw_ttl=255,tp_src=0x100/0xff00,actions=drop",
];

/// How OVS itself prints the flow (`ovs-ofctl parse-flow`): the match and actions of its
/// FLOW_MOD line, `priority=...,MATCH actions=...`.
fn ovs_format(version: &str, flow: &str) -> String {
    let out = Command::new("ovs-ofctl").args(["-O", version, "parse-flow", flow]).output().unwrap();
    assert!(out.status.success(), "parse-flow {flow}: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.starts_with("OFPT_FLOW_MOD")).unwrap_or_else(|| panic!("{text}"));
    line.split_once(": ADD ").unwrap().1.trim().to_string()
}

/// `dump-flows` lines without the counters: `priority=...,MATCH actions=...`, as a set.
fn dump_lines(sw: &OfSwitch, version: &str) -> BTreeSet<String> {
    sw.ofctl_ok(version, &["dump-flows", &sw.target()])
        .lines()
        .filter(|l| l.trim_start().starts_with("cookie="))
        .map(|l| {
            l.trim()
                .split(", ")
                .filter(|f| {
                    !["cookie=", "duration=", "table=", "n_packets=", "n_bytes=", "idle_age=", "hard_age="]
                        .iter()
                        .any(|p| f.starts_with(p))
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect()
}

/// rqvs's own writer (`ofctl::format_match`) prints each wide flow's match exactly as OVS does.
#[test]
fn rqvs_prints_wide_matches_as_ovs() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    for flow in WIDE {
        let ovs = ovs_format("OpenFlow13", flow);
        let (ovs_match, _) = ovs.split_once(" actions=").unwrap();
        let rule = rqvs_flow::formats::ofctl::parse_flow("flow", 1, flow, 0).unwrap();
        let ours = rqvs_flow::formats::ofctl::format_flows(&rule).unwrap();
        let (our_match, _) = ours[0].split_once(",actions=").unwrap();
        assert_eq!(our_match, ovs_match, "{flow}: rqvs (left) and OVS (right)");
    }
}

#[test]
fn ovs_ofctl_adds_and_dumps_wide_flows() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    for design in ["orig", "ccache", "cflows"] {
        wide_flows(design);
    }
}

fn wide_flows(design: &str) {
    let _one = ofswitch::serial();
    let tmp = TempDir::new(&format!("cli-openflow-wide-{design}"));
    let base = "priority=5,icmp,actions=output:2\n";
    let rules = tmp.join("rules.txt");
    std::fs::write(&rules, base).unwrap();
    let mut sw = OfSwitch::start(&tmp.0, "ofwide", &rules, design, false);
    let target = sw.target();
    for flow in WIDE {
        sw.ofctl_ok("OpenFlow13", &["add-flow", &target, flow]);
    }
    let mut all: Vec<&str> = WIDE.to_vec();
    all.push("priority=5,icmp,actions=output:2");
    for version in ["OpenFlow13", "OpenFlow14"] {
        let want: BTreeSet<String> = all.iter().map(|f| ovs_format(version, f)).collect();
        let dump = dump_lines(&sw, version);
        assert_eq!(dump, want, "{design} {version}: dump-flows (left) against OVS's own printing (right)");
        assert_eq!(dump.len(), WIDE.len() + 1);
        for field in ["ipv6_label=0x12345", "nd_sll=02:00:00:00:00:01", "arp_sha=02:00:00:00:00:03", "metadata=0x5/0xf"]
        {
            assert!(dump.iter().any(|l| l.contains(field)), "{field} in {dump:?}");
        }
    }
    assert_eq!(sw.ctl_rules(), normal(&all.join("\n")), "rqvs ctl dump-rules");

    // del-flows --strict of the ND solicitation flow removes it alone.
    let gone = WIDE[2];
    let (m, _) = gone.split_once(",actions=").unwrap();
    sw.ofctl_ok("OpenFlow13", &["--strict", "del-flows", &target, m]);
    all.retain(|f| *f != gone);
    let want: BTreeSet<String> = all.iter().map(|f| ovs_format("OpenFlow13", f)).collect();
    assert_eq!(dump_lines(&sw, "OpenFlow13"), want, "after del-flows --strict");
    // A non-strict del-flows by an IPv6 prefix removes the flows it covers.
    sw.ofctl_ok("OpenFlow13", &["del-flows", &target, "ipv6,ipv6_src=2001:db8::/32"]);
    all.retain(|f| !f.starts_with("priority=100,"));
    let want: BTreeSet<String> = all.iter().map(|f| ovs_format("OpenFlow13", f)).collect();
    assert_eq!(dump_lines(&sw, "OpenFlow13"), want, "after del-flows ipv6,ipv6_src=2001:db8::/32");
    let (status, stderr) = sw.exit();
    assert!(status.success(), "{stderr}");
}
