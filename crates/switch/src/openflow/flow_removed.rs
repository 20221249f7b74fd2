//! FLOW_REMOVED: the channel's sink for the switch's events ([`crate::events`]). A flow with
//! SEND_FLOW_REM that a delete or a timeout removed becomes one FLOW_REMOVED per OpenFlow flow
//! of its rule (a rule with port ranges is several; its counts go with the first), written into
//! the queue of every connection that takes asynchronous messages — the connections PACKET_INs
//! go to ([`super::Peer::takes_async`]: Open vSwitch's `ofconn_receives_async_msg`; OpenFlow
//! 1.3's default asynchronous configuration gives FLOW_REMOVED of every reason to master and
//! equal connections, none to slaves). The queue is waited on, not dropped from: the caller is
//! the thread that made the change, and the writer thread drains a queue whose peer is gone.

use std::sync::Weak;

use rqvs_openflow::flow_mod::FlowRemoved;
use rqvs_openflow::Message;

use super::Hub;
use crate::events::{Event, FlowRemoved as Removed};

/// The messages of one removed flow, as `peer` takes them.
pub(crate) fn messages(peer: &super::Peer, fr: &Removed) -> Vec<Vec<u8>> {
    let r = &fr.rule;
    r.matches
        .expand_port_ranges()
        .into_iter()
        .enumerate()
        .filter_map(|(i, m)| {
            let counts = if i == 0 { fr.counts } else { Default::default() };
            let msg = FlowRemoved {
                cookie: r.cookie,
                priority: u16::try_from(r.priority).unwrap_or(u16::MAX),
                reason: fr.reason.code(),
                table_id: r.table,
                duration_sec: (fr.duration_ns / 1_000_000_000).min(u64::from(u32::MAX)) as u32,
                duration_nsec: (fr.duration_ns % 1_000_000_000) as u32,
                idle_timeout: fr.idle_timeout,
                hard_timeout: fr.hard_timeout,
                packet_count: counts.packets,
                byte_count: counts.bytes,
                matches: m,
            };
            match peer.encode_async(&Message::FlowRemoved(msg)) {
                Ok(b) => Some(b),
                Err(e) => {
                    crate::log_error!(
                        "rqvs switch: openflow: cannot encode a flow_removed: {e} (a bug: please report it)"
                    );
                    None
                }
            }
        })
        .collect()
}

/// The sink: each event to every connection that takes it (module docs).
pub(crate) fn deliver(hub: &Weak<Hub>, e: &Event) {
    let Some(hub) = hub.upgrade() else { return };
    let fr = match e {
        Event::FlowRemoved(fr) => fr,
        Event::PortStatus(port) => return super::ports::deliver_status(&hub, *port),
        Event::PortAdded(i) => return super::ports::deliver_reason(&hub, *i, super::ports::OFPPR_ADD, None),
        Event::PortDeleted(i) => return super::ports::deliver_reason(&hub, *i, super::ports::OFPPR_DELETE, None),
        Event::FlowsChanged(ch) => return super::monitor::deliver(&hub, ch),
    };
    for peer in hub.peers() {
        if !peer.takes_async() || !peer.wants(rqvs_openflow::async_config::FLOW_REMOVED_MASTER, fr.reason.code()) {
            continue;
        }
        for bytes in messages(&peer, fr) {
            // A connection that is gone has dropped its queue: nothing to wait for.
            let _ = peer.out.send(bytes);
        }
    }
}
