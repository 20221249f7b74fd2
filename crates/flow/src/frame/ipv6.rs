//! IPv6 in frames: the capture parser's and the datapath's IPv6 branch, and what
//! [`super::build_frame`] writes for an IPv6 key (see the module documentation of
//! [`crate::frame`] for the semantics, which are those of OVS 3.1's `miniflow_extract`,
//! `parse_ipv6_ext_hdrs__` and `parse_icmpv6`).

use super::{fold, l4_header, sum16, Extract, SCTP_HEADER_LEN, TCP_HEADER_LEN, UDP_HEADER_LEN};
use crate::key::{
    FlowKey, FLOW_NW_FRAG_ANY, FLOW_NW_FRAG_LATER, IPPROTO_ICMPV6, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP,
    IPV6_LABEL_MASK, TCP_FLAGS_MASK,
};

pub(super) const IPV6_HEADER_LEN: usize = 40;
/// IPv6 extension headers OVS skips, by next-header number.
pub const IPPROTO_HOPOPTS: u8 = 0;
pub const IPPROTO_ROUTING: u8 = 43;
pub const IPPROTO_FRAGMENT: u8 = 44;
pub const IPPROTO_AH: u8 = 51;
pub const IPPROTO_DSTOPTS: u8 = 60;
/// IPv6 "no next header".
pub const IPPROTO_NONE: u8 = 59;
/// ICMPv6 neighbour solicitation and advertisement.
pub const ND_NEIGHBOR_SOLICIT: u8 = 135;
pub const ND_NEIGHBOR_ADVERT: u8 = 136;
const ND_OPT_SOURCE_LINKADDR: u8 = 1;
const ND_OPT_TARGET_LINKADDR: u8 = 2;
/// The fixed ICMPv6 header OVS needs before it reads type and code (`icmp6_data_header`).
const ICMPV6_HEADER_LEN: usize = 8;
const FRAGMENT_HEADER_LEN: usize = 8;
/// Offset-and-flags of the fragment header: offset bits (the low three are reserved and M).
const IP6F_OFF_MASK: u16 = 0xfff8;
const IP6F_MORE_FRAG: u16 = 0x0001;
/// Fragment offset [`super::build_frame`] gives a later fragment (in bytes: 1448, a multiple of 8).
const LATER_FRAGMENT_OFFSET: u16 = 1448;

/// True for the next-header values OVS walks through as extension headers.
pub(super) fn is_ext_header(proto: u8) -> bool {
    matches!(proto, IPPROTO_HOPOPTS | IPPROTO_ROUTING | IPPROTO_DSTOPTS | IPPROTO_AH | IPPROTO_FRAGMENT)
}

/// OVS's `parse_ipv6_ext_hdrs__` over `data` (the bytes after the fixed header, up to the payload
/// length): `(nw_proto, nw_frag, offset of the upper-layer header)`, or `None` when an extension
/// header is cut short. A later fragment stops the walk with `nw_proto` = 44, as in OVS.
pub(super) fn ext_headers(data: &[u8], mut proto: u8) -> Option<(u8, u8, usize)> {
    let mut at = 0usize;
    let mut frag = 0u8;
    while is_ext_header(proto) {
        let h = data.get(at..).and_then(<[u8]>::first_chunk::<8>)?;
        let len = match proto {
            IPPROTO_AH => (usize::from(h[1]) + 2) * 4,
            IPPROTO_FRAGMENT => FRAGMENT_HEADER_LEN,
            _ => (usize::from(h[1]) + 1) * 8,
        };
        let next = h[0];
        if data.len() - at < len {
            return None;
        }
        at += len;
        if proto == IPPROTO_FRAGMENT {
            let offlg = u16::from_be_bytes([h[2], h[3]]);
            if offlg != 0 {
                frag = FLOW_NW_FRAG_ANY;
                if offlg & IP6F_OFF_MASK != 0 {
                    return Some((IPPROTO_FRAGMENT, frag | FLOW_NW_FRAG_LATER, at));
                }
            }
        }
        proto = next;
    }
    Some((proto, frag, at))
}

/// OVS's `parse_icmpv6` on the bytes after an ICMPv6 neighbour solicitation's or advertisement's
/// first 8 bytes: the target, then the SLL/TLL options (8 bytes each) into `arp_sha`/`arp_tha`.
/// A target cut short leaves it and the options zero; an option of length 0 or past the end ends
/// the walk (what was read stays); a second SLL or TLL option zeroes the target and both
/// addresses. Other options are skipped; an SLL/TLL option of another length is skipped too.
fn nd(key: &mut FlowKey, body: &[u8]) {
    let Some(target) = body.first_chunk::<16>() else { return };
    let mut sll = [0u8; 6];
    let mut tll = [0u8; 6];
    let mut opts = &body[16..];
    while let Some(o) = opts.first_chunk::<8>() {
        let len = usize::from(o[1]) * 8;
        if len == 0 || len > opts.len() {
            break;
        }
        let mac = [o[2], o[3], o[4], o[5], o[6], o[7]];
        let slot = match o[0] {
            ND_OPT_SOURCE_LINKADDR if len == 8 => Some(&mut sll),
            ND_OPT_TARGET_LINKADDR if len == 8 => Some(&mut tll),
            _ => None,
        };
        if let Some(slot) = slot {
            if *slot != [0; 6] {
                // OVS: the same option twice is invalid; no ND fields at all.
                return;
            }
            *slot = mac;
        }
        opts = &opts[len..];
    }
    key.nd_target = u128::from_be_bytes(*target);
    key.arp_sha = sll;
    key.arp_tha = tll;
}

fn is_nd(icmp_type: u8, code: u8) -> bool {
    code == 0 && matches!(icmp_type, ND_NEIGHBOR_SOLICIT | ND_NEIGHBOR_ADVERT)
}

/// The addresses (OVS pushes them before it walks the extension headers).
fn header_fields(key: &mut FlowKey, h: &[u8; IPV6_HEADER_LEN]) {
    key.ipv6_src = u128::from_be_bytes(h[8..24].try_into().unwrap_or_default());
    key.ipv6_dst = u128::from_be_bytes(h[24..40].try_into().unwrap_or_default());
}

/// The fields OVS sets once the extension headers are walked.
fn flow_fields(key: &mut FlowKey, h: &[u8; IPV6_HEADER_LEN], proto: u8, frag: u8) {
    let vtcfl = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
    key.ipv6_label = vtcfl & IPV6_LABEL_MASK;
    key.nw_tos = (vtcfl >> 20) as u8;
    key.nw_ttl = h[7];
    key.nw_proto = proto;
    key.nw_frag = frag;
}

/// The capture parser's IPv6 branch ([`super::extract`]): cut headers are
/// [`Extract::Truncated`], a version other than 6 [`Extract::Malformed`]; a payload length of 0
/// or beyond the captured bytes uses the frame's end (snap lengths, TSO), as for IPv4.
pub(super) fn extract_ipv6(mut key: FlowKey, ip: &[u8]) -> Extract {
    let Some(h) = ip.first_chunk::<IPV6_HEADER_LEN>() else {
        return Extract::Truncated { layer: "ipv6" };
    };
    if h[0] >> 4 != 6 {
        return Extract::Malformed { layer: "ipv6", reason: "version field is not 6" };
    }
    let plen = usize::from(u16::from_be_bytes([h[4], h[5]]));
    let rest = &ip[IPV6_HEADER_LEN..];
    let payload = if plen == 0 { rest } else { &rest[..plen.min(rest.len())] };
    header_fields(&mut key, h);
    let Some((proto, frag, at)) = ext_headers(payload, h[6]) else {
        return Extract::Truncated { layer: "ipv6 extension header" };
    };
    flow_fields(&mut key, h, proto, frag);
    if frag & FLOW_NW_FRAG_LATER != 0 {
        return Extract::Other(key);
    }
    let l4 = &payload[at..];
    let short = |layer| Extract::Truncated { layer };
    match proto {
        IPPROTO_TCP => {
            let Some(t) = l4.first_chunk::<TCP_HEADER_LEN>() else { return short("tcp") };
            if t[12] >> 4 < 5 {
                return Extract::Malformed { layer: "tcp", reason: "data offset below 5 words" };
            }
            key.tp_src = u16::from_be_bytes([t[0], t[1]]);
            key.tp_dst = u16::from_be_bytes([t[2], t[3]]);
            key.tcp_flags = u16::from_be_bytes([t[12], t[13]]) & TCP_FLAGS_MASK;
        }
        IPPROTO_UDP | IPPROTO_SCTP => {
            let need = if proto == IPPROTO_UDP { UDP_HEADER_LEN } else { SCTP_HEADER_LEN };
            if l4.len() < need {
                return short(if proto == IPPROTO_UDP { "udp" } else { "sctp" });
            }
            key.tp_src = u16::from_be_bytes([l4[0], l4[1]]);
            key.tp_dst = u16::from_be_bytes([l4[2], l4[3]]);
        }
        IPPROTO_ICMPV6 => {
            let Some(i) = l4.first_chunk::<ICMPV6_HEADER_LEN>() else { return short("icmpv6") };
            key.tp_src = u16::from(i[0]);
            key.tp_dst = u16::from(i[1]);
            if is_nd(i[0], i[1]) {
                nd(&mut key, &l4[ICMPV6_HEADER_LEN..]);
            }
        }
        _ => {}
    }
    Extract::Other(key)
}

/// The datapath's IPv6 branch ([`super::extract_datapath`]), as OVS: a header shorter than 40
/// bytes or a payload length past the frame → no IPv6 fields; an extension header cut short →
/// the addresses only; a short L4 header → no L4 fields; fragments get no ports (as IPv4).
pub(super) fn datapath_ipv6(mut key: FlowKey, ip: &[u8]) -> FlowKey {
    let Some(h) = ip.first_chunk::<IPV6_HEADER_LEN>() else { return key };
    let plen = usize::from(u16::from_be_bytes([h[4], h[5]]));
    let Some(payload) = ip.get(IPV6_HEADER_LEN..IPV6_HEADER_LEN + plen) else { return key };
    header_fields(&mut key, h);
    let Some((proto, frag, at)) = ext_headers(payload, h[6]) else { return key };
    flow_fields(&mut key, h, proto, frag);
    if frag & FLOW_NW_FRAG_LATER != 0 {
        return key;
    }
    let l4 = &payload[at..];
    let ports = frag == 0;
    let port_pair = |key: &mut FlowKey, a: u16, b: u16| {
        if ports {
            (key.tp_src, key.tp_dst) = (a, b);
        }
    };
    match proto {
        IPPROTO_TCP => {
            if let Some(t) = l4.first_chunk::<TCP_HEADER_LEN>() {
                let data_offset = usize::from(t[12] >> 4) * 4;
                if data_offset >= TCP_HEADER_LEN && l4.len() >= data_offset {
                    port_pair(&mut key, u16::from_be_bytes([t[0], t[1]]), u16::from_be_bytes([t[2], t[3]]));
                    key.tcp_flags = u16::from_be_bytes([t[12], t[13]]) & TCP_FLAGS_MASK;
                }
            }
        }
        IPPROTO_UDP | IPPROTO_SCTP => {
            let need = if proto == IPPROTO_UDP { UDP_HEADER_LEN } else { SCTP_HEADER_LEN };
            if l4.len() >= need {
                port_pair(&mut key, u16::from_be_bytes([l4[0], l4[1]]), u16::from_be_bytes([l4[2], l4[3]]));
            }
        }
        IPPROTO_ICMPV6 => {
            if let Some(i) = l4.first_chunk::<ICMPV6_HEADER_LEN>() {
                port_pair(&mut key, u16::from(i[0]), u16::from(i[1]));
                if is_nd(i[0], i[1]) {
                    nd(&mut key, &l4[ICMPV6_HEADER_LEN..]);
                }
            }
        }
        _ => {}
    }
    key
}

/// What of an IPv6 key a frame carries (the IPv6 part of [`FlowKey::wire`]); `w` has the L2
/// fields already.
pub(super) fn wire_ipv6(key: &FlowKey, w: &mut FlowKey) {
    w.ipv6_src = key.ipv6_src;
    w.ipv6_dst = key.ipv6_dst;
    w.ipv6_label = key.ipv6_label & IPV6_LABEL_MASK;
    w.nw_tos = key.nw_tos;
    w.nw_ttl = super::ttl_on_wire(key.nw_ttl);
    if key.nw_frag & FLOW_NW_FRAG_LATER != 0 {
        w.nw_frag = FLOW_NW_FRAG_ANY | FLOW_NW_FRAG_LATER;
        w.nw_proto = IPPROTO_FRAGMENT;
        return;
    }
    w.nw_frag = key.nw_frag & FLOW_NW_FRAG_ANY;
    w.nw_proto = if is_ext_header(key.nw_proto) { IPPROTO_NONE } else { key.nw_proto };
    match w.nw_proto {
        IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP => {
            w.tp_src = key.tp_src;
            w.tp_dst = key.tp_dst;
            if key.nw_proto == IPPROTO_TCP {
                w.tcp_flags = key.tcp_flags & TCP_FLAGS_MASK;
            }
        }
        IPPROTO_ICMPV6 => {
            w.tp_src = key.tp_src & 0xff;
            w.tp_dst = key.tp_dst & 0xff;
            if is_nd(w.tp_src as u8, w.tp_dst as u8) {
                w.nd_target = key.nd_target;
                w.arp_sha = key.arp_sha;
                w.arp_tha = key.arp_tha;
            }
        }
        _ => {}
    }
}

/// The IPv6 packet [`super::build_frame`] writes for `key` (the bytes after the ethertype).
///
/// A 40-byte header (traffic class `nw_tos`, label `ipv6_label`, hop limit `nw_ttl` or 64 when
/// it is 0); a fragment header for fragments (first: M set, offset 0; later: offset 1448, no
/// upper-layer header); an empty extension header (next header 59) when `nw_proto` is itself an
/// extension header number; then the TCP/UDP/SCTP header of [`super::build_frame`] or an ICMPv6
/// header (8 bytes; for ND, type 135/136 code 0: the target and an SLL option when `arp_sha` is
/// not zero, a TLL option when `arp_tha` is not zero), checksummed over the IPv6 pseudo-header.
pub(super) fn push_ipv6(frame: &mut Vec<u8>, key: &FlowKey) {
    let later = key.nw_frag & FLOW_NW_FRAG_LATER != 0;
    let first = !later && key.nw_frag & FLOW_NW_FRAG_ANY != 0;
    let mut upper = Vec::new();
    let upper_proto = if later {
        key.nw_proto
    } else if is_ext_header(key.nw_proto) {
        // An empty extension header of that type announcing "no next header": 8 bytes, which is a
        // length field of 0 for AH ((0 + 2) * 4) and the others ((0 + 1) * 8), and for a fragment
        // header offset and flags 0 (not a fragment).
        upper = vec![IPPROTO_NONE, 0, 0, 0, 0, 0, 0, 0];
        key.nw_proto
    } else {
        upper = match key.nw_proto {
            IPPROTO_ICMPV6 => icmpv6_header(key),
            _ => l4_header(key),
        };
        upper_checksum(key, &mut upper);
        key.nw_proto
    };
    let mut payload = Vec::with_capacity(FRAGMENT_HEADER_LEN + upper.len());
    let next = if later || first {
        let offlg = if later { LATER_FRAGMENT_OFFSET } else { IP6F_MORE_FRAG };
        payload.extend_from_slice(&[upper_proto, 0]);
        payload.extend_from_slice(&offlg.to_be_bytes());
        payload.extend_from_slice(&[0, 0, 0, 0]); // identification
        IPPROTO_FRAGMENT
    } else {
        upper_proto
    };
    if !later {
        payload.extend_from_slice(&upper);
    }
    let vtcfl = 6u32 << 28 | u32::from(key.nw_tos) << 20 | key.ipv6_label & IPV6_LABEL_MASK;
    frame.extend_from_slice(&vtcfl.to_be_bytes());
    frame.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    frame.extend_from_slice(&[next, super::ttl_on_wire(key.nw_ttl)]);
    frame.extend_from_slice(&key.ipv6_src.to_be_bytes());
    frame.extend_from_slice(&key.ipv6_dst.to_be_bytes());
    frame.extend_from_slice(&payload);
}

/// An ICMPv6 header for `key`, checksum zero (see [`push_ipv6`]).
fn icmpv6_header(key: &FlowKey) -> Vec<u8> {
    let (t, c) = (key.tp_src as u8, key.tp_dst as u8);
    let mut h = vec![t, c, 0, 0, 0, 0, 0, 0];
    if is_nd(t, c) {
        h.extend_from_slice(&key.nd_target.to_be_bytes());
        for (kind, mac) in [(ND_OPT_SOURCE_LINKADDR, key.arp_sha), (ND_OPT_TARGET_LINKADDR, key.arp_tha)] {
            if mac != [0; 6] {
                h.extend_from_slice(&[kind, 1]);
                h.extend_from_slice(&mac);
            }
        }
    }
    h
}

/// Fills the checksum of an upper-layer header over the IPv6 pseudo-header (RFC 8200 8.1;
/// ICMPv6 included, unlike ICMPv4), or SCTP's CRC32c.
fn upper_checksum(key: &FlowKey, l4: &mut [u8]) {
    let at = match key.nw_proto {
        IPPROTO_TCP => 16,
        IPPROTO_UDP => 6,
        IPPROTO_ICMPV6 => 2,
        IPPROTO_SCTP => {
            let crc = super::crc32c(l4);
            if let Some(field) = l4.get_mut(8..12) {
                field.copy_from_slice(&crc.to_le_bytes());
            }
            return;
        }
        _ => return,
    };
    if key.nw_proto == IPPROTO_UDP {
        if let Some(len) = l4.get_mut(4..6) {
            len.copy_from_slice(&(UDP_HEADER_LEN as u16).to_be_bytes());
        }
    }
    let mut pseudo = [0u8; 40];
    pseudo[0..16].copy_from_slice(&key.ipv6_src.to_be_bytes());
    pseudo[16..32].copy_from_slice(&key.ipv6_dst.to_be_bytes());
    pseudo[32..36].copy_from_slice(&(l4.len() as u32).to_be_bytes());
    pseudo[39] = key.nw_proto;
    let mut sum = fold(sum16(sum16(0, &pseudo), l4));
    if key.nw_proto == IPPROTO_UDP && sum == 0 {
        sum = 0xffff;
    }
    if let Some(field) = l4.get_mut(at..at + 2) {
        field.copy_from_slice(&sum.to_be_bytes());
    }
}
