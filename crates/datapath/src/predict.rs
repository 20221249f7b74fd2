//! Flow prediction (the coflow study, `../shared/seeds/004`): when a flow that usually starts a
//! *coflow* upcalls, install the megaflows of the flows expected to follow it, so their first
//! packets hit the megaflow cache instead of waiting for the slow path.
//!
//! **Off by default**: an [`crate::Orig`] predicts only after
//! [`crate::orig::MegaflowDatapath::set_predictor`]. Two modes:
//! - **online** ([`Predictor::online`]): learns from the upcalls the handler sees, and from the
//!   use of its own predictions (below);
//! - **oracle** ([`Predictor::oracle`]): given the ground truth (each base flow's key → the keys of
//!   its associated flows), proposes exactly those when the base flow upcalls. The upper bound of
//!   any predictor that acts on the base flow's upcall.
//!
//! **Correct by construction.** A predicted key goes through the slow path exactly as an upcall
//! would ([`rqvs_ofproto::table::OfprotoTable::classify`], wildcard tracking) and its megaflow is installed
//! unless an installed megaflow already covers the key or the flow limit is reached — the same
//! checks as the handler's. A predicted megaflow is therefore a megaflow the slow path itself
//! computed: a packet that hits it gets the action of the winning rule, whether or not the
//! prediction was right. A wrong prediction costs a slow-path lookup and a cache slot, never a
//! wrong action.
//!
//! ## The online predictor (a table, no learned model yet)
//! - A **signature** of an upcall is `(in_port, nw_proto, nw_dst, tp_dst)`: which service was
//!   contacted. Every upcall counts as an *occurrence* of its signature (a potential base flow).
//! - When upcall `u` arrives, the recent upcalls `b` (within [`PredictConfig::window_ns`], default
//!   5 ms) whose source or destination address is `u`'s source — `u` was started by a party of
//!   `b` — give a **template** of `u` relative to `b`: each of `u`'s addresses is `b`'s source,
//!   `b`'s destination or a literal; `u`'s destination port is one of `b`'s ports or a literal; its
//!   source port one of `b`'s ports or "any" (an ephemeral port cannot be predicted; the
//!   prediction uses `b`'s, which is right whenever the megaflow does not look at it); the other
//!   fields are `u`'s. The template's **count** under `b`'s signature goes up by one (at most once
//!   per occurrence of `b`).
//! - **Confidence**: the follow rate count / occurrences of the signature, taken conservatively
//!   as the lower end of its one-sigma Wilson score interval ([`confidence`]): 3 follow-ups in 5
//!   occurrences is not yet 0.6. (Occurrences whose window is still open are in the denominator
//!   already, so the rate is, if anything, low.) On an upcall, the templates of its signature with
//!   count ≥ [`PredictConfig::min_support`] and confidence ≥ [`PredictConfig::min_confidence`]
//!   (best first, at most [`PredictConfig::max_per_trigger`]) are instantiated with the upcall's
//!   fields and proposed.
//! - **Default threshold 0.5**: a template is predicted once (conservatively) at least half of
//!   its signature's occurrences were followed by it, so in expectation at most about half the
//!   predictions are wasted — about one wasted slow-path lookup per upcall removed. It is not a
//!   break-even of handler work: a prediction costs a slow-path lookup, a right one saves an
//!   upcall, which costs about the same lookup, so every wasted prediction is extra handler work
//!   (only the upcall's own overhead and duplicate upcalls are saved). What prediction buys is
//!   first-packet latency; lower thresholds buy more of it with more waste.
//! - **Feedback**: once a prediction works, the follow-up flow no longer upcalls, so the predictor
//!   would stop seeing it. A prediction that installs a megaflow therefore counts for its
//!   template at once, as if the follow-up had been seen, and is checked when its base's window
//!   ends: if the megaflow was not hit by then, the count is taken back. (A proposal whose
//!   megaflow was already installed counts neither way: hits on it say nothing about the
//!   prediction.)
//! - Bounded memory: at most [`PredictConfig::max_signatures`] signatures (new ones are ignored
//!   when full) and [`PredictConfig::max_templates`] templates each (when full, a new template
//!   replaces the one with the lowest count, oldest first).
//!
//! ## Rate limit and counters
//! Proposals pass a token bucket that earns [`PredictConfig::per_upcall`] tokens (default 4) per
//! upcall the predictor sees, up to [`PredictConfig::burst`]: prediction work is at most that many
//! slow-path lookups per upcall (plus the burst) whatever the traffic — the limit follows the load
//! instead of a fixed rate that would either cripple a busy switch's predictor or let an idle
//! one's run away. Proposals over the limit are counted `rate_limited`. [`PredictStats`]: `proposed`,
//! `predicted` (megaflows installed), `already` (a megaflow covered the key), `used` (a predicted
//! megaflow was hit before it was deleted), `wasted` (deleted unused: idle expiry, revalidation or
//! the flow limit) and `outstanding` (installed, not hit yet). Use is checked before every
//! revalidation and at batch boundaries at least every 100 ms of datapath clock, or every idle
//! expiry time if that is shorter: a megaflow the idle sweep deletes was not hit for that long,
//! so a hit on it was seen by an earlier check and none is counted wasted by mistake. (Only the
//! least-recently-used deletions of a cache over its flow limit — after the limit was lowered —
//! can delete a used megaflow unseen.)
//!
//! **Cost.** The predictor runs in the handler, after each batch of upcalls: learning, proposing
//! and the slow-path lookups of its proposals are handler time, counted in the datapath's
//! `predict_ns` (not in `upcall_ns`) and, like upcalls, on the PMD clock.

use std::collections::VecDeque;
use std::time::Instant;

use hashbrown::HashMap;
use rqvs_flow::FlowKey;

use crate::clock::Clock;
use crate::counters::Counters;
use crate::dpcls::{Dpcls, Install, MegaflowRef};
use rqvs_ofproto::table::OfprotoTable;

/// How often (datapath clock) the use of predictions is checked, at least.
pub const ACCOUNT_INTERVAL_NS: u64 = 100_000_000;

/// Predictor settings (module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct PredictConfig {
    /// How long after a base flow's upcall a follow-up counts as associated with it, ns.
    pub window_ns: u64,
    /// Least count / occurrences for a template to be predicted.
    pub min_confidence: f64,
    /// Least count for a template to be predicted.
    pub min_support: u32,
    /// Most keys proposed on one upcall.
    pub max_per_trigger: usize,
    /// Tokens earned per upcall seen, i.e. predictions per upcall at most (`f64::INFINITY`: no
    /// limit).
    pub per_upcall: f64,
    /// Token-bucket depth.
    pub burst: f64,
    pub max_signatures: usize,
    pub max_templates: usize,
}

impl Default for PredictConfig {
    fn default() -> Self {
        PredictConfig {
            window_ns: 5_000_000,
            min_confidence: 0.5,
            min_support: 3,
            max_per_trigger: 16,
            per_upcall: 4.0,
            burst: 1024.0,
            max_signatures: 1 << 16,
            max_templates: 64,
        }
    }
}

impl PredictConfig {
    /// Checks the settings; the message names the setting.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.min_confidence) {
            return Err(format!("expected a minimum confidence in 0..1, found {}", self.min_confidence));
        }
        if self.per_upcall.is_nan() || self.per_upcall <= 0.0 {
            return Err(format!("expected a prediction budget > 0 per upcall, found {}", self.per_upcall));
        }
        if !(self.burst >= 1.0 && self.burst.is_finite()) {
            return Err(format!("expected a prediction burst >= 1, found {}", self.burst));
        }
        if self.max_per_trigger == 0 || self.max_templates == 0 || self.max_signatures == 0 {
            return Err("expected at least one prediction per trigger, template and signature".into());
        }
        Ok(())
    }
}

/// The predictor's counters (module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PredictStats {
    /// Upcalls the predictor saw.
    pub observed: u64,
    /// Upcalls that led to at least one proposal.
    pub triggers: u64,
    /// Keys proposed (before the rate limit).
    pub proposed: u64,
    pub rate_limited: u64,
    /// Megaflows installed by predictions.
    pub predicted: u64,
    /// Proposals an installed megaflow already covered.
    pub already: u64,
    /// Proposals refused at the flow limit.
    pub refused: u64,
    /// Predicted megaflows hit before their deletion.
    pub used: u64,
    /// Predicted megaflows deleted without a hit.
    pub wasted: u64,
    /// Predicted megaflows installed and not hit so far.
    pub outstanding: u64,
    /// Online mode: signatures and templates held.
    pub signatures: u64,
    pub templates: u64,
}

impl PredictStats {
    /// Share of predicted megaflows not used: wasted ones and, at the end of a run, those still
    /// unused. 0 when nothing was predicted.
    pub fn wasted_ratio(&self) -> f64 {
        if self.predicted == 0 {
            0.0
        } else {
            (self.wasted + self.outstanding) as f64 / self.predicted as f64
        }
    }
}

/// `(in_port, nw_proto, nw_dst, tp_dst)` of an upcall.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Sig {
    in_port: u32,
    nw_dst: u32,
    tp_dst: u16,
    nw_proto: u8,
}

impl Sig {
    fn of(k: &FlowKey) -> Sig {
        Sig { in_port: k.in_port, nw_dst: k.nw_dst, tp_dst: k.tp_dst, nw_proto: k.nw_proto }
    }
}

/// Where a follow-up's address comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Addr {
    BaseSrc,
    BaseDst,
    Lit(u32),
}

/// Where a follow-up's port comes from (`Any`: not predictable; the base's source port stands in).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Port {
    BaseSrc,
    BaseDst,
    Lit(u16),
    Any,
}

/// A follow-up flow relative to its base flow (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Template {
    /// The follow-up's key with the four derived fields zeroed.
    rest: FlowKey,
    nw_src: Addr,
    nw_dst: Addr,
    tp_src: Port,
    tp_dst: Port,
}

impl Template {
    fn derive(b: &FlowKey, u: &FlowKey) -> Template {
        let addr = |x: u32| {
            if x == b.nw_src {
                Addr::BaseSrc
            } else if x == b.nw_dst {
                Addr::BaseDst
            } else {
                Addr::Lit(x)
            }
        };
        let port = |x: u16, unknown: Port| {
            if x == b.tp_dst {
                Port::BaseDst
            } else if x == b.tp_src {
                Port::BaseSrc
            } else {
                unknown
            }
        };
        let rest = FlowKey { nw_src: 0, nw_dst: 0, tp_src: 0, tp_dst: 0, ..*u };
        Template {
            rest,
            nw_src: addr(u.nw_src),
            nw_dst: addr(u.nw_dst),
            tp_src: port(u.tp_src, Port::Any),
            tp_dst: port(u.tp_dst, Port::Lit(u.tp_dst)),
        }
    }

    fn instantiate(&self, b: &FlowKey) -> FlowKey {
        let addr = |a: Addr| match a {
            Addr::BaseSrc => b.nw_src,
            Addr::BaseDst => b.nw_dst,
            Addr::Lit(x) => x,
        };
        let port = |p: Port| match p {
            Port::BaseSrc | Port::Any => b.tp_src,
            Port::BaseDst => b.tp_dst,
            Port::Lit(x) => x,
        };
        FlowKey {
            nw_src: addr(self.nw_src),
            nw_dst: addr(self.nw_dst),
            tp_src: port(self.tp_src),
            tp_dst: port(self.tp_dst),
            ..self.rest
        }
    }
}

struct TemplateStat {
    t: Template,
    id: u64,
    count: u32,
    /// Occurrence (upcall number) of the base that last counted, so one base counts once.
    last_instance: u64,
    /// Upcall number of the last count (eviction: lowest count, then oldest).
    touched: u64,
}

#[derive(Default)]
struct SigTable {
    occurrences: u32,
    templates: Vec<TemplateStat>,
}

/// An upcall in the learning window.
struct Recent {
    t_ns: u64,
    key: FlowKey,
    sig: Option<u32>,
}

/// The online predictor's tables (module docs).
#[derive(Default)]
struct Learner {
    sig_index: HashMap<Sig, u32>,
    sigs: Vec<SigTable>,
    /// Upcalls within the window, oldest first; `recent[i]` is upcall number `first + i`.
    recent: VecDeque<Recent>,
    first: u64,
    /// Address → upcall numbers (ascending) of recent upcalls with it as source or destination.
    by_addr: HashMap<u32, VecDeque<u64>>,
    next_template_id: u64,
    templates: u64,
}

/// A proposal and what to credit when it is used: (signature, template id, base upcall number).
type Credit = Option<(u32, u64, u64)>;

/// A predicted megaflow whose use is not known yet (for the counters).
struct Tracked {
    flow: MegaflowRef,
}

/// A prediction counted for its template, checked when its base's window ends.
struct Pending {
    due_ns: u64,
    flow: MegaflowRef,
    sig: u32,
    template: u64,
}

enum Mode {
    Online(Box<Learner>),
    Oracle(HashMap<FlowKey, Vec<FlowKey>>),
}

/// The flow predictor (module docs).
pub struct Predictor {
    cfg: PredictConfig,
    mode: Mode,
    /// Keys of the upcalls of the handler's current call.
    noted: Vec<FlowKey>,
    proposals: Vec<(FlowKey, Credit)>,
    tokens: f64,
    tracked: Vec<Tracked>,
    learning: VecDeque<Pending>,
    accounted_ns: u64,
    /// At most [`ACCOUNT_INTERVAL_NS`], and no longer than the datapath's idle expiry (module
    /// docs: rate limit and counters).
    account_interval_ns: u64,
    stats: PredictStats,
}

/// Installs the megaflow of `key` through the slow path (module docs: the handler's checks), not
/// as a packet: counted in `preinstalled`, `preinstall_existing`, `preinstall_refused`. The second
/// value is true when the slow path was consulted (the cost of a virtual clock).
pub(crate) fn preinstall_key(
    dpcls: &mut Dpcls,
    slow: &OfprotoTable,
    c: &mut Counters,
    flow_limit: usize,
    now_ns: u64,
    key: &FlowKey,
) -> (Install, bool) {
    let k = key.wire();
    // A covering megaflow spares the slow-path lookup.
    let outcome = match dpcls.peek(&k.to_words()) {
        Some(f) => return (count(c, Install::Existing(f)), false),
        None => dpcls.install(k, &slow.classify(&k), flow_limit, now_ns),
    };
    (count(c, outcome), true)
}

fn count(c: &mut Counters, o: Install) -> Install {
    match o {
        Install::Installed(_) => c.preinstalled += 1,
        Install::Existing(_) => c.preinstall_existing += 1,
        Install::Refused => c.preinstall_refused += 1,
    }
    o
}

/// The confidence of a template seen after `count` of `occurrences` occurrences of its
/// signature: the lower end of the one-sigma Wilson score interval of the rate.
pub fn confidence(count: u32, occurrences: u32) -> f64 {
    let n = f64::from(occurrences.max(count));
    if n == 0.0 {
        return 0.0;
    }
    let p = f64::from(count) / n;
    let z2 = 1.0;
    (p + z2 / (2.0 * n) - (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt()) / (1.0 + z2 / n)
}

impl Learner {
    fn sig_id(&mut self, k: &FlowKey, max: usize) -> Option<u32> {
        let s = Sig::of(k);
        if let Some(&i) = self.sig_index.get(&s) {
            return Some(i);
        }
        if self.sigs.len() >= max {
            return None;
        }
        let i = self.sigs.len() as u32;
        self.sig_index.insert(s, i);
        self.sigs.push(SigTable::default());
        Some(i)
    }

    fn forget_before(&mut self, t_ns: u64) {
        while self.recent.front().is_some_and(|r| r.t_ns < t_ns) {
            let r = self.recent.pop_front().expect("checked");
            for a in [r.key.nw_src, r.key.nw_dst] {
                if let Some(q) = self.by_addr.get_mut(&a) {
                    while q.front().is_some_and(|&n| n <= self.first) {
                        q.pop_front();
                    }
                    if q.is_empty() {
                        self.by_addr.remove(&a);
                    }
                }
            }
            self.first += 1;
        }
    }

    /// Counts `t` under signature `sig` for the base upcall `instance`.
    fn count(&mut self, sig: u32, t: Template, instance: u64, now: u64, max_templates: usize) {
        let table = &mut self.sigs[sig as usize];
        if let Some(ts) = table.templates.iter_mut().find(|ts| ts.t == t) {
            if ts.last_instance != instance {
                ts.count += 1;
                ts.last_instance = instance;
                ts.touched = now;
            }
            return;
        }
        let stat = TemplateStat { t, id: self.next_template_id, count: 1, last_instance: instance, touched: now };
        self.next_template_id += 1;
        if table.templates.len() < max_templates {
            table.templates.push(stat);
            self.templates += 1;
        } else if let Some(victim) = table.templates.iter_mut().min_by_key(|ts| (ts.count, ts.touched)) {
            *victim = stat;
        }
    }

    /// Learns from upcall `key` (as a follow-up of recent upcalls, and as an occurrence of its
    /// signature) and pushes the proposals it triggers.
    fn observe(&mut self, key: &FlowKey, now: u64, cfg: &PredictConfig, out: &mut Vec<(FlowKey, Credit)>) {
        self.forget_before(now.saturating_sub(cfg.window_ns));
        let me = self.first + self.recent.len() as u64;
        // As a follow-up: every recent upcall that had this key's source as an endpoint.
        let bases: Vec<u64> = self.by_addr.get(&key.nw_src).map(|q| q.iter().copied().collect()).unwrap_or_default();
        for b in bases {
            let r = &self.recent[(b - self.first) as usize];
            if r.key == *key {
                continue;
            }
            if let Some(sig) = r.sig {
                let t = Template::derive(&r.key, key);
                self.count(sig, t, b, me, cfg.max_templates);
            }
        }
        // As a base: an occurrence of its signature, and its confident templates proposed.
        let sig = self.sig_id(key, cfg.max_signatures);
        if let Some(s) = sig {
            let table = &mut self.sigs[s as usize];
            table.occurrences += 1;
            let occ = table.occurrences;
            let mut picks: Vec<&TemplateStat> = table
                .templates
                .iter()
                .filter(|ts| ts.count >= cfg.min_support && confidence(ts.count, occ) >= cfg.min_confidence)
                .collect();
            picks.sort_by_key(|ts| std::cmp::Reverse(ts.count));
            for ts in picks.into_iter().take(cfg.max_per_trigger) {
                let k = ts.t.instantiate(key);
                if k != *key {
                    out.push((k, Some((s, ts.id, me))));
                }
            }
        }
        self.recent.push_back(Recent { t_ns: now, key: *key, sig });
        for a in [key.nw_src, key.nw_dst] {
            let q = self.by_addr.entry(a).or_default();
            if q.back() != Some(&me) {
                q.push_back(me);
            }
        }
    }

    fn template_mut(&mut self, sig: u32, id: u64) -> Option<&mut TemplateStat> {
        self.sigs.get_mut(sig as usize).and_then(|t| t.templates.iter_mut().find(|ts| ts.id == id))
    }

    /// A prediction counts as an observed follow-up (once per base); false when it did not count
    /// (already counted for this base, or the template was replaced).
    fn credit(&mut self, sig: u32, id: u64, instance: u64) -> bool {
        match self.template_mut(sig, id) {
            Some(ts) if ts.last_instance != instance => {
                ts.count += 1;
                ts.last_instance = instance;
                true
            }
            _ => false,
        }
    }

    /// A prediction's count taken back: its megaflow was not hit within the window.
    fn retract(&mut self, sig: u32, id: u64) {
        if let Some(ts) = self.template_mut(sig, id) {
            ts.count = ts.count.saturating_sub(1);
        }
    }
}

impl Predictor {
    /// The online predictor (module docs).
    pub fn online(cfg: PredictConfig) -> Predictor {
        Predictor::new(cfg, Mode::Online(Box::default()))
    }

    /// The oracle: on the upcall of a key in `table`, proposes that key's list (once).
    pub fn oracle(cfg: PredictConfig, table: impl IntoIterator<Item = (FlowKey, Vec<FlowKey>)>) -> Predictor {
        let mut map: HashMap<FlowKey, Vec<FlowKey>> = HashMap::new();
        for (k, v) in table {
            map.entry(k.wire()).or_default().extend(v.iter().map(FlowKey::wire));
        }
        Predictor::new(cfg, Mode::Oracle(map))
    }

    fn new(cfg: PredictConfig, mode: Mode) -> Predictor {
        Predictor {
            tokens: cfg.burst,
            cfg,
            mode,
            noted: Vec::new(),
            proposals: Vec::new(),
            tracked: Vec::new(),
            learning: VecDeque::new(),
            accounted_ns: 0,
            account_interval_ns: ACCOUNT_INTERVAL_NS,
            stats: PredictStats::default(),
        }
    }

    /// Checks the use of predictions at least once per `idle_ns` (the datapath's idle expiry), so
    /// that a used megaflow is seen used before the idle sweep can delete it.
    pub(crate) fn account_within(mut self, idle_ns: u64) -> Predictor {
        self.account_interval_ns = ACCOUNT_INTERVAL_NS.min(idle_ns);
        self
    }

    /// `online` or `oracle`.
    pub fn mode(&self) -> &'static str {
        match self.mode {
            Mode::Online(_) => "online",
            Mode::Oracle(_) => "oracle",
        }
    }

    pub fn config(&self) -> &PredictConfig {
        &self.cfg
    }

    /// The counters (use is as of the last check: see [`crate::orig::MegaflowDatapath::prediction_stats`]).
    pub fn stats(&self) -> PredictStats {
        let mut s = self.stats;
        if let Mode::Online(l) = &self.mode {
            s.signatures = l.sigs.len() as u64;
            s.templates = l.templates;
        }
        s
    }

    /// The handler saw an upcall of `key` (its wire key). Cheap: learning waits for
    /// [`Predictor::after_upcalls`].
    #[inline]
    pub(crate) fn note(&mut self, key: &FlowKey) {
        self.noted.push(*key);
    }

    /// After a handler call: learn from its upcalls, propose, install the proposals that pass the
    /// rate limit. Returns the handler time it took (also added to `c.predict_ns`).
    pub(crate) fn after_upcalls(
        &mut self,
        dpcls: &mut Dpcls,
        slow: &OfprotoTable,
        c: &mut Counters,
        flow_limit: usize,
        now_ns: u64,
        clock: Clock,
    ) -> u64 {
        if self.noted.is_empty() {
            return 0;
        }
        let t0 = Instant::now();
        self.learn_from_predictions(dpcls, now_ns);
        self.stats.observed += self.noted.len() as u64;
        self.proposals.clear();
        for key in &self.noted {
            let before = self.proposals.len();
            match &mut self.mode {
                Mode::Online(l) => l.observe(key, now_ns, &self.cfg, &mut self.proposals),
                Mode::Oracle(map) => {
                    if let Some(v) = map.remove(key) {
                        self.proposals.extend(v.into_iter().take(self.cfg.max_per_trigger).map(|k| (k, None)));
                    }
                }
            }
            if self.proposals.len() > before {
                self.stats.triggers += 1;
            }
        }
        let limited = self.cfg.per_upcall.is_finite();
        self.tokens = (self.tokens + self.cfg.per_upcall * self.noted.len() as f64).min(self.cfg.burst);
        self.noted.clear();
        let mut lookups = 0;
        for i in 0..self.proposals.len() {
            let (key, credit) = self.proposals[i];
            self.stats.proposed += 1;
            if limited {
                if self.tokens < 1.0 {
                    self.stats.rate_limited += 1;
                    continue;
                }
                self.tokens -= 1.0;
            }
            let (outcome, classified) = preinstall_key(dpcls, slow, c, flow_limit, now_ns, &key);
            lookups += u64::from(classified);
            let (flow, installed) = match outcome {
                Install::Installed(flow) => {
                    self.stats.predicted += 1;
                    self.stats.outstanding += 1;
                    self.tracked.push(Tracked { flow });
                    (flow, true)
                }
                Install::Existing(flow) => {
                    self.stats.already += 1;
                    (flow, false)
                }
                Install::Refused => {
                    self.stats.refused += 1;
                    continue;
                }
            };
            if let (Some((sig, template, instance)), true, Mode::Online(l)) = (credit, installed, &mut self.mode) {
                if l.credit(sig, template, instance) {
                    let due_ns = now_ns + self.cfg.window_ns;
                    self.learning.push_back(Pending { due_ns, flow, sig, template });
                }
            }
        }
        let ns = clock.upcall_ns(t0, lookups);
        c.predict_ns += ns;
        ns
    }

    /// Takes back the counts of predictions whose base's window is over and whose megaflow was
    /// not hit by then (module docs: feedback).
    fn learn_from_predictions(&mut self, dpcls: &Dpcls, now_ns: u64) {
        let Mode::Online(l) = &mut self.mode else { return };
        while self.learning.front().is_some_and(|p| p.due_ns <= now_ns) {
            let p = self.learning.pop_front().expect("checked");
            let hit = matches!(dpcls.get(p.flow), Some(e) if e.hits > 0);
            if !hit {
                l.retract(p.sig, p.template);
            }
        }
    }

    /// Checks which predicted megaflows were used or deleted (at most every
    /// [`ACCOUNT_INTERVAL_NS`], or the idle expiry if shorter, unless `force`).
    pub(crate) fn account(&mut self, dpcls: &Dpcls, now_ns: u64, force: bool) {
        if !force && now_ns.saturating_sub(self.accounted_ns) < self.account_interval_ns {
            return;
        }
        self.accounted_ns = now_ns;
        self.learn_from_predictions(dpcls, now_ns);
        let stats = &mut self.stats;
        self.tracked.retain(|t| match dpcls.get(t.flow) {
            Some(e) if e.hits > 0 => {
                stats.used += 1;
                stats.outstanding -= 1;
                false
            }
            Some(_) => true,
            None => {
                stats.wasted += 1;
                stats.outstanding -= 1;
                false
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{testutil, DatapathConfig, Orig, OrigConfig};
    use rqvs_classify::Reference;
    use rqvs_flow::key::{ETH_TYPE_IP, IPPROTO_UDP};
    use rqvs_flow::{Actions, Match, Rule};
    use rqvs_ofproto::DpAction;

    const VIP: u32 = 0xac1e_0001;

    fn pod(i: u32) -> u32 {
        0x0a01_0000 | i
    }

    /// Per-pod policy rules (so megaflows are per source pod) and a load balancer for VIP ports
    /// 2100..=2180, plus a default route.
    fn lb_rules(pods: u32) -> Vec<Rule> {
        let udp = FlowKey { dl_type: ETH_TYPE_IP, nw_proto: IPPROTO_UDP, ..FlowKey::default() };
        let udp_mask = FlowKey { dl_type: u16::MAX, nw_proto: u8::MAX, ..FlowKey::default() };
        let mut rules = Vec::new();
        for i in 1..=pods {
            let v = FlowKey { nw_src: pod(i), tp_dst: 9100, ..udp };
            let m = FlowKey { nw_src: u32::MAX, tp_dst: u16::MAX, ..udp_mask };
            rules.push(Rule::new(rules.len() as u32, 400, Match::from_masked(v, m), Actions::drop()));
        }
        for j in 0..9u16 {
            let v = FlowKey { nw_dst: VIP, tp_dst: 2100 + 10 * j, ..udp };
            let m = FlowKey { nw_dst: u32::MAX, tp_dst: u16::MAX, ..udp_mask };
            rules.push(Rule::new(
                rules.len() as u32,
                300,
                Match::from_masked(v, m),
                Actions::output(10 + u32::from(j)),
            ));
        }
        let ip = FlowKey { dl_type: ETH_TYPE_IP, ..FlowKey::default() };
        let ip_mask = FlowKey { dl_type: u16::MAX, ..FlowKey::default() };
        rules.push(Rule::new(rules.len() as u32, 1, Match::from_masked(ip, ip_mask), Actions::output(1)));
        rules
    }

    fn udp(src: u32, dst: u32, sport: u16, dport: u16) -> FlowKey {
        FlowKey::ipv4(src, dst, IPPROTO_UDP, sport, dport)
    }

    fn virtual_dp(rules: &[Rule]) -> Orig {
        let cfg =
            DatapathConfig { clock: Clock::Virtual { packet_ns: 100, upcall_ns: 2_000 }, ..DatapathConfig::default() };
        Orig::new(rules, cfg, OrigConfig::default()).unwrap()
    }

    /// Replays `(time, key)` packets one per batch at their times; returns each packet's action
    /// and whether it upcalled.
    fn replay(dp: &mut Orig, packets: &[(u64, FlowKey)]) -> Vec<(DpAction, bool)> {
        let mut res = Vec::new();
        let mut out = [DpAction::Drop; 1];
        for (i, &(t, k)) in packets.iter().enumerate() {
            crate::Design::idle_until(dp, t);
            dp.process_batch(&[k], i as u64, &mut out);
            let mut a = (out[0], out[0] == DpAction::Pending);
            for &(_, x) in dp.handle_upcalls() {
                a.0 = x;
            }
            dp.maintain();
            res.push(a);
        }
        res
    }

    /// `n` coflows 1 ms apart: pod i → VIP:2100, then `follow(i)` (0..=2) follow-ups from pod i
    /// to VIP:2110 (100 µs later) and VIP:2150 (120 µs later).
    fn coflows(n: u32, follow: impl Fn(u32) -> usize) -> Vec<(u64, FlowKey)> {
        let mut v = Vec::new();
        for i in 0..n {
            let t = u64::from(i) * 1_000_000 + 1_000_000;
            v.push((t, udp(pod(i + 1), VIP, 40_000 + i as u16, 2100)));
            for (j, (dt, port)) in [(100_000, 2110), (120_000, 2150)].into_iter().enumerate().take(follow(i)) {
                v.push((t + dt, udp(pod(i + 1), VIP, 50_000 + 1000 * j as u16 + i as u16, port)));
            }
        }
        v
    }

    fn check_actions(rules: &[Rule], packets: &[(u64, FlowKey)], got: &[(DpAction, bool)]) {
        let r = Reference::build(rules).unwrap();
        for (&(_, k), &(a, _)) in packets.iter().zip(got) {
            assert_eq!(a, DpAction::of_rule(r.lookup_rule(&k.wire())), "{k:?}");
        }
    }

    #[test]
    fn online_learns_follow_ups_and_their_first_packets_skip_the_upcall() {
        let rules = lb_rules(64);
        let packets = coflows(60, |_| 2);
        let mut off = virtual_dp(&rules);
        let base_off = replay(&mut off, &packets);
        let mut dp = virtual_dp(&rules);
        dp.set_predictor(Some(Predictor::online(PredictConfig::default())));
        let got = replay(&mut dp, &packets);
        check_actions(&rules, &packets, &got);
        check_actions(&rules, &packets, &base_off);
        // Without prediction every flow upcalls; with it, after a few coflows the follow-ups hit.
        assert!(base_off.iter().all(|x| x.1));
        let late_follow_ups: Vec<bool> =
            packets.iter().zip(&got).skip(30).filter(|(p, _)| p.1.tp_dst != 2100).map(|(_, g)| g.1).collect();
        assert!(!late_follow_ups.is_empty() && late_follow_ups.iter().all(|&u| !u), "{late_follow_ups:?}");
        let s = dp.prediction_stats().unwrap();
        assert!(s.predicted >= 2 * 50, "{s:?}");
        assert_eq!(s.used, s.predicted, "every prediction was right: {s:?}");
        assert_eq!((s.wasted, s.outstanding, s.rate_limited), (0, 0, 0), "{s:?}");
        let c = dp.counters();
        assert_eq!(c.received, packets.len() as u64, "predictions are not packets");
        assert!(c.outcome_sum_ok());
        assert_eq!(c.preinstalled, s.predicted);
        assert!(c.predict_ns > 0 && c.upcall < off.counters().upcall);
    }

    #[test]
    fn rare_follow_ups_are_not_predicted() {
        // A follow-up after 1 coflow in 10: confidence about 0.1 < 0.5.
        let rules = lb_rules(64);
        let packets = coflows(60, |i| usize::from(i % 10 == 0));
        let mut dp = virtual_dp(&rules);
        dp.set_predictor(Some(Predictor::online(PredictConfig::default())));
        let got = replay(&mut dp, &packets);
        check_actions(&rules, &packets, &got);
        let s = dp.prediction_stats().unwrap();
        assert_eq!(s.proposed, 0, "{s:?}");
        assert!(s.templates >= 1, "the template was still learned: {s:?}");
        // With a threshold below 0.1 they are predicted, and mostly wasted.
        let mut dp = virtual_dp(&rules);
        let cfg = PredictConfig { min_confidence: 0.02, min_support: 2, ..PredictConfig::default() };
        dp.set_predictor(Some(Predictor::online(cfg)));
        let got = replay(&mut dp, &packets);
        check_actions(&rules, &packets, &got);
        let s = dp.prediction_stats().unwrap();
        assert!(s.predicted > 20 && s.used <= 10 && s.wasted_ratio() > 0.7, "{s:?}");
    }

    #[test]
    fn wasted_predictions_are_counted_when_they_expire() {
        let rules = lb_rules(64);
        // 40 coflows with follow-ups, then 10 without: their predictions are never hit.
        let packets = coflows(50, |i| if i < 40 { 2 } else { 0 });
        let mut dp = virtual_dp(&rules);
        dp.set_predictor(Some(Predictor::online(PredictConfig::default())));
        let got = replay(&mut dp, &packets);
        check_actions(&rules, &packets, &got);
        let s = dp.prediction_stats().unwrap();
        assert_eq!(s.wasted, 0);
        assert_eq!(s.outstanding, 20, "two predictions for each of the last 10 coflows: {s:?}");
        // Idle expiry (10 s) deletes them unused.
        crate::Design::idle_until(&mut dp, 30_000_000_000);
        dp.maintain();
        let s = dp.prediction_stats().unwrap();
        assert_eq!((s.wasted, s.outstanding), (20, 0), "{s:?}");
        assert!((s.wasted_ratio() - 20.0 / s.predicted as f64).abs() < 1e-12);
    }

    #[test]
    fn used_predictions_are_counted_before_a_short_idle_expiry_deletes_them() {
        // Coflows 7 ms apart over 560 ms, megaflows idle-expire after 5 ms: the sweep at 504 ms
        // deletes predictions hit since the last check of their use (420 ms). Every prediction
        // is right, so none may be counted wasted.
        let rules = lb_rules(80);
        let packets: Vec<(u64, FlowKey)> = coflows(80, |_| 2).into_iter().map(|(t, k)| (t * 7, k)).collect();
        let cfg =
            DatapathConfig { clock: Clock::Virtual { packet_ns: 100, upcall_ns: 2_000 }, ..DatapathConfig::default() };
        let mut dp = Orig::new(&rules, cfg, OrigConfig { idle_ns: 5_000_000, ..OrigConfig::default() }).unwrap();
        dp.set_predictor(Some(Predictor::online(PredictConfig::default())));
        let got = replay(&mut dp, &packets);
        check_actions(&rules, &packets, &got);
        assert!(dp.counters().deleted_idle > 0, "the sweep ran: {:?}", dp.counters());
        let s = dp.prediction_stats().unwrap();
        assert!(s.predicted >= 2 * 50, "{s:?}");
        assert_eq!((s.used, s.wasted, s.outstanding), (s.predicted, 0, 0), "{s:?}");
    }

    #[test]
    fn rate_limit_bounds_predictions() {
        let rules = lb_rules(64);
        let packets = coflows(60, |_| 2);
        let mut dp = virtual_dp(&rules);
        // One token to start with, one more per 10 upcalls.
        let cfg = PredictConfig { per_upcall: 0.1, burst: 1.0, ..PredictConfig::default() };
        dp.set_predictor(Some(Predictor::online(cfg)));
        let got = replay(&mut dp, &packets);
        check_actions(&rules, &packets, &got);
        let s = dp.prediction_stats().unwrap();
        assert!(s.predicted >= 1 && s.predicted as f64 <= 1.0 + 0.1 * s.observed as f64, "{s:?}");
        assert!(s.rate_limited > 50, "{s:?}");
        assert_eq!(s.proposed, s.rate_limited + s.predicted + s.already + s.refused);
    }

    #[test]
    fn oracle_proposes_exactly_the_table() {
        let rules = lb_rules(64);
        let packets = coflows(20, |_| 2);
        let table: Vec<(FlowKey, Vec<FlowKey>)> =
            packets.chunks(3).filter(|c| c[0].1.nw_src % 2 == 0).map(|c| (c[0].1, vec![c[1].1, c[2].1])).collect();
        let mut dp = virtual_dp(&rules);
        dp.set_predictor(Some(Predictor::oracle(PredictConfig::default(), table.clone())));
        let got = replay(&mut dp, &packets);
        check_actions(&rules, &packets, &got);
        let s = dp.prediction_stats().unwrap();
        assert_eq!((s.predicted, s.used, s.triggers), (20, 20, 10), "{s:?}");
        // Exactly the listed follow-ups skipped their upcall.
        for (chunk, res) in packets.chunks(3).zip(got.chunks(3)) {
            let listed = chunk[0].1.nw_src % 2 == 0;
            assert!(res[0].1, "base flows always upcall");
            assert_eq!((res[1].1, res[2].1), (!listed, !listed));
        }
    }

    #[test]
    fn preinstall_installs_megaflows_without_packets() {
        let rules = testutil::rules(300);
        let keys = testutil::keys(5_000, 3);
        let want = testutil::expect(&rules, &keys);
        let mut cold = virtual_dp(&rules);
        let a = cold.run_keys(&keys);
        let mut warm = virtual_dp(&rules);
        let installed = warm.preinstall(&keys[..2_000]);
        let c = warm.counters();
        assert!(installed > 100 && c.preinstalled == installed as u64, "{c:?}");
        assert_eq!((c.received, c.upcall, c.tx, c.dropped_by_action), (0, 0, 0, 0));
        assert_eq!(c.preinstall_existing + c.preinstalled, 2_000);
        assert_eq!(c.predict_ns, c.preinstalled * 2_000, "virtual clock: one upcall cost per slow-path lookup");
        assert_eq!(warm.preinstall(&keys[..2_000]), 0, "everything is covered now");
        let b = warm.run_keys(&keys);
        assert_eq!(a, want);
        assert_eq!(b, want, "preinstalled megaflows give the slow path's action");
        assert!(warm.counters().upcall < cold.counters().upcall);
        assert!(warm.counters().outcome_sum_ok());
        // At the flow limit nothing is installed.
        let mut full =
            Orig::new(&rules, DatapathConfig::default(), OrigConfig { flow_limit: 10, ..OrigConfig::default() })
                .unwrap();
        full.preinstall(&keys[..2_000]);
        let c = full.counters();
        assert_eq!(c.megaflows, 10);
        assert!(c.preinstall_refused > 0);
    }

    #[test]
    fn predictions_never_change_actions_on_random_traffic() {
        // Overlapping ClassBench-style rules and random follow-up structure: whatever the
        // predictor installs, every packet gets the reference's action.
        let rules = testutil::rules(200);
        // Sources from the rules' /24s; each "base" (destination port 1000..1019) is followed by
        // flows from the same source to ports the rules' ranges cut differently.
        let mut keys = Vec::new();
        for i in 0..4_000u32 {
            let src = 0x0a00_0000 | ((i % 4) << 16) | ((i * 7 % 250) << 8) | (i % 3);
            let k = |dport: u32| FlowKey::ipv4(src, 0x0b00_0001, 6, 1234, dport as u16);
            keys.push(k(1000 + i % 20));
            keys.push(k(1000 + (i * 13) % 1500));
            keys.push(k(1900 + i % 300));
        }
        let want = testutil::expect(&rules, &keys);
        for oracle in [false, true] {
            let mut dp = Orig::new(
                &rules,
                DatapathConfig { emc_insert_prob: 0.2, ..DatapathConfig::default() },
                OrigConfig::default(),
            )
            .unwrap();
            let cfg = PredictConfig { min_confidence: 0.0, min_support: 1, ..PredictConfig::default() };
            let p = if oracle {
                // A nonsense table: a key → 5 keys 500 packets later.
                let table: Vec<_> =
                    (0..keys.len() - 600).step_by(7).map(|i| (keys[i], keys[i + 500..i + 505].to_vec())).collect();
                Predictor::oracle(cfg, table)
            } else {
                Predictor::online(cfg)
            };
            dp.set_predictor(Some(p));
            let got = dp.run_keys(&keys);
            assert_eq!(got, want, "oracle {oracle}");
            let s = dp.prediction_stats().unwrap();
            assert!(s.predicted > 0, "oracle {oracle}: {s:?}");
            assert!(dp.counters().outcome_sum_ok());
        }
    }

    #[test]
    fn confidence_is_conservative_on_few_occurrences() {
        assert_eq!(confidence(0, 0), 0.0);
        assert!(confidence(3, 5) < 0.5 && confidence(3, 5) > 0.3);
        assert!(confidence(3, 3) > 0.7, "three of three");
        assert!((confidence(750, 1000) - 0.75).abs() < 0.02, "close to the rate on many");
        assert!(confidence(750, 1000) < 0.75);
        assert!(confidence(10, 100) < 0.1 && confidence(10, 100) > 0.06);
    }

    #[test]
    fn templates_copy_fields_from_the_base() {
        let b = udp(pod(1), VIP, 40_000, 2100);
        let u = udp(pod(1), VIP + 1, 51_234, 2130);
        let t = Template::derive(&b, &u);
        assert_eq!(
            (t.nw_src, t.nw_dst, t.tp_src, t.tp_dst),
            (Addr::BaseSrc, Addr::Lit(VIP + 1), Port::Any, Port::Lit(2130))
        );
        let b2 = udp(pod(7), VIP, 41_000, 2100);
        let k = t.instantiate(&b2);
        assert_eq!(k, udp(pod(7), VIP + 1, 41_000, 2130));
        // A reply: source and destination swapped, ports too.
        let r = udp(VIP, pod(1), 2100, 40_000);
        let t = Template::derive(&b, &r);
        assert_eq!(
            (t.nw_src, t.nw_dst, t.tp_src, t.tp_dst),
            (Addr::BaseDst, Addr::BaseSrc, Port::BaseDst, Port::BaseSrc)
        );
        assert_eq!(t.instantiate(&b2), udp(VIP, pod(7), 2100, 41_000));
    }

    #[test]
    fn bad_settings_are_errors() {
        assert!(PredictConfig::default().validate().is_ok());
        for c in [
            PredictConfig { min_confidence: 1.5, ..PredictConfig::default() },
            PredictConfig { per_upcall: 0.0, ..PredictConfig::default() },
            PredictConfig { per_upcall: f64::NAN, ..PredictConfig::default() },
            PredictConfig { burst: 0.0, ..PredictConfig::default() },
            PredictConfig { max_per_trigger: 0, ..PredictConfig::default() },
        ] {
            assert!(c.validate().is_err(), "{c:?}");
        }
    }
}
