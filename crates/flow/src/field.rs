//! The OpenFlow match fields, each described once (OVS's `meta-flow`): name and aliases, the
//! [`FlowKey`] member and bits that hold it, its OXM and NXM codes, width, whether OpenFlow lets
//! it be masked, its prerequisites, and how it is written as text. Parsing (`formats::ofctl`),
//! printing, the OpenFlow codec and prerequisite checks read this table instead of listing the
//! fields again.
//!
//! Several fields are views of one member, as in OVS's `struct flow`: `vlan_vid` and `vlan_pcp`
//! of `vlan_tci`; `ip_dscp` and `ip_ecn` of `nw_tos`; `arp_spa`/`arp_tpa` share `nw_src`/`nw_dst`
//! and `arp_op` shares `nw_proto`; ICMP's and ICMPv6's type and code share `tp_src`/`tp_dst`;
//! `nd_sll`/`nd_tll` share `arp_sha`/`arp_tha`. A field's value is the member's bits
//! `shift..shift + bits`, shifted down (`vlan_pcp` is `vlan_tci >> 13 & 7`).

use crate::key::{
    FlowKey, ETH_TYPE_ARP, ETH_TYPE_IP, ETH_TYPE_IPV6, IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_SCTP, IPPROTO_TCP,
    IPPROTO_UDP, VLAN_CFI,
};

/// `dl_type` of RARP (OVS parses it as ARP).
pub const ETH_TYPE_RARP: u16 = 0x8035;
/// ICMPv6 neighbour solicitation and advertisement (the types with an ND target).
pub const ND_NEIGHBOR_SOLICIT: u16 = 135;
pub const ND_NEIGHBOR_ADVERT: u16 = 136;

/// A storage member of [`FlowKey`] (see [`crate::key`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Member {
    InPort,
    Metadata,
    DlSrc,
    DlDst,
    DlType,
    VlanTci,
    NwSrc,
    NwDst,
    NwProto,
    NwTos,
    NwFrag,
    NwTtl,
    Ipv6Src,
    Ipv6Dst,
    Ipv6Label,
    NdTarget,
    ArpSha,
    ArpTha,
    TpSrc,
    TpDst,
    TcpFlags,
}

fn mac(m: [u8; 6]) -> u128 {
    m.iter().fold(0u128, |a, &b| a << 8 | u128::from(b))
}

fn to_mac(v: u128) -> [u8; 6] {
    std::array::from_fn(|i| (v >> (8 * (5 - i))) as u8)
}

impl Member {
    /// The member's value as a number (MACs with their first byte on top).
    pub fn get(self, k: &FlowKey) -> u128 {
        match self {
            Member::InPort => k.in_port.into(),
            Member::Metadata => k.metadata.into(),
            Member::DlSrc => mac(k.dl_src),
            Member::DlDst => mac(k.dl_dst),
            Member::DlType => k.dl_type.into(),
            Member::VlanTci => k.vlan_tci.into(),
            Member::NwSrc => k.nw_src.into(),
            Member::NwDst => k.nw_dst.into(),
            Member::NwProto => k.nw_proto.into(),
            Member::NwTos => k.nw_tos.into(),
            Member::NwFrag => k.nw_frag.into(),
            Member::NwTtl => k.nw_ttl.into(),
            Member::Ipv6Src => k.ipv6_src,
            Member::Ipv6Dst => k.ipv6_dst,
            Member::Ipv6Label => k.ipv6_label.into(),
            Member::NdTarget => k.nd_target,
            Member::ArpSha => mac(k.arp_sha),
            Member::ArpTha => mac(k.arp_tha),
            Member::TpSrc => k.tp_src.into(),
            Member::TpDst => k.tp_dst.into(),
            Member::TcpFlags => k.tcp_flags.into(),
        }
    }

    /// Sets the member to `v` (truncated to the member's width).
    pub fn set(self, k: &mut FlowKey, v: u128) {
        match self {
            Member::InPort => k.in_port = v as u32,
            Member::Metadata => k.metadata = v as u64,
            Member::DlSrc => k.dl_src = to_mac(v),
            Member::DlDst => k.dl_dst = to_mac(v),
            Member::DlType => k.dl_type = v as u16,
            Member::VlanTci => k.vlan_tci = v as u16,
            Member::NwSrc => k.nw_src = v as u32,
            Member::NwDst => k.nw_dst = v as u32,
            Member::NwProto => k.nw_proto = v as u8,
            Member::NwTos => k.nw_tos = v as u8,
            Member::NwFrag => k.nw_frag = v as u8,
            Member::NwTtl => k.nw_ttl = v as u8,
            Member::Ipv6Src => k.ipv6_src = v,
            Member::Ipv6Dst => k.ipv6_dst = v,
            Member::Ipv6Label => k.ipv6_label = v as u32,
            Member::NdTarget => k.nd_target = v,
            Member::ArpSha => k.arp_sha = to_mac(v),
            Member::ArpTha => k.arp_tha = to_mac(v),
            Member::TpSrc => k.tp_src = v as u16,
            Member::TpDst => k.tp_dst = v as u16,
            Member::TcpFlags => k.tcp_flags = v as u16,
        }
    }
}

/// What a field requires of the rest of the match (OVS's `enum mf_prerequisites`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Prereq {
    None,
    /// A VLAN tag (`vlan_pcp` needs `vlan_vid` to say a tag is present).
    Vlan,
    Arp,
    Ipv4,
    Ipv6,
    /// IPv4 or IPv6.
    IpAny,
    Tcp,
    Udp,
    Sctp,
    Icmpv4,
    Icmpv6,
    /// ICMPv6 neighbour solicitation or advertisement.
    Nd,
    NdSolicit,
    NdAdvert,
}

impl Prereq {
    /// Does the match (value/mask) satisfy the prerequisite? As in OVS, the fields it names
    /// must be matched exactly to the right values.
    pub fn satisfied(self, v: &FlowKey, m: &FlowKey) -> bool {
        let dl = |t: u16| m.dl_type == u16::MAX && v.dl_type == t;
        let ip_any = dl(ETH_TYPE_IP) || dl(ETH_TYPE_IPV6);
        let proto = |p: u8| m.nw_proto == u8::MAX && v.nw_proto == p;
        let icmp6_type = |t: u16| m.tp_src & 0xff == 0xff && v.tp_src & 0xff == t;
        match self {
            Prereq::None => true,
            Prereq::Vlan => m.vlan_tci & VLAN_CFI != 0 && v.vlan_tci & VLAN_CFI != 0,
            Prereq::Arp => dl(ETH_TYPE_ARP) || dl(ETH_TYPE_RARP),
            Prereq::Ipv4 => dl(ETH_TYPE_IP),
            Prereq::Ipv6 => dl(ETH_TYPE_IPV6),
            Prereq::IpAny => ip_any,
            Prereq::Tcp => ip_any && proto(IPPROTO_TCP),
            Prereq::Udp => ip_any && proto(IPPROTO_UDP),
            Prereq::Sctp => ip_any && proto(IPPROTO_SCTP),
            Prereq::Icmpv4 => dl(ETH_TYPE_IP) && proto(IPPROTO_ICMP),
            Prereq::Icmpv6 => dl(ETH_TYPE_IPV6) && proto(IPPROTO_ICMPV6),
            Prereq::Nd => {
                Prereq::Icmpv6.satisfied(v, m)
                    && (icmp6_type(ND_NEIGHBOR_SOLICIT) || icmp6_type(ND_NEIGHBOR_ADVERT))
                    && m.tp_dst & 0xff == 0xff
                    && v.tp_dst == 0
            }
            Prereq::NdSolicit => {
                Prereq::Icmpv6.satisfied(v, m)
                    && icmp6_type(ND_NEIGHBOR_SOLICIT)
                    && m.tp_dst & 0xff == 0xff
                    && v.tp_dst == 0
            }
            Prereq::NdAdvert => {
                Prereq::Icmpv6.satisfied(v, m)
                    && icmp6_type(ND_NEIGHBOR_ADVERT)
                    && m.tp_dst & 0xff == 0xff
                    && v.tp_dst == 0
            }
        }
    }

    /// What to add to a flow to satisfy it, for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            Prereq::None => "nothing",
            Prereq::Vlan => "a VLAN tag: dl_vlan or vlan_tci with the CFI bit (0x1000)",
            Prereq::Arp => "'arp' (or 'rarp')",
            Prereq::Ipv4 => "an IPv4 match: 'ip' (or tcp, udp, icmp)",
            Prereq::Ipv6 => "an IPv6 match: 'ipv6' (or tcp6, udp6, icmp6)",
            Prereq::IpAny => "an IP match: 'ip' or 'ipv6' (or tcp, tcp6, ...)",
            Prereq::Tcp => "the protocol to be tcp ('tcp' or 'tcp6')",
            Prereq::Udp => "the protocol to be udp ('udp' or 'udp6')",
            Prereq::Sctp => "the protocol to be sctp ('sctp' or 'sctp6')",
            Prereq::Icmpv4 => "the protocol to be icmp ('icmp')",
            Prereq::Icmpv6 => "the protocol to be icmpv6 ('icmp6')",
            Prereq::Nd => "ICMPv6 neighbour discovery: 'icmp6,icmp_type=135' or 'icmp6,icmp_type=136', icmp_code=0",
            Prereq::NdSolicit => "an ICMPv6 neighbour solicitation: 'icmp6,icmp_type=135,icmp_code=0'",
            Prereq::NdAdvert => "an ICMPv6 neighbour advertisement: 'icmp6,icmp_type=136,icmp_code=0'",
        }
    }
}

/// How a field's value is written as text (ovs-ofctl).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    Decimal,
    Hex,
    Mac,
    Ipv4,
    Ipv6,
    /// OpenFlow port numbers (`LOCAL`, ...).
    Port,
    /// `ip_frag`'s keywords (no, yes, first, later, not_later).
    Frag,
    /// `tcp_flags`: a number, `+syn-ack`, or `syn|ack`.
    TcpFlags,
}

/// How a field may be masked in OpenFlow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Maskable {
    /// Only exact matches.
    No,
    /// Any bitwise mask.
    Bitwise,
}

/// One OpenFlow match field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Field {
    /// The name OVS 3.1 prints (`ovs-ofctl dump-flows`).
    pub name: &'static str,
    /// Other names ovs-ofctl accepts.
    pub aliases: &'static [&'static str],
    /// The [`FlowKey`] member holding it, and its bits there.
    pub member: Member,
    pub shift: u32,
    pub bits: u32,
    pub maskable: Maskable,
    pub prereq: Prereq,
    pub format: Format,
    /// OXM class and field (`None`: no OXM; NXM only).
    pub oxm: Option<(u16, u8)>,
    /// NXM class and field, for the Nicira extensions.
    pub nxm: Option<(u16, u8)>,
    /// OVS can build a prefix trie on it (`Flow_Table:prefixes`).
    pub trie: bool,
}

/// OXM class of the OpenFlow basic fields.
pub const OFPXMC_OPENFLOW_BASIC: u16 = 0x8000;
/// NXM classes (Nicira's): 0 for the OpenFlow 1.0 fields, 1 for its extensions.
pub const NXM_OF: u16 = 0x0000;
pub const NXM_NX: u16 = 0x0001;

const B: u16 = OFPXMC_OPENFLOW_BASIC;

macro_rules! field {
    ($name:literal, [$($alias:literal),*], $member:ident, $shift:expr, $bits:expr, $mask:ident, $pre:ident, $fmt:ident,
     $oxm:expr, $nxm:expr, $trie:expr) => {
        Field {
            name: $name,
            aliases: &[$($alias),*],
            member: Member::$member,
            shift: $shift,
            bits: $bits,
            maskable: Maskable::$mask,
            prereq: Prereq::$pre,
            format: Format::$fmt,
            oxm: $oxm,
            nxm: $nxm,
            trie: $trie,
        }
    };
}

/// Every match field rqvs knows, in OVS's `mf_field_id` order.
pub const FIELDS: &[Field] = &[
    field!("metadata", [], Metadata, 0, 64, Bitwise, None, Hex, Some((B, 2)), None, false),
    field!("in_port", ["in_port_oxm"], InPort, 0, 32, No, None, Port, Some((B, 0)), Some((NXM_OF, 0)), false),
    field!("dl_src", ["eth_src"], DlSrc, 0, 48, Bitwise, None, Mac, Some((B, 4)), Some((NXM_OF, 2)), false),
    field!("dl_dst", ["eth_dst"], DlDst, 0, 48, Bitwise, None, Mac, Some((B, 3)), Some((NXM_OF, 1)), false),
    field!("dl_type", ["eth_type"], DlType, 0, 16, No, None, Hex, Some((B, 5)), Some((NXM_OF, 3)), false),
    field!("vlan_tci", [], VlanTci, 0, 16, Bitwise, None, Hex, None, Some((NXM_OF, 4)), false),
    // OpenFlow 1.3's vlan_vid: 12 bits of VID plus OFPVID_PRESENT (0x1000) = the CFI bit.
    field!("vlan_vid", [], VlanTci, 0, 13, Bitwise, None, Decimal, Some((B, 6)), None, false),
    field!("vlan_pcp", [], VlanTci, 13, 3, No, Vlan, Decimal, Some((B, 7)), None, false),
    field!("nw_src", ["ip_src"], NwSrc, 0, 32, Bitwise, Ipv4, Ipv4, Some((B, 11)), Some((NXM_OF, 7)), true),
    field!("nw_dst", ["ip_dst"], NwDst, 0, 32, Bitwise, Ipv4, Ipv4, Some((B, 12)), Some((NXM_OF, 8)), true),
    field!("ipv6_src", [], Ipv6Src, 0, 128, Bitwise, Ipv6, Ipv6, Some((B, 26)), Some((NXM_NX, 19)), true),
    field!("ipv6_dst", [], Ipv6Dst, 0, 128, Bitwise, Ipv6, Ipv6, Some((B, 27)), Some((NXM_NX, 20)), true),
    field!("ipv6_label", [], Ipv6Label, 0, 20, Bitwise, Ipv6, Hex, Some((B, 28)), Some((NXM_NX, 27)), false),
    field!("nw_proto", ["ip_proto"], NwProto, 0, 8, No, IpAny, Decimal, Some((B, 10)), Some((NXM_OF, 6)), false),
    field!("nw_ttl", [], NwTtl, 0, 8, No, IpAny, Decimal, None, Some((NXM_NX, 29)), false),
    field!("ip_frag", ["nw_frag"], NwFrag, 0, 2, Bitwise, IpAny, Frag, None, Some((NXM_NX, 26)), false),
    field!("ip_dscp", [], NwTos, 2, 6, No, IpAny, Decimal, Some((B, 8)), None, false),
    field!("nw_ecn", ["ip_ecn"], NwTos, 0, 2, No, IpAny, Decimal, Some((B, 9)), Some((NXM_NX, 28)), false),
    field!("arp_op", [], NwProto, 0, 8, No, Arp, Decimal, Some((B, 21)), Some((NXM_OF, 15)), false),
    field!("arp_spa", [], NwSrc, 0, 32, Bitwise, Arp, Ipv4, Some((B, 22)), Some((NXM_OF, 16)), false),
    field!("arp_tpa", [], NwDst, 0, 32, Bitwise, Arp, Ipv4, Some((B, 23)), Some((NXM_OF, 17)), false),
    field!("arp_sha", [], ArpSha, 0, 48, Bitwise, Arp, Mac, Some((B, 24)), Some((NXM_NX, 17)), false),
    field!("arp_tha", [], ArpTha, 0, 48, Bitwise, Arp, Mac, Some((B, 25)), Some((NXM_NX, 18)), false),
    field!("tcp_src", ["tp_src"], TpSrc, 0, 16, Bitwise, Tcp, Decimal, Some((B, 13)), Some((NXM_OF, 9)), false),
    field!("tcp_dst", ["tp_dst"], TpDst, 0, 16, Bitwise, Tcp, Decimal, Some((B, 14)), Some((NXM_OF, 10)), false),
    field!("tcp_flags", [], TcpFlags, 0, 12, Bitwise, Tcp, TcpFlags, None, Some((NXM_NX, 34)), false),
    field!("udp_src", [], TpSrc, 0, 16, Bitwise, Udp, Decimal, Some((B, 15)), Some((NXM_OF, 11)), false),
    field!("udp_dst", [], TpDst, 0, 16, Bitwise, Udp, Decimal, Some((B, 16)), Some((NXM_OF, 12)), false),
    field!("sctp_src", [], TpSrc, 0, 16, Bitwise, Sctp, Decimal, Some((B, 17)), None, false),
    field!("sctp_dst", [], TpDst, 0, 16, Bitwise, Sctp, Decimal, Some((B, 18)), None, false),
    field!("icmp_type", [], TpSrc, 0, 8, No, Icmpv4, Decimal, Some((B, 19)), Some((NXM_OF, 13)), false),
    field!("icmp_code", [], TpDst, 0, 8, No, Icmpv4, Decimal, Some((B, 20)), Some((NXM_OF, 14)), false),
    field!("icmpv6_type", [], TpSrc, 0, 8, No, Icmpv6, Decimal, Some((B, 29)), Some((NXM_NX, 21)), false),
    field!("icmpv6_code", [], TpDst, 0, 8, No, Icmpv6, Decimal, Some((B, 30)), Some((NXM_NX, 22)), false),
    field!("nd_target", [], NdTarget, 0, 128, Bitwise, Nd, Ipv6, Some((B, 31)), Some((NXM_NX, 23)), false),
    field!("nd_sll", [], ArpSha, 0, 48, Bitwise, NdSolicit, Mac, Some((B, 32)), Some((NXM_NX, 24)), false),
    field!("nd_tll", [], ArpTha, 0, 48, Bitwise, NdAdvert, Mac, Some((B, 33)), Some((NXM_NX, 25)), false),
];

impl Field {
    /// The field of this name or alias.
    pub fn by_name(name: &str) -> Option<&'static Field> {
        FIELDS.iter().find(|f| f.name == name || f.aliases.contains(&name))
    }

    /// The field with this OXM class and field number.
    pub fn by_oxm(class: u16, field: u8) -> Option<&'static Field> {
        if class == OFPXMC_OPENFLOW_BASIC {
            // Every match TLV a FLOW_MOD carries asks: a table by code, not a walk of FIELDS.
            static BASIC: std::sync::OnceLock<[Option<u16>; 256]> = std::sync::OnceLock::new();
            let by_code = BASIC.get_or_init(|| {
                let mut t = [None; 256];
                for (i, f) in FIELDS.iter().enumerate() {
                    if let Some((OFPXMC_OPENFLOW_BASIC, code)) = f.oxm {
                        t[usize::from(code)].get_or_insert(u16::try_from(i).expect("fewer than 65536 fields"));
                    }
                }
                t
            });
            return by_code[usize::from(field)].map(|i| &FIELDS[usize::from(i)]);
        }
        FIELDS.iter().find(|f| f.oxm == Some((class, field)))
    }

    /// The field with this NXM class and field number.
    pub fn by_nxm(class: u16, field: u8) -> Option<&'static Field> {
        FIELDS.iter().find(|f| f.nxm == Some((class, field)))
    }

    /// All ones over the field's width.
    pub fn all_ones(&self) -> u128 {
        if self.bits >= 128 {
            u128::MAX
        } else {
            (1u128 << self.bits) - 1
        }
    }

    /// The field's width in bytes on the wire (OXM payload length without a mask).
    pub fn wire_bytes(&self) -> usize {
        (self.bits as usize).div_ceil(8)
    }

    /// The field's value in `k`.
    pub fn get(&self, k: &FlowKey) -> u128 {
        (self.member.get(k) >> self.shift) & self.all_ones()
    }

    /// Sets the field's bits of `k` to `v` (bits above the width ignored), leaving the member's
    /// other bits alone.
    pub fn set(&self, k: &mut FlowKey, v: u128) {
        let ones = self.all_ones() << self.shift;
        let old = self.member.get(k);
        self.member.set(k, (old & !ones) | ((v << self.shift) & ones));
    }

    /// Adds `value`/`mask` of this field to a match's value and mask keys (the value is masked).
    pub fn set_masked(&self, value: &mut FlowKey, mask: &mut FlowKey, v: u128, m: u128) {
        let m = m & self.all_ones();
        self.set(value, v & m);
        self.set(mask, m);
    }

    /// A value of the field (bits `0..bits`) as ovs-ofctl writes it in an action
    /// (`set_field:VALUE->FIELD`): MACs and addresses in their notation, `Hex` fields in hex,
    /// the rest in decimal.
    pub fn format_value(&self, v: u128) -> String {
        match self.format {
            Format::Mac => {
                let m = to_mac(v);
                format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
            }
            Format::Ipv4 => std::net::Ipv4Addr::from(v as u32).to_string(),
            Format::Ipv6 => std::net::Ipv6Addr::from(v).to_string(),
            Format::Hex | Format::TcpFlags => format!("{v:#x}"),
            Format::Decimal | Format::Port | Format::Frag => v.to_string(),
        }
    }

    /// Is this a valid mask for the field? (`Maskable::No` fields take only all-ones.)
    pub fn mask_ok(&self, m: u128) -> bool {
        m & !self.all_ones() == 0 && (self.maskable == Maskable::Bitwise || m == self.all_ones())
    }
}

/// The fields of a match's mask that no field's prerequisites allow: the first field set in
/// `mask` (in [`FIELDS`] order, views of shared members resolved by the match's `dl_type` and
/// protocol) whose prerequisite the match does not satisfy. `None` when every examined bit
/// belongs to a field whose prerequisite holds.
pub fn unmet_prerequisite(value: &FlowKey, mask: &FlowKey) -> Option<&'static Field> {
    // Which members carry which field depends on the protocol: judge each examined member by
    // the fields over it, and complain only when none of them is allowed. Members in the order
    // their first examined field comes in FIELDS, each judged once (a bit per member: this runs
    // for every FLOW_MOD the channel decodes, without an allocation). Each member is read
    // once to know whether the mask examines it at all, and judged over its own fields
    // ([`fields_by_member`]), not over the whole table.
    let by_member = fields_by_member();
    let mut examined = 0u64;
    for (m, fields) in by_member.iter().enumerate() {
        if let Some(&first) = fields.first() {
            if FIELDS[usize::from(first)].member.get(mask) != 0 {
                examined |= 1 << m;
            }
        }
    }
    let mut judged = 0u64;
    for (i, f) in FIELDS.iter().enumerate() {
        let bit = 1u64 << (f.member as u32);
        if examined & !judged & bit == 0 || f.get(mask) == 0 {
            continue;
        }
        judged |= bit;
        // `f` is the first field over its member the mask examines: the one named.
        let allowed = by_member[f.member as usize].iter().map(|&j| usize::from(j)).filter(|&j| j >= i).any(|j| {
            let g = &FIELDS[j];
            g.get(mask) != 0 && g.prereq.satisfied(value, mask)
        });
        if !allowed {
            return Some(f);
        }
    }
    None
}

/// Per [`Member`] (as its number), the indices in [`FIELDS`] of the fields over it, in order.
fn fields_by_member() -> &'static [Vec<u16>] {
    static BY_MEMBER: std::sync::OnceLock<Vec<Vec<u16>>> = std::sync::OnceLock::new();
    BY_MEMBER.get_or_init(|| {
        let members = FIELDS.iter().map(|f| f.member as usize + 1).max().unwrap_or(0);
        assert!(members <= 64, "a member is a bit of a u64");
        let mut v = vec![Vec::new(); members];
        for (i, f) in FIELDS.iter().enumerate() {
            v[f.member as usize].push(u16::try_from(i).expect("fewer than 65536 fields"));
        }
        v
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes_are_unique() {
        for (i, a) in FIELDS.iter().enumerate() {
            for b in &FIELDS[i + 1..] {
                assert_ne!(a.name, b.name);
                assert!(!b.aliases.contains(&a.name) && !a.aliases.contains(&b.name), "{} / {}", a.name, b.name);
                if a.oxm.is_some() {
                    assert_ne!(a.oxm, b.oxm, "{} / {}", a.name, b.name);
                }
                if a.nxm.is_some() {
                    assert_ne!(a.nxm, b.nxm, "{} / {}", a.name, b.name);
                }
            }
        }
    }

    #[test]
    fn get_set_round_trip_every_field() {
        for f in FIELDS {
            let mut k = FlowKey::EXACT;
            f.set(&mut k, 0);
            assert_eq!(f.get(&k), 0, "{}", f.name);
            // Only the field's bits changed.
            let mut probe = FlowKey::ZERO;
            f.set(&mut probe, u128::MAX);
            assert_eq!(k.union(&probe), FlowKey::EXACT, "{}", f.name);
            assert_eq!(k.masked(&probe), FlowKey::ZERO, "{}", f.name);
            let v = 0x1234_5678_9abc_def0_0fed_cba9_8765_4321u128 & f.all_ones();
            f.set(&mut k, v);
            assert_eq!(f.get(&k), v, "{}", f.name);
        }
    }

    #[test]
    fn views_share_members() {
        let mut k = FlowKey::ZERO;
        Field::by_name("vlan_vid").unwrap().set(&mut k, 0x1005);
        Field::by_name("vlan_pcp").unwrap().set(&mut k, 5);
        assert_eq!(k.vlan_tci, 0xb005);
        Field::by_name("ip_dscp").unwrap().set(&mut k, 46);
        Field::by_name("ip_ecn").unwrap().set(&mut k, 1);
        assert_eq!(k.nw_tos, 46 << 2 | 1);
        assert_eq!(Field::by_name("eth_src").unwrap().name, "dl_src");
        assert_eq!(Field::by_oxm(OFPXMC_OPENFLOW_BASIC, 31).unwrap().name, "nd_target");
    }

    /// The table of OXM basic codes gives the field the walk of FIELDS finds, for every code.
    #[test]
    fn by_oxm_is_the_first_field_of_the_code() {
        for class in [OFPXMC_OPENFLOW_BASIC, NXM_OF, NXM_NX, 0xffff] {
            for code in 0..=u8::MAX {
                let walk = FIELDS.iter().find(|f| f.oxm == Some((class, code)));
                assert_eq!(Field::by_oxm(class, code).map(|f| f.name), walk.map(|f| f.name), "{class:#x} {code}");
            }
        }
        assert!(Field::by_oxm(OFPXMC_OPENFLOW_BASIC, 0).is_some(), "in_port");
    }

    /// The allocation-free check names the same field as judging member by member with lists
    /// (its first form), on random matches over random fields with random prerequisite values.
    #[test]
    fn unmet_prerequisite_equals_judging_member_by_member() {
        fn by_lists(value: &FlowKey, mask: &FlowKey) -> Option<&'static Field> {
            let mut members: Vec<Member> = Vec::new();
            for f in FIELDS {
                if f.get(mask) != 0 && !members.contains(&f.member) {
                    members.push(f.member);
                }
            }
            for member in members {
                let over: Vec<&'static Field> =
                    FIELDS.iter().filter(|f| f.member == member && f.get(mask) != 0).collect();
                if !over.iter().any(|f| f.prereq.satisfied(value, mask)) {
                    return over.first().copied();
                }
            }
            None
        }
        assert!(FIELDS.iter().all(|f| (f.member as u32) < 64), "a bit per member");
        let types = [ETH_TYPE_IP, ETH_TYPE_IPV6, ETH_TYPE_ARP, 0x8847];
        let protos = [IPPROTO_TCP, 17, IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_SCTP];
        let mut rng = crate::rng::Rng::new(39);
        let (mut named, mut none) = (0, 0);
        for _ in 0..20_000 {
            let (mut v, mut m) = (FlowKey::ZERO, FlowKey::ZERO);
            if rng.chance(0.7) {
                v.dl_type = types[rng.index(types.len())];
                m.dl_type = u16::MAX;
            }
            if rng.chance(0.6) {
                v.nw_proto = protos[rng.index(protos.len())];
                m.nw_proto = u8::MAX;
            }
            for _ in 0..rng.index(4) {
                let f = &FIELDS[rng.index(FIELDS.len())];
                let value = u128::from(rng.next_u64()) & f.all_ones();
                f.set_masked(&mut v, &mut m, value, f.all_ones());
            }
            let got = unmet_prerequisite(&v, &m);
            assert_eq!(got.map(|f| f.name), by_lists(&v, &m).map(|f| f.name), "{v:?} / {m:?}");
            if got.is_some() {
                named += 1;
            } else {
                none += 1;
            }
        }
        assert!(named > 1000 && none > 1000, "both outcomes exercised: {named} / {none}");
    }

    #[test]
    fn prerequisites_as_ovs() {
        let f = Field::by_name("nd_target").unwrap();
        let (mut v, mut m) = (FlowKey::ZERO, FlowKey::ZERO);
        f.set_masked(&mut v, &mut m, 1, u128::MAX);
        assert_eq!(unmet_prerequisite(&v, &m).map(|f| f.name), Some("nd_target"));
        v.dl_type = ETH_TYPE_IPV6;
        m.dl_type = u16::MAX;
        v.nw_proto = IPPROTO_ICMPV6;
        m.nw_proto = u8::MAX;
        v.tp_src = ND_NEIGHBOR_SOLICIT;
        m.tp_src = 0xff;
        assert!(unmet_prerequisite(&v, &m).is_some(), "icmp_code must be 0 too");
        m.tp_dst = 0xff;
        assert_eq!(unmet_prerequisite(&v, &m), None);
        // tp_src under TCP is tcp_src; under ICMPv6 it is the type: either view is allowed.
        let (mut v, mut m) = (FlowKey::ZERO, FlowKey::ZERO);
        v.tp_dst = 80;
        m.tp_dst = u16::MAX;
        assert!(unmet_prerequisite(&v, &m).is_some());
        v.dl_type = ETH_TYPE_IPV6;
        m.dl_type = u16::MAX;
        v.nw_proto = IPPROTO_TCP;
        m.nw_proto = u8::MAX;
        assert_eq!(unmet_prerequisite(&v, &m), None);
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for &'static Field {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for &'static Field {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Field::by_name(&name).ok_or_else(|| serde::de::Error::custom(format!("unknown field '{name}'")))
    }
}
