//! OpenFlow 1.0 with the Nicira extensions plain `ovs-ofctl` (no `-O`) speaks: its messages to
//! and from the 1.3-shaped [`Message`] the switch handles, so one dispatch serves every version.
//!
//! **What `ovs-ofctl` 3.1 sends by default** (captured against Open vSwitch 3.1): a HELLO whose
//! version bitmap holds 1.0 only; `OFPT_FLOW_MOD` with an `ofp10_match` when the flow fits 1.0,
//! else `NXT_SET_FLOW_FORMAT(nxm)` and `NXT_FLOW_MOD`; `NXT_FLOW_MOD_TABLE_ID` before a flow of
//! another table than 0; `NXT_SET_FLOW_FORMAT(nxm)` then `NXST_FLOW` / `NXST_AGGREGATE` for
//! `dump-flows` / `dump-aggregate`; `OFPST_PORT`, `OFPST_TABLE`, `OFPST_PORT_DESC` (OVS's
//! 1.0 extension, type 13), `OFPT_FEATURES_REQUEST` (`show`, and for port names), `OFPT_PORT_MOD`,
//! `OFPT_BARRIER_REQUEST` and `OFPT_ECHO_REQUEST`.
//!
//! | 1.0 / Nicira | decodes to |
//! |---|---|
//! | `ECHO_REQUEST`/`REPLY`, `FEATURES_REQUEST`, `GET_CONFIG_REQUEST`, `SET_CONFIG`, `BARRIER_REQUEST` | the same [`Message`] |
//! | `FLOW_MOD` (`ofp10_match`), `NXT_FLOW_MOD` (`nx_match`, [`crate::nxm`]) | [`Message::FlowMod`] |
//! | `PORT_MOD` | [`Message::PortMod`] |
//! | `PACKET_OUT` | [`Message::PacketOut`] |
//! | `NXT_SET_ASYNC_CONFIG` | [`Message::SetAsync`] (1.3's layout of the six masks) |
//! | `STATS_REQUEST` DESC, FLOW, AGGREGATE, TABLE, PORT, PORT_DESC; Nicira `NXST_FLOW`, `NXST_AGGREGATE` | [`Message::MultipartRequest`] |
//! | `NXT_SET_FLOW_FORMAT`, `NXT_FLOW_MOD_TABLE_ID`, `NXT_SET_PACKET_IN_FORMAT` | [`Request`]'s own variants (connection state) |
//!
//! Replies ([`encode`]) go the other way: FEATURES_REPLY with the ports ([`encode_features_reply`]),
//! GET_CONFIG_REPLY, BARRIER_REPLY, ECHO_REPLY, and STATS_REPLY of each kind — `NXST_FLOW` /
//! `NXST_AGGREGATE` when the request was Nicira's ([`ReplyForm::nx_stats`]), with `idle_age` and
//! `hard_age`. ERRORs are written with OpenFlow 1.0's type and code where 1.0 has one, OVS's
//! Nicira 1.0 code where it defines one (`OFPBMC_BAD_PREREQ` is type 1 code 260, ...), and
//! otherwise wrapped as OVS does (`NXET_VENDOR` 0xb0c2 carrying the later version's type and
//! code; `NXBRC_UNENCODABLE_ERROR` for PORT_MOD's BAD_CONFIG), so `ovs-ofctl` prints the
//! error's name ([`error_to_of10`]).
//!
//! **Ports.** 1.0's are 16-bit, which is rqvs's own numbering; the reserved ports (0xfff8
//! `IN_PORT` .. 0xffff `NONE`) map to 1.3's 0xfffffff8.. as [`crate::oxm::port_to_of`] does.
//!
//! **Actions** (1.0's and Nicira's; [`decode_actions`], [`encode_actions`]): `OUTPUT`,
//! `SET_VLAN_VID`, `SET_VLAN_PCP`, `STRIP_VLAN`, `SET_DL_SRC/DST`, `SET_NW_SRC/DST`,
//! `SET_NW_TOS`, `SET_TP_SRC/DST` (the port field of the match's protocol, as `mod_tp_src`),
//! `NXAST_RESUBMIT(_TABLE)`, `NXAST_DEC_TTL`, `NXAST_REG_LOAD` (every other `set_field`, 64 bits
//! at a time, as OVS splits IPv6 addresses), `NXAST_WRITE_METADATA`, `NXAST_GROUP`. A
//! `goto_table:N` goes out as `resubmit(,N)`, as OVS's `ovs-ofctl` sends it in 1.0. What 1.0
//! cannot carry at all (`meter`, `clear_actions`, `write_actions`, a bare `push_vlan`) is an
//! [`EncodeError`] naming it; the switch answers such a dump with an error telling to use
//! `-O OpenFlow13`.
//!
//! `OFPT_PACKET_OUT` decodes to [`Message::PacketOut`] and `NXT_SET_ASYNC_CONFIG` to
//! [`Message::SetAsync`]; the asynchronous messages the switch sends (PACKET_IN, FLOW_REMOVED,
//! PORT_STATUS in their 1.0 and Nicira forms) are [`crate::of10_async`]'s.
//!
//! `NXST_FLOW_MONITOR` and `NXT_FLOW_MONITOR_CANCEL` decode to [`Request::FlowMonitor`] and
//! [`Request::FlowMonitorCancel`] ([`crate::flow_monitor`] has their codec and the replies').
//!
//! **Not here** (partial, said in the README): the queue and role extensions of 1.0 are
//! answered `BAD_TYPE`/`BAD_SUBTYPE`/`BAD_STAT`.

use rqvs_flow::field::{Field as TField, FIELDS};
use rqvs_flow::key::{VLAN_CFI, VLAN_VID_MASK};
use rqvs_flow::{Action, Actions, FlowKey, Match};

use crate::async_config::PortMod;
use crate::error::{DecodeError, EncodeError, OfError};
use crate::flow_mod::{AggregateStats, FlowMod, FlowModCommand, FlowStats, FlowStatsRequest, PacketOut, OFPG_ANY};
use crate::message::{ErrorMsg, Features, Hello, SwitchConfig};
use crate::multipart::{
    Desc, MultipartReply, MultipartReplyBody, MultipartRequest, MultipartRequestBody, PortStats, TableStats,
};
use crate::oxm::{enc_err, port_to_of, reject, OFPP_ANY};
use crate::port::Port;
use crate::wire::{Header, Reader, Writer};
use crate::Message;

/// OpenFlow 1.0's wire version.
pub const OFP10: u8 = 0x01;

/// OpenFlow 1.0 message types.
pub mod kind {
    pub const HELLO: u8 = 0;
    pub const ERROR: u8 = 1;
    pub const ECHO_REQUEST: u8 = 2;
    pub const ECHO_REPLY: u8 = 3;
    pub const VENDOR: u8 = 4;
    pub const FEATURES_REQUEST: u8 = 5;
    pub const FEATURES_REPLY: u8 = 6;
    pub const GET_CONFIG_REQUEST: u8 = 7;
    pub const GET_CONFIG_REPLY: u8 = 8;
    pub const SET_CONFIG: u8 = 9;
    pub const PACKET_OUT: u8 = 13;
    pub const FLOW_MOD: u8 = 14;
    pub const PORT_MOD: u8 = 15;
    pub const STATS_REQUEST: u8 = 16;
    pub const STATS_REPLY: u8 = 17;
    pub const BARRIER_REQUEST: u8 = 18;
    pub const BARRIER_REPLY: u8 = 19;
}

/// Nicira's vendor id.
pub const NX_VENDOR_ID: u32 = 0x0000_2320;
/// `NXT_SET_FLOW_FORMAT`.
pub const NXT_SET_FLOW_FORMAT: u32 = 12;
/// `NXT_FLOW_MOD`.
pub const NXT_FLOW_MOD: u32 = 13;
/// `NXT_FLOW_MOD_TABLE_ID`.
pub const NXT_FLOW_MOD_TABLE_ID: u32 = 15;
/// `NXT_SET_PACKET_IN_FORMAT`.
pub const NXT_SET_PACKET_IN_FORMAT: u32 = 16;
/// `NXST_FLOW` (a vendor statistics subtype).
pub const NXST_FLOW: u32 = 0;
/// `NXST_AGGREGATE`.
pub const NXST_AGGREGATE: u32 = 1;

/// 1.0 statistics types.
const OFPST_DESC: u16 = 0;
const OFPST_FLOW: u16 = 1;
const OFPST_AGGREGATE: u16 = 2;
const OFPST_TABLE: u16 = 3;
const OFPST_PORT: u16 = 4;
/// OVS's OpenFlow 1.0 extension: the port descriptions as a statistics request.
const OFPST_PORT_DESC: u16 = 13;
const OFPST_VENDOR: u16 = 0xffff;

/// 1.0's `OFPP_NONE` (no port; "any" in requests).
pub const OFPP10_NONE: u16 = 0xffff;
/// 1.0's `OFPP_IN_PORT` (a resubmit's "the packet's own port").
const OFPP10_IN_PORT: u16 = 0xfff8;
const OFPP10_TABLE: u16 = 0xfff9;
const OFPP10_NORMAL: u16 = 0xfffa;
const OFPP10_FLOOD: u16 = 0xfffb;
const OFPP10_ALL: u16 = 0xfffc;
const OFPP10_CONTROLLER: u16 = 0xfffd;
const OFPP10_LOCAL: u16 = 0xfffe;

/// `OFPFF_EMERG` (1.0 only): refused, rqvs has no emergency flow cache.
const OFPFF10_EMERG: u16 = 4;

/// 1.0 action types.
const OFPAT10_OUTPUT: u16 = 0;
const OFPAT10_SET_VLAN_VID: u16 = 1;
const OFPAT10_SET_VLAN_PCP: u16 = 2;
const OFPAT10_STRIP_VLAN: u16 = 3;
const OFPAT10_SET_DL_SRC: u16 = 4;
const OFPAT10_SET_DL_DST: u16 = 5;
const OFPAT10_SET_NW_SRC: u16 = 6;
const OFPAT10_SET_NW_DST: u16 = 7;
const OFPAT10_SET_NW_TOS: u16 = 8;
const OFPAT10_SET_TP_SRC: u16 = 9;
const OFPAT10_SET_TP_DST: u16 = 10;
const OFPAT10_VENDOR: u16 = 0xffff;
/// Nicira action subtypes.
const NXAST_RESUBMIT: u16 = 1;
const NXAST_REG_LOAD: u16 = 7;
const NXAST_RESUBMIT_TABLE: u16 = 14;
const NXAST_DEC_TTL: u16 = 18;
const NXAST_WRITE_METADATA: u16 = 22;
const NXAST_GROUP: u16 = 40;

/// The 1.0 actions rqvs reads (FEATURES_REPLY's `actions` bitmap): OUTPUT through SET_TP_DST.
pub const ACTIONS_BITMAP: u32 = (1 << 11) - 1;

/// `OFPC_FLOW_STATS | OFPC_TABLE_STATS | OFPC_PORT_STATS | OFPC_ARP_MATCH_IP`.
pub const CAPABILITIES: u32 = 1 | 2 | 4 | 0x80;

/// `OFPET_*` errors with no 1.0 code (`NXBRC_UNENCODABLE_ERROR` is the last resort): OVS's
/// wrapper, type `NXET_VENDOR` (0xb0c2), code 0, then the vendor, type and code.
const NXET_VENDOR: u16 = 0xb0c2;

/// The flow format of a connection (`NXT_SET_FLOW_FORMAT`): which match flow statistics
/// replies would carry for a 1.0 request (`NXST_*` replies always carry NXM).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FlowFormat {
    /// `NXFF_OPENFLOW10` (0), the default.
    #[default]
    OpenFlow10,
    /// `NXFF_NXM` (2).
    Nxm,
}

/// One 1.0 message as the switch handles it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// A message the version-independent dispatch takes as it is.
    Msg(Box<Message>),
    /// `NXT_SET_FLOW_FORMAT`.
    SetFlowFormat(FlowFormat),
    /// `NXT_FLOW_MOD_TABLE_ID`: whether FLOW_MOD's command carries the table in its high byte.
    FlowModTableId(bool),
    /// `NXT_SET_PACKET_IN_FORMAT` (0: 1.0's, 1: `NXT_PACKET_IN`, 2: `NXT_PACKET_IN2`).
    SetPacketInFormat(u32),
    /// `NXST_FLOW_MONITOR` ([`crate::flow_monitor`]): the monitors asked for.
    FlowMonitor(Vec<crate::flow_monitor::FlowMonitorRequest>),
    /// `NXT_FLOW_MONITOR_CANCEL`: the monitor's id.
    FlowMonitorCancel(u32),
}

/// A decoded 1.0 message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// Its header.
    pub header: Header,
    /// What it asks.
    pub request: Request,
    /// A Nicira statistics request (`NXST_FLOW`, `NXST_AGGREGATE`): its reply is Nicira's too.
    pub nx_stats: bool,
}

/// How [`encode`] writes a reply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplyForm {
    /// Flow and aggregate statistics as `NXST_FLOW` / `NXST_AGGREGATE` replies.
    pub nx_stats: bool,
}

const BAD_REQUEST_BAD_STAT: OfError = OfError { kind: 1, code: 2 };
const BAD_REQUEST_BAD_VENDOR: OfError = OfError { kind: 1, code: 3 };
const BAD_REQUEST_BAD_SUBTYPE: OfError = OfError { kind: 1, code: 4 };
const BAD_REQUEST_EPERM: OfError = OfError { kind: 1, code: 5 };
const BAD_ACTION_BAD_VENDOR: OfError = OfError { kind: 2, code: 2 };
const BAD_ACTION_BAD_VENDOR_TYPE: OfError = OfError { kind: 2, code: 3 };

fn bad_len(what: &'static str, len: usize) -> DecodeError {
    DecodeError::BadLength { what, len }
}

/// A 1.0 port number (16 bits) as OpenFlow 1.3 numbers it (the form the switch's requests use).
fn port10_to_of(p: u16) -> u32 {
    if p == OFPP10_NONE {
        OFPP_ANY
    } else {
        port_to_of(u32::from(p)).expect("16-bit ports have a 1.3 number")
    }
}

/// A 1.3 port number as 1.0's 16 bits (`None` when it has none).
fn port_of_to10(p: u32) -> Option<u16> {
    match p {
        0..=0xfeff => Some(p as u16),
        0xffff_ff00..=0xffff_ffff => Some((p - 0xffff_0000) as u16),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// ofp10_match
// ---------------------------------------------------------------------------------------------

const FW_IN_PORT: u32 = 1 << 0;
const FW_DL_VLAN: u32 = 1 << 1;
const FW_DL_SRC: u32 = 1 << 2;
const FW_DL_DST: u32 = 1 << 3;
const FW_DL_TYPE: u32 = 1 << 4;
const FW_NW_PROTO: u32 = 1 << 5;
const FW_TP_SRC: u32 = 1 << 6;
const FW_TP_DST: u32 = 1 << 7;
const FW_NW_SRC_SHIFT: u32 = 8;
const FW_NW_DST_SHIFT: u32 = 14;
const FW_DL_VLAN_PCP: u32 = 1 << 20;
const FW_NW_TOS: u32 = 1 << 21;
/// Every wildcard bit of 1.0 (`OFPFW10_ALL`).
pub const OFPFW10_ALL: u32 = (1 << 22) - 1;
/// `ofp10_match`'s size.
pub const MATCH10_LEN: usize = 40;

const ETH_IP: u16 = 0x0800;
const ETH_ARP: u16 = 0x0806;

fn prefix_mask(wild: u32) -> u32 {
    if wild >= 32 {
        0
    } else {
        u32::MAX << wild
    }
}

/// Decodes an `ofp10_match` (OVS's `ofputil_match_from_ofp10_match`): fields whose
/// prerequisites are not met are ignored (nw_* without IP or ARP, tp_* without TCP, UDP or
/// ICMP), as OVS does; `dl_vlan` 0xffff is "no VLAN".
pub fn decode_match(r: &mut Reader<'_>) -> Result<Match, DecodeError> {
    let wc = r.u32()? & OFPFW10_ALL;
    let in_port = r.u16()?;
    let dl_src: [u8; 6] = r.array()?;
    let dl_dst: [u8; 6] = r.array()?;
    let dl_vlan = r.u16()?;
    let dl_vlan_pcp = r.u8()?;
    r.skip(1)?;
    let dl_type = r.u16()?;
    let nw_tos = r.u8()?;
    let nw_proto = r.u8()?;
    r.skip(2)?;
    let nw_src = r.u32()?;
    let nw_dst = r.u32()?;
    let tp_src = r.u16()?;
    let tp_dst = r.u16()?;
    let (mut v, mut m) = (FlowKey::ZERO, FlowKey::ZERO);
    let mut set = |name: &str, value: u128, mask: u128| {
        let f = TField::by_name(name).expect("a table field");
        f.set_masked(&mut v, &mut m, value & mask, mask);
    };
    let mac = |b: [u8; 6]| b.iter().fold(0u128, |a, &x| a << 8 | u128::from(x));
    if wc & FW_IN_PORT == 0 {
        set("in_port", in_port.into(), 0xffff_ffff);
    }
    if wc & FW_DL_SRC == 0 {
        set("dl_src", mac(dl_src), (1 << 48) - 1);
    }
    if wc & FW_DL_DST == 0 {
        set("dl_dst", mac(dl_dst), (1 << 48) - 1);
    }
    // VLAN (OVS's ofputil_match_from_ofp10_match): "no tag" exact, or VID and/or PCP of a tag.
    let vid_wild = wc & FW_DL_VLAN != 0;
    let pcp_wild = wc & FW_DL_VLAN_PCP != 0;
    if !vid_wild && dl_vlan == OFPP10_NONE {
        set("vlan_tci", 0, 0xffff);
    } else {
        let (mut tci, mut mask) = (0u16, 0u16);
        if !vid_wild {
            if dl_vlan > 0xfff {
                return reject(format!("dl_vlan {dl_vlan:#x}: above 4095"), OfError::BAD_MATCH_BAD_VALUE);
            }
            tci |= VLAN_CFI | dl_vlan;
            mask |= VLAN_CFI | VLAN_VID_MASK;
        }
        if !pcp_wild {
            tci |= VLAN_CFI | u16::from(dl_vlan_pcp & 7) << 13;
            mask |= VLAN_CFI | 0xe000;
        }
        if mask != 0 {
            set("vlan_tci", tci.into(), mask.into());
        }
    }
    if wc & FW_DL_TYPE == 0 {
        set("dl_type", dl_type.into(), 0xffff);
        let ip = dl_type == ETH_IP;
        let arp = dl_type == ETH_ARP;
        if ip || arp {
            let src = prefix_mask((wc >> FW_NW_SRC_SHIFT) & 0x3f);
            let dst = prefix_mask((wc >> FW_NW_DST_SHIFT) & 0x3f);
            if src != 0 {
                set("nw_src", nw_src.into(), src.into());
            }
            if dst != 0 {
                set("nw_dst", nw_dst.into(), dst.into());
            }
            if wc & FW_NW_PROTO == 0 {
                set("nw_proto", nw_proto.into(), 0xff);
            }
        }
        if ip {
            if wc & FW_NW_TOS == 0 {
                set("ip_dscp", u128::from(nw_tos >> 2), 0x3f);
            }
            if wc & FW_NW_PROTO == 0 && matches!(nw_proto, 1 | 6 | 17 | 132) {
                // TCP/UDP/SCTP ports, or ICMP type and code (whole tp_src/tp_dst, as ofctl).
                let (s, d) = match nw_proto {
                    1 => ("icmp_type", "icmp_code"),
                    6 => ("tcp_src", "tcp_dst"),
                    17 => ("udp_src", "udp_dst"),
                    _ => ("sctp_src", "sctp_dst"),
                };
                for (name, wild, value) in [(s, FW_TP_SRC, tp_src), (d, FW_TP_DST, tp_dst)] {
                    if wc & wild != 0 {
                        continue;
                    }
                    let f = TField::by_name(name).expect("a table field");
                    if f.bits == 8 {
                        if value > 0xff {
                            return reject(format!("{name} {value}: above 255"), OfError::BAD_MATCH_BAD_VALUE);
                        }
                        f.member.set(&mut v, value.into());
                        f.member.set(&mut m, 0xffff);
                    } else {
                        f.set_masked(&mut v, &mut m, value.into(), 0xffff);
                    }
                }
            }
        }
    }
    Match::new(v, m, rqvs_flow::PortRange::ANY, rqvs_flow::PortRange::ANY)
        .map_err(|e| DecodeError::Unsupported { what: e.to_string(), error: OfError::BAD_MATCH_BAD_WILDCARDS })
}

/// Whether `m` can be written as an `ofp10_match` (else it needs NXM): what OVS's
/// `ofputil_usable_protocols` checks for OpenFlow 1.0.
pub fn fits_match10(m: &Match) -> bool {
    let mut w = Writer::new();
    encode_match(m, &mut w).is_ok()
}

/// Writes `m` as an `ofp10_match`; an error naming what 1.0 cannot say (a masked MAC, a
/// non-prefix IP mask, IPv6, ...).
pub fn encode_match(m: &Match, w: &mut Writer) -> Result<(), EncodeError> {
    if m.has_port_ranges() {
        return enc_err("port ranges: split the match with Match::expand_port_ranges first");
    }
    let (v, k) = (m.value(), m.mask());
    let get = |name: &str, key: &FlowKey| TField::by_name(name).expect("a table field").get(key);
    let mut covered = FlowKey::ZERO;
    let cover = |covered: &mut FlowKey, name: &str| {
        let f = TField::by_name(name).expect("a table field");
        let mut ignored = FlowKey::ZERO;
        f.set_masked(&mut ignored, covered, 0, f.get(k));
    };
    // Every field wildcarded; an IP address wholly wildcarded has 32 as its wildcard bits, as
    // Open vSwitch writes it (1.0 reads 32..63 alike).
    let mut wc = (OFPFW10_ALL & !(0x3f << FW_NW_SRC_SHIFT) & !(0x3f << FW_NW_DST_SHIFT))
        | (32 << FW_NW_SRC_SHIFT)
        | (32 << FW_NW_DST_SHIFT);
    let exact = |name: &str, bits: u32| -> Result<bool, EncodeError> {
        let mask = get(name, k);
        if mask == 0 {
            return Ok(false);
        }
        if mask != (1u128 << bits) - 1 {
            return enc_err(format!("{name} is masked ({mask:#x}): OpenFlow 1.0 matches it whole or not at all"));
        }
        Ok(true)
    };
    let in_port = get("in_port", v) as u16;
    if exact("in_port", 32)? {
        if get("in_port", v) > 0xffff {
            return enc_err("in_port above 0xffff");
        }
        wc &= !FW_IN_PORT;
        cover(&mut covered, "in_port");
    }
    let to_mac = |x: u128| -> [u8; 6] { std::array::from_fn(|i| (x >> (40 - 8 * i)) as u8) };
    let dl_src = to_mac(get("dl_src", v));
    let dl_dst = to_mac(get("dl_dst", v));
    if exact("dl_src", 48)? {
        wc &= !FW_DL_SRC;
        cover(&mut covered, "dl_src");
    }
    if exact("dl_dst", 48)? {
        wc &= !FW_DL_DST;
        cover(&mut covered, "dl_dst");
    }
    // VLAN: none; VID of a tag; PCP of a tag; both.
    let (tci, tmask) = (v.vlan_tci, k.vlan_tci);
    let (mut dl_vlan, mut dl_vlan_pcp) = (0u16, 0u8);
    if tmask != 0 {
        if tci == 0 && (tmask == u16::MAX || tmask == VLAN_CFI) {
            dl_vlan = OFPP10_NONE;
            wc &= !FW_DL_VLAN;
        } else {
            if tmask & VLAN_CFI == 0 || tci & VLAN_CFI == 0 {
                return enc_err("vlan_tci: OpenFlow 1.0 matches a VLAN's VID or PCP, or no VLAN");
            }
            match tmask & VLAN_VID_MASK {
                0 => {}
                VLAN_VID_MASK => {
                    dl_vlan = tci & VLAN_VID_MASK;
                    wc &= !FW_DL_VLAN;
                }
                _ => return enc_err("vlan_tci: a partial VID mask (OpenFlow 1.0 has none)"),
            }
            match tmask & 0xe000 {
                0 => {}
                0xe000 => {
                    dl_vlan_pcp = (tci >> 13) as u8;
                    wc &= !FW_DL_VLAN_PCP;
                }
                _ => return enc_err("vlan_tci: a partial PCP mask (OpenFlow 1.0 has none)"),
            }
            if tmask & VLAN_VID_MASK == 0 && tmask & 0xe000 == 0 {
                return enc_err("vlan_tci: \"any VLAN\" (OpenFlow 1.0 has no such match)");
            }
        }
        covered.vlan_tci = tmask;
    }
    let dl_type = get("dl_type", v) as u16;
    if exact("dl_type", 16)? {
        wc &= !FW_DL_TYPE;
        cover(&mut covered, "dl_type");
    }
    let (mut nw_tos, mut nw_proto, mut nw_src, mut nw_dst, mut tp_src, mut tp_dst) = (0u8, 0u8, 0u32, 0u32, 0u16, 0u16);
    let ip_or_arp = k.dl_type == 0xffff && (dl_type == ETH_IP || dl_type == ETH_ARP);
    if ip_or_arp {
        for (name, shift, out) in [("nw_src", FW_NW_SRC_SHIFT, &mut nw_src), ("nw_dst", FW_NW_DST_SHIFT, &mut nw_dst)] {
            let mask = get(name, k) as u32;
            if mask == 0 {
                continue;
            }
            if mask.leading_ones() + mask.trailing_zeros() != 32 {
                return enc_err(format!("{name} mask {mask:#x} is not a prefix (OpenFlow 1.0 has only prefixes)"));
            }
            *out = get(name, v) as u32;
            wc = (wc & !(0x3f << shift)) | (mask.trailing_zeros() << shift);
            cover(&mut covered, name);
        }
        if exact("nw_proto", 8)? {
            nw_proto = get("nw_proto", v) as u8;
            wc &= !FW_NW_PROTO;
            cover(&mut covered, "nw_proto");
        }
    }
    if ip_or_arp && dl_type == ETH_IP {
        if exact("ip_dscp", 6)? {
            nw_tos = (get("ip_dscp", v) as u8) << 2;
            wc &= !FW_NW_TOS;
            cover(&mut covered, "ip_dscp");
        }
        if k.nw_proto == 0xff && matches!(nw_proto, 1 | 6 | 17 | 132) {
            for (member_name, wild, out) in [("tcp_src", FW_TP_SRC, &mut tp_src), ("tcp_dst", FW_TP_DST, &mut tp_dst)] {
                let f = TField::by_name(member_name).expect("a table field");
                let mask = f.member.get(k);
                if mask == 0 {
                    continue;
                }
                if mask != 0xffff {
                    return enc_err(format!(
                        "{} is masked: OpenFlow 1.0 matches transport ports whole",
                        if member_name == "tcp_src" { "tp_src" } else { "tp_dst" }
                    ));
                }
                *out = f.member.get(v) as u16;
                wc &= !wild;
                f.member.set(&mut covered, 0xffff);
            }
        }
    }
    if let Some(member) = k.first_bits_outside(&covered) {
        return enc_err(format!("{member} cannot be matched in OpenFlow 1.0's ofp10_match (NXM can)"));
    }
    w.u32(wc);
    w.u16(in_port);
    w.put(&dl_src);
    w.put(&dl_dst);
    w.u16(dl_vlan);
    w.u8(dl_vlan_pcp);
    w.u8(0);
    w.u16(dl_type);
    w.u8(nw_tos);
    w.u8(nw_proto);
    w.zeros(2);
    w.u32(nw_src);
    w.u32(nw_dst);
    w.u16(tp_src);
    w.u16(tp_dst);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Actions
// ---------------------------------------------------------------------------------------------

fn field(name: &str) -> &'static TField {
    TField::by_name(name).expect("a table field")
}

/// Decodes a 1.0 action list (1.0's actions and Nicira's) for a flow matching `m` (`m` picks
/// the port field `SET_TP_SRC`/`SET_TP_DST` write, as `mod_tp_src` does).
pub fn decode_actions(bytes: &[u8], m: &Match) -> Result<Actions, DecodeError> {
    let mut r = Reader::new(bytes, "ofp_action (1.0)");
    let mut out: Vec<Action> = Vec::new();
    let proto = (m.mask().nw_proto == 0xff).then_some(m.value().nw_proto);
    while !r.is_empty() {
        let kind = r.u16()?;
        let len = usize::from(r.u16()?);
        if len < 8 || len % 8 != 0 {
            return reject(format!("1.0 action type {kind} has length {len}"), OfError::BAD_ACTION_BAD_LEN);
        }
        let mut b = r.sub(len - 4, "ofp_action (1.0)")?;
        let fixed = |n: usize, name: &str| {
            if len == n {
                Ok(())
            } else {
                reject(format!("{name} action has length {len}, expected {n}"), OfError::BAD_ACTION_BAD_LEN)
            }
        };
        let mac = |b: &mut Reader<'_>| -> Result<[u8; 6], DecodeError> { b.array() };
        let set = |f: &'static TField, value: u128| Action::SetField { field: f, value, mask: f.all_ones() };
        match kind {
            OFPAT10_OUTPUT => {
                fixed(8, "output")?;
                let port = b.u16()?;
                let max_len = b.u16()?;
                out.push(match port {
                    OFPP10_IN_PORT => Action::InPort,
                    OFPP10_ALL => Action::All,
                    OFPP10_FLOOD => Action::Flood,
                    OFPP10_CONTROLLER => Action::Controller((max_len != u16::MAX).then_some(max_len)),
                    OFPP10_NORMAL => Action::Normal,
                    OFPP10_LOCAL => Action::Output(u32::from(OFPP10_LOCAL)),
                    OFPP10_TABLE => Action::Other("TABLE".into()),
                    1..=0xfeff => Action::Output(u32::from(port)),
                    _ => {
                        return reject(
                            format!("output to port {port:#x} is not supported by rqvs"),
                            OfError::BAD_ACTION_BAD_OUT_PORT,
                        )
                    }
                });
            }
            OFPAT10_SET_VLAN_VID => {
                fixed(8, "set_vlan_vid")?;
                let vid = b.u16()?;
                if vid > 0xfff {
                    return reject(format!("mod_vlan_vid:{vid}: above 4095"), OfError::BAD_ACTION_BAD_ARGUMENT);
                }
                out.push(Action::SetVlanVid(vid));
            }
            OFPAT10_SET_VLAN_PCP => {
                fixed(8, "set_vlan_pcp")?;
                let pcp = b.u8()?;
                if pcp > 7 {
                    return reject(format!("mod_vlan_pcp:{pcp}: above 7"), OfError::BAD_ACTION_BAD_ARGUMENT);
                }
                out.push(set(field("vlan_pcp"), pcp.into()));
            }
            OFPAT10_STRIP_VLAN => {
                fixed(8, "strip_vlan")?;
                out.push(Action::StripVlan);
            }
            OFPAT10_SET_DL_SRC | OFPAT10_SET_DL_DST => {
                fixed(16, "set_dl_src/dst")?;
                let a = mac(&mut b)?;
                out.push(if kind == OFPAT10_SET_DL_SRC { Action::SetDlSrc(a) } else { Action::SetDlDst(a) });
            }
            OFPAT10_SET_NW_SRC | OFPAT10_SET_NW_DST => {
                fixed(8, "set_nw_src/dst")?;
                let a = b.u32()?;
                out.push(set(field(if kind == OFPAT10_SET_NW_SRC { "nw_src" } else { "nw_dst" }), a.into()));
            }
            OFPAT10_SET_NW_TOS => {
                fixed(8, "set_nw_tos")?;
                let tos = b.u8()?;
                if tos & 3 != 0 {
                    return reject(format!("mod_nw_tos:{tos}: ECN bits set"), OfError::BAD_ACTION_BAD_ARGUMENT);
                }
                out.push(Action::SetNwTos(tos));
            }
            OFPAT10_SET_TP_SRC | OFPAT10_SET_TP_DST => {
                fixed(8, "set_tp_src/dst")?;
                let p = b.u16()?;
                let src = kind == OFPAT10_SET_TP_SRC;
                let name = match (proto, src) {
                    (Some(17), true) => "udp_src",
                    (Some(17), false) => "udp_dst",
                    (Some(132), true) => "sctp_src",
                    (Some(132), false) => "sctp_dst",
                    (_, true) => "tcp_src",
                    (_, false) => "tcp_dst",
                };
                out.push(set(field(name), p.into()));
            }
            OFPAT10_VENDOR => {
                let vendor = b.u32()?;
                if vendor != NX_VENDOR_ID {
                    return reject(
                        format!("vendor {vendor:#010x} action is not supported by rqvs"),
                        BAD_ACTION_BAD_VENDOR,
                    );
                }
                let sub = b.u16()?;
                match sub {
                    NXAST_RESUBMIT | NXAST_RESUBMIT_TABLE => {
                        fixed(16, "resubmit")?;
                        let in_port = b.u16()?;
                        let table = b.u8()?;
                        let in_port = (in_port != OFPP10_IN_PORT).then_some(u32::from(in_port));
                        let table = (sub == NXAST_RESUBMIT_TABLE && table != 0xff).then_some(table);
                        if in_port.is_none() && table.is_none() {
                            return reject(
                                "resubmit(,) names neither a port nor a table",
                                OfError::BAD_ACTION_BAD_ARGUMENT,
                            );
                        }
                        out.push(Action::Resubmit { in_port, table });
                    }
                    NXAST_DEC_TTL => {
                        fixed(16, "dec_ttl")?;
                        out.push(Action::DecTtl);
                    }
                    NXAST_GROUP => {
                        fixed(16, "group")?;
                        b.skip(2)?;
                        let g = b.u32()?;
                        if g > rqvs_flow::group::OFPG_MAX {
                            return reject(
                                format!("group:{g:#x} is a reserved group id"),
                                OfError::BAD_ACTION_BAD_OUT_GROUP,
                            );
                        }
                        out.push(Action::Group(g));
                    }
                    NXAST_WRITE_METADATA => {
                        fixed(32, "write_metadata")?;
                        b.skip(6)?;
                        let value = b.u64()?;
                        let mask = b.u64()?;
                        out.push(Action::WriteMetadata { value: value & mask, mask });
                    }
                    NXAST_REG_LOAD => {
                        fixed(24, "load")?;
                        let ofs_nbits = b.u16()?;
                        let dst = b.u32()?;
                        let value = b.u64()?;
                        out.push(reg_load(ofs_nbits, dst, value, out.last())?);
                        // Two loads of one field (OVS splits 128-bit fields) become one.
                        if out.len() >= 2 {
                            if let (
                                Action::SetField { field: f1, value: v1, mask: m1 },
                                Action::SetField { field: f2, value: v2, mask: m2 },
                            ) = (&out[out.len() - 2], &out[out.len() - 1])
                            {
                                if f1.name == f2.name && m1 & m2 == 0 {
                                    let merged = Action::SetField { field: f1, value: (v1 & !m2) | v2, mask: m1 | m2 };
                                    out.pop();
                                    out.pop();
                                    out.push(merged);
                                }
                            }
                        }
                    }
                    _ => {
                        return reject(
                            format!("Nicira extension action subtype {sub} is not supported by rqvs"),
                            BAD_ACTION_BAD_VENDOR_TYPE,
                        )
                    }
                }
            }
            t => {
                return reject(
                    format!("OpenFlow 1.0 action type {t} is not supported by rqvs"),
                    OfError::BAD_ACTION_BAD_TYPE,
                )
            }
        }
    }
    Ok(Actions(out))
}

/// The table field an NXM/OXM header names (its payload width must be the field's).
fn field_of_header(header: u32) -> Option<&'static TField> {
    let (class, code) = ((header >> 16) as u16, ((header >> 9) & 0x7f) as u8);
    let f = FIELDS.iter().find(|f| f.nxm == Some((class, code)) || f.oxm == Some((class, code)))?;
    Some(f)
}

/// `NXAST_REG_LOAD`: `value` into bits `ofs..ofs+nbits` of the field `dst` names.
fn reg_load(ofs_nbits: u16, dst: u32, value: u64, _prev: Option<&Action>) -> Result<Action, DecodeError> {
    let ofs = u32::from(ofs_nbits >> 6);
    let nbits = u32::from(ofs_nbits & 0x3f) + 1;
    let Some(f) = field_of_header(dst) else {
        return reject(
            format!("load into NXM/OXM field {dst:#010x}: not a field rqvs has"),
            OfError::BAD_ACTION_BAD_SET_TYPE,
        );
    };
    if !crate::oxm::field_is_writable(f) && f.name != "vlan_tci" {
        return reject(format!("load into {}: the field is read-only", f.name), OfError::BAD_ACTION_BAD_SET_TYPE);
    }
    let width = if f.name == "in_port" { 16 } else { f.bits };
    if ofs + nbits > width {
        return reject(
            format!("load into {}[{ofs}..{}]: past the field's {width} bits", f.name, ofs + nbits - 1),
            OfError::BAD_ACTION_BAD_SET_ARGUMENT,
        );
    }
    if nbits < 64 && value >> nbits != 0 {
        return reject(format!("load:{value:#x} does not fit {nbits} bits"), OfError::BAD_ACTION_BAD_SET_ARGUMENT);
    }
    let mask = (if nbits == 128 { u128::MAX } else { (1u128 << nbits) - 1 }) << ofs;
    let mask = mask & f.all_ones();
    let mask = if f.name == "in_port" && mask == 0xffff { f.all_ones() } else { mask };
    Ok(Action::SetField { field: f, value: u128::from(value) << ofs, mask })
}

fn vendor_action(w: &mut Writer, len: u16, subtype: u16) {
    w.u16(OFPAT10_VENDOR);
    w.u16(len);
    w.u32(NX_VENDOR_ID);
    w.u16(subtype);
}

fn output10(w: &mut Writer, port: u16, max_len: u16) {
    w.u16(OFPAT10_OUTPUT);
    w.u16(8);
    w.u16(port);
    w.u16(max_len);
}

/// Writes `NXAST_REG_LOAD`s of `value` under `mask` into `f`: one per contiguous run of mask
/// bits, at most 64 bits each (OVS splits 128-bit fields the same way).
fn reg_loads(w: &mut Writer, f: &TField, value: u128, mask: u128) -> Result<(), EncodeError> {
    let (class, code) = match (f.nxm, f.oxm) {
        (Some(c), _) | (None, Some(c)) => c,
        _ => return enc_err(format!("set_field of {}: no NXM or OXM code", f.name)),
    };
    let bytes = if f.name == "in_port" { 2 } else { f.wire_bytes() };
    let header = u32::from(class) << 16 | u32::from(code) << 9 | bytes as u32;
    let mut bit = 0u32;
    let top = if f.name == "in_port" { 16 } else { f.bits };
    while bit < top {
        if mask >> bit & 1 == 0 {
            bit += 1;
            continue;
        }
        let start = bit;
        while bit < top && mask >> bit & 1 == 1 && bit - start < 64 {
            bit += 1;
        }
        let nbits = bit - start;
        vendor_action(w, 24, NXAST_REG_LOAD);
        w.u16(((start as u16) << 6) | (nbits as u16 - 1));
        w.u32(header);
        let piece = (value >> start) & if nbits == 64 { u128::from(u64::MAX) } else { (1u128 << nbits) - 1 };
        w.u64(piece as u64);
    }
    Ok(())
}

/// Writes `actions` as a 1.0 action list (see the module docs); an error for what 1.0 cannot
/// carry.
pub fn encode_actions(actions: &Actions, w: &mut Writer) -> Result<(), EncodeError> {
    for a in &actions.0 {
        match a {
            Action::Output(p) => {
                let Some(p) = u16::try_from(*p).ok().filter(|&p| p < 0xff00 || p == OFPP10_LOCAL) else {
                    return enc_err(format!("output:{p}: no OpenFlow 1.0 port number"));
                };
                output10(w, p, 0);
            }
            Action::InPort => output10(w, OFPP10_IN_PORT, 0),
            Action::All => output10(w, OFPP10_ALL, 0),
            Action::Flood => output10(w, OFPP10_FLOOD, 0),
            Action::Normal => output10(w, OFPP10_NORMAL, 0),
            Action::Controller(max) => output10(w, OFPP10_CONTROLLER, max.unwrap_or(u16::MAX)),
            Action::Other(s) if s == "LOCAL" => output10(w, OFPP10_LOCAL, 0),
            Action::Other(s) if s == "TABLE" => output10(w, OFPP10_TABLE, 0),
            Action::Drop => {}
            Action::SetVlanVid(v) => {
                w.u16(OFPAT10_SET_VLAN_VID);
                w.u16(8);
                w.u16(*v);
                w.zeros(2);
            }
            Action::StripVlan => {
                w.u16(OFPAT10_STRIP_VLAN);
                w.u16(8);
                w.zeros(4);
            }
            Action::SetDlSrc(m) | Action::SetDlDst(m) => {
                w.u16(if matches!(a, Action::SetDlSrc(_)) { OFPAT10_SET_DL_SRC } else { OFPAT10_SET_DL_DST });
                w.u16(16);
                w.put(m);
                w.zeros(6);
            }
            Action::SetNwTos(t) => {
                w.u16(OFPAT10_SET_NW_TOS);
                w.u16(8);
                w.u8(*t);
                w.zeros(3);
            }
            Action::DecTtl => {
                vendor_action(w, 16, NXAST_DEC_TTL);
                w.zeros(6);
            }
            Action::Resubmit { in_port, table } => {
                vendor_action(w, 16, NXAST_RESUBMIT_TABLE);
                let port = match in_port {
                    None => OFPP10_IN_PORT,
                    Some(p) => match u16::try_from(*p) {
                        Ok(p) => p,
                        Err(_) => return enc_err(format!("resubmit({p},..): no OpenFlow 1.0 port number")),
                    },
                };
                w.u16(port);
                w.u8(table.unwrap_or(0xff));
                w.zeros(3);
            }
            // What ovs-ofctl sends for goto_table in OpenFlow 1.0.
            Action::GotoTable(t) => {
                vendor_action(w, 16, NXAST_RESUBMIT_TABLE);
                w.u16(OFPP10_IN_PORT);
                w.u8(*t);
                w.zeros(3);
            }
            Action::Group(g) => {
                vendor_action(w, 16, NXAST_GROUP);
                w.zeros(2);
                w.u32(*g);
            }
            Action::WriteMetadata { value, mask } => {
                vendor_action(w, 32, NXAST_WRITE_METADATA);
                w.zeros(6);
                w.u64(*value);
                w.u64(*mask);
            }
            Action::SetField { field: f, value, mask } => {
                let full = *mask == f.all_ones();
                match f.name {
                    "nw_src" | "nw_dst" if full => {
                        w.u16(if f.name == "nw_src" { OFPAT10_SET_NW_SRC } else { OFPAT10_SET_NW_DST });
                        w.u16(8);
                        w.u32(*value as u32);
                    }
                    "tcp_src" | "udp_src" | "sctp_src" | "tcp_dst" | "udp_dst" | "sctp_dst" if full => {
                        w.u16(if f.name.ends_with("src") { OFPAT10_SET_TP_SRC } else { OFPAT10_SET_TP_DST });
                        w.u16(8);
                        w.u16(*value as u16);
                        w.zeros(2);
                    }
                    "vlan_pcp" if full => {
                        w.u16(OFPAT10_SET_VLAN_PCP);
                        w.u16(8);
                        w.u8(*value as u8);
                        w.zeros(3);
                    }
                    "vlan_vid" if full => {
                        w.u16(OFPAT10_SET_VLAN_VID);
                        w.u16(8);
                        w.u16(*value as u16 & VLAN_VID_MASK);
                        w.zeros(2);
                    }
                    "ip_dscp" if full => {
                        w.u16(OFPAT10_SET_NW_TOS);
                        w.u16(8);
                        w.u8((*value as u8) << 2);
                        w.zeros(3);
                    }
                    "dl_src" | "dl_dst" if full => {
                        let m: [u8; 6] = std::array::from_fn(|i| (*value >> (40 - 8 * i)) as u8);
                        w.u16(if f.name == "dl_src" { OFPAT10_SET_DL_SRC } else { OFPAT10_SET_DL_DST });
                        w.u16(16);
                        w.put(&m);
                        w.zeros(6);
                    }
                    "vlan_vid" | "vlan_pcp" | "ip_dscp" => {
                        return enc_err(format!("set_field of {} with a mask: not in OpenFlow 1.0", f.name))
                    }
                    _ => reg_loads(w, f, *value, *mask)?,
                }
            }
            Action::PushVlan(_)
            | Action::Meter(_)
            | Action::ClearActions
            | Action::WriteActions(_)
            | Action::Other(_) => {
                return enc_err(format!(
                    "{a} cannot be said in OpenFlow 1.0 (use OpenFlow 1.3: ovs-ofctl -O OpenFlow13)"
                ))
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------

/// A 1.0 `FLOW_MOD`'s or `NXT_FLOW_MOD`'s common part after the match (and the NX cookie).
struct FlowModTail {
    cookie: u64,
    command: u16,
    idle_timeout: u16,
    hard_timeout: u16,
    priority: u16,
    buffer_id: u32,
    out_port: u16,
    flags: u16,
}

impl FlowModTail {
    fn read(r: &mut Reader<'_>) -> Result<FlowModTail, DecodeError> {
        Ok(FlowModTail {
            cookie: r.u64()?,
            command: r.u16()?,
            idle_timeout: r.u16()?,
            hard_timeout: r.u16()?,
            priority: r.u16()?,
            buffer_id: r.u32()?,
            out_port: r.u16()?,
            flags: r.u16()?,
        })
    }

    fn into_flow_mod(
        self,
        matches: Match,
        cookie_filter: Option<(u64, u64)>,
        actions: &[u8],
        table_id_ext: bool,
    ) -> Result<FlowMod, DecodeError> {
        let (table_id, code) =
            if table_id_ext { ((self.command >> 8) as u8, self.command & 0xff) } else { (0xff, self.command) };
        let Some(command) = u8::try_from(code).ok().and_then(FlowModCommand::from_code) else {
            return reject(format!("flow_mod command {code}"), OfError::FLOW_MOD_FAILED_BAD_COMMAND);
        };
        if self.flags & OFPFF10_EMERG != 0 {
            return reject(
                "flow_mod flag OFPFF_EMERG (rqvs has no emergency cache)",
                OfError::FLOW_MOD_FAILED_BAD_FLAGS,
            );
        }
        if self.flags & !0x3 != 0 {
            return reject(format!("flow_mod flags {:#x}", self.flags), OfError::FLOW_MOD_FAILED_BAD_FLAGS);
        }
        let actions = decode_actions(actions, &matches)?;
        crate::action::check_actions(&matches, &actions)?;
        let is_add = command == FlowModCommand::Add;
        // 1.0's cookie is the new flow's; modify/delete filter by cookie only through NXM_NX_COOKIE.
        let (cookie, cookie_mask) = match cookie_filter {
            Some((c, m)) if !is_add => (c, m),
            _ if is_add => (self.cookie, 0),
            _ => (0, 0),
        };
        Ok(FlowMod {
            cookie: if is_add { self.cookie } else { cookie },
            cookie_mask,
            table_id,
            command,
            idle_timeout: self.idle_timeout,
            hard_timeout: self.hard_timeout,
            priority: self.priority,
            buffer_id: self.buffer_id,
            out_port: port10_to_of(self.out_port),
            out_group: OFPG_ANY,
            flags: self.flags,
            importance: 0,
            matches,
            actions,
        })
    }
}

/// Decodes one whole 1.0 message (`bytes` is exactly it). `table_id_ext`: the connection has
/// enabled `NXT_FLOW_MOD_TABLE_ID`.
pub fn decode(bytes: &[u8], table_id_ext: bool) -> Result<Decoded, DecodeError> {
    let header = Header::peek(bytes)?;
    if usize::from(header.length) != bytes.len() {
        return Err(bad_len("ofp_header (1.0)", bytes.len()));
    }
    if header.version != OFP10 {
        return Err(DecodeError::BadVersion(header.version));
    }
    let mut r = Reader::new(&bytes[Header::LEN..], "OpenFlow 1.0 message");
    let msg = |m: Message| Ok(Decoded { header, request: Request::Msg(Box::new(m)), nx_stats: false });
    let empty =
        |r: &Reader<'_>, what: &'static str| if r.is_empty() { Ok(()) } else { Err(bad_len(what, bytes.len())) };
    match header.kind {
        kind::HELLO => msg(Message::Hello(Hello::default())),
        kind::ERROR => {
            let k = r.u16()?;
            let code = r.u16()?;
            msg(Message::Error(ErrorMsg { kind: k, code, data: r.rest().to_vec() }))
        }
        kind::ECHO_REQUEST => msg(Message::EchoRequest(r.rest().to_vec())),
        kind::ECHO_REPLY => msg(Message::EchoReply(r.rest().to_vec())),
        kind::FEATURES_REQUEST => {
            empty(&r, "features_request")?;
            msg(Message::FeaturesRequest)
        }
        kind::GET_CONFIG_REQUEST => {
            empty(&r, "get_config_request")?;
            msg(Message::GetConfigRequest)
        }
        kind::SET_CONFIG => {
            let flags = r.u16()?;
            let miss_send_len = r.u16()?;
            empty(&r, "set_config")?;
            msg(Message::SetConfig(SwitchConfig { flags, miss_send_len }))
        }
        kind::BARRIER_REQUEST => {
            empty(&r, "barrier_request")?;
            msg(Message::BarrierRequest)
        }
        kind::FLOW_MOD => {
            let matches = decode_match(&mut r)?;
            let tail = FlowModTail::read(&mut r)?;
            msg(Message::FlowMod(tail.into_flow_mod(matches, None, r.rest(), table_id_ext)?))
        }
        kind::PORT_MOD => {
            let port_no = r.u16()?;
            let hw_addr = r.array()?;
            let config = r.u32()?;
            let mask = r.u32()?;
            let advertise = r.u32()?;
            r.skip(4)?;
            empty(&r, "port_mod")?;
            msg(Message::PortMod(PortMod {
                port_no: port10_to_of(port_no),
                hw_addr,
                config,
                mask,
                advertise: features10_to_13(advertise),
            }))
        }
        kind::STATS_REQUEST => decode_stats_request(header, &mut r, bytes.len()),
        kind::PACKET_OUT => {
            let buffer_id = r.u32()?;
            let in_port = r.u16()?;
            let actions_len = usize::from(r.u16()?);
            if actions_len % 8 != 0 {
                return Err(bad_len("ofp_packet_out actions (1.0)", actions_len));
            }
            // The actions' context is the frame's; SET_TP_SRC/DST need the protocol in the
            // match, which a packet-out has not: they are refused as in a flow without it.
            let actions = decode_actions(r.take(actions_len)?, &Match::default())?;
            msg(Message::PacketOut(PacketOut {
                buffer_id,
                in_port: port10_to_of(in_port),
                actions,
                data: r.rest().to_vec(),
            }))
        }
        kind::VENDOR => {
            let vendor = r.u32()?;
            if vendor != NX_VENDOR_ID {
                return reject(
                    format!("vendor {vendor:#010x} messages are not supported by rqvs"),
                    BAD_REQUEST_BAD_VENDOR,
                );
            }
            let sub = r.u32()?;
            let req = match sub {
                NXT_SET_FLOW_FORMAT => {
                    let f = r.u32()?;
                    empty(&r, "nxt_set_flow_format")?;
                    Request::SetFlowFormat(match f {
                        0 => FlowFormat::OpenFlow10,
                        2 => FlowFormat::Nxm,
                        _ => {
                            return reject(format!("flow format {f} (rqvs has OpenFlow10 and NXM)"), BAD_REQUEST_EPERM)
                        }
                    })
                }
                NXT_FLOW_MOD_TABLE_ID => {
                    let set = r.u8()?;
                    r.skip(7)?;
                    empty(&r, "nxt_flow_mod_table_id")?;
                    Request::FlowModTableId(set != 0)
                }
                NXT_SET_PACKET_IN_FORMAT => {
                    let f = r.u32()?;
                    empty(&r, "nxt_set_packet_in_format")?;
                    if f > 2 {
                        return reject(format!("packet-in format {f}"), BAD_REQUEST_EPERM);
                    }
                    Request::SetPacketInFormat(f)
                }
                crate::of10_async::NXT_SET_ASYNC_CONFIG => {
                    // The six masks of OpenFlow 1.3's SET_ASYNC, in the same order.
                    let c = crate::async_config::AsyncConfig::decode(crate::OFP13, r.rest())?;
                    Request::Msg(Box::new(Message::SetAsync(c)))
                }
                crate::flow_monitor::NXT_FLOW_MONITOR_CANCEL => {
                    Request::FlowMonitorCancel(crate::flow_monitor::decode_cancel(r.rest())?)
                }
                NXT_FLOW_MOD => {
                    let tail = FlowModTail::read(&mut r)?;
                    let match_len = usize::from(r.u16()?);
                    r.skip(6)?;
                    let nx = crate::nxm::pull_match(&mut r, match_len)?;
                    let fm = tail.into_flow_mod(nx.matches, nx.cookie, r.rest(), table_id_ext)?;
                    Request::Msg(Box::new(Message::FlowMod(fm)))
                }
                _ => {
                    return reject(
                        format!("Nicira message subtype {sub} is not supported by rqvs"),
                        BAD_REQUEST_BAD_SUBTYPE,
                    )
                }
            };
            Ok(Decoded { header, request: req, nx_stats: false })
        }
        t => reject(format!("OpenFlow 1.0 message type {t} is not supported by rqvs"), OfError::BAD_REQUEST_BAD_TYPE),
    }
}

fn decode_stats_request(header: Header, r: &mut Reader<'_>, total: usize) -> Result<Decoded, DecodeError> {
    let kind = r.u16()?;
    let flags = r.u16()?;
    let mut nx_stats = false;
    let empty = |r: &Reader<'_>| if r.is_empty() { Ok(()) } else { Err(bad_len("stats_request (1.0)", total)) };
    let body = match kind {
        OFPST_DESC => {
            empty(r)?;
            MultipartRequestBody::Desc
        }
        OFPST_TABLE => {
            empty(r)?;
            MultipartRequestBody::Table
        }
        OFPST_PORT_DESC => {
            // OVS's request carries a port (OFPP_NONE: all); rqvs answers with every port.
            MultipartRequestBody::PortDesc
        }
        OFPST_PORT => {
            let port = r.u16()?;
            r.skip(6)?;
            empty(r)?;
            MultipartRequestBody::PortStats { port_no: port10_to_of(port) }
        }
        OFPST_FLOW | OFPST_AGGREGATE => {
            let matches = decode_match(r)?;
            let table_id = r.u8()?;
            r.skip(1)?;
            let out_port = r.u16()?;
            empty(r)?;
            let req = FlowStatsRequest {
                table_id,
                out_port: port10_to_of(out_port),
                out_group: OFPG_ANY,
                cookie: 0,
                cookie_mask: 0,
                matches,
            };
            if kind == OFPST_FLOW {
                MultipartRequestBody::Flow(req)
            } else {
                MultipartRequestBody::Aggregate(req)
            }
        }
        OFPST_VENDOR => {
            let vendor = r.u32()?;
            if vendor != NX_VENDOR_ID {
                return reject(
                    format!("vendor {vendor:#010x} statistics are not supported by rqvs"),
                    BAD_REQUEST_BAD_VENDOR,
                );
            }
            let sub = r.u32()?;
            r.skip(4)?;
            if sub == crate::flow_monitor::NXST_FLOW_MONITOR {
                let reqs = crate::flow_monitor::decode_nx_requests(r.rest())?;
                return Ok(Decoded { header, request: Request::FlowMonitor(reqs), nx_stats: true });
            }
            if sub != NXST_FLOW && sub != NXST_AGGREGATE {
                return reject(
                    format!("Nicira statistics subtype {sub} is not supported by rqvs"),
                    BAD_REQUEST_BAD_SUBTYPE,
                );
            }
            let out_port = r.u16()?;
            let match_len = usize::from(r.u16()?);
            let table_id = r.u8()?;
            r.skip(3)?;
            let nx = crate::nxm::pull_match(r, match_len)?;
            empty(r)?;
            let (cookie, cookie_mask) = nx.cookie.unwrap_or((0, 0));
            let req = FlowStatsRequest {
                table_id,
                out_port: port10_to_of(out_port),
                out_group: OFPG_ANY,
                cookie,
                cookie_mask,
                matches: nx.matches,
            };
            nx_stats = true;
            if sub == NXST_FLOW {
                MultipartRequestBody::Flow(req)
            } else {
                MultipartRequestBody::Aggregate(req)
            }
        }
        t => return reject(format!("OpenFlow 1.0 statistics type {t} is not supported by rqvs"), BAD_REQUEST_BAD_STAT),
    };
    Ok(Decoded {
        header,
        request: Request::Msg(Box::new(Message::MultipartRequest(MultipartRequest { flags, body }))),
        nx_stats,
    })
}

/// 1.3 `OFPPF_*` bits as 1.0's: the speeds up to 10 Gb/s keep their bits, copper..pause-asym
/// move down 4 (1.3 added 40G, 100G, 1T and OTHER between); the others have no 1.0 bit.
pub fn features13_to_10(f: u32) -> u32 {
    (f & 0x7f) | ((f >> 4) & (0x1f << 7))
}

/// The inverse of [`features13_to_10`].
pub fn features10_to_13(f: u32) -> u32 {
    (f & 0x7f) | ((f & (0x1f << 7)) << 4)
}

/// Writes `p` as an `ofp_phy_port` (48 bytes).
pub fn write_phy_port(w: &mut Writer, p: &Port) -> Result<(), EncodeError> {
    let Some(no) = port_of_to10(p.port_no) else { return enc_err(format!("port {:#x}: no 1.0 number", p.port_no)) };
    w.u16(no);
    w.put(&p.hw_addr);
    crate::port::write_str(w, &p.name, 16, "ofp_phy_port.name")?;
    // 1.0's config bits are 1.3's (PORT_DOWN, NO_RECV, NO_FWD, NO_PACKET_IN; 1.0's STP bits
    // unused); of the state only LINK_DOWN (1.0's STP state bits 0 = listening, unused).
    w.u32(p.config & 0x7f);
    w.u32(p.state & 1);
    let e = p.ethernet.unwrap_or_default();
    for f in [e.curr, e.advertised, e.supported, e.peer] {
        w.u32(features13_to_10(f));
    }
    Ok(())
}

fn header(w: &mut Writer, kind: u8, xid: u32) {
    Header { version: OFP10, kind, length: 0, xid }.write(w);
}

/// A FEATURES_REPLY (1.0 carries the ports in it).
pub fn encode_features_reply(xid: u32, f: &Features, ports: &[Port]) -> Result<Vec<u8>, EncodeError> {
    let mut w = Writer::new();
    header(&mut w, kind::FEATURES_REPLY, xid);
    w.u64(f.datapath_id);
    w.u32(f.n_buffers);
    w.u8(f.n_tables);
    w.zeros(3);
    w.u32(CAPABILITIES);
    w.u32(ACTIONS_BITMAP);
    for p in ports {
        write_phy_port(&mut w, p)?;
    }
    w.finish_message()
}

/// How OpenFlow 1.0 carries an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Of10Error {
    /// A standard 1.0 type and code.
    Plain(u16, u16),
    /// OVS's Nicira wrapper (`NXET_VENDOR`, code 0, vendor 0x2320) around this type and code:
    /// OVS's own 1.0 codes for errors 1.0 lacks ("NX1.0(1,260)" for `OFPBMC_BAD_PREREQ`),
    /// `NXBRC_UNENCODABLE_ERROR` (NX1.0 (1,521)) for PORT_MOD_FAILED's codes beyond 1.0's, and
    /// the later version's type and code for the rest, as OVS 3.1 sends them.
    Nx(u16, u16),
}

/// An OpenFlow (1.3-numbered) error as 1.0 says it (OVS's `ofp-errors.h` table).
pub fn error_to_of10(e: OfError) -> Of10Error {
    let (t, c) = (e.kind, e.code);
    let nx = |t, c| Of10Error::Nx(t, c);
    match (t, c) {
        (0, _) | (1, 0..=8) | (2, 0..=8) => Of10Error::Plain(t, c),
        (1, 10) => Of10Error::Plain(1, 5),
        (5, 1) => Of10Error::Plain(3, 0),
        (5, 3) => Of10Error::Plain(3, 1),
        (5, 4) => Of10Error::Plain(3, 2),
        (5, 6) => Of10Error::Plain(3, 4),
        (7, 0) => Of10Error::Plain(4, 0),
        (7, 1) => Of10Error::Plain(4, 1),
        (1, 9) => nx(1, 512),
        (1, 11) => nx(1, 514),
        (2, 10) => nx(1, 522),
        (2, 13) => nx(1, 523),
        (2, 14) => nx(1, 524),
        (2, 15) => nx(1, 525),
        (3, 1) => nx(2, 257),
        (4, 5) => nx(1, 262),
        (4, 6) => nx(0, 263),
        (4, 7) => nx(1, 258),
        (4, 8) => nx(1, 259),
        (4, 9) => nx(1, 260),
        (4, 10) => nx(1, 261),
        (5, 7) => nx(3, 258),
        // PORT_MOD_FAILED's BAD_CONFIG, BAD_ADVERTISE, EPERM: 1.0 has only BAD_PORT and
        // BAD_HW_ADDR, and `ovs-ofctl` cannot read these in the wrapper: OVS's
        // NXBRC_UNENCODABLE_ERROR, as OVS sends an error it cannot say in 1.0.
        (7, 2..=4) => nx(1, 521),
        _ => nx(t, c),
    }
}

fn write_error(w: &mut Writer, e: &ErrorMsg) {
    match error_to_of10(e.of_error()) {
        Of10Error::Plain(t, c) => {
            w.u16(t);
            w.u16(c);
        }
        Of10Error::Nx(t, c) => {
            w.u16(NXET_VENDOR);
            w.u16(0);
            w.u32(NX_VENDOR_ID);
            w.u16(t);
            w.u16(c);
        }
    }
    w.put(&e.data);
}

fn nx_stats_header(w: &mut Writer, flags: u16, subtype: u32) {
    w.u16(OFPST_VENDOR);
    w.u16(flags);
    w.u32(NX_VENDOR_ID);
    w.u32(subtype);
    w.zeros(4);
}

/// A duration's nanoseconds at OVS's precision (it keeps flow times in milliseconds, so
/// `ovs-ofctl` prints `duration=0.017s`).
fn ms_precision(nsec: u32) -> u32 {
    nsec / 1_000_000 * 1_000_000
}

/// One `nx_flow_stats` entry.
fn write_nx_flow(w: &mut Writer, s: &FlowStats) -> Result<(), EncodeError> {
    let start = w.len();
    w.u16(0);
    w.u8(s.table_id);
    w.u8(0);
    w.u32(s.duration_sec);
    w.u32(ms_precision(s.duration_nsec));
    w.u16(s.priority);
    w.u16(s.idle_timeout);
    w.u16(s.hard_timeout);
    let match_len_at = w.len();
    w.u16(0);
    // Seconds since the last packet and since the last change, plus one (0: unknown). rqvs
    // keeps no per-flow last-hit time: both are the flow's age, exact for a flow no packet
    // has hit.
    let age = u16::try_from(s.duration_sec).unwrap_or(u16::MAX - 1) + 1;
    w.u16(age);
    w.u16(age);
    w.u64(s.cookie);
    w.u64(s.packet_count);
    w.u64(s.byte_count);
    let ml = crate::nxm::encode(&s.matches, w)?;
    w.patch_u16(match_len_at, ml);
    w.pad8();
    encode_actions(&s.actions, w)?;
    let len = w.len() - start;
    w.patch_u16(start, u16::try_from(len).map_err(|_| EncodeError("a flow entry over 64 KiB".into()))?);
    Ok(())
}

/// One 1.0 `ofp_flow_stats` entry.
fn write_flow10(w: &mut Writer, s: &FlowStats) -> Result<(), EncodeError> {
    let start = w.len();
    w.u16(0);
    w.u8(s.table_id);
    w.u8(0);
    encode_match(&s.matches, w)?;
    w.u32(s.duration_sec);
    w.u32(ms_precision(s.duration_nsec));
    w.u16(s.priority);
    w.u16(s.idle_timeout);
    w.u16(s.hard_timeout);
    w.zeros(6);
    w.u64(s.cookie);
    w.u64(s.packet_count);
    w.u64(s.byte_count);
    encode_actions(&s.actions, w)?;
    let len = w.len() - start;
    w.patch_u16(start, u16::try_from(len).map_err(|_| EncodeError("a flow entry over 64 KiB".into()))?);
    Ok(())
}

fn write_str(w: &mut Writer, s: &str, n: usize, what: &'static str) -> Result<(), EncodeError> {
    crate::port::write_str(w, s, n, what)
}

fn write_stats_reply(w: &mut Writer, r: &MultipartReply, form: ReplyForm) -> Result<(), EncodeError> {
    let flags = r.flags;
    let plain = |w: &mut Writer, kind: u16| {
        w.u16(kind);
        w.u16(flags);
    };
    match &r.body {
        MultipartReplyBody::Desc(d) => {
            plain(w, OFPST_DESC);
            write_desc(w, d)?;
        }
        MultipartReplyBody::Flow(flows) => {
            if form.nx_stats {
                nx_stats_header(w, flags, NXST_FLOW);
                for f in flows {
                    write_nx_flow(w, f)?;
                }
            } else {
                plain(w, OFPST_FLOW);
                for f in flows {
                    write_flow10(w, f)?;
                }
            }
        }
        MultipartReplyBody::Aggregate(a) => {
            if form.nx_stats {
                nx_stats_header(w, flags, NXST_AGGREGATE);
            } else {
                plain(w, OFPST_AGGREGATE);
            }
            write_aggregate(w, a);
        }
        MultipartReplyBody::Table(tables) => {
            plain(w, OFPST_TABLE);
            for t in tables {
                write_table(w, t)?;
            }
        }
        MultipartReplyBody::PortStats(ports) => {
            plain(w, OFPST_PORT);
            for p in ports {
                write_port_stats(w, p)?;
            }
        }
        MultipartReplyBody::PortDesc(ports) => {
            plain(w, OFPST_PORT_DESC);
            for p in ports {
                write_phy_port(w, p)?;
            }
        }
        other => return enc_err(format!("{other:?} has no OpenFlow 1.0 statistics reply")),
    }
    Ok(())
}

fn write_desc(w: &mut Writer, d: &Desc) -> Result<(), EncodeError> {
    write_str(w, &d.mfr_desc, 256, "ofp_desc_stats.mfr_desc")?;
    write_str(w, &d.hw_desc, 256, "ofp_desc_stats.hw_desc")?;
    write_str(w, &d.sw_desc, 256, "ofp_desc_stats.sw_desc")?;
    write_str(w, &d.serial_num, 32, "ofp_desc_stats.serial_num")?;
    write_str(w, &d.dp_desc, 256, "ofp_desc_stats.dp_desc")
}

fn write_aggregate(w: &mut Writer, a: &AggregateStats) {
    w.u64(a.packet_count);
    w.u64(a.byte_count);
    w.u32(a.flow_count);
    w.zeros(4);
}

/// One 1.0 `ofp_table_stats` (64 bytes): no name, every 1.0 field wildcardable, no limit of
/// entries (2³²−1, as rqvs's TABLE_FEATURES says).
fn write_table(w: &mut Writer, t: &TableStats) -> Result<(), EncodeError> {
    w.u8(t.table_id);
    w.zeros(3);
    write_str(w, "", 32, "ofp_table_stats.name")?;
    w.u32(OFPFW10_ALL);
    w.u32(u32::MAX);
    w.u32(t.active_count);
    w.u64(t.lookup_count);
    w.u64(t.matched_count);
    Ok(())
}

/// One 1.0 `ofp_port_stats` (104 bytes); counters rqvs does not keep (frame, overrun, CRC
/// errors, collisions) are all-ones, which `ovs-ofctl` prints as `?`, as for OVS's own.
fn write_port_stats(w: &mut Writer, p: &PortStats) -> Result<(), EncodeError> {
    let Some(no) = port_of_to10(p.port_no) else { return enc_err(format!("port {:#x}: no 1.0 number", p.port_no)) };
    w.u16(no);
    w.zeros(6);
    for c in [p.rx_packets, p.tx_packets, p.rx_bytes, p.tx_bytes, p.rx_dropped, p.tx_dropped, p.rx_errors, p.tx_errors]
    {
        w.u64(c);
    }
    let e = p.ethernet.unwrap_or_default();
    let unknown = |c: u64| if p.ethernet.is_some() { c } else { u64::MAX };
    w.u64(unknown(e.rx_frame_err));
    w.u64(unknown(e.rx_over_err));
    w.u64(unknown(e.rx_crc_err));
    w.u64(unknown(e.collisions));
    Ok(())
}

/// Encodes a reply (or ECHO_REQUEST, ERROR) as 1.0. FEATURES_REPLY goes through
/// [`encode_features_reply`] (it carries the ports).
pub fn encode(xid: u32, msg: &Message, form: ReplyForm) -> Result<Vec<u8>, EncodeError> {
    let mut w = Writer::new();
    match msg {
        Message::Hello(_) => header(&mut w, kind::HELLO, xid),
        Message::Error(e) => {
            header(&mut w, kind::ERROR, xid);
            write_error(&mut w, e);
        }
        Message::EchoRequest(d) => {
            header(&mut w, kind::ECHO_REQUEST, xid);
            w.put(d);
        }
        Message::EchoReply(d) => {
            header(&mut w, kind::ECHO_REPLY, xid);
            w.put(d);
        }
        Message::GetConfigReply(c) => {
            header(&mut w, kind::GET_CONFIG_REPLY, xid);
            w.u16(c.flags);
            w.u16(c.miss_send_len);
        }
        Message::BarrierReply => header(&mut w, kind::BARRIER_REPLY, xid),
        Message::MultipartReply(r) => {
            header(&mut w, kind::STATS_REPLY, xid);
            write_stats_reply(&mut w, r, form)?;
        }
        Message::FeaturesReply(_) => return enc_err("a 1.0 FEATURES_REPLY carries the ports: encode_features_reply"),
        // What a controller sends (tests, tools).
        Message::PacketOut(po) => {
            header(&mut w, kind::PACKET_OUT, xid);
            w.u32(po.buffer_id);
            let Some(in_port) = port_of_to10(po.in_port) else {
                return enc_err(format!("in_port {:#x}: no 1.0 number", po.in_port));
            };
            w.u16(in_port);
            let at = w.len();
            w.u16(0);
            let start = w.len();
            encode_actions(&po.actions, &mut w)?;
            let len = u16::try_from(w.len() - start).or_else(|_| enc_err("packet_out actions over 64 KiB"))?;
            w.patch_u16(at, len);
            w.put(&po.data);
        }
        Message::PortMod(pm) => {
            header(&mut w, kind::PORT_MOD, xid);
            let Some(no) = port_of_to10(pm.port_no) else {
                return enc_err(format!("port {:#x}: no 1.0 number", pm.port_no));
            };
            w.u16(no);
            w.put(&pm.hw_addr);
            w.u32(pm.config);
            w.u32(pm.mask);
            w.u32(features13_to_10(pm.advertise));
            w.zeros(4);
        }
        other => return enc_err(format!("{other:?} is not sent in OpenFlow 1.0 by rqvs")),
    }
    w.finish_message()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_flow::formats::ofctl;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    fn rule(text: &str) -> rqvs_flow::Rule {
        ofctl::parse_flow("test", 1, text, 0).unwrap()
    }

    fn flow_mod(bytes: &str, ext: bool) -> FlowMod {
        match decode(&hex(bytes), ext).unwrap().request {
            Request::Msg(m) => match *m {
                Message::FlowMod(fm) => fm,
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    /// `ovs-ofctl packet-out SOCK controller output:1 FRAME` and `mod-port SOCK p2 no-flood`
    /// as 3.1 sends them without `-O` (captured with strace): decoded, and written back to the
    /// same bytes.
    #[test]
    fn packet_out_and_port_mod_of_ovs_ofctl_round_trip() {
        let po = hex("010d004200000006fffffffffffd00080000000800010000ffffffffffff00000000000108060001080006040001000000000001c0a80001000000000000c0a80002");
        let Request::Msg(m) = decode(&po, false).unwrap().request else { panic!() };
        let Message::PacketOut(p) = &*m else { panic!("{m:?}") };
        assert_eq!(p.in_port, 0xffff_fffd);
        assert_eq!(p.buffer_id, u32::MAX);
        assert_eq!(p.actions, rule("actions=output:1").actions);
        assert_eq!(p.data.len(), 42);
        assert_eq!(encode(6, &m, ReplyForm::default()).unwrap(), po);
        let pm = hex("010f0020000000040002aa55aa55000e00000010000000100000000000000000");
        let Request::Msg(m) = decode(&pm, false).unwrap().request else { panic!() };
        let Message::PortMod(p) = &*m else { panic!("{m:?}") };
        assert_eq!((p.port_no, p.config, p.mask, p.advertise), (2, 0x10, 0x10, 0));
        assert_eq!(p.hw_addr, [0xaa, 0x55, 0xaa, 0x55, 0, 0x0e]);
        assert_eq!(encode(4, &m, ReplyForm::default()).unwrap(), pm);
        // A packet-out whose actions length is not a multiple of 8.
        let mut bad = po.clone();
        bad[15] = 7;
        assert!(decode(&bad, false).is_err());
    }

    /// FLOW_MODs `ovs-ofctl` 3.1 sent without `-O` (captured): each decodes to the rule its
    /// text is.
    #[test]
    fn flow_mods_of_ovs_ofctl_decode_to_their_rules() {
        // add-flow 'priority=10,ip,nw_src=10.0.0.0/8,actions=output:2'
        let fm = flow_mod("010e005000000006003818ef0000000000000000000000000000000000000800000000000a00000000000000000000000000000000000000000000000000000affffffffffff00000000000800020000", false);
        let r = rule("priority=10,ip,nw_src=10.0.0.0/8,actions=output:2");
        assert_eq!((fm.command, fm.priority, fm.table_id), (FlowModCommand::Add, 10, 0xff));
        assert_eq!((fm.matches, fm.actions), (r.matches, r.actions));
        // table=3 after NXT_FLOW_MOD_TABLE_ID: 'table=3,priority=9,ip,nw_tos=8,actions=output:1'
        let fm = flow_mod("010e005000000008001820ef00000000000000000000000000000000000008000800000000000000000000000000000000000000000000000300000000000009ffffffffffff00000000000800010000", true);
        let r = rule("priority=9,ip,nw_tos=8,actions=output:1");
        assert_eq!((fm.table_id, fm.matches, fm.actions), (3, r.matches, r.actions));
        // 'priority=9,ip,actions=controller,mod_vlan_vid:5,strip_vlan'
        let fm = flow_mod("010e006000000006003820ef00000000000000000000000000000000000008000000000000000000000000000000000000000000000000000000000000000009ffffffffffff000000000008fffdffff00010008000500000003000800000000", false);
        assert_eq!(fm.actions, rule("ip,actions=controller,mod_vlan_vid:5,strip_vlan").actions);
        // del-flows --strict priority=5
        let fm = flow_mod("010e004800000006003820ff00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000004000000000005ffffffffffff0000", false);
        assert_eq!(
            (fm.command, fm.priority, fm.matches, fm.out_port),
            (FlowModCommand::DeleteStrict, 5, Match::ANY, OFPP_ANY)
        );
        // NXT_FLOW_MOD: 'priority=9,dl_src=01:00:00:00:00:00/01:00:00:00:00:00,tcp,tcp_flags=+syn,
        // actions=dec_ttl,mod_nw_ttl:9,mod_vlan_pcp:3,mod_tp_src:80,mod_nw_tos:8,
        // load:0x3->NXM_NX_IP_ECN[],resubmit(,2),write_metadata:0x5/0xff'
        // mod_vlan_pcp on a flow that does not match a VLAN: OVS pushes a tag in 1.0; rqvs
        // refuses it, as in 1.3 (MATCH_INCONSISTENT). The rest of the bytes decode as sent.
        let bytes = hex("010400e000000008000023200000000d00000000000000000000000000000009ffffffffffff000000230000000000000000050c01000000000001000000000000000602080000000c010600014504000200020000000000ffff0010000023200012000000000000ffff0018000023200007000700013a010000000000000009000200080300000000090008005000000008000808000000ffff00180000232000070001000138010000000000000003ffff001000002320000efff802000000ffff0020000023200016000000000000000000000000000500000000000000ff");
        let e = decode(&bytes, false).unwrap_err();
        assert_eq!(e.of_error(), crate::action::BAD_ACTION_MATCH_INCONSISTENT);
        let nx = crate::nxm::decode(&bytes[48..48 + 35]).unwrap();
        let actions = decode_actions(&bytes[48 + 40..], &nx.matches).unwrap();
        let fm = FlowMod { matches: nx.matches, actions, ..FlowMod::add(9, Match::ANY, Actions::drop()) };
        let r = rule("priority=9,dl_src=01:00:00:00:00:00/01:00:00:00:00:00,tcp,tcp_flags=+syn,actions=drop");
        assert_eq!(fm.matches, r.matches);
        let r = rule("dl_vlan=1,tcp,actions=dec_ttl,mod_nw_ttl:9,set_field:3->vlan_pcp,mod_tp_src:80,mod_nw_tos:8,set_field:3->nw_ecn,resubmit(,2),write_metadata:0x5/0xff");
        assert_eq!(fm.actions.to_string(), r.actions.to_string());
        // Encoding those actions gives ovs-ofctl's bytes back.
        let mut w = Writer::new();
        encode_actions(&fm.actions, &mut w).unwrap();
        assert_eq!(w.bytes, hex("ffff0010000023200012000000000000ffff0018000023200007000700013a010000000000000009000200080300000000090008005000000008000808000000ffff00180000232000070001000138010000000000000003ffff001000002320000efff802000000ffff0020000023200016000000000000000000000000000500000000000000ff"));
        // NXT_FLOW_MOD 'priority=11,ipv6,ipv6_src=::1,actions=set_field:::2->ipv6_dst,output:2':
        // two 64-bit loads, read back as one set_field.
        let fm = flow_mod("0104008800000008000023200000000d0000000000000000000000000000000bffffffffffff0000001a0000000000000000060286dd0001261000000000000000000000000000000001000000000000ffff0018000023200007003f000128100000000000000002ffff0018000023200007103f0001281000000000000000000000000800020000", false);
        let r = rule("priority=11,ipv6,ipv6_src=::1,actions=set_field:::2->ipv6_dst,output:2");
        assert_eq!((fm.matches, &fm.actions), (r.matches, &r.actions));
        let mut w = Writer::new();
        encode_actions(&fm.actions, &mut w).unwrap();
        assert_eq!(w.bytes, hex("ffff0018000023200007003f000128100000000000000002ffff0018000023200007103f0001281000000000000000000000000800020000"));
    }

    #[test]
    fn matches_round_trip_through_ofp10_match() {
        for t in [
            "priority=1",
            "in_port=3",
            "dl_src=01:02:03:04:05:06,dl_dst=0a:00:00:00:00:01",
            "dl_vlan=5",
            "dl_vlan=0xffff",
            "dl_vlan_pcp=3",
            "dl_vlan=7,dl_vlan_pcp=1",
            "ip,nw_src=10.0.0.0/8,nw_dst=1.2.3.4",
            "ip,nw_tos=8",
            "tcp,tp_src=80,tp_dst=443",
            "udp,tp_dst=53",
            "icmp,icmp_type=8,icmp_code=0",
            "arp,arp_op=1,arp_spa=10.0.0.1",
            "ipv6",
        ] {
            let want = rule(&format!("{t},actions=drop")).matches;
            let mut w = Writer::new();
            encode_match(&want, &mut w).unwrap();
            assert_eq!(w.len(), MATCH10_LEN, "{t}");
            let back = decode_match(&mut Reader::new(&w.bytes, "t")).unwrap();
            assert_eq!(back, want, "{t}");
        }
        for t in [
            "dl_src=01:00:00:00:00:00/01:00:00:00:00:00",
            "ipv6,ipv6_src=::1",
            "tcp,tcp_flags=+syn",
            "ip,nw_ttl=3",
            "tcp,tp_dst=0x1000/0xf000",
            "ip,nw_src=10.0.0.1/255.0.255.0",
        ] {
            let m = rule(&format!("{t},actions=drop")).matches;
            assert!(!fits_match10(&m), "{t} fits 1.0?");
        }
    }

    #[test]
    fn stats_requests_of_ovs_ofctl_decode() {
        // NXST_FLOW with 'ipv6'.
        let d = decode(&hex("0110002800000008ffff0000000023200000000000000000ffff0006ff0000000000060286dd0000"), false)
            .unwrap();
        assert!(d.nx_stats);
        let Request::Msg(m) = d.request else { panic!() };
        let Message::MultipartRequest(MultipartRequest { body: MultipartRequestBody::Flow(req), .. }) = *m else {
            panic!()
        };
        assert_eq!((req.table_id, req.out_port, req.matches), (0xff, OFPP_ANY, rule("ipv6,actions=drop").matches));
        // OFPST_PORT for every port, OFPST_TABLE, OFPST_PORT_DESC.
        for (b, want) in [
            ("011000140000000200040000ffff000000000000", MultipartRequestBody::PortStats { port_no: OFPP_ANY }),
            ("0110000c0000000200030000", MultipartRequestBody::Table),
            ("0110000c00000002000d0000", MultipartRequestBody::PortDesc),
        ] {
            let d = decode(&hex(b), false).unwrap();
            assert_eq!(
                d.request,
                Request::Msg(Box::new(Message::MultipartRequest(MultipartRequest { flags: 0, body: want })))
            );
        }
        // NXT_SET_FLOW_FORMAT(nxm), NXT_FLOW_MOD_TABLE_ID(enable).
        assert_eq!(
            decode(&hex("0104001400000002000023200000000c00000002"), false).unwrap().request,
            Request::SetFlowFormat(FlowFormat::Nxm)
        );
        assert_eq!(
            decode(&hex("0104001800000006000023200000000f0100000000000000"), false).unwrap().request,
            Request::FlowModTableId(true)
        );
        // Unknown: stats type 5 (queue), vendor subtype 99, message type 20.
        assert_eq!(decode(&hex("0110000c0000000200050000"), false).unwrap_err().of_error(), BAD_REQUEST_BAD_STAT);
        assert_eq!(
            decode(&hex("0104001000000002000023200000006300000000"[..32].as_ref()), false).unwrap_err().of_error(),
            BAD_REQUEST_BAD_SUBTYPE
        );
        assert_eq!(decode(&hex("0114000800000002"), false).unwrap_err().of_error(), OfError::BAD_REQUEST_BAD_TYPE);
        // Truncated bodies never panic.
        for n in 8..40 {
            let b = hex("0110002800000008ffff0000000023200000000000000000ffff0006ff0000000000060286dd0000");
            let mut cut = b[..n].to_vec();
            cut[2..4].copy_from_slice(&(n as u16).to_be_bytes());
            assert!(decode(&cut, false).is_err(), "{n}");
        }
    }

    /// The NXST_FLOW reply entry real OVS 3.1 sent for 'priority=11,ipv6,ipv6_src=::1,
    /// actions=set_field:::2->ipv6_dst,output:2' (its duration and age aside).
    #[test]
    fn nx_flow_stats_are_written_as_ovs_writes_them() {
        let r = rule("priority=11,ipv6,ipv6_src=::1,actions=set_field:::2->ipv6_dst,output:2");
        let s = FlowStats {
            table_id: 0,
            duration_sec: 0,
            duration_nsec: 0x0089_5440 + 123,
            priority: 11,
            idle_timeout: 0,
            hard_timeout: 0,
            flags: 0,
            importance: 0,
            cookie: 0,
            packet_count: 0,
            byte_count: 0,
            matches: r.matches,
            actions: r.actions,
        };
        let reply = MultipartReply { flags: 0, body: MultipartReplyBody::Flow(vec![s]) };
        let bytes = encode(8, &Message::MultipartReply(reply), ReplyForm { nx_stats: true }).unwrap();
        assert_eq!(bytes, hex("011100a000000008ffff0000000023200000000000000000008800000000000000895440000b00000000001a000100010000000000000000000000000000000000000000000000000000060286dd0001261000000000000000000000000000000001000000000000ffff0018000023200007003f000128100000000000000002ffff0018000023200007103f0001281000000000000000000000000800020000"));
        // NXST_AGGREGATE, as OVS's.
        let a = MultipartReply {
            flags: 0,
            body: MultipartReplyBody::Aggregate(AggregateStats { packet_count: 0, byte_count: 0, flow_count: 2 }),
        };
        let bytes = encode(4, &Message::MultipartReply(a), ReplyForm { nx_stats: true }).unwrap();
        assert_eq!(
            bytes,
            hex("0111003000000004ffff0000000023200000000100000000000000000000000000000000000000000000000200000000")
        );
    }

    #[test]
    fn errors_are_said_in_1_0() {
        let e = |err: OfError| {
            let b = encode(6, &Message::Error(ErrorMsg::new(err, &[1, 2])), ReplyForm::default()).unwrap();
            b[8..].to_vec()
        };
        assert_eq!(e(OfError::FLOW_MOD_FAILED_OVERLAP), [0, 3, 0, 1, 1, 2]);
        // OVS's NX1.0 code (1,260), in the Nicira wrapper.
        assert_eq!(e(OfError::BAD_MATCH_BAD_PREREQ), hex("b0c2000000002320000101040102"));
        assert_eq!(e(OfError::BAD_REQUEST_IS_SLAVE), [0, 1, 0, 5, 1, 2]);
        // BAD_OUT_GROUP has no 1.0 code: OVS's vendor wrapper (as OVS 3.1 sent it).
        assert_eq!(e(OfError::BAD_ACTION_BAD_OUT_GROUP), hex("b0c2000000002320000200090102"));
        // PORT_MOD's BAD_CONFIG: OVS's NXBRC_UNENCODABLE_ERROR (NX1.0 (1,521)).
        assert_eq!(e(OfError::PORT_MOD_FAILED_BAD_CONFIG), hex("b0c2000000002320000102090102"));
    }

    #[test]
    fn features_convert_both_ways() {
        // 1.3: 10GB_FD (1<<6), COPPER (1<<11), AUTONEG (1<<13) → 1.0: 1<<6, 1<<7, 1<<9.
        let f13 = 1 << 6 | 1 << 11 | 1 << 13;
        assert_eq!(features13_to_10(f13), 1 << 6 | 1 << 7 | 1 << 9);
        assert_eq!(features10_to_13(features13_to_10(f13)), f13);
    }
}
