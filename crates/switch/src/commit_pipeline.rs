//! **CFLOWS' commit path, pipelined**: an OpenFlow connection records its next run of
//! FLOW_MODs while the CFLOWS manager applies the previous one, so a stream's path per flow-mod
//! is the larger of the two threads' work, not their sum.
//!
//! [`Control::apply_each`] holds the table of record while the manager applies a run's change
//! set and answers; the connection's thread (decoding, the table-of-record transaction) and the
//! manager's (the learned classifier's inserts and removals) take turns. Here a run is *in
//! flight* once its change set is sent: the record keeps its transaction with an undo log
//! ([`rqvs_ofproto::record::Txn::keep_undoable_net`]) and the caller goes on. The caller's next run
//! ([`Control::apply_each_pipelined`]) is recorded on top of it, **then** waits for the
//! manager's answer to the one in flight, and only then is sent to the manager:
//!
//! - answered yes: the run in flight is done (its removed flows' counts settled, as
//!   [`Control::apply_each`] settles them), the new run is sent and is in flight in turn;
//! - refused: the new run's transaction is dropped (it undoes itself), the refused one is
//!   undone ([`rqvs_ofproto::record::FlowTable::undo`]: the record, ids included, is what it
//!   was before it), and the new run is recorded again from there — so every flow-mod after a
//!   refused run is accepted or refused, with the same effect and ids, exactly as
//!   [`Control::apply_each`] would have after the refusal. Every flow-mod of the refused run
//!   gets the error (as with [`Control::apply_each`]).
//!
//! **One run in flight at a time, and only its owner goes past it.** The run in flight is the
//! switch's, not the connection's: every other access to the table of record
//! (`Control::lock_rules`: another connection's flow-mods or flow stats, the expiry thread,
//! `rqvs ctl`) first finishes it — waits for the answer, settles or undoes — and keeps the
//! outcome for its owner ([`Control::settle_pipelined`]). So no one but the owner ever sees a
//! run the manager has not answered, and an undo never meets another transaction kept on top
//! of the one it takes back.
//!
//! **Which runs go in flight.** Only CFLOWS's, and only a run whose net change is all in
//! table 0 (the learned classifier): a change to a later table or a group is committed to the
//! shared OpenFlow table and waited for as before. A run stays in flight (a later run may be
//! recorded on top before its answer) only when settling it later cannot depend on the runs
//! after it: no flow it replaced or modified (no counts carried to a flow a later run may
//! remove), no deleted flow that owes a FLOW_REMOVED, and no flow monitor watching; otherwise
//! its answer is waited for at once, as [`Control::apply_each`] does.
//!
//! **OpenFlow's ordering** (the connection's side, `openflow::connection`): the errors of a
//! run's refused flow-mods are sent once the run's outcome is known, in the order the
//! flow-mods came, before anything the connection sends for a later message; a BARRIER_REQUEST
//! that arrives while a run is in flight is answered once that run is answered (and after its
//! errors) — everything before the barrier is then in the datapath — and the FLOW_MODs after
//! the barrier are recorded meanwhile but reach the manager only after that answer, so none is
//! applied before the barrier completes; any other message first waits for the run in flight.

use std::collections::HashMap;
use std::sync::mpsc;

use rqvs_flow::{Rule, RuleId};
use rqvs_ofproto::record::{FlowTable, KeptTxn, NetChange, OpEffect, OpError};
use rqvs_ofproto::DpAction;
use rqvs_openflow::flow_mod::OFPFF_SEND_FLOW_REM;

use crate::events::Event;
use crate::{manager, Control, DesignKind, FlowOp, APPLY_WAIT};

/// The run in flight, if any, and the outcomes of runs finished by someone other than their
/// owner (module docs). Locked only with the table of record held.
#[derive(Default)]
pub(crate) struct InFlight {
    run: Option<Run>,
    done: HashMap<u64, Result<(), String>>,
}

/// A run whose change set the manager has not answered yet.
struct Run {
    owner: u64,
    answer: mpsc::Receiver<Result<(), String>>,
    kept: KeptTxn,
    net: NetChange,
    now_ns: u64,
    /// Whether a later run may be recorded on top of it before its answer (module docs).
    overlap: bool,
}

/// What [`Control::apply_each_pipelined`] did.
pub struct Piped {
    /// The outcome of the caller's run that was in flight when the call began (`None`: there
    /// was none): `Err` — the manager refused it; every flow-mod of it is refused with this.
    pub before: Option<Result<(), String>>,
    /// Each flow-mod's effect or error in the table of record. When `pending`, final only once
    /// the run's own outcome is known (the next call's `before`, or
    /// [`Control::settle_pipelined`]).
    pub effects: Vec<Result<OpEffect, OpError>>,
    /// Whether this run is in flight.
    pub pending: bool,
}

impl Control {
    /// [`Control::apply_each`] for one OpenFlow connection's stream (`owner`: the connection's
    /// id), pipelined (module docs). Outside CFLOWS it is [`Control::apply_each`].
    pub fn apply_each_pipelined(&self, owner: u64, ops: &[FlowOp]) -> Piped {
        if self.design != DesignKind::Cflows {
            return Piped { before: self.settle_pipelined(owner), effects: self.apply_each(ops), pending: false };
        }
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        let mut slot = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
        let mut events = Vec::new();
        let mut before = slot.done.remove(&owner);
        let prev = match slot.run.take() {
            Some(r) if r.owner == owner && r.overlap => Some(r),
            Some(r) => {
                let (who, (outcome, ev)) = (r.owner, self.finish(&mut rules, r));
                events.extend(ev);
                if who == owner {
                    before = Some(outcome);
                } else {
                    slot.done.insert(who, outcome);
                }
                None
            }
            None => None,
        };
        let now_ns = self.clock_ns();
        // This run recorded on top of the one in flight, while the manager applies that one.
        let (mut txn, mut effects) = record(&mut rules, ops, now_ns);
        let mut settle_prev = None;
        if let Some(p) = prev {
            match wait(&p.answer) {
                Ok(()) => {
                    before = Some(Ok(()));
                    settle_prev = Some(p);
                }
                Err(e) => {
                    // Refused: this run goes, the refused one is taken back, this run again.
                    drop(txn);
                    rules.undo(p.kept, p.net);
                    before = Some(Err(e));
                    (txn, effects) = record(&mut rules, ops, now_ns);
                }
            }
        }
        let (empty, table0_only) = txn.net_shape();
        if empty || !table0_only {
            // Nothing for the manager, or a change beyond table 0: the path that waits.
            drop(txn);
            if let Some(p) = settle_prev {
                events.extend(self.settle_counts(&mut rules, &p.net, p.now_ns));
            }
            drop(slot);
            drop(rules);
            self.emit(events);
            return Piped { before, effects: self.apply_each(ops), pending: false };
        }
        let (mut net, kept) = txn.keep_undoable_net();
        let overlap = net.heir.is_empty()
            && !crate::events::watched()
            && net.deleted.iter().all(|(_, m, _)| m.flags & OFPFF_SEND_FLOW_REM == 0);
        // The added flows go to the manager; a run settled later keeps them only for the flow
        // monitors (none watch when it stays in flight).
        let added: Vec<Rule> = if overlap { std::mem::take(&mut net.added) } else { net.added.clone() };
        let added = added.into_iter().zip(std::mem::take(&mut net.actions)).collect();
        let removed: Vec<RuleId> = net.removed.iter().map(|r| r.id).collect();
        *self.trace_table.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let answer = self.send_change(added, removed);
        // The run before, answered: its removed flows' counts (none carried to a later flow:
        // it had no heir) and events.
        if let Some(p) = settle_prev {
            events.extend(self.settle_counts(&mut rules, &p.net, p.now_ns));
        }
        let mut pending = false;
        match answer {
            Some(answer) if overlap => {
                slot.run = Some(Run { owner, answer, kept, net, now_ns, overlap });
                pending = true;
            }
            Some(answer) => match wait(&answer) {
                Ok(()) => events.extend(self.settle_counts(&mut rules, &net, now_ns)),
                Err(e) => {
                    rules.undo(kept, net);
                    effects = ops.iter().map(|_| Err(OpError::Invalid(e.clone()))).collect();
                }
            },
            None => events.extend(self.settle_counts(&mut rules, &net, now_ns)),
        }
        drop(slot);
        drop(rules);
        self.emit(events);
        Piped { before, effects, pending }
    }

    /// Finishes `owner`'s run in flight, if it has one, and returns its outcome (also when
    /// someone else finished it: module docs); `None` when it has none.
    pub fn settle_pipelined(&self, owner: u64) -> Option<Result<(), String>> {
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        let mut slot = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
        if slot.run.as_ref().is_some_and(|r| r.owner == owner) {
            let r = slot.run.take().expect("checked");
            let (outcome, events) = self.finish(&mut rules, r);
            drop(slot);
            drop(rules);
            self.emit(events);
            return Some(outcome);
        }
        slot.done.remove(&owner)
    }

    /// Finishes the run in flight, whoever's it is, keeping its outcome for its owner: the
    /// table of record is then settled for anyone holding it (`Control::lock_rules`). The
    /// events of that run (flow monitors that started watching meanwhile) are returned.
    pub(crate) fn finish_in_flight(&self, rules: &mut FlowTable) -> Vec<Event> {
        let mut slot = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
        let Some(r) = slot.run.take() else { return Vec::new() };
        let owner = r.owner;
        let (outcome, events) = self.finish(rules, r);
        slot.done.insert(owner, outcome);
        events
    }

    /// Waits for `r`'s answer; settles it (yes) or undoes it (refused).
    fn finish(&self, rules: &mut FlowTable, r: Run) -> (Result<(), String>, Vec<Event>) {
        match wait(&r.answer) {
            Ok(()) => (Ok(()), self.settle_counts(rules, &r.net, r.now_ns)),
            Err(e) => {
                rules.undo(r.kept, r.net);
                (Err(e), Vec::new())
            }
        }
    }

    /// Sends a change set to the CFLOWS manager without waiting; its answer's receiver (`None`:
    /// no manager, or it is gone — nothing to wait for, as [`Control::apply_each`] treats it).
    fn send_change(
        &self,
        add: Vec<(Rule, DpAction)>,
        remove: Vec<RuleId>,
    ) -> Option<mpsc::Receiver<Result<(), String>>> {
        let manager = self.manager.lock().unwrap_or_else(|e| e.into_inner());
        let m = manager.as_ref()?;
        let (answer, r) = mpsc::channel();
        m.send(manager::ManagerMsg { remove, add, answer }).ok()?;
        Some(r)
    }
}

/// A transaction of `ops` on `rules`, and each op's effect.
fn record<'a>(
    rules: &'a mut FlowTable,
    ops: &[FlowOp],
    now_ns: u64,
) -> (rqvs_ofproto::record::Txn<'a>, Vec<Result<OpEffect, OpError>>) {
    let mut txn = rules.txn(now_ns);
    let mut effects = Vec::with_capacity(ops.len());
    txn.apply_run(ops, |e| {
        effects.push(e);
        true
    });
    (txn, effects)
}

/// The manager's answer, as [`Control::apply_each`] takes it: one not given within
/// [`APPLY_WAIT`] is logged and taken as a yes (the manager applies it when it gets to it), and
/// a manager gone (the switch stopping) is a yes too.
fn wait(answer: &mpsc::Receiver<Result<(), String>>) -> Result<(), String> {
    match answer.recv_timeout(APPLY_WAIT) {
        Ok(Err(e)) => Err(format!("flow-mod: the learned classifier refused the rules: {e}")),
        Err(mpsc::RecvTimeoutError::Timeout) => {
            crate::log_warn!(
                "rqvs switch: the CFLOWS manager has not applied a change after {} s; not waiting any longer",
                APPLY_WAIT.as_secs()
            );
            Ok(())
        }
        Ok(Ok(())) | Err(mpsc::RecvTimeoutError::Disconnected) => Ok(()),
    }
}
