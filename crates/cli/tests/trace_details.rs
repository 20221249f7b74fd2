//! `ofproto/trace`'s details as Open vSwitch 3.1 prints them: an output to the input port
//! (`>> skipping output to input port`), NORMAL's decision (`-> no learned MAC for destination,
//! flooding` — `rqvs trace` has learned nothing, nor has a fresh OVS bridge), and the
//! `ofproto/trace BRIDGE FLOW` spelling on the switch's management socket. The lines between
//! `bridge(...)` and `Megaflow:` are compared with real OVS's for the same flows; skipped (with
//! the reason printed) when Open vSwitch is missing, unless `RQVS_REQUIRE_OVS=1`.

mod common;
mod ofswitch;

use common::{ctl, rqvs, TempDir};
use ofswitch::OfSwitch;

const FLOWS: &str = "\
priority=10,in_port=1,actions=output:1,output:2
priority=5,actions=NORMAL
";

/// The trace's lines from its first rule to `Megaflow:` (the bridge's name and the packet line
/// aside).
fn body(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with("-----"))
        .skip(1)
        .take_while(|l| !l.starts_with("Datapath actions"))
        .map(str::to_string)
        .collect()
}

#[test]
fn trace_details_are_those_of_open_vswitch() {
    let dir = TempDir::new("trace-details");
    let rules = dir.path().join("flows.txt");
    std::fs::write(&rules, FLOWS).unwrap();
    let ours = |flow: &str| {
        let out = rqvs(&["trace", "--rules", rules.to_str().unwrap(), flow]);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let to_self = ours("in_port=1,tcp");
    assert!(to_self.contains("    output:1\n     >> skipping output to input port\n    output:2\n"), "{to_self}");
    assert!(to_self.contains("Datapath actions: 2\n"), "{to_self}");
    let normal = ours("in_port=2,tcp,dl_dst=00:00:00:00:00:09");
    assert!(normal.contains("    NORMAL\n     -> no learned MAC for destination, flooding\n"), "{normal}");

    let Some(ovs) = rqvs_testkit::ovs::start_or_skip("trace-details") else { return };
    ovs.replace_flows(FLOWS).unwrap();
    for flow in ["in_port=1,tcp", "in_port=2,tcp,dl_dst=00:00:00:00:00:09"] {
        let theirs = ovs.appctl(&["ofproto/trace", "br0", flow]).unwrap();
        assert_eq!(body(&ours(flow)), body(&theirs), "{flow}:\n{}\n--- Open vSwitch:\n{theirs}", ours(flow));
    }
}

/// `rqvs ctl ofproto/trace BRIDGE FLOW` takes OVS's spelling; the switch's trace carries the
/// same details.
#[test]
fn the_switch_takes_a_bridge_name_and_prints_the_details() {
    let _one = ofswitch::serial();
    let dir = TempDir::new("trace-details-switch");
    let rules = dir.path().join("flows.txt");
    std::fs::write(&rules, FLOWS).unwrap();
    let sw = OfSwitch::start(dir.path(), "trd", &rules, "orig", false);
    let with_bridge = ctl(&sw.sock, &["ofproto/trace", "br0", "in_port=1,tcp"]);
    let without = ctl(&sw.sock, &["ofproto/trace", "in_port=1,tcp"]);
    assert_eq!(with_bridge, without);
    assert!(without.contains("     >> skipping output to input port\n"), "{without}");
    let normal = ctl(&sw.sock, &["ofproto/trace", "in_port=2,tcp,dl_dst=00:00:00:00:00:09"]);
    assert!(normal.contains("    NORMAL\n     -> no learned MAC for destination, flooding\n"), "{normal}");
    // A flow word first is the flow, not a bridge.
    let proto_first = ctl(&sw.sock, &["ofproto/trace", "tcp", "in_port=1"]);
    assert!(proto_first.contains("Flow: tcp,in_port=1"), "{proto_first}");
}
