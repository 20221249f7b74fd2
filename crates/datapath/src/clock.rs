//! The PMD clock: a nanosecond count that every time-dependent decision of a design reads (idle
//! expiry, subtable ranking, the cuckoo distributor's on/off, model training intervals, a
//! replay's time series and timed rule updates).
//!
//! - [`Clock::Measured`]: the clock advances by the measured time of the PMD's work (batches,
//!   upcalls handled on the PMD, housekeeping charged to it) — `rqvs replay`, and the switch.
//! - [`Clock::Virtual`]: it advances by fixed costs per packet and per upcall, so every result —
//!   counters, expiry, ranking — is a pure function of the inputs; background training is waited
//!   for at once. The tests and `rqvs coflows`' calibrated model use it.
//!
//! Designs keep the count themselves ([`crate::Design::now_ns`]); this type says how it moves.

use std::time::Instant;

/// How the PMD clock advances (module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Clock {
    Measured,
    Virtual { packet_ns: u64, upcall_ns: u64 },
}

impl Clock {
    pub fn is_measured(self) -> bool {
        self == Clock::Measured
    }

    /// A timestamp when the clock is measured (none is taken otherwise).
    #[inline]
    pub fn start(self) -> Option<Instant> {
        self.is_measured().then(Instant::now)
    }

    /// The PMD time of a batch of `packets` that started at `t0` ([`Clock::start`]).
    #[inline]
    pub fn batch_ns(self, t0: Option<Instant>, packets: usize) -> u64 {
        match (self, t0) {
            (Clock::Virtual { packet_ns, .. }, _) => packets as u64 * packet_ns,
            (Clock::Measured, Some(t0)) => t0.elapsed().as_nanos() as u64,
            (Clock::Measured, None) => 0,
        }
    }

    /// The handler's time for `handled` upcalls (or slow-path lookups) that started at `t0`.
    #[inline]
    pub fn upcall_ns(self, t0: Instant, handled: u64) -> u64 {
        match self {
            Clock::Measured => t0.elapsed().as_nanos() as u64,
            Clock::Virtual { upcall_ns, .. } => handled * upcall_ns,
        }
    }

    /// Housekeeping since `t0` as PMD time: measured, or nothing under the virtual clock (its
    /// costs are per packet and per upcall only).
    #[inline]
    pub fn housekeeping_ns(self, t0: Instant) -> u64 {
        match self {
            Clock::Measured => t0.elapsed().as_nanos() as u64,
            Clock::Virtual { .. } => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_costs_are_fixed() {
        let c = Clock::Virtual { packet_ns: 10, upcall_ns: 100 };
        assert_eq!(c.start(), None);
        assert_eq!(c.batch_ns(None, 32), 320);
        assert_eq!(c.upcall_ns(Instant::now(), 3), 300);
        assert_eq!(c.housekeeping_ns(Instant::now()), 0);
        assert!(Clock::Measured.start().is_some());
    }
}
