//! A software prefetch: the batch loop's bounded searches ask for the range arrays' lines of
//! every key of a group before any search reads them, and the classifiers above (re-exported as
//! `rqvs_classify::prefetch`) do the same for their buckets. Only a hint: without it (other
//! architectures) results are identical; every kernel runs the same loop, and the tests compare
//! the batch path with one-by-one lookups.

/// Asks the CPU to bring the cache line holding `*p` into L1.
#[inline(always)]
pub fn prefetch<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    #[allow(unused_unsafe)] // the intrinsic is safe to call on newer toolchains
    // SAFETY: PREFETCHT0 never faults and changes nothing the program can observe; `p` is a valid
    // reference in any case. SSE is part of the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const T as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
