//! Status codes and errors: every failure is a [`rqvs_status`] code, and where the function takes
//! an `rqvs_error **err`, an error object with the same one-line message the `rqvs` command
//! prints (`file:line:column: expected …`). Safe code only; the FFI module writes them out.

use std::ffi::CString;
use std::os::raw::c_int;

/// What went wrong (the `int` status functions return; 0 is success).
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum rqvs_status {
    /// Success.
    RQVS_OK = 0,
    /// A required pointer argument was NULL.
    RQVS_ERR_NULL = 1,
    /// An argument is not valid: not UTF-8, an unknown classifier kind or policy, a rule whose
    /// value has bits outside its mask, an operation the classifier's kind does not have.
    RQVS_ERR_INVALID = 2,
    /// A file could not be read or written (the message names it and why).
    RQVS_ERR_IO = 3,
    /// Rule or trace text is malformed (`file:line:column: expected …`).
    RQVS_ERR_PARSE = 4,
    /// The classifier refused a rule (an id already present, a rule it cannot hold).
    RQVS_ERR_RULE = 5,
    /// No rule has this id.
    RQVS_ERR_NOT_FOUND = 6,
    /// A model file is not a valid NuevoMatchUP model (truncated, corrupt, another version).
    RQVS_ERR_MODEL = 7,
    /// An internal error (a panic, caught at the boundary); please report it.
    RQVS_ERR_PANIC = 8,
}

/// The Rust name for [`rqvs_status`].
pub type Status = rqvs_status;
pub use rqvs_status::*;

impl rqvs_status {
    /// The code as the `int` functions return it.
    pub fn code(self) -> c_int {
        self as c_int
    }

    /// A static description of the code, NUL-terminated for C.
    pub fn describe(code: c_int) -> &'static str {
        match code {
            0 => "RQVS_OK: success\0",
            1 => "RQVS_ERR_NULL: a required pointer argument was NULL\0",
            2 => "RQVS_ERR_INVALID: an argument is not valid\0",
            3 => "RQVS_ERR_IO: a file could not be read or written\0",
            4 => "RQVS_ERR_PARSE: rule or trace text is malformed\0",
            5 => "RQVS_ERR_RULE: the classifier refused the rule\0",
            6 => "RQVS_ERR_NOT_FOUND: no rule has this id\0",
            7 => "RQVS_ERR_MODEL: not a valid NuevoMatchUP model file\0",
            8 => "RQVS_ERR_PANIC: internal error (a panic caught at the boundary); please report it\0",
            _ => "unknown rqvs status code\0",
        }
    }
}

/// A failure inside the library, before it is handed to C.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub status: Status,
    /// One line, as the `rqvs` command prints it.
    pub message: String,
}

impl Error {
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error { status, message: message.into() }
    }

    /// A NULL pointer where `what` was required.
    pub fn null(what: &str) -> Error {
        Error::new(RQVS_ERR_NULL, format!("{what} is NULL"))
    }

    /// A panic caught at the boundary, with its message when it has one.
    pub fn panic(payload: Box<dyn std::any::Any + Send>) -> Error {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into());
        Error::new(RQVS_ERR_PANIC, format!("internal error (please report it): {what}"))
    }
}

impl Error {
    /// A file that could not be read (or decompressed), with the CLI's message.
    pub fn io(e: rqvs_flow::ParseError) -> Error {
        Error::new(RQVS_ERR_IO, e.to_string())
    }

    /// Malformed text, with the CLI's message (`file:line:column: expected …`).
    pub fn parse(e: rqvs_flow::ParseError) -> Error {
        Error::new(RQVS_ERR_PARSE, e.to_string())
    }
}

/// An error: its `rqvs_status` code (`rqvs_error_status`) and one-line message
/// (`rqvs_error_message`). Made by a failing function, owned by the caller, freed with
/// `rqvs_error_free`.
#[allow(non_camel_case_types)]
pub struct rqvs_error {
    pub(crate) status: Status,
    pub(crate) message: CString,
}

impl From<Error> for rqvs_error {
    fn from(e: Error) -> rqvs_error {
        // A message never holds a NUL; should one appear, it is cut there rather than lost.
        let bytes: Vec<u8> = e.message.into_bytes().into_iter().take_while(|&b| b != 0).collect();
        rqvs_error { status: e.status, message: CString::new(bytes).expect("no NUL byte") }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_nul_terminated_description() {
        for code in 0..=9 {
            let d = Status::describe(code);
            assert!(d.ends_with('\0') && !d[..d.len() - 1].contains('\0'), "{d}");
        }
        assert!(Status::describe(RQVS_ERR_PANIC.code()).starts_with("RQVS_ERR_PANIC"));
    }

    #[test]
    fn a_panic_payload_becomes_a_message() {
        let e = Error::panic(Box::new("boom"));
        assert_eq!(e.status, RQVS_ERR_PANIC);
        assert!(e.message.ends_with("boom"));
        let e = Error::panic(Box::new(String::from("bang")));
        assert!(e.message.ends_with("bang"));
    }

    #[test]
    fn a_message_with_a_nul_is_cut_there() {
        let e = rqvs_error::from(Error::new(RQVS_ERR_IO, "a\0b"));
        assert_eq!(e.message.to_str().unwrap(), "a");
    }
}
