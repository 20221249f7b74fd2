//! `rqvs replay`: a trace through a datapath design, as fast as the PMD takes it — the command
//! line over [`rqvs_experiment::replay`] (what a run does, its settings and its verification are
//! documented there).
//!
//! ```text
//! rqvs replay --rules FILE --trace FILE --design orig|ccache|cflows|auto [--cd] [--emc-prob P] [--emc-entries N | --no-emc]
//!             [--policy instant|delayed] [--duration S] [--updates SPEC] [--verify N]
//!             [--mask-limit N [--mask-eviction least-hit|refuse|narrow]] [--mfcguard [--mfcguard-interval S]]
//!             [--predict off|online|oracle [--coflow-truth FILE]] [--json OUT] [--csv OUT] [--plot OUT.svg]
//!             [--design auto [--auto KEY=VALUE[,...]]...]
//! ```
//!
//! This module parses the options into a [`ReplayConfig`], prints the report, writes the JSON
//! and the plot.

use std::io::Write;
use std::path::{Path, PathBuf};

use rqvs_datapath::revalidator::RevalidatorMode;
use rqvs_experiment::replay::{self, Prediction, Prepared, Run, Sample};
use rqvs_experiment::{DesignKind, ReplayConfig};

use crate::args::{CflowsClassifierArg, Given, PolicyArg, Workload};
use crate::report::{outln, Out};
use crate::Failure;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Datapath design.
    #[arg(long, value_enum, default_value_t = DesignKind::Orig)]
    pub design: DesignKind,
    /// Flow prediction (ORIG): off; online (learns from upcalls, any trace); oracle (the coflow
    /// ground truth of --coflow-truth). Counters: predicted, used, wasted. `rqvs coflows` is the
    /// coflow experiment with arrival times and latencies; this is the same predictor on a replay.
    #[arg(long, value_enum, default_value_t = PredictMode::Off)]
    pub predict: PredictMode,
    /// --predict oracle: the coflow ground truth (`rqvs gen coflows --truth-out`) of --trace.
    #[arg(long)]
    pub coflow_truth: Option<PathBuf>,
    #[command(flatten)]
    pub predictor: crate::coflows::PredictorArgs,
    #[command(flatten)]
    pub common: Common,
}

/// `--predict`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PredictMode {
    Off,
    Online,
    Oracle,
}

/// `--revalidator`: where megaflows are revalidated after rule changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RevalidatorArg {
    /// On a second thread while the PMD forwards (as OVS).
    Thread,
    /// In the update call (deterministic).
    Inline,
}

/// Settings shared by `rqvs replay` and `rqvs compare` (their meaning: [`ReplayConfig`]).
#[derive(clap::Args, Debug, Clone)]
pub struct Common {
    #[command(flatten)]
    pub workload: Workload,
    /// Enable the cuckoo distributor.
    #[arg(long)]
    pub cd: bool,
    /// EMC insertion probability (OVS default 0.01; the paper used 0.2) [range: 0 ≤ x ≤ 1].
    #[arg(long, default_value_t = 0.01, value_parser = crate::args::range::share())]
    pub emc_prob: f64,
    /// EMC entries (OVS: 8192; the paper's Fig. 9: 8K to 2M) [range: a power of two, 2 ≤ x ≤ 2097152].
    #[arg(long, default_value_t = rqvs_datapath::emc::EMC_ENTRIES, value_parser = crate::args::range::emc_entries)]
    pub emc_entries: usize,
    /// Disable the EMC.
    #[arg(long)]
    pub no_emc: bool,
    /// Replay the trace in a loop until this many seconds of PMD time (default: one pass)
    /// [range: 0 < x ≤ 1000000000000; a run of more than 10 minutes says so and shows its progress].
    #[arg(long, conflicts_with = "passes", value_parser = crate::args::range::above(0.0, 1e12))]
    pub duration: Option<f64>,
    /// Replay the trace this many times (default 1). With 2 or more, the report adds the
    /// throughput after the first pass: the steady state, caches warm and models trained
    /// [range: 1 ≤ x ≤ 4294967295; a run of more than 10⁹ packets says so and shows its progress].
    #[arg(long, default_value_t = 1, value_parser = crate::args::range::between(1u32, u32::MAX))]
    pub passes: u32,
    /// Constant-rate mode: packets are offered at this many per second of PMD time into a
    /// receive ring of `--rx-ring` packets; what arrives while the ring is full is dropped and
    /// counted (the paper's constant-TX method; the first 5% of packets are warm-up)
    /// [range: 0 < x ≤ 1000000000000].
    #[arg(long, conflicts_with = "duration", value_parser = crate::args::range::above(0.0, 1e12))]
    pub rate: Option<f64>,
    /// Receive-ring size for `--rate`, packets (a DPDK ring of 4096 descriptors) [range: 1 ≤ x ≤
    /// 16777216].
    #[arg(long, default_value_t = 4096, value_parser = crate::args::range::between(1u64, 1 << 24))]
    pub rx_ring: u64,
    /// Search for the highest `--rate` with < 1% drops after the warm-up (bisection; each probe
    /// replays the trace through a freshly built design).
    #[arg(long, conflicts_with_all = ["duration", "rate"])]
    pub rate_search: bool,
    /// Rule updates, e.g. 'add:60@7s' or 'add:60@7s,del:10@9s'.
    #[arg(long)]
    pub updates: Option<String>,
    /// Megaflow flow limit [range: 1 ≤ x ≤ 100000000].
    #[arg(long, default_value_t = 200_000, value_parser = crate::args::range::between(1usize, 100_000_000))]
    pub flow_limit: usize,
    /// ORIG/CCACHE: where megaflows are revalidated after rule changes — on a second thread
    /// while the PMD forwards (as OVS), or inline in the update call (deterministic).
    #[arg(long, value_enum, default_value_t = RevalidatorArg::Thread)]
    pub revalidator: RevalidatorArg,
    #[command(flatten)]
    pub defences: crate::args::Defences,
    #[command(flatten)]
    pub auto: crate::args::AutoArgs,
    /// CFLOWS: when inserted rules become visible — at once, into the remainder (instant) or
    /// at the next model swap (delayed).
    #[arg(long, value_enum, default_value_t = PolicyArg::Instant)]
    pub policy: PolicyArg,
    /// CFLOWS: the classifier over the OpenFlow rules — NuevoMatchUP (nmu) or TupleMerge alone
    /// (tm, no learned index: the ablation; instant policy only).
    #[arg(long, value_enum, default_value_t = CflowsClassifierArg::Nmu)]
    pub classifier: CflowsClassifierArg,
    /// Retrain when what was added outside the model since the last one exceeds this share:
    /// CFLOWS, rules inserted into the remainder; CCACHE, megaflows installed in the megaflow cache
    /// [range: 0 ≤ x ≤ 1].
    #[arg(long, default_value_t = 0.1, value_parser = crate::args::range::share())]
    pub retrain_threshold: f64,
    /// CFLOWS over a pipeline: the tables after 0 holding at least this many rules are looked
    /// up in a NuevoMatchUP each (trained as the table grows past it), smaller ones in a
    /// TupleMerge. Default: none learned (TupleMerge for all: measured faster for the walk's
    /// one-packet lookups, docs/pipeline-bench.md).
    #[arg(long)]
    pub later_learned_min: Option<usize>,
    /// CCACHE: how often (seconds of PMD time) the manager checks whether to train a new model
    /// [range: 0 < x ≤ 3600].
    #[arg(long, default_value_t = 0.01, value_parser = crate::args::range::above(0.0, 3600.0))]
    pub train_interval: f64,
    /// Idle expiry of megaflows, seconds of PMD time [range: 0 ≤ x ≤ 1000000].
    #[arg(long, default_value_t = 10.0, value_parser = crate::args::range::between(0.0, 1e6))]
    pub idle: f64,
    /// in_port given to trace packets.
    #[arg(long, default_value_t = 1)]
    pub in_port: u32,
    /// PMD threads the trace is split over by flow hash, each with its own design over one
    /// shared OpenFlow table (the paper's Fig. 10 offline; replay only). With --updates each PMD
    /// applies the stream to a replica of the table; --rate is split over the PMDs [range: 1 ≤ x ≤ 64].
    #[arg(long, default_value_t = 1, value_parser = crate::args::range::between(1usize, 64))]
    pub pmds: usize,
    /// Mixed replay: an attack (a packet file, e.g. from `rqvs gen attack`) interleaved with the
    /// trace as a second receive queue of the PMD, replayed in a loop at `--attack-rate`; the
    /// report separates the benign and the attack traffic.
    #[arg(long, requires = "attack_rate")]
    pub attack: Option<PathBuf>,
    /// Attack packets per second of PMD time (with --attack) [range: 0 < x ≤ 1000000000000].
    #[arg(long, requires = "attack", value_parser = crate::args::range::above(0.0, 1e12))]
    pub attack_rate: Option<f64>,
    /// Ingress policing on the attack's receive queue, OVS's `ingress_policing_kpkts_rate` and
    /// `_burst`: a token bucket of KPPS thousand packets per second of PMD time holding at most
    /// BURST thousand (default 16); the packets over it are dropped before they are parsed or
    /// classified (with --attack).
    #[arg(long, requires = "attack", value_name = "KPPS[/BURST]", value_parser = crate::args::policer)]
    pub attack_policing: Option<rqvs_datapath::policer::PolicerSpec>,
    /// Write a JSON report here ('-' = stdout).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the report's table as CSV here ('-' = stdout): replay's time series (one row per
    /// sample, the JSON's `series`), with --pmds one row per PMD (the JSON's `runs`); compare's
    /// designs (one row per design, the JSON's `runs`: counters and design report as
    /// `counters.NAME` columns).
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write an SVG plot of the time series here (compare: all designs in one plot).
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

impl Common {
    /// Where the human summary goes (stderr when `--json -` or `--csv -` takes stdout; both
    /// there is refused by [`Common::check_outputs`] before anything runs).
    pub fn out(&self) -> Out {
        Out::with_csv(self.json.as_deref(), self.csv.as_deref()).unwrap_or_else(|_| Out::new(Some(Path::new("-"))))
    }

    /// `--json -` and `--csv -` together are an error.
    pub fn check_outputs(&self) -> Result<(), Failure> {
        Out::with_csv(self.json.as_deref(), self.csv.as_deref()).map(|_| ())
    }

    /// The replay's settings.
    pub fn config(&self) -> ReplayConfig {
        let mut c = ReplayConfig {
            rules: self.workload.rules.clone(),
            trace: self.workload.trace.clone(),
            cd: self.cd,
            emc: !self.no_emc,
            emc_prob: self.emc_prob,
            emc_entries: self.emc_entries,
            duration: self.duration,
            passes: self.passes,
            rate: self.rate,
            rx_ring: self.rx_ring,
            updates: self.updates.clone(),
            verify: self.workload.verify,
            seed: self.workload.seed,
            flow_limit: self.flow_limit,
            revalidator: match self.revalidator {
                RevalidatorArg::Thread => RevalidatorMode::Thread,
                RevalidatorArg::Inline => RevalidatorMode::Inline,
            },
            policy: self.policy.policy(),
            classifier: self.classifier.classifier(),
            retrain_threshold: self.retrain_threshold,
            later_learned_min: self.later_learned_min.unwrap_or(usize::MAX),
            train_interval: self.train_interval,
            idle: self.idle,
            in_port: self.in_port,
            pmds: self.pmds,
            attack: self.attack.clone(),
            attack_rate: self.attack_rate,
            attack_policing: self.attack_policing,
            auto: self.auto.config(),
            ..ReplayConfig::default()
        };
        self.defences.apply(&mut c);
        c
    }
}

/// `--predict` and its options, checked against the design; `None` for off.
fn prediction(a: &Args, cfg: &ReplayConfig, p: &Prepared) -> Result<Option<Prediction>, Failure> {
    let mode = match a.predict {
        PredictMode::Off => "off",
        PredictMode::Online => "online",
        PredictMode::Oracle => "oracle",
    };
    Ok(Prediction::from_mode(mode, a.coflow_truth.as_deref(), a.predictor.config()?, a.design, cfg, p)?)
}

/// Prints one run's report.
pub fn print_run(c: &Common, p: &Prepared, r: &Run) {
    let out = c.out();
    let cs = &r.c;
    let share = |ns: u64| ns as f64 / cs.pmd_ns.max(1) as f64;
    let emc = if c.no_emc {
        "off".to_string()
    } else if c.emc_entries == rqvs_datapath::emc::EMC_ENTRIES {
        format!("insert p={}", c.emc_prob)
    } else {
        format!("{} entries, insert p={}", c.emc_entries, c.emc_prob)
    };
    let held = p.all_rules.len() - p.initial.len();
    let held = if held > 0 {
        format!(": {} at the start, {held} held out for --updates add", p.initial.len())
    } else {
        String::new()
    };
    outln!(
        out,
        "rules file          {} ({} rules{held}, {})",
        c.config().rules_name(),
        p.all_rules.len(),
        p.rules_format
    );
    outln!(out, "trace               {} ({} packets)", c.config().trace_name(), p.packets);
    match r.design {
        DesignKind::Orig => outln!(out, "design              orig (EMC {emc}, CD {})", if c.cd { "on" } else { "off" }),
        DesignKind::Cflows if c.classifier == CflowsClassifierArg::Tm => {
            outln!(out, "design              cflows (EMC {emc}, classifier tm: TupleMerge alone, no learned index)")
        }
        d => outln!(
            out,
            "design              {} (EMC {emc}, policy {}, retrain at {})",
            d.name(),
            c.policy.name(),
            c.retrain_threshold
        ),
    }
    let extra: Vec<String> = r.report.fields().iter().map(|(k, v)| format!("{k} {}", fmt_num(*v))).collect();
    outln!(out, "build               {:.0} ms", r.build_ms);
    outln!(out, "at the end          {}", extra.join(", "));
    outln!(out, "packets             {}", cs.received);
    if let (Some(rx), Some(rate)) = (r.rx, c.rate) {
        outln!(out,
            "offered             {} packets at {:.0} pps into a {}-packet ring: {} dropped, {:.3}% after the 5% warm-up",
            rx.offered,
            rate,
            c.rx_ring,
            rx.dropped,
            100.0 * rx.drop_rate()
        );
    }
    outln!(
        out,
        "throughput          {:.3} Mpps of PMD time ({:.1} ns/packet)   mismatches {} of {} checked",
        r.mpps,
        cs.pmd_ns as f64 / cs.received as f64,
        r.mismatches,
        r.verified
    );
    if let Some(a) = &r.attack {
        print_attack(&out, c, r, a);
    }
    if let Some(l) = &r.latency {
        let us = |q: f64| l.quantile(q).map_or("-".to_string(), |ns| format!("{:.1}", ns as f64 / 1e3));
        outln!(
            out,
            "latency             p50 {} µs  p99 {} µs  p99.9 {} µs  max {:.1} µs of PMD time (benign packets after the warm-up, arrival to the end of their batch)",
            us(0.5),
            us(0.99),
            us(0.999),
            l.max() as f64 / 1e3
        );
    }
    if r.stale_checks > 0 {
        outln!(out,
            "stale megaflows     {} checked packets got the previous table's action before the revalidator thread deleted its megaflow",
            r.stale_checks
        );
    }
    if let Some((m, sh)) = r.steady {
        outln!(out, "after first pass    {m:.3} Mpps (megaflow cache {:.1}% of PMD time)", 100.0 * sh);
    }
    outln!(
        out,
        "PMD time            {:.3} s (wall {:.3} s; updates/revalidation {:.0} ms off the PMD)",
        cs.pmd_ns as f64 / 1e9,
        r.wall_s,
        r.reval_ms
    );
    outln!(out,
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
    outln!(out,
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
    outln!(out, "avg packets/batch   {:.2}", r.avg_batch());
    if r.design != DesignKind::Cflows {
        outln!(
            out,
            "avg subtables/hit   {:.2}   upcall cost {:.1} us   megaflows {}  masks {}",
            cs.avg_subtables_per_hit(),
            cs.upcall_ns as f64 / cs.upcall.max(1) as f64 / 1e3,
            cs.megaflows,
            cs.masks
        );
        if let Some((on, off)) = r.report.orig().and_then(|o| o.cd_intervals) {
            outln!(
                out,
                "cd                  wrong hints {}  no hint {}  active intervals {on}, off {off}",
                cs.cd_wrong_hint,
                cs.cd_no_hint
            );
        }
        outln!(
            out,
            "deleted             revalidated {}  idle {}  flow limit {}   installs refused {}",
            cs.deleted_revalidated,
            cs.deleted_idle,
            cs.deleted_limit,
            cs.install_refused
        );
        if c.defences.any() {
            let limit = c
                .defences
                .mask_limit
                .map_or("off".to_string(), |n| format!("{n} masks, {}", c.defences.eviction().name()));
            let guard = c.defences.mfcguard_s().map_or("off".to_string(), |s| format!("every {s} s"));
            outln!(
                out,
                "defences            mask limit {limit}: {} masks evicted ({} megaflows), {} installs refused, {} narrowed;  MFCGuard {guard}: {} masks removed ({} megaflows)",
                cs.masks_evicted,
                cs.megaflows_evicted,
                cs.install_mask_refused,
                cs.install_mask_narrowed,
                cs.mfcguard_masks,
                cs.mfcguard_removed
            );
        }
    }
    if r.design != DesignKind::Orig {
        outln!(
            out,
            "model               coverage {:.4}  rules {}  in the model {}  swaps {}",
            replay::coverage(cs),
            cs.rules,
            cs.model_entries,
            cs.model_swaps
        );
    }
    print_auto(&out, r);
    if let Some((mode, s)) = &r.prediction {
        outln!(out,
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
        if u["reached"] == false {
            outln!(
                out,
                "update              {} {} rules at {} s: NOT REACHED, the run ended at {:.3} s of PMD time (a longer --duration or more --passes reach it)",
                u["op"].as_str().unwrap_or("?"),
                u["rules"],
                u["at_s"].as_f64().unwrap_or(0.0),
                u["run_ended_s"].as_f64().unwrap_or(0.0)
            );
        } else {
            outln!(out, "update              {u}");
        }
    }
    if let Some(m) = &r.first_mismatch {
        outln!(out, "first mismatch      {m}");
    }
}

/// A mixed replay's streams (`--attack`).
fn print_attack(out: &Out, c: &Common, r: &Run, a: &rqvs_experiment::replay::AttackRun) {
    let total = r.c.pmd_ns.max(1) as f64;
    let attack = c.attack.as_ref().map_or(String::new(), |p| p.display().to_string());
    outln!(
        out,
        "attack              {attack} at {:.0} pps: {} offered, {} dropped by its {}-packet ring{}   mismatches {} of {} checked",
        a.rate,
        a.offered,
        a.ring_dropped,
        c.rx_ring,
        c.attack_policing.map_or(String::new(), |p| format!(
            ", {} by its policer ({} kpps, burst {} kpkts)",
            a.policed, p.kpps, p.burst_kpkts
        )),
        a.mismatches,
        a.checks
    );
    for (name, s) in [("benign", &a.benign), ("attack", &a.attack)] {
        let per_hit = s.subtables_per_hit().map_or("-".to_string(), |v| format!("{v:.2}"));
        outln!(
            out,
            "  {name:<17} {} packets, {:.3} Mpps of all PMD time ({:.1}% of it, {:.1} ns/packet); upcalls {}, lost {}, subtables/hit {per_hit}",
            s.packets,
            s.packets as f64 / total * 1e3,
            100.0 * s.pmd_ns as f64 / total,
            s.ns_per_packet(),
            s.upcalls,
            s.lost
        );
    }
}

fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.4}")
    }
}

/// The rows of a JSON array (none for anything else).
pub fn as_rows(v: serde_json::Value) -> Vec<serde_json::Value> {
    match v {
        serde_json::Value::Array(a) => a,
        _ => Vec::new(),
    }
}

/// One run as JSON fields ([`rqvs_experiment::report::run_json`]).
pub fn run_json(c: &Common, p: &Prepared, r: &Run) -> Result<serde_json::Map<String, serde_json::Value>, Failure> {
    Ok(rqvs_experiment::report::run_json(&c.config(), p, r)?)
}

/// `--rate-search` (module docs of [`replay::rate_search`]): probes printed as they come, then
/// the result (`rqvs replay` and `rqvs compare`).
pub fn rate_search_printed(
    c: &Common,
    p: &Prepared,
    design: DesignKind,
    pred: Option<&Prediction>,
) -> Result<replay::RateSearch, Failure> {
    let out = c.out();
    let cfg = c.config();
    let mut on_probe = |rate: f64, r: &Run| {
        let rx = r.rx.unwrap_or_default();
        outln!(
            out,
            "probe {:>12.0} pps: {:>8.3}% dropped after warm-up, {} mismatches of {}",
            rate,
            100.0 * rx.drop_rate(),
            r.mismatches,
            r.verified
        );
    };
    outln!(out, "design {}: searching the highest rate with < 1% drops", design.name());
    let s = replay::rate_search(&cfg, p, design, pred, &mut on_probe)?;
    outln!(out, "unconstrained       {:.3} Mpps", s.free.mpps);
    let (rate, run) = &s.probe;
    if s.passed {
        outln!(
            out,
            "result              {:.3} Mpps offered with {:.3}% drops after the warm-up ({} ring, EMC {})",
            rate / 1e6,
            100.0 * run.rx.map_or(0.0, |x| x.drop_rate()),
            c.rx_ring,
            c.emc_prob
        );
        if s.at_bound {
            outln!(
                out,
                "note                nothing dropped up to the search's bound (1.5x unconstrained): the run is too short for the {}-packet ring to fill, so this is a lower bound; use --duration or more --passes",
                c.rx_ring
            );
        }
    } else {
        outln!(out, "result              not even {rate:.0} pps with < 1% drops");
    }
    Ok(s)
}

/// `--plot` draws one run's time series; a rate search has many runs and draws none.
pub fn no_plot_with_rate_search(c: &Common) -> Result<(), Failure> {
    if c.rate_search && c.plot.is_some() {
        return Err(Failure("--plot: draws one run's time series; not with --rate-search".into()));
    }
    Ok(())
}

/// `rqvs replay --rate-search`.
fn rate_search(c: &Common, p: &Prepared, design: DesignKind, pred: Option<&Prediction>) -> Result<(), Failure> {
    let s = rate_search_printed(c, p, design, pred)?;
    if let Some(path) = &c.csv {
        crate::report::write_csv(path, &as_rows(serde_json::to_value(&s.probe.1.series)?))?;
    }
    if let Some(out) = &c.json {
        crate::report::write_json(out, "replay", rqvs_experiment::report::rate_search_json(&c.config(), p, &s)?)?;
    }
    Ok(())
}

/// Options `rqvs replay` accepts but would not use with the design and the other options given:
/// usage errors ([`Given`]).
pub fn unused(a: &Args, g: &Given) -> Result<(), String> {
    unused_common(&a.common, &[a.design], &format!("--design {}", a.design.name()), g)?;
    let online = a.predict == PredictMode::Online;
    for id in ["min_confidence", "min_support", "predict_budget", "window_ms"] {
        g.refuse(id, !online, "the online predictor's setting; used only with --predict online")?;
    }
    g.refuse(
        "coflow_truth",
        a.predict != PredictMode::Oracle,
        "the oracle's ground truth; used only with --predict oracle",
    )?;
    g.refuse(
        "plot",
        a.common.pmds > 1,
        "draws one run's time series; not with --pmds (the CSV and JSON have every PMD's)",
    )?;
    Ok(())
}

/// The options of [`Common`] that only some designs, or some other options, use: each a usage
/// error when none of `designs` (or none of the options it serves) is there
/// ([`replay::check_unused`]); `names` says which designs run, as given.
pub fn unused_common(c: &Common, designs: &[DesignKind], names: &str, g: &Given) -> Result<(), String> {
    replay::check_unused(&c.config(), designs, names, c.rate_search, &|id| g.has(id)).map_err(|e| e.0)?;
    c.auto.check().map(|_| ())
}

pub fn run(args: &Args) -> Result<(), Failure> {
    let c = &args.common;
    let cfg = c.config();
    c.check_outputs()?;
    let p = replay::prepare(&cfg)?;
    let pred = prediction(args, &cfg, &p)?;
    if c.rate_search {
        if c.pmds > 1 {
            return Err(Failure("--rate-search: runs on one PMD; --pmds is not used with it".into()));
        }
        no_plot_with_rate_search(c)?;
        return rate_search(c, &p, args.design, pred.as_ref());
    }
    if c.pmds > 1 {
        if pred.is_some() {
            return Err(Failure("--pmds: flow prediction runs on one PMD only, for now".into()));
        }
        // The PMD threads report no progress: a long run is only announced.
        let _ = long_run(c, &p, args.design);
        return run_pmds(c, &p, args.design);
    }
    let r = replay::run_design_progress(&cfg, &p, args.design, pred.as_ref(), &mut long_run(c, &p, args.design))?;
    print_run(c, &p, &r);
    if let Some(path) = &c.plot {
        crate::plot::time_series(path, &plot_title(c, r.design), &r.series, &r.update_log)?;
    }
    if let Some(path) = &c.csv {
        crate::report::write_csv(path, &as_rows(serde_json::to_value(&r.series)?))?;
    }
    if let Some(out) = &c.json {
        crate::report::write_json(out, "replay", run_json(c, &p, &r)?)?;
    }
    if r.mismatches > 0 {
        return Err(Failure(format!("{} packets got an action other than the reference's", r.mismatches)));
    }
    Ok(())
}

/// A run longer than this many seconds of PMD time, or packets, says so and shows its progress.
const LONG_RUN_S: f64 = 600.0;
const LONG_RUN_PACKETS: u64 = 1_000_000_000;

/// For a long run (`--duration` past [`LONG_RUN_S`], or `--passes` over the trace past
/// [`LONG_RUN_PACKETS`]): says so on stderr, then returns a progress callback printing a line there
/// every 10 s of wall time. A short run gets a callback that does nothing.
pub fn long_run(c: &Common, p: &Prepared, design: DesignKind) -> impl FnMut(replay::Progress) {
    let packets = p.packets * u64::from(c.passes);
    let long = match c.duration {
        Some(d) => d > LONG_RUN_S,
        None => c.rate.is_none() && packets > LONG_RUN_PACKETS,
    };
    if long {
        let what = match c.duration {
            Some(d) => format!("--duration {d} s of PMD time"),
            None => format!("--passes {} over {} packets ({packets} packets)", c.passes, p.packets),
        };
        let _ = writeln!(
            std::io::stderr(),
            "rqvs: note: {}: {what} is a long run; progress every 10 s below, Ctrl-C stops it",
            design.name()
        );
    }
    let start = std::time::Instant::now();
    let mut next = 10.0;
    move |pr: replay::Progress| {
        if long && start.elapsed().as_secs_f64() >= next {
            next += 10.0;
            let _ = writeln!(
                std::io::stderr(),
                "rqvs: progress: {}: {:.4}% ({} packets, {:.1} s of PMD time, {:.0} s of wall time)",
                design.name(),
                100.0 * pr.fraction,
                pr.packets,
                pr.pmd_s,
                start.elapsed().as_secs_f64()
            );
        }
    }
}

/// `--pmds N`: each PMD's report, then all of them together.
fn run_pmds(c: &Common, p: &Prepared, design: DesignKind) -> Result<(), Failure> {
    let out = c.out();
    let r = replay::run_pmds(&c.config(), p, design)?;
    for (i, run) in r.runs.iter().enumerate() {
        outln!(out, "== PMD {i} ({} packets of the trace)", run.c.received);
        print_run(c, p, run);
        outln!(out);
    }
    let per: Vec<String> = r.runs.iter().map(|x| format!("{:.3}", x.mpps)).collect();
    outln!(
        out,
        "{} PMDs            {:.3} Mpps together ({} packets over the longest PMD time); per PMD {} Mpps; mismatches {}",
        r.runs.len(),
        r.mpps,
        r.packets,
        per.join(", "),
        r.mismatches()
    );
    if c.json.is_some() || c.csv.is_some() {
        let mut o = rqvs_experiment::report::pmds_json(&c.config(), p, design, &r)?;
        if let Some(path) = &c.csv {
            crate::report::write_csv(path, &as_rows(o.get("runs").cloned().unwrap_or_default()))?;
        }
        if let Some(out) = &c.json {
            crate::report::write_json(out, "replay", std::mem::take(&mut o))?;
        }
    }
    if r.mismatches() > 0 {
        return Err(Failure(format!("{} packets got an action other than the reference's", r.mismatches())));
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

pub fn plot_title(c: &Common, design: DesignKind) -> String {
    plot_title_named(c, design.name())
}

/// The plot's title for `designs` (names, comma-separated).
pub fn plot_title_named(c: &Common, design: &str) -> String {
    let name = |p: &Option<PathBuf>| {
        p.as_deref().and_then(Path::file_name).map_or_else(|| "default".into(), |n| n.to_string_lossy().into_owned())
    };
    format!(
        "rqvs {design}: {} / {}{}{}",
        name(&c.workload.rules),
        name(&c.workload.trace),
        if c.cd { ", CD" } else { "" },
        c.updates.as_ref().map_or(String::new(), |u| format!(", updates {u}"))
    )
}

/// `--design auto`: its switches, time per design and every switch's reason.
pub fn print_auto(out: &crate::report::Out, r: &replay::Run) {
    let Some(a) = &r.auto else { return };
    outln!(
        out,
        "auto                {} design switches, now {}; time orig {:.3} s  ccache {:.3} s  cflows {:.3} s",
        a.design_switches,
        a.current.name(),
        a.time_ns[0] as f64 / 1e9,
        a.time_ns[1] as f64 / 1e9,
        a.time_ns[2] as f64 / 1e9
    );
    outln!(out, "  settings          {}", a.settings_line());
    for e in &a.log {
        outln!(
            out,
            "  switch at {:.3} s   {} -> {}: {} (ready in {:.1} ms, {} megaflows preinstalled)",
            e.at_ns as f64 / 1e9,
            e.from_name(),
            e.to_name(),
            e.reason,
            e.ready_ns as f64 / 1e6,
            e.preinstalled
        );
    }
}
