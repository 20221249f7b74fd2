//! Which packets are verified against the reference.

use rand::seq::index::sample;
use rand::SeedableRng;

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
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut v = sample(&mut rng, packets, n).into_vec();
    v.sort_unstable();
    v
}
