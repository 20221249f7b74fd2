//! Applying a packet's datapath action ([`DpAction`]) to its frame: the ops in order, each
//! output a copy of the frame as it is at that point (OpenFlow's action-list semantics).
//!
//! The frame is read from the receive batch in place; the first op that rewrites it copies it
//! into the executor's scratch buffer, which is reused from packet to packet (no allocation once
//! it has grown to the largest frame plus a tag). Outputs stage a copy in the transmit queue.
//!
//! OpenFlow details, as Open vSwitch does them: `output:N` to the input port is skipped (only
//! `in_port` sends a packet back); an output to a port that does not exist is skipped; `all` and
//! `flood` send to every port but the input port; the ports' PORT_MOD bits
//! ([`crate::portflags`]) are applied here: a frame from a `NO_RECV` port runs no op, an output
//! to a `NO_FWD` port is skipped (whatever chose the port), `flood` and `NORMAL`'s flooding
//! leave `NO_FLOOD` ports out (`all` does not); `mod_vlan_vid` pushes a tag (priority 0) on
//! an untagged frame; `strip_vlan` on an untagged frame, `mod_nw_tos` and `dec_ttl` on a
//! non-IPv4 frame do nothing; `dec_ttl` on a TTL of 0 or 1 stops the list (outputs already done
//! stay done) and counts the packet in `ttl_expired`; `NORMAL` is the MAC-learning forwarding
//! of [`crate::normal`].
//!
//! **`controller`.** The frame as it is at that point of the list goes into the switch's
//! bounded packet-in queue ([`PacketIn`]: the OpenFlow channel takes it from there, see
//! `crate::openflow`) with the reason and cookie the op carries
//! ([`rqvs_ofproto::actions::ToController`]): `NO_MATCH` for a table-miss flow's action,
//! `ACTION` for any other flow's, `PACKET_OUT` for the actions of a packet-out (OVS's
//! `in_packet_out`: also those of the flow a packet-out's `TABLE` meets). The queue never blocks
//! the PMD: when it is full the packet-in is dropped and counted (the first time logged). With
//! no OpenFlow channel the switch has no queue and the op only counts.
//!
//! Frames whose IPv4 header is damaged or whose protocol is 0, as OVS 3.1 treats them (checked
//! with `ofproto/trace` on such frames): the slow path's flow of a damaged header (see
//! `rqvs_flow::frame::extract_datapath`) has TTL 0, so `dec_ttl` expires it; and OVS writes IPv4
//! fields into a frame only when the flow has "an L3 header", which it takes to be a non-zero
//! `nw_proto` (`commit_set_nw_action`), so on a protocol-0 packet `mod_nw_tos` and `dec_ttl`
//! change no byte — `dec_ttl` still counts down the flow's copy of the TTL and expires it at 1.
//!
//! **The pipeline's ops** (from `rqvs_ofproto::xlate`): a set_field writes the field into the
//! frame with `Frame::set_field` (checksums kept — IPv4 header, TCP/UDP/ICMP/ICMPv6 by
//! incremental update, SCTP's CRC32c recomputed; a field the frame lacks is left alone);
//! `meter:N` runs the frame through the meter ([`rqvs_ofproto::meters`]: a band that drops it ends
//! the list, counted `metered`); a TTL expiry sends the frame to the controller with reason
//! `INVALID_TTL` (and, as every packet-in, through the controller meter when there is one);
//! `push_vlan` inserts a fresh tag (VID 0, PCP 0, as OVS 3.1); a clone (an ALL group's
//! bucket that rewrites the frame) runs its ops on a copy, the ops after it seeing the frame as
//! it was.

use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::Arc;

use rqvs_flow::frame::{push_vlan, strip_vlan, Frame};
use rqvs_ofproto::actions::{self, Op, ToController};
use rqvs_ofproto::DpAction;
use rqvs_ports::TxQueue;

use crate::normal::{vid_of, Forward, MacTable};
use crate::ofports::OfPorts;
use crate::portflags::{Bits, PortFlags, NO_FLOOD, NO_FWD, NO_RECV};
use rqvs_ofproto::meters::MeterTable;

/// Why a packet goes to the controller (the PACKET_IN's reason; numbers per version in
/// `crate::openflow`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketInReason {
    /// A table-miss flow's action (OpenFlow 1.3 `NO_MATCH`, 1.4 `TABLE_MISS`).
    NoMatch,
    /// Any other flow's action (`ACTION`, 1.4 `APPLY_ACTION`).
    Action,
    /// A packet-out's action (1.4 `PACKET_OUT`; 1.3 has no such reason: `ACTION`).
    PacketOut,
    /// `dec_ttl` met a TTL of 0 or 1 (`INVALID_TTL`; OVS's default asynchronous configuration
    /// does not ask for it, Faucet's does).
    InvalidTtl,
}

/// A packet on its way to the controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketIn {
    /// The frame as it was when the `controller` op met it (whole: rqvs buffers no packets).
    pub frame: Vec<u8>,
    /// The port it came in on (rqvs numbering: reserved ports are 0xff00..).
    pub in_port: u32,
    pub reason: PacketInReason,
    /// The cookie of the flow that sent it (all ones for a packet-out's own action).
    pub cookie: u64,
    /// The table of the rule whose `controller` action sent it.
    pub table_id: u8,
}

/// Packet-ins a switch's queue holds (all PMDs together); more are dropped and counted.
pub const PACKET_IN_QUEUE: usize = 1024;

/// A PMD's end of the packet-in queue.
pub struct PacketInQueue {
    tx: SyncSender<PacketIn>,
    pmd: usize,
    full_logged: bool,
}

impl PacketInQueue {
    pub fn new(tx: SyncSender<PacketIn>, pmd: usize) -> PacketInQueue {
        PacketInQueue { tx, pmd, full_logged: false }
    }
}

/// What the executor did with one packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Copies staged for transmission.
    pub outputs: u32,
    /// Copies handed to a peer bridge by a patch crossing ([`crate::crossing`]): the peer's
    /// outputs of them are the peer's.
    pub crossed: u32,
    /// The list stopped at `dec_ttl` (TTL expired).
    pub ttl_expired: bool,
    /// `controller` ops met.
    pub to_controller: u32,
    /// Of those, packet-ins queued for the OpenFlow channel.
    pub packet_ins: u32,
    /// Of those, packet-ins dropped: the queue was full (or the channel gone).
    pub packet_in_dropped: u32,
    /// Outputs skipped: to the input port, or to a port that does not exist.
    pub skipped: u32,
    /// A meter's band dropped the packet ([`rqvs_ofproto::meters`]): the ops after the meter were not
    /// run.
    pub metered: bool,
    /// Packet-ins the controller meter dropped (not sent, not counted in `packet_in_dropped`).
    pub packet_in_metered: u32,
    /// Outputs skipped because their port is `NO_FWD` (PORT_MOD; not in `skipped`).
    pub no_forward: u32,
    /// The frame came in on a `NO_RECV` port: no op ran.
    pub no_receive: bool,
}

/// Applies actions to frames (module docs). One per PMD thread.
pub struct Executor {
    scratch: Vec<u8>,
    /// A frame retagged for one port by `NORMAL` on ports with VLANs.
    vlan_buf: Vec<u8>,
    macs: Arc<MacTable>,
    packet_in: Option<PacketInQueue>,
    /// The ports' OpenFlow numbers ([`crate::ofports`]); `None`: `tx[p - 1]` is port `p`.
    ports: Option<Arc<OfPorts>>,
    /// The switch's meters (`None`: a `meter` op lets every packet through).
    meters: Option<Arc<MeterTable>>,
    /// The ports' PORT_MOD bits (`None`: none set, ever).
    flags: Option<Arc<PortFlags>>,
    /// The patch crossings the frame being executed has made ([`Executor::set_crossings`]).
    crossings: u8,
}

impl Default for Executor {
    fn default() -> Self {
        Executor::new(Arc::new(MacTable::new()), None)
    }
}

impl Executor {
    /// An executor learning into `macs` (`NORMAL`), sending packet-ins into `packet_in` (none:
    /// `controller` ops only count).
    pub fn new(macs: Arc<MacTable>, packet_in: Option<PacketInQueue>) -> Executor {
        Executor {
            scratch: Vec::with_capacity(2048),
            vlan_buf: Vec::new(),
            macs,
            packet_in,
            ports: None,
            meters: None,
            flags: None,
            crossings: 0,
        }
    }

    /// This executor metering through `meters` (`meter` ops, the controller meter on packet-ins).
    pub fn with_meters(mut self, meters: Arc<MeterTable>) -> Executor {
        self.meters = Some(meters);
        self
    }

    /// This executor applying the ports' PORT_MOD bits `flags` (by OpenFlow port number).
    pub fn with_port_flags(mut self, flags: Arc<PortFlags>) -> Executor {
        self.flags = Some(flags);
        self
    }

    /// The frames executed from now on have made `n` patch crossings ([`crate::crossing`],
    /// *Loops*): their outputs to a patch port and their crossings carry `n` + 1 on.
    pub fn set_crossings(&mut self, n: u8) {
        self.crossings = n;
    }

    /// The ports' PORT_MOD bits as they are for this frame.
    fn bits(&self) -> Bits {
        self.flags.as_deref().map_or(Bits::NONE, PortFlags::read)
    }

    /// This executor for ports numbered `ports` (`tx[i]` is the port whose ofport is
    /// `ports.ofport(i)`); the ports of `execute` and its ops are ofports.
    pub fn with_ports(mut self, ports: Arc<OfPorts>) -> Executor {
        self.ports = Some(ports);
        self
    }

    /// [`Executor::with_ports`] on a running executor (a port attached or removed live).
    pub fn set_ports(&mut self, ports: Arc<OfPorts>) {
        self.ports = Some(ports);
    }

    /// Port index `i`'s OpenFlow number.
    pub fn ofport(&self, i: usize) -> u32 {
        self.ports.as_deref().map_or(i as u32 + 1, |m| m.ofport(i))
    }

    /// Applies `action` to `frame`, received on port `in_port` (an ofport: `tx[p - 1]` is port
    /// `p`'s transmit queue unless [`Executor::with_ports`] says otherwise).
    pub fn execute(&mut self, frame: &[u8], in_port: u32, action: DpAction, tx: &mut [TxQueue]) -> Outcome {
        let mut out = Outcome::default();
        let bits = self.bits();
        if bits.get(in_port) & NO_RECV != 0 {
            out.no_receive = true;
            return out;
        }
        match action {
            DpAction::Output(p) => {
                send(frame, p, in_port, Tx(tx, self.ports.as_deref(), &bits, self.crossings), &mut out)
            }
            DpAction::Apply(id) => self.apply(frame, in_port, &actions::ops(id), false, tx, &bits, &mut out),
            DpAction::Drop | DpAction::Pending | DpAction::Lost => {}
        }
        out
    }

    /// Applies a packet-out's ops to its frame (`in_port`: the packet-out's, possibly a
    /// reserved port such as `CONTROLLER`, 0xfffd). Packet-ins it sends say `PACKET_OUT`.
    pub fn execute_packet_out(&mut self, frame: &[u8], in_port: u32, ops: &[Op], tx: &mut [TxQueue]) -> Outcome {
        let mut out = Outcome::default();
        // OVS's `may_receive` holds for a packet-out's in_port too.
        let bits = self.bits();
        if bits.get(in_port) & NO_RECV != 0 {
            out.no_receive = true;
            return out;
        }
        self.apply(frame, in_port, ops, true, tx, &bits, &mut out);
        out
    }

    /// Runs a patch crossing's peer ops ([`crate::crossing`]) on `frame`, which entered this
    /// bridge on its patch port `in_port`.
    pub fn execute_crossed(&mut self, frame: &[u8], in_port: u32, ops: &[Op], tx: &mut [TxQueue]) -> Outcome {
        let mut out = Outcome::default();
        let bits = self.bits();
        if bits.get(in_port) & NO_RECV != 0 {
            out.no_receive = true;
            return out;
        }
        self.apply(frame, in_port, ops, false, tx, &bits, &mut out);
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn apply(
        &mut self,
        frame: &[u8],
        in_port: u32,
        ops: &[Op],
        packet_out: bool,
        tx: &mut [TxQueue],
        flags: &Bits,
        out: &mut Outcome,
    ) {
        let mut copied = false;
        let mut ttl = None;
        let ports = self.ports.clone();
        let ports = ports.as_deref();
        let crossings = self.crossings;
        for op in ops {
            let cur: &[u8] = if copied { &self.scratch } else { frame };
            match *op {
                Op::Output(p) => send(cur, p, in_port, Tx(tx, ports, flags, crossings), out),
                Op::InPort => send_to(cur, in_port, Tx(tx, ports, flags, crossings), out),
                Op::Flood => flood(cur, in_port, false, Tx(tx, ports, flags, crossings), out),
                Op::All => flood(cur, in_port, true, Tx(tx, ports, flags, crossings), out),
                Op::Normal => {
                    normal(&self.macs, &mut self.vlan_buf, cur, in_port, &[], Tx(tx, ports, flags, crossings), out)
                }
                Op::NormalCrossing { patches } => {
                    let patches = actions::ops(patches);
                    normal(&self.macs, &mut self.vlan_buf, cur, in_port, &patches, Tx(tx, ports, flags, crossings), out)
                }
                Op::Controller(c) => {
                    out.to_controller += 1;
                    let reason = match (packet_out, c.table_miss) {
                        (true, _) => PacketInReason::PacketOut,
                        (false, true) => PacketInReason::NoMatch,
                        (false, false) => PacketInReason::Action,
                    };
                    if let Some(q) = &mut self.packet_in {
                        packet_in(q, self.meters.as_deref(), cur, in_port, c, reason, out);
                    }
                }
                Op::TtlExpired(c) => {
                    out.ttl_expired = true;
                    // OVS's compose_dec_ttl: the packet goes to the controller, INVALID_TTL.
                    if let Some(q) = &mut self.packet_in {
                        packet_in(q, self.meters.as_deref(), cur, in_port, c, PacketInReason::InvalidTtl, out);
                    }
                }
                Op::Meter(id) => {
                    if let Some(m) = &self.meters {
                        if !m.admit(id, cur.len()) {
                            out.metered = true;
                            return;
                        }
                    }
                }
                Op::Patch(p) => cross(p, cur, flags, crossings, out),
                Op::FloodCrossing { all, patches } => {
                    let patches = actions::ops(patches);
                    let crossed = |p: u32| patches.iter().any(|op| matches!(op, Op::Patch(c) if c.port == p));
                    flood_except(cur, in_port, all, &crossed, Tx(tx, ports, flags, crossings), out);
                    for op in patches.iter() {
                        let Op::Patch(p) = *op else { continue };
                        if p.port != in_port && (all || flags.get(p.port) & NO_FLOOD == 0) {
                            cross(p, cur, flags, crossings, out);
                        }
                    }
                }
                Op::Clone(id) => {
                    // The bucket runs on its own copy; the scratch buffer is the caller's.
                    let copy = cur.to_vec();
                    let saved = std::mem::take(&mut self.scratch);
                    self.apply(&copy, in_port, &actions::ops(id), packet_out, tx, flags, out);
                    self.scratch = saved;
                }
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
pub(crate) fn rewrite(buf: &mut Vec<u8>, op: &Op, ttl: &mut Option<u8>) -> bool {
    match *op {
        Op::StripVlan => {
            strip_vlan(buf);
        }
        Op::PushVlan(tpid) => {
            // A fresh tag, VID 0 and PCP 0 (OVS 3.1), outside any tag already there.
            if buf.len() >= 14 {
                let mut tag = [0u8; 4];
                tag[..2].copy_from_slice(&tpid.to_be_bytes());
                buf.splice(12..12, tag);
            }
        }
        Op::SetField { field, value, mask } => {
            if let Ok(mut f) = Frame::new_checked(&mut buf[..]) {
                f.set_field(field, value, mask);
            }
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
            // A usable IPv6 header (its hop limit and traffic class are rewritten as OVS does).
            let ipv6 = !f.layout().is_ipv4 && f.layout().ipv6.is_some();
            match *op {
                Op::SetDlSrc(m) => f.set_dl_src(m),
                Op::SetDlDst(m) => f.set_dl_dst(m),
                Op::SetNwTos(t) if writable || ipv6 => {
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
                Op::DecTtl if ipv6 => {
                    // IPv6's hop limit, as OVS's dec_ttl does (no header checksum to keep).
                    let now = ttl.or(f.hop_limit()).unwrap_or(0);
                    if now <= 1 {
                        return false;
                    }
                    *ttl = Some(now - 1);
                    f.dec_hop_limit();
                }
                _ => {}
            }
        }
    }
    true
}

/// Queues a packet-in without waiting: a full queue drops it (counted; logged the first time).
/// The controller meter, when there is one, may drop it first (counted apart).
fn packet_in(
    q: &mut PacketInQueue,
    meters: Option<&MeterTable>,
    frame: &[u8],
    in_port: u32,
    c: ToController,
    reason: PacketInReason,
    out: &mut Outcome,
) {
    if meters.is_some_and(|m| !m.admit_packet_in(frame.len())) {
        out.packet_in_metered += 1;
        return;
    }
    let p = PacketIn { frame: frame.to_vec(), in_port, reason, cookie: c.cookie, table_id: c.table_id };
    match q.tx.try_send(p) {
        Ok(()) => out.packet_ins += 1,
        Err(TrySendError::Full(_)) => {
            out.packet_in_dropped += 1;
            if !q.full_logged {
                q.full_logged = true;
                crate::log_warn!(
                    "rqvs switch: PMD {}: the packet-in queue is full ({PACKET_IN_QUEUE}): packet-ins are dropped and counted (logged once)",
                    q.pmd
                );
            }
        }
        Err(TrySendError::Disconnected(_)) => out.packet_in_dropped += 1,
    }
}

/// The transmit queues, the ofports they belong to (`None`: `tx[p - 1]` is port `p`), the
/// ports' PORT_MOD bits for this frame and the patch crossings it has made.
struct Tx<'a, 'b>(&'a mut [TxQueue], Option<&'b OfPorts>, &'b Bits, u8);

impl Tx<'_, '_> {
    /// Stages `frame` on `tx[i]` (with its crossings: a patch port passes them on).
    fn send(&mut self, i: usize, frame: &[u8]) {
        self.0[i].send_after(frame, self.3);
    }

    fn ofport(&self, i: usize) -> u32 {
        self.1.map_or(i as u32 + 1, |m| m.ofport(i))
    }

    /// The PORT_MOD bits of the port at `tx[i]` (kept by OpenFlow port number).
    fn flags(&self, i: usize) -> u32 {
        self.2.get(self.ofport(i))
    }

    fn index(&self, p: u32) -> Option<usize> {
        match self.1 {
            Some(m) => m.index(p),
            None => (p as usize).checked_sub(1),
        }
    }
}

/// `flood` (`all: false`) / `all`: every port but the input port; `flood` leaves out the
/// `NO_FLOOD` ports, both skip the `NO_FWD` ones (counted).
fn flood(frame: &[u8], in_port: u32, all: bool, tx: Tx, out: &mut Outcome) {
    flood_except(frame, in_port, all, &|_| false, tx, out);
}

/// [`flood`] but for the ports `skip` names (the patch ports an [`Op::FloodCrossing`] crosses).
fn flood_except(frame: &[u8], in_port: u32, all: bool, skip: &dyn Fn(u32) -> bool, mut tx: Tx, out: &mut Outcome) {
    for i in 0..tx.0.len() {
        if tx.ofport(i) == in_port || skip(tx.ofport(i)) {
            continue;
        }
        let f = tx.flags(i);
        if !all && f & NO_FLOOD != 0 {
            continue;
        }
        if f & NO_FWD != 0 {
            out.no_forward += 1;
            continue;
        }
        tx.send(i, frame);
        out.outputs += 1;
    }
}

/// A patch crossing ([`Op::Patch`], or one of an [`Op::FloodCrossing`]): skipped when its port
/// is `NO_FWD`, as any output to it; else the peer bridge's loop runs the peer's ops on a copy
/// ([`crate::crossing`]). A crossing into a peer that drops (no ops, only in a flood's list)
/// sends nothing.
fn cross(p: rqvs_ofproto::actions::PatchOp, frame: &[u8], flags: &Bits, crossings: u8, out: &mut Outcome) {
    if flags.get(p.port) & NO_FWD != 0 {
        out.no_forward += 1;
    } else if !actions::ops(p.ops).is_empty() && crate::crossing::defer(p, frame, crossings) {
        out.crossed += 1;
    }
}

/// `output:p` — skipped when `p` is the input port (OpenFlow: only `in_port` sends back).
fn send(frame: &[u8], p: u32, in_port: u32, tx: Tx, out: &mut Outcome) {
    if p == in_port {
        out.skipped += 1;
    } else {
        send_to(frame, p, tx, out);
    }
}

/// An output to port `p` (skipped when it does not exist; when it is `NO_FWD`, counted so).
fn send_to(frame: &[u8], p: u32, mut tx: Tx, out: &mut Outcome) {
    match tx.index(p).filter(|&i| i < tx.0.len()) {
        Some(i) if tx.flags(i) & NO_FWD != 0 => out.no_forward += 1,
        Some(i) => {
            tx.send(i, frame);
            out.outputs += 1;
        }
        None => out.skipped += 1,
    }
}

/// `NORMAL` ([`crate::normal`]); `patches`: the crossings of an [`Op::NormalCrossing`] (none for
/// [`Op::Normal`]), taken where the decision sends to their patch ports ([`normal_to`]).
fn normal(macs: &MacTable, buf: &mut Vec<u8>, frame: &[u8], in_port: u32, patches: &[Op], tx: Tx, out: &mut Outcome) {
    if macs.has_vlans() {
        return normal_vlan(macs, buf, frame, in_port, patches, tx, out);
    }
    match macs.forward(frame, in_port) {
        Forward::Drop => {}
        Forward::Port(p) => normal_to(frame, p, patches, tx, out),
        Forward::Flood if patches.is_empty() => flood(frame, in_port, false, tx, out),
        Forward::Flood => normal_flood(in_port, tx, out, |p, tx, out| normal_to(frame, p, patches, tx, out)),
    }
}

/// `NORMAL`'s flooding: `send` for every port but the input port that is not `NO_FLOOD`.
fn normal_flood(in_port: u32, tx: Tx, out: &mut Outcome, mut send: impl FnMut(u32, Tx, &mut Outcome)) {
    for i in 0..tx.0.len() {
        let p = tx.ofport(i);
        if p != in_port && tx.flags(i) & NO_FLOOD == 0 {
            send(p, Tx(&mut *tx.0, tx.1, tx.2, tx.3), out);
        }
    }
}

/// `NORMAL`'s copy for port `p`: the crossing of `patches` for `p` when the translation made it
/// for the TCI the frame leaves with, else an output to `p` (a patch port's: the hop).
fn normal_to(frame: &[u8], p: u32, patches: &[Op], tx: Tx, out: &mut Outcome) {
    let crossing = patches.iter().find_map(|op| match *op {
        Op::Patch(c) if c.port == p => Some(c),
        _ => None,
    });
    match crossing {
        Some(c) if rqvs_flow::frame::vlan_tci_of(frame) == c.vlan_tci => cross(c, frame, tx.2, tx.3, out),
        _ => send_to(frame, p, tx, out),
    }
}

/// `NORMAL` on ports with VLANs ([`crate::normal`]): the frame's VLAN from its input port, then
/// to each output port that carries it, untagged or tagged as that port says (retagged in
/// `buf` when it differs from how the frame came in).
fn normal_vlan(
    macs: &MacTable,
    buf: &mut Vec<u8>,
    frame: &[u8],
    in_port: u32,
    patches: &[Op],
    tx: Tx,
    out: &mut Outcome,
) {
    let Some(d) = macs.forward_vlan(frame, in_port) else { return };
    let has_tag = frame.get(12..14) == Some(&[0x81, 0x00]);
    let vid = vid_of(frame);
    let vlans = macs.vlans();
    let mut emit = |p: u32, tx: Tx, out: &mut Outcome| match vlans.port(p).output(d.vlan) {
        None => {}
        Some(None) if !has_tag => normal_to(frame, p, patches, tx, out),
        Some(Some(v)) if vid == Some(v) => normal_to(frame, p, patches, tx, out),
        Some(want) => {
            buf.clear();
            buf.extend_from_slice(frame);
            match want {
                None => {
                    strip_vlan(buf);
                }
                Some(v) => {
                    let retagged = Frame::new_checked(&mut buf[..]).is_ok_and(|mut f| f.set_vlan_vid(v));
                    if !retagged {
                        push_vlan(buf, v);
                    }
                }
            }
            normal_to(buf, p, patches, tx, out);
        }
    };
    match d.to {
        Forward::Drop => {}
        Forward::Port(p) => emit(p, tx, out),
        Forward::Flood => normal_flood(in_port, tx, out, emit),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_flow::frame::build_frame;
    use rqvs_flow::FlowKey;

    fn ipv6_frame(hop_limit: u8, tclass: u8) -> Vec<u8> {
        let mut k = FlowKey::ipv6(0xfd78_0100 << 96 | 1, 0xfd78_0200 << 96 | 4, 17, 1000, 53);
        k.nw_ttl = hop_limit;
        k.nw_tos = tclass;
        build_frame(&k.wire())
    }

    #[test]
    fn dec_ttl_and_mod_nw_tos_rewrite_ipv6() {
        let mut b = ipv6_frame(64, 0x03);
        let before = b.clone();
        let mut ttl = None;
        assert!(rewrite(&mut b, &Op::DecTtl, &mut ttl));
        assert!(rewrite(&mut b, &Op::SetNwTos(0xb8), &mut ttl));
        let f = Frame::new_checked(&b[..]).unwrap();
        assert_eq!(f.hop_limit(), Some(63));
        assert_eq!(ttl, Some(63));
        // DSCP written, ECN kept, version and flow label untouched.
        let tc = (b[14] << 4) | (b[15] >> 4);
        assert_eq!(tc, 0xb8 | 0x03);
        assert_eq!(b[14] >> 4, 6);
        assert_eq!(b[15] & 0x0f, before[15] & 0x0f);
        // Nothing else changed: the traffic class's two bytes and the hop limit only.
        let mut want = before.clone();
        (want[14], want[15], want[21]) = (b[14], b[15], 63);
        assert_eq!(b, want);
    }

    #[test]
    fn ipv6_hop_limit_one_expires() {
        let mut b = ipv6_frame(1, 0);
        let before = b.clone();
        let mut ttl = None;
        assert!(!rewrite(&mut b, &Op::DecTtl, &mut ttl), "hop limit 1: expired, as OVS's dec_ttl");
        assert_eq!(b, before);
    }
}

#[cfg(test)]
mod normal_tests {
    use std::sync::Mutex;

    use super::*;
    use crate::normal::{output_tci, PortVlan};
    use rqvs_flow::frame::{build_frame, vlan_tci_of};
    use rqvs_flow::FlowKey;
    use rqvs_ports::{open_tap, PortConfig};

    type Seen = Vec<Arc<Mutex<Vec<Vec<u8>>>>>;

    /// `n` ports in memory (port p is `tx[p - 1]`) and what each was sent.
    fn ports(n: usize) -> (Vec<TxQueue>, Seen) {
        let seen: Seen = (0..n).map(|_| Arc::default()).collect();
        let tx = seen
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let s = s.clone();
                let tap: rqvs_ports::FrameTap = Arc::new(move |f: &[u8]| s.lock().unwrap().push(f.to_vec()));
                let (_, _, mut t) = open_tap(&format!("n{i}"), tap, &PortConfig::default()).split();
                t.remove(0)
            })
            .collect();
        (tx, seen)
    }

    fn sent(tx: &mut [TxQueue], seen: &Seen, port: u32) -> Vec<Vec<u8>> {
        tx.iter_mut().for_each(TxQueue::flush);
        std::mem::take(&mut *seen[port as usize - 1].lock().unwrap())
    }

    fn frame(vlan_tci: u16, dst: [u8; 6], src: u8) -> Vec<u8> {
        let k = FlowKey { vlan_tci, dl_dst: dst, dl_src: [2, 0, 0, 0, 0, src], ..FlowKey::ipv4(1, 2, 17, 3, 4) };
        build_frame(&k.wire())
    }

    /// What the translation predicts of NORMAL's tagging ([`output_tci`], which the crossings
    /// of an [`Op::NormalCrossing`] are made with) is what the executor does, for every port
    /// mode and tag: a broadcast from each port, every other port's copy read back.
    #[test]
    fn normal_tags_each_copy_as_the_translation_predicts() {
        let modes = vec![
            PortVlan::All,
            PortVlan::Access(10),
            PortVlan::Access(20),
            PortVlan::Trunk(vec![10, 30]),
            PortVlan::Native { native: 10, tagged: true, trunks: vec![] },
            PortVlan::Native { native: 20, tagged: false, trunks: vec![10, 20] },
        ];
        let n = modes.len() as u32;
        let (mut tx, seen) = ports(modes.len());
        let macs = Arc::new(MacTable::new().with_vlans(modes));
        let mut exec = Executor::new(macs.clone(), None);
        let normal = DpAction::of_op_list(&[Op::Normal]);
        let mut copies = 0;
        for tci in [0, 0x1000, 0x1000 | 10, 0x1000 | 20, 0x1000 | 30, 0xa000 | 0x1000 | 10, 0x6000 | 0x1000 | 20] {
            for in_port in 1..=n {
                exec.execute(&frame(tci, [0xff; 6], in_port as u8), in_port, normal, &mut tx);
                for p in (1..=n).filter(|&p| p != in_port) {
                    let got: Vec<u16> = sent(&mut tx, &seen, p).iter().map(|f| vlan_tci_of(f)).collect();
                    let want = output_tci(&macs.vlans(), in_port, tci, p);
                    assert_eq!(got, want.into_iter().collect::<Vec<_>>(), "tci {tci:#06x} from {in_port} to {p}");
                    copies += got.len();
                }
                assert!(sent(&mut tx, &seen, in_port).is_empty());
            }
        }
        assert!(copies > 40, "{copies}");
    }

    /// An [`Op::NormalCrossing`]: where NORMAL sends to a crossed patch port with the TCI the
    /// crossing was made for, it crosses (no copy on the port); with another TCI, the hop.
    #[test]
    fn normal_crosses_where_it_sends_with_the_crossings_tag() {
        crate::crossing::activate();
        let (mut tx, seen) = ports(3);
        let mut exec = Executor::new(Arc::new(MacTable::new()), None);
        let peer = actions::intern(&[Op::Output(7)]);
        let crossing = actions::PatchOp {
            port: 3,
            from: 0,
            bridge: rqvs_ofproto::crossing::bridge_id("normal-x"),
            in_port: 5,
            ops: peer,
            rule: rqvs_ofproto::NO_RULE,
            vlan_tci: 0,
        };
        let list = [Op::NormalCrossing { patches: actions::intern(&[Op::Patch(crossing)]) }];
        let action = DpAction::of_op_list(&list);
        let _ = crate::crossing::take();
        // A broadcast: port 2 gets a copy, port 3 is crossed.
        let out = exec.execute(&frame(0, [0xff; 6], 1), 1, action, &mut tx);
        assert_eq!((out.outputs, out.crossed), (1, 1));
        assert_eq!(sent(&mut tx, &seen, 2).len(), 1);
        assert!(sent(&mut tx, &seen, 3).is_empty());
        let c = crate::crossing::take();
        assert_eq!((c.len(), c[0].in_port, c[0].ops, c[0].crossings), (1, 5, peer, 1));
        // Unicast to a station learned on port 3 (it sent from there): crossed, nothing else.
        exec.execute(&frame(0, [0xff; 6], 9), 3, DpAction::of_op_list(&[Op::Normal]), &mut tx);
        let _ = (sent(&mut tx, &seen, 1), sent(&mut tx, &seen, 2));
        let out = exec.execute(&frame(0, [2, 0, 0, 0, 0, 9], 1), 1, action, &mut tx);
        assert_eq!((out.outputs, out.crossed), (0, 1));
        assert_eq!(crate::crossing::take().len(), 1);
        // A tagged frame leaves with another TCI than the crossing's: sent to port 3 (the hop).
        let out = exec.execute(&frame(0x1000 | 10, [0xff; 6], 1), 1, action, &mut tx);
        assert_eq!((out.outputs, out.crossed), (2, 0));
        assert_eq!(sent(&mut tx, &seen, 3).len(), 1);
        assert!(crate::crossing::take().is_empty());
    }
}
