//! Faults inside the switch process, on the real binary over loopback (the embedded workload's
//! pcap ports; no root needed):
//!
//! - a PMD thread that panics, and the handler thread that panics, take the switch down: the
//!   panic's message logged with the thread's name, `rqvs: error: ... panicked`, exit status 1,
//!   within seconds — never a switch running on with a dead thread. The panics come from the
//!   test hook `RQVS_TEST_PANIC` (`crates/switch/src/fault.rs`);
//! - a controller that disconnects in the middle of a bundle: the bundle is discarded (the table
//!   is unchanged, the switch serves the next connection), where the same messages with a commit
//!   change it.

mod common;
use common::{ctl, TempDir};

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rqvs_openflow::flow_mod::FlowMod;
use rqvs_openflow::{encode, Message, OFP14};

const RQVS: &str = env!("CARGO_BIN_EXE_rqvs");

/// `rqvs switch --openflow ptcp:0` (it would run until stopped) with `RQVS_TEST_PANIC=which`:
/// its exit code, stderr, and how long it ran.
fn panicking_switch(which: &str, design: &str) -> (Option<i32>, String, Duration) {
    let t0 = Instant::now();
    let mut child = Command::new(RQVS)
        .args(["switch", "--openflow", "ptcp:0", "--design", design])
        .env("RQVS_TEST_PANIC", which)
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the switch kept running after its {which} thread panicked");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.code(), reader.join().unwrap(), t0.elapsed())
}

#[test]
fn a_panicking_pmd_takes_the_switch_down() {
    for design in ["orig", "cflows"] {
        let (code, err, took) = panicking_switch("pmd", design);
        assert_eq!(code, Some(1), "{design}: {err}");
        assert!(
            err.contains(
                "rqvs switch: PMD thread 0 panicked: RQVS_TEST_PANIC=pmd: PMD 0's test panic; stopping the switch"
            ),
            "{design}: {err}"
        );
        assert!(err.contains("rqvs: error: PMD thread 0 panicked"), "{design}: {err}");
        assert_eq!(err.matches("stopping the switch").count(), 1, "logged once: {err}");
        assert!(took < Duration::from_secs(15), "{design}: took {took:?}");
    }
}

#[test]
fn a_panicking_handler_takes_the_switch_down() {
    let (code, err, _) = panicking_switch("handler", "orig");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("rqvs switch: the handler thread panicked: RQVS_TEST_PANIC=handler"), "{err}");
    assert!(err.contains("rqvs: error: the handler thread panicked"), "{err}");
}

/// Reads one whole OpenFlow message.
fn read_msg(s: &mut TcpStream) -> Vec<u8> {
    let mut h = [0u8; 8];
    s.read_exact(&mut h).expect("a message");
    let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let mut body = vec![0u8; len.saturating_sub(8)];
    s.read_exact(&mut body).expect("its body");
    [h.to_vec(), body].concat()
}

/// Connects and negotiates OpenFlow 1.4.
fn connect(port: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(read_msg(&mut s)[1], 0, "the switch's HELLO");
    s.write_all(&[OFP14, 0, 0, 16, 0, 0, 0, 1, 0, 1, 0, 8, 0, 0, 0, 1 << 5]).unwrap();
    s
}

/// BUNDLE_CONTROL of `kind` (0 open, 4 commit) for bundle `id`.
fn bundle_control(xid: u32, id: u32, kind: u16) -> Vec<u8> {
    let mut m = vec![OFP14, 33, 0, 16];
    m.extend_from_slice(&xid.to_be_bytes());
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&kind.to_be_bytes());
    m.extend_from_slice(&1u16.to_be_bytes()); // ATOMIC
    m
}

/// BUNDLE_ADD_MESSAGE of a FLOW_MOD adding `flow` to bundle `id`.
fn bundle_add(xid: u32, id: u32, flow: &str) -> Vec<u8> {
    let rule = rqvs_flow::formats::ofctl::parse_flow("test", 1, flow, 0).unwrap();
    let inner = encode(OFP14, xid, &Message::FlowMod(FlowMod::add(rule.priority as u16, rule.matches, rule.actions)));
    let inner = inner.unwrap();
    let mut m = vec![OFP14, 34, 0, 0];
    m.extend_from_slice(&xid.to_be_bytes());
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&[0, 0, 0, 1]);
    m.extend_from_slice(&inner);
    let n = m.len() as u16;
    m[2..4].copy_from_slice(&n.to_be_bytes());
    m
}

/// A BARRIER_REQUEST, and its reply awaited: everything before it is done.
fn barrier(s: &mut TcpStream, xid: u32) -> Vec<Vec<u8>> {
    let mut m = vec![OFP14, 20, 0, 8];
    m.extend_from_slice(&xid.to_be_bytes());
    s.write_all(&m).unwrap();
    let mut before = Vec::new();
    loop {
        let r = read_msg(s);
        if r[1] == 21 {
            return before;
        }
        before.push(r);
    }
}

#[test]
fn a_controller_gone_mid_bundle_changes_nothing() {
    let dir = TempDir::new("cli-faults-bundle");
    let sock = dir.join("sw.ctl");
    let rules = dir.join("rules.txt");
    std::fs::write(&rules, "priority=5,icmp,actions=output:2\n").unwrap();
    let mut child = Command::new(RQVS)
        .args(["switch", "--openflow", "ptcp:0", "--ctl", sock.to_str().unwrap(), "--rules", rules.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    // The ready line names the port.
    let mut seen = String::new();
    let mut byte = [0u8; 1];
    while !seen.contains("rqvs switch: ready") || !seen.ends_with('\n') {
        assert_eq!(err.read(&mut byte).unwrap(), 1, "the switch ended: {seen}");
        seen.push(byte[0] as char);
    }
    let port: u16 = seen
        .split("OpenFlow ptcp:127.0.0.1:")
        .nth(1)
        .unwrap()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap();
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = err.read_to_string(&mut rest);
    });
    let before = ctl(&sock, &["dump-rules"]);

    // Open, add two flows, and go away without a commit.
    let mut a = connect(port);
    a.write_all(&bundle_control(2, 7, 0)).unwrap();
    a.write_all(&bundle_add(3, 7, "priority=9,udp,tp_dst=9,actions=output:2")).unwrap();
    a.write_all(&bundle_add(4, 7, "priority=9,udp,tp_dst=10,actions=drop")).unwrap();
    let replies = barrier(&mut a, 5);
    assert!(replies.iter().all(|r| r[1] != 1), "no errors: {replies:?}");
    drop(a);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(ctl(&sock, &["dump-rules"]), before, "an uncommitted bundle changed the table");

    // The switch serves the next connection; the same bundle committed changes the table (so
    // the check above could fail).
    let mut b = connect(port);
    b.write_all(&bundle_control(2, 7, 0)).unwrap();
    b.write_all(&bundle_add(3, 7, "priority=9,udp,tp_dst=9,actions=output:2")).unwrap();
    b.write_all(&bundle_add(4, 7, "priority=9,udp,tp_dst=10,actions=drop")).unwrap();
    b.write_all(&bundle_control(5, 7, 4)).unwrap();
    let replies = barrier(&mut b, 6);
    assert!(replies.iter().all(|r| r[1] != 1), "no errors: {replies:?}");
    let after = ctl(&sock, &["dump-rules"]);
    assert!(after.contains("tp_dst=9") && after.contains("tp_dst=10"), "{after}");
    drop(b);
    ctl(&sock, &["exit"]);
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(15), "did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
}
