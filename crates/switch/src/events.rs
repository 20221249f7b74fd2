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
//!
//! **Flow changes for flow monitors** ([`Event::FlowsChanged`]): every committed change of the
//! table of record — flows added, deleted (by a delete, a timeout, a group delete) and modified
//! (their actions changed, by a modify or by an add over the same match) — as one event per
//! transaction, built only while some OpenFlow connection has a flow monitor (`watch`; the
//! count is the process's, so a process running several switches builds them for all while
//! one is watched). The change carries who made it (`Origin`: the OpenFlow connection and
//! the xid of the message being handled on the thread, set by the connection), so that a
//! monitor reports its own connection's changes abbreviated, as Open vSwitch does.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rqvs_flow::Rule;

use crate::Control;
use rqvs_ofproto::flowstate::FlowCount;
use rqvs_ofproto::record::Reason;

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
    /// The flows one transaction changed (module docs, *Flow changes*).
    FlowsChanged(Arc<FlowChanges>),
}

/// What happened to a flow ([`FlowChange`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Added,
    Deleted(Reason),
    /// Its actions changed.
    Modified,
}

/// One flow a transaction changed: the flow as it is after (as it was, when deleted).
#[derive(Clone, Debug)]
pub struct FlowChange {
    pub change: Change,
    pub rule: Rule,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
}

/// The flows one transaction changed, and who changed them.
#[derive(Clone, Debug)]
pub struct FlowChanges {
    /// The OpenFlow connection and the xids of its messages that made them (`None`: the switch
    /// itself — a timeout — or the management socket).
    pub origin: Option<(u64, Vec<u32>)>,
    pub flows: Vec<FlowChange>,
}

thread_local! {
    static ORIGIN: RefCell<Option<(u64, Vec<u32>)>> = const { RefCell::new(None) };
}

/// Flow monitors in the process ([`watch`]).
static WATCHERS: AtomicUsize = AtomicUsize::new(0);

/// `n` more flow monitors (or fewer, negative) exist.
pub(crate) fn watch(n: isize) {
    if n >= 0 {
        WATCHERS.fetch_add(n.unsigned_abs(), Ordering::Relaxed);
    } else {
        let _ =
            WATCHERS.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| Some(w.saturating_sub(n.unsigned_abs())));
    }
}

/// Does any flow monitor exist (are [`Event::FlowsChanged`] wanted)?
pub(crate) fn watched() -> bool {
    WATCHERS.load(Ordering::Relaxed) > 0
}

/// The message being handled on this thread, for the flow changes it makes: set while it
/// lives (module docs).
pub(crate) struct Origin(Option<(u64, Vec<u32>)>);

impl Origin {
    /// Connection `peer`'s messages `xids` (a run of FLOW_MODs committed together) are handled
    /// on this thread from now until the guard is dropped.
    pub(crate) fn set(peer: u64, xids: Vec<u32>) -> Origin {
        Origin(ORIGIN.with(|o| o.replace(Some((peer, xids)))))
    }

    /// The messages being handled on this thread, if any.
    pub(crate) fn current() -> Option<(u64, Vec<u32>)> {
        ORIGIN.with(|o| o.borrow().clone())
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        let before = self.0.take();
        ORIGIN.with(|o| *o.borrow_mut() = before);
    }
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
