//! `ofp_match` (type `OFPMT_OXM`) ↔ [`rqvs_flow::Match`] (OpenFlow 1.3 §7.2.2, 1.4 §7.2.3).
//!
//! An `ofp_match` is `type` (1, OXM), `length` (the header and the TLVs, not the padding), OXM
//! TLVs, then zeros up to a multiple of 8. Each TLV is a 32-bit header — class (16 bits), field
//! (7), has-mask (1), payload length (8) — and the value (then the mask, when has-mask is set).
//!
//! **Fields.** Driven by [`rqvs_flow::field::FIELDS`], the table that describes each match
//! field once: every field with an `OFPXMC_OPENFLOW_BASIC` (0x8000) code — IN_PORT, METADATA,
//! ETH_DST/SRC, ETH_TYPE, VLAN_VID/PCP, IP_DSCP/ECN, IP_PROTO, IPV4_SRC/DST, TCP/UDP/SCTP
//! ports, ICMPV4 and ICMPV6 type/code, ARP_OP/SPA/TPA/SHA/THA, IPV6_SRC/DST/FLABEL,
//! IPV6_ND_TARGET/SLL/TLL — and the NXM codes of the fields OXM lacks, which `ovs-ofctl` sends in
//! 1.3 and 1.4: `NXM_NX_IP_TTL` (`nw_ttl`), `NXM_NX_IP_FRAG` (`ip_frag`), `NXM_OF_VLAN_TCI`;
//! `tcp_flags` as `ONFOXM_ET_TCP_FLAGS` (experimenter 0x4f4e4600, field 42), what OVS 3.1 sends.
//! Every field's NXM code is read too (`NXM_OF_IN_PORT` as a 16-bit port), and 1.5's
//! `OXM_OF_TCP_FLAGS`. `OXM_OF_PACKET_TYPE` = Ethernet (which OVS 3.1 sends when a match cannot
//! be said in OXM) is no condition; another packet type is BAD_VALUE. Payload sizes are the
//! table's widths in bytes, except ARP_OP (2 bytes; rqvs keeps 8 bits, as OVS's `nw_proto`, so a
//! larger opcode is BAD_VALUE) and IPV6_FLABEL (4 bytes, 20 bits used). Any other field
//! (MPLS, PBB, tunnels, registers, conntrack, ipv6_exthdr) is [`DecodeError::Unsupported`] with
//! `BAD_MATCH_BAD_FIELD`, naming it. TABLE_FEATURES lists exactly these (`match_fields`).
//!
//! **Checks on decoding** (answered with the OpenFlow error in brackets): a field twice, or two
//! fields over the same bits (tcp_src and udp_src; vlan_vid and vlan_tci) (`DUP_FIELD`); a mask
//! on a field the table says is exact-only (`BAD_MASK`); a payload of the wrong size
//! (`BAD_LEN`); values wider than the field (VLAN_VID above 0x1fff, VLAN_PCP above 7, ...)
//! (`BAD_VALUE`); value bits outside the mask (`BAD_WILDCARDS`, as OVS); each field's
//! prerequisites from the table (IPV6_SRC needs ETH_TYPE=0x86dd, TCP_SRC IP_PROTO=6 over IPv4
//! or IPv6, ND_TARGET ICMPv6 type 135/136 with code 0, VLAN_PCP a VLAN present, ...), then
//! [`rqvs_flow::field::unmet_prerequisite`] over the whole match (`BAD_PREREQ`). Malformed TLVs
//! that cannot be walked (a length past the match) are [`DecodeError::BadLength`] /
//! [`DecodeError::Truncated`].
//!
//! **Encoding** writes each examined bit as the field whose prerequisites the match meets
//! (`tp_src` is `tcp_src` under TCP, `icmpv6_type` under ICMPv6), in the order OVS's
//! `nx_put_raw` does — byte-identical to `ovs-ofctl`'s FLOW_MODs (`tests/ovs_flow_mod.rs`). A bit
//! no field can carry there (a port without its protocol, a masked `in_port`) is an
//! [`EncodeError`] naming the member.
//!
//! **Ports.** OpenFlow 1.3 port numbers are 32-bit; rqvs numbers ports as OpenFlow 1.0 and OVS
//! do (16-bit, `LOCAL` = 0xfffe): the reserved ports 0xffffff00.. map to 0xff00.., and a 1.3
//! port between 0xff00 and 0xfffffeff has no rqvs number (BAD_VALUE). See [`port_from_of`].
//!
//! **VLAN.** `vlan_tci`'s CFI bit is OVS's "VLAN present", which is `OFPVID_PRESENT` (0x1000)
//! of VLAN_VID: VLAN_VID's value/mask are `vlan_tci`'s low 13 bits, VLAN_PCP its top 3. "No
//! VLAN" (VLAN_VID = `OFPVID_NONE` exact) decodes to `vlan_tci=0/0xffff`, what `dl_vlan=0xffff`
//! means in rqvs and OVS. A `vlan_tci` mask that VLAN_VID/VLAN_PCP cannot say (a partial PCP
//! mask, PCP without a present VLAN) is written whole as `NXM_OF_VLAN_TCI`, which OVS reads in
//! 1.3; OVS's own encoder drops such bits (it sends `packet_type=(0,0)` for
//! `vlan_tci=0x2000/0x2000`).
//!
//! **Port ranges.** OXM has no ranges. [`encode_match`] refuses a [`Match`] with a port range
//! that is not the whole port space (the error names it); callers first split the match with
//! [`Match::expand_port_ranges`] — the expansion `ofctl::format_flows` writes one line per
//! element of — as [`crate::flow_mod::FlowMod::from_rule`] does.

use rqvs_flow::field::{self, Field as TField, Maskable, Member};
use rqvs_flow::key::{FLOW_NW_FRAG_ANY, VLAN_CFI, VLAN_PCP_MASK, VLAN_VID_MASK};
use rqvs_flow::{FlowKey, Match};

use crate::error::{DecodeError, OfError};
use crate::wire::{Reader, Writer};

/// `ofp_match.type` of an OXM match.
pub const OFPMT_OXM: u16 = 1;
/// The OpenFlow basic OXM class.
pub const OFPXMC_OPENFLOW_BASIC: u16 = 0x8000;
/// Open vSwitch's NXM class 1 (`NXM_NX_*`).
pub const OFPXMC_NXM_1: u16 = 0x0001;
/// The experimenter OXM class: a 32-bit experimenter id follows the header.
pub const OFPXMC_EXPERIMENTER: u16 = 0xffff;
/// The ONF experimenter id (`ONFOXM_ET_TCP_FLAGS` lives there).
pub const ONF_EXPERIMENTER_ID: u32 = 0x4f4e_4600;
/// VLAN_VID's "a VLAN tag is present" bit.
pub const OFPVID_PRESENT: u16 = 0x1000;
/// VLAN_VID's "no VLAN tag" value.
pub const OFPVID_NONE: u16 = 0x0000;
/// OpenFlow 1.5's OXM_OF_PACKET_TYPE (a basic field OVS also sends in 1.3).
pub const OXM_PACKET_TYPE: u8 = 44;
/// The highest OpenFlow 1.3 port number of a physical port.
pub const OFPP_MAX: u32 = 0xffff_ff00;
/// OpenFlow 1.3's `OFPP_ANY` (no port; a wildcard in requests).
pub const OFPP_ANY: u32 = 0xffff_ffff;

pub use crate::error::EncodeError;

pub(crate) fn enc_err<T>(msg: impl Into<String>) -> Result<T, EncodeError> {
    Err(EncodeError(msg.into()))
}

/// A well-formed request breaking a rule of the spec, or asking for what rqvs cannot do:
/// `DecodeError::Unsupported` carrying the OpenFlow error to answer with.
pub(crate) fn reject<T>(what: impl Into<String>, error: OfError) -> Result<T, DecodeError> {
    Err(DecodeError::Unsupported { what: what.into(), error })
}

/// A 1.3 port number as rqvs numbers ports (OpenFlow 1.0's 16-bit space, as OVS does): ports
/// below 0xff00 are themselves, the reserved ports 0xffffff00..=0xffffffff are 0xff00..=0xffff;
/// `None` for 0xff00..=0xfffffeff.
pub fn port_from_of(p: u32) -> Option<u32> {
    if p < 0xff00 {
        Some(p)
    } else if p >= OFPP_MAX {
        Some(p - 0xffff_0000)
    } else {
        None
    }
}

/// The inverse of [`port_from_of`]; `None` for an rqvs port above 0xffff.
pub fn port_to_of(p: u32) -> Option<u32> {
    match p {
        0..=0xfeff => Some(p),
        0xff00..=0xffff => Some(p + 0xffff_0000),
        _ => None,
    }
}

/// The name of an OpenFlow basic field rqvs does not have.
fn basic_field_name(f: u8) -> String {
    const NAMES: [&str; 45] = [
        "in_port",
        "in_phy_port",
        "metadata",
        "eth_dst",
        "eth_src",
        "eth_type",
        "vlan_vid",
        "vlan_pcp",
        "ip_dscp",
        "ip_ecn",
        "ip_proto",
        "ipv4_src",
        "ipv4_dst",
        "tcp_src",
        "tcp_dst",
        "udp_src",
        "udp_dst",
        "sctp_src",
        "sctp_dst",
        "icmpv4_type",
        "icmpv4_code",
        "arp_op",
        "arp_spa",
        "arp_tpa",
        "arp_sha",
        "arp_tha",
        "ipv6_src",
        "ipv6_dst",
        "ipv6_flabel",
        "icmpv6_type",
        "icmpv6_code",
        "ipv6_nd_target",
        "ipv6_nd_sll",
        "ipv6_nd_tll",
        "mpls_label",
        "mpls_tc",
        "mpls_bos",
        "pbb_isid",
        "tunnel_id",
        "ipv6_exthdr",
        "field 40",
        "pbb_uca",
        "tcp_flags",
        "actset_output",
        "packet_type",
    ];
    NAMES.get(usize::from(f)).map_or_else(|| format!("OXM basic field {f}"), |n| (*n).to_string())
}

/// One match TLV as read: the table's field, its value and mask (all ones over the field when
/// the TLV had none), and the class and code it came with (its name on the wire, for errors:
/// [`MatchTlv::wire`], made only when one is reported).
struct MatchTlv {
    field: &'static TField,
    value: u128,
    mask: u128,
    class: u16,
    code: u8,
}

impl MatchTlv {
    /// The name the field is called by on the wire.
    fn wire(&self) -> String {
        tlv_name(self.class, self.code, self.field)
    }
}

/// The name a TLV of this class and code, read as `f`, is called by in errors.
fn tlv_name(class: u16, code: u8, f: &TField) -> String {
    match class {
        OFPXMC_EXPERIMENTER => "tcp_flags (ONF)".to_string(),
        field::NXM_OF if code == NXM_OF_IP_TOS => "nw_tos (NXM_OF_IP_TOS)".to_string(),
        _ => wire_name(class, code, f),
    }
}

/// The OXM name of a table field for messages (`eth_src` rather than `dl_src`).
fn wire_name(class: u16, code: u8, f: &TField) -> String {
    match class {
        OFPXMC_OPENFLOW_BASIC => basic_field_name(code),
        OFPXMC_NXM_1 => format!("{} (NXM_NX field {code})", f.name),
        0x0000 => format!("{} (NXM_OF field {code})", f.name),
        _ => f.name.to_string(),
    }
}

/// The payload size of `f` in OXM (OVS's `mf_field.n_bytes`): the field's bits rounded up to
/// bytes, except ARP_OP (16 bits on the wire, rqvs keeps 8 as OVS's `nw_proto`) and
/// IPV6_FLABEL (32 bits on the wire, 20 used).
fn oxm_bytes(f: &TField) -> usize {
    match f.name {
        "arp_op" => 2,
        "ipv6_label" => 4,
        _ => f.wire_bytes(),
    }
}

/// The table field a wire code names, and its payload size; `None` for one rqvs lacks.
/// `NXM_OF_IN_PORT` is OpenFlow 1.0's 16-bit port.
fn field_of_code(class: u16, code: u8) -> Option<(&'static TField, usize)> {
    let f = match class {
        // OpenFlow 1.5's OXM_OF_TCP_FLAGS, which OVS also reads in 1.3.
        OFPXMC_OPENFLOW_BASIC if code == 42 => TField::by_name("tcp_flags"),
        OFPXMC_OPENFLOW_BASIC => TField::by_oxm(class, code),
        field::NXM_OF | field::NXM_NX => TField::by_nxm(class, code),
        _ => None,
    }?;
    let bytes = if class == field::NXM_OF && f.member == Member::InPort { 2 } else { oxm_bytes(f) };
    Some((f, bytes))
}

/// `NXM_OF_IP_TOS` (class `NXM_OF`): OpenFlow 1.0's `nw_tos`, the TOS byte's DSCP bits in place.
pub const NXM_OF_IP_TOS: u8 = 5;

/// Which codes a match is written with: OXM (OpenFlow 1.3/1.4's `ofp_match`) or NXM (Open
/// vSwitch's `nx_match` of OpenFlow 1.0's Nicira extensions, [`crate::nxm`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    Oxm,
    Nxm,
}

/// The code and payload size `f` is written with in `dialect`: in OXM as [`code_of_field`];
/// in NXM its NXM code when it has one (`in_port` as `NXM_OF_IN_PORT`, 16 bits), else its
/// OXM code (`metadata`, `sctp_*`), as OVS's `nx_put_raw` does.
fn dialect_code(f: &TField, dialect: Dialect) -> ((u16, u8, Option<u32>), usize) {
    match (dialect, f.nxm) {
        (Dialect::Nxm, Some((class, code))) => {
            let bytes = if f.member == Member::InPort { 2 } else { oxm_bytes(f) };
            ((class, code, None), bytes)
        }
        _ => (code_of_field(f), oxm_bytes(f)),
    }
}

/// The code [`encode_match`] writes `f` with: its OXM basic code, else its NXM code
/// (`NXM_NX_IP_TTL`, `NXM_NX_IP_FRAG`, `NXM_OF_VLAN_TCI`), and for `tcp_flags`
/// `ONFOXM_ET_TCP_FLAGS`, as OVS 3.1 sends them in 1.3 and 1.4.
fn code_of_field(f: &TField) -> (u16, u8, Option<u32>) {
    if f.member == Member::TcpFlags {
        return (OFPXMC_EXPERIMENTER, 42, Some(ONF_EXPERIMENTER_ID));
    }
    let (class, code) = f.oxm.or(f.nxm).expect("every field of the table has an OXM or NXM code");
    (class, code, None)
}

fn be128(b: &[u8]) -> u128 {
    b.iter().fold(0u128, |a, &x| a << 8 | u128::from(x))
}

/// Reads one match TLV; errors name unknown fields, wrong sizes, masks where none may be, value
/// bits outside the mask and values too wide for the field.
/// `None` for OXM_OF_PACKET_TYPE = Ethernet, which every frame rqvs sees is.
fn read_match_tlv(r: &mut Reader<'_>) -> Result<Option<MatchTlv>, DecodeError> {
    let header = r.u32()?;
    let class = (header >> 16) as u16;
    let code = ((header >> 9) & 0x7f) as u8;
    let has_mask = header & 0x100 != 0;
    let len = (header & 0xff) as usize;
    let mut payload = r.sub(len, "oxm_tlv")?;
    if class == OFPXMC_OPENFLOW_BASIC && code == OXM_PACKET_TYPE {
        // OVS 3.1 sends packet_type=(0,0) for matches it cannot say in OXM (vlan_tci=0x2000/0x2000).
        if has_mask || len != 4 {
            return reject(
                format!("packet_type: {len} payload bytes, expected 4, unmasked"),
                OfError::BAD_MATCH_BAD_LEN,
            );
        }
        let t = payload.u32()?;
        if t != 0 {
            return reject(
                format!(
                    "packet_type ({},{:#x}): rqvs switches only Ethernet frames, packet_type (0,0)",
                    t >> 16,
                    t & 0xffff
                ),
                OfError::BAD_MATCH_BAD_VALUE,
            );
        }
        return Ok(None);
    }
    if class == field::NXM_OF && code == NXM_OF_IP_TOS {
        // OpenFlow 1.0's nw_tos (NXM): the DSCP bits of the TOS byte, ECN zero.
        let ip_dscp = TField::by_name("ip_dscp").expect("ip_dscp");
        if has_mask || len != 1 {
            return reject(
                format!("NXM_OF_IP_TOS: {len} payload bytes, expected 1, unmasked"),
                OfError::BAD_MATCH_BAD_LEN,
            );
        }
        let tos = payload.u8()?;
        if tos & 3 != 0 {
            return reject(format!("NXM_OF_IP_TOS {tos:#x}: ECN bits set"), OfError::BAD_MATCH_BAD_VALUE);
        }
        return Ok(Some(MatchTlv {
            field: ip_dscp,
            value: u128::from(tos >> 2),
            mask: ip_dscp.all_ones(),
            class,
            code,
        }));
    }
    let unsupported = |what: String| reject(what, OfError::BAD_MATCH_BAD_FIELD);
    let found = match class {
        OFPXMC_EXPERIMENTER => {
            let exp = payload.u32().map_err(|_| DecodeError::Unsupported {
                what: "experimenter OXM shorter than its experimenter id".into(),
                error: OfError::BAD_MATCH_BAD_LEN,
            })?;
            if exp != ONF_EXPERIMENTER_ID || code != 42 {
                return unsupported(format!(
                    "experimenter match field {code} of experimenter {exp:#010x} is not supported by rqvs"
                ));
            }
            TField::by_name("tcp_flags").map(|f| (f, 2))
        }
        _ => field_of_code(class, code),
    };
    let Some((f, width)) = found else {
        return unsupported(match class {
            OFPXMC_OPENFLOW_BASIC => format!("match field {} is not supported by rqvs", basic_field_name(code)),
            field::NXM_OF => format!("NXM_OF match field {code} is not supported by rqvs"),
            field::NXM_NX => {
                format!("NXM_NX match field {code} is not supported by rqvs (registers, tunnels, conntrack, ...)")
            }
            _ => format!("match field class {class:#06x} field {code} is not supported by rqvs"),
        });
    };
    let wire = || tlv_name(class, code, f);
    if has_mask && f.maskable == Maskable::No {
        return reject(format!("{} cannot be masked", wire()), OfError::BAD_MATCH_BAD_MASK);
    }
    let want = if has_mask { 2 * width } else { width };
    if payload.remaining() != want {
        return reject(
            format!("{} has {} payload bytes, expected {want}", wire(), payload.remaining()),
            OfError::BAD_MATCH_BAD_LEN,
        );
    }
    let mut value = be128(payload.take(width)?);
    let mask = if has_mask { be128(payload.take(width)?) } else { f.all_ones() };
    if f.member == Member::InPort && class == OFPXMC_OPENFLOW_BASIC {
        let Some(p) = port_from_of(value as u32) else {
            return reject(format!("{}: port {value:#x} has no rqvs number", wire()), OfError::BAD_MATCH_BAD_VALUE);
        };
        value = p.into();
    }
    if (value | mask) & !f.all_ones() != 0 {
        let limit = if f.member == Member::NwProto { " (rqvs keeps the ARP opcode in 8 bits)" } else { "" };
        return reject(
            format!("{}: {value:#x}/{mask:#x} has bits above {:#x}{limit}", wire(), f.all_ones()),
            OfError::BAD_MATCH_BAD_VALUE,
        );
    }
    if value & !mask != 0 {
        return reject(
            format!("match field {} has value bits outside its mask", wire()),
            OfError::BAD_MATCH_BAD_WILDCARDS,
        );
    }
    Ok(Some(MatchTlv { field: f, value, mask, class, code }))
}

/// Decodes the `ofp_match` at `r` (header, TLVs and padding) into an rqvs [`Match`].
pub fn decode_match(r: &mut Reader<'_>) -> Result<Match, DecodeError> {
    let start = r.position();
    let kind = r.u16()?;
    let len = usize::from(r.u16()?);
    if kind != OFPMT_OXM {
        return reject(
            format!("match type {kind} (only OXM, type 1, exists in OpenFlow 1.3 and 1.4)"),
            OfError::BAD_MATCH_BAD_TYPE,
        );
    }
    if len < 4 {
        return Err(DecodeError::BadLength { what: "ofp_match", len });
    }
    let tlvs = r.sub(len - 4, "ofp_match")?;
    let padded = len.div_ceil(8) * 8;
    r.skip(padded - len)?;
    debug_assert_eq!(r.position() - start, padded);
    decode_tlvs(tlvs)
}

/// Decodes a run of match TLVs (OXM or NXM: both share the header shape; `r` holds exactly
/// them) into an rqvs [`Match`], with every check of the module docs.
pub(crate) fn decode_tlvs(mut tlvs: Reader<'_>) -> Result<Match, DecodeError> {
    let (mut v, mut m) = (FlowKey::ZERO, FlowKey::ZERO);
    let mut read: Vec<MatchTlv> = Vec::new();
    while !tlvs.is_empty() {
        let Some(t) = read_match_tlv(&mut tlvs)? else { continue };
        // A field twice, or two views of the same bits (tcp_src and udp_src, vlan_vid and
        // vlan_tci): OVS answers DUP_FIELD.
        if t.field.get(&m) & t.mask != 0 || read.iter().any(|x| x.field == t.field) {
            return reject(format!("match field {} appears twice", t.wire()), OfError::BAD_MATCH_DUP_FIELD);
        }
        let mut mask = t.mask;
        if t.field.member == Member::NwFrag && t.value == 0 && mask == t.field.all_ones() {
            // "Not a fragment" is 0/1 in rqvs (nw_frag=no) and 0/3 in OVS: the same packets,
            // as a later fragment is also a fragment.
            mask = u128::from(FLOW_NW_FRAG_ANY);
        }
        t.field.set_masked(&mut v, &mut m, t.value, mask);
        if matches!(t.field.member, Member::TpSrc | Member::TpDst) && t.field.bits == 8 {
            // ICMP type and code are matched over the whole tp_src/tp_dst, as ofctl reads them.
            t.field.member.set(&mut m, u128::from(u16::MAX));
        }
        read.push(t);
    }
    // Prerequisites, field by field (OpenFlow 1.3 table 11, OVS's mf_are_prereqs_ok).
    for t in &read {
        if !t.field.prereq.satisfied(&v, &m) {
            return reject(
                format!("match field {} needs {}", t.wire(), t.field.prereq.describe()),
                OfError::BAD_MATCH_BAD_PREREQ,
            );
        }
    }
    if let Some(f) = field::unmet_prerequisite(&v, &m) {
        return reject(format!("match field {} needs {}", f.name, f.prereq.describe()), OfError::BAD_MATCH_BAD_PREREQ);
    }
    // "No VLAN" exact is vlan_tci=0/0xffff in rqvs and OVS (dl_vlan=0xffff).
    if v.vlan_tci == 0 && m.vlan_tci == VLAN_CFI | VLAN_VID_MASK {
        m.vlan_tci = u16::MAX;
    }
    Match::new(v, m, rqvs_flow::PortRange::ANY, rqvs_flow::PortRange::ANY)
        .map_err(|e| DecodeError::Unsupported { what: e.to_string(), error: OfError::BAD_MATCH_BAD_WILDCARDS })
}

/// Every match field rqvs reads, as [`encode_match`] writes it (each field of the table once,
/// in the table's order): class, field number, experimenter id, payload bytes without a mask,
/// and whether it may be masked. TABLE_FEATURES' MATCH and WILDCARDS lists.
pub(crate) fn match_fields() -> impl Iterator<Item = (u16, u8, Option<u32>, usize, bool)> {
    field::FIELDS.iter().map(|f| {
        let (class, code, experimenter) = code_of_field(f);
        (class, code, experimenter, oxm_bytes(f), f.maskable == Maskable::Bitwise)
    })
}

/// The class, field number, experimenter id and payload bytes the codec writes table field
/// `f` with (TABLE_FEATURES' SETFIELD lists).
pub(crate) fn table_field_code(f: &TField) -> (u16, u8, Option<u32>, usize) {
    let (class, code, experimenter) = code_of_field(f);
    (class, code, experimenter, oxm_bytes(f))
}

/// Writes one match TLV of `f`: `value`, and `mask` unless it is all ones over the field.
fn put_field(w: &mut Writer, f: &TField, code: (u16, u8, Option<u32>), bytes: usize, value: u128, mask: u128) {
    let (class, c, experimenter) = code;
    let has_mask = mask != f.all_ones();
    let payload = if has_mask { 2 * bytes } else { bytes };
    let len = payload + if experimenter.is_some() { 4 } else { 0 };
    w.u32(u32::from(class) << 16 | u32::from(c) << 9 | u32::from(has_mask) << 8 | len as u32);
    if let Some(e) = experimenter {
        w.u32(e);
    }
    w.put(&value.to_be_bytes()[16 - bytes..]);
    if has_mask {
        w.put(&mask.to_be_bytes()[16 - bytes..]);
    }
}

/// The order Open vSwitch writes match fields in (`nx_put_raw`); VLAN is written apart.
const ENCODE_ORDER: &[&str] = &[
    "in_port",
    "dl_src",
    "dl_dst",
    "dl_type",
    "vlan",
    "nw_src",
    "nw_dst",
    "ipv6_src",
    "ipv6_dst",
    "ip_frag",
    "ip_dscp",
    "nw_ecn",
    "nw_ttl",
    "ipv6_label",
    "nw_proto",
    "tcp_src",
    "tcp_dst",
    "tcp_flags",
    "udp_src",
    "udp_dst",
    "sctp_src",
    "sctp_dst",
    "icmp_type",
    "icmp_code",
    "icmpv6_type",
    "icmpv6_code",
    "nd_target",
    "nd_sll",
    "nd_tll",
    "arp_op",
    "arp_spa",
    "arp_tpa",
    "arp_sha",
    "arp_tha",
    "metadata",
];

/// Writes the TLVs of `m` (no `ofp_match` header): what [`encode_match`] wraps, in the order
/// Open vSwitch writes them. Each examined bit goes out as the field whose prerequisites the
/// match meets (`tp_src` is `tcp_src` under TCP, `icmpv6_type` under ICMPv6); a bit no field
/// can carry (a port without its protocol, a masked `in_port`) is an error naming it.
pub(crate) fn encode_fields(m: &Match, w: &mut Writer, dialect: Dialect) -> Result<(), EncodeError> {
    if m.has_port_ranges() {
        let (s, d) = (m.tp_src_range(), m.tp_dst_range());
        return enc_err(format!(
            "port ranges tp_src={}-{} tp_dst={}-{} are not one value/mask each: split the match with Match::expand_port_ranges first (FlowMod::from_rule does)",
            s.lo, s.hi, d.lo, d.hi
        ));
    }
    let (v, k) = (m.value(), m.mask());
    // The bits written so far (as a mask).
    let mut covered = FlowKey::ZERO;
    for &name in ENCODE_ORDER {
        if name == "vlan" {
            encode_vlan(v, k, w, dialect);
            covered.vlan_tci = k.vlan_tci;
            continue;
        }
        let f = TField::by_name(name).expect("ENCODE_ORDER names table fields");
        let mut mask = f.get(k);
        if mask == 0 || f.get(&covered) != 0 || !f.prereq.satisfied(v, k) {
            continue;
        }
        let mut value = f.get(v);
        let icmp = matches!(f.member, Member::TpSrc | Member::TpDst) && f.bits == 8;
        if icmp {
            // Exact over tp_src/tp_dst, the value one byte.
            if f.member.get(k) != u128::from(u16::MAX) || f.member.get(v) > 0xff {
                return enc_err(format!("{name}: must be exact and at most 255"));
            }
            f.member.set(&mut covered, u128::from(u16::MAX));
        }
        if f.member == Member::NwFrag && value == 0 && mask == u128::from(FLOW_NW_FRAG_ANY) {
            // nw_frag=no (0/1) goes as OVS sends it: exact 0.
            mask = f.all_ones();
        }
        if !f.mask_ok(mask) {
            return enc_err(format!("{name} cannot be masked in OpenFlow (mask {mask:#x})"));
        }
        if f.member == Member::InPort {
            if dialect == Dialect::Nxm {
                // NXM_OF_IN_PORT is OpenFlow 1.0's 16-bit port, rqvs's own numbering.
                if value > 0xffff {
                    return enc_err(format!("in_port {value} has no OpenFlow 1.0 number (above 0xffff)"));
                }
            } else {
                let Some(p) = port_to_of(value as u32) else {
                    return enc_err(format!("in_port {value} has no OpenFlow 1.3 number (above 0xffff)"));
                };
                value = p.into();
            }
        }
        let mut ignored = FlowKey::ZERO;
        f.set_masked(&mut ignored, &mut covered, 0, f.get(k));
        if dialect == Dialect::Nxm && f.name == "ip_dscp" {
            // NXM has no ip_dscp: OpenFlow 1.0's nw_tos, the DSCP in place.
            w.u32(u32::from(field::NXM_OF) << 16 | u32::from(NXM_OF_IP_TOS) << 9 | 1);
            w.u8((value as u8) << 2);
            continue;
        }
        let (code, bytes) = dialect_code(f, dialect);
        put_field(w, f, code, bytes, value, mask);
    }
    if let Some(member) = k.first_bits_outside(&covered) {
        return enc_err(format!(
            "{member} is matched but no OpenFlow field can carry it in this match: its protocol is not matched (tp_src/tp_dst need tcp, udp, sctp, icmp or icmp6; nw_src/nw_dst ip or arp; ipv6_* ipv6; nd_* icmp6 neighbour discovery)"
        ));
    }
    Ok(())
}

/// Writes the VLAN fields as OVS does in OXM: VLAN_VID (`OFPVID_PRESENT` is the CFI bit) and
/// VLAN_PCP when the PCP is matched whole over a present tag; any other `vlan_tci` mask goes
/// whole as `NXM_OF_VLAN_TCI` (which OVS reads in 1.3), rather than dropping bits as OVS's
/// own encoder does.
fn encode_vlan(v: &FlowKey, k: &FlowKey, w: &mut Writer, dialect: Dialect) {
    if k.vlan_tci == 0 {
        return;
    }
    if dialect == Dialect::Nxm {
        // NXM has only NXM_OF_VLAN_TCI (OVS's nx_put_raw).
        let tci = TField::by_name("vlan_tci").expect("vlan_tci");
        put_field(w, tci, code_of_field(tci), 2, v.vlan_tci.into(), k.vlan_tci.into());
        return;
    }
    let vid_bits = VLAN_CFI | VLAN_VID_MASK;
    let vid = TField::by_name("vlan_vid").expect("vlan_vid");
    let none_exact = v.vlan_tci == 0 && k.vlan_tci == u16::MAX;
    let (vm, pm) = if none_exact { (vid_bits, 0) } else { (k.vlan_tci & vid_bits, k.vlan_tci & VLAN_PCP_MASK) };
    if pm != 0 && (pm != VLAN_PCP_MASK || v.vlan_tci & vm & VLAN_CFI == 0) {
        let tci = TField::by_name("vlan_tci").expect("vlan_tci");
        put_field(w, tci, code_of_field(tci), 2, v.vlan_tci.into(), k.vlan_tci.into());
        return;
    }
    if vm != 0 {
        put_field(w, vid, code_of_field(vid), 2, u128::from(v.vlan_tci & vm), u128::from(vm));
    }
    if pm != 0 {
        let pcp = TField::by_name("vlan_pcp").expect("vlan_pcp");
        put_field(w, pcp, code_of_field(pcp), 1, u128::from(v.vlan_tci >> 13), 7);
    }
}

/// Writes `m` as an `ofp_match` (header, TLVs, zeros to a multiple of 8).
pub fn encode_match(m: &Match, w: &mut Writer) -> Result<(), EncodeError> {
    let start = w.len();
    w.u16(OFPMT_OXM);
    w.u16(0);
    encode_fields(m, w, Dialect::Oxm)?;
    let len = w.len() - start;
    w.patch_u16(start + 2, len as u16);
    w.pad8();
    Ok(())
}

/// Reads the OXM TLV of a `SET_FIELD` action over the field table: the field and its value
/// (an `in_port` in rqvs's numbering). A mask (OpenFlow 1.5), a field OVS does not write
/// (`eth_type`, `ip_proto`, `ip_frag`, `tcp_flags`) or one rqvs lacks is an error naming it.
pub(crate) fn read_set_field(r: &mut Reader<'_>) -> Result<(&'static TField, u128), DecodeError> {
    let Some(t) = read_match_tlv(r)? else {
        return reject("set_field of packet_type", OfError::BAD_ACTION_BAD_SET_TYPE);
    };
    if t.mask != t.field.all_ones() {
        return reject(
            format!("set_field of {} with a mask (OpenFlow 1.5)", t.wire()),
            OfError::BAD_ACTION_BAD_SET_ARGUMENT,
        );
    }
    if !field_is_writable(t.field) {
        return reject(format!("set_field of {}: the field is read-only", t.wire()), OfError::BAD_ACTION_BAD_SET_TYPE);
    }
    Ok((t.field, t.value))
}

/// Can `set_field` write `f`? Every field of the table but those OVS marks read-only
/// (`eth_type`, `ip_proto`, `ip_frag`, `tcp_flags`) and `vlan_tci` (no OXM code).
pub fn field_is_writable(f: &TField) -> bool {
    !matches!(f.name, "dl_type" | "nw_proto" | "ip_frag" | "tcp_flags" | "vlan_tci")
}

/// Writes the OXM TLV of a `SET_FIELD` of table field `f` to `value` (unmasked; an `in_port`
/// in rqvs's numbering is written as OpenFlow 1.3's).
pub(crate) fn put_set_table_field(w: &mut Writer, f: &TField, value: u128) -> Result<(), EncodeError> {
    if !field_is_writable(f) {
        return enc_err(format!("set_field of {}: the field is read-only", f.name));
    }
    if value & !f.all_ones() != 0 {
        return enc_err(format!("set_field:{value:#x}->{}: above the field's {} bits", f.name, f.bits));
    }
    let mut v = value;
    if f.member == Member::InPort {
        let Some(p) = port_to_of(value as u32) else {
            return enc_err(format!("set_field in_port {value}: no OpenFlow 1.3 number"));
        };
        v = p.into();
    }
    put_field(w, f, code_of_field(f), oxm_bytes(f), v, f.all_ones());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rqvs_flow::formats::ofctl;
    use rqvs_flow::key::*;

    fn m(text: &str) -> Match {
        ofctl::parse_flow("test", 1, &format!("{text},actions=drop"), 0).unwrap().matches
    }

    fn round(mt: &Match) -> Match {
        let mut w = Writer::new();
        encode_match(mt, &mut w).unwrap();
        assert_eq!(w.len() % 8, 0);
        let mut r = Reader::new(&w.bytes, "t");
        let back = decode_match(&mut r).unwrap();
        assert!(r.is_empty());
        back
    }

    #[test]
    fn ofctl_matches_round_trip() {
        for t in [
            "priority=1",
            "in_port=3",
            "in_port=LOCAL",
            "dl_src=01:02:03:04:05:06,dl_dst=0a:00:00:00:00:00/ff:00:00:00:00:00",
            "dl_vlan=7",
            "dl_vlan=0xffff",
            "vlan_tci=0x1000/0x1000,dl_vlan_pcp=3",
            "dl_vlan=5,dl_vlan_pcp=6",
            "ip,nw_src=10.0.0.0/8,nw_dst=1.2.3.4,nw_tos=8,nw_frag=later",
            "tcp,tp_src=0x1000/0xf000,tp_dst=80,tcp_flags=+syn-ack",
            "udp,tp_dst=53",
            "sctp,tp_src=9",
            "icmp,icmp_type=3,icmp_code=1",
            "arp,arp_op=2,arp_spa=10.0.0.0/8,arp_tpa=1.1.1.1",
            "dl_type=0x88cc",
            "ipv6",
            "ipv6,ipv6_src=2001:db8::/32,ipv6_dst=::1,ipv6_label=0x12345,nw_tos=8,nw_ecn=1,nw_ttl=3,nw_frag=first",
            "ipv6,ipv6_src=2001:db8::/ffff:0:ffff::",
            "tcp6,tp_src=1024/0xfc00,tp_dst=443,tcp_flags=+syn",
            "udp6,udp_dst=53",
            "sctp6,tp_dst=7",
            "icmp6,icmp_type=1,icmp_code=4",
            "icmp6,icmp_type=135,icmp_code=0,nd_target=fe80::1,nd_sll=01:02:03:04:05:06",
            "icmp6,icmp_type=136,icmp_code=0,nd_target=fe80::/10,nd_tll=01:02:03:00:00:00/ff:ff:ff:00:00:00",
            "arp,arp_sha=01:02:03:04:05:06,arp_tha=0a:00:00:00:00:00/ff:00:00:00:00:00",
            "rarp,arp_op=3",
            "metadata=0x5/0xf",
            "metadata=0xfedcba9876543210,in_port=7",
            "vlan_tci=0x2000/0x2000",
            "vlan_tci=0x0000",
        ] {
            let mt = m(t);
            assert_eq!(round(&mt), mt, "{t}");
        }
    }

    fn tlvs(bytes: &[u8]) -> Result<Match, DecodeError> {
        let mut w = Writer::new();
        w.u16(1);
        w.u16(4 + bytes.len() as u16);
        w.put(bytes);
        w.pad8();
        decode_match(&mut Reader::new(&w.bytes, "t"))
    }

    fn code(r: Result<Match, DecodeError>) -> OfError {
        r.unwrap_err().of_error()
    }

    #[test]
    fn decoding_checks() {
        let eth_ip = [0x80, 0, 0x0a, 2, 0x08, 0x00];
        // ipv4_src without eth_type.
        assert_eq!(code(tlvs(&[0x80, 0, 0x16, 4, 1, 2, 3, 4])), OfError::BAD_MATCH_BAD_PREREQ);
        // eth_type twice.
        assert_eq!(code(tlvs(&[eth_ip, eth_ip].concat())), OfError::BAD_MATCH_DUP_FIELD);
        // ipv4_src 1.2.3.4/255.0.0.0: bits outside the mask.
        let bad = [&eth_ip[..], &[0x80, 0, 0x17, 8, 1, 2, 3, 4, 255, 0, 0, 0]].concat();
        assert_eq!(code(tlvs(&bad)), OfError::BAD_MATCH_BAD_WILDCARDS);
        // ipv6_src without eth_type=0x86dd: named, a prerequisite.
        let e = tlvs(&[&[0x80u8, 0, 0x34, 16][..], &[0u8; 16]].concat()).unwrap_err();
        assert_eq!(e.of_error(), OfError::BAD_MATCH_BAD_PREREQ);
        assert!(e.to_string().contains("ipv6_src"), "{e}");
        // ... and with it, accepted.
        let eth_ip6 = [0x80, 0, 0x0a, 2, 0x86, 0xdd];
        let ok = tlvs(&[&eth_ip6[..], &[0x80u8, 0, 0x34, 16], &[0x20, 1, 0x0d, 0xb8], &[0u8; 12]].concat()).unwrap();
        assert_eq!(ok.value().ipv6_src, 0x2001_0db8u128 << 96);
        // metadata accepted (maskable); register 0 (NXM_NX 0), tunnel id unsupported, named.
        assert_eq!(
            tlvs(&[0x80, 0, 0x05, 16, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0xf]).unwrap().mask().metadata,
            0xf
        );
        assert_eq!(code(tlvs(&[0x00, 1, 0x00, 4, 0, 0, 0, 0])), OfError::BAD_MATCH_BAD_FIELD);
        let e = tlvs(&[0x80, 0, 0x4c, 8, 0, 0, 0, 0, 0, 0, 0, 5]).unwrap_err();
        assert!(e.to_string().contains("tunnel_id"), "{e}");
        // ip_dscp may not be masked; nd_target without ICMPv6 ND.
        let masked_dscp = [&eth_ip[..], &[0x80, 0, 0x11, 2, 1, 0x3f]].concat();
        assert_eq!(code(tlvs(&masked_dscp)), OfError::BAD_MATCH_BAD_MASK);
        let icmp6 = [&eth_ip6[..], &[0x80, 0, 0x14, 1, 58], &[0x80, 0, 0x3a, 1, 128]].concat();
        let nd = [&icmp6[..], &[0x80, 0, 0x3e, 16], &[0u8; 16]].concat();
        let e = tlvs(&nd).unwrap_err();
        assert_eq!(e.of_error(), OfError::BAD_MATCH_BAD_PREREQ, "{e}");
        assert!(e.to_string().contains("ipv6_nd_target"), "{e}");
        // vlan_vid above 0x1fff; arp_op above 255 (rqvs keeps 8 bits); ipv6_flabel above 20 bits.
        assert_eq!(code(tlvs(&[0x80, 0, 0x0c, 2, 0x20, 0])), OfError::BAD_MATCH_BAD_VALUE);
        let eth_arp = [0x80, 0, 0x0a, 2, 0x08, 0x06];
        assert_eq!(code(tlvs(&[&eth_arp[..], &[0x80, 0, 0x2a, 2, 1, 0]].concat())), OfError::BAD_MATCH_BAD_VALUE);
        let label = [&eth_ip6[..], &[0x80, 0, 0x38, 4, 0, 0x10, 0, 0]].concat();
        assert_eq!(code(tlvs(&label)), OfError::BAD_MATCH_BAD_VALUE);
        // packet_type: Ethernet (what OVS sends for matches OXM cannot say) is no condition;
        // another packet type is refused.
        assert_eq!(tlvs(&[0x80, 0, 0x58, 4, 0, 0, 0, 0]).unwrap(), Match::from_masked(FlowKey::ZERO, FlowKey::ZERO));
        assert_eq!(code(tlvs(&[0x80, 0, 0x58, 4, 0, 1, 0x08, 0])), OfError::BAD_MATCH_BAD_VALUE);
        // tcp_src and udp_src together: the same bits twice.
        let both =
            [&eth_ip[..], &[0x80, 0, 0x14, 1, 6], &[0x80, 0, 0x1a, 2, 0, 80], &[0x80, 0, 0x1e, 2, 0, 80]].concat();
        assert_eq!(code(tlvs(&both)), OfError::BAD_MATCH_DUP_FIELD);
        // vlan_pcp without vlan_vid.
        assert_eq!(code(tlvs(&[0x80, 0, 0x0e, 1, 3])), OfError::BAD_MATCH_BAD_PREREQ);
        // in_port with a mask; in_port with 3 bytes.
        assert_eq!(code(tlvs(&[0x80, 0, 0x01, 8, 0, 0, 0, 1, 0, 0, 0, 1])), OfError::BAD_MATCH_BAD_MASK);
        assert_eq!(code(tlvs(&[0x80, 0, 0x00, 3, 0, 0, 1, 0])), OfError::BAD_MATCH_BAD_LEN);
        // tcp_src with ip_proto udp.
        let t = [&eth_ip[..], &[0x80, 0, 0x14, 1, 17], &[0x80, 0, 0x1a, 2, 0, 80]].concat();
        assert_eq!(code(tlvs(&t)), OfError::BAD_MATCH_BAD_PREREQ);
        // match type 0.
        assert_eq!(code(decode_match(&mut Reader::new(&[0, 0, 0, 4, 0, 0, 0, 0], "t"))), OfError::BAD_MATCH_BAD_TYPE);
    }

    #[test]
    fn unexpressible_matches_are_encode_errors() {
        let ranged = Match::new(
            FlowKey { dl_type: ETH_TYPE_IP, nw_proto: 6, ..FlowKey::default() },
            FlowKey { dl_type: u16::MAX, nw_proto: u8::MAX, ..FlowKey::default() },
            rqvs_flow::PortRange::new(1024, 65535).unwrap(),
            rqvs_flow::PortRange::ANY,
        )
        .unwrap();
        let e = encode_match(&ranged, &mut Writer::new()).unwrap_err();
        assert!(e.0.contains("tp_src=1024-65535"), "{e}");
        let parts = ranged.expand_port_ranges();
        assert_eq!(parts.len(), 6);
        for p in parts {
            assert_eq!(round(&p), p);
        }
        // tp_dst without a protocol, a masked in_port: no OpenFlow field carries them.
        let mut k = FlowKey::default();
        k.tp_dst = 0xffff;
        let e = encode_match(&Match::from_masked(FlowKey::default(), k), &mut Writer::new()).unwrap_err();
        assert!(e.0.contains("tp_dst"), "{e}");
        let mut k = FlowKey::default();
        k.in_port = 0xff;
        assert!(encode_match(&Match::from_masked(FlowKey::default(), k), &mut Writer::new()).is_err());
    }

    /// What TABLE_FEATURES lists is what the decoder reads: each listed id, with a zero value
    /// (and a zero mask where maskable), is read as a field of the table.
    #[test]
    fn every_listed_match_field_is_read() {
        let mut n = 0;
        for (class, code, experimenter, width, maskable) in match_fields() {
            let payload = width * (1 + usize::from(maskable));
            let mut w = Writer::new();
            let len = payload + if experimenter.is_some() { 4 } else { 0 };
            w.u32(u32::from(class) << 16 | u32::from(code) << 9 | u32::from(maskable) << 8 | len as u32);
            if let Some(e) = experimenter {
                w.u32(e);
            }
            w.zeros(payload);
            let t = read_match_tlv(&mut Reader::new(&w.bytes, "t")).unwrap().expect("a field");
            assert_eq!(oxm_bytes(t.field), width, "{}", t.wire());
            n += 1;
        }
        assert_eq!(n, rqvs_flow::field::FIELDS.len());
    }

    #[test]
    fn a_vlan_tci_mask_oxm_cannot_say_goes_as_nxm_vlan_tci() {
        let mt = m("vlan_tci=0x2000/0x2000");
        let mut w = Writer::new();
        encode_match(&mt, &mut w).unwrap();
        // NXM_OF_VLAN_TCI, masked, 4 payload bytes.
        assert_eq!(&w.bytes[4..12], &[0x00, 0x00, 0x09, 0x04, 0x20, 0x00, 0x20, 0x00]);
        assert_eq!(round(&mt), mt);
    }

    proptest! {
        /// Random matches over every field of the table encode and decode back equal.
        #[test]
        fn wide_matches_round_trip(
            ctx in 0u8..30,
            picks in proptest::collection::vec(any::<(bool, u128, u128, u8)>(), rqvs_flow::field::FIELDS.len()),
        ) {
            let mt = rqvs_testkit::wide_match(ctx, &picks);
            let mut w = Writer::new();
            encode_match(&mt, &mut w).map_err(|e| TestCaseError::fail(format!("{mt:?}: {e}")))?;
            let back = decode_match(&mut Reader::new(&w.bytes, "t"))
                .map_err(|e| TestCaseError::fail(format!("{mt:?}: {e}")))?;
            prop_assert_eq!(back, mt);
        }
        /// Random TLVs (known classes and codes, random sizes, masks and bytes) never panic the
        /// decoder; what it accepts encodes to bytes it decodes to the same match.
        #[test]
        fn random_tlvs_decode_or_fail_cleanly(
            tlvs_in in proptest::collection::vec(
                (0usize..4, 0u8..48, any::<bool>(), 0usize..34, proptest::collection::vec(any::<u8>(), 34)),
                0..6,
            ),
        ) {
            let mut body = Vec::new();
            for (class, code, masked, len, bytes) in tlvs_in {
                let class = [OFPXMC_OPENFLOW_BASIC, 0, 1, OFPXMC_EXPERIMENTER][class];
                let header = u32::from(class) << 16 | u32::from(code) << 9 | u32::from(masked) << 8 | len as u32;
                body.extend_from_slice(&header.to_be_bytes());
                body.extend_from_slice(&bytes[..len]);
            }
            if let Ok(mt) = tlvs(&body) {
                let back = round(&mt);
                prop_assert_eq!(back, mt);
            }
        }
    }
}
