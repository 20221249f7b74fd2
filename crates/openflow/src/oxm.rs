//! `ofp_match` (type `OFPMT_OXM`) ↔ [`rqvs_flow::Match`] (OpenFlow 1.3 §7.2.2, 1.4 §7.2.3).
//!
//! An `ofp_match` is `type` (1, OXM), `length` (the header and the TLVs, not the padding), OXM
//! TLVs, then zeros up to a multiple of 8. Each TLV is a 32-bit header — class (16 bits), field
//! (7), has-mask (1), payload length (8) — and the value (then the mask, when has-mask is set).
//!
//! **Fields.** `OFPXMC_OPENFLOW_BASIC` (0x8000): IN_PORT, ETH_DST/ETH_SRC (maskable),
//! ETH_TYPE, VLAN_VID (maskable, with `OFPVID_PRESENT`) and VLAN_PCP, IP_DSCP and IP_ECN (the two
//! halves of `nw_tos`), IP_PROTO, IPV4_SRC/DST (maskable), TCP/UDP/SCTP_SRC/DST (maskable, an
//! extension OVS also accepts and sends for `tp_src=0x1000/0xf000`), ICMPV4_TYPE/CODE, ARP_OP,
//! ARP_SPA/ARP_TPA (maskable; rqvs keeps them in `nw_proto`, `nw_src`, `nw_dst` as OVS does).
//! Open vSwitch's extensions, which `ovs-ofctl` sends in OpenFlow 1.3 and 1.4 matches:
//! `NXM_NX_IP_FRAG` (class 0x0001, field 26, maskable) for `nw_frag`, and for `tcp_flags`
//! `ONFOXM_ET_TCP_FLAGS` (experimenter class 0xffff, ONF experimenter 0x4f4e4600, field 42,
//! maskable) — what OVS 3.1 sends in 1.3 and 1.4 (checked against a capture). Decoding also
//! accepts `NXM_NX_TCP_FLAGS` (class 0x0001, field 34) and 1.5's `OXM_OF_TCP_FLAGS` (0x8000, 42).
//! Any other field (IPv6, ARP hardware addresses, MPLS, PBB, tunnels, metadata, registers) is
//! [`DecodeError::Unsupported`] with `BAD_MATCH_BAD_FIELD`, naming it.
//!
//! **Checks on decoding** (answered with the OpenFlow error in brackets): a field twice
//! (`DUP_FIELD`); a mask on a field that has none (`BAD_MASK`); a payload of the wrong size
//! (`BAD_LEN`); value bits outside the mask (`BAD_WILDCARDS`); values too wide for the field
//! (VLAN_VID above 0x1fff, VLAN_PCP above 7, ...) (`BAD_VALUE`); prerequisites as the spec lists
//! them (IPV4_SRC needs ETH_TYPE=0x0800, TCP_SRC needs IP_PROTO=6, VLAN_PCP needs a VLAN
//! present, ...) (`BAD_PREREQ`). ETH_TYPE=0x86dd is unsupported (`BAD_VALUE`), as in
//! `ofctl::parse_flow` (rqvs parses IPv6 only as far as `dl_type`), and so are IP fields over it
//! (`BAD_FIELD`). Malformed TLVs that cannot be walked (a length past the match) are
//! [`DecodeError::BadLength`] / [`DecodeError::Truncated`].
//!
//! **Ports.** OpenFlow 1.3 port numbers are 32-bit; rqvs numbers ports as OpenFlow 1.0 and OVS
//! do (16-bit, `LOCAL` = 0xfffe): the reserved ports 0xffffff00.. map to 0xff00.., and a 1.3
//! port between 0xff00 and 0xfffffeff has no rqvs number (BAD_VALUE). See [`port_from_of`].
//!
//! **VLAN.** `vlan_tci`'s CFI bit is OVS's "VLAN present", which is `OFPVID_PRESENT` (0x1000)
//! of VLAN_VID: VLAN_VID's value/mask are `vlan_tci`'s low 13 bits, VLAN_PCP its top 3. "No
//! VLAN" (VLAN_VID = `OFPVID_NONE` exact) decodes to `vlan_tci=0/0xffff`, what `dl_vlan=0xffff`
//! means in rqvs and OVS. A `vlan_tci` mask that OXM cannot say (a partial PCP mask, PCP without
//! a present VLAN) is an [`EncodeError`].
//!
//! **Port ranges.** OXM has no ranges. [`encode_match`] refuses a [`Match`] with a port range
//! that is not the whole port space (the error names it); callers first split the match with
//! [`Match::expand_port_ranges`] — the expansion `ofctl::format_flows` writes one line per
//! element of — as [`crate::flow_mod::FlowMod::from_rule`] does.

use rqvs_flow::key::{
    ETH_TYPE_ARP, ETH_TYPE_IP, ETH_TYPE_IPV6, FLOW_NW_FRAG_ANY, FLOW_NW_FRAG_LATER, IPPROTO_ICMP, IPPROTO_SCTP,
    IPPROTO_TCP, IPPROTO_UDP, TCP_FLAGS_MASK, VLAN_CFI, VLAN_PCP_MASK, VLAN_VID_MASK,
};
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

/// The fields rqvs maps (one bit each in the duplicate check).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Field {
    InPort,
    EthDst,
    EthSrc,
    EthType,
    VlanVid,
    VlanPcp,
    IpDscp,
    IpEcn,
    IpProto,
    Ipv4Src,
    Ipv4Dst,
    TcpSrc,
    TcpDst,
    UdpSrc,
    UdpDst,
    SctpSrc,
    SctpDst,
    Icmpv4Type,
    Icmpv4Code,
    ArpOp,
    ArpSpa,
    ArpTpa,
    IpFrag,
    TcpFlags,
}

impl Field {
    /// Every field, in OpenFlow basic order, then the extensions.
    pub(crate) const ALL: [Field; 24] = [
        Field::InPort,
        Field::EthDst,
        Field::EthSrc,
        Field::EthType,
        Field::VlanVid,
        Field::VlanPcp,
        Field::IpDscp,
        Field::IpEcn,
        Field::IpProto,
        Field::Ipv4Src,
        Field::Ipv4Dst,
        Field::TcpSrc,
        Field::TcpDst,
        Field::UdpSrc,
        Field::UdpDst,
        Field::SctpSrc,
        Field::SctpDst,
        Field::Icmpv4Type,
        Field::Icmpv4Code,
        Field::ArpOp,
        Field::ArpSpa,
        Field::ArpTpa,
        Field::IpFrag,
        Field::TcpFlags,
    ];

    /// The value's size in bytes and whether a mask may follow.
    pub(crate) fn shape(self) -> (usize, bool) {
        use Field::*;
        match self {
            InPort => (4, false),
            EthDst | EthSrc => (6, true),
            EthType => (2, false),
            VlanVid => (2, true),
            VlanPcp | IpDscp | IpEcn | IpProto | Icmpv4Type | Icmpv4Code => (1, false),
            Ipv4Src | Ipv4Dst | ArpSpa | ArpTpa => (4, true),
            TcpSrc | TcpDst | UdpSrc | UdpDst | SctpSrc | SctpDst => (2, true),
            ArpOp => (2, false),
            IpFrag => (1, true),
            TcpFlags => (2, true),
        }
    }

    /// The OXM name (as the spec and `ovs-ofctl` spell it).
    pub(crate) fn name(self) -> &'static str {
        use Field::*;
        match self {
            InPort => "in_port",
            EthDst => "eth_dst",
            EthSrc => "eth_src",
            EthType => "eth_type",
            VlanVid => "vlan_vid",
            VlanPcp => "vlan_pcp",
            IpDscp => "ip_dscp",
            IpEcn => "ip_ecn",
            IpProto => "ip_proto",
            Ipv4Src => "ipv4_src",
            Ipv4Dst => "ipv4_dst",
            TcpSrc => "tcp_src",
            TcpDst => "tcp_dst",
            UdpSrc => "udp_src",
            UdpDst => "udp_dst",
            SctpSrc => "sctp_src",
            SctpDst => "sctp_dst",
            Icmpv4Type => "icmpv4_type",
            Icmpv4Code => "icmpv4_code",
            ArpOp => "arp_op",
            ArpSpa => "arp_spa",
            ArpTpa => "arp_tpa",
            IpFrag => "ip_frag (NXM_NX_IP_FRAG)",
            TcpFlags => "tcp_flags",
        }
    }

    fn basic(self) -> Option<u8> {
        use Field::*;
        Some(match self {
            InPort => 0,
            EthDst => 3,
            EthSrc => 4,
            EthType => 5,
            VlanVid => 6,
            VlanPcp => 7,
            IpDscp => 8,
            IpEcn => 9,
            IpProto => 10,
            Ipv4Src => 11,
            Ipv4Dst => 12,
            TcpSrc => 13,
            TcpDst => 14,
            UdpSrc => 15,
            UdpDst => 16,
            SctpSrc => 17,
            SctpDst => 18,
            Icmpv4Type => 19,
            Icmpv4Code => 20,
            ArpOp => 21,
            ArpSpa => 22,
            ArpTpa => 23,
            IpFrag | TcpFlags => return None,
        })
    }

    fn from_basic(f: u8) -> Option<Field> {
        if f == 42 {
            return Some(Field::TcpFlags);
        }
        Field::ALL.into_iter().find(|x| x.basic() == Some(f))
    }

    /// The class, field number and experimenter id the encoder writes the field with: the
    /// OpenFlow basic class; `NXM_NX_IP_FRAG` for `nw_frag`; for `tcp_flags`
    /// `ONFOXM_ET_TCP_FLAGS`, as OVS sends it in 1.3 and 1.4.
    pub(crate) fn oxm_class(self) -> (u16, u8, Option<u32>) {
        match self.basic() {
            Some(f) => (OFPXMC_OPENFLOW_BASIC, f, None),
            None if self == Field::IpFrag => (OFPXMC_NXM_1, 26, None),
            None => (OFPXMC_EXPERIMENTER, 42, Some(ONF_EXPERIMENTER_ID)),
        }
    }
}

/// The name of an OpenFlow basic field rqvs does not have.
fn basic_field_name(f: u8) -> String {
    const NAMES: [&str; 42] = [
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
    ];
    NAMES.get(usize::from(f)).map_or_else(|| format!("OXM basic field {f}"), |n| (*n).to_string())
}

/// One OXM TLV as read: which field, its value and its mask (all ones when there was none).
#[derive(Clone, Debug)]
pub(crate) struct Oxm<'a> {
    pub field: Field,
    pub value: &'a [u8],
    pub mask: Option<&'a [u8]>,
}

/// Reads one TLV from `r`; errors name unknown fields, wrong sizes and masks where none may be.
pub(crate) fn read_oxm<'a>(r: &mut Reader<'a>) -> Result<Oxm<'a>, DecodeError> {
    let header = r.u32()?;
    let class = (header >> 16) as u16;
    let field = ((header >> 9) & 0x7f) as u8;
    let has_mask = header & 0x100 != 0;
    let len = (header & 0xff) as usize;
    let mut payload = r.sub(len, "oxm_tlv")?;
    let f = match class {
        OFPXMC_OPENFLOW_BASIC => match Field::from_basic(field) {
            Some(f) => f,
            None => {
                return reject(
                    format!("match field {} is not supported by rqvs", basic_field_name(field)),
                    OfError::BAD_MATCH_BAD_FIELD,
                )
            }
        },
        OFPXMC_NXM_1 if field == 26 => Field::IpFrag,
        OFPXMC_NXM_1 if field == 34 => Field::TcpFlags,
        OFPXMC_EXPERIMENTER => {
            let exp = payload.u32().map_err(|_| DecodeError::Unsupported {
                what: "experimenter OXM shorter than its experimenter id".into(),
                error: OfError::BAD_MATCH_BAD_LEN,
            })?;
            if exp == ONF_EXPERIMENTER_ID && field == 42 {
                Field::TcpFlags
            } else {
                return reject(
                    format!("experimenter match field {field} of experimenter {exp:#010x} is not supported by rqvs"),
                    OfError::BAD_MATCH_BAD_FIELD,
                );
            }
        }
        0x0000 => {
            return reject(format!("NXM_OF match field {field} is not supported by rqvs"), OfError::BAD_MATCH_BAD_FIELD)
        }
        0x0001 => {
            return reject(
                format!("NXM_NX match field {field} is not supported by rqvs (registers, tunnels, IPv6, ...)"),
                OfError::BAD_MATCH_BAD_FIELD,
            )
        }
        _ => {
            return reject(
                format!("match field class {class:#06x} field {field} is not supported by rqvs"),
                OfError::BAD_MATCH_BAD_FIELD,
            )
        }
    };
    let (width, maskable) = f.shape();
    if has_mask && !maskable {
        return reject(format!("{} cannot be masked", f.name()), OfError::BAD_MATCH_BAD_MASK);
    }
    let want = if has_mask { 2 * width } else { width };
    if payload.remaining() != want {
        return reject(
            format!("{} has {} payload bytes, expected {want}", f.name(), payload.remaining()),
            OfError::BAD_MATCH_BAD_LEN,
        );
    }
    let value = payload.take(width)?;
    let mask = if has_mask { Some(payload.take(width)?) } else { None };
    Ok(Oxm { field: f, value, mask })
}

/// The bytes as a big-endian number (the low 32 bits of it: MACs are read with [`mac`]).
fn be(b: &[u8]) -> u32 {
    b.iter().fold(0u64, |a, &x| a << 8 | u64::from(x)) as u32
}

fn mac(b: &[u8]) -> [u8; 6] {
    let mut m = [0u8; 6];
    m.copy_from_slice(&b[..6]);
    m
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
    let mut tlvs = r.sub(len - 4, "ofp_match")?;
    let padded = len.div_ceil(8) * 8;
    r.skip(padded - len)?;
    debug_assert_eq!(r.position() - start, padded);
    let mut fields: Vec<Oxm<'_>> = Vec::new();
    while !tlvs.is_empty() {
        let o = read_oxm(&mut tlvs)?;
        if fields.iter().any(|x| x.field == o.field) {
            return reject(format!("match field {} appears twice", o.field.name()), OfError::BAD_MATCH_DUP_FIELD);
        }
        if let Some(m) = o.mask {
            if o.value.iter().zip(m).any(|(v, m)| v & !m != 0) {
                return reject(
                    format!("match field {} has value bits outside its mask", o.field.name()),
                    OfError::BAD_MATCH_BAD_WILDCARDS,
                );
            }
        }
        fields.push(o);
    }
    build_match(&fields)
}

fn build_match(fields: &[Oxm<'_>]) -> Result<Match, DecodeError> {
    use Field::*;
    let get = |f: Field| fields.iter().find(|o| o.field == f);
    let ones = |w: usize| if w >= 4 { u32::MAX } else { (1u32 << (8 * w)) - 1 };
    // (value, mask) of a numeric field.
    let num = |o: &Oxm<'_>| (be(o.value), o.mask.map_or(ones(o.value.len()), be));
    let mut v = FlowKey::default();
    let mut m = FlowKey::default();

    let eth_type = get(EthType).map(|o| be(o.value) as u16);
    let ip_proto = get(IpProto).map(|o| o.value[0]);
    let bad_value = |f: Field, what: &str| reject(format!("{}: {what}", f.name()), OfError::BAD_MATCH_BAD_VALUE);

    for o in fields {
        // Prerequisites (OpenFlow 1.3 table 11), one field at a time.
        let needs_ip = matches!(o.field, IpDscp | IpEcn | IpProto | IpFrag);
        let needs_ipv4 = matches!(o.field, Ipv4Src | Ipv4Dst | Icmpv4Type | Icmpv4Code);
        let needs_arp = matches!(o.field, ArpOp | ArpSpa | ArpTpa);
        let needs_proto = match o.field {
            TcpSrc | TcpDst | TcpFlags => Some(IPPROTO_TCP),
            UdpSrc | UdpDst => Some(IPPROTO_UDP),
            SctpSrc | SctpDst => Some(IPPROTO_SCTP),
            Icmpv4Type | Icmpv4Code => Some(IPPROTO_ICMP),
            _ => None,
        };
        if (needs_ip || needs_proto.is_some()) && eth_type == Some(ETH_TYPE_IPV6) {
            return reject(
                format!(
                    "match field {} over IPv6 is not supported by rqvs (IPv6 is parsed only as far as eth_type)",
                    o.field.name()
                ),
                OfError::BAD_MATCH_BAD_FIELD,
            );
        }
        if (needs_ip || needs_ipv4 || needs_proto.is_some()) && eth_type != Some(ETH_TYPE_IP) {
            return reject(
                format!("match field {} needs eth_type=0x0800", o.field.name()),
                OfError::BAD_MATCH_BAD_PREREQ,
            );
        }
        if needs_arp && eth_type != Some(ETH_TYPE_ARP) {
            return reject(
                format!("match field {} needs eth_type=0x0806", o.field.name()),
                OfError::BAD_MATCH_BAD_PREREQ,
            );
        }
        if let Some(p) = needs_proto {
            if ip_proto != Some(p) {
                return reject(
                    format!("match field {} needs ip_proto={p}", o.field.name()),
                    OfError::BAD_MATCH_BAD_PREREQ,
                );
            }
        }
        let (x, xm) = num(o);
        match o.field {
            InPort => {
                let Some(p) = port_from_of(x) else {
                    return bad_value(InPort, &format!("port {x:#x} has no rqvs number"));
                };
                v.in_port = p;
                m.in_port = u32::MAX;
            }
            EthDst => {
                v.dl_dst = mac(o.value);
                m.dl_dst = o.mask.map_or([0xff; 6], mac);
            }
            EthSrc => {
                v.dl_src = mac(o.value);
                m.dl_src = o.mask.map_or([0xff; 6], mac);
            }
            EthType => {
                if x == u32::from(ETH_TYPE_IPV6) {
                    // As ofctl::parse_flow: rqvs parses IPv6 only as far as dl_type.
                    return bad_value(EthType, "0x86dd (IPv6) is not supported by rqvs");
                }
                v.dl_type = x as u16;
                m.dl_type = u16::MAX;
            }
            VlanVid => {
                let xm = if o.mask.is_some() { xm } else { u32::from(VLAN_CFI | VLAN_VID_MASK) };
                if (x | xm) & !u32::from(VLAN_CFI | VLAN_VID_MASK) != 0 {
                    return bad_value(VlanVid, &format!("{x:#x}/{xm:#x} has bits above 0x1fff"));
                }
                v.vlan_tci |= x as u16;
                m.vlan_tci |= xm as u16;
            }
            VlanPcp => {
                let vid = get(VlanVid).map(num);
                if vid.is_none_or(|(vv, vm)| vv & vm & u32::from(OFPVID_PRESENT) == 0) {
                    return reject(
                        "match field vlan_pcp needs vlan_vid with OFPVID_PRESENT",
                        OfError::BAD_MATCH_BAD_PREREQ,
                    );
                }
                if x > 7 {
                    return bad_value(VlanPcp, &format!("{x} is above 7"));
                }
                v.vlan_tci |= (x as u16) << 13;
                m.vlan_tci |= VLAN_PCP_MASK;
            }
            IpDscp => {
                if x > 63 {
                    return bad_value(IpDscp, &format!("{x} is above 63"));
                }
                v.nw_tos |= (x as u8) << 2;
                m.nw_tos |= 0xfc;
            }
            IpEcn => {
                if x > 3 {
                    return bad_value(IpEcn, &format!("{x} is above 3"));
                }
                v.nw_tos |= x as u8;
                m.nw_tos |= 3;
            }
            IpProto | ArpOp => {
                if x > 255 {
                    return reject(
                        format!("arp_op {x}: rqvs keeps the ARP opcode in 8 bits"),
                        OfError::BAD_MATCH_BAD_VALUE,
                    );
                }
                v.nw_proto = x as u8;
                m.nw_proto = u8::MAX;
            }
            Ipv4Src | ArpSpa => {
                v.nw_src = x;
                m.nw_src = xm;
            }
            Ipv4Dst | ArpTpa => {
                v.nw_dst = x;
                m.nw_dst = xm;
            }
            TcpSrc | UdpSrc | SctpSrc => {
                v.tp_src = x as u16;
                m.tp_src = xm as u16;
            }
            TcpDst | UdpDst | SctpDst => {
                v.tp_dst = x as u16;
                m.tp_dst = xm as u16;
            }
            Icmpv4Type => {
                v.tp_src = x as u16;
                m.tp_src = u16::MAX;
            }
            Icmpv4Code => {
                v.tp_dst = x as u16;
                m.tp_dst = u16::MAX;
            }
            IpFrag => {
                let all = u32::from(FLOW_NW_FRAG_ANY | FLOW_NW_FRAG_LATER);
                let xm = if o.mask.is_some() { xm } else { all };
                if (x | xm) & !all != 0 {
                    return bad_value(IpFrag, &format!("{x:#x}/{xm:#x} has bits other than 0x3"));
                }
                v.nw_frag = x as u8;
                // "Not a fragment" is 0/1 in rqvs (nw_frag=no) and 0/3 in OVS: the same packets,
                // as a later fragment is also a fragment.
                m.nw_frag = if x == 0 && xm == all { FLOW_NW_FRAG_ANY } else { xm as u8 };
            }
            TcpFlags => {
                let xm = if o.mask.is_some() { xm } else { u32::from(TCP_FLAGS_MASK) };
                if (x | xm) & !u32::from(TCP_FLAGS_MASK) != 0 {
                    return bad_value(TcpFlags, &format!("{x:#x}/{xm:#x} has bits above 0xfff"));
                }
                v.tcp_flags = x as u16;
                m.tcp_flags = xm as u16;
            }
        }
    }
    // "No VLAN" exact is vlan_tci=0/0xffff in rqvs and OVS (dl_vlan=0xffff).
    if v.vlan_tci == 0 && m.vlan_tci == VLAN_CFI | VLAN_VID_MASK {
        m.vlan_tci = u16::MAX;
    }
    Match::new(v, m, rqvs_flow::PortRange::ANY, rqvs_flow::PortRange::ANY)
        .map_err(|e| DecodeError::Unsupported { what: e.to_string(), error: OfError::BAD_MATCH_BAD_WILDCARDS })
}

/// Writes one TLV: `field` with `value` (big-endian, `width` bytes), masked unless `mask` is
/// all ones over the field's bits (`full`).
fn put(w: &mut Writer, field: Field, value: u64, mask: u64, full: u64) {
    let (width, _) = field.shape();
    let has_mask = mask != full;
    let payload = if has_mask { 2 * width } else { width };
    let bytes = |x: u64| x.to_be_bytes()[8 - width..].to_vec();
    let (class, f, experimenter) = field.oxm_class();
    // An experimenter id counts in the TLV's length.
    let len = payload + if experimenter.is_some() { 4 } else { 0 };
    w.u32(u32::from(class) << 16 | u32::from(f) << 9 | u32::from(has_mask) << 8 | len as u32);
    if let Some(e) = experimenter {
        w.u32(e);
    }
    w.put(&bytes(value));
    if has_mask {
        w.put(&bytes(mask));
    }
}

fn mac_u64(m: [u8; 6]) -> u64 {
    m.iter().fold(0u64, |a, &x| a << 8 | u64::from(x))
}

/// Writes the TLVs of `m` (no `ofp_match` header): what [`encode_match`] wraps, in the order
/// Open vSwitch writes them.
pub(crate) fn encode_fields(m: &Match, w: &mut Writer) -> Result<(), EncodeError> {
    use Field::*;
    if m.has_port_ranges() {
        let (s, d) = (m.tp_src_range(), m.tp_dst_range());
        return enc_err(format!(
            "port ranges tp_src={}-{} tp_dst={}-{} are not one value/mask each: split the match with Match::expand_port_ranges first (FlowMod::from_rule does)",
            s.lo, s.hi, d.lo, d.hi
        ));
    }
    let (v, k) = (m.value(), m.mask());
    if k.in_port != 0 {
        if k.in_port != u32::MAX {
            return enc_err("in_port cannot be masked in OpenFlow");
        }
        let Some(p) = port_to_of(v.in_port) else {
            return enc_err(format!("in_port {} has no OpenFlow 1.3 number (above 0xffff)", v.in_port));
        };
        put(w, InPort, u64::from(p), u64::from(u32::MAX), u64::from(u32::MAX));
    }
    let full_mac = mac_u64([0xff; 6]);
    if k.dl_src != [0; 6] {
        put(w, EthSrc, mac_u64(v.dl_src), mac_u64(k.dl_src), full_mac);
    }
    if k.dl_dst != [0; 6] {
        put(w, EthDst, mac_u64(v.dl_dst), mac_u64(k.dl_dst), full_mac);
    }
    let dl = match k.dl_type {
        0 => None,
        u16::MAX => {
            put(w, EthType, u64::from(v.dl_type), 0xffff, 0xffff);
            Some(v.dl_type)
        }
        _ => return enc_err("dl_type cannot be masked in OpenFlow"),
    };
    if k.vlan_tci != 0 {
        let vid_bits = VLAN_CFI | VLAN_VID_MASK;
        let none_exact = v.vlan_tci == 0 && k.vlan_tci == u16::MAX;
        let (vm, pm) = if none_exact { (vid_bits, 0) } else { (k.vlan_tci & vid_bits, k.vlan_tci & VLAN_PCP_MASK) };
        if pm != 0 && (pm != VLAN_PCP_MASK || v.vlan_tci & vm & VLAN_CFI == 0) {
            return enc_err(format!(
                "vlan_tci={:#06x}/{:#06x}: OXM matches the PCP only whole and only with a VLAN present",
                v.vlan_tci, k.vlan_tci
            ));
        }
        if vm != 0 {
            put(w, VlanVid, u64::from(v.vlan_tci & vm), u64::from(vm), u64::from(vid_bits));
        }
        if pm != 0 {
            put(w, VlanPcp, u64::from(v.vlan_tci >> 13), 7, 7);
        }
    }
    let proto = match k.nw_proto {
        0 => None,
        u8::MAX => Some(v.nw_proto),
        _ => return enc_err("nw_proto cannot be masked in OpenFlow"),
    };
    let l4_used = k.tp_src != 0 || k.tp_dst != 0 || k.tcp_flags != 0;
    match dl {
        Some(ETH_TYPE_IP) => {
            put_u32_field(w, Ipv4Src, v.nw_src, k.nw_src);
            put_u32_field(w, Ipv4Dst, v.nw_dst, k.nw_dst);
            if k.nw_frag != 0 {
                let all = FLOW_NW_FRAG_ANY | FLOW_NW_FRAG_LATER;
                // nw_frag=no (0/1) goes as OVS sends it: exact 0.
                let km = if v.nw_frag == 0 && k.nw_frag == FLOW_NW_FRAG_ANY { all } else { k.nw_frag };
                put(w, IpFrag, u64::from(v.nw_frag), u64::from(km), u64::from(all));
            }
            match k.nw_tos & 0xfc {
                0 => {}
                0xfc => put(w, IpDscp, u64::from(v.nw_tos >> 2), 0xff, 0xff),
                _ => return enc_err("nw_tos: OXM matches the DSCP bits only whole"),
            }
            match k.nw_tos & 3 {
                0 => {}
                3 => put(w, IpEcn, u64::from(v.nw_tos & 3), 0xff, 0xff),
                _ => return enc_err("nw_tos: OXM matches the ECN bits only whole"),
            }
            if let Some(p) = proto {
                put(w, IpProto, u64::from(p), 0xff, 0xff);
            }
            let ports = match proto {
                Some(IPPROTO_TCP) => Some((TcpSrc, TcpDst)),
                Some(IPPROTO_UDP) => Some((UdpSrc, UdpDst)),
                Some(IPPROTO_SCTP) => Some((SctpSrc, SctpDst)),
                _ => None,
            };
            if let Some((src, dst)) = ports {
                if k.tp_src != 0 {
                    put(w, src, u64::from(v.tp_src), u64::from(k.tp_src), 0xffff);
                }
                if k.tp_dst != 0 {
                    put(w, dst, u64::from(v.tp_dst), u64::from(k.tp_dst), 0xffff);
                }
            } else if proto == Some(IPPROTO_ICMP) {
                for (f, val, mask) in [(Icmpv4Type, v.tp_src, k.tp_src), (Icmpv4Code, v.tp_dst, k.tp_dst)] {
                    match mask {
                        0 => {}
                        u16::MAX if val <= 0xff => put(w, f, u64::from(val), 0xff, 0xff),
                        _ => return enc_err(format!("{}: must be exact and at most 255", f.name())),
                    }
                }
            } else if k.tp_src != 0 || k.tp_dst != 0 {
                return enc_err("tp_src/tp_dst need nw_proto tcp, udp, sctp or icmp");
            }
            if k.tcp_flags != 0 {
                if proto != Some(IPPROTO_TCP) {
                    return enc_err("tcp_flags needs nw_proto tcp");
                }
                put(w, TcpFlags, u64::from(v.tcp_flags), u64::from(k.tcp_flags), u64::from(TCP_FLAGS_MASK));
            }
        }
        Some(ETH_TYPE_ARP) => {
            if let Some(p) = proto {
                put(w, ArpOp, u64::from(p), 0xffff, 0xffff);
            }
            put_u32_field(w, ArpSpa, v.nw_src, k.nw_src);
            put_u32_field(w, ArpTpa, v.nw_dst, k.nw_dst);
            if k.nw_tos != 0 || k.nw_frag != 0 || l4_used {
                return enc_err("nw_tos, nw_frag, ports and tcp_flags need dl_type IPv4");
            }
        }
        _ => {
            if k.nw_src != 0 || k.nw_dst != 0 || proto.is_some() || k.nw_tos != 0 || k.nw_frag != 0 || l4_used {
                return enc_err("network and transport fields need dl_type IPv4 (or ARP for nw_src, nw_dst, nw_proto)");
            }
        }
    }
    Ok(())
}

fn put_u32_field(w: &mut Writer, f: Field, v: u32, m: u32) {
    if m != 0 {
        put(w, f, u64::from(v), u64::from(m), u64::from(u32::MAX));
    }
}

/// Writes `m` as an `ofp_match` (header, TLVs, zeros to a multiple of 8).
pub fn encode_match(m: &Match, w: &mut Writer) -> Result<(), EncodeError> {
    let start = w.len();
    w.u16(OFPMT_OXM);
    w.u16(0);
    encode_fields(m, w)?;
    let len = w.len() - start;
    w.patch_u16(start + 2, len as u16);
    w.pad8();
    Ok(())
}

/// Writes one OXM TLV for a `set_field` action (exact value; `field` is by name of [`Field`]).
pub(crate) fn put_set_field(w: &mut Writer, field: Field, value: u64) {
    let full = match field.shape().0 {
        1 => 0xff,
        2 => 0xffff,
        4 => 0xffff_ffff,
        _ => 0xffff_ffff_ffff,
    };
    put(w, field, value, full, full);
}

/// The value bytes of a `set_field` as a number.
pub(crate) fn oxm_value(o: &Oxm<'_>) -> u64 {
    o.value.iter().fold(0u64, |a, &x| a << 8 | u64::from(x))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_flow::formats::ofctl;

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
        // ipv6_src: named, unsupported.
        let e = tlvs(&[&[0x80u8, 0, 0x34, 16][..], &[0u8; 16]].concat()).unwrap_err();
        assert_eq!(e.of_error(), OfError::BAD_MATCH_BAD_FIELD);
        assert!(e.to_string().contains("ipv6_src"), "{e}");
        // metadata, NXM register 0.
        assert_eq!(code(tlvs(&[0x80, 0, 0x04, 8, 0, 0, 0, 0, 0, 0, 0, 0])), OfError::BAD_MATCH_BAD_FIELD);
        assert_eq!(code(tlvs(&[0x00, 1, 0x00, 4, 0, 0, 0, 0])), OfError::BAD_MATCH_BAD_FIELD);
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
        let mut k = FlowKey::default();
        k.vlan_tci = 0x2000;
        assert!(encode_match(&Match::from_masked(FlowKey::default(), k), &mut Writer::new()).is_err());
    }
}
