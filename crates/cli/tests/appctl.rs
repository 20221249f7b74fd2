//! `ovs-appctl` (real, OVS 3.1) managing `rqvs switch --unixctl --pidfile` on veths in private
//! namespaces: `list-commands`, `version`, `dpif-netdev/pmd-stats-show` after frames went
//! through, `-clear`, `pmd-rxq-show`, `dpctl/dump-flows`, `ofproto/trace br0 FLOW`,
//! `fdb/show br0`, `coverage/show`, `vlog/set`, errors as OVS words them, and `exit` (the switch
//! stops cleanly, socket and pid file removed). `ovs-appctl -t ovs-vswitchd` finds the switch
//! through `OVS_RUNDIR` and the pid file, as it finds ovs-vswitchd.
//!
//! Skips without root/namespaces (unless `RQVS_REQUIRE_NETNS=1`) or without ovs-appctl (unless
//! `RQVS_REQUIRE_OVS=1`).

mod common;
use common::TempDir;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rqvs_ports::testnet::{self, Netns, RawSocket};

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn udp_frame(dst_port: u16) -> Vec<u8> {
    let mut k = rqvs_flow::FlowKey::ipv4(0x0a00_0001, 0x0a00_0002, 17, 1000, dst_port);
    k.dl_src = [2, 0, 0, 0, 0, 1];
    k.dl_dst = [2, 0, 0, 0, 0, 2];
    rqvs_flow::frame::build_frame(&k.wire())
}

/// `ovs-appctl -t TARGET ARGS` with the test's run directory: (success, stdout, stderr).
fn appctl(rundir: &Path, target: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("ovs-appctl")
        .args(["-T", "10", "-t", target])
        .args(args)
        .env("OVS_RUNDIR", rundir)
        .output()
        .expect("run ovs-appctl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(rundir: &Path, target: &str, args: &[&str]) -> String {
    let (ok, out, err) = appctl(rundir, target, args);
    assert!(ok, "ovs-appctl {args:?}: {err}");
    out
}

#[test]
fn ovs_appctl_manages_a_running_switch() {
    if !testnet::available("ovs_appctl_manages_a_running_switch") || !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let tmp = TempDir::new("cli-appctl");
    let dir = tmp.path();
    let flows = dir.join("flows.txt");
    std::fs::write(&flows, "priority=10,udp,tp_dst=53,actions=output:2\npriority=5,actions=NORMAL\n").unwrap();
    let sw = Netns::new("sw").unwrap();
    let (h1, h2) = (Netns::new("h1").unwrap(), Netns::new("h2").unwrap());
    for (h, p, e) in [(&h1, "p1", "e1"), (&h2, "p2", "e2")] {
        sw.veth(p, h, e, 1).unwrap();
        sw.wait_running(p, Duration::from_secs(3)).unwrap();
        h.wait_running(e, Duration::from_secs(3)).unwrap();
    }
    let s1 = h1.run(|| RawSocket::open("e1")).unwrap().unwrap();
    let s2 = h2.run(|| RawSocket::open("e2")).unwrap().unwrap();
    let child = Command::new("ip")
        .args(["netns", "exec", sw.name(), env!("CARGO_BIN_EXE_rqvs"), "switch", "--port", "p1", "--port", "p2"])
        .args(["--rules", flows.to_str().unwrap(), "--unixctl", "--pidfile"])
        .env("OVS_RUNDIR", dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut running = Running(child);
    let pid = running.0.id(); // `ip netns exec` execs the switch
    let sock = dir.join(format!("ovs-vswitchd.{pid}.ctl"));
    let pidfile = dir.join("ovs-vswitchd.pid");
    let t0 = Instant::now();
    while !(sock.exists() && pidfile.exists()) && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(std::fs::read_to_string(&pidfile).unwrap(), format!("{pid}\n"));
    let target = sock.to_str().unwrap();
    std::thread::sleep(Duration::from_millis(200));

    // A second switch on the same pid file is refused, naming the running one.
    let second = common::rqvs(&["switch", "--pidfile", pidfile.to_str().unwrap(), "--duration", "1"]);
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("already locked by running process {pid}")), "{err}");
    assert_eq!(std::fs::read_to_string(&pidfile).unwrap(), format!("{pid}\n"), "left as it was");

    let list = ok(dir, target, &["list-commands"]);
    assert!(list.starts_with("The available commands are:\n"), "{list}");
    for c in ["dpif-netdev/pmd-stats-show", "dpctl/dump-flows", "ofproto/trace", "fdb/show", "exit", "vlog/set"] {
        assert!(list.lines().any(|l| l.trim_start().starts_with(c)), "{c} missing: {list}");
    }
    // By name, as operators write it: the pid file in OVS_RUNDIR leads to the socket.
    assert!(ok(dir, "ovs-vswitchd", &["version"]).starts_with("rqvs switch (rqvs) "));

    s1.send(&udp_frame(53)).unwrap();
    assert_eq!(s2.recv(Duration::from_secs(2)).unwrap().expect("forwarded"), udp_frame(53));
    s1.send(&udp_frame(80)).unwrap(); // NORMAL: floods (dst unknown), learns 02:00:00:00:00:01 on port 1
    assert!(s2.recv(Duration::from_secs(2)).unwrap().is_some(), "flooded by NORMAL");
    let stats = ok(dir, target, &["dpif-netdev/pmd-stats-show"]);
    assert!(stats.contains("packets received: 2"), "{stats}");
    let dump = ok(dir, target, &["dpctl/dump-flows", "netdev@ovs-netdev"]);
    assert!(dump.contains("actions:2"), "{dump}");
    let trace = ok(dir, target, &["ofproto/trace", "br0", "in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_dst=53"]);
    assert!(trace.contains("priority 10") && trace.contains("Datapath actions: 2"), "{trace}");
    let fdb = ok(dir, target, &["fdb/show", "br0"]);
    assert!(fdb.contains("02:00:00:00:00:01") && fdb.lines().any(|l| l.trim_start().starts_with("1 ")), "{fdb}");
    let rxq = ok(dir, target, &["dpif-netdev/pmd-rxq-show"]);
    assert!(rxq.contains("port: p1") && rxq.contains("port: p2") && rxq.contains("queue-id:  0"), "{rxq}");
    let cov = ok(dir, target, &["coverage/show"]);
    assert!(cov.lines().any(|l| l.starts_with("dpif_netdev_packets") && l.ends_with("total: 2")), "{cov}");
    assert_eq!(ok(dir, target, &["vlog/set", "console:dbg"]), "");
    ok(dir, target, &["dpif-netdev/pmd-stats-clear"]);
    let stats = ok(dir, target, &["dpif-netdev/pmd-stats-show"]);
    assert!(stats.contains("packets received: 0"), "cleared: {stats}");

    // Errors, in OVS's words; the switch keeps running.
    let (good, _, err) = appctl(dir, target, &["no/such"]);
    assert!(!good && err.contains("\"no/such\" is not a valid command"), "{err}");
    let (good, _, err) = appctl(dir, target, &["ofproto/trace", "br9", "in_port=1"]);
    assert!(!good && err.contains("no bridge named br9"), "{err}");
    let (good, _, err) = appctl(dir, target, &["fdb/show"]);
    assert!(!good && err.contains("requires at least 1 arguments"), "{err}");
    let (good, _, err) = appctl(dir, target, &["vlog/set", "nosuch:dbg"]);
    assert!(!good && err.contains("no destination, level, or module \"nosuch\""), "{err}");
    let (good, _, err) = appctl(dir, target, &["ofproto/trace", "br0", "in_port=1,nosuchfield=3"]);
    assert!(!good && !err.is_empty(), "a bad flow is an error: {err}");
    s1.send(&udp_frame(53)).unwrap();
    assert!(s2.recv(Duration::from_secs(2)).unwrap().is_some(), "still forwarding");

    ok(dir, target, &["exit"]);
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = running.0.try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "the switch did not stop at exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = std::mem::replace(&mut running.0, Command::new("true").spawn().unwrap()).wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("every frame accounted for"), "{text}");
    assert!(!sock.exists() && !pidfile.exists(), "socket and pid file removed at exit");
}
