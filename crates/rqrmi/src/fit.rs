//! Closed-form fitting of one submodel: quantile knots + weighted least squares, with
//! Lawson reweighting for retraining sessions.

// Matrix code reads best with explicit row/column indices.
#![allow(clippy::needless_range_loop)]

use crate::bound::Piece;
use crate::model::{SubModel, HIDDEN};

/// SplitMix64: tiny, fast, and the same sequence on every platform and dependency version,
/// so a seed reproduces a model exactly.
#[derive(Clone, Debug)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0), by multiply-shift.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// How a submodel's training keys are drawn from its responsibility.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sampling {
    /// NuevoMatchUP's approximate sampling (§5.2): a piece uniformly, then a key uniformly in it
    /// — `O(samples)` memory accesses; normalised by that distribution's analytic moments
    /// (App. A.1). With at most `samples/2` pieces, both end points of every piece instead.
    #[default]
    Approximate,
    /// NuevoMatch's uniform sampling: a key uniformly over the keys the pieces cover (each piece
    /// weighted by its width) — a scan of every piece per submodel (`O(pieces)`: the cumulative
    /// widths) and a binary search per sample; normalised by that distribution's moments.
    Uniform,
}

/// ((mean, std), keys with their range index) of [`Sampling::Approximate`].
fn approximate(pieces: &[Piece], samples: usize, rng: &mut SplitMix64) -> ((f64, f64), Vec<(u64, u32)>) {
    // Analytic moments of "a piece uniformly, then a key uniformly in it" (App. A.1).
    let np = pieces.len() as f64;
    let mid = |p: &Piece| (p.a as f64 + p.b as f64) * 0.5;
    let mean = pieces.iter().map(mid).sum::<f64>() / np;
    let var = pieces
        .iter()
        .map(|p| {
            let w = (p.b - p.a) as f64 + 1.0;
            let c = mid(p) - mean;
            (w * w - 1.0) / 12.0 + c * c
        })
        .sum::<f64>()
        / np;
    let mut keys: Vec<(u64, u32)> = Vec::with_capacity(samples.max(2));
    if pieces.len() * 2 <= samples {
        for p in pieces {
            keys.push((p.a, p.i));
            if p.b != p.a {
                keys.push((p.b, p.i));
            }
        }
    } else {
        for _ in 0..samples {
            let p = &pieces[rng.below(pieces.len() as u64) as usize];
            keys.push((p.a + rng.below(p.b - p.a + 1), p.i));
        }
    }
    ((mean, var.sqrt()), keys)
}

/// ((mean, std), keys with their range index) of [`Sampling::Uniform`].
fn uniform(pieces: &[Piece], samples: usize, rng: &mut SplitMix64) -> ((f64, f64), Vec<(u64, u32)>) {
    let width = |p: &Piece| (p.b - p.a) as f64 + 1.0;
    let mid = |p: &Piece| (p.a as f64 + p.b as f64) * 0.5;
    // The cumulative widths: the scan of every piece that uniform sampling needs.
    let mut cum = Vec::with_capacity(pieces.len());
    let mut total = 0.0;
    for p in pieces {
        total += width(p);
        cum.push(total);
    }
    let mean = pieces.iter().map(|p| width(p) * mid(p)).sum::<f64>() / total;
    let var = pieces
        .iter()
        .map(|p| {
            let (w, c) = (width(p), mid(p) - mean);
            w * ((w * w - 1.0) / 12.0 + c * c)
        })
        .sum::<f64>()
        / total;
    let keys = (0..samples.max(2))
        .map(|_| {
            let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64) * total;
            let p = &pieces[cum.partition_point(|&c| c <= u).min(pieces.len() - 1)];
            (p.a + rng.below(p.b - p.a + 1), p.i)
        })
        .collect();
    ((mean, var.sqrt()), keys)
}

const F: usize = HIDDEN + 1;

/// The training set of one submodel and its current fit.
pub(crate) struct Fitter {
    mean: f64,
    inv_std: f64,
    xs: Vec<f64>,
    ts: Vec<f64>,
    ws: Vec<f64>,
    tmean: f64,
    knots: [f64; HIDDEN],
    coef: [f64; F],
}

impl Fitter {
    /// Samples the responsibility `pieces` (non-empty) as `sampling` says. Targets:
    /// `(i + 0.5) * scale`.
    pub fn new(pieces: &[Piece], scale: f64, samples: usize, sampling: Sampling, rng: &mut SplitMix64) -> Fitter {
        let (mean, keys) = match sampling {
            Sampling::Approximate => approximate(pieces, samples, rng),
            Sampling::Uniform => uniform(pieces, samples, rng),
        };
        let (mean, std) = mean;
        let inv_std = if std > 1e-9 { 1.0 / std } else { 1.0 };
        let xs: Vec<f64> = keys.iter().map(|&(k, _)| (k as f64 - mean) * inv_std).collect();
        let ts: Vec<f64> = keys.iter().map(|&(_, i)| (f64::from(i) + 0.5) * scale).collect();
        let tmean = ts.iter().sum::<f64>() / ts.len() as f64;
        let mut sorted = xs.clone();
        sorted.sort_unstable_by(f64::total_cmp);
        let mut knots = [0.0; HIDDEN];
        knots[0] = sorted[0];
        for (j, k) in knots.iter_mut().enumerate().skip(1) {
            *k = sorted[j * sorted.len() / HIDDEN];
        }
        let ws = vec![1.0; xs.len()];
        Fitter { mean, inv_std, xs, ts, ws, tmean, knots, coef: [0.0; F] }
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.xs.len()
    }

    #[inline(always)]
    fn features(&self, x: f64) -> [f64; F] {
        let mut phi = [1.0; F];
        for j in 0..HIDDEN {
            phi[j + 1] = (x - self.knots[j]).max(0.0);
        }
        phi
    }

    /// Weighted least squares of the targets on the current weights; returns the submodel.
    pub fn fit(&mut self) -> SubModel {
        let mut a = [[0.0; F]; F];
        let mut r = [0.0; F];
        for ((&x, &t), &w) in self.xs.iter().zip(&self.ts).zip(&self.ws) {
            let phi = self.features(x);
            let t = t - self.tmean;
            for i in 0..F {
                let wi = w * phi[i];
                if wi == 0.0 {
                    continue;
                }
                r[i] += wi * t;
                for j in i..F {
                    a[i][j] += wi * phi[j];
                }
            }
        }
        let maxd = (0..F).map(|i| a[i][i]).fold(0.0f64, f64::max);
        for i in 0..F {
            for j in 0..i {
                a[i][j] = a[j][i];
            }
            a[i][i] += 1e-10 * maxd + 1e-300;
        }
        self.coef = solve(a, r);
        let mut m = SubModel {
            mean: self.mean,
            inv_std: self.inv_std,
            w: [1.0; HIDDEN],
            b: [0.0; HIDDEN],
            v: [0.0; HIDDEN],
            b2: self.coef[0] + self.tmean,
        };
        for j in 0..HIDDEN {
            m.b[j] = -self.knots[j];
            m.v[j] = self.coef[j + 1];
        }
        if !m.is_valid() {
            // Numerically hopeless fit: a constant is still a (poor but) valid model.
            let mut c = SubModel::constant(self.tmean);
            c.mean = self.mean;
            c.inv_std = self.inv_std;
            self.coef = [0.0; F];
            return c;
        }
        m
    }

    /// Lawson's step towards the minimax fit: each weight times its current |residual|.
    pub fn reweight(&mut self) {
        let mut total = 0.0;
        for i in 0..self.xs.len() {
            let phi = self.features(self.xs[i]);
            let pred: f64 = phi.iter().zip(&self.coef).map(|(p, c)| p * c).sum();
            let res = (self.ts[i] - self.tmean - pred).abs();
            self.ws[i] *= res;
            total += self.ws[i];
        }
        if !(total > 0.0 && total.is_finite()) {
            self.ws.iter_mut().for_each(|w| *w = 1.0);
            return;
        }
        let n = self.ws.len() as f64;
        let floor = 1e-6 / n;
        for w in &mut self.ws {
            *w = (*w / total).max(floor) * n;
        }
    }
}

/// Solves `a x = r` by Gaussian elimination with partial pivoting; a zero pivot gives 0 for
/// that unknown.
fn solve(mut a: [[f64; F]; F], mut r: [f64; F]) -> [f64; F] {
    for c in 0..F {
        let p = (c..F).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs())).unwrap_or(c);
        a.swap(c, p);
        r.swap(c, p);
        let piv = a[c][c];
        if piv.abs() < 1e-300 {
            continue;
        }
        for i in c + 1..F {
            let f = a[i][c] / piv;
            if f == 0.0 {
                continue;
            }
            for j in c..F {
                a[i][j] -= f * a[c][j];
            }
            r[i] -= f * r[c];
        }
    }
    let mut x = [0.0; F];
    for c in (0..F).rev() {
        let piv = a[c][c];
        if piv.abs() < 1e-300 {
            continue;
        }
        let s: f64 = (c + 1..F).map(|j| a[c][j] * x[j]).sum();
        x[c] = (r[c] - s) / piv;
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solve_small_system() {
        let mut a = [[0.0; F]; F];
        let mut r = [0.0; F];
        for i in 0..F {
            a[i][i] = 2.0;
            if i + 1 < F {
                a[i][i + 1] = 1.0;
                a[i + 1][i] = 1.0;
            }
            r[i] = i as f64;
        }
        let x = solve(a, r);
        for i in 0..F {
            let mut s = 0.0;
            for j in 0..F {
                s += a[i][j] * x[j];
            }
            assert!((s - r[i]).abs() < 1e-9, "row {i}: {s} vs {}", r[i]);
        }
    }

    /// Approximate sampling draws a piece uniformly (a wide piece among 999 one-key ones gets
    /// ~0.1% of the samples); uniform sampling weights each piece by its width (~91%), and is
    /// normalised by the moments of every covered key.
    #[test]
    fn sampling_distributions_differ_as_documented() {
        let mut pieces = vec![Piece { a: 0, b: 0, i: 0 }, Piece { a: 1, b: 9_999, i: 1 }];
        // More pieces than samples/2, so approximate sampling samples rather than taking end points.
        pieces.extend((2..1000u32).map(|i| Piece { a: 10_000 + u64::from(i), b: 10_000 + u64::from(i), i }));
        let wide_share = |keys: &[(u64, u32)]| {
            assert!(keys.iter().all(|&(k, i)| k >= pieces[i as usize].a && k <= pieces[i as usize].b));
            keys.iter().filter(|k| k.1 == 1).count() as f64 / keys.len() as f64
        };
        let (_, keys) = approximate(&pieces, 1000, &mut SplitMix64::new(7));
        assert!(wide_share(&keys) < 0.01, "approximate: {}", wide_share(&keys));
        let ((mean, std), keys) = uniform(&pieces, 1000, &mut SplitMix64::new(7));
        assert!((wide_share(&keys) - 0.91).abs() < 0.04, "uniform: {}", wide_share(&keys));
        let all: Vec<f64> = pieces.iter().flat_map(|p| (p.a..=p.b).map(|k| k as f64)).collect();
        let m = all.iter().sum::<f64>() / all.len() as f64;
        let sd = (all.iter().map(|k| (k - m) * (k - m)).sum::<f64>() / all.len() as f64).sqrt();
        assert!((mean - m).abs() < 1e-6 * m && (std - sd).abs() < 1e-6 * sd, "{mean} {std} vs {m} {sd}");
    }

    #[test]
    fn fit_recovers_linear_target() {
        // Ranges of width 10 back to back: the rank is linear in the key.
        let pieces: Vec<Piece> =
            (0..1000u32).map(|i| Piece { a: u64::from(i) * 10, b: u64::from(i) * 10 + 9, i }).collect();
        let mut rng = SplitMix64::new(1);
        let mut f = Fitter::new(&pieces, 1.0, 4096, Sampling::Approximate, &mut rng);
        let m = f.fit();
        for p in pieces.iter().step_by(37) {
            let y = m.eval(p.a as f64);
            assert!((y - (f64::from(p.i) + 0.5)).abs() < 1.0, "piece {p:?}: y {y}");
        }
    }
}
