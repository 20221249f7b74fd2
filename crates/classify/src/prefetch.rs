//! A software prefetch: the batched lookups touch the memory of every key of a batch before they
//! use any of it, so that the cache misses of different keys overlap instead of following each
//! other. A prefetch is only a hint: without it (other architectures) results are identical, which
//! the tests check by comparing batched lookups (prefetching) with one-by-one lookups (not). The
//! switch's PMDs use it for their per-flow counters (`rqvs_switch::flowstats`).
//!
//! The hint itself lives in `rqvs_rqrmi` (its batch loop prefetches too), the one place of its
//! `unsafe`.

pub use rqvs_rqrmi::prefetch;
