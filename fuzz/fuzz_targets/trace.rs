//! ClassBench trace parser: never panics; whatever parses writes back and re-parses identically.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rqvs_flow::formats::trace;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(entries) = trace::parse_trace("fuzz", text) {
        let again = trace::parse_trace("fuzz-again", &trace::write_trace(&entries)).expect("written trace parses");
        assert_eq!(entries, again);
    }
});
