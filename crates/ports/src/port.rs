//! Ports and their queues: [`open`] a [`PortSpec`], then hand each PMD thread its [`RxQueue`] and
//! [`TxQueue`] of every port, and keep the [`PortHandle`] for counters and link state.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use crate::afpacket::{self, AfPacketConfig};
use crate::afxdp::{self, AfXdpConfig};
use crate::error::PortError;
use crate::frame::FrameMut;
use crate::pcap::{self, PcapConfig};
use crate::ring::Slot;
use crate::stats::{bump, EventHook, LinkState, PortShared, PortStats, QueueCounters};
use crate::BATCH;
use crate::{patch, sys, tap};

/// The kind of a port and where its frames come from or go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortType {
    /// An interface through AF_PACKET sockets (TPACKET_V3 receive rings, fanout).
    AfPacket,
    /// An interface through AF_XDP sockets and an XDP program.
    AfXdp,
    /// Frames read from a capture file.
    PcapIn(PathBuf),
    /// Frames written to a capture file.
    PcapOut(PathBuf),
    /// A tap device (made when missing): the host's stack on one side ([`crate::tap`]).
    Tap,
    /// One end of a patch pair ([`crate::patch`]): what is sent on it is received on the port
    /// named here (empty: no peer, everything sent is dropped).
    Patch(String),
}

impl PortType {
    /// The name used in `--port NAME:TYPE` and in `show`.
    pub fn as_str(&self) -> &'static str {
        match self {
            PortType::AfPacket => "afpacket",
            PortType::AfXdp => "afxdp",
            PortType::PcapIn(_) => "pcap-in",
            PortType::PcapOut(_) => "pcap-out",
            PortType::Tap => "tap",
            PortType::Patch(_) => "patch",
        }
    }
}

/// A parsed `--port` argument: `NAME` or `NAME:afpacket` (an interface through AF_PACKET),
/// `NAME:afxdp`, `NAME:tap` (a tap device, made when missing), `pcap-in:FILE`, `pcap-out:FILE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortSpec {
    /// The interface name, or the file for pcap ports.
    pub name: String,
    pub port_type: PortType,
}

impl FromStr for PortSpec {
    type Err = PortError;

    fn from_str(s: &str) -> Result<PortSpec, PortError> {
        let file = |rest: &str, make: fn(PathBuf) -> PortType| {
            if rest.is_empty() {
                Err(PortError::Spec(format!("port '{s}': a file name is needed after the colon")))
            } else {
                Ok(PortSpec { name: rest.to_string(), port_type: make(PathBuf::from(rest)) })
            }
        };
        if let Some(rest) = s.strip_prefix("pcap-in:") {
            return file(rest, PortType::PcapIn);
        }
        if let Some(rest) = s.strip_prefix("pcap-out:") {
            return file(rest, PortType::PcapOut);
        }
        let (name, ty) = s.split_once(':').unwrap_or((s, "afpacket"));
        if ty == "patch" || ty.starts_with("patch=") {
            // Not a device: any name OVSDB allows but ':', '/' and blanks (OVS's patch ports
            // are often longer than a device name, e.g. `patch-br0-to-br1`).
            let peer = ty.strip_prefix("patch=").unwrap_or("");
            let bad = |n: &str| n.chars().any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control());
            if name.is_empty() || bad(name) || bad(peer) || (ty != "patch" && peer.is_empty()) {
                return Err(PortError::Spec(format!(
                    "port '{s}': expected NAME:patch=PEER (names without '/', ':' or blanks)"
                )));
            }
            return Ok(PortSpec { name: name.to_string(), port_type: PortType::Patch(peer.to_string()) });
        }
        let bad = name.is_empty()
            || name.len() >= libc::IFNAMSIZ
            || name == "."
            || name == ".."
            || name.chars().any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control());
        if bad {
            return Err(PortError::Spec(format!(
                "port '{s}': '{name}' is not an interface name (1 to 15 characters, no '/', ':' or spaces)"
            )));
        }
        let port_type = match ty {
            "afpacket" => PortType::AfPacket,
            "afxdp" => PortType::AfXdp,
            "tap" => PortType::Tap,
            other => {
                return Err(PortError::Spec(format!(
                    "port '{s}': unknown port type '{other}' (expected NAME, NAME:afpacket, NAME:afxdp, \
                     NAME:tap, pcap-in:FILE or pcap-out:FILE)"
                )))
            }
        };
        Ok(PortSpec { name: name.to_string(), port_type })
    }
}

impl std::fmt::Display for PortSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.port_type {
            PortType::PcapIn(_) | PortType::PcapOut(_) => write!(f, "{}:{}", self.port_type.as_str(), self.name),
            PortType::Patch(peer) if peer.is_empty() => write!(f, "{}:patch", self.name),
            PortType::Patch(peer) => write!(f, "{}:patch={peer}", self.name),
            t => write!(f, "{}:{}", self.name, t.as_str()),
        }
    }
}

/// How to open ports.
#[derive(Clone, Default)]
pub struct PortConfig {
    /// Receive queues, and as many transmit queues: one of each per PMD thread (at least 1).
    pub queues: usize,
    pub afpacket: AfPacketConfig,
    pub afxdp: AfXdpConfig,
    pub pcap: PcapConfig,
    /// Where events go (link changes, end of input, first errors); `None` counts them only.
    pub hook: Option<EventHook>,
}

impl PortConfig {
    /// `queues` queues, everything else default.
    pub fn with_queues(queues: usize) -> PortConfig {
        PortConfig { queues, ..PortConfig::default() }
    }
}

/// Opens a port in the calling thread's network namespace (its sockets stay in that namespace
/// whichever thread uses them later).
///
/// Nothing is left behind on failure: every socket, ring and program opened so far is closed.
pub fn open(spec: &PortSpec, cfg: &PortConfig) -> Result<Port, PortError> {
    let queues = cfg.queues.max(1);
    let name = spec.name.as_str();
    let (rx, tx, kernel, iface) = match &spec.port_type {
        PortType::AfPacket => {
            let (ifindex, ctl) = interface(name)?;
            let (rx, tx, kernel) = afpacket::open(name, ifindex, queues, &cfg.afpacket)?;
            let rx = rx.into_iter().map(RxBackend::AfPacket).collect();
            let tx = tx.into_iter().map(TxBackend::AfPacket).collect();
            (rx, tx, kernel, Some((ifindex, ctl)))
        }
        PortType::AfXdp => {
            let (ifindex, ctl) = interface(name)?;
            let (rx, tx, kernel) = afxdp::open(name, ifindex, &ctl, queues, &cfg.afxdp, cfg.hook.as_ref())?;
            let rx = rx.into_iter().map(RxBackend::AfXdp).collect();
            let tx = tx.into_iter().map(TxBackend::AfXdp).collect();
            (rx, tx, kernel, Some((ifindex, ctl)))
        }
        PortType::Tap => {
            let (rx, tx) = tap::open(name, queues)?;
            let iface = interface(name)?;
            let rx = rx.into_iter().map(RxBackend::Tap).collect();
            let tx = tx.into_iter().map(TxBackend::TapDevice).collect();
            (rx, tx, (0..queues).map(|_| None).collect(), Some(iface))
        }
        PortType::PcapIn(path) => {
            let rx = pcap::open_in(path, queues, &cfg.pcap)?.into_iter().map(RxBackend::PcapIn).collect();
            let tx = (0..queues).map(|_| TxBackend::Sink).collect();
            (rx, tx, (0..queues).map(|_| None).collect(), None)
        }
        PortType::Patch(peer) => {
            let mine = patch::open_mailbox(name, queues);
            let rx = (0..queues).map(|i| RxBackend::Patch(patch::Rx::new(mine.clone(), i))).collect();
            let tx = (0..queues).map(|i| TxBackend::Patch(patch::Tx::new(peer, i))).collect();
            (rx, tx, (0..queues).map(|_| None).collect(), None)
        }
        PortType::PcapOut(path) => {
            let sink = pcap::open_out(path)?;
            let rx = (0..queues).map(|_| RxBackend::Idle).collect();
            let tx = (0..queues).map(|_| TxBackend::PcapOut(pcap::Tx::new(sink.clone()))).collect();
            (rx, tx, (0..queues).map(|_| None).collect(), None)
        }
    };
    Ok(Port::assemble(spec.clone(), PortShared::new(name, iface, kernel, cfg.hook.clone()), rx, tx))
}

/// Opens a `pcap-in` port named `name` over frames already in memory (the switch's built-in
/// workload, tests): the same port as `pcap-in:FILE` of a capture holding `frames`.
pub fn open_frames(name: &str, frames: &[Vec<u8>], cfg: &PortConfig) -> Port {
    let queues = cfg.queues.max(1);
    let spec = PortSpec { name: name.to_string(), port_type: PortType::PcapIn(PathBuf::from(name)) };
    let rx = pcap::open_memory(frames, queues, &cfg.pcap).into_iter().map(RxBackend::PcapIn).collect();
    let tx = (0..queues).map(|_| TxBackend::Sink).collect();
    let shared = PortShared::new(name, None, (0..queues).map(|_| None).collect(), cfg.hook.clone());
    Port::assemble(spec, shared, rx, tx)
}

/// What a tap port does with each frame sent to it (see [`open_tap`]).
pub type FrameTap = Arc<dyn Fn(&[u8]) + Send + Sync>;

/// Opens a **tap** port named `name`: an output-only port in memory that hands every frame
/// flushed to it to `tap`, on the transmitting thread (in-process benchmarks and tests that
/// check a switch's output without files; counted sent like any port). Its receive queues are
/// always empty.
pub fn open_tap(name: &str, tap: FrameTap, cfg: &PortConfig) -> Port {
    let queues = cfg.queues.max(1);
    let spec = PortSpec { name: name.to_string(), port_type: PortType::PcapOut(PathBuf::from(name)) };
    let rx = (0..queues).map(|_| RxBackend::Idle).collect();
    let tx = (0..queues).map(|_| TxBackend::Tap(tap.clone(), Staging::new())).collect();
    let shared = PortShared::new(name, None, (0..queues).map(|_| None).collect(), cfg.hook.clone());
    Port::assemble(spec, shared, rx, tx)
}

/// Looks up an interface and opens the port's control socket (for link checks) in this namespace.
fn interface(name: &str) -> Result<(u32, std::os::fd::OwnedFd), PortError> {
    let ctl = sys::socket(libc::AF_PACKET, libc::SOCK_RAW, 0).map_err(|e| PortError::packet_socket(name, e))?;
    let ifindex = sys::interface_index(&ctl, name).map_err(|e| PortError::os(name, "interface lookup", e))?;
    Ok((ifindex, ctl))
}

/// An open port: its queues and its handle. Take the queues apart with [`Port::split`] to give
/// them to threads, or use them in place ([`Port::rx`], [`Port::tx`]) from one thread.
pub struct Port {
    handle: PortHandle,
    rx: Vec<RxQueue>,
    tx: Vec<TxQueue>,
}

impl Port {
    fn assemble(spec: PortSpec, shared: PortShared, rx: Vec<RxBackend>, tx: Vec<TxBackend>) -> Port {
        let shared = Arc::new(shared);
        let rx = rx
            .into_iter()
            .enumerate()
            .map(|(i, backend)| RxQueue {
                index: i,
                backend,
                slots: std::array::from_fn(|_| Slot::EMPTY),
                n: 0,
                polls: 0,
                counters: shared.counters[i].clone(),
                shared: shared.clone(),
            })
            .collect();
        let tx = tx
            .into_iter()
            .enumerate()
            .map(|(i, backend)| TxQueue {
                index: i,
                backend,
                counters: shared.counters[i].clone(),
                shared: shared.clone(),
            })
            .collect();
        Port { handle: PortHandle { spec: Arc::new(spec), shared }, rx, tx }
    }

    pub fn handle(&self) -> &PortHandle {
        &self.handle
    }

    /// Receive queue `i` (`None` past the last).
    pub fn rx(&mut self, i: usize) -> Option<&mut RxQueue> {
        self.rx.get_mut(i)
    }

    /// Transmit queue `i` (`None` past the last).
    pub fn tx(&mut self, i: usize) -> Option<&mut TxQueue> {
        self.tx.get_mut(i)
    }

    /// The handle, the receive queues and the transmit queues, to hand to threads. The port's
    /// resources are released when the last of them is dropped.
    pub fn split(self) -> (PortHandle, Vec<RxQueue>, Vec<TxQueue>) {
        (self.handle, self.rx, self.tx)
    }
}

/// A port seen from outside its queues: name, counters, link state. Cheap to clone; any thread.
#[derive(Clone)]
pub struct PortHandle {
    spec: Arc<PortSpec>,
    shared: Arc<PortShared>,
}

impl PortHandle {
    pub fn spec(&self) -> &PortSpec {
        &self.spec
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    pub fn queues(&self) -> usize {
        self.shared.counters.len()
    }

    /// The counters now. Kernel-side losses are as of the last refresh (see
    /// [`PortHandle::refresh`]; each receive queue also refreshes them every 65536 polls).
    pub fn stats(&self) -> PortStats {
        self.shared.stats()
    }

    /// The link state as last seen (no system call).
    pub fn link(&self) -> LinkState {
        self.shared.link()
    }

    /// The interface's hardware (MAC) address (`None` for files and in-memory ports, or when
    /// the interface cannot be asked: gone).
    pub fn hw_addr(&self) -> Option<[u8; 6]> {
        let (ifindex, ctl) = self.shared.iface.as_ref()?;
        let name = sys::interface_name(ctl, *ifindex).ok()?;
        sys::interface_hw_addr(ctl, &name).ok()
    }

    /// The interface's link speed in Mb/s and whether it is full duplex, as its driver reports
    /// them (ethtool; `None` when it reports none, e.g. link down, or for files).
    pub fn speed(&self) -> Option<(u32, bool)> {
        let (ifindex, ctl) = self.shared.iface.as_ref()?;
        let name = sys::interface_name(ctl, *ifindex).ok()?;
        sys::interface_speed(ctl, &name).ok().flatten()
    }

    /// Whether the interface is administratively up (`IFF_UP`; `None` for files and in-memory
    /// ports, or when the interface cannot be asked: gone).
    pub fn admin_up(&self) -> Option<bool> {
        let (ifindex, ctl) = self.shared.iface.as_ref()?;
        let name = sys::interface_name(ctl, *ifindex).ok()?;
        sys::interface_flags(ctl, &name).ok().map(|f| f & libc::IFF_UP as u32 != 0)
    }

    /// Sets the interface administratively up or down, as `ip link set IF up|down` (OpenFlow's
    /// PORT_MOD `PORT_DOWN`, which Open vSwitch applies to the interface). An error for files
    /// and in-memory ports (they have no interface) and when the kernel refuses (`EPERM`...).
    pub fn set_admin_up(&self, up: bool) -> std::io::Result<()> {
        let Some((ifindex, ctl)) = self.shared.iface.as_ref() else {
            return Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "the port has no interface"));
        };
        let name = sys::interface_name(ctl, *ifindex)?;
        sys::set_interface_up(ctl, &name, up)
    }

    /// Reads the kernel's loss counters and checks the link (a few system calls; call it from a
    /// management thread, e.g. ten times a second, and once before reading final counters).
    pub fn refresh(&self) -> LinkState {
        self.shared.refresh_kernel();
        self.shared.check_link()
    }
}

/// The receive-side state of each port type.
// One per queue and never moved on the packet path; boxing would add an indirection per poll.
#[allow(clippy::large_enum_variant)]
pub(crate) enum RxBackend {
    AfPacket(afpacket::Rx),
    AfXdp(afxdp::Rx),
    PcapIn(pcap::Rx),
    Tap(tap::Rx),
    Patch(patch::Rx),
    /// Never has frames (the receive side of a `pcap-out` port).
    Idle,
}

/// How many polls between the queue's own refresh of kernel counters (and, when idle, link
/// checks): a few system calls every 65536 polls is a few hundred a second on an idle queue
/// (empty polls take 10–50 ns) and a few a second under load — noise either way.
const UPKEEP_POLLS: u32 = 65536;

/// One receive queue of a port, owned by one thread at a time.
pub struct RxQueue {
    index: usize,
    backend: RxBackend,
    slots: [Slot; BATCH],
    n: usize,
    polls: u32,
    counters: Arc<QueueCounters>,
    shared: Arc<PortShared>,
}

impl RxQueue {
    pub fn index(&self) -> usize {
        self.index
    }

    pub fn port(&self) -> &str {
        &self.shared.name
    }

    /// Takes up to [`BATCH`] frames that have arrived; never blocks (an empty batch when none).
    /// The frames stay in the port's memory until the batch is dropped.
    pub fn recv(&mut self) -> RxBatch<'_> {
        self.release();
        let n = match &mut self.backend {
            RxBackend::AfPacket(rx) => rx.fill(&mut self.slots, &self.counters),
            RxBackend::AfXdp(rx) => rx.fill(&mut self.slots, &self.counters),
            RxBackend::PcapIn(rx) => rx.fill(&mut self.slots, &self.shared),
            RxBackend::Tap(rx) => rx.fill(&mut self.slots, &self.shared),
            RxBackend::Patch(rx) => rx.fill(&mut self.slots),
            RxBackend::Idle => 0,
        };
        self.n = n;
        if n > 0 {
            bump(&self.counters.rx_packets, n as u64);
            bump(&self.counters.rx_bytes, self.slots[..n].iter().map(|s| s.len as u64).sum());
        }
        self.polls += 1;
        if self.polls >= UPKEEP_POLLS {
            self.polls = 0;
            self.upkeep(n == 0);
        }
        RxBatch { queue: self }
    }

    /// Reads the kernel's loss counter and, if `idle`, checks the link.
    fn upkeep(&mut self, idle: bool) {
        let kernel = self.shared.kernel.get(self.index).and_then(Option::as_ref);
        if let Some(Err(e)) = kernel.map(|k| k.refresh(&self.counters)) {
            self.shared.error("reading kernel statistics", &e);
        }
        if idle {
            self.shared.check_link();
        }
    }

    /// The counters of this queue index (its receive and its transmit side): exact when read by
    /// the thread that owns the queue and its transmit twin, but for `rx_lost`, which the
    /// kernel's counters raise from any thread.
    pub fn stats(&self) -> crate::QueueStats {
        self.counters.snapshot()
    }

    /// True for a file's queue (`pcap-in`, and the idle receive side of `pcap-out`): its frames
    /// wait for the reader, nothing is lost by reading them later.
    pub fn is_offline(&self) -> bool {
        matches!(self.backend, RxBackend::PcapIn(_) | RxBackend::Idle)
    }

    /// True once a `pcap-in` queue has delivered all its frames (never for interfaces).
    pub fn is_finished(&self) -> bool {
        match &self.backend {
            RxBackend::PcapIn(rx) => rx.is_finished(),
            RxBackend::Idle => true,
            _ => false,
        }
    }

    /// Gives the last batch's memory back. Runs even for an empty batch: a TPACKET_V3 block whose
    /// frames were all skipped, or AF_XDP descriptors that were all invalid, must go back too.
    fn release(&mut self) {
        self.n = 0;
        match &mut self.backend {
            RxBackend::AfPacket(rx) => rx.release(),
            RxBackend::AfXdp(rx) => rx.release(&self.shared),
            RxBackend::PcapIn(_) | RxBackend::Tap(_) | RxBackend::Patch(_) | RxBackend::Idle => {}
        }
    }
}

/// The frames of one [`RxQueue::recv`]: borrowed from the port until dropped.
pub struct RxBatch<'q> {
    queue: &'q mut RxQueue,
}

impl RxBatch<'_> {
    pub fn len(&self) -> usize {
        self.queue.n
    }

    pub fn is_empty(&self) -> bool {
        self.queue.n == 0
    }

    /// The patch crossings frame `i` has made ([`crate::patch`], *Loops*): 0 unless it came
    /// in on a patch port.
    pub fn crossings(&self, i: usize) -> u8 {
        match &self.queue.backend {
            RxBackend::Patch(rx) if i < self.queue.n => rx.crossings(i),
            _ => 0,
        }
    }

    /// The bytes of frame `i`.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        self.queue.slots[..self.queue.n].get(i).map(Slot::data)
    }

    /// The frames' bytes, in arrival order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.queue.slots[..self.queue.n].iter().map(Slot::data)
    }

    /// Frame `i`, to rewrite in place.
    pub fn frame(&mut self, i: usize) -> Option<FrameMut<'_>> {
        self.queue.slots[..self.queue.n].get_mut(i).map(Slot::view)
    }

    /// All frames, to rewrite in place (each view is independent of the others).
    pub fn frames(&mut self) -> impl Iterator<Item = FrameMut<'_>> {
        self.queue.slots[..self.queue.n].iter_mut().map(Slot::view)
    }
}

impl Drop for RxBatch<'_> {
    fn drop(&mut self) {
        self.queue.release();
    }
}

/// The transmit-side state of each port type.
pub(crate) enum TxBackend {
    AfPacket(afpacket::Tx),
    AfXdp(afxdp::Tx),
    PcapOut(pcap::Tx),
    /// Hands every frame to a function ([`open_tap`]).
    Tap(FrameTap, Staging),
    /// Writes every frame to a tap device (`NAME:tap`, [`crate::tap`]).
    TapDevice(tap::Tx),
    /// Hands every frame to the patch port's peer ([`crate::patch`]).
    Patch(patch::Tx),
    /// Counts every frame as dropped (the transmit side of a `pcap-in` port).
    Sink,
}

/// One transmit queue of a port, owned by one thread at a time. Frames are staged by
/// [`TxQueue::send`] and leave on [`TxQueue::flush`] (or when [`BATCH`] are staged); dropping
/// the queue flushes it.
pub struct TxQueue {
    index: usize,
    backend: TxBackend,
    counters: Arc<QueueCounters>,
    shared: Arc<PortShared>,
}

impl TxQueue {
    pub fn index(&self) -> usize {
        self.index
    }

    pub fn port(&self) -> &str {
        &self.shared.name
    }

    /// Stages a copy of `frame` for transmission. Returns false if it is dropped now (counted in
    /// `tx_dropped`: the interface is gone, or the port cannot transmit); a frame staged can
    /// still be dropped at flush.
    pub fn send(&mut self, frame: &[u8]) -> bool {
        self.send_after(frame, 0)
    }

    /// [`TxQueue::send`] of a frame that has made `crossings` patch crossings so far (it came in
    /// on a patch port, [`RxBatch::crossings`]): a patch port hands the count, plus its own
    /// crossing, to its peer with the frame ([`crate::patch`], *Loops*); other ports ignore it.
    pub fn send_after(&mut self, frame: &[u8], crossings: u8) -> bool {
        if self.shared.is_gone() || matches!(self.backend, TxBackend::Sink) {
            bump(&self.counters.tx_dropped, 1);
            return false;
        }
        if self.pending() >= BATCH {
            self.flush();
        }
        match &mut self.backend {
            TxBackend::AfPacket(tx) => tx.staging.push(frame),
            TxBackend::AfXdp(tx) => tx.stage(frame, &self.counters, &self.shared),
            TxBackend::PcapOut(tx) => tx.staging.push(frame),
            TxBackend::Tap(_, staging) => staging.push(frame),
            TxBackend::TapDevice(tx) => tx.staging.push(frame),
            TxBackend::Patch(tx) => tx.stage(frame, crossings),
            TxBackend::Sink => {}
        }
        true
    }

    /// Frames staged and not yet flushed.
    pub fn pending(&self) -> usize {
        match &self.backend {
            TxBackend::AfPacket(tx) => tx.staging.len(),
            TxBackend::AfXdp(tx) => tx.pending(),
            TxBackend::PcapOut(tx) => tx.staging.len(),
            TxBackend::Tap(_, staging) => staging.len(),
            TxBackend::TapDevice(tx) => tx.staging.len(),
            TxBackend::Patch(tx) => tx.staging.len(),
            TxBackend::Sink => 0,
        }
    }

    /// Hands the staged frames to the kernel (or the file); each is counted as sent or dropped.
    pub fn flush(&mut self) {
        let (c, shared) = (&*self.counters, &*self.shared);
        match &mut self.backend {
            TxBackend::AfPacket(tx) => tx.flush(c, shared),
            TxBackend::AfXdp(tx) => tx.flush(c, shared),
            TxBackend::PcapOut(tx) => tx.flush(c, shared),
            TxBackend::Tap(tap, staging) => tap_flush(tap, staging, c),
            TxBackend::TapDevice(tx) => tx.flush(c, shared),
            TxBackend::Patch(tx) => tx.flush(c, shared),
            TxBackend::Sink => {}
        }
    }
}

fn tap_flush(tap: &FrameTap, staging: &mut Staging, c: &QueueCounters) {
    for frame in staging.take() {
        tap(frame);
        bump(&c.tx_packets, 1);
        bump(&c.tx_bytes, frame.len() as u64);
    }
}

impl Drop for TxQueue {
    fn drop(&mut self) {
        let (c, shared) = (&*self.counters, &*self.shared);
        match &mut self.backend {
            TxBackend::AfPacket(tx) => tx.flush(c, shared),
            TxBackend::AfXdp(tx) => tx.flush(c, shared),
            TxBackend::PcapOut(tx) => tx.sync(c, shared),
            TxBackend::Tap(tap, staging) => tap_flush(tap, staging, c),
            TxBackend::TapDevice(tx) => tx.flush(c, shared),
            TxBackend::Patch(tx) => tx.flush(c, shared),
            TxBackend::Sink => {}
        }
    }
}

/// Copies of up to [`BATCH`] frames waiting for a flush, in buffers reused from batch to batch
/// (no allocation once they have grown to the frame sizes seen).
pub(crate) struct Staging {
    bufs: Vec<Vec<u8>>,
    n: usize,
}

impl Staging {
    pub(crate) fn new() -> Staging {
        Staging { bufs: (0..BATCH).map(|_| Vec::with_capacity(2048)).collect(), n: 0 }
    }

    pub(crate) fn len(&self) -> usize {
        self.n
    }

    /// Stages a copy of `frame` (the caller flushes first when [`BATCH`] are staged).
    pub(crate) fn push(&mut self, frame: &[u8]) {
        if let Some(buf) = self.bufs.get_mut(self.n) {
            buf.clear();
            buf.extend_from_slice(frame);
            self.n += 1;
        }
    }

    /// The staged frames, which are no longer staged.
    pub(crate) fn take(&mut self) -> &[Vec<u8>] {
        let n = std::mem::take(&mut self.n);
        &self.bufs[..n]
    }
}
