//! The figures of [`super::FIGURES`]: each measures with the replay library (or the classifier
//! and update benchmarks) and states the paper's claims beside rqvs's numbers. By group:
//! - [`designs`]: the designs side by side over the seeds and sizes (Fig. 3, 8, 9, 10, 11, 12,
//!   Table 2);
//! - [`over_time`]: one run sampled every 100 ms (Fig. 5, 13, 14, 16–17, 19);
//! - [`classifier`]: NuevoMatchUP on its own (Table 1 / Fig. 7, Fig. 15);
//! - [`extras`]: tables beyond the paper's figures (seed 004's coflowiness, fidelity against
//!   real OVS).
//!
//! Every measurement goes through a cell ([`super::cells`]; the compares shared by Fig. 3, 8,
//! 11, 12 and Table 2 through [`Ctx::compare`], single runs through `Ctx::run_cell`), so a figure
//! is rebuilt from kept cells without measuring; each figure's `plan_ID` lists the cells it asks
//! for with their estimated seconds (the `--quick` test checks that a run keeps exactly the
//! planned cells). Settings that the figure and its plan share are in one function per figure
//! (`fig5_times`, `fig17_setting`, …).

mod classifier;
mod designs;
mod extras;
mod over_time;

pub use classifier::{fig15, fig7, fig7b, plan_fig15, plan_fig7, plan_fig7b};
pub use designs::{
    fig10, fig11, fig12, fig3, fig8, fig9, plan_fig10, plan_fig11, plan_fig12, plan_fig3, plan_fig8, plan_fig9,
    plan_table2, table2,
};
pub use extras::{coflows, ovs_fidelity, plan_coflows, plan_ovs_fidelity};
pub use over_time::{fig13, fig14, fig17, fig19, fig5, plan_fig13, plan_fig14, plan_fig17, plan_fig19, plan_fig5};

use super::cells::{est_s, Unit};
use super::{Claim, Ctx, Figure, Mode, RunSummary};
use crate::replay::DesignKind;

/// The mean of `v` (0 for none).
pub(super) fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

pub(super) fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// log10 of a size's rule count (`10k` → 4), the x axis of the plots by size.
pub(super) fn log_rules(size: &str) -> f64 {
    let n: f64 = size.trim_end_matches('k').parse().unwrap_or(0.0);
    (n * 1000.0).max(1.0).log10()
}

pub(super) fn claim(what: &str, paper: impl Into<String>, rqvs: impl Into<String>, holds: Option<bool>) -> Claim {
    Claim { what: what.into(), paper: paper.into(), rqvs: rqvs.into(), holds }
}

/// Adds a run's verification to the figure.
pub(super) fn count(f: &mut Figure, runs: &[RunSummary]) {
    for r in runs {
        f.verified += r.verified;
        f.mismatches += r.mismatches;
    }
}

/// A table's header from its row as Markdown writes it: `"set | Mpps | masks"`.
pub(super) fn cols(row: &str) -> Vec<String> {
    row.split(" | ").map(str::to_string).collect()
}

/// Every (seed, size) of the mode, sizes outermost.
pub(super) fn sets_of(m: Mode) -> Vec<(&'static str, &'static str)> {
    m.sizes().into_iter().flat_map(|z| m.seeds().into_iter().map(move |s| (s, z))).collect()
}

pub(super) fn sets(ctx: &Ctx) -> Vec<(&'static str, &'static str)> {
    sets_of(ctx.cfg.mode)
}

/// The shared compare cells of every set ([`Ctx::compare`]).
pub(super) fn compare_units(mode: Mode) -> Vec<Unit> {
    sets_of(mode)
        .into_iter()
        .map(|(seed, size)| Unit::new("compare", &format!("{seed}_{size}"), est_s(size, mode.duration(), 3)))
        .collect()
}

pub(super) fn design(runs: &[RunSummary], d: DesignKind) -> &RunSummary {
    runs.iter().find(|r| r.design == d).expect("every design ran")
}
