//! `rqvs classify`: classify a trace and verify every sampled winner against the definition.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Instant;

use rqvs_classify::{winner_by_definition, ClassifierKind, BATCH};
use rqvs_flow::{FlowKey, Rule, RuleId};
use serde_json::{json, Map};

use crate::args::Workload;
use crate::report::{self, Out};
use crate::Failure;
use rqvs_experiment::inputs::{self, DEFAULT_RULES_NAME, DEFAULT_TRACE_NAME};
use rqvs_experiment::verify;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub workload: Workload,
    /// Classifier to run (nmu-isets: iSets at every size; nmu-bs: binary search for the index).
    #[arg(long, value_enum, default_value_t = ClassifierKind::Ref)]
    pub classifier: ClassifierKind,
    /// A NuevoMatchUP model saved by `rqvs train` (its rules and trained indexes; replaces
    /// --rules and --classifier).
    #[arg(long, conflicts_with = "rules")]
    pub model: Option<PathBuf>,
    /// in_port given to every packet.
    #[arg(long, default_value_t = 1)]
    pub in_port: u32,
    /// Write a JSON report to this file (`-` = stdout).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub fn run(args: &Args) -> Result<(), Failure> {
    let out = Out::new(args.json.as_deref());
    let model = match &args.model {
        Some(p) => {
            let bytes = rqvs_flow::io::read_bytes(p)?;
            let nmu = rqvs_classify::NuevoMatchUp::from_model_bytes(&bytes)
                .map_err(|e| Failure(format!("{}: {e}", p.display())))?;
            Some(nmu)
        }
        None => None,
    };
    let rules = match &model {
        Some(m) => m.rules(),
        None => inputs::load_rules(args.workload.rules.as_deref())?,
    };
    let packets = inputs::load_packets(args.workload.trace.as_deref(), args.in_port)?;
    let keys: Vec<FlowKey> = packets.entries.iter().map(|e| e.key).collect();
    if keys.is_empty() {
        return Err(Failure(format!(
            "{}: no packets to classify",
            report::show(&args.workload.trace, DEFAULT_TRACE_NAME)
        )));
    }

    let t0 = Instant::now();
    let classifier: Box<dyn rqvs_classify::Classifier> = match model {
        Some(m) => Box::new(m),
        None => rqvs_classify::build(args.classifier, &rules)?,
    };
    let build = t0.elapsed();

    // Timed run: the whole trace in batches of 32, the datapath's unit.
    let mut results: Vec<Option<RuleId>> = vec![None; keys.len()];
    let t1 = Instant::now();
    for (k, r) in keys.chunks(BATCH).zip(results.chunks_mut(BATCH)) {
        classifier.lookup_batch(k, r);
    }
    let elapsed = t1.elapsed();
    let ns_per_packet = elapsed.as_nanos() as f64 / keys.len() as f64;
    let mpps = keys.len() as f64 / elapsed.as_secs_f64() / 1e6;

    // Verification against the semantic definition (winner-ordered linear scan of `Match`).
    let indexes = verify::sample_indexes(rules.len(), keys.len(), args.workload.verify, args.workload.seed);
    let n_verify = indexes.len();
    let mut sorted: Vec<Rule> = rules.clone();
    sorted.sort_by_key(|r| r.rank());
    let (mut mismatches, mut intended_checked, mut intended_differs) = (0usize, 0usize, 0usize);
    let mut first_mismatch = None;
    for &i in &indexes {
        let want = winner_by_definition(&sorted, &keys[i]);
        if results[i] != want {
            mismatches += 1;
            first_mismatch.get_or_insert((i, results[i], want));
        }
        if let Some(intended) = packets.entries[i].intended {
            intended_checked += 1;
            if want != Some(intended) {
                intended_differs += 1;
            }
        }
    }
    let matched = results.iter().filter(|r| r.is_some()).count();
    let distinct: usize = keys.iter().collect::<HashSet<_>>().len();

    let rules_name = match &args.model {
        Some(p) => format!("{} (model)", p.display()),
        None => report::show(&args.workload.rules, DEFAULT_RULES_NAME),
    };
    let trace_name = report::show(&args.workload.trace, DEFAULT_TRACE_NAME);
    out.line(format!("rules       {rules_name}: {} rules", rules.len()));
    out.line(format!("packets     {trace_name}: {} packets, {distinct} distinct flows", keys.len()));
    if let Some(c) = &packets.capture {
        out.line(format!("capture     {}", report::capture_line(c)));
    }
    out.line(format!(
        "classifier  {} (build {:.3} ms, {} bytes)",
        classifier.name(),
        build.as_secs_f64() * 1e3,
        classifier.memory_bytes()
    ));
    out.line(format!("lookup      {ns_per_packet:.1} ns/packet, {mpps:.3} Mpps (batches of {BATCH}, one thread)"));
    out.line(format!("matched     {matched} of {} packets", keys.len()));
    out.line(format!(
        "verified    {n_verify} packets against the reference: {mismatches} mismatches (seed {})",
        args.workload.seed
    ));
    if intended_checked > 0 {
        out.line(format!(
            "intended    the trace's intended rule is not the true winner for {intended_differs} of {intended_checked} verified packets ({:.2}%)",
            100.0 * intended_differs as f64 / intended_checked as f64
        ));
    }

    if let Some(path) = &args.json {
        let mut f = Map::new();
        f.insert("rules_file".into(), rules_name.into());
        f.insert("trace_file".into(), trace_name.into());
        f.insert("classifier".into(), classifier.name().into());
        f.insert("rules".into(), rules.len().into());
        f.insert("packets".into(), keys.len().into());
        f.insert("distinct_flows".into(), distinct.into());
        f.insert("build_ms".into(), json!(build.as_secs_f64() * 1e3));
        f.insert("memory_bytes".into(), classifier.memory_bytes().into());
        f.insert("ns_per_packet".into(), json!(ns_per_packet));
        f.insert("mpps".into(), json!(mpps));
        f.insert("matched".into(), matched.into());
        f.insert("verified".into(), n_verify.into());
        f.insert("mismatches".into(), mismatches.into());
        f.insert("intended_checked".into(), intended_checked.into());
        f.insert("intended_differs".into(), intended_differs.into());
        f.insert("seed".into(), args.workload.seed.into());
        if let Some(c) = &packets.capture {
            f.insert("capture".into(), report::capture_json(c));
        }
        report::write_json(path, "classify", f)?;
    }
    if let Some((i, got, want)) = first_mismatch {
        return Err(Failure(format!(
            "{mismatches} mismatches against the reference; first at packet {i} ({:?}): {} returned {:?}, the reference {:?}",
            keys[i], classifier.name(), got.map(|r| r.0), want.map(|r| r.0)
        )));
    }
    Ok(())
}
