//! **CFLOWS with one learned classifier for every PMD** (the switch's arrangement; NSDI'22 §6:
//! one trainer for all models, PMDs that only read).
//!
//! - [`CflowsPublisher`] is the one place the rules change: it owns the live classifier
//!   ([`LiveNuevoMatch`], whose training runs on its own thread, one session at a time) and the
//!   actions, and after every change set and every model swap it **publishes** a copy — the
//!   classifier as lookups see it, the actions, an EMC generation — with one atomic pointer swap
//!   ([`arc_swap::ArcSwap`]). **Two copies, left-right, one of them the master's**: the master
//!   (the live classifier the trainer works from) takes a change set and its model is then
//!   published *as it is* — no copy; the publication it replaces (the *twin*: the same rules
//!   but that change set) takes the change set once no PMD reads it any more and goes back into
//!   the master ([`CflowsPublisher::catch_up`], which the manager calls after answering, off
//!   the commit's path). So a change set is applied twice, once before the PMDs see it, never
//!   a copy of the classifier; until the next change set, the master holds an empty
//!   placeholder. Every reader's hold ends with its batch; the publisher waits up to
//!   [`SPARE_WAIT`] for that, then copies the current publication instead (O(rules)), and
//!   drops the one still read once its reader lets go (never a PMD freeing a classifier). A
//!   model swap (and a refused change set, which is rolled back) publishes a fresh copy —
//!   O(rules) (tens of milliseconds at 100K rules), paid by the publisher's thread, never by a
//!   PMD — and the left-right pair starts again from it. (Before, the master kept a third copy
//!   of its own, and each change set was applied three times.)
//! - [`SharedCflows`] is a PMD's design: its own EMC and counters over the latest publication,
//!   loaded once per batch without a lock (an `ArcSwap` load is a few atomic operations) — so a
//!   batch sees one rule set, and every batch after a publication sees the new one. EMC entries
//!   name the generation they were made under; a publication that changes the rules bumps it,
//!   retiring them all (as [`crate::Cflows`] does on each insert).
//! - Rules change only through the publisher: [`Design::add_rules`] / [`Design::remove_rules`]
//!   on a [`SharedCflows`] are refused (the switch routes `add-flows`/`del-flows` to the
//!   publisher's thread).
//!
//! One copy of the classifier serves N PMDs (N private [`crate::Cflows`] would hold N, each
//! training on its own), at the cost of a second application of each change set.

use std::sync::Arc;

use arc_swap::ArcSwap;
use rqvs_classify::nuevomatch::live::{LiveNuevoMatch, Policy};
use rqvs_classify::nuevomatch::{KeptForm, NuevoMatchUp, Placement};
use rqvs_classify::{Classifier, ClassifierError};
use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::cflows::{fast_path, report_of, report_with, with_gauges, ActionTable, CflowsConfig, RuleRef, Table};
use crate::cflows_pipeline::{continues, rule_action, Walker};
use crate::counters::Counters;
use crate::design::{CflowsReport, Design, DesignReport};
use crate::emc::Emc;
use crate::DatapathConfig;
use rqvs_ofproto::later_tables::LaterConfig;
use rqvs_ofproto::DpAction;

/// What the PMDs read: one publication of the classifier.
pub struct Published {
    nm: NuevoMatchUp,
    table: Table,
    /// Changes with every publication whose rules differ from the previous one.
    epoch: u64,
    report: CflowsReport,
    /// Rules held, staged included.
    rules: u64,
}

/// The owner of the shared classifier (module docs).
pub struct CflowsPublisher {
    /// The master: the live classifier the trainer works from. Its model is one of the two
    /// left-right copies — except between a publication of it and the end of its twin's catch-up
    /// ([`CflowsPublisher::restore`]), when it holds `placeholder`'s empty model and `twin` is set.
    nm: LiveNuevoMatch,
    actions: ActionTable,
    gen: u32,
    epoch: u64,
    swaps_seen: usize,
    out: Arc<ArcSwap<Published>>,
    /// The publication before the current one, and the change sets it lacks: the master's model
    /// once it has caught up (module docs).
    twin: Option<Twin>,
    /// An empty model, held by the master while its own model is published and its twin not
    /// yet back (`None` then: it is in the master).
    placeholder: Option<NuevoMatchUp>,
    /// The actions of the master's model's last publication, caught up: the next publication's.
    spare_table: Option<ActionTable>,
    /// Publications of the master's model (with the copy it replaced becoming the master's),
    /// and fresh copies.
    publications: (u64, u64),
    /// Publications replaced while a PMD still read them, dropped here once it no longer does
    /// (so no PMD ever frees a classifier of 500K rules).
    retired: Vec<Arc<Published>>,
    /// The index of the tables after 0 the readers' walks keep ([`rqvs_ofproto::later_tables`]).
    later: LaterConfig,
}

/// The publication the master's model comes back from, and the change sets it lacks.
struct Twin {
    p: Arc<Published>,
    lag: Vec<Mirror>,
}

/// How long the publisher waits for the PMDs to let go of the twin before copying instead.
pub const SPARE_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

/// One change set as the master's classifier took it, for the twin: the rules removed from it,
/// the rules inserted into it (instant policy; staged rules are not in it) with the stored form
/// the master keeps of each (the twin keeps the same one) and where the master placed it (the
/// twin places it alike, without running the model: the two share it), and the actions.
struct Mirror {
    removed: Vec<RuleId>,
    inserted: Vec<(Arc<Rule>, Option<KeptForm>, Option<Placement>)>,
    actions: Vec<(u32, Option<DpAction>)>,
}

impl Mirror {
    /// Applies the change set to a publication; false (and `p` part-changed, to be dropped)
    /// when its classifier refuses a rule.
    #[must_use]
    fn apply(&self, p: &mut Published) -> bool {
        for (i, &id) in self.removed.iter().enumerate() {
            p.nm.prefetch_removals(&self.removed, i);
            p.nm.remove_id(id);
        }
        for (i, (r, form, placed)) in self.inserted.iter().enumerate() {
            p.nm.prefetch_placed(&self.inserted, i, |(r, ..)| r, |&(_, _, placed)| placed);
            if p.nm.insert_placed(r, form.clone(), *placed).is_err() {
                return false;
            }
        }
        self.apply_actions(&mut p.table.actions);
        true
    }

    fn apply_actions(&self, t: &mut ActionTable) {
        for &(id, a) in &self.actions {
            match a {
                // Held by the master's table already ([`CflowsPublisher::change_acted`]).
                Some(a) => {
                    t.insert(id, a);
                }
                None => t.remove(id),
            }
        }
    }
}

/// `arc` once no one else holds it (within [`SPARE_WAIT`]; `Err(arc)` when someone still does).
fn exclusive(mut arc: Arc<Published>) -> Result<Arc<Published>, Arc<Published>> {
    let t0 = std::time::Instant::now();
    loop {
        if Arc::get_mut(&mut arc).is_some() {
            return Ok(arc);
        }
        if t0.elapsed() > SPARE_WAIT {
            return Err(arc);
        }
        std::thread::yield_now();
    }
}

impl CflowsPublisher {
    /// Trains the first model (synchronously) and publishes it.
    pub fn new(rules: &[Rule], learned: CflowsConfig) -> Result<CflowsPublisher, ClassifierError> {
        let nm = learned.build(rules)?;
        let actions: ActionTable = rules.iter().map(|r| (r.id.0, rule_action(r))).collect();
        let first = publication(&nm, &actions, 0, 0);
        Ok(CflowsPublisher {
            nm,
            actions,
            gen: 0,
            epoch: 0,
            swaps_seen: 0,
            out: Arc::new(ArcSwap::from_pointee(first)),
            twin: None,
            placeholder: Some(NuevoMatchUp::build(&[])?),
            spare_table: None,
            publications: (0, 1),
            retired: Vec::new(),
            later: learned.later(),
        })
    }

    /// A PMD's design over this publisher's classifier.
    pub fn reader(&self, cfg: DatapathConfig) -> SharedCflows {
        self.readers().reader(cfg)
    }

    /// What makes readers on other threads once the publisher has moved to its own
    /// (`--design auto` in the switch builds a CFLOWS candidate with it).
    pub fn readers(&self) -> CflowsReaders {
        CflowsReaders { shared: self.out.clone(), later: self.later }
    }

    /// Adds rules as one change set (all or none), then publishes.
    pub fn add_rules(&mut self, rules: Vec<Rule>) -> Result<(), ClassifierError> {
        self.change(&[], rules)
    }

    /// Removes rules (absent ids ignored), then publishes.
    pub fn remove_rules(&mut self, ids: &[RuleId]) {
        // Removals alone cannot fail.
        let _ = self.change(ids, Vec::new());
    }

    /// One change set — `remove` (absent ids ignored), then `add` (all or none) — published
    /// once, so no PMD ever sees the table between the two (OpenFlow's add that replaces a
    /// flow). Ids are checked before anything changes; a rule the classifier refuses later
    /// (none of the switch's do: `check_rules` runs first) puts the removed rules back — under
    /// the delayed policy they then wait, staged, for the next model.
    ///
    /// The master's model takes the change set and is then published as it is (module docs):
    /// one application of it before the PMDs see it; the publication it replaces takes it
    /// after ([`CflowsPublisher::catch_up`]) and becomes the master's model.
    pub fn change(&mut self, remove: &[RuleId], add: Vec<Rule>) -> Result<(), ClassifierError> {
        let add = add
            .into_iter()
            .map(|r| {
                let a = rule_action(&r);
                (r, a)
            })
            .collect();
        self.change_acted(remove, add)
    }

    /// [`CflowsPublisher::change`] with each added rule's datapath action already made
    /// ([`DpAction::from_rule`]'s, or [`rule_action`]'s): the switch's table of record holds
    /// every flow's action list and hands its id over (`NetChange::actions`), so the action
    /// table is not searched again for it. A rule that continues the pipeline is `Pending`
    /// whatever it is given.
    pub fn change_acted(&mut self, remove: &[RuleId], add: Vec<(Rule, DpAction)>) -> Result<(), ClassifierError> {
        self.restore();
        // Ids first, before anything changes: an id held (and not removed here) or given twice.
        let mut ids = hashbrown::HashSet::with_capacity(add.len());
        let removing: hashbrown::HashSet<RuleId> = remove.iter().copied().collect();
        for (i, (r, _)) in add.iter().enumerate() {
            self.nm.current().prefetch_ids(&add, i, |(r, _)| r.id);
            if !ids.insert(r.id) || (!removing.contains(&r.id) && self.nm.holds(r.id)) {
                return Err(ClassifierError::DuplicateId(r.id));
            }
        }
        let instant = self.nm.policy() == Policy::Instant;
        // The change set as the master's classifier takes it: the rules it holds go, every
        // added rule goes in (instant policy; staged rules are not in it).
        let mut mirror = Mirror { removed: Vec::new(), inserted: Vec::new(), actions: Vec::new() };
        // The rules removed, to put back should an addition be refused. Under the instant
        // policy they are in the current publication (the master's rules before this change
        // set) and are fetched from it only then; staged rules (delayed) are the master's alone.
        let mut removed: Vec<Rule> = Vec::new();
        for (i, &id) in remove.iter().enumerate() {
            self.nm.current().prefetch_removals(remove, i);
            let staged = if instant { None } else { self.nm.rule(id) };
            if self.nm.remove(id) {
                self.actions.remove(id.0);
                mirror.removed.push(id);
                mirror.actions.push((id.0, None));
                removed.extend(staged);
            }
        }
        if add.is_empty() && mirror.removed.is_empty() {
            return Ok(());
        }
        let add: Vec<(Arc<Rule>, DpAction)> = add
            .into_iter()
            .map(|(r, a)| {
                let a = if continues(&r) { DpAction::Pending } else { a };
                (Arc::new(r), a)
            })
            .collect();
        let mut added = Vec::with_capacity(add.len());
        let mut refused = None;
        for (i, (r, action)) in add.iter().enumerate() {
            self.nm.current().prefetch_inserts(&add, i, |(r, _)| r);
            let (id, mut action) = (r.id, *action);
            if let Err(e) = self.nm.insert_shared(Arc::clone(r)) {
                refused = Some(e);
                break;
            }
            if !self.actions.insert(id.0, action) {
                // The list handed over was freed: its flow left the table of record while this
                // change set waited (more than the action table's grace period). Made again.
                action = rule_action(r);
                self.actions.insert(id.0, action);
            }
            // Held now, so the search finds that very list.
            debug_assert_eq!(action, rule_action(r), "rule {}: the action handed over is the rule's", id.0);
            mirror.actions.push((id.0, Some(action)));
            if instant {
                let master = self.nm.current();
                mirror.inserted.push((Arc::clone(r), master.kept_form(id), master.placement(id)));
            }
            added.push(id);
        }
        if let Some(e) = refused {
            for id in added {
                self.nm.remove(id);
                self.actions.remove(id.0);
            }
            if instant {
                let before = self.out.load();
                removed = mirror.removed.iter().filter_map(|&id| before.nm.rule(id)).collect();
            }
            for r in removed {
                let (id, action) = (r.id, rule_action(&r));
                self.nm.insert(r).expect("a rule the classifier held before goes back in");
                self.actions.insert(id.0, action);
            }
            self.next_gen();
            self.publish();
            return Err(e);
        }
        // Any insert retires the EMC (see `Cflows::add_rules`), under both policies.
        if !add.is_empty() {
            self.next_gen();
        }
        if !mirror.removed.is_empty() || instant {
            self.epoch += 1;
        }
        self.publish_change(mirror);
        Ok(())
    }

    /// Publishes the master's model, which just took `m`, as it is; the publication it
    /// replaces becomes the twin, lacking `m`. A model swapped in but not yet published (not
    /// a case the manager makes: only [`CflowsPublisher::poll`] swaps) publishes a fresh copy.
    fn publish_change(&mut self, m: Mirror) {
        if self.nm.sessions().len() != self.swaps_seen {
            self.publish();
            return;
        }
        debug_assert!(self.twin.is_none(), "restore() ran first");
        let Some(placeholder) = self.placeholder.take() else {
            self.publish();
            return;
        };
        let actions = match self.spare_table.take() {
            Some(mut t) => {
                m.apply_actions(&mut t);
                t
            }
            None => self.actions.clone(),
        };
        let report = report_with(self.nm.current(), &self.nm);
        let rules = (self.nm.current().len() + self.nm.staged()) as u64;
        let nm = self.nm.replace_current(placeholder);
        let p = Published { nm, table: Table { actions, gen: self.gen }, epoch: self.epoch, report, rules };
        let old = self.out.swap(Arc::new(p));
        self.publications.0 += 1;
        self.twin = Some(Twin { p: old, lag: vec![m] });
    }

    /// Makes the master whole again: its twin (the publication before the current one) takes
    /// the change sets it lacks and becomes the master's model, its actions the next
    /// publication's. When a PMD still reads the twin after [`SPARE_WAIT`] (or the twin refuses
    /// a rule), the master's model is a copy of the current publication instead — O(rules),
    /// never wrong.
    fn restore(&mut self) {
        self.retired.retain(|p| Arc::strong_count(p) > 1);
        let Some(Twin { p, lag }) = self.twin.take() else { return };
        let caught_up = match exclusive(p) {
            Ok(p) => {
                let mut p = Arc::try_unwrap(p).ok().expect("exclusive() returned it unshared");
                // The master took all of them, so this copy of its classifier does (checked).
                lag.iter().all(|l| l.apply(&mut p)).then_some((p.nm, p.table.actions))
            }
            Err(p) => {
                self.retired.push(p);
                None
            }
        };
        let (model, actions) = caught_up.unwrap_or_else(|| {
            self.publications.1 += 1;
            (self.out.load().nm.clone(), self.actions.clone())
        });
        self.placeholder = Some(self.nm.replace_current(model));
        self.spare_table = Some(actions);
    }

    /// Brings the master's model back (its twin caught up to the current publication, or a copy of it):
    /// the manager calls this after answering a change, taking the twin's application of the
    /// change set off the commit's path. Any call that needs the master does it first.
    pub fn catch_up(&mut self) {
        self.restore();
    }

    /// Publications so far: (of the master's model, with the copy it replaced catching up to
    /// become the master's; fresh copies).
    pub fn publications(&self) -> (u64, u64) {
        self.publications
    }

    /// Swaps a trained model in when one is ready (and starts training when due); publishes on
    /// a swap. True when it published.
    pub fn poll(&mut self) -> bool {
        // The trainer's snapshot is taken from the master's model.
        self.restore();
        self.nm.poll();
        let swaps = self.nm.sessions().len();
        if swaps == self.swaps_seen {
            return false;
        }
        self.swaps_seen = swaps;
        if self.nm.policy() == Policy::Delayed {
            // Staged rules just became visible.
            self.next_gen();
            self.epoch += 1;
        }
        self.publish();
        true
    }

    /// Waits for a running training and publishes its model.
    pub fn settle(&mut self) {
        self.restore();
        self.nm.finish_training();
        self.poll();
    }

    /// The live classifier (tests, reports), its master's model brought back first.
    pub fn classifier(&mut self) -> &LiveNuevoMatch {
        self.restore();
        &self.nm
    }

    fn next_gen(&mut self) {
        // Generation u32::MAX is RuleRef::NONE's: skipped, so an empty entry is never live.
        self.gen = match self.gen.wrapping_add(1) {
            u32::MAX => 0,
            g => g,
        };
    }

    /// Publishes a fresh copy of the master (made whole first); the left-right pair starts
    /// again from it (a model swap, a rolled-back change set).
    fn publish(&mut self) {
        self.restore();
        let old = self.out.swap(Arc::new(publication(&self.nm, &self.actions, self.gen, self.epoch)));
        self.publications.1 += 1;
        if Arc::strong_count(&old) > 1 {
            self.retired.push(old);
        }
        self.spare_table = None;
    }
}

fn publication(nm: &LiveNuevoMatch, actions: &ActionTable, gen: u32, epoch: u64) -> Published {
    let rules = (nm.current().len() + nm.staged()) as u64;
    Published {
        nm: nm.current().clone(),
        table: Table { actions: actions.clone(), gen },
        epoch,
        report: report_of(nm),
        rules,
    }
}

/// Makes [`SharedCflows`] over one publisher's classifier, from any thread.
#[derive(Clone)]
pub struct CflowsReaders {
    shared: Arc<ArcSwap<Published>>,
    later: LaterConfig,
}

impl CflowsReaders {
    /// A PMD's design over the publisher's classifier.
    pub fn reader(&self, cfg: DatapathConfig) -> SharedCflows {
        SharedCflows {
            emc: Emc::with_entries(cfg.emc_entries, cfg.emc_insert_prob, cfg.seed),
            shared: self.shared.clone(),
            c: Counters::default(),
            now_ns: 0,
            rules: [rqvs_ofproto::NO_RULE; crate::BATCH],
            batch_len: 0,
            walker: None,
            later: self.later,
            cfg,
        }
    }
}

/// A PMD's CFLOWS over the shared classifier (module docs).
pub struct SharedCflows {
    cfg: DatapathConfig,
    emc: Emc<RuleRef>,
    shared: Arc<ArcSwap<Published>>,
    c: Counters,
    now_ns: u64,
    /// Each packet's winner in the last batch ([`Design::batch_rules`]) and the batch's size.
    rules: [RuleId; crate::BATCH],
    batch_len: usize,
    /// The pipeline past table 0 ([`crate::cflows_pipeline`]); `None`: table 0 only (a rule
    /// that continues the pipeline then drops).
    walker: Option<Walker>,
    later: LaterConfig,
}

impl SharedCflows {
    /// Walks the tables after 0 and the groups in `rest` (the switch's shared table of them) for
    /// packets whose table-0 rule continues the pipeline.
    pub fn with_pipeline(mut self, rest: rqvs_ofproto::OfprotoTable) -> SharedCflows {
        self.walker = Some(Walker::new(rest, self.later));
        self
    }
}

impl Design for SharedCflows {
    fn name(&self) -> &'static str {
        "cflows"
    }

    fn process_batch(&mut self, keys: &[FlowKey], _seq0: u64, out: &mut [DpAction]) {
        let p = self.shared.load();
        let t0 = fast_path(
            &self.cfg,
            &mut self.emc,
            &p.nm,
            &p.table,
            &mut self.c,
            keys,
            out,
            &mut self.rules,
            self.walker.as_mut(),
            p.epoch,
        );
        self.batch_len = keys.len();
        self.now_ns += self.cfg.clock.batch_ns(t0, keys.len());
    }

    fn handle_upcalls(&mut self) -> &[(u64, DpAction)] {
        &[]
    }

    fn batch_rules(&self) -> &[RuleId] {
        &self.rules[..self.batch_len]
    }

    fn maintain(&mut self) -> u64 {
        0
    }

    fn add_rules(&mut self, rules: Vec<Rule>) -> Result<u64, ClassifierError> {
        let id = rules.first().map_or(RuleId(0), |r| r.id);
        Err(ClassifierError::Unsupported(id, "a shared CFLOWS classifier changes through its publisher".into()))
    }

    fn remove_rules(&mut self, _ids: &[RuleId]) -> u64 {
        0
    }

    fn counters(&self) -> Counters {
        let p = self.shared.load();
        with_gauges(self.c, p.rules, &p.report, self.now_ns, &self.emc)
    }

    fn now_ns(&self) -> u64 {
        self.now_ns
    }

    fn idle_until(&mut self, ns: u64) {
        self.now_ns = self.now_ns.max(ns);
    }

    fn visible_epoch(&self) -> u64 {
        self.shared.load().epoch
    }

    fn report(&self) -> DesignReport {
        let r = self.shared.load().report;
        DesignReport::Cflows(match &self.walker {
            Some(w) => w.with_later(r),
            None => r,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{expect, expect_rules, keys, rules};
    use crate::BATCH;

    fn virtual_cfg(seed: u64) -> DatapathConfig {
        DatapathConfig {
            emc_insert_prob: 1.0,
            clock: crate::Clock::Virtual { packet_ns: 100, upcall_ns: 0 },
            seed,
            ..DatapathConfig::default()
        }
    }

    fn run(dp: &mut SharedCflows, keys: &[FlowKey]) -> Vec<DpAction> {
        run_attributed(dp, keys).0
    }

    /// Each packet's action and the rule it was attributed to.
    fn run_attributed(dp: &mut SharedCflows, keys: &[FlowKey]) -> (Vec<DpAction>, Vec<RuleId>) {
        let mut out = vec![DpAction::Drop; keys.len()];
        let mut attributed = Vec::with_capacity(keys.len());
        for (i, chunk) in keys.chunks(BATCH).enumerate() {
            dp.process_batch(chunk, 0, &mut out[i * BATCH..i * BATCH + chunk.len()]);
            attributed.extend_from_slice(dp.batch_rules());
        }
        (out, attributed)
    }

    /// Random change sets through the publisher (adds, some under removed ids; removals; model
    /// swaps under both policies): two PMDs reading the one classifier, each with its own EMC
    /// inserting every miss, give every packet the reference's action over the visible rules.
    #[test]
    fn two_readers_follow_every_publication() {
        let pool = rules(300);
        let keys = keys(600, 0);
        let mut incremental = 0;
        for seed in 0..40u64 {
            let mut rng = rqvs_flow::rng::Rng::new(seed);
            let policy = if seed % 2 == 0 { Policy::Instant } else { Policy::Delayed };
            let learned = CflowsConfig { policy, retrain_threshold: 0.05, ..CflowsConfig::default() };
            let mut live: Vec<Rule> = pool[..150].to_vec();
            let mut removed: Vec<RuleId> = Vec::new();
            let mut publisher = CflowsPublisher::new(&live, learned).unwrap();
            let mut pmds = [publisher.reader(virtual_cfg(1)), publisher.reader(virtual_cfg(2))];
            for step in 0..12 {
                match rng.index(3) {
                    0 => {
                        let mut add: Vec<Rule> = Vec::new();
                        for _ in 0..(1 + rng.index(19)) {
                            let mut r = pool[rng.index(pool.len())].clone();
                            r.id = if !removed.is_empty() && rng.chance(0.5) {
                                removed[rng.index(removed.len())]
                            } else {
                                RuleId(rng.below(400) as u32)
                            };
                            r.actions = rqvs_flow::Actions::output(1000 + step);
                            if !live.iter().chain(&add).any(|x| x.id == r.id) {
                                add.push(r);
                            }
                        }
                        live.extend(add.iter().cloned());
                        publisher.add_rules(add).unwrap();
                    }
                    1 if !live.is_empty() => {
                        let n = (1 + rng.index(9)).min(live.len());
                        let gone: Vec<RuleId> = (0..n).map(|_| live[rng.index(live.len())].id).collect();
                        live.retain(|r| !gone.contains(&r.id));
                        removed.extend(&gone);
                        publisher.remove_rules(&gone);
                    }
                    _ => publisher.settle(),
                }
                // As the switch's manager does after answering a change (half the time here,
                // so both the caught-up and the lagging spare are exercised).
                if step % 2 == 0 {
                    publisher.catch_up();
                }
                let staged = publisher.classifier().staged_ids();
                let visible: Vec<Rule> = live.iter().filter(|r| !staged.contains(&r.id)).cloned().collect();
                let want = expect(&visible, &keys);
                let winners = expect_rules(&visible, &keys);
                for (i, dp) in pmds.iter_mut().enumerate() {
                    let (got, attributed) = run_attributed(dp, &keys);
                    assert_eq!(got, want, "seed {seed} step {step} PMD {i}");
                    assert_eq!(attributed, winners, "seed {seed} step {step} PMD {i}");
                    assert!(dp.counters().outcome_sum_ok());
                }
            }
            assert!(pmds.iter().all(|p| p.counters().emc_hit > 0));
            incremental += publisher.publications().0;
        }
        // The left-right path ran (each seed has change sets in a row without a model swap).
        assert!(incremental > 40, "publications through the spare: {incremental}");
    }

    /// A replace (removal and addition in one change set) is one publication: no PMD can see
    /// the table with the old rule gone and the new one not there yet. A refused addition puts
    /// the removed rule back.
    #[test]
    fn a_replace_is_one_publication_and_a_refusal_changes_nothing() {
        let all = rules(60);
        let keys = keys(600, 0);
        for policy in [Policy::Instant, Policy::Delayed] {
            let mut publisher =
                CflowsPublisher::new(&all, CflowsConfig { policy, retrain_threshold: 0.1, ..CflowsConfig::default() })
                    .unwrap();
            let mut dp = publisher.reader(virtual_cfg(0));
            assert_eq!(run(&mut dp, &keys), expect(&all, &keys));
            let e0 = dp.visible_epoch();
            let mut new = all[5].clone();
            new.id = RuleId(1000);
            new.actions = rqvs_flow::Actions::output(77);
            publisher.change(&[all[5].id], vec![new.clone()]).unwrap();
            assert_eq!(dp.visible_epoch(), e0 + 1, "{policy:?}: one publication");
            publisher.settle();
            let mut now: Vec<Rule> = all.iter().filter(|r| r.id != all[5].id).cloned().collect();
            now.push(new.clone());
            // Delayed: the new rule waits, staged, for a model (the old one is gone at once).
            let staged = publisher.classifier().staged_ids();
            let now: Vec<Rule> = now.into_iter().filter(|r| !staged.contains(&r.id)).collect();
            assert_eq!(run(&mut dp, &keys), expect(&now, &keys), "{policy:?}");
            // Adding an id already held is refused: the removal in the same set is undone.
            let e1 = dp.visible_epoch();
            assert!(publisher.change(&[all[7].id], vec![new.clone()]).is_err());
            assert_eq!(dp.visible_epoch(), e1, "{policy:?}: nothing published");
            assert_eq!(run(&mut dp, &keys), expect(&now, &keys), "{policy:?}: nothing changed");
        }
    }

    /// A publication a PMD still holds when the next change set comes (beyond [`SPARE_WAIT`])
    /// cannot become the master's model: the master takes a copy of the current publication
    /// instead, the held one is dropped by the publisher once let go, and every publication
    /// after stays exact — under both policies, with the master's model handed out and
    /// brought back between change sets.
    #[test]
    fn a_twin_still_read_is_copied_and_later_publications_stay_exact() {
        let pool = rules(120);
        let keys = keys(600, 1);
        for policy in [Policy::Instant, Policy::Delayed] {
            let learned = CflowsConfig { policy, retrain_threshold: 0.5, ..CflowsConfig::default() };
            let mut live: Vec<Rule> = pool[..80].to_vec();
            let mut publisher = CflowsPublisher::new(&live, learned).unwrap();
            let mut dp = publisher.reader(virtual_cfg(3));
            let readers = publisher.readers();
            for (step, chunk) in pool[80..].chunks(10).enumerate() {
                // A PMD in the middle of a batch on the publication about to be replaced.
                let held = readers.shared.load_full();
                publisher.add_rules(chunk.to_vec()).unwrap();
                live.extend(chunk.iter().cloned());
                let gone = [live[step * 3].id, live[step * 3 + 1].id];
                let copies = publisher.publications().1;
                // Its twin is `held`, still read: the master copies the current publication.
                publisher.remove_rules(&gone);
                assert_eq!(publisher.publications().1, copies + 1, "{policy:?} step {step}: a copy");
                assert!(Arc::strong_count(&held) > 1, "{policy:?}: kept until let go, not freed");
                drop(held);
                live.retain(|r| !gone.contains(&r.id));
                publisher.catch_up();
                assert!(publisher.retired.is_empty(), "{policy:?}: dropped by the publisher once let go");
                let staged = publisher.classifier().staged_ids();
                let visible: Vec<Rule> = live.iter().filter(|r| !staged.contains(&r.id)).cloned().collect();
                assert_eq!(run(&mut dp, &keys), expect(&visible, &keys), "{policy:?} step {step}");
                // The master's model is the classifier the change sets went to.
                assert_eq!(publisher.classifier().current().len() + publisher.classifier().staged(), live.len());
            }
            // The first starts a training (the staged rules are due one), the second waits for it.
            publisher.settle();
            publisher.settle();
            assert!(publisher.classifier().sessions().len() >= usize::from(policy == Policy::Delayed));
            let staged = publisher.classifier().staged_ids();
            let visible: Vec<Rule> = live.iter().filter(|r| !staged.contains(&r.id)).cloned().collect();
            assert_eq!(run(&mut dp, &keys), expect(&visible, &keys), "{policy:?}: after the model swap");
        }
    }

    /// An action handed over whose list is gone (in the switch: freed while its change set
    /// waited; here an id never handed out) is made again from the rule, in the master's table
    /// and in its twin's: every packet gets the rule's own action, before and after the twin
    /// catches up.
    #[test]
    fn an_action_whose_list_is_gone_is_made_again() {
        let all = rules(40);
        let keys = keys(600, 2);
        let mut publisher = CflowsPublisher::new(&all[..20], CflowsConfig::default()).unwrap();
        let mut dp = publisher.reader(virtual_cfg(4));
        let gone = DpAction::Apply(rqvs_ofproto::actions::ActionsId(u32::MAX));
        let mut upto = 20;
        for chunk in all[20..].chunks(10) {
            publisher.change_acted(&[], chunk.iter().map(|r| (r.clone(), gone)).collect()).unwrap();
            upto += chunk.len();
            assert_eq!(run(&mut dp, &keys), expect(&all[..upto], &keys));
            publisher.catch_up();
            assert_eq!(run(&mut dp, &keys), expect(&all[..upto], &keys));
        }
        let last = all.last().unwrap();
        assert_eq!(publisher.actions.get(last.id.0), Some(rule_action(last)));
    }

    /// Rules change only through the publisher.
    #[test]
    fn readers_refuse_rule_changes() {
        let publisher = CflowsPublisher::new(&rules(10), CflowsConfig::default()).unwrap();
        let mut dp = publisher.reader(virtual_cfg(0));
        assert!(dp.add_rules(rules(2)).is_err());
    }
}
