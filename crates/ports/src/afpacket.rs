//! `afpacket`: AF_PACKET sockets — a TPACKET_V3 memory-mapped receive ring per queue, spread by
//! `PACKET_FANOUT`, and `sendmmsg` for transmit.
//!
//! **Receive.** Each queue is one packet socket bound to the interface with its own TPACKET_V3
//! ring of [`AfPacketConfig::blocks`] blocks. The kernel fills a block with frames and hands it
//! over when it is full or when the retire timer ([`AfPacketConfig::retire_ms`]) fires; we read
//! the frames in place — a batch's frames are views into the block — and give the block back when
//! the batch holding its last frame is dropped. With several queues, the sockets join one fanout
//! group in `PACKET_FANOUT_HASH` mode: the kernel's symmetric flow hash picks the socket, so a
//! flow always lands on the same queue (and PMD). The group id is chosen by the kernel
//! (`PACKET_FANOUT_FLAG_UNIQUEID`), so two ports or two switches never join each other's group.
//! The interface is put in promiscuous mode through a socket membership, which the kernel drops
//! when the socket closes — nothing is left behind.
//!
//! Frames this host transmits on the interface are not received: `PACKET_IGNORE_OUTGOING` keeps
//! them off the ring (and the frame type is checked too, for kernels before 4.20), and the
//! transmit sockets bypass the qdisc layer, where the copy for packet taps is made. The
//! kernel's VLAN offload takes the 802.1Q/802.1ad tag out of the frame and gives it as metadata;
//! the receive path puts it back in front of the ethertype, using the frame's headroom, so the
//! caller sees the frame as it was on the wire. A frame longer than the ring's block
//! (`tp_snaplen < tp_len`) is counted in `rx_errors` and skipped, never forwarded cut short.
//!
//! **Checksum offload.** A sender whose interface offloads checksums and segmentation (a veth's
//! defaults) leaves two jobs to "the device", which for a frame read here is us: the TCP/UDP
//! checksum (the ring marks such a frame `TP_STATUS_CSUMNOTREADY`) and, with TSO/USO, cutting a
//! super-frame of up to 64 KiB into segments. The receive sockets ask for a virtio-net header in
//! front of each frame (`PACKET_VNET_HDR`, set before the ring), which names a super-frame's
//! kind and segment size. A frame marked not ready gets its checksum computed whole
//! ([`crate::csum::complete`]) in place; a TCP or UDP super-frame is cut into segments, each
//! with its headers and checksums (`csum::Segmenter`), written into a per-queue buffer
//! and handed out as frames of their own (so `rx_packets` counts segments; at most
//! [`SEG_ARENA`] bytes of segments per batch, the rest in the next). A super-frame of another
//! kind (UFO, a tunnel's) or whose segment does not fit the buffer is counted in `rx_errors` and
//! dropped. Without `PACKET_VNET_HDR` (refused by the kernel) checksums are still completed, but
//! super-frames go on whole (and the output port refuses what exceeds its MTU, counted).
//!
//! Latency note: a block reaches user space only when full or retired, so at low rates a frame
//! waits up to `retire_ms` (rounded up to the kernel's timer tick).
//!
//! **Transmit: `sendmmsg`, not a TX ring.** A `send` copies the frame into the queue's staging
//! buffers; `flush` (or the 32nd frame) hands them all to the kernel in one `sendmmsg` call. We
//! chose this over `PACKET_TX_RING` because:
//! - the TX ring's slots are attached to the sent skb *without copying* and are marked free when
//!   the skb is orphaned, which on a veth into another namespace happens before the peer has read
//!   the frame — a slot can be rewritten while the peer still reads it; `sendmmsg` copies into a
//!   fresh skb, so what leaves is what we sent;
//! - the kernel says per frame what was sent: the return value counts the frames accepted and a
//!   failure names the frame (too long → `EMSGSIZE`, buffer full → `ENOBUFS`), so `tx_packets` and
//!   `tx_dropped` are exact without reading back ring slot states (a TX ring stops at a
//!   `TP_STATUS_WRONG_FORMAT` slot unless told otherwise);
//! - both cost one system call per batch; the copy the ring saves is a few dozen bytes for the
//!   64-byte frames the benchmarks use.
//!
//! Each transmit queue is its own socket with `PACKET_QDISC_BYPASS` (straight to the driver: on a
//! veth, whose qdisc is `noqueue`, it saves little; on a NIC it skips the qdisc lock).

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use crate::afpacket_latency::LatencyRx;
pub use crate::afpacket_latency::RxMode;
use crate::csum::{self, GsoKind, Segmenter};
use crate::error::PortError;
use crate::port::Staging;
use crate::ring::{Slot, V3Frame, V3Ring, V3_HEADROOM_START};
use crate::stats::{bump, KernelCounter, LinkState, PortShared, QueueCounters};
use crate::sys::{self, Mmap};
use crate::BATCH;

const TPACKET_V3: libc::c_int = 2;
const ETH_P_ALL: u16 = libc::ETH_P_ALL as u16;

/// Tuning of `afpacket` ports. The defaults give each queue 4 MiB of ring.
#[derive(Clone, Debug)]
pub struct AfPacketConfig {
    /// Size of one ring block in bytes (a multiple of the page size).
    pub block_size: usize,
    /// Blocks per receive ring.
    pub blocks: usize,
    /// Milliseconds after which the kernel hands over a block that is not full (≥ 1).
    pub retire_ms: u32,
    /// Extra headroom in front of each received frame (`PACKET_RESERVE`), in addition to the 14
    /// bytes the ring layout already leaves.
    pub reserve: u32,
    /// Put the interface in promiscuous mode (a switch port must be).
    pub promiscuous: bool,
    /// Send with `PACKET_QDISC_BYPASS`.
    pub qdisc_bypass: bool,
    /// How the receive queues read: a TPACKET_V3 ring (throughput, the default) or `recvmsg`
    /// per frame (latency: no block timer; `afpacket_latency`).
    pub rx_mode: RxMode,
}

impl Default for AfPacketConfig {
    fn default() -> Self {
        AfPacketConfig {
            block_size: 1 << 17,
            blocks: 32,
            retire_ms: 1,
            reserve: 16,
            promiscuous: true,
            qdisc_bypass: true,
            rx_mode: RxMode::Throughput,
        }
    }
}

/// The frames of the block being read.
struct Cursor {
    left: u32,
    off: usize,
}

/// Bytes of segment memory per receive queue (a batch's segments; reset when it is released).
pub const SEG_ARENA: usize = 512 << 10;
/// Headroom in front of each segment (two VLAN tags and then some).
const SEG_HEADROOM: usize = 32;
/// virtio-net header: `flags`, `gso_type` (ECN bit 0x80), `hdr_len`, `gso_size`, …
const VIRTIO_NET_HDR_GSO_NONE: u8 = 0;
const VIRTIO_NET_HDR_GSO_TCPV4: u8 = 1;
const VIRTIO_NET_HDR_GSO_TCPV6: u8 = 4;
const VIRTIO_NET_HDR_GSO_UDP_L4: u8 = 5;

/// A super-frame being cut: its view in the current block (which is not finished before it is
/// done) and the next segment to write.
struct Pending {
    frame: Slot,
    seg: Segmenter,
    next: usize,
    /// It was the block's last frame: finish the block once every segment is out.
    finish_block: bool,
}

/// One receive queue: a packet socket and its ring.
pub(crate) struct RingRx {
    /// Declared before the socket so that it is unmapped before the socket closes.
    ring: V3Ring,
    _socket: Arc<OwnedFd>,
    block_size: usize,
    block: usize,
    cursor: Option<Cursor>,
    /// Blocks whose frames have all been handed out; given back on release.
    finished: Vec<usize>,
    /// A virtio-net header precedes each frame (`PACKET_VNET_HDR`).
    vnet: bool,
    pending: Option<Pending>,
    /// Segment memory (allocated at the first super-frame), and how much the batch used.
    arena: Vec<u8>,
    arena_used: usize,
}

impl RingRx {
    pub(crate) fn fill(&mut self, slots: &mut [Slot], c: &QueueCounters) -> usize {
        let mut n = 0;
        while n < slots.len() {
            if self.pending.is_some() {
                if !self.segments(slots, &mut n, c) {
                    break;
                }
                continue;
            }
            let cur = match &mut self.cursor {
                Some(cur) => cur,
                // Wrapped around to a block this batch has read and not yet given back: its
                // status still says "user", but its frames are not new.
                None if self.finished.contains(&self.block) => break,
                None => match self.ring.user_block(self.block) {
                    None => break,
                    Some((left, first)) => self.cursor.insert(Cursor { left, off: first as usize }),
                },
            };
            if cur.left == 0 {
                self.finish_block();
                continue;
            }
            cur.left -= 1;
            let off = cur.off;
            let Some(h) = self.ring.frame(self.block, off) else {
                // A header outside the block: the rest of the block cannot be walked.
                bump(&c.rx_errors, 1 + cur.left as u64);
                self.finish_block();
                continue;
            };
            if h.next_offset == 0 && cur.left > 0 {
                bump(&c.rx_errors, cur.left as u64);
                cur.left = 0;
            }
            cur.off = off + h.next_offset as usize;
            let done = cur.left == 0;
            if let Some(mut slot) = self.frame_slot(off, &h, c) {
                match self.gso_of(off, &h) {
                    None => {
                        if h.status & libc::TP_STATUS_CSUMNOTREADY != 0 {
                            // Unsupported (not TCP/UDP over IP): left as it is, as a NIC would.
                            let _ = csum::complete(slot.view().data_mut());
                        }
                        slots[n] = slot;
                        n += 1;
                    }
                    Some((kind, size)) => match Segmenter::new(slot.data(), kind, size) {
                        Some(seg) => {
                            self.pending = Some(Pending { frame: slot, seg, next: 0, finish_block: done });
                            continue;
                        }
                        None => bump(&c.rx_errors, 1),
                    },
                }
            }
            if done {
                self.finish_block();
            }
        }
        n
    }

    /// The super-frame kind and segment size of the frame at `off`, if it is one (`None` for a
    /// plain frame, or without a virtio-net header). A super-frame of a kind not cut here gives
    /// a kind-less answer the segmenter refuses (counted in `rx_errors`).
    fn gso_of(&self, off: usize, h: &V3Frame) -> Option<(GsoKind, u16)> {
        if !self.vnet {
            return None;
        }
        // An unreadable header: the frame is taken as plain (a TCP super-frame would then be
        // refused by the output port as too long, counted there).
        let v = self.ring.vnet_header(self.block, off, h.mac as usize)?;
        let size = u16::from_le_bytes([v[4], v[5]]);
        match v[1] & !0x80 {
            VIRTIO_NET_HDR_GSO_NONE => None,
            VIRTIO_NET_HDR_GSO_TCPV4 | VIRTIO_NET_HDR_GSO_TCPV6 => Some((GsoKind::Tcp, size)),
            VIRTIO_NET_HDR_GSO_UDP_L4 => Some((GsoKind::UdpL4, size)),
            // UFO or anything newer: size 0 makes the segmenter refuse it.
            _ => Some((GsoKind::Tcp, 0)),
        }
    }

    /// Hands out segments of the pending super-frame into `slots[*n..]`. False when the batch
    /// cannot take more (slots or segment memory full): the rest go into the next batch.
    fn segments(&mut self, slots: &mut [Slot], n: &mut usize, c: &QueueCounters) -> bool {
        let Some(p) = self.pending.as_mut() else { return true };
        if self.arena.is_empty() {
            self.arena = vec![0; SEG_ARENA];
        }
        while p.next < p.seg.count() {
            if *n == slots.len() {
                return false;
            }
            let need = SEG_HEADROOM + p.seg.len(p.next);
            if need > self.arena.len() {
                // Never fits: the whole super-frame is dropped, counted once.
                bump(&c.rx_errors, 1);
                p.next = p.seg.count();
                break;
            }
            if self.arena_used + need > self.arena.len() {
                return false;
            }
            let buf = &mut self.arena[self.arena_used..self.arena_used + need];
            let Some(len) = p.seg.write(p.frame.data(), p.next, &mut buf[SEG_HEADROOM..]) else {
                bump(&c.rx_errors, 1);
                p.next = p.seg.count();
                break;
            };
            slots[*n] = Slot::over(buf, SEG_HEADROOM, len);
            *n += 1;
            self.arena_used += need;
            p.next += 1;
        }
        let finish = p.finish_block;
        self.pending = None;
        if finish {
            self.finish_block();
        }
        true
    }

    /// The slot of the frame at `off` of the current block, or `None` (counted) if it is skipped.
    fn frame_slot(&self, off: usize, h: &V3Frame, c: &QueueCounters) -> Option<Slot> {
        if h.pkttype == libc::PACKET_OUTGOING {
            return None;
        }
        if h.snaplen < h.len {
            bump(&c.rx_errors, 1);
            return None;
        }
        let start = off + V3_HEADROOM_START;
        let mac = off + h.mac as usize;
        let end = if h.next_offset != 0 { off + h.next_offset as usize } else { mac + h.snaplen as usize };
        let Some(mut slot) = (mac >= start)
            .then(|| self.ring.slot(self.block, start, end.min(self.block_size), mac - start, h.snaplen as usize))
            .flatten()
        else {
            bump(&c.rx_errors, 1);
            return None;
        };
        if h.status & libc::TP_STATUS_VLAN_VALID != 0 || h.vlan_tci != 0 {
            let tpid = if h.status & libc::TP_STATUS_VLAN_TPID_VALID != 0 { h.vlan_tpid } else { 0x8100 };
            let mut f = slot.view();
            if !f.insert(12, 4) {
                bump(&c.rx_errors, 1);
                return None;
            }
            f.data_mut()[12..14].copy_from_slice(&tpid.to_be_bytes());
            f.data_mut()[14..16].copy_from_slice(&(h.vlan_tci as u16).to_be_bytes());
        }
        Some(slot)
    }

    fn finish_block(&mut self) {
        self.finished.push(self.block);
        self.block = (self.block + 1) % self.ring.blocks();
        self.cursor = None;
    }

    /// Gives fully read blocks back to the kernel. No slot into them may be alive.
    pub(crate) fn release(&mut self) {
        self.arena_used = 0;
        for &b in &self.finished {
            self.ring.release_block(b);
        }
        self.finished.clear();
    }
}

/// One receive queue: a ring ([`RxMode::Throughput`]) or `recvmsg` per frame
/// ([`RxMode::Latency`], `afpacket_latency`).
pub(crate) enum Rx {
    Ring(RingRx),
    Latency(LatencyRx),
}

impl Rx {
    pub(crate) fn fill(&mut self, slots: &mut [Slot], c: &QueueCounters) -> usize {
        match self {
            Rx::Ring(r) => r.fill(slots, c),
            Rx::Latency(r) => r.fill(slots, c),
        }
    }

    pub(crate) fn release(&mut self) {
        match self {
            Rx::Ring(r) => r.release(),
            Rx::Latency(r) => r.release(),
        }
    }
}

/// One transmit queue: a packet socket and up to [`BATCH`] staged frames.
pub(crate) struct Tx {
    fd: OwnedFd,
    pub(crate) staging: Staging,
}

impl Tx {
    /// Sends the staged frames with `sendmmsg`; counts each one as sent or dropped.
    pub(crate) fn flush(&mut self, c: &QueueCounters, shared: &PortShared) {
        let staged = self.staging.take();
        let n = staged.len();
        if n == 0 {
            return;
        }
        let mut refs: [&[u8]; BATCH] = [&[]; BATCH];
        for (r, b) in refs.iter_mut().zip(staged) {
            *r = b;
        }
        let mut i = 0;
        let mut sent_any = false;
        while i < n {
            match sys::sendmmsg(&self.fd, &refs[i..n]) {
                Ok(0) => {
                    bump(&c.tx_dropped, (n - i) as u64);
                    break;
                }
                Ok(k) => {
                    bump(&c.tx_packets, k as u64);
                    bump(&c.tx_bytes, refs[i..i + k].iter().map(|f| f.len() as u64).sum());
                    i += k;
                    sent_any = true;
                }
                Err(e) => {
                    bump(&c.tx_errors, 1);
                    match e.raw_os_error() {
                        Some(libc::EAGAIN) | Some(libc::ENOBUFS) => {
                            bump(&c.tx_dropped, (n - i) as u64);
                            break;
                        }
                        Some(libc::ENETDOWN) | Some(libc::ENXIO) | Some(libc::ENODEV) => {
                            bump(&c.tx_dropped, (n - i) as u64);
                            shared.check_link();
                            break;
                        }
                        _ => {
                            // This frame is refused (too long, too short); the rest may go.
                            shared.error("sendmmsg", &e);
                            bump(&c.tx_dropped, 1);
                            i += 1;
                        }
                    }
                }
            }
        }
        if sent_any && shared.link() != LinkState::Up {
            shared.check_link();
        }
    }
}

fn set_int(fd: &OwnedFd, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
    sys::setsockopt(fd, libc::SOL_PACKET, name, &v)
}

/// An opened port's receive queues, transmit queues and kernel counters.
pub(crate) type Opened = (Vec<Rx>, Vec<Tx>, Vec<Option<KernelCounter>>);

/// Opens `queues` receive sockets (one fanout group) and as many transmit sockets on `ifindex`.
pub(crate) fn open(port: &str, ifindex: u32, queues: usize, cfg: &AfPacketConfig) -> Result<Opened, PortError> {
    let err = |op: &'static str| move |e: io::Error| PortError::os(port, op, e);
    let page = 4096;
    if cfg.block_size == 0 || cfg.block_size & (page - 1) != 0 || cfg.blocks == 0 || cfg.retire_ms == 0 {
        return Err(PortError::Spec(format!(
            "port {port}: afpacket ring: block size must be a positive multiple of {page}, blocks and retire_ms positive"
        )));
    }
    let mut fanout_id: Option<u32> = None;
    let mut rx = Vec::with_capacity(queues);
    let mut kernel = Vec::with_capacity(queues);
    for _ in 0..queues {
        let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, 0)
            .map_err(|e| PortError::packet_socket(port, e))?;
        if cfg.rx_mode == RxMode::Latency {
            // No ring: each frame is read when it arrives (afpacket_latency).
            let vnet = set_int(&fd, libc::PACKET_VNET_HDR, 1).is_ok();
            set_int(&fd, libc::PACKET_AUXDATA, 1).map_err(err("PACKET_AUXDATA"))?;
            // As much queued as a ring would hold (root may pass the rmem_max limit).
            let bytes = (cfg.block_size * cfg.blocks).min(i32::MAX as usize) as libc::c_int;
            if sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &bytes).is_err() {
                let _ = sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &bytes);
            }
            let _ = set_int(&fd, libc::PACKET_IGNORE_OUTGOING, 1);
            sys::bind_packet(&fd, ifindex, ETH_P_ALL).map_err(err("bind"))?;
            if cfg.promiscuous {
                promiscuous(&fd, ifindex).map_err(err("promiscuous mode"))?;
            }
            if queues > 1 {
                join_fanout(&fd, &mut fanout_id).map_err(err("PACKET_FANOUT"))?;
            }
            let fd = Arc::new(fd);
            kernel.push(Some(KernelCounter::Packet(fd.clone())));
            rx.push(Rx::Latency(LatencyRx::new(fd, vnet)));
            continue;
        }
        set_int(&fd, libc::PACKET_VERSION, TPACKET_V3).map_err(err("TPACKET_V3"))?;
        // Before the ring (the kernel refuses it after). Old kernels lack it with TPACKET_V3:
        // then checksums are still completed (from the frame status) but super-frames go whole.
        let vnet = set_int(&fd, libc::PACKET_VNET_HDR, 1).is_ok();
        set_int(&fd, libc::PACKET_RESERVE, cfg.reserve as libc::c_int).map_err(err("PACKET_RESERVE"))?;
        let frame_size = 2048u32;
        let req = libc::tpacket_req3 {
            tp_block_size: cfg.block_size as u32,
            tp_block_nr: cfg.blocks as u32,
            tp_frame_size: frame_size,
            tp_frame_nr: (cfg.block_size / frame_size as usize * cfg.blocks) as u32,
            tp_retire_blk_tov: cfg.retire_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        sys::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req).map_err(err("PACKET_RX_RING"))?;
        let len = cfg.block_size * cfg.blocks;
        let map = Mmap::shared(&fd, len, 0).map_err(err("mapping the receive ring"))?;
        let ring = V3Ring::new(map, cfg.block_size, cfg.blocks)
            .ok_or_else(|| PortError::os(port, "receive ring", io::Error::from_raw_os_error(libc::EINVAL)))?;
        // Kernels before 4.20 lack it; the receive path also checks each frame's type.
        let _ = set_int(&fd, libc::PACKET_IGNORE_OUTGOING, 1);
        sys::bind_packet(&fd, ifindex, ETH_P_ALL).map_err(err("bind"))?;
        if cfg.promiscuous {
            promiscuous(&fd, ifindex).map_err(err("promiscuous mode"))?;
        }
        if queues > 1 {
            join_fanout(&fd, &mut fanout_id).map_err(err("PACKET_FANOUT"))?;
        }
        let fd = Arc::new(fd);
        kernel.push(Some(KernelCounter::Packet(fd.clone())));
        rx.push(Rx::Ring(RingRx {
            _socket: fd,
            ring,
            block_size: cfg.block_size,
            block: 0,
            cursor: None,
            finished: Vec::with_capacity(cfg.blocks),
            vnet,
            pending: None,
            arena: Vec::new(),
            arena_used: 0,
        }));
    }
    let mut tx = Vec::with_capacity(queues);
    for _ in 0..queues {
        let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, 0)
            .map_err(|e| PortError::packet_socket(port, e))?;
        sys::bind_packet(&fd, ifindex, 0).map_err(err("bind"))?;
        if cfg.qdisc_bypass {
            set_int(&fd, libc::PACKET_QDISC_BYPASS, 1).map_err(err("PACKET_QDISC_BYPASS"))?;
        }
        tx.push(Tx { fd, staging: Staging::new() });
    }
    Ok((rx, tx, kernel))
}

/// Puts the interface in promiscuous mode for as long as the socket is open.
fn promiscuous(fd: &OwnedFd, ifindex: u32) -> io::Result<()> {
    let mreq = libc::packet_mreq {
        mr_ifindex: ifindex as libc::c_int,
        mr_type: libc::PACKET_MR_PROMISC as u16,
        mr_alen: 0,
        mr_address: [0; 8],
    };
    sys::setsockopt(fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)
}

/// Joins the port's fanout group in hash mode, creating it with a kernel-chosen id the first time.
fn join_fanout(fd: &OwnedFd, id: &mut Option<u32>) -> io::Result<()> {
    let hash = libc::PACKET_FANOUT_HASH;
    match *id {
        Some(id) => set_int(fd, libc::PACKET_FANOUT, (id | hash << 16) as libc::c_int),
        None => {
            let first = (hash | libc::PACKET_FANOUT_FLAG_UNIQUEID) << 16;
            let new = match set_int(fd, libc::PACKET_FANOUT, first as libc::c_int) {
                Ok(()) => sys::getsockopt::<u32>(fd, libc::SOL_PACKET, libc::PACKET_FANOUT)? & 0xffff,
                // Kernels before 4.13 cannot choose: take an id from the pid and the socket.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    let guess = (std::process::id() ^ (std::ptr::from_ref(fd) as usize as u32).rotate_left(7)) & 0xffff;
                    set_int(fd, libc::PACKET_FANOUT, (guess | hash << 16) as libc::c_int)?;
                    guess
                }
                Err(e) => return Err(e),
            };
            *id = Some(new);
            Ok(())
        }
    }
}
