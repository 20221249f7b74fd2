//! Loading the inputs of a command: rule files (ClassBench or ofctl), packet files (ClassBench
//! trace, pcap or pcapng), and the embedded default workload used when no files are given.
//!
//! Packet files are streams ([`open_packets`]): what reads them packet by packet runs in memory
//! independent of their length. What must hold every packet ([`load_packets`]) holds at most
//! [`MAX_HELD_PACKETS`].

use std::path::Path;

use rqvs_flow::formats::{self, pcap, trace::TraceEntry};
use rqvs_flow::formats::packets::PacketReader;
use rqvs_flow::io::{decompress, text_from_bytes};
use rqvs_flow::Rule;

use crate::Error;

/// ClassBench acl1 with 927 rules and its 9,328-header trace, shipped in the repository.
const DEFAULT_RULES: &[u8] = include_bytes!("../../../data/default/acl1_1k_rules.xz");
const DEFAULT_TRACE: &[u8] = include_bytes!("../../../data/default/acl1_1k_trace.xz");
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
            let text =
                text_from_bytes(DEFAULT_RULES_NAME, decompress(DEFAULT_RULES_NAME, DEFAULT_RULES.to_vec())?)?;
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
