//! pcap and pcapng captures → [`FlowKey`]s, and keys → a classic pcap of minimal frames.
//!
//! # Frames → keys ([`extract`])
//!
//! A hand-written parser with the semantics of Open vSwitch's `miniflow_extract` for the fields a
//! [`FlowKey`] has. It never panics, whatever the bytes.
//!
//! - **Ethernet II**: `dl_dst`, `dl_src`, `dl_type`. An 802.3 frame (type/length field below
//!   0x0600) gets, as in OVS, the ethertype of its LLC/SNAP header when it has one with OUI 0, and
//!   otherwise [`FLOW_DL_TYPE_NONE`] (0x05ff).
//! - **VLAN**: any number of 802.1Q (0x8100) and 802.1ad (0x88a8) tags. `vlan_tci` is the first
//!   (outer) tag's TCI with [`VLAN_CFI`] set, which is how OVS says "a tag is present" (so the wire's
//!   CFI/DEI bit is not kept); untagged frames have `vlan_tci` 0. `dl_type` is the innermost
//!   ethertype.
//! - **IPv4**: `nw_src`, `nw_dst` (host order), `nw_proto`, `nw_tos`, `nw_frag`. The header length
//!   (IHL, i.e. options) is honoured; bytes after the IP total length (Ethernet padding, an FCS) are
//!   ignored. `nw_tos` is the whole TOS byte, DSCP and ECN, as in OVS's `struct flow`; an ovs-ofctl
//!   `nw_tos=` match examines only its DSCP bits (mask 0xfc). `nw_frag` is [`FLOW_NW_FRAG_ANY`] when MF is set or the fragment offset
//!   is non-zero, plus [`FLOW_NW_FRAG_LATER`] when the offset is non-zero.
//! - **L4**, for unfragmented packets and first fragments (later fragments have no L4 fields): TCP
//!   → ports and `tcp_flags` (the low 12 bits of the data-offset/flags word); UDP and SCTP → ports;
//!   ICMP → type in `tp_src` and code in `tp_dst`, as OVS does. Every other IP protocol leaves
//!   `tp_src`/`tp_dst` zero (OVS also puts IGMP type/code there; rqvs does not, see `crate::key`).
//! - **ARP/RARP**, as OVS, when hardware type is Ethernet and protocol type IPv4: `nw_src` = sender
//!   IP, `nw_dst` = target IP, `nw_proto` = the opcode when it is ≤ 255 (OVS matches its low byte
//!   only). Other ARP flavours keep the L2 fields only.
//! - **Every other ethertype**, IPv6 included: a key with the L2 fields only ([`Extract::Other`]).
//!
//! Where a capture is not a datapath, rqvs departs from OVS on purpose:
//!
//! - A frame too short for a header it announces (Ethernet, VLAN tag, IPv4 header with its
//!   options, the fixed TCP/UDP/SCTP/ICMP header of a first fragment or unfragmented packet, ARP) is
//!   [`Extract::Truncated`]; OVS would make a key without that header's fields. A header that
//!   contradicts itself (IP version ≠ 4, IHL < 5, total length < header length, TCP data offset < 5)
//!   is [`Extract::Malformed`]. The capture readers skip and count both.
//! - Captures are cut at their snap length, so an IPv4 total length beyond the end of the frame is
//!   accepted as long as the headers rqvs reads are there (OVS drops such a packet), and so is a
//!   total length of 0 (TSO/GSO packets captured on the sending host; the frame's end is used).
//!   TCP options need not be present. Any amount of trailing padding is ignored (OVS gives up past
//!   255 bytes).
//!
//! # Captures → keys ([`read_capture`], [`parse_capture`])
//!
//! Classic pcap (both byte orders, microsecond and nanosecond magics) and pcapng are told apart by
//! their magic number; files are read through `pcap-file`'s slice parsers (the parsers behind its
//! `PcapReader`/`PcapNgReader`, so that errors can name the byte offset). Classic pcap records are
//! taken raw: `pcap-file`'s checked packets reject `orig_len > snaplen`, which every capture taken
//! with a small snap length has. `.xz` captures are decompressed.
//!
//! Link types: a classic pcap has one link type for the whole file, and one that is not Ethernet is
//! an error (nothing in the file could be read). A pcapng file has one per interface: packets of
//! non-Ethernet interfaces are skipped and counted in [`CaptureStats::non_ethernet`], and a file in
//! which *no* packet is on an Ethernet interface is an error.
//!
//! A damaged *file* is an error naming the packet (1-based) and the byte offset of its record
//! ([`Position::Packet`](crate::Position::Packet)), e.g. "the record header promises 64 bytes of
//! packet data, 20 remain"; an empty file or an unknown magic number is a file-level error. Damaged
//! *frames* are not errors: they are skipped and counted.
//!
//! Every frame read is counted exactly once:
//! `frames == ipv4 + other + truncated + malformed + non_ethernet`, and `keys`/`timestamps_ns` hold
//! the `ipv4 + other` frames that produced a key, in file order.
//!
//! pcapng timestamps honour each interface's `if_tsresol` (default microseconds) and `if_tsoffset`;
//! a simple packet block has no timestamp and gets the previous packet's.
//!
//! # Keys → frames ([`build_frame`], [`write_pcap`])
//!
//! [`build_frame`] writes the smallest Ethernet frame that carries a key: headers only, zero-padded
//! to 60 bytes (the 64-byte minimum without the FCS, which pcap files normally omit), with correct
//! IPv4, TCP, UDP and ICMP checksums and SCTP CRC32c.
//! [`wire_key`] says exactly which key [`extract`] reads back from it.
//!
//! ClassBench traces set ports on any protocol, but a real packet can carry `tp_src`/`tp_dst` only
//! in a TCP, UDP or SCTP header, or as an ICMP type and code below 256, and never in a later
//! fragment. Those ports are lost in the frame and [`WriteStats::ports_dropped`] counts the keys
//! that had some.

use std::path::Path;

use pcap_file::pcap::PcapParser;
use pcap_file::pcapng::blocks::interface_description::{InterfaceDescriptionBlock, InterfaceDescriptionOption};
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::{DataLink, Endianness, PcapError, TsResolution};

use crate::error::{ParseError, Result};
use crate::key::{
    FlowKey, ETH_TYPE_ARP, ETH_TYPE_IP, ETH_TYPE_VLAN, FLOW_NW_FRAG_ANY, FLOW_NW_FRAG_LATER, IPPROTO_ICMP,
    IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP, TCP_FLAGS_MASK, VLAN_CFI,
};

/// `dl_type` of an 802.1ad (QinQ) service tag.
pub const ETH_TYPE_VLAN_8021AD: u16 = 0x88a8;
/// `dl_type` of RARP (parsed like ARP, as in OVS).
pub const ETH_TYPE_RARP: u16 = 0x8035;
/// Smallest value of the type/length field that is an ethertype; below it, it is an 802.3 length.
pub const ETH_TYPE_MIN: u16 = 0x0600;
/// OVS's `dl_type` for an 802.3 frame without an LLC/SNAP ethertype.
pub const FLOW_DL_TYPE_NONE: u16 = 0x05ff;
/// Length of the frames [`build_frame`] writes: the 64-byte Ethernet minimum without the FCS.
pub const MIN_FRAME_LEN: usize = 60;

const ETH_HEADER_LEN: usize = 14;
const VLAN_HEADER_LEN: usize = 4;
const LLC_SNAP_HEADER_LEN: usize = 8;
const IPV4_HEADER_LEN: usize = 20;
const TCP_HEADER_LEN: usize = 20;
const UDP_HEADER_LEN: usize = 8;
const SCTP_HEADER_LEN: usize = 12;
const ICMP_HEADER_LEN: usize = 8;
const ARP_ETH_HEADER_LEN: usize = 28;

const IP_MORE_FRAGMENTS: u16 = 0x2000;
const IP_FRAG_OFF_MASK: u16 = 0x1fff;
/// Fragment offset (in 8-byte units) [`build_frame`] gives a later fragment: 1480 bytes, the
/// second fragment of a 1500-byte-MTU datagram.
const LATER_FRAGMENT_OFFSET: u16 = 185;
const TTL: u8 = 64;

const PCAP_MAGICS: [[u8; 4]; 4] =
    [[0xa1, 0xb2, 0xc3, 0xd4], [0xd4, 0xc3, 0xb2, 0xa1], [0xa1, 0xb2, 0x3c, 0x4d], [0x4d, 0x3c, 0xb2, 0xa1]];
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
const XZ_MAGIC: [u8; 6] = [0xfd, b'7', b'z', b'X', b'Z', 0x00];
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// True when `bytes` start like a pcap (either byte order, µs or ns) or pcapng file.
pub fn is_capture(bytes: &[u8]) -> bool {
    bytes.get(..4).is_some_and(|m| PCAP_MAGICS.iter().any(|p| p[..] == *m) || *m == PCAPNG_MAGIC)
}
const PCAP_FILE_HEADER_LEN: usize = 24;
const PCAP_RECORD_HEADER_LEN: usize = 16;
const PCAPNG_BLOCK_HEADER_LEN: usize = 12;
const LINKTYPE_ETHERNET: u32 = 1;

/// What [`extract`] made of one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extract {
    /// An IPv4 packet (possibly a fragment, possibly without L4 fields).
    Ipv4(FlowKey),
    /// Anything else that is a complete Ethernet frame: ARP (with its IPv4 addresses and opcode)
    /// and every other ethertype, IPv6 included, with the L2 fields only.
    Other(FlowKey),
    /// The frame ends inside a header it announced; `layer` names it (`"ethernet"`, `"vlan"`,
    /// `"ipv4"`, `"tcp"`, `"udp"`, `"sctp"`, `"icmp"`, `"arp"`).
    Truncated { layer: &'static str },
    /// A header contradicts itself (IP version, IHL, total length, TCP data offset).
    Malformed { layer: &'static str, reason: &'static str },
}

impl Extract {
    /// The key, for [`Extract::Ipv4`] and [`Extract::Other`].
    pub fn key(&self) -> Option<&FlowKey> {
        match self {
            Extract::Ipv4(k) | Extract::Other(k) => Some(k),
            Extract::Truncated { .. } | Extract::Malformed { .. } => None,
        }
    }
}

/// The key of one Ethernet frame received on `in_port` (see the module documentation).
pub fn extract(frame: &[u8], in_port: u32) -> Extract {
    let Some(eth) = frame.first_chunk::<ETH_HEADER_LEN>() else {
        return Extract::Truncated { layer: "ethernet" };
    };
    let mut key = FlowKey {
        in_port,
        dl_dst: [eth[0], eth[1], eth[2], eth[3], eth[4], eth[5]],
        dl_src: [eth[6], eth[7], eth[8], eth[9], eth[10], eth[11]],
        ..FlowKey::default()
    };
    let mut dl_type = u16::from_be_bytes([eth[12], eth[13]]);
    // Offset of the first byte after the type field just read.
    let mut at = ETH_HEADER_LEN;
    while dl_type == ETH_TYPE_VLAN || dl_type == ETH_TYPE_VLAN_8021AD {
        let Some(tag) = frame.get(at..).and_then(<[u8]>::first_chunk::<VLAN_HEADER_LEN>) else {
            return Extract::Truncated { layer: "vlan" };
        };
        if key.vlan_tci == 0 {
            key.vlan_tci = u16::from_be_bytes([tag[0], tag[1]]) | VLAN_CFI;
        }
        dl_type = u16::from_be_bytes([tag[2], tag[3]]);
        at += VLAN_HEADER_LEN;
    }
    if dl_type < ETH_TYPE_MIN {
        (dl_type, at) = llc_snap(frame, at);
    }
    key.dl_type = dl_type;
    let l3 = frame.get(at..).unwrap_or_default();
    match dl_type {
        ETH_TYPE_IP => ipv4(key, l3),
        ETH_TYPE_ARP | ETH_TYPE_RARP => arp(key, l3),
        _ => Extract::Other(key),
    }
}

/// OVS `parse_ethertype` for an 802.3 frame: the SNAP ethertype and the offset after the LLC/SNAP
/// header, or [`FLOW_DL_TYPE_NONE`].
fn llc_snap(frame: &[u8], at: usize) -> (u16, usize) {
    match frame.get(at..).and_then(<[u8]>::first_chunk::<LLC_SNAP_HEADER_LEN>) {
        Some([0xaa, 0xaa, 0x03, 0, 0, 0, hi, lo]) => {
            let snap_type = u16::from_be_bytes([*hi, *lo]);
            let dl_type = if snap_type >= ETH_TYPE_MIN { snap_type } else { FLOW_DL_TYPE_NONE };
            (dl_type, at + LLC_SNAP_HEADER_LEN)
        }
        _ => (FLOW_DL_TYPE_NONE, at),
    }
}

fn ipv4(mut key: FlowKey, ip: &[u8]) -> Extract {
    let Some(h) = ip.first_chunk::<IPV4_HEADER_LEN>() else {
        return Extract::Truncated { layer: "ipv4" };
    };
    if h[0] >> 4 != 4 {
        return Extract::Malformed { layer: "ipv4", reason: "version field is not 4" };
    }
    let header_len = usize::from(h[0] & 0x0f) * 4;
    if header_len < IPV4_HEADER_LEN {
        return Extract::Malformed { layer: "ipv4", reason: "header length (IHL) below 5 words" };
    }
    if ip.len() < header_len {
        return Extract::Truncated { layer: "ipv4" };
    }
    let total_len = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let end = match total_len {
        0 => ip.len(),
        n if n < header_len => {
            return Extract::Malformed { layer: "ipv4", reason: "total length shorter than the header" }
        }
        n => n.min(ip.len()),
    };
    key.nw_tos = h[1];
    key.nw_proto = h[9];
    key.nw_src = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
    key.nw_dst = u32::from_be_bytes([h[16], h[17], h[18], h[19]]);
    let frag = u16::from_be_bytes([h[6], h[7]]);
    if frag & (IP_MORE_FRAGMENTS | IP_FRAG_OFF_MASK) != 0 {
        key.nw_frag = FLOW_NW_FRAG_ANY;
        if frag & IP_FRAG_OFF_MASK != 0 {
            key.nw_frag |= FLOW_NW_FRAG_LATER;
            return Extract::Ipv4(key);
        }
    }
    let l4 = ip.get(header_len..end).unwrap_or_default();
    match key.nw_proto {
        IPPROTO_TCP => {
            let Some(t) = l4.first_chunk::<TCP_HEADER_LEN>() else {
                return Extract::Truncated { layer: "tcp" };
            };
            if t[12] >> 4 < 5 {
                return Extract::Malformed { layer: "tcp", reason: "data offset below 5 words" };
            }
            key.tp_src = u16::from_be_bytes([t[0], t[1]]);
            key.tp_dst = u16::from_be_bytes([t[2], t[3]]);
            key.tcp_flags = u16::from_be_bytes([t[12], t[13]]) & TCP_FLAGS_MASK;
        }
        IPPROTO_UDP => {
            let Some(u) = l4.first_chunk::<UDP_HEADER_LEN>() else {
                return Extract::Truncated { layer: "udp" };
            };
            key.tp_src = u16::from_be_bytes([u[0], u[1]]);
            key.tp_dst = u16::from_be_bytes([u[2], u[3]]);
        }
        IPPROTO_SCTP => {
            let Some(s) = l4.first_chunk::<SCTP_HEADER_LEN>() else {
                return Extract::Truncated { layer: "sctp" };
            };
            key.tp_src = u16::from_be_bytes([s[0], s[1]]);
            key.tp_dst = u16::from_be_bytes([s[2], s[3]]);
        }
        IPPROTO_ICMP => {
            let Some(i) = l4.first_chunk::<ICMP_HEADER_LEN>() else {
                return Extract::Truncated { layer: "icmp" };
            };
            key.tp_src = u16::from(i[0]);
            key.tp_dst = u16::from(i[1]);
        }
        _ => {}
    }
    Extract::Ipv4(key)
}

fn arp(mut key: FlowKey, l3: &[u8]) -> Extract {
    let Some(a) = l3.first_chunk::<ARP_ETH_HEADER_LEN>() else {
        return Extract::Truncated { layer: "arp" };
    };
    let hardware = u16::from_be_bytes([a[0], a[1]]);
    let protocol = u16::from_be_bytes([a[2], a[3]]);
    if hardware == 1 && protocol == ETH_TYPE_IP && a[4] == 6 && a[5] == 4 {
        key.nw_src = u32::from_be_bytes([a[14], a[15], a[16], a[17]]);
        key.nw_dst = u32::from_be_bytes([a[24], a[25], a[26], a[27]]);
        if let Ok(op) = u8::try_from(u16::from_be_bytes([a[6], a[7]])) {
            key.nw_proto = op;
        }
    }
    Extract::Other(key)
}

/// How the frames of a capture were counted. Every frame is counted once:
/// `frames == ipv4 + other + truncated + malformed + non_ethernet`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CaptureStats {
    /// Packet records read.
    pub frames: usize,
    /// IPv4 keys produced.
    pub ipv4: usize,
    /// Non-IPv4 keys produced (ARP, IPv6 and every other ethertype; L2 fields only except ARP).
    pub other: usize,
    /// Frames skipped because they end inside a header ([`Extract::Truncated`]); a small snap
    /// length causes these.
    pub truncated: usize,
    /// Frames skipped because a header contradicts itself ([`Extract::Malformed`]).
    pub malformed: usize,
    /// pcapng packets skipped because their interface's link type is not Ethernet.
    pub non_ethernet: usize,
}

impl CaptureStats {
    /// Frames that produced no key.
    pub fn skipped(&self) -> usize {
        self.truncated + self.malformed + self.non_ethernet
    }
}

/// The keys of a capture, in file order, with their timestamps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Capture {
    /// One key per frame that produced one.
    pub keys: Vec<FlowKey>,
    /// `timestamps_ns[i]` is the time of `keys[i]`, in nanoseconds since the Unix epoch.
    pub timestamps_ns: Vec<u64>,
    pub stats: CaptureStats,
}

/// Reads a pcap or pcapng capture (plain or xz); the keys get `in_port`.
pub fn read_capture(path: &Path, in_port: u32) -> Result<Capture> {
    let bytes = crate::io::read_bytes(path)?;
    parse_capture(&path.display().to_string(), &bytes, in_port)
}

/// Parses the bytes of a pcap or pcapng capture (xz is decompressed); `name` is used in errors.
pub fn parse_capture(name: &str, bytes: &[u8], in_port: u32) -> Result<Capture> {
    let Some(magic) = bytes.first_chunk::<4>() else {
        let message = if bytes.is_empty() {
            "empty file: expected a pcap or pcapng capture".to_string()
        } else {
            format!(
                "file is {} bytes long, too short for the 4-byte magic number of a pcap or pcapng \
                 capture",
                bytes.len()
            )
        };
        return Err(ParseError::in_file(name, message));
    };
    if PCAP_MAGICS.contains(magic) {
        parse_pcap(name, bytes, in_port)
    } else if *magic == PCAPNG_MAGIC {
        parse_pcapng(name, bytes, in_port)
    } else if bytes.starts_with(&XZ_MAGIC) {
        let raw = crate::io::decompress_if_xz(name, bytes.to_vec())?;
        parse_capture(name, &raw, in_port)
    } else {
        let hint = if bytes.starts_with(&GZIP_MAGIC) {
            " (this is gzip data: decompress it first; only xz is read directly)"
        } else {
            ""
        };
        Err(ParseError::in_file(
            name,
            format!(
                "not a pcap or pcapng capture: the file starts with {:02x} {:02x} {:02x} {:02x}, \
                 expected a pcap magic number (a1 b2 c3 d4, a1 b2 3c 4d or byte-swapped) or a \
                 pcapng section header (0a 0d 0d 0a){hint}",
                magic[0], magic[1], magic[2], magic[3]
            ),
        ))
    }
}

/// Turns frames into keys and counts them.
struct Collector {
    in_port: u32,
    capture: Capture,
}

impl Collector {
    fn new(in_port: u32, file_len: usize) -> Collector {
        // Most frames of a capture are at least 64 bytes plus a record header.
        let guess = file_len / 96;
        let capture = Capture {
            keys: Vec::with_capacity(guess),
            timestamps_ns: Vec::with_capacity(guess),
            stats: CaptureStats::default(),
        };
        Collector { in_port, capture }
    }

    fn frame(&mut self, frame: &[u8], timestamp_ns: u64) {
        let stats = &mut self.capture.stats;
        stats.frames += 1;
        let key = match extract(frame, self.in_port) {
            Extract::Ipv4(key) => {
                stats.ipv4 += 1;
                key
            }
            Extract::Other(key) => {
                stats.other += 1;
                key
            }
            Extract::Truncated { .. } => {
                stats.truncated += 1;
                return;
            }
            Extract::Malformed { .. } => {
                stats.malformed += 1;
                return;
            }
        };
        self.capture.keys.push(key);
        self.capture.timestamps_ns.push(timestamp_ns);
    }

    fn non_ethernet(&mut self) {
        self.capture.stats.frames += 1;
        self.capture.stats.non_ethernet += 1;
    }
}

fn read_u32(bytes: [u8; 4], endianness: Endianness) -> u32 {
    match endianness {
        Endianness::Big => u32::from_be_bytes(bytes),
        Endianness::Little => u32::from_le_bytes(bytes),
    }
}

fn link_type_name(link: DataLink) -> String {
    format!("{} ({link:?})", u32::from(link))
}

fn parse_pcap(name: &str, bytes: &[u8], in_port: u32) -> Result<Capture> {
    let (mut rest, parser) = PcapParser::new(bytes).map_err(|e| {
        let message = match e {
            PcapError::IncompleteBuffer => {
                format!("capture ends inside the {PCAP_FILE_HEADER_LEN}-byte pcap file header ({} bytes)", bytes.len())
            }
            e => format!("bad pcap file header: {e}"),
        };
        ParseError::in_file(name, message)
    })?;
    let header = parser.header();
    if u32::from(header.datalink) != LINKTYPE_ETHERNET {
        return Err(ParseError::in_file(
            name,
            format!(
                "link type {} is not Ethernet ({LINKTYPE_ETHERNET}): rqvs reads Ethernet frames only",
                link_type_name(header.datalink)
            ),
        ));
    }
    let ns_per_tick: u64 = match header.ts_resolution {
        TsResolution::MicroSecond => 1_000,
        TsResolution::NanoSecond => 1,
    };
    let mut collector = Collector::new(in_port, bytes.len());
    let mut index = 0;
    while !rest.is_empty() {
        index += 1;
        let offset = (bytes.len() - rest.len()) as u64;
        let (remainder, record) = parser
            .next_raw_packet(rest)
            .map_err(|e| ParseError::at_packet(name, index, offset, pcap_record_error(rest, header.endianness, e)))?;
        let timestamp_ns = u64::from(record.ts_sec) * 1_000_000_000 + u64::from(record.ts_frac) * ns_per_tick;
        collector.frame(&record.data, timestamp_ns);
        rest = remainder;
    }
    Ok(collector.capture)
}

fn pcap_record_error(rest: &[u8], endianness: Endianness, e: PcapError) -> String {
    match (e, rest.first_chunk::<PCAP_RECORD_HEADER_LEN>()) {
        (PcapError::IncompleteBuffer, Some(h)) => format!(
            "capture ends inside the packet data: the record header promises {} bytes of packet \
             data, {} remain",
            read_u32([h[8], h[9], h[10], h[11]], endianness),
            rest.len() - PCAP_RECORD_HEADER_LEN
        ),
        (PcapError::IncompleteBuffer, None) => {
            format!("capture ends inside the {PCAP_RECORD_HEADER_LEN}-byte record header: {} bytes remain", rest.len())
        }
        (e, _) => format!("corrupt record: {e}"),
    }
}

/// What rqvs needs of a pcapng interface.
struct Interface {
    link: DataLink,
    snaplen: u32,
    /// `if_tsresol`: bit 7 clear → units of 10^-n s, set → 2^-n s.
    tsresol: u8,
    /// `if_tsoffset`, seconds (signed in the specification).
    tsoffset: i64,
}

impl Interface {
    fn new(idb: &InterfaceDescriptionBlock<'_>) -> Interface {
        let mut interface = Interface { link: idb.linktype, snaplen: idb.snaplen, tsresol: 6, tsoffset: 0 };
        for option in &idb.options {
            match option {
                InterfaceDescriptionOption::IfTsResol(r) => interface.tsresol = *r,
                InterfaceDescriptionOption::IfTsOffset(s) => interface.tsoffset = *s as i64,
                _ => {}
            }
        }
        interface
    }

    fn is_ethernet(&self) -> bool {
        u32::from(self.link) == LINKTYPE_ETHERNET
    }

    /// A timestamp in this interface's units → nanoseconds since the epoch (saturating).
    fn timestamp_ns(&self, raw: u64) -> u64 {
        let raw = i128::from(raw);
        let exponent = u32::from(self.tsresol & 0x7f);
        let ns = if self.tsresol & 0x80 == 0 {
            if exponent <= 9 {
                raw * 10_i128.pow(9 - exponent)
            } else {
                10_i128.checked_pow(exponent - 9).map_or(0, |d| raw / d)
            }
        } else {
            (raw * 1_000_000_000) >> exponent
        };
        let ns = ns + i128::from(self.tsoffset) * 1_000_000_000;
        u64::try_from(ns.max(0)).unwrap_or(u64::MAX)
    }
}

fn block_name(block_type: u32) -> String {
    match block_type {
        0x0a0d_0d0a => "section header".to_string(),
        1 => "interface description".to_string(),
        2 => "packet".to_string(),
        3 => "simple packet".to_string(),
        4 => "name resolution".to_string(),
        5 => "interface statistics".to_string(),
        6 => "enhanced packet".to_string(),
        9 => "systemd journal export".to_string(),
        10 => "decryption secrets".to_string(),
        t => format!("type {t:#x}"),
    }
}

/// Checks that a whole pcapng block is present, so that a cut file is reported as such (the
/// `pcap-file` parser says "need more bytes" for that and for a field overrunning its block).
fn check_block_framing(rest: &[u8], endianness: Endianness) -> std::result::Result<(), String> {
    let Some(h) = rest.first_chunk::<PCAPNG_BLOCK_HEADER_LEN>() else {
        return Err(format!(
            "capture ends inside a block header: {} bytes remain, a block header has \
             {PCAPNG_BLOCK_HEADER_LEN}",
            rest.len()
        ));
    };
    let type_bytes = [h[0], h[1], h[2], h[3]];
    let endianness = if type_bytes == PCAPNG_MAGIC {
        match [h[8], h[9], h[10], h[11]] {
            [0x1a, 0x2b, 0x3c, 0x4d] => Endianness::Big,
            [0x4d, 0x3c, 0x2b, 0x1a] => Endianness::Little,
            bom => {
                return Err(format!(
                    "section header block has an invalid byte-order magic {:02x} {:02x} {:02x} \
                     {:02x} (expected 1a 2b 3c 4d or 4d 3c 2b 1a)",
                    bom[0], bom[1], bom[2], bom[3]
                ))
            }
        }
    } else {
        endianness
    };
    let block_type = read_u32(type_bytes, endianness);
    let block_len = read_u32([h[4], h[5], h[6], h[7]], endianness);
    if usize::try_from(block_len).map_or(true, |n| n > rest.len()) {
        return Err(format!(
            "capture ends inside this {} block: its header promises {block_len} bytes, {} remain",
            block_name(block_type),
            rest.len()
        ));
    }
    Ok(())
}

fn describe_block_error(block_type: &str, e: PcapError) -> String {
    match e {
        PcapError::IncompleteBuffer => {
            format!("corrupt {block_type} block: a field runs past the end of the block")
        }
        e => format!("corrupt {block_type} block: {e}"),
    }
}

fn parse_pcapng(name: &str, bytes: &[u8], in_port: u32) -> Result<Capture> {
    check_block_framing(bytes, Endianness::Big).map_err(|m| ParseError::in_file(name, m))?;
    let (mut rest, mut parser) = PcapNgParser::new(bytes)
        .map_err(|e| ParseError::in_file(name, describe_block_error("first section header", e)))?;
    let mut interfaces: Vec<Interface> = Vec::new();
    let mut collector = Collector::new(in_port, bytes.len());
    let mut last_timestamp_ns = 0;
    let mut first_non_ethernet: Option<DataLink> = None;
    while !rest.is_empty() {
        let index = collector.capture.stats.frames + 1;
        let offset = (bytes.len() - rest.len()) as u64;
        let at = |message: String| ParseError::at_packet(name, index, offset, message);
        let endianness = parser.section().endianness;
        check_block_framing(rest, endianness).map_err(at)?;
        let block_type = rest.first_chunk::<4>().map_or_else(String::new, |t| block_name(read_u32(*t, endianness)));
        let (remainder, block) = parser.next_block(rest).map_err(|e| at(describe_block_error(&block_type, e)))?;
        rest = remainder;
        // (interface id, raw timestamp or None for "no timestamp", captured bytes)
        let (interface_id, raw_timestamp, data): (usize, Option<u64>, &[u8]) = match &block {
            Block::SectionHeader(_) => {
                interfaces.clear();
                continue;
            }
            Block::InterfaceDescription(idb) => {
                interfaces.push(Interface::new(idb));
                continue;
            }
            Block::EnhancedPacket(epb) => (
                epb.interface_id as usize,
                Some(u64::try_from(epb.timestamp.as_nanos()).unwrap_or(u64::MAX)),
                &epb.data,
            ),
            Block::Packet(pb) => (usize::from(pb.interface_id), Some(pb.timestamp), &pb.data),
            Block::SimplePacket(spb) => {
                // The block holds min(original length, snap length) bytes plus padding.
                let snaplen = interfaces.first().map_or(0, |i| i.snaplen);
                let captured = match snaplen {
                    0 => spb.original_len,
                    s => s.min(spb.original_len),
                };
                let captured = usize::try_from(captured).unwrap_or(usize::MAX);
                (0, None, spb.data.get(..captured).unwrap_or(&spb.data))
            }
            _ => continue,
        };
        let Some(interface) = interfaces.get(interface_id) else {
            return Err(at(format!(
                "{block_type} block names interface {interface_id}, but its section describes {} \
                 interface(s)",
                interfaces.len()
            )));
        };
        if let Some(raw) = raw_timestamp {
            last_timestamp_ns = interface.timestamp_ns(raw);
        }
        if interface.is_ethernet() {
            collector.frame(data, last_timestamp_ns);
        } else {
            first_non_ethernet.get_or_insert(interface.link);
            collector.non_ethernet();
        }
    }
    let stats = collector.capture.stats;
    if let Some(link) = first_non_ethernet {
        if stats.non_ethernet == stats.frames {
            return Err(ParseError::in_file(
                name,
                format!(
                    "none of the {} packets is on an Ethernet interface (link type {}): rqvs reads \
                     Ethernet frames only",
                    stats.frames,
                    link_type_name(link)
                ),
            ));
        }
    }
    Ok(collector.capture)
}

/// The key [`extract`] reads back from [`build_frame`]`(key)`: what of `key` a real frame carries.
///
/// `vlan_tci` survives only with [`VLAN_CFI`] set; non-IPv4 keys keep their L2 fields (ARP/RARP
/// also `nw_src`, `nw_dst` and `nw_proto` as the opcode); IPv4 keeps `nw_tos`, `nw_frag`
/// (`FLOW_NW_FRAG_LATER` implies `FLOW_NW_FRAG_ANY`) and, unless the key is a later fragment, the
/// ports of TCP/UDP/SCTP, the low bytes of `tp_src`/`tp_dst` for ICMP and `tcp_flags` for TCP. An
/// ethertype below 0x0600 reads back as [`FLOW_DL_TYPE_NONE`], a VLAN ethertype as a tag.
pub fn wire_key(key: &FlowKey) -> FlowKey {
    let mut w = FlowKey {
        in_port: key.in_port,
        dl_src: key.dl_src,
        dl_dst: key.dl_dst,
        dl_type: key.dl_type,
        vlan_tci: if key.vlan_tci & VLAN_CFI != 0 { key.vlan_tci } else { 0 },
        ..FlowKey::default()
    };
    match key.dl_type {
        ETH_TYPE_IP => {
            w.nw_src = key.nw_src;
            w.nw_dst = key.nw_dst;
            w.nw_proto = key.nw_proto;
            w.nw_tos = key.nw_tos;
            if key.nw_frag & FLOW_NW_FRAG_LATER != 0 {
                w.nw_frag = FLOW_NW_FRAG_ANY | FLOW_NW_FRAG_LATER;
                return w;
            }
            w.nw_frag = key.nw_frag & FLOW_NW_FRAG_ANY;
            match key.nw_proto {
                IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP => {
                    w.tp_src = key.tp_src;
                    w.tp_dst = key.tp_dst;
                }
                IPPROTO_ICMP => {
                    w.tp_src = key.tp_src & 0xff;
                    w.tp_dst = key.tp_dst & 0xff;
                }
                _ => {}
            }
            if key.nw_proto == IPPROTO_TCP {
                w.tcp_flags = key.tcp_flags & TCP_FLAGS_MASK;
            }
        }
        ETH_TYPE_ARP | ETH_TYPE_RARP => {
            w.nw_src = key.nw_src;
            w.nw_dst = key.nw_dst;
            w.nw_proto = key.nw_proto;
        }
        ETH_TYPE_VLAN | ETH_TYPE_VLAN_8021AD => {
            // The type field announces a tag; the zero padding after it reads as TCI 0 followed
            // by an 802.3 length of 0.
            if w.vlan_tci == 0 {
                w.vlan_tci = VLAN_CFI;
            }
            w.dl_type = FLOW_DL_TYPE_NONE;
        }
        t if t < ETH_TYPE_MIN => w.dl_type = FLOW_DL_TYPE_NONE,
        _ => {}
    }
    w
}

/// The smallest Ethernet frame carrying `key`: its headers zero-padded to [`MIN_FRAME_LEN`] bytes
/// (no FCS; only a VLAN-tagged TCP or SCTP first fragment needs 62). The fields of the key it
/// carries are [`wire_key`]`(key)`.
///
/// Layout: destination and source MAC; an 802.1Q tag with `vlan_tci & !VLAN_CFI` when `vlan_tci`
/// has [`VLAN_CFI`] set; `dl_type`; then for IPv4 a 20-byte header (TOS `nw_tos`, TTL 64, id 0,
/// checksum) followed by a TCP header (data offset 5, flags `tcp_flags`, window 65535), a UDP
/// header, an SCTP common header or an 8-byte ICMP header (type and code the low bytes of
/// `tp_src`/`tp_dst`), all checksummed, and no payload; for other IP protocols no payload at all.
/// Fragments: `FLOW_NW_FRAG_LATER` → fragment offset 1480 bytes and no L4 header;
/// `FLOW_NW_FRAG_ANY` alone → MF set, offset 0, the L4 header padded to a multiple of 8 bytes. ARP
/// and RARP keys get an Ethernet/IPv4 ARP body (opcode `nw_proto`, sender `dl_src`/`nw_src`,
/// target `nw_dst`); every other ethertype only zero padding.
pub fn build_frame(key: &FlowKey) -> Vec<u8> {
    let mut frame = Vec::with_capacity(MIN_FRAME_LEN);
    frame.extend_from_slice(&key.dl_dst);
    frame.extend_from_slice(&key.dl_src);
    if key.vlan_tci & VLAN_CFI != 0 {
        frame.extend_from_slice(&ETH_TYPE_VLAN.to_be_bytes());
        frame.extend_from_slice(&(key.vlan_tci & !VLAN_CFI).to_be_bytes());
    }
    frame.extend_from_slice(&key.dl_type.to_be_bytes());
    match key.dl_type {
        ETH_TYPE_IP => push_ipv4(&mut frame, key),
        ETH_TYPE_ARP | ETH_TYPE_RARP => push_arp(&mut frame, key),
        _ => {}
    }
    if frame.len() < MIN_FRAME_LEN {
        frame.resize(MIN_FRAME_LEN, 0);
    }
    frame
}

fn push_arp(frame: &mut Vec<u8>, key: &FlowKey) {
    frame.extend_from_slice(&[0, 1]); // hardware: Ethernet
    frame.extend_from_slice(&ETH_TYPE_IP.to_be_bytes());
    frame.extend_from_slice(&[6, 4]);
    frame.extend_from_slice(&u16::from(key.nw_proto).to_be_bytes());
    frame.extend_from_slice(&key.dl_src);
    frame.extend_from_slice(&key.nw_src.to_be_bytes());
    frame.extend_from_slice(&[0; 6]);
    frame.extend_from_slice(&key.nw_dst.to_be_bytes());
}

fn push_ipv4(frame: &mut Vec<u8>, key: &FlowKey) {
    let later = key.nw_frag & FLOW_NW_FRAG_LATER != 0;
    let first = !later && key.nw_frag & FLOW_NW_FRAG_ANY != 0;
    let mut l4 = if later { Vec::new() } else { l4_header(key) };
    let frag = if later {
        LATER_FRAGMENT_OFFSET
    } else if first {
        l4.resize(l4.len().div_ceil(8) * 8, 0);
        IP_MORE_FRAGMENTS
    } else {
        0
    };
    let total_len = (IPV4_HEADER_LEN + l4.len()) as u16;
    let mut ip = [0u8; IPV4_HEADER_LEN];
    ip[0] = 0x45;
    ip[1] = key.nw_tos;
    ip[2..4].copy_from_slice(&total_len.to_be_bytes());
    ip[6..8].copy_from_slice(&frag.to_be_bytes());
    ip[8] = TTL;
    ip[9] = key.nw_proto;
    ip[12..16].copy_from_slice(&key.nw_src.to_be_bytes());
    ip[16..20].copy_from_slice(&key.nw_dst.to_be_bytes());
    let checksum = fold(sum16(0, &ip));
    ip[10..12].copy_from_slice(&checksum.to_be_bytes());
    if !later {
        l4_checksum(key, &mut l4);
    }
    frame.extend_from_slice(&ip);
    frame.extend_from_slice(&l4);
}

/// The L4 header of a key, checksum fields zero.
fn l4_header(key: &FlowKey) -> Vec<u8> {
    let ports = |h: &mut Vec<u8>| {
        h.extend_from_slice(&key.tp_src.to_be_bytes());
        h.extend_from_slice(&key.tp_dst.to_be_bytes());
    };
    let mut h = Vec::with_capacity(TCP_HEADER_LEN);
    match key.nw_proto {
        IPPROTO_TCP => {
            ports(&mut h);
            h.extend_from_slice(&[0; 8]); // sequence and acknowledgement numbers
            h.extend_from_slice(&((5 << 12) | (key.tcp_flags & TCP_FLAGS_MASK)).to_be_bytes());
            h.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]); // window, checksum, urgent pointer
        }
        IPPROTO_UDP => {
            ports(&mut h);
            h.extend_from_slice(&(UDP_HEADER_LEN as u16).to_be_bytes());
            h.extend_from_slice(&[0, 0]);
        }
        IPPROTO_SCTP => {
            ports(&mut h);
            h.extend_from_slice(&[0; 8]); // verification tag, checksum
        }
        IPPROTO_ICMP => {
            h.extend_from_slice(&[key.tp_src as u8, key.tp_dst as u8]);
            h.extend_from_slice(&[0; 6]); // checksum, rest of header
        }
        _ => {}
    }
    h
}

/// Fills the checksum of the L4 header `l4` (the whole IP payload).
fn l4_checksum(key: &FlowKey, l4: &mut [u8]) {
    let checksum_at = match key.nw_proto {
        IPPROTO_TCP => 16,
        IPPROTO_UDP => 6,
        IPPROTO_ICMP => 2,
        IPPROTO_SCTP => {
            let crc = crc32c(l4);
            if let Some(field) = l4.get_mut(8..12) {
                field.copy_from_slice(&crc.to_le_bytes());
            }
            return;
        }
        _ => return,
    };
    let pseudo_header = if key.nw_proto == IPPROTO_ICMP {
        0
    } else {
        let mut p = [0u8; 12];
        p[0..4].copy_from_slice(&key.nw_src.to_be_bytes());
        p[4..8].copy_from_slice(&key.nw_dst.to_be_bytes());
        p[9] = key.nw_proto;
        p[10..12].copy_from_slice(&(l4.len() as u16).to_be_bytes());
        sum16(0, &p)
    };
    let mut checksum = fold(sum16(pseudo_header, l4));
    if key.nw_proto == IPPROTO_UDP && checksum == 0 {
        checksum = 0xffff;
    }
    if let Some(field) = l4.get_mut(checksum_at..checksum_at + 2) {
        field.copy_from_slice(&checksum.to_be_bytes());
    }
}

/// One's-complement sum of big-endian 16-bit words (odd length: zero-padded), not folded.
fn sum16(mut acc: u64, data: &[u8]) -> u64 {
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        if let [hi, lo] = *w {
            acc += u64::from(u16::from_be_bytes([hi, lo]));
        }
    }
    if let [last] = *words.remainder() {
        acc += u64::from(last) << 8;
    }
    acc
}

/// Folds a [`sum16`] into the Internet checksum (its one's complement).
fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// CRC32c (Castagnoli), as SCTP uses it (RFC 4960 appendix B).
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82f6_3b78 } else { crc >> 1 };
        }
    }
    !crc
}

/// What [`write_pcap`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Packets written (one per key).
    pub packets: usize,
    /// Keys whose non-zero `tp_src`/`tp_dst` no header of their protocol can carry (not TCP, UDP,
    /// SCTP or ICMP; ICMP type/code above 255; a later fragment; not IPv4): the frame lost them.
    /// ClassBench traces put ports on any protocol; a real packet cannot.
    pub ports_dropped: usize,
}

/// A classic pcap (little-endian, microsecond timestamps, snap length 65535, Ethernet) holding
/// [`build_frame`] of every key.
///
/// Timestamps are `timestamps_ns[i]` truncated to the microsecond (seconds saturate at
/// `u32::MAX`); without them, or past their end, packets follow each other 1 µs apart (the first
/// at 0).
pub fn write_pcap(keys: &[FlowKey], timestamps_ns: Option<&[u64]>) -> (Vec<u8>, WriteStats) {
    let mut out = Vec::with_capacity(PCAP_FILE_HEADER_LEN + keys.len() * (PCAP_RECORD_HEADER_LEN + MIN_FRAME_LEN));
    out.extend_from_slice(&0xa1b2_c3d4_u32.to_le_bytes());
    out.extend_from_slice(&2_u16.to_le_bytes());
    out.extend_from_slice(&4_u16.to_le_bytes());
    out.extend_from_slice(&0_i32.to_le_bytes()); // thiszone
    out.extend_from_slice(&0_u32.to_le_bytes()); // sigfigs
    out.extend_from_slice(&65535_u32.to_le_bytes()); // snaplen
    out.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
    let mut stats = WriteStats::default();
    let mut previous: Option<u64> = None;
    for (i, key) in keys.iter().enumerate() {
        let ts = match timestamps_ns.and_then(|t| t.get(i)) {
            Some(&t) => t,
            None => previous.map_or(0, |p| p.saturating_add(1_000)),
        };
        previous = Some(ts);
        let wire = wire_key(key);
        if (key.tp_src, key.tp_dst) != (wire.tp_src, wire.tp_dst) {
            stats.ports_dropped += 1;
        }
        let frame = build_frame(key);
        let secs = u32::try_from(ts / 1_000_000_000).unwrap_or(u32::MAX);
        let micros = (ts % 1_000_000_000 / 1_000) as u32;
        let len = frame.len() as u32;
        for field in [secs, micros, len, len] {
            out.extend_from_slice(&field.to_le_bytes());
        }
        out.extend_from_slice(&frame);
        stats.packets += 1;
    }
    (out, stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::borrow::Cow;
    use std::time::Duration;

    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
    use pcap_file::pcapng::blocks::simple_packet::SimplePacketBlock;
    use pcap_file::pcapng::PcapNgWriter;

    use crate::key::ETH_TYPE_IPV6;

    /// TCP SYN 10.0.0.1:12345 → 192.168.1.2:80 in VLAN 100 (PCP 5), DSCP EF, TTL 64. Checksums
    /// computed independently (Python).
    #[rustfmt::skip]
    const TCP_SYN_VLAN: [u8; 60] = [
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, // dst
        0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, // src
        0x81, 0x00, 0xa0, 0x64,             // 802.1Q, PCP 5, VID 100
        0x08, 0x00,                         // IPv4
        0x45, 0xb8, 0x00, 0x28, 0x00, 0x00, 0x00, 0x00, 0x40, 0x06, 0xae, 0x6d,
        0x0a, 0x00, 0x00, 0x01, 0xc0, 0xa8, 0x01, 0x02,
        0x30, 0x39, 0x00, 0x50,             // ports 12345 → 80
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x50, 0x02, 0xff, 0xff, 0xb3, 0xae, 0x00, 0x00, // offset 5, SYN, window, checksum
        0x00, 0x00,                         // Ethernet padding
    ];

    fn golden_syn_key() -> FlowKey {
        FlowKey {
            in_port: 7,
            dl_dst: [0x00, 0x11, 0x22, 0x33, 0x44, 0x55],
            dl_src: [0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb],
            dl_type: ETH_TYPE_IP,
            vlan_tci: 0xa064 | VLAN_CFI,
            nw_src: 0x0a00_0001,
            nw_dst: 0xc0a8_0102,
            nw_proto: IPPROTO_TCP,
            nw_tos: 0xb8,
            nw_frag: 0,
            tp_src: 12345,
            tp_dst: 80,
            tcp_flags: 0x002,
        }
    }

    #[test]
    fn golden_tcp_syn_with_vlan() {
        assert_eq!(extract(&TCP_SYN_VLAN, 7), Extract::Ipv4(golden_syn_key()));
        // build_frame makes the same choices as the hand-written frame, checksums included.
        assert_eq!(build_frame(&golden_syn_key()), TCP_SYN_VLAN.to_vec());
        // ECN bits are part of nw_tos, as in OVS; the wire CFI/DEI bit is folded into "tag present".
        let mut f = TCP_SYN_VLAN;
        f[19] = 0xbb;
        f[14] = 0xb0;
        assert_eq!(extract(&f, 7), Extract::Ipv4(FlowKey { nw_tos: 0xbb, ..golden_syn_key() }));
    }

    #[test]
    fn golden_icmp_echo() {
        #[rustfmt::skip]
        let frame = [
            0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00,
            0x45, 0x00, 0x00, 0x20, 0xab, 0xcd, 0x40, 0x00, 0x40, 0x01, 0x79, 0x0b,
            10, 1, 1, 1, 10, 1, 1, 2,
            0x08, 0x00, 0x21, 0x04, 0x12, 0x34, 0x00, 0x01, b'a', b'b', b'c', b'd',
            // 14 bytes of padding to 60
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        let want = FlowKey {
            in_port: 1,
            dl_dst: [2, 0, 0, 0, 0, 2],
            dl_src: [2, 0, 0, 0, 0, 1],
            dl_type: ETH_TYPE_IP,
            nw_src: 0x0a01_0101,
            nw_dst: 0x0a01_0102,
            nw_proto: IPPROTO_ICMP,
            tp_src: 8,
            tp_dst: 0,
            ..FlowKey::default()
        };
        assert_eq!(extract(&frame, 1), Extract::Ipv4(want));
        // Echo reply code 0 type 0; destination unreachable type 3 code 13.
        let mut unreach = frame;
        unreach[34] = 3;
        unreach[35] = 13;
        let k = *extract(&unreach, 1).key().unwrap();
        assert_eq!((k.tp_src, k.tp_dst), (3, 13));
    }

    #[test]
    fn golden_arp_request() {
        #[rustfmt::skip]
        let frame = [
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x08, 0x06,
            0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01,
            0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 192, 168, 1, 2,
            0, 0, 0, 0, 0, 0, 192, 168, 1, 1,
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        let want = FlowKey {
            in_port: 3,
            dl_dst: [0xff; 6],
            dl_src: [0x52, 0x54, 0x00, 0x12, 0x34, 0x56],
            dl_type: ETH_TYPE_ARP,
            nw_src: 0xc0a8_0102,
            nw_dst: 0xc0a8_0101,
            nw_proto: 1,
            ..FlowKey::default()
        };
        assert_eq!(extract(&frame, 3), Extract::Other(want));
        // Opcode above 255: OVS keeps only the addresses.
        let mut big_op = frame;
        big_op[20] = 0x01;
        assert_eq!(extract(&big_op, 3).key().unwrap().nw_proto, 0);
        // Not Ethernet/IPv4 ARP: L2 fields only.
        let mut other_hw = frame;
        other_hw[15] = 6;
        let l2_only = FlowKey { nw_src: 0, nw_dst: 0, nw_proto: 0, ..want };
        assert_eq!(extract(&other_hw, 3), Extract::Other(l2_only));
        // Cut inside the ARP body.
        assert_eq!(extract(&frame[..41], 3), Extract::Truncated { layer: "arp" });
        // The builder writes the same ARP body (sender MAC from dl_src, target MAC zero).
        assert_eq!(build_frame(&want), frame.to_vec());
    }

    #[test]
    fn ipv6_is_other_with_l2_fields() {
        let mut frame = vec![0u8; 14 + 40 + 8];
        frame[..6].copy_from_slice(&[0x33, 0x33, 0, 0, 0, 1]);
        frame[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
        frame[12..14].copy_from_slice(&ETH_TYPE_IPV6.to_be_bytes());
        frame[14] = 0x60;
        frame[20] = IPPROTO_UDP;
        let want = FlowKey {
            in_port: 2,
            dl_dst: [0x33, 0x33, 0, 0, 0, 1],
            dl_src: [2, 0, 0, 0, 0, 9],
            dl_type: ETH_TYPE_IPV6,
            ..FlowKey::default()
        };
        assert_eq!(extract(&frame, 2), Extract::Other(want));
        // Even a bare IPv6 ethertype with nothing after it is a complete L2 key.
        assert_eq!(extract(&frame[..14], 2), Extract::Other(want));
    }

    #[test]
    fn qinq_keeps_outer_tci_and_inner_type() {
        let mut f = TCP_SYN_VLAN.to_vec();
        // Insert an 802.1ad outer tag (VID 7) before the 802.1Q tag.
        f.splice(12..12, [0x88, 0xa8, 0x00, 0x07]);
        let k = *extract(&f, 7).key().unwrap();
        assert_eq!(k.vlan_tci, 0x0007 | VLAN_CFI);
        assert_eq!(k.dl_type, ETH_TYPE_IP);
        assert_eq!((k.tp_src, k.tp_dst, k.tcp_flags), (12345, 80, 2));
        assert_eq!(extract(&f[..19], 7), Extract::Truncated { layer: "vlan" });
        assert_eq!(extract(&f[..13], 7), Extract::Truncated { layer: "ethernet" });
    }

    #[test]
    fn ipv4_options_padding_and_total_length() {
        let mut key = golden_syn_key();
        key.vlan_tci = 0;
        let plain = build_frame(&key);
        // Add 4 bytes of options (IHL 6): total length 44, checksum not verified (as OVS).
        let mut f = plain[..34].to_vec();
        f.extend_from_slice(&[1, 1, 1, 0]);
        f.extend_from_slice(&plain[34..54]);
        f[14] = 0x46;
        f[16..18].copy_from_slice(&44u16.to_be_bytes());
        f.extend_from_slice(&[0xee; 100]); // trailing garbage/padding past the total length
        assert_eq!(extract(&f, 7), Extract::Ipv4(key));
        // IHL covering more than the frame: truncated IPv4; IHL < 5 or total < header: malformed.
        let mut g = f.clone();
        g[14] = 0x4f;
        assert_eq!(extract(&g[..60], 7), Extract::Truncated { layer: "ipv4" });
        g[14] = 0x44;
        assert!(matches!(extract(&g, 7), Extract::Malformed { layer: "ipv4", .. }));
        let mut h = f.clone();
        h[16..18].copy_from_slice(&20u16.to_be_bytes());
        assert!(matches!(extract(&h, 7), Extract::Malformed { layer: "ipv4", .. }));
        let mut v6 = f.clone();
        v6[14] = 0x66;
        assert!(matches!(extract(&v6, 7), Extract::Malformed { layer: "ipv4", .. }));
        // Total length 40 (header + 16 bytes): the TCP header is cut by the IP length itself.
        let mut short = f.clone();
        short[16..18].copy_from_slice(&40u16.to_be_bytes());
        assert_eq!(extract(&short, 7), Extract::Truncated { layer: "tcp" });
        // Total length 0 (TSO): the frame's end is used.
        let mut tso = f.clone();
        tso[16..18].copy_from_slice(&0u16.to_be_bytes());
        assert_eq!(extract(&tso, 7), Extract::Ipv4(key));
        // Snap length cut after the TCP header: the total length may exceed the frame.
        let mut snapped = f[..58].to_vec();
        snapped[16..18].copy_from_slice(&1500u16.to_be_bytes());
        assert_eq!(extract(&snapped, 7), Extract::Ipv4(key));
        // TCP data offset below 5.
        let mut bad_tcp = f.clone();
        bad_tcp[38 + 12] = 0x40;
        assert_eq!(extract(&bad_tcp, 7), Extract::Malformed { layer: "tcp", reason: "data offset below 5 words" });
    }

    #[test]
    fn fragments() {
        let mut key = golden_syn_key();
        key.nw_frag = FLOW_NW_FRAG_ANY;
        // First fragment (MF): L4 fields present.
        let first = build_frame(&key);
        assert_eq!(first[18 + 6], 0x20);
        assert_eq!(extract(&first, 7), Extract::Ipv4(key));
        // Later fragment (offset != 0, MF clear): no L4 fields, even though bytes follow.
        let mut later = first.clone();
        later[18 + 6..18 + 8].copy_from_slice(&0x0001u16.to_be_bytes());
        let k = *extract(&later, 7).key().unwrap();
        assert_eq!(k.nw_frag, FLOW_NW_FRAG_ANY | FLOW_NW_FRAG_LATER);
        assert_eq!((k.tp_src, k.tp_dst, k.tcp_flags), (0, 0, 0));
        // A later fragment too short for any L4 header is still a complete key.
        assert!(matches!(extract(&later[..18 + 20], 7), Extract::Ipv4(_)));
    }

    #[test]
    fn llc_snap_as_ovs() {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&46u16.to_be_bytes()); // 802.3 length
        f[14..17].copy_from_slice(&[0x42, 0x42, 0x03]); // STP LLC
        assert_eq!(extract(&f, 1).key().unwrap().dl_type, FLOW_DL_TYPE_NONE);
        // SNAP with OUI 0 carrying IPv4: parsed as IPv4 after the 8-byte LLC/SNAP header.
        let mut key = golden_syn_key();
        key.vlan_tci = 0;
        let plain = build_frame(&key);
        let mut snap = plain[..12].to_vec();
        snap.extend_from_slice(&[0x00, 0x30, 0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00]);
        snap.extend_from_slice(&plain[14..]);
        assert_eq!(extract(&snap, 7), Extract::Ipv4(key));
    }

    #[test]
    fn udp_sctp_other_proto_and_crc32c() {
        // RFC 3720 B.4 check value of CRC32c.
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        for proto in [IPPROTO_UDP, IPPROTO_SCTP] {
            let key = FlowKey::ipv4(0x0102_0304, 0x0506_0708, proto, 53, 5353);
            let f = build_frame(&key);
            assert_eq!(f.len(), MIN_FRAME_LEN);
            assert_eq!(extract(&f, 1), Extract::Ipv4(key));
        }
        // GRE: ports cannot be carried.
        let gre = FlowKey::ipv4(1, 2, 47, 1000, 2000);
        let k = *extract(&build_frame(&gre), 1).key().unwrap();
        assert_eq!((k.nw_proto, k.tp_src, k.tp_dst), (47, 0, 0));
        assert_eq!(k, wire_key(&gre));
    }

    /// Checksums of built frames verify (sum over header incl. checksum folds to 0).
    #[test]
    fn built_checksums_verify() {
        for proto in [IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMP] {
            let key = FlowKey::ipv4(0xc0a8_0001, 0x0a00_00fe, proto, 40000, 443);
            let key = FlowKey { tp_src: key.tp_src & 0xff, ..key };
            let f = build_frame(&key);
            let ip = &f[14..34];
            assert_eq!(fold(sum16(0, ip)), 0);
            let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
            let l4 = &f[34..14 + total];
            let mut pseudo = sum16(0, &f[26..34]);
            pseudo += u64::from(proto) + l4.len() as u64;
            let sum = if proto == IPPROTO_ICMP { sum16(0, l4) } else { sum16(pseudo, l4) };
            assert_eq!(fold(sum), 0, "proto {proto}");
        }
    }

    fn arb_ipv4_key() -> impl Strategy<Value = FlowKey> {
        (
            any::<[u8; 6]>(),
            any::<[u8; 6]>(),
            prop_oneof![Just(0u16), any::<u16>().prop_map(|t| t | VLAN_CFI)],
            any::<(u32, u32, u32)>(),
            prop_oneof![Just(IPPROTO_TCP), Just(IPPROTO_UDP), Just(IPPROTO_ICMP), Just(IPPROTO_SCTP), any::<u8>()],
            any::<u8>(),
            prop_oneof![Just(0u8), Just(FLOW_NW_FRAG_ANY), Just(FLOW_NW_FRAG_ANY | FLOW_NW_FRAG_LATER)],
            any::<(u16, u16, u16)>(),
        )
            .prop_map(
                |(dl_src, dl_dst, vlan_tci, (nw_src, nw_dst, in_port), proto, tos, frag, (sp, dp, flags))| {
                    let mut k = FlowKey {
                        in_port,
                        dl_src,
                        dl_dst,
                        dl_type: ETH_TYPE_IP,
                        vlan_tci,
                        nw_src,
                        nw_dst,
                        nw_proto: proto,
                        nw_tos: tos,
                        nw_frag: frag,
                        ..FlowKey::default()
                    };
                    if frag & FLOW_NW_FRAG_LATER == 0 {
                        match proto {
                            IPPROTO_TCP => (k.tp_src, k.tp_dst, k.tcp_flags) = (sp, dp, flags & TCP_FLAGS_MASK),
                            IPPROTO_UDP | IPPROTO_SCTP => (k.tp_src, k.tp_dst) = (sp, dp),
                            IPPROTO_ICMP => (k.tp_src, k.tp_dst) = (sp & 0xff, dp & 0xff),
                            _ => {}
                        }
                    }
                    k
                },
            )
    }

    /// Bytes up to the end of the last header extract needs for a frame built from `key`.
    fn headers_len(key: &FlowKey) -> usize {
        let l2 = if key.vlan_tci & VLAN_CFI != 0 { 18 } else { 14 };
        if key.nw_frag & FLOW_NW_FRAG_LATER != 0 {
            return l2 + 20;
        }
        l2 + 20
            + match key.nw_proto {
                IPPROTO_TCP => 20,
                IPPROTO_UDP | IPPROTO_ICMP => 8,
                IPPROTO_SCTP => 12,
                _ => 0,
            }
    }

    fn arb_any_key() -> impl Strategy<Value = FlowKey> {
        (
            any::<([u8; 6], [u8; 6], u32, u16, u32, u32)>(),
            prop_oneof![
                Just(ETH_TYPE_IP),
                Just(ETH_TYPE_ARP),
                Just(ETH_TYPE_RARP),
                Just(ETH_TYPE_IPV6),
                Just(ETH_TYPE_VLAN),
                Just(0x0100u16),
                any::<u16>()
            ],
            any::<(u16, u16, u16, u8, u8, u8)>(),
        )
            .prop_map(|((dl_src, dl_dst, in_port, vlan_tci, nw_src, nw_dst), dl_type, t)| {
                let (tp_src, tp_dst, tcp_flags, nw_proto, nw_tos, nw_frag) = t;
                let nw_proto =
                    [IPPROTO_TCP, IPPROTO_UDP, IPPROTO_SCTP, IPPROTO_ICMP, nw_proto][usize::from(nw_frag >> 5) % 5];
                FlowKey {
                    nw_src,
                    nw_dst,
                    tp_src,
                    tp_dst,
                    in_port,
                    dl_type,
                    vlan_tci,
                    tcp_flags,
                    nw_proto,
                    nw_tos,
                    nw_frag: nw_frag & 3,
                    dl_src,
                    dl_dst,
                }
            })
    }

    proptest! {
        #[test]
        fn ipv4_round_trip(key in arb_ipv4_key()) {
            let frame = build_frame(&key);
            // Headers, a first fragment's payload rounded up to 8 bytes, padding to 60.
            let l2 = headers_len(&FlowKey { nw_frag: FLOW_NW_FRAG_LATER, ..key });
            let l4 = headers_len(&key) - l2;
            let l4 = if key.nw_frag == FLOW_NW_FRAG_ANY { l4.div_ceil(8) * 8 } else { l4 };
            prop_assert_eq!(frame.len(), MIN_FRAME_LEN.max(l2 + l4));
            prop_assert_eq!(wire_key(&key), key);
            prop_assert_eq!(extract(&frame, key.in_port), Extract::Ipv4(key));
        }

        #[test]
        fn truncated_at_every_length(key in arb_ipv4_key()) {
            let frame = build_frame(&key);
            let need = headers_len(&key);
            for len in 0..frame.len() {
                let got = extract(&frame[..len], key.in_port);
                if len < need {
                    prop_assert!(matches!(got, Extract::Truncated { .. }), "len {}: {:?}", len, got);
                } else {
                    prop_assert_eq!(got, Extract::Ipv4(key), "len {}", len);
                }
            }
        }

        #[test]
        fn any_key_reads_back_as_wire_key(key in arb_any_key()) {
            let got = extract(&build_frame(&key), key.in_port);
            prop_assert_eq!(got.key(), Some(&wire_key(&key)));
            let (_, stats) = write_pcap(&[key], None);
            let w = wire_key(&key);
            prop_assert_eq!(stats.ports_dropped == 1, (key.tp_src, key.tp_dst) != (w.tp_src, w.tp_dst));
        }

        #[test]
        fn extract_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128), port in any::<u32>()) {
            if let Some(k) = extract(&bytes, port).key() {
                prop_assert_eq!(k.in_port, port);
            }
        }

        #[test]
        fn extract_never_panics_on_mutated_frames(
            key in arb_ipv4_key(),
            edits in proptest::collection::vec((0usize..60, any::<u8>()), 1..6),
            cut in 0usize..=60,
        ) {
            let mut frame = build_frame(&key);
            for (at, b) in edits {
                frame[at] = b;
            }
            let _ = extract(&frame[..cut], key.in_port);
        }

        #[test]
        fn parse_capture_never_panics_on_damaged_files(
            keys in proptest::collection::vec(arb_ipv4_key(), 0..4),
            ng in any::<bool>(),
            big in any::<bool>(),
            edits in proptest::collection::vec((any::<proptest::sample::Index>(), any::<u8>(), any::<bool>()), 0..8),
            cut in any::<proptest::sample::Index>(),
        ) {
            let endianness = if big { Endianness::Big } else { Endianness::Little };
            let mut bytes = if ng { pcapng_of(&keys, endianness, None) } else { write_pcap(&keys, None).0 };
            // Half the edits hit the file, section and interface headers.
            for (at, b, near_start) in edits {
                let i = at.index(if near_start { bytes.len().min(64) } else { bytes.len() });
                bytes[i] = b;
            }
            let n = cut.index(bytes.len() + 1);
            if let Ok(c) = parse_capture("fuzz", &bytes[..n], 1) {
                let s = c.stats;
                prop_assert_eq!(s.frames, s.ipv4 + s.other + s.truncated + s.malformed + s.non_ethernet);
                prop_assert_eq!(c.keys.len(), s.ipv4 + s.other);
                prop_assert_eq!(c.keys.len(), c.timestamps_ns.len());
            }
        }

        #[test]
        fn pcap_round_trip(keys in proptest::collection::vec(arb_ipv4_key(), 0..20), in_port in any::<u32>()) {
            let timestamps: Vec<u64> = (0..keys.len() as u64).map(|i| 1_700_000_000_000_000_000 + i * 1_234_000).collect();
            let (bytes, stats) = write_pcap(&keys, Some(&timestamps));
            prop_assert_eq!(stats, WriteStats { packets: keys.len(), ports_dropped: 0 });
            let c = parse_capture("rt.pcap", &bytes, in_port).unwrap();
            let want: Vec<FlowKey> = keys.iter().map(|k| FlowKey { in_port, ..*k }).collect();
            prop_assert_eq!(c.keys, want);
            prop_assert_eq!(c.timestamps_ns, timestamps);
            prop_assert_eq!(c.stats, CaptureStats { frames: keys.len(), ipv4: keys.len(), ..CaptureStats::default() });
        }
    }

    /// A pcapng of `keys` built with pcap-file's writer: interface 0 Ethernet (`tsresol` given or
    /// the default microseconds), packets `i` at `i * 1000 + 7` units.
    fn pcapng_of(keys: &[FlowKey], endianness: Endianness, tsresol: Option<u8>) -> Vec<u8> {
        let mut w = PcapNgWriter::with_endianness(Vec::new(), endianness).unwrap();
        let options = tsresol.map(InterfaceDescriptionOption::IfTsResol).into_iter().collect();
        w.write_pcapng_block(InterfaceDescriptionBlock { linktype: DataLink::ETHERNET, snaplen: 0xffff, options })
            .unwrap();
        for (i, key) in keys.iter().enumerate() {
            let frame = build_frame(key);
            let epb = EnhancedPacketBlock {
                interface_id: 0,
                timestamp: Duration::from_nanos(i as u64 * 1000 + 7),
                original_len: frame.len() as u32,
                data: Cow::Owned(frame),
                options: vec![],
            };
            w.write_pcapng_block(epb).unwrap();
        }
        w.into_inner()
    }

    fn some_keys() -> Vec<FlowKey> {
        vec![
            golden_syn_key(),
            FlowKey::ipv4(0x0a00_0001, 0x0a00_0002, IPPROTO_UDP, 1000, 53),
            FlowKey::ipv4(0x0a00_0003, 0x0a00_0004, IPPROTO_ICMP, 8, 0),
        ]
    }

    #[test]
    fn pcapng_read_back_both_byte_orders() {
        let keys = some_keys();
        for endianness in [Endianness::Little, Endianness::Big] {
            let bytes = pcapng_of(&keys, endianness, Some(9));
            let c = parse_capture("t.pcapng", &bytes, 7).unwrap();
            let want: Vec<FlowKey> = keys.iter().map(|k| FlowKey { in_port: 7, ..*k }).collect();
            assert_eq!(c.keys, want);
            assert_eq!(c.timestamps_ns, vec![7, 1007, 2007]);
            assert_eq!(c.stats.ipv4, 3);
        }
        // Default resolution: microseconds.
        let c = parse_capture("t.pcapng", &pcapng_of(&keys, Endianness::Little, None), 7).unwrap();
        assert_eq!(c.timestamps_ns, vec![7_000, 1_007_000, 2_007_000]);
        // Binary resolution 2^-10 s: 1024 units = 1 s.
        let c = parse_capture("t.pcapng", &pcapng_of(&keys[..1], Endianness::Little, Some(0x8a)), 7).unwrap();
        assert_eq!(c.timestamps_ns, vec![7 * 1_000_000_000 / 1024]);
    }

    #[test]
    fn pcapng_non_ethernet_interfaces_and_simple_packets() {
        let key = golden_syn_key();
        let frame = build_frame(&key);
        let mut w = PcapNgWriter::new(Vec::new()).unwrap();
        w.write_pcapng_block(InterfaceDescriptionBlock { linktype: DataLink::ETHERNET, snaplen: 0, options: vec![] })
            .unwrap();
        w.write_pcapng_block(InterfaceDescriptionBlock { linktype: DataLink::RAW, snaplen: 0, options: vec![] })
            .unwrap();
        let epb = |iface: u32, us: u64| EnhancedPacketBlock {
            interface_id: iface,
            timestamp: Duration::from_nanos(us),
            original_len: frame.len() as u32,
            data: Cow::Borrowed(&frame),
            options: vec![],
        };
        w.write_pcapng_block(epb(0, 5)).unwrap();
        w.write_pcapng_block(epb(1, 6)).unwrap();
        // A simple packet block (no timestamp: gets the previous packet's) of a 46-byte frame,
        // stored padded to 48 bytes: only 46 bytes are the frame.
        let arp = FlowKey { dl_type: ETH_TYPE_ARP, nw_src: 1, nw_dst: 2, nw_proto: 2, ..key };
        let arp_frame = build_frame(&arp)[..46].to_vec();
        w.write_pcapng_block(SimplePacketBlock { original_len: 46, data: Cow::Owned(arp_frame) }).unwrap();
        let bytes = w.into_inner();
        let c = parse_capture("mixed.pcapng", &bytes, 7).unwrap();
        assert_eq!(c.keys, vec![key, wire_key(&arp)]);
        assert_eq!(c.timestamps_ns, vec![5_000, 6_000]);
        assert_eq!(c.stats, CaptureStats { frames: 3, ipv4: 1, other: 1, non_ethernet: 1, ..CaptureStats::default() });

        // Only non-Ethernet packets: an error naming the link type.
        let mut w = PcapNgWriter::new(Vec::new()).unwrap();
        w.write_pcapng_block(InterfaceDescriptionBlock { linktype: DataLink::RAW, snaplen: 0, options: vec![] })
            .unwrap();
        w.write_pcapng_block(epb(0, 1)).unwrap();
        let e = parse_capture("raw.pcapng", &w.into_inner(), 1).unwrap_err().to_string();
        assert!(e.contains("raw.pcapng: none of the 1 packets is on an Ethernet interface"), "{e}");
        assert!(e.contains("101 (RAW)"), "{e}");

        // A packet naming an interface the section does not describe.
        let mut w = PcapNgWriter::new(Vec::new()).unwrap();
        w.write_pcapng_block(InterfaceDescriptionBlock { linktype: DataLink::ETHERNET, snaplen: 0, options: vec![] })
            .unwrap();
        w.write_pcapng_block(epb(0, 1)).unwrap();
        let mut bytes = w.into_inner();
        let good_len = bytes.len();
        let mut w2 = PcapNgWriter::new(Vec::new()).unwrap();
        w2.write_pcapng_block(InterfaceDescriptionBlock { linktype: DataLink::ETHERNET, snaplen: 0, options: vec![] })
            .unwrap();
        w2.write_pcapng_block(InterfaceDescriptionBlock { linktype: DataLink::ETHERNET, snaplen: 0, options: vec![] })
            .unwrap();
        w2.write_pcapng_block(epb(1, 1)).unwrap();
        let other = w2.into_inner();
        // Append just the EPB naming interface 1 (the last block of `other`).
        let epb_len = good_len - 28 - 20; // SHB 28 bytes, IDB 20 bytes in `bytes`
        bytes.extend_from_slice(&other[other.len() - epb_len..]);
        let e = parse_capture("iface.pcapng", &bytes, 1).unwrap_err().to_string();
        assert!(e.contains("packet 2"), "{e}");
        assert!(e.contains("names interface 1, but its section describes 1 interface"), "{e}");
    }

    #[test]
    fn pcap_big_endian_nanosecond_and_snaplen_cut_frames() {
        let key = golden_syn_key();
        let frame = build_frame(&key);
        let header = PcapHeader {
            endianness: Endianness::Big,
            ts_resolution: TsResolution::NanoSecond,
            snaplen: 58,
            ..PcapHeader::default()
        };
        let mut w = PcapWriter::with_header(Vec::new(), header).unwrap();
        // orig_len 60 > snaplen 58: valid for a capture (pcap-file's checked packets reject it).
        let mut raw = Vec::new();
        for (i, len) in [(1u32, 58usize), (2, 40)] {
            raw.push((i, len));
        }
        for (i, len) in raw {
            let p = PcapPacket::new(Duration::new(10, i), len as u32, &frame[..len]);
            w.write_packet(&p).unwrap();
        }
        let mut bytes = w.into_writer();
        // Rewrite the first record's orig_len (bytes 12..16 of the record) to 60.
        bytes[24 + 12..24 + 16].copy_from_slice(&60u32.to_be_bytes());
        let c = parse_capture("be.pcap", &bytes, 7).unwrap();
        assert_eq!(c.keys, vec![key]);
        assert_eq!(c.timestamps_ns, vec![10_000_000_001]);
        assert_eq!(c.stats, CaptureStats { frames: 2, ipv4: 1, truncated: 1, ..CaptureStats::default() });
    }

    #[test]
    fn write_pcap_layout_and_stats() {
        let keys = vec![
            FlowKey::ipv4(1, 2, IPPROTO_TCP, 10, 20),
            FlowKey::ipv4(1, 2, 47, 10, 20),           // GRE: ports lost
            FlowKey::ipv4(1, 2, IPPROTO_ICMP, 300, 0), // ICMP type > 255: lost
            FlowKey::ipv4(1, 2, 47, 0, 0),             // no ports to lose
            FlowKey { nw_frag: 3, ..FlowKey::ipv4(1, 2, IPPROTO_UDP, 1, 2) }, // later fragment
        ];
        let (bytes, stats) = write_pcap(&keys, None);
        assert_eq!(stats, WriteStats { packets: 5, ports_dropped: 3 });
        assert_eq!(bytes.len(), 24 + 5 * (16 + 60));
        assert_eq!(bytes[..4], [0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(bytes[16..20], 65535u32.to_le_bytes());
        assert_eq!(bytes[20..24], 1u32.to_le_bytes());
        let c = parse_capture("w.pcap", &bytes, 1).unwrap();
        assert_eq!(c.timestamps_ns, vec![0, 1_000, 2_000, 3_000, 4_000]);
        let want: Vec<FlowKey> = keys.iter().map(wire_key).collect();
        assert_eq!(c.keys, want);
        // Timestamps shorter than the keys: continue 1 µs apart.
        let (bytes, _) = write_pcap(&keys[..3], Some(&[5_000_000_000]));
        let c = parse_capture("w.pcap", &bytes, 1).unwrap();
        assert_eq!(c.timestamps_ns, vec![5_000_000_000, 5_000_001_000, 5_000_002_000]);
    }

    #[test]
    fn damaged_files_name_packet_and_offset() {
        let (bytes, _) = write_pcap(&some_keys(), None);
        // Cut 20 bytes into the data of packet 2 (record at byte 24 + 76 = 100).
        let e = parse_capture("cut.pcap", &bytes[..24 + 76 + 16 + 20], 1).unwrap_err();
        assert_eq!(e.position, crate::Position::Packet { index: 2, offset: 100 });
        assert_eq!(
            e.to_string(),
            "cut.pcap: packet 2 (byte 100): capture ends inside the packet data: the record header \
             promises 60 bytes of packet data, 20 remain"
        );
        // Cut inside the record header of packet 3.
        let e = parse_capture("cut.pcap", &bytes[..24 + 2 * 76 + 5], 1).unwrap_err().to_string();
        assert!(e.contains("packet 3 (byte 176)"), "{e}");
        assert!(e.contains("16-byte record header: 5 bytes remain"), "{e}");
        // Cut inside the file header.
        let e = parse_capture("cut.pcap", &bytes[..10], 1).unwrap_err().to_string();
        assert_eq!(e, "cut.pcap: capture ends inside the 24-byte pcap file header (10 bytes)");
        // Cut at a record boundary: fine.
        assert_eq!(parse_capture("cut.pcap", &bytes[..100], 1).unwrap().keys.len(), 1);
        // Not Ethernet.
        let mut raw = bytes.clone();
        raw[20] = 101;
        let e = parse_capture("raw.pcap", &raw, 1).unwrap_err().to_string();
        assert!(e.contains("link type 101 (RAW) is not Ethernet"), "{e}");

        // pcapng cut inside the second packet block.
        let ng = pcapng_of(&some_keys(), Endianness::Little, None);
        let epb_start = 28 + 20 + (ng.len() - 48) / 3;
        let e = parse_capture("cut.pcapng", &ng[..epb_start + 30], 1).unwrap_err();
        assert_eq!(e.position, crate::Position::Packet { index: 2, offset: epb_start as u64 });
        let e = e.to_string();
        assert!(e.contains("capture ends inside this enhanced packet block: its header promises"), "{e}");
        // pcapng with a corrupt trailer length.
        let mut bad = ng.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0x40;
        let e = parse_capture("bad.pcapng", &bad, 1).unwrap_err().to_string();
        assert!(e.contains("packet 3") && e.contains("corrupt enhanced packet block"), "{e}");
    }

    #[test]
    fn empty_garbage_and_compressed_files() {
        let e = parse_capture("e.pcap", &[], 1).unwrap_err();
        assert_eq!(e.position, crate::Position::File);
        assert_eq!(e.to_string(), "e.pcap: empty file: expected a pcap or pcapng capture");
        let e = parse_capture("s.pcap", &[0xd4, 0xc3], 1).unwrap_err().to_string();
        assert!(e.contains("2 bytes long, too short"), "{e}");
        let e = parse_capture("g.pcap", b"hello, world\n", 1).unwrap_err().to_string();
        assert!(e.starts_with("g.pcap: not a pcap or pcapng capture: the file starts with 68 65 6c 6c"), "{e}");
        let e = parse_capture("g.pcap.gz", &[0x1f, 0x8b, 8, 0, 0, 0], 1).unwrap_err().to_string();
        assert!(e.contains("gzip"), "{e}");
        let e =
            parse_capture("n.pcapng", &[0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 1, 2, 3, 4], 1).unwrap_err().to_string();
        assert!(e.contains("invalid byte-order magic 01 02 03 04"), "{e}");
        // xz-compressed captures are decompressed.
        let (bytes, _) = write_pcap(&some_keys(), None);
        let mut xz = Vec::new();
        {
            use std::io::Write as _;
            let mut enc = xz2::write::XzEncoder::new(&mut xz, 1);
            enc.write_all(&bytes).unwrap();
            enc.finish().unwrap();
        }
        assert_eq!(parse_capture("c.pcap.xz", &xz, 1).unwrap().keys.len(), 3);
    }

    #[test]
    fn read_capture_from_disk() {
        let dir = std::env::temp_dir().join(format!("rqvs-pcap-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.pcap");
        let (bytes, _) = write_pcap(&some_keys(), None);
        std::fs::write(&path, &bytes).unwrap();
        let c = read_capture(&path, 4).unwrap();
        assert_eq!(c.keys.len(), 3);
        assert!(c.keys.iter().all(|k| k.in_port == 4));
        std::fs::remove_dir_all(&dir).unwrap();
        let e = read_capture(&path, 4).unwrap_err().to_string();
        assert!(e.contains("cannot read"), "{e}");
    }
}
