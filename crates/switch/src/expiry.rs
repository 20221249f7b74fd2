//! The expiry thread: removes flows whose idle or hard timeout has passed, off the packet path.
//!
//! Every [`CHECK`] it looks at the flows with a timeout ([`crate::table::FlowTable::timed`]):
//! a hard timeout has passed when the time since the flow's add (or last modify: OVS's
//! `modified`) exceeds it; an idle timeout when the time since its last hit does. The last hit
//! is the latest of what the table knows (the flow's add, the flows it took over) and of the
//! PMDs' per-flow counters ([`crate::flowstats`]: a packet served by the EMC, a megaflow or the
//! learned classifier counts, from any PMD), which are asked only about the flows that would
//! be idle without them — and what they answer is remembered, so a busy flow is asked about
//! once per idle timeout. Expired flows are removed as one transaction through the path every
//! flow-mod takes ([`FlowOp::Expire`] in `Control::transact`: the commit, revalidation or the
//! CFLOWS manager, the counts settled, a FLOW_REMOVED for those with SEND_FLOW_REM). OVS checks
//! once a second; rqvs five times, so a flow goes within 200 ms of its timeout.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rqvs_flow::RuleId;

use crate::flowstats::FlowCount;
use crate::table::{FlowOp, Reason};
use crate::Control;

/// How often the thread looks.
pub const CHECK: Duration = Duration::from_millis(200);
/// How often it looks whether the switch is stopping.
const NAP: Duration = Duration::from_millis(20);

/// Starts the thread; it ends once the switch is asked to stop.
pub(crate) fn spawn(control: Arc<Control>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name("rqvs-expiry".into()).spawn(move || {
        let mut since = Duration::ZERO;
        while !control.stop_requested() {
            std::thread::sleep(NAP);
            since += NAP;
            if since >= CHECK {
                since = Duration::ZERO;
                control.expire_now();
            }
        }
    })
}

impl Control {
    /// Removes the flows whose timeout has passed now (module docs); returns how many.
    pub fn expire_now(&self) -> usize {
        let now = self.clock_ns();
        // Due by the table alone, and idle unless a PMD saw them since.
        let (mut due, idle): (Vec<(RuleId, Reason)>, Vec<RuleId>) = {
            let rules = self.lock_rules();
            let mut due = Vec::new();
            let mut idle = Vec::new();
            for (r, m) in rules.timed() {
                match m.expired(now, 0) {
                    Some(Reason::IdleTimeout) => idle.push(r.id),
                    Some(reason) => due.push((r.id, reason)),
                    None => {}
                }
            }
            (due, idle)
        };
        if !idle.is_empty() {
            let seen = self.flow_counts(&idle, false);
            let mut rules = self.lock_rules();
            for (&id, c) in idle.iter().zip(&seen) {
                // Remember the last hit; a flow modified meanwhile (a new id) is not here.
                rules.carry(id, &FlowCount { used_ns: c.used_ns, ..FlowCount::default() });
                if let Some(Reason::IdleTimeout) = rules.meta(id).and_then(|m| m.expired(now, c.used_ns)) {
                    due.push((id, Reason::IdleTimeout));
                }
            }
        }
        if due.is_empty() {
            return 0;
        }
        let ops: Vec<FlowOp> = due.into_iter().map(|(id, reason)| FlowOp::Expire(id, reason)).collect();
        match self.transact("expiry", &ops, false) {
            Ok((effects, _)) => effects.iter().flatten().map(|e| e.removed).sum(),
            Err(e) => {
                eprintln!("rqvs switch: {e}");
                0
            }
        }
    }
}
