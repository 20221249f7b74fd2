//! A rough forwarding rate on veths (needs root): namespaces h1 → sw → h2, a sender thread in h1
//! blasting 64-byte frames through an `afpacket` port on e1, the two-port forwarder p1 → p2 in
//! sw on the port type given, and a counting sink on e2 in h2. Prints offered, forwarded and
//! delivered rates with the forwarder's accounting.
//!
//! ```sh
//! cargo run --release -p rqvs-ports --example rate -- afxdp 2
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rqvs_ports::testnet::Netns;
use rqvs_ports::{open, PortConfig, PortSpec};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ty = args.first().map(String::as_str).unwrap_or("afpacket").to_string();
    let secs: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(2.0);
    if !rqvs_ports::testnet::available("rate") {
        return;
    }
    let (sw, h1, h2) = (Netns::new("sw").unwrap(), Netns::new("h1").unwrap(), Netns::new("h2").unwrap());
    sw.veth("p1", &h1, "e1", 1).unwrap();
    sw.veth("p2", &h2, "e2", 1).unwrap();
    for (ns, i) in [(&sw, "p1"), (&sw, "p2"), (&h1, "e1"), (&h2, "e2")] {
        ns.wait_running(i, Duration::from_secs(3)).unwrap();
    }
    let open_in = |ns: &Netns, spec: &str| {
        let spec: PortSpec = spec.parse().unwrap();
        ns.run(move || open(&spec, &PortConfig::with_queues(1))).unwrap().unwrap_or_else(|e| panic!("{e}"))
    };
    let (p1, mut rx1, _t1) = open_in(&sw, &format!("p1:{ty}")).split();
    let (p2, _r2, mut tx2) = open_in(&sw, &format!("p2:{ty}")).split();
    let (e1, _r, mut tx_e1) = open_in(&h1, "e1:afpacket").split();
    let (e2, mut rx_e2, _t) = open_in(&h2, "e2:afpacket").split();

    let stop = Arc::new(AtomicBool::new(false));
    let frames: Vec<Vec<u8>> = (0..1024u16)
        .map(|i| {
            let mut f = vec![0u8; 64];
            f[0..12].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[14] = 0x45;
            f[23] = 17;
            f[34..36].copy_from_slice(&i.to_be_bytes());
            f
        })
        .collect();
    let s = stop.clone();
    let sender = std::thread::spawn(move || {
        let tx = &mut tx_e1[0];
        let mut i = 0;
        while !s.load(Ordering::Relaxed) {
            for _ in 0..32 {
                tx.send(&frames[i % frames.len()]);
                i += 1;
            }
            tx.flush();
        }
    });
    let s = stop.clone();
    let sink = std::thread::spawn(move || {
        while !s.load(Ordering::Relaxed) {
            let _ = rx_e2[0].recv();
        }
        for _ in 0..1000 {
            let _ = rx_e2[0].recv();
        }
    });
    let start = Instant::now();
    let (rx, tx) = (&mut rx1[0], &mut tx2[0]);
    while start.elapsed().as_secs_f64() < secs {
        let batch = rx.recv();
        for f in batch.iter() {
            tx.send(f);
        }
        drop(batch);
        tx.flush();
    }
    let elapsed = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap();
    sink.join().unwrap();
    for h in [&p1, &p2, &e1, &e2] {
        h.refresh();
    }
    let (o, i, f, d) = (e1.stats().total, p1.stats().total, p2.stats().total, e2.stats().total);
    let r = |n: u64| n as f64 / elapsed / 1e6;
    println!("port type {ty}, {elapsed:.1} s, 64-byte frames, 1 forwarding thread");
    println!("offered by h1 (afpacket tx):  {:.3} Mpps (dropped at sender {})", r(o.tx_packets), o.tx_dropped);
    println!("received on p1:               {:.3} Mpps, lost in the kernel {:.3} Mpps", r(i.rx_packets), r(i.rx_lost));
    println!("sent on p2:                   {:.3} Mpps, dropped {}", r(f.tx_packets), f.tx_dropped);
    println!("delivered to h2 (afpacket rx): {:.3} Mpps, lost {:.3} Mpps", r(d.rx_packets), r(d.rx_lost));
    println!("accounting p1 rx = p2 tx + dropped: {} = {} + {}", i.rx_packets, f.tx_packets, f.tx_dropped);
}
