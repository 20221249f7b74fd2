//! Flow prediction for replays (seed 004; [`rqvs_datapath::predict`]): the online predictor, or
//! the oracle over a coflow ground truth matched to the replayed trace.

use std::path::Path;

use rqvs_datapath::predict::{PredictConfig, Predictor};
use rqvs_flow::FlowKey;

use crate::replay::{Prepared, ReplayConfig};
use crate::{DesignKind, Error};

/// Flow prediction for the runs of a replay (module docs of [`crate::replay`]): a fresh predictor per run.
pub struct Prediction {
    pub mode: &'static str,
    cfg: PredictConfig,
    /// Oracle: base flow key → coupled associated flow keys, as the trace carries them.
    truth: Vec<(FlowKey, Vec<FlowKey>)>,
}

impl Prediction {
    /// The online predictor ([`Predictor::online`]), fresh for each run.
    pub fn online(cfg: PredictConfig) -> Prediction {
        Prediction { mode: "online", cfg, truth: Vec::new() }
    }

    /// The oracle, its table read from a coflow ground truth (`rqvs gen coflows --truth-out`)
    /// whose flows are matched to the prepared trace's keys by 5-tuple.
    pub fn oracle(cfg: PredictConfig, truth: &Path, c: &ReplayConfig, p: &Prepared) -> Result<Prediction, Error> {
        Ok(Prediction { mode: "oracle", cfg, truth: truth_in_trace(truth, &c.trace_name(), p)? })
    }

    /// `--predict MODE [--coflow-truth FILE]` checked against the design: `None` for `off`;
    /// `online`; `oracle` (needs `truth`). Flow prediction installs megaflows through ORIG's slow
    /// path, so any other design is an error, as a ground truth without `oracle` is.
    pub fn from_mode(
        mode: &str,
        truth: Option<&Path>,
        cfg: PredictConfig,
        design: DesignKind,
        c: &ReplayConfig,
        p: &Prepared,
    ) -> Result<Option<Prediction>, Error> {
        if mode != "oracle" && truth.is_some() {
            return Err(Error("--coflow-truth: only --predict oracle uses a ground truth".into()));
        }
        if !matches!(mode, "off" | "online" | "oracle") {
            return Err(Error(format!("--predict: expected off, online or oracle, found '{mode}'")));
        }
        if mode == "off" {
            return Ok(None);
        }
        if design != DesignKind::Orig {
            return Err(Error(format!(
                "--predict {mode}: flow prediction installs megaflows through ORIG's slow path; expected --design orig, found '{}'",
                design.name()
            )));
        }
        match truth {
            None if mode == "oracle" => Err(Error(
                "--predict oracle needs the coflow ground truth: --coflow-truth FILE (written by `rqvs gen coflows --truth-out`)".into(),
            )),
            None => Ok(Some(Prediction::online(cfg))),
            Some(path) => Ok(Some(Prediction::oracle(cfg, path, c, p)?)),
        }
    }

    pub(crate) fn predictor(&self) -> Predictor {
        match self.mode {
            "oracle" => oracle_predictor(self.cfg.clone(), self.truth.clone()),
            _ => Predictor::online(self.cfg.clone()),
        }
    }
}

/// The oracle predictor over a ground-truth table: it installs every associated flow of a base
/// flow at once (no rate limit, no cap per trigger).
pub fn oracle_predictor(cfg: PredictConfig, truth: Vec<(FlowKey, Vec<FlowKey>)>) -> Predictor {
    Predictor::oracle(PredictConfig { per_upcall: f64::INFINITY, max_per_trigger: usize::MAX, ..cfg }, truth)
}

/// The oracle's table from a ground-truth file, its flows matched to the trace's keys by
/// 5-tuple (so in_port, MACs and the rest are the trace's). Every flow it names must be in the
/// trace.
fn truth_in_trace(path: &Path, trace: &str, p: &Prepared) -> Result<Vec<(FlowKey, Vec<FlowKey>)>, Error> {
    use rqvs_workload::coflow;
    let name = path.display().to_string();
    let text = rqvs_flow::io::read_text(path)?;
    let flows = coflow::parse_truth(&name, &text).map_err(Error)?;
    let table = coflow::truth_oracle(&flows).map_err(|e| Error(format!("{name}: {e}")))?;
    let five = |k: &FlowKey| (k.nw_src, k.nw_dst, k.nw_proto, k.tp_src, k.tp_dst);
    // The first key of each flow the truth names, in one pass over the trace (memory: the
    // truth's flows, not the trace's).
    let named: std::collections::HashSet<_> =
        table.iter().flat_map(|(base, assoc)| std::iter::once(base).chain(assoc)).map(five).collect();
    let mut in_trace: std::collections::HashMap<_, FlowKey> = std::collections::HashMap::new();
    let mut keys = p.trace.open()?;
    while let Some(k) = keys.next_key()? {
        if named.contains(&five(&k)) {
            in_trace.entry(five(&k)).or_insert(k);
        }
    }
    let find = |k: &FlowKey| {
        in_trace.get(&five(k)).copied().ok_or_else(|| {
            Error(format!(
                "{name}: flow {} {}:{} -> {}:{} is not in the trace {}: expected the ground truth written with this trace",
                k.nw_proto,
                rqvs_flow::key::fmt_ipv4(k.nw_src),
                k.tp_src,
                rqvs_flow::key::fmt_ipv4(k.nw_dst),
                k.tp_dst,
                trace
            ))
        })
    };
    table
        .iter()
        .map(|(base, assoc)| Ok((find(base)?, assoc.iter().map(find).collect::<Result<Vec<_>, _>>()?)))
        .collect()
}
