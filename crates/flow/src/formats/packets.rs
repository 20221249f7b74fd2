//! Packet inputs of either kind — a ClassBench trace or a pcap/pcapng capture, told apart by the
//! capture magic numbers — read as a stream ([`PacketReader`]), in memory independent of their
//! length. `-` is standard input; xz, gzip and zstd are decompressed ([`crate::io::open`]).

use std::io::Read;
use std::path::Path;

use crate::error::Result;
use crate::formats::pcap::{self, CaptureReader, CaptureStats};
use crate::formats::trace::{TraceEntry, TraceReader};
use crate::io::Input;

/// The stream a [`PacketReader`] reads: the bytes it looked at to tell the kind, then the rest.
type Stream = std::io::Chain<std::io::Cursor<Vec<u8>>, Input>;

/// One packet of a trace or capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    pub entry: TraceEntry,
    /// Capture time, nanoseconds since the Unix epoch (ClassBench traces have none).
    pub timestamp_ns: Option<u64>,
}

/// A ClassBench trace or a capture, read packet by packet.
pub enum PacketReader {
    Capture(CaptureReader<Stream>),
    Trace(TraceReader<Stream>),
}

impl PacketReader {
    /// Opens `path` (`-`: standard input); every packet gets `in_port`.
    pub fn open(path: &Path, in_port: u32) -> Result<PacketReader> {
        PacketReader::new(&crate::io::display_name(path), crate::io::open(path)?, in_port)
    }

    /// Reads packets from `input` (already decompressed); `name` names it in errors.
    pub fn new(name: &str, mut input: Input, in_port: u32) -> Result<PacketReader> {
        let mut head = Vec::with_capacity(4);
        (&mut input)
            .take(4)
            .read_to_end(&mut head)
            .map_err(|e| crate::ParseError::in_file(name, format!("cannot read: {e}")))?;
        let capture = pcap::is_capture(&head);
        let stream = std::io::Cursor::new(head).chain(input);
        Ok(if capture {
            PacketReader::Capture(CaptureReader::new(name, stream, in_port)?)
        } else {
            PacketReader::Trace(TraceReader::new(name, stream).with_in_port(in_port))
        })
    }

    /// The next packet; `None` at the end.
    pub fn next_packet(&mut self) -> Result<Option<Packet>> {
        Ok(match self {
            PacketReader::Capture(c) => {
                c.next_key()?.map(|(key, ts)| Packet { entry: TraceEntry::from_key(key), timestamp_ns: Some(ts) })
            }
            PacketReader::Trace(t) => t.next_entry()?.map(|entry| Packet { entry, timestamp_ns: None }),
        })
    }

    /// Capture statistics so far, for a capture.
    pub fn capture_stats(&self) -> Option<CaptureStats> {
        match self {
            PacketReader::Capture(c) => Some(c.stats()),
            PacketReader::Trace(_) => None,
        }
    }
}

impl Iterator for PacketReader {
    type Item = Result<Packet>;

    fn next(&mut self) -> Option<Result<Packet>> {
        self.next_packet().transpose()
    }
}
