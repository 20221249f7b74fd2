//! `rqvs replay`: a trace through a datapath design, as fast as the PMD takes it.
//!
//! ```text
//! rqvs replay --rules FILE --trace FILE --design orig|ccache|cflows [--cd] [--emc-prob P | --no-emc]
//!             [--policy instant|delayed] [--duration S] [--updates SPEC] [--verify N]
//!             [--predict off|online|oracle [--coflow-truth FILE]] [--json OUT] [--plot OUT.svg]
//! ```
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
//! - **Updates** (`--updates add:60@7s,del:10@9s`): `add:N@Ts` holds N rules out of the initial
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

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rqvs_classify::nuevomatch::live::Policy;
use rqvs_classify::Reference;
use rqvs_datapath::ccache::CcacheConfig;
use rqvs_datapath::predict::{PredictConfig, PredictStats, Predictor};
use rqvs_datapath::revalidator::RevalidatorMode;
use rqvs_datapath::{
    assign_rule_outputs, Ccache, Cflows, CflowsConfig, Clock, Counters, DatapathConfig, Design, DpAction, Orig,
    OrigConfig, BATCH,
};
use rqvs_flow::formats::{self, RuleFormat};
use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::{inputs, Failure};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Datapath design.
    #[arg(long, default_value = "orig", value_parser = DESIGNS)]
    pub design: String,
    /// Flow prediction (ORIG): off; online (learns from upcalls, any trace); oracle (the coflow
    /// ground truth of --coflow-truth). Counters: predicted, used, wasted. `rqvs coflows` is the
    /// coflow experiment with arrival times and latencies; this is the same predictor on a replay.
    #[arg(long, default_value = "off", value_parser = ["off", "online", "oracle"])]
    pub predict: String,
    /// --predict oracle: the coflow ground truth (`rqvs gen coflows --truth-out`) of --trace.
    #[arg(long)]
    pub coflow_truth: Option<PathBuf>,
    #[command(flatten)]
    pub predictor: crate::coflows::PredictorArgs,
    #[command(flatten)]
    pub common: Common,
}

/// The designs `--design` / `--designs` accept.
pub const DESIGNS: [&str; 3] = ["orig", "ccache", "cflows"];

/// Settings shared by `rqvs replay` and `rqvs compare`.
#[derive(clap::Args, Debug, Clone)]
pub struct Common {
    /// Rule file: ClassBench or ovs-ofctl flows, plain or .xz.
    #[arg(long)]
    pub rules: PathBuf,
    /// ClassBench trace or pcap/pcapng capture, plain or .xz.
    #[arg(long)]
    pub trace: PathBuf,
    /// Enable the cuckoo distributor.
    #[arg(long)]
    pub cd: bool,
    /// EMC insertion probability (OVS default 0.01; the paper used 0.2).
    #[arg(long, default_value_t = 0.01)]
    pub emc_prob: f64,
    /// Disable the EMC.
    #[arg(long)]
    pub no_emc: bool,
    /// Replay the trace in a loop until this many seconds of PMD time (default: one pass).
    #[arg(long, conflicts_with = "passes")]
    pub duration: Option<f64>,
    /// Replay the trace this many times (default 1). With 2 or more, the report adds the
    /// throughput after the first pass: the steady state, caches warm and models trained.
    #[arg(long, default_value_t = 1)]
    pub passes: u32,
    /// Constant-rate mode: packets are offered at this many per second of PMD time into a
    /// receive ring of `--rx-ring` packets; what arrives while the ring is full is dropped and
    /// counted (the paper's constant-TX method; the first 5% of packets are warm-up).
    #[arg(long, conflicts_with = "duration")]
    pub rate: Option<f64>,
    /// Receive-ring size for `--rate`, packets (a DPDK ring of 4096 descriptors).
    #[arg(long, default_value_t = 4096)]
    pub rx_ring: u64,
    /// Search for the highest `--rate` with < 1% drops after the warm-up (bisection; each probe
    /// replays the trace through a freshly built design).
    #[arg(long, conflicts_with_all = ["duration", "rate"])]
    pub rate_search: bool,
    /// Rule updates, e.g. 'add:60@7s' or 'add:60@7s,del:10@9s'.
    #[arg(long)]
    pub updates: Option<String>,
    /// Trace positions whose actions are checked against the reference (default 10,000; 2,000
    /// above 100,000 rules).
    #[arg(long)]
    pub verify: Option<usize>,
    /// Seed for held-out rules, verification sample and EMC insertion draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Megaflow flow limit.
    #[arg(long, default_value_t = 200_000)]
    pub flow_limit: usize,
    /// ORIG/CCACHE: where megaflows are revalidated after rule changes — on a second thread
    /// while the PMD forwards (as OVS), or inline in the update call (deterministic).
    #[arg(long, default_value = "thread", value_parser = ["thread", "inline"])]
    pub revalidator: String,
    /// CFLOWS: when inserted rules become visible — at once, into the remainder (instant) or
    /// at the next model swap (delayed).
    #[arg(long, default_value = "instant", value_parser = ["instant", "delayed"])]
    pub policy: String,
    /// Retrain when what was added outside the model since the last one exceeds this share:
    /// CFLOWS, rules inserted into the remainder; CCACHE, megaflows installed in the megaflow cache.
    #[arg(long, default_value_t = 0.1)]
    pub retrain_threshold: f64,
    /// CCACHE: how often (seconds of PMD time) the manager checks whether to train a new model.
    #[arg(long, default_value_t = 0.01)]
    pub train_interval: f64,
    /// Idle expiry of megaflows, seconds of PMD time.
    #[arg(long, default_value_t = 10.0)]
    pub idle: f64,
    /// in_port given to trace packets.
    #[arg(long, default_value_t = 1)]
    pub in_port: u32,
    /// Write a JSON report here ('-' = stdout).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write an SVG plot of the time series here (compare: all designs in one plot).
    #[arg(long)]
    pub plot: Option<PathBuf>,
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
fn parse_updates(spec: &str) -> Result<Vec<Update>, Failure> {
    let mut out = Vec::new();
    for (i, part) in spec.split(',').enumerate() {
        let err =
            |what: &str| Failure(format!("--updates: item {} '{part}': expected {what} (e.g. 'add:60@7s')", i + 1));
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

/// Rules from a ClassBench file (with `output:(id+1)` actions) or an ofctl file.
fn load_rules(path: &Path) -> Result<(Vec<Rule>, &'static str), Failure> {
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

/// Flow prediction for the runs of a replay (module docs): a fresh predictor per run.
pub struct Prediction {
    pub mode: &'static str,
    cfg: PredictConfig,
    /// Oracle: base flow key → coupled associated flow keys, as the trace carries them.
    truth: Vec<(FlowKey, Vec<FlowKey>)>,
}

impl Prediction {
    /// `--predict` and its options, checked against the design and the trace; `None` for off.
    pub fn from_args(a: &Args, p: &Prepared) -> Result<Option<Prediction>, Failure> {
        let cfg = a.predictor.config()?;
        let mode = match a.predict.as_str() {
            "off" => {
                if a.coflow_truth.is_some() {
                    return Err(Failure("--coflow-truth: only --predict oracle uses a ground truth".into()));
                }
                return Ok(None);
            }
            "online" => "online",
            "oracle" => "oracle",
            other => return Err(Failure(format!("--predict: expected off, online or oracle, found '{other}'"))),
        };
        if a.design != "orig" {
            return Err(Failure(format!(
                "--predict {mode}: flow prediction installs megaflows through ORIG's slow path; expected --design orig, found '{}'",
                a.design
            )));
        }
        let truth = match (mode, &a.coflow_truth) {
            ("oracle", None) => {
                return Err(Failure(
                    "--predict oracle needs the coflow ground truth: --coflow-truth FILE (written by `rqvs gen coflows --truth-out`)".into(),
                ))
            }
            ("oracle", Some(path)) => truth_in_trace(path, &a.common.trace, &p.keys)?,
            (_, Some(_)) => return Err(Failure("--coflow-truth: only --predict oracle uses a ground truth".into())),
            (_, None) => Vec::new(),
        };
        Ok(Some(Prediction { mode, cfg, truth }))
    }

    fn predictor(&self) -> Predictor {
        match self.mode {
            "oracle" => crate::coflows::oracle_predictor(self.cfg.clone(), self.truth.clone()),
            _ => Predictor::online(self.cfg.clone()),
        }
    }
}

/// The oracle's table from a ground-truth file, its flows matched to the trace's keys by
/// 5-tuple (so in_port, MACs and the rest are the trace's). Every flow it names must be in the
/// trace.
fn truth_in_trace(path: &Path, trace: &Path, keys: &[FlowKey]) -> Result<Vec<(FlowKey, Vec<FlowKey>)>, Failure> {
    use rqvs_workload::coflow;
    let name = path.display().to_string();
    let text = rqvs_flow::io::read_text(path)?;
    let flows = coflow::parse_truth(&name, &text).map_err(Failure)?;
    let table = coflow::truth_oracle(&flows).map_err(|e| Failure(format!("{name}: {e}")))?;
    let five = |k: &FlowKey| (k.nw_src, k.nw_dst, k.nw_proto, k.tp_src, k.tp_dst);
    let mut in_trace: std::collections::HashMap<_, FlowKey> = std::collections::HashMap::new();
    for k in keys {
        in_trace.entry(five(k)).or_insert(*k);
    }
    let find = |k: &FlowKey| {
        in_trace.get(&five(k)).copied().ok_or_else(|| {
            Failure(format!(
                "{name}: flow {} {}:{} -> {}:{} is not in the trace {}: expected the ground truth written with this trace",
                k.nw_proto,
                rqvs_flow::key::fmt_ipv4(k.nw_src),
                k.tp_src,
                rqvs_flow::key::fmt_ipv4(k.nw_dst),
                k.tp_dst,
                trace.display()
            ))
        })
    };
    table
        .iter()
        .map(|(base, assoc)| Ok((find(base)?, assoc.iter().map(find).collect::<Result<Vec<_>, _>>()?)))
        .collect()
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

/// Everything a run needs, loaded once (shared by the designs `rqvs compare` runs).
pub struct Prepared {
    pub all_rules: Vec<Rule>,
    pub rules_format: &'static str,
    pub keys: Vec<FlowKey>,
    updates: Vec<Update>,
    pub initial: Vec<Rule>,
    /// Sampled trace positions.
    sampled: Vec<bool>,
    pub n_verify: usize,
}

pub fn prepare(c: &Common) -> Result<Prepared, Failure> {
    if !(0.0..=1.0).contains(&c.emc_prob) {
        return Err(Failure(format!("--emc-prob: expected a probability 0..1, found '{}'", c.emc_prob)));
    }
    if !(0.0..=1.0).contains(&c.retrain_threshold) {
        return Err(Failure(format!("--retrain-threshold: expected a share 0..1, found '{}'", c.retrain_threshold)));
    }
    if c.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
        return Err(Failure(format!("--rate: expected packets per second > 0, found '{}'", c.rate.unwrap_or(0.0))));
    }
    if c.rx_ring == 0 {
        return Err(Failure("--rx-ring: expected at least 1 packet".into()));
    }
    if c.passes == 0 {
        return Err(Failure("--passes: expected at least 1".into()));
    }
    if !(c.train_interval > 0.0 && c.train_interval.is_finite()) {
        return Err(Failure(format!("--train-interval: expected seconds > 0, found '{}'", c.train_interval)));
    }
    let (all_rules, rules_format) = load_rules(&c.rules)?;
    let packets = inputs::load_packets(Some(&c.trace), c.in_port)?;
    let keys: Vec<FlowKey> = packets.entries.iter().map(|e| e.key).collect();
    if keys.is_empty() {
        return Err(Failure(format!("{}: no packets", c.trace.display())));
    }
    let mut rng = StdRng::seed_from_u64(c.seed);
    let mut updates = match &c.updates {
        Some(s) => parse_updates(s)?,
        None => Vec::new(),
    };
    let mut order: Vec<usize> = (0..all_rules.len()).collect();
    order.shuffle(&mut rng);
    let mut held: HashSet<usize> = HashSet::new();
    let mut next = 0;
    for u in updates.iter_mut().filter(|u| u.op == UpdateOp::Add) {
        if next + u.n > order.len() {
            return Err(Failure(format!("--updates: cannot hold out {} more rules of {}", u.n, all_rules.len())));
        }
        for &i in &order[next..next + u.n] {
            held.insert(i);
            u.rules.push(all_rules[i].clone());
        }
        next += u.n;
    }
    let initial: Vec<Rule> =
        all_rules.iter().enumerate().filter(|(i, _)| !held.contains(i)).map(|(_, r)| r.clone()).collect();
    let n_verify = c.verify.unwrap_or(if all_rules.len() > 100_000 { 2_000 } else { 10_000 }).min(keys.len());
    let mut positions: Vec<usize> = (0..keys.len()).collect();
    positions.shuffle(&mut rng);
    let mut sampled = vec![false; keys.len()];
    for &p in &positions[..n_verify] {
        sampled[p] = true;
    }
    Ok(Prepared { all_rules, rules_format, keys, updates, initial, sampled, n_verify })
}

/// The datapath settings of the options.
fn dp_config(c: &Common) -> (DatapathConfig, OrigConfig) {
    let dp = DatapathConfig { emc: !c.no_emc, emc_insert_prob: c.emc_prob, clock: Clock::Measured, seed: c.seed };
    let orig = OrigConfig {
        cd: c.cd,
        flow_limit: c.flow_limit,
        idle_ns: (c.idle * 1e9) as u64,
        revalidator: if c.revalidator == "inline" { RevalidatorMode::Inline } else { RevalidatorMode::Thread },
        ..OrigConfig::default()
    };
    (dp, orig)
}

/// Builds a design over the initial rules.
fn build(c: &Common, design: &str, rules: &[Rule]) -> Result<Box<dyn Design>, Failure> {
    let (cfg, orig) = dp_config(c);
    Ok(match design {
        "orig" => Box::new(Orig::new(rules, cfg, orig)?),
        "ccache" => {
            let cc = CcacheConfig {
                retrain_threshold: c.retrain_threshold,
                train_interval_ns: (c.train_interval * 1e9) as u64,
                ..CcacheConfig::default()
            };
            Box::new(Ccache::new(rules, cfg, orig, cc)?)
        }
        "cflows" => {
            let policy = if c.policy == "delayed" { Policy::Delayed } else { Policy::Instant };
            Box::new(Cflows::new(rules, cfg, CflowsConfig { policy, retrain_threshold: c.retrain_threshold })?)
        }
        other => return Err(Failure(format!("--design: unknown design '{other}'; expected one of {DESIGNS:?}"))),
    })
}

/// The reference classifier of each rule-table version, built when first needed.
struct References<'a> {
    versions: &'a [Vec<Rule>],
    built: Vec<Option<Reference>>,
}

impl References<'_> {
    /// The reference's action for `key` under version `v`.
    fn action(&mut self, v: usize, key: &FlowKey) -> Result<DpAction, Failure> {
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
    pub design: String,
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
    pub report: Vec<(&'static str, f64)>,
    pub cd_intervals: Option<(u64, u64)>,
    /// Constant-rate mode: offered packets and ring drops.
    pub rx: Option<RxStats>,
    /// Flow prediction: the mode and the predictor's counters at the end.
    pub prediction: Option<(&'static str, PredictStats)>,
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
pub fn run_design(c: &Common, p: &Prepared, design: &str) -> Result<Run, Failure> {
    run_design_with(c, p, design, None)
}

/// Replays the prepared trace through one design, with flow prediction when given (ORIG).
pub fn run_design_with(c: &Common, p: &Prepared, design: &str, pred: Option<&Prediction>) -> Result<Run, Failure> {
    let keys = &p.keys;
    let mut rng = StdRng::seed_from_u64(c.seed ^ 0x5eed);
    let build_start = std::time::Instant::now();
    let mut built: Box<dyn Design> = match pred {
        Some(pr) => {
            let (cfg, orig) = dp_config(c);
            let mut d = Orig::new(&p.initial, cfg, orig)?;
            d.set_predictor(Some(pr.predictor()));
            Box::new(d)
        }
        None => build(c, design, &p.initial)?,
    };
    let dp: &mut dyn Design = built.as_mut();
    let build_ms = build_start.elapsed().as_secs_f64() * 1e3;
    let cd_probe = (design != "cflows" && c.cd).then_some(());

    let mut recorded = vec![false; keys.len()];
    // (oldest version the action may come from, version, position, action)
    let mut checks: Vec<(usize, usize, usize, DpAction)> = Vec::with_capacity(p.n_verify * (p.updates.len() + 1));
    let mut versions: Vec<Vec<Rule>> = vec![p.initial.clone()];
    let mut table = p.initial.clone();
    let mut epoch = dp.visible_epoch();
    // The visible epoch of each version, for the oldest version a packet may see.
    let mut version_epochs: Vec<u64> = vec![epoch];
    let mut batches = 0u64;

    let duration_ns = c.duration.map(|s| (s * 1e9) as u64);
    let mut out = [DpAction::Drop; BATCH];
    let mut seq: u64 = 0;
    let mut series: Vec<Sample> = Vec::new();
    let interval_ns = 100_000_000u64;
    let mut next_sample = interval_ns;
    let mut last = Counters::default();
    let mut last_t = 0u64;
    let mut reval_ms = 0.0;
    let mut update_log: Vec<serde_json::Value> = Vec::new();
    // Updates not yet visible: (index in update_log, call time, rule ids added).
    let mut waiting: Vec<(usize, std::time::Instant, Vec<RuleId>)> = Vec::new();
    let mut pending_updates = p.updates.iter().cloned().peekable();
    let wall = std::time::Instant::now();
    let mut pos = 0usize;
    // Counters at the end of the first pass: later passes meet a warm cache (steady state).
    let mut first_pass: Option<Counters> = None;
    let mut passes_done = 0u32;
    // Constant-rate mode: packets offered (global sequence numbers) and dropped at the ring.
    let total = keys.len() as u64 * u64::from(c.passes);
    let warmup = total / 20;
    let mut rx = RxStats::default();
    loop {
        // Constant rate: packets that have arrived and are not yet taken (`None`: no limit).
        let mut avail: Option<u64> = None;
        if let Some(rate) = c.rate {
            // Packet `i` arrives at i / rate seconds of PMD time.
            let mut arrived = ((dp.now_ns() as f64 * rate / 1e9) as u64 + 1).min(total);
            if arrived <= seq {
                // Idle until packet `seq` arrives (by definition it has then; no float round trip).
                dp.idle_until((seq as f64 * 1e9 / rate).ceil() as u64);
                arrived = seq + 1;
            }
            let backlog = arrived - seq;
            if backlog > c.rx_ring {
                // The ring holds `rx_ring` packets; the rest are lost. (Counted as head drops:
                // the number is what a tail-dropping NIC loses; which packets differs.)
                let lost = backlog - c.rx_ring;
                rx.dropped += lost;
                rx.dropped_after_warmup += (seq + lost).saturating_sub(seq.max(warmup));
                for _ in 0..lost {
                    seq += 1;
                    pos += 1;
                    if pos == keys.len() {
                        pos = 0;
                        passes_done += 1;
                    }
                }
                if seq >= total {
                    break;
                }
            }
            avail = Some(arrived - seq);
        }
        let end = (pos + BATCH).min(keys.len());
        let end = avail.map_or(end, |n| end.min(pos + n as usize));
        let chunk = &keys[pos..end];
        batches += 1;
        let v = versions.len() - 1;
        // Stale megaflows awaiting the revalidator thread: the batch may get older tables' actions.
        let oldest = dp.oldest_epoch();
        let lo = version_epochs.partition_point(|&e| e <= oldest).saturating_sub(1).min(v);
        dp.process_batch(chunk, seq, &mut out);
        for (i, a) in out[..chunk.len()].iter().enumerate() {
            let q = pos + i;
            if p.sampled[q] && !recorded[q] && !matches!(a, DpAction::Pending | DpAction::Lost) {
                // Checked within a window: checked again once the window closes.
                recorded[q] = lo == v;
                checks.push((lo, v, q, *a));
            }
        }
        for &(s, a) in dp.handle_upcalls() {
            let q = (s % keys.len() as u64) as usize;
            if p.sampled[q] && !recorded[q] {
                recorded[q] = true;
                // The handler classifies with the current table.
                checks.push((v, v, q, a));
            }
        }
        dp.maintain();
        for r in dp.take_revalidations() {
            for e in update_log.iter_mut().filter(|e| e["epoch"].as_u64().is_some_and(|x| x <= r.epoch)) {
                if e["revalidated_ms"].is_null() {
                    let t = e["called_ms"].as_f64().unwrap_or(0.0);
                    e["revalidated_ms"] = serde_json::json!(wall.elapsed().as_secs_f64() * 1e3 - t);
                    e["revalidator_thread_ms"] = serde_json::json!(r.thread_ms);
                }
            }
            if let Some(e) = update_log.iter_mut().rev().find(|e| e["epoch"].as_u64() == Some(r.epoch)) {
                e["megaflows_deleted"] = serde_json::json!(r.deleted);
            }
        }
        seq += chunk.len() as u64;
        pos = if end == keys.len() { 0 } else { end };
        if pos == 0 {
            passes_done += 1;
            if first_pass.is_none() {
                first_pass = Some(dp.counters());
            }
        }
        let now = dp.now_ns();
        while now >= next_sample {
            let cs = dp.counters();
            let dt = (now - last_t) as f64 / 1e9;
            series.push(Sample {
                t_s: now as f64 / 1e9,
                mpps: (cs.received - last.received) as f64 / dt / 1e6,
                upcalls_per_s: (cs.upcall - last.upcall) as f64 / dt,
                deletions_per_s: (cs.deleted() - last.deleted()) as f64 / dt,
                lost: cs.lost - last.lost,
                megaflows: cs.megaflows,
                masks: cs.masks,
                coverage: coverage(&cs),
            });
            last = cs;
            last_t = now;
            next_sample = now - now % interval_ns + interval_ns;
        }
        while pending_updates.peek().is_some_and(|u| u.at_ns <= now) {
            let u = pending_updates.next().expect("peeked");
            let t = std::time::Instant::now();
            let deleted = match u.op {
                UpdateOp::Add => {
                    table.extend(u.rules.iter().cloned());
                    dp.add_rules(u.rules.clone())?
                }
                UpdateOp::Del => {
                    let mut ids: Vec<RuleId> = table.iter().map(|r| r.id).collect();
                    ids.shuffle(&mut rng);
                    ids.truncate(u.n);
                    let gone: HashSet<RuleId> = ids.iter().copied().collect();
                    table.retain(|r| !gone.contains(&r.id));
                    dp.remove_rules(&ids)
                }
            };
            let ms = t.elapsed().as_secs_f64() * 1e3;
            reval_ms += ms;
            let threaded = dp.oldest_epoch() != dp.visible_epoch();
            update_log.push(serde_json::json!({
                "op": if u.op == UpdateOp::Add { "add" } else { "del" },
                "rules": u.n, "at_s": now as f64 / 1e9, "megaflows_deleted": deleted, "update_ms": ms,
                "visible_ms": serde_json::Value::Null,
                // Revalidator thread: deletions and their latency arrive later (filled in then).
                "epoch": dp.visible_epoch(),
                "called_ms": (t - wall).as_secs_f64() * 1e3,
                "revalidated_ms": if threaded { serde_json::Value::Null } else { serde_json::json!(ms) },
            }));
            if u.op == UpdateOp::Add {
                waiting.push((update_log.len() - 1, t, u.rules.iter().map(|r| r.id).collect()));
            } else {
                // Removals take effect in the call, in every design.
                update_log.last_mut().expect("pushed")["visible_ms"] = serde_json::json!(ms);
            }
        }
        if dp.visible_epoch() != epoch {
            epoch = dp.visible_epoch();
            let staged: HashSet<RuleId> = dp.staged_rules().into_iter().collect();
            // Update latency as the controller sees it: from the call until lookups reflect it.
            waiting.retain(|(i, t, ids)| {
                let visible = ids.iter().all(|id| !staged.contains(id));
                if visible {
                    update_log[*i]["visible_ms"] = serde_json::json!(t.elapsed().as_secs_f64() * 1e3);
                }
                !visible
            });
            versions.push(table.iter().filter(|r| !staged.contains(&r.id)).cloned().collect());
            version_epochs.push(epoch);
            recorded.iter_mut().for_each(|r| *r = false);
        }
        let done = match (duration_ns, c.rate) {
            (Some(d), _) => now >= d && pending_updates.peek().is_none(),
            (None, Some(_)) => seq >= total,
            (None, None) => pos == 0 && passes_done >= c.passes,
        };
        if done {
            break;
        }
    }
    let wall_s = wall.elapsed().as_secs_f64();
    let cs = dp.counters();
    if !cs.outcome_sum_ok() {
        return Err(Failure(format!("internal error: counters do not sum to packets received: {cs:?}")));
    }

    // Verification against the reference of each visible table version (or of any version in
    // the packet's window of stale megaflows).
    let mut mismatches = 0usize;
    let mut windowed_checks = 0usize;
    let mut first_mismatch = None;
    let mut references = References { versions: &versions, built: (0..versions.len()).map(|_| None).collect() };
    checks.sort_by_key(|c| c.1);
    // The oldest version any later check may need: references older than it are dropped (one
    // reference of a 500K-rule table is large; a run may have many versions).
    let mut need_from = vec![usize::MAX; checks.len() + 1];
    for i in (0..checks.len()).rev() {
        need_from[i] = need_from[i + 1].min(checks[i].0);
    }
    for (i, &(lo, v, q, a)) in checks.iter().enumerate() {
        references.drop_before(need_from[i]);
        let want = references.action(v, &keys[q])?;
        if want == a {
            continue;
        }
        let mut older = false;
        for w in lo..v {
            older |= references.action(w, &keys[q])? == a;
        }
        if older {
            windowed_checks += 1;
        } else {
            mismatches += 1;
            first_mismatch.get_or_insert(format!("packet {q}: datapath {a:?}, reference {want:?}"));
        }
    }
    let pmd_s = cs.pmd_ns as f64 / 1e9;
    let steady = first_pass.filter(|f| f.pmd_ns < cs.pmd_ns).map(|f| {
        let ns = cs.pmd_ns - f.pmd_ns;
        let pk = cs.received - f.received;
        (pk as f64 / (ns as f64 / 1e9) / 1e6, (cs.dpcls_ns - f.dpcls_ns) as f64 / ns as f64)
    });
    let design_report = dp.report();
    let cd_intervals = cd_probe.and_then(|_| design_report.orig().and_then(|o| o.cd_intervals));
    let report = design_report.fields();
    let prediction = pred.zip(dp.prediction_stats()).map(|(pr, s)| (pr.mode, s));
    Ok(Run {
        design: design.to_string(),
        build_ms,
        c: cs,
        series,
        update_log,
        verified: checks.len(),
        mismatches,
        stale_checks: windowed_checks,
        batches,
        first_mismatch,
        mpps: cs.received as f64 / pmd_s.max(1e-12) / 1e6,
        steady,
        wall_s,
        reval_ms,
        report,
        cd_intervals,
        rx: c.rate.map(|_| RxStats { offered: total, offered_after_warmup: total - warmup, ..rx }),
        prediction,
    })
}

/// Coverage from the gauges: model entries over rules (CFLOWS) or megaflows (CCACHE).
fn coverage(c: &Counters) -> f64 {
    let total = if c.rules > 0 { c.rules } else { c.megaflows };
    if total == 0 {
        0.0
    } else {
        c.model_entries as f64 / total as f64
    }
}

/// Prints one run's report.
pub fn print_run(c: &Common, p: &Prepared, r: &Run) {
    let cs = &r.c;
    let share = |ns: u64| ns as f64 / cs.pmd_ns.max(1) as f64;
    let emc = if c.no_emc { "off".to_string() } else { format!("insert p={}", c.emc_prob) };
    println!("rules file          {} ({} rules, {})", c.rules.display(), p.all_rules.len(), p.rules_format);
    println!("trace               {} ({} packets)", c.trace.display(), p.keys.len());
    match r.design.as_str() {
        "orig" => println!("design              orig (EMC {emc}, CD {})", if c.cd { "on" } else { "off" }),
        d => println!("design              {d} (EMC {emc}, policy {}, retrain at {})", c.policy, c.retrain_threshold),
    }
    let extra: Vec<String> = r.report.iter().map(|(k, v)| format!("{k} {}", fmt_num(*v))).collect();
    println!("build               {:.0} ms", r.build_ms);
    println!("at the end          {}", extra.join(", "));
    println!("packets             {}", cs.received);
    if let (Some(rx), Some(rate)) = (r.rx, c.rate) {
        println!(
            "offered             {} packets at {:.0} pps into a {}-packet ring: {} dropped, {:.3}% after the 5% warm-up",
            rx.offered,
            rate,
            c.rx_ring,
            rx.dropped,
            100.0 * rx.drop_rate()
        );
    }
    println!(
        "throughput          {:.3} Mpps of PMD time ({:.1} ns/packet)   mismatches {} of {} checked",
        r.mpps,
        cs.pmd_ns as f64 / cs.received as f64,
        r.mismatches,
        r.verified
    );
    if r.stale_checks > 0 {
        println!(
            "stale megaflows     {} checked packets got the previous table's action before the revalidator thread deleted its megaflow",
            r.stale_checks
        );
    }
    if let Some((m, sh)) = r.steady {
        println!("after first pass    {m:.3} Mpps (megaflow cache {:.1}% of PMD time)", 100.0 * sh);
    }
    println!(
        "PMD time            {:.3} s (wall {:.3} s; updates/revalidation {:.0} ms off the PMD)",
        cs.pmd_ns as f64 / 1e9,
        r.wall_s,
        r.reval_ms
    );
    println!(
        "PMD time shares     EMC {:.1}%  megaflow cache {:.1}%  model {:.1}%  upcalls {:.1}%  revalidator {:.1}%  other {:.1}%",
        100.0 * share(cs.emc_ns),
        100.0 * share(cs.dpcls_ns),
        100.0 * share(cs.model_ns),
        100.0 * share(cs.upcall_ns),
        100.0 * share(cs.reval_ns),
        100.0
            * (1.0
                - share(cs.emc_ns)
                - share(cs.dpcls_ns)
                - share(cs.model_ns)
                - share(cs.upcall_ns)
                - share(cs.reval_ns))
    );
    println!(
        "outcomes            emc_hit {}  cd_hit {}  megaflow_hit {}  model_hit {}  remainder_hit {}  no_match {}  upcall {}  lost {}  (sum {} = received)",
        cs.emc_hit,
        cs.cd_hit,
        cs.megaflow_hit,
        cs.model_hit,
        cs.remainder_hit,
        cs.no_match,
        cs.upcall,
        cs.lost,
        cs.outcome_sum()
    );
    println!("avg packets/batch   {:.2}", r.avg_batch());
    if r.design != "cflows" {
        println!(
            "avg subtables/hit   {:.2}   upcall cost {:.1} us   megaflows {}  masks {}",
            cs.avg_subtables_per_hit(),
            cs.upcall_ns as f64 / cs.upcall.max(1) as f64 / 1e3,
            cs.megaflows,
            cs.masks
        );
        if let Some((on, off)) = r.cd_intervals {
            println!(
                "cd                  wrong hints {}  no hint {}  active intervals {on}, off {off}",
                cs.cd_wrong_hint, cs.cd_no_hint
            );
        }
        println!(
            "deleted             revalidated {}  idle {}  flow limit {}   installs refused {}",
            cs.deleted_revalidated, cs.deleted_idle, cs.deleted_limit, cs.install_refused
        );
    }
    if r.design != "orig" {
        println!(
            "model               coverage {:.4}  rules {}  in the model {}  swaps {}",
            coverage(cs),
            cs.rules,
            cs.model_entries,
            cs.model_swaps
        );
    }
    if let Some((mode, s)) = &r.prediction {
        println!(
            "prediction          {mode}: {} megaflows predicted, {} used, {} wasted + {} unused at the end (wasted ratio {:.1}%); {} proposed, {} already covered, {} rate-limited, {} refused; {:.1}% of PMD time",
            s.predicted,
            s.used,
            s.wasted,
            s.outstanding,
            100.0 * s.wasted_ratio(),
            s.proposed,
            s.already,
            s.rate_limited,
            s.refused,
            100.0 * share(cs.predict_ns)
        );
    }
    for u in &r.update_log {
        println!("update              {u}");
    }
    if let Some(m) = &r.first_mismatch {
        println!("first mismatch      {m}");
    }
}

fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.4}")
    }
}

/// One run as JSON fields.
pub fn run_json(c: &Common, p: &Prepared, r: &Run) -> Result<serde_json::Map<String, serde_json::Value>, Failure> {
    let cs = &r.c;
    let pmd_s = cs.pmd_ns as f64 / 1e9;
    let share = |ns: u64| ns as f64 / cs.pmd_ns.max(1) as f64;
    let counters: serde_json::Map<String, serde_json::Value> =
        cs.fields().into_iter().map(|(k, v)| (k.to_string(), v.into())).collect();
    let report: serde_json::Map<String, serde_json::Value> =
        r.report.iter().map(|(k, v)| (k.to_string(), serde_json::json!(v))).collect();
    let mut o = serde_json::Map::new();
    for (k, val) in [
        ("rules_file", serde_json::json!(c.rules.display().to_string())),
        ("trace_file", serde_json::json!(c.trace.display().to_string())),
        ("design", serde_json::json!(r.design)),
        ("cd", serde_json::json!(c.cd)),
        ("emc", serde_json::json!(!c.no_emc)),
        ("emc_prob", serde_json::json!(c.emc_prob)),
        ("policy", serde_json::json!(c.policy)),
        ("rules", serde_json::json!(p.all_rules.len())),
        ("trace_packets", serde_json::json!(p.keys.len())),
        ("build_ms", serde_json::json!(r.build_ms)),
        ("packets", serde_json::json!(cs.received)),
        ("pmd_s", serde_json::json!(pmd_s)),
        ("mpps", serde_json::json!(r.mpps)),
        ("ns_per_packet", serde_json::json!(cs.pmd_ns as f64 / cs.received as f64)),
        ("mpps_after_first_pass", serde_json::json!(r.steady.map(|s| s.0))),
        ("share_megaflow_after_first_pass", serde_json::json!(r.steady.map(|s| s.1))),
        ("share_emc", serde_json::json!(share(cs.emc_ns))),
        ("share_megaflow", serde_json::json!(share(cs.dpcls_ns))),
        ("share_model", serde_json::json!(share(cs.model_ns))),
        ("share_upcall", serde_json::json!(share(cs.upcall_ns))),
        ("share_revalidator", serde_json::json!(share(cs.reval_ns))),
        ("avg_subtables_per_hit", serde_json::json!(cs.avg_subtables_per_hit())),
        ("avg_batch", serde_json::json!(r.avg_batch())),
        ("coverage", serde_json::json!(coverage(cs))),
        ("verified", serde_json::json!(r.verified)),
        ("mismatches", serde_json::json!(r.mismatches)),
        ("stale_checks", serde_json::json!(r.stale_checks)),
        ("revalidator", serde_json::json!(c.revalidator)),
        ("counters", serde_json::Value::Object(counters)),
        ("design_report", serde_json::Value::Object(report)),
        ("updates", serde_json::json!(r.update_log)),
        ("series", serde_json::to_value(&r.series)?),
        ("seed", serde_json::json!(c.seed)),
        ("rate", serde_json::json!(c.rate)),
        ("rx_offered", serde_json::json!(r.rx.map(|x| x.offered))),
        ("rx_dropped", serde_json::json!(r.rx.map(|x| x.dropped))),
        ("drop_rate_after_warmup", serde_json::json!(r.rx.map(|x| x.drop_rate()))),
        ("predict", serde_json::json!(r.prediction.as_ref().map_or("off", |p| p.0))),
        ("prediction", prediction_json(r)),
    ] {
        o.insert(k.to_string(), val);
    }
    Ok(o)
}

/// The predictor's counters, wasted ratio and share of PMD time (`null` when prediction is off).
fn prediction_json(r: &Run) -> serde_json::Value {
    let Some((_, s)) = &r.prediction else { return serde_json::Value::Null };
    let mut v = crate::coflows::predict_json(s);
    v["wasted_ratio"] = serde_json::json!(s.wasted_ratio());
    v["share_predict"] = serde_json::json!(r.c.predict_ns as f64 / r.c.pmd_ns.max(1) as f64);
    v
}

/// `--rate-search`: the highest offered rate with < 1% drops after the warm-up, by bisection
/// between 1/100 and 1.5× the rate the design sustains unconstrained (to within 5%).
fn rate_search(c: &Common, p: &Prepared, design: &str, pred: Option<&Prediction>) -> Result<(), Failure> {
    let free = run_design_with(c, p, design, pred)?;
    let probe = |rate: f64| -> Result<Run, Failure> {
        let r = run_design_with(&Common { rate: Some(rate), ..c.clone() }, p, design, pred)?;
        let rx = r.rx.expect("rate mode reports drops");
        println!(
            "probe {:>12.0} pps: {:>8.3}% dropped after warm-up, {} mismatches of {}",
            rate,
            100.0 * rx.drop_rate(),
            r.mismatches,
            r.verified
        );
        if r.mismatches > 0 {
            return Err(Failure(format!("{} packets got an action other than the reference's", r.mismatches)));
        }
        Ok(r)
    };
    println!("design {design}: {:.3} Mpps unconstrained; searching the highest rate with < 1% drops", free.mpps);
    let (mut lo, mut hi) = (free.mpps * 1e6 / 100.0, free.mpps * 1e6 * 1.5);
    let ok = |r: &Run| r.rx.is_some_and(|x| x.drop_rate() < 0.01);
    let mut best = probe(lo)?;
    if !ok(&best) {
        println!("result              not even {lo:.0} pps with < 1% drops");
        if let Some(out) = &c.json {
            let mut o = run_json(&Common { rate: Some(lo), ..c.clone() }, p, &best)?;
            o.insert("max_rate_below_1pct_drops".into(), serde_json::Value::Null);
            o.insert("unconstrained_mpps".into(), serde_json::json!(free.mpps));
            crate::report::write_json(out, "replay", o)?;
        }
        return Ok(());
    }
    let mut best_rate = lo;
    while hi / lo > 1.05 {
        let mid = (lo * hi).sqrt();
        let r = probe(mid)?;
        if ok(&r) {
            (lo, best, best_rate) = (mid, r, mid);
        } else {
            hi = mid;
        }
    }
    println!(
        "result              {:.3} Mpps offered with {:.3}% drops after the warm-up ({} ring, EMC {})",
        best_rate / 1e6,
        100.0 * best.rx.map_or(0.0, |x| x.drop_rate()),
        c.rx_ring,
        c.emc_prob
    );
    if let Some(out) = &c.json {
        let mut o = run_json(&Common { rate: Some(best_rate), ..c.clone() }, p, &best)?;
        o.insert("max_rate_below_1pct_drops".into(), serde_json::json!(best_rate));
        o.insert("unconstrained_mpps".into(), serde_json::json!(free.mpps));
        crate::report::write_json(out, "replay", o)?;
    }
    Ok(())
}

pub fn run(args: &Args) -> Result<(), Failure> {
    let c = &args.common;
    let p = prepare(c)?;
    let pred = Prediction::from_args(args, &p)?;
    if c.rate_search {
        return rate_search(c, &p, &args.design, pred.as_ref());
    }
    let r = run_design_with(c, &p, &args.design, pred.as_ref())?;
    print_run(c, &p, &r);
    if let Some(path) = &c.plot {
        crate::plot::time_series(path, &plot_title(c, &r.design), &r.series, &r.update_log)?;
    }
    if let Some(out) = &c.json {
        crate::report::write_json(out, "replay", run_json(c, &p, &r)?)?;
    }
    if r.mismatches > 0 {
        return Err(Failure(format!("{} packets got an action other than the reference's", r.mismatches)));
    }
    Ok(())
}

impl crate::plot::Point for Sample {
    fn t(&self) -> f64 {
        self.t_s
    }
    fn values(&self) -> [f64; 7] {
        [
            self.mpps,
            self.upcalls_per_s,
            self.deletions_per_s,
            self.megaflows as f64,
            self.masks as f64,
            self.lost as f64,
            100.0 * self.coverage,
        ]
    }
}

pub fn plot_title(c: &Common, design: &str) -> String {
    let name = |p: &Path| p.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    format!(
        "rqvs {design}: {} / {}{}{}",
        name(&c.rules),
        name(&c.trace),
        if c.cd { ", CD" } else { "" },
        c.updates.as_ref().map_or(String::new(), |u| format!(", updates {u}"))
    )
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
}
