//! ClassBench rule parser: never panics; whatever parses writes back and re-parses to the same rules.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rqvs_flow::formats::classbench;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(rules) = classbench::parse_rules("fuzz", text) {
        let written = classbench::write_rules(&rules).expect("parsed rules have a ClassBench form");
        let again = classbench::parse_rules("fuzz-again", &written).expect("written rules parse");
        assert_eq!(rules, again);
    }
});
