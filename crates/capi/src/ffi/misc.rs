//! Errors, status codes, rule and trace helpers.

use std::os::raw::{c_char, c_int};

use super::*;
use crate::handle;
use crate::types::rqvs_rule;

/// The one-line message of an error, as the `rqvs` command prints it (for example
/// `rules.txt:3:17: expected '/' between protocol value and mask, found ' '`). The string
/// belongs to the error: valid until `rqvs_error_free(e)`. For a NULL error, a static string
/// saying so.
///
/// Thread safety: any thread, while nothing frees `e`.
///
/// # Safety
/// `e` is NULL or an error from this library that was not freed.
#[no_mangle]
pub unsafe extern "C" fn rqvs_error_message(e: *const rqvs_error) -> *const c_char {
    const NULL_ERROR: &str = "(NULL rqvs_error)\0";
    // SAFETY: `e` is as this function's contract says.
    infallible(NULL_ERROR.as_ptr().cast(), || match unsafe { e.as_ref() } {
        Some(e) => e.message.as_ptr(),
        None => NULL_ERROR.as_ptr().cast(),
    })
}

/// The error's `rqvs_status` code (RQVS_ERR_NULL for a NULL error).
///
/// # Safety
/// `e` is NULL or an error from this library that was not freed.
#[no_mangle]
pub unsafe extern "C" fn rqvs_error_status(e: *const rqvs_error) -> c_int {
    // SAFETY: `e` is as this function's contract says.
    infallible(RQVS_ERR_PANIC.code(), || unsafe { e.as_ref() }.map_or(RQVS_ERR_NULL.code(), |e| e.status.code()))
}

/// Frees an error (and its message); NULL does nothing.
///
/// # Safety
/// `e` is NULL or an error from this library that was not freed.
#[no_mangle]
pub unsafe extern "C" fn rqvs_error_free(e: *mut rqvs_error) {
    // SAFETY: `e` is as this function's contract says.
    infallible((), || unsafe { free_handle(e) })
}

/// A static description of a status code (`"RQVS_ERR_NULL: a required pointer argument was
/// NULL"`), for the functions that return a code without an error object. Never NULL; do not
/// free. Thread safety: any thread.
#[no_mangle]
pub extern "C" fn rqvs_status_str(status: c_int) -> *const c_char {
    Status::describe(status).as_ptr().cast()
}

/// The rule that matches every packet, with priority `priority`: every mask bit clear, both
/// port ranges 0..65535. Narrow it by setting value and mask bits, or the port ranges.
#[no_mangle]
pub extern "C" fn rqvs_rule_any(priority: u32) -> rqvs_rule {
    infallible(rqvs_rule::default(), || rqvs_rule::any(priority))
}

/// Reads the packets of a ClassBench trace or a pcap/pcapng capture (told apart by their first
/// bytes), plain or xz: `*keys` receives a new array of `*n` keys (NULL when `*n` is 0), each with
/// `in_port`, which the caller frees with `rqvs_keys_free(*keys, *n)`. ClassBench packets have
/// `dl_type` 0x0800 (IPv4) and the trace's five fields and flags; captured frames are parsed as
/// Open vSwitch does. Returns RQVS_OK, or RQVS_ERR_IO / RQVS_ERR_PARSE / RQVS_ERR_NULL with
/// `*err` set (`*keys` and `*n` are then not written).
///
/// Thread safety: any thread.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `keys` and `n` are NULL or writable; `err` is NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn rqvs_trace_read(
    path: *const c_char,
    in_port: u32,
    keys: *mut *mut rqvs_key,
    n: *mut usize,
    err: *mut *mut rqvs_error,
) -> c_int {
    // SAFETY: the pointers are as this function's contract says.
    unsafe {
        run_status(err, || {
            let path = text(path, "path")?;
            if keys.is_null() || n.is_null() {
                return Err(Error::null(if keys.is_null() { "keys" } else { "n" }));
            }
            let read: Box<[rqvs_key]> = handle::read_trace(path, in_port)?.iter().map(rqvs_key::from).collect();
            let len = read.len();
            let array = if len == 0 { std::ptr::null_mut() } else { Box::into_raw(read).cast::<rqvs_key>() };
            keys.write(array);
            n.write(len);
            Ok(())
        })
    }
}

/// Frees an array of keys from `rqvs_trace_read` (`n` its length); NULL does nothing.
///
/// # Safety
/// `keys` is NULL or an array from `rqvs_trace_read` with its length `n`, not freed before.
#[no_mangle]
pub unsafe extern "C" fn rqvs_keys_free(keys: *mut rqvs_key, n: usize) {
    infallible((), || {
        if !keys.is_null() {
            // SAFETY: made by `Box::into_raw` of a boxed slice of `n` keys (`rqvs_trace_read`)
            // and not freed, by the caller's contract.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(keys, n)) });
        }
    })
}

/// The library's version ("0.1.0"), a static string. Thread safety: any thread.
#[no_mangle]
pub extern "C" fn rqvs_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
