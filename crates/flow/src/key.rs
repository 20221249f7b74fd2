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
pub const IPPROTO_ICMPV6: u8 = 58;

/// The CFI/"VLAN present" bit of `vlan_tci`, as OVS uses it: a zero TCI means "no VLAN header".
pub const VLAN_CFI: u16 = 0x1000;
pub const VLAN_VID_MASK: u16 = 0x0fff;
pub const VLAN_PCP_MASK: u16 = 0xe000;

/// Bits of `nw_frag`, as in OVS.
pub const FLOW_NW_FRAG_ANY: u8 = 1;
pub const FLOW_NW_FRAG_LATER: u8 = 2;

/// The TCP flag bits OVS can match (12 bits).
pub const TCP_FLAGS_MASK: u16 = 0x0fff;

/// How many 64-bit words [`FlowKey::to_words`] packs a key into.
pub const KEY_WORDS: usize = 15;

/// The first [`NARROW_WORDS`] words hold the fields of ClassBench's 5-tuple and the L2 header
/// (addresses, ports, `in_port`, `dl_type`, VLAN, protocol, ToS, flags, fragments, MACs, TTL);
/// the rest hold the *wide* fields (metadata, IPv6, ND, ARP hardware addresses). A structure
/// whose masks use none of the wide words (every 5-tuple workload) hashes and stores only the
/// narrow ones: see [`FlowKey::is_narrow_mask`].
pub const NARROW_WORDS: usize = 5;

/// A key packed by [`FlowKey::to_words`]: what hash tables over masked keys store and hash.
pub type KeyWords = [u64; KEY_WORDS];

/// The narrow part of [`KeyWords`] (see [`NARROW_WORDS`]).
pub type NarrowWords = [u64; NARROW_WORDS];

/// `k & m`, word by word (masking commutes with packing: see [`FlowKey::to_words`]).
#[inline(always)]
pub fn mask_words(k: &KeyWords, m: &KeyWords) -> KeyWords {
    std::array::from_fn(|i| k[i] & m[i])
}

/// The bitmap of the words of `w` that are not zero (bit `i` for word `i`): for a mask, the
/// words a lookup under it must hash and compare — OVS's miniflow map.
#[inline]
pub fn word_map(w: &KeyWords) -> u16 {
    w.iter().enumerate().fold(0u16, |m, (i, &x)| if x != 0 { m | 1 << i } else { m })
}

/// Declares [`FlowKey`]'s storage members once and derives from the list what is done member by
/// member: `masked`, `union`, the first member with value bits outside a mask, and `Debug`.
macro_rules! flow_key {
    ($( $(#[$doc:meta])* $name:ident : $ty:ty = $exact:expr ),* $(,)?) => {
        /// One packet's header fields (or, used as a mask, the bits of them that are examined).
        ///
        /// Plain old data, `Copy`; `Default` is the all-zero key (or the all-wildcard mask).
        /// The members follow Open vSwitch's `struct flow`, overlays included: ARP keeps its
        /// opcode in `nw_proto` and its IPv4 addresses in `nw_src`/`nw_dst`; ICMP and ICMPv6
        /// type and code live in `tp_src`/`tp_dst`; `arp_sha`/`arp_tha` hold ND's source and
        /// target link-layer addresses for ICMPv6 neighbour discovery. The OpenFlow fields over
        /// these members (names, OXM codes, prerequisites) are described once, in
        /// [`crate::field`].
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
        #[repr(C)]
        pub struct FlowKey {
            $( $(#[$doc])* pub $name: $ty, )*
        }

        impl FlowKey {
            /// The mask that examines every bit of every field.
            pub const EXACT: FlowKey = FlowKey { $( $name: $exact, )* };

            /// The all-zero key (the all-wildcard mask); `Default`, usable in constants.
            pub const ZERO: FlowKey = FlowKey { $( $name: <$ty as Member>::ZERO, )* };

            /// `self & mask`, member by member.
            #[inline]
            pub fn masked(&self, mask: &FlowKey) -> FlowKey {
                FlowKey { $( $name: Member::and(self.$name, mask.$name), )* }
            }

            /// `self | other`, member by member (the union of two masks).
            #[inline]
            pub fn union(&self, other: &FlowKey) -> FlowKey {
                FlowKey { $( $name: Member::or(self.$name, other.$name), )* }
            }

            /// The first member (in declaration order) of `self` with a bit set outside `mask`.
            pub fn first_bits_outside(&self, mask: &FlowKey) -> Option<&'static str> {
                $( if !Member::and(self.$name, Member::not(mask.$name)).is_zero() {
                    return Some(stringify!($name));
                } )*
                None
            }

            /// The members that are not zero, by name (as a mask: the members it examines).
            pub fn nonzero_members(&self) -> Vec<&'static str> {
                let mut out = Vec::new();
                $( if !self.$name.is_zero() { out.push(stringify!($name)); } )*
                out
            }
        }

        impl FlowKey {
            /// `,name=value` for every wide member that is not zero (for `Debug`).
            fn fmt_wide(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                $(
                    if !NARROW_MEMBERS.contains(&stringify!($name)) && !self.$name.is_zero() {
                        write!(f, ",{}=", stringify!($name))?;
                        self.$name.debug(stringify!($name), f)?;
                    }
                )*
                Ok(())
            }
        }
    };
}

/// The members `Debug` prints always (the narrow words' fields); the others only when not zero,
/// so that the 5-tuple keys of every log and test keep their one-line form.
const NARROW_MEMBERS: [&str; 14] = [
    "in_port",
    "dl_src",
    "dl_dst",
    "dl_type",
    "vlan_tci",
    "nw_src",
    "nw_dst",
    "nw_proto",
    "nw_tos",
    "nw_frag",
    "nw_ttl",
    "tp_src",
    "tp_dst",
    "tcp_flags",
];

/// What `flow_key!` needs of a member's type.
trait Member: Copy {
    const ZERO: Self;
    fn and(a: Self, b: Self) -> Self;
    fn or(a: Self, b: Self) -> Self;
    fn not(a: Self) -> Self;
    fn is_zero(&self) -> bool;
    fn debug(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

macro_rules! int_member {
    ($($t:ty),*) => {$(
        impl Member for $t {
            const ZERO: Self = 0;
            #[inline(always)]
            fn and(a: Self, b: Self) -> Self { a & b }
            #[inline(always)]
            fn or(a: Self, b: Self) -> Self { a | b }
            #[inline(always)]
            fn not(a: Self) -> Self { !a }
            #[inline(always)]
            fn is_zero(&self) -> bool { *self == 0 }
            fn debug(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match name {
                    "nw_src" | "nw_dst" => f.write_str(&fmt_ipv4(*self as u32)),
                    "ipv6_src" | "ipv6_dst" | "nd_target" => f.write_str(&fmt_ipv6(*self as u128)),
                    "dl_type" => write!(f, "{:#06x}", *self),
                    "vlan_tci" => write!(f, "{:#06x}", *self),
                    "tcp_flags" => write!(f, "{:#05x}", *self),
                    "metadata" | "ipv6_label" => write!(f, "{:#x}", *self),
                    _ => write!(f, "{}", *self),
                }
            }
        }
    )*};
}
int_member!(u8, u16, u32, u64, u128);

impl Member for [u8; 6] {
    const ZERO: Self = [0; 6];
    #[inline(always)]
    fn and(a: Self, b: Self) -> Self {
        std::array::from_fn(|i| a[i] & b[i])
    }
    #[inline(always)]
    fn or(a: Self, b: Self) -> Self {
        std::array::from_fn(|i| a[i] | b[i])
    }
    #[inline(always)]
    fn not(a: Self) -> Self {
        a.map(|x| !x)
    }
    #[inline(always)]
    fn is_zero(&self) -> bool {
        *self == [0; 6]
    }
    fn debug(&self, _name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&fmt_mac(self))
    }
}

flow_key! {
    // ---- the narrow words (0..5) ----
    /// IPv4 source (host order); ARP's sender IP (`arp_spa`).
    nw_src: u32 = u32::MAX,
    /// IPv4 destination (host order); ARP's target IP (`arp_tpa`).
    nw_dst: u32 = u32::MAX,
    /// TCP/UDP/SCTP source port; ICMP and ICMPv6 type.
    tp_src: u16 = u16::MAX,
    /// TCP/UDP/SCTP destination port; ICMP and ICMPv6 code.
    tp_dst: u16 = u16::MAX,
    /// The OpenFlow port the packet arrived on.
    in_port: u32 = u32::MAX,
    /// The innermost ethertype (`eth_type`).
    dl_type: u16 = u16::MAX,
    /// The outer 802.1Q tag's TCI with [`VLAN_CFI`] meaning "a tag is present" (OVS's `vlan_tci`;
    /// OpenFlow's `vlan_vid` with OFPVID_PRESENT and `vlan_pcp` are views of it).
    vlan_tci: u16 = u16::MAX,
    /// TCP flags (12 bits).
    tcp_flags: u16 = TCP_FLAGS_MASK,
    /// IP protocol (IPv4 protocol, IPv6 next header after extension headers); ARP's opcode.
    nw_proto: u8 = u8::MAX,
    /// The IPv4 TOS byte / IPv6 traffic class: DSCP (`ip_dscp`) and ECN (`ip_ecn`).
    nw_tos: u8 = u8::MAX,
    /// [`FLOW_NW_FRAG_ANY`] and [`FLOW_NW_FRAG_LATER`] (`ip_frag`).
    nw_frag: u8 = FLOW_NW_FRAG_ANY | FLOW_NW_FRAG_LATER,
    /// Ethernet source (`eth_src`).
    dl_src: [u8; 6] = [0xff; 6],
    /// Ethernet destination (`eth_dst`).
    dl_dst: [u8; 6] = [0xff; 6],
    /// IPv4 TTL / IPv6 hop limit.
    nw_ttl: u8 = u8::MAX,
    // ---- the wide words (5..15) ----
    /// OpenFlow metadata (64 bits), written by write-metadata.
    metadata: u64 = u64::MAX,
    /// IPv6 source (host order: the address's first byte is the top byte).
    ipv6_src: u128 = u128::MAX,
    /// IPv6 destination (host order).
    ipv6_dst: u128 = u128::MAX,
    /// ICMPv6 neighbour discovery target (host order).
    nd_target: u128 = u128::MAX,
    /// IPv6 flow label (20 bits).
    ipv6_label: u32 = IPV6_LABEL_MASK,
    /// ARP sender hardware address (`arp_sha`); ND source link-layer address (`nd_sll`).
    arp_sha: [u8; 6] = [0xff; 6],
    /// ARP target hardware address (`arp_tha`); ND target link-layer address (`nd_tll`).
    arp_tha: [u8; 6] = [0xff; 6],
}

/// The 20 bits of an IPv6 flow label.
pub const IPV6_LABEL_MASK: u32 = 0x000f_ffff;

/// A [`FlowKey`] whose wide members are all zero, stored without them: the narrow members alone,
/// 40 bytes where a `FlowKey` takes 112 (OVS's miniflow does the same for a packet: only the words
/// its headers fill are stored). What a batch of 5-tuple packets can be looked up as
/// (`Classifier::lookup_batch_narrow` in rqvs-classify): the classifiers read the same fields,
/// and a batch of 32 keys spans 20 cache lines instead of 56.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
#[repr(C)]
pub struct NarrowKey {
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
    pub nw_ttl: u8,
}

impl NarrowKey {
    /// The key's [`NarrowWords`], as [`FlowKey::to_narrow_words`] packs them.
    #[inline]
    pub fn to_narrow_words(&self) -> NarrowWords {
        [
            u64::from(self.nw_src) | u64::from(self.nw_dst) << 32,
            u64::from(self.tp_src) | u64::from(self.tp_dst) << 16 | u64::from(self.in_port) << 32,
            u64::from(self.dl_type)
                | u64::from(self.vlan_tci) << 16
                | u64::from(self.tcp_flags) << 32
                | u64::from(self.nw_proto) << 48
                | u64::from(self.nw_tos) << 56,
            u64::from(self.nw_frag) | mac_word(self.dl_src) << 8 | u64::from(self.nw_ttl) << 56,
            mac_word(self.dl_dst),
        ]
    }

    /// `wc |= self`, member by member, touching only the narrow members of `wc` (used as masks:
    /// adds a narrow mask's bits to wildcards, without the 112-byte copy of [`FlowKey::union`]).
    #[inline]
    pub fn or_into(&self, wc: &mut FlowKey) {
        wc.nw_src |= self.nw_src;
        wc.nw_dst |= self.nw_dst;
        wc.tp_src |= self.tp_src;
        wc.tp_dst |= self.tp_dst;
        wc.in_port |= self.in_port;
        wc.dl_type |= self.dl_type;
        wc.vlan_tci |= self.vlan_tci;
        wc.tcp_flags |= self.tcp_flags;
        wc.nw_proto |= self.nw_proto;
        wc.nw_tos |= self.nw_tos;
        wc.nw_frag |= self.nw_frag;
        wc.nw_ttl |= self.nw_ttl;
        for i in 0..6 {
            wc.dl_src[i] |= self.dl_src[i];
            wc.dl_dst[i] |= self.dl_dst[i];
        }
    }

    /// The full key (wide members zero).
    #[inline]
    pub fn widen(&self) -> FlowKey {
        FlowKey {
            nw_src: self.nw_src,
            nw_dst: self.nw_dst,
            tp_src: self.tp_src,
            tp_dst: self.tp_dst,
            in_port: self.in_port,
            dl_type: self.dl_type,
            vlan_tci: self.vlan_tci,
            tcp_flags: self.tcp_flags,
            nw_proto: self.nw_proto,
            nw_tos: self.nw_tos,
            nw_frag: self.nw_frag,
            dl_src: self.dl_src,
            dl_dst: self.dl_dst,
            nw_ttl: self.nw_ttl,
            ..FlowKey::ZERO
        }
    }
}

impl FlowKey {
    /// The key as a [`NarrowKey`], or `None` when a wide member is set (it would be lost).
    #[inline]
    pub fn narrow(&self) -> Option<NarrowKey> {
        self.is_narrow_mask().then(|| self.narrow_part())
    }

    /// The narrow members of the key (its wide members, if any, left out).
    #[inline]
    pub fn narrow_part(&self) -> NarrowKey {
        NarrowKey {
            nw_src: self.nw_src,
            nw_dst: self.nw_dst,
            tp_src: self.tp_src,
            tp_dst: self.tp_dst,
            in_port: self.in_port,
            dl_type: self.dl_type,
            vlan_tci: self.vlan_tci,
            tcp_flags: self.tcp_flags,
            nw_proto: self.nw_proto,
            nw_tos: self.nw_tos,
            nw_frag: self.nw_frag,
            dl_src: self.dl_src,
            dl_dst: self.dl_dst,
            nw_ttl: self.nw_ttl,
        }
    }
}

impl FlowKey {
    /// An IPv4 5-tuple key, the shape of a ClassBench header (`in_port` 1, no MACs, no VLAN).
    pub fn ipv4(nw_src: u32, nw_dst: u32, nw_proto: u8, tp_src: u16, tp_dst: u16) -> FlowKey {
        FlowKey { nw_src, nw_dst, tp_src, tp_dst, in_port: 1, dl_type: ETH_TYPE_IP, nw_proto, ..FlowKey::ZERO }
    }

    /// An IPv6 5-tuple key (`in_port` 1, no MACs, no VLAN).
    pub fn ipv6(ipv6_src: u128, ipv6_dst: u128, nw_proto: u8, tp_src: u16, tp_dst: u16) -> FlowKey {
        FlowKey { ipv6_src, ipv6_dst, tp_src, tp_dst, in_port: 1, dl_type: ETH_TYPE_IPV6, nw_proto, ..FlowKey::ZERO }
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

    /// The narrow words of [`FlowKey::to_words`] alone (what a structure whose masks are all
    /// narrow hashes): `[nw_src|nw_dst, tp_src|tp_dst|in_port,
    /// dl_type|vlan_tci|tcp_flags|nw_proto|nw_tos, nw_frag|dl_src|nw_ttl, dl_dst]`.
    #[inline]
    pub fn to_narrow_words(&self) -> NarrowWords {
        self.narrow_part().to_narrow_words()
    }

    /// The key packed into [`KEY_WORDS`] 64-bit words, for hashing and word-wise masking (the
    /// layout of OVS's miniflow, simplified): the narrow words ([`FlowKey::to_narrow_words`]),
    /// then `metadata`, `ipv6_src` (low, high), `ipv6_dst` (low, high), `nd_target` (low, high),
    /// `ipv6_label`, `arp_sha`, `arp_tha`. Masking commutes with packing:
    /// `k.masked(m).to_words()[i] == k.to_words()[i] & m.to_words()[i]`.
    #[inline]
    pub fn to_words(&self) -> KeyWords {
        let n = self.to_narrow_words();
        [
            n[0],
            n[1],
            n[2],
            n[3],
            n[4],
            self.metadata,
            self.ipv6_src as u64,
            (self.ipv6_src >> 64) as u64,
            self.ipv6_dst as u64,
            (self.ipv6_dst >> 64) as u64,
            self.nd_target as u64,
            (self.nd_target >> 64) as u64,
            u64::from(self.ipv6_label),
            mac_word(self.arp_sha),
            mac_word(self.arp_tha),
        ]
    }

    /// The inverse of [`FlowKey::to_words`]; bits outside the fields (the top bytes of the MAC
    /// words, the top of the label's word) are ignored.
    pub fn from_words(w: &KeyWords) -> FlowKey {
        let mac = |x: u64| {
            let b = x.to_le_bytes();
            [b[0], b[1], b[2], b[3], b[4], b[5]]
        };
        let wide = |lo: u64, hi: u64| u128::from(lo) | u128::from(hi) << 64;
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
            nw_ttl: (w[3] >> 56) as u8,
            dl_dst: mac(w[4]),
            metadata: w[5],
            ipv6_src: wide(w[6], w[7]),
            ipv6_dst: wide(w[8], w[9]),
            nd_target: wide(w[10], w[11]),
            ipv6_label: w[12] as u32,
            arp_sha: mac(w[13]),
            arp_tha: mac(w[14]),
        }
    }

    /// True when, used as a mask, this key examines only narrow words (see [`NARROW_WORDS`]).
    #[inline]
    pub fn is_narrow_mask(&self) -> bool {
        self.metadata == 0
            && self.ipv6_src == 0
            && self.ipv6_dst == 0
            && self.nd_target == 0
            && self.ipv6_label == 0
            && self.arp_sha == [0; 6]
            && self.arp_tha == [0; 6]
    }

    /// True when this is an IPv4 packet.
    #[inline]
    pub fn is_ip(&self) -> bool {
        self.dl_type == ETH_TYPE_IP
    }

    /// True when this is an IPv6 packet.
    #[inline]
    pub fn is_ipv6(&self) -> bool {
        self.dl_type == ETH_TYPE_IPV6
    }

    /// True when `tp_src`/`tp_dst` hold ports (TCP, UDP, SCTP over IPv4 or IPv6).
    #[inline]
    pub fn has_ports(&self) -> bool {
        (self.is_ip() || self.is_ipv6()) && matches!(self.nw_proto, IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP)
    }
}

impl fmt::Debug for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "FlowKey{{in_port={},dl_src={},dl_dst={},dl_type={:#06x},vlan_tci={:#06x},nw_src={},nw_dst={},nw_proto={},nw_tos={},nw_frag={},tp_src={},tp_dst={},tcp_flags={:#05x}",
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
        )?;
        if self.nw_ttl != 0 {
            write!(f, ",nw_ttl={}", self.nw_ttl)?;
        }
        self.fmt_wide(f)?;
        f.write_str("}")
    }
}

#[inline(always)]
fn mac_word(m: [u8; 6]) -> u64 {
    u64::from_le_bytes([m[0], m[1], m[2], m[3], m[4], m[5], 0, 0])
}

/// Formats a MAC address as `xx:xx:xx:xx:xx:xx`.
pub fn fmt_mac(mac: &[u8; 6]) -> String {
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", mac[0], mac[1], mac[2], mac[3], mac[4], mac[5])
}

/// Formats an IPv4 address held in host order.
pub fn fmt_ipv4(addr: u32) -> String {
    std::net::Ipv4Addr::from(addr).to_string()
}

/// Formats an IPv6 address held in host order (RFC 5952, as OVS prints it).
pub fn fmt_ipv6(addr: u128) -> String {
    std::net::Ipv6Addr::from(addr).to_string()
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
    fn narrow_keys_keep_every_narrow_member() {
        let k = FlowKey {
            dl_src: [1, 2, 3, 4, 5, 6],
            dl_dst: [7, 8, 9, 10, 11, 12],
            vlan_tci: 0x1005,
            tcp_flags: 0x12,
            nw_tos: 0xb8,
            nw_frag: 3,
            nw_ttl: 64,
            in_port: 9,
            ..FlowKey::ipv4(0x0a01_0203, 0xc0a8_0001, 6, 1234, 80)
        };
        let n = k.narrow().expect("no wide member set");
        assert_eq!(n.widen(), k);
        assert_eq!(std::mem::size_of::<NarrowKey>(), 40);
        assert_eq!(FlowKey { metadata: 1, ..k }.narrow(), None);
        assert_eq!(FlowKey { arp_tha: [0, 0, 0, 0, 0, 1], ..k }.narrow(), None);
        assert_eq!(FlowKey::ipv6(1, 2, 6, 3, 4).narrow(), None);
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
