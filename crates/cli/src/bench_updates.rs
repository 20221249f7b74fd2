//! `rqvs bench updates`: NuevoMatchUP looking packets up while rules change under it — the
//! command line over [`rqvs_experiment::updates`].
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

use std::path::PathBuf;

use rqvs_experiment::updates::{self, UpdateBenchConfig};
use rqvs_flow::FlowKey;
use serde_json::{json, Map};

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
    /// Updates per second (half inserts, half removals) [range: 1 ≤ x ≤ 100000000].
    #[arg(long, default_value_t = 10_000, value_parser = crate::args::range::between(1u64, 100_000_000))]
    pub rate: u64,
    /// When inserted rules become visible.
    #[arg(long, value_enum, default_value_t = PolicyArg::Instant)]
    pub policy: PolicyArg,
    /// Retrain when the rules inserted into the remainder since the last model exceed this
    /// share of all rules [range: 0 ≤ x ≤ 1].
    #[arg(long, alias = "threshold", default_value_t = 0.1, value_parser = crate::args::range::share())]
    pub retrain_threshold: f64,
    /// Duration of the run, in seconds [range: 0 < x ≤ 86400].
    #[arg(long, default_value_t = 5.0, value_parser = crate::args::range::above(0.0, 86_400.0))]
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
    /// Write the time series (one row per 100 ms, the JSON's `series`) as CSV to this file
    /// (`-` = stdout).
    #[arg(long)]
    pub csv: Option<PathBuf>,
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

pub fn run(a: &Args) -> Result<(), Failure> {
    let out = Out::with_csv(a.json.as_deref(), a.csv.as_deref())?;
    let rules = inputs::load_rules(a.rules.as_deref())?;
    let packets = inputs::load_packets(a.trace.as_deref(), 1)?;
    let keys: Vec<FlowKey> = packets.entries.iter().map(|e| e.key).collect();
    let cfg = UpdateBenchConfig {
        rate: a.rate,
        policy: a.policy.policy(),
        retrain_threshold: a.retrain_threshold,
        seconds: a.seconds,
        insert_slack: a.insert_slack.0,
        seed: a.seed,
    };
    let b = updates::run(&cfg, rules, &keys)?;
    let t = &b.totals;
    out.line(format!(
        "rules {}: {} live + {} held out; packets {}: {}; policy {:?}, threshold {}, insert slack {}, first build {:.1} ms",
        report::show(&a.rules, DEFAULT_RULES_NAME),
        b.live_rules,
        b.held,
        report::show(&a.trace, DEFAULT_TRACE_NAME),
        keys.len(),
        a.policy,
        a.retrain_threshold,
        a.insert_slack.0.map_or("none (inserts into the remainder)".to_string(), |n| n.to_string()),
        b.first_build.as_secs_f64() * 1e3
    ));
    out.line(format!(
        "{:.1} s: {:.3} Mpps lookups, {:.0} updates/s applied (asked {}), {} training sessions (mean {:.1} ms), coverage now {:.3} (min {:.3})",
        b.elapsed_s,
        b.mpps(),
        t.updates as f64 / b.elapsed_s,
        a.rate,
        b.sessions,
        b.mean_train_ms,
        b.coverage,
        b.min_coverage,
    ));
    out.line(format!(
        "lookup thread: lookups {:.0}%, updates {:.0}% ({:.2} us each), poll {:.1}%, the rest {:.0}%; inserts into buckets {} / remainder {} (of the {} fresh rules' first inserts, {} into buckets)",
        100.0 * b.share(t.lookup),
        100.0 * b.share(t.update),
        b.update_us(),
        100.0 * b.share(t.poll),
        100.0 * (1.0 - b.share(t.lookup + t.update + t.poll)),
        b.into_isets,
        b.into_remainder,
        b.fresh_inserts,
        b.fresh_into_buckets,
    ));
    if b.sessions > 0 {
        out.line(format!(
            "sessions: longest pause of the lookup thread to start one {:.1} ms, to swap one in {:.1} ms",
            b.max_start_ms, b.max_swap_ms
        ));
    }
    out.line(format!(
        "checked {} lookups against the visible rules after the run ({:.1} s): {} mismatches",
        b.checked, b.verify_s, b.mismatches
    ));
    if let Some(path) = &a.csv {
        report::write_csv(path, &crate::replay::as_rows(serde_json::to_value(&b.series)?))?;
    }
    if let Some(path) = &a.json {
        let mut f = Map::new();
        f.insert("rules_file".into(), report::show(&a.rules, DEFAULT_RULES_NAME).into());
        f.insert("trace_file".into(), report::show(&a.trace, DEFAULT_TRACE_NAME).into());
        f.insert("policy".into(), a.policy.name().into());
        f.insert("rate".into(), a.rate.into());
        f.insert("threshold".into(), json!(a.retrain_threshold));
        f.insert("insert_slack".into(), json!(a.insert_slack.0));
        f.insert("seconds".into(), json!(b.elapsed_s));
        f.insert("first_build_ms".into(), json!(b.first_build.as_secs_f64() * 1e3));
        f.insert("packets".into(), t.packets.into());
        f.insert("mpps".into(), json!(b.mpps()));
        f.insert("lookup_share".into(), json!(b.share(t.lookup)));
        f.insert("update_share".into(), json!(b.share(t.update)));
        f.insert("update_us".into(), json!(b.update_us()));
        f.insert("poll_share".into(), json!(b.share(t.poll)));
        f.insert("inserts_into_buckets".into(), b.into_isets.into());
        f.insert("inserts_into_remainder".into(), b.into_remainder.into());
        f.insert("fresh_inserts".into(), b.fresh_inserts.into());
        f.insert("fresh_inserts_into_buckets".into(), b.fresh_into_buckets.into());
        f.insert("updates".into(), t.updates.into());
        f.insert("sessions".into(), b.sessions.into());
        f.insert("mean_train_ms".into(), json!(b.mean_train_ms));
        f.insert("max_start_ms".into(), json!(b.max_start_ms));
        f.insert("max_swap_ms".into(), json!(b.max_swap_ms));
        f.insert("min_coverage".into(), json!(b.min_coverage));
        f.insert("checked".into(), b.checked.into());
        f.insert("mismatches".into(), b.mismatches.into());
        f.insert("seed".into(), a.seed.into());
        f.insert("series".into(), serde_json::to_value(&b.series)?);
        report::write_json(path, "bench updates", f)?;
    }
    if b.mismatches > 0 {
        return Err(Failure(format!("{} mismatches against the visible rules", b.mismatches)));
    }
    Ok(())
}
