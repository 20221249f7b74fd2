//! What the offline switch tests share (`tests/exact.rs`, `tests/attack.rs`): reading back what a
//! pcap-out port wrote. Apart from `common/mod.rs`, which the CLI's tests include too.

/// The frames a pcap-out port wrote, sorted.
pub fn read_pcap(path: &std::path::Path) -> Vec<Vec<u8>> {
    let mut r = pcap_file::pcap::PcapReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut v = Vec::new();
    while let Some(p) = r.next_packet() {
        v.push(p.unwrap().data.into_owned());
    }
    v.sort();
    v
}
