//! The figures of [`super::FIGURES`]: each measures with the replay library and states the
//! paper's claims beside rqvs's numbers.

use rqvs_classify::nuevomatch::live::Policy;

use super::{geomean, Claim, Ctx, Figure, Panel, RunSummary};
use crate::replay::{self, DesignKind, ReplayConfig, Run};
use crate::Error;

/// The mean of `v` (0 for none).
fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// log10 of a size's rule count (`10k` → 4), the x axis of the plots by size.
fn log_rules(size: &str) -> f64 {
    let n: f64 = size.trim_end_matches('k').parse().unwrap_or(0.0);
    (n * 1000.0).max(1.0).log10()
}

/// Panels of a run's 100 ms samples: throughput, and `second` (upcalls/s or coverage), one line
/// per run named `name`.
fn series_panels(runs: &[(String, Run)], second: &str) -> Vec<Panel> {
    let mut mpps = Panel::new("PMD time (s)", "Mpps");
    let mut other = Panel::new("PMD time (s)", second);
    for (name, r) in runs {
        for s in &r.series {
            mpps.point(name, s.t_s, s.mpps);
            other.point(name, s.t_s, if second == "coverage" { s.coverage } else { s.upcalls_per_s });
        }
    }
    vec![mpps, other]
}

fn claim(what: &str, paper: impl Into<String>, rqvs: impl Into<String>, holds: Option<bool>) -> Claim {
    Claim { what: what.into(), paper: paper.into(), rqvs: rqvs.into(), holds }
}

/// Adds a run's verification to the figure.
fn count(f: &mut Figure, runs: &[RunSummary]) {
    for r in runs {
        f.verified += r.verified;
        f.mismatches += r.mismatches;
    }
}

fn count_run(f: &mut Figure, r: &Run) {
    f.verified += r.verified as u64;
    f.mismatches += r.mismatches as u64;
}

/// Every (seed, size) of the mode, sizes outermost.
fn sets(ctx: &Ctx) -> Vec<(&'static str, &'static str)> {
    let m = ctx.cfg.mode;
    m.sizes().into_iter().flat_map(|z| m.seeds().into_iter().map(move |s| (s, z))).collect()
}

fn design(runs: &[RunSummary], d: DesignKind) -> &RunSummary {
    runs.iter().find(|r| r.design == d).expect("every design ran")
}

/// Fig. 3: the shares of ORIG's PMD time (EMC, megaflow cache, upcalls) by rule count.
pub fn fig3(ctx: &Ctx) -> Result<Figure, Error> {
    let mut f = ctx.figure("fig3");
    f.header = ["set", "EMC", "megaflow cache", "upcalls", "other", "Mpps", "masks"].map(String::from).to_vec();
    let mut by_size: Vec<(&str, Vec<f64>, Vec<f64>)> = Vec::new();
    let mut megaflow = Panel::new("log10(rules)", "megaflow cache, share of PMD time");
    let mut upcalls = Panel::new("log10(rules)", "upcalls, share of PMD time");
    for (seed, size) in sets(ctx) {
        let runs = ctx.compare(seed, size)?;
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

/// A size's speedups over ORIG ([`fig8`]): (size, CCACHE, CFLOWS, CFLOWS at constant rate).
type Speedups = (&'static str, Vec<f64>, Vec<f64>, Vec<f64>);

/// Fig. 8 / 18a: the three designs, unconstrained (the adaptive-rate analogue) and at the
/// highest constant rate with < 1% drops.
pub fn fig8(ctx: &Ctx) -> Result<Figure, Error> {
    let mut f = ctx.figure("fig8");
    f.header = [
        "set",
        "ORIG Mpps",
        "CCACHE Mpps",
        "CFLOWS Mpps",
        "CCACHE ×",
        "CFLOWS ×",
        "ORIG max rate",
        "CFLOWS max rate",
        "CFLOWS × (rate)",
    ]
    .map(String::from)
    .to_vec();
    // Per size: CCACHE's and CFLOWS' unconstrained speedups, CFLOWS' constant-rate ones.
    let mut speedups: Vec<Speedups> = Vec::new();
    for (seed, size) in sets(ctx) {
        let runs = ctx.compare(seed, size)?;
        count(&mut f, &runs);
        let (o, cc, cf) =
            (design(&runs, DesignKind::Orig), design(&runs, DesignKind::Ccache), design(&runs, DesignKind::Cflows));
        // The constant-rate method: the highest offered rate with < 1% drops after the warm-up,
        // over enough passes that the cold start (every flow's first upcall) is within the 5%
        // warm-up. Quick: the 1K sets only (ORIG takes ~0.1 Mpps at 10K: minutes per search).
        let (ro, rf) = if ctx.cfg.mode == super::Mode::Full || size == "1k" {
            let rc = ReplayConfig { duration: None, ..ctx.replay_config(seed, size) };
            let p = replay::prepare(&rc)?;
            let want: u64 = if ctx.cfg.mode == super::Mode::Full { 1_000_000 } else { 200_000 };
            let rc = ReplayConfig { passes: want.div_ceil(p.packets).max(20) as u32, ..rc };
            let mut rate = |d: DesignKind| -> Result<Option<f64>, Error> {
                let s = replay::rate_search(&rc, &p, d, None, &mut |_, r| {
                    f.verified += r.verified as u64;
                    f.mismatches += r.mismatches as u64;
                })?;
                Ok(s.passed.then_some(s.probe.0 / 1e6))
            };
            let rates = (rate(DesignKind::Orig)?, rate(DesignKind::Cflows)?);
            f.commands.push(format!(
                "rqvs compare --rules {} --trace {} --emc-prob 0.2 --passes {} --verify 1000 --designs orig,cflows --rate-search",
                ctx.rules(seed, size).display(),
                ctx.trace(seed, size).display(),
                rc.passes
            ));
            rates
        } else {
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
         only, — elsewhere)."
            .into(),
    );
    Ok(f)
}

/// Fig. 11 / 18b: megaflow-cache hash tables probed per megaflow hit, ORIG vs CCACHE.
pub fn fig11(ctx: &Ctx) -> Result<Figure, Error> {
    let mut f = ctx.figure("fig11");
    f.header = ["set", "ORIG subtables/hit", "CCACHE subtables/hit", "ORIG masks", "CCACHE masks (cache)"]
        .map(String::from)
        .to_vec();
    let mut ratios = Vec::new();
    for (seed, size) in sets(ctx) {
        let runs = ctx.compare(seed, size)?;
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

/// The 100 ms samples' throughput in `[from, to)` seconds of PMD time: (mean, lowest).
fn window(r: &Run, from: f64, to: f64) -> (f64, f64) {
    let v: Vec<f64> = r.series.iter().filter(|s| s.t_s > from && s.t_s <= to).map(|s| s.mpps).collect();
    (mean(&v), v.iter().copied().fold(f64::INFINITY, f64::min))
}

/// Fig. 5: 60 rules added to a running ORIG: megaflows deleted, the upcalls that follow.
pub fn fig5(ctx: &Ctx) -> Result<Figure, Error> {
    let mut f = ctx.figure("fig5");
    let (duration, at) = match ctx.cfg.mode {
        super::Mode::Quick => (1.0, 0.5),
        super::Mode::Full => (12.0, 7.0),
    };
    f.header =
        ["set", "megaflows before", "deleted", "upcalls/s before", "upcalls/s after", "Mpps before", "lowest after"]
            .map(String::from)
            .to_vec();
    let mut deleted_shares = Vec::new();
    let mut upcalls_rise = true;
    let mut runs = Vec::new();
    for seed in ctx.cfg.mode.seeds() {
        let size = "1k";
        let c = ReplayConfig {
            duration: Some(duration),
            updates: Some(format!("add:60@{at}s")),
            revalidator: rqvs_datapath::revalidator::RevalidatorMode::Inline,
            ..ctx.replay_config(seed, size)
        };
        let p = replay::prepare(&c)?;
        let r = replay::run_design(&c, &p, DesignKind::Orig)?;
        count_run(&mut f, &r);
        let before = r.series.iter().rev().find(|s| s.t_s <= at);
        let megaflows = before.map_or(0, |s| s.megaflows);
        let deleted = r.update_log.first().and_then(|u| u["megaflows_deleted"].as_u64()).unwrap_or(0);
        let rate = |from: f64, to: f64| {
            let v: Vec<f64> =
                r.series.iter().filter(|s| s.t_s > from && s.t_s <= to).map(|s| s.upcalls_per_s).collect();
            mean(&v)
        };
        let (up_before, up_after) = (rate(at - 0.3, at), rate(at, at + 0.3));
        let (mpps_before, _) = window(&r, at - 0.3, at);
        let (_, lowest) = window(&r, at, at + 0.5);
        if megaflows > 0 {
            deleted_shares.push(deleted as f64 / megaflows as f64);
        }
        upcalls_rise &= up_after > up_before;
        f.rows.push(vec![
            format!("{seed}_{size}"),
            megaflows.to_string(),
            deleted.to_string(),
            format!("{up_before:.0}"),
            format!("{up_after:.0}"),
            format!("{mpps_before:.3}"),
            format!("{lowest:.3}"),
        ]);
        f.commands.push(ctx.replay_command_for(
            "replay",
            seed,
            size,
            duration,
            &format!(" --design orig --revalidator inline --updates add:60@{at}s"),
        ));
        runs.push((format!("{seed}_{size}"), r));
    }
    f.panels = series_panels(&runs, "upcalls/s");
    let share = mean(&deleted_shares);
    f.claims.push(claim(
        "adding 60 rules deletes a share of the megaflows (revalidation)",
        "104K of 144K (72%)",
        format!("{} on average", pct(share)),
        Some(share > 0.0),
    ));
    f.claims.push(claim(
        "upcalls rise after the update (the deleted flows come back through the slow path)",
        "tens of thousands per second",
        if upcalls_rise { "higher after, in every set" } else { "not higher after in every set" },
        Some(upcalls_rise),
    ));
    f.notes.push(format!(
        "The paper starts from 500 rules holding 144K megaflows (CAIDA); here each set's first 1K rules minus the 60 \
         held out, over its ClassBench trace ({duration} s, the update at {at} s): the cache holds far fewer \
         megaflows, so the dip is shorter."
    ));
    Ok(f)
}

/// Fig. 16–17: a bundle of N rules into CFLOWS (EMC off), instant vs delayed: the throughput
/// dip and when the rules become visible.
pub fn fig17(ctx: &Ctx) -> Result<Figure, Error> {
    let mut f = ctx.figure("fig17");
    let (duration, at, bundles, size) = match ctx.cfg.mode {
        super::Mode::Quick => (1.0, 0.5, vec![100usize, 1000], "10k"),
        super::Mode::Full => (3.0, 1.5, vec![100, 1000, 10_000], "500k"),
    };
    let seed = "acl1";
    f.header = ["bundle", "policy", "Mpps before", "lowest after", "drop", "visible after (ms)", "coverage after"]
        .map(String::from)
        .to_vec();
    let mut drops: Vec<(usize, Policy, f64)> = Vec::new();
    let mut runs = Vec::new();
    for &n in &bundles {
        for policy in [Policy::Instant, Policy::Delayed] {
            let c = ReplayConfig {
                duration: Some(duration),
                emc: false,
                updates: Some(format!("add:{n}@{at}s")),
                policy,
                ..ctx.replay_config(seed, size)
            };
            let p = replay::prepare(&c)?;
            let r = replay::run_design(&c, &p, DesignKind::Cflows)?;
            count_run(&mut f, &r);
            let (before, _) = window(&r, at - 0.3, at);
            let (_, lowest) = window(&r, at, at + 0.5);
            let drop = (1.0 - lowest / before).max(0.0);
            let visible = r.update_log.first().and_then(|u| u["visible_ms"].as_f64());
            let coverage = r.series.iter().filter(|s| s.t_s > at).map(|s| s.coverage).fold(f64::INFINITY, f64::min);
            drops.push((n, policy, drop));
            f.rows.push(vec![
                n.to_string(),
                policy.name().into(),
                format!("{before:.3}"),
                format!("{lowest:.3}"),
                pct(drop),
                visible.map_or("not within the run".into(), |v| format!("{v:.1}")),
                pct(coverage),
            ]);
            f.commands.push(format!(
                "rqvs replay --design cflows --rules {} --trace {} --no-emc --duration {duration} --verify 1000 --updates add:{n}@{at}s --policy {}",
                ctx.rules(seed, size).display(),
                ctx.trace(seed, size).display(),
                policy.name()
            ));
            runs.push((format!("{n} rules, {}", policy.name()), r));
        }
    }
    f.panels = series_panels(&runs, "coverage");
    let instant: Vec<String> =
        drops.iter().filter(|d| d.1 == Policy::Instant).map(|d| format!("{} rules {}", d.0, pct(d.2))).collect();
    f.claims.push(claim(
        "the instant policy's throughput dip after a bundle is small",
        "2% / 8% / 13% for 100 / 1K / 10K rules, ~150 ms",
        instant.join(", "),
        None,
    ));
    f.notes.push(format!(
        "The paper inserts into rule-set 9 at 500K under a 2.5 Mpps constant rate; here {seed}_{size} \
         unconstrained, EMC off, the bundle at {at} s. 100 ms samples on a shared machine vary by several \
         percent: read the drops beside the samples' own noise."
    ));
    Ok(f)
}

/// Fig. 10: the trace split over 1 and 2 PMD threads by flow hash (`--pmds`), each design.
pub fn fig10(ctx: &Ctx) -> Result<Figure, Error> {
    let mut f = ctx.figure("fig10");
    let (seed, size) = ("acl3", "1k");
    f.header = ["design", "1 PMD Mpps", "2 PMDs Mpps", "× (2 vs 1)", "× ORIG (2 PMDs)"].map(String::from).to_vec();
    let mut at2 = Vec::new();
    let mut scales = true;
    let mut panel = Panel::new("PMD threads", "Mpps (all PMDs)");
    for d in DesignKind::ALL {
        let mut mpps = Vec::new();
        for pmds in [1usize, 2] {
            let c = ReplayConfig { pmds, duration: None, passes: 3, ..ctx.replay_config(seed, size) };
            let p = replay::prepare(&c)?;
            let r = replay::run_pmds(&c, &p, d)?;
            for run in &r.runs {
                count_run(&mut f, run);
            }
            mpps.push(r.mpps);
            panel.point(d.name(), pmds as f64, r.mpps);
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
        f.commands.push(format!(
            "rqvs replay --design {} --rules {} --trace {} --emc-prob 0.2 --passes 3 --verify 1000 --pmds 2",
            d.name(),
            ctx.rules(seed, size).display(),
            ctx.trace(seed, size).display()
        ));
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
    f.header = [
        "set",
        "CCACHE megaflows in the model",
        "CCACHE last training (ms)",
        "CFLOWS rules in the model",
        "CFLOWS build with training (ms)",
    ]
    .map(String::from)
    .to_vec();
    let biggest = *ctx.cfg.mode.sizes().last().expect("sizes");
    let mut slowest = 0.0f64;
    for (seed, size) in sets(ctx) {
        let runs = ctx.compare(seed, size)?;
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

/// The Pearson correlation of two equally long series (`None` when either is constant).
fn correlation(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len().min(y.len()) as f64;
    if n < 3.0 {
        return None;
    }
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let cov: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let vx: f64 = x.iter().map(|a| (a - mx).powi(2)).sum();
    let vy: f64 = y.iter().map(|b| (b - my).powi(2)).sum();
    (vx > 0.0 && vy > 0.0).then(|| cov / (vx * vy).sqrt())
}

/// Fig. 4 / 14: each design's throughput and upcalls in 100 ms samples.
pub fn fig14(ctx: &Ctx) -> Result<Figure, Error> {
    let mut f = ctx.figure("fig14");
    let (seed, size, duration) = match ctx.cfg.mode {
        super::Mode::Quick => ("acl1", "10k", 1.0),
        super::Mode::Full => ("acl1", "100k", 10.0),
    };
    f.header = ["design", "mean Mpps", "lowest sample", "highest sample", "upcalls/s (mean)", "corr(Mpps, upcalls/s)"]
        .map(String::from)
        .to_vec();
    let c = ReplayConfig { duration: Some(duration), ..ctx.replay_config(seed, size) };
    let p = replay::prepare(&c)?;
    let mut orig_corr = None;
    let mut spread = Vec::new();
    let mut runs = Vec::new();
    for d in DesignKind::ALL {
        let r = replay::run_design(&c, &p, d)?;
        count_run(&mut f, &r);
        // The first sample holds the cold start: left out.
        let s: Vec<_> = r.series.iter().skip(1).collect();
        let mpps: Vec<f64> = s.iter().map(|x| x.mpps).collect();
        let up: Vec<f64> = s.iter().map(|x| x.upcalls_per_s).collect();
        let mean = mean(&mpps);
        let (lo, hi) = mpps.iter().fold((f64::INFINITY, 0.0f64), |(l, h), &m| (l.min(m), h.max(m)));
        let corr = correlation(&mpps, &up);
        if d == DesignKind::Orig {
            orig_corr = corr;
        }
        spread.push((d, if mean > 0.0 { (hi - lo) / mean } else { 0.0 }));
        f.rows.push(vec![
            d.name().into(),
            format!("{mean:.3}"),
            format!("{lo:.3}"),
            format!("{hi:.3}"),
            format!("{:.0}", self::mean(&up)),
            corr.map_or("—".into(), |c| format!("{c:.2}")),
        ]);
        runs.push((d.name().to_string(), r));
        f.commands.push(ctx.replay_command_for("replay", seed, size, duration, &format!(" --design {}", d.name())));
    }
    f.panels = series_panels(&runs, "upcalls/s");
    f.claims.push(claim(
        "ORIG's throughput falls when upcalls rise (negative correlation of the 100 ms samples)",
        "directly correlated fluctuations (Fig. 4, 14)",
        orig_corr.map_or("—".into(), |c| format!("{c:.2}")),
        orig_corr.map(|c| c < 0.0),
    ));
    let cflows = spread.iter().find(|s| s.0 == DesignKind::Cflows).map_or(0.0, |s| s.1);
    let orig = spread.iter().find(|s| s.0 == DesignKind::Orig).map_or(0.0, |s| s.1);
    f.claims.push(claim(
        "CFLOWS' throughput is steadier than ORIG's (no upcalls): (highest − lowest sample) / mean",
        "steady (Fig. 14, top)",
        format!("CFLOWS {}, ORIG {}", pct(cflows), pct(orig)),
        Some(cflows < orig),
    ));
    f.notes.push(format!(
        "{seed}_{size}, {duration} s of PMD time per design, its ClassBench trace (the paper: CAIDA-long)."
    ));
    Ok(f)
}

/// Table 1 / Fig. 7a: NuevoMatchUP's bucket size `l` against its training (build) time and
/// lookup time, every lookup of the trace checked against the reference on a sample.
pub fn fig7(ctx: &Ctx) -> Result<Figure, Error> {
    use rqvs_classify::nuevomatch::NuevoMatchConfig;
    use rqvs_classify::{tuplemerge::TupleMerge, NuevoMatchUp, Reference};
    let mut f = ctx.figure("fig7");
    let (seed, size, buckets) = match ctx.cfg.mode {
        super::Mode::Quick => ("ipc2", "10k", vec![8usize, 16, 40, 56]),
        super::Mode::Full => ("ipc2", "500k", vec![8, 16, 24, 32, 40, 48, 56]),
    };
    f.header = ["l", "build with training (ms)", "lookup (ns/packet, batched)", "coverage", "buckets", "index KiB"]
        .map(String::from)
        .to_vec();
    let (rules, keys) = ctx.rules_and_keys(seed, size)?;
    let reference = Reference::build(&rules)?;
    let sample: Vec<usize> = (0..keys.len()).step_by((keys.len() / 1000).max(1)).collect();
    let want: Vec<_> = sample.iter().map(|&i| reference.lookup_rule(&keys[i]).map(|r| r.id)).collect();
    let mut out = vec![None; keys.len()];
    let mut points = Vec::new();
    let mut train = Panel::new("bucket size l", "ms");
    let mut lookup = Panel::new("bucket size l", "ns/packet");
    for &l in &buckets {
        let mut config = NuevoMatchConfig::always_learned();
        config.isets.bucket_size = l;
        let t = std::time::Instant::now();
        let nmu = NuevoMatchUp::build_with(&rules, config, TupleMerge::build)?;
        let build_ms = t.elapsed().as_secs_f64() * 1e3;
        let ns = crate::bench::time_lookups(&nmu, &keys, &mut out, true, std::time::Duration::from_millis(200));
        f.verified += sample.len() as u64;
        f.mismatches += sample.iter().zip(&want).filter(|(&i, w)| out[i] != **w).count() as u64;
        points.push((l, build_ms, ns.median));
        train.point("build with training (ms)", l as f64, build_ms);
        lookup.point("lookup (ns/packet)", l as f64, ns.median);
        f.rows.push(vec![
            l.to_string(),
            format!("{build_ms:.1}"),
            format!("{:.1}", ns.median),
            pct(nmu.coverage()),
            nmu.buckets().to_string(),
            format!("{:.0}", nmu.index_bytes() as f64 / 1024.0),
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
         batches (median of passes over at least 200 ms); 1 of every {} packets checked against the reference.",
        (keys.len() / 1000).max(1)
    ));
    Ok(f)
}

/// Fig. 13: CCACHE with slower retraining (its manager's check interval, `--train-interval`):
/// throughput and the model's coverage of the megaflows.
pub fn fig13(ctx: &Ctx) -> Result<Figure, Error> {
    let mut f = ctx.figure("fig13");
    let (seed, size, duration) = match ctx.cfg.mode {
        super::Mode::Quick => ("fw4", "10k", 1.0),
        super::Mode::Full => ("fw4", "100k", 10.0),
    };
    f.header = ["train interval (s)", "Mpps", "coverage (mean of samples)", "model swaps"].map(String::from).to_vec();
    let mut mpps = Vec::new();
    let mut runs = Vec::new();
    for interval in [0.005, 0.05, 0.5] {
        let c = ReplayConfig { duration: Some(duration), train_interval: interval, ..ctx.replay_config(seed, size) };
        let p = replay::prepare(&c)?;
        let r = replay::run_design(&c, &p, DesignKind::Ccache)?;
        count_run(&mut f, &r);
        let cov = mean(&r.series.iter().map(|s| s.coverage).collect::<Vec<_>>());
        mpps.push(r.mpps);
        f.rows.push(vec![interval.to_string(), format!("{:.3}", r.mpps), pct(cov), r.c.model_swaps.to_string()]);
        f.commands.push(ctx.replay_command_for(
            "replay",
            seed,
            size,
            duration,
            &format!(" --design ccache --train-interval {interval}"),
        ));
        runs.push((format!("every {interval} s"), r));
    }
    f.panels = series_panels(&runs, "coverage");
    f.claims.push(claim(
        "rapid retraining is critical for CCACHE's throughput",
        "higher throughput and hit rate with faster training",
        format!("{:.3} Mpps at 5 ms → {:.3} Mpps at 500 ms", mpps[0], mpps[2]),
        Some(mpps[0] > mpps[2]),
    ));
    f.notes.push(format!(
        "{seed}_{size} (the paper: 9-100K, rule-set 9 = fw4), {duration} s of PMD time; the interval is how \
         often CCACHE's manager checks whether to train (the paper delays training sessions artificially)."
    ));
    Ok(f)
}

/// Table 2: ORIG's upcall rate (megaflow insertions per second) and megaflow count per size,
/// the share of the cache that changes per second, the interval at which a model over the
/// megaflows would need retraining, and how long CCACHE's model actually takes to train.
pub fn table2(ctx: &Ctx) -> Result<Figure, Error> {
    let mut f = ctx.figure("table2");
    f.header = [
        "rules",
        "upcalls/s (ORIG)",
        "megaflows (ORIG)",
        "cache changed per second",
        "retrain every",
        "CCACHE training (ms)",
        "training / interval",
    ]
    .map(String::from)
    .to_vec();
    let mut last_ratio = None;
    for size in ctx.cfg.mode.sizes() {
        let (mut up, mut mf, mut train) = (Vec::new(), Vec::new(), Vec::new());
        for seed in ctx.cfg.mode.seeds() {
            let runs = ctx.compare(seed, size)?;
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

/// Fig. 15: the highest rule-update rate CFLOWS' classifier sustains while its coverage stays
/// at 75% / 90% (`rqvs bench updates` probes, bisected as `scripts/update_rate.py` does).
pub fn fig15(ctx: &Ctx) -> Result<Figure, Error> {
    use crate::updates::{self, UpdateBenchConfig};
    let mut f = ctx.figure("fig15");
    let (seed, size, seconds) = match ctx.cfg.mode {
        super::Mode::Quick => ("acl1", "10k", 2.0),
        super::Mode::Full => ("acl1", "500k", 5.0),
    };
    f.header = [
        "coverage target",
        "sustained updates/s",
        "coverage at the start",
        "min coverage",
        "lookups meanwhile (Mpps)",
        "training sessions",
    ]
    .map(String::from)
    .to_vec();
    let (rules, keys) = ctx.rules_and_keys(seed, size)?;
    let mut sustained = Vec::new();
    for target in [0.75, 0.9] {
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
            let b = updates::run(&cfg, rules.clone(), &keys)?;
            f.verified += b.checked;
            f.mismatches += b.mismatches;
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
        match &best {
            Some((rate, b)) => {
                sustained.push((target, Some(*rate)));
                f.rows.push(vec![
                    pct(target),
                    format!("{rate:.0}"),
                    b.series.first().map_or("—".into(), |s| format!("{:.3}", s.coverage)),
                    format!("{:.3}", min_cov(b)),
                    format!("{:.2}", b.mpps()),
                    b.sessions.to_string(),
                ]);
            }
            None => {
                sustained.push((target, None));
                f.rows.push(vec![pct(target), "not even 1000".into(), "—".into(), "—".into(), "—".into(), "—".into()]);
            }
        }
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
