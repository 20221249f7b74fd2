//! What an OpenFlow bundle holds besides FLOW_MODs and GROUP_MODs: **PORT_MOD** and
//! **PACKET_OUT**, which Open vSwitch 3.1 accepts in a bundle (`ofproto.c`,
//! `do_bundle_commit`), with its semantics:
//!
//! - checked when added (decoded; a packet-out's actions and ports as [`super::packet_out`]
//!   checks them), kept in order with the flow-mods, **nothing done until the commit**; a
//!   discarded bundle, or one whose connection ends, does nothing;
//! - at the commit, first every PORT_MOD's checks (the port exists, its hardware address, the
//!   bits rqvs supports) and every PACKET_OUT's again, then the flow-mods and group-mods as one
//!   atomic change set; when any of these fails the bundle fails (`OFPBFC_MSG_FAILED`) and
//!   **nothing** is changed or sent;
//! - then, in the bundle's order, each PORT_MOD is applied and each PACKET_OUT sent;
//! - a PORT_MOD in a bundle opened with `OFPBF_ATOMIC` fails the commit: port changes are not
//!   atomic (OVS: "Our port mods are not atomic", `OFPBFC_MSG_FAILED`).
//!
//! One difference from OVS: a PACKET_OUT to `TABLE` is classified after the whole bundle's
//! flow-mods are committed, so it sees those that come after it in the bundle too; OVS
//! translates it at the point of the bundle where it stands (the flow-mods before it). A
//! packet-out that does not output to `TABLE` behaves the same in both.

use rqvs_openflow::async_config::PortMod;
use rqvs_openflow::flow_mod::PacketOut as OfPacketOut;
use rqvs_openflow::OfError;

use super::{packet_out, port_mod, Hub, Peer};
use rqvs_ofproto::record::FlowOp;

/// One message of a bundle, in the order it came.
// A FlowOp holds a rule (about 300 bytes); bundles are built per message, not per packet.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Bundled {
    Flow(FlowOp),
    PortMod(PortMod),
    PacketOut(OfPacketOut),
}

/// Why a commit failed (nothing was changed): the OpenFlow error and the reason for the log.
pub(crate) type Failed = (OfError, String);

/// Commits a bundle of `items` opened with `flags` from connection `me` (module docs). Returns
/// how many packet-outs were sent.
pub(crate) fn commit(hub: &Hub, me: &Peer, flags: u16, items: &[Bundled]) -> Result<usize, Failed> {
    let atomic = flags & rqvs_openflow::bundle::ATOMIC != 0;
    let mut ports = Vec::new();
    for it in items {
        match it {
            Bundled::PortMod(pm) if atomic => {
                return Err((
                    OfError::BUNDLE_FAILED_MSG_FAILED,
                    format!("PORT_MOD of port {} in an atomic bundle (port changes are not atomic)", pm.port_no),
                ))
            }
            Bundled::PortMod(pm) => ports.push(port_mod::check(hub, me, pm)?),
            Bundled::PacketOut(po) => {
                packet_out::prepare(po, &hub.control)?;
            }
            Bundled::Flow(_) => {}
        }
    }
    let flows: Vec<FlowOp> = items
        .iter()
        .filter_map(|it| match it {
            Bundled::Flow(op) => Some(op.clone()),
            _ => None,
        })
        .collect();
    if !flows.is_empty() {
        hub.control.apply_ops(&flows).map_err(|e| (OfError::BUNDLE_FAILED_MSG_FAILED, e.0))?;
    }
    // Committed: the rest in order, as OVS's finish phase.
    let mut ports = ports.into_iter();
    let mut sent = 0;
    for it in items {
        match it {
            Bundled::PortMod(pm) => {
                let c = ports.next().expect("one check per PORT_MOD");
                port_mod::finish(hub, me, pm, c);
            }
            Bundled::PacketOut(po) => {
                let out = packet_out::prepare(po, &hub.control)
                    .and_then(|p| hub.control.packet_out(p).map_err(|e| (OfError::BAD_REQUEST_BAD_PACKET, e.0)));
                hub.count_packet_out(out.is_ok());
                match out {
                    Ok(()) => sent += 1,
                    // Checked above: only a switch stopping gets here.
                    Err((_, why)) => {
                        crate::log_warn!("rqvs switch: openflow {}: bundled packet_out not sent: {why}", me.name)
                    }
                }
            }
            Bundled::Flow(_) => {}
        }
    }
    Ok(sent)
}
