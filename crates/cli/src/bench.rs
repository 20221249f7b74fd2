//! `rqvs bench classifiers`: every classifier on the same rules and packets, side by side.
//!
//! For each classifier: build time, lookup rate in batches of 32 and one key at a time (the
//! fastest, median and slowest of several passes over the whole trace, after a warm-up pass; the
//! classifiers' passes take turns: `rqvs_experiment::bench::time_interleaved`), memory, mismatches
//! against the reference on a sample
//! (all packets when the set is small), mismatches against another classifier on every packet, and
//! update rates — remove 10% of the rules in random order, re-insert them in another order — with
//! every packet re-checked afterwards.

use std::path::PathBuf;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use rqvs_classify::ClassifierKind;
use rqvs_experiment::bench::{self, BenchConfig, Step};
use rqvs_flow::FlowKey;
use serde_json::{json, Map, Value};

use crate::args::Workload;
use crate::report::{self, Out};
use crate::Failure;
use rqvs_experiment::inputs::{self, DEFAULT_RULES_NAME, DEFAULT_TRACE_NAME};

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Compare classifiers on one rule-set and trace: build, lookup rate, memory, mismatches,
    /// update rates.
    Classifiers(Args),
    /// NuevoMatchUP under a stream of rule updates with a background trainer: lookup rate,
    /// coverage, training sessions and mismatches over time.
    Updates(crate::bench_updates::Args),
    /// Flow-mods through the OpenFlow channel into a running switch while traffic flows (every
    /// frame checked), and a bundle's time to become visible.
    Openflow(crate::bench_openflow::Args),
}

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub workload: Workload,
    /// Comma-separated classifiers.
    #[arg(long, value_enum, default_value = "ref,tss,tm", value_delimiter = ',')]
    pub classifiers: Vec<ClassifierKind>,
    /// Share of the rules removed and re-inserted for the update rates [range: 0 < x ≤ 1].
    #[arg(long, default_value_t = 0.1, value_parser = crate::args::range::share_nonzero())]
    pub update_fraction: f64,
    /// Minimum time spent per lookup measurement, in milliseconds (at least one full pass)
    /// [range: 0 ≤ x ≤ 3600000].
    #[arg(long, default_value_t = 300, value_parser = crate::args::range::between(0u64, 3_600_000))]
    pub min_ms: u64,
    /// Hold the packets as whole `FlowKey`s (112 bytes each) even when none has a wide field; by
    /// default such a trace is held as narrow keys (40 bytes each, the narrow members alone),
    /// the form a batch of 5-tuple packets takes: batches and single keys are looked up as
    /// narrow keys (TupleMerge and NuevoMatchUP read them as they are, the others widen them).
    #[arg(long)]
    pub flowkey_batches: bool,
    /// Write a JSON report to this file (`-` = stdout).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the table (one row per classifier, the JSON report's `classifiers`) as CSV to this
    /// file (`-` = stdout).
    #[arg(long)]
    pub csv: Option<PathBuf>,
}

pub fn run(cmd: &Command) -> Result<(), Failure> {
    match cmd {
        Command::Classifiers(a) => classifiers(a),
        Command::Updates(a) => crate::bench_updates::run(a),
        Command::Openflow(a) => crate::bench_openflow::run(a),
    }
}

fn classifiers(a: &Args) -> Result<(), Failure> {
    let out = Out::with_csv(a.json.as_deref(), a.csv.as_deref())?;
    let rules = inputs::load_rules(a.workload.rules.as_deref())?;
    let packets = inputs::load_packets(a.workload.trace.as_deref(), 1)?;
    let keys: Vec<FlowKey> = packets.entries.iter().map(|e| e.key).collect();
    if keys.is_empty() {
        return Err(Failure(format!("{}: no packets", report::show(&a.workload.trace, DEFAULT_TRACE_NAME))));
    }
    let cfg = BenchConfig {
        classifiers: a.classifiers.clone(),
        verify: a.workload.verify,
        update_fraction: a.update_fraction,
        min_time: Duration::from_millis(a.min_ms),
        seed: a.workload.seed,
        narrow_batches: !a.flowkey_batches,
    };
    let bar = ProgressBar::new(bench::steps(a.classifiers.len()));
    bar.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").expect("valid template"));
    let b = bench::classifiers(&cfg, &rules, &keys, &mut |s| match s {
        Step::Start(msg) => bar.set_message(msg.to_string()),
        Step::Done => bar.inc(1),
    })?;
    bar.finish_and_clear();
    let rows = &b.rows;

    let rules_name = report::show(&a.workload.rules, DEFAULT_RULES_NAME);
    let trace_name = report::show(&a.workload.trace, DEFAULT_TRACE_NAME);
    out.line(format!("rules {rules_name}: {} rules; packets {trace_name}: {} packets", rules.len(), keys.len()));
    out.line(format!(
        "verified {} packets against the reference (seed {}); update rates over {:.0}% of the rules; keys held as {}",
        b.verified,
        a.workload.seed,
        a.update_fraction * 100.0,
        if b.narrow_batches { "narrow keys (40 bytes)" } else { "FlowKeys (112 bytes)" }
    ));
    out.line(format!(
        "{:<6} {:>9} {:>12} {:>9} {:>19} {:>10} {:>10} {:>10} {:>11} {:>11} {:>8}  stats",
        "name",
        "build_ms",
        "bytes",
        "Mpps",
        "ns/pkt (min-max)",
        "Mpps(1x1)",
        "mismatch",
        "cross",
        "remove/s",
        "insert/s",
        "upd_mis"
    ));
    let opt = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.0}"));
    for r in rows {
        let stats: Vec<String> = r.stats.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.line(format!(
            "{:<6} {:>9.2} {:>12} {:>9.3} {:>19} {:>10.3} {:>10} {:>10} {:>11} {:>11} {:>8}  {}{}",
            r.kind.name(),
            r.build.as_secs_f64() * 1e3,
            r.memory,
            1e3 / r.ns_batch.median,
            format!("{:.1} ({:.1}-{:.1})", r.ns_batch.median, r.ns_batch.min, r.ns_batch.max),
            1e3 / r.ns_single.median,
            r.mismatches,
            r.cross.as_ref().map_or_else(|| "-".to_string(), |(_, n)| n.to_string()),
            opt(r.updates.as_ref().map(|u| u.remove_per_s)),
            opt(r.updates.as_ref().map(|u| u.insert_per_s)),
            r.updates.as_ref().map_or_else(|| "-".to_string(), |u| u.mismatches.to_string()),
            stats.join(" "),
            if r.timed_packets < keys.len() {
                format!(" (timed on {} sampled packets)", r.timed_packets)
            } else {
                String::new()
            },
        ));
    }

    // Where the bytes go, per classifier: each structure's bytes and bytes per rule.
    let per_rule = |b: usize| if rules.is_empty() { 0.0 } else { b as f64 / rules.len() as f64 };
    for r in rows {
        let parts: Vec<String> =
            r.memory_parts.iter().map(|(k, b)| format!("{k}={b} ({:.0} B/rule)", per_rule(*b))).collect();
        out.line(format!("bytes {:<6} {:.0} B/rule: {}", r.kind.name(), per_rule(r.memory), parts.join(" ")));
    }

    let list: Vec<Value> = rows
        .iter()
        .map(|r| {
            let (batch, single) = (r.ns_batch.inverse(1e3), r.ns_single.inverse(1e3));
            json!({
                "name": r.kind.name(),
                "build_ms": r.build.as_secs_f64() * 1e3,
                "memory_bytes": r.memory,
                "bytes_per_rule": per_rule(r.memory),
                "memory_breakdown": r.memory_parts.iter().map(|(k, b)| (k.clone(), json!(b))).collect::<Map<String, Value>>(),
                "timed_packets": r.timed_packets,
                "timed_passes": r.ns_batch.passes,
                "mpps": batch.median,
                "mpps_min": batch.min,
                "mpps_max": batch.max,
                "ns_per_packet": r.ns_batch.median,
                "ns_per_packet_min": r.ns_batch.min,
                "ns_per_packet_max": r.ns_batch.max,
                "timed_passes_single": r.ns_single.passes,
                "mpps_single": single.median,
                "mpps_single_min": single.min,
                "mpps_single_max": single.max,
                "ns_per_packet_single": r.ns_single.median,
                "ns_per_packet_single_min": r.ns_single.min,
                "ns_per_packet_single_max": r.ns_single.max,
                "mismatches": r.mismatches,
                "cross_mismatches": r.cross.as_ref().map(|(_, n)| *n),
                "cross_peer": r.cross.as_ref().map(|(p, _)| p.clone()),
                "updated_rules": r.updates.as_ref().map(|u| u.rules),
                "remove_per_s": r.updates.as_ref().map(|u| u.remove_per_s),
                "insert_per_s": r.updates.as_ref().map(|u| u.insert_per_s),
                "update_mismatches": r.updates.as_ref().map(|u| u.mismatches),
                "stats": r.stats.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<Map<String, Value>>(),
            })
        })
        .collect();
    if let Some(path) = &a.csv {
        report::write_csv(path, &list)?;
    }
    if let Some(path) = &a.json {
        let mut f = Map::new();
        f.insert("rules_file".into(), rules_name.into());
        f.insert("trace_file".into(), trace_name.into());
        f.insert("rules".into(), rules.len().into());
        f.insert("packets".into(), keys.len().into());
        f.insert("verified".into(), b.verified.into());
        f.insert("seed".into(), a.workload.seed.into());
        f.insert("update_fraction".into(), json!(a.update_fraction));
        f.insert("batch_keys".into(), json!(if b.narrow_batches { "narrow" } else { "flowkey" }));
        f.insert("classifiers".into(), Value::Array(list));
        report::write_json(path, "bench classifiers", f)?;
    }
    let bad = b.mismatches();
    if bad > 0 {
        return Err(Failure(format!("{bad} mismatches (see the table): a fast wrong answer is a failure")));
    }
    Ok(())
}
