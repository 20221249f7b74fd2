//! # rqvs-workload: the workload layer
//!
//! Makes the inputs the layers above measure themselves on:
//!
//! - [`seedfile`] — the 12 ClassBench parameter ("seed") files, parsed with `file:line` errors.
//! - [`rules`] — ClassBench-compatible rule-set generation (Taylor & Turner, ToN 2007): the same
//!   algorithm as the original `db_generator -bc`, re-implemented to run in O(n · 33) and seeded.
//! - [`ofseed`], [`ofrules`] — ClassBench-ng's OpenFlow rule-sets (Matoušek et al., ANCS 2017):
//!   the `-openflow` section of the `of1`/`of2` seeds, and rules with in_port, MACs, VLANs and
//!   ToS next to the 5-tuple, drawn the ClassBench-ng way.
//! - [`ipv6`] — IPv6 5-tuple sets from the classic seeds, with ClassBench-ng's `-6` prefixes.
//! - [`stats`] — the statistics generated sets are compared on (prefix-length histograms, port
//!   classes, protocol mix, distinct tuples).
//! - [`trace`] — header traces: headers drawn inside a chosen rule (or at its corners, as the
//!   original), Pareto bursts with a per-header cap, Zipf or uniform flow popularity; the intended
//!   rule is recorded and the true winner computed.
//! - [`map`] — maps the 5-tuples of a real capture onto rules, keeping order and timing.
//! - [`updates`] — insert/remove/modify streams drawn from a held-out part of a rule-set, in a
//!   small documented text format.
//! - [`coflow`] — coflow workloads (base flows and associated flows between pod groups, the
//!   study's flow-size distributions, a coflowiness knob) with their load-balancer rules and the
//!   ground truth of which flows follow which.
//!
//! Randomness comes from [`rng::Rng`], a self-contained xoshiro256** generator (defined in
//! `rqvs-flow`, the lowest crate, so that every layer draws from the same one), so a given
//! `--rng-seed` produces the same output whatever the versions of external crates.
#![forbid(unsafe_code)]

pub mod attack;
pub mod coflow;
pub mod ipv6;
pub mod map;
pub mod ofrules;
pub mod ofseed;
pub mod pipeline;
pub use rqvs_flow::rng;
pub mod rules;
pub mod seedfile;
pub mod smoothing;
pub mod stats;
pub mod trace;
pub mod updates;

/// The README's examples, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
