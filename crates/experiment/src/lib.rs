//! rqvs experiments as a library: what `rqvs replay`, `compare` and the benchmarks run, callable
//! from the CLI, the switch's tests and the Python package alike. Nothing here parses a command
//! line or prints; results are plain structs, errors one line ([`Error`]).
//!
//! - [`inputs`]: rule files (ClassBench or ovs-ofctl), packet files (ClassBench trace, pcap,
//!   pcapng) and the embedded default workload.
//! - [`replay`]: a trace through a datapath design ([`replay::ReplayConfig`], [`replay::prepare`],
//!   [`replay::run_design`], [`replay::rate_search`]): the receive ring of the constant-rate
//!   method, timed rule updates, the time series and the verification of every sampled packet
//!   against the reference classifier of the rule table it saw — around the datapath's one PMD
//!   loop ([`rqvs_datapath::pmd::Pmd`]).
//! - [`mod@bench`]: the classifier benchmark (build, lookup rates, memory, updates, mismatches).
//! - [`coflows`]: the coflow study — flow prediction replayed in time order with a two-core
//!   latency model, on the same PMD loop taken step by step.
//! - [`prediction`]: flow prediction for replays (online, or the oracle over a ground truth).
//! - [`updates`]: the update benchmark (NuevoMatchUP under live updates, checked after the run).
//! - [`verify`]: which packets a classification run checks against the reference.
//! - [`report`]: the JSON reports of replay and compare (`--json`, and the Python package's
//!   dicts); [`gen`]: rule-set and trace generation with their reports.

#![forbid(unsafe_code)]

pub mod bench;
pub mod coflows;
pub mod gen;
pub mod inputs;
pub mod mixed;
pub mod paper;
pub mod prediction;
pub mod replay;
pub mod report;
pub mod updates;
pub mod verify;

pub use replay::{
    prepare, rate_search, run_design, run_design_progress, run_design_with, DesignKind, Prepared, ReplayConfig, Run,
};

/// An experiment's error: one line, naming the file, line or setting it comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

macro_rules! from_display {
    ($($t:ty),*) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Error {
                Error(e.to_string())
            }
        }
    )*};
}

from_display!(rqvs_flow::ParseError, rqvs_classify::ClassifierError, std::io::Error, serde_json::Error);

impl From<String> for Error {
    fn from(s: String) -> Error {
        Error(s)
    }
}

/// The README's examples, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
