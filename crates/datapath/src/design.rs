//! The [`Design`] trait: what `rqvs replay` and `rqvs compare` drive, whichever datapath design
//! is behind it — ORIG ([`crate::Datapath`]), CFLOWS ([`crate::cflows::Cflows`]).
//!
//! The contract is the PMD loop's: [`Design::process_batch`] on each batch (the PMD's work),
//! [`Design::handle_upcalls`] for the packets it queued (empty for designs without upcalls),
//! [`Design::maintain`] at batch boundaries (ranking, sweeps, model swaps), and OpenFlow rule
//! changes through [`Design::add_rules`] / [`Design::remove_rules`] between batches.
//!
//! **Visibility.** [`Design::visible_epoch`] changes whenever the set of OpenFlow rules that
//! decides packets' actions changes: at each update for ORIG and for CFLOWS' instant policy, at
//! the model swap for the delayed policy (rules staged until then are not visible:
//! [`Design::staged_rules`]). Verification compares each packet with the reference over the rules
//! visible when it was classified — or, while [`Design::oldest_epoch`] lags behind (ORIG with
//! the revalidator thread), over any of the rule sets from that epoch to the visible one.

use rqvs_classify::ClassifierError;
use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::revalidator::Revalidation;
use crate::{Counters, DpAction, BATCH};

pub trait Design {
    /// `orig`, `cflows`, ...
    fn name(&self) -> &'static str;
    /// The PMD's work on one batch (see [`crate::Datapath::process_batch`] for `seq0`/`out`).
    fn process_batch(&mut self, keys: &[FlowKey], seq0: u64, out: &mut [DpAction]);
    /// Handles queued upcalls; `(sequence number, action)` per handled packet.
    fn handle_upcalls(&mut self) -> &[(u64, DpAction)];
    /// Batch-boundary housekeeping; returns cache entries deleted.
    fn maintain(&mut self) -> u64;
    /// Adds OpenFlow rules; returns cache entries deleted as a consequence.
    fn add_rules(&mut self, rules: Vec<Rule>) -> Result<u64, ClassifierError>;
    /// Removes OpenFlow rules (absent ids ignored); returns cache entries deleted.
    fn remove_rules(&mut self, ids: &[RuleId]) -> u64;
    /// Counters with gauges filled in.
    fn counters(&self) -> Counters;
    /// PMD clock, ns.
    fn now_ns(&self) -> u64;
    /// An idle PMD waiting for packets: the clock moves to `ns` (if later).
    fn idle_until(&mut self, ns: u64);
    /// Changes whenever the visible rule set changes (module docs).
    fn visible_epoch(&self) -> u64;
    /// The oldest epoch whose rule set may still decide a packet: cache entries of an earlier
    /// table waiting for an asynchronous revalidation ([`crate::revalidator`]); the visible
    /// epoch when none are.
    fn oldest_epoch(&self) -> u64 {
        self.visible_epoch()
    }
    /// Asynchronous revalidations finished since the last call.
    fn take_revalidations(&mut self) -> Vec<Revalidation> {
        Vec::new()
    }
    /// Rules added but not yet visible (delayed policy).
    fn staged_rules(&self) -> Vec<RuleId> {
        Vec::new()
    }
    /// Design-specific figures for reports (name, value).
    fn report(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
    /// Waits for background work (training) to finish and be applied; for tests and for a
    /// clean end of a run.
    fn settle(&mut self) {}
}

/// Replays `keys` in order, batch by batch, with the handler and housekeeping at every batch
/// boundary; returns each packet's final action (upcalled packets get the handler's).
pub fn run_keys(d: &mut dyn Design, keys: &[FlowKey]) -> Vec<DpAction> {
    let mut actions = vec![DpAction::Drop; keys.len()];
    let mut out = [DpAction::Drop; BATCH];
    for (b, chunk) in keys.chunks(BATCH).enumerate() {
        let base = b * BATCH;
        d.process_batch(chunk, base as u64, &mut out);
        actions[base..base + chunk.len()].copy_from_slice(&out[..chunk.len()]);
        for &(seq, a) in d.handle_upcalls() {
            actions[seq as usize] = a;
        }
        d.maintain();
    }
    actions
}
