//! Captures of every link type rqvs reads: the first byte picks the link type, the rest is one
//! frame of it written into a classic pcap and into a pcapng interface of that link type. The
//! reader never panics, counts every frame once, and a frame that converts to its Ethernet
//! equivalent gives the key that Ethernet frame gives.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rqvs_flow::formats::pcap::{self, link, LinkType};

const LINKS: [LinkType; 8] = [
    LinkType::Ethernet,
    LinkType::Raw,
    LinkType::Ipv4,
    LinkType::Ipv6,
    LinkType::Null,
    LinkType::Loop,
    LinkType::LinuxSll,
    LinkType::LinuxSll2,
];

fn pcap_of(link: LinkType, frame: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for field in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, link.number()] {
        out.extend_from_slice(&field.to_le_bytes());
    }
    for field in [0u32, 0, frame.len() as u32, frame.len() as u32] {
        out.extend_from_slice(&field.to_le_bytes());
    }
    out.extend_from_slice(frame);
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, frame)) = data.split_first() else { return };
    let link = LINKS[usize::from(pick) % LINKS.len()];
    let mut eth = Vec::new();
    let expected = match link::ethernet_equivalent(link, frame, &mut eth) {
        Ok(()) => rqvs_flow::frame::extract(&eth, 1),
        Err(e) => e,
    };
    let bytes = pcap_of(link, frame);
    let c = pcap::parse_capture("fuzz", &bytes, 1).expect("one whole record");
    let s = &c.stats;
    assert_eq!(s.frames, 1);
    assert_eq!(s.frames, s.ipv4 + s.other + s.skipped());
    assert_eq!(c.keys.first(), expected.key());
    // Cut anywhere: an error or fewer frames, never a panic.
    for cut in [bytes.len() / 2, bytes.len().saturating_sub(1), 30] {
        let _ = pcap::parse_capture("fuzz", &bytes[..cut.min(bytes.len())], 1);
    }
    // The whole input as a capture of any kind.
    let _ = pcap::parse_capture("fuzz", data, 1);
});
