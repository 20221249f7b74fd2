//! The active side: `--controller tcp:IP:PORT` connections the switch opens and keeps
//! (reconnecting with backoff), and the fail-open watch of `--fail-mode standalone` (see the
//! module docs of [`crate::openflow`] for the semantics; they are Open vSwitch's `rconn` and
//! `fail-open` ones).

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::connection::{self, Kind};
use super::transport::Stream;
use super::{parse_ip_port, Hub, Tls, OFP_PORT};
use crate::Error;

/// What the switch does while no controller is there (OVS's `fail_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailMode {
    /// The flows stay; nothing else happens.
    Secure,
    /// After three inactivity-probe intervals without an admitted controller: fail open
    /// (flows removed, a hidden `NORMAL` rule forwards like a learning switch) until one is.
    Standalone,
}

impl std::str::FromStr for FailMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<FailMode, Error> {
        match s {
            "secure" => Ok(FailMode::Secure),
            "standalone" => Ok(FailMode::Standalone),
            _ => Err(Error(format!("--fail-mode '{s}': expected secure or standalone"))),
        }
    }
}

/// The shortest time a connection attempt — the TCP connect, the TLS handshake and the HELLO
/// exchange — may take: OVS's `timeout_CONNECTING` is the longer of this and the backoff
/// waited before the attempt.
const MIN_CONNECTING: Duration = Duration::from_secs(1);

/// A controller's timers: its inactivity probe and its longest reconnection wait (OVS's
/// `Controller.inactivity_probe` and `max_backoff`). They change while its connection runs
/// ([`super::Channel::set_controllers_with`]): the probe at the connection's next tick, the
/// backoff at once (a wait longer than the new maximum is cut to it, as OVS's
/// `rconn_set_max_backoff` does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// Idle time after which the connection is sent an ECHO_REQUEST (and closed after as long
    /// again without an answer); zero: never probed.
    pub probe: Duration,
    /// The interval the fail-open trigger counts three of (OVS: the configured interval, which
    /// the probe itself raises to 5 s at least).
    pub interval: Duration,
    /// The longest wait between two connection attempts.
    pub max_backoff: Duration,
}

impl Timing {
    /// `--inactivity-probe` and `--max-backoff` as given.
    pub fn new(probe: Duration, max_backoff: Duration) -> Timing {
        Timing { probe, interval: probe, max_backoff }
    }

    /// From a `Controller` row's columns (milliseconds), as ovs-vswitchd 3.1 reads them
    /// (`bridge_configure_remotes`, `rconn_set_probe_interval`, `rconn_set_max_backoff`):
    /// `inactivity_probe` absent → 5 s; 0 → no probes; below 1000 → 1 s; else whole seconds
    /// (truncated) — and the probe itself at least 5 s, while the fail-open trigger takes the
    /// seconds as they are. `max_backoff` absent → 8 s, else whole seconds, at least 1 s.
    pub fn ovs(inactivity_probe: Option<i64>, max_backoff: Option<i64>) -> Timing {
        let secs: u64 = match inactivity_probe {
            None => 5,
            Some(0) => 0,
            Some(ms) if ms < 1000 => 1,
            Some(ms) => (ms / 1000) as u64,
        };
        let probe = if secs == 0 { Duration::ZERO } else { Duration::from_secs(secs.max(5)) };
        let backoff = max_backoff.map_or(8, |ms| (ms / 1000).max(1) as u64);
        Timing { probe, interval: Duration::from_secs(secs), max_backoff: Duration::from_secs(backoff) }
    }
}

/// OVS's default DSCP of a controller connection (`DSCP_DEFAULT`: internetwork control, 48).
pub const DEFAULT_DSCP: u8 = 48;

/// A controller's settings from its `Controller` row, beside its timers (OVS's
/// `struct ofproto_controller`); they change while its connection runs
/// ([`super::Channel::set_controllers_with`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControllerSettings {
    pub timing: Timing,
    /// `enable_async_messages` (absent: true). False: the connection is sent no asynchronous
    /// message (PACKET_IN, FLOW_REMOVED, PORT_STATUS) until it asks with SET_ASYNC — OVS's
    /// `ofconn_get_async_config`: all masks zero instead of `ofputil_async_cfg_default`.
    /// Read at each message, so a change applies to the running connection.
    pub async_enabled: bool,
    /// The DSCP of the connection's IP packets (`other_config:dscp`, 0..=63; absent or out of
    /// range: [`DEFAULT_DSCP`]), set on the socket before it connects (`IP_TOS`/`IPV6_TCLASS`
    /// = DSCP << 2, OVS's `set_dscp`). A change reconnects a connected controller, as OVS's
    /// `ofconn_reconfigure` does (`rconn_reconnect`).
    pub dscp: u8,
    /// `controller_rate_limit` and `controller_burst_limit` (absent rate: `None`, no limit):
    /// the connection's two packet-in schedulers ([`super::pinsched`]), one for table misses
    /// and one for the rest. Read at each packet-in, so a change applies to the running
    /// connection (its queues dropped down to a smaller burst).
    pub rate_limit: Option<super::pinsched::Limits>,
    /// `controller_queue_size` (1..=512; absent: the bridge's `other_config:controller-queue-size`,
    /// else [`DEFAULT_QUEUE_SIZE`]): the packet-ins the connection may have waiting to be written
    /// to its socket; one more is dropped (OVS's `rconn_send_with_limit` on the connection's
    /// packet-in counter). Read at each packet-in.
    pub queue_size: usize,
}

/// Packet-ins a connection may have waiting to be written when nothing says otherwise: OVS's
/// default `controller_queue_size` (and the management connection's).
pub const DEFAULT_QUEUE_SIZE: usize = 100;

impl ControllerSettings {
    /// `timing`, with OVS's defaults for the rest.
    pub fn new(timing: Timing) -> ControllerSettings {
        ControllerSettings {
            timing,
            async_enabled: true,
            dscp: DEFAULT_DSCP,
            rate_limit: None,
            queue_size: DEFAULT_QUEUE_SIZE,
        }
    }
}

/// OVS's `rconn` states, as `Controller.status:state` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RconnState {
    /// Waiting before the next attempt.
    Backoff,
    /// Connecting, or connected and waiting for the HELLO exchange.
    Connecting,
    /// Connected (HELLO exchanged), no probe outstanding.
    Active,
    /// Connected, an inactivity probe sent and not answered yet.
    Idle,
}

impl RconnState {
    pub fn name(self) -> &'static str {
        match self {
            RconnState::Backoff => "BACKOFF",
            RconnState::Connecting => "CONNECTING",
            RconnState::Active => "ACTIVE",
            RconnState::Idle => "IDLE",
        }
    }
}

/// What a controller's connection has been through (OVS's `rconn` bookkeeping that
/// `Controller.status` reports).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Rconn {
    pub state: RconnState,
    /// Why the last connection attempt failed or the last connection ended (`None`: it was
    /// closed by the switch itself).
    pub last_error: Option<String>,
    /// When the last connection completed its HELLO exchange, and when one last ended.
    pub last_connected: Option<Instant>,
    pub last_disconnected: Option<Instant>,
}

/// A controller's settings and state, shared by its thread, its connection and the channel.
pub(crate) struct ControllerCell {
    settings: Mutex<ControllerSettings>,
    /// Set when the DSCP changed: the connection ends at its next tick (and reconnects).
    reconnect: AtomicBool,
    rconn: Mutex<Rconn>,
}

impl ControllerCell {
    pub fn new(settings: ControllerSettings) -> ControllerCell {
        ControllerCell {
            settings: Mutex::new(settings),
            reconnect: AtomicBool::new(false),
            rconn: Mutex::new(Rconn {
                state: RconnState::Connecting,
                last_error: None,
                last_connected: None,
                last_disconnected: None,
            }),
        }
    }

    pub fn settings(&self) -> ControllerSettings {
        *self.settings.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn timing(&self) -> Timing {
        self.settings().timing
    }

    /// New settings; a changed DSCP makes the running connection end (and reconnect).
    pub fn set_settings(&self, s: ControllerSettings) {
        let mut now = self.settings.lock().unwrap_or_else(|e| e.into_inner());
        if now.dscp != s.dscp {
            self.reconnect.store(true, Ordering::Relaxed);
        }
        *now = s;
    }

    /// Was the DSCP changed since the last call (the connection must reconnect)?
    pub fn take_reconnect(&self) -> bool {
        self.reconnect.swap(false, Ordering::Relaxed)
    }

    pub fn rconn(&self) -> MutexGuard<'_, Rconn> {
        self.rconn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The connection ended (or an attempt failed) for `why` (`None`: closed by the switch).
    pub fn disconnected(&self, why: Option<String>) {
        let mut r = self.rconn();
        r.last_disconnected = Some(Instant::now());
        if why.is_some() {
            r.last_error = why;
        }
    }
}

/// An I/O error as OVS's `ovs_strerror` words it (`Connection refused`, without Rust's
/// `(os error 111)`).
pub(crate) fn strerror(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// A controller to connect to, and whether with TLS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControllerTarget {
    pub addr: SocketAddr,
    /// `ssl:`: TLS (the controller's certificate must chain to the CA).
    pub tls: bool,
}

impl From<SocketAddr> for ControllerTarget {
    /// A plain TCP controller.
    fn from(addr: SocketAddr) -> ControllerTarget {
        ControllerTarget { addr, tls: false }
    }
}

/// A controller: `tcp:IP[:PORT]` or `ssl:IP[:PORT]` (PORT defaults to 6653, as in OVS).
pub fn parse_controller(s: &str) -> Result<ControllerTarget, Error> {
    let bad = || Error(format!("--controller '{s}': expected tcp:IP[:PORT] or ssl:IP[:PORT], e.g. tcp:127.0.0.1:6653"));
    let (tls, rest) = match (s.strip_prefix("tcp:"), s.strip_prefix("ssl:")) {
        (Some(r), _) => (false, r),
        (_, Some(r)) => (true, r),
        _ => return Err(bad()),
    };
    if let Ok(ip) = rest.trim_start_matches('[').trim_end_matches(']').parse::<std::net::IpAddr>() {
        return Ok(ControllerTarget { addr: SocketAddr::new(ip, OFP_PORT), tls });
    }
    parse_ip_port(rest).map(|addr| ControllerTarget { addr, tls }).ok_or_else(bad)
}

/// Sleeps `d` in short steps — cut short when `cell`'s `max_backoff` becomes shorter
/// meanwhile; false when the switch was asked to stop (or `retired` was set) meanwhile.
fn sleep_unless_stopped(hub: &Hub, retired: &AtomicBool, d: Duration, cell: Option<&ControllerCell>) -> bool {
    let t0 = Instant::now();
    let stopped = || hub.control.stop_requested() || retired.load(Ordering::Relaxed);
    loop {
        let until = t0 + cell.map_or(d, |c| d.min(c.timing().max_backoff));
        let now = Instant::now();
        if now >= until {
            break;
        }
        if stopped() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20).min(until - now));
    }
    !stopped()
}

/// Keeps a connection to `addr` until the switch stops: connect, serve, and after a failure or
/// the end of a connection wait 1 s, 2 s, 4 s, ... up to the cell's `max_backoff` (back to 1 s
/// after a connection that lasted longer than the wait before it, as OVS's `rconn` does) — or
/// until `retired` is set (the controller removed while the switch runs: its connection
/// closed). The cell's timers are read at each attempt (and its connection's at each tick); its
/// state is kept there for `Controller.status`.
pub(crate) fn run(
    addr: SocketAddr,
    tls: Option<Arc<Tls>>,
    hub: &Arc<Hub>,
    cell: &Arc<ControllerCell>,
    retired: &Arc<AtomicBool>,
) {
    let name = format!("{}:{addr}", if tls.is_some() { "ssl" } else { "tcp" });
    let mut backoff = Duration::ZERO;
    let mut failures = 0u64;
    while !hub.control.stop_requested() && !retired.load(Ordering::Relaxed) {
        cell.rconn().state = RconnState::Connecting;
        let _ = cell.take_reconnect();
        let t0 = Instant::now();
        // OVS's rconn: CONNECTING (connect, then HELLO) lasts at most max(1 s, backoff).
        let hello_by = t0 + backoff.max(MIN_CONNECTING);
        let dscp = cell.settings().dscp;
        match connect(addr, dscp, hello_by - t0).and_then(|s| wrap(s, addr, tls.as_deref())) {
            Ok(stream) => {
                crate::log_info!(
                    "rqvs switch: controller {name}: connected{}",
                    if failures > 0 { format!(" (after {failures} failed attempts)") } else { String::new() }
                );
                failures = 0;
                let kind = Kind::Active { cell: cell.clone(), hello_by };
                let timed_out = connection::serve(stream, addr, hub, kind, retired);
                let lasted = t0.elapsed();
                crate::log_info!("rqvs switch: controller {name}: disconnected after {:.1} s", lasted.as_secs_f64());
                // A CONNECTING timeout keeps the backoff growing (OVS: `backoff_deadline`
                // set to never).
                if lasted > backoff && !timed_out {
                    backoff = Duration::ZERO;
                }
            }
            Err(e) => {
                failures += 1;
                cell.disconnected(Some(strerror(&e)));
                if failures == 1 {
                    crate::log_warn!(
                        "rqvs switch: controller {name}: connection failed ({e}); retrying with backoff up to {} s (logged once)",
                        cell.timing().max_backoff.as_secs()
                    );
                }
            }
        }
        cell.rconn().state = RconnState::Backoff;
        let max_backoff = cell.timing().max_backoff;
        backoff = if backoff.is_zero() { Duration::from_secs(1) } else { (backoff * 2).min(max_backoff) };
        if !sleep_unless_stopped(hub, retired, backoff.min(max_backoff), Some(cell)) {
            return;
        }
        // A lower maximum applies to the next waits too.
        backoff = backoff.min(cell.timing().max_backoff);
    }
}

/// A TCP connection to `addr` whose IP packets, its SYN on, carry `dscp` (OVS's `set_dscp`
/// before `connect`: `IP_TOS`, or `IPV6_TCLASS`, = DSCP << 2), within `timeout`.
fn connect(addr: SocketAddr, dscp: u8, timeout: Duration) -> std::io::Result<TcpStream> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    set_dscp(socket2::SockRef::from(&s), addr, dscp)?;
    s.connect_timeout(&addr.into(), timeout)?;
    Ok(s.into())
}

/// Makes a TCP socket's IP packets carry `dscp` (OVS's `set_dscp`: `IP_TOS`, or `IPV6_TCLASS`
/// when `addr` — either end's address — is IPv6, = DSCP << 2).
pub(crate) fn set_dscp(s: socket2::SockRef<'_>, addr: SocketAddr, dscp: u8) -> std::io::Result<()> {
    let tos = u32::from(dscp.min(63)) << 2;
    if addr.is_ipv4() {
        s.set_tos_v4(tos)
    } else {
        s.set_tclass_v6(tos)
    }
}

/// The connected socket as a plain or TLS stream (the handshake runs as the connection starts).
fn wrap(s: TcpStream, addr: SocketAddr, tls: Option<&Tls>) -> std::io::Result<Stream> {
    let Some(tls) = tls else { return Ok(Stream::Tcp(s)) };
    // OVS checks the chain, not the name ([`super::tls`]); the IP is the name rustls is given.
    let name = rustls_pki_types::ServerName::IpAddress(addr.ip().into());
    let c = rustls::ClientConnection::new(tls.client_config(), name)
        .map_err(|e| std::io::Error::other(format!("TLS: {e}")))?;
    Ok(Stream::Tls(s, Box::new(c.into())))
}

/// The fail-open watch: a standalone switch with controllers fails open once none has been
/// admitted for three inactivity-probe intervals — the longest of its controllers' (OVS's
/// `fail_open_run`, `connmgr_get_max_probe_interval`), at least 1 s; a controller's
/// admission ends it ([`admitted`]), and so does the fail mode becoming `secure` or the last
/// controller being removed (OVS destroys its fail-open state then, recovering). The mode and
/// the controllers are read at each tick ([`Hub::fail_mode`], [`Hub::controllers`]), so they
/// change while the switch runs (`--ovsdb`: `ovs-vsctl set-fail-mode`, `set-controller`).
pub(crate) fn watch_fail_open(hub: &Hub) {
    let never = AtomicBool::new(false);
    while sleep_unless_stopped(hub, &never, Duration::from_millis(100), None) {
        // Three of the longest probe interval among the controllers (they change live), and
        // at least a second (OVS: `trigger_duration`, `fail_open_run`).
        let trigger = (hub.fail_open_interval() * 3).max(Duration::from_secs(1));
        let mut fail = hub.lock_fail();
        let waited = fail.none_since.elapsed();
        let standalone = hub.fail_mode() == FailMode::Standalone;
        let controllers = hub.controllers.load(Ordering::Relaxed);
        if standalone && controllers > 0 {
            if fail.admitted == 0 && waited >= trigger && !hub.control.is_failed_open() {
                crate::log_info!(
                    "rqvs switch: no controller for {:.0} s: failing open (flows removed; NORMAL forwarding until a controller is admitted)",
                    waited.as_secs_f64()
                );
                match hub.control.fail_open(true) {
                    Ok(()) => fail.fail_opens += 1,
                    Err(e) => crate::log_warn!("rqvs switch: failing open: {e}"),
                }
            }
        } else if hub.control.is_failed_open() {
            let why = if standalone { "no controller is configured" } else { "the fail mode is secure" };
            match hub.control.fail_open(false) {
                Ok(()) => crate::log_info!("rqvs switch: {why}: no longer in fail-open mode"),
                Err(e) => crate::log_warn!("rqvs switch: leaving fail-open mode: {e}"),
            }
        }
    }
}

/// An active connection was admitted: one more controller; the first ends fail-open.
pub(crate) fn admitted(hub: &Hub) {
    let mut fail = hub.lock_fail();
    fail.admitted += 1;
    if hub.control.is_failed_open() {
        match hub.control.fail_open(false) {
            Ok(()) => crate::log_info!("rqvs switch: a controller is admitted: no longer in fail-open mode"),
            Err(e) => crate::log_warn!("rqvs switch: leaving fail-open mode: {e}"),
        }
    }
}

/// An admitted active connection ended.
pub(crate) fn gone(hub: &Hub) {
    let mut fail = hub.lock_fail();
    fail.admitted = fail.admitted.saturating_sub(1);
    if fail.admitted == 0 {
        fail.none_since = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse() {
        let tcp = |s: &str| ControllerTarget { addr: s.parse().unwrap(), tls: false };
        let ssl = |s: &str| ControllerTarget { addr: s.parse().unwrap(), tls: true };
        assert_eq!(parse_controller("tcp:127.0.0.1:6633").unwrap(), tcp("127.0.0.1:6633"));
        assert_eq!(parse_controller("tcp:10.0.0.1").unwrap(), tcp("10.0.0.1:6653"));
        assert_eq!(parse_controller("tcp:[::1]:7000").unwrap(), tcp("[::1]:7000"));
        assert_eq!(parse_controller("ssl:10.0.0.1").unwrap(), ssl("10.0.0.1:6653"));
        assert_eq!(parse_controller("ssl:127.0.0.1:6634").unwrap(), ssl("127.0.0.1:6634"));
        for bad in ["127.0.0.1:6653", "ptcp:6653", "pssl:6653", "tcp:", "ssl:", "tcp:host:1", "tcp:1.2.3.4:99999"] {
            assert!(parse_controller(bad).unwrap_err().0.contains("expected tcp:IP[:PORT] or ssl:IP[:PORT]"), "{bad}");
        }
        assert_eq!("secure".parse::<FailMode>().unwrap(), FailMode::Secure);
        assert!("open".parse::<FailMode>().is_err());
    }
}
