//! **`--design auto`**: a controller inside the datapath that moves a PMD between ORIG, CCACHE
//! and CFLOWS as the traffic asks (NSDI'22 §8's proposal; issue 18), without dropping a packet
//! or giving a wrong action during a switch.
//!
//! # What it watches (per PMD, every [`AutoConfig::window_ns`] of PMD time)
//!
//! From the current design's [`Counters`] over the window: the share of PMD time in upcalls
//! (`upcall_ns / pmd_ns`), upcalls per second, megaflow subtables probed per megaflow hit, the
//! megaflow masks installed (the gauge), the EMC's share of the packets, and the learned model's
//! coverage (CFLOWS: rules the iSets hold; CCACHE: megaflows). A window with fewer than
//! [`AutoConfig::min_window_packets`] packets decides nothing.
//!
//! # The policy ([`AutoConfig`], defaults from docs/designs.md's measurements)
//!
//! - **Start**: CFLOWS at [`AutoConfig::cflows_rules`] rules or more, ORIG below. The default
//!   is 0 (CFLOWS at any size): docs/designs.md measures CFLOWS ahead of ORIG and CCACHE at 1K,
//!   10K, 100K and 500K rules on the ClassBench traces (constant rate and over all passes), and
//!   auto in CFLOWS within noise of the best fixed design on all 36 sets at 1K–100K.
//! - **ORIG/CCACHE → CFLOWS** when upcalls are the bottleneck or the megaflow cache explodes
//!   (a Tuple Space Explosion attack): upcall share ≥ `to_cflows_upcall_share` (25%), or
//!   subtables per hit ≥ `to_cflows_subtables` (24), or masks ≥ `to_cflows_masks` (512).
//! - **ORIG → CCACHE** when the megaflow hash tables multiply but upcalls are not the
//!   bottleneck: subtables per hit ≥ `to_ccache_subtables` (8) and upcall share <
//!   `ccache_max_upcall_share` (5%); **CCACHE → ORIG** when the walk is short again
//!   (subtables per hit ≤ `to_orig_subtables`, 3: the gap is the hysteresis).
//! - **CFLOWS → ORIG** when the learned index helps little and the traffic is local enough for
//!   caches: coverage < `leave_cflows_coverage` (30%) and EMC share ≥ `leave_cflows_emc_share`
//!   (90%) — where docs/designs.md measures ORIG ahead (warm, few flows, small megaflow cache).
//! - **CFLOWS → CFLOWS with TupleMerge alone** ([`Target::tm_alone`], the `--classifier tm`
//!   ablation) when the learned classifier's coverage is below `cflows_tm_coverage` and CFLOWS
//!   is not left: the learned index then adds a lookup and gains little. Off (0) by default
//!   until the ablation (`scripts/cflows_ablation.py`) says where; there is no way back within a
//!   stay in CFLOWS (TupleMerge alone has no coverage to watch): the next CFLOWS learns again.
//!
//! Hysteresis: the thresholds in and out differ (above); no switch before
//! [`AutoConfig::min_dwell_ns`] of PMD time in a design (1 s); and going back to the design just
//! left within four dwell times (a reversal) doubles the dwell (up to 64×), so a policy that
//! would flap slows down exponentially; a stay of 16 dwells resets it.
//!
//! # A switch
//!
//! The new design (the *candidate*) is built beside the current one from the current rules
//! (`builder`, [`Builder`]) — on a thread of its own with the measured clock (CFLOWS' first
//! training included), at once with the virtual clock (deterministic tests). The current design
//! keeps forwarding meanwhile; every rule change goes to it and to a journal the candidate
//! applies when built (rule changes always go through [`Design::add_rules`] /
//! [`Design::remove_rules`] on both). The candidate is *ready* when built, the journal applied,
//! no rule staged (delayed policy) and no revalidation pending; then, at a batch boundary
//! ([`Design::maintain`]), the swap: the old design's queued upcalls are handled with the old
//! table and their results handed out with the next [`Design::handle_upcalls`], its finished
//! revalidations kept for [`Design::take_revalidations`], the new design's clock moved to the
//! old one's, and the old design dropped on another thread (its revalidator thread joins there).
//! **Upcalls at a handler thread** (the switch: [`Design::take_upcalls`] /
//! [`Design::complete_upcall`]) may be out when the swap comes: the old design is then kept,
//! *draining*, and each upcall numbered before the swap goes back to it — its action, its
//! counters — until the last, when it is retired (no other swap meanwhile).
//!
//! **Shared rules** ([`Auto::shared`], the switch): the designs are built over structures the
//! PMDs share — one OpenFlow table for ORIG/CCACHE, one published classifier for CFLOWS — and
//! rule changes reach them there, not through auto; the current design and the candidate (by
//! its journal) are told of each commit by [`Design::table_changed`].
//!
//! One candidate at a time: the policy decides nothing while one is under way, and a switch
//! asked for meanwhile ([`Auto::request`]: tests, the switch's operator) is kept — the latest
//! one — and started once the candidate is swapped in or dropped.
//!
//! **Epochs.** Auto's visible epoch is `offset + current.visible_epoch()`; a swap bumps it by
//! one (the new offset), and the new design starts with no pending revalidation, so
//! `oldest_epoch` is the swap's epoch: the verification window never spans a swap (a packet
//! after it is checked against the table at it, which holds the same rules).
//!
//! **Counters** stay cumulative: the retired designs' additive counters are summed into a base
//! ([`Counters`]' per-packet outcomes still sum to packets received), the gauges (megaflows,
//! masks, rules, model entries) are the current design's, `pmd_ns` is the one continuous clock.
//!
//! **A cold ORIG after CFLOWS** would upcall for every flow at once. Auto keeps the last
//! [`AutoConfig::warm_keys`] keys it forwarded (one batch in four sampled) and the candidate ORIG/CCACHE installs
//! their megaflows before the swap ([`Design::preinstall`], on the builder thread: not PMD
//! time), so the flows in flight hit at once; what is left are flows not seen recently.
//!
//! # What is reported ([`AutoReport`])
//!
//! `design_switches`, the time in each design, the current design, a log of every switch
//! (PMD time, from, to, the reason with the signals that triggered it, how long the candidate
//! took to be ready, megaflows preinstalled), and the thresholds in force that are not the
//! defaults.
//!
//! # Setting the thresholds
//!
//! [`settings`]: `KEY=VALUE` settings (`window-ms=50,initial=orig`), the parser the command
//! line's `--auto`, the switch and the Python package share.
//!
//! # Where it lives
//!
//! [`policy`]: the thresholds, a window's signals, the decision and the dwell; [`settings`]: the
//! thresholds as `KEY=VALUE`; `build`: the
//! candidate, its builder thread and journal, the warm-up keys; here: [`Auto`] itself — the
//! switch at a batch boundary, epochs, counters, the report — and its [`Design`] impl.

use std::time::Instant;

use hashbrown::HashMap;
use rqvs_classify::ClassifierError;
use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::design::{Design, DesignKind, DesignReport};
use crate::dpcls::MegaflowEntry;
use crate::ofproto::Verdict;
use crate::predict::PredictStats;
use crate::revalidator::Revalidation;
use crate::upcall::Upcall;
use crate::{Clock, Counters, DpAction};

mod build;
pub mod policy;
pub mod settings;

pub use build::{Builder, Target};
pub use policy::{decide, AutoConfig, Signals};
pub use settings::AutoSettings;

use build::{Candidate, Change, Progress, Warm};
use policy::Dwell;

/// One switch (module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct SwitchEvent {
    /// PMD time of the swap, ns.
    pub at_ns: u64,
    pub from: DesignKind,
    pub to: DesignKind,
    /// The design switched from, to is CFLOWS with TupleMerge alone ([`Target::tm_alone`]).
    pub from_tm_alone: bool,
    pub to_tm_alone: bool,
    pub reason: String,
    /// PMD time from the decision to the swap (the candidate built and ready), ns.
    pub ready_ns: u64,
    /// Megaflows installed into the candidate ahead of packets.
    pub preinstalled: u64,
}

impl SwitchEvent {
    /// The design switched to, by name: `orig`, ..., `cflows (tm alone)`.
    pub fn to_name(&self) -> String {
        Target { kind: self.to, tm_alone: self.to_tm_alone }.name()
    }

    /// The design switched from, by name.
    pub fn from_name(&self) -> String {
        Target { kind: self.from, tm_alone: self.from_tm_alone }.name()
    }
}

/// What auto reports (module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct AutoReport {
    pub current: DesignKind,
    /// The current design is CFLOWS with TupleMerge alone.
    pub tm_alone: bool,
    pub design_switches: u64,
    /// PMD time in ORIG, CCACHE, CFLOWS (the order of [`DesignKind::ALL`]), ns.
    pub time_ns: [u64; 3],
    pub log: Vec<SwitchEvent>,
    /// Candidates dropped (a rule change the candidate refused, or its build failed).
    pub abandoned: u64,
    /// The thresholds in force that are not the defaults ([`AutoConfig::non_defaults`]).
    pub settings: Vec<(&'static str, String)>,
}

impl AutoReport {
    /// `(name, value)` pairs for reports: `design_switches`, `time_orig_s`, ...
    pub fn fields(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("design_switches", self.design_switches as f64),
            ("time_orig_s", self.time_ns[0] as f64 / 1e9),
            ("time_ccache_s", self.time_ns[1] as f64 / 1e9),
            ("time_cflows_s", self.time_ns[2] as f64 / 1e9),
            ("candidates_abandoned", self.abandoned as f64),
        ]
    }

    /// [`AutoReport::settings`] as `key=value,...`, or `defaults`.
    pub fn settings_line(&self) -> String {
        settings::line(&self.settings)
    }
}

fn slot(k: DesignKind) -> usize {
    DesignKind::ALL.iter().position(|&d| d == k).unwrap_or(0)
}

/// A retired design whose upcalls are still at a handler thread: it completes them (its
/// counters, its action for them) and is dropped with the last.
struct Draining {
    design: Box<dyn Design + Send>,
    /// Its upcalls are the ones numbered below this.
    below_seq: u64,
    handed: u64,
}

/// The adaptive design (module docs).
pub struct Auto {
    cfg: AutoConfig,
    clock: Clock,
    wire_keys: bool,
    builder: Builder,
    rules: HashMap<RuleId, Rule>,
    target: Target,
    current: Box<dyn Design + Send>,
    candidate: Option<Candidate>,
    /// The latest [`Auto::request`] made while a candidate was being built.
    requested: Option<(DesignKind, String)>,
    /// Additive counters of the retired designs.
    base: Counters,
    /// Upcalls the current design handed to a handler thread ([`Design::take_upcalls`]) and
    /// not yet completed.
    handed: u64,
    /// The sequence number after the last batch.
    next_seq: u64,
    /// The design swapped out while a handler still held some of its upcalls (module docs).
    draining: Option<Draining>,
    /// Built over structures shared with other PMDs (the switch): candidates are built without
    /// rules and take rule changes from [`Design::table_changed`].
    shared: bool,
    offset: u64,
    /// The window's start: the current design's counters then.
    window: Counters,
    dwell: Dwell,
    report: AutoReport,
    warm: Warm,
    carry: Vec<(u64, DpAction)>,
    carry_rules: Vec<RuleId>,
    out: Vec<(u64, DpAction)>,
    out_rules: Vec<RuleId>,
    revalidations: Vec<Revalidation>,
}

impl Auto {
    /// Auto over `rules`, building designs with `builder`; `clock` and `wire_keys` are the
    /// designs' ([`crate::DatapathConfig`]).
    pub fn new(
        rules: &[Rule],
        clock: Clock,
        wire_keys: bool,
        cfg: AutoConfig,
        builder: Builder,
    ) -> Result<Auto, ClassifierError> {
        let kind = match cfg.initial {
            Some(DesignKind::Auto) => {
                return Err(ClassifierError::Config("auto: the first design must be a fixed one".into()))
            }
            Some(k) => k,
            None if rules.len() >= cfg.cflows_rules => DesignKind::Cflows,
            None => DesignKind::Orig,
        };
        let current = builder(Target::of(kind), rules)?;
        let window = current.counters();
        Ok(Auto {
            rules: rules.iter().map(|r| (r.id, r.clone())).collect(),
            target: Target::of(kind),
            current,
            candidate: None,
            requested: None,
            base: Counters::default(),
            handed: 0,
            next_seq: 0,
            draining: None,
            shared: false,
            offset: 0,
            window,
            dwell: Dwell::new(cfg.min_dwell_ns),
            report: AutoReport {
                current: kind,
                tm_alone: false,
                design_switches: 0,
                time_ns: [0; 3],
                log: Vec::new(),
                abandoned: 0,
                settings: cfg.non_defaults(),
            },
            warm: Warm::new(cfg.warm_keys),
            carry: Vec::new(),
            carry_rules: Vec::new(),
            out: Vec::new(),
            out_rules: Vec::new(),
            revalidations: Vec::new(),
            cfg,
            clock,
            wire_keys,
            builder,
        })
    }

    /// Auto over designs that share their rules with other PMDs (the switch: ORIG/CCACHE over
    /// one OpenFlow table, CFLOWS over one published classifier): `builder` is given no rules,
    /// and rule changes reach the designs through those shared structures — the current design
    /// and a candidate learn of each from [`Design::table_changed`] (the candidate once built,
    /// from the journal). `rules`: how many there are at the start (the first design's choice).
    pub fn shared(
        rules: usize,
        clock: Clock,
        wire_keys: bool,
        cfg: AutoConfig,
        builder: Builder,
    ) -> Result<Auto, ClassifierError> {
        let initial =
            cfg.initial.unwrap_or(if rules >= cfg.cflows_rules { DesignKind::Cflows } else { DesignKind::Orig });
        let mut a = Auto::new(&[], clock, wire_keys, AutoConfig { initial: Some(initial), ..cfg }, builder)?;
        a.cfg = cfg;
        a.report.settings = cfg.non_defaults();
        a.shared = true;
        Ok(a)
    }

    /// The design forwarding now.
    pub fn current(&self) -> DesignKind {
        self.target.kind
    }

    /// True while a candidate is being built or waits to be ready.
    pub fn switching(&self) -> bool {
        self.candidate.is_some()
    }

    /// Starts a switch to `to` now (tests, an operator), dwell and thresholds aside. While a
    /// candidate is being built the latest request is kept and acted on once that candidate is
    /// swapped in (or dropped): a switch under way is not abandoned (its build is most of its
    /// cost), and the last word is the caller's. A request for the design being built, or (with
    /// none under way) for the current one, changes nothing.
    pub fn request(&mut self, to: DesignKind, reason: &str) {
        if to == DesignKind::Auto {
            return;
        }
        let to = Target::of(to);
        match &self.candidate {
            Some(c) if c.target == to => self.requested = None,
            Some(_) => self.requested = Some((to.kind, reason.to_string())),
            None if to != self.target => self.start(to, reason.to_string()),
            None => {}
        }
    }

    /// The policy's choice for a window's signals, with its reason ([`policy::decide`]).
    pub fn decide(cfg: &AutoConfig, current: Target, s: &Signals) -> Option<(Target, String)> {
        decide(cfg, current, s)
    }

    fn start(&mut self, to: Target, reason: String) {
        let rules: Vec<Rule> = self.rules.values().cloned().collect();
        let warm = if matches!(to.kind, DesignKind::Orig | DesignKind::Ccache) {
            self.warm.keys(self.wire_keys)
        } else {
            Vec::new()
        };
        let now = self.current.now_ns();
        match Candidate::start(&self.builder, to, rules, warm, now, reason, self.clock.is_measured()) {
            Ok(c) => self.candidate = Some(c),
            Err(_) => self.report.abandoned += 1,
        }
    }

    /// The candidate's progress at a batch boundary; true when it is ready to be swapped in.
    fn poll_candidate(&mut self) -> bool {
        let Some(c) = self.candidate.as_mut() else { return false };
        match c.poll(self.current.now_ns()) {
            Progress::Ready => true,
            Progress::Waiting => false,
            Progress::Failed => {
                self.candidate = None;
                self.report.abandoned += 1;
                false
            }
        }
    }

    /// The swap at a batch boundary (module docs).
    fn swap(&mut self) {
        let Some(c) = self.candidate.take() else { return };
        let Some(mut new) = c.built else { return };
        // The old design's queued upcalls, with the old table (normally none: the PMD loop
        // handles them before housekeeping).
        let handled = self.current.handle_upcalls().to_vec();
        let mut rules = self.current.upcall_rules().to_vec();
        rules.resize(handled.len(), crate::NO_RULE);
        self.carry.extend(handled);
        self.carry_rules.extend(rules);
        for mut r in self.current.take_revalidations() {
            r.epoch += self.offset;
            self.revalidations.push(r);
        }
        let now = self.current.now_ns();
        new.idle_until(now);
        let visible = self.visible_epoch();
        self.offset = visible + 1 - new.visible_epoch();
        self.report.time_ns[slot(self.target.kind)] += now - self.dwell.entered_ns();
        self.report.design_switches += 1;
        self.report.log.push(SwitchEvent {
            at_ns: now,
            from: self.target.kind,
            to: c.target.kind,
            from_tm_alone: self.target.tm_alone,
            to_tm_alone: c.target.tm_alone,
            reason: c.reason,
            ready_ns: now - c.decided_ns,
            preinstalled: c.preinstalled,
        });
        self.dwell.switched(now, self.target, c.target);
        self.target = c.target;
        self.report.current = c.target.kind;
        self.report.tm_alone = c.target.tm_alone;
        let old = std::mem::replace(&mut self.current, new);
        self.window = self.current.counters();
        let handed = std::mem::take(&mut self.handed);
        if handed > 0 {
            self.draining = Some(Draining { design: old, below_seq: self.next_seq, handed });
        } else {
            self.retire(old);
        }
    }

    /// A design swapped out and done with: its counters into the base, dropped.
    fn retire(&mut self, old: Box<dyn Design + Send>) {
        add_counters(&mut self.base, &old.counters());
        if self.clock.is_measured() {
            // Its revalidator thread (if any) joins there, off the PMD.
            std::thread::spawn(move || drop(old));
        }
    }

    /// One decision at a batch boundary.
    fn control(&mut self) {
        let now = self.current.now_ns();
        if now < self.window.pmd_ns + self.cfg.window_ns {
            return;
        }
        let c = self.current.counters();
        let s = Signals::of(&c, &self.window);
        if s.packets < self.cfg.min_window_packets {
            return;
        }
        self.window = c;
        if self.candidate.is_some() || !self.dwell.may_leave(now) {
            return;
        }
        if let Some((to, why)) = decide(&self.cfg, self.target, &s) {
            self.start(to, why);
        }
    }

    /// The switch log and times ([`Design::auto_report`]), the current stay counted.
    pub fn report_now(&self) -> AutoReport {
        let mut r = self.report.clone();
        r.time_ns[slot(self.target.kind)] += self.current.now_ns() - self.dwell.entered_ns();
        r
    }
}

/// Adds `c`'s additive counters (not the gauges, not `pmd_ns`) to `base`.
fn add_counters(base: &mut Counters, c: &Counters) {
    macro_rules! add {
        ($($f:ident),*) => { $( base.$f += c.$f; )* };
    }
    add!(
        received,
        emc_hit,
        cd_hit,
        megaflow_hit,
        upcall,
        lost,
        model_hit,
        remainder_hit,
        no_match,
        upcall_ns,
        megaflow_subtables,
        cd_wrong_hint,
        cd_no_hint,
        emc_inserts,
        installed,
        install_existing,
        install_refused,
        install_stale,
        deleted_revalidated,
        deleted_idle,
        deleted_limit,
        masks_evicted,
        megaflows_evicted,
        install_mask_refused,
        install_mask_narrowed,
        mfcguard_masks,
        mfcguard_removed,
        preinstalled,
        preinstall_existing,
        preinstall_refused,
        predict_ns,
        tx,
        dropped_by_action,
        model_swaps,
        emc_ns,
        dpcls_ns,
        model_ns,
        reval_ns
    );
}

impl Design for Auto {
    fn name(&self) -> &'static str {
        "auto"
    }

    fn process_batch(&mut self, keys: &[FlowKey], seq0: u64, out: &mut [DpAction]) {
        // One batch in four is sampled for the warm-up (the recent flows; module docs).
        self.warm.sample(keys);
        self.next_seq = seq0 + keys.len() as u64;
        self.current.process_batch(keys, seq0, out)
    }

    fn handle_upcalls(&mut self) -> &[(u64, DpAction)] {
        if self.carry.is_empty() {
            return self.current.handle_upcalls();
        }
        self.out.clear();
        self.out_rules.clear();
        self.out.append(&mut self.carry);
        self.out_rules.append(&mut self.carry_rules);
        let handled = self.current.handle_upcalls().to_vec();
        self.out.extend(handled);
        self.out_rules.extend_from_slice(self.current.upcall_rules());
        &self.out
    }

    fn batch_rules(&self) -> &[RuleId] {
        self.current.batch_rules()
    }

    fn upcall_rules(&self) -> &[RuleId] {
        if self.out_rules.is_empty() || self.out.is_empty() {
            self.current.upcall_rules()
        } else {
            &self.out_rules
        }
    }

    fn take_upcalls(&mut self, out: &mut Vec<Upcall>) {
        let n = out.len();
        self.current.take_upcalls(out);
        self.handed += (out.len() - n) as u64;
    }

    fn complete_upcall(&mut self, u: &Upcall, v: Option<&Verdict>, install: bool) -> DpAction {
        // An upcall of the design swapped out goes back to it (module docs: *A switch*).
        if let Some(d) = self.draining.as_mut().filter(|d| u.seq < d.below_seq) {
            let a = d.design.complete_upcall(u, v, install);
            d.handed -= 1;
            if d.handed == 0 {
                if let Some(d) = self.draining.take() {
                    self.retire(d.design);
                }
            }
            return a;
        }
        self.handed = self.handed.saturating_sub(1);
        self.current.complete_upcall(u, v, install)
    }

    fn maintain(&mut self) -> u64 {
        self.out.clear();
        self.out_rules.clear();
        let deleted = self.current.maintain();
        // Between decisions, with nothing being built or handed over, there is nothing to do:
        // no clock read, no counters (this runs after every batch).
        if self.candidate.is_none()
            && self.draining.is_none()
            && self.requested.is_none()
            && self.current.now_ns() < self.window.pmd_ns + self.cfg.window_ns
        {
            return deleted;
        }
        let t1 = Instant::now();
        self.control();
        // One retired design at a time waits for its upcalls: a new swap waits for it.
        if self.poll_candidate() && self.draining.is_none() {
            self.swap();
        }
        if self.candidate.is_none() {
            if let Some((to, why)) = self.requested.take() {
                self.request(to, &why);
            }
        }
        // The controller's own work (and the journal's replay onto the candidate) is PMD time.
        let ns = self.clock.housekeeping_ns(t1);
        self.current.idle_until(self.current.now_ns() + ns);
        deleted
    }

    fn add_rules(&mut self, rules: Vec<Rule>) -> Result<u64, ClassifierError> {
        let deleted = self.current.add_rules(rules.clone())?;
        for r in &rules {
            self.rules.insert(r.id, r.clone());
        }
        if let Some(c) = self.candidate.as_mut() {
            c.journal.push(Change::Add(rules));
        }
        Ok(deleted)
    }

    fn remove_rules(&mut self, ids: &[RuleId]) -> u64 {
        let deleted = self.current.remove_rules(ids);
        for id in ids {
            self.rules.remove(id);
        }
        if let Some(c) = self.candidate.as_mut() {
            c.journal.push(Change::Remove(ids.to_vec()));
        }
        deleted
    }

    fn counters(&self) -> Counters {
        let mut c = self.current.counters();
        add_counters(&mut c, &self.base);
        if let Some(d) = &self.draining {
            add_counters(&mut c, &d.design.counters());
        }
        c
    }

    fn now_ns(&self) -> u64 {
        self.current.now_ns()
    }

    fn idle_until(&mut self, ns: u64) {
        self.current.idle_until(ns)
    }

    fn visible_epoch(&self) -> u64 {
        self.offset + self.current.visible_epoch()
    }

    fn oldest_epoch(&self) -> u64 {
        self.offset + self.current.oldest_epoch()
    }

    fn take_revalidations(&mut self) -> Vec<Revalidation> {
        let mut v = std::mem::take(&mut self.revalidations);
        for mut r in self.current.take_revalidations() {
            r.epoch += self.offset;
            v.push(r);
        }
        v
    }

    fn staged_rules(&self) -> Vec<RuleId> {
        self.current.staged_rules()
    }

    fn report(&self) -> DesignReport {
        self.current.report()
    }

    fn prediction_stats(&mut self) -> Option<PredictStats> {
        self.current.prediction_stats()
    }

    fn settle(&mut self) {
        self.current.settle()
    }

    fn table_changed(&mut self) -> u64 {
        if let Some(c) = self.candidate.as_mut() {
            c.journal.push(Change::TableChanged);
        }
        self.current.table_changed()
    }

    fn design_switches(&self) -> u64 {
        self.report.design_switches
    }

    fn for_each_megaflow(&self, f: &mut dyn FnMut(&MegaflowEntry)) {
        self.current.for_each_megaflow(f)
    }

    fn preinstall(&mut self, keys: &[FlowKey]) -> usize {
        self.current.preinstall(keys)
    }

    fn auto_report(&self) -> Option<AutoReport> {
        Some(self.report_now())
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::ccache::CcacheConfig;
    use crate::testutil::{attack_keys, expect, expect_rules, keys, rules};
    use crate::{Ccache, Cflows, CflowsConfig, DatapathConfig, Orig, OrigConfig, BATCH};
    use rqvs_classify::nuevomatch::live::Policy;
    use std::sync::Arc;

    pub(super) fn virtual_cfg() -> DatapathConfig {
        DatapathConfig {
            emc_insert_prob: 0.2,
            clock: Clock::Virtual { packet_ns: 100, upcall_ns: 2000 },
            ..DatapathConfig::default()
        }
    }

    pub(super) fn builder(policy: Policy) -> Builder {
        Arc::new(move |to: Target, rules: &[Rule]| -> Result<Box<dyn Design + Send>, ClassifierError> {
            let cfg = virtual_cfg();
            let cc = CcacheConfig { train_interval_ns: 10_000, min_megaflows: 8, ..CcacheConfig::default() };
            let classifier =
                if to.tm_alone { crate::CflowsClassifier::TupleMerge } else { crate::CflowsClassifier::NuevoMatch };
            Ok(match to.kind {
                DesignKind::Orig => Box::new(Orig::new(rules, cfg, OrigConfig::default())?),
                DesignKind::Ccache => Box::new(Ccache::new(rules, cfg, OrigConfig::default(), cc)?),
                DesignKind::Cflows => {
                    Box::new(Cflows::new(rules, cfg, CflowsConfig { policy, retrain_threshold: 0.05, classifier })?)
                }
                DesignKind::Auto => return Err(ClassifierError::Config("fixed designs only".into())),
            })
        })
    }

    /// Thresholds that always want to leave: ORIG/CCACHE → CFLOWS on any window, CFLOWS → ORIG
    /// on any window; short windows and dwell.
    pub(super) fn flapping(initial: DesignKind) -> AutoConfig {
        AutoConfig {
            initial: Some(initial),
            window_ns: 20_000,
            min_window_packets: 32,
            min_dwell_ns: 50_000,
            to_cflows_upcall_share: 0.0,
            leave_cflows_coverage: 2.0,
            leave_cflows_emc_share: 0.0,
            ..AutoConfig::default()
        }
    }

    /// Runs `keys` batch by batch; every packet's final action and attribution must be the
    /// reference's over the rules visible at its batch (not staged; the visible set changes at
    /// a swap or a model swap, in housekeeping, between batches).
    fn check(dp: &mut Auto, live: &[Rule], keys: &[FlowKey], at: &str) {
        let mut pmd = crate::pmd::Pmd::new();
        let mut epoch = None;
        let (mut want, mut winners) = (Vec::new(), Vec::new());
        for (b, chunk) in keys.chunks(BATCH).enumerate() {
            let (e0, s0) = (dp.visible_epoch(), dp.report_now().design_switches);
            if epoch != Some(e0) {
                let staged = dp.staged_rules();
                let visible: Vec<Rule> = live.iter().filter(|r| !staged.contains(&r.id)).cloned().collect();
                (want, winners) = (expect(&visible, keys), expect_rules(&visible, keys));
                epoch = Some(e0);
            }
            let base = b * BATCH;
            let (_, actions) = pmd.receive(dp, chunk, base as u64);
            let actions = actions.to_vec();
            let rules = dp.batch_rules().to_vec();
            for (i, a) in actions.iter().enumerate() {
                assert_ne!(*a, DpAction::Lost, "{at}: batch {b}");
                if *a != DpAction::Pending {
                    assert_eq!((*a, rules[i]), (want[base + i], winners[base + i]), "{at}: batch {b} packet {i}");
                }
            }
            let upcalls = pmd.handle(dp).to_vec();
            let urules = dp.upcall_rules().to_vec();
            assert_eq!(upcalls.len(), actions.iter().filter(|a| **a == DpAction::Pending).count(), "{at}: batch {b}");
            for (i, &(seq, a)) in upcalls.iter().enumerate() {
                let q = seq as usize;
                assert_eq!((a, urules[i]), (want[q], winners[q]), "{at}: batch {b} upcall {seq}");
            }
            pmd.housekeep(dp);
            // Every swap is a new epoch (the verification window never spans one).
            let (e1, s1) = (dp.visible_epoch(), dp.report_now().design_switches);
            assert!(e1 >= e0 + (s1 - s0), "{at}: epochs {e0} -> {e1} over {} swaps", s1 - s0);
            assert!(dp.oldest_epoch() <= e1);
        }
        let c = dp.counters();
        assert!(c.outcome_sum_ok(), "{at}: {c:?}");
    }

    /// Switches forced in each direction (ORIG → CFLOWS → ORIG → ..., CCACHE → CFLOWS), with rule
    /// changes between the runs and while a candidate waits: every packet's action is the
    /// reference's, counters sum to the packets received, the time per design adds up to the
    /// PMD clock.
    #[test]
    fn forced_switches_keep_every_action_and_counters() {
        let pool = rules(400);
        let ks = keys(4000, 3);
        for initial in [DesignKind::Orig, DesignKind::Ccache, DesignKind::Cflows] {
            let mut live: Vec<Rule> = pool[..300].to_vec();
            let mut dp =
                Auto::new(&live, virtual_cfg().clock, true, flapping(initial), builder(Policy::Instant)).unwrap();
            let mut sent = 0u64;
            for step in 0..8 {
                check(&mut dp, &live, &ks, &format!("{initial:?} step {step}"));
                sent += ks.len() as u64;
                // A candidate built now takes the change below from the journal.
                let to = DesignKind::ALL[(step + 1) % 3];
                dp.request(to, "test");
                if step % 2 == 0 {
                    let add: Vec<Rule> = pool[300 + step * 10..310 + step * 10].to_vec();
                    live.extend(add.iter().cloned());
                    dp.add_rules(add).unwrap();
                } else {
                    let gone: Vec<RuleId> = live.iter().skip(step * 7).step_by(29).map(|r| r.id).collect();
                    live.retain(|r| !gone.contains(&r.id));
                    dp.remove_rules(&gone);
                }
            }
            let r = dp.report_now();
            let c = dp.counters();
            assert_eq!(c.received, sent);
            assert!(c.outcome_sum_ok(), "{c:?}");
            assert_eq!(r.time_ns.iter().sum::<u64>(), dp.now_ns(), "{r:?}");
            assert!(r.design_switches >= 4, "{initial:?}: {r:?}");
            assert!(r.log.iter().any(|e| e.to == DesignKind::Cflows), "{r:?}");
            assert!(r.log.iter().any(|e| e.from == DesignKind::Cflows && e.to == DesignKind::Orig), "{r:?}");
            // The warm-up ran: a new ORIG was given the recent flows' megaflows.
            assert!(r.log.iter().filter(|e| e.to == DesignKind::Orig).all(|e| e.preinstalled > 0), "{r:?}");
        }
    }

    /// A request made while a candidate is being built is not lost: the latest one is acted on
    /// once the candidate is swapped in (ORIG → CFLOWS requested, then CCACHE while CFLOWS is
    /// building: CCACHE is where it ends), and a request for the design being built changes
    /// nothing. The thresholds never switch on their own here.
    #[test]
    fn a_request_while_switching_is_kept() {
        let rs = rules(300);
        let ks = keys(4000, 7);
        for policy in [Policy::Instant, Policy::Delayed] {
            let cfg = AutoConfig { initial: Some(DesignKind::Orig), ..AutoConfig::default() };
            let mut dp = Auto::new(&rs, virtual_cfg().clock, true, cfg, builder(policy)).unwrap();
            dp.request(DesignKind::Cflows, "first");
            assert!(dp.switching());
            dp.request(DesignKind::Cflows, "the same again");
            dp.request(DesignKind::Ccache, "second");
            check(&mut dp, &rs, &ks, &format!("{policy:?}"));
            let r = dp.report_now();
            let moves: Vec<(DesignKind, DesignKind, &str)> =
                r.log.iter().map(|e| (e.from, e.to, e.reason.as_str())).collect();
            assert_eq!(
                moves,
                [(DesignKind::Orig, DesignKind::Cflows, "first"), (DesignKind::Cflows, DesignKind::Ccache, "second")],
                "{policy:?}"
            );
            assert_eq!(dp.current(), DesignKind::Ccache);
            assert!(!dp.switching());
            // A request back to the design being left, made while switching, returns to it.
            dp.request(DesignKind::Orig, "third");
            dp.request(DesignKind::Ccache, "stay");
            check(&mut dp, &rs, &ks, &format!("{policy:?} back"));
            let r = dp.report_now();
            assert_eq!(r.design_switches, 4, "{policy:?}: {r:?}");
            assert_eq!(dp.current(), DesignKind::Ccache);
        }
    }

    /// Upcalls at a handler thread across a swap (the switch's arrangement): they go back to
    /// the design that handed them out, which gives each its action and counts it; it is
    /// retired with the last. Every packet gets the reference's action, counters sum to the
    /// packets received, and no second swap happens while one design drains.
    #[test]
    fn upcalls_at_a_handler_cross_a_swap() {
        let rs = rules(300);
        let ks = keys(4000, 11);
        let want = expect(&rs, &ks);
        let table = crate::OfprotoTable::build(&rs).unwrap();
        for to in [DesignKind::Cflows, DesignKind::Ccache] {
            let cfg = AutoConfig { initial: Some(DesignKind::Orig), ..AutoConfig::default() };
            let mut dp = Auto::new(&rs, virtual_cfg().clock, true, cfg, builder(Policy::Instant)).unwrap();
            let mut held: Vec<Upcall> = Vec::new();
            let mut out = [DpAction::Drop; BATCH];
            for (b, chunk) in ks.chunks(BATCH).enumerate() {
                let seq0 = (b * BATCH) as u64;
                dp.process_batch(chunk, seq0, &mut out[..chunk.len()]);
                for (i, a) in out[..chunk.len()].iter().enumerate() {
                    assert_ne!(*a, DpAction::Lost);
                    if *a != DpAction::Pending {
                        assert_eq!(*a, want[b * BATCH + i], "{to:?}: batch {b} packet {i}");
                    }
                }
                dp.take_upcalls(&mut held);
                // The handler answers every other batch. The switch is asked for at batch 20,
                // upcalls out; and back at once: that swap waits until the first design drained.
                if b % 2 == 1 {
                    for u in held.drain(..) {
                        let a = dp.complete_upcall(&u, Some(&table.classify(&u.key)), true);
                        assert_eq!(a, want[u.seq as usize], "{to:?}: upcall {}", u.seq);
                    }
                }
                if b == 20 {
                    assert!(!held.is_empty());
                    dp.request(to, "test");
                    dp.maintain();
                    assert_eq!((dp.current(), dp.draining.is_some()), (to, true));
                    dp.request(DesignKind::Orig, "back");
                    dp.maintain();
                    assert_eq!(dp.report_now().design_switches, 1, "{to:?}: swapped while draining");
                }
                dp.maintain();
            }
            for u in held.drain(..) {
                assert_eq!(dp.complete_upcall(&u, Some(&table.classify(&u.key)), true), want[u.seq as usize]);
            }
            let r = dp.report_now();
            assert_eq!(r.design_switches, 2, "{to:?}: {r:?}");
            assert!(dp.draining.is_none());
            let c = dp.counters();
            assert_eq!(c.received, ks.len() as u64);
            assert!(c.outcome_sum_ok(), "{to:?}: {c:?}");
            assert_eq!(c.tx + c.dropped_by_action, c.received - c.lost, "{to:?}: {c:?}");
        }
    }

    /// With a coverage threshold above what the learned classifier reaches, CFLOWS moves to
    /// CFLOWS with TupleMerge alone, once (no reversal: TupleMerge alone has no coverage to
    /// measure), logged with its reason, every action the reference's throughout.
    #[test]
    fn low_coverage_moves_cflows_to_tuple_merge_alone() {
        let rs = rules(300);
        let ks = keys(4000, 13);
        let cfg = AutoConfig {
            initial: Some(DesignKind::Cflows),
            window_ns: 20_000,
            min_window_packets: 32,
            min_dwell_ns: 50_000,
            leave_cflows_emc_share: f64::INFINITY,
            cflows_tm_coverage: 2.0,
            ..AutoConfig::default()
        };
        let mut dp = Auto::new(&rs, virtual_cfg().clock, true, cfg, builder(Policy::Instant)).unwrap();
        for step in 0..4 {
            check(&mut dp, &rs, &ks, &format!("step {step}"));
        }
        let r = dp.report_now();
        assert_eq!(r.design_switches, 1, "{r:?}");
        let e = &r.log[0];
        assert_eq!((e.from, e.to, e.to_tm_alone, r.tm_alone), (DesignKind::Cflows, DesignKind::Cflows, true, true));
        assert!(e.reason.contains("TupleMerge alone"), "{}", e.reason);
        assert_eq!(dp.counters().model_entries, 0, "TupleMerge alone has no learned index");
    }

    /// A batch-level check: no batch loses a packet across a swap (none is `Lost`, every
    /// `Pending` one comes back from the handler).
    #[test]
    fn no_packet_is_lost_across_a_swap() {
        let rs = rules(300);
        let ks = keys(6000, 9);
        let mut dp =
            Auto::new(&rs, virtual_cfg().clock, true, flapping(DesignKind::Cflows), builder(Policy::Delayed)).unwrap();
        let mut pmd = crate::pmd::Pmd::new();
        let want = expect(&rs, &ks);
        for (b, chunk) in ks.chunks(BATCH).enumerate() {
            let o = pmd.run_batch(&mut dp, chunk, (b * BATCH) as u64);
            let mut pending = 0;
            for (i, a) in o.actions.iter().enumerate() {
                assert_ne!(*a, DpAction::Lost);
                if *a == DpAction::Pending {
                    pending += 1;
                } else {
                    assert_eq!(*a, want[b * BATCH + i], "batch {b} packet {i}");
                }
            }
            assert_eq!(o.upcalls.len(), pending, "batch {b}");
            for &(s, a) in o.upcalls {
                assert_eq!(a, want[s as usize]);
            }
        }
        assert!(dp.report_now().design_switches >= 2);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Batches(usize),
        Add(usize),
        Remove(usize),
        Switch(usize),
        /// Batches of many-mask packets ([`attack_keys`]).
        Attack(usize),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            (1usize..40).prop_map(Op::Batches),
            (1usize..20).prop_map(Op::Add),
            (1usize..20).prop_map(Op::Remove),
            (0usize..3).prop_map(Op::Switch),
            (1usize..20).prop_map(Op::Attack),
        ]
    }

    /// The property test's attack is one: in ORIG its packets make several times (4× here) the megaflow
    /// masks of the same number of benign packets.
    #[test]
    fn attack_keys_explode_the_megaflow_masks() {
        let live = rules(150);
        let masks = |ks: &[FlowKey]| {
            let mut dp = Orig::new(&live, virtual_cfg(), OrigConfig::default()).unwrap();
            let mut pmd = crate::pmd::Pmd::new();
            for (b, chunk) in ks.chunks(BATCH).enumerate() {
                pmd.run_batch(&mut dp, chunk, (b * BATCH) as u64);
            }
            dp.counters().masks
        };
        let (benign, attack) = (masks(&keys(3000, 7)), masks(&attack_keys(3000, 7)));
        assert!(attack >= 3 * benign, "attack {attack} masks, benign {benign}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
        /// Random rule changes, attack traffic and design switches (forced, and by flapping
        /// thresholds) interleaved under both policies: every packet's action is the
        /// reference's over the visible rules, and the counters sum to the packets received.
        #[test]
        fn random_changes_and_switches(ops in proptest::collection::vec(op(), 1..24), delayed: bool, salt in 0u32..1000) {
            let pool = rules(300);
            let ks = keys(3000, salt);
            let attack = attack_keys(3000, salt);
            let mut at_attack = 0usize;
            let policy = if delayed { Policy::Delayed } else { Policy::Instant };
            let mut live: Vec<Rule> = pool[..150].to_vec();
            let mut next = 150;
            let mut dp = Auto::new(&live, virtual_cfg().clock, true, flapping(DesignKind::Orig), builder(policy)).unwrap();
            let mut sent = 0u64;
            let mut at = 0usize;
            for (i, o) in ops.iter().enumerate() {
                match *o {
                    Op::Batches(n) => {
                        let n = (n * BATCH).min(ks.len() - at);
                        check(&mut dp, &live, &ks[at..at + n], &format!("op {i}"));
                        sent += n as u64;
                        at = (at + n) % (ks.len() - BATCH);
                    }
                    Op::Add(n) => {
                        let add: Vec<Rule> = pool[next.min(pool.len())..(next + n).min(pool.len())].to_vec();
                        next += n;
                        live.extend(add.iter().cloned());
                        dp.add_rules(add).unwrap();
                    }
                    Op::Remove(n) => {
                        let gone: Vec<RuleId> = live.iter().step_by(live.len().max(1) / n.max(1) + 1).map(|r| r.id).collect();
                        live.retain(|r| !gone.contains(&r.id));
                        dp.remove_rules(&gone);
                    }
                    Op::Switch(k) => dp.request(DesignKind::ALL[k], "proptest"),
                    Op::Attack(n) => {
                        let n = (n * BATCH).min(attack.len() - at_attack);
                        check(&mut dp, &live, &attack[at_attack..at_attack + n], &format!("op {i} (attack)"));
                        sent += n as u64;
                        at_attack = (at_attack + n) % (attack.len() - BATCH);
                    }
                }
            }
            let c = dp.counters();
            proptest::prop_assert_eq!(c.received, sent);
            proptest::prop_assert!(c.outcome_sum_ok(), "{:?}", c);
        }
    }
}
