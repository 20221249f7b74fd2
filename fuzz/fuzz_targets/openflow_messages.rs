//! OpenFlow message codec: `decode` never panics, and whatever decodes encodes again to bytes
//! that decode to the same message.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rqvs_openflow::{decode, encode};

fuzz_target!(|data: &[u8]| {
    if let Ok((h, m)) = decode(data) {
        let again = encode(h.version, h.xid, &m).expect("a decoded message encodes");
        assert_eq!(decode(&again).expect("an encoded message decodes").1, m);
    }
});
