//! **CFLOWS** (NSDI'22 §4.2): the fast path classifies packets against the OpenFlow rules
//! themselves — EMC → NuevoMatchUP over the rules → TupleMerge remainder. No megaflows, no
//! upcalls, no revalidation.
//!
//! - **EMC**: the same cache as ORIG ([`Emc`]), whole key → the winning rule. An entry holds the
//!   rule id and the *table generation* it was computed under ([`RuleRef`] `{id, gen}`;
//!   `id = NO_RULE` caches "no rule matches"). A rule's action is read at hit time, so modifying
//!   actions needs no invalidation; removing a rule makes the entries naming it dead at once (its
//!   action is gone); every insert, and a model swap under the delayed policy, bumps the
//!   generation, which retires every entry — a new rule may outrank any cached winner (and a
//!   reused id must not revive entries that named the old rule), and finding just the entries
//!   concerned would cost more than the EMC saves.
//! - **Classifier**: [`LiveNuevoMatch`] — inserts are visible at once (**instant** policy: into
//!   the iSet bucket whose range holds the rule when it has room, else the TupleMerge remainder)
//!   or staged until the next model (**delayed**); removals mark the rule
//!   dead in place; the trainer thread retrains when the rules inserted into the remainder since
//!   the last model exceed
//!   `retrain_threshold` of the rules, and [`Design::maintain`] swaps the new model in between
//!   batches (the PMD never waits for training).
//! - **Counters**: `emc_hit`, `model_hit` (an iSet gave the winner), `remainder_hit` (the
//!   remainder gave a better rule), `no_match` (no rule matched: dropped, OpenFlow's table-miss
//!   default) — they sum to `received`. Gauges `rules`
//!   and `model_entries` (coverage = model_entries / rules), `model_swaps`.
//! - **Time**: the same PMD clock as ORIG ([`crate::Clock`]); training runs on another thread and is not
//!   PMD time, but swapping a model in (`maintain`) is. Under the virtual clock `maintain` waits
//!   for a started training, so runs are a pure function of their inputs.

use std::time::Instant;

use hashbrown::HashMap;
use rqvs_classify::nuevomatch::live::{LiveNuevoMatch, Policy};
use rqvs_classify::nuevomatch::NuevoMatchUp;
use rqvs_classify::{Classifier, ClassifierError};
use rqvs_flow::key::NarrowKey;
use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::batch_key::{narrow_batch, whole_batch, BatchKey};
use crate::cflows_pipeline::{rule_action, Live, Walker, X_GEN};
use crate::counters::Counters;
use crate::design::{CflowsReport, Design, DesignReport};
use crate::emc::{Emc, EmcRef, EmcTarget};
use crate::{DatapathConfig, BATCH};
use rqvs_ofproto::DpAction;

/// EMC slot value meaning "no rule matches" (the packet is dropped): [`rqvs_ofproto::NO_RULE`]'s id.
const NO_RULE: u32 = rqvs_ofproto::NO_RULE.0;

/// CFLOWS' settings: its learned classifier's update policy and retraining.
#[derive(Clone, Copy, Debug)]
pub struct CflowsConfig {
    pub policy: Policy,
    /// Remainder share of the rules that starts a training session (paper: 10%).
    pub retrain_threshold: f64,
    /// The classifier over the OpenFlow rules: NuevoMatchUP (the paper's CFLOWS) or TupleMerge
    /// alone (the ablation: what classifying the rules without megaflows gives without the
    /// learned index).
    pub classifier: CflowsClassifier,
    /// The tables after 0 holding at least this many rules are served by a NuevoMatchUP each,
    /// smaller ones by a TupleMerge ([`rqvs_ofproto::later_tables`]). Default `usize::MAX`: TupleMerge
    /// for all, the faster for the walk's lookups where measured (the module's docs).
    pub later_learned_min: usize,
}

/// [`CflowsConfig::classifier`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CflowsClassifier {
    #[default]
    NuevoMatch,
    TupleMerge,
}

impl CflowsClassifier {
    pub fn name(self) -> &'static str {
        match self {
            CflowsClassifier::NuevoMatch => "nmu",
            CflowsClassifier::TupleMerge => "tm",
        }
    }
}

impl Default for CflowsConfig {
    fn default() -> Self {
        CflowsConfig {
            policy: Policy::Instant,
            retrain_threshold: 0.1,
            classifier: CflowsClassifier::NuevoMatch,
            later_learned_min: usize::MAX,
        }
    }
}

impl CflowsConfig {
    /// The index of the tables after 0 this configuration asks for ([`rqvs_ofproto::later_tables`]):
    /// TupleMerge alone (`--classifier tm`) learns none of them.
    pub fn later(&self) -> rqvs_ofproto::later_tables::LaterConfig {
        let learned_min = match self.classifier {
            CflowsClassifier::NuevoMatch => self.later_learned_min,
            CflowsClassifier::TupleMerge => usize::MAX,
        };
        rqvs_ofproto::later_tables::LaterConfig { learned_min, retrain_threshold: self.retrain_threshold }
    }

    /// The live classifier this configuration asks for over `rules`. TupleMerge alone takes the
    /// instant policy only (a delayed insert would wait for a model that never comes).
    pub fn build(&self, rules: &[Rule]) -> Result<LiveNuevoMatch, ClassifierError> {
        match self.classifier {
            CflowsClassifier::NuevoMatch => LiveNuevoMatch::new(rules, self.policy, self.retrain_threshold),
            CflowsClassifier::TupleMerge if self.policy == Policy::Delayed => Err(ClassifierError::Config(
                "CFLOWS with TupleMerge alone: the delayed policy waits for a model, and TupleMerge has none (use the instant policy)".into(),
            )),
            CflowsClassifier::TupleMerge => LiveNuevoMatch::tuplemerge_only(rules),
        }
    }
}

/// What a CFLOWS EMC entry points at: a rule (or `NO_RULE`: no rule matched) of one table
/// generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuleRef {
    pub id: u32,
    pub gen: u32,
}

impl EmcRef for RuleRef {
    /// Generation [`u32::MAX`] is never the table's ([`Cflows`] skips it), so never live.
    const NONE: RuleRef = RuleRef { id: NO_RULE, gen: u32::MAX };
}

/// The visible rules' actions and the EMC generation (the EMC's [`EmcTarget`]).
#[derive(Clone)]
pub(crate) struct Table {
    pub(crate) actions: ActionTable,
    pub(crate) gen: u32,
}

impl EmcTarget<RuleRef> for Table {
    #[inline]
    fn is_live(&self, r: RuleRef) -> bool {
        r.gen == self.gen && (r.id == NO_RULE || self.actions.get(r.id).is_some())
    }
}

impl Table {
    #[inline]
    pub(crate) fn action(&self, slot: u32) -> DpAction {
        if slot == NO_RULE {
            DpAction::Drop
        } else {
            self.actions.get(slot).unwrap_or(DpAction::Drop)
        }
    }
}

/// Actions by rule id, read once per packet the EMC does not answer: a vector indexed by id for
/// the ids below a bound that grows with the table (ClassBench ids and the cookies of converted
/// sets are small and dense), a map for the others. A map alone cost a dependent cache miss or
/// two per packet at 500K rules (fw4_500k without EMC: 3.9 Mpps with the map).
///
/// It holds the lists of its actions (`rqvs_ofproto::actions`, *Freeing*): a published copy keeps
/// them while a PMD may still read it.
#[derive(Default)]
pub(crate) struct ActionTable {
    dense: Vec<Option<DpAction>>,
    sparse: HashMap<u32, DpAction>,
    len: usize,
}

impl ActionTable {
    /// Ids below this go to the vector: twice the rules held, and at least 65,536.
    fn dense_limit(&self) -> usize {
        (2 * self.len).max(1 << 16)
    }

    #[inline]
    pub(crate) fn get(&self, id: u32) -> Option<DpAction> {
        match self.dense.get(id as usize) {
            Some(Some(a)) => Some(*a),
            // Not in the vector: in the map, if anywhere (an id can stay there after the vector
            // grew past it).
            _ => self.sparse.get(&id).copied(),
        }
    }

    /// Sets rule `id`'s action, holding its list; false when that list is gone already (the
    /// action is set all the same: the caller makes it again, [`CflowsPublisher`]'s
    /// `change_acted`).
    ///
    /// [`CflowsPublisher`]: crate::CflowsPublisher
    pub(crate) fn insert(&mut self, id: u32, a: DpAction) -> bool {
        let held = rqvs_ofproto::actions::hold_action(a);
        let i = id as usize;
        let was = if i < self.dense.len() || i < self.dense_limit() {
            if i >= self.dense.len() {
                self.dense.resize(i + 1, None);
            }
            self.dense[i].replace(a).or_else(|| self.sparse.remove(&id))
        } else {
            self.sparse.insert(id, a)
        };
        if let Some(w) = was {
            rqvs_ofproto::actions::release_action(w);
        }
        self.len += usize::from(was.is_none());
        held
    }

    pub(crate) fn remove(&mut self, id: u32) {
        let gone = match self.dense.get_mut(id as usize).and_then(Option::take) {
            Some(a) => Some(a),
            None => self.sparse.remove(&id),
        };
        if let Some(g) = gone {
            rqvs_ofproto::actions::release_action(g);
        }
        self.len -= usize::from(gone.is_some());
    }

    fn all(&self) -> impl Iterator<Item = DpAction> + '_ {
        self.dense.iter().flatten().chain(self.sparse.values()).copied()
    }
}

impl Clone for ActionTable {
    fn clone(&self) -> Self {
        rqvs_ofproto::actions::hold_actions(self.all());
        ActionTable { dense: self.dense.clone(), sparse: self.sparse.clone(), len: self.len }
    }
}

impl Drop for ActionTable {
    fn drop(&mut self) {
        rqvs_ofproto::actions::release_actions(self.all());
    }
}

impl FromIterator<(u32, DpAction)> for ActionTable {
    fn from_iter<I: IntoIterator<Item = (u32, DpAction)>>(iter: I) -> Self {
        let items: Vec<(u32, DpAction)> = iter.into_iter().collect();
        let bound = (2 * items.len()).max(1 << 16);
        let mut t = ActionTable::default();
        if let Some(top) = items.iter().map(|&(id, _)| id as usize).filter(|&i| i < bound).max() {
            t.dense.resize(top + 1, None);
        }
        for (id, a) in items {
            t.insert(id, a);
        }
        t
    }
}

/// CFLOWS' fast path on one batch: EMC, then the learned classifier `nm` on the misses, the
/// actions from `table` (shared by [`Cflows`] and [`crate::cflows_shared::SharedCflows`]); each
/// packet's winner in `rules` ([`Design::batch_rules`]). Returns the batch's start time for the
/// PMD clock.
#[allow(clippy::too_many_arguments)]
pub(crate) fn fast_path(
    cfg: &DatapathConfig,
    emc: &mut Emc<RuleRef>,
    nm: &NuevoMatchUp,
    table: &Table,
    c: &mut Counters,
    keys: &[FlowKey],
    out: &mut [DpAction],
    rules: &mut [RuleId; BATCH],
    walker: Option<&mut Walker>,
    rules_epoch: u64,
) -> Option<Instant> {
    let n = keys.len();
    assert!(n <= BATCH && out.len() >= n, "batches hold at most {BATCH} packets");
    let t0 = cfg.clock.start();
    let run = Run { cfg, emc, nm, table, c, out, rules, walker, rules_epoch, t0 };
    // The batch as narrow keys when every packet's key is narrow (crate::batch_key).
    let mut narrow = [NarrowKey::default(); BATCH];
    if narrow_batch(keys, cfg.wire_keys, &mut narrow) {
        run.batch(&narrow[..n]);
    } else {
        let mut whole = [FlowKey::ZERO; BATCH];
        whole_batch(keys, cfg.wire_keys, &mut whole);
        run.batch(&whole[..n]);
    }
    t0
}

/// CFLOWS' learned lookup of a batch's misses, counted, in either key form.
trait CountedLookup: BatchKey {
    fn lookup_counted(nm: &NuevoMatchUp, keys: &[Self], ids: &mut [Option<RuleId>]) -> usize;
}

impl CountedLookup for NarrowKey {
    #[inline(always)]
    fn lookup_counted(nm: &NuevoMatchUp, keys: &[Self], ids: &mut [Option<RuleId>]) -> usize {
        nm.lookup_batch_narrow_counted(keys, ids)
    }
}

impl CountedLookup for FlowKey {
    #[inline(always)]
    fn lookup_counted(nm: &NuevoMatchUp, keys: &[Self], ids: &mut [Option<RuleId>]) -> usize {
        nm.lookup_batch_counted(keys, ids)
    }
}

/// One batch through [`fast_path`]: what it works on.
struct Run<'a> {
    cfg: &'a DatapathConfig,
    emc: &'a mut Emc<RuleRef>,
    nm: &'a NuevoMatchUp,
    table: &'a Table,
    c: &'a mut Counters,
    out: &'a mut [DpAction],
    rules: &'a mut [RuleId; BATCH],
    walker: Option<&'a mut Walker>,
    rules_epoch: u64,
    t0: Option<Instant>,
}

impl Run<'_> {
    /// The EMC, then the learned lookup of the misses (and the walk of a pipeline's later
    /// tables), for the batch's keys `k` (on the wire already).
    #[inline(always)]
    fn batch<K: CountedLookup>(self, k: &[K]) {
        let Run { cfg, emc, nm, table, c, out, rules, mut walker, rules_epoch, t0 } = self;
        let n = k.len();
        let mut h = [0u32; BATCH];
        let mut miss_keys = [K::default(); BATCH];
        let mut miss_at = [0u8; BATCH];
        let mut nmiss = 0;
        c.received += n as u64;
        if let Some(w) = walker.as_deref_mut() {
            w.begin(rules_epoch);
        }

        for i in 0..n {
            h[i] = k[i].hash();
            if cfg.emc {
                let live = Live { table, walker: walker.as_deref() };
                if let Some(f) = k[i].emc_lookup(emc, h[i], &live) {
                    (out[i], rules[i]) = match &walker {
                        Some(w) if f.gen & X_GEN != 0 => w.cached(f),
                        _ => (table.action(f.id), RuleId(f.id)),
                    };
                    c.emc_hit += 1;
                    continue;
                }
            }
            miss_keys[nmiss] = k[i];
            miss_at[nmiss] = i as u8;
            nmiss += 1;
        }
        let t1 = cfg.clock.start();

        if nmiss > 0 {
            let mut ids = [None; BATCH];
            let from_model = K::lookup_counted(nm, &miss_keys[..nmiss], &mut ids[..nmiss]) as u64;
            let no_match = ids[..nmiss].iter().filter(|id| id.is_none()).count() as u64;
            c.model_hit += from_model;
            c.remainder_hit += nmiss as u64 - from_model - no_match;
            c.no_match += no_match;
            for j in 0..nmiss {
                let i = usize::from(miss_at[j]);
                let id = ids[j].map_or(NO_RULE, |id| id.0);
                out[i] = table.action(id);
                rules[i] = RuleId(id);
                let mut r = Some(RuleRef { id, gen: table.gen });
                // A rule that continues the pipeline: the translation over the other tables.
                if out[i] == DpAction::Pending {
                    match walker.as_deref_mut() {
                        Some(w) => (out[i], rules[i], r) = w.translate(nm, &k[i].whole()),
                        None => (out[i], r) = (DpAction::Drop, None),
                    }
                }
                if let (true, Some(r)) = (cfg.emc, r) {
                    k[i].emc_insert(emc, h[i], r, &Live { table, walker: walker.as_deref() });
                }
            }
        }
        for a in &out[..n] {
            match a {
                DpAction::Output(_) | DpAction::Apply(_) => c.tx += 1,
                _ => c.dropped_by_action += 1,
            }
        }

        if let (Some(t0), Some(t1)) = (t0, t1) {
            c.emc_ns += (t1 - t0).as_nanos() as u64;
            c.model_ns += t1.elapsed().as_nanos() as u64;
        }
    }
}

/// A live classifier's figures, as CFLOWS reports them.
pub(crate) fn report_of(nm: &LiveNuevoMatch) -> CflowsReport {
    report_with(nm.current(), nm)
}

/// The report of `current`, a copy of `nm`'s current classifier (the same rules; a
/// publication), with `nm`'s staged rules and training sessions.
pub(crate) fn report_with(current: &NuevoMatchUp, nm: &LiveNuevoMatch) -> CflowsReport {
    CflowsReport {
        coverage: rqvs_classify::nuevomatch::live::coverage_of(current, nm.staged()),
        isets: current.isets() as u64,
        remainder_rules: current.remainder().len() as u64,
        staged_rules: nm.staged() as u64,
        training_sessions: nm.sessions().len() as u64,
        last_training_ms: nm.sessions().last().map(|s| s.train.as_secs_f64() * 1e3),
        later_learned_tables: 0,
        later_learned_rules: 0,
    }
}

/// CFLOWS' counters with its gauges filled in: `rules` (staged included), the share of them
/// the iSets serve, model swaps, PMD time, EMC inserts.
pub(crate) fn with_gauges(mut c: Counters, rules: u64, r: &CflowsReport, now_ns: u64, emc: &Emc<RuleRef>) -> Counters {
    c.rules = rules;
    c.model_entries = (r.coverage * rules as f64).round() as u64;
    c.model_swaps = r.training_sessions;
    c.pmd_ns = now_ns;
    c.emc_inserts = emc.inserts;
    c
}

/// The CFLOWS datapath (module docs).
pub struct Cflows {
    cfg: DatapathConfig,
    emc: Emc<RuleRef>,
    nm: LiveNuevoMatch,
    table: Table,
    c: Counters,
    now_ns: u64,
    epoch: u64,
    swaps_seen: usize,
    /// Each packet's winner in the last batch ([`Design::batch_rules`]) and the batch's size.
    rules: [RuleId; BATCH],
    batch_len: usize,
    /// The tables after 0 and the translation cache ([`crate::cflows_pipeline`]).
    walker: Walker,
}

impl Cflows {
    /// Builds the first model synchronously (its training time is reported by
    /// [`Design::report`], not counted as PMD time).
    /// Table 0's rules go to the learned classifier, the others to the pipeline's rest
    /// ([`crate::cflows_pipeline`]).
    pub fn new(rules: &[Rule], cfg: DatapathConfig, learned: CflowsConfig) -> Result<Cflows, ClassifierError> {
        let (t0, rest): (Vec<Rule>, Vec<Rule>) = rules.iter().cloned().partition(|r| r.table == 0);
        let nm = learned.build(&t0)?;
        let actions = t0.iter().map(|r| (r.id.0, rule_action(r))).collect();
        let walker = Walker::new(rqvs_ofproto::OfprotoTable::build(&rest)?, learned.later());
        Ok(Cflows {
            emc: Emc::with_entries(cfg.emc_entries, cfg.emc_insert_prob, cfg.seed),
            nm,
            table: Table { actions, gen: 0 },
            c: Counters::default(),
            now_ns: 0,
            epoch: 0,
            swaps_seen: 0,
            rules: [rqvs_ofproto::NO_RULE; BATCH],
            batch_len: 0,
            walker,
            cfg,
        })
    }

    /// Commits group and port-liveness changes (and rules of tables after 0) to the pipeline's
    /// rest ([`crate::cflows_pipeline`]); rules of table 0 go through [`Design::add_rules`].
    pub fn commit_pipeline(&mut self, changes: Vec<rqvs_ofproto::table::RuleChange>) -> Result<(), ClassifierError> {
        self.walker.rest.commit(changes)?;
        self.epoch += 1;
        Ok(())
    }

    /// The index of each table after 0 ([`rqvs_ofproto::later_tables`]): TupleMerge or a
    /// NuevoMatchUP, its rules, whether it is being trained. Empty when the tables after 0 are
    /// looked up in the slow path's classifier (no index).
    pub fn later_tables(&self) -> Vec<rqvs_ofproto::later_tables::TableIndex> {
        self.walker.rest.read().later().map(|l| l.describe()).unwrap_or_default()
    }

    /// The learned classifier (coverage, sessions, ...).
    pub fn classifier(&self) -> &LiveNuevoMatch {
        &self.nm
    }

    fn retire_emc(&mut self) {
        // Generation u32::MAX is RuleRef::NONE's: skipped, so an empty entry is never live.
        self.table.gen = match self.table.gen.wrapping_add(1) {
            u32::MAX => 0,
            g => g,
        };
    }

    /// Swaps a trained model in if one is ready (and starts training when needed).
    fn poll_model(&mut self) {
        self.nm.poll();
        let swaps = self.nm.sessions().len();
        if swaps != self.swaps_seen {
            self.swaps_seen = swaps;
            if self.nm.policy() == Policy::Delayed {
                // Staged rules just became visible.
                self.retire_emc();
                self.epoch += 1;
            }
        }
    }
}

impl Design for Cflows {
    fn name(&self) -> &'static str {
        "cflows"
    }

    fn process_batch(&mut self, keys: &[FlowKey], _seq0: u64, out: &mut [DpAction]) {
        let t0 = fast_path(
            &self.cfg,
            &mut self.emc,
            self.nm.current(),
            &self.table,
            &mut self.c,
            keys,
            out,
            &mut self.rules,
            Some(&mut self.walker),
            self.epoch,
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
        let t0 = Instant::now();
        self.poll_model();
        if !self.cfg.clock.is_measured() && self.nm.training() {
            // Virtual clock: training finishes "instantly", so runs are deterministic.
            self.nm.finish_training();
            self.poll_model();
        }
        self.now_ns += self.cfg.clock.housekeeping_ns(t0);
        0
    }

    fn add_rules(&mut self, rules: Vec<Rule>) -> Result<u64, ClassifierError> {
        let (t0, rest): (Vec<Rule>, Vec<Rule>) = rules.into_iter().partition(|r| r.table == 0);
        if !rest.is_empty() {
            self.walker.rest.commit(rest.into_iter().map(rqvs_ofproto::table::RuleChange::Add).collect())?;
            self.epoch += 1;
        }
        for r in t0 {
            let (id, action) = (r.id.0, rule_action(&r));
            self.nm.insert(r)?;
            self.table.actions.insert(id, action);
        }
        // Retired under both policies: under the delayed one the new rules are not visible yet,
        // but an id may come back (removed, then added as another rule) and revive entries that
        // named the old rule.
        self.retire_emc();
        if self.nm.policy() == Policy::Instant {
            self.epoch += 1;
        }
        Ok(0)
    }

    fn remove_rules(&mut self, ids: &[RuleId]) -> u64 {
        let mut changed = false;
        let mut rest = Vec::new();
        for &id in ids {
            if self.nm.remove(id) {
                self.table.actions.remove(id.0);
                changed = true;
            } else {
                rest.push(rqvs_ofproto::table::RuleChange::Remove(id));
            }
        }
        if !rest.is_empty() {
            if let Ok((_, removed)) = self.walker.rest.commit(rest) {
                changed |= !removed.is_empty();
            }
        }
        if changed {
            self.epoch += 1;
        }
        0
    }

    fn counters(&self) -> Counters {
        let rules = (self.nm.current().len() + self.nm.staged()) as u64;
        with_gauges(self.c, rules, &report_of(&self.nm), self.now_ns, &self.emc)
    }

    fn now_ns(&self) -> u64 {
        self.now_ns
    }

    fn idle_until(&mut self, ns: u64) {
        self.now_ns = self.now_ns.max(ns);
    }

    fn visible_epoch(&self) -> u64 {
        self.epoch
    }

    fn staged_rules(&self) -> Vec<RuleId> {
        self.nm.staged_ids()
    }

    fn report(&self) -> DesignReport {
        DesignReport::Cflows(self.walker.with_later(report_of(&self.nm)))
    }

    fn settle(&mut self) {
        self.nm.finish_training();
        self.poll_model();
        self.walker.rest.finish_later_training();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{expect, expect_rules, rules};

    /// The action table against a map, over ids that move between its vector and its map as it
    /// grows and shrinks.
    #[test]
    fn action_table_equals_a_map() {
        let mut rng = rqvs_flow::rng::Rng::new(7);
        let mut t: ActionTable = [(3, DpAction::Output(3)), (1 << 20, DpAction::Drop)].into_iter().collect();
        let mut want: std::collections::HashMap<u32, DpAction> =
            [(3, DpAction::Output(3)), (1 << 20, DpAction::Drop)].into_iter().collect();
        // Enough inserts below 2^17 that the vector's bound (twice the rules held) grows past
        // ids inserted into the map while it was lower.
        let mut moved = false;
        for step in 0..150_000u32 {
            let id = match rng.index(8) {
                0 => rng.below(1 << 10) as u32,
                1 => rng.below(1 << 22) as u32,
                2 => rng.next_u32(),
                _ => rng.below(1 << 17) as u32,
            };
            moved |= t.sparse.contains_key(&id) && (id as usize) < t.dense.len();
            if rng.chance(0.7) {
                t.insert(id, DpAction::Output(step));
                want.insert(id, DpAction::Output(step));
            } else {
                t.remove(id);
                want.remove(&id);
            }
            assert_eq!(t.get(id), want.get(&id).copied(), "step {step} id {id}");
            assert_eq!(t.len, want.len(), "step {step}");
        }
        for (&id, &a) in &want {
            assert_eq!(t.get(id), Some(a));
        }
        assert!(moved, "no id was left in the map behind the vector's end");
    }

    fn keys(n: usize) -> Vec<FlowKey> {
        crate::testutil::keys(n, 0)
    }

    fn virtual_cfg(emc_prob: f64) -> DatapathConfig {
        DatapathConfig {
            emc_insert_prob: emc_prob,
            clock: crate::Clock::Virtual { packet_ns: 100, upcall_ns: 0 },
            ..DatapathConfig::default()
        }
    }

    fn run(dp: &mut Cflows, keys: &[FlowKey]) -> Vec<DpAction> {
        crate::pmd::run_keys(dp, keys)
    }

    #[test]
    fn actions_equal_the_reference_and_counters_sum() {
        let rules = rules(1200);
        let keys = keys(5000);
        let mut dp = Cflows::new(&rules, virtual_cfg(0.2), CflowsConfig::default()).unwrap();
        let (got, attributed) = crate::pmd::run_keys_with_rules(&mut dp, &keys);
        assert_eq!(got, expect(&rules, &keys));
        assert_eq!(attributed, expect_rules(&rules, &keys));
        let (again, attributed) = crate::pmd::run_keys_with_rules(&mut dp, &keys);
        assert_eq!(again, got);
        assert_eq!(attributed, expect_rules(&rules, &keys), "EMC hits attributed too");
        let c = dp.counters();
        assert!(c.outcome_sum_ok(), "{c:?}");
        assert!(c.emc_hit > 0 && c.model_hit > 0, "{c:?}");
        assert_eq!(c.rules, rules.len() as u64);
    }

    /// Batch by batch (no `maintain` in between), the actions equal the reference's over
    /// `rules`, and each packet is attributed to the reference's winner.
    fn check_batches(dp: &mut Cflows, rules: &[Rule], keys: &[FlowKey]) {
        let want = expect(rules, keys);
        let winners = expect_rules(rules, keys);
        let mut out = [DpAction::Drop; BATCH];
        for (b, chunk) in keys.chunks(BATCH).enumerate() {
            dp.process_batch(chunk, 0, &mut out);
            let at = b * BATCH..b * BATCH + chunk.len();
            assert_eq!(&out[..chunk.len()], &want[at.clone()], "batch {b}");
            assert_eq!(dp.batch_rules(), &winners[at], "batch {b}");
        }
    }

    /// Random updates (adds of new and of reused ids, removals, swaps) under both policies, and
    /// with TupleMerge alone: after every step, every packet's action equals the reference's over
    /// the visible rules.
    #[test]
    fn random_updates_keep_every_action_right() {
        let pool = rules(300);
        let keys = keys(600);
        for seed in 0..60u64 {
            let mut rng = rqvs_flow::rng::Rng::new(seed);
            let (policy, classifier) = match seed % 3 {
                0 => (Policy::Instant, CflowsClassifier::NuevoMatch),
                1 => (Policy::Delayed, CflowsClassifier::NuevoMatch),
                _ => (Policy::Instant, CflowsClassifier::TupleMerge),
            };
            let cfg = CflowsConfig { policy, retrain_threshold: 0.05, classifier, ..CflowsConfig::default() };
            let mut live: Vec<Rule> = pool[..150].to_vec();
            let mut removed: Vec<RuleId> = Vec::new();
            let mut dp = Cflows::new(&live, virtual_cfg(1.0), cfg).unwrap();
            for step in 0..12 {
                match rng.index(4) {
                    0 => {
                        // A batch of new rules, some under ids removed earlier.
                        let mut add = Vec::new();
                        for _ in 0..(1 + rng.index(19)) {
                            let mut r = pool[rng.index(pool.len())].clone();
                            r.id = if !removed.is_empty() && rng.chance(0.5) {
                                removed[rng.index(removed.len())]
                            } else {
                                RuleId(rng.below(400) as u32)
                            };
                            r.actions = rqvs_flow::Actions::output(1000 + step);
                            if !live.iter().chain(&add).any(|x: &Rule| x.id == r.id) {
                                add.push(r);
                            }
                        }
                        live.extend(add.iter().cloned());
                        dp.add_rules(add).unwrap();
                    }
                    1 if !live.is_empty() => {
                        let n = (1 + rng.index(9)).min(live.len());
                        let gone: Vec<RuleId> = (0..n).map(|_| live[rng.index(live.len())].id).collect();
                        live.retain(|r| !gone.contains(&r.id));
                        removed.extend(&gone);
                        dp.remove_rules(&gone);
                    }
                    2 => {
                        dp.maintain();
                    }
                    _ => dp.settle(),
                }
                // Not after every step: updates that follow each other with no packet in between
                // must be right too (a check refreshes the EMC).
                if rng.chance(0.5) || step == 11 {
                    let staged = dp.staged_rules();
                    let visible: Vec<Rule> = live.iter().filter(|r| !staged.contains(&r.id)).cloned().collect();
                    check_batches(&mut dp, &visible, &keys);
                    assert!(dp.counters().outcome_sum_ok());
                }
            }
            if classifier == CflowsClassifier::TupleMerge {
                // No learned index at any point: every rule in the remainder, nothing trained.
                let c = dp.classifier();
                assert!(c.coverage() == 0.0 && c.sessions().is_empty() && !c.training(), "seed {seed}");
                assert_eq!(dp.counters().model_hit, 0);
            }
        }
    }

    #[test]
    fn tuplemerge_alone_takes_the_instant_policy_only() {
        let cfg = CflowsConfig {
            policy: Policy::Delayed,
            classifier: CflowsClassifier::TupleMerge,
            ..CflowsConfig::default()
        };
        let e = Cflows::new(&rules(10), virtual_cfg(1.0), cfg).err().expect("refused");
        assert!(e.to_string().contains("the delayed policy waits for a model"), "{e}");
    }

    /// A removed rule id added again (delayed: staged, not visible) must not revive EMC entries
    /// that named the old rule.
    #[test]
    fn a_reused_id_does_not_revive_old_emc_entries() {
        let all = rules(50);
        let keys = keys(2000);
        let cfg = CflowsConfig { policy: Policy::Delayed, retrain_threshold: 0.1, ..CflowsConfig::default() };
        let mut dp = Cflows::new(&all, virtual_cfg(1.0), cfg).unwrap();
        assert_eq!(run(&mut dp, &keys), expect(&all, &keys));
        assert!(dp.counters().emc_hit > 0);
        // Rule 3 leaves; a different rule comes back under the same id, with another action.
        let old = all[3].clone();
        dp.remove_rules(&[old.id]);
        let mut again = all[40].clone();
        again.id = old.id;
        again.actions = rqvs_flow::Actions::output(999);
        dp.add_rules(vec![again]).unwrap();
        let visible: Vec<Rule> = all.iter().filter(|r| r.id != old.id).cloned().collect();
        check_batches(&mut dp, &visible, &keys);
    }

    #[test]
    fn updates_instant_and_delayed_follow_the_visible_rules() {
        let all = rules(1200);
        let keys = keys(3000);
        for policy in [Policy::Instant, Policy::Delayed] {
            let (initial, held) = all.split_at(900);
            let cfg = CflowsConfig { policy, retrain_threshold: 0.1, ..CflowsConfig::default() };
            let mut dp = Cflows::new(initial, virtual_cfg(1.0), cfg).unwrap();
            assert_eq!(run(&mut dp, &keys), expect(initial, &keys));
            let e0 = dp.visible_epoch();
            dp.add_rules(held.to_vec()).unwrap();
            // Before any model swap: instant shows the new rules, delayed does not.
            match policy {
                Policy::Instant => {
                    assert!(dp.staged_rules().is_empty() && dp.visible_epoch() != e0);
                    check_batches(&mut dp, &all, &keys);
                }
                Policy::Delayed => {
                    assert!(dp.staged_rules().len() == held.len() && dp.visible_epoch() == e0);
                    check_batches(&mut dp, initial, &keys);
                }
            }
            // `maintain` trains (synchronously under the virtual clock) and swaps.
            dp.maintain();
            assert!(dp.staged_rules().is_empty());
            assert_eq!(run(&mut dp, &keys), expect(&all, &keys), "{policy:?} after the swap");
            assert!(dp.staged_rules().is_empty());
            assert!(dp.counters().model_swaps > 0);
            let victims: Vec<RuleId> = all.iter().step_by(3).map(|r| r.id).collect();
            dp.remove_rules(&victims);
            let left: Vec<Rule> = all.iter().filter(|r| !victims.contains(&r.id)).cloned().collect();
            check_batches(&mut dp, &left, &keys);
            assert_eq!(run(&mut dp, &keys), expect(&left, &keys), "{policy:?} after removals");
            assert!(dp.counters().outcome_sum_ok());
        }
    }
}
