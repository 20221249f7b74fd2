//! Asynchronous events from the switch to its OpenFlow connections: a flow removed by a delete
//! or a timeout ([`FlowRemoved`], sent as FLOW_REMOVED when the flow has SEND_FLOW_REM).
//!
//! Each connection subscribes when it starts ([`Control::subscribe`]) and gets every event from
//! then on through its own unbounded channel; it decides what to send (its negotiated version,
//! its role: a slave gets no FLOW_REMOVED, OpenFlow 1.3's default asynchronous configuration).
//! The switch emits after the change is committed, applied on every PMD and the removed flows'
//! counts taken ([`Control::settle_counts`]), outside the lock of the table of record. A
//! subscriber that has gone is dropped at the next emit.

use std::sync::mpsc::{self, Receiver};

use rqvs_flow::Rule;

use crate::flowstats::FlowCount;
use crate::table::Reason;
use crate::Control;

/// An event for the OpenFlow connections.
#[derive(Clone, Debug)]
pub enum Event {
    FlowRemoved(FlowRemoved),
}

/// A flow with SEND_FLOW_REM left the table (OpenFlow's `ofp_flow_removed`).
#[derive(Clone, Debug)]
pub struct FlowRemoved {
    /// The flow as it was (match, priority, cookie, table).
    pub rule: Rule,
    pub reason: Reason,
    /// How long it lived, from its add (a modify keeps it).
    pub duration_ns: u64,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    /// Its packets and bytes (those of the flows it replaced or was modified from included).
    pub counts: FlowCount,
}

impl Control {
    /// Every event from now on, on a channel of its own (module docs).
    pub fn subscribe(&self) -> Receiver<Event> {
        let (s, r) = mpsc::channel();
        self.subscribers.lock().unwrap_or_else(|e| e.into_inner()).push(s);
        r
    }

    /// Sends `events` to every subscriber still there.
    pub(crate) fn emit(&self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let mut subs = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        subs.retain(|s| events.iter().all(|e| s.send(e.clone()).is_ok()));
    }
}
