//! `rqvs trace`: the OpenFlow slow path on one packet, or megaflow counts over a trace.
//!
//! - `rqvs trace --rules FILE 'in_port=1,tcp,nw_src=...,tp_dst=...'` prints what `ovs-appctl
//!   ofproto/trace` prints, in its layout and notation, so that the two can be diffed: `Flow:`
//!   (OVS's `flow_format`), the matched rule and its actions one per line, `Final flow:`
//!   (`unchanged`, or the packet after the rule's header changes), `Megaflow:` (with OVS's TCP
//!   flag names, `+syn-ack`) and `Datapath actions:`. Checked line by line against real OVS 3.1
//!   in `crates/cli/tests/trace.rs` (the bridge is called `rqvs`; what rqvs does not model —
//!   TTL, flooding to OVS's local port, `controller` upcalls — is left out of that comparison).
//! - `rqvs trace --rules FILE --trace TRACE [--packets N]` replays the first N packets (read as
//!   a stream) through a megaflow cache in front of the slow path: a packet that falls in an installed megaflow is a
//!   hit; any other is an upcall that classifies it (`OfprotoClassifier`) and installs its
//!   megaflow. Prints packets, upcalls, distinct megaflows and distinct masks, and checks every hit
//!   against the slow path's own verdict (`mismatches`, which must be 0: megaflows never change a
//!   packet's rule).
//!
//! A ClassBench rule file is first converted to OpenFlow exactly as `rqvs convert rules --to
//! ofctl` does (port ranges expanded to prefixes, cookie = ClassBench rule id), so the table is the
//! one real OVS would hold.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use rqvs_classify::ofproto::{format_flow, Megaflow, OfprotoClassifier};
use rqvs_classify::Classifier;
use rqvs_flow::formats::{self, ofctl, RuleFormat};
use rqvs_flow::{Actions, FlowKey, Rule};

use crate::Failure;
use rqvs_experiment::inputs;

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("packets_in").required(true).args(["flow", "trace"])))]
pub struct Args {
    /// Rule file: ovs-ofctl flows or ClassBench rules (converted to OpenFlow), plain or .xz.
    #[arg(long)]
    pub rules: PathBuf,
    /// One packet in ofproto/trace syntax, e.g. 'in_port=1,tcp,nw_src=10.1.2.3,tp_dst=80'.
    pub flow: Option<String>,
    /// Replay a ClassBench trace or pcap/pcapng capture through a megaflow cache instead.
    #[arg(long, conflicts_with = "flow")]
    pub trace: Option<PathBuf>,
    /// With --trace: how many packets from the start of the trace [range: 1 ≤ x; more than the
    /// trace holds: all of them].
    #[arg(long, default_value_t = 100_000, value_parser = crate::args::range::between(1usize, usize::MAX))]
    pub packets: usize,
    /// With --trace: in_port given to trace packets.
    #[arg(long, default_value_t = 1)]
    pub in_port: u32,
    /// Write a JSON report here ('-' = stdout).
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub prefixes: crate::prefixes::Prefixes,
}

fn load_table(path: &std::path::Path) -> Result<Vec<Rule>, Failure> {
    let text = rqvs_flow::io::read_text(path)?;
    let name = path.display().to_string();
    match formats::sniff_rule_format(&text) {
        RuleFormat::Ofctl => Ok(ofctl::parse_flows(&name, &text)?),
        RuleFormat::ClassBench => {
            let rules = formats::classbench::parse_rules(&name, &text)?;
            let conv = rqvs_flow::convert::classbench_to_openflow(&rules, &Actions::drop())
                .map_err(|e| format!("{name}: {e}"))?;
            if !conv.skipped.is_empty() {
                rqvs_switch::diag!("rqvs: {name}: {} rules OpenFlow cannot express were left out", conv.skipped.len());
            }
            Ok(conv.flows)
        }
    }
}

/// Parses a packet written in ofproto/trace syntax into a key (unnamed fields are zero).
pub fn parse_packet(text: &str) -> Result<FlowKey, Failure> {
    if text.contains("actions") {
        return Err(Failure(format!("packet '{text}': expected header fields only, found 'actions'")));
    }
    let rule = ofctl::parse_flow("packet", 1, &format!("{text},actions=drop"), 0)?;
    Ok(*rule.matches.value())
}

/// Options `rqvs trace` accepts but would not use: `--packets` and `--in-port` without
/// `--trace` (usage errors, [`crate::args::Given`]).
pub fn unused(a: &Args, g: &crate::args::Given) -> Result<(), String> {
    g.refuse("packets", a.trace.is_none(), "how many packets of --trace; not used with one packet")?;
    g.refuse("in_port", a.trace.is_none(), "the in_port of --trace's packets; one packet names its own (in_port=N)")
}

pub fn run(args: &Args) -> Result<(), Failure> {
    args.prefixes.apply();
    let flows = load_table(&args.rules)?;
    let c = OfprotoClassifier::build(&flows)?;
    match (&args.flow, &args.trace) {
        (Some(flow), _) => trace_one(&c, flow, args),
        (None, Some(_)) => megaflows(&c, args),
        // clap requires one of them (a usage error, exit code 2).
        (None, None) => Err(Failure("expected a packet (e.g. 'in_port=1,tcp,tp_dst=80') or --trace FILE".into())),
    }
}

fn trace_one(c: &OfprotoClassifier, flow: &str, args: &Args) -> Result<(), Failure> {
    let packet = parse_packet(flow)?;
    // The TTL as written (0 when not: OVS's trace of a packet from text has TTL 0), not the
    // wire's default.
    let key = FlowKey { nw_ttl: packet.nw_ttl, ..packet.wire() };
    // The one translation (rqvs_ofproto::xlate), with ofproto/trace's lines. `rqvs trace` has
    // no group table (groups come from GROUP_MOD on a running switch).
    let (x, lines) = rqvs_ofproto::xlate::xlate_traced(c, &rqvs_ofproto::xlate::NoGroups, &key);
    let mf = x.megaflow;
    let out = crate::report::Out::new(args.json.as_deref());
    out.line(format!("Flow: {}\n\nbridge(\"rqvs\")\n-------------", format_flow(&key)));
    // NORMAL's decision as OVS prints it: `rqvs trace` has learned no address, so it floods.
    let head = format!("Flow: {}\n", format_flow(&key));
    let annotated = rqvs_switch::normal::annotate_trace(&(head + &lines.join("\n")), |_, _| None);
    for l in annotated.lines().skip(1) {
        out.line(l);
    }
    let final_text = if x.final_key == key { "unchanged".to_string() } else { format_flow(&x.final_key) };
    let actions = rqvs_ofproto::xlate::datapath_actions(&x.ops, &key);
    out.line(format!("\nFinal flow: {final_text}\nMegaflow: {mf}\nDatapath actions: {actions}"));
    if let Some(path_out) = &args.json {
        let rule = x.first_rule().and_then(|id| c.rule(id));
        let v = serde_json::json!({
            "rules_file": args.rules.display().to_string(),
            "flow": format_flow(&key),
            "rule": x.first_rule().map(|id| id.0),
            "cookie": rule.map(|r| r.cookie),
            "chain": x.chain.iter().map(|l| serde_json::json!({"table": l.table, "rule": l.rule.map(|r| r.0)})).collect::<Vec<_>>(),
            "table_miss": x.table_miss,
            "final_flow": final_text,
            "megaflow": mf.to_string(),
            "datapath_actions": actions,
        });
        let serde_json::Value::Object(map) = v else { unreachable!("a JSON object literal") };
        crate::report::write_json(path_out, "trace", map)?;
    }
    Ok(())
}

fn megaflows(c: &OfprotoClassifier, args: &Args) -> Result<(), Failure> {
    let path = args.trace.as_deref().expect("checked by run");
    // The trace is read as a stream: memory grows with its distinct headers and megaflows, not
    // with its packets.
    let mut reader = inputs::open_packets(Some(path), args.in_port)?;
    let mut distinct: HashSet<FlowKey> = HashSet::new();
    let mut n = 0usize;
    // mask → (masked value → rule), masks in installation order.
    let mut cache: HashMap<FlowKey, HashMap<FlowKey, Option<rqvs_flow::RuleId>>> = HashMap::new();
    let mut masks: Vec<FlowKey> = Vec::new();
    let (mut upcalls, mut mismatches, mut searched) = (0usize, 0usize, 0u64);
    let start = std::time::Instant::now();
    while n < args.packets {
        let Some(p) = reader.next_packet()? else { break };
        n += 1;
        let k = &p.entry.key.wire();
        distinct.insert(*k);
        let hit = masks.iter().find_map(|m| cache[m].get(&k.masked(m)).copied());
        match hit {
            Some(rule) => {
                if rule != c.lookup(k) {
                    mismatches += 1;
                }
            }
            None => {
                upcalls += 1;
                let l = c.lookup_wc(k);
                searched += u64::from(l.subtables_searched);
                let Megaflow { value, mask } = l.megaflow(k);
                if !cache.contains_key(&mask) {
                    masks.push(mask);
                }
                cache.entry(mask).or_default().insert(value, l.rule);
            }
        }
    }
    let megaflows: usize = cache.values().map(HashMap::len).sum();
    let out = crate::report::Out::new(args.json.as_deref());
    out.line(format!("rules file        {}", args.rules.display()));
    out.line(format!("flows (OpenFlow)  {}", c.len()));
    out.line(format!("subtables         {}", c.subtables(0)));
    out.line(format!("trace             {}", path.display()));
    out.line(format!("packets           {n}"));
    out.line(format!("distinct headers  {}", distinct.len()));
    out.line(format!("upcalls           {upcalls}"));
    out.line(format!("megaflows         {megaflows}"));
    out.line(format!("masks             {}", masks.len()));
    out.line(format!("subtables/upcall  {:.1}", searched as f64 / upcalls.max(1) as f64));
    out.line(format!("mismatches        {mismatches}"));
    out.line(format!("time              {:.2} s", start.elapsed().as_secs_f64()));
    if let Some(path_out) = &args.json {
        let v = serde_json::json!({
            "rules_file": args.rules.display().to_string(),
            "trace_file": path.display().to_string(),
            "flows": c.len(),
            "subtables": c.subtables(0),
            "packets": n,
            "distinct_headers": distinct.len(),
            "upcalls": upcalls,
            "megaflows": megaflows,
            "masks": masks.len(),
            "mismatches": mismatches,
        });
        let serde_json::Value::Object(map) = v else { unreachable!("a JSON object literal") };
        crate::report::write_json(path_out, "trace", map)?;
    }
    if mismatches > 0 {
        return Err(Failure(format!("{mismatches} packets hit a megaflow whose rule differs from the slow path's")));
    }
    Ok(())
}
