//! `FlowKey`: the fixed-size header key every classifier and cache looks up.
//!
//! The fields follow Open vSwitch's `struct flow` for the headers rqvs understands. As in OVS, the
//! transport fields are shared: `tp_src`/`tp_dst` are the ports for TCP, UDP and SCTP and the ICMP
//! type and code for ICMP. For every other IP protocol a packet parsed from the wire has them zero;
//! ClassBench traces, whose fields are independent of the protocol, may set them for any protocol
//! (see `formats::trace`).
//!
//! The same type doubles as a *mask* (a set bit means "this bit is examined"), which is how OVS
//! represents wildcards (`struct flow_wildcards` wraps a `struct flow`).

use std::fmt;

/// `dl_type` of IPv4.
pub const ETH_TYPE_IP: u16 = 0x0800;
/// `dl_type` of ARP.
pub const ETH_TYPE_ARP: u16 = 0x0806;
/// `dl_type` of an 802.1Q tag.
pub const ETH_TYPE_VLAN: u16 = 0x8100;
/// `dl_type` of IPv6 (parsed only as far as `dl_type`).
pub const ETH_TYPE_IPV6: u16 = 0x86dd;

/// IP protocol numbers rqvs gives meaning to.
pub const IPPROTO_ICMP: u8 = 1;
pub const IPPROTO_TCP: u8 = 6;
pub const IPPROTO_UDP: u8 = 17;
pub const IPPROTO_SCTP: u8 = 132;

/// The CFI/"VLAN present" bit of `vlan_tci`, as OVS uses it: a zero TCI means "no VLAN header".
pub const VLAN_CFI: u16 = 0x1000;
pub const VLAN_VID_MASK: u16 = 0x0fff;
pub const VLAN_PCP_MASK: u16 = 0xe000;

/// Bits of `nw_frag`, as in OVS.
pub const FLOW_NW_FRAG_ANY: u8 = 1;
pub const FLOW_NW_FRAG_LATER: u8 = 2;

/// The TCP flag bits OVS can match (12 bits).
pub const TCP_FLAGS_MASK: u16 = 0x0fff;

/// A key packed by [`FlowKey::to_words`]: what hash tables over masked keys store and hash.
pub type KeyWords = [u64; 5];

/// `k & m`, word by word (masking commutes with packing: see [`FlowKey::to_words`]).
#[inline(always)]
pub fn mask_words(k: &KeyWords, m: &KeyWords) -> KeyWords {
    [k[0] & m[0], k[1] & m[1], k[2] & m[2], k[3] & m[3], k[4] & m[4]]
}

/// One packet's header fields (or, used as a mask, the bits of them that are examined).
///
/// Plain old data, 40 bytes, `Copy`; `Default` is the all-zero key (or the all-wildcard mask).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[repr(C)]
pub struct FlowKey {
    pub nw_src: u32,
    pub nw_dst: u32,
    pub tp_src: u16,
    pub tp_dst: u16,
    pub in_port: u32,
    pub dl_type: u16,
    pub vlan_tci: u16,
    pub tcp_flags: u16,
    pub nw_proto: u8,
    pub nw_tos: u8,
    pub nw_frag: u8,
    pub dl_src: [u8; 6],
    pub dl_dst: [u8; 6],
}

impl FlowKey {
    /// The mask that examines every bit of every field.
    pub const EXACT: FlowKey = FlowKey {
        nw_src: u32::MAX,
        nw_dst: u32::MAX,
        tp_src: u16::MAX,
        tp_dst: u16::MAX,
        in_port: u32::MAX,
        dl_type: u16::MAX,
        vlan_tci: u16::MAX,
        tcp_flags: TCP_FLAGS_MASK,
        nw_proto: u8::MAX,
        nw_tos: u8::MAX,
        nw_frag: FLOW_NW_FRAG_ANY | FLOW_NW_FRAG_LATER,
        dl_src: [0xff; 6],
        dl_dst: [0xff; 6],
    };

    /// An IPv4 5-tuple key, the shape of a ClassBench header (`in_port` 1, no MACs, no VLAN).
    pub fn ipv4(nw_src: u32, nw_dst: u32, nw_proto: u8, tp_src: u16, tp_dst: u16) -> FlowKey {
        FlowKey { nw_src, nw_dst, tp_src, tp_dst, in_port: 1, dl_type: ETH_TYPE_IP, nw_proto, ..FlowKey::default() }
    }

    /// `self & mask`, field by field.
    #[inline]
    pub fn masked(&self, mask: &FlowKey) -> FlowKey {
        FlowKey {
            nw_src: self.nw_src & mask.nw_src,
            nw_dst: self.nw_dst & mask.nw_dst,
            tp_src: self.tp_src & mask.tp_src,
            tp_dst: self.tp_dst & mask.tp_dst,
            in_port: self.in_port & mask.in_port,
            dl_type: self.dl_type & mask.dl_type,
            vlan_tci: self.vlan_tci & mask.vlan_tci,
            tcp_flags: self.tcp_flags & mask.tcp_flags,
            nw_proto: self.nw_proto & mask.nw_proto,
            nw_tos: self.nw_tos & mask.nw_tos,
            nw_frag: self.nw_frag & mask.nw_frag,
            dl_src: and6(self.dl_src, mask.dl_src),
            dl_dst: and6(self.dl_dst, mask.dl_dst),
        }
    }

    /// `self | other`, field by field (the union of two masks).
    #[inline]
    pub fn union(&self, other: &FlowKey) -> FlowKey {
        FlowKey {
            nw_src: self.nw_src | other.nw_src,
            nw_dst: self.nw_dst | other.nw_dst,
            tp_src: self.tp_src | other.tp_src,
            tp_dst: self.tp_dst | other.tp_dst,
            in_port: self.in_port | other.in_port,
            dl_type: self.dl_type | other.dl_type,
            vlan_tci: self.vlan_tci | other.vlan_tci,
            tcp_flags: self.tcp_flags | other.tcp_flags,
            nw_proto: self.nw_proto | other.nw_proto,
            nw_tos: self.nw_tos | other.nw_tos,
            nw_frag: self.nw_frag | other.nw_frag,
            dl_src: or6(self.dl_src, other.dl_src),
            dl_dst: or6(self.dl_dst, other.dl_dst),
        }
    }

    /// True when every bit set in `self` is also set in `other` (as masks: `self` is coarser).
    pub fn is_subset_of(&self, other: &FlowKey) -> bool {
        self.union(other) == *other
    }

    /// The two IPv4 addresses as one sort key: `nw_src:nw_dst`, or `nw_dst:nw_src` when
    /// `dst_first`. Keys that agree on the leading bits of this number form a range of it — what
    /// [`FlowKey::addr_range`] looks up in an index sorted by it.
    #[inline]
    pub fn addr_key(&self, dst_first: bool) -> u64 {
        let (a, b) = if dst_first { (self.nw_dst, self.nw_src) } else { (self.nw_src, self.nw_dst) };
        u64::from(a) << 32 | u64::from(b)
    }

    /// Every address key (in the returned order: `dst_first` or not) that agrees with `self` on
    /// the leading bits `mask` specifies, in the order in which `mask` specifies more of them:
    /// the candidates, in an index sorted by [`FlowKey::addr_key`], that can agree with `self` on
    /// all the bits of `mask` (a full comparison must still follow).
    pub fn addr_range(&self, mask: &FlowKey) -> (bool, std::ops::RangeInclusive<u64>) {
        let dst_first = mask.addr_key(true).leading_ones() > mask.addr_key(false).leading_ones();
        let bits = mask.addr_key(dst_first).leading_ones();
        let free = u64::MAX.checked_shr(bits).unwrap_or(0);
        let lo = self.addr_key(dst_first) & !free;
        (dst_first, lo..=lo | free)
    }

    /// The key packed into five 64-bit words, for hashing and word-wise masking (the layout of
    /// OVS's miniflow, simplified): `[nw_src|nw_dst, tp_src|tp_dst|in_port,
    /// dl_type|vlan_tci|tcp_flags|nw_proto|nw_tos, nw_frag|dl_src, dl_dst]`. Masking commutes
    /// with packing: `k.masked(m).to_words()[i] == k.to_words()[i] & m.to_words()[i]`.
    #[inline]
    pub fn to_words(&self) -> [u64; 5] {
        let mac = |m: [u8; 6]| u64::from_le_bytes([m[0], m[1], m[2], m[3], m[4], m[5], 0, 0]);
        [
            u64::from(self.nw_src) | u64::from(self.nw_dst) << 32,
            u64::from(self.tp_src) | u64::from(self.tp_dst) << 16 | u64::from(self.in_port) << 32,
            u64::from(self.dl_type)
                | u64::from(self.vlan_tci) << 16
                | u64::from(self.tcp_flags) << 32
                | u64::from(self.nw_proto) << 48
                | u64::from(self.nw_tos) << 56,
            u64::from(self.nw_frag) | mac(self.dl_src) << 8,
            mac(self.dl_dst),
        ]
    }

    /// The inverse of [`FlowKey::to_words`]; bits outside the fields (the top bytes of the MAC
    /// words, bit 56.. of word 3) are ignored.
    pub fn from_words(w: &[u64; 5]) -> FlowKey {
        let mac = |x: u64| {
            let b = x.to_le_bytes();
            [b[0], b[1], b[2], b[3], b[4], b[5]]
        };
        FlowKey {
            nw_src: w[0] as u32,
            nw_dst: (w[0] >> 32) as u32,
            tp_src: w[1] as u16,
            tp_dst: (w[1] >> 16) as u16,
            in_port: (w[1] >> 32) as u32,
            dl_type: w[2] as u16,
            vlan_tci: (w[2] >> 16) as u16,
            tcp_flags: (w[2] >> 32) as u16,
            nw_proto: (w[2] >> 48) as u8,
            nw_tos: (w[2] >> 56) as u8,
            nw_frag: w[3] as u8,
            dl_src: mac(w[3] >> 8),
            dl_dst: mac(w[4]),
        }
    }

    /// True when this is an IPv4 packet.
    #[inline]
    pub fn is_ip(&self) -> bool {
        self.dl_type == ETH_TYPE_IP
    }

    /// True when `tp_src`/`tp_dst` hold ports (TCP, UDP, SCTP over IPv4).
    #[inline]
    pub fn has_ports(&self) -> bool {
        self.is_ip() && matches!(self.nw_proto, IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP)
    }
}

#[inline]
fn and6(a: [u8; 6], b: [u8; 6]) -> [u8; 6] {
    std::array::from_fn(|i| a[i] & b[i])
}

#[inline]
fn or6(a: [u8; 6], b: [u8; 6]) -> [u8; 6] {
    std::array::from_fn(|i| a[i] | b[i])
}

/// Formats a MAC address as `xx:xx:xx:xx:xx:xx`.
pub fn fmt_mac(mac: &[u8; 6]) -> String {
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", mac[0], mac[1], mac[2], mac[3], mac[4], mac[5])
}

/// Formats an IPv4 address held in host order.
pub fn fmt_ipv4(addr: u32) -> String {
    std::net::Ipv4Addr::from(addr).to_string()
}

impl fmt::Debug for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "FlowKey{{in_port={},dl_src={},dl_dst={},dl_type={:#06x},vlan_tci={:#06x},nw_src={},nw_dst={},nw_proto={},nw_tos={},nw_frag={},tp_src={},tp_dst={},tcp_flags={:#05x}}}",
            self.in_port,
            fmt_mac(&self.dl_src),
            fmt_mac(&self.dl_dst),
            self.dl_type,
            self.vlan_tci,
            fmt_ipv4(self.nw_src),
            fmt_ipv4(self.nw_dst),
            self.nw_proto,
            self.nw_tos,
            self.nw_frag,
            self.tp_src,
            self.tp_dst,
            self.tcp_flags
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_keeps_only_mask_bits() {
        let k = FlowKey::ipv4(0x0a01_0203, 0xc0a8_0001, 6, 1234, 80);
        let mut m = FlowKey::default();
        m.nw_src = 0xffff_0000;
        m.tp_dst = 0xff00;
        let x = k.masked(&m);
        assert_eq!(x.nw_src, 0x0a01_0000);
        assert_eq!(x.tp_dst, 0);
        assert_eq!(x.nw_dst, 0);
        assert_eq!(k.masked(&FlowKey::EXACT), k);
    }

    #[test]
    fn words_commute_with_masking() {
        let k = FlowKey {
            dl_src: [1, 2, 3, 4, 5, 6],
            dl_dst: [0xff; 6],
            vlan_tci: 0x1005,
            tcp_flags: 0x12,
            nw_tos: 0xb8,
            nw_frag: 3,
            ..FlowKey::ipv4(0x0a01_0203, 0xc0a8_0001, 6, 1234, 80)
        };
        let mut m = FlowKey::EXACT;
        m.nw_src = 0xffff_0000;
        m.dl_src = [0xff, 0, 0xff, 0, 0xff, 0];
        m.tp_dst = 0xff00;
        let (kw, mw, km) = (k.to_words(), m.to_words(), k.masked(&m).to_words());
        for i in 0..5 {
            assert_eq!(km[i], kw[i] & mw[i]);
        }
        let fields = [k.nw_src != 0, k.dl_src != [0; 6], k.dl_dst != [0; 6], k.nw_frag != 0];
        assert!(fields.iter().all(|&f| f));
        assert_ne!(FlowKey { dl_dst: [0; 6], ..k }.to_words(), kw);
        assert_eq!(FlowKey::from_words(&kw), k);
        assert_eq!(FlowKey::from_words(&FlowKey::EXACT.to_words()), FlowKey::EXACT);
    }

    #[test]
    fn union_and_subset() {
        let mut a = FlowKey::default();
        a.nw_src = 0xff00_0000;
        let mut b = FlowKey::default();
        b.tp_src = 0xffff;
        let u = a.union(&b);
        assert!(a.is_subset_of(&u));
        assert!(b.is_subset_of(&u));
        assert!(!u.is_subset_of(&a));
    }
}
