//! The revalidator: keeps the megaflow cache consistent with the OpenFlow table and bounded.
//!
//! - **After rule changes** ([`Revalidator::revalidate_all`]): every installed megaflow's key
//!   (the packet that created it, as OVS's ukey holds it) is classified again by the new table.
//!   The megaflow is kept only if the action is the same **and** the new lookup's megaflow mask
//!   examines no bit the installed mask does not (OVS's `revalidate_ukey`: new wildcards must not
//!   be narrower). This keeps the megaflow property: every packet the installed megaflow covers
//!   agrees with the creating key on all bits the new lookup examined, so the new table gives it
//!   the same action. Anything else is deleted; the next packet of it upcalls.
//! - **Idle expiry** ([`Revalidator::sweep`], every [`SWEEP_INTERVAL_NS`] of PMD clock): megaflows
//!   not hit for `idle_ns` (default 10 s, OVS's `max-idle`) are deleted.
//! - **Flow limit** (default 200,000): the handler installs nothing at the limit; when the cache
//!   holds more than the limit (after the limit was lowered), a sweep uses a 100 ms idle time (as
//!   OVS does) and, if still over, deletes the least recently used down to the limit.
//!
//! Revalidation runs on "the other core" in OVS: `rqvs replay` does not count its time as PMD
//! time (its effect — deletions, then upcalls — lands on the PMD).

use crate::counters::Counters;
use crate::dpcls::Dpcls;
use crate::upcall::SlowPath;

pub const SWEEP_INTERVAL_NS: u64 = 500_000_000;
pub const DEFAULT_IDLE_NS: u64 = 10_000_000_000;
pub const DEFAULT_FLOW_LIMIT: usize = 200_000;
const OVER_LIMIT_IDLE_NS: u64 = 100_000_000;

pub struct Revalidator {
    pub idle_ns: u64,
    pub flow_limit: usize,
    next_sweep_ns: u64,
}

impl Revalidator {
    pub fn new(idle_ns: u64, flow_limit: usize) -> Revalidator {
        Revalidator { idle_ns, flow_limit, next_sweep_ns: SWEEP_INTERVAL_NS }
    }

    /// Re-checks every megaflow against the current table; returns how many were deleted.
    pub fn revalidate_all(&mut self, dpcls: &mut Dpcls, slow: &SlowPath, c: &mut Counters) -> u64 {
        let mut deleted = 0;
        for f in dpcls.flow_refs() {
            let e = dpcls.get(f).expect("listed flow is live");
            let v = slow.classify(&e.key);
            let keep = v.action == e.action && v.megaflow.mask.is_subset_of(&e.megaflow.mask);
            if !keep {
                dpcls.remove(f);
                deleted += 1;
            }
        }
        c.deleted_revalidated += deleted;
        deleted
    }

    /// Periodic sweep (idle expiry and flow limit) when its interval is over; returns deletions.
    pub fn maybe_sweep(&mut self, dpcls: &mut Dpcls, now_ns: u64, c: &mut Counters) -> u64 {
        if now_ns < self.next_sweep_ns {
            return 0;
        }
        self.next_sweep_ns = now_ns + SWEEP_INTERVAL_NS;
        self.sweep(dpcls, now_ns, c)
    }

    /// Idle expiry and flow-limit enforcement now (module docs).
    pub fn sweep(&mut self, dpcls: &mut Dpcls, now_ns: u64, c: &mut Counters) -> u64 {
        let over = dpcls.len() > self.flow_limit;
        let idle = if over { self.idle_ns.min(OVER_LIMIT_IDLE_NS) } else { self.idle_ns };
        let mut deleted = 0;
        let mut live = Vec::new();
        for f in dpcls.flow_refs() {
            let last = dpcls.get(f).expect("live").last_used_ns;
            if now_ns.saturating_sub(last) >= idle {
                dpcls.remove(f);
                c.deleted_idle += 1;
                deleted += 1;
            } else if over {
                live.push((last, f));
            }
        }
        if dpcls.len() > self.flow_limit {
            live.sort_by_key(|&(last, _)| last);
            let excess = dpcls.len() - self.flow_limit;
            for &(_, f) in live.iter().take(excess) {
                dpcls.remove(f);
                c.deleted_limit += 1;
                deleted += 1;
            }
        }
        deleted
    }
}
