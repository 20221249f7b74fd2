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
    /// Input packets (ClassBench trace, pcap or pcapng; plain, xz, gzip or zstd; `-`: stdin),
    /// read as a stream.
    pub input: PathBuf,
    /// Output format.
    #[arg(long)]
    pub to: TraceTo,
    /// Output file (default: stdout for text; required for pcap).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// With --to pcap: the link type written (default ethernet; raw, ipv4, ipv6, null and loop
    /// carry IP packets only, sll and sll2 are Linux cooked captures).
    #[arg(long, value_enum)]
    pub link: Option<LinkArg>,
    /// Write a JSON report to this file (`-` = stdout; then give --output).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// `--link`: the link types `convert trace --to pcap` writes.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LinkArg {
    Ethernet,
    Raw,
    Ipv4,
    Ipv6,
    Null,
    Loop,
    Sll,
    Sll2,
}

impl LinkArg {
    fn link_type(self) -> pcap::LinkType {
        match self {
            LinkArg::Ethernet => pcap::LinkType::Ethernet,
            LinkArg::Raw => pcap::LinkType::Raw,
            LinkArg::Ipv4 => pcap::LinkType::Ipv4,
            LinkArg::Ipv6 => pcap::LinkType::Ipv6,
            LinkArg::Null => pcap::LinkType::Null,
            LinkArg::Loop => pcap::LinkType::Loop,
            LinkArg::Sll => pcap::LinkType::LinuxSll,
            LinkArg::Sll2 => pcap::LinkType::LinuxSll2,
        }
    }
}

/// Options `rqvs convert` accepts but would not use: `--actions` when writing ClassBench rules
/// (which carry none; usage error, [`crate::args::Given`]).
pub fn unused(cmd: &Command, g: &crate::args::Given) -> Result<(), String> {
    match cmd {
        Command::Rules(a) => g.refuse(
            "actions",
            matches!(a.to, RulesTo::Classbench),
            "the actions of OpenFlow flows; ClassBench rules carry none",
        ),
        Command::Trace(a) => {
            g.refuse("link", !matches!(a.to, TraceTo::Pcap), "the link type of a pcap; only with --to pcap")
        }
    }
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
                    rqvs_switch::diag!(
                        "rqvs: warning: {name}: {} of {} rules have no OpenFlow form and were left out (first: rule {id}: {why})",
                        conv.skipped.len(),
                        rules.len()
                    );
                }
                // The converted flows may go to stdout: the summary goes to stderr.
                rqvs_switch::diag!(
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

/// Where converted packets go: a file, or stdout (a broken pipe ends the command quietly).
enum Sink {
    File(std::io::BufWriter<std::fs::File>, PathBuf),
    Stdout(std::io::BufWriter<std::io::Stdout>),
}

impl std::io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::File(f, _) => f.write(buf),
            Sink::Stdout(o) => o.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::File(f, _) => f.flush(),
            Sink::Stdout(o) => o.flush(),
        }
    }
}

impl Sink {
    fn open(output: Option<&Path>) -> Result<Sink, Failure> {
        Ok(match output {
            Some(p) => Sink::File(
                std::io::BufWriter::with_capacity(
                    1 << 20,
                    std::fs::File::create(p).map_err(|e| Failure(format!("{}: cannot write: {e}", p.display())))?,
                ),
                p.to_path_buf(),
            ),
            None => Sink::Stdout(std::io::BufWriter::with_capacity(1 << 20, std::io::stdout())),
        })
    }

    /// The error of a failed write (stdout's end the process as [`report::stdout`] does).
    fn failed(&self, e: std::io::Error) -> Failure {
        match self {
            Sink::File(_, p) => Failure(format!("{}: cannot write: {e}", p.display())),
            Sink::Stdout(_) => report::stdout_failed(&e),
        }
    }
}

/// Streams packets from one format to the other, in memory independent of the input's length.
fn packets(a: &TraceArgs) -> Result<(), Failure> {
    use std::io::Write as _;
    let json_stdout = a.json.as_deref() == Some(Path::new("-"));
    let name = rqvs_flow::io::display_name(&a.input);
    // Neither output format carries in_port: the packets get 1.
    let mut reader = inputs::open_packets(Some(&a.input), 1)?;
    let mut f = Map::new();
    f.insert("input".into(), name.clone().into());
    let output = match a.to {
        TraceTo::Pcap => match &a.output {
            Some(o) => Some(o.as_path()),
            None => return Err(Failure("--to pcap needs --output FILE (pcap is binary)".into())),
        },
        TraceTo::Classbench if a.output.is_none() && json_stdout => {
            return Err(Failure("--json - writes the report to stdout: give --output for the converted file".into()))
        }
        TraceTo::Classbench => a.output.as_deref(),
    };
    let mut sink = Sink::open(output)?;
    let mut n = 0usize;
    match a.to {
        TraceTo::Pcap => {
            let link = a.link.map_or(pcap::LinkType::Ethernet, LinkArg::link_type);
            let mut w = pcap::PcapWriter::new(&mut sink, link).map_err(|e| Failure(format!("{e}")))?;
            while let Some(p) = reader.next_packet()? {
                n += 1;
                w.write_key(&p.entry.key, p.timestamp_ns).map_err(|e| Failure(format!("{e}")))?;
            }
            let (_, stats) = w.finish().map_err(|e| Failure(format!("{e}")))?;
            if stats.ports_dropped > 0 {
                rqvs_switch::diag!(
                    "rqvs: warning: {} packets carry ports on a protocol whose header cannot hold them; their ports are not in the pcap",
                    stats.ports_dropped
                );
            }
            if stats.not_carried > 0 {
                rqvs_switch::diag!(
                    "rqvs: warning: {} packets are not IP, which link type {} cannot carry; they are not in the pcap",
                    stats.not_carried,
                    pcap::link::link_type_name(link.number())
                );
            }
            f.insert("ports_dropped".into(), stats.ports_dropped.into());
            f.insert("not_carried".into(), stats.not_carried.into());
            f.insert("link_type".into(), link.number().into());
        }
        TraceTo::Classbench => {
            while let Some(p) = reader.next_packet()? {
                n += 1;
                let line = trace::write_trace(std::slice::from_ref(&p.entry));
                sink.write_all(line.as_bytes()).map_err(|e| sink.failed(e))?;
            }
        }
    }
    sink.flush().map_err(|e| sink.failed(e))?;
    f.insert("packets".into(), n.into());
    if let Some(c) = reader.capture_stats() {
        f.insert("capture".into(), report::capture_json(&c));
        if c.skipped() > 0 {
            rqvs_switch::diag!(
                "rqvs: warning: {name}: skipped {} truncated and {} malformed frames",
                c.truncated,
                c.malformed
            );
        }
    }
    if let Some(j) = &a.json {
        report::write_json(j, "convert trace", f)?;
    }
    Ok(())
}
