//! One OpenFlow connection, passive or active: a reader thread that frames and handles
//! messages (the table in the module docs of [`crate::openflow`]), and a writer thread that
//! writes what the reader and the packet-in thread queue for it ([`super::WRITE_QUEUE`]).
//! Active connections (`--controller`) are also probed for inactivity and tell the fail-open
//! watch when they are admitted ([`super::controller`]).

use std::fmt::Display;
use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rqvs_flow::Rule;
use rqvs_openflow::bundle::{self, BundleAdd, BundleControl};
use rqvs_openflow::flow_mod::{
    AggregateStats, FlowMod, FlowModCommand, FlowStats, FlowStatsRequest, OFPFF_RESET_COUNTS, OFPG_ANY, OFPTT_ALL,
    OFP_NO_BUFFER,
};
use rqvs_openflow::group::{GroupFeatures, MeterFeatures};
use rqvs_openflow::message::{bitmap_of, kind, ErrorMsg, Features, Hello, Role, SwitchConfig as OfConfig};
use rqvs_openflow::multipart::{
    Desc, MultipartReply, MultipartReplyBody, MultipartRequestBody, PortStats, TableStats, MORE, OFPP_ANY,
};
use rqvs_openflow::of10_async::is_packet_in;
use rqvs_openflow::port::Port;
use rqvs_openflow::table_features::TableFeatures;
use rqvs_openflow::{decode, encode, negotiate, Header, Message, OfError, OFP10, OFP13, OFP14};

use super::bundled::Bundled;
use super::transport::{Halves, Socket, Stream};
use super::{
    controller, packet_out, Hub, Peer, MAX_BUNDLES, MAX_BUNDLE_MSGS, MAX_RUN, ROLE_EQUAL, ROLE_SLAVE, WRITE_QUEUE,
};
use crate::flowstats::FlowStat;
use crate::{Counts, FlowFilter, FlowOp, FlowSpec, OpError};
use rqvs_ofproto::meters::MeterTable;

mod of10;

/// The versions the switch speaks: OpenFlow 1.0 (with Nicira's extensions, [`of10`]), 1.3, 1.4.
const VERSIONS: [u8; 3] = [OFP10, OFP13, OFP14];

/// `OFPBRC_BAD_EXPERIMENTER`.
const BAD_EXPERIMENTER: OfError = OfError { kind: 1, code: 3 };
/// `OFPRRFC_STALE`: a MASTER/SLAVE request whose generation_id is older than the last one.
const STALE: OfError = OfError { kind: 11, code: 0 };
/// `OFPRRFC_BAD_ROLE`: a role other than NOCHANGE, EQUAL, MASTER, SLAVE.
const BAD_ROLE: OfError = OfError { kind: 11, code: 2 };
/// `OFPTFFC_EPERM`: the table features cannot be changed.
const TABLE_FEATURES_EPERM: OfError = OfError { kind: 13, code: 5 };
/// `OFPC_FLOW_STATS | OFPC_TABLE_STATS | OFPC_PORT_STATS | OFPC_GROUP_STATS`.
const CAPABILITIES: u32 = 1 | 2 | 4 | 8;
/// The tables the switch reports (0..=254, every one usable: FEATURES' n_tables is a u8).
const N_TABLES: u8 = 255;
/// TABLE_FEATURES entries per reply part (each is about a kilobyte).
const FEATURES_PART: usize = 32;
/// Entries per MULTIPART_REPLY part (well below 64 KiB; halved when a part is still too big).
const PART: usize = 128;
/// Bytes read from a connection at a time.
const READ_CHUNK: usize = 256 * 1024;
/// An active connection connected this long counts as admitted whatever it sent (OVS's rconn).
const ADMIT_AFTER: Duration = Duration::from_secs(30);
/// `ETIMEDOUT` as OVS words it (a probe unanswered, no HELLO in time).
const TIMED_OUT: &str = "Connection timed out";

/// How long a read waits before the connection looks at the clock (probes, stop).
const READ_TICK: Duration = Duration::from_millis(50);

/// Who opened the connection.
#[derive(Clone)]
pub(crate) enum Kind {
    /// A client connected to a listener: `--openflow`, the management socket (`cell` `None`:
    /// OVS's defaults, never probed), or a `Controller` row's `ptcp:`/`pssl:`/`punix:` target
    /// (`cell`: the row's settings, shared by the listener's connections — OVS's
    /// `ofservice` settings: probed as an active connection is, rate-limited, its queue size,
    /// its async messages enabled or not; ended when the row's DSCP changes).
    Passive { cell: Option<Arc<controller::ControllerCell>> },
    /// The switch connected to a `--controller`; probed after its cell's probe interval of
    /// silence (read at each tick: it changes live), its state kept there. Without the HELLO
    /// exchanged by `hello_by` it ends (OVS's rconn CONNECTING timeout).
    Active { cell: Arc<controller::ControllerCell>, hello_by: Instant },
}

/// Runs one connection to its end (the peer closes it, it fails, a probe goes unanswered, or
/// the switch stops): registers it with the hub, starts its writer thread, reads and handles
/// messages; then unregisters it and waits for the writer. `retired`: the connection ends
/// when it is set too (its controller or listener removed while the switch runs). True when
/// it ended for want of a HELLO exchange by its `hello_by` (an active connection's CONNECTING
/// timeout).
pub(crate) fn serve(stream: Stream, peer: impl Display, hub: &Arc<Hub>, kind: Kind, retired: &Arc<AtomicBool>) -> bool {
    match stream.socket() {
        Ok(socket) => socket.prepare(READ_TICK, Duration::from_secs(10)),
        Err(e) => {
            crate::log_warn!("rqvs switch: openflow {peer}: {e}");
            return false;
        }
    }
    let scheme = stream.scheme();
    let (out, queue) = mpsc::sync_channel(WRITE_QUEUE);
    // The packet-ins in `queue` ([`super::Peer::pins`]): counted up when queued, down when written.
    let pins = Arc::new(AtomicUsize::new(0));
    let Halves { reader, writer: writer_half, socket } = match stream.split(out.clone()) {
        Ok(h) => h,
        Err(e) => {
            crate::log_warn!("rqvs switch: openflow {peer}: {e}");
            return false;
        }
    };
    let name = match kind {
        Kind::Passive { .. } if scheme == "tcp" => peer.to_string(),
        Kind::Passive { .. } => format!("{scheme}:{peer}"),
        Kind::Active { .. } => format!("controller {scheme}:{peer}"),
    };
    let closer = match socket.try_clone() {
        Ok(s) => s,
        Err(e) => {
            crate::log_warn!("rqvs switch: openflow {peer}: {e}");
            return false;
        }
    };
    let writer = match std::thread::Builder::new().name("of-writer".into()).spawn({
        let pins = pins.clone();
        move || write_all(writer_half, closer, &queue, &pins)
    }) {
        Ok(t) => t,
        Err(e) => {
            crate::log_warn!("rqvs switch: openflow {peer}: no writer thread: {e}");
            return false;
        }
    };
    let (cell, active) = match &kind {
        Kind::Active { cell, .. } => (Some(cell.clone()), true),
        Kind::Passive { cell } => (cell.clone(), false),
    };
    let dscp = cell.as_ref().map(|c| c.settings().dscp);
    let me = hub.register(name.clone(), active, cell.clone(), out.clone(), pins);
    let mut c = Connection {
        stream: reader,
        name,
        hub: hub.clone(),
        me: me.clone(),
        out,
        kind,
        version: None,
        config: OfConfig { flags: 0, miss_send_len: me.miss_send_len.load(Ordering::Relaxed) },
        bundles: std::collections::HashMap::new(),
        connected: Instant::now(),
        last_rx: Instant::now(),
        probe_sent: None,
        admitted: false,
        packet_outs_pending: false,
        of10: of10::State::default(),
        pending: None,
        socket: socket.try_clone().ok(),
        retired: retired.clone(),
        end: None,
        hello_timed_out: false,
        dscp,
    };
    c.run();
    let _ = c.settle_pending();
    if let Some(cell) = cell.filter(|_| active) {
        cell.disconnected(c.end.take());
    }
    hub.unregister(me.id);
    if c.admitted {
        controller::gone(hub);
    }
    // The writer ends once every sender is gone (the connection's, the hub's entry) and it has
    // written what was queued — a last ERROR (HELLO_FAILED, BAD_LEN) reaches the peer before the
    // close. When the switch stops, the socket is shut down first: a write blocked on a dead
    // peer fails at once. (The reader goes too: a TLS reader holds the queue to wake the writer.)
    let Connection { stream, out, me: entry, hello_timed_out, .. } = c;
    drop((stream, out, entry, me));
    if hub.control.stop_requested() || retired.load(Ordering::Relaxed) {
        let _ = socket.shutdown(Shutdown::Both);
    }
    let _ = writer.join();
    let _ = socket.shutdown(Shutdown::Both);
    hello_timed_out
}

/// The writer thread: writes queued messages in order until the queue closes or a write fails;
/// flushes (TLS: encrypts and sends) whenever the queue is empty. An empty message only flushes
/// (a TLS reader's wake-up).
fn write_all(mut stream: Box<dyn Write + Send>, socket: Socket, queue: &Receiver<Vec<u8>>, pins: &AtomicUsize) {
    while let Ok(bytes) = queue.recv() {
        let mut ok = write_one(&mut stream, &bytes, pins);
        while ok {
            match queue.try_recv() {
                Ok(more) => ok = write_one(&mut stream, &more, pins),
                Err(_) => break,
            }
        }
        if !ok || stream.flush().is_err() {
            // The reader sees the end too.
            let _ = socket.shutdown(Shutdown::Both);
            // Drain, so senders never wait on a dead connection.
            while queue.recv().is_ok() {}
            return;
        }
    }
}

/// Writes one queued message; a PACKET_IN written is no longer waiting (`controller_queue_size`,
/// [`super::Peer::pins`]). False when the write failed.
pub(super) fn write_one(stream: &mut Box<dyn Write + Send>, bytes: &[u8], pins: &AtomicUsize) -> bool {
    let ok = stream.write_all(bytes).is_ok();
    if is_packet_in(bytes) {
        pins.fetch_sub(1, Ordering::Relaxed);
    }
    ok
}

struct Connection {
    /// The read side (the writer thread has the write side).
    stream: Box<dyn Read + Send>,
    name: String,
    hub: Arc<Hub>,
    /// This connection in the hub (version, role, miss_send_len for the packet-in thread).
    me: Arc<Peer>,
    /// The writer thread's queue.
    out: SyncSender<Vec<u8>>,
    kind: Kind,
    /// The negotiated version (`None` before HELLO).
    version: Option<u8>,
    config: OfConfig,
    /// Open bundles by id (discarded when the connection ends).
    bundles: std::collections::HashMap<u32, Bundle>,
    connected: Instant,
    /// When the peer last sent anything, and when a probe went out unanswered.
    last_rx: Instant,
    probe_sent: Option<Instant>,
    /// An active connection the fail-open watch counts as a controller.
    admitted: bool,
    /// Packet-outs handed to PMDs since the last BARRIER.
    packet_outs_pending: bool,
    /// What an OpenFlow 1.0 connection's Nicira requests set.
    of10: of10::State,
    /// The run of FLOW_MODs in flight (CFLOWS: [`crate::commit_pipeline`]) and the
    /// BARRIER_REQUESTs that came after it, answered once it is.
    pending: Option<PendingRun>,
    /// The socket, for a short read timeout while a barrier waits on the run in flight.
    socket: Option<Socket>,
    /// Set when its controller or listener is removed ([`serve`]).
    retired: Arc<AtomicBool>,
    /// Why the connection ended, as OVS words it for `Controller.status:last_error` (`None`:
    /// closed by the switch).
    end: Option<String>,
    /// An active connection ended for want of a HELLO by its `hello_by`.
    hello_timed_out: bool,
    /// The DSCP its controller's settings had when it started (`None`: it has none).
    dscp: Option<u8>,
}

/// A run of FLOW_MODs in flight: its flow-mods (as [`FlowModRun::items`]) and their effects in
/// the table of record, and the BARRIER_REQUESTs (whole messages) that came after it.
struct PendingRun {
    items: Vec<(u32, Quote, Result<bool, Refusal>)>,
    effects: Vec<Result<rqvs_ofproto::record::OpEffect, OpError>>,
    barriers: Vec<Vec<u8>>,
}

/// Why a connection ends.
enum End {
    Closed,
    Fatal,
}

impl Connection {
    fn run(&mut self) {
        if self.send(OFP14, 0, &Message::Hello(Hello::with_versions(&VERSIONS))).is_err() {
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
                    let _ = self.settle_pending();
                    let _ = self.error(v, xid, OfError::BAD_REQUEST_BAD_LEN, &head);
                    return;
                }
                if head.len() < len {
                    break;
                }
                let msg = &buf[pos..pos + len];
                pos += len;
                self.admit(msg[1]);
                // A slave's FLOW_MODs are refused one by one (IS_SLAVE) in `handle`.
                if !self.is_slave() && run.take(self.version, msg, self.of10.table_id_ext, self.hub.control.meters()) {
                    if run.ops.len() >= MAX_RUN && self.flush(&mut run).is_err() {
                        return;
                    }
                    continue;
                }
                if self.flush(&mut run).is_err() {
                    return;
                }
                // A BARRIER after a run in flight waits with it (module docs of
                // `crate::commit_pipeline`); anything else waits for that run first.
                if self.is_barrier(msg) {
                    if let Some(p) = self.pending.as_mut() {
                        p.barriers.push(msg.to_vec());
                        continue;
                    }
                }
                if self.settle_pending().is_err() || self.handle(msg).is_err() {
                    return;
                }
            }
            buf.drain(..pos);
            if self.flush(&mut run).is_err()
                || self.hub.control.stop_requested()
                || self.retired.load(Ordering::Relaxed)
                || !self.probe()
            {
                return;
            }
            // A barrier waiting: read what is there already (a controller streaming on: the
            // next run is recorded while this one is applied); when nothing is, the controller
            // may be waiting for the reply (or there is no socket to ask) — wait for the run's
            // answer and answer the barrier at once. (Not a short read timeout: the kernel rounds one up to a clock tick, 4 ms
            // here, which made `ovs-ofctl add-flows` — a flow-mod and a barrier at a time —
            // ~120 flow-mods a second.)
            let waiting = self.pending.as_ref().is_some_and(|p| !p.barriers.is_empty());
            if waiting && !self.socket.as_ref().is_some_and(Socket::readable_now) {
                if self.settle_pending().is_err() {
                    return;
                }
                continue;
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    self.end = Some("End of file".into());
                    return;
                }
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    self.last_rx = Instant::now();
                    if self.probe_sent.take().is_some() {
                        self.set_state(controller::RconnState::Active);
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {
                    // Nothing more came: the run in flight is answered, its barriers too.
                    if self.settle_pending().is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == ErrorKind::InvalidData => {
                    // A TLS failure (a certificate the CA did not sign, a protocol error).
                    crate::log_warn!("rqvs switch: openflow {}: {e}: disconnecting", self.name);
                    self.end = Some(controller::strerror(&e));
                    return;
                }
                Err(e) => {
                    self.end = Some(controller::strerror(&e));
                    return;
                }
            }
        }
    }

    /// The inactivity probe of an active connection, or a passive one with a controller's
    /// settings: an ECHO_REQUEST after `probe` of silence, the end after as long again. False:
    /// close the connection.
    fn probe(&mut self) -> bool {
        let passive = matches!(self.kind, Kind::Passive { .. });
        if passive && self.version.is_none() && self.connected.elapsed() >= self.hub.hello_timeout {
            // Connected and silent (or a TLS handshake left unfinished): a slot held for nothing.
            crate::log_warn!(
                "rqvs switch: openflow {}: no HELLO within {:.0} s: disconnecting",
                self.name,
                self.hub.hello_timeout.as_secs_f64()
            );
            self.hub.hello_timeouts.fetch_add(1, Ordering::Relaxed);
            self.end = Some(TIMED_OUT.into());
            return false;
        }
        let (cell, hello_by) = match &self.kind {
            Kind::Passive { cell: None } => return true,
            Kind::Passive { cell: Some(cell) } => {
                if Some(cell.settings().dscp) != self.dscp {
                    // OVS's `rconn_reconnect` of an accepted connection: it is closed (the
                    // client connects again, with the new DSCP).
                    crate::log_info!("rqvs switch: openflow {}: DSCP changed: disconnecting", self.name);
                    return false;
                }
                (cell.clone(), None)
            }
            Kind::Active { cell, hello_by } => (cell.clone(), Some(*hello_by)),
        };
        if hello_by.is_some() && cell.take_reconnect() {
            // Its DSCP changed: reconnect with the new one (OVS's `rconn_reconnect`).
            crate::log_info!("rqvs switch: openflow {}: DSCP changed: reconnecting", self.name);
            return false;
        }
        let Some(v) = self.version else {
            // CONNECTING: no HELLO exchanged within max(1 s, backoff) (OVS's rconn); a passive
            // connection's wait for HELLO is the hub's, above.
            if hello_by.is_some_and(|by| Instant::now() >= by) {
                self.hello_timed_out = true;
                self.end = Some(TIMED_OUT.into());
                return false;
            }
            return true;
        };
        let probe = cell.timing().probe;
        if probe.is_zero() {
            return true; // probing disabled (`inactivity_probe=0`)
        }
        match self.probe_sent {
            None if self.last_rx.elapsed() >= probe => {
                self.probe_sent = Some(Instant::now());
                self.set_state(controller::RconnState::Idle);
                self.send(v, 0, &Message::EchoRequest(Vec::new())).is_ok()
            }
            Some(t) if t.elapsed() >= probe => {
                crate::log_warn!(
                    "rqvs switch: openflow {}: no answer to the inactivity probe after {:.0} s: disconnecting",
                    self.name,
                    (self.last_rx.elapsed()).as_secs_f64()
                );
                self.end = Some(TIMED_OUT.into());
                false
            }
            _ => true,
        }
    }

    /// An active connection's state for `Controller.status` (a passive one has none).
    fn set_state(&self, state: controller::RconnState) {
        if let Kind::Active { cell, .. } = &self.kind {
            cell.rconn().state = state;
        }
    }

    /// Admission of an active connection (OVS's `rconn`): a message of type `kind` other than
    /// the handshake's, or 30 s connected.
    fn admit(&mut self, kind: u8) {
        if self.admitted || !matches!(self.kind, Kind::Active { .. }) || self.version.is_none() {
            return;
        }
        // HELLO, ERROR, ECHO_REQUEST/REPLY, EXPERIMENTER, FEATURES_REQUEST/REPLY,
        // GET_CONFIG_REQUEST/REPLY, SET_CONFIG (0..=9), GET_ASYNC (26, 27), QUEUE_GET_CONFIG (22, 23).
        let handshake = kind <= 9 || matches!(kind, 22 | 23 | 26 | 27);
        if !handshake || self.connected.elapsed() >= ADMIT_AFTER {
            self.admitted = true;
            controller::admitted(&self.hub);
        }
    }

    /// Applies a run of FLOW_MODs ([`crate::Control::apply_each_pipelined`]: each on its own,
    /// one commit for all; in CFLOWS possibly left in flight while the next run is read) and
    /// sends the errors of the refused ones, in the order they came — for a run left in flight,
    /// once its outcome is known, after those of the run before it.
    fn flush(&mut self, run: &mut FlowModRun) -> Result<(), End> {
        if run.items.is_empty() {
            return Ok(());
        }
        let Some(v) = self.version else { return Ok(()) };
        let origin = crate::events::Origin::set(self.me.id, run.items.iter().map(|(xid, _, _)| *xid).collect());
        let piped = self.hub.control.apply_each_pipelined(self.me.id, &run.ops);
        drop(origin);
        run.ops.clear();
        if let Some(p) = self.pending.take() {
            self.answer(v, p, piped.before.unwrap_or(Ok(())))?;
        }
        let items = std::mem::take(&mut run.items);
        if piped.pending {
            self.pending = Some(PendingRun { items, effects: piped.effects, barriers: Vec::new() });
            return Ok(());
        }
        self.report(v, items, piped.effects)
    }

    /// Waits for the run in flight (if any) and sends its errors, then answers the barriers
    /// that waited on it.
    fn settle_pending(&mut self) -> Result<(), End> {
        let Some(p) = self.pending.take() else { return Ok(()) };
        let outcome = self.hub.control.settle_pipelined(self.me.id).unwrap_or(Ok(()));
        match self.version {
            Some(v) => self.answer(v, p, outcome),
            None => Ok(()),
        }
    }

    /// A run's outcome is known: its errors (every flow-mod's when the manager refused it), then
    /// the barriers after it.
    fn answer(&mut self, v: u8, p: PendingRun, outcome: Result<(), String>) -> Result<(), End> {
        let effects = match outcome {
            Ok(()) => p.effects,
            Err(e) => p.effects.iter().map(|_| Err(OpError::Invalid(e.clone()))).collect(),
        };
        self.report(v, p.items, effects)?;
        for b in p.barriers {
            self.handle(&b)?;
        }
        Ok(())
    }

    /// Whether `msg` is a BARRIER_REQUEST of the negotiated version.
    fn is_barrier(&self, msg: &[u8]) -> bool {
        let barrier = if msg[0] == OFP10 { rqvs_openflow::of10::kind::BARRIER_REQUEST } else { kind::BARRIER_REQUEST };
        self.version == Some(msg[0]) && msg[1] == barrier && msg.len() == Header::LEN
    }

    /// Sends the errors of a run's refused flow-mods, in the order they came (`effects`: the
    /// table's answer to each `Ok(true)` item, in order).
    fn report(
        &mut self,
        v: u8,
        items: Vec<(u32, Quote, Result<bool, Refusal>)>,
        effects: Vec<Result<rqvs_ofproto::record::OpEffect, OpError>>,
    ) -> Result<(), End> {
        let mut results = effects.into_iter();
        let mut refusals = 0usize;
        for (xid, bytes, item) in items {
            let refused = match item {
                Ok(false) => None,
                Ok(true) => match results.next() {
                    Some(Ok(_)) | None => None,
                    Some(Err(OpError::Overlap(why))) => Some((OfError::FLOW_MOD_FAILED_OVERLAP, why)),
                    Some(Err(OpError::TableFull(why))) => Some((OfError::FLOW_MOD_FAILED_TABLE_FULL, why)),
                    Some(Err(OpError::Invalid(e))) => Some((OfError::FLOW_MOD_FAILED_UNKNOWN, e)),
                    Some(Err(OpError::Of(e, why))) => Some((e, why)),
                },
                Err(e) => Some(e),
            };
            if let Some((e, why)) = refused {
                // One line per run, however many a controller sends.
                if refusals == 0 {
                    crate::log_warn!("rqvs switch: openflow {}: flow_mod refused: {why}", self.name);
                }
                refusals += 1;
                self.error(v, xid, e, bytes.as_slice())?;
            }
        }
        if refusals > 1 {
            crate::log_warn!(
                "rqvs switch: openflow {}: {} more flow_mods of that run refused",
                self.name,
                refusals - 1
            );
        }
        Ok(())
    }

    fn send(&mut self, version: u8, xid: u32, msg: &Message) -> Result<(), End> {
        if version == OFP10 {
            let bytes = self.encode_of10(xid, msg)?;
            return self.out.send(bytes).map_err(|_| End::Closed);
        }
        let bytes = match encode(version, xid, msg) {
            Ok(b) => b,
            Err(e) => {
                crate::log_error!(
                    "rqvs switch: openflow {}: cannot encode a reply: {e} (a bug: please report it)",
                    self.name
                );
                return Err(End::Fatal);
            }
        };
        self.out.send(bytes).map_err(|_| End::Closed)
    }

    fn error(&mut self, version: u8, xid: u32, e: OfError, offending: &[u8]) -> Result<(), End> {
        let v = if (1..=OFP14).contains(&version) { version } else { self.version.unwrap_or(OFP14) };
        self.send(v, xid, &Message::Error(ErrorMsg::new(e, offending)))
    }

    fn is_slave(&self) -> bool {
        self.me.role.load(Ordering::Relaxed) == ROLE_SLAVE
    }

    fn handle(&mut self, bytes: &[u8]) -> Result<(), End> {
        if self.version == Some(OFP10) {
            return self.handle_of10(bytes);
        }
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
            return self.negotiated(h.version, xid, hello);
        };
        self.dispatch(v, xid, h.version, msg, bytes)
    }

    /// The HELLO exchange's end: the version to speak from our [`VERSIONS`] and the peer's
    /// HELLO (`their_version` its header's), or HELLO_FAILED and the end.
    fn negotiated(&mut self, their_version: u8, xid: u32, hello: &Hello) -> Result<(), End> {
        match negotiate(bitmap_of(&VERSIONS), their_version, hello) {
            Some(v) => {
                self.version = Some(v);
                self.me.version.store(v, Ordering::Relaxed);
                if let Kind::Active { cell, .. } = &self.kind {
                    let mut r = cell.rconn();
                    r.state = controller::RconnState::Active;
                    r.last_connected = Some(Instant::now());
                }
                Ok(())
            }
            None => {
                // OpenFlow 1.0-1.4 §A.4.4: HELLO_FAILED carries ASCII text saying why, which
                // a client may print (OVS's vconn logs its own words and closes first).
                let why = format!(
                    "We support versions 0x{OFP10:02x} and 0x{OFP13:02x} to 0x{OFP14:02x}, you support no later than version 0x{their_version:02x}."
                );
                let e = OfError::HELLO_FAILED_INCOMPATIBLE;
                let text = ErrorMsg { kind: e.kind, code: e.code, data: why.into_bytes() };
                let _ = self.send(their_version.clamp(1, OFP14), xid, &Message::Error(text));
                Err(End::Fatal)
            }
        }
    }

    /// Handles one decoded message of the connection's version `v` (`wire_version` its
    /// header's); 1.0 messages come here translated ([`of10`]).
    fn dispatch(&mut self, v: u8, xid: u32, wire_version: u8, msg: Message, bytes: &[u8]) -> Result<(), End> {
        // The flow changes this message makes are this connection's (flow monitors' ABBREV).
        let _origin = crate::events::Origin::set(self.me.id, vec![xid]);
        if wire_version != v && !matches!(msg, Message::Hello(_) | Message::Error(_)) {
            return self.error(v, xid, OfError::BAD_REQUEST_BAD_VERSION, bytes);
        }
        let writes = matches!(
            msg,
            Message::FlowMod(_)
                | Message::GroupMod(_)
                | Message::Other { kind: kind::METER_MOD, .. }
                | Message::PortMod(_)
                | Message::PacketOut(_)
                | Message::BundleControl(_)
                | Message::BundleAdd(_)
        );
        if writes && self.is_slave() {
            return self.error(v, xid, OfError::BAD_REQUEST_IS_SLAVE, bytes);
        }
        let reply = match msg {
            Message::Hello(_) | Message::EchoReply(_) | Message::BarrierReply => None,
            Message::Error(e) => {
                crate::log_warn!("rqvs switch: openflow {}: the peer sent an error ({})", self.name, e.of_error());
                None
            }
            Message::EchoRequest(data) => Some(Message::EchoReply(data)),
            Message::FeaturesRequest => Some(Message::FeaturesReply(Features {
                datapath_id: self.hub.datapath_id.load(std::sync::atomic::Ordering::Relaxed),
                n_buffers: 0,
                n_tables: N_TABLES,
                auxiliary_id: 0,
                capabilities: CAPABILITIES,
            })),
            Message::GetConfigRequest => Some(Message::GetConfigReply(self.config)),
            Message::SetConfig(c) => {
                if c.flags != 0 {
                    return self.error(v, xid, OfError::SWITCH_CONFIG_FAILED_BAD_FLAGS, bytes);
                }
                self.config = c;
                self.me.miss_send_len.store(c.miss_send_len, Ordering::Relaxed);
                None
            }
            Message::BarrierRequest => {
                // The flow-mods before it are in the datapath: ORIG/CCACHE PMDs have
                // revalidated (runs of FLOW_MODs do not wait for that themselves).
                self.hub.control.settle_changes();
                // Packet-outs are sent by the PMDs: done once they have handled them.
                if std::mem::take(&mut self.packet_outs_pending) {
                    self.hub.control.sync_pmds();
                }
                Some(Message::BarrierReply)
            }
            Message::RoleRequest(r) => {
                if r.role > ROLE_SLAVE {
                    return self.error(v, xid, BAD_ROLE, bytes);
                }
                if r.role != 0 {
                    // OVS's `handle_role_request`: a MASTER or SLAVE request carries a
                    // generation_id (OpenFlow 1.2+; 1.0's Nicira request none), refused as
                    // STALE when older than the last one accepted.
                    let carries_id = r.role != ROLE_EQUAL && wire_version != OFP10;
                    if carries_id && !self.hub.elect(r.generation_id) {
                        return self.error(v, xid, STALE, bytes);
                    }
                    self.hub.set_role(&self.me, r.role);
                }
                let role = self.me.role.load(Ordering::Relaxed);
                Some(Message::RoleReply(Role { role, generation_id: self.hub.election_id().unwrap_or(0) }))
            }
            Message::MultipartRequest(req) => return self.multipart(v, xid, req.flags, req.body, bytes),
            Message::FlowMod(fm) => {
                let mut run = FlowModRun::default();
                run.push(xid, bytes, flow_op(fm, self.hub.control.meters()));
                return self.flush(&mut run);
            }
            Message::GroupMod(gm) => {
                let mut run = FlowModRun::default();
                run.push(xid, bytes, Ok(Some(FlowOp::Group(gm.command, gm.group))));
                return self.flush(&mut run);
            }
            Message::PacketOut(po) => {
                let sent = packet_out::prepare(&po, &self.hub.control)
                    .and_then(|p| self.hub.control.packet_out(p).map_err(|e| (OfError::BAD_REQUEST_BAD_PACKET, e.0)));
                self.hub.count_packet_out(sent.is_ok());
                self.packet_outs_pending |= sent.is_ok();
                return match sent {
                    Ok(()) => Ok(()),
                    Err((e, why)) => {
                        crate::log_warn!("rqvs switch: openflow {}: packet_out refused: {why}", self.name);
                        self.error(v, xid, e, bytes)
                    }
                };
            }
            Message::PortMod(pm) => {
                return match super::port_mod::apply(&self.hub, &self.me, &pm) {
                    Ok(()) => Ok(()),
                    Err((e, why)) => {
                        crate::log_warn!("rqvs switch: openflow {}: port_mod refused: {why}", self.name);
                        self.error(v, xid, e, bytes)
                    }
                };
            }
            Message::Other { kind: kind::METER_MOD, body } => {
                return match super::meters::meter_mod(&self.hub.control, &body) {
                    Ok(()) => Ok(()),
                    Err((e, why)) => {
                        crate::log_warn!("rqvs switch: openflow {}: meter_mod refused: {why}", self.name);
                        self.error(v, xid, e, bytes)
                    }
                };
            }
            Message::Experimenter(e)
                if v == rqvs_openflow::OFP13
                    && e.experimenter == rqvs_openflow::flow_monitor::ONF_EXPERIMENTER_ID
                    && e.exp_type == rqvs_openflow::flow_monitor::ONF_FLOW_MONITOR =>
            {
                return match rqvs_openflow::flow_monitor::decode_cancel(&e.data) {
                    Ok(id) => self.flow_monitor_cancel(v, xid, id, bytes),
                    Err(e) => self.error(v, xid, e.of_error(), bytes),
                };
            }
            Message::Experimenter(_) => return self.error(v, xid, BAD_EXPERIMENTER, bytes),
            Message::SetAsync(c) => {
                let mut slot = self.me.async_config.lock().unwrap_or_else(|e| e.into_inner());
                match slot.as_mut() {
                    Some(old) => old.apply(&c),
                    None => *slot = Some(c),
                }
                None
            }
            Message::GetAsyncRequest => Some(Message::GetAsyncReply(self.me.async_config())),
            Message::BundleControl(bc) => return self.bundle_control(v, xid, bc, bytes),
            Message::BundleAdd(ba) => return self.bundle_add(v, xid, ba, bytes),
            _ => return self.error(v, xid, OfError::BAD_REQUEST_BAD_TYPE, bytes),
        };
        match reply {
            Some(m) => self.send(v, xid, &m),
            None => Ok(()),
        }
    }

    /// A flow monitor request ([`super::monitor`]): the initial flows, or an error.
    pub(super) fn flow_monitor(
        &mut self,
        v: u8,
        xid: u32,
        reqs: Vec<rqvs_openflow::flow_monitor::FlowMonitorRequest>,
        bytes: &[u8],
    ) -> Result<(), End> {
        match super::monitor::request(&self.hub, &self.me, v, xid, reqs) {
            Ok(msgs) => {
                for m in msgs {
                    self.out.send(m).map_err(|_| End::Closed)?;
                }
                Ok(())
            }
            Err((e, why)) => {
                crate::log_warn!("rqvs switch: openflow {}: flow monitor refused: {why}", self.name);
                self.error(v, xid, e, bytes)
            }
        }
    }

    /// A flow monitor cancel ([`super::monitor::cancel`]).
    pub(super) fn flow_monitor_cancel(&mut self, v: u8, xid: u32, id: u32, bytes: &[u8]) -> Result<(), End> {
        match super::monitor::cancel(&self.me, v, id) {
            Ok(()) => Ok(()),
            Err((e, why)) => {
                crate::log_warn!("rqvs switch: openflow {}: flow monitor cancel refused: {why}", self.name);
                self.error(v, xid, e, bytes)
            }
        }
    }

    fn multipart(&mut self, v: u8, xid: u32, flags: u16, body: MultipartRequestBody, bytes: &[u8]) -> Result<(), End> {
        let one = |b: MultipartReplyBody| vec![b];
        let parts: Vec<MultipartReplyBody> = match body {
            MultipartRequestBody::Desc => one(MultipartReplyBody::Desc(Desc {
                mfr_desc: "rqvs".into(),
                hw_desc: "rqvs userspace switch".into(),
                sw_desc: format!("rqvs {}", env!("CARGO_PKG_VERSION")),
                serial_num: "None".into(),
                dp_desc: format!("rqvs switch ({})", self.hub.control.design().name()),
            })),
            MultipartRequestBody::PortDesc => one(MultipartReplyBody::PortDesc(self.ports())),
            MultipartRequestBody::PortStats { port_no } => {
                // Since the switch started, as OVS's port counters: `pmd-stats-clear` is the
                // PMD view's baseline only.
                let control = &self.hub.control;
                let report = control.show_with(control.pmd_totals());
                let stats: Vec<PortStats> = report
                    .ports
                    .iter()
                    .filter(|p| port_no == OFPP_ANY || rqvs_openflow::oxm::port_to_of(p.port) == Some(port_no))
                    .map(|p| PortStats {
                        port_no: rqvs_openflow::oxm::port_to_of(p.port).unwrap_or(p.port),
                        duration_sec: report.uptime_s as u32,
                        rx_packets: p.rx_packets,
                        tx_packets: p.tx_packets,
                        rx_bytes: p.rx_bytes,
                        tx_bytes: p.tx_bytes,
                        rx_dropped: p.rx_lost,
                        tx_dropped: p.tx_dropped,
                        rx_errors: p.rx_errors,
                        tx_errors: p.tx_errors,
                        ..PortStats::default()
                    })
                    .collect();
                one(MultipartReplyBody::PortStats(stats))
            }
            MultipartRequestBody::Table => {
                // As OVS counts (since start): a lookup in every table a packet visits, a match
                // when a flow matched there. Every packet the PMDs classified looked table 0 up,
                // those a flow decided matched (a miss with no table-miss flow did not); the
                // lookups after a packet's first are the pipeline's counters (goto_table,
                // resubmit: `rqvs_ofproto::chain::Credit`). Active: the flows of each table
                // (hidden ones not).
                let pmds = self.hub.control.pmd_totals();
                let lookup_count: u64 = pmds.iter().map(|p| p.datapath.packets).sum();
                let matched: u64 = pmds.iter().map(|p| p.table_matched).sum();
                let mut pipeline = crate::flowstats::PipelineCounts::default();
                for p in &pmds {
                    pipeline.add(&p.pipeline);
                }
                let later = |t: u8| pipeline.tables.get(usize::from(t)).copied().unwrap_or((0, 0));
                let active = self.hub.control.active_per_table();
                let stats = (0..N_TABLES)
                    .map(|t| TableStats {
                        table_id: t,
                        active_count: active.get(&t).copied().unwrap_or(0),
                        lookup_count: later(t).0 + if t == 0 { lookup_count } else { 0 },
                        matched_count: later(t).1 + if t == 0 { matched } else { 0 },
                    })
                    .collect();
                one(MultipartReplyBody::Table(stats))
            }
            MultipartRequestBody::Flow(req) => match stats_filter(&req) {
                None => one(MultipartReplyBody::Flow(Vec::new())),
                Some(f) => {
                    let flows = flow_stats(&self.hub.control.flow_stats(&f), &f, v);
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
                    Some(f) => flow_stats(&self.hub.control.flow_stats(&f), &f, v),
                };
                one(MultipartReplyBody::Aggregate(AggregateStats {
                    packet_count: flows.iter().map(|s| s.packet_count).sum(),
                    byte_count: flows.iter().map(|s| s.byte_count).sum(),
                    flow_count: flows.len() as u32,
                }))
            }
            // A query (empty, one part); a request to change the features is refused.
            MultipartRequestBody::TableFeatures(t) if t.is_empty() && flags & MORE == 0 => {
                let all: Vec<TableFeatures> = (0..N_TABLES).map(TableFeatures::rqvs_table).collect();
                all.chunks(FEATURES_PART).map(|c| MultipartReplyBody::TableFeatures(c.to_vec())).collect()
            }
            MultipartRequestBody::TableFeatures(_) => return self.error(v, xid, TABLE_FEATURES_EPERM, bytes),
            MultipartRequestBody::GroupDesc => {
                let groups = self.hub.control.groups();
                let all: Vec<rqvs_flow::group::Group> = groups.iter().map(|e| e.group.clone()).collect();
                if all.is_empty() {
                    one(MultipartReplyBody::GroupDesc(Vec::new()))
                } else {
                    all.chunks(PART).map(|c| MultipartReplyBody::GroupDesc(c.to_vec())).collect()
                }
            }
            MultipartRequestBody::GroupStats { group_id } => {
                let stats = self.hub.control.group_stats(group_id);
                if stats.is_empty() {
                    one(MultipartReplyBody::GroupStats(Vec::new()))
                } else {
                    stats.chunks(PART).map(|c| MultipartReplyBody::GroupStats(c.to_vec())).collect()
                }
            }
            MultipartRequestBody::GroupFeatures => one(MultipartReplyBody::GroupFeatures(GroupFeatures::rqvs())),
            MultipartRequestBody::MeterFeatures => one(MultipartReplyBody::MeterFeatures(MeterFeatures::rqvs())),
            MultipartRequestBody::Other { kind, body } => {
                match super::meters::multipart(&self.hub.control, kind, &body) {
                    Some(Ok(parts)) => parts,
                    Some(Err((e, _))) => return self.error(v, xid, e, bytes),
                    None => {
                        return match rqvs_openflow::flow_monitor::decode_request(v, kind, &body) {
                            Ok(Some(reqs)) => self.flow_monitor(v, xid, reqs, bytes),
                            Ok(None) => self.error(v, xid, OfError::BAD_REQUEST_BAD_MULTIPART, bytes),
                            Err(e) => {
                                crate::log_debug!(
                                    "rqvs switch: openflow {}: flow monitor request refused: {e}",
                                    self.name
                                );
                                self.error(v, xid, e.of_error(), bytes)
                            }
                        }
                    }
                }
            }
        };
        if v == OFP10 {
            if let Some(why) = of10::unsayable(&parts) {
                crate::log_warn!("rqvs switch: openflow {}: a reply cannot be said in OpenFlow 1.0: {why}", self.name);
                return self.error(v, xid, of10::BAD_REQUEST_EPERM, bytes);
            }
        }
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
        let encoded = if v == OFP10 {
            match rqvs_openflow::of10::encode(xid, &msg, self.of10.form) {
                // One flow that 1.0 cannot say: an error answers (`encode_of10`).
                Err(_) if !matches!(&msg, Message::MultipartReply(MultipartReply { body: MultipartReplyBody::Flow(f), .. }) if f.len() > 1) =>
                {
                    let b = self.encode_of10(xid, &msg)?;
                    return self.out.send(b).map_err(|_| End::Closed);
                }
                other => other,
            }
        } else {
            encode(v, xid, &msg)
        };
        match encoded {
            Ok(b) => self.out.send(b).map_err(|_| End::Closed),
            Err(e) => {
                let Message::MultipartReply(MultipartReply { body: MultipartReplyBody::Flow(f), .. }) = msg else {
                    crate::log_error!("rqvs switch: openflow {}: cannot encode a reply: {e} (a bug)", self.name);
                    return Err(End::Fatal);
                };
                if f.len() <= 1 {
                    crate::log_warn!("rqvs switch: openflow {}: a flow does not fit a reply: {e}", self.name);
                    return Err(End::Fatal);
                }
                let (a, b) = f.split_at(f.len() / 2);
                self.send_part(v, xid, MORE, MultipartReplyBody::Flow(a.to_vec()))?;
                self.send_part(v, xid, flags, MultipartReplyBody::Flow(b.to_vec()))
            }
        }
    }

    fn ports(&self) -> Vec<Port> {
        let v = self.version.unwrap_or(rqvs_openflow::OFP10);
        super::ports::describe(&self.hub).into_iter().map(|p| super::ports::for_version(p, v)).collect()
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
                match super::bundled::commit(&self.hub, &self.me, b.flags, &b.ops) {
                    Ok(sent) => self.packet_outs_pending |= sent > 0,
                    Err((_, why)) => {
                        crate::log_warn!(
                            "rqvs switch: openflow {}: bundle {id} refused, nothing changed: {why}",
                            self.name
                        );
                        return self.error(v, xid, OfError::BUNDLE_FAILED_MSG_FAILED, bytes);
                    }
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

    /// BUNDLE_ADD_MESSAGE: a FLOW_MOD, GROUP_MOD, PORT_MOD or PACKET_OUT checked now and kept
    /// for the commit ([`super::bundled`]; an unknown bundle is opened, as the spec allows).
    fn bundle_add(&mut self, v: u8, xid: u32, ba: BundleAdd, bytes: &[u8]) -> Result<(), End> {
        if !self.bundles.contains_key(&ba.bundle_id) && self.bundles.len() >= MAX_BUNDLES {
            return self.error(v, xid, OfError::BUNDLE_FAILED_OUT_OF_BUNDLES, bytes);
        }
        // The bound is on all the connection's bundles together: what one client can make the
        // switch hold.
        let bundled: usize = self.bundles.values().map(|b| b.ops.len()).sum();
        let b = self.bundles.entry(ba.bundle_id).or_insert(Bundle { flags: ba.flags, closed: false, ops: Vec::new() });
        if b.closed {
            return self.error(v, xid, OfError::BUNDLE_FAILED_BUNDLE_CLOSED, bytes);
        }
        if bundled >= MAX_BUNDLE_MSGS {
            return self.error(v, xid, OfError::BUNDLE_FAILED_MSG_TOO_MANY, bytes);
        }
        let op = match ba.inner() {
            Ok((_, Message::FlowMod(fm))) => flow_op(fm, self.hub.control.meters()),
            Ok((_, Message::GroupMod(gm))) => Ok(Some(FlowOp::Group(gm.command, gm.group))),
            Ok((_, Message::PortMod(pm))) => {
                b.ops.push(Bundled::PortMod(pm));
                return Ok(());
            }
            Ok((_, Message::PacketOut(po))) => {
                return match super::packet_out::prepare(&po, &self.hub.control) {
                    Ok(_) => {
                        b.ops.push(Bundled::PacketOut(po));
                        Ok(())
                    }
                    Err((e, why)) => {
                        crate::log_warn!("rqvs switch: openflow {}: bundled packet_out refused: {why}", self.name);
                        self.error(v, xid, e, bytes)
                    }
                };
            }
            Ok(_) => return self.error(v, xid, OfError::BUNDLE_FAILED_MSG_UNSUP, bytes),
            Err(e) => return self.error(v, xid, e.of_error(), bytes),
        };
        let also: Vec<u32> = b
            .ops
            .iter()
            .filter_map(|o| match o {
                Bundled::Flow(FlowOp::Group(rqvs_openflow::group::GroupModCommand::Add, g)) => Some(g.id),
                _ => None,
            })
            .collect();
        let op = op.and_then(|op| match &op {
            Some(o) => match self.hub.control.precheck(o, &also) {
                Ok(()) => Ok(op),
                Err(OpError::Of(e, why)) => Err((e, why)),
                Err(e) => Err((OfError::FLOW_MOD_FAILED_UNKNOWN, e.to_string())),
            },
            None => Ok(op),
        });
        let b = self.bundles.get_mut(&ba.bundle_id).expect("inserted above");
        match op {
            Ok(op) => {
                b.ops.extend(op.map(Bundled::Flow));
                Ok(())
            }
            Err((e, why)) => {
                crate::log_warn!("rqvs switch: openflow {}: bundled flow_mod refused: {why}", self.name);
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
    items: Vec<(u32, Quote, Result<bool, Refusal>)>,
    ops: Vec<FlowOp>,
}

impl FlowModRun {
    /// Takes `msg` into the run when it is a FLOW_MOD of the negotiated version that decodes
    /// (anything else — another message, a version mismatch, a decode error — is handled on
    /// its own, after the run is applied).
    fn take(&mut self, version: Option<u8>, msg: &[u8], table_id_ext: bool, meters: &MeterTable) -> bool {
        if version == Some(OFP10) && msg[0] == OFP10 {
            // 1.0's FLOW_MOD or Nicira's NXT_FLOW_MOD (type VENDOR, subtype 13).
            let nx = msg[1] == rqvs_openflow::of10::kind::VENDOR
                && msg.len() >= 16
                && msg[8..16] == [0, 0, 0x23, 0x20, 0, 0, 0, rqvs_openflow::of10::NXT_FLOW_MOD as u8];
            if msg[1] != rqvs_openflow::of10::kind::FLOW_MOD && !nx {
                return false;
            }
            let Ok(d) = rqvs_openflow::of10::decode(msg, table_id_ext) else { return false };
            let rqvs_openflow::of10::Request::Msg(m) = d.request else { return false };
            let Message::FlowMod(fm) = *m else { return false };
            self.push(d.header.xid, msg, flow_op(fm, meters));
            return true;
        }
        if version != Some(msg[0]) || msg[1] != kind::FLOW_MOD {
            return false;
        }
        let Ok((h, Message::FlowMod(fm))) = decode(msg) else { return false };
        self.push(h.xid, msg, flow_op(fm, meters));
        true
    }

    fn push(&mut self, xid: u32, msg: &[u8], op: Result<Option<FlowOp>, Refusal>) {
        let item = op.map(|op| match op {
            Some(op) => {
                self.ops.push(op);
                true
            }
            None => false,
        });
        self.items.push((xid, Quote::of(msg), item));
    }
}

/// What an ERROR quotes of a flow-mod of a run: its first [`ErrorMsg::QUOTED`] bytes, all
/// [`ErrorMsg::new`] keeps, held inline — a run holds thousands, and a copy of each whole
/// message was an allocation per flow-mod.
struct Quote {
    bytes: [u8; ErrorMsg::QUOTED],
    len: u8,
}

impl Quote {
    fn of(msg: &[u8]) -> Quote {
        let len = msg.len().min(ErrorMsg::QUOTED);
        let mut bytes = [0; ErrorMsg::QUOTED];
        bytes[..len].copy_from_slice(&msg[..len]);
        Quote { bytes, len: len as u8 }
    }

    fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// An open bundle of a connection.
struct Bundle {
    flags: u16,
    closed: bool,
    ops: Vec<Bundled>,
}

/// What a FLOW_MOD asks of the table (`None`: nothing, e.g. a delete by group), or the error it
/// is refused with (an add or modify naming a meter not in `meters`: INVALID_METER).
fn flow_op(fm: FlowMod, meters: &MeterTable) -> Result<Option<FlowOp>, (OfError, String)> {
    flow_op_unmetered(fm).and_then(|op| super::meters::check_op(op, meters))
}

fn flow_op_unmetered(fm: FlowMod) -> Result<Option<FlowOp>, (OfError, String)> {
    let is_add = matches!(fm.command, FlowModCommand::Add);
    let is_modify = matches!(fm.command, FlowModCommand::Modify | FlowModCommand::ModifyStrict);
    // 0xff: every table (modify, delete), or "the switch chooses" (add: OVS takes the first
    // table, 0). Tables, goto_table, groups and the actions the switch executes are checked by
    // the table of record ([`rqvs_ofproto::record::check_flow`]).
    let table = (fm.table_id != OFPTT_ALL).then_some(fm.table_id);
    if (is_add || is_modify) && fm.buffer_id != OFP_NO_BUFFER {
        return Err((
            OfError::BAD_REQUEST_BUFFER_UNKNOWN,
            format!("buffer {} (the switch buffers no packets)", fm.buffer_id),
        ));
    }
    let strict = matches!(fm.command, FlowModCommand::ModifyStrict | FlowModCommand::DeleteStrict);
    let filter = FlowFilter {
        matches: Some(fm.matches),
        strict: strict.then_some(u32::from(fm.priority)),
        cookie: (fm.cookie, fm.cookie_mask),
        out_port: (fm.out_port != OFPP_ANY).then_some(fm.out_port),
        table,
        out_group: (fm.out_group != OFPG_ANY).then_some(fm.out_group),
    };
    Ok(match fm.command {
        FlowModCommand::Add => {
            let spec = FlowSpec {
                idle_timeout: fm.idle_timeout,
                hard_timeout: fm.hard_timeout,
                flags: fm.flags,
                importance: fm.importance,
            };
            // The flow-mod's actions move into the rule (no copy).
            Some(FlowOp::Add(Rule { table: table.unwrap_or(0), ..fm.into_rule(0) }, spec))
        }
        // out_port and out_group filter deletes only (OpenFlow 1.3 §A.3.4.1). A modify keeps
        // the flows' timeouts and flags (OVS); of its flags only RESET_COUNTS counts.
        FlowModCommand::Modify | FlowModCommand::ModifyStrict => {
            let counts = if fm.flags & OFPFF_RESET_COUNTS != 0 { Counts::Reset } else { Counts::Keep };
            Some(FlowOp::Modify(FlowFilter { out_port: None, out_group: None, ..filter }, fm.actions, counts))
        }
        FlowModCommand::Delete | FlowModCommand::DeleteStrict => Some(FlowOp::Delete(filter)),
    })
}

/// The selection of a FLOW/AGGREGATE request (`None`: nothing can match).
fn stats_filter(req: &FlowStatsRequest) -> Option<FlowFilter> {
    Some(FlowFilter {
        matches: Some(req.matches),
        strict: None,
        cookie: (req.cookie, req.cookie_mask),
        out_port: (req.out_port != OFPP_ANY).then_some(req.out_port),
        table: (req.table_id != OFPTT_ALL).then_some(req.table_id),
        out_group: (req.out_group != OFPG_ANY).then_some(req.out_group),
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
                if !rqvs_ofproto::record::covers(g, &m) {
                    continue;
                }
            }
            let c = counts.take().unwrap_or_default();
            out.push(FlowStats {
                table_id: r.table,
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
