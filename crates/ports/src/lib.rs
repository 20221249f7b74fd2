//! # rqvs-ports: packet I/O for the switch
//!
//! Layer 7 of rqvs: frames in and out of real interfaces and capture files, in batches of
//! [`BATCH`] = 32 (the datapath's batch). This crate deals in raw bytes only; parsing a frame into
//! a `FlowKey` and applying actions belong to the layers above.
//!
//! ## A port and its queues
//! [`open`] turns a [`PortSpec`] (`p1`, `p1:afxdp`, `pcap-in:trace.pcap`, ...) into a [`Port`]
//! with `queues` receive queues and as many transmit queues — one of each per PMD thread.
//! [`Port::split`] hands them out: each PMD owns receive queue *i* of every port and transmit
//! queue *i* of every port, so no two threads ever touch the same queue and the packet path has
//! no lock. The [`PortHandle`] stays with the management thread for counters and link state.
//!
//! ```text
//!            ┌── RxQueue 0 ──► PMD 0 ──► TxQueue 0 of any port
//!  port p1 ──┤
//!            └── RxQueue 1 ──► PMD 1 ──► TxQueue 1 of any port
//! ```
//!
//! **Receive** ([`RxQueue::recv`]) never blocks and returns an [`RxBatch`]: up to 32 frames that
//! are *views into the port's own memory* (the TPACKET_V3 block, the AF_XDP UMEM chunk) — no copy.
//! The batch borrows the queue; dropping it gives the memory back to the kernel. While it lives
//! the caller reads frames ([`RxBatch::iter`]) and rewrites them in place ([`RxBatch::frame`] →
//! [`FrameMut`]), including length changes such as `strip_vlan` ([`FrameMut::remove`]) or pushing
//! a tag ([`FrameMut::insert`], into the headroom every port type leaves).
//!
//! **Transmit** ([`TxQueue::send`]) copies a byte slice into the queue's staging area (the AF_XDP
//! TX ring's UMEM chunk, a `sendmmsg` buffer, a pcap record); [`TxQueue::flush`] hands what is
//! staged to the kernel in one system call. A PMD sends each frame of a batch to its outputs,
//! then flushes every transmit queue it used, then drops the batch.
//!
//! ## Counting and failures
//! Every frame is counted once per side ([`QueueStats`]): `rx_packets` handed to the caller,
//! `rx_lost` dropped by the kernel before we saw them, `rx_errors` unusable; `tx_packets`
//! accepted by the kernel, `tx_dropped` not. A switch can therefore account for every frame:
//! `rx = tx + dropped + lost` (see [`stats`]). Once open, nothing in a port returns an error or
//! panics: failures are counted, and what matters to an operator — link down, link up, interface
//! gone, end of a capture, the first failure of each kind — is reported once as a [`PortEvent`]
//! through the [`EventHook`] of [`PortConfig::hook`]. A port whose interface is deleted drops what
//! it is given (counted) and the other ports keep working. The library never prints.
//!
//! ## Port types
//! - [`afpacket`]: AF_PACKET, TPACKET_V3 receive rings, `PACKET_FANOUT` hash over the queues,
//!   promiscuous, `sendmmsg` transmit with qdisc bypass; own transmissions never received.
//! - [`afxdp`]: AF_XDP sockets in copy mode, one per queue, with a five-instruction XDP program
//!   (redirect by receive queue into an XSKMAP) loaded and attached by this crate through
//!   `bpf(2)` and a `bpf_link` — no C libraries, no BPF toolchain; detached on drop.
//! - [`tap`]: `NAME:tap`, a tap device through `/dev/net/tun` (a queue per PMD), as OVS's
//!   netdev datapath makes for `internal` ports: the host's stack sends into the switch.
//! - [`pcap`]: `pcap-in:FILE` (pcap or pcapng, frames split over queues by [`flow_hash`]) and
//!   `pcap-out:FILE` — offline ports, so a switch runs with no interfaces at all.
//!
//! ## Safety
//! `unsafe` lives in two small modules: `sys` (system calls, `mmap`, the tap ioctls) and `ring` (memory shared
//! with the kernel; its module docs give the ownership rules that make the frame views sound).
//! Everything else is safe code.
//!
//! ## Namespaces
//! A port's sockets live in the network namespace of the thread that opened it. [`testnet`]
//! creates private namespaces and veth pairs for tests (the switch's tests use it too) and runs
//! code inside them; tests never touch the host's interfaces.

#![deny(unsafe_code)]

pub mod afpacket;
mod afpacket_latency;
pub mod afxdp;
pub mod csum;
mod error;
mod frame;
pub mod patch;
pub mod pcap;
pub mod pcap_stream;
mod port;
mod ring;
pub mod sender;
pub mod stats;
mod sys;
pub mod tap;
pub mod testnet;
pub mod xdp_sender;
pub mod xdp_sink;

pub use afpacket::{AfPacketConfig, RxMode};
pub use afxdp::{AfXdpConfig, XdpMode};
pub use error::PortError;
pub use frame::{FrameMut, MIN_HEADROOM};
pub use pcap::{flow_hash, PcapConfig};
pub use port::{
    open, open_frames, open_tap, FrameTap, Port, PortConfig, PortHandle, PortSpec, PortType, RxBatch, RxQueue, TxQueue,
};
pub use stats::{EventHook, EventKind, LinkState, PortEvent, PortStats, QueueStats};
pub use sys::is_root;
pub use tap::TapKeeper;

/// Frames per batch: at most this many per [`RxQueue::recv`], and a [`TxQueue`] flushes on its
/// own when this many are staged. Equal to the datapath's `BATCH`.
pub const BATCH: usize = 32;

#[cfg(test)]
mod tests {
    /// Queues go to PMD threads and handles to the management thread.
    #[test]
    fn queues_and_handles_cross_threads() {
        fn send<T: Send>() {}
        fn sync<T: Send + Sync>() {}
        send::<crate::Port>();
        send::<crate::RxQueue>();
        send::<crate::TxQueue>();
        sync::<crate::PortHandle>();
    }
}

/// The README's examples, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
