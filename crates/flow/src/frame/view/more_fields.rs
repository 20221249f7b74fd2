//! `set_field` on the fields [`Frame::set_field`]'s first part does not write: SCTP ports (the
//! CRC32c checksum recomputed, a wrong one kept wrong by the same difference, as OVS's
//! `packet_set_sctp_port`), ICMPv4 and ICMPv6 type and code (the ICMP checksum updated), the
//! IPv6 flow label, the ARP opcode, addresses and hardware addresses (Ethernet/IPv4 ARP), the
//! ND target (ICMPv6 checksum) and the ND source/target link-layer address options (when the
//! message holds the option: none is added, as OVS's `packet_set_nd`).
//!
//! Each writer checks the headers it writes into are in the frame; `None` when not (nothing
//! changed), as the view's other setters.

use super::{ext_headers, ipv4_header, ipv6_payload, update_checksum, Frame};
use crate::field::ETH_TYPE_RARP;
use crate::frame::crc32c;
use crate::key::{ETH_TYPE_ARP, FLOW_NW_FRAG_LATER, IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_SCTP};

/// Where the L4 header is: `(start, end of the IP payload, protocol, IPv6?)`, for a packet that
/// is not a later fragment.
fn l4<T: AsRef<[u8]>>(f: &Frame<T>) -> Option<(usize, usize, u8, bool)> {
    let b = f.buf.as_ref();
    if let Some(ip) = f.layout.ipv4 {
        let (hl, total) = ipv4_header(&b[ip..])?;
        let frag = u16::from_be_bytes([b[ip + 6], b[ip + 7]]);
        if frag & 0x1fff != 0 {
            return None;
        }
        Some((ip + hl, ip + total, b[ip + 9], false))
    } else if let Some(ip) = f.layout.ipv6 {
        let payload = ipv6_payload(b, ip)?;
        let (proto, frag, at) = ext_headers(&b[payload.clone()], b[ip + 6])?;
        if frag & FLOW_NW_FRAG_LATER != 0 {
            return None;
        }
        Some((payload.start + at, payload.end, proto, true))
    } else {
        None
    }
}

/// Writes the big-endian field of `width` bytes at `at` as `merge(old)`, updating the 16-bit
/// one's-complement checksum at `csum` (when given) for each changed 16-bit word (words are
/// even offsets of the frame: every L4 header starts at an even one).
fn write_sum(b: &mut [u8], at: usize, width: usize, csum: Option<usize>, merge: impl Fn(u128) -> u128) {
    let old = b[at..at + width].iter().fold(0u128, |a, &x| a << 8 | u128::from(x));
    let new = merge(old).to_be_bytes();
    let start = at & !1;
    let end = (at + width + 1) & !1;
    let before: Vec<u8> = b[start..end].to_vec();
    b[at..at + width].copy_from_slice(&new[16 - width..]);
    if let Some(c) = csum {
        for i in (0..end - start).step_by(2) {
            let o = u16::from_be_bytes([before[i], before[i + 1]]);
            let n = u16::from_be_bytes([b[start + i], b[start + i + 1]]);
            if o != n {
                update_checksum(&mut b[c..c + 2], o, n);
            }
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// The fields of the module docs; `None` for a field this part does not write, `Some(false)`
    /// when the frame lacks its header.
    pub(super) fn set_more(&mut self, name: &str, merge: impl Fn(u128) -> u128) -> Option<bool> {
        Some(match name {
            "sctp_src" | "sctp_dst" => self.set_sctp_port(name == "sctp_src", merge),
            "icmp_type" | "icmp_code" => self.set_icmp(false, name == "icmp_type", merge),
            "icmpv6_type" | "icmpv6_code" => self.set_icmp(true, name == "icmpv6_type", merge),
            "ipv6_label" => self.set_flow_label(merge),
            "arp_op" | "arp_spa" | "arp_tpa" | "arp_sha" | "arp_tha" => self.set_arp(name, merge),
            "nd_target" | "nd_sll" | "nd_tll" => self.set_nd(name, merge),
            _ => return None,
        })
    }

    fn set_sctp_port(&mut self, src: bool, merge: impl Fn(u128) -> u128) -> bool {
        let Some((l4, end, proto, _)) = l4(self) else { return false };
        if proto != IPPROTO_SCTP || l4 + 12 > end {
            return false;
        }
        let b = self.buf.as_mut();
        let stored = u32::from_le_bytes([b[l4 + 8], b[l4 + 9], b[l4 + 10], b[l4 + 11]]);
        b[l4 + 8..l4 + 12].fill(0);
        let old_correct = crc32c(&b[l4..end]);
        write_sum(b, l4 + if src { 0 } else { 2 }, 2, None, merge);
        let new_correct = crc32c(&b[l4..end]);
        b[l4 + 8..l4 + 12].copy_from_slice(&(stored ^ old_correct ^ new_correct).to_le_bytes());
        true
    }

    fn set_icmp(&mut self, v6: bool, kind: bool, merge: impl Fn(u128) -> u128) -> bool {
        let Some((l4, end, proto, is_v6)) = l4(self) else { return false };
        let want = if v6 { IPPROTO_ICMPV6 } else { IPPROTO_ICMP };
        if proto != want || is_v6 != v6 || l4 + 4 > end {
            return false;
        }
        write_sum(self.buf.as_mut(), l4 + usize::from(!kind), 1, Some(l4 + 2), merge);
        true
    }

    fn set_flow_label(&mut self, merge: impl Fn(u128) -> u128) -> bool {
        let Some(ip) = self.layout.ipv6 else { return false };
        let b = self.buf.as_mut();
        let word = u32::from_be_bytes([b[ip], b[ip + 1], b[ip + 2], b[ip + 3]]);
        let label = merge(u128::from(word & 0x000f_ffff)) as u32 & 0x000f_ffff;
        b[ip..ip + 4].copy_from_slice(&((word & 0xfff0_0000) | label).to_be_bytes());
        true
    }

    /// Ethernet/IPv4 ARP (or RARP): hardware type 1, protocol 0x0800, lengths 6 and 4.
    fn set_arp(&mut self, name: &str, merge: impl Fn(u128) -> u128) -> bool {
        let at = self.layout.ethertype;
        let b = self.buf.as_mut();
        let dl_type = u16::from_be_bytes([b[at], b[at + 1]]);
        let arp = at + 2;
        if !(dl_type == ETH_TYPE_ARP || dl_type == ETH_TYPE_RARP)
            || b.len() < arp + 28
            || b[arp..arp + 6] != [0, 1, 8, 0, 6, 4]
        {
            return false;
        }
        let (off, width) = match name {
            "arp_op" => (6, 2),
            "arp_sha" => (8, 6),
            "arp_spa" => (14, 4),
            "arp_tha" => (18, 6),
            _ => (24, 4),
        };
        if name == "arp_op" {
            // The key holds the opcode's low byte (OVS): the field is the 16-bit opcode.
            write_sum(b, arp + off, width, None, |old| merge(old & 0xff) & 0xffff);
        } else {
            write_sum(b, arp + off, width, None, merge);
        }
        true
    }

    /// ND: an ICMPv6 neighbour solicitation (135) or advertisement (136), code 0; the target
    /// at 8, options from 24 (type, length in 8-byte units); SLL (1) only in a solicitation,
    /// TLL (2) only in an advertisement, as the fields' prerequisites say.
    fn set_nd(&mut self, name: &str, merge: impl Fn(u128) -> u128) -> bool {
        let Some((l4, end, proto, true)) = l4(self) else { return false };
        let b = self.buf.as_mut();
        if proto != IPPROTO_ICMPV6 || l4 + 24 > end || b[l4 + 1] != 0 || !(b[l4] == 135 || b[l4] == 136) {
            return false;
        }
        let csum = Some(l4 + 2);
        match name {
            "nd_target" => {
                write_sum(b, l4 + 8, 16, csum, merge);
                true
            }
            _ => {
                let (want_type, option) = if name == "nd_sll" { (135, 1) } else { (136, 2) };
                if b[l4] != want_type {
                    return false;
                }
                let mut at = l4 + 24;
                while at + 8 <= end {
                    let len = usize::from(b[at + 1]) * 8;
                    if len == 0 {
                        return false;
                    }
                    if b[at] == option && len == 8 {
                        write_sum(b, at + 2, 6, csum, merge);
                        return true;
                    }
                    at += len;
                }
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Each field against an independent reference: the frame `build_frame` writes for the
    //! key with the field set (headers and checksums computed from scratch) must be the bytes
    //! `set_field` made of the frame of the key before.
    use crate::field::Field;
    use crate::frame::{build_frame, crc32c, Frame};
    use crate::key::*;
    use crate::FlowKey;

    fn check(k: &FlowKey, name: &str, value: u128) {
        let f = Field::by_name(name).unwrap();
        let mut b = build_frame(k);
        assert!(Frame::new_checked(&mut b[..]).unwrap().set_field(f, value, f.all_ones()), "{name}: not written");
        let mut want = *k;
        f.set(&mut want, value);
        assert_eq!(b, build_frame(&want), "{name} = {value:#x}");
    }

    fn v4(proto: u8, sport: u16, dport: u16) -> FlowKey {
        let mut k = FlowKey::ipv4(0x0a00_0001, 0x0a00_0002, proto, sport, dport);
        k.dl_type = ETH_TYPE_IP;
        k.nw_ttl = 64;
        k
    }

    fn v6(proto: u8, sport: u16, dport: u16) -> FlowKey {
        let mut k = FlowKey::ipv6(0xfd00 << 112 | 1, 0xfd00 << 112 | 2, proto, sport, dport);
        k.nw_ttl = 64;
        k
    }

    #[test]
    fn crc32c_is_castagnoli() {
        // RFC 3720 B.4's check value of "123456789".
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    }

    #[test]
    fn sctp_ports_with_the_crc32c() {
        for k in [v4(IPPROTO_SCTP, 5000, 80), v6(IPPROTO_SCTP, 5000, 80)] {
            check(&k, "sctp_src", 6001);
            check(&k, "sctp_dst", 443);
        }
        // A wrong checksum stays wrong by the same difference (OVS).
        let k = v4(IPPROTO_SCTP, 5000, 80);
        let mut b = build_frame(&k);
        let at = 14 + 20 + 8;
        b[at] ^= 0x5a;
        let f = Field::by_name("sctp_dst").unwrap();
        assert!(Frame::new_checked(&mut b[..]).unwrap().set_field(f, 443, 0xffff));
        let mut want = k;
        want.tp_dst = 443;
        let mut good = build_frame(&want);
        good[at] ^= 0x5a;
        assert_eq!(b, good);
    }

    #[test]
    fn icmp_type_and_code_with_the_checksum() {
        // (Not to an all-zero message: its checksum from scratch is 0xffff, the incremental
        // update's — OVS's too — the other zero, 0x0000; both are valid.)
        let k = v4(IPPROTO_ICMP, 8, 0);
        check(&k, "icmp_type", 13);
        check(&k, "icmp_code", 3);
        let k = v6(IPPROTO_ICMPV6, 128, 0);
        check(&k, "icmpv6_type", 129);
        check(&k, "icmpv6_code", 7);
        // Not on the other family.
        let mut b = build_frame(&v4(IPPROTO_ICMP, 8, 0));
        let f = Field::by_name("icmpv6_type").unwrap();
        assert!(!Frame::new_checked(&mut b[..]).unwrap().set_field(f, 1, 0xff));
    }

    #[test]
    fn ipv6_flow_label() {
        let mut k = v6(IPPROTO_UDP, 1, 2);
        k.ipv6_label = 0x12345;
        k.nw_tos = 0xb8;
        check(&k, "ipv6_label", 0xfedcb);
        let f = Field::by_name("ipv6_label").unwrap();
        let mut b = build_frame(&k);
        assert!(Frame::new_checked(&mut b[..]).unwrap().set_field(f, 0xf0000, 0xf0000));
        let mut want = k;
        want.ipv6_label = 0xf2345;
        assert_eq!(b, build_frame(&want), "masked");
    }

    #[test]
    fn arp_fields() {
        let mut k = FlowKey { dl_type: ETH_TYPE_ARP, nw_proto: 1, ..FlowKey::default() };
        k.dl_src = [2, 0, 0, 0, 0, 1];
        k.dl_dst = [0xff; 6];
        k.nw_src = 0x0a00_0001;
        k.nw_dst = 0x0a00_0002;
        k.arp_sha = [2, 0, 0, 0, 0, 1];
        check(&k, "arp_op", 2);
        check(&k, "arp_spa", 0xc0a8_0101);
        check(&k, "arp_tpa", 0xc0a8_0102);
        check(&k, "arp_sha", 0x0200_0000_0099);
        check(&k, "arp_tha", 0x0200_0000_0098);
    }

    #[test]
    fn nd_target_and_link_layer_addresses() {
        let mut ns = v6(IPPROTO_ICMPV6, 135, 0);
        ns.nd_target = 0xfd00 << 112 | 9;
        ns.arp_sha = [2, 0, 0, 0, 0, 7];
        check(&ns, "nd_target", 0xfd00 << 112 | 0x99);
        check(&ns, "nd_sll", 0x0200_0000_0042);
        let mut na = v6(IPPROTO_ICMPV6, 136, 0);
        na.nd_target = 0xfd00 << 112 | 9;
        na.arp_tha = [2, 0, 0, 0, 0, 8];
        check(&na, "nd_target", 0xfd00 << 112 | 0x98);
        check(&na, "nd_tll", 0x0200_0000_0043);
        // No SLL option in an advertisement: nothing written.
        let mut b = build_frame(&na);
        let before = b.clone();
        let f = Field::by_name("nd_sll").unwrap();
        assert!(!Frame::new_checked(&mut b[..]).unwrap().set_field(f, 1, f.all_ones()));
        assert_eq!(b, before);
    }
}
