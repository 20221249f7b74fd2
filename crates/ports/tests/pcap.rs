//! Offline ports and port specs: no root needed.

mod common;

use std::path::PathBuf;

use common::*;
use rqvs_ports::pcap::parse_frames;
use rqvs_ports::{flow_hash, open, EventKind, PcapConfig, PortConfig, PortSpec, PortType, QueueStats, MIN_HEADROOM};

/// A file in the temporary directory, removed on drop.
struct Temp(PathBuf);

impl Temp {
    fn new(name: &str) -> Temp {
        Temp(std::env::temp_dir().join(format!("rqvs-ports-{}-{name}", std::process::id())))
    }
}

impl std::ops::Deref for Temp {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Writes `frames` through a `pcap-out` port and returns the file.
fn write_capture(name: &str, frames: &[Vec<u8>]) -> Temp {
    let path = Temp::new(name);
    let spec: PortSpec = format!("pcap-out:{}", path.display()).parse().unwrap();
    let mut port = open(&spec, &PortConfig::with_queues(1)).unwrap();
    let tx = port.tx(0).unwrap();
    for f in frames {
        assert!(tx.send(f));
    }
    drop(port);
    path
}

#[test]
fn pcap_out_then_in_round_trips_every_byte() {
    let frames = mixed_frames();
    let path = write_capture("round.pcap", &frames);
    assert_eq!(parse_frames("round.pcap", &std::fs::read(&*path).unwrap()).unwrap(), frames);

    let (hook, log) = recorder();
    let spec: PortSpec = format!("pcap-in:{}", path.display()).parse().unwrap();
    let cfg = PortConfig { hook: Some(hook), pcap: PcapConfig { loops: 2 }, ..PortConfig::with_queues(1) };
    let mut port = open(&spec, &cfg).unwrap();
    let rx = port.rx(0).unwrap();
    let got = collect(rx, usize::MAX, std::time::Duration::from_millis(20));
    assert_eq!(got, [frames.clone(), frames.clone()].concat());
    assert!(rx.is_finished());
    assert_eq!(kinds(&log), vec![EventKind::EndOfInput]);
    // Its transmit side has nowhere to send: counted as dropped.
    assert!(!port.tx(0).unwrap().send(&frames[0]));
    let s = port.handle().stats();
    let n = 2 * frames.len() as u64;
    let want = QueueStats {
        rx_packets: n,
        rx_bytes: 2 * frames.iter().map(|f| f.len() as u64).sum::<u64>(),
        tx_dropped: 1,
        ..QueueStats::default()
    };
    assert_eq!(s.total, want);
    assert_eq!(s.events, 1);
}

#[test]
fn in_memory_frames_behave_like_a_capture() {
    let frames = mixed_frames();
    let mut port = rqvs_ports::open_frames("builtin", &frames, &PortConfig::with_queues(1));
    assert_eq!(collect(port.rx(0).unwrap(), usize::MAX, std::time::Duration::from_millis(10)), frames);
    assert_eq!(port.handle().spec().to_string(), "pcap-in:builtin");
}

#[test]
fn frames_are_rewritable_in_place_with_headroom() {
    let frames = vec![tagged(&udp([1, 2, 3, 4], [5, 6, 7, 8], 1, 2, 60, 7), 0x0064)];
    let path = write_capture("rewrite.pcap", &frames);
    let mut port = open(&format!("pcap-in:{}", path.display()).parse().unwrap(), &PortConfig::with_queues(1)).unwrap();
    let mut batch = port.rx(0).unwrap().recv();
    assert_eq!(batch.len(), 1);
    let mut f = batch.frame(0).unwrap();
    assert!(f.headroom() >= MIN_HEADROOM);
    assert!(f.remove(12, 4), "strip_vlan");
    assert_eq!(f.data(), &udp([1, 2, 3, 4], [5, 6, 7, 8], 1, 2, 60, 7)[..]);
    f.data_mut()[0] = 0xee;
    assert_eq!(batch.get(0).unwrap()[0], 0xee);
    drop(batch);
    // The file's frames are untouched by rewrites.
    assert!(port.rx(0).unwrap().recv().is_empty());
}

#[test]
fn pcap_in_splits_flows_over_queues_by_flow_hash() {
    let mut frames = Vec::new();
    for k in 0..3u8 {
        for flow in 0..40u16 {
            frames.push(udp([10, 0, 0, 1], [10, 0, 0, 2], flow, 80, 64, k));
        }
    }
    let path = write_capture("split.pcap", &frames);
    let mut port = open(&format!("pcap-in:{}", path.display()).parse().unwrap(), &PortConfig::with_queues(3)).unwrap();
    let mut all = Vec::new();
    for q in 0..3 {
        let got = collect(port.rx(q).unwrap(), usize::MAX, std::time::Duration::from_millis(10));
        assert!(!got.is_empty(), "queue {q} gets flows");
        assert!(got.iter().all(|f| flow_hash(f) as usize % 3 == q));
        all.extend(got);
    }
    all.sort();
    frames.sort();
    assert_eq!(all, frames);
}

#[test]
fn flow_hash_is_symmetric_and_never_panics() {
    let a = udp([10, 0, 0, 1], [10, 0, 0, 2], 1234, 80, 64, 0);
    let b = udp([10, 0, 0, 2], [10, 0, 0, 1], 80, 1234, 64, 0);
    assert_eq!(flow_hash(&a), flow_hash(&b));
    assert_ne!(flow_hash(&a), flow_hash(&udp([10, 0, 0, 1], [10, 0, 0, 2], 1235, 80, 64, 0)));
    assert_eq!(flow_hash(&tagged(&a, 5)), flow_hash(&a));
    for len in 0..a.len() {
        flow_hash(&a[..len]);
    }
}

#[test]
fn bad_captures_are_one_line_errors() {
    let path = Temp::new("bad.pcap");
    std::fs::write(&*path, b"hello world, not a capture").unwrap();
    let e = open(&format!("pcap-in:{}", path.display()).parse().unwrap(), &PortConfig::default()).err().unwrap();
    let msg = e.to_string();
    assert!(msg.contains("not a pcap or pcapng capture") && !msg.contains('\n'), "{msg}");

    let good = std::fs::read(&*write_capture("cut.pcap", &mixed_frames())).unwrap();
    let e = parse_frames("cut.pcap", &good[..good.len() - 5]).unwrap_err().to_string();
    assert!(e.starts_with("cut.pcap: packet 9 (byte ") && e.ends_with("the file ends inside a record"), "{e}");

    let missing = open(&"pcap-in:/nonexistent/x.pcap".parse().unwrap(), &PortConfig::default()).err().unwrap();
    assert!(missing.to_string().starts_with("/nonexistent/x.pcap: cannot read:"), "{missing}");
    let unwritable = open(&"pcap-out:/nonexistent/x.pcap".parse().unwrap(), &PortConfig::default()).err().unwrap();
    assert!(unwritable.to_string().starts_with("/nonexistent/x.pcap: cannot create:"), "{unwritable}");
}

#[test]
fn port_specs_parse_and_refuse_clearly() {
    let p = |s: &str| s.parse::<PortSpec>();
    assert_eq!(p("p1").unwrap(), PortSpec { name: "p1".into(), port_type: PortType::AfPacket });
    assert_eq!(p("p1:afxdp").unwrap().port_type, PortType::AfXdp);
    assert_eq!(p("br0:tap").unwrap(), PortSpec { name: "br0".into(), port_type: PortType::Tap });
    assert_eq!(p("br0:tap").unwrap().to_string(), "br0:tap");
    assert_eq!(p("eth0.100:afpacket").unwrap().name, "eth0.100");
    assert_eq!(p("pcap-in:a:b.pcap").unwrap().port_type, PortType::PcapIn("a:b.pcap".into()));
    assert_eq!(p("pcap-out:o.pcap").unwrap().to_string(), "pcap-out:o.pcap");
    assert_eq!(p("p2").unwrap().to_string(), "p2:afpacket");
    for bad in ["", "p1:dpdk", "averyveryverylongname", "a/b", "pcap-in:", "p1:afxdp:x", ":afxdp"] {
        let e = p(bad).unwrap_err().to_string();
        assert!(e.starts_with(&format!("port '{bad}'")) && !e.contains('\n'), "{bad}: {e}");
    }
}

#[test]
fn unknown_interface_is_a_one_line_error() {
    if !rqvs_ports::is_root() {
        eprintln!("skipping unknown_interface_is_a_one_line_error: not root (opening a packet socket needs it)");
        return;
    }
    let e = open(&"rqvs-no-such0".parse().unwrap(), &PortConfig::default()).err().unwrap();
    assert_eq!(e.to_string(), "port rqvs-no-such0: no such interface in this network namespace");
}
