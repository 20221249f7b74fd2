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

const WAIT: Duration = Duration::from_secs(3);

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
    let frame = |id: usize| udp([10, 0, 0, 1], [10, 0, 0, 2], id as u16, (id >> 16) as u16, 60 + id % 7, id as u8);
    let frames: Vec<Vec<u8>> = (0..n).map(frame).collect();
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
    let mut last = None;
    for f in &got {
        let id =
            usize::from(u16::from_be_bytes([f[34], f[35]])) | usize::from(u16::from_be_bytes([f[36], f[37]])) << 16;
        assert!(id < n && *f == frame(id), "a frame that was never sent (id {id})");
        assert!(last.is_none_or(|l| id > l), "frame {id} after {last:?}: out of order");
        last = Some(id);
    }
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
