//! The OpenFlow channel: `--openflow ptcp:[IP:]PORT`, a passive TCP listener speaking OpenFlow
//! 1.3 and 1.4 (the codec is `rqvs_openflow`), one thread per connection, several at once.
//!
//! What a connection handles:
//!
//! | message | answer |
//! |---|---|
//! | HELLO | version negotiated (1.3, 1.4); none in common: HELLO_FAILED and close |
//! | ECHO_REQUEST | ECHO_REPLY with the same data |
//! | FEATURES_REQUEST | datapath id, 0 buffers, 1 table, flow/table/port stats capabilities |
//! | GET_CONFIG / SET_CONFIG | the connection's flags and miss_send_len (only flags 0 accepted) |
//! | BARRIER_REQUEST | BARRIER_REPLY (every message before it is done: changes are synchronous) |
//! | ROLE_REQUEST | the role asked for (no master election) |
//! | MULTIPART DESC, PORT_DESC, PORT_STATS, TABLE, FLOW, AGGREGATE | from [`Control`]; FLOW and AGGREGATE with each flow's packets, bytes and duration ([`Control::flow_stats`]) |
//! | FLOW_MOD add, modify(_strict), delete(_strict) | idle/hard timeouts, SEND_FLOW_REM, CHECK_OVERLAP (OVERLAP), RESET_COUNTS with OVS's semantics ([`crate::table`]); applied in order; the FLOW_MODs that arrive back to back (read together, up to [`MAX_RUN`]) are one run: each accepted or refused on its own, all the accepted ones one commit ([`Control::apply_each`]) — so a controller's stream costs one revalidation or publication per run, not per flow-mod; any other message (a BARRIER, say) ends the run first |
//! | BUNDLE_CONTROL, BUNDLE_ADD_MESSAGE (1.4; OVS's ONF extension in 1.3) | open/close/commit/discard; FLOW_MODs checked when added, committed as one change set ([`Control::apply_ops`]) |
//! | anything else | the OpenFlow ERROR for it (BAD_TYPE, BAD_MULTIPART, BAD_EXPERIMENTER, ...) |
//! | (sent) FLOW_REMOVED | when a flow with SEND_FLOW_REM is deleted or expires (reason DELETE, IDLE_TIMEOUT, HARD_TIMEOUT), to every connection whose role is not slave ([`crate::events`]) |
//!
//! A message the codec cannot decode gets the ERROR its [`rqvs_openflow::DecodeError::of_error`] names; the
//! table is not touched and the connection stays open (a header whose length is below 8 cannot
//! be framed: ERROR and close). A flow's counters are the PMDs' per-flow counts
//! ([`crate::flowstats`]); a rule with port ranges (a ClassBench set) is several OpenFlow flows
//! and its counts go with the first of them. Buffered packets are refused with BUFFER_UNKNOWN.
//! PACKET_IN, PACKET_OUT and TABLE_FEATURES are not served yet. A bundle is atomic (the datapath sees all of it or
//! none); its ORDERED flag changes nothing (messages are applied in order anyway); an
//! uncommitted bundle is discarded when its connection ends. A connection holds at most
//! [`MAX_BUNDLES`] open bundles of at most [`MAX_BUNDLE_MSGS`] flow-mods each.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rqvs_openflow::bundle::{self, BundleAdd, BundleControl};
use rqvs_openflow::flow_mod::{
    AggregateStats, FlowMod, FlowModCommand, FlowRemoved, FlowStats, FlowStatsRequest, OFPFF_RESET_COUNTS, OFPG_ANY,
    OFPTT_ALL, OFP_NO_BUFFER,
};
use rqvs_openflow::message::{bitmap_of, kind, ErrorMsg, Features, Hello, Role, SwitchConfig as OfConfig};
use rqvs_openflow::multipart::{
    Desc, MultipartReply, MultipartReplyBody, MultipartRequestBody, PortStats, TableStats, MORE, OFPP_ANY,
};
use rqvs_openflow::port::Port;
use rqvs_openflow::{decode, encode, negotiate, Header, Message, OfError, OFP13, OFP14};

use crate::events::Event;
use crate::flowstats::FlowStat;
use crate::{Control, Counts, Error, FlowFilter, FlowOp, FlowSpec, OpError};

/// The datapath id the switch reports when none is configured.
pub const DEFAULT_DATAPATH_ID: u64 = 0x0000_7271_7673_0001;

/// `OFPBRC_BAD_EXPERIMENTER`.
const BAD_EXPERIMENTER: OfError = OfError { kind: 1, code: 3 };
/// `OFPBRC_BUFFER_UNKNOWN`.
const BUFFER_UNKNOWN: OfError = OfError { kind: 1, code: 8 };
/// `OFPCR_ROLE_SLAVE`: a connection in this role gets no FLOW_REMOVED.
const ROLE_SLAVE: u32 = 3;
/// `OFPC_FLOW_STATS | OFPC_TABLE_STATS | OFPC_PORT_STATS`.
const CAPABILITIES: u32 = 1 | 2 | 4;
/// Entries per MULTIPART_REPLY part (well below 64 KiB; halved when a part is still too big).
const PART: usize = 128;
/// Bytes read from a connection at a time.
const READ_CHUNK: usize = 256 * 1024;
/// FLOW_MODs applied as one commit at most (a longer run is cut into several).
pub const MAX_RUN: usize = 16 * 1024;
/// Open bundles one connection may hold (more: OUT_OF_BUNDLES).
pub const MAX_BUNDLES: usize = 64;
/// Flow-mods one bundle may hold (more: MSG_TOO_MANY): the paper's bundles are 125K rules;
/// a client adding without end would otherwise grow the switch's memory without bound.
pub const MAX_BUNDLE_MSGS: usize = 1 << 20;

/// Where to listen: `ptcp:[IP:]PORT`.
pub fn parse_target(s: &str) -> Result<SocketAddr, Error> {
    let bad = || Error(format!("--openflow '{s}': expected ptcp:[IP:]PORT, e.g. ptcp:6653 or ptcp:127.0.0.1:6653"));
    let rest = s.strip_prefix("ptcp:").ok_or_else(bad)?;
    if let Ok(port) = rest.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    let rest = rest.replace(['[', ']'], "");
    let (ip, port) = rest.rsplit_once(':').ok_or_else(bad)?;
    let ip: std::net::IpAddr = ip.parse().map_err(|_| bad())?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    Ok(SocketAddr::new(ip, port))
}

/// The bound OpenFlow listener.
pub struct OpenflowListener {
    listener: TcpListener,
    datapath_id: u64,
}

impl OpenflowListener {
    /// Binds `addr` (`ptcp:` target, see [`parse_target`]).
    pub fn bind(addr: SocketAddr, datapath_id: u64) -> Result<OpenflowListener, Error> {
        let listener = TcpListener::bind(addr).map_err(|e| Error(format!("--openflow ptcp:{addr}: {e}")))?;
        listener.set_nonblocking(true).map_err(|e| Error(format!("--openflow ptcp:{addr}: {e}")))?;
        Ok(OpenflowListener { listener, datapath_id })
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Accepts connections until the switch is asked to stop, each on its own thread; returns
    /// once every connection thread has ended.
    pub fn serve(&self, control: &Arc<Control>) {
        let mut conns: Vec<JoinHandle<()>> = Vec::new();
        let mut n = 0u64;
        while !control.stop_requested() {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    n += 1;
                    let c = control.clone();
                    let dpid = self.datapath_id;
                    let spawned = std::thread::Builder::new()
                        .name(format!("of{n}"))
                        .spawn(move || Connection::new(stream, peer, c, dpid).run());
                    match spawned {
                        Ok(t) => conns.push(t),
                        Err(e) => eprintln!("rqvs switch: openflow {peer}: no thread for it: {e}"),
                    }
                    conns.retain(|t| !t.is_finished());
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        for t in conns {
            let _ = t.join();
        }
    }
}

struct Connection {
    stream: TcpStream,
    peer: SocketAddr,
    control: Arc<Control>,
    datapath_id: u64,
    /// The negotiated version (`None` before HELLO).
    version: Option<u8>,
    config: OfConfig,
    role: u32,
    /// Open bundles by id (discarded when the connection ends).
    bundles: std::collections::HashMap<u32, Bundle>,
    /// The switch's events ([`crate::events`]).
    events: Receiver<Event>,
}

/// Why a connection ends.
enum End {
    Closed,
    Fatal,
}

impl Connection {
    fn new(stream: TcpStream, peer: SocketAddr, control: Arc<Control>, datapath_id: u64) -> Connection {
        Connection {
            stream,
            peer,
            datapath_id,
            version: None,
            config: OfConfig { flags: 0, miss_send_len: 128 },
            role: 1,
            bundles: std::collections::HashMap::new(),
            events: control.subscribe(),
            control,
        }
    }

    /// Sends the events that have come (a FLOW_REMOVED per removed flow's OpenFlow flow, unless
    /// this connection is a slave or has not said HELLO yet).
    fn deliver(&mut self) -> Result<(), End> {
        while let Ok(e) = self.events.try_recv() {
            let Event::FlowRemoved(fr) = e;
            let Some(v) = self.version else { continue };
            if self.role == ROLE_SLAVE {
                continue;
            }
            let r = &fr.rule;
            for (i, m) in r.matches.expand_port_ranges().into_iter().enumerate() {
                // The counts go with the first of a rule's OpenFlow flows (module docs).
                let counts = if i == 0 { fr.counts } else { Default::default() };
                let msg = FlowRemoved {
                    cookie: r.cookie,
                    priority: u16::try_from(r.priority).unwrap_or(u16::MAX),
                    reason: fr.reason.code(),
                    table_id: r.table,
                    duration_sec: (fr.duration_ns / 1_000_000_000).min(u64::from(u32::MAX)) as u32,
                    duration_nsec: (fr.duration_ns % 1_000_000_000) as u32,
                    idle_timeout: fr.idle_timeout,
                    hard_timeout: fr.hard_timeout,
                    packet_count: counts.packets,
                    byte_count: counts.bytes,
                    matches: m,
                };
                self.send(v, 0, &Message::FlowRemoved(msg))?;
            }
        }
        Ok(())
    }

    fn run(mut self) {
        let _ = self.stream.set_nonblocking(false);
        let _ = self.stream.set_nodelay(true);
        let _ = self.stream.set_read_timeout(Some(Duration::from_millis(50)));
        let _ = self.stream.set_write_timeout(Some(Duration::from_secs(10)));
        if self.send(OFP14, 0, &Message::Hello(Hello::with_versions(&[OFP13, OFP14]))).is_err() {
            return;
        }
        let mut buf: Vec<u8> = Vec::new();
        let mut chunk = vec![0u8; READ_CHUNK];
        let mut run = FlowModRun::default();
        loop {
            // Every whole message in the buffer; a run of FLOW_MODs is applied as one commit.
            let mut pos = 0;
            while buf.len() - pos >= Header::LEN {
                let head = &buf[pos..];
                let len = usize::from(u16::from_be_bytes([head[2], head[3]]));
                if len < Header::LEN {
                    let xid = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
                    let v = self.version.unwrap_or(head[0]);
                    let head: [u8; Header::LEN] = head[..Header::LEN].try_into().expect("checked above");
                    let _ = self.flush(&mut run);
                    let _ = self.error(v, xid, OfError::BAD_REQUEST_BAD_LEN, &head);
                    return;
                }
                if head.len() < len {
                    break;
                }
                let msg = &buf[pos..pos + len];
                pos += len;
                if run.take(self.version, msg) {
                    if run.ops.len() >= MAX_RUN && self.flush(&mut run).is_err() {
                        return;
                    }
                    continue;
                }
                if self.flush(&mut run).is_err() || self.handle(msg).is_err() || self.deliver().is_err() {
                    return;
                }
            }
            buf.drain(..pos);
            if self.flush(&mut run).is_err() || self.deliver().is_err() || self.control.stop_requested() {
                return;
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
                Err(_) => return,
            }
        }
    }

    /// Applies a run of FLOW_MODs ([`Control::apply_each`]: each on its own, one commit for
    /// all) and sends the errors of the refused ones, in the order they came.
    fn flush(&mut self, run: &mut FlowModRun) -> Result<(), End> {
        if run.items.is_empty() {
            return Ok(());
        }
        let Some(v) = self.version else { return Ok(()) };
        let mut results = self.control.apply_each(&run.ops).into_iter();
        let mut refusals = 0usize;
        for (xid, bytes, item) in std::mem::take(&mut run.items) {
            let refused = match item {
                Ok(false) => None,
                Ok(true) => match results.next() {
                    Some(Ok(_)) | None => None,
                    Some(Err(OpError::Overlap(why))) => Some((OfError::FLOW_MOD_FAILED_OVERLAP, why)),
                    Some(Err(OpError::Invalid(e))) => Some((OfError::FLOW_MOD_FAILED_UNKNOWN, e.0)),
                },
                Err(e) => Some(e),
            };
            if let Some((e, why)) = refused {
                // One line per run, however many a controller sends.
                if refusals == 0 {
                    eprintln!("rqvs switch: openflow {}: flow_mod refused: {why}", self.peer);
                }
                refusals += 1;
                self.error(v, xid, e, &bytes)?;
            }
        }
        if refusals > 1 {
            eprintln!("rqvs switch: openflow {}: {} more flow_mods of that run refused", self.peer, refusals - 1);
        }
        run.ops.clear();
        // The FLOW_REMOVED of the run's deletes before anything that follows it (a BARRIER_REPLY).
        self.deliver()
    }

    fn send(&mut self, version: u8, xid: u32, msg: &Message) -> Result<(), End> {
        let bytes = match encode(version, xid, msg) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("rqvs switch: openflow {}: cannot encode a reply: {e} (a bug: please report it)", self.peer);
                return Err(End::Fatal);
            }
        };
        self.stream.write_all(&bytes).map_err(|_| End::Closed)
    }

    fn error(&mut self, version: u8, xid: u32, e: OfError, offending: &[u8]) -> Result<(), End> {
        let v = if (1..=OFP14).contains(&version) { version } else { self.version.unwrap_or(OFP14) };
        self.send(v, xid, &Message::Error(ErrorMsg::new(e, offending)))
    }

    fn handle(&mut self, bytes: &[u8]) -> Result<(), End> {
        let xid = u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        let wire_version = bytes[0];
        let (h, msg) = match decode(bytes) {
            Ok(m) => m,
            Err(e) => {
                if self.version.is_none() && bytes[1] == kind::HELLO {
                    // A HELLO we cannot read: no version in common.
                    let _ = self.error(wire_version, xid, OfError::HELLO_FAILED_INCOMPATIBLE, bytes);
                    return Err(End::Fatal);
                }
                return self.error(self.version.unwrap_or(wire_version), xid, e.of_error(), bytes);
            }
        };
        let Some(v) = self.version else {
            let Message::Hello(hello) = &msg else {
                let _ = self.error(OFP14, xid, OfError::HELLO_FAILED_INCOMPATIBLE, bytes);
                return Err(End::Fatal);
            };
            match negotiate(bitmap_of(&[OFP13, OFP14]), h.version, hello) {
                Some(v) => {
                    self.version = Some(v);
                    return Ok(());
                }
                None => {
                    let _ = self.error(h.version, xid, OfError::HELLO_FAILED_INCOMPATIBLE, bytes);
                    return Err(End::Fatal);
                }
            }
        };
        if h.version != v && !matches!(msg, Message::Hello(_) | Message::Error(_)) {
            return self.error(v, xid, OfError::BAD_REQUEST_BAD_VERSION, bytes);
        }
        let reply = match msg {
            Message::Hello(_) | Message::EchoReply(_) | Message::BarrierReply => None,
            Message::Error(e) => {
                eprintln!("rqvs switch: openflow {}: the peer sent an error ({})", self.peer, e.of_error());
                None
            }
            Message::EchoRequest(data) => Some(Message::EchoReply(data)),
            Message::FeaturesRequest => Some(Message::FeaturesReply(Features {
                datapath_id: self.datapath_id,
                n_buffers: 0,
                n_tables: 1,
                auxiliary_id: 0,
                capabilities: CAPABILITIES,
            })),
            Message::GetConfigRequest => Some(Message::GetConfigReply(self.config)),
            Message::SetConfig(c) => {
                if c.flags != 0 {
                    return self.error(v, xid, OfError::SWITCH_CONFIG_FAILED_BAD_FLAGS, bytes);
                }
                self.config = c;
                None
            }
            Message::BarrierRequest => Some(Message::BarrierReply),
            Message::RoleRequest(r) => {
                if r.role != 0 {
                    self.role = r.role;
                }
                Some(Message::RoleReply(Role { role: self.role, generation_id: r.generation_id }))
            }
            Message::MultipartRequest(req) => return self.multipart(v, xid, req.body, bytes),
            Message::FlowMod(fm) => {
                let mut run = FlowModRun::default();
                run.push(xid, bytes, flow_op(&fm));
                return self.flush(&mut run);
            }
            Message::Experimenter(_) => return self.error(v, xid, BAD_EXPERIMENTER, bytes),
            Message::BundleControl(bc) => return self.bundle_control(v, xid, bc, bytes),
            Message::BundleAdd(ba) => return self.bundle_add(v, xid, ba, bytes),
            _ => return self.error(v, xid, OfError::BAD_REQUEST_BAD_TYPE, bytes),
        };
        match reply {
            Some(m) => self.send(v, xid, &m),
            None => Ok(()),
        }
    }

    fn multipart(&mut self, v: u8, xid: u32, body: MultipartRequestBody, bytes: &[u8]) -> Result<(), End> {
        let one = |b: MultipartReplyBody| vec![b];
        let parts: Vec<MultipartReplyBody> = match body {
            MultipartRequestBody::Desc => one(MultipartReplyBody::Desc(Desc {
                mfr_desc: "rqvs".into(),
                hw_desc: "rqvs userspace switch".into(),
                sw_desc: format!("rqvs {}", env!("CARGO_PKG_VERSION")),
                serial_num: "None".into(),
                dp_desc: format!("rqvs switch ({})", self.control.design().name()),
            })),
            MultipartRequestBody::PortDesc => one(MultipartReplyBody::PortDesc(self.ports())),
            MultipartRequestBody::PortStats { port_no } => {
                let report = self.control.show();
                let stats: Vec<PortStats> = report
                    .ports
                    .iter()
                    .filter(|p| port_no == OFPP_ANY || p.port == port_no)
                    .map(|p| PortStats {
                        port_no: p.port,
                        duration_sec: report.uptime_s as u32,
                        rx_packets: p.rx_packets,
                        tx_packets: p.tx_packets,
                        rx_dropped: p.rx_lost,
                        tx_dropped: p.tx_dropped,
                        rx_errors: p.rx_errors,
                        tx_errors: p.tx_errors,
                        ..PortStats::default()
                    })
                    .collect();
                one(MultipartReplyBody::PortStats(stats))
            }
            MultipartRequestBody::Table => one(MultipartReplyBody::Table(vec![TableStats {
                table_id: 0,
                active_count: self.control.rules().len() as u32,
                lookup_count: 0,
                matched_count: 0,
            }])),
            MultipartRequestBody::Flow(req) => match stats_filter(&req) {
                None => one(MultipartReplyBody::Flow(Vec::new())),
                Some(f) => {
                    let flows = flow_stats(&self.control.flow_stats(&f), &f, v);
                    if flows.is_empty() {
                        one(MultipartReplyBody::Flow(Vec::new()))
                    } else {
                        flows.chunks(PART).map(|c| MultipartReplyBody::Flow(c.to_vec())).collect()
                    }
                }
            },
            MultipartRequestBody::Aggregate(req) => {
                let flows = match stats_filter(&req) {
                    None => Vec::new(),
                    Some(f) => flow_stats(&self.control.flow_stats(&f), &f, v),
                };
                one(MultipartReplyBody::Aggregate(AggregateStats {
                    packet_count: flows.iter().map(|s| s.packet_count).sum(),
                    byte_count: flows.iter().map(|s| s.byte_count).sum(),
                    flow_count: flows.len() as u32,
                }))
            }
            MultipartRequestBody::Other { .. } => {
                return self.error(v, xid, OfError::BAD_REQUEST_BAD_MULTIPART, bytes);
            }
        };
        let n = parts.len();
        for (i, body) in parts.into_iter().enumerate() {
            let flags = if i + 1 < n { MORE } else { 0 };
            self.send_part(v, xid, flags, body)?;
        }
        Ok(())
    }

    /// Sends one part, split further when it does not fit one message.
    fn send_part(&mut self, v: u8, xid: u32, flags: u16, body: MultipartReplyBody) -> Result<(), End> {
        let msg = Message::MultipartReply(MultipartReply { flags, body });
        match encode(v, xid, &msg) {
            Ok(b) => self.stream.write_all(&b).map_err(|_| End::Closed),
            Err(e) => {
                let Message::MultipartReply(MultipartReply { body: MultipartReplyBody::Flow(f), .. }) = msg else {
                    eprintln!("rqvs switch: openflow {}: cannot encode a reply: {e} (a bug)", self.peer);
                    return Err(End::Fatal);
                };
                if f.len() <= 1 {
                    eprintln!("rqvs switch: openflow {}: a flow does not fit a reply: {e}", self.peer);
                    return Err(End::Fatal);
                }
                let (a, b) = f.split_at(f.len() / 2);
                self.send_part(v, xid, MORE, MultipartReplyBody::Flow(a.to_vec()))?;
                self.send_part(v, xid, flags, MultipartReplyBody::Flow(b.to_vec()))
            }
        }
    }

    fn ports(&self) -> Vec<Port> {
        let report = self.control.show();
        report
            .ports
            .iter()
            .map(|p| Port {
                port_no: p.port,
                hw_addr: [0x02, 0x72, 0x71, 0x76, (p.port >> 8) as u8, p.port as u8],
                name: short_name(&p.name, p.port),
                config: 0,
                // OFPPS_LINK_DOWN, or OFPPS_LIVE.
                state: if p.link == "down" { 1 } else { 4 },
                ethernet: None,
                properties: Vec::new(),
            })
            .collect()
    }

    /// BUNDLE_CONTROL: open, close, commit (one atomic change set: [`Control::apply_ops`]),
    /// discard.
    fn bundle_control(&mut self, v: u8, xid: u32, bc: BundleControl, bytes: &[u8]) -> Result<(), End> {
        let id = bc.bundle_id;
        let reply_kind = match bc.kind {
            bundle::OPEN_REQUEST => {
                if self.bundles.contains_key(&id) {
                    return self.error(v, xid, OfError::BUNDLE_FAILED_BUNDLE_EXIST, bytes);
                }
                if bc.flags & !(bundle::ATOMIC | bundle::ORDERED) != 0 {
                    return self.error(v, xid, OfError::BUNDLE_FAILED_BAD_FLAGS, bytes);
                }
                if self.bundles.len() >= MAX_BUNDLES {
                    return self.error(v, xid, OfError::BUNDLE_FAILED_OUT_OF_BUNDLES, bytes);
                }
                self.bundles.insert(id, Bundle { flags: bc.flags, closed: false, ops: Vec::new() });
                bundle::OPEN_REPLY
            }
            bundle::CLOSE_REQUEST => match self.bundles.get_mut(&id) {
                None => return self.error(v, xid, OfError::BUNDLE_FAILED_BAD_ID, bytes),
                Some(b) if b.closed => return self.error(v, xid, OfError::BUNDLE_FAILED_BUNDLE_CLOSED, bytes),
                Some(b) => {
                    b.closed = true;
                    bundle::CLOSE_REPLY
                }
            },
            bundle::COMMIT_REQUEST => {
                let Some(b) = self.bundles.remove(&id) else {
                    return self.error(v, xid, OfError::BUNDLE_FAILED_BAD_ID, bytes);
                };
                if let Err(e) = self.control.apply_ops(&b.ops) {
                    eprintln!("rqvs switch: openflow {}: bundle {id} refused, nothing changed: {e}", self.peer);
                    return self.error(v, xid, OfError::BUNDLE_FAILED_MSG_FAILED, bytes);
                }
                bundle::COMMIT_REPLY
            }
            bundle::DISCARD_REQUEST => {
                if self.bundles.remove(&id).is_none() {
                    return self.error(v, xid, OfError::BUNDLE_FAILED_BAD_ID, bytes);
                }
                bundle::DISCARD_REPLY
            }
            _ => return self.error(v, xid, OfError::BUNDLE_FAILED_BAD_TYPE, bytes),
        };
        let flags = self.bundles.get(&id).map_or(bc.flags, |b| b.flags);
        let reply = BundleControl { bundle_id: id, kind: reply_kind, flags, properties: Vec::new() };
        self.send(v, xid, &Message::BundleControl(reply))
    }

    /// BUNDLE_ADD_MESSAGE: a FLOW_MOD checked now and kept for the commit (an unknown bundle
    /// is opened, as the spec allows).
    fn bundle_add(&mut self, v: u8, xid: u32, ba: BundleAdd, bytes: &[u8]) -> Result<(), End> {
        if !self.bundles.contains_key(&ba.bundle_id) && self.bundles.len() >= MAX_BUNDLES {
            return self.error(v, xid, OfError::BUNDLE_FAILED_OUT_OF_BUNDLES, bytes);
        }
        let b = self.bundles.entry(ba.bundle_id).or_insert(Bundle { flags: ba.flags, closed: false, ops: Vec::new() });
        if b.closed {
            return self.error(v, xid, OfError::BUNDLE_FAILED_BUNDLE_CLOSED, bytes);
        }
        if b.ops.len() >= MAX_BUNDLE_MSGS {
            return self.error(v, xid, OfError::BUNDLE_FAILED_MSG_TOO_MANY, bytes);
        }
        let fm = match ba.inner() {
            Ok((_, Message::FlowMod(fm))) => fm,
            Ok(_) => return self.error(v, xid, OfError::BUNDLE_FAILED_MSG_UNSUP, bytes),
            Err(e) => return self.error(v, xid, e.of_error(), bytes),
        };
        match flow_op(&fm) {
            Ok(op) => {
                b.ops.extend(op);
                Ok(())
            }
            Err((e, why)) => {
                eprintln!("rqvs switch: openflow {}: bundled flow_mod refused: {why}", self.peer);
                self.error(v, xid, e, bytes)
            }
        }
    }
}

/// Why a FLOW_MOD is refused: the OpenFlow error, and the reason for the log.
type Refusal = (OfError, String);

/// FLOW_MODs taken from the read buffer and not yet applied: `(xid, bytes, what it asks)` in
/// the order they came (`Ok(true)`: an op in `ops`; `Ok(false)`: nothing to do; `Err`: refused
/// before the table).
#[derive(Default)]
struct FlowModRun {
    items: Vec<(u32, Vec<u8>, Result<bool, Refusal>)>,
    ops: Vec<FlowOp>,
}

impl FlowModRun {
    /// Takes `msg` into the run when it is a FLOW_MOD of the negotiated version that decodes
    /// (anything else — another message, a version mismatch, a decode error — is handled on
    /// its own, after the run is applied).
    fn take(&mut self, version: Option<u8>, msg: &[u8]) -> bool {
        if version != Some(msg[0]) || msg[1] != kind::FLOW_MOD {
            return false;
        }
        let Ok((h, Message::FlowMod(fm))) = decode(msg) else { return false };
        self.push(h.xid, msg, flow_op(&fm));
        true
    }

    fn push(&mut self, xid: u32, msg: &[u8], op: Result<Option<FlowOp>, (OfError, String)>) {
        let item = op.map(|op| match op {
            Some(op) => {
                self.ops.push(op);
                true
            }
            None => false,
        });
        self.items.push((xid, msg.to_vec(), item));
    }
}

/// An open bundle of a connection.
struct Bundle {
    flags: u16,
    closed: bool,
    ops: Vec<FlowOp>,
}

/// What a FLOW_MOD asks of the table (`None`: nothing, e.g. a delete by group), or the error it
/// is refused with.
fn flow_op(fm: &FlowMod) -> Result<Option<FlowOp>, (OfError, String)> {
    let is_add = matches!(fm.command, FlowModCommand::Add);
    let is_modify = matches!(fm.command, FlowModCommand::Modify | FlowModCommand::ModifyStrict);
    let table_ok = fm.table_id == 0 || (!is_add && !is_modify && fm.table_id == OFPTT_ALL);
    if !table_ok {
        return Err((
            OfError::FLOW_MOD_FAILED_BAD_TABLE_ID,
            format!("table {} (the switch has one table, 0)", fm.table_id),
        ));
    }
    if (is_add || is_modify) && fm.buffer_id != OFP_NO_BUFFER {
        return Err((BUFFER_UNKNOWN, format!("buffer {} (the switch buffers no packets)", fm.buffer_id)));
    }
    if (is_add || is_modify) && fm.actions.0.iter().any(|a| !a.is_executable()) {
        return Err((
            OfError::BAD_ACTION_BAD_TYPE,
            format!("actions {}: not all are ones the switch executes ({})", fm.actions, crate::EXECUTED_ACTIONS),
        ));
    }
    let strict = matches!(fm.command, FlowModCommand::ModifyStrict | FlowModCommand::DeleteStrict);
    let filter = FlowFilter {
        matches: Some(fm.matches),
        strict: strict.then_some(u32::from(fm.priority)),
        cookie: (fm.cookie, fm.cookie_mask),
        out_port: (fm.out_port != OFPP_ANY).then_some(fm.out_port),
    };
    Ok(match fm.command {
        FlowModCommand::Add => Some(FlowOp::Add(
            fm.to_rule(0),
            FlowSpec {
                idle_timeout: fm.idle_timeout,
                hard_timeout: fm.hard_timeout,
                flags: fm.flags,
                importance: fm.importance,
            },
        )),
        // out_port filters deletes only (OpenFlow 1.3 §A.3.4.1). A modify keeps the flows'
        // timeouts and flags (OVS); only RESET_COUNTS counts.
        FlowModCommand::Modify | FlowModCommand::ModifyStrict => {
            let counts = if fm.flags & OFPFF_RESET_COUNTS != 0 { Counts::Reset } else { Counts::Keep };
            Some(FlowOp::Modify(FlowFilter { out_port: None, ..filter }, fm.actions.clone(), counts))
        }
        // No groups: no flow outputs to one.
        FlowModCommand::Delete | FlowModCommand::DeleteStrict if fm.out_group != OFPG_ANY => None,
        FlowModCommand::Delete | FlowModCommand::DeleteStrict => Some(FlowOp::Delete(filter)),
    })
}

/// The selection of a FLOW/AGGREGATE request (`None`: nothing can match, e.g. another table).
fn stats_filter(req: &FlowStatsRequest) -> Option<FlowFilter> {
    if req.table_id != 0 && req.table_id != OFPTT_ALL || req.out_group != OFPG_ANY {
        return None;
    }
    Some(FlowFilter {
        matches: Some(req.matches),
        strict: None,
        cookie: (req.cookie, req.cookie_mask),
        out_port: (req.out_port != OFPP_ANY).then_some(req.out_port),
    })
}

/// One entry per OpenFlow flow of `flows` (a rule with port ranges is several OpenFlow flows,
/// as `ovs-ofctl` writes it; each entry must still be selected by `f`'s match; the rule's
/// counts go with the first). Priorities above 16 bits (ClassBench sets) are reported as
/// 65535; the importance only in 1.4 (1.3 has none).
fn flow_stats(flows: &[FlowStat], f: &FlowFilter, version: u8) -> Vec<FlowStats> {
    let mut out = Vec::new();
    for s in flows {
        let (r, meta) = (&s.rule, &s.meta);
        let mut counts = Some(s.counts);
        for m in r.matches.expand_port_ranges() {
            if let Some(g) = &f.matches {
                if !crate::table::covers(g, &m) {
                    continue;
                }
            }
            let c = counts.take().unwrap_or_default();
            out.push(FlowStats {
                table_id: 0,
                duration_sec: (s.duration_ns / 1_000_000_000).min(u64::from(u32::MAX)) as u32,
                duration_nsec: (s.duration_ns % 1_000_000_000) as u32,
                priority: u16::try_from(r.priority).unwrap_or(u16::MAX),
                idle_timeout: meta.idle_timeout,
                hard_timeout: meta.hard_timeout,
                flags: meta.flags,
                importance: if version >= OFP14 { meta.importance } else { 0 },
                cookie: r.cookie,
                packet_count: c.packets,
                byte_count: c.bytes,
                matches: m,
                actions: r.actions.clone(),
            });
        }
    }
    out
}

/// A port's OpenFlow name (at most 15 bytes): its own, or the last part of a path, or `pN`.
fn short_name(name: &str, port: u32) -> String {
    if name.len() <= 15 && !name.contains('\0') {
        return name.to_string();
    }
    let tail = name.rsplit(['/', ':']).next().unwrap_or("");
    if !tail.is_empty() && tail.len() <= 15 {
        return tail.to_string();
    }
    format!("p{port}")
}
