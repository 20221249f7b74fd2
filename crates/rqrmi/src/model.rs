//! The trained model and its scalar inference (the truth every other path is compared with).

use crate::kernel::{Kernel, KernelUnavailable};
use crate::key::Key;
use crate::train::TrainStats;

/// Hidden units per submodel.
pub const HIDDEN: usize = 8;

/// Keys per group in [`RqRmi::lookup_batch`] (evaluated stage by stage, for instruction-level
/// parallelism).
pub(crate) const GROUP: usize = 8;

/// One 1-8-1 ReLU network with its input normalisation. See the crate docs for the exact
/// arithmetic; [`SubModel::eval`] is its definition.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C, align(64))]
pub struct SubModel {
    // The three weight vectors first, each one 64-byte cache line of the 64-byte-aligned
    // struct, so a SIMD kernel's vector loads never straddle lines (measured ~5% on batches).
    /// Hidden-layer weights.
    pub w: [f64; HIDDEN],
    /// Hidden-layer biases.
    pub b: [f64; HIDDEN],
    /// Output weights.
    pub v: [f64; HIDDEN],
    /// Mean of the responsibility (input normalisation).
    pub mean: f64,
    /// 1 / standard deviation of the responsibility (input normalisation), > 0.
    pub inv_std: f64,
    /// Output bias.
    pub b2: f64,
}

/// Everything the error analysis needs from one evaluation (same operations as `eval`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Forward {
    /// `key - mean`
    pub d: f64,
    /// normalised input
    pub x: f64,
    /// pre-activations `x*w_j + b_j`
    pub z: [f64; HIDDEN],
    /// output
    pub y: f64,
}

impl SubModel {
    /// A submodel whose output is the constant `c` (used for submodels nothing reaches).
    pub(crate) fn constant(c: f64) -> SubModel {
        SubModel { mean: 0.0, inv_std: 1.0, w: [0.0; HIDDEN], b: [0.0; HIDDEN], v: [0.0; HIDDEN], b2: c }
    }

    /// The submodel's output for `key` (already converted exactly to `f64`). This is the
    /// definition of the model's arithmetic; the AVX2 twin must match it bit for bit.
    #[inline(always)]
    pub fn eval(&self, key: f64) -> f64 {
        self.forward(key).y
    }

    #[inline(always)]
    pub(crate) fn forward(&self, key: f64) -> Forward {
        let d = key - self.mean;
        let x = d * self.inv_std;
        let mut z = [0.0; HIDDEN];
        let mut q = [0.0; HIDDEN];
        for j in 0..HIDDEN {
            z[j] = x * self.w[j] + self.b[j];
            // `max` with the same semantics as x86 MAXPD(z, 0): z if z > 0, else +0.0.
            let h = if z[j] > 0.0 { z[j] } else { 0.0 };
            q[j] = h * self.v[j];
        }
        let s0 = q[0] + q[4];
        let s1 = q[1] + q[5];
        let s2 = q[2] + q[6];
        let s3 = q[3] + q[7];
        let t0 = s0 + s2;
        let t1 = s1 + s3;
        let y = (t0 + t1) + self.b2;
        Forward { d, x, z, y }
    }

    /// [`eval`](Self::eval) computed by `kernel`; bit-for-bit equal to `eval` (tested).
    pub fn eval_with(&self, kernel: Kernel, key: f64) -> Result<f64, KernelUnavailable> {
        if !kernel.is_available() {
            return Err(KernelUnavailable(kernel));
        }
        Ok(match kernel {
            Kernel::Scalar => self.eval(key),
            #[cfg(target_arch = "x86_64")]
            simd => crate::simd::eval(simd, self, key),
            #[cfg(not(target_arch = "x86_64"))]
            _ => unreachable!("no SIMD kernel is available off x86-64"),
        })
    }

    /// All parameters finite and of magnitude below [`PARAM_LIMIT`], `inv_std > 0`: then no
    /// evaluation on a key below 2^53 can overflow or produce NaN.
    pub(crate) fn is_valid(&self) -> bool {
        let ok = |p: f64| p.is_finite() && p.abs() < PARAM_LIMIT;
        self.params().iter().all(|&p| ok(p)) && self.inv_std > 0.0
    }

    /// The 27 parameters in file order: mean, inv_std, w, b, v, b2.
    pub(crate) fn params(&self) -> [f64; PARAMS] {
        let mut p = [0.0; PARAMS];
        p[0] = self.mean;
        p[1] = self.inv_std;
        p[2..10].copy_from_slice(&self.w);
        p[10..18].copy_from_slice(&self.b);
        p[18..26].copy_from_slice(&self.v);
        p[26] = self.b2;
        p
    }

    pub(crate) fn from_params(p: &[f64; PARAMS]) -> SubModel {
        let mut m = SubModel::constant(0.0);
        m.mean = p[0];
        m.inv_std = p[1];
        m.w.copy_from_slice(&p[2..10]);
        m.b.copy_from_slice(&p[10..18]);
        m.v.copy_from_slice(&p[18..26]);
        m.b2 = p[26];
        m
    }
}

/// Parameters per submodel.
pub(crate) const PARAMS: usize = 3 * HIDDEN + 3;
/// Bound on parameter magnitudes (see [`SubModel::is_valid`]).
pub(crate) const PARAM_LIMIT: f64 = 1e15;

/// `clamp(floor(y), 0, width-1)`; monotone non-decreasing in `y` (NaN cannot occur, see
/// [`SubModel::is_valid`], and would give 0).
#[inline(always)]
pub(crate) fn bin(y: f64, width: usize) -> usize {
    if y >= 0.0 {
        // `as` saturates; y >= 0 so this is floor.
        (y as usize).min(width - 1)
    } else {
        0
    }
}

/// A trained RQ-RMI over keys of type `K`: the sorted range array, the submodels and the
/// per-leaf error bounds. Immutable after training; lookups take `&self` and may run
/// concurrently.
#[derive(Clone, Debug)]
pub struct RqRmi<K: Key = u32> {
    pub(crate) los: Vec<K>,
    pub(crate) his: Vec<K>,
    pub(crate) widths: Vec<usize>,
    /// Offset of each stage's first submodel in `subs`.
    pub(crate) offsets: Vec<usize>,
    pub(crate) subs: Vec<SubModel>,
    /// Per leaf: `(err_lo, err_hi)`, `pos + err_lo <= i <= pos + err_hi`.
    pub(crate) bounds: Vec<(i64, i64)>,
    /// Per leaf: number of pieces of ranges it is responsible for (for `mean_error`).
    pub(crate) leaf_pieces: Vec<u64>,
    pub(crate) stats: TrainStats,
}

impl<K: Key> RqRmi<K> {
    /// Assembles a model from its parts (bounds are supplied by the caller).
    pub(crate) fn from_parts(
        los: Vec<K>,
        his: Vec<K>,
        widths: Vec<usize>,
        subs: Vec<SubModel>,
        bounds: Vec<(i64, i64)>,
        leaf_pieces: Vec<u64>,
        stats: TrainStats,
    ) -> Self {
        let mut offsets = Vec::with_capacity(widths.len());
        let mut o = 0;
        for &w in &widths {
            offsets.push(o);
            o += w;
        }
        RqRmi { los, his, widths, offsets, subs, bounds, leaf_pieces, stats }
    }

    /// Number of ranges.
    pub fn len(&self) -> usize {
        self.los.len()
    }

    /// Always false: a model has at least one range ([`crate::TrainError::Empty`]).
    pub fn is_empty(&self) -> bool {
        self.los.is_empty()
    }

    /// Range `i` as `(lo, hi)`, inclusive.
    pub fn range(&self, i: usize) -> (K, K) {
        (self.los[i], self.his[i])
    }

    /// The ranges' lower ends, sorted.
    pub fn los(&self) -> &[K] {
        &self.los
    }

    /// The ranges' upper ends.
    pub fn his(&self) -> &[K] {
        &self.his
    }

    /// Submodels per stage (stage 0 has 1).
    pub fn stage_widths(&self) -> &[usize] {
        &self.widths
    }

    /// The submodels of stage `s`.
    pub fn stage(&self, s: usize) -> &[SubModel] {
        &self.subs[self.offsets[s]..self.offsets[s] + self.widths[s]]
    }

    /// Per leaf `(err_lo, err_hi)`: for a key in range `i` that reaches the leaf with
    /// position `pos`, `pos + err_lo <= i <= pos + err_hi`.
    pub fn leaf_bounds(&self) -> &[(i64, i64)] {
        &self.bounds
    }

    /// The largest error bound of any leaf, in positions: `max(-err_lo, err_hi)`.
    pub fn max_error(&self) -> u64 {
        self.bounds.iter().map(|&(lo, hi)| leaf_error(lo, hi)).max().unwrap_or(0)
    }

    /// The mean leaf error bound, weighted by the number of range pieces each leaf serves
    /// (the expected half-window of a lookup on a key drawn range-uniformly).
    pub fn mean_error(&self) -> f64 {
        let total: u64 = self.leaf_pieces.iter().sum();
        if total == 0 {
            return 0.0;
        }
        let s: f64 =
            self.bounds.iter().zip(&self.leaf_pieces).map(|(&(lo, hi), &c)| leaf_error(lo, hi) as f64 * c as f64).sum();
        s / total as f64
    }

    /// Bytes used by the model: submodels, bounds and the range array.
    pub fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        size_of::<Self>()
            + self.subs.len() * size_of::<SubModel>()
            + self.bounds.len() * size_of::<(i64, i64)>()
            + (self.los.len() + self.his.len()) * size_of::<K>()
            + (self.widths.len() + self.offsets.len()) * size_of::<usize>()
            + self.leaf_pieces.len() * size_of::<u64>()
    }

    /// Statistics of the training that built this model (also kept in the file).
    pub fn stats(&self) -> &TrainStats {
        &self.stats
    }

    /// Leaf index and leaf output for `key` (scalar).
    #[inline(always)]
    pub(crate) fn leaf_y(&self, x: f64) -> (usize, f64) {
        let mut m = 0;
        let last = self.widths.len() - 1;
        for s in 0..last {
            let y = self.subs[self.offsets[s] + m].eval(x);
            m = bin(y, self.widths[s + 1]);
        }
        (m, self.subs[self.offsets[last] + m].eval(x))
    }

    /// The search window for leaf `leaf` with output `y`: `(pos, lo, hi)`, inclusive.
    #[inline(always)]
    pub(crate) fn window(&self, leaf: usize, y: f64) -> (usize, usize, usize) {
        let n = self.los.len();
        let pos = bin(y, n);
        let (elo, ehi) = self.bounds[leaf];
        let lo = (pos as i64 + elo).clamp(0, n as i64 - 1) as usize;
        let hi = (pos as i64 + ehi).clamp(0, n as i64 - 1) as usize;
        (pos, lo, hi.max(lo))
    }

    /// The bounded search: the range in `lo..=hi` that contains `key`, if any.
    #[inline(always)]
    pub(crate) fn search(&self, key: K, lo: usize, hi: usize) -> Option<usize> {
        let w = &self.los[lo..=hi];
        let p = w.partition_point(|&l| l <= key);
        if p == 0 {
            return None;
        }
        let i = lo + p - 1;
        (key <= self.his[i]).then_some(i)
    }

    /// The model's prediction for `key`: `(pos, lo, hi)` — the predicted position and the
    /// inclusive window of the range array that contains the range holding `key`, if any.
    pub fn predict(&self, key: K) -> (usize, usize, usize) {
        let (leaf, y) = self.leaf_y(key.to_f64());
        self.window(leaf, y)
    }

    /// Index of the range containing `key`, or `None` when `key` is in a gap. Scalar.
    pub fn lookup(&self, key: K) -> Option<usize> {
        let (_, lo, hi) = self.predict(key);
        // The `his` line asked for with the `los` one the search reads first (see `batch_loop`).
        crate::prefetch::prefetch(&self.his[lo]);
        // One key has no other key's misses to overlap with: a window of up to eight lines has
        // all its `los` lines asked for at once, instead of one miss per step of the search.
        let per_line = (64 / std::mem::size_of::<K>()).max(1);
        if hi - lo < 8 * per_line {
            for i in (lo..=hi).step_by(per_line) {
                crate::prefetch::prefetch(&self.los[i]);
            }
            crate::prefetch::prefetch(&self.los[hi]);
        }
        self.search(key, lo, hi)
    }

    /// [`lookup`](Self::lookup) for each key: `out[i] = lookup(keys[i])`, with the active
    /// kernel ([`Kernel::active`]); every kernel gives identical results.
    ///
    /// # Panics
    /// If `out` is shorter than `keys`.
    #[inline]
    pub fn lookup_batch(&self, keys: &[K], out: &mut [Option<usize>]) {
        let k = Kernel::active();
        self.lookup_batch_with(k, keys, out).expect("the active kernel is available");
    }

    /// [`lookup_batch`](Self::lookup_batch) with a chosen kernel.
    ///
    /// # Panics
    /// If `out` is shorter than `keys`.
    pub fn lookup_batch_with(
        &self,
        kernel: Kernel,
        keys: &[K],
        out: &mut [Option<usize>],
    ) -> Result<(), KernelUnavailable> {
        assert!(out.len() >= keys.len(), "lookup_batch: out shorter than keys");
        if !kernel.is_available() {
            return Err(KernelUnavailable(kernel));
        }
        match kernel {
            Kernel::Scalar => self.lookup_batch_scalar(keys, out),
            #[cfg(target_arch = "x86_64")]
            simd => crate::simd::lookup_batch(simd, self, keys, out),
            #[cfg(not(target_arch = "x86_64"))]
            _ => unreachable!("no SIMD kernel is available off x86-64"),
        }
        Ok(())
    }

    /// The scalar batch path: the definition the SIMD kernels are twins of.
    fn lookup_batch_scalar(&self, keys: &[K], out: &mut [Option<usize>]) {
        self.batch_loop(keys, out, |m, x| m.eval(x));
    }

    /// The batch loop every kernel runs, with its own submodel evaluation `eval`: groups of
    /// [`GROUP`] keys, stage by stage (for instruction-level parallelism), then the bounded
    /// searches. Inlined into each kernel, so a SIMD `eval` is compiled with its kernel's
    /// target features.
    #[inline(always)]
    pub(crate) fn batch_loop(&self, keys: &[K], out: &mut [Option<usize>], eval: impl Fn(&SubModel, f64) -> f64) {
        let last = self.widths.len() - 1;
        for (kc, oc) in keys.chunks(GROUP).zip(out.chunks_mut(GROUP)) {
            let mut x = [0.0; GROUP];
            let mut m = [0usize; GROUP];
            let mut y = [0.0; GROUP];
            for (xi, k) in x.iter_mut().zip(kc) {
                *xi = k.to_f64();
            }
            for s in 0..=last {
                let base = self.offsets[s];
                for g in 0..kc.len() {
                    y[g] = eval(&self.subs[base + m[g]], x[g]);
                }
                if s < last {
                    for g in 0..kc.len() {
                        m[g] = bin(y[g], self.widths[s + 1]);
                    }
                }
            }
            // The windows first, each one's lines of `los` and `his` asked for, then the
            // searches: a search reads `his` only after its `los` (two misses one after the
            // other when the arrays are out of cache); asked for together, and for all the
            // group's keys, they overlap.
            let mut win = [(0usize, 0usize); GROUP];
            for g in 0..kc.len() {
                let (_, lo, hi) = self.window(m[g], y[g]);
                win[g] = (lo, hi);
                crate::prefetch::prefetch(&self.los[lo]);
                crate::prefetch::prefetch(&self.his[lo]);
            }
            for g in 0..kc.len() {
                oc[g] = self.search(kc[g], win[g].0, win[g].1);
            }
        }
    }
}

/// A leaf's error in positions.
pub(crate) fn leaf_error(lo: i64, hi: i64) -> u64 {
    (-lo).max(hi).max(0) as u64
}
