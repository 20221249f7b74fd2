//! `rqvs convert`: rule files and packet files between formats.

use std::path::{Path, PathBuf};

use clap::ValueEnum;
use rqvs_flow::formats::{self, classbench, ofctl, pcap, trace, RuleFormat};
use rqvs_flow::{Actions, Rule};
use serde_json::Map;

use crate::report;
use crate::Failure;
use rqvs_experiment::inputs;

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Rule files: ClassBench → ofctl flows (exact range-to-prefix expansion, 16-bit priorities
    /// with the same winners, cookie = ClassBench rule id), or any rule file → ClassBench.
    Rules(RulesArgs),
    /// Packet files: ClassBench trace or pcap/pcapng → pcap (64-byte frames) or ClassBench trace.
    Trace(TraceArgs),
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum RulesTo {
    Ofctl,
    Classbench,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum TraceTo {
    Pcap,
    Classbench,
}

#[derive(clap::Args, Debug)]
pub struct RulesArgs {
    /// Input rule file (ClassBench or ofctl, plain or .xz).
    pub input: PathBuf,
    /// Output format.
    #[arg(long)]
    pub to: RulesTo,
    /// Output file (default: stdout).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Actions given to every flow converted from ClassBench (ofctl syntax).
    #[arg(long, default_value = "drop")]
    pub actions: String,
    /// Write a JSON report to this file (`-` = stdout; then give --output).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct TraceArgs {
    /// Input packets (ClassBench trace, pcap or pcapng, plain or .xz).
    pub input: PathBuf,
    /// Output format.
    #[arg(long)]
    pub to: TraceTo,
    /// Output file (default: stdout for text; required for pcap).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// in_port given to every packet read.
    #[arg(long, default_value_t = 1)]
    pub in_port: u32,
    /// Write a JSON report to this file (`-` = stdout; then give --output).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub fn run(cmd: &Command) -> Result<(), Failure> {
    match cmd {
        Command::Rules(a) => rules(a),
        Command::Trace(a) => packets(a),
    }
}

fn emit(output: Option<&Path>, json_to_stdout: bool, bytes: &[u8]) -> Result<(), Failure> {
    match output {
        Some(p) => std::fs::write(p, bytes).map_err(|e| Failure(format!("{}: cannot write: {e}", p.display()))),
        None if json_to_stdout => {
            Err(Failure("--json - writes the report to stdout: give --output for the converted file".into()))
        }
        None => {
            crate::report::stdout(bytes);
            Ok(())
        }
    }
}

fn parse_actions(text: &str) -> Result<Actions, Failure> {
    let flow = format!("actions={text}");
    Ok(ofctl::parse_flow("--actions", 1, &flow, 0)?.actions)
}

fn rules(a: &RulesArgs) -> Result<(), Failure> {
    let json_stdout = a.json.as_deref() == Some(Path::new("-"));
    let name = a.input.display().to_string();
    let text = rqvs_flow::io::read_text(&a.input)?;
    let from = formats::sniff_rule_format(&text);
    let rules: Vec<Rule> = formats::parse_rules(&name, &text)?;
    let mut f = Map::new();
    f.insert("input".into(), name.clone().into());
    f.insert("rules".into(), rules.len().into());
    match a.to {
        RulesTo::Ofctl => {
            let table = if from == RuleFormat::ClassBench {
                let conv = rqvs_flow::convert::classbench_to_openflow(&rules, &parse_actions(&a.actions)?)?;
                if let Some((id, why)) = conv.skipped.first() {
                    eprintln!(
                        "rqvs: warning: {name}: {} of {} rules have no OpenFlow form and were left out (first: rule {id}: {why})",
                        conv.skipped.len(),
                        rules.len()
                    );
                }
                // The converted flows may go to stdout: the summary goes to stderr.
                eprintln!(
                    "rqvs: {name}: {} rules → {} flows ({} converted, {} added by port-range expansion, {} skipped, max priority {})",
                    rules.len(), conv.flows.len(), conv.converted, conv.expansion(), conv.skipped.len(), conv.max_priority
                );
                f.insert("flows".into(), conv.flows.len().into());
                f.insert("converted".into(), conv.converted.into());
                f.insert("expansion".into(), conv.expansion().into());
                f.insert("skipped".into(), conv.skipped.len().into());
                f.insert("max_priority".into(), conv.max_priority.into());
                conv.flows
            } else {
                rules
            };
            let text = ofctl::write_flows(&table).map_err(|e| Failure(format!("{name}: {e}")))?;
            if a.output.is_some() || json_stdout {
                emit(a.output.as_deref(), json_stdout, text.as_bytes())?;
            } else {
                crate::report::stdout(text.as_bytes());
            }
        }
        RulesTo::Classbench => {
            let text = classbench::write_rules(&rules).map_err(|e| Failure(format!("{name}: {e}")))?;
            emit(a.output.as_deref(), json_stdout, text.as_bytes())?;
        }
    }
    if let Some(p) = &a.json {
        report::write_json(p, "convert rules", f)?;
    }
    Ok(())
}

fn packets(a: &TraceArgs) -> Result<(), Failure> {
    let json_stdout = a.json.as_deref() == Some(Path::new("-"));
    let p = inputs::load_packets(Some(&a.input), a.in_port)?;
    let mut f = Map::new();
    f.insert("input".into(), a.input.display().to_string().into());
    f.insert("packets".into(), p.entries.len().into());
    if let Some(c) = &p.capture {
        f.insert("capture".into(), report::capture_json(c));
        if c.truncated > 0 || c.non_ethernet > 0 {
            eprintln!(
                "rqvs: warning: {}: skipped {} truncated and {} non-Ethernet frames",
                a.input.display(),
                c.truncated,
                c.non_ethernet
            );
        }
    }
    match a.to {
        TraceTo::Pcap => {
            let Some(output) = &a.output else {
                return Err(Failure("--to pcap needs --output FILE (pcap is binary)".into()));
            };
            let keys: Vec<_> = p.entries.iter().map(|e| e.key).collect();
            let (bytes, stats) = pcap::write_pcap(&keys, None);
            if stats.ports_dropped > 0 {
                eprintln!(
                    "rqvs: warning: {} packets carry ports on a protocol whose header cannot hold them; their ports are not in the pcap",
                    stats.ports_dropped
                );
            }
            f.insert("ports_dropped".into(), stats.ports_dropped.into());
            emit(Some(output), json_stdout, &bytes)?;
        }
        TraceTo::Classbench => {
            emit(a.output.as_deref(), json_stdout, trace::write_trace(&p.entries).as_bytes())?;
        }
    }
    if let Some(j) = &a.json {
        report::write_json(j, "convert trace", f)?;
    }
    Ok(())
}
