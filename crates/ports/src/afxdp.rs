//! `afxdp`: AF_XDP sockets, one per queue, fed by a five-instruction XDP program that this
//! module loads itself.
//!
//! **Receive.** Each queue is one XDP socket bound to the interface's receive queue of the same
//! number, with its own UMEM: [`AfXdpConfig::rx_frames`] chunks for receiving (all of them on
//! the fill ring at first) and [`AfXdpConfig::tx_frames`] for sending. The XDP program looks up
//! the frame's receive queue in an `XSKMAP` and redirects it to that queue's socket; the kernel
//! copies it into a chunk from the fill ring and posts it on the socket's rx ring. A batch's
//! frames are views into those chunks; dropping the batch puts the chunks back on the fill ring.
//! Frames the kernel could not deliver (rx ring full, no chunk on the fill ring) are counted by
//! the kernel and read into `rx_lost` (`XDP_STATISTICS`).
//!
//! **Checksums.** A frame from a local sender (a veth whose host offloads checksums, the
//! default) reaches an XDP socket, in generic and in driver mode, with its TCP/UDP checksum
//! not filled in — we saw it: TCP between two hosts failed until it was completed — and the
//! socket carries no status bit that says so. Each received frame whose checksum field holds
//! exactly the pseudo-header sum (what Linux leaves there) gets its checksum completed
//! ([`crate::csum::complete_if_partial`]); other frames cost a header parse.
//!
//! Copy mode (`XDP_COPY`) everywhere. The program is attached in driver mode when the driver
//! takes it, else in generic (`XDP_SKB`) mode, which works on every interface ([`XdpMode::Auto`],
//! the default; the fall-back is reported once through the port's event hook);
//! [`XdpMode::Native`] and [`XdpMode::Generic`] insist on one. Zero-copy needs NIC driver support
//! and is not offered.
//!
//! **TSO.** A host whose veth offloads segmentation (TSO/GSO, the default) hands the kernel TCP
//! super-frames of up to 64 KiB. In generic mode they reach the XDP program whole, do not fit a
//! chunk and are dropped by the kernel (counted in `rx_lost`): bulk TCP stalls. In driver mode on
//! a veth the kernel turns the peer's segmentation offloads off for as long as an XDP program is
//! attached (`veth_xdp_set`, `veth_fix_features`), so the host sends segments that fit: that is
//! why driver mode is the default wherever the driver has it. Multi-buffer AF_XDP (`XDP_USE_SG`),
//! the other way to take super-frames, is not used.
//!
//! Every receive queue of the interface must have a socket — a frame arriving on a queue without
//! one would pass to the kernel's stack, unseen and uncounted — so opening fails, with the fix in
//! the message, when the interface has more receive queues than the port (veths have one unless
//! created with `numrxqueues`; `ethtool -L` changes a NIC's). On a veth, driver-mode XDP sees a
//! frame on the receive queue numbered as the transmit queue its sender picked on the peer, so
//! flows spread over the queues; generic mode saw every frame on queue 0 in our tests (the
//! kernel records the queue off by one for it), so give a veth with several queues
//! [`XdpMode::Native`].
//!
//! **Transmit.** `send` copies the frame into a free tx chunk and writes its descriptor on the tx
//! ring; `flush` publishes the descriptors and wakes the kernel (`sendto`), which in copy mode
//! sends them right away; finished chunks come back on the completion ring and are reused. A frame
//! is `tx_dropped` when no tx chunk is free, or it is longer than the interface's MTU (plus the
//! Ethernet header, plus 4 bytes if VLAN-tagged; the MTU is read at open) or a chunk, or shorter
//! than an Ethernet header — the kernel would drop those without telling us. `tx_packets` counts
//! the frames handed to the kernel's ring.
//!
//! **The XDP program and why it is hand-written.** The program is
//! `return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)`, five instructions. We load it
//! with the `bpf(2)` system call directly (`BPF_MAP_CREATE` for the XSKMAP, `BPF_PROG_LOAD`,
//! `BPF_LINK_CREATE`), rather than through a crate, because:
//! - `xsk-rs`/`libxdp`/`libbpf-rs` link C libraries (libxdp, libbpf, libelf, zlib) and generate
//!   bindings with clang at build time — more to install and more to break in CI on a fresh
//!   Debian 12 than this whole module;
//! - `aya` is pure Rust but loads a BPF *object file*, which needs a BPF toolchain (nightly Rust
//!   and `bpf-linker`, or clang) to build and a compiled artefact to keep in the repository;
//! - the program never changes, the instructions are checked by the kernel's verifier at load,
//!   and a `bpf_link` detaches it when its descriptor closes — on drop, and also when the process
//!   dies — so nothing is left attached to the interface, with no cleanup code to get wrong.
//!
//! `bpf_link` for XDP needs Linux 5.9 (Debian 12 ships 6.1); older kernels get a one-line error.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, OnceLock};

use crate::csum;
use crate::error::PortError;
use crate::ring::{Slot, Umem, XdpRing};
use crate::stats::{bump, KernelCounter, LinkState, PortShared, QueueCounters};
use crate::sys::{self, BpfInsn, Mmap, BPF_PROG_TYPE_XDP, BPF_XDP, XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE, XDP_PASS};
use crate::BATCH;

/// Where the XDP program is attached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum XdpMode {
    /// Driver mode when the driver takes it, else generic mode (module docs, *TSO*).
    #[default]
    Auto,
    /// Generic XDP (`XDP_FLAGS_SKB_MODE`): any interface, after the kernel has built its skb.
    Generic,
    /// Driver XDP (`XDP_FLAGS_DRV_MODE`): the driver must support it (veth, most NIC drivers).
    Native,
}

impl std::str::FromStr for XdpMode {
    type Err = String;

    fn from_str(s: &str) -> Result<XdpMode, String> {
        match s {
            "auto" => Ok(XdpMode::Auto),
            "generic" => Ok(XdpMode::Generic),
            "native" => Ok(XdpMode::Native),
            _ => Err(format!("'{s}' is not an XDP mode (expected auto, generic or native)")),
        }
    }
}

/// Tuning of `afxdp` ports. The defaults give each queue 6 MiB of UMEM.
#[derive(Clone, Debug)]
pub struct AfXdpConfig {
    pub mode: XdpMode,
    /// Chunks for receiving; also the fill and rx ring sizes (a power of two).
    pub rx_frames: u32,
    /// Chunks for sending; also the tx and completion ring sizes (a power of two).
    pub tx_frames: u32,
    /// Bytes per UMEM chunk: 2048 or 4096. Frames up to the chunk size minus the kernel's 256
    /// bytes of headroom are received.
    pub chunk_size: u32,
}

impl Default for AfXdpConfig {
    fn default() -> Self {
        AfXdpConfig { mode: XdpMode::Auto, rx_frames: 2048, tx_frames: 1024, chunk_size: 2048 }
    }
}

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// `offsetof(struct xdp_md, rx_queue_index)`.
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

/// `r2 = ctx->rx_queue_index; r1 = &xsks; r3 = XDP_PASS; return bpf_redirect_map(r1, r2, r3)`.
/// The third argument's low bits are the action when the map has no socket at that index.
pub(crate) fn program(map_fd: i32) -> [BpfInsn; 6] {
    const LDX_MEM_W: u8 = 0x61; // BPF_LDX | BPF_MEM | BPF_W
    const LD_IMM64: u8 = 0x18; // BPF_LD | BPF_IMM | BPF_DW
    const MOV64_K: u8 = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
    const CALL: u8 = 0x85; // BPF_JMP | BPF_CALL
    const EXIT: u8 = 0x95; // BPF_JMP | BPF_EXIT
    const PSEUDO_MAP_FD: u8 = 1;
    let regs = |dst: u8, src: u8| dst | src << 4;
    [
        BpfInsn { code: LDX_MEM_W, regs: regs(2, 1), off: XDP_MD_RX_QUEUE_INDEX, imm: 0 },
        BpfInsn { code: LD_IMM64, regs: regs(1, PSEUDO_MAP_FD), off: 0, imm: map_fd },
        BpfInsn { code: 0, regs: 0, off: 0, imm: 0 },
        BpfInsn { code: MOV64_K, regs: regs(3, 0), off: 0, imm: XDP_PASS },
        BpfInsn { code: CALL, regs: 0, off: 0, imm: BPF_FUNC_REDIRECT_MAP },
        BpfInsn { code: EXIT, regs: 0, off: 0, imm: 0 },
    ]
}

/// The XSKMAP, the program and the link that attaches it. Dropping it closes the link first,
/// which detaches the program from the interface.
pub(crate) struct Attachment {
    link: OnceLock<OwnedFd>,
    prog: OwnedFd,
    map: OwnedFd,
}

impl Drop for Attachment {
    fn drop(&mut self) {
        drop(self.link.take());
    }
}

/// What the receive and transmit halves of one XDP socket share. The socket closes (and the
/// UMEM is unmapped) when both halves are gone.
struct Socket {
    fd: Arc<OwnedFd>,
    umem: Umem,
    _attachment: Arc<Attachment>,
}

/// The receive half of an XDP socket: fill and rx rings.
pub(crate) struct Rx {
    fill: XdpRing,
    rx: XdpRing,
    sock: Arc<Socket>,
    rx_cons: u32,
    fill_prod: u32,
    /// Rx descriptors read for the current batch.
    consumed: u32,
    /// Chunk addresses of the frames handed out in the current batch.
    held: [u64; BATCH],
    held_n: usize,
    /// Chunks waiting for room on the fill ring (never in practice: it has room for all).
    spare: Vec<u64>,
    chunk_size: u64,
}

impl Rx {
    pub(crate) fn fill(&mut self, slots: &mut [Slot], c: &QueueCounters) -> usize {
        let avail = self.rx.load_producer().wrapping_sub(self.rx_cons) as usize;
        let take = avail.min(slots.len()).min(BATCH);
        let mut n = 0;
        for i in 0..take {
            let d = self.rx.read_desc(self.rx_cons.wrapping_add(i as u32));
            match self.sock.umem.rx_slot(d.addr, d.len) {
                Some(mut slot) => {
                    // No checksum status reaches an XDP socket: a frame from a local sender
                    // (a veth) can carry a partial checksum; see `csum::complete_if_partial`.
                    csum::complete_if_partial(slot.view().data_mut());
                    // Only chunks of our UMEM go back on the fill ring.
                    self.held[n] = d.addr - d.addr % self.chunk_size;
                    slots[n] = slot;
                    n += 1;
                }
                None => bump(&c.rx_errors, 1),
            }
        }
        self.consumed = take as u32;
        self.held_n = n;
        n
    }

    /// Returns the batch's chunks to the fill ring and its descriptors to the rx ring.
    pub(crate) fn release(&mut self, shared: &PortShared) {
        if self.consumed == 0 {
            return;
        }
        self.rx_cons = self.rx_cons.wrapping_add(std::mem::take(&mut self.consumed));
        self.rx.store_consumer(self.rx_cons);
        let n = std::mem::take(&mut self.held_n);
        self.spare.extend_from_slice(&self.held[..n]);
        self.refill(shared);
    }

    fn refill(&mut self, shared: &PortShared) {
        if self.spare.is_empty() {
            return;
        }
        let room = self.fill.size() - self.fill_prod.wrapping_sub(self.fill.load_consumer());
        let k = (room as usize).min(self.spare.len());
        for (i, addr) in self.spare.drain(..k).enumerate() {
            self.fill.write_addr(self.fill_prod.wrapping_add(i as u32), addr);
        }
        self.fill_prod = self.fill_prod.wrapping_add(k as u32);
        self.fill.store_producer(self.fill_prod);
        if self.fill.needs_wakeup() {
            if let Err(e) = sys::kick_rx(&self.sock.fd) {
                if !matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::EINTR)) {
                    shared.error("waking the fill ring", &e);
                }
            }
        }
    }
}

/// The transmit half of an XDP socket: tx and completion rings.
pub(crate) struct Tx {
    tx: XdpRing,
    comp: XdpRing,
    sock: Arc<Socket>,
    tx_prod: u32,
    comp_cons: u32,
    free: Vec<u64>,
    staged: usize,
    staged_bytes: u64,
    chunk_size: u64,
    /// The longest untagged frame the interface takes: its MTU plus the Ethernet header (read at
    /// open). A VLAN-tagged frame may be 4 bytes longer, as AF_PACKET allows.
    max_len: usize,
}

impl Tx {
    pub(crate) fn pending(&self) -> usize {
        self.staged
    }

    /// Takes back the chunks the kernel has finished sending.
    fn reap(&mut self) {
        let done = self.comp.load_producer().wrapping_sub(self.comp_cons);
        for i in 0..done {
            let addr = self.comp.read_addr(self.comp_cons.wrapping_add(i));
            self.free.push(addr - addr % self.chunk_size);
        }
        self.comp_cons = self.comp_cons.wrapping_add(done);
        self.comp.store_consumer(self.comp_cons);
    }

    /// Copies `frame` into a free chunk and writes its descriptor (published by `flush`).
    pub(crate) fn stage(&mut self, frame: &[u8], c: &QueueCounters, shared: &PortShared) {
        if self.free.is_empty() {
            self.reap();
        }
        let stuck = self.staged == 0 && self.tx.load_consumer() != self.tx_prod;
        if self.free.is_empty() && stuck && shared.link() == LinkState::Up {
            // Every chunk sits in the tx ring, published by earlier flushes the kernel refused
            // (ENETDOWN while the link was down). Nothing else would wake the kernel again: the
            // caller flushes only queues with frames staged, and none can be staged without a free
            // chunk — the port dropped everything for good after the link came back up.
            self.wake(c, shared);
            self.reap();
        }
        let tagged = matches!(frame.get(12..14), Some([0x81, 0x00]) | Some([0x88, 0xa8]));
        let max = self.max_len + if tagged { 4 } else { 0 };
        if frame.len() as u64 > self.chunk_size || frame.len() > max || frame.len() < 14 {
            // The kernel would drop it silently after we counted it sent.
            bump(&c.tx_dropped, 1);
            return;
        }
        let Some(addr) = self.free.pop() else {
            bump(&c.tx_dropped, 1);
            return;
        };
        if !self.sock.umem.write(addr, frame) {
            self.free.push(addr);
            bump(&c.tx_dropped, 1);
            return;
        }
        let desc = libc::xdp_desc { addr, len: frame.len() as u32, options: 0 };
        self.tx.write_desc(self.tx_prod, desc);
        self.tx_prod = self.tx_prod.wrapping_add(1);
        self.staged += 1;
        self.staged_bytes += frame.len() as u64;
    }

    /// Publishes the staged descriptors and wakes the kernel until its tx ring is empty.
    pub(crate) fn flush(&mut self, c: &QueueCounters, shared: &PortShared) {
        if self.staged > 0 {
            self.tx.store_producer(self.tx_prod);
            bump(&c.tx_packets, self.staged as u64);
            bump(&c.tx_bytes, self.staged_bytes);
            self.staged = 0;
            self.staged_bytes = 0;
        }
        self.wake(c, shared);
        self.reap();
        if shared.link() == LinkState::Down && self.tx.load_consumer() == self.tx_prod {
            shared.check_link();
        }
    }

    /// Wakes the kernel until its tx ring is empty (a few calls at most).
    fn wake(&mut self, c: &QueueCounters, shared: &PortShared) {
        // Copy mode sends in the sendto() call, at most 32 frames per call.
        for _ in 0..4 {
            if self.tx.load_consumer() == self.tx_prod {
                break;
            }
            match sys::kick_tx(&self.sock.fd) {
                Ok(()) => {}
                Err(e) => match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {}
                    Some(libc::ENETDOWN) | Some(libc::ENXIO) | Some(libc::ENODEV) => {
                        bump(&c.tx_errors, 1);
                        shared.check_link();
                        break;
                    }
                    _ => {
                        bump(&c.tx_errors, 1);
                        shared.error("sendto (tx wakeup)", &e);
                        break;
                    }
                },
            }
        }
    }
}

/// An opened port's receive queues, transmit queues and kernel counters.
pub(crate) type Opened = (Vec<Rx>, Vec<Tx>, Vec<Option<KernelCounter>>);

/// Creates the XSKMAP and the program, opens `queues` XDP sockets on `ifindex`, then attaches the
/// program. On any failure everything opened so far is closed (by drop), and nothing was attached.
pub(crate) fn open(
    port: &str,
    ifindex: u32,
    ctl: &OwnedFd,
    queues: usize,
    cfg: &AfXdpConfig,
    hook: Option<&crate::EventHook>,
) -> Result<Opened, PortError> {
    let err = |op: &'static str| move |e: io::Error| PortError::os(port, op, e);
    let pow2 = |v: u32| v.is_power_of_two() && v >= 64;
    if !pow2(cfg.rx_frames) || !pow2(cfg.tx_frames) || !(cfg.chunk_size == 2048 || cfg.chunk_size == 4096) {
        return Err(PortError::Spec(format!(
            "port {port}: afxdp: rx_frames and tx_frames must be powers of two (at least 64), chunk_size 2048 or 4096"
        )));
    }
    match sys::interface_rx_queues(ctl, port) {
        Ok(have) if have as usize > queues => {
            return Err(PortError::Spec(format!(
                "port {port}: the interface has {have} receive queues but the port was opened with {queues}: frames \
                 on the others would bypass it; open it with {have} queues or lower the interface's \
                 (ethtool -L {port} rx {queues})"
            )))
        }
        _ => {}
    }

    let mtu = sys::interface_mtu(ctl, port).map_err(err("reading the MTU"))?;

    let map = sys::bpf_map_create(BPF_MAP_TYPE_XSKMAP, 4, 4, queues as u32, "rqvs_xsks").map_err(|e| {
        if e.raw_os_error() == Some(libc::EINVAL) {
            PortError::Unsupported { port: port.to_string(), what: format!("creating an XSKMAP: {e}") }
        } else {
            PortError::os(port, "creating the XSKMAP (bpf)", e)
        }
    })?;
    let insns = program(map.as_raw_fd());
    let license = c"Dual MIT/GPL";
    let prog = sys::bpf_prog_load(BPF_PROG_TYPE_XDP, &insns, license, BPF_XDP, "rqvs_xsk_redir")
        .or_else(|_| sys::bpf_prog_load(BPF_PROG_TYPE_XDP, &insns, license, 0, "rqvs_xsk_redir"))
        .map_err(err("loading the XDP program (bpf)"))?;
    let attachment = Arc::new(Attachment { link: OnceLock::new(), prog, map });

    let mut rx = Vec::with_capacity(queues);
    let mut tx = Vec::with_capacity(queues);
    let mut kernel = Vec::with_capacity(queues);
    for q in 0..queues {
        let (r, mut t, fd) = open_socket(port, ifindex, q as u32, cfg, &attachment)?;
        t.max_len = mtu as usize + 14;
        sys::bpf_map_update_u32(&attachment.map, q as u32, fd.as_raw_fd() as u32)
            .map_err(err("adding the socket to the XSKMAP (bpf)"))?;
        kernel.push(Some(KernelCounter::Xdp(fd)));
        rx.push(r);
        tx.push(t);
    }

    let flags = match cfg.mode {
        XdpMode::Generic => XDP_FLAGS_SKB_MODE,
        XdpMode::Native | XdpMode::Auto => XDP_FLAGS_DRV_MODE,
    };
    let mut linked = sys::bpf_link_create(&attachment.prog, ifindex, BPF_XDP, flags);
    let mut fallback = None;
    if cfg.mode == XdpMode::Auto {
        if let Err(e) = &linked {
            // No driver mode here (EOPNOTSUPP), or not with this setup (a veth whose peer's
            // MTU is too large, ERANGE; more peer queues than ours, ENOSPC; no peer, ...):
            // generic mode, which takes any interface.
            if !matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::EEXIST)) {
                fallback = Some(e.to_string());
                linked = sys::bpf_link_create(&attachment.prog, ifindex, BPF_XDP, XDP_FLAGS_SKB_MODE);
            }
        }
    }
    let link = linked.map_err(|e| match e.raw_os_error() {
        Some(libc::EBUSY) | Some(libc::EEXIST) => {
            PortError::Busy { port: port.to_string(), what: "another XDP program is attached to the interface".into() }
        }
        Some(libc::EINVAL) => PortError::Unsupported {
            port: port.to_string(),
            what: format!("attaching XDP through a bpf link (needs Linux 5.9): {e}"),
        },
        Some(libc::EOPNOTSUPP) => PortError::Unsupported {
            port: port.to_string(),
            what: format!("the driver has no native XDP (use generic mode): {e}"),
        },
        _ => PortError::os(port, "attaching the XDP program (bpf link)", e),
    })?;
    // The sockets already share the attachment; it gets its link once, before any queue runs.
    let _ = attachment.link.set(link);
    if let Some(why) = fallback {
        if let Some(hook) = hook {
            hook(&crate::PortEvent {
                port: port.to_string(),
                kind: crate::EventKind::Error,
                detail: format!(
                    "XDP in generic mode: the driver refused driver mode ({why}); TCP/UDP super-frames \
                     (TSO/GSO) from the interface's sender do not fit an AF_XDP chunk in generic mode \
                     and are lost in the kernel (counted in rx_lost): turn segmentation offloads off \
                     on the sender (ethtool -K IF tso off gso off)"
                ),
            });
        }
    }
    Ok((rx, tx, kernel))
}

/// Opens the XDP socket of queue `queue`: UMEM, four rings, fill ring stocked, bound.
fn open_socket(
    port: &str,
    ifindex: u32,
    queue: u32,
    cfg: &AfXdpConfig,
    attachment: &Arc<Attachment>,
) -> Result<(Rx, Tx, Arc<OwnedFd>), PortError> {
    let err = |op: &'static str| move |e: io::Error| PortError::os(port, op, e);
    let fd = sys::socket(libc::AF_XDP, libc::SOCK_RAW, 0).map_err(|e| match e.raw_os_error() {
        Some(libc::EAFNOSUPPORT) => PortError::Unsupported {
            port: port.to_string(),
            what: "AF_XDP sockets (the kernel is built without CONFIG_XDP_SOCKETS)".into(),
        },
        _ => PortError::os(port, "AF_XDP socket", e),
    })?;
    let (nrx, ntx, chunk) = (cfg.rx_frames, cfg.tx_frames, cfg.chunk_size as u64);
    let umem = Mmap::anonymous((chunk * (nrx + ntx) as u64) as usize).map_err(err("allocating the UMEM"))?;
    let reg = libc::xdp_umem_reg {
        addr: umem.ptr() as u64,
        len: umem.len() as u64,
        chunk_size: cfg.chunk_size,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    sys::setsockopt(&fd, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg).map_err(err("registering the UMEM"))?;
    for (opt, n) in [
        (libc::XDP_UMEM_FILL_RING, nrx),
        (libc::XDP_UMEM_COMPLETION_RING, ntx),
        (libc::XDP_RX_RING, nrx),
        (libc::XDP_TX_RING, ntx),
    ] {
        sys::setsockopt(&fd, libc::SOL_XDP, opt, &n).map_err(err("sizing the XDP rings"))?;
    }
    let off: libc::xdp_mmap_offsets =
        sys::getsockopt(&fd, libc::SOL_XDP, libc::XDP_MMAP_OFFSETS).map_err(err("XDP ring offsets"))?;
    let ring = |o: &libc::xdp_ring_offset, n: u32, entry: usize, pgoff: u64| -> Result<XdpRing, PortError> {
        let len = o.desc as usize + n as usize * entry;
        let map = Mmap::shared(&fd, len, pgoff).map_err(err("mapping an XDP ring"))?;
        XdpRing::new(map, o, n, entry)
            .ok_or_else(|| PortError::os(port, "XDP ring layout", io::Error::from_raw_os_error(libc::EINVAL)))
    };
    let rx_ring = ring(&off.rx, nrx, 16, libc::XDP_PGOFF_RX_RING as u64)?;
    let tx_ring = ring(&off.tx, ntx, 16, libc::XDP_PGOFF_TX_RING as u64)?;
    let fill = ring(&off.fr, nrx, 8, libc::XDP_UMEM_PGOFF_FILL_RING)?;
    let comp = ring(&off.cr, ntx, 8, libc::XDP_UMEM_PGOFF_COMPLETION_RING)?;
    for i in 0..nrx {
        fill.write_addr(i, i as u64 * chunk);
    }
    fill.store_producer(nrx);

    let addr = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: libc::XDP_COPY | libc::XDP_USE_NEED_WAKEUP,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: 0,
    };
    // A socket closed a moment ago releases its queue in deferred kernel work: wait for that
    // (up to half a second) before calling the queue busy.
    let mut bound = sys::bind_xdp(&fd, &addr);
    let start = std::time::Instant::now();
    while matches!(&bound, Err(e) if e.raw_os_error() == Some(libc::EBUSY))
        && start.elapsed() < std::time::Duration::from_millis(500)
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
        bound = sys::bind_xdp(&fd, &addr);
    }
    bound.map_err(|e| match e.raw_os_error() {
        Some(libc::EINVAL) => PortError::Spec(format!(
            "port {port}: cannot bind an XDP socket to receive queue {queue} ({e}): the interface has fewer queues"
        )),
        Some(libc::EBUSY) => {
            PortError::Busy { port: port.to_string(), what: format!("receive queue {queue} already has an XDP socket") }
        }
        _ => PortError::os(port, "binding the XDP socket", e),
    })?;

    let fd = Arc::new(fd);
    let sock =
        Arc::new(Socket { fd: fd.clone(), umem: Umem::new(umem, chunk as usize), _attachment: attachment.clone() });
    let rx = Rx {
        fill,
        rx: rx_ring,
        sock: sock.clone(),
        rx_cons: 0,
        consumed: 0,
        fill_prod: nrx,
        held: [0; BATCH],
        held_n: 0,
        spare: Vec::with_capacity(BATCH),
        chunk_size: chunk,
    };
    let tx = Tx {
        tx: tx_ring,
        comp,
        sock,
        tx_prod: 0,
        comp_cons: 0,
        free: (0..ntx as u64).map(|i| (nrx as u64 + i) * chunk).collect(),
        staged: 0,
        staged_bytes: 0,
        chunk_size: chunk,
        max_len: usize::MAX,
    };
    Ok((rx, tx, fd))
}
