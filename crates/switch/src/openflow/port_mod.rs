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
//! - `NO_RECV`, `NO_FWD` and (OpenFlow 1.0) `NO_FLOOD` are kept per port
//!   ([`crate::portflags`]) and applied by every PMD's executor from the next frame on: a
//!   frame received on a `NO_RECV` port runs no action, an output to a `NO_FWD` port is
//!   skipped, `FLOOD` and `NORMAL`'s flooding leave `NO_FLOOD` ports out (see
//!   [`crate::portflags`] for why there, and what OVS 3.1 showed). OpenFlow 1.3 and 1.4 have no
//!   `NO_FLOOD`: as OVS (`OFPPC11_ALL`), their PORT_MOD's bit 16 is ignored, and their port
//!   descriptions do not carry it. STP's bits (1.0's `NO_STP`, `NO_RECV_STP`) are refused with
//!   `OFPPMFC_BAD_CONFIG`, logged, the port unchanged (rqvs has no STP). `advertise` is ignored
//!   (veths and taps have nothing to negotiate), as OVS does for a netdev that cannot change it;
//! - a change sends PORT_STATUS (reason MODIFY, the port as PORT_DESC says it now) to every
//!   other connection that takes port status — not to the one that sent the PORT_MOD, as OVS
//!   does below OpenFlow 1.5.
//!
//! The port's configuration is PORT_DESC's, FEATURES_REPLY's (1.0) and PORT_STATUS's `config`:
//! the bits kept here plus `PORT_DOWN` whenever the interface is administratively down, however
//! it got there (`ip link set IF down` too, as OVS reports it).

use std::sync::atomic::Ordering;

use rqvs_openflow::async_config::{PortMod, OFPPC_PORT_DOWN};
use rqvs_openflow::OfError;

use super::{Hub, Peer};
use crate::portflags::{names as bit_names, NO_FLOOD, NO_FWD, NO_PACKET_IN, NO_RECV};

/// The `OFPPC_*` bits a PORT_MOD may change.
const SUPPORTED: u32 = OFPPC_PORT_DOWN | NO_RECV | NO_FLOOD | NO_FWD | NO_PACKET_IN;
/// The bits the switch keeps ([`crate::portflags`]); `PORT_DOWN` is the interface's.
const KEPT: u32 = NO_RECV | NO_FLOOD | NO_FWD | NO_PACKET_IN;
/// OpenFlow 1.0's `OFPPC_*` bits (`OFPPC10_ALL` in OVS), and 1.1's and later (`OFPPC11_ALL`:
/// no `NO_FLOOD`, no STP bits): what OVS reads of a PORT_MOD's `config` and `mask`.
const OFPPC10_ALL: u32 = 0x7f;
const OFPPC11_ALL: u32 = 0x65;

/// What a PORT_MOD that passed its checks changes: the port's index and OpenFlow number, the
/// new config bits, and the bits that change.
pub(crate) struct Checked {
    i: usize,
    ofport: u32,
    config: u32,
    toggle: u32,
}

/// Applies `pm` from connection `me` (module docs); the error to answer with, and why.
pub(crate) fn apply(hub: &Hub, me: &Peer, pm: &PortMod) -> Result<(), (OfError, String)> {
    let c = check(hub, me, pm)?;
    finish(hub, me, pm, c);
    Ok(())
}

/// The checks of [`apply`], changing nothing (a bundle checks its PORT_MODs before it commits
/// anything: [`super::bundled`]).
pub(crate) fn check(hub: &Hub, me: &Peer, pm: &PortMod) -> Result<Checked, (OfError, String)> {
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
    let all = if me.version.load(Ordering::Relaxed) == rqvs_openflow::OFP10 { OFPPC10_ALL } else { OFPPC11_ALL };
    let (config, mask) = (pm.config & all, pm.mask & all);
    // `now.config` as this version sees it (a 1.3 connection never sees NO_FLOOD).
    let toggle = (config ^ now.config) & mask & all;
    let unsupported = toggle & !SUPPORTED;
    if unsupported != 0 {
        return Err((
            OfError::PORT_MOD_FAILED_BAD_CONFIG,
            format!("port {}: {} is not supported by rqvs", pm.port_no, bit_names(unsupported)),
        ));
    }
    Ok(Checked { i, ofport, config, toggle })
}

/// Makes the change [`check`] allowed (OVS's `port_mod_finish`: it cannot fail; an interface the
/// kernel will not set up or down is logged and left as it is).
pub(crate) fn finish(hub: &Hub, me: &Peer, pm: &PortMod, c: Checked) {
    let Checked { i, ofport, config, toggle } = c;
    let mut changed = false;
    if toggle & OFPPC_PORT_DOWN != 0 {
        let down = config & OFPPC_PORT_DOWN != 0;
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
    if toggle & KEPT != 0 {
        // Every PMD's executor reads the bits for each frame: the next frame sees them.
        hub.control.port_flags().toggle(hub.control.ofports().ofport(i), toggle & KEPT);
        changed = true;
    }
    if changed {
        crate::log_info!(
            "rqvs switch: openflow {}: PORT_MOD: port {} ({}) config {}",
            me.name,
            pm.port_no,
            hub.control.port_name(i),
            bit_names(hub.control.port_config_bits(i))
        );
        super::ports::deliver_status_except(hub, ofport, Some(me.id));
    }
}
