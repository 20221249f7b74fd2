//! A traffic generator: a capture's frames sent out of an interface as fast as one core can (or
//! at a set rate), looping — the sender of the switch benchmarks (`rqvs send`).
//!
//! **Why a TX ring here, when the ports send with `sendmmsg`** (see [`crate::afpacket`]): a port
//! forwards frames it has just received, each different, and must know per frame what was sent; a
//! sender sends the same few thousand frames again and again. With `PACKET_TX_RING` the frames are
//! written into the ring's slots once, and each round only flips a slot's status and kicks the
//! kernel: no copy, no `mmsghdr`s, the kernel walks the ring in one call. Slot `i` always holds
//! frame `i mod n` when the ring's slot count is a multiple of the capture's frame count
//! ([`ring_slots`] picks such a count when it can), so a slot is never rewritten. Otherwise a
//! slot is rewritten when its turn comes with another frame; a veth frees a slot when the skb is
//! orphaned, which can be before the peer has read it (the afpacket module's note), but the
//! frames in flight are bounded by the peer's backlog (`net.core.netdev_max_backlog`, 1,000 by
//! default) and the ring has at least 16 times that many slots, so a slot comes round again long
//! after its last frame was read.
//!
//! What was sent is what the interface counted: the report gives the interface's own
//! `tx_packets`/`tx_dropped` over the run (a veth counts in `tx_dropped` what its peer's backlog
//! refused) next to the frames handed to the kernel.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::PortError;
use crate::ring::{TxRing, TX_DATA, VNET_HDR};
use crate::sys::{self, Mmap};

/// How a run ends and how fast it goes. The run stops at the first limit reached (or when the
/// `stop` flag passed to [`Sender::run`] is set).
#[derive(Clone, Debug, Default)]
pub struct SendOptions {
    /// Frames per second; `None` is as fast as the kernel takes them.
    pub pps: Option<f64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop after this many frames.
    pub count: Option<u64>,
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SendReport {
    /// Frames the kernel accepted from the ring.
    pub frames: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Frames the kernel refused (`TP_STATUS_WRONG_FORMAT`: longer than the interface's MTU).
    pub refused: u64,
    /// Wall-clock seconds from the first frame to the last one's completion.
    pub seconds: f64,
    /// Kicks (system calls) made.
    pub kicks: u64,
    /// The interface's `tx_packets` over the run (None when sysfs is not readable).
    pub if_tx_packets: Option<u64>,
    /// The interface's `tx_dropped` over the run.
    pub if_tx_dropped: Option<u64>,
}

impl SendReport {
    /// Frames per second handed to the kernel.
    pub fn pps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.frames as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// Slots the ring gets for `frames` frames stored `per_block` to a ring block: a multiple of
/// both in 16K..=64K when one exists (no slot is ever rewritten), else 16K.
pub fn ring_slots(frames: usize, per_block: usize) -> usize {
    const MIN: usize = 16 * 1024;
    const MAX: usize = 64 * 1024;
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    if frames == 0 || per_block == 0 || frames > MAX {
        return MIN;
    }
    let unit = frames / gcd(frames, per_block) * per_block;
    let m = MIN.div_ceil(unit) * unit;
    if m <= MAX {
        m
    } else {
        MIN
    }
}

/// An AF_PACKET socket with a transmit ring, bound to one interface, holding the frames to send.
pub struct Sender {
    iface: String,
    fd: OwnedFd,
    ring: TxRing,
    frames: Vec<Vec<u8>>,
    /// Which frame each slot holds (`u32::MAX`: none yet).
    slot_frame: Vec<u32>,
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender").field("iface", &self.iface).field("slots", &self.ring.slots()).finish()
    }
}

impl Sender {
    /// Opens `iface` (in this network namespace) for sending `frames` (at least one, each no
    /// longer than 64 KiB minus the slot header), with [`ring_slots`] slots.
    pub fn open(iface: &str, frames: Vec<Vec<u8>>) -> Result<Sender, PortError> {
        if frames.is_empty() {
            return Err(PortError::Spec(format!("{iface}: no frames to send")));
        }
        let longest = frames.iter().map(Vec::len).max().unwrap_or(0);
        let frame_size = (longest + TX_DATA + VNET_HDR).next_power_of_two().max(2048);
        if frame_size > 1 << 16 {
            return Err(PortError::Spec(format!(
                "{iface}: a frame of {longest} bytes; the sender takes frames up to {} bytes",
                (1 << 16) - TX_DATA - VNET_HDR
            )));
        }
        let err = |op: &str| {
            let op = op.to_string();
            move |e: io::Error| PortError::os(iface, &op, e)
        };
        let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW, 0).map_err(|e| PortError::packet_socket(iface, e))?;
        let ifindex = sys::interface_index(&fd, iface).map_err(err("interface index"))?;
        sys::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_VERSION, &1 /* TPACKET_V2 */)
            .map_err(err("PACKET_VERSION"))?;
        // A virtio-net header before each frame lets the kernel copy the whole frame into the
        // skb (see `TxRing::fill`); refused by old kernels, then frames go as page fragments.
        let vnet = sys::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_VNET_HDR, &1).is_ok();
        // Straight to the driver: a veth's qdisc is noqueue anyway; on a NIC it skips the lock.
        sys::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &1).map_err(err("PACKET_QDISC_BYPASS"))?;
        let block_size = frame_size.max(4096);
        let per_block = block_size / frame_size;
        let slots = ring_slots(frames.len(), per_block);
        let blocks = slots / per_block;
        let req = libc::tpacket_req {
            tp_block_size: block_size as u32,
            tp_block_nr: blocks as u32,
            tp_frame_size: frame_size as u32,
            tp_frame_nr: slots as u32,
        };
        sys::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_TX_RING, &req).map_err(err("PACKET_TX_RING"))?;
        let map = Mmap::shared(&fd, block_size * blocks, 0).map_err(err("mmap of the TX ring"))?;
        sys::bind_packet(&fd, ifindex, 0).map_err(err("bind"))?;
        let ring = TxRing::new(map, slots, frame_size, vnet)
            .ok_or_else(|| PortError::Spec(format!("{iface}: TX ring of {slots} slots of {frame_size} bytes")))?;
        Ok(Sender { iface: iface.to_string(), fd, ring, slot_frame: vec![u32::MAX; slots], frames })
    }

    /// The ring's slot count.
    pub fn slots(&self) -> usize {
        self.ring.slots()
    }

    /// Sends the frames in order, looping, until a limit of `opts` or `stop`.
    pub fn run(&mut self, opts: &SendOptions, stop: &AtomicBool) -> Result<SendReport, PortError> {
        const BURST: u64 = 256;
        let counters = |name: &str| read_counter(&self.iface, name);
        let (tx0, drop0) = (counters("tx_packets"), counters("tx_dropped"));
        let slots = self.ring.slots();
        let n = self.frames.len();
        let mut report = SendReport::default();
        let (mut slot, mut next) = (0usize, 0usize);
        // Slots handed to the kernel (`queued`) and seen back (`done`), both counted from the start.
        let (mut queued, mut done) = (0u64, 0usize);
        let start = Instant::now();
        let limit = opts.count.unwrap_or(u64::MAX);
        // When the run reached its end (a limit or `stop`): the kernel gets 2 s from then to
        // hand back what it holds.
        let mut ended: Option<Instant> = None;
        loop {
            let now = Instant::now();
            let over = stop.load(Ordering::Relaxed)
                || queued >= limit
                || opts.duration.is_some_and(|d| now.duration_since(start) >= d);
            // Slots the kernel has finished with, in ring order.
            while (done as u64) < queued {
                let i = done % slots;
                let st = self.ring.status(i);
                if st == libc::TP_STATUS_WRONG_FORMAT {
                    report.refused += 1;
                    self.ring.clear(i);
                } else if st != libc::TP_STATUS_AVAILABLE {
                    break;
                } else {
                    report.frames += 1;
                    report.bytes += self.frames[self.slot_frame[i] as usize].len() as u64;
                }
                done += 1;
            }
            if over {
                if (done as u64) == queued {
                    break;
                }
                // Let the kernel finish what it holds (a blocked peer drops; it never holds on).
                if now.duration_since(*ended.get_or_insert(now)) > Duration::from_secs(2) {
                    return Err(PortError::Spec(format!(
                        "{}: {} frames still in the TX ring 2 s after the end",
                        self.iface,
                        queued - done as u64
                    )));
                }
                self.kick(&mut report)?;
                std::thread::yield_now();
                continue;
            }
            let budget = match opts.pps {
                Some(pps) => ((now.duration_since(start).as_secs_f64() * pps) as u64 + 1).saturating_sub(queued),
                None => BURST,
            }
            .min(BURST)
            .min(limit - queued);
            let mut filled = 0u64;
            while filled < budget && queued - (done as u64) < slots as u64 {
                if self.slot_frame[slot] != next as u32 {
                    if !self.ring.fill(slot, &self.frames[next]) {
                        break;
                    }
                    self.slot_frame[slot] = next as u32;
                }
                self.ring.request(slot);
                slot = (slot + 1) % slots;
                next = (next + 1) % n;
                queued += 1;
                filled += 1;
            }
            if filled > 0 || queued > done as u64 {
                self.kick(&mut report)?;
            } else if opts.pps.is_some() {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        report.seconds = start.elapsed().as_secs_f64();
        let delta = |a: Option<u64>, b: Option<u64>| Some(b?.saturating_sub(a?));
        report.if_tx_packets = delta(tx0, counters("tx_packets"));
        report.if_tx_dropped = delta(drop0, counters("tx_dropped"));
        Ok(report)
    }

    /// Tells the kernel to send every requested slot (without waiting for the sends to end).
    fn kick(&self, report: &mut SendReport) -> Result<(), PortError> {
        report.kicks += 1;
        match sys::kick_tx(&self.fd) {
            Ok(()) => Ok(()),
            // The device or the socket's send buffer is full: the slots stay requested and go
            // at the next kick.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::ENOBUFS)) => Ok(()),
            Err(e) => Err(PortError::os(&self.iface, "send (TX ring)", e)),
        }
    }
}

/// An interface counter from sysfs (this process's network namespace's view).
fn read_counter(iface: &str, name: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/sys/class/net/{iface}/statistics/{name}")).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_slots_are_a_multiple_of_the_frames_when_they_can_be() {
        assert_eq!(ring_slots(1, 2), 16 * 1024);
        assert_eq!(ring_slots(1000, 2), 17_000);
        assert_eq!(ring_slots(1001, 2), 18_018);
        assert_eq!(ring_slots(1001, 1), 17_017);
        assert_eq!(ring_slots(20_000, 2), 20_000);
        assert_eq!(ring_slots(50_001, 1), 50_001);
        // No multiple of both fits: rewritten slots.
        assert_eq!(ring_slots(50_001, 2), 16 * 1024);
        assert_eq!(ring_slots(70_000, 2), 16 * 1024);
        assert_eq!(ring_slots(0, 2), 16 * 1024);
        for (f, b) in [(1, 1), (3, 2), (999, 2), (16_385, 1), (33_000, 2)] {
            let s = ring_slots(f, b);
            assert!(s.is_multiple_of(b) && (16 * 1024..=64 * 1024).contains(&s), "{f} {b}: {s}");
        }
    }
}
