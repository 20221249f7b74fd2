//! The PMD loop's datapath: one batch of up to [`BATCH`] packets at a time through EMC →
//! (cuckoo distributor) → megaflow cache → upcall queue, then the handler, ranking and the
//! revalidator at batch boundaries.
//!
//! **The PMD's thread**: the caller alternates [`Datapath::process_batch`] (the PMD's work) with
//! [`Datapath::handle_upcalls`] (the handler: slow path and megaflow installation for everything
//! queued) and [`Datapath::maintain`] (subtable ranking, CD on/off, idle expiry, deletions from
//! the revalidator thread). This is OVS-DPDK's own arrangement for upcalls — its PMD thread runs
//! the upcall inline — so the handler's time is PMD time here. Revalidation after rule changes
//! runs on another core in OVS: here on a second thread ([`RevalidatorMode::Thread`], the PMD
//! paying only for sending it the megaflow journal and deleting what it returns) or inline in
//! the update call, not counted (deterministic; the default, [`Config::revalidator`],
//! [`crate::revalidator`]). The idle/flow-limit sweeps run at batch boundaries and are PMD time.
//!
//! **The clock** ([`Clock`]): `Measured` advances the PMD clock by the measured time of
//! `process_batch` and `handle_upcalls` (and records the EMC and megaflow-cache stages
//! separately); `Virtual` advances it by fixed costs per packet and per upcall, so every result —
//! counters, expiry, ranking — is a pure function of the inputs (the tests use it).
//!
//! **Hot path**: `process_batch` allocates nothing and takes no locks: fixed arrays per batch,
//! preallocated EMC/CD, hash maps probed by value, a preallocated upcall queue.

use std::time::Instant;

use rqvs_classify::ClassifierError;
use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::ccache::{CcacheConfig, MegaflowModel};
use crate::cd::CuckooDistributor;
use crate::counters::Counters;
use crate::dpcls::{Dpcls, FlowRef};
use crate::emc::Emc;
use crate::predict::{self, PredictStats, Predictor, Preinstalled};
use crate::revalidator::{
    Revalidation, Revalidator, RevalidatorMode, RevalidatorThread, DEFAULT_FLOW_LIMIT, DEFAULT_IDLE_NS, JOURNAL_BATCH,
};
use crate::upcall::{packet_key, SlowPath, Upcall, UpcallQueue, HANDLER_BATCH, UPCALL_QUEUE_CAP};
use crate::{flow_hash, DpAction, BATCH};

/// How the PMD clock advances (module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Clock {
    Measured,
    Virtual { packet_ns: u64, upcall_ns: u64 },
}

/// Datapath settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// EMC enabled.
    pub emc: bool,
    /// EMC insertion probability (OVS default 1/100).
    pub emc_insert_prob: f64,
    /// Cuckoo distributor enabled (it may still turn itself off).
    pub cd: bool,
    pub flow_limit: usize,
    pub idle_ns: u64,
    pub upcall_queue: usize,
    pub clock: Clock,
    /// Seed of the EMC insertion draws.
    pub seed: u64,
    /// CCACHE: a learned model over the megaflows before the megaflow cache ([`crate::ccache`]).
    pub ccache: Option<CcacheConfig>,
    /// Where rule-change revalidation runs ([`crate::revalidator`]).
    pub revalidator: RevalidatorMode,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            emc: true,
            emc_insert_prob: 0.01,
            cd: false,
            flow_limit: DEFAULT_FLOW_LIMIT,
            idle_ns: DEFAULT_IDLE_NS,
            upcall_queue: UPCALL_QUEUE_CAP,
            clock: Clock::Measured,
            seed: 1,
            ccache: None,
            revalidator: RevalidatorMode::Inline,
        }
    }
}

/// The ORIG datapath (module docs).
pub struct Datapath {
    cfg: Config,
    emc: Emc,
    dpcls: Dpcls,
    cd: Option<CuckooDistributor>,
    model: Option<MegaflowModel>,
    queue: UpcallQueue,
    slow: SlowPath,
    reval: Revalidator,
    c: Counters,
    now_ns: u64,
    results: Vec<(u64, DpAction)>,
    pub handler_batches: u64,
    /// Rule-change count (the [`crate::design::Design::visible_epoch`]).
    epoch: u64,
    /// Flow prediction ([`crate::predict`]), off unless set.
    predictor: Option<Predictor>,
    /// The revalidator thread ([`RevalidatorMode::Thread`]).
    reval_thread: Option<RevalidatorThread>,
    /// Revalidations the thread finished and the PMD applied, not yet taken by the caller.
    revalidations: Vec<Revalidation>,
}

impl Datapath {
    /// A datapath whose slow path holds `rules` (OpenFlow or ClassBench rules; port ranges are
    /// expanded by the slow path).
    pub fn new(rules: &[Rule], cfg: Config) -> Result<Datapath, ClassifierError> {
        let slow = SlowPath::build(rules)?;
        let mut dpcls = Dpcls::new();
        let reval_thread = (cfg.revalidator == RevalidatorMode::Thread).then(|| {
            dpcls.enable_journal();
            RevalidatorThread::spawn(slow.clone())
        });
        Ok(Datapath {
            emc: Emc::new(cfg.emc_insert_prob, cfg.seed),
            dpcls,
            cd: cfg.cd.then(CuckooDistributor::new),
            model: cfg.ccache.map(MegaflowModel::new),
            queue: UpcallQueue::new(cfg.upcall_queue),
            slow,
            reval: Revalidator::new(cfg.idle_ns, cfg.flow_limit),
            c: Counters::default(),
            now_ns: 0,
            results: Vec::with_capacity(cfg.upcall_queue),
            handler_batches: 0,
            epoch: 0,
            predictor: None,
            reval_thread,
            revalidations: Vec::new(),
            cfg,
        })
    }

    /// PMD clock, ns.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Moves the PMD clock forward by `ns` with no packets (an idle PMD; tests of expiry).
    pub fn advance_clock(&mut self, ns: u64) {
        self.now_ns += ns;
    }

    /// The counters, with the gauges filled in.
    pub fn counters(&self) -> Counters {
        let mut c = self.c;
        c.megaflows = self.dpcls.len() as u64;
        c.masks = self.dpcls.masks() as u64;
        c.pmd_ns = self.now_ns;
        c.emc_inserts = self.emc.inserts;
        if let Some(m) = &self.model {
            c.model_entries = m.len() as u64;
            c.model_swaps = m.swaps;
        }
        c
    }

    /// CCACHE's model over the megaflows, when configured.
    pub fn megaflow_model(&self) -> Option<&MegaflowModel> {
        self.model.as_ref()
    }

    /// CCACHE: trains over the current megaflows now and swaps the model in (tests).
    pub fn train_model_now(&mut self) {
        if let Some(m) = self.model.as_mut() {
            m.finish(&mut self.dpcls);
            m.train_now(&self.dpcls);
            m.finish(&mut self.dpcls);
        }
    }

    pub fn dpcls(&self) -> &Dpcls {
        &self.dpcls
    }

    pub fn slow_path(&self) -> &SlowPath {
        &self.slow
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The cuckoo distributor's (intervals on, intervals off), when configured.
    pub fn cd_intervals(&self) -> Option<(u64, u64)> {
        self.cd.as_ref().map(|cd| (cd.intervals_on, cd.intervals_off))
    }

    pub fn emc_occupancy(&self) -> usize {
        self.emc.occupancy(&self.dpcls)
    }

    /// Upcalls waiting for the handler.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Turns flow prediction on (or off with `None`): the handler feeds it every upcall and
    /// installs what it predicts ([`crate::predict`]).
    pub fn set_predictor(&mut self, p: Option<Predictor>) {
        self.predictor = p.map(|p| p.account_within(self.cfg.idle_ns));
    }

    /// The predictor's counters, its predictions' use checked now; `None` when prediction is off.
    pub fn prediction_stats(&mut self) -> Option<PredictStats> {
        let p = self.predictor.as_mut()?;
        p.account(&self.dpcls, self.now_ns, true);
        Some(p.stats())
    }

    /// Installs the megaflows of `keys` ahead of their packets: each key goes through the slow
    /// path as an upcall would, and its megaflow is installed unless one covering it is installed
    /// or the flow limit is reached. No packet is received or counted: the work is counted in
    /// `preinstalled`, `preinstall_existing`, `preinstall_refused` and `predict_ns` (the PMD clock
    /// does not move). Returns the megaflows installed.
    pub fn preinstall(&mut self, keys: &[FlowKey]) -> usize {
        let t0 = Instant::now();
        let (mut installed, mut lookups) = (0, 0);
        for k in keys {
            let (o, looked) = predict::preinstall_key(
                &mut self.dpcls,
                &self.slow,
                &mut self.c,
                self.reval.flow_limit,
                self.now_ns,
                k,
            );
            installed += usize::from(matches!(o, Preinstalled::Installed(_)));
            lookups += u64::from(looked);
        }
        self.c.predict_ns += predict::cost_ns(self.cfg.clock, t0, lookups);
        installed
    }

    /// The PMD's work on one batch. `out[i]` receives packet `i`'s action, or
    /// [`DpAction::Pending`] (queued; its action comes from [`Datapath::handle_upcalls`] with
    /// sequence number `seq0 + i`) or [`DpAction::Lost`] (upcall queue full).
    pub fn process_batch(&mut self, keys: &[FlowKey], seq0: u64, out: &mut [DpAction]) {
        let n = keys.len();
        assert!(n <= BATCH && out.len() >= n, "batches hold at most {BATCH} packets");
        let measured = self.cfg.clock == Clock::Measured;
        let t0 = measured.then(Instant::now);
        let now = self.now_ns;
        let mut k = [FlowKey::default(); BATCH];
        let mut h = [0u32; BATCH];
        let mut miss = [0u8; BATCH];
        let mut nmiss = 0;
        self.c.received += n as u64;

        // Stage 1: EMC.
        for i in 0..n {
            k[i] = packet_key(&keys[i]);
            h[i] = flow_hash(&k[i]);
            if self.cfg.emc {
                if let Some(f) = self.emc.lookup(h[i], &k[i], &self.dpcls) {
                    out[i] = self.dpcls.get(f).map_or(DpAction::Drop, |e| e.action);
                    self.dpcls.touch(f, now);
                    self.c.emc_hit += 1;
                    continue;
                }
            }
            miss[nmiss] = i as u8;
            nmiss += 1;
        }
        let t1 = measured.then(Instant::now);

        // Stage 1b (CCACHE): the learned model over megaflows.
        if let (Some(m), true) = (&self.model, nmiss > 0) {
            let mut mk = [FlowKey::default(); BATCH];
            for (j, &mi) in miss[..nmiss].iter().enumerate() {
                mk[j] = k[usize::from(mi)];
            }
            let mut found = [None; BATCH];
            if m.lookup_batch(&mk[..nmiss], &mut found[..nmiss]) > 0 {
                let mut left = 0;
                for j in 0..nmiss {
                    let i = usize::from(miss[j]);
                    match found[j] {
                        Some(f) => {
                            out[i] = self.dpcls.get(f).map_or(DpAction::Drop, |e| e.action);
                            self.dpcls.touch(f, now);
                            self.c.model_hit += 1;
                            if self.cfg.emc {
                                self.emc.probabilistic_insert(h[i], &k[i], f, &self.dpcls);
                            }
                        }
                        None => {
                            miss[left] = miss[j];
                            left += 1;
                        }
                    }
                }
                nmiss = left;
            }
        }
        let t1b = measured.then(Instant::now);

        // Stage 2: cuckoo distributor and megaflow cache; misses are queued.
        for &mi in &miss[..nmiss] {
            let i = usize::from(mi);
            let words = k[i].to_words();
            let mut found: Option<FlowRef> = None;
            let mut extra = 0;
            let cd_active = self.cd.as_ref().is_some_and(|cd| cd.active);
            if cd_active {
                match self.cd.as_ref().and_then(|cd| cd.lookup(h[i])) {
                    Some(st) => match self.dpcls.lookup_in(st, &words) {
                        Some(f) => {
                            self.c.cd_hit += 1;
                            self.c.megaflow_subtables += 1;
                            found = Some(f);
                        }
                        None => {
                            self.c.cd_wrong_hint += 1;
                            extra = 1;
                        }
                    },
                    None => self.c.cd_no_hint += 1,
                }
            }
            if found.is_none() {
                let (hit, probed) = self.dpcls.lookup(&words);
                if let Some(hit) = hit {
                    self.c.megaflow_hit += 1;
                    self.c.megaflow_subtables += u64::from(probed) + extra;
                    if cd_active {
                        if let Some(cd) = self.cd.as_mut() {
                            cd.insert(h[i], hit.subtable);
                        }
                    }
                    found = Some(hit.flow);
                }
            }
            match found {
                Some(f) => {
                    out[i] = self.dpcls.get(f).map_or(DpAction::Drop, |e| e.action);
                    self.dpcls.touch(f, now);
                    if self.cfg.emc {
                        self.emc.probabilistic_insert(h[i], &k[i], f, &self.dpcls);
                    }
                }
                None => {
                    if self.queue.push(Upcall { key: k[i], hash: h[i], seq: seq0 + i as u64 }) {
                        self.c.upcall += 1;
                        out[i] = DpAction::Pending;
                    } else {
                        self.c.lost += 1;
                        out[i] = DpAction::Lost;
                    }
                }
            }
        }
        let t2 = measured.then(Instant::now);

        // Stage 3: actions on the batch.
        for a in &out[..n] {
            match a {
                DpAction::Output(_) => self.c.tx += 1,
                DpAction::Drop => self.c.dropped_by_action += 1,
                DpAction::Pending | DpAction::Lost => {}
            }
        }

        match (self.cfg.clock, t0, t1, t2) {
            (Clock::Measured, Some(t0), Some(t1), Some(t2)) => {
                let t1b = t1b.expect("measured");
                self.c.emc_ns += (t1 - t0).as_nanos() as u64;
                self.c.model_ns += (t1b - t1).as_nanos() as u64;
                self.c.dpcls_ns += (t2 - t1b).as_nanos() as u64;
                self.now_ns += t0.elapsed().as_nanos() as u64;
            }
            (Clock::Virtual { packet_ns, .. }, ..) => self.now_ns += n as u64 * packet_ns,
            _ => unreachable!("measured clock has timestamps"),
        }
    }

    /// The handler: every queued upcall through the slow path, its megaflow installed, in
    /// batches of [`HANDLER_BATCH`]. Returns `(sequence number, action)` of each handled packet.
    pub fn handle_upcalls(&mut self) -> &[(u64, DpAction)] {
        self.results.clear();
        if self.queue.is_empty() {
            return &self.results;
        }
        let t0 = Instant::now();
        let now = self.now_ns;
        let mut handled = 0u64;
        while !self.queue.is_empty() {
            self.handler_batches += 1;
            for _ in 0..HANDLER_BATCH {
                let Some(u) = self.queue.pop() else { break };
                handled += 1;
                if let Some(p) = self.predictor.as_mut() {
                    p.note(&u.key);
                }
                let v = self.slow.classify(&u.key);
                let existing = self.dpcls.find(&v.megaflow).or_else(|| self.dpcls.peek(&u.key.to_words()));
                let f = if let Some(f) = existing {
                    self.c.install_existing += 1;
                    Some(f)
                } else if self.dpcls.len() >= self.reval.flow_limit {
                    self.c.install_refused += 1;
                    None
                } else {
                    self.c.installed += 1;
                    Some(self.dpcls.insert(u.key, v.megaflow, v.action, v.rule, now))
                };
                if let Some(f) = f {
                    self.dpcls.touch(f, now);
                    if self.cfg.emc {
                        self.emc.probabilistic_insert(u.hash, &u.key, f, &self.dpcls);
                    }
                }
                match v.action {
                    DpAction::Output(_) => self.c.tx += 1,
                    _ => self.c.dropped_by_action += 1,
                }
                self.results.push((u.seq, v.action));
            }
        }
        let ns = match self.cfg.clock {
            Clock::Measured => t0.elapsed().as_nanos() as u64,
            Clock::Virtual { upcall_ns, .. } => handled * upcall_ns,
        };
        self.c.upcall_ns += ns;
        self.now_ns += ns;
        if let Some(p) = self.predictor.as_mut() {
            let (limit, clock) = (self.reval.flow_limit, self.cfg.clock);
            self.now_ns += p.after_upcalls(&mut self.dpcls, &self.slow, &mut self.c, limit, self.now_ns, clock);
        }
        &self.results
    }

    /// Batch-boundary housekeeping: subtable ranking (and the CD's on/off decision) every
    /// second, the revalidator's sweep every 500 ms. Returns megaflows deleted.
    pub fn maintain(&mut self) -> u64 {
        if self.dpcls.maybe_rank(self.now_ns) {
            let (masks, share) = (self.dpcls.masks(), self.dpcls.top_share());
            if let Some(cd) = self.cd.as_mut() {
                cd.decide(masks, share);
            }
        }
        if let Some(p) = self.predictor.as_mut() {
            p.account(&self.dpcls, self.now_ns, false);
        }
        let mut deleted = 0;
        if self.reval.sweep_due(self.now_ns) {
            // Idle expiry and the flow limit run on the PMD thread here: PMD time.
            let t0 = Instant::now();
            deleted += self.reval.maybe_sweep(&mut self.dpcls, self.now_ns, &mut self.c);
            self.charge_reval(t0);
        }
        deleted += self.apply_revalidations(false);
        if let Some(m) = self.model.as_mut() {
            if deleted > 0 {
                m.sync(&self.dpcls);
            }
            // The swap (detach/attach) is PMD work; the snapshot stands for the manager thread's.
            let t0 = Instant::now();
            if m.poll(&mut self.dpcls, self.now_ns) && self.cfg.clock == Clock::Measured {
                self.now_ns += t0.elapsed().as_nanos() as u64;
            }
            if self.cfg.clock != Clock::Measured {
                // Virtual clock: training finishes "instantly", so runs are deterministic.
                m.finish(&mut self.dpcls);
            }
        }
        deleted
    }

    /// Adds OpenFlow rules, then revalidates every megaflow (inline; with the revalidator
    /// thread, the deletions come at a later batch boundary). Returns megaflows deleted now.
    pub fn add_rules(&mut self, rules: Vec<Rule>) -> Result<u64, ClassifierError> {
        // The revalidator thread's table takes the same rules (inline: nothing to keep).
        let keep = self.reval_thread.is_some();
        let mut added = Vec::with_capacity(if keep { rules.len() } else { 0 });
        let mut failed = None;
        for r in rules {
            let copy = keep.then(|| r.clone());
            match self.slow.insert(r) {
                Ok(()) => added.extend(copy),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        self.epoch += 1;
        let deleted = match self.reval_thread.as_mut() {
            Some(t) => {
                t.rules_added(&mut self.dpcls, self.epoch, added);
                0
            }
            None => self.revalidate_inline(),
        };
        match failed {
            Some(e) => Err(e),
            None => Ok(deleted),
        }
    }

    fn revalidate_inline(&mut self) -> u64 {
        self.account_predictions();
        let deleted = self.reval.revalidate_all(&mut self.dpcls, &self.slow, &mut self.c);
        self.sync_model();
        deleted
    }

    /// Deletes what the revalidator thread found stale (all of it pending when `wait`); returns
    /// megaflows deleted. Also sends the thread the megaflows installed and deleted since the
    /// last call.
    fn apply_revalidations(&mut self, wait: bool) -> u64 {
        let Some(t) = self.reval_thread.as_mut() else { return 0 };
        let journal = self.dpcls.journal_len();
        if t.idle() && !wait && journal < JOURNAL_BATCH {
            return 0;
        }
        let t0 = Instant::now();
        if wait || journal >= JOURNAL_BATCH {
            t.sync(&mut self.dpcls);
        }
        let done = t.finished(wait);
        let mut deleted = 0;
        if !done.is_empty() {
            self.account_predictions();
            for mut r in done {
                r.deleted = r.delete.iter().filter(|&&f| self.dpcls.remove(f)).count() as u64;
                deleted += r.deleted;
                r.delete = Vec::new();
                self.revalidations.push(r);
            }
            // The thread learns of these deletions with the next journal; CCACHE's model, from
            // the caller (`maintain`, `settle_revalidation`).
            self.c.deleted_revalidated += deleted;
        }
        // Sending the journal and deleting are the PMD's work.
        self.charge_reval(t0);
        deleted
    }

    /// Housekeeping since `t0` is PMD time (`reval_ns`), with the measured clock.
    fn charge_reval(&mut self, t0: Instant) {
        if self.cfg.clock == Clock::Measured {
            let ns = t0.elapsed().as_nanos() as u64;
            self.now_ns += ns;
            self.c.reval_ns += ns;
        }
    }

    /// Rule-change revalidations finished since the last call (the revalidator thread's; none
    /// inline), with the megaflows each deleted.
    pub fn take_revalidations(&mut self) -> Vec<Revalidation> {
        std::mem::take(&mut self.revalidations)
    }

    /// The epoch of the oldest rule table whose megaflows may still decide packets: the current
    /// one unless a revalidation is pending on the thread.
    pub fn oldest_epoch(&self) -> u64 {
        self.reval_thread.as_ref().and_then(RevalidatorThread::oldest_pending).unwrap_or(self.epoch)
    }

    /// Rule-change count.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Waits for the revalidator thread's pending work and applies it (a no-op inline);
    /// returns megaflows deleted.
    pub fn settle_revalidation(&mut self) -> u64 {
        let deleted = self.apply_revalidations(true);
        if deleted > 0 {
            self.sync_model();
        }
        deleted
    }

    /// Before revalidation deletes megaflows: which predictions were used.
    fn account_predictions(&mut self) {
        if let Some(p) = self.predictor.as_mut() {
            p.account(&self.dpcls, self.now_ns, true);
        }
    }

    fn sync_model(&mut self) {
        if let Some(m) = self.model.as_mut() {
            m.sync(&self.dpcls);
        }
    }

    /// Removes OpenFlow rules (absent ids are ignored), then revalidates. Returns megaflows
    /// deleted.
    pub fn remove_rules(&mut self, ids: &[RuleId]) -> u64 {
        for &id in ids {
            self.slow.remove(id);
        }
        self.epoch += 1;
        match self.reval_thread.as_mut() {
            Some(t) => {
                t.rules_removed(&mut self.dpcls, self.epoch, ids.to_vec());
                0
            }
            None => self.revalidate_inline(),
        }
    }

    /// Replays `keys` in order, batch by batch, with the handler and housekeeping at every batch
    /// boundary; returns each packet's final action (upcalled packets get the handler's).
    /// Allocates the result; the measured loop of `rqvs replay` is its own.
    pub fn run_keys(&mut self, keys: &[FlowKey]) -> Vec<DpAction> {
        crate::design::run_keys(self, keys)
    }

    /// Runs the idle/limit sweep now (tests; `maintain` runs it periodically).
    pub fn sweep_now(&mut self) -> u64 {
        let deleted = self.reval.sweep(&mut self.dpcls, self.now_ns, &mut self.c);
        self.sync_model();
        deleted
    }
}

impl crate::design::Design for Datapath {
    fn name(&self) -> &'static str {
        if self.model.is_some() {
            "ccache"
        } else {
            "orig"
        }
    }
    fn process_batch(&mut self, keys: &[FlowKey], seq0: u64, out: &mut [DpAction]) {
        Datapath::process_batch(self, keys, seq0, out)
    }
    fn handle_upcalls(&mut self) -> &[(u64, DpAction)] {
        Datapath::handle_upcalls(self)
    }
    fn maintain(&mut self) -> u64 {
        Datapath::maintain(self)
    }
    fn add_rules(&mut self, rules: Vec<Rule>) -> Result<u64, ClassifierError> {
        Datapath::add_rules(self, rules)
    }
    fn remove_rules(&mut self, ids: &[RuleId]) -> u64 {
        Datapath::remove_rules(self, ids)
    }
    fn counters(&self) -> Counters {
        Datapath::counters(self)
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
    fn oldest_epoch(&self) -> u64 {
        Datapath::oldest_epoch(self)
    }
    fn take_revalidations(&mut self) -> Vec<Revalidation> {
        Datapath::take_revalidations(self)
    }
    fn settle(&mut self) {
        self.settle_revalidation();
        if let Some(m) = self.model.as_mut() {
            m.finish(&mut self.dpcls);
        }
    }
    fn report(&self) -> Vec<(&'static str, f64)> {
        let mut v = vec![("openflow_subtables", self.slow.classifier().subtables(0) as f64)];
        if let Some((on, off)) = self.cd_intervals() {
            v.push(("cd_intervals_on", on as f64));
            v.push(("cd_intervals_off", off as f64));
        }
        if let Some(m) = &self.model {
            let total = self.dpcls.len().max(1) as f64;
            v.push(("coverage", m.len() as f64 / total));
            v.push(("model_megaflows", m.len() as f64));
            v.push(("model_swaps", m.swaps as f64));
            v.push(("last_training_ms", m.last_train.as_secs_f64() * 1e3));
        }
        v
    }
}
