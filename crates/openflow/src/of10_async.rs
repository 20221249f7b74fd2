//! OpenFlow 1.0's asynchronous messages, as plain `ovs-ofctl monitor` (no `-O`) and 1.0
//! controllers take them: PACKET_IN in the three forms `NXT_SET_PACKET_IN_FORMAT` chooses,
//! FLOW_REMOVED in the two forms the flow format (`NXT_SET_FLOW_FORMAT`) chooses, and 1.0's
//! PORT_STATUS. Each is written from the 1.3-shaped message the switch builds for every version
//! ([`encode_async`]) and read back ([`decode_async`]: for tests and tools).
//!
//! | message | form | layout |
//! |---|---|---|
//! | PACKET_IN | `NXPIF_STANDARD` (0, the default) | `OFPT_PACKET_IN`: buffer_id, total_len, 16-bit in_port, reason, the frame |
//! | PACKET_IN | `NXPIF_NXT_PACKET_IN` (1) | `NXT_PACKET_IN`: buffer_id, total_len, reason, table, cookie, an `nx_match` holding `in_port`, the frame |
//! | PACKET_IN | `NXPIF_NXT_PACKET_IN2` (2; `ovs-ofctl monitor` asks for it first) | `NXT_PACKET_IN2`: properties `PACKET`, `FULL_LEN` (only when cut), `BUFFER_ID` (only when buffered), `TABLE_ID`, `COOKIE` (not when all ones), `REASON`, `METADATA` (OXM `in_port`) — the properties and order Open vSwitch 3.1 writes |
//! | FLOW_REMOVED | flow format OpenFlow10 (the default) | `OFPT_FLOW_REMOVED` with an `ofp10_match`; a match 1.0 cannot say (IPv6, `metadata`, ...) goes as `NXT_FLOW_REMOVED` rather than cut |
//! | FLOW_REMOVED | flow format NXM | `NXT_FLOW_REMOVED` (`table_id` is the table plus one, as OVS writes it: 0 means "unknown") |
//! | PORT_STATUS | — | `OFPT_PORT_STATUS` with an `ofp_phy_port` ([`crate::of10::write_phy_port`]) |
//!
//! Durations carry milliseconds (as OVS keeps them), so `ovs-ofctl` prints what it prints for
//! Open vSwitch. The unit tests hold the bytes Open vSwitch 3.1 sent for each form.

use rqvs_flow::{FlowKey, Match};

use crate::error::{DecodeError, EncodeError};
use crate::flow_mod::{FlowRemoved, PacketIn, OFP_NO_BUFFER};
use crate::message::{kind, PortStatus};
use crate::of10::{self, FlowFormat, NX_VENDOR_ID, OFP10};
use crate::oxm::{enc_err, port_to_of};
use crate::port::Port;
use crate::wire::{Header, Reader, Writer};
use crate::Message;

/// `NXT_FLOW_REMOVED`.
pub const NXT_FLOW_REMOVED: u32 = 14;
/// `NXT_PACKET_IN`.
pub const NXT_PACKET_IN: u32 = 17;
/// `NXT_SET_ASYNC_CONFIG` (the 1.3 layout of the six masks, in a Nicira message).
pub const NXT_SET_ASYNC_CONFIG: u32 = 19;
/// `NXT_PACKET_IN2`.
pub const NXT_PACKET_IN2: u32 = 30;

/// `NXPIF_STANDARD`: 1.0's own `OFPT_PACKET_IN`.
pub const NXPIF_STANDARD: u32 = 0;
/// `NXPIF_NXT_PACKET_IN`.
pub const NXPIF_NXT_PACKET_IN: u32 = 1;
/// `NXPIF_NXT_PACKET_IN2`.
pub const NXPIF_NXT_PACKET_IN2: u32 = 2;

/// `NXPINT_*` property types of `NXT_PACKET_IN2`.
const NXPINT_PACKET: u16 = 0;
const NXPINT_FULL_LEN: u16 = 1;
const NXPINT_BUFFER_ID: u16 = 2;
const NXPINT_TABLE_ID: u16 = 3;
const NXPINT_COOKIE: u16 = 4;
const NXPINT_REASON: u16 = 5;
const NXPINT_METADATA: u16 = 6;

/// How a 1.0 connection takes asynchronous messages (what its Nicira requests set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AsyncForm {
    /// `NXT_SET_PACKET_IN_FORMAT`'s format (`NXPIF_*`).
    pub packet_in_format: u32,
    /// `NXT_SET_FLOW_FORMAT`'s format.
    pub flow_format: FlowFormat,
}

fn header(w: &mut Writer, kind: u8) {
    Header { version: OFP10, kind, length: 0, xid: 0 }.write(w);
}

fn nx_header(w: &mut Writer, subtype: u32) {
    header(w, kind::EXPERIMENTER);
    w.u32(NX_VENDOR_ID);
    w.u32(subtype);
}

/// A duration's nanoseconds at OVS's (millisecond) precision.
fn ms_precision(nsec: u32) -> u32 {
    nsec / 1_000_000 * 1_000_000
}

/// The 16-bit in_port of a packet-in's match (rqvs's own numbering is 1.0's).
fn in_port10(m: &Match) -> Result<u16, EncodeError> {
    let p = if m.mask().in_port != 0 { m.value().in_port } else { 0 };
    u16::try_from(p).or_else(|_| enc_err(format!("in_port {p:#x} has no OpenFlow 1.0 number")))
}

/// One `NXT_PACKET_IN2` property: type, length (4 + payload), payload, padding to 8.
fn prop(w: &mut Writer, kind: u16, payload: &[u8]) -> Result<(), EncodeError> {
    let len = u16::try_from(4 + payload.len()).or_else(|_| enc_err("an NXT_PACKET_IN2 property over 64 KiB"))?;
    w.u16(kind);
    w.u16(len);
    w.put(payload);
    w.pad8();
    Ok(())
}

/// Does the encoded message `bytes` start with a PACKET_IN, in any version's or form's
/// encoding: `OFPT_PACKET_IN`, or a Nicira `NXT_PACKET_IN`/`NXT_PACKET_IN2` (what
/// [`encode_async`] and the other versions' encoders write)? A switch's writer counts the
/// packet-ins it still has to send by it (`controller_queue_size`).
pub fn is_packet_in(bytes: &[u8]) -> bool {
    match bytes.get(1) {
        Some(&kind::PACKET_IN) => true,
        Some(&kind::EXPERIMENTER) if bytes.len() >= 16 => {
            let word = |i: usize| u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
            word(8) == NX_VENDOR_ID && matches!(word(12), NXT_PACKET_IN | NXT_PACKET_IN2)
        }
        _ => false,
    }
}

/// An asynchronous message (PACKET_IN, FLOW_REMOVED, PORT_STATUS) as a 1.0 connection of `form`
/// takes it (module docs); xid 0, as every asynchronous message.
pub fn encode_async(msg: &Message, form: AsyncForm) -> Result<Vec<u8>, EncodeError> {
    let mut w = Writer::new();
    match msg {
        Message::PacketIn(p) => encode_packet_in(&mut w, p, form.packet_in_format)?,
        Message::FlowRemoved(fr) => {
            let nxm = form.flow_format == FlowFormat::Nxm || !of10::fits_match10(&fr.matches);
            encode_flow_removed(&mut w, fr, nxm)?
        }
        Message::PortStatus(ps) => {
            header(&mut w, kind::PORT_STATUS);
            w.u8(ps.reason);
            w.zeros(7);
            of10::write_phy_port(&mut w, &ps.port)?;
        }
        other => return enc_err(format!("{other:?} is not an asynchronous message")),
    }
    w.finish_message()
}

fn encode_packet_in(w: &mut Writer, p: &PacketIn, format: u32) -> Result<(), EncodeError> {
    match format {
        NXPIF_STANDARD => {
            header(w, kind::PACKET_IN);
            w.u32(p.buffer_id);
            w.u16(p.total_len);
            w.u16(in_port10(&p.matches)?);
            w.u8(p.reason);
            w.u8(0);
            w.put(&p.data);
        }
        NXPIF_NXT_PACKET_IN => {
            nx_header(w, NXT_PACKET_IN);
            w.u32(p.buffer_id);
            w.u16(p.total_len);
            w.u8(p.reason);
            w.u8(p.table_id);
            w.u64(p.cookie);
            let at = w.len();
            w.u16(0);
            w.zeros(6);
            let len = crate::nxm::encode(&p.matches, w)?;
            w.patch_u16(at, len);
            w.pad8();
            w.zeros(2);
            w.put(&p.data);
        }
        NXPIF_NXT_PACKET_IN2 => {
            nx_header(w, NXT_PACKET_IN2);
            prop(w, NXPINT_PACKET, &p.data)?;
            if p.data.len() != usize::from(p.total_len) {
                prop(w, NXPINT_FULL_LEN, &u32::from(p.total_len).to_be_bytes())?;
            }
            if p.buffer_id != OFP_NO_BUFFER {
                prop(w, NXPINT_BUFFER_ID, &p.buffer_id.to_be_bytes())?;
            }
            prop(w, NXPINT_TABLE_ID, &[p.table_id])?;
            if p.cookie != u64::MAX {
                // OVS's 64-bit properties: 4 bytes of padding, then the value.
                let mut c = [0u8; 12];
                c[4..].copy_from_slice(&p.cookie.to_be_bytes());
                prop(w, NXPINT_COOKIE, &c)?;
            }
            prop(w, NXPINT_REASON, &[p.reason])?;
            let mut m = Writer::new();
            crate::oxm::encode_fields(&p.matches, &mut m, crate::oxm::Dialect::Oxm)?;
            prop(w, NXPINT_METADATA, &m.bytes)?;
        }
        f => return enc_err(format!("packet-in format {f}")),
    }
    Ok(())
}

fn encode_flow_removed(w: &mut Writer, fr: &FlowRemoved, nxm: bool) -> Result<(), EncodeError> {
    if nxm {
        nx_header(w, NXT_FLOW_REMOVED);
        w.u64(fr.cookie);
        w.u16(fr.priority);
        w.u8(fr.reason);
        w.u8(fr.table_id.wrapping_add(1));
        w.u32(fr.duration_sec);
        w.u32(ms_precision(fr.duration_nsec));
        w.u16(fr.idle_timeout);
        let at = w.len();
        w.u16(0);
        w.u64(fr.packet_count);
        w.u64(fr.byte_count);
        let len = crate::nxm::encode(&fr.matches, w)?;
        w.patch_u16(at, len);
        w.pad8();
    } else {
        header(w, kind::FLOW_REMOVED);
        of10::encode_match(&fr.matches, w)?;
        w.u64(fr.cookie);
        w.u16(fr.priority);
        w.u8(fr.reason);
        w.u8(0);
        w.u32(fr.duration_sec);
        w.u32(ms_precision(fr.duration_nsec));
        w.u16(fr.idle_timeout);
        w.zeros(2);
        w.u64(fr.packet_count);
        w.u64(fr.byte_count);
    }
    Ok(())
}

/// Reads a 1.0 asynchronous message of any form [`encode_async`] writes (what a 1.0 controller
/// does with it). A 1.0 FLOW_REMOVED has no hard timeout nor table: 0; a 1.0 PACKET_IN no
/// table nor cookie: table 0, cookie all ones.
pub fn decode_async(bytes: &[u8]) -> Result<Message, DecodeError> {
    let h = Header::peek(bytes)?;
    if usize::from(h.length) != bytes.len() || h.version != OFP10 {
        return Err(DecodeError::BadLength { what: "ofp_header (1.0)", len: bytes.len() });
    }
    let mut r = Reader::new(&bytes[Header::LEN..], "OpenFlow 1.0 asynchronous message");
    let in_port_match = |p: u32| {
        Match::from_masked(
            FlowKey { in_port: p, ..FlowKey::default() },
            FlowKey { in_port: u32::MAX, ..FlowKey::default() },
        )
    };
    match h.kind {
        kind::PACKET_IN => {
            let buffer_id = r.u32()?;
            let total_len = r.u16()?;
            let in_port = r.u16()?;
            let reason = r.u8()?;
            r.skip(1)?;
            Ok(Message::PacketIn(PacketIn {
                buffer_id,
                total_len,
                reason,
                table_id: 0,
                cookie: u64::MAX,
                matches: in_port_match(u32::from(in_port)),
                data: r.rest().to_vec(),
            }))
        }
        kind::FLOW_REMOVED => {
            let matches = of10::decode_match(&mut r)?;
            let cookie = r.u64()?;
            let priority = r.u16()?;
            let reason = r.u8()?;
            r.skip(1)?;
            let duration_sec = r.u32()?;
            let duration_nsec = r.u32()?;
            let idle_timeout = r.u16()?;
            r.skip(2)?;
            Ok(Message::FlowRemoved(FlowRemoved {
                cookie,
                priority,
                reason,
                table_id: 0,
                duration_sec,
                duration_nsec,
                idle_timeout,
                hard_timeout: 0,
                packet_count: r.u64()?,
                byte_count: r.u64()?,
                matches,
            }))
        }
        kind::PORT_STATUS => {
            let reason = r.u8()?;
            r.skip(7)?;
            Ok(Message::PortStatus(PortStatus { reason, port: read_phy_port(&mut r)? }))
        }
        kind::EXPERIMENTER => {
            if r.u32()? != NX_VENDOR_ID {
                return Err(DecodeError::BadLength { what: "a Nicira message's vendor", len: bytes.len() });
            }
            match r.u32()? {
                NXT_PACKET_IN => {
                    let buffer_id = r.u32()?;
                    let total_len = r.u16()?;
                    let reason = r.u8()?;
                    let table_id = r.u8()?;
                    let cookie = r.u64()?;
                    let match_len = usize::from(r.u16()?);
                    r.skip(6)?;
                    let nx = crate::nxm::pull_match(&mut r, match_len)?;
                    r.skip(2)?;
                    let data = r.rest().to_vec();
                    Ok(Message::PacketIn(PacketIn {
                        buffer_id,
                        total_len,
                        reason,
                        table_id,
                        cookie,
                        matches: nx.matches,
                        data,
                    }))
                }
                NXT_PACKET_IN2 => decode_packet_in2(&mut r),
                NXT_FLOW_REMOVED => {
                    let cookie = r.u64()?;
                    let priority = r.u16()?;
                    let reason = r.u8()?;
                    let table_id = r.u8()?.wrapping_sub(1);
                    let duration_sec = r.u32()?;
                    let duration_nsec = r.u32()?;
                    let idle_timeout = r.u16()?;
                    let match_len = usize::from(r.u16()?);
                    let packet_count = r.u64()?;
                    let byte_count = r.u64()?;
                    let nx = crate::nxm::pull_match(&mut r, match_len)?;
                    Ok(Message::FlowRemoved(FlowRemoved {
                        cookie,
                        priority,
                        reason,
                        table_id,
                        duration_sec,
                        duration_nsec,
                        idle_timeout,
                        hard_timeout: 0,
                        packet_count,
                        byte_count,
                        matches: nx.matches,
                    }))
                }
                s => Err(DecodeError::BadLength { what: "a Nicira asynchronous message's subtype", len: s as usize }),
            }
        }
        _ => Err(DecodeError::BadLength { what: "an OpenFlow 1.0 asynchronous message's type", len: bytes.len() }),
    }
}

fn decode_packet_in2(r: &mut Reader<'_>) -> Result<Message, DecodeError> {
    let mut p = PacketIn {
        buffer_id: OFP_NO_BUFFER,
        total_len: 0,
        reason: 0,
        table_id: 0,
        cookie: u64::MAX,
        matches: Match::default(),
        data: Vec::new(),
    };
    let mut full_len = None;
    while !r.is_empty() {
        let kind = r.u16()?;
        let len = usize::from(r.u16()?);
        let payload =
            r.take(len.checked_sub(4).ok_or(DecodeError::BadLength { what: "NXT_PACKET_IN2 property", len })?)?;
        r.skip(len.div_ceil(8) * 8 - len)?;
        let mut pr = Reader::new(payload, "NXT_PACKET_IN2 property");
        match kind {
            NXPINT_PACKET => p.data = payload.to_vec(),
            NXPINT_FULL_LEN => full_len = Some(pr.u32()?),
            NXPINT_BUFFER_ID => p.buffer_id = pr.u32()?,
            NXPINT_TABLE_ID => p.table_id = pr.u8()?,
            NXPINT_COOKIE => {
                pr.skip(4)?;
                p.cookie = pr.u64()?;
            }
            NXPINT_REASON => p.reason = pr.u8()?,
            NXPINT_METADATA => p.matches = crate::oxm::decode_tlvs(pr)?,
            // USERDATA, CONTINUATION: rqvs writes none.
            _ => {}
        }
    }
    p.total_len = match full_len {
        Some(l) => u16::try_from(l).unwrap_or(u16::MAX),
        None => u16::try_from(p.data.len()).unwrap_or(u16::MAX),
    };
    Ok(Message::PacketIn(p))
}

/// Reads an `ofp_phy_port` (48 bytes) as [`of10::write_phy_port`] writes it.
pub fn read_phy_port(r: &mut Reader<'_>) -> Result<Port, DecodeError> {
    let no = r.u16()?;
    let hw_addr = r.array()?;
    let name_bytes = r.take(16)?;
    let name = String::from_utf8_lossy(name_bytes.split(|&b| b == 0).next().unwrap_or(&[])).into_owned();
    let config = r.u32()?;
    let state = r.u32()?;
    let mut f = [0u32; 4];
    for x in &mut f {
        *x = of10::features10_to_13(r.u32()?);
    }
    Ok(Port {
        port_no: port_to_of(u32::from(no)).unwrap_or(u32::from(no)),
        hw_addr,
        name,
        config,
        state,
        ethernet: Some(crate::port::PortEthernet {
            curr: f[0],
            advertised: f[1],
            supported: f[2],
            peer: f[3],
            curr_speed: 0,
            max_speed: 0,
        }),
        properties: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::PortStatus;
    use crate::port::PortEthernet;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// The ARP request Open vSwitch 3.1 sent to `ovs-ofctl monitor` in each capture below.
    const FRAME: &str = "ffffffffffff00000000000108060001080006040001000000000001c0a80001000000000000c0a80002";

    fn packet_in(cookie: u64) -> PacketIn {
        PacketIn {
            buffer_id: OFP_NO_BUFFER,
            total_len: 42,
            reason: 1,
            table_id: 0,
            cookie,
            matches: Match::from_masked(
                FlowKey { in_port: 1, ..FlowKey::default() },
                FlowKey { in_port: u32::MAX, ..FlowKey::default() },
            ),
            data: hex(FRAME),
        }
    }

    fn form(packet_in_format: u32, flow_format: FlowFormat) -> AsyncForm {
        AsyncForm { packet_in_format, flow_format }
    }

    /// Open vSwitch 3.1's PACKET_IN of an ARP from port 1 to a flow `cookie=0x34,in_port=1,
    /// actions=controller`, in each packet-in format (captured from its management socket):
    /// rqvs writes the same bytes and reads them back.
    #[test]
    fn packet_ins_are_the_bytes_of_open_vswitch() {
        let cases = [
            (NXPIF_STANDARD, format!("010a003c00000000ffffffff002a00010100{FRAME}")),
            (
                NXPIF_NXT_PACKET_IN,
                format!("0104005c000000000000232000000011ffffffff002a01000000000000000034000600000000000000000002000100000000{FRAME}"),
            ),
            (
                NXPIF_NXT_PACKET_IN2,
                format!("0104007000000000000023200000001e0000002e{FRAME}000000030005000000000004001000000000000000000000003400050005010000000006000c800000040000000100000000"),
            ),
        ];
        for (format, bytes) in cases {
            let want = hex(&bytes);
            let msg = Message::PacketIn(packet_in(0x34));
            let got = encode_async(&msg, form(format, FlowFormat::OpenFlow10)).unwrap();
            assert_eq!(got, want, "format {format}");
            let back = decode_async(&got).unwrap();
            let Message::PacketIn(mut back) = back else { panic!("{back:?}") };
            if format == NXPIF_STANDARD {
                // 1.0's own PACKET_IN carries no cookie.
                back.cookie = 0x34;
            }
            assert_eq!(back, packet_in(0x34), "format {format}");
        }
    }

    /// Every encoding of a PACKET_IN is one (1.0's three forms, 1.3's and 1.4's), nothing else
    /// is: the other asynchronous messages, a reply, a Nicira message of another subtype, and
    /// cut-off headers.
    #[test]
    fn packet_ins_are_told_by_their_header() {
        let msg = Message::PacketIn(packet_in(0x34));
        for format in [NXPIF_STANDARD, NXPIF_NXT_PACKET_IN, NXPIF_NXT_PACKET_IN2] {
            assert!(is_packet_in(&encode_async(&msg, form(format, FlowFormat::OpenFlow10)).unwrap()), "{format}");
        }
        for version in [crate::OFP13, crate::OFP14] {
            assert!(is_packet_in(&crate::encode(version, 0, &msg).unwrap()), "{version}");
            assert!(!is_packet_in(&crate::encode(version, 7, &Message::BarrierReply).unwrap()));
        }
        let port_status = encode_async(&Message::PortStatus(PortStatus::default()), AsyncForm::default()).unwrap();
        assert!(!is_packet_in(&port_status));
        // NXT_SET_ASYNC_CONFIG: a Nicira message, not a packet-in.
        let mut nx = hex("0104001800000000000023200000001300000000");
        assert!(!is_packet_in(&nx));
        nx[15] = 0x11;
        assert!(is_packet_in(&nx), "NXT_PACKET_IN's subtype");
        assert!(!is_packet_in(&nx[..12]) && !is_packet_in(&[]) && !is_packet_in(&[1]));
    }

    /// NXT_PACKET_IN2 of a cut frame and of a packet-out's (cookie all ones): FULL_LEN is
    /// there and COOKIE is not, as OVS writes them; both read back.
    #[test]
    fn packet_in2_says_the_full_length_and_leaves_out_an_all_ones_cookie() {
        let mut p = packet_in(u64::MAX);
        p.data.truncate(20);
        let b = encode_async(&Message::PacketIn(p.clone()), form(NXPIF_NXT_PACKET_IN2, FlowFormat::Nxm)).unwrap();
        assert_eq!(&b[16..20], &[0, 0, 0, 24], "PACKET of 20 bytes");
        assert_eq!(&b[40..48], &[0, 1, 0, 8, 0, 0, 0, 42], "FULL_LEN");
        assert!(!b.windows(4).any(|w| w == [0, 4, 0, 16]), "no COOKIE");
        assert_eq!(decode_async(&b).unwrap(), Message::PacketIn(p));
    }

    fn flow_removed() -> FlowRemoved {
        let m = rqvs_flow::formats::ofctl::parse_flow("t", 1, "ip,nw_dst=10.0.0.8,actions=drop", 0).unwrap().matches;
        FlowRemoved {
            cookie: 0x12,
            priority: 6,
            reason: 1,
            table_id: 0,
            duration_sec: 1,
            duration_nsec: 51_234_567,
            idle_timeout: 7,
            hard_timeout: 1,
            packet_count: 0,
            byte_count: 0,
            matches: m,
        }
    }

    /// Open vSwitch 3.1's FLOW_REMOVED of `send_flow_rem,priority=6,cookie=0x12,ip,
    /// nw_dst=10.0.0.8,hard_timeout=1,idle_timeout=7` (captured), with flow format OpenFlow10
    /// and NXM.
    #[test]
    fn flow_removed_is_the_bytes_of_open_vswitch() {
        let cases = [
            (
                FlowFormat::OpenFlow10,
                "010b005800000000003020ef000000000000000000000000000000000000080000000000000000000a0000080000000000000000000000120006010000000001030a32c00007000000000000000000000000000000000000",
            ),
            (
                FlowFormat::Nxm,
                "0104004800000000000023200000000e00000000000000120006010100000001001e84800007000e00000000000000000000000000000000000006020800000010040a0000080000",
            ),
        ];
        for (ff, ovs) in cases {
            // OVS's flow lived 1.051 s; ours 1.051234567 s, cut to milliseconds as OVS keeps
            // them: the same bytes.
            let got = encode_async(&Message::FlowRemoved(flow_removed()), form(0, ff)).unwrap();
            if ff == FlowFormat::Nxm {
                // OVS's NXM capture is another flow's (hard_timeout 1, 2 s, 0x1e8480 ns):
                // compare all but the duration.
                let ovs = hex(ovs);
                assert_eq!(got.len(), ovs.len());
                for i in (0..got.len()).filter(|i| !(28..36).contains(i)) {
                    assert_eq!(got[i], ovs[i], "{ff:?}: byte {i}");
                }
            } else {
                assert_eq!(got, hex(ovs), "{ff:?}");
            }
            let Message::FlowRemoved(back) = decode_async(&got).unwrap() else { panic!() };
            let mut want = flow_removed();
            want.duration_nsec = 51_000_000;
            want.hard_timeout = 0;
            assert_eq!(back, want, "{ff:?}");
        }
    }

    /// A match 1.0 cannot say goes as NXT_FLOW_REMOVED even with flow format OpenFlow10.
    #[test]
    fn a_flow_removed_1_0_cannot_say_goes_as_nxm() {
        let mut fr = flow_removed();
        fr.matches =
            rqvs_flow::formats::ofctl::parse_flow("t", 1, "ipv6,ipv6_src=::1,actions=drop", 0).unwrap().matches;
        let b = encode_async(&Message::FlowRemoved(fr.clone()), form(0, FlowFormat::OpenFlow10)).unwrap();
        assert_eq!(b[1], kind::EXPERIMENTER);
        let Message::FlowRemoved(back) = decode_async(&b).unwrap() else { panic!() };
        assert_eq!(back.matches, fr.matches);
    }

    /// Open vSwitch 3.1's PORT_STATUS (MODIFY) of port 2 `p2` going down
    /// (`netdev-dummy/set-admin-state p2 down`: LINK_DOWN, and config PORT_DOWN with the
    /// NO_FLOOD, NO_FWD, NO_PACKET_IN an earlier `mod-port` had set), captured.
    #[test]
    fn port_status_is_the_bytes_of_open_vswitch() {
        let bytes = hex("010c00400000000002000000000000000002aa55aa55000e70320000000000000000000000000000000000710000000100000000000000000000000000000000");
        let port = Port {
            port_no: 2,
            hw_addr: [0xaa, 0x55, 0xaa, 0x55, 0x00, 0x0e],
            name: "p2".into(),
            config: 0x71,
            state: 1,
            ethernet: Some(PortEthernet::default()),
            properties: Vec::new(),
        };
        let msg = Message::PortStatus(PortStatus { reason: 2, port });
        let got = encode_async(&msg, AsyncForm::default()).unwrap();
        assert_eq!(got, bytes);
        assert_eq!(decode_async(&got).unwrap(), msg);
    }

    #[test]
    fn what_is_not_asynchronous_or_not_1_0_is_refused() {
        assert!(encode_async(&Message::BarrierReply, AsyncForm::default()).is_err());
        let mut p = packet_in(0);
        p.matches = Match::from_masked(
            FlowKey { in_port: 0x1_0000, ..FlowKey::default() },
            FlowKey { in_port: u32::MAX, ..FlowKey::default() },
        );
        assert!(encode_async(&Message::PacketIn(p), AsyncForm::default()).is_err());
        assert!(decode_async(&hex("010a0008000000000000")).is_err());
        assert!(decode_async(&hex("010a000c00000000ffffff")).is_err());
    }

    /// Arbitrary bytes (and every cut of the captured messages) never make the reader panic.
    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let good = encode_async(&Message::PacketIn(packet_in(1)), form(NXPIF_NXT_PACKET_IN2, FlowFormat::Nxm)).unwrap();
        for cut in 0..good.len() {
            let mut b = good[..cut].to_vec();
            if b.len() >= 4 {
                b[2..4].copy_from_slice(&(cut as u16).to_be_bytes());
            }
            let _ = decode_async(&b);
        }
        for _ in 0..20_000 {
            let len = 8 + (next() % 120) as usize;
            let mut b: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            b[0] = OFP10;
            b[1] = [kind::PACKET_IN, kind::FLOW_REMOVED, kind::PORT_STATUS, kind::EXPERIMENTER][(next() % 4) as usize];
            b[2..4].copy_from_slice(&(len as u16).to_be_bytes());
            if b[1] == kind::EXPERIMENTER && len >= 16 {
                b[8..12].copy_from_slice(&NX_VENDOR_ID.to_be_bytes());
                let sub = [NXT_PACKET_IN, NXT_PACKET_IN2, NXT_FLOW_REMOVED][(next() % 3) as usize];
                b[12..16].copy_from_slice(&sub.to_be_bytes());
            }
            let _ = decode_async(&b);
        }
    }
}
