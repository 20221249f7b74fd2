//! Groups and meters on the wire (OpenFlow 1.3 §A.3.4.2, §A.3.5.9–11, 1.4 §7.3.4.2): GROUP_MOD
//! ↔ [`GroupMod`] (buckets as [`rqvs_flow::group::Bucket`]), and the multipart bodies GROUP
//! (statistics), GROUP_DESC, GROUP_FEATURES and METER_FEATURES. OpenFlow 1.3 and 1.4 share
//! these layouts (1.5 changed them; rqvs speaks 1.3 and 1.4).
//!
//! A bucket's actions are an action list ([`crate::action::decode_actions`]); an empty list is
//! [`rqvs_flow::Actions::drop`]. The group type's number is `ofp_group_type`'s.

use rqvs_flow::group::{Bucket, Group, GroupType};
use rqvs_flow::Match;

use crate::action::{decode_actions, encode_actions};
use crate::error::{DecodeError, EncodeError, OfError};
use crate::oxm::{enc_err, reject};
use crate::wire::{Reader, Writer};

/// `OFPMP_GROUP`: group statistics.
pub const MP_GROUP: u16 = 6;
/// `OFPMP_GROUP_DESC`.
pub const MP_GROUP_DESC: u16 = 7;
/// `OFPMP_GROUP_FEATURES`.
pub const MP_GROUP_FEATURES: u16 = 8;
/// `OFPMP_METER_FEATURES`.
pub const MP_METER_FEATURES: u16 = 11;

/// `OFPGC_ADD`.
pub const OFPGC_ADD: u16 = 0;
/// `OFPGC_MODIFY`.
pub const OFPGC_MODIFY: u16 = 1;
/// `OFPGC_DELETE`.
pub const OFPGC_DELETE: u16 = 2;
/// `OFPG_ALL`: every group (GROUP_MOD delete, GROUP stats request).
pub const OFPG_ALL: u32 = 0xffff_fffc;
/// `OFPG_ANY`.
pub const OFPG_ANY: u32 = 0xffff_ffff;

/// A GROUP_MOD command (`ofp_group_mod_command`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupModCommand {
    Add,
    Modify,
    Delete,
}

/// The number of a group type on the wire.
pub fn group_type_code(t: GroupType) -> u8 {
    match t {
        GroupType::All => 0,
        GroupType::Select => 1,
        GroupType::Indirect => 2,
        GroupType::FastFailover => 3,
    }
}

fn group_type_of(code: u8) -> Result<GroupType, DecodeError> {
    Ok(match code {
        0 => GroupType::All,
        1 => GroupType::Select,
        2 => GroupType::Indirect,
        3 => GroupType::FastFailover,
        t => {
            return reject(
                format!("group type {t} (all 0, select 1, indirect 2, fast_failover 3)"),
                OfError::GROUP_MOD_FAILED_BAD_TYPE,
            )
        }
    })
}

/// A GROUP_MOD: command, and the group (its id alone matters for a delete, where it may be
/// [`OFPG_ALL`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMod {
    pub command: GroupModCommand,
    pub group: Group,
}

fn read_buckets(r: &mut Reader<'_>) -> Result<Vec<Bucket>, DecodeError> {
    let mut buckets = Vec::new();
    while !r.is_empty() {
        let len = usize::from(r.u16()?);
        if len < 16 || len % 8 != 0 {
            return reject(
                format!("bucket length {len} (a multiple of 8, at least 16)"),
                OfError::GROUP_MOD_FAILED_BAD_BUCKET,
            );
        }
        let mut b = r.sub(len - 2, "ofp_bucket")?;
        let weight = b.u16()?;
        let watch_port = b.u32()?;
        let watch_group = b.u32()?;
        b.skip(4)?;
        let actions = decode_actions(b.rest())?;
        buckets.push(Bucket { weight, watch_port, watch_group, actions });
    }
    Ok(buckets)
}

fn write_buckets(w: &mut Writer, buckets: &[Bucket]) -> Result<(), EncodeError> {
    for b in buckets {
        let start = w.len();
        w.u16(0);
        w.u16(b.weight);
        w.u32(b.watch_port);
        w.u32(b.watch_group);
        w.zeros(4);
        encode_actions(&b.actions, &Match::ANY, w)?;
        let len = w.len() - start;
        let Ok(len) = u16::try_from(len) else { return enc_err("a bucket longer than 65535 bytes") };
        w.patch_u16(start, len);
    }
    Ok(())
}

impl GroupMod {
    /// Decodes a GROUP_MOD body (after the header).
    pub fn decode(body: &[u8]) -> Result<GroupMod, DecodeError> {
        let mut r = Reader::new(body, "ofp_group_mod");
        let command = match r.u16()? {
            OFPGC_ADD => GroupModCommand::Add,
            OFPGC_MODIFY => GroupModCommand::Modify,
            OFPGC_DELETE => GroupModCommand::Delete,
            c => {
                return reject(
                    format!("group_mod command {c} (add 0, modify 1, delete 2)"),
                    OfError::GROUP_MOD_FAILED_BAD_COMMAND,
                )
            }
        };
        let kind = r.u8()?;
        r.skip(1)?;
        let id = r.u32()?;
        // A delete ignores the type (ovs-ofctl del-groups sends 0).
        let kind = if command == GroupModCommand::Delete { GroupType::All } else { group_type_of(kind)? };
        let buckets = read_buckets(&mut r)?;
        Ok(GroupMod { command, group: Group { id, kind, buckets } })
    }

    /// Encodes the body (after the header).
    pub fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.u16(match self.command {
            GroupModCommand::Add => OFPGC_ADD,
            GroupModCommand::Modify => OFPGC_MODIFY,
            GroupModCommand::Delete => OFPGC_DELETE,
        });
        w.u8(group_type_code(self.group.kind));
        w.zeros(1);
        w.u32(self.group.id);
        write_buckets(w, &self.group.buckets)
    }
}

/// Decodes a GROUP_DESC reply body: one `ofp_group_desc` per group.
pub fn decode_group_descs(body: &[u8]) -> Result<Vec<Group>, DecodeError> {
    let mut r = Reader::new(body, "ofp_group_desc");
    let mut out = Vec::new();
    while !r.is_empty() {
        let len = usize::from(r.u16()?);
        if len < 8 {
            return Err(DecodeError::BadLength { what: "ofp_group_desc", len });
        }
        let mut d = r.sub(len - 2, "ofp_group_desc")?;
        let kind = group_type_of(d.u8()?)?;
        d.skip(1)?;
        let id = d.u32()?;
        let buckets = read_buckets(&mut d)?;
        out.push(Group { id, kind, buckets });
    }
    Ok(out)
}

/// Encodes a GROUP_DESC reply body.
pub fn encode_group_descs(groups: &[Group], w: &mut Writer) -> Result<(), EncodeError> {
    for g in groups {
        let start = w.len();
        w.u16(0);
        w.u8(group_type_code(g.kind));
        w.zeros(1);
        w.u32(g.id);
        write_buckets(w, &g.buckets)?;
        let Ok(len) = u16::try_from(w.len() - start) else { return enc_err("a group longer than 65535 bytes") };
        w.patch_u16(start, len);
    }
    Ok(())
}

/// One `ofp_group_stats`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    pub group_id: u32,
    /// The flows (and groups) that name the group.
    pub ref_count: u32,
    pub packet_count: u64,
    pub byte_count: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    /// (packets, bytes) per bucket.
    pub buckets: Vec<(u64, u64)>,
}

impl GroupStats {
    /// Decodes a GROUP reply body.
    pub fn decode_all(body: &[u8]) -> Result<Vec<GroupStats>, DecodeError> {
        let mut r = Reader::new(body, "ofp_group_stats");
        let mut out = Vec::new();
        while !r.is_empty() {
            let len = usize::from(r.u16()?);
            if len < 40 || (len - 40) % 16 != 0 {
                return Err(DecodeError::BadLength { what: "ofp_group_stats", len });
            }
            let mut s = r.sub(len - 2, "ofp_group_stats")?;
            s.skip(2)?;
            let mut g = GroupStats { group_id: s.u32()?, ref_count: s.u32()?, ..GroupStats::default() };
            s.skip(4)?;
            g.packet_count = s.u64()?;
            g.byte_count = s.u64()?;
            g.duration_sec = s.u32()?;
            g.duration_nsec = s.u32()?;
            while !s.is_empty() {
                g.buckets.push((s.u64()?, s.u64()?));
            }
            out.push(g);
        }
        Ok(out)
    }

    /// Encodes one entry.
    pub fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        let len = 40 + 16 * self.buckets.len();
        let Ok(len) = u16::try_from(len) else { return enc_err("group stats longer than 65535 bytes") };
        w.u16(len);
        w.zeros(2);
        w.u32(self.group_id);
        w.u32(self.ref_count);
        w.zeros(4);
        w.u64(self.packet_count);
        w.u64(self.byte_count);
        w.u32(self.duration_sec);
        w.u32(self.duration_nsec);
        for (p, b) in &self.buckets {
            w.u64(*p);
            w.u64(*b);
        }
        Ok(())
    }
}

/// `ofp_group_features`: which types, capabilities and actions the group table has.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupFeatures {
    /// Bit `t` set for group type `t`.
    pub types: u32,
    /// `OFPGFC_*`: 1 select weight, 2 select liveness, 4 chaining, 8 chaining checks.
    pub capabilities: u32,
    /// The most groups of each type.
    pub max_groups: [u32; 4],
    /// Bit `a` set for action type `a`, per group type.
    pub actions: [u32; 4],
}

impl GroupFeatures {
    /// What rqvs's group table takes: the four types, weights, liveness, chaining and its
    /// checks (a loop is refused); up to [`MAX_GROUPS`] groups of each type; the actions
    /// OUTPUT, PUSH_VLAN, POP_VLAN, GROUP, DEC_NW_TTL, SET_FIELD in every bucket.
    pub fn rqvs() -> GroupFeatures {
        use crate::action::*;
        let actions = [OFPAT_OUTPUT, OFPAT_PUSH_VLAN, OFPAT_POP_VLAN, OFPAT_GROUP, OFPAT_DEC_NW_TTL, OFPAT_SET_FIELD]
            .iter()
            .fold(0u32, |a, &t| a | 1 << t);
        GroupFeatures { types: 0xf, capabilities: 0xf, max_groups: [MAX_GROUPS; 4], actions: [actions; 4] }
    }

    /// Decodes the reply body.
    pub fn decode(body: &[u8]) -> Result<GroupFeatures, DecodeError> {
        let mut r = Reader::new(body, "ofp_group_features");
        let mut f = GroupFeatures { types: r.u32()?, capabilities: r.u32()?, ..GroupFeatures::default() };
        for m in &mut f.max_groups {
            *m = r.u32()?;
        }
        for a in &mut f.actions {
            *a = r.u32()?;
        }
        if !r.is_empty() {
            return Err(DecodeError::BadLength { what: "ofp_group_features", len: body.len() });
        }
        Ok(f)
    }

    /// Encodes the reply body (40 bytes).
    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.types);
        w.u32(self.capabilities);
        for m in self.max_groups {
            w.u32(m);
        }
        for a in self.actions {
            w.u32(a);
        }
    }
}

/// The most groups rqvs's group table holds (of each type).
pub const MAX_GROUPS: u32 = 65536;

/// The most meters rqvs's meter table holds (OVS 3.1's userspace datapath: 2^18).
pub const MAX_METERS: u32 = 1 << 18;
/// The most bands a meter has (OVS 3.1's userspace datapath: 8).
pub const MAX_BANDS: u8 = 8;

/// `ofp_meter_features`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MeterFeatures {
    pub max_meter: u32,
    /// Bit `t` set for band type `t` (1 drop, 2 dscp_remark).
    pub band_types: u32,
    /// `OFPMF_*`: 1 kbps, 2 pktps, 4 burst, 8 stats.
    pub capabilities: u32,
    pub max_bands: u8,
    pub max_color: u8,
}

impl MeterFeatures {
    /// What rqvs has, as OVS 3.1's userspace datapath reports it (`ovs-ofctl meter-features`
    /// on a netdev bridge): [`MAX_METERS`] meters of up to [`MAX_BANDS`] bands, drop bands only,
    /// rates in kbps or pktps, burst sizes, statistics.
    pub fn rqvs() -> MeterFeatures {
        MeterFeatures {
            max_meter: MAX_METERS,
            band_types: 1 << crate::meter::OFPMBT_DROP,
            capabilities: u32::from(
                crate::meter::OFPMF_KBPS
                    | crate::meter::OFPMF_PKTPS
                    | crate::meter::OFPMF_BURST
                    | crate::meter::OFPMF_STATS,
            ),
            max_bands: MAX_BANDS,
            max_color: 0,
        }
    }

    /// Decodes the reply body.
    pub fn decode(body: &[u8]) -> Result<MeterFeatures, DecodeError> {
        let mut r = Reader::new(body, "ofp_meter_features");
        let f = MeterFeatures {
            max_meter: r.u32()?,
            band_types: r.u32()?,
            capabilities: r.u32()?,
            max_bands: r.u8()?,
            max_color: r.u8()?,
        };
        r.skip(2)?;
        if !r.is_empty() {
            return Err(DecodeError::BadLength { what: "ofp_meter_features", len: body.len() });
        }
        Ok(f)
    }

    /// Encodes the reply body (16 bytes).
    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.max_meter);
        w.u32(self.band_types);
        w.u32(self.capabilities);
        w.u8(self.max_bands);
        w.u8(self.max_color);
        w.zeros(2);
    }
}
