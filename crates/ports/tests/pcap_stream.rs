//! `pcap-in` over inputs that are streamed, not read whole (`rqvs_ports::pcap_stream`): a FIFO
//! delivers the same frames, split over queues by flow hash, as a file does; a capture damaged
//! mid-stream ends the input with one error event naming the packet and byte; a FIFO cannot be
//! looped (said once); `/dev/zero` is an error at open (not a capture), never a read without end.

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use rqvs_ports::{flow_hash, open, EventKind, PcapConfig, PortConfig, PortSpec, RxQueue};

struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("rqvs-ports-stream-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A classic little-endian microsecond pcap of `frames`.
fn capture(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&65535u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        b.extend_from_slice(&(i as u32).to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(f);
    }
    b
}

/// A FIFO at `dir/name` with a thread writing `bytes` into it (then closing it).
fn fifo(dir: &Dir, name: &str, bytes: Vec<u8>) -> (PathBuf, std::thread::JoinHandle<()>) {
    let path = dir.0.join(name);
    let ok = Command::new("mkfifo").arg(&path).status().unwrap();
    assert!(ok.success(), "mkfifo");
    let p = path.clone();
    let writer = std::thread::spawn(move || {
        let mut f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        // The reader may stop early (a damaged capture): a broken pipe is fine.
        let _ = f.write_all(&bytes);
    });
    (path, writer)
}

/// Every frame of `rx` until it has finished (at most 10 s).
fn drain(rx: &mut RxQueue) -> Vec<Vec<u8>> {
    let t0 = Instant::now();
    let mut got = Vec::new();
    while !rx.is_finished() {
        assert!(t0.elapsed() < Duration::from_secs(10), "the queue did not finish");
        got.extend(collect(rx, usize::MAX, Duration::from_millis(5)));
    }
    got
}

fn many_frames() -> Vec<Vec<u8>> {
    // Enough to need several batches and several reads of the window.
    let mut frames = mixed_frames();
    for i in 0..5000u32 {
        frames.push(udp(
            [10, 0, (i >> 8) as u8, i as u8],
            [10, 1, 0, 1],
            (i % 300) as u16,
            80,
            60 + (i % 200) as usize,
            i as u8,
        ));
    }
    frames
}

#[test]
fn a_fifo_is_streamed_in_order_over_queues() {
    let dir = Dir::new("fifo");
    let frames = many_frames();
    let (path, writer) = fifo(&dir, "in.pcap", capture(&frames));
    let (hook, log) = recorder();
    let spec: PortSpec = format!("pcap-in:{}", path.display()).parse().unwrap();
    let cfg = PortConfig { hook: Some(hook), ..PortConfig::with_queues(3) };
    let mut port = open(&spec, &cfg).unwrap();
    let mut per_queue: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 3];
    let t0 = Instant::now();
    while (0..3).any(|q| !port.rx(q).unwrap().is_finished()) {
        assert!(t0.elapsed() < Duration::from_secs(10), "not finished");
        for (q, got) in per_queue.iter_mut().enumerate() {
            got.extend(collect(port.rx(q).unwrap(), usize::MAX, Duration::from_millis(2)));
        }
    }
    writer.join().unwrap();
    for (q, got) in per_queue.iter().enumerate() {
        let want: Vec<Vec<u8>> = frames.iter().filter(|f| flow_hash(f) as usize % 3 == q).cloned().collect();
        assert_eq!(got.len(), want.len(), "queue {q}");
        assert!(got == &want, "queue {q}: the frames of its flows, in file order");
    }
    assert_eq!(kinds(&log), vec![EventKind::EndOfInput]);
    assert_eq!(port.handle().stats().total.rx_packets, frames.len() as u64);
}

#[test]
fn a_damaged_stream_ends_with_one_error() {
    let dir = Dir::new("damaged");
    let frames = many_frames();
    let mut bytes = capture(&frames);
    // Cut inside the last record.
    bytes.truncate(bytes.len() - 10);
    let (path, writer) = fifo(&dir, "cut.pcap", bytes);
    let (hook, log) = recorder();
    let spec: PortSpec = format!("pcap-in:{}", path.display()).parse().unwrap();
    let mut port = open(&spec, &PortConfig { hook: Some(hook), ..PortConfig::with_queues(1) }).unwrap();
    let got = drain(port.rx(0).unwrap());
    writer.join().unwrap();
    assert_eq!(got, frames[..frames.len() - 1], "every whole record before the damage");
    assert_eq!(kinds(&log), vec![EventKind::Error, EventKind::EndOfInput]);
    let msg = log.lock().unwrap()[0].to_string();
    let want = format!("packet {} (byte ", frames.len());
    assert!(msg.contains(&want) && msg.contains("the file ends inside a record"), "{msg}");
}

#[test]
fn a_fifo_is_read_once_whatever_the_loops() {
    let dir = Dir::new("loops");
    let frames = mixed_frames();
    let (path, writer) = fifo(&dir, "loop.pcap", capture(&frames));
    let (hook, log) = recorder();
    let spec: PortSpec = format!("pcap-in:{}", path.display()).parse().unwrap();
    let cfg = PortConfig { hook: Some(hook), pcap: PcapConfig { loops: 3 }, ..PortConfig::with_queues(1) };
    let mut port = open(&spec, &cfg).unwrap();
    let got = drain(port.rx(0).unwrap());
    writer.join().unwrap();
    assert_eq!(got, frames);
    assert_eq!(kinds(&log), vec![EventKind::Error, EventKind::EndOfInput]);
    assert!(log.lock().unwrap()[0].to_string().contains("cannot seek to loop over it again; read once"));
}

#[test]
fn dev_zero_is_not_a_capture() {
    let t0 = Instant::now();
    let e = open(&"pcap-in:/dev/zero".parse().unwrap(), &PortConfig::with_queues(1)).err().unwrap().to_string();
    assert!(e.starts_with("/dev/zero: not a pcap or pcapng capture"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(2));
}
