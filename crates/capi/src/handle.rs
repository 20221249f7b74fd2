//! What the opaque handles hold, and everything they do, in safe Rust: a classifier of any kind
//! ([`rqvs_classifier`]) and a live NuevoMatchUP with its trainer ([`rqvs_live`]). The FFI module
//! only checks pointers, converts arguments and calls these.
//!
//! Rule ids: a classifier built from a file or text numbers its rules by line (0-based, as the
//! `rqvs` command does), one built from an array by index; an inserted rule gets the next id
//! after the largest one the handle has ever held, which the insert returns.

use std::path::Path;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use rqvs_classify::nuevomatch::live::{LiveNuevoMatch, Policy};
use rqvs_classify::nuevomatch::NuevoMatchConfig;
use rqvs_classify::{Classifier, ClassifierKind, NuevoMatchUp, BATCH, CLASSIFIER_NAMES};
use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::error::*;
use crate::types::{rqvs_live_stats, rqvs_policy, rqvs_rule, RQVS_NO_MATCH};

/// The name rule text given to an insert has in error messages (`rule:1:5: expected …`).
const RULE_TEXT_NAME: &str = "rule";

/// The rules of a rule file (ClassBench or ovs-ofctl flows, plain or xz), with the CLI's errors.
pub fn read_rules(path: &str) -> Result<Vec<Rule>, Error> {
    let bytes = rqvs_flow::io::read_bytes(Path::new(path)).map_err(Error::io)?;
    let text = rqvs_flow::io::text_from_bytes(path, bytes).map_err(Error::parse)?;
    parse_rules(path, &text)
}

/// The rules of rule text (either format); `name` names it in errors.
pub fn parse_rules(name: &str, text: &str) -> Result<Vec<Rule>, Error> {
    rqvs_flow::formats::parse_rules(name, text).map_err(Error::parse)
}

/// The packets of a ClassBench trace or a pcap/pcapng capture (plain or xz), each with
/// `in_port`, with the CLI's errors.
pub fn read_trace(path: &str, in_port: u32) -> Result<Vec<FlowKey>, Error> {
    let bytes = rqvs_flow::io::read_bytes(Path::new(path)).map_err(Error::io)?;
    let packets = rqvs_experiment::inputs::packets_from_bytes(path, bytes, in_port).map_err(Error::parse)?;
    Ok(packets.entries.iter().map(|e| e.key).collect())
}

/// A NuevoMatchUP model file's classifier, with the CLI's errors.
pub fn load_model(path: &str) -> Result<NuevoMatchUp, Error> {
    let bytes = rqvs_flow::io::read_bytes(Path::new(path)).map_err(Error::io)?;
    NuevoMatchUp::from_model_bytes(&bytes).map_err(|e| Error::new(RQVS_ERR_MODEL, format!("{path}: {e}")))
}

/// Writes `nmu`'s model file to `path`.
pub fn save_model(nmu: &NuevoMatchUp, path: &str) -> Result<(), Error> {
    let bytes = nmu.to_model_bytes().map_err(|e| Error::new(RQVS_ERR_INVALID, format!("{path}: {e}")))?;
    std::fs::write(path, bytes).map_err(|e| Error::new(RQVS_ERR_IO, format!("{path}: cannot write: {e}")))
}

/// Rules in struct form, rule `i` with id `i`; errors name the rule (`rules[i]: …`).
pub fn rules_from_structs(rules: &[rqvs_rule]) -> Result<Vec<Rule>, Error> {
    rules
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let id = u32::try_from(i).map_err(|_| Error::new(RQVS_ERR_INVALID, "more than 2^32 rules"))?;
            r.to_rule(id).map_err(|e| Error::new(e.status, format!("rules[{i}]: {}", e.message)))
        })
        .collect()
}

/// The id after the largest of `rules` (0 for none).
fn next_id<'a>(rules: impl IntoIterator<Item = &'a Rule>) -> u32 {
    rules.into_iter().map(|r| r.id.0.saturating_add(1)).max().unwrap_or(0)
}

/// Takes the next id for an inserted rule.
fn take_id(next: &mut u32) -> Result<u32, Error> {
    if *next == u32::MAX {
        return Err(Error::new(RQVS_ERR_RULE, "no rule id is left (ids go up to 4294967294)"));
    }
    *next += 1;
    Ok(*next - 1)
}

/// One rule from text (ClassBench line or ovs-ofctl flow) with id `id`.
pub fn parse_rule(text: &str, id: u32, classbench_priority: u32) -> Result<Rule, Error> {
    rqvs_flow::formats::parse_rule_line(RULE_TEXT_NAME, 1, text, id, classbench_priority).map_err(Error::parse)
}

/// One rule in struct form with id `id`; errors start with `rule: `.
pub fn struct_rule(rule: &rqvs_rule, id: u32) -> Result<Rule, Error> {
    rule.to_rule(id).map_err(|e| Error::new(e.status, format!("rule: {}", e.message)))
}

/// Classifies `keys` into `out` (ids, [`RQVS_NO_MATCH`]) in batches of [`BATCH`], as the CLI's
/// `classify` does.
fn classify_into(keys: &[FlowKey], out: &mut [i64], lookup_batch: impl Fn(&[FlowKey], &mut [Option<RuleId>])) {
    let mut ids = [None; BATCH];
    for (k, o) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
        let ids = &mut ids[..k.len()];
        lookup_batch(k, ids);
        for (o, id) in o.iter_mut().zip(ids.iter()) {
            *o = id.map_or(RQVS_NO_MATCH, |id| i64::from(id.0));
        }
    }
}

fn refused(e: rqvs_classify::ClassifierError) -> Error {
    Error::new(RQVS_ERR_RULE, e.to_string())
}

/// A classifier of one kind ("ref", "tss", "tm", "ofproto", "nmu", "nmu-isets", "nmu-bs") over a
/// set of rules: lookups from any number of threads, updates with the caller excluding every
/// other call (`rqvs_classify_batch`).
#[allow(non_camel_case_types)]
pub struct rqvs_classifier {
    kind: ClassifierKind,
    inner: Inner,
    next_id: u32,
}

enum Inner {
    /// Kept as its own type so its model can be saved.
    Nmu(Box<NuevoMatchUp>),
    Other(Box<dyn Classifier>),
}

impl rqvs_classifier {
    /// Builds the classifier called `kind` over `rules`.
    pub fn build(kind: &str, rules: &[Rule]) -> Result<rqvs_classifier, Error> {
        let Some(k) = ClassifierKind::from_name(kind) else {
            return Err(Error::new(
                RQVS_ERR_INVALID,
                format!("unknown classifier '{kind}' (known: {})", CLASSIFIER_NAMES.join(", ")),
            ));
        };
        let inner = match rqvs_classify::build_nuevomatch(k, rules) {
            Some(nmu) => Inner::Nmu(Box::new(nmu.map_err(refused)?)),
            None => Inner::Other(rqvs_classify::build(k, rules).map_err(|e| Error::new(RQVS_ERR_RULE, e))?),
        };
        Ok(rqvs_classifier { kind: k, inner, next_id: next_id(rules) })
    }

    /// The classifier of a model file (kind `nmu`: the saved iSets, models and remainder).
    pub fn load_model(path: &str) -> Result<rqvs_classifier, Error> {
        let nmu = load_model(path)?;
        let next_id = next_id(&nmu.rules());
        Ok(rqvs_classifier { kind: ClassifierKind::Nmu, inner: Inner::Nmu(Box::new(nmu)), next_id })
    }

    pub fn save_model(&self, path: &str) -> Result<(), Error> {
        match &self.inner {
            Inner::Nmu(nmu) => save_model(nmu, path),
            Inner::Other(_) => Err(Error::new(
                RQVS_ERR_INVALID,
                format!(
                    "{path}: a classifier of kind {} has no model to save (only nmu and nmu-isets have)",
                    self.kind.name()
                ),
            )),
        }
    }

    fn get(&self) -> &dyn Classifier {
        match &self.inner {
            Inner::Nmu(c) => c.as_ref(),
            Inner::Other(c) => c.as_ref(),
        }
    }

    fn get_mut(&mut self) -> &mut dyn Classifier {
        match &mut self.inner {
            Inner::Nmu(c) => c.as_mut(),
            Inner::Other(c) => c.as_mut(),
        }
    }

    /// The kind's name, NUL-terminated for C.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            ClassifierKind::Ref => "ref\0",
            ClassifierKind::Tss => "tss\0",
            ClassifierKind::Tm => "tm\0",
            ClassifierKind::Ofproto => "ofproto\0",
            ClassifierKind::Nmu => "nmu\0",
            ClassifierKind::NmuIsets => "nmu-isets\0",
            ClassifierKind::NmuBs => "nmu-bs\0",
        }
    }

    /// Rules held.
    pub fn rule_count(&self) -> usize {
        self.get().len()
    }

    /// `out[i]` = the winner's id for `keys[i]`, or [`RQVS_NO_MATCH`].
    pub fn classify(&self, keys: &[FlowKey], out: &mut [i64]) {
        let c = self.get();
        classify_into(keys, out, |k, o| c.lookup_batch(k, o));
    }

    /// Inserts `rule` under the next id, which it returns.
    pub fn insert(&mut self, make: impl FnOnce(u32) -> Result<Rule, Error>) -> Result<u32, Error> {
        let mut next = self.next_id;
        let id = take_id(&mut next)?;
        self.get_mut().insert(make(id)?).map_err(refused)?;
        self.next_id = next;
        Ok(id)
    }

    pub fn remove(&mut self, id: u32) -> Result<Rule, Error> {
        self.get_mut().remove(RuleId(id)).ok_or_else(|| not_found(id))
    }
}

fn not_found(id: u32) -> Error {
    Error::new(RQVS_ERR_NOT_FOUND, format!("no rule has id {id}"))
}

/// A live NuevoMatchUP classifier with its background trainer: lookups from any number of
/// threads while one thread updates; it locks itself (`rqvs_live_from_file`).
#[allow(non_camel_case_types)]
pub struct rqvs_live {
    state: RwLock<LiveState>,
}

struct LiveState {
    live: LiveNuevoMatch,
    next_id: u32,
}

/// The policies, by their C values (`rqvs_policy`).
pub fn policy(code: u32) -> Result<Policy, Error> {
    match code {
        c if c == rqvs_policy::RQVS_POLICY_INSTANT as u32 => Ok(Policy::Instant),
        c if c == rqvs_policy::RQVS_POLICY_DELAYED as u32 => Ok(Policy::Delayed),
        _ => Err(Error::new(
            RQVS_ERR_INVALID,
            format!("unknown policy {code} (RQVS_POLICY_INSTANT = 0, RQVS_POLICY_DELAYED = 1)"),
        )),
    }
}

fn threshold(t: f64) -> Result<f64, Error> {
    if (0.0..=1.0).contains(&t) {
        Ok(t)
    } else {
        Err(Error::new(RQVS_ERR_INVALID, format!("retrain threshold {t} is not within 0..1 (the paper's is 0.1)")))
    }
}

fn poisoned() -> Error {
    Error::new(RQVS_ERR_PANIC, "the live classifier is unusable: an earlier call failed with an internal error")
}

impl rqvs_live {
    /// Trains the first model over `rules` (synchronously; iSets at every size, as CFLOWS does).
    pub fn build(rules: &[Rule], policy_code: u32, retrain_threshold: f64) -> Result<rqvs_live, Error> {
        let live = LiveNuevoMatch::new(rules, policy(policy_code)?, threshold(retrain_threshold)?).map_err(refused)?;
        Ok(rqvs_live::wrap(live, next_id(rules)))
    }

    /// Starts from a saved model, without training.
    pub fn load_model(path: &str, policy_code: u32, retrain_threshold: f64) -> Result<rqvs_live, Error> {
        let (policy, t) = (policy(policy_code)?, threshold(retrain_threshold)?);
        let nmu = load_model(path)?;
        let next_id = next_id(&nmu.rules());
        Ok(rqvs_live::wrap(LiveNuevoMatch::from_model(nmu, policy, t, NuevoMatchConfig::always_learned()), next_id))
    }

    fn wrap(live: LiveNuevoMatch, next_id: u32) -> rqvs_live {
        rqvs_live { state: RwLock::new(LiveState { live, next_id }) }
    }

    fn read(&self) -> Result<RwLockReadGuard<'_, LiveState>, Error> {
        self.state.read().map_err(|_| poisoned())
    }

    fn write(&self) -> Result<RwLockWriteGuard<'_, LiveState>, Error> {
        self.state.write().map_err(|_| poisoned())
    }

    /// Rules held, staged ones included.
    pub fn rule_count(&self) -> Result<usize, Error> {
        let s = self.read()?;
        Ok(s.live.current().len() + s.live.staged())
    }

    pub fn classify(&self, keys: &[FlowKey], out: &mut [i64]) -> Result<(), Error> {
        let s = self.read()?;
        classify_into(keys, out, |k, o| s.live.lookup_batch(k, o));
        Ok(())
    }

    /// Inserts under the next id (returned), then polls the trainer.
    pub fn insert(&self, make: impl FnOnce(u32) -> Result<Rule, Error>) -> Result<u32, Error> {
        let mut s = self.write()?;
        let mut next = s.next_id;
        let id = take_id(&mut next)?;
        s.live.insert(make(id)?).map_err(refused)?;
        s.next_id = next;
        s.live.poll();
        Ok(id)
    }

    /// Removes the rule (returned), then polls the trainer.
    pub fn remove(&self, id: u32) -> Result<Rule, Error> {
        let mut s = self.write()?;
        let rule = s.live.rule(RuleId(id)).ok_or_else(|| not_found(id))?;
        s.live.remove(RuleId(id));
        s.live.poll();
        Ok(rule)
    }

    /// Swaps in a trained model if one is ready and starts training if needed; never waits.
    pub fn poll(&self) -> Result<(), Error> {
        self.write()?.live.poll();
        Ok(())
    }

    /// Waits for the training running now (if any) to be swapped in. Holds the write lock
    /// only while it swaps: lookups go on meanwhile.
    pub fn finish_training(&self) -> Result<(), Error> {
        loop {
            {
                let mut s = self.write()?;
                s.live.poll();
                if !s.live.training() {
                    return Ok(());
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    pub fn save_model(&self, path: &str) -> Result<(), Error> {
        save_model(self.read()?.live.current(), path)
    }

    pub fn stats(&self) -> Result<rqvs_live_stats, Error> {
        let s = self.read()?;
        let l = &s.live;
        Ok(rqvs_live_stats {
            rules: l.current().len() + l.staged(),
            staged: l.staged(),
            remainder_rules: l.remainder_rules(),
            coverage: l.coverage(),
            training: u8::from(l.training()),
            sessions: l.sessions().len(),
            failed_sessions: l.failed_sessions,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> Vec<Rule> {
        parse_rules(
            "t",
            "@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0000/0x0000\n\
             @0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000\n",
        )
        .unwrap()
    }

    fn key(src: u32, dport: u16) -> FlowKey {
        FlowKey { nw_src: src, tp_dst: dport, nw_proto: 6, dl_type: 0x0800, ..FlowKey::default() }
    }

    #[test]
    fn every_kind_classifies_inserts_and_removes_by_id() {
        for kind in CLASSIFIER_NAMES {
            let mut c = rqvs_classifier::build(kind, &rules()).unwrap();
            let keys = [key(0x0a000001, 80), key(0x0b000001, 80), key(0x0a000001, 81)];
            let mut out = [0; 3];
            c.classify(&keys, &mut out);
            assert_eq!(out, [0, 1, 1], "{kind}");
            let id = c.insert(|id| parse_rule("tcp,nw_src=11.0.0.0/8,priority=9,actions=drop", id, 0)).unwrap();
            assert_eq!(id, 2, "{kind}");
            c.classify(&keys, &mut out);
            assert_eq!(out, [0, 2, 1], "{kind}");
            assert_eq!(c.remove(1).unwrap().id, RuleId(1));
            assert_eq!(c.remove(1).unwrap_err().status, RQVS_ERR_NOT_FOUND);
            c.classify(&keys, &mut out);
            assert_eq!(out, [0, 2, -1], "{kind}");
            // A refused or malformed rule uses up no id.
            assert_eq!(c.insert(|id| parse_rule("@bad", id, 0)).unwrap_err().status, RQVS_ERR_PARSE);
            assert_eq!(c.insert(|id| parse_rule("udp,actions=drop", id, 0)).unwrap(), 3);
            assert_eq!(c.rule_count(), 3);
        }
    }

    #[test]
    fn kind_names_are_the_cli_names() {
        for kind in CLASSIFIER_NAMES {
            let c = rqvs_classifier::build(kind, &rules()).unwrap();
            assert_eq!(c.kind_name(), format!("{kind}\0"));
        }
    }

    #[test]
    fn unknown_kind_and_bad_files_say_what_the_cli_says() {
        let e = rqvs_classifier::build("nope", &rules()).err().unwrap();
        assert_eq!(e.status, RQVS_ERR_INVALID);
        assert!(e.message.starts_with("unknown classifier 'nope' (known: ref, tss"), "{}", e.message);
        let e = read_rules("/nonexistent/rules").unwrap_err();
        assert_eq!(e.status, RQVS_ERR_IO);
        assert_eq!(e.message, rqvs_flow::formats::read_rules(Path::new("/nonexistent/rules")).unwrap_err().to_string());
        let e = parse_rules("f", "@1.2.3.4/8 x").unwrap_err();
        assert_eq!(e.status, RQVS_ERR_PARSE);
        assert!(e.message.starts_with("f:1:"), "{}", e.message);
    }

    #[test]
    fn live_inserts_removes_and_saves() {
        let live = rqvs_live::build(&rules(), 0, 0.1).unwrap();
        let keys = [key(0x0a000001, 80), key(0x0b000001, 80)];
        let mut out = [0; 2];
        live.classify(&keys, &mut out).unwrap();
        assert_eq!(out, [0, 1]);
        assert_eq!(live.insert(|id| parse_rule("tcp,nw_src=11.0.0.0/8,priority=9,actions=drop", id, 0)).unwrap(), 2);
        live.classify(&keys, &mut out).unwrap();
        assert_eq!(out, [0, 2]);
        live.finish_training().unwrap();
        assert_eq!(live.remove(0).unwrap().id, RuleId(0));
        live.classify(&keys, &mut out).unwrap();
        assert_eq!(out, [1, 2]);
        assert_eq!(live.rule_count().unwrap(), 2);
        assert!(policy(2).is_err() && threshold(1.5).is_err());
        let dir = std::env::temp_dir().join(format!("rqvs-capi-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.nmu").display().to_string();
        live.save_model(&path).unwrap();
        let back = rqvs_live::load_model(&path, 1, 0.1).unwrap();
        back.classify(&keys, &mut out).unwrap();
        assert_eq!(out, [1, 2]);
        let c = rqvs_classifier::load_model(&path).unwrap();
        c.classify(&keys, &mut out);
        assert_eq!((out, c.rule_count()), ([1, 2], 2));
        std::fs::write(&path, b"RQVSNMU\0garbage-garbage").unwrap();
        assert_eq!(rqvs_classifier::load_model(&path).err().unwrap().status, RQVS_ERR_MODEL);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
