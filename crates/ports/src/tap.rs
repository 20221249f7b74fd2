//! `NAME:tap`: a tap device, as Open vSwitch's netdev datapath makes for a bridge's `internal`
//! ports — the interface the host's own stack sends into the switch through (`ip addr add ...
//! dev br0`). The port opens `/dev/net/tun` once per queue (a multi-queue tap without packet
//! information, made when missing): what the stack transmits on the device is read from the
//! queues, what the switch sends is written to them and enters the stack as received.
//!
//! The device lives while a descriptor of it is open: the port's queues, or a [`TapKeeper`]
//! (a detached queue that receives nothing), which a switch that restarts its datapath holds so
//! that the device — and the addresses and routes on it — outlive the restart. A device made
//! here starts administratively down, as OVS's internal ports do (`ip link set br0 up`).
//!
//! Counting: a frame read is `rx_packets`; a read error other than "nothing waiting" reads no
//! frame and is logged once; a write the kernel refuses (the device down: `EIO`, not logged;
//! anything else, logged once) is `tx_dropped`.

use std::os::fd::OwnedFd;

use crate::port::Staging;
use crate::ring::Slot;
use crate::stats::{bump, PortShared, QueueCounters};
use crate::{sys, PortError};

const HEADROOM: usize = 64;
const TAILROOM: usize = 64;
/// The longest frame a queue reads (a 64 KiB frame is the most a tap can hand over).
const MAX_FRAME: usize = 65_535;

/// Opens `queues` queues of tap device `name`.
pub(crate) fn open(name: &str, queues: usize) -> Result<(Vec<Rx>, Vec<Tx>), PortError> {
    let mut rx = Vec::new();
    let mut tx = Vec::new();
    for _ in 0..queues {
        let fd = sys::tap_open(name).map_err(|e| PortError::os(name, "opening the tap device", e))?;
        let fd2 = fd.try_clone().map_err(|e| PortError::os(name, "opening the tap device", e))?;
        rx.push(Rx { fd, bufs: (0..crate::BATCH).map(|_| Vec::new()).collect() });
        tx.push(Tx { fd: fd2, staging: Staging::new() });
    }
    Ok((rx, tx))
}

/// One receive queue.
pub(crate) struct Rx {
    fd: OwnedFd,
    bufs: Vec<Vec<u8>>,
}

impl Rx {
    pub(crate) fn fill(&mut self, slots: &mut [Slot], shared: &PortShared) -> usize {
        let mut n = 0;
        while n < slots.len() {
            let buf = &mut self.bufs[n];
            if buf.len() < HEADROOM + MAX_FRAME + TAILROOM {
                buf.resize(HEADROOM + MAX_FRAME + TAILROOM, 0);
            }
            match sys::read_nonblocking(&self.fd, &mut buf[HEADROOM..HEADROOM + MAX_FRAME]) {
                Ok(Some(len)) if len > 0 => {
                    slots[n] = Slot::over(buf, HEADROOM, len);
                    n += 1;
                }
                Ok(_) => break,
                Err(e) => {
                    // No frame was read: nothing to count; logged once per kind of error.
                    shared.error("reading the tap device", &e);
                    break;
                }
            }
        }
        n
    }
}

/// One transmit queue.
pub(crate) struct Tx {
    fd: OwnedFd,
    pub(crate) staging: Staging,
}

impl Tx {
    pub(crate) fn flush(&mut self, c: &QueueCounters, shared: &PortShared) {
        for frame in self.staging.take() {
            match sys::write(&self.fd, frame) {
                Ok(_) => {
                    bump(&c.tx_packets, 1);
                    bump(&c.tx_bytes, frame.len() as u64);
                }
                Err(e) => {
                    bump(&c.tx_dropped, 1);
                    // EIO: the device is down — the normal state of an unconfigured internal
                    // port, not a fault to log.
                    if e.raw_os_error() != Some(libc::EIO) {
                        shared.error("writing to the tap device", &e);
                    }
                }
            }
        }
    }
}

/// Keeps tap device `name` in existence (making it when missing) while it lives, without
/// taking any of its frames: a detached queue (module docs).
pub struct TapKeeper {
    _fd: OwnedFd,
}

impl TapKeeper {
    pub fn open(name: &str) -> Result<TapKeeper, PortError> {
        let fd = sys::tap_open(name).map_err(|e| PortError::os(name, "opening the tap device", e))?;
        sys::tap_detach(&fd).map_err(|e| PortError::os(name, "detaching the tap queue", e))?;
        Ok(TapKeeper { _fd: fd })
    }
}
