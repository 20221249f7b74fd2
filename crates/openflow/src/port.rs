//! Ports as OpenFlow describes them: `ofp_port` (in PORT_STATUS and the PORT_DESC multipart
//! reply) and the TLV properties OpenFlow 1.4 hangs off ports, port statistics and bundles.
//!
//! `ofp_port` differs between the versions: OpenFlow 1.3's is a fixed 64 bytes with the Ethernet
//! fields inline (§A.2.1); OpenFlow 1.4's is 40 bytes plus properties, the Ethernet fields being
//! one of them (`OFPPDPT_ETHERNET`, §7.2.1). [`Port`] holds both: `ethernet` is always `Some`
//! after decoding 1.3; other properties exist only in 1.4.

use crate::error::{DecodeError, EncodeError, OfError};
use crate::wire::{Reader, Writer};
use crate::{OFP13, OFP14};

/// One OpenFlow 1.4 property (`type`, `length`, body, padding to 8 bytes) that this codec keeps
/// as it came: `data` is the body after the 4-byte type and length (an experimenter property's
/// experimenter id and type included), without the padding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Property {
    /// The property type.
    pub kind: u16,
    /// The body after type and length, padding excluded.
    pub data: Vec<u8>,
}

/// Reads properties until `r` is empty. Each property's length must be at least 4 and, with its
/// padding to 8 bytes, fit in what is left.
pub(crate) fn read_properties(r: &mut Reader<'_>, what: &'static str) -> Result<Vec<(u16, Vec<u8>)>, DecodeError> {
    let mut out = Vec::new();
    while !r.is_empty() {
        let kind = r.u16()?;
        let len = usize::from(r.u16()?);
        if len < 4 {
            return Err(DecodeError::BadLength { what, len });
        }
        let data = r.take(len - 4)?.to_vec();
        r.skip(pad8(len))?;
        out.push((kind, data));
    }
    Ok(out)
}

/// Writes one property: type, length (4 + `data`), `data`, zeros to 8 bytes.
pub(crate) fn write_property(w: &mut Writer, kind: u16, data: &[u8]) -> Result<(), EncodeError> {
    let len = 4 + data.len();
    let l = u16::try_from(len).map_err(|_| DecodeError::BadLength { what: "property", len })?;
    w.u16(kind);
    w.u16(l);
    w.put(data);
    w.zeros(pad8(len));
    Ok(())
}

/// Bytes of padding after `len` bytes up to a multiple of 8.
pub(crate) fn pad8(len: usize) -> usize {
    (8 - len % 8) % 8
}

/// A NUL-padded string field of `n` bytes: the bytes up to the first NUL, lossily UTF-8, cut
/// to at most `n - 1` bytes (a field filled to the end, or invalid UTF-8 whose replacement
/// characters are longer, is shortened), so that what decodes always encodes again.
pub(crate) fn read_str(r: &mut Reader<'_>, n: usize) -> Result<String, DecodeError> {
    let b = r.take(n)?;
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    let mut s = String::from_utf8_lossy(&b[..end]).into_owned();
    let mut cut = s.len().min(n.saturating_sub(1));
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
    Ok(s)
}

/// Writes `s` into a NUL-padded field of `n` bytes; it must leave room for the NUL.
pub(crate) fn write_str(w: &mut Writer, s: &str, n: usize, what: &'static str) -> Result<(), EncodeError> {
    if s.len() >= n || s.as_bytes().contains(&0) {
        return Err(DecodeError::BadLength { what, len: s.len() }.into());
    }
    w.put(s.as_bytes());
    w.zeros(n - s.len());
    Ok(())
}

/// An encoder's refusal: something OpenFlow 1.3 cannot carry.
pub(crate) fn not_in_13(what: &str) -> DecodeError {
    DecodeError::Unsupported {
        what: format!("{what} cannot be encoded in OpenFlow 1.3"),
        error: OfError::BAD_REQUEST_BAD_VERSION,
    }
}

/// The Ethernet description of a port: the `OFPPF_*` feature bitmaps and speeds in kbps (inline in
/// OpenFlow 1.3's `ofp_port`, the `OFPPDPT_ETHERNET` property in 1.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortEthernet {
    /// Current features (`OFPPF_*`).
    pub curr: u32,
    /// Features advertised by the port.
    pub advertised: u32,
    /// Features supported by the port.
    pub supported: u32,
    /// Features advertised by the peer.
    pub peer: u32,
    /// Current bit rate in kbps.
    pub curr_speed: u32,
    /// Maximum bit rate in kbps.
    pub max_speed: u32,
}

impl PortEthernet {
    fn read(r: &mut Reader<'_>) -> Result<PortEthernet, DecodeError> {
        Ok(PortEthernet {
            curr: r.u32()?,
            advertised: r.u32()?,
            supported: r.u32()?,
            peer: r.u32()?,
            curr_speed: r.u32()?,
            max_speed: r.u32()?,
        })
    }

    fn write(&self, w: &mut Writer) {
        for v in [self.curr, self.advertised, self.supported, self.peer, self.curr_speed, self.max_speed] {
            w.u32(v);
        }
    }
}

/// `ofp_port`: a port's number, address, name, configuration and state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Port {
    /// The port number (`OFPP_*` above 0xffffff00 are reserved).
    pub port_no: u32,
    /// The port's MAC address.
    pub hw_addr: [u8; 6],
    /// The port's name (at most 15 bytes on the wire, NUL-padded to 16).
    pub name: String,
    /// `OFPPC_*` bits.
    pub config: u32,
    /// `OFPPS_*` bits.
    pub state: u32,
    /// The Ethernet fields (always `Some` after decoding 1.3; encoded as zeros in 1.3 when
    /// `None`).
    pub ethernet: Option<PortEthernet>,
    /// OpenFlow 1.4 properties other than the first Ethernet one (optical, experimenter), kept
    /// raw; encoding a port with any in 1.3 is an error.
    pub properties: Vec<Property>,
}

/// The `OFPPC_*` bits only OpenFlow 1.0 has: `NO_STP`, `NO_RECV_STP`, `NO_FLOOD` (a 1.3 or 1.4
/// port description does not carry them: Open vSwitch's `OFPPC11_ALL`).
pub const OFPPC10_ONLY: u32 = 0x02 | 0x08 | 0x10;

/// `OFPPDPT_ETHERNET`, the OpenFlow 1.4 port description property holding [`PortEthernet`].
pub const PORT_DESC_PROP_ETHERNET: u16 = 0;
/// The length of OpenFlow 1.3's `ofp_port`.
pub const PORT13_LEN: usize = 64;
/// The fixed part of OpenFlow 1.4's `ofp_port`.
pub const PORT14_LEN: usize = 40;

impl Port {
    /// Reads one port of `version` (1.3: 64 bytes; otherwise 1.4's layout, its own length field).
    pub fn read(r: &mut Reader<'_>, version: u8) -> Result<Port, DecodeError> {
        if version == OFP13 {
            let mut p = Port { port_no: r.u32()?, ..Port::default() };
            r.skip(4)?;
            p.hw_addr = r.array()?;
            r.skip(2)?;
            p.name = read_str(r, 16)?;
            p.config = r.u32()?;
            p.state = r.u32()?;
            p.ethernet = Some(PortEthernet::read(r)?);
            return Ok(p);
        }
        let port_no = r.u32()?;
        let len = usize::from(r.u16()?);
        if len < PORT14_LEN {
            return Err(DecodeError::BadLength { what: "ofp_port", len });
        }
        let mut body = r.sub(len - 6, "ofp_port")?;
        body.skip(2)?;
        let mut p = Port { port_no, hw_addr: body.array()?, ..Port::default() };
        body.skip(2)?;
        p.name = read_str(&mut body, 16)?;
        p.config = body.u32()?;
        p.state = body.u32()?;
        for (kind, data) in read_properties(&mut body, "ofp_port property")? {
            if kind == PORT_DESC_PROP_ETHERNET && p.ethernet.is_none() {
                let mut e = Reader::new(&data, "ofp_port_desc_prop_ethernet");
                if data.len() != 28 {
                    return Err(DecodeError::BadLength { what: "ofp_port_desc_prop_ethernet", len: data.len() + 4 });
                }
                e.skip(4)?;
                p.ethernet = Some(PortEthernet::read(&mut e)?);
            } else {
                p.properties.push(Property { kind, data });
            }
        }
        Ok(p)
    }

    /// Writes the port as `version` (1.3 or 1.4) lays it out.
    pub fn write(&self, w: &mut Writer, version: u8) -> Result<(), EncodeError> {
        if version != OFP13 && version != OFP14 {
            return Err(DecodeError::BadVersion(version).into());
        }
        let start = w.len();
        w.u32(self.port_no);
        if version == OFP13 {
            if !self.properties.is_empty() {
                return Err(not_in_13("port properties").into());
            }
            w.zeros(4);
        } else {
            w.u16(0); // length, patched below
            w.zeros(2);
        }
        w.put(&self.hw_addr);
        w.zeros(2);
        write_str(w, &self.name, 16, "port name")?;
        w.u32(self.config);
        w.u32(self.state);
        if version == OFP13 {
            self.ethernet.unwrap_or_default().write(w);
            return Ok(());
        }
        if let Some(e) = &self.ethernet {
            let mut d = Writer::new();
            d.zeros(4);
            e.write(&mut d);
            write_property(w, PORT_DESC_PROP_ETHERNET, &d.bytes)?;
        }
        for p in &self.properties {
            write_property(w, p.kind, &p.data)?;
        }
        let len = w.len() - start;
        let l = u16::try_from(len).map_err(|_| DecodeError::BadLength { what: "ofp_port", len })?;
        w.patch_u16(start + 4, l);
        Ok(())
    }
}
