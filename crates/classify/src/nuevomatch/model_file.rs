//! Saving and loading a trained NuevoMatchUP: the rules, the iSets (field, bucket ranges, the rules
//! of each bucket) and each iSet's RQ-RMI model, so a classifier can be used without training.
//!
//! Layout (little-endian): magic `RQVSNMU\0`, version `u32` (1), payload length `u64`, payload,
//! FNV-1a-64 checksum of the payload. Payload: rules (`u32` count; each: id, priority `u32`,
//! cookie `u64`, table `u8`, value and mask as the 5 words of `FlowKey::to_words`, the two port
//! ranges as 4 `u16`, the actions as UTF-8 ofctl text with a `u32` length); iSets (`u32` count;
//! each: field `u8`, buckets `u32` count, each bucket `lo`, `hi`, rule count and rule ids as
//! `u32`, then the RQ-RMI model as a `u32`-length block in `rqvs-rqrmi`'s own checked format);
//! remainder rule ids (`u32` count, ids). Loading checks everything — lengths (a file shorter
//! than its header or payload is truncated, bytes after the checksum or after a block are an
//! error), checksum, that matches are well-formed, that every id is a rule placed exactly once,
//! that each model covers exactly its iSet's bucket ranges — and fails with a one-line error
//! naming what is wrong.
//!
//! The saved state is the live one: removed rules are gone, rules inserted since training are in
//! the remainder.

use std::fmt;

use rqvs_flow::key::{KEY_WORDS, NARROW_WORDS};
use rqvs_flow::{FlowKey, Match, PortRange, Rule, RuleId};

use super::index::LearnedRanges;
use super::iset::{Field, PlannedBucket, PlannedISet};
use super::rulemap::At;
use super::{NuevoMatchConfig, NuevoMatchUp};
use crate::{ClassifierError, TupleMerge};

const MAGIC: &[u8; 8] = b"RQVSNMU\0";
const VERSION: u32 = 2;
/// The first version, whose keys were the five narrow words (read still; written no more).
const VERSION_NARROW: u32 = 1;
/// Magic, version and payload length.
const HEADER: usize = 8 + 4 + 8;

/// Why a model file could not be written or read.
#[derive(Debug)]
pub enum ModelError {
    Io(std::io::Error),
    /// The file ends before a field it needs (byte offset in the file).
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
                write!(f, "model file is truncated: {needed} more bytes needed at byte {at}")
            }
            ModelError::BadMagic => write!(f, "not an rqvs NuevoMatchUP model file (bad magic)"),
            ModelError::UnsupportedVersion(v) => {
                write!(f, "model file version {v} is not supported (expected {VERSION}, or {VERSION_NARROW})")
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
            return Err(ModelError::Truncated { at: HEADER + self.at, needed: n - (self.b.len() - self.at) });
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

/// A rule; `key_words` is how many words each of its value and mask has in the file
/// ([`KEY_WORDS`], or [`NARROW_WORDS`] in a version-1 file; the missing words are zero).
fn read_rule(r: &mut Reader<'_>, key_words: usize) -> Result<Rule, ModelError> {
    let (id, priority, cookie, table) = (r.u32()?, r.u32()?, r.u64()?, r.u8()?);
    let mut value = [0u64; KEY_WORDS];
    let mut mask = [0u64; KEY_WORDS];
    for w in value.iter_mut().take(key_words).chain(mask.iter_mut().take(key_words)) {
        *w = r.u64()?;
    }
    let (value, mask) = (FlowKey::from_words(&value), FlowKey::from_words(&mask));
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

/// A model file around `payload`: magic, version, the payload's length, the payload and its
/// checksum — so that fuzzing the payload reaches the loader's checks of the body instead of
/// stopping at the checksum (`fuzz/fuzz_targets/model_loader.rs`).
pub fn seal(payload: &[u8]) -> Vec<u8> {
    let mut out = Writer(Vec::with_capacity(payload.len() + HEADER + 8));
    out.0.extend_from_slice(MAGIC);
    out.u32(VERSION);
    out.u64(payload.len() as u64);
    out.0.extend_from_slice(payload);
    out.u64(fnv1a(payload));
    out.0
}

/// The payload of a model file whose header and checksum are sound (the inverse of [`seal`]).
pub fn payload(bytes: &[u8]) -> Option<&[u8]> {
    bytes.len().checked_sub(HEADER + 8).map(|n| &bytes[HEADER..HEADER + n])
}

/// The model loader's fuzz check, shared by the fuzz target and the tests that replay its seeds:
/// loads [`seal`]`(payload)`, which must fail with an error or give a classifier that saves to a
/// file loading to the same rules, in the same places, with the same answers for every rule's
/// own corner key. Panics (what the fuzzer reports) when it does not.
pub fn fuzz_check(payload: &[u8]) {
    let Ok(c) = NuevoMatchUp::from_model_bytes(&seal(payload)) else { return };
    let saved = c.to_model_bytes().expect("a loaded model saves");
    let back = NuevoMatchUp::from_model_bytes(&saved).expect("a saved model loads");
    assert_eq!(back.to_model_bytes().expect("saves again"), saved, "save → load → save is stable");
    let rules = c.rules();
    for r in &rules {
        let k = *r.matches.value();
        assert_eq!(crate::Classifier::lookup(&back, &k), crate::Classifier::lookup(&c, &k));
    }
}

/// Seeds for the model loader's fuzzing: the payloads of small trained models — prefixes on one
/// field, ranges on ports with overlaps, and one with updates (removed rules, a remainder) — so
/// that mutations start from every part of a real model.
pub fn fuzz_seeds() -> Vec<Vec<u8>> {
    let cfg = NuevoMatchConfig {
        isets: super::iset::ISetConfig { bucket_size: 2, cluster_size: 2, max_isets: 3, min_coverage: 0.0, wide: true },
        ..NuevoMatchConfig::always_learned()
    };
    let rule = |i: u32, src: (u32, u32), sport: (u16, u16), proto: Option<u8>| {
        let (mut v, mut m) = (FlowKey::default(), FlowKey::default());
        (v.nw_src, m.nw_src) = (src.0 & src.1, src.1);
        if let Some(p) = proto {
            (v.nw_proto, m.nw_proto) = (p, 0xff);
        }
        let ports = PortRange::new(sport.0, sport.1).unwrap_or(PortRange::ANY);
        let matches = Match::new(v, m, ports, PortRange::ANY).unwrap_or_else(|_| Match::from_masked(v, m));
        Rule::new(i, 1000 - i, matches, rqvs_flow::Actions::output(i % 7 + 1))
    };
    let prefixes: Vec<Rule> = (0..8u32).map(|i| rule(i, (i << 24, 0xff00_0000), (0, 65535), None)).collect();
    let ranges: Vec<Rule> = (0..24u32)
        .map(|i| {
            let lo = (i * 997 % 60_000) as u16;
            rule(i, (i << 20, 0xfff0_0000 << (i % 3)), (lo, lo + (i as u16 % 5) * 300), Some([6, 17][i as usize % 2]))
        })
        .collect();
    let mut out = Vec::new();
    for rules in [&prefixes, &ranges] {
        if let Ok(mut c) = NuevoMatchUp::build_with(rules, cfg, TupleMerge::build) {
            out.extend(c.to_model_bytes().ok().and_then(|b| payload(&b).map(<[u8]>::to_vec)));
            // Updates: a removal and an insert (into the remainder or a bucket).
            crate::Classifier::remove(&mut c, RuleId(1));
            let _ = crate::Classifier::insert(&mut c, rule(500, (0x0a00_0000, 0xff00_0000), (80, 80), Some(6)));
            out.extend(c.to_model_bytes().ok().and_then(|b| payload(&b).map(<[u8]>::to_vec)));
        }
    }
    out
}

impl NuevoMatchUp<TupleMerge> {
    /// The model file of this classifier's live state.
    pub fn to_model_bytes(&self) -> Result<Vec<u8>, ModelError> {
        let mut ids: Vec<RuleId> = self.rules.iter().map(|k| k.id).collect();
        ids.sort_unstable();
        let mut p = Writer(Vec::new());
        p.u32(ids.len() as u32);
        for id in &ids {
            write_rule(&mut p, &self.rule(*id).expect("an id of the map"));
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
        let rest: Vec<u32> = ids
            .iter()
            .filter(|id| self.rules.get(**id).is_some_and(|k| k.at == At::REMAINDER))
            .map(|id| id.0)
            .collect();
        p.u32(rest.len() as u32);
        for id in rest {
            p.u32(id);
        }
        Ok(seal(&p.0))
    }

    /// A classifier from a model file, without training (the remainder is rebuilt).
    pub fn from_model_bytes(bytes: &[u8]) -> Result<Self, ModelError> {
        // The magic first (a file that is not a model says so, however short), then the rest of
        // the header (a model file cut inside it is truncated).
        let magic = &bytes[..bytes.len().min(MAGIC.len())];
        if magic != &MAGIC[..magic.len()] {
            return Err(ModelError::BadMagic);
        }
        if bytes.len() < HEADER {
            return Err(ModelError::Truncated { at: bytes.len(), needed: HEADER - bytes.len() });
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
        let key_words = match version {
            VERSION => KEY_WORDS,
            VERSION_NARROW => NARROW_WORDS,
            _ => return Err(ModelError::UnsupportedVersion(version)),
        };
        let len = usize::try_from(u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"))).unwrap_or(usize::MAX);
        let body = &bytes[HEADER..];
        let whole = len.saturating_add(8);
        if body.len() < whole {
            return Err(ModelError::Truncated { at: bytes.len(), needed: whole - body.len() });
        }
        if body.len() > whole {
            return Err(ModelError::Invalid(format!(
                "{} bytes after the checksum (the header announces a {len}-byte payload)",
                body.len() - whole
            )));
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
            rules.push(read_rule(&mut r, key_words)?);
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
            let mut block = r.bytes()?;
            let model = rqvs_rqrmi::RqRmi::<u32>::load(&mut block)
                .map_err(|e| ModelError::Invalid(format!("iSet {s}: RQ-RMI model: {e}")))?;
            if !block.is_empty() {
                return Err(ModelError::Invalid(format!("iSet {s}: {} bytes after its RQ-RMI model", block.len())));
            }
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
        // Counted in usize: a rule listed 257 times must not wrap to once.
        let mut placed = vec![0usize; rules.len()];
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
            &rules,
            (0..rules.len()).map(|_| None).collect(),
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
            isets: super::super::iset::ISetConfig {
                bucket_size: 2,
                cluster_size: 2,
                max_isets: 3,
                min_coverage: 0.0,
                wide: true,
            },
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

    /// A model of a few rules with at least one iSet (so the payload has every part).
    fn small_model() -> Vec<u8> {
        let rules: Vec<Rule> = (0..8u32)
            .map(|i| {
                let mut v = FlowKey::default();
                let mut m = FlowKey::default();
                v.nw_src = i << 24;
                m.nw_src = 0xff00_0000;
                Rule::new(i, 100 - i, Match::from_masked(v, m), rqvs_flow::Actions::drop())
            })
            .collect();
        NuevoMatchUp::build_with(&rules, cfg(), TupleMerge::build).unwrap().to_model_bytes().unwrap()
    }

    #[test]
    fn short_files_are_truncated_or_not_models() {
        let good = small_model();
        for n in 1..HEADER {
            let err = NuevoMatchUp::from_model_bytes(&good[..n]).err().expect("too short");
            assert!(matches!(err, ModelError::Truncated { .. }), "{n} bytes: {err}");
        }
        assert!(matches!(NuevoMatchUp::from_model_bytes(b"RQVSX"), Err(ModelError::BadMagic)));
        assert!(matches!(NuevoMatchUp::from_model_bytes(b""), Err(ModelError::Truncated { .. })));
    }

    #[test]
    fn bytes_after_the_checksum_are_an_error() {
        let mut b = small_model();
        assert!(NuevoMatchUp::from_model_bytes(&b).is_ok());
        b.push(0);
        let err = NuevoMatchUp::from_model_bytes(&b).err().expect("a trailing byte is refused");
        assert!(err.to_string().contains("1 bytes after the checksum"), "{err}");
    }

    #[test]
    fn a_rule_placed_257_times_is_refused() {
        let good = small_model();
        let mut p = payload(&good).unwrap().to_vec();
        // The remainder list ends the payload: its count, then ids. Add rule 0 256 more times.
        let c = NuevoMatchUp::from_model_bytes(&good).unwrap();
        let in_remainder = c.rules.iter().filter(|k| k.at == At::REMAINDER).count();
        let rest_at = p.len() - 4 * (1 + in_remainder);
        let n = u32::from_le_bytes(p[rest_at..rest_at + 4].try_into().unwrap());
        p[rest_at..rest_at + 4].copy_from_slice(&(n + 256).to_le_bytes());
        for _ in 0..256 {
            p.extend_from_slice(&0u32.to_le_bytes());
        }
        let err = NuevoMatchUp::from_model_bytes(&seal(&p)).err().expect("placed 257 times");
        assert!(err.to_string().contains("rule 0 is placed 257 times"), "{err}");
        fuzz_check(&p);
    }

    #[test]
    fn errors_are_clear() {
        assert!(matches!(NuevoMatchUp::from_model_bytes(b"hello world, not a model"), Err(ModelError::BadMagic)));
        let c = NuevoMatchUp::build(&[]).unwrap();
        let mut b = c.to_model_bytes().unwrap();
        b[8] = 9;
        let err = NuevoMatchUp::from_model_bytes(&b).err().expect("version 9 is refused");
        assert_eq!(err.to_string(), "model file version 9 is not supported (expected 2, or 1)");
    }
}
