//! `rqvs bench classifiers`: every classifier on the same rules and packets, side by side.
//!
//! For each classifier: build time, lookup rate in batches of 32 and one key at a time (the median
//! of several passes over the whole trace, after a warm-up pass), memory, mismatches against the reference on a sample
//! (all packets when the set is small), mismatches against another classifier on every packet, and
//! update rates — remove 10% of the rules in random order, re-insert them in another order — with
//! every packet re-checked afterwards.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rqvs_classify::{Classifier, ClassifierKind, Reference, BATCH};
use rqvs_flow::{FlowKey, Rule, RuleId};
use serde_json::{json, Map, Value};

use crate::args::Workload;
use crate::report::{self, Out};
use crate::Failure;
use rqvs_experiment::inputs::{self, DEFAULT_RULES_NAME, DEFAULT_TRACE_NAME};
use rqvs_experiment::verify;

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Compare classifiers on one rule-set and trace: build, lookup rate, memory, mismatches,
    /// update rates.
    Classifiers(Args),
    /// NuevoMatchUP under a stream of rule updates with a background trainer: lookup rate,
    /// coverage, training sessions and mismatches over time.
    Updates(crate::bench_updates::Args),
}

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub workload: Workload,
    /// Comma-separated classifiers.
    #[arg(long, value_enum, default_value = "ref,tss,tm", value_delimiter = ',')]
    pub classifiers: Vec<ClassifierKind>,
    /// Share of the rules removed and re-inserted for the update rates.
    #[arg(long, default_value_t = 0.1)]
    pub update_fraction: f64,
    /// Minimum time spent per lookup measurement, in milliseconds (at least one full pass).
    #[arg(long, default_value_t = 300)]
    pub min_ms: u64,
    /// Write a JSON report to this file (`-` = stdout).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Above this many rules the reference's updates (linear time each) are not measured.
const REFERENCE_UPDATE_LIMIT: usize = 20_000;

struct Row {
    name: String,
    build: Duration,
    memory: usize,
    timed_packets: usize,
    ns_batch: f64,
    ns_single: f64,
    mismatches: usize,
    cross: Option<(String, usize)>,
    updates: Option<Updates>,
    stats: Vec<(&'static str, f64)>,
}

struct Updates {
    rules: usize,
    remove_per_s: f64,
    insert_per_s: f64,
    mismatches: usize,
}

pub fn run(cmd: &Command) -> Result<(), Failure> {
    match cmd {
        Command::Classifiers(a) => classifiers(a),
        Command::Updates(a) => crate::bench_updates::run(a),
    }
}

fn lookup_all(c: &dyn Classifier, keys: &[FlowKey], out: &mut [Option<RuleId>], batched: bool) {
    if batched {
        for (k, o) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            c.lookup_batch(k, o);
        }
    } else {
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = c.lookup(k);
        }
    }
}

/// Median ns/packet over passes of the whole `keys`, after one untimed warm-up pass, passes
/// repeated until `min` has elapsed (at least one, at most 15).
fn time_lookups(c: &dyn Classifier, keys: &[FlowKey], out: &mut [Option<RuleId>], batched: bool, min: Duration) -> f64 {
    lookup_all(c, keys, out, batched);
    let mut per_pass = Vec::new();
    let start = Instant::now();
    while per_pass.is_empty() || (start.elapsed() < min && per_pass.len() < 15) {
        let t = Instant::now();
        lookup_all(c, keys, out, batched);
        per_pass.push(t.elapsed().as_nanos() as f64 / keys.len() as f64);
    }
    per_pass.sort_by(f64::total_cmp);
    per_pass[per_pass.len() / 2]
}

fn classifiers(a: &Args) -> Result<(), Failure> {
    let out = Out::new(a.json.as_deref());
    let rules = inputs::load_rules(a.workload.rules.as_deref())?;
    let packets = inputs::load_packets(a.workload.trace.as_deref(), 1)?;
    let keys: Vec<FlowKey> = packets.entries.iter().map(|e| e.key).collect();
    if keys.is_empty() {
        return Err(Failure(format!("{}: no packets", report::show(&a.workload.trace, DEFAULT_TRACE_NAME))));
    }
    let min = Duration::from_millis(a.min_ms);
    let progress = ProgressBar::new((a.classifiers.len() * 4 + 1) as u64);
    progress.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").expect("valid template"));

    // The reference's answers on the verification sample.
    progress.set_message("reference on the verification sample");
    let sample = verify::sample_indexes(rules.len(), keys.len(), a.workload.verify, a.workload.seed);
    let sample_keys: Vec<FlowKey> = sample.iter().map(|&i| keys[i]).collect();
    let reference = Reference::build(&rules)?;
    let mut want = vec![None; sample_keys.len()];
    lookup_all(&reference, &sample_keys, &mut want, true);
    drop(reference);
    progress.inc(1);

    let full_scan_ok = verify::full_verification_affordable(rules.len(), keys.len());
    let mut rows: Vec<Row> = Vec::new();
    let mut results: Vec<Option<Vec<Option<RuleId>>>> = Vec::new();
    for &kind in &a.classifiers {
        let name = kind.name();
        progress.set_message(format!("{name}: build"));
        let t0 = Instant::now();
        let mut c = rqvs_classify::build(kind, &rules)?;
        let build = t0.elapsed();
        progress.inc(1);

        // The reference on a big set is timed on the sample only.
        let timed: &[FlowKey] = if name == "ref" && !full_scan_ok { &sample_keys } else { &keys };
        let mut got = vec![None; timed.len()];
        progress.set_message(format!("{name}: lookups in batches of {BATCH}"));
        let ns_batch = time_lookups(c.as_ref(), timed, &mut got, true, min);
        progress.inc(1);
        progress.set_message(format!("{name}: lookups one at a time"));
        let mut single = vec![None; timed.len()];
        let ns_single = time_lookups(c.as_ref(), timed, &mut single, false, min);
        let mut mismatches = got.iter().zip(&single).filter(|(x, y)| x != y).count();
        progress.inc(1);

        let mut sample_got = vec![None; sample_keys.len()];
        lookup_all(c.as_ref(), &sample_keys, &mut sample_got, true);
        mismatches += sample_got.iter().zip(&want).filter(|(g, w)| g != w).count();

        progress.set_message(format!("{name}: updates"));
        // Size and classifier figures as built, before the update round changes them.
        let (memory, stats) = (c.memory_bytes(), c.stats());
        let updates = if name == "ref" && rules.len() > REFERENCE_UPDATE_LIMIT {
            None
        } else {
            Some(measure_updates(c.as_mut(), &rules, timed, &got, a.update_fraction, a.workload.seed)?)
        };
        progress.inc(1);
        rows.push(Row {
            name: name.to_string(),
            build,
            memory,
            timed_packets: timed.len(),
            ns_batch,
            ns_single,
            mismatches,
            cross: None,
            updates,
            stats,
        });
        results.push((timed.len() == keys.len()).then_some(got));
    }
    progress.finish_and_clear();

    // Every packet against another classifier: each full result set against the next one's.
    let full: Vec<usize> = (0..rows.len()).filter(|&i| results[i].is_some()).collect();
    for (j, &i) in full.iter().enumerate() {
        if full.len() < 2 {
            break;
        }
        let peer = full[(j + 1) % full.len()];
        let (x, y) = (results[i].as_ref().expect("full"), results[peer].as_ref().expect("full"));
        let n = x.iter().zip(y).filter(|(p, q)| p != q).count();
        rows[i].cross = Some((rows[peer].name.clone(), n));
    }

    let rules_name = report::show(&a.workload.rules, DEFAULT_RULES_NAME);
    let trace_name = report::show(&a.workload.trace, DEFAULT_TRACE_NAME);
    out.line(format!("rules {rules_name}: {} rules; packets {trace_name}: {} packets", rules.len(), keys.len()));
    out.line(format!(
        "verified {} packets against the reference (seed {}); update rates over {:.0}% of the rules",
        sample.len(),
        a.workload.seed,
        a.update_fraction * 100.0
    ));
    out.line(format!(
        "{:<6} {:>9} {:>12} {:>9} {:>9} {:>10} {:>10} {:>10} {:>11} {:>11} {:>8}  stats",
        "name",
        "build_ms",
        "bytes",
        "Mpps",
        "ns/pkt",
        "Mpps(1x1)",
        "mismatch",
        "cross",
        "remove/s",
        "insert/s",
        "upd_mis"
    ));
    let opt = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.0}"));
    for r in &rows {
        let stats: Vec<String> = r.stats.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.line(format!(
            "{:<6} {:>9.2} {:>12} {:>9.3} {:>9.1} {:>10.3} {:>10} {:>10} {:>11} {:>11} {:>8}  {}{}",
            r.name,
            r.build.as_secs_f64() * 1e3,
            r.memory,
            1e3 / r.ns_batch,
            r.ns_batch,
            1e3 / r.ns_single,
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

    if let Some(path) = &a.json {
        let mut f = Map::new();
        f.insert("rules_file".into(), rules_name.into());
        f.insert("trace_file".into(), trace_name.into());
        f.insert("rules".into(), rules.len().into());
        f.insert("packets".into(), keys.len().into());
        f.insert("verified".into(), sample.len().into());
        f.insert("seed".into(), a.workload.seed.into());
        f.insert("update_fraction".into(), json!(a.update_fraction));
        let list: Vec<Value> = rows
            .iter()
            .map(|r| {
                json!({
                    "name": r.name,
                    "build_ms": r.build.as_secs_f64() * 1e3,
                    "memory_bytes": r.memory,
                    "timed_packets": r.timed_packets,
                    "mpps": 1e3 / r.ns_batch,
                    "ns_per_packet": r.ns_batch,
                    "mpps_single": 1e3 / r.ns_single,
                    "ns_per_packet_single": r.ns_single,
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
        f.insert("classifiers".into(), Value::Array(list));
        report::write_json(path, "bench classifiers", f)?;
    }
    let bad: usize = rows
        .iter()
        .map(|r| r.mismatches + r.cross.as_ref().map_or(0, |c| c.1) + r.updates.as_ref().map_or(0, |u| u.mismatches))
        .sum();
    if bad > 0 {
        return Err(Failure(format!("{bad} mismatches (see the table): a fast wrong answer is a failure")));
    }
    Ok(())
}

/// Removes a random `fraction` of the rules in random order, re-inserts them in another random
/// order, and checks every packet of `keys` still classifies as in `before`.
fn measure_updates(
    c: &mut dyn Classifier,
    rules: &[Rule],
    keys: &[FlowKey],
    before: &[Option<RuleId>],
    fraction: f64,
    seed: u64,
) -> Result<Updates, Failure> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x5eed);
    let n = ((rules.len() as f64 * fraction).round() as usize).clamp(1, rules.len());
    let mut victims: Vec<&Rule> = rules.choose_multiple(&mut rng, n).collect();
    victims.shuffle(&mut rng);
    let t = Instant::now();
    for r in &victims {
        if c.remove(r.id).is_none() {
            return Err(Failure(format!("{}: rule {} could not be removed", c.name(), r.id)));
        }
    }
    let removal = t.elapsed();
    victims.shuffle(&mut rng);
    let t = Instant::now();
    for r in &victims {
        c.insert((*r).clone())?;
    }
    let insertion = t.elapsed();
    let mut after = vec![None; keys.len()];
    lookup_all(c, keys, &mut after, true);
    Ok(Updates {
        rules: n,
        remove_per_s: n as f64 / removal.as_secs_f64(),
        insert_per_s: n as f64 / insertion.as_secs_f64(),
        mismatches: after.iter().zip(before).filter(|(x, y)| x != y).count(),
    })
}
