//! OpenFlow 1.3/1.4 actions and instructions ↔ [`rqvs_flow::Actions`] (1.3 §7.2.4–7.2.5).
//!
//! rqvs holds a flow's instructions and actions in one list, as OVS's ofpacts: the `METER`
//! instruction first, then the `APPLY_ACTIONS` list, `CLEAR_ACTIONS`, `WRITE_ACTIONS(...)`,
//! `WRITE_METADATA` and `GOTO_TABLE` last — the order OVS keeps and sends them in.
//!
//! | rqvs action | OpenFlow (what `ovs-ofctl -O OpenFlow13` sends for the ofctl text) |
//! |---|---|
//! | `Output(n)` | `OUTPUT` port n (max_len 0) |
//! | `InPort`, `All`, `Flood` | `OUTPUT` to `OFPP_IN_PORT`, `OFPP_ALL`, `OFPP_FLOOD` |
//! | `Controller(max_len)` | `OUTPUT` to `OFPP_CONTROLLER`, max_len (65535 = `OFPCML_NO_BUFFER` when none: decodes to `Controller(None)`) |
//! | `SetDlSrc`, `SetDlDst` | `SET_FIELD` eth_src, eth_dst |
//! | `SetVlanVid(v)` | `SET_FIELD` vlan_vid = `OFPVID_PRESENT \| v`, preceded by `PUSH_VLAN` 0x8100 unless the match (or an earlier action) guarantees a tag |
//! | `StripVlan` | `POP_VLAN` |
//! | `SetNwTos(t)` | `SET_FIELD` ip_dscp = t >> 2 |
//! | `SetField{field,value}` | `SET_FIELD` of any writable field of `rqvs_flow::field::FIELDS` (its OXM code, else its NXM code), unmasked |
//! | `PushVlan(t)` | `PUSH_VLAN` t (0x8100 or 0x88a8) |
//! | `DecTtl` | `DEC_NW_TTL` |
//! | `Group(g)` | `GROUP` g |
//! | `Resubmit{in_port,table}` | Nicira `NXAST_RESUBMIT_TABLE` (subtype 14; `NXAST_RESUBMIT`, subtype 1, is read too) |
//! | `Drop` / empty list | no action (and no instruction at all) |
//! | `Normal` | `OUTPUT` to `OFPP_NORMAL` |
//! | `Output(0xfffe)` | `OUTPUT` to `OFPP_LOCAL` (the bridge's own port; OpenFlow 1.0's number) |
//! | `Other("TABLE")` | `OUTPUT` to `OFPP_TABLE` (kept as OVS prints it; the switch refuses `Other` in a flow, and takes `TABLE` only in a packet-out) |
//! | `Meter(m)` | instruction `METER` m |
//! | `ClearActions` | instruction `CLEAR_ACTIONS` |
//! | `WriteActions(list)` | instruction `WRITE_ACTIONS` with the list |
//! | `WriteMetadata{value,mask}` | instruction `WRITE_METADATA` |
//! | `GotoTable(t)` | instruction `GOTO_TABLE` t |
//!
//! **Decoding SET_FIELD.** `eth_src`, `eth_dst`, `vlan_vid` and `ip_dscp` decode to the typed
//! actions above (`SetDlSrc`, ..., what `ofctl::parse_flow` reads for `mod_dl_src` etc.), every
//! other field to [`Action::SetField`]. A `SetField` of those four fields encodes to the same
//! bytes, so it decodes back as the typed action.
//!
//! **VLAN.** `mod_vlan_vid` sets the VID of the outer tag, pushing one on an untagged frame. OVS
//! 3.1 sends it in 1.3/1.4 as `push_vlan:0x8100,set_field:4096|VID->vlan_vid` when the flow's
//! match does not require a tag, and as the `set_field` alone when it does (checked against a
//! capture in the tests). rqvs decodes `push_vlan:0x8100` immediately followed by `set_field
//! vlan_vid`, where neither the match nor an earlier action guarantees a tag, as one
//! [`Action::SetVlanVid`]; there rqvs (one `vlan_tci`, no QinQ) rewrites the VID of an existing
//! tag where OpenFlow would push a second one — the one deviation, and the reading OVS's own
//! `mod_vlan_vid` intends. Any other `push_vlan` (on a frame known to be tagged, not followed
//! by `set_field vlan_vid`, or 802.1ad's 0x88a8) is [`Action::PushVlan`].
//!
//! **Instructions.** Each instruction type at most once, in any order on the wire (as OVS reads
//! them; a second one is `BAD_INSTRUCTION` `DUP_INST`, code 9 — OpenFlow 1.4's number, also
//! sent in 1.3); kept in the list in OVS's order (above). An unknown type → `UNKNOWN_INST`;
//! experimenter → `BAD_EXPERIMENTER`. No instruction (or an empty `APPLY_ACTIONS` only)
//! decodes to [`Actions::drop`], as `ofctl::parse_flow` reads `actions=drop`. Whether a
//! `goto_table` goes forward is the switch's check (it knows the flow's table).
//!
//! Any other action type is `DecodeError::Unsupported` with `BAD_ACTION` `BAD_TYPE` naming it;
//! a `SET_FIELD` of a field rqvs lacks or OVS does not write, `BAD_SET_TYPE`.

use rqvs_flow::key::VLAN_CFI;
use rqvs_flow::{Action, Actions, Match};

use crate::error::{DecodeError, OfError};
use crate::oxm::{enc_err, put_set_table_field, read_set_field, reject, EncodeError, OFPVID_PRESENT};
use crate::wire::{Reader, Writer};

/// `OFPAT_OUTPUT`.
pub const OFPAT_OUTPUT: u16 = 0;
/// `OFPAT_PUSH_VLAN`.
pub const OFPAT_PUSH_VLAN: u16 = 17;
/// `OFPAT_POP_VLAN`.
pub const OFPAT_POP_VLAN: u16 = 18;
/// `OFPAT_GROUP`.
pub const OFPAT_GROUP: u16 = 22;
/// `OFPAT_DEC_NW_TTL`.
pub const OFPAT_DEC_NW_TTL: u16 = 24;
/// `OFPAT_SET_FIELD`.
pub const OFPAT_SET_FIELD: u16 = 25;
/// `OFPAT_EXPERIMENTER`.
pub const OFPAT_EXPERIMENTER: u16 = 0xffff;
/// Nicira's experimenter id.
pub const NX_VENDOR_ID: u32 = 0x0000_2320;
/// `NXAST_RESUBMIT`: resubmit to the current table.
pub const NXAST_RESUBMIT: u16 = 1;
/// `NXAST_RESUBMIT_TABLE`: resubmit to a table (what OVS sends for every `resubmit`).
pub const NXAST_RESUBMIT_TABLE: u16 = 14;

/// The fields `SET_FIELD` may set: every field of the table OVS lets an action write.
pub fn set_fields() -> impl Iterator<Item = &'static rqvs_flow::field::Field> {
    rqvs_flow::field::FIELDS.iter().filter(|f| crate::oxm::field_is_writable(f))
}

/// `OFPIT_GOTO_TABLE`.
pub const OFPIT_GOTO_TABLE: u16 = 1;
/// `OFPIT_WRITE_METADATA`.
pub const OFPIT_WRITE_METADATA: u16 = 2;
/// `OFPIT_WRITE_ACTIONS`.
pub const OFPIT_WRITE_ACTIONS: u16 = 3;
/// `OFPIT_APPLY_ACTIONS`.
pub const OFPIT_APPLY_ACTIONS: u16 = 4;
/// `OFPIT_CLEAR_ACTIONS`.
pub const OFPIT_CLEAR_ACTIONS: u16 = 5;
/// `OFPIT_METER`.
pub const OFPIT_METER: u16 = 6;

/// Reserved OpenFlow 1.3 ports used by actions.
pub const OFPP_IN_PORT: u32 = 0xffff_fff8;
/// `OFPP_TABLE` (packet-out only: run the packet through the table).
pub const OFPP_TABLE: u32 = 0xffff_fff9;
/// `OFPP_NORMAL`.
pub const OFPP_NORMAL: u32 = 0xffff_fffa;
/// `OFPP_FLOOD`.
pub const OFPP_FLOOD: u32 = 0xffff_fffb;
/// `OFPP_ALL`.
pub const OFPP_ALL: u32 = 0xffff_fffc;
/// `OFPP_CONTROLLER`.
pub const OFPP_CONTROLLER: u32 = 0xffff_fffd;
/// `OFPP_LOCAL`.
pub const OFPP_LOCAL: u32 = 0xffff_fffe;
/// `LOCAL` as rqvs numbers it (OpenFlow 1.0's 0xfffe): `Action::Output(0xfffe)` is `output:LOCAL`.
pub const OFPP10_LOCAL_NO: u32 = 0xfffe;
/// `OFPCML_NO_BUFFER`: send the whole packet to the controller.
pub const OFPCML_NO_BUFFER: u16 = 0xffff;
/// OpenFlow 1.0's `OFPP_IN_PORT` (a Nicira resubmit's "the packet's own in_port").
const OFPP10_IN_PORT: u16 = 0xfff8;

const BAD_ACTION_BAD_EXPERIMENTER: OfError = OfError { kind: 2, code: 2 };
const BAD_ACTION_BAD_EXP_TYPE: OfError = OfError { kind: 2, code: 3 };
/// `OFPBAC_MATCH_INCONSISTENT`.
pub const BAD_ACTION_MATCH_INCONSISTENT: OfError = OfError { kind: 2, code: 10 };
const BAD_ACTION_BAD_SET_LEN: OfError = OfError { kind: 2, code: 14 };
const BAD_INSTRUCTION_BAD_EXPERIMENTER: OfError = OfError { kind: 3, code: 5 };
const BAD_INSTRUCTION_BAD_LEN: OfError = OfError { kind: 3, code: 7 };
/// `OFPBIC_DUP_INST` (OpenFlow 1.4's code; OVS sends an NX error in 1.3).
pub const BAD_INSTRUCTION_DUP_INST: OfError = OfError { kind: 3, code: 9 };

fn action_name(t: u16) -> String {
    match t {
        11 => "copy_ttl_out".into(),
        12 => "copy_ttl_in".into(),
        15 => "set_mpls_ttl".into(),
        16 => "dec_mpls_ttl".into(),
        19 => "push_mpls".into(),
        20 => "pop_mpls".into(),
        21 => "set_queue".into(),
        23 => "set_nw_ttl".into(),
        26 => "push_pbb".into(),
        27 => "pop_pbb".into(),
        _ => format!("action type {t}"),
    }
}

/// Decodes an action list (the bytes of `APPLY_ACTIONS` after its header, or a packet-out's
/// actions). An empty list is [`Actions::drop`].
pub fn decode_actions(bytes: &[u8]) -> Result<Actions, DecodeError> {
    decode_actions_for(bytes, &Match::ANY)
}

/// [`decode_actions`] for a flow matching `m` (which decides whether `push_vlan` +
/// `set_field vlan_vid` is one [`Action::SetVlanVid`]).
pub fn decode_actions_for(bytes: &[u8], m: &Match) -> Result<Actions, DecodeError> {
    let out = decode_action_list(bytes, match_has_vlan(m))?;
    if out.is_empty() {
        return Ok(Actions::drop());
    }
    Ok(Actions(out))
}

/// The set_field errors of the match codec as the action errors OpenFlow names.
fn set_err(e: DecodeError) -> DecodeError {
    match e {
        DecodeError::Unsupported { what, error } => {
            let error = match error {
                OfError::BAD_MATCH_BAD_FIELD => OfError::BAD_ACTION_BAD_SET_TYPE,
                OfError::BAD_MATCH_BAD_LEN => BAD_ACTION_BAD_SET_LEN,
                OfError::BAD_ACTION_BAD_SET_TYPE | OfError::BAD_ACTION_BAD_SET_ARGUMENT => error,
                _ => OfError::BAD_ACTION_BAD_SET_ARGUMENT,
            };
            let what = if what.starts_with("set_field") { what } else { format!("set_field: {what}") };
            DecodeError::Unsupported { what, error }
        }
        _ => DecodeError::Unsupported { what: "set_field: truncated OXM".into(), error: BAD_ACTION_BAD_SET_LEN },
    }
}

/// Is the next action in `r` a `SET_FIELD` of `vlan_vid`? (Peeks; `r` is not moved.)
fn next_is_set_vlan_vid(r: &Reader<'_>) -> bool {
    let mut p = r.clone();
    let (Ok(kind), Ok(_len), Ok(oxm)) = (p.u16(), p.u16(), p.u32()) else { return false };
    kind == OFPAT_SET_FIELD && oxm >> 9 == (0x8000 << 7 | 6)
}

fn decode_action_list(bytes: &[u8], mut vlan: bool) -> Result<Vec<Action>, DecodeError> {
    let mut r = Reader::new(bytes, "ofp_action");
    let mut out = Vec::new();
    // A push_vlan:0x8100 on a frame not known to be tagged, waiting for its set_field vlan_vid.
    let mut pending_push = false;
    while !r.is_empty() {
        let kind = r.u16()?;
        let len = usize::from(r.u16()?);
        if len < 8 || len % 8 != 0 {
            return reject(
                format!("action type {kind} has length {len} (a multiple of 8, at least 8)"),
                OfError::BAD_ACTION_BAD_LEN,
            );
        }
        let mut body = r.sub(len - 4, "ofp_action")?;
        let fixed = |n: usize, name: &str| {
            if len == n {
                Ok(())
            } else {
                reject(format!("{name} action has length {len}, expected {n}"), OfError::BAD_ACTION_BAD_LEN)
            }
        };
        match kind {
            OFPAT_OUTPUT => {
                fixed(16, "output")?;
                let port = body.u32()?;
                let max_len = body.u16()?;
                out.push(match port {
                    OFPP_IN_PORT => Action::InPort,
                    OFPP_ALL => Action::All,
                    OFPP_FLOOD => Action::Flood,
                    OFPP_CONTROLLER => Action::Controller((max_len != OFPCML_NO_BUFFER).then_some(max_len)),
                    OFPP_NORMAL => Action::Normal,
                    OFPP_LOCAL => Action::Output(OFPP10_LOCAL_NO),
                    OFPP_TABLE => Action::Other("TABLE".into()),
                    1..=0xfeff => Action::Output(port),
                    _ => {
                        return reject(
                            format!("output to port {port:#x} is not supported by rqvs"),
                            OfError::BAD_ACTION_BAD_OUT_PORT,
                        )
                    }
                });
            }
            OFPAT_PUSH_VLAN => {
                fixed(8, "push_vlan")?;
                let ethertype = body.u16()?;
                if ethertype != 0x8100 && ethertype != 0x88a8 {
                    return reject(
                        format!("push_vlan:{ethertype:#06x}: a VLAN tag's ethertype is 0x8100 or 0x88a8"),
                        OfError::BAD_ACTION_BAD_ARGUMENT,
                    );
                }
                if ethertype == 0x8100 && !vlan && next_is_set_vlan_vid(&r) {
                    pending_push = true;
                } else {
                    out.push(Action::PushVlan(ethertype));
                }
                vlan = true;
            }
            OFPAT_POP_VLAN => {
                fixed(8, "pop_vlan")?;
                out.push(Action::StripVlan);
                vlan = false;
            }
            OFPAT_DEC_NW_TTL => {
                fixed(8, "dec_nw_ttl")?;
                out.push(Action::DecTtl);
            }
            OFPAT_GROUP => {
                fixed(8, "group")?;
                let g = body.u32()?;
                if g > rqvs_flow::group::OFPG_MAX {
                    return reject(format!("group:{g:#x} is a reserved group id"), OfError::BAD_ACTION_BAD_OUT_GROUP);
                }
                out.push(Action::Group(g));
            }
            OFPAT_SET_FIELD => {
                let (field, v) = read_set_field(&mut body).map_err(set_err)?;
                if body.remaining() >= 8 || body.rest().iter().any(|&b| b != 0) {
                    return reject("set_field is longer than its OXM and zero padding", BAD_ACTION_BAD_SET_LEN);
                }
                let was_push = std::mem::take(&mut pending_push);
                let mac = |v: u128| -> [u8; 6] { std::array::from_fn(|i| (v >> (40 - 8 * i)) as u8) };
                out.push(match field.name {
                    "dl_src" => Action::SetDlSrc(mac(v)),
                    "dl_dst" => Action::SetDlDst(mac(v)),
                    "vlan_vid" => {
                        let _ = was_push; // pushed (untagged before) or rewritten: one SetVlanVid.
                        vlan = true;
                        Action::SetVlanVid(v as u16 & 0xfff)
                    }
                    "ip_dscp" => Action::SetNwTos((v as u8) << 2),
                    _ => Action::SetField { field, value: v, mask: field.all_ones() },
                });
            }
            OFPAT_EXPERIMENTER => {
                let exp = body.u32()?;
                if exp != NX_VENDOR_ID {
                    return reject(
                        format!("experimenter {exp:#010x} action is not supported by rqvs"),
                        BAD_ACTION_BAD_EXPERIMENTER,
                    );
                }
                let sub = body.u16()?;
                match sub {
                    NXAST_RESUBMIT | NXAST_RESUBMIT_TABLE => {
                        fixed(16, "resubmit")?;
                        let in_port = body.u16()?;
                        let table = body.u8()?;
                        if body.rest().iter().any(|&b| b != 0) {
                            return reject("resubmit: nonzero padding", OfError::BAD_ACTION_BAD_ARGUMENT);
                        }
                        let in_port = (in_port != OFPP10_IN_PORT).then_some(u32::from(in_port));
                        let table = (sub == NXAST_RESUBMIT_TABLE && table != 0xff).then_some(table);
                        if in_port.is_none() && table.is_none() {
                            return reject(
                                "resubmit(,) names neither a port nor a table (OVS refuses it)",
                                OfError::BAD_ACTION_BAD_ARGUMENT,
                            );
                        }
                        out.push(Action::Resubmit { in_port, table });
                    }
                    _ => {
                        return reject(
                            format!("Nicira extension action subtype {sub} is not supported by rqvs"),
                            BAD_ACTION_BAD_EXP_TYPE,
                        )
                    }
                }
            }
            t => return reject(format!("{} is not supported by rqvs", action_name(t)), OfError::BAD_ACTION_BAD_TYPE),
        }
    }
    debug_assert!(!pending_push, "a pending push is always followed by its set_field");
    Ok(out)
}

fn output(w: &mut Writer, port: u32, max_len: u16) {
    w.u16(OFPAT_OUTPUT);
    w.u16(16);
    w.u32(port);
    w.u16(max_len);
    w.zeros(6);
}

/// Writes a `SET_FIELD` of the table field `name` (one the codec writes) to `v`.
fn set_field(w: &mut Writer, name: &str, v: u64) -> Result<(), EncodeError> {
    let f = rqvs_flow::field::Field::by_name(name).expect("a field of the table");
    set_table_field(w, f, u128::from(v))
}

fn set_table_field(w: &mut Writer, f: &rqvs_flow::field::Field, v: u128) -> Result<(), EncodeError> {
    let start = w.len();
    w.u16(OFPAT_SET_FIELD);
    w.u16(0);
    put_set_table_field(w, f, v)?;
    w.pad8();
    let len = w.len() - start;
    w.patch_u16(start + 2, len as u16);
    Ok(())
}

fn bare(w: &mut Writer, kind: u16) {
    w.u16(kind);
    w.u16(8);
    w.zeros(4);
}

/// True when every frame `m` accepts carries a VLAN tag.
fn match_has_vlan(m: &Match) -> bool {
    m.mask().vlan_tci & VLAN_CFI != 0 && m.value().vlan_tci & VLAN_CFI != 0
}

/// Is `a` an instruction rather than an action of the apply list?
pub fn is_instruction(a: &Action) -> bool {
    matches!(
        a,
        Action::Meter(_)
            | Action::ClearActions
            | Action::WriteActions(_)
            | Action::WriteMetadata { .. }
            | Action::GotoTable(_)
    )
}

/// Writes `actions` as an OpenFlow action list, for a flow matching `m` (which decides whether
/// `SetVlanVid` needs a `push_vlan` first, as OVS decides). `Drop` writes nothing; an
/// instruction in the list is an error.
pub fn encode_actions(actions: &Actions, m: &Match, w: &mut Writer) -> Result<(), EncodeError> {
    encode_action_list(&actions.0, match_has_vlan(m), w)
}

fn encode_action_list(actions: &[Action], mut vlan: bool, w: &mut Writer) -> Result<(), EncodeError> {
    for a in actions {
        match a {
            Action::Output(OFPP10_LOCAL_NO) => output(w, OFPP_LOCAL, 0),
            Action::Output(p) => {
                if !(1..=0xfeff).contains(p) {
                    return enc_err(format!("output:{p}: no OpenFlow 1.3 port number (1..=0xfeff)"));
                }
                output(w, *p, 0);
            }
            Action::InPort => output(w, OFPP_IN_PORT, 0),
            Action::All => output(w, OFPP_ALL, 0),
            Action::Flood => output(w, OFPP_FLOOD, 0),
            Action::Controller(n) => output(w, OFPP_CONTROLLER, n.unwrap_or(OFPCML_NO_BUFFER)),
            Action::Drop => {}
            Action::SetDlSrc(mac) => set_field(w, "dl_src", mac.iter().fold(0, |a, &x| a << 8 | u64::from(x)))?,
            Action::SetDlDst(mac) => set_field(w, "dl_dst", mac.iter().fold(0, |a, &x| a << 8 | u64::from(x)))?,
            Action::SetVlanVid(v) => {
                if *v > 0xfff {
                    return enc_err(format!("mod_vlan_vid:{v}: a VLAN ID is 0..4095"));
                }
                if !vlan {
                    w.u16(OFPAT_PUSH_VLAN);
                    w.u16(8);
                    w.u16(0x8100);
                    w.zeros(2);
                    vlan = true;
                }
                set_field(w, "vlan_vid", u64::from(OFPVID_PRESENT | v))?;
            }
            Action::StripVlan => {
                bare(w, OFPAT_POP_VLAN);
                vlan = false;
            }
            Action::SetNwTos(t) => {
                if t & 3 != 0 {
                    return enc_err(format!("mod_nw_tos:{t}: OpenFlow 1.3 sets the DSCP bits only (a multiple of 4)"));
                }
                set_field(w, "ip_dscp", u64::from(t >> 2))?;
            }
            Action::DecTtl => bare(w, OFPAT_DEC_NW_TTL),
            Action::Normal => output(w, OFPP_NORMAL, 0),
            Action::SetField { field, value, mask } => {
                if *mask != field.all_ones() {
                    return enc_err(format!("{a}: a masked set_field has no OpenFlow 1.3/1.4 encoding in rqvs"));
                }
                set_table_field(w, field, *value)?;
                if field.name == "vlan_vid" {
                    vlan = true;
                }
            }
            Action::PushVlan(t) => {
                if *t != 0x8100 && *t != 0x88a8 {
                    return enc_err(format!("push_vlan:{t:#06x}: a VLAN tag's ethertype is 0x8100 or 0x88a8"));
                }
                w.u16(OFPAT_PUSH_VLAN);
                w.u16(8);
                w.u16(*t);
                w.zeros(2);
                vlan = true;
            }
            Action::Group(g) => {
                w.u16(OFPAT_GROUP);
                w.u16(8);
                w.u32(*g);
            }
            Action::Resubmit { in_port, table } => {
                let port = match in_port {
                    None => OFPP10_IN_PORT,
                    Some(p) => match u16::try_from(*p) {
                        Ok(p) if p != OFPP10_IN_PORT => p,
                        _ => return enc_err(format!("{a}: the port has no 16-bit OpenFlow 1.0 number")),
                    },
                };
                if in_port.is_none() && table.is_none() {
                    return enc_err("resubmit(,) names neither a port nor a table");
                }
                if *table == Some(0xff) {
                    return enc_err(format!("{a}: table 255 is not a table"));
                }
                w.u16(OFPAT_EXPERIMENTER);
                w.u16(16);
                w.u32(NX_VENDOR_ID);
                w.u16(NXAST_RESUBMIT_TABLE);
                w.u16(port);
                w.u8(table.unwrap_or(0xff));
                w.zeros(3);
            }
            Action::Other(s) if s.eq_ignore_ascii_case("LOCAL") => output(w, OFPP_LOCAL, 0),
            Action::Other(s) if s.eq_ignore_ascii_case("TABLE") => output(w, OFPP_TABLE, 0),
            Action::Other(s) => return enc_err(format!("action '{s}' has no OpenFlow encoding in rqvs")),
            a @ (Action::Meter(_)
            | Action::ClearActions
            | Action::WriteActions(_)
            | Action::WriteMetadata { .. }
            | Action::GotoTable(_)) => {
                return enc_err(format!("'{a}' is an instruction, not an action of a list"));
            }
        }
    }
    Ok(())
}

/// Decodes an instruction list (what follows the match in a flow-mod or flow-stats entry).
pub fn decode_instructions(bytes: &[u8]) -> Result<Actions, DecodeError> {
    decode_instructions_for(bytes, &Match::ANY)
}

/// [`decode_instructions`] for a flow matching `m` (see [`decode_actions_for`]).
pub fn decode_instructions_for(bytes: &[u8], m: &Match) -> Result<Actions, DecodeError> {
    let mut r = Reader::new(bytes, "ofp_instruction");
    let mut meter = None;
    let mut apply: Option<Vec<Action>> = None;
    let mut clear = false;
    let mut write: Option<Vec<Action>> = None;
    let mut metadata = None;
    let mut goto = None;
    let mut seen = 0u32;
    while !r.is_empty() {
        let kind = r.u16()?;
        let len = usize::from(r.u16()?);
        if len < 8 || len % 8 != 0 {
            return reject(
                format!("instruction type {kind} has length {len} (a multiple of 8, at least 8)"),
                BAD_INSTRUCTION_BAD_LEN,
            );
        }
        let mut body = r.sub(len - 4, "ofp_instruction")?;
        if (1..=6).contains(&kind) {
            if seen & 1 << kind != 0 {
                return reject(format!("{} appears twice", instruction_name(kind)), BAD_INSTRUCTION_DUP_INST);
            }
            seen |= 1 << kind;
        }
        let fixed = |n: usize| {
            if len == n {
                Ok(())
            } else {
                reject(format!("{} has length {len}, expected {n}", instruction_name(kind)), BAD_INSTRUCTION_BAD_LEN)
            }
        };
        match kind {
            OFPIT_APPLY_ACTIONS => {
                body.skip(4)?;
                apply = Some(decode_action_list(body.rest(), match_has_vlan(m))?);
            }
            OFPIT_WRITE_ACTIONS => {
                body.skip(4)?;
                write = Some(decode_action_list(body.rest(), match_has_vlan(m))?);
            }
            OFPIT_CLEAR_ACTIONS => {
                fixed(8)?;
                clear = true;
            }
            OFPIT_GOTO_TABLE => {
                fixed(8)?;
                let t = body.u8()?;
                if t == 0xff {
                    return reject("goto_table:255 is not a table", OfError::BAD_INSTRUCTION_BAD_TABLE_ID);
                }
                goto = Some(t);
            }
            OFPIT_WRITE_METADATA => {
                fixed(24)?;
                body.skip(4)?;
                let value = body.u64()?;
                let mask = body.u64()?;
                if value & !mask != 0 {
                    return reject(
                        format!("write_metadata:{value:#x}/{mask:#x} has value bits outside its mask"),
                        OfError::BAD_INSTRUCTION_UNSUP_METADATA,
                    );
                }
                metadata = Some((value, mask));
            }
            OFPIT_METER => {
                fixed(8)?;
                meter = Some(body.u32()?);
            }
            0xffff => {
                return reject("experimenter instructions are not supported by rqvs", BAD_INSTRUCTION_BAD_EXPERIMENTER)
            }
            t => return reject(format!("unknown instruction type {t}"), OfError::BAD_INSTRUCTION_UNKNOWN_INST),
        }
    }
    let mut out = Vec::new();
    out.extend(meter.map(Action::Meter));
    out.extend(apply.unwrap_or_default());
    if clear {
        out.push(Action::ClearActions);
    }
    if let Some(w) = write {
        out.push(Action::WriteActions(w));
    }
    out.extend(metadata.map(|(value, mask)| Action::WriteMetadata { value, mask }));
    out.extend(goto.map(Action::GotoTable));
    if out.is_empty() {
        return Ok(Actions::drop());
    }
    Ok(Actions(out))
}

fn instruction_name(kind: u16) -> &'static str {
    match kind {
        OFPIT_GOTO_TABLE => "goto_table",
        OFPIT_WRITE_METADATA => "write_metadata",
        OFPIT_WRITE_ACTIONS => "write_actions",
        OFPIT_APPLY_ACTIONS => "apply_actions",
        OFPIT_CLEAR_ACTIONS => "clear_actions",
        OFPIT_METER => "meter",
        _ => "instruction",
    }
}

/// The rank of an entry of the one list in OVS's instruction order.
fn rank(a: &Action) -> u8 {
    match a {
        Action::Meter(_) => 0,
        Action::ClearActions => 2,
        Action::WriteActions(_) => 3,
        Action::WriteMetadata { .. } => 4,
        Action::GotoTable(_) => 5,
        _ => 1,
    }
}

/// Checks that `actions` is in OVS's instruction order, each instruction at most once (the
/// apply actions together between `meter` and `clear_actions`). The error names the culprit.
pub fn check_instruction_order(actions: &Actions) -> Result<(), String> {
    let mut last: Option<u8> = None;
    for a in &actions.0 {
        let r = rank(a);
        if last.is_some_and(|l| r < l || (r == l && r != 1)) {
            return Err(format!(
                "'{a}' is out of order: the instructions go meter, apply actions, clear_actions, write_actions, write_metadata, goto_table, each once"
            ));
        }
        last = Some(r);
    }
    Ok(())
}

/// Writes `actions` as instructions in OVS's order (meter, apply_actions, clear_actions,
/// write_actions, write_metadata, goto_table), or nothing for a drop.
pub fn encode_instructions(actions: &Actions, m: &Match, w: &mut Writer) -> Result<(), EncodeError> {
    if actions.is_drop() {
        return Ok(());
    }
    check_instruction_order(actions).map_err(EncodeError)?;
    let vlan = match_has_vlan(m);
    for a in &actions.0 {
        if let Action::Meter(id) = a {
            w.u16(OFPIT_METER);
            w.u16(8);
            w.u32(*id);
        }
    }
    let apply: Vec<Action> = actions.0.iter().filter(|a| !is_instruction(a)).cloned().collect();
    if apply.iter().any(|a| !matches!(a, Action::Drop)) {
        list_instruction(w, OFPIT_APPLY_ACTIONS, &apply, vlan)?;
    }
    for a in &actions.0 {
        match a {
            Action::ClearActions => bare(w, OFPIT_CLEAR_ACTIONS),
            Action::WriteActions(list) => {
                if list.iter().any(is_instruction) {
                    return enc_err(format!("{a}: an instruction inside write_actions"));
                }
                list_instruction(w, OFPIT_WRITE_ACTIONS, list, vlan)?;
            }
            Action::WriteMetadata { value, mask } => {
                w.u16(OFPIT_WRITE_METADATA);
                w.u16(24);
                w.zeros(4);
                w.u64(*value);
                w.u64(*mask);
            }
            Action::GotoTable(t) => {
                if *t == 0xff {
                    return enc_err("goto_table:255 is not a table");
                }
                w.u16(OFPIT_GOTO_TABLE);
                w.u16(8);
                w.u8(*t);
                w.zeros(3);
            }
            _ => {}
        }
    }
    Ok(())
}

fn list_instruction(w: &mut Writer, kind: u16, list: &[Action], vlan: bool) -> Result<(), EncodeError> {
    let start = w.len();
    w.u16(kind);
    w.u16(0);
    w.zeros(4);
    encode_action_list(list, vlan, w)?;
    let len = w.len() - start;
    if len > usize::from(u16::MAX) {
        return enc_err("actions longer than 65535 bytes");
    }
    w.patch_u16(start + 2, len as u16);
    Ok(())
}

/// OVS's consistency check of actions against the flow's match (`ofpacts_check`), the part
/// that depends on the match alone: a `set_field` needs its field's prerequisites (an
/// `ipv4_src` set needs an IPv4 match; a `vlan_pcp` set, a tag from the match or an earlier
/// push) → `BAD_ACTION` `MATCH_INCONSISTENT`.
pub fn check_actions(m: &Match, actions: &Actions) -> Result<(), DecodeError> {
    fn walk(list: &[Action], m: &Match, vlan: &mut bool) -> Result<(), DecodeError> {
        for a in list {
            match a {
                Action::SetField { field, .. } => {
                    let ok = match field.prereq {
                        rqvs_flow::field::Prereq::Vlan => *vlan,
                        p => p.satisfied(m.value(), m.mask()),
                    };
                    if !ok {
                        return reject(
                            format!("{a}: the match does not guarantee {}", field.prereq.describe()),
                            BAD_ACTION_MATCH_INCONSISTENT,
                        );
                    }
                }
                Action::PushVlan(_) | Action::SetVlanVid(_) => *vlan = true,
                Action::StripVlan => *vlan = false,
                Action::WriteActions(inner) => walk(inner, m, &mut vlan.clone())?,
                _ => {}
            }
        }
        Ok(())
    }
    walk(&actions.0, m, &mut match_has_vlan(m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_flow::formats::ofctl;

    fn rule(text: &str) -> rqvs_flow::Rule {
        ofctl::parse_flow("test", 1, text, 0).unwrap()
    }

    #[test]
    fn ofctl_actions_round_trip() {
        for t in [
            "ip,actions=drop",
            "ip,actions=output:3,in_port,all,flood,controller,controller:100",
            "ip,actions=mod_dl_src:01:02:03:04:05:06,mod_dl_dst:0a:0b:0c:0d:0e:0f,NORMAL,LOCAL",
            "ip,actions=mod_vlan_vid:5,output:1",
            "dl_vlan=7,actions=mod_vlan_vid:5,strip_vlan,mod_vlan_vid:9,dec_ttl,mod_nw_tos:8",
        ] {
            let r = rule(t);
            let mut w = Writer::new();
            encode_instructions(&r.actions, &r.matches, &mut w).unwrap();
            assert_eq!(decode_instructions(&w.bytes).unwrap(), r.actions, "{t}");
        }
    }

    #[test]
    fn vlan_push_follows_the_match() {
        let count_push = |t: &str| {
            let r = rule(t);
            let mut w = Writer::new();
            encode_actions(&r.actions, &r.matches, &mut w).unwrap();
            w.bytes.chunks(8).filter(|c| c[..2] == [0, 17]).count()
        };
        assert_eq!(count_push("ip,actions=mod_vlan_vid:5"), 1);
        assert_eq!(count_push("dl_vlan=3,actions=mod_vlan_vid:5"), 0);
        assert_eq!(count_push("dl_vlan=3,actions=strip_vlan,mod_vlan_vid:5"), 1);
    }

    #[test]
    fn instructions_and_unsupported_actions() {
        let code = |b: &[u8]| decode_instructions(b).unwrap_err().of_error();
        // goto_table:1, meter:1, clear_actions, write_actions() decode; an unknown type does not.
        assert_eq!(decode_instructions(&[0, 1, 0, 8, 1, 0, 0, 0]).unwrap(), Actions(vec![Action::GotoTable(1)]));
        assert_eq!(decode_instructions(&[0, 6, 0, 8, 0, 0, 0, 1]).unwrap(), Actions(vec![Action::Meter(1)]));
        assert_eq!(decode_instructions(&[0, 5, 0, 8, 0, 0, 0, 0]).unwrap(), Actions(vec![Action::ClearActions]));
        assert_eq!(
            decode_instructions(&[0, 3, 0, 8, 0, 0, 0, 0]).unwrap(),
            Actions(vec![Action::WriteActions(vec![])])
        );
        assert_eq!(code(&[0, 9, 0, 8, 0, 0, 0, 1]), OfError::BAD_INSTRUCTION_UNKNOWN_INST);
        assert_eq!(code(&[0, 4, 0, 7, 0, 0, 0]), BAD_INSTRUCTION_BAD_LEN);
        // An instruction twice; goto_table:255; write_metadata with value bits outside its mask.
        assert_eq!(code(&[0, 1, 0, 8, 1, 0, 0, 0, 0, 1, 0, 8, 2, 0, 0, 0]), BAD_INSTRUCTION_DUP_INST);
        assert_eq!(code(&[0, 1, 0, 8, 255, 0, 0, 0]), OfError::BAD_INSTRUCTION_BAD_TABLE_ID);
        let wm = [&[0u8, 2, 0, 24, 0, 0, 0, 0][..], &[0, 0, 0, 0, 0, 0, 0, 3], &[0, 0, 0, 0, 0, 0, 0, 1]].concat();
        assert_eq!(code(&wm), OfError::BAD_INSTRUCTION_UNSUP_METADATA);
        // The wire order does not matter; the list is in OVS's order.
        let any_order =
            [&[0u8, 1, 0, 8, 4, 0, 0, 0][..], &[0, 5, 0, 8, 0, 0, 0, 0], &[0, 6, 0, 8, 0, 0, 0, 7]].concat();
        assert_eq!(
            decode_instructions(&any_order).unwrap(),
            Actions(vec![Action::Meter(7), Action::ClearActions, Action::GotoTable(4)])
        );
        let acode = |b: &[u8]| decode_actions(b).unwrap_err().of_error();
        // group 1 decodes; set_queue does not.
        assert_eq!(decode_actions(&[0, 22, 0, 8, 0, 0, 0, 1]).unwrap(), Actions(vec![Action::Group(1)]));
        assert_eq!(acode(&[0, 21, 0, 8, 0, 0, 0, 1]), OfError::BAD_ACTION_BAD_TYPE);
        // output to port 0.
        assert_eq!(acode(&[0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), OfError::BAD_ACTION_BAD_OUT_PORT);
        // set_field ipv4_src is a SetField now, printed with its OXM name as ovs-ofctl does;
        // set_field eth_type is read-only; tunnel_id unknown.
        let a = decode_actions(&[0, 25, 0, 16, 0x80, 0, 0x16, 4, 1, 2, 3, 4, 0, 0, 0, 0]).unwrap();
        assert_eq!(a.to_string(), "set_field:1.2.3.4->ip_src");
        assert_eq!(acode(&[0, 25, 0, 16, 0x80, 0, 0x0a, 2, 8, 0, 0, 0, 0, 0, 0, 0]), OfError::BAD_ACTION_BAD_SET_TYPE);
        assert_eq!(acode(&[0, 25, 0, 16, 0x80, 0, 0x4c, 8, 0, 0, 0, 0, 0, 0, 0, 5]), OfError::BAD_ACTION_BAD_SET_TYPE);
        // push_vlan alone, and 802.1ad: PushVlan; another ethertype: BAD_ARGUMENT.
        assert_eq!(decode_actions(&[0, 17, 0, 8, 0x81, 0, 0, 0]).unwrap(), Actions(vec![Action::PushVlan(0x8100)]));
        assert_eq!(decode_actions(&[0, 17, 0, 8, 0x88, 0xa8, 0, 0]).unwrap(), Actions(vec![Action::PushVlan(0x88a8)]));
        assert_eq!(acode(&[0, 17, 0, 8, 0x08, 0, 0, 0]), OfError::BAD_ACTION_BAD_ARGUMENT);
        // Nicira resubmit (subtype 1) and resubmit_table (14); another subtype: BAD_EXP_TYPE.
        let nx = |sub: u8, port: u16, table: u8| {
            let p = port.to_be_bytes();
            vec![0xff, 0xff, 0, 16, 0, 0, 0x23, 0x20, 0, sub, p[0], p[1], table, 0, 0, 0]
        };
        assert_eq!(decode_actions(&nx(1, 3, 0)).unwrap().0, vec![Action::Resubmit { in_port: Some(3), table: None }]);
        assert_eq!(
            decode_actions(&nx(14, 0xfff8, 2)).unwrap().0,
            vec![Action::Resubmit { in_port: None, table: Some(2) }]
        );
        assert_eq!(acode(&nx(14, 0xfff8, 255)), OfError::BAD_ACTION_BAD_ARGUMENT);
        assert_eq!(acode(&nx(7, 0, 0)), BAD_ACTION_BAD_EXP_TYPE);
        assert!(encode_actions(&Actions(vec![Action::Other("resubmit(,1)".into())]), &Match::ANY, &mut Writer::new())
            .is_err());
        // An instruction inside an action list, or out of order, does not encode.
        assert!(encode_actions(&Actions(vec![Action::GotoTable(1)]), &Match::ANY, &mut Writer::new()).is_err());
        let bad = Actions(vec![Action::GotoTable(1), Action::Output(1)]);
        assert!(encode_instructions(&bad, &Match::ANY, &mut Writer::new()).is_err());
        let twice = Actions(vec![Action::ClearActions, Action::ClearActions]);
        assert!(encode_instructions(&twice, &Match::ANY, &mut Writer::new()).is_err());
    }

    #[test]
    fn set_field_prerequisites_are_checked_against_the_match() {
        let nw_src = rqvs_flow::field::Field::by_name("nw_src").unwrap();
        let pcp = rqvs_flow::field::Field::by_name("vlan_pcp").unwrap();
        let set = |f: &'static rqvs_flow::field::Field| Action::SetField { field: f, value: 1, mask: f.all_ones() };
        let ip = rule("ip,actions=drop").matches;
        assert!(check_actions(&ip, &Actions(vec![set(nw_src)])).is_ok());
        let e = check_actions(&Match::ANY, &Actions(vec![set(nw_src)])).unwrap_err();
        assert_eq!(e.of_error(), BAD_ACTION_MATCH_INCONSISTENT);
        assert!(check_actions(&Match::ANY, &Actions(vec![set(pcp)])).is_err());
        assert!(check_actions(&Match::ANY, &Actions(vec![Action::PushVlan(0x8100), set(pcp)])).is_ok());
        let tagged = rule("dl_vlan=3,actions=drop").matches;
        assert!(check_actions(&tagged, &Actions(vec![set(pcp)])).is_ok());
        assert!(check_actions(&tagged, &Actions(vec![Action::StripVlan, set(pcp)])).is_err());
    }
}
