//! The active side: `--controller tcp:IP:PORT` connections the switch opens and keeps
//! (reconnecting with backoff), and the fail-open watch of `--fail-mode standalone` (see the
//! module docs of [`crate::openflow`] for the semantics; they are Open vSwitch's `rconn` and
//! `fail-open` ones).

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
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

/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

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

/// Sleeps `d` in short steps; false when the switch was asked to stop (or `retired` was set)
/// meanwhile.
fn sleep_unless_stopped(hub: &Hub, retired: &AtomicBool, d: Duration) -> bool {
    let until = Instant::now() + d;
    let stopped = || hub.control.stop_requested() || retired.load(Ordering::Relaxed);
    while Instant::now() < until {
        if stopped() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20).min(until.saturating_duration_since(Instant::now())));
    }
    !stopped()
}

/// Keeps a connection to `addr` until the switch stops: connect, serve, and after a failure or
/// the end of a connection wait 1 s, 2 s, 4 s, ... up to `max_backoff` (back to 1 s after a
/// connection that lasted longer than the wait before it, as OVS's `rconn` does) — or until
/// `retired` is set (the controller removed while the switch runs: its connection closed).
pub(crate) fn run(
    addr: SocketAddr,
    tls: Option<Arc<Tls>>,
    hub: &Arc<Hub>,
    probe: Duration,
    max_backoff: Duration,
    retired: &Arc<AtomicBool>,
) {
    let name = format!("{}:{addr}", if tls.is_some() { "ssl" } else { "tcp" });
    let mut backoff = Duration::ZERO;
    let mut failures = 0u64;
    while !hub.control.stop_requested() && !retired.load(Ordering::Relaxed) {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).and_then(|s| wrap(s, addr, tls.as_deref())) {
            Ok(stream) => {
                let t0 = Instant::now();
                crate::log_info!(
                    "rqvs switch: controller {name}: connected{}",
                    if failures > 0 { format!(" (after {failures} failed attempts)") } else { String::new() }
                );
                failures = 0;
                connection::serve(stream, addr, hub, Kind::Active { probe }, retired);
                let lasted = t0.elapsed();
                crate::log_info!("rqvs switch: controller {name}: disconnected after {:.1} s", lasted.as_secs_f64());
                if lasted > backoff {
                    backoff = Duration::ZERO;
                }
            }
            Err(e) => {
                failures += 1;
                if failures == 1 {
                    crate::log_warn!("rqvs switch: controller {name}: connection failed ({e}); retrying with backoff up to {} s (logged once)", max_backoff.as_secs());
                }
            }
        }
        backoff = if backoff.is_zero() { Duration::from_secs(1) } else { (backoff * 2).min(max_backoff) };
        if !sleep_unless_stopped(hub, retired, backoff.min(max_backoff)) {
            return;
        }
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
/// admitted for three inactivity-probe intervals (OVS's `fail_open_run`); a controller's
/// admission ends it ([`admitted`]), and so does the fail mode becoming `secure` or the last
/// controller being removed (OVS destroys its fail-open state then, recovering). The mode and
/// the controllers are read at each tick ([`Hub::fail_mode`], [`Hub::controllers`]), so they
/// change while the switch runs (`--ovsdb`: `ovs-vsctl set-fail-mode`, `set-controller`).
pub(crate) fn watch_fail_open(hub: &Hub) {
    let trigger = hub.probe * 3;
    let never = AtomicBool::new(false);
    while sleep_unless_stopped(hub, &never, Duration::from_millis(100)) {
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
