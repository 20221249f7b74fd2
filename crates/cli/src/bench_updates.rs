//! `rqvs bench updates`: NuevoMatchUP looking packets up while rules change under it.
//!
//! One thread looks the trace up continuously, in batches of 32; updates (alternating inserts from
//! a held-out 10% of the rule-set and removals of random live rules) arrive at `--rate` per
//! second and are applied between batches; the trainer retrains on the second core
//! (`LiveNuevoMatch`). Every 16th batch is checked against a shadow TupleMerge holding exactly the
//! rules visible at that moment (instant: every live rule; delayed: all but the staged ones).
//! The checker's work (the shadow's updates and lookups) runs on the lookup thread too; its time is
//! measured and reported apart (`mpps_without_check`: what the classifier's thread would do alone).
//! Reports a time series every 100 ms: lookup Mpps, coverage, remainder and staged rules, training
//! sessions and their duration, mismatches.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rqvs_classify::nuevomatch::live::{LiveNuevoMatch, Policy};
use rqvs_classify::{Classifier, TupleMerge, BATCH};
use rqvs_flow::{FlowKey, Rule, RuleId};
use serde_json::{json, Map, Value};

use crate::inputs::{self, DEFAULT_RULES_NAME, DEFAULT_TRACE_NAME};
use crate::report::{self, Out};
use crate::Failure;

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum PolicyArg {
    Instant,
    Delayed,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Rule file (default: embedded acl1_1k).
    #[arg(long)]
    pub rules: Option<PathBuf>,
    /// Packets (default: embedded acl1_1k trace).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Updates per second (half inserts, half removals).
    #[arg(long, default_value_t = 10_000)]
    pub rate: u64,
    /// When inserted rules become visible.
    #[arg(long, value_enum, default_value_t = PolicyArg::Instant)]
    pub policy: PolicyArg,
    /// Retrain when the rules inserted into the remainder since the last model exceed this
    /// share of all rules.
    #[arg(long, default_value_t = 0.1)]
    pub threshold: f64,
    /// Duration of the run, in seconds.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Seed of the held-out split and the update order.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write a JSON report to this file (`-` = stdout).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Default, Clone)]
struct Interval {
    packets: u64,
    updates: u64,
    checked: u64,
    mismatches: u64,
    /// Time the lookup thread spent on the checker (the shadow's updates and lookups, the
    /// harness's copies): not the classifier's work, reported apart.
    check: Duration,
}

impl Interval {
    fn add(&mut self, o: &Interval) {
        self.packets += o.packets;
        self.updates += o.updates;
        self.checked += o.checked;
        self.mismatches += o.mismatches;
        self.check += o.check;
    }
}

/// The shadow: a TupleMerge holding the visible rules.
struct Shadow {
    tm: TupleMerge,
    staged: HashSet<RuleId>,
    staged_rules: Vec<Rule>,
}

pub fn run(a: &Args) -> Result<(), Failure> {
    let out = Out::new(a.json.as_deref());
    let mut rules = inputs::load_rules(a.rules.as_deref())?;
    let packets = inputs::load_packets(a.trace.as_deref(), 1)?;
    let keys: Vec<FlowKey> = packets.entries.iter().map(|e| e.key).collect();
    if keys.len() < BATCH || rules.len() < 10 {
        return Err(Failure("bench updates needs at least 32 packets and 10 rules".into()));
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(a.seed);
    rules.shuffle(&mut rng);
    let held = rules.len() / 10;
    let mut pool: Vec<Rule> = rules.split_off(rules.len() - held);
    let policy = match a.policy {
        PolicyArg::Instant => Policy::Instant,
        PolicyArg::Delayed => Policy::Delayed,
    };
    let t0 = Instant::now();
    let mut live = LiveNuevoMatch::new(&rules, policy, a.threshold)?;
    let first_build = t0.elapsed();
    let mut shadow = Shadow { tm: TupleMerge::build(&rules)?, staged: HashSet::new(), staged_rules: Vec::new() };
    let mut live_ids: Vec<RuleId> = rules.iter().map(|r| r.id).collect();
    let by_id: std::collections::HashMap<RuleId, Rule> =
        rules.iter().chain(pool.iter()).map(|r| (r.id, r.clone())).collect();

    let mut series: Vec<Value> = Vec::new();
    let mut cur = Interval::default();
    let mut totals = Interval::default();
    let mut out_buf = [None; BATCH];
    let mut check_buf = [None; BATCH];
    let (mut at, mut batch_no, mut applied, mut next_insert) = (0usize, 0u64, 0u64, true);
    let mut sessions_seen = 0;
    let start = Instant::now();
    let mut tick = start;
    let duration = Duration::from_secs_f64(a.seconds);
    loop {
        let now = Instant::now();
        if now - start >= duration {
            break;
        }
        // Updates due by now.
        let due = ((now - start).as_secs_f64() * a.rate as f64) as u64;
        let mut budget = 10_000;
        while applied < due && budget > 0 {
            budget -= 1;
            applied += 1;
            cur.updates += 1;
            if next_insert && !pool.is_empty() {
                let r = pool.swap_remove(rng.gen_range(0..pool.len()));
                let c = Instant::now();
                let copy = r.clone();
                cur.check += c.elapsed();
                live.insert(copy)?;
                let c = Instant::now();
                live_ids.push(r.id);
                match policy {
                    Policy::Instant => shadow.tm.insert(r)?,
                    Policy::Delayed => {
                        shadow.staged.insert(r.id);
                        shadow.staged_rules.push(r);
                    }
                }
                cur.check += c.elapsed();
            } else if !live_ids.is_empty() {
                let id = live_ids.swap_remove(rng.gen_range(0..live_ids.len()));
                live.remove(id);
                let c = Instant::now();
                if shadow.staged.remove(&id) {
                    shadow.staged_rules.retain(|r| r.id != id);
                } else {
                    shadow.tm.remove(id);
                }
                pool.push(by_id[&id].clone());
                cur.check += c.elapsed();
            }
            next_insert = !next_insert;
        }
        live.poll();
        if live.sessions().len() != sessions_seen {
            let c = Instant::now();
            sessions_seen = live.sessions().len();
            // A swap: rules no longer staged became visible.
            let still: HashSet<RuleId> = live.staged_ids().into_iter().collect();
            let (now_visible, staged): (Vec<Rule>, Vec<Rule>) =
                std::mem::take(&mut shadow.staged_rules).into_iter().partition(|r| !still.contains(&r.id));
            for r in now_visible {
                shadow.staged.remove(&r.id);
                shadow.tm.insert(r)?;
            }
            shadow.staged_rules = staged;
            cur.check += c.elapsed();
        }
        // One batch.
        if at + BATCH > keys.len() {
            at = 0;
        }
        let batch = &keys[at..at + BATCH];
        live.lookup_batch(batch, &mut out_buf);
        at += BATCH;
        batch_no += 1;
        cur.packets += BATCH as u64;
        if batch_no % 16 == 0 {
            let c = Instant::now();
            shadow.tm.lookup_batch(batch, &mut check_buf);
            cur.checked += BATCH as u64;
            cur.mismatches += out_buf.iter().zip(&check_buf).filter(|(x, y)| x != y).count() as u64;
            cur.check += c.elapsed();
        }
        let now = Instant::now();
        if now - tick >= Duration::from_millis(100) {
            let secs = (now - tick).as_secs_f64();
            let last = live.sessions().last();
            series.push(json!({
                "t_s": (now - start).as_secs_f64(),
                "mpps": cur.packets as f64 / secs / 1e6,
                "mpps_without_check": cur.packets as f64 / (secs - cur.check.as_secs_f64()).max(1e-9) / 1e6,
                "updates_per_s": cur.updates as f64 / secs,
                "coverage": live.coverage(),
                "remainder_rules": live.remainder_rules(),
                "staged_rules": live.staged(),
                "rules": live.current().len() + live.staged(),
                "sessions": live.sessions().len(),
                "training": live.training(),
                "last_train_ms": last.map(|s| s.train.as_secs_f64() * 1e3),
                "checked": cur.checked,
                "mismatches": cur.mismatches,
            }));
            totals.add(&cur);
            cur = Interval::default();
            tick = now;
        }
    }
    totals.add(&cur);
    let elapsed = start.elapsed().as_secs_f64();
    let sessions = live.sessions();
    let mean_train = if sessions.is_empty() {
        0.0
    } else {
        sessions.iter().map(|s| s.train.as_secs_f64()).sum::<f64>() / sessions.len() as f64 * 1e3
    };
    let check_s = totals.check.as_secs_f64();
    let mpps_without_check = totals.packets as f64 / (elapsed - check_s).max(1e-9) / 1e6;
    let min_cov = series.iter().filter_map(|p| p["coverage"].as_f64()).fold(f64::INFINITY, f64::min);

    out.line(format!(
        "rules {}: {} live + {} held out; packets {}: {}; policy {:?}, threshold {}, first build {:.1} ms",
        report::show(&a.rules, DEFAULT_RULES_NAME),
        rules.len(),
        held,
        report::show(&a.trace, DEFAULT_TRACE_NAME),
        keys.len(),
        a.policy,
        a.threshold,
        first_build.as_secs_f64() * 1e3
    ));
    out.line(format!(
        "{:.1} s: {:.3} Mpps lookups ({:.3} without the checker's {:.0}% of the thread), {:.0} updates/s applied (asked {}), {} training sessions (mean {:.1} ms), coverage now {:.3} (min {:.3})",
        elapsed,
        totals.packets as f64 / elapsed / 1e6,
        mpps_without_check,
        100.0 * check_s / elapsed,
        totals.updates as f64 / elapsed,
        a.rate,
        sessions.len(),
        mean_train,
        live.coverage(),
        if min_cov.is_finite() { min_cov } else { live.coverage() },
    ));
    out.line(format!("checked {} lookups against the visible rules: {} mismatches", totals.checked, totals.mismatches));
    if let Some(path) = &a.json {
        let mut f = Map::new();
        f.insert("rules_file".into(), report::show(&a.rules, DEFAULT_RULES_NAME).into());
        f.insert("trace_file".into(), report::show(&a.trace, DEFAULT_TRACE_NAME).into());
        f.insert("policy".into(), format!("{:?}", a.policy).to_lowercase().into());
        f.insert("rate".into(), a.rate.into());
        f.insert("threshold".into(), json!(a.threshold));
        f.insert("seconds".into(), json!(elapsed));
        f.insert("first_build_ms".into(), json!(first_build.as_secs_f64() * 1e3));
        f.insert("packets".into(), totals.packets.into());
        f.insert("mpps".into(), json!(totals.packets as f64 / elapsed / 1e6));
        f.insert("mpps_without_check".into(), json!(mpps_without_check));
        f.insert("check_share".into(), json!(check_s / elapsed));
        f.insert("updates".into(), totals.updates.into());
        f.insert("sessions".into(), sessions.len().into());
        f.insert("mean_train_ms".into(), json!(mean_train));
        f.insert("checked".into(), totals.checked.into());
        f.insert("mismatches".into(), totals.mismatches.into());
        f.insert("seed".into(), a.seed.into());
        f.insert("series".into(), Value::Array(series));
        report::write_json(path, "bench updates", f)?;
    }
    live.finish_training();
    if totals.mismatches > 0 {
        return Err(Failure(format!("{} mismatches against the visible rules", totals.mismatches)));
    }
    Ok(())
}
