//! The plain C structs of the API — [`rqvs_key`], [`rqvs_rule`], [`rqvs_live_stats`] — and
//! their conversions to and from the flow layer's types. Safe code only.

use rqvs_flow::{FlowKey, Match, PortRange, Rule};

use crate::error::{Error, RQVS_ERR_INVALID};

/// `dl_type` of IPv4: ClassBench rules require it, so a ClassBench packet is a zeroed key with
/// `dl_type = RQVS_ETH_TYPE_IP` and its five fields (`nw_src`, `nw_dst`, `tp_src`, `tp_dst`,
/// `nw_proto`) set.
pub const RQVS_ETH_TYPE_IP: u16 = 0x0800;

/// Result id of a packet no rule matches.
pub const RQVS_NO_MATCH: i64 = -1;

/// One packet's header fields, in host byte order, under `FlowKey`'s (and Open vSwitch's) names.
///
/// Plain data: zero it, then set the fields the rules examine. The transport fields are shared
/// as in OVS: `tp_src`/`tp_dst` are the ports for TCP, UDP and SCTP, the ICMP type and code
/// for ICMP. `vlan_tci` has the CFI bit (0x1000) set when a VLAN tag is present; `nw_frag` has
/// bit 1 for any fragment, bit 2 for a later one; `tcp_flags` holds the 12 TCP flag bits.
/// The layout is the library's own key type, so a batch of keys is classified without a copy.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct rqvs_key {
    /// IPv4 source address (10.0.0.1 is 0x0a000001).
    pub nw_src: u32,
    /// IPv4 destination address.
    pub nw_dst: u32,
    /// Transport source port (ICMP: type).
    pub tp_src: u16,
    /// Transport destination port (ICMP: code).
    pub tp_dst: u16,
    /// The switch port the packet came in on.
    pub in_port: u32,
    /// Ethernet type (IPv4: 0x0800).
    pub dl_type: u16,
    /// 802.1Q tag control information, CFI bit set when a tag is present.
    pub vlan_tci: u16,
    /// TCP flags (12 bits).
    pub tcp_flags: u16,
    /// IP protocol (TCP 6, UDP 17, ICMP 1).
    pub nw_proto: u8,
    /// IP type of service byte.
    pub nw_tos: u8,
    /// Fragment bits: 1 any fragment, 2 a later fragment.
    pub nw_frag: u8,
    /// Ethernet source address.
    pub dl_src: [u8; 6],
    /// Ethernet destination address.
    pub dl_dst: [u8; 6],
    /// IPv4 TTL / IPv6 hop limit.
    pub nw_ttl: u8,
    /// OpenFlow metadata.
    pub metadata: u64,
    /// IPv6 source address (`lo` holds its last 8 bytes: 2001:db8::1 is `{lo = 1, hi =
    /// 0x20010db800000000}`).
    pub ipv6_src: rqvs_u128,
    /// IPv6 destination address.
    pub ipv6_dst: rqvs_u128,
    /// ICMPv6 neighbour discovery target address.
    pub nd_target: rqvs_u128,
    /// IPv6 flow label (20 bits).
    pub ipv6_label: u32,
    /// ARP sender hardware address; ND source link-layer address.
    pub arp_sha: [u8; 6],
    /// ARP target hardware address; ND target link-layer address.
    pub arp_tha: [u8; 6],
}

/// A 128-bit number (an IPv6 address in host order) as two 64-bit halves, aligned as the
/// library's `u128`.
#[allow(non_camel_case_types)]
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct rqvs_u128 {
    /// The low 64 bits.
    pub lo: u64,
    /// The high 64 bits.
    pub hi: u64,
}

impl From<u128> for rqvs_u128 {
    fn from(x: u128) -> rqvs_u128 {
        rqvs_u128 { lo: x as u64, hi: (x >> 64) as u64 }
    }
}

impl From<rqvs_u128> for u128 {
    fn from(x: rqvs_u128) -> u128 {
        u128::from(x.lo) | u128::from(x.hi) << 64
    }
}

// The zero-copy view of a `rqvs_key` array as `FlowKey`s (`crate::ffi::keys`) needs the two
// layouts to be the same: the same size, alignment and field offsets (both are `repr(C)`).
macro_rules! same_layout {
    ($($f:ident),*) => {
        const _: () = {
            assert!(std::mem::size_of::<rqvs_key>() == std::mem::size_of::<FlowKey>());
            assert!(std::mem::align_of::<rqvs_key>() == std::mem::align_of::<FlowKey>());
            $(assert!(std::mem::offset_of!(rqvs_key, $f) == std::mem::offset_of!(FlowKey, $f));)*
        };
    };
}
same_layout!(
    nw_src, nw_dst, tp_src, tp_dst, in_port, dl_type, vlan_tci, tcp_flags, nw_proto, nw_tos, nw_frag, dl_src, dl_dst,
    nw_ttl, metadata, ipv6_src, ipv6_dst, nd_target, ipv6_label, arp_sha, arp_tha
);
// `rqvs_u128` is `u128` in memory (little-endian: `lo` first), so the view above holds.
const _: () = {
    assert!(std::mem::size_of::<rqvs_u128>() == std::mem::size_of::<u128>());
    assert!(std::mem::align_of::<rqvs_u128>() == std::mem::align_of::<u128>());
    assert!(cfg!(target_endian = "little"));
};

impl From<&rqvs_key> for FlowKey {
    fn from(k: &rqvs_key) -> FlowKey {
        FlowKey {
            nw_src: k.nw_src,
            nw_dst: k.nw_dst,
            tp_src: k.tp_src,
            tp_dst: k.tp_dst,
            in_port: k.in_port,
            dl_type: k.dl_type,
            vlan_tci: k.vlan_tci,
            tcp_flags: k.tcp_flags,
            nw_proto: k.nw_proto,
            nw_tos: k.nw_tos,
            nw_frag: k.nw_frag,
            dl_src: k.dl_src,
            dl_dst: k.dl_dst,
            nw_ttl: k.nw_ttl,
            metadata: k.metadata,
            ipv6_src: k.ipv6_src.into(),
            ipv6_dst: k.ipv6_dst.into(),
            nd_target: k.nd_target.into(),
            ipv6_label: k.ipv6_label,
            arp_sha: k.arp_sha,
            arp_tha: k.arp_tha,
        }
    }
}

impl From<&FlowKey> for rqvs_key {
    fn from(k: &FlowKey) -> rqvs_key {
        rqvs_key {
            nw_src: k.nw_src,
            nw_dst: k.nw_dst,
            tp_src: k.tp_src,
            tp_dst: k.tp_dst,
            in_port: k.in_port,
            dl_type: k.dl_type,
            vlan_tci: k.vlan_tci,
            tcp_flags: k.tcp_flags,
            nw_proto: k.nw_proto,
            nw_tos: k.nw_tos,
            nw_frag: k.nw_frag,
            dl_src: k.dl_src,
            dl_dst: k.dl_dst,
            nw_ttl: k.nw_ttl,
            metadata: k.metadata,
            ipv6_src: k.ipv6_src.into(),
            ipv6_dst: k.ipv6_dst.into(),
            nd_target: k.nd_target.into(),
            ipv6_label: k.ipv6_label,
            arp_sha: k.arp_sha,
            arp_tha: k.arp_tha,
        }
    }
}

/// A rule in struct form: a priority and a match (value/mask on every field, plus an inclusive
/// range on each transport port; a packet must satisfy all of them). Its actions are `drop`
/// (the classifiers answer rule ids; actions are the caller's). Its id is given by the
/// classifier it is inserted into.
///
/// `rqvs_rule_any(priority)` gives the rule that matches every packet; narrow it from there.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct rqvs_rule {
    /// The winner among the rules a packet matches is the one of highest priority, then lowest
    /// id.
    pub priority: u32,
    /// Field values; a bit set here that is clear in `mask` is an error.
    pub value: rqvs_key,
    /// The bits examined: a set bit must equal `value`'s.
    pub mask: rqvs_key,
    /// Inclusive range on `tp_src` (0 and 65535: any port).
    pub tp_src_lo: u16,
    pub tp_src_hi: u16,
    /// Inclusive range on `tp_dst` (0 and 65535: any port).
    pub tp_dst_lo: u16,
    pub tp_dst_hi: u16,
}

impl rqvs_rule {
    /// The rule that matches every packet.
    pub fn any(priority: u32) -> rqvs_rule {
        rqvs_rule::from(&Rule::new(0, priority, Match::ANY, rqvs_flow::Actions::drop()))
    }

    /// The flow layer's rule with id `id`; an error when the value has bits outside the mask or
    /// a port range is empty.
    pub fn to_rule(&self, id: u32) -> Result<Rule, Error> {
        let range = |lo: u16, hi: u16, port: &str| {
            PortRange::new(lo, hi)
                .ok_or_else(|| Error::new(RQVS_ERR_INVALID, format!("{port} range {lo}..{hi} is empty (lo > hi)")))
        };
        let m = Match::new(
            FlowKey::from(&self.value),
            FlowKey::from(&self.mask),
            range(self.tp_src_lo, self.tp_src_hi, "tp_src")?,
            range(self.tp_dst_lo, self.tp_dst_hi, "tp_dst")?,
        )
        .map_err(|e| Error::new(RQVS_ERR_INVALID, e.to_string()))?;
        Ok(Rule::new(id, self.priority, m, rqvs_flow::Actions::drop()))
    }
}

impl From<&Rule> for rqvs_rule {
    fn from(r: &Rule) -> rqvs_rule {
        let m = &r.matches;
        rqvs_rule {
            priority: r.priority,
            value: rqvs_key::from(m.value()),
            mask: rqvs_key::from(m.mask()),
            tp_src_lo: m.tp_src_range().lo,
            tp_src_hi: m.tp_src_range().hi,
            tp_dst_lo: m.tp_dst_range().lo,
            tp_dst_hi: m.tp_dst_range().hi,
        }
    }
}

/// When a live classifier's inserted rules become visible (the `policy` argument).
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum rqvs_policy {
    /// Into the remainder (or an iSet bucket with room) at once: the next lookup sees it.
    RQVS_POLICY_INSTANT = 0,
    /// Staged, invisible until the next model is trained and swapped in.
    RQVS_POLICY_DELAYED = 1,
}

/// What a live NuevoMatchUP classifier is doing (`rqvs_live_get_stats`).
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct rqvs_live_stats {
    /// Rules held: visible, plus staged (delayed policy).
    pub rules: usize,
    /// Rules inserted under the delayed policy, not visible until the next model.
    pub staged: usize,
    /// Rules in the remainder (TupleMerge) now.
    pub remainder_rules: usize,
    /// Share of all rules the iSets (learned indexes) serve, 0 to 1.
    pub coverage: f64,
    /// 1 while a model is being trained in the background.
    pub training: u8,
    /// Training sessions finished (models swapped in) and failed.
    pub sessions: usize,
    pub failed_sessions: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_struct_round_trips_and_checks_its_match() {
        let text = "@10.1.0.0/16\t0.0.0.0/0\t0 : 65535\t1000 : 2000\t0x11/0xFF\t0x0000/0x0000";
        let r = rqvs_flow::formats::parse_rule_line("t", 1, text, 4, 77).unwrap();
        let s = rqvs_rule::from(&r);
        assert_eq!((s.tp_dst_lo, s.tp_dst_hi, s.priority), (1000, 2000, 77));
        assert_eq!(s.to_rule(4).unwrap(), r);
        let mut bad = s;
        bad.value.nw_dst = 1; // outside the (empty) mask
        assert_eq!(bad.to_rule(0).unwrap_err().status, RQVS_ERR_INVALID);
        let mut bad = s;
        (bad.tp_src_lo, bad.tp_src_hi) = (9, 8);
        assert!(bad.to_rule(0).unwrap_err().message.contains("tp_src range 9..8"));
        let any = rqvs_rule::any(3).to_rule(0).unwrap();
        assert!(any.matches.matches(&FlowKey::default()));
    }

    #[test]
    fn constants_are_the_flow_layers() {
        assert_eq!(RQVS_ETH_TYPE_IP, rqvs_flow::key::ETH_TYPE_IP);
    }

    #[test]
    fn key_conversions_round_trip() {
        let k = FlowKey { nw_src: 1, tp_dst: 80, dl_src: [1, 2, 3, 4, 5, 6], nw_frag: 3, ..FlowKey::default() };
        assert_eq!(FlowKey::from(&rqvs_key::from(&k)), k);
    }
}
