//! The `OFPMP_TABLE_FEATURES` body (OpenFlow 1.3 §A.3.5.5, 1.4 §7.3.5.6): a list of
//! `ofp_table_features`, each a 64-byte fixed part (length, table id, name, metadata
//! match/write bits, config or capabilities, max_entries) and properties, and what rqvs's one
//! table supports ([`TableFeatures::rqvs`]).
//!
//! **Properties.** Each is type, length (4 + payload), payload, zeros to 8 bytes.
//! - INSTRUCTIONS(_MISS) (0, 1) and WRITE/APPLY_ACTIONS(_MISS) (4–7): a list of
//!   [`Id`]s — an instruction or action header, type and length (4, or 8 with an
//!   experimenter id), with no padding between them;
//! - NEXT_TABLES(_MISS) (2, 3): one byte per table id;
//! - MATCH (8), WILDCARDS (10), WRITE/APPLY_SETFIELD(_MISS) (12–15): a list of OXM headers
//!   ([`OxmId`]; 4 bytes, 8 for the experimenter class), the has-mask bit saying (in MATCH)
//!   that the field takes an arbitrary mask;
//! - anything else (the experimenter properties 0xfffe/0xffff, unknown types): raw.
//!
//! A request with no body asks for the features; one with a body asks to change them (the
//! switch refuses: `TABLE_FEATURES_FAILED` `EPERM`). Both directions decode to
//! `Vec<TableFeatures>`.
//!
//! **What rqvs reports** ([`TableFeatures::rqvs`]): table 0, no name, no metadata, no
//! eviction or vacancy events, no next tables; instructions APPLY_ACTIONS and CLEAR_ACTIONS
//! (the only ones [`crate::action::decode_instructions`] accepts); apply actions OUTPUT,
//! PUSH_VLAN, POP_VLAN, DEC_NW_TTL and SET_FIELD of the fields
//! `action::SET_FIELDS` lists; no write actions; MATCH and WILDCARDS every field
//! [`crate::oxm`] decodes, masked where it takes a mask — the lists are built from the codec's
//! own tables, so they cannot drift from what it accepts. The same for the table-miss flow (it
//! is an ordinary flow in rqvs). `max_entries` is 2³²−1: the table has no limit of its own.

use crate::action::{
    set_fields, OFPAT_DEC_NW_TTL, OFPAT_GROUP, OFPAT_OUTPUT, OFPAT_POP_VLAN, OFPAT_PUSH_VLAN, OFPAT_SET_FIELD,
    OFPIT_APPLY_ACTIONS, OFPIT_CLEAR_ACTIONS, OFPIT_GOTO_TABLE, OFPIT_METER, OFPIT_WRITE_ACTIONS, OFPIT_WRITE_METADATA,
};
use crate::error::{DecodeError, EncodeError};
use crate::oxm::OFPXMC_EXPERIMENTER;
use crate::port::{read_properties, read_str, write_property, write_str};
use crate::wire::{Reader, Writer};

/// `OFPMP_TABLE_FEATURES`.
pub const MP_TABLE_FEATURES: u16 = 12;

/// `OFPTFPT_INSTRUCTIONS`.
pub const INSTRUCTIONS: u16 = 0;
/// `OFPTFPT_INSTRUCTIONS_MISS`.
pub const INSTRUCTIONS_MISS: u16 = 1;
/// `OFPTFPT_NEXT_TABLES`.
pub const NEXT_TABLES: u16 = 2;
/// `OFPTFPT_NEXT_TABLES_MISS`.
pub const NEXT_TABLES_MISS: u16 = 3;
/// `OFPTFPT_WRITE_ACTIONS`.
pub const WRITE_ACTIONS: u16 = 4;
/// `OFPTFPT_WRITE_ACTIONS_MISS`.
pub const WRITE_ACTIONS_MISS: u16 = 5;
/// `OFPTFPT_APPLY_ACTIONS`.
pub const APPLY_ACTIONS: u16 = 6;
/// `OFPTFPT_APPLY_ACTIONS_MISS`.
pub const APPLY_ACTIONS_MISS: u16 = 7;
/// `OFPTFPT_MATCH`.
pub const MATCH: u16 = 8;
/// `OFPTFPT_WILDCARDS`.
pub const WILDCARDS: u16 = 10;
/// `OFPTFPT_WRITE_SETFIELD`.
pub const WRITE_SETFIELD: u16 = 12;
/// `OFPTFPT_WRITE_SETFIELD_MISS`.
pub const WRITE_SETFIELD_MISS: u16 = 13;
/// `OFPTFPT_APPLY_SETFIELD`.
pub const APPLY_SETFIELD: u16 = 14;
/// `OFPTFPT_APPLY_SETFIELD_MISS`.
pub const APPLY_SETFIELD_MISS: u16 = 15;

/// The fixed part of `ofp_table_features`.
const FIXED_LEN: usize = 64;
/// `OFP_MAX_TABLE_NAME_LEN`.
const NAME_LEN: usize = 32;

/// One `ofp_table_features`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableFeatures {
    /// The table.
    pub table_id: u8,
    /// Its name (at most 31 bytes; empty: none).
    pub name: String,
    /// Metadata bits the table can match.
    pub metadata_match: u64,
    /// Metadata bits the table can write.
    pub metadata_write: u64,
    /// 1.3's `config` / 1.4's `capabilities` (`OFPTC_EVICTION` 4, `OFPTC_VACANCY_EVENTS` 8).
    pub capabilities: u32,
    /// The most entries the table holds.
    pub max_entries: u32,
    /// The properties, in order.
    pub properties: Vec<TableFeatureProp>,
}

/// One table feature property: its type and its payload, read by type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableFeatureProp {
    /// `OFPTFPT_*`.
    pub kind: u16,
    /// The payload.
    pub value: PropValue,
}

/// A property's payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PropValue {
    /// Instruction or action ids (INSTRUCTIONS, WRITE/APPLY_ACTIONS and their _MISS types).
    Ids(Vec<Id>),
    /// Table ids (NEXT_TABLES, NEXT_TABLES_MISS).
    Tables(Vec<u8>),
    /// OXM headers (MATCH, WILDCARDS, WRITE/APPLY_SETFIELD and their _MISS types).
    Oxms(Vec<OxmId>),
    /// Any other type (experimenter, unknown), its payload as received (padding excluded).
    Raw(Vec<u8>),
}

/// An instruction or action id: its type and whatever follows the 4-byte header (an
/// experimenter id: the length is 4 plus its size).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Id {
    /// `OFPIT_*` or `OFPAT_*`.
    pub kind: u16,
    /// The bytes after type and length.
    pub data: Vec<u8>,
}

impl Id {
    /// An id with no data (every non-experimenter type).
    pub fn new(kind: u16) -> Id {
        Id { kind, data: Vec::new() }
    }
}

/// An OXM header: class, field, has-mask and length in 32 bits, and the experimenter id that
/// follows it in the experimenter class (0xffff) and only there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OxmId {
    /// The 32-bit OXM header.
    pub header: u32,
    /// The experimenter id (present exactly when the class is 0xffff).
    pub experimenter: Option<u32>,
}

impl OxmId {
    /// The OXM class.
    pub fn class(&self) -> u16 {
        (self.header >> 16) as u16
    }

    /// The field number within the class.
    pub fn field(&self) -> u8 {
        ((self.header >> 9) & 0x7f) as u8
    }

    /// Whether the has-mask bit is set.
    pub fn has_mask(&self) -> bool {
        self.header & 0x100 != 0
    }
}

/// Which payload a property type carries.
fn shape(kind: u16) -> Shape {
    match kind {
        INSTRUCTIONS | INSTRUCTIONS_MISS | WRITE_ACTIONS | WRITE_ACTIONS_MISS | APPLY_ACTIONS | APPLY_ACTIONS_MISS => {
            Shape::Ids
        }
        NEXT_TABLES | NEXT_TABLES_MISS => Shape::Tables,
        MATCH | WILDCARDS | WRITE_SETFIELD | WRITE_SETFIELD_MISS | APPLY_SETFIELD | APPLY_SETFIELD_MISS => Shape::Oxms,
        _ => Shape::Raw,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Ids,
    Tables,
    Oxms,
    Raw,
}

impl PropValue {
    fn shape(&self) -> Shape {
        match self {
            PropValue::Ids(_) => Shape::Ids,
            PropValue::Tables(_) => Shape::Tables,
            PropValue::Oxms(_) => Shape::Oxms,
            PropValue::Raw(_) => Shape::Raw,
        }
    }
}

fn read_ids(data: &[u8]) -> Result<Vec<Id>, DecodeError> {
    let mut r = Reader::new(data, "table feature instruction/action id");
    let mut out = Vec::new();
    while !r.is_empty() {
        let kind = r.u16()?;
        let len = usize::from(r.u16()?);
        if len < 4 {
            return Err(DecodeError::BadLength { what: "table feature instruction/action id", len });
        }
        out.push(Id { kind, data: r.take(len - 4)?.to_vec() });
    }
    Ok(out)
}

fn read_oxm_ids(data: &[u8]) -> Result<Vec<OxmId>, DecodeError> {
    let mut r = Reader::new(data, "table feature OXM id");
    let mut out = Vec::new();
    while !r.is_empty() {
        let header = r.u32()?;
        let experimenter = if (header >> 16) as u16 == OFPXMC_EXPERIMENTER { Some(r.u32()?) } else { None };
        out.push(OxmId { header, experimenter });
    }
    Ok(out)
}

impl TableFeatures {
    /// Reads every `ofp_table_features` in `bytes` (a multipart body).
    pub fn decode_all(bytes: &[u8]) -> Result<Vec<TableFeatures>, DecodeError> {
        let mut r = Reader::new(bytes, "ofp_table_features");
        let mut out = Vec::new();
        while !r.is_empty() {
            out.push(TableFeatures::read(&mut r)?);
        }
        Ok(out)
    }

    /// Reads one `ofp_table_features`: its length must cover the fixed part, be a multiple of
    /// 8 and fit in `r`.
    pub fn read(r: &mut Reader<'_>) -> Result<TableFeatures, DecodeError> {
        let len = usize::from(r.u16()?);
        if len < FIXED_LEN || len % 8 != 0 {
            return Err(DecodeError::BadLength { what: "ofp_table_features", len });
        }
        let mut b = r.sub(len - 2, "ofp_table_features")?;
        let table_id = b.u8()?;
        b.skip(5)?; // 1.5's command, pad
        let name = read_str(&mut b, NAME_LEN)?;
        let metadata_match = b.u64()?;
        let metadata_write = b.u64()?;
        let capabilities = b.u32()?;
        let max_entries = b.u32()?;
        let mut properties = Vec::new();
        for (kind, data) in read_properties(&mut b, "ofp_table_feature_prop")? {
            let value = match shape(kind) {
                Shape::Ids => PropValue::Ids(read_ids(&data)?),
                Shape::Tables => PropValue::Tables(data),
                Shape::Oxms => PropValue::Oxms(read_oxm_ids(&data)?),
                Shape::Raw => PropValue::Raw(data),
            };
            properties.push(TableFeatureProp { kind, value });
        }
        Ok(TableFeatures { table_id, name, metadata_match, metadata_write, capabilities, max_entries, properties })
    }

    /// Writes one `ofp_table_features`; a property whose payload is not its type's kind, an
    /// experimenter id out of place or a length over 16 bits is an error.
    pub fn write(&self, w: &mut Writer) -> Result<(), EncodeError> {
        let start = w.len();
        w.u16(0); // length, patched below
        w.u8(self.table_id);
        w.zeros(5);
        write_str(w, &self.name, NAME_LEN, "table name")?;
        w.u64(self.metadata_match);
        w.u64(self.metadata_write);
        w.u32(self.capabilities);
        w.u32(self.max_entries);
        for p in &self.properties {
            if p.value.shape() != shape(p.kind) {
                return Err(EncodeError(format!("table feature property {}: a payload of another type", p.kind)));
            }
            let mut d = Writer::new();
            match &p.value {
                PropValue::Ids(ids) => {
                    for id in ids {
                        let len = u16::try_from(4 + id.data.len())
                            .map_err(|_| EncodeError("table feature id over 64 KiB".into()))?;
                        d.u16(id.kind);
                        d.u16(len);
                        d.put(&id.data);
                    }
                }
                PropValue::Tables(t) => d.put(t),
                PropValue::Oxms(oxms) => {
                    for o in oxms {
                        if o.experimenter.is_some() != (o.class() == OFPXMC_EXPERIMENTER) {
                            return Err(EncodeError(format!(
                                "OXM id {:#010x}: an experimenter id belongs with class 0xffff, and only there",
                                o.header
                            )));
                        }
                        d.u32(o.header);
                        if let Some(e) = o.experimenter {
                            d.u32(e);
                        }
                    }
                }
                PropValue::Raw(b) => d.put(b),
            }
            write_property(w, p.kind, &d.bytes)?;
        }
        let len = w.len() - start;
        let l = u16::try_from(len).map_err(|_| DecodeError::BadLength { what: "ofp_table_features", len })?;
        w.patch_u16(start, l);
        Ok(())
    }

    /// The first property of type `kind`.
    pub fn property(&self, kind: u16) -> Option<&PropValue> {
        self.properties.iter().find(|p| p.kind == kind).map(|p| &p.value)
    }

    /// What rqvs's table 0 supports: [`TableFeatures::rqvs_table`] of table 0.
    pub fn rqvs() -> TableFeatures {
        TableFeatures::rqvs_table(0)
    }

    /// What rqvs's table `table_id` (0..=254) supports (see the module documentation).
    pub fn rqvs_table(table_id: u8) -> TableFeatures {
        let mut instructions = vec![
            Id::new(OFPIT_GOTO_TABLE),
            Id::new(OFPIT_WRITE_METADATA),
            Id::new(OFPIT_WRITE_ACTIONS),
            Id::new(OFPIT_APPLY_ACTIONS),
            Id::new(OFPIT_CLEAR_ACTIONS),
            Id::new(OFPIT_METER),
        ];
        if table_id >= LAST_TABLE {
            instructions.remove(0);
        }
        let actions: Vec<Id> =
            [OFPAT_OUTPUT, OFPAT_GROUP, OFPAT_PUSH_VLAN, OFPAT_POP_VLAN, OFPAT_DEC_NW_TTL, OFPAT_SET_FIELD]
                .map(Id::new)
                .into();
        let set_fields: Vec<OxmId> = set_fields()
            .map(|f| {
                let (c, code, e, width) = crate::oxm::table_field_code(f);
                raw_oxm_id(c, code, e, width, false)
            })
            .collect();
        let matched: Vec<OxmId> =
            crate::oxm::match_fields().map(|(c, f, e, width, maskable)| raw_oxm_id(c, f, e, width, maskable)).collect();
        let wildcards: Vec<OxmId> =
            crate::oxm::match_fields().map(|(c, f, e, width, _)| raw_oxm_id(c, f, e, width, false)).collect();
        let next: Vec<u8> = (table_id.saturating_add(1)..=LAST_TABLE).filter(|&t| t > table_id).collect();
        let prop = |kind, value| TableFeatureProp { kind, value };
        let mut properties = Vec::new();
        for miss in [0, 1] {
            properties.push(prop(INSTRUCTIONS + miss, PropValue::Ids(instructions.clone())));
            properties.push(prop(NEXT_TABLES + miss, PropValue::Tables(next.clone())));
            properties.push(prop(WRITE_ACTIONS + miss, PropValue::Ids(actions.clone())));
            properties.push(prop(APPLY_ACTIONS + miss, PropValue::Ids(actions.clone())));
        }
        properties.push(prop(MATCH, PropValue::Oxms(matched)));
        properties.push(prop(WILDCARDS, PropValue::Oxms(wildcards)));
        for miss in [0, 1] {
            properties.push(prop(WRITE_SETFIELD + miss, PropValue::Oxms(set_fields.clone())));
            properties.push(prop(APPLY_SETFIELD + miss, PropValue::Oxms(set_fields.clone())));
        }
        TableFeatures {
            table_id,
            name: if table_id == 0 { "classifier".into() } else { format!("table{table_id}") },
            metadata_match: u64::MAX,
            metadata_write: u64::MAX,
            capabilities: 0,
            max_entries: u32::MAX,
            properties,
        }
    }
}

/// The last table of a pipeline (OpenFlow's `OFPTT_MAX`): tables are 0..=254.
pub const LAST_TABLE: u8 = 254;

fn raw_oxm_id(class: u16, field: u8, experimenter: Option<u32>, width: usize, masked: bool) -> OxmId {
    let payload = if masked { 2 * width } else { width } + if experimenter.is_some() { 4 } else { 0 };
    let header = u32::from(class) << 16 | u32::from(field) << 9 | u32::from(masked) << 8 | payload as u32;
    OxmId { header, experimenter }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rqvs_features_round_trip_and_hold_the_required_properties() {
        let t = TableFeatures::rqvs();
        let mut w = Writer::new();
        t.write(&mut w).unwrap();
        assert_eq!(w.len() % 8, 0);
        assert_eq!(usize::from(u16::from_be_bytes([w.bytes[0], w.bytes[1]])), w.len());
        assert_eq!(TableFeatures::decode_all(&w.bytes).unwrap(), vec![t.clone()]);
        for kind in [INSTRUCTIONS, NEXT_TABLES, WRITE_ACTIONS, APPLY_ACTIONS, MATCH, WILDCARDS, WRITE_SETFIELD] {
            assert!(t.property(kind).is_some(), "property {kind}");
        }
        assert!(t.property(APPLY_SETFIELD).is_some());
        // tcp_flags: ONF's experimenter OXM, 4 + 2 bytes, 4 + 4 masked.
        let Some(PropValue::Oxms(m)) = t.property(MATCH) else { panic!() };
        let tcp_flags = m.iter().find(|o| o.experimenter.is_some()).unwrap();
        assert_eq!(tcp_flags.header, 0xffff_5508);
    }

    /// The lists are what the decoders accept: every instruction and action type outside them
    /// is refused as unsupported, every field of the table outside the SETFIELD lists as a
    /// set-field target; the next tables are the later ones.
    #[test]
    fn the_lists_are_what_the_decoders_accept() {
        use crate::action::{decode_actions, decode_instructions};
        use crate::OfError;
        let t = TableFeatures::rqvs_table(3);
        let ids = |k| match t.property(k) {
            Some(PropValue::Ids(v)) => v.iter().map(|i| i.kind).collect::<Vec<u16>>(),
            _ => panic!("property {k}"),
        };
        for kind in 0..=12u16 {
            let len = if kind == OFPIT_WRITE_METADATA { 24 } else { 8 };
            let mut i = vec![0u8; len];
            i[..2].copy_from_slice(&kind.to_be_bytes());
            i[3] = len as u8;
            let r = decode_instructions(&i);
            assert_eq!(r.is_ok(), ids(INSTRUCTIONS).contains(&kind), "instruction {kind}: {r:?}");
        }
        assert!(!ids(INSTRUCTIONS).is_empty() && ids(WRITE_ACTIONS) == ids(APPLY_ACTIONS));
        for kind in (0..=40u16).chain([0xffff]) {
            let mut a = vec![0u8; 8];
            a[..2].copy_from_slice(&kind.to_be_bytes());
            a[3] = 8;
            let refused = matches!(
                decode_actions(&a).map_err(|e| e.of_error()),
                Err(OfError::BAD_ACTION_BAD_TYPE | OfError { kind: 2, code: 2 })
            );
            assert_eq!(refused, !ids(APPLY_ACTIONS).contains(&kind), "action {kind}");
        }
        let Some(PropValue::Oxms(listed)) = t.property(APPLY_SETFIELD) else { panic!() };
        for f in rqvs_flow::field::FIELDS {
            let (c, code, e, width) = crate::oxm::table_field_code(f);
            let o = raw_oxm_id(c, code, e, width, false);
            let mut a = Writer::new();
            a.u16(OFPAT_SET_FIELD);
            a.u16(0);
            a.u32(o.header);
            if let Some(e) = o.experimenter {
                a.u32(e);
            }
            a.zeros(width);
            a.pad8();
            let len = a.len() as u16;
            a.patch_u16(2, len);
            let ok = decode_actions(&a.bytes).is_ok();
            assert_eq!(ok, crate::oxm::field_is_writable(f) && f.name != "vlan_tci", "set_field {}", f.name);
            assert_eq!(ok, listed.contains(&o), "set_field {} listed", f.name);
        }
        assert_eq!(t.property(NEXT_TABLES), Some(&PropValue::Tables((4..=254).collect())));
        let last = TableFeatures::rqvs_table(254);
        assert_eq!(last.property(NEXT_TABLES), Some(&PropValue::Tables(vec![])));
        let Some(PropValue::Ids(i)) = last.property(INSTRUCTIONS) else { panic!() };
        assert!(!i.iter().any(|i| i.kind == OFPIT_GOTO_TABLE), "no goto_table from the last table");
    }

    #[test]
    fn malformed_bodies_are_errors() {
        let mut w = Writer::new();
        TableFeatures::rqvs().write(&mut w).unwrap();
        let b = w.bytes;
        // The length not a multiple of 8, below the fixed part, past the body.
        for len in [65u16, 8, (b.len() + 8) as u16] {
            let mut x = b.clone();
            x[..2].copy_from_slice(&len.to_be_bytes());
            assert!(matches!(
                TableFeatures::decode_all(&x),
                Err(DecodeError::BadLength { .. } | DecodeError::Truncated { .. })
            ));
        }
        // A truncated body; an id whose length is below 4; an experimenter OXM cut short.
        assert!(TableFeatures::decode_all(&b[..b.len() - 8]).is_err());
        assert!(read_ids(&[0, 4, 0, 3]).is_err());
        assert!(read_oxm_ids(&[0xff, 0xff, 0x54, 0x06, 0x4f, 0x4e]).is_err());
        // A payload of the wrong kind does not encode.
        let t = TableFeatures {
            properties: vec![TableFeatureProp { kind: MATCH, value: PropValue::Tables(vec![1]) }],
            ..TableFeatures::default()
        };
        assert!(t.write(&mut Writer::new()).is_err());
    }
}
