//! Link types: the frame of every supported link type as its Ethernet equivalent, so that every
//! capture goes through the one frame parser ([`crate::frame::extract`]) and gives the key its
//! Ethernet equivalent gives.
//!
//! | link type | header | `dl_type` | `dl_src` | `dl_dst` |
//! |---|---|---|---|---|
//! | ETHERNET (1) | the frame is Ethernet | | | |
//! | RAW (101) | none: an IP packet | 0x0800 (version 4) or 0x86dd (version 6) | zero | zero |
//! | IPV4 (228) / IPV6 (229) | none | 0x0800 / 0x86dd | zero | zero |
//! | NULL (0), LOOP (108) | 4-byte address family (host / network order) | AF_INET → 0x0800; AF_INET6 (10, 24, 28, 30) → 0x86dd | zero | zero |
//! | LINUX_SLL (113) | 16 bytes: packet type, ARPHRD, address length, address, protocol | the protocol field | the address, for an Ethernet (ARPHRD 1) or loopback (772) interface with a 6-byte address | zero |
//! | LINUX_SLL2 (276) | 20 bytes: protocol, interface index, ARPHRD, packet type, address length, address | the protocol field | as LINUX_SLL | zero |
//!
//! A cooked (SLL) header carries one link address, the *sender's*, and no destination: `dl_dst`
//! is zero, as it is for every link type without link addresses. `vlan_tci` comes from a VLAN tag
//! in the frame (libpcap puts the tag the kernel stripped back after the cooked header, with
//! protocol 0x8100). A cooked protocol below 0x0600 is not an ethertype but a Linux `ETH_P_*`
//! value: `ETH_P_802_2` (4) means an LLC frame follows, read as an 802.3 frame would be (its SNAP
//! ethertype, or OVS's 0x05ff); every other such value gives 0x05ff, as does a NULL/LOOP address
//! family that is not IP. Raw IP with a version other than 4 or 6 is a malformed frame; a frame
//! shorter than its link-layer header is a truncated one.

use crate::frame::{Extract, FLOW_DL_TYPE_NONE};
use crate::key::ETH_TYPE_IP;

/// `dl_type` of IPv6.
pub const ETH_TYPE_IPV6: u16 = 0x86dd;

/// The link types rqvs reads, by their `LINKTYPE_*` number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkType {
    Ethernet,
    Raw,
    Ipv4,
    Ipv6,
    Null,
    Loop,
    LinuxSll,
    LinuxSll2,
}

impl LinkType {
    /// Every link type read, for messages.
    pub const SUPPORTED: &'static str =
        "ETHERNET (1), RAW (101), IPV4 (228), IPV6 (229), NULL (0), LOOP (108), LINUX_SLL (113), LINUX_SLL2 (276)";

    /// The link type of a `LINKTYPE_*` number, when rqvs reads it.
    pub fn from_number(n: u32) -> Option<LinkType> {
        Some(match n {
            1 => LinkType::Ethernet,
            101 => LinkType::Raw,
            228 => LinkType::Ipv4,
            229 => LinkType::Ipv6,
            0 => LinkType::Null,
            108 => LinkType::Loop,
            113 => LinkType::LinuxSll,
            276 => LinkType::LinuxSll2,
            _ => return None,
        })
    }

    /// Its `LINKTYPE_*` number.
    pub fn number(self) -> u32 {
        match self {
            LinkType::Ethernet => 1,
            LinkType::Raw => 101,
            LinkType::Ipv4 => 228,
            LinkType::Ipv6 => 229,
            LinkType::Null => 0,
            LinkType::Loop => 108,
            LinkType::LinuxSll => 113,
            LinkType::LinuxSll2 => 276,
        }
    }
}

/// The name of a `LINKTYPE_*` number in messages, e.g. `101 (RAW)`.
pub fn link_type_name(n: u32) -> String {
    let name = match n {
        0 => "NULL",
        1 => "ETHERNET",
        6 => "IEEE802_5",
        9 => "PPP",
        101 => "RAW",
        105 => "IEEE802_11",
        108 => "LOOP",
        113 => "LINUX_SLL",
        127 => "IEEE802_11_RADIOTAP",
        147..=162 => "USER",
        187 => "BLUETOOTH_HCI_H4",
        220 => "USB_LINUX_MMAPPED",
        228 => "IPV4",
        229 => "IPV6",
        276 => "LINUX_SLL2",
        _ => "unknown",
    };
    format!("{n} ({name})")
}

const SLL_HEADER_LEN: usize = 16;
const SLL2_HEADER_LEN: usize = 20;
const NULL_HEADER_LEN: usize = 4;
const ARPHRD_ETHER: u16 = 1;
const ARPHRD_LOOPBACK: u16 = 772;
const ETH_P_802_2: u16 = 4;
const ETH_TYPE_MIN: u16 = 0x0600;

/// Writes the Ethernet equivalent of `data`, a frame of link type `link`, to `out` (cleared
/// first), or says why there is none (the reader counts it as truncated or malformed). For
/// [`LinkType::Ethernet`] the frame is copied.
pub fn ethernet_equivalent(link: LinkType, data: &[u8], out: &mut Vec<u8>) -> Result<(), Extract> {
    out.clear();
    let (dl_type, src, payload): (u16, [u8; 6], &[u8]) = match link {
        LinkType::Ethernet => {
            out.extend_from_slice(data);
            return Ok(());
        }
        LinkType::Raw => match data.first().map(|b| b >> 4) {
            None => return Err(Extract::Truncated { layer: "raw ip" }),
            Some(4) => (ETH_TYPE_IP, [0; 6], data),
            Some(6) => (ETH_TYPE_IPV6, [0; 6], data),
            Some(_) => return Err(Extract::Malformed { layer: "raw ip", reason: "IP version is neither 4 nor 6" }),
        },
        LinkType::Ipv4 => (ETH_TYPE_IP, [0; 6], data),
        LinkType::Ipv6 => (ETH_TYPE_IPV6, [0; 6], data),
        LinkType::Null | LinkType::Loop => {
            let Some(h) = data.first_chunk::<NULL_HEADER_LEN>() else {
                return Err(Extract::Truncated { layer: "null" });
            };
            // NULL is in the capturing host's byte order, LOOP in network order; the values are
            // small, so whichever order gives one is it.
            let family = u32::from_le_bytes(*h).min(u32::from_be_bytes(*h));
            let dl_type = match family {
                2 => ETH_TYPE_IP,
                10 | 24 | 28 | 30 => ETH_TYPE_IPV6,
                _ => FLOW_DL_TYPE_NONE,
            };
            (dl_type, [0; 6], &data[NULL_HEADER_LEN..])
        }
        LinkType::LinuxSll => {
            let Some(h) = data.first_chunk::<SLL_HEADER_LEN>() else {
                return Err(Extract::Truncated { layer: "sll" });
            };
            let hatype = u16::from_be_bytes([h[2], h[3]]);
            let addr_len = u16::from_be_bytes([h[4], h[5]]);
            let protocol = u16::from_be_bytes([h[14], h[15]]);
            (protocol, sender(hatype, addr_len, &h[6..14]), &data[SLL_HEADER_LEN..])
        }
        LinkType::LinuxSll2 => {
            let Some(h) = data.first_chunk::<SLL2_HEADER_LEN>() else {
                return Err(Extract::Truncated { layer: "sll2" });
            };
            let protocol = u16::from_be_bytes([h[0], h[1]]);
            let hatype = u16::from_be_bytes([h[8], h[9]]);
            (protocol, sender(hatype, u16::from(h[11]), &h[12..20]), &data[SLL2_HEADER_LEN..])
        }
    };
    out.extend_from_slice(&[0; 6]);
    out.extend_from_slice(&src);
    if dl_type >= ETH_TYPE_MIN || dl_type == FLOW_DL_TYPE_NONE {
        out.extend_from_slice(&dl_type.to_be_bytes());
        if dl_type != FLOW_DL_TYPE_NONE {
            out.extend_from_slice(payload);
        }
    } else if dl_type == ETH_P_802_2 {
        // An 802.3 frame: its length field, then the LLC header and what follows.
        out.extend_from_slice(&(payload.len().min(usize::from(ETH_TYPE_MIN - 1)) as u16).to_be_bytes());
        out.extend_from_slice(payload);
    } else {
        out.extend_from_slice(&FLOW_DL_TYPE_NONE.to_be_bytes());
    }
    Ok(())
}

/// The sender's address of a cooked header, when it is an Ethernet address.
fn sender(hatype: u16, addr_len: u16, addr: &[u8]) -> [u8; 6] {
    match (hatype, addr_len) {
        (ARPHRD_ETHER | ARPHRD_LOOPBACK, 6) => [addr[0], addr[1], addr[2], addr[3], addr[4], addr[5]],
        _ => [0; 6],
    }
}

/// Writes `frame`, an Ethernet frame, as a frame of link type `link` to `out` (cleared first):
/// the inverse of [`ethernet_equivalent`] for what the link type can carry — the cooked types
/// keep the source address (as an Ethernet interface's, packet type "to us"), the others no
/// address; VLAN tags stay in the cooked types and are lost in the others. False when the frame
/// is not one the link type carries (shorter than an Ethernet header; not IP for RAW, IPV4,
/// IPV6, NULL and LOOP).
pub fn from_ethernet(link: LinkType, frame: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    let Some(eth) = frame.first_chunk::<14>() else {
        return false;
    };
    let mut dl_type = u16::from_be_bytes([eth[12], eth[13]]);
    let mut at = 14;
    if !matches!(link, LinkType::Ethernet | LinkType::LinuxSll | LinkType::LinuxSll2) {
        // Skip VLAN tags to the IP header.
        while matches!(dl_type, 0x8100 | 0x88a8) {
            let Some(t) = frame.get(at + 2..at + 4) else {
                return false;
            };
            dl_type = u16::from_be_bytes([t[0], t[1]]);
            at += 4;
        }
    }
    let payload = &frame[at..];
    let ip = dl_type == ETH_TYPE_IP || dl_type == ETH_TYPE_IPV6;
    match link {
        LinkType::Ethernet => out.extend_from_slice(frame),
        LinkType::Raw if ip => out.extend_from_slice(payload),
        LinkType::Ipv4 if dl_type == ETH_TYPE_IP => out.extend_from_slice(payload),
        LinkType::Ipv6 if dl_type == ETH_TYPE_IPV6 => out.extend_from_slice(payload),
        LinkType::Null | LinkType::Loop if ip => {
            let family: u32 = if dl_type == ETH_TYPE_IP { 2 } else { 10 };
            let h = if link == LinkType::Null { family.to_le_bytes() } else { family.to_be_bytes() };
            out.extend_from_slice(&h);
            out.extend_from_slice(payload);
        }
        LinkType::LinuxSll => {
            out.extend_from_slice(&0u16.to_be_bytes()); // packet type: to us
            out.extend_from_slice(&ARPHRD_ETHER.to_be_bytes());
            out.extend_from_slice(&6u16.to_be_bytes());
            out.extend_from_slice(&eth[6..12]);
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&dl_type.to_be_bytes());
            out.extend_from_slice(payload);
        }
        LinkType::LinuxSll2 => {
            out.extend_from_slice(&dl_type.to_be_bytes());
            out.extend_from_slice(&[0, 0]); // reserved
            out.extend_from_slice(&1u32.to_be_bytes()); // interface index
            out.extend_from_slice(&ARPHRD_ETHER.to_be_bytes());
            out.extend_from_slice(&[0, 6]); // packet type: to us; address length
            out.extend_from_slice(&eth[6..12]);
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(payload);
        }
        _ => return false,
    }
    true
}
