//! Flow monitors (`ovs-ofctl monitor SOCK watch:...`): a controller asks to be told of the
//! flows that exist (the initial ones) and of every flow added, deleted or modified from then on.
//! Three encodings, as Open vSwitch 3.1 sends and takes them (bytes captured from `ovs-ofctl
//! monitor` against OVS 3.1 are the unit tests' fixtures):
//!
//! - **OpenFlow 1.0, Nicira** (`ovs-ofctl monitor` without `-O`): the request is the vendor
//!   statistics request `NXST_FLOW_MONITOR` (a list of `nx_flow_monitor_request`, NXM match), the
//!   updates are `NXST_FLOW_MONITOR` replies (`nx_flow_update_full` with an NXM match and 1.0
//!   actions, `nx_flow_update_abbrev`); `NXT_FLOW_MONITOR_CANCEL` removes a monitor.
//! - **OpenFlow 1.3, ONF's extension** (`-O OpenFlow13`): the experimenter multipart
//!   `ONFST_FLOW_MONITOR` (ONF's experimenter id, type 1870): `onf_flow_monitor_request` with an
//!   `ofp_match`, updates laid out as Nicira's but with an `ofp_match` and instructions;
//!   `ONFT_FLOW_MONITOR_CANCEL` (an experimenter message, type 1870).
//! - **OpenFlow 1.4** (`-O OpenFlow14`): `OFPMP_FLOW_MONITOR` (`ofp_flow_monitor_request` with a
//!   command, ADD/MODIFY/DELETE), `ofp_flow_update_full`/`_abbrev`/`_paused`.
//!
//! Whatever the version, a request is kept as Nicira's flags ([`NXFMF_INITIAL`]...) and OpenFlow
//! 1.3's port numbers (`OFPP_ANY`: no out_port); an update is a [`FlowUpdate`].

use rqvs_flow::{Actions, Match};

use crate::error::{DecodeError, EncodeError, OfError};
use crate::oxm::{enc_err, reject};
use crate::wire::{Reader, Writer};
use crate::{OFP10, OFP13, OFP14};

/// `NXFMF_INITIAL`: report the flows that exist now.
pub const NXFMF_INITIAL: u16 = 1;
/// `NXFMF_ADD`: report flows added.
pub const NXFMF_ADD: u16 = 2;
/// `NXFMF_DELETE`: report flows deleted.
pub const NXFMF_DELETE: u16 = 4;
/// `NXFMF_MODIFY`: report flows whose actions changed.
pub const NXFMF_MODIFY: u16 = 8;
/// `NXFMF_ACTIONS`: include the actions.
pub const NXFMF_ACTIONS: u16 = 16;
/// `NXFMF_OWN`: report the connection's own changes in full (else abbreviated).
pub const NXFMF_OWN: u16 = 32;
const NXFMF_ALL: u16 = 63;

/// Nicira's vendor id, its statistics type and subtypes.
const NX_VENDOR_ID: u32 = 0x0000_2320;
const OFPST_VENDOR: u16 = 0xffff;
/// `NXST_FLOW_MONITOR`.
pub const NXST_FLOW_MONITOR: u32 = 2;
/// `NXT_FLOW_MONITOR_CANCEL`, `_PAUSED`, `_RESUMED`.
pub const NXT_FLOW_MONITOR_CANCEL: u32 = 21;
/// ONF's experimenter id ("ONF\0") and its flow monitor types (the multipart, and the cancel
/// message; OVS's `ONFST_FLOW_MONITOR`, `ONFT_FLOW_MONITOR_CANCEL`).
pub const ONF_EXPERIMENTER_ID: u32 = 0x4f4e_4600;
/// ONF's flow monitor multipart type and cancel message type.
pub const ONF_FLOW_MONITOR: u32 = 1870;
/// `OFPMP_FLOW_MONITOR` (1.4).
pub const MP_FLOW_MONITOR: u16 = 16;
/// `OFPMP_EXPERIMENTER`.
pub const MP_EXPERIMENTER: u16 = 0xffff;

/// `OFPMOFC_MONITOR_EXISTS`-like errors as OVS sends them: Nicira's `NXBRC_FM_DUPLICATE_ID`
/// (vendor 0x2320, type BAD_REQUEST, code 0x100 + 15) in 1.0/1.3 and OpenFlow 1.4's
/// `OFPET_FLOW_MONITOR_FAILED`/`OFPMOFC_MONITOR_EXISTS` (16, 5).
pub const MONITOR_EXISTS_14: OfError = OfError { kind: 16, code: 5 };
/// `OFPMOFC_UNKNOWN_MONITOR` (16, 6) / Nicira's `NXBRC_FM_BAD_ID`.
pub const UNKNOWN_MONITOR_14: OfError = OfError { kind: 16, code: 6 };
/// `OFPMOFC_BAD_FLAGS` (16, 8) / Nicira's `NXBRC_FM_BAD_FLAGS`.
pub const BAD_FLAGS_14: OfError = OfError { kind: 16, code: 8 };

/// What a 1.4 request does with its monitor (`OFPFMC_*`; Nicira and ONF only add).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MonitorCommand {
    Add,
    Modify,
    Delete,
}

/// One flow monitor request (module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowMonitorRequest {
    pub id: u32,
    /// `NXFMF_*` bits.
    pub flags: u16,
    /// Only flows with an output to this port (1.3 numbering; `OFPP_ANY`: any).
    pub out_port: u32,
    /// Only flows of this table (0xff: all).
    pub table_id: u8,
    /// Only flows whose match is at least as specific as this one.
    pub matches: Match,
    pub command: MonitorCommand,
}

/// What happened to a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowEvent {
    /// An initial flow (1.4 says `INITIAL`; Nicira and ONF report them as `ADDED`).
    Initial,
    Added,
    /// Deleted, with OpenFlow's removed reason (`OFPRR_*`).
    Deleted(u8),
    Modified,
}

/// A flow as an update reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FullUpdate {
    pub event: FlowEvent,
    pub table_id: u8,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub priority: u16,
    pub cookie: u64,
    pub matches: Match,
    /// `None`: the monitor did not ask for them (no `NXFMF_ACTIONS`).
    pub actions: Option<Actions>,
}

/// One update of a flow monitor reply.
// Updates are built per flow change, not per packet: boxing the full one would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlowUpdate {
    Full(FullUpdate),
    /// The flow-mod `xid` of this connection changed flows (the monitor lacks `NXFMF_OWN`).
    Abbrev {
        xid: u32,
    },
}

fn version_ok(version: u8) -> bool {
    matches!(version, OFP10 | OFP13 | OFP14)
}

/// A 1.0 port number as 1.3's (0xffff, `OFPP_NONE`, is `OFPP_ANY`).
fn port10(p: u16) -> u32 {
    match p {
        0xffff => 0xffff_ffff,
        0xff00.. => 0xffff_0000 | u32::from(p),
        _ => u32::from(p),
    }
}

fn port_to10(p: u32) -> u16 {
    match p {
        0xffff_ffff => 0xffff,
        0xffff_ff00.. => (p & 0xffff) as u16,
        _ => p as u16,
    }
}

/// 1.4's `OFPFMF_*` flags as Nicira's, as OVS maps them (`INSTRUCTIONS` is `ACTIONS`,
/// `ONLY_OWN` is `OWN`; `NO_ABBREV` has no Nicira bit).
fn flags14_to_nx(f: u16) -> u16 {
    (f & 0x0f) | (f & 16) | if f & 64 != 0 { NXFMF_OWN } else { 0 }
}

fn flags_nx_to14(f: u16) -> u16 {
    (f & 0x0f) | (f & 16) | if f & NXFMF_OWN != 0 { 64 } else { 0 }
}

/// Decodes the body of a 1.0 `NXST_FLOW_MONITOR` request: `body` follows the vendor
/// statistics header (vendor, subtype and padding).
pub fn decode_nx_requests(body: &[u8]) -> Result<Vec<FlowMonitorRequest>, DecodeError> {
    let mut r = Reader::new(body, "nx_flow_monitor_request");
    let mut out = Vec::new();
    while !r.is_empty() {
        let id = r.u32()?;
        let flags = r.u16()?;
        let out_port = port10(r.u16()?);
        let match_len = usize::from(r.u16()?);
        let table_id = r.u8()?;
        r.skip(5)?;
        let nx = crate::nxm::pull_match(&mut r, match_len)?;
        out.push(check(FlowMonitorRequest {
            id,
            flags,
            out_port,
            table_id,
            matches: nx.matches,
            command: MonitorCommand::Add,
        })?);
    }
    Ok(out)
}

/// Decodes a 1.3 (ONF) or 1.4 flow monitor multipart request body: `kind` is the multipart
/// type ([`MP_EXPERIMENTER`]: `body` starts with ONF's experimenter id and type;
/// [`MP_FLOW_MONITOR`]). `Ok(None)`: not a flow monitor request.
pub fn decode_request(version: u8, kind: u16, body: &[u8]) -> Result<Option<Vec<FlowMonitorRequest>>, DecodeError> {
    let mut r = Reader::new(body, "flow_monitor_request");
    let mut out = Vec::new();
    match (version, kind) {
        (OFP13, MP_EXPERIMENTER) => {
            if r.remaining() < 8 {
                return Ok(None);
            }
            let (exp, t) = (r.u32()?, r.u32()?);
            if exp != ONF_EXPERIMENTER_ID || t != ONF_FLOW_MONITOR {
                return Ok(None);
            }
            while !r.is_empty() {
                let id = r.u32()?;
                let flags = r.u16()?;
                let _match_len = r.u16()?;
                let out_port = r.u32()?;
                let table_id = r.u8()?;
                r.skip(3)?;
                let matches = crate::oxm::decode_match(&mut r)?;
                out.push(check(FlowMonitorRequest {
                    id,
                    flags,
                    out_port,
                    table_id,
                    matches,
                    command: MonitorCommand::Add,
                })?);
            }
        }
        (OFP14, MP_FLOW_MONITOR) => {
            while !r.is_empty() {
                let id = r.u32()?;
                let out_port = r.u32()?;
                let _out_group = r.u32()?;
                let flags = flags14_to_nx(r.u16()?);
                let table_id = r.u8()?;
                let command = match r.u8()? {
                    0 => MonitorCommand::Add,
                    1 => MonitorCommand::Modify,
                    2 => MonitorCommand::Delete,
                    c => return reject(format!("flow monitor command {c}"), BAD_FLAGS_14),
                };
                let matches = crate::oxm::decode_match(&mut r)?;
                let req = FlowMonitorRequest { id, flags, out_port, table_id, matches, command };
                out.push(if command == MonitorCommand::Delete { req } else { check(req)? });
            }
        }
        _ => return Ok(None),
    }
    Ok(Some(out))
}

/// A request that asks for nothing (none of INITIAL, ADD, DELETE, MODIFY) or for unknown bits
/// is an error, as in OVS.
fn check(r: FlowMonitorRequest) -> Result<FlowMonitorRequest, DecodeError> {
    if r.flags & !NXFMF_ALL != 0 || r.flags & 0x0f == 0 {
        return reject(format!("flow monitor {} has flags {:#x}", r.id, r.flags), BAD_FLAGS_14);
    }
    Ok(r)
}

/// Encodes `reqs` as one request message of `version` (for tests and tools).
pub fn encode_request(version: u8, xid: u32, reqs: &[FlowMonitorRequest]) -> Result<Vec<u8>, EncodeError> {
    let mut w = Writer::new();
    match version {
        OFP10 => {
            header(&mut w, OFP10, 16, xid);
            w.u16(OFPST_VENDOR);
            w.u16(0);
            w.u32(NX_VENDOR_ID);
            w.u32(NXST_FLOW_MONITOR);
            w.zeros(4);
            for q in reqs {
                w.u32(q.id);
                w.u16(q.flags);
                w.u16(port_to10(q.out_port));
                let at = w.len();
                w.u16(0);
                w.u8(q.table_id);
                w.zeros(5);
                let ml = crate::nxm::encode(&q.matches, &mut w)?;
                w.patch_u16(at, ml);
                w.pad8();
            }
        }
        OFP13 => {
            header(&mut w, OFP13, 18, xid);
            w.u16(MP_EXPERIMENTER);
            w.u16(0);
            w.zeros(4);
            w.u32(ONF_EXPERIMENTER_ID);
            w.u32(ONF_FLOW_MONITOR);
            for q in reqs {
                w.u32(q.id);
                w.u16(q.flags);
                let at = w.len();
                w.u16(0);
                w.u32(q.out_port);
                w.u8(q.table_id);
                w.zeros(3);
                let m = w.len();
                crate::oxm::encode_match(&q.matches, &mut w)?;
                let ml = u16::from_be_bytes([w.bytes[m + 2], w.bytes[m + 3]]);
                w.patch_u16(at, ml);
            }
        }
        OFP14 => {
            header(&mut w, OFP14, 18, xid);
            w.u16(MP_FLOW_MONITOR);
            w.u16(0);
            w.zeros(4);
            for q in reqs {
                w.u32(q.id);
                w.u32(q.out_port);
                w.u32(0xffff_ffff);
                w.u16(flags_nx_to14(q.flags));
                w.u8(q.table_id);
                w.u8(match q.command {
                    MonitorCommand::Add => 0,
                    MonitorCommand::Modify => 1,
                    MonitorCommand::Delete => 2,
                });
                crate::oxm::encode_match(&q.matches, &mut w)?;
            }
        }
        v => return enc_err(format!("flow monitors in OpenFlow version {v:#04x}")),
    }
    finish(&mut w)?;
    Ok(w.bytes)
}

/// Decodes a 1.0 `NXT_FLOW_MONITOR_CANCEL` (`body` after the vendor header and subtype) or a
/// 1.3 `ONFT_FLOW_MONITOR_CANCEL` (after the experimenter header): the monitor's id.
pub fn decode_cancel(body: &[u8]) -> Result<u32, DecodeError> {
    let mut r = Reader::new(body, "flow_monitor_cancel");
    let id = r.u32()?;
    if !r.is_empty() {
        return Err(DecodeError::BadLength { what: "flow_monitor_cancel", len: body.len() + 16 });
    }
    Ok(id)
}

fn header(w: &mut Writer, version: u8, kind: u8, xid: u32) {
    w.u8(version);
    w.u8(kind);
    w.u16(0);
    w.u32(xid);
}

fn finish(w: &mut Writer) -> Result<(), EncodeError> {
    let Ok(len) = u16::try_from(w.len()) else { return enc_err("a flow monitor message over 64 KiB") };
    w.patch_u16(2, len);
    Ok(())
}

/// The bytes of a reply's header and multipart part (`more`: `OFPMPF_REPLY_MORE`).
fn reply_head(w: &mut Writer, version: u8, xid: u32, more: bool) {
    let flags = u16::from(more);
    match version {
        OFP10 => {
            header(w, OFP10, 17, xid);
            w.u16(OFPST_VENDOR);
            w.u16(flags);
            w.u32(NX_VENDOR_ID);
            w.u32(NXST_FLOW_MONITOR);
            w.zeros(4);
        }
        OFP13 => {
            header(w, OFP13, 19, xid);
            w.u16(MP_EXPERIMENTER);
            w.u16(flags);
            w.zeros(4);
            w.u32(ONF_EXPERIMENTER_ID);
            w.u32(ONF_FLOW_MONITOR);
        }
        _ => {
            header(w, OFP14, 19, xid);
            w.u16(MP_FLOW_MONITOR);
            w.u16(flags);
            w.zeros(4);
        }
    }
}

/// Writes one update of `version`.
fn write_update(w: &mut Writer, version: u8, u: &FlowUpdate) -> Result<(), EncodeError> {
    let start = w.len();
    match u {
        FlowUpdate::Abbrev { xid } => {
            w.u16(8);
            w.u16(if version == OFP14 { 4 } else { 3 });
            w.u32(*xid);
            return Ok(());
        }
        FlowUpdate::Full(f) => {
            let (event, reason) = match (f.event, version) {
                (FlowEvent::Initial, OFP14) => (0, 0),
                (FlowEvent::Added, OFP14) => (1, 0),
                (FlowEvent::Deleted(r), OFP14) => (2, r),
                (FlowEvent::Modified, OFP14) => (3, 0),
                (FlowEvent::Initial | FlowEvent::Added, _) => (0, 0),
                (FlowEvent::Deleted(r), _) => (1, r),
                (FlowEvent::Modified, _) => (2, 0),
            };
            w.u16(0);
            w.u16(event);
            let empty = Actions(Vec::new());
            let actions = f.actions.as_ref().unwrap_or(&empty);
            if version == OFP14 {
                w.u8(f.table_id);
                w.u8(reason);
                w.u16(f.idle_timeout);
                w.u16(f.hard_timeout);
                w.u16(f.priority);
                w.zeros(4);
                w.u64(f.cookie);
                crate::oxm::encode_match(&f.matches, w)?;
                crate::action::encode_instructions(actions, &f.matches, w)?;
            } else {
                w.u16(u16::from(reason));
                w.u16(f.priority);
                w.u16(f.idle_timeout);
                w.u16(f.hard_timeout);
                let ml_at = w.len();
                w.u16(0);
                w.u8(f.table_id);
                w.u8(0);
                w.u64(f.cookie);
                if version == OFP10 {
                    let ml = crate::nxm::encode(&f.matches, w)?;
                    w.patch_u16(ml_at, ml);
                    w.pad8();
                    crate::of10::encode_actions(actions, w)?;
                } else {
                    let m = w.len();
                    crate::oxm::encode_match(&f.matches, w)?;
                    let ml = u16::from_be_bytes([w.bytes[m + 2], w.bytes[m + 3]]);
                    w.patch_u16(ml_at, ml);
                    crate::action::encode_instructions(actions, &f.matches, w)?;
                }
            }
        }
    }
    let Ok(len) = u16::try_from(w.len() - start) else { return enc_err("a flow update over 64 KiB") };
    w.patch_u16(start, len);
    Ok(())
}

/// The most bytes of updates one reply message carries before the next one starts.
pub const REPLY_BYTES: usize = 60_000;

/// `updates` as reply messages of `version` (several when they do not fit one, the ones before
/// the last flagged `MORE` when `multipart`: a reply to a request; asynchronous updates, `xid`
/// 0, go as separate messages each complete). An empty list is one empty reply.
pub fn encode_replies(
    version: u8,
    xid: u32,
    multipart: bool,
    updates: &[FlowUpdate],
) -> Result<Vec<Vec<u8>>, EncodeError> {
    if !version_ok(version) {
        return enc_err(format!("flow monitors in OpenFlow version {version:#04x}"));
    }
    let mut bodies: Vec<Vec<u8>> = vec![Vec::new()];
    for u in updates {
        let mut w = Writer::new();
        write_update(&mut w, version, u)?;
        if bodies.last().is_some_and(|b| !b.is_empty() && b.len() + w.len() > REPLY_BYTES) {
            bodies.push(Vec::new());
        }
        if let Some(b) = bodies.last_mut() {
            b.extend_from_slice(&w.bytes);
        }
    }
    let n = bodies.len();
    bodies
        .into_iter()
        .enumerate()
        .map(|(i, body)| {
            let mut w = Writer::new();
            reply_head(&mut w, version, xid, multipart && i + 1 < n);
            w.put(&body);
            finish(&mut w)?;
            Ok(w.bytes)
        })
        .collect()
}

/// Decodes a reply message of `version` (as [`encode_replies`] writes it): its updates.
pub fn decode_reply(bytes: &[u8]) -> Result<Vec<FlowUpdate>, DecodeError> {
    let mut r = Reader::new(bytes, "flow monitor reply");
    let version = r.u8()?;
    r.skip(7)?;
    let _kind = r.u16()?;
    let _flags = r.u16()?;
    match version {
        OFP10 => r.skip(12)?,
        OFP13 => r.skip(12)?,
        _ => r.skip(4)?,
    }
    let mut out = Vec::new();
    while !r.is_empty() {
        let len = usize::from(r.u16()?);
        if len < 8 {
            return Err(DecodeError::BadLength { what: "flow update", len });
        }
        let mut u = r.sub(len - 2, "flow update")?;
        let event = u.u16()?;
        let abbrev = if version == OFP14 { 4 } else { 3 };
        if event == abbrev {
            out.push(FlowUpdate::Abbrev { xid: u.u32()? });
            continue;
        }
        let f = if version == OFP14 {
            let table_id = u.u8()?;
            let reason = u.u8()?;
            let (idle_timeout, hard_timeout, priority) = (u.u16()?, u.u16()?, u.u16()?);
            u.skip(4)?;
            let cookie = u.u64()?;
            let matches = crate::oxm::decode_match(&mut u)?;
            let actions = crate::action::decode_instructions_for(u.rest(), &matches)?;
            let event = match event {
                0 => FlowEvent::Initial,
                1 => FlowEvent::Added,
                2 => FlowEvent::Deleted(reason),
                3 => FlowEvent::Modified,
                e => return reject(format!("flow update event {e}"), OfError::BAD_REQUEST_BAD_TYPE),
            };
            FullUpdate {
                event,
                table_id,
                idle_timeout,
                hard_timeout,
                priority,
                cookie,
                matches,
                actions: Some(actions),
            }
        } else {
            let reason = u.u16()? as u8;
            let (priority, idle_timeout, hard_timeout) = (u.u16()?, u.u16()?, u.u16()?);
            let match_len = usize::from(u.u16()?);
            let table_id = u.u8()?;
            u.skip(1)?;
            let cookie = u.u64()?;
            let (matches, actions) = if version == OFP10 {
                let nx = crate::nxm::pull_match(&mut u, match_len)?;
                let a = crate::of10::decode_actions(u.rest(), &nx.matches)?;
                (nx.matches, a)
            } else {
                let m = crate::oxm::decode_match(&mut u)?;
                let a = crate::action::decode_instructions_for(u.rest(), &m)?;
                (m, a)
            };
            let event = match event {
                0 => FlowEvent::Added,
                1 => FlowEvent::Deleted(reason),
                2 => FlowEvent::Modified,
                e => return reject(format!("flow update event {e}"), OfError::BAD_REQUEST_BAD_TYPE),
            };
            FullUpdate {
                event,
                table_id,
                idle_timeout,
                hard_timeout,
                priority,
                cookie,
                matches,
                actions: Some(actions),
            }
        };
        out.push(FlowUpdate::Full(f));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_flow::formats::ofctl;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    fn flow(text: &str) -> rqvs_flow::Rule {
        ofctl::parse_flow("test", 1, text, 0).unwrap()
    }

    fn watch_all() -> FlowMonitorRequest {
        FlowMonitorRequest {
            id: 0,
            flags: NXFMF_ALL,
            out_port: 0xffff_ffff,
            table_id: 0xff,
            matches: Match::ANY,
            command: MonitorCommand::Add,
        }
    }

    /// What `ovs-ofctl monitor SOCK watch:` sent to OVS 3.1, in 1.0, 1.3 and 1.4.
    const REQ10: &str = "0110002800000006ffff000000002320000000020000000000000000003fffff0000ff0000000000";
    const REQ13: &str =
        "0412003000000006ffff0000000000004f4e46000000074e00000000003f0004ffffffffff0000000001000400000000";
    const REQ14: &str = "0512002800000006001000000000000000000000ffffffffffffffff005fff000001000400000000";

    #[test]
    fn requests_decode_as_ovs_ofctl_sends_them_and_round_trip() {
        let b = hex(REQ10);
        let got = decode_nx_requests(&b[24..]).unwrap();
        assert_eq!(got, vec![watch_all()]);
        assert_eq!(encode_request(OFP10, 6, &got).unwrap(), b);
        let b = hex(REQ13);
        let got = decode_request(OFP13, MP_EXPERIMENTER, &b[16..]).unwrap().unwrap();
        assert_eq!(got, vec![watch_all()]);
        assert_eq!(encode_request(OFP13, 6, &got).unwrap(), b);
        let b = hex(REQ14);
        let got = decode_request(OFP14, MP_FLOW_MONITOR, &b[16..]).unwrap().unwrap();
        // 1.4's flags: INITIAL|ADD|REMOVED|MODIFY|INSTRUCTIONS|ONLY_OWN, Nicira's all six.
        assert_eq!(got, vec![watch_all()]);
        assert_eq!(encode_request(OFP14, 6, &got).unwrap(), b);
        // Not a flow monitor: another experimenter's multipart.
        assert_eq!(decode_request(OFP13, MP_EXPERIMENTER, &hex("00002320000000020000")).unwrap(), None);
    }

    #[test]
    fn requests_with_a_match_an_out_port_and_a_table_round_trip() {
        let m = flow("tcp,nw_dst=10.0.0.0/8,actions=drop").matches;
        for v in [OFP10, OFP13, OFP14] {
            let q = FlowMonitorRequest {
                id: 7,
                flags: NXFMF_ADD | NXFMF_DELETE | NXFMF_ACTIONS,
                out_port: 3,
                table_id: 2,
                matches: m,
                command: MonitorCommand::Add,
            };
            let b = encode_request(v, 9, std::slice::from_ref(&q)).unwrap();
            let got = match v {
                OFP10 => decode_nx_requests(&b[24..]).unwrap(),
                OFP13 => decode_request(v, MP_EXPERIMENTER, &b[16..]).unwrap().unwrap(),
                _ => decode_request(v, MP_FLOW_MONITOR, &b[16..]).unwrap().unwrap(),
            };
            assert_eq!(got, vec![q], "version {v}");
        }
        // Flags asking for nothing, or unknown bits: OVS's BAD_FLAGS.
        let mut b = hex(REQ10);
        b[29] = 0x30; // ACTIONS|OWN only
        assert!(decode_nx_requests(&b[24..]).is_err());
        b[29] = 0x7f;
        assert!(decode_nx_requests(&b[24..]).is_err());
    }

    /// The updates OVS 3.1 sent for `add-flow priority=6,ip,actions=drop`, `mod-flows
    /// priority=6,ip,actions=output:3`, `del-flows --strict priority=6,ip` and the hard timeout
    /// of `priority=7,tcp,hard_timeout=1,actions=drop`, from other connections.
    const UPD10: [&str; 5] = [
        "0111003800000000ffff00000000232000000002000000000020000000000006000000000006000000000000000000000000060208000000",
        "0111004000000000ffff000000002320000000020000000000280002000000060000000000060000000000000000000000000602080000000000000800030000",
        "0111004000000000ffff000000002320000000020000000000280001000200060000000000060000000000000000000000000602080000000000000800030000",
        "0111004000000000ffff0000000023200000000200000000002800000000000700000001000b0000000000000000000000000602080000000c01060000000000",
        "0111004000000000ffff0000000023200000000200000000002800010001000700000001000b0000000000000000000000000602080000000c01060000000000",
    ];
    const UPD13: [&str; 5] = [
        "0413004000000000ffff0000000000004f4e46000000074e002800000000000600000000000a000000000000000000000001000a80000a020800000000000000",
        "0413005800000000ffff0000000000004f4e46000000074e004000020000000600000000000a000000000000000000000001000a80000a020800000000000000000400180000000000000010000000030000000000000000",
        "0413005800000000ffff0000000000004f4e46000000074e004000010002000600000000000a000000000000000000000001000a80000a020800000000000000000400180000000000000010000000030000000000000000",
        "0413004000000000ffff0000000000004f4e46000000074e002800000000000700000001000f000000000000000000000001000f80000a020800800014010600",
        "0413004000000000ffff0000000000004f4e46000000074e002800010001000700000001000f000000000000000000000001000f80000a020800800014010600",
    ];
    const UPD14: [&str; 5] = [
        "051300380000000000100000000000000028000100000000000000060000000000000000000000000001000a80000a020800000000000000",
        "051300500000000000100000000000000040000300000000000000060000000000000000000000000001000a80000a020800000000000000000400180000000000000010000000030000000000000000",
        "051300500000000000100000000000000040000200020000000000060000000000000000000000000001000a80000a020800000000000000000400180000000000000010000000030000000000000000",
        "051300380000000000100000000000000028000100000000000100070000000000000000000000000001000f80000a020800800014010600",
        "051300380000000000100000000000000028000200010000000100070000000000000000000000000001000f80000a020800800014010600",
    ];

    fn ovs_updates() -> Vec<FlowUpdate> {
        let ip = flow("priority=6,ip,actions=drop");
        let tcp = flow("priority=7,tcp,actions=drop");
        let out3 = flow("priority=6,ip,actions=output:3").actions;
        let full = |event, r: &rqvs_flow::Rule, hard: u16, actions: &Actions| {
            FlowUpdate::Full(FullUpdate {
                event,
                table_id: 0,
                idle_timeout: 0,
                hard_timeout: hard,
                priority: r.priority as u16,
                cookie: 0,
                matches: r.matches,
                // `drop` is no action on the wire (decoded as none).
                actions: Some(Actions(actions.0.iter().filter(|a| **a != rqvs_flow::Action::Drop).cloned().collect())),
            })
        };
        vec![
            full(FlowEvent::Added, &ip, 0, &ip.actions),
            full(FlowEvent::Modified, &ip, 0, &out3),
            full(FlowEvent::Deleted(2), &ip, 0, &out3),
            full(FlowEvent::Added, &tcp, 1, &tcp.actions),
            full(FlowEvent::Deleted(1), &tcp, 1, &tcp.actions),
        ]
    }

    #[test]
    fn updates_are_the_bytes_ovs_sends_and_decode_back() {
        for (v, want) in [(OFP10, UPD10), (OFP13, UPD13), (OFP14, UPD14)] {
            for (u, w) in ovs_updates().iter().zip(want) {
                let got = encode_replies(v, 0, false, std::slice::from_ref(u)).unwrap();
                assert_eq!(got.len(), 1);
                assert_eq!(got[0], hex(w), "version {v}: {u:?}");
                let norm = |u: FlowUpdate| match u {
                    FlowUpdate::Full(mut f) => {
                        if let Some(a) = f.actions.as_mut() {
                            a.0.retain(|a| *a != rqvs_flow::Action::Drop);
                        }
                        FlowUpdate::Full(f)
                    }
                    a => a,
                };
                let back: Vec<FlowUpdate> = decode_reply(&got[0]).unwrap().into_iter().map(norm).collect();
                assert_eq!(back, vec![u.clone()], "version {v}");
            }
        }
    }

    #[test]
    fn abbreviated_and_split_replies() {
        for v in [OFP10, OFP13, OFP14] {
            let a = FlowUpdate::Abbrev { xid: 0x1234 };
            let got = encode_replies(v, 0, false, std::slice::from_ref(&a)).unwrap();
            assert_eq!(decode_reply(&got[0]).unwrap(), vec![a]);
            // Many initial flows: several messages, MORE on all but the last.
            let r = flow("priority=6,ip,nw_src=1.2.3.4,actions=output:3");
            let u = FlowUpdate::Full(FullUpdate {
                event: FlowEvent::Initial,
                table_id: 0,
                idle_timeout: 0,
                hard_timeout: 0,
                priority: 6,
                cookie: 9,
                matches: r.matches,
                actions: Some(r.actions.clone()),
            });
            let many = vec![u.clone(); 2000];
            let msgs = encode_replies(v, 5, true, &many).unwrap();
            assert!(msgs.len() > 1);
            let mut n = 0;
            for (i, m) in msgs.iter().enumerate() {
                let flags = u16::from_be_bytes([m[10], m[11]]);
                assert_eq!(flags, u16::from(i + 1 < msgs.len()));
                n += decode_reply(m).unwrap().len();
            }
            assert_eq!(n, 2000);
            // No updates: one empty reply.
            assert_eq!(encode_replies(v, 5, true, &[]).unwrap().len(), 1);
        }
    }

    #[test]
    fn a_cancel_is_its_id() {
        assert_eq!(decode_cancel(&[0, 0, 0, 7]).unwrap(), 7);
        assert!(decode_cancel(&[0, 0, 7]).is_err());
    }
}
