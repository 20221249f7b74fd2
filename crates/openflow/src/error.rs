//! What can be wrong with a message: [`DecodeError`] for bytes that are not a message,
//! [`EncodeError`] for a value that cannot be written as one, and [`OfError`],
//! the OpenFlow ERROR (type, code) a switch answers with (OpenFlow 1.3 §A.4.4, 1.4 §7.5.4).

use std::fmt;

/// Why bytes are not a message this codec can decode. Each maps to the OpenFlow error a switch
/// answers with ([`DecodeError::of_error`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than a field or a length says (`what` names the structure).
    Truncated { what: &'static str, need: usize, have: usize },
    /// A length field that cannot be right (below its structure's fixed part, past the message,
    /// not a multiple of 8 where the spec requires it).
    BadLength { what: &'static str, len: usize },
    /// A version other than the connection's (or than 1.3/1.4 before negotiation).
    BadVersion(u8),
    /// A message type this codec does not know.
    BadType(u8),
    /// A well-formed message asking for something rqvs does not support; answered with `error`.
    Unsupported { what: String, error: OfError },
}

impl DecodeError {
    /// The OpenFlow error a switch sends back for this.
    pub fn of_error(&self) -> OfError {
        match self {
            DecodeError::Truncated { .. } | DecodeError::BadLength { .. } => OfError::BAD_REQUEST_BAD_LEN,
            DecodeError::BadVersion(_) => OfError::BAD_REQUEST_BAD_VERSION,
            DecodeError::BadType(_) => OfError::BAD_REQUEST_BAD_TYPE,
            DecodeError::Unsupported { error, .. } => *error,
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated { what, need, have } => {
                write!(f, "{what}: needs {need} bytes, {have} present")
            }
            DecodeError::BadLength { what, len } => write!(f, "{what}: impossible length {len}"),
            DecodeError::BadVersion(v) => write!(f, "OpenFlow version {v:#04x} not supported (1.3 and 1.4 are)"),
            DecodeError::BadType(t) => write!(f, "unknown message type {t}"),
            DecodeError::Unsupported { what, error } => write!(f, "{what} (answered with {error})"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// An OpenFlow error: `ofp_error_type` and its code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OfError {
    pub kind: u16,
    pub code: u16,
}

impl OfError {
    pub const HELLO_FAILED_INCOMPATIBLE: OfError = OfError { kind: 0, code: 0 };
    pub const BAD_REQUEST_BAD_VERSION: OfError = OfError { kind: 1, code: 0 };
    pub const BAD_REQUEST_BAD_TYPE: OfError = OfError { kind: 1, code: 1 };
    pub const BAD_REQUEST_BAD_MULTIPART: OfError = OfError { kind: 1, code: 2 };
    pub const BAD_REQUEST_BAD_LEN: OfError = OfError { kind: 1, code: 6 };
    pub const BAD_REQUEST_BUFFER_UNKNOWN: OfError = OfError { kind: 1, code: 8 };
    pub const BAD_REQUEST_IS_SLAVE: OfError = OfError { kind: 1, code: 10 };
    pub const BAD_REQUEST_BAD_PORT: OfError = OfError { kind: 1, code: 11 };
    pub const BAD_REQUEST_BAD_PACKET: OfError = OfError { kind: 1, code: 12 };
    pub const BAD_ACTION_BAD_TYPE: OfError = OfError { kind: 2, code: 0 };
    pub const BAD_ACTION_BAD_LEN: OfError = OfError { kind: 2, code: 1 };
    pub const BAD_ACTION_BAD_OUT_PORT: OfError = OfError { kind: 2, code: 4 };
    pub const BAD_ACTION_BAD_ARGUMENT: OfError = OfError { kind: 2, code: 5 };
    pub const BAD_ACTION_BAD_OUT_GROUP: OfError = OfError { kind: 2, code: 9 };
    pub const BAD_ACTION_BAD_SET_TYPE: OfError = OfError { kind: 2, code: 13 };
    pub const BAD_ACTION_BAD_SET_ARGUMENT: OfError = OfError { kind: 2, code: 15 };
    pub const BAD_INSTRUCTION_UNKNOWN_INST: OfError = OfError { kind: 3, code: 0 };
    pub const BAD_INSTRUCTION_UNSUP_INST: OfError = OfError { kind: 3, code: 1 };
    pub const BAD_INSTRUCTION_BAD_TABLE_ID: OfError = OfError { kind: 3, code: 2 };
    pub const BAD_INSTRUCTION_UNSUP_METADATA: OfError = OfError { kind: 3, code: 3 };
    pub const BAD_MATCH_BAD_TYPE: OfError = OfError { kind: 4, code: 0 };
    pub const BAD_MATCH_BAD_LEN: OfError = OfError { kind: 4, code: 1 };
    pub const BAD_MATCH_BAD_WILDCARDS: OfError = OfError { kind: 4, code: 5 };
    pub const BAD_MATCH_BAD_FIELD: OfError = OfError { kind: 4, code: 6 };
    pub const BAD_MATCH_BAD_VALUE: OfError = OfError { kind: 4, code: 7 };
    pub const BAD_MATCH_BAD_MASK: OfError = OfError { kind: 4, code: 8 };
    pub const BAD_MATCH_BAD_PREREQ: OfError = OfError { kind: 4, code: 9 };
    pub const BAD_MATCH_DUP_FIELD: OfError = OfError { kind: 4, code: 10 };
    pub const FLOW_MOD_FAILED_UNKNOWN: OfError = OfError { kind: 5, code: 0 };
    pub const FLOW_MOD_FAILED_TABLE_FULL: OfError = OfError { kind: 5, code: 1 };
    pub const FLOW_MOD_FAILED_BAD_TABLE_ID: OfError = OfError { kind: 5, code: 2 };
    pub const FLOW_MOD_FAILED_OVERLAP: OfError = OfError { kind: 5, code: 3 };
    pub const FLOW_MOD_FAILED_BAD_COMMAND: OfError = OfError { kind: 5, code: 6 };
    pub const FLOW_MOD_FAILED_BAD_FLAGS: OfError = OfError { kind: 5, code: 7 };
    pub const GROUP_MOD_FAILED_GROUP_EXISTS: OfError = OfError { kind: 6, code: 0 };
    pub const GROUP_MOD_FAILED_INVALID_GROUP: OfError = OfError { kind: 6, code: 1 };
    pub const GROUP_MOD_FAILED_OUT_OF_GROUPS: OfError = OfError { kind: 6, code: 3 };
    pub const GROUP_MOD_FAILED_OUT_OF_BUCKETS: OfError = OfError { kind: 6, code: 4 };
    pub const GROUP_MOD_FAILED_WATCH_UNSUPPORTED: OfError = OfError { kind: 6, code: 6 };
    pub const GROUP_MOD_FAILED_LOOP: OfError = OfError { kind: 6, code: 7 };
    pub const GROUP_MOD_FAILED_UNKNOWN_GROUP: OfError = OfError { kind: 6, code: 8 };
    pub const GROUP_MOD_FAILED_BAD_TYPE: OfError = OfError { kind: 6, code: 10 };
    pub const GROUP_MOD_FAILED_BAD_COMMAND: OfError = OfError { kind: 6, code: 11 };
    pub const GROUP_MOD_FAILED_BAD_BUCKET: OfError = OfError { kind: 6, code: 12 };
    pub const GROUP_MOD_FAILED_BAD_WATCH: OfError = OfError { kind: 6, code: 13 };
    pub const PORT_MOD_FAILED_BAD_PORT: OfError = OfError { kind: 7, code: 0 };
    pub const PORT_MOD_FAILED_BAD_HW_ADDR: OfError = OfError { kind: 7, code: 1 };
    pub const PORT_MOD_FAILED_BAD_CONFIG: OfError = OfError { kind: 7, code: 2 };
    pub const SWITCH_CONFIG_FAILED_BAD_FLAGS: OfError = OfError { kind: 10, code: 0 };
    pub const ASYNC_CONFIG_FAILED_INVALID: OfError = OfError { kind: 15, code: 0 };
    pub const METER_MOD_FAILED_UNKNOWN: OfError = OfError { kind: 12, code: 0 };
    pub const METER_MOD_FAILED_METER_EXISTS: OfError = OfError { kind: 12, code: 1 };
    pub const METER_MOD_FAILED_INVALID_METER: OfError = OfError { kind: 12, code: 2 };
    pub const METER_MOD_FAILED_UNKNOWN_METER: OfError = OfError { kind: 12, code: 3 };
    pub const METER_MOD_FAILED_BAD_COMMAND: OfError = OfError { kind: 12, code: 4 };
    pub const METER_MOD_FAILED_BAD_FLAGS: OfError = OfError { kind: 12, code: 5 };
    pub const METER_MOD_FAILED_BAD_RATE: OfError = OfError { kind: 12, code: 6 };
    pub const METER_MOD_FAILED_BAD_BURST: OfError = OfError { kind: 12, code: 7 };
    pub const METER_MOD_FAILED_BAD_BAND: OfError = OfError { kind: 12, code: 8 };
    pub const METER_MOD_FAILED_BAD_BAND_VALUE: OfError = OfError { kind: 12, code: 9 };
    pub const METER_MOD_FAILED_OUT_OF_METERS: OfError = OfError { kind: 12, code: 10 };
    pub const METER_MOD_FAILED_OUT_OF_BANDS: OfError = OfError { kind: 12, code: 11 };
    pub const BUNDLE_FAILED_UNKNOWN: OfError = OfError { kind: 17, code: 0 };
    pub const BUNDLE_FAILED_OUT_OF_BUNDLES: OfError = OfError { kind: 17, code: 1 };
    pub const BUNDLE_FAILED_BAD_ID: OfError = OfError { kind: 17, code: 2 };
    pub const BUNDLE_FAILED_MSG_TOO_MANY: OfError = OfError { kind: 17, code: 11 };
    pub const BUNDLE_FAILED_BUNDLE_EXIST: OfError = OfError { kind: 17, code: 3 };
    pub const BUNDLE_FAILED_BUNDLE_CLOSED: OfError = OfError { kind: 17, code: 4 };
    pub const BUNDLE_FAILED_BAD_TYPE: OfError = OfError { kind: 17, code: 6 };
    pub const BUNDLE_FAILED_BAD_FLAGS: OfError = OfError { kind: 17, code: 7 };
    pub const BUNDLE_FAILED_MSG_BAD_LEN: OfError = OfError { kind: 17, code: 8 };
    pub const BUNDLE_FAILED_MSG_BAD_XID: OfError = OfError { kind: 17, code: 9 };
    pub const BUNDLE_FAILED_MSG_UNSUP: OfError = OfError { kind: 17, code: 10 };
    pub const BUNDLE_FAILED_MSG_FAILED: OfError = OfError { kind: 17, code: 13 };
}

impl fmt::Display for OfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpenFlow error type {} code {}", self.kind, self.code)
    }
}

/// Why a value cannot be written in OpenFlow 1.3/1.4 (a match OXM cannot express, an action
/// with no OpenFlow equivalent, a port with no 32-bit number, a message over 64 KiB, a type the
/// version lacks). The message names the part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodeError(pub String);

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EncodeError {}

/// An encoder that meets a value its decoder would refuse says so in the decoder's words.
impl From<DecodeError> for EncodeError {
    fn from(e: DecodeError) -> Self {
        EncodeError(e.to_string())
    }
}
