//! The replay loop: [`run_design`] and its variants run the prepared trace through one design's
//! PMD loop, with the receive ring, the attack's queue, the update schedule, the 100 ms time
//! series ([`Series`]) and the verification record around each batch.

use rqvs_datapath::pmd::Pmd;
use rqvs_datapath::policer::Policer;
use rqvs_datapath::{Counters, Design, DesignKind, BATCH};
use rqvs_flow::rng::Rng;
use rqvs_ofproto::OfprotoTable;

use super::designs::build_on;
use super::feed::{Admission, Feed};
use super::results::{coverage, AttackRun, Run, RxStats, Sample};
use super::updates::Updates;
use super::verifier::Verifier;
use super::{Prediction, Prepared, ReplayConfig, STREAM_DELETIONS};
use crate::mixed::{AttackQueue, Latency, StreamStats, ATTACK_SEQ};
use crate::Error;

/// Replays the prepared trace through one design (module docs), without flow prediction.
pub fn run_design(c: &ReplayConfig, p: &Prepared, design: DesignKind) -> Result<Run, Error> {
    run_design_with(c, p, design, None)
}

/// The 100 ms time series of a run.
struct Series {
    samples: Vec<Sample>,
    next_ns: u64,
    last: Counters,
    last_t: u64,
    /// Benign packets at the last sample (mixed replay).
    last_benign: u64,
}

impl Series {
    const INTERVAL_NS: u64 = 100_000_000;

    /// Samples at every interval boundary `now` has passed; `benign`: the benign packets taken
    /// so far in a mixed replay.
    fn sample(&mut self, dp: &dyn Design, now: u64, benign: Option<u64>) {
        while now >= self.next_ns {
            let cs = dp.counters();
            let dt = (now - self.last_t) as f64 / 1e9;
            self.samples.push(Sample {
                t_s: now as f64 / 1e9,
                mpps: (cs.received - self.last.received) as f64 / dt / 1e6,
                upcalls_per_s: (cs.upcall - self.last.upcall) as f64 / dt,
                deletions_per_s: (cs.deleted() - self.last.deleted()) as f64 / dt,
                lost: cs.lost - self.last.lost,
                megaflows: cs.megaflows,
                masks: cs.masks,
                coverage: coverage(&cs),
                benign_mpps: benign.map(|b| (b - self.last_benign) as f64 / dt / 1e6),
            });
            self.last_benign = benign.unwrap_or(0);
            self.last = cs;
            self.last_t = now;
            self.next_ns = now - now % Self::INTERVAL_NS + Self::INTERVAL_NS;
        }
    }
}

/// Replays the prepared trace through one design, with flow prediction when given (ORIG): the
/// trace in batches through the PMD loop ([`Pmd::run_batch`]), with the receive ring, the
/// update schedule, the time series and the verification record around it.
pub fn run_design_with(
    c: &ReplayConfig,
    p: &Prepared,
    design: DesignKind,
    pred: Option<&Prediction>,
) -> Result<Run, Error> {
    run_design_progress(c, p, design, pred, &mut |_| {})
}

/// How far a run has come ([`run_design_progress`]).
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Packets the PMD took so far.
    pub packets: u64,
    /// PMD time so far, seconds.
    pub pmd_s: f64,
    /// Share of the run done, 0..1 (of `duration`, or of `passes` over the trace).
    pub fraction: f64,
}

/// [`run_design_with`], telling `progress` how far the run is about every 2¹⁶ packets (a long
/// `--duration` or many `--passes` show it).
pub fn run_design_progress(
    c: &ReplayConfig,
    p: &Prepared,
    design: DesignKind,
    pred: Option<&Prediction>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Run, Error> {
    run_design_on(c, p, design, pred, None, progress)
}

pub(super) fn run_design_on(
    c: &ReplayConfig,
    p: &Prepared,
    design: DesignKind,
    pred: Option<&Prediction>,
    table: Option<&OfprotoTable>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Run, Error> {
    let build_start = std::time::Instant::now();
    let mut built = build_on(c, design, &p.initial, pred, table)?;
    let dp: &mut dyn Design = built.as_mut();
    let build_ms = build_start.elapsed().as_secs_f64() * 1e3;

    let mut verifier = Verifier::new(p, dp.visible_epoch(), design);
    let mut feed = Feed::new(&p.trace, p.packets, &p.samples, 0, "the trace")?;
    let mut epoch = dp.visible_epoch();
    let wall = std::time::Instant::now();
    let mut updates = Updates {
        pending: p.updates.iter().peekable(),
        table: p.initial.clone(),
        rng: Rng::fork(c.seed, STREAM_DELETIONS),
        log: Vec::new(),
        waiting: Vec::new(),
        call_ms: 0.0,
        wall,
    };
    let mut series = Series {
        samples: Vec::new(),
        next_ns: Series::INTERVAL_NS,
        last: Counters::default(),
        last_t: 0,
        last_benign: 0,
    };
    let duration_ns = c.duration.map(|s| (s * 1e9) as u64);
    let len = p.packets;
    let total = len * u64::from(c.passes);
    let mut admission =
        c.rate.map(|rate| Admission { rate, ring: c.rx_ring, total, warmup: total / 20, rx: RxStats::default() });
    let mut pmd = Pmd::new();
    let mut seq: u64 = 0;
    // Counters at the end of the first pass: later passes meet a warm cache (steady state).
    let mut first_pass: Option<Counters> = None;
    let mut passes_done = 0u64;
    // Mixed replay: the attack's queue, its packets, and what each stream's batches cost.
    let mut attack = match &p.attack {
        Some(a) => Some((
            AttackQueue::new(a.rate, c.rx_ring),
            Feed::new(&a.trace, a.packets, &a.samples, p.samples.len(), "the attack")?,
            c.attack_policing.map(|spec| Policer::new(spec, 1, dp.now_ns())),
        )),
        None => None,
    };
    let mut streams = attack.as_ref().map(|_| (StreamStats::default(), StreamStats::default(), dp.counters()));
    let mut latency = c.rate.map(|_| Latency::default());
    loop {
        // The attack's queue first: a batch of what it holds ([`crate::mixed`]).
        if let Some((queue, afeed, policer)) = attack.as_mut() {
            let waiting = queue.waiting(dp.now_ns());
            if waiting > 0 {
                let aseq = queue.seq;
                let taken = (BATCH as u64).min(afeed.packets - aseq % afeed.packets).min(waiting) as usize;
                // Ingress policing: the batch's packets over the bucket (its tail) are dropped
                // before they are parsed or classified; the next fill skips them.
                let n = policer.as_mut().map_or(taken, |p| p.admit(dp.now_ns(), taken));
                queue.seq += taken as u64;
                if n > 0 {
                    afeed.fill(aseq, n, &mut verifier)?;
                    let t0 = dp.now_ns();
                    let o = pmd.run_batch(dp, &afeed.batch, ATTACK_SEQ + aseq);
                    verifier.batch(&o, ATTACK_SEQ + aseq, &afeed.slots, |s| match s.checked_sub(ATTACK_SEQ) {
                        Some(a) => afeed.slot_of(a),
                        None => feed.slot_of(s),
                    });
                    updates.revalidated(o.revalidations);
                    if let Some((_, att, last)) = streams.as_mut() {
                        let now = dp.counters();
                        att.add_batch(last, &now, dp.now_ns() - t0);
                        *last = now;
                    }
                    let benign = streams.as_ref().map(|s| s.0.packets);
                    after_batch(dp, &mut series, benign, &mut updates, &mut verifier, &mut epoch)?;
                }
            }
        }
        // Constant rate: packets that have arrived and are not yet taken (`None`: no limit).
        let avail = match admission.as_mut() {
            Some(adm) => {
                let other = attack.as_ref().map(|(q, _, _)| q.next_arrival_ns());
                match adm.admit(dp, &mut seq, other) {
                    Some(0) => continue,
                    Some(n) => Some(n),
                    None => break,
                }
            }
            None => None,
        };
        let pos = seq % len;
        let n = (BATCH as u64).min(len - pos);
        let n = avail.map_or(n, |a| n.min(a)) as usize;
        feed.fill(seq, n, &mut verifier)?;
        let t0 = dp.now_ns();
        let o = pmd.run_batch(dp, &feed.batch, seq);
        verifier.batch(&o, seq, &feed.slots, |s| match (s.checked_sub(ATTACK_SEQ), &attack) {
            (Some(a), Some((_, afeed, _))) => afeed.slot_of(a),
            _ => feed.slot_of(s),
        });
        updates.revalidated(o.revalidations);
        if let (Some(lat), Some(adm)) = (latency.as_mut(), admission.as_ref()) {
            // Arrival to the end of the batch, after the warm-up (as the drop rate).
            let end = dp.now_ns();
            for q in seq.max(adm.warmup)..seq + n as u64 {
                lat.record(end.saturating_sub(adm.arrival_ns(q)));
            }
        }
        if let Some((benign, _, last)) = streams.as_mut() {
            let now = dp.counters();
            benign.add_batch(last, &now, dp.now_ns() - t0);
            *last = now;
        }
        seq += n as u64;
        if seq / len > passes_done {
            passes_done = seq / len;
            first_pass.get_or_insert_with(|| dp.counters());
        }
        let benign = streams.as_ref().map(|s| s.0.packets);
        let now = after_batch(dp, &mut series, benign, &mut updates, &mut verifier, &mut epoch)?;
        // A run ends at its duration or after its passes: updates scheduled later are reported
        // as not reached (`updates.not_reached`), never silently dropped nor waited for.
        let done = match duration_ns {
            Some(d) => now >= d,
            None => seq >= total,
        };
        if done {
            break;
        }
        if seq >> 16 != (seq - n as u64) >> 16 {
            let fraction = match duration_ns {
                Some(d) => now as f64 / d as f64,
                None => seq as f64 / total as f64,
            };
            progress(Progress { packets: seq, pmd_s: now as f64 / 1e9, fraction: fraction.min(1.0) });
        }
    }
    let updates_not_reached = updates.not_reached(dp.now_ns());
    let wall_s = wall.elapsed().as_secs_f64();
    let cs = dp.counters();
    if !cs.outcome_sum_ok() {
        return Err(Error(format!("internal error: counters do not sum to packets received: {cs:?}")));
    }
    let checked = verifier.finish(p)?;
    let attack =
        attack.zip(streams).zip(p.attack.as_ref()).map(|(((mut queue, _, policer), (benign, att, _)), a)| AttackRun {
            rate: a.rate,
            policed: policer.map_or(0, |p| p.policed),
            // What arrived since the last batch is waiting in the ring or dropped by it.
            waiting: queue.waiting(dp.now_ns()),
            offered: queue.offered(dp.now_ns()),
            ring_dropped: queue.dropped,
            benign,
            attack: att,
            checks: checked.attack_checks,
            mismatches: checked.attack_mismatches,
        });
    let pmd_s = cs.pmd_ns as f64 / 1e9;
    let steady = first_pass.filter(|f| f.pmd_ns < cs.pmd_ns).map(|f| {
        let ns = cs.pmd_ns - f.pmd_ns;
        let pk = cs.received - f.received;
        (pk as f64 / (ns as f64 / 1e9) / 1e6, (cs.dpcls_ns - f.dpcls_ns) as f64 / ns as f64)
    });
    let prediction = pred.zip(dp.prediction_stats()).map(|(pr, s)| (pr.mode, s));
    Ok(Run {
        design,
        build_ms,
        c: cs,
        series: series.samples,
        update_log: updates.log,
        verified: checked.checks,
        mismatches: checked.mismatches,
        stale_checks: checked.windowed_checks,
        batches: pmd.batches,
        first_mismatch: checked.first_mismatch,
        mpps: cs.received as f64 / pmd_s.max(1e-12) / 1e6,
        steady,
        wall_s,
        reval_ms: updates.call_ms,
        report: dp.report(),
        rx: admission.map(|a| RxStats { offered: total, offered_after_warmup: total - a.warmup, ..a.rx }),
        prediction,
        updates_not_reached,
        auto: dp.auto_report(),
        attack,
        latency,
    })
}

/// After each batch: the time series (`benign`: the benign packets so far in a mixed replay),
/// the updates due, a new version of the visible table. Returns the PMD clock.
fn after_batch(
    dp: &mut dyn Design,
    series: &mut Series,
    benign: Option<u64>,
    updates: &mut Updates,
    verifier: &mut Verifier,
    epoch: &mut u64,
) -> Result<u64, Error> {
    let now = dp.now_ns();
    series.sample(dp, now, benign);
    updates.apply_due(dp, now)?;
    if dp.visible_epoch() != *epoch {
        *epoch = dp.visible_epoch();
        verifier.new_version(updates.visible_table(dp), *epoch);
    }
    Ok(now)
}
