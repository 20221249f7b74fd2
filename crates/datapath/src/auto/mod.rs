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
use crate::predict::PredictStats;
use crate::revalidator::Revalidation;
use crate::upcall::Upcall;
use crate::{Clock, Counters};
use rqvs_ofproto::table::Verdict;
use rqvs_ofproto::DpAction;

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
        rules.resize(handled.len(), rqvs_ofproto::NO_RULE);
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
            c.journal.push(Change::TableChanged(None));
        }
        self.current.table_changed()
    }

    fn table_changed_at(&mut self, known: u64) -> u64 {
        if let Some(c) = self.candidate.as_mut() {
            c.journal.push(Change::TableChanged(Some(known)));
        }
        self.current.table_changed_at(known)
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
pub(super) mod tests;
