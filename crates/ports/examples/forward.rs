//! A two-port forwarder: everything received on the first port leaves on the second, with
//! exact accounting at the end.
//!
//! ```sh
//! cargo run --release -p rqvs-ports --example forward -- pcap-in:in.pcap pcap-out:out.pcap
//! ip netns exec sw cargo run --release -p rqvs-ports --example forward -- p1 p2:afxdp --seconds 5
//! ```
//! It runs until a `pcap-in` port has delivered everything, or for `--seconds` (default 10).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rqvs_ports::{open, EventHook, PortConfig, PortSpec};

fn main() {
    if let Err(e) = run() {
        eprintln!("forward: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut specs, mut seconds) = (Vec::new(), 10.0f64);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--seconds" {
            let v = it.next().ok_or("--seconds needs a value")?;
            seconds = v.parse().map_err(|_| format!("--seconds: '{v}' is not a number"))?;
        } else {
            specs.push(a.parse::<PortSpec>().map_err(|e| e.to_string())?);
        }
    }
    let [from, to] = &specs[..] else { return Err("usage: forward IN_PORT OUT_PORT [--seconds S]".into()) };
    let hook: EventHook = Arc::new(|e| eprintln!("{e}"));
    let cfg = PortConfig { hook: Some(hook), ..PortConfig::with_queues(1) };
    let (h_in, mut rx, _) = open(from, &cfg).map_err(|e| e.to_string())?.split();
    let (h_out, _, mut tx) = open(to, &cfg).map_err(|e| e.to_string())?.split();
    let (rx, tx) = (&mut rx[0], &mut tx[0]);

    let start = Instant::now();
    let limit = Duration::from_secs_f64(seconds.max(0.0));
    while !rx.is_finished() && start.elapsed() < limit {
        let batch = rx.recv();
        for frame in batch.iter() {
            tx.send(frame);
        }
        drop(batch);
        tx.flush();
    }
    let secs = start.elapsed().as_secs_f64();
    h_in.refresh();
    h_out.refresh();
    let (i, o) = (h_in.stats().total, h_out.stats().total);
    println!(
        "{from}: rx {} frames ({} bytes), lost in the kernel {}, errors {}",
        i.rx_packets, i.rx_bytes, i.rx_lost, i.rx_errors
    );
    println!("{to}: tx {} frames ({} bytes), dropped {}", o.tx_packets, o.tx_bytes, o.tx_dropped);
    let balanced = i.rx_packets == o.tx_packets + o.tx_dropped;
    println!(
        "rx = tx + dropped: {} = {} + {} ({})",
        i.rx_packets,
        o.tx_packets,
        o.tx_dropped,
        if balanced { "ok" } else { "MISMATCH" }
    );
    println!("{:.0} frames/s over {secs:.2} s", i.rx_packets as f64 / secs.max(1e-9));
    if balanced {
        Ok(())
    } else {
        Err("frames unaccounted for".into())
    }
}
