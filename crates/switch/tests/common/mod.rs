//! What the switch's integration tests share: the three-port veth topology between private
//! namespaces ([`Topo`]), a seeded generator ([`Rng`]) and the independent interpreter of OpenFlow action lists that says
//! which frames a packet must leave the switch as ([`outputs`]).
//!
//! `tests/exact.rs` declares this module directly; `tests/churn/mod.rs` (the rule-change
//! scenario of `tests/updates.rs`, also included by the CLI's `tests/switch_faults.rs`)
//! includes it by path, so every test that checks the switch's output against its rules uses
//! the same interpreter and the same topology.
#![allow(dead_code)]

use std::time::Duration;

use rqvs_flow::frame::{push_vlan, strip_vlan, Frame};
use rqvs_flow::Action;
use rqvs_ports::testnet::{Netns, RawSocket};

/// The switch's ports in every topology here: 1..=PORTS.
pub const PORTS: u32 = 3;

/// A deterministic xorshift, so failures reproduce.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The copies, `(port, bytes)` in the order the actions make them, that a frame entering on
/// `in_port` leaves the switch as under `actions` (its winning rule's): the OpenFlow action list
/// interpreted on its own, independently of the switch's executor and op lists.
///
/// Every action the switch executes: `output:N` (not back to the input port; no such port: no
/// copy), `in_port`, `all`/`flood` (every port but the input), `drop`, `controller` (no copy on
/// a port), `mod_dl_src/dst`, `mod_vlan_vid` (rewrites a tag, or pushes one), `strip_vlan`,
/// `mod_nw_tos`, `dec_ttl` (the packet dies at TTL 0 or 1: no copies from there on; IPv6's
/// traffic class and hop limit too) — the IPv4 ones as OVS 3.1 commits them (tests/ovs_frames.rs checks that against OVS): a damaged IPv4
/// header's TTL is 0, and a protocol-0 packet's IPv4 bytes are never written, its TTL counted
/// down all the same.
pub fn outputs(frame: &[u8], in_port: u32, actions: &[Action]) -> Vec<(u32, Vec<u8>)> {
    let mut f = frame.to_vec();
    let mut out = Vec::new();
    let mut ttl = None;
    let mut emit = |p: u32, f: &[u8]| {
        if (1..=PORTS).contains(&p) {
            out.push((p, f.to_vec()));
        }
    };
    for a in actions {
        match a {
            Action::Output(p) if *p != in_port => emit(*p, &f),
            Action::Output(_) | Action::Drop | Action::Controller(_) | Action::Other(_) => {}
            // Its outputs depend on the MAC table's history: the rules these tests check do
            // not use it (tests/normal.rs checks NORMAL on its own).
            Action::Normal => panic!("outputs: NORMAL depends on learned addresses; not interpreted here"),
            a @ (Action::SetField { .. }
            | Action::PushVlan(_)
            | Action::Resubmit { .. }
            | Action::Group(_)
            | Action::Meter(_)
            | Action::ClearActions
            | Action::WriteActions(_)
            | Action::WriteMetadata { .. }
            | Action::GotoTable(_)) => panic!("outputs: '{a}' is not executed by the switch yet"),
            Action::InPort => emit(in_port, &f),
            Action::All | Action::Flood => (1..=PORTS).filter(|&p| p != in_port).for_each(|p| emit(p, &f)),
            Action::SetDlSrc(m) => f[6..12].copy_from_slice(m),
            Action::SetDlDst(m) => f[0..6].copy_from_slice(m),
            Action::SetVlanVid(v) => {
                if !Frame::new_checked(&mut f[..]).unwrap().set_vlan_vid(*v) {
                    push_vlan(&mut f, *v);
                }
            }
            Action::StripVlan => {
                strip_vlan(&mut f);
            }
            Action::SetNwTos(t) => {
                let mut fr = Frame::new_checked(&mut f[..]).unwrap();
                let ipv6 = !fr.layout().is_ipv4 && fr.layout().ipv6.is_some();
                if ipv6 || fr.nw_proto().is_some_and(|p| p != 0) {
                    fr.set_nw_tos(*t);
                }
            }
            Action::DecTtl => {
                let mut fr = Frame::new_checked(&mut f[..]).unwrap();
                if !fr.layout().is_ipv4 && fr.layout().ipv6.is_some() {
                    // IPv6: the hop limit.
                    let now: u8 = ttl.or(fr.hop_limit()).unwrap_or(0);
                    if now <= 1 {
                        break;
                    }
                    ttl = Some(now - 1);
                    fr.dec_hop_limit();
                } else if fr.layout().is_ipv4 {
                    let now: u8 = ttl.or(fr.nw_ttl()).unwrap_or(0);
                    if now <= 1 {
                        break;
                    }
                    ttl = Some(now - 1);
                    if fr.nw_proto().is_some_and(|p| p != 0) {
                        fr.dec_ttl();
                    }
                }
            }
        }
    }
    out
}

/// The switch's namespace (ports `p1..p3`) and three hosts (`hN` holds `eN`, the peer of `pN`),
/// with `queues` queues per veth. Frames go only over these veths; dropping the `Topo` deletes
/// the namespaces (and with them the veths), also when a test fails.
pub struct Topo {
    pub sw: Netns,
    pub hosts: Vec<Netns>,
}

impl Topo {
    /// Namespaces `rqvs-TAG-sw-…` and `rqvs-TAG-hN-…`, every veth up with carrier.
    pub fn new(tag: &str, queues: usize) -> Topo {
        let sw = Netns::new(&format!("{tag}-sw")).unwrap();
        let hosts: Vec<Netns> = (1..=PORTS).map(|i| Netns::new(&format!("{tag}-h{i}")).unwrap()).collect();
        for (i, h) in hosts.iter().enumerate() {
            let (p, e) = (format!("p{}", i + 1), format!("e{}", i + 1));
            sw.veth(&p, h, &e, queues).unwrap();
            sw.wait_running(&p, Duration::from_secs(3)).unwrap();
            h.wait_running(&e, Duration::from_secs(3)).unwrap();
        }
        Topo { sw, hosts }
    }

    /// A raw socket on `eN` (N = `port`).
    pub fn host_socket(&self, port: usize) -> RawSocket {
        let e = format!("e{port}");
        self.hosts[port - 1].run(move || RawSocket::open(&e)).unwrap().unwrap()
    }
}
