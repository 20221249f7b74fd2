//! The OpenFlow channel: OpenFlow 1.3 and 1.4, and 1.0 with Nicira's extensions for plain
//! `ovs-ofctl` (the codec is `rqvs_openflow`) over TCP, passive
//! (`--openflow ptcp:[IP:]PORT`: `ovs-ofctl` and controllers connect to the switch; or a unix
//! socket, [`OpenflowListener::unix`]: the bridge's `BRIDGE.mgmt` with `--ovsdb`) and active
//! (`--controller tcp:IP:PORT`, repeatable: the switch connects to controllers and keeps
//! reconnecting). Several connections at once; each has a reader thread and a writer thread.
//!
//! ```text
//!  PMD threads ── controller op ──► packet-in queue (bounded, never waits) ──► packet-in thread
//!       ▲                                                                        │ PACKET_IN per connection
//!       │ PmdMsg::PacketOut (between batches)                                    ▼ (its own bounded queue)
//!  connection reader ◄── OpenFlow messages ── TCP ── writer thread ◄── replies, PACKET_INs
//!       │ FLOW_MOD, bundles, stats
//!       ▼
//!  Control (the table of record)
//! ```
//!
//! What a connection handles (`connection.rs`):
//!
//! | message | answer |
//! |---|---|
//! | HELLO | version negotiated (1.0, 1.3, 1.4); none in common: HELLO_FAILED (its data the text "We support versions 0x01 and 0x04 to 0x05, you support no later than version 0xNN.") and close |
//! | (OpenFlow 1.0) | plain `ovs-ofctl`'s 1.0 and Nicira messages (`NXT_FLOW_MOD`, `NXST_FLOW`, `NXT_SET_FLOW_FORMAT`, ...) translated to the rows below and back (`connection/of10.rs`, [`rqvs_openflow::of10`]); FEATURES_REPLY carries the ports; asynchronous messages in the form the connection chose (`OFPT_PACKET_IN`, `NXT_PACKET_IN`, `NXT_PACKET_IN2`; `OFPT_FLOW_REMOVED`, `NXT_FLOW_REMOVED`; 1.0's PORT_STATUS: [`rqvs_openflow::of10_async`]) |
//! | ECHO_REQUEST | ECHO_REPLY with the same data |
//! | FEATURES_REQUEST | datapath id, 0 buffers, 255 tables, flow/table/port/group stats capabilities |
//! | GET_CONFIG / SET_CONFIG | the connection's flags and miss_send_len (only flags 0 accepted) |
//! | BARRIER_REQUEST | BARRIER_REPLY once every message before it is done (changes are synchronous; packet-outs are waited for: [`Control::sync_pmds`]) |
//! | ROLE_REQUEST | the role asked for (an unknown one: BAD_ROLE); a new master makes the other masters slaves; a MASTER/SLAVE request whose generation_id is older than the last accepted one (serial-number comparison, OVS's `ofconn_set_primary_election_id`) gets STALE; the reply carries the last accepted generation_id (0 before any); no ROLE_STATUS is sent to a demoted master |
//! | MULTIPART DESC, PORT_DESC, PORT_STATS, TABLE, FLOW, AGGREGATE | from [`Control`]; FLOW and AGGREGATE with each flow's packets, bytes and duration ([`Control::flow_stats`]) |
//! | MULTIPART TABLE_FEATURES | what each table 0..254 supports ([`rqvs_openflow::table_features::TableFeatures::rqvs_table`]); a request to change them: TABLE_FEATURES_FAILED/EPERM |
//! | MULTIPART GROUP_DESC, GROUP, GROUP_FEATURES | the group table ([`rqvs_ofproto::groups`]) |
//! | METER_MOD; MULTIPART METER, METER_CONFIG, METER_FEATURES | the meter table ([`rqvs_ofproto::meters`], `meters.rs`: OVS's errors; a deleted meter's flows deleted); a FLOW_MOD naming a missing meter: METER_MOD_FAILED/INVALID_METER |
//! | GROUP_MOD | a change of the group table in the table of record's transaction ([`rqvs_ofproto::groups`]: OVS's errors; a deleted group's flows deleted); in runs and bundles like FLOW_MODs |
//! | SET_ASYNC / GET_ASYNC | the connection's asynchronous configuration (OVS's default until set), which filters its PACKET_IN, FLOW_REMOVED and PORT_STATUS |
//! | FLOW_MOD add, modify(_strict), delete(_strict) | idle/hard timeouts, SEND_FLOW_REM, CHECK_OVERLAP (OVERLAP), RESET_COUNTS with OVS's semantics ([`rqvs_ofproto::flowstate`]); applied in order; the FLOW_MODs that arrive back to back (read together, up to [`MAX_RUN`]) are one run: each accepted or refused on its own, all the accepted ones one commit ([`Control::apply_each`]) — so a controller's stream costs one revalidation or publication per run, not per flow-mod; any other message (a BARRIER, say) ends the run first. CFLOWS: the run is left in flight while the next is read and recorded ([`crate::commit_pipeline`]); its errors, and the replies to the BARRIERs after it, are sent once the manager has answered, in order; any other message waits for it |
//! | BUNDLE_CONTROL, BUNDLE_ADD_MESSAGE (1.4; OVS's ONF extension in 1.3) | open/close/commit/discard; FLOW_MODs checked when added, committed as one change set ([`Control::apply_ops`]) |
//! | PACKET_OUT | executed by a PMD (`packet_out.rs`); errors below |
//! | PORT_MOD | `PORT_DOWN` sets the interface down/up, `NO_PACKET_IN` kept; `NO_FLOOD`, `NO_FWD`, `NO_RECV` refused (BAD_CONFIG); BAD_PORT, BAD_HW_ADDR as OVS (`port_mod.rs`) |
//! | anything else | the OpenFlow ERROR for it (BAD_TYPE, BAD_MULTIPART, BAD_EXPERIMENTER, ...) |
//! | (sent) FLOW_REMOVED | when a flow with SEND_FLOW_REM is deleted or expires (reason DELETE, IDLE_TIMEOUT, HARD_TIMEOUT), to every connection that takes asynchronous messages, as PACKET_IN (`flow_removed.rs`) |
//!
//! A message the codec cannot decode gets the ERROR its [`rqvs_openflow::DecodeError::of_error`]
//! names; the table is not touched and the connection stays open (a header whose length is
//! below 8 cannot be framed: ERROR and close). A flow's counters are the PMDs' per-flow counts
//! ([`crate::flowstats`]); a rule with port ranges (a ClassBench set) is several OpenFlow flows
//! and its counts go with the first of them. Buffered packets are refused with BUFFER_UNKNOWN. An add may name any table 0..254, or 0xff
//! ("the switch chooses": table 0, as Open vSwitch; `ovs-testcontroller`'s learned flows say so). A slave connection's
//! FLOW_MOD, PACKET_OUT and bundle messages get IS_SLAVE. A bundle is atomic (the datapath sees all of it or none); its ORDERED flag changes
//! nothing (messages are applied in order anyway); an uncommitted bundle is discarded when its
//! connection ends. A connection holds at most [`MAX_BUNDLES`] open bundles of at most
//! [`MAX_BUNDLE_MSGS`] messages in all. PORT_MOD and PACKET_OUT in a bundle: `bundled.rs`.
//!
//! **Limits** (what one client can make the switch hold): the passive listener serves at most
//! [`ChannelConfig::max_connections`] connections at once (`--max-connections`, default
//! [`DEFAULT_MAX_CONNECTIONS`]; another is closed at once, counted and logged); a connection
//! without a HELLO — for TLS, with its handshake unfinished — after
//! [`ChannelConfig::hello_timeout`] (10 s) is dropped and logged; per connection, the read buffer
//! holds at most one read (256 KiB) and one partial message (64 KiB), the writer queue
//! [`WRITE_QUEUE`] messages of at most 64 KiB, a TLS writer at most 256 KiB of records, and the
//! open bundles [`MAX_BUNDLE_MSGS`] flow-mods together. A `ptcp:` listener on a wildcard address
//! is bound with a warning (no TLS: anyone who reaches the host can change the flows).
//!
//! **PACKET_IN** (`packet_in.rs`). A `controller` action sends the frame, as it is at that point
//! of the action list, to every connection that takes asynchronous messages: role master or
//! equal (not slave), and for a passive connection only after it set a non-zero miss_send_len
//! (OVS's rule for its "service" connections, so `ovs-ofctl` commands are not sent packet-ins;
//! active connections start at 128). Each PACKET_IN has buffer_id `NO_BUFFER`, total_len, the
//! reason (`NO_MATCH` — 1.4's `TABLE_MISS`, the same number 0 — when the flow is a table-miss
//! flow, priority 0 matching everything; `ACTION` otherwise; a packet-out's own actions
//! `PACKET_OUT` in 1.4, `ACTION` in 1.3, as OVS encodes them; `INVALID_TTL` for a `dec_ttl` on a
//! TTL of 0 or 1, with the cookie and table of the rule whose `dec_ttl` it was, to the
//! connections whose asynchronous configuration asks for it), the table and cookie of the flow whose action it was (all
//! ones for a packet-out's), a match holding `in_port`, and the **whole frame**: OpenFlow 1.3
//! §A.4.1 sends the entire packet when it is not buffered, and rqvs buffers none, so neither the
//! action's max_len nor miss_send_len cuts it — Open vSwitch does the same since it dropped
//! buffering (2.7, commit c184807ce), and the learning-switch controllers rely on it: they
//! PACKET_OUT the data they were sent, which a cut frame would truncate. Only a frame too long
//! for one message (above ~65 400 bytes) is cut, total_len saying its length. The PMDs never
//! wait for the channel: their queue ([`crate::execute::PACKET_IN_QUEUE`]) drops what does not
//! fit (counted per PMD, logged once), and each connection's writer queue drops packet-ins that
//! do not fit ([`WRITE_QUEUE`]; counted, logged once per connection), as OVS drops packet-ins on
//! queue overflow.
//!
//! **PACKET_OUT** (`packet_out.rs`): buffer_id must be `NO_BUFFER` (else BUFFER_UNKNOWN); the
//! frame must hold an Ethernet header (else BAD_PACKET); in_port is a port of the switch,
//! `CONTROLLER` or `ANY` (else BAD_PORT); actions `output:N` (an existing port, else
//! BAD_OUT_PORT), `IN_PORT`, `FLOOD`, `ALL`, `NORMAL`, `CONTROLLER`, `TABLE`, and the rewrites
//! the switch executes; `LOCAL` and anything else are BAD_OUT_PORT / the codec's BAD_ACTION.
//! `TABLE` runs the frame — as the actions before it left it — through the table of record with
//! the packet-out's in_port, and the winning flow's actions are applied there (Open vSwitch
//! does this translation in its main thread too: no megaflow is installed). The frame and its
//! final op list then go to a PMD ([`crate::pmd::PmdMsg::PacketOut`]), which sends it through
//! its transmit queues between two batches; it is counted in `injected`
//! ([`crate::stats`]). One deviation: `dec_ttl` expiring inside the flow a `TABLE` ran stops
//! the whole packet-out, where OVS stops only that flow's actions.
//!
//! **Active connections and fail mode** (`controller.rs`): each `--controller` target has a
//! thread that connects, runs a connection like a passive one, and when it ends (or the
//! connect fails) waits and tries again: 1 s, doubling to 8 s (OVS's default max-backoff), back
//! to 1 s after a connection that lasted longer than the wait before it. An active connection
//! silent for the inactivity probe interval (`--inactivity-probe`, OVS's 5 s) is sent an
//! ECHO_REQUEST; silent for another interval, it is closed (a dead controller is noticed).
//! An attempt whose connect and HELLO exchange are not done within max(1 s, the backoff waited
//! before it) ends ("Connection timed out") and the backoff keeps growing (OVS's rconn
//! `CONNECTING` timeout). The socket's DSCP is set before it connects
//! ([`ControllerSettings::dscp`], OVS's 48 by default); a controller with
//! [`ControllerSettings::async_enabled`] false is sent no asynchronous message until its
//! SET_ASYNC asks for some.
//! `--fail-mode` says what happens while no controller is there, as Open vSwitch's fail modes
//! do: `secure` — nothing: the flows stay, table misses stay misses; `standalone` (OVS's
//! default) — once no controller has been *admitted* for three probe intervals (OVS: a
//! controller is admitted when it sends a message other than the handshake's — HELLO, ECHO,
//! FEATURES, GET/SET_CONFIG, ... — or has been connected 30 s), the switch fails open: every
//! flow is removed and one hidden rule added (priority [`crate::FAIL_OPEN_PRIORITY`], match
//! all, `actions=NORMAL`: MAC learning, [`crate::normal`]), so hosts on its ports reach each
//! other; when a controller is admitted the rule is removed and the controller sets up its
//! flows (OVS's `fail_open_recover`). The controllers, the extra listeners and the fail mode
//! can change while the switch runs ([`Channel::set_controllers`] and the methods beside it:
//! `rqvs switch --ovsdb` applies `ovs-vsctl set-controller`/`set-fail-mode` so): the fail-open
//! watch reads both at each tick — a switch failed open recovers when its mode becomes `secure`
//! or its last controller is removed, as OVS's fail-open state goes with them.
//! Without `--controller` there is no fail mode: the table
//! is what `--rules` and the passive channel make it (OVS instead adds a visible
//! `priority=0,actions=NORMAL` flow to a standalone bridge with no controller).

mod bundled;
mod connection;
mod controller;
mod flow_removed;
mod meters;
mod monitor;
pub(crate) mod packet_in;
mod packet_out;
pub mod pinsched;
mod port_mod;
mod ports;
mod transport;
/// The TLS configuration, shared with `--ovsdb ssl:` ([`crate::tls`]).
pub use crate::tls;

use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use controller::{
    parse_controller, ControllerSettings, ControllerTarget, FailMode, RconnState, Timing, DEFAULT_DSCP,
    DEFAULT_QUEUE_SIZE,
};
pub use tls::{Tls, TlsSettings};

use crate::{Control, Error};
use controller::set_dscp;

/// The datapath id the switch reports when none is configured.
pub const DEFAULT_DATAPATH_ID: u64 = 0x0000_7271_7673_0001;
/// FLOW_MODs applied as one commit at most (a longer run is cut into several).
pub const MAX_RUN: usize = 16 * 1024;
/// Open bundles one connection may hold (more: OUT_OF_BUNDLES).
pub const MAX_BUNDLES: usize = 64;
/// Flow-mods one connection's open bundles may hold together (more: MSG_TOO_MANY): the paper's
/// bundles are 125K rules; a client adding without end would otherwise grow the switch's memory
/// without bound.
pub const MAX_BUNDLE_MSGS: usize = 1 << 20;
/// Messages waiting for a connection's writer thread (replies wait for room; packet-ins that
/// do not fit are dropped): room for the largest `controller_queue_size` (512) of packet-ins
/// and as many replies.
pub const WRITE_QUEUE: usize = 1024;
/// OVS's default inactivity probe interval for controllers.
pub const DEFAULT_INACTIVITY_PROBE: Duration = Duration::from_secs(5);
/// Connections the passive listener serves at once (`--max-connections`); more are refused.
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;
/// How long a connection may stay without a HELLO (for TLS: with the handshake unfinished)
/// before it is dropped.
pub const DEFAULT_HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// OVS's default maximum reconnection backoff.
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(8);

/// `OFPCR_ROLE_*`.
pub(crate) const ROLE_EQUAL: u32 = 1;
pub(crate) const ROLE_MASTER: u32 = 2;
pub(crate) const ROLE_SLAVE: u32 = 3;

/// OpenFlow's IANA port: the default port of `ssl:`, `tcp:`, `pssl:` and `ptcp:` targets.
pub const OFP_PORT: u16 = 6653;

/// A passive target: where to listen, and whether with TLS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenTarget {
    pub addr: SocketAddr,
    /// `pssl:`: TLS (peers must present a certificate the CA signed).
    pub tls: bool,
}

/// Where to listen: `ptcp:` or `pssl:` followed by OVS's `[PORT][:IP]` (`pssl:6653:127.0.0.1`,
/// `pssl:6653`, `pssl:`, `pssl::10.0.0.1`) or rqvs's `IP:PORT` (`ptcp:127.0.0.1:6653`). The IP
/// defaults to 127.0.0.1 (loopback: other hosts are let in only when told), the port to 6653.
pub fn parse_target(s: &str) -> Result<ListenTarget, Error> {
    let bad = || {
        Error(format!(
            "--openflow '{s}': expected ptcp:[PORT][:IP] or pssl:[PORT][:IP] (or IP:PORT after the colon), e.g. ptcp:6653, pssl:6653:127.0.0.1 or ptcp:127.0.0.1:6653"
        ))
    };
    let (tls, rest) = match (s.strip_prefix("ptcp:"), s.strip_prefix("pssl:")) {
        (Some(r), _) => (false, r),
        (_, Some(r)) => (true, r),
        _ => return Err(bad()),
    };
    let loopback = std::net::IpAddr::from([127, 0, 0, 1]);
    let addr = if rest.is_empty() {
        SocketAddr::new(loopback, OFP_PORT)
    } else if let Ok(port) = rest.parse::<u16>() {
        SocketAddr::new(loopback, port)
    } else if let Some(a) = rest.split_once(':').and_then(|(port, ip)| {
        let port = if port.is_empty() { OFP_PORT } else { port.parse().ok()? };
        Some(SocketAddr::new(ip.trim_start_matches('[').trim_end_matches(']').parse().ok()?, port))
    }) {
        a
    } else {
        parse_ip_port(rest).ok_or_else(bad)?
    };
    Ok(ListenTarget { addr, tls })
}

/// `IP:PORT` or `[IPv6]:PORT`.
pub(crate) fn parse_ip_port(s: &str) -> Option<SocketAddr> {
    let rest = s.replace(['[', ']'], "");
    let (ip, port) = rest.rsplit_once(':')?;
    Some(SocketAddr::new(ip.parse().ok()?, port.parse().ok()?))
}

/// The socket a listener accepts on.
enum Bound {
    Tcp(TcpListener),
    /// `punix:PATH` (the bridge's management socket `BRIDGE.mgmt`): whoever may open the file
    /// may change the flows, as with OVS.
    Unix(UnixListener, PathBuf),
}

/// The bound OpenFlow listener.
pub struct OpenflowListener {
    listener: Bound,
    /// `pssl:`: every accepted connection is TLS.
    tls: Option<Arc<Tls>>,
    /// The settings of the `Controller` row it serves (`--ovsdb`'s `ptcp:`/`pssl:`/`punix:`
    /// targets; [`OpenflowListener::with_settings`]), shared by the connections it accepts;
    /// `None` (`--openflow`, the management socket): OVS's defaults, no inactivity probe.
    settings: Option<Arc<controller::ControllerCell>>,
}

impl OpenflowListener {
    /// Binds `addr` (`ptcp:` target, see [`parse_target`]).
    pub fn bind(addr: SocketAddr) -> Result<OpenflowListener, Error> {
        let listener = TcpListener::bind(addr).map_err(|e| Error(format!("--openflow ptcp:{addr}: {e}")))?;
        listener.set_nonblocking(true).map_err(|e| Error(format!("--openflow ptcp:{addr}: {e}")))?;
        Ok(OpenflowListener { listener: Bound::Tcp(listener), tls: None, settings: None })
    }

    /// Binds a unix socket at `path` (`punix:`): a stale socket file left there (by a switch
    /// that did not stop cleanly) is removed first, as OVS does; a socket some process still
    /// accepts on (another switch serving the bridge) or any other file is an error.
    pub fn bind_unix(path: &Path) -> Result<UnixListener, Error> {
        let err = |e: std::io::Error| Error(format!("punix:{}: {e}", path.display()));
        if let Ok(m) = std::fs::symlink_metadata(path) {
            use std::os::unix::fs::FileTypeExt;
            if !m.file_type().is_socket() {
                return Err(Error(format!("punix:{}: exists and is not a socket", path.display())));
            }
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(Error(format!(
                    "punix:{}: another process listens there (is ovs-vswitchd running?)",
                    path.display()
                )));
            }
            std::fs::remove_file(path).map_err(err)?;
        }
        let l = UnixListener::bind(path).map_err(err)?;
        if let Err(e) = crate::ctl::owner_only(path) {
            let _ = std::fs::remove_file(path);
            return Err(err(e));
        }
        l.set_nonblocking(true).map_err(err)?;
        Ok(l)
    }

    /// A listener on a unix socket bound by [`OpenflowListener::bind_unix`] (a clone of it, so
    /// that the socket outlives one channel: each datapath's channel serves it in turn).
    pub fn unix(listener: &UnixListener, path: &Path) -> Result<OpenflowListener, Error> {
        let l = listener.try_clone().map_err(|e| Error(format!("punix:{}: {e}", path.display())))?;
        l.set_nonblocking(true).map_err(|e| Error(format!("punix:{}: {e}", path.display())))?;
        Ok(OpenflowListener { listener: Bound::Unix(l, path.to_path_buf()), tls: None, settings: None })
    }

    /// Binds a `ptcp:` or `pssl:` target; `tls` is required for `pssl:`. A `ptcp:` target on
    /// a wildcard address (0.0.0.0, ::) is bound with a warning (logged once, here): anyone who
    /// reaches the host can then change its flows.
    pub fn bind_target(target: &ListenTarget, tls: Option<Arc<Tls>>) -> Result<OpenflowListener, Error> {
        let mut l = OpenflowListener::bind(target.addr)?;
        if !target.tls && target.addr.ip().is_unspecified() {
            crate::log_warn!(
                "rqvs switch: warning: --openflow ptcp:{}:{} listens on every address without TLS: anyone who reaches this host can change its flows (use pssl: with certificates, or a loopback address)",
                target.addr.port(),
                target.addr.ip()
            );
        }
        if target.tls {
            let Some(tls) = tls else {
                return Err(Error(format!(
                    "--openflow pssl:{}:{}: TLS needs --private-key, --certificate and --ca-cert",
                    target.addr.port(),
                    target.addr.ip()
                )));
            };
            l.tls = Some(tls);
        }
        Ok(l)
    }

    /// Serves a `Controller` row's passive target with the row's settings, as OVS's
    /// `ofservice` does for the connections it accepts: their inactivity probe, packet-in rate
    /// limit, `controller_queue_size` and `enable_async_messages`, and their DSCP — set on the
    /// listening socket (its SYN-ACKs) and on each accepted one; a DSCP changed later closes the
    /// connections already accepted (OVS's `rconn_reconnect` of an accepted connection) and the
    /// next ones get the new one. The settings change live ([`Channel::set_listener_settings`]).
    pub fn with_settings(mut self, settings: ControllerSettings) -> Result<OpenflowListener, Error> {
        if let Bound::Tcp(l) = &self.listener {
            let addr = l.local_addr().map_err(|e| Error(format!("ptcp: {e}")))?;
            set_dscp(socket2::SockRef::from(l), addr, settings.dscp)
                .map_err(|e| Error(format!("ptcp:{addr}: setting its DSCP: {e}")))?;
        }
        self.settings = Some(Arc::new(controller::ControllerCell::new(settings)));
        Ok(self)
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        match &self.listener {
            Bound::Tcp(l) => l.local_addr().ok(),
            Bound::Unix(..) => None,
        }
    }

    /// The next connection, if one is waiting: the stream and the peer's name for the logs.
    fn accept(&self) -> Option<(transport::Stream, String)> {
        match &self.listener {
            Bound::Tcp(l) => {
                let (stream, peer) = l.accept().ok()?;
                if let Some(cell) = &self.settings {
                    if let Err(e) = set_dscp(socket2::SockRef::from(&stream), peer, cell.settings().dscp) {
                        crate::log_warn!("rqvs switch: openflow {peer}: setting its DSCP: {e}");
                    }
                }
                let stream = match &self.tls {
                    None => transport::Stream::Tcp(stream),
                    Some(tls) => match tls
                        .server_config()
                        .and_then(|c| rustls::ServerConnection::new(c).map_err(|e| format!("TLS: {e}")))
                    {
                        Ok(c) => transport::Stream::Tls(stream, Box::new(c.into())),
                        Err(e) => {
                            crate::log_warn!("rqvs switch: openflow ssl:{peer}: connection refused: {e}");
                            return None;
                        }
                    },
                };
                Some((stream, peer.to_string()))
            }
            Bound::Unix(l, path) => {
                let (stream, _) = l.accept().ok()?;
                Some((transport::Stream::Unix(stream), path.display().to_string()))
            }
        }
    }

    /// Accepts connections until the switch is asked to stop, each on its own threads; returns
    /// once every connection thread has ended. Beyond `hub.max_connections` open at once, a new
    /// connection is closed at once and logged (the first of a burst, then at most one line a
    /// second with the count since). `retired`: it ends (and its connections) when that is set
    /// too (the listener removed while the switch runs).
    fn serve(&self, hub: &Arc<Hub>, retired: &Arc<AtomicBool>) {
        let mut conns: Vec<JoinHandle<()>> = Vec::new();
        let mut n = 0u64;
        let mut refusals = Refusals::default();
        while !hub.control.stop_requested() && !retired.load(Ordering::Relaxed) {
            match self.accept() {
                Some((stream, peer)) => {
                    conns.retain(|t| !t.is_finished());
                    if conns.len() >= hub.max_connections {
                        drop(stream);
                        hub.connections_refused.fetch_add(1, Ordering::Relaxed);
                        refusals.log(&peer, hub.max_connections);
                        continue;
                    }
                    n += 1;
                    let (h, r, cell) = (hub.clone(), retired.clone(), self.settings.clone());
                    let spawned = std::thread::Builder::new().name(format!("of{n}")).spawn(move || {
                        connection::serve(stream, &peer, &h, connection::Kind::Passive { cell }, &r);
                    });
                    match spawned {
                        Ok(t) => conns.push(t),
                        Err(e) => crate::log_warn!("rqvs switch: openflow: no thread for a connection: {e}"),
                    }
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        for t in conns {
            let _ = t.join();
        }
    }
}

/// The log of refused connections: the first of a burst, then one line a second at most.
#[derive(Default)]
struct Refusals {
    last: Option<Instant>,
    unlogged: u64,
}

impl Refusals {
    fn log(&mut self, peer: &str, max: usize) {
        if self.last.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
            self.unlogged += 1;
            return;
        }
        let more = match self.unlogged {
            0 => String::new(),
            n => format!(" ({n} more refused since the last line)"),
        };
        crate::log_warn!(
            "rqvs switch: openflow {peer}: connection refused: {max} connections open (--max-connections){more}"
        );
        self.last = Some(Instant::now());
        self.unlogged = 0;
    }
}

/// How to run the channel.
pub struct ChannelConfig {
    /// The passive listener (`--openflow`).
    pub listen: Option<OpenflowListener>,
    /// More passive listeners, served alike (under the keys `listener 0`, `listener 1`, ... of
    /// [`Channel::remove_listener`]; `--ovsdb` adds a bridge's `ptcp:`/`pssl:`/`punix:`
    /// targets with [`Channel::add_listener`] instead).
    pub more_listeners: Vec<OpenflowListener>,
    /// Controllers to connect to (`--controller`).
    pub controllers: Vec<ControllerTarget>,
    /// The TLS settings of `ssl:` controllers (the passive listener has its own).
    pub tls: Option<Arc<Tls>>,
    pub fail_mode: FailMode,
    /// Idle time after which an active connection is sent an ECHO_REQUEST (and closed after as
    /// long again without an answer); three of them without a controller fail a standalone
    /// switch open.
    pub inactivity_probe: Duration,
    /// The longest wait between two connection attempts.
    pub max_backoff: Duration,
    pub datapath_id: u64,
    /// Connections the passive listener serves at once; more are refused (logged, counted).
    pub max_connections: usize,
    /// A connection without a HELLO (or a finished TLS handshake) this long is dropped.
    pub hello_timeout: Duration,
}

impl ChannelConfig {
    /// OVS's defaults: no listener, no controller, standalone, 5 s probe, 8 s max backoff; at
    /// most 64 passive connections, a 10 s HELLO timeout.
    pub fn new() -> ChannelConfig {
        ChannelConfig {
            listen: None,
            more_listeners: Vec::new(),
            controllers: Vec::new(),
            tls: None,
            fail_mode: FailMode::Standalone,
            inactivity_probe: DEFAULT_INACTIVITY_PROBE,
            max_backoff: DEFAULT_MAX_BACKOFF,
            datapath_id: DEFAULT_DATAPATH_ID,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            hello_timeout: DEFAULT_HELLO_TIMEOUT,
        }
    }
}

impl Default for ChannelConfig {
    fn default() -> Self {
        ChannelConfig::new()
    }
}

/// The running channel: its listener, controller, packet-in and fail-open threads.
///
/// Its controllers, extra listeners and fail mode change while the switch runs
/// ([`Channel::set_controllers`], [`Channel::add_listener`], [`Channel::remove_listener`],
/// [`Channel::set_fail_mode`]: `--ovsdb`'s `ovs-vsctl set-controller`, `set-fail-mode`): each
/// controller and listener has a thread of its own and a flag that retires it (its connections
/// closed), the others and the datapath untouched.
pub struct Channel {
    threads: Vec<JoinHandle<()>>,
    hub: Arc<Hub>,
    live: Mutex<Live>,
}

/// A controller's or a listener's thread, and the flag that retires it.
struct Endpoint {
    retired: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

/// A controller's thread, and its timers and state.
struct Active {
    target: ControllerTarget,
    cell: Arc<controller::ControllerCell>,
    endpoint: Endpoint,
}

/// What changes while the channel runs.
struct Live {
    tls: Option<Arc<Tls>>,
    /// The timers of a controller given without its own (`--controller`).
    timing: Timing,
    controllers: Vec<Active>,
    /// By key, each with the settings its connections share (a `Controller` row's).
    listeners: Vec<(String, Endpoint, Option<Arc<controller::ControllerCell>>)>,
    /// Retired controllers' threads, ending (a connect attempt takes up to 3 s): joined at
    /// [`Channel::join`], or dropped here once finished.
    retiring: Vec<JoinHandle<()>>,
    next_thread: usize,
}

/// A controller's state, as ovs-vswitchd writes it in its `Controller` row
/// ([`Channel::controller_status`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerStatus {
    /// Connected, HELLO exchanged (`is_connected`).
    pub is_connected: bool,
    /// The role the connection holds (`role`: `other` — OpenFlow's EQUAL, also while not
    /// connected —, `master` or `slave`, after its ROLE_REQUESTs).
    pub role: &'static str,
    /// `status:state`: OVS's `rconn` state name (`BACKOFF`, `CONNECTING`, `ACTIVE`, `IDLE`).
    pub state: &'static str,
    /// `status:last_error`: why the last attempt failed or the last connection ended, in
    /// OVS's words (`Connection refused`, `End of file`, `Connection timed out`).
    pub last_error: Option<String>,
    /// `status:sec_since_connect`, `sec_since_disconnect`: since the last connection was
    /// made, and since one last ended (none yet: absent).
    pub since_connect: Option<Duration>,
    pub since_disconnect: Option<Duration>,
    /// `status:packet-in-{miss,action}-{backlog,bypassed,queued,dropped}`: the connection's
    /// packet-in schedulers' counters, while connected with a `controller_rate_limit`.
    pub packet_in: Option<[pinsched::PinStats; 2]>,
}

/// The channel's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ChannelStats {
    /// Connections open now (passive and active), and active ones admitted.
    pub connections: usize,
    pub controllers_admitted: usize,
    /// PACKET_INs written into connections' queues (one per connection a packet-in went to).
    pub packet_ins_sent: u64,
    /// Packet-ins no connection took (none open, none master/equal, or none asked).
    pub packet_ins_unsent: u64,
    /// PACKET_INs dropped because a connection's writer queue was full.
    pub packet_ins_dropped: u64,
    /// Packet-outs handed to a PMD, and refused with an error.
    pub packet_outs: u64,
    pub packet_outs_refused: u64,
    /// Times the switch failed open, and whether it is failed open now.
    pub fail_opens: u64,
    pub failed_open: bool,
    /// Passive connections refused because `max_connections` were open.
    pub connections_refused: u64,
    /// Connections dropped for sending no HELLO within the HELLO timeout.
    pub hello_timeouts: u64,
}

impl Channel {
    /// Starts the listener's thread, one thread per controller, the packet-in thread (when the
    /// switch was started with a packet-in queue) and the fail-open watch (which acts for a
    /// standalone switch with controllers); registers the FLOW_REMOVED sink.
    pub fn start(control: &Arc<Control>, cfg: ChannelConfig) -> Result<Channel, Error> {
        let mut hub = Hub::new(control.clone(), cfg.datapath_id);
        hub.max_connections = cfg.max_connections.max(1);
        hub.hello_timeout = cfg.hello_timeout;
        hub.set_fail_mode(cfg.fail_mode);
        let hub = Arc::new(hub);
        let mut threads = Vec::new();
        // FLOW_REMOVED: the hub as the switch's event sink (a weak handle: the hub holds the
        // switch's `Control`).
        let weak = Arc::downgrade(&hub);
        control.on_event(Box::new(move |e| flow_removed::deliver(&weak, e)));
        if let Some(rx) = control.take_packet_in_queue() {
            let h = hub.clone();
            threads.push(spawn("packet-in", Box::new(move || packet_in::run(&rx, &h)))?);
        }
        if let Some(l) = cfg.listen {
            let h = hub.clone();
            let never = Arc::new(AtomicBool::new(false));
            threads.push(spawn("openflow", Box::new(move || l.serve(&h, &never)))?);
        }
        let h = hub.clone();
        threads.push(spawn("fail-open", Box::new(move || controller::watch_fail_open(&h)))?);
        let live = Live {
            tls: cfg.tls,
            timing: Timing::new(cfg.inactivity_probe, cfg.max_backoff),
            controllers: Vec::new(),
            listeners: Vec::new(),
            retiring: Vec::new(),
            next_thread: 0,
        };
        let channel = Channel { threads, hub, live: Mutex::new(live) };
        for (i, l) in cfg.more_listeners.into_iter().enumerate() {
            channel.add_listener(format!("listener {i}"), l)?;
        }
        channel.set_controllers(&cfg.controllers)?;
        Ok(channel)
    }

    fn lock_live(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes `targets` the controllers the switch connects to, with the channel's timers and
    /// OVS's defaults for the rest ([`Channel::set_controllers_with`]).
    pub fn set_controllers(&self, targets: &[ControllerTarget]) -> Result<(), Error> {
        let settings = ControllerSettings::new(self.lock_live().timing);
        let with: Vec<(ControllerTarget, ControllerSettings)> = targets.iter().map(|t| (*t, settings)).collect();
        self.set_controllers_with(&with)
    }

    /// Makes `targets` the controllers the switch connects to, each with its settings: a new
    /// one gets its thread, one no longer there is retired (its connection closed at its next
    /// read tick, 50 ms), the others keep their connections — with their settings changed in
    /// place when they differ ([`ControllerSettings`]: OVS's `ovs-vsctl set controller br0
    /// inactivity_probe=...` applies to the running connection; a new DSCP reconnects it). An
    /// `ssl:` target without the channel's TLS settings is an error, and nothing is changed.
    pub fn set_controllers_with(&self, targets: &[(ControllerTarget, ControllerSettings)]) -> Result<(), Error> {
        let mut live = self.lock_live();
        if let Some((t, _)) = targets.iter().find(|(t, _)| t.tls && live.tls.is_none()) {
            return Err(Error(format!(
                "--controller ssl:{}: TLS needs --private-key, --certificate and --ca-cert",
                t.addr
            )));
        }
        let (keep, gone): (Vec<_>, Vec<_>) = std::mem::take(&mut live.controllers)
            .into_iter()
            .partition(|a| targets.iter().any(|(t, _)| *t == a.target));
        live.controllers = keep;
        for a in gone {
            a.endpoint.retired.store(true, Ordering::Relaxed);
            live.retiring.push(a.endpoint.thread);
        }
        live.retiring.retain(|t| !t.is_finished());
        for (target, settings) in targets {
            if let Some(a) = live.controllers.iter().find(|a| a.target == *target) {
                a.cell.set_settings(*settings);
                continue;
            }
            let h = self.hub.clone();
            let tls = if target.tls { live.tls.clone() } else { None };
            let retired = Arc::new(AtomicBool::new(false));
            let cell = Arc::new(controller::ControllerCell::new(*settings));
            let (r, c) = (retired.clone(), cell.clone());
            let addr = target.addr;
            let i = live.next_thread;
            live.next_thread += 1;
            let thread = spawn(&format!("controller{i}"), Box::new(move || controller::run(addr, tls, &h, &c, &r)))?;
            live.controllers.push(Active { target: *target, cell, endpoint: Endpoint { retired, thread } });
        }
        let interval = live.controllers.iter().map(|a| a.cell.timing().interval).max().unwrap_or_default();
        self.hub.fail_open_interval_ms.store(interval.as_millis() as u64, Ordering::Relaxed);
        let n = live.controllers.len();
        let was = self.hub.controllers.swap(n, Ordering::Relaxed);
        if was == 0 && n > 0 {
            // The fail-open clock starts when the first controller is configured.
            let mut fail = self.hub.lock_fail();
            if fail.admitted == 0 {
                fail.none_since = Instant::now();
            }
        }
        Ok(())
    }

    /// The controllers configured now.
    pub fn controllers(&self) -> Vec<ControllerTarget> {
        self.lock_live().controllers.iter().map(|a| a.target).collect()
    }

    /// Each controller's state as ovs-vswitchd reports it in its `Controller` row
    /// (`is_connected`, `role`, `status`).
    pub fn controller_status(&self) -> Vec<(ControllerTarget, ControllerStatus)> {
        let peers = self.hub.peers();
        let live = self.lock_live();
        live.controllers
            .iter()
            .map(|a| {
                let name = format!("controller {}:{}", if a.target.tls { "ssl" } else { "tcp" }, a.target.addr);
                let peer = peers.iter().find(|p| p.active && p.name == name && p.version.load(Ordering::Relaxed) != 0);
                let r = a.cell.rconn().clone();
                let state = match (&peer, r.state) {
                    // Connected: ACTIVE or IDLE; between the HELLO and the cell's update.
                    (Some(_), RconnState::Active | RconnState::Idle) => r.state,
                    (Some(_), _) => RconnState::Active,
                    (None, RconnState::Active | RconnState::Idle) => RconnState::Connecting,
                    (None, s) => s,
                };
                let role = match peer.map(|p| p.role.load(Ordering::Relaxed)) {
                    Some(ROLE_MASTER) => "master",
                    Some(ROLE_SLAVE) => "slave",
                    _ => "other",
                };
                let status = ControllerStatus {
                    is_connected: peer.is_some(),
                    role,
                    state: state.name(),
                    last_error: r.last_error,
                    since_connect: r.last_connected.map(|t| t.elapsed()),
                    since_disconnect: r.last_disconnected.map(|t| t.elapsed()),
                    packet_in: peer.and_then(|p| p.pin_stats()),
                };
                (a.target, status)
            })
            .collect()
    }

    /// The controllers configured now, with their settings.
    pub fn controllers_with(&self) -> Vec<(ControllerTarget, ControllerSettings)> {
        self.lock_live().controllers.iter().map(|a| (a.target, a.cell.settings())).collect()
    }

    /// Serves `listener` too, under `key` (a second one under the same key replaces the first).
    pub fn add_listener(&self, key: String, listener: OpenflowListener) -> Result<(), Error> {
        self.remove_listener(&key);
        let mut live = self.lock_live();
        let retired = Arc::new(AtomicBool::new(false));
        let (h, r) = (self.hub.clone(), retired.clone());
        let i = live.next_thread;
        live.next_thread += 1;
        let cell = listener.settings.clone();
        let thread = spawn(&format!("openflow-l{i}"), Box::new(move || listener.serve(&h, &r)))?;
        live.listeners.push((key, Endpoint { retired, thread }, cell));
        Ok(())
    }

    /// New settings for the listener of `key` (one given [`OpenflowListener::with_settings`])
    /// and the connections it accepted, applied as OVS's `ofservice_reconfigure` applies them;
    /// false when there is no such listener.
    pub fn set_listener_settings(&self, key: &str, settings: ControllerSettings) -> bool {
        let live = self.lock_live();
        match live.listeners.iter().find(|(k, _, _)| k == key) {
            Some((_, _, Some(cell))) => {
                cell.set_settings(settings);
                true
            }
            _ => false,
        }
    }

    /// Stops serving the listener of `key` and closes its connections; returns once its
    /// thread has ended (its socket closed: the address can be bound again).
    pub fn remove_listener(&self, key: &str) {
        let gone = {
            let mut live = self.lock_live();
            let at = live.listeners.iter().position(|(k, _, _)| k == key);
            at.map(|at| live.listeners.remove(at).1)
        };
        if let Some(e) = gone {
            e.retired.store(true, Ordering::Relaxed);
            let _ = e.thread.join();
        }
    }

    /// The TLS settings of `ssl:` controllers from now on (`--ovsdb`: the `SSL` table changed):
    /// the `ssl:` controllers are reconnected with them (their connections closed).
    pub fn set_tls(&self, tls: Option<Arc<Tls>>) -> Result<(), Error> {
        let all = self.controllers_with();
        let plain: Vec<(ControllerTarget, ControllerSettings)> = all.iter().copied().filter(|(t, _)| !t.tls).collect();
        self.set_controllers_with(&plain)?;
        self.lock_live().tls = tls;
        self.set_controllers_with(&all)
    }

    /// What the switch does while no controller is admitted, from now on (the fail-open watch
    /// reads it at its next tick: a switch failed open recovers when it becomes `secure`).
    pub fn set_fail_mode(&self, mode: FailMode) {
        self.hub.set_fail_mode(mode);
    }

    pub fn stats(&self) -> ChannelStats {
        self.hub.stats()
    }

    /// [`Channel::stats`] for another thread (the metrics endpoint), as long as it wants.
    pub fn stats_source(&self) -> crate::metrics::ChannelSource {
        let hub = self.hub.clone();
        Arc::new(move || hub.stats())
    }

    /// The controllers (`--controller` targets, `tcp:IP:PORT`) connected now, HELLO exchanged.
    pub fn connected_controllers(&self) -> Vec<String> {
        self.hub
            .peers()
            .iter()
            .filter(|p| p.active && p.version.load(std::sync::atomic::Ordering::Relaxed) != 0)
            .filter_map(|p| p.name.strip_prefix("controller ").map(str::to_string))
            .collect()
    }

    /// The datapath id FEATURES_REPLY says from now on (`--ovsdb`: the bridge's, which a port
    /// attached or removed can change when it is derived from the ports' MACs).
    pub fn set_datapath_id(&self, id: u64) {
        self.hub.datapath_id.store(id, std::sync::atomic::Ordering::Relaxed);
    }

    /// Waits for every thread of the channel (after [`Control::request_stop`]).
    pub fn join(self) {
        let live = self.live.into_inner().unwrap_or_else(|e| e.into_inner());
        let endpoints =
            live.controllers.into_iter().map(|a| a.endpoint).chain(live.listeners.into_iter().map(|(_, e, _)| e));
        for t in self.threads.into_iter().chain(endpoints.map(|e| e.thread)).chain(live.retiring) {
            let _ = t.join();
        }
    }
}

fn spawn(name: &str, f: Box<dyn FnOnce() + Send>) -> Result<JoinHandle<()>, Error> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|e| Error(format!("starting the OpenFlow thread '{name}': {e}")))
}

/// What the connections, the packet-in thread and the fail-open watch share.
pub(crate) struct Hub {
    pub control: Arc<Control>,
    pub datapath_id: AtomicU64,
    /// The longest probe interval among the controllers, in ms ([`Timing::interval`]): the
    /// fail-open trigger counts three.
    fail_open_interval_ms: AtomicU64,
    pub max_connections: usize,
    pub hello_timeout: Duration,
    pub connections_refused: AtomicU64,
    pub hello_timeouts: AtomicU64,
    /// The fail mode now (true: standalone; [`Channel::set_fail_mode`]).
    standalone: AtomicBool,
    /// How many controllers are configured now ([`Channel::set_controllers`]).
    pub controllers: AtomicUsize,
    peers: Mutex<Vec<Arc<Peer>>>,
    next_peer: AtomicU64,
    /// The generation_id of the last MASTER/SLAVE role request accepted (OVS's
    /// `primary_election_id`), once there has been one.
    election: Mutex<Option<u64>>,
    fail: Mutex<FailState>,
    packet_ins_sent: AtomicU64,
    packet_ins_unsent: AtomicU64,
    packet_ins_dropped: AtomicU64,
    packet_outs: AtomicU64,
    packet_outs_refused: AtomicU64,
}

/// Controllers admitted now, and since when none has been (the fail-open clock).
pub(crate) struct FailState {
    pub admitted: usize,
    pub none_since: Instant,
    pub fail_opens: u64,
}

/// One connection as the packet-in thread and the role election see it.
pub(crate) struct Peer {
    pub id: u64,
    pub name: String,
    /// Opened by the switch (`--controller`): asynchronous messages without asking.
    pub active: bool,
    /// Its controller's settings (its `enable_async_messages`, rate limit and queue size, read
    /// at each message): an active connection's controller, or the `Controller` row of the
    /// passive target that accepted it; `None` for `--openflow` and the management socket.
    cell: Option<Arc<controller::ControllerCell>>,
    /// Encoded messages to the connection's writer thread.
    pub out: SyncSender<Vec<u8>>,
    /// The negotiated version (0 before HELLO).
    pub version: AtomicU8,
    pub role: AtomicU32,
    pub miss_send_len: AtomicU16,
    /// PACKET_INs dropped on this connection (its `controller_queue_size` reached, or its
    /// writer queue full).
    pub dropped: AtomicU64,
    /// PACKET_INs in its writer queue, not yet written to the socket (the writer thread counts
    /// them down): OVS's `packet_in_counter`, held under [`Peer::queue_size`].
    pub pins: Arc<AtomicUsize>,
    /// The connection's SET_ASYNC configuration (`None`: OVS's default for its version,
    /// [`rqvs_openflow::async_config::AsyncConfig::ovs_default`]).
    pub async_config: Mutex<Option<rqvs_openflow::async_config::AsyncConfig>>,
    /// An OpenFlow 1.0 connection's packet-in and flow formats (its Nicira requests).
    pub of10_form: Mutex<rqvs_openflow::of10_async::AsyncForm>,
    /// The connection's flow monitors ([`monitor`]).
    pub monitors: monitor::Monitors,
    /// Its packet-in schedulers while its controller has a `controller_rate_limit`
    /// ([`Peer::schedule`]); their counts start with the connection.
    pinsched: Mutex<Option<PeerSched>>,
    /// The zero of the schedulers' millisecond clock.
    born: Instant,
}

/// A connection's two packet-in schedulers (OVS's `ofconn->schedulers`): table misses, and
/// the rest (actions, packet-outs, invalid TTLs).
pub(crate) struct PeerSched {
    pub miss: pinsched::PinSched<Vec<u8>>,
    pub action: pinsched::PinSched<Vec<u8>>,
}

impl Peer {
    fn now_ms(&self) -> u64 {
        self.born.elapsed().as_millis() as u64
    }

    /// The packet-ins it may have waiting to be written: its controller's `controller_queue_size`
    /// ([`ControllerSettings::queue_size`]), [`DEFAULT_QUEUE_SIZE`] for a connection accepted
    /// by `--openflow` or the management socket (OVS's management connection's).
    pub fn queue_size(&self) -> usize {
        self.cell.as_ref().map_or(DEFAULT_QUEUE_SIZE, |c| c.settings().queue_size)
    }

    /// The schedulers, made, changed or removed as the controller's limits are now.
    fn lock_sched(&self, now_ms: u64) -> std::sync::MutexGuard<'_, Option<PeerSched>> {
        let limits = self.cell.as_ref().and_then(|c| c.settings().rate_limit);
        let mut g = self.pinsched.lock().unwrap_or_else(|e| e.into_inner());
        match (limits, g.as_mut()) {
            (None, _) => *g = None,
            (Some(l), None) => {
                *g = Some(PeerSched {
                    miss: pinsched::PinSched::new(l, now_ms),
                    action: pinsched::PinSched::new(l, now_ms),
                })
            }
            (Some(l), Some(s)) if s.miss.limits() != l => {
                s.miss.set_limits(l);
                s.action.set_limits(l);
            }
            _ => {}
        }
        g
    }

    /// An encoded PACKET_IN from `in_port` (`miss`: a table miss) through the connection's
    /// scheduler: `Some` to send now, `None` when queued (or dropped for a queued one).
    pub fn schedule(&self, miss: bool, in_port: u32, bytes: Vec<u8>) -> Option<Vec<u8>> {
        let now = self.now_ms();
        match self.lock_sched(now).as_mut() {
            None => Some(bytes),
            Some(s) if miss => s.miss.send(now, in_port, bytes),
            Some(s) => s.action.send(now, in_port, bytes),
        }
    }

    /// Queued PACKET_INs the schedulers let go now, into `out`; how long until more may go
    /// (`None`: none queued).
    pub fn drain(&self, out: &mut Vec<Vec<u8>>) -> Option<Duration> {
        let now = self.now_ms();
        let mut g = self.lock_sched(now);
        let s = g.as_mut()?;
        s.miss.run(now, out);
        s.action.run(now, out);
        let wait = [s.miss.wait_ms(now), s.action.wait_ms(now)].into_iter().flatten().min()?;
        Some(Duration::from_millis(wait))
    }

    /// The schedulers' counters (miss, action), while rate-limited.
    pub fn pin_stats(&self) -> Option<[pinsched::PinStats; 2]> {
        let g = self.pinsched.lock().unwrap_or_else(|e| e.into_inner());
        g.as_ref().map(|s| [s.miss.stats(), s.action.stats()])
    }
}

impl Peer {
    /// Does this connection take asynchronous messages (PACKET_IN, FLOW_REMOVED) now?
    pub fn takes_async(&self) -> bool {
        self.version.load(Ordering::Relaxed) != 0
            && self.role.load(Ordering::Relaxed) != ROLE_SLAVE
            && (self.active || self.miss_send_len.load(Ordering::Relaxed) != 0)
    }

    /// The connection's async configuration now: what its SET_ASYNC set, over OVS's default
    /// for its version — or over nothing at all (every mask zero, OVS's
    /// `OFPUTIL_ASYNC_CFG_INIT`) when its controller has `enable_async_messages=false`.
    pub fn async_config(&self) -> rqvs_openflow::async_config::AsyncConfig {
        let v = self.version.load(Ordering::Relaxed);
        let enabled = self.cell.as_ref().is_none_or(|c| c.settings().async_enabled);
        let mut c = if enabled {
            rqvs_openflow::async_config::AsyncConfig::ovs_default(v)
        } else {
            rqvs_openflow::async_config::AsyncConfig::none()
        };
        if let Some(set) = &*self.async_config.lock().unwrap_or_else(|e| e.into_inner()) {
            c.apply(set);
        }
        c
    }

    /// Does the connection's async configuration let through a message whose MASTER property
    /// is `master_prop` with `reason` (for its role: the slave masks for a slave)?
    pub fn wants(&self, master_prop: u16, reason: u8) -> bool {
        let slave = self.role.load(Ordering::Relaxed) == ROLE_SLAVE;
        self.async_config().wants(master_prop, slave, reason)
    }
}

impl Peer {
    /// An asynchronous message (PACKET_IN, FLOW_REMOVED, PORT_STATUS) as this connection takes
    /// it: in its version, and for OpenFlow 1.0 in the form its Nicira requests chose
    /// ([`rqvs_openflow::of10_async`]).
    pub fn encode_async(&self, msg: &rqvs_openflow::Message) -> Result<Vec<u8>, rqvs_openflow::EncodeError> {
        match self.version.load(Ordering::Relaxed) {
            rqvs_openflow::OFP10 => rqvs_openflow::of10_async::encode_async(msg, self.form()),
            v => rqvs_openflow::encode(v, 0, msg),
        }
    }

    /// The 1.0 form (the default for other versions).
    pub fn form(&self) -> rqvs_openflow::of10_async::AsyncForm {
        *self.of10_form.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Hub {
    fn new(control: Arc<Control>, datapath_id: u64) -> Hub {
        Hub {
            datapath_id: AtomicU64::new(datapath_id),
            fail_open_interval_ms: AtomicU64::new(0),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            hello_timeout: DEFAULT_HELLO_TIMEOUT,
            connections_refused: AtomicU64::new(0),
            hello_timeouts: AtomicU64::new(0),
            standalone: AtomicBool::new(true),
            controllers: AtomicUsize::new(0),
            peers: Mutex::new(Vec::new()),
            next_peer: AtomicU64::new(1),
            election: Mutex::new(None),
            fail: Mutex::new(FailState { admitted: 0, none_since: Instant::now(), fail_opens: 0 }),
            packet_ins_sent: AtomicU64::new(0),
            packet_ins_unsent: AtomicU64::new(0),
            packet_ins_dropped: AtomicU64::new(0),
            packet_outs: AtomicU64::new(0),
            packet_outs_refused: AtomicU64::new(0),
            control,
        }
    }

    /// The longest probe interval among the controllers configured now.
    pub fn fail_open_interval(&self) -> Duration {
        Duration::from_millis(self.fail_open_interval_ms.load(Ordering::Relaxed))
    }

    pub fn fail_mode(&self) -> FailMode {
        if self.standalone.load(Ordering::Relaxed) {
            FailMode::Standalone
        } else {
            FailMode::Secure
        }
    }

    fn set_fail_mode(&self, mode: FailMode) {
        self.standalone.store(mode == FailMode::Standalone, Ordering::Relaxed);
    }

    fn lock_peers(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Peer>>> {
        self.peers.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn lock_fail(&self) -> std::sync::MutexGuard<'_, FailState> {
        self.fail.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new connection's entry (role equal; passive connections take no packet-ins until they
    /// set a miss_send_len, active ones — those of a controller `cell` — start at 128).
    pub fn register(
        &self,
        name: String,
        active: bool,
        cell: Option<Arc<controller::ControllerCell>>,
        out: SyncSender<Vec<u8>>,
        pins: Arc<AtomicUsize>,
    ) -> Arc<Peer> {
        let p = Arc::new(Peer {
            id: self.next_peer.fetch_add(1, Ordering::Relaxed),
            name,
            active,
            cell,
            out,
            version: AtomicU8::new(0),
            role: AtomicU32::new(ROLE_EQUAL),
            miss_send_len: AtomicU16::new(if active { 128 } else { 0 }),
            dropped: AtomicU64::new(0),
            pins,
            async_config: Mutex::new(None),
            of10_form: Mutex::new(Default::default()),
            monitors: monitor::Monitors::default(),
            pinsched: Mutex::new(None),
            born: Instant::now(),
        });
        self.lock_peers().push(p.clone());
        p
    }

    pub fn unregister(&self, id: u64) {
        self.lock_peers().retain(|p| p.id != id);
    }

    /// The connections now (a copy of the list).
    pub fn peers(&self) -> Vec<Arc<Peer>> {
        self.lock_peers().clone()
    }

    /// Gives `me` the role `role`; a new master makes every other master a slave (OpenFlow
    /// 1.3 §6.3.5).
    pub fn set_role(&self, me: &Peer, role: u32) {
        let peers = self.lock_peers();
        if role == ROLE_MASTER {
            for p in peers.iter().filter(|p| p.id != me.id) {
                let _ = p.role.compare_exchange(ROLE_MASTER, ROLE_SLAVE, Ordering::Relaxed, Ordering::Relaxed);
            }
        }
        me.role.store(role, Ordering::Relaxed);
    }

    /// A MASTER/SLAVE role request's `generation_id`: accepted (and remembered) unless it is
    /// older than the last one accepted — by serial-number arithmetic, as OpenFlow 1.3
    /// §6.3.5 and OVS's `ofconn_set_primary_election_id` compare them.
    pub fn elect(&self, id: u64) -> bool {
        let mut e = self.election.lock().unwrap_or_else(|e| e.into_inner());
        if e.is_some_and(|last| (id.wrapping_sub(last) as i64) < 0) {
            return false;
        }
        *e = Some(id);
        true
    }

    /// The last generation_id accepted, if any.
    pub fn election_id(&self) -> Option<u64> {
        *self.election.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn count_packet_out(&self, ok: bool) {
        let c = if ok { &self.packet_outs } else { &self.packet_outs_refused };
        c.fetch_add(1, Ordering::Relaxed);
    }

    fn stats(&self) -> ChannelStats {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let fail = self.lock_fail();
        ChannelStats {
            connections: self.lock_peers().len(),
            controllers_admitted: fail.admitted,
            packet_ins_sent: get(&self.packet_ins_sent),
            packet_ins_unsent: get(&self.packet_ins_unsent),
            packet_ins_dropped: get(&self.packet_ins_dropped),
            packet_outs: get(&self.packet_outs),
            packet_outs_refused: get(&self.packet_outs_refused),
            fail_opens: fail.fail_opens,
            failed_open: self.control.is_failed_open(),
            connections_refused: get(&self.connections_refused),
            hello_timeouts: get(&self.hello_timeouts),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_unix_listener_is_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("rqvs-punix-mode-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("br0.mgmt");
        let l = super::OpenflowListener::bind_unix(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        drop(l);
        let _ = std::fs::remove_dir_all(&dir);
    }

    use super::*;

    #[test]
    fn listen_targets_parse() {
        let t = |s: &str, a: &str, tls: bool| {
            assert_eq!(parse_target(s).unwrap(), ListenTarget { addr: a.parse().unwrap(), tls }, "{s}")
        };
        t("ptcp:6653", "127.0.0.1:6653", false);
        t("ptcp:127.0.0.1:7000", "127.0.0.1:7000", false);
        t("ptcp:7000:0.0.0.0", "0.0.0.0:7000", false);
        t("pssl:", "127.0.0.1:6653", true);
        t("pssl:6634", "127.0.0.1:6634", true);
        t("pssl:6634:127.0.0.1", "127.0.0.1:6634", true);
        t("pssl::10.0.0.1", "10.0.0.1:6653", true);
        t("pssl:6634:[::1]", "[::1]:6634", true);
        t("pssl:[::1]:6634", "[::1]:6634", true);
        for bad in ["tcp:6653", "ssl:6653", "ptcp:host", "pssl:99999", "ptcp:6653:nowhere"] {
            assert!(
                parse_target(bad).unwrap_err().0.contains("expected ptcp:[PORT][:IP] or pssl:[PORT][:IP]"),
                "{bad}"
            );
        }
    }
}
