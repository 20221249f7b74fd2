//! The update benchmark: NuevoMatchUP looking packets up while rules change under it — what
//! `rqvs bench updates` runs ([`run`]; the CLI's module docs describe the method).
//!
//! One thread looks the trace up continuously, in batches of 32; updates (alternating inserts
//! from a held-out 10% of the rule-set and removals of random live rules, which return to the
//! pool of rules to insert) arrive at `rate` per second and are applied between batches; the
//! trainer retrains on the second core (`LiveNuevoMatch`). The lookup thread only records what
//! it did; after the run a shadow TupleMerge replays that record and checks every 16th batch
//! against exactly the rules visible when it was looked up, so the rates are the thread's own.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use rqvs_classify::nuevomatch::live::{LiveNuevoMatch, Policy};
use rqvs_classify::nuevomatch::NuevoMatchConfig;
use rqvs_classify::{Classifier, TupleMerge, BATCH};
use rqvs_flow::rng::Rng;
use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::Error;

/// The benchmark's settings.
#[derive(Clone, Copy, Debug)]
pub struct UpdateBenchConfig {
    /// Updates per second (half inserts, half removals).
    pub rate: u64,
    pub policy: Policy,
    /// Retrain when the rules inserted into the remainder since the last model exceed this share.
    pub retrain_threshold: f64,
    pub seconds: f64,
    /// In-place inserts into a bucket of up to bucket size + this many rules; `None`: every
    /// insert to the remainder (the paper's).
    pub insert_slack: Option<usize>,
    /// Seed of the held-out split and the update order.
    pub seed: u64,
}

/// One 100 ms sample of the run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct UpdateSample {
    pub t_s: f64,
    pub mpps: f64,
    pub updates_per_s: f64,
    pub update_share: f64,
    pub coverage: f64,
    pub remainder_rules: usize,
    pub staged_rules: usize,
    pub rules: usize,
    pub sessions: usize,
    pub training: bool,
    pub last_train_ms: Option<f64>,
    /// Lookups checked after the run, and how many were wrong, in this interval.
    pub checked: u64,
    pub mismatches: u64,
}

/// What a run measured.
pub struct UpdateBench {
    /// Rules the classifier started with, and rules held out to insert.
    pub live_rules: usize,
    pub held: usize,
    pub first_build: Duration,
    pub elapsed_s: f64,
    /// Where the lookup thread's time went, over the whole run.
    pub totals: Interval,
    pub series: Vec<UpdateSample>,
    pub checked: u64,
    pub mismatches: u64,
    pub verify_s: f64,
    pub sessions: usize,
    pub mean_train_ms: f64,
    /// The lookup thread's longest pause to start a session and to swap one in.
    pub max_start_ms: f64,
    pub max_swap_ms: f64,
    pub coverage: f64,
    pub min_coverage: f64,
    /// Inserts into buckets and into the remainder; fresh rules' first inserts (and of those,
    /// into buckets).
    pub into_isets: u64,
    pub into_remainder: u64,
    pub fresh_inserts: u64,
    pub fresh_into_buckets: u64,
}

impl UpdateBench {
    pub fn mpps(&self) -> f64 {
        self.totals.packets as f64 / self.elapsed_s / 1e6
    }

    /// Share of the run the lookup thread spent in `d`.
    pub fn share(&self, d: Duration) -> f64 {
        d.as_secs_f64() / self.elapsed_s
    }

    /// Mean time of one update call, µs.
    pub fn update_us(&self) -> f64 {
        self.totals.update.as_secs_f64() * 1e6 / self.totals.updates.max(1) as f64
    }
}

#[derive(Default, Clone, Copy, Debug)]
pub struct Interval {
    pub packets: u64,
    pub updates: u64,
    /// Time inside the classifier's `insert` and `remove` calls.
    pub update: Duration,
    /// Time inside `poll` (starting training, swapping a model in, replaying the log).
    pub poll: Duration,
    /// Time inside `lookup_batch`.
    pub lookup: Duration,
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
#[allow(clippy::large_enum_variant)] // one per update, built before the timed part
enum Op {
    Insert(Rule),
    Remove(RuleId),
}

/// The rules the run starts with and the held-out 10% (the pool of the first inserts), a random
/// choice from the seed's own stream.
fn hold_out(mut rules: Vec<Rule>, seed: u64) -> (Vec<Rule>, Vec<Rule>) {
    Rng::fork(seed, 1).shuffle(&mut rules);
    let held = rules.len() / 10;
    let pool = rules.split_off(rules.len() - held);
    (rules, pool)
}

/// The stream the update sequence ([`make_ops`]) draws from.
fn ops_rng(seed: u64) -> Rng {
    Rng::fork(seed, 2)
}

/// The update sequence: alternately an insert of a random rule of the pool (at first the
/// held-out rules) and a removal of a random live rule, which returns to the pool. Also returns
/// which inserts are of rules never in the classifier before (fresh).
fn make_ops(n: usize, live: &[Rule], pool: &[Rule], rng: &mut Rng) -> (Vec<Op>, Vec<bool>) {
    let rules: HashMap<RuleId, &Rule> = live.iter().chain(pool).map(|r| (r.id, r)).collect();
    let mut live_ids: Vec<RuleId> = live.iter().map(|r| r.id).collect();
    let mut pool_ids: Vec<RuleId> = pool.iter().map(|r| r.id).collect();
    let mut seen: HashSet<RuleId> = live_ids.iter().copied().collect();
    let (mut ops, mut fresh) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        if i % 2 == 0 && !pool_ids.is_empty() {
            let id = pool_ids.swap_remove(rng.index(pool_ids.len()));
            fresh.push(seen.insert(id));
            live_ids.push(id);
            ops.push(Op::Insert(rules[&id].clone()));
        } else if !live_ids.is_empty() {
            let id = live_ids.swap_remove(rng.index(live_ids.len()));
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
) -> Result<Vec<(u64, u64)>, Error> {
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

/// The lookup thread's state during a run.
struct Thread<'a> {
    live: LiveNuevoMatch,
    ops: &'a [Op],
    fresh: &'a [bool],
    inserts: std::vec::IntoIter<Rule>,
    applied: usize,
    staged: HashSet<RuleId>,
    sessions_seen: usize,
    events: Vec<Event>,
    fresh_placed: (u64, u64),
    cur: Interval,
}

impl Thread<'_> {
    /// Applies the updates due by `due` (at most 10,000 per call, so lookups go on).
    fn apply_due(&mut self, due: usize, policy: Policy) -> Result<(), Error> {
        let u = Instant::now();
        let from = self.applied;
        while self.applied < due.min(self.ops.len()) && self.applied - from < 10_000 {
            match &self.ops[self.applied] {
                Op::Insert(_) => {
                    let r = self.inserts.next().expect("one rule per insert");
                    let (id, before) = (r.id, self.live.insert_counts().0);
                    self.live.insert(r)?;
                    if self.fresh[self.applied] {
                        self.fresh_placed.0 += 1;
                        self.fresh_placed.1 += self.live.insert_counts().0 - before;
                    }
                    if policy == Policy::Delayed {
                        self.staged.insert(id);
                    }
                }
                Op::Remove(id) => {
                    self.live.remove(*id);
                    if policy == Policy::Delayed {
                        self.staged.remove(id);
                    }
                }
            }
            self.applied += 1;
        }
        if self.applied > from {
            self.cur.updates += (self.applied - from) as u64;
            self.cur.update += u.elapsed();
        }
        Ok(())
    }

    /// Polls the trainer; under the delayed policy a swap's newly visible rules are recorded.
    fn poll(&mut self, policy: Policy) {
        let u = Instant::now();
        self.live.poll();
        self.cur.poll += u.elapsed();
        if self.live.sessions().len() != self.sessions_seen {
            self.sessions_seen = self.live.sessions().len();
            if policy == Policy::Delayed {
                let still: HashSet<RuleId> = self.live.staged_ids().into_iter().collect();
                let visible: Vec<RuleId> = self.staged.iter().filter(|id| !still.contains(id)).copied().collect();
                self.staged = still;
                self.events.push(Event::Visible { applied: self.applied, ids: visible });
            }
        }
    }

    fn sample(&self, t_s: f64, secs: f64) -> UpdateSample {
        let last = self.live.sessions().last();
        UpdateSample {
            t_s,
            mpps: self.cur.packets as f64 / secs / 1e6,
            updates_per_s: self.cur.updates as f64 / secs,
            update_share: self.cur.update.as_secs_f64() / secs,
            coverage: self.live.coverage(),
            remainder_rules: self.live.remainder_rules(),
            staged_rules: self.live.staged(),
            rules: self.live.current().len() + self.live.staged(),
            sessions: self.live.sessions().len(),
            training: self.live.training(),
            last_train_ms: last.map(|s| s.train.as_secs_f64() * 1e3),
            checked: 0,
            mismatches: 0,
        }
    }
}

/// Runs the benchmark over `rules` (a 10% share held out to insert) and the packets `keys`.
pub fn run(cfg: &UpdateBenchConfig, rules: Vec<Rule>, keys: &[FlowKey]) -> Result<UpdateBench, Error> {
    if cfg.seconds.is_nan() || cfg.seconds <= 0.0 || cfg.rate as f64 * cfg.seconds > MAX_UPDATES {
        return Err(Error(format!(
            "bench updates makes its update sequence beforehand: --rate x --seconds must be positive and at most {MAX_UPDATES:.0} (got {} x {})",
            cfg.rate, cfg.seconds
        )));
    }
    if keys.len() < BATCH || rules.len() < 10 {
        return Err(Error("bench updates needs at least 32 packets and 10 rules".into()));
    }
    let policy = cfg.policy;
    let (rules, pool) = hold_out(rules, cfg.seed);
    let t0 = Instant::now();
    let config = NuevoMatchConfig { insert_slack: cfg.insert_slack, ..NuevoMatchConfig::always_learned() };
    let live = LiveNuevoMatch::with_config(&rules, policy, cfg.retrain_threshold, config)?;
    let first_build = t0.elapsed();
    // Enough for the whole run (the loop stops at `seconds`).
    let (ops, fresh) = make_ops((cfg.rate as f64 * cfg.seconds) as usize + 2, &rules, &pool, &mut ops_rng(cfg.seed));
    // The rules to insert, in order, moved into the classifier one by one (`ops` keeps its
    // copies for the checker).
    let inserts: Vec<Rule> = ops
        .iter()
        .filter_map(|o| match o {
            Op::Insert(r) => Some(r.clone()),
            Op::Remove(_) => None,
        })
        .collect();
    let mut th = Thread {
        live,
        ops: &ops,
        fresh: &fresh,
        inserts: inserts.into_iter(),
        applied: 0,
        staged: HashSet::new(),
        sessions_seen: 0,
        events: Vec::with_capacity((cfg.seconds * 50_000.0) as usize),
        fresh_placed: (0, 0),
        cur: Interval::default(),
    };
    let mut series: Vec<UpdateSample> = Vec::new();
    let mut totals = Interval::default();
    let mut out_buf = [None; BATCH];
    let (mut at, mut batch_no) = (0usize, 0u64);
    let start = Instant::now();
    let mut tick = start;
    let duration = Duration::from_secs_f64(cfg.seconds);
    loop {
        let now = Instant::now();
        if now - start >= duration {
            break;
        }
        th.apply_due(((now - start).as_secs_f64() * cfg.rate as f64) as usize, policy)?;
        th.poll(policy);
        // One batch.
        if at + BATCH > keys.len() {
            at = 0;
        }
        let u = Instant::now();
        th.live.lookup_batch(&keys[at..at + BATCH], &mut out_buf);
        th.cur.lookup += u.elapsed();
        batch_no += 1;
        th.cur.packets += BATCH as u64;
        if batch_no % 16 == 0 {
            th.events.push(Event::Check {
                applied: th.applied,
                interval: series.len(),
                at,
                results: Box::new(out_buf),
            });
        }
        at += BATCH;
        let now = Instant::now();
        if now - tick >= Duration::from_millis(100) {
            series.push(th.sample((now - start).as_secs_f64(), (now - tick).as_secs_f64()));
            totals.add(&th.cur);
            th.cur = Interval::default();
            tick = now;
        }
    }
    totals.add(&th.cur);
    let elapsed_s = start.elapsed().as_secs_f64();
    th.live.finish_training();
    let t_verify = Instant::now();
    let per = verify(&ops, &th.events, &rules, keys, policy, series.len())?;
    let verify_s = t_verify.elapsed().as_secs_f64();
    for (p, (checked, mismatches)) in series.iter_mut().zip(&per) {
        (p.checked, p.mismatches) = (*checked, *mismatches);
    }
    let (checked, mismatches) = per.iter().fold((0, 0), |t, p| (t.0 + p.0, t.1 + p.1));
    let live = &th.live;
    let sessions = live.sessions();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mean_train_ms = if sessions.is_empty() {
        0.0
    } else {
        sessions.iter().map(|s| s.train.as_secs_f64()).sum::<f64>() / sessions.len() as f64 * 1e3
    };
    let min_cov = series.iter().map(|p| p.coverage).fold(f64::INFINITY, f64::min);
    let (into_isets, into_remainder) = live.insert_counts();
    Ok(UpdateBench {
        live_rules: rules.len(),
        held: pool.len(),
        first_build,
        elapsed_s,
        totals,
        checked,
        mismatches,
        verify_s,
        sessions: sessions.len(),
        mean_train_ms,
        max_start_ms: sessions.iter().map(|s| ms(s.start)).fold(0.0, f64::max),
        max_swap_ms: sessions.iter().map(|s| ms(s.swap)).fold(0.0, f64::max),
        coverage: live.coverage(),
        min_coverage: if min_cov.is_finite() { min_cov } else { live.coverage() },
        into_isets,
        into_remainder,
        fresh_inserts: th.fresh_placed.0,
        fresh_into_buckets: th.fresh_placed.1,
        series,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The held-out rules and the update sequence are a function of the seed alone, pinned.
    #[test]
    fn the_update_sequence_is_pinned() {
        let all = crate::inputs::load_rules(None).unwrap();
        let (live, pool) = hold_out(all.clone(), 5);
        let (ops, _) = make_ops(6, &live, &pool, &mut ops_rng(5));
        let ids: Vec<String> = ops
            .iter()
            .map(|o| match o {
                Op::Insert(r) => format!("+{}", r.id.0),
                Op::Remove(id) => format!("-{}", id.0),
            })
            .collect();
        assert_eq!(ids, PIN);
        assert_eq!((live.len(), pool.len()), (all.len() - all.len() / 10, all.len() / 10));
        let (_, pool6) = hold_out(all, 6);
        assert_ne!(pool6.iter().map(|r| r.id).collect::<Vec<_>>(), pool.iter().map(|r| r.id).collect::<Vec<_>>());
    }
    const PIN: [&str; 6] = ["+452", "-205", "+217", "-827", "+875", "-174"];

    /// The after-the-run checker replays the updates up to each recorded batch: results a
    /// classifier with exactly those updates gives pass, and one wrong result is one mismatch.
    #[test]
    fn verify_replays_updates_and_counts_wrong_results() {
        let mut rules = crate::inputs::load_rules(None).unwrap();
        let keys: Vec<FlowKey> = crate::inputs::load_packets(None, 1).unwrap().entries.iter().map(|e| e.key).collect();
        let pool = rules.split_off(rules.len() - 100);
        let mut rng = Rng::new(7);
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
