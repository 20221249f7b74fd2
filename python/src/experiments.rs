//! `rqvs.replay`, `rqvs.compare`, `rqvs.gen_rules`, `rqvs.gen_trace` and `rqvs.read_trace`: the
//! command line's experiments and workloads ([`rqvs_experiment`]), returning the dicts its
//! `--json` reports hold (built by the same functions: [`rqvs_experiment::report`],
//! [`rqvs_experiment::gen`]). Each runs with the GIL released.

use std::path::{Path, PathBuf};

use numpy::{PyArray1, PyArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rqvs_datapath::predict::PredictConfig;
use rqvs_experiment::gen::{self, RulesFormat, TraceFormat};
use rqvs_experiment::prediction::Prediction;
use rqvs_experiment::replay as experiment;
use rqvs_experiment::{inputs, report, DesignKind, ReplayConfig};
use serde_json::{Map, Value};

use crate::error;
use crate::headers::{self, FIELDS};

/// A report as a Python dict (through JSON, so that it is exactly what `--json` writes).
fn to_dict(py: Python<'_>, command: &str, fields: Map<String, Value>) -> PyResult<Py<PyAny>> {
    let text = serde_json::to_string(&Value::Object(report::envelope(command, fields)))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(py.import("json")?.call_method1("loads", (text,))?.unbind())
}

/// `--name`'s value from the keyword arguments, or the type error naming it.
fn get<'py, T: FromPyObjectOwned<'py>>(v: &Bound<'py, PyAny>, func: &str, key: &str) -> PyResult<T> {
    v.extract::<T>().map_err(|e| {
        let e: PyErr = e.into();
        PyTypeError::new_err(format!("{func}(): {key}: {}", e.value(v.py())))
    })
}

/// The replay settings from `**options` (names as the command line's options, with `_`), on
/// the command line's defaults, and the names of the options given.
fn config(
    func: &str,
    rules: Option<PathBuf>,
    trace: Option<PathBuf>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<(ReplayConfig, Vec<String>)> {
    let mut c = ReplayConfig { rules, trace, ..ReplayConfig::default() };
    let mut given = Vec::new();
    let (mut mfcguard, mut mfcguard_interval) = (false, None);
    for (k, v) in options.into_iter().flat_map(|d| d.iter()) {
        let key: String = k.extract()?;
        let v = &v;
        match key.as_str() {
            "cd" => c.cd = get(v, func, &key)?,
            "emc" => c.emc = get(v, func, &key)?,
            "emc_prob" => c.emc_prob = get(v, func, &key)?,
            "emc_entries" => c.emc_entries = get(v, func, &key)?,
            "duration" => c.duration = get(v, func, &key)?,
            "passes" => c.passes = get(v, func, &key)?,
            "rate" => c.rate = get(v, func, &key)?,
            "rx_ring" => c.rx_ring = get(v, func, &key)?,
            "updates" => c.updates = get(v, func, &key)?,
            "verify" => c.verify = get(v, func, &key)?,
            "seed" => c.seed = get(v, func, &key)?,
            "flow_limit" => c.flow_limit = get(v, func, &key)?,
            "retrain_threshold" => c.retrain_threshold = get(v, func, &key)?,
            "train_interval" => c.train_interval = get(v, func, &key)?,
            "idle" => c.idle = get(v, func, &key)?,
            "in_port" => c.in_port = get(v, func, &key)?,
            "pmds" if func == "replay" => c.pmds = get(v, func, &key)?,
            "mask_limit" => c.mask_limit = get(v, func, &key)?,
            "mask_eviction" => {
                let s: String = get(v, func, &key)?;
                c.mask_eviction = rqvs_datapath::MaskEviction::from_name(&s).ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "mask_eviction: expected 'least-hit', 'refuse' or 'narrow', found '{s}'"
                    ))
                })?;
            }
            "mfcguard" => mfcguard = get(v, func, &key)?,
            "mfcguard_interval" => mfcguard_interval = Some(get::<f64>(v, func, &key)?),
            "attack" => c.attack = get(v, func, &key)?,
            "attack_rate" => c.attack_rate = get(v, func, &key)?,
            "attack_policing" => {
                let s: String = get(v, func, &key)?;
                c.attack_policing =
                    Some(s.parse().map_err(|e| PyValueError::new_err(format!("attack_policing: {e}")))?);
            }
            "revalidator" => {
                let s: String = get(v, func, &key)?;
                c.revalidator = rqvs_datapath::revalidator::RevalidatorMode::from_name(&s).ok_or_else(|| {
                    PyValueError::new_err(format!("revalidator: expected 'thread' or 'inline', found '{s}'"))
                })?;
            }
            "classifier" => {
                let s: String = get(v, func, &key)?;
                c.classifier = match s.as_str() {
                    "nmu" => rqvs_datapath::CflowsClassifier::NuevoMatch,
                    "tm" => rqvs_datapath::CflowsClassifier::TupleMerge,
                    _ => return Err(PyValueError::new_err(format!("classifier: expected 'nmu' or 'tm', found '{s}'"))),
                };
            }
            "policy" => {
                let s: String = get(v, func, &key)?;
                c.policy = rqvs_classify::nuevomatch::live::Policy::from_name(&s).ok_or_else(|| {
                    PyValueError::new_err(format!("policy: expected 'instant' or 'delayed', found '{s}'"))
                })?;
            }
            "auto" => c.auto = auto_settings(v, func)?,
            _ => return Err(PyTypeError::new_err(format!("{func}() got an unexpected keyword argument '{key}'"))),
        }
        given.push(key);
    }
    match (mfcguard, mfcguard_interval) {
        (false, Some(_)) => {
            return Err(PyValueError::new_err("mfcguard_interval: MFCGuard's interval; expected mfcguard=True"))
        }
        (true, i) => c.mfcguard = Some(i.unwrap_or(rqvs_experiment::replay::MFCGUARD_INTERVAL_S)),
        (false, None) => {}
    }
    // The command line's exclusive options.
    for (a, b) in [("duration", "passes"), ("rate", "duration")] {
        if given.iter().any(|g| g == a) && given.iter().any(|g| g == b) {
            return Err(PyValueError::new_err(format!("{a}: cannot be used with {b}")));
        }
    }
    Ok((c, given))
}

/// `auto=`: auto's thresholds as a dict `{"window-ms": 50, "initial": "orig"}` or the command
/// line's `"window-ms=50,initial=orig"`, parsed and checked by the command line's parser
/// ([`rqvs_datapath::auto::settings`]); a value is a string, a number or a bool.
fn auto_settings(v: &Bound<'_, PyAny>, func: &str) -> PyResult<rqvs_datapath::AutoConfig> {
    let bad = |e: String| PyValueError::new_err(format!("auto: {e}"));
    let settings: rqvs_datapath::AutoSettings = if let Ok(text) = v.extract::<String>() {
        text.parse().map_err(bad)?
    } else if let Ok(d) = v.cast::<PyDict>() {
        let mut items = Vec::new();
        for (k, x) in d.iter() {
            let k: String = get(&k, func, "auto")?;
            let value = if let Ok(b) = x.extract::<bool>() {
                b.to_string()
            } else if let Ok(s) = x.extract::<String>() {
                s
            } else if x.extract::<f64>().is_ok() {
                x.str()?.to_string()
            } else {
                return Err(PyTypeError::new_err(format!(
                    "{func}(): auto: {k}: expected a string, a number or a bool, found {}",
                    x.get_type().name()?
                )));
            };
            if value.contains(',') {
                return Err(bad(format!("{k}: expected one value, found '{value}'")));
            }
            items.push(format!("{k}={value}").parse::<rqvs_datapath::AutoSettings>().map_err(bad)?);
        }
        rqvs_datapath::AutoSettings::concat(&items)
    } else {
        return Err(PyTypeError::new_err(format!(
            "{func}(): auto: expected a dict of settings or a 'KEY=VALUE,...' string, found {}",
            v.get_type().name()?
        )));
    };
    settings.config().map_err(bad)
}

/// Options given that the designs would not use: refused, as the command line refuses them
/// ([`experiment::check_unused`]).
fn check_unused(
    cfg: &ReplayConfig,
    designs: &[DesignKind],
    names: &str,
    rate_search: bool,
    given: &[String],
) -> PyResult<()> {
    experiment::check_unused(cfg, designs, names, rate_search, &|id| given.iter().any(|g| g == id)).map_err(error::from)
}

fn design(name: &str) -> PyResult<DesignKind> {
    DesignKind::from_name(name)
        .ok_or_else(|| PyValueError::new_err(format!("unknown design '{name}' (known: orig, ccache, cflows, auto)")))
}

/// Replays a trace through one datapath design (``rqvs replay``) and returns its ``--json``
/// report as a dict. ``rules``/``trace`` default to the embedded ClassBench acl1_1k workload;
/// ``design``: ``orig``, ``ccache``, ``cflows`` or ``auto``; ``predict``: flow prediction on ORIG
/// (``off``, ``online``, or ``oracle`` with the ground truth ``coflow_truth`` written by ``rqvs
/// gen coflows --truth-out``; the predictor's own settings at the command line's defaults);
/// ``rate_search``: the highest constant rate with < 1% drops (``--rate-search``: the report of
/// its last probe with ``max_rate_below_1pct_drops`` and ``unconstrained_mpps``); ``options``:
/// the command line's replay options with ``_`` for ``-`` (``passes``, ``duration``, ``rate``,
/// ``rx_ring``, ``updates``, ``verify``, ``seed``, ``cd``, ``emc`` (``False`` = ``--no-emc``),
/// ``emc_prob``, ``emc_entries``, ``flow_limit``, ``revalidator``, ``policy``, ``retrain_threshold``,
/// ``train_interval``, ``idle``, ``in_port``, ``pmds``, ``attack`` and ``attack_rate``: a mixed
/// replay, the report's ``attack`` separating benign and attack traffic, with ``attack_policing``
/// (``"KPPS[/BURST]"``, ``--attack-policing``) the attack's queue policed; and the defences against
/// Tuple Space Explosion ``mask_limit``, ``mask_eviction`` (``least-hit``, ``refuse``, ``narrow``),
/// ``mfcguard`` (``True`` = ``--mfcguard``), ``mfcguard_interval``; and with ``design="auto"``,
/// ``auto``: its thresholds as ``--auto`` takes them, a dict ``{"initial": "orig", "window-ms":
/// 50}`` or a string ``"initial=orig,window-ms=50"`` — the report's ``auto.settings`` says which
/// differ from the defaults). Mismatches against the reference are in
/// ``report["mismatches"]`` (the command line's exit code 1), not raised — but a rate search
/// whose probe has mismatches raises, as the command line fails.
#[pyfunction]
#[pyo3(signature = (rules = None, trace = None, design = "orig", predict = "off", coflow_truth = None, rate_search = false, **options))]
#[allow(clippy::too_many_arguments)]
pub fn replay(
    py: Python<'_>,
    rules: Option<PathBuf>,
    trace: Option<PathBuf>,
    design: &str,
    predict: &str,
    coflow_truth: Option<PathBuf>,
    rate_search: bool,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyAny>> {
    let d = self::design(design)?;
    let (cfg, given) = config("replay", rules, trace, options)?;
    check_unused(&cfg, &[d], &format!("--design {design}"), rate_search, &given)?;
    if rate_search && cfg.pmds > 1 {
        return Err(PyValueError::new_err("--rate-search: runs on one PMD; --pmds is not used with it"));
    }
    let predict = predict.to_string();
    let fields = py
        .detach(|| {
            let p = experiment::prepare(&cfg)?;
            let pred = Prediction::from_mode(&predict, coflow_truth.as_deref(), PredictConfig::default(), d, &cfg, &p)?;
            if rate_search {
                let s = experiment::rate_search(&cfg, &p, d, pred.as_ref(), &mut |_, _| {})?;
                report::rate_search_json(&cfg, &p, &s)
            } else if cfg.pmds > 1 {
                if pred.is_some() {
                    return Err(rqvs_experiment::Error("--pmds: flow prediction runs on one PMD only, for now".into()));
                }
                let r = experiment::run_pmds(&cfg, &p, d)?;
                report::pmds_json(&cfg, &p, d, &r)
            } else {
                let r = experiment::run_design_with(&cfg, &p, d, pred.as_ref())?;
                report::run_json(&cfg, &p, &r)
            }
        })
        .map_err(error::from)?;
    to_dict(py, "replay", fields)
}

/// Several designs on the same rules and trace (``rqvs compare``): their ``--json`` report as a
/// dict, each run with its speedup over the first design. Options as ``replay``'s (but
/// ``pmds``).
#[pyfunction]
#[pyo3(signature = (rules = None, trace = None, designs = vec!["orig".to_string(), "ccache".to_string(), "cflows".to_string()], **options))]
#[pyo3(text_signature = "(rules=None, trace=None, designs=('orig', 'ccache', 'cflows'), **options)")]
pub fn compare(
    py: Python<'_>,
    rules: Option<PathBuf>,
    trace: Option<PathBuf>,
    designs: Vec<String>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyAny>> {
    let designs = designs.iter().map(|d| design(d)).collect::<PyResult<Vec<_>>>()?;
    if designs.is_empty() {
        return Err(PyValueError::new_err("--designs: expected at least one design"));
    }
    let (cfg, given) = config("compare", rules, trace, options)?;
    let names: Vec<&str> = designs.iter().map(|d| d.name()).collect();
    check_unused(&cfg, &designs, &format!("--designs {}", names.join(",")), false, &given)?;
    let fields = py
        .detach(|| {
            let p = experiment::prepare(&cfg)?;
            let runs = designs.iter().map(|&d| experiment::run_design(&cfg, &p, d)).collect::<Result<Vec<_>, _>>()?;
            report::compare_json(&cfg, &p, &runs)
        })
        .map_err(error::from)?;
    to_dict(py, "compare", fields)
}

fn write(path: &Path, bytes: &[u8]) -> PyResult<()> {
    std::fs::write(path, bytes).map_err(|e| error::from(format!("{}: cannot write: {e}", path.display())))
}

/// Generates a ClassBench-compatible rule-set from a seed file (``rqvs gen rules``), writes it to
/// ``output`` and returns the ``--json`` report as a dict. ``seed_file``: ``acl1`` .. ``ipc2``
/// (ClassBench's seed files, built in) or a path; ``format``: ``classbench`` or
/// ``ofctl``; ``compare``: a rule file whose statistics to compare with.
#[pyfunction]
#[pyo3(signature = (seed_file, count, output, *, rng_seed = 1, format = "classbench", addr_scope = 0.0, port_scope = 0.0, scale_skew = true, smoothing = 0, compare = None))]
#[allow(clippy::too_many_arguments)] // the command line's options, one keyword each
pub fn gen_rules(
    py: Python<'_>,
    seed_file: String,
    count: usize,
    output: PathBuf,
    rng_seed: u64,
    format: &str,
    addr_scope: f64,
    port_scope: f64,
    scale_skew: bool,
    smoothing: u32,
    compare: Option<PathBuf>,
) -> PyResult<Py<PyAny>> {
    let format = match format {
        "classbench" => RulesFormat::Classbench,
        "ofctl" => RulesFormat::Ofctl,
        f => return Err(PyValueError::new_err(format!("format: expected 'classbench' or 'ofctl', found '{f}'"))),
    };
    let params = rqvs_workload::rules::Params { count, rng_seed, addr_scope, port_scope, scale_skew, smoothing };
    let req = gen::RulesRequest { seed_file, params, format, compare, variant: gen::RulesVariant::Auto };
    let g = py.detach(|| gen::gen_rules(&req)).map_err(error::from)?;
    write(&output, g.text.as_bytes())?;
    to_dict(py, "gen rules", g.fields)
}

/// Generates a header trace for a rule file (``rqvs gen trace``), writes it to ``output`` and
/// returns the ``--json`` report as a dict. ``locality``: ``pareto:A,B``, ``zipf:S``,
/// ``zipf:S,FLOWS`` or ``uniform``; ``format``: ``classbench`` or ``pcap``; ``corner``: draw each
/// field at a corner of its rule; ``max_share``: most packets one header may have, as a share.
#[pyfunction]
#[pyo3(signature = (rules, packets, output, *, locality = String::from("pareto:1,0.1"), rng_seed = 1, format = "classbench", corner = false, max_share = 0.05, max_burst = None))]
#[pyo3(
    text_signature = "(rules, packets, output, *, locality='pareto:1,0.1', rng_seed=1, format='classbench', corner=False, max_share=0.05, max_burst=None)"
)]
#[allow(clippy::too_many_arguments)] // the command line's options, one keyword each
pub fn gen_trace(
    py: Python<'_>,
    rules: PathBuf,
    packets: usize,
    output: PathBuf,
    locality: String,
    rng_seed: u64,
    format: &str,
    corner: bool,
    max_share: f64,
    max_burst: Option<usize>,
) -> PyResult<Py<PyAny>> {
    let format = match format {
        "classbench" => TraceFormat::Classbench,
        "pcap" => TraceFormat::Pcap,
        f => return Err(PyValueError::new_err(format!("format: expected 'classbench' or 'pcap', found '{f}'"))),
    };
    let req = gen::TraceRequest { rules, locality, packets, rng_seed, corner, max_share, max_burst, format };
    let g = py.detach(|| gen::gen_trace(&req)).map_err(error::from)?;
    write(&output, &g.bytes)?;
    to_dict(py, "gen trace", g.fields)
}

/// Generates attack traffic against a rule file (``rqvs gen attack``), writes it to ``output``
/// (pcap) and returns the ``--json`` report as a dict (``orig``: what it does to ORIG).
/// ``kind``: ``tse``, ``tse2`` or ``flood``; ``variant`` (tse): ``co-located`` or ``general``;
/// ``masks`` (tse2): the masks the attack is spread over.
#[pyfunction]
#[pyo3(signature = (rules, kind, packets, output, *, variant = "co-located", masks = 64, rng_seed = 1))]
#[pyo3(text_signature = "(rules, kind, packets, output, *, variant='co-located', masks=64, rng_seed=1)")]
#[allow(clippy::too_many_arguments)] // the command line's options, one keyword each
pub fn gen_attack(
    py: Python<'_>,
    rules: PathBuf,
    kind: &str,
    packets: usize,
    output: PathBuf,
    variant: &str,
    masks: usize,
    rng_seed: u64,
) -> PyResult<Py<PyAny>> {
    use rqvs_workload::attack::{Kind, Knowledge};
    let kind = match kind {
        "tse" => Kind::Tse,
        "tse2" => Kind::Tse2,
        "flood" => Kind::Flood,
        k => return Err(PyValueError::new_err(format!("kind: expected 'tse', 'tse2' or 'flood', found '{k}'"))),
    };
    let knowledge = match variant {
        "co-located" => Knowledge::Rules,
        "general" => Knowledge::None,
        v => return Err(PyValueError::new_err(format!("variant: expected 'co-located' or 'general', found '{v}'"))),
    };
    let req = gen::AttackRequest { rules, kind, knowledge, packets, masks, rng_seed };
    let g = py.detach(|| gen::gen_attack(&req)).map_err(error::from)?;
    write(&output, &g.bytes)?;
    to_dict(py, "gen attack", g.fields)
}

/// The packets of a ClassBench trace or a pcap/pcapng capture (told apart by content, plain or
/// .xz) as one numpy array per field of ``FIELDS`` (``rqvs.read_trace`` makes the structured
/// array). ``in_port`` is given to every packet.
#[pyfunction]
#[pyo3(signature = (path, in_port = 1))]
pub fn read_trace_columns<'py>(py: Python<'py>, path: PathBuf, in_port: u32) -> PyResult<Bound<'py, PyDict>> {
    let packets = py.detach(|| inputs::load_packets(Some(&path), in_port)).map_err(error::from)?;
    let d = PyDict::new(py);
    let keys: Vec<rqvs_flow::FlowKey> = packets.entries.iter().map(|e| e.key).collect();
    for (f, name) in FIELDS.iter().enumerate() {
        // Each field in its own width (the values fit: they come from a key).
        let values = keys.iter().map(|k| headers::get(k, f));
        let col = match headers::BITS[f] {
            0..=8 => PyArray1::from_vec(py, values.map(|v| v as u8).collect()).into_any(),
            9..=16 => PyArray1::from_vec(py, values.map(|v| v as u16).collect()).into_any(),
            17..=32 => PyArray1::from_vec(py, values.map(|v| v as u32).collect()).into_any(),
            33..=64 => PyArray1::from_vec(py, values.map(|v| v as u64).collect()).into_any(),
            // 128-bit fields: (n, 16) bytes in network order.
            _ => {
                let flat: Vec<u8> = values.flat_map(|v| v.to_be_bytes()).collect();
                PyArray1::from_vec(py, flat).reshape([keys.len(), 16])?.into_any()
            }
        };
        d.set_item(*name, col)?;
    }
    Ok(d)
}
