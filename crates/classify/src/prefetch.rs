//! A software prefetch: the batched lookups touch the memory of every key of a batch before they
//! use any of it, so that the cache misses of different keys overlap instead of following each
//! other. A prefetch is only a hint: without it (other architectures) results are identical, which
//! the tests check by comparing batched lookups (prefetching) with one-by-one lookups (not). The
//! switch's PMDs use it for their per-flow counters (`rqvs_switch::flowstats`).
#![allow(unsafe_code)]

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
