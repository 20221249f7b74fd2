//! `patch` ports (Open vSwitch's `type=patch`, `options:peer=NAME`): two ports, usually on two
//! bridges of one process, each handing the frames sent to it to the other — a frame sent on
//! `a` (peer `b`) is received on `b`. No device, no kernel: each end's receive queues are
//! in-memory queues (a mailbox per end) found by the port's name in a process-wide registry, so the
//! two ends can be opened, closed and opened again independently (a bridge's switch restarts,
//! a port is deleted and added again).
//!
//! - **Queues.** An end has a queue per receive queue (a queue per PMD thread): transmit queue
//!   *i* of `a` fills receive queue *i* (modulo the peer's count) of `b`. With the bridges on
//!   shared PMD threads both are the same thread's; nothing here depends on it (a queue is a
//!   `Mutex`, held for one batch's push or pop).
//! - **Bounds.** A queue holds at most [`DEPTH`] frames; a frame sent to a full queue, or to a
//!   peer that is not open (not configured, or its bridge not running), is dropped and counted
//!   in the sending end's `tx_dropped`. Frames waiting when a receiving end is dropped go with
//!   it.
//! - **Counting.** The sending end counts `tx_packets`/`tx_bytes` (or `tx_dropped`), the
//!   receiving end `rx_packets`/`rx_bytes`, as for any port.
//! - **Loops.** A frame carries the number of patch crossings it has made: a queue's entry is
//!   the frame and its count, this crossing included — the count it was sent with
//!   ([`crate::TxQueue::send_after`]: the switch passes on what the frame came in with,
//!   [`crate::RxBatch::crossings`]) plus one. This crate only carries the count; the switch
//!   drops a frame past its bound (`rqvs_switch::crossing`), so a loop of patch ports ends
//!   as a translation's loop does instead of circulating for as long as the queues have room.
//! - **What this is, against OVS.** OVS (since 1.10) crosses a patch port inside the
//!   translation: one megaflow carries both bridges' actions. rqvs does too for an `output:N`,
//!   a group bucket, `flood`, `all` and `NORMAL` of an ORIG/CCACHE bridge
//!   (`rqvs_ofproto::crossing`; no frame passes these queues then). What the translation does
//!   not cross (CFLOWS bridges, a peer table being committed to) is a hop through these queues, as OVS's patch
//!   *vport* did before 1.10: the frame as it leaves the first bridge is received by the
//!   second, classified by that bridge's own tables and megaflows. The forwarding is the same;
//!   the megaflows, counters and traces are each bridge's (README, docs/ovs-dropin.md).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::port::Staging;
use crate::ring::Slot;
use crate::stats::{bump, PortShared, QueueCounters};

/// Frames one receive queue of a patch port holds at most (the rest are dropped).
pub const DEPTH: usize = 4096;

/// Room before and after a received frame (as the other in-memory ports leave).
const HEADROOM: usize = 64;
const TAILROOM: usize = 64;

/// A frame waiting in a patch queue and the patch crossings it has made, this one included
/// (module docs, *Loops*).
type Entry = (Vec<u8>, u8);

/// The frames waiting for one end, by receive queue.
pub(crate) struct Mailbox {
    queues: Vec<Mutex<VecDeque<Entry>>>,
}

fn registry() -> &'static Mutex<HashMap<String, Weak<Mailbox>>> {
    static R: OnceLock<Mutex<HashMap<String, Weak<Mailbox>>>> = OnceLock::new();
    R.get_or_init(Mutex::default)
}

/// The open end named `name`, if any.
fn lookup(name: &str) -> Option<Arc<Mailbox>> {
    registry().lock().unwrap_or_else(|e| e.into_inner()).get(name).and_then(Weak::upgrade)
}

/// Opens end `name`'s mailbox with `queues` receive queues: from now on frames sent to `name`
/// arrive there (an end opened earlier under that name receives nothing more).
pub(crate) fn open_mailbox(name: &str, queues: usize) -> Arc<Mailbox> {
    let m = Arc::new(Mailbox { queues: (0..queues.max(1)).map(|_| Mutex::default()).collect() });
    let mut r = registry().lock().unwrap_or_else(|e| e.into_inner());
    r.retain(|_, w| w.strong_count() > 0);
    r.insert(name.to_string(), Arc::downgrade(&m));
    m
}

/// One receive queue of a patch end.
pub(crate) struct Rx {
    mine: Arc<Mailbox>,
    index: usize,
    bufs: Vec<Vec<u8>>,
    /// The crossings of each frame of the last batch.
    crossings: [u8; crate::BATCH],
}

impl Rx {
    pub(crate) fn new(mine: Arc<Mailbox>, index: usize) -> Rx {
        Rx { mine, index, bufs: (0..crate::BATCH).map(|_| Vec::new()).collect(), crossings: [0; crate::BATCH] }
    }

    /// The patch crossings frame `i` of the last batch has made, its hop onto this port included.
    pub(crate) fn crossings(&self, i: usize) -> u8 {
        self.crossings.get(i).copied().unwrap_or(0)
    }

    pub(crate) fn fill(&mut self, slots: &mut [Slot]) -> usize {
        let Some(q) = self.mine.queues.get(self.index) else { return 0 };
        let mut q = q.lock().unwrap_or_else(|e| e.into_inner());
        let mut n = 0;
        while n < slots.len().min(self.bufs.len()) {
            let Some((frame, crossings)) = q.pop_front() else { break };
            self.crossings[n] = crossings;
            let buf = &mut self.bufs[n];
            let need = HEADROOM + frame.len() + TAILROOM;
            if buf.len() < need {
                buf.resize(need, 0);
            }
            buf[HEADROOM..HEADROOM + frame.len()].copy_from_slice(&frame);
            slots[n] = Slot::over(buf, HEADROOM, frame.len());
            n += 1;
        }
        n
    }
}

/// One transmit queue of a patch end: its frames go to the peer's receive queue of the same
/// index.
pub(crate) struct Tx {
    peer: String,
    index: usize,
    /// The peer's mailbox as last found (looked up again when it has gone).
    cached: Weak<Mailbox>,
    pub(crate) staging: Staging,
    /// The crossings each staged frame had made before this one, by staging position.
    crossings: [u8; crate::BATCH],
}

impl Tx {
    pub(crate) fn new(peer: &str, index: usize) -> Tx {
        Tx { peer: peer.to_string(), index, cached: Weak::new(), staging: Staging::new(), crossings: [0; crate::BATCH] }
    }

    /// Stages a copy of `frame`, which has made `crossings` patch crossings before this one.
    pub(crate) fn stage(&mut self, frame: &[u8], crossings: u8) {
        if let Some(c) = self.crossings.get_mut(self.staging.len()) {
            *c = crossings;
        }
        self.staging.push(frame);
    }

    pub(crate) fn flush(&mut self, c: &QueueCounters, _shared: &PortShared) {
        let frames = self.staging.take();
        if frames.is_empty() {
            return;
        }
        let peer = match self.cached.upgrade() {
            Some(m) => Some(m),
            None if self.peer.is_empty() => None,
            None => {
                let m = lookup(&self.peer);
                self.cached = m.as_ref().map_or_else(Weak::new, Arc::downgrade);
                m
            }
        };
        let Some(peer) = peer else {
            bump(&c.tx_dropped, frames.len() as u64);
            return;
        };
        let Some(q) = peer.queues.get(self.index % peer.queues.len().max(1)) else {
            bump(&c.tx_dropped, frames.len() as u64);
            return;
        };
        let mut q = q.lock().unwrap_or_else(|e| e.into_inner());
        for (i, f) in frames.iter().enumerate() {
            if q.len() >= DEPTH {
                bump(&c.tx_dropped, 1);
            } else {
                q.push_back((f.clone(), self.crossings.get(i).copied().unwrap_or(0).saturating_add(1)));
                bump(&c.tx_packets, 1);
                bump(&c.tx_bytes, f.len() as u64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{PortConfig, PortSpec};

    fn open(spec: &str, queues: usize) -> crate::Port {
        crate::open(&spec.parse::<PortSpec>().unwrap(), &PortConfig::with_queues(queues)).unwrap()
    }

    #[test]
    fn a_frame_sent_on_one_end_is_received_on_the_other() {
        let mut a = open("ptest-a:patch=ptest-b", 2);
        let mut b = open("ptest-b:patch=ptest-a", 2);
        let frame: Vec<u8> = (0..60).collect();
        assert!(a.tx(1).unwrap().send(&frame));
        a.tx(1).unwrap().flush();
        assert!(b.rx(0).unwrap().recv().is_empty(), "queue 1's frame arrives on queue 1 only");
        let got: Vec<Vec<u8>> = b.rx(1).unwrap().recv().iter().map(<[u8]>::to_vec).collect();
        assert_eq!(got, vec![frame.clone()]);
        // And back.
        b.tx(0).unwrap().send(&frame[..20]);
        b.tx(0).unwrap().flush();
        let got: Vec<Vec<u8>> = a.rx(0).unwrap().recv().iter().map(<[u8]>::to_vec).collect();
        assert_eq!(got, vec![frame[..20].to_vec()]);
        assert_eq!(a.handle().stats().total.tx_packets, 1);
        assert_eq!(a.handle().stats().total.rx_packets, 1);
        assert_eq!(b.handle().stats().total.rx_packets, 1);
    }

    #[test]
    fn frames_to_a_missing_or_closed_peer_are_dropped_and_counted() {
        let mut a = open("ptest-c:patch=ptest-d", 1);
        a.tx(0).unwrap().send(&[1; 60]);
        a.tx(0).unwrap().flush();
        assert_eq!(a.handle().stats().total.tx_dropped, 1, "no peer open");
        let d = open("ptest-d:patch=ptest-c", 1);
        a.tx(0).unwrap().send(&[2; 60]);
        a.tx(0).unwrap().flush();
        assert_eq!(a.handle().stats().total.tx_packets, 1);
        drop(d);
        a.tx(0).unwrap().send(&[3; 60]);
        a.tx(0).unwrap().flush();
        assert_eq!(a.handle().stats().total.tx_dropped, 2, "the peer closed");
        // Reopened: it receives what is sent from now on, nothing older.
        let mut d = open("ptest-d:patch=ptest-c", 1);
        assert!(d.rx(0).unwrap().recv().is_empty());
        a.tx(0).unwrap().send(&[4; 60]);
        a.tx(0).unwrap().flush();
        let got: Vec<Vec<u8>> = d.rx(0).unwrap().recv().iter().map(<[u8]>::to_vec).collect();
        assert_eq!(got, vec![vec![4; 60]]);
    }

    #[test]
    fn a_frame_carries_its_crossings() {
        let mut a = open("ptest-g:patch=ptest-h", 1);
        let mut h = open("ptest-h:patch=ptest-g", 1);
        a.tx(0).unwrap().send(&[6; 60]);
        a.tx(0).unwrap().send_after(&[7; 60], 3);
        a.tx(0).unwrap().flush();
        let again = {
            let b = h.rx(0).unwrap().recv();
            assert_eq!((b.len(), b.crossings(0), b.crossings(1), b.crossings(2)), (2, 1, 4, 0));
            b.get(1).unwrap().to_vec()
        };
        // Sent back with what it came in with: one more.
        h.tx(0).unwrap().send_after(&again, 4);
        h.tx(0).unwrap().send_after(&again, u8::MAX);
        h.tx(0).unwrap().flush();
        let b = a.rx(0).unwrap().recv();
        assert_eq!((b.crossings(0), b.crossings(1)), (5, u8::MAX), "counted up, never wrapped");
    }

    #[test]
    fn a_full_queue_drops() {
        let mut a = open("ptest-e:patch=ptest-f", 1);
        let mut f = open("ptest-f:patch=ptest-e", 1);
        for _ in 0..super::DEPTH + 5 {
            a.tx(0).unwrap().send(&[5; 60]);
        }
        a.tx(0).unwrap().flush();
        let s = a.handle().stats();
        assert_eq!((s.total.tx_packets, s.total.tx_dropped), (super::DEPTH as u64, 5));
        let mut n = 0;
        loop {
            let b = f.rx(0).unwrap().recv();
            if b.is_empty() {
                break;
            }
            n += b.len();
        }
        assert_eq!(n, super::DEPTH);
    }

    #[test]
    fn specs() {
        let s: PortSpec = "patch-br0-to-br1:patch=patch-br1-to-br0".parse().unwrap();
        assert_eq!(s.port_type, crate::PortType::Patch("patch-br1-to-br0".into()));
        assert_eq!(s.to_string(), "patch-br0-to-br1:patch=patch-br1-to-br0");
        let s: PortSpec = "lonely:patch".parse().unwrap();
        assert_eq!(s.port_type, crate::PortType::Patch(String::new()));
        assert_eq!(s.to_string(), "lonely:patch");
        assert!("a:patch=b/c".parse::<PortSpec>().is_err());
        assert!("a:patch=".parse::<PortSpec>().is_err());
    }
}
