//! `rqvs paper`: the NSDI'22 paper's evaluation in one command (`rqvs_experiment::paper`):
//! options, progress on stderr (a bar with the ETA on a terminal; otherwise one line per
//! figure and per cell measured, so logs stay readable), the page and each figure's JSON
//! written; `--estimate` prints the plan of cells and its estimated time.

use std::io::IsTerminal;
use std::path::PathBuf;

use indicatif::{ProgressBar, ProgressStyle};
use rqvs_experiment::paper::cells::{self, hms};
use rqvs_experiment::paper::{self, Mode, PaperConfig, Progress};

use crate::plot::XyPanel;
use crate::Failure;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Three seeds at 1K and 10K rules, short runs: minutes (the default).
    #[arg(long, conflicts_with = "full")]
    pub quick: bool,
    /// The 12 seeds at 1K, 10K, 100K and 500K rules: hours; resumable (each measurement is
    /// kept as a cell under json/cells/ the moment it is done).
    #[arg(long)]
    pub full: bool,
    /// The ClassBench data: rules/ and traces/ (default: $RQVS_CLASSBENCH_DIR, else
    /// ../shared/data/classbench).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Where the page (README.md) and each figure's JSON (json/) go (default: docs/paper for
    /// --full, target/paper-quick for --quick).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Only these figures, comma-separated (table2, fig3, fig5, fig7, fig7b, fig8, fig9, fig10, fig11,
    /// fig12, fig13, fig14, fig19, fig15, fig17, coflows, ovs).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Measure every cell again, even those kept.
    #[arg(long)]
    pub fresh: bool,
    /// Reuse cells kept at another commit (by default they are measured again); the page lists
    /// the commits each figure's cells came from.
    #[arg(long)]
    pub any_commit: bool,
    /// Print each figure's cells and estimated time (this project's 2-core machine), measure
    /// nothing.
    #[arg(long)]
    pub estimate: bool,
}

pub fn run(a: &Args) -> Result<(), Failure> {
    let mode = if a.full { Mode::Full } else { Mode::Quick };
    let data = a.data.clone().unwrap_or_else(|| {
        std::env::var_os("RQVS_CLASSBENCH_DIR")
            .map_or_else(|| PathBuf::from("../shared/data/classbench"), PathBuf::from)
    });
    let out = a.out.clone().unwrap_or_else(|| {
        PathBuf::from(match mode {
            Mode::Full => "docs/paper",
            Mode::Quick => "target/paper-quick",
        })
    });
    let cfg = PaperConfig {
        data,
        mode,
        only: (!a.only.is_empty()).then(|| a.only.clone()),
        out: out.join("json"),
        fresh: a.fresh,
        any_commit: a.any_commit,
        rqvs: std::env::current_exe().ok(),
    };
    if a.estimate {
        crate::report::stdout(estimate(&cfg)?.as_bytes());
        return Ok(());
    }
    let t = std::time::Instant::now();
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = ProgressBar::new(0);
        b.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} cells  {msg}")
                .expect("a valid template")
                .progress_chars("=> "),
        );
        b
    });
    let outcome = paper::run(&cfg, &mut |p| match (p, &bar) {
        (Progress::Plan { total, .. }, Some(b)) => b.set_length(total as u64),
        (Progress::Plan { total, est_s }, None) => {
            rqvs_switch::diag!(
                "rqvs paper: {total} cells planned, ~{} on this project's machine if none is kept",
                hms(est_s)
            )
        }
        (Progress::Line(msg), Some(b)) => b.println(format!("rqvs paper: {msg}")),
        (Progress::Line(msg), None) => rqvs_switch::diag!("rqvs paper [{:>5.0} s] {msg}", t.elapsed().as_secs_f64()),
        (Progress::Cell { name, done, total, left_s, .. }, Some(b)) => {
            b.set_length(total as u64);
            b.set_position(done as u64);
            b.set_message(format!("ETA {}  (last: {name})", hms(left_s)));
        }
        (Progress::Cell { name, measured_s: Some(s), done, total, left_s }, None) => rqvs_switch::diag!(
            "rqvs paper [{:>5.0} s] {name} measured in {s:.1} s ({done}/{total} cells, ETA {})",
            t.elapsed().as_secs_f64(),
            hms(left_s)
        ),
        (Progress::Cell { .. }, None) => {}
    });
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let outcome = outcome?;
    for (_, f) in &outcome.figures {
        let Ok(f) = f else { continue };
        if f.panels.is_empty() {
            continue;
        }
        let panels: Vec<XyPanel> = f
            .panels
            .iter()
            .map(|p| XyPanel {
                x_desc: p.x_desc.clone(),
                y_desc: p.y_desc.clone(),
                log_y: p.log_y,
                lines: p.lines.clone(),
            })
            .collect();
        crate::plot::xy_panels(&out.join(format!("{}.svg", f.id)), &f.title, 2, &panels)?;
    }
    let page = out.join("README.md");
    std::fs::write(&page, paper::page(&cfg, &outcome))
        .map_err(|e| Failure(format!("{}: cannot write: {e}", page.display())))?;
    rqvs_switch::diag!("rqvs paper: {} written ({:.0} s)", page.display(), t.elapsed().as_secs_f64());
    let failed = outcome.failed();
    if !failed.is_empty() {
        return Err(Failure(format!("figures not produced: {}", failed.join("; "))));
    }
    let bad = outcome.mismatches();
    if bad > 0 {
        return Err(Failure(format!(
            "{bad} packets got an action other than the reference's (see {})",
            page.display()
        )));
    }
    Ok(())
}

/// The plan of `cfg`: per figure its cells (a shared cell counted where it is first planned),
/// those already kept, and the estimated time of the rest.
fn estimate(cfg: &PaperConfig) -> Result<String, Failure> {
    let specs = paper::selected(cfg)?;
    let only: Vec<String> = specs.iter().map(|s| s.id.to_string()).collect();
    let mut seen = std::collections::HashSet::new();
    let mut s = format!(
        "rqvs paper --{}: estimated on this project's 2-core machine (timing probes; the run scales the ETA by what it measures)\n\n{:<8} {:>6} {:>6} {:>10}\n",
        cfg.mode.name(),
        "figure",
        "cells",
        "kept",
        "time"
    );
    let dir = cfg.out.join("cells").join(cfg.mode.name());
    let (mut all, mut all_kept, mut all_s) = (0, 0, 0.0);
    for (id, units) in cells::plan(cfg.mode, Some(&only)) {
        let units: Vec<_> = units.into_iter().filter(|u| seen.insert(u.name.clone())).collect();
        let kept: Vec<bool> =
            units.iter().map(|u| !cfg.fresh && dir.join(format!("{}.json", u.name)).is_file()).collect();
        let left: f64 = units.iter().zip(&kept).filter(|(_, k)| !**k).map(|(u, _)| u.est_s).sum();
        let n_kept = kept.iter().filter(|k| **k).count();
        s.push_str(&format!("{id:<8} {:>6} {n_kept:>6} {:>10}\n", units.len(), hms(left)));
        all += units.len();
        all_kept += n_kept;
        all_s += left;
    }
    s.push_str(&format!("{:<8} {all:>6} {all_kept:>6} {:>10}\n", "total", hms(all_s)));
    Ok(s)
}
