//! The key type.

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
}

/// An integer key the model can index.
///
/// The model evaluates its networks on `to_f64(key)`, and the error bound assumes that
/// conversion is **exact** (and monotone). That holds for keys of at most 53 bits; `u32` is
/// implemented. Wider keys (IPv6 halves, MACs) will need a split key or a different input
/// transform with its own rounding analysis — that is why this trait is sealed for now.
pub trait Key: Copy + Ord + std::fmt::Debug + Send + Sync + 'static + sealed::Sealed {
    /// Width in bits (recorded in the file format).
    const BITS: u32;
    /// The largest key.
    const MAX: Self;
    /// Exact conversion to `f64`.
    fn to_f64(self) -> f64;
    /// Widening conversion (the trainer does key arithmetic in `u64`).
    fn to_u64(self) -> u64;
    /// Narrowing conversion; `None` when out of range.
    fn from_u64(v: u64) -> Option<Self>;
}

impl Key for u32 {
    const BITS: u32 = 32;
    const MAX: Self = u32::MAX;
    #[inline(always)]
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    #[inline(always)]
    fn to_u64(self) -> u64 {
        u64::from(self)
    }
    #[inline(always)]
    fn from_u64(v: u64) -> Option<Self> {
        u32::try_from(v).ok()
    }
}
