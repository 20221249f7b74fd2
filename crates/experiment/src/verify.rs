//! Which packets are verified against the reference.

use rqvs_flow::rng::Rng;

/// The label of the verification sample's stream ([`Rng::fork`]).
const STREAM: u64 = 0x7665_7269_6679; // "verify"

/// Above this many rule×packet checks, verification samples instead of checking every packet.
pub const FULL_VERIFY_BUDGET: u64 = 4_000_000_000;
/// Packets sampled when the set is too big to verify in full and no count is given.
pub const DEFAULT_SAMPLE: usize = 10_000;

/// True when every packet can be verified against a linear scan in reasonable time.
pub fn full_verification_affordable(rules: usize, packets: usize) -> bool {
    rules as u64 * packets as u64 <= FULL_VERIFY_BUDGET
}

/// Indexes of the packets to verify: `requested` of them (capped at `packets`) sampled with
/// `seed`, or by default all when affordable and [`DEFAULT_SAMPLE`] otherwise. Ascending.
pub fn sample_indexes(rules: usize, packets: usize, requested: Option<usize>, seed: u64) -> Vec<usize> {
    let n = match requested {
        Some(n) => n.min(packets),
        None if full_verification_affordable(rules, packets) => packets,
        None => DEFAULT_SAMPLE.min(packets),
    };
    if n == packets {
        return (0..packets).collect();
    }
    Rng::fork(seed, STREAM).sample_sorted(packets, n)
}

#[cfg(test)]
mod tests {
    /// The verification sample is a function of the seed alone, pinned.
    #[test]
    fn the_sample_is_pinned() {
        let v = super::sample_indexes(1_000_000, 100_000, Some(8), 5);
        assert_eq!(v, PIN);
        assert_eq!(super::sample_indexes(10, 5, None, 5), (0..5).collect::<Vec<_>>());
        assert_ne!(super::sample_indexes(1_000_000, 100_000, Some(8), 6), PIN);
    }
    const PIN: [usize; 8] = [8098, 10232, 38151, 41456, 51959, 59518, 62277, 67001];
}
