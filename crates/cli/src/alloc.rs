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

use std::alloc::{GlobalAlloc, Layout, System};

use mimalloc::MiMalloc;

/// Blocks of at least this many bytes come from the system allocator.
pub const LARGE: usize = 1 << 20;

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
