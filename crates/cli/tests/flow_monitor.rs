//! Flow monitors: real `ovs-ofctl monitor SOCK watch:...` against `rqvs switch` prints what it
//! prints against real Open vSwitch 3.1 for the same flow-mods — without `-O` (Nicira's
//! `NXST_FLOW_MONITOR`), with `-O OpenFlow13` (ONF's extension) and `-O OpenFlow14`
//! (`OFPMP_FLOW_MONITOR`): the initial flows, then ADDED (an add, an add over an existing flow),
//! MODIFIED (a modify that changes the actions; none when it does not), DELETED with its reason
//! (a delete, a hard timeout), made by other connections; and, for a flow-mod the monitoring
//! connection sends itself (`ovs-appctl ofctl/send`), the flow in full with `watch:` and one
//! ABBREV carrying its xid with `watch:!own`; `!initial`, `!actions`, `table=`, `out_port=`,
//! `!add`, `!delete` as typed. The texts are compared whole (no duration is printed).
//!
//! Needs Open vSwitch (else skipped; a failure with `RQVS_REQUIRE_OVS=1`); runs on pcap ports
//! (no traffic). The `ovs-ofctl monitor` processes are killed by pid.

mod common;
mod ofswitch;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::TempDir;
use ofswitch::OfSwitch;

/// A process started by the test: killed by pid and reaped on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn ofctl(args: &[&str]) {
    let o = Command::new("ovs-ofctl").args(args).output().unwrap();
    assert!(o.status.success(), "ovs-ofctl {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

/// The flow-mods of every run, from other connections than the monitor's.
fn others(t: &str) {
    ofctl(&["add-flow", t, "priority=6,ip,actions=drop"]);
    ofctl(&["add-flow", t, "priority=6,ip,actions=drop"]);
    ofctl(&["mod-flows", t, "priority=6,ip,actions=output:1"]);
    ofctl(&["mod-flows", t, "priority=6,ip,actions=output:1"]);
    ofctl(&["add-flow", t, "priority=6,ip,actions=output:2"]);
    ofctl(&["add-flow", t, "priority=8,udp,tp_dst=53,idle_timeout=9,cookie=0x77,actions=NORMAL"]);
    ofctl(&["--strict", "del-flows", t, "priority=6,ip"]);
    ofctl(&["del-flows", t, "udp"]);
    ofctl(&["add-flow", t, "priority=7,tcp,hard_timeout=1,actions=drop"]);
}

/// `ADD priority=9,arp actions=drop` as `ovs-ofctl` sends it (xid 6), per version.
fn own_flow_mod(version: Option<&str>) -> &'static str {
    match version {
        None => "010e004800000006003820ef00000000000000000000000000000000000008060000000000000000000000000000000000000000000000000000000000000009ffffffffffff0000",
        Some("OpenFlow13") => "040e004000000006000000000000000000000000000000000000000000000009ffffffffffffffffffffffff000000000001000a80000a020806000000000000",
        _ => "050e004000000006000000000000000000000000000000000000000000000009ffffffffffffffffffffffff000000000001000a80000a020806000000000000",
    }
}

/// What `ovs-ofctl [-O version] monitor target watch` prints (stdout and stderr, in order)
/// while the flow-mods run: the others', then (when `own`) one of its own, then the arp flow's
/// delete; waits for the hard timeout.
fn monitor(dir: &Path, target: &str, version: Option<&str>, watch: &str, own: bool) -> String {
    let run = dir.join(format!("run-{}", std::process::id() as u64 * 1000 + rand_tag()));
    std::fs::create_dir_all(&run).unwrap();
    let out = run.join("monitor.txt");
    let mut c = Command::new("ovs-ofctl");
    if let Some(v) = version {
        c.args(["-O", v]);
    }
    let file = std::fs::File::create(&out).unwrap();
    let child = Proc(
        c.args(["monitor", target, watch])
            .env("OVS_RUNDIR", &run)
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Its control socket (ofctl/send) exists once it is connected and has its initial flows.
    let t0 = Instant::now();
    let ctl = loop {
        let found = std::fs::read_dir(&run)
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "ctl"));
        if let Some(p) = found {
            if std::fs::read_to_string(&out).unwrap_or_default().contains("FLOW_MONITOR reply") {
                break p;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the monitor did not start: {}",
            std::fs::read_to_string(&out).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    others(target);
    if own {
        let o = Command::new("ovs-appctl")
            .args(["-t", ctl.to_str().unwrap(), "ofctl/send", own_flow_mod(version)])
            .output()
            .unwrap();
        assert!(o.status.success(), "ofctl/send: {}", String::from_utf8_lossy(&o.stderr));
        std::thread::sleep(Duration::from_millis(300));
        ofctl(&["del-flows", target, "arp"]);
    }
    // The hard timeout (1 s; rqvs's expiry and OVS's both look every ~second): until the flow
    // is gone from the table, then a moment for the monitor to print its DELETED.
    let t0 = Instant::now();
    loop {
        let o = Command::new("ovs-ofctl").args(["dump-flows", target, "tcp"]).output().unwrap();
        assert!(o.status.success(), "dump-flows: {}", String::from_utf8_lossy(&o.stderr));
        if !String::from_utf8_lossy(&o.stdout).contains("hard_timeout=1") {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "the hard timeout did not expire the flow");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(400));
    drop(child);
    let text = std::fs::read_to_string(&out).unwrap();
    text.lines().filter(|l| !l.contains("fatal_signal")).map(|l| format!("{l}\n")).collect()
}

fn rand_tag() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

#[test]
fn ovs_ofctl_monitor_watch_prints_what_it_prints_against_open_vswitch() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let Some(ovs) = rqvs_testkit::ovs::start_or_skip("flow-monitor") else { return };
    let _serial = ofswitch::serial();
    let dir = TempDir::new("flow-monitor");
    let rules = dir.join("rules.flows");
    std::fs::write(&rules, "priority=5,in_port=1,actions=output:2\n").unwrap();
    let sw = OfSwitch::start(dir.path(), "fmon", &rules, "orig", false);
    let (rq, real) = (sw.target(), ovs.mgmt());
    // The same table on both (OVS's bridge starts with `actions=NORMAL`).
    ofctl(&["del-flows", &real]);
    ofctl(&["add-flow", &real, "priority=5,in_port=1,actions=output:2"]);
    let cases: &[(&str, bool)] = &[
        ("watch:", true),
        ("watch:!own", true),
        ("watch:!initial,!actions", false),
        ("watch:table=0,out_port=2", false),
        ("watch:!add,!delete", true),
    ];
    for version in [None, Some("OpenFlow13"), Some("OpenFlow14")] {
        for &(watch, own) in cases {
            // Both at once: the two switches share nothing.
            let (want, got) = std::thread::scope(|s| {
                let want = s.spawn(|| monitor(dir.path(), &real, version, watch, own));
                let got = monitor(dir.path(), &rq, version, watch, own);
                (want.join().unwrap(), got)
            });
            // `ovs-ofctl`'s own `send:` line goes to stdout, the updates to stderr: where it lands
            // among them is the terminal's business, not the switch's.
            let updates = |t: &str| t.lines().filter(|l| !l.starts_with("send: ")).collect::<Vec<_>>().join("\n");
            assert_eq!(
                updates(&got),
                updates(&want),
                "{version:?} {watch}: rqvs (left) and Open vSwitch (right) differ"
            );
            assert_eq!(got.contains("send: "), own, "{version:?} {watch}: {got}");
            // Not vacuous: the updates came.
            if watch == "watch:" {
                for line in ["event=MODIFIED", "event=DELETED reason=delete", "event=DELETED reason=hard", "send: "] {
                    assert!(got.contains(line), "{version:?} {watch}: no {line}: {got}");
                }
            }
            if watch == "watch:!own" {
                assert!(got.contains("event=ABBREV xid=0x6"), "{version:?}: {got}");
            }
        }
    }
    // Both tables end as they began.
    drop(ovs);
}

/// A passive connection that set no miss_send_len (plain `ovs-ofctl monitor SOCK`, or `monitor
/// SOCK watch:`) is sent no PORT_STATUS, in 1.0 and 1.3, by Open vSwitch 3.1 as by rqvs: both
/// print nothing when another connection's PORT_MOD changes a port (and both send it to
/// `monitor SOCK 65535`).
#[test]
fn a_monitor_without_a_miss_length_gets_no_port_status_as_in_open_vswitch() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let Some(ovs) = rqvs_testkit::ovs::start_or_skip("no-miss-len") else { return };
    let _serial = ofswitch::serial();
    let dir = TempDir::new("no-miss-len");
    let rules = dir.join("rules.flows");
    std::fs::write(&rules, "priority=5,in_port=1,actions=output:2\n").unwrap();
    let sw = OfSwitch::start(dir.path(), "fnml", &rules, "orig", false);
    // The two switches at once (they share nothing), each through its cases in turn.
    let one = |target: &str| {
        for version in [None, Some("OpenFlow13")] {
            for extra in [None, Some("watch:"), Some("65535")] {
                let run = dir.join(format!("nml-{}", rand_tag()));
                std::fs::create_dir_all(&run).unwrap();
                let out = run.join("monitor.txt");
                let mut c = Command::new("ovs-ofctl");
                if let Some(v) = version {
                    c.args(["-O", v]);
                }
                c.args(["monitor", target]).args(extra);
                let file = std::fs::File::create(&out).unwrap();
                let child = Proc(
                    c.env("OVS_RUNDIR", &run)
                        .stdout(file.try_clone().unwrap())
                        .stderr(file)
                        .stdin(Stdio::null())
                        .spawn()
                        .unwrap(),
                );
                std::thread::sleep(Duration::from_millis(1000));
                ofctl(&["mod-port", target, "2", "no-packet-in"]);
                ofctl(&["mod-port", target, "2", "packet-in"]);
                std::thread::sleep(Duration::from_millis(700));
                drop(child);
                let text = std::fs::read_to_string(&out).unwrap();
                // With a miss length (65535) both send it: the check above is not vacuous.
                let asked = extra == Some("65535");
                assert_eq!(text.contains("PORT_STATUS"), asked, "{target} {version:?} {extra:?}: {text}");
            }
        }
    };
    let (real, rq) = (ovs.mgmt(), sw.target());
    std::thread::scope(|s| {
        let real = s.spawn(|| one(&real));
        one(&rq);
        real.join().unwrap();
    });
}
