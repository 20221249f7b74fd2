//! AVX2 twin of [`SubModel::eval`] and of the scalar batch loop.
//!
//! Same IEEE operations in the same order as the scalar code: the 8 hidden units sit in two
//! 4-lane vectors (units 0-3 and 4-7), so the lane-wise sum of the two product vectors gives
//! `q_j + q_{j+4}`, the 128-bit halves give `(q0+q4)+(q2+q6)` and `(q1+q5)+(q3+q7)`, and the
//! last add and the bias are scalar. `MAXPD(z, 0)` returns `z` if `z > 0` else `+0.0`, as the
//! scalar code does. No FMA (see the crate docs), so the results agree bit for bit.

use std::arch::x86_64::*;

use crate::key::Key;
use crate::model::{bin, RqRmi, SubModel, GROUP};

/// Whether the CPU has AVX2 (checked at run time, cached by std).
pub(crate) fn available() -> bool {
    is_x86_feature_detected!("avx2")
}

/// AVX2 evaluation of one submodel.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) unsafe fn eval_avx2(m: &SubModel, key: f64) -> f64 {
    let x = (key - m.mean) * m.inv_std;
    // SAFETY: each pointer is to an [f64; 8] field of `m`; offsets 0 and 4 leave 4 valid
    // f64 each, and `loadu` has no alignment requirement.
    let (w0, w1, b0, b1, v0, v1) = unsafe {
        (
            _mm256_loadu_pd(m.w.as_ptr()),
            _mm256_loadu_pd(m.w.as_ptr().add(4)),
            _mm256_loadu_pd(m.b.as_ptr()),
            _mm256_loadu_pd(m.b.as_ptr().add(4)),
            _mm256_loadu_pd(m.v.as_ptr()),
            _mm256_loadu_pd(m.v.as_ptr().add(4)),
        )
    };
    let xv = _mm256_set1_pd(x);
    let zero = _mm256_setzero_pd();
    let z0 = _mm256_add_pd(_mm256_mul_pd(xv, w0), b0);
    let z1 = _mm256_add_pd(_mm256_mul_pd(xv, w1), b1);
    let q0 = _mm256_mul_pd(_mm256_max_pd(z0, zero), v0);
    let q1 = _mm256_mul_pd(_mm256_max_pd(z1, zero), v1);
    let s = _mm256_add_pd(q0, q1); // [s0, s1, s2, s3] = q_j + q_{j+4}
    let t = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1)); // [t0, t1]
    let u = _mm_add_sd(t, _mm_unpackhi_pd(t, t)); // t0 + t1
    _mm_cvtsd_f64(u) + m.b2
}

/// The AVX2 batch loop, twin of `RqRmi::lookup_batch_scalar`.
pub(crate) fn lookup_batch<K: Key>(model: &RqRmi<K>, keys: &[K], out: &mut [Option<usize>]) {
    assert!(available(), "AVX2 path called on a CPU without AVX2");
    // SAFETY: AVX2 presence was checked just above.
    unsafe { lookup_batch_avx2(model, keys, out) }
}

/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
unsafe fn lookup_batch_avx2<K: Key>(model: &RqRmi<K>, keys: &[K], out: &mut [Option<usize>]) {
    let last = model.widths.len() - 1;
    for (kc, oc) in keys.chunks(GROUP).zip(out.chunks_mut(GROUP)) {
        let mut x = [0.0; GROUP];
        let mut m = [0usize; GROUP];
        let mut y = [0.0; GROUP];
        for (xi, k) in x.iter_mut().zip(kc) {
            *xi = k.to_f64();
        }
        for s in 0..=last {
            let base = model.offsets[s];
            for g in 0..kc.len() {
                // SAFETY: this function runs only with AVX2 (its own precondition).
                y[g] = unsafe { eval_avx2(&model.subs[base + m[g]], x[g]) };
            }
            if s < last {
                for g in 0..kc.len() {
                    m[g] = bin(y[g], model.widths[s + 1]);
                }
            }
        }
        for g in 0..kc.len() {
            let (_, lo, hi) = model.window(m[g], y[g]);
            oc[g] = model.search(kc[g], lo, hi);
        }
    }
}

/// The AVX2 evaluation, for tests comparing it with [`SubModel::eval`]; `None` without AVX2.
pub(crate) fn eval_checked(m: &SubModel, key: f64) -> Option<f64> {
    if available() {
        // SAFETY: AVX2 presence was checked just above.
        Some(unsafe { eval_avx2(m, key) })
    } else {
        None
    }
}
