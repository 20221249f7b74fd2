//! The OpenFlow codec of rqvs: OpenFlow 1.3 and 1.4 messages to and from bytes (and 1.0 with
//! Nicira's extensions, [`of10`]). No I/O: the
//! switch's channel (and tests, and fuzzing) hand it whole messages and get bytes back.
//!
//! Layout (one module per part of the protocol):
//! - [`wire`] — the byte cursor every decoder reads through (bounds-checked, never panics) and
//!   the writer every encoder writes through; the 8-byte header.
//! - [`error`] — [`DecodeError`] (what is wrong with the bytes), [`EncodeError`] (what cannot be
//!   written) and [`OfError`], the OpenFlow ERROR type and code a switch answers a bad message with.
//! - [`oxm`] — `ofp_match` (OXM TLVs, with OVS's NXM/ONF fields for `nw_frag` and `tcp_flags`)
//!   to and from `rqvs_flow::Match`.
//! - [`action`] — actions and instructions to and from `rqvs_flow::Actions`.
//! - [`flow_mod`] — FLOW_MOD, FLOW_REMOVED, PACKET_IN, PACKET_OUT and the FLOW and AGGREGATE
//!   multipart bodies.
//! - [`message`] — [`Message`], [`decode`] and [`encode`] of whole messages, HELLO and version
//!   [`negotiate`]; the types not handled (METER_MOD, TABLE_MOD, ...) decode to
//!   [`Message::Other`] with their raw body.
//! - [`group`] — GROUP_MOD and the GROUP, GROUP_DESC, GROUP_FEATURES and METER_FEATURES
//!   multipart bodies.
//! - [`meter`] — METER_MOD (carried as [`Message::Other`]) and the METER and METER_CONFIG
//!   multipart bodies (carried as the multipart `Other` bodies).
//! - [`async_config`] — SET_ASYNC / GET_ASYNC_REPLY and PORT_MOD.
//! - [`port`] — `ofp_port` (1.3's fixed 64 bytes, 1.4's with properties) and 1.4 properties.
//! - [`multipart`] — MULTIPART requests and replies: DESC, FLOW, AGGREGATE, TABLE, PORT_STATS,
//!   PORT_DESC, TABLE_FEATURES ([`table_features`]), GROUP, GROUP_DESC, GROUP_FEATURES,
//!   METER_FEATURES ([`group`]); the others (METER, QUEUE, ...) raw.
//! - [`table_features`] — the TABLE_FEATURES multipart body, and what rqvs's table supports.
//! - [`bundle`] — BUNDLE_CONTROL and BUNDLE_ADD_MESSAGE (1.4, and ONF EXT-230 in 1.3).
//! - [`of10`] — OpenFlow 1.0 with the Nicira extensions plain `ovs-ofctl` uses (no `-O`):
//!   its messages to and from the 1.3-shaped [`Message`] the switch handles.
//! - [`nxm`] — Open vSwitch's `nx_match` (NXM), the match of those extensions, over the OXM
//!   TLV codec.
//!
//! Decoding never panics, whatever the bytes; every length field is checked against what is
//! there before anything is read.

pub mod action;
pub mod async_config;
pub mod bundle;
pub mod error;
pub mod flow_mod;
pub mod flow_monitor;
pub mod group;
pub mod message;
pub mod meter;
pub mod multipart;
pub mod nxm;
pub mod of10;
pub mod of10_async;
pub mod oxm;
pub mod port;
pub mod table_features;
pub mod wire;

pub use error::{DecodeError, EncodeError, OfError};
pub use message::{decode, encode, negotiate, Message};
pub use wire::{Header, Reader, Writer};

/// OpenFlow 1.0's wire version.
pub const OFP10: u8 = of10::OFP10;
/// OpenFlow 1.3's wire version.
pub const OFP13: u8 = 0x04;
/// OpenFlow 1.4's wire version.
pub const OFP14: u8 = 0x05;
/// The largest message: the header's 16-bit length.
pub const MAX_MESSAGE: usize = u16::MAX as usize;

/// The README's examples, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
