//! # rqvs-capi: librqvs, the C library
//!
//! rqvs's classifiers — the reference, tuple space search, TupleMerge, the OpenFlow slow path,
//! NuevoMatchUP — and the live NuevoMatchUP with its background trainer, behind a C ABI, for
//! programs that want a fast, updatable packet classifier without the command line (DPDK and
//! VPP applications, firewalls, load balancers). `cargo build --release -p rqvs-capi` makes
//! `librqvs.so` and `librqvs.a`; the header is `include/rqvs.h`, generated from this crate by
//! cbindgen (`tests/header.rs` checks it is current).
//!
//! A thin layer: rule files, classifier construction, model files and traces are the library
//! crates' (`rqvs_flow`, `rqvs_classify`, `rqvs_experiment::inputs`); this crate checks
//! pointers, converts, and catches panics.
//!
//! | module | holds | `unsafe` |
//! |---|---|---|
//! | `types` | the plain structs: `rqvs_key` (the same layout as `FlowKey`, so batches are classified in place), `rqvs_rule`, `rqvs_live_stats` | no |
//! | `error` | `rqvs_status` codes, `rqvs_error` (code + the CLI's one-line message) | no |
//! | `handle` | what the opaque handles hold and do: `rqvs_classifier` (any kind), `rqvs_live` (LiveNuevoMatch behind a reader-writer lock) | no |
//! | `ffi` | every `extern "C"` function: NULL checks, `catch_unwind`, conversions | yes, each block with a `// SAFETY:` line |
//!
//! ## Contracts
//! - **Handles** are opaque; each `_from_*` / `_load_model` returns one the caller owns and frees
//!   with the matching `_free` (NULL is accepted and does nothing). Errors (`rqvs_error`) and key
//!   arrays from `rqvs_trace_read` are the caller's too. Strings and arrays passed in are only
//!   read during the call.
//! - **Errors**: no panic crosses the boundary (each function runs under `catch_unwind`; a panic is
//!   `RQVS_ERR_PANIC` with its message). A NULL pointer is `RQVS_ERR_NULL`; a freed or foreign
//!   pointer is undefined behaviour. Functions that can fail for a reason worth a sentence take
//!   `rqvs_error **err`: NULL on success, a new error on failure.
//! - **Threads**: a `rqvs_classifier` follows `Classifier`'s contract — lookups from any number
//!   of threads, updates with the caller excluding everything else. A `rqvs_live` serializes
//!   itself: lookups from any number of threads while one thread updates (a reader-writer lock;
//!   `LiveNuevoMatch` is `Sync` for this).
//! - **Rule ids**: line numbers (files, text), indexes (arrays); an insert takes the next id
//!   after the largest held so far and returns it.
#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod error;
#[allow(unsafe_code)]
pub mod ffi;
pub mod handle;
pub mod types;

/// The README's examples, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
