//! The sound error bound: exact piece analysis of the model's floating-point arithmetic.
//!
//! See the crate docs ("Why the error bound is sound") for the argument. In short, every
//! function here answers a question about *every* key of an interval, not about samples:
//!
//! - `linear_pieces` cuts a key interval where a hidden unit's computed pre-activation
//!   changes sign (found exactly by binary search: that value is monotone in the key) and
//!   gives, per piece, an interval that contains the computed output of every key of the piece.
//! - `route` partitions a key interval by the child submodel the computed routing picks.
//! - `leaf_bound` gives a leaf's `(err_lo, err_hi)` over all pieces it is responsible for.
//! - `all_bounds` recomputes every leaf bound of a model (used on load).

use crate::key::Key;
use crate::model::{bin, Forward, RqRmi, SubModel, HIDDEN};

/// Keys `a..=b`, all inside range `i`, routed to one submodel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    pub a: u64,
    pub b: u64,
    pub i: u32,
}

/// Exact for keys below 2^53 (every [`Key`] guarantees it).
#[inline(always)]
fn kf(k: u64) -> f64 {
    k as f64
}

/// A bound `δ` such that, on a piece where no unit changes state (between the keys whose
/// forward passes are `fa` and `fb`), the computed output differs by at most `δ` from one
/// linear function of the key (the exact-real evaluation of the active units' formula).
///
/// Standard forward error analysis with unit roundoff `u = 2^-53`; we use `EPSILON = 2u`
/// everywhere and double the result, which also absorbs the second-order terms and the
/// rounding of this computation and of `y ± 2δ` (the last term).
fn delta(m: &SubModel, fa: &Forward, fb: &Forward) -> f64 {
    const E: f64 = f64::EPSILON;
    let md = fa.d.abs().max(fb.d.abs());
    let mx = fa.x.abs().max(fb.x.abs());
    // x̃ = fl(fl(k - mean) * inv_std): error vs the exact (k - mean) * inv_std.
    let ex = E * (mx + m.inv_std * md);
    let mut acc = 0.0;
    let mut sq = 0.0;
    for j in 0..HIDDEN {
        if fa.z[j] > 0.0 {
            // Active on the whole piece (inactive units are exactly 0 on it).
            let mp = (fa.x * m.w[j]).abs().max((fb.x * m.w[j]).abs());
            let mz = fa.z[j].abs().max(fb.z[j].abs());
            let ez = m.w[j].abs() * ex + E * (mp + mz);
            let mq = (m.v[j] * mz).abs();
            acc += m.v[j].abs() * ez + E * mq;
            sq += mq;
        }
    }
    // Eight additions (reduction tree and bias), each with partial sums below `total`.
    let total = sq + m.b2.abs();
    2.0 * (acc + 8.0 * E * total) + 4.0 * E * (total + fa.y.abs().max(fb.y.abs())) + f64::MIN_POSITIVE
}

/// Sign state of unit `j` at key `k`, computed with exactly the operations of
/// [`SubModel::forward`].
#[inline(always)]
fn active(m: &SubModel, j: usize, k: u64) -> bool {
    let x = (kf(k) - m.mean) * m.inv_std;
    x * m.w[j] + m.b[j] > 0.0
}

/// The last key in `lo..hi` with state `s`, given `active(lo) == s != active(hi)`. The state
/// is monotone in the key, so this is the unique transition.
fn transition(m: &SubModel, j: usize, mut lo: u64, mut hi: u64, s: bool) -> u64 {
    // Analytic guess (x*w + b = 0), corrected by the exact test; binary search otherwise.
    let g = m.mean + (-m.b[j] / m.w[j]) / m.inv_std;
    if g.is_finite() {
        let g = g.floor();
        if g > lo as f64 && g < hi as f64 {
            let g = g as u64;
            if active(m, j, g) == s {
                lo = g;
                if active(m, j, g + 1) != s {
                    hi = g + 1;
                }
            } else {
                hi = g;
                if active(m, j, g - 1) == s {
                    lo = g - 1;
                }
            }
        }
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if active(m, j, mid) == s {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Partitions `a..=b` into consecutive pieces on which no hidden unit changes state and calls
/// `f(pa, pb, ylo, yhi)` for each, where `[ylo, yhi]` contains the computed output of every
/// key in `pa..=pb` (exactly `y(pa)` for a one-key piece).
pub(crate) fn linear_pieces(m: &SubModel, a: u64, b: u64, f: &mut impl FnMut(u64, u64, f64, f64)) {
    if a == b {
        let y = m.eval(kf(a));
        f(a, a, y, y);
        return;
    }
    let fb = m.forward(kf(b));
    let mut cur = a;
    loop {
        let fc = m.forward(kf(cur));
        let mut end = b;
        for j in 0..HIDDEN {
            let s = fc.z[j] > 0.0;
            if s != (fb.z[j] > 0.0) {
                end = end.min(transition(m, j, cur, b, s));
            }
        }
        if end == cur {
            f(cur, cur, fc.y, fc.y);
        } else {
            let fe = if end == b { fb } else { m.forward(kf(end)) };
            let d = 2.0 * delta(m, &fc, &fe);
            f(cur, end, fc.y.min(fe.y) - d, fc.y.max(fe.y) + d);
        }
        if end == b {
            return;
        }
        cur = end + 1;
    }
}

/// The children (`lo..=hi`) the keys of a linear piece with end points `fa`, `fb` may be
/// routed to, rounding margin included.
#[inline(always)]
fn bins(m: &SubModel, fa: &Forward, fb: &Forward, width: usize) -> (usize, usize) {
    let d = 2.0 * delta(m, fa, fb);
    (bin(fa.y.min(fb.y) - d, width), bin(fa.y.max(fb.y) + d, width))
}

/// Splits the linear piece `a..=b` (no unit changes state on it) into runs and calls
/// `f(child, pa, pb)` for every child a run may be routed to.
///
/// A run is normally routed to one child. Where the computed output lies within the rounding
/// margin of a routing boundary (an output that is flat right on a boundary, or the keys
/// next to a crossing), proving which side every key falls on would take one evaluation per
/// key; instead the run is given to both children. That is sound (each child's bound covers
/// it) and costs at most a duplicated piece per crossing.
fn split_bins(m: &SubModel, a: u64, b: u64, width: usize, f: &mut impl FnMut(usize, u64, u64)) {
    let binat = |k: u64| bin(m.eval(kf(k)), width);
    let fb = m.forward(kf(b));
    let mut cur = a;
    loop {
        let fc = m.forward(kf(cur));
        let jc = bin(fc.y, width);
        if cur == b {
            f(jc, cur, cur);
            return;
        }
        let (ja, jb) = bins(m, &fc, &fb, width);
        if ja == jb || bin(fb.y, width) == jc {
            // One child, or both ends on the same side and only the margin straddles.
            for j in ja..=jb {
                f(j, cur, b);
            }
            return;
        }
        // The end of the run of `jc`: where the computed routing leaves `jc` (linear guess,
        // then binary search between a key in `jc` and one outside).
        let (mut lo, mut hi) = (cur, b);
        let target = if fb.y > fc.y { (jc + 1) as f64 } else { jc as f64 };
        let frac = ((target - fc.y) / (fb.y - fc.y)).clamp(0.0, 1.0);
        let g = (cur + ((b - cur) as f64 * frac) as u64).clamp(cur, b - 1);
        if binat(g) == jc {
            lo = g;
            if binat(g + 1) != jc {
                hi = g + 1;
            }
        } else {
            hi = g;
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if binat(mid) == jc {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let c = lo;
        let (ja, jb) = if c == cur { (jc, jc) } else { bins(m, &fc, &m.forward(kf(c)), width) };
        for j in ja..=jb {
            f(j, cur, c);
        }
        cur = c + 1;
    }
}

/// Partitions `a..=b` by the child (of `width`) that the computed routing of `m` picks, and
/// calls `f(child, pa, pb)` for each part.
pub(crate) fn route(m: &SubModel, a: u64, b: u64, width: usize, f: &mut impl FnMut(usize, u64, u64)) {
    linear_pieces(m, a, b, &mut |pa, pb, ylo, yhi| {
        let (ja, jb) = (bin(ylo, width), bin(yhi, width));
        if ja == jb {
            f(ja, pa, pb)
        } else {
            split_bins(m, pa, pb, width, f)
        }
    });
}

/// `(err_lo, err_hi)` of leaf `m` over all `pieces` it is responsible for, with `n` ranges:
/// for every key `k` of a piece of range `i`, `pos(k) + err_lo <= i <= pos(k) + err_hi`.
/// `(0, 0)` when there is no piece.
pub(crate) fn leaf_bound(m: &SubModel, pieces: &[Piece], n: usize) -> (i64, i64) {
    if pieces.is_empty() {
        return (0, 0);
    }
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    for p in pieces {
        let i = i64::from(p.i);
        linear_pieces(m, p.a, p.b, &mut |_, _, ylo, yhi| {
            lo = lo.min(i - bin(yhi, n) as i64);
            hi = hi.max(i - bin(ylo, n) as i64);
        });
    }
    (lo, hi)
}

/// The pieces of all ranges, as responsibility of the single root submodel.
pub(crate) fn root_pieces<K: Key>(los: &[K], his: &[K]) -> Vec<Piece> {
    los.iter().zip(his).enumerate().map(|(i, (lo, hi))| Piece { a: lo.to_u64(), b: hi.to_u64(), i: i as u32 }).collect()
}

/// Routes every piece of one stage's groups to the next stage (`width` submodels).
pub(crate) fn route_stage(subs: &[SubModel], groups: &[Vec<Piece>], width: usize) -> Vec<Vec<Piece>> {
    let mut next = vec![Vec::new(); width];
    for (m, pieces) in subs.iter().zip(groups) {
        for p in pieces {
            route(m, p.a, p.b, width, &mut |j, a, b| next[j].push(Piece { a, b, i: p.i }));
        }
    }
    next
}

/// Recomputes every leaf bound of `model` from its parameters and ranges: `(bounds, pieces
/// per leaf)`.
pub(crate) fn all_bounds<K: Key>(model: &RqRmi<K>) -> (Vec<(i64, i64)>, Vec<u64>) {
    let mut groups = vec![root_pieces(&model.los, &model.his)];
    let last = model.widths.len() - 1;
    for s in 0..last {
        groups = route_stage(model.stage(s), &groups, model.widths[s + 1]);
    }
    let n = model.los.len();
    let bounds = model.stage(last).iter().zip(&groups).map(|(m, g)| leaf_bound(m, g, n)).collect();
    let counts = groups.iter().map(|g| g.len() as u64).collect();
    (bounds, counts)
}
