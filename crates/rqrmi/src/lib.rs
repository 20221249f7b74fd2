//! # rqvs-rqrmi: the learned range index
//!
//! An RQ-RMI (Range-Query Recursive Model Index, NuevoMatch §2.2 and NuevoMatchUP §5) maps an
//! integer key to the index of the range that contains it, in a sorted array of disjoint
//! inclusive ranges `[lo_i, hi_i]` (gaps allowed). The classifier above (iSets, NuevoMatchUP)
//! keeps its own per-range payload; this crate knows only ranges of integers.
//!
//! ```
//! use rqvs_rqrmi::{RqRmi, TrainConfig};
//! let ranges = [(0u32, 9), (10, 10), (100, 1 << 20), (u32::MAX - 5, u32::MAX)];
//! let model = RqRmi::train(&ranges, &TrainConfig::default()).unwrap();
//! assert_eq!(model.lookup(10), Some(1));
//! assert_eq!(model.lookup(50), None); // a gap
//! assert_eq!(model.lookup(u32::MAX), Some(3));
//! let (pos, lo, hi) = model.predict(5000);
//! assert!(lo <= pos && pos <= hi && (lo..=hi).contains(&2));
//! ```
//!
//! ## The model
//!
//! Stages of submodels; stage 0 has one submodel, stage `s` has `stage_widths[s]`. Every
//! submodel is a 1-8-1 ReLU MLP evaluated in `f64`:
//!
//! ```text
//! x  = (key - mean) * inv_std                 // analytic moments of the submodel's responsibility
//! q_j = max(x * w_j + b_j, 0) * v_j           // j = 0..8
//! y  = (((q0+q4) + (q2+q6)) + ((q1+q5) + (q3+q7))) + b2
//! ```
//!
//! Exactly these IEEE-754 operations, in exactly this order, with no fused multiply-add. A
//! non-leaf submodel's `y` is scaled so that `floor(y)` (clamped) is the next stage's submodel;
//! a leaf's `y` is scaled in positions, `pos = clamp(floor(y), 0, n-1)`. Each leaf carries an
//! error bound `(err_lo, err_hi)`: for every key that lies in range `i` and reaches the leaf,
//! `pos + err_lo <= i <= pos + err_hi`. [`RqRmi::lookup`] binary-searches that window of the
//! range array on the integer keys (never on floats), so the answer is exact whatever the
//! model's quality: a poor model only makes the window wider.
//!
//! ## Why the error bound is sound (the part that bites)
//!
//! The open NuevoMatch code checks the error only at the first transition point inside each
//! wide range and misclassifies. Here the bound is computed over *every* key of *every* range,
//! on the same floating-point arithmetic the inference runs ([`bound`] module):
//!
//! 1. Each range (and, inside it, each piece routed to one submodel) is cut at every key where
//!    some hidden unit's *computed* pre-activation `x*w_j+b_j` changes sign. That value is a
//!    composition of IEEE operations each monotone in the key (rounding is monotone), so it is
//!    monotone in the key and the exact cut key is found by binary search, not guessed.
//! 2. On a piece without a cut, every unit is either identically zero or the same linear formula,
//!    so the computed output differs from one linear function `L(key)` by at most `δ`, where `δ`
//!    is a forward rounding-error bound computed from the magnitudes of the intermediates at
//!    the piece's end points (`f64` unit roundoff, doubled for slack). So over the piece the
//!    computed output lies in `[min(y(a), y(b)) - 2δ, max(y(a), y(b)) + 2δ]`; for a one-key
//!    piece it is exactly `y(a)`.
//! 3. If that interval straddles a routing boundary, the piece is split at the key where the
//!    computed routing changes (linear guess, then binary search; bisection if rounding makes
//!    it non-monotone) until every piece goes to one child. One-key pieces are exact, so this
//!    terminates.
//! 4. A leaf's bound is the min/max of `i - pos` over the positions its pieces can produce.
//!
//! A 32-bit key is converted to `f64` exactly (the [`Key`] trait requires an exact
//! conversion), so no key rounding enters. `δ` is about `1e-16` relative: the bound is as
//! tight as an exact-arithmetic one except within a rounding error of a boundary.
//!
//! Loading a model recomputes all bounds from the stored parameters and rejects the file if
//! they differ from the stored ones, so a loaded model is sound whatever the file said.
//!
//! ## Training (in-process, no ML framework)
//!
//! Stage by stage. A submodel's *responsibility* is the list of pieces (key interval, range
//! index) routed to it by the already-trained stages (exactly, with the splitting above).
//! - **Normalisation**: `mean`/`std` of the sampling distribution over the responsibility,
//!   computed analytically (NuevoMatchUP App. A.1; our distribution is "a piece uniformly,
//!   then a key uniformly in it", which is the one the samples are drawn from).
//! - **Samples**: approximate sampling (§5.2): a piece uniformly, a key uniformly in it. When
//!   the responsibility has at most `samples/2` pieces, both end points of every piece are used
//!   instead (they are where the error of a piecewise-linear fit peaks, and it is cheaper).
//!   [`Sampling::Uniform`] is NuevoMatch's sampling instead (a key uniformly over the covered
//!   keys: a scan of every piece per submodel), kept to measure what approximate sampling saves
//!   (`rqvs paper`'s Fig. 7b); the bounds are exact either way, so both give correct lookups.
//! - **Fit**: closed form, no gradient descent. Knots `k_0 = min`, `k_1..k_7` at the sample
//!   quantiles; `w_j = 1`, `b_j = -k_j`; `v`, `b2` by weighted least squares (9×9 normal
//!   equations, tiny ridge). Target: `(i + 0.5) · width_next / n` for routing stages,
//!   `i + 0.5` for leaves.
//! - **Retraining**: a leaf whose bound exceeds `error_target` is refit (up to
//!   `max_sessions` sessions in all) with Lawson's reweighting (weights × |residual|), which
//!   moves least squares towards the minimax fit; the best bound is kept.
//! - **Stage widths**: automatic by the number of ranges ([`auto_stage_widths`]), starting
//!   from the paper's size categories; or given in [`TrainConfig::stage_widths`].
//!
//! ## Inference
//!
//! [`RqRmi::lookup`] and [`RqRmi::predict`] are scalar and are the truth.
//! [`RqRmi::lookup_batch`] runs groups of 8 keys stage by stage with the active [`Kernel`]:
//! the scalar definition or a SIMD twin of the submodel evaluation (AVX2: 8 hidden units in two
//! 4-lane vectors; AVX-512: in one 8-lane vector), chosen at run time — the best the CPU has,
//! or the one `RQVS_KERNEL=scalar|avx2|avx512` forces ([`Kernel::active`],
//! [`RqRmi::lookup_batch_with`] for an explicit one). Every twin performs the same operations
//! in the same order (the reduction tree above), so results agree bit for bit; the tests run
//! every kernel the CPU has against the scalar one. FMA is
//! deliberately *not* used: a fused multiply-add rounds once where the scalar code rounds
//! twice, and the scalar fallback (machines without FMA) would need a slow software FMA to match.
//!
//! ## Updates
//!
//! The model owns the sorted range array (it searches it). It never changes after training:
//! "remove" is the classifier marking its own payload for index `i` dead; an insert waits for
//! the next model.
//!
//! ## File format
//!
//! [`RqRmi::save`] / [`RqRmi::load`]: magic, version, key width, lengths, ranges, parameters,
//! bounds, training stats, CRC-32. Corrupt or truncated input gives a [`FormatError`], never a
//! panic (property-tested).
#![deny(unsafe_code)]

pub mod bound;
mod fit;
mod format;
mod kernel;
mod key;
mod model;
#[allow(unsafe_code)]
mod prefetch;
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod simd;
mod train;

pub use fit::Sampling;
pub use format::FormatError;
pub use kernel::{Kernel, KernelUnavailable, KERNEL_ENV};
pub use key::Key;
pub use model::{RqRmi, SubModel, HIDDEN};
pub use prefetch::prefetch;
pub use train::{auto_stage_widths, TrainConfig, TrainError, TrainStats};

/// The README's examples, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
