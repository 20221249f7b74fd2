//! `rqvs bench openflow`: flow-mods through the OpenFlow channel into a running switch while
//! traffic flows, and a bundle's time to become visible — the command line over
//! [`rqvs_switch::bench`] (its docs say what is measured and how every frame is checked).

use std::path::PathBuf;

use rqvs_datapath::DesignKind;
use rqvs_flow::convert::classbench_to_openflow;
use rqvs_flow::{Actions, FlowKey};
use rqvs_switch::bench::{self, BenchSetup};
use serde_json::{json, Map};

use crate::report::{self, Out};
use crate::Failure;
use rqvs_experiment::inputs::{self, DEFAULT_RULES_NAME, DEFAULT_TRACE_NAME};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Rule file, ClassBench or ovs-ofctl flows (converted to OpenFlow flows either way;
    /// default: embedded acl1_1k).
    #[arg(long)]
    pub rules: Option<PathBuf>,
    /// Packets (default: embedded acl1_1k trace).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Designs, comma-separated, run one after the other.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "orig,ccache,cflows")]
    pub design: Vec<DesignKind>,
    /// Share of the flows held out and streamed in and out [range: 0 < x < 1 (ends excluded)].
    #[arg(long, default_value_t = 0.1)]
    pub flux: f64,
    /// Flow-mods in the stream (rounded up to whole add and delete passes over the held-out
    /// flows) [range: 1 ≤ x ≤ 100000000].
    #[arg(long, default_value_t = 200_000, value_parser = crate::args::range::between(1usize, 100_000_000))]
    pub flow_mods: usize,
    /// A BARRIER_REQUEST after this many flow-mods [range: 1 ≤ x ≤ 100000000].
    #[arg(long, default_value_t = 1000, value_parser = crate::args::range::between(1usize, 100_000_000))]
    pub barrier_every: usize,
    /// Flows in the bundle after the stream (0: none) [range: 0 ≤ x ≤ 10000000].
    #[arg(long, default_value_t = 0, value_parser = crate::args::range::between(0usize, 10_000_000))]
    pub bundle: usize,
    /// PMD threads [range: 1 ≤ x ≤ 64].
    #[arg(long, default_value_t = 1, value_parser = crate::args::range::between(1usize, 64))]
    pub pmds: usize,
    /// Seed of the held-out choice.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write a JSON report to this file (`-` = stdout).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the table (one row per design, the JSON's `designs`) as CSV to this file (`-` =
    /// stdout).
    #[arg(long)]
    pub csv: Option<PathBuf>,
}

pub fn run(a: &Args) -> Result<(), Failure> {
    if !(a.flux > 0.0 && a.flux < 1.0) {
        return Err(Failure(format!("--flux {}: expected a share strictly between 0 and 1", a.flux)));
    }
    if a.pmds == 0 || a.pmds > 64 {
        return Err(Failure(format!("--pmds {}: expected 1..64", a.pmds)));
    }
    if a.flow_mods == 0 || a.barrier_every == 0 {
        return Err(Failure("--flow-mods and --barrier-every must be at least 1".into()));
    }
    let out = Out::with_csv(a.json.as_deref(), a.csv.as_deref())?;
    let rules = inputs::load_rules(a.rules.as_deref())?;
    let conv = classbench_to_openflow(&rules, &Actions(Vec::new())).map_err(Failure)?;
    if a.bundle >= conv.flows.len() {
        return Err(Failure(format!("--bundle {}: the table has only {} flows", a.bundle, conv.flows.len())));
    }
    let packets = inputs::load_packets(a.trace.as_deref(), 1)?;
    let keys: Vec<FlowKey> = packets.entries.iter().map(|e| e.key).collect();
    out.line(format!(
        "rules {}: {} flows ({} rules converted, {} skipped); packets {}: {}; CPU {}",
        report::show(&a.rules, DEFAULT_RULES_NAME),
        conv.flows.len(),
        conv.converted,
        conv.skipped.len(),
        report::show(&a.trace, DEFAULT_TRACE_NAME),
        keys.len(),
        report::cpu_model()
    ));
    let mut rows = Vec::new();
    let mut mismatches = 0;
    for &design in &a.design {
        let setup = BenchSetup {
            design,
            flows: conv.flows.clone(),
            keys: keys.clone(),
            flux: a.flux,
            flow_mods: a.flow_mods,
            barrier_every: a.barrier_every,
            bundle: a.bundle,
            pmds: a.pmds,
            seed: a.seed,
        };
        let r = bench::run(&setup, &mut |s| rqvs_switch::diag!("rqvs bench openflow: {}: {s}", design.name()))
            .map_err(|e| Failure(e.to_string()))?;
        out.line(format!(
            "{:<6} {} flow-mods over {} held-out flows in {:.2} s: {:.0} flow-mods/s ({} errors), traffic {:.3} Mpps meanwhile, coverage after {}; frames checked {} exact + {} during updates: {} mismatches ({} dropped){}",
            r.design,
            r.flow_mods,
            r.held_out,
            r.stream_s,
            r.flow_mods_per_s,
            r.errors,
            r.pps_during_stream / 1e6,
            r.coverage_after_stream.map_or("-".to_string(), |c| format!("{:.1}%", c * 100.0)),
            r.frames_exact,
            r.frames_during,
            r.mismatches,
            r.dropped,
            cpu_split(r.connection_cpu_us, r.manager_cpu_us),
        ));
        if let Some(b) = &r.bundle {
            out.line(format!(
                "       bundle of {}: sent in {:.3} s, commit answered in {:.3} s, first frame by a bundled flow {} after the commit; coverage after {}",
                b.flows,
                b.send_s,
                b.commit_s,
                b.visible_s.map_or("never (within 5 s)".to_string(), |v| format!("{v:.3} s")),
                b.coverage_after.map_or("-".to_string(), |c| format!("{:.1}%", c * 100.0)),
            ));
        }
        mismatches += r.mismatches;
        rows.push(r);
    }
    if let Some(path) = &a.csv {
        report::write_csv(path, &crate::replay::as_rows(serde_json::to_value(&rows)?))?;
    }
    if let Some(path) = &a.json {
        let mut f = Map::new();
        f.insert("rules_file".into(), report::show(&a.rules, DEFAULT_RULES_NAME).into());
        f.insert("trace_file".into(), report::show(&a.trace, DEFAULT_TRACE_NAME).into());
        f.insert("flux".into(), json!(a.flux));
        f.insert("barrier_every".into(), a.barrier_every.into());
        f.insert("seed".into(), a.seed.into());
        f.insert("designs".into(), serde_json::to_value(&rows)?);
        report::write_json(path, "bench openflow", f)?;
    }
    if mismatches > 0 {
        return Err(Failure(format!("{mismatches} mismatches (frames checked against the reference)")));
    }
    Ok(())
}

/// "; CPU per flow-mod: connection X µs, manager Y µs", as much of it as was measured.
fn cpu_split(connection: Option<f64>, manager: Option<f64>) -> String {
    let parts: Vec<String> = [("connection", connection), ("manager", manager)]
        .into_iter()
        .filter_map(|(who, us)| us.map(|us| format!("{who} {us:.2} µs")))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("; CPU per flow-mod: {}", parts.join(", "))
    }
}
