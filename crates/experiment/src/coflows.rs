//! The coflow study (seed 004): flow prediction for coflows, replayed in time order through ORIG
//! with a two-core latency model — what `rqvs coflows` runs. The CLI's module docs describe the
//! model and its calibration; here are its parts: [`prepare`] a workload, [`calibrate`] the
//! costs, [`run`] one prediction setting, [`change`] between two runs.
//!
//! **The PMD loop.** A run drives the datapath's PMD loop ([`Pmd`]) step by step, because its
//! handler is on a core of its own: [`Pmd::receive`] for each batch at its arrival time on the
//! PMD's core, [`Pmd::handle`] for the queued upcalls when the handler's core is free, and
//! [`Pmd::housekeep`] after either — where `rqvs replay` and the switch take the three steps
//! together ([`Pmd::run_batch`]).

use rqvs_classify::Reference;
use rqvs_datapath::pmd::Pmd;
use rqvs_datapath::predict::{PredictConfig, PredictStats, Predictor};
use rqvs_datapath::{Clock, DatapathConfig, Design, Orig, OrigConfig, BATCH};
use rqvs_flow::FlowKey;
use rqvs_ofproto::DpAction;
use rqvs_workload::coflow::{Role, Workload};
use serde_json::{json, Value};

use crate::replay::oracle_predictor;
use crate::Error;

/// What predicts (or preinstalls) the megaflows of a coflow's associated flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum PredictMode {
    /// No prediction.
    Off,
    /// The online predictor, learning as it goes.
    Online,
    /// The ground truth's coupled flows, installed on their base flow's upcall.
    Oracle,
    /// The ground truth's associated flows, installed before the replay.
    Preload,
}

impl PredictMode {
    pub fn name(self) -> &'static str {
        match self {
            PredictMode::Off => "off",
            PredictMode::Online => "online",
            PredictMode::Oracle => "oracle",
            PredictMode::Preload => "preload",
        }
    }
}

/// The settings of the study's runs.
#[derive(Clone, Debug)]
pub struct StudyConfig {
    /// EMC insertion probability.
    pub emc_prob: f64,
    /// Seed of the verification sample and the EMC insertion draws.
    pub seed: u64,
    /// Packets per run checked against the reference.
    pub verify: usize,
    pub predictor: PredictConfig,
}

/// Timings of one measured replay: per batch, ns per packet; per job, ns per upcall.
#[derive(Default)]
pub struct Samples {
    pub per_packet: Vec<f64>,
    pub per_upcall: Vec<f64>,
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let k = v.len() / 2;
    *v.select_nth_unstable_by(k, f64::total_cmp).1
}

/// `calibrated` costs: medians of a measured replay of `p` without prediction — the virtual
/// clock every later run uses, and how many batches and handler jobs the medians are of.
pub fn calibrate(p: &Prepared, cfg: &StudyConfig) -> Result<(Clock, usize, usize), Error> {
    let mut s = Samples::default();
    run(p, PredictMode::Off, cfg, Clock::Measured, Some(&mut s))?;
    let packet_ns = median(&mut s.per_packet).round().max(1.0) as u64;
    let upcall_ns = median(&mut s.per_upcall).round().max(1.0) as u64;
    Ok((Clock::Virtual { packet_ns, upcall_ns }, s.per_packet.len(), s.per_upcall.len()))
}

/// Latency figures, µs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Lat {
    pub n: usize,
    pub mean_us: f64,
    pub max_us: f64,
}

impl Lat {
    pub fn of(v: impl Iterator<Item = u64>) -> Lat {
        let (mut n, mut sum, mut max) = (0usize, 0u128, 0u64);
        for x in v {
            n += 1;
            sum += u128::from(x);
            max = max.max(x);
        }
        Lat { n, mean_us: if n == 0 { 0.0 } else { sum as f64 / n as f64 / 1e3 }, max_us: max as f64 / 1e3 }
    }

    pub fn json(&self) -> Value {
        json!({"n": self.n, "mean_us": self.mean_us, "max_us": self.max_us})
    }
}

/// One replay's results.
pub struct RunResult {
    pub x: f64,
    pub mode: PredictMode,
    pub upcalls: u64,
    pub lost: u64,
    /// Upcalls per second in `bins` equal intervals of the trace's span.
    pub upcall_series: Vec<f64>,
    pub bin_s: f64,
    pub first_assoc: Lat,
    pub first_assoc_coupled: Lat,
    pub first_base: Lat,
    pub all: Lat,
    pub p99_us: f64,
    pub handler_busy_ns: u64,
    pub pmd_busy_ns: u64,
    pub wall_ns: u64,
    pub handler_jobs: u64,
    pub predict: Option<PredictStats>,
    pub preloaded: u64,
    pub preload_ms: f64,
    pub preload_used: u64,
    pub megaflows: u64,
    pub verified: usize,
    pub mismatches: usize,
    pub first_mismatch: Option<String>,
    pub counters: Vec<(&'static str, u64)>,
}

impl RunResult {
    pub fn handler_share(&self) -> f64 {
        self.handler_busy_ns as f64 / self.wall_ns.max(1) as f64
    }
    pub fn pmd_share(&self) -> f64 {
        self.pmd_busy_ns as f64 / self.wall_ns.max(1) as f64
    }
    /// Megaflows installed by prediction, hit, and not hit.
    pub fn made_used_wasted(&self) -> (u64, u64, u64) {
        match self.predict {
            Some(s) => (s.predicted, s.used, s.wasted + s.outstanding),
            None => (self.preloaded, self.preload_used, self.preloaded.saturating_sub(self.preload_used)),
        }
    }
    pub fn wasted_ratio(&self) -> f64 {
        let (made, _, wasted) = self.made_used_wasted();
        if made == 0 {
            0.0
        } else {
            wasted as f64 / made as f64
        }
    }
}

/// Bins of the upcall time series over the trace's span.
pub const SERIES_BINS: usize = 50;

/// Everything one workload's runs share.
pub struct Prepared<'a> {
    pub w: &'a Workload,
    pub keys: Vec<FlowKey>,
    pub ts: Vec<u64>,
    /// Sampled packet positions and the reference's action for each.
    pub expected: Vec<(usize, DpAction)>,
}

/// The keys, arrival times and verification sample of a workload (`reference`: over its rules).
pub fn prepare<'a>(w: &'a Workload, reference: &Reference, cfg: &StudyConfig) -> Prepared<'a> {
    let keys = w.keys();
    let ts = w.timestamps();
    let sample = crate::verify::sample_indexes(w.rules.len(), keys.len(), Some(cfg.verify), cfg.seed);
    let expected = sample.into_iter().map(|q| (q, DpAction::of_rule(reference.lookup_rule(&keys[q].wire())))).collect();
    Prepared { w, keys, ts, expected }
}

/// Replays one workload in time order through a fresh ORIG datapath (module docs: the model),
/// the PMD and the handler on their own modelled cores; `samples` collects per-batch and
/// per-job timings (for [`calibrate`]).
pub fn run(
    p: &Prepared,
    mode: PredictMode,
    cfg: &StudyConfig,
    clock: Clock,
    mut samples: Option<&mut Samples>,
) -> Result<RunResult, Error> {
    let w = p.w;
    let (keys, ts) = (&p.keys, &p.ts);
    let n = keys.len();
    let dcfg = DatapathConfig { emc_insert_prob: cfg.emc_prob, clock, seed: cfg.seed, ..DatapathConfig::default() };
    let mut dp = Orig::new(&w.rules, dcfg, OrigConfig::default())?;
    let pcfg = cfg.predictor.clone();
    let mut preload_keys = Vec::new();
    let mut preload_ms = 0.0;
    match mode {
        PredictMode::Online => dp.set_predictor(Some(Predictor::online(pcfg))),
        PredictMode::Oracle => dp.set_predictor(Some(oracle_predictor(pcfg, w.oracle()))),
        PredictMode::Preload => {
            preload_keys = w.oracle().into_iter().flat_map(|(_, v)| v).collect();
            dp.preinstall(&preload_keys);
            preload_ms = dp.counters().predict_ns as f64 / 1e6;
        }
        PredictMode::Off => {}
    }
    let preloaded = dp.counters().preinstalled;
    let t0 = ts[0];
    let span = (ts[n - 1] - t0).max(1);
    let bin_ns = span.div_ceil(SERIES_BINS as u64).max(1);
    let mut bins = vec![0u64; SERIES_BINS + 1];

    let mut lat = vec![u64::MAX; n];
    let mut sampled = vec![usize::MAX; n];
    for (i, &(q, _)) in p.expected.iter().enumerate() {
        sampled[q] = i;
    }
    let mut got: Vec<Option<DpAction>> = vec![None; p.expected.len()];
    let mut pmd = Pmd::new();
    let (mut pmd_free, mut handler_free) = (0u64, 0u64);
    let (mut pmd_busy, mut handler_busy, mut jobs) = (0u64, 0u64, 0u64);
    let mut pending: Vec<usize> = Vec::new();
    let mut last_queued = 0u64;
    let mut i = 0usize;
    while i < n || !pending.is_empty() {
        let next = if i < n { pmd_free.max(ts[i]) } else { u64::MAX };
        if !pending.is_empty() {
            let s = handler_free.max(last_queued);
            if s <= next {
                dp.idle_until(s);
                let before = dp.counters();
                for &(seq, act) in pmd.handle(&mut dp) {
                    let q = seq as usize;
                    if sampled[q] != usize::MAX {
                        got[sampled[q]] = Some(act);
                    }
                }
                let after = dp.counters();
                let d_up = after.upcall_ns - before.upcall_ns;
                let d = d_up + (after.predict_ns - before.predict_ns);
                if let Some(sm) = samples.as_deref_mut() {
                    sm.per_upcall.push(d_up as f64 / pending.len() as f64);
                }
                for q in pending.drain(..) {
                    lat[q] = s + d_up - ts[q];
                }
                handler_busy += d;
                handler_free = s + d;
                jobs += 1;
                pmd.housekeep(&mut dp);
                continue;
            }
        }
        let t = next;
        let mut j = i + 1;
        while j < n && j - i < BATCH && ts[j] <= t {
            j += 1;
        }
        dp.idle_until(t);
        let before = dp.now_ns();
        let out = pmd.receive(&mut dp, &keys[i..j], i as u64).1;
        let c = dp.now_ns() - before;
        let e = t + c;
        if let Some(sm) = samples.as_deref_mut() {
            sm.per_packet.push(c as f64 / (j - i) as f64);
        }
        pmd_free = e;
        pmd_busy += c;
        for (k, act) in out.iter().enumerate() {
            let q = i + k;
            match act {
                DpAction::Pending => {
                    pending.push(q);
                    last_queued = e;
                    bins[((ts[q] - t0) / bin_ns) as usize] += 1;
                }
                DpAction::Lost => {}
                _ => {
                    lat[q] = e - ts[q];
                    if sampled[q] != usize::MAX {
                        got[sampled[q]] = Some(*act);
                    }
                }
            }
        }
        pmd.housekeep(&mut dp);
        i = j;
    }
    let wall_ns = pmd_free.max(handler_free) - t0;
    let cs = dp.counters();
    if !cs.outcome_sum_ok() {
        return Err(Error(format!("internal error: counters do not sum to packets received: {cs:?}")));
    }
    let predict = dp.prediction_stats();
    // The preloaded megaflows (distinct) that were hit.
    let dpcls = dp.dpcls();
    let mut hit: Vec<_> = preload_keys
        .iter()
        .filter_map(|k| dpcls.peek(&k.wire().to_words()))
        .filter(|&f| dpcls.get(f).is_some_and(|e| e.hits > 0))
        .collect();
    hit.sort_unstable_by_key(|f| (f.slot, f.gen));
    hit.dedup();
    let preload_used = hit.len() as u64;

    // Verification.
    let mut mismatches = 0;
    let mut first_mismatch = None;
    let mut verified = 0;
    for ((q, want), g) in p.expected.iter().zip(&got) {
        if let Some(g) = g {
            verified += 1;
            if g != want {
                mismatches += 1;
                first_mismatch
                    .get_or_insert_with(|| format!("packet {q} {:?}: datapath {g:?}, reference {want:?}", keys[*q]));
            }
        }
    }

    // Latencies.
    let mut first = vec![usize::MAX; w.flows.len()];
    for (q, pk) in w.packets.iter().enumerate() {
        let f = &mut first[pk.flow as usize];
        if *f == usize::MAX {
            *f = q;
        }
    }
    let firsts = |pred: &dyn Fn(Role) -> bool| {
        Lat::of(
            w.flows
                .iter()
                .zip(&first)
                .filter(|(f, &q)| pred(f.role) && q != usize::MAX && lat[q] != u64::MAX)
                .map(|(_, &q)| lat[q]),
        )
    };
    let first_assoc = firsts(&|r| matches!(r, Role::Associated { .. }));
    let first_assoc_coupled = firsts(&|r| r == Role::Associated { coupled: true });
    let first_base = firsts(&|r| r == Role::Base);
    let all = Lat::of(lat.iter().copied().filter(|&l| l != u64::MAX));
    let mut delivered: Vec<u64> = lat.iter().copied().filter(|&l| l != u64::MAX).collect();
    let p99_us = if delivered.is_empty() {
        0.0
    } else {
        let k = (delivered.len() * 99 / 100).min(delivered.len() - 1);
        *delivered.select_nth_unstable(k).1 as f64 / 1e3
    };
    let bin_s = bin_ns as f64 / 1e9;
    Ok(RunResult {
        x: w.params.coflowiness,
        mode,
        upcalls: cs.upcall,
        lost: cs.lost,
        upcall_series: bins[..SERIES_BINS].iter().map(|&b| b as f64 / bin_s).collect(),
        bin_s,
        first_assoc,
        first_assoc_coupled,
        first_base,
        all,
        p99_us,
        handler_busy_ns: handler_busy,
        pmd_busy_ns: pmd_busy,
        wall_ns,
        handler_jobs: jobs,
        predict,
        preloaded,
        preload_ms,
        preload_used,
        megaflows: cs.megaflows,
        verified,
        mismatches,
        first_mismatch,
        counters: cs.fields(),
    })
}

/// `(change of mean latency, change of handler CPU)` of `b` relative to `a`, in percent.
pub fn change(a: &RunResult, b: &RunResult) -> (f64, f64) {
    let pct = |x: f64, y: f64| if x == 0.0 { 0.0 } else { 100.0 * (y - x) / x };
    (pct(a.all.mean_us, b.all.mean_us), pct(a.handler_share(), b.handler_share()))
}
