//! Saving and loading a trained NuevoMatchUP: the rules, the iSets (field, bucket ranges, the rules
//! of each bucket) and each iSet's RQ-RMI model, so a classifier can be used without training.
//!
//! Layout (little-endian): magic `RQVSNMU\0`, version `u32` (1), payload length `u64`, payload,
//! FNV-1a-64 checksum of the payload. Payload: rules (`u32` count; each: id, priority `u32`,
//! cookie `u64`, table `u8`, value and mask as the 5 words of `FlowKey::to_words`, the two port
//! ranges as 4 `u16`, the actions as UTF-8 ofctl text with a `u32` length); iSets (`u32` count;
//! each: field `u8`, buckets `u32` count, each bucket `lo`, `hi`, rule count and rule ids as
//! `u32`, then the RQ-RMI model as a `u32`-length block in `rqvs-rqrmi`'s own checked format);
//! remainder rule ids (`u32` count, ids). Loading checks everything — lengths, checksum, that
//! matches are well-formed, that every id is a rule, that each model covers exactly its iSet's
//! bucket ranges — and fails with a one-line error naming what is wrong.
//!
//! The saved state is the live one: removed rules are gone, rules inserted since training are in
//! the remainder.

use std::fmt;

use rqvs_flow::{FlowKey, Match, PortRange, Rule, RuleId};

use super::index::LearnedRanges;
use super::iset::{Field, PlannedBucket, PlannedISet};
use super::{Location, NuevoMatchConfig, NuevoMatchUp};
use crate::{ClassifierError, TupleMerge};

const MAGIC: &[u8; 8] = b"RQVSNMU\0";
const VERSION: u32 = 1;

/// Why a model file could not be written or read.
#[derive(Debug)]
pub enum ModelError {
    Io(std::io::Error),
    /// The file ends before a field it needs (byte offset in the payload).
    Truncated {
        at: usize,
        needed: usize,
    },
    BadMagic,
    UnsupportedVersion(u32),
    Checksum {
        stored: u64,
        computed: u64,
    },
    /// Well-formed bytes that do not describe a valid classifier.
    Invalid(String),
    /// The classifier's index is not a learned model (binary search is not saved).
    NotLearned,
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::Io(e) => write!(f, "{e}"),
            ModelError::Truncated { at, needed } => {
                write!(f, "model file is truncated: {needed} more bytes needed at payload byte {at}")
            }
            ModelError::BadMagic => write!(f, "not an rqvs NuevoMatchUP model file (bad magic)"),
            ModelError::UnsupportedVersion(v) => {
                write!(f, "model file version {v} is not supported (expected {VERSION})")
            }
            ModelError::Checksum { stored, computed } => {
                write!(f, "model file is corrupt: checksum {stored:#018x}, computed {computed:#018x}")
            }
            ModelError::Invalid(why) => write!(f, "invalid model file: {why}"),
            ModelError::NotLearned => write!(f, "only a classifier with RQ-RMI indexes can be saved"),
        }
    }
}

impl std::error::Error for ModelError {}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn field_code(f: Field) -> u8 {
    f as u8
}

fn field_of(code: u8) -> Option<Field> {
    Field::ALL.into_iter().find(|&f| f as u8 == code)
}

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ModelError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let Some(end) = end else {
            return Err(ModelError::Truncated { at: self.at, needed: n - (self.b.len() - self.at) });
        };
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, ModelError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, ModelError> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("2 bytes")))
    }
    fn u32(&mut self) -> Result<u32, ModelError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    fn u64(&mut self) -> Result<u64, ModelError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    fn bytes(&mut self) -> Result<&'a [u8], ModelError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    /// A count whose items take at least `min_item` bytes each (so a corrupt count cannot make
    /// the loader allocate more than the file could hold).
    fn count(&mut self, min_item: usize) -> Result<usize, ModelError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_item) > self.b.len() - self.at {
            return Err(ModelError::Invalid(format!("count {n} at byte {} exceeds the file", self.at - 4)));
        }
        Ok(n)
    }
}

fn write_rule(w: &mut Writer, r: &Rule) {
    w.u32(r.id.0);
    w.u32(r.priority);
    w.u64(r.cookie);
    w.u8(r.table);
    for x in r.matches.value().to_words().into_iter().chain(r.matches.mask().to_words()) {
        w.u64(x);
    }
    let (s, d) = (r.matches.tp_src_range(), r.matches.tp_dst_range());
    for x in [s.lo, s.hi, d.lo, d.hi] {
        w.u16(x);
    }
    w.bytes(r.actions.to_string().as_bytes());
}

fn read_rule(r: &mut Reader<'_>) -> Result<Rule, ModelError> {
    let (id, priority, cookie, table) = (r.u32()?, r.u32()?, r.u64()?, r.u8()?);
    let mut words = [0u64; 10];
    for w in &mut words {
        *w = r.u64()?;
    }
    let value = FlowKey::from_words(&[words[0], words[1], words[2], words[3], words[4]]);
    let mask = FlowKey::from_words(&[words[5], words[6], words[7], words[8], words[9]]);
    let (slo, shi, dlo, dhi) = (r.u16()?, r.u16()?, r.u16()?, r.u16()?);
    let bad = |why: String| ModelError::Invalid(format!("rule {id}: {why}"));
    let src = PortRange::new(slo, shi).ok_or_else(|| bad("reversed tp_src range".into()))?;
    let dst = PortRange::new(dlo, dhi).ok_or_else(|| bad("reversed tp_dst range".into()))?;
    let m = Match::new(value, mask, src, dst).map_err(|e| bad(e.to_string()))?;
    let text = std::str::from_utf8(r.bytes()?).map_err(|_| bad("actions are not UTF-8".into()))?;
    let actions = rqvs_flow::formats::ofctl::parse_flow("model", 1, &format!("actions={text}"), id)
        .map_err(|e| bad(format!("actions: {e}")))?
        .actions;
    Ok(Rule { id: RuleId(id), priority, matches: m, actions, cookie, table })
}

impl NuevoMatchUp<TupleMerge> {
    /// The model file of this classifier's live state.
    pub fn to_model_bytes(&self) -> Result<Vec<u8>, ModelError> {
        let mut ids: Vec<RuleId> = self.rules.keys().copied().collect();
        ids.sort_unstable();
        let mut p = Writer(Vec::new());
        p.u32(ids.len() as u32);
        for id in &ids {
            write_rule(&mut p, &self.rules[id].1);
        }
        p.u32(self.isets.len() as u32);
        for s in &self.isets {
            let model = s.index.to_bytes().ok_or(ModelError::NotLearned)?;
            p.u8(field_code(s.field));
            p.u32(s.buckets() as u32);
            for b in 0..s.buckets() {
                let (from, to) = s.span(b);
                let (lo, hi) = s.index.range(b).ok_or(ModelError::NotLearned)?;
                p.u32(lo);
                p.u32(hi);
                let live: Vec<u32> = (from..to).filter(|&j| !s.pre.is_dead(j)).map(|j| s.cands[j].id.0).collect();
                p.u32(live.len() as u32);
                for id in live {
                    p.u32(id);
                }
            }
            p.bytes(&model);
        }
        let rest: Vec<u32> =
            ids.iter().filter(|id| matches!(self.rules[*id].0, Location::Remainder)).map(|id| id.0).collect();
        p.u32(rest.len() as u32);
        for id in rest {
            p.u32(id);
        }
        let mut out = Writer(Vec::with_capacity(p.0.len() + 28));
        out.0.extend_from_slice(MAGIC);
        out.u32(VERSION);
        out.u64(p.0.len() as u64);
        let sum = fnv1a(&p.0);
        out.0.extend_from_slice(&p.0);
        out.u64(sum);
        Ok(out.0)
    }

    /// A classifier from a model file, without training (the remainder is rebuilt).
    pub fn from_model_bytes(bytes: &[u8]) -> Result<Self, ModelError> {
        if bytes.len() < 20 || &bytes[..8] != MAGIC {
            return Err(if bytes.len() < 8 {
                ModelError::Truncated { at: 0, needed: 8 - bytes.len() }
            } else {
                ModelError::BadMagic
            });
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(ModelError::UnsupportedVersion(version));
        }
        let len = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes")) as usize;
        let body = &bytes[20..];
        if body.len() < len.saturating_add(8) {
            return Err(ModelError::Truncated { at: body.len().min(len), needed: len.saturating_add(8) - body.len() });
        }
        let payload = &body[..len];
        let stored = u64::from_le_bytes(body[len..len + 8].try_into().expect("8 bytes"));
        let computed = fnv1a(payload);
        if stored != computed {
            return Err(ModelError::Checksum { stored, computed });
        }
        let mut r = Reader { b: payload, at: 0 };
        let n = r.count(100)?;
        let mut rules = Vec::with_capacity(n);
        for _ in 0..n {
            rules.push(read_rule(&mut r)?);
        }
        let index_of: std::collections::HashMap<u32, usize> =
            rules.iter().enumerate().map(|(i, r)| (r.id.0, i)).collect();
        if index_of.len() != rules.len() {
            return Err(ModelError::Invalid("duplicate rule ids".into()));
        }
        let lookup_id = |id: u32| {
            index_of.get(&id).copied().ok_or_else(|| ModelError::Invalid(format!("rule id {id} is not in the file")))
        };
        let n_isets = r.count(9)?;
        let mut plans = Vec::with_capacity(n_isets);
        let mut indexes: Vec<Box<dyn super::index::RangeIndex>> = Vec::with_capacity(n_isets);
        for s in 0..n_isets {
            let field = field_of(r.u8()?).ok_or_else(|| ModelError::Invalid(format!("iSet {s}: unknown field")))?;
            let nb = r.count(12)?;
            let mut buckets = Vec::with_capacity(nb);
            for _ in 0..nb {
                let (lo, hi) = (r.u32()?, r.u32()?);
                let k = r.count(4)?;
                let mut ids = Vec::with_capacity(k);
                for _ in 0..k {
                    ids.push(lookup_id(r.u32()?)?);
                }
                buckets.push(PlannedBucket { lo, hi, rules: ids });
            }
            let model = rqvs_rqrmi::RqRmi::<u32>::load(&mut r.bytes()?)
                .map_err(|e| ModelError::Invalid(format!("iSet {s}: RQ-RMI model: {e}")))?;
            if model.len() != nb || (0..nb).any(|b| model.range(b) != (buckets[b].lo, buckets[b].hi)) {
                return Err(ModelError::Invalid(format!("iSet {s}: the model's ranges are not the iSet's buckets")));
            }
            for b in &buckets {
                for &i in &b.rules {
                    match field.interval(&rules[i].matches) {
                        Some((lo, hi)) if b.lo <= lo && hi <= b.hi => {}
                        _ => {
                            return Err(ModelError::Invalid(format!(
                                "iSet {s}: rule {} is not inside its bucket",
                                rules[i].id
                            )))
                        }
                    }
                }
            }
            plans.push(PlannedISet { field, buckets });
            indexes.push(Box::new(LearnedRanges(model)));
        }
        let n_rest = r.count(4)?;
        let mut rest = Vec::with_capacity(n_rest);
        for _ in 0..n_rest {
            rest.push(lookup_id(r.u32()?)?);
        }
        if r.at != payload.len() {
            return Err(ModelError::Invalid(format!("{} unread bytes after the remainder", payload.len() - r.at)));
        }
        let mut placed = vec![0u8; rules.len()];
        for i in plans.iter().flat_map(|p| p.buckets.iter().flat_map(|b| b.rules.iter())).chain(&rest) {
            placed[*i] += 1;
        }
        if let Some(i) = placed.iter().position(|&n| n != 1) {
            return Err(ModelError::Invalid(format!(
                "rule {} is placed {} times (expected once)",
                rules[i].id, placed[i]
            )));
        }
        NuevoMatchUp::assemble(
            rules.into_iter().map(std::sync::Arc::new).collect(),
            NuevoMatchConfig::default(),
            &plans,
            indexes,
            &rest,
            TupleMerge::build,
        )
        .map_err(|e: ClassifierError| ModelError::Invalid(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use crate::Classifier;
    use proptest::prelude::*;

    fn cfg() -> NuevoMatchConfig {
        NuevoMatchConfig {
            isets: super::super::iset::ISetConfig { bucket_size: 2, max_isets: 3, min_coverage: 0.0 },
            ..NuevoMatchConfig::always_learned()
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Save → load gives the same answers, also after updates; any single flipped byte or any
        /// truncation is an error, never a panic or a silently different classifier.
        #[test]
        fn round_trip_and_damage(case in testing::arb_case(), flip in any::<prop::sample::Index>(), cut in any::<prop::sample::Index>()) {
            let mut c = NuevoMatchUp::build_with(&case.rules, cfg(), TupleMerge::build).unwrap();
            if let Some(r) = case.rules.first() {
                c.remove(r.id);
                c.insert(Rule { id: RuleId(5000), ..r.clone() }).unwrap();
            }
            let bytes = c.to_model_bytes().unwrap();
            let back = NuevoMatchUp::from_model_bytes(&bytes).unwrap();
            prop_assert_eq!(back.len(), c.len());
            for k in &case.keys {
                prop_assert_eq!(back.lookup(k), c.lookup(k));
            }
            let mut bad = bytes.clone();
            let i = flip.index(bad.len());
            bad[i] ^= 0x41;
            prop_assert!(NuevoMatchUp::from_model_bytes(&bad).is_err());
            let n = cut.index(bytes.len());
            prop_assert!(NuevoMatchUp::from_model_bytes(&bytes[..n]).is_err());
        }
    }

    #[test]
    fn errors_are_clear() {
        assert!(matches!(NuevoMatchUp::from_model_bytes(b"hello world, not a model"), Err(ModelError::BadMagic)));
        let c = NuevoMatchUp::build(&[]).unwrap();
        let mut b = c.to_model_bytes().unwrap();
        b[8] = 9;
        let err = NuevoMatchUp::from_model_bytes(&b).err().expect("version 9 is refused");
        assert_eq!(err.to_string(), "model file version 9 is not supported (expected 1)");
    }
}
