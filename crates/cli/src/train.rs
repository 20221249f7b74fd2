//! `rqvs train`: build NuevoMatchUP over a rule file (iSets + one RQ-RMI model per iSet) and save
//! it, so `rqvs classify --model` can use it without training.

use std::path::PathBuf;
use std::time::Instant;

use rqvs_classify::{Classifier, NuevoMatchUp};
use serde_json::{json, Map, Value};

use crate::report::{self, Out};
use crate::Failure;
use rqvs_experiment::inputs::{self, DEFAULT_RULES_NAME};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Rule file: ClassBench or ovs-ofctl flows, plain or .xz (default: embedded acl1_1k).
    #[arg(long)]
    pub rules: Option<PathBuf>,
    /// Where to write the model.
    #[arg(long)]
    pub out: PathBuf,
    /// Fewer rules than this: no iSets, every rule in the remainder (TupleMerge alone is faster
    /// on small sets); 0 always trains iSets.
    #[arg(long, default_value_t = rqvs_classify::nuevomatch::MIN_RULES)]
    pub min_rules: usize,
    /// Write a JSON report to this file (`-` = stdout).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub fn run(a: &Args) -> Result<(), Failure> {
    let out = Out::new(a.json.as_deref());
    let rules = inputs::load_rules(a.rules.as_deref())?;
    let t0 = Instant::now();
    let config = rqvs_classify::nuevomatch::NuevoMatchConfig { min_rules: a.min_rules, ..Default::default() };
    let nmu = NuevoMatchUp::build_with(&rules, config, rqvs_classify::TupleMerge::build)?;
    let build = t0.elapsed();
    let bytes = nmu.to_model_bytes()?;
    std::fs::write(&a.out, &bytes).map_err(|e| Failure(format!("{}: cannot write: {e}", a.out.display())))?;
    let stats = nmu.stats();
    let stat_line: Vec<String> = stats.iter().map(|(k, v)| format!("{k}={v}")).collect();
    out.line(format!(
        "{}: {} rules → {} ({} bytes) in {:.1} ms: {}",
        report::show(&a.rules, DEFAULT_RULES_NAME),
        rules.len(),
        a.out.display(),
        bytes.len(),
        build.as_secs_f64() * 1e3,
        stat_line.join(" ")
    ));
    if let Some(path) = &a.json {
        let mut f = Map::new();
        f.insert("rules_file".into(), report::show(&a.rules, DEFAULT_RULES_NAME).into());
        f.insert("rules".into(), rules.len().into());
        f.insert("model_file".into(), a.out.display().to_string().into());
        f.insert("model_bytes".into(), bytes.len().into());
        f.insert("build_ms".into(), json!(build.as_secs_f64() * 1e3));
        f.insert(
            "stats".into(),
            stats.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<Map<String, Value>>().into(),
        );
        report::write_json(path, "train", f)?;
    }
    Ok(())
}
