//! Reports as JSON objects: what `--json` writes and the Python package's functions return, built
//! in one place so the two cannot drift apart.
//!
//! - [`envelope`]: the fields every report has (`command`, `schema_version`, `rqvs_version`,
//!   the build's provenance [`BUILD`]: `git_rev`, `git_dirty`, `git_rev_source`,
//!   `build_profile`; `cpu`, `kernel`). The provenance is recorded when the crate is built
//!   (`build.rs`), so a report says which binary made it wherever it runs.
//! - [`run_json`], [`compare_json`], [`pmds_json`]: `rqvs replay` and `rqvs compare`.
//! - [`capture_json`], [`predict_json`]: parts several reports share.
//! - [`csv`]: a report's table (`--csv OUT`) from the same objects as its JSON.
//!
//! `rqvs gen rules` and `rqvs gen trace` build theirs in [`crate::gen`].

use serde_json::{json, Map, Value};

use rqvs_datapath::predict::PredictStats;
use rqvs_flow::formats::pcap::CaptureStats;

use crate::replay::{self, DesignKind, PmdRuns, Prepared, ReplayConfig, Run};
use crate::Error;

/// The CPU model from /proc/cpuinfo, or "unknown".
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// The version of the reports' layout. Bumped when a field of any report is removed or renamed,
/// or changes meaning or unit; fields added leave it alone (readers ignore fields they do not
/// know). README's "JSON reports" section lists the versions.
pub const SCHEMA_VERSION: u32 = 1;

/// Where this build came from, recorded at build time by `build.rs` (never looked up at run time:
/// a report run anywhere carries the revision of the binary that made it).
#[derive(Clone, Copy, Debug)]
pub struct Build {
    /// The git revision (12 hex digits), or `unknown`.
    pub git_rev: &'static str,
    /// Whether the checkout had uncommitted changes to tracked files; `None` when unknown.
    pub git_dirty: Option<bool>,
    /// Where the revision came from (`git checkout at build time`, `.cargo_vcs_info.json (a
    /// packaged crate)`, `RQVS_GIT_REV at build time`), or `unknown: ` and why.
    pub git_rev_source: &'static str,
    /// The cargo profile: `release` or `debug` (cargo's `PROFILE`; `bench` builds say `release`).
    pub profile: &'static str,
}

/// This build's provenance.
pub const BUILD: Build = Build {
    git_rev: env!("RQVS_GIT_REV"),
    git_dirty: match env!("RQVS_GIT_DIRTY").as_bytes() {
        b"true" => Some(true),
        b"false" => Some(false),
        _ => None,
    },
    git_rev_source: env!("RQVS_GIT_REV_SOURCE"),
    profile: env!("RQVS_BUILD_PROFILE"),
};

/// What `rqvs --version` prints after the name: the version, revision, dirty flag and profile
/// (`0.1.0 (git 1a2b3c4d5e6f, dirty, release build)`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("RQVS_GIT_REV"),
    ", dirty: ",
    env!("RQVS_GIT_DIRTY"),
    ", ",
    env!("RQVS_BUILD_PROFILE"),
    " build; revision from ",
    env!("RQVS_GIT_REV_SOURCE"),
    ")"
);

/// `fields` with what every report carries: `command`, `schema_version`, `rqvs_version`, the
/// build's provenance (`git_rev`, `git_dirty`, `git_rev_source`, `build_profile`), `cpu` and the
/// learned index's SIMD `kernel`.
pub fn envelope(command: &str, mut fields: Map<String, Value>) -> Map<String, Value> {
    fields.insert("command".into(), command.into());
    fields.insert("schema_version".into(), SCHEMA_VERSION.into());
    fields.insert("rqvs_version".into(), env!("CARGO_PKG_VERSION").into());
    fields.insert("git_rev".into(), BUILD.git_rev.into());
    fields.insert("git_dirty".into(), json!(BUILD.git_dirty));
    fields.insert("git_rev_source".into(), BUILD.git_rev_source.into());
    fields.insert("build_profile".into(), BUILD.profile.into());
    fields.insert("cpu".into(), cpu_model().into());
    fields.insert("kernel".into(), rqvs_rqrmi::Kernel::active().name().into());
    fields
}

/// A report's table as CSV (RFC 4180, `\n` line ends): one row per object of `rows`, one
/// column per field in the order fields first appear (a JSON object's fields in key order);
/// nested objects become `parent.child`
/// columns, arrays are left out (a CSV cell holds one value), `null` is an empty cell. What `--csv
/// OUT` writes, from the same objects as the JSON report's table, so the two cannot disagree.
pub fn csv(rows: &[Value]) -> String {
    fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let name = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                    flatten(&name, x, out);
                }
            }
            Value::Array(_) => {}
            Value::Null => out.push((prefix.to_string(), String::new())),
            Value::String(s) => out.push((prefix.to_string(), s.clone())),
            other => out.push((prefix.to_string(), other.to_string())),
        }
    }
    fn cell(s: &str) -> String {
        if s.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    }
    let flat: Vec<Vec<(String, String)>> = rows
        .iter()
        .map(|r| {
            let mut f = Vec::new();
            flatten("", r, &mut f);
            f
        })
        .collect();
    let mut columns: Vec<&str> = Vec::new();
    for (k, _) in flat.iter().flatten() {
        if !columns.contains(&k.as_str()) {
            columns.push(k);
        }
    }
    let mut text = columns.iter().map(|c| cell(c)).collect::<Vec<_>>().join(",");
    text.push('\n');
    for row in &flat {
        let line: Vec<String> = columns
            .iter()
            .map(|c| row.iter().find(|(k, _)| k == c).map_or_else(String::new, |(_, v)| cell(v)))
            .collect();
        text.push_str(&line.join(","));
        text.push('\n');
    }
    text
}

/// A capture's statistics.
pub fn capture_json(c: &CaptureStats) -> Value {
    json!({
        "frames": c.frames, "ipv4": c.ipv4, "other": c.other, "truncated": c.truncated,
        "malformed": c.malformed,
    })
}

/// A flow predictor's counters.
pub fn predict_json(s: &PredictStats) -> Value {
    json!({
        "observed": s.observed, "triggers": s.triggers, "proposed": s.proposed,
        "rate_limited": s.rate_limited, "predicted": s.predicted, "already": s.already,
        "refused": s.refused, "used": s.used, "wasted": s.wasted, "outstanding": s.outstanding,
        "signatures": s.signatures, "templates": s.templates,
    })
}

/// The predictor's counters, wasted ratio and share of PMD time (`null` when prediction is off).
fn prediction_json(r: &Run) -> Value {
    let Some((_, s)) = &r.prediction else { return Value::Null };
    let mut v = predict_json(s);
    v["wasted_ratio"] = json!(s.wasted_ratio());
    v["share_predict"] = json!(r.c.predict_ns as f64 / r.c.pmd_ns.max(1) as f64);
    v
}

/// A mixed replay's streams (`null` without `--attack`): the attack's rate, arrivals, ring
/// drops and verification, and per stream its packets and their costs
/// ([`crate::mixed::StreamStats`]) with `mpps`, the stream's packets per second of all PMD time
/// (the benign throughput under attack).
fn attack_json(c: &ReplayConfig, r: &Run) -> Value {
    let Some(a) = &r.attack else { return Value::Null };
    let total = r.c.pmd_ns.max(1) as f64;
    let stream = |s: &crate::mixed::StreamStats| {
        let mut v = serde_json::to_value(s).unwrap_or(Value::Null);
        v["mpps"] = json!(s.packets as f64 / total * 1e3);
        v["share_pmd"] = json!(s.pmd_ns as f64 / total);
        v["ns_per_packet"] = json!(s.ns_per_packet());
        v["subtables_per_hit"] = json!(s.subtables_per_hit());
        v
    };
    json!({
        "file": c.attack.as_ref().map(|p| p.display().to_string()),
        "rate_pps": a.rate,
        "offered": a.offered,
        "ring_dropped": a.ring_dropped,
        "policing": c.attack_policing.map(|s| json!({"kpps": s.kpps, "burst_kpkts": s.burst_kpkts})),
        "policed": a.policed,
        "waiting": a.waiting,
        "verified": a.checks,
        "mismatches": a.mismatches,
        "benign": stream(&a.benign),
        "attack": stream(&a.attack),
    })
}

/// One replay run (`rqvs replay --json`'s fields, before the [`envelope`]).
pub fn run_json(c: &ReplayConfig, p: &Prepared, r: &Run) -> Result<Map<String, Value>, Error> {
    let cs = &r.c;
    let pmd_s = cs.pmd_ns as f64 / 1e9;
    let share = |ns: u64| ns as f64 / cs.pmd_ns.max(1) as f64;
    let counters: Map<String, Value> = cs.fields().into_iter().map(|(k, v)| (k.to_string(), v.into())).collect();
    let report: Map<String, Value> = r.report.fields().iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    let mut o = Map::new();
    for (k, val) in [
        ("rules_file", json!(c.rules_name())),
        ("trace_file", json!(c.trace_name())),
        ("design", json!(r.design.name())),
        ("cd", json!(c.cd)),
        ("emc", json!(c.emc)),
        ("emc_prob", json!(c.emc_prob)),
        ("emc_entries", json!(c.emc_entries)),
        ("policy", json!(c.policy.name())),
        ("rules", json!(p.all_rules.len())),
        ("trace_packets", json!(p.packets)),
        ("build_ms", json!(r.build_ms)),
        ("packets", json!(cs.received)),
        ("pmd_s", json!(pmd_s)),
        ("mpps", json!(r.mpps)),
        ("ns_per_packet", json!(cs.pmd_ns as f64 / cs.received as f64)),
        ("mpps_after_first_pass", json!(r.steady.map(|s| s.0))),
        ("share_megaflow_after_first_pass", json!(r.steady.map(|s| s.1))),
        ("share_emc", json!(share(cs.emc_ns))),
        ("share_megaflow", json!(share(cs.dpcls_ns))),
        ("share_model", json!(share(cs.model_ns))),
        ("share_upcall", json!(share(cs.upcall_ns))),
        ("share_revalidator", json!(share(cs.reval_ns))),
        ("avg_subtables_per_hit", json!(cs.avg_subtables_per_hit())),
        ("avg_batch", json!(r.avg_batch())),
        ("coverage", json!(replay::coverage(cs))),
        ("verified", json!(r.verified)),
        ("mismatches", json!(r.mismatches)),
        ("stale_checks", json!(r.stale_checks)),
        ("revalidator", json!(c.revalidator.name())),
        ("mask_limit", json!(c.mask_limit.filter(|_| r.design != DesignKind::Cflows))),
        (
            "mask_eviction",
            json!(c.mask_limit.filter(|_| r.design != DesignKind::Cflows).map(|_| c.mask_eviction.name())),
        ),
        ("mfcguard_s", json!(c.mfcguard.filter(|_| r.design != DesignKind::Cflows))),
        ("classifier", json!((r.design == DesignKind::Cflows).then(|| c.classifier.name()))),
        ("counters", Value::Object(counters)),
        ("design_report", Value::Object(report)),
        ("updates", json!(r.update_log)),
        ("updates_not_reached", json!(r.updates_not_reached)),
        ("series", serde_json::to_value(&r.series)?),
        ("seed", json!(c.seed)),
        ("rate", json!(c.rate)),
        ("rx_offered", json!(r.rx.map(|x| x.offered))),
        ("rx_dropped", json!(r.rx.map(|x| x.dropped))),
        ("drop_rate_after_warmup", json!(r.rx.map(|x| x.drop_rate()))),
        ("predict", json!(r.prediction.as_ref().map_or("off", |p| p.0))),
        ("prediction", prediction_json(r)),
        ("auto", auto_json(r)),
        ("latency_after_warmup", r.latency.as_ref().map_or(Value::Null, |l| l.json())),
        ("attack", attack_json(c, r)),
    ] {
        o.insert(k.to_string(), val);
    }
    Ok(o)
}

/// `--design auto`'s report: `design_switches`, the time in each design, the design at the end,
/// every switch with its reason, and `settings`: the thresholds in force that are not the
/// defaults, as `--auto` writes them (`null` for a fixed design).
pub fn auto_json(r: &Run) -> Value {
    let Some(a) = &r.auto else { return Value::Null };
    let mut o: Map<String, Value> = a.fields().into_iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    o.insert("design_switches".into(), json!(a.design_switches));
    o.insert("candidates_abandoned".into(), json!(a.abandoned));
    o.insert("current".into(), json!(a.current.name()));
    let settings: Map<String, Value> = a.settings.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    o.insert("settings".into(), Value::Object(settings));
    let log: Vec<Value> = a
        .log
        .iter()
        .map(|e| {
            json!({
                "at_s": e.at_ns as f64 / 1e9, "from": e.from_name(), "to": e.to_name(), "reason": e.reason,
                "ready_ms": e.ready_ns as f64 / 1e6, "preinstalled": e.preinstalled,
            })
        })
        .collect();
    o.insert("switches".into(), Value::Array(log));
    Value::Object(o)
}

/// Several designs' runs on the same prepared inputs (`rqvs compare --json`'s fields): the
/// designs, and each run with its speedups over the first.
/// `replay --rate-search --json`: the run of the last probe (at its rate), with the highest rate
/// that had < 1% drops (`null` when even the lowest probe dropped more) and the unconstrained Mpps.
pub fn rate_search_json(
    c: &ReplayConfig,
    p: &Prepared,
    s: &crate::replay::RateSearch,
) -> Result<Map<String, Value>, Error> {
    let (rate, run) = &s.probe;
    let mut o = run_json(&ReplayConfig { rate: Some(*rate), ..c.clone() }, p, run)?;
    o.insert("max_rate_below_1pct_drops".into(), if s.passed { json!(rate) } else { Value::Null });
    o.insert("unconstrained_mpps".into(), json!(s.free.mpps));
    o.insert("rate_at_search_bound".into(), json!(s.at_bound));
    Ok(o)
}

/// `compare --rate-search --json`: `compare_json` of the unconstrained runs, and per design its
/// rate search (`rate_search_json`) with `max_rate_speedup`, the highest rate's ratio to the
/// first design's (`null` where either search failed).
pub fn compare_rate_search_json(
    c: &ReplayConfig,
    p: &Prepared,
    searches: &[(DesignKind, crate::replay::RateSearch)],
) -> Result<Map<String, Value>, Error> {
    let mut o = compare_json(c, p, searches.iter().map(|(_, s)| &s.free))?;
    let base = searches.first().filter(|(_, s)| s.passed).map(|(_, s)| s.probe.0);
    let mut rows = Vec::new();
    for (_, s) in searches {
        let mut r = rate_search_json(c, p, s)?;
        let speedup = base.filter(|_| s.passed).map(|b| s.probe.0 / b);
        r.insert("max_rate_speedup".into(), json!(speedup));
        rows.push(Value::Object(r));
    }
    o.insert("rate_search".into(), Value::Array(rows));
    Ok(o)
}

pub fn compare_json<'a>(
    c: &ReplayConfig,
    p: &Prepared,
    runs: impl IntoIterator<Item = &'a Run>,
) -> Result<Map<String, Value>, Error> {
    let runs: Vec<&Run> = runs.into_iter().collect();
    let base = runs.first().map_or(1.0, |r| r.mpps);
    let base_steady = runs.first().and_then(|r| r.steady.map(|s| s.0));
    let mut rows = Vec::new();
    for &r in &runs {
        let mut o = run_json(c, p, r)?;
        o.insert("speedup".into(), json!(r.mpps / base));
        o.insert("speedup_after_first_pass".into(), json!(steady_speedup(r, base_steady)));
        rows.push(Value::Object(o));
    }
    let names: Vec<&str> = runs.iter().map(|r| r.design.name()).collect();
    let mut o = Map::new();
    o.insert("designs".into(), json!(names));
    o.insert("runs".into(), Value::Array(rows));
    Ok(o)
}

/// A run's throughput after the first pass over the first design's (`None` with one pass).
pub fn steady_speedup(r: &Run, base_steady: Option<f64>) -> Option<f64> {
    r.steady.map(|s| s.0).zip(base_steady).map(|(a, b)| a / b)
}

/// A replay over several PMDs (`rqvs replay --pmds N --json`'s fields).
pub fn pmds_json(c: &ReplayConfig, p: &Prepared, design: DesignKind, r: &PmdRuns) -> Result<Map<String, Value>, Error> {
    let mut o = Map::new();
    o.insert("design".into(), design.name().into());
    o.insert("pmds".into(), r.runs.len().into());
    o.insert("packets".into(), r.packets.into());
    o.insert("mpps".into(), json!(r.mpps));
    o.insert("mismatches".into(), r.mismatches().into());
    let runs = r.runs.iter().map(|x| run_json(c, p, x).map(Value::Object)).collect::<Result<Vec<_>, _>>()?;
    o.insert("runs".into(), Value::Array(runs));
    Ok(o)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn csv_of_a_table() {
        let rows = [
            json!({"name": "tss", "mpps": 1.5, "stats": {"tuples": 3}, "series": [1, 2], "peer": null}),
            json!({"name": "a,\"b\"", "mpps": 2, "extra": true}),
        ];
        assert_eq!(super::csv(&rows), "mpps,name,peer,stats.tuples,extra\n1.5,tss,,3,\n2,\"a,\"\"b\"\"\",,,true\n");
        assert_eq!(super::csv(&[]), "\n");
    }
}
