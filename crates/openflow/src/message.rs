//! Whole messages: [`Message`], [`decode`] and [`encode`], and version negotiation from HELLO
//! ([`negotiate`]).
//!
//! Handled here: HELLO (with the version-bitmap element), ERROR, ECHO_REQUEST/REPLY,
//! EXPERIMENTER, FEATURES_REQUEST/REPLY, GET_CONFIG_REQUEST/REPLY, SET_CONFIG, PORT_STATUS,
//! MULTIPART_REQUEST/REPLY ([`crate::multipart`]), BARRIER_REQUEST/REPLY, ROLE_REQUEST/REPLY,
//! GROUP_MOD ([`crate::group`]), PORT_MOD, GET_ASYNC_REQUEST/REPLY and SET_ASYNC
//! ([`crate::async_config`]),
//! bundles ([`crate::bundle`]: types 33/34 in 1.4, the ONF EXT-230 experimenter messages in
//! 1.3), and, through [`crate::flow_mod`], FLOW_MOD, FLOW_REMOVED, PACKET_IN and PACKET_OUT.
//!
//! Every other type the version defines — TABLE_MOD, METER_MOD, the queue messages, ... —
//! decodes to [`Message::Other`] with its body as raw bytes, and encodes back from them (a
//! channel answers them with an error).

//! Versions: every message must be OpenFlow 1.3 ([`OFP13`]) or 1.4 ([`OFP14`]), except HELLO and
//! ERROR, which decode and encode at any version: a HELLO carries the sender's highest version
//! whatever it is, and an ERROR may answer a HELLO whose version failed.

use crate::async_config::{AsyncConfig, PortMod};
use crate::bundle::{BundleAdd, BundleControl, ONFT_BUNDLE_ADD_MESSAGE, ONFT_BUNDLE_CONTROL, ONF_EXPERIMENTER_ID};
use crate::error::{DecodeError, EncodeError, OfError};
use crate::flow_mod::{FlowMod, FlowRemoved, PacketIn, PacketOut};
use crate::group::GroupMod;
use crate::multipart::{MultipartReply, MultipartRequest};
use crate::port::{pad8, Port};
use crate::wire::{Header, Reader, Writer};
use crate::{OFP13, OFP14};

/// `OFPT_*` message types (the same numbers in 1.3 and 1.4; 30–34 exist only in 1.4).
pub mod kind {
    /// `OFPT_HELLO`.
    pub const HELLO: u8 = 0;
    /// `OFPT_ERROR`.
    pub const ERROR: u8 = 1;
    /// `OFPT_ECHO_REQUEST`.
    pub const ECHO_REQUEST: u8 = 2;
    /// `OFPT_ECHO_REPLY`.
    pub const ECHO_REPLY: u8 = 3;
    /// `OFPT_EXPERIMENTER`.
    pub const EXPERIMENTER: u8 = 4;
    /// `OFPT_FEATURES_REQUEST`.
    pub const FEATURES_REQUEST: u8 = 5;
    /// `OFPT_FEATURES_REPLY`.
    pub const FEATURES_REPLY: u8 = 6;
    /// `OFPT_GET_CONFIG_REQUEST`.
    pub const GET_CONFIG_REQUEST: u8 = 7;
    /// `OFPT_GET_CONFIG_REPLY`.
    pub const GET_CONFIG_REPLY: u8 = 8;
    /// `OFPT_SET_CONFIG`.
    pub const SET_CONFIG: u8 = 9;
    /// `OFPT_PACKET_IN`.
    pub const PACKET_IN: u8 = 10;
    /// `OFPT_FLOW_REMOVED`.
    pub const FLOW_REMOVED: u8 = 11;
    /// `OFPT_PORT_STATUS`.
    pub const PORT_STATUS: u8 = 12;
    /// `OFPT_PACKET_OUT`.
    pub const PACKET_OUT: u8 = 13;
    /// `OFPT_FLOW_MOD`.
    pub const FLOW_MOD: u8 = 14;
    /// `OFPT_MULTIPART_REQUEST`.
    pub const MULTIPART_REQUEST: u8 = 18;
    /// `OFPT_MULTIPART_REPLY`.
    pub const MULTIPART_REPLY: u8 = 19;
    /// `OFPT_BARRIER_REQUEST`.
    pub const BARRIER_REQUEST: u8 = 20;
    /// `OFPT_BARRIER_REPLY`.
    pub const BARRIER_REPLY: u8 = 21;
    /// `OFPT_ROLE_REQUEST`.
    pub const ROLE_REQUEST: u8 = 24;
    /// `OFPT_ROLE_REPLY`.
    pub const ROLE_REPLY: u8 = 25;
    /// `OFPT_GROUP_MOD`.
    pub const GROUP_MOD: u8 = 15;
    /// `OFPT_PORT_MOD`.
    pub const PORT_MOD: u8 = 16;
    /// `OFPT_GET_ASYNC_REQUEST`.
    pub const GET_ASYNC_REQUEST: u8 = 26;
    /// `OFPT_GET_ASYNC_REPLY`.
    pub const GET_ASYNC_REPLY: u8 = 27;
    /// `OFPT_SET_ASYNC`.
    pub const SET_ASYNC: u8 = 28;
    /// `OFPT_METER_MOD`, OpenFlow 1.3's last type.
    pub const METER_MOD: u8 = 29;
    /// `OFPT_BUNDLE_CONTROL` (1.4).
    pub const BUNDLE_CONTROL: u8 = 33;
    /// `OFPT_BUNDLE_ADD_MESSAGE` (1.4), OpenFlow 1.4's last type.
    pub const BUNDLE_ADD_MESSAGE: u8 = 34;
}

/// One OpenFlow message's body, by type (the header's version and xid travel beside it: see
/// [`decode`] and [`encode`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// `OFPT_HELLO`.
    Hello(Hello),
    /// `OFPT_ERROR`.
    Error(ErrorMsg),
    /// `OFPT_ECHO_REQUEST` with its arbitrary data.
    EchoRequest(Vec<u8>),
    /// `OFPT_ECHO_REPLY` with the request's data.
    EchoReply(Vec<u8>),
    /// `OFPT_EXPERIMENTER` other than the bundle extension.
    Experimenter(Experimenter),
    /// `OFPT_FEATURES_REQUEST`.
    FeaturesRequest,
    /// `OFPT_FEATURES_REPLY`.
    FeaturesReply(Features),
    /// `OFPT_GET_CONFIG_REQUEST`.
    GetConfigRequest,
    /// `OFPT_GET_CONFIG_REPLY`.
    GetConfigReply(SwitchConfig),
    /// `OFPT_SET_CONFIG`.
    SetConfig(SwitchConfig),
    /// `OFPT_PACKET_IN` ([`crate::flow_mod`]).
    PacketIn(PacketIn),
    /// `OFPT_FLOW_REMOVED` ([`crate::flow_mod`]).
    FlowRemoved(FlowRemoved),
    /// `OFPT_PORT_STATUS`.
    PortStatus(PortStatus),
    /// `OFPT_PACKET_OUT` ([`crate::flow_mod`]).
    PacketOut(PacketOut),
    /// `OFPT_FLOW_MOD` ([`crate::flow_mod`]).
    FlowMod(FlowMod),
    /// `OFPT_MULTIPART_REQUEST`.
    MultipartRequest(MultipartRequest),
    /// `OFPT_MULTIPART_REPLY`.
    MultipartReply(MultipartReply),
    /// `OFPT_BARRIER_REQUEST`.
    BarrierRequest,
    /// `OFPT_BARRIER_REPLY`.
    BarrierReply,
    /// `OFPT_ROLE_REQUEST`.
    RoleRequest(Role),
    /// `OFPT_ROLE_REPLY`.
    RoleReply(Role),
    /// `OFPT_GROUP_MOD` ([`crate::group`]).
    GroupMod(GroupMod),
    /// `OFPT_PORT_MOD` ([`crate::async_config`]).
    PortMod(PortMod),
    /// `OFPT_GET_ASYNC_REQUEST`.
    GetAsyncRequest,
    /// `OFPT_GET_ASYNC_REPLY`.
    GetAsyncReply(AsyncConfig),
    /// `OFPT_SET_ASYNC`.
    SetAsync(AsyncConfig),
    /// `OFPT_BUNDLE_CONTROL` (1.4) or ONF's `ONFT_BUNDLE_CONTROL` (1.3).
    BundleControl(BundleControl),
    /// `OFPT_BUNDLE_ADD_MESSAGE` (1.4) or ONF's `ONFT_BUNDLE_ADD_MESSAGE` (1.3).
    BundleAdd(BundleAdd),
    /// A type of the version that this module leaves raw (FLOW_MOD, PACKET_IN, PACKET_OUT,
    /// FLOW_REMOVED, ...: see the module documentation).
    Other {
        /// The `OFPT_*` type.
        kind: u8,
        /// The body after the header.
        body: Vec<u8>,
    },
}

/// `OFPHET_VERSIONBITMAP`.
pub const HELLO_ELEM_VERSIONBITMAP: u16 = 1;

/// A HELLO's elements (none in a bare HELLO).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hello {
    /// The elements in order.
    pub elements: Vec<HelloElement>,
}

/// One `ofp_hello_elem`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HelloElement {
    /// The versions the sender supports: bit `v % 32` of word `v / 32` set for version `v`.
    VersionBitmap(Vec<u32>),
    /// An element type this codec does not know, kept raw (padding excluded).
    Unknown {
        /// The element type.
        kind: u16,
        /// Its body after type and length.
        data: Vec<u8>,
    },
}

impl Hello {
    /// A HELLO announcing `versions` in a bitmap (e.g. `&[OFP13, OFP14]`).
    pub fn with_versions(versions: &[u8]) -> Hello {
        Hello { elements: vec![HelloElement::VersionBitmap(vec![bitmap_of(versions)])] }
    }

    /// The first version-bitmap element's bitmaps, if any.
    pub fn bitmap(&self) -> Option<&[u32]> {
        self.elements.iter().find_map(|e| match e {
            HelloElement::VersionBitmap(b) => Some(b.as_slice()),
            HelloElement::Unknown { .. } => None,
        })
    }

    fn read(r: &mut Reader<'_>, version: u8) -> Result<Hello, DecodeError> {
        let mut h = Hello::default();
        if version < OFP13 {
            // Before 1.3 a HELLO has no elements; whatever follows it is ignored.
            r.rest();
            return Ok(h);
        }
        while !r.is_empty() {
            let kind = r.u16()?;
            let len = usize::from(r.u16()?);
            if len < 4 {
                return Err(DecodeError::BadLength { what: "ofp_hello_elem", len });
            }
            let data = r.take(len - 4)?;
            // Every element is padded to 8 bytes, the last one too (as Open vSwitch requires).
            r.skip(pad8(len))?;
            if kind == HELLO_ELEM_VERSIONBITMAP {
                if !data.len().is_multiple_of(4) {
                    return Err(DecodeError::BadLength { what: "ofp_hello_elem_versionbitmap", len });
                }
                let mut d = Reader::new(data, "ofp_hello_elem_versionbitmap");
                let mut words = Vec::with_capacity(data.len() / 4);
                while !d.is_empty() {
                    words.push(d.u32()?);
                }
                h.elements.push(HelloElement::VersionBitmap(words));
            } else {
                h.elements.push(HelloElement::Unknown { kind, data: data.to_vec() });
            }
        }
        Ok(h)
    }

    fn write(&self, w: &mut Writer) -> Result<(), EncodeError> {
        for e in &self.elements {
            match e {
                HelloElement::VersionBitmap(words) => {
                    let data: Vec<u8> = words.iter().flat_map(|b| b.to_be_bytes()).collect();
                    crate::port::write_property(w, HELLO_ELEM_VERSIONBITMAP, &data)?;
                }
                HelloElement::Unknown { kind, data } => crate::port::write_property(w, *kind, data)?,
            }
        }
        Ok(())
    }
}

/// A version bitmap's first word with `versions`' bits set (versions above 31 are ignored).
pub fn bitmap_of(versions: &[u8]) -> u32 {
    versions.iter().filter(|&&v| v < 32).fold(0, |b, &v| b | (1 << v))
}

/// The version to speak after a HELLO exchange (the "Connection Setup" rules of OpenFlow 1.3.1+
/// and 1.4), from our supported versions (`our_bitmap`, bit `v` for version `v`) and the
/// peer's HELLO: its header version and its body.
///
/// When the peer sent a version bitmap, the result is the highest version set in both bitmaps
/// (ours is assumed to be sent too, as rqvs always sends one). When it did not, the result is
/// the smaller of its header version and our highest version, if we support that one. `None`:
/// no common version (the caller answers `OFPET_HELLO_FAILED`/`OFPHFC_INCOMPATIBLE`, see
/// [`OfError::HELLO_FAILED_INCOMPATIBLE`], and closes).
pub fn negotiate(our_bitmap: u32, their_version: u8, their_hello: &Hello) -> Option<u8> {
    if our_bitmap == 0 {
        return None;
    }
    let ours_highest = 31 - our_bitmap.leading_zeros() as u8;
    match their_hello.bitmap() {
        Some(words) => {
            let common = our_bitmap & words.first().copied().unwrap_or(0);
            (common != 0).then(|| 31 - common.leading_zeros() as u8)
        }
        None => {
            let v = their_version.min(ours_highest);
            (our_bitmap & (1 << v) != 0).then_some(v)
        }
    }
}

/// `ofp_error_msg`: type, code and data (usually the start of the offending message). For an
/// experimenter error (type 0xffff) `code` is the exp_code and `data` starts with the
/// experimenter id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorMsg {
    /// `ofp_error_type`.
    pub kind: u16,
    /// The type's code.
    pub code: u16,
    /// What follows.
    pub data: Vec<u8>,
}

impl ErrorMsg {
    /// How much of the offending message an ERROR quotes: its first 64 bytes, as the spec asks.
    pub const QUOTED: usize = 64;

    /// An ERROR for `e` quoting (up to [`ErrorMsg::QUOTED`] bytes of) the offending message.
    pub fn new(e: OfError, offending: &[u8]) -> ErrorMsg {
        ErrorMsg { kind: e.kind, code: e.code, data: offending[..offending.len().min(Self::QUOTED)].to_vec() }
    }

    /// The type and code.
    pub fn of_error(&self) -> OfError {
        OfError { kind: self.kind, code: self.code }
    }
}

/// `ofp_experimenter_header`'s fields and the data after them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Experimenter {
    /// The experimenter id.
    pub experimenter: u32,
    /// The experimenter's message type.
    pub exp_type: u32,
    /// The body after them.
    pub data: Vec<u8>,
}

/// `ofp_switch_features` (FEATURES_REPLY).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features {
    /// The datapath id.
    pub datapath_id: u64,
    /// Packets the switch can buffer.
    pub n_buffers: u32,
    /// Tables.
    pub n_tables: u8,
    /// 0 on the main connection.
    pub auxiliary_id: u8,
    /// `OFPC_*` bits.
    pub capabilities: u32,
}

/// `ofp_switch_config` (GET_CONFIG_REPLY, SET_CONFIG).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchConfig {
    /// `OFPC_FRAG_*` bits.
    pub flags: u16,
    /// Bytes of a packet sent to the controller on a table miss (`0xffff`: no buffering).
    pub miss_send_len: u16,
}

/// `ofp_role_request` (ROLE_REQUEST, ROLE_REPLY).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Role {
    /// `OFPCR_ROLE_*`: 0 no change, 1 equal, 2 master, 3 slave.
    pub role: u32,
    /// The master election generation id.
    pub generation_id: u64,
}

/// `ofp_port_status`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortStatus {
    /// `OFPPR_*`: 0 add, 1 delete, 2 modify.
    pub reason: u8,
    /// The port.
    pub port: Port,
}

fn expect_len(r: &Reader<'_>, what: &'static str, fixed: usize) -> Result<(), DecodeError> {
    if r.is_empty() {
        Ok(())
    } else {
        Err(DecodeError::BadLength { what, len: fixed + r.remaining() })
    }
}

/// Whether `kind` is a type of `version` that decodes to [`Message::Other`].
pub fn is_other_kind(version: u8, kind: u8) -> bool {
    use self::kind::*;
    let last = if version == OFP13 { METER_MOD } else { BUNDLE_ADD_MESSAGE };
    kind <= last
        && !matches!(
            kind,
            HELLO
                | ERROR
                | ECHO_REQUEST
                | ECHO_REPLY
                | EXPERIMENTER
                | FEATURES_REQUEST
                | FEATURES_REPLY
                | GET_CONFIG_REQUEST
                | GET_CONFIG_REPLY
                | SET_CONFIG
                | PACKET_IN
                | FLOW_REMOVED
                | PORT_STATUS
                | PACKET_OUT
                | FLOW_MOD
                | MULTIPART_REQUEST
                | MULTIPART_REPLY
                | BARRIER_REQUEST
                | BARRIER_REPLY
                | ROLE_REQUEST
                | ROLE_REPLY
                | BUNDLE_CONTROL
                | BUNDLE_ADD_MESSAGE
                | GROUP_MOD
                | PORT_MOD
                | GET_ASYNC_REQUEST
                | GET_ASYNC_REPLY
                | SET_ASYNC
        )
}

/// Decodes one whole message: `bytes` must be exactly the header's length (shorter:
/// [`DecodeError::Truncated`]; longer: [`DecodeError::BadLength`]). Never panics.
pub fn decode(bytes: &[u8]) -> Result<(Header, Message), DecodeError> {
    use self::kind::*;
    let h = Header::peek(bytes)?;
    let len = usize::from(h.length);
    if bytes.len() < len {
        return Err(DecodeError::Truncated { what: "message", need: len, have: bytes.len() });
    }
    if bytes.len() > len {
        return Err(DecodeError::BadLength { what: "message (bytes past its length)", len: bytes.len() });
    }
    let v = h.version;
    if !matches!(h.kind, HELLO | ERROR) && v != OFP13 && v != OFP14 {
        return Err(DecodeError::BadVersion(v));
    }
    let mut r = Reader::new(&bytes[Header::LEN..], "message body");
    let msg = match h.kind {
        HELLO => Message::Hello(Hello::read(&mut r, v)?),
        ERROR => Message::Error(ErrorMsg { kind: r.u16()?, code: r.u16()?, data: r.rest().to_vec() }),
        ECHO_REQUEST => Message::EchoRequest(r.rest().to_vec()),
        ECHO_REPLY => Message::EchoReply(r.rest().to_vec()),
        EXPERIMENTER => {
            let experimenter = r.u32()?;
            let exp_type = r.u32()?;
            match (v, experimenter, exp_type) {
                (OFP13, ONF_EXPERIMENTER_ID, ONFT_BUNDLE_CONTROL) => {
                    Message::BundleControl(BundleControl::read(&mut r)?)
                }
                (OFP13, ONF_EXPERIMENTER_ID, ONFT_BUNDLE_ADD_MESSAGE) => {
                    Message::BundleAdd(BundleAdd::read(&mut r, v, h.xid)?)
                }
                _ => Message::Experimenter(Experimenter { experimenter, exp_type, data: r.rest().to_vec() }),
            }
        }
        FEATURES_REQUEST | GET_CONFIG_REQUEST | BARRIER_REQUEST | BARRIER_REPLY | GET_ASYNC_REQUEST => {
            expect_len(&r, "message without body", Header::LEN)?;
            match h.kind {
                FEATURES_REQUEST => Message::FeaturesRequest,
                GET_CONFIG_REQUEST => Message::GetConfigRequest,
                GET_ASYNC_REQUEST => Message::GetAsyncRequest,
                BARRIER_REQUEST => Message::BarrierRequest,
                _ => Message::BarrierReply,
            }
        }
        FEATURES_REPLY => {
            let f = Features {
                datapath_id: r.u64()?,
                n_buffers: r.u32()?,
                n_tables: r.u8()?,
                auxiliary_id: r.u8()?,
                capabilities: {
                    r.skip(2)?;
                    r.u32()?
                },
            };
            r.skip(4)?; // reserved
            expect_len(&r, "ofp_switch_features", 32)?;
            Message::FeaturesReply(f)
        }
        GET_CONFIG_REPLY | SET_CONFIG => {
            let c = SwitchConfig { flags: r.u16()?, miss_send_len: r.u16()? };
            expect_len(&r, "ofp_switch_config", 12)?;
            if h.kind == SET_CONFIG {
                Message::SetConfig(c)
            } else {
                Message::GetConfigReply(c)
            }
        }
        PORT_STATUS => {
            let reason = r.u8()?;
            r.skip(7)?;
            let port = Port::read(&mut r, v)?;
            expect_len(&r, "ofp_port_status", 0)?;
            Message::PortStatus(PortStatus { reason, port })
        }
        PACKET_IN => Message::PacketIn(PacketIn::decode(v, r.rest())?),
        FLOW_REMOVED => Message::FlowRemoved(FlowRemoved::decode(v, r.rest())?),
        PACKET_OUT => Message::PacketOut(PacketOut::decode(v, r.rest())?),
        FLOW_MOD => Message::FlowMod(FlowMod::decode(v, r.rest())?),
        GROUP_MOD => Message::GroupMod(GroupMod::decode(r.rest())?),
        PORT_MOD => Message::PortMod(PortMod::decode(v, r.rest())?),
        GET_ASYNC_REPLY => Message::GetAsyncReply(AsyncConfig::decode(v, r.rest())?),
        SET_ASYNC => Message::SetAsync(AsyncConfig::decode(v, r.rest())?),
        MULTIPART_REQUEST => Message::MultipartRequest(MultipartRequest::read(&mut r, v)?),
        MULTIPART_REPLY => Message::MultipartReply(MultipartReply::read(&mut r, v)?),
        ROLE_REQUEST | ROLE_REPLY => {
            let role = r.u32()?;
            r.skip(4)?;
            let role = Role { role, generation_id: r.u64()? };
            expect_len(&r, "ofp_role_request", 24)?;
            if h.kind == ROLE_REQUEST {
                Message::RoleRequest(role)
            } else {
                Message::RoleReply(role)
            }
        }
        BUNDLE_CONTROL if v == OFP14 => Message::BundleControl(BundleControl::read(&mut r)?),
        BUNDLE_ADD_MESSAGE if v == OFP14 => Message::BundleAdd(BundleAdd::read(&mut r, v, h.xid)?),
        k if is_other_kind(v, k) => Message::Other { kind: k, body: r.rest().to_vec() },
        k => return Err(DecodeError::BadType(k)),
    };
    Ok((h, msg))
}

/// Encodes `msg` as one message of `version` with transaction id `xid`. Errors: a version other
/// than 1.3/1.4 (except for HELLO and ERROR), something the version cannot carry, a string or
/// message too long for its field, an [`Message::Other`] whose type has its own variant.
pub fn encode(version: u8, xid: u32, msg: &Message) -> Result<Vec<u8>, EncodeError> {
    use self::kind::*;
    let any_version = matches!(msg, Message::Hello(_) | Message::Error(_));
    if !any_version && version != OFP13 && version != OFP14 {
        return Err(DecodeError::BadVersion(version).into());
    }
    let onf13 = version == OFP13;
    let kind = match msg {
        Message::Hello(_) => HELLO,
        Message::Error(_) => ERROR,
        Message::EchoRequest(_) => ECHO_REQUEST,
        Message::EchoReply(_) => ECHO_REPLY,
        Message::Experimenter(_) => EXPERIMENTER,
        Message::FeaturesRequest => FEATURES_REQUEST,
        Message::FeaturesReply(_) => FEATURES_REPLY,
        Message::GetConfigRequest => GET_CONFIG_REQUEST,
        Message::GetConfigReply(_) => GET_CONFIG_REPLY,
        Message::SetConfig(_) => SET_CONFIG,
        Message::PacketIn(_) => PACKET_IN,
        Message::FlowRemoved(_) => FLOW_REMOVED,
        Message::PortStatus(_) => PORT_STATUS,
        Message::PacketOut(_) => PACKET_OUT,
        Message::FlowMod(_) => FLOW_MOD,
        Message::GroupMod(_) => GROUP_MOD,
        Message::PortMod(_) => PORT_MOD,
        Message::GetAsyncRequest => GET_ASYNC_REQUEST,
        Message::GetAsyncReply(_) => GET_ASYNC_REPLY,
        Message::SetAsync(_) => SET_ASYNC,
        Message::MultipartRequest(_) => MULTIPART_REQUEST,
        Message::MultipartReply(_) => MULTIPART_REPLY,
        Message::BarrierRequest => BARRIER_REQUEST,
        Message::BarrierReply => BARRIER_REPLY,
        Message::RoleRequest(_) => ROLE_REQUEST,
        Message::RoleReply(_) => ROLE_REPLY,
        Message::BundleControl(_) if onf13 => EXPERIMENTER,
        Message::BundleControl(_) => BUNDLE_CONTROL,
        Message::BundleAdd(_) if onf13 => EXPERIMENTER,
        Message::BundleAdd(_) => BUNDLE_ADD_MESSAGE,
        Message::Other { kind, .. } if is_other_kind(version, *kind) => *kind,
        Message::Other { kind, .. } => return Err(DecodeError::BadType(*kind).into()),
    };
    let mut w = Writer::new();
    Header { version, kind, length: 0, xid }.write(&mut w);
    match msg {
        Message::Hello(h) => h.write(&mut w)?,
        Message::Error(e) => {
            w.u16(e.kind);
            w.u16(e.code);
            w.put(&e.data);
        }
        Message::EchoRequest(d) | Message::EchoReply(d) => w.put(d),
        Message::Experimenter(e) => {
            if onf13
                && e.experimenter == ONF_EXPERIMENTER_ID
                && matches!(e.exp_type, ONFT_BUNDLE_CONTROL | ONFT_BUNDLE_ADD_MESSAGE)
            {
                return Err(DecodeError::Unsupported {
                    what: "ONF bundle messages are Message::BundleControl/BundleAdd in OpenFlow 1.3".into(),
                    error: OfError::BAD_REQUEST_BAD_TYPE,
                }
                .into());
            }
            w.u32(e.experimenter);
            w.u32(e.exp_type);
            w.put(&e.data);
        }
        Message::FeaturesRequest
        | Message::GetConfigRequest
        | Message::BarrierRequest
        | Message::BarrierReply
        | Message::GetAsyncRequest => {}
        Message::FeaturesReply(f) => {
            w.u64(f.datapath_id);
            w.u32(f.n_buffers);
            w.u8(f.n_tables);
            w.u8(f.auxiliary_id);
            w.zeros(2);
            w.u32(f.capabilities);
            w.zeros(4);
        }
        Message::GetConfigReply(c) | Message::SetConfig(c) => {
            w.u16(c.flags);
            w.u16(c.miss_send_len);
        }
        Message::PortStatus(p) => {
            w.u8(p.reason);
            w.zeros(7);
            p.port.write(&mut w, version)?;
        }
        Message::PacketIn(m) => m.encode(version, &mut w)?,
        Message::FlowRemoved(m) => m.encode(version, &mut w)?,
        Message::PacketOut(m) => m.encode(version, &mut w)?,
        Message::FlowMod(m) => m.encode(version, &mut w)?,
        Message::GroupMod(m) => m.encode(&mut w)?,
        Message::PortMod(m) => m.encode(version, &mut w)?,
        Message::GetAsyncReply(c) | Message::SetAsync(c) => c.encode(version, &mut w)?,
        Message::MultipartRequest(m) => m.write(&mut w, version)?,
        Message::MultipartReply(m) => m.write(&mut w, version)?,
        Message::RoleRequest(r) | Message::RoleReply(r) => {
            w.u32(r.role);
            w.zeros(4);
            w.u64(r.generation_id);
        }
        Message::BundleControl(b) => {
            if onf13 {
                w.u32(ONF_EXPERIMENTER_ID);
                w.u32(ONFT_BUNDLE_CONTROL);
            }
            b.write(&mut w)?;
        }
        Message::BundleAdd(b) => {
            if onf13 {
                w.u32(ONF_EXPERIMENTER_ID);
                w.u32(ONFT_BUNDLE_ADD_MESSAGE);
            }
            b.write(&mut w, version, xid)?;
        }
        Message::Other { body, .. } => w.put(body),
    }
    w.finish_message()
}
