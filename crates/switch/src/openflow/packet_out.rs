//! PACKET_OUT: the checks, and the op list a PMD executes (see the module docs of
//! [`crate::openflow`]). `TABLE` is resolved here, in the connection's thread: the frame as the
//! actions before it leave it is classified with the table of record and the winning flow's
//! ops take `TABLE`'s place (its `controller` ops keep the flow's cookie; the PMD reports every
//! packet-in of a packet-out with the reason `PACKET_OUT`, as OVS does).

use rqvs_flow::Action;
use rqvs_ofproto::actions::Op;
use rqvs_openflow::flow_mod::{PacketOut as OfPacketOut, OFP_NO_BUFFER};
use rqvs_openflow::oxm::port_from_of;
use rqvs_openflow::OfError;

use crate::execute::rewrite;
use crate::pmd::PacketOut;
use crate::Control;

/// An Ethernet header: the least a packet-out's frame holds.
const ETH_HEADER_LEN: usize = 14;
/// `OFPP_CONTROLLER` and `OFPP_ANY` (OVS's `NONE`) in rqvs's numbering.
const CONTROLLER: u32 = 0xfffd;
const ANY: u32 = 0xffff;

/// The packet-out `po` as a PMD executes it, or the error it is refused with (and why).
pub(crate) fn prepare(po: &OfPacketOut, control: &Control) -> Result<PacketOut, (OfError, String)> {
    let ports = control.ofports();
    let numbers = || ports.numbers().iter().map(|&p| crate::ofports::ofport_name(p)).collect::<Vec<_>>().join(",");
    if po.buffer_id != OFP_NO_BUFFER {
        return Err((
            OfError::BAD_REQUEST_BUFFER_UNKNOWN,
            format!("buffer {} (the switch buffers no packets)", po.buffer_id),
        ));
    }
    let in_port = match port_from_of(po.in_port) {
        Some(p) if ports.index(p).is_some() || p == CONTROLLER || p == ANY => p,
        _ => {
            return Err((
                OfError::BAD_REQUEST_BAD_PORT,
                format!("in_port {:#x}: not a port of the switch ({}), CONTROLLER or ANY", po.in_port, numbers()),
            ))
        }
    };
    if po.data.len() < ETH_HEADER_LEN {
        return Err((
            OfError::BAD_REQUEST_BAD_PACKET,
            format!("{} bytes of data: a packet-out needs an Ethernet frame", po.data.len()),
        ));
    }
    let mut ops = Vec::new();
    // The frame as the ops so far leave it (for TABLE), and its TTL as a flow holds it.
    let mut frame = po.data.clone();
    let mut ttl = None;
    // Set once dec_ttl expires: the PMD stops there, so nothing after it is needed (but every
    // action is still checked).
    let mut expired = false;
    for a in &po.actions.0 {
        let new: Vec<Op> = match a {
            Action::Output(p) if ports.index(*p).is_none() => {
                return Err((
                    OfError::BAD_ACTION_BAD_OUT_PORT,
                    format!("output:{}: the switch has ports {}", crate::ofports::ofport_name(*p), numbers()),
                ))
            }
            Action::Other(s) if s == "TABLE" && !expired => control
                .classify_frame(&frame, in_port)
                .map_err(|e| (OfError::BAD_REQUEST_BAD_PACKET, format!("TABLE: {e}")))?
                .to_ops(),
            Action::Other(s) if s == "TABLE" => Vec::new(),
            Action::Other(s) => {
                return Err((OfError::BAD_ACTION_BAD_OUT_PORT, format!("output to {s}: not a port of the switch")))
            }
            // A packet-out's list is executed as it is, not translated through the tables: the
            // pipeline's actions (group, resubmit, ...) are refused, never dropped silently.
            a if a.is_pipeline() => {
                return Err((OfError::BAD_ACTION_BAD_TYPE, format!("{a}: not executed in a packet-out by rqvs yet")))
            }
            a if !a.is_executable() => {
                return Err((OfError::BAD_ACTION_BAD_TYPE, format!("{a}: not an action the switch executes yet")))
            }
            a => Op::of(a).into_iter().collect(),
        };
        for op in new {
            if expired {
                break;
            }
            ops.push(op);
            expired = !rewrite(&mut frame, &op, &mut ttl);
        }
    }
    Ok(PacketOut { frame: po.data.clone(), in_port, ops })
}
