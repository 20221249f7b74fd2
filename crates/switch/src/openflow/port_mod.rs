//! PORT_MOD (OpenFlow 1.0, 1.3, 1.4; `ovs-ofctl [-O OpenFlow13] mod-port SOCK PORT up|down|
//! packet-in|no-packet-in|...`), with Open vSwitch's semantics (`ofproto.c`'s `port_mod_start`
//! and `update_port_config`):
//!
//! - an unknown port is `OFPPMFC_BAD_PORT`; a hardware address other than the port's
//!   (PORT_DESC's) is `OFPPMFC_BAD_HW_ADDR`;
//! - the `config` bits under `mask` that differ from the port's are changed: `PORT_DOWN` sets
//!   the **interface** administratively down (or up), as OVS does — so the kernel stops
//!   receiving and sending on it (a frame output to it counts in the port's `tx_dropped`, as
//!   with `ip link set IF down`), the link watcher sees the change and reports LINK_DOWN; when
//!   the interface cannot be changed (a file port has none; the kernel refuses) the bit stays
//!   as it was, logged, and the PORT_MOD is not an error (OVS likewise);
//! - `NO_PACKET_IN` is kept per port and reported. In Open vSwitch it only stops the packet-ins
//!   of the implicit table miss of OpenFlow 1.0 tables (its "miss rule"); a flow's explicit
//!   `controller` action still sends them (checked against OVS 3.1: `mod-port p1 no-packet-in`
//!   then a frame to `in_port=1,actions=controller` — the packet-in comes). rqvs has no
//!   implicit miss to the controller (a miss drops), so the bit changes nothing in forwarding,
//!   as in OVS with explicit flows;
//! - `NO_FLOOD` (1.0), `NO_FWD` and `NO_RECV` are **not built** (they need the translation to
//!   skip the port, which megaflows cache): refused with `OFPPMFC_BAD_CONFIG`, logged, the
//!   port unchanged; STP's bits likewise. `advertise` is ignored (veths and taps have nothing
//!   to negotiate), as OVS does for a netdev that cannot change it;
//! - a change sends PORT_STATUS (reason MODIFY, the port as PORT_DESC says it now) to every
//!   other connection that takes port status — not to the one that sent the PORT_MOD, as OVS
//!   does below OpenFlow 1.5.
//!
//! The port's configuration is PORT_DESC's, FEATURES_REPLY's (1.0) and PORT_STATUS's `config`:
//! the bits kept here plus `PORT_DOWN` whenever the interface is administratively down, however
//! it got there (`ip link set IF down` too, as OVS reports it).

use rqvs_openflow::async_config::{PortMod, OFPPC_NO_PACKET_IN, OFPPC_PORT_DOWN};
use rqvs_openflow::OfError;

use super::{Hub, Peer};

/// The `OFPPC_*` bits a PORT_MOD may change.
const SUPPORTED: u32 = OFPPC_PORT_DOWN | OFPPC_NO_PACKET_IN;

/// Names of the `OFPPC_*` bits, for the logs.
fn bit_names(bits: u32) -> String {
    let names = [
        (1, "PORT_DOWN"),
        (2, "NO_STP"),
        (4, "NO_RECV"),
        (8, "NO_RECV_STP"),
        (16, "NO_FLOOD"),
        (32, "NO_FWD"),
        (64, "NO_PACKET_IN"),
    ];
    let mut v: Vec<String> = names.iter().filter(|(b, _)| bits & b != 0).map(|(_, n)| (*n).to_string()).collect();
    let rest = bits & !0x7f;
    if rest != 0 {
        v.push(format!("{rest:#x}"));
    }
    v.join(" ")
}

/// Applies `pm` from connection `me` (module docs); the error to answer with, and why.
pub(crate) fn apply(hub: &Hub, me: &Peer, pm: &PortMod) -> Result<(), (OfError, String)> {
    // The OpenFlow number (1.3's 32-bit reserved ports folded to 16 bits: LOCAL is 0xfffe)
    // to the datapath's index ([`crate::ofports`]).
    let ofport = rqvs_openflow::oxm::port_from_of(pm.port_no).unwrap_or(pm.port_no);
    let Some(i) = hub.control.ofports().index(ofport) else {
        return Err((OfError::PORT_MOD_FAILED_BAD_PORT, format!("port {} does not exist", pm.port_no)));
    };
    let now = super::ports::describe_one(hub, i);
    if now.hw_addr != pm.hw_addr {
        let mac = |m: [u8; 6]| m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
        return Err((
            OfError::PORT_MOD_FAILED_BAD_HW_ADDR,
            format!(
                "port {}: hardware address {} is not the port's ({})",
                pm.port_no,
                mac(pm.hw_addr),
                mac(now.hw_addr)
            ),
        ));
    }
    let toggle = (pm.config ^ now.config) & pm.mask;
    let unsupported = toggle & !SUPPORTED;
    if unsupported != 0 {
        return Err((
            OfError::PORT_MOD_FAILED_BAD_CONFIG,
            format!("port {}: {} is not supported by rqvs", pm.port_no, bit_names(unsupported)),
        ));
    }
    let mut changed = false;
    if toggle & OFPPC_PORT_DOWN != 0 {
        let down = pm.config & OFPPC_PORT_DOWN != 0;
        match hub.control.port(i).set_admin_up(!down) {
            Ok(()) => changed = true,
            Err(e) => crate::log_warn!(
                "rqvs switch: openflow {}: PORT_MOD: port {} ({}) cannot be set {}: {e} (left as it is)",
                me.name,
                pm.port_no,
                hub.control.port_name(i),
                if down { "down" } else { "up" }
            ),
        }
    }
    if toggle & OFPPC_NO_PACKET_IN != 0 {
        hub.port_config.xor(i, OFPPC_NO_PACKET_IN);
        changed = true;
    }
    if changed {
        crate::log_info!(
            "rqvs switch: openflow {}: PORT_MOD: port {} ({}) config {}",
            me.name,
            pm.port_no,
            hub.control.port_name(i),
            match bit_names(super::ports::describe_one(hub, i).config) {
                s if s.is_empty() => "0".to_string(),
                s => s,
            }
        );
        super::ports::deliver_status_except(hub, ofport, Some(me.id));
    }
    Ok(())
}
