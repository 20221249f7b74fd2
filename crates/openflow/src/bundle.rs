//! Bundles: OpenFlow 1.4's BUNDLE_CONTROL (type 33) and BUNDLE_ADD_MESSAGE (type 34), §7.3.9,
//! and the same two messages in OpenFlow 1.3 as Open vSwitch sends them: the ONF extension
//! EXT-230, an EXPERIMENTER message with experimenter [`ONF_EXPERIMENTER_ID`] and exp_type
//! [`ONFT_BUNDLE_CONTROL`] (2300) or [`ONFT_BUNDLE_ADD_MESSAGE`] (2301), whose body after the
//! experimenter header is the 1.4 body (what `ovs-ofctl -O OpenFlow13 --bundle add-flows`
//! sends). [`crate::message`] maps both encodings to the same [`BundleControl`] and
//! [`BundleAdd`]: the version picks the encoding.
//!
//! The message added to a bundle is kept as the raw bytes of one whole inner message. Its header
//! is checked — at least 8 bytes, its length within the outer message, the outer message's
//! version and xid (`OFPBFC_MSG_BAD_LEN`, `OFPBFC_MSG_BAD_XID`, as Open vSwitch checks too) — and
//! [`BundleAdd::inner`] decodes it.

use crate::error::{DecodeError, EncodeError, OfError};
use crate::message::{decode, Message};
use crate::port::{pad8, read_properties, write_property, Property};
use crate::wire::{Header, Reader, Writer};

/// The ONF experimenter id (`ONF_VENDOR_ID`, "ONF\0").
pub const ONF_EXPERIMENTER_ID: u32 = 0x4F4E_4600;
/// ONF EXT-230's exp_type for bundle control in OpenFlow 1.3.
pub const ONFT_BUNDLE_CONTROL: u32 = 2300;
/// ONF EXT-230's exp_type for bundle add message in OpenFlow 1.3.
pub const ONFT_BUNDLE_ADD_MESSAGE: u32 = 2301;

/// `OFPBCT_OPEN_REQUEST`.
pub const OPEN_REQUEST: u16 = 0;
/// `OFPBCT_OPEN_REPLY`.
pub const OPEN_REPLY: u16 = 1;
/// `OFPBCT_CLOSE_REQUEST`.
pub const CLOSE_REQUEST: u16 = 2;
/// `OFPBCT_CLOSE_REPLY`.
pub const CLOSE_REPLY: u16 = 3;
/// `OFPBCT_COMMIT_REQUEST`.
pub const COMMIT_REQUEST: u16 = 4;
/// `OFPBCT_COMMIT_REPLY`.
pub const COMMIT_REPLY: u16 = 5;
/// `OFPBCT_DISCARD_REQUEST`.
pub const DISCARD_REQUEST: u16 = 6;
/// `OFPBCT_DISCARD_REPLY`.
pub const DISCARD_REPLY: u16 = 7;
/// `OFPBF_ATOMIC`: all or nothing.
pub const ATOMIC: u16 = 1;
/// `OFPBF_ORDERED`: apply in order.
pub const ORDERED: u16 = 2;

/// `ofp_bundle_ctrl_msg` (body after the header, or after the ONF experimenter header in 1.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BundleControl {
    /// The bundle.
    pub bundle_id: u32,
    /// `OFPBCT_*` ([`OPEN_REQUEST`] ...).
    pub kind: u16,
    /// `OFPBF_*` ([`ATOMIC`], [`ORDERED`]).
    pub flags: u16,
    /// Bundle properties (only experimenter ones are defined), raw.
    pub properties: Vec<Property>,
}

/// `ofp_bundle_add_msg`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BundleAdd {
    /// The bundle.
    pub bundle_id: u32,
    /// `OFPBF_*`, as in the bundle's OPEN_REQUEST.
    pub flags: u16,
    /// One whole OpenFlow message (header included), same version and xid as the outer one.
    pub message: Vec<u8>,
    /// Bundle properties, raw (when present, the inner message is padded to 8 bytes first).
    pub properties: Vec<Property>,
}

impl BundleControl {
    /// Reads the body (bundle id onwards).
    pub fn read(r: &mut Reader<'_>) -> Result<BundleControl, DecodeError> {
        let bundle_id = r.u32()?;
        let kind = r.u16()?;
        let flags = r.u16()?;
        let properties = props(read_properties(r, "bundle property")?);
        Ok(BundleControl { bundle_id, kind, flags, properties })
    }

    /// Writes the body (bundle id onwards).
    pub fn write(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.u32(self.bundle_id);
        w.u16(self.kind);
        w.u16(self.flags);
        for p in &self.properties {
            write_property(w, p.kind, &p.data)?;
        }
        Ok(())
    }
}

fn props(v: Vec<(u16, Vec<u8>)>) -> Vec<Property> {
    v.into_iter().map(|(kind, data)| Property { kind, data }).collect()
}

/// Checks the header of a message added to a bundle against the outer message's.
fn check_inner(bytes: &[u8], version: u8, xid: u32) -> Result<Header, DecodeError> {
    let bad_len = |len| DecodeError::Unsupported {
        what: format!("bundled message's length {len} does not fit"),
        error: OfError::BUNDLE_FAILED_MSG_BAD_LEN,
    };
    let h = Header::peek(bytes).map_err(|_| bad_len(bytes.len()))?;
    if usize::from(h.length) > bytes.len() {
        return Err(bad_len(usize::from(h.length)));
    }
    if h.version != version {
        return Err(DecodeError::BadVersion(h.version));
    }
    if h.xid != xid {
        return Err(DecodeError::Unsupported {
            what: format!("bundled message's xid {:#x} differs from the bundle add's {xid:#x}", h.xid),
            error: OfError::BUNDLE_FAILED_MSG_BAD_XID,
        });
    }
    Ok(h)
}

impl BundleAdd {
    /// Reads the body (bundle id onwards) of a message of `version` and `xid`.
    pub fn read(r: &mut Reader<'_>, version: u8, xid: u32) -> Result<BundleAdd, DecodeError> {
        let bundle_id = r.u32()?;
        r.skip(2)?;
        let flags = r.u16()?;
        let rest = r.rest();
        let h = check_inner(rest, version, xid)?;
        let n = usize::from(h.length);
        let message = rest[..n].to_vec();
        let mut after = Reader::new(&rest[n..], "bundle add message");
        let mut properties = Vec::new();
        if !after.is_empty() {
            after.skip(pad8(n))?;
            properties = props(read_properties(&mut after, "bundle property")?);
        }
        Ok(BundleAdd { bundle_id, flags, message, properties })
    }

    /// Writes the body (bundle id onwards) of a message of `version` and `xid`.
    pub fn write(&self, w: &mut Writer, version: u8, xid: u32) -> Result<(), EncodeError> {
        let h = check_inner(&self.message, version, xid)?;
        if usize::from(h.length) != self.message.len() {
            return Err(DecodeError::BadLength { what: "bundled message", len: self.message.len() }.into());
        }
        w.u32(self.bundle_id);
        w.zeros(2);
        w.u16(self.flags);
        w.put(&self.message);
        if !self.properties.is_empty() {
            w.zeros(pad8(self.message.len()));
            for p in &self.properties {
                write_property(w, p.kind, &p.data)?;
            }
        }
        Ok(())
    }

    /// The bundled message, decoded.
    pub fn inner(&self) -> Result<(Header, Message), DecodeError> {
        decode(&self.message)
    }
}
