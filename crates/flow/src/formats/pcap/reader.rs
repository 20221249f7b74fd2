//! [`CaptureReader`]: a pcap or pcapng capture read record by record from any [`BufRead`], in
//! constant memory (one record, or one pcapng block, at a time).

use std::io::{BufRead, Read};

use pcap_file::pcapng::blocks::interface_description::{InterfaceDescriptionBlock, InterfaceDescriptionOption};
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::{Endianness, PcapError};

use super::link::{ethernet_equivalent, link_type_name, LinkType};
use super::{CaptureStats, PCAPNG_MAGIC, PCAP_MAGICS};
use crate::error::{ParseError, Result};
use crate::frame::{extract, Extract};
use crate::key::FlowKey;

const PCAP_FILE_HEADER_LEN: usize = 24;
const PCAP_RECORD_HEADER_LEN: usize = 16;
const PCAPNG_BLOCK_HEADER_LEN: usize = 12;
/// The largest pcap record or pcapng block read: far above any link's frame (tcpdump's snap
/// length is 262,144 bytes), so that a corrupt length is an error, not an allocation.
pub const MAX_RECORD_LEN: usize = 16 << 20;

/// What rqvs needs of a pcapng interface.
struct Interface {
    /// The link type number (read or not: an error names it at its first packet).
    link: u32,
    snaplen: u32,
    /// `if_tsresol`: bit 7 clear → units of 10^-n s, set → 2^-n s.
    tsresol: u8,
    /// `if_tsoffset`, seconds (signed in the specification).
    tsoffset: i64,
}

impl Interface {
    fn new(idb: &InterfaceDescriptionBlock<'_>) -> Interface {
        let mut interface = Interface { link: u32::from(idb.linktype), snaplen: idb.snaplen, tsresol: 6, tsoffset: 0 };
        for option in &idb.options {
            match option {
                InterfaceDescriptionOption::IfTsResol(r) => interface.tsresol = *r,
                InterfaceDescriptionOption::IfTsOffset(s) => interface.tsoffset = *s as i64,
                _ => {}
            }
        }
        interface
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

enum Format {
    Pcap { endianness: Endianness, ns_per_tick: u64, link: LinkType },
    PcapNg { parser: Option<PcapNgParser>, endianness: Endianness, interfaces: Vec<Interface>, last_timestamp_ns: u64 },
}

/// One frame of a capture, as its Ethernet equivalent ([`super::link`]).
#[derive(Clone, Copy, Debug)]
pub struct Frame<'a> {
    /// The Ethernet equivalent of the frame; `Err` when the frame is too short for, or
    /// contradicts, its link-layer header (the reason, as [`extract`] gives it).
    pub ethernet: std::result::Result<&'a [u8], Extract>,
    /// Nanoseconds since the Unix epoch.
    pub timestamp_ns: u64,
}

/// A pcap or pcapng capture, read as it is consumed (see the module documentation of
/// [`crate::formats::pcap`]).
pub struct CaptureReader<R> {
    name: String,
    src: R,
    /// Bytes of the (decompressed) capture consumed.
    offset: u64,
    in_port: u32,
    format: Format,
    /// The current record or block.
    buf: Vec<u8>,
    /// The Ethernet equivalent of the current frame.
    eth: Vec<u8>,
    stats: CaptureStats,
}

fn read_u32(bytes: [u8; 4], endianness: Endianness) -> u32 {
    match endianness {
        Endianness::Big => u32::from_be_bytes(bytes),
        Endianness::Little => u32::from_le_bytes(bytes),
    }
}

/// Appends up to `n` bytes of `src` to `buf`: how many there were before the end.
fn fill(src: &mut impl Read, buf: &mut Vec<u8>, n: usize) -> std::io::Result<usize> {
    let before = buf.len();
    src.take(n as u64).read_to_end(buf)?;
    Ok(buf.len() - before)
}

impl<R: BufRead> CaptureReader<R> {
    /// Reads the file header (pcap) or first section header (pcapng) of `src`; `name` names
    /// the capture in errors; keys get `in_port`.
    pub fn new(name: &str, mut src: R, in_port: u32) -> Result<CaptureReader<R>> {
        let cannot = |e: std::io::Error| ParseError::in_file(name, format!("cannot read: {e}"));
        let mut buf = Vec::with_capacity(1 << 16);
        let got = fill(&mut src, &mut buf, 4).map_err(cannot)?;
        let magic = match buf.first_chunk::<4>() {
            Some(m) => *m,
            None if got == 0 => return Err(ParseError::in_file(name, "empty file: expected a pcap or pcapng capture")),
            None => {
                return Err(ParseError::in_file(
                    name,
                    format!(
                        "file is {got} bytes long, too short for the 4-byte magic number of a pcap or pcapng capture"
                    ),
                ))
            }
        };
        let mut reader = CaptureReader {
            name: name.to_string(),
            src,
            offset: 0,
            in_port,
            format: Format::Pcap { endianness: Endianness::Little, ns_per_tick: 1_000, link: LinkType::Ethernet },
            buf,
            eth: Vec::with_capacity(1 << 16),
            stats: CaptureStats::default(),
        };
        if PCAP_MAGICS.contains(&magic) {
            reader.pcap_header(magic)?;
        } else if magic == PCAPNG_MAGIC {
            reader.format = Format::PcapNg {
                parser: None,
                endianness: Endianness::Big,
                interfaces: Vec::new(),
                last_timestamp_ns: 0,
            };
        } else {
            return Err(ParseError::in_file(
                name,
                format!(
                    "not a pcap or pcapng capture: the file starts with {:02x} {:02x} {:02x} {:02x}, \
                     expected a pcap magic number (a1 b2 c3 d4, a1 b2 3c 4d or byte-swapped) or a \
                     pcapng section header (0a 0d 0d 0a)",
                    magic[0], magic[1], magic[2], magic[3]
                ),
            ));
        }
        Ok(reader)
    }

    /// How the frames read so far were counted.
    pub fn stats(&self) -> CaptureStats {
        self.stats
    }

    /// The capture's name in errors.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn pcap_header(&mut self, magic: [u8; 4]) -> Result<()> {
        let got = 4 + fill(&mut self.src, &mut self.buf, PCAP_FILE_HEADER_LEN - 4)
            .map_err(|e| ParseError::in_file(&self.name, format!("cannot read: {e}")))?;
        let Some(h) = self.buf.first_chunk::<PCAP_FILE_HEADER_LEN>() else {
            return Err(ParseError::in_file(
                &self.name,
                format!("capture ends inside the {PCAP_FILE_HEADER_LEN}-byte pcap file header ({got} bytes)"),
            ));
        };
        let (endianness, ns_per_tick) = match magic {
            [0xa1, 0xb2, 0xc3, 0xd4] => (Endianness::Big, 1_000),
            [0xd4, 0xc3, 0xb2, 0xa1] => (Endianness::Little, 1_000),
            [0xa1, 0xb2, 0x3c, 0x4d] => (Endianness::Big, 1),
            _ => (Endianness::Little, 1),
        };
        // The low 16 bits are the link type; the upper ones may say how long an FCS is.
        let link = read_u32([h[20], h[21], h[22], h[23]], endianness) & 0xffff;
        let Some(link) = LinkType::from_number(link) else {
            return Err(ParseError::in_file(
                &self.name,
                format!("link type {} is not one rqvs reads (it reads {})", link_type_name(link), LinkType::SUPPORTED),
            ));
        };
        self.format = Format::Pcap { endianness, ns_per_tick, link };
        self.offset = PCAP_FILE_HEADER_LEN as u64;
        Ok(())
    }

    /// The next frame, as its Ethernet equivalent; `None` at the end of the capture. A damaged
    /// file is an error naming the packet and the byte offset of its record.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>> {
        let Some((link, range, timestamp_ns)) = self.next_record()? else {
            return Ok(None);
        };
        self.stats.frames += 1;
        let data = &self.buf[range];
        let ethernet = match link {
            LinkType::Ethernet => Ok(data),
            link => match ethernet_equivalent(link, data, &mut self.eth) {
                Ok(()) => Ok(&self.eth[..]),
                Err(e) => Err(e),
            },
        };
        Ok(Some(Frame { ethernet, timestamp_ns }))
    }

    /// The next frame that makes a key, with its timestamp; frames that make none are counted
    /// in [`Self::stats`] and skipped. `None` at the end of the capture.
    pub fn next_key(&mut self) -> Result<Option<(FlowKey, u64)>> {
        let in_port = self.in_port;
        loop {
            let Some(frame) = self.next_frame()? else {
                return Ok(None);
            };
            let (extracted, ts) = (frame.ethernet.map_or_else(|e| e, |f| extract(f, in_port)), frame.timestamp_ns);
            let stats = &mut self.stats;
            match extracted {
                Extract::Ipv4(key) => {
                    stats.ipv4 += 1;
                    return Ok(Some((key, ts)));
                }
                Extract::Other(key) => {
                    stats.other += 1;
                    return Ok(Some((key, ts)));
                }
                Extract::Truncated { .. } => stats.truncated += 1,
                Extract::Malformed { .. } => stats.malformed += 1,
            }
        }
    }

    /// An error at the record or block at `offset` (the first block's: the file's).
    fn at(&self, offset: u64, message: String) -> ParseError {
        if offset == 0 {
            ParseError::in_file(&self.name, message)
        } else {
            ParseError::at_packet(&self.name, self.stats.frames + 1, offset, message)
        }
    }

    /// The next packet record: its link type, where its data is in `buf`, its timestamp.
    fn next_record(&mut self) -> Result<Option<(LinkType, std::ops::Range<usize>, u64)>> {
        match self.format {
            Format::Pcap { endianness, ns_per_tick, link } => self.next_pcap_record(endianness, ns_per_tick, link),
            Format::PcapNg { .. } => self.next_pcapng_packet(),
        }
    }

    fn next_pcap_record(
        &mut self,
        endianness: Endianness,
        ns_per_tick: u64,
        link: LinkType,
    ) -> Result<Option<(LinkType, std::ops::Range<usize>, u64)>> {
        let start = self.offset;
        self.buf.clear();
        let got = fill(&mut self.src, &mut self.buf, PCAP_RECORD_HEADER_LEN)
            .map_err(|e| self.at(start, format!("cannot read: {e}")))?;
        if got == 0 {
            return Ok(None);
        }
        let Some(h) = self.buf.first_chunk::<PCAP_RECORD_HEADER_LEN>() else {
            return Err(self.at(
                start,
                format!("capture ends inside the {PCAP_RECORD_HEADER_LEN}-byte record header: {got} bytes remain"),
            ));
        };
        let u32_at = |i: usize| read_u32([h[i], h[i + 1], h[i + 2], h[i + 3]], endianness);
        let (ts_sec, ts_frac, incl_len) = (u32_at(0), u32_at(4), u32_at(8) as usize);
        if incl_len > MAX_RECORD_LEN {
            return Err(self.at(
                start,
                format!(
                    "corrupt record: the record header promises {incl_len} bytes of packet data, more than \
                     any frame ({MAX_RECORD_LEN} bytes)"
                ),
            ));
        }
        let got =
            fill(&mut self.src, &mut self.buf, incl_len).map_err(|e| self.at(start, format!("cannot read: {e}")))?;
        if got < incl_len {
            return Err(self.at(
                start,
                format!(
                    "capture ends inside the packet data: the record header promises {incl_len} bytes of packet \
                     data, {got} remain"
                ),
            ));
        }
        self.offset += (PCAP_RECORD_HEADER_LEN + incl_len) as u64;
        let timestamp_ns = u64::from(ts_sec) * 1_000_000_000 + u64::from(ts_frac) * ns_per_tick;
        Ok(Some((link, PCAP_RECORD_HEADER_LEN..PCAP_RECORD_HEADER_LEN + incl_len, timestamp_ns)))
    }

    /// Reads the next whole pcapng block into `buf` (false at the end of the file).
    fn read_block(&mut self) -> Result<bool> {
        let Format::PcapNg { endianness, .. } = self.format else { unreachable!("pcapng only") };
        let start = self.offset;
        let first = start == 0;
        // The first block's magic was read by `new`.
        if !first {
            self.buf.clear();
        }
        let want = PCAPNG_BLOCK_HEADER_LEN - self.buf.len();
        let got = fill(&mut self.src, &mut self.buf, want).map_err(|e| self.at(start, format!("cannot read: {e}")))?;
        if got == 0 && !first {
            return Ok(false);
        }
        let Some(h) = self.buf.first_chunk::<PCAPNG_BLOCK_HEADER_LEN>() else {
            return Err(self.at(
                start,
                format!(
                    "capture ends inside a block header: {} bytes remain, a block header has \
                     {PCAPNG_BLOCK_HEADER_LEN}",
                    self.buf.len()
                ),
            ));
        };
        let type_bytes = [h[0], h[1], h[2], h[3]];
        let endianness = if type_bytes == PCAPNG_MAGIC {
            match [h[8], h[9], h[10], h[11]] {
                [0x1a, 0x2b, 0x3c, 0x4d] => Endianness::Big,
                [0x4d, 0x3c, 0x2b, 0x1a] => Endianness::Little,
                bom => {
                    let message = format!(
                        "section header block has an invalid byte-order magic {:02x} {:02x} {:02x} {:02x} \
                         (expected 1a 2b 3c 4d or 4d 3c 2b 1a)",
                        bom[0], bom[1], bom[2], bom[3]
                    );
                    return Err(self.at(start, message));
                }
            }
        } else {
            endianness
        };
        let block_type = read_u32(type_bytes, endianness);
        let block_len = read_u32([h[4], h[5], h[6], h[7]], endianness) as usize;
        if !(PCAPNG_BLOCK_HEADER_LEN..=MAX_RECORD_LEN).contains(&block_len) || !block_len.is_multiple_of(4) {
            return Err(self.at(
                start,
                format!(
                    "corrupt {} block: its header gives a length of {block_len} bytes (expected a multiple of 4 \
                     from {PCAPNG_BLOCK_HEADER_LEN} to {MAX_RECORD_LEN})",
                    block_name(block_type)
                ),
            ));
        }
        let want = block_len - PCAPNG_BLOCK_HEADER_LEN;
        let got = fill(&mut self.src, &mut self.buf, want).map_err(|e| self.at(start, format!("cannot read: {e}")))?;
        if got < want {
            return Err(self.at(
                start,
                format!(
                    "capture ends inside this {} block: its header promises {block_len} bytes, {} remain",
                    block_name(block_type),
                    PCAPNG_BLOCK_HEADER_LEN + got
                ),
            ));
        }
        if let Format::PcapNg { endianness: e, .. } = &mut self.format {
            if type_bytes == PCAPNG_MAGIC {
                *e = endianness;
            }
        }
        self.offset += block_len as u64;
        Ok(true)
    }

    fn next_pcapng_packet(&mut self) -> Result<Option<(LinkType, std::ops::Range<usize>, u64)>> {
        loop {
            let start = self.offset;
            if !self.read_block()? {
                return Ok(None);
            }
            let name = self.name.clone();
            let index = self.stats.frames + 1;
            let at = |message: String| match start {
                0 => ParseError::in_file(&name, message),
                _ => ParseError::at_packet(&name, index, start, message),
            };
            let Format::PcapNg { parser, interfaces, last_timestamp_ns, endianness } = &mut self.format else {
                unreachable!("pcapng only")
            };
            let block_type =
                self.buf.first_chunk::<4>().map_or_else(String::new, |t| block_name(read_u32(*t, *endianness)));
            let Some(p) = parser else {
                let (_, p) = PcapNgParser::new(&self.buf)
                    .map_err(|e| at(describe_block_error(&format!("first {block_type}"), e)))?;
                *parser = Some(p);
                continue;
            };
            let (_, block) = p.next_block(&self.buf).map_err(|e| at(describe_block_error(&block_type, e)))?;
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
                    "{block_type} block names interface {interface_id}, but its section describes {} interface(s)",
                    interfaces.len()
                )));
            };
            let Some(link) = LinkType::from_number(interface.link) else {
                return Err(at(format!(
                    "{block_type} block is on interface {interface_id}, whose link type {} is not one rqvs reads \
                     (it reads {})",
                    link_type_name(interface.link),
                    LinkType::SUPPORTED
                )));
            };
            if let Some(raw) = raw_timestamp {
                *last_timestamp_ns = interface.timestamp_ns(raw);
            }
            // Where the packet data sits in the block (the parser borrows it from `buf`).
            let from = (data.as_ptr() as usize).wrapping_sub(self.buf.as_ptr() as usize);
            let range = from..from.saturating_add(data.len());
            if self.buf.get(range.clone()).map(<[u8]>::as_ptr) != Some(data.as_ptr()) {
                return Err(at(format!("internal error: the {block_type} block's data is not in the block")));
            }
            return Ok(Some((link, range, *last_timestamp_ns)));
        }
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

fn describe_block_error(block_type: &str, e: PcapError) -> String {
    match e {
        PcapError::IncompleteBuffer => {
            format!("corrupt {block_type} block: a field runs past the end of the block")
        }
        e => format!("corrupt {block_type} block: {e}"),
    }
}
