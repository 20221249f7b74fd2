//! The OpenFlow channel's controller side, on veths between private namespaces (root; skipped
//! otherwise, a failure with `RQVS_REQUIRE_NETNS=1`), with an OpenFlow peer written here on
//! the codec (loopback TCP in the test's own namespace):
//!
//! - PACKET_IN: the reason (NO_MATCH for a table-miss flow, ACTION otherwise), cookie, table,
//!   buffer_id, total_len, in_port, and the frame whole and as the actions before `controller`
//!   left it; who gets them (a passive connection only after SET_CONFIG, not a slave, a new
//!   master demotes the old one); 1.3 and 1.4;
//! - PACKET_OUT: to a port, flood, `TABLE` (classified with its in_port, after the rewrites
//!   before it), `NORMAL`, `controller` (reason PACKET_OUT in 1.4, ACTION in 1.3); a BARRIER
//!   waits for them; the errors of bad ones, nothing sent, the switch unharmed;
//! - `--controller`: packet-ins without asking, the inactivity probe closing a silent
//!   connection, reconnection backoff 1 s doubling to the maximum, reconnection after the
//!   controller restarts;
//! - fail modes without a controller: secure keeps the flows and forwards nothing else,
//!   standalone fails open (flows gone, MAC learning) and recovers when a controller is
//!   admitted.
//!
//! Every test checks that frame accounting balances at the end.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rqvs_datapath::DesignKind;
use rqvs_flow::formats::ofctl;
use rqvs_flow::{Action, Actions, FlowKey};
use rqvs_openflow::flow_mod::{
    FlowMod, FlowModCommand, PacketOut, OFPR_ACTION, OFPR_NO_MATCH, OFPR_PACKET_OUT, OFP_NO_BUFFER,
};
use rqvs_openflow::message::{bitmap_of, Hello, Role, SwitchConfig as OfConfig};
use rqvs_openflow::{decode, encode, negotiate, Header, Message, OfError, OFP13, OFP14};
use rqvs_ports::testnet::{self, RawSocket};
use rqvs_switch::openflow::{Channel, ChannelConfig, FailMode, OpenflowListener};
use rqvs_switch::{Control, FinalReport, PortSource, Switch, SwitchConfig};

mod common;
use common::{Topo, PORTS};

const QUIET: Duration = Duration::from_millis(300);
const WAIT: Duration = Duration::from_secs(5);
/// `OFPP_CONTROLLER` as OpenFlow 1.3 numbers it.
const OF_CONTROLLER: u32 = 0xffff_fffd;

/// An OpenFlow peer (a controller, or a client of the passive listener) on the codec.
struct Of {
    s: TcpStream,
    v: u8,
    buf: Vec<u8>,
    xid: u32,
    /// Answer the switch's ECHO_REQUESTs (a live controller).
    echo: bool,
}

impl Of {
    /// HELLO offering `versions`, the switch's HELLO, the negotiated version.
    fn new(s: TcpStream, versions: &[u8]) -> Of {
        s.set_nodelay(true).unwrap();
        let mut of = Of { s, v: 0, buf: Vec::new(), xid: 100, echo: true };
        let top = *versions.iter().max().unwrap();
        of.write(&encode(top, 1, &Message::Hello(Hello::with_versions(versions))).unwrap());
        let (h, m) = of.recv(WAIT).expect("the switch's HELLO");
        let Message::Hello(hello) = m else { panic!("expected HELLO, got {m:?}") };
        of.v = negotiate(bitmap_of(versions), h.version, &hello).expect("a common version");
        of
    }

    fn connect(addr: SocketAddr, versions: &[u8]) -> Of {
        Of::new(TcpStream::connect(addr).unwrap(), versions)
    }

    fn write(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).unwrap();
    }

    fn send(&mut self, m: &Message) -> u32 {
        self.xid += 1;
        let bytes = encode(self.v, self.xid, m).unwrap();
        self.write(&bytes);
        self.xid
    }

    /// The next message within `timeout` (`None`: none; panics when the switch closes).
    fn recv(&mut self, timeout: Duration) -> Option<(Header, Message)> {
        self.try_recv(timeout).expect("the switch closed the connection")
    }

    /// `Err(())` when the switch closed the connection.
    fn try_recv(&mut self, timeout: Duration) -> Result<Option<(Header, Message)>, ()> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.buf.len() >= 8 {
                let len = usize::from(u16::from_be_bytes([self.buf[2], self.buf[3]]));
                if self.buf.len() >= len {
                    let msg: Vec<u8> = self.buf.drain(..len).collect();
                    let (h, m) = decode(&msg).unwrap();
                    if let (Message::EchoRequest(d), true) = (&m, self.echo) {
                        let reply = encode(self.v, h.xid, &Message::EchoReply(d.clone())).unwrap();
                        self.write(&reply);
                    }
                    return Ok(Some((h, m)));
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.s.set_read_timeout(Some(left.min(Duration::from_millis(50)))).unwrap();
            let mut chunk = [0u8; 65536];
            match self.s.read(&mut chunk) {
                Ok(0) => return Err(()),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => return Err(()),
            }
        }
    }

    /// The first message `f` takes within `timeout`, skipping others (ECHOs, ...).
    fn expect<T>(&mut self, timeout: Duration, what: &str, mut f: impl FnMut(&Header, &Message) -> Option<T>) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.recv(left) {
                Some((h, m)) => {
                    if let Some(t) = f(&h, &m) {
                        return t;
                    }
                }
                None => panic!("no {what} within {timeout:?}"),
            }
        }
    }

    /// Sends a BARRIER and returns what came before its reply.
    fn barrier(&mut self) -> Vec<Message> {
        let xid = self.send(&Message::BarrierRequest);
        let mut before = Vec::new();
        let deadline = Instant::now() + WAIT;
        loop {
            let (h, m) = self.recv(deadline.saturating_duration_since(Instant::now())).expect("BARRIER_REPLY");
            if h.xid == xid && m == Message::BarrierReply {
                return before;
            }
            before.push(m);
        }
    }

    /// The PACKET_INs that arrive within `quiet` of each other.
    fn packet_ins(&mut self, quiet: Duration) -> Vec<rqvs_openflow::flow_mod::PacketIn> {
        let mut v = Vec::new();
        while let Some((_, m)) = self.recv(quiet) {
            if let Message::PacketIn(p) = m {
                v.push(p);
            }
        }
        v
    }

    /// The next PACKET_IN (skipping other messages).
    fn packet_in(&mut self, what: &str) -> rqvs_openflow::flow_mod::PacketIn {
        self.expect(WAIT, what, |_, m| match m {
            Message::PacketIn(p) => Some(p.clone()),
            _ => None,
        })
    }

    fn set_miss_send_len(&mut self, n: u16) {
        self.send(&Message::SetConfig(OfConfig { flags: 0, miss_send_len: n }));
        self.barrier();
    }

    fn role(&mut self, role: u32) {
        self.send(&Message::RoleRequest(Role { role, generation_id: 1 }));
        self.expect(WAIT, "ROLE_REPLY", |_, m| matches!(m, Message::RoleReply(_)).then_some(()));
    }

    /// The ERROR answering the message with `xid` (panics on anything else answering it).
    fn error_for(&mut self, xid: u32) -> OfError {
        let deadline = Instant::now() + WAIT;
        loop {
            let (h, m) = self.recv(deadline.saturating_duration_since(Instant::now())).expect("an ERROR");
            match m {
                Message::Error(e) if h.xid == xid => return e.of_error(),
                m if h.xid == xid => panic!("expected an ERROR for xid {xid}, got {m:?}"),
                _ => {}
            }
        }
    }
}

/// An Ethernet/IPv4/UDP frame of `len` bytes from `src` to `dst`, UDP port `dport`.
fn udp(src: [u8; 6], dst: [u8; 6], dport: u16, len: usize) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x00]);
    let ip_len = (len - 14) as u16;
    f.extend_from_slice(&[0x45, 0, (ip_len >> 8) as u8, ip_len as u8, 0, 0, 0, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    let udp_len = ip_len - 20;
    f.extend_from_slice(&[0x04, 0x00, (dport >> 8) as u8, dport as u8, (udp_len >> 8) as u8, udp_len as u8, 0, 0]);
    f.resize(len, 0x5a);
    f
}

fn mac(last: u8) -> [u8; 6] {
    [0x02, 0x00, 0x00, 0x00, 0x00, last]
}

/// A switch on the three-port topology with an OpenFlow channel.
struct Rig {
    socks: Vec<RawSocket>,
    control: Arc<Control>,
    channel: Option<Channel>,
    sw: Option<Switch>,
    /// The passive listener's address (when there is one).
    listen: Option<SocketAddr>,
    // Last: the namespaces go after the switch has stopped.
    _topo: Topo,
}

impl Rig {
    /// `flows` in ovs-ofctl syntax; `passive`: also listen on 127.0.0.1 (any port).
    fn new(tag: &str, flows: &str, passive: bool, channel: ChannelConfig) -> Rig {
        Rig::with_design(tag, flows, passive, channel, DesignKind::Orig)
    }

    /// [`Rig::new`] with another design.
    fn with_design(tag: &str, flows: &str, passive: bool, mut channel: ChannelConfig, design: DesignKind) -> Rig {
        let topo = Topo::new(tag, 1);
        let socks: Vec<RawSocket> = (1..=PORTS as usize).map(|p| topo.host_socket(p)).collect();
        let rules = ofctl::parse_flows("flows", flows).unwrap();
        let ports: Vec<PortSource> =
            (1..=PORTS).map(|p| PortSource::Spec(format!("p{p}:afpacket").parse().unwrap())).collect();
        let mut cfg = SwitchConfig::new(ports, rules, design);
        cfg.packet_in = true;
        let sw = topo.sw.run(move || Switch::start(cfg)).unwrap().unwrap();
        let control = sw.control();
        let mut listen = None;
        if passive {
            let l = OpenflowListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
            listen = l.local_addr();
            channel.listen = Some(l);
        }
        let channel = Channel::start(&control, channel).unwrap();
        Rig { socks, control, channel: Some(channel), sw: Some(sw), listen, _topo: topo }
    }

    fn connect(&self, versions: &[u8]) -> Of {
        Of::connect(self.listen.expect("a passive listener"), versions)
    }

    /// Sends `frame` into port `port` (from its host).
    fn inject(&self, port: usize, frame: &[u8]) {
        self.socks[port - 1].send(frame).unwrap();
    }

    /// What arrives at each host within `QUIET` of each other: `got[p - 1]`.
    fn arrivals(&self) -> Vec<Vec<Vec<u8>>> {
        self.socks.iter().map(|s| s.drain(QUIET).unwrap()).collect()
    }

    /// Stops the channel and the switch; the final report (checked to balance).
    fn finish(mut self) -> FinalReport {
        self.control.request_stop();
        if let Some(c) = self.channel.take() {
            c.join();
        }
        let report = self.sw.take().unwrap().stop().unwrap();
        assert!(report.balanced(), "{}", report.format());
        report
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.control.request_stop();
        if let Some(c) = self.channel.take() {
            c.join();
        }
        if let Some(sw) = self.sw.take() {
            let _ = sw.stop();
        }
    }
}

fn channel_config() -> ChannelConfig {
    ChannelConfig::new()
}

#[test]
fn packet_in_reason_cookie_whole_frame_and_who_gets_it() {
    if !testnet::available("packet_in_reason_cookie_whole_frame_and_who_gets_it") {
        return;
    }
    let flows = "cookie=0x11,priority=0,actions=controller:64\n\
                 cookie=0x22,priority=10,udp,tp_dst=7,actions=mod_dl_src:02:00:00:00:00:99,controller:32,output:2\n";
    let rig = Rig::new("pin", flows, true, channel_config());
    let miss = udp(mac(1), mac(2), 9, 200);
    let hit = udp(mac(1), mac(2), 7, 300);
    let mut sent_only_to_controller = 0;
    for v in [OFP13, OFP14] {
        let mut of = rig.connect(&[v]);
        assert_eq!(of.v, v);
        // A passive connection takes no packet-ins before it asks (miss_send_len 0).
        rig.inject(1, &miss);
        sent_only_to_controller += 1;
        assert!(of.packet_ins(QUIET).is_empty(), "{v}: packet-in before SET_CONFIG");
        of.set_miss_send_len(128);
        rig.inject(1, &miss);
        sent_only_to_controller += 1;
        let p = of.packet_in("PACKET_IN of the miss");
        assert_eq!(p.reason, OFPR_NO_MATCH, "{v}: the table-miss flow's reason");
        assert_eq!(p.cookie, 0x11);
        assert_eq!((p.buffer_id, p.table_id, p.total_len), (OFP_NO_BUFFER, 0, 200));
        assert_eq!(p.data, miss, "{v}: the whole frame (neither controller:64 nor miss_send_len 128 cut it)");
        assert_eq!(p.matches.value().in_port, 1);
        assert_eq!(p.matches.mask().in_port, u32::MAX);
        assert_eq!(*p.matches.mask(), FlowKey { in_port: u32::MAX, ..FlowKey::default() }, "only in_port");
        rig.inject(1, &hit);
        let p = of.packet_in("PACKET_IN of the hit");
        let mut rewritten = hit.clone();
        rewritten[6..12].copy_from_slice(&mac(0x99));
        assert_eq!((p.reason, p.cookie, p.total_len), (OFPR_ACTION, 0x22, 300), "{v}");
        assert_eq!(p.data, rewritten, "{v}: the frame as mod_dl_src left it");
        let got = rig.arrivals();
        assert_eq!(got[1], vec![rewritten], "{v}: the output after the controller action");
        assert!(got[0].is_empty() && got[2].is_empty());
        // A slave gets none; equal again does.
        of.role(3);
        rig.inject(1, &miss);
        sent_only_to_controller += 1;
        assert!(of.packet_ins(QUIET).is_empty(), "{v}: a slave got a packet-in");
        of.role(1);
        rig.inject(1, &miss);
        sent_only_to_controller += 1;
        assert_eq!(of.packet_ins(QUIET).len(), 1, "{v}: equal again");
    }
    // Two connections: both equal get each packet-in; a new master makes the old one a slave.
    let mut a = rig.connect(&[OFP13, OFP14]);
    let mut b = rig.connect(&[OFP13]);
    assert_eq!((a.v, b.v), (OFP14, OFP13));
    a.set_miss_send_len(0xffff);
    b.set_miss_send_len(0xffff);
    rig.inject(1, &miss);
    sent_only_to_controller += 1;
    assert_eq!((a.packet_ins(QUIET).len(), b.packet_ins(QUIET).len()), (1, 1));
    a.role(2);
    b.role(2);
    rig.inject(1, &miss);
    sent_only_to_controller += 1;
    assert_eq!((a.packet_ins(QUIET).len(), b.packet_ins(QUIET).len()), (0, 1), "a was demoted by b");
    let r = rig.finish();
    // Every miss went only to the controller: counted so, not as dropped (the first one
    // too: its packet-in was queued, no connection took it).
    assert_eq!(r.ports[0].frames.to_controller, sent_only_to_controller, "{}", r.format());
    assert_eq!(r.ports[0].frames.forwarded, 2);
    assert_eq!(r.ports[0].frames.dropped, 0);
    assert_eq!(r.packet_ins, sent_only_to_controller + 2);
}

#[test]
fn packet_out_to_a_port_flood_table_normal_and_controller() {
    if !testnet::available("packet_out_to_a_port_flood_table_normal_and_controller") {
        return;
    }
    let flows = "priority=5,in_port=1,udp,actions=output:3\n\
                 cookie=0x33,priority=5,in_port=2,udp,actions=controller\n";
    let rig = Rig::new("pout", flows, true, channel_config());
    let f = udp(mac(1), mac(2), 53, 120);
    let po = |in_port: u32, actions: Vec<Action>| {
        Message::PacketOut(PacketOut { buffer_id: OFP_NO_BUFFER, in_port, actions: Actions(actions), data: f.clone() })
    };
    let mut injected = 0;
    for v in [OFP13, OFP14] {
        let mut of = rig.connect(&[v]);
        of.set_miss_send_len(128);
        // To a port (in_port CONTROLLER): the frame as sent, there only. A BARRIER waits for it.
        of.send(&po(OF_CONTROLLER, vec![Action::Output(2)]));
        of.barrier();
        assert_eq!(rig.arrivals(), vec![vec![], vec![f.clone()], vec![]], "{v}: output:2");
        // Flood from port 1: ports 2 and 3.
        of.send(&po(1, vec![Action::Flood]));
        assert_eq!(rig.arrivals(), vec![vec![], vec![f.clone()], vec![f.clone()]], "{v}: flood");
        // TABLE, after a rewrite: in_port=1,udp → output:3, the rewritten frame.
        of.send(&po(1, vec![Action::SetDlDst(mac(0x77)), Action::Other("TABLE".into())]));
        let mut g = f.clone();
        g[..6].copy_from_slice(&mac(0x77));
        assert_eq!(rig.arrivals(), vec![vec![], vec![], vec![g]], "{v}: TABLE with in_port 1");
        // TABLE from port 2: the flow's controller action; the reason is PACKET_OUT (1.4) or
        // ACTION (1.3), the cookie the flow's.
        of.send(&po(2, vec![Action::Other("TABLE".into())]));
        let p = of.packet_in("PACKET_IN from TABLE");
        let reason = if v == OFP14 { OFPR_PACKET_OUT } else { OFPR_ACTION };
        assert_eq!((p.reason, p.cookie, p.matches.value().in_port, p.data.clone()), (reason, 0x33, 2, f.clone()));
        // Its own controller action: no flow, so the cookie is all ones; in_port CONTROLLER.
        of.send(&po(OF_CONTROLLER, vec![Action::Controller(None)]));
        let p = of.packet_in("PACKET_IN of a packet-out");
        assert_eq!((p.reason, p.cookie, p.matches.value().in_port), (reason, u64::MAX, 0xfffd), "{v}");
        // NORMAL: the destination is unknown, so flooded (port 1 excluded).
        of.send(&po(1, vec![Action::Normal]));
        assert_eq!(rig.arrivals(), vec![vec![], vec![f.clone()], vec![f.clone()]], "{v}: NORMAL floods");
        injected += 6;
    }
    let r = rig.finish();
    assert_eq!(r.injected.rx, injected, "{}", r.format());
    assert_eq!((r.injected.forwarded, r.injected.to_controller), (injected - 4, 4));
    assert_eq!(r.total.rx, 0, "no frame came in on a port");
}

#[test]
fn bad_packet_outs_are_refused_with_their_errors() {
    if !testnet::available("bad_packet_outs_are_refused_with_their_errors") {
        return;
    }
    let rig = Rig::new("poerr", "priority=1,actions=output:2\n", true, channel_config());
    let f = udp(mac(1), mac(2), 53, 80);
    for v in [OFP13, OFP14] {
        let mut of = rig.connect(&[v]);
        let po = |buffer_id: u32, in_port: u32, actions: Vec<Action>, data: Vec<u8>| {
            Message::PacketOut(PacketOut { buffer_id, in_port, actions: Actions(actions), data })
        };
        let cases: Vec<(Message, OfError, &str)> = vec![
            (po(7, 1, vec![Action::Output(2)], f.clone()), OfError::BAD_REQUEST_BUFFER_UNKNOWN, "a buffer"),
            (po(OFP_NO_BUFFER, 9, vec![Action::Output(2)], f.clone()), OfError::BAD_REQUEST_BAD_PORT, "in_port 9"),
            (
                po(OFP_NO_BUFFER, 0xffff_fffe, vec![Action::Output(2)], f.clone()),
                OfError::BAD_REQUEST_BAD_PORT,
                "LOCAL",
            ),
            (po(OFP_NO_BUFFER, 1, vec![Action::Output(9)], f.clone()), OfError::BAD_ACTION_BAD_OUT_PORT, "output:9"),
            (
                po(OFP_NO_BUFFER, 1, vec![Action::Output(2), Action::Other("LOCAL".into())], f.clone()),
                OfError::BAD_ACTION_BAD_OUT_PORT,
                "output:LOCAL",
            ),
            (po(OFP_NO_BUFFER, 1, vec![Action::Output(2)], Vec::new()), OfError::BAD_REQUEST_BAD_PACKET, "no data"),
            (
                po(OFP_NO_BUFFER, 1, vec![Action::Output(2)], f[..10].to_vec()),
                OfError::BAD_REQUEST_BAD_PACKET,
                "10 bytes",
            ),
        ];
        for (m, want, what) in cases {
            let xid = of.send(&m);
            assert_eq!(of.error_for(xid), want, "{v}: {what}");
        }
        // An action the codec refuses (group), written by hand: actions_len 8, OFPAT_GROUP.
        let mut raw = encode(v, 0, &po(OFP_NO_BUFFER, 1, vec![], f.clone())).unwrap();
        raw.splice(24..24, [0u8, 22, 0, 8, 0, 0, 0, 1]);
        raw[16..18].copy_from_slice(&8u16.to_be_bytes());
        let len = raw.len() as u16;
        raw[2..4].copy_from_slice(&len.to_be_bytes());
        raw[4..8].copy_from_slice(&777u32.to_be_bytes());
        of.write(&raw);
        assert_eq!(of.error_for(777), OfError::BAD_ACTION_BAD_TYPE, "{v}: group action");
        // A role that does not exist: ROLE_REQUEST_FAILED/BAD_ROLE.
        let xid = of.send(&Message::RoleRequest(Role { role: 7, generation_id: 0 }));
        assert_eq!(of.error_for(xid), OfError { kind: 11, code: 2 }, "{v}: role 7");
        // A MASTER or SLAVE request older than the last accepted one: ROLE_REQUEST_FAILED/STALE
        // (OVS's generation_id check); the reply carries the last accepted generation_id.
        of.send(&Message::RoleRequest(Role { role: 2, generation_id: 1 }));
        let gen = of.expect(WAIT, "ROLE_REPLY", |_, m| match m {
            Message::RoleReply(r) => Some((r.role, r.generation_id)),
            _ => None,
        });
        assert_eq!(gen, (2, 1), "{v}: master, generation 1");
        let xid = of.send(&Message::RoleRequest(Role { role: 3, generation_id: 0 }));
        assert_eq!(of.error_for(xid), OfError { kind: 11, code: 0 }, "{v}: generation 0 after 1");
        // A slave may not send packets.
        of.role(3);
        let xid = of.send(&po(OFP_NO_BUFFER, 1, vec![Action::Output(2)], f.clone()));
        assert_eq!(of.error_for(xid), OfError::BAD_REQUEST_IS_SLAVE, "{v}: slave");
        // Still serving.
        let xid = of.send(&Message::EchoRequest(b"ok".to_vec()));
        of.expect(WAIT, "ECHO_REPLY", |h, m| (h.xid == xid && *m == Message::EchoReply(b"ok".to_vec())).then_some(()));
    }
    assert_eq!(rig.arrivals(), vec![Vec::<Vec<u8>>::new(); 3], "nothing was sent");
    let r = rig.finish();
    assert_eq!(r.injected.rx, 0);
}

/// Accepts on `l` within `within`; the time it took.
fn accept(l: &TcpListener, within: Duration) -> Option<(TcpStream, Instant)> {
    l.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).unwrap();
                return Some((s, Instant::now()));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    None
}

#[test]
fn controller_connection_probe_backoff_and_restart() {
    if !testnet::available("controller_connection_probe_backoff_and_restart") {
        return;
    }
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let mut cfg = channel_config();
    cfg.controllers = vec![addr.into()];
    cfg.fail_mode = FailMode::Secure;
    cfg.inactivity_probe = Duration::from_secs(1);
    cfg.max_backoff = Duration::from_secs(4);
    let rig = Rig::new("ctlr", "cookie=0x5,priority=0,actions=controller\n", false, cfg);
    let (s, _) = accept(&l, WAIT).expect("the switch connects at once");
    let mut of = Of::new(s, &[OFP13, OFP14]);
    assert_eq!(of.v, OFP14);
    // An active connection takes packet-ins without asking.
    let f = udp(mac(1), mac(2), 9, 64);
    rig.inject(1, &f);
    let p = of.packet_in("PACKET_IN");
    assert_eq!((p.reason, p.cookie, p.data), (OFPR_NO_MATCH, 5, f.clone()));
    // Silence: an ECHO_REQUEST after ~1 s, the end ~1 s later.
    of.echo = false;
    let quiet_from = Instant::now();
    of.expect(Duration::from_secs(3), "ECHO_REQUEST", |_, m| matches!(m, Message::EchoRequest(_)).then_some(()));
    let probed = quiet_from.elapsed();
    assert!(probed >= Duration::from_millis(800) && probed < Duration::from_millis(2000), "probe after {probed:?}");
    let closed = loop {
        match of.try_recv(Duration::from_secs(4)) {
            Err(()) => break quiet_from.elapsed(),
            Ok(Some(_)) => {}
            Ok(None) => panic!("the silent connection was not closed"),
        }
    };
    assert!(
        closed >= probed + Duration::from_millis(800) && closed < Duration::from_millis(4000),
        "closed after {closed:?}"
    );
    // It lasted longer than the backoff: back in ~1 s. Then each connection is cut at once:
    // 2 s, 4 s, 4 s (the maximum).
    let (s, mut last) = accept(&l, Duration::from_secs(3)).expect("reconnected");
    let first = last.duration_since(quiet_from) - closed;
    assert!(first >= Duration::from_millis(800) && first < Duration::from_millis(2500), "first retry after {first:?}");
    drop(s);
    for want in [2, 4, 4] {
        let (s, t) = accept(&l, Duration::from_secs(want + 3)).expect("another attempt");
        let gap = t.duration_since(last).as_secs_f64();
        assert!((gap - want as f64).abs() < 0.8, "backoff {gap:.2} s, expected {want} s");
        drop(s);
        last = t;
    }
    // The controller restarts: nothing listens for a while, then it is back on the same port.
    drop(l);
    std::thread::sleep(Duration::from_secs(5));
    let l = TcpListener::bind(addr).unwrap();
    let (s, _) = accept(&l, Duration::from_secs(6)).expect("reconnected after the restart");
    let mut of = Of::new(s, &[OFP13]);
    rig.inject(1, &f);
    let p = of.packet_in("PACKET_IN after the restart");
    assert_eq!(p.data, f);
    let r = rig.finish();
    assert_eq!(r.ports[0].frames.to_controller, 2, "{}", r.format());
}

#[test]
fn fail_modes_without_a_controller() {
    if !testnet::available("fail_modes_without_a_controller") {
        return;
    }
    // Nothing listens there (yet).
    let addr = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let cfg = |mode| {
        let mut c = channel_config();
        c.controllers = vec![addr.into()];
        c.fail_mode = mode;
        c.inactivity_probe = Duration::from_millis(300);
        c.max_backoff = Duration::from_secs(1);
        c
    };
    let (a, b, c) = (mac(0xa), mac(0xb), mac(0xc));
    // Secure: the flow stays, a miss stays a miss, long after three probe intervals.
    let rig = Rig::new("fsec", "priority=5,in_port=1,actions=output:2\n", true, cfg(FailMode::Secure));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!rig.control.is_failed_open());
    assert_eq!(rig.control.rules().len(), 1);
    rig.inject(1, &udp(a, b, 9, 60));
    rig.inject(3, &udp(c, a, 9, 60));
    assert_eq!(rig.arrivals(), vec![vec![], vec![udp(a, b, 9, 60)], vec![]], "secure: the flow, and nothing else");
    let r = rig.finish();
    assert_eq!((r.total.forwarded, r.total.dropped), (1, 1));

    // Standalone: fails open after ~0.9 s: the flows are gone, NORMAL forwards.
    let rig = Rig::new("fsta", "priority=5,in_port=1,actions=output:2\n", true, cfg(FailMode::Standalone));
    let t0 = Instant::now();
    while !rig.control.is_failed_open() {
        assert!(t0.elapsed() < WAIT, "standalone did not fail open");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(t0.elapsed() >= Duration::from_millis(700), "failed open after {:?}", t0.elapsed());
    assert!(rig.control.select(&rqvs_ofproto::record::FlowFilter::all()).is_empty(), "OpenFlow sees no flow");
    let mut client = rig.connect(&[OFP14]);
    let xid = client.send(&Message::MultipartRequest(rqvs_openflow::multipart::MultipartRequest {
        flags: 0,
        body: rqvs_openflow::multipart::MultipartRequestBody::Flow(rqvs_openflow::flow_mod::FlowStatsRequest {
            table_id: 0xff,
            out_port: rqvs_openflow::multipart::OFPP_ANY,
            out_group: 0xffff_ffff,
            cookie: 0,
            cookie_mask: 0,
            matches: rqvs_flow::Match::ANY,
        }),
    }));
    client.expect(WAIT, "FLOW stats", |h, m| match m {
        Message::MultipartReply(r) if h.xid == xid => {
            assert_eq!(
                r.body,
                rqvs_openflow::multipart::MultipartReplyBody::Flow(vec![]),
                "the fail-open rule is hidden"
            );
            Some(())
        }
        _ => None,
    });
    // A (port 1) to B: unknown, flooded. B (port 2) to A: learned, port 1 only. C to B too.
    rig.inject(1, &udp(a, b, 9, 60));
    assert_eq!(rig.arrivals(), vec![vec![], vec![udp(a, b, 9, 60)], vec![udp(a, b, 9, 60)]], "flooded");
    rig.inject(2, &udp(b, a, 9, 60));
    assert_eq!(rig.arrivals(), vec![vec![udp(b, a, 9, 60)], vec![], vec![]], "to the learned port");
    rig.inject(3, &udp(c, b, 9, 60));
    assert_eq!(rig.arrivals(), vec![vec![], vec![udp(c, b, 9, 60)], vec![]], "to the learned port");
    let learned: Vec<([u8; 6], u32)> = rig.control.mac_entries().iter().map(|e| (e.mac, e.port)).collect();
    assert_eq!(learned, vec![(a, 1), (b, 2), (c, 3)]);
    // A controller comes: once it is admitted (a message past the handshake), fail-open ends
    // and its flows decide.
    let l = TcpListener::bind(addr).unwrap();
    let (s, _) = accept(&l, Duration::from_secs(3)).expect("the switch connects");
    let mut of = Of::new(s, &[OFP14]);
    // The handshake (as OVS counts it) does not admit.
    of.send(&Message::FeaturesRequest);
    of.expect(WAIT, "FEATURES_REPLY", |_, m| matches!(m, Message::FeaturesReply(_)).then_some(()));
    of.send(&Message::SetConfig(OfConfig { flags: 0, miss_send_len: 0xffff }));
    of.send(&Message::GetConfigRequest);
    of.expect(WAIT, "GET_CONFIG_REPLY", |_, m| matches!(m, Message::GetConfigReply(_)).then_some(()));
    std::thread::sleep(QUIET);
    assert!(rig.control.is_failed_open(), "the handshake alone does not admit");
    let fm = ofctl::parse_flows("fm", "cookie=0x9,priority=0,actions=controller").unwrap().remove(0);
    of.send(&Message::FlowMod(FlowMod::from_rule(&fm, FlowModCommand::Add).unwrap().remove(0)));
    of.barrier();
    let t0 = Instant::now();
    while rig.control.is_failed_open() {
        assert!(t0.elapsed() < WAIT, "admitted, yet still failed open");
        std::thread::sleep(Duration::from_millis(20));
    }
    rig.inject(1, &udp(a, b, 9, 60));
    let p = of.packet_in("PACKET_IN once recovered");
    assert_eq!((p.cookie, p.reason), (9, OFPR_NO_MATCH));
    assert_eq!(rig.arrivals(), vec![Vec::<Vec<u8>>::new(); 3], "no longer forwarded on its own");
    let r = rig.finish();
    assert_eq!((r.total.forwarded, r.total.to_controller), (3, 1), "{}", r.format());
}

/// `dec_ttl` on a TTL of 1 in a later table: the packet goes to the controller with reason
/// INVALID_TTL, the cookie and table of the rule whose `dec_ttl` it was, the whole frame — to
/// the connections whose asynchronous configuration asks for that reason (OVS's default does
/// not; SET_ASYNC does); nothing is output. A TTL of 64 is decremented and sent, no packet-in.
/// ORIG and CFLOWS; in table 0 too (CFLOWS: a table-0 `dec_ttl` rule is translated).
#[test]
fn invalid_ttl_packet_in_with_the_rules_cookie_and_table() {
    if !testnet::available("invalid_ttl_packet_in_with_the_rules_cookie_and_table") {
        return;
    }
    // In a later table, and in table 0 (which CFLOWS' learned classifier serves).
    let later = "cookie=0x33,table=0,priority=10,udp,actions=goto_table:1\n\
                 cookie=0x44,table=1,priority=10,udp,actions=dec_ttl,output:2\n";
    let first = "cookie=0x44,table=0,priority=10,udp,actions=dec_ttl,output:2\n";
    for (flows, table, design) in
        [(later, 1, DesignKind::Orig), (later, 1, DesignKind::Cflows), (first, 0, DesignKind::Cflows)]
    {
        invalid_ttl(flows, table, design);
    }
}

fn invalid_ttl(flows: &str, table: u8, design: DesignKind) {
    use rqvs_openflow::async_config::{AsyncConfig, PACKET_IN_MASTER};
    use rqvs_openflow::flow_mod::OFPR_INVALID_TTL;
    let rig = Rig::with_design("ittl", flows, true, channel_config(), design);
    let mut expired = udp(mac(1), mac(2), 9, 120);
    expired[22] = 1;
    let live = udp(mac(1), mac(2), 9, 120);
    let mut to_controller = 0;
    for v in [OFP13, OFP14] {
        let mut of = rig.connect(&[v]);
        of.set_miss_send_len(0xffff);
        // OVS's default asynchronous configuration leaves INVALID_TTL out.
        rig.inject(1, &expired);
        to_controller += 1;
        assert!(of.packet_ins(QUIET).is_empty(), "{v}: INVALID_TTL packet-in by default");
        let mut cfg = AsyncConfig::ovs_default(v);
        for p in cfg.props.iter_mut().filter(|p| p.0 == PACKET_IN_MASTER) {
            p.1 |= 1 << OFPR_INVALID_TTL;
        }
        of.send(&Message::SetAsync(cfg));
        of.barrier();
        rig.inject(1, &expired);
        to_controller += 1;
        let p = of.packet_in("the INVALID_TTL packet-in");
        assert_eq!((p.reason, p.cookie, p.table_id), (OFPR_INVALID_TTL, 0x44, table), "{v} {design:?}");
        assert_eq!((p.buffer_id, p.total_len), (OFP_NO_BUFFER, 120));
        assert_eq!(p.data, expired, "{v}: the whole frame");
        assert_eq!(p.matches.value().in_port, 1);
        assert!(rig.arrivals().iter().all(Vec::is_empty), "{v}: an expired packet is not output");
        rig.inject(1, &live);
        let got = rig.arrivals();
        assert_eq!(got[1].len(), 1, "{v}");
        assert_eq!(got[1][0][22], 63, "{v}: TTL decremented");
        assert!(of.packet_ins(QUIET).is_empty(), "{v}: no packet-in for a live TTL");
    }
    let r = rig.finish();
    assert_eq!(r.ports[0].frames.to_controller, to_controller, "{}", r.format());
    assert_eq!(r.ports[0].frames.forwarded, 2, "{}", r.format());
}
