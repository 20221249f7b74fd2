//! ovs-ofctl flow parser: never panics; a parsed flow that has an ofctl form re-parses to itself.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rqvs_flow::formats::ofctl;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(rules) = ofctl::parse_flows("fuzz", text) {
        if let Ok(written) = ofctl::write_flows(&rules) {
            let again = ofctl::parse_flows("fuzz-again", &written).expect("written flows parse");
            assert_eq!(rules.len(), again.len());
            for (a, b) in rules.iter().zip(&again) {
                assert_eq!((a.matches, a.priority, a.cookie, a.table), (b.matches, b.priority, b.cookie, b.table));
            }
        }
    }
});
