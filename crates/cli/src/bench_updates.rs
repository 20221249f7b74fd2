//! `rqvs bench updates`: NuevoMatchUP looking packets up while rules change under it.
//!
//! One thread looks the trace up continuously, in batches of 32; updates (alternating inserts from
//! a held-out 10% of the rule-set and removals of random live rules, which return to the pool of
//! rules to insert) arrive at `--rate` per second and are applied between batches; the trainer
//! retrains on the second core (`LiveNuevoMatch`). The lookup thread only records what it did:
//! every update, every swap that made staged rules visible (delayed policy), and the results of
//! every 16th batch. After the run a shadow TupleMerge replays that record in order and checks each
//! recorded batch against exactly the rules visible when it was looked up (instant: every live
//! rule; delayed: all but the staged ones). So the checker costs the measured thread nothing but
//! the recording, and the Mpps reported are the thread's real rate.
//! Reports a time series every 100 ms: lookup Mpps, coverage, remainder and staged rules, training
//! sessions and their duration, mismatches; and where the lookup thread's time went.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rqvs_classify::nuevomatch::live::{LiveNuevoMatch, Policy};
use rqvs_classify::nuevomatch::NuevoMatchConfig;
use rqvs_classify::{Classifier, TupleMerge, BATCH};
use rqvs_flow::{FlowKey, Rule, RuleId};
use serde_json::{json, Map, Value};

use crate::args::PolicyArg;
use crate::report::{self, Out};
use crate::Failure;
use rqvs_experiment::inputs::{self, DEFAULT_RULES_NAME, DEFAULT_TRACE_NAME};

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
    #[arg(long, alias = "threshold", default_value_t = 0.1)]
    pub retrain_threshold: f64,
    /// Duration of the run, in seconds.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// In-place inserts: a bucket whose range holds a new rule takes it while it has fewer than
    /// bucket size + this many rules; `none` sends every insert to the remainder (the paper's).
    #[arg(long, default_value = "16", value_parser = parse_slack)]
    pub insert_slack: Slack,
    /// Seed of the held-out split and the update order.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write a JSON report to this file (`-` = stdout).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// `--insert-slack`: a number, or `none`.
#[derive(Clone, Copy, Debug)]
pub struct Slack(pub Option<usize>);

fn parse_slack(s: &str) -> Result<Slack, String> {
    match s {
        "none" => Ok(Slack(None)),
        n => n.parse().map(|n| Slack(Some(n))).map_err(|_| format!("expected a number of rules or 'none', got '{s}'")),
    }
}

#[derive(Default, Clone)]
struct Interval {
    packets: u64,
    updates: u64,
    /// Time inside the classifier's `insert` and `remove` calls.
    update: Duration,
    /// Time inside `poll` (starting training, swapping a model in, replaying the log).
    poll: Duration,
    /// Time inside `lookup_batch`.
    lookup: Duration,
}

impl Interval {
    fn add(&mut self, o: &Interval) {
        self.packets += o.packets;
        self.updates += o.updates;
        self.update += o.update;
        self.poll += o.poll;
        self.lookup += o.lookup;
    }
}

/// One update of the run's sequence (made before the run, so that the lookup thread only takes
/// the next one: no random choice, map lookup or copy of a rule while it is measured).
enum Op {
    Insert(Rule),
    Remove(RuleId),
}

/// The update sequence: alternately an insert of a random rule of the pool (at first the
/// held-out rules) and a removal of a random live rule, which returns to the pool. Also returns
/// which inserts are of rules never in the classifier before (fresh).
fn make_ops(n: usize, live: &[Rule], pool: &[Rule], rng: &mut impl Rng) -> (Vec<Op>, Vec<bool>) {
    let rules: HashMap<RuleId, &Rule> = live.iter().chain(pool).map(|r| (r.id, r)).collect();
    let mut live_ids: Vec<RuleId> = live.iter().map(|r| r.id).collect();
    let mut pool_ids: Vec<RuleId> = pool.iter().map(|r| r.id).collect();
    let mut seen: HashSet<RuleId> = live_ids.iter().copied().collect();
    let (mut ops, mut fresh) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        if i % 2 == 0 && !pool_ids.is_empty() {
            let id = pool_ids.swap_remove(rng.gen_range(0..pool_ids.len()));
            fresh.push(seen.insert(id));
            live_ids.push(id);
            ops.push(Op::Insert(rules[&id].clone()));
        } else if !live_ids.is_empty() {
            let id = live_ids.swap_remove(rng.gen_range(0..live_ids.len()));
            pool_ids.push(id);
            ops.push(Op::Remove(id));
            fresh.push(false);
        }
    }
    (ops, fresh)
}

/// What the lookup thread saw, for the checker to replay after the run. `applied`: how many
/// updates of the sequence had been applied.
enum Event {
    /// Delayed policy: a swap made these staged rules visible.
    Visible { applied: usize, ids: Vec<RuleId> },
    /// The results of the batch `keys[at..at + BATCH]`, looked up during series interval `interval`.
    Check { applied: usize, interval: usize, at: usize, results: Box<[Option<RuleId>; BATCH]> },
}

/// Replays the first updates of `ops` and `events` in order on a TupleMerge holding the visible
/// rules, checking every recorded batch; returns (checked, mismatches) per series interval (one
/// more for the part after the last).
fn verify(
    ops: &[Op],
    events: &[Event],
    first: &[Rule],
    keys: &[FlowKey],
    policy: Policy,
    intervals: usize,
) -> Result<Vec<(u64, u64)>, Failure> {
    let mut shadow = TupleMerge::build(first)?;
    let mut staged: HashMap<RuleId, Rule> = HashMap::new();
    let mut per = vec![(0u64, 0u64); intervals + 1];
    let mut buf = [None; BATCH];
    let mut done = 0;
    for e in events {
        let applied = match e {
            Event::Visible { applied, .. } | Event::Check { applied, .. } => *applied,
        };
        for op in &ops[done..applied] {
            match op {
                Op::Insert(r) => match policy {
                    Policy::Instant => shadow.insert(r.clone())?,
                    Policy::Delayed => {
                        staged.insert(r.id, r.clone());
                    }
                },
                Op::Remove(id) => {
                    if staged.remove(id).is_none() {
                        shadow.remove(*id);
                    }
                }
            }
        }
        done = applied;
        match e {
            Event::Visible { ids, .. } => {
                for id in ids {
                    if let Some(r) = staged.remove(id) {
                        shadow.insert(r)?;
                    }
                }
            }
            Event::Check { interval, at, results, .. } => {
                shadow.lookup_batch(&keys[*at..*at + BATCH], &mut buf);
                let p = &mut per[(*interval).min(intervals)];
                p.0 += BATCH as u64;
                p.1 += results.iter().zip(&buf).filter(|(x, y)| x != y).count() as u64;
            }
        }
    }
    Ok(per)
}

/// Most updates one run makes (`--rate` × `--seconds`): the sequence is made beforehand, and
/// each update holds a copy of its rule for the checker (~170 bytes on average), so 20M is ~3.4 GB.
const MAX_UPDATES: f64 = 20e6;

pub fn run(a: &Args) -> Result<(), Failure> {
    if a.seconds.is_nan() || a.seconds <= 0.0 || a.rate as f64 * a.seconds > MAX_UPDATES {
        return Err(Failure(format!(
            "bench updates makes its update sequence beforehand: --rate x --seconds must be positive and at most {MAX_UPDATES:.0} (got {} x {})",
            a.rate, a.seconds
        )));
    }
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
    let pool: Vec<Rule> = rules.split_off(rules.len() - held);
    let policy = match a.policy {
        PolicyArg::Instant => Policy::Instant,
        PolicyArg::Delayed => Policy::Delayed,
    };
    let t0 = Instant::now();
    let config = NuevoMatchConfig { insert_slack: a.insert_slack.0, ..NuevoMatchConfig::always_learned() };
    let mut live = LiveNuevoMatch::with_config(&rules, policy, a.retrain_threshold, config)?;
    let first_build = t0.elapsed();
    // Enough for the whole run (the loop stops at `seconds`).
    let (ops, fresh) = make_ops((a.rate as f64 * a.seconds) as usize + 2, &rules, &pool, &mut rng);
    // The rules to insert, in order, moved into the classifier one by one (`ops` keeps its copies
    // for the checker).
    let mut inserts = ops
        .iter()
        .filter_map(|o| match o {
            Op::Insert(r) => Some(r.clone()),
            Op::Remove(_) => None,
        })
        .collect::<Vec<Rule>>()
        .into_iter();
    let mut events: Vec<Event> = Vec::with_capacity((a.seconds * 50_000.0) as usize);
    let mut staged: HashSet<RuleId> = HashSet::new();
    let mut fresh_placed = (0u64, 0u64);

    let mut series: Vec<Value> = Vec::new();
    let mut cur = Interval::default();
    let mut totals = Interval::default();
    let mut out_buf = [None; BATCH];
    let (mut at, mut batch_no, mut applied) = (0usize, 0u64, 0usize);
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
        let due = ((now - start).as_secs_f64() * a.rate as f64) as usize;
        let u = Instant::now();
        let from = applied;
        while applied < due.min(ops.len()) && applied - from < 10_000 {
            match &ops[applied] {
                Op::Insert(_) => {
                    let r = inserts.next().expect("one rule per insert");
                    let (id, before) = (r.id, live.insert_counts().0);
                    live.insert(r)?;
                    if fresh[applied] {
                        fresh_placed.0 += 1;
                        fresh_placed.1 += live.insert_counts().0 - before;
                    }
                    if policy == Policy::Delayed {
                        staged.insert(id);
                    }
                }
                Op::Remove(id) => {
                    live.remove(*id);
                    if policy == Policy::Delayed {
                        staged.remove(id);
                    }
                }
            }
            applied += 1;
        }
        if applied > from {
            cur.updates += (applied - from) as u64;
            cur.update += u.elapsed();
        }
        let u = Instant::now();
        live.poll();
        cur.poll += u.elapsed();
        if live.sessions().len() != sessions_seen {
            sessions_seen = live.sessions().len();
            if policy == Policy::Delayed {
                // A swap: rules no longer staged became visible.
                let still: HashSet<RuleId> = live.staged_ids().into_iter().collect();
                let visible: Vec<RuleId> = staged.iter().filter(|id| !still.contains(id)).copied().collect();
                staged = still;
                events.push(Event::Visible { applied, ids: visible });
            }
        }
        // One batch.
        if at + BATCH > keys.len() {
            at = 0;
        }
        let u = Instant::now();
        live.lookup_batch(&keys[at..at + BATCH], &mut out_buf);
        cur.lookup += u.elapsed();
        batch_no += 1;
        cur.packets += BATCH as u64;
        if batch_no % 16 == 0 {
            events.push(Event::Check { applied, interval: series.len(), at, results: Box::new(out_buf) });
        }
        at += BATCH;
        let now = Instant::now();
        if now - tick >= Duration::from_millis(100) {
            let secs = (now - tick).as_secs_f64();
            let last = live.sessions().last();
            series.push(json!({
                "t_s": (now - start).as_secs_f64(),
                "mpps": cur.packets as f64 / secs / 1e6,
                "updates_per_s": cur.updates as f64 / secs,
                "update_share": cur.update.as_secs_f64() / secs,
                "coverage": live.coverage(),
                "remainder_rules": live.remainder_rules(),
                "staged_rules": live.staged(),
                "rules": live.current().len() + live.staged(),
                "sessions": live.sessions().len(),
                "training": live.training(),
                "last_train_ms": last.map(|s| s.train.as_secs_f64() * 1e3),
            }));
            totals.add(&cur);
            cur = Interval::default();
            tick = now;
        }
    }
    totals.add(&cur);
    let elapsed = start.elapsed().as_secs_f64();
    live.finish_training();
    let t_verify = Instant::now();
    let per = verify(&ops, &events, &rules, &keys, policy, series.len())?;
    let verify_s = t_verify.elapsed().as_secs_f64();
    for (p, (checked, mismatches)) in series.iter_mut().zip(&per) {
        p["checked"] = (*checked).into();
        p["mismatches"] = (*mismatches).into();
    }
    let (checked, mismatches) = per.iter().fold((0, 0), |t, p| (t.0 + p.0, t.1 + p.1));
    let sessions = live.sessions();
    let mean_train = if sessions.is_empty() {
        0.0
    } else {
        sessions.iter().map(|s| s.train.as_secs_f64()).sum::<f64>() / sessions.len() as f64 * 1e3
    };
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let max_swap = sessions.iter().map(|s| ms(s.swap)).fold(0.0, f64::max);
    let max_start = sessions.iter().map(|s| ms(s.start)).fold(0.0, f64::max);
    let min_cov = series.iter().filter_map(|p| p["coverage"].as_f64()).fold(f64::INFINITY, f64::min);
    let update_us = totals.update.as_secs_f64() * 1e6 / totals.updates.max(1) as f64;
    let share = |d: Duration| d.as_secs_f64() / elapsed;
    let (into_isets, into_remainder) = live.insert_counts();

    out.line(format!(
        "rules {}: {} live + {} held out; packets {}: {}; policy {:?}, threshold {}, insert slack {}, first build {:.1} ms",
        report::show(&a.rules, DEFAULT_RULES_NAME),
        rules.len(),
        held,
        report::show(&a.trace, DEFAULT_TRACE_NAME),
        keys.len(),
        a.policy,
        a.retrain_threshold,
        a.insert_slack.0.map_or("none (inserts into the remainder)".to_string(), |n| n.to_string()),
        first_build.as_secs_f64() * 1e3
    ));
    out.line(format!(
        "{:.1} s: {:.3} Mpps lookups, {:.0} updates/s applied (asked {}), {} training sessions (mean {:.1} ms), coverage now {:.3} (min {:.3})",
        elapsed,
        totals.packets as f64 / elapsed / 1e6,
        totals.updates as f64 / elapsed,
        a.rate,
        sessions.len(),
        mean_train,
        live.coverage(),
        if min_cov.is_finite() { min_cov } else { live.coverage() },
    ));
    out.line(format!(
        "lookup thread: lookups {:.0}%, updates {:.0}% ({:.2} us each), poll {:.1}%, the rest {:.0}%; inserts into buckets {} / remainder {} (of the {} fresh rules' first inserts, {} into buckets)",
        100.0 * share(totals.lookup),
        100.0 * share(totals.update),
        update_us,
        100.0 * share(totals.poll),
        100.0 * (1.0 - share(totals.lookup + totals.update + totals.poll)),
        into_isets,
        into_remainder,
        fresh_placed.0,
        fresh_placed.1,
    ));
    if !sessions.is_empty() {
        out.line(format!(
            "sessions: longest pause of the lookup thread to start one {max_start:.1} ms, to swap one in {max_swap:.1} ms"
        ));
    }
    out.line(format!(
        "checked {checked} lookups against the visible rules after the run ({verify_s:.1} s): {mismatches} mismatches"
    ));
    if let Some(path) = &a.json {
        let mut f = Map::new();
        f.insert("rules_file".into(), report::show(&a.rules, DEFAULT_RULES_NAME).into());
        f.insert("trace_file".into(), report::show(&a.trace, DEFAULT_TRACE_NAME).into());
        f.insert("policy".into(), format!("{:?}", a.policy).to_lowercase().into());
        f.insert("rate".into(), a.rate.into());
        f.insert("threshold".into(), json!(a.retrain_threshold));
        f.insert("insert_slack".into(), json!(a.insert_slack.0));
        f.insert("seconds".into(), json!(elapsed));
        f.insert("first_build_ms".into(), json!(first_build.as_secs_f64() * 1e3));
        f.insert("packets".into(), totals.packets.into());
        f.insert("mpps".into(), json!(totals.packets as f64 / elapsed / 1e6));
        f.insert("lookup_share".into(), json!(share(totals.lookup)));
        f.insert("update_share".into(), json!(share(totals.update)));
        f.insert("update_us".into(), json!(update_us));
        f.insert("poll_share".into(), json!(share(totals.poll)));
        f.insert("inserts_into_buckets".into(), into_isets.into());
        f.insert("inserts_into_remainder".into(), into_remainder.into());
        f.insert("fresh_inserts".into(), fresh_placed.0.into());
        f.insert("fresh_inserts_into_buckets".into(), fresh_placed.1.into());
        f.insert("updates".into(), totals.updates.into());
        f.insert("sessions".into(), sessions.len().into());
        f.insert("mean_train_ms".into(), json!(mean_train));
        f.insert("max_start_ms".into(), json!(max_start));
        f.insert("max_swap_ms".into(), json!(max_swap));
        f.insert("min_coverage".into(), json!(if min_cov.is_finite() { min_cov } else { live.coverage() }));
        f.insert("checked".into(), checked.into());
        f.insert("mismatches".into(), mismatches.into());
        f.insert("seed".into(), a.seed.into());
        f.insert("series".into(), Value::Array(series));
        report::write_json(path, "bench updates", f)?;
    }
    if mismatches > 0 {
        return Err(Failure(format!("{mismatches} mismatches against the visible rules")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The after-the-run checker replays the updates up to each recorded batch: results a
    /// classifier with exactly those updates gives pass, and one wrong result is one mismatch.
    #[test]
    fn verify_replays_updates_and_counts_wrong_results() {
        let mut rules = inputs::load_rules(None).unwrap();
        let keys: Vec<FlowKey> = inputs::load_packets(None, 1).unwrap().entries.iter().map(|e| e.key).collect();
        let pool = rules.split_off(rules.len() - 100);
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let (ops, fresh) = make_ops(400, &rules, &pool, &mut rng);
        let fresh = fresh.iter().filter(|f| **f).count();
        assert!(ops.len() == 400 && fresh > 0 && fresh <= 100, "{} ops, {fresh} fresh", ops.len());
        let mut tm = TupleMerge::build(&rules).unwrap();
        let mut events = Vec::new();
        let mut results = [None; BATCH];
        for (i, op) in ops.iter().enumerate() {
            match op {
                Op::Insert(r) => tm.insert(r.clone()).unwrap(),
                Op::Remove(id) => assert!(tm.remove(*id).is_some()),
            }
            let at = (i * 7) % (keys.len() - BATCH);
            tm.lookup_batch(&keys[at..at + BATCH], &mut results);
            events.push(Event::Check { applied: i + 1, interval: i / 100, at, results: Box::new(results) });
        }
        let per = verify(&ops, &events, &rules, &keys, Policy::Instant, 4).unwrap();
        assert_eq!(per.iter().map(|p| p.0).sum::<u64>(), 400 * BATCH as u64);
        assert_eq!(per.iter().map(|p| p.1).sum::<u64>(), 0);
        // The same results one update late are wrong somewhere.
        let shifted: Vec<Event> = events
            .into_iter()
            .map(|e| match e {
                Event::Check { applied, interval, at, results } => {
                    Event::Check { applied: applied - 1, interval, at, results }
                }
                v => v,
            })
            .collect();
        let per = verify(&ops, &shifted, &rules, &keys, Policy::Instant, 4).unwrap();
        assert!(per.iter().map(|p| p.1).sum::<u64>() > 0);
    }
}
