//! `rqvs classify`: classify a trace and verify every sampled winner against the definition.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Instant;

use rqvs_classify::{winner_by_definition, ClassifierKind, BATCH};
use rqvs_flow::Rule;
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

/// Options `rqvs classify` accepts but would not use: `--classifier` with `--model` (the model
/// is a NuevoMatchUP; usage error, [`crate::args::Given`]).
pub fn unused(a: &Args, g: &crate::args::Given) -> Result<(), String> {
    g.refuse("classifier", a.model.is_some(), "a saved model is a NuevoMatchUP; --classifier is not used with --model")
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
    // The packets are read once to count them (the verification sample needs the count), then
    // again to classify them, a chunk at a time: memory grows with the distinct flows (counted
    // exactly), not with the packets. Short traces are held after the first read.
    let counted =
        inputs::PacketSource::count(args.workload.trace.as_deref(), args.in_port, rqvs_experiment::replay::HOLD_BYTES)?;
    let n = usize::try_from(counted.packets).map_err(|_| Failure("too many packets for this machine".into()))?;
    if n == 0 {
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

    // Verification against the semantic definition (winner-ordered linear scan of `Match`) of
    // every packet when affordable, else of a seeded sample.
    let n_verify = match args.workload.verify {
        Some(k) => k.min(n),
        None if verify::full_verification_affordable(rules.len(), n) => n,
        None => verify::DEFAULT_SAMPLE.min(n),
    };
    let indexes = if n_verify == n {
        Vec::new()
    } else {
        verify::sample_indexes(rules.len(), n, Some(n_verify), args.workload.seed)
    };
    let mut sorted: Vec<Rule> = rules.clone();
    sorted.sort_by_key(|r| r.rank());
    let (mut mismatches, mut intended_checked, mut intended_differs) = (0usize, 0usize, 0usize);
    let mut first_mismatch = None;
    let (mut matched, mut distinct) = (0usize, HashSet::new());

    // Timed: the lookups of each chunk, in batches of 32 (the datapath's unit).
    const CHUNK: usize = 1 << 16;
    let mut pass = counted.source.open()?;
    let (mut entries, mut keys, mut results) = (Vec::with_capacity(CHUNK), Vec::with_capacity(CHUNK), Vec::new());
    let mut elapsed = std::time::Duration::ZERO;
    let (mut at, mut next_sample) = (0usize, 0usize);
    loop {
        entries.clear();
        while entries.len() < CHUNK {
            match pass.next_entry()? {
                Some(e) => entries.push(e),
                None => break,
            }
        }
        if entries.is_empty() {
            break;
        }
        keys.clear();
        keys.extend(entries.iter().map(|e: &rqvs_flow::formats::trace::TraceEntry| e.key));
        results.clear();
        results.resize(keys.len(), None);
        let t1 = Instant::now();
        for (k, r) in keys.chunks(BATCH).zip(results.chunks_mut(BATCH)) {
            classifier.lookup_batch(k, r);
        }
        elapsed += t1.elapsed();
        for (e, &got) in entries.iter().zip(&results) {
            matched += usize::from(got.is_some());
            distinct.insert(e.key);
            let sampled = n_verify == n || indexes.get(next_sample) == Some(&at);
            next_sample += usize::from(sampled && n_verify < n);
            if sampled {
                let want = winner_by_definition(&sorted, &e.key);
                if got != want {
                    mismatches += 1;
                    first_mismatch.get_or_insert((at, e.key, got, want));
                }
                if let Some(intended) = e.intended {
                    intended_checked += 1;
                    if want != Some(intended) {
                        intended_differs += 1;
                    }
                }
            }
            at += 1;
        }
    }
    if at != n {
        return Err(Failure(format!(
            "{}: {at} packets on the second read, {n} on the first: the input changed while being read",
            report::show(&args.workload.trace, DEFAULT_TRACE_NAME)
        )));
    }
    let ns_per_packet = elapsed.as_nanos() as f64 / n as f64;
    let mpps = n as f64 / elapsed.as_secs_f64() / 1e6;
    let distinct = distinct.len();

    let rules_name = match &args.model {
        Some(p) => format!("{} (model)", p.display()),
        None => report::show(&args.workload.rules, DEFAULT_RULES_NAME),
    };
    let trace_name = report::show(&args.workload.trace, DEFAULT_TRACE_NAME);
    out.line(format!("rules       {rules_name}: {} rules", rules.len()));
    out.line(format!("packets     {trace_name}: {n} packets, {distinct} distinct flows"));
    if let Some(c) = &counted.capture {
        out.line(format!("capture     {}", report::capture_line(c)));
    }
    out.line(format!(
        "classifier  {} (build {:.3} ms, {} bytes)",
        classifier.name(),
        build.as_secs_f64() * 1e3,
        classifier.memory_bytes()
    ));
    out.line(format!("lookup      {ns_per_packet:.1} ns/packet, {mpps:.3} Mpps (batches of {BATCH}, one thread)"));
    out.line(format!("matched     {matched} of {n} packets"));
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
        f.insert("packets".into(), n.into());
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
        if let Some(c) = &counted.capture {
            f.insert("capture".into(), report::capture_json(c));
        }
        report::write_json(path, "classify", f)?;
    }
    if let Some((i, key, got, want)) = first_mismatch {
        return Err(Failure(format!(
            "{mismatches} mismatches against the reference; first at packet {i} ({key:?}): {} returned {:?}, the reference {:?}",
            classifier.name(), got.map(|r| r.0), want.map(|r| r.0)
        )));
    }
    Ok(())
}
