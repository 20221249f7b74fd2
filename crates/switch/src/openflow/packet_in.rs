//! The packet-in thread: takes packet-ins from the PMDs' queue ([`crate::execute::PacketIn`])
//! and writes one PACKET_IN per connection that takes them (see the module docs of
//! [`crate::openflow`] for who does and what a PACKET_IN holds) into that connection's writer
//! queue, without waiting: a full queue drops the PACKET_IN for that connection (counted,
//! logged once per connection). A connection whose controller has a `controller_rate_limit`
//! goes through its packet-in schedulers first ([`super::pinsched`], [`Peer::schedule`]):
//! what they queue is sent from this thread's loop as their tokens come.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TrySendError};
use std::time::Duration;

use rqvs_flow::{FlowKey, Match};
use rqvs_openflow::flow_mod::{
    PacketIn as OfPacketIn, OFPR_ACTION, OFPR_INVALID_TTL, OFPR_NO_MATCH, OFPR_PACKET_OUT, OFP_NO_BUFFER,
};
use rqvs_openflow::of10_async::AsyncForm;
use rqvs_openflow::{Message, OFP10, OFP14};

use super::{Hub, Peer};
use crate::execute::{PacketIn, PacketInReason};

/// The largest frame one PACKET_IN carries: a message is at most 65535 bytes, and the header,
/// the fixed fields, an `in_port` match and the padding take 8 + 16 + 16 + 2 of them.
pub const MAX_DATA: usize = 65535 - 8 - 16 - 16 - 2;

/// Runs until the switch stops (or every PMD is gone); between packet-ins, sends what the
/// connections' schedulers let go ([`Peer::drain`]).
pub(crate) fn run(rx: &Receiver<PacketIn>, hub: &Hub) {
    let mut wait = IDLE;
    loop {
        match rx.recv_timeout(wait) {
            Ok(p) => deliver(hub, &p),
            Err(RecvTimeoutError::Timeout) => {
                if hub.control.stop_requested() {
                    return;
                }
            }
            Err(RecvTimeoutError::Disconnected) => return,
        }
        wait = drain(hub);
    }
}

/// The packet-in thread's wait when no scheduler has anything queued.
const IDLE: Duration = Duration::from_millis(100);

/// Sends the PACKET_INs each connection's schedulers let go now; how long until more may go.
fn drain(hub: &Hub) -> Duration {
    let mut wait = IDLE;
    let mut out = Vec::new();
    for peer in hub.peers() {
        if let Some(w) = peer.drain(&mut out) {
            // At least 1 ms: a scheduler with a token sends at the next run anyway.
            wait = wait.min(w.max(Duration::from_millis(1)));
        }
        for bytes in out.drain(..) {
            push(hub, &peer, bytes);
        }
    }
    wait
}

/// The reason of `p` in `version`'s numbering.
fn reason_code(version: u8, p: &PacketIn) -> u8 {
    match p.reason {
        PacketInReason::NoMatch => OFPR_NO_MATCH,
        PacketInReason::Action => OFPR_ACTION,
        // 1.3 has no PACKET_OUT reason: OVS sends ACTION.
        PacketInReason::PacketOut if version >= OFP14 => OFPR_PACKET_OUT,
        PacketInReason::PacketOut => OFPR_ACTION,
        PacketInReason::InvalidTtl => OFPR_INVALID_TTL,
    }
}

/// The PACKET_IN of `p` in `version`'s numbering.
pub(crate) fn message(version: u8, p: &PacketIn) -> Message {
    let reason = reason_code(version, p);
    let value = FlowKey { in_port: p.in_port, ..FlowKey::default() };
    let mask = FlowKey { in_port: u32::MAX, ..FlowKey::default() };
    Message::PacketIn(OfPacketIn {
        buffer_id: OFP_NO_BUFFER,
        total_len: u16::try_from(p.frame.len()).unwrap_or(u16::MAX),
        reason,
        table_id: p.table_id,
        cookie: p.cookie,
        matches: Match::from_masked(value, mask),
        data: p.frame[..p.frame.len().min(MAX_DATA)].to_vec(),
    })
}

fn deliver(hub: &Hub, p: &PacketIn) {
    // Encoded once per version and (1.0) form.
    let mut encoded: Vec<((u8, AsyncForm), Vec<u8>)> = Vec::new();
    let mut sent = false;
    for peer in hub.peers() {
        let v = peer.version.load(Ordering::Relaxed);
        if !peer.takes_async() || !peer.wants(rqvs_openflow::async_config::PACKET_IN_MASTER, reason_code(v, p)) {
            continue;
        }
        let key = (v, if v == OFP10 { peer.form() } else { AsyncForm::default() });
        let bytes = match encoded.iter().find(|e| e.0 == key) {
            Some(e) => e.1.clone(),
            None => match peer.encode_async(&message(v, p)) {
                Ok(b) => {
                    encoded.push((key, b.clone()));
                    b
                }
                Err(e) => {
                    crate::log_error!(
                        "rqvs switch: openflow: cannot encode a packet-in: {e} (a bug: please report it)"
                    );
                    continue;
                }
            },
        };
        sent = true;
        if let Some(bytes) = peer.schedule(p.reason == PacketInReason::NoMatch, p.in_port, bytes) {
            push(hub, &peer, bytes);
        }
    }
    if !sent {
        hub.packet_ins_unsent.fetch_add(1, Ordering::Relaxed);
    }
}

/// Writes a PACKET_IN into `peer`'s writer queue, without waiting (a full one drops it).
fn push(hub: &Hub, peer: &Peer, bytes: Vec<u8>) {
    match peer.out.try_send(bytes) {
        Ok(()) => {
            hub.packet_ins_sent.fetch_add(1, Ordering::Relaxed);
        }
        Err(TrySendError::Full(_)) => {
            hub.packet_ins_dropped.fetch_add(1, Ordering::Relaxed);
            if peer.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                crate::log_warn!(
                    "rqvs switch: openflow {}: its queue is full: packet-ins to it are dropped and counted (logged once)",
                    peer.name
                );
            }
        }
        // The connection is ending.
        Err(TrySendError::Disconnected(_)) => {}
    }
}
