//! Open vSwitch's `nx_match` (NXM, "flow format nxm") ↔ [`rqvs_flow::Match`]: the match of
//! OpenFlow 1.0's Nicira extensions (`NXT_FLOW_MOD`, `NXST_FLOW`, `NXST_AGGREGATE`), which plain
//! `ovs-ofctl` sends once it has switched the connection to NXM (`NXT_SET_FLOW_FORMAT`).
//!
//! NXM and OXM share the TLV shape — a 32-bit header (class, field, has-mask, length), the
//! value, then the mask — so this module reuses [`crate::oxm`]'s TLV reader and writer over the
//! one field table, [`rqvs_flow::field::FIELDS`], with every check of that module. What differs:
//! - there is no `ofp_match` header: the message carries `match_len` and the TLVs are padded to a
//!   multiple of 8 by the message ([`pull_match`]);
//! - fields are written with their NXM codes where they have one (`NXM_OF_IN_PORT` as a 16-bit
//!   port, `NXM_OF_VLAN_TCI` for the whole TCI, `NXM_OF_IP_TOS` for `ip_dscp`, `NXM_NX_TCP_FLAGS`),
//!   else with their OXM code (`metadata`, `sctp_*`), as OVS's `nx_put_raw` does; OXM codes are
//!   read too, as OVS reads them;
//! - `NXM_NX_COOKIE` (class 1, field 30) may appear in the match of a modify, delete or flow
//!   statistics request: it is the cookie filter, returned apart ([`NxMatch::cookie`]).

use rqvs_flow::Match;

use crate::error::{DecodeError, EncodeError, OfError};
use crate::oxm::{decode_tlvs, encode_fields, reject, Dialect};
use crate::wire::{Reader, Writer};

/// `NXM_NX_COOKIE`'s class and field.
const NXM_NX_COOKIE: (u16, u8) = (1, 30);

/// A decoded `nx_match`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NxMatch {
    /// The match.
    pub matches: Match,
    /// `NXM_NX_COOKIE`'s value and mask, when present (the cookie filter).
    pub cookie: Option<(u64, u64)>,
}

/// Decodes exactly `bytes` (the TLVs, `match_len` of them, without padding) as an `nx_match`.
pub fn decode(bytes: &[u8]) -> Result<NxMatch, DecodeError> {
    // Take NXM_NX_COOKIE out; the rest goes through the OXM TLV reader.
    let mut r = Reader::new(bytes, "nx_match");
    let mut rest = Writer::new();
    let mut cookie = None;
    while !r.is_empty() {
        let header = r.u32()?;
        let len = (header & 0xff) as usize;
        let payload = r.take(len)?;
        let (class, field, has_mask) = ((header >> 16) as u16, ((header >> 9) & 0x7f) as u8, header & 0x100 != 0);
        if (class, field) == NXM_NX_COOKIE {
            if cookie.is_some() {
                return reject("NXM_NX_COOKIE appears twice", OfError::BAD_MATCH_DUP_FIELD);
            }
            let want = if has_mask { 16 } else { 8 };
            if len != want {
                return reject(
                    format!("NXM_NX_COOKIE has {len} payload bytes, expected {want}"),
                    OfError::BAD_MATCH_BAD_LEN,
                );
            }
            let v = u64::from_be_bytes(payload[..8].try_into().expect("8 bytes"));
            let m = if has_mask { u64::from_be_bytes(payload[8..].try_into().expect("8 bytes")) } else { u64::MAX };
            cookie = Some((v & m, m));
            continue;
        }
        rest.u32(header);
        rest.put(payload);
    }
    let matches = decode_tlvs(Reader::new(&rest.bytes, "nx_match"))?;
    Ok(NxMatch { matches, cookie })
}

/// Reads an `nx_match` of `match_len` bytes at `r`, and its padding to a multiple of 8.
pub fn pull_match(r: &mut Reader<'_>, match_len: usize) -> Result<NxMatch, DecodeError> {
    let bytes = r.take(match_len)?;
    r.skip(match_len.div_ceil(8) * 8 - match_len)?;
    decode(bytes)
}

/// Writes `m` as NXM TLVs, in the order OVS writes them (no padding); returns their length
/// (`match_len`). Port ranges must have been split first, as for OXM.
pub fn encode(m: &Match, w: &mut Writer) -> Result<u16, EncodeError> {
    let start = w.len();
    encode_fields(m, w, Dialect::Nxm)?;
    u16::try_from(w.len() - start).map_err(|_| EncodeError("nx_match longer than 65535 bytes".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_flow::formats::ofctl;

    fn m(text: &str) -> Match {
        ofctl::parse_flow("test", 1, &format!("{text},actions=drop"), 0).unwrap().matches
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn matches_round_trip_through_nxm() {
        for t in [
            "priority=1",
            "in_port=3",
            "in_port=LOCAL",
            "dl_src=01:02:03:04:05:06,dl_dst=0a:00:00:00:00:00/ff:00:00:00:00:00",
            "dl_vlan=5",
            "dl_vlan=0xffff",
            "vlan_tci=0x2000/0x2000",
            "dl_vlan_pcp=3",
            "ip,nw_src=10.0.0.0/8,nw_dst=1.2.3.4",
            "ip,nw_tos=8",
            "ip,nw_ecn=1,nw_ttl=9",
            "ip,nw_frag=later",
            "tcp,tp_src=80,tp_dst=0x1000/0xf000",
            "tcp,tcp_flags=+syn-ack",
            "udp,tp_dst=53",
            "sctp,tp_dst=9",
            "icmp,icmp_type=8,icmp_code=0",
            "icmp6,icmp_type=135,icmp_code=0,nd_target=fe80::1",
            "ipv6,ipv6_src=2001:db8::/32,ipv6_label=0x12345",
            "arp,arp_op=1,arp_spa=10.0.0.1,arp_sha=00:11:22:33:44:55",
            "metadata=0x5/0xff",
        ] {
            let want = m(t);
            let mut w = Writer::new();
            let len = encode(&want, &mut w).unwrap();
            assert_eq!(usize::from(len), w.len(), "{t}");
            let back = decode(&w.bytes).unwrap();
            assert_eq!(back.matches, want, "{t}");
            assert_eq!(back.cookie, None);
        }
    }

    /// The bytes `ovs-ofctl` 3.1 sends in the NXT_FLOW_MOD of
    /// `priority=9,dl_src=01:00:00:00:00:00/01:00:00:00:00:00,tcp,tcp_flags=+syn` (captured), and
    /// of `ipv6,ipv6_src=::1`: rqvs writes the same bytes and reads them back to the same match.
    #[test]
    fn nxm_bytes_are_those_of_ovs_ofctl() {
        for (text, bytes) in [
            (
                "tcp,dl_src=01:00:00:00:00:00/01:00:00:00:00:00,tcp_flags=+syn",
                "0000050c01000000000001000000000000000602080000000c01060001450400020002",
            ),
            ("ipv6,ipv6_src=::1", "0000060286dd0001261000000000000000000000000000000001"),
        ] {
            let bytes = hex(bytes);
            let mut w = Writer::new();
            encode(&m(text), &mut w).unwrap();
            assert_eq!(w.bytes, bytes, "{text}");
            assert_eq!(decode(&bytes).unwrap().matches, m(text), "{text}");
        }
    }

    #[test]
    fn the_cookie_is_taken_apart_and_bad_tlvs_are_refused() {
        // NXM_OF_ETH_TYPE 0x0800, NXM_NX_COOKIE_W 0x5/0xff.
        let b = hex("00000602080000013d10000000000000000500000000000000ff");
        let got = decode(&b).unwrap();
        assert_eq!(got.cookie, Some((5, 0xff)));
        assert_eq!(got.matches, m("ip"));
        // A register (NXM_NX_REG0): not a field rqvs has.
        let e = decode(&hex("0001000400000001")).unwrap_err();
        assert_eq!(e.of_error(), OfError::BAD_MATCH_BAD_FIELD);
        // Truncated.
        assert!(decode(&hex("0000060208")).is_err());
        // nw_tos with ECN bits.
        let e = decode(&hex("00000602080000000a0109")).unwrap_err();
        assert_eq!(e.of_error(), OfError::BAD_MATCH_BAD_VALUE);
        // nw_tos=8 reads as ip_dscp 2.
        assert_eq!(decode(&hex("00000602080000000a0108")).unwrap().matches, m("ip,nw_tos=8"));
    }
}
