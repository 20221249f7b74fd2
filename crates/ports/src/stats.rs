//! Counters, link state and events.
//!
//! **Counters** live per queue ([`QueueStats`]); a port's figure is their sum ([`PortStats`]).
//! Every frame is counted exactly once on each side it touches:
//!
//! - receive: the kernel saw it and dropped it before we could (`rx_lost`: AF_PACKET's
//!   `tp_drops`, AF_XDP's rx ring full or fill ring empty), or it was handed to the caller
//!   (`rx_packets`), or it arrived but could not be used (`rx_errors`: cut short by the ring's
//!   snap length, a descriptor outside the UMEM);
//! - transmit: a frame given to `send` is either accepted by the kernel (`tx_packets`) or not
//!   (`tx_dropped`: ring or socket buffer full, link gone, too long).
//!
//! So a switch that forwards everything it receives can check
//! `rx_packets(in) = Σ tx_packets(out) + Σ tx_dropped(out) + its own drops`, and what was offered
//! to a port is `rx_packets + rx_lost + rx_errors` (frames dropped by the kernel before the
//! packet socket's tap — a full backlog queue — show in the interface's own `rx_dropped`, not
//! here). `tx_errors` counts failed system calls, not frames; it is outside those sums.
//!
//! The owner of a queue writes its counters with plain load/store pairs (one writer, no atomic
//! read-modify-write on the packet path); any thread reads them. `rx_lost` comes from the kernel
//! and may be refreshed from two threads, so it alone uses atomic adds.
//!
//! **Link state**: [`LinkState::Up`] while the interface is up and operational (`IFF_RUNNING`:
//! with carrier — the kernel publishes a lost carrier within about a second), `Down` otherwise,
//! `Gone` once it has been deleted (or moved out of the namespace) — final. Each change is
//! reported once, as a [`PortEvent`] to the port's [`EventHook`], and counted in
//! [`PortStats::events`]. The library prints nothing itself.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::sys;

/// One queue's counters (see the module docs for what each one counts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_lost: u64,
    pub rx_errors: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_dropped: u64,
    pub tx_errors: u64,
}

impl QueueStats {
    /// These counters since `base` (each saturating at 0).
    pub fn minus(&self, base: &QueueStats) -> QueueStats {
        QueueStats {
            rx_packets: self.rx_packets.saturating_sub(base.rx_packets),
            rx_bytes: self.rx_bytes.saturating_sub(base.rx_bytes),
            rx_lost: self.rx_lost.saturating_sub(base.rx_lost),
            rx_errors: self.rx_errors.saturating_sub(base.rx_errors),
            tx_packets: self.tx_packets.saturating_sub(base.tx_packets),
            tx_bytes: self.tx_bytes.saturating_sub(base.tx_bytes),
            tx_dropped: self.tx_dropped.saturating_sub(base.tx_dropped),
            tx_errors: self.tx_errors.saturating_sub(base.tx_errors),
        }
    }

    /// Adds `o` to these counters.
    pub fn add(&mut self, o: &QueueStats) {
        self.rx_packets += o.rx_packets;
        self.rx_bytes += o.rx_bytes;
        self.rx_lost += o.rx_lost;
        self.rx_errors += o.rx_errors;
        self.tx_packets += o.tx_packets;
        self.tx_bytes += o.tx_bytes;
        self.tx_dropped += o.tx_dropped;
        self.tx_errors += o.tx_errors;
    }
}

/// A port's counters: per queue and in total, with its link state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortStats {
    pub name: String,
    pub link: LinkState,
    /// Events reported so far: link changes, end of input, first occurrences of errors.
    pub events: u64,
    pub queues: Vec<QueueStats>,
    pub total: QueueStats,
}

/// The live counters of one queue.
#[derive(Default)]
pub(crate) struct QueueCounters {
    pub(crate) rx_packets: AtomicU64,
    pub(crate) rx_bytes: AtomicU64,
    pub(crate) rx_lost: AtomicU64,
    pub(crate) rx_errors: AtomicU64,
    pub(crate) tx_packets: AtomicU64,
    pub(crate) tx_bytes: AtomicU64,
    pub(crate) tx_dropped: AtomicU64,
    pub(crate) tx_errors: AtomicU64,
}

/// Adds `n` to a counter that only the calling thread writes.
#[inline]
pub(crate) fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

impl QueueCounters {
    pub(crate) fn snapshot(&self) -> QueueStats {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        QueueStats {
            rx_packets: r(&self.rx_packets),
            rx_bytes: r(&self.rx_bytes),
            rx_lost: r(&self.rx_lost),
            rx_errors: r(&self.rx_errors),
            tx_packets: r(&self.tx_packets),
            tx_bytes: r(&self.tx_bytes),
            tx_dropped: r(&self.tx_dropped),
            tx_errors: r(&self.tx_errors),
        }
    }
}

/// Whether a port's interface can carry frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Up, with carrier (pcap ports are always up).
    Up,
    /// Administratively down or without carrier (a veth whose peer is down).
    Down,
    /// Deleted or moved to another namespace; final.
    Gone,
}

/// What happened to a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    LinkDown,
    LinkUp,
    Gone,
    /// A `pcap-in` port has delivered its last frame.
    EndOfInput,
    /// A system call failed in a way not reported before on this port (first occurrence of each
    /// operation and errno only; every failure is counted in `rx_errors`/`tx_errors`).
    Error,
}

/// One event, for logging: the port, what happened, and a one-line detail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortEvent {
    pub port: String,
    pub kind: EventKind,
    pub detail: String,
}

impl std::fmt::Display for PortEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.kind {
            EventKind::LinkDown => "link down",
            EventKind::LinkUp => "link up",
            EventKind::Gone => "interface gone",
            EventKind::EndOfInput => "end of input",
            EventKind::Error => "error",
        };
        if self.detail.is_empty() {
            write!(f, "port {}: {what}", self.port)
        } else {
            write!(f, "port {}: {what}: {}", self.port, self.detail)
        }
    }
}

/// Receives a port's events (called from whichever thread noticed; must not block long).
pub type EventHook = Arc<dyn Fn(&PortEvent) + Send + Sync>;

/// Where a queue's kernel-side loss counter is read from.
pub(crate) enum KernelCounter {
    /// `PACKET_STATISTICS` of a packet socket: reset on every read, so deltas are added.
    Packet(Arc<OwnedFd>),
    /// `XDP_STATISTICS` of an XDP socket: cumulative, so the counter is raised to it.
    Xdp(Arc<OwnedFd>),
}

impl KernelCounter {
    /// Reads the kernel's counter into `c.rx_lost`.
    pub(crate) fn refresh(&self, c: &QueueCounters) -> io::Result<()> {
        match self {
            KernelCounter::Packet(fd) => {
                let s: libc::tpacket_stats_v3 = sys::getsockopt(fd, libc::SOL_PACKET, libc::PACKET_STATISTICS)?;
                c.rx_lost.fetch_add(s.tp_drops as u64, Ordering::Relaxed);
            }
            KernelCounter::Xdp(fd) => {
                let s: libc::xdp_statistics = sys::getsockopt(fd, libc::SOL_XDP, libc::XDP_STATISTICS)?;
                c.rx_lost.fetch_max(s.rx_dropped + s.rx_ring_full, Ordering::Relaxed);
            }
        }
        Ok(())
    }
}

const UP: u8 = 0;
const DOWN: u8 = 1;
const GONE: u8 = 2;

/// What every queue of a port and its handle share: name, interface, link state, counters.
pub(crate) struct PortShared {
    pub(crate) name: String,
    /// The interface and a control socket in its namespace (none for pcap ports).
    pub(crate) iface: Option<(u32, OwnedFd)>,
    state: AtomicU8,
    events: AtomicU64,
    hook: Option<EventHook>,
    pub(crate) counters: Vec<Arc<QueueCounters>>,
    pub(crate) kernel: Vec<Option<KernelCounter>>,
    inputs_left: AtomicUsize,
    reported: Mutex<Vec<(&'static str, i32)>>,
}

impl PortShared {
    pub(crate) fn new(
        name: &str,
        iface: Option<(u32, OwnedFd)>,
        kernel: Vec<Option<KernelCounter>>,
        hook: Option<EventHook>,
    ) -> PortShared {
        let queues = kernel.len();
        PortShared {
            name: name.to_string(),
            iface,
            state: AtomicU8::new(UP),
            events: AtomicU64::new(0),
            hook,
            counters: (0..queues).map(|_| Arc::new(QueueCounters::default())).collect(),
            kernel,
            inputs_left: AtomicUsize::new(queues),
            reported: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn link(&self) -> LinkState {
        match self.state.load(Ordering::Relaxed) {
            UP => LinkState::Up,
            DOWN => LinkState::Down,
            _ => LinkState::Gone,
        }
    }

    pub(crate) fn is_gone(&self) -> bool {
        self.state.load(Ordering::Relaxed) == GONE
    }

    fn emit(&self, kind: EventKind, detail: String) {
        self.events.fetch_add(1, Ordering::Relaxed);
        if let Some(hook) = &self.hook {
            hook(&PortEvent { port: self.name.clone(), kind, detail });
        }
    }

    /// Moves to `new` unless already there or gone; reports the change once.
    pub(crate) fn set_link(&self, new: LinkState, detail: &str) -> LinkState {
        let code = match new {
            LinkState::Up => UP,
            LinkState::Down => DOWN,
            LinkState::Gone => GONE,
        };
        let mut old = self.state.load(Ordering::Relaxed);
        loop {
            if old == GONE || old == code {
                return self.link();
            }
            match self.state.compare_exchange(old, code, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => old = now,
            }
        }
        let kind = match new {
            LinkState::Up => EventKind::LinkUp,
            LinkState::Down => EventKind::LinkDown,
            LinkState::Gone => EventKind::Gone,
        };
        self.emit(kind, detail.to_string());
        new
    }

    /// Asks the kernel about the interface and updates the link state (two ioctls).
    pub(crate) fn check_link(&self) -> LinkState {
        let Some((ifindex, ctl)) = &self.iface else { return self.link() };
        if self.is_gone() {
            return LinkState::Gone;
        }
        let gone = |e: &io::Error| matches!(e.raw_os_error(), Some(libc::ENODEV) | Some(libc::ENXIO));
        let name = sys::interface_name(ctl, *ifindex);
        // Renamed (`ip link set p3 name other`): the port is its name, which names no interface
        // now (or another one later) — gone, and re-attached by name as a deleted one is.
        if let Ok(now) = &name {
            if *now != self.name {
                return self.set_link(LinkState::Gone, &format!("the interface was renamed to {now}"));
            }
        }
        let flags = name.and_then(|name| sys::interface_flags(ctl, &name));
        match flags {
            Ok(f) if f & libc::IFF_UP as u32 != 0 && f & libc::IFF_RUNNING as u32 != 0 => {
                self.set_link(LinkState::Up, "")
            }
            Ok(f) if f & libc::IFF_UP as u32 == 0 => self.set_link(LinkState::Down, "administratively down"),
            Ok(_) => self.set_link(LinkState::Down, "no carrier"),
            Err(e) if gone(&e) => self.set_link(LinkState::Gone, "the interface was deleted or left the namespace"),
            Err(e) => {
                self.error("interface ioctl", &e);
                self.link()
            }
        }
    }

    /// Reports a failed system call once per (operation, errno).
    pub(crate) fn error(&self, op: &'static str, e: &io::Error) {
        let key = (op, e.raw_os_error().unwrap_or(0));
        let Ok(mut seen) = self.reported.lock() else { return };
        if seen.contains(&key) {
            return;
        }
        seen.push(key);
        drop(seen);
        self.emit(EventKind::Error, format!("{op}: {e}"));
    }

    /// A pcap-in queue has delivered its last frame; the port reports the end once all have.
    pub(crate) fn input_finished(&self) {
        if self.inputs_left.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.emit(EventKind::EndOfInput, String::new());
        }
    }

    pub(crate) fn refresh_kernel(&self) {
        for (k, c) in self.kernel.iter().zip(&self.counters) {
            if let Some(Err(e)) = k.as_ref().map(|k| k.refresh(c)) {
                self.error("reading kernel statistics", &e);
            }
        }
    }

    pub(crate) fn stats(&self) -> PortStats {
        let queues: Vec<QueueStats> = self.counters.iter().map(|c| c.snapshot()).collect();
        let mut total = QueueStats::default();
        queues.iter().for_each(|q| total.add(q));
        PortStats {
            name: self.name.clone(),
            link: self.link(),
            events: self.events.load(Ordering::Relaxed),
            queues,
            total,
        }
    }
}
