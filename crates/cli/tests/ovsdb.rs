//! `rqvs switch --ovsdb` configured by real `ovs-vsctl` through a real `ovsdb-server` (OVS 3.1,
//! a fresh database from OVS's schema, no ovs-vswitchd), on veths whose other ends are in
//! namespaced hosts: `add-br` (datapath_type=netdev) and `add-port` return with their wait
//! (the switch writes `cur_cfg`), a ping passes through rqvs (`actions=NORMAL`, OVS's default
//! flow), `ovs-vsctl list interface` shows the ofport asked for, the link state and moving
//! statistics; an unsupported interface type and a missing device get `Interface.error`;
//! `del-port`/`add-port` while running (a datapath restart); ovsdb-server killed and restarted
//! (the switch reconnects; forwarding goes on; the configuration is written again); `ovs-appctl
//! exit` stops it cleanly.
//!
//! Skips without root/namespaces (unless `RQVS_REQUIRE_NETNS=1`) or without Open vSwitch
//! (unless `RQVS_REQUIRE_OVS=1`).

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rqvs_ports::testnet::{self, Netns};
use rqvs_testkit::ovsdb_server::start_or_skip;

const H1: &str = "10.78.0.1";
const H2: &str = "10.78.0.2";

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn ping(h: &Netns, to: &str, count: u32) -> bool {
    let out = Command::new("ip")
        .args(["netns", "exec", h.name(), "ping", "-c", &count.to_string(), "-i", "0.2", "-W", "1", to])
        .output()
        .unwrap();
    out.status.success() && String::from_utf8_lossy(&out.stdout).contains(&format!("{count} received"))
}

/// Polls `f` until it holds (10 s at most).
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(15), "{what}: not within 15 s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn field(listing: &str, name: &str) -> String {
    listing
        .lines()
        .find(|l| l.split(':').next().map(str::trim) == Some(name))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default()
}

fn stat(listing: &str, key: &str) -> u64 {
    let s = field(listing, "statistics");
    s.trim_matches(['{', '}'])
        .split(", ")
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn ovs_vsctl_configures_a_running_switch() {
    if !testnet::available("ovs_vsctl_configures_a_running_switch") {
        return;
    }
    let Some(mut db) = start_or_skip("dropin") else { return };
    db.vsctl(&["--no-wait", "init"]).unwrap();
    let sw = Netns::new("sw").unwrap();
    let (h1, h2) = (Netns::new("h1").unwrap(), Netns::new("h2").unwrap());
    for (h, p, e, addr) in [(&h1, "p1", "e1", H1), (&h2, "p2", "e2", H2)] {
        sw.veth(p, h, e, 1).unwrap();
        sw.wait_running(p, Duration::from_secs(3)).unwrap();
        h.wait_running(e, Duration::from_secs(3)).unwrap();
        h.ip(&["addr", "add", &format!("{addr}/24"), "dev", e]).unwrap();
    }
    let dir = db.dir.path().to_path_buf();
    let unixctl = dir.join("rqvs.ctl");
    let child = Command::new("ip")
        .args(["netns", "exec", sw.name(), env!("CARGO_BIN_EXE_rqvs"), "switch", "--ovsdb", &db.remote()])
        .args(["--unixctl", unixctl.to_str().unwrap()])
        .env("OVS_RUNDIR", &dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut running = Running(child);
    eventually("the switch writes datapath_types", || {
        db.vsctl(&["get", "open_vswitch", ".", "datapath_types"]).is_ok_and(|s| s.contains("netdev"))
    });

    // With their wait: each returns once the switch has written cur_cfg.
    let out = db.vsctl(&["add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev"]).unwrap();
    assert_eq!(out, "");
    db.vsctl(&["add-port", "br0", "p1", "--", "set", "interface", "p1", "ofport_request=7"]).unwrap();
    db.vsctl(&["add-port", "br0", "p2", "--", "set", "interface", "p2", "ofport_request=3"]).unwrap();
    let cur: i64 = db.vsctl(&["get", "open_vswitch", ".", "cur_cfg"]).unwrap().trim().parse().unwrap();
    let next: i64 = db.vsctl(&["get", "open_vswitch", ".", "next_cfg"]).unwrap().trim().parse().unwrap();
    assert_eq!(cur, next);
    // On failure the switch is stopped and its counters and log are the diagnosis.
    if !ping(&h1, H2, 3) {
        let _ = Command::new("ovs-appctl").args(["-t", unixctl.to_str().unwrap(), "exit"]).output();
        std::thread::sleep(Duration::from_secs(2));
        let out = std::mem::replace(&mut running.0, Command::new("true").spawn().unwrap()).wait_with_output().unwrap();
        panic!(
            "no ping through rqvs (NORMAL): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let p1 = db.vsctl(&["list", "interface", "p1"]).unwrap();
    assert_eq!(field(&p1, "ofport"), "7", "{p1}");
    assert_eq!(field(&p1, "link_state"), "up", "{p1}");
    assert_eq!(field(&p1, "admin_state"), "up", "{p1}");
    assert_eq!(field(&p1, "error"), "[]", "{p1}");
    assert_eq!(field(&p1, "mtu"), "1500", "{p1}");
    assert_eq!(field(&db.vsctl(&["list", "interface", "p2"]).unwrap(), "ofport"), "3");
    // The bridge's own (internal) interface: a tap device, OpenFlow's LOCAL port as in OVS.
    let br0 = db.vsctl(&["list", "interface", "br0"]).unwrap();
    assert_eq!(field(&br0, "error"), "[]", "{br0}");
    assert_eq!(field(&br0, "ofport"), "65534", "{br0}");
    let dpid = db.vsctl(&["get", "bridge", "br0", "datapath_id"]).unwrap();
    assert_eq!(dpid.trim().trim_matches('"').len(), 16, "{dpid}");
    // Statistics move (written every 5 s).
    let before = stat(&db.vsctl(&["list", "interface", "p1"]).unwrap(), "rx_packets");
    assert!(ping(&h1, H2, 2));
    eventually("p1's statistics move", || {
        stat(&db.vsctl(&["list", "interface", "p1"]).unwrap(), "rx_packets") > before
    });

    // Bad input: an unsupported type, a device that does not exist; the rest keeps working.
    db.vsctl(&["add-port", "br0", "d1", "--", "set", "interface", "d1", "type=dpdk"]).unwrap();
    db.vsctl(&["add-port", "br0", "nosuchdev"]).unwrap();
    assert_eq!(
        db.vsctl(&["get", "interface", "d1", "error"]).unwrap().trim(),
        "\"dpdk interfaces are not supported by rqvs\""
    );
    assert_eq!(
        db.vsctl(&["get", "interface", "nosuchdev", "error"]).unwrap().trim(),
        "\"could not open network device nosuchdev (No such device)\""
    );
    assert!(ping(&h1, H2, 2), "still forwarding");

    // Ports removed and added while running.
    db.vsctl(&["del-port", "br0", "p2"]).unwrap();
    assert!(!ping(&h1, H2, 1), "p2 is gone");
    db.vsctl(&["add-port", "br0", "p2"]).unwrap();
    assert!(ping(&h1, H2, 2), "p2 is back");
    assert_eq!(field(&db.vsctl(&["list", "interface", "p2"]).unwrap(), "ofport"), "1", "the lowest free number");

    // ovsdb-server killed and started again on the same file: forwarding goes on meanwhile;
    // the switch reconnects and applies what changes next.
    db.stop();
    assert!(ping(&h1, H2, 2), "forwarding without the database");
    db.restart().unwrap();
    db.vsctl(&["set", "bridge", "br0", "other_config:datapath-id=00000000000000aa"]).unwrap();
    assert_eq!(db.vsctl(&["get", "bridge", "br0", "datapath_id"]).unwrap().trim(), "\"00000000000000aa\"");
    assert!(ping(&h1, H2, 2));

    // A controller from the Controller table: OVS's learning-switch controller in the switch's
    // namespace; is_connected follows the connection. An unsupported target says why.
    if rqvs_testkit::ovs::testcontroller_available() {
        sw.ip(&["link", "set", "lo", "up"]).unwrap();
        let tc = Command::new("ip")
            .args(["netns", "exec", sw.name(), "ovs-testcontroller", "ptcp:6663:127.0.0.1"])
            .arg(format!("--unixctl={}", dir.join("tc.ctl").display()))
            .args(["-vconsole:off"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let tc = Running(tc);
        db.vsctl(&["set-controller", "br0", "tcp:127.0.0.1:6663", "--", "set-fail-mode", "br0", "secure"]).unwrap();
        eventually("the controller is connected", || {
            db.vsctl(&["get", "controller", "br0", "is_connected"]).is_ok_and(|s| s.trim() == "true")
        });
        assert!(db.vsctl(&["get", "controller", "br0", "status:state"]).unwrap().contains("ACTIVE"));
        assert!(ping(&h1, H2, 3), "ping with the learning-switch controller");
        drop(tc);
        eventually("the controller is gone", || {
            db.vsctl(&["get", "controller", "br0", "is_connected"]).is_ok_and(|s| s.trim() == "false")
        });
        db.vsctl(&["set-controller", "br0", "ssl:127.0.0.1:6663"]).unwrap();
        // An ssl: target without an SSL row says so (dropin's `ssl_targets_use_the_ssl_table`
        // connects one).
        let status = db.vsctl(&["get", "controller", "br0", "status:last_error"]).unwrap();
        assert!(status.contains("no SSL configuration"), "{status}");
        db.vsctl(&["set-controller", "br0", "udp:127.0.0.1:6663"]).unwrap();
        let status = db.vsctl(&["get", "controller", "br0", "status:last_error"]).unwrap();
        assert!(status.contains("is not supported by rqvs (tcp:IP[:PORT], ssl:IP[:PORT],"), "{status}");
        // The controller replaced the table with its own flows; the datapath restarts with them.
        db.vsctl(&["del-controller", "br0", "--", "del-fail-mode", "br0"]).unwrap();
    }

    let out = Command::new("ovs-appctl").args(["-t", unixctl.to_str().unwrap(), "exit"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = running.0.try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "the switch did not stop at exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = std::mem::replace(&mut running.0, Command::new("true").spawn().unwrap()).wait_with_output().unwrap();
    let (text, err) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(status.success(), "{text}{err}");
    assert!(text.contains("every frame accounted for"), "{text}");
    // Each fault logged once, however often the configuration was read again.
    assert_eq!(err.matches("interface d1: dpdk interfaces are not supported by rqvs").count(), 1, "{err}");
    assert!(!Path::new(&unixctl).exists());
}
