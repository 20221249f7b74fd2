//! `rqvs paper`: the NSDI'22 paper's evaluation ("Scaling Open vSwitch with a Computational
//! Cache") run on the shared ClassBench data, each figure beside the paper's own numbers.
//!
//! A **figure** ([`Figure`]) is a table of what rqvs measured, the one-line **claims** the
//! paper makes about it (each with the paper's number, rqvs's, and whether the claim holds
//! here), the commands that reproduce each measurement one by one, and the packets verified
//! against the reference classifier with their mismatches. [`run`] computes the figures of a
//! [`Mode`] — `quick` (three seeds at 1K/10K rules, short runs: minutes) or `full` (every seed
//! at 1K/10K/100K/500K: hours) — keeping each figure's JSON in the output directory, so an
//! interrupted run resumes where it stopped ([`PaperConfig::fresh`] measures again); [`page`]
//! renders them as one Markdown page with the CPU and commit they came from.
//!
//! **Partial**: the figures built so far are [`FIGURES`]; the rest of the paper's list
//! ([`NOT_YET`]) is listed on the page as not produced yet, so a reader never mistakes a
//! missing figure for a reproduced one.

mod figures;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::replay::{self, DesignKind, ReplayConfig, Run};
use crate::Error;

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
    /// Measure again even when a figure's JSON is kept.
    pub fresh: bool,
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
    /// Wall time it took, seconds.
    pub seconds: f64,
    /// The build and CPU that measured it.
    pub git_rev: String,
    pub cpu: String,
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
}

/// The figures `rqvs paper` produces so far.
pub const FIGURES: &[FigureSpec] = &[
    FigureSpec {
        id: "table2",
        title: "Table 2: megaflow churn, and how often a model over the megaflows would need retraining",
        run: figures::table2,
    },
    FigureSpec { id: "fig3", title: "Fig. 3: where ORIG's PMD time goes, by rule count", run: figures::fig3 },
    FigureSpec { id: "fig5", title: "Fig. 5: 60 OpenFlow rules added to a running ORIG", run: figures::fig5 },
    FigureSpec { id: "fig7", title: "Table 1 / Fig. 7a: bucket size l vs training and lookup", run: figures::fig7 },
    FigureSpec {
        id: "fig7b",
        title: "Fig. 7b: approximate sampling vs NuevoMatch's uniform sampling (training time)",
        run: figures::fig7b,
    },
    FigureSpec {
        id: "fig8",
        title: "Fig. 8 / 18a: ORIG, CCACHE and CFLOWS side by side (unconstrained and constant rate)",
        run: figures::fig8,
    },
    FigureSpec { id: "fig9", title: "Fig. 9: throughput by the EMC's size", run: figures::fig9 },
    FigureSpec { id: "fig10", title: "Fig. 10: throughput by PMD threads", run: figures::fig10 },
    FigureSpec { id: "fig11", title: "Fig. 11 / 18b: megaflow-cache hash tables per packet", run: figures::fig11 },
    FigureSpec {
        id: "fig12",
        title: "Fig. 12 and §3: training time (CCACHE's models over megaflows, CFLOWS' over the rules)",
        run: figures::fig12,
    },
    FigureSpec { id: "fig13", title: "Fig. 13: CCACHE with slower retraining", run: figures::fig13 },
    FigureSpec {
        id: "fig19",
        title: "Fig. 19: CCACHE over time under upcalls, with fast and slowed training",
        run: figures::fig19,
    },
    FigureSpec { id: "fig14", title: "Fig. 4 / 14: throughput and upcalls over time", run: figures::fig14 },
    FigureSpec { id: "fig15", title: "Fig. 15: update rate at 75% / 90% coverage", run: figures::fig15 },
    FigureSpec {
        id: "fig17",
        title: "Fig. 16–17: a bundle of rules into CFLOWS, instant vs delayed",
        run: figures::fig17,
    },
    FigureSpec {
        id: "coflows",
        title: "Seed 004: flow prediction for coflows, by coflowiness (`rqvs coflows`)",
        run: figures::coflows,
    },
    FigureSpec { id: "ovs", title: "Fidelity against real Open vSwitch 3.1", run: figures::ovs_fidelity },
];

/// The paper's figures and tables not produced yet (listed on the page).
pub const NOT_YET: &[&str] =
    &["Fig. 7c (NuevoMatchUP's training implementation against NuevoMatch's: NuevoMatch's Python/TensorFlow \
     training is not part of rqvs, so there is nothing to time it against; see Fig. 7b's notes)"];

/// What the figures share while they run: the configuration, and replays made for one figure
/// that another reads (Fig. 11 reads Fig. 8's runs).
pub struct Ctx {
    pub cfg: PaperConfig,
    compare: Mutex<HashMap<(String, String), Vec<RunSummary>>>,
}

/// What a figure keeps of a replay.
#[derive(Clone, Debug)]
pub struct RunSummary {
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
}

impl RunSummary {
    fn of(r: &Run) -> RunSummary {
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
        }
    }
}

impl Ctx {
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

    /// The three designs replayed on `seed`/`size` (once per paper run, shared by figures).
    fn compare(&self, seed: &str, size: &str) -> Result<Vec<RunSummary>, Error> {
        let key = (seed.to_string(), size.to_string());
        if let Some(runs) = self.compare.lock().expect("not poisoned").get(&key) {
            return Ok(runs.clone());
        }
        let c = self.replay_config(seed, size);
        let p = replay::prepare(&c)?;
        let runs = DesignKind::ALL
            .iter()
            .map(|&d| replay::run_design(&c, &p, d).map(|r| RunSummary::of(&r)))
            .collect::<Result<Vec<_>, Error>>()?;
        self.compare.lock().expect("not poisoned").insert(key, runs.clone());
        Ok(runs)
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
            git_rev: crate::report::BUILD.git_rev.into(),
            cpu: crate::report::cpu_model(),
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

fn kept(out: &Path, id: &str) -> PathBuf {
    out.join(format!("{id}.json"))
}

/// Runs (or reads back) the figures of `cfg`, telling `progress` what it does.
pub fn run(cfg: &PaperConfig, progress: &mut dyn FnMut(&str)) -> Result<Outcome, Error> {
    if !cfg.data.join("rules").is_dir() {
        return Err(Error(format!(
            "{}: no ClassBench data here (expected rules/ and traces/; --data DIR)",
            cfg.data.display()
        )));
    }
    if let Some(only) = &cfg.only {
        if let Some(bad) = only.iter().find(|id| !FIGURES.iter().any(|f| f.id == id.as_str())) {
            let known: Vec<&str> = FIGURES.iter().map(|f| f.id).collect();
            return Err(Error(format!("--only: unknown figure '{bad}' (known: {})", known.join(", "))));
        }
    }
    std::fs::create_dir_all(&cfg.out).map_err(|e| Error(format!("{}: cannot create: {e}", cfg.out.display())))?;
    let ctx = Ctx { cfg: cfg.clone(), compare: Mutex::new(HashMap::new()) };
    let mut figures = Vec::new();
    for spec in FIGURES {
        if cfg.only.as_ref().is_some_and(|o| !o.iter().any(|id| id == spec.id)) {
            continue;
        }
        let path = kept(&cfg.out, spec.id);
        if !cfg.fresh {
            if let Some(f) = read_kept(&path, cfg.mode) {
                progress(&format!("{}: kept from {} (--fresh measures again)", spec.id, path.display()));
                figures.push((spec, Ok(f)));
                continue;
            }
        }
        progress(&format!("{}: {}", spec.id, spec.title));
        let t = std::time::Instant::now();
        let result = (spec.run)(&ctx).map(|mut f| {
            f.seconds = t.elapsed().as_secs_f64();
            f
        });
        // A skipped figure is not kept: the next run looks for its tools again.
        if let Some(f) = result.as_ref().ok().filter(|f| f.skipped.is_none()) {
            let text = serde_json::to_string_pretty(f)?;
            std::fs::write(&path, text).map_err(|e| Error(format!("{}: cannot write: {e}", path.display())))?;
        }
        figures.push((spec, result));
    }
    Ok(Outcome { figures })
}

/// A kept figure of this mode (anything else is measured again).
fn read_kept(path: &Path, mode: Mode) -> Option<Figure> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str::<Figure>(&text).ok().filter(|f| f.mode == mode)
}

/// The Markdown page of an outcome.
pub fn page(cfg: &PaperConfig, o: &Outcome) -> String {
    let mut s = String::new();
    s.push_str("# The NSDI'22 paper's evaluation, reproduced by rqvs\n\n");
    s.push_str(&format!(
        "Made by `rqvs paper --{}` on the shared ClassBench data: seeds {}, sizes {}. Each figure gives the \
         paper's claims, rqvs's numbers beside the paper's, whether each claim holds here, the commands that \
         make each measurement, and the packets checked against the reference classifier. Throughput is \
         packets per second of PMD time on one core (`rqvs replay`'s model), not a NIC's line rate.\n\n",
        cfg.mode.name(),
        cfg.mode.seeds().join(", "),
        cfg.mode.sizes().join(", ")
    ));
    let ok: Vec<&Figure> = o.figures.iter().filter_map(|(_, f)| f.as_ref().ok()).collect();
    if let Some(f) = ok.first() {
        s.push_str(&format!("CPU: {}; commit {}.\n\n", f.cpu, f.git_rev));
    }
    s.push_str("## Claims\n\n");
    for f in &ok {
        for c in &f.claims {
            let mark = match c.holds {
                Some(true) => "holds",
                Some(false) => "**does not hold**",
                None => "—",
            };
            s.push_str(&format!("- {} ({}): {} — paper {}, rqvs {}\n", f.id, mark, c.what, c.paper, c.rqvs));
        }
    }
    s.push('\n');
    for (spec, f) in &o.figures {
        match f {
            Ok(f) => figure_md(&mut s, f),
            Err(e) => s.push_str(&format!("## {}\n\nNot produced: {e}\n\n", spec.title)),
        }
    }
    s.push_str("## Not produced yet\n\n");
    for n in NOT_YET {
        s.push_str(&format!("- {n}\n"));
    }
    s
}

fn figure_md(s: &mut String, f: &Figure) {
    s.push_str(&format!("## {}\n\n", f.title));
    if let Some(why) = &f.skipped {
        s.push_str(&format!("Skipped on this machine: {why}.\n\n"));
        return;
    }
    for c in &f.claims {
        let mark = match c.holds {
            Some(true) => " ✓",
            Some(false) => " ✗",
            None => "",
        };
        s.push_str(&format!("- {}{mark}: paper {}, rqvs {}\n", c.what, c.paper, c.rqvs));
    }
    s.push('\n');
    if !f.panels.is_empty() {
        s.push_str(&format!("![{}]({}.svg)\n\n", f.title, f.id));
    }
    if !f.header.is_empty() {
        s.push_str(&format!("| {} |\n", f.header.join(" | ")));
        s.push_str(&format!("|{}\n", "---|".repeat(f.header.len())));
        for r in &f.rows {
            s.push_str(&format!("| {} |\n", r.join(" | ")));
        }
        s.push('\n');
    }
    for n in &f.notes {
        s.push_str(&format!("{n}\n\n"));
    }
    s.push_str(&format!(
        "{} packets checked against the reference, {} mismatches; {:.0} s; commit {}.\n\n",
        f.verified, f.mismatches, f.seconds, f.git_rev
    ));
    s.push_str("<details><summary>Commands</summary>\n\n```sh\n");
    for c in &f.commands {
        s.push_str(c);
        s.push('\n');
    }
    s.push_str("```\n\n</details>\n\n");
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
