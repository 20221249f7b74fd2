//! Private network namespaces and veth pairs for tests — this crate's and the switch's.
//!
//! The rule every test follows: frames only flow over veth pairs whose *both* ends live in
//! namespaces the test created. [`Netns::new`] creates a uniquely named namespace (IPv6 off, so
//! the kernel sends nothing of its own; loopback left down), [`Netns::veth`] creates a pair with
//! one end in each of two such namespaces — directly there, never in the host namespace — and
//! dropping a [`Netns`] deletes it with everything inside (also when a test panics: `Drop` runs
//! during unwinding). [`Netns::run`] runs code on a thread that has entered the namespace;
//! sockets opened there (a port, a [`RawSocket`]) stay in it whichever thread uses them later.
//!
//! [`available`] decides whether such tests can run: they need root and `ip` (iproute2). When
//! not, they are skipped with a printed reason — unless `RQVS_REQUIRE_NETNS=1`, which turns the
//! skip into a failure (CI sets it).

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::sys;

/// Whether namespace tests can run; prints why not and returns false, or panics when
/// `RQVS_REQUIRE_NETNS=1` demands them.
///
/// # Panics
/// When `RQVS_REQUIRE_NETNS=1` and the tests cannot run (that is the point of the variable).
pub fn available(test: &str) -> bool {
    let reason = if !sys::is_root() {
        Some("not running as root")
    } else if Command::new("ip").arg("-V").output().is_err() {
        Some("`ip` (iproute2) is not installed")
    } else {
        None
    };
    let Some(reason) = reason else { return true };
    if std::env::var("RQVS_REQUIRE_NETNS").as_deref() == Ok("1") {
        panic!("{test}: RQVS_REQUIRE_NETNS=1 but the test cannot run: {reason}");
    }
    eprintln!("skipping {test}: {reason} (set RQVS_REQUIRE_NETNS=1 to make this a failure)");
    false
}

static NEXT: AtomicU32 = AtomicU32::new(0);

fn ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip").args(args).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim())))
    }
}

/// A network namespace this process created; deleted on drop.
pub struct Netns {
    name: String,
    file: File,
}

impl Netns {
    /// Creates `rqvs-TAG-PID-N`, with IPv6 disabled inside.
    pub fn new(tag: &str) -> io::Result<Netns> {
        let name = format!("rqvs-{tag}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        ip(&["netns", "add", &name])?;
        // From here on, Drop deletes the namespace whatever fails next.
        let file = match File::open(format!("/run/netns/{name}")) {
            Ok(file) => file,
            Err(e) => {
                let _ = ip(&["netns", "del", &name]);
                return Err(e);
            }
        };
        let ns = Netns { name, file };
        ns.run(|| -> io::Result<()> {
            for conf in ["all", "default"] {
                let path = format!("/proc/sys/net/ipv6/conf/{conf}/disable_ipv6");
                // Absent when the kernel has no IPv6: then there is nothing to silence.
                if std::fs::write(&path, "1").is_ok() && std::fs::read_to_string(&path)?.trim() != "1" {
                    return Err(io::Error::other(format!("{path} did not take the value 1")));
                }
            }
            Ok(())
        })??;
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `f` on a thread inside the namespace and returns its result (a panic in `f` is
    /// resumed here).
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> io::Result<T> {
        std::thread::scope(|s| {
            let joined = s
                .spawn(|| {
                    sys::setns_net(&self.file)?;
                    Ok(f())
                })
                .join();
            match joined {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }

    /// Starts a thread inside the namespace (for traffic that runs while the test polls).
    pub fn spawn<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<std::thread::JoinHandle<io::Result<T>>> {
        let file = self.file.try_clone()?;
        Ok(std::thread::spawn(move || {
            sys::setns_net(&file)?;
            Ok(f())
        }))
    }

    /// `ip -n NAME ARGS...`.
    pub fn ip(&self, args: &[&str]) -> io::Result<()> {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// Creates a veth pair `here` (in this namespace) ↔ `there` (in `peer`), with `queues` receive
    /// and transmit queues on each end, and brings both up.
    pub fn veth(&self, here: &str, peer: &Netns, there: &str, queues: usize) -> io::Result<()> {
        let q = queues.max(1).to_string();
        self.ip(&[
            "link",
            "add",
            here,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            there,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "netns",
            &peer.name,
        ])?;
        self.ip(&["link", "set", here, "up"])?;
        peer.ip(&["link", "set", there, "up"])?;
        Ok(())
    }

    /// Waits until `ifname` has carrier (a new veth takes a moment), up to `timeout`.
    pub fn wait_running(&self, ifname: &str, timeout: Duration) -> io::Result<()> {
        let ifname = ifname.to_string();
        self.run(move || {
            let ctl = sys::socket(libc::AF_PACKET, libc::SOCK_RAW, 0)?;
            let start = Instant::now();
            loop {
                let flags = sys::interface_flags(&ctl, &ifname)?;
                if flags & libc::IFF_RUNNING as u32 != 0 {
                    return Ok(());
                }
                if start.elapsed() > timeout {
                    return Err(io::Error::other(format!("{ifname} has no carrier after {timeout:?}")));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })?
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// A plain (not memory-mapped) packet socket on one interface: injects frames and captures what
/// arrives, independently of the port types under test. Open it inside the namespace
/// ([`Netns::run`]).
pub struct RawSocket {
    fd: OwnedFd,
}

impl RawSocket {
    /// Binds to `ifname` in the calling thread's namespace. Frames this socket's host sends are
    /// not captured; VLAN tags the kernel took out are put back into captured frames.
    pub fn open(ifname: &str) -> io::Result<RawSocket> {
        let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW, 0)?;
        let ifindex = sys::interface_index(&fd, ifname)?;
        sys::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_AUXDATA, &1)?;
        let _ = sys::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &1);
        sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &(8 << 20))?;
        sys::bind_packet(&fd, ifindex, libc::ETH_P_ALL as u16)?;
        Ok(RawSocket { fd })
    }

    /// Sends one frame (retrying briefly while the socket buffer is full).
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        let start = Instant::now();
        loop {
            match sys::send(&self.fd, frame) {
                Ok(_) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) || e.kind() == io::ErrorKind::WouldBlock => {
                    if start.elapsed() > Duration::from_secs(1) {
                        return Err(e);
                    }
                    std::thread::yield_now();
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The next frame received within `timeout`, or `None`.
    pub fn recv(&self, timeout: Duration) -> io::Result<Option<Vec<u8>>> {
        let deadline = Instant::now() + timeout;
        let mut buf = vec![0u8; 65_540];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(got) = sys::recv_frame(&self.fd, &mut buf[4..], left.as_millis().min(i32::MAX as u128) as i32)?
            else {
                if Instant::now() >= deadline {
                    return Ok(None);
                }
                continue;
            };
            if got.outgoing {
                continue;
            }
            let len = got.len.min(buf.len() - 4);
            let frame = match got.vlan {
                Some((tpid, tci)) if len >= 12 => {
                    // Move the MAC addresses 4 bytes forward into the spare room, tag after them.
                    buf.copy_within(4..16, 0);
                    buf[12..14].copy_from_slice(&tpid.to_be_bytes());
                    buf[14..16].copy_from_slice(&tci.to_be_bytes());
                    buf[..len + 4].to_vec()
                }
                _ => buf[4..4 + len].to_vec(),
            };
            return Ok(Some(frame));
        }
    }

    /// Receives until nothing arrives for `quiet`; returns the frames in arrival order.
    pub fn drain(&self, quiet: Duration) -> io::Result<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        while let Some(f) = self.recv(quiet)? {
            out.push(f);
        }
        Ok(out)
    }
}
