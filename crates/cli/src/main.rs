//! `rqvs`: the command line of the rqvs userspace datapath.
//!
//! Exit codes: 0 success, 1 failure (bad input, mismatches against the reference), 2 usage.

mod bench;
mod bench_updates;
mod classify;
mod compare;
mod convert;
mod gen;
mod inputs;
mod plot;
mod replay;
mod report;
mod trace;
mod train;
mod verify;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// rqvs: a userspace virtual-switch datapath whose classifier can be a learned index.
///
/// With no subcommand, classifies the embedded default workload (ClassBench acl1, 1K rules, and
/// its trace) and verifies every packet against the reference classifier.
#[derive(Parser, Debug)]
#[command(name = "rqvs", version, about, long_about = None)]
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
    /// Workloads: ClassBench-compatible rules, traces, capture mapping, update streams.
    #[command(subcommand)]
    Gen(gen::Command),
    /// Train NuevoMatchUP over a rule file and save the model (for `classify --model`).
    Train(train::Args),
    /// Benchmarks: classifiers side by side.
    #[command(subcommand)]
    Bench(bench::Command),
    /// The OpenFlow slow path: a packet's rule and megaflow, or megaflow counts over a trace.
    Trace(trace::Args),
    /// Replay a trace through a datapath design (orig, cflows): throughput, counters, time series.
    Replay(replay::Args),
    /// Several datapath designs on the same rules and trace: speedups, counters, one plot.
    Compare(compare::Args),
}

/// A failure to report: a one-line message and exit code 1.
#[derive(Debug)]
pub struct Failure(pub String);

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure(e.to_string())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        None => classify::run(&classify::Args::default()),
        Some(Command::Classify(args)) => classify::run(&args),
        Some(Command::Convert(cmd)) => convert::run(&cmd),
        Some(Command::Gen(cmd)) => gen::run(&cmd),
        Some(Command::Bench(cmd)) => bench::run(&cmd),
        Some(Command::Train(args)) => train::run(&args),
        Some(Command::Trace(args)) => trace::run(&args),
        Some(Command::Replay(args)) => replay::run(&args),
        Some(Command::Compare(args)) => compare::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(msg)) => {
            eprintln!("rqvs: error: {msg}");
            ExitCode::from(1)
        }
    }
}
