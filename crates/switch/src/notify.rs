//! Telling a supervisor that the switch is ready: systemd's `sd_notify` protocol, which
//! `Type=notify` units use (dist/rqvs-vswitchd.service) and which `rqvs switch --detach` uses
//! between its two processes.
//!
//! When the environment names a socket in `NOTIFY_SOCKET` (a path, or `@NAME` for an abstract
//! one), [`ready`] sends one datagram `READY=1\nSTATUS=…\nMAINPID=PID` to it — once per process,
//! whichever caller is first — and [`stopping`] sends `STOPPING=1`. Without `NOTIFY_SOCKET` both
//! do nothing. `--detach`'s parent waits on its own socket ([`DETACH_SOCKET`]), told `READY=1`
//! only. A datagram that cannot be sent is logged once and otherwise ignored: a supervisor
//! gone away must not stop the switch.
//!
//! When the switch is ready: `rqvs switch` with `--port`s once its ports are open and its
//! threads and listeners started (the `ready` log line); `rqvs switch --ovsdb` once the first
//! configuration read from the database has been applied and `cur_cfg` written back — what
//! ovs-vswitchd waits for before it calls `daemonize_complete()`.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::atomic::{AtomicBool, Ordering};

/// The environment variable systemd sets.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// The socket `rqvs switch --detach`'s waiting parent gives its child: told `READY=1` only (the
/// parent is gone after that), besides an outer `NOTIFY_SOCKET`.
pub const DETACH_SOCKET: &str = "RQVS_DETACH_NOTIFY";

static READY_SENT: AtomicBool = AtomicBool::new(false);
static FAILED_LOGGED: AtomicBool = AtomicBool::new(false);

/// `READY=1` with a one-line status (sent once per process; later calls do nothing).
pub fn ready(status: &str) {
    if READY_SENT.swap(true, Ordering::SeqCst) {
        return;
    }
    let status: String = status.chars().map(|c| if c == '\n' { ' ' } else { c }).collect();
    let message = format!("READY=1\nSTATUS={status}\nMAINPID={}", std::process::id());
    notify(NOTIFY_SOCKET, &message);
    notify(DETACH_SOCKET, &message);
}

/// `STOPPING=1`: the switch has been asked to stop.
pub fn stopping() {
    notify(NOTIFY_SOCKET, "STOPPING=1");
}

/// Whether [`ready`] has been called in this process.
pub fn is_ready() -> bool {
    READY_SENT.load(Ordering::SeqCst)
}

fn notify(var: &str, message: &str) {
    let Some(target) = std::env::var_os(var) else { return };
    let target = target.to_string_lossy().into_owned();
    if let Err(e) = send(&target, message.as_bytes()) {
        if !FAILED_LOGGED.swap(true, Ordering::SeqCst) {
            crate::log_warn!("rqvs switch: notifying the supervisor at {var}={target}: {e}");
        }
    }
}

/// Sends one datagram to a notify socket: a path, or `@NAME` for Linux's abstract namespace.
pub fn send(target: &str, message: &[u8]) -> std::io::Result<()> {
    let addr = match target.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name.as_bytes())?,
        None if target.starts_with('/') => SocketAddr::from_pathname(target)?,
        None => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "expected an absolute path or @NAME (an abstract socket)",
            ))
        }
    };
    let sock = UnixDatagram::unbound()?;
    sock.send_to_addr(message, &addr)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_to_a_path_and_an_abstract_socket() {
        let dir = std::env::temp_dir().join(format!("rqvs-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let rx = UnixDatagram::bind(&path).unwrap();
        send(path.to_str().unwrap(), b"READY=1").unwrap();
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");

        let name = format!("rqvs-notify-test-{}", std::process::id());
        let rx = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap()).unwrap();
        send(&format!("@{name}"), b"STOPPING=1").unwrap();
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1");

        assert!(send("relative/path", b"x").is_err(), "a relative path is refused");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
