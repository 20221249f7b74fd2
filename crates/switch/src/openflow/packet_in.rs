//! The packet-in thread: takes packet-ins from the PMDs' queue ([`crate::execute::PacketIn`])
//! and writes one PACKET_IN per connection that takes them (see the module docs of
//! [`crate::openflow`] for who does and what a PACKET_IN holds) into that connection's writer
//! queue, without waiting: a connection that already has its `controller_queue_size` of
//! PACKET_INs waiting for its socket (OVS's limit, 100 by default: [`Peer::queue_size`]), or
//! whose writer queue is full, is not sent it (counted, logged once per connection; OVS's
//! `rconn_send_with_limit`). A connection whose controller has a `controller_rate_limit`
//! goes through its packet-in schedulers first ([`super::pinsched`], [`Peer::schedule`]):
//! what they queue is sent from this thread's loop as their tokens come.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
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

/// Writes a PACKET_IN into `peer`'s writer queue, without waiting: dropped when the connection
/// has its [`Peer::queue_size`] of packet-ins waiting already, or its writer queue is full.
fn push(hub: &Hub, peer: &Peer, bytes: Vec<u8>) {
    let limit = peer.queue_size();
    if !admit(&peer.pins, limit) {
        OVERFLOWS.fetch_add(1, Ordering::Relaxed);
        dropped(hub, peer, || format!("{limit} packet-ins are waiting for its socket (controller_queue_size)"));
        return;
    }
    match peer.out.try_send(bytes) {
        Ok(()) => {
            hub.packet_ins_sent.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => {
            peer.pins.fetch_sub(1, Ordering::Relaxed);
            // Disconnected: the connection is ending.
            if let TrySendError::Full(_) = e {
                dropped(hub, peer, || "its writer queue is full".to_string());
            }
        }
    }
}

/// Counts one more packet-in waiting in a connection's writer queue, unless `limit` are
/// (OVS's `rconn_send_with_limit`). Counted before it is queued, so the writer never counts
/// one down first.
fn admit(pins: &AtomicUsize, limit: usize) -> bool {
    pins.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < limit).then_some(n + 1)).is_ok()
}

/// Packet-ins dropped for a connection's `controller_queue_size`, all bridges together (OVS's
/// coverage counter `rconn_overflow`, `ovs-appctl coverage/show`).
static OVERFLOWS: AtomicU64 = AtomicU64::new(0);

/// [`OVERFLOWS`] so far.
pub(crate) fn overflows() -> u64 {
    OVERFLOWS.load(Ordering::Relaxed)
}

/// A PACKET_IN not sent to `peer` (counted; the first one logged, with `why`, made only then).
fn dropped(hub: &Hub, peer: &Peer, why: impl FnOnce() -> String) {
    hub.packet_ins_dropped.fetch_add(1, Ordering::Relaxed);
    if peer.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
        crate::log_warn!(
            "rqvs switch: openflow {}: {}: packet-ins to it are dropped and counted (logged once)",
            peer.name,
            why()
        );
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use rqvs_openflow::{encode, Message, OFP13};

    use super::super::connection::write_one;
    use super::admit;

    /// `controller_queue_size`: at most `limit` packet-ins wait; writing one (not another
    /// message) makes room for the next.
    #[test]
    fn packet_ins_past_the_queue_size_are_refused_until_one_is_written() {
        let pins = AtomicUsize::new(0);
        assert!((0..10).all(|_| admit(&pins, 10)));
        assert!(!admit(&pins, 10), "the 11th waits past the limit");
        assert_eq!(pins.load(Ordering::Relaxed), 10);
        let mut sink: Box<dyn Write + Send> = Box::new(Vec::new());
        let reply = encode(OFP13, 1, &Message::BarrierReply).unwrap();
        assert!(write_one(&mut sink, &reply, &pins));
        assert!(!admit(&pins, 10), "a reply written is not a packet-in");
        let packet_in = Message::PacketIn(rqvs_openflow::flow_mod::PacketIn {
            buffer_id: rqvs_openflow::flow_mod::OFP_NO_BUFFER,
            total_len: 0,
            reason: 0,
            table_id: 0,
            cookie: 0,
            matches: rqvs_flow::Match::ANY,
            data: vec![],
        });
        assert!(write_one(&mut sink, &encode(OFP13, 0, &packet_in).unwrap(), &pins));
        assert!(admit(&pins, 10), "one written, one more may wait");
        assert!(!admit(&pins, 10));
        // A larger limit set live takes effect at once.
        assert!(admit(&pins, 11));
    }
}
