//! The designs side by side over the mode's seeds and sizes: where ORIG's time goes, the
//! speedups, EMC sizes, PMD threads, hash tables per hit, training times, megaflow churn.

use serde::{Deserialize, Serialize};

use super::{claim, cols, compare_units, count, design, log_rules, mean, pct, sets, sets_of};
use crate::paper::cells::{est_s, Unit};
use crate::paper::{geomean, Ctx, Figure, Mode, Panel};
use crate::replay::{self, DesignKind, ReplayConfig};
use crate::Error;

pub fn plan_fig3(mode: Mode) -> Vec<Unit> {
    compare_units(mode)
}

pub fn plan_fig11(mode: Mode) -> Vec<Unit> {
    compare_units(mode)
}

pub fn plan_fig12(mode: Mode) -> Vec<Unit> {
    compare_units(mode)
}

pub fn plan_table2(mode: Mode) -> Vec<Unit> {
    compare_units(mode)
}

/// Fig. 3: the shares of ORIG's PMD time (EMC, megaflow cache, upcalls) by rule count.
pub fn fig3(ctx: &Ctx) -> Result<Figure, Error> {
    let mut f = ctx.figure("fig3");
    f.header = cols("set | EMC | megaflow cache | upcalls | other | Mpps | masks");
    let mut by_size: Vec<(&str, Vec<f64>, Vec<f64>)> = Vec::new();
    let mut megaflow = Panel::new("log10(rules)", "megaflow cache, share of PMD time");
    let mut upcalls = Panel::new("log10(rules)", "upcalls, share of PMD time");
    for (seed, size) in sets(ctx) {
        let Some(runs) = ctx.compare(&mut f, seed, size)? else { continue };
        count(&mut f, &runs[..1]);
        let o = design(&runs, DesignKind::Orig);
        megaflow.point(seed, log_rules(size), o.share_megaflow);
        upcalls.point(seed, log_rules(size), o.share_upcall);
        let other = 1.0 - o.share_emc - o.share_megaflow - o.share_upcall;
        f.rows.push(vec![
            format!("{seed}_{size}"),
            pct(o.share_emc),
            pct(o.share_megaflow),
            pct(o.share_upcall),
            pct(other),
            format!("{:.3}", o.mpps),
            o.masks.to_string(),
        ]);
        match by_size.iter_mut().find(|b| b.0 == size) {
            Some(b) => {
                b.1.push(o.share_megaflow);
                b.2.push(o.share_megaflow + o.share_upcall);
            }
            None => by_size.push((size, vec![o.share_megaflow], vec![o.share_megaflow + o.share_upcall])),
        }
        f.commands.push(ctx.replay_command("replay", seed, size, " --design orig"));
    }
    megaflow.point("paper (mean)", 5.0, 0.86);
    megaflow.point("paper (mean)", 5.7, 0.97);
    f.panels = vec![megaflow, upcalls];
    let (first, last) = (&by_size[0], &by_size[by_size.len() - 1]);
    let paper_at = |size: &str| match size {
        "100k" => "86%",
        "500k" => "97%",
        _ => "— (not given below 100K)",
    };
    f.claims.push(claim(
        &format!("the megaflow cache's share of ORIG's PMD time grows with the rules ({} → {})", first.0, last.0),
        format!("{} at {}", paper_at(last.0), last.0),
        format!("{} → {}", pct(mean(&first.1)), pct(mean(&last.1))),
        Some(mean(&last.1) > mean(&first.1)),
    ));
    f.claims.push(claim(
        &format!("the megaflow path (cache and upcalls) takes most of ORIG's PMD time at {}", last.0),
        paper_at(last.0),
        pct(mean(&last.2)),
        Some(mean(&last.2) > 0.5),
    ));
    f.notes.push(
        "The ClassBench traces are mostly distinct headers (low locality): above 10K rules ORIG is bound by \
         upcalls rather than by megaflow-cache lookups, where the paper's CAIDA trace keeps it in the cache \
         (README: The ORIG datapath)."
            .into(),
    );
    Ok(f)
}

/// The seeds whose constant rate [`fig8`] searches at 500K in full mode: one per ClassBench
/// family. A search at 500K takes ~10 min here (ORIG: ~10 probes of 20 passes over a 500K-packet
/// trace at ~0.3 Mpps), so all 12 would be ~2 h, more than the rest of `--full` together; the
/// others are listed on the page as not run. Every seed runs at 1K, 10K and 100K.
pub const RATE_SEEDS_500K: [&str; 3] = ["acl1", "fw1", "ipc1"];

/// Whether [`fig8`] searches the constant rate of `seed`/`size`: quick, the 1K sets (ORIG takes
/// ~0.1 Mpps at 10K unconstrained in 0.3 s runs); full, every set but 500K's outside
/// [`RATE_SEEDS_500K`].
fn rate_searched(mode: Mode, seed: &str, size: &str) -> bool {
    match mode {
        Mode::Quick => size == "1k",
        Mode::Full => size != "500k" || RATE_SEEDS_500K.contains(&seed),
    }
}

/// A rate search's cell: the highest rate with < 1% drops (Mpps; `None` when even the lowest
/// probe dropped more), the passes, the probes' checks.
#[derive(Serialize, Deserialize)]
struct RateCell {
    mpps: Option<f64>,
    passes: u32,
    verified: u64,
    mismatches: u64,
}

/// Estimated seconds of one rate search: ~10 runs of the passes (see [`rate_searches`]).
fn est_rate(mode: Mode, size: &str, design: DesignKind) -> f64 {
    let per_run = match (mode, size, design) {
        (Mode::Quick, _, _) => 0.5,
        (_, "1k" | "10k", _) => 2.0,
        (_, "100k", DesignKind::Orig) => 19.0,
        (_, "100k", _) => 8.0,
        (_, _, DesignKind::Orig) => 48.0,
        _ => 9.0,
    };
    10.0 * per_run
}

pub fn plan_fig8(mode: Mode) -> Vec<Unit> {
    let mut units = compare_units(mode);
    for (seed, size) in sets_of(mode).into_iter().filter(|(seed, size)| rate_searched(mode, seed, size)) {
        for d in [DesignKind::Orig, DesignKind::Cflows] {
            units.push(Unit::new("fig8", &format!("{seed}_{size}_rate_{}", d.name()), est_rate(mode, size, d)));
        }
    }
    units
}

/// ORIG's and CFLOWS' constant-rate searches on `seed`/`size`, a cell each: the highest
/// offered rate with < 1% drops after the warm-up, over enough passes that the cold start
/// (every flow's first upcall) is within the 5% warm-up (at least 20, and 1M packets in full
/// mode, 200K in quick).
fn rate_searches(ctx: &Ctx, seed: &str, size: &str) -> Result<(RateCell, RateCell), Error> {
    let want: u64 = if ctx.cfg.mode == Mode::Full { 1_000_000 } else { 200_000 };
    let mut prepared = None;
    let mut search = |d: DesignKind| {
        let key = format!(
            "rqvs compare --rules {} --trace {} --emc-prob 0.2 --passes max(20, {want} packets) --verify 1000 --designs {} --rate-search",
            ctx.rules(seed, size).display(),
            ctx.trace(seed, size).display(),
            d.name()
        );
        ctx.cell("fig8", &format!("{seed}_{size}_rate_{}", d.name()), &key, || {
            if prepared.is_none() {
                let rc = ReplayConfig { duration: None, ..ctx.replay_config(seed, size) };
                let p = replay::prepare(&rc)?;
                let rc = ReplayConfig { passes: want.div_ceil(p.packets).max(20) as u32, ..rc };
                prepared = Some((rc, p));
            }
            let (rc, p) = prepared.as_ref().expect("prepared");
            let (mut verified, mut mismatches) = (0, 0);
            let s = replay::rate_search(rc, p, d, None, &mut |_, r| {
                verified += r.verified as u64;
                mismatches += r.mismatches as u64;
            })?;
            Ok(RateCell { mpps: s.passed.then_some(s.probe.0 / 1e6), passes: rc.passes, verified, mismatches })
        })
    };
    Ok((search(DesignKind::Orig)?, search(DesignKind::Cflows)?))
}

/// A size's speedups over ORIG ([`fig8`]): (size, CCACHE, CFLOWS, CFLOWS at constant rate).
type Speedups = (&'static str, Vec<f64>, Vec<f64>, Vec<f64>);

/// Fig. 8 / 18a: the three designs, unconstrained (the adaptive-rate analogue) and at the
/// highest constant rate with < 1% drops.
pub fn fig8(ctx: &Ctx) -> Result<Figure, Error> {
    let mut f = ctx.figure("fig8");
    f.header = cols(
        "set | ORIG Mpps | CCACHE Mpps | CFLOWS Mpps | CCACHE × | CFLOWS × | ORIG max rate | \
         CFLOWS max rate | CFLOWS × (rate)",
    );
    // Per size: CCACHE's and CFLOWS' unconstrained speedups, CFLOWS' constant-rate ones.
    let mut speedups: Vec<Speedups> = Vec::new();
    for (seed, size) in sets(ctx) {
        let Some(runs) = ctx.compare(&mut f, seed, size)? else { continue };
        count(&mut f, &runs);
        let (o, cc, cf) =
            (design(&runs, DesignKind::Orig), design(&runs, DesignKind::Ccache), design(&runs, DesignKind::Cflows));
        let (ro, rf) = if rate_searched(ctx.cfg.mode, seed, size) {
            let (ro, rf) = rate_searches(ctx, seed, size)?;
            for r in [&ro, &rf] {
                f.verified += r.verified;
                f.mismatches += r.mismatches;
            }
            f.commands.push(format!(
                "rqvs compare --rules {} --trace {} --emc-prob 0.2 --passes {} --verify 1000 --designs orig,cflows --rate-search",
                ctx.rules(seed, size).display(),
                ctx.trace(seed, size).display(),
                ro.passes
            ));
            (ro.mpps, rf.mpps)
        } else {
            if ctx.cfg.mode == Mode::Full {
                f.not_run.push(format!(
                    "{seed}_{size}: the constant-rate searches (ORIG and CFLOWS; ~10 min a set here, most of a --full \
                     run's time at 12 sets; the 500K constant rate is searched on {})",
                    RATE_SEEDS_500K.join(", ")
                ));
            }
            (None, None)
        };
        let rate_x = ro.zip(rf).map(|(a, b)| b / a);
        let mpps = |v: Option<f64>| v.map_or("—".into(), |x| format!("{x:.3}"));
        f.rows.push(vec![
            format!("{seed}_{size}"),
            format!("{:.3}", o.mpps),
            format!("{:.3}", cc.mpps),
            format!("{:.3}", cf.mpps),
            format!("{:.2}", cc.mpps / o.mpps),
            format!("{:.2}", cf.mpps / o.mpps),
            mpps(ro),
            mpps(rf),
            rate_x.map_or("—".into(), |x| format!("{x:.2}")),
        ]);
        let entry = match speedups.iter_mut().position(|s| s.0 == size) {
            Some(i) => &mut speedups[i],
            None => {
                speedups.push((size, Vec::new(), Vec::new(), Vec::new()));
                speedups.last_mut().expect("pushed")
            }
        };
        entry.1.push(cc.mpps / o.mpps);
        entry.2.push(cf.mpps / o.mpps);
        entry.3.extend(rate_x);
        f.commands.push(ctx.replay_command("compare", seed, size, " --designs orig,ccache,cflows"));
    }
    let paper = |size: &str| match size {
        "1k" => ("1.02×", "2.6×"),
        "100k" => ("1.5×", "8.5×"),
        "500k" => ("1.9×", "12.3×"),
        _ => ("—", "—"),
    };
    let x = |v: Option<f64>| v.map_or("—".into(), |g| format!("{g:.2}×"));
    let mut panel = Panel::new("log10(rules)", "speedup over ORIG (geomean)");
    panel.log_y = true;
    for (size, cc, cf, rate) in &speedups {
        if let (Some(a), Some(b)) = (geomean(cc), geomean(cf)) {
            panel.point("CCACHE", log_rules(size), a);
            panel.point("CFLOWS", log_rules(size), b);
        }
        if let Some(r) = geomean(rate) {
            panel.point("CFLOWS, constant rate", log_rules(size), r);
        }
    }
    for (size, cc, cf) in [("1k", 1.02, 2.6), ("100k", 1.5, 8.5), ("500k", 1.9, 12.3)] {
        panel.point("CCACHE (paper)", log_rules(size), cc);
        panel.point("CFLOWS (paper)", log_rules(size), cf);
    }
    f.panels = vec![panel];
    for (size, cc, cf, rate) in &speedups {
        let (pc, pf) = paper(size);
        let gf = geomean(cf);
        f.claims.push(claim(
            &format!("CFLOWS is faster than ORIG at {size} rules (geomean; constant-rate geomean in brackets)"),
            pf,
            format!("{} ({})", x(gf), x(geomean(rate))),
            gf.map(|g| g > 1.0),
        ));
        f.claims.push(claim(
            &format!("CCACHE's speedup over ORIG at {size} rules (geomean)"),
            pc,
            x(geomean(cc)),
            None,
        ));
    }
    if speedups.len() > 1 {
        let (a, b) = (geomean(&speedups[0].2), geomean(&speedups[speedups.len() - 1].2));
        f.claims.push(claim(
            "CFLOWS' speedup over ORIG grows with the rules",
            "2.6× → 8.5× → 12.3×",
            format!("{} → {}", x(a), x(b)),
            a.zip(b).map(|(a, b)| b > a),
        ));
    }
    f.notes.push(
        "Unconstrained = as fast as the PMD takes the trace (closest to the paper's adaptive TX, Fig. 18a); \
         max rate = the highest constant offered rate with < 1% drops after a 5% warm-up (the paper's \
         constant TX, Fig. 8), for ORIG and CFLOWS, over at least 20 passes of the trace (quick: the 1K sets \
         only; full: every set but 500K's, where one seed per family: see below; — elsewhere)."
            .into(),
    );
    Ok(f)
}

/// Fig. 11 / 18b: megaflow-cache hash tables probed per megaflow hit, ORIG vs CCACHE.
pub fn fig11(ctx: &Ctx) -> Result<Figure, Error> {
    let mut f = ctx.figure("fig11");
    f.header = cols("set | ORIG subtables/hit | CCACHE subtables/hit | ORIG masks | CCACHE masks (cache)");
    let mut ratios = Vec::new();
    for (seed, size) in sets(ctx) {
        let Some(runs) = ctx.compare(&mut f, seed, size)? else { continue };
        count(&mut f, &runs[..2]);
        let (o, c) = (design(&runs, DesignKind::Orig), design(&runs, DesignKind::Ccache));
        f.rows.push(vec![
            format!("{seed}_{size}"),
            format!("{:.2}", o.subtables_per_hit),
            format!("{:.2}", c.subtables_per_hit),
            o.masks.to_string(),
            c.masks.to_string(),
        ]);
        if o.subtables_per_hit > 0.0 && c.subtables_per_hit > 0.0 {
            ratios.push(c.subtables_per_hit / o.subtables_per_hit);
        }
        f.commands.push(ctx.replay_command("compare", seed, size, " --designs orig,ccache"));
    }
    let g = geomean(&ratios);
    f.claims.push(claim(
        "CCACHE's megaflow cache is probed through fewer hash tables per hit than ORIG's (the model takes the rest)",
        "fewer (Fig. 11)",
        g.map_or("—".into(), |g| format!("{g:.2}× ORIG's (geomean)")),
        g.map(|g| g < 1.0),
    ));
    Ok(f)
}

/// [`fig10`]'s set.
const FIG10_SET: (&str, &str) = ("acl3", "1k");

fn fig10_command(ctx: &Ctx, d: DesignKind, pmds: usize) -> String {
    let (seed, size) = FIG10_SET;
    format!(
        "rqvs replay --design {} --rules {} --trace {} --emc-prob 0.2 --passes 3 --verify 1000 --pmds {pmds}",
        d.name(),
        ctx.rules(seed, size).display(),
        ctx.trace(seed, size).display()
    )
}

pub fn plan_fig10(_: Mode) -> Vec<Unit> {
    let est = est_s(FIG10_SET.1, 1.0, 1);
    DesignKind::ALL
        .iter()
        .flat_map(|d| [1, 2].map(|p| Unit::new("fig10", &format!("{}_{p}pmd", d.name()), est)))
        .collect()
}

/// Fig. 10: the trace split over 1 and 2 PMD threads by flow hash (`--pmds`), each design.
pub fn fig10(ctx: &Ctx) -> Result<Figure, Error> {
    let mut f = ctx.figure("fig10");
    let (seed, size) = FIG10_SET;
    f.header = cols("design | 1 PMD Mpps | 2 PMDs Mpps | × (2 vs 1) | × ORIG (2 PMDs)");
    let mut at2 = Vec::new();
    let mut scales = true;
    let mut panel = Panel::new("PMD threads", "Mpps (all PMDs)");
    for d in DesignKind::ALL {
        let mut mpps = Vec::new();
        for pmds in [1usize, 2] {
            let c = ReplayConfig { pmds, duration: None, passes: 3, ..ctx.replay_config(seed, size) };
            let key = fig10_command(ctx, d, pmds);
            let (m, verified, mismatches) = ctx.cell("fig10", &format!("{}_{pmds}pmd", d.name()), &key, || {
                let p = replay::prepare(&c)?;
                let r = replay::run_pmds(&c, &p, d)?;
                let v = r.runs.iter().map(|run| run.verified as u64).sum::<u64>();
                Ok((r.mpps, v, r.runs.iter().map(|run| run.mismatches as u64).sum::<u64>()))
            })?;
            f.verified += verified;
            f.mismatches += mismatches;
            mpps.push(m);
            panel.point(d.name(), pmds as f64, m);
        }
        scales &= mpps[1] > mpps[0];
        at2.push(mpps[1]);
        f.rows.push(vec![
            d.name().into(),
            format!("{:.3}", mpps[0]),
            format!("{:.3}", mpps[1]),
            format!("{:.2}", mpps[1] / mpps[0]),
            format!("{:.2}", mpps[1] / at2[0]),
        ]);
        f.commands.push(fig10_command(ctx, d, 2));
    }
    f.panels = vec![panel];
    f.claims.push(claim(
        "every design's throughput grows with a second PMD thread",
        "linear up to 8 PMDs (CCACHE 1.3× ORIG throughout)",
        if scales { "yes, each design" } else { "not for every design" },
        Some(scales),
    ));
    f.claims.push(claim("CCACHE's speedup over ORIG with 2 PMDs", "1.3×", format!("{:.2}×", at2[1] / at2[0]), None));
    f.notes.push(format!(
        "{seed}_{size} (the paper's rule-set 3-1K), 3 passes of its ClassBench trace; PMD time per thread, the \
         threads together over the longest (the offline `--pmds`; the switch's PMDs on ports are in \
         docs/switch-bench.md). This machine has 2 cores, the paper's 10."
    ));
    Ok(f)
}

/// Fig. 12 and §3: how long the learned models take to train — CCACHE's over the megaflows it
/// holds, CFLOWS' first model over the rules (the build).
pub fn fig12(ctx: &Ctx) -> Result<Figure, Error> {
    let mut f = ctx.figure("fig12");
    f.header = cols(
        "set | CCACHE megaflows in the model | CCACHE last training (ms) | CFLOWS rules in the \
         model | CFLOWS build with training (ms)",
    );
    let biggest = *ctx.cfg.mode.sizes().last().expect("sizes");
    let mut slowest = 0.0f64;
    for (seed, size) in sets(ctx) {
        let Some(runs) = ctx.compare(&mut f, seed, size)? else { continue };
        count(&mut f, &runs[1..]);
        let (cc, cf) = (design(&runs, DesignKind::Ccache), design(&runs, DesignKind::Cflows));
        f.rows.push(vec![
            format!("{seed}_{size}"),
            cc.model_entries.to_string(),
            cc.training_ms.map_or("no model yet".into(), |ms| format!("{ms:.1}")),
            cf.model_entries.to_string(),
            format!("{:.1}", cf.build_ms),
        ]);
        if size == biggest {
            slowest = slowest.max(cf.build_ms);
        }
        f.commands.push(ctx.replay_command("compare", seed, size, " --designs ccache,cflows"));
    }
    f.claims.push(claim(
        &format!("NuevoMatchUP trains a rule-set in well under a second (CFLOWS' build at {biggest}, slowest set)"),
        "500 ms for 100K rules (NuevoMatch: 270 s)",
        format!("{slowest:.0} ms"),
        Some(slowest < 1000.0),
    ));
    f.claims.push(claim(
        "training over megaflows takes milliseconds for small caches",
        "ms for a few thousand megaflows, ~1 s for 200K",
        "see the table",
        None,
    ));
    Ok(f)
}

/// Table 2: ORIG's upcall rate (megaflow insertions per second) and megaflow count per size,
/// the share of the cache that changes per second, the interval at which a model over the
/// megaflows would need retraining, and how long CCACHE's model actually takes to train.
pub fn table2(ctx: &Ctx) -> Result<Figure, Error> {
    let mut f = ctx.figure("table2");
    f.header = cols(
        "rules | upcalls/s (ORIG) | megaflows (ORIG) | cache changed per second | retrain every | \
         CCACHE training (ms) | training / interval",
    );
    let mut last_ratio = None;
    for size in ctx.cfg.mode.sizes() {
        let (mut up, mut mf, mut train) = (Vec::new(), Vec::new(), Vec::new());
        for seed in ctx.cfg.mode.seeds() {
            let Some(runs) = ctx.compare(&mut f, seed, size)? else { continue };
            count(&mut f, &runs[..2]);
            let (o, cc) = (design(&runs, DesignKind::Orig), design(&runs, DesignKind::Ccache));
            up.push(o.upcalls_per_s);
            mf.push(o.megaflows as f64);
            train.extend(cc.training_ms);
            f.commands.push(ctx.replay_command("compare", seed, size, " --designs orig,ccache"));
        }
        let (up, mf) = (mean(&up), mean(&mf));
        let interval_us = if up > 0.0 { 1e6 / up } else { f64::INFINITY };
        let train = (!train.is_empty()).then(|| mean(&train));
        let ratio = train.map(|t| t * 1e3 / interval_us);
        last_ratio = ratio;
        f.rows.push(vec![
            size.into(),
            format!("{up:.0}"),
            format!("{mf:.0}"),
            pct(if mf > 0.0 { up / mf } else { 0.0 }),
            format!("{interval_us:.0} µs"),
            train.map_or("no model yet".into(), |t| format!("{t:.1}")),
            ratio.map_or("—".into(), |r| format!("{r:.0}×")),
        ]);
    }
    f.claims.push(claim(
        "a model over the megaflow cache cannot be retrained as often as megaflows change (largest size)",
        "retrain 100K megaflows every 150 µs; NuevoMatch takes 270 s",
        last_ratio.map_or("—".into(), |r| format!("training takes {r:.0}× the interval")),
        last_ratio.map(|r| r > 1.0),
    ));
    f.notes.push(
        "Means over the mode's seeds at each size, from the same replays as Fig. 3 and 8 (upcalls per second \
         of the whole run: in --quick's 0.3 s runs mostly the cold start, every megaflow installed once). The \
         paper's 100K/500K rows: ~6.5K upcalls/s, ~100K megaflows, ~7% of the cache per second."
            .into(),
    );
    Ok(f)
}

/// A point of [`fig9`]: the EMC's entries and each design's Mpps (in `DesignKind::ALL`'s order).
type EmcPoint = (usize, Vec<f64>);

/// [`fig9`]'s sets and EMC sizes: the paper's at 500K in full mode.
fn fig9_points(mode: Mode) -> (Vec<(&'static str, &'static str)>, Vec<usize>) {
    match mode {
        Mode::Quick => (vec![("acl1", "10k")], vec![1 << 13, 1 << 15, 1 << 17, 1 << 19, 1 << 21]),
        Mode::Full => (vec![("acl1", "500k"), ("acl5", "500k"), ("ipc2", "500k")], (13..=21).map(|k| 1 << k).collect()),
    }
}

pub fn plan_fig9(mode: Mode) -> Vec<Unit> {
    let (sets, sizes) = fig9_points(mode);
    let mut units = Vec::new();
    for (seed, size) in sets {
        for e in &sizes {
            units.push(Unit::new("fig9", &format!("{seed}_{size}_emc{e}"), est_s(size, mode.duration(), 3)));
        }
    }
    units
}

/// Fig. 9: each design's throughput by the EMC's size (`--emc-entries`), on the sets that the
/// paper found fastest for ORIG.
pub fn fig9(ctx: &Ctx) -> Result<Figure, Error> {
    let mut f = ctx.figure("fig9");
    let (sets, sizes) = fig9_points(ctx.cfg.mode);
    f.header = cols("set | EMC entries | ORIG Mpps | CCACHE Mpps | CFLOWS Mpps | ORIG EMC hits | CFLOWS × ORIG");
    let mut by_set: Vec<(String, Vec<EmcPoint>)> = Vec::new();
    for (seed, size) in sets {
        let mut panel = Panel::new("log2(EMC entries)", &format!("{seed}_{size}: Mpps"));
        let mut points = Vec::new();
        for &entries in &sizes {
            let c = ReplayConfig { emc_entries: entries, ..ctx.replay_config(seed, size) };
            let command = ctx.replay_command(
                "compare",
                seed,
                size,
                &format!(" --designs orig,ccache,cflows --emc-entries {entries}"),
            );
            let runs = ctx.designs_cell("fig9", &format!("{seed}_{size}_emc{entries}"), &command, &c)?;
            count(&mut f, &runs);
            let emc_hits = design(&runs, DesignKind::Orig).emc_hits;
            let mpps: Vec<f64> = runs.iter().map(|r| r.mpps).collect();
            for r in &runs {
                panel.point(r.design.name(), (entries as f64).log2(), r.mpps);
            }
            f.rows.push(vec![
                format!("{seed}_{size}"),
                entries.to_string(),
                format!("{:.3}", mpps[0]),
                format!("{:.3}", mpps[1]),
                format!("{:.3}", mpps[2]),
                pct(emc_hits),
                format!("{:.2}", mpps[2] / mpps[0]),
            ]);
            f.commands.push(command);
            points.push((entries, mpps));
        }
        f.panels.push(panel);
        by_set.push((format!("{seed}_{size}"), points));
    }
    // The fastest design at every size up to 128K entries, per set ("largely the same": the
    // leader; the others' order is in the table).
    let fastest = |m: &[f64]| (0..m.len()).max_by(|&a, &b| m[a].total_cmp(&m[b])).unwrap_or(0);
    let mut leaders = Vec::new();
    let mut same = true;
    for (set, pts) in &by_set {
        let small: Vec<usize> = pts.iter().filter(|p| p.0 <= 1 << 17).map(|p| fastest(&p.1)).collect();
        same &= small.windows(2).all(|w| w[0] == w[1]);
        let names: Vec<&str> = small.iter().map(|&i| DesignKind::ALL[i].name()).collect();
        leaders.push(format!("{set}: {}", names.join(", ")));
    }
    f.claims.push(claim(
        "the designs' relative performance stays largely the same with EMCs of up to 128K entries (the fastest design at each size)",
        "largely the same up to 128K",
        leaders.join("; "),
        Some(same),
    ));
    // Each design at the largest EMC against its best size: the paper's "too large reduces
    // throughput". The claim is judged on the fastest design (CFLOWS wherever it leads), where
    // the EMC's own cost is the largest share of a packet's time; every design is listed.
    let mut texts = Vec::new();
    let mut fastest_falls = true;
    for (set, pts) in &by_set {
        let best_of =
            |i: usize| pts.iter().map(|p| (p.1[i], p.0)).fold((0.0f64, 0), |a, b| if b.0 > a.0 { b } else { a });
        let fastest = (0..DesignKind::ALL.len()).max_by(|&a, &b| best_of(a).0.total_cmp(&best_of(b).0)).unwrap_or(0);
        let last = |i: usize| pts.last().map_or(0.0, |p| p.1[i]);
        fastest_falls &= last(fastest) < best_of(fastest).0;
        let per: Vec<String> = DesignKind::ALL
            .iter()
            .enumerate()
            .map(|(i, d)| format!("{} {:.3} vs {:.3} at {}", d.name(), last(i), best_of(i).0, best_of(i).1))
            .collect();
        texts.push(format!("{set} at 2M entries vs each design's best size: {}", per.join(", ")));
    }
    f.claims.push(claim(
        "a too large EMC reduces throughput (CPU cache contention; judged on the fastest design)",
        "lower at 2M than at the default 8K",
        texts.join("; "),
        Some(fastest_falls),
    ));
    f.notes.push(format!(
        "The paper: rule-sets 1, 5 and 12 at 500K (acl1, acl5, ipc2; the fastest for ORIG), EMC 8K to 2M entries, \
         CAIDA trace. Here {} with each design at each size, EMC insertion probability 0.2, over the set's \
         ClassBench trace (far fewer repeated headers than CAIDA: the ORIG EMC hits column shows what the EMC \
         holds at each size).",
        by_set.iter().map(|s| s.0.as_str()).collect::<Vec<_>>().join(", ")
    ));
    Ok(f)
}
