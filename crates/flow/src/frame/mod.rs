//! Ethernet frames: parsing a frame into a [`FlowKey`] ([`extract`] for captures,
//! [`extract_datapath`] for frames arriving at a switch port), building the smallest
//! frame that carries a key ([`build_frame`]), and what of a key a frame carries
//! ([`FlowKey::wire`]). Capture files (`crate::formats::pcap`) read frames through [`extract`],
//! the switch's ports through [`extract_datapath`]; nothing else parses a frame. Actions rewrite a
//! frame in place through the zero-copy view [`Frame`].
//!
//! # Frames → keys ([`extract`])
//!
//! A hand-written parser with the semantics of Open vSwitch's `miniflow_extract` for the fields a
//! [`FlowKey`] has. It never panics, whatever the bytes.
//!
//! - **Ethernet II**: `dl_dst`, `dl_src`, `dl_type`. An 802.3 frame (type/length field below
//!   0x0600) gets, as in OVS, the ethertype of its LLC/SNAP header when it has one with OUI 0, and
//!   otherwise [`FLOW_DL_TYPE_NONE`] (0x05ff).
//! - **VLAN**: any number of 802.1Q (0x8100) and 802.1ad (0x88a8) tags (OVS, by default, one:
//!   its `vlan-limit` is 1; [`extract_datapath`] does as OVS). `vlan_tci` is the first
//!   (outer) tag's TCI with [`VLAN_CFI`] set, which is how OVS says "a tag is present" (so the wire's
//!   CFI/DEI bit is not kept); untagged frames have `vlan_tci` 0. `dl_type` is the innermost
//!   ethertype.
//! - **IPv4**: `nw_src`, `nw_dst` (host order), `nw_proto`, `nw_tos`, `nw_ttl` (the TTL), `nw_frag`. The header length
//!   (IHL, i.e. options) is honoured; bytes after the IP total length (Ethernet padding, an FCS) are
//!   ignored. `nw_tos` is the whole TOS byte, DSCP and ECN, as in OVS's `struct flow`; an ovs-ofctl
//!   `nw_tos=` match examines only its DSCP bits (mask 0xfc). `nw_frag` is [`FLOW_NW_FRAG_ANY`] when MF is set or the fragment offset
//!   is non-zero, plus [`FLOW_NW_FRAG_LATER`] when the offset is non-zero.
//! - **L4**, for unfragmented packets and first fragments (later fragments have no L4 fields): TCP
//!   → ports and `tcp_flags` (the low 12 bits of the data-offset/flags word); UDP and SCTP → ports;
//!   ICMP → type in `tp_src` and code in `tp_dst`, as OVS does. Every other IP protocol leaves
//!   `tp_src`/`tp_dst` zero (OVS also puts IGMP type/code there; rqvs does not, see `crate::key`).
//! - **IPv6** (OVS's `miniflow_extract`, `parse_ipv6_ext_hdrs__`, `parse_icmpv6`): `ipv6_src`,
//!   `ipv6_dst`, `ipv6_label` (20 bits), `nw_tos` = the traffic class, `nw_ttl` = the hop limit,
//!   `nw_proto` = the next header after the extension headers OVS walks through (hop-by-hop 0,
//!   routing 43, destination options 60, AH 51, fragment 44; any other value, 59 included, ends
//!   the walk). A fragment header with offset-and-flags not zero sets [`FLOW_NW_FRAG_ANY`]; with a
//!   non-zero offset also [`FLOW_NW_FRAG_LATER`], and then, as in OVS, `nw_proto` is 44 and there
//!   are no L4 fields. Then TCP, UDP and SCTP as for IPv4, and ICMPv6: type in `tp_src`, code in
//!   `tp_dst` (the 8-byte ICMPv6 header must be there). For neighbour solicitation and
//!   advertisement (type 135/136, code 0): `nd_target`, and the source and target link-layer
//!   address options into `arp_sha` (`nd_sll`) and `arp_tha` (`nd_tll`). As OVS: a target cut
//!   short leaves the ND fields zero; an option of length 0 or past the payload ends the walk
//!   (what was read stays); an SLL or TLL option that appears twice zeroes `nd_target`,
//!   `arp_sha` and `arp_tha`; other options, and SLL/TLL options longer than 8 bytes, are
//!   skipped. The payload length bounds the walk (bytes after it are padding). OVS's
//!   `nd_reserved` and `nd_options_type` have no member in [`FlowKey`] and are not kept.
//! - **ARP/RARP**, as OVS, when hardware type is Ethernet and protocol type IPv4: `nw_src` = sender
//!   IP, `nw_dst` = target IP, `arp_sha`/`arp_tha` = sender and target hardware addresses,
//!   `nw_proto` = the opcode when it is ≤ 255 (OVS matches its low byte only). Other ARP flavours
//!   keep the L2 fields only.
//! - **Every other ethertype**: a key with the L2 fields only ([`Extract::Other`]).
//!
//! Where a capture is not a datapath, [`extract`] departs from OVS on purpose
//! ([`extract_datapath`] does not; its module lists what OVS does instead):
//!
//! - A frame too short for a header it announces (Ethernet, VLAN tag, IPv4 header with its
//!   options, the IPv6 header, an IPv6 extension header, the fixed TCP/UDP/SCTP/ICMP/ICMPv6
//!   header of a first fragment or unfragmented packet, ARP) is [`Extract::Truncated`]; OVS would
//!   make a key without that header's fields. ND's target and options are read as OVS reads them
//!   (a cut there is not an error). A header that contradicts itself (IPv4 version ≠ 4, IPv6
//!   version ≠ 6, IHL < 5, total length < header length, TCP data offset < 5) is
//!   [`Extract::Malformed`]. The capture readers skip and count both.
//! - Captures are cut at their snap length, so an IPv4 total length beyond the end of the frame is
//!   accepted as long as the headers rqvs reads are there (OVS drops such a packet), and so is a
//!   total length (IPv6: payload length) of 0 (TSO/GSO packets captured on the sending host; the frame's end is used).
//!   TCP options need not be present. Any amount of trailing padding is ignored (OVS gives up past
//!   255 bytes).
//!
//! # Keys → frames ([`build_frame`]; [`crate::formats::pcap::write_pcap`] writes them to a pcap)
//!
//! [`build_frame`] writes the smallest Ethernet frame that carries a key: headers only, zero-padded
//! to 60 bytes (the 64-byte minimum without the FCS, which pcap files normally omit), with correct
//! IPv4, TCP, UDP, ICMP and ICMPv6 checksums (over the IPv6 pseudo-header for IPv6) and SCTP
//! CRC32c. [`FlowKey::wire`] says exactly which key [`extract`] reads back from it.
//!
//! **TTL.** A frame carries a TTL (hop limit), and `nw_ttl` 0 is what every key has that did not
//! come from a frame (ClassBench traces, [`FlowKey::ipv4`], [`FlowKey::ipv6`]). [`build_frame`]
//! writes `nw_ttl`, or 64 when it is 0, and [`FlowKey::wire`] maps an IP key's `nw_ttl` 0 to 64
//! the same way: a trace converted to a pcap gives frames a router forwards and `dec_ttl`
//! decrements (as before `nw_ttl` existed), and `extract(build_frame(k)) == k.wire()` holds for
//! every key. The price: a key with `nw_ttl` 0 cannot be built (a captured TTL-0 frame reads as
//! `nw_ttl` 0, and writes back as TTL 64).
//!
//! ClassBench traces set ports on any protocol, but a real packet can carry `tp_src`/`tp_dst` only
//! in a TCP, UDP or SCTP header, or as an ICMP type and code below 256, and never in a later
//! fragment. Those ports are lost in the frame and [`crate::formats::pcap::WriteStats::ports_dropped`] counts the keys
//! that had some.

mod datapath;
mod ipv6;
#[cfg(test)]
mod ipv6_tests;
mod view;

pub use datapath::{extract_datapath, vlan_tci_of};
pub use ipv6::{
    IPPROTO_AH, IPPROTO_DSTOPTS, IPPROTO_FRAGMENT, IPPROTO_HOPOPTS, IPPROTO_NONE, IPPROTO_ROUTING, ND_NEIGHBOR_ADVERT,
    ND_NEIGHBOR_SOLICIT,
};
pub use view::{push_vlan, strip_vlan, Frame, FrameError, Layout};

use crate::key::{
    FlowKey, NarrowKey, ETH_TYPE_ARP, ETH_TYPE_IP, ETH_TYPE_IPV6, ETH_TYPE_VLAN, FLOW_NW_FRAG_ANY, FLOW_NW_FRAG_LATER,
    IPPROTO_ICMP, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP, TCP_FLAGS_MASK, VLAN_CFI,
};

/// `dl_type` of an 802.1ad (QinQ) service tag.
pub const ETH_TYPE_VLAN_8021AD: u16 = 0x88a8;
/// `dl_type` of RARP (parsed like ARP, as in OVS).
pub const ETH_TYPE_RARP: u16 = 0x8035;
/// Smallest value of the type/length field that is an ethertype; below it, it is an 802.3 length.
pub const ETH_TYPE_MIN: u16 = 0x0600;
/// OVS's `dl_type` for an 802.3 frame without an LLC/SNAP ethertype.
pub const FLOW_DL_TYPE_NONE: u16 = 0x05ff;
/// Length of the frames [`build_frame`] writes: the 64-byte Ethernet minimum without the FCS.
pub const MIN_FRAME_LEN: usize = 60;

const ETH_HEADER_LEN: usize = 14;
const VLAN_HEADER_LEN: usize = 4;
const LLC_SNAP_HEADER_LEN: usize = 8;
const IPV4_HEADER_LEN: usize = 20;
const TCP_HEADER_LEN: usize = 20;
const UDP_HEADER_LEN: usize = 8;
const SCTP_HEADER_LEN: usize = 12;
const ICMP_HEADER_LEN: usize = 8;
const ARP_ETH_HEADER_LEN: usize = 28;

const IP_MORE_FRAGMENTS: u16 = 0x2000;
const IP_FRAG_OFF_MASK: u16 = 0x1fff;
/// Fragment offset (in 8-byte units) [`build_frame`] gives a later fragment: 1480 bytes, the
/// second fragment of a 1500-byte-MTU datagram.
const LATER_FRAGMENT_OFFSET: u16 = 185;
/// The TTL (hop limit) [`build_frame`] writes for a key whose `nw_ttl` is 0 (module docs).
const DEFAULT_TTL: u8 = 64;

/// The TTL or hop limit a frame built for a key with `nw_ttl` carries: `nw_ttl`, or 64 for 0.
#[inline]
pub(crate) fn ttl_on_wire(nw_ttl: u8) -> u8 {
    if nw_ttl == 0 {
        DEFAULT_TTL
    } else {
        nw_ttl
    }
}

/// What [`extract`] made of one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extract {
    /// An IPv4 packet (possibly a fragment, possibly without L4 fields).
    Ipv4(FlowKey),
    /// Anything else that is a complete Ethernet frame: IPv6 (module docs), ARP (with its IPv4
    /// addresses, hardware addresses and opcode) and every other ethertype with the L2 fields
    /// only.
    Other(FlowKey),
    /// The frame ends inside a header it announced; `layer` names it (`"ethernet"`, `"vlan"`,
    /// `"ipv4"`, `"ipv6"`, `"ipv6 extension header"`, `"tcp"`, `"udp"`, `"sctp"`, `"icmp"`,
    /// `"icmpv6"`, `"arp"`).
    Truncated { layer: &'static str },
    /// A header contradicts itself (IP version, IHL, total length, TCP data offset); `layer` is
    /// `"ipv4"`, `"ipv6"` or `"tcp"`.
    Malformed { layer: &'static str, reason: &'static str },
}

impl Extract {
    /// The key, for [`Extract::Ipv4`] and [`Extract::Other`].
    pub fn key(&self) -> Option<&FlowKey> {
        match self {
            Extract::Ipv4(k) | Extract::Other(k) => Some(k),
            Extract::Truncated { .. } | Extract::Malformed { .. } => None,
        }
    }
}

/// The key of one Ethernet frame received on `in_port` (see the module documentation).
pub fn extract(frame: &[u8], in_port: u32) -> Extract {
    let Some(eth) = frame.first_chunk::<ETH_HEADER_LEN>() else {
        return Extract::Truncated { layer: "ethernet" };
    };
    let mut key = FlowKey {
        in_port,
        dl_dst: [eth[0], eth[1], eth[2], eth[3], eth[4], eth[5]],
        dl_src: [eth[6], eth[7], eth[8], eth[9], eth[10], eth[11]],
        ..FlowKey::default()
    };
    let mut dl_type = u16::from_be_bytes([eth[12], eth[13]]);
    // Offset of the first byte after the type field just read.
    let mut at = ETH_HEADER_LEN;
    while dl_type == ETH_TYPE_VLAN || dl_type == ETH_TYPE_VLAN_8021AD {
        let Some(tag) = frame.get(at..).and_then(<[u8]>::first_chunk::<VLAN_HEADER_LEN>) else {
            return Extract::Truncated { layer: "vlan" };
        };
        if key.vlan_tci == 0 {
            key.vlan_tci = u16::from_be_bytes([tag[0], tag[1]]) | VLAN_CFI;
        }
        dl_type = u16::from_be_bytes([tag[2], tag[3]]);
        at += VLAN_HEADER_LEN;
    }
    if dl_type < ETH_TYPE_MIN {
        (dl_type, at) = llc_snap(frame, at);
    }
    key.dl_type = dl_type;
    let l3 = frame.get(at..).unwrap_or_default();
    match dl_type {
        ETH_TYPE_IP => ipv4(key, l3),
        ETH_TYPE_IPV6 => ipv6::extract_ipv6(key, l3),
        ETH_TYPE_ARP | ETH_TYPE_RARP => arp(key, l3),
        _ => Extract::Other(key),
    }
}

/// OVS `parse_ethertype` for an 802.3 frame: the SNAP ethertype and the offset after the LLC/SNAP
/// header, or [`FLOW_DL_TYPE_NONE`].
fn llc_snap(frame: &[u8], at: usize) -> (u16, usize) {
    match frame.get(at..).and_then(<[u8]>::first_chunk::<LLC_SNAP_HEADER_LEN>) {
        Some([0xaa, 0xaa, 0x03, 0, 0, 0, hi, lo]) => {
            let snap_type = u16::from_be_bytes([*hi, *lo]);
            let dl_type = if snap_type >= ETH_TYPE_MIN { snap_type } else { FLOW_DL_TYPE_NONE };
            (dl_type, at + LLC_SNAP_HEADER_LEN)
        }
        _ => (FLOW_DL_TYPE_NONE, at),
    }
}

fn ipv4(mut key: FlowKey, ip: &[u8]) -> Extract {
    let Some(h) = ip.first_chunk::<IPV4_HEADER_LEN>() else {
        return Extract::Truncated { layer: "ipv4" };
    };
    if h[0] >> 4 != 4 {
        return Extract::Malformed { layer: "ipv4", reason: "version field is not 4" };
    }
    let header_len = usize::from(h[0] & 0x0f) * 4;
    if header_len < IPV4_HEADER_LEN {
        return Extract::Malformed { layer: "ipv4", reason: "header length (IHL) below 5 words" };
    }
    if ip.len() < header_len {
        return Extract::Truncated { layer: "ipv4" };
    }
    let total_len = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let end = match total_len {
        0 => ip.len(),
        n if n < header_len => {
            return Extract::Malformed { layer: "ipv4", reason: "total length shorter than the header" }
        }
        n => n.min(ip.len()),
    };
    key.nw_tos = h[1];
    key.nw_ttl = h[8];
    key.nw_proto = h[9];
    key.nw_src = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
    key.nw_dst = u32::from_be_bytes([h[16], h[17], h[18], h[19]]);
    let frag = u16::from_be_bytes([h[6], h[7]]);
    if frag & (IP_MORE_FRAGMENTS | IP_FRAG_OFF_MASK) != 0 {
        key.nw_frag = FLOW_NW_FRAG_ANY;
        if frag & IP_FRAG_OFF_MASK != 0 {
            key.nw_frag |= FLOW_NW_FRAG_LATER;
            return Extract::Ipv4(key);
        }
    }
    let l4 = ip.get(header_len..end).unwrap_or_default();
    match key.nw_proto {
        IPPROTO_TCP => {
            let Some(t) = l4.first_chunk::<TCP_HEADER_LEN>() else {
                return Extract::Truncated { layer: "tcp" };
            };
            if t[12] >> 4 < 5 {
                return Extract::Malformed { layer: "tcp", reason: "data offset below 5 words" };
            }
            key.tp_src = u16::from_be_bytes([t[0], t[1]]);
            key.tp_dst = u16::from_be_bytes([t[2], t[3]]);
            key.tcp_flags = u16::from_be_bytes([t[12], t[13]]) & TCP_FLAGS_MASK;
        }
        IPPROTO_UDP => {
            let Some(u) = l4.first_chunk::<UDP_HEADER_LEN>() else {
                return Extract::Truncated { layer: "udp" };
            };
            key.tp_src = u16::from_be_bytes([u[0], u[1]]);
            key.tp_dst = u16::from_be_bytes([u[2], u[3]]);
        }
        IPPROTO_SCTP => {
            let Some(s) = l4.first_chunk::<SCTP_HEADER_LEN>() else {
                return Extract::Truncated { layer: "sctp" };
            };
            key.tp_src = u16::from_be_bytes([s[0], s[1]]);
            key.tp_dst = u16::from_be_bytes([s[2], s[3]]);
        }
        IPPROTO_ICMP => {
            let Some(i) = l4.first_chunk::<ICMP_HEADER_LEN>() else {
                return Extract::Truncated { layer: "icmp" };
            };
            key.tp_src = u16::from(i[0]);
            key.tp_dst = u16::from(i[1]);
        }
        _ => {}
    }
    Extract::Ipv4(key)
}

fn arp(mut key: FlowKey, l3: &[u8]) -> Extract {
    let Some(a) = l3.first_chunk::<ARP_ETH_HEADER_LEN>() else {
        return Extract::Truncated { layer: "arp" };
    };
    let hardware = u16::from_be_bytes([a[0], a[1]]);
    let protocol = u16::from_be_bytes([a[2], a[3]]);
    if hardware == 1 && protocol == ETH_TYPE_IP && a[4] == 6 && a[5] == 4 {
        key.nw_src = u32::from_be_bytes([a[14], a[15], a[16], a[17]]);
        key.nw_dst = u32::from_be_bytes([a[24], a[25], a[26], a[27]]);
        if let Ok(op) = u8::try_from(u16::from_be_bytes([a[6], a[7]])) {
            key.nw_proto = op;
        }
        key.arp_sha = [a[8], a[9], a[10], a[11], a[12], a[13]];
        key.arp_tha = [a[18], a[19], a[20], a[21], a[22], a[23]];
    }
    Extract::Other(key)
}

impl FlowKey {
    /// The key [`extract`] reads back from [`build_frame`]`(self)`: what of the key a real frame
    /// carries. Every packet key the datapath, the slow path and the reference see is normalised by
    /// this one function (a ClassBench trace may put ports on any protocol; a frame cannot).
    ///
    /// `vlan_tci` survives only with [`VLAN_CFI`] set; other keys keep their L2 fields (ARP/RARP
    /// also `nw_src`, `nw_dst`, `arp_sha`, `arp_tha` and `nw_proto` as the opcode); IPv4 and IPv6
    /// keep `nw_ttl` (0 becomes 64: module docs); IPv4 keeps `nw_tos`, `nw_frag`
    /// (`FLOW_NW_FRAG_LATER` implies `FLOW_NW_FRAG_ANY`) and, unless the key is a later fragment, the
    /// ports of TCP/UDP/SCTP, the low bytes of `tp_src`/`tp_dst` for ICMP and `tcp_flags` for TCP. An
    /// ethertype below 0x0600 reads back as [`FLOW_DL_TYPE_NONE`], a VLAN ethertype as a tag.
    /// IPv6 keeps its addresses, label, `nw_tos` and `nw_frag` like IPv4; a later fragment reads
    /// back with `nw_proto` 44 ([`IPPROTO_FRAGMENT`]) and no L4 fields; an `nw_proto` that is an
    /// extension header number reads back as 59 ([`IPPROTO_NONE`]); ICMPv6 keeps the low bytes of
    /// type and code and, for ND (135/136, code 0), `nd_target`, `arp_sha` and `arp_tha`. The
    /// wide fields of every other key are dropped.
    #[inline]
    pub fn wire(&self) -> FlowKey {
        match self.dl_type {
            ETH_TYPE_IPV6 | ETH_TYPE_ARP | ETH_TYPE_RARP => self.wire_wide(),
            _ => self.wire_of_narrow_type().widen(),
        }
    }

    /// `self.wire()` as a [`NarrowKey`] when it has no wide member (every key but IPv6 and
    /// ARP/RARP ones with wide fields): what the datapath's 5-tuple path takes, without
    /// building the whole key.
    #[inline]
    pub fn wire_narrow(&self) -> Option<NarrowKey> {
        match self.dl_type {
            ETH_TYPE_IPV6 | ETH_TYPE_ARP | ETH_TYPE_RARP => self.wire_wide().narrow(),
            _ => Some(self.wire_of_narrow_type()),
        }
    }

    /// The L2 fields every key keeps on the wire.
    #[inline]
    fn wire_l2(&self) -> NarrowKey {
        NarrowKey {
            in_port: self.in_port,
            dl_src: self.dl_src,
            dl_dst: self.dl_dst,
            dl_type: self.dl_type,
            vlan_tci: if self.vlan_tci & VLAN_CFI != 0 { self.vlan_tci } else { 0 },
            ..NarrowKey::default()
        }
    }

    /// [`FlowKey::wire`] of an IPv6 or ARP/RARP key (the types with wide fields).
    fn wire_wide(&self) -> FlowKey {
        let key = self;
        let mut w = self.wire_l2().widen();
        if key.dl_type == ETH_TYPE_IPV6 {
            ipv6::wire_ipv6(key, &mut w);
        } else {
            w.nw_src = key.nw_src;
            w.nw_dst = key.nw_dst;
            w.nw_proto = key.nw_proto;
            w.arp_sha = key.arp_sha;
            w.arp_tha = key.arp_tha;
        }
        w
    }

    /// [`FlowKey::wire`] of a key whose type has no wide field (IPv4, a VLAN or 802.3 type, any
    /// other ethertype).
    #[inline]
    fn wire_of_narrow_type(&self) -> NarrowKey {
        let key = self;
        let mut w = self.wire_l2();
        match key.dl_type {
            ETH_TYPE_IP => {
                w.nw_src = key.nw_src;
                w.nw_dst = key.nw_dst;
                w.nw_proto = key.nw_proto;
                w.nw_tos = key.nw_tos;
                w.nw_ttl = ttl_on_wire(key.nw_ttl);
                if key.nw_frag & FLOW_NW_FRAG_LATER != 0 {
                    w.nw_frag = FLOW_NW_FRAG_ANY | FLOW_NW_FRAG_LATER;
                    return w;
                }
                w.nw_frag = key.nw_frag & FLOW_NW_FRAG_ANY;
                match key.nw_proto {
                    IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP => {
                        w.tp_src = key.tp_src;
                        w.tp_dst = key.tp_dst;
                    }
                    IPPROTO_ICMP => {
                        w.tp_src = key.tp_src & 0xff;
                        w.tp_dst = key.tp_dst & 0xff;
                    }
                    _ => {}
                }
                if key.nw_proto == IPPROTO_TCP {
                    w.tcp_flags = key.tcp_flags & TCP_FLAGS_MASK;
                }
            }
            ETH_TYPE_VLAN | ETH_TYPE_VLAN_8021AD => {
                // The type field announces a tag; the zero padding after it reads as TCI 0 followed
                // by an 802.3 length of 0.
                if w.vlan_tci == 0 {
                    w.vlan_tci = VLAN_CFI;
                }
                w.dl_type = FLOW_DL_TYPE_NONE;
            }
            t if t < ETH_TYPE_MIN => w.dl_type = FLOW_DL_TYPE_NONE,
            _ => {}
        }
        w
    }
}

/// The smallest Ethernet frame carrying `key`: its headers zero-padded to [`MIN_FRAME_LEN`] bytes
/// (no FCS; only a VLAN-tagged TCP or SCTP first fragment needs 62). The fields of the key it
/// carries are `key.wire()`.
///
/// Layout: destination and source MAC; an 802.1Q tag with `vlan_tci & !VLAN_CFI` when `vlan_tci`
/// has [`VLAN_CFI`] set; `dl_type`; then for IPv4 a 20-byte header (TOS `nw_tos`, TTL 64, id 0,
/// checksum, TTL `nw_ttl` or 64 for 0) followed by a TCP header (data offset 5, flags `tcp_flags`, window 65535), a UDP
/// header, an SCTP common header or an 8-byte ICMP header (type and code the low bytes of
/// `tp_src`/`tp_dst`), all checksummed, and no payload; for other IP protocols no payload at all.
/// Fragments: `FLOW_NW_FRAG_LATER` → fragment offset 1480 bytes and no L4 header;
/// `FLOW_NW_FRAG_ANY` alone → MF set, offset 0, the L4 header padded to a multiple of 8 bytes. ARP
/// and RARP keys get an Ethernet/IPv4 ARP body (opcode `nw_proto`, sender `arp_sha`/`nw_src`,
/// target `arp_tha`/`nw_dst`); IPv6 keys the packet `ipv6::push_ipv6` documents (a 40-byte
/// header, a fragment header for fragments, TCP/UDP/SCTP/ICMPv6 with ND's target and SLL/TLL
/// options); every other ethertype only zero padding.
pub fn build_frame(key: &FlowKey) -> Vec<u8> {
    let mut frame = Vec::with_capacity(MIN_FRAME_LEN);
    frame.extend_from_slice(&key.dl_dst);
    frame.extend_from_slice(&key.dl_src);
    if key.vlan_tci & VLAN_CFI != 0 {
        frame.extend_from_slice(&ETH_TYPE_VLAN.to_be_bytes());
        frame.extend_from_slice(&(key.vlan_tci & !VLAN_CFI).to_be_bytes());
    }
    frame.extend_from_slice(&key.dl_type.to_be_bytes());
    match key.dl_type {
        ETH_TYPE_IP => push_ipv4(&mut frame, key),
        ETH_TYPE_IPV6 => ipv6::push_ipv6(&mut frame, key),
        ETH_TYPE_ARP | ETH_TYPE_RARP => push_arp(&mut frame, key),
        _ => {}
    }
    if frame.len() < MIN_FRAME_LEN {
        frame.resize(MIN_FRAME_LEN, 0);
    }
    frame
}

fn push_arp(frame: &mut Vec<u8>, key: &FlowKey) {
    frame.extend_from_slice(&[0, 1]); // hardware: Ethernet
    frame.extend_from_slice(&ETH_TYPE_IP.to_be_bytes());
    frame.extend_from_slice(&[6, 4]);
    frame.extend_from_slice(&u16::from(key.nw_proto).to_be_bytes());
    frame.extend_from_slice(&key.arp_sha);
    frame.extend_from_slice(&key.nw_src.to_be_bytes());
    frame.extend_from_slice(&key.arp_tha);
    frame.extend_from_slice(&key.nw_dst.to_be_bytes());
}

fn push_ipv4(frame: &mut Vec<u8>, key: &FlowKey) {
    let later = key.nw_frag & FLOW_NW_FRAG_LATER != 0;
    let first = !later && key.nw_frag & FLOW_NW_FRAG_ANY != 0;
    let mut l4 = if later { Vec::new() } else { l4_header(key) };
    let frag = if later {
        LATER_FRAGMENT_OFFSET
    } else if first {
        l4.resize(l4.len().div_ceil(8) * 8, 0);
        IP_MORE_FRAGMENTS
    } else {
        0
    };
    let total_len = (IPV4_HEADER_LEN + l4.len()) as u16;
    let mut ip = [0u8; IPV4_HEADER_LEN];
    ip[0] = 0x45;
    ip[1] = key.nw_tos;
    ip[2..4].copy_from_slice(&total_len.to_be_bytes());
    ip[6..8].copy_from_slice(&frag.to_be_bytes());
    ip[8] = ttl_on_wire(key.nw_ttl);
    ip[9] = key.nw_proto;
    ip[12..16].copy_from_slice(&key.nw_src.to_be_bytes());
    ip[16..20].copy_from_slice(&key.nw_dst.to_be_bytes());
    let checksum = fold(sum16(0, &ip));
    ip[10..12].copy_from_slice(&checksum.to_be_bytes());
    if !later {
        l4_checksum(key, &mut l4);
    }
    frame.extend_from_slice(&ip);
    frame.extend_from_slice(&l4);
}

/// The L4 header of a key, checksum fields zero.
fn l4_header(key: &FlowKey) -> Vec<u8> {
    let ports = |h: &mut Vec<u8>| {
        h.extend_from_slice(&key.tp_src.to_be_bytes());
        h.extend_from_slice(&key.tp_dst.to_be_bytes());
    };
    let mut h = Vec::with_capacity(TCP_HEADER_LEN);
    match key.nw_proto {
        IPPROTO_TCP => {
            ports(&mut h);
            h.extend_from_slice(&[0; 8]); // sequence and acknowledgement numbers
            h.extend_from_slice(&((5 << 12) | (key.tcp_flags & TCP_FLAGS_MASK)).to_be_bytes());
            h.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]); // window, checksum, urgent pointer
        }
        IPPROTO_UDP => {
            ports(&mut h);
            h.extend_from_slice(&(UDP_HEADER_LEN as u16).to_be_bytes());
            h.extend_from_slice(&[0, 0]);
        }
        IPPROTO_SCTP => {
            ports(&mut h);
            h.extend_from_slice(&[0; 8]); // verification tag, checksum
        }
        IPPROTO_ICMP => {
            h.extend_from_slice(&[key.tp_src as u8, key.tp_dst as u8]);
            h.extend_from_slice(&[0; 6]); // checksum, rest of header
        }
        _ => {}
    }
    h
}

/// Fills the checksum of the L4 header `l4` (the whole IP payload).
fn l4_checksum(key: &FlowKey, l4: &mut [u8]) {
    let checksum_at = match key.nw_proto {
        IPPROTO_TCP => 16,
        IPPROTO_UDP => 6,
        IPPROTO_ICMP => 2,
        IPPROTO_SCTP => {
            let crc = crc32c(l4);
            if let Some(field) = l4.get_mut(8..12) {
                field.copy_from_slice(&crc.to_le_bytes());
            }
            return;
        }
        _ => return,
    };
    let pseudo_header = if key.nw_proto == IPPROTO_ICMP {
        0
    } else {
        let mut p = [0u8; 12];
        p[0..4].copy_from_slice(&key.nw_src.to_be_bytes());
        p[4..8].copy_from_slice(&key.nw_dst.to_be_bytes());
        p[9] = key.nw_proto;
        p[10..12].copy_from_slice(&(l4.len() as u16).to_be_bytes());
        sum16(0, &p)
    };
    let mut checksum = fold(sum16(pseudo_header, l4));
    if key.nw_proto == IPPROTO_UDP && checksum == 0 {
        checksum = 0xffff;
    }
    if let Some(field) = l4.get_mut(checksum_at..checksum_at + 2) {
        field.copy_from_slice(&checksum.to_be_bytes());
    }
}

/// One's-complement sum of big-endian 16-bit words (odd length: zero-padded), not folded.
pub(crate) fn sum16(mut acc: u64, data: &[u8]) -> u64 {
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        if let [hi, lo] = *w {
            acc += u64::from(u16::from_be_bytes([hi, lo]));
        }
    }
    if let [last] = *words.remainder() {
        acc += u64::from(last) << 8;
    }
    acc
}

/// Folds a [`sum16`] into the Internet checksum (its one's complement).
pub(crate) fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// CRC32c (Castagnoli), as SCTP uses it (RFC 4960 appendix B).
pub(crate) fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82f6_3b78 } else { crc >> 1 };
        }
    }
    !crc
}
