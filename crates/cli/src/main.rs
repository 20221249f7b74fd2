//! `rqvs`: the command line of the rqvs userspace datapath.
//!
//! Exit codes: 0 success, 1 failure (bad input, mismatches against the reference), 2 usage
//! (unknown options or values, numbers outside the range their `--help` documents).
//!
//! Output: reports go to stdout (to stderr when `--json -` puts the JSON object there), through
//! `report::stdout`, which ends the process quietly with 0 when the reader has gone (`EPIPE`,
//! `rqvs … | head`) and with a one-line error and 1 when stdout cannot be written (`ENOSPC`).

mod alloc;
mod args;
mod bench;
mod bench_openflow;
mod bench_updates;
mod classify;
mod coflows;
mod compare;
mod convert;
mod daemon;
mod docs;
mod dropin;
mod gen;
mod gen_pipeline;
mod paper;
mod plot;
mod prefixes;
mod replay;
mod report;
mod send;
mod switch;
mod switch_channel;
mod trace;
mod train;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// The allocator of the `rqvs` binary: mimalloc for small blocks, the system's for large ones
/// (`alloc.rs`).
#[global_allocator]
static ALLOCATOR: alloc::Split = alloc::Split;

/// rqvs: a userspace virtual-switch datapath whose classifier can be a learned index.
///
/// With no subcommand, classifies the embedded default workload (ClassBench acl1, 1K rules, and
/// its trace) and verifies every packet against the reference classifier.
#[derive(Parser, Debug)]
#[command(name = "rqvs", version = rqvs_experiment::report::VERSION, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Classify a trace against a rule-set and verify the winners against the reference.
    Classify(classify::Args),
    /// Convert between formats: ClassBench rules → ofctl flows, traces ↔ pcap.
    #[command(subcommand)]
    Convert(convert::Command),
    /// Workloads: ClassBench-compatible rules, traces, capture mapping, update streams, coflows.
    #[command(subcommand)]
    Gen(gen::Command),
    /// Train NuevoMatchUP over a rule file and save the model (for `classify --model`).
    Train(train::Args),
    /// Benchmarks: classifiers side by side.
    #[command(subcommand)]
    Bench(bench::Command),
    /// The OpenFlow slow path: a packet's rule and megaflow, or megaflow counts over a trace.
    Trace(trace::Args),
    /// Replay a trace through a datapath design (orig, ccache, cflows): throughput, counters, time
    /// series; flow prediction on ORIG with --predict online|oracle.
    Replay(replay::Args),
    /// Several datapath designs on the same rules and trace: speedups, counters, one plot.
    Compare(compare::Args),
    /// The NSDI'22 paper's evaluation on the ClassBench data: each figure beside the paper's
    /// numbers, one Markdown page (partial: the figures built so far; the page lists the rest).
    Paper(paper::Args),
    /// Flow prediction for coflows: upcalls, first-packet latency and handler CPU over
    /// coflowiness, prediction off / online / oracle / preload (time-ordered replay with arrival
    /// times, ORIG). `replay --predict` runs the same predictor on one trace, without latencies.
    Coflows(coflows::Args),
    /// Run a switch on real ports (AF_PACKET, AF_XDP) or capture files: PMD threads, a
    /// datapath design, the rules' actions applied to frames, a management socket.
    Switch(switch::Args),
    /// Send a capture's frames out of an interface, looping, as fast as one core can or at a set
    /// rate (an AF_PACKET TX ring): the traffic generator of the switch benchmarks.
    Send(send::Args),
    /// Drop every frame arriving on an interface with an XDP program and count them: the far
    /// end for measuring a sender (`rqvs send`, tcpreplay) on a veth.
    Sink(send::SinkArgs),
    /// Talk to a running switch's management socket (pmd-stats-show, dump-flows, show,
    /// ofproto/trace, add-flows, del-flows, exit, ...).
    Ctl(switch::CtlArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on stdout.
    Completions(docs::CompletionsArgs),
    /// Print the manual page (roff) of rqvs, or of one of its commands, on stdout.
    Man(docs::ManArgs),
}

/// A failure to report: a one-line message and exit code 1.
#[derive(Debug)]
pub struct Failure(pub String);

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure(e.to_string())
    }
}

/// Options the command accepts but would not use with the others given (each command's
/// `unused`; [`args::Given`]).
fn unused(command: &Command, given: &args::Given) -> Result<(), String> {
    match command {
        Command::Classify(a) => classify::unused(a, given),
        Command::Convert(c) => convert::unused(c, given),
        Command::Trace(a) => trace::unused(a, given),
        Command::Replay(a) => replay::unused(a, given),
        Command::Compare(a) => compare::unused(a, given),
        Command::Coflows(a) => coflows::unused(a, given),
        Command::Switch(a) => switch::unused(a, given),
        Command::Gen(c) => gen::unused(c, given),
        // Every option of these is used whatever the others say.
        Command::Ctl(a) => switch::check_ctl(a),
        Command::Train(_)
        | Command::Send(_)
        | Command::Sink(_)
        | Command::Paper(_)
        | Command::Bench(_)
        | Command::Completions(_)
        | Command::Man(_) => Ok(()),
    }
}

fn main() -> ExitCode {
    alloc::tune();
    let parsed = Cli::command().try_get_matches().and_then(|m| Ok((Cli::from_arg_matches(&m)?, args::Given::of(&m))));
    let (cli, given) = match parsed {
        Ok(p) => p,
        // --help and --version go to stdout like every report (a full stdout is an error there
        // too); usage errors to stderr, exit code 2.
        Err(e) if !e.use_stderr() => {
            report::stdout(e.render().to_string().as_bytes());
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(2);
        }
    };
    if let Some(Err(e)) = cli.command.as_ref().map(|c| unused(c, &given)) {
        rqvs_switch::diag!("rqvs: error: {e}");
        return ExitCode::from(2);
    }
    // A kernel forced by the environment that this CPU lacks is a usage error, said once.
    if let Err(e) = rqvs_rqrmi::Kernel::from_env() {
        rqvs_switch::diag!("rqvs: error: {e}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        // What rqvs is for: the three datapath designs side by side on the embedded workload.
        None => {
            report::stdout(b"rqvs: ORIG, CCACHE and CFLOWS on the embedded ClassBench acl1_1k workload (`rqvs compare`; `rqvs --help` for the rest)\n\n");
            match Cli::parse_from(["rqvs", "compare", "--passes", "3"]).command {
                Some(Command::Compare(args)) => compare::run(&args),
                _ => unreachable!("parsed as compare"),
            }
        }
        Some(Command::Classify(args)) => classify::run(&args),
        Some(Command::Convert(cmd)) => convert::run(&cmd),
        Some(Command::Gen(cmd)) => gen::run(&cmd),
        Some(Command::Bench(cmd)) => bench::run(&cmd),
        Some(Command::Train(args)) => train::run(&args),
        Some(Command::Trace(args)) => trace::run(&args),
        Some(Command::Replay(args)) => replay::run(&args),
        Some(Command::Compare(args)) => compare::run(&args),
        Some(Command::Paper(args)) => paper::run(&args),
        Some(Command::Coflows(args)) => coflows::run_cmd(&args),
        Some(Command::Switch(args)) => switch::run(&args),
        Some(Command::Ctl(args)) => switch::run_ctl(&args),
        Some(Command::Send(args)) => send::run(&args),
        Some(Command::Sink(args)) => send::run_sink(&args),
        Some(Command::Completions(args)) => docs::completions::<Cli>(&args),
        Some(Command::Man(args)) => docs::man::<Cli>(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(msg)) => {
            rqvs_switch::diag!("rqvs: error: {msg}");
            ExitCode::from(1)
        }
    }
}
