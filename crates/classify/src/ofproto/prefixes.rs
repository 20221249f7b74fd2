//! The prefix fields of a classifier: which fields get a classifier-wide prefix trie, as OVS's
//! `Flow_Table:prefixes` column sets them (`classifier_set_prefix_fields` in OVS 3.1).
//!
//! OVS builds tries on at most three fields (`CLS_MAX_TRIES`) of those whose value is a whole
//! number of 32-bit words at a 32-bit offset of its `struct flow`: `nw_src`, `nw_dst` (aliases
//! `ip_src`, `ip_dst`), `ipv6_src`, `ipv6_dst`, and the tunnel's `tun_src`, `tun_dst`,
//! `tun_ipv6_src`, `tun_ipv6_dst`. rqvs keys carry no tunnel fields, so those are refused with
//! an error naming them, as is any other field. Without a setting, ofproto uses
//! `nw_dst,nw_src` (vswitchd's `default_prefix_fields`); `none` disables the tries.
//!
//! The fields are checked in the order given (OVS's `check_tries` walks its tries in order), so
//! the order can change which trie proves a subtable unmatchable, and so the megaflow.
//!
//! [`set_default_prefix_fields`] sets what a new [`super::OfprotoClassifier`] starts with in
//! this process (what the command line's `--prefixes` sets); one classifier's fields are set
//! with [`super::OfprotoClassifier::set_prefix_fields`].

use std::fmt;
use std::sync::RwLock;

use rqvs_flow::FlowKey;

use super::trie::{PrefixTrie, TrieLookup};

/// The most prefix fields (OVS's `CLS_MAX_TRIES`).
pub const MAX_PREFIX_FIELDS: usize = 3;

/// A field a prefix trie can be built on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrefixField {
    NwSrc,
    NwDst,
    Ipv6Src,
    Ipv6Dst,
}

impl PrefixField {
    pub const ALL: [PrefixField; 4] =
        [PrefixField::NwSrc, PrefixField::NwDst, PrefixField::Ipv6Src, PrefixField::Ipv6Dst];

    /// The name OVS prints.
    pub fn name(self) -> &'static str {
        match self {
            PrefixField::NwSrc => "nw_src",
            PrefixField::NwDst => "nw_dst",
            PrefixField::Ipv6Src => "ipv6_src",
            PrefixField::Ipv6Dst => "ipv6_dst",
        }
    }

    /// Width in bits.
    pub fn bits(self) -> u32 {
        match self {
            PrefixField::NwSrc | PrefixField::NwDst => 32,
            PrefixField::Ipv6Src | PrefixField::Ipv6Dst => 128,
        }
    }

    /// The field's value, right-aligned.
    #[inline]
    pub fn get(self, k: &FlowKey) -> u128 {
        match self {
            PrefixField::NwSrc => u128::from(k.nw_src),
            PrefixField::NwDst => u128::from(k.nw_dst),
            PrefixField::Ipv6Src => k.ipv6_src,
            PrefixField::Ipv6Dst => k.ipv6_dst,
        }
    }

    /// Does the packet meet the field's prerequisite (OVS's `mf_are_prereqs_ok`: IPv4 for
    /// `nw_src`/`nw_dst`, IPv6 for `ipv6_src`/`ipv6_dst`)? When not, the field's trie says
    /// nothing about the packet.
    #[inline]
    pub fn applies(self, k: &FlowKey) -> bool {
        match self {
            PrefixField::NwSrc | PrefixField::NwDst => k.is_ip(),
            PrefixField::Ipv6Src | PrefixField::Ipv6Dst => k.is_ipv6(),
        }
    }

    /// The prefix length of `mask` on this field when it is a CIDR mask (`0` for no bits or a
    /// non-prefix mask: OVS then keeps the subtable out of the trie).
    pub fn plen(self, mask: &FlowKey) -> u32 {
        match self {
            PrefixField::NwSrc | PrefixField::NwDst => cidr_len(self.get(mask) as u32),
            PrefixField::Ipv6Src | PrefixField::Ipv6Dst => {
                let m = self.get(mask);
                if m != 0 && (!m).wrapping_add(1) & !m == 0 {
                    m.count_ones()
                } else {
                    0
                }
            }
        }
    }

    /// Marks the first `bits` bits of the field as examined in `wc`.
    #[inline]
    pub fn set_prefix_bits(self, wc: &mut FlowKey, bits: u32) {
        match self {
            PrefixField::NwSrc => wc.nw_src |= prefix_mask32(bits),
            PrefixField::NwDst => wc.nw_dst |= prefix_mask32(bits),
            PrefixField::Ipv6Src => wc.ipv6_src |= prefix_mask128(bits),
            PrefixField::Ipv6Dst => wc.ipv6_dst |= prefix_mask128(bits),
        }
    }

    /// Are the first `bits` bits of the field already examined in `wc`?
    #[inline]
    pub fn prefix_bits_set(self, wc: &FlowKey, bits: u32) -> bool {
        match self {
            PrefixField::NwSrc => wc.nw_src & prefix_mask32(bits) == prefix_mask32(bits),
            PrefixField::NwDst => wc.nw_dst & prefix_mask32(bits) == prefix_mask32(bits),
            PrefixField::Ipv6Src => wc.ipv6_src & prefix_mask128(bits) == prefix_mask128(bits),
            PrefixField::Ipv6Dst => wc.ipv6_dst & prefix_mask128(bits) == prefix_mask128(bits),
        }
    }
}

impl fmt::Display for PrefixField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The prefix length of a 32-bit mask when it is a CIDR mask (`0` for no bits or a non-prefix
/// mask).
pub fn cidr_len(mask: u32) -> u32 {
    if mask != 0 && (!mask).wrapping_add(1) & !mask == 0 {
        mask.count_ones()
    } else {
        0
    }
}

/// The first `bits` (0..=32) bits of a 32-bit value.
#[inline]
pub fn prefix_mask32(bits: u32) -> u32 {
    if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    }
}

/// The first `bits` (0..=128) bits of a 128-bit value.
#[inline]
pub fn prefix_mask128(bits: u32) -> u128 {
    if bits == 0 {
        0
    } else {
        u128::MAX << (128 - bits)
    }
}

/// Up to [`MAX_PREFIX_FIELDS`] distinct prefix fields, in checking order.
#[derive(Clone, Copy, Eq)]
pub struct PrefixFields {
    fields: [PrefixField; MAX_PREFIX_FIELDS],
    n: u8,
}

/// Why a `prefixes` setting was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrefixFieldsError(pub String);

impl fmt::Display for PrefixFieldsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PrefixFieldsError {}

/// The tunnel fields OVS accepts as prefix fields and rqvs keys do not carry.
const TUNNEL_PREFIX_FIELDS: [&str; 4] = ["tun_src", "tun_dst", "tun_ipv6_src", "tun_ipv6_dst"];

impl PrefixFields {
    /// What ofproto uses without a setting: `nw_dst`, then `nw_src`.
    pub const OVS_DEFAULT: PrefixFields =
        PrefixFields { fields: [PrefixField::NwDst, PrefixField::NwSrc, PrefixField::NwSrc], n: 2 };

    /// No tries (`prefixes=none`).
    pub const NONE: PrefixFields = PrefixFields { fields: [PrefixField::NwDst; MAX_PREFIX_FIELDS], n: 0 };

    /// These fields, in this order: at most [`MAX_PREFIX_FIELDS`], none twice.
    pub fn new(fields: &[PrefixField]) -> Result<PrefixFields, PrefixFieldsError> {
        if fields.len() > MAX_PREFIX_FIELDS {
            return Err(PrefixFieldsError(format!(
                "{} prefix fields given, at most {MAX_PREFIX_FIELDS} allowed (OVS's CLS_MAX_TRIES)",
                fields.len()
            )));
        }
        let mut out = PrefixFields::NONE;
        for &f in fields {
            if out.fields().contains(&f) {
                return Err(PrefixFieldsError(format!("prefix field {f} listed twice")));
            }
            out.fields[usize::from(out.n)] = f;
            out.n += 1;
        }
        Ok(out)
    }

    /// Parses `Flow_Table:prefixes`-style text: field names separated by commas (ovs-ofctl's
    /// names and aliases, e.g. `ip_dst`), or `none`.
    pub fn parse(text: &str) -> Result<PrefixFields, PrefixFieldsError> {
        let names: Vec<&str> = text.split(',').map(str::trim).collect();
        if names.iter().any(|n| n.is_empty()) {
            return Err(PrefixFieldsError(format!(
                "'{text}': expected field names separated by commas (nw_src, nw_dst, ipv6_src, ipv6_dst) or 'none'"
            )));
        }
        if names.contains(&"none") {
            if names.len() > 1 {
                return Err(PrefixFieldsError(format!("'{text}': 'none' cannot be combined with fields")));
            }
            return Ok(PrefixFields::NONE);
        }
        let fields = names.iter().map(|n| Self::field_by_name(n)).collect::<Result<Vec<_>, _>>()?;
        PrefixFields::new(&fields)
    }

    fn field_by_name(name: &str) -> Result<PrefixField, PrefixFieldsError> {
        if TUNNEL_PREFIX_FIELDS.contains(&name) {
            return Err(PrefixFieldsError(format!(
                "prefix field {name}: OVS allows it, but rqvs keys carry no tunnel fields"
            )));
        }
        let Some(f) = rqvs_flow::field::Field::by_name(name) else {
            return Err(PrefixFieldsError(format!(
                "prefix field {name}: no such field (prefix fields: nw_src, nw_dst, ipv6_src, ipv6_dst)"
            )));
        };
        PrefixField::ALL.into_iter().find(|p| p.name() == f.name).filter(|_| f.trie).ok_or_else(|| {
            PrefixFieldsError(format!(
                "prefix field {name}: not a field a prefix trie can be built on (nw_src, nw_dst, ipv6_src, ipv6_dst)"
            ))
        })
    }

    /// The fields OVS's vswitchd takes from an OVSDB `Flow_Table` row's `prefixes` column (what
    /// the drop-in's OVSDB wiring calls), with the warnings vswitchd would log. The column is a
    /// set, so its names come sorted and vswitchd checks the fields in that order
    /// (`prefixes=ipv6_src,ipv6_dst` checks `ipv6_dst` first — measured against OVS 3.1 by
    /// `ovs_wide_sets`); `none` anywhere means no tries; an unknown or non-prefix field (and
    /// rqvs's missing tunnel fields) is skipped with a warning, as is a fourth field; an alias of
    /// a field already taken is ignored; when no field is usable, the default stays.
    pub fn from_ovsdb<S: AsRef<str>>(names: &[S]) -> (PrefixFields, Vec<String>) {
        let mut sorted: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.contains(&"none") {
            return (PrefixFields::NONE, Vec::new());
        }
        let mut warnings = Vec::new();
        let mut out = PrefixFields::NONE;
        let mut usable = false;
        for name in sorted {
            match Self::field_by_name(name) {
                Err(e) => warnings.push(format!("'prefixes': {e}; field not used")),
                Ok(_) if usize::from(out.n) >= MAX_PREFIX_FIELDS => {
                    warnings.push(format!("'prefixes' with too many fields, field not used: {name}"))
                }
                Ok(f) => {
                    usable = true;
                    if !out.fields().contains(&f) {
                        out.fields[usize::from(out.n)] = f;
                        out.n += 1;
                    }
                }
            }
        }
        (if usable { out } else { PrefixFields::OVS_DEFAULT }, warnings)
    }

    /// Field `j` (`j` below [`MAX_PREFIX_FIELDS`]; past the fields, whatever fills the slot).
    #[inline(always)]
    pub fn field(&self, j: usize) -> PrefixField {
        self.fields[j]
    }

    /// The fields, in checking order.
    #[inline]
    pub fn fields(&self) -> &[PrefixField] {
        &self.fields[..usize::from(self.n)]
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}

impl PartialEq for PrefixFields {
    fn eq(&self, other: &Self) -> bool {
        self.fields() == other.fields()
    }
}

impl std::hash::Hash for PrefixFields {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.fields().hash(h);
    }
}

impl Default for PrefixFields {
    fn default() -> Self {
        PrefixFields::OVS_DEFAULT
    }
}

impl fmt::Display for PrefixFields {
    /// `nw_dst,nw_src`, or `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        for (i, p) in self.fields().iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(p.name())?;
        }
        Ok(())
    }
}

impl fmt::Debug for PrefixFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PrefixFields({self})")
    }
}

impl std::str::FromStr for PrefixFields {
    type Err = PrefixFieldsError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PrefixFields::parse(s)
    }
}

static DEFAULT: RwLock<PrefixFields> = RwLock::new(PrefixFields::OVS_DEFAULT);

/// Sets the prefix fields every [`super::OfprotoClassifier`] created afterwards in this process
/// starts with (the command line's `--prefixes`). Classifiers already built keep theirs.
pub fn set_default_prefix_fields(fields: PrefixFields) {
    *DEFAULT.write().unwrap_or_else(|e| e.into_inner()) = fields;
}

/// The prefix fields a new classifier starts with ([`set_default_prefix_fields`]; OVS's
/// `nw_dst,nw_src` unless set).
pub fn default_prefix_fields() -> PrefixFields {
    *DEFAULT.read().unwrap_or_else(|e| e.into_inner())
}

/// One classifier-wide trie.
#[derive(Clone, Debug)]
enum FieldTrie {
    V4(PrefixTrie<u32>),
    V6(PrefixTrie<u128>),
}

/// The classifier-wide tries of one table, one per prefix field.
#[derive(Clone, Debug)]
pub struct Tries {
    pub fields: PrefixFields,
    tries: Vec<FieldTrie>,
}

impl Tries {
    pub fn new(fields: PrefixFields) -> Tries {
        let tries = fields
            .fields()
            .iter()
            .map(|f| match f.bits() {
                32 => FieldTrie::V4(PrefixTrie::default()),
                _ => FieldTrie::V6(PrefixTrie::default()),
            })
            .collect();
        Tries { fields, tries }
    }

    /// Adds a rule part with value `value` and prefix length `plen` (≥ 1) on trie `j`.
    pub fn insert(&mut self, j: usize, value: &FlowKey, plen: u32) {
        let v = self.fields.fields()[j].get(value);
        match &mut self.tries[j] {
            FieldTrie::V4(t) => t.insert(v as u32, plen),
            FieldTrie::V6(t) => t.insert(v, plen),
        }
    }

    /// Removes what [`Tries::insert`] added.
    pub fn remove(&mut self, j: usize, value: &FlowKey, plen: u32) {
        let v = self.fields.fields()[j].get(value);
        match &mut self.tries[j] {
            FieldTrie::V4(t) => t.remove(v as u32, plen),
            FieldTrie::V6(t) => t.remove(v, plen),
        };
    }

    /// OVS's `trie_lookup`: the packet's answer from trie `j`, or "every length may match" when
    /// the packet does not meet the field's prerequisite.
    #[inline]
    pub fn lookup(&self, j: usize, key: &FlowKey) -> TrieLookup {
        let f = self.fields.field(j);
        if !f.applies(key) {
            return TrieLookup::ALL;
        }
        match &self.tries[j] {
            FieldTrie::V4(t) => t.lookup(f.get(key) as u32),
            FieldTrie::V6(t) => t.lookup(f.get(key)),
        }
    }

    pub fn memory_bytes(&self) -> usize {
        self.tries
            .iter()
            .map(|t| match t {
                FieldTrie::V4(t) => t.memory_bytes(),
                FieldTrie::V6(t) => t.memory_bytes(),
            })
            .sum()
    }
}

impl Default for Tries {
    fn default() -> Self {
        Tries::new(PrefixFields::OVS_DEFAULT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_errors() {
        assert_eq!(PrefixFields::parse("nw_dst,nw_src").unwrap(), PrefixFields::OVS_DEFAULT);
        assert_eq!(PrefixFields::parse("none").unwrap().to_string(), "none");
        let p = PrefixFields::parse("ipv6_src, ipv6_dst,ip_src").unwrap();
        assert_eq!(p.fields(), [PrefixField::Ipv6Src, PrefixField::Ipv6Dst, PrefixField::NwSrc]);
        assert_eq!(p.to_string(), "ipv6_src,ipv6_dst,nw_src");
        let err = |t: &str| PrefixFields::parse(t).unwrap_err().0;
        assert!(err("tun_src").contains("tun_src") && err("tun_src").contains("tunnel"), "{}", err("tun_src"));
        assert!(err("nw_proto").contains("nw_proto") && err("nw_proto").contains("not a field"));
        assert!(err("arp_spa").contains("arp_spa"), "arp_spa shares nw_src's bits but is no prefix field");
        assert!(err("bogus").contains("no such field"));
        assert!(err("nw_src,nw_dst,ipv6_src,ipv6_dst").contains("at most 3"));
        assert!(err("nw_src,ip_src").contains("twice"));
        assert!(err("none,nw_src").contains("none"));
        assert!(err("nw_src,").contains("expected"));
    }

    #[test]
    fn from_ovsdb_as_vswitchd() {
        let (p, w) = PrefixFields::from_ovsdb(&["ipv6_src", "ipv6_dst"]);
        assert_eq!(p.to_string(), "ipv6_dst,ipv6_src", "a set: sorted");
        assert!(w.is_empty());
        let (p, w) = PrefixFields::from_ovsdb(&["nw_src", "tun_src", "ipv6_dst", "nw_dst", "ipv6_src"]);
        assert_eq!(p.to_string(), "ipv6_dst,ipv6_src,nw_dst");
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("nw_src") && w[0].contains("too many"), "{w:?}");
        assert!(w[1].contains("tun_src"), "{w:?}");
        assert_eq!(PrefixFields::from_ovsdb(&["nw_src", "none"]).0, PrefixFields::NONE);
        assert_eq!(PrefixFields::from_ovsdb(&["bogus"]).0, PrefixFields::OVS_DEFAULT);
        assert_eq!(PrefixFields::from_ovsdb::<&str>(&[]).0, PrefixFields::OVS_DEFAULT);
        assert_eq!(PrefixFields::from_ovsdb(&["ip_src", "nw_src"]).0.to_string(), "nw_src");
    }

    #[test]
    fn plen_and_bits() {
        let mut m = FlowKey::ZERO;
        m.ipv6_src = prefix_mask128(64);
        m.nw_dst = 0xffff_0000;
        assert_eq!(PrefixField::Ipv6Src.plen(&m), 64);
        assert_eq!(PrefixField::NwDst.plen(&m), 16);
        assert_eq!(PrefixField::NwSrc.plen(&m), 0);
        m.ipv6_dst = 0xff;
        assert_eq!(PrefixField::Ipv6Dst.plen(&m), 0, "not a CIDR mask");
        let mut wc = FlowKey::ZERO;
        PrefixField::Ipv6Dst.set_prefix_bits(&mut wc, 65);
        assert!(PrefixField::Ipv6Dst.prefix_bits_set(&wc, 65) && !PrefixField::Ipv6Dst.prefix_bits_set(&wc, 66));
        assert_eq!(wc.ipv6_dst.count_ones(), 65);
    }
}
