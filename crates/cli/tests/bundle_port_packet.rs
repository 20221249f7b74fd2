//! PORT_MOD and PACKET_OUT inside OpenFlow 1.4 bundles, as Open vSwitch 3.1 takes them
//! (`crates/switch/src/openflow/bundled.rs`): nothing happens before the commit; at the commit
//! the flow-mods are committed and then the port-mods applied and the packet-outs sent in the
//! bundle's order (a packet-out to `TABLE` sees the bundle's flow); a discarded bundle and one
//! whose commit fails (a PORT_MOD to a port that is not there) change nothing and send nothing;
//! a PORT_MOD in an `atomic` bundle fails the commit. Raw OpenFlow over TCP in the switch's namespace
//! (ovs-ofctl cannot put a PORT_MOD in a bundle); the switch on veths in namespaces of its own, the frames
//! read on the hosts' ends.
//!
//! Needs root and `ip` (else skipped; a failure with `RQVS_REQUIRE_NETNS=1`).

mod common;
mod ofswitch;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{ctl, TempDir};
use ofswitch::OfSwitch;
use rqvs_flow::{Action, Actions};
use rqvs_openflow::async_config::{PortMod, OFPPC_NO_PACKET_IN};
use rqvs_openflow::bundle::{self, BundleAdd, BundleControl};
use rqvs_openflow::flow_mod::{FlowMod, PacketOut, OFP_NO_BUFFER};
use rqvs_openflow::multipart::{MultipartReplyBody, MultipartRequest, MultipartRequestBody};
use rqvs_openflow::{decode, encode, Message, OFP14};

/// OpenFlow's `OFPP_CONTROLLER` (32 bits).
const OFPP_CONTROLLER: u32 = 0xffff_fffd;
/// `OFPET_BUNDLE_FAILED` / `OFPBFC_MSG_FAILED`.
const MSG_FAILED: (u16, u16) = (17, 13);

fn read_msg(s: &mut TcpStream) -> Vec<u8> {
    let mut h = [0u8; 8];
    s.read_exact(&mut h).expect("a message");
    let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let mut body = vec![0u8; len.saturating_sub(8)];
    s.read_exact(&mut body).expect("its body");
    [h.to_vec(), body].concat()
}

struct Client {
    s: TcpStream,
    xid: u32,
}

impl Client {
    fn connect(sw: &OfSwitch) -> Client {
        let mut s = sw.connect();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        assert_eq!(read_msg(&mut s)[1], 0, "the switch's HELLO");
        // HELLO, version 1.4 with a bitmap of 1.4.
        s.write_all(&[5, 0, 0, 16, 0, 0, 0, 1, 0, 1, 0, 8, 0, 0, 0, 1 << 5]).unwrap();
        Client { s, xid: 100 }
    }

    fn send(&mut self, m: &Message) -> u32 {
        self.xid += 1;
        self.s.write_all(&encode(OFP14, self.xid, m).unwrap()).unwrap();
        self.xid
    }

    /// The next reply that is not an asynchronous message (PORT_STATUS, PACKET_IN, ...).
    fn reply(&mut self) -> Vec<u8> {
        loop {
            let m = read_msg(&mut self.s);
            if !matches!(m[1], 10..=12) {
                return m;
            }
        }
    }

    /// A BARRIER and its reply: every message before it handled.
    fn barrier(&mut self) {
        let xid = self.send(&Message::BarrierRequest);
        let r = self.reply();
        assert_eq!((r[1], u32::from_be_bytes([r[4], r[5], r[6], r[7]])), (21, xid), "a barrier reply: {r:?}");
    }

    fn control(&mut self, id: u32, kind: u16, flags: u16) -> Vec<u8> {
        self.send(&Message::BundleControl(BundleControl { bundle_id: id, kind, flags, properties: Vec::new() }));
        self.reply()
    }

    /// Opens bundle `id` with `flags`.
    fn open(&mut self, id: u32, flags: u16) {
        let r = self.control(id, bundle::OPEN_REQUEST, flags);
        assert_eq!((r[1], &r[12..14]), (33, &bundle::OPEN_REPLY.to_be_bytes()[..]), "opened: {r:?}");
    }

    /// Adds `m` to bundle `id` (no answer when it is accepted: checked with a barrier).
    fn add(&mut self, id: u32, flags: u16, m: &Message) {
        self.xid += 1;
        let inner = encode(OFP14, self.xid, m).unwrap();
        let ba = BundleAdd { bundle_id: id, flags, message: inner, properties: Vec::new() };
        self.s.write_all(&encode(OFP14, self.xid, &Message::BundleAdd(ba)).unwrap()).unwrap();
        self.barrier();
    }

    /// Port `no`'s hardware address and config bits (PORT_DESC).
    fn port(&mut self, no: u32) -> ([u8; 6], u32) {
        self.send(&Message::MultipartRequest(MultipartRequest { flags: 0, body: MultipartRequestBody::PortDesc }));
        let r = self.reply();
        let Ok((_, Message::MultipartReply(m))) = decode(&r) else { panic!("a multipart reply: {r:?}") };
        let MultipartReplyBody::PortDesc(ports) = m.body else { panic!("PORT_DESC: {:?}", m.body) };
        let p = ports.iter().find(|p| p.port_no == no).unwrap_or_else(|| panic!("port {no} in {ports:?}"));
        (p.hw_addr, p.config)
    }
}

/// The error (type, code) of an ERROR message.
fn error_of(r: &[u8]) -> (u16, u16) {
    assert_eq!(r[1], 1, "an ERROR: {r:?}");
    (u16::from_be_bytes([r[8], r[9]]), u16::from_be_bytes([r[10], r[11]]))
}

/// A UDP frame to port `dport` from port `tag` (so no frame passes for another).
fn frame(dport: u16, tag: u16) -> Vec<u8> {
    let mut key = rqvs_flow::FlowKey::ipv4(0x0a00_0001, 0x0a00_0002, 17, tag, dport);
    key.dl_src = [2, 0, 0, 0, 0, 1];
    key.dl_dst = [2, 0, 0, 0, 0, 2];
    rqvs_flow::frame::build_frame(&key)
}

fn packet_out(actions: Vec<Action>, frame: Vec<u8>) -> Message {
    Message::PacketOut(PacketOut {
        buffer_id: OFP_NO_BUFFER,
        in_port: OFPP_CONTROLLER,
        actions: Actions(actions),
        data: frame,
    })
}

fn port_mod(port_no: u32, hw_addr: [u8; 6], no_packet_in: bool) -> Message {
    let config = if no_packet_in { OFPPC_NO_PACKET_IN } else { 0 };
    Message::PortMod(PortMod { port_no, hw_addr, config, mask: OFPPC_NO_PACKET_IN, advertise: 0 })
}

fn flow_mod(text: &str) -> Message {
    let r = rqvs_flow::formats::ofctl::parse_flow("test", 1, text, 0).unwrap();
    Message::FlowMod(FlowMod::add(r.priority as u16, r.matches, r.actions))
}

/// The test's frames (from [`frame`]'s MAC) port `port`'s host received since the last call.
fn got(sw: &OfSwitch, port: usize) -> Vec<Vec<u8>> {
    let quiet = Duration::from_millis(300);
    sw.received_on(port, quiet).into_iter().filter(|f| f.len() > 12 && f[6..12] == [2, 0, 0, 0, 0, 1]).collect()
}

fn run(design: &str) {
    let _serial = ofswitch::serial();
    let dir = TempDir::new(&format!("bundle-pm-po-{design}"));
    let rules = dir.join("rules.flows");
    std::fs::write(&rules, "priority=1,actions=drop\n").unwrap();
    let mut sw = OfSwitch::start(&dir.0, &format!("bpp{}", &design[..2]), &rules, design, true);
    if !sw.has_traffic() {
        return;
    }
    let mut c = Client::connect(&sw);
    let (hw3, config3) = c.port(3);
    assert_eq!(config3 & OFPPC_NO_PACKET_IN, 0);
    let rules_now = |sw: &OfSwitch| ctl(&sw.sock, &["dump-rules"]);
    let (ordered, atomic) = (bundle::ORDERED, bundle::ATOMIC);

    // 1. A flow, a port change, a packet-out through the tables and one to a port: nothing
    //    before the commit, all of it after.
    c.open(1, ordered);
    c.add(1, ordered, &flow_mod("priority=9,udp,tp_dst=9,actions=output:2"));
    c.add(1, ordered, &port_mod(3, hw3, true));
    c.add(1, ordered, &packet_out(vec![Action::Other("TABLE".into())], frame(9, 0xa1)));
    c.add(1, ordered, &packet_out(vec![Action::Output(3)], frame(5, 0xb1)));
    assert!(!rules_now(&sw).contains("tp_dst=9"), "the flow-mod waits for the commit");
    assert_eq!(c.port(3).1 & OFPPC_NO_PACKET_IN, 0, "the port-mod waits for the commit");
    assert!(got(&sw, 2).is_empty() && got(&sw, 3).is_empty(), "the packet-outs wait for the commit");
    let r = c.control(1, bundle::COMMIT_REQUEST, ordered);
    assert_eq!((r[1], &r[12..14]), (33, &bundle::COMMIT_REPLY.to_be_bytes()[..]), "committed: {r:?}");
    c.barrier();
    assert!(rules_now(&sw).contains("tp_dst=9"), "{}", rules_now(&sw));
    assert_ne!(c.port(3).1 & OFPPC_NO_PACKET_IN, 0, "the port-mod applied at the commit");
    assert_eq!(got(&sw, 2), vec![frame(9, 0xa1)], "the TABLE packet-out went by the bundle's flow to port 2");
    assert_eq!(got(&sw, 3), vec![frame(5, 0xb1)], "the other to port 3");

    // 2. Discarded: nothing.
    c.open(2, ordered);
    c.add(2, ordered, &flow_mod("priority=8,udp,tp_dst=8,actions=output:3"));
    c.add(2, ordered, &port_mod(3, hw3, false));
    c.add(2, ordered, &packet_out(vec![Action::Output(3)], frame(5, 0xc1)));
    let r = c.control(2, bundle::DISCARD_REQUEST, ordered);
    assert_eq!((r[1], &r[12..14]), (33, &bundle::DISCARD_REPLY.to_be_bytes()[..]), "discarded: {r:?}");
    c.barrier();

    // 3. A PORT_MOD to a port that is not there fails the commit: nothing of it happens.
    c.open(3, ordered);
    c.add(3, ordered, &flow_mod("priority=7,udp,tp_dst=7,actions=output:3"));
    c.add(3, ordered, &packet_out(vec![Action::Output(3)], frame(5, 0xd1)));
    c.add(3, ordered, &port_mod(3, hw3, false));
    c.add(3, ordered, &port_mod(9, hw3, false));
    assert_eq!(error_of(&c.control(3, bundle::COMMIT_REQUEST, ordered)), MSG_FAILED);

    // 4. A PORT_MOD in an atomic bundle fails it (OVS: port changes are not atomic).
    c.open(4, atomic);
    c.add(4, atomic, &port_mod(3, hw3, false));
    c.add(4, atomic, &packet_out(vec![Action::Output(3)], frame(5, 0xe1)));
    assert_eq!(error_of(&c.control(4, bundle::COMMIT_REQUEST, atomic)), MSG_FAILED);
    c.barrier();
    let rules_after = rules_now(&sw);
    assert!(!rules_after.contains("tp_dst=8") && !rules_after.contains("tp_dst=7"), "{rules_after}");
    assert_ne!(c.port(3).1 & OFPPC_NO_PACKET_IN, 0, "no refused or discarded port-mod applied");

    // 5. The port-mod alone, back: applied.
    c.open(5, ordered);
    c.add(5, ordered, &port_mod(3, hw3, false));
    let r = c.control(5, bundle::COMMIT_REQUEST, ordered);
    assert_eq!(r[1], 33, "committed: {r:?}");
    assert_eq!(c.port(3).1 & OFPPC_NO_PACKET_IN, 0);

    // None of the refused or discarded bundles' packet-outs was sent.
    assert!(got(&sw, 3).is_empty() && got(&sw, 2).is_empty() && got(&sw, 1).is_empty());
    let (status, err) = sw.exit();
    assert!(status.success(), "{err}");
}

#[test]
fn port_mod_and_packet_out_in_bundles_orig() {
    run("orig");
}

#[test]
fn port_mod_and_packet_out_in_bundles_cflows() {
    run("cflows");
}
