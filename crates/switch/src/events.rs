//! Asynchronous events from the switch to the OpenFlow channel: a flow removed by a delete or a
//! timeout ([`FlowRemoved`], sent as FLOW_REMOVED when the flow has SEND_FLOW_REM), and a
//! port whose link state changed ([`Event::PortStatus`], from the link watcher, [`crate::link`];
//! sent as PORT_STATUS), and a port attached or removed ([`Event::PortAdded`],
//! [`Event::PortDeleted`], [`crate::attach`]; PORT_STATUS ADD and DELETE).
//!
//! The channel registers a sink when it starts ([`Control::on_event`]; `openflow/flow_removed.rs`
//! writes the messages into the connections' queues and decides who gets them). The switch
//! calls the sinks after the change is committed, applied on every PMD and the removed flows'
//! counts are taken (`Control::settle_counts`), outside the lock of the table of record, on
//! the thread that made the change — so a FLOW_REMOVED for a connection's own delete is queued
//! before its next reply (a BARRIER_REPLY).

use rqvs_flow::Rule;

use crate::flowstats::FlowCount;
use crate::table::Reason;
use crate::Control;

/// An event for the OpenFlow channel.
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)] // a flow removal is rare and carries its match (wide key)
pub enum Event {
    FlowRemoved(FlowRemoved),
    /// Port N's link state changed (went down or up, disappeared, was re-attached).
    PortStatus(u32),
    /// The port at this datapath index was attached while running ([`crate::attach`]:
    /// PORT_STATUS ADD).
    PortAdded(usize),
    /// The port at this datapath index was removed (PORT_STATUS DELETE, describing it as it was).
    PortDeleted(usize),
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

/// Where events go (module docs).
pub type EventSink = Box<dyn Fn(&Event) + Send + Sync>;

impl Control {
    /// Calls `sink` with every event from now on (module docs).
    pub fn on_event(&self, sink: EventSink) {
        self.sinks.lock().unwrap_or_else(|e| e.into_inner()).push(sink);
    }

    /// Hands `events` to every sink, in order.
    pub(crate) fn emit(&self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let sinks = self.sinks.lock().unwrap_or_else(|e| e.into_inner());
        for e in &events {
            sinks.iter().for_each(|s| s(e));
        }
    }
}
