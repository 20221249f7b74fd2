//! The `NORMAL` action's MAC learning on the running switch (root: veths between private
//! namespaces; skipped otherwise, a failure with `RQVS_REQUIRE_NETNS=1`), with a short aging
//! time: a station idle past the aging time is flooded to again, one that keeps sending is not;
//! the same address on two VLANs is learned separately, each VLAN's frames going to its own
//! port.

use std::time::Duration;

use rqvs_datapath::DesignKind;
use rqvs_flow::formats::ofctl;
use rqvs_ports::testnet::{self, RawSocket};
use rqvs_switch::{PortSource, Switch, SwitchConfig};

mod common;
use common::{Topo, PORTS};

const QUIET: Duration = Duration::from_millis(300);

fn mac(last: u8) -> [u8; 6] {
    [0x02, 0x00, 0x00, 0x00, 0x00, last]
}

/// An Ethernet frame from `src` to `dst`, tagged with `vid` when it is not 0, `n` in its payload.
fn frame(src: [u8; 6], dst: [u8; 6], vid: u16, n: u8) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    if vid != 0 {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&vid.to_be_bytes());
    }
    f.extend_from_slice(&[0x88, 0xb5]); // local experimental ethertype
    f.extend_from_slice(&[n; 50]);
    f
}

struct Rig {
    socks: Vec<RawSocket>,
    sw: Option<Switch>,
    _topo: Topo,
}

impl Rig {
    fn new(tag: &str, aging: Duration) -> Rig {
        let topo = Topo::new(tag, 1);
        let socks: Vec<RawSocket> = (1..=PORTS as usize).map(|p| topo.host_socket(p)).collect();
        let rules = ofctl::parse_flows("flows", "priority=0,actions=NORMAL\n").unwrap();
        let ports: Vec<PortSource> =
            (1..=PORTS).map(|p| PortSource::Spec(format!("p{p}:afpacket").parse().unwrap())).collect();
        let mut cfg = SwitchConfig::new(ports, rules, DesignKind::Orig);
        cfg.mac_aging = aging;
        let sw = topo.sw.run(move || Switch::start(cfg)).unwrap().unwrap();
        Rig { socks, sw: Some(sw), _topo: topo }
    }

    /// Sends `f` into port `port`; which ports it leaves by (1-based, sorted).
    fn send(&self, port: usize, f: &[u8]) -> Vec<usize> {
        self.socks[port - 1].send(f).unwrap();
        let mut out = Vec::new();
        for (i, s) in self.socks.iter().enumerate() {
            let got = s.drain(QUIET).unwrap();
            // Only our frame counts (the kernel may send its own, e.g. IPv6 router solicitations).
            if got.iter().any(|g| g[12..] == f[12..] && g[..12] == f[..12]) {
                out.push(i + 1);
            }
        }
        out
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if let Some(sw) = self.sw.take() {
            let report = sw.stop().unwrap();
            assert!(report.balanced(), "{}", report.format());
        }
    }
}

#[test]
fn an_idle_station_ages_out_and_is_flooded_to_again() {
    if !testnet::available("an_idle_station_ages_out_and_is_flooded_to_again") {
        return;
    }
    let rig = Rig::new("nage", Duration::from_secs(2));
    let (a, b) = (mac(0xa), mac(0xb));
    assert_eq!(rig.send(1, &frame(a, b, 0, 1)), vec![2, 3], "B unknown: flooded");
    assert_eq!(rig.send(2, &frame(b, a, 0, 2)), vec![1], "A learned on port 1");
    // A stays silent past the aging time (B's frames go on: they refresh B, not A).
    std::thread::sleep(Duration::from_millis(2200));
    assert_eq!(rig.send(2, &frame(b, a, 0, 3)), vec![1, 3], "A aged out: flooded to again");
    assert_eq!(rig.send(1, &frame(a, b, 0, 4)), vec![2], "B, seen 0.3 s ago, is still known");
    assert_eq!(rig.send(2, &frame(b, a, 0, 5)), vec![1], "A relearned by its frame");
}

#[test]
fn one_address_on_two_vlans_is_learned_separately() {
    if !testnet::available("one_address_on_two_vlans_is_learned_separately") {
        return;
    }
    let rig = Rig::new("nvlan", Duration::from_secs(300));
    let (a, b) = (mac(0xa), mac(0xb));
    // A on VLAN 10 behind port 1, on VLAN 20 behind port 3.
    assert_eq!(rig.send(1, &frame(a, b, 10, 1)), vec![2, 3]);
    assert_eq!(rig.send(3, &frame(a, b, 20, 2)), vec![1, 2]);
    assert_eq!(rig.send(2, &frame(b, a, 10, 3)), vec![1], "VLAN 10: A is on port 1");
    assert_eq!(rig.send(2, &frame(b, a, 20, 4)), vec![3], "VLAN 20: A is on port 3");
    assert_eq!(rig.send(2, &frame(b, a, 0, 5)), vec![1, 3], "untagged: A unknown, flooded");
    assert_eq!(rig.send(2, &frame(b, a, 30, 6)), vec![1, 3], "VLAN 30: A unknown, flooded");
}
