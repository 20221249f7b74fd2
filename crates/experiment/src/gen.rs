//! Rule-set, trace and attack generation with their reports: what `rqvs gen rules`, `rqvs gen
//! trace` and `rqvs gen attack` do between parsing options and writing files, shared with the
//! Python package (the algorithms are [`rqvs_workload::rules`], [`rqvs_workload::trace`] and
//! [`rqvs_workload::attack`]).
//!
//! An attack's report is what it does to ORIG ([`orig_effect`]): the attack replayed alone through
//! ORIG in its default configuration on a virtual clock ([`ATTACK_CLOCK`], so the figures are a
//! function of the rules and the seed), every packet's action checked against the reference
//! classifier; and the same for a new-flow flood of as many packets, for comparison.
//!
//! Each function returns the data to write (text or bytes), the report's JSON fields (before
//! [`crate::report::envelope`]) and the summary lines the command line prints.

use std::path::PathBuf;
use std::time::Instant;

use rqvs_classify::Reference;
use rqvs_datapath::{Clock, DatapathConfig, DpAction, Orig, OrigConfig};
use rqvs_flow::formats::{classbench, ofctl, pcap, trace as cbtrace};
use rqvs_flow::{Actions, FlowKey, Rule};
use rqvs_workload::{attack, rules, seedfile, stats, trace};
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

/// A rule-set to generate (`rqvs gen rules`' options).
#[derive(Clone, Debug)]
pub struct RulesRequest {
    /// acl1..ipc2 ([`seedfile::embedded`]) or the path of a seed file.
    pub seed_file: String,
    pub params: rules::Params,
    pub format: RulesFormat,
    /// A rule file to compare the statistics with.
    pub compare: Option<PathBuf>,
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

/// Generates a rule-set (module docs).
pub fn gen_rules(a: &RulesRequest) -> Result<RulesOutput, Error> {
    let seed = seedfile::load(&a.seed_file)?;
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

/// Generates a trace (module docs).
pub fn gen_trace(a: &TraceRequest) -> Result<TraceOutput, Error> {
    let rules = inputs::load_rules(Some(&a.rules))?;
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

/// An attack to generate (`rqvs gen attack`' options; the algorithms are
/// [`rqvs_workload::attack`]).
#[derive(Clone, Debug)]
pub struct AttackRequest {
    /// Rule file (ClassBench or ofctl, plain or .xz).
    pub rules: PathBuf,
    pub params: attack::Params,
    pub format: TraceFormat,
}

/// What an attack does to ORIG (default configuration, virtual clock).
#[derive(Clone, Copy, Debug)]
pub struct OrigEffect {
    pub packets: u64,
    pub masks: u64,
    pub megaflows: u64,
    pub upcalls: u64,
    pub emc_hits: u64,
    pub megaflow_hits: u64,
    pub avg_subtables_per_hit: f64,
    /// Packets whose action differs from the reference classifier's winner.
    pub mismatches: u64,
}

impl OrigEffect {
    fn json(&self) -> Value {
        json!({
            "packets": self.packets, "masks": self.masks, "megaflows": self.megaflows, "upcalls": self.upcalls,
            "emc_hits": self.emc_hits, "megaflow_hits": self.megaflow_hits,
            "avg_subtables_per_hit": self.avg_subtables_per_hit, "mismatches": self.mismatches,
        })
    }

    fn line(&self, what: &str) -> String {
        format!(
            "  {what:<8} ORIG: {} masks, {} megaflows, {} upcalls, {} EMC hits, {} megaflow hits, {:.2} subtables per megaflow hit, {} mismatches",
            self.masks, self.megaflows, self.upcalls, self.emc_hits, self.megaflow_hits, self.avg_subtables_per_hit, self.mismatches
        )
    }
}

/// The virtual clock [`orig_effect`] runs ORIG on: 100 ns a packet, 10 µs an upcall.
pub const ATTACK_CLOCK: Clock = Clock::Virtual { packet_ns: 100, upcall_ns: 10_000 };

/// Runs `keys` through ORIG (default configuration, [`ATTACK_CLOCK`]) and checks every action
/// against the reference classifier. `rules` carry their actions ([`crate::replay`]'s loading).
pub fn orig_effect(rules: &[Rule], keys: &[FlowKey]) -> Result<OrigEffect, Error> {
    let cfg = DatapathConfig { clock: ATTACK_CLOCK, ..DatapathConfig::default() };
    let mut orig = Orig::new(rules, cfg, OrigConfig::default())?;
    let actions = orig.run_keys(keys);
    let reference = Reference::build(rules)?;
    let mismatches =
        keys.iter().zip(&actions).filter(|(k, a)| DpAction::of_rule(reference.lookup_rule(&k.wire())) != **a).count()
            as u64;
    let c = orig.counters();
    Ok(OrigEffect {
        packets: c.received,
        masks: c.masks,
        megaflows: c.megaflows,
        upcalls: c.upcall,
        emc_hits: c.emc_hit,
        megaflow_hits: c.megaflow_hit,
        avg_subtables_per_hit: c.avg_subtables_per_hit(),
        mismatches,
    })
}

/// A generated attack and its report.
pub struct AttackOutput {
    /// The packets in the requested format.
    pub bytes: Vec<u8>,
    pub keys: Vec<FlowKey>,
    pub fields: Map<String, Value>,
    /// The attack's effect on ORIG, and the flood's of as many packets (for comparison; absent
    /// when the attack is the flood).
    pub effect: OrigEffect,
    pub flood: Option<OrigEffect>,
    pub lines: Vec<String>,
}

/// Generates an attack and measures what it does to ORIG (module docs).
pub fn gen_attack(a: &AttackRequest) -> Result<AttackOutput, Error> {
    let (rules, _) = crate::replay::load_rules(Some(&a.rules))?;
    let p = &a.params;
    let t = Instant::now();
    let g = attack::generate(&rules, p)?;
    let secs = t.elapsed().as_secs_f64();
    let effect = orig_effect(&rules, &g.keys)?;
    let flood = match p.kind {
        attack::Kind::Flood => None,
        _ => Some(orig_effect(&rules, &attack::flood(p.packets, p.rng_seed))?),
    };
    let mut fields = Map::new();
    let bytes = match a.format {
        TraceFormat::Classbench => {
            let entries: Vec<cbtrace::TraceEntry> = g.keys.iter().map(|k| cbtrace::TraceEntry::from_key(*k)).collect();
            cbtrace::write_trace(&entries).into_bytes()
        }
        TraceFormat::Pcap => {
            let (bytes, ws) = pcap::write_pcap(&g.keys, None);
            fields.insert("ports_dropped".into(), ws.ports_dropped.into());
            bytes
        }
    };
    let variant = match p.kind {
        attack::Kind::Flood => "-",
        _ => p.variant.name(),
    };
    let mut lines = vec![format!(
        "gen attack: {} {} ({variant}) from {} rules: {} packets in {:.2} s; mask search: {} slow-path lookups, {} masks found, {} used",
        p.kind.name(),
        a.rules.display(),
        rules.len(),
        g.keys.len(),
        secs,
        g.candidates,
        g.masks_found,
        g.masks_used
    )];
    lines.push(effect.line(p.kind.name()));
    if let Some(f) = &flood {
        lines.push(f.line("flood"));
    }
    fields.insert("rules_file".into(), a.rules.display().to_string().into());
    fields.insert("rules".into(), rules.len().into());
    fields.insert("kind".into(), p.kind.name().into());
    fields.insert("variant".into(), variant.into());
    fields.insert("packets".into(), g.keys.len().into());
    fields.insert("rng_seed".into(), p.rng_seed.into());
    fields.insert("tse2_masks".into(), p.tse2_masks.into());
    fields.insert("seconds".into(), secs.into());
    fields.insert("candidates".into(), g.candidates.into());
    fields.insert("masks_found".into(), g.masks_found.into());
    fields.insert("masks_used".into(), g.masks_used.into());
    fields.insert("orig".into(), effect.json());
    fields.insert("flood".into(), flood.as_ref().map_or(Value::Null, OrigEffect::json));
    Ok(AttackOutput { bytes, keys: g.keys, fields, effect, flood, lines })
}
