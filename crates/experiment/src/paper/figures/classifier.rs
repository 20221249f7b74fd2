//! NuevoMatchUP on its own: the bucket size and the sampling against training and lookup
//! (Table 1 / Fig. 7), the update rate it sustains (Fig. 15).

use rqvs_classify::nuevomatch::live::Policy;

use serde::{Deserialize, Serialize};

use super::{claim, cols, pct};
use crate::paper::cells::Unit;
use crate::paper::{Ctx, Figure, Mode, Panel};
use crate::Error;

/// Fig. 7's set and bucket sizes.
fn fig7_setting(mode: Mode) -> (&'static str, &'static str, Vec<usize>) {
    match mode {
        Mode::Quick => ("ipc2", "10k", vec![8, 16, 40, 56]),
        Mode::Full => ("ipc2", "500k", vec![8, 16, 24, 32, 40, 48, 56]),
    }
}

/// Estimated seconds to load a set and its trace and build the reference over it, and to build
/// NuevoMatchUP over it (timing probes: 8.4 s for fig7b's 5 builds at 500K with the lookups).
fn est_build(size: &str) -> (f64, f64) {
    match size {
        "500k" => (5.0, 1.0),
        "100k" => (2.0, 0.3),
        _ => (0.5, 0.1),
    }
}

pub fn plan_fig7(mode: Mode) -> Vec<Unit> {
    let (_, size, buckets) = fig7_setting(mode);
    let (load, build) = est_build(size);
    buckets.iter().map(|l| Unit::new("fig7", &format!("l{l}"), load + build + 1.0)).collect()
}

/// A classifier built and timed over a trace ([`fig7`], [`fig7b`]'s cells).
#[derive(Serialize, Deserialize)]
struct BuildCell {
    /// Each build's time with training and its training alone, ms.
    build_ms: Vec<f64>,
    train_ms: Vec<f64>,
    /// The last build's lookups (ns/packet, batched), coverage, buckets, index bytes, error
    /// bounds.
    ns: f64,
    coverage: f64,
    buckets: u64,
    index_bytes: u64,
    max_err: f64,
    mean_err: f64,
    /// The trace's sample checked against the reference: 1 of every `checked_every` packets.
    checked_every: u64,
    verified: u64,
    mismatches: u64,
}

/// `config` built `builds` times over `seed`/`size`'s rules, the last build's lookups of the
/// whole trace timed and checked on a sample: the cell `group/name`.
fn build_cell(
    ctx: &Ctx,
    (group, name): (&str, &str),
    (seed, size): (&str, &str),
    config: rqvs_classify::nuevomatch::NuevoMatchConfig,
    builds: usize,
) -> Result<BuildCell, Error> {
    use rqvs_classify::{tuplemerge::TupleMerge, NuevoMatchUp};
    let key = format!(
        "NuevoMatchUP over {} with l = {} ({}), {builds} builds, lookups of {}",
        ctx.rules(seed, size).display(),
        config.isets.bucket_size,
        name,
        ctx.trace(seed, size).display()
    );
    ctx.cell(group, name, &key, || {
        let (rules, keys) = ctx.rules_and_keys(seed, size)?;
        let mut lookups = Lookups::new(&rules, keys)?;
        let (mut build_ms, mut train_ms) = (Vec::new(), Vec::new());
        let mut last = None;
        for _ in 0..builds {
            let t = std::time::Instant::now();
            let nmu = NuevoMatchUp::build_with(&rules, config, TupleMerge::build)?;
            build_ms.push(t.elapsed().as_secs_f64() * 1e3);
            train_ms.push(stat(&nmu, "train_ms"));
            last = Some(nmu);
        }
        let nmu = last.ok_or_else(|| Error("no build".into()))?;
        let (ns, verified, mismatches) = lookups.time_and_check(&nmu);
        Ok(BuildCell {
            build_ms,
            train_ms,
            ns,
            coverage: nmu.coverage(),
            buckets: nmu.buckets() as u64,
            index_bytes: nmu.index_bytes() as u64,
            max_err: stat(&nmu, "max_err"),
            mean_err: stat(&nmu, "mean_err"),
            checked_every: lookups.step as u64,
            verified,
            mismatches,
        })
    })
}

/// Table 1 / Fig. 7a: NuevoMatchUP's bucket size `l` against its training (build) time and
/// lookup time, every lookup of the trace checked against the reference on a sample.
pub fn fig7(ctx: &Ctx) -> Result<Figure, Error> {
    use rqvs_classify::nuevomatch::NuevoMatchConfig;
    let mut f = ctx.figure("fig7");
    let (seed, size, buckets) = fig7_setting(ctx.cfg.mode);
    f.header = cols("l | build with training (ms) | lookup (ns/packet, batched) | coverage | buckets | index KiB");
    let mut points = Vec::new();
    let mut train = Panel::new("bucket size l", "ms");
    let mut lookup = Panel::new("bucket size l", "ns/packet");
    let mut step = 0;
    for &l in &buckets {
        let mut config = NuevoMatchConfig::always_learned();
        config.isets.bucket_size = l;
        let c = build_cell(ctx, ("fig7", &format!("l{l}")), (seed, size), config, 1)?;
        let (build_ms, ns) = (c.build_ms[0], c.ns);
        f.verified += c.verified;
        f.mismatches += c.mismatches;
        step = c.checked_every;
        points.push((l, build_ms, ns));
        train.point("build with training (ms)", l as f64, build_ms);
        lookup.point("lookup (ns/packet)", l as f64, ns);
        f.rows.push(vec![
            l.to_string(),
            format!("{build_ms:.1}"),
            format!("{:.1}", ns),
            pct(c.coverage),
            c.buckets.to_string(),
            format!("{:.0}", c.index_bytes as f64 / 1024.0),
        ]);
    }
    f.commands.push(format!(
        "rqvs bench classifiers --rules {} --trace {} --classifiers nmu-isets   # l = 40; other l: rqvs paper --only fig7",
        ctx.rules(seed, size).display(),
        ctx.trace(seed, size).display()
    ));
    f.panels = vec![train, lookup];
    let (first, last) = (points[0], points[points.len() - 1]);
    f.claims.push(claim(
        &format!("larger buckets train faster (l = {} → {})", first.0, last.0),
        "l = 8 → 48 moves the model down a size category: much faster training",
        format!("{:.1} ms → {:.1} ms", first.1, last.1),
        Some(last.1 < first.1),
    ));
    f.claims.push(claim(
        "at a negligible lookup cost",
        "a small slowdown",
        format!("{:.1} → {:.1} ns/packet", first.2, last.2),
        None,
    ));
    f.notes.push(format!(
        "{seed}_{size} (the paper: 12-500K, rule-set 12 = ipc2), every packet of its trace looked up in \
         batches (median of passes over at least 200 ms); 1 of every {step} packets checked against the reference."
    ));
    Ok(f)
}

/// Fig. 15's set and probe length, seconds.
fn fig15_setting(mode: Mode) -> (&'static str, &'static str, f64) {
    match mode {
        Mode::Quick => ("acl1", "10k", 2.0),
        Mode::Full => ("acl1", "500k", 5.0),
    }
}

const FIG15_TARGETS: [f64; 2] = [0.75, 0.9];

pub fn plan_fig15(mode: Mode) -> Vec<Unit> {
    let (_, size, seconds) = fig15_setting(mode);
    // ~8 probes a target (bisection from 1K to 2M updates/s to within 10%), each a build.
    let (load, build) = est_build(size);
    let est = load + 8.0 * (seconds + 1.0 + build);
    FIG15_TARGETS.iter().map(|t| Unit::new("fig15", &format!("coverage{t}"), est)).collect()
}

/// An update-rate search's cell ([`fig15`]): the highest sustained rate's probe, if any, and
/// every probe's checks.
#[derive(Serialize, Deserialize)]
struct UpdateRateCell {
    best: Option<UpdateProbe>,
    verified: u64,
    mismatches: u64,
}

#[derive(Serialize, Deserialize)]
struct UpdateProbe {
    rate: f64,
    start_coverage: Option<f64>,
    min_coverage: f64,
    mpps: f64,
    sessions: u64,
}

/// The highest rule-update rate `rules` sustain with coverage at `target` (`rqvs bench
/// updates` probes of `seconds`, bisected as `scripts/update_rate.py` does).
fn update_rate(
    rules: &[rqvs_flow::Rule],
    keys: &[rqvs_flow::FlowKey],
    target: f64,
    seconds: f64,
) -> Result<UpdateRateCell, Error> {
    use crate::updates::{self, UpdateBenchConfig};
    let (mut verified, mut mismatches) = (0, 0);
    let threshold = (1.0 - target) / 2.0;
    let mut probe = |rate: f64| -> Result<updates::UpdateBench, Error> {
        let cfg = UpdateBenchConfig {
            rate: rate as u64,
            policy: Policy::Instant,
            retrain_threshold: threshold,
            seconds,
            insert_slack: Some(rqvs_classify::nuevomatch::INSERT_SLACK),
            seed: 1,
        };
        let b = updates::run(&cfg, rules.to_vec(), keys)?;
        verified += b.checked;
        mismatches += b.mismatches;
        Ok(b)
    };
    // Sustained: coverage at the target after the first second, ≥ 90% of the rate applied,
    // no mismatch, lookups at ≥ 50% of their rate in the lowest probe.
    let min_cov = |b: &updates::UpdateBench| {
        b.series.iter().filter(|s| s.t_s >= 1.0).map(|s| s.coverage).fold(f64::INFINITY, f64::min)
    };
    let (mut lo, mut hi) = (1000.0f64, 2_000_000.0f64);
    let first = probe(lo)?;
    let floor = 0.5 * first.mpps();
    let ok = |b: &updates::UpdateBench, rate: f64| {
        b.mismatches == 0
            && min_cov(b) >= target
            && b.totals.updates as f64 / b.elapsed_s.max(1e-9) >= 0.9 * rate
            && b.mpps() >= floor
    };
    let mut best = ok(&first, lo).then_some((lo, first));
    if best.is_some() {
        while hi / lo > 1.1 {
            let mid = (lo * hi).sqrt();
            let b = probe(mid)?;
            if ok(&b, mid) {
                lo = mid;
                best = Some((mid, b));
            } else {
                hi = mid;
            }
        }
    }
    let best = best.map(|(rate, b)| UpdateProbe {
        rate,
        start_coverage: b.series.first().map(|s| s.coverage),
        min_coverage: min_cov(&b),
        mpps: b.mpps(),
        sessions: b.sessions as u64,
    });
    Ok(UpdateRateCell { best, verified, mismatches })
}

/// Fig. 15: the highest rule-update rate CFLOWS' classifier sustains while its coverage stays
/// at 75% / 90% (`rqvs bench updates` probes, bisected as `scripts/update_rate.py` does).
pub fn fig15(ctx: &Ctx) -> Result<Figure, Error> {
    let mut f = ctx.figure("fig15");
    let (seed, size, seconds) = fig15_setting(ctx.cfg.mode);
    f.header = cols(
        "coverage target | sustained updates/s | coverage at the start | min coverage | lookups \
         meanwhile (Mpps) | training sessions",
    );
    let mut loaded = None;
    let mut sustained = Vec::new();
    for target in FIG15_TARGETS {
        let key = format!(
            "updates/s sustained at coverage {target} over {} and {}, {seconds} s probes",
            ctx.rules(seed, size).display(),
            ctx.trace(seed, size).display()
        );
        let cell: UpdateRateCell = ctx.cell("fig15", &format!("coverage{target}"), &key, || {
            if loaded.is_none() {
                loaded = Some(ctx.rules_and_keys(seed, size)?);
            }
            let (rules, keys) = loaded.as_ref().expect("loaded");
            update_rate(rules, keys, target, seconds)
        })?;
        f.verified += cell.verified;
        f.mismatches += cell.mismatches;
        sustained.push((target, cell.best.as_ref().map(|b| b.rate)));
        f.rows.push(match &cell.best {
            Some(b) => vec![
                pct(target),
                format!("{:.0}", b.rate),
                b.start_coverage.map_or("—".into(), |c| format!("{c:.3}")),
                format!("{:.3}", b.min_coverage),
                format!("{:.2}", b.mpps),
                b.sessions.to_string(),
            ],
            None => vec![pct(target), "not even 1000".into(), "—".into(), "—".into(), "—".into(), "—".into()],
        });
        f.commands.push(format!(
            "scripts/update_rate.py --rules {} --trace {} --coverage {target} --seconds {seconds}",
            ctx.rules(seed, size).display(),
            ctx.trace(seed, size).display()
        ));
    }
    let rate_of = |t: f64| sustained.iter().find(|s| s.0 == t).and_then(|s| s.1);
    for (t, paper) in [(0.9, "19K/s"), (0.75, "51K/s")] {
        let r = rate_of(t);
        f.claims.push(claim(
            &format!("updates per second CFLOWS' classifier sustains at {} coverage", pct(t)),
            paper,
            r.map_or("none".into(), |r| format!("{:.0}K/s", r / 1e3)),
            r.map(|r| r >= if t == 0.9 { 19_000.0 } else { 51_000.0 }),
        ));
    }
    f.notes.push(format!(
        "{seed}_{size}, {seconds} s probes (lookups on one core, training on the other); half inserts from a \
         held-out 10%, half removals; in-place inserts (docs/nuevomatch.md). The paper's figures are \
         estimates from training times (§4.3); these are measured. A target at or above the set's own \
         coverage before any update can only be held at low rates."
    ));
    Ok(f)
}

/// A trace's keys looked up by a classifier and checked against the reference on 1 of every
/// `step` keys.
struct Lookups {
    keys: Vec<rqvs_flow::FlowKey>,
    step: usize,
    /// The sampled positions and the reference's rule for each.
    want: Vec<(usize, Option<rqvs_flow::RuleId>)>,
    out: Vec<Option<rqvs_flow::RuleId>>,
}

impl Lookups {
    fn new(rules: &[rqvs_flow::Rule], keys: Vec<rqvs_flow::FlowKey>) -> Result<Lookups, Error> {
        let reference = rqvs_classify::Reference::build(rules)?;
        let step = (keys.len() / 1000).max(1);
        let want = (0..keys.len()).step_by(step).map(|i| (i, reference.lookup_rule(&keys[i]).map(|r| r.id))).collect();
        Ok(Lookups { out: vec![None; keys.len()], keys, step, want })
    }

    /// The median ns/packet of batched lookups of every key (passes over at least 200 ms), the
    /// sample's checks and mismatches.
    fn time_and_check(&mut self, c: &dyn rqvs_classify::Classifier) -> (f64, u64, u64) {
        let ns = crate::bench::time_lookups(c, &self.keys, &mut self.out, true, std::time::Duration::from_millis(200));
        let mismatches = self.want.iter().filter(|(i, w)| self.out[*i] != *w).count() as u64;
        (ns.median, self.want.len() as u64, mismatches)
    }
}

/// A classifier's statistic `name` (0 if it has none).
fn stat(c: &dyn rqvs_classify::Classifier, name: &str) -> f64 {
    c.stats().iter().find(|s| s.0 == name).map_or(0.0, |s| s.1)
}

/// Fig. 7b's set and builds per sampling.
fn fig7b_setting(mode: Mode) -> (&'static str, &'static str, usize) {
    match mode {
        Mode::Quick => ("ipc2", "10k", 3),
        Mode::Full => ("ipc2", "500k", 5),
    }
}

/// Fig. 7b's samplings: the name in the table, the cell's, the index builder.
const FIG7B_WAYS: [(&str, &str, rqvs_classify::nuevomatch::IndexBuilder); 2] = [
    ("approximate (NuevoMatchUP)", "approximate", rqvs_classify::nuevomatch::learned_ranges),
    ("uniform (NuevoMatch)", "uniform", rqvs_classify::nuevomatch::learned_ranges_uniform),
];

pub fn plan_fig7b(mode: Mode) -> Vec<Unit> {
    let (_, size, builds) = fig7b_setting(mode);
    let (load, build) = est_build(size);
    FIG7B_WAYS.iter().map(|w| Unit::new("fig7b", w.1, load + build * builds as f64 + 1.0)).collect()
}

/// Fig. 7b: NuevoMatchUP's RQ-RMI training with approximate sampling (the default) against
/// NuevoMatch's uniform sampling (`rqvs_rqrmi::Sampling`), at l = 40: training time, the
/// models' error bounds, and lookups (correct either way).
pub fn fig7b(ctx: &Ctx) -> Result<Figure, Error> {
    use rqvs_classify::nuevomatch::NuevoMatchConfig;
    let mut f = ctx.figure("fig7b");
    let (seed, size, builds) = fig7b_setting(ctx.cfg.mode);
    f.header = cols(
        "sampling | training (ms, median) | build with training (ms, median) | max error bound | \
         mean error bound | lookup (ns/packet, batched) | coverage",
    );
    let mut train_ms = Vec::new();
    let mut panel = Panel::new("build", "training (ms)");
    let mut step = 0;
    for (name, cell, index) in FIG7B_WAYS {
        let mut config = NuevoMatchConfig::always_learned();
        config.isets.bucket_size = 40;
        config.index = index;
        let mut c = build_cell(ctx, ("fig7b", cell), (seed, size), config, builds)?;
        f.verified += c.verified;
        f.mismatches += c.mismatches;
        step = c.checked_every;
        for (b, ms) in c.train_ms.iter().enumerate() {
            panel.point(name, (b + 1) as f64, *ms);
        }
        let (train, build) = (median(&mut c.train_ms), median(&mut c.build_ms));
        train_ms.push(train);
        f.rows.push(vec![
            name.into(),
            format!("{train:.1}"),
            format!("{build:.1}"),
            format!("{:.0}", c.max_err),
            format!("{:.1}", c.mean_err),
            format!("{:.1}", c.ns),
            pct(c.coverage),
        ]);
    }
    f.panels = vec![panel];
    f.commands.push(format!("rqvs paper --only fig7b --data {}   # no other command trains with uniform sampling", {
        ctx.cfg.data.display()
    }));
    let x = train_ms[1] / train_ms[0];
    f.claims.push(claim(
        &format!("approximate sampling trains faster than uniform sampling ({seed}_{size}, l = 40)"),
        "4–5.3× faster (12-500K)",
        format!("{x:.2}× ({:.1} ms vs {:.1} ms)", train_ms[0], train_ms[1]),
        Some(x > 1.0),
    ));
    f.notes.push(format!(
        "{seed}_{size} (the paper: 12-500K = ipc2 at 500K), the training time of every iSet's RQ-RMI in one build \
         (median of {builds} builds), lookups of the whole trace in batches, 1 of every {step} packets checked \
         against the reference. What differs from the paper: NuevoMatch trains each submodel by gradient descent \
         over its samples; rqvs fits each submodel in closed form and spends much of its training routing and \
         bounding every range piece exactly, which both samplings pay. And rqvs's approximate sampling fits a \
         submodel with at most 2,048 range pieces on their end points instead of 4,096 samples (at 10K rules: \
         nearly every submodel), which uniform sampling never does: the ratio depends on the set's size more \
         than the paper's does. The error bounds are exact with either sampling: lookups stay correct."
    ));
    f.notes.push(
        "Fig. 7c (NuevoMatchUP's implementation against NuevoMatch's: 23.8× geomean) is not reproduced: NuevoMatch's \
         own training (Python, TensorFlow and a native library) is not part of rqvs, so there is no second \
         implementation to time. The §3 comparison (Fig. 12) gives rqvs's training times beside the paper's."
            .into(),
    );
    Ok(f)
}

/// The median of `v` (0 for none); sorts `v`.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}
