//! The `rqvs` binary's memory allocator: mimalloc for blocks under [`LARGE`] bytes, the
//! system's (glibc's) for larger ones.
//!
//! A flow-mod allocates its rule, actions and stored forms on the OpenFlow connection's thread
//! and frees them on the CFLOWS manager's; glibc's `malloc` and `free` took 23% and 30% of those
//! two threads' time, mimalloc a fraction of it (docs/openflow-bench.md, "The allocator"). Large
//! blocks stay with glibc: it maps them on their own and grows them with `mremap`, so a buffer
//! doubling towards an input's size limit (256 MiB) never holds the old and the new copy at
//! once, where mimalloc copies (a rule file of /dev/zero peaked at 598 MB under mimalloc alone,
//! against the 400 MB `tests/bad_input.rs` allows), and a freed classifier's arrays go back to
//! the kernel at once.
//!
//! Which allocator owns a block follows from its size alone: `dealloc` and `realloc` are given
//! the size the block was allocated (or last reallocated) with, so they find the same one.
//!
//! mimalloc gives freed pages back to the kernel after a delay (its *purge*, 1 s by default);
//! a page touched again after that faults in zeroed. Under a stream of flow-mods the rules of one
//! round are freed and the next round's allocated in their place: the faults (`clear_page`) took
//! 10–13% of the connection's and the manager's time. [`tune`] sets the delay to
//! [`PURGE_DELAY_MS`] (docs/openflow-bench.md, "The allocator's purge delay"); memory freed and
//! not reused for that long still goes back. `MIMALLOC_PURGE_DELAY` in the environment wins.

use std::alloc::{GlobalAlloc, Layout, System};

use mimalloc::MiMalloc;

/// Blocks of at least this many bytes come from the system allocator.
pub const LARGE: usize = 1 << 20;

/// How long mimalloc keeps a freed page before it gives it back to the kernel (module docs).
pub const PURGE_DELAY_MS: i64 = 10_000;

/// mimalloc's `mi_option_purge_delay` (the same index in its v2 and v3 `mi_option_t`).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Sets mimalloc's purge delay to [`PURGE_DELAY_MS`] unless `MIMALLOC_PURGE_DELAY` is set (then
/// mimalloc has read it). Call first thing in `main`.
pub fn tune() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: `mi_option_set` takes any option index and value (an option is a word mimalloc
        // reads when it purges); 15 is `mi_option_purge_delay`.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS as std::ffi::c_long) };
    }
}

/// mimalloc's purge delay now, in milliseconds.
#[cfg(test)]
#[allow(clippy::useless_conversion)] // `c_long` is `i32` on some targets
fn purge_delay_ms() -> i64 {
    // SAFETY: reads an option word (any index is valid).
    i64::from(unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) })
}

/// mimalloc under [`LARGE`], the system's allocator from it.
pub struct Split;

/// `$call` on the allocator that owns blocks of `$size` bytes (static dispatch: this runs on
/// every allocation).
macro_rules! owner {
    ($size:expr, $a:ident => $call:expr) => {
        if $size >= LARGE {
            let $a = &System;
            $call
        } else {
            let $a = &MiMalloc;
            $call
        }
    };
}

// SAFETY: every block is allocated, grown and freed by the allocator its size picks
// (`owner!`), and both are sound `GlobalAlloc`s; a `realloc` that crosses `LARGE` allocates the
// new block from the other allocator, copies the bytes both sizes hold and frees the old block
// with its own allocator and layout.
unsafe impl GlobalAlloc for Split {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract (a non-zero size) is passed on unchanged.
        unsafe { owner!(layout.size(), a => a.alloc(layout)) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe { owner!(layout.size(), a => a.alloc_zeroed(layout)) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated with `layout` by the allocator of its size (module docs).
        unsafe { owner!(layout.size(), a => a.dealloc(ptr, layout)) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (from, to) = (layout.size() >= LARGE, new_size >= LARGE);
        if from == to {
            // SAFETY: one allocator owns the block before and after.
            return unsafe { owner!(layout.size(), a => a.realloc(ptr, layout, new_size)) };
        }
        // SAFETY: the caller guarantees `new_size`, rounded up to `layout.align()`, does not
        // overflow `isize` (GlobalAlloc::realloc's contract), so the layout is valid.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: a non-zero size (the caller's contract).
        let new = unsafe { owner!(new_size, a => a.alloc(new_layout)) };
        if !new.is_null() {
            // SAFETY: both blocks are live, distinct and hold at least the bytes copied; the
            // old block is then freed by its own allocator.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                owner!(layout.size(), a => a.dealloc(ptr, layout));
            }
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `tune` sets the purge delay, and index 15 is the purge delay: mimalloc's own default for
    /// it (1,000 ms in v3, 10 in v2) before, ours after — another option at that index would
    /// not start at either.
    #[test]
    fn tune_sets_the_purge_delay() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        let before = purge_delay_ms();
        assert!(before == 1000 || before == 10 || before == PURGE_DELAY_MS, "purge delay {before}");
        tune();
        assert_eq!(purge_delay_ms(), PURGE_DELAY_MS);
    }

    /// Blocks grown and shrunk across `LARGE` keep their bytes (the copy between the two
    /// allocators), in both directions, at an alignment above the default.
    #[test]
    fn a_block_keeps_its_bytes_across_the_split() {
        for align in [8, 64, 4096] {
            let small = Layout::from_size_align(LARGE / 2, align).unwrap();
            // SAFETY: non-zero sizes; each pointer is used only while live, with its layout.
            unsafe {
                let p = Split.alloc(small);
                assert!(!p.is_null() && (p as usize).is_multiple_of(align));
                for i in 0..small.size() {
                    *p.add(i) = (i % 251) as u8;
                }
                let q = Split.realloc(p, small, 3 * LARGE);
                assert!(!q.is_null() && (q as usize).is_multiple_of(align));
                assert!((0..small.size()).all(|i| *q.add(i) == (i % 251) as u8));
                let big = Layout::from_size_align(3 * LARGE, align).unwrap();
                let r = Split.realloc(q, big, 100);
                assert!(!r.is_null() && (r as usize).is_multiple_of(align));
                assert!((0..100).all(|i| *r.add(i) == (i % 251) as u8));
                Split.dealloc(r, Layout::from_size_align(100, align).unwrap());
            }
        }
    }
}
