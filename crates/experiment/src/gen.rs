//! Rule-set, trace and attack generation with their reports: what `rqvs gen rules`, `rqvs gen
//! trace` and `rqvs gen attack` do between parsing options and writing files, shared with the
//! Python package (the algorithms are [`rqvs_workload::rules`], [`rqvs_workload::trace`] and
//! [`rqvs_workload::attack`]).
//!
//! Each function returns the data to write (text or bytes), the report's JSON fields (before
//! [`crate::report::envelope`]) and the summary lines the command line prints.

use std::path::PathBuf;
use std::time::Instant;

use rqvs_flow::formats::{classbench, ofctl, pcap, trace as cbtrace};
use rqvs_flow::{Actions, FlowKey};
use rqvs_workload::{attack, ipv6, ofrules, ofseed, rules, seedfile, stats, trace};
use serde_json::{json, Map, Value};

use crate::{inputs, Error};

/// How generated rules are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum RulesFormat {
    Classbench,
    Ofctl,
}

/// How a generated trace is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum TraceFormat {
    Classbench,
    Pcap,
}

/// Which rules a seed makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RulesVariant {
    /// OpenFlow rules ClassBench-ng's way ([`rqvs_workload::ofrules`]) when the seed has an
    /// `-openflow` section (of1, of2), else ClassBench IPv4 5-tuples.
    Auto,
    /// The IPv4 5-tuples of the seed's classic part, ignoring any `-openflow` section.
    Classic,
    /// IPv6 5-tuples with ClassBench-ng's IPv6 prefixes, or rqvs's longer ones
    /// ([`rqvs_workload::ipv6`]), from the classic part.
    Ipv6(ipv6::Prefixes),
}

/// A rule-set to generate (`rqvs gen rules`' options).
#[derive(Clone, Debug)]
pub struct RulesRequest {
    /// acl1..ipc2, of1, of2 ([`seedfile::embedded`]) or the path of a seed file.
    pub seed_file: String,
    pub params: rules::Params,
    pub format: RulesFormat,
    /// A rule file to compare the statistics with (ClassBench 5-tuple sets only).
    pub compare: Option<PathBuf>,
    pub variant: RulesVariant,
}

/// A generated rule-set and its report.
pub struct RulesOutput {
    /// The rules in the requested format.
    pub text: String,
    /// The report's fields.
    pub fields: Map<String, Value>,
    /// Warnings (rules left out of the ofctl form).
    pub warnings: Vec<String>,
    /// The summary line, and the comparison's when asked for.
    pub summary: String,
    pub compare_line: Option<String>,
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

fn combinations_json(st: &ofrules::OpenFlowStats, of: &ofseed::OpenFlowSection) -> Value {
    let total: u64 = of.rule_distribution.iter().map(|c| c.count).sum();
    let share = |c: ofseed::Combination| {
        st.combinations.iter().find(|x| x.0 == c).map_or(0, |x| x.1) as f64 / st.rules.max(1) as f64
    };
    let ranked =
        |v: &[([u8; 3], usize)]| v.iter().map(|(o, n)| (ofrules::fmt_oui(*o), json!(n))).collect::<Map<_, _>>();
    json!({
        "rules": st.rules,
        "combinations": of.rule_distribution.iter().map(|c| json!({
            "attributes": c.combination.attrs().map(ofseed::Attr::name).collect::<Vec<_>>(),
            "seed_share": c.count as f64 / total as f64,
            "share": share(c.combination),
        })).collect::<Vec<_>>(),
        "dl_src_ouis": ranked(&st.dl_src_ouis),
        "dl_dst_ouis": ranked(&st.dl_dst_ouis),
        "in_ports": st.in_ports.len(),
        "vlan_ids": st.vlan_ids,
    })
}

/// `--format classbench` cannot hold what OpenFlow and IPv6 sets match.
fn needs_ofctl(a: &RulesRequest, what: &str) -> Result<(), Error> {
    if a.format != RulesFormat::Ofctl {
        return Err(Error(format!(
            "{}: {what}, which the ClassBench format cannot hold: use --format ofctl",
            a.seed_file
        )));
    }
    if a.compare.is_some() {
        return Err(Error(format!(
            "--compare compares ClassBench statistics of 5-tuple sets; {} makes {what}",
            a.seed_file
        )));
    }
    Ok(())
}

/// The report of an OpenFlow or IPv6 table: flows, rules left out, priorities.
fn table_fields(fields: &mut Map<String, Value>, warnings: &mut Vec<String>, conv: &rqvs_flow::convert::Conversion) {
    if !conv.skipped.is_empty() {
        warnings.push(format!("{} rules have no OpenFlow form and were left out", conv.skipped.len()));
    }
    fields.insert("flows".into(), conv.flows.len().into());
    fields.insert("skipped".into(), conv.skipped.len().into());
    fields.insert("max_priority".into(), conv.max_priority.into());
}

/// Generates a ClassBench-ng OpenFlow set (`of1`, `of2`, any seed with an `-openflow` section).
fn gen_openflow_rules(
    a: &RulesRequest,
    seed: &seedfile::SeedFile,
    of: &ofseed::OpenFlowSection,
) -> Result<RulesOutput, Error> {
    needs_ofctl(a, "an OpenFlow seed makes rules on in_port, MACs and VLANs")?;
    let t = Instant::now();
    let set = ofrules::generate(seed, of, &a.params)?;
    let gen_ms = t.elapsed().as_secs_f64() * 1e3;
    let conv = ofrules::to_flows(&set.rules)?;
    let text = ofctl::write_flows(&conv.flows)?;
    let total_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut fields = Map::new();
    let mut warnings = Vec::new();
    table_fields(&mut fields, &mut warnings, &conv);
    let st = ofrules::OpenFlowStats::of(&set);
    let (gap, worst) = st.worst_combination_share_gap(of);
    let p = &a.params;
    let summary = format!(
        "gen rules: seed {} (OpenFlow, ClassBench-ng) count {} rng-seed {}: {} rules ({} duplicate matches removed), {} flows, in {:.0} ms ({:.0} ms with priorities and formatting); {} combinations (largest share gap {:.2} points, {}), {} given TCP/UDP for their ports; OUIs dl_src {} dl_dst {}, {} in_ports",
        a.seed_file, p.count, p.rng_seed, set.rules.len(), set.duplicate_matches, conv.flows.len(), gen_ms, total_ms,
        st.combinations.len(), gap * 100.0, worst.label(), set.protocols_added,
        st.dl_src_ouis.len(), st.dl_dst_ouis.len(), st.in_ports.len()
    );
    for (k, v) in [
        ("seed_file", json!(a.seed_file)),
        ("variant", json!("openflow")),
        ("count", json!(p.count)),
        ("rng_seed", json!(p.rng_seed)),
        ("rules", json!(set.rules.len())),
        ("classic_duplicates", json!(set.classic_duplicates)),
        ("duplicates", json!(set.duplicate_matches)),
        ("protocols_added", json!(set.protocols_added)),
        ("generate_ms", json!(gen_ms)),
        ("total_ms", json!(total_ms)),
        ("openflow_stats", combinations_json(&st, of)),
    ] {
        fields.insert(k.into(), v);
    }
    Ok(RulesOutput { text, fields, warnings, summary, compare_line: None })
}

/// Generates an IPv6 5-tuple set (`--ipv6`).
fn gen_ipv6_rules(a: &RulesRequest, seed: &seedfile::SeedFile, prefixes: ipv6::Prefixes) -> Result<RulesOutput, Error> {
    needs_ofctl(a, "IPv6 rules")?;
    let t = Instant::now();
    let g = rules::generate(seed, &a.params)?;
    let gen_ms = t.elapsed().as_secs_f64() * 1e3;
    let conv = ipv6::to_flows_with(&g.rules, prefixes)?;
    let text = ofctl::write_flows(&conv.flows)?;
    let total_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut fields = Map::new();
    let mut warnings = Vec::new();
    table_fields(&mut fields, &mut warnings, &conv);
    // The IPv4 set's statistics are the IPv6 set's, prefix for prefix (rqvs_workload::ipv6).
    let st = stats::RuleStats::of(&g.rules)?;
    let p = &a.params;
    let summary = format!(
        "gen rules: seed {} (IPv6) count {} rng-seed {}: {} rules ({} duplicates removed), {} flows, in {:.0} ms ({:.0} ms with priorities and formatting); {} tuples, {} src / {} dst prefixes",
        a.seed_file, p.count, p.rng_seed, g.rules.len(), g.duplicates, conv.flows.len(), gen_ms, total_ms, st.tuples, st.src_prefixes, st.dst_prefixes
    );
    for (k, v) in [
        ("seed_file", json!(a.seed_file)),
        ("variant", json!("ipv6")),
        (
            "ipv6_prefixes",
            json!(match prefixes {
                ipv6::Prefixes::Top32 => "top32",
                ipv6::Prefixes::Spread { .. } => "spread",
            }),
        ),
        ("count", json!(p.count)),
        ("rng_seed", json!(p.rng_seed)),
        ("rules", json!(g.rules.len())),
        ("duplicates", json!(g.duplicates)),
        ("generate_ms", json!(gen_ms)),
        ("total_ms", json!(total_ms)),
        ("stats", stats_json(&st)),
    ] {
        fields.insert(k.into(), v);
    }
    Ok(RulesOutput { text, fields, warnings, summary, compare_line: None })
}

/// Whether a seed (name or path) has an `-openflow` section (a cheap look: the section is
/// parsed by [`gen_rules`]).
pub fn has_openflow_section(seed_file: &str) -> Result<bool, Error> {
    let (_, text) = seedfile::read(seed_file)?;
    Ok(text.lines().any(|l| l.trim() == "-openflow"))
}

/// Generates a rule-set (module docs).
pub fn gen_rules(a: &RulesRequest) -> Result<RulesOutput, Error> {
    let (name, seed_text) = seedfile::read(&a.seed_file)?;
    let seed = seedfile::parse(&name, &seed_text).map_err(|e| Error(e.to_string()))?;
    match a.variant {
        RulesVariant::Ipv6(p) => return gen_ipv6_rules(a, &seed, p),
        RulesVariant::Auto => {
            if let Some(of) = ofseed::parse(&name, &seed_text).map_err(|e| Error(e.to_string()))? {
                return gen_openflow_rules(a, &seed, &of);
            }
        }
        RulesVariant::Classic => {}
    }
    let t = Instant::now();
    let g = rules::generate(&seed, &a.params)?;
    let gen_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut fields = Map::new();
    let mut warnings = Vec::new();
    let text = match a.format {
        RulesFormat::Classbench => classbench::write_rules(&g.rules)?,
        RulesFormat::Ofctl => {
            let conv = rqvs_flow::convert::classbench_to_openflow(&g.rules, &Actions::drop())?;
            if !conv.skipped.is_empty() {
                warnings.push(format!("{} rules have no OpenFlow form and were left out", conv.skipped.len()));
            }
            fields.insert("flows".into(), conv.flows.len().into());
            fields.insert("skipped".into(), conv.skipped.len().into());
            ofctl::write_flows(&conv.flows)?
        }
    };
    let total_ms = t.elapsed().as_secs_f64() * 1e3;
    let st = stats::RuleStats::of(&g.rules)?;
    let p = &a.params;
    let summary = format!(
        "gen rules: seed {} count {} rng-seed {}: {} rules ({} duplicates removed) in {:.0} ms ({:.0} ms with formatting); {} tuples, {} src / {} dst prefixes",
        a.seed_file, p.count, p.rng_seed, g.rules.len(), g.duplicates, gen_ms, total_ms, st.tuples, st.src_prefixes, st.dst_prefixes
    );
    fields.insert("seed_file".into(), a.seed_file.clone().into());
    fields.insert("count".into(), p.count.into());
    fields.insert("rng_seed".into(), p.rng_seed.into());
    fields.insert("rules".into(), g.rules.len().into());
    fields.insert("duplicates".into(), g.duplicates.into());
    fields.insert("generate_ms".into(), gen_ms.into());
    fields.insert("total_ms".into(), total_ms.into());
    fields.insert("stats".into(), stats_json(&st));
    let mut compare_line = None;
    if let Some(c) = &a.compare {
        let other = stats::RuleStats::of(&inputs::load_rules(Some(c))?)?;
        let cmp = st.compare(&other);
        compare_line = Some(format!("vs {}: {cmp}", c.display()));
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
    Ok(RulesOutput { text, fields, warnings, summary, compare_line })
}

/// A trace to generate (`rqvs gen trace`' options).
#[derive(Clone, Debug)]
pub struct TraceRequest {
    /// Rule file (ClassBench or ofctl, plain or .xz).
    pub rules: PathBuf,
    /// The locality as given (`pareto:A,B`, `zipf:S`, `zipf:S,FLOWS`, `uniform`).
    pub locality: String,
    pub packets: usize,
    pub rng_seed: u64,
    /// Draw each field at a corner of the rule instead of inside it.
    pub corner: bool,
    pub max_share: f64,
    pub max_burst: Option<usize>,
    pub format: TraceFormat,
}

/// A generated trace and its report.
pub struct TraceOutput {
    /// The trace in the requested format.
    pub bytes: Vec<u8>,
    pub fields: Map<String, Value>,
    /// The summary line, and the flow-size table (`--stats`).
    pub summary: String,
    pub stats_lines: Vec<String>,
}

/// A ClassBench trace holds IPv4 5-tuples and TCP flags: headers aimed at rules on other fields
/// (OpenFlow sets' in_port, MACs, VLANs, ToS; IPv6 sets) would lose what makes them match.
fn classbench_trace_holds(rules: &[rqvs_flow::Rule]) -> Result<(), Error> {
    const HELD: [&str; 8] = ["nw_src", "nw_dst", "tp_src", "tp_dst", "nw_proto", "tcp_flags", "dl_type", "nw_frag"];
    for r in rules {
        let (v, k) = (r.matches.value(), r.matches.mask());
        let other = k.nonzero_members().into_iter().find(|m| !HELD.contains(m));
        let not_ipv4 = k.dl_type != 0 && v.dl_type != rqvs_flow::key::ETH_TYPE_IP;
        if other.is_some() || not_ipv4 {
            let what = other.map_or_else(|| format!("dl_type {:#06x}", v.dl_type), |m| m.to_string());
            return Err(Error(format!(
                "rule {} matches {what}, which a ClassBench trace cannot hold (IPv4 5-tuples and TCP flags only): use --format pcap",
                r.id
            )));
        }
    }
    Ok(())
}

/// Generates a trace (module docs).
pub fn gen_trace(a: &TraceRequest) -> Result<TraceOutput, Error> {
    let rules = inputs::load_rules(Some(&a.rules))?;
    if a.format == TraceFormat::Classbench {
        classbench_trace_holds(&rules)?;
    }
    let mut p = trace::Params::new(a.packets, trace::Locality::parse(&a.locality)?, a.rng_seed);
    p.mode = if a.corner { trace::Mode::Corner } else { trace::Mode::Inside };
    p.max_share = a.max_share;
    p.max_burst = a.max_burst;
    p.wire = a.format == TraceFormat::Pcap;
    let t = Instant::now();
    let (packets, st) = trace::generate(&rules, &p)?;
    let secs = t.elapsed().as_secs_f64();
    let mut fields = Map::new();
    let bytes = match a.format {
        TraceFormat::Classbench => {
            let entries: Vec<cbtrace::TraceEntry> = packets
                .iter()
                .map(|x| cbtrace::TraceEntry { intended: Some(x.intended), ..cbtrace::TraceEntry::from_key(x.key) })
                .collect();
            cbtrace::write_trace(&entries).into_bytes()
        }
        TraceFormat::Pcap => {
            let keys: Vec<FlowKey> = packets.iter().map(|x| x.key).collect();
            let (bytes, ws) = pcap::write_pcap(&keys, None);
            fields.insert("ports_dropped".into(), ws.ports_dropped.into());
            bytes
        }
    };
    let summary = format!(
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
    let mut stats_lines = vec![
        format!(
            "flow sizes (packets per distinct header): p50 {} p90 {} p99 {} max {}; rules hit {}",
            st.flow_size_p50, st.flow_size_p90, st.flow_size_p99, st.flow_size_max, st.rules_hit
        ),
        "  size        flows     packets".to_string(),
    ];
    for &(lo, hi, f, pk) in &st.flow_sizes {
        stats_lines.push(format!(
            "  {:<10} {:>8} {:>11}",
            if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") },
            f,
            pk
        ));
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
    Ok(TraceOutput { bytes, fields, summary, stats_lines })
}

/// An attack to generate (`rqvs gen attack`' options; [`rqvs_workload::attack`]).
#[derive(Clone, Debug)]
pub struct AttackRequest {
    /// Rule file (ClassBench or ofctl, plain or .xz).
    pub rules: PathBuf,
    pub kind: attack::Kind,
    pub knowledge: attack::Knowledge,
    pub packets: usize,
    /// tse2: the masks the attack is spread over.
    pub masks: usize,
    pub rng_seed: u64,
}

/// A generated attack: the pcap, and what it does to ORIG.
pub struct AttackOutput {
    pub bytes: Vec<u8>,
    pub fields: Map<String, Value>,
    pub summary: Vec<String>,
}

/// Generates an attack and replays it through ORIG alone (OVS's defaults, a virtual clock, so
/// the report is the same on every machine): the masks and megaflows it creates, the upcalls,
/// the subtables probed per megaflow hit, and every packet's action checked against the
/// reference classifier.
pub fn gen_attack(a: &AttackRequest) -> Result<AttackOutput, Error> {
    use rqvs_datapath::{assign_rule_outputs, Clock, DatapathConfig, Orig, OrigConfig};
    use rqvs_ofproto::DpAction;
    let mut rules = inputs::load_rules(Some(&a.rules))?;
    let params =
        attack::Params { knowledge: a.knowledge, masks: a.masks, ..attack::Params::new(a.kind, a.packets, a.rng_seed) };
    let t = Instant::now();
    let (keys, st) = attack::generate(&rules, &params).map_err(Error)?;
    let secs = t.elapsed().as_secs_f64();
    let (bytes, ws) = pcap::write_pcap(&keys, None);
    // ORIG on the same rules, each with an action of its own, as `rqvs replay` runs them.
    if rules.iter().all(|r| r.actions.0.is_empty()) {
        assign_rule_outputs(&mut rules);
    }
    let cfg =
        DatapathConfig { clock: Clock::Virtual { packet_ns: 100, upcall_ns: 2_000 }, ..DatapathConfig::default() };
    let mut dp = Orig::new(&rules, cfg, OrigConfig::default())?;
    let actions = rqvs_datapath::pmd::run_keys(&mut dp, &keys);
    let reference = rqvs_classify::Reference::build(&rules)?;
    let mismatches =
        keys.iter().zip(&actions).filter(|(k, a)| DpAction::of_rule(reference.lookup_rule(k)) != **a).count();
    let c = dp.counters();
    let name = match a.kind {
        attack::Kind::Tse => format!("tse ({})", a.knowledge.name()),
        attack::Kind::Tse2 => format!("tse2 (co-located, {} masks)", a.masks),
        attack::Kind::Flood => "flood".to_string(),
    };
    let mut fields = Map::new();
    for (k, v) in [
        ("rules_file", json!(a.rules.display().to_string())),
        ("rules", json!(rules.len())),
        ("kind", json!(a.kind.name())),
        ("knowledge", json!(a.knowledge.name())),
        ("packets", json!(keys.len())),
        ("rng_seed", json!(a.rng_seed)),
        ("distinct_masks_searched", json!(st.distinct_masks)),
        ("slow_path_lookups", json!(st.lookups)),
        ("ports_dropped", json!(ws.ports_dropped)),
        (
            "orig",
            json!({
                "masks": c.masks, "megaflows": c.megaflows, "upcalls": c.upcall, "lost": c.lost,
                "emc_hits": c.emc_hit, "megaflow_hits": c.megaflow_hit,
                "avg_subtables_per_hit": c.avg_subtables_per_hit(),
                "verified": keys.len(), "mismatches": mismatches,
            }),
        ),
    ] {
        fields.insert(k.into(), v);
    }
    let summary = vec![
        format!(
            "gen attack: {name}: {} packets over {} rules in {secs:.2} s ({} slow-path lookups searching; {} distinct masks)",
            keys.len(),
            rules.len(),
            st.lookups,
            st.distinct_masks
        ),
        format!(
            "in ORIG (OVS defaults): {} masks, {} megaflows, {} upcalls, {:.1} subtables probed per megaflow hit   mismatches {mismatches} of {}",
            c.masks,
            c.megaflows,
            c.upcall,
            c.avg_subtables_per_hit(),
            keys.len()
        ),
    ];
    if mismatches > 0 {
        return Err(Error(format!(
            "gen attack: {mismatches} packets got an action other than the reference's in ORIG"
        )));
    }
    Ok(AttackOutput { bytes, fields, summary })
}
