//! pcap and pcapng captures → [`FlowKey`]s (each frame through [`crate::frame::extract`]), and
//! keys → a classic pcap of minimal frames ([`crate::frame::build_frame`]).
//!
//! # Captures → keys ([`CaptureReader`]; [`read_capture`] and [`parse_capture`] collect them)
//!
//! Classic pcap (both byte orders, microsecond and nanosecond magics) and pcapng are told apart by
//! their magic number. A capture is read as a stream, one record (pcap) or block (pcapng) at a
//! time, in memory independent of its length; xz, gzip and zstd captures and standard input come
//! through [`crate::io::open`]. pcapng blocks are parsed by `pcap-file`'s parser. Classic pcap
//! records are taken raw: a record with `orig_len > snaplen` is fine (every capture taken with a
//! small snap length has them).
//!
//! **Link types** ([`link`]): Ethernet, RAW, IPV4, IPV6, NULL, LOOP, LINUX_SLL and LINUX_SLL2 —
//! one for a whole classic pcap, one per interface in pcapng (each interface description block
//! its own, so one file may mix them, as `tcpdump -i any` and Wireshark write them). A frame of
//! another link type than Ethernet is turned into its Ethernet equivalent first, so it gives the
//! key its Ethernet equivalent gives; what `dl_src`, `dl_dst` and `dl_type` then are is in the
//! table of [`link`] (in short: zero MACs for IP-only links, the sender's MAC as `dl_src` for the
//! cooked ones, `dl_type` from the IP version, the address family or the cooked protocol field).
//! A link type rqvs does not read is an error naming it: for a classic pcap at the file header,
//! for pcapng at the first packet on such an interface.
//!
//! A damaged *file* is an error naming the packet (1-based) and the byte offset of its record
//! ([`Position::Packet`](crate::Position::Packet)) in the decompressed stream, e.g. "the record
//! header promises 64 bytes of packet data, 20 remain"; an empty file, an unknown magic number or
//! a damaged first header is a file-level error. A record or block longer than
//! [`reader::MAX_RECORD_LEN`] is an error, not an allocation. Damaged *frames* are not errors:
//! they are skipped and counted.
//!
//! Every frame read is counted exactly once: `frames == ipv4 + other + truncated + malformed`
//! (a frame too short for its link-layer header is truncated, a raw frame whose IP version is
//! neither 4 nor 6 malformed), and the keys are the `ipv4 + other` frames that produced one, in
//! file order.
//!
//! pcapng timestamps honour each interface's `if_tsresol` (default microseconds) and `if_tsoffset`;
//! a simple packet block has no timestamp and gets the previous packet's.

use std::path::Path;

use crate::error::Result;
use crate::frame::{build_frame, MIN_FRAME_LEN};
use crate::key::FlowKey;

pub mod link;
pub mod reader;

pub use link::LinkType;
pub use reader::{CaptureReader, Frame};

pub(crate) const PCAP_MAGICS: [[u8; 4]; 4] =
    [[0xa1, 0xb2, 0xc3, 0xd4], [0xd4, 0xc3, 0xb2, 0xa1], [0xa1, 0xb2, 0x3c, 0x4d], [0x4d, 0x3c, 0xb2, 0xa1]];
pub(crate) const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
const PCAP_FILE_HEADER_LEN: usize = 24;
const PCAP_RECORD_HEADER_LEN: usize = 16;

/// True when `bytes` start like a pcap (either byte order, µs or ns) or pcapng file.
pub fn is_capture(bytes: &[u8]) -> bool {
    bytes.get(..4).is_some_and(|m| PCAP_MAGICS.iter().any(|p| p[..] == *m) || *m == PCAPNG_MAGIC)
}

/// How the frames of a capture were counted. Every frame is counted once:
/// `frames == ipv4 + other + truncated + malformed`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CaptureStats {
    /// Packet records read.
    pub frames: usize,
    /// IPv4 keys produced.
    pub ipv4: usize,
    /// Non-IPv4 keys produced (IPv6, ARP and every other ethertype: see `crate::frame`).
    pub other: usize,
    /// Frames skipped because they end inside a header ([`crate::frame::Extract::Truncated`]),
    /// the link-layer header included; a small snap length causes these.
    pub truncated: usize,
    /// Frames skipped because a header contradicts itself ([`crate::frame::Extract::Malformed`]).
    pub malformed: usize,
}

impl CaptureStats {
    /// Frames that produced no key.
    pub fn skipped(&self) -> usize {
        self.truncated + self.malformed
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

impl Capture {
    /// Every key of `reader`, held in memory.
    pub fn collect<R: std::io::BufRead>(mut reader: CaptureReader<R>) -> Result<Capture> {
        let mut capture = Capture::default();
        while let Some((key, ts)) = reader.next_key()? {
            capture.keys.push(key);
            capture.timestamps_ns.push(ts);
        }
        capture.stats = reader.stats();
        Ok(capture)
    }
}

/// Opens a pcap or pcapng capture (`-`: standard input; xz, gzip, zstd or plain) for reading
/// as a stream; the keys get `in_port`.
pub fn open_capture(path: &Path, in_port: u32) -> Result<CaptureReader<crate::io::Input>> {
    CaptureReader::new(&crate::io::display_name(path), crate::io::open(path)?, in_port)
}

/// Reads a whole pcap or pcapng capture into memory (see [`open_capture`]).
pub fn read_capture(path: &Path, in_port: u32) -> Result<Capture> {
    Capture::collect(open_capture(path, in_port)?)
}

/// Parses the bytes of a pcap or pcapng capture (xz, gzip and zstd are decompressed); `name` is
/// used in errors.
pub fn parse_capture(name: &str, bytes: &[u8], in_port: u32) -> Result<Capture> {
    if crate::io::Compression::sniff(bytes) != crate::io::Compression::None {
        let raw = crate::io::decompress(name, bytes.to_vec())?;
        return Capture::collect(CaptureReader::new(name, &raw[..], in_port)?);
    }
    Capture::collect(CaptureReader::new(name, bytes, in_port)?)
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
    /// Keys the link type cannot carry, not written (non-IP keys in a RAW, IPV4, IPV6, NULL or
    /// LOOP capture; always 0 for Ethernet and the cooked types).
    pub not_carried: usize,
}

/// Writes a classic pcap (little-endian, microsecond timestamps, snap length 65535) of one link
/// type as it goes: [`build_frame`] of every key, as the link type carries it
/// ([`link::from_ethernet`]).
///
/// Timestamps are truncated to the microsecond (seconds saturate at `u32::MAX`); a key without
/// one follows the previous packet by 1 µs (the first at 0).
pub struct PcapWriter<W> {
    out: W,
    link: LinkType,
    previous: Option<u64>,
    frame: Vec<u8>,
    stats: WriteStats,
}

impl<W: std::io::Write> PcapWriter<W> {
    /// Writes the file header.
    pub fn new(mut out: W, link: LinkType) -> std::io::Result<PcapWriter<W>> {
        let mut h = Vec::with_capacity(PCAP_FILE_HEADER_LEN);
        h.extend_from_slice(&0xa1b2_c3d4_u32.to_le_bytes());
        h.extend_from_slice(&2_u16.to_le_bytes());
        h.extend_from_slice(&4_u16.to_le_bytes());
        h.extend_from_slice(&0_i32.to_le_bytes()); // thiszone
        h.extend_from_slice(&0_u32.to_le_bytes()); // sigfigs
        h.extend_from_slice(&65535_u32.to_le_bytes()); // snaplen
        h.extend_from_slice(&link.number().to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter {
            out,
            link,
            previous: None,
            frame: Vec::with_capacity(MIN_FRAME_LEN),
            stats: WriteStats::default(),
        })
    }

    /// Writes the frame of `key`, at `timestamp_ns` (`None`: 1 µs after the previous packet).
    /// A key the link type cannot carry (not IP, for the IP-only link types) is not written
    /// and counted in [`WriteStats::not_carried`].
    pub fn write_key(&mut self, key: &FlowKey, timestamp_ns: Option<u64>) -> std::io::Result<()> {
        let ts = timestamp_ns.unwrap_or_else(|| self.previous.map_or(0, |p| p.saturating_add(1_000)));
        self.previous = Some(ts);
        let wire = key.wire();
        if (key.tp_src, key.tp_dst) != (wire.tp_src, wire.tp_dst) {
            self.stats.ports_dropped += 1;
        }
        let ethernet = build_frame(key);
        if !link::from_ethernet(self.link, &ethernet, &mut self.frame) {
            self.stats.not_carried += 1;
            return Ok(());
        }
        let secs = u32::try_from(ts / 1_000_000_000).unwrap_or(u32::MAX);
        let micros = (ts % 1_000_000_000 / 1_000) as u32;
        let len = self.frame.len() as u32;
        let mut record = [0u8; PCAP_RECORD_HEADER_LEN];
        for (i, field) in [secs, micros, len, len].into_iter().enumerate() {
            record[i * 4..i * 4 + 4].copy_from_slice(&field.to_le_bytes());
        }
        self.out.write_all(&record)?;
        self.out.write_all(&self.frame)?;
        self.stats.packets += 1;
        Ok(())
    }

    /// What was written so far.
    pub fn stats(&self) -> WriteStats {
        self.stats
    }

    /// Flushes and returns the output.
    pub fn finish(mut self) -> std::io::Result<(W, WriteStats)> {
        self.out.flush()?;
        Ok((self.out, self.stats))
    }
}

/// A classic Ethernet pcap ([`PcapWriter`]) holding [`build_frame`] of every key, in memory;
/// `timestamps_ns[i]` is the time of `keys[i]` (without them, or past their end, packets follow
/// each other 1 µs apart).
pub fn write_pcap(keys: &[FlowKey], timestamps_ns: Option<&[u64]>) -> (Vec<u8>, WriteStats) {
    let out = Vec::with_capacity(PCAP_FILE_HEADER_LEN + keys.len() * (PCAP_RECORD_HEADER_LEN + MIN_FRAME_LEN));
    let mut w = PcapWriter::new(out, LinkType::Ethernet).expect("writing to memory");
    for (i, key) in keys.iter().enumerate() {
        w.write_key(key, timestamps_ns.and_then(|t| t.get(i)).copied()).expect("writing to memory");
    }
    w.finish().expect("writing to memory")
}

#[cfg(test)]
mod tests;
