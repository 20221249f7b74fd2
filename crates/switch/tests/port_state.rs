//! Ports as an operator sees them, on veths (root).
//!
//! Link state: the link watcher (`crates/switch/src/link.rs`) follows carrier
//! and admin state, every change reaches an OpenFlow connection as PORT_STATUS, PORT_DESC and
//! `show` say LIVE/LINK_DOWN (`up`/`down`/`gone`), PORT_DESC carries the interface's real MAC
//! and speed, and a port whose interface is deleted and created again is re-attached: frames
//! flow through it again, and the switch's accounting still balances at the end.
//!
//! Counters: after `pmd-stats-clear` the ports' counters start again with the PMDs' (so
//! `outputs = tx + tx_dropped` holds), bytes are counted with packets (ports, PORT_STATS, JSON),
//! PORT_STATS counts since the start, TABLE stats count lookups and matches.
//!
//! Skipped without root and `ip` (a failure with `RQVS_REQUIRE_NETNS=1`).

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rqvs_datapath::DesignKind;
use rqvs_flow::formats::ofctl;
use rqvs_openflow::message::{bitmap_of, Hello, SwitchConfig as OfConfig};
use rqvs_openflow::multipart::{MultipartReplyBody, MultipartRequest, MultipartRequestBody};
use rqvs_openflow::port::Port;
use rqvs_openflow::{decode, encode, negotiate, Message, OFP13};
use rqvs_ports::testnet::{self, RawSocket};
use rqvs_switch::openflow::{Channel, ChannelConfig, OpenflowListener};
use rqvs_switch::{Control, PortSource, Switch, SwitchConfig};

mod common;
use common::{Topo, PORTS};

const WAIT: Duration = Duration::from_secs(5);

/// A passive-listener client on the codec that asked for asynchronous messages.
struct Of {
    s: TcpStream,
    v: u8,
    buf: Vec<u8>,
    xid: u32,
}

impl Of {
    fn connect(addr: std::net::SocketAddr) -> Of {
        let s = TcpStream::connect(addr).unwrap();
        let mut of = Of { s, v: 0, buf: Vec::new(), xid: 1 };
        of.write(&encode(OFP13, 1, &Message::Hello(Hello::with_versions(&[OFP13]))).unwrap());
        let (h, m) = of.recv(WAIT).expect("HELLO");
        let Message::Hello(hello) = m else { panic!("expected HELLO, got {m:?}") };
        of.v = negotiate(bitmap_of(&[OFP13]), h.version, &hello).unwrap();
        of.send(&Message::SetConfig(OfConfig { flags: 0, miss_send_len: 0xffff }));
        of
    }

    fn write(&mut self, b: &[u8]) {
        self.s.write_all(b).unwrap();
    }

    fn send(&mut self, m: &Message) -> u32 {
        self.xid += 1;
        let b = encode(self.v, self.xid, m).unwrap();
        self.write(&b);
        self.xid
    }

    fn recv(&mut self, timeout: Duration) -> Option<(rqvs_openflow::Header, Message)> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.buf.len() >= 8 {
                let len = usize::from(u16::from_be_bytes([self.buf[2], self.buf[3]]));
                if self.buf.len() >= len {
                    let msg: Vec<u8> = self.buf.drain(..len).collect();
                    return Some(decode(&msg).unwrap());
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.s.set_read_timeout(Some(left.min(Duration::from_millis(50)))).unwrap();
            let mut chunk = [0u8; 65536];
            match self.s.read(&mut chunk) {
                Ok(0) => panic!("the switch closed the connection"),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => panic!("{e}"),
            }
        }
    }

    /// The next PORT_STATUS of port `no` within `WAIT` (other messages skipped).
    fn port_status(&mut self, no: u32, what: &str) -> Port {
        let deadline = Instant::now() + WAIT;
        loop {
            match self.recv(deadline.saturating_duration_since(Instant::now())) {
                Some((_, Message::PortStatus(ps))) if ps.port.port_no == no => {
                    assert_eq!(ps.reason, 2, "OFPPR_MODIFY");
                    return ps.port;
                }
                Some(_) => {}
                None => panic!("no PORT_STATUS for port {no} within {WAIT:?} ({what})"),
            }
        }
    }

    /// No PORT_STATUS within `quiet`.
    fn no_port_status(&mut self, quiet: Duration) {
        while let Some((_, m)) = self.recv(quiet) {
            assert!(!matches!(m, Message::PortStatus(_)), "an unexpected PORT_STATUS: {m:?}");
        }
    }

    fn port_desc(&mut self) -> Vec<Port> {
        match self.multipart(MultipartRequestBody::PortDesc) {
            MultipartReplyBody::PortDesc(p) => p,
            b => panic!("expected PORT_DESC, got {b:?}"),
        }
    }

    fn multipart(&mut self, body: MultipartRequestBody) -> MultipartReplyBody {
        let xid = self.send(&Message::MultipartRequest(MultipartRequest { flags: 0, body }));
        let deadline = Instant::now() + WAIT;
        loop {
            match self.recv(deadline.saturating_duration_since(Instant::now())) {
                Some((h, Message::MultipartReply(r))) if h.xid == xid => return r.body,
                Some(_) => {}
                None => panic!("no multipart reply"),
            }
        }
    }
}

const OFPPS_LINK_DOWN: u32 = 1;
const OFPPS_LIVE: u32 = 4;

fn mac_of(ns: &testnet::Netns, ifname: &str) -> [u8; 6] {
    let out = std::process::Command::new("ip").args(["-n", ns.name(), "-o", "link", "show", ifname]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mac = text.split("link/ether ").nth(1).unwrap().split_whitespace().next().unwrap();
    let b: Vec<u8> = mac.split(':').map(|x| u8::from_str_radix(x, 16).unwrap()).collect();
    b.try_into().unwrap()
}

fn link_of(control: &Control, port: usize) -> String {
    control.show().ports[port - 1].link.clone()
}

fn frame(seq: u8) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 3, 0x02, 0, 0, 0, 0, 1, 0x88, 0xb5];
    f.extend_from_slice(&[seq; 46]);
    f
}

/// Sends frames from host 1 until one arrives at host 3 (through `in_port=1,actions=output:3`).
fn crosses(from: &RawSocket, to: &RawSocket) -> bool {
    for seq in 0..20u8 {
        from.send(&frame(seq)).unwrap();
        while let Some(got) = to.recv(Duration::from_millis(100)).unwrap() {
            if got == frame(seq) {
                return true;
            }
        }
    }
    false
}

#[test]
fn port_status_link_down_and_reattach_after_delete() {
    if !testnet::available("port_status_link_down_and_reattach_after_delete") {
        return;
    }
    let topo = Topo::new("link", 1);
    let rules = ofctl::parse_flows("flows", "in_port=1,actions=output:3\nin_port=3,actions=output:1\n").unwrap();
    let ports: Vec<PortSource> =
        (1..=PORTS).map(|p| PortSource::Spec(format!("p{p}:afpacket").parse().unwrap())).collect();
    let cfg = SwitchConfig::new(ports, rules, DesignKind::Orig);
    let sw = topo.sw.run(move || Switch::start(cfg)).unwrap().unwrap();
    let control: Arc<Control> = sw.control();
    let mut ch = ChannelConfig::new();
    let l = OpenflowListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = l.local_addr().unwrap();
    ch.listen = Some(l);
    let channel = Channel::start(&control, ch).unwrap();
    let mut of = Of::connect(addr);
    of.no_port_status(Duration::from_millis(300));

    // PORT_DESC: every port LIVE, with the interface's own MAC and the veth's 10 Gb/s.
    let desc = of.port_desc();
    assert_eq!(desc.len(), 3);
    for (i, p) in desc.iter().enumerate() {
        assert_eq!(p.state, OFPPS_LIVE, "port {}", i + 1);
        assert_eq!(p.hw_addr, mac_of(&topo.sw, &format!("p{}", i + 1)), "port {}: the real MAC", i + 1);
        let eth = p.ethernet.unwrap();
        assert_eq!(eth.curr_speed, 10_000_000, "port {}: a veth's 10 Gb/s in kbps", i + 1);
        assert_eq!(eth.curr, 1 << 6, "OFPPF_10GB_FD");
    }

    // The host's side goes down: the switch's port loses carrier.
    topo.hosts[0].ip(&["link", "set", "e1", "down"]).unwrap();
    assert_eq!(of.port_status(1, "host side down").state, OFPPS_LINK_DOWN);
    assert_eq!(of.port_desc()[0].state, OFPPS_LINK_DOWN);
    assert_eq!(link_of(&control, 1), "down");
    topo.hosts[0].ip(&["link", "set", "e1", "up"]).unwrap();
    assert_eq!(of.port_status(1, "host side up").state, OFPPS_LIVE);
    assert_eq!(link_of(&control, 1), "up");

    // The switch's own side, administratively.
    topo.sw.ip(&["link", "set", "p2", "down"]).unwrap();
    assert_eq!(of.port_status(2, "switch side down").state, OFPPS_LINK_DOWN);
    topo.sw.ip(&["link", "set", "p2", "up"]).unwrap();
    assert_eq!(of.port_status(2, "switch side up").state, OFPPS_LIVE);

    // Frames cross 1 -> 3; then p3 is deleted (with its peer) and created again.
    let h1 = topo.host_socket(1);
    assert!(crosses(&h1, &topo.host_socket(3)), "1 -> 3 before the delete");
    topo.sw.ip(&["link", "del", "p3"]).unwrap();
    assert_eq!(of.port_status(3, "deleted").state, OFPPS_LINK_DOWN);
    assert_eq!(link_of(&control, 3), "gone");
    topo.sw.veth("p3", &topo.hosts[2], "e3", 1).unwrap();
    topo.sw.wait_running("p3", Duration::from_secs(3)).unwrap();
    topo.hosts[2].wait_running("e3", Duration::from_secs(3)).unwrap();
    let back = of.port_status(3, "re-created");
    assert_eq!(back.state, OFPPS_LIVE);
    assert_eq!(back.hw_addr, mac_of(&topo.sw, "p3"), "the new interface's MAC");
    assert_eq!(link_of(&control, 3), "up");
    assert!(crosses(&h1, &topo.host_socket(3)), "1 -> 3 after the interface came back");

    control.request_stop();
    channel.join();
    let report = sw.stop().unwrap();
    assert!(report.balanced(), "{}", report.format());
    assert!(report.ports[2].tx_packets >= 2, "port 3 sent before and after: {}", report.format());
}

/// Waits until port `port` has sent `n` frames (the switch's own view).
fn wait_tx(control: &Control, port: usize, n: u64) {
    let t0 = Instant::now();
    while control.show_with(control.pmd_totals()).ports[port - 1].tx_packets < n {
        assert!(t0.elapsed() < WAIT, "port {port} did not send {n} frames");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn counters_add_up_after_clear_with_bytes_port_and_table_stats() {
    if !testnet::available("counters_add_up_after_clear_with_bytes_port_and_table_stats") {
        return;
    }
    let topo = Topo::new("ctrs", 1);
    // Port 1's frames go to 2; port 3's meet no flow (a table miss).
    let rules = ofctl::parse_flows("flows", "in_port=1,actions=output:2\n").unwrap();
    let ports: Vec<PortSource> =
        (1..=PORTS).map(|p| PortSource::Spec(format!("p{p}:afpacket").parse().unwrap())).collect();
    let cfg = SwitchConfig::new(ports, rules, DesignKind::Orig);
    let sw = topo.sw.run(move || Switch::start(cfg)).unwrap().unwrap();
    let control: Arc<Control> = sw.control();
    let mut ch = ChannelConfig::new();
    let l = OpenflowListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = l.local_addr().unwrap();
    ch.listen = Some(l);
    let channel = Channel::start(&control, ch).unwrap();
    let mut of = Of::connect(addr);
    let (h1, h3) = (topo.host_socket(1), topo.host_socket(3));
    let len = frame(0).len() as u64;
    for seq in 0..40 {
        h1.send(&frame(seq)).unwrap();
    }
    wait_tx(&control, 2, 40);
    control.pmd_stats_clear();
    for seq in 0..30 {
        h1.send(&frame(seq)).unwrap();
    }
    for seq in 0..5 {
        h3.send(&frame(seq)).unwrap();
    }
    wait_tx(&control, 2, 70);
    let t0 = Instant::now();
    let show = loop {
        let s = control.show();
        // The port's receive counter moves when the frames are read, the PMD's drop counter
        // when their batch is done: wait for both.
        if (s.ports[2].rx_packets == 5 && s.ports[2].frames.dropped == 5) || t0.elapsed() > WAIT {
            break s;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Since the clear: 30 in at 1 and out at 2, 5 in at 3 and dropped; and it adds up.
    assert!(show.balanced(), "{}", show.format());
    assert_eq!((show.ports[0].rx_packets, show.ports[0].rx_bytes), (30, 30 * len), "{}", show.format());
    assert_eq!((show.ports[1].tx_packets, show.ports[1].tx_bytes), (30, 30 * len), "{}", show.format());
    assert_eq!((show.ports[2].rx_packets, show.ports[2].frames.dropped), (5, 5), "{}", show.format());
    assert_eq!(show.outputs, 30);
    assert!(show.format().contains("every frame accounted for"), "{}", show.format());
    // PORT_STATS: since the start, with bytes.
    let MultipartReplyBody::PortStats(ps) = of.multipart(MultipartRequestBody::PortStats { port_no: 0xffff_ffff })
    else {
        panic!("expected PORT_STATS")
    };
    assert_eq!((ps[0].rx_packets, ps[0].rx_bytes), (70, 70 * len));
    assert_eq!((ps[1].tx_packets, ps[1].tx_bytes), (70, 70 * len));
    // TABLE: 75 lookups, the 5 from port 3 missed.
    let MultipartReplyBody::Table(t) = of.multipart(MultipartRequestBody::Table) else { panic!("expected TABLE") };
    assert_eq!((t[0].lookup_count, t[0].matched_count), (75, 70));
    control.request_stop();
    channel.join();
    let report = sw.stop().unwrap();
    assert!(report.balanced(), "{}", report.format());
    assert_eq!((report.ports[0].rx_packets, report.ports[0].rx_bytes), (70, 70 * len));
}

/// A fast-failover group follows the ports' link state: port 1's frames go to group 1, whose
/// first bucket watches port 2 and second port 3. While port 2 has carrier frames leave there;
/// when its peer goes down they leave on port 3; when it comes back, on port 2 again — in ORIG
/// (megaflows revalidated on the liveness change) and CFLOWS (the translation cache emptied).
#[test]
fn fast_failover_group_follows_link_state() {
    use rqvs_flow::group::{Bucket, Group, GroupType};
    use rqvs_flow::Actions;
    use rqvs_ofproto::record::FlowOp;
    use rqvs_openflow::group::GroupModCommand;
    if !testnet::available("fast_failover_group_follows_link_state") {
        return;
    }
    for (tag, design) in [("ffo", DesignKind::Orig), ("ffc", DesignKind::Cflows)] {
        let topo = Topo::new(tag, 1);
        let ports: Vec<PortSource> =
            (1..=PORTS).map(|p| PortSource::Spec(format!("p{p}:afpacket").parse().unwrap())).collect();
        let cfg = SwitchConfig::new(ports, Vec::new(), design);
        let sw = topo.sw.run(move || Switch::start(cfg)).unwrap().unwrap();
        let control: Arc<Control> = sw.control();
        let bucket = |p: u32| Bucket { watch_port: p, ..Bucket::new(Actions::output(p)) };
        let group = Group { id: 1, kind: GroupType::FastFailover, buckets: vec![bucket(2), bucket(3)] };
        let rule = ofctl::parse_flows("flows", "in_port=1,actions=group:1\n").unwrap().remove(0);
        control.apply_ops(&[FlowOp::Group(GroupModCommand::Add, group), FlowOp::add(rule)]).unwrap();
        let (h1, h2, h3) = (topo.host_socket(1), topo.host_socket(2), topo.host_socket(3));
        // Sends frames from host 1 until one arrives at `to` (within the wait).
        let reaches = |to: &RawSocket| {
            let t0 = Instant::now();
            let mut seq = 0u8;
            while t0.elapsed() < WAIT {
                seq = seq.wrapping_add(1);
                h1.send(&frame(seq)).unwrap();
                while let Some(got) = to.recv(Duration::from_millis(50)).unwrap() {
                    if got == frame(seq) {
                        return true;
                    }
                }
            }
            false
        };
        assert!(reaches(&h2), "{design:?}: port 2 live: its bucket");
        topo.hosts[1].ip(&["link", "set", "e2", "down"]).unwrap();
        assert!(reaches(&h3), "{design:?}: port 2 down: the next bucket, port 3");
        topo.hosts[1].ip(&["link", "set", "e2", "up"]).unwrap();
        topo.hosts[1].wait_running("e2", Duration::from_secs(3)).unwrap();
        let h2 = topo.host_socket(2);
        assert!(reaches(&h2), "{design:?}: port 2 back: its bucket again");
        let report = sw.stop().unwrap();
        assert!(report.balanced(), "{}", report.format());
    }
}
