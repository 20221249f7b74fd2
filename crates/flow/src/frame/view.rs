//! [`Frame`]: a zero-copy view over a frame's bytes that actions rewrite in place — the
//! `Packet` half of smoltcp's Packet/Repr split, whose `Repr` here is the [`FlowKey`]
//! ([`super::extract`] reads it; [`super::build_frame`] writes one).
//!
//! [`Frame::new_checked`] finds the headers once ([`Layout`]: the 802.1Q tag, the IPv4 header)
//! and every accessor and setter afterwards is bounds-safe by construction. Setters keep the
//! IPv4 header checksum right by incremental update (RFC 1624); the fields they touch (MACs,
//! the VLAN ID, TOS, TTL) are in no L4 checksum's pseudo-header, so L4 checksums stay valid.
//! IPv6 setters ([`Frame::set_ipv6_src`], [`Frame::set_ipv6_dst`]) update the TCP, UDP or
//! ICMPv6 checksum, whose pseudo-header holds the addresses; [`Frame::dec_hop_limit`] needs none.
//! Tag push/pop changes the length, so it works on a `Vec<u8>` ([`push_vlan`], [`strip_vlan`]).

use super::datapath::{ipv4_header, L2};
use super::ipv6::{ext_headers, IPV6_HEADER_LEN};
use super::{ETH_HEADER_LEN, VLAN_HEADER_LEN};
use crate::key::{
    ETH_TYPE_IP, ETH_TYPE_IPV6, ETH_TYPE_VLAN, FLOW_NW_FRAG_LATER, IPPROTO_ICMPV6, IPPROTO_TCP, IPPROTO_UDP,
    VLAN_VID_MASK,
};

/// Why a frame could not be viewed: a small `Copy` error for the hot path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Shorter than an Ethernet header.
    Truncated,
}

/// Where a frame's headers are (offsets into its bytes), found as OVS's userspace datapath
/// finds them (see [`super::extract_datapath`]): one VLAN tag, an LLC/SNAP header, the IPv4
/// header only when it passes OVS's sanity check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Offset of the (outer) VLAN tag's TCI, when tagged.
    pub vlan: Option<usize>,
    /// Offset of the type field that gives `dl_type` (the one after the tag).
    pub ethertype: usize,
    /// `dl_type` is IPv4 (0x0800), whether or not its header is usable.
    pub is_ipv4: bool,
    /// Offset of a usable IPv4 header: IHL ≥ 5 words, all of it present, total length neither
    /// past the frame nor shorter than the header (the version field is not read, as in OVS).
    pub ipv4: Option<usize>,
    /// Offset of a usable IPv6 header: 40 bytes with the payload length within the frame (OVS's
    /// `ipv6_sanity_check`; the version field is not read).
    pub ipv6: Option<usize>,
}

impl Layout {
    /// The layout of `b` (module docs).
    pub fn of(b: &[u8]) -> Result<Layout, FrameError> {
        if b.len() < ETH_HEADER_LEN {
            return Err(FrameError::Truncated);
        }
        let l2 = L2::of(b);
        let is_ipv4 = l2.dl_type == ETH_TYPE_IP;
        let ipv4 = (is_ipv4 && ipv4_header(&b[l2.l3..]).is_some()).then_some(l2.l3);
        let ipv6 = (l2.dl_type == ETH_TYPE_IPV6 && ipv6_payload(b, l2.l3).is_some()).then_some(l2.l3);
        Ok(Layout { vlan: l2.vlan, ethertype: l2.ethertype, is_ipv4, ipv4, ipv6 })
    }
}

/// The payload of the IPv6 header at `ip` (its offset range), when the header is usable.
fn ipv6_payload(b: &[u8], ip: usize) -> Option<std::ops::Range<usize>> {
    let plen = usize::from(be16(b, ip + 4)?);
    let start = ip + IPV6_HEADER_LEN;
    (b.len() >= start + plen).then_some(start..start + plen)
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 2).map(|x| u16::from_be_bytes([x[0], x[1]]))
}

/// A checked view over a frame's bytes (module docs).
#[derive(Debug)]
pub struct Frame<T> {
    buf: T,
    layout: Layout,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Views `buf` as an Ethernet frame, finding its headers once.
    pub fn new_checked(buf: T) -> Result<Frame<T>, FrameError> {
        let layout = Layout::of(buf.as_ref())?;
        Ok(Frame { buf, layout })
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    pub fn bytes(&self) -> &[u8] {
        self.buf.as_ref()
    }

    pub fn into_inner(self) -> T {
        self.buf
    }

    pub fn dl_dst(&self) -> [u8; 6] {
        self.mac(0)
    }

    pub fn dl_src(&self) -> [u8; 6] {
        self.mac(6)
    }

    fn mac(&self, at: usize) -> [u8; 6] {
        let b = self.buf.as_ref();
        [b[at], b[at + 1], b[at + 2], b[at + 3], b[at + 4], b[at + 5]]
    }

    /// The outer tag's VLAN ID, when tagged.
    pub fn vlan_vid(&self) -> Option<u16> {
        let at = self.layout.vlan?;
        be16(self.buf.as_ref(), at).map(|tci| tci & VLAN_VID_MASK)
    }

    /// The IPv4 TOS byte and TTL, for IPv4 frames.
    pub fn nw_tos(&self) -> Option<u8> {
        self.layout.ipv4.map(|ip| self.buf.as_ref()[ip + 1])
    }

    pub fn nw_ttl(&self) -> Option<u8> {
        self.layout.ipv4.map(|ip| self.buf.as_ref()[ip + 8])
    }

    /// The IPv4 protocol number, for IPv4 frames.
    pub fn nw_proto(&self) -> Option<u8> {
        self.layout.ipv4.map(|ip| self.buf.as_ref()[ip + 9])
    }

    /// Whether the IPv4 header checksum verifies (`None` for non-IPv4 frames).
    pub fn ipv4_checksum_ok(&self) -> Option<bool> {
        let ip = self.layout.ipv4?;
        let b = self.buf.as_ref();
        let ihl = usize::from(b[ip] & 0x0f) * 4;
        Some(super::fold(super::sum16(0, &b[ip..ip + ihl])) == 0)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    pub fn set_dl_dst(&mut self, mac: [u8; 6]) {
        self.buf.as_mut()[0..6].copy_from_slice(&mac);
    }

    pub fn set_dl_src(&mut self, mac: [u8; 6]) {
        self.buf.as_mut()[6..12].copy_from_slice(&mac);
    }

    /// Sets the outer tag's VLAN ID (priority and DEI kept). False when the frame is untagged.
    pub fn set_vlan_vid(&mut self, vid: u16) -> bool {
        let Some(at) = self.layout.vlan else { return false };
        let b = self.buf.as_mut();
        let tci = (u16::from_be_bytes([b[at], b[at + 1]]) & !VLAN_VID_MASK) | (vid & VLAN_VID_MASK);
        b[at..at + 2].copy_from_slice(&tci.to_be_bytes());
        true
    }

    /// Sets the IPv4 TOS byte's DSCP bits (OpenFlow's `mod_nw_tos`: the ECN bits are kept),
    /// updating the header checksum. False for non-IPv4 frames.
    pub fn set_nw_tos(&mut self, tos: u8) -> bool {
        if let (None, Some(ip)) = (self.layout.ipv4, self.layout.ipv6) {
            // IPv6's traffic class (bits 4..11 of the first word): its DSCP, ECN kept; no
            // header checksum.
            let b = self.buf.as_mut();
            let tc = (b[ip] << 4) | (b[ip + 1] >> 4);
            let tc = (tos & 0xfc) | (tc & 0x03);
            b[ip] = (b[ip] & 0xf0) | (tc >> 4);
            b[ip + 1] = (b[ip + 1] & 0x0f) | (tc << 4);
            return true;
        }
        let Some(ip) = self.layout.ipv4 else { return false };
        let b = self.buf.as_mut();
        let old = u16::from_be_bytes([b[ip], b[ip + 1]]);
        b[ip + 1] = (tos & 0xfc) | (b[ip + 1] & 0x03);
        let new = u16::from_be_bytes([b[ip], b[ip + 1]]);
        update_checksum(&mut b[ip + 10..ip + 12], old, new);
        true
    }

    /// Decrements the IPv4 TTL, updating the header checksum. `Some(ttl)` after the decrement
    /// — `Some(0)` means the packet must be dropped — or `None` for non-IPv4 frames. A TTL of
    /// 0 is left as it is (and reported as 0).
    pub fn dec_ttl(&mut self) -> Option<u8> {
        let ip = self.layout.ipv4?;
        let b = self.buf.as_mut();
        let ttl = b[ip + 8];
        if ttl == 0 {
            return Some(0);
        }
        let old = u16::from_be_bytes([b[ip + 8], b[ip + 9]]);
        b[ip + 8] = ttl - 1;
        let new = u16::from_be_bytes([b[ip + 8], b[ip + 9]]);
        update_checksum(&mut b[ip + 10..ip + 12], old, new);
        Some(ttl - 1)
    }
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// The IPv6 hop limit, for frames with a usable IPv6 header.
    pub fn hop_limit(&self) -> Option<u8> {
        self.layout.ipv6.map(|ip| self.buf.as_ref()[ip + 7])
    }

    /// The IPv6 source and destination, for frames with a usable IPv6 header.
    pub fn ipv6_addrs(&self) -> Option<(u128, u128)> {
        let ip = self.layout.ipv6?;
        let b = self.buf.as_ref();
        let a = |at: usize| u128::from_be_bytes(b[at..at + 16].try_into().unwrap_or_default());
        Some((a(ip + 8), a(ip + 24)))
    }

    /// Offset of the TCP, UDP or ICMPv6 checksum covering the IPv6 pseudo-header, when the
    /// packet has one in the frame (not a later fragment, extension headers intact), and
    /// whether it is UDP's (where 0 means "no checksum").
    fn ipv6_l4_checksum(&self) -> Option<(usize, bool)> {
        let ip = self.layout.ipv6?;
        let b = self.buf.as_ref();
        let payload = ipv6_payload(b, ip)?;
        let (proto, frag, at) = ext_headers(&b[payload.clone()], b[ip + 6])?;
        if frag & FLOW_NW_FRAG_LATER != 0 {
            return None;
        }
        let field = match proto {
            IPPROTO_TCP => 16,
            IPPROTO_UDP => 6,
            IPPROTO_ICMPV6 => 2,
            _ => return None,
        };
        let at = payload.start + at + field;
        (at + 2 <= payload.end).then_some((at, proto == IPPROTO_UDP))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Decrements the IPv6 hop limit (no header checksum in IPv6). As [`Frame::dec_ttl`]:
    /// `Some(limit)` after the decrement, `Some(0)` for a limit of 0 (left as it is), `None`
    /// without a usable IPv6 header.
    pub fn dec_hop_limit(&mut self) -> Option<u8> {
        let ip = self.layout.ipv6?;
        let b = self.buf.as_mut();
        b[ip + 7] = b[ip + 7].saturating_sub(1);
        Some(b[ip + 7])
    }

    /// Sets the IPv6 source address, updating the TCP, UDP or ICMPv6 checksum over the
    /// pseudo-header incrementally (RFC 1624; a UDP checksum of 0, "none", stays 0 and a
    /// computed 0 is written 0xffff). False without a usable IPv6 header.
    pub fn set_ipv6_src(&mut self, addr: u128) -> bool {
        self.set_ipv6_addr(8, addr)
    }

    /// Sets the IPv6 destination address (as [`Frame::set_ipv6_src`]).
    pub fn set_ipv6_dst(&mut self, addr: u128) -> bool {
        self.set_ipv6_addr(24, addr)
    }

    fn set_ipv6_addr(&mut self, offset: usize, addr: u128) -> bool {
        let Some(ip) = self.layout.ipv6 else { return false };
        let csum = self.ipv6_l4_checksum();
        let b = self.buf.as_mut();
        let at = ip + offset;
        let new = addr.to_be_bytes();
        if let Some((c, udp)) = csum {
            let none = udp && b[c..c + 2] == [0, 0];
            if !none {
                for i in (0..16).step_by(2) {
                    let old = u16::from_be_bytes([b[at + i], b[at + i + 1]]);
                    update_checksum(&mut b[c..c + 2], old, u16::from_be_bytes([new[i], new[i + 1]]));
                }
                if udp && b[c..c + 2] == [0, 0] {
                    b[c..c + 2].copy_from_slice(&[0xff, 0xff]);
                }
            }
        }
        b[at..at + 16].copy_from_slice(&new);
        true
    }
}

mod more_fields;

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// OpenFlow's `set_field` on the frame: field `f`'s bits under `mask` take `value`'s (both
    /// shifted to the field, as in [`crate::Action::SetField`]), checksums kept right (IPv4
    /// header; the TCP/UDP checksum over the IPv4 or IPv6 pseudo-header and the ports). False,
    /// nothing changed, when the frame lacks the field's header or the field is not one a frame
    /// view writes: the MACs, the VLAN's VID and PCP (tagged frames), IPv4's addresses, DSCP,
    /// ECN and TTL, IPv6's addresses and hop limit (`nw_ttl`), the TCP and UDP ports (not in a
    /// later fragment), and (`more_fields`) the SCTP ports (CRC32c), ICMPv4/ICMPv6 type and
    /// code, the IPv6 flow label, the ARP fields, the ND target and link-layer addresses.
    pub fn set_field(&mut self, f: &crate::field::Field, value: u128, mask: u128) -> bool {
        use crate::field::Member;
        let fm = (mask & f.all_ones()) << f.shift;
        let fv = (value << f.shift) & fm;
        let merge = |old: u128| (old & !fm) | fv;
        // SCTP, ICMP, ARP, ND, the flow label (`more_fields`).
        if let Some(done) = self.set_more(f.name, merge) {
            return done;
        }
        match f.member {
            Member::DlSrc | Member::DlDst => {
                let at = if f.member == Member::DlDst { 0 } else { 6 };
                let b = self.buf.as_mut();
                let old = b[at..at + 6].iter().fold(0u128, |a, &x| a << 8 | u128::from(x));
                let new = merge(old).to_be_bytes();
                b[at..at + 6].copy_from_slice(&new[10..16]);
                true
            }
            Member::VlanTci => {
                let Some(at) = self.layout.vlan else { return false };
                // Bit 12 is the key's "tag present" (CFI); on the wire it is DEI: kept.
                let wire = (fm as u16) & !crate::key::VLAN_CFI;
                let b = self.buf.as_mut();
                let tci = u16::from_be_bytes([b[at], b[at + 1]]);
                let tci = (tci & !wire) | (fv as u16 & wire);
                b[at..at + 2].copy_from_slice(&tci.to_be_bytes());
                true
            }
            Member::NwTos => {
                let Some(ip) = self.layout.ipv4 else { return false };
                let b = self.buf.as_mut();
                let old = u16::from_be_bytes([b[ip], b[ip + 1]]);
                b[ip + 1] = merge(u128::from(b[ip + 1])) as u8;
                let new = u16::from_be_bytes([b[ip], b[ip + 1]]);
                update_checksum(&mut b[ip + 10..ip + 12], old, new);
                true
            }
            Member::NwTtl => {
                if let Some(ip) = self.layout.ipv4 {
                    let b = self.buf.as_mut();
                    let old = u16::from_be_bytes([b[ip + 8], b[ip + 9]]);
                    b[ip + 8] = merge(u128::from(b[ip + 8])) as u8;
                    let new = u16::from_be_bytes([b[ip + 8], b[ip + 9]]);
                    update_checksum(&mut b[ip + 10..ip + 12], old, new);
                    true
                } else if let Some(ip) = self.layout.ipv6 {
                    let b = self.buf.as_mut();
                    b[ip + 7] = merge(u128::from(b[ip + 7])) as u8;
                    true
                } else {
                    false
                }
            }
            Member::NwSrc | Member::NwDst => {
                let Some(ip) = self.layout.ipv4 else { return false };
                let at = ip + if f.member == Member::NwSrc { 12 } else { 16 };
                let l4 = self.l4_ports().map(|(_, c, udp)| (c, udp));
                let b = self.buf.as_mut();
                let old = u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
                let new = merge(u128::from(old)) as u32;
                for (o, n) in [((old >> 16) as u16, (new >> 16) as u16), (old as u16, new as u16)] {
                    update_checksum(&mut b[ip + 10..ip + 12], o, n);
                    if let Some((c, udp)) = l4 {
                        update_l4_checksum(b, c, udp, o, n);
                    }
                }
                b[at..at + 4].copy_from_slice(&new.to_be_bytes());
                true
            }
            Member::Ipv6Src | Member::Ipv6Dst => {
                let Some((src, dst)) = self.ipv6_addrs() else { return false };
                if f.member == Member::Ipv6Src {
                    self.set_ipv6_src(merge(src))
                } else {
                    self.set_ipv6_dst(merge(dst))
                }
            }
            Member::TpSrc | Member::TpDst => {
                let Some((ports, c, udp)) = self.l4_ports() else { return false };
                let at = ports + if f.member == Member::TpSrc { 0 } else { 2 };
                let b = self.buf.as_mut();
                let old = u16::from_be_bytes([b[at], b[at + 1]]);
                let new = merge(u128::from(old)) as u16;
                update_l4_checksum(b, c, udp, old, new);
                b[at..at + 2].copy_from_slice(&new.to_be_bytes());
                true
            }
            _ => false,
        }
    }
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Offset of the TCP or UDP port pair, of its checksum, and whether it is UDP's, for
    /// an IPv4 or IPv6 packet that is not a later fragment and holds the whole L4 header.
    fn l4_ports(&self) -> Option<(usize, usize, bool)> {
        let b = self.buf.as_ref();
        let (l4, end, proto) = if let Some(ip) = self.layout.ipv4 {
            let (hl, total) = ipv4_header(&b[ip..])?;
            let frag = u16::from_be_bytes([b[ip + 6], b[ip + 7]]);
            if frag & 0x1fff != 0 {
                return None;
            }
            (ip + hl, ip + total, b[ip + 9])
        } else if let Some(ip) = self.layout.ipv6 {
            let payload = ipv6_payload(b, ip)?;
            let (proto, frag, at) = ext_headers(&b[payload.clone()], b[ip + 6])?;
            if frag & FLOW_NW_FRAG_LATER != 0 {
                return None;
            }
            (payload.start + at, payload.end, proto)
        } else {
            return None;
        };
        let (len, csum) = match proto {
            IPPROTO_TCP => (20, 16),
            IPPROTO_UDP => (8, 6),
            _ => return None,
        };
        (l4 + len <= end).then_some((l4, l4 + csum, proto == IPPROTO_UDP))
    }
}

/// One 16-bit word of a TCP/UDP checksum's coverage changed: a UDP checksum of 0 ("none")
/// stays 0, a computed 0 is written 0xffff.
fn update_l4_checksum(b: &mut [u8], c: usize, udp: bool, old: u16, new: u16) {
    if udp && b[c..c + 2] == [0, 0] {
        return;
    }
    update_checksum(&mut b[c..c + 2], old, new);
    if udp && b[c..c + 2] == [0, 0] {
        b[c..c + 2].copy_from_slice(&[0xff, 0xff]);
    }
}

/// RFC 1624 eqn. 3: `HC' = ~(~HC + ~m + m')` for one changed 16-bit word `m` → `m'`.
fn update_checksum(field: &mut [u8], old: u16, new: u16) {
    let hc = u16::from_be_bytes([field[0], field[1]]);
    let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    field.copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

/// Inserts an 802.1Q tag (TPID 0x8100, priority 0, `vid`) after the MAC addresses — OpenFlow's
/// `mod_vlan_vid` on an untagged frame. False (and nothing changed) when the frame is shorter
/// than an Ethernet header.
pub fn push_vlan(frame: &mut Vec<u8>, vid: u16) -> bool {
    if frame.len() < ETH_HEADER_LEN {
        return false;
    }
    let mut tag = [0u8; VLAN_HEADER_LEN];
    tag[..2].copy_from_slice(&ETH_TYPE_VLAN.to_be_bytes());
    tag[2..].copy_from_slice(&(vid & VLAN_VID_MASK).to_be_bytes());
    frame.splice(12..12, tag);
    true
}

/// Removes the outer 802.1Q tag (`strip_vlan`). False when the frame has none.
pub fn strip_vlan(frame: &mut Vec<u8>) -> bool {
    match Layout::of(frame) {
        Ok(Layout { vlan: Some(_), .. }) => {
            frame.drain(12..12 + VLAN_HEADER_LEN);
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{build_frame, extract};
    use crate::key::{FlowKey, IPPROTO_TCP, VLAN_CFI};
    use proptest::prelude::*;

    fn tcp_key(tos: u8) -> FlowKey {
        let mut k = FlowKey::ipv4(0x0a00_0001, 0x0b00_0002, IPPROTO_TCP, 1234, 80);
        k.nw_tos = tos;
        k.dl_type = ETH_TYPE_IP;
        k
    }

    proptest! {
        /// A set_field on a frame gives the frame of the key with the field set: every byte,
        /// checksums included (IPv4 header, TCP/UDP over either pseudo-header).
        #[test]
        fn set_field_writes_the_key_it_says(
            v6 in any::<bool>(), udp in any::<bool>(), tagged in any::<bool>(),
            seed in any::<[u64; 4]>(), which in 0usize..15, value in any::<u128>(), full in any::<bool>(), mask in any::<u128>(),
        ) {
            let names = ["dl_src", "dl_dst", "vlan_vid", "vlan_pcp", "nw_src", "nw_dst", "ip_dscp", "nw_ecn", "nw_ttl",
                "tcp_src", "tcp_dst", "udp_src", "udp_dst", "ipv6_src", "ipv6_dst"];
            let f = crate::field::Field::by_name(names[which]).unwrap();
            let proto = if udp { crate::key::IPPROTO_UDP } else { IPPROTO_TCP };
            let mut k = FlowKey::ipv4(seed[0] as u32, (seed[0] >> 32) as u32, proto, seed[1] as u16, (seed[1] >> 16) as u16);
            k.dl_type = ETH_TYPE_IP;
            k.dl_src = [2, 0, 0, 0, 0, seed[2] as u8];
            k.dl_dst = [4, 0, 0, 0, (seed[2] >> 8) as u8, 1];
            k.nw_ttl = 1 + (seed[2] >> 16) as u8 % 200;
            k.nw_tos = (seed[2] >> 24) as u8;
            if v6 {
                k.dl_type = ETH_TYPE_IPV6;
                k.ipv6_src = u128::from(seed[3]) << 64 | u128::from(seed[0]);
                k.ipv6_dst = u128::from(seed[1]) << 64 | u128::from(seed[3]);
                k.nw_src = 0;
                k.nw_dst = 0;
                k.nw_tos = 0;
            }
            if tagged {
                k.vlan_tci = VLAN_CFI | (seed[3] as u16 & 0xefff);
            }
            let mask = if full { f.all_ones() } else { mask & f.all_ones() };
            let mut frame = build_frame(&k);
            let wrote = Frame::new_checked(&mut frame[..]).unwrap().set_field(f, value, mask);
            let applies = match f.member {
                crate::field::Member::VlanTci => tagged,
                crate::field::Member::NwSrc | crate::field::Member::NwDst | crate::field::Member::NwTos => !v6,
                crate::field::Member::Ipv6Src | crate::field::Member::Ipv6Dst => v6,
                _ => true,
            };
            prop_assert_eq!(wrote, applies);
            if applies {
                let mut want = k;
                let old = f.get(&k);
                // The wire's bit 12 is DEI, not the key's "present" bit.
                let mask = if f.name == "vlan_vid" { mask & 0xfff } else { mask };
                f.set(&mut want, (old & !mask) | (value & mask));
                if want.nw_ttl == 0 {
                    return Ok(()); // build_frame writes a TTL of 0 as 64
                }
                prop_assert_eq!(&frame, &build_frame(&want), "{} {:#x}/{:#x}", f.name, value, mask);
            } else {
                prop_assert_eq!(&frame, &build_frame(&k));
            }
        }
    }

    proptest! {
        #[test]
        fn no_bytes_panic_the_view(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let mut b = bytes.clone();
            if let Ok(mut f) = Frame::new_checked(&mut b[..]) {
                let _ = (f.dl_src(), f.vlan_vid(), f.nw_tos(), f.ipv4_checksum_ok());
                f.set_nw_tos(0xfc);
                f.dec_ttl();
                f.set_vlan_vid(7);
            }
            let mut v = bytes;
            strip_vlan(&mut v);
            push_vlan(&mut v, 3);
        }

        #[test]
        fn rewrites_keep_the_ipv4_checksum_and_read_back(tos in any::<u8>(), new_tos in any::<u8>(), vid in 0u16..4096, tagged in any::<bool>()) {
            let mut k = tcp_key(tos);
            if tagged {
                k.vlan_tci = VLAN_CFI | 5;
            }
            let mut b = build_frame(&k);
            let mut f = Frame::new_checked(&mut b[..]).unwrap();
            prop_assert_eq!(f.ipv4_checksum_ok(), Some(true));
            prop_assert!(f.set_nw_tos(new_tos));
            prop_assert_eq!(f.ipv4_checksum_ok(), Some(true));
            let ttl = f.nw_ttl().unwrap();
            prop_assert_eq!(f.dec_ttl(), Some(ttl - 1));
            prop_assert_eq!(f.ipv4_checksum_ok(), Some(true));
            prop_assert_eq!(f.set_vlan_vid(vid), tagged);
            f.set_dl_src([2, 0, 0, 0, 0, 9]);
            let got = *extract(&b, 1).key().unwrap();
            let mut want = k.wire();
            want.nw_tos = (new_tos & 0xfc) | (tos & 0x03);
            want.dl_src = [2, 0, 0, 0, 0, 9];
            want.nw_ttl = ttl - 1;
            if tagged {
                want.vlan_tci = (k.vlan_tci & !VLAN_VID_MASK) | vid;
            }
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn push_and_strip_vlan_round_trip() {
        let k = tcp_key(0);
        let plain = build_frame(&k);
        let mut b = plain.clone();
        assert!(!strip_vlan(&mut b));
        assert!(push_vlan(&mut b, 42));
        let got = *extract(&b, 1).key().unwrap();
        assert_eq!(got.vlan_tci, VLAN_CFI | 42);
        assert_eq!(Frame::new_checked(&b[..]).unwrap().vlan_vid(), Some(42));
        assert!(strip_vlan(&mut b));
        assert_eq!(b, plain);
    }

    #[test]
    fn ttl_zero_stays_and_non_ip_is_untouched() {
        let mut b = build_frame(&tcp_key(0));
        let ip = Frame::new_checked(&b[..]).unwrap().layout().ipv4.unwrap();
        b[ip + 8] = 1;
        let mut f = Frame::new_checked(&mut b[..]).unwrap();
        // The checksum was broken by the raw write above; dec_ttl updates whatever is there.
        assert_eq!(f.dec_ttl(), Some(0));
        assert_eq!(f.dec_ttl(), Some(0));
        let arp = FlowKey { dl_type: crate::key::ETH_TYPE_ARP, ..FlowKey::default() };
        let mut a = build_frame(&arp);
        let before = a.clone();
        let mut f = Frame::new_checked(&mut a[..]).unwrap();
        assert_eq!(f.dec_ttl(), None);
        assert!(!f.set_nw_tos(4));
        assert_eq!(a, before);
        assert_eq!(Frame::new_checked(&[0u8; 13][..]).unwrap_err(), FrameError::Truncated);
    }
}
