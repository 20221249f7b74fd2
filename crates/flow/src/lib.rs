//! # rqvs-flow: the flow layer
//!
//! Everything above this layer speaks in the types defined here:
//!
//! - [`FlowKey`] — one packet's header fields (in_port, dl_src, dl_dst, dl_type, vlan_tci, nw_src,
//!   nw_dst, nw_proto, nw_tos, nw_frag, tp_src, tp_dst, tcp_flags), fixed-size and `Copy`. The same
//!   type is used as a mask.
//! - [`field`] — the OpenFlow match fields, each described once (name, member, width, OXM and
//!   NXM codes, prerequisites, text format), as OVS's meta-flow table.
//! - [`Match`] — value/mask on every field plus native inclusive ranges on the two ports.
//! - [`Rule`] — `{ id, priority, matches, actions }` and the **winner rule** used everywhere:
//!   highest priority wins, equal priority → lowest id ([`Rule::beats`]).
//! - [`formats`] — readers and writers for ClassBench rules and traces, ovs-ofctl flows, pcap and
//!   pcapng, and the ClassBench → OpenFlow conversion. Errors name file, line, column and what was
//!   expected ([`ParseError`]).
//! - [`prefix`] — range ↔ prefix arithmetic.
//! - [`rng`] — the project's seeded generator (xoshiro256**): every random choice in rqvs is
//!   drawn from one of these, so a seed names the same run whatever the versions of external
//!   crates.
//!
//! With the `serde` feature (off by default: no report of rqvs serializes these types, and a
//! library user who does not either should not compile serde), [`FlowKey`], [`Match`],
//! [`PortRange`], [`Rule`], [`RuleId`], [`Actions`] and [`Action`] implement `Serialize` and
//! `Deserialize`; deserializing checks what the constructors check (a value inside its mask, a
//! port range with `lo <= hi`) and refuses what they refuse.
//!
//! This crate has no `unsafe` code.
#![forbid(unsafe_code)]

pub mod convert;
pub mod error;
pub mod field;
pub mod formats;
pub mod frame;
pub mod group;
pub mod io;
pub mod key;
pub mod matching;
pub mod prefix;
pub mod rng;
pub mod rule;
#[cfg(feature = "serde")]
mod serde_impls;

pub use error::{ParseError, Position, Result};
pub use key::FlowKey;
pub use matching::{Match, MatchError, PortRange};
pub use rule::{Action, Actions, Rule, RuleId};

/// The README's examples, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
