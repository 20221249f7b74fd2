//! Loading the inputs of a command: rule files (ClassBench or ofctl), packet files (ClassBench
//! trace, pcap or pcapng), and the embedded default workload used when no files are given.
//!
//! Packet files are streams ([`open_packets`]): what reads them packet by packet runs in memory
//! independent of their length. What must hold every packet ([`load_packets`]) holds at most
//! [`MAX_HELD_PACKETS`].

use std::path::Path;

use rqvs_flow::formats::packets::PacketReader;
use rqvs_flow::formats::{self, pcap, trace::TraceEntry};
use rqvs_flow::io::{decompress, text_from_bytes};
use rqvs_flow::key::NarrowKey;
use rqvs_flow::{Rule, RuleId};

use crate::Error;

/// ClassBench acl1 with 927 rules and its 9,328-header trace, shipped in the repository.
const DEFAULT_RULES: &[u8] = include_bytes!("../data/acl1_1k_rules.xz");
const DEFAULT_TRACE: &[u8] = include_bytes!("../data/acl1_1k_trace.xz");
pub const DEFAULT_RULES_NAME: &str = "<default: ClassBench acl1_1k>";
pub const DEFAULT_TRACE_NAME: &str = "<default: ClassBench acl1_1k trace>";

/// Packets to classify, with what the input said about them.
pub struct Packets {
    pub entries: Vec<TraceEntry>,
    /// Capture statistics when the input was a pcap/pcapng file.
    pub capture: Option<pcap::CaptureStats>,
}

pub fn load_rules(path: Option<&Path>) -> Result<Vec<Rule>, Error> {
    match path {
        Some(p) => Ok(formats::read_rules(p)?),
        None => {
            let text = text_from_bytes(DEFAULT_RULES_NAME, decompress(DEFAULT_RULES_NAME, DEFAULT_RULES.to_vec())?)?;
            Ok(formats::parse_rules(DEFAULT_RULES_NAME, &text)?)
        }
    }
}

/// The most packets a command that holds every packet in memory ([`load_packets`]) holds, about
/// 500 MB of them; the streaming commands (`replay`, `compare`, `convert trace`, `gen map`) have
/// no such limit.
pub const MAX_HELD_PACKETS: usize = 10_000_000;

/// Opens a ClassBench trace or a pcap/pcapng capture (told apart by magic; plain, xz, gzip or
/// zstd; `-`: standard input) as a stream; without a path, the embedded default trace. Every
/// packet gets `in_port`.
pub fn open_packets(path: Option<&Path>, in_port: u32) -> Result<PacketReader, Error> {
    Ok(match path {
        Some(p) => PacketReader::open(p, in_port)?,
        None => PacketReader::new(
            DEFAULT_TRACE_NAME,
            rqvs_flow::io::decoder(DEFAULT_TRACE_NAME, std::io::Cursor::new(DEFAULT_TRACE))?,
            in_port,
        )?,
    })
}

/// Every packet of a ClassBench trace or a pcap/pcapng capture ([`open_packets`]), held in
/// memory: at most [`MAX_HELD_PACKETS`].
pub fn load_packets(path: Option<&Path>, in_port: u32) -> Result<Packets, Error> {
    let name = path.map_or(DEFAULT_TRACE_NAME.to_string(), rqvs_flow::io::display_name);
    Ok(collect_packets(&name, open_packets(path, in_port)?)?)
}

/// Every packet of `reader`, at most [`MAX_HELD_PACKETS`]; `name` names it in errors.
pub fn collect_packets(name: &str, mut reader: PacketReader) -> rqvs_flow::Result<Packets> {
    let mut entries = Vec::new();
    while let Some(p) = reader.next_packet()? {
        if entries.len() == MAX_HELD_PACKETS {
            return Err(rqvs_flow::ParseError::in_file(
                name,
                format!(
                    "more than {MAX_HELD_PACKETS} packets, the limit of a command that holds every packet in \
                     memory; sample the input (replay, compare, convert trace and gen map stream it)"
                ),
            ));
        }
        entries.push(p.entry);
    }
    Ok(Packets { entries, capture: reader.capture_stats() })
}

/// Packets from the bytes of a ClassBench trace or a pcap/pcapng capture (compressed or not);
/// `name` names them in errors; every packet gets `in_port`.
pub fn packets_from_bytes(name: &str, bytes: Vec<u8>, in_port: u32) -> rqvs_flow::Result<Packets> {
    let input = rqvs_flow::io::decoder(name, std::io::Cursor::new(bytes))?;
    collect_packets(name, PacketReader::new(name, input, in_port)?)
}

/// Where a command that reads its packets more than once gets them, pass after pass: read
/// through once by [`PacketSource::count`], then held in memory when short (or when it cannot
/// be read again: standard input), else read from the file again on every pass.
#[derive(Clone)]
pub struct PacketSource {
    held: Option<std::sync::Arc<Held>>,
    path: Option<std::path::PathBuf>,
    in_port: u32,
}

/// What [`PacketSource::count`] found.
pub struct Counted {
    pub source: PacketSource,
    /// Packets in one pass.
    pub packets: u64,
    /// How the capture's frames were counted, for a capture.
    pub capture: Option<pcap::CaptureStats>,
}

impl PacketSource {
    /// Reads the packets of `path` (`None`: the embedded trace) once: their number, and the
    /// source to read them from again — held when they fit in `hold_bytes` ([`Held`]: 48 bytes
    /// a packet while every key is narrow, 128 else; the embedded trace and standard input
    /// always are, up to [`MAX_HELD_PACKETS`]).
    pub fn count(path: Option<&Path>, in_port: u32, hold_bytes: usize) -> Result<Counted, Error> {
        let mut reader = open_packets(path, in_port)?;
        let stdin = path.is_some_and(rqvs_flow::io::is_stdin);
        let must_hold = stdin || path.is_none();
        let mut held: Option<Held> = Some(Held::Narrow(Vec::new()));
        let mut packets: u64 = 0;
        while let Some(p) = reader.next_packet()? {
            packets += 1;
            if let Some(h) = &mut held {
                let room = if must_hold { h.len() < MAX_HELD_PACKETS } else { h.bytes_with(&p.entry) <= hold_bytes };
                if room {
                    h.push(p.entry);
                } else if must_hold {
                    let name = path.map_or(DEFAULT_TRACE_NAME.to_string(), rqvs_flow::io::display_name);
                    return Err(Error(format!(
                        "{name}: more than {MAX_HELD_PACKETS} packets; standard input can be read only once, so it is \
                         held in memory: give a file, which is read again instead"
                    )));
                } else {
                    held = None;
                }
            }
        }
        let source = PacketSource { held: held.map(std::sync::Arc::new), path: path.map(Path::to_path_buf), in_port };
        Ok(Counted { source, packets, capture: reader.capture_stats() })
    }

    /// True when the packets are held in memory.
    pub fn is_held(&self) -> bool {
        self.held.is_some()
    }

    /// A pass over the packets.
    pub fn open(&self) -> Result<PacketPass, Error> {
        Ok(match &self.held {
            Some(h) => PacketPass::Held(h.clone(), 0),
            None => PacketPass::Stream(Box::new(open_packets(self.path.as_deref(), self.in_port)?)),
        })
    }
}

/// Packets held in memory: as [`NarrowEntry`]s (48 bytes a packet) while every packet's key is
/// narrow — a 5-tuple trace, what OVS's miniflow would store — else as whole entries (128
/// bytes). Held narrow, a ClassBench trace of a million packets takes the 48 MiB it took before
/// the key was widened; the passes read memory, not the file (re-parsing a file between the
/// batches would evict the caches the PMD's structures live in).
pub enum Held {
    Narrow(Vec<NarrowEntry>),
    Wide(Vec<TraceEntry>),
}

/// A [`TraceEntry`] whose key is narrow, stored as its [`NarrowKey`].
#[derive(Clone, Copy)]
pub struct NarrowEntry {
    key: NarrowKey,
    flags_column: u32,
    /// The intended rule, `u32::MAX` for none.
    intended: u32,
}

impl NarrowEntry {
    fn of(e: &TraceEntry) -> Option<NarrowEntry> {
        let intended = match e.intended {
            None => u32::MAX,
            Some(RuleId(u32::MAX)) => return None,
            Some(RuleId(id)) => id,
        };
        Some(NarrowEntry { key: e.key.narrow()?, flags_column: e.flags_column, intended })
    }

    fn entry(&self) -> TraceEntry {
        TraceEntry {
            key: self.key.widen(),
            flags_column: self.flags_column,
            intended: (self.intended != u32::MAX).then_some(RuleId(self.intended)),
        }
    }
}

impl Held {
    /// Packets held.
    pub fn len(&self) -> usize {
        match self {
            Held::Narrow(v) => v.len(),
            Held::Wide(v) => v.len(),
        }
    }

    /// True when no packet is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes the held packets take with `e` added.
    fn bytes_with(&self, e: &TraceEntry) -> usize {
        let n = self.len() + 1;
        match self {
            Held::Narrow(_) if NarrowEntry::of(e).is_some() => n * std::mem::size_of::<NarrowEntry>(),
            _ => n * std::mem::size_of::<TraceEntry>(),
        }
    }

    /// Adds a packet (the first wide one turns the narrow store into a wide one).
    fn push(&mut self, e: TraceEntry) {
        match self {
            Held::Narrow(v) => match NarrowEntry::of(&e) {
                Some(n) => v.push(n),
                None => {
                    let mut wide: Vec<TraceEntry> = v.iter().map(NarrowEntry::entry).collect();
                    wide.push(e);
                    *self = Held::Wide(wide);
                }
            },
            Held::Wide(v) => v.push(e),
        }
    }

    /// The packet at `i`.
    #[inline]
    pub fn get(&self, i: usize) -> Option<TraceEntry> {
        match self {
            Held::Narrow(v) => v.get(i).map(NarrowEntry::entry),
            Held::Wide(v) => v.get(i).copied(),
        }
    }
}

/// One pass over a [`PacketSource`].
pub enum PacketPass {
    Held(std::sync::Arc<Held>, usize),
    Stream(Box<PacketReader>),
}

impl PacketPass {
    /// The next packet; `None` at the end of the pass.
    pub fn next_entry(&mut self) -> Result<Option<TraceEntry>, Error> {
        Ok(match self {
            PacketPass::Held(h, at) => {
                let e = h.get(*at);
                *at += 1;
                e
            }
            PacketPass::Stream(r) => r.next_packet()?.map(|p| p.entry),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_flow::FlowKey;

    /// Held packets come back as they went in: narrow ones from the 48-byte store, and all of
    /// them once a wide packet turns the store wide; the byte count follows the form.
    #[test]
    fn held_packets_keep_their_entries_in_either_form() {
        let narrow =
            |i: u32| TraceEntry { key: FlowKey::ipv4(i, 2, 6, 3, 4), flags_column: i, intended: Some(RuleId(i)) };
        let mut h = Held::Narrow(Vec::new());
        let mut entries = Vec::new();
        for i in 0..3 {
            assert_eq!(h.bytes_with(&narrow(i)), (i as usize + 1) * std::mem::size_of::<NarrowEntry>());
            h.push(narrow(i));
            entries.push(narrow(i));
        }
        let none = TraceEntry { intended: None, ..narrow(9) };
        h.push(none);
        entries.push(none);
        assert!(matches!(h, Held::Narrow(_)));
        let wide = TraceEntry::from_key(FlowKey::ipv6(1, 2, 17, 5, 6));
        assert_eq!(h.bytes_with(&wide), 5 * std::mem::size_of::<TraceEntry>());
        h.push(wide);
        entries.push(wide);
        assert!(matches!(h, Held::Wide(_)));
        let back: Vec<TraceEntry> = (0..h.len()).map(|i| h.get(i).expect("held")).collect();
        assert_eq!(back, entries);
        assert!(h.get(5).is_none());
    }
}
