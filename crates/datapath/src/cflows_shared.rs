//! **CFLOWS with one learned classifier for every PMD** (the switch's arrangement; NSDI'22 §6:
//! one trainer for all models, PMDs that only read).
//!
//! - [`CflowsPublisher`] is the one place the rules change: it owns the live classifier
//!   ([`LiveNuevoMatch`], whose training runs on its own thread, one session at a time) and the
//!   actions, and after every change set and every model swap it **publishes** a copy — the
//!   classifier as lookups see it, the actions, an EMC generation — with one atomic pointer swap
//!   ([`arc_swap::ArcSwap`]). **Two copies, left-right**: the publication before the current one
//!   is kept as the *spare*; a change set is applied to the spare as well (with the change sets
//!   it missed since it was published — the one before, unless [`CflowsPublisher::catch_up`]
//!   applied it after the last commit), which is then published in its place, and the
//!   publication it replaces becomes the spare. Under the instant policy the spare takes the
//!   change set and is published *before* the master does (it is a copy of the master's
//!   classifier, so it takes what the master will): the PMDs see a change one application of
//!   it sooner. So a change set costs O(its rules) twice,
//!   not a copy of the classifier — the spare is only written once no PMD reads it any more
//!   (every reader's hold ends with its batch; the publisher waits up to [`SPARE_WAIT`] for
//!   that, then copies instead). A model swap (and a refused change set, which is rolled back)
//!   publishes a fresh copy — O(rules) (tens of milliseconds at 100K rules), paid by the
//!   publisher's thread, never by a PMD — and the left-right pair starts again from it.
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
//! training on its own), at the cost of the copy per change set.

use std::sync::Arc;

use arc_swap::ArcSwap;
use rqvs_classify::nuevomatch::live::{LiveNuevoMatch, Policy};
use rqvs_classify::nuevomatch::NuevoMatchUp;
use rqvs_classify::{Classifier, ClassifierError};
use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::cflows::{fast_path, report_of, report_with, with_gauges, ActionTable, CflowsConfig, RuleRef, Table};
use crate::cflows_pipeline::{rule_action, Walker};
use crate::counters::Counters;
use crate::design::{CflowsReport, Design, DesignReport};
use crate::emc::Emc;
use crate::{DatapathConfig, DpAction};

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
    nm: LiveNuevoMatch,
    actions: ActionTable,
    gen: u32,
    epoch: u64,
    swaps_seen: usize,
    out: Arc<ArcSwap<Published>>,
    /// The publication before the current one (module docs), and the change sets it lacks.
    spare: Option<Arc<Published>>,
    lag: Vec<Mirror>,
    /// Publications by applying change sets to the spare, and fresh copies.
    publications: (u64, u64),
}

/// How long the publisher waits for the PMDs to let go of the spare before copying instead.
pub const SPARE_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

/// One change set as the current classifier took it, for the spare: the rules removed from it,
/// the rules inserted into it (instant policy; staged rules are not in it), and the actions.
struct Mirror {
    removed: Vec<RuleId>,
    inserted: Vec<Arc<Rule>>,
    actions: Vec<(u32, Option<DpAction>)>,
}

impl Mirror {
    /// Applies the change set to a publication; false (and `p` part-changed, to be dropped)
    /// when its classifier refuses a rule.
    #[must_use]
    fn apply(&self, p: &mut Published) -> bool {
        for &id in &self.removed {
            p.nm.remove_shared(id);
        }
        for r in &self.inserted {
            if p.nm.insert_shared(Arc::clone(r)).is_err() {
                return false;
            }
        }
        for &(id, a) in &self.actions {
            match a {
                Some(a) => p.table.actions.insert(id, a),
                None => p.table.actions.remove(id),
            }
        }
        true
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
            spare: None,
            lag: Vec::new(),
            publications: (0, 1),
        })
    }

    /// A PMD's design over this publisher's classifier.
    pub fn reader(&self, cfg: DatapathConfig) -> SharedCflows {
        self.readers().reader(cfg)
    }

    /// What makes readers on other threads once the publisher has moved to its own
    /// (`--design auto` in the switch builds a CFLOWS candidate with it).
    pub fn readers(&self) -> CflowsReaders {
        CflowsReaders { shared: self.out.clone() }
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
    /// Under the instant policy the change set goes to the spare **first** and is published
    /// from it before the master (the classifier the trainer works from) takes it: the spare
    /// is a copy of the master's current classifier, so it takes what the master will, and the
    /// PMDs see the change one application of it earlier (a 125K-flow bundle: about a third
    /// of the commit's time). Should the spare refuse a rule it is dropped unpublished and the
    /// master decides, as under the delayed policy: the master applies the change set, then it
    /// is published.
    pub fn change(&mut self, remove: &[RuleId], add: Vec<Rule>) -> Result<(), ClassifierError> {
        // Ids first, before anything changes: an id held (and not removed here) or given twice.
        let mut ids = hashbrown::HashSet::with_capacity(add.len());
        let removing: hashbrown::HashSet<RuleId> = remove.iter().copied().collect();
        for r in &add {
            if !ids.insert(r.id) || (self.nm.rule(r.id).is_some() && !removing.contains(&r.id)) {
                return Err(ClassifierError::DuplicateId(r.id));
            }
        }
        let instant = self.nm.policy() == Policy::Instant;
        // The change set as the master's current classifier will take it: the rules it holds
        // go, every added rule goes in (instant policy; staged rules are not in it).
        let mut gone = hashbrown::HashSet::with_capacity(remove.len());
        let mut mirror = Mirror { removed: Vec::new(), inserted: Vec::new(), actions: Vec::new() };
        for &id in remove {
            if self.nm.rule(id).is_some() && gone.insert(id) {
                mirror.removed.push(id);
                mirror.actions.push((id.0, None));
            }
        }
        if add.is_empty() && mirror.removed.is_empty() {
            return Ok(());
        }
        let add: Vec<Arc<Rule>> = add.into_iter().map(Arc::new).collect();
        for r in &add {
            mirror.actions.push((r.id.0, Some(rule_action(r))));
            if instant {
                mirror.inserted.push(Arc::clone(r));
            }
        }
        // Any insert retires the EMC (see `Cflows::add_rules`), under both policies.
        if !add.is_empty() {
            self.next_gen();
        }
        if !mirror.removed.is_empty() || instant {
            self.epoch += 1;
        }
        let early = instant && self.publish_first(&mirror);
        let mut removed: Vec<Rule> = Vec::new();
        for &id in &mirror.removed {
            if let Some(r) = self.nm.rule(id) {
                if self.nm.remove(id) {
                    self.actions.remove(id.0);
                    removed.push(r);
                }
            }
        }
        let mut added = Vec::new();
        let mut refused = None;
        // `mirror.actions` holds the removed ids' entries, then one per added rule, in order.
        let actions = &mirror.actions[mirror.removed.len()..];
        debug_assert_eq!(actions.len(), add.len());
        for (r, &(action_id, action)) in add.into_iter().zip(actions) {
            let id = r.id;
            debug_assert_eq!(action_id, id.0, "the added rules' actions in the order of `add`");
            if let Err(e) = self.nm.insert_shared(r) {
                refused = Some(e);
                break;
            }
            if let Some(action) = action {
                self.actions.insert(id.0, action);
            }
            added.push(id);
        }
        if let Some(e) = refused {
            for id in added {
                self.nm.remove(id);
                self.actions.remove(id.0);
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
        if early {
            // The spare took `mirror` and is published; the one it replaced lacks it.
            self.lag = vec![mirror];
        } else {
            self.publish_change(mirror);
        }
        Ok(())
    }

    /// Publishes the spare with `m` applied, before the master takes it (see
    /// [`CflowsPublisher::change`]). False when it did not: no spare to be had (a model swap
    /// not yet published, or PMDs still reading it), or the spare refused a rule (it is then
    /// dropped).
    fn publish_first(&mut self, m: &Mirror) -> bool {
        if self.nm.sessions().len() != self.swaps_seen {
            return false;
        }
        let Some(spare) = self.spare.take() else { return false };
        let mut p = match exclusive(spare) {
            Ok(p) => p,
            Err(p) => {
                self.spare = Some(p);
                return false;
            }
        };
        let pm = Arc::get_mut(&mut p).expect("exclusive() returned it unshared");
        // The master took the lag, so this copy of its classifier does; `m` it may refuse.
        let lag = std::mem::take(&mut self.lag);
        if !lag.iter().chain(std::iter::once(m)).all(|l| l.apply(pm)) {
            return false;
        }
        self.finish(pm);
        let old = self.out.swap(p);
        self.publications.0 += 1;
        self.spare = Some(old);
        true
    }

    /// Publishes the change set `m` the master just took: through the spare when it can be
    /// had (module docs), else as a fresh copy.
    fn publish_change(&mut self, m: Mirror) {
        let swaps = self.nm.sessions().len();
        let spare = self.spare.take().filter(|_| swaps == self.swaps_seen).and_then(|p| exclusive(p).ok());
        let Some(mut p) = spare else {
            let old = self.out.swap(Arc::new(publication(&self.nm, &self.actions, self.gen, self.epoch)));
            self.publications.1 += 1;
            // The replaced publication is the classifier before `m` (same model): it lacks `m`
            // alone.
            self.spare = (swaps == self.swaps_seen).then_some(old);
            self.lag = vec![m];
            return;
        };
        let pm = Arc::get_mut(&mut p).expect("exclusive() returned it unshared");
        for l in self.lag.iter().chain(std::iter::once(&m)) {
            // The master took all of them, so this copy of its classifier does.
            let _ = l.apply(pm);
        }
        self.finish(pm);
        let old = self.out.swap(p);
        self.publications.0 += 1;
        self.spare = Some(old);
        self.lag = vec![m];
    }

    /// A spare brought up to date gets the publication's generation, epoch and report.
    fn finish(&self, pm: &mut Published) {
        pm.table.gen = self.gen;
        pm.epoch = self.epoch;
        pm.report = report_with(&pm.nm, &self.nm);
        pm.rules = (pm.nm.len() + self.nm.staged()) as u64;
    }

    /// Brings the spare up to date with the current publication, so that the next change set
    /// applies only itself to it: the manager calls this after answering a change, taking the
    /// second application off the commit's path. A spare still read (beyond [`SPARE_WAIT`])
    /// is left as it is, its lag kept.
    pub fn catch_up(&mut self) {
        if self.lag.is_empty() {
            return;
        }
        let Some(spare) = self.spare.take() else { return };
        match exclusive(spare) {
            Ok(mut p) => {
                let pm = Arc::get_mut(&mut p).expect("exclusive() returned it unshared");
                for l in self.lag.drain(..) {
                    // The master took all of them, so this copy of its classifier does.
                    let _ = l.apply(pm);
                }
                self.spare = Some(p);
            }
            Err(p) => self.spare = Some(p),
        }
    }

    /// Publications so far: (through the spare, as fresh copies).
    pub fn publications(&self) -> (u64, u64) {
        self.publications
    }

    /// Swaps a trained model in when one is ready (and starts training when due); publishes on
    /// a swap. True when it published.
    pub fn poll(&mut self) -> bool {
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
        self.nm.finish_training();
        self.poll();
    }

    /// The live classifier (tests, reports).
    pub fn classifier(&self) -> &LiveNuevoMatch {
        &self.nm
    }

    fn next_gen(&mut self) {
        // Generation u32::MAX is RuleRef::NONE's: skipped, so an empty entry is never live.
        self.gen = match self.gen.wrapping_add(1) {
            u32::MAX => 0,
            g => g,
        };
    }

    /// Publishes a fresh copy; the left-right pair starts again from it (a model swap, a
    /// rolled-back change set).
    fn publish(&mut self) {
        self.out.store(Arc::new(publication(&self.nm, &self.actions, self.gen, self.epoch)));
        self.publications.1 += 1;
        self.spare = None;
        self.lag.clear();
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
}

impl CflowsReaders {
    /// A PMD's design over the publisher's classifier.
    pub fn reader(&self, cfg: DatapathConfig) -> SharedCflows {
        SharedCflows {
            emc: Emc::with_entries(cfg.emc_entries, cfg.emc_insert_prob, cfg.seed),
            shared: self.shared.clone(),
            c: Counters::default(),
            now_ns: 0,
            rules: [crate::NO_RULE; crate::BATCH],
            batch_len: 0,
            walker: None,
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
}

impl SharedCflows {
    /// Walks the tables after 0 and the groups in `rest` (the switch's shared table of them) for
    /// packets whose table-0 rule continues the pipeline.
    pub fn with_pipeline(mut self, rest: crate::OfprotoTable) -> SharedCflows {
        self.walker = Some(Walker::new(rest));
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
        DesignReport::Cflows(self.shared.load().report)
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

    /// Rules change only through the publisher.
    #[test]
    fn readers_refuse_rule_changes() {
        let publisher = CflowsPublisher::new(&rules(10), CflowsConfig::default()).unwrap();
        let mut dp = publisher.reader(virtual_cfg(0));
        assert!(dp.add_rules(rules(2)).is_err());
    }
}
