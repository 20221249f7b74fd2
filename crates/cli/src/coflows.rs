//! `rqvs coflows`: the flow-prediction experiment of the coflow study (`../shared/seeds/004`), and
//! `rqvs gen coflows`, its workload as files.
//!
//! ```text
//! rqvs coflows --dist hadoop|rpc [--coflowiness 0,0.1,0.25,0.5,0.75,0.9,1.0]
//!              [--predict off,online,oracle,preload] [--coflows N] [--rng-seed S] [--json OUT] [--csv OUT] [--plot OUT.svg]
//! rqvs gen coflows --dist hadoop|rpc --coflowiness X --coflows N --rng-seed S --out OUT.pcap
//!              [--rules-out OUT.ofctl] [--truth-out OUT.tsv]
//! ```
//!
//! **`rqvs coflows` and `rqvs replay --predict`.** This command is the experiment: it generates
//! the workload at every coflowiness, replays it with packets arriving at their timestamps
//! through the two-core model below, and reports latencies and handler CPU. `rqvs replay
//! --predict off|online|oracle` attaches the same predictor to one replay of any trace (a
//! `gen coflows` pcap, with `--coflow-truth` the `--truth-out` file for the oracle): packets come
//! as fast as the PMD takes them, the handler runs inline, and it reports upcalls, predicted /
//! used / wasted megaflows and throughput, not latencies.
//!
//! For each coflowiness the workload is generated ([`rqvs_workload::coflow`]: same seed, so the
//! traces differ only in the endpoints of uncoupled associated flows) and replayed, in time order,
//! through a fresh ORIG datapath ([`rqvs_datapath::Orig`]) for each prediction setting:
//! - `off` — no prediction (the study's baseline);
//! - `online` — the online predictor ([`rqvs_datapath::predict`]), learning as it goes;
//! - `oracle` — the oracle predictor: on a base flow's upcall, exactly its coupled associated
//!   flows (those that share endpoints with it) are installed — the best any predictor acting on
//!   the base flow's upcall can do;
//! - `preload` — the study's own method: the megaflows of all coupled associated flows are
//!   installed *before* the replay ([`rqvs_datapath::Orig::preinstall`]); that work is
//!   reported (`preload_ms`) but, as in the study, is not in the measured handler time.
//!
//! ## The timing model
//! The trace's packets arrive at their timestamps. Two cores, as in OVS (and the NSDI'22 setup):
//! - **PMD** (fast path): takes the packets that have arrived when it is free (at most 32, at
//!   least the next one, waiting for it if none has), runs `process_batch` on them, which takes
//!   the batch's *measured* time `c`; a packet that hits the EMC or a megaflow gets its action at
//!   the end of its batch: **latency = batch end − arrival**.
//! - **Handler** (slow path, the other core): a packet that misses is queued at its batch's end.
//!   When the handler is free and upcalls are waiting, it takes all of them as one job at
//!   `s = max(handler free, last upcall queued)` (an approximation: when the handler frees up
//!   during a PMD batch that then queues more upcalls, the job starts at that batch's end with
//!   them, not at `handler free` without them — earlier upcalls wait up to one batch longer,
//!   the later ones less). The job is the datapath's `handle_upcalls`:
//!   first the upcalls (slow path, megaflow installation: time `u`, the `upcall_ns` delta), then
//!   the predictor's work they triggered (time `q`, the `predict_ns` delta). Every upcalled packet
//!   of the job gets its action when the upcalls are done, at `s + u` (as OVS's handler executes
//!   a batch's packets together): **latency = s + u − arrival** — a packet that upcalls waits for
//!   the handler, including behind other upcalls and behind earlier jobs' predictions. The handler
//!   is busy until `s + u + q`. The upcall queue holds 4,096 packets; more are lost (counted, no
//!   latency).
//! - **Visibility**: the job's megaflows are installed when the job is run, i.e. visible from `s`
//!   rather than `f`: packets of the same flows arriving during the job hit them instead of
//!   upcalling again. Duplicate upcalls (the study's §5.6) are therefore undercounted by at most
//!   one job's duration per flow — microseconds unless the handler is saturated.
//! - **CPU**: handler CPU share = handler busy time / wall span (first arrival to last action);
//!   the PMD's busy share likewise (a DPDK PMD polls at 100%; this is its useful work).
//! - The datapath's own clock (idle expiry, subtable ranking, the predictor's window and rate
//!   limit) follows the model's: it is moved to each batch's and job's start time, and runs ahead
//!   of it only by the work of the current batch or job.
//!
//! **Costs** (`--cost`):
//! - `calibrated` (default): the first workload is replayed once (prediction off) with every
//!   batch and job timed; the **medians** — PMD time per packet, handler time per upcall — are
//!   then the fixed costs of every run ([`Clock::Virtual`]: a batch costs its packets × the first,
//!   a job its slow-path lookups × the second, predictions' lookups included). On a shared
//!   machine a single preemption inside one timed job would otherwise delay everything queued
//!   behind it by milliseconds, and runs could not be compared; with calibrated costs the
//!   settings differ only by what they do. (The predictor's learning — hash-table updates, not
//!   lookups — is not in these costs; `measured` shows it.)
//! - `measured`: every batch and job timed as it runs (`handle_upcalls` plus the predictor).
//! - `virtual:PKT_NS,UPCALL_NS`: given fixed costs.
//!
//! With `calibrated` and `virtual` every figure is a deterministic function of the inputs and
//! the two costs.
//!
//! ## Reported, per (coflowiness, setting)
//! Upcalls (packets that missed every cache) and upcalls/s over time; latency of the first packet
//! of every associated flow (mean, max) and of every base flow (mean); mean and p99 latency of all
//! packets; handler and PMD CPU shares; predictions made (megaflows installed), used (hit before
//! deletion), wasted (deleted or, at the end, still unused) and the wasted ratio; lost packets; and
//! the **mismatches**: `--verify N` sampled packets (default 10,000) per run are checked against
//! the reference classifier's action. Any mismatch makes the exit code 1.

use std::path::{Path, PathBuf};

use rqvs_classify::Reference;
use rqvs_datapath::predict::PredictConfig;
use rqvs_datapath::Clock;
use rqvs_flow::formats::{ofctl, pcap};
use rqvs_workload::coflow::{self, Params, SizeDist, Workload};
use serde_json::{json, Map, Value};

use rqvs_experiment::coflows::{self as study, PredictMode, RunResult, StudyConfig};

use crate::plot::XyPanel;
use crate::report::{self, Out};
use crate::Failure;

/// Workload options shared by `rqvs coflows` and `rqvs gen coflows`.
#[derive(clap::Args, Debug, Clone)]
pub struct WorkloadArgs {
    /// Flow-size distribution: hadoop (FB Hadoop, mean ~122 KB, long tail) or rpc (Google Search
    /// RPC, mean ~426 B, bursty).
    #[arg(long, value_parser = SizeDist::parse)]
    pub dist: SizeDist,
    /// Coflows (default: 1,000 for hadoop, 20,000 for rpc) [range: 1 ≤ x ≤ 1000000, and at most
    /// 20000000 flows: coflows × (1 + --max-associated)].
    #[arg(long, value_parser = crate::args::range::between(1usize, 1_000_000))]
    pub coflows: Option<usize>,
    #[arg(long, default_value_t = 1)]
    pub rng_seed: u64,
    /// Average offered rate, packets per second (the study: 1 Mpps) [range: 0 < x ≤ 1000000000].
    #[arg(long, default_value_t = 1e6, value_parser = crate::args::range::above(0.0, 1e9))]
    pub rate: f64,
    /// Sending rate of one flow, Gbit/s (one 1500-byte packet every 12 µs at 1) [range: 0 < x ≤ 10000].
    #[arg(long, default_value_t = 1.0, value_parser = crate::args::range::above(0.0, 10_000.0))]
    pub flow_gbps: f64,
    /// Mean delay from a base flow to an associated flow, beyond a fixed 20 µs, µs (exponential)
    /// [range: 0 ≤ x ≤ 1000000000].
    #[arg(long, default_value_t = 200.0, value_parser = crate::args::range::between(0.0, 1e9))]
    pub follow_us: f64,
    /// Mean coflows per burst (1 = Poisson; default 1 for hadoop, 16 for rpc) [range: 1 ≤ x ≤ 1000000].
    #[arg(long, value_parser = crate::args::range::between(1.0, 1e6))]
    pub burst: Option<f64>,
    /// Pod groups (/24 each) [range: 1 ≤ x ≤ 65536].
    #[arg(long, default_value_t = 16, value_parser = crate::args::range::between(1u32, 65_536))]
    pub groups: u32,
    /// Pods per group [range: 1 ≤ x ≤ 254].
    #[arg(long, default_value_t = 254, value_parser = crate::args::range::between(1u32, 254))]
    pub pods: u32,
    /// Service VIPs [range: 1 ≤ x ≤ 65536].
    #[arg(long, default_value_t = 16, value_parser = crate::args::range::between(1u32, 65_536))]
    pub services: u32,
    /// Most associated flows per coflow (uniform 1..=N) [range: 1 ≤ x ≤ 8].
    #[arg(long, default_value_t = 8, value_parser = crate::args::range::between(1u32, 8))]
    pub max_associated: u32,
}

impl WorkloadArgs {
    fn dist(&self) -> Result<SizeDist, Failure> {
        Ok(self.dist)
    }

    /// The generator's parameters at coflowiness `x`.
    pub fn params(&self, x: f64) -> Result<Params, Failure> {
        let dist = self.dist()?;
        let default_coflows = match dist {
            SizeDist::Hadoop => 1_000,
            SizeDist::Rpc => 20_000,
        };
        let p = Params {
            coflows: self.coflows.unwrap_or(default_coflows),
            groups: self.groups,
            pods_per_group: self.pods,
            services: self.services,
            max_associated: self.max_associated,
            rate_pps: self.rate,
            flow_gbps: self.flow_gbps,
            follow_us: self.follow_us,
            burst: self.burst.unwrap_or(dist.default_burst()),
            ..Params::new(dist, 0, x, self.rng_seed)
        };
        p.validate().map_err(Failure)?;
        Ok(p)
    }
}

/// `rqvs gen coflows`.
#[derive(clap::Args, Debug)]
pub struct GenArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Share of associated flows that share endpoints with their base flow [range: 0 ≤ x ≤ 1].
    #[arg(long, value_parser = crate::args::range::share())]
    pub coflowiness: f64,
    /// The trace (pcap, microsecond timestamps).
    #[arg(long)]
    pub out: PathBuf,
    /// The OpenFlow rules the trace hits (ovs-ofctl flow syntax).
    #[arg(long)]
    pub rules_out: Option<PathBuf>,
    /// The ground truth: one line per flow with its coflow, role and coupling (TSV).
    #[arg(long)]
    pub truth_out: Option<PathBuf>,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// `rqvs coflows`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Coflowiness values, comma-separated, each 0..1.
    #[arg(long, default_value = "0,0.1,0.25,0.5,0.75,0.9,1.0")]
    pub coflowiness: String,
    /// Prediction settings, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "off,online,oracle,preload")]
    pub predict: Vec<PredictMode>,
    #[command(flatten)]
    pub predictor: PredictorArgs,
    /// EMC insertion probability [range: 0 ≤ x ≤ 1].
    #[arg(long, default_value_t = 0.01, value_parser = crate::args::range::share())]
    pub emc_prob: f64,
    /// Packets per run checked against the reference classifier (sampled with --seed).
    #[arg(long, default_value_t = 10_000)]
    pub verify: usize,
    /// Seed of the verification sample and the EMC insertion draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// calibrated (medians of one timed replay, then fixed), measured (every batch and job
    /// timed), or virtual:PKT_NS,UPCALL_NS.
    #[arg(long, default_value = "calibrated")]
    pub cost: String,
    /// Write a JSON report here ('-' = stdout).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the table (one row per coflowiness and prediction mode, the JSON's `runs`) as CSV
    /// here ('-' = stdout).
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write an SVG plot here.
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

/// The online predictor's settings, shared by `rqvs coflows` and `rqvs replay --predict`.
#[derive(clap::Args, Debug, Clone)]
pub struct PredictorArgs {
    /// Online predictor: least confidence (follow rate, conservatively) for a template to be
    /// predicted; at 0.5, at most about one prediction in two is expected to be wasted
    /// [range: 0 ≤ x ≤ 1].
    #[arg(long, default_value_t = 0.5, value_parser = crate::args::range::share())]
    pub min_confidence: f64,
    /// Online predictor: least count for a template to be predicted [range: 1 ≤ x ≤ 1000000].
    #[arg(long, default_value_t = 3, value_parser = crate::args::range::between(1u32, 1_000_000))]
    pub min_support: u32,
    /// Online predictor: predictions per upcall on average (a token bucket earning this many
    /// per upcall, burst 1,024; at most 16 on one upcall). The oracle is not limited
    /// [range: 0 < x ≤ 1024].
    #[arg(long, default_value_t = 4.0, value_parser = crate::args::range::above(0.0, 1024.0))]
    pub predict_budget: f64,
    /// Online predictor: how long after a base flow a follow-up counts, ms of datapath clock
    /// [range: 0 < x ≤ 3600000].
    #[arg(long, default_value_t = 5.0, value_parser = crate::args::range::above(0.0, 3_600_000.0))]
    pub window_ms: f64,
}

impl PredictorArgs {
    /// The online predictor's settings, checked; errors name the option.
    pub fn config(&self) -> Result<PredictConfig, Failure> {
        if !(self.window_ms.is_finite() && self.window_ms > 0.0) {
            return Err(Failure(format!("--window-ms: expected a time > 0, found '{}'", self.window_ms)));
        }
        if self.min_support == 0 {
            return Err(Failure("--min-support: expected at least 1".into()));
        }
        let cfg = PredictConfig {
            window_ns: (self.window_ms * 1e6) as u64,
            min_confidence: self.min_confidence,
            min_support: self.min_support,
            per_upcall: self.predict_budget,
            ..PredictConfig::default()
        };
        cfg.validate().map_err(|e| Failure(format!("--min-confidence/--predict-budget: {e}")))?;
        Ok(cfg)
    }

    fn json(&self) -> Value {
        json!({"min_confidence": self.min_confidence, "min_support": self.min_support, "per_upcall": self.predict_budget, "window_ms": self.window_ms})
    }
}

use rqvs_experiment::report::predict_json;

/// `rqvs gen coflows`: the workload as a pcap, its rules and ground truth.
pub fn gen(a: &GenArgs) -> Result<(), Failure> {
    let out = Out::new(a.json.as_deref());
    let p = a.workload.params(a.coflowiness)?;
    let t = std::time::Instant::now();
    let w = coflow::generate(&p).map_err(Failure)?;
    let secs = t.elapsed().as_secs_f64();
    let (bytes, _) = pcap::write_pcap(&w.keys(), Some(&w.timestamps()));
    write_file(&a.out, &bytes)?;
    if let Some(r) = &a.rules_out {
        let text = ofctl::write_flows(&w.rules).map_err(|e| Failure(format!("{}: {e}", r.display())))?;
        write_file(r, text.as_bytes())?;
    }
    if let Some(tr) = &a.truth_out {
        write_file(tr, coflow::write_truth(&w).as_bytes())?;
    }
    let s = w.summary();
    out.line(format!("gen coflows: {} ({:.2} s)", describe(&w), secs));
    if let Some(j) = &a.json {
        let mut f = workload_json(&w);
        f.insert("output".into(), a.out.display().to_string().into());
        f.insert("rules_output".into(), json!(a.rules_out.as_ref().map(|p| p.display().to_string())));
        f.insert("truth_output".into(), json!(a.truth_out.as_ref().map(|p| p.display().to_string())));
        f.insert("seconds".into(), secs.into());
        f.insert("packets".into(), s.packets.into());
        report::write_json(j, "gen coflows", f)?;
    }
    Ok(())
}

fn write_file(p: &Path, bytes: &[u8]) -> Result<(), Failure> {
    std::fs::write(p, bytes).map_err(|e| Failure(format!("{}: cannot write: {e}", p.display())))
}

fn describe(w: &Workload) -> String {
    let s = w.summary();
    format!(
        "{} coflowiness {}: {} coflows, {} flows ({} associated, {} coupled), {} packets over {:.3} s ({:.2} Mpps), mean flow {:.0} B / {:.2} packets, {} rules",
        w.params.dist.name(),
        w.params.coflowiness,
        s.coflows,
        s.flows,
        s.associated,
        s.coupled,
        s.packets,
        s.span_ns as f64 / 1e9,
        s.rate_pps / 1e6,
        s.mean_flow_bytes,
        s.mean_flow_packets,
        s.rules
    )
}

fn workload_json(w: &Workload) -> Map<String, Value> {
    let s = w.summary();
    let p = &w.params;
    let mut f = Map::new();
    for (k, v) in [
        ("dist", json!(p.dist.name())),
        ("coflowiness", json!(p.coflowiness)),
        ("coflows", json!(s.coflows)),
        ("rng_seed", json!(p.rng_seed)),
        ("flows", json!(s.flows)),
        ("associated", json!(s.associated)),
        ("coupled", json!(s.coupled)),
        ("trace_packets", json!(s.packets)),
        ("span_s", json!(s.span_ns as f64 / 1e9)),
        ("offered_pps", json!(s.rate_pps)),
        ("mean_flow_bytes", json!(s.mean_flow_bytes)),
        ("mean_flow_packets", json!(s.mean_flow_packets)),
        ("rules", json!(s.rules)),
        ("groups", json!(p.groups)),
        ("pods_per_group", json!(p.pods_per_group)),
        ("services", json!(p.services)),
        ("max_associated", json!(p.max_associated)),
        ("rate_pps", json!(p.rate_pps)),
        ("flow_gbps", json!(p.flow_gbps)),
        ("follow_us", json!(p.follow_us)),
        ("burst", json!(p.burst)),
    ] {
        f.insert(k.into(), v);
    }
    f
}

/// Parses `0,0.1,...` (each 0..1).
fn parse_coflowiness(s: &str) -> Result<Vec<f64>, Failure> {
    s.split(',')
        .enumerate()
        .map(|(i, x)| {
            let x = x.trim();
            match x.parse::<f64>() {
                Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
                _ => Err(Failure(format!("--coflowiness: item {} '{x}': expected a number in 0..1", i + 1))),
            }
        })
        .collect()
}

/// `--cost`: `None` for `calibrated`.
fn parse_cost(s: &str) -> Result<Option<Clock>, Failure> {
    match s {
        "calibrated" => return Ok(None),
        "measured" => return Ok(Some(Clock::Measured)),
        _ => {}
    }
    let bad =
        || Failure(format!("--cost: expected 'calibrated', 'measured' or 'virtual:PKT_NS,UPCALL_NS', found '{s}'"));
    let (p, u) = s.strip_prefix("virtual:").and_then(|r| r.split_once(',')).ok_or_else(bad)?;
    let packet_ns: u64 = p.trim().parse().map_err(|_| bad())?;
    let upcall_ns: u64 = u.trim().parse().map_err(|_| bad())?;
    Ok(Some(Clock::Virtual { packet_ns, upcall_ns }))
}

fn run_json(r: &RunResult) -> Value {
    let (made, used, wasted) = r.made_used_wasted();
    json!({
        "coflowiness": r.x,
        "predict": r.mode.name(),
        "upcalls": r.upcalls,
        "lost": r.lost,
        "upcalls_per_s": {"bin_s": r.bin_s, "values": r.upcall_series},
        "first_assoc_latency": r.first_assoc.json(),
        "first_assoc_coupled_latency": r.first_assoc_coupled.json(),
        "first_base_latency": r.first_base.json(),
        "latency": {"n": r.all.n, "mean_us": r.all.mean_us, "max_us": r.all.max_us, "p99_us": r.p99_us},
        "handler_busy_s": r.handler_busy_ns as f64 / 1e9,
        "pmd_busy_s": r.pmd_busy_ns as f64 / 1e9,
        "wall_s": r.wall_ns as f64 / 1e9,
        "handler_cpu_share": r.handler_share(),
        "pmd_cpu_share": r.pmd_share(),
        "handler_jobs": r.handler_jobs,
        "upcall_cost_us": r.counters.iter().find(|c| c.0 == "upcall_ns").map_or(0.0, |c| c.1 as f64 / r.upcalls.max(1) as f64 / 1e3),
        "predicted": made,
        "used": used,
        "wasted": wasted,
        "wasted_ratio": r.wasted_ratio(),
        "predictor": r.predict.as_ref().map(predict_json),
        "preloaded": r.preloaded,
        "preload_ms": r.preload_ms,
        "megaflows": r.megaflows,
        "verified": r.verified,
        "mismatches": r.mismatches,
        "counters": r.counters.iter().map(|&(k, v)| (k.to_string(), json!(v))).collect::<Map<_, _>>(),
    })
}

/// Options `rqvs coflows` accepts but would not use: the online predictor's settings when
/// `--predict` does not run it (usage errors, [`crate::args::Given`]).
pub fn unused(a: &Args, g: &crate::args::Given) -> Result<(), String> {
    let online = a.predict.contains(&PredictMode::Online);
    for id in ["min_confidence", "min_support", "predict_budget", "window_ms"] {
        g.refuse(id, !online, "the online predictor's setting; used only when --predict includes online")?;
    }
    Ok(())
}

pub fn run_cmd(a: &Args) -> Result<(), Failure> {
    let out = Out::with_csv(a.json.as_deref(), a.csv.as_deref())?;
    let xs = parse_coflowiness(&a.coflowiness)?;
    let modes = &a.predict;
    let clock = parse_cost(&a.cost)?;
    if !(0.0..=1.0).contains(&a.emc_prob) {
        return Err(Failure(format!("--emc-prob: expected a probability 0..1, found '{}'", a.emc_prob)));
    }
    let cfg = StudyConfig { emc_prob: a.emc_prob, seed: a.seed, verify: a.verify, predictor: a.predictor.config()? };
    let dist = a.workload.dist()?;
    let base_params = a.workload.params(xs[0])?;
    let reference = Reference::build(&coflow::rules(&base_params))?;
    let wall = std::time::Instant::now();
    let mut runs: Vec<RunResult> = Vec::new();
    let mut workloads = Vec::new();
    let mut calibration = Value::Null;
    let clock = match clock {
        Some(c) => c,
        None => {
            let w = coflow::generate(&base_params).map_err(Failure)?;
            let (c, batches, jobs) = study::calibrate(&study::prepare(&w, &reference, &cfg), &cfg)?;
            if let Clock::Virtual { packet_ns, upcall_ns } = c {
                out.line(format!(
                    "cost      calibrated on coflowiness {} (prediction off): PMD {packet_ns} ns/packet, handler {upcall_ns} ns/upcall (medians of {batches} batches and {jobs} handler jobs)",
                    xs[0]
                ));
                calibration = json!({"pmd_ns_per_packet": packet_ns, "handler_ns_per_upcall": upcall_ns, "batches": batches, "jobs": jobs});
            }
            c
        }
    };
    out.line(format!(
        "coflows {}: cost {}, EMC p={}, predictor min-confidence {} min-support {} budget {}/upcall window {} ms; {} packets verified per run",
        dist.name(),
        a.cost,
        a.emc_prob,
        a.predictor.min_confidence,
        a.predictor.min_support,
        a.predictor.predict_budget,
        a.predictor.window_ms,
        a.verify
    ));
    for &x in &xs {
        let w = coflow::generate(&a.workload.params(x)?).map_err(Failure)?;
        out.line(format!("workload  {}", describe(&w)));
        let p = study::prepare(&w, &reference, &cfg);
        for &m in modes {
            runs.push(study::run(&p, m, &cfg, clock, None)?);
        }
        workloads.push(Value::Object(workload_json(&w)));
    }
    print_table(&out, &runs);
    let study = study_check(&runs);
    for l in &study.1 {
        out.line(l);
    }
    let mismatches: usize = runs.iter().map(|r| r.mismatches).sum();
    let verified: usize = runs.iter().map(|r| r.verified).sum();
    out.line(format!(
        "verified  {verified} packets in {} runs against the reference: {mismatches} mismatches ({:.1} s)",
        runs.len(),
        wall.elapsed().as_secs_f64()
    ));
    if let Some(m) = runs.iter().find_map(|r| r.first_mismatch.as_ref()) {
        out.line(format!("first mismatch  {m}"));
    }
    if let Some(path) = &a.plot {
        plot(path, dist, &runs)?;
    }
    if let Some(path) = &a.csv {
        report::write_csv(path, &runs.iter().map(run_json).collect::<Vec<_>>())?;
    }
    if let Some(j) = &a.json {
        let mut f = Map::new();
        f.insert("dist".into(), dist.name().into());
        f.insert("cost".into(), a.cost.clone().into());
        f.insert("calibration".into(), calibration);
        f.insert("emc_prob".into(), a.emc_prob.into());
        f.insert("seed".into(), a.seed.into());
        f.insert("predictor".into(), a.predictor.json());
        f.insert("workloads".into(), Value::Array(workloads));
        f.insert("runs".into(), Value::Array(runs.iter().map(run_json).collect()));
        f.insert("study_check".into(), study.0);
        f.insert("verified".into(), verified.into());
        f.insert("mismatches".into(), mismatches.into());
        report::write_json(j, "coflows", f)?;
    }
    if mismatches > 0 {
        return Err(Failure(format!("{mismatches} packets got an action other than the reference's")));
    }
    Ok(())
}

fn print_table(out: &Out, runs: &[RunResult]) {
    out.line(format!(
        "{:>5} {:<8} {:>8} {:>6} {:>10} {:>10} {:>10} {:>8} {:>6} {:>9} {:>9} {:>8} {:>7} {:>7} {:>7} {:>10}",
        "x",
        "predict",
        "upcalls",
        "lost",
        "assoc1 us",
        "assoc1 max",
        "base1 us",
        "handler",
        "pmd",
        "mean us",
        "p99 us",
        "made",
        "used",
        "wasted",
        "wasted%",
        "mismatches"
    ));
    for r in runs {
        let (made, used, wasted) = r.made_used_wasted();
        out.line(format!(
            "{:>5} {:<8} {:>8} {:>6} {:>10.2} {:>10.1} {:>10.2} {:>7.2}% {:>5.1}% {:>9.2} {:>9.1} {:>8} {:>7} {:>7} {:>6.1}% {:>10}",
            r.x,
            r.mode.name(),
            r.upcalls,
            r.lost,
            r.first_assoc.mean_us,
            r.first_assoc.max_us,
            r.first_base.mean_us,
            100.0 * r.handler_share(),
            100.0 * r.pmd_share(),
            r.all.mean_us,
            r.p99_us,
            made,
            used,
            wasted,
            100.0 * r.wasted_ratio(),
            r.mismatches
        ));
    }
}

/// The study's finding (predicting 25% of flows: mean latency −24%, CPU −12%) set beside what
/// this run measures at coflowiness 0.25 for each prediction setting, against `off` on the same
/// trace and against `off` at coflowiness 0 (the study's baseline).
fn study_check(runs: &[RunResult]) -> (Value, Vec<String>) {
    let find = |x: f64, m: &str| runs.iter().find(|r| (r.x - x).abs() < 1e-9 && r.mode.name() == m);
    let mut lines = Vec::new();
    let mut v = Map::new();
    let base0 = find(0.0, "off");
    let same = find(0.25, "off");
    for m in ["preload", "oracle", "online"] {
        let Some(r) = find(0.25, m) else { continue };
        let mut o = Map::new();
        for (name, b) in [("vs_off_same_trace", same), ("vs_off_coflowiness_0", base0)] {
            if let Some(b) = b {
                let (dl, dc) = study::change(b, r);
                o.insert(name.into(), json!({"mean_latency_change_pct": dl, "handler_cpu_change_pct": dc}));
                lines.push(format!(
                    "study     coflowiness 0.25, {m} {}: mean latency {dl:+.1}%, handler CPU {dc:+.1}% (study: -24%, -12%)",
                    if name == "vs_off_same_trace" { "vs off on the same trace" } else { "vs off at coflowiness 0" }
                ));
            }
        }
        v.insert(m.into(), Value::Object(o));
    }
    (Value::Object(v), lines)
}

fn plot(path: &Path, dist: SizeDist, runs: &[RunResult]) -> Result<(), Failure> {
    let mut modes: Vec<&str> = Vec::new();
    for r in runs {
        if !modes.contains(&r.mode.name()) {
            modes.push(r.mode.name());
        }
    }
    let by_mode = |f: &dyn Fn(&RunResult) -> f64| -> Vec<(String, Vec<(f64, f64)>)> {
        modes
            .iter()
            .map(|&m| (m.to_string(), runs.iter().filter(|r| r.mode.name() == m).map(|r| (r.x, f(r))).collect()))
            .collect()
    };
    let panel = |y: &str, log_y: bool, f: &dyn Fn(&RunResult) -> f64| XyPanel {
        x_desc: "coflowiness".into(),
        y_desc: y.into(),
        log_y,
        lines: by_mode(f),
    };
    let mut series = Vec::new();
    for (m, x) in [("off", 0.0), ("online", 0.25), ("online", 0.75), ("preload", 0.25), ("preload", 0.75)] {
        if let Some(r) = runs.iter().find(|r| r.mode.name() == m && (r.x - x).abs() < 1e-9) {
            let pts = r.upcall_series.iter().enumerate().map(|(k, &v)| ((k as f64 + 0.5) * r.bin_s, v)).collect();
            series.push((format!("{m} x={x}"), pts));
        }
    }
    let panels = vec![
        panel("upcalls", false, &|r| r.upcalls as f64),
        panel("first assoc. packet, mean (us)", true, &|r| r.first_assoc.mean_us),
        panel("first assoc. packet, max (us)", true, &|r| r.first_assoc.max_us),
        panel("mean latency, all packets (us)", true, &|r| r.all.mean_us),
        panel("handler CPU (%)", false, &|r| 100.0 * r.handler_share()),
        XyPanel { x_desc: "trace time (s)".into(), y_desc: "upcalls/s".into(), log_y: false, lines: series },
    ];
    let title = format!("rqvs coflows, {} flow sizes: flow prediction off / online / oracle / preload", dist.name());
    crate::plot::xy_panels(path, &title, 2, &panels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: Args,
    }

    fn args(extra: &[&str]) -> Args {
        let mut v = vec!["t", "--dist", "rpc"];
        v.extend_from_slice(extra);
        T::parse_from(v).a
    }

    #[test]
    fn options_are_checked() {
        assert!(parse_coflowiness("0,0.5,1").is_ok());
        assert!(parse_coflowiness("0,1.5").unwrap_err().0.contains("item 2 '1.5'"));
        assert!(parse_coflowiness("x").is_err());
        assert_eq!(parse_cost("virtual:100,2000").unwrap(), Some(Clock::Virtual { packet_ns: 100, upcall_ns: 2000 }));
        assert_eq!(parse_cost("calibrated").unwrap(), None);
        assert!(parse_cost("virtual:1").is_err());
        // Outside its documented range, a usage error before anything runs.
        assert!(T::try_parse_from(["t", "--dist", "rpc", "--coflows", "0"]).is_err());
        assert!(T::try_parse_from(["t", "--dist", "web"]).err().unwrap().to_string().contains("'hadoop' or 'rpc'"));
    }

    /// A tiny workload under fixed costs: the model's latencies follow from them exactly.
    #[test]
    fn the_timing_model_under_fixed_costs() {
        let a = args(&["--coflows", "300", "--cost", "virtual:100,2000", "--verify", "100000"]);
        let w = coflow::generate(&a.workload.params(1.0).unwrap()).unwrap();
        let reference = Reference::build(&w.rules).unwrap();
        let cfg = StudyConfig {
            emc_prob: a.emc_prob,
            seed: a.seed,
            verify: a.verify,
            predictor: a.predictor.config().unwrap(),
        };
        let p = study::prepare(&w, &reference, &cfg);
        let clock = parse_cost(&a.cost).unwrap().unwrap();
        let off = study::run(&p, PredictMode::Off, &cfg, clock, None).unwrap();
        let again = study::run(&p, PredictMode::Off, &cfg, clock, None).unwrap();
        let oracle = study::run(&p, PredictMode::Oracle, &cfg, clock, None).unwrap();
        let preload = study::run(&p, PredictMode::Preload, &cfg, clock, None).unwrap();
        for r in [&off, &oracle, &preload] {
            assert_eq!((r.mismatches, r.verified), (0, p.keys.len()), "{:?}", r.mode);
            assert_eq!(r.lost, 0);
        }
        // Deterministic under fixed costs.
        assert_eq!(
            (off.upcalls, off.all.mean_us, off.handler_busy_ns),
            (again.upcalls, again.all.mean_us, again.handler_busy_ns)
        );
        // Handler time is exactly 2 µs per slow-path lookup: upcalls (and, for the oracle, its
        // preinstalls); a fast-path packet waits one batch (100 ns per packet).
        assert_eq!(off.handler_busy_ns, off.upcalls * 2_000);
        let s = oracle.predict.unwrap();
        assert_eq!(oracle.handler_busy_ns, oracle.upcalls * 2_000 + s.predicted * 2_000);
        assert!(
            off.first_assoc.mean_us >= 2.1,
            "an upcalled first packet waits for the handler: {:?}",
            off.first_assoc
        );
        assert!(preload.first_assoc.max_us < 4.0, "preloaded: every first packet hits: {:?}", preload.first_assoc);
        assert_eq!(preload.handler_busy_ns, preload.upcalls * 2_000, "the preload is not handler time");
        // At coflowiness 1 every associated flow is coupled: the preload leaves base flows only
        // (a few twice: a second packet that arrived before the handler took the first).
        let n = w.coflows.len() as u64;
        assert!((n * 97 / 100..=n * 105 / 100).contains(&preload.upcalls), "{} upcalls, {n} coflows", preload.upcalls);
        assert!(oracle.upcalls < off.upcalls && oracle.first_assoc.mean_us < off.first_assoc.mean_us);
        assert_eq!(oracle.wasted_ratio(), 0.0);
    }
}
