//! `rqvs gen`: workloads — ClassBench-compatible rules, traces, capture mapping, update streams,
//! coflows (`crate::coflows`).
//! The algorithms live in `rqvs-workload`; this module is arguments, files and reports.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::ValueEnum;
use rqvs_flow::formats::{classbench, ofctl, pcap, trace as cbtrace};
use rqvs_flow::{Actions, FlowKey};
use rqvs_workload::trace::{Locality, Mode};
use rqvs_workload::{map, rules, seedfile, stats, trace, updates};
use serde_json::{json, Map, Value};

use crate::report::{self, Out};
use crate::Failure;
use rqvs_experiment::inputs;

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// A ClassBench-compatible rule-set from a seed (parameter) file.
    Rules(RulesArgs),
    /// A header trace for a rule-set: intended rule recorded, true winner computed.
    Trace(TraceArgs),
    /// Map the 5-tuples of a real capture onto a rule-set, keeping order and timing.
    Map(MapArgs),
    /// An update stream (insert:remove:modify) from a held-out part of a rule-set.
    Updates(UpdatesArgs),
    /// A coflow workload (pcap with timestamps), its OpenFlow rules and ground truth.
    Coflows(crate::coflows::GenArgs),
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum RulesFormat {
    Classbench,
    Ofctl,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum TraceFormat {
    Classbench,
    Pcap,
}

#[derive(clap::Args, Debug)]
pub struct RulesArgs {
    /// acl1..acl5, fw1..fw5, ipc1, ipc2 (looked up in $RQVS_CLASSBENCH_DIR/parameter_files or
    /// ../shared/data/classbench/parameter_files) or the path of a seed file.
    #[arg(long)]
    pub seed_file: String,
    /// Target number of rules (duplicates are removed, so the set may be smaller) [range: 1 ≤ x ≤
    /// 10000000: every rule is held in memory to remove duplicates].
    #[arg(long, value_parser = crate::args::range::between(1usize, rules::MAX_COUNT))]
    pub count: usize,
    #[arg(long, default_value_t = 1)]
    pub rng_seed: u64,
    #[arg(long, value_enum, default_value = "classbench")]
    pub format: RulesFormat,
    /// Address scope (positive: shorter prefixes) [range: −1 ≤ x ≤ 1].
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true, value_parser = crate::args::range::between(-1.0, 1.0))]
    pub addr_scope: f64,
    /// Port scope (positive: wider port classes) [range: −1 ≤ x ≤ 1].
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true, value_parser = crate::args::range::between(-1.0, 1.0))]
    pub port_scope: f64,
    /// Turn off the skew scaling with set size (the original's -b, on by default).
    #[arg(long)]
    pub no_scale_skew: bool,
    /// ClassBench smoothing 0..=64: spread each prefix-length spike binomially over lengths up to
    /// this far (Manhattan distance in source/destination length); 0 = the seed's exact lengths
    /// [range: 0 ≤ x ≤ 64].
    #[arg(long, default_value_t = 0, value_parser = crate::args::range::between(0u32, 64))]
    pub smoothing: u32,
    /// Output file (default: stdout).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Compare the statistics with this rule file (e.g. a real ClassBench set).
    #[arg(long)]
    pub compare: Option<PathBuf>,
    /// Write a JSON report to this file (`-` = stdout; then give --output).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct TraceArgs {
    /// Rule file (ClassBench or ofctl, plain or .xz).
    #[arg(long)]
    pub rules: PathBuf,
    /// Packets to generate [range: 1 ≤ x ≤ 10000000: every packet is held in memory to count
    /// flows and true winners].
    #[arg(long, value_parser = crate::args::range::between(1usize, trace::MAX_PACKETS))]
    pub packets: usize,
    /// pareto:A,B | zipf:S | zipf:S,FLOWS | uniform.
    #[arg(long, default_value = "pareto:1,0.1")]
    pub locality: String,
    #[arg(long, default_value_t = 1)]
    pub rng_seed: u64,
    #[arg(long, value_enum, default_value = "classbench")]
    pub format: TraceFormat,
    /// Draw each field at a corner of the rule (the original generator) instead of inside it.
    #[arg(long)]
    pub corner: bool,
    /// Most packets one header may have, as a share of the trace (1 = no cap) [range: 0 < x ≤ 1].
    #[arg(long, default_value_t = 0.05, value_parser = crate::args::range::share_nonzero())]
    pub max_share: f64,
    /// Longest burst (default: the per-header cap) [range: 1 ≤ x ≤ 10000000].
    #[arg(long, value_parser = crate::args::range::between(1usize, trace::MAX_PACKETS))]
    pub max_burst: Option<usize>,
    /// Print flow-size statistics.
    #[arg(long)]
    pub stats: bool,
    /// Output file (default: stdout for classbench; required for pcap).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct MapArgs {
    #[arg(long)]
    pub rules: PathBuf,
    /// The capture to map (pcap or pcapng, plain or .xz).
    #[arg(long)]
    pub pcap: PathBuf,
    /// Output pcap.
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long, default_value_t = 1)]
    pub rng_seed: u64,
    /// Set SYN on every TCP packet (as NSDI'22 did), unless its rule requires SYN clear.
    #[arg(long)]
    pub syn: bool,
    /// Headers tried per flow before it counts as unplaced [range: 1 ≤ x ≤ 1000000].
    #[arg(long, default_value_t = 16, value_parser = crate::args::range::between(1usize, 1_000_000))]
    pub attempts: usize,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct UpdatesArgs {
    /// Rule file (ClassBench; the stream carries ClassBench rules).
    #[arg(long)]
    pub rules: PathBuf,
    /// Share of the rules held out of the initial table [range: 0 < x ≤ 1].
    #[arg(long, value_parser = crate::args::range::share_nonzero())]
    pub fraction: f64,
    /// insert:remove:modify weights.
    #[arg(long, default_value = "1:1:0")]
    pub mix: String,
    /// Number of operations (default: the number of held-out rules) [range: 1 ≤ x ≤ 10000000].
    #[arg(long, value_parser = crate::args::range::between(1usize, updates::MAX_OPS))]
    pub ops: Option<usize>,
    #[arg(long, default_value_t = 1)]
    pub rng_seed: u64,
    /// Output file (default: stdout).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub fn run(cmd: &Command) -> Result<(), Failure> {
    match cmd {
        Command::Rules(a) => gen_rules(a),
        Command::Trace(a) => gen_trace(a),
        Command::Map(a) => gen_map(a),
        Command::Updates(a) => gen_updates(a),
        Command::Coflows(a) => crate::coflows::gen(a),
    }
}

fn emit(output: Option<&Path>, json: &Option<PathBuf>, bytes: &[u8]) -> Result<(), Failure> {
    match output {
        Some(p) => std::fs::write(p, bytes).map_err(|e| Failure(format!("{}: cannot write: {e}", p.display()))),
        None => {
            if json.as_deref() == Some(Path::new("-")) {
                return Err(Failure("--json - writes the report to stdout: give --output for the data".into()));
            }
            {
                crate::report::stdout(bytes);
                Ok(())
            }
        }
    }
}

fn stats_json(s: &stats::RuleStats) -> Value {
    json!({
        "rules": s.rules,
        "src_len": s.src_len,
        "dst_len": s.dst_len,
        "sport_class": stats::PORT_CLASSES.iter().zip(&s.sport_class).map(|(k, v)| (k.to_string(), json!(v))).collect::<Map<_, _>>(),
        "dport_class": stats::PORT_CLASSES.iter().zip(&s.dport_class).map(|(k, v)| (k.to_string(), json!(v))).collect::<Map<_, _>>(),
        "protocols": s.protocols.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<Map<_, _>>(),
        "flags_matched": s.flags_matched,
        "tuples": s.tuples,
        "src_prefixes": s.src_prefixes,
        "dst_prefixes": s.dst_prefixes,
    })
}

fn gen_rules(a: &RulesArgs) -> Result<(), Failure> {
    let out = Out::new(a.json.as_deref());
    let seed = seedfile::load(&a.seed_file, &seedfile::default_dir())?;
    let params = rules::Params {
        count: a.count,
        rng_seed: a.rng_seed,
        addr_scope: a.addr_scope,
        port_scope: a.port_scope,
        scale_skew: !a.no_scale_skew,
        smoothing: a.smoothing,
    };
    let t = Instant::now();
    let g = rules::generate(&seed, &params)?;
    let gen_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut fields = Map::new();
    let text = match a.format {
        RulesFormat::Classbench => classbench::write_rules(&g.rules)?,
        RulesFormat::Ofctl => {
            let conv = rqvs_flow::convert::classbench_to_openflow(&g.rules, &Actions::drop())?;
            if !conv.skipped.is_empty() {
                eprintln!("rqvs: warning: {} rules have no OpenFlow form and were left out", conv.skipped.len());
            }
            fields.insert("flows".into(), conv.flows.len().into());
            fields.insert("skipped".into(), conv.skipped.len().into());
            ofctl::write_flows(&conv.flows)?
        }
    };
    let total_ms = t.elapsed().as_secs_f64() * 1e3;
    emit(a.output.as_deref(), &a.json, text.as_bytes())?;
    let st = stats::RuleStats::of(&g.rules)?;
    let summary = format!(
        "gen rules: seed {} count {} rng-seed {}: {} rules ({} duplicates removed) in {:.0} ms ({:.0} ms with formatting); {} tuples, {} src / {} dst prefixes",
        a.seed_file, a.count, a.rng_seed, g.rules.len(), g.duplicates, gen_ms, total_ms, st.tuples, st.src_prefixes, st.dst_prefixes
    );
    if a.output.is_some() || a.json.is_some() {
        out.line(&summary);
    } else {
        eprintln!("{summary}");
    }
    fields.insert("seed_file".into(), a.seed_file.clone().into());
    fields.insert("count".into(), a.count.into());
    fields.insert("rng_seed".into(), a.rng_seed.into());
    fields.insert("rules".into(), g.rules.len().into());
    fields.insert("duplicates".into(), g.duplicates.into());
    fields.insert("generate_ms".into(), gen_ms.into());
    fields.insert("total_ms".into(), total_ms.into());
    fields.insert("stats".into(), stats_json(&st));
    if let Some(c) = &a.compare {
        let other = stats::RuleStats::of(&inputs::load_rules(Some(c))?)?;
        let cmp = st.compare(&other);
        let line = format!("vs {}: {cmp}", c.display());
        if a.output.is_some() || a.json.is_some() {
            out.line(&line);
        } else {
            eprintln!("{line}");
        }
        fields.insert(
            "compare".into(),
            json!({
                "file": c.display().to_string(), "stats": stats_json(&other),
                "tvd_src_len": cmp.src_len, "tvd_dst_len": cmp.dst_len, "tvd_sport_class": cmp.sport_class,
                "tvd_dport_class": cmp.dport_class, "tvd_protocol": cmp.protocol, "flags_diff": cmp.flags,
                "tuples_ratio": cmp.tuples_ratio, "rules_ratio": cmp.rules_ratio,
                "src_prefixes_ratio": cmp.src_prefixes_ratio, "dst_prefixes_ratio": cmp.dst_prefixes_ratio,
            }),
        );
    }
    if let Some(j) = &a.json {
        report::write_json(j, "gen rules", fields)?;
    }
    Ok(())
}

fn gen_trace(a: &TraceArgs) -> Result<(), Failure> {
    let out = Out::new(a.json.as_deref());
    let rules = inputs::load_rules(Some(&a.rules))?;
    let mut p = trace::Params::new(a.packets, Locality::parse(&a.locality)?, a.rng_seed);
    p.mode = if a.corner { Mode::Corner } else { Mode::Inside };
    p.max_share = a.max_share;
    p.max_burst = a.max_burst;
    p.wire = matches!(a.format, TraceFormat::Pcap);
    let t = Instant::now();
    let (packets, st) = trace::generate(&rules, &p)?;
    let secs = t.elapsed().as_secs_f64();
    let mut fields = Map::new();
    match a.format {
        TraceFormat::Classbench => {
            let entries: Vec<cbtrace::TraceEntry> = packets
                .iter()
                .map(|x| cbtrace::TraceEntry { intended: Some(x.intended), ..cbtrace::TraceEntry::from_key(x.key) })
                .collect();
            emit(a.output.as_deref(), &a.json, cbtrace::write_trace(&entries).as_bytes())?;
        }
        TraceFormat::Pcap => {
            let Some(o) = &a.output else {
                return Err(Failure("--format pcap needs --output FILE".into()));
            };
            let keys: Vec<FlowKey> = packets.iter().map(|x| x.key).collect();
            let (bytes, ws) = pcap::write_pcap(&keys, None);
            fields.insert("ports_dropped".into(), ws.ports_dropped.into());
            emit(Some(o), &a.json, &bytes)?;
        }
    }
    let line = format!(
        "gen trace: {} packets from {} rules ({}) in {:.2} s ({:.2} M headers/s): {} flows, top header {:.2}%, intended ≠ true winner {} ({:.2}%), capped {}",
        st.packets,
        rules.len(),
        a.locality,
        secs,
        st.packets as f64 / secs / 1e6,
        st.flows,
        st.top_share * 100.0,
        st.intended_differs,
        st.intended_differs as f64 * 100.0 / st.packets as f64,
        st.capped
    );
    let say = |s: &str| if a.output.is_some() || a.json.is_some() { out.line(s) } else { eprintln!("{s}") };
    say(&line);
    if a.stats {
        say(&format!(
            "flow sizes (packets per distinct header): p50 {} p90 {} p99 {} max {}; rules hit {}",
            st.flow_size_p50, st.flow_size_p90, st.flow_size_p99, st.flow_size_max, st.rules_hit
        ));
        say("  size        flows     packets");
        for &(lo, hi, f, pk) in &st.flow_sizes {
            say(&format!("  {:<10} {:>8} {:>11}", if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") }, f, pk));
        }
    }
    fields.insert("rules_file".into(), a.rules.display().to_string().into());
    fields.insert("packets".into(), st.packets.into());
    fields.insert("locality".into(), a.locality.clone().into());
    fields.insert("mode".into(), (if a.corner { "corner" } else { "inside" }).into());
    fields.insert("rng_seed".into(), a.rng_seed.into());
    fields.insert("seconds".into(), secs.into());
    fields.insert("flows".into(), st.flows.into());
    fields.insert("top_share".into(), st.top_share.into());
    fields.insert("intended_differs".into(), st.intended_differs.into());
    fields.insert("unmatched".into(), st.unmatched.into());
    fields.insert("rules_hit".into(), st.rules_hit.into());
    fields.insert("capped".into(), st.capped.into());
    fields.insert(
        "flow_sizes".into(),
        json!({
            "p50": st.flow_size_p50, "p90": st.flow_size_p90, "p99": st.flow_size_p99, "max": st.flow_size_max,
            "buckets": st.flow_sizes.iter().map(|&(lo, hi, f, p)| json!({"lo": lo, "hi": hi, "flows": f, "packets": p})).collect::<Vec<_>>(),
        }),
    );
    if let Some(j) = &a.json {
        report::write_json(j, "gen trace", fields)?;
    }
    Ok(())
}

fn gen_map(a: &MapArgs) -> Result<(), Failure> {
    let out = Out::new(a.json.as_deref());
    let rules = inputs::load_rules(Some(&a.rules))?;
    let cap = pcap::read_capture(&a.pcap, 1)?;
    let p = map::Params { rng_seed: a.rng_seed, syn: a.syn, attempts: a.attempts };
    let t = Instant::now();
    let (mapped, rep) = map::map_capture(&rules, &cap, &p)?;
    let keys: Vec<FlowKey> = mapped.iter().map(|m| m.key).collect();
    let (bytes, _) = pcap::write_pcap(&keys, Some(&cap.timestamps_ns));
    std::fs::write(&a.out, bytes).map_err(|e| Failure(format!("{}: cannot write: {e}", a.out.display())))?;
    out.line(format!(
        "gen map: {} packets ({} rewritten, {} non-IPv4 copied; {} frames skipped by the reader), {} flows: {} placed ({:.2}%), {} unplaced; {} packets off target; {} SYN refused; {:.2} s",
        rep.packets,
        rep.rewritten,
        rep.copied,
        cap.stats.skipped(),
        rep.flows,
        rep.placed,
        rep.placed as f64 * 100.0 / rep.flows.max(1) as f64,
        rep.unplaced,
        rep.packets_off_target,
        rep.syn_refused,
        t.elapsed().as_secs_f64()
    ));
    if let Some(j) = &a.json {
        let mut f = Map::new();
        f.insert("rules_file".into(), a.rules.display().to_string().into());
        f.insert("input".into(), a.pcap.display().to_string().into());
        f.insert("output".into(), a.out.display().to_string().into());
        f.insert("packets".into(), rep.packets.into());
        f.insert("rewritten".into(), rep.rewritten.into());
        f.insert("copied".into(), rep.copied.into());
        f.insert("flows".into(), rep.flows.into());
        f.insert("placed".into(), rep.placed.into());
        f.insert("unplaced".into(), rep.unplaced.into());
        f.insert("packets_off_target".into(), rep.packets_off_target.into());
        f.insert("syn_refused".into(), rep.syn_refused.into());
        f.insert("capture".into(), report::capture_json(&cap.stats));
        report::write_json(j, "gen map", f)?;
    }
    Ok(())
}

fn gen_updates(a: &UpdatesArgs) -> Result<(), Failure> {
    let out = Out::new(a.json.as_deref());
    let rules = inputs::load_rules(Some(&a.rules))?;
    let mix = updates::parse_mix(&a.mix)?;
    let s = updates::generate(&rules, a.fraction, mix, a.ops, a.rng_seed)?;
    let comment = vec![format!(
        "source {} rules {} fraction {} mix {} rng-seed {}",
        a.rules.display(),
        rules.len(),
        a.fraction,
        a.mix,
        a.rng_seed
    )];
    let text = updates::write(&s, &comment)?;
    emit(a.output.as_deref(), &a.json, text.as_bytes())?;
    let (i, r, m) = s.counts();
    let line = format!(
        "gen updates: {} initial rules, {} operations ({i} insert, {r} remove, {m} modify)",
        s.initial.len(),
        s.ops.len()
    );
    if a.output.is_some() || a.json.is_some() {
        out.line(&line);
    } else {
        eprintln!("{line}");
    }
    if let Some(j) = &a.json {
        let mut f = Map::new();
        f.insert("rules_file".into(), a.rules.display().to_string().into());
        f.insert("initial".into(), s.initial.len().into());
        f.insert("ops".into(), s.ops.len().into());
        f.insert("inserts".into(), i.into());
        f.insert("removes".into(), r.into());
        f.insert("modifies".into(), m.into());
        f.insert("fraction".into(), a.fraction.into());
        f.insert("mix".into(), a.mix.clone().into());
        report::write_json(j, "gen updates", f)?;
    }
    Ok(())
}
