//! The crate's one error type.

use std::fmt;

/// What went wrong talking to an OVSDB server. Every variant's message names the remote or the
/// part of the message that was wrong; nothing the server sends can make this crate panic.
#[derive(Clone, Debug, PartialEq)]
pub enum Error {
    /// A remote string that is neither `unix:PATH` nor `tcp:IP:PORT`.
    BadRemote(String),
    /// A system call on the connection failed (connect, read, write).
    Io(String),
    /// The server sent something that is not RFC 7047 JSON-RPC (bad JSON, a reply to an unknown
    /// id, a malformed row or datum...): the connection is dropped.
    Protocol(String),
    /// The server answered a request with an error (`{"error": ..., "details": ...}`).
    Server { error: String, details: String },
    /// The database is not the one asked for, or its schema's version or tables do not fit.
    Schema(String),
    /// The connection is down (a transaction cannot be sent or was cut off).
    Disconnected(String),
    /// No reply in time.
    Timeout(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::BadRemote(s) => write!(f, "bad OVSDB remote: {s}"),
            Error::Io(s) => write!(f, "{s}"),
            Error::Protocol(s) => write!(f, "OVSDB protocol error: {s}"),
            Error::Server { error, details } if details.is_empty() => write!(f, "ovsdb-server: {error}"),
            Error::Server { error, details } => write!(f, "ovsdb-server: {error} ({details})"),
            Error::Schema(s) => write!(f, "OVSDB schema: {s}"),
            Error::Disconnected(s) => write!(f, "OVSDB connection down: {s}"),
            Error::Timeout(s) => write!(f, "OVSDB timeout: {s}"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// A protocol error's message with `what` in front (other errors unchanged).
pub(crate) fn context(what: &str) -> impl FnOnce(Error) -> Error + '_ {
    move |e| match e {
        Error::Protocol(m) => Error::Protocol(format!("{what}: {m}")),
        e => e,
    }
}

/// `Error::Protocol` from anything printable.
pub(crate) fn protocol(msg: impl Into<String>) -> Error {
    Error::Protocol(msg.into())
}
