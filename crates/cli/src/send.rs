//! `rqvs send`: a capture's frames out of an interface, looping, as fast as one core can or at a
//! set rate — the traffic generator of the switch benchmarks (`rqvs_ports::sender`: an
//! AF_PACKET TX ring whose slots hold the frames; or `--engine xdp`, `rqvs_ports::xdp_sender`:
//! frames made by the kernel from an XDP program, no socket buffer); and `rqvs sink`, the far end
//! that drops every frame at XDP (`rqvs_ports::xdp_sink`), for measuring a sender.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map};

use crate::report::{self, Out};
use crate::Failure;
use rqvs_ports::sender::{SendOptions, Sender};
use rqvs_ports::xdp_sender::XdpSender;
use rqvs_ports::xdp_sink::XdpSink;

/// How the frames are sent.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// An AF_PACKET TX ring (any interface; its tx counters count the frames).
    Ring,
    /// XDP live frames (`BPF_PROG_TEST_RUN`, Linux 5.18+): no socket buffer per frame. A veth's
    /// peer must have an XDP program or GRO on (`ethtool -K PEER gro on`), or it drops them.
    /// While it runs, the sending interface has the engine's program attached in generic mode
    /// (it passes whatever the interface receives).
    Xdp,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The interface to send on (in this network namespace; `ip netns exec NS rqvs send …`).
    #[arg(long)]
    pub iface: String,
    /// The frames: a pcap or pcapng capture (`rqvs gen trace --format pcap`, tcpdump's), sent in
    /// file order and looped.
    #[arg(long)]
    pub pcap: PathBuf,
    /// Frames per second (default: as fast as the kernel takes them).
    #[arg(long, value_parser = parse_pps)]
    pub pps: Option<f64>,
    /// Stop after this many seconds (default: 10, unless --count is given).
    #[arg(long, value_parser = parse_seconds)]
    pub duration: Option<f64>,
    /// Stop after this many frames.
    #[arg(long)]
    pub count: Option<u64>,
    /// Write a JSON report to this file (`-` = stdout).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// How to send: `ring` (default) or `xdp` (see `rqvs_ports::xdp_sender` for what the
    /// receiving side needs).
    #[arg(long, value_enum, default_value = "ring")]
    pub engine: Engine,
}

fn parse_pps(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("expected frames per second > 0, found '{s}'")),
    }
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!("expected seconds in (0, 86400], found '{s}'")),
    }
}

pub fn run(a: &Args) -> Result<(), Failure> {
    let out = Out::new(a.json.as_deref());
    let name = a.pcap.display().to_string();
    let bytes = std::fs::read(&a.pcap).map_err(|e| Failure(format!("{name}: cannot read: {e}")))?;
    let frames = rqvs_ports::pcap::parse_frames(&name, &bytes)?;
    let n = frames.len();
    let duration = match (a.duration, a.count) {
        (Some(d), _) => Some(Duration::from_secs_f64(d)),
        (None, Some(_)) => None,
        (None, None) => Some(Duration::from_secs(10)),
    };
    let opts = SendOptions { pps: a.pps, duration, count: a.count };
    // Ctrl-C / SIGTERM end the run early; the report still comes.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).map_err(|e| Failure(format!("signal handler: {e}")))?;
    }
    let (r, slots) = match a.engine {
        Engine::Ring => {
            let mut sender = Sender::open(&a.iface, frames)?;
            (sender.run(&opts, &stop)?, Some(sender.slots()))
        }
        Engine::Xdp => {
            let mut sender = XdpSender::open(&a.iface, &frames)?;
            if !sender.attached() {
                eprintln!(
                    "{}: warning: the interface would not keep the sender's XDP program attached (it has one of its own?): every system call waits for the kernel's XDP dispatcher, so paced rates above a few thousand frames/s are not reached",
                    a.iface
                );
            }
            (sender.run(&opts, &stop)?, None)
        }
    };
    let counted = |v: Option<u64>| v.map_or("unreadable".to_string(), |v| v.to_string());
    match slots {
        Some(slots) => out.line(format!(
            "{}: {} frames ({} bytes) of {name} ({n} distinct, {slots} ring slots) in {:.3} s: {:.1} Kpps; refused {}; interface tx_packets {} tx_dropped {}",
            a.iface,
            r.frames,
            r.bytes,
            r.seconds,
            r.pps() / 1e3,
            r.refused,
            counted(r.if_tx_packets),
            counted(r.if_tx_dropped),
        )),
        None => out.line(format!(
            "{}: {} frames ({} bytes) of {name} ({n} distinct) made by XDP in {:.3} s: {:.1} Kpps (the receiver's counters say what arrived)",
            a.iface,
            r.frames,
            r.bytes,
            r.seconds,
            r.pps() / 1e3,
        )),
    }
    if let Some(path) = &a.json {
        let mut f = Map::new();
        f.insert("iface".into(), a.iface.clone().into());
        f.insert("pcap".into(), name.into());
        f.insert("distinct_frames".into(), n.into());
        f.insert("engine".into(), format!("{:?}", a.engine).to_lowercase().into());
        f.insert("ring_slots".into(), json!(slots));
        f.insert("pps_asked".into(), json!(a.pps));
        f.insert("frames".into(), r.frames.into());
        f.insert("bytes".into(), r.bytes.into());
        f.insert("refused".into(), r.refused.into());
        f.insert("seconds".into(), json!(r.seconds));
        f.insert("pps".into(), json!(r.pps()));
        f.insert("kicks".into(), r.kicks.into());
        f.insert("if_tx_packets".into(), json!(r.if_tx_packets));
        f.insert("if_tx_dropped".into(), json!(r.if_tx_dropped));
        report::write_json(path, "send", f)?;
    }
    Ok(())
}

#[derive(clap::Args, Debug)]
pub struct SinkArgs {
    /// The interface to receive on (in this network namespace; `ip netns exec NS rqvs sink …`).
    #[arg(long)]
    pub iface: String,
    /// Stop after this many seconds (default: at SIGINT or SIGTERM).
    #[arg(long, value_parser = parse_seconds)]
    pub duration: Option<f64>,
    /// Write a JSON report to this file (`-` = stdout).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// `rqvs sink`: an XDP program that drops every frame on `--iface` (`rqvs_ports::xdp_sink`)
/// while it runs, then what arrived: the interface's `rx_packets` over the run.
pub fn run_sink(a: &SinkArgs) -> Result<(), Failure> {
    let out = Out::new(a.json.as_deref());
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).map_err(|e| Failure(format!("signal handler: {e}")))?;
    }
    let sink = XdpSink::attach(&a.iface)?;
    let start = std::time::Instant::now();
    let rx0 = sink.rx_packets();
    // Standard error, so a script can wait for it before it starts a sender.
    eprintln!("{}: XDP drop program attached", a.iface);
    let end = a.duration.map(Duration::from_secs_f64);
    while !stop.load(Ordering::Relaxed) && end.is_none_or(|d| start.elapsed() < d) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let (rx1, seconds) = (sink.rx_packets(), start.elapsed().as_secs_f64());
    drop(sink);
    let frames = rx0.zip(rx1).map(|(a, b)| b.wrapping_sub(a));
    match frames {
        Some(n) => out.line(format!(
            "{}: {n} frames received in {seconds:.3} s: {:.1} Kpps (dropped by XDP)",
            a.iface,
            n as f64 / seconds / 1e3
        )),
        None => out.line(format!("{}: rx_packets unreadable; {seconds:.3} s", a.iface)),
    }
    if let Some(path) = &a.json {
        let mut f = Map::new();
        f.insert("iface".into(), a.iface.clone().into());
        f.insert("frames".into(), json!(frames));
        f.insert("seconds".into(), json!(seconds));
        f.insert("pps".into(), json!(frames.map(|n| n as f64 / seconds)));
        report::write_json(path, "sink", f)?;
    }
    Ok(())
}
