//! Threads that must not die quietly. A PMD thread, the handler thread or the CFLOWS manager
//! that panics would leave the switch running without it: its ports no longer polled, upcalls no
//! longer answered. [`guard`] runs such a thread's body; a panic is logged once with the
//! thread's name and the panic's message, and the switch is asked to stop — `rqvs switch` then
//! ends with the error "PMD thread N panicked" and exit status 1 ([`crate::Switch::stop`]).
//!
//! **Test hook** (not for users): the environment variable `RQVS_TEST_PANIC` set to `pmd` makes
//! PMD thread 0 panic after its first received batch, `handler` makes the handler thread panic on
//! its first upcall batch. It is read once per thread start; unset (always, outside the tests of
//! `crates/cli/tests/switch_panics.rs`) it costs nothing on the fast path.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

/// Runs `body` (a thread of the switch named `what`); when it panics, logs why, asks the switch
/// to stop (`stop`), and lets the panic end the thread (its join reports it).
pub fn guard<R>(what: &str, stop: &AtomicBool, body: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".to_string());
            crate::log_error!("rqvs switch: {what} panicked: {msg}; stopping the switch (a bug: please report it)");
            stop.store(true, Ordering::Relaxed);
            resume_unwind(payload)
        }
    }
}

/// Whether the test hook asks thread kind `which` (`pmd`, `handler`) to panic.
pub(crate) fn test_panic(which: &str) -> bool {
    std::env::var("RQVS_TEST_PANIC").is_ok_and(|v| v == which)
}
