//! Megaflows: the packet's value under the wildcard mask the slow path produced, and their text
//! in the notation of `ovs-appctl ofproto/trace` ("Megaflow: ...", OVS's `match_format`).
//!
//! The mask is the classifier's wildcards plus what OVS's translation (`xlate_wc_init` and
//! `xlate_wc_finish` in `ofproto-dpif-xlate.c`) always adds or removes for the rules rqvs holds:
//! - always examined: `in_port`, `dl_type` (and `recirc_id` and the packet type, which rqvs keys
//!   do not carry: a megaflow always prints `recirc_id=0,eth`);
//! - IPv4 (and IPv6) packets: both `nw_frag` bits;
//! - ICMP and ICMPv6: only the low 8 bits of `tp_src`/`tp_dst` (type and code are 8-bit in the
//!   datapath);
//! - a VLAN TCI examined at all has its CFI bit examined;
//! - later IP fragments: no port bits (their ports are always zero).
//!
//! Actions rqvs executes (`output`, `drop`, `controller`) add no bits in OVS.

use std::fmt::{self, Write as _};

use rqvs_flow::key::*;
use rqvs_flow::FlowKey;

/// A megaflow: `value` is the packet masked with `mask`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Megaflow {
    pub value: FlowKey,
    pub mask: FlowKey,
}

impl Megaflow {
    /// The megaflow of `key` for the classifier's wildcards `wc`, with OVS's translation-time
    /// additions (module docs).
    pub fn from_wildcards(key: &FlowKey, wc: &FlowKey) -> Megaflow {
        let mut mask = *wc;
        mask.in_port = u32::MAX;
        mask.dl_type = u16::MAX;
        if key.is_ip() || key.dl_type == ETH_TYPE_IPV6 {
            mask.nw_frag = FLOW_NW_FRAG_ANY | FLOW_NW_FRAG_LATER;
        }
        if (key.is_ip() && key.nw_proto == IPPROTO_ICMP)
            || (key.dl_type == ETH_TYPE_IPV6 && key.nw_proto == IPPROTO_ICMPV6)
        {
            mask.tp_src &= 0xff;
            mask.tp_dst &= 0xff;
        }
        if mask.vlan_tci != 0 {
            mask.vlan_tci |= VLAN_CFI;
        }
        if key.nw_frag & FLOW_NW_FRAG_LATER != 0 {
            mask.tp_src = 0;
            mask.tp_dst = 0;
        }
        Megaflow { value: key.masked(&mask), mask }
    }

    /// Does `key` fall in this megaflow?
    #[inline]
    pub fn contains(&self, key: &FlowKey) -> bool {
        key.masked(&self.mask) == self.value
    }
}

const TCP_FLAG_NAMES: [&str; 12] =
    ["fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns", "[200]", "[400]", "[800]"];

fn fmt_be16_masked(s: &mut String, name: &str, v: u16, m: u16) {
    match m {
        0 => {}
        u16::MAX => {
            let _ = write!(s, "{name}={v},");
        }
        _ => {
            let _ = write!(s, "{name}={v:#x}/{m:#x},");
        }
    }
}

fn fmt_ip_masked(s: &mut String, name: &str, v: u32, m: u32) {
    if m == 0 {
        return;
    }
    let _ = write!(s, "{name}={}", fmt_ipv4(v));
    if m != u32::MAX {
        if m.leading_ones() + m.trailing_zeros() == 32 {
            let _ = write!(s, "/{}", m.leading_ones());
        } else {
            let _ = write!(s, "/{}", fmt_ipv4(m));
        }
    }
    s.push(',');
}

/// An IPv6 address as glibc's `inet_ntop` writes it (OVS's `ipv6_format_addr`): RFC 5952's
/// text, and the IPv4-compatible and IPv4-mapped forms with a dotted quad (`::1.2.3.4`).
fn fmt_ipv6_ntop(a: u128) -> String {
    let w: [u16; 8] = std::array::from_fn(|i| (a >> (112 - 16 * i)) as u16);
    // glibc: the longest run of zero words starting at word 0 being words 0..6 (or 0..5 then
    // ffff) means an embedded IPv4 address (not for :: and ::1, whose run is longer).
    let run0 = w.iter().take_while(|&&x| x == 0).count();
    if run0 == 6 || (run0 == 5 && w[5] == 0xffff) {
        let v4 = fmt_ipv4(a as u32);
        return if run0 == 6 { format!("::{v4}") } else { format!("::ffff:{v4}") };
    }
    fmt_ipv6(a)
}

fn fmt_ipv6_masked(s: &mut String, name: &str, v: u128, m: u128) {
    if m == 0 {
        return;
    }
    let _ = write!(s, "{name}={}", fmt_ipv6_ntop(v));
    if m != u128::MAX {
        if m.leading_ones() + m.trailing_zeros() == 128 {
            let _ = write!(s, "/{}", m.leading_ones());
        } else {
            let _ = write!(s, "/{}", fmt_ipv6_ntop(m));
        }
    }
    s.push(',');
}

fn fmt_eth_masked(s: &mut String, name: &str, v: &[u8; 6], m: &[u8; 6]) {
    if *m == [0; 6] {
        return;
    }
    let _ = write!(s, "{name}={}", fmt_mac(v));
    if *m != [0xff; 6] {
        let _ = write!(s, "/{}", fmt_mac(m));
    }
    s.push(',');
}

fn fmt_tcp_flags(s: &mut String, flags: u16, mask: u16) {
    s.push_str("tcp_flags=");
    if mask == TCP_FLAGS_MASK {
        if flags == 0 {
            s.push('0');
        } else {
            let names: Vec<&str> = (0..12).filter(|b| flags & (1 << b) != 0).map(|b| TCP_FLAG_NAMES[b]).collect();
            s.push_str(&names.join("|"));
        }
    } else {
        for b in (0..12).filter(|b| mask & (1 << b) != 0) {
            s.push(if flags & (1 << b) != 0 { '+' } else { '-' });
            s.push_str(TCP_FLAG_NAMES[b]);
        }
    }
    s.push(',');
}

/// TCP flags under a mask as OVS prints them in a match: `+syn-ack` (each examined flag set or
/// clear), or with every flag examined, the flags set joined by `|` (`syn|ack`, `0` for none).
pub fn format_tcp_flags(flags: u16, mask: u16) -> String {
    let mut s = String::new();
    fmt_tcp_flags(&mut s, flags, mask);
    s.trim_start_matches("tcp_flags=").trim_end_matches(',').to_string()
}

/// A value/mask pair in the notation of OVS's `match_format` for a megaflow (the fields rqvs
/// keys carry, in OVS's order: protocol shorthand (`tcp`, `tcp6`, `icmp6`, …), `metadata`,
/// `in_port`, VLAN, MACs, `dl_type`, then IPv4 addresses, or `ipv6_src`/`ipv6_dst`/`ipv6_label`,
/// or ARP's, the protocol, ARP hardware addresses, ToS, TTL, fragments, ports or ICMP type/code
/// with ICMPv6's `nd_target`/`nd_sll`/`nd_tll`, TCP flags of TCP over IPv4 and IPv6), prefixed
/// with `recirc_id=0,eth,` as every megaflow of a bridge is.
pub fn format_megaflow(value: &FlowKey, mask: &FlowKey) -> String {
    let (f, w) = (value, mask);
    let mut s = String::from("recirc_id=0,eth,");
    let mut skip_type = false;
    let mut skip_proto = false;
    if w.dl_type != 0 {
        skip_type = true;
        match f.dl_type {
            ETH_TYPE_IP => {
                if w.nw_proto != 0 {
                    skip_proto = true;
                    match f.nw_proto {
                        IPPROTO_ICMP => s.push_str("icmp,"),
                        IPPROTO_TCP => s.push_str("tcp,"),
                        IPPROTO_UDP => s.push_str("udp,"),
                        IPPROTO_SCTP => s.push_str("sctp,"),
                        _ => {
                            s.push_str("ip,");
                            skip_proto = false;
                        }
                    }
                } else {
                    s.push_str("ip,");
                }
            }
            ETH_TYPE_IPV6 => {
                if w.nw_proto != 0 {
                    skip_proto = true;
                    match f.nw_proto {
                        IPPROTO_ICMPV6 => s.push_str("icmp6,"),
                        IPPROTO_TCP => s.push_str("tcp6,"),
                        IPPROTO_UDP => s.push_str("udp6,"),
                        IPPROTO_SCTP => s.push_str("sctp6,"),
                        _ => {
                            s.push_str("ipv6,");
                            skip_proto = false;
                        }
                    }
                } else {
                    s.push_str("ipv6,");
                }
            }
            ETH_TYPE_ARP => s.push_str("arp,"),
            _ => skip_type = false,
        }
    }
    if w.metadata != 0 {
        let _ = write!(s, "metadata={:#x},", f.metadata);
        if w.metadata != u64::MAX {
            s.pop();
            let _ = write!(s, "/{:#x},", w.metadata);
        }
    }
    if w.in_port != 0 {
        if f.in_port == rqvs_flow::formats::ofctl::OFPP_LOCAL {
            s.push_str("in_port=LOCAL,");
        } else {
            let _ = write!(s, "in_port={},", f.in_port);
        }
    }
    if w.vlan_tci != 0 {
        let vid = w.vlan_tci & VLAN_VID_MASK;
        let pcp = w.vlan_tci & VLAN_PCP_MASK;
        let cfi = w.vlan_tci & VLAN_CFI;
        if cfi != 0
            && f.vlan_tci & VLAN_CFI != 0
            && (vid == 0 || vid == VLAN_VID_MASK)
            && (pcp == 0 || pcp == VLAN_PCP_MASK)
            && (vid != 0 || pcp != 0)
        {
            if vid != 0 {
                let _ = write!(s, "dl_vlan={},", f.vlan_tci & VLAN_VID_MASK);
            }
            if pcp != 0 {
                let _ = write!(s, "dl_vlan_pcp={},", f.vlan_tci >> 13);
            }
        } else if w.vlan_tci == u16::MAX {
            let _ = write!(s, "vlan_tci={:#06x},", f.vlan_tci);
        } else {
            let _ = write!(s, "vlan_tci={:#06x}/{:#06x},", f.vlan_tci, w.vlan_tci);
        }
    }
    fmt_eth_masked(&mut s, "dl_src", &f.dl_src, &w.dl_src);
    fmt_eth_masked(&mut s, "dl_dst", &f.dl_dst, &w.dl_dst);
    if !skip_type && w.dl_type != 0 {
        let _ = write!(s, "dl_type={:#06x},", f.dl_type);
    }
    let arp = f.dl_type == ETH_TYPE_ARP;
    let ipv6 = f.dl_type == ETH_TYPE_IPV6;
    if ipv6 {
        fmt_ipv6_masked(&mut s, "ipv6_src", f.ipv6_src, w.ipv6_src);
        fmt_ipv6_masked(&mut s, "ipv6_dst", f.ipv6_dst, w.ipv6_dst);
        // OVS prints a label without its mask only for an all-ones 32-bit mask, which a label's
        // mask (20 bits) never is: `ipv6_label=0x12345/0xfffff`.
        match w.ipv6_label {
            0 => {}
            u32::MAX => {
                let _ = write!(s, "ipv6_label={:#07x},", f.ipv6_label);
            }
            m => {
                let _ = write!(s, "ipv6_label={:#07x}/{:#07x},", f.ipv6_label, m);
            }
        }
    } else {
        fmt_ip_masked(&mut s, if arp { "arp_spa" } else { "nw_src" }, f.nw_src, w.nw_src);
        fmt_ip_masked(&mut s, if arp { "arp_tpa" } else { "nw_dst" }, f.nw_dst, w.nw_dst);
    }
    if !skip_proto && w.nw_proto != 0 {
        let _ = write!(s, "{}={},", if arp { "arp_op" } else { "nw_proto" }, f.nw_proto);
    }
    if arp {
        fmt_eth_masked(&mut s, "arp_sha", &f.arp_sha, &w.arp_sha);
        fmt_eth_masked(&mut s, "arp_tha", &f.arp_tha, &w.arp_tha);
    }
    if w.nw_tos & 0xfc != 0 {
        let _ = write!(s, "nw_tos={},", f.nw_tos & 0xfc);
    }
    if w.nw_tos & 0x03 != 0 {
        let _ = write!(s, "nw_ecn={},", f.nw_tos & 0x03);
    }
    if w.nw_ttl != 0 {
        let _ = write!(s, "nw_ttl={},", f.nw_ttl);
    }
    let any = f.nw_frag & FLOW_NW_FRAG_ANY != 0;
    let later = f.nw_frag & FLOW_NW_FRAG_LATER != 0;
    match w.nw_frag & 3 {
        3 => {
            let _ = write!(
                s,
                "nw_frag={},",
                match (any, later) {
                    (true, true) => "later",
                    (true, false) => "first",
                    (false, true) => "<error>",
                    (false, false) => "no",
                }
            );
        }
        FLOW_NW_FRAG_ANY => {
            let _ = write!(s, "nw_frag={},", if any { "yes" } else { "no" });
        }
        FLOW_NW_FRAG_LATER => {
            let _ = write!(s, "nw_frag={},", if later { "later" } else { "not_later" });
        }
        _ => {}
    }
    if f.dl_type == ETH_TYPE_IP && f.nw_proto == IPPROTO_ICMP {
        fmt_be16_masked(&mut s, "icmp_type", f.tp_src, w.tp_src);
        fmt_be16_masked(&mut s, "icmp_code", f.tp_dst, w.tp_dst);
    } else if ipv6 && f.nw_proto == IPPROTO_ICMPV6 {
        fmt_be16_masked(&mut s, "icmp_type", f.tp_src, w.tp_src);
        fmt_be16_masked(&mut s, "icmp_code", f.tp_dst, w.tp_dst);
        fmt_ipv6_masked(&mut s, "nd_target", f.nd_target, w.nd_target);
        fmt_eth_masked(&mut s, "nd_sll", &f.arp_sha, &w.arp_sha);
        fmt_eth_masked(&mut s, "nd_tll", &f.arp_tha, &w.arp_tha);
    } else {
        fmt_be16_masked(&mut s, "tp_src", f.tp_src, w.tp_src);
        fmt_be16_masked(&mut s, "tp_dst", f.tp_dst, w.tp_dst);
    }
    if (f.dl_type == ETH_TYPE_IP || ipv6) && f.nw_proto == IPPROTO_TCP && w.tcp_flags != 0 {
        fmt_tcp_flags(&mut s, f.tcp_flags, w.tcp_flags & TCP_FLAGS_MASK);
    }
    s.pop();
    s
}

impl fmt::Display for Megaflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_megaflow(&self.value, &self.mask))
    }
}

/// A packet as `ofproto/trace` takes it (`in_port=1,tcp,nw_src=...,tp_dst=...`): every field rqvs
/// keys carry that differs from zero, with the protocol's own port names (`udp_src`, `icmp_type`).
/// Ports of protocols without ports are left out (OVS keeps them zero), as are TCP flags of
/// non-TCP packets.
pub fn format_packet(k: &FlowKey) -> String {
    let mut parts: Vec<String> = vec![format!("in_port={}", k.in_port)];
    if k.vlan_tci & VLAN_CFI != 0 {
        parts.push(format!("vlan_tci={:#06x}", k.vlan_tci));
    }
    if k.dl_src != [0; 6] {
        parts.push(format!("dl_src={}", fmt_mac(&k.dl_src)));
    }
    if k.dl_dst != [0; 6] {
        parts.push(format!("dl_dst={}", fmt_mac(&k.dl_dst)));
    }
    match k.dl_type {
        ETH_TYPE_IP => {
            let names = match k.nw_proto {
                IPPROTO_TCP => Some(("tcp", "tcp_src", "tcp_dst")),
                IPPROTO_UDP => Some(("udp", "udp_src", "udp_dst")),
                IPPROTO_SCTP => Some(("sctp", "sctp_src", "sctp_dst")),
                IPPROTO_ICMP => Some(("icmp", "icmp_type", "icmp_code")),
                _ => None,
            };
            match names {
                Some((p, _, _)) => parts.push(p.into()),
                None => parts.push(format!("ip,nw_proto={}", k.nw_proto)),
            }
            parts.push(format!("nw_src={},nw_dst={}", fmt_ipv4(k.nw_src), fmt_ipv4(k.nw_dst)));
            if k.nw_tos & 0xfc != 0 {
                parts.push(format!("nw_tos={}", k.nw_tos & 0xfc));
            }
            if k.nw_tos & 3 != 0 {
                parts.push(format!("nw_ecn={}", k.nw_tos & 3));
            }
            match k.nw_frag & 3 {
                0 => {}
                FLOW_NW_FRAG_ANY => parts.push("nw_frag=first".into()),
                _ => parts.push("nw_frag=later".into()),
            }
            if let Some((_, src, dst)) = names {
                if k.nw_frag & FLOW_NW_FRAG_LATER == 0 {
                    parts.push(format!("{src}={},{dst}={}", k.tp_src, k.tp_dst));
                }
            }
            if k.nw_proto == IPPROTO_TCP && k.tcp_flags != 0 {
                parts.push(format!("tcp_flags={:#05x}", k.tcp_flags));
            }
        }
        ETH_TYPE_ARP => parts.push(format!(
            "arp,arp_spa={},arp_tpa={},arp_op={}",
            fmt_ipv4(k.nw_src),
            fmt_ipv4(k.nw_dst),
            k.nw_proto
        )),
        t => parts.push(format!("dl_type={t:#06x}")),
    }
    parts.join(",")
}

/// A packet in the notation of `ofproto/trace`'s `Flow:` and `Final flow:` lines (OVS's
/// `flow_format`) for the fields rqvs keys carry: every field printed, zero or not, in OVS's order
/// (`metadata` only when not 0, as OVS), TCP flags by name (`syn|ack`, `0`); a packet traced
/// from text without `nw_ttl` has TTL 0, in OVS too.
pub fn format_flow(k: &FlowKey) -> String {
    let mut s = String::new();
    let ip = k.dl_type == ETH_TYPE_IP;
    let ipv6 = k.dl_type == ETH_TYPE_IPV6;
    let arp = k.dl_type == ETH_TYPE_ARP;
    let proto = match (ip, ipv6, k.nw_proto) {
        (true, _, IPPROTO_TCP) => "tcp",
        (true, _, IPPROTO_UDP) => "udp",
        (true, _, IPPROTO_SCTP) => "sctp",
        (true, _, IPPROTO_ICMP) => "icmp",
        (true, _, _) => "ip",
        (_, true, IPPROTO_TCP) => "tcp6",
        (_, true, IPPROTO_UDP) => "udp6",
        (_, true, IPPROTO_SCTP) => "sctp6",
        (_, true, IPPROTO_ICMPV6) => "icmp6",
        (_, true, _) => "ipv6",
        _ if arp => "arp",
        _ => "",
    };
    if !proto.is_empty() {
        let _ = write!(s, "{proto},");
    }
    if k.metadata != 0 {
        let _ = write!(s, "metadata={:#x},", k.metadata);
    }
    if k.in_port == rqvs_flow::formats::ofctl::OFPP_LOCAL {
        s.push_str("in_port=LOCAL,");
    } else {
        let _ = write!(s, "in_port={},", k.in_port);
    }
    if k.vlan_tci & VLAN_CFI != 0 {
        let _ = write!(s, "dl_vlan={},dl_vlan_pcp={},vlan_tci1=0x0000,", k.vlan_tci & VLAN_VID_MASK, k.vlan_tci >> 13);
    } else {
        s.push_str("vlan_tci=0x0000,");
    }
    let _ = write!(s, "dl_src={},dl_dst={},", fmt_mac(&k.dl_src), fmt_mac(&k.dl_dst));
    if ip || ipv6 {
        if ip {
            let _ = write!(s, "nw_src={},nw_dst={},", fmt_ipv4(k.nw_src), fmt_ipv4(k.nw_dst));
        } else {
            let _ = write!(
                s,
                "ipv6_src={},ipv6_dst={},ipv6_label={:#07x},",
                fmt_ipv6_ntop(k.ipv6_src),
                fmt_ipv6_ntop(k.ipv6_dst),
                k.ipv6_label
            );
        }
        if proto == "ip" || proto == "ipv6" {
            let _ = write!(s, "nw_proto={},", k.nw_proto);
        }
        let later = k.nw_frag & FLOW_NW_FRAG_LATER != 0;
        let frag = match (k.nw_frag & FLOW_NW_FRAG_ANY != 0, later) {
            (false, _) => "no",
            (true, false) => "first",
            (true, true) => "later",
        };
        let _ = write!(s, "nw_tos={},nw_ecn={},nw_ttl={},nw_frag={frag},", k.nw_tos & 0xfc, k.nw_tos & 3, k.nw_ttl);
        // A later fragment has no transport header: OVS prints none of its fields.
        if !later {
            match proto {
                "icmp" | "icmp6" => {
                    let _ = write!(s, "icmp_type={},icmp_code={},", k.tp_src, k.tp_dst);
                    if proto == "icmp6" && (k.tp_src == 135 || k.tp_src == 136) && k.tp_dst == 0 {
                        let _ = write!(
                            s,
                            "nd_target={},nd_sll={},nd_tll={},",
                            fmt_ipv6_ntop(k.nd_target),
                            fmt_mac(&k.arp_sha),
                            fmt_mac(&k.arp_tha)
                        );
                    }
                }
                "tcp" | "udp" | "sctp" | "tcp6" | "udp6" | "sctp6" => {
                    let _ = write!(s, "tp_src={},tp_dst={},", k.tp_src, k.tp_dst);
                }
                _ => {}
            }
            if proto == "tcp" || proto == "tcp6" {
                fmt_tcp_flags(&mut s, k.tcp_flags, TCP_FLAGS_MASK);
            }
        }
    } else if arp {
        let _ = write!(
            s,
            "arp_spa={},arp_tpa={},arp_op={},arp_sha={},arp_tha={},",
            fmt_ipv4(k.nw_src),
            fmt_ipv4(k.nw_dst),
            k.nw_proto,
            fmt_mac(&k.arp_sha),
            fmt_mac(&k.arp_tha)
        );
    } else {
        let _ = write!(s, "dl_type={:#06x},", k.dl_type);
    }
    s.pop();
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_ovs() {
        // From a real ofproto/trace: rule tcp,nw_src=10.1.0.0/16,nw_dst=192.168.2.0/24,tp_dst=0x400/0xfc00.
        let k = FlowKey::ipv4(0x0a01_0203, 0xc0a8_0207, 6, 1030, 1025);
        let mut wc = FlowKey::default();
        wc.nw_proto = 0xff;
        wc.nw_src = 0xffff_0000;
        wc.nw_dst = 0xffff_ff00;
        wc.tp_dst = 0xfc00;
        let m = Megaflow::from_wildcards(&k, &wc);
        assert_eq!(
            m.to_string(),
            "recirc_id=0,eth,tcp,in_port=1,nw_src=10.1.0.0/16,nw_dst=192.168.2.0/24,nw_frag=no,tp_dst=0x400/0xfc00"
        );
        // ICMP: only the low byte of type/code; masked type printed in hex.
        let k = FlowKey::ipv4(0x0102_0304, 0x0203_0405, 1, 3, 1);
        let mut wc = FlowKey::default();
        wc.nw_proto = 0xff;
        wc.nw_src = 0xf800_0000;
        wc.nw_dst = 0x8000_0000;
        wc.tp_src = 0xfff8;
        assert_eq!(
            Megaflow::from_wildcards(&k, &wc).to_string(),
            "recirc_id=0,eth,icmp,in_port=1,nw_src=0.0.0.0/5,nw_dst=0.0.0.0/1,nw_frag=no,icmp_type=0x0/0xf8"
        );
        // Unmasked protocol: "ip"; other protocol: nw_proto=.
        let k = FlowKey::ipv4(0x0102_0304, 0x0203_0405, 47, 0, 0);
        assert_eq!(
            Megaflow::from_wildcards(&k, &FlowKey::default()).to_string(),
            "recirc_id=0,eth,ip,in_port=1,nw_frag=no"
        );
        let mut wc = FlowKey::default();
        wc.nw_proto = 0xff;
        assert_eq!(
            Megaflow::from_wildcards(&k, &wc).to_string(),
            "recirc_id=0,eth,ip,in_port=1,nw_proto=47,nw_frag=no"
        );
        let mut k = FlowKey::ipv4(1, 2, 6, 1, 2);
        k.tcp_flags = 0x012;
        let mut wc = FlowKey::default();
        wc.nw_proto = 0xff;
        wc.tcp_flags = 0x012;
        assert_eq!(
            Megaflow::from_wildcards(&k, &wc).to_string(),
            "recirc_id=0,eth,tcp,in_port=1,nw_frag=no,tcp_flags=+syn+ack"
        );
        wc.tcp_flags = TCP_FLAGS_MASK;
        assert!(Megaflow::from_wildcards(&k, &wc).to_string().ends_with("tcp_flags=syn|ack"));
    }

    /// IPv6 megaflows as OVS 3.1's `ofproto/trace` prints them (texts from real traces of the
    /// acl1 IPv6 set, `ovs_wide_sets.rs`, and OVS's `match_format` for ICMPv6 and labels).
    #[test]
    fn trace_flow_line_formats_like_ovs() {
        // Each expected line is real OVS 3.1's `ofproto/trace` `Flow:` line for the same packet.
        let z = "vlan_tci=0x0000,dl_src=00:00:00:00:00:00,dl_dst=00:00:00:00:00:00";
        let v6 = "ipv6_src=::,ipv6_dst=::";
        let l3 = "nw_tos=0,nw_ecn=0,nw_ttl=0";
        let mut k = FlowKey::ipv6(0x2001_0db8u128 << 96 | 1, 2, IPPROTO_TCP, 0, 80);
        k.in_port = rqvs_flow::formats::ofctl::OFPP_LOCAL;
        assert_eq!(
            format_flow(&k),
            format!("tcp6,in_port=LOCAL,{z},ipv6_src=2001:db8::1,ipv6_dst=::2,ipv6_label=0x00000,{l3},nw_frag=no,tp_src=0,tp_dst=80,tcp_flags=0")
        );
        k.in_port = 1;
        k.nw_frag = FLOW_NW_FRAG_ANY | FLOW_NW_FRAG_LATER;
        assert_eq!(
            format_flow(&k),
            format!("tcp6,in_port=1,{z},ipv6_src=2001:db8::1,ipv6_dst=::2,ipv6_label=0x00000,{l3},nw_frag=later")
        );
        let mut k = FlowKey::ipv6(0, 0, IPPROTO_ICMPV6, 135, 0);
        k.nd_target = 0xfe80u128 << 112 | 1;
        k.arp_sha = [0, 0x11, 0x22, 0x33, 0x44, 0x55];
        assert_eq!(
            format_flow(&k),
            format!(
                "icmp6,in_port=1,{z},{v6},ipv6_label=0x00000,{l3},nw_frag=no,icmp_type=135,icmp_code=0,\
                 nd_target=fe80::1,nd_sll=00:11:22:33:44:55,nd_tll=00:00:00:00:00:00"
            )
        );
        let k = FlowKey::ipv6(0, 0, IPPROTO_ICMPV6, 128, 0);
        assert_eq!(
            format_flow(&k),
            format!("icmp6,in_port=1,{z},{v6},ipv6_label=0x00000,{l3},nw_frag=no,icmp_type=128,icmp_code=0")
        );
        let mut k = FlowKey::ipv6(0, 0, IPPROTO_UDP, 0, 53);
        k.ipv6_label = 5;
        assert_eq!(
            format_flow(&k),
            format!("udp6,in_port=1,{z},{v6},ipv6_label=0x00005,{l3},nw_frag=no,tp_src=0,tp_dst=53")
        );
        let mut k = FlowKey::ipv6(0, 0, 50, 0, 0);
        (k.ipv6_label, k.nw_ttl, k.nw_tos) = (0x12345, 64, 8);
        assert_eq!(
            format_flow(&k),
            format!("ipv6,in_port=1,{z},{v6},ipv6_label=0x12345,nw_proto=50,nw_tos=8,nw_ecn=0,nw_ttl=64,nw_frag=no")
        );
        let mut k =
            FlowKey { in_port: 1, dl_type: ETH_TYPE_ARP, nw_proto: 1, nw_src: 0x0102_0304, ..FlowKey::default() };
        k.arp_sha = [0, 0x11, 0x22, 0x33, 0x44, 0x55];
        assert_eq!(
            format_flow(&k),
            format!("arp,in_port=1,{z},arp_spa=1.2.3.4,arp_tpa=0.0.0.0,arp_op=1,arp_sha=00:11:22:33:44:55,arp_tha=00:00:00:00:00:00")
        );
    }

    #[test]
    fn ipv6_formats_like_ovs() {
        let mut k = FlowKey::ipv6(0x0a01_0203u128 << 96 | 5, 0xc0a8_0207u128 << 96, 6, 1030, 80);
        k.tcp_flags = 0x002;
        let mut wc = FlowKey::default();
        wc.nw_proto = 0xff;
        wc.ipv6_src = u128::MAX << 112;
        wc.ipv6_dst = u128::MAX << 96;
        wc.tp_dst = 0xffff;
        wc.tcp_flags = 0x012;
        assert_eq!(
            Megaflow::from_wildcards(&k, &wc).to_string(),
            "recirc_id=0,eth,tcp6,in_port=1,ipv6_src=a01::/16,ipv6_dst=c0a8:207::/32,nw_frag=no,tp_dst=80,tcp_flags=+syn-ack"
        );
        // Exact addresses, a flow label, a non-CIDR mask, UDP.
        let mut k = FlowKey::ipv6(0x2001_0db8u128 << 96 | 1, 2, 17, 53, 53);
        k.ipv6_label = 0x12345;
        let mut wc = FlowKey::default();
        wc.nw_proto = 0xff;
        wc.ipv6_src = u128::MAX;
        wc.ipv6_dst = 0xffff_0000_0000_0000_0000_0000_0000_ffff;
        wc.ipv6_label = IPV6_LABEL_MASK;
        assert_eq!(
            Megaflow::from_wildcards(&k, &wc).to_string(),
            "recirc_id=0,eth,udp6,in_port=1,ipv6_src=2001:db8::1,ipv6_dst=::2/ffff::ffff,ipv6_label=0x12345/0xfffff,nw_frag=no"
        );
        // ICMPv6 neighbour solicitation: type/code on 8 bits (so printed masked, as OVS does for
        // ICMP), nd_target and nd_sll.
        let mut k = FlowKey::ipv6(0xfe80u128 << 112 | 1, 0xff02u128 << 112 | 0x1_ff00_0002, 58, 135, 0);
        k.nd_target = 0xfe80u128 << 112 | 2;
        k.arp_sha = [0, 0x11, 0x22, 0x33, 0x44, 0x55];
        let mut wc = FlowKey::default();
        wc.nw_proto = 0xff;
        wc.tp_src = 0xffff;
        wc.tp_dst = 0xffff;
        wc.nd_target = u128::MAX;
        wc.arp_sha = [0xff; 6];
        assert_eq!(
            Megaflow::from_wildcards(&k, &wc).to_string(),
            "recirc_id=0,eth,icmp6,in_port=1,nw_frag=no,icmp_type=0x87/0xff,icmp_code=0x0/0xff,nd_target=fe80::2,nd_sll=00:11:22:33:44:55"
        );
        // Another next header: ipv6 and nw_proto; without the protocol examined: ipv6.
        let k = FlowKey::ipv6(1, 0x0102_0304, 47, 0, 0);
        let mut wc = FlowKey::default();
        wc.nw_proto = 0xff;
        wc.ipv6_dst = u128::MAX;
        assert_eq!(
            Megaflow::from_wildcards(&k, &wc).to_string(),
            "recirc_id=0,eth,ipv6,in_port=1,ipv6_dst=::1.2.3.4,nw_proto=47,nw_frag=no"
        );
        assert_eq!(
            Megaflow::from_wildcards(&k, &FlowKey::default()).to_string(),
            "recirc_id=0,eth,ipv6,in_port=1,nw_frag=no"
        );
        assert_eq!(fmt_ipv6_ntop(0xffff_0a00_0001), "::ffff:10.0.0.1");
        assert_eq!(fmt_ipv6_ntop(1), "::1");
        assert_eq!(fmt_ipv6_ntop(0), "::");
    }

    #[test]
    fn packet_text() {
        let mut k = FlowKey::ipv4(0x0a01_0203, 0xc0a8_0207, 17, 53, 81);
        assert_eq!(format_packet(&k), "in_port=1,udp,nw_src=10.1.2.3,nw_dst=192.168.2.7,udp_src=53,udp_dst=81");
        k.nw_proto = 47;
        assert_eq!(format_packet(&k.wire()), "in_port=1,ip,nw_proto=47,nw_src=10.1.2.3,nw_dst=192.168.2.7");
        assert_eq!(k.wire().tp_src, 0);
    }
}
