//! Applying a packet's datapath action ([`DpAction`]) to its frame: the ops in order, each
//! output a copy of the frame as it is at that point (OpenFlow's action-list semantics).
//!
//! The frame is read from the receive batch in place; the first op that rewrites it copies it
//! into the executor's scratch buffer, which is reused from packet to packet (no allocation once
//! it has grown to the largest frame plus a tag). Outputs stage a copy in the transmit queue.
//!
//! OpenFlow details, as Open vSwitch does them: `output:N` to the input port is skipped (only
//! `in_port` sends a packet back); an output to a port that does not exist is skipped; `all` and
//! `flood` send to every port but the input port; `mod_vlan_vid` pushes a tag (priority 0) on
//! an untagged frame; `strip_vlan` on an untagged frame, `mod_nw_tos` and `dec_ttl` on a
//! non-IPv4 frame do nothing; `dec_ttl` on a TTL of 0 or 1 stops the list (outputs already done
//! stay done) and counts the packet in `ttl_expired`; `controller` is counted (packet-in comes
//! with the OpenFlow channel).
//!
//! Frames whose IPv4 header is damaged or whose protocol is 0, as OVS 3.1 treats them (checked
//! with `ofproto/trace` on such frames): the slow path's flow of a damaged header (see
//! `rqvs_flow::frame::extract_datapath`) has TTL 0, so `dec_ttl` expires it; and OVS writes IPv4
//! fields into a frame only when the flow has "an L3 header", which it takes to be a non-zero
//! `nw_proto` (`commit_set_nw_action`), so on a protocol-0 packet `mod_nw_tos` and `dec_ttl`
//! change no byte — `dec_ttl` still counts down the flow's copy of the TTL and expires it at 1.

use rqvs_datapath::actions::{self, Op};
use rqvs_datapath::DpAction;
use rqvs_flow::frame::{push_vlan, strip_vlan, Frame};
use rqvs_ports::TxQueue;

/// What the executor did with one packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Copies staged for transmission.
    pub outputs: u32,
    /// The list stopped at `dec_ttl` (TTL expired).
    pub ttl_expired: bool,
    /// `controller` ops met.
    pub to_controller: u32,
    /// Outputs skipped: to the input port, or to a port that does not exist.
    pub skipped: u32,
}

/// Applies actions to frames (module docs). One per PMD thread.
pub struct Executor {
    scratch: Vec<u8>,
}

impl Default for Executor {
    fn default() -> Self {
        Executor::new()
    }
}

impl Executor {
    pub fn new() -> Executor {
        Executor { scratch: Vec::with_capacity(2048) }
    }

    /// Applies `action` to `frame`, received on port `in_port` (1-based; `tx[p - 1]` is port
    /// `p`'s transmit queue).
    pub fn execute(&mut self, frame: &[u8], in_port: u32, action: DpAction, tx: &mut [TxQueue]) -> Outcome {
        let mut out = Outcome::default();
        match action {
            DpAction::Output(p) => send(frame, p, in_port, tx, &mut out),
            DpAction::Apply(id) => self.apply(frame, in_port, actions::ops(id), tx, &mut out),
            DpAction::Drop | DpAction::Pending | DpAction::Lost => {}
        }
        out
    }

    fn apply(&mut self, frame: &[u8], in_port: u32, ops: &[Op], tx: &mut [TxQueue], out: &mut Outcome) {
        let mut copied = false;
        let mut ttl = None;
        for op in ops {
            let cur: &[u8] = if copied { &self.scratch } else { frame };
            match *op {
                Op::Output(p) => send(cur, p, in_port, tx, out),
                Op::InPort => send_to(cur, in_port, tx, out),
                Op::Flood => {
                    for p in 1..=tx.len() as u32 {
                        if p != in_port {
                            send_to(cur, p, tx, out);
                        }
                    }
                }
                Op::Controller(_) => out.to_controller += 1,
                _ => {
                    if !copied {
                        self.scratch.clear();
                        self.scratch.extend_from_slice(frame);
                        copied = true;
                    }
                    if !rewrite(&mut self.scratch, op, &mut ttl) {
                        out.ttl_expired = true;
                        return;
                    }
                }
            }
        }
    }
}

/// One rewriting op on `buf`; false when `dec_ttl` expired the packet. `ttl` is the TTL after
/// the list's earlier `dec_ttl`s, as the slow path's flow holds it (module docs).
fn rewrite(buf: &mut Vec<u8>, op: &Op, ttl: &mut Option<u8>) -> bool {
    match *op {
        Op::StripVlan => {
            strip_vlan(buf);
        }
        Op::SetVlanVid(vid) => {
            let tagged = Frame::new_checked(&mut buf[..]).is_ok_and(|mut f| f.set_vlan_vid(vid));
            if !tagged {
                push_vlan(buf, vid);
            }
        }
        _ => {
            let Ok(mut f) = Frame::new_checked(&mut buf[..]) else { return true };
            // OVS's commit_set_nw_action: IPv4 fields are written only with a non-zero nw_proto.
            let writable = f.nw_proto().is_some_and(|p| p != 0);
            match *op {
                Op::SetDlSrc(m) => f.set_dl_src(m),
                Op::SetDlDst(m) => f.set_dl_dst(m),
                Op::SetNwTos(t) if writable => {
                    f.set_nw_tos(t);
                }
                Op::DecTtl if f.layout().is_ipv4 => {
                    // A damaged IPv4 header's flow has TTL 0.
                    let now = ttl.or(f.nw_ttl()).unwrap_or(0);
                    if now <= 1 {
                        return false;
                    }
                    *ttl = Some(now - 1);
                    if writable {
                        f.dec_ttl();
                    }
                }
                _ => {}
            }
        }
    }
    true
}

/// `output:p` — skipped when `p` is the input port (OpenFlow: only `in_port` sends back).
fn send(frame: &[u8], p: u32, in_port: u32, tx: &mut [TxQueue], out: &mut Outcome) {
    if p == in_port {
        out.skipped += 1;
    } else {
        send_to(frame, p, tx, out);
    }
}

fn send_to(frame: &[u8], p: u32, tx: &mut [TxQueue], out: &mut Outcome) {
    match (p as usize).checked_sub(1).and_then(|i| tx.get_mut(i)) {
        Some(q) => {
            q.send(frame);
            out.outputs += 1;
        }
        None => out.skipped += 1,
    }
}
