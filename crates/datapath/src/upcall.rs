//! Upcalls: the bounded queue from the PMD to the handler, and the slow path the handler runs.
//!
//! - [`UpcallQueue`]: a fixed-capacity FIFO allocated once (default [`UPCALL_QUEUE_CAP`]); the
//!   PMD's `push` never blocks or allocates — a full queue refuses and the PMD counts the packet
//!   `lost` and drops it.
//! - The handler takes the queue in batches of [`HANDLER_BATCH`] (OVS's `UPCALL_MAX_BATCH`).
//!   For each packet, the OpenFlow table ([`rqvs_ofproto::table::OfprotoTable`]) classifies with
//!   wildcard tracking and returns the megaflow (tracked wildcards plus what OVS's translation
//!   always examines) and the rule's action. The datapath then installs the megaflow unless an
//!   identical or covering one is installed or the flow limit is reached (OVS's handler checks
//!   both; [`crate::dpcls::Dpcls::install`]), and the packet gets the slow path's action.
//! - Keys reach the slow path as [`FlowKey::wire`] keys: what a frame carries (ports zero
//!   for protocols without ports, 8-bit ICMP type/code, TCP flags only on TCP). The PMD applies
//!   the same normalisation to every packet, so fast and slow path see the same key.

use std::collections::VecDeque;

use rqvs_flow::FlowKey;

pub const UPCALL_QUEUE_CAP: usize = 4096;
pub const HANDLER_BATCH: usize = 64;

/// A packet waiting for the slow path.
#[derive(Clone, Copy, Debug)]
pub struct Upcall {
    pub key: FlowKey,
    pub hash: u32,
    /// The caller's packet sequence number, returned with the action.
    pub seq: u64,
}

/// Fixed-capacity FIFO (module docs).
pub struct UpcallQueue {
    q: VecDeque<Upcall>,
    cap: usize,
}

impl UpcallQueue {
    pub fn new(cap: usize) -> UpcallQueue {
        UpcallQueue { q: VecDeque::with_capacity(cap), cap }
    }

    /// Queues an upcall; false (nothing queued) when full.
    #[inline]
    pub fn push(&mut self, u: Upcall) -> bool {
        if self.q.len() >= self.cap {
            return false;
        }
        self.q.push_back(u);
        true
    }

    pub fn pop(&mut self) -> Option<Upcall> {
        self.q.pop_front()
    }

    pub fn len(&self) -> usize {
        self.q.len()
    }

    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_is_bounded() {
        let mut q = UpcallQueue::new(2);
        let u = Upcall { key: FlowKey::default(), hash: 0, seq: 0 };
        assert!(q.push(u));
        assert!(q.push(Upcall { seq: 1, ..u }));
        assert!(!q.push(Upcall { seq: 2, ..u }));
        assert_eq!(q.pop().map(|u| u.seq), Some(0));
        assert!(q.push(Upcall { seq: 3, ..u }));
        assert_eq!(q.len(), 2);
    }
}
