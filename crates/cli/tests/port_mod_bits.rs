//! PORT_MOD's `no-flood`, `no-forward` and `no-receive` (and back) through real `ovs-ofctl
//! mod-port` against `rqvs switch` on veths, in ORIG and CFLOWS, with the semantics Open
//! vSwitch 3.1 showed (`ofproto/trace` and `netdev-dummy/receive` after `mod-port`; README,
//! *PORT_MOD*):
//!
//! - `no-flood` (OpenFlow 1.0 only): `FLOOD` and `NORMAL`'s flooding leave the port out; `ALL`
//!   and `output:P` still reach it;
//! - `no-forward`: nothing leaves through the port — `output:P`, `FLOOD`, `ALL`, `NORMAL`
//!   (flooding or to the port it learned the destination on);
//! - `no-receive`: what the port receives is dropped after its flow is looked up (the flow's
//!   `n_packets` grows, as in OVS) and before any action (`NORMAL` learns nothing from it);
//!   `rqvs ctl show` prints the port's config and the frames dropped, and every frame stays
//!   accounted for.
//!
//! The same frames are sent before and after each `mod-port` (the same megaflow): the change
//! holds from the next frame on without any revalidation.
//!
//! Needs root and `ip` (else skipped; a failure with `RQVS_REQUIRE_NETNS=1`) and `ovs-ofctl`
//! (else skipped; a failure with `RQVS_REQUIRE_OVS=1`).

mod common;
mod ofswitch;

use std::time::Duration;

use common::{ctl, TempDir};
use ofswitch::OfSwitch;

const QUIET: Duration = Duration::from_millis(400);

/// A broadcast frame from `src` (the last byte of its MAC), of an experimental EtherType, tagged
/// with `seq` so that no frame passes for another.
fn frame(src: u8, dst: Option<u8>, seq: u8) -> Vec<u8> {
    let mut f = Vec::new();
    match dst {
        Some(d) => f.extend_from_slice(&[0x02, 0, 0, 0, 0, d]),
        None => f.extend_from_slice(&[0xff; 6]),
    }
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, src]);
    f.extend_from_slice(&[0x88, 0xb5]);
    f.extend_from_slice(&[seq; 46]);
    f
}

/// Sends `f` from port `from`; the ports (of 1..=3) it arrived on.
fn reach(sw: &OfSwitch, from: usize, f: &[u8]) -> Vec<usize> {
    sw.send_from(from, f);
    (1..=3).filter(|&p| p != from && sw.received_on(p, QUIET).iter().any(|r| r == f)).collect()
}

/// `config:` of port `name` in `ovs-ofctl show`.
fn config_of(show: &str, name: &str) -> String {
    let mut lines = show.lines().skip_while(|l| !l.contains(&format!("({name}):")));
    lines.next().unwrap_or_else(|| panic!("no port {name} in {show}"));
    lines.next().unwrap().trim().trim_start_matches("config:").trim().to_string()
}

/// `n_packets` of the flow whose dump line contains `what`.
fn n_packets(dump: &str, what: &str) -> u64 {
    let line = dump.lines().find(|l| l.contains(what)).unwrap_or_else(|| panic!("no flow {what} in {dump}"));
    let n = line.split("n_packets=").nth(1).unwrap().split(',').next().unwrap();
    n.parse().unwrap()
}

fn run(design: &str) {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let _serial = ofswitch::serial();
    let dir = TempDir::new(&format!("pm-bits-{design}"));
    let rules = dir.join("rules.flows");
    std::fs::write(
        &rules,
        "priority=10,in_port=1,actions=FLOOD\npriority=10,in_port=2,actions=ALL\npriority=10,in_port=3,actions=output:1,output:2\n",
    )
    .unwrap();
    let sw = OfSwitch::start(dir.path(), &format!("pmb{}", &design[..2]), &rules, design, true);
    if !sw.has_traffic() {
        return;
    }
    let t = sw.target();
    let of = |v: &str, args: &[&str]| sw.ofctl_ok(v, args);
    let mut seq = 0u8;
    let mut next = |src: u8, dst: Option<u8>| {
        seq += 1;
        frame(src, dst, seq)
    };
    assert_eq!(reach(&sw, 1, &next(1, None)), vec![2, 3], "{design}: FLOOD before any mod-port");

    // no-flood (OpenFlow 1.0: `ovs-ofctl` without -O).
    let o = sw.in_switch_ns("ovs-ofctl").args(["mod-port", &t, "p3", "no-flood"]).output().unwrap();
    assert!(o.status.success(), "{design}: {o:?}");
    let show =
        String::from_utf8_lossy(&sw.in_switch_ns("ovs-ofctl").args(["show", &t]).output().unwrap().stdout).into_owned();
    assert_eq!(config_of(&show, "p3"), "NO_FLOOD", "{design}: {show}");
    // 1.3 has no NO_FLOOD: not reported there (as OVS).
    assert_eq!(config_of(&of("OpenFlow13", &["show", &t]), "p3"), "0", "{design}");
    assert_eq!(reach(&sw, 1, &next(1, None)), vec![2], "{design}: FLOOD reached a no-flood port");
    assert_eq!(reach(&sw, 2, &next(2, None)), vec![1, 3], "{design}: ALL must reach a no-flood port");
    assert_eq!(reach(&sw, 3, &next(3, None)), vec![1, 2], "{design}: output:P ignores no-flood");
    assert!(ctl(&sw.sock, &["show"]).contains("(p3:afpacket): config NO_FLOOD"), "{design}");
    let o = sw.in_switch_ns("ovs-ofctl").args(["mod-port", &t, "p3", "flood"]).output().unwrap();
    assert!(o.status.success(), "{design}: {o:?}");
    assert_eq!(reach(&sw, 1, &next(1, None)), vec![2, 3], "{design}: FLOOD after `flood`");

    // no-forward (1.3): nothing leaves through p2.
    of("OpenFlow13", &["mod-port", &t, "p2", "no-forward"]);
    assert_eq!(config_of(&of("OpenFlow13", &["show", &t]), "p2"), "NO_FWD", "{design}");
    assert_eq!(reach(&sw, 1, &next(1, None)), vec![3], "{design}: FLOOD to a no-forward port");
    assert_eq!(reach(&sw, 3, &next(3, None)), vec![1], "{design}: output:2 to a no-forward port");
    of("OpenFlow13", &["mod-port", &t, "p1", "no-forward"]);
    // Both outputs refused: the frame is dropped for no_forward.
    assert_eq!(reach(&sw, 3, &next(3, None)), Vec::<usize>::new(), "{design}");
    let show = ctl(&sw.sock, &["show"]);
    assert!(show.contains("no_forward 1"), "{design}: {show}");
    assert!(show.contains("every frame accounted for"), "{design}: {show}");
    of("OpenFlow13", &["mod-port", &t, "p1", "forward"]);
    of("OpenFlow13", &["mod-port", &t, "p2", "forward"]);
    assert_eq!(reach(&sw, 3, &next(3, None)), vec![1, 2], "{design}: after `forward`");

    // no-receive (1.4): p1's frames go nowhere, its flow still counts them.
    let before = n_packets(&of("OpenFlow14", &["dump-flows", &t]), "in_port=1");
    of("OpenFlow14", &["mod-port", &t, "p1", "no-receive"]);
    assert_eq!(config_of(&of("OpenFlow14", &["show", &t]), "p1"), "NO_RECV", "{design}");
    for _ in 0..3 {
        assert_eq!(reach(&sw, 1, &next(1, None)), Vec::<usize>::new(), "{design}: a no-receive port's frame passed");
    }
    assert_eq!(reach(&sw, 2, &next(2, None)), vec![1, 3], "{design}: no-receive does not stop output to the port");
    let show = ctl(&sw.sock, &["show"]);
    assert!(show.contains("(p1:afpacket): config NO_RECV (3 received frames dropped: no_receive)"), "{design}: {show}");
    assert!(show.contains("every frame accounted for"), "{design}: {show}");
    // CFLOWS' per-flow counters arrive with the PMDs' next report: wait for them.
    let t0 = std::time::Instant::now();
    while n_packets(&of("OpenFlow14", &["dump-flows", &t]), "in_port=1") < before + 3 {
        assert!(t0.elapsed() < Duration::from_secs(5), "{design}: the flow did not count the no-receive frames");
        std::thread::sleep(Duration::from_millis(100));
    }
    of("OpenFlow14", &["mod-port", &t, "p1", "receive"]);
    assert_eq!(reach(&sw, 1, &next(1, None)), vec![2, 3], "{design}: after `receive`");

    // NORMAL: flooding leaves no-flood out, a learned no-forward port gets nothing, and a
    // no-receive port's station is not learned.
    of("OpenFlow13", &["del-flows", &t]);
    of("OpenFlow13", &["add-flow", &t, "actions=NORMAL"]);
    std::thread::sleep(ofswitch::SETTLE);
    let o = sw.in_switch_ns("ovs-ofctl").args(["mod-port", &t, "p3", "no-flood"]).output().unwrap();
    assert!(o.status.success(), "{design}: {o:?}");
    assert_eq!(reach(&sw, 1, &next(1, None)), vec![2], "{design}: NORMAL flooded to a no-flood port");
    // Station 3 behind p3 is learned: a unicast to it goes to p3, no-flood or not.
    assert_eq!(reach(&sw, 3, &next(3, None)), vec![1, 2], "{design}");
    assert_eq!(reach(&sw, 1, &next(1, Some(3))), vec![3], "{design}: NORMAL to a learned no-flood port");
    of("OpenFlow13", &["mod-port", &t, "p3", "no-forward"]);
    assert_eq!(reach(&sw, 1, &next(1, Some(3))), Vec::<usize>::new(), "{design}: NORMAL to a learned no-forward port");
    of("OpenFlow13", &["mod-port", &t, "p3", "forward"]);
    of("OpenFlow13", &["mod-port", &t, "p2", "no-receive"]);
    // Station 22 speaks only from the no-receive p2: never learned, so a unicast to it floods.
    assert_eq!(reach(&sw, 2, &next(22, None)), Vec::<usize>::new(), "{design}");
    assert_eq!(reach(&sw, 1, &next(1, Some(22))), vec![2], "{design}: flooding (p3 is no-flood)");
    let fdb = ctl(&sw.sock, &["fdb/show"]);
    assert!(!fdb.contains("02:00:00:00:00:16"), "{design}: learned from a no-receive port: {fdb}");
    let show = ctl(&sw.sock, &["show"]);
    assert!(show.contains("every frame accounted for"), "{design}: {show}");
}

#[test]
fn no_flood_no_forward_no_receive_orig() {
    run("orig");
}

#[test]
fn no_flood_no_forward_no_receive_cflows() {
    run("cflows");
}
