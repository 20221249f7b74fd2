//! `afpacket` receive in latency mode (`AfPacketConfig::rx_mode` = [`RxMode::Latency`]): a
//! packet socket **without** a ring, read with non-blocking `recvmsg` — each frame is there the
//! moment the kernel queues it, where a TPACKET_V3 block reaches user space only when full or
//! retired (`retire_ms`, at least a millisecond: what a lone ping waits). The price is a copy
//! and a system call per frame (and an empty `recvmsg` per idle poll), measured in
//! `docs/switch-bench.md`.
//!
//! What the ring path does, this does too: the VLAN tag the kernel moved to metadata
//! (`PACKET_AUXDATA`) goes back into the frame; with `PACKET_VNET_HDR` each frame comes after
//! a virtio-net header, whose `NEEDS_CSUM` flag has the checksum completed and whose GSO type
//! has a super-frame cut into segments ([`csum::Segmenter`], at most [`SEG_ARENA`] bytes of
//! segments per batch, the rest in the next); without it (older kernels), `TP_STATUS_CSUMNOTREADY`
//! of the auxiliary data has the checksum completed. Frames the port sent itself
//! (`PACKET_OUTGOING`) are skipped; a frame longer than the buffer is counted in `rx_errors`.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use crate::afpacket::SEG_ARENA;
use crate::csum::{self, GsoKind, Segmenter};
use crate::ring::Slot;
use crate::stats::{bump, QueueCounters};
use crate::sys;

/// How a port's receive queues read: see [`crate::AfPacketConfig::rx_mode`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RxMode {
    /// A TPACKET_V3 ring: frames handed over a block at a time (full, or after `retire_ms`).
    #[default]
    Throughput,
    /// `recvmsg` per frame, no ring: no block timer between the wire and the switch.
    Latency,
}

impl std::str::FromStr for RxMode {
    type Err = String;
    fn from_str(s: &str) -> Result<RxMode, String> {
        match s {
            "throughput" => Ok(RxMode::Throughput),
            "latency" => Ok(RxMode::Latency),
            _ => Err(format!("receive mode '{s}': expected 'throughput' or 'latency'")),
        }
    }
}

/// Room in front of each frame (a VLAN tag to put back, the virtio-net header before it).
const HEADROOM: usize = 64;
/// The virtio-net header's size.
const VNET_LEN: usize = 10;
/// The largest frame read (a GSO super-frame is up to 64 KiB).
const MAX_FRAME: usize = 65_535;
const TAILROOM: usize = 64;
const SEG_HEADROOM: usize = 32;

/// A super-frame being cut.
struct Pending {
    buf: Vec<u8>,
    head: usize,
    len: usize,
    seg: Segmenter,
    next: usize,
}

/// One receive queue in latency mode.
pub(crate) struct LatencyRx {
    fd: Arc<OwnedFd>,
    vnet: bool,
    bufs: Vec<Vec<u8>>,
    pending: Option<Pending>,
    arena: Vec<u8>,
    arena_used: usize,
}

impl LatencyRx {
    pub(crate) fn new(fd: Arc<OwnedFd>, vnet: bool) -> LatencyRx {
        LatencyRx {
            fd,
            vnet,
            bufs: (0..crate::BATCH).map(|_| Vec::new()).collect(),
            pending: None,
            arena: Vec::new(),
            arena_used: 0,
        }
    }

    pub(crate) fn fill(&mut self, slots: &mut [Slot], c: &QueueCounters) -> usize {
        let mut n = 0;
        while n < slots.len() {
            if self.pending.is_some() {
                if !self.segments(slots, &mut n, c) {
                    break;
                }
                continue;
            }
            let buf = &mut self.bufs[n];
            if buf.len() < HEADROOM + MAX_FRAME + TAILROOM {
                buf.resize(HEADROOM + MAX_FRAME + TAILROOM, 0);
            }
            let at = if self.vnet { HEADROOM - VNET_LEN } else { HEADROOM };
            let got = match sys::recv_nowait(&self.fd, &mut buf[at..HEADROOM + MAX_FRAME]) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(_) => {
                    bump(&c.rx_errors, 1);
                    break;
                }
            };
            if got.outgoing {
                continue;
            }
            let room = HEADROOM + MAX_FRAME - at;
            let hdr = if self.vnet { VNET_LEN } else { 0 };
            if got.len > room || got.len < hdr {
                bump(&c.rx_errors, 1);
                continue;
            }
            let len = got.len - hdr;
            let vnet: Option<[u8; VNET_LEN]> = self.vnet.then(|| buf[at..HEADROOM].try_into().expect("10 bytes"));
            let mut slot = Slot::over(buf, HEADROOM, len);
            if let Some((tpid, tci)) = got.vlan {
                let mut f = slot.view();
                if !f.insert(12, 4) {
                    bump(&c.rx_errors, 1);
                    continue;
                }
                f.data_mut()[12..14].copy_from_slice(&tpid.to_be_bytes());
                f.data_mut()[14..16].copy_from_slice(&tci.to_be_bytes());
            }
            let gso = vnet.and_then(|v| {
                let size = u16::from_le_bytes([v[4], v[5]]);
                match v[1] & !0x80 {
                    0 => None,
                    1 | 4 => Some((GsoKind::Tcp, size)),
                    5 => Some((GsoKind::UdpL4, size)),
                    _ => Some((GsoKind::Tcp, 0)),
                }
            });
            match gso {
                None => {
                    let partial = match vnet {
                        Some(v) => v[0] & 1 != 0,
                        None => got.csum_not_ready,
                    };
                    if partial {
                        let _ = csum::complete(slot.view().data_mut());
                    }
                    slots[n] = slot;
                    n += 1;
                }
                Some((kind, size)) => match Segmenter::new(slot.data(), kind, size) {
                    Some(seg) => {
                        let (head, len) = (slot.head, slot.len);
                        // The super-frame's buffer leaves the batch's buffers while it is cut.
                        let buf = std::mem::take(&mut self.bufs[n]);
                        self.pending = Some(Pending { buf, head, len, seg, next: 0 });
                    }
                    None => bump(&c.rx_errors, 1),
                },
            }
        }
        n
    }

    /// Hands out segments of the pending super-frame (as the ring path does). False when the
    /// batch cannot take more.
    fn segments(&mut self, slots: &mut [Slot], n: &mut usize, c: &QueueCounters) -> bool {
        let Some(p) = self.pending.as_mut() else { return true };
        if self.arena.is_empty() {
            self.arena = vec![0; SEG_ARENA];
        }
        let frame = &p.buf[p.head..p.head + p.len];
        while p.next < p.seg.count() {
            if *n == slots.len() {
                return false;
            }
            let need = SEG_HEADROOM + p.seg.len(p.next);
            if need > self.arena.len() {
                bump(&c.rx_errors, 1);
                p.next = p.seg.count();
                break;
            }
            if self.arena_used + need > self.arena.len() {
                return false;
            }
            let out = &mut self.arena[self.arena_used..self.arena_used + need];
            let Some(len) = p.seg.write(frame, p.next, &mut out[SEG_HEADROOM..]) else {
                bump(&c.rx_errors, 1);
                p.next = p.seg.count();
                break;
            };
            slots[*n] = Slot::over(out, SEG_HEADROOM, len);
            *n += 1;
            self.arena_used += need;
            p.next += 1;
        }
        self.pending = None;
        true
    }

    /// The batch is done: its segment memory may be reused.
    pub(crate) fn release(&mut self) {
        self.arena_used = 0;
    }
}
