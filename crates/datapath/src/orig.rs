//! The megaflow datapath: **ORIG** (OVS's dpif-netdev) and **CCACHE** (the same with a learned
//! model over the megaflows), one batch of up to [`BATCH`] packets at a time through EMC →
//! [model stage] → (cuckoo distributor) → megaflow cache → upcall queue, then the handler,
//! ranking and the revalidator at batch boundaries.
//!
//! The two designs are one type with a different **model stage** ([`ModelStage`]): [`Orig`] =
//! `MegaflowDatapath<NoModel>` (the stage compiles away), [`Ccache`] =
//! `MegaflowDatapath<MegaflowModel>` ([`crate::ccache`]). Everything else — EMC, megaflow
//! cache, cuckoo distributor, upcalls, revalidation, flow prediction — is shared code.
//!
//! **The PMD's thread**: [`crate::pmd::Pmd`] alternates [`Design::process_batch`] (the PMD's
//! work) with [`Design::handle_upcalls`] (the handler: slow path and megaflow installation for
//! everything queued) and [`Design::maintain`] (subtable ranking, CD on/off, idle expiry,
//! deletions from the revalidator thread, model swaps). This is OVS-DPDK's own arrangement for
//! upcalls — its PMD thread runs the upcall inline — so the handler's time is PMD time here.
//! Revalidation after rule changes runs on another core in OVS: here on a second thread
//! ([`RevalidatorMode::Thread`], the PMD paying only for sending it the megaflow journal and
//! deleting what it returns) or inline in the update call, not counted (deterministic;
//! [`OrigConfig::revalidator`], [`crate::revalidator`]). The idle/flow-limit sweeps run at batch
//! boundaries and are PMD time.
//!
//! **Defences against Tuple Space Explosion** (off by default, as OVS): a per-PMD mask limit
//! with an eviction policy ([`OrigConfig::mask_limit`]; applied where megaflows are installed,
//! [`Dpcls::install`]), and MFCGuard ([`OrigConfig::mfcguard`]): at batch boundaries every
//! interval of PMD time, the subtables that hold only drop megaflows — masks that exist only
//! for dropped traffic, which is what a TSE attack against a drop-by-default policy installs —
//! are deleted with their megaflows (the dropped packets then upcall again: MFCGuard trades
//! slow-path work for a short subtable walk). Its time is PMD time (`reval_ns`). Both delete
//! through [`Dpcls::remove`]: journaled for the revalidator thread, EMC and CD references
//! stale by generation, and never a megaflow CCACHE's model holds (those are not in the
//! subtables). Counted in `masks_evicted`, `megaflows_evicted`, `install_mask_refused`,
//! `install_mask_narrowed`,
//! `mfcguard_masks`, `mfcguard_removed`.
//!
//! **The clock** ([`crate::Clock`]): `Measured` advances the PMD clock by the measured time of
//! `process_batch` and `handle_upcalls` (and records the EMC, model and megaflow-cache stages
//! separately); `Virtual` by fixed costs per packet and per upcall.
//!
//! **Hot path**: `process_batch` allocates nothing and takes no locks: fixed arrays per batch,
//! preallocated EMC/CD, hash maps probed by value, a preallocated upcall queue.

use std::time::Instant;

use rqvs_classify::ClassifierError;
use rqvs_flow::key::NarrowKey;
use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::batch_key::{narrow_batch, whole_batch, BatchKey};
use crate::ccache::{CcacheConfig, MegaflowModel};
use crate::cd::CuckooDistributor;
use crate::counters::Counters;
use crate::design::{Design, DesignReport, OrigReport};
use crate::dpcls::{Dpcls, Install, MaskLimit, MegaflowEntry, MegaflowRef};
use crate::emc::Emc;
use crate::predict::{self, PredictStats, Predictor};
use crate::revalidator::{
    Revalidation, Revalidator, RevalidatorMode, RevalidatorThread, DEFAULT_FLOW_LIMIT, DEFAULT_IDLE_NS, JOURNAL_BATCH,
};
use crate::upcall::{Upcall, UpcallQueue, HANDLER_BATCH, UPCALL_QUEUE_CAP};
use crate::{DatapathConfig, BATCH};
use rqvs_ofproto::table::{OfprotoTable, RuleChange, Verdict};
use rqvs_ofproto::{DpAction, NO_RULE};

/// The settings of the megaflow datapath (ORIG, and CCACHE's megaflow cache): OVS's options.
#[derive(Clone, Copy, Debug)]
pub struct OrigConfig {
    /// Cuckoo distributor enabled (it may still turn itself off).
    pub cd: bool,
    pub flow_limit: usize,
    pub idle_ns: u64,
    pub upcall_queue: usize,
    /// Where rule-change revalidation runs ([`crate::revalidator`]).
    pub revalidator: RevalidatorMode,
    /// Defence against Tuple Space Explosion: at most this many megaflow masks (subtables) per
    /// PMD, and the policy at the limit ([`crate::dpcls`]); `None` (the default): no limit, as OVS.
    pub mask_limit: Option<MaskLimit>,
    /// MFCGuard (Csikor et al.): every this many ns of PMD time, the subtables whose megaflows
    /// all drop are deleted ([`Dpcls::remove_drop_only`]; module docs, *Defences*); `None` (the
    /// default): off, as OVS.
    pub mfcguard: Option<u64>,
}

impl Default for OrigConfig {
    fn default() -> Self {
        OrigConfig {
            cd: false,
            flow_limit: DEFAULT_FLOW_LIMIT,
            idle_ns: DEFAULT_IDLE_NS,
            upcall_queue: UPCALL_QUEUE_CAP,
            revalidator: RevalidatorMode::Inline,
            mask_limit: None,
            mfcguard: None,
        }
    }
}

/// The stage between the EMC and the megaflow cache: nothing in ORIG ([`NoModel`]), a learned
/// model over the megaflows in CCACHE ([`MegaflowModel`]).
pub trait ModelStage: Send {
    /// The design's name (`orig`, `ccache`).
    const NAME: &'static str;
    /// False for [`NoModel`]: the stage's code compiles away.
    const PRESENT: bool;
    /// For each key, an installed megaflow the stage holds that covers it; returns how many.
    fn lookup_batch<K: BatchKey>(&self, keys: &[K], out: &mut [Option<MegaflowRef>]) -> usize;
    /// Megaflows were deleted from the megaflow cache: forget them.
    fn sync(&mut self, dpcls: &Dpcls);
    /// Batch boundary: starts training when due, swaps a trained model in; true on a swap.
    fn poll(&mut self, dpcls: &mut Dpcls, now_ns: u64) -> bool;
    /// Waits for a running training and swaps it in.
    fn finish(&mut self, dpcls: &mut Dpcls);
    /// Trains over the installed megaflows now and swaps the model in (tests).
    fn train_now(&mut self, dpcls: &mut Dpcls);
    /// Fills the stage's gauges.
    fn gauges(&self, c: &mut Counters);
    /// The design's report, given the megaflow datapath's.
    fn report(&self, dpcls: &Dpcls, orig: OrigReport) -> DesignReport;
}

/// ORIG's empty model stage.
pub struct NoModel;

impl ModelStage for NoModel {
    const NAME: &'static str = "orig";
    const PRESENT: bool = false;
    #[inline]
    fn lookup_batch<K: BatchKey>(&self, _: &[K], _: &mut [Option<MegaflowRef>]) -> usize {
        0
    }
    fn sync(&mut self, _: &Dpcls) {}
    fn poll(&mut self, _: &mut Dpcls, _: u64) -> bool {
        false
    }
    fn finish(&mut self, _: &mut Dpcls) {}
    fn train_now(&mut self, _: &mut Dpcls) {}
    fn gauges(&self, _: &mut Counters) {}
    fn report(&self, _: &Dpcls, orig: OrigReport) -> DesignReport {
        DesignReport::Orig(orig)
    }
}

/// **ORIG**: EMC → (cuckoo distributor) → megaflow cache → upcall.
pub type Orig = MegaflowDatapath<NoModel>;
/// **CCACHE**: EMC → learned model over the megaflows → megaflow cache → upcall.
pub type Ccache = MegaflowDatapath<MegaflowModel>;

/// The megaflow datapath with model stage `S` (module docs).
pub struct MegaflowDatapath<S: ModelStage> {
    cfg: DatapathConfig,
    orig: OrigConfig,
    emc: Emc<MegaflowRef>,
    dpcls: Dpcls,
    cd: Option<CuckooDistributor>,
    stage: S,
    queue: UpcallQueue,
    /// The OpenFlow table (shared with the revalidator thread, and with other PMDs when built
    /// with [`MegaflowDatapath::with_table`]).
    table: OfprotoTable,
    reval: Revalidator,
    c: Counters,
    now_ns: u64,
    results: Vec<(u64, DpAction)>,
    /// The rule that decided each packet of the last batch ([`Design::batch_rules`]).
    batch_rules: [RuleId; BATCH],
    /// Packets in the last batch.
    batch_len: usize,
    /// The rule of each of `results` ([`Design::upcall_rules`]).
    upcall_rules: Vec<RuleId>,
    pub handler_batches: u64,
    /// Rule-change count (the [`Design::visible_epoch`]).
    epoch: u64,
    /// Flow prediction ([`crate::predict`]), off unless set.
    predictor: Option<Predictor>,
    /// The revalidator thread ([`RevalidatorMode::Thread`]).
    reval_thread: Option<RevalidatorThread>,
    /// Revalidations the thread finished and the PMD applied, not yet taken by the caller.
    revalidations: Vec<Revalidation>,
    /// PMD clock of MFCGuard's next pass ([`OrigConfig::mfcguard`]).
    next_mfcguard_ns: u64,
    /// Inline revalidation: every megaflow installed comes from, or was checked against, a
    /// table of this version or later ([`crate::revalidator`], *Incremental revalidation*).
    reval_floor: u64,
}

impl Orig {
    /// ORIG over `rules` (OpenFlow or ClassBench rules; port ranges are expanded by the slow path).
    pub fn new(rules: &[Rule], cfg: DatapathConfig, orig: OrigConfig) -> Result<Orig, ClassifierError> {
        MegaflowDatapath::with_stage(rules, cfg, orig, NoModel)
    }

    /// ORIG over a table other PMDs share: rule changes are committed to the table once, then
    /// each PMD is told ([`MegaflowDatapath::table_changed`]).
    pub fn with_table(table: OfprotoTable, cfg: DatapathConfig, orig: OrigConfig) -> Orig {
        MegaflowDatapath::with_table_and_stage(table, cfg, orig, NoModel)
    }
}

impl Ccache {
    /// CCACHE over `rules`.
    pub fn new(
        rules: &[Rule],
        cfg: DatapathConfig,
        orig: OrigConfig,
        ccache: CcacheConfig,
    ) -> Result<Ccache, ClassifierError> {
        MegaflowDatapath::with_stage(rules, cfg, orig, MegaflowModel::new(ccache))
    }

    /// CCACHE over a table other PMDs share (as [`Orig::with_table`]); each PMD has its own model
    /// over its own megaflows.
    pub fn with_table(table: OfprotoTable, cfg: DatapathConfig, orig: OrigConfig, ccache: CcacheConfig) -> Ccache {
        MegaflowDatapath::with_table_and_stage(table, cfg, orig, MegaflowModel::new(ccache))
    }

    /// CCACHE's model over the megaflows.
    pub fn megaflow_model(&self) -> &MegaflowModel {
        &self.stage
    }

    /// Trains on `t`, a trainer thread shared with other PMDs' models
    /// ([`rqvs_ofproto::trainer::spawn_trainer`]). Call before the first packet.
    pub fn set_trainer(&mut self, t: rqvs_ofproto::trainer::TrainerHandle) {
        self.stage.set_trainer(t);
    }
}

impl<S: ModelStage> MegaflowDatapath<S> {
    fn with_stage(rules: &[Rule], cfg: DatapathConfig, orig: OrigConfig, stage: S) -> Result<Self, ClassifierError> {
        Ok(Self::with_table_and_stage(OfprotoTable::build(rules)?, cfg, orig, stage))
    }

    fn with_table_and_stage(table: OfprotoTable, cfg: DatapathConfig, orig: OrigConfig, stage: S) -> Self {
        let mut dpcls = Dpcls::new();
        dpcls.reserve(orig.flow_limit);
        dpcls.set_mask_limit(orig.mask_limit);
        let reval_thread = (orig.revalidator == RevalidatorMode::Thread).then(|| {
            dpcls.enable_journal();
            RevalidatorThread::spawn(table.clone())
        });
        MegaflowDatapath {
            emc: Emc::with_entries(cfg.emc_entries, cfg.emc_insert_prob, cfg.seed),
            dpcls,
            cd: orig.cd.then(CuckooDistributor::new),
            stage,
            queue: UpcallQueue::new(orig.upcall_queue),
            table,
            reval: Revalidator::new(orig.idle_ns, orig.flow_limit),
            c: Counters::default(),
            now_ns: 0,
            results: Vec::with_capacity(orig.upcall_queue),
            batch_rules: [NO_RULE; BATCH],
            batch_len: 0,
            upcall_rules: Vec::with_capacity(orig.upcall_queue),
            handler_batches: 0,
            epoch: 0,
            predictor: None,
            reval_thread,
            revalidations: Vec::new(),
            next_mfcguard_ns: orig.mfcguard.unwrap_or(0),
            reval_floor: 0,
            cfg,
            orig,
        }
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
        let d = self.dpcls.defence_stats();
        c.masks_evicted = d.masks_evicted;
        c.megaflows_evicted = d.megaflows_evicted;
        c.install_mask_refused = d.mask_refused;
        c.install_mask_narrowed = d.mask_narrowed;
        c.mfcguard_masks = d.mfcguard_masks;
        c.mfcguard_removed = d.mfcguard_removed;
        self.stage.gauges(&mut c);
        c
    }

    pub fn dpcls(&self) -> &Dpcls {
        &self.dpcls
    }

    /// The OpenFlow table the slow path classifies with.
    pub fn table(&self) -> &OfprotoTable {
        &self.table
    }

    pub fn config(&self) -> &DatapathConfig {
        &self.cfg
    }

    pub fn orig_config(&self) -> &OrigConfig {
        &self.orig
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
        self.predictor = p.map(|p| p.account_within(self.orig.idle_ns));
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
                &self.table,
                &mut self.c,
                self.reval.flow_limit,
                self.now_ns,
                k,
            );
            installed += usize::from(matches!(o, Install::Installed(_)));
            lookups += u64::from(looked);
        }
        self.c.predict_ns += self.cfg.clock.upcall_ns(t0, lookups);
        installed
    }

    /// The PMD's work on one batch. `out[i]` receives packet `i`'s action, or
    /// [`DpAction::Pending`] (queued; its action comes from [`MegaflowDatapath::handle_upcalls`] with
    /// sequence number `seq0 + i`) or [`DpAction::Lost`] (upcall queue full).
    pub fn process_batch(&mut self, keys: &[FlowKey], seq0: u64, out: &mut [DpAction]) {
        let n = keys.len();
        assert!(n <= BATCH && out.len() >= n, "batches hold at most {BATCH} packets");
        let t0 = self.cfg.clock.start();
        // The batch as narrow keys when every packet's key is narrow (crate::batch_key).
        let mut narrow = [NarrowKey::default(); BATCH];
        if narrow_batch(keys, self.cfg.wire_keys, &mut narrow) {
            self.batch(&narrow[..n], seq0, out, t0);
        } else {
            let mut whole = [FlowKey::ZERO; BATCH];
            whole_batch(keys, self.cfg.wire_keys, &mut whole);
            self.batch(&whole[..n], seq0, out, t0);
        }
    }

    /// [`MegaflowDatapath::process_batch`] of the batch's keys `k` (on the wire already), started
    /// at `t0`.
    #[inline(always)]
    fn batch<K: BatchKey>(&mut self, k: &[K], seq0: u64, out: &mut [DpAction], t0: Option<Instant>) {
        let n = k.len();
        let clock = self.cfg.clock;
        let now = self.now_ns;
        let mut h = [0u32; BATCH];
        let mut miss = [0u8; BATCH];
        let mut nmiss = 0;
        self.c.received += n as u64;
        self.batch_len = n;

        // Stage 1: EMC.
        for i in 0..n {
            h[i] = k[i].hash();
            if self.cfg.emc {
                if let Some(f) = k[i].emc_lookup(&self.emc, h[i], &self.dpcls) {
                    (out[i], self.batch_rules[i]) = self.dpcls.hit(f, now);
                    self.c.emc_hit += 1;
                    continue;
                }
            }
            miss[nmiss] = i as u8;
            nmiss += 1;
        }
        let t1 = clock.start();

        // Stage 1b (CCACHE): the learned model over megaflows.
        if S::PRESENT && nmiss > 0 {
            let m = &self.stage;
            let mut mk = [K::default(); BATCH];
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
                            (out[i], self.batch_rules[i]) = self.dpcls.hit(f, now);
                            self.c.model_hit += 1;
                            if self.cfg.emc {
                                k[i].emc_insert(&mut self.emc, h[i], f, &self.dpcls);
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
        let t1b = clock.start();

        // Stage 2: cuckoo distributor and megaflow cache; misses are queued.
        for &mi in &miss[..nmiss] {
            let i = usize::from(mi);
            let words = k[i].words();
            let mut found: Option<MegaflowRef> = None;
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
                    found = Some(hit.megaflow);
                }
            }
            match found {
                Some(f) => {
                    (out[i], self.batch_rules[i]) = self.dpcls.hit(f, now);
                    if self.cfg.emc {
                        k[i].emc_insert(&mut self.emc, h[i], f, &self.dpcls);
                    }
                }
                None => {
                    self.batch_rules[i] = NO_RULE;
                    if self.queue.push(Upcall { key: k[i].whole(), hash: h[i], seq: seq0 + i as u64 }) {
                        self.c.upcall += 1;
                        out[i] = DpAction::Pending;
                    } else {
                        self.c.lost += 1;
                        out[i] = DpAction::Lost;
                    }
                }
            }
        }
        let t2 = clock.start();

        // Stage 3: actions on the batch.
        for a in &out[..n] {
            match a {
                DpAction::Output(_) | DpAction::Apply(_) => self.c.tx += 1,
                DpAction::Drop => self.c.dropped_by_action += 1,
                DpAction::Pending | DpAction::Lost => {}
            }
        }

        if let (Some(t0), Some(t1), Some(t1b), Some(t2)) = (t0, t1, t1b, t2) {
            self.c.emc_ns += (t1 - t0).as_nanos() as u64;
            self.c.model_ns += (t1b - t1).as_nanos() as u64;
            self.c.dpcls_ns += (t2 - t1b).as_nanos() as u64;
        }
        self.now_ns += clock.batch_ns(t0, n);
    }

    /// The handler: every queued upcall through the slow path, its megaflow installed, in
    /// batches of [`HANDLER_BATCH`]. Returns `(sequence number, action)` of each handled packet.
    pub fn handle_upcalls(&mut self) -> &[(u64, DpAction)] {
        self.results.clear();
        self.upcall_rules.clear();
        if self.queue.is_empty() {
            return &self.results;
        }
        let t0 = Instant::now();
        let now = self.now_ns;
        let mut handled = 0u64;
        while !self.queue.is_empty() {
            self.handler_batches += 1;
            // One read of the table per upcall (`rqvs_ofproto::table`, *Concurrency*), through a
            // second handle to the shared table, so the datapath stays free to install.
            let shared = self.table.clone();
            for _ in 0..HANDLER_BATCH {
                let Some(u) = self.queue.pop() else { break };
                handled += 1;
                let v = shared.read().classify(&u.key);
                let action = self.finish_upcall(&u, &v, true, now);
                self.results.push((u.seq, action));
                self.upcall_rules.push(v.rule.unwrap_or(NO_RULE));
            }
        }
        let ns = self.cfg.clock.upcall_ns(t0, handled);
        self.c.upcall_ns += ns;
        self.now_ns += ns;
        if let Some(p) = self.predictor.as_mut() {
            let (limit, clock) = (self.reval.flow_limit, self.cfg.clock);
            self.now_ns += p.after_upcalls(&mut self.dpcls, &self.table, &mut self.c, limit, self.now_ns, clock);
        }
        &self.results
    }

    /// One handled upcall: its megaflow installed (unless `install` is false), the EMC told,
    /// the action counted; returns the packet's action.
    fn finish_upcall(&mut self, u: &Upcall, v: &Verdict, install: bool, now: u64) -> DpAction {
        if let Some(p) = self.predictor.as_mut() {
            p.note(&u.key);
        }
        if install {
            let install = self.dpcls.install(u.key, v, self.reval.flow_limit, now);
            match install {
                Install::Installed(_) => self.c.installed += 1,
                Install::Existing(_) => self.c.install_existing += 1,
                Install::Refused => self.c.install_refused += 1,
            }
            if let Some(f) = install.megaflow() {
                self.dpcls.touch(f, now);
                if self.cfg.emc {
                    self.emc.probabilistic_insert(u.hash, &u.key, f, &self.dpcls);
                }
            }
        } else {
            self.c.install_stale += 1;
        }
        match v.action {
            DpAction::Output(_) | DpAction::Apply(_) => self.c.tx += 1,
            _ => self.c.dropped_by_action += 1,
        }
        v.action
    }

    /// Moves the queued upcalls to `out`, for a handler thread ([`Design::take_upcalls`]).
    pub fn take_upcalls(&mut self, out: &mut Vec<Upcall>) {
        while let Some(u) = self.queue.pop() {
            out.push(u);
        }
    }

    /// A handler thread's verdict for an upcall [`MegaflowDatapath::take_upcalls`] gave it
    /// ([`Design::complete_upcall`]).
    pub fn complete_upcall(&mut self, u: &Upcall, v: Option<&Verdict>, install: bool) -> DpAction {
        match v {
            Some(v) => self.finish_upcall(u, v, install, self.now_ns),
            None => {
                self.c.upcall -= 1;
                self.c.lost += 1;
                DpAction::Lost
            }
        }
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
        if let Some(interval) = self.orig.mfcguard {
            if self.now_ns >= self.next_mfcguard_ns {
                self.next_mfcguard_ns = self.now_ns + interval;
                let t0 = Instant::now();
                deleted += self.dpcls.remove_drop_only().1;
                self.charge_reval(t0);
            }
        }
        deleted += self.apply_revalidations(false);
        if S::PRESENT {
            if deleted > 0 {
                self.stage.sync(&self.dpcls);
            }
            // The swap (detach/attach) is PMD work; the snapshot stands for the manager thread's.
            let t0 = Instant::now();
            if self.stage.poll(&mut self.dpcls, self.now_ns) {
                self.now_ns += self.cfg.clock.housekeeping_ns(t0);
            }
            if !self.cfg.clock.is_measured() {
                // Virtual clock: training finishes "instantly", so runs are deterministic.
                self.stage.finish(&mut self.dpcls);
            }
        }
        deleted
    }

    /// Adds OpenFlow rules as one change set (all or none: a rule the table refuses leaves it
    /// unchanged and is an error), then revalidates. Returns megaflows deleted now.
    pub fn add_rules(&mut self, rules: Vec<Rule>) -> Result<u64, ClassifierError> {
        self.table.commit(rules.into_iter().map(RuleChange::Add).collect())?;
        Ok(self.table_changed())
    }

    /// The shared table changed (a commit by this PMD or another one): the megaflows the
    /// changes can affect are revalidated — inline, or on the revalidator thread with the
    /// deletions at a later batch boundary. Returns megaflows deleted now. Every megaflow this
    /// PMD installs afterwards must come from the table as it is now or later (true of its own
    /// handler; a handler on another thread: [`MegaflowDatapath::table_changed_at`]).
    pub fn table_changed(&mut self) -> u64 {
        let now = self.table.version();
        self.table_changed_at(now)
    }

    /// [`MegaflowDatapath::table_changed`] for a PMD whose upcalls another thread classifies:
    /// `known` is the oldest table version a verdict installed from now on can come from (the
    /// switch's PMD refuses to install verdicts older than the newest version it heard of; the
    /// revalidator reads the changes after `known` at the next pass, [`crate::revalidator`],
    /// *Incremental revalidation*).
    pub fn table_changed_at(&mut self, known: u64) -> u64 {
        self.epoch += 1;
        match self.reval_thread.as_mut() {
            Some(t) => {
                t.revalidate(&mut self.dpcls, self.epoch, known);
                0
            }
            None => self.revalidate_inline(known),
        }
    }

    fn revalidate_inline(&mut self, known: u64) -> u64 {
        self.account_predictions();
        let deleted = self.reval.revalidate_since(&mut self.dpcls, &self.table, self.reval_floor, &mut self.c);
        self.reval_floor = known;
        self.sync_model();
        deleted
    }

    /// Megaflows re-checked (translated again) by inline revalidations so far; the others a
    /// change could not affect ([`crate::revalidator`], *Incremental revalidation*).
    pub fn revalidation_checks(&self) -> u64 {
        self.reval.checked
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
                for (f, rule) in std::mem::take(&mut r.reattribute) {
                    self.dpcls.set_rule(f, rule);
                }
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
        let ns = self.cfg.clock.housekeeping_ns(t0);
        self.now_ns += ns;
        self.c.reval_ns += ns;
    }

    /// Revalidates on `t` (a handle of a revalidator thread shared with other PMDs,
    /// [`crate::revalidator::RevalidatorService`]) instead of its own thread or inline. Call
    /// before the first packet.
    pub fn set_revalidator(&mut self, t: RevalidatorThread) {
        self.dpcls.enable_journal();
        self.reval_thread = Some(t);
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
        self.stage.sync(&self.dpcls);
    }

    /// Removes OpenFlow rules (absent ids are ignored), then revalidates. Returns megaflows
    /// deleted.
    pub fn remove_rules(&mut self, ids: &[RuleId]) -> u64 {
        self.table.commit(ids.iter().map(|&id| RuleChange::Remove(id)).collect()).expect("removals cannot fail");
        self.table_changed()
    }

    /// The model stage trains over the installed megaflows now and swaps the model in (tests; a
    /// no-op in ORIG).
    pub fn train_model_now(&mut self) {
        self.stage.train_now(&mut self.dpcls);
    }

    /// Replays `keys` through the PMD loop ([`crate::pmd::run_keys`]): each packet's final action.
    pub fn run_keys(&mut self, keys: &[FlowKey]) -> Vec<DpAction> {
        crate::pmd::run_keys(self, keys)
    }

    /// Runs the idle/limit sweep now (tests; `maintain` runs it periodically).
    pub fn sweep_now(&mut self) -> u64 {
        let deleted = self.reval.sweep(&mut self.dpcls, self.now_ns, &mut self.c);
        self.sync_model();
        deleted
    }
}

impl<S: ModelStage> Design for MegaflowDatapath<S> {
    fn name(&self) -> &'static str {
        S::NAME
    }
    fn process_batch(&mut self, keys: &[FlowKey], seq0: u64, out: &mut [DpAction]) {
        MegaflowDatapath::process_batch(self, keys, seq0, out)
    }
    fn handle_upcalls(&mut self) -> &[(u64, DpAction)] {
        MegaflowDatapath::handle_upcalls(self)
    }
    fn batch_rules(&self) -> &[RuleId] {
        &self.batch_rules[..self.batch_len]
    }
    fn upcall_rules(&self) -> &[RuleId] {
        &self.upcall_rules
    }
    fn take_upcalls(&mut self, out: &mut Vec<Upcall>) {
        MegaflowDatapath::take_upcalls(self, out)
    }
    fn complete_upcall(&mut self, u: &Upcall, v: Option<&Verdict>, install: bool) -> DpAction {
        MegaflowDatapath::complete_upcall(self, u, v, install)
    }
    fn maintain(&mut self) -> u64 {
        MegaflowDatapath::maintain(self)
    }
    fn add_rules(&mut self, rules: Vec<Rule>) -> Result<u64, ClassifierError> {
        MegaflowDatapath::add_rules(self, rules)
    }
    fn remove_rules(&mut self, ids: &[RuleId]) -> u64 {
        MegaflowDatapath::remove_rules(self, ids)
    }
    fn counters(&self) -> Counters {
        MegaflowDatapath::counters(self)
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
        MegaflowDatapath::oldest_epoch(self)
    }
    fn take_revalidations(&mut self) -> Vec<Revalidation> {
        MegaflowDatapath::take_revalidations(self)
    }
    fn settle(&mut self) {
        self.settle_revalidation();
        self.stage.finish(&mut self.dpcls);
    }
    fn report(&self) -> DesignReport {
        let orig = OrigReport {
            openflow_subtables: self.table.read().classifier().subtables(0) as u64,
            cd_intervals: self.cd_intervals(),
        };
        self.stage.report(&self.dpcls, orig)
    }
    fn prediction_stats(&mut self) -> Option<PredictStats> {
        MegaflowDatapath::prediction_stats(self)
    }
    fn table_changed(&mut self) -> u64 {
        MegaflowDatapath::table_changed(self)
    }
    fn table_changed_at(&mut self, known: u64) -> u64 {
        MegaflowDatapath::table_changed_at(self, known)
    }
    fn for_each_megaflow(&self, f: &mut dyn FnMut(&MegaflowEntry)) {
        self.dpcls.iter().for_each(f)
    }
    fn preinstall(&mut self, keys: &[FlowKey]) -> usize {
        MegaflowDatapath::preinstall(self, keys)
    }
}
