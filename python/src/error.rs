//! Errors as Python exceptions, with the command line's one-line messages: a file that cannot be
//! read or written is an `OSError`, any other bad input a `ValueError` (wrong types and dtypes are
//! `TypeError`s, raised where they are checked).

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::PyErr;

/// `e`'s message as an `OSError` when it is about reading or writing a file, else a `ValueError`.
pub fn from(e: impl std::fmt::Display) -> PyErr {
    let msg = e.to_string();
    if msg.contains(": cannot read: ") || msg.contains(": cannot write: ") {
        PyOSError::new_err(msg)
    } else {
        PyValueError::new_err(msg)
    }
}
