//! `rqvs send`: a capture's frames out of an interface. Its errors name what is wrong; on a veth
//! pair between two namespaces this test creates, the frames arrive as sent and the report counts
//! them (the interface's own counters included). The namespace part needs root and `ip`; skipped
//! otherwise (a failure with `RQVS_REQUIRE_NETNS=1`).

mod common;

use std::process::Command;
use std::time::Duration;

use common::{rqvs, TempDir};
use rqvs_ports::testnet::{self, Netns, RawSocket};

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A capture of `n` distinct 64-byte frames, from `rqvs gen trace`.
fn capture(dir: &TempDir, n: usize) -> std::path::PathBuf {
    let path = dir.join("frames.pcap");
    let rules = concat!(env!("CARGO_MANIFEST_DIR"), "/../experiment/data/acl1_1k_rules.xz");
    let o = rqvs(&[
        "gen",
        "trace",
        "--rules",
        rules,
        "--packets",
        &n.to_string(),
        "--format",
        "pcap",
        "-o",
        path.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    path
}

/// Namespaces `TAGA` (veth `s0`) and `TAGB` (its peer `r0`), both ends running.
fn pair(tag: &str) -> (Netns, Netns) {
    let a = Netns::new(&format!("{tag}A")).unwrap();
    let b = Netns::new(&format!("{tag}B")).unwrap();
    a.veth("s0", &b, "r0", 1).unwrap();
    a.wait_running("s0", Duration::from_secs(3)).unwrap();
    b.wait_running("r0", Duration::from_secs(3)).unwrap();
    (a, b)
}

#[test]
fn send_refuses_bad_input_by_name() {
    let dir = TempDir::new("send-errors");
    let o = rqvs(&["send", "--iface", "lo", "--pcap", "/nonexistent/x.pcap"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("/nonexistent/x.pcap: cannot read"), "{}", stderr(&o));
    let bad = dir.join("bad.pcap");
    std::fs::write(&bad, b"not a capture at all").unwrap();
    let o = rqvs(&["send", "--iface", "lo", "--pcap", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).starts_with(&format!("rqvs: error: {}", bad.display())), "{}", stderr(&o));
    for (flag, value, want) in [
        ("--pps", "0", "expected frames per second > 0, found '0'"),
        ("--pps", "fast", "expected frames per second > 0, found 'fast'"),
        ("--duration", "0", "expected seconds in (0, 86400], found '0'"),
    ] {
        let o = rqvs(&["send", "--iface", "lo", "--pcap", "x.pcap", flag, value]);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}");
        assert!(stderr(&o).contains(want), "{flag} {value}: {}", stderr(&o));
    }
    let pcap = capture(&dir, 10);
    let o = rqvs(&["send", "--iface", "nosuch-if0", "--pcap", pcap.to_str().unwrap(), "--count", "1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("nosuch-if0"), "{}", stderr(&o));
}

#[test]
fn send_delivers_and_counts_every_frame() {
    if !testnet::available("send_delivers_and_counts_every_frame") {
        return;
    }
    let dir = TempDir::new("send-veth");
    let pcap = capture(&dir, 50);
    let (a, b) = pair("send");
    let r0 = b.run(|| RawSocket::open("r0")).unwrap().unwrap();
    let json = dir.join("send.json");
    let o = Command::new("ip")
        .args(["netns", "exec", a.name(), env!("CARGO_BIN_EXE_rqvs"), "send", "--iface", "s0", "--pcap"])
        .args([pcap.to_str().unwrap(), "--count", "150", "--pps", "20000", "--json", json.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let line = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(line.starts_with("s0: 150 frames ("), "{line}");
    assert!(line.contains("(50 distinct,") && line.contains("interface tx_packets 150 tx_dropped 0"), "{line}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        (report["command"].as_str(), report["frames"].as_u64(), report["refused"].as_u64()),
        (Some("send"), Some(150), Some(0))
    );
    assert_eq!(report["if_tx_packets"].as_u64(), Some(150));
    let got = r0.drain(Duration::from_millis(300)).unwrap();
    let bytes = std::fs::read(&pcap).unwrap();
    let frames = rqvs_ports::pcap::parse_frames("frames.pcap", &bytes).unwrap();
    let want: Vec<Vec<u8>> = frames.iter().cycle().take(150).cloned().collect();
    assert_eq!(got, want, "the capture three times over, in order, byte for byte");
}

#[test]
fn sink_names_a_missing_interface() {
    let o = rqvs(&["sink", "--iface", "nosuch-if0", "--duration", "1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("nosuch-if0"), "{}", stderr(&o));
}

/// `rqvs sink` on r0 counts what `rqvs send --engine xdp` sent from s0 (paced, so nothing is
/// lost on the way), and reports it in its line and its JSON.
#[test]
fn sink_counts_what_the_xdp_engine_sends() {
    if !testnet::available("sink_counts_what_the_xdp_engine_sends") {
        return;
    }
    let dir = TempDir::new("sink-veth");
    let pcap = capture(&dir, 50);
    let (a, b) = pair("sink");
    let json = dir.join("sink.json");
    let sink = Command::new("ip")
        .args(["netns", "exec", b.name(), env!("CARGO_BIN_EXE_rqvs"), "sink", "--iface", "r0", "--duration", "3"])
        .args(["--json", json.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let o = Command::new("ip")
        .args(["netns", "exec", a.name(), env!("CARGO_BIN_EXE_rqvs"), "send", "--iface", "s0", "--engine", "xdp"])
        .args(["--pcap", pcap.to_str().unwrap(), "--count", "1500", "--pps", "50000"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).is_empty(), "no warning: a veth keeps the sender's program attached: {}", stderr(&o));
    let s = sink.wait_with_output().unwrap();
    assert!(s.status.success(), "{}", stderr(&s));
    let line = String::from_utf8_lossy(&s.stdout).into_owned();
    assert!(line.starts_with("r0: 1500 frames received in "), "{line}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!((report["command"].as_str(), report["frames"].as_u64()), (Some("sink"), Some(1500)));
}
