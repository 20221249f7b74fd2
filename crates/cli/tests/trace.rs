//! `rqvs trace`: one packet's rule and megaflow (expected strings from real OVS 3.1 on the same
//! rules), megaflow counts over a trace, and one-line errors.

use std::path::PathBuf;
mod common;
use common::{rqvs, TempDir};

fn tmp(dir: &TempDir, name: &str, contents: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, contents).unwrap();
    p
}

const RULES: &str = "priority=400,tcp,nw_src=10.1.0.0/16,nw_dst=192.168.2.0/24,tp_dst=0x400/0xfc00,actions=output:2\n\
priority=300,udp,nw_dst=192.168.0.0/16,tp_src=53,actions=output:2\n\
priority=200,icmp,icmp_type=8,actions=drop\n\
priority=100,ip,nw_src=10.0.0.0/8,cookie=0x5,actions=output:2\n\
priority=50,tcp,tcp_flags=+syn,actions=output:2\n\
priority=0,actions=drop\n";

#[test]
fn one_packet_prints_rule_and_megaflow_like_ovs() {
    let dir = TempDir::new("trace-one-packet-prints-rule-and-megaflow-like");
    let rules = tmp(&dir, "rules.ofctl", RULES);
    let out = rqvs(&[
        "trace",
        "--rules",
        rules.to_str().unwrap(),
        "in_port=1,tcp,nw_src=10.2.2.3,nw_dst=192.168.3.7,tp_src=1030,tp_dst=81,tcp_flags=0x012",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(" 0. ip,nw_src=10.0.0.0/8, priority 100, cookie 0x5\n"), "{text}");
    assert!(
        text.contains("\nMegaflow: recirc_id=0,eth,tcp,in_port=1,nw_src=10.0.0.0/8,nw_dst=192.168.3.0/24,nw_frag=no\n"),
        "{text}"
    );
    let out =
        rqvs(&["trace", "--rules", rules.to_str().unwrap(), "in_port=1,ip,nw_proto=47,nw_src=1.2.3.4,nw_dst=2.3.4.5"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(" 0. priority 0\n"), "{text}");
    assert!(
        text.contains(
            "Megaflow: recirc_id=0,eth,ip,in_port=1,nw_src=0.0.0.0/5,nw_dst=0.0.0.0/1,nw_proto=47,nw_frag=no"
        ),
        "{text}"
    );
}

#[test]
fn trace_counts_megaflows_and_masks() {
    let dir = TempDir::new("trace-trace-counts-megaflows-and-masks");
    let rules = tmp(&dir, "rules2.ofctl", RULES);
    // ClassBench trace lines: src dst sport dport proto flags.
    let trace = tmp(&dir, "t.trace", "167772161\t3232236039\t1030\t1025\t6\t0\n167772162\t3232236039\t1030\t1025\t6\t0\n16909060\t33752069\t0\t0\t47\t0\n");
    let out = rqvs(&["trace", "--rules", rules.to_str().unwrap(), "--trace", trace.to_str().unwrap(), "--json", "-"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text[text.find('{').unwrap()..]).unwrap();
    assert_eq!(json["packets"], 3);
    assert_eq!(json["upcalls"], 2, "the second packet falls in the first one's megaflow: {text}");
    assert_eq!(json["megaflows"], 2);
    assert_eq!(json["masks"], 2);
    assert_eq!(json["mismatches"], 0);
}

#[test]
fn bad_packet_is_a_one_line_error() {
    let dir = TempDir::new("trace-bad-packet-is-a-one-line-error");
    let rules = tmp(&dir, "rules3.ofctl", RULES);
    let out = rqvs(&["trace", "--rules", rules.to_str().unwrap(), "in_port=1,tcp,nw_src=10.2.2.300"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("packet:1:"), "{err}");
    let out = rqvs(&["trace", "--rules", rules.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "neither a packet nor --trace: a usage error");
}
