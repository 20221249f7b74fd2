//! `rqvs paper`: the NSDI'22 paper's evaluation in one command (`rqvs_experiment::paper`):
//! options, progress on stderr, the page and each figure's JSON written.

use std::path::PathBuf;

use rqvs_experiment::paper::{self, Mode, PaperConfig};

use crate::plot::XyPanel;
use crate::Failure;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Three seeds at 1K and 10K rules, short runs: minutes (the default).
    #[arg(long, conflicts_with = "full")]
    pub quick: bool,
    /// The 12 seeds at 1K, 10K, 100K and 500K rules: hours; resumable (each figure's JSON is kept).
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
    /// Measure every figure again, even those whose JSON is kept.
    #[arg(long)]
    pub fresh: bool,
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
        rqvs: std::env::current_exe().ok(),
    };
    let t = std::time::Instant::now();
    let outcome = paper::run(&cfg, &mut |msg| eprintln!("rqvs paper [{:>5.0} s] {msg}", t.elapsed().as_secs_f64()))?;
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
    eprintln!("rqvs paper: {} written ({:.0} s)", page.display(), t.elapsed().as_secs_f64());
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
