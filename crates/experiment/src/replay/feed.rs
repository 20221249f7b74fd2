//! The packets as the PMD takes them: the [`Trace`] (or a PMD's share of it, by flow hash), its
//! passes ([`TraceKeys`]), the [`Feed`] that fills each batch with the verification slots of its
//! packets, and the constant-rate receive ring ([`Admission`]).

use rqvs_datapath::{Design, BATCH};
use rqvs_flow::FlowKey;

use super::results::RxStats;
use super::verifier::Verifier;
use crate::{inputs, Error};

/// Traces whose packets fit in this many bytes held ([`inputs::Held`]: 48 bytes a 5-tuple
/// packet, 128 one with wide fields) are held in memory after the counting pass (each pass then
/// reads memory, not the file); longer ones are read from the file on every pass. 48 MiB holds
/// 1,048,576 5-tuple packets — every ClassBench 100K trace, as before the key was widened.
pub const HOLD_BYTES: usize = 48 << 20;

/// The packets of a replay: a source, and which share of it (a PMD's, by flow hash).
#[derive(Clone)]
pub struct Trace {
    pub(super) source: inputs::PacketSource,
    /// `(i, n)`: only the packets whose flow hash is `i` modulo `n`.
    pub(super) share: Option<(usize, usize)>,
}

/// The keys of a [`Trace`], one pass.
pub struct TraceKeys {
    pass: inputs::PacketPass,
    share: Option<(usize, usize)>,
}

impl TraceKeys {
    /// The next key of the pass; `None` at its end.
    pub fn next_key(&mut self) -> Result<Option<FlowKey>, Error> {
        while let Some(e) = self.pass.next_entry()? {
            match self.share {
                Some((i, n)) if rqvs_datapath::flow_hash(&e.key.wire()) as usize % n != i => continue,
                _ => return Ok(Some(e.key)),
            }
        }
        Ok(None)
    }
}

impl Trace {
    /// Opens a pass over the trace.
    pub fn open(&self) -> Result<TraceKeys, Error> {
        Ok(TraceKeys { pass: self.source.open()?, share: self.share })
    }

    /// True when the packets are held in memory rather than read from the file on every pass.
    pub fn is_held(&self) -> bool {
        self.source.is_held()
    }
}

/// The constant-rate receive ring (`rate`): which packets have arrived by the PMD clock, and
/// which the full ring dropped.
pub(super) struct Admission {
    pub(super) rate: f64,
    pub(super) ring: u64,
    pub(super) total: u64,
    pub(super) warmup: u64,
    pub(super) rx: RxStats,
}

impl Admission {
    /// Packets the PMD may take now, from sequence number `seq` (the PMD idles until the next
    /// one arrives — or until `other_ns`, another queue's next arrival, when that is earlier:
    /// then `Some(0)`); drops what overflowed the ring, advancing `seq` past it. `None` when the
    /// last packet was dropped.
    pub(super) fn admit(&mut self, dp: &mut dyn Design, seq: &mut u64, other_ns: Option<u64>) -> Option<u64> {
        // Packet `i` arrives at i / rate seconds of PMD time.
        let mut arrived = ((dp.now_ns() as f64 * self.rate / 1e9) as u64 + 1).min(self.total);
        if arrived <= *seq {
            let at = self.arrival_ns(*seq);
            if let Some(other) = other_ns.filter(|&o| o < at) {
                dp.idle_until(other);
                return Some(0);
            }
            // Idle until packet `seq` arrives (by definition it has then; no float round trip).
            dp.idle_until(at);
            arrived = *seq + 1;
        }
        let backlog = arrived - *seq;
        if backlog > self.ring {
            // The ring holds `ring` packets; the rest are lost. (Counted as head drops: the
            // number is what a tail-dropping NIC loses; which packets differs.)
            let lost = backlog - self.ring;
            self.rx.dropped += lost;
            self.rx.dropped_after_warmup += (*seq + lost).saturating_sub((*seq).max(self.warmup));
            *seq += lost;
            if *seq >= self.total {
                return None;
            }
        }
        Some(arrived - *seq)
    }

    /// PMD time packet `seq` arrives, ns.
    pub(super) fn arrival_ns(&self, seq: u64) -> u64 {
        (seq as f64 * 1e9 / self.rate).ceil() as u64
    }
}

/// The packets of a run as the PMD takes them: pass after pass over the trace (or the attack),
/// each batch with the verification slots of its packets.
pub(super) struct Feed<'a> {
    trace: &'a Trace,
    /// Packets in one pass.
    pub(super) packets: u64,
    /// Sampled positions of a pass, ascending; their slots start at `base`.
    samples: &'a [u64],
    base: usize,
    /// `the trace`, `the attack` (in messages).
    what: &'static str,
    keys: TraceKeys,
    /// The pass `keys` reads and how far into it it is.
    pass: u64,
    at: u64,
    /// The next sample of this pass.
    next_sample: usize,
    pub(super) batch: Vec<FlowKey>,
    pub(super) slots: Vec<Option<usize>>,
}

impl<'a> Feed<'a> {
    pub(super) fn new(
        trace: &'a Trace,
        packets: u64,
        samples: &'a [u64],
        base: usize,
        what: &'static str,
    ) -> Result<Feed<'a>, Error> {
        Ok(Feed {
            trace,
            packets,
            samples,
            base,
            what,
            keys: trace.open()?,
            pass: 0,
            at: 0,
            next_sample: 0,
            batch: Vec::with_capacity(BATCH),
            slots: Vec::with_capacity(BATCH),
        })
    }

    /// The next key of the stream, at position `self.at` of the pass, and its sample slot.
    fn read(&mut self, verifier: &mut Verifier) -> Result<(FlowKey, Option<usize>), Error> {
        let Some(key) = self.keys.next_key()? else {
            return Err(Error(format!(
                "{} ended after {} of its {} packets in pass {}: it changed while being replayed",
                self.what,
                self.at,
                self.packets,
                self.pass + 1
            )));
        };
        let slot = (self.samples.get(self.next_sample) == Some(&self.at)).then(|| {
            self.next_sample += 1;
            let slot = self.base + self.next_sample - 1;
            verifier.keys[slot] = key;
            slot
        });
        self.at += 1;
        Ok((key, slot))
    }

    /// Reads the `n` packets from sequence number `seq` into the batch (skipping what a full
    /// ring dropped before it, starting a new pass at the end of one).
    pub(super) fn fill(&mut self, seq: u64, n: usize, verifier: &mut Verifier) -> Result<(), Error> {
        let len = self.packets;
        let (pass, pos) = (seq / len, seq % len);
        if pass != self.pass {
            self.keys = self.trace.open()?;
            (self.pass, self.at, self.next_sample) = (pass, 0, 0);
        }
        while self.at < pos {
            self.read(verifier)?;
        }
        self.batch.clear();
        self.slots.clear();
        for _ in 0..n {
            let (key, slot) = self.read(verifier)?;
            self.batch.push(key);
            self.slots.push(slot);
        }
        Ok(())
    }

    /// The sample slot of the packet with sequence number `seq` (an upcall's).
    pub(super) fn slot_of(&self, seq: u64) -> Option<usize> {
        self.samples.binary_search(&(seq % self.packets)).ok().map(|i| self.base + i)
    }
}
