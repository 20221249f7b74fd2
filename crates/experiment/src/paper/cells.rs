//! Cells: every expensive unit of `rqvs paper`'s work (one compare of a seed and size, one
//! rate search, one training measurement, …) kept on disk the moment it finishes, so that a run
//! killed at any moment loses at most the unit it was measuring.
//!
//! - **Where**: `OUT/cells/MODE/GROUP/NAME.json` (`OUT` is the figures' JSON directory;
//!   `GROUP` is the figure, or `compare` for the replays that several figures read). The name
//!   is `Ctx::cell`'s: the set and what was measured (`acl1_100k_rate_orig`).
//! - **What it holds** ([`CellFile`]): the key — everything that determines the measurement,
//!   mostly the command that reproduces it, with the mode — the build's commit and dirty flag,
//!   the CPU, the seconds it took, and the value the figure reads.
//! - **Reading back**: a cell is reused when its file parses, its key is the one asked for, its
//!   CPU is this one and its commit is this build's. A cell from **another commit** is measured
//!   again, unless [`super::PaperConfig::any_commit`] is set: then it is reused and the page
//!   says, per figure, which commits its cells came from (so a long run can resume after a
//!   rebuild at a commit that does not change what it measures, and a reader still sees the
//!   mix). A cell from another CPU is always measured again. An unreadable cell (a run killed
//!   while writing, an edited file) is measured again; cells are written to a temporary file and
//!   renamed, so a kill leaves either the old cell or the new one.
//! - **Plan and ETA**: each figure's [`super::FigureSpec::plan`] lists the cells it will ask for,
//!   each with an estimate of its seconds on this project's 2-core machine ([`est_s`], from
//!   timing probes); [`Eta`] turns what is left into an ETA, scaled by how the cells measured so
//!   far compared with their estimates. `rqvs paper --estimate` prints the plan per figure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{Ctx, Mode};
use crate::Error;

/// A cell on disk.
#[derive(Serialize, Deserialize)]
pub struct CellFile<T> {
    /// What determines the measurement (compared in full when reading back).
    pub key: String,
    pub git_rev: String,
    pub git_dirty: Option<bool>,
    pub cpu: String,
    /// Wall time the measurement took.
    pub seconds: f64,
    pub value: T,
}

/// The build's commit as cells and pages give it: the revision, `+dirty` for a build with
/// uncommitted changes.
pub fn this_commit() -> String {
    let b = &crate::report::BUILD;
    format!("{}{}", b.git_rev, if b.git_dirty == Some(true) { "+dirty" } else { "" })
}

fn commit_of<T>(c: &CellFile<T>) -> String {
    format!("{}{}", c.git_rev, if c.git_dirty == Some(true) { "+dirty" } else { "" })
}

/// A cell the plan expects: its path under the mode's directory (`compare/acl1_1k`) and the
/// seconds it is estimated to take.
#[derive(Clone, Debug)]
pub struct Unit {
    pub name: String,
    pub est_s: f64,
}

impl Unit {
    pub fn new(group: &str, name: &str, est_s: f64) -> Unit {
        Unit { name: format!("{group}/{name}"), est_s }
    }
}

/// Estimated seconds of replaying `designs` designs for `pmd_s` seconds of PMD time each on
/// `size` (loading the rules and trace once, building each design, verifying), from timing
/// probes of `rqvs compare` on the project's machine (2 cores, shared; idle priority).
pub fn est_s(size: &str, pmd_s: f64, designs: u32) -> f64 {
    let (load, build) = match size {
        "1k" => (0.5, 0.3),
        "10k" => (1.0, 0.5),
        "100k" => (3.0, 2.0),
        _ => (8.0, 7.0),
    };
    load + f64::from(designs) * (build + 1.1 * pmd_s)
}

/// What the figure being run used: cells kept and measured, their commits and seconds.
#[derive(Default)]
pub struct Tally {
    pub kept: u64,
    pub measured: u64,
    /// Seconds the cells took when they were measured (kept ones included).
    pub seconds: f64,
    pub commits: BTreeMap<String, u64>,
    /// Cells measured again, and why (another commit, unreadable).
    pub remeasured: Vec<String>,
}

/// The ETA of a run: the plan's estimated seconds, those done, and how measured cells compared
/// with their estimates.
#[derive(Default)]
pub struct Eta {
    pub units: usize,
    pub total_est: f64,
    pub done: usize,
    pub done_est: f64,
    measured_est: f64,
    measured_wall: f64,
    /// Cells counted (a shared cell counts once).
    seen: std::collections::HashSet<String>,
    pub plan: BTreeMap<String, f64>,
}

impl Eta {
    pub fn new(units: &[Unit]) -> Eta {
        let plan: BTreeMap<String, f64> = units.iter().map(|u| (u.name.clone(), u.est_s)).collect();
        Eta { units: plan.len(), total_est: plan.values().sum(), plan, ..Eta::default() }
    }

    /// A cell done: kept (`wall` None) or measured in `wall` seconds.
    pub fn done(&mut self, name: &str, wall: Option<f64>) {
        if !self.seen.insert(name.to_string()) {
            return;
        }
        // A cell the plan does not have (none should be: a test checks the plan) counts nothing.
        let Some(&est) = self.plan.get(name) else { return };
        self.done += 1;
        self.done_est += est;
        if let Some(w) = wall {
            self.measured_est += est;
            self.measured_wall += w;
        }
    }

    /// Seconds left: the estimates of the cells left, scaled by measured / estimated so far.
    pub fn left_s(&self) -> f64 {
        let scale = if self.measured_est > 0.0 { self.measured_wall / self.measured_est } else { 1.0 };
        (self.total_est - self.done_est).max(0.0) * scale
    }
}

/// Hours, minutes, seconds: `2h05m`, `4m10s`, `12s`.
pub fn hms(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

impl Ctx<'_> {
    fn cell_path(&self, group: &str, name: &str) -> PathBuf {
        self.cfg.out.join("cells").join(self.cfg.mode.name()).join(group).join(format!("{name}.json"))
    }

    /// The value of cell `group/name`: read back when kept with this `key` (and this commit and
    /// CPU, see the module's docs), else measured by `measure` and kept at once.
    pub(super) fn cell<T: Serialize + DeserializeOwned>(
        &self,
        group: &str,
        name: &str,
        key: &str,
        measure: impl FnOnce() -> Result<T, Error>,
    ) -> Result<T, Error> {
        let path = self.cell_path(group, name);
        let id = format!("{group}/{name}");
        let key = format!("{} {key}", self.cfg.mode.name());
        let cpu = crate::report::cpu_model();
        let here = this_commit();
        // --fresh measures each cell again once: a shared cell measured by this run is read back.
        if !self.cfg.fresh || self.measured_now.borrow().contains(&id) {
            match read_cell::<T>(&path) {
                Some(Ok(c)) if c.key == key && c.cpu == cpu && (self.cfg.any_commit || commit_of(&c) == here) => {
                    let mut t = self.tally.borrow_mut();
                    t.kept += 1;
                    t.seconds += c.seconds;
                    *t.commits.entry(commit_of(&c)).or_default() += 1;
                    drop(t);
                    self.unit_done(&id, None);
                    return Ok(c.value);
                }
                Some(Ok(c)) => {
                    let why = if c.key != key {
                        "kept with other settings".to_string()
                    } else if c.cpu != cpu {
                        format!("kept on another CPU ({})", c.cpu)
                    } else {
                        format!("kept at commit {} (--any-commit reuses it)", commit_of(&c))
                    };
                    self.remeasure(&id, &why);
                }
                Some(Err(e)) => self.remeasure(&id, &format!("unreadable ({e})")),
                None => {}
            }
        }
        let t = Instant::now();
        let value = measure()?;
        let seconds = t.elapsed().as_secs_f64();
        let b = &crate::report::BUILD;
        let text = serde_json::to_string(&CellFile {
            key,
            git_rev: b.git_rev.into(),
            git_dirty: b.git_dirty,
            cpu,
            seconds,
            value,
        })?;
        write_atomic(&path, &text)?;
        self.measured_now.borrow_mut().insert(id.clone());
        // The figure reads the value (and the seconds) as a resumed run will: from the text (a
        // float's last digit can differ after a round trip through JSON).
        let file: CellFile<T> = serde_json::from_str(&text)?;
        let mut t = self.tally.borrow_mut();
        t.measured += 1;
        t.seconds += file.seconds;
        *t.commits.entry(here).or_default() += 1;
        drop(t);
        self.unit_done(&id, Some(seconds));
        Ok(file.value)
    }

    fn remeasure(&self, id: &str, why: &str) {
        self.tally.borrow_mut().remeasured.push(format!("{id}: {why}"));
    }
}

/// A cell file: `None` when absent, `Some(Err)` when it does not parse.
fn read_cell<T: DeserializeOwned>(path: &Path) -> Option<Result<CellFile<T>, String>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => return Some(Err(e.to_string())),
    };
    Some(serde_json::from_str(&text).map_err(|e| e.to_string()))
}

/// Writes `text` to `path` through a temporary file beside it and a rename: a reader (or a
/// run after a kill) sees the old file or the new one, never half of one.
pub fn write_atomic(path: &Path, text: &str) -> Result<(), Error> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| Error(format!("{}: cannot create: {e}", dir.display())))?;
    let name = path.file_name().map_or("cell".into(), |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).map_err(|e| Error(format!("{}: cannot write: {e}", tmp.display())))?;
    std::fs::rename(&tmp, path).map_err(|e| Error(format!("{}: cannot write: {e}", path.display())))
}

/// Every planned cell of `mode` for the figures `only` (all for `None`), shared cells once.
pub fn plan(mode: Mode, only: Option<&[String]>) -> Vec<(&'static str, Vec<Unit>)> {
    super::FIGURES
        .iter()
        .filter(|f| only.is_none_or(|o| o.iter().any(|id| id == f.id)))
        .map(|f| (f.id, (f.plan)(mode)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eta_scales_what_is_left_by_what_was_measured() {
        let mut e =
            Eta::new(&[Unit::new("compare", "a", 10.0), Unit::new("fig8", "b", 30.0), Unit::new("fig8", "c", 60.0)]);
        assert_eq!((e.units, e.left_s()), (3, 100.0));
        // Kept: done, no scale yet.
        e.done("compare/a", None);
        assert_eq!((e.done, e.left_s()), (1, 90.0));
        // Measured in twice its estimate: what is left takes twice as long.
        e.done("fig8/b", Some(60.0));
        assert_eq!((e.done, e.left_s()), (2, 120.0));
        // A shared cell counts once; one the plan does not have counts nothing.
        e.done("fig8/b", Some(60.0));
        e.done("fig9/x", Some(5.0));
        assert_eq!((e.done, e.left_s()), (2, 120.0));
        e.done("fig8/c", Some(30.0));
        assert_eq!((e.done, e.left_s()), (3, 0.0));
    }

    #[test]
    fn hms_reads_at_a_glance() {
        assert_eq!(hms(12.4), "12s");
        assert_eq!(hms(250.0), "4m10s");
        assert_eq!(hms(7500.0), "2h05m");
        assert_eq!(hms(-3.0), "0s");
    }

    #[test]
    fn a_cell_is_written_whole_or_not_at_all() {
        let dir = std::env::temp_dir().join(format!("rqvs-cells-{}", std::process::id()));
        let path = dir.join("g/cell.json");
        write_atomic(&path, "{\"a\":1}").unwrap();
        write_atomic(&path, "{\"a\":2}").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":2}");
        let left: Vec<_> = std::fs::read_dir(dir.join("g")).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("cell.json")], "no temporary file left");
        assert!(read_cell::<u32>(&dir.join("g/none.json")).is_none());
        std::fs::write(dir.join("g/cut.json"), "{\"key\":\"x\",\"git_r").unwrap();
        assert!(matches!(read_cell::<u32>(&dir.join("g/cut.json")), Some(Err(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn every_planned_cell_has_a_unique_name_within_its_figure() {
        for mode in [Mode::Quick, Mode::Full] {
            for (id, units) in plan(mode, None) {
                let mut names: Vec<&str> = units.iter().map(|u| u.name.as_str()).collect();
                let n = names.len();
                names.sort_unstable();
                names.dedup();
                assert_eq!(names.len(), n, "{id}: {names:?}");
                assert!(units.iter().all(|u| u.est_s > 0.0), "{id}");
            }
        }
    }
}
