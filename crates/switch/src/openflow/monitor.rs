//! Flow monitors (`ovs-ofctl monitor SOCK watch:[...]`), per connection: the requests of
//! OpenFlow 1.0 (Nicira's `NXST_FLOW_MONITOR`), 1.3 (ONF's extension) and 1.4
//! (`OFPMP_FLOW_MONITOR`), their codec in [`rqvs_openflow::flow_monitor`]. As Open vSwitch 3.1
//! does them (its `ofproto/connmgr.c` read for the semantics, `ovs-ofctl monitor`'s output
//! against it compared in `crates/cli/tests/flow_monitor.rs`):
//!
//! - a request adds monitors to the connection (1.4 also modifies and deletes them; a monitor
//!   id the connection already has is refused, as an unknown one to modify or delete) and is
//!   answered with the flows that exist now and that a monitor with `INITIAL` selects — its
//!   table (0xff: all), its out_port (a flow with an output to it), every flow whose match is at
//!   least as specific as the monitor's — as updates `ADDED` (1.4: `INITIAL`), with their
//!   actions when a selecting monitor asked for `ACTIONS`;
//! - from then on every flow change of the switch, whoever made it (any connection, the
//!   management socket, a timeout: [`crate::events::Event::FlowsChanged`]), goes to each
//!   connection with a monitor that selects the flow and asked for that kind of event
//!   (`ADD`, `DELETE` with the removed reason, `MODIFY` when the actions changed) as an update
//!   (`xid` 0), one message per transaction; a change made by the connection itself is one
//!   `ABBREV` update carrying the xid of the message that made it, unless a selecting monitor
//!   has `OWN`;
//! - `NXT_FLOW_MONITOR_CANCEL` / ONF's cancel / 1.4's `DELETE` remove a monitor; a connection's
//!   monitors end with it.
//!
//! Not built: `PAUSED`/`RESUMED` (OVS pauses a connection's monitors while its send queue
//! holds more than 128 KiB of updates and reports what changed meanwhile on resume; here the
//! thread that made the change waits for the connection's queue, as for FLOW_REMOVED).

use std::sync::Mutex;

use rqvs_openflow::flow_monitor::{
    self, FlowEvent, FlowMonitorRequest, FlowUpdate, FullUpdate, MonitorCommand, NXFMF_ACTIONS, NXFMF_ADD,
    NXFMF_DELETE, NXFMF_INITIAL, NXFMF_MODIFY, NXFMF_OWN,
};
use rqvs_openflow::{OfError, OFP14};

use super::{Hub, Peer};
use crate::events::{Change, FlowChanges};
use rqvs_ofproto::record::FlowFilter;

/// A connection's monitors; dropping them (with the connection) ends them.
#[derive(Debug, Default)]
pub(crate) struct Monitors(Mutex<Vec<FlowMonitorRequest>>);

impl Drop for Monitors {
    fn drop(&mut self) {
        let n = self.0.lock().unwrap_or_else(|e| e.into_inner()).len();
        crate::events::watch(-(n as isize));
    }
}

impl Monitors {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<FlowMonitorRequest>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// OVS answers a duplicate or unknown monitor id with Nicira's `NXBRC_FM_DUPLICATE_ID` /
/// `NXBRC_FM_BAD_ID` below 1.4; rqvs's 1.0 and 1.3 error codes have no such Nicira code:
/// `OFPBRC_EPERM` (the log says why).
const EPERM: OfError = OfError { kind: 1, code: 5 };

/// The flows monitor `m` selects.
fn filter(m: &FlowMonitorRequest) -> FlowFilter {
    FlowFilter {
        matches: Some(m.matches),
        strict: None,
        cookie: (0, 0),
        out_port: (m.out_port != 0xffff_ffff)
            .then(|| rqvs_openflow::oxm::port_from_of(m.out_port).unwrap_or(m.out_port)),
        table: (m.table_id != 0xff).then_some(m.table_id),
        out_group: None,
    }
}

/// The updates of one flow (one per OpenFlow flow of its rule: a rule with port ranges is
/// several).
fn updates(
    out: &mut Vec<FlowUpdate>,
    event: FlowEvent,
    r: &rqvs_flow::Rule,
    idle_timeout: u16,
    hard_timeout: u16,
    actions: bool,
) {
    for m in r.matches.expand_port_ranges() {
        out.push(FlowUpdate::Full(FullUpdate {
            event,
            table_id: r.table,
            idle_timeout,
            hard_timeout,
            priority: u16::try_from(r.priority).unwrap_or(u16::MAX),
            cookie: r.cookie,
            matches: m,
            actions: actions.then(|| r.actions.clone()),
        }));
    }
}

/// A flow monitor request of connection `peer` (module docs): the reply's messages (the
/// initial flows), or the error to answer with and why.
pub(crate) fn request(
    hub: &Hub,
    peer: &Peer,
    version: u8,
    xid: u32,
    reqs: Vec<FlowMonitorRequest>,
) -> Result<Vec<Vec<u8>>, (OfError, String)> {
    let exists = if version == OFP14 { flow_monitor::MONITOR_EXISTS_14 } else { EPERM };
    let unknown = if version == OFP14 { flow_monitor::UNKNOWN_MONITOR_14 } else { EPERM };
    let mut initial = Vec::new();
    {
        let mut mine = hub_lock(peer);
        // Checked whole first: a refused request changes nothing.
        let mut ids: Vec<u32> = mine.iter().map(|m| m.id).collect();
        for q in &reqs {
            let has = ids.contains(&q.id);
            match q.command {
                MonitorCommand::Add if has => return Err((exists, format!("flow monitor {} exists", q.id))),
                MonitorCommand::Modify | MonitorCommand::Delete if !has => {
                    return Err((unknown, format!("no flow monitor {}", q.id)))
                }
                MonitorCommand::Add => ids.push(q.id),
                MonitorCommand::Delete => ids.retain(|i| *i != q.id),
                MonitorCommand::Modify => {}
            }
        }
        let before = mine.len();
        for q in reqs {
            mine.retain(|m| m.id != q.id);
            if q.command != MonitorCommand::Delete {
                if q.flags & NXFMF_INITIAL != 0 {
                    initial.push(q.clone());
                }
                mine.push(q);
            }
        }
        crate::events::watch(mine.len() as isize - before as isize);
    }
    // The flows that exist now, each once, with its actions if a monitor that selects it asks.
    let mut seen = std::collections::HashSet::new();
    let mut ups = Vec::new();
    let mut flows: Vec<(crate::flowstats::FlowStat, bool)> = Vec::new();
    for m in &initial {
        for s in hub.control.flow_stats(&filter(m)) {
            let actions = m.flags & NXFMF_ACTIONS != 0;
            if seen.insert(s.rule.id) {
                flows.push((s, actions));
            } else if actions {
                if let Some(f) = flows.iter_mut().find(|(f, _)| f.rule.id == s.rule.id) {
                    f.1 = true;
                }
            }
        }
    }
    flows.sort_by_key(|(s, _)| (s.rule.table, s.rule.rank()));
    for (s, actions) in &flows {
        updates(&mut ups, FlowEvent::Initial, &s.rule, s.meta.idle_timeout, s.meta.hard_timeout, *actions);
    }
    flow_monitor::encode_replies(version, xid, true, &ups)
        .map_err(|e| (EPERM, format!("the initial flows cannot be said in this OpenFlow version: {e}")))
}

fn hub_lock(peer: &Peer) -> std::sync::MutexGuard<'_, Vec<FlowMonitorRequest>> {
    peer.monitors.lock()
}

/// `NXT_FLOW_MONITOR_CANCEL` / ONF's cancel: removes monitor `id` (unknown: the error and why).
pub(crate) fn cancel(peer: &Peer, version: u8, id: u32) -> Result<(), (OfError, String)> {
    let mut mine = hub_lock(peer);
    let before = mine.len();
    mine.retain(|m| m.id != id);
    if mine.len() == before {
        let unknown = if version == OFP14 { flow_monitor::UNKNOWN_MONITOR_14 } else { EPERM };
        return Err((unknown, format!("no flow monitor {id}")));
    }
    crate::events::watch(-1);
    Ok(())
}

/// The updates of `ch` for connection `peer` (module docs).
fn updates_for(peer: &Peer, ch: &FlowChanges) -> Vec<FlowUpdate> {
    let mine = hub_lock(peer);
    if mine.is_empty() {
        return Vec::new();
    }
    let own = ch.origin.as_ref().filter(|(p, _)| *p == peer.id);
    let mut out = Vec::new();
    let mut abbrev = false;
    for f in &ch.flows {
        let (bit, event) = match f.change {
            Change::Added => (NXFMF_ADD, FlowEvent::Added),
            Change::Deleted(r) => (NXFMF_DELETE, FlowEvent::Deleted(r.code())),
            Change::Modified => (NXFMF_MODIFY, FlowEvent::Modified),
        };
        let selecting: Vec<&FlowMonitorRequest> =
            mine.iter().filter(|m| m.flags & bit != 0 && filter(m).selects(&f.rule)).collect();
        if selecting.is_empty() {
            continue;
        }
        if own.is_some() && !selecting.iter().any(|m| m.flags & NXFMF_OWN != 0) {
            abbrev = true;
            continue;
        }
        let actions = selecting.iter().any(|m| m.flags & NXFMF_ACTIONS != 0);
        updates(&mut out, event, &f.rule, f.idle_timeout, f.hard_timeout, actions);
    }
    if let (true, Some((_, xids))) = (abbrev, own) {
        // One per message of the connection's that changed flows, as OVS (a run of FLOW_MODs
        // committed together names each of its xids).
        for (i, xid) in xids.iter().enumerate() {
            out.insert(i, FlowUpdate::Abbrev { xid: *xid });
        }
    }
    out
}

/// The channel's sink for [`crate::events::Event::FlowsChanged`]: the updates to every
/// connection with a monitor that selects a changed flow (module docs). The queues are waited
/// on, as for FLOW_REMOVED.
pub(crate) fn deliver(hub: &Hub, ch: &FlowChanges) {
    for peer in hub.peers() {
        let v = peer.version.load(std::sync::atomic::Ordering::Relaxed);
        let ups = updates_for(&peer, ch);
        if ups.is_empty() {
            continue;
        }
        match flow_monitor::encode_replies(v, 0, false, &ups) {
            Ok(msgs) => {
                for m in msgs {
                    // A connection that is gone has dropped its queue: nothing to wait for.
                    let _ = peer.out.send(m);
                }
            }
            Err(e) => crate::log_warn!(
                "rqvs switch: openflow {}: flow monitor updates cannot be said in this OpenFlow version: {e} (not sent)",
                peer.name
            ),
        }
    }
}
