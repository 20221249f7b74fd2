//! Replay: a trace through a datapath design, as fast as the PMD takes it or at a constant rate
//! — what `rqvs replay` and `rqvs compare` run ([`prepare`], then [`run_design`] per design; the
//! settings are a plain [`ReplayConfig`]).
//!
//! - **Designs** ([`rqvs_datapath::Design`]): `orig` (EMC → megaflow cache → upcall to the
//!   OpenFlow slow path), `ccache` (EMC → NuevoMatchUP over the megaflows → megaflow cache →
//!   upcall; the model retrained in the background) and `cflows` (EMC → NuevoMatchUP over the
//!   OpenFlow rules → TupleMerge remainder; no megaflows, no upcalls). `rqvs compare` runs several
//!   on the same input.
//! - **Rules.** ClassBench files go to the slow path as they are (the OpenFlow classifier expands
//!   port ranges itself, with u32 priorities, so 100K/500K sets need no 16-bit priority layering),
//!   and every rule gets the action `output:(id+1)` ([`rqvs_datapath::assign_rule_outputs`]), so
//!   an action mismatch always means a wrong rule. ovs-ofctl files keep their actions.
//! - **Time** is PMD time: the measured time of the PMD's batches and of the upcalls it handles
//!   (OVS-DPDK's PMD handles its own upcalls); revalidation after rule updates and periodic sweeps
//!   are not PMD time (another core in OVS). Throughput is packets / PMD time. The trace is
//!   replayed `--passes` times (default 1) or in a loop until `--duration` seconds of PMD time;
//!   after the first pass the report adds the steady-state throughput of the later passes.
//! - **Time series**: a sample every 100 ms of PMD time: throughput, upcalls/s, deletions/s,
//!   megaflows, masks.
//! - **Updates** ([`ReplayConfig::updates`], e.g. `add:60@7s,del:10@9s`): `add:N@Ts` holds N rules out of the initial
//!   table — chosen at random (seed `--seed`) among all rules, so they interleave in priority with
//!   the rest — and inserts them when the PMD clock reaches T; `del:N@Ts` removes N random
//!   installed rules at T. ORIG (and CCACHE) revalidate every megaflow after each update — on the
//!   revalidator thread by default (`--revalidator thread`: the PMD goes on forwarding, the
//!   stale megaflows are deleted at a batch boundary once the thread has re-checked them; the
//!   update log gives `revalidated_ms`, from the call until then), or in the call (`inline`);
//!   CFLOWS applies it by `--policy` (instant: visible at once; delayed: at the next model swap).
//! - **Verification**: `--verify N` trace positions are sampled (seed `--seed`); the action each
//!   gets is recorded once per version of the *visible* rule table (it changes at each update, or
//!   at the model swap for the delayed policy) and compared, after the run, with the reference
//!   classifier's winning rule for that version — or, for a packet that ran while the
//!   revalidator thread had stale megaflows to check, with any version from the oldest of them
//!   on (OVS's eventual consistency; the report counts these packets). Mismatches are printed
//!   next to the throughput; any makes the exit code 1.
//! - **Flow prediction** (`--predict`, ORIG only, off by default; [`rqvs_datapath::predict`]):
//!   `online` attaches the online predictor — it learns from the upcalls of any trace which flows
//!   follow which, and installs the megaflows of expected follow-ups through the slow path;
//!   `oracle` installs, on a base flow's upcall, exactly the coupled associated flows a coflow
//!   ground truth lists (`--coflow-truth`, as `rqvs gen coflows --truth-out` writes it; its flows
//!   are matched to the trace by 5-tuple). Predicted megaflows, their use and waste are reported;
//!   the prediction work is handler time on the PMD clock (`predict_ns`). The replay ignores
//!   capture timestamps (packets come as fast as the PMD takes them), so the predictor's window
//!   is PMD time and there is no latency model: `rqvs coflows` is the experiment with arrival
//!   times, first-packet latency and handler CPU over coflowiness.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use rqvs_classify::nuevomatch::live::Policy;
use rqvs_classify::Reference;
use rqvs_datapath::ccache::CcacheConfig;
use rqvs_datapath::pmd::{BatchOutcome, Pmd};
use rqvs_datapath::predict::PredictStats;
use rqvs_datapath::revalidator::RevalidatorMode;
use rqvs_datapath::{
    assign_rule_outputs, Auto, AutoConfig, Ccache, Cflows, CflowsClassifier, CflowsConfig, Clock, Counters,
    DatapathConfig, Design, DesignReport, DpAction, MaskEviction, MaskLimit, OfprotoTable, Orig, OrigConfig, BATCH,
};
use rqvs_flow::formats::{self, RuleFormat};
use rqvs_flow::rng::Rng;
use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::mixed::{AttackQueue, Latency, StreamStats, ATTACK_SEQ};
pub use crate::prediction::{oracle_predictor, Prediction};
use crate::{inputs, Error};

/// The seed's streams ([`Rng::fork`] labels), one per random choice, so that one changing does
/// not shift another's draws: the rules held out for `add:` updates, the packets verified, the
/// rules `del:` updates remove.
const STREAM_HELD_OUT: u64 = 1;
const STREAM_VERIFY: u64 = 2;
const STREAM_DELETIONS: u64 = 3;
/// MFCGuard's interval when not given, seconds of PMD time (the revalidator's sweep's).
pub const MFCGUARD_INTERVAL_S: f64 = 0.5;
const STREAM_ATTACK_VERIFY: u64 = 4;
pub use rqvs_datapath::DesignKind;

/// The settings of a replay (what `rqvs replay`'s options fill; the switch and the Python
/// package fill the same). [`Default`] gives the command line's defaults: the embedded
/// workload, ORIG's OVS defaults.
#[derive(Clone, Debug)]
pub struct ReplayConfig {
    /// Rule file: ClassBench or ovs-ofctl flows, plain or .xz (`None`: the embedded ClassBench
    /// acl1_1k set).
    pub rules: Option<PathBuf>,
    /// ClassBench trace or pcap/pcapng capture, plain or .xz (`None`: the embedded acl1_1k
    /// trace).
    pub trace: Option<PathBuf>,
    /// The cuckoo distributor (ORIG, CCACHE).
    pub cd: bool,
    pub emc: bool,
    /// EMC insertion probability (OVS default 0.01; the paper used 0.2).
    pub emc_prob: f64,
    /// Replay the trace in a loop until this many seconds of PMD time (else `passes` times).
    pub duration: Option<f64>,
    pub passes: u32,
    /// Constant-rate mode: packets offered per second of PMD time into a ring of `rx_ring`.
    pub rate: Option<f64>,
    pub rx_ring: u64,
    /// Rule updates, e.g. `add:60@7s,del:10@9s`.
    pub updates: Option<String>,
    /// Trace positions checked against the reference (default 10,000; 2,000 above 100,000 rules).
    pub verify: Option<usize>,
    /// Seed for held-out rules, the verification sample and EMC insertion draws.
    pub seed: u64,
    pub flow_limit: usize,
    pub revalidator: RevalidatorMode,
    /// CFLOWS: when inserted rules become visible.
    pub policy: Policy,
    /// CFLOWS: NuevoMatchUP, or TupleMerge alone (the learned index's ablation).
    pub classifier: CflowsClassifier,
    /// Retrain when what was added outside the model exceeds this share (CFLOWS: rules in the
    /// remainder; CCACHE: megaflows in the megaflow cache).
    pub retrain_threshold: f64,
    /// CCACHE: seconds of PMD time between the manager's checks.
    pub train_interval: f64,
    /// Idle expiry of megaflows, seconds of PMD time.
    pub idle: f64,
    /// in_port given to trace packets.
    pub in_port: u32,
    /// PMD threads the trace is split over by flow hash ([`run_pmds`]; 1 = [`run_design`]).
    pub pmds: usize,
    /// `--design auto`: the controller's thresholds ([`rqvs_datapath::auto`]).
    pub auto: AutoConfig,
    /// ORIG, CCACHE: at most this many megaflow masks per PMD (`None`: no limit, as OVS), and
    /// what happens at the limit ([`rqvs_datapath::dpcls`], defences against Tuple Space
    /// Explosion).
    pub mask_limit: Option<usize>,
    pub mask_eviction: MaskEviction,
    /// ORIG, CCACHE: MFCGuard — every this many seconds of PMD time, delete the subtables whose
    /// megaflows all drop (`None`: off, as OVS).
    pub mfcguard: Option<f64>,
    /// An attack interleaved with the trace ([`crate::mixed`]): a packet file replayed in a
    /// loop, arriving at `attack_rate` packets per second of PMD time.
    pub attack: Option<PathBuf>,
    pub attack_rate: Option<f64>,
}

impl ReplayConfig {
    /// The rule file as reports name it.
    pub fn rules_name(&self) -> String {
        self.rules.as_ref().map_or(inputs::DEFAULT_RULES_NAME.to_string(), |p| p.display().to_string())
    }

    /// The trace as reports name it.
    pub fn trace_name(&self) -> String {
        self.trace.as_ref().map_or(inputs::DEFAULT_TRACE_NAME.to_string(), |p| p.display().to_string())
    }
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            rules: None,
            trace: None,
            cd: false,
            emc: true,
            emc_prob: 0.01,
            duration: None,
            passes: 1,
            rate: None,
            rx_ring: 4096,
            updates: None,
            verify: None,
            seed: 1,
            flow_limit: 200_000,
            revalidator: RevalidatorMode::Thread,
            policy: Policy::Instant,
            classifier: CflowsClassifier::NuevoMatch,
            retrain_threshold: 0.1,
            train_interval: 0.01,
            idle: 10.0,
            in_port: 1,
            pmds: 1,
            auto: AutoConfig::default(),
            mask_limit: None,
            mask_eviction: MaskEviction::default(),
            mfcguard: None,
            attack: None,
            attack_rate: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum UpdateOp {
    Add,
    Del,
}

#[derive(Clone, Debug)]
struct Update {
    op: UpdateOp,
    n: usize,
    at_ns: u64,
    rules: Vec<Rule>,
}

/// Parses `add:60@7s,del:10@9.5s` (seconds; `ms` also accepted).
fn parse_updates(spec: &str) -> Result<Vec<Update>, Error> {
    let mut out = Vec::new();
    for (i, part) in spec.split(',').enumerate() {
        let err = |what: &str| Error(format!("--updates: item {} '{part}': expected {what} (e.g. 'add:60@7s')", i + 1));
        let (op, rest) = part.split_once(':').ok_or_else(|| err("OP:N@TIME"))?;
        let op = match op.trim() {
            "add" => UpdateOp::Add,
            "del" => UpdateOp::Del,
            _ => return Err(err("operation 'add' or 'del'")),
        };
        let (n, t) = rest.split_once('@').ok_or_else(|| err("N@TIME"))?;
        let n: usize = n.trim().parse().map_err(|_| err("a rule count"))?;
        let t = t.trim();
        let secs: f64 = if let Some(ms) = t.strip_suffix("ms") {
            ms.parse::<f64>().map_err(|_| err("a time like 7s or 500ms"))? / 1e3
        } else {
            t.strip_suffix('s').unwrap_or(t).parse().map_err(|_| err("a time like 7s or 500ms"))?
        };
        if !(secs >= 0.0 && secs.is_finite()) {
            return Err(err("a non-negative time"));
        }
        out.push(Update { op, n, at_ns: (secs * 1e9) as u64, rules: Vec::new() });
    }
    out.sort_by_key(|u| u.at_ns);
    Ok(out)
}

/// Rules from a ClassBench file (with `output:(id+1)` actions) or an ofctl file; the embedded
/// ClassBench set without one.
fn load_rules(path: Option<&Path>) -> Result<(Vec<Rule>, &'static str), Error> {
    let Some(path) = path else {
        let mut rules = inputs::load_rules(None)?;
        assign_rule_outputs(&mut rules);
        return Ok((rules, "classbench"));
    };
    let text = rqvs_flow::io::read_text(path)?;
    let name = path.display().to_string();
    match formats::sniff_rule_format(&text) {
        RuleFormat::Ofctl => Ok((formats::ofctl::parse_flows(&name, &text)?, "ofctl")),
        RuleFormat::ClassBench => {
            let mut rules = formats::classbench::parse_rules(&name, &text)?;
            assign_rule_outputs(&mut rules);
            Ok((rules, "classbench"))
        }
    }
}

#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Sample {
    pub t_s: f64,
    pub mpps: f64,
    pub upcalls_per_s: f64,
    pub deletions_per_s: f64,
    pub lost: u64,
    pub megaflows: u64,
    pub masks: u64,
    /// Learned designs: share of entries (rules or megaflows) the model holds.
    pub coverage: f64,
}

/// Traces up to this many packets are held in memory after the counting pass (each pass then
/// reads memory, not the file); longer ones are read from the file on every pass.
pub const HOLD_PACKETS: usize = 1 << 20;

/// The packets of a replay: a source, and which share of it (a PMD's, by flow hash).
#[derive(Clone)]
pub struct Trace {
    source: inputs::PacketSource,
    /// `(i, n)`: only the packets whose flow hash is `i` modulo `n`.
    share: Option<(usize, usize)>,
}

/// The keys of a [`Trace`], one pass.
pub struct TraceKeys {
    pass: inputs::PacketPass,
    share: Option<(usize, usize)>,
}

impl TraceKeys {
    /// The next key of the pass; `None` at its end.
    pub fn next_key(&mut self) -> Result<Option<FlowKey>, Error> {
        while let Some(e) = self.pass.next_entry()? {
            match self.share {
                Some((i, n)) if rqvs_datapath::flow_hash(&e.key.wire()) as usize % n != i => continue,
                _ => return Ok(Some(e.key)),
            }
        }
        Ok(None)
    }
}

impl Trace {
    /// Opens a pass over the trace.
    pub fn open(&self) -> Result<TraceKeys, Error> {
        Ok(TraceKeys { pass: self.source.open()?, share: self.share })
    }

    /// True when the packets are held in memory rather than read from the file on every pass.
    pub fn is_held(&self) -> bool {
        self.source.is_held()
    }
}

/// Everything a run needs, loaded once (shared by the designs `rqvs compare` runs). The trace is
/// not held (unless short): [`Prepared::trace`] reads it again for every pass and design.
pub struct Prepared {
    pub all_rules: Vec<Rule>,
    pub rules_format: &'static str,
    /// The packets, pass after pass.
    pub trace: Trace,
    /// Packets in one pass over the trace.
    pub packets: u64,
    /// How the capture's frames were counted, for a capture.
    pub capture: Option<rqvs_flow::formats::pcap::CaptureStats>,
    updates: Vec<Update>,
    pub initial: Vec<Rule>,
    /// Sampled trace positions, ascending.
    samples: Vec<u64>,
    pub n_verify: usize,
    /// The attack interleaved with the trace ([`crate::mixed`]).
    pub attack: Option<AttackTrace>,
}

/// The attack of a mixed replay, loaded once ([`prepare`]).
pub struct AttackTrace {
    pub trace: Trace,
    /// Packets in one pass over the attack file.
    pub packets: u64,
    /// Packets per second of PMD time.
    pub rate: f64,
    /// Sampled positions of the attack file, ascending (verified like the trace's).
    samples: Vec<u64>,
}

/// `n` of `len` positions sampled from `rng`, ascending (memory: `n`, not `len`).
fn sample_positions(len: u64, n: usize, rng: &mut Rng) -> Vec<u64> {
    let n = (n as u64).min(len);
    if n == len {
        return (0..len).collect();
    }
    rng.sample_sorted_u64(len, n)
}

/// Settings given explicitly (`given(id)`, the option's name with `_`: `emc_prob`) that none
/// of `designs` — or none of the settings they serve — would use: an error naming the option,
/// so that the command line and the Python package refuse what they would otherwise ignore.
/// `names` says which designs run, as given (`--design orig`); `rate_search` whether the run is
/// a rate search (it uses the receive ring).
pub fn check_unused(
    c: &ReplayConfig,
    designs: &[DesignKind],
    names: &str,
    rate_search: bool,
    given: &dyn Fn(&str) -> bool,
) -> Result<(), Error> {
    let refuse = |id: &str, unused: bool, why: &str| -> Result<(), Error> {
        if unused && given(id) {
            return Err(Error(format!("--{}: {why}", id.replace('_', "-"))));
        }
        Ok(())
    };
    let any = |f: fn(DesignKind) -> bool| designs.iter().any(|&d| f(d));
    // `auto` runs all three designs, so it uses every design's settings.
    let megaflows = any(|d| matches!(d, DesignKind::Orig | DesignKind::Ccache | DesignKind::Auto));
    let cflows = any(|d| matches!(d, DesignKind::Cflows | DesignKind::Auto));
    let ccache = any(|d| matches!(d, DesignKind::Ccache | DesignKind::Auto));
    for (id, what) in [
        ("cd", "the cuckoo distributor"),
        ("flow_limit", "the megaflow flow limit"),
        ("idle", "megaflows' idle expiry"),
        ("revalidator", "megaflow revalidation"),
    ] {
        refuse(id, !megaflows, &format!("{what} is ORIG's and CCACHE's; not used by {names}"))?;
    }
    refuse("policy", !cflows, &format!("CFLOWS' update policy; not used by {names}"))?;
    refuse("classifier", !cflows, &format!("CFLOWS' classifier; not used by {names}"))?;
    refuse("retrain_threshold", !(cflows || ccache), &format!("the learned designs' setting; not used by {names}"))?;
    refuse("train_interval", !ccache, &format!("CCACHE's setting; not used by {names}"))?;
    refuse("emc_prob", !c.emc, "the EMC's insertion probability; not used with --no-emc")?;
    let ring = c.rate.is_some() || rate_search || c.attack.is_some();
    refuse("rx_ring", !ring, "the receive ring of --rate, --rate-search and --attack; not used without them")?;
    for (id, what) in [
        ("mask_limit", "the mask limit"),
        ("mask_eviction", "the mask limit's policy"),
        ("mfcguard", "MFCGuard"),
        ("mfcguard_interval", "MFCGuard's interval"),
    ] {
        refuse(
            id,
            !megaflows,
            &format!("{what}, a defence of ORIG's and CCACHE's megaflow cache; not used by {names}"),
        )?;
    }
    refuse("mask_eviction", c.mask_limit.is_none(), "the policy at the mask limit; expected --mask-limit")?;
    check_defences(c)
}

/// The defences' values (against Tuple Space Explosion): a limit of at least 1 mask, an
/// MFCGuard interval that is a positive number.
pub fn check_defences(c: &ReplayConfig) -> Result<(), Error> {
    if c.mask_limit == Some(0) {
        return Err(Error("--mask-limit: expected at least 1 mask".into()));
    }
    if c.mfcguard.is_some_and(|s| !(s > 0.0 && s.is_finite())) {
        return Err(Error(format!("--mfcguard: expected an interval > 0 s, found '{}'", c.mfcguard.unwrap_or(0.0))));
    }
    Ok(())
}

/// Loads and checks everything a run needs (once for all the designs of a comparison).
pub fn prepare(c: &ReplayConfig) -> Result<Prepared, Error> {
    if !(0.0..=1.0).contains(&c.emc_prob) {
        return Err(Error(format!("--emc-prob: expected a probability 0..1, found '{}'", c.emc_prob)));
    }
    if !(0.0..=1.0).contains(&c.retrain_threshold) {
        return Err(Error(format!("--retrain-threshold: expected a share 0..1, found '{}'", c.retrain_threshold)));
    }
    if c.classifier == CflowsClassifier::TupleMerge && c.policy == Policy::Delayed {
        return Err(Error(
            "--classifier tm: TupleMerge alone has no model for the delayed policy to wait for (use --policy instant)"
                .into(),
        ));
    }
    if c.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
        return Err(Error(format!("--rate: expected packets per second > 0, found '{}'", c.rate.unwrap_or(0.0))));
    }
    if c.rx_ring == 0 {
        return Err(Error("--rx-ring: expected at least 1 packet".into()));
    }
    if c.passes == 0 {
        return Err(Error("--passes: expected at least 1".into()));
    }
    if !(c.train_interval > 0.0 && c.train_interval.is_finite()) {
        return Err(Error(format!("--train-interval: expected seconds > 0, found '{}'", c.train_interval)));
    }
    let (all_rules, rules_format) = load_rules(c.rules.as_deref())?;
    let counted = inputs::PacketSource::count(c.trace.as_deref(), c.in_port, HOLD_PACKETS)?;
    let (trace, packets, capture) = (Trace { source: counted.source, share: None }, counted.packets, counted.capture);
    if packets == 0 {
        return Err(Error(format!("{}: no packets", c.trace_name())));
    }
    let mut updates = match &c.updates {
        Some(s) => parse_updates(s)?,
        None => Vec::new(),
    };
    let mut order: Vec<usize> = (0..all_rules.len()).collect();
    Rng::fork(c.seed, STREAM_HELD_OUT).shuffle(&mut order);
    let mut held: HashSet<usize> = HashSet::new();
    let mut next = 0;
    for u in updates.iter_mut().filter(|u| u.op == UpdateOp::Add) {
        if next + u.n > order.len() {
            return Err(Error(format!("--updates: cannot hold out {} more rules of {}", u.n, all_rules.len())));
        }
        for &i in &order[next..next + u.n] {
            held.insert(i);
            u.rules.push(all_rules[i].clone());
        }
        next += u.n;
    }
    let initial: Vec<Rule> =
        all_rules.iter().enumerate().filter(|(i, _)| !held.contains(i)).map(|(_, r)| r.clone()).collect();
    // The table along the schedule: a deletion of more rules than it holds then is an error,
    // not a report of rules deleted that never were.
    let mut size = initial.len();
    for u in &updates {
        match u.op {
            UpdateOp::Add => size += u.n,
            UpdateOp::Del if u.n > size => {
                return Err(Error(format!(
                    "--updates: 'del:{}@{}s' deletes {} rules, but the table holds {size} then ({} rules, {} held out for later adds)",
                    u.n,
                    u.at_ns as f64 / 1e9,
                    u.n,
                    all_rules.len(),
                    all_rules.len() - initial.len()
                )))
            }
            UpdateOp::Del => size -= u.n,
        }
    }
    let wanted = c.verify.unwrap_or(if all_rules.len() > 100_000 { 2_000 } else { 10_000 });
    let samples = sample_positions(packets, wanted, &mut Rng::fork(c.seed, STREAM_VERIFY));
    let attack = prepare_attack(c, wanted)?;
    Ok(Prepared {
        all_rules,
        rules_format,
        trace,
        packets,
        capture,
        updates,
        initial,
        n_verify: samples.len(),
        samples,
        attack,
    })
}

/// The attack of a mixed replay (`attack`, `attack_rate`: both or neither), its packets
/// counted and `wanted` of its positions sampled for verification.
fn prepare_attack(c: &ReplayConfig, wanted: usize) -> Result<Option<AttackTrace>, Error> {
    let (path, rate) = match (&c.attack, c.attack_rate) {
        (None, None) => return Ok(None),
        (Some(path), Some(rate)) => (path, rate),
        (Some(_), None) => return Err(Error("--attack: expected --attack-rate PPS too".into())),
        (None, Some(_)) => return Err(Error("--attack-rate: the rate of an attack; expected --attack FILE".into())),
    };
    if !(rate > 0.0 && rate.is_finite()) {
        return Err(Error(format!("--attack-rate: expected packets per second > 0, found '{rate}'")));
    }
    if c.pmds > 1 {
        return Err(Error("--attack: mixed replay runs on one PMD; --pmds is not used with it".into()));
    }
    let counted = inputs::PacketSource::count(Some(path), c.in_port, HOLD_PACKETS)?;
    if counted.packets == 0 {
        return Err(Error(format!("{}: no packets", path.display())));
    }
    let samples = sample_positions(counted.packets, wanted, &mut Rng::fork(c.seed, STREAM_ATTACK_VERIFY));
    Ok(Some(AttackTrace {
        trace: Trace { source: counted.source, share: None },
        packets: counted.packets,
        rate,
        samples,
    }))
}

/// The datapath settings of the options.
fn dp_config(c: &ReplayConfig) -> (DatapathConfig, OrigConfig) {
    let dp = DatapathConfig {
        emc: c.emc,
        emc_insert_prob: c.emc_prob,
        clock: Clock::Measured,
        seed: c.seed,
        wire_keys: true,
    };
    let orig = OrigConfig {
        cd: c.cd,
        flow_limit: c.flow_limit,
        idle_ns: (c.idle * 1e9) as u64,
        revalidator: c.revalidator,
        mask_limit: c.mask_limit.map(|masks| MaskLimit { masks, eviction: c.mask_eviction }),
        mfcguard: c.mfcguard.map(|s| (s * 1e9) as u64),
        ..OrigConfig::default()
    };
    (dp, orig)
}

/// Builds a design over the initial rules (with flow prediction when given: ORIG only).
pub fn build(
    c: &ReplayConfig,
    design: DesignKind,
    rules: &[Rule],
    pred: Option<&Prediction>,
) -> Result<Box<dyn Design>, Error> {
    build_on(c, design, rules, pred, None)
}

/// [`build`], ORIG and CCACHE over `table` when given (shared with other PMDs; `rules` are
/// then only CFLOWS').
fn build_on(
    c: &ReplayConfig,
    design: DesignKind,
    rules: &[Rule],
    pred: Option<&Prediction>,
    table: Option<&OfprotoTable>,
) -> Result<Box<dyn Design>, Error> {
    let (cfg, orig) = dp_config(c);
    if let Some(t) = table {
        let cc = ccache_config(c);
        match (design, pred) {
            (DesignKind::Orig, None) => return Ok(Box::new(Orig::with_table(t.clone(), cfg, orig))),
            (DesignKind::Ccache, None) => return Ok(Box::new(Ccache::with_table(t.clone(), cfg, orig, cc))),
            _ => {}
        }
    }
    Ok(match (design, pred) {
        (DesignKind::Orig, None) => Box::new(Orig::new(rules, cfg, orig)?),
        (DesignKind::Orig, Some(pr)) => {
            let mut d = Orig::new(rules, cfg, orig)?;
            d.set_predictor(Some(pr.predictor()));
            Box::new(d)
        }
        (_, Some(pr)) => {
            return Err(Error(format!(
                "--predict {}: flow prediction installs megaflows through ORIG's slow path; expected --design orig, found '{}'",
                pr.mode,
                design.name()
            )))
        }
        (DesignKind::Ccache, None) => Box::new(Ccache::new(rules, cfg, orig, ccache_config(c))?),
        (DesignKind::Cflows, None) => Box::new(Cflows::new(rules, cfg, cflows_config(c))?),
        (DesignKind::Auto, None) => Box::new(Auto::new(rules, cfg.clock, cfg.wire_keys, auto_config(c), auto_builder(c))?),
    })
}

fn cflows_config(c: &ReplayConfig) -> CflowsConfig {
    CflowsConfig { policy: c.policy, retrain_threshold: c.retrain_threshold, classifier: c.classifier }
}

/// Auto's thresholds for a run: TupleMerge alone is no alternative when it is the classifier
/// already (`--classifier tm`).
pub fn auto_config(c: &ReplayConfig) -> AutoConfig {
    let tm = c.classifier == CflowsClassifier::TupleMerge;
    AutoConfig { cflows_tm_coverage: if tm { 0.0 } else { c.auto.cflows_tm_coverage }, ..c.auto }
}

/// How `--design auto` builds each fixed design: as `--design orig|ccache|cflows` would with the
/// same options (CFLOWS with TupleMerge alone as `--classifier tm` would).
pub fn auto_builder(c: &ReplayConfig) -> rqvs_datapath::auto::Builder {
    let (cfg, orig) = dp_config(c);
    let (cc, cf) = (ccache_config(c), cflows_config(c));
    let tm = CflowsConfig { classifier: CflowsClassifier::TupleMerge, ..cf };
    std::sync::Arc::new(
        move |to: rqvs_datapath::auto::Target,
              rules: &[Rule]|
              -> Result<Box<dyn Design + Send>, rqvs_classify::ClassifierError> {
            Ok(match to.kind {
                DesignKind::Orig => Box::new(Orig::new(rules, cfg, orig)?),
                DesignKind::Ccache => Box::new(Ccache::new(rules, cfg, orig, cc)?),
                DesignKind::Cflows => Box::new(Cflows::new(rules, cfg, if to.tm_alone { tm } else { cf })?),
                DesignKind::Auto => {
                    return Err(rqvs_classify::ClassifierError::Config("auto builds fixed designs only".into()))
                }
            })
        },
    )
}

fn ccache_config(c: &ReplayConfig) -> CcacheConfig {
    CcacheConfig {
        retrain_threshold: c.retrain_threshold,
        train_interval_ns: (c.train_interval * 1e9) as u64,
        ..CcacheConfig::default()
    }
}

/// The reference classifier of each rule-table version, built when first needed.
struct References<'a> {
    versions: &'a [Vec<Rule>],
    built: Vec<Option<Reference>>,
}

impl References<'_> {
    /// The reference's action for `key` under version `v`.
    fn action(&mut self, v: usize, key: &FlowKey) -> Result<DpAction, Error> {
        let r = match &mut self.built[v] {
            Some(r) => r,
            slot => slot.insert(Reference::build(&self.versions[v])?),
        };
        Ok(DpAction::of_rule(r.lookup_rule(&key.wire())))
    }

    /// Frees the references of versions before `v` (no later check needs them).
    fn drop_before(&mut self, v: usize) {
        self.built.iter_mut().take(v).for_each(|r| *r = None);
    }
}

/// The result of one design's run.
pub struct Run {
    pub design: DesignKind,
    pub build_ms: f64,
    pub c: Counters,
    pub series: Vec<Sample>,
    pub update_log: Vec<serde_json::Value>,
    pub verified: usize,
    pub mismatches: usize,
    /// Batches the PMD took (packets taken / batches: the average batch, as OVS's
    /// `pmd-perf-show` reports it; small at a constant rate the PMD keeps up with).
    pub batches: u64,
    /// Checked packets that got an older table's action (a stale megaflow while the revalidator
    /// thread was catching up) — allowed, and counted.
    pub stale_checks: usize,
    pub first_mismatch: Option<String>,
    pub mpps: f64,
    /// (Mpps, megaflow-cache share of PMD time) after the first pass over the trace.
    pub steady: Option<(f64, f64)>,
    pub wall_s: f64,
    pub reval_ms: f64,
    pub report: DesignReport,
    /// Constant-rate mode: offered packets and ring drops.
    pub rx: Option<RxStats>,
    /// Flow prediction: the mode and the predictor's counters at the end.
    pub prediction: Option<(&'static str, PredictStats)>,
    /// Scheduled updates the run ended before (in `update_log` with `"reached": false`).
    pub updates_not_reached: usize,
    /// `--design auto`: its switches and time per design.
    pub auto: Option<rqvs_datapath::AutoReport>,
    /// Mixed replay ([`crate::mixed`]): each stream's figures.
    pub attack: Option<AttackRun>,
    /// Constant rate: the benign packets' latency after the warm-up (arrival to the end of
    /// their batch, PMD time).
    pub latency: Option<Latency>,
}

/// A mixed replay's figures ([`crate::mixed`]).
#[derive(Clone, Copy, Debug)]
pub struct AttackRun {
    /// Attack packets per second of PMD time.
    pub rate: f64,
    /// Attack packets arrived by the end of the run; dropped by the attack's full ring; still
    /// waiting in it at the end (`offered` = taken + `ring_dropped` + `waiting`).
    pub offered: u64,
    pub ring_dropped: u64,
    pub waiting: u64,
    pub benign: StreamStats,
    pub attack: StreamStats,
    /// Verified attack packets (among the run's checks) and their mismatches.
    pub checks: usize,
    pub mismatches: usize,
}

impl Run {
    /// Packets the PMD took per batch, on average (ring drops are not taken).
    pub fn avg_batch(&self) -> f64 {
        (self.c.received as f64) / (self.batches.max(1) as f64)
    }
}

/// Ring drops in constant-rate mode (`--rate`).
#[derive(Clone, Copy, Debug, Default)]
pub struct RxStats {
    pub offered: u64,
    pub dropped: u64,
    /// Drops of packets after the first 5% (the warm-up, as in the paper).
    pub dropped_after_warmup: u64,
    pub offered_after_warmup: u64,
}

impl RxStats {
    /// Drop rate after the warm-up.
    pub fn drop_rate(&self) -> f64 {
        self.dropped_after_warmup as f64 / self.offered_after_warmup.max(1) as f64
    }
}

/// Replays the prepared trace through one design (module docs), without flow prediction.
pub fn run_design(c: &ReplayConfig, p: &Prepared, design: DesignKind) -> Result<Run, Error> {
    run_design_with(c, p, design, None)
}

/// The constant-rate receive ring (`rate`): which packets have arrived by the PMD clock, and
/// which the full ring dropped.
struct Admission {
    rate: f64,
    ring: u64,
    total: u64,
    warmup: u64,
    rx: RxStats,
}

impl Admission {
    /// Packets the PMD may take now, from sequence number `seq` (the PMD idles until the next
    /// one arrives — or until `other_ns`, another queue's next arrival, when that is earlier:
    /// then `Some(0)`); drops what overflowed the ring, advancing `seq` past it. `None` when the
    /// last packet was dropped.
    fn admit(&mut self, dp: &mut dyn Design, seq: &mut u64, other_ns: Option<u64>) -> Option<u64> {
        // Packet `i` arrives at i / rate seconds of PMD time.
        let mut arrived = ((dp.now_ns() as f64 * self.rate / 1e9) as u64 + 1).min(self.total);
        if arrived <= *seq {
            let at = self.arrival_ns(*seq);
            if let Some(other) = other_ns.filter(|&o| o < at) {
                dp.idle_until(other);
                return Some(0);
            }
            // Idle until packet `seq` arrives (by definition it has then; no float round trip).
            dp.idle_until(at);
            arrived = *seq + 1;
        }
        let backlog = arrived - *seq;
        if backlog > self.ring {
            // The ring holds `ring` packets; the rest are lost. (Counted as head drops: the
            // number is what a tail-dropping NIC loses; which packets differs.)
            let lost = backlog - self.ring;
            self.rx.dropped += lost;
            self.rx.dropped_after_warmup += (*seq + lost).saturating_sub((*seq).max(self.warmup));
            *seq += lost;
            if *seq >= self.total {
                return None;
            }
        }
        Some(arrived - *seq)
    }

    /// PMD time packet `seq` arrives, ns.
    fn arrival_ns(&self, seq: u64) -> u64 {
        (seq as f64 * 1e9 / self.rate).ceil() as u64
    }
}

/// Verification bookkeeping: the actions sampled packets got, per version of the visible rule
/// table, checked against the reference after the run. A sample is a slot: its position in
/// [`Prepared::samples`], whose key is kept when the packet is read.
struct Verifier {
    keys: Vec<FlowKey>,
    recorded: Vec<bool>,
    /// (oldest version the action may come from, version, slot, action)
    checks: Vec<(usize, usize, usize, DpAction)>,
    versions: Vec<Vec<Rule>>,
    /// The visible epoch of each version, for the oldest version a packet may see.
    version_epochs: Vec<u64>,
}

impl Verifier {
    fn new(p: &Prepared, epoch: u64) -> Verifier {
        let slots = p.samples.len() + p.attack.as_ref().map_or(0, |a| a.samples.len());
        Verifier {
            keys: vec![FlowKey::default(); slots],
            recorded: vec![false; slots],
            checks: Vec::with_capacity(p.n_verify * (p.updates.len() + 1)),
            versions: vec![p.initial.clone()],
            version_epochs: vec![epoch],
        }
    }

    /// The versions a batch run with `oldest_epoch` pending may get actions from.
    fn window(&self, oldest_epoch: u64) -> (usize, usize) {
        let v = self.versions.len() - 1;
        (self.version_epochs.partition_point(|&e| e <= oldest_epoch).saturating_sub(1).min(v), v)
    }

    /// A fast-path action of the packet of sample `slot` (if sampled).
    fn fast_path(&mut self, (lo, v): (usize, usize), slot: Option<usize>, a: DpAction) {
        if let Some(q) = slot {
            if !self.recorded[q] && !matches!(a, DpAction::Pending | DpAction::Lost) {
                // Checked within a window: checked again once the window closes.
                self.recorded[q] = lo == v;
                self.checks.push((lo, v, q, a));
            }
        }
    }

    /// Records what one iteration of the PMD loop gave the batch whose first packet is
    /// `seq0` and whose sample slots are `slots`; `slot_of` names the slot of an upcall from an
    /// earlier batch.
    fn batch(&mut self, o: &BatchOutcome, seq0: u64, slots: &[Option<usize>], slot_of: impl Fn(u64) -> Option<usize>) {
        let (lo, v) = self.window(o.window.oldest);
        for (i, a) in o.actions.iter().enumerate() {
            self.fast_path((lo, v), slots[i], *a);
        }
        for &(s, a) in o.upcalls {
            let slot = match s.checked_sub(seq0) {
                Some(i) if i < slots.len() as u64 => slots[i as usize],
                _ => slot_of(s),
            };
            self.handled(v, slot, a);
        }
    }

    /// The handler's action (classified with the current table, version `v`).
    fn handled(&mut self, v: usize, slot: Option<usize>, a: DpAction) {
        if let Some(q) = slot {
            if !self.recorded[q] {
                self.recorded[q] = true;
                self.checks.push((v, v, q, a));
            }
        }
    }

    /// The visible table changed to `table` at `epoch`.
    fn new_version(&mut self, table: Vec<Rule>, epoch: u64) {
        self.versions.push(table);
        self.version_epochs.push(epoch);
        self.recorded.iter_mut().for_each(|r| *r = false);
    }

    /// Compares every recorded action with the reference of its version (or of any version in
    /// its window).
    fn finish(mut self, p: &Prepared) -> Result<Checked, Error> {
        let benign = p.samples.len();
        let (mut mismatches, mut attack_mismatches, mut attack_checks) = (0usize, 0usize, 0usize);
        let mut windowed_checks = 0usize;
        let mut first_mismatch = None;
        let mut references =
            References { versions: &self.versions, built: (0..self.versions.len()).map(|_| None).collect() };
        self.checks.sort_by_key(|c| c.1);
        // The oldest version any later check may need: references older than it are dropped (one
        // reference of a 500K-rule table is large; a run may have many versions).
        let mut need_from = vec![usize::MAX; self.checks.len() + 1];
        for i in (0..self.checks.len()).rev() {
            need_from[i] = need_from[i + 1].min(self.checks[i].0);
        }
        for (i, &(lo, v, q, a)) in self.checks.iter().enumerate() {
            references.drop_before(need_from[i]);
            attack_checks += usize::from(q >= benign);
            let key = &self.keys[q];
            let want = references.action(v, key)?;
            if want == a {
                continue;
            }
            let mut older = false;
            for w in lo..v {
                older |= references.action(w, key)? == a;
            }
            if older {
                windowed_checks += 1;
            } else {
                mismatches += 1;
                let packet = match (q.checked_sub(benign), &p.attack) {
                    (Some(i), Some(att)) => {
                        attack_mismatches += 1;
                        format!("attack packet {}", att.samples[i])
                    }
                    _ => format!("packet {}", p.samples[q]),
                };
                first_mismatch.get_or_insert(format!("{packet}: datapath {a:?}, reference {want:?}"));
            }
        }
        Ok(Checked {
            checks: self.checks.len(),
            mismatches,
            windowed_checks,
            first_mismatch,
            attack_checks,
            attack_mismatches,
        })
    }
}

/// What [`Verifier::finish`] found.
struct Checked {
    checks: usize,
    /// Of every stream (the attack's included).
    mismatches: usize,
    windowed_checks: usize,
    first_mismatch: Option<String>,
    attack_checks: usize,
    attack_mismatches: usize,
}

/// The packets of a run as the PMD takes them: pass after pass over the trace (or the attack),
/// each batch with the verification slots of its packets.
struct Feed<'a> {
    trace: &'a Trace,
    /// Packets in one pass.
    packets: u64,
    /// Sampled positions of a pass, ascending; their slots start at `base`.
    samples: &'a [u64],
    base: usize,
    /// `the trace`, `the attack` (in messages).
    what: &'static str,
    keys: TraceKeys,
    /// The pass `keys` reads and how far into it it is.
    pass: u64,
    at: u64,
    /// The next sample of this pass.
    next_sample: usize,
    batch: Vec<FlowKey>,
    slots: Vec<Option<usize>>,
}

impl<'a> Feed<'a> {
    fn new(
        trace: &'a Trace,
        packets: u64,
        samples: &'a [u64],
        base: usize,
        what: &'static str,
    ) -> Result<Feed<'a>, Error> {
        Ok(Feed {
            trace,
            packets,
            samples,
            base,
            what,
            keys: trace.open()?,
            pass: 0,
            at: 0,
            next_sample: 0,
            batch: Vec::with_capacity(BATCH),
            slots: Vec::with_capacity(BATCH),
        })
    }

    /// The next key of the stream, at position `self.at` of the pass, and its sample slot.
    fn read(&mut self, verifier: &mut Verifier) -> Result<(FlowKey, Option<usize>), Error> {
        let Some(key) = self.keys.next_key()? else {
            return Err(Error(format!(
                "{} ended after {} of its {} packets in pass {}: it changed while being replayed",
                self.what,
                self.at,
                self.packets,
                self.pass + 1
            )));
        };
        let slot = (self.samples.get(self.next_sample) == Some(&self.at)).then(|| {
            self.next_sample += 1;
            let slot = self.base + self.next_sample - 1;
            verifier.keys[slot] = key;
            slot
        });
        self.at += 1;
        Ok((key, slot))
    }

    /// Reads the `n` packets from sequence number `seq` into the batch (skipping what a full
    /// ring dropped before it, starting a new pass at the end of one).
    fn fill(&mut self, seq: u64, n: usize, verifier: &mut Verifier) -> Result<(), Error> {
        let len = self.packets;
        let (pass, pos) = (seq / len, seq % len);
        if pass != self.pass {
            self.keys = self.trace.open()?;
            (self.pass, self.at, self.next_sample) = (pass, 0, 0);
        }
        while self.at < pos {
            self.read(verifier)?;
        }
        self.batch.clear();
        self.slots.clear();
        for _ in 0..n {
            let (key, slot) = self.read(verifier)?;
            self.batch.push(key);
            self.slots.push(slot);
        }
        Ok(())
    }

    /// The sample slot of the packet with sequence number `seq` (an upcall's).
    fn slot_of(&self, seq: u64) -> Option<usize> {
        self.samples.binary_search(&(seq % self.packets)).ok().map(|i| self.base + i)
    }
}

/// The timed rule updates of a run and their log.
struct Updates<'a> {
    pending: std::iter::Peekable<std::slice::Iter<'a, Update>>,
    /// The rule table as the updates leave it (visible or staged).
    table: Vec<Rule>,
    rng: Rng,
    log: Vec<serde_json::Value>,
    /// Updates not yet visible: (index in `log`, call time, rule ids added).
    waiting: Vec<(usize, std::time::Instant, Vec<RuleId>)>,
    /// Time spent in the update calls.
    call_ms: f64,
    wall: std::time::Instant,
}

impl Updates<'_> {
    /// The run ended at PMD time `end_ns`: every update still pending goes into the log as not
    /// reached. Returns how many.
    fn not_reached(&mut self, end_ns: u64) -> usize {
        let mut n = 0;
        for u in self.pending.by_ref() {
            n += 1;
            self.log.push(serde_json::json!({
                "op": if u.op == UpdateOp::Add { "add" } else { "del" },
                "rules": u.n, "at_s": u.at_ns as f64 / 1e9, "reached": false,
                "run_ended_s": end_ns as f64 / 1e9,
            }));
        }
        n
    }

    /// Applies every update due at PMD time `now`.
    fn apply_due(&mut self, dp: &mut dyn Design, now: u64) -> Result<(), Error> {
        while let Some(u) = self.pending.next_if(|u| u.at_ns <= now) {
            let t = std::time::Instant::now();
            let deleted = match u.op {
                UpdateOp::Add => {
                    self.table.extend(u.rules.iter().cloned());
                    dp.add_rules(u.rules.clone())?
                }
                UpdateOp::Del => {
                    let mut ids: Vec<RuleId> = self.table.iter().map(|r| r.id).collect();
                    self.rng.shuffle(&mut ids);
                    ids.truncate(u.n);
                    let gone: HashSet<RuleId> = ids.iter().copied().collect();
                    self.table.retain(|r| !gone.contains(&r.id));
                    dp.remove_rules(&ids)
                }
            };
            let ms = t.elapsed().as_secs_f64() * 1e3;
            self.call_ms += ms;
            let threaded = dp.oldest_epoch() != dp.visible_epoch();
            self.log.push(serde_json::json!({
                "op": if u.op == UpdateOp::Add { "add" } else { "del" },
                "rules": u.n, "at_s": now as f64 / 1e9, "reached": true, "megaflows_deleted": deleted, "update_ms": ms,
                "visible_ms": serde_json::Value::Null,
                // Revalidator thread: deletions and their latency arrive later (filled in then).
                "epoch": dp.visible_epoch(),
                "called_ms": (t - self.wall).as_secs_f64() * 1e3,
                "revalidated_ms": if threaded { serde_json::Value::Null } else { serde_json::json!(ms) },
            }));
            if u.op == UpdateOp::Add {
                self.waiting.push((self.log.len() - 1, t, u.rules.iter().map(|r| r.id).collect()));
            } else {
                // Removals take effect in the call, in every design.
                self.log.last_mut().expect("pushed")["visible_ms"] = serde_json::json!(ms);
            }
        }
        Ok(())
    }

    /// The revalidator thread finished `revalidations`: their latency and deletions.
    fn revalidated(&mut self, revalidations: &[rqvs_datapath::revalidator::Revalidation]) {
        for r in revalidations {
            for e in self.log.iter_mut().filter(|e| e["epoch"].as_u64().is_some_and(|x| x <= r.epoch)) {
                if e["revalidated_ms"].is_null() {
                    let t = e["called_ms"].as_f64().unwrap_or(0.0);
                    e["revalidated_ms"] = serde_json::json!(self.wall.elapsed().as_secs_f64() * 1e3 - t);
                    e["revalidator_thread_ms"] = serde_json::json!(r.thread_ms);
                }
            }
            if let Some(e) = self.log.iter_mut().rev().find(|e| e["epoch"].as_u64() == Some(r.epoch)) {
                e["megaflows_deleted"] = serde_json::json!(r.deleted);
            }
        }
    }

    /// The visible rules changed: updates whose rules are all visible now get their latency as
    /// the controller sees it (from the call until lookups reflect it). Returns the visible table.
    fn visible_table(&mut self, dp: &dyn Design) -> Vec<Rule> {
        let staged: HashSet<RuleId> = dp.staged_rules().into_iter().collect();
        let log = &mut self.log;
        self.waiting.retain(|(i, t, ids)| {
            let visible = ids.iter().all(|id| !staged.contains(id));
            if visible {
                log[*i]["visible_ms"] = serde_json::json!(t.elapsed().as_secs_f64() * 1e3);
            }
            !visible
        });
        self.table.iter().filter(|r| !staged.contains(&r.id)).cloned().collect()
    }
}

/// The 100 ms time series of a run.
struct Series {
    samples: Vec<Sample>,
    next_ns: u64,
    last: Counters,
    last_t: u64,
}

impl Series {
    const INTERVAL_NS: u64 = 100_000_000;

    fn sample(&mut self, dp: &dyn Design, now: u64) {
        while now >= self.next_ns {
            let cs = dp.counters();
            let dt = (now - self.last_t) as f64 / 1e9;
            self.samples.push(Sample {
                t_s: now as f64 / 1e9,
                mpps: (cs.received - self.last.received) as f64 / dt / 1e6,
                upcalls_per_s: (cs.upcall - self.last.upcall) as f64 / dt,
                deletions_per_s: (cs.deleted() - self.last.deleted()) as f64 / dt,
                lost: cs.lost - self.last.lost,
                megaflows: cs.megaflows,
                masks: cs.masks,
                coverage: coverage(&cs),
            });
            self.last = cs;
            self.last_t = now;
            self.next_ns = now - now % Self::INTERVAL_NS + Self::INTERVAL_NS;
        }
    }
}

/// Replays the prepared trace through one design, with flow prediction when given (ORIG): the
/// trace in batches through the PMD loop ([`Pmd::run_batch`]), with the receive ring, the
/// update schedule, the time series and the verification record around it.
pub fn run_design_with(
    c: &ReplayConfig,
    p: &Prepared,
    design: DesignKind,
    pred: Option<&Prediction>,
) -> Result<Run, Error> {
    run_design_progress(c, p, design, pred, &mut |_| {})
}

/// How far a run has come ([`run_design_progress`]).
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Packets the PMD took so far.
    pub packets: u64,
    /// PMD time so far, seconds.
    pub pmd_s: f64,
    /// Share of the run done, 0..1 (of `duration`, or of `passes` over the trace).
    pub fraction: f64,
}

/// [`run_design_with`], telling `progress` how far the run is about every 2¹⁶ packets (a long
/// `--duration` or many `--passes` show it).
pub fn run_design_progress(
    c: &ReplayConfig,
    p: &Prepared,
    design: DesignKind,
    pred: Option<&Prediction>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Run, Error> {
    run_design_on(c, p, design, pred, None, progress)
}

fn run_design_on(
    c: &ReplayConfig,
    p: &Prepared,
    design: DesignKind,
    pred: Option<&Prediction>,
    table: Option<&OfprotoTable>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Run, Error> {
    let build_start = std::time::Instant::now();
    let mut built = build_on(c, design, &p.initial, pred, table)?;
    let dp: &mut dyn Design = built.as_mut();
    let build_ms = build_start.elapsed().as_secs_f64() * 1e3;

    let mut verifier = Verifier::new(p, dp.visible_epoch());
    let mut feed = Feed::new(&p.trace, p.packets, &p.samples, 0, "the trace")?;
    let mut epoch = dp.visible_epoch();
    let wall = std::time::Instant::now();
    let mut updates = Updates {
        pending: p.updates.iter().peekable(),
        table: p.initial.clone(),
        rng: Rng::fork(c.seed, STREAM_DELETIONS),
        log: Vec::new(),
        waiting: Vec::new(),
        call_ms: 0.0,
        wall,
    };
    let mut series = Series { samples: Vec::new(), next_ns: Series::INTERVAL_NS, last: Counters::default(), last_t: 0 };
    let duration_ns = c.duration.map(|s| (s * 1e9) as u64);
    let len = p.packets;
    let total = len * u64::from(c.passes);
    let mut admission =
        c.rate.map(|rate| Admission { rate, ring: c.rx_ring, total, warmup: total / 20, rx: RxStats::default() });
    let mut pmd = Pmd::new();
    let mut seq: u64 = 0;
    // Counters at the end of the first pass: later passes meet a warm cache (steady state).
    let mut first_pass: Option<Counters> = None;
    let mut passes_done = 0u64;
    // Mixed replay: the attack's queue, its packets, and what each stream's batches cost.
    let mut attack = match &p.attack {
        Some(a) => Some((
            AttackQueue::new(a.rate, c.rx_ring),
            Feed::new(&a.trace, a.packets, &a.samples, p.samples.len(), "the attack")?,
        )),
        None => None,
    };
    let mut streams = attack.as_ref().map(|_| (StreamStats::default(), StreamStats::default(), dp.counters()));
    let mut latency = c.rate.map(|_| Latency::default());
    loop {
        // The attack's queue first: a batch of what it holds ([`crate::mixed`]).
        if let Some((queue, afeed)) = attack.as_mut() {
            let waiting = queue.waiting(dp.now_ns());
            if waiting > 0 {
                let aseq = queue.seq;
                let n = (BATCH as u64).min(afeed.packets - aseq % afeed.packets).min(waiting) as usize;
                afeed.fill(aseq, n, &mut verifier)?;
                let t0 = dp.now_ns();
                let o = pmd.run_batch(dp, &afeed.batch, ATTACK_SEQ + aseq);
                verifier.batch(&o, ATTACK_SEQ + aseq, &afeed.slots, |s| match s.checked_sub(ATTACK_SEQ) {
                    Some(a) => afeed.slot_of(a),
                    None => feed.slot_of(s),
                });
                updates.revalidated(o.revalidations);
                queue.seq += n as u64;
                if let Some((_, att, last)) = streams.as_mut() {
                    let now = dp.counters();
                    att.add_batch(last, &now, dp.now_ns() - t0);
                    *last = now;
                }
                after_batch(dp, &mut series, &mut updates, &mut verifier, &mut epoch)?;
            }
        }
        // Constant rate: packets that have arrived and are not yet taken (`None`: no limit).
        let avail = match admission.as_mut() {
            Some(adm) => {
                let other = attack.as_ref().map(|(q, _)| q.next_arrival_ns());
                match adm.admit(dp, &mut seq, other) {
                    Some(0) => continue,
                    Some(n) => Some(n),
                    None => break,
                }
            }
            None => None,
        };
        let pos = seq % len;
        let n = (BATCH as u64).min(len - pos);
        let n = avail.map_or(n, |a| n.min(a)) as usize;
        feed.fill(seq, n, &mut verifier)?;
        let t0 = dp.now_ns();
        let o = pmd.run_batch(dp, &feed.batch, seq);
        verifier.batch(&o, seq, &feed.slots, |s| match (s.checked_sub(ATTACK_SEQ), &attack) {
            (Some(a), Some((_, afeed))) => afeed.slot_of(a),
            _ => feed.slot_of(s),
        });
        updates.revalidated(o.revalidations);
        if let (Some(lat), Some(adm)) = (latency.as_mut(), admission.as_ref()) {
            // Arrival to the end of the batch, after the warm-up (as the drop rate).
            let end = dp.now_ns();
            for q in seq.max(adm.warmup)..seq + n as u64 {
                lat.record(end.saturating_sub(adm.arrival_ns(q)));
            }
        }
        if let Some((benign, _, last)) = streams.as_mut() {
            let now = dp.counters();
            benign.add_batch(last, &now, dp.now_ns() - t0);
            *last = now;
        }
        seq += n as u64;
        if seq / len > passes_done {
            passes_done = seq / len;
            first_pass.get_or_insert_with(|| dp.counters());
        }
        let now = after_batch(dp, &mut series, &mut updates, &mut verifier, &mut epoch)?;
        // A run ends at its duration or after its passes: updates scheduled later are reported
        // as not reached (`updates.not_reached`), never silently dropped nor waited for.
        let done = match duration_ns {
            Some(d) => now >= d,
            None => seq >= total,
        };
        if done {
            break;
        }
        if seq >> 16 != (seq - n as u64) >> 16 {
            let fraction = match duration_ns {
                Some(d) => now as f64 / d as f64,
                None => seq as f64 / total as f64,
            };
            progress(Progress { packets: seq, pmd_s: now as f64 / 1e9, fraction: fraction.min(1.0) });
        }
    }
    let updates_not_reached = updates.not_reached(dp.now_ns());
    let wall_s = wall.elapsed().as_secs_f64();
    let cs = dp.counters();
    if !cs.outcome_sum_ok() {
        return Err(Error(format!("internal error: counters do not sum to packets received: {cs:?}")));
    }
    let checked = verifier.finish(p)?;
    let attack = attack.zip(streams).zip(p.attack.as_ref()).map(|(((mut queue, _), (benign, att, _)), a)| AttackRun {
        rate: a.rate,
        // What arrived since the last batch is waiting in the ring or dropped by it.
        waiting: queue.waiting(dp.now_ns()),
        offered: queue.offered(dp.now_ns()),
        ring_dropped: queue.dropped,
        benign,
        attack: att,
        checks: checked.attack_checks,
        mismatches: checked.attack_mismatches,
    });
    let pmd_s = cs.pmd_ns as f64 / 1e9;
    let steady = first_pass.filter(|f| f.pmd_ns < cs.pmd_ns).map(|f| {
        let ns = cs.pmd_ns - f.pmd_ns;
        let pk = cs.received - f.received;
        (pk as f64 / (ns as f64 / 1e9) / 1e6, (cs.dpcls_ns - f.dpcls_ns) as f64 / ns as f64)
    });
    let prediction = pred.zip(dp.prediction_stats()).map(|(pr, s)| (pr.mode, s));
    Ok(Run {
        design,
        build_ms,
        c: cs,
        series: series.samples,
        update_log: updates.log,
        verified: checked.checks,
        mismatches: checked.mismatches,
        stale_checks: checked.windowed_checks,
        batches: pmd.batches,
        first_mismatch: checked.first_mismatch,
        mpps: cs.received as f64 / pmd_s.max(1e-12) / 1e6,
        steady,
        wall_s,
        reval_ms: updates.call_ms,
        report: dp.report(),
        rx: admission.map(|a| RxStats { offered: total, offered_after_warmup: total - a.warmup, ..a.rx }),
        prediction,
        updates_not_reached,
        auto: dp.auto_report(),
        attack,
        latency,
    })
}

/// After each batch: the time series, the updates due, a new version of the visible table.
/// Returns the PMD clock.
fn after_batch(
    dp: &mut dyn Design,
    series: &mut Series,
    updates: &mut Updates,
    verifier: &mut Verifier,
    epoch: &mut u64,
) -> Result<u64, Error> {
    let now = dp.now_ns();
    series.sample(dp, now);
    updates.apply_due(dp, now)?;
    if dp.visible_epoch() != *epoch {
        *epoch = dp.visible_epoch();
        verifier.new_version(updates.visible_table(dp), *epoch);
    }
    Ok(now)
}

/// Coverage from the gauges: model entries over rules (CFLOWS) or megaflows (CCACHE).
pub fn coverage(c: &Counters) -> f64 {
    let total = if c.rules > 0 { c.rules } else { c.megaflows };
    if total == 0 {
        0.0
    } else {
        c.model_entries as f64 / total as f64
    }
}

/// What [`run_pmds`] measured.
pub struct PmdRuns {
    /// One run per PMD thread, over its share of the trace.
    pub runs: Vec<Run>,
    /// All PMDs together: packets, and packets per second of the longest PMD time (the rate at
    /// which the PMDs, each on its own core, took the whole trace).
    pub packets: u64,
    pub mpps: f64,
}

impl PmdRuns {
    pub fn mismatches(&self) -> usize {
        self.runs.iter().map(|r| r.mismatches).sum()
    }
}

/// The paper's Fig. 10 offline: the trace split over `c.pmds` PMD threads by flow hash (every
/// packet of a flow on one PMD, in trace order, as RSS spreads flows over receive queues), each
/// thread its own design — its EMC, megaflow cache and models — ORIG and CCACHE over one
/// shared OpenFlow table, each verified like a single run. Timed rule updates and the constant
/// rate are not split yet (an error says so).
pub fn run_pmds(c: &ReplayConfig, p: &Prepared, design: DesignKind) -> Result<PmdRuns, Error> {
    let n = c.pmds;
    if n == 0 {
        return Err(Error("--pmds: expected at least 1".into()));
    }
    let mut shares: Vec<Prepared> = (0..n)
        .map(|i| Prepared {
            all_rules: Vec::new(),
            rules_format: p.rules_format,
            trace: Trace { share: Some((i, n)), ..p.trace.clone() },
            packets: 0,
            capture: p.capture,
            // Every PMD applies the whole update stream on its own clock.
            updates: p.updates.clone(),
            initial: p.initial.clone(),
            samples: Vec::new(),
            n_verify: 0,
            attack: None,
        })
        .collect();
    // One pass over the trace: each PMD's packet count, and the trace's sample in each PMD's
    // positions.
    let mut keys = p.trace.open()?;
    let (mut at, mut next_sample) = (0u64, 0usize);
    while let Some(k) = keys.next_key()? {
        let share = &mut shares[rqvs_datapath::flow_hash(&k.wire()) as usize % n];
        if p.samples.get(next_sample) == Some(&at) {
            share.samples.push(share.packets);
            share.n_verify += 1;
            next_sample += 1;
        }
        share.packets += 1;
        at += 1;
    }
    if let Some(i) = shares.iter().position(|s| s.packets == 0) {
        return Err(Error(format!("--pmds {n}: PMD {i} gets no packet of this trace (too few flows)")));
    }
    // One OpenFlow table for all PMDs (ORIG, CCACHE) — unless a timed update stream runs: each
    // PMD then applies it on its own clock to a table of its own (a replica), since committing
    // one stream N times to one table would apply each change N times.
    let table = if p.updates.is_empty() { Some(OfprotoTable::build(&p.initial)?) } else { None };
    let runs = std::thread::scope(|s| {
        let handles: Vec<_> = shares
            .iter()
            .map(|share| {
                // A constant offered rate is split over the PMDs as the trace is.
                let rate = c.rate.map(|r| r * share.packets as f64 / p.packets as f64);
                let cfg = ReplayConfig { rate, ..c.clone() };
                let table = table.as_ref();
                s.spawn(move || run_design_on(&cfg, share, design, None, table, &mut |_| {}))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a PMD thread panicked")).collect::<Result<Vec<Run>, Error>>()
    })?;
    let packets: u64 = runs.iter().map(|r| r.c.received).sum();
    let longest = runs.iter().map(|r| r.c.pmd_ns).max().unwrap_or(0) as f64 / 1e9;
    Ok(PmdRuns { packets, mpps: packets as f64 / longest.max(1e-12) / 1e6, runs })
}

/// What [`rate_search`] found.
pub struct RateSearch {
    /// The run at full speed (no rate limit).
    pub free: Run,
    /// The highest probe with < 1% drops after the warm-up (rate, run) — or, when even the
    /// lowest probe dropped more (`passed` false), that probe.
    pub probe: (f64, Run),
    pub passed: bool,
    /// The best probe is within 5% of the search's upper bound (1.5× the unconstrained rate):
    /// nothing dropped up to there, so the run is too short for the receive ring to fill (a
    /// longer `--duration` or more `--passes` gives a true limit). The rate is then a lower
    /// bound of the design's, not its limit.
    pub at_bound: bool,
}

/// The highest offered rate with < 1% drops after the warm-up, by bisection between 1/100 and
/// 1.5× the rate the design sustains unconstrained (to within 5%); each probe replays the trace
/// through a freshly built design and is reported to `on_probe`. A probe with mismatches is an
/// error.
pub fn rate_search(
    c: &ReplayConfig,
    p: &Prepared,
    design: DesignKind,
    pred: Option<&Prediction>,
    on_probe: &mut dyn FnMut(f64, &Run),
) -> Result<RateSearch, Error> {
    let free = run_design_with(c, p, design, pred)?;
    let mut probe = |rate: f64| -> Result<Run, Error> {
        let r = run_design_with(&ReplayConfig { rate: Some(rate), ..c.clone() }, p, design, pred)?;
        on_probe(rate, &r);
        if r.mismatches > 0 {
            return Err(Error(format!("{} packets got an action other than the reference's", r.mismatches)));
        }
        Ok(r)
    };
    let bound = free.mpps * 1e6 * 1.5;
    let (mut lo, mut hi) = (free.mpps * 1e6 / 100.0, bound);
    let ok = |r: &Run| r.rx.is_some_and(|x| x.drop_rate() < 0.01);
    let mut best = (lo, probe(lo)?);
    if !ok(&best.1) {
        return Ok(RateSearch { free, probe: best, passed: false, at_bound: false });
    }
    while hi / lo > 1.05 {
        let mid = (lo * hi).sqrt();
        let r = probe(mid)?;
        if ok(&r) {
            lo = mid;
            best = (mid, r);
        } else {
            hi = mid;
        }
    }
    let at_bound = best.0 * 1.05 >= bound;
    Ok(RateSearch { free, probe: best, passed: true, at_bound })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_specs() {
        let u = parse_updates("del:3@500ms, add:60@7s").unwrap();
        assert_eq!((u[0].op, u[0].n, u[0].at_ns), (UpdateOp::Del, 3, 500_000_000));
        assert_eq!((u[1].op, u[1].n, u[1].at_ns), (UpdateOp::Add, 60, 7_000_000_000));
        assert!(parse_updates("mod:1@1s").is_err());
        assert!(parse_updates("add:x@1s").is_err());
        assert!(parse_updates("add:1@-1s").is_err());
    }

    /// The rules held out for `add:` and the packets verified are a function of the seed alone,
    /// pinned (the rules `del:` removes come from the third stream, checked through the CLI's
    /// determinism test).
    #[test]
    fn held_out_rules_and_verified_packets_are_pinned() {
        let c = ReplayConfig { updates: Some("add:4@1s".into()), verify: Some(5), seed: 5, ..ReplayConfig::default() };
        let p = prepare(&c).unwrap();
        let held: Vec<u32> = p.updates[0].rules.iter().map(|r| r.id.0).collect();
        let verified: Vec<u64> = p.samples.clone();
        assert_eq!((held.as_slice(), verified.as_slice()), (&PIN_HELD[..], &PIN_VERIFIED[..]));
        let other = prepare(&ReplayConfig { seed: 6, ..c }).unwrap();
        assert_ne!(other.updates[0].rules.iter().map(|r| r.id.0).collect::<Vec<_>>(), held);
    }
    const PIN_HELD: [u32; 4] = [768, 241, 633, 881];
    const PIN_VERIFIED: [u64; 5] = [959, 1401, 1404, 2778, 2800];
}
