//! The C ABI: every `extern "C"` function, and the only `unsafe` code of the crate.
//!
//! Each function checks its pointers (NULL → `RQVS_ERR_NULL`, never a crash), runs its body
//! under [`catch_unwind`] (a panic becomes `RQVS_ERR_PANIC` with its message, never an unwind
//! into C) and calls the safe [`crate::handle`] code. Pointers that are not NULL are trusted to
//! be what the header says (a freed or foreign handle is undefined behaviour, as in any C
//! library); each function's `# Safety` section says what it relies on.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::null_mut;

use rqvs_flow::FlowKey;

use crate::error::*;
use crate::types::rqvs_key;

mod classifier;
mod live;
mod misc;

/// Runs `f`, turning its error, or a panic, into `fail` and (when `err` is not NULL) a new
/// error in `*err`; on success `*err` is set to NULL.
///
/// # Safety
/// `err` is NULL or valid for writing one pointer.
unsafe fn run<T>(err: *mut *mut rqvs_error, fail: T, f: impl FnOnce() -> Result<T, Error>) -> T {
    // SAFETY: `err` as this function's contract says.
    unsafe { run_with(err, |_| fail, f) }
}

/// [`run`] for a function that returns a status code: RQVS_OK, or the error's code.
///
/// # Safety
/// `err` is NULL or valid for writing one pointer.
unsafe fn run_status(err: *mut *mut rqvs_error, f: impl FnOnce() -> Result<(), Error>) -> c_int {
    // SAFETY: `err` as this function's contract says.
    unsafe { run_with(err, |e| e.status.code(), || f().map(|()| RQVS_OK.code())) }
}

/// [`run`], the value on failure made from the error.
///
/// # Safety
/// `err` is NULL or valid for writing one pointer.
unsafe fn run_with<T>(
    err: *mut *mut rqvs_error,
    fail: impl FnOnce(&Error) -> T,
    f: impl FnOnce() -> Result<T, Error>,
) -> T {
    let (value, error) = match catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| Err(Error::panic(p))) {
        Ok(v) => (v, null_mut()),
        Err(e) => (fail(&e), Box::into_raw(Box::new(rqvs_error::from(e)))),
    };
    if err.is_null() {
        // The caller did not ask for the error: free it.
        if !error.is_null() {
            // SAFETY: `error` was made by `Box::into_raw` just above and is owned here.
            drop(unsafe { Box::from_raw(error) });
        }
    } else {
        // SAFETY: `err` is not NULL, and the caller guarantees it is valid for writing.
        unsafe { err.write(error) };
    }
    value
}

/// Runs `f` for a function that returns a status code: 0, or the error's (or a panic's) code.
fn status(f: impl FnOnce() -> Result<(), Error>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| Err(Error::panic(p))) {
        Ok(()) => RQVS_OK.code(),
        Err(e) => e.status.code(),
    }
}

/// Runs `f`, giving `fail` when it panics (for functions that cannot fail otherwise).
fn infallible<T>(fail: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fail)
}

/// `&*p`, or an `RQVS_ERR_NULL` error naming `what`.
///
/// # Safety
/// `p` is NULL or points to a live `T` that nothing mutates for `'a`.
unsafe fn get<'a, T>(p: *const T, what: &str) -> Result<&'a T, Error> {
    // SAFETY: the caller's contract above.
    unsafe { p.as_ref() }.ok_or_else(|| Error::null(what))
}

/// `&mut *p`, or an `RQVS_ERR_NULL` error naming `what`.
///
/// # Safety
/// `p` is NULL or points to a live `T` that nothing else uses for `'a`.
unsafe fn get_mut<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, Error> {
    // SAFETY: the caller's contract above.
    unsafe { p.as_mut() }.ok_or_else(|| Error::null(what))
}

/// The UTF-8 text of a C string.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string that lives and does not change for `'a`.
unsafe fn text<'a>(p: *const c_char, what: &str) -> Result<&'a str, Error> {
    if p.is_null() {
        return Err(Error::null(what));
    }
    // SAFETY: not NULL, and NUL-terminated and live by the caller's contract.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str().map_err(|e| Error::new(RQVS_ERR_INVALID, format!("{what} is not UTF-8: {e}")))
}

/// `n` elements from `p` (NULL is allowed when `n` is 0).
///
/// # Safety
/// When `n > 0`, `p` is NULL or points to `n` initialized `T`s that do not change for `'a`.
unsafe fn slice<'a, T>(p: *const T, n: usize, what: &str) -> Result<&'a [T], Error> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::null(what));
    }
    // SAFETY: not NULL, and `n` valid elements by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// `n` writable elements at `p` (NULL is allowed when `n` is 0).
///
/// # Safety
/// When `n > 0`, `p` is NULL or points to `n` `T`s that nothing else uses for `'a`.
unsafe fn slice_mut<'a, T>(p: *mut T, n: usize, what: &str) -> Result<&'a mut [T], Error> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(Error::null(what));
    }
    // SAFETY: not NULL, and `n` exclusively ours elements by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}

/// A batch of C keys seen as the flow layer's keys, without a copy.
fn keys(k: &[rqvs_key]) -> &[FlowKey] {
    // SAFETY: `rqvs_key` and `FlowKey` are both `repr(C)` with the same fields, sizes,
    // alignment and offsets (asserted at compile time in `types.rs`), and every bit pattern
    // of their integer fields is valid; the result borrows `k` for the same lifetime.
    unsafe { std::slice::from_raw_parts(k.as_ptr().cast::<FlowKey>(), k.len()) }
}

/// Moves `value` to the heap for C (freed by the matching `_free`).
fn into_handle<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// Frees a handle made by [`into_handle`]; NULL does nothing.
///
/// # Safety
/// `p` is NULL or came from [`into_handle`] for this `T` and was not freed.
unsafe fn free_handle<T>(p: *mut T) {
    if !p.is_null() {
        // SAFETY: made by `Box::into_raw` (`into_handle`) and not freed, by the caller's contract.
        drop(unsafe { Box::from_raw(p) });
    }
}

/// Writes `value` to `out` when `out` is not NULL.
///
/// # Safety
/// `out` is NULL or valid for writing a `T`.
unsafe fn write_opt<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: not NULL, and writable by the caller's contract.
        unsafe { out.write(value) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_error_code_and_message() {
        let mut err: *mut rqvs_error = null_mut();
        // SAFETY: `err` is a valid place for one pointer.
        let v = unsafe { run(&mut err, -1, || -> Result<i32, Error> { panic!("boom in the library") }) };
        assert_eq!(v, -1);
        assert!(!err.is_null());
        // SAFETY: `err` was just made by `run`.
        let e = unsafe { Box::from_raw(err) };
        assert_eq!(e.status, RQVS_ERR_PANIC);
        assert!(e.message.to_str().unwrap().ends_with("boom in the library"));
        assert_eq!(status(|| panic!("boom")), RQVS_ERR_PANIC.code());
        assert_eq!(infallible(7, || panic!("boom")), 7);
        // SAFETY: NULL is allowed for `err`: the error is freed inside.
        assert_eq!(unsafe { run(null_mut(), 0, || Err(Error::null("x"))) }, 0);
    }

    #[test]
    fn keys_view_the_same_fields() {
        let k = rqvs_key { nw_src: 7, tp_dst: 80, dl_dst: [9; 6], nw_frag: 1, ..rqvs_key::default() };
        assert_eq!(keys(&[k])[0], FlowKey::from(&k));
    }
}
