//! `rqvs send`: a capture's frames out of an interface, looping, as fast as one core can or at a
//! set rate — the traffic generator of the switch benchmarks (`rqvs_ports::sender`: an
//! AF_PACKET TX ring whose slots hold the frames; or `--engine xdp`, `rqvs_ports::xdp_sender`:
//! frames made by the kernel from an XDP program, no socket buffer).

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map};

use crate::report::{self, Out};
use crate::Failure;
use rqvs_ports::sender::{SendOptions, Sender};
use rqvs_ports::xdp_sender::XdpSender;

/// How the frames are sent.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// An AF_PACKET TX ring (any interface; its tx counters count the frames).
    Ring,
    /// XDP live frames (`BPF_PROG_TEST_RUN`, Linux 5.18+): no socket buffer per frame. A veth's
    /// peer must have an XDP program or GRO on (`ethtool -K PEER gro on`), or it drops them.
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
        Engine::Xdp => (XdpSender::open(&a.iface, &frames)?.run(&opts, &stop)?, None),
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
