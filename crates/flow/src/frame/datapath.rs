//! [`extract_datapath`]: the key of a frame arriving at a switch port, exactly as Open vSwitch
//! 3.1's userspace datapath makes it (`miniflow_extract` with the default
//! `other_config:vlan-limit=1`).
//!
//! A datapath classifies every frame it receives: a header that is cut short or contradicts
//! itself does not make the frame an error (as it does for a capture, [`super::extract`]); that
//! header's fields, and those of every header after it, stay zero and the frame is classified
//! on the rest. Only a frame shorter than an Ethernet header has no key (OVS's `dfc_processing`
//! drops it as an invalid packet). Checked against real OVS 3.1's `ofproto/trace` on crafted and
//! randomly damaged frames (`crates/switch/tests/ovs_frames.rs`, frames and actions both).
//!
//! What OVS does, field by field, where it differs from the capture parser:
//! - **VLAN**: one tag is parsed (TPID 0x8100 or 0x88a8), and only when the tag and the type
//!   field after it are both in the frame; `dl_type` is the type after that one tag, so a QinQ
//!   frame has `dl_type` 0x8100 and no L3 fields. A tag cut short leaves the frame untagged with
//!   `dl_type` 0x8100.
//! - **IPv4** header (OVS's `ipv4_sanity_check`): at least 20 bytes, IHL ≥ 5 words and all of it
//!   present, total length neither beyond the frame nor shorter than the header; otherwise
//!   `dl_type` stays 0x0800 and `nw_*`/`tp_*` are all zero. The version field is not read. Bytes
//!   after the total length are padding, however many.
//! - **TCP** ports and flags need the whole header including its options (data offset ≥ 5 words,
//!   all present); UDP, SCTP and ICMP their fixed headers. A short L4 header leaves `tp_src`,
//!   `tp_dst` and `tcp_flags` zero, the IPv4 fields set.
//! - **IPv6** (`ipv6_sanity_check`): at least 40 bytes and the payload length within the frame;
//!   otherwise no IPv6 fields. An extension header cut short (fewer than 8 bytes, or its length
//!   past the payload) leaves `ipv6_src`/`ipv6_dst` set and every other L3/L4 field zero (OVS
//!   pushes the addresses before it walks the extension headers). ICMPv6 type and code need the
//!   8-byte header. The version field is not read.
//! - **ARP** shorter than its 28-byte Ethernet/IPv4 body keeps the L2 fields only.
//! - **First fragments** (IPv4 and IPv6) keep `tcp_flags` (and ND fields) but get `tp_src`/`tp_dst` 0. Here rqvs's key is not
//!   `miniflow_extract`'s (which keeps the ports) but what OVS classifies: with the default
//!   fragment handling ("normal"), its slow path "pretends that transport ports are
//!   unavailable" for every fragment (`xlate_actions`), so no rule on ports can match one.
//!
//! One departure, on purpose: OVS also writes an IGMP message's type and code into
//! `tp_src`/`tp_dst`; rqvs leaves them zero. No OpenFlow match can read them there (`tp_src` and
//! `tp_dst` need `tcp`, `udp`, `sctp` or `icmp`), so no rule table can tell the difference.

use super::{arp, llc_snap, Extract, ETH_HEADER_LEN, ETH_TYPE_VLAN_8021AD, IPV4_HEADER_LEN, VLAN_HEADER_LEN};
use super::{ETH_TYPE_MIN, ETH_TYPE_RARP, ICMP_HEADER_LEN, SCTP_HEADER_LEN, TCP_HEADER_LEN, UDP_HEADER_LEN};
use super::{IP_FRAG_OFF_MASK, IP_MORE_FRAGMENTS};
use crate::key::{
    FlowKey, ETH_TYPE_ARP, ETH_TYPE_IP, ETH_TYPE_IPV6, ETH_TYPE_VLAN, FLOW_NW_FRAG_ANY, FLOW_NW_FRAG_LATER,
    IPPROTO_ICMP, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP, TCP_FLAGS_MASK, VLAN_CFI,
};

/// The key of `frame` received on `in_port`, as OVS's userspace datapath makes it (module
/// docs); `None` only for a frame shorter than an Ethernet header.
pub fn extract_datapath(frame: &[u8], in_port: u32) -> Option<FlowKey> {
    let eth = frame.first_chunk::<ETH_HEADER_LEN>()?;
    let mut key = FlowKey {
        in_port,
        dl_dst: [eth[0], eth[1], eth[2], eth[3], eth[4], eth[5]],
        dl_src: [eth[6], eth[7], eth[8], eth[9], eth[10], eth[11]],
        ..FlowKey::default()
    };
    let l2 = L2::of(frame);
    key.vlan_tci = l2.vlan_tci(frame);
    let dl_type = l2.dl_type;
    key.dl_type = dl_type;
    let l3 = frame.get(l2.l3..).unwrap_or_default();
    Some(match dl_type {
        ETH_TYPE_IP => ipv4(key, l3),
        ETH_TYPE_IPV6 => super::ipv6::datapath_ipv6(key, l3),
        ETH_TYPE_ARP | ETH_TYPE_RARP => match arp(key, l3) {
            Extract::Other(k) => k,
            _ => key,
        },
        _ => key,
    })
}

/// The `vlan_tci` of `frame`'s key ([`extract_datapath`]'s: the tag's TCI with `VLAN_CFI`, 0
/// when untagged or shorter than an Ethernet header), without the rest of the key.
pub fn vlan_tci_of(frame: &[u8]) -> u16 {
    if frame.len() < ETH_HEADER_LEN {
        return 0;
    }
    L2::of(frame).vlan_tci(frame)
}

/// The Ethernet part of a frame of at least [`ETH_HEADER_LEN`] bytes, walked as OVS's
/// `parse_vlan` (limit one tag) and `parse_ethertype` do.
#[derive(Clone, Copy, Debug)]
pub(crate) struct L2 {
    /// Offset of the tag's TCI: one VLAN tag (TPID 0x8100 or 0x88a8) whose TCI and following
    /// type field are both in the frame.
    pub vlan: Option<usize>,
    /// Offset of the type field read for `dl_type` (12, or 16 after the tag).
    pub ethertype: usize,
    /// `dl_type` (an 802.3 frame's LLC/SNAP ethertype, or [`super::FLOW_DL_TYPE_NONE`]).
    pub dl_type: u16,
    /// Offset of the L3 header (after the type field, and after an LLC/SNAP header).
    pub l3: usize,
}

impl L2 {
    /// The key's `vlan_tci` of the frame this is of.
    fn vlan_tci(&self, frame: &[u8]) -> u16 {
        self.vlan.map_or(0, |t| u16::from_be_bytes([frame[t], frame[t + 1]]) | VLAN_CFI)
    }

    pub(crate) fn of(frame: &[u8]) -> L2 {
        let tpid = u16::from_be_bytes([frame[12], frame[13]]);
        let tagged = (tpid == ETH_TYPE_VLAN || tpid == ETH_TYPE_VLAN_8021AD) && frame.len() >= 12 + VLAN_HEADER_LEN + 2;
        let (vlan, ethertype) = if tagged { (Some(14), 12 + VLAN_HEADER_LEN) } else { (None, 12) };
        let dl_type = u16::from_be_bytes([frame[ethertype], frame[ethertype + 1]]);
        let (dl_type, l3) =
            if dl_type < ETH_TYPE_MIN { llc_snap(frame, ethertype + 2) } else { (dl_type, ethertype + 2) };
        L2 { vlan, ethertype, dl_type, l3 }
    }
}

/// OVS's `ipv4_sanity_check` on the bytes from an IPv4 header's start to the frame's end: the
/// header length and the total length, or `None` when the header cannot be used (module docs).
pub(crate) fn ipv4_header(ip: &[u8]) -> Option<(usize, usize)> {
    let h = ip.first_chunk::<IPV4_HEADER_LEN>()?;
    let header_len = usize::from(h[0] & 0x0f) * 4;
    let total_len = usize::from(u16::from_be_bytes([h[2], h[3]]));
    (header_len >= IPV4_HEADER_LEN && ip.len() >= header_len && total_len <= ip.len() && header_len <= total_len)
        .then_some((header_len, total_len))
}

fn ipv4(mut key: FlowKey, ip: &[u8]) -> FlowKey {
    let Some((header_len, total_len)) = ipv4_header(ip) else { return key };
    key.nw_tos = ip[1];
    key.nw_ttl = ip[8];
    key.nw_proto = ip[9];
    key.nw_src = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
    key.nw_dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
    let frag = u16::from_be_bytes([ip[6], ip[7]]);
    if frag & (IP_MORE_FRAGMENTS | IP_FRAG_OFF_MASK) != 0 {
        key.nw_frag = FLOW_NW_FRAG_ANY;
        if frag & IP_FRAG_OFF_MASK != 0 {
            key.nw_frag |= FLOW_NW_FRAG_LATER;
            return key;
        }
    }
    let l4 = &ip[header_len..total_len];
    // A first fragment: no ports for classification (module docs); the TCP flags stay.
    let ports = key.nw_frag == 0;
    let port_pair = |key: &mut FlowKey, h: &[u8]| {
        if ports {
            key.tp_src = u16::from_be_bytes([h[0], h[1]]);
            key.tp_dst = u16::from_be_bytes([h[2], h[3]]);
        }
    };
    match key.nw_proto {
        IPPROTO_TCP => {
            // The whole header, options included.
            if let Some(t) = l4.first_chunk::<TCP_HEADER_LEN>() {
                let data_offset = usize::from(t[12] >> 4) * 4;
                if data_offset >= TCP_HEADER_LEN && l4.len() >= data_offset {
                    port_pair(&mut key, t);
                    key.tcp_flags = u16::from_be_bytes([t[12], t[13]]) & TCP_FLAGS_MASK;
                }
            }
        }
        IPPROTO_UDP => {
            if let Some(u) = l4.first_chunk::<UDP_HEADER_LEN>() {
                port_pair(&mut key, u);
            }
        }
        IPPROTO_SCTP => {
            if let Some(h) = l4.first_chunk::<SCTP_HEADER_LEN>() {
                port_pair(&mut key, h);
            }
        }
        IPPROTO_ICMP => {
            if let Some(i) = l4.first_chunk::<ICMP_HEADER_LEN>() {
                port_pair(&mut key, &[0, i[0], 0, i[1]]);
            }
        }
        _ => {}
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{build_frame, extract};
    use proptest::prelude::*;

    fn key_strategy() -> impl Strategy<Value = FlowKey> {
        let proto =
            prop_oneof![Just(IPPROTO_TCP), Just(IPPROTO_UDP), Just(IPPROTO_SCTP), Just(IPPROTO_ICMP), any::<u8>()];
        let dl_type = prop_oneof![4 => Just(ETH_TYPE_IP), 1 => Just(ETH_TYPE_ARP), 1 => any::<u16>()];
        (dl_type, proto, any::<[u32; 2]>(), any::<[u16; 3]>(), any::<u8>(), 0u8..4, any::<bool>(), any::<u16>())
            .prop_map(
                |(dl_type, nw_proto, [nw_src, nw_dst], [tp_src, tp_dst, tcp_flags], nw_tos, nw_frag, tagged, tci)| {
                    FlowKey {
                        in_port: 1,
                        dl_src: [2, 0, 0, 0, 0, 1],
                        dl_dst: [2, 0, 0, 0, 0, 2],
                        dl_type,
                        vlan_tci: if tagged { tci | VLAN_CFI } else { 0 },
                        nw_src,
                        nw_dst,
                        nw_proto,
                        nw_tos,
                        nw_frag,
                        tp_src,
                        tp_dst,
                        tcp_flags,
                        ..FlowKey::ZERO
                    }
                },
            )
    }

    proptest! {
        /// On whole, well-formed frames the datapath and the capture parser agree (but for a first
        /// fragment's ports), and both read back what `build_frame` wrote.
        #[test]
        fn whole_frames_read_as_captures_do(k in key_strategy()) {
            // A tagged frame whose type field announces a second tag is QinQ: the one place
            // the two parsers differ on purpose (the datapath reads one tag).
            let second_tag = matches!(k.dl_type, ETH_TYPE_VLAN | ETH_TYPE_VLAN_8021AD);
            prop_assume!(!(k.vlan_tci != 0 && second_tag));
            let f = build_frame(&k);
            let got = extract_datapath(&f, 1).unwrap();
            // A first fragment's ports are not classified on (module docs).
            let unported = |mut k: FlowKey| {
                if k.nw_frag != 0 {
                    (k.tp_src, k.tp_dst) = (0, 0);
                }
                k
            };
            prop_assert_eq!(got, unported(k.wire()));
            prop_assert_eq!(Some(got), extract(&f, 1).key().copied().map(unported));
        }

        /// Any bytes: never a panic; a key exactly when there is an Ethernet header; a frame cut
        /// anywhere keeps its L2 fields.
        #[test]
        fn cut_frames_keep_what_they_have(k in key_strategy(), cut in 0usize..64, noise in proptest::collection::vec(any::<u8>(), 0..80)) {
            let f = build_frame(&k);
            let cut = cut.min(f.len());
            let got = extract_datapath(&f[..cut], 1);
            prop_assert_eq!(got.is_some(), cut >= ETH_HEADER_LEN);
            if let Some(g) = got {
                prop_assert_eq!((g.dl_src, g.dl_dst), (k.dl_src, k.dl_dst));
            }
            prop_assert_eq!(extract_datapath(&noise, 3).is_some(), noise.len() >= ETH_HEADER_LEN);
        }
    }

    #[test]
    fn damaged_headers_zero_their_fields_as_ovs_does() {
        let k = FlowKey::ipv4(0x0a00_0001, 0x0a00_0002, IPPROTO_TCP, 1234, 80);
        let k = FlowKey { dl_type: ETH_TYPE_IP, tcp_flags: 0x012, ..k }.wire();
        let whole = build_frame(&k);
        let ip_only = FlowKey { tp_src: 0, tp_dst: 0, tcp_flags: 0, ..k };
        let l2_only = FlowKey { nw_src: 0, nw_dst: 0, nw_proto: 0, nw_ttl: 0, ..ip_only };
        let with = |at: usize, byte: u8| {
            let mut f = whole.clone();
            f[at] = byte;
            extract_datapath(&f, 1).unwrap()
        };
        // Version 6 in an IPv4 header: OVS does not look.
        assert_eq!(with(14, 0x65), k);
        // IHL 4, total length 0, total length past the frame: no IPv4 fields.
        assert_eq!(with(14, 0x44), l2_only);
        assert_eq!(with(17, 0), l2_only);
        assert_eq!(with(16, 1), l2_only);
        // TCP data offset 3, or 6 with no options: ports and flags zero.
        assert_eq!(with(46, 0x30), ip_only);
        assert_eq!(with(46, 0x60), ip_only);
        // Cut inside the TCP header (total length still says 40): no IPv4 fields.
        assert_eq!(extract_datapath(&whole[..50], 1).unwrap(), l2_only);
        // A second tag: dl_type is the inner TPID.
        let mut qinq = whole.clone();
        qinq.splice(12..12, [0x88, 0xa8, 0x20, 0x07, 0x81, 0x00, 0x00, 0x05]);
        let q = extract_datapath(&qinq, 1).unwrap();
        assert_eq!((q.vlan_tci, q.dl_type, q.nw_src), (0x2007 | VLAN_CFI, ETH_TYPE_VLAN, 0));
        assert_eq!(extract_datapath(&qinq[..17], 1).unwrap().vlan_tci, 0);
        assert_eq!(extract(&qinq, 1).key().unwrap().nw_src, k.nw_src, "captures read every tag");
    }
}
