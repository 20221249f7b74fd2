//! Real Open vSwitch reads the flows rqvs writes as rqvs means them.
//!
//! For the 1K and 10K sets of all 12 seeds, the ClassBench → OpenFlow conversion is written as an
//! ofctl file and given to `ovs-ofctl parse-flows` (Debian package `openvswitch-switch`). It must
//! accept every line, and each flow it prints back (in OVS's own canonical syntax) must parse, in
//! rqvs, to the same match, priority and cookie as the flow rqvs wrote.
//!
//! Skips when `ovs-ofctl` is not installed, unless `RQVS_REQUIRE_OVS=1` (set by `.ci/run`).

use rqvs_testkit::data as shared_data;

use std::process::Command;

use rqvs_flow::formats::{classbench, ofctl};
use rqvs_flow::Actions;
use shared_data::*;

/// OVS's printed flow (`NXT_FLOW_MOD (xid=0x1): ADD table:255 priority=7,udp,... actions=drop`)
/// as an ofctl line rqvs can read.
fn ovs_line_to_ofctl(line: &str) -> Option<String> {
    let rest = line.split_once("): ADD ")?.1;
    let rest = rest.strip_prefix("table:255 ").unwrap_or(rest);
    Some(rest.to_string())
}

#[test]
fn ovs_ofctl_reads_converted_classbench_sets_as_rqvs_does() {
    let Some(dir) = classbench_dir() else { return };
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let tmp = rqvs_testkit::TempDir::new("ovs-parse");
    for seed in SEEDS {
        for size in ["1k", "10k"] {
            let rules = classbench::read_rules(&rules_path(&dir, seed, size)).unwrap();
            let conv = rqvs_flow::convert::classbench_to_openflow(&rules, &Actions::drop()).unwrap();
            let text = ofctl::write_flows(&conv.flows).unwrap();
            let file = tmp.join(format!("{seed}_{size}.ofctl"));
            std::fs::write(&file, &text).unwrap();
            let out = Command::new("ovs-ofctl").arg("parse-flows").arg(&file).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{seed}_{size}: ovs-ofctl parse-flows failed: {stderr}");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let printed: Vec<String> = stdout.lines().filter_map(ovs_line_to_ofctl).collect();
            assert_eq!(printed.len(), conv.flows.len(), "{seed}_{size}: OVS printed a different number of flows");
            for (i, (line, ours)) in printed.iter().zip(&conv.flows).enumerate() {
                let theirs = ofctl::parse_flow("ovs-ofctl output", i + 1, line, ours.id.0)
                    .unwrap_or_else(|e| panic!("{seed}_{size}: cannot read OVS's line {line:?}: {e}"));
                assert_eq!(theirs.matches, ours.matches, "{seed}_{size} flow {i}: OVS read {line:?}");
                assert_eq!((theirs.priority, theirs.cookie), (ours.priority, ours.cookie), "{seed}_{size} flow {i}");
            }
        }
    }
}
