//! The packet-in scheduler of a controller connection with `controller_rate_limit` (OVS's
//! `pinsched`, read for its semantics): a token bucket of `burst` packets refilled at `rate`
//! packets per second, in front of one queue per input port.
//!
//! - A packet-in goes straight out when nothing is queued and the bucket holds a token
//!   (counted `bypassed`); otherwise it is queued on its input port's queue (`queued`), and
//!   when `burst` packets are queued already one is first dropped (`dropped`): the oldest of
//!   the longest queue, a random one among equally long ones.
//! - [`PinSched::run`] sends queued packet-ins round-robin over the queues, at most
//!   [`MAX_PER_RUN`] a run, as the tokens allow.
//! - A packet costs 1000 tokens and a millisecond adds `rate` of them (no division, so no
//!   round-off), up to `burst * 1000`; the bucket starts full.
//!
//! Pure logic over a millisecond clock the caller passes, so the tests drive it with a fake
//! one.

use std::collections::VecDeque;

/// Tokens one packet-in costs.
const COST: u64 = 1000;

/// Queued packet-ins sent at most per [`PinSched::run`] (OVS's 50).
pub const MAX_PER_RUN: usize = 50;

/// A scheduler's limits, as OVS takes a `Controller` row's `controller_rate_limit` and
/// `controller_burst_limit` (`pinsched_set_limits`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Packet-ins per second.
    pub rate: u32,
    /// The bucket's size and the most packet-ins queued, in packets.
    pub burst: u32,
}

impl Limits {
    /// `rate` ≤ 0 → 1000; `burst` absent or ≤ 0 → `rate / 4`; the burst at least 1 (the
    /// schema asks rate ≥ 100, burst ≥ 25; out-of-range values are taken as OVS takes them).
    pub fn ovs(rate: i64, burst: Option<i64>) -> Limits {
        let rate = if rate <= 0 { 1000 } else { rate.min(i64::from(i32::MAX)) };
        let burst = match burst {
            Some(b) if b > 0 => b.min(i64::from(i32::MAX) / 1000),
            _ => rate / 4,
        };
        Limits { rate: rate as u32, burst: burst.max(1) as u32 }
    }
}

/// A scheduler's counters (`Controller.status:packet-in-KIND-*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PinStats {
    /// Queued now (`backlog`).
    pub backlog: u64,
    /// Sent without queueing (`bypassed`).
    pub bypassed: u64,
    /// Queued, ever (`queued`).
    pub queued: u64,
    /// Dropped from a full queue (`dropped`).
    pub dropped: u64,
}

/// One scheduler: the bucket, the per-port queues (in the order they were made; an emptied
/// queue is removed) and the counters.
#[derive(Debug)]
pub struct PinSched<T> {
    limits: Limits,
    tokens: u64,
    last_fill: u64,
    queues: Vec<(u32, VecDeque<T>)>,
    /// The queue the next [`PinSched::run`] sends from first.
    next: usize,
    n_queued: usize,
    stats: PinStats,
    /// A xorshift state for the tie among longest queues.
    rng: u64,
}

impl<T> PinSched<T> {
    /// A scheduler with a full bucket at `now_ms`.
    pub fn new(limits: Limits, now_ms: u64) -> PinSched<T> {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0x9e37_79b9_7f4a_7c15, |d| d.as_nanos() as u64);
        PinSched {
            limits,
            tokens: u64::from(limits.burst) * COST,
            last_fill: now_ms,
            queues: Vec::new(),
            next: 0,
            n_queued: 0,
            stats: PinStats::default(),
            rng: seed | 1,
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// New limits: the bucket no fuller than the new burst, the queues dropped down to it.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
        self.tokens = self.tokens.min(u64::from(limits.burst) * COST);
        while self.n_queued > limits.burst as usize {
            self.drop_one();
        }
    }

    pub fn stats(&self) -> PinStats {
        PinStats { backlog: self.n_queued as u64, ..self.stats }
    }

    /// Adds the tokens of the time since the last fill (once they make a whole packet).
    fn refill(&mut self, now_ms: u64) {
        let elapsed = now_ms.saturating_sub(self.last_fill);
        let tokens = self.tokens.saturating_add(elapsed.saturating_mul(u64::from(self.limits.rate)));
        if tokens >= COST {
            self.last_fill = now_ms.max(self.last_fill);
            self.tokens = tokens.min(u64::from(self.limits.burst) * COST);
        }
    }

    fn take_token(&mut self, now_ms: u64) -> bool {
        if self.tokens < COST {
            self.refill(now_ms);
        }
        if self.tokens >= COST {
            self.tokens -= COST;
            true
        } else {
            false
        }
    }

    /// A packet-in from `port`: `Some` to send now, `None` when queued.
    pub fn send(&mut self, now_ms: u64, port: u32, item: T) -> Option<T> {
        if self.n_queued == 0 && self.take_token(now_ms) {
            self.stats.bypassed += 1;
            return Some(item);
        }
        if self.n_queued >= self.limits.burst as usize {
            self.drop_one();
        }
        match self.queues.iter_mut().find(|(p, _)| *p == port) {
            Some((_, q)) => q.push_back(item),
            None => self.queues.push((port, VecDeque::from([item]))),
        }
        self.n_queued += 1;
        self.stats.queued += 1;
        None
    }

    /// Queued packet-ins the tokens allow now (at most [`MAX_PER_RUN`]), round-robin over
    /// the ports' queues, appended to `out`.
    pub fn run(&mut self, now_ms: u64, out: &mut Vec<T>) {
        for _ in 0..MAX_PER_RUN {
            if self.n_queued == 0 || !self.take_token(now_ms) {
                return;
            }
            if self.next >= self.queues.len() {
                self.next = 0;
            }
            let (at, n) = (self.next, self.queues.len());
            if let Some(item) = self.pop(at) {
                out.push(item);
            }
            // A queue left in place: the next one is after it; one removed: it is at `at`.
            if self.queues.len() == n {
                self.next = at + 1;
            }
        }
    }

    /// How long until [`PinSched::run`] can send a queued packet-in (`None`: none queued).
    pub fn wait_ms(&self, now_ms: u64) -> Option<u64> {
        if self.n_queued == 0 {
            return None;
        }
        let elapsed = now_ms.saturating_sub(self.last_fill);
        let have = self.tokens.saturating_add(elapsed.saturating_mul(u64::from(self.limits.rate)));
        Some(COST.saturating_sub(have).div_ceil(u64::from(self.limits.rate.max(1))))
    }

    /// The oldest packet of queue `at`; the queue removed once empty.
    fn pop(&mut self, at: usize) -> Option<T> {
        let item = self.queues.get_mut(at)?.1.pop_front();
        if item.is_some() {
            self.n_queued -= 1;
        }
        if self.queues[at].1.is_empty() {
            self.queues.remove(at);
            if self.next > at {
                self.next -= 1;
            }
        }
        item
    }

    /// Drops the oldest packet of the longest queue (a random one of equally long ones).
    fn drop_one(&mut self) {
        let Some(longest) = self.queues.iter().map(|(_, q)| q.len()).max() else {
            return;
        };
        let ties: Vec<usize> = (0..self.queues.len()).filter(|&i| self.queues[i].1.len() == longest).collect();
        let at = ties[(self.random() % ties.len() as u64) as usize];
        self.pop(at);
        self.stats.dropped += 1;
    }

    fn random(&mut self) -> u64 {
        crate::xorshift(&mut self.rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sched(rate: i64, burst: i64) -> PinSched<u32> {
        PinSched::new(Limits::ovs(rate, Some(burst)), 0)
    }

    #[test]
    fn limits_as_ovs_takes_them() {
        assert_eq!(Limits::ovs(100, Some(25)), Limits { rate: 100, burst: 25 });
        assert_eq!(Limits::ovs(1000, None), Limits { rate: 1000, burst: 250 });
        assert_eq!(Limits::ovs(0, None), Limits { rate: 1000, burst: 250 });
        assert_eq!(Limits::ovs(-5, Some(0)), Limits { rate: 1000, burst: 250 });
        assert_eq!(Limits::ovs(2, None), Limits { rate: 2, burst: 1 });
    }

    #[test]
    fn a_full_bucket_then_the_rate() {
        let mut s = sched(100, 25);
        // The bucket starts full: 25 go straight out, the rest are queued.
        let straight = (0..40).filter(|i| s.send(0, 1, *i).is_some()).count();
        assert_eq!(straight, 25);
        assert_eq!(s.stats(), PinStats { backlog: 15, bypassed: 25, queued: 15, dropped: 0 });
        let mut out = Vec::new();
        s.run(0, &mut out);
        assert!(out.is_empty(), "no token yet");
        assert_eq!(s.wait_ms(0), Some(10), "100/s: a token each 10 ms");
        s.run(9, &mut out);
        assert!(out.is_empty());
        s.run(10, &mut out);
        assert_eq!(out, vec![25]);
        // 100 ms more: 10 tokens, sent in their order.
        s.run(110, &mut out);
        assert_eq!(out, (25..36).collect::<Vec<_>>());
        // A queue in front: a new packet-in waits behind it even with a token.
        s.run(2000, &mut out);
        assert_eq!(out.len(), 15);
        assert_eq!(s.stats().backlog, 0);
        assert_eq!(s.wait_ms(2000), None);
        // As OVS's bucket, refilled only when short of a token: the 21 tokens left, then a
        // bucket refilled to the burst (capped) after the idle 8 s.
        let straight = (0..60).filter(|i| s.send(10_000, 1, *i).is_some()).count();
        assert_eq!(straight, 21 + 25);
    }

    #[test]
    fn a_full_queue_drops_from_the_longest() {
        let mut s = sched(100, 25);
        for i in 0..25 {
            assert_eq!(s.send(0, 1, i), Some(i));
        }
        // Port 1 queues 20, port 2 five; then port 3's packets each drop port 1's oldest.
        for i in 100..120 {
            assert!(s.send(0, 1, i).is_none());
        }
        for i in 200..205 {
            assert!(s.send(0, 2, i).is_none());
        }
        for i in 300..310 {
            assert!(s.send(0, 3, i).is_none());
        }
        let st = s.stats();
        assert_eq!((st.backlog, st.queued, st.dropped), (25, 35, 10));
        let mut out = Vec::new();
        s.run(1000, &mut out);
        out.sort_unstable();
        let mut want: Vec<u32> = (110..120).chain(200..205).chain(300..310).collect();
        want.sort_unstable();
        assert_eq!(out, want, "port 1's oldest ten were dropped");
    }

    #[test]
    fn ties_are_broken_at_random() {
        let mut dropped_from = [0usize; 2];
        for _ in 0..64 {
            let mut s = sched(100, 25);
            for i in 0..25 {
                s.send(0, 9, i);
            }
            for i in 0..12 {
                s.send(0, 1, i);
                s.send(0, 2, 100 + i);
            }
            s.send(0, 3, 0);
            s.send(0, 3, 1); // queues 12, 12, 1 = 25: this one drops from port 1 or 2.
            let lens: Vec<usize> = s.queues.iter().map(|(_, q)| q.len()).collect();
            assert_eq!(lens.iter().sum::<usize>(), 25);
            dropped_from[usize::from(lens[0] == 12)] += 1;
        }
        assert!(dropped_from[0] > 0 && dropped_from[1] > 0, "{dropped_from:?}");
    }

    #[test]
    fn round_robin_over_ports_at_most_fifty_a_run() {
        let mut s = sched(1000, 200);
        for i in 0..200 {
            s.send(0, 0, i);
        }
        for i in 0..60 {
            s.send(0, 1, 1000 + i);
            s.send(0, 2, 2000 + i);
            s.send(0, 3, 3000 + i);
        }
        assert_eq!(s.stats().backlog, 180);
        let mut out = Vec::new();
        s.run(1_000_000, &mut out);
        assert_eq!(out.len(), MAX_PER_RUN);
        assert_eq!(&out[..6], &[1000, 2000, 3000, 1001, 2001, 3001]);
        // Port 2 runs dry first: the turn passes on to the others in order.
        let mut s = sched(1000, 200);
        for i in 0..200 {
            s.send(0, 0, i);
        }
        for (p, n) in [(1, 3), (2, 1), (3, 3)] {
            for i in 0..n {
                s.send(0, p, p * 10 + i);
            }
        }
        let mut out = Vec::new();
        s.run(1_000_000, &mut out);
        assert_eq!(out, vec![10, 20, 30, 11, 31, 12, 32]);
    }

    #[test]
    fn a_live_limit_change_drops_down_to_the_new_burst() {
        let mut s = sched(100, 50);
        for i in 0..50 {
            s.send(0, 0, i);
        }
        for i in 0..40 {
            s.send(0, 1, i);
        }
        s.set_limits(Limits::ovs(200, Some(25)));
        let st = s.stats();
        assert_eq!((st.backlog, st.dropped), (25, 15));
        // The faster rate: 5 ms a token.
        assert_eq!(s.wait_ms(0), Some(5));
        let mut out = Vec::new();
        s.run(50, &mut out);
        assert_eq!(out.len(), 10);
    }
}
