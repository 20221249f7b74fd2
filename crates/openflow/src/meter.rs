//! Meters on the wire (OpenFlow 1.3 §A.3.4.4, §A.3.5.12–13; 1.4 §7.3.4.5, §7.3.5.12–13):
//! METER_MOD and the METER (statistics) and METER_CONFIG multipart bodies. METER_FEATURES is in
//! [`crate::group`] ([`crate::group::MeterFeatures`]). 1.3 and 1.4 share every layout here.
//!
//! METER_MOD travels as [`crate::Message::Other`] (type [`crate::message::kind::METER_MOD`])
//! and the two multipart types as [`crate::multipart::MultipartRequestBody::Other`] /
//! [`crate::multipart::MultipartReplyBody::Other`] (types [`MP_METER`], [`MP_METER_CONFIG`]):
//! this module decodes and encodes their bodies ([`MeterMod::decode`], [`meter_request`],
//! [`encode_meter_stats`], [`encode_meter_configs`], and their inverses).

use crate::error::{DecodeError, OfError};
use crate::wire::{Reader, Writer};

/// `OFPMP_METER`.
pub const MP_METER: u16 = 9;
/// `OFPMP_METER_CONFIG`.
pub const MP_METER_CONFIG: u16 = 10;

/// `OFPM_MAX`: the last meter id a controller numbers.
pub const OFPM_MAX: u32 = 0xffff_0000;
/// `OFPM_SLOWPATH`: the meter of packets sent to the slow path.
pub const OFPM_SLOWPATH: u32 = 0xffff_fffd;
/// `OFPM_CONTROLLER`: the meter of packets sent to the controller (packet-ins).
pub const OFPM_CONTROLLER: u32 = 0xffff_fffe;
/// `OFPM_ALL`: every meter (delete, statistics and configuration requests).
pub const OFPM_ALL: u32 = 0xffff_ffff;

/// `OFPMF_KBPS`: rates in kilobits per second.
pub const OFPMF_KBPS: u16 = 1;
/// `OFPMF_PKTPS`: rates in packets per second.
pub const OFPMF_PKTPS: u16 = 2;
/// `OFPMF_BURST`: the bands' burst sizes count.
pub const OFPMF_BURST: u16 = 4;
/// `OFPMF_STATS`: keep statistics.
pub const OFPMF_STATS: u16 = 8;

/// `OFPMBT_DROP`.
pub const OFPMBT_DROP: u16 = 1;
/// `OFPMBT_DSCP_REMARK`.
pub const OFPMBT_DSCP_REMARK: u16 = 2;
/// `OFPMBT_EXPERIMENTER`.
pub const OFPMBT_EXPERIMENTER: u16 = 0xffff;

/// METER_MOD's command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MeterModCommand {
    Add,
    Modify,
    Delete,
}

/// One band of a meter (`ofp_meter_band_*`, 16 bytes each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Band {
    /// `OFPMBT_*`.
    pub kind: u16,
    /// Kilobits or packets per second (the meter's flags say which).
    pub rate: u32,
    /// Kilobits or packets (counted only with `OFPMF_BURST`).
    pub burst_size: u32,
    /// `dscp_remark`: the drop precedence added (0 for the other types).
    pub prec_level: u8,
    /// `experimenter`: its id (0 for the other types).
    pub experimenter: u32,
}

impl Band {
    /// A drop band.
    pub fn drop(rate: u32, burst_size: u32) -> Band {
        Band { kind: OFPMBT_DROP, rate, burst_size, prec_level: 0, experimenter: 0 }
    }

    fn read(r: &mut Reader<'_>) -> Result<Band, DecodeError> {
        let kind = r.u16()?;
        let len = r.u16()?;
        if len != 16 {
            return Err(DecodeError::BadLength { what: "ofp_meter_band", len: usize::from(len) });
        }
        let rate = r.u32()?;
        let burst_size = r.u32()?;
        let tail: [u8; 4] = r.array()?;
        let (prec_level, experimenter) = match kind {
            OFPMBT_DSCP_REMARK => (tail[0], 0),
            OFPMBT_EXPERIMENTER => (0, u32::from_be_bytes(tail)),
            _ => (0, 0),
        };
        Ok(Band { kind, rate, burst_size, prec_level, experimenter })
    }

    fn write(&self, w: &mut Writer) {
        w.u16(self.kind);
        w.u16(16);
        w.u32(self.rate);
        w.u32(self.burst_size);
        match self.kind {
            OFPMBT_DSCP_REMARK => {
                w.u8(self.prec_level);
                w.zeros(3);
            }
            OFPMBT_EXPERIMENTER => w.u32(self.experimenter),
            _ => w.zeros(4),
        }
    }
}

/// A meter's configuration: id, `OFPMF_*` flags, bands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meter {
    pub id: u32,
    pub flags: u16,
    pub bands: Vec<Band>,
}

/// `OFPT_METER_MOD`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeterMod {
    pub command: MeterModCommand,
    pub meter: Meter,
}

fn read_bands(r: &mut Reader<'_>) -> Result<Vec<Band>, DecodeError> {
    let mut bands = Vec::new();
    while !r.is_empty() {
        bands.push(Band::read(r)?);
    }
    Ok(bands)
}

impl MeterMod {
    /// Decodes the body after the header. An unknown command is `OFPMMFC_BAD_COMMAND`.
    pub fn decode(body: &[u8]) -> Result<MeterMod, DecodeError> {
        let mut r = Reader::new(body, "ofp_meter_mod");
        let command = match r.u16()? {
            0 => MeterModCommand::Add,
            1 => MeterModCommand::Modify,
            2 => MeterModCommand::Delete,
            c => {
                return Err(DecodeError::Unsupported {
                    what: format!("meter_mod command {c}"),
                    error: OfError::METER_MOD_FAILED_BAD_COMMAND,
                })
            }
        };
        let flags = r.u16()?;
        let id = r.u32()?;
        let bands = read_bands(&mut r)?;
        Ok(MeterMod { command, meter: Meter { id, flags, bands } })
    }

    /// Encodes the body after the header.
    pub fn encode(&self, w: &mut Writer) {
        w.u16(match self.command {
            MeterModCommand::Add => 0,
            MeterModCommand::Modify => 1,
            MeterModCommand::Delete => 2,
        });
        w.u16(self.meter.flags);
        w.u32(self.meter.id);
        for b in &self.meter.bands {
            b.write(w);
        }
    }

    /// The whole body as bytes.
    pub fn to_body(&self) -> Vec<u8> {
        let mut w = Writer::new();
        self.encode(&mut w);
        w.bytes
    }
}

/// The meter a METER or METER_CONFIG request asks about (`ofp_meter_multipart_request`: id and
/// 4 bytes of padding; [`OFPM_ALL`] for every meter).
pub fn meter_request(body: &[u8]) -> Result<u32, DecodeError> {
    let mut r = Reader::new(body, "ofp_meter_multipart_request");
    let id = r.u32()?;
    r.skip(4)?;
    if !r.is_empty() {
        return Err(DecodeError::BadLength { what: "ofp_meter_multipart_request", len: body.len() });
    }
    Ok(id)
}

/// A METER or METER_CONFIG request's body for meter `id`.
pub fn encode_meter_request(id: u32) -> Vec<u8> {
    let mut b = id.to_be_bytes().to_vec();
    b.extend_from_slice(&[0; 4]);
    b
}

/// `ofp_meter_stats`: one meter's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MeterStats {
    pub meter_id: u32,
    /// Flows naming the meter.
    pub flow_count: u32,
    /// Packets and bytes that went through the meter.
    pub packet_in_count: u64,
    pub byte_in_count: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    /// Per band: the packets and bytes the band applied to (a drop band: dropped).
    pub bands: Vec<(u64, u64)>,
}

/// The METER reply body: the entries one after another.
pub fn encode_meter_stats(stats: &[MeterStats]) -> Vec<u8> {
    let mut w = Writer::new();
    for s in stats {
        w.u32(s.meter_id);
        w.u16((40 + 16 * s.bands.len()).min(usize::from(u16::MAX)) as u16);
        w.zeros(6);
        w.u32(s.flow_count);
        w.u64(s.packet_in_count);
        w.u64(s.byte_in_count);
        w.u32(s.duration_sec);
        w.u32(s.duration_nsec);
        for (p, b) in &s.bands {
            w.u64(*p);
            w.u64(*b);
        }
    }
    w.bytes
}

/// Decodes a METER reply body.
pub fn decode_meter_stats(body: &[u8]) -> Result<Vec<MeterStats>, DecodeError> {
    let mut r = Reader::new(body, "ofp_meter_stats");
    let mut out = Vec::new();
    while !r.is_empty() {
        let meter_id = r.u32()?;
        let len = usize::from(r.u16()?);
        if len < 40 || (len - 40) % 16 != 0 {
            return Err(DecodeError::BadLength { what: "ofp_meter_stats", len });
        }
        let mut e = r.sub(len - 6, "ofp_meter_stats")?;
        e.skip(6)?;
        let mut s = MeterStats {
            meter_id,
            flow_count: e.u32()?,
            packet_in_count: e.u64()?,
            byte_in_count: e.u64()?,
            duration_sec: e.u32()?,
            duration_nsec: e.u32()?,
            bands: Vec::new(),
        };
        while !e.is_empty() {
            s.bands.push((e.u64()?, e.u64()?));
        }
        out.push(s);
    }
    Ok(out)
}

/// The METER_CONFIG reply body (`ofp_meter_config` per meter).
pub fn encode_meter_configs(meters: &[Meter]) -> Vec<u8> {
    let mut w = Writer::new();
    for m in meters {
        w.u16((8 + 16 * m.bands.len()).min(usize::from(u16::MAX)) as u16);
        w.u16(m.flags);
        w.u32(m.id);
        for b in &m.bands {
            b.write(&mut w);
        }
    }
    w.bytes
}

/// Decodes a METER_CONFIG reply body.
pub fn decode_meter_configs(body: &[u8]) -> Result<Vec<Meter>, DecodeError> {
    let mut r = Reader::new(body, "ofp_meter_config");
    let mut out = Vec::new();
    while !r.is_empty() {
        let len = usize::from(r.u16()?);
        if len < 8 || (len - 8) % 16 != 0 {
            return Err(DecodeError::BadLength { what: "ofp_meter_config", len });
        }
        let mut e = r.sub(len - 2, "ofp_meter_config")?;
        let flags = e.u16()?;
        let id = e.u32()?;
        out.push(Meter { id, flags, bands: read_bands(&mut e)? });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meter_mod_round_trip_and_errors() {
        let m = MeterMod {
            command: MeterModCommand::Add,
            meter: Meter {
                id: 1,
                flags: OFPMF_PKTPS | OFPMF_BURST | OFPMF_STATS,
                bands: vec![
                    Band::drop(100, 10),
                    Band { kind: OFPMBT_DSCP_REMARK, rate: 5, burst_size: 0, prec_level: 1, experimenter: 0 },
                ],
            },
        };
        let body = m.to_body();
        assert_eq!(body.len(), 8 + 32);
        assert_eq!(MeterMod::decode(&body).unwrap(), m);
        // A band whose length is not 16; a truncated band; an unknown command.
        let mut bad = body.clone();
        bad[11] = 12;
        assert!(MeterMod::decode(&bad).is_err());
        assert!(MeterMod::decode(&body[..body.len() - 3]).is_err());
        let mut cmd = body.clone();
        cmd[1] = 7;
        assert_eq!(MeterMod::decode(&cmd).unwrap_err().of_error(), OfError::METER_MOD_FAILED_BAD_COMMAND);
    }

    #[test]
    fn stats_and_configs_round_trip() {
        let s = vec![
            MeterStats {
                meter_id: 3,
                flow_count: 2,
                packet_in_count: 10,
                byte_in_count: 1000,
                duration_sec: 4,
                duration_nsec: 5,
                bands: vec![(1, 2), (3, 4)],
            },
            MeterStats { meter_id: 4, ..MeterStats::default() },
        ];
        assert_eq!(decode_meter_stats(&encode_meter_stats(&s)).unwrap(), s);
        let c = vec![Meter { id: 9, flags: OFPMF_KBPS, bands: vec![Band::drop(1000, 0)] }];
        assert_eq!(decode_meter_configs(&encode_meter_configs(&c)).unwrap(), c);
        assert_eq!(meter_request(&encode_meter_request(OFPM_ALL)).unwrap(), OFPM_ALL);
        assert!(meter_request(&[0, 0, 0]).is_err());
        assert!(decode_meter_stats(&[0, 0, 0, 1, 0, 7]).is_err());
    }
}
