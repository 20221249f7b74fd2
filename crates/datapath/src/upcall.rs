//! Upcalls: the bounded queue from the PMD to the handler, and the slow path the handler runs.
//!
//! - [`UpcallQueue`]: a fixed-capacity FIFO allocated once (default [`UPCALL_QUEUE_CAP`]); the
//!   PMD's `push` never blocks or allocates — a full queue refuses and the PMD counts the packet
//!   `lost` and drops it.
//! - The handler takes the queue in batches of [`HANDLER_BATCH`] (OVS's `UPCALL_MAX_BATCH`).
//!   For each packet, [`SlowPath::classify`] runs the OpenFlow classifier with wildcard tracking
//!   ([`OfprotoClassifier::lookup_wc`]) and returns the megaflow (tracked wildcards plus what
//!   OVS's translation always examines, [`Megaflow::from_wildcards`]) and the rule's action. The
//!   datapath then installs the megaflow unless an identical one is installed or the flow limit
//!   is reached (OVS's handler checks both), and the packet gets the slow path's action.
//! - Keys reach the slow path as [`FlowKey::wire`] keys: what a frame carries (ports zero
//!   for protocols without ports, 8-bit ICMP type/code, TCP flags only on TCP). The PMD applies
//!   the same normalisation to every packet, so fast and slow path see the same key.

use std::collections::VecDeque;

use rqvs_classify::ofproto::{Megaflow, OfprotoClassifier};
use rqvs_classify::{Classifier, ClassifierError};
use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::DpAction;

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

/// What the slow path decides for one packet.
#[derive(Clone, Copy, Debug)]
pub struct Verdict {
    pub megaflow: Megaflow,
    pub action: DpAction,
    pub rule: Option<RuleId>,
}

/// The OpenFlow table and the slow path's classification (module docs).
#[derive(Clone)]
pub struct SlowPath {
    classifier: OfprotoClassifier,
}

impl SlowPath {
    pub fn build(rules: &[Rule]) -> Result<SlowPath, ClassifierError> {
        Ok(SlowPath { classifier: OfprotoClassifier::build(rules)? })
    }

    /// The slow path's verdict for a (wire) key.
    pub fn classify(&self, key: &FlowKey) -> Verdict {
        let l = self.classifier.lookup_wc(key);
        let megaflow = l.megaflow(key);
        let action = DpAction::of_rule(l.rule.and_then(|id| self.classifier.rule(id)));
        Verdict { megaflow, action, rule: l.rule }
    }

    pub fn insert(&mut self, rule: Rule) -> Result<(), ClassifierError> {
        self.classifier.insert(rule)
    }

    pub fn remove(&mut self, id: RuleId) -> Option<Rule> {
        self.classifier.remove(id)
    }

    pub fn classifier(&self) -> &OfprotoClassifier {
        &self.classifier
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
