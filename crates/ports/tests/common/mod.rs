//! Frames and polling helpers shared by the port tests.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rqvs_ports::{EventHook, EventKind, PortEvent, RxQueue};

/// An Ethernet/IPv4/UDP frame of `len` bytes (at least 42) from flow `(src, dst, sport, dport)`,
/// its payload filled with `fill`. Checksums are not needed at layer 2.
pub fn udp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, len: usize, fill: u8) -> Vec<u8> {
    let len = len.max(42);
    let mut f = vec![fill; len];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[1] = 0;
    ip[2..4].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    ip[4..8].copy_from_slice(&[0, 0, 0x40, 0]);
    ip[8] = 64;
    ip[9] = 17;
    ip[10..12].copy_from_slice(&[0, 0]);
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f[38..40].copy_from_slice(&((len - 34) as u16).to_be_bytes());
    f[40..42].copy_from_slice(&[0, 0]);
    f
}

/// `frame` with an 802.1Q tag (TPID 0x8100, TCI `tci`) after the MAC addresses.
pub fn tagged(frame: &[u8], tci: u16) -> Vec<u8> {
    let mut f = frame[..12].to_vec();
    f.extend_from_slice(&[0x81, 0x00]);
    f.extend_from_slice(&tci.to_be_bytes());
    f.extend_from_slice(&frame[12..]);
    f
}

/// A mixed set of test frames: sizes from 42 to 1514 bytes, one VLAN-tagged, one non-IP.
pub fn mixed_frames() -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    for (i, len) in [42usize, 60, 64, 128, 512, 1000, 1514].into_iter().enumerate() {
        frames.push(udp([10, 0, 0, 1], [10, 0, 0, 2], 1000 + i as u16, 53, len, i as u8));
    }
    frames.push(tagged(&udp([10, 0, 0, 3], [10, 0, 0, 4], 7, 8, 100, 0xab), 0x2005));
    let mut other = udp([0; 4], [0; 4], 0, 0, 60, 0x5a);
    other[12..14].copy_from_slice(&[0x88, 0xb5]); // local experimental ethertype
    frames.push(other);
    frames
}

/// Polls `rx` until `n` frames have arrived or `timeout` passes; returns copies of them.
pub fn collect(rx: &mut RxQueue, n: usize, timeout: Duration) -> Vec<Vec<u8>> {
    let start = Instant::now();
    let mut got = Vec::new();
    while got.len() < n && start.elapsed() < timeout {
        let batch = rx.recv();
        if batch.is_empty() {
            drop(batch);
            std::thread::sleep(Duration::from_micros(200));
            continue;
        }
        got.extend(batch.iter().map(|f| f.to_vec()));
    }
    got
}

/// Polls `rx` for `period` and returns whatever arrives (to check that nothing does).
pub fn quiet(rx: &mut RxQueue, period: Duration) -> Vec<Vec<u8>> {
    collect(rx, usize::MAX, period)
}

/// An event hook that records events.
pub fn recorder() -> (EventHook, Arc<Mutex<Vec<PortEvent>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = log.clone();
    let hook: EventHook = Arc::new(move |e: &PortEvent| sink.lock().unwrap().push(e.clone()));
    (hook, log)
}

pub fn kinds(log: &Mutex<Vec<PortEvent>>) -> Vec<EventKind> {
    log.lock().unwrap().iter().map(|e| e.kind).collect()
}
