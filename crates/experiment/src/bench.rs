//! The classifier benchmark: every classifier on the same rules and packets, side by side —
//! what `rqvs bench classifiers` runs ([`classifiers`]).
//!
//! For each classifier: build time, lookup rate in batches of 32 and one key at a time (the
//! fastest, median and slowest of several passes over the whole trace, after a warm-up pass:
//! [`Spread`]; the classifiers' passes take turns, so a change in the machine's load during the
//! benchmark falls on all of them alike and their ratio holds: [`time_interleaved`]), memory, mismatches
//! against the reference on a sample (all packets when the set is small), mismatches against
//! another classifier on every packet, and update rates — remove a share of the rules in random
//! order, re-insert them in another order — with every packet re-checked afterwards.

use std::time::{Duration, Instant};

use rqvs_classify::{Classifier, ClassifierKind, Reference, BATCH};
use rqvs_flow::key::NarrowKey;
use rqvs_flow::rng::Rng;
use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::{verify, Error};

/// Above this many rules the reference's updates (linear time each) are not measured.
pub const REFERENCE_UPDATE_LIMIT: usize = 20_000;

/// The benchmark's settings.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub classifiers: Vec<ClassifierKind>,
    /// Packets verified against the reference (`None`: all when affordable, else 10,000).
    pub verify: Option<usize>,
    /// Share of the rules removed and re-inserted for the update rates.
    pub update_fraction: f64,
    /// Minimum time per lookup measurement (at least one full pass).
    pub min_time: Duration,
    /// Seed of the verification sample and the update order.
    pub seed: u64,
    /// Hold the packets as [`NarrowKey`]s when no packet has a wide member (40 bytes a key
    /// instead of 112): batches are timed with `Classifier::lookup_batch_narrow`, one key at a
    /// time with `Classifier::lookup_narrow` (TupleMerge and NuevoMatchUP read the narrow key,
    /// the others widen it on the stack); otherwise, or when false,
    /// both over `FlowKey`s.
    pub narrow_batches: bool,
}

/// A step of the benchmark, for progress reports.
pub enum Step<'a> {
    /// A step starts (what it does).
    Start(&'a str),
    /// The step is done.
    Done,
}

/// One classifier's figures.
pub struct Row {
    pub kind: ClassifierKind,
    pub build: Duration,
    pub memory: usize,
    /// `memory` by structure ([`Classifier::memory_breakdown`]), as built.
    pub memory_parts: Vec<(String, usize)>,
    /// Packets the lookup rates were timed on (the sample, for the reference on a big set).
    pub timed_packets: usize,
    /// ns/packet in batches of 32, over the timed passes.
    pub ns_batch: Spread,
    /// ns/packet one key at a time, over the timed passes.
    pub ns_single: Spread,
    /// Against the reference on the sample, and batch against single lookups.
    pub mismatches: usize,
    /// Against another classifier on every packet: (its name, mismatches).
    pub cross: Option<(String, usize)>,
    pub updates: Option<Updates>,
    pub stats: Vec<(&'static str, f64)>,
}

/// The update round's figures.
pub struct Updates {
    pub rules: usize,
    pub remove_per_s: f64,
    pub insert_per_s: f64,
    /// Packets classified differently after the round.
    pub mismatches: usize,
}

/// What [`classifiers`] measured.
pub struct Bench {
    pub rows: Vec<Row>,
    /// Packets verified against the reference.
    pub verified: usize,
    /// The batches were timed over [`NarrowKey`]s ([`BenchConfig::narrow_batches`]).
    pub narrow_batches: bool,
}

impl Bench {
    /// Every mismatch of every kind.
    pub fn mismatches(&self) -> usize {
        self.rows
            .iter()
            .map(|r| {
                r.mismatches + r.cross.as_ref().map_or(0, |c| c.1) + r.updates.as_ref().map_or(0, |u| u.mismatches)
            })
            .sum()
    }
}

/// The packets a lookup pass runs over: `FlowKey`s, or [`NarrowKey`]s (looked up in batches
/// with `Classifier::lookup_batch_narrow`, one at a time with `Classifier::lookup_narrow`).
#[derive(Clone, Copy)]
pub enum Keys<'a> {
    Flow(&'a [FlowKey]),
    Narrow(&'a [NarrowKey]),
}

impl Keys<'_> {
    pub fn len(&self) -> usize {
        match self {
            Keys::Flow(k) => k.len(),
            Keys::Narrow(k) => k.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// [`lookup_all`] over keys of either kind.
pub fn lookup_keys(c: &dyn Classifier, keys: Keys, out: &mut [Option<RuleId>], batched: bool) {
    match keys {
        Keys::Flow(k) => lookup_all(c, k, out, batched),
        Keys::Narrow(k) if batched => {
            for (k, o) in k.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
                c.lookup_batch_narrow(k, o);
            }
        }
        Keys::Narrow(k) => {
            for (k, o) in k.iter().zip(out.iter_mut()) {
                *o = c.lookup_narrow(k);
            }
        }
    }
}

pub fn lookup_all(c: &dyn Classifier, keys: &[FlowKey], out: &mut [Option<RuleId>], batched: bool) {
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

/// A figure measured over several passes: the fastest, the median and the slowest pass, so that
/// a report shows how much the passes spread, not a median alone.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
    /// How many passes were timed.
    pub passes: usize,
}

impl Spread {
    /// The spread of `values` (at least one).
    pub fn of(values: &[f64]) -> Spread {
        assert!(!values.is_empty(), "a spread of no values");
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        Spread { min: v[0], median: v[v.len() / 2], max: v[v.len() - 1], passes: v.len() }
    }

    /// The same passes as a rate: `k / x` of each (ns/packet → Mpps with `k` = 1000); the
    /// fastest pass is the highest rate.
    pub fn inverse(self, k: f64) -> Spread {
        Spread { min: k / self.max, median: k / self.median, max: k / self.min, passes: self.passes }
    }
}

/// Most passes a lookup measurement times.
const MAX_PASSES: usize = 15;

/// ns/packet of each pass over the whole `keys` (their [`Spread`]), after one untimed warm-up
/// pass, passes repeated until `min` has elapsed (at least one, at most 15).
pub fn time_lookups(
    c: &dyn Classifier,
    keys: &[FlowKey],
    out: &mut [Option<RuleId>],
    batched: bool,
    min: Duration,
) -> Spread {
    time_interleaved(&[(c, Keys::Flow(keys))], &mut [out], batched, min)[0]
}

/// [`time_lookups`] of several classifiers (each over its own keys, its lookups into its `outs`),
/// their passes interleaved: after a warm-up pass of each, round by round every classifier that
/// has not yet run `min` (and 15 passes) runs one more pass. A change in the machine's load over
/// the measurement then falls on every classifier alike, where timing them one after the other
/// would give it to whichever ran then.
pub fn time_interleaved(
    runs: &[(&dyn Classifier, Keys)],
    outs: &mut [&mut [Option<RuleId>]],
    batched: bool,
    min: Duration,
) -> Vec<Spread> {
    assert_eq!(runs.len(), outs.len(), "one output per classifier");
    for ((c, keys), out) in runs.iter().zip(outs.iter_mut()) {
        lookup_keys(*c, *keys, out, batched);
    }
    let mut passes = vec![Vec::new(); runs.len()];
    let mut spent = vec![Duration::ZERO; runs.len()];
    loop {
        let mut ran = false;
        for (i, ((c, keys), out)) in runs.iter().zip(outs.iter_mut()).enumerate() {
            if !passes[i].is_empty() && (spent[i] >= min || passes[i].len() >= MAX_PASSES) {
                continue;
            }
            let t = Instant::now();
            lookup_keys(*c, *keys, out, batched);
            let took = t.elapsed();
            spent[i] += took;
            passes[i].push(took.as_nanos() as f64 / keys.len().max(1) as f64);
            ran = true;
        }
        if !ran {
            return passes.iter().map(|p| Spread::of(p)).collect();
        }
    }
}

/// How many steps [`classifiers`] reports for `classifiers` classifiers.
pub fn steps(classifiers: usize) -> u64 {
    2 * classifiers as u64 + 3
}

/// Runs the benchmark over `rules` and `keys` (not empty); `progress` hears of each of its
/// [`steps`]: the reference on the sample, each build, the interleaved lookups in batches and one
/// at a time, and each classifier's update round.
pub fn classifiers(
    cfg: &BenchConfig,
    rules: &[Rule],
    keys: &[FlowKey],
    progress: &mut dyn FnMut(Step),
) -> Result<Bench, Error> {
    let min = cfg.min_time;

    // The reference's answers on the verification sample.
    progress(Step::Start("reference on the verification sample"));
    let sample = verify::sample_indexes(rules.len(), keys.len(), cfg.verify, cfg.seed);
    let sample_keys: Vec<FlowKey> = sample.iter().map(|&i| keys[i]).collect();
    let reference = Reference::build(rules)?;
    let mut want = vec![None; sample_keys.len()];
    lookup_all(&reference, &sample_keys, &mut want, true);
    drop(reference);
    progress(Step::Done);

    // Every classifier is built before any is timed, so that their lookups can take turns.
    let full_scan_ok = verify::full_verification_affordable(rules.len(), keys.len());
    let mut built = Vec::with_capacity(cfg.classifiers.len());
    for &kind in &cfg.classifiers {
        progress(Step::Start(&format!("{}: build", kind.name())));
        let t0 = Instant::now();
        let c = rqvs_classify::build(kind, rules)?;
        built.push((kind, c, t0.elapsed()));
        progress(Step::Done);
    }
    // The reference on a big set is timed on the sample only.
    let timed: Vec<&[FlowKey]> = built
        .iter()
        .map(|(kind, _, _)| if *kind == ClassifierKind::Ref && !full_scan_ok { &sample_keys[..] } else { keys })
        .collect();
    // Batches over narrow keys when every packet is one (the sample stays `FlowKey`s).
    let narrow: Option<Vec<NarrowKey>> =
        if cfg.narrow_batches { keys.iter().map(FlowKey::narrow).collect() } else { None };
    let runs: Vec<(&dyn Classifier, Keys)> = built
        .iter()
        .zip(&timed)
        .map(|((_, c, _), k)| match &narrow {
            Some(n) if k.len() == keys.len() => (c.as_ref(), Keys::Narrow(&n[..])),
            _ => (c.as_ref(), Keys::Flow(k)),
        })
        .collect();
    // One key at a time from the same held keys: a narrow one through `lookup_narrow` (read as
    // it is by TupleMerge and NuevoMatchUP, widened on the stack by the others), not streamed as
    // 112 bytes from memory.
    let single_runs: Vec<(&dyn Classifier, Keys)> = runs.clone();
    let mut got: Vec<Vec<Option<RuleId>>> = timed.iter().map(|k| vec![None; k.len()]).collect();
    let mut single: Vec<Vec<Option<RuleId>>> = got.clone();
    let names: Vec<&str> = built.iter().map(|(kind, _, _)| kind.name()).collect();
    progress(Step::Start(&format!("{}: lookups in batches of {BATCH}, taking turns", names.join(", "))));
    let ns_batch = time_interleaved(&runs, &mut got.iter_mut().map(|v| &mut v[..]).collect::<Vec<_>>(), true, min);
    progress(Step::Done);
    progress(Step::Start(&format!("{}: lookups one at a time, taking turns", names.join(", "))));
    let ns_single =
        time_interleaved(&single_runs, &mut single.iter_mut().map(|v| &mut v[..]).collect::<Vec<_>>(), false, min);
    progress(Step::Done);
    drop(runs);
    drop(single_runs);

    let mut rows: Vec<Row> = Vec::new();
    let mut results: Vec<Option<Vec<Option<RuleId>>>> = Vec::new();
    for (i, ((kind, mut c, build), got)) in built.into_iter().zip(got).enumerate() {
        let mut mismatches = got.iter().zip(&single[i]).filter(|(x, y)| x != y).count();
        let mut sample_got = vec![None; sample_keys.len()];
        lookup_all(c.as_ref(), &sample_keys, &mut sample_got, true);
        mismatches += sample_got.iter().zip(&want).filter(|(g, w)| g != w).count();

        progress(Step::Start(&format!("{}: updates", kind.name())));
        // Size and classifier figures as built, before the update round changes them.
        let (memory, memory_parts, stats) = (c.memory_bytes(), c.memory_breakdown(), c.stats());
        // No rules, nothing to remove and re-insert.
        let updates = if rules.is_empty() || (kind == ClassifierKind::Ref && rules.len() > REFERENCE_UPDATE_LIMIT) {
            None
        } else {
            Some(measure_updates(c.as_mut(), rules, timed[i], &got, cfg.update_fraction, cfg.seed)?)
        };
        progress(Step::Done);
        rows.push(Row {
            kind,
            build,
            memory,
            memory_parts,
            timed_packets: timed[i].len(),
            ns_batch: ns_batch[i],
            ns_single: ns_single[i],
            mismatches,
            cross: None,
            updates,
            stats,
        });
        results.push((timed[i].len() == keys.len()).then_some(got));
    }

    // Every packet against another classifier: each full result set against the next one's.
    let full: Vec<usize> = (0..rows.len()).filter(|&i| results[i].is_some()).collect();
    for (j, &i) in full.iter().enumerate() {
        if full.len() < 2 {
            break;
        }
        let peer = full[(j + 1) % full.len()];
        let (x, y) = (results[i].as_ref().expect("full"), results[peer].as_ref().expect("full"));
        let n = x.iter().zip(y).filter(|(p, q)| p != q).count();
        rows[i].cross = Some((rows[peer].kind.name().to_string(), n));
    }
    Ok(Bench { rows, verified: sample.len(), narrow_batches: narrow.is_some() })
}

/// The update rates' orders over `n` rules (indexes): a random `fraction` of them (at least one)
/// in the order they are removed, then in the order they are inserted again. Drawn from the
/// seed's own stream.
pub fn update_orders(n: usize, fraction: f64, seed: u64) -> (Vec<usize>, Vec<usize>) {
    let mut rng = Rng::fork(seed, 0x7570_6461_7465); // "update"
    let k = ((n as f64 * fraction).round() as usize).clamp(1, n);
    let mut removals = rng.sample_sorted(n, k);
    rng.shuffle(&mut removals);
    let mut inserts = removals.clone();
    rng.shuffle(&mut inserts);
    (removals, inserts)
}

/// Removes a random `fraction` of the rules in random order, re-inserts them in another random
/// order, and checks every packet of `keys` still classifies as in `before`.
pub fn measure_updates(
    c: &mut dyn Classifier,
    rules: &[Rule],
    keys: &[FlowKey],
    before: &[Option<RuleId>],
    fraction: f64,
    seed: u64,
) -> Result<Updates, Error> {
    if rules.is_empty() || !(fraction > 0.0 && fraction <= 1.0) {
        return Err(Error(format!(
            "update rates: expected rules and a share 0 < x ≤ 1, found {} rules and {fraction}",
            rules.len()
        )));
    }
    let (removals, inserts) = update_orders(rules.len(), fraction, seed);
    let n = removals.len();
    let t = Instant::now();
    for r in removals.iter().map(|&i| &rules[i]) {
        if c.remove(r.id).is_none() {
            return Err(Error(format!("{}: rule {} could not be removed", c.name(), r.id)));
        }
    }
    let removal = t.elapsed();
    let t = Instant::now();
    for r in inserts.iter().map(|&i| &rules[i]) {
        c.insert(r.clone())?;
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

#[cfg(test)]
mod tests {
    /// The update orders are a function of the seed alone, pinned (a change of the generator or
    /// of the draws changes every `bench classifiers` update rate's workload).
    #[test]
    fn update_orders_are_pinned() {
        let (r, i) = super::update_orders(1000, 0.01, 5);
        assert_eq!((r.len(), i.len()), (10, 10));
        let mut s = r.clone();
        s.sort_unstable();
        s.dedup();
        assert_eq!(s.len(), 10);
        assert_eq!((&r[..4], &i[..4]), (&PIN_R[..], &PIN_I[..]));
        assert_eq!(super::update_orders(1000, 0.01, 5), (r, i));
        assert_ne!(super::update_orders(1000, 0.01, 6).0, super::update_orders(1000, 0.01, 5).0);
    }
    const PIN_R: [usize; 4] = [942, 896, 82, 124];
    const PIN_I: [usize; 4] = [315, 942, 557, 343];
}

#[cfg(test)]
mod spread_tests {
    use std::time::Duration;

    use rqvs_classify::ClassifierKind;

    use super::Spread;

    /// Interleaved timing gives each classifier its own passes (at least one, at most 15) and
    /// its own lookups' answers.
    #[test]
    fn interleaved_passes_per_classifier() {
        let rules = crate::inputs::load_rules(None).unwrap();
        let packets = crate::inputs::load_packets(None, 1).unwrap();
        let keys: Vec<_> = packets.entries.iter().map(|e| e.key).collect();
        let tm = rqvs_classify::build(ClassifierKind::Tm, &rules).unwrap();
        let reference = rqvs_classify::build(ClassifierKind::Ref, &rules).unwrap();
        let few = &keys[..64];
        let mut outs = [vec![None; keys.len()], vec![None; few.len()]];
        let min = Duration::from_millis(30);
        let [a, b] = &mut outs;
        let spreads = super::time_interleaved(
            &[(tm.as_ref(), super::Keys::Flow(&keys)), (reference.as_ref(), super::Keys::Flow(few))],
            &mut [a, b],
            true,
            min,
        );
        assert_eq!(spreads.len(), 2);
        for s in &spreads {
            assert!((1..=super::MAX_PASSES).contains(&s.passes), "{s:?}");
        }
        // 64 keys take far less than 30 ms a pass: the reference ran its 15.
        assert_eq!(spreads[1].passes, super::MAX_PASSES);
        for (out, ks) in [(&outs[0], &keys[..]), (&outs[1], few)] {
            assert!(out.iter().zip(ks).all(|(o, k)| *o == tm.lookup(k)), "each classifier's own answers");
        }
    }

    #[test]
    fn spread_of_passes_and_as_a_rate() {
        let s = Spread::of(&[4.0, 1.0, 2.0, 8.0, 5.0]);
        assert_eq!(s, Spread { min: 1.0, median: 4.0, max: 8.0, passes: 5 });
        assert_eq!(s.inverse(8.0), Spread { min: 1.0, median: 2.0, max: 8.0, passes: 5 });
    }
}
