//! ClassBench **smoothing** (Taylor & Turner, ToN 2007, §"smoothing"; `PrefixList::smooth` of the
//! original db_generator, read for its semantics): the parameter `s` spreads every spike of a
//! port-pair class's prefix-length distribution over its neighbours, so generated sets contain
//! (source, destination) length pairs the seed never had, at most `s` away (Manhattan distance).
//!
//! A class's distribution is a distribution of the **total** length `t = sl + dl` (0..=64) and,
//! for each total, a distribution of the **source** length `sl` (0..=32). For each total spike
//! `t` of probability `P(t)` and each of its source spikes `j` of probability `S(t, j)`:
//! 1. the total spreads symmetrically: `t - s + k` gets `B(2s, k) · P(t)` (k = 0..=2s);
//! 2. the source spike spreads over its own total: `j - h + k` gets `B(2h, k) · S(t, j)` with
//!    `h = ⌊s/2⌋` (k = 0..=2h) — *not* weighted by `P(t)`, as in the original;
//! 3. each new total `t ∓ m` (m = 1..=s) gets a source distribution around the lengths that keep
//!    the destination (`t - m`: sources `j - m ..= j`) or the source (`t + m`: `j ..= j + m`),
//!    widened by one on each side per 2 of the remaining distance `s - m`, binomially over that
//!    window and weighted by `S(t, j) · P(t)`.
//!
//! Lengths outside 0..=64 (totals) or 0..=32 (sources) are dropped; then the totals are
//! normalised, each total's sources are cut to the feasible ones (`sl ≤ t` and `t - sl ≤ 32`)
//! and normalised. `s = 0` is the identity, and the generator does not call this then (the
//! shared sets and rqvs' default use 0, so outputs stay as they were).

use crate::seedfile::TotalLength;

/// Largest smoothing accepted (the binomial weights use `C(2s, k)` in `f64`).
pub const MAX_SMOOTHING: u32 = 64;

/// `B(n, k) = C(n, k) / 2^n` for k = 0..=n.
fn binomial(n: usize) -> Vec<f64> {
    let mut row = vec![1.0f64];
    for _ in 0..n {
        let mut next = vec![0.0; row.len() + 1];
        for (k, &c) in row.iter().enumerate() {
            next[k] += c / 2.0;
            next[k + 1] += c / 2.0;
        }
        row = next;
    }
    row
}

/// Adds `weight · B(width, k)` to `out[start + k]` for every in-range index.
fn spread(out: &mut [f64], start: i64, width: usize, weight: f64) {
    for (k, b) in binomial(width).into_iter().enumerate() {
        let at = start + k as i64;
        if (0..out.len() as i64).contains(&at) {
            out[at as usize] += b * weight;
        }
    }
}

/// The smoothed distribution of one port-pair class (module docs). `class` holds the totals in
/// any order; totals and sources of zero probability are ignored. Returns the totals of positive
/// probability in increasing order, each with its sources of positive probability.
pub fn smooth(class: &[TotalLength], s: u32) -> Vec<TotalLength> {
    assert!(s <= MAX_SMOOTHING, "smoothing above {MAX_SMOOTHING}");
    let s = i64::from(s);
    let mut total = [0.0f64; 65];
    let mut source = vec![[0.0f64; 33]; 65];
    for t in class.iter().filter(|t| t.prob > 0.0) {
        let ti = i64::from(t.total);
        spread(&mut total, ti - s, 2 * s as usize, t.prob);
        let h = s / 2;
        for &(j, sp) in t.source.iter().filter(|x| x.1 > 0.0) {
            let j = i64::from(j);
            spread(&mut source[t.total as usize], j - h, 2 * h as usize, sp);
            for m in 1..=s {
                for (r, mut lo, mut hi) in [(ti - m, j - m, j), (ti + m, j, j + m)] {
                    if !(0..=64).contains(&r) {
                        continue;
                    }
                    let mut delta = s - m;
                    while delta >= 2 {
                        lo -= 1;
                        hi += 1;
                        delta -= 2;
                    }
                    spread(&mut source[r as usize], lo, (hi - lo) as usize, sp * t.prob);
                }
            }
        }
    }
    let sum: f64 = total.iter().sum();
    let mut out = Vec::new();
    if sum <= 0.0 {
        return out;
    }
    for (t, &p) in total.iter().enumerate() {
        if p <= 0.0 {
            continue;
        }
        let feasible = |sl: usize| sl <= t && t - sl <= 32;
        let src = &source[t];
        let ssum: f64 = (0..33).filter(|&j| feasible(j)).map(|j| src[j]).sum();
        if ssum <= 0.0 {
            continue; // no feasible source length: dropped (the generator renormalises)
        }
        let sources = (0..33).filter(|&j| feasible(j) && src[j] > 0.0).map(|j| (j as u8, src[j] / ssum)).collect();
        out.push(TotalLength { total: t as u8, prob: p / sum, source: sources, line: 0 });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spike(total: u8, prob: f64, source: &[(u8, f64)]) -> TotalLength {
        TotalLength { total, prob, source: source.to_vec(), line: 1 }
    }

    #[test]
    fn binomial_rows() {
        assert_eq!(binomial(0), vec![1.0]);
        assert_eq!(binomial(2), vec![0.25, 0.5, 0.25]);
        let b = binomial(64);
        assert!((b.iter().sum::<f64>() - 1.0).abs() < 1e-12 && b[32] > b[31] && b[0] > 0.0);
    }

    #[test]
    fn zero_is_the_identity_up_to_normalisation() {
        let class = [spike(40, 0.75, &[(24, 0.5), (16, 0.5)]), spike(64, 0.25, &[(32, 1.0)])];
        let out = smooth(&class, 0);
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].total, out[0].prob), (40, 0.75));
        assert_eq!(out[0].source, vec![(16, 0.5), (24, 0.5)]);
        assert_eq!((out[1].total, out[1].prob, out[1].source.clone()), (64, 0.25, vec![(32, 1.0)]));
    }

    #[test]
    fn one_spike_spreads_binomially_and_stays_within_reach() {
        let class = [spike(40, 1.0, &[(24, 1.0)])];
        for s in 1..=6u32 {
            let out = smooth(&class, s);
            let totals: Vec<u8> = out.iter().map(|t| t.total).collect();
            let want: Vec<u8> = (40 - s as u8..=40 + s as u8).collect();
            assert_eq!(totals, want, "s={s}");
            let b = binomial(2 * s as usize);
            for (k, t) in out.iter().enumerate() {
                assert!((t.prob - b[k]).abs() < 1e-12, "s={s} total {}", t.total);
                assert!((t.source.iter().map(|x| x.1).sum::<f64>() - 1.0).abs() < 1e-12);
                for &(sl, _) in &t.source {
                    let dl = t.total - sl;
                    // Manhattan distance from (24, 16) in (source, destination) lengths.
                    let d = (i32::from(sl) - 24).abs() + (i32::from(dl) - 16).abs();
                    assert!(d as u32 <= s, "s={s}: ({sl},{dl}) is {d} away");
                }
            }
            assert!((out.iter().map(|t| t.prob).sum::<f64>() - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn edges_are_cut_and_renormalised() {
        // Total 0 with source 0, and total 64 with source 32: spreading falls off both ends.
        let class = [spike(0, 0.5, &[(0, 1.0)]), spike(64, 0.5, &[(32, 1.0)])];
        let out = smooth(&class, 3);
        assert!((out.iter().map(|t| t.prob).sum::<f64>() - 1.0).abs() < 1e-12);
        for t in &out {
            for &(sl, p) in &t.source {
                assert!(sl <= t.total && t.total - sl <= 32 && p > 0.0, "infeasible ({sl}, {})", t.total);
            }
        }
        assert_eq!(out.first().map(|t| t.total), Some(0));
        assert_eq!(out.last().map(|t| t.total), Some(64));
    }
}
