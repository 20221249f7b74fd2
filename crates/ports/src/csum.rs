//! Checksum offload, completed in software: the one place where rqvs finishes the TCP/UDP
//! checksums and cuts the GSO super-frames that a sender's offloads leave to "the device".
//!
//! A host whose interface offloads transmit checksums (every veth does by default) hands its
//! frames to the kernel with the L4 checksum field holding only the pseudo-header sum
//! (`CHECKSUM_PARTIAL`); with TSO/USO on it also hands over *super-frames* of up to 64 KiB that
//! the device is to cut into MTU-sized segments. An AF_PACKET socket sees them like that: the
//! ring marks such a frame `TP_STATUS_CSUMNOTREADY`, and with `PACKET_VNET_HDR` a virtio-net
//! header in front of it says whether it is a super-frame and its segment size. A switch that
//! forwarded them as they are sends frames the next host drops (`cksum incorrect`) or that do
//! not fit the next link (`EMSGSIZE`) — so the receive path ([`crate::afpacket`]) calls
//! [`complete`] on every frame marked not ready, and `Segmenter` on every super-frame.
//!
//! [`complete`] recomputes the whole checksum from the IPv4/IPv6 pseudo header and the L4
//! bytes — it does not trust the partial value, so a frame the switch rewrote before is fine
//! too. What it covers: Ethernet with up to two VLAN tags (802.1Q, 802.1ad), IPv4 (not a
//! fragment) and IPv6 (hop-by-hop, routing and destination-options headers skipped; not a
//! fragment), TCP and UDP (a UDP result of 0 is sent as 0xffff, RFC 768). Anything else — SCTP's
//! CRC32c, tunnels' inner checksums, a header cut short — is left as it is and reported as
//! [`Outcome::Unsupported`] (the caller counts it).
#![deny(unsafe_code)]

/// What [`complete`] did with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The TCP or UDP checksum was written.
    Completed,
    /// Not a TCP/UDP packet over IPv4/IPv6 whose checksum this module computes; left unchanged.
    Unsupported,
}

/// Where the headers of an IP packet carrying TCP or UDP are, in a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Offset of the IP header.
    l3: usize,
    ipv6: bool,
    /// Offset of the TCP/UDP header.
    l4: usize,
    /// 6 (TCP) or 17 (UDP).
    proto: u8,
    /// End of the IP packet (the frame may carry padding after it).
    end: usize,
}

const TCP: u8 = 6;
const UDP: u8 = 17;

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Parses Ethernet (≤ 2 VLAN tags), IPv4/IPv6 and finds a TCP or UDP header that is whole.
pub(crate) fn layout(f: &[u8]) -> Option<Layout> {
    let mut at = 12;
    let mut ethertype = be16(f, at)?;
    for _ in 0..2 {
        if ethertype == 0x8100 || ethertype == 0x88a8 {
            at += 4;
            ethertype = be16(f, at)?;
        }
    }
    let l3 = at + 2;
    let (l4, proto, end, ipv6) = match ethertype {
        0x0800 => {
            let vihl = *f.get(l3)?;
            let ihl = usize::from(vihl & 0xf) * 4;
            if vihl >> 4 != 4 || ihl < 20 {
                return None;
            }
            let total = usize::from(be16(f, l3 + 2)?);
            // A fragment (more fragments, or an offset): the checksum covers bytes not here.
            if be16(f, l3 + 6)? & 0x3fff != 0 || total < ihl || l3 + total > f.len() {
                return None;
            }
            (l3 + ihl, *f.get(l3 + 9)?, l3 + total, false)
        }
        0x86dd => {
            if *f.get(l3)? >> 4 != 6 {
                return None;
            }
            let end = l3 + 40 + usize::from(be16(f, l3 + 4)?);
            if end > f.len() {
                return None;
            }
            let mut next = *f.get(l3 + 6)?;
            let mut at = l3 + 40;
            // Hop-by-hop, routing, destination options: skip; a fragment header: not ours.
            while matches!(next, 0 | 43 | 60) {
                let len = (usize::from(*f.get(at + 1)?) + 1) * 8;
                next = *f.get(at)?;
                at += len;
            }
            (at, next, end, true)
        }
        _ => return None,
    };
    let hdr = match proto {
        TCP => usize::from(*f.get(l4 + 12)? >> 4) * 4,
        UDP => 8,
        _ => return None,
    };
    if (proto == TCP && hdr < 20) || l4 + hdr > end {
        return None;
    }
    Some(Layout { l3, ipv6, l4, proto, end })
}

/// Adds big-endian 16-bit words of `b` (a trailing odd byte padded with zero) to `sum`.
fn add_bytes(mut sum: u64, b: &[u8]) -> u64 {
    let mut chunks = b.chunks_exact(2);
    for c in &mut chunks {
        sum += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u64::from(*last) << 8;
    }
    sum
}

/// Folds a 64-bit ones'-complement accumulator to 16 bits.
fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The internet checksum (RFC 1071) of `b`: the complement of its ones'-complement sum.
pub fn internet_checksum(b: &[u8]) -> u16 {
    !fold(add_bytes(0, b))
}

/// Offset of the checksum field inside the L4 header.
fn check_offset(proto: u8) -> usize {
    if proto == TCP {
        16
    } else {
        6
    }
}

/// Writes the L4 checksum of the packet at `l` in `f` (the field is zeroed first).
fn write_l4(f: &mut [u8], l: &Layout) {
    let at = l.l4 + check_offset(l.proto);
    f[at..at + 2].fill(0);
    let l4_len = l.end - l.l4;
    let mut sum = if l.ipv6 { add_bytes(0, &f[l.l3 + 8..l.l3 + 40]) } else { add_bytes(0, &f[l.l3 + 12..l.l3 + 20]) };
    sum += u64::from(l.proto) + l4_len as u64;
    sum = add_bytes(sum, &f[l.l4..l.end]);
    let mut c = !fold(sum);
    if c == 0 && l.proto == UDP {
        c = 0xffff;
    }
    f[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

/// Writes the IPv4 header checksum of the header at `l3`.
fn write_ipv4_header(f: &mut [u8], l3: usize, ihl: usize) {
    f[l3 + 10..l3 + 12].fill(0);
    let c = internet_checksum(&f[l3..l3 + ihl]);
    f[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
}

/// Computes and writes the TCP or UDP checksum of an Ethernet frame whose checksum was left to
/// the device. The whole checksum is recomputed (pseudo header + L4 header + payload).
pub fn complete(frame: &mut [u8]) -> Outcome {
    match layout(frame) {
        Some(l) => {
            write_l4(frame, &l);
            Outcome::Completed
        }
        None => Outcome::Unsupported,
    }
}

/// For receive paths that carry no checksum status (AF_XDP): completes the TCP/UDP checksum of
/// a frame whose checksum field holds exactly the pseudo-header sum — what Linux leaves in a
/// `CHECKSUM_PARTIAL` packet — and which does not already verify. Costs a header parse and the
/// pseudo-header sum for every other frame. A frame damaged so that its field happens to equal
/// the pseudo-header sum (one in 65,536 of damaged frames) would be "completed" too: the price
/// of having no status bit. Returns whether it wrote the checksum.
pub fn complete_if_partial(frame: &mut [u8]) -> bool {
    let Some(l) = layout(frame) else { return false };
    let at = l.l4 + check_offset(l.proto);
    let stored = u16::from_be_bytes([frame[at], frame[at + 1]]);
    if stored != pseudo_sum(frame, &l) {
        return false;
    }
    let before = [frame[at], frame[at + 1]];
    write_l4(frame, &l);
    before != [frame[at], frame[at + 1]]
}

/// The folded (not complemented) pseudo-header sum of the packet at `l`: the value Linux puts
/// in the checksum field of a packet whose checksum it leaves to the device.
fn pseudo_sum(f: &[u8], l: &Layout) -> u16 {
    let addrs = if l.ipv6 { &f[l.l3 + 8..l.l3 + 40] } else { &f[l.l3 + 12..l.l3 + 20] };
    fold(add_bytes(u64::from(l.proto) + (l.end - l.l4) as u64, addrs))
}

/// Whether the TCP or UDP checksum of `frame` is correct (`None`: not a packet [`complete`]
/// handles). For tests and diagnostics.
pub fn verify(frame: &[u8]) -> Option<bool> {
    let l = layout(frame)?;
    let mut copy = frame.to_vec();
    write_l4(&mut copy, &l);
    Some(copy == frame)
}

/// The kind of super-frame, from the virtio-net header's `gso_type` (ECN bit cleared).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GsoKind {
    /// TCP segmentation (TSO), IPv4 or IPv6.
    Tcp,
    /// UDP segmentation (USO, `UDP_SEGMENT`): each segment is a datagram.
    UdpL4,
}

/// Cuts one TCP or UDP super-frame into segments of at most `gso_size` payload bytes, one at a
/// time, as the sender's device would: each segment has the super-frame's headers with the
/// IPv4 total length and identification (+1 per segment) or the IPv6 payload length, the TCP
/// sequence number (FIN and PSH only on the last segment, CWR only on the first) or the UDP
/// length, and every checksum, computed whole.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Segmenter {
    l: Layout,
    /// Where the payload starts (after the TCP/UDP header).
    payload: usize,
    gso_size: usize,
    count: usize,
}

impl Segmenter {
    /// `None` when the frame is not a TCP/UDP packet of the kind announced, or `gso_size` is 0.
    pub(crate) fn new(frame: &[u8], kind: GsoKind, gso_size: u16) -> Option<Segmenter> {
        let l = layout(frame)?;
        let want = match kind {
            GsoKind::Tcp => TCP,
            GsoKind::UdpL4 => UDP,
        };
        if l.proto != want || gso_size == 0 {
            return None;
        }
        let payload = l.l4 + if l.proto == TCP { usize::from(frame[l.l4 + 12] >> 4) * 4 } else { 8 };
        let gso_size = usize::from(gso_size);
        let count = (l.end - payload).div_ceil(gso_size).max(1);
        Some(Segmenter { l, payload, gso_size, count })
    }

    /// How many segments the super-frame makes.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// The length of segment `i`.
    pub(crate) fn len(&self, i: usize) -> usize {
        let start = self.payload + i * self.gso_size;
        self.payload + (self.l.end.min(start + self.gso_size) - start.min(self.l.end))
    }

    /// Writes segment `i` of `frame` into the start of `out` and returns its length, or `None`
    /// if `out` is too short or `i` is past the last segment.
    pub(crate) fn write(&self, frame: &[u8], i: usize, out: &mut [u8]) -> Option<usize> {
        if i >= self.count {
            return None;
        }
        let l = self.l;
        let start = self.payload + i * self.gso_size;
        let stop = self.l.end.min(start + self.gso_size);
        let n = self.payload + (stop - start);
        let out = out.get_mut(..n)?;
        out[..self.payload].copy_from_slice(&frame[..self.payload]);
        out[self.payload..].copy_from_slice(&frame[start..stop]);
        let ip_len = n - l.l3;
        if l.ipv6 {
            out[l.l3 + 4..l.l3 + 6].copy_from_slice(&((ip_len - 40) as u16).to_be_bytes());
        } else {
            out[l.l3 + 2..l.l3 + 4].copy_from_slice(&(ip_len as u16).to_be_bytes());
            let id = u16::from_be_bytes([out[l.l3 + 4], out[l.l3 + 5]]).wrapping_add(i as u16);
            out[l.l3 + 4..l.l3 + 6].copy_from_slice(&id.to_be_bytes());
            write_ipv4_header(out, l.l3, l.l4 - l.l3);
        }
        if l.proto == TCP {
            let seq = u32::from_be_bytes(out[l.l4 + 4..l.l4 + 8].try_into().ok()?);
            let seq = seq.wrapping_add((i * self.gso_size) as u32);
            out[l.l4 + 4..l.l4 + 8].copy_from_slice(&seq.to_be_bytes());
            let last = i + 1 == self.count;
            let mut flags = out[l.l4 + 13];
            if !last {
                flags &= !(0x01 | 0x08); // FIN, PSH
            }
            if i > 0 {
                flags &= !0x80; // CWR
            }
            out[l.l4 + 13] = flags;
        } else {
            out[l.l4 + 4..l.l4 + 6].copy_from_slice(&((n - l.l4) as u16).to_be_bytes());
        }
        write_l4(out, &Layout { end: n, ..l });
        Some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// A TCP SYN as Linux sends it (IPv4 10.0.0.1:40000 → 10.0.0.2:80, MSS/SACK/timestamp/
    /// window-scale options). The reference checksums in these tests (IPv4 0x0a74, TCP 0xdafd,
    /// UDP 0x7e67 and 0x9565) were computed independently with scapy 2.8.0, not by this module.
    const SYN: &str = "02000000000202000000000108004500003c1c4640004006 0a74 0a000001 0a000002
        9c400050 6ab81b5d 00000000 a002faf0 XXXX 0000 020405b40402080a000a3b5f0000000001030307";

    fn syn(check: &str) -> Vec<u8> {
        hex(&SYN.replace("XXXX", check))
    }

    #[test]
    fn ipv4_header_checksum_of_the_known_syn_is_its_own() {
        let f = syn("0000");
        assert_eq!(internet_checksum(&f[14..34]), 0, "the captured IPv4 header checksum verifies");
    }

    #[test]
    fn completes_a_partial_tcp_checksum_to_the_known_value() {
        // Partial: the field holds the pseudo-header sum, as the kernel leaves it.
        let mut f = syn("0000");
        let pseudo = fold(add_bytes(u64::from(TCP) + 40, &f[26..34]));
        f[50..52].copy_from_slice(&pseudo.to_be_bytes());
        assert_eq!(verify(&f), Some(false));
        assert_eq!(complete(&mut f), Outcome::Completed);
        assert_eq!(&f[50..52], &[0xda, 0xfd]);
        assert_eq!(verify(&f), Some(true));
    }

    #[test]
    fn known_udp_checksums_ipv4_and_ipv6() {
        // UDP 10.0.0.1:1234 → 10.0.0.2:53, payload "hi" (scapy: 0x7e67).
        let mut f = hex("020000000002 020000000001 0800 4500001e 0000 4000 4011 0000 0a000001 0a000002
            04d2 0035 000a 0000 6869");
        write_ipv4_header(&mut f, 14, 20);
        assert_eq!(complete(&mut f), Outcome::Completed);
        assert_eq!(&f[40..42], &[0x7e, 0x67]);
        assert_eq!(internet_checksum(&f[14..34]), 0);
        // IPv6 fe80::1 → fe80::2, the same UDP (scapy: 0x9565).
        let mut g = hex("020000000002 020000000001 86dd 60000000 000a 11 40
            fe800000000000000000000000000001 fe800000000000000000000000000002
            04d2 0035 000a 0000 6869");
        assert_eq!(complete(&mut g), Outcome::Completed);
        assert_eq!(&g[60..62], &[0x95, 0x65]);
        assert_eq!(verify(&g), Some(true));
    }

    #[test]
    fn only_a_partial_checksum_is_completed_without_status() {
        let mut f = syn("0000");
        let pseudo = pseudo_sum(&f, &layout(&f).unwrap());
        f[50..52].copy_from_slice(&pseudo.to_be_bytes());
        assert!(complete_if_partial(&mut f));
        assert_eq!(&f[50..52], &[0xda, 0xfd]);
        // Complete already: untouched. Wrong but not partial (damaged): untouched.
        assert!(!complete_if_partial(&mut f));
        let mut g = syn("1234");
        assert!(!complete_if_partial(&mut g));
        assert_eq!(&g[50..52], &[0x12, 0x34]);
    }

    #[test]
    fn udp_zero_is_sent_as_ffff() {
        // Choose the payload so the sum is 0xffff: the checksum computes to 0 and must be 0xffff.
        let mut f = hex("020000000002 020000000001 0800 4500001e 0000 4000 4011 0000 0a000001 0a000002
            04d2 0035 000a 0000 0000");
        // Current sum without payload: 0x141e + 0x0511 = 0x192f; payload 0xffff - 0x192f = 0xe6d0.
        f[42..44].copy_from_slice(&0xe6d0u16.to_be_bytes());
        assert_eq!(complete(&mut f), Outcome::Completed);
        assert_eq!(&f[40..42], &[0xff, 0xff]);
    }

    #[test]
    fn vlan_tags_are_walked() {
        let plain = {
            let mut f = syn("0000");
            complete(&mut f);
            f
        };
        let mut tagged = plain[..12].to_vec();
        tagged.extend_from_slice(&[0x88, 0xa8, 0x00, 0x05, 0x81, 0x00, 0x00, 0x07]);
        tagged.extend_from_slice(&plain[12..]);
        tagged[8 + 50..8 + 52].fill(0);
        assert_eq!(complete(&mut tagged), Outcome::Completed);
        assert_eq!(&tagged[8 + 50..8 + 52], &[0xda, 0xfd]);
    }

    #[test]
    fn what_is_not_handled_is_left_alone() {
        let frames = [
            hex("ffffffffffff 020000000001 0806 0001080006040001"), // ARP
            // ICMP
            hex("020000000002 020000000001 0800 4500001c 0000 4000 4001 0000 0a000001 0a000002 0800f7ff00000000"),
            // IPv4 fragment (MF set)
            hex("020000000002 020000000001 0800 4500001e 0000 2000 4011 0000 0a000001 0a000002 04d20035000a00006869"),
            // TCP header cut short
            hex("020000000002 020000000001 0800 45000020 0000 4000 4006 0000 0a000001 0a000002 9c4000506ab81b5d"),
            hex("0200"), // shorter than Ethernet
        ];
        for f in frames {
            let mut g = f.clone();
            assert_eq!(complete(&mut g), Outcome::Unsupported, "{f:02x?}");
            assert_eq!(g, f);
        }
    }

    /// A TCP super-frame of 3000 payload bytes with FIN|PSH|CWR, cut at 1448.
    #[test]
    fn tcp_super_frame_is_cut_like_the_device_would() {
        let payload: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
        let mut f = syn("0000");
        f.truncate(34 + 20); // IPv4 + a 20-byte TCP header
        f[14 + 2..14 + 4].copy_from_slice(&((20 + 20 + payload.len()) as u16).to_be_bytes());
        f[34 + 12] = 5 << 4;
        f[34 + 13] = 0x80 | 0x10 | 0x08 | 0x01; // CWR ACK PSH FIN
        f.extend_from_slice(&payload);
        let s = Segmenter::new(&f, GsoKind::Tcp, 1448).unwrap();
        assert_eq!(s.count(), 3);
        let mut joined = Vec::new();
        let seq0 = u32::from_be_bytes(f[38..42].try_into().unwrap());
        for i in 0..3 {
            let mut out = vec![0u8; 2000];
            let n = s.write(&f, i, &mut out).unwrap();
            assert_eq!(n, s.len(i));
            let out = &out[..n];
            assert_eq!(n, 54 + [1448, 1448, 104][i]);
            assert_eq!(usize::from(u16::from_be_bytes([out[16], out[17]])), n - 14);
            assert_eq!(u16::from_be_bytes([out[18], out[19]]), 0x1c46 + i as u16);
            assert_eq!(internet_checksum(&out[14..34]), 0, "IPv4 header checksum of segment {i}");
            assert_eq!(verify(out), Some(true), "TCP checksum of segment {i}");
            assert_eq!(u32::from_be_bytes(out[38..42].try_into().unwrap()), seq0 + 1448 * i as u32);
            let flags = out[47];
            assert_eq!(flags & 0x10, 0x10);
            assert_eq!(flags & 0x09 != 0, i == 2, "FIN/PSH only on the last");
            assert_eq!(flags & 0x80 != 0, i == 0, "CWR only on the first");
            joined.extend_from_slice(&out[54..]);
        }
        assert_eq!(joined, payload);
        assert!(s.write(&f, 3, &mut [0u8; 2000]).is_none());
        assert!(s.write(&f, 0, &mut [0u8; 100]).is_none(), "too short an output");
        assert!(Segmenter::new(&f, GsoKind::UdpL4, 1448).is_none(), "announced UDP, found TCP");
        assert!(Segmenter::new(&f, GsoKind::Tcp, 0).is_none());
    }

    #[test]
    fn udp_super_frame_makes_datagrams() {
        let payload: Vec<u8> = (0..2500u32).map(|i| i as u8).collect();
        let mut f = hex("020000000002 020000000001 86dd 60000000 0000 11 40
            fe800000000000000000000000000001 fe800000000000000000000000000002 04d2 0035 0000 0000");
        f.extend_from_slice(&payload);
        let plen = (8 + payload.len()) as u16;
        f[18..20].copy_from_slice(&plen.to_be_bytes());
        f[58..60].copy_from_slice(&plen.to_be_bytes());
        let s = Segmenter::new(&f, GsoKind::UdpL4, 1000).unwrap();
        assert_eq!(s.count(), 3);
        let mut joined = Vec::new();
        for i in 0..3 {
            let mut out = vec![0u8; 1200];
            let n = s.write(&f, i, &mut out).unwrap();
            let out = &out[..n];
            let udp_len = usize::from(u16::from_be_bytes([out[58], out[59]]));
            assert_eq!(udp_len, 8 + [1000, 1000, 500][i]);
            assert_eq!(usize::from(u16::from_be_bytes([out[18], out[19]])), udp_len);
            assert_eq!(verify(out), Some(true));
            joined.extend_from_slice(&out[62..]);
        }
        assert_eq!(joined, payload);
    }
}
