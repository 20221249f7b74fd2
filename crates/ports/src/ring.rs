//! Memory shared with the kernel: frame views into a mapped ring, the TPACKET_V3 receive ring's
//! block headers, and the four single-producer/single-consumer rings of an AF_XDP socket.
//!
//! With [`crate::sys`] this is one of the two modules allowed `unsafe`. The rules that make it
//! sound:
//!
//! - **Ownership by status.** A TPACKET_V3 block belongs to user space from the moment its status
//!   has `TP_STATUS_USER` (read with acquire ordering) until we store `TP_STATUS_KERNEL` (release
//!   ordering). An AF_XDP descriptor belongs to the side that consumed it from a ring until it
//!   produces it onto another. Frame views ([`Slot`]) are made only over memory user space owns,
//!   and the backends release that memory only when no view is alive (a batch's `Drop`).
//! - **Disjointness.** Slots of one batch cover disjoint byte ranges (different frames of a block,
//!   different UMEM chunks), so the `&mut [u8]` views built from them never alias.
//! - **Bounds.** Every offset the kernel gives us is checked against the mapping before it is
//!   used; a bad one is reported as `None` (the caller counts an error), never read.
//! - **Lifetime.** Slots point into an [`Mmap`] (or a heap buffer) owned by the same queue that owns
//!   the slots, so the memory outlives them.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU32, Ordering};

use crate::frame::FrameMut;
use crate::sys::Mmap;

/// One received frame: a window `[head, head + len)` inside a buffer of `cap` bytes at `ptr` that
/// user space owns until the batch is released. Never leaves the crate.
pub(crate) struct Slot {
    ptr: *mut u8,
    cap: usize,
    pub(crate) head: usize,
    pub(crate) len: usize,
}

// SAFETY: a slot is a description of memory its queue owns; moving it with the queue to another
// thread moves that ownership along.
unsafe impl Send for Slot {}

impl Slot {
    pub(crate) const EMPTY: Slot = Slot { ptr: std::ptr::null_mut(), cap: 0, head: 0, len: 0 };

    /// A slot over a heap buffer (pcap ports, afpacket's segments): sound as long as the buffer
    /// is not touched or reallocated while the slot is used, which the pcap queue and the
    /// afpacket segment memory (allocated once, reused only after the batch is released)
    /// guarantee.
    pub(crate) fn over(buf: &mut [u8], head: usize, len: usize) -> Slot {
        let cap = buf.len();
        Slot { ptr: buf.as_mut_ptr(), cap, head: head.min(cap), len: len.min(cap - head.min(cap)) }
    }

    /// The frame's bytes.
    pub(crate) fn data(&self) -> &[u8] {
        if self.ptr.is_null() {
            return &[];
        }
        // SAFETY: a non-null slot covers `cap` bytes that user space owns while the slot is in a
        // live batch (module rules), and head + len <= cap is kept by every writer of the slot.
        let all = unsafe { std::slice::from_raw_parts(self.ptr, self.cap) };
        all.get(self.head..self.head + self.len).unwrap_or(&[])
    }

    /// A mutable view of the frame and its head/tail room.
    pub(crate) fn view(&mut self) -> FrameMut<'_> {
        if self.ptr.is_null() {
            return FrameMut::new(&mut [], &mut self.head, &mut self.len);
        }
        // SAFETY: as in `data`, and `&mut self` makes this the only view of this slot; slots of a
        // batch are disjoint, so views of different slots do not alias.
        let all = unsafe { std::slice::from_raw_parts_mut(self.ptr, self.cap) };
        FrameMut::new(all, &mut self.head, &mut self.len)
    }
}

/// Reads a native-endian u32 at `off` in a mapping, bounds-checked.
fn read_u32(map: &Mmap, off: usize) -> Option<u32> {
    if off.checked_add(4)? > map.len() {
        return None;
    }
    // SAFETY: in bounds (checked); the kernel does not write this word while user space owns the
    // surrounding block or descriptor (module rules); read unaligned to need no alignment proof.
    Some(unsafe { std::ptr::read_unaligned(map.ptr().add(off).cast::<u32>()) })
}

fn read_u16(map: &Mmap, off: usize) -> Option<u16> {
    if off.checked_add(2)? > map.len() {
        return None;
    }
    // SAFETY: as in `read_u32`.
    Some(unsafe { std::ptr::read_unaligned(map.ptr().add(off).cast::<u16>()) })
}

/// An atomic u32 the kernel shares with us at `off` (a block status, a ring index).
fn atomic_at(map: &Mmap, off: usize) -> Option<&AtomicU32> {
    if off.checked_add(4)? > map.len() || (map.ptr() as usize + off) & 3 != 0 {
        return None;
    }
    // SAFETY: in bounds and 4-aligned (checked); the word lives as long as the mapping, which
    // outlives the returned reference (it borrows `map`); the kernel accesses it atomically too.
    Some(unsafe { &*map.ptr().add(off).cast::<AtomicU32>() })
}

// ---- TPACKET_V3 -------------------------------------------------------------------------------

/// `struct tpacket_block_desc`: version, offset_to_priv, then `tpacket_hdr_v1`.
const BLOCK_STATUS: usize = 8;
const BLOCK_NUM_PKTS: usize = 12;
const BLOCK_FIRST_PKT: usize = 16;
/// `sizeof(struct tpacket3_hdr)` = 48, then `struct sockaddr_ll` (20 bytes).
pub(crate) const V3_HDR_LEN: usize = 48;
pub(crate) const V3_HEADROOM_START: usize = V3_HDR_LEN + 20;
const SLL_PKTTYPE: usize = V3_HDR_LEN + 10;

/// The fields of one `tpacket3_hdr` the receive path needs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct V3Frame {
    pub(crate) next_offset: u32,
    pub(crate) snaplen: u32,
    pub(crate) len: u32,
    pub(crate) status: u32,
    pub(crate) mac: u16,
    pub(crate) vlan_tci: u32,
    pub(crate) vlan_tpid: u16,
    pub(crate) pkttype: u8,
}

/// A TPACKET_V3 receive ring: `blocks` blocks of `block_size` bytes.
pub(crate) struct V3Ring {
    map: Mmap,
    block_size: usize,
    blocks: usize,
}

impl V3Ring {
    pub(crate) fn new(map: Mmap, block_size: usize, blocks: usize) -> Option<V3Ring> {
        (block_size.checked_mul(blocks)? <= map.len()).then_some(V3Ring { map, block_size, blocks })
    }

    pub(crate) fn blocks(&self) -> usize {
        self.blocks
    }

    /// `Some((num_pkts, offset_to_first_pkt))` when block `b` belongs to user space.
    pub(crate) fn user_block(&self, b: usize) -> Option<(u32, u32)> {
        let base = b.checked_mul(self.block_size)?;
        let status = atomic_at(&self.map, base + BLOCK_STATUS)?.load(Ordering::Acquire);
        if status & libc::TP_STATUS_USER == 0 {
            return None;
        }
        Some((read_u32(&self.map, base + BLOCK_NUM_PKTS)?, read_u32(&self.map, base + BLOCK_FIRST_PKT)?))
    }

    /// Hands block `b` back to the kernel. No slot into it may be alive.
    pub(crate) fn release_block(&self, b: usize) {
        if let Some(status) = b.checked_mul(self.block_size).and_then(|base| atomic_at(&self.map, base + BLOCK_STATUS))
        {
            status.store(libc::TP_STATUS_KERNEL, Ordering::Release);
        }
    }

    /// The header of the frame at `off` in block `b`, if it lies inside the block.
    pub(crate) fn frame(&self, b: usize, off: usize) -> Option<V3Frame> {
        if off.checked_add(V3_HEADROOM_START)? > self.block_size {
            return None;
        }
        let at = b.checked_mul(self.block_size)? + off;
        let m = &self.map;
        Some(V3Frame {
            next_offset: read_u32(m, at)?,
            snaplen: read_u32(m, at + 12)?,
            len: read_u32(m, at + 16)?,
            status: read_u32(m, at + 20)?,
            mac: read_u16(m, at + 24)?,
            vlan_tci: read_u32(m, at + 32)?,
            vlan_tpid: read_u16(m, at + 36)?,
            pkttype: *self.byte(at + SLL_PKTTYPE)?,
        })
    }

    /// The virtio-net header (10 bytes) the kernel wrote in front of the frame at `off` of
    /// block `b` whose MAC header is `mac` bytes into the frame (`PACKET_VNET_HDR` sockets).
    pub(crate) fn vnet_header(&self, b: usize, off: usize, mac: usize) -> Option<[u8; 10]> {
        let frame = b.checked_mul(self.block_size)?.checked_add(off)?;
        let at = frame.checked_add(mac.checked_sub(10)?)?;
        if off.checked_add(mac)? > self.block_size || mac < V3_HEADROOM_START + 10 {
            return None;
        }
        let mut h = [0u8; 10];
        for (i, x) in h.iter_mut().enumerate() {
            *x = *self.byte(at + i)?;
        }
        Some(h)
    }

    fn byte(&self, at: usize) -> Option<&u8> {
        if at >= self.map.len() {
            return None;
        }
        // SAFETY: in bounds (checked); user space owns the block (callers only read frames of
        // user blocks), so the kernel does not write it.
        Some(unsafe { &*self.map.ptr().add(at) })
    }

    /// A slot over bytes `[start, end)` of block `b` (offsets within the block) whose frame starts
    /// `head` bytes in. Block `b` must belong to user space and the range must not overlap another
    /// live slot (callers give each frame its own `[headroom start, next frame)` range).
    pub(crate) fn slot(&self, b: usize, start: usize, end: usize, head: usize, len: usize) -> Option<Slot> {
        if start > end || end > self.block_size || head.checked_add(len)? > end - start {
            return None;
        }
        let base = b.checked_mul(self.block_size)?.checked_add(start)?;
        if base.checked_add(end - start)? > self.map.len() {
            return None;
        }
        // SAFETY: `base` is inside the mapping (checked above), so the offset pointer is too.
        let ptr = unsafe { self.map.ptr().add(base) };
        Some(Slot { ptr, cap: end - start, head, len })
    }
}

// ---- AF_XDP -----------------------------------------------------------------------------------

/// One of an AF_XDP socket's rings: `size` entries (a power of two) of `entry` bytes each, with
/// the producer, consumer and flags words at the offsets the kernel gave.
pub(crate) struct XdpRing {
    map: Mmap,
    producer: usize,
    consumer: usize,
    flags: usize,
    desc: usize,
    size: u32,
    entry: usize,
}

impl XdpRing {
    /// Checks that the offsets and `size` entries of `entry` bytes lie inside `map`.
    pub(crate) fn new(map: Mmap, off: &libc::xdp_ring_offset, size: u32, entry: usize) -> Option<XdpRing> {
        let ring = XdpRing {
            producer: usize::try_from(off.producer).ok()?,
            consumer: usize::try_from(off.consumer).ok()?,
            flags: usize::try_from(off.flags).ok()?,
            desc: usize::try_from(off.desc).ok()?,
            size,
            entry,
            map,
        };
        let descs_end = ring.desc.checked_add((size as usize).checked_mul(entry)?)?;
        let ok = size.is_power_of_two()
            && descs_end <= ring.map.len()
            && atomic_at(&ring.map, ring.producer).is_some()
            && atomic_at(&ring.map, ring.consumer).is_some()
            && atomic_at(&ring.map, ring.flags).is_some()
            && (ring.map.ptr() as usize + ring.desc) & 7 == 0;
        ok.then_some(ring)
    }

    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    fn word(&self, off: usize) -> &AtomicU32 {
        // The offsets were checked in `new`; a failure here cannot happen, and would read as 0.
        static ZERO: AtomicU32 = AtomicU32::new(0);
        atomic_at(&self.map, off).unwrap_or(&ZERO)
    }

    pub(crate) fn load_producer(&self) -> u32 {
        self.word(self.producer).load(Ordering::Acquire)
    }
    pub(crate) fn load_consumer(&self) -> u32 {
        self.word(self.consumer).load(Ordering::Acquire)
    }
    /// Publishes entries written so far (release: the kernel sees them before the index).
    pub(crate) fn store_producer(&self, v: u32) {
        self.word(self.producer).store(v, Ordering::Release)
    }
    /// Returns consumed entries to the kernel (release: our reads of them happen before).
    pub(crate) fn store_consumer(&self, v: u32) {
        self.word(self.consumer).store(v, Ordering::Release)
    }
    pub(crate) fn needs_wakeup(&self) -> bool {
        self.word(self.flags).load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    fn entry_ptr(&self, idx: u32) -> *mut u8 {
        let i = (idx & (self.size - 1)) as usize;
        // SAFETY: i < size and desc + size * entry <= map.len() (checked in `new`).
        unsafe { self.map.ptr().add(self.desc + i * self.entry) }
    }

    /// Reads the `xdp_desc` at ring index `idx` (rx/tx rings). Only for entries this side owns.
    pub(crate) fn read_desc(&self, idx: u32) -> libc::xdp_desc {
        // SAFETY: in bounds and 8-aligned (checked in `new`, entry = 16); the entry was produced
        // by the kernel and not yet consumed, so the kernel does not write it now.
        unsafe { std::ptr::read(self.entry_ptr(idx).cast::<libc::xdp_desc>()) }
    }
    /// Writes the `xdp_desc` at ring index `idx`, an entry reserved but not yet produced.
    pub(crate) fn write_desc(&self, idx: u32, d: libc::xdp_desc) {
        // SAFETY: in bounds and aligned (as above); the kernel does not read the entry before
        // the producer index passes it.
        unsafe { std::ptr::write(self.entry_ptr(idx).cast::<libc::xdp_desc>(), d) }
    }
    /// Reads the u64 address at ring index `idx` (completion ring).
    pub(crate) fn read_addr(&self, idx: u32) -> u64 {
        // SAFETY: as `read_desc`, entry = 8.
        unsafe { std::ptr::read(self.entry_ptr(idx).cast::<u64>()) }
    }
    /// Writes the u64 address at ring index `idx` (fill ring).
    pub(crate) fn write_addr(&self, idx: u32, addr: u64) {
        // SAFETY: as `write_desc`, entry = 8.
        unsafe { std::ptr::write(self.entry_ptr(idx).cast::<u64>(), addr) }
    }
}

/// The packet memory of an AF_XDP socket: `chunks` chunks of `chunk_size` bytes (aligned mode).
pub(crate) struct Umem {
    map: Mmap,
    chunk_size: usize,
}

impl Umem {
    pub(crate) fn new(map: Mmap, chunk_size: usize) -> Umem {
        Umem { map, chunk_size }
    }

    /// A slot over the chunk holding the rx descriptor `(addr, len)`, if it lies in the UMEM.
    /// The chunk must belong to user space (consumed from the rx ring, not yet refilled).
    pub(crate) fn rx_slot(&self, addr: u64, len: u32) -> Option<Slot> {
        let addr = usize::try_from(addr).ok()?;
        let chunk = addr - addr % self.chunk_size;
        let head = addr - chunk;
        let len = len as usize;
        if chunk.checked_add(self.chunk_size)? > self.map.len() || head.checked_add(len)? > self.chunk_size {
            return None;
        }
        // SAFETY: chunk + chunk_size <= map.len() (checked).
        let ptr = unsafe { self.map.ptr().add(chunk) };
        Some(Slot { ptr, cap: self.chunk_size, head, len })
    }

    /// Copies `frame` to the start of the chunk at `addr` (a tx chunk user space owns: free, or
    /// returned by the completion ring). False if it does not fit.
    pub(crate) fn write(&self, addr: u64, frame: &[u8]) -> bool {
        let Ok(addr) = usize::try_from(addr) else { return false };
        if frame.len() > self.chunk_size || addr % self.chunk_size != 0 || addr + self.chunk_size > self.map.len() {
            return false;
        }
        // SAFETY: the chunk is in bounds (checked) and owned by user space (a free tx chunk, which
        // no view and no kernel ring refers to); `copy` is a memmove, so even a source inside the
        // UMEM is fine.
        unsafe { std::ptr::copy(frame.as_ptr(), self.map.ptr().add(addr), frame.len()) };
        true
    }
}

/// Where a TPACKET_V2 transmit slot's frame starts: the kernel reads it at
/// `TPACKET2_HDRLEN - sizeof(struct sockaddr_ll)`, the aligned header's size (32).
pub(crate) const TX_DATA: usize = 32;

/// A TPACKET_V2 transmit ring (`PACKET_TX_RING`): `slots` slots of `frame_size` bytes, each a
/// `tpacket2_hdr` then the frame at [`TX_DATA`].
///
/// Ownership by status, as the receive ring's blocks: a slot whose status (read with acquire
/// ordering) is `TP_STATUS_AVAILABLE` or `TP_STATUS_WRONG_FORMAT` belongs to user space, which may
/// write its frame and length; storing `TP_STATUS_SEND_REQUEST` (release ordering) hands it to
/// the kernel until the kernel stores `TP_STATUS_AVAILABLE` again. The writers here check the
/// status first and never touch a slot the kernel owns.
pub(crate) struct TxRing {
    map: Mmap,
    slots: usize,
    frame_size: usize,
    /// The socket has `PACKET_VNET_HDR`: each frame is preceded by a `virtio_net_hdr` (10 bytes).
    vnet: bool,
}

/// The size of a `virtio_net_hdr`.
pub(crate) const VNET_HDR: usize = 10;

impl TxRing {
    /// A ring over `map`, which must hold `slots * frame_size` bytes; `frame_size` a multiple of
    /// 16 (TPACKET_ALIGNMENT) and more than [`TX_DATA`] (the kernel checks the same when the ring
    /// is set up).
    pub(crate) fn new(map: Mmap, slots: usize, frame_size: usize, vnet: bool) -> Option<TxRing> {
        let fits = slots.checked_mul(frame_size).is_some_and(|n| n <= map.len());
        (fits && slots > 0 && frame_size > TX_DATA + VNET_HDR && frame_size.is_multiple_of(16)).then_some(TxRing {
            map,
            slots,
            frame_size,
            vnet,
        })
    }

    pub(crate) fn slots(&self) -> usize {
        self.slots
    }

    /// The largest frame a slot holds.
    pub(crate) fn max_frame(&self) -> usize {
        self.frame_size - TX_DATA - if self.vnet { VNET_HDR } else { 0 }
    }

    fn status_word(&self, i: usize) -> &AtomicU32 {
        assert!(i < self.slots, "tx slot {i} of {}", self.slots);
        // SAFETY: slot i starts at i * frame_size < map.len() (checked in `new`), a multiple of
        // 16, so the u32 status at its start is in bounds and aligned; the kernel and we only
        // ever access it atomically.
        unsafe { &*self.map.ptr().add(i * self.frame_size).cast::<AtomicU32>() }
    }

    /// The slot's status (acquire: a slot seen available has its last send completed).
    pub(crate) fn status(&self, i: usize) -> u32 {
        self.status_word(i).load(Ordering::Acquire)
    }

    /// Writes `frame` into slot `i`, which must be user space's (`status` available or wrong
    /// format); false (nothing written) when it is not, or when the frame does not fit.
    pub(crate) fn fill(&mut self, i: usize, frame: &[u8]) -> bool {
        let st = self.status(i);
        if (st != libc::TP_STATUS_AVAILABLE && st != libc::TP_STATUS_WRONG_FORMAT) || frame.len() > self.max_frame() {
            return false;
        }
        let base = i * self.frame_size;
        let vnet = if self.vnet { VNET_HDR } else { 0 };
        // With a vnet header, `hdr_len` = the whole frame: the kernel copies that much into the
        // skb's linear part (tpacket_snd's `copylen`) instead of attaching the rest of the slot
        // as a page fragment, which a veth would copy again into a fresh page (skb_copy_ubufs)
        // when the skb crosses into the peer's namespace. No offload asked (flags, gso 0).
        let mut hdr = [0u8; VNET_HDR];
        hdr[2..4].copy_from_slice(&(frame.len() as u16).to_le_bytes());
        // SAFETY: slot i is user space's (status checked above, module rules) and
        // [base, base + frame_size) lies inside the mapping (`new`); `&mut self` means no other
        // view of the ring's bytes is alive. tp_len is the u32 at offset 4 of the header.
        unsafe {
            let slot = std::slice::from_raw_parts_mut(self.map.ptr().add(base), self.frame_size);
            slot[TX_DATA..TX_DATA + vnet].copy_from_slice(&hdr[..vnet]);
            slot[TX_DATA + vnet..TX_DATA + vnet + frame.len()].copy_from_slice(frame);
            slot[4..8].copy_from_slice(&((vnet + frame.len()) as u32).to_ne_bytes());
        }
        true
    }

    /// Hands slot `i` to the kernel (its frame is sent at the next kick).
    pub(crate) fn request(&self, i: usize) {
        self.status_word(i).store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
    }

    /// Takes back a slot the kernel refused (`TP_STATUS_WRONG_FORMAT`), as available.
    pub(crate) fn clear(&self, i: usize) {
        let _ = self.status_word(i).compare_exchange(
            libc::TP_STATUS_WRONG_FORMAT,
            libc::TP_STATUS_AVAILABLE,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }
}
