//! `rqvs gen`: workloads — ClassBench-compatible rules, traces, capture mapping, update streams,
//! coflows (`crate::coflows`).
//! The algorithms live in `rqvs-workload`; this module is arguments, files and reports.

use std::path::{Path, PathBuf};
use std::time::Instant;

use rqvs_experiment::gen::{self, RulesFormat, TraceFormat};
use rqvs_flow::formats::pcap;
use rqvs_workload::{map, rules, trace, updates};
use serde_json::Map;

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
    /// Attack traffic against the megaflow cache (Tuple Space Explosion, TSE 2.0, a new-flow
    /// flood) as a pcap, with what it does to ORIG.
    Attack(AttackArgs),
    /// A two-table OpenFlow pipeline: an ACL from a ClassBench seed (goto_table:1 or drop), then
    /// forwarding on another seed's destination prefixes; and a trace for it.
    Pipeline(crate::gen_pipeline::PipelineArgs),
}

/// `--kind` of `gen attack`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttackKind {
    /// Tuple Space Explosion: headers whose megaflow masks are all different.
    Tse,
    /// TSE 2.0: the co-located headers of `--masks` masks, round after round, so the attack's
    /// subtables out-rank benign ones.
    Tse2,
    /// A new-flow flood: one service, every packet a new client.
    Flood,
}

/// `--variant` of `gen attack --kind tse`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttackVariant {
    /// The attacker knows the rules: a greedy search for headers with new masks.
    CoLocated,
    /// No knowledge of the rules: random addresses and ports.
    General,
}

#[derive(clap::Args, Debug)]
pub struct AttackArgs {
    /// Rule file the attack is made against (ClassBench or ofctl, plain or .xz).
    #[arg(long)]
    pub rules: PathBuf,
    #[arg(long, value_enum)]
    pub kind: AttackKind,
    /// --kind tse: what the attacker knows.
    #[arg(long, value_enum, default_value = "co-located")]
    pub variant: AttackVariant,
    /// Packets to write [range: 1 ≤ x ≤ 10000000].
    #[arg(long, value_parser = crate::args::range::between(1usize, 10_000_000))]
    pub packets: usize,
    /// --kind tse2: the distinct masks the attack is spread over [range: 1 ≤ x ≤ 1000000].
    #[arg(long, default_value_t = 64, value_parser = crate::args::range::between(1usize, 1_000_000))]
    pub masks: usize,
    #[arg(long, default_value_t = 1)]
    pub rng_seed: u64,
    /// The pcap to write (Ethernet).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Write a JSON report here ('-' = stdout).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Options `rqvs gen` accepts but would not use: `gen attack`'s `--variant` without `--kind
/// tse`, `--masks` without `--kind tse2` (usage errors, [`crate::args::Given`]).
pub fn unused(cmd: &Command, g: &crate::args::Given) -> Result<(), String> {
    if let Command::Attack(a) = cmd {
        g.refuse("variant", a.kind != AttackKind::Tse, "what a TSE attacker knows; used only with --kind tse")?;
        g.refuse("masks", a.kind != AttackKind::Tse2, "the masks of TSE 2.0; used only with --kind tse2")?;
    }
    Ok(())
}

/// How `gen rules --ipv6` maps IPv4 prefixes (rqvs_workload::ipv6::Prefixes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Ipv6Prefixes {
    Top32,
    Spread,
}

#[derive(clap::Args, Debug)]
pub struct RulesArgs {
    /// acl1..acl5, fw1..fw5, ipc1, ipc2 (ClassBench's seed files), of1, of2 (ClassBench-ng's
    /// OpenFlow seeds), all built into rqvs, or the path of a seed file. A seed with an
    /// `-openflow` section makes OpenFlow rules (in_port, MACs, VLANs next to the 5-tuple) the
    /// ClassBench-ng way, written with --format ofctl.
    #[arg(long)]
    pub seed_file: String,
    /// IPv6 5-tuples with ClassBench-ng's IPv6 prefixes (each IPv4 prefix in the top 32 bits of
    /// the address), written with --format ofctl.
    #[arg(long, conflicts_with = "classic")]
    pub ipv6: bool,
    /// With --ipv6: top32 (ClassBench-ng's output from an IPv4 seed: the IPv4 prefix in the top
    /// 32 bits, same length) or spread (rqvs's seeded extension to lengths up to /128: a /16
    /// becomes a /32, a /24 a /48, a /28 a /64, a /32 a /128; docs/classbench-ng.md).
    #[arg(long, value_enum, default_value_t = Ipv6Prefixes::Top32, requires = "ipv6")]
    pub ipv6_prefixes: Ipv6Prefixes,
    /// Only the IPv4 5-tuples of the seed's classic part, ignoring its `-openflow` section.
    #[arg(long)]
    pub classic: bool,
    /// Target number of rules (duplicates are removed, so the set may be smaller) [range: 1 ≤ x ≤
    /// 10000000: every rule is held in memory to remove duplicates].
    #[arg(long, value_parser = crate::args::range::between(1usize, rules::MAX_COUNT))]
    pub count: usize,
    #[arg(long, default_value_t = 1)]
    pub rng_seed: u64,
    /// classbench | ofctl (default: ofctl for --ipv6 and OpenFlow seeds, else classbench).
    #[arg(long, value_enum)]
    pub format: Option<RulesFormat>,
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
    /// The capture to map (pcap or pcapng of any link type rqvs reads; plain, xz, gzip or zstd;
    /// `-`: stdin), read as a stream.
    #[arg(long)]
    pub pcap: PathBuf,
    /// Output pcap (Ethernet, microsecond timestamps: the capture's, truncated).
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
        Command::Attack(a) => gen_attack(a),
        Command::Pipeline(a) => crate::gen_pipeline::run(a),
    }
}

fn gen_attack(a: &AttackArgs) -> Result<(), Failure> {
    use rqvs_workload::attack::{Kind, Knowledge};
    let out = Out::new(a.json.as_deref());
    let req = gen::AttackRequest {
        rules: a.rules.clone(),
        kind: match a.kind {
            AttackKind::Tse => Kind::Tse,
            AttackKind::Tse2 => Kind::Tse2,
            AttackKind::Flood => Kind::Flood,
        },
        knowledge: match a.variant {
            AttackVariant::CoLocated => Knowledge::Rules,
            AttackVariant::General => Knowledge::None,
        },
        packets: a.packets,
        masks: a.masks,
        rng_seed: a.rng_seed,
    };
    let g = gen::gen_attack(&req)?;
    std::fs::write(&a.output, &g.bytes).map_err(|e| Failure(format!("{}: cannot write: {e}", a.output.display())))?;
    for line in &g.summary {
        out.line(line);
    }
    if let Some(j) = &a.json {
        report::write_json(j, "gen attack", g.fields)?;
    }
    Ok(())
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

fn gen_rules(a: &RulesArgs) -> Result<(), Failure> {
    let out = Out::new(a.json.as_deref());
    let params = rules::Params {
        count: a.count,
        rng_seed: a.rng_seed,
        addr_scope: a.addr_scope,
        port_scope: a.port_scope,
        scale_skew: !a.no_scale_skew,
        smoothing: a.smoothing,
    };
    let variant = if a.ipv6 {
        gen::RulesVariant::Ipv6(match a.ipv6_prefixes {
            Ipv6Prefixes::Top32 => rqvs_workload::ipv6::Prefixes::Top32,
            Ipv6Prefixes::Spread => rqvs_workload::ipv6::Prefixes::Spread { seed: a.rng_seed },
        })
    } else if a.classic {
        gen::RulesVariant::Classic
    } else {
        gen::RulesVariant::Auto
    };
    let format = match a.format {
        Some(f) => f,
        None if a.ipv6 => RulesFormat::Ofctl,
        None if !a.classic && gen::has_openflow_section(&a.seed_file)? => RulesFormat::Ofctl,
        None => RulesFormat::Classbench,
    };
    let req = gen::RulesRequest { seed_file: a.seed_file.clone(), params, format, compare: a.compare.clone(), variant };
    let g = gen::gen_rules(&req)?;
    for w in &g.warnings {
        rqvs_switch::diag!("rqvs: warning: {w}");
    }
    emit(a.output.as_deref(), &a.json, g.text.as_bytes())?;
    for line in std::iter::once(&g.summary).chain(&g.compare_line) {
        if a.output.is_some() || a.json.is_some() {
            out.line(line);
        } else {
            rqvs_switch::diag!("{line}");
        }
    }
    if let Some(j) = &a.json {
        report::write_json(j, "gen rules", g.fields)?;
    }
    Ok(())
}

fn gen_trace(a: &TraceArgs) -> Result<(), Failure> {
    let out = Out::new(a.json.as_deref());
    let req = gen::TraceRequest {
        rules: a.rules.clone(),
        locality: a.locality.clone(),
        packets: a.packets,
        rng_seed: a.rng_seed,
        corner: a.corner,
        max_share: a.max_share,
        max_burst: a.max_burst,
        format: a.format,
    };
    let g = gen::gen_trace(&req)?;
    if a.format == TraceFormat::Pcap && a.output.is_none() {
        return Err(Failure("--format pcap needs --output FILE".into()));
    }
    emit(a.output.as_deref(), &a.json, &g.bytes)?;
    let say = |s: &str| if a.output.is_some() || a.json.is_some() { out.line(s) } else { rqvs_switch::diag!("{s}") };
    say(&g.summary);
    if a.stats {
        for line in &g.stats_lines {
            say(line);
        }
    }
    if let Some(j) = &a.json {
        report::write_json(j, "gen trace", g.fields)?;
    }
    Ok(())
}

fn gen_map(a: &MapArgs) -> Result<(), Failure> {
    let out = Out::new(a.json.as_deref());
    let rules = inputs::load_rules(Some(&a.rules))?;
    let mut reader = pcap::open_capture(&a.pcap, 1)?;
    let p = map::Params { rng_seed: a.rng_seed, syn: a.syn, attempts: a.attempts };
    let t = Instant::now();
    let mut mapper = map::Mapper::new(&rules, &p)?;
    let cannot = |e: std::io::Error| Failure(format!("{}: cannot write: {e}", a.out.display()));
    let file = std::fs::File::create(&a.out).map_err(cannot)?;
    let mut w = pcap::PcapWriter::new(std::io::BufWriter::with_capacity(1 << 20, file), pcap::LinkType::Ethernet)
        .map_err(cannot)?;
    while let Some((key, ts)) = reader.next_key()? {
        w.write_key(&mapper.map(&key).key, Some(ts)).map_err(cannot)?;
    }
    w.finish().map_err(cannot)?;
    let rep = mapper.report();
    let stats = reader.stats();
    out.line(format!(
        "gen map: {} packets ({} rewritten, {} non-IPv4 copied; {} frames skipped by the reader), {} flows: {} placed ({:.2}%), {} unplaced; {} packets off target; {} SYN refused; {:.2} s",
        rep.packets,
        rep.rewritten,
        rep.copied,
        stats.skipped(),
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
        f.insert("capture".into(), report::capture_json(&stats));
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
        rqvs_switch::diag!("{line}");
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
