//! The sender (`rqvs send`'s engine) on a veth pair between two namespaces this test creates:
//! what arrives is what was sent, in order, byte for byte — also when the ring's slots are
//! rewritten with other frames as they come round. Needs root and `ip`; skipped otherwise (a
//! failure with `RQVS_REQUIRE_NETNS=1`).

mod common;

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use common::*;
use rqvs_ports::sender::{ring_slots, SendOptions, Sender};
use rqvs_ports::testnet::{self, Netns, RawSocket};
use rqvs_ports::xdp_sender::XdpSender;
use rqvs_ports::xdp_sink::XdpSink;

const WAIT: Duration = Duration::from_secs(3);

/// Frame `id` of the many-distinct-frames runs: it names itself in its ports.
fn numbered(id: usize) -> Vec<u8> {
    udp([10, 0, 0, 1], [10, 0, 0, 2], id as u16, (id >> 16) as u16, 60 + id % 7, id as u8)
}

/// Every frame of `got` is a [`numbered`] frame below `n`, byte for byte, in increasing order.
fn in_order_uncorrupted(got: &[Vec<u8>], n: usize) {
    let mut last = None;
    for f in got {
        let id =
            usize::from(u16::from_be_bytes([f[34], f[35]])) | usize::from(u16::from_be_bytes([f[36], f[37]])) << 16;
        assert!(id < n && *f == numbered(id), "a frame that was never sent (id {id})");
        assert!(last.is_none_or(|l| id > l), "frame {id} after {last:?}: out of order");
        last = Some(id);
    }
}

/// Namespaces `a` (veth `s0`, the sender) and `b` (its peer `r0`, a raw socket).
fn pair() -> (Netns, Netns) {
    let a = Netns::new("snd").expect("create namespace");
    let b = Netns::new("rcv").expect("create namespace");
    a.veth("s0", &b, "r0", 1).expect("create veth");
    a.wait_running("s0", WAIT).expect("carrier");
    b.wait_running("r0", WAIT).expect("carrier");
    (a, b)
}

#[test]
fn sender_loops_the_frames_in_order_byte_for_byte() {
    if !testnet::available("sender_loops_the_frames_in_order_byte_for_byte") {
        return;
    }
    let (a, b) = pair();
    let r0 = b.run(|| RawSocket::open("r0")).unwrap().unwrap();
    let frames = mixed_frames();
    let sent = frames.clone();
    let mut sender = a.run(move || Sender::open("s0", sent)).unwrap().unwrap();
    // A multiple of the frame count: each slot holds one frame for good.
    assert_eq!(sender.slots() % frames.len(), 0);
    let opts = SendOptions { count: Some(3 * frames.len() as u64), ..SendOptions::default() };
    let report = sender.run(&opts, &AtomicBool::new(false)).unwrap();
    assert_eq!((report.frames, report.refused), (3 * frames.len() as u64, 0), "{report:?}");
    let bytes: u64 = frames.iter().map(|f| f.len() as u64).sum();
    assert_eq!(report.bytes, 3 * bytes);
    let got = r0.drain(Duration::from_millis(200)).unwrap();
    let want: Vec<Vec<u8>> = frames.iter().cycle().take(3 * frames.len()).cloned().collect();
    assert_eq!(got, want, "the frames arrive three times over, in order, byte for byte");
}

#[test]
fn sender_rewrites_slots_without_corrupting_frames() {
    if !testnet::available("sender_rewrites_slots_without_corrupting_frames") {
        return;
    }
    let (a, b) = pair();
    // More distinct frames than a multiple of the ring can hold: slots are rewritten as they
    // come round. Each frame names itself in its ports.
    let n = 70_000usize;
    let frames: Vec<Vec<u8>> = (0..n).map(numbered).collect();
    assert_eq!(ring_slots(n, 2), 16 * 1024);
    let mut sender = a.run(move || Sender::open("s0", frames)).unwrap().unwrap();
    let r0 = b.run(|| RawSocket::open("r0")).unwrap().unwrap();
    let reader = std::thread::spawn(move || r0.drain(Duration::from_millis(500)).unwrap());
    // At a rate a reading raw socket keeps up with on a loaded machine; losses are allowed
    // (counted below), corruption is not.
    let opts = SendOptions { count: Some(n as u64), pps: Some(100_000.0), ..SendOptions::default() };
    let report = sender.run(&opts, &AtomicBool::new(false)).unwrap();
    assert_eq!((report.frames, report.refused), (n as u64, 0), "{report:?}");
    let got = reader.join().unwrap();
    assert!(got.len() > n / 2, "only {} of {n} frames arrived", got.len());
    in_order_uncorrupted(&got, n);
}

/// A paced run longer than the 2 s the kernel gets to hand back its last slots ends cleanly
/// (the grace runs from the run's end, not its start).
#[test]
fn a_long_paced_run_ends_with_its_report() {
    if !testnet::available("a_long_paced_run_ends_with_its_report") {
        return;
    }
    let (a, _b) = pair();
    let frames = mixed_frames();
    let mut sender = a.run(move || Sender::open("s0", frames)).unwrap().unwrap();
    let opts = SendOptions { count: Some(60), pps: Some(25.0), ..SendOptions::default() };
    let report = sender.run(&opts, &AtomicBool::new(false)).unwrap();
    assert_eq!((report.frames, report.refused), (60, 0), "{report:?}");
    assert!(report.seconds > 2.0, "{report:?}");
}

#[test]
fn sender_refuses_what_it_cannot_send() {
    assert!(Sender::open("s0", Vec::new()).unwrap_err().to_string().contains("no frames to send"));
    let huge = vec![0u8; 70_000];
    let e = Sender::open("s0", vec![huge]).unwrap_err().to_string();
    assert!(e.contains("a frame of 70000 bytes"), "{e}");
}

/// GRO on `ifname` in `ns`: what a veth needs on its receiving end to take XDP frames
/// ([`rqvs_ports::xdp_sender`]). `false` when `ethtool` is missing.
fn gro_on(ns: &Netns, ifname: &str) -> bool {
    match std::process::Command::new("ip")
        .args(["netns", "exec", ns.name(), "ethtool", "-K", ifname, "gro", "on"])
        .output()
    {
        Ok(out) if out.status.success() => true,
        Ok(out) => panic!("ethtool -K {ifname} gro on: {}", String::from_utf8_lossy(&out.stderr)),
        Err(_) => false,
    }
}

#[test]
fn xdp_sender_loops_the_frames_in_order_byte_for_byte() {
    if !testnet::available("xdp_sender_loops_the_frames_in_order_byte_for_byte") {
        return;
    }
    let (a, b) = pair();
    if !gro_on(&b, "r0") {
        assert!(std::env::var("RQVS_REQUIRE_NETNS").as_deref() != Ok("1"), "ethtool is required");
        eprintln!("skipped: ethtool is not installed");
        return;
    }
    let r0 = b.run(|| RawSocket::open("r0")).unwrap().unwrap();
    // IPv4 frames only: with all of mixed_frames() the VLAN-tagged or other-ethertype frame
    // arrived one frame late behind the next IPv4 one (the receiving veth's NAPI/GRO path; not
    // narrowed down further — the ring engine's test runs without GRO and keeps the order).
    let frames: Vec<Vec<u8>> = mixed_frames().into_iter().filter(|f| f[12..14] == [0x08, 0x00]).collect();
    assert!(frames.len() >= 7);
    let sent = frames.clone();
    let n = frames.len() as u64;
    let report = a
        .run(move || {
            let mut s = XdpSender::open("s0", &sent)?;
            s.run(&SendOptions { count: Some(3 * n), ..SendOptions::default() }, &AtomicBool::new(false))
        })
        .unwrap()
        .unwrap();
    assert_eq!(report.frames, 3 * n, "{report:?}");
    let bytes: u64 = frames.iter().map(|f| f.len() as u64).sum();
    assert_eq!(report.bytes, 3 * bytes);
    let got = r0.drain(Duration::from_millis(200)).unwrap();
    let want: Vec<Vec<u8>> = frames.iter().cycle().take(3 * frames.len()).cloned().collect();
    let first = got.iter().zip(&want).position(|(g, w)| g != w);
    assert!(
        got.len() == want.len() && first.is_none(),
        "the frames arrive three times over, in order, byte for byte: {} of {}; first difference at {first:?}: {:02x?} against {:02x?}",
        got.len(),
        want.len(),
        first.map(|i| &got[i]),
        first.map(|i| &want[i])
    );

    // Many distinct frames, at a rate a raw socket keeps up with: none corrupted or reordered.
    let n = 20_000usize;
    let frames: Vec<Vec<u8>> = (0..n).map(numbered).collect();
    let reader = std::thread::spawn(move || r0.drain(Duration::from_millis(500)).unwrap());
    let report = a
        .run(move || {
            let mut s = XdpSender::open("s0", &frames)?;
            let opts = SendOptions { count: Some(n as u64), pps: Some(100_000.0), ..SendOptions::default() };
            s.run(&opts, &AtomicBool::new(false))
        })
        .unwrap()
        .unwrap();
    assert_eq!(report.frames, n as u64);
    // The rate asked for, give or take: calls that each waited for the kernel's XDP dispatcher
    // (before the program stayed attached) held this run to ~9 Kpps.
    assert!(report.pps() > 50_000.0, "paced at 100 Kpps, sent at {:.0} pps", report.pps());
    let got = reader.join().unwrap();
    assert!(got.len() > n / 2, "only {} of {n} frames arrived", got.len());
    in_order_uncorrupted(&got, n);
}

/// While the XDP engine is open its program is attached to the sending interface, which still
/// receives every frame sent to it, unchanged.
#[test]
fn xdp_sender_leaves_what_its_interface_receives_alone() {
    if !testnet::available("xdp_sender_leaves_what_its_interface_receives_alone") {
        return;
    }
    let (a, b) = pair();
    let s0 = a.run(|| RawSocket::open("s0")).unwrap().unwrap();
    let r0 = b.run(|| RawSocket::open("r0")).unwrap().unwrap();
    let sender = a.run(|| XdpSender::open("s0", &[numbered(1)])).unwrap().unwrap();
    assert!(sender.attached(), "a veth takes a generic-mode program");
    let frames = mixed_frames();
    for f in &frames {
        r0.send(f).unwrap();
    }
    let got = s0.drain(Duration::from_millis(200)).unwrap();
    assert_eq!(got, frames, "what r0 sent, as s0 received it while the XDP sender was open");
    drop(sender);
}

/// `rqvs sink`'s program: every frame reaches r0's XDP program and is counted there, none
/// reaches the stack (a raw socket on r0 sees nothing); detached when the sink is dropped.
#[test]
fn sink_counts_and_drops_every_frame() {
    if !testnet::available("sink_counts_and_drops_every_frame") {
        return;
    }
    let (a, b) = pair();
    let r0 = b.run(|| RawSocket::open("r0")).unwrap().unwrap();
    let sink = b.run(|| XdpSink::attach("r0")).unwrap().unwrap();
    let before = b.run(|| sink.rx_packets()).unwrap().expect("r0 rx_packets");
    let frames = mixed_frames();
    let sent = frames.clone();
    let report = a
        .run(move || {
            let mut s = Sender::open("s0", sent)?;
            s.run(&SendOptions { count: Some(1000), ..SendOptions::default() }, &AtomicBool::new(false))
        })
        .unwrap()
        .unwrap();
    assert_eq!(report.frames, 1000);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(b.run(|| sink.rx_packets()).unwrap().map(|n| n - before), Some(1000), "r0 counted every frame");
    assert!(r0.drain(Duration::from_millis(100)).unwrap().is_empty(), "the sink dropped them all at XDP");
    // A second program on the same interface is refused, with the interface in the message.
    let e = b.run(|| XdpSink::attach("r0")).unwrap().unwrap_err().to_string();
    assert!(e.contains("r0") && e.contains("attaching"), "{e}");
    drop(sink);
    // Detached: frames reach the stack again.
    let one = frames[0].clone();
    a.run(move || RawSocket::open("s0").unwrap().send(&one).unwrap()).unwrap();
    assert_eq!(r0.drain(Duration::from_millis(200)).unwrap(), [frames[0].clone()]);
}

#[test]
fn xdp_sender_refuses_what_it_cannot_send() {
    assert!(XdpSender::open("s0", &[]).unwrap_err().to_string().contains("no frames to send"));
    let e = XdpSender::open("s0", &[vec![0u8; 3001]]).unwrap_err().to_string();
    assert!(e.contains("frame 1 is 3001 bytes"), "{e}");
    let e = XdpSender::open("s0", &[vec![0u8; 60], vec![0u8; 10]]).unwrap_err().to_string();
    assert!(e.contains("frame 2 is 10 bytes"), "{e}");
}
