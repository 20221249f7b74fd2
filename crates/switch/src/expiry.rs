//! The expiry thread: removes flows whose idle or hard timeout has passed, off the packet path.
//!
//! Every [`CHECK`] it looks at the flows with a timeout ([`rqvs_ofproto::record::FlowTable::timed`]):
//! a hard timeout has passed when the time since the flow's add (or last modify: OVS's
//! `modified`) exceeds it; an idle timeout when the time since its last hit does. The PMDs keep
//! no times ([`crate::flowstats`]): the thread reads the PMDs' counts of every flow with an idle
//! timeout at each look, and a count that moved since the last look is a hit
//! ([`rqvs_ofproto::record::FlowTable::observe`]) — a packet served by the EMC, a megaflow or the
//! learned classifier, on any PMD — so a last hit is known within one look. Expired flows are
//! removed as one transaction through the path every flow-mod takes ([`FlowOp::Expire`] in
//! `Control::transact`: the commit, revalidation or the CFLOWS manager, the counts settled, a
//! FLOW_REMOVED for those with SEND_FLOW_REM). OVS looks once a second; rqvs five times, so a
//! flow goes within 400 ms of its timeout (a look to see its last hit, one to see it expired).

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rqvs_flow::RuleId;

use crate::Control;
use rqvs_ofproto::record::FlowOp;

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
        // The last hits: the counts of the flows with an idle timeout, compared with the last look.
        let idle: Vec<RuleId> =
            self.lock_rules().timed().filter(|(_, m)| m.idle_timeout != 0).map(|(r, _)| r.id).collect();
        let seen = self.flow_counts(&idle, false);
        let due: Vec<FlowOp> = {
            let mut rules = self.lock_rules();
            for (&id, c) in idle.iter().zip(&seen) {
                // A flow modified meanwhile (a new id) is not here: its heir has its counts.
                rules.observe(id, c.packets, now);
            }
            rules.timed().filter_map(|(r, m)| m.expired(now).map(|why| FlowOp::Expire(r.id, why))).collect()
        };
        if due.is_empty() {
            return 0;
        }
        match self.transact("expiry", &due, false, false) {
            Ok((effects, _)) => effects.iter().flatten().map(|e| e.removed).sum(),
            Err(e) => {
                crate::log_warn!("rqvs switch: {e}");
                0
            }
        }
    }
}
