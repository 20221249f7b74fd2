//! SET_ASYNC, GET_ASYNC_REPLY (OpenFlow 1.3 §A.3.10, 1.4 §7.3.10) and PORT_MOD (1.3 §A.3.4.3,
//! 1.4 §7.3.4.3).
//!
//! **Async configuration.** Which asynchronous messages a connection receives, by reason: one
//! 32-bit mask (bit `r` for reason `r`) per message and role. 1.3 sends six masks in a fixed
//! layout (packet-in, port-status, flow-removed; each for master/equal then slave); 1.4 sends
//! properties, each one mask, and may send only some (the others keep their value). Both decode
//! to [`AsyncConfig`], a list of (property type, mask) with 1.4's property numbers.
//!
//! **PORT_MOD.** port, hardware address, `config` bits under `mask`, and the advertised
//! features (1.3's field, 1.4's ETHERNET property).

use crate::error::{DecodeError, EncodeError, OfError};
use crate::port::{read_properties, write_property};
use crate::wire::{Reader, Writer};
use crate::OFP13;

/// `OFPT_GET_ASYNC_REQUEST`.
pub const GET_ASYNC_REQUEST: u8 = 26;
/// `OFPT_GET_ASYNC_REPLY`.
pub const GET_ASYNC_REPLY: u8 = 27;
/// `OFPT_SET_ASYNC`.
pub const SET_ASYNC: u8 = 28;
/// `OFPT_PORT_MOD`.
pub const PORT_MOD: u8 = 16;
/// `OFPT_GROUP_MOD`.
pub const GROUP_MOD: u8 = 15;

/// `OFPACPT_PACKET_IN_SLAVE` (1.4's numbers; the masks of a role are type `2k` slave, `2k+1`
/// master).
pub const PACKET_IN_SLAVE: u16 = 0;
/// `OFPACPT_PACKET_IN_MASTER`.
pub const PACKET_IN_MASTER: u16 = 1;
/// `OFPACPT_PORT_STATUS_SLAVE`.
pub const PORT_STATUS_SLAVE: u16 = 2;
/// `OFPACPT_PORT_STATUS_MASTER`.
pub const PORT_STATUS_MASTER: u16 = 3;
/// `OFPACPT_FLOW_REMOVED_SLAVE`.
pub const FLOW_REMOVED_SLAVE: u16 = 4;
/// `OFPACPT_FLOW_REMOVED_MASTER`.
pub const FLOW_REMOVED_MASTER: u16 = 5;
/// The last reason property 1.4 defines (`OFPACPT_REQUESTFORWARD_MASTER`).
const LAST_PROP: u16 = 11;

/// An async configuration: (1.4 property type, mask) pairs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AsyncConfig {
    pub props: Vec<(u16, u32)>,
}

/// The 1.3 layout's order: packet_in_mask[master, slave], port_status_mask[..],
/// flow_removed_mask[..].
const LAYOUT_13: [u16; 6] =
    [PACKET_IN_MASTER, PACKET_IN_SLAVE, PORT_STATUS_MASTER, PORT_STATUS_SLAVE, FLOW_REMOVED_MASTER, FLOW_REMOVED_SLAVE];

impl AsyncConfig {
    /// The mask of property `kind`, if the configuration has it.
    pub fn get(&self, kind: u16) -> Option<u32> {
        self.props.iter().rev().find(|p| p.0 == kind).map(|p| p.1)
    }

    /// Sets the properties of `other` in `self` (a 1.4 SET_ASYNC changes only what it names).
    pub fn apply(&mut self, other: &AsyncConfig) {
        for &(k, m) in &other.props {
            match self.props.iter_mut().find(|p| p.0 == k) {
                Some(p) => p.1 = m,
                None => self.props.push((k, m)),
            }
        }
        self.props.sort_by_key(|p| p.0);
    }

    /// Decodes a SET_ASYNC or GET_ASYNC_REPLY body.
    pub fn decode(version: u8, body: &[u8]) -> Result<AsyncConfig, DecodeError> {
        let mut r = Reader::new(body, "ofp_async_config");
        let mut props = Vec::new();
        if version == OFP13 {
            for k in LAYOUT_13 {
                props.push((k, r.u32()?));
            }
            if !r.is_empty() {
                return Err(DecodeError::BadLength { what: "ofp_async_config", len: body.len() + 8 });
            }
        } else {
            for (kind, data) in read_properties(&mut r, "ofp_async_config_prop")? {
                if kind > LAST_PROP {
                    return Err(DecodeError::Unsupported {
                        what: format!("async config property {kind:#x} is not supported by rqvs"),
                        error: OfError::ASYNC_CONFIG_FAILED_INVALID,
                    });
                }
                if data.len() != 4 {
                    return Err(DecodeError::Unsupported {
                        what: format!("async config property {kind} has {} bytes, expected 4", data.len()),
                        error: OfError::BAD_REQUEST_BAD_LEN,
                    });
                }
                props.push((kind, u32::from_be_bytes([data[0], data[1], data[2], data[3]])));
            }
        }
        Ok(AsyncConfig { props })
    }

    /// Encodes the body. In 1.3 the six masks of the fixed layout must all be present.
    pub fn encode(&self, version: u8, w: &mut Writer) -> Result<(), EncodeError> {
        if version == OFP13 {
            for k in LAYOUT_13 {
                let Some(m) = self.get(k) else {
                    return Err(EncodeError(format!("OpenFlow 1.3 async config needs property {k}")));
                };
                w.u32(m);
            }
            return Ok(());
        }
        for &(k, m) in &self.props {
            write_property(w, k, &m.to_be_bytes())?;
        }
        Ok(())
    }

    /// The default of a new connection of `version`, as OVS 3.1 sets it
    /// (`ofputil_async_cfg_default`): packet-in every reason but invalid TTL (0x3b) for
    /// master/equal, none for slaves; every port-status reason (add, delete, modify) for both;
    /// flow-removed for master/equal: idle, hard, delete (0x7) in 1.0 and 1.3, plus group
    /// delete, meter delete and eviction (0x3f) in 1.4. 1.4's other properties (role status, table status,
    /// request forward) are not kept: rqvs sends none of those messages.
    pub fn ovs_default(version: u8) -> AsyncConfig {
        let removed = if version <= OFP13 { 0x7 } else { 0x3f };
        AsyncConfig {
            props: vec![
                (PACKET_IN_SLAVE, 0),
                (PACKET_IN_MASTER, 0x3b),
                (PORT_STATUS_SLAVE, 0x7),
                (PORT_STATUS_MASTER, 0x7),
                (FLOW_REMOVED_SLAVE, 0),
                (FLOW_REMOVED_MASTER, removed),
            ],
        }
    }

    /// Every mask zero: no asynchronous message at all (OVS's `OFPUTIL_ASYNC_CFG_INIT`, a
    /// connection's configuration when `enable_async_messages` is false and it sent no
    /// SET_ASYNC).
    pub fn none() -> AsyncConfig {
        let mut props: Vec<(u16, u32)> = LAYOUT_13.iter().map(|&k| (k, 0)).collect();
        props.sort_by_key(|p| p.0);
        AsyncConfig { props }
    }

    /// Does a connection in `slave` role take a message of `master_prop` (the MASTER property
    /// type of the message; the slave one is one below) with `reason`?
    pub fn wants(&self, master_prop: u16, slave: bool, reason: u8) -> bool {
        let k = if slave { master_prop - 1 } else { master_prop };
        reason < 32 && self.get(k).unwrap_or(0) & 1 << reason != 0
    }
}

/// `OFPPC_PORT_DOWN`: the port is administratively down.
pub const OFPPC_PORT_DOWN: u32 = 1;
/// `OFPPC_NO_RECV`.
pub const OFPPC_NO_RECV: u32 = 4;
/// `OFPPC_NO_FWD`.
pub const OFPPC_NO_FWD: u32 = 32;
/// `OFPPC_NO_PACKET_IN`.
pub const OFPPC_NO_PACKET_IN: u32 = 64;

/// A PORT_MOD.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortMod {
    pub port_no: u32,
    pub hw_addr: [u8; 6],
    /// The new `OFPPC_*` bits, those under `mask`.
    pub config: u32,
    pub mask: u32,
    /// `OFPPF_*` to advertise (0: unchanged).
    pub advertise: u32,
}

impl PortMod {
    /// Decodes the body.
    pub fn decode(version: u8, body: &[u8]) -> Result<PortMod, DecodeError> {
        let mut r = Reader::new(body, "ofp_port_mod");
        let port_no = r.u32()?;
        r.skip(4)?;
        let hw_addr = r.array::<6>()?;
        r.skip(2)?;
        let mut p = PortMod { port_no, hw_addr, config: r.u32()?, mask: r.u32()?, advertise: 0 };
        if version == OFP13 {
            p.advertise = r.u32()?;
            r.skip(4)?;
            if !r.is_empty() {
                return Err(DecodeError::BadLength { what: "ofp_port_mod", len: body.len() + 8 });
            }
        } else {
            for (kind, data) in read_properties(&mut r, "ofp_port_mod_prop")? {
                if kind == 0 && data.len() == 4 {
                    p.advertise = u32::from_be_bytes([data[0], data[1], data[2], data[3]]);
                } else if kind != 0 {
                    return Err(DecodeError::Unsupported {
                        what: format!("port_mod property {kind} (optical, experimenter) is not supported by rqvs"),
                        error: OfError::BAD_REQUEST_BAD_TYPE,
                    });
                } else {
                    return Err(DecodeError::Unsupported {
                        what: format!("port_mod ethernet property has {} bytes, expected 4", data.len()),
                        error: OfError::BAD_REQUEST_BAD_LEN,
                    });
                }
            }
        }
        Ok(p)
    }

    /// Encodes the body (1.4: the ethernet property only when `advertise` is set).
    pub fn encode(&self, version: u8, w: &mut Writer) -> Result<(), EncodeError> {
        w.u32(self.port_no);
        w.zeros(4);
        w.put(&self.hw_addr);
        w.zeros(2);
        w.u32(self.config);
        w.u32(self.mask);
        if version == OFP13 {
            w.u32(self.advertise);
            w.zeros(4);
        } else if self.advertise != 0 {
            write_property(w, 0, &self.advertise.to_be_bytes())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_wants_nothing_until_a_set_async_asks() {
        let mut c = AsyncConfig::none();
        for (prop, reason) in
            [(PACKET_IN_MASTER, 0), (PACKET_IN_MASTER, 1), (PORT_STATUS_MASTER, 2), (FLOW_REMOVED_MASTER, 0)]
        {
            assert!(!c.wants(prop, false, reason) && !c.wants(prop, true, reason));
        }
        // Every 1.3 mask is there (GET_ASYNC encodes it).
        assert!(c.encode(OFP13, &mut Writer::new()).is_ok());
        c.apply(&AsyncConfig { props: vec![(PACKET_IN_MASTER, 1 << 1)] });
        assert!(c.wants(PACKET_IN_MASTER, false, 1) && !c.wants(PACKET_IN_MASTER, false, 0));
        assert!(!c.wants(PORT_STATUS_MASTER, false, 2));
    }

    #[test]
    fn defaults_set_and_wants() {
        let mut c = AsyncConfig::ovs_default(OFP13);
        // Packet-in: no_match and action for master/equal, nothing for slaves.
        assert!(c.wants(PACKET_IN_MASTER, false, 0) && c.wants(PACKET_IN_MASTER, false, 1));
        assert!(!c.wants(PACKET_IN_MASTER, false, 2), "invalid_ttl is off by default");
        assert!(!c.wants(PACKET_IN_MASTER, true, 1));
        // Port status for both roles; flow removed for master/equal only.
        assert!(c.wants(PORT_STATUS_MASTER, true, 2) && c.wants(FLOW_REMOVED_MASTER, false, 2));
        assert!(!c.wants(FLOW_REMOVED_MASTER, true, 2));
        // A 1.4 SET_ASYNC naming one property changes that one only.
        c.apply(&AsyncConfig { props: vec![(PACKET_IN_MASTER, 0b10)] });
        assert!(!c.wants(PACKET_IN_MASTER, false, 0) && c.wants(PACKET_IN_MASTER, false, 1));
        assert!(c.wants(PORT_STATUS_MASTER, false, 0));
        assert!(!c.wants(PACKET_IN_MASTER, false, 40), "reasons above 31 are never wanted");
    }
}
