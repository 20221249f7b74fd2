//! Training: stage by stage, closed-form fits, exact routing, sound leaf bounds, retraining.

use std::fmt;
use std::time::Instant;

use crate::bound::{leaf_bound, root_pieces, route_stage, Piece};
use crate::fit::{Fitter, Sampling, SplitMix64};
use crate::key::Key;
use crate::model::{leaf_error, RqRmi, SubModel};

/// Most stages a model may have.
pub const MAX_STAGES: usize = 8;
/// Most submodels in one stage.
pub const MAX_WIDTH: usize = 1 << 20;

/// Training parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainConfig {
    /// Submodels per stage, stage 0 first (must be 1). `None`: [`auto_stage_widths`].
    pub stage_widths: Option<Vec<usize>>,
    /// Samples per submodel (paper: 4K). A submodel with at most `samples/2` range pieces
    /// uses both end points of each piece instead.
    pub samples: usize,
    /// Leaves whose error bound (positions) exceeds this are retrained (paper: 128).
    pub error_target: u64,
    /// Training sessions per leaf at most, the first included (paper: 6).
    pub max_sessions: usize,
    /// Seed of the sampler; the same seed and ranges give the same model.
    pub seed: u64,
    /// How the samples are drawn (NuevoMatchUP's approximate sampling by default; NuevoMatch's
    /// uniform sampling to compare, Fig. 7b).
    pub sampling: Sampling,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            stage_widths: None,
            samples: 4096,
            error_target: 128,
            max_sessions: 6,
            seed: 0x5eed,
            sampling: Sampling::Approximate,
        }
    }
}

/// What the last training did (kept in the file format).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TrainStats {
    /// Wall time of [`RqRmi::train`], milliseconds.
    pub train_ms: f64,
    /// Most sessions any leaf needed.
    pub sessions: u32,
    /// Leaves trained more than once.
    pub retrained_leaves: u32,
    /// Leaves whose final bound still exceeds the target (correct, just a wider search).
    pub leaves_over_target: u32,
    /// Samples used, all submodels and sessions.
    pub samples: u64,
    /// Range pieces at the leaves (ranges split across leaves count once per leaf).
    pub leaf_pieces: u64,
}

/// Why a model could not be trained. Range errors name the index in the input slice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TrainError {
    /// No ranges.
    Empty,
    /// More ranges than the index type holds (2^32 - 1).
    TooMany(usize),
    /// `ranges[index]` has `lo > hi`.
    Inverted { index: usize },
    /// `ranges[index].lo < ranges[index - 1].lo`.
    Unsorted { index: usize },
    /// `ranges[index]` overlaps `ranges[index - 1]`.
    Overlap { index: usize },
    /// A bad [`TrainConfig`] field.
    Config(String),
}

impl fmt::Display for TrainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrainError::Empty => write!(f, "no ranges to index"),
            TrainError::TooMany(n) => write!(f, "{n} ranges: at most {} can be indexed", u32::MAX),
            TrainError::Inverted { index } => write!(f, "range {index} has lo > hi"),
            TrainError::Unsorted { index } => write!(f, "range {index} starts before range {}: not sorted", index - 1),
            TrainError::Overlap { index } => write!(f, "range {index} overlaps range {}", index - 1),
            TrainError::Config(m) => write!(f, "bad training configuration: {m}"),
        }
    }
}

impl std::error::Error for TrainError {}

/// Stage widths for `n` ranges. Starts from the paper's size categories (Table 1: 5, 21,
/// 133, 265/521 networks); above 10^4 ranges the leaves are wider than the paper's, because
/// measurement (`examples/measure.rs`) showed that a leaf costs almost nothing to train here
/// (the time goes into routing and bounding every range piece, whatever the width) while
/// wider leaves cut the error: on 500K clustered-prefix ranges, `[1,8,512]` trains in 94 ms
/// with max/mean error 127/68, `[1,16,1024]` in 95 ms with 86/38, at equal lookup time.
pub fn auto_stage_widths(n: usize) -> Vec<usize> {
    match n {
        0..=1_000 => vec![1, 4],
        1_001..=10_000 => vec![1, 4, 16],
        10_001..=100_000 => vec![1, 8, 512],
        _ => vec![1, 16, 1024],
    }
}

/// Checks that `ranges` are sorted, disjoint and well formed.
pub(crate) fn check_ranges<K: Key>(los: &[K], his: &[K]) -> Result<(), TrainError> {
    if los.is_empty() {
        return Err(TrainError::Empty);
    }
    if los.len() > u32::MAX as usize {
        return Err(TrainError::TooMany(los.len()));
    }
    for i in 0..los.len() {
        if los[i] > his[i] {
            return Err(TrainError::Inverted { index: i });
        }
        if i > 0 {
            if los[i] < los[i - 1] {
                return Err(TrainError::Unsorted { index: i });
            }
            if los[i] <= his[i - 1] {
                return Err(TrainError::Overlap { index: i });
            }
        }
    }
    Ok(())
}

pub(crate) fn check_widths(w: &[usize]) -> Result<(), String> {
    if w.is_empty() || w.len() > MAX_STAGES {
        return Err(format!("{} stages: 1..={MAX_STAGES} allowed", w.len()));
    }
    if w[0] != 1 {
        return Err(format!("stage 0 has {} submodels: must be 1", w[0]));
    }
    if let Some((s, &x)) = w.iter().enumerate().find(|(_, &x)| x == 0 || x > MAX_WIDTH) {
        return Err(format!("stage {s} has {x} submodels: 1..={MAX_WIDTH} allowed"));
    }
    Ok(())
}

impl<K: Key> RqRmi<K> {
    /// Trains a model over `ranges`: sorted by `lo`, disjoint, inclusive, gaps allowed.
    pub fn train(ranges: &[(K, K)], cfg: &TrainConfig) -> Result<Self, TrainError> {
        let start = Instant::now();
        let los: Vec<K> = ranges.iter().map(|r| r.0).collect();
        let his: Vec<K> = ranges.iter().map(|r| r.1).collect();
        check_ranges(&los, &his)?;
        let n = los.len();
        let widths = cfg.stage_widths.clone().unwrap_or_else(|| auto_stage_widths(n));
        check_widths(&widths).map_err(TrainError::Config)?;
        if cfg.samples < 2 {
            return Err(TrainError::Config(format!("samples = {}: at least 2", cfg.samples)));
        }
        if cfg.max_sessions == 0 {
            return Err(TrainError::Config("max_sessions = 0: at least 1".into()));
        }

        let mut rng = SplitMix64::new(cfg.seed);
        let mut stats = TrainStats::default();
        let mut subs: Vec<SubModel> = Vec::with_capacity(widths.iter().sum());
        let mut groups: Vec<Vec<Piece>> = vec![root_pieces(&los, &his)];
        let last = widths.len() - 1;
        for s in 0..last {
            let next = widths[s + 1];
            let scale = next as f64 / n as f64;
            let first = subs.len();
            for pieces in &groups {
                if pieces.is_empty() {
                    subs.push(SubModel::constant(0.0));
                    continue;
                }
                let mut fitter = Fitter::new(pieces, scale, cfg.samples, cfg.sampling, &mut rng);
                stats.samples += fitter.len() as u64;
                subs.push(fitter.fit());
            }
            groups = route_stage(&subs[first..], &groups, next);
        }

        let mut bounds = Vec::with_capacity(widths[last]);
        let mut leaf_pieces = Vec::with_capacity(widths[last]);
        for pieces in &groups {
            leaf_pieces.push(pieces.len() as u64);
            stats.leaf_pieces += pieces.len() as u64;
            if pieces.is_empty() {
                subs.push(SubModel::constant(0.0));
                bounds.push((0, 0));
                continue;
            }
            let mut fitter = Fitter::new(pieces, 1.0, cfg.samples, cfg.sampling, &mut rng);
            let mut best = fitter.fit();
            let mut best_bound = leaf_bound(&best, pieces, n);
            let mut sessions = 1;
            stats.samples += fitter.len() as u64;
            while leaf_error(best_bound.0, best_bound.1) > cfg.error_target && sessions < cfg.max_sessions {
                fitter.reweight();
                let cand = fitter.fit();
                sessions += 1;
                stats.samples += fitter.len() as u64;
                let b = leaf_bound(&cand, pieces, n);
                if leaf_error(b.0, b.1) < leaf_error(best_bound.0, best_bound.1) {
                    best = cand;
                    best_bound = b;
                }
            }
            if sessions > 1 {
                stats.retrained_leaves += 1;
            }
            if leaf_error(best_bound.0, best_bound.1) > cfg.error_target {
                stats.leaves_over_target += 1;
            }
            stats.sessions = stats.sessions.max(sessions as u32);
            subs.push(best);
            bounds.push(best_bound);
        }
        stats.train_ms = start.elapsed().as_secs_f64() * 1e3;
        Ok(RqRmi::from_parts(los, his, widths, subs, bounds, leaf_pieces, stats))
    }
}
