//! `rqvs paper`: the NSDI'22 paper's evaluation ("Scaling Open vSwitch with a Computational
//! Cache") run on the shared ClassBench data, each figure beside the paper's own numbers.
//!
//! A **figure** ([`Figure`]) is a table of what rqvs measured, the one-line **claims** the
//! paper makes about it (each with the paper's number, rqvs's, and whether the claim holds
//! here), the commands that reproduce each measurement one by one, and the packets verified
//! against the reference classifier with their mismatches. [`run`] computes the figures of a
//! [`Mode`] — `quick` (three seeds at 1K/10K rules, short runs: minutes) or `full` (every seed
//! at 1K/10K/100K/500K: hours) — and [`page`] renders them as one Markdown page with the CPU
//! and the commits they came from.
//!
//! **Resuming**: every expensive unit of work — one compare of a seed and size (shared by the
//! figures that read it), one rate search, one run sampled over time, one training measurement —
//! is a **cell** ([`cells`]), kept on disk as soon as it is measured and read back by the next
//! run, so a run killed at any moment loses at most the cell it was measuring; a figure is
//! rebuilt from its cells every run (cheap) and its JSON written beside them.
//! [`PaperConfig::fresh`] measures every cell again; a cell kept at another commit is measured
//! again unless [`PaperConfig::any_commit`] (the page then lists each figure's commits). The
//! plan of cells ([`cells::plan`]) gives the progress and its ETA ([`Progress`]).
//!
//! **Partial**: the figures built so far are [`FIGURES`]; the rest of the paper's list
//! ([`NOT_YET`]) is listed on the page as not produced yet, so a reader never mistakes a
//! missing figure for a reproduced one. A figure that runs fewer cells than the paper (a bounded
//! setting) says which and why in its notes (`not_run`).
//!
//! The files: this one (configuration, figures, the run), `cells.rs` (cells, the plan, the ETA),
//! `page.rs` (the Markdown page), `figures/` (each figure's measurement and claims).

pub mod cells;
mod figures;

mod page;

use std::cell::RefCell;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::replay::{self, DesignKind, ReplayConfig, Run, Sample};
use crate::Error;
use cells::{Eta, Tally, Unit};
pub use page::page;

/// How much of the evaluation to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// acl1, fw1, ipc1 at 1K and 10K rules, short runs: minutes (what CI runs).
    Quick,
    /// The 12 seeds at 1K, 10K, 100K and 500K rules: hours.
    Full,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Quick => "quick",
            Mode::Full => "full",
        }
    }

    /// The ClassBench seeds the figures run on.
    pub fn seeds(self) -> Vec<&'static str> {
        match self {
            Mode::Quick => vec!["acl1", "fw1", "ipc1"],
            Mode::Full => {
                vec!["acl1", "acl2", "acl3", "acl4", "acl5", "fw1", "fw2", "fw3", "fw4", "fw5", "ipc1", "ipc2"]
            }
        }
    }

    /// The rule-set sizes, smallest first (ClassBench file names: `acl1_1k`).
    pub fn sizes(self) -> Vec<&'static str> {
        match self {
            Mode::Quick => vec!["1k", "10k"],
            Mode::Full => vec!["1k", "10k", "100k", "500k"],
        }
    }

    /// Seconds of PMD time per replay.
    pub fn duration(self) -> f64 {
        match self {
            Mode::Quick => 0.3,
            Mode::Full => 4.0,
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct PaperConfig {
    /// The ClassBench data (`rules/SEED_SIZE.xz`, `traces/SEED_SIZE_trace.xz`).
    pub data: PathBuf,
    pub mode: Mode,
    /// Only these figures (ids, e.g. `fig8`); `None`: all.
    pub only: Option<Vec<String>>,
    /// Where each figure's JSON is kept (and read back from when resuming).
    pub out: PathBuf,
    /// Measure every cell again, even those kept.
    pub fresh: bool,
    /// Reuse cells kept at another commit (the page lists each figure's commits).
    pub any_commit: bool,
    /// The `rqvs` binary, for the figures that run the checkout's scripts (the OVS fidelity
    /// table); `None`: those are skipped.
    pub rqvs: Option<PathBuf>,
}

/// One of the paper's claims about a figure, and how rqvs fares.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Claim {
    /// The claim in one line, as a reader checks it.
    pub what: String,
    /// The paper's number.
    pub paper: String,
    /// rqvs's number.
    pub rqvs: String,
    /// Whether the claim holds here (`None`: not a yes/no claim).
    pub holds: Option<bool>,
}

/// A figure as measured ([`run`]).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Figure {
    /// `fig3`, `fig8`, ...
    pub id: String,
    pub title: String,
    pub mode: Mode,
    pub claims: Vec<Claim>,
    /// The table: a header and rows of cells.
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// The commands that make each measurement (one per distinct run).
    pub commands: Vec<String>,
    /// Packets checked against the reference classifier, and mismatches among them.
    pub verified: u64,
    pub mismatches: u64,
    /// What the reader should know (differences from the paper's setup).
    pub notes: Vec<String>,
    /// The figure's plot, as panels of named lines (drawn by the command line as `ID.svg` beside
    /// the page; none for a table).
    #[serde(default)]
    pub panels: Vec<Panel>,
    /// Why the figure was not measured on this machine (a tool it needs is not installed): the
    /// page says so instead of a table; not a failure.
    #[serde(default)]
    pub skipped: Option<String>,
    /// Seconds its cells took when they were measured (cells shared with other figures
    /// included).
    pub seconds: f64,
    /// The build that made the page from the cells, and the CPU.
    pub git_rev: String,
    pub cpu: String,
    /// The commits its cells were measured at, with how many cells each.
    #[serde(default)]
    pub commits: Vec<(String, u64)>,
    /// Cells of the paper's setting this figure did not run, and why (a bounded setting).
    #[serde(default)]
    pub not_run: Vec<String>,
}

/// One panel of a figure's plot: axis descriptions and named (x, y) lines.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Panel {
    pub x_desc: String,
    pub y_desc: String,
    /// A logarithmic y axis (when the values span more than a factor of 10).
    pub log_y: bool,
    pub lines: Vec<(String, Vec<(f64, f64)>)>,
}

impl Panel {
    pub fn new(x_desc: &str, y_desc: &str) -> Panel {
        Panel { x_desc: x_desc.into(), y_desc: y_desc.into(), log_y: false, lines: Vec::new() }
    }

    /// Adds a point to line `name` (created on first use).
    pub fn point(&mut self, name: &str, x: f64, y: f64) {
        match self.lines.iter_mut().find(|l| l.0 == name) {
            Some(l) => l.1.push((x, y)),
            None => self.lines.push((name.into(), vec![(x, y)])),
        }
    }
}

/// A figure of the paper: its id, title and how it is measured.
pub struct FigureSpec {
    pub id: &'static str,
    pub title: &'static str,
    run: fn(&Ctx) -> Result<Figure, Error>,
    /// The cells it asks for in a mode ([`cells::plan`]).
    pub plan: fn(Mode) -> Vec<Unit>,
}

/// The figures `rqvs paper` produces so far.
pub const FIGURES: &[FigureSpec] = &[
    FigureSpec {
        id: "table2",
        title: "Table 2: megaflow churn, and how often a model over the megaflows would need retraining",
        run: figures::table2,
        plan: figures::plan_table2,
    },
    FigureSpec {
        id: "fig3",
        title: "Fig. 3: where ORIG's PMD time goes, by rule count",
        run: figures::fig3,
        plan: figures::plan_fig3,
    },
    FigureSpec {
        id: "fig5",
        title: "Fig. 5: 60 OpenFlow rules added to a running ORIG",
        run: figures::fig5,
        plan: figures::plan_fig5,
    },
    FigureSpec {
        id: "fig7",
        title: "Table 1 / Fig. 7a: bucket size l vs training and lookup",
        run: figures::fig7,
        plan: figures::plan_fig7,
    },
    FigureSpec {
        id: "fig7b",
        title: "Fig. 7b: approximate sampling vs NuevoMatch's uniform sampling (training time)",
        run: figures::fig7b,
        plan: figures::plan_fig7b,
    },
    FigureSpec {
        id: "fig8",
        title: "Fig. 8 / 18a: ORIG, CCACHE and CFLOWS side by side (unconstrained and constant rate)",
        run: figures::fig8,
        plan: figures::plan_fig8,
    },
    FigureSpec {
        id: "fig9",
        title: "Fig. 9: throughput by the EMC's size",
        run: figures::fig9,
        plan: figures::plan_fig9,
    },
    FigureSpec {
        id: "fig10",
        title: "Fig. 10: throughput by PMD threads",
        run: figures::fig10,
        plan: figures::plan_fig10,
    },
    FigureSpec {
        id: "fig11",
        title: "Fig. 11 / 18b: megaflow-cache hash tables per packet",
        run: figures::fig11,
        plan: figures::plan_fig11,
    },
    FigureSpec {
        id: "fig12",
        title: "Fig. 12 and §3: training time (CCACHE's models over megaflows, CFLOWS' over the rules)",
        run: figures::fig12,
        plan: figures::plan_fig12,
    },
    FigureSpec {
        id: "fig13",
        title: "Fig. 13: CCACHE with slower retraining",
        run: figures::fig13,
        plan: figures::plan_fig13,
    },
    FigureSpec {
        id: "fig19",
        title: "Fig. 19: CCACHE over time under upcalls, with fast and slowed training",
        run: figures::fig19,
        plan: figures::plan_fig19,
    },
    FigureSpec {
        id: "fig14",
        title: "Fig. 4 / 14: throughput and upcalls over time",
        run: figures::fig14,
        plan: figures::plan_fig14,
    },
    FigureSpec {
        id: "fig15",
        title: "Fig. 15: update rate at 75% / 90% coverage",
        run: figures::fig15,
        plan: figures::plan_fig15,
    },
    FigureSpec {
        id: "fig17",
        title: "Fig. 16–17: a bundle of rules into CFLOWS, instant vs delayed",
        run: figures::fig17,
        plan: figures::plan_fig17,
    },
    FigureSpec {
        id: "coflows",
        title: "Seed 004: flow prediction for coflows, by coflowiness (`rqvs coflows`)",
        run: figures::coflows,
        plan: figures::plan_coflows,
    },
    FigureSpec {
        id: "ovs",
        title: "Fidelity against real Open vSwitch 3.1",
        run: figures::ovs_fidelity,
        plan: figures::plan_ovs_fidelity,
    },
];

/// The paper's figures and tables not produced yet (listed on the page).
pub const NOT_YET: &[&str] =
    &["Fig. 7c (NuevoMatchUP's training implementation against NuevoMatch's: NuevoMatch's Python/TensorFlow \
     training is not part of rqvs, so there is nothing to time it against; see Fig. 7b's notes)"];

/// What [`run`] tells its caller as it goes.
pub enum Progress<'a> {
    /// The plan, before anything runs: its cells and their estimated seconds.
    Plan { total: usize, est_s: f64 },
    /// A line for the log: a figure starts, what it kept and measured.
    Line(&'a str),
    /// A cell is done (kept: `measured_s` None): cells done of the plan's, and the seconds left.
    Cell { name: &'a str, measured_s: Option<f64>, done: usize, total: usize, left_s: f64 },
}

/// What the figures share while they run: the configuration, the cells used by the figure
/// being run, the plan's progress.
pub struct Ctx<'a> {
    pub cfg: PaperConfig,
    tally: RefCell<Tally>,
    eta: RefCell<Eta>,
    progress: RefCell<&'a mut dyn FnMut(Progress<'_>)>,
    /// The cells this run measured (`--fresh` measures each once).
    measured_now: RefCell<std::collections::HashSet<String>>,
    /// Sets found past the slow path's size limit, with the reason: the figures after the first
    /// that tried one list it as not run without loading it again.
    too_large: RefCell<std::collections::HashMap<String, String>>,
}

/// What a figure keeps of a replay (a cell's value).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunSummary {
    #[serde(with = "design_name")]
    pub design: DesignKind,
    pub mpps: f64,
    pub verified: u64,
    pub mismatches: u64,
    pub share_emc: f64,
    pub share_megaflow: f64,
    pub share_upcall: f64,
    pub share_model: f64,
    pub subtables_per_hit: f64,
    pub masks: u64,
    pub megaflows: u64,
    /// Upcalls per second of PMD time.
    pub upcalls_per_s: f64,
    /// Time to build the design (CFLOWS: with its first model's training), ms.
    pub build_ms: f64,
    /// The learned model's last training and the entries it holds (CCACHE: megaflows;
    /// CFLOWS: rules).
    pub training_ms: Option<f64>,
    pub model_entries: u64,
    pub model_swaps: u64,
    /// EMC hits over packets received.
    pub emc_hits: f64,
    /// The 100 ms samples and the update log (the figures over time).
    pub series: Vec<Sample>,
    pub update_log: Vec<serde_json::Value>,
}

/// A design as its name in a cell.
mod design_name {
    use serde::{de::Error as _, Deserialize, Deserializer, Serializer};

    use crate::replay::DesignKind;

    pub fn serialize<S: Serializer>(d: &DesignKind, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(d.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DesignKind, D::Error> {
        let s = String::deserialize(d)?;
        DesignKind::from_name(&s).ok_or_else(|| D::Error::custom(format!("unknown design '{s}'")))
    }
}

impl RunSummary {
    pub fn of(r: &Run) -> RunSummary {
        let c = &r.c;
        let share = |ns: u64| ns as f64 / c.pmd_ns.max(1) as f64;
        RunSummary {
            design: r.design,
            mpps: r.mpps,
            verified: r.verified as u64,
            mismatches: r.mismatches as u64,
            share_emc: share(c.emc_ns),
            share_megaflow: share(c.dpcls_ns),
            share_upcall: share(c.upcall_ns),
            share_model: share(c.model_ns),
            subtables_per_hit: c.avg_subtables_per_hit(),
            masks: c.masks,
            megaflows: c.megaflows,
            upcalls_per_s: c.upcall as f64 / (c.pmd_ns.max(1) as f64 / 1e9),
            build_ms: r.build_ms,
            training_ms: match &r.report {
                rqvs_datapath::DesignReport::Ccache(_, cc) if cc.model_swaps > 0 => Some(cc.last_training_ms),
                rqvs_datapath::DesignReport::Cflows(cf) => cf.last_training_ms,
                _ => None,
            },
            model_entries: c.model_entries,
            model_swaps: c.model_swaps,
            emc_hits: c.emc_hit as f64 / c.received.max(1) as f64,
            series: r.series.clone(),
            update_log: r.update_log.clone(),
        }
    }
}

impl Ctx<'_> {
    fn rules(&self, seed: &str, size: &str) -> PathBuf {
        self.cfg.data.join("rules").join(format!("{seed}_{size}.xz"))
    }

    fn trace(&self, seed: &str, size: &str) -> PathBuf {
        self.cfg.data.join("traces").join(format!("{seed}_{size}_trace.xz"))
    }

    /// The rules of `seed`/`size` and its trace's keys (as datapaths see them: wire keys).
    fn rules_and_keys(&self, seed: &str, size: &str) -> Result<(Vec<rqvs_flow::Rule>, Vec<rqvs_flow::FlowKey>), Error> {
        let rules = crate::inputs::load_rules(Some(&self.rules(seed, size)))?;
        let packets = crate::inputs::load_packets(Some(&self.trace(seed, size)), 1)?;
        Ok((rules, packets.entries.into_iter().map(|e| e.key.wire()).collect()))
    }

    /// The replay settings of a figure's run on `seed`/`size`: the paper's EMC insertion
    /// probability (0.2), the mode's duration, 1,000 packets verified.
    fn replay_config(&self, seed: &str, size: &str) -> ReplayConfig {
        ReplayConfig {
            rules: Some(self.rules(seed, size)),
            trace: Some(self.trace(seed, size)),
            emc_prob: 0.2,
            duration: Some(self.cfg.mode.duration()),
            verify: Some(1000),
            ..ReplayConfig::default()
        }
    }

    /// The command line of [`Ctx::replay_config`] plus `extra`.
    fn replay_command(&self, command: &str, seed: &str, size: &str, extra: &str) -> String {
        self.replay_command_for(command, seed, size, self.cfg.mode.duration(), extra)
    }

    /// [`Ctx::replay_command`] for a run of `duration` seconds (a figure with its own length).
    fn replay_command_for(&self, command: &str, seed: &str, size: &str, duration: f64, extra: &str) -> String {
        format!(
            "rqvs {command} --rules {} --trace {} --emc-prob 0.2 --duration {duration} --verify 1000{extra}",
            self.rules(seed, size).display(),
            self.trace(seed, size).display(),
        )
    }

    /// The three designs replayed on `seed`/`size`: a cell shared by the figures that read it.
    /// `None` when the set is past rqvs's size limits (its port ranges expand to more entries
    /// than the slow path's table may hold, [`rqvs_classify::ofproto::MAX_EXPANDED`], so ORIG
    /// and CCACHE cannot load it): then `f` lists it as not run, with the reason, and the figure
    /// is made from the other sets. Any other error is the figure's.
    fn compare(&self, f: &mut Figure, seed: &str, size: &str) -> Result<Option<Vec<RunSummary>>, Error> {
        let name = format!("{seed}_{size}");
        if let Some(why) = self.too_large.borrow().get(&name) {
            f.not_run.push(why.clone());
            return Ok(None);
        }
        let key = self.replay_command("compare", seed, size, " --designs orig,ccache,cflows");
        let e = match self.designs_cell("compare", &name, &key, &self.replay_config(seed, size)) {
            Ok(runs) => return Ok(Some(runs)),
            Err(e) => e,
        };
        // Only after a failure, so a kept cell never costs a parse: is the set past the limit?
        let rules = crate::inputs::load_rules(Some(&self.rules(seed, size)))?;
        let entries: usize = rules.iter().map(|r| r.matches.expand_port_ranges().len()).sum();
        if entries <= rqvs_classify::ofproto::MAX_EXPANDED {
            return Err(e);
        }
        let why = format!(
            "{name}: cannot be loaded by ORIG and CCACHE: its {} rules expand to {entries} entries, past the \
             limit of {} in the slow path's table ({})",
            rules.len(),
            rqvs_classify::ofproto::MAX_EXPANDED,
            e.0
        );
        self.too_large.borrow_mut().insert(name, why.clone());
        f.not_run.push(why);
        Ok(None)
    }

    /// The three designs replayed with `c` (`command` reproduces it): a cell of `group`.
    fn designs_cell(&self, group: &str, name: &str, command: &str, c: &ReplayConfig) -> Result<Vec<RunSummary>, Error> {
        self.cell(group, name, command, || {
            let p = replay::prepare(c)?;
            DesignKind::ALL.iter().map(|&d| replay::run_design(c, &p, d).map(|r| RunSummary::of(&r))).collect()
        })
    }

    /// One design replayed with `c` (`command` reproduces it): a cell of `group`.
    fn run_cell(
        &self,
        group: &str,
        name: &str,
        command: &str,
        c: &ReplayConfig,
        design: DesignKind,
    ) -> Result<RunSummary, Error> {
        self.cell(group, name, command, || {
            let p = replay::prepare(c)?;
            replay::run_design(c, &p, design).map(|r| RunSummary::of(&r))
        })
    }

    /// A line for the log.
    fn line(&self, text: &str) {
        (self.progress.borrow_mut())(Progress::Line(text));
    }

    /// Cell `name` done (kept: `measured_s` None): the progress and its ETA.
    fn unit_done(&self, name: &str, measured_s: Option<f64>) {
        let (done, total, left_s) = {
            let mut e = self.eta.borrow_mut();
            e.done(name, measured_s);
            (e.done, e.units, e.left_s())
        };
        (self.progress.borrow_mut())(Progress::Cell { name, measured_s, done, total, left_s });
    }

    /// An empty figure `id` of [`FIGURES`].
    fn figure(&self, id: &str) -> Figure {
        let title = FIGURES.iter().find(|f| f.id == id).map_or(id, |f| f.title);
        Figure {
            id: id.into(),
            title: title.into(),
            mode: self.cfg.mode,
            claims: Vec::new(),
            header: Vec::new(),
            rows: Vec::new(),
            commands: Vec::new(),
            verified: 0,
            mismatches: 0,
            notes: Vec::new(),
            panels: Vec::new(),
            skipped: None,
            seconds: 0.0,
            git_rev: cells::this_commit(),
            cpu: crate::report::cpu_model(),
            commits: Vec::new(),
            not_run: Vec::new(),
        }
    }
}

/// Every figure's outcome: measured (or read back), or the error that stopped it.
pub struct Outcome {
    pub figures: Vec<(&'static FigureSpec, Result<Figure, Error>)>,
}

impl Outcome {
    /// Mismatches over every figure.
    pub fn mismatches(&self) -> u64 {
        self.figures.iter().filter_map(|(_, f)| f.as_ref().ok()).map(|f| f.mismatches).sum()
    }

    /// The figures that could not be produced.
    pub fn failed(&self) -> Vec<String> {
        self.figures.iter().filter_map(|(s, f)| f.as_ref().err().map(|e| format!("{}: {e}", s.id))).collect()
    }
}

/// The figures of `cfg` in [`FIGURES`]' order (an unknown id is an error).
pub fn selected(cfg: &PaperConfig) -> Result<Vec<&'static FigureSpec>, Error> {
    if let Some(only) = &cfg.only {
        if let Some(bad) = only.iter().find(|id| !FIGURES.iter().any(|f| f.id == id.as_str())) {
            let known: Vec<&str> = FIGURES.iter().map(|f| f.id).collect();
            return Err(Error(format!("--only: unknown figure '{bad}' (known: {})", known.join(", "))));
        }
    }
    Ok(FIGURES.iter().filter(|f| cfg.only.as_ref().is_none_or(|o| o.iter().any(|id| id == f.id))).collect())
}

/// Runs the figures of `cfg`, each from its cells (kept ones read back, the others measured
/// and kept at once), telling `progress` what it does.
pub fn run(cfg: &PaperConfig, progress: &mut dyn FnMut(Progress<'_>)) -> Result<Outcome, Error> {
    if !cfg.data.join("rules").is_dir() {
        return Err(Error(format!(
            "{}: no ClassBench data here (expected rules/ and traces/; --data DIR)",
            cfg.data.display()
        )));
    }
    let specs = selected(cfg)?;
    std::fs::create_dir_all(&cfg.out).map_err(|e| Error(format!("{}: cannot create: {e}", cfg.out.display())))?;
    let units: Vec<Unit> = specs.iter().flat_map(|s| (s.plan)(cfg.mode)).collect();
    let ctx = Ctx {
        cfg: cfg.clone(),
        tally: RefCell::default(),
        eta: RefCell::new(Eta::new(&units)),
        progress: RefCell::new(progress),
        measured_now: RefCell::default(),
        too_large: RefCell::default(),
    };
    let (total, est_s) = {
        let e = ctx.eta.borrow();
        (e.units, e.total_est)
    };
    (ctx.progress.borrow_mut())(Progress::Plan { total, est_s });
    let mut figures = Vec::new();
    for spec in specs {
        ctx.line(&format!("{}: {}", spec.id, spec.title));
        let result = (spec.run)(&ctx);
        let tally = ctx.tally.take();
        for r in &tally.remeasured {
            ctx.line(&format!("{}: measured again: {r}", spec.id));
        }
        ctx.line(&format!("{}: {} cells kept, {} measured", spec.id, tally.kept, tally.measured));
        let result = result.map(|mut f| {
            f.seconds = tally.seconds;
            f.commits = tally.commits.into_iter().collect();
            f
        });
        // A skipped figure is not kept: the next run looks for its tools again.
        if let Some(f) = result.as_ref().ok().filter(|f| f.skipped.is_none()) {
            cells::write_atomic(&cfg.out.join(format!("{}.json", spec.id)), &serde_json::to_string_pretty(f)?)?;
        }
        figures.push((spec, result));
    }
    Ok(Outcome { figures })
}

/// The geometric mean of positive values (`None` if there are none).
fn geomean(v: &[f64]) -> Option<f64> {
    let v: Vec<f64> = v.iter().copied().filter(|x| *x > 0.0 && x.is_finite()).collect();
    (!v.is_empty()).then(|| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geomean_of_ratios() {
        assert_eq!(geomean(&[]), None);
        assert!((geomean(&[2.0, 8.0]).unwrap() - 4.0).abs() < 1e-12);
        assert!((geomean(&[4.0, 0.0, f64::NAN]).unwrap() - 4.0).abs() < 1e-12);
    }
}
