//! pcap/pcapng reader and frame parser: never panic, and every frame is counted exactly once.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rqvs_flow::formats::pcap;

fuzz_target!(|data: &[u8]| {
    let _ = rqvs_flow::frame::extract(data, 1);
    if let Ok(c) = pcap::parse_capture("fuzz", data, 1) {
        let s = &c.stats;
        assert_eq!(s.frames, s.ipv4 + s.other + s.skipped());
        assert_eq!(c.keys.len(), c.timestamps_ns.len());
    }
});
