//! Ports on real interfaces: veth pairs between namespaces each test creates for itself.
//!
//! Topology: namespace `sw` holds the ports under test `p1`, `p2`, ...; namespace `hN` holds the
//! peer `eN` of `pN`, where a plain packet socket injects and captures frames. Needs root and
//! `ip`; skipped otherwise (a failure with `RQVS_REQUIRE_NETNS=1`).

mod common;

use std::time::{Duration, Instant};

use common::*;
use rqvs_ports::testnet::{self, Netns, RawSocket};
use rqvs_ports::{open, EventKind, LinkState, Port, PortConfig, PortSpec, QueueStats, XdpMode};

const WAIT: Duration = Duration::from_secs(3);

/// `sw` with ports p1..pN, host namespaces h1..hN with e1..eN; removed on drop.
struct Topo {
    sw: Netns,
    hosts: Vec<Netns>,
}

impl Topo {
    fn new(ports: usize, queues: usize) -> Topo {
        let sw = Netns::new("sw").expect("create namespace");
        let hosts: Vec<Netns> = (1..=ports).map(|i| Netns::new(&format!("h{i}")).expect("create namespace")).collect();
        for (i, h) in hosts.iter().enumerate() {
            let (p, e) = (format!("p{}", i + 1), format!("e{}", i + 1));
            sw.veth(&p, h, &e, queues).expect("create veth");
            sw.wait_running(&p, WAIT).expect("carrier");
            h.wait_running(&e, WAIT).expect("carrier");
        }
        Topo { sw, hosts }
    }

    fn open(&self, spec: &str, cfg: &PortConfig) -> Port {
        let spec: PortSpec = spec.parse().unwrap();
        let cfg = cfg.clone();
        self.sw.run(move || open(&spec, &cfg)).unwrap().unwrap_or_else(|e| panic!("{e}"))
    }

    /// A raw socket on `eN` in `hN` (1-based).
    fn host(&self, n: usize) -> RawSocket {
        let e = format!("e{n}");
        self.hosts[n - 1].run(move || RawSocket::open(&e)).unwrap().unwrap()
    }
}

fn bytes(frames: &[Vec<u8>]) -> u64 {
    frames.iter().map(|f| f.len() as u64).sum()
}

fn receive_exact(ty: &str) {
    receive_exact_with(ty, &PortConfig::with_queues(1));
}

/// `--rx-mode latency`: the same frames arrive, byte for byte (VLAN tags put back), without the
/// ring.
fn receive_exact_latency(ty: &str) {
    let mut cfg = PortConfig::with_queues(1);
    cfg.afpacket.rx_mode = rqvs_ports::RxMode::Latency;
    receive_exact_with(ty, &cfg);
}

fn receive_exact_with(ty: &str, cfg: &PortConfig) {
    let topo = Topo::new(1, 1);
    let mut port = topo.open(&format!("p1:{ty}"), cfg);
    let h1 = topo.host(1);
    let frames = mixed_frames();
    for f in &frames {
        h1.send(f).unwrap();
    }
    let rx = port.rx(0).unwrap();
    let got = collect(rx, frames.len(), WAIT);
    assert_eq!(got, frames, "frames arrive byte for byte, VLAN tag included, in order");
    assert!(quiet(rx, Duration::from_millis(50)).is_empty(), "nothing else arrives");
    port.handle().refresh();
    let s = port.handle().stats();
    let want = QueueStats { rx_packets: frames.len() as u64, rx_bytes: bytes(&frames), ..QueueStats::default() };
    assert_eq!(s.total, want);
    assert_eq!(s.queues, vec![want]);
    assert_eq!(s.link, LinkState::Up);
}

fn transmit_exact(ty: &str) {
    let topo = Topo::new(1, 1);
    let (hook, log) = recorder();
    let mut port = topo.open(&format!("p1:{ty}"), &PortConfig { hook: Some(hook), ..PortConfig::with_queues(1) });
    let h1 = topo.host(1);
    let frames = mixed_frames();
    let tx = port.tx(0).unwrap();
    for f in &frames {
        assert!(tx.send(f));
    }
    tx.flush();
    let got = h1.drain(Duration::from_millis(200)).unwrap();
    assert_eq!(got, frames, "what leaves is what was sent, in order");
    // Own transmissions are not received.
    assert!(quiet(port.rx(0).unwrap(), Duration::from_millis(50)).is_empty());
    // A frame longer than the MTU is refused and counted; the next one still goes.
    let tx = port.tx(0).unwrap();
    let long = udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 1600, 0);
    tx.send(&long);
    tx.send(&frames[0]);
    tx.flush();
    assert_eq!(h1.drain(Duration::from_millis(200)).unwrap(), vec![frames[0].clone()]);
    let s = port.handle().stats().total;
    assert_eq!(s.tx_packets, frames.len() as u64 + 1);
    assert_eq!(s.tx_bytes, bytes(&frames) + frames[0].len() as u64);
    assert_eq!(s.tx_dropped, 1);
    assert_eq!((s.rx_packets, s.rx_lost, s.rx_errors), (0, 0, 0));
    assert!(kinds(&log).iter().all(|k| *k == EventKind::Error), "{:?}", log.lock().unwrap());
}

fn fanout_spreads_flows(ty: &str) {
    let queues = 2;
    let topo = Topo::new(1, queues);
    let mut cfg = PortConfig::with_queues(queues);
    // On a veth, only driver-mode XDP sees the receive queue the sender chose (see afxdp's docs).
    cfg.afxdp.mode = XdpMode::Native;
    let mut port = topo.open(&format!("p1:{ty}"), &cfg);
    let h1 = topo.host(1);
    // 64 flows, 4 frames each, interleaved; the payload names the flow and the frame.
    let (flows, per_flow) = (64u16, 4u8);
    let mut sent = Vec::new();
    for k in 0..per_flow {
        for flow in 0..flows {
            let mut f = udp([10, 1, 0, 1], [10, 2, 0, 1], 1000 + flow, 2000 + 3 * flow, 80, k);
            f[42..44].copy_from_slice(&flow.to_be_bytes());
            sent.push(f);
        }
    }
    for f in &sent {
        h1.send(f).unwrap();
    }
    let mut per_queue: Vec<Vec<Vec<u8>>> = vec![Vec::new(); queues];
    let start = Instant::now();
    while per_queue.iter().map(Vec::len).sum::<usize>() < sent.len() && start.elapsed() < WAIT {
        for (q, got) in per_queue.iter_mut().enumerate() {
            got.extend(port.rx(q).unwrap().recv().iter().map(|f| f.to_vec()));
        }
    }
    let total: usize = per_queue.iter().map(Vec::len).sum();
    assert_eq!(total, sent.len(), "every frame arrives exactly once");
    assert!(
        per_queue.iter().all(|q| !q.is_empty()),
        "both queues get flows: {:?}",
        per_queue.iter().map(Vec::len).collect::<Vec<_>>()
    );
    for flow in 0..flows {
        let on: Vec<usize> =
            (0..queues).filter(|&q| per_queue[q].iter().any(|f| f[42..44] == flow.to_be_bytes())).collect();
        assert_eq!(on.len(), 1, "flow {flow} stays on one queue");
        let order: Vec<u8> =
            per_queue[on[0]].iter().filter(|f| f[42..44] == flow.to_be_bytes()).map(|f| f[50]).collect();
        assert_eq!(order, (0..per_flow).collect::<Vec<_>>(), "flow {flow} keeps its order");
    }
    let mut all: Vec<Vec<u8>> = per_queue.concat();
    let mut want = sent.clone();
    all.sort();
    want.sort();
    assert_eq!(all, want);
    port.handle().refresh();
    let s = port.handle().stats();
    for (q, got) in per_queue.iter().enumerate() {
        assert_eq!(s.queues[q].rx_packets, got.len() as u64);
        assert_eq!(s.queues[q].rx_lost, 0);
    }
}

/// A small ring flooded while nobody polls: every frame is received or counted lost, and the
/// ring works again afterwards (blocks and chunks are recycled).
fn overflow_counts_lost(ty: &str) {
    let topo = Topo::new(1, 1);
    let mut cfg = PortConfig::with_queues(1);
    cfg.afpacket.block_size = 4096;
    cfg.afpacket.blocks = 2;
    cfg.afxdp.rx_frames = 64;
    let mut port = topo.open(&format!("p1:{ty}"), &cfg);
    let h1 = topo.host(1);
    let burst = 500usize; // below the kernel's backlog (1000), so no drop happens before the port
    let mut sent = 0;
    for round in 0..3 {
        for i in 0..burst {
            h1.send(&udp([10, 0, 0, 1], [10, 0, 0, 2], i as u16, round, 100, 0)).unwrap();
        }
        sent += burst as u64;
        std::thread::sleep(Duration::from_millis(20));
        let rx = port.rx(0).unwrap();
        let got = quiet(rx, Duration::from_millis(100));
        port.handle().refresh();
        let s = port.handle().stats().total;
        assert_eq!(s.rx_packets + s.rx_lost, sent, "round {round}: every frame received or counted lost");
        assert!(s.rx_lost > 0 && !got.is_empty(), "round {round}: the ring overflowed and recovered");
        let mut distinct = got.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), got.len(), "round {round}: no frame is delivered twice");
        assert_eq!(s.rx_errors, 0);
    }
    // Paced below the ring's size, nothing more is lost.
    let lost = port.handle().stats().total.rx_lost;
    let mut got = 0;
    for i in 0..400u16 {
        h1.send(&udp([10, 0, 0, 1], [10, 0, 0, 2], i, 9, 100, 0)).unwrap();
        if i % 16 == 15 {
            got += collect(port.rx(0).unwrap(), 16, WAIT).len();
        }
    }
    port.handle().refresh();
    assert_eq!((got, port.handle().stats().total.rx_lost), (400, lost));
}

/// Link down, up, deleted: each reported once; the port keeps counting and the other port keeps
/// working.
fn link_events(ty: &str) {
    let topo = Topo::new(2, 1);
    let (hook, log) = recorder();
    let cfg = PortConfig { hook: Some(hook), ..PortConfig::with_queues(1) };
    let mut p1 = topo.open(&format!("p1:{ty}"), &cfg);
    let mut p2 = topo.open(&format!("p2:{ty}"), &PortConfig::with_queues(1));
    let h = p1.handle().clone();
    assert_eq!(h.refresh(), LinkState::Up);

    topo.hosts[0].ip(&["link", "set", "e1", "down"]).unwrap();
    // The peer going down takes the carrier away; the kernel publishes it within a second.
    let start = Instant::now();
    while h.refresh() != LinkState::Down && start.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(h.refresh(), LinkState::Down);
    topo.hosts[0].ip(&["link", "set", "e1", "up"]).unwrap();
    topo.sw.wait_running("p1", WAIT).unwrap();
    assert_eq!(h.refresh(), LinkState::Up);

    // Still receives after coming back.
    let h1 = topo.host(1);
    let f = udp([10, 0, 0, 1], [10, 0, 0, 2], 5, 6, 64, 1);
    h1.send(&f).unwrap();
    assert_eq!(collect(p1.rx(0).unwrap(), 1, WAIT), vec![f.clone()]);

    // Deleted mid-run: polled and sent to without a crash; the receive queue's own upkeep
    // notices (no refresh called).
    topo.sw.ip(&["link", "del", "p1"]).unwrap();
    let start = Instant::now();
    while p1.handle().link() != LinkState::Gone && start.elapsed() < WAIT {
        assert!(p1.rx(0).unwrap().recv().is_empty());
    }
    assert_eq!(p1.handle().link(), LinkState::Gone);
    for _ in 0..10 {
        assert!(!p1.tx(0).unwrap().send(&f));
    }
    p1.tx(0).unwrap().flush();
    assert_eq!(h.refresh(), LinkState::Gone);
    assert_eq!(kinds(&log), vec![EventKind::LinkDown, EventKind::LinkUp, EventKind::Gone]);
    let s = p1.handle().stats();
    assert_eq!((s.total.rx_packets, s.total.tx_packets, s.total.tx_dropped, s.events), (1, 0, 10, 3));
    assert!(log.lock().unwrap()[2].to_string().starts_with("port p1: interface gone"));

    // The other port is unaffected.
    let h2 = topo.host(2);
    let tx = p2.tx(0).unwrap();
    tx.send(&f);
    tx.flush();
    assert_eq!(h2.drain(Duration::from_millis(200)).unwrap(), vec![f.clone()]);
    h2.send(&f).unwrap();
    assert_eq!(collect(p2.rx(0).unwrap(), 1, WAIT), vec![f]);
}

/// The smallest switch: everything received on p1 leaves on p2. Frames come from a thread in h1
/// while the loop runs; every frame is accounted for and arrives in h2 byte for byte.
fn forwarder(ty: &str) {
    let topo = Topo::new(2, 1);
    let p1 = topo.open(&format!("p1:{ty}"), &PortConfig::with_queues(1));
    let p2 = topo.open(&format!("p2:{ty}"), &PortConfig::with_queues(1));
    let (h1_handle, mut rx1, _tx1) = p1.split();
    let (h2_handle, _rx2, mut tx2) = p2.split();
    let (rx, tx) = (&mut rx1[0], &mut tx2[0]);
    let h2 = topo.host(2);
    let n = 2000usize;
    let frames: Vec<Vec<u8>> =
        (0..n).map(|i| udp([10, 0, 0, 1], [10, 0, 0, 2], i as u16, 9, 60 + i % 200, i as u8)).collect();
    let to_send = frames.clone();
    let sender = topo.hosts[0]
        .spawn(move || {
            let s = RawSocket::open("e1").unwrap();
            for (i, f) in to_send.iter().enumerate() {
                s.send(f).unwrap();
                if i % 64 == 63 {
                    // Stay below the forwarder's capacity: this test checks exactness, not speed.
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        })
        .unwrap();
    let start = Instant::now();
    let mut forwarded = 0;
    while forwarded < n && start.elapsed() < WAIT * 2 {
        let batch = rx.recv();
        for f in batch.iter() {
            tx.send(f);
        }
        forwarded += batch.len();
        drop(batch);
        tx.flush();
    }
    sender.join().unwrap().unwrap();
    let got = h2.drain(Duration::from_millis(300)).unwrap();
    h1_handle.refresh();
    let (s1, s2) = (h1_handle.stats().total, h2_handle.stats().total);
    assert_eq!(s1.rx_packets + s1.rx_lost + s1.rx_errors, n as u64, "every frame offered is seen or counted lost");
    assert_eq!(s1.rx_packets, s2.tx_packets + s2.tx_dropped, "rx = tx + dropped");
    assert_eq!(s1.rx_lost, 0, "nothing lost below capacity");
    assert_eq!(s2.tx_dropped, 0);
    assert_eq!(got.len() as u64, s2.tx_packets);
    assert_eq!(got, frames, "forwarded byte for byte, in order");
}

/// Dropping an afxdp port detaches its program: the interface can be opened again, and an
/// afpacket port on it sees frames again.
fn afxdp_detaches_on_drop(_: &str) {
    let topo = Topo::new(1, 1);
    let h1 = topo.host(1);
    let f = udp([10, 0, 0, 1], [10, 0, 0, 2], 5, 6, 64, 1);
    for round in 0..2 {
        let mut port = topo.open("p1:afxdp", &PortConfig::with_queues(1));
        h1.send(&f).unwrap();
        assert_eq!(collect(port.rx(0).unwrap(), 1, WAIT), vec![f.clone()], "round {round}");
        let (handle, rx, tx) = port.split();
        drop(rx);
        drop(handle);
        drop(tx);
    }
    let mut port = topo.open("p1:afpacket", &PortConfig::with_queues(1));
    h1.send(&f).unwrap();
    assert_eq!(collect(port.rx(0).unwrap(), 1, WAIT), vec![f]);
    // The kernel releases a closed bpf_link's attachment asynchronously on some kernels: wait
    // for it (2 s at most) rather than read the link state once.
    let attached = || {
        let out =
            std::process::Command::new("ip").args(["-n", topo.sw.name(), "-d", "link", "show", "p1"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).contains("xdp")
    };
    let deadline = Instant::now() + Duration::from_secs(2);
    while attached() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!attached(), "no XDP program left attached");
}

/// Opening errors are one line and leave nothing behind.
fn afxdp_refuses_clearly(_: &str) {
    let topo = Topo::new(1, 2);
    let spec: PortSpec = "p1:afxdp".parse().unwrap();
    let one = topo.sw.run(move || open(&spec, &PortConfig::with_queues(1)).err().unwrap().to_string()).unwrap();
    assert!(one.starts_with("port p1: the interface has 2 receive queues but the port was opened with 1"), "{one}");
    let _held = topo.open("p1:afxdp", &PortConfig::with_queues(2));
    let spec: PortSpec = "p1:afxdp".parse().unwrap();
    let busy = topo.sw.run(move || open(&spec, &PortConfig::with_queues(2)).err().unwrap().to_string()).unwrap();
    assert!(busy.starts_with("port p1: busy: ") && !busy.contains('\n'), "{busy}");
    let spec: PortSpec = "nosuch0:afxdp".parse().unwrap();
    let missing = topo.sw.run(move || open(&spec, &PortConfig::default()).err().unwrap().to_string()).unwrap();
    assert_eq!(missing, "port nosuch0: no such interface in this network namespace");
}

/// The test kit itself: IPv6 off inside (and only inside), namespace gone after drop, also when
/// the test panics.
#[test]
fn testnet_namespaces_are_private_and_removed() {
    if !testnet::available("testnet_namespaces_are_private_and_removed") {
        return;
    }
    let sysctl = "/proc/sys/net/ipv6/conf/all/disable_ipv6";
    let host_before = std::fs::read_to_string(sysctl).ok();
    let ns = Netns::new("kit").unwrap();
    let name = ns.name().to_string();
    let inside = std::process::Command::new("ip").args(["netns", "exec", &name, "cat", sysctl]).output().unwrap();
    if host_before.is_some() {
        assert_eq!(String::from_utf8_lossy(&inside.stdout).trim(), "1");
    }
    assert_eq!(std::fs::read_to_string(sysctl).ok(), host_before, "the host's setting is untouched");
    let listed = || {
        String::from_utf8_lossy(&std::process::Command::new("ip").args(["netns", "list"]).output().unwrap().stdout)
            .into_owned()
    };
    assert!(listed().contains(&name));
    let panicked = std::panic::catch_unwind(move || {
        let _ns = ns;
        panic!("a failing test");
    });
    assert!(panicked.is_err());
    assert!(!listed().contains(&name), "removed during unwinding");
}

macro_rules! netns_tests {
    ($ty:literal, $($name:ident => $body:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                if testnet::available(stringify!($name)) {
                    $body($ty);
                }
            }
        )*
    };
}

netns_tests!("afpacket",
    afpacket_receives_exact_bytes => receive_exact,
    afpacket_latency_mode_receives_exact_bytes => receive_exact_latency,
    afpacket_transmits_exact_bytes => transmit_exact,
    afpacket_fanout_spreads_flows => fanout_spreads_flows,
    afpacket_link_events => link_events,
    afpacket_forwarder_accounts_every_frame => forwarder,
    afpacket_overflow_is_counted_lost => overflow_counts_lost,
);

netns_tests!("afxdp",
    afxdp_receives_exact_bytes => receive_exact,
    afxdp_transmits_exact_bytes => transmit_exact,
    afxdp_spreads_flows_over_queues => fanout_spreads_flows,
    afxdp_link_events => link_events,
    afxdp_forwarder_accounts_every_frame => forwarder,
    afxdp_overflow_is_counted_lost => overflow_counts_lost,
);

netns_tests!("afxdp",
    afxdp_program_is_detached_on_drop => afxdp_detaches_on_drop,
    afxdp_opening_errors_are_one_line => afxdp_refuses_clearly,
);
