//! The switch's ports as OpenFlow describes them (PORT_DESC, PORT_STATUS), and PORT_STATUS
//! itself: the channel's answer to the link watcher's [`crate::events::Event::PortStatus`].
//!
//! A port is described with its interface's real MAC address (`SIOCGIFHWADDR`; a file or
//! in-memory port, which has none, gets `02:72:71:76:PP:PP`), its state — `OFPPS_LIVE` when the
//! link is up, `OFPPS_LINK_DOWN` when it is down or the interface is gone — and, when the
//! driver reports one (ethtool), its speed (`curr_speed`/`max_speed` in kbps, the `OFPPF_*`
//! bit of that speed and duplex in `curr`/`supported`/`advertised`; a veth says 10 Gb/s full
//! duplex); no speed: `OFPPF_OTHER`, speed 0.
//!
//! PORT_STATUS (reason `OFPPR_MODIFY`, the port as PORT_DESC would describe it now) goes to
//! every connection past its HELLO that takes asynchronous messages, slaves included (OpenFlow
//! 1.3's default asynchronous configuration sends port status to every role): active
//! (`--controller`) ones always, passive ones once they set a non-zero miss_send_len (as for
//! PACKET_IN: Open vSwitch's rule for service connections, so plain `ovs-ofctl` commands get
//! none; `ovs-ofctl monitor TARGET 65535` asks for them). A port whose interface disappears is
//! kept (LINK_DOWN, re-attached when it returns): MODIFY. A port attached or removed while
//! running (`--ovsdb`, [`crate::attach`]) is reason ADD or DELETE (the removed port described
//! as it was, with its number). A
//! PORT_MOD that changes a port's configuration sends it too ([`super::port_mod`]); `config`
//! carries `PORT_DOWN` while the interface is administratively down (set so by PORT_MOD or by
//! `ip link set IF down`), as Open vSwitch reports it.

use std::sync::atomic::Ordering;

use rqvs_openflow::message::PortStatus;
use rqvs_openflow::port::{Port, PortEthernet};
use rqvs_openflow::Message;

use super::Hub;
use crate::Control;

/// `OFPPS_LINK_DOWN`, `OFPPS_LIVE`.
const OFPPS_LINK_DOWN: u32 = 1;
const OFPPS_LIVE: u32 = 4;
/// `OFPPR_ADD`, `OFPPR_DELETE`, `OFPPR_MODIFY`.
pub(crate) const OFPPR_ADD: u8 = 0;
pub(crate) const OFPPR_DELETE: u8 = 1;
const OFPPR_MODIFY: u8 = 2;
/// `OFPPF_OTHER`.
const OFPPF_OTHER: u32 = 1 << 10;

/// Every port, by its OpenFlow number ([`crate::ofports`]; `LOCAL` is 0xfffffffe on the wire).
pub(crate) fn describe(hub: &Hub) -> Vec<Port> {
    hub.control.ofports().live().map(|i| describe_one(hub, i)).collect()
}

/// Port `i` (0-based datapath index) as PORT_DESC describes it: its `config` is what PORT_MOD
/// set ([`super::port_mod`]) plus `PORT_DOWN` while the interface is administratively down.
pub(crate) fn describe_one(hub: &Hub, i: usize) -> Port {
    let control: &Control = &hub.control;
    // A removed port keeps its number here (PORT_STATUS DELETE describes it).
    let ofport = control.port_ofport(i);
    let port_no = rqvs_openflow::oxm::port_to_of(ofport).unwrap_or(ofport);
    let h = control.port(i);
    let up = h.link() == rqvs_ports::LinkState::Up;
    let ethernet = match h.speed() {
        Some((mbps, full)) => {
            let bit = speed_bit(mbps, full);
            let kbps = mbps.saturating_mul(1000);
            PortEthernet { curr: bit, advertised: 0, supported: bit, peer: 0, curr_speed: kbps, max_speed: kbps }
        }
        None => PortEthernet { curr: OFPPF_OTHER, ..PortEthernet::default() },
    };
    Port {
        port_no,
        hw_addr: h.hw_addr().unwrap_or([0x02, 0x72, 0x71, 0x76, (ofport >> 8) as u8, ofport as u8]),
        name: short_name(&control.port_name(i), ofport),
        config: control.port_config_bits(i),
        state: if up { OFPPS_LIVE } else { OFPPS_LINK_DOWN },
        ethernet: Some(ethernet),
        properties: Vec::new(),
    }
}

/// `p` as a connection of `version` is told of it: OpenFlow 1.0's own `config` bits
/// (`NO_FLOOD`, STP's) do not exist in 1.3 and 1.4 (Open vSwitch's `OFPPC11_ALL`).
pub(crate) fn for_version(mut p: Port, version: u8) -> Port {
    if version != rqvs_openflow::OFP10 {
        p.config &= !rqvs_openflow::port::OFPPC10_ONLY;
    }
    p
}

/// The `OFPPF_*` bit of a speed in Mb/s (`OFPPF_OTHER` when OpenFlow has none for it).
fn speed_bit(mbps: u32, full: bool) -> u32 {
    match (mbps, full) {
        (10, false) => 1 << 0,
        (10, true) => 1 << 1,
        (100, false) => 1 << 2,
        (100, true) => 1 << 3,
        (1000, false) => 1 << 4,
        (1000, true) => 1 << 5,
        (10_000, true) => 1 << 6,
        (40_000, true) => 1 << 7,
        (100_000, true) => 1 << 8,
        (1_000_000, true) => 1 << 9,
        _ => OFPPF_OTHER,
    }
}

/// A port's OpenFlow name (at most 15 bytes): the interface of `IFNAME:afpacket` or
/// `IFNAME:afxdp` (as OVS names a port by its interface), the file name of `pcap-in:PATH` or
/// `pcap-out:PATH`, or `pN` when that does not fit. A patch port's name (`NAME:patch=PEER`,
/// not a device, so it may be longer) is cut to 15 bytes, as OVS cuts it.
pub(crate) fn short_name(name: &str, port: u32) -> String {
    let base = match name.split_once(':') {
        Some(("pcap-in" | "pcap-out", path)) => path.rsplit('/').next().unwrap_or(""),
        Some((ifname, ty)) if ty.starts_with("patch") => {
            let mut end = ifname.len().min(15);
            while !ifname.is_char_boundary(end) {
                end -= 1;
            }
            &ifname[..end]
        }
        Some((ifname, _)) => ifname,
        None => name,
    };
    if !base.is_empty() && base.len() <= 15 && !base.contains('\0') {
        base.to_string()
    } else {
        format!("p{port}")
    }
}

/// PORT_STATUS of port `ofport` to every connection that takes it (module docs).
pub(crate) fn deliver_status(hub: &Hub, ofport: u32) {
    deliver_status_except(hub, ofport, None);
}

/// [`deliver_status`] but to connection `except` (the one whose PORT_MOD made the change).
pub(crate) fn deliver_status_except(hub: &Hub, ofport: u32, except: Option<u64>) {
    let Some(i) = hub.control.ofports().index(ofport) else { return };
    deliver_reason(hub, i, OFPPR_MODIFY, except);
}

/// PORT_STATUS with `reason` of the port at index `i` to every connection that takes it, but
/// `except`.
pub(crate) fn deliver_reason(hub: &Hub, i: usize, reason: u8, except: Option<u64>) {
    let port = describe_one(hub, i);
    for peer in hub.peers() {
        if Some(peer.id) == except {
            continue;
        }
        let v = peer.version.load(Ordering::Relaxed);
        if v == 0 || !(peer.active || peer.miss_send_len.load(Ordering::Relaxed) != 0) {
            continue;
        }
        if !peer.wants(rqvs_openflow::async_config::PORT_STATUS_MASTER, reason) {
            continue;
        }
        let msg = Message::PortStatus(PortStatus { reason, port: for_version(port.clone(), v) });
        match peer.encode_async(&msg) {
            // A connection that is gone has dropped its queue: nothing to wait for.
            Ok(bytes) => {
                let _ = peer.out.send(bytes);
            }
            Err(e) => {
                crate::log_error!("rqvs switch: openflow: cannot encode a port_status: {e} (a bug: please report it)")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speeds_map_to_their_bits() {
        assert_eq!(speed_bit(10_000, true), 1 << 6);
        assert_eq!(speed_bit(1000, false), 1 << 4);
        assert_eq!(speed_bit(25_000, true), OFPPF_OTHER);
        assert_eq!(short_name("p1:afpacket", 1), "p1");
        assert_eq!(short_name("pcap-out:/tmp/x/out2.pcap", 2), "out2.pcap");
        assert_eq!(short_name("a-very-long-interface-name:afxdp", 3), "p3");
    }
}
