//! The PMD loop: what one poll-mode-driver thread does with a batch, written once for every
//! caller — `rqvs replay`/`compare` (a trace at full speed or at a constant rate), `rqvs
//! coflows` (arrival times, the handler on its own core), the datapath's tests ([`run_keys`]) and
//! the switch's PMD threads (batches of frames from ports).
//!
//! One iteration ([`Pmd::run_batch`]), as OVS-DPDK's `pmd_thread_main` → `dp_netdev_input`:
//! 1. **receive** ([`Pmd::receive`]): the design's fast path on the batch
//!    ([`Design::process_batch`]); a packet gets its action, or is queued for the handler
//!    ([`DpAction::Pending`]) or lost (queue full). The epoch window the fast-path actions come
//!    from is captured first ([`EpochWindow`]): the visible rule table, or — while the revalidator
//!    thread has stale megaflows to check — any table from the oldest pending one on.
//! 2. **handle** ([`Pmd::handle`]): the handler classifies what was queued with the current
//!    table and installs megaflows ([`Design::handle_upcalls`]). OVS-DPDK's PMD does this inline;
//!    `rqvs coflows` calls it on its own schedule, modelling a handler core.
//! 3. **housekeep** ([`Pmd::housekeep`]): ranking, sweeps, the revalidator thread's deletions,
//!    model swaps ([`Design::maintain`]), and the revalidations that finished.
//!
//! Rule changes ([`Design::add_rules`], [`Design::remove_rules`]) are the caller's, between
//! iterations; so are the source of packets and what is done with the actions (a trace and a
//! verification in replay, ports and frames in the switch). The loop allocates nothing per batch
//! once its buffers have grown to the handler's largest output.

use rqvs_flow::{FlowKey, RuleId};

use crate::design::Design;
use crate::revalidator::Revalidation;
use crate::BATCH;
use rqvs_ofproto::DpAction;

/// The rule tables a batch's fast-path actions may come from: epochs `oldest..=visible`
/// ([`Design::oldest_epoch`], [`Design::visible_epoch`]) at the time of the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochWindow {
    pub oldest: u64,
    pub visible: u64,
}

/// What one iteration did ([`Pmd::run_batch`]).
#[derive(Debug)]
pub struct BatchOutcome<'a> {
    /// The tables the fast-path actions come from.
    pub window: EpochWindow,
    /// Each packet's fast-path action (`Pending`: its action is in `upcalls`; `Lost`).
    pub actions: &'a [DpAction],
    /// `(sequence number, action)` of the upcalls handled, classified with the current table.
    pub upcalls: &'a [(u64, DpAction)],
    /// Megaflows housekeeping deleted.
    pub deleted: u64,
    /// Rule-change revalidations (the revalidator thread's) that finished.
    pub revalidations: &'a [Revalidation],
}

/// The PMD loop's state: buffers reused from batch to batch, and its count of batches.
pub struct Pmd {
    actions: [DpAction; BATCH],
    upcalls: Vec<(u64, DpAction)>,
    revalidations: Vec<Revalidation>,
    /// Batches received.
    pub batches: u64,
}

impl Default for Pmd {
    fn default() -> Self {
        Pmd::new()
    }
}

impl Pmd {
    pub fn new() -> Pmd {
        Pmd { actions: [DpAction::Drop; BATCH], upcalls: Vec::new(), revalidations: Vec::new(), batches: 0 }
    }

    /// Step 1: the fast path on one batch of at most [`BATCH`] keys, the first numbered `seq0`.
    pub fn receive(&mut self, dp: &mut dyn Design, keys: &[FlowKey], seq0: u64) -> (EpochWindow, &[DpAction]) {
        let window = EpochWindow { oldest: dp.oldest_epoch(), visible: dp.visible_epoch() };
        let n = keys.len();
        dp.process_batch(keys, seq0, &mut self.actions[..n]);
        self.batches += 1;
        (window, &self.actions[..n])
    }

    /// Step 2: the handler on everything queued.
    pub fn handle(&mut self, dp: &mut dyn Design) -> &[(u64, DpAction)] {
        self.upcalls.clear();
        self.upcalls.extend_from_slice(dp.handle_upcalls());
        &self.upcalls
    }

    /// Step 3: housekeeping at the batch boundary; megaflows deleted and the revalidations that
    /// finished.
    pub fn housekeep(&mut self, dp: &mut dyn Design) -> (u64, &[Revalidation]) {
        let deleted = dp.maintain();
        self.revalidations = dp.take_revalidations();
        (deleted, &self.revalidations)
    }

    /// One iteration: receive, handle, housekeep.
    pub fn run_batch(&mut self, dp: &mut dyn Design, keys: &[FlowKey], seq0: u64) -> BatchOutcome<'_> {
        let window = self.receive(dp, keys, seq0).0;
        self.upcalls.clear();
        self.upcalls.extend_from_slice(dp.handle_upcalls());
        let deleted = dp.maintain();
        self.revalidations = dp.take_revalidations();
        BatchOutcome {
            window,
            actions: &self.actions[..keys.len()],
            upcalls: &self.upcalls,
            deleted,
            revalidations: &self.revalidations,
        }
    }
}

/// Replays `keys` in order through the PMD loop, numbered from 0; returns each packet's final
/// action (upcalled packets get the handler's).
pub fn run_keys(dp: &mut dyn Design, keys: &[FlowKey]) -> Vec<DpAction> {
    run_keys_with_rules(dp, keys).0
}

/// [`run_keys`], with the rule each packet was attributed to ([`Design::batch_rules`],
/// [`Design::upcall_rules`]; [`rqvs_ofproto::NO_RULE`] for none).
pub fn run_keys_with_rules(dp: &mut dyn Design, keys: &[FlowKey]) -> (Vec<DpAction>, Vec<RuleId>) {
    let mut actions = vec![DpAction::Drop; keys.len()];
    let mut rules = vec![rqvs_ofproto::NO_RULE; keys.len()];
    let mut pmd = Pmd::new();
    for (b, chunk) in keys.chunks(BATCH).enumerate() {
        let base = b * BATCH;
        pmd.receive(dp, chunk, base as u64);
        actions[base..base + chunk.len()].copy_from_slice(&pmd.actions[..chunk.len()]);
        rules[base..base + chunk.len()].copy_from_slice(dp.batch_rules());
        pmd.handle(dp);
        let upcall_rules = dp.upcall_rules();
        for (i, &(seq, a)) in pmd.upcalls.iter().enumerate() {
            actions[seq as usize] = a;
            rules[seq as usize] = upcall_rules.get(i).copied().unwrap_or(rqvs_ofproto::NO_RULE);
        }
        pmd.housekeep(dp);
    }
    (actions, rules)
}
