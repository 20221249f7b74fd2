//! The flow messages' bodies (everything after the 8-byte header), OpenFlow 1.3 and 1.4:
//! [`FlowMod`] (`OFPT_FLOW_MOD`), [`FlowRemoved`] (`OFPT_FLOW_REMOVED`), [`PacketIn`]
//! (`OFPT_PACKET_IN`), [`PacketOut`] (`OFPT_PACKET_OUT`), and the bodies of the `OFPMP_FLOW` and
//! `OFPMP_AGGREGATE` multipart messages after their multipart header ([`FlowStatsRequest`],
//! [`FlowStats`], [`AggregateStats`]).
//!
//! Each type has `decode(version, body)` and `encode(&self, version, w)`; the message enum puts
//! the header in front. Matches and actions go through [`crate::oxm`] and [`crate::action`]; port
//! numbers in requests (`out_port`, `in_port` of a packet-out) are kept as OpenFlow's 32-bit
//! numbers (see [`crate::oxm::port_from_of`]). The 1.3 and 1.4 layouts differ only in FLOW_MOD's
//! and flow stats' `importance` (1.4; padding in 1.3, which decodes to 0 and must be 0 to encode).
//!
//! A multipart FLOW reply that does not fit one message is split by the caller: [`FlowStats`]
//! encodes one entry.

use rqvs_flow::{Actions, Match, Rule};

use crate::action::{check_actions, decode_actions, decode_instructions_for, encode_actions, encode_instructions};
use crate::error::{DecodeError, OfError};
use crate::oxm::{decode_match, enc_err, encode_match, reject, EncodeError, OFPP_ANY};
use crate::wire::{Reader, Writer};
use crate::{OFP13, OFP14};

/// `OFP_NO_BUFFER`: the packet is not buffered in the switch (rqvs never buffers).
pub const OFP_NO_BUFFER: u32 = 0xffff_ffff;
/// `OFPG_ANY`: no group filter.
pub const OFPG_ANY: u32 = 0xffff_ffff;
/// `OFPTT_ALL`: every table (deletes and stats requests).
pub const OFPTT_ALL: u8 = 0xff;

/// `OFPFF_SEND_FLOW_REM`: send FLOW_REMOVED when the flow goes.
pub const OFPFF_SEND_FLOW_REM: u16 = 1 << 0;
/// `OFPFF_CHECK_OVERLAP`: refuse an add that overlaps a flow of the same priority.
pub const OFPFF_CHECK_OVERLAP: u16 = 1 << 1;
/// `OFPFF_RESET_COUNTS`: reset the counters of the flows a modify changes.
pub const OFPFF_RESET_COUNTS: u16 = 1 << 2;
/// `OFPFF_NO_PKT_COUNTS`: the switch need not count packets.
pub const OFPFF_NO_PKT_COUNTS: u16 = 1 << 3;
/// `OFPFF_NO_BYT_COUNTS`: the switch need not count bytes.
pub const OFPFF_NO_BYT_COUNTS: u16 = 1 << 4;
const ALL_FLAGS: u16 = 0x1f;

/// `OFPRR_*`: why a flow was removed (1.3; 1.4 adds `METER_DELETE` 4 and `EVICTION` 5).
pub const OFPRR_IDLE_TIMEOUT: u8 = 0;
/// `OFPRR_HARD_TIMEOUT`.
pub const OFPRR_HARD_TIMEOUT: u8 = 1;
/// `OFPRR_DELETE`.
pub const OFPRR_DELETE: u8 = 2;
/// `OFPRR_GROUP_DELETE`.
pub const OFPRR_GROUP_DELETE: u8 = 3;

/// `OFPR_*`: why a packet is sent to the controller (1.3: `NO_MATCH`, `ACTION`, `INVALID_TTL`;
/// 1.4 adds `ACTION_SET` 3, `GROUP` 4, `PACKET_OUT` 5).
pub const OFPR_NO_MATCH: u8 = 0;
/// `OFPR_ACTION`.
pub const OFPR_ACTION: u8 = 1;
/// `OFPR_INVALID_TTL`.
pub const OFPR_INVALID_TTL: u8 = 2;
/// `OFPR_PACKET_OUT` (1.4): a packet-out's action sent it.
pub const OFPR_PACKET_OUT: u8 = 5;
/// 1.4's names for 0 and 1: `OFPR_TABLE_MISS` is 1.3's `NO_MATCH`, `OFPR_APPLY_ACTION` its
/// `ACTION` (same numbers).
pub const OFPR_TABLE_MISS: u8 = OFPR_NO_MATCH;
/// See [`OFPR_TABLE_MISS`].
pub const OFPR_APPLY_ACTION: u8 = OFPR_ACTION;

fn check_version(version: u8) -> Result<(), DecodeError> {
    if version == OFP13 || version == OFP14 {
        Ok(())
    } else {
        Err(DecodeError::BadVersion(version))
    }
}

fn check_encode_version(version: u8) -> Result<(), EncodeError> {
    if version == OFP13 || version == OFP14 {
        Ok(())
    } else {
        enc_err(format!("OpenFlow version {version:#04x}: rqvs encodes 1.3 (0x04) and 1.4 (0x05)"))
    }
}

/// `ofp_flow_mod_command`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlowModCommand {
    /// `OFPFC_ADD` (0).
    Add,
    /// `OFPFC_MODIFY` (1): every matching flow.
    Modify,
    /// `OFPFC_MODIFY_STRICT` (2): the flow with this exact match and priority.
    ModifyStrict,
    /// `OFPFC_DELETE` (3).
    Delete,
    /// `OFPFC_DELETE_STRICT` (4).
    DeleteStrict,
}

impl FlowModCommand {
    /// The wire value.
    pub fn code(self) -> u8 {
        match self {
            FlowModCommand::Add => 0,
            FlowModCommand::Modify => 1,
            FlowModCommand::ModifyStrict => 2,
            FlowModCommand::Delete => 3,
            FlowModCommand::DeleteStrict => 4,
        }
    }

    /// The command of a wire value, if it is one.
    pub fn from_code(c: u8) -> Option<FlowModCommand> {
        Some(match c {
            0 => FlowModCommand::Add,
            1 => FlowModCommand::Modify,
            2 => FlowModCommand::ModifyStrict,
            3 => FlowModCommand::Delete,
            4 => FlowModCommand::DeleteStrict,
            _ => return None,
        })
    }
}

/// An `OFPT_FLOW_MOD` body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowMod {
    /// The flow's cookie (add), or the cookie to filter on (modify/delete, with `cookie_mask`).
    pub cookie: u64,
    /// Which cookie bits must agree for modify/delete; 0 = no cookie filter.
    pub cookie_mask: u64,
    /// The table; [`OFPTT_ALL`] for deletes in every table.
    pub table_id: u8,
    /// Add, modify or delete (strict or not).
    pub command: FlowModCommand,
    /// Seconds without a packet before the flow expires (0 = never).
    pub idle_timeout: u16,
    /// Seconds before the flow expires (0 = never).
    pub hard_timeout: u16,
    /// The flow's priority.
    pub priority: u16,
    /// A buffered packet to apply the flow to, or [`OFP_NO_BUFFER`].
    pub buffer_id: u32,
    /// Delete filter: only flows that output to this port (OpenFlow number; [`OFPP_ANY`] = none).
    pub out_port: u32,
    /// Delete filter: only flows that output to this group ([`OFPG_ANY`] = none).
    pub out_group: u32,
    /// `OFPFF_*` bits.
    pub flags: u16,
    /// 1.4's eviction importance (0 in 1.3).
    pub importance: u16,
    /// The match.
    pub matches: Match,
    /// The actions (from the instructions: see [`crate::action`]).
    pub actions: Actions,
}

impl FlowMod {
    /// An add of `matches` → `actions` at `priority`, with OVS's defaults for the rest (no
    /// buffer, `out_port`/`out_group` any, table 0, no timeouts, no flags).
    pub fn add(priority: u16, matches: Match, actions: Actions) -> FlowMod {
        FlowMod {
            cookie: 0,
            cookie_mask: 0,
            table_id: 0,
            command: FlowModCommand::Add,
            idle_timeout: 0,
            hard_timeout: 0,
            priority,
            buffer_id: OFP_NO_BUFFER,
            out_port: OFPP_ANY,
            out_group: OFPG_ANY,
            flags: 0,
            importance: 0,
            matches,
            actions,
        }
    }

    /// The flow-mods that make `rule` with `command`: one per element of
    /// [`Match::expand_port_ranges`] (OpenFlow has no port ranges; the same split
    /// `ofctl::format_flows` writes one line per element of), with the rule's priority, cookie
    /// and table. Fails when the priority does not fit 16 bits.
    pub fn from_rule(rule: &Rule, command: FlowModCommand) -> Result<Vec<FlowMod>, EncodeError> {
        let Ok(priority) = u16::try_from(rule.priority) else {
            return enc_err(format!("rule {}: priority {} does not fit OpenFlow's 16 bits", rule.id, rule.priority));
        };
        Ok(rule
            .matches
            .expand_port_ranges()
            .into_iter()
            .map(|m| FlowMod {
                cookie: rule.cookie,
                table_id: rule.table,
                command,
                ..FlowMod::add(priority, m, rule.actions.clone())
            })
            .collect())
    }

    /// The rule this flow-mod adds, with id `id`.
    pub fn to_rule(&self, id: u32) -> Rule {
        self.clone().into_rule(id)
    }

    /// [`FlowMod::to_rule`], the flow-mod's actions moved into the rule.
    pub fn into_rule(self, id: u32) -> Rule {
        Rule {
            cookie: self.cookie,
            table: self.table_id,
            ..Rule::new(id, u32::from(self.priority), self.matches, self.actions)
        }
    }

    /// Decodes the body of a FLOW_MOD of `version`.
    pub fn decode(version: u8, body: &[u8]) -> Result<FlowMod, DecodeError> {
        check_version(version)?;
        let mut r = Reader::new(body, "ofp_flow_mod");
        let cookie = r.u64()?;
        let cookie_mask = r.u64()?;
        let table_id = r.u8()?;
        let command = r.u8()?;
        let idle_timeout = r.u16()?;
        let hard_timeout = r.u16()?;
        let priority = r.u16()?;
        let buffer_id = r.u32()?;
        let out_port = r.u32()?;
        let out_group = r.u32()?;
        let flags = r.u16()?;
        let importance = r.u16()?;
        let importance = if version == OFP14 { importance } else { 0 };
        let Some(command) = FlowModCommand::from_code(command) else {
            return reject(format!("flow_mod command {command}"), OfError::FLOW_MOD_FAILED_BAD_COMMAND);
        };
        if flags & !ALL_FLAGS != 0 {
            return reject(format!("flow_mod flags {flags:#x} has unknown bits"), OfError::FLOW_MOD_FAILED_BAD_FLAGS);
        }
        let matches = decode_match(&mut r)?;
        let actions = decode_instructions_for(r.rest(), &matches)?;
        if matches!(command, FlowModCommand::Add | FlowModCommand::Modify | FlowModCommand::ModifyStrict) {
            check_actions(&matches, &actions)?;
        }
        Ok(FlowMod {
            cookie,
            cookie_mask,
            table_id,
            command,
            idle_timeout,
            hard_timeout,
            priority,
            buffer_id,
            out_port,
            out_group,
            flags,
            importance,
            matches,
            actions,
        })
    }

    /// Writes the body of a FLOW_MOD of `version`.
    pub fn encode(&self, version: u8, w: &mut Writer) -> Result<(), EncodeError> {
        check_encode_version(version)?;
        if version == OFP13 && self.importance != 0 {
            return enc_err("importance is OpenFlow 1.4 (1.3 has padding there)");
        }
        w.u64(self.cookie);
        w.u64(self.cookie_mask);
        w.u8(self.table_id);
        w.u8(self.command.code());
        w.u16(self.idle_timeout);
        w.u16(self.hard_timeout);
        w.u16(self.priority);
        w.u32(self.buffer_id);
        w.u32(self.out_port);
        w.u32(self.out_group);
        w.u16(self.flags);
        w.u16(self.importance);
        encode_match(&self.matches, w)?;
        encode_instructions(&self.actions, &self.matches, w)
    }
}

/// An `OFPT_FLOW_REMOVED` body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowRemoved {
    /// The flow's cookie.
    pub cookie: u64,
    /// The flow's priority.
    pub priority: u16,
    /// `OFPRR_*`.
    pub reason: u8,
    /// The flow's table.
    pub table_id: u8,
    /// How long the flow lived: seconds.
    pub duration_sec: u32,
    /// ... and nanoseconds beyond them.
    pub duration_nsec: u32,
    /// The flow's idle timeout.
    pub idle_timeout: u16,
    /// The flow's hard timeout.
    pub hard_timeout: u16,
    /// Packets the flow matched.
    pub packet_count: u64,
    /// Bytes the flow matched.
    pub byte_count: u64,
    /// The flow's match.
    pub matches: Match,
}

impl FlowRemoved {
    /// Decodes the body of a FLOW_REMOVED of `version`.
    pub fn decode(version: u8, body: &[u8]) -> Result<FlowRemoved, DecodeError> {
        check_version(version)?;
        let mut r = Reader::new(body, "ofp_flow_removed");
        let fr = FlowRemoved {
            cookie: r.u64()?,
            priority: r.u16()?,
            reason: r.u8()?,
            table_id: r.u8()?,
            duration_sec: r.u32()?,
            duration_nsec: r.u32()?,
            idle_timeout: r.u16()?,
            hard_timeout: r.u16()?,
            packet_count: r.u64()?,
            byte_count: r.u64()?,
            matches: Match::ANY,
        };
        let matches = decode_match(&mut r)?;
        Ok(FlowRemoved { matches, ..fr })
    }

    /// Writes the body of a FLOW_REMOVED of `version`.
    pub fn encode(&self, version: u8, w: &mut Writer) -> Result<(), EncodeError> {
        check_encode_version(version)?;
        w.u64(self.cookie);
        w.u16(self.priority);
        w.u8(self.reason);
        w.u8(self.table_id);
        w.u32(self.duration_sec);
        w.u32(self.duration_nsec);
        w.u16(self.idle_timeout);
        w.u16(self.hard_timeout);
        w.u64(self.packet_count);
        w.u64(self.byte_count);
        encode_match(&self.matches, w)
    }
}

/// An `OFPT_PACKET_IN` body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketIn {
    /// Where the switch buffered the packet, or [`OFP_NO_BUFFER`] (rqvs never buffers).
    pub buffer_id: u32,
    /// The frame's full length (`data` may be cut to the controller action's max_len).
    pub total_len: u16,
    /// `OFPR_*`.
    pub reason: u8,
    /// The table the packet was looked up in.
    pub table_id: u8,
    /// The cookie of the flow that sent it (all ones for a table miss).
    pub cookie: u64,
    /// The packet's pipeline fields (rqvs sends `in_port`).
    pub matches: Match,
    /// The frame (or its first bytes).
    pub data: Vec<u8>,
}

impl PacketIn {
    /// Decodes the body of a PACKET_IN of `version`.
    pub fn decode(version: u8, body: &[u8]) -> Result<PacketIn, DecodeError> {
        check_version(version)?;
        let mut r = Reader::new(body, "ofp_packet_in");
        let buffer_id = r.u32()?;
        let total_len = r.u16()?;
        let reason = r.u8()?;
        let table_id = r.u8()?;
        let cookie = r.u64()?;
        let matches = decode_match(&mut r)?;
        r.skip(2)?;
        Ok(PacketIn { buffer_id, total_len, reason, table_id, cookie, matches, data: r.rest().to_vec() })
    }

    /// Writes the body of a PACKET_IN of `version`.
    pub fn encode(&self, version: u8, w: &mut Writer) -> Result<(), EncodeError> {
        check_encode_version(version)?;
        w.u32(self.buffer_id);
        w.u16(self.total_len);
        w.u8(self.reason);
        w.u8(self.table_id);
        w.u64(self.cookie);
        encode_match(&self.matches, w)?;
        w.zeros(2);
        w.put(&self.data);
        Ok(())
    }
}

/// An `OFPT_PACKET_OUT` body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketOut {
    /// A buffered packet to send, or [`OFP_NO_BUFFER`] (then `data` is the frame).
    pub buffer_id: u32,
    /// The port the packet counts as coming in on (OpenFlow number; `OFPP_CONTROLLER` usual).
    pub in_port: u32,
    /// What to do with it (`SetVlanVid` is written with `push_vlan`: the frame is not known).
    pub actions: Actions,
    /// The frame when unbuffered.
    pub data: Vec<u8>,
}

impl PacketOut {
    /// Decodes the body of a PACKET_OUT of `version`.
    pub fn decode(version: u8, body: &[u8]) -> Result<PacketOut, DecodeError> {
        check_version(version)?;
        let mut r = Reader::new(body, "ofp_packet_out");
        let buffer_id = r.u32()?;
        let in_port = r.u32()?;
        let actions_len = usize::from(r.u16()?);
        r.skip(6)?;
        if actions_len % 8 != 0 {
            return Err(DecodeError::BadLength { what: "ofp_packet_out actions", len: actions_len });
        }
        let actions = decode_actions(r.take(actions_len)?)?;
        Ok(PacketOut { buffer_id, in_port, actions, data: r.rest().to_vec() })
    }

    /// Writes the body of a PACKET_OUT of `version`.
    pub fn encode(&self, version: u8, w: &mut Writer) -> Result<(), EncodeError> {
        check_encode_version(version)?;
        w.u32(self.buffer_id);
        w.u32(self.in_port);
        let at = w.len();
        w.u16(0);
        w.zeros(6);
        let start = w.len();
        encode_actions(&self.actions, &Match::ANY, w)?;
        let len = w.len() - start;
        if len > usize::from(u16::MAX) {
            return enc_err("packet-out actions longer than 65535 bytes");
        }
        w.patch_u16(at, len as u16);
        w.put(&self.data);
        Ok(())
    }
}

/// The body of an `OFPMP_FLOW` or `OFPMP_AGGREGATE` request (`ofp_flow_stats_request`, which
/// `ofp_aggregate_stats_request` repeats): which flows to report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowStatsRequest {
    /// The table, or [`OFPTT_ALL`].
    pub table_id: u8,
    /// Only flows outputting to this port (OpenFlow number), or [`OFPP_ANY`].
    pub out_port: u32,
    /// Only flows outputting to this group, or [`OFPG_ANY`].
    pub out_group: u32,
    /// Only flows whose cookie agrees with this on `cookie_mask`'s bits.
    pub cookie: u64,
    /// The cookie bits that must agree (0: any cookie).
    pub cookie_mask: u64,
    /// Only flows this match covers (non-strict: the flow's match is at least as specific).
    pub matches: Match,
}

/// `ofp_aggregate_stats_request` has the same fields as `ofp_flow_stats_request`.
pub type AggregateStatsRequest = FlowStatsRequest;

impl FlowStatsRequest {
    /// Every flow of every table.
    pub fn all() -> FlowStatsRequest {
        FlowStatsRequest {
            table_id: OFPTT_ALL,
            out_port: OFPP_ANY,
            out_group: OFPG_ANY,
            cookie: 0,
            cookie_mask: 0,
            matches: Match::ANY,
        }
    }

    /// Decodes a request body (after the multipart header) of `version`.
    pub fn decode(version: u8, body: &[u8]) -> Result<FlowStatsRequest, DecodeError> {
        check_version(version)?;
        let mut r = Reader::new(body, "ofp_flow_stats_request");
        let table_id = r.u8()?;
        r.skip(3)?;
        let out_port = r.u32()?;
        let out_group = r.u32()?;
        r.skip(4)?;
        let cookie = r.u64()?;
        let cookie_mask = r.u64()?;
        let matches = decode_match(&mut r)?;
        if !r.is_empty() {
            return Err(DecodeError::BadLength {
                what: "ofp_flow_stats_request (bytes after the match)",
                len: body.len(),
            });
        }
        Ok(FlowStatsRequest { table_id, out_port, out_group, cookie, cookie_mask, matches })
    }

    /// Writes a request body (after the multipart header) of `version`.
    pub fn encode(&self, version: u8, w: &mut Writer) -> Result<(), EncodeError> {
        check_encode_version(version)?;
        w.u8(self.table_id);
        w.zeros(3);
        w.u32(self.out_port);
        w.u32(self.out_group);
        w.zeros(4);
        w.u64(self.cookie);
        w.u64(self.cookie_mask);
        encode_match(&self.matches, w)
    }
}

/// One `ofp_flow_stats` entry of an `OFPMP_FLOW` reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowStats {
    /// The flow's table.
    pub table_id: u8,
    /// How long the flow has been installed: seconds.
    pub duration_sec: u32,
    /// ... and nanoseconds beyond them.
    pub duration_nsec: u32,
    /// The flow's priority.
    pub priority: u16,
    /// The flow's idle timeout.
    pub idle_timeout: u16,
    /// The flow's hard timeout.
    pub hard_timeout: u16,
    /// The flow's `OFPFF_*` flags.
    pub flags: u16,
    /// 1.4's importance (0 in 1.3).
    pub importance: u16,
    /// The flow's cookie.
    pub cookie: u64,
    /// Packets matched.
    pub packet_count: u64,
    /// Bytes matched.
    pub byte_count: u64,
    /// The flow's match.
    pub matches: Match,
    /// The flow's actions.
    pub actions: Actions,
}

impl FlowStats {
    const FIXED: usize = 48;

    /// Decodes one entry from `r` (its length field says where it ends).
    pub fn decode_one(version: u8, r: &mut Reader<'_>) -> Result<FlowStats, DecodeError> {
        check_version(version)?;
        let len = usize::from(r.u16()?);
        if len < Self::FIXED || len % 8 != 0 {
            return Err(DecodeError::BadLength { what: "ofp_flow_stats", len });
        }
        let mut e = r.sub(len - 2, "ofp_flow_stats")?;
        let table_id = e.u8()?;
        e.skip(1)?;
        let duration_sec = e.u32()?;
        let duration_nsec = e.u32()?;
        let priority = e.u16()?;
        let idle_timeout = e.u16()?;
        let hard_timeout = e.u16()?;
        let flags = e.u16()?;
        let importance = e.u16()?;
        let importance = if version == OFP14 { importance } else { 0 };
        e.skip(2)?;
        let cookie = e.u64()?;
        let packet_count = e.u64()?;
        let byte_count = e.u64()?;
        let matches = decode_match(&mut e)?;
        let actions = decode_instructions_for(e.rest(), &matches)?;
        Ok(FlowStats {
            table_id,
            duration_sec,
            duration_nsec,
            priority,
            idle_timeout,
            hard_timeout,
            flags,
            importance,
            cookie,
            packet_count,
            byte_count,
            matches,
            actions,
        })
    }

    /// Decodes a reply body (after the multipart header): every entry in it.
    pub fn decode_all(version: u8, body: &[u8]) -> Result<Vec<FlowStats>, DecodeError> {
        let mut r = Reader::new(body, "ofp_flow_stats");
        let mut out = Vec::new();
        while !r.is_empty() {
            out.push(FlowStats::decode_one(version, &mut r)?);
        }
        Ok(out)
    }

    /// Writes one entry (append entries one after another for a reply body).
    pub fn encode(&self, version: u8, w: &mut Writer) -> Result<(), EncodeError> {
        check_encode_version(version)?;
        if version == OFP13 && self.importance != 0 {
            return enc_err("importance is OpenFlow 1.4 (1.3 has padding there)");
        }
        let start = w.len();
        w.u16(0);
        w.u8(self.table_id);
        w.zeros(1);
        w.u32(self.duration_sec);
        w.u32(self.duration_nsec);
        w.u16(self.priority);
        w.u16(self.idle_timeout);
        w.u16(self.hard_timeout);
        w.u16(self.flags);
        w.u16(self.importance);
        w.zeros(2);
        w.u64(self.cookie);
        w.u64(self.packet_count);
        w.u64(self.byte_count);
        encode_match(&self.matches, w)?;
        encode_instructions(&self.actions, &self.matches, w)?;
        let len = w.len() - start;
        let Ok(len) = u16::try_from(len) else {
            return enc_err("flow stats entry longer than 65535 bytes");
        };
        w.patch_u16(start, len);
        Ok(())
    }
}

/// The body of an `OFPMP_AGGREGATE` reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AggregateStats {
    /// Packets matched by the flows.
    pub packet_count: u64,
    /// Bytes matched by the flows.
    pub byte_count: u64,
    /// How many flows.
    pub flow_count: u32,
}

impl AggregateStats {
    /// Decodes a reply body (after the multipart header) of `version`.
    pub fn decode(version: u8, body: &[u8]) -> Result<AggregateStats, DecodeError> {
        check_version(version)?;
        let mut r = Reader::new(body, "ofp_aggregate_stats_reply");
        let a = AggregateStats { packet_count: r.u64()?, byte_count: r.u64()?, flow_count: r.u32()? };
        r.skip(4)?;
        Ok(a)
    }

    /// Writes a reply body (after the multipart header) of `version`.
    pub fn encode(&self, version: u8, w: &mut Writer) -> Result<(), EncodeError> {
        check_encode_version(version)?;
        w.u64(self.packet_count);
        w.u64(self.byte_count);
        w.u32(self.flow_count);
        w.zeros(4);
        Ok(())
    }
}
