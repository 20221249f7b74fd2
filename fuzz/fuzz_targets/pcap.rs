//! pcap/pcapng reader and frame parser: never panic, and every frame is counted exactly once.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rqvs_flow::formats::pcap;

fuzz_target!(|data: &[u8]| {
    let _ = rqvs_flow::frame::extract(data, 1);
    // The datapath's parser (IPv6 extension headers, ND options, ARP) and the view's setters.
    let _ = rqvs_flow::frame::extract_datapath(data, 1);
    let mut copy = data.to_vec();
    if let Ok(mut f) = rqvs_flow::frame::Frame::new_checked(&mut copy[..]) {
        let _ = (f.dec_ttl(), f.dec_hop_limit(), f.set_ipv6_src(1), f.set_ipv6_dst(2));
    }
    if let Ok(c) = pcap::parse_capture("fuzz", data, 1) {
        let s = &c.stats;
        assert_eq!(s.frames, s.ipv4 + s.other + s.skipped());
        assert_eq!(c.keys.len(), c.timestamps_ns.len());
    }
});
