//! The SIMD twins of the scalar arithmetic ([`SubModel::eval`] and the batch loop of
//! [`RqRmi::lookup_batch_with`]); which one runs is a [`Kernel`](crate::Kernel), chosen at run
//! time. The scalar code is the definition: every twin performs the same IEEE operations in the
//! same order, with no FMA (see the crate docs), so results agree bit for bit (tested for every
//! kernel the CPU has).
//!
//! - **AVX2** (unit-parallel): the 8 hidden units of one submodel sit in two 4-lane vectors
//!   (units 0-3 and 4-7), so the lane-wise sum of the two product vectors gives
//!   `q_j + q_{j+4}`, the 128-bit halves give `(q0+q4)+(q2+q6)` and `(q1+q5)+(q3+q7)`, and the
//!   last add and the bias are scalar. `MAXPD(z, 0)` returns `z` if `z > 0` else `+0.0`, as the
//!   scalar code does.
//! - **AVX-512** (unit-parallel): the 8 hidden units in one 8-lane vector, then the same
//!   reduction as AVX2 from its two 256-bit halves.
//!
//! Measured (`cargo run -p rqvs-rqrmi --release --example measure`, one run, Intel Xeon with
//! AVX-512, 2 shared cores), ns per key in batches at 500K random ranges: scalar 43.6, AVX2
//! 40.6, AVX-512 38.8 (2-5% under AVX2 on every set of the table, twice). A key-parallel
//! AVX-512 kernel (the 8 keys of a group in the lanes, each lane gathering its submodel's
//! parameters) was measured too and dropped: 50.9 ns, the gathers cost more than they save.
//! The bounded binary search in the range array, not the model, dominates at these sizes.

use std::arch::x86_64::*;

use crate::kernel::Kernel;
use crate::key::Key;
use crate::model::{RqRmi, SubModel};

/// One submodel by a SIMD kernel.
///
/// # Panics
/// When the CPU lacks the kernel's instructions, or for [`Kernel::Scalar`] (not a SIMD kernel).
pub(crate) fn eval(kernel: Kernel, m: &SubModel, key: f64) -> f64 {
    assert!(kernel.is_available(), "kernel {} called on a CPU without it", kernel.name());
    match kernel {
        // SAFETY: the kernel's instructions were checked available just above.
        Kernel::Avx2 => unsafe { eval_avx2(m, key) },
        // SAFETY: as above.
        Kernel::Avx512 => unsafe { eval_avx512(m, key) },
        Kernel::Scalar => unreachable!("the scalar kernel is not here"),
    }
}

/// A batch by a SIMD kernel (panics as [`eval`]).
pub(crate) fn lookup_batch<K: Key>(kernel: Kernel, model: &RqRmi<K>, keys: &[K], out: &mut [Option<usize>]) {
    assert!(kernel.is_available(), "kernel {} called on a CPU without it", kernel.name());
    match kernel {
        // SAFETY: the kernel's instructions were checked available just above.
        Kernel::Avx2 => unsafe { lookup_batch_avx2(model, keys, out) },
        // SAFETY: as above.
        Kernel::Avx512 => unsafe { lookup_batch_avx512(model, keys, out) },
        Kernel::Scalar => unreachable!("the scalar kernel is not here"),
    }
}

pub(crate) fn avx2_available() -> bool {
    is_x86_feature_detected!("avx2")
}

pub(crate) fn avx512_available() -> bool {
    is_x86_feature_detected!("avx512f")
}

/// AVX2 evaluation of one submodel.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn eval_avx2(m: &SubModel, key: f64) -> f64 {
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

/// The AVX2 batch loop, twin of the scalar one.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
unsafe fn lookup_batch_avx2<K: Key>(model: &RqRmi<K>, keys: &[K], out: &mut [Option<usize>]) {
    // SAFETY: this function runs only with AVX2 (its own precondition); the closure inherits
    // its target features.
    model.batch_loop(keys, out, |m, x| unsafe { eval_avx2(m, x) });
}

/// AVX-512 evaluation of one submodel: the 8 units in one vector.
///
/// # Safety
/// The CPU must support AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe fn eval_avx512(m: &SubModel, key: f64) -> f64 {
    let x = (key - m.mean) * m.inv_std;
    // SAFETY: each pointer is to an [f64; 8] field of `m`: 8 valid f64, unaligned loads.
    let (w, b, v) =
        unsafe { (_mm512_loadu_pd(m.w.as_ptr()), _mm512_loadu_pd(m.b.as_ptr()), _mm512_loadu_pd(m.v.as_ptr())) };
    let z = _mm512_add_pd(_mm512_mul_pd(_mm512_set1_pd(x), w), b);
    let q = _mm512_mul_pd(_mm512_max_pd(z, _mm512_setzero_pd()), v);
    let s = _mm256_add_pd(_mm512_castpd512_pd256(q), _mm512_extractf64x4_pd(q, 1)); // q_j + q_{j+4}
    let t = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1)); // [t0, t1]
    let u = _mm_add_sd(t, _mm_unpackhi_pd(t, t)); // t0 + t1
    _mm_cvtsd_f64(u) + m.b2
}

/// The AVX-512 batch loop, twin of the scalar one.
///
/// # Safety
/// The CPU must support AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe fn lookup_batch_avx512<K: Key>(model: &RqRmi<K>, keys: &[K], out: &mut [Option<usize>]) {
    // SAFETY: this function runs only with AVX-512F (its own precondition); the closure
    // inherits its target features.
    model.batch_loop(keys, out, |m, x| unsafe { eval_avx512(m, x) });
}
