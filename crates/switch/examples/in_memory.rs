//! A switch in memory: 10,000 frames on an in-memory input port, a rule sending TCP to port 2
//! and everything else to port 3, two tap ports counting what they receive; then the report,
//! in which every frame is accounted for. No privileges, no interfaces.
//!
//! `cargo run --release -p rqvs-switch --example in_memory`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rqvs_datapath::DesignKind;
use rqvs_flow::frame::build_frame;
use rqvs_flow::{formats, FlowKey};
use rqvs_switch::{PortSource, Switch, SwitchConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rules = formats::parse_rules(
        "flows.txt",
        "priority=10,tcp,actions=output:2\n\
         priority=1,ip,actions=output:3\n",
    )?;
    let frames: Vec<Vec<u8>> = (0..10_000u32)
        .map(|i| {
            build_frame(&FlowKey::ipv4(0x0a00_0001 + i % 50, 0x0a00_0100, if i % 4 == 0 { 17 } else { 6 }, 1024, 80))
        })
        .collect();
    let (tcp, other) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let tap = |n: &Arc<AtomicU64>| {
        let n = n.clone();
        Arc::new(move |_: &[u8]| {
            n.fetch_add(1, Ordering::Relaxed);
        }) as rqvs_ports::FrameTap
    };
    let ports = vec![
        PortSource::Frames { name: "in".into(), frames },
        PortSource::Tap { name: "tcp".into(), tap: tap(&tcp) },
        PortSource::Tap { name: "other".into(), tap: tap(&other) },
    ];
    let switch = Switch::start(SwitchConfig::new(ports, rules, DesignKind::Orig))?;
    let t = Instant::now();
    while !switch.is_finished() && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let report = switch.stop()?;
    for p in &report.ports {
        println!("port {} {:10} rx {:6} tx {:6}", p.port, p.name, p.rx_packets, p.tx_packets);
    }
    let (tcp, other) = (tcp.load(Ordering::Relaxed), other.load(Ordering::Relaxed));
    println!("tap tcp {tcp}, tap other {other}");
    assert_eq!((tcp, other), (7500, 2500));
    Ok(())
}
