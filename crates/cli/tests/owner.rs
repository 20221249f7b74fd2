//! One port, one owner (issue 38): the same interface given twice as `--port` is a usage error
//! (exit 2, before anything is opened), and a second `rqvs switch` on an interface a running one
//! holds is refused with a message naming the holder (exit 1), while the first keeps running.
//!
//! The second test needs root and `ip` (skipped otherwise; a failure with
//! `RQVS_REQUIRE_NETNS=1`); processes started here are killed by pid when it ends.

#[path = "../../switch/tests/common/mod.rs"]
mod topo;

mod common;
use common::{ctl, rqvs, TempDir};

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use rqvs_ports::testnet;
use topo::Topo;

#[test]
fn the_same_interface_twice_is_a_usage_error() {
    for ports in [["s3", "s3"], ["s3", "s3:afxdp"], ["pcap-out:/tmp/x.pcap", "pcap-out:/tmp/x.pcap"]] {
        let out = rqvs(&["switch", "--port", ports[0], "--port", ports[1], "--duration", "1"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{ports:?}: {err}");
        assert!(err.contains("is already port 1") && err.contains("one port, one owner"), "{ports:?}: {err}");
    }
}

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_port_held_by_a_running_switch_is_refused() {
    if !testnet::available("a_port_held_by_a_running_switch_is_refused") {
        return;
    }
    let t = Topo::new("own", 1);
    let dir = TempDir::new("owner");
    let flows = dir.join("flows");
    std::fs::write(&flows, "priority=0,actions=NORMAL\n").unwrap();
    let sock = dir.join("ctl.sock");
    let exe = env!("CARGO_BIN_EXE_rqvs");
    let f = flows.to_str().unwrap();
    let first = Command::new("ip")
        .args(["netns", "exec", t.sw.name(), exe, "switch", "--rules", f, "--port", "p1", "--port", "p2"])
        .args(["--ctl", sock.to_str().unwrap(), "--duration", "60"])
        .stdout(std::fs::File::create(dir.join("first.out")).unwrap())
        .stderr(std::fs::File::create(dir.join("first.err")).unwrap())
        .spawn()
        .unwrap();
    let mut first = Proc(first);
    let t0 = Instant::now();
    while !sock.exists() {
        assert!(first.0.try_wait().unwrap().is_none(), "{}", std::fs::read_to_string(dir.join("first.err")).unwrap());
        assert!(t0.elapsed() < Duration::from_secs(20), "the first switch did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    // p3 is free, p2 is not.
    let second = Command::new("ip")
        .args(["netns", "exec", t.sw.name(), exe, "switch", "--rules", f, "--port", "p3", "--port", "p2:afxdp"])
        .args(["--duration", "5"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{err}");
    assert!(
        err.contains("interface p2 is in use by another rqvs switch") && err.contains(&format!("pid {}", first.0.id())),
        "{err}"
    );
    // The first is unharmed, and its ports are free once it has stopped.
    assert!(first.0.try_wait().unwrap().is_none());
    ctl(&sock, &["exit"]);
    let t0 = Instant::now();
    while first.0.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(15), "the first switch did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    let third = Command::new("ip")
        .args(["netns", "exec", t.sw.name(), exe, "switch", "--rules", f, "--port", "p2", "--duration", "0.5"])
        .output()
        .unwrap();
    assert!(third.status.success(), "{}", String::from_utf8_lossy(&third.stderr));
}
