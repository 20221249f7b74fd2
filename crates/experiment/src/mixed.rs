//! Mixed replay: an attack ([`ReplayConfig::attack`](crate::replay::ReplayConfig::attack), e.g.
//! what `rqvs gen attack` writes) interleaved with the benign trace, as a second receive queue
//! of the same PMD.
//!
//! **The model.** The attack's packets arrive at `--attack-rate` per second of PMD time (packet
//! `i` at `i / rate`; the attack file is replayed in a loop for as long as the benign run
//! lasts) into a ring of `--rx-ring` packets; what overflows the ring is dropped (counted). The
//! PMD polls its queues in turn, as OVS-DPDK's PMD polls its rxqs: each iteration takes up to a
//! batch of what the attack's queue holds, then a batch of benign packets (as many as it can
//! take, or — at a constant `--rate` — what has arrived). An idle PMD waits for whichever
//! arrives first.
//!
//! **What is measured, per stream** ([`StreamStats`]): packets, the PMD time of their batches
//! (the handler's upcalls included: OVS-DPDK handles a batch's upcalls on the PMD), upcalls,
//! lost upcalls, hits by level and subtables probed per megaflow hit. The benign throughput
//! under attack is benign packets per second of *all* PMD time — the attack's share of the PMD
//! is what it takes from benign traffic (the Tuple Space Explosion paper's measure), and the
//! extra subtables it makes benign packets probe is the rest. At a constant `--rate` the benign
//! packets' latency (arrival to the end of their batch, PMD time) is kept in a log-linear
//! histogram ([`Latency`]).

use rqvs_datapath::Counters;

/// Sequence numbers of attack packets start here (benign ones at 0), so an upcall's sequence
/// number names its stream.
pub const ATTACK_SEQ: u64 = 1 << 56;

/// What one stream's packets cost and met ([`StreamStats::add_batch`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct StreamStats {
    /// Packets the PMD took.
    pub packets: u64,
    /// Batches of this stream.
    pub batches: u64,
    /// PMD time of those batches (with their upcalls), ns.
    pub pmd_ns: u64,
    pub emc_hits: u64,
    pub megaflow_hits: u64,
    pub model_hits: u64,
    pub upcalls: u64,
    /// Upcalls lost (the handler's queue was full).
    pub lost: u64,
    /// Subtables probed by megaflow hits.
    pub megaflow_subtables: u64,
}

impl StreamStats {
    /// Adds one batch: the design's counters before and after it, and its PMD time.
    pub fn add_batch(&mut self, before: &Counters, after: &Counters, pmd_ns: u64) {
        self.batches += 1;
        self.pmd_ns += pmd_ns;
        self.packets += after.received - before.received;
        self.emc_hits += after.emc_hit - before.emc_hit;
        self.megaflow_hits += (after.megaflow_hit + after.cd_hit) - (before.megaflow_hit + before.cd_hit);
        self.model_hits += (after.model_hit + after.remainder_hit) - (before.model_hit + before.remainder_hit);
        self.upcalls += after.upcall - before.upcall;
        self.lost += after.lost - before.lost;
        self.megaflow_subtables += after.megaflow_subtables - before.megaflow_subtables;
    }

    /// Subtables probed per megaflow hit (`None` without megaflow hits).
    pub fn subtables_per_hit(&self) -> Option<f64> {
        (self.megaflow_hits > 0).then(|| self.megaflow_subtables as f64 / self.megaflow_hits as f64)
    }

    /// PMD time per packet of this stream, ns.
    pub fn ns_per_packet(&self) -> f64 {
        self.pmd_ns as f64 / self.packets.max(1) as f64
    }
}

/// The attack's receive queue: packets arrive at `rate` per second of PMD time into a ring of
/// `ring` (module docs).
pub struct AttackQueue {
    rate: f64,
    ring: u64,
    /// Attack packets taken or dropped so far (the next one's number).
    pub seq: u64,
    pub dropped: u64,
}

impl AttackQueue {
    pub fn new(rate: f64, ring: u64) -> AttackQueue {
        AttackQueue { rate, ring, seq: 0, dropped: 0 }
    }

    /// Packets arrived by PMD time `now_ns` (packet `i` arrives at `i / rate`).
    fn arrived(&self, now_ns: u64) -> u64 {
        (now_ns as f64 * self.rate / 1e9) as u64 + 1
    }

    /// Packets waiting at `now_ns` (at most the ring; the overflow is dropped and skipped).
    pub fn waiting(&mut self, now_ns: u64) -> u64 {
        let backlog = self.arrived(now_ns).saturating_sub(self.seq);
        if backlog > self.ring {
            self.dropped += backlog - self.ring;
            self.seq += backlog - self.ring;
        }
        backlog.min(self.ring)
    }

    /// PMD time the next packet not yet taken arrives, ns.
    pub fn next_arrival_ns(&self) -> u64 {
        (self.seq as f64 * 1e9 / self.rate).ceil() as u64
    }

    /// Packets offered by PMD time `now_ns`.
    pub fn offered(&self, now_ns: u64) -> u64 {
        self.arrived(now_ns).max(self.seq)
    }
}

/// Sub-buckets per power of two of [`Latency`] (relative error at most 1/8).
const SUB: usize = 8;
const BUCKETS: usize = 64 * SUB;

/// A log-linear histogram of latencies in ns: 8 buckets per power of two, so a quantile is
/// reported within 12.5% (its bucket's upper bound, never below the true value).
#[derive(Clone, Debug)]
pub struct Latency {
    counts: Vec<u64>,
    n: u64,
    max: u64,
}

impl Default for Latency {
    fn default() -> Self {
        Latency { counts: vec![0; BUCKETS], n: 0, max: 0 }
    }
}

impl Latency {
    fn bucket(ns: u64) -> usize {
        if ns < SUB as u64 {
            return ns as usize;
        }
        let exp = 63 - ns.leading_zeros() as usize; // ≥ 3
        let mantissa = ((ns >> (exp - 3)) & (SUB as u64 - 1)) as usize;
        (exp - 2) * SUB + mantissa
    }

    /// The largest value of bucket `b`.
    fn upper(b: usize) -> u64 {
        if b < SUB {
            return b as u64;
        }
        let exp = b / SUB + 2;
        let mantissa = (b % SUB) as u64;
        let end = (u128::from(SUB as u64 + mantissa + 1) << (exp - 3)) - 1;
        u64::try_from(end).unwrap_or(u64::MAX)
    }

    pub fn record(&mut self, ns: u64) {
        self.counts[Self::bucket(ns)] += 1;
        self.n += 1;
        self.max = self.max.max(ns);
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    /// The `q` quantile (0..=1), ns: the upper bound of its bucket, at most the maximum.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.n == 0 {
            return None;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(Self::upper(b).min(self.max));
            }
        }
        Some(self.max)
    }

    /// `{count, p50_us, p99_us, p999_us, max_us}`.
    pub fn json(&self) -> serde_json::Value {
        let us = |v: Option<u64>| v.map(|ns| ns as f64 / 1e3);
        serde_json::json!({
            "count": self.n,
            "p50_us": us(self.quantile(0.5)),
            "p99_us": us(self.quantile(0.99)),
            "p999_us": us(self.quantile(0.999)),
            "max_us": us((self.n > 0).then_some(self.max)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_bound_their_values_within_an_eighth() {
        let mut last = 0;
        for ns in (0..5000u64).chain([1 << 20, (1 << 20) + 12_345, u64::MAX / 2, u64::MAX]) {
            let b = Latency::bucket(ns);
            assert!(b < BUCKETS, "{ns}");
            let up = Latency::upper(b);
            assert!(up >= ns, "{ns}: bucket {b} ends at {up}");
            assert!(up - ns <= ns / 8 + 1, "{ns}: bucket {b} ends at {up}");
            if ns < 5000 {
                assert!(b >= last, "buckets grow with the value");
                last = b;
            }
        }
    }

    #[test]
    fn quantiles_of_a_known_sample() {
        let mut h = Latency::default();
        assert_eq!(h.quantile(0.5), None);
        for ns in 1..=1000u64 {
            h.record(ns * 1000);
        }
        let p50 = h.quantile(0.5).unwrap();
        let p99 = h.quantile(0.99).unwrap();
        assert!((500_000..=562_500).contains(&p50), "{p50}");
        assert!((990_000..=1_000_000).contains(&p99), "{p99}");
        assert_eq!(h.quantile(1.0), Some(1_000_000));
        assert_eq!(h.max(), 1_000_000);
    }

    #[test]
    fn the_attack_ring_drops_its_overflow() {
        // 1 Mpps: packet i arrives at i µs.
        let mut q = AttackQueue::new(1e6, 10);
        assert_eq!(q.waiting(0), 1);
        q.seq += 1;
        assert_eq!(q.next_arrival_ns(), 1000);
        assert_eq!(q.waiting(4_500), 4); // packets 1..=4
        assert_eq!(q.dropped, 0);
        // At 100 µs, packets 1..=100 have arrived: the ring keeps 10, 90 are dropped.
        assert_eq!(q.waiting(100_000), 10);
        assert_eq!((q.dropped, q.seq), (90, 91));
        assert_eq!(q.offered(100_000), 101);
    }
}
