//! Loading the inputs of a command: rule files (ClassBench or ofctl), packet files (ClassBench
//! trace, pcap or pcapng), and the embedded default workload used when no files are given.

use std::path::Path;

use rqvs_flow::formats::{self, pcap, trace::TraceEntry};
use rqvs_flow::io::{decompress, read_bytes, text_from_bytes};
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

/// Packets from a ClassBench trace or a pcap/pcapng capture (sniffed by magic), plain or xz.
pub fn load_packets(path: Option<&Path>, in_port: u32) -> Result<Packets, Error> {
    let (name, bytes) = match path {
        Some(p) => (p.display().to_string(), read_bytes(p)?),
        None => (DEFAULT_TRACE_NAME.to_string(), decompress(DEFAULT_TRACE_NAME, DEFAULT_TRACE.to_vec())?),
    };
    Ok(packets_from_bytes(&name, bytes, in_port)?)
}

/// Packets from the (decompressed) bytes of a ClassBench trace or a pcap/pcapng capture;
/// `name` names them in errors; every packet gets `in_port`.
pub fn packets_from_bytes(name: &str, bytes: Vec<u8>, in_port: u32) -> rqvs_flow::Result<Packets> {
    if pcap::is_capture(&bytes) {
        let cap = pcap::parse_capture(name, &bytes, in_port)?;
        let entries = cap.keys.iter().map(|&k| TraceEntry::from_key(k)).collect();
        return Ok(Packets { entries, capture: Some(cap.stats) });
    }
    let text = text_from_bytes(name, bytes)?;
    let mut entries = formats::trace::parse_trace(name, &text)?;
    for e in &mut entries {
        e.key.in_port = in_port;
    }
    Ok(Packets { entries, capture: None })
}
