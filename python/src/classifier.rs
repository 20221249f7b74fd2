//! `rqvs.Classifier` and `rqvs.LiveNuevoMatch`: the classifiers over numpy headers.
//!
//! Both are frozen Python classes whose state sits behind a lock taken only with the GIL
//! released, so a long lookup in one Python thread never holds up the others (nor deadlocks with
//! a thread waiting for the lock while holding the GIL). `Classifier` uses a read-write lock:
//! lookups from several threads run at once, an insert or remove waits for them
//! (`rqvs_classify::Classifier`'s contract). `LiveNuevoMatch` is one owner's structure (its
//! `poll` swaps trained models in), so its calls take turns on a mutex; the trainer runs on its
//! own thread throughout.

use std::path::PathBuf;
use std::sync::{Mutex, RwLock};

use numpy::PyArray1;
use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rqvs_classify::nuevomatch::live::{self, Policy};
use rqvs_classify::ClassifierKind;
use rqvs_flow::formats;
use rqvs_flow::{Rule, RuleId};

use crate::error;
use crate::headers;

/// The name rule lines given as a list are known by in messages.
const RULES_NAME: &str = "<rules>";
/// The name of one inserted rule line in messages.
const RULE_NAME: &str = "<rule>";

/// Rules from a file (ClassBench or ovs-ofctl, plain or xz); errors as the command line words them.
fn rules_from_file(path: &std::path::Path) -> PyResult<Vec<Rule>> {
    formats::read_rules(path).map_err(error::from)
}

/// Rules from lines, as if they were a file's lines (ids by position among the rule lines).
fn rules_from_lines(lines: &[String]) -> PyResult<Vec<Rule>> {
    if let Some(i) = lines.iter().position(|l| l.contains('\n')) {
        return Err(PyValueError::new_err(format!(
            "{RULES_NAME}:{}: expected one rule per list item, found a line break",
            i + 1
        )));
    }
    formats::parse_rules(RULES_NAME, &lines.join("\n")).map_err(error::from)
}

/// One rule line (ClassBench, starting with `@`, or ovs-ofctl) as rule `id`. A ClassBench line
/// gets priority 0 (below every rule of a ClassBench file: as if appended to it), an ofctl line
/// its `priority=` (OpenFlow's default 32768 without one); `priority` overrides either.
fn parse_rule(line: &str, id: u32, priority: Option<u32>) -> Result<Rule, String> {
    let mut rule = formats::parse_rule_line(RULE_NAME, 1, line, id, 0).map_err(|e| e.to_string())?;
    if let Some(p) = priority {
        rule.priority = p;
    }
    Ok(rule)
}

/// The id after the largest of `rules` (0 for none).
fn next_id_after(rules: &[Rule]) -> u64 {
    rules.iter().map(|r| u64::from(r.id.0) + 1).max().unwrap_or(0)
}

/// The id an insert uses: the one asked for, or the next unused.
fn insert_id(asked: Option<u32>, next: u64) -> Result<u32, String> {
    match asked {
        Some(id) => Ok(id),
        None => u32::try_from(next).map_err(|_| "no rule id left: every id up to 4294967295 was used".to_string()),
    }
}

struct State {
    c: Box<dyn rqvs_classify::Classifier>,
    /// The id the next insert without one gets: one past the largest ever held.
    next_id: u64,
}

/// A packet classifier over rules.
#[pyclass(module = "rqvs._rqvs", frozen)]
pub struct Classifier {
    state: RwLock<State>,
    kind: &'static str,
}

impl Classifier {
    fn build(py: Python<'_>, rules: Vec<Rule>, k: ClassifierKind) -> PyResult<Classifier> {
        let next_id = next_id_after(&rules);
        let c = py.detach(|| rqvs_classify::build(k, &rules)).map_err(PyValueError::new_err)?;
        Ok(Classifier { state: RwLock::new(State { c, next_id }), kind: k.name() })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// The classifier kind called `kind`, checked before any file is read (as the command line does).
fn kind_of(kind: &str) -> PyResult<ClassifierKind> {
    ClassifierKind::from_name(kind).ok_or_else(|| {
        PyValueError::new_err(format!(
            "unknown classifier '{kind}' (known: {})",
            rqvs_classify::CLASSIFIER_NAMES.join(", ")
        ))
    })
}

#[pymethods]
impl Classifier {
    /// Builds a classifier over a rule file: ClassBench or ovs-ofctl flows (told apart by
    /// content), plain or .xz. ``kind``: ``ref``, ``tss``, ``tm``, ``ofproto``, ``nmu``,
    /// ``nmu-isets`` or ``nmu-bs``. An unreadable file raises OSError, a malformed one ValueError,
    /// with the command line's message.
    #[staticmethod]
    #[pyo3(signature = (path, kind = "nmu"))]
    fn from_file(py: Python<'_>, path: PathBuf, kind: &str) -> PyResult<Classifier> {
        let k = kind_of(kind)?;
        let rules = py.detach(|| rules_from_file(&path))?;
        Classifier::build(py, rules, k)
    }

    /// Builds a classifier over rule lines, read as the lines of a rule file: all ClassBench (rule
    /// ``i`` of ``n`` gets id ``i`` and priority ``n - i``) or all ovs-ofctl (ids in order,
    /// priorities as written).
    #[staticmethod]
    #[pyo3(signature = (rules, kind = "nmu"))]
    fn from_rules(py: Python<'_>, rules: Vec<String>, kind: &str) -> PyResult<Classifier> {
        let k = kind_of(kind)?;
        let rules = rules_from_lines(&rules)?;
        Classifier::build(py, rules, k)
    }

    /// The classifier's kind (``nmu``, ``tm``, ...).
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        py.detach(|| self.read().c.len())
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("<rqvs.Classifier kind={} rules={}>", self.kind, self.__len__(py))
    }

    /// Bytes the classifier's structures use (an estimate that counts its allocations).
    fn memory_bytes(&self, py: Python<'_>) -> usize {
        py.detach(|| self.read().c.memory_bytes())
    }

    /// Classifier-specific figures (subtables, tables, coverage, ...) by name.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = py.detach(|| self.read().c.stats());
        let d = PyDict::new(py);
        for (k, v) in stats {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// The winning rule's id for every packet of ``headers`` (numpy int64, -1 where no rule
    /// matches). ``headers``: uint32 of shape ``(n, 5)`` (nw_src, nw_dst, tp_src, tp_dst,
    /// nw_proto) up to ``(n, 11)`` (``rqvs.FIELDS`` order), or a 1-D structured array with any of
    /// ``rqvs.HEADER_DTYPE``'s fields. The GIL is released while packets are looked up.
    fn classify<'py>(&self, py: Python<'py>, headers: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let h = headers::parse(headers)?;
        let view = h.view();
        let mut out = vec![-1i64; view.len()];
        py.detach(|| {
            let s = self.read();
            headers::classify(&view, &mut out, |k, o| s.c.lookup_batch(k, o))
        })
        .map_err(PyValueError::new_err)?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// Adds one rule line (ClassBench or ovs-ofctl) and returns its id: ``id`` if given, else one
    /// past the largest id held so far. A ClassBench line gets priority 0 (below every rule of a
    /// ClassBench file, as if appended to it), an ofctl line its own ``priority=``; ``priority``
    /// overrides either. A malformed rule or an id already present raises ValueError.
    #[pyo3(signature = (rule, priority = None, id = None))]
    fn insert(&self, py: Python<'_>, rule: String, priority: Option<u32>, id: Option<u32>) -> PyResult<u32> {
        py.detach(|| {
            let mut s = self.write();
            let id = insert_id(id, s.next_id)?;
            let rule = parse_rule(&rule, id, priority)?;
            s.c.insert(rule).map_err(|e| e.to_string())?;
            s.next_id = s.next_id.max(u64::from(id) + 1);
            Ok::<u32, String>(id)
        })
        .map_err(PyValueError::new_err)
    }

    /// Removes the rule with this id; KeyError when no such rule is held.
    fn remove(&self, py: Python<'_>, id: u32) -> PyResult<()> {
        match py.detach(|| self.write().c.remove(RuleId(id))) {
            Some(_) => Ok(()),
            None => Err(PyKeyError::new_err(format!("rule id {id} is not present"))),
        }
    }
}

struct LiveState {
    live: live::LiveNuevoMatch,
    next_id: u64,
}

/// NuevoMatchUP under updates with a background trainer.
#[pyclass(module = "rqvs._rqvs", frozen)]
pub struct LiveNuevoMatch {
    state: Mutex<LiveState>,
}

impl LiveNuevoMatch {
    fn build(py: Python<'_>, rules: Vec<Rule>, policy: &str, retrain_threshold: f64) -> PyResult<LiveNuevoMatch> {
        let policy = Policy::from_name(policy).ok_or_else(|| {
            PyValueError::new_err(format!("expected policy 'instant' or 'delayed', found '{policy}'"))
        })?;
        if !(0.0..=1.0).contains(&retrain_threshold) {
            return Err(PyValueError::new_err(format!(
                "expected retrain_threshold in 0..1, found {retrain_threshold}"
            )));
        }
        let next_id = next_id_after(&rules);
        let live = py
            .detach(|| live::LiveNuevoMatch::new(&rules, policy, retrain_threshold))
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(LiveNuevoMatch { state: Mutex::new(LiveState { live, next_id }) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LiveState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the state with the GIL released, after swapping in a trained model if one is
    /// ready (and starting training if needed).
    fn with<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut LiveState) -> T + Send) -> T {
        py.detach(|| {
            let mut s = self.lock();
            s.live.poll();
            f(&mut s)
        })
    }
}

#[pymethods]
impl LiveNuevoMatch {
    /// NuevoMatchUP with live updates over a rule file (ClassBench or ovs-ofctl, plain or .xz).
    /// ``policy``: ``instant`` (an insert is visible to the next lookup) or ``delayed`` (at the
    /// next model swap). A trainer thread builds a new model when the rules inserted outside the
    /// model since the last one exceed ``retrain_threshold`` of all rules; the model is swapped in
    /// by the next call (any call: classify, insert, remove, poll).
    #[staticmethod]
    #[pyo3(signature = (path, policy = "instant", retrain_threshold = 0.1))]
    fn from_file(py: Python<'_>, path: PathBuf, policy: &str, retrain_threshold: f64) -> PyResult<LiveNuevoMatch> {
        let rules = py.detach(|| rules_from_file(&path))?;
        LiveNuevoMatch::build(py, rules, policy, retrain_threshold)
    }

    /// ``from_file`` over rule lines (read as a rule file's lines).
    #[staticmethod]
    #[pyo3(signature = (rules, policy = "instant", retrain_threshold = 0.1))]
    fn from_rules(
        py: Python<'_>,
        rules: Vec<String>,
        policy: &str,
        retrain_threshold: f64,
    ) -> PyResult<LiveNuevoMatch> {
        let rules = rules_from_lines(&rules)?;
        LiveNuevoMatch::build(py, rules, policy, retrain_threshold)
    }

    /// Rules held, staged ones (delayed policy) included.
    fn __len__(&self, py: Python<'_>) -> usize {
        self.with(py, |s| rqvs_classify::Classifier::len(s.live.current()) + s.live.staged())
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let (n, policy) = self
            .with(py, |s| (rqvs_classify::Classifier::len(s.live.current()) + s.live.staged(), s.live.policy().name()));
        format!("<rqvs.LiveNuevoMatch policy={policy} rules={n}>")
    }

    /// Like ``Classifier.classify``, on the model in use now (a trained model is swapped in first
    /// if one is ready).
    fn classify<'py>(&self, py: Python<'py>, headers: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let h = headers::parse(headers)?;
        let view = h.view();
        let mut out = vec![-1i64; view.len()];
        self.with(py, |s| headers::classify(&view, &mut out, |k, o| s.live.lookup_batch(k, o)))
            .map_err(PyValueError::new_err)?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// Like ``Classifier.insert``, by the policy.
    #[pyo3(signature = (rule, priority = None, id = None))]
    fn insert(&self, py: Python<'_>, rule: String, priority: Option<u32>, id: Option<u32>) -> PyResult<u32> {
        self.with(py, |s| {
            let id = insert_id(id, s.next_id)?;
            let rule = parse_rule(&rule, id, priority)?;
            s.live.insert(rule).map_err(|e| e.to_string())?;
            s.next_id = s.next_id.max(u64::from(id) + 1);
            Ok::<u32, String>(id)
        })
        .map_err(PyValueError::new_err)
    }

    /// Removes the rule with this id (from the model or staging); KeyError when absent.
    fn remove(&self, py: Python<'_>, id: u32) -> PyResult<()> {
        if self.with(py, |s| s.live.remove(RuleId(id))) {
            Ok(())
        } else {
            Err(PyKeyError::new_err(format!("rule id {id} is not present")))
        }
    }

    /// Swaps in a trained model if one is ready and starts training if needed; never waits.
    fn poll(&self, py: Python<'_>) {
        self.with(py, |_| ())
    }

    /// Waits until the training running now (if any) has been swapped in.
    fn finish_training(&self, py: Python<'_>) {
        self.with(py, |s| s.live.finish_training())
    }

    /// True while a model is being trained.
    #[getter]
    fn training(&self, py: Python<'_>) -> bool {
        self.with(py, |s| s.live.training())
    }

    /// Share of the rules (staged included) the learned model's iSets serve.
    #[getter]
    fn coverage(&self, py: Python<'_>) -> f64 {
        self.with(py, |s| s.live.coverage())
    }

    /// Rules in the remainder now.
    #[getter]
    fn remainder_rules(&self, py: Python<'_>) -> usize {
        self.with(py, |s| s.live.remainder_rules())
    }

    /// Rules staged for the next model (delayed policy).
    #[getter]
    fn staged(&self, py: Python<'_>) -> usize {
        self.with(py, |s| s.live.staged())
    }

    /// The policy inserted rules follow (``instant`` or ``delayed``).
    #[getter]
    fn policy(&self, py: Python<'_>) -> &'static str {
        self.with(py, |s| s.live.policy().name())
    }

    /// Finished training sessions: rules trained on, training and snapshot-to-swap times
    /// (ms), updates caught up by the trainer and replayed at the swap, the swap's and the
    /// snapshot's pauses of the owner (ms).
    fn sessions<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let sessions = self.with(py, |s| s.live.sessions().to_vec());
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        sessions
            .into_iter()
            .map(|x| {
                let d = PyDict::new(py);
                d.set_item("rules", x.rules)?;
                d.set_item("train_ms", ms(x.train))?;
                d.set_item("latency_ms", ms(x.latency))?;
                d.set_item("caught_up", x.caught_up)?;
                d.set_item("replayed", x.replayed)?;
                d.set_item("swap_ms", ms(x.swap))?;
                d.set_item("start_ms", ms(x.start))?;
                Ok(d)
            })
            .collect()
    }
}
