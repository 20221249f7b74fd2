//! What a run reports: [`Run`] (counters, time series [`Sample`]s, the update log,
//! verification), the constant-rate ring's [`RxStats`], a mixed replay's [`AttackRun`], and
//! [`coverage`].

use rqvs_datapath::predict::PredictStats;
use rqvs_datapath::{Counters, DesignKind, DesignReport};

use crate::mixed::{Latency, StreamStats};

#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
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
    /// Mixed replay (`--attack`): the benign packets' part of `mpps` (`None` without an attack).
    pub benign_mpps: Option<f64>,
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
    /// Attack packets arrived by the end of the run; dropped by the attack's full ring; taken
    /// from the ring and dropped by the ingress policer (`--attack-policing`) before they were
    /// classified; still waiting in the ring at the end (`offered` = classified (`attack.packets`)
    /// + `ring_dropped` + `policed` + `waiting`).
    pub offered: u64,
    pub ring_dropped: u64,
    pub policed: u64,
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

/// Coverage from the gauges: model entries over rules (CFLOWS) or megaflows (CCACHE).
pub fn coverage(c: &Counters) -> f64 {
    let total = if c.rules > 0 { c.rules } else { c.megaflows };
    if total == 0 {
        0.0
    } else {
        c.model_entries as f64 / total as f64
    }
}
