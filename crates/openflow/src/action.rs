//! OpenFlow 1.3/1.4 actions and instructions ↔ [`rqvs_flow::Actions`] (1.3 §7.2.4–7.2.5).
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
//! | `DecTtl` | `DEC_NW_TTL` |
//! | `Drop` / empty list | no action (and no instruction at all) |
//! | `Normal` | `OUTPUT` to `OFPP_NORMAL` |
//! | `Other("LOCAL")`, `Other("TABLE")` | `OUTPUT` to `OFPP_LOCAL`, `OFPP_TABLE` (kept as OVS prints them; the switch refuses `Other` in a flow, and takes `TABLE` only in a packet-out) |
//!
//! **VLAN.** `mod_vlan_vid` sets the VID of the outer tag, pushing one on an untagged frame. OVS
//! 3.1 sends it in 1.3/1.4 as `push_vlan:0x8100,set_field:4096|VID->vlan_vid` when the flow's
//! match does not require a tag, and as the `set_field` alone when it does (checked against a
//! capture in the tests). rqvs decodes both as [`Action::SetVlanVid`]: exact when the match says
//! the frame is untagged or tagged; when the match says neither, OpenFlow's `push_vlan` would
//! add a second tag to a tagged frame, where rqvs (one `vlan_tci`, no QinQ) rewrites the VID of
//! the existing tag — the one deviation, and the reading OVS's own `mod_vlan_vid` intends. A
//! `push_vlan` not followed by `set_field vlan_vid` is refused (`BAD_ACTION`
//! `UNSUPPORTED_ORDER`); so is 802.1ad (`push_vlan:0x88a8`). `pop_vlan` on a flow whose match
//! does not require a tag is accepted (rqvs's `strip_vlan` leaves untagged frames alone).
//!
//! **Instructions.** `APPLY_ACTIONS` carries the list. `CLEAR_ACTIONS` is accepted and dropped:
//! rqvs has no action set (no `WRITE_ACTIONS`, no `GOTO_TABLE`), so it is empty at the end of
//! the pipeline either way. `WRITE_ACTIONS`, `GOTO_TABLE`, `WRITE_METADATA`, `METER` →
//! `BAD_INSTRUCTION` `UNSUP_INST`; an unknown type → `UNKNOWN_INST`; experimenter →
//! `BAD_EXPERIMENTER`. No instruction (or an empty `APPLY_ACTIONS`) decodes to
//! [`Actions::drop`], as `ofctl::parse_flow` reads `actions=drop`.
//!
//! Any other action type, or `SET_FIELD` of another field, is `DecodeError::Unsupported` with
//! `BAD_ACTION` `BAD_TYPE` / `BAD_SET_TYPE` naming it.

use rqvs_flow::key::VLAN_CFI;
use rqvs_flow::{Action, Actions, Match};

use crate::error::{DecodeError, OfError};
use crate::oxm::{enc_err, oxm_value, put_set_field, read_oxm, reject, EncodeError, Field, OFPVID_PRESENT};
use crate::wire::{Reader, Writer};

/// `OFPAT_OUTPUT`.
pub const OFPAT_OUTPUT: u16 = 0;
/// `OFPAT_PUSH_VLAN`.
pub const OFPAT_PUSH_VLAN: u16 = 17;
/// `OFPAT_POP_VLAN`.
pub const OFPAT_POP_VLAN: u16 = 18;
/// `OFPAT_DEC_NW_TTL`.
pub const OFPAT_DEC_NW_TTL: u16 = 24;
/// `OFPAT_SET_FIELD`.
pub const OFPAT_SET_FIELD: u16 = 25;
/// `OFPAT_EXPERIMENTER`.
pub const OFPAT_EXPERIMENTER: u16 = 0xffff;

/// The fields `SET_FIELD` may set (every other field is refused with `BAD_SET_TYPE`).
pub(crate) const SET_FIELDS: [Field; 4] = [Field::EthDst, Field::EthSrc, Field::VlanVid, Field::IpDscp];

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
/// `OFPCML_NO_BUFFER`: send the whole packet to the controller.
pub const OFPCML_NO_BUFFER: u16 = 0xffff;

const BAD_ACTION_BAD_EXPERIMENTER: OfError = OfError { kind: 2, code: 2 };
const BAD_ACTION_UNSUPPORTED_ORDER: OfError = OfError { kind: 2, code: 11 };
const BAD_ACTION_BAD_SET_LEN: OfError = OfError { kind: 2, code: 14 };
const BAD_INSTRUCTION_BAD_EXPERIMENTER: OfError = OfError { kind: 3, code: 5 };
const BAD_INSTRUCTION_BAD_LEN: OfError = OfError { kind: 3, code: 7 };

fn action_name(t: u16) -> String {
    match t {
        11 => "copy_ttl_out".into(),
        12 => "copy_ttl_in".into(),
        15 => "set_mpls_ttl".into(),
        16 => "dec_mpls_ttl".into(),
        19 => "push_mpls".into(),
        20 => "pop_mpls".into(),
        21 => "set_queue".into(),
        22 => "group".into(),
        23 => "set_nw_ttl".into(),
        26 => "push_pbb".into(),
        27 => "pop_pbb".into(),
        _ => format!("action type {t}"),
    }
}

/// Decodes an action list (the bytes of `APPLY_ACTIONS` after its header, or a packet-out's
/// actions). An empty list is [`Actions::drop`].
pub fn decode_actions(bytes: &[u8]) -> Result<Actions, DecodeError> {
    let mut r = Reader::new(bytes, "ofp_action");
    let mut out = Vec::new();
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
        if pending_push && kind != OFPAT_SET_FIELD {
            return reject("push_vlan must be followed by set_field vlan_vid in rqvs", BAD_ACTION_UNSUPPORTED_ORDER);
        }
        match kind {
            OFPAT_OUTPUT => {
                if len != 16 {
                    return reject(format!("output action has length {len}, expected 16"), OfError::BAD_ACTION_BAD_LEN);
                }
                let port = body.u32()?;
                let max_len = body.u16()?;
                out.push(match port {
                    OFPP_IN_PORT => Action::InPort,
                    OFPP_ALL => Action::All,
                    OFPP_FLOOD => Action::Flood,
                    OFPP_CONTROLLER => Action::Controller((max_len != OFPCML_NO_BUFFER).then_some(max_len)),
                    OFPP_NORMAL => Action::Normal,
                    OFPP_LOCAL => Action::Other("LOCAL".into()),
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
                let ethertype = body.u16()?;
                if ethertype != 0x8100 {
                    return reject(
                        format!("push_vlan:{ethertype:#06x} is not supported by rqvs (802.1Q 0x8100 only)"),
                        OfError::BAD_ACTION_BAD_ARGUMENT,
                    );
                }
                pending_push = true;
                continue;
            }
            OFPAT_POP_VLAN => out.push(Action::StripVlan),
            OFPAT_DEC_NW_TTL => out.push(Action::DecTtl),
            OFPAT_SET_FIELD => {
                let set_err = |e: DecodeError| match e {
                    DecodeError::Unsupported { what, error } => {
                        let error = match error {
                            OfError::BAD_MATCH_BAD_FIELD => OfError::BAD_ACTION_BAD_SET_TYPE,
                            OfError::BAD_MATCH_BAD_LEN => BAD_ACTION_BAD_SET_LEN,
                            _ => OfError::BAD_ACTION_BAD_SET_ARGUMENT,
                        };
                        DecodeError::Unsupported { what: format!("set_field: {what}"), error }
                    }
                    _ => DecodeError::Unsupported {
                        what: "set_field: truncated OXM".into(),
                        error: BAD_ACTION_BAD_SET_LEN,
                    },
                };
                let o = read_oxm(&mut body).map_err(set_err)?;
                if body.remaining() >= 8 {
                    return reject("set_field is longer than its OXM and padding", BAD_ACTION_BAD_SET_LEN);
                }
                if o.mask.is_some() {
                    return reject(
                        format!("set_field of {} with a mask (OpenFlow 1.5)", o.field.name()),
                        OfError::BAD_ACTION_BAD_SET_ARGUMENT,
                    );
                }
                let v = oxm_value(&o);
                let was_push = std::mem::take(&mut pending_push);
                if was_push && o.field != Field::VlanVid {
                    return reject(
                        "push_vlan must be followed by set_field vlan_vid in rqvs",
                        BAD_ACTION_UNSUPPORTED_ORDER,
                    );
                }
                let mac = |v: u64| -> [u8; 6] { std::array::from_fn(|i| (v >> (40 - 8 * i)) as u8) };
                out.push(match o.field {
                    Field::EthSrc => Action::SetDlSrc(mac(v)),
                    Field::EthDst => Action::SetDlDst(mac(v)),
                    Field::VlanVid => {
                        if v > 0x1fff {
                            return reject(
                                format!("set_field vlan_vid {v:#x} is above 0x1fff"),
                                OfError::BAD_ACTION_BAD_SET_ARGUMENT,
                            );
                        }
                        Action::SetVlanVid(v as u16 & 0xfff)
                    }
                    Field::IpDscp => {
                        if v > 63 {
                            return reject(
                                format!("set_field ip_dscp {v} is above 63"),
                                OfError::BAD_ACTION_BAD_SET_ARGUMENT,
                            );
                        }
                        Action::SetNwTos((v as u8) << 2)
                    }
                    f => {
                        return reject(
                            format!("set_field of {} is not supported by rqvs", f.name()),
                            OfError::BAD_ACTION_BAD_SET_TYPE,
                        )
                    }
                });
            }
            OFPAT_EXPERIMENTER => {
                let exp = body.u32()?;
                let what = if exp == 0x2320 {
                    let sub = body.u16().unwrap_or(0);
                    format!("Nicira extension action subtype {sub} is not supported by rqvs")
                } else {
                    format!("experimenter {exp:#010x} action is not supported by rqvs")
                };
                return reject(what, BAD_ACTION_BAD_EXPERIMENTER);
            }
            t => return reject(format!("{} is not supported by rqvs", action_name(t)), OfError::BAD_ACTION_BAD_TYPE),
        }
    }
    if pending_push {
        return reject("push_vlan must be followed by set_field vlan_vid in rqvs", BAD_ACTION_UNSUPPORTED_ORDER);
    }
    if out.is_empty() {
        return Ok(Actions::drop());
    }
    Ok(Actions(out))
}

fn output(w: &mut Writer, port: u32, max_len: u16) {
    w.u16(OFPAT_OUTPUT);
    w.u16(16);
    w.u32(port);
    w.u16(max_len);
    w.zeros(6);
}

fn set_field(w: &mut Writer, f: Field, v: u64) {
    let start = w.len();
    w.u16(OFPAT_SET_FIELD);
    w.u16(0);
    put_set_field(w, f, v);
    w.pad8();
    let len = w.len() - start;
    w.patch_u16(start + 2, len as u16);
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

/// Writes `actions` as an OpenFlow action list, for a flow matching `m` (which decides whether
/// `SetVlanVid` needs a `push_vlan` first, as OVS decides). `Drop` writes nothing.
pub fn encode_actions(actions: &Actions, m: &Match, w: &mut Writer) -> Result<(), EncodeError> {
    let mut vlan = match_has_vlan(m);
    for a in &actions.0 {
        match a {
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
            Action::SetDlSrc(mac) => set_field(w, Field::EthSrc, mac.iter().fold(0, |a, &x| a << 8 | u64::from(x))),
            Action::SetDlDst(mac) => set_field(w, Field::EthDst, mac.iter().fold(0, |a, &x| a << 8 | u64::from(x))),
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
                set_field(w, Field::VlanVid, u64::from(OFPVID_PRESENT | v));
            }
            Action::StripVlan => {
                bare(w, OFPAT_POP_VLAN);
                vlan = false;
            }
            Action::SetNwTos(t) => {
                if t & 3 != 0 {
                    return enc_err(format!("mod_nw_tos:{t}: OpenFlow 1.3 sets the DSCP bits only (a multiple of 4)"));
                }
                set_field(w, Field::IpDscp, u64::from(t >> 2));
            }
            Action::DecTtl => bare(w, OFPAT_DEC_NW_TTL),
            Action::Normal => output(w, OFPP_NORMAL, 0),
            Action::Other(s) if s.eq_ignore_ascii_case("LOCAL") => output(w, OFPP_LOCAL, 0),
            Action::Other(s) if s.eq_ignore_ascii_case("TABLE") => output(w, OFPP_TABLE, 0),
            Action::Other(s) => return enc_err(format!("action '{s}' has no OpenFlow encoding in rqvs")),
            // The pipeline's actions and instructions: their codec is not written yet.
            a @ (Action::SetField { .. }
            | Action::PushVlan(_)
            | Action::Resubmit { .. }
            | Action::Group(_)
            | Action::Meter(_)
            | Action::ClearActions
            | Action::WriteActions(_)
            | Action::WriteMetadata { .. }
            | Action::GotoTable(_)) => return enc_err(format!("action '{a}' has no OpenFlow encoding in rqvs yet")),
        }
    }
    Ok(())
}

/// Decodes an instruction list (what follows the match in a flow-mod or flow-stats entry).
pub fn decode_instructions(bytes: &[u8]) -> Result<Actions, DecodeError> {
    let mut r = Reader::new(bytes, "ofp_instruction");
    let mut actions: Option<Actions> = None;
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
        match kind {
            OFPIT_APPLY_ACTIONS => {
                body.skip(4)?;
                if actions.is_some() {
                    return reject("more than one apply_actions instruction", OfError::BAD_INSTRUCTION_UNSUP_INST);
                }
                actions = Some(decode_actions(body.rest())?);
            }
            OFPIT_CLEAR_ACTIONS => {
                if len != 8 {
                    return reject(format!("clear_actions has length {len}, expected 8"), BAD_INSTRUCTION_BAD_LEN);
                }
            }
            OFPIT_GOTO_TABLE => {
                return reject(
                    "goto_table is not supported by rqvs (one table, no pipeline)",
                    OfError::BAD_INSTRUCTION_UNSUP_INST,
                )
            }
            OFPIT_WRITE_METADATA => {
                return reject(
                    "write_metadata is not supported by rqvs (no metadata)",
                    OfError::BAD_INSTRUCTION_UNSUP_INST,
                )
            }
            OFPIT_WRITE_ACTIONS => {
                return reject(
                    "write_actions is not supported by rqvs (no action set)",
                    OfError::BAD_INSTRUCTION_UNSUP_INST,
                )
            }
            OFPIT_METER => {
                return reject("meter is not supported by rqvs (no meters)", OfError::BAD_INSTRUCTION_UNSUP_INST)
            }
            0xffff => {
                return reject("experimenter instructions are not supported by rqvs", BAD_INSTRUCTION_BAD_EXPERIMENTER)
            }
            t => return reject(format!("unknown instruction type {t}"), OfError::BAD_INSTRUCTION_UNKNOWN_INST),
        }
    }
    Ok(actions.unwrap_or_else(Actions::drop))
}

/// Writes `actions` as instructions: one `APPLY_ACTIONS`, or nothing for a drop.
pub fn encode_instructions(actions: &Actions, m: &Match, w: &mut Writer) -> Result<(), EncodeError> {
    if actions.is_drop() {
        return Ok(());
    }
    let start = w.len();
    w.u16(OFPIT_APPLY_ACTIONS);
    w.u16(0);
    w.zeros(4);
    encode_actions(actions, m, w)?;
    let len = w.len() - start;
    if len > usize::from(u16::MAX) {
        return enc_err("actions longer than 65535 bytes");
    }
    w.patch_u16(start + 2, len as u16);
    Ok(())
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
    fn unsupported_instructions_and_actions() {
        let code = |b: &[u8]| decode_instructions(b).unwrap_err().of_error();
        assert_eq!(code(&[0, 1, 0, 8, 1, 0, 0, 0]), OfError::BAD_INSTRUCTION_UNSUP_INST);
        assert_eq!(code(&[0, 3, 0, 8, 0, 0, 0, 0]), OfError::BAD_INSTRUCTION_UNSUP_INST);
        assert_eq!(code(&[0, 6, 0, 8, 0, 0, 0, 1]), OfError::BAD_INSTRUCTION_UNSUP_INST);
        assert_eq!(code(&[0, 9, 0, 8, 0, 0, 0, 1]), OfError::BAD_INSTRUCTION_UNKNOWN_INST);
        assert_eq!(code(&[0, 4, 0, 7, 0, 0, 0]), BAD_INSTRUCTION_BAD_LEN);
        assert_eq!(decode_instructions(&[0, 5, 0, 8, 0, 0, 0, 0]).unwrap(), Actions::drop());
        let acode = |b: &[u8]| decode_actions(b).unwrap_err().of_error();
        // group 1.
        assert_eq!(acode(&[0, 22, 0, 8, 0, 0, 0, 1]), OfError::BAD_ACTION_BAD_TYPE);
        // output to port 0.
        assert_eq!(acode(&[0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), OfError::BAD_ACTION_BAD_OUT_PORT);
        // set_field ipv4_src.
        assert_eq!(acode(&[0, 25, 0, 16, 0x80, 0, 0x16, 4, 1, 2, 3, 4, 0, 0, 0, 0]), OfError::BAD_ACTION_BAD_SET_TYPE);
        // push_vlan alone.
        assert_eq!(acode(&[0, 17, 0, 8, 0x81, 0, 0, 0]), BAD_ACTION_UNSUPPORTED_ORDER);
        assert!(encode_actions(&Actions(vec![Action::Other("resubmit(,1)".into())]), &Match::ANY, &mut Writer::new())
            .is_err());
    }
}
