//! `rqvs compare`: several datapath designs on the same rules and trace, in one process.
//!
//! ```text
//! rqvs compare --rules FILE --trace FILE [--designs orig,ccache,cflows] [replay options]
//!              [--rate-search] [--json OUT] [--csv OUT] [--plot OUT.svg]
//! ```
//!
//! The inputs are loaded once ([`experiment::prepare`]); each design is built and replayed in turn
//! ([`experiment::run_design`]) with the same settings, updates and verification sample, so the
//! designs see identical packets. Speedups are throughput ratios against the first design
//! listed, measured in this one run (ratios from one run survive a noisy machine better than
//! figures from separate runs). Any mismatch in any design fails the command (exit code 1).

use rqvs_experiment::replay as experiment;
use rqvs_experiment::DesignKind;

use crate::replay::{self, Common};
use crate::report::outln;
use crate::Failure;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Designs to run, comma-separated; speedups are against the first.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "orig,ccache,cflows")]
    pub designs: Vec<DesignKind>,
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub prefixes: crate::prefixes::Prefixes,
}

/// Options `rqvs compare` accepts but would not use with the designs and the other options
/// given: usage errors ([`crate::args::Given`]).
pub fn unused(a: &Args, g: &crate::args::Given) -> Result<(), String> {
    g.refuse("pmds", true, "rqvs replay only, for now")?;
    let names: Vec<&str> = a.designs.iter().map(|d| d.name()).collect();
    replay::unused_common(&a.common, &a.designs, &format!("--designs {}", names.join(",")), g)
}

pub fn run(args: &Args) -> Result<(), Failure> {
    args.prefixes.apply();
    let designs = &args.designs;
    if designs.is_empty() {
        return Err(Failure("--designs: expected at least one design".into()));
    }
    let names: Vec<&str> = designs.iter().map(|d| d.name()).collect();
    let c = &args.common;
    if c.pmds != 1 {
        return Err(Failure("--pmds: rqvs replay only, for now".into()));
    }
    replay::no_plot_with_rate_search(c)?;
    let cfg = c.config();
    c.check_outputs()?;
    let out = c.out();
    let p = experiment::prepare(&cfg)?;
    if c.rate_search {
        return rate_search(c, &p, designs);
    }
    let mut runs = Vec::new();
    for &d in designs {
        let r = experiment::run_design_progress(&cfg, &p, d, None, &mut replay::long_run(c, &p, d))?;
        replay::print_run(c, &p, &r);
        outln!(out);
        runs.push(r);
    }
    let base = runs[0].mpps;
    let base_steady = runs[0].steady.map(|s| s.0);
    outln!(
        out,
        "{:<8} {:>10} {:>9} {:>14} {:>9} {:>10} {:>9}  {:>8} {:>8} {:>8} {:>8} {:>8}",
        "design",
        "Mpps",
        "speedup",
        "Mpps(warm)",
        "speedup",
        "mismatch",
        "coverage",
        "emc",
        "megaflow",
        "model",
        "remaind.",
        "upcall"
    );
    for r in &runs {
        let cs = &r.c;
        let sh = |x: u64| x as f64 / cs.received.max(1) as f64;
        let warm = r.steady.map(|s| s.0);
        let warm_speedup = rqvs_experiment::report::steady_speedup(r, base_steady);
        let coverage = r.report.coverage().unwrap_or(0.0);
        outln!(
            out,
            "{:<8} {:>10.3} {:>8.2}x {:>14} {:>9} {:>10} {:>9.4}  {:>7.1}% {:>7.1}% {:>7.1}% {:>7.1}% {:>7.2}%",
            r.design.name(),
            r.mpps,
            r.mpps / base,
            warm.map_or("-".into(), |w| format!("{w:.3}")),
            warm_speedup.map_or("-".into(), |s| format!("{s:.2}x")),
            format!("{}/{}", r.mismatches, r.verified),
            coverage,
            100.0 * sh(cs.emc_hit),
            100.0 * sh(cs.megaflow_hit + cs.cd_hit),
            100.0 * sh(cs.model_hit),
            // The remainder stage's share: its hits and the packets no rule matched (CFLOWS).
            100.0 * sh(cs.remainder_hit + cs.no_match),
            100.0 * sh(cs.upcall + cs.lost),
        );
    }
    if c.attack.is_some() {
        print_attack_table(&out, &runs);
    }
    if let Some(path) = &c.plot {
        let series: Vec<(&str, &[experiment::Sample])> =
            runs.iter().map(|r| (r.design.name(), &r.series[..])).collect();
        crate::plot::compare(path, &replay::plot_title_named(c, &names.join(",")), &series, &runs[0].update_log)?;
    }
    if c.json.is_some() || c.csv.is_some() {
        let o = rqvs_experiment::report::compare_json(&c.config(), &p, &runs)?;
        if let Some(path) = &c.csv {
            crate::report::write_csv(path, &replay::as_rows(o.get("runs").cloned().unwrap_or_default()))?;
        }
        if let Some(out) = &c.json {
            crate::report::write_json(out, "compare", o)?;
        }
    }
    let bad: usize = runs.iter().map(|r| r.mismatches).sum();
    if bad > 0 {
        return Err(Failure(format!("{bad} packets got an action other than the reference's")));
    }
    Ok(())
}

/// `--attack`: each design's benign throughput under the attack (benign packets per second of
/// all PMD time) beside what the attack cost it.
fn print_attack_table(out: &crate::report::Out, runs: &[experiment::Run]) {
    outln!(out);
    outln!(
        out,
        "{:<8} {:>12} {:>12} {:>12} {:>14} {:>14} {:>8} {:>10} {:>12}",
        "design",
        "benign Mpps",
        "benign PMD%",
        "attack PMD%",
        "benign sub/hit",
        "attack upcalls",
        "masks",
        "megaflows",
        "attack mism."
    );
    for r in runs {
        let Some(a) = &r.attack else { continue };
        let total = r.c.pmd_ns.max(1) as f64;
        let per_hit =
            |s: &rqvs_experiment::mixed::StreamStats| s.subtables_per_hit().map_or("-".into(), |v| format!("{v:.2}"));
        outln!(
            out,
            "{:<8} {:>12.3} {:>11.1}% {:>11.1}% {:>14} {:>14} {:>8} {:>10} {:>12}",
            r.design.name(),
            a.benign.packets as f64 / total * 1e3,
            100.0 * a.benign.pmd_ns as f64 / total,
            100.0 * a.attack.pmd_ns as f64 / total,
            per_hit(&a.benign),
            a.attack.upcalls + a.attack.lost,
            r.c.masks,
            r.c.megaflows,
            format!("{}/{}", a.mismatches, a.checks),
        );
    }
}

/// `--rate-search`: the constant-rate search of each design in turn (the paper's method: the
/// highest offered rate with < 1% drops after the warm-up), then their highest rates side by
/// side with the speedups over the first design. A search that finds no passing rate, or one
/// whose rate is only a lower bound (nothing dropped up to its bound), says so in the table.
fn rate_search(c: &Common, p: &experiment::Prepared, designs: &[DesignKind]) -> Result<(), Failure> {
    let out = c.out();
    let mut searches = Vec::new();
    for &d in designs {
        let s = replay::rate_search_printed(c, p, d, None)?;
        outln!(out);
        searches.push((d, s));
    }
    let base = searches.first().filter(|(_, s)| s.passed).map(|(_, s)| s.probe.0);
    outln!(
        out,
        "{:<8} {:>18} {:>12} {:>26} {:>9}",
        "design",
        "unconstrained Mpps",
        "speedup",
        "max rate < 1% drops (Mpps)",
        "speedup"
    );
    let free_base = searches[0].1.free.mpps;
    for (d, s) in &searches {
        let rate = if s.passed {
            format!("{:.3}{}", s.probe.0 / 1e6, if s.at_bound { " (bound)" } else { "" })
        } else {
            "none".to_string()
        };
        let speedup = base.filter(|_| s.passed).map_or("-".to_string(), |b| format!("{:.2}x", s.probe.0 / b));
        outln!(
            out,
            "{:<8} {:>18.3} {:>11.2}x {:>26} {:>9}",
            d.name(),
            s.free.mpps,
            s.free.mpps / free_base,
            rate,
            speedup
        );
    }
    if searches.iter().any(|(_, s)| s.at_bound) {
        outln!(out, "(bound): nothing dropped up to 1.5x the unconstrained rate; the run is too short for the ring to fill: use --duration or more --passes");
    }
    if c.json.is_some() || c.csv.is_some() {
        let o = rqvs_experiment::report::compare_rate_search_json(&c.config(), p, &searches)?;
        if let Some(path) = &c.csv {
            // One row per design; the search's probes are lists, left out of the CSV.
            let rows = o.get("rate_search").cloned().unwrap_or_default();
            crate::report::write_csv(path, &replay::as_rows(rows))?;
        }
        if let Some(path) = &c.json {
            crate::report::write_json(path, "compare", o)?;
        }
    }
    Ok(())
}
