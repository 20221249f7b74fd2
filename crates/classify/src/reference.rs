//! `Reference`: the linear-scan classifier, the oracle every other classifier is checked against.
//!
//! Rules are kept sorted in winner order (priority descending, id ascending), so the first rule
//! that matches is the winner and the scan stops there. Each rule is flattened into a 48-byte
//! [`Entry`] holding the fields ClassBench rules use (addresses, port ranges and masks, protocol,
//! TCP flags, dl_type), tested cheapest-and-most-selective first; a rule that also matches other
//! fields (in_port, MACs, VLAN, ToS, fragments) carries the index of its full [`Match`] for a
//! final check. `lookup_batch` scans the rules once for the whole batch, testing each rule
//! against every key still unresolved, which reads the rule array once per batch instead of once
//! per packet — the difference between memory-bound and cache-bound on 500K-rule sets.

use std::collections::HashMap;

use rqvs_flow::{FlowKey, Match, Rule, RuleId};

use crate::classifier::{Classifier, ClassifierError};

/// One rule, flattened for scanning.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(16))]
struct Entry {
    src_v: u32,
    src_m: u32,
    dst_v: u32,
    dst_m: u32,
    sp_lo: u16,
    sp_hi: u16,
    dp_lo: u16,
    dp_hi: u16,
    sp_v: u16,
    sp_m: u16,
    dp_v: u16,
    dp_m: u16,
    dl_type_v: u16,
    dl_type_m: u16,
    flags_v: u16,
    flags_m: u16,
    proto_v: u8,
    proto_m: u8,
    /// Index into `Reference::extra` when the rule matches fields beyond these, else `NO_EXTRA`.
    extra: u32,
}

const NO_EXTRA: u32 = u32::MAX;

impl Entry {
    fn new(m: &Match, extra: u32) -> Entry {
        let (v, k) = (m.value(), m.mask());
        Entry {
            src_v: v.nw_src,
            src_m: k.nw_src,
            dst_v: v.nw_dst,
            dst_m: k.nw_dst,
            sp_lo: m.tp_src_range().lo,
            sp_hi: m.tp_src_range().hi,
            dp_lo: m.tp_dst_range().lo,
            dp_hi: m.tp_dst_range().hi,
            sp_v: v.tp_src,
            sp_m: k.tp_src,
            dp_v: v.tp_dst,
            dp_m: k.tp_dst,
            dl_type_v: v.dl_type,
            dl_type_m: k.dl_type,
            flags_v: v.tcp_flags,
            flags_m: k.tcp_flags,
            proto_v: v.nw_proto,
            proto_m: k.nw_proto,
            extra,
        }
    }

    /// The compact fields only (the caller checks `extra`).
    #[inline(always)]
    fn matches(&self, k: &FlowKey) -> bool {
        (k.nw_src & self.src_m) == self.src_v
            && (k.nw_dst & self.dst_m) == self.dst_v
            && self.sp_lo <= k.tp_src
            && k.tp_src <= self.sp_hi
            && self.dp_lo <= k.tp_dst
            && k.tp_dst <= self.dp_hi
            && (k.nw_proto & self.proto_m) == self.proto_v
            && (k.tp_src & self.sp_m) == self.sp_v
            && (k.tp_dst & self.dp_m) == self.dp_v
            && (k.tcp_flags & self.flags_m) == self.flags_v
            && (k.dl_type & self.dl_type_m) == self.dl_type_v
    }
}

/// Does the match use any field outside the compact entry?
fn needs_extra(m: &Match) -> bool {
    let k = m.mask();
    k.in_port != 0 || k.dl_src != [0; 6] || k.dl_dst != [0; 6] || k.vlan_tci != 0 || k.nw_tos != 0 || k.nw_frag != 0
}

/// The linear-scan reference classifier.
#[derive(Clone, Debug, Default)]
pub struct Reference {
    /// Rules in winner order, parallel to `entries` and `ids`.
    rules: Vec<Rule>,
    entries: Vec<Entry>,
    ids: Vec<RuleId>,
    /// Full matches of rules that need fields outside the entry.
    extra: Vec<Match>,
    /// Id → present (for duplicate checks).
    present: HashMap<RuleId, ()>,
}

impl Reference {
    /// Builds from rules in any order. Duplicate ids are an error.
    pub fn build(rules: &[Rule]) -> Result<Reference, ClassifierError> {
        let mut sorted: Vec<Rule> = rules.to_vec();
        sorted.sort_by_key(|r| r.rank());
        let mut r = Reference { present: HashMap::with_capacity(rules.len()), ..Reference::default() };
        for rule in sorted {
            if r.present.insert(rule.id, ()).is_some() {
                return Err(ClassifierError::DuplicateId(rule.id));
            }
            r.push(rule);
        }
        Ok(r)
    }

    fn entry_for(&mut self, m: &Match) -> Entry {
        let extra = if needs_extra(m) {
            self.extra.push(*m);
            (self.extra.len() - 1) as u32
        } else {
            NO_EXTRA
        };
        Entry::new(m, extra)
    }

    fn push(&mut self, rule: Rule) {
        let e = self.entry_for(&rule.matches);
        self.entries.push(e);
        self.ids.push(rule.id);
        self.rules.push(rule);
    }

    #[inline(always)]
    fn entry_matches(&self, e: &Entry, k: &FlowKey) -> bool {
        e.matches(k) && (e.extra == NO_EXTRA || self.extra[e.extra as usize].matches(k))
    }

    /// The winning rule itself.
    pub fn lookup_rule(&self, key: &FlowKey) -> Option<&Rule> {
        self.entries.iter().position(|e| self.entry_matches(e, key)).map(|i| &self.rules[i])
    }

    /// The rule with this id, if present.
    pub fn rule(&self, id: RuleId) -> Option<&Rule> {
        if !self.present.contains_key(&id) {
            return None;
        }
        self.rules.iter().find(|r| r.id == id)
    }

    /// Rules in winner order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    fn rebuild_extra(&mut self) {
        self.extra.clear();
        let matches: Vec<Match> = self.rules.iter().map(|r| r.matches).collect();
        for (i, m) in matches.iter().enumerate() {
            self.entries[i] = self.entry_for(m);
        }
    }
}

impl Classifier for Reference {
    fn name(&self) -> &'static str {
        "ref"
    }

    fn lookup(&self, key: &FlowKey) -> Option<RuleId> {
        self.entries.iter().position(|e| self.entry_matches(e, key)).map(|i| self.ids[i])
    }

    fn lookup_batch(&self, keys: &[FlowKey], out: &mut [Option<RuleId>]) {
        assert!(out.len() >= keys.len(), "lookup_batch: output shorter than input");
        for chunk_start in (0..keys.len()).step_by(64) {
            let chunk = &keys[chunk_start..keys.len().min(chunk_start + 64)];
            let out = &mut out[chunk_start..chunk_start + chunk.len()];
            out.fill(None);
            let mut pending: u64 = if chunk.len() == 64 { u64::MAX } else { (1u64 << chunk.len()) - 1 };
            for (i, e) in self.entries.iter().enumerate() {
                let mut bits = pending;
                while bits != 0 {
                    let j = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    if self.entry_matches(e, &chunk[j]) {
                        out[j] = Some(self.ids[i]);
                        pending &= !(1u64 << j);
                    }
                }
                if pending == 0 {
                    break;
                }
            }
        }
    }

    fn insert(&mut self, rule: Rule) -> Result<(), ClassifierError> {
        if self.present.contains_key(&rule.id) {
            return Err(ClassifierError::DuplicateId(rule.id));
        }
        let at = self.rules.partition_point(|r| r.rank() < rule.rank());
        let e = self.entry_for(&rule.matches);
        self.present.insert(rule.id, ());
        self.entries.insert(at, e);
        self.ids.insert(at, rule.id);
        self.rules.insert(at, rule);
        Ok(())
    }

    fn remove(&mut self, id: RuleId) -> Option<Rule> {
        self.present.remove(&id)?;
        let at = self.ids.iter().position(|&x| x == id)?;
        self.entries.remove(at);
        self.ids.remove(at);
        let rule = self.rules.remove(at);
        if needs_extra(&rule.matches) {
            self.rebuild_extra();
        }
        Some(rule)
    }

    fn len(&self) -> usize {
        self.rules.len()
    }

    fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        size_of::<Self>()
            + self.rules.capacity() * size_of::<Rule>()
            + self.entries.capacity() * size_of::<Entry>()
            + self.ids.capacity() * size_of::<RuleId>()
            + self.extra.capacity() * size_of::<Match>()
            + self.present.capacity() * (size_of::<RuleId>() + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rqvs_flow::{Actions, PortRange};

    /// Brute force over `Rule::beats`, independent of the entry layout and sorting.
    fn brute(rules: &[Rule], k: &FlowKey) -> Option<RuleId> {
        let mut best: Option<&Rule> = None;
        for r in rules.iter().filter(|r| r.matches.matches(k)) {
            if best.is_none_or(|b| r.beats(b)) {
                best = Some(r);
            }
        }
        best.map(|r| r.id)
    }

    fn arb_key() -> impl Strategy<Value = FlowKey> {
        (0u32..16, 0u32..16, 0u16..8, 0u16..8, 0u8..3, 0u16..4, 0u32..3, 0u8..2).prop_map(
            |(s, d, sp, dp, proto, flags, port, mac)| FlowKey {
                nw_src: s << 28,
                nw_dst: d << 28,
                tp_src: sp,
                tp_dst: dp,
                nw_proto: proto,
                tcp_flags: flags,
                in_port: port,
                dl_src: [mac; 6],
                dl_type: 0x0800,
                ..FlowKey::default()
            },
        )
    }

    /// Rules with heavy overlap over a small key space, on all field kinds.
    fn arb_rule() -> impl Strategy<Value = (u32, Match)> {
        (arb_key(), any::<[bool; 8]>(), 0u16..8, 0u16..8, 0u32..6).prop_map(|(k, wild, a, b, prio)| {
            let mut m = FlowKey::EXACT;
            if wild[0] {
                m.nw_src = 0
            } else if wild[7] {
                m.nw_src = 0xc000_0000
            }
            if wild[1] {
                m.nw_dst = 0
            }
            if wild[2] {
                m.tp_src = 0
            } else {
                m.tp_src = 0x6
            }
            if wild[3] {
                m.tp_dst = 0
            }
            if wild[4] {
                m.nw_proto = 0
            }
            if wild[5] {
                m.tcp_flags = 0
            }
            if wild[6] {
                m.in_port = 0
            }
            m.dl_src = if wild[7] { [0; 6] } else { [0xff; 6] };
            m.vlan_tci = 0;
            m.nw_tos = 0;
            m.nw_frag = 0;
            m.dl_dst = [0; 6];
            let v = k.masked(&m);
            let range = PortRange::new(a.min(b), a.max(b)).unwrap();
            (prio, Match::new(v, m, PortRange::ANY, range).unwrap())
        })
    }

    fn rules_of(spec: &[(u32, Match)]) -> Vec<Rule> {
        spec.iter().enumerate().map(|(i, &(p, m))| Rule::new(i as u32 * 7 % 101, p, m, Actions::drop())).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn agrees_with_brute_force(spec in prop::collection::vec(arb_rule(), 1..60),
                                   keys in prop::collection::vec(arb_key(), 1..100)) {
            let rules = rules_of(&spec);
            let r = Reference::build(&rules).unwrap();
            let mut batch = vec![None; keys.len()];
            r.lookup_batch(&keys, &mut batch);
            for (k, b) in keys.iter().zip(&batch) {
                let want = brute(&rules, k);
                prop_assert_eq!(r.lookup(k), want);
                prop_assert_eq!(*b, want);
            }
        }

        #[test]
        fn updates_stay_exact(spec in prop::collection::vec(arb_rule(), 2..40),
                              keys in prop::collection::vec(arb_key(), 1..40),
                              removals in prop::collection::vec(any::<prop::sample::Index>(), 1..10)) {
            let mut rules = rules_of(&spec);
            let half = rules.len() / 2;
            let mut r = Reference::build(&rules[..half]).unwrap();
            for rule in &rules[half..] {
                r.insert(rule.clone()).unwrap();
            }
            prop_assert!(r.insert(rules[0].clone()).is_err());
            for ix in removals {
                if rules.is_empty() { break; }
                let victim = rules.remove(ix.index(rules.len()));
                prop_assert_eq!(r.remove(victim.id).map(|x| x.id), Some(victim.id));
                prop_assert!(r.remove(victim.id).is_none());
            }
            prop_assert_eq!(r.len(), rules.len());
            for k in &keys {
                prop_assert_eq!(r.lookup(k), brute(&rules, k));
            }
        }
    }

    #[test]
    fn duplicate_ids_are_refused() {
        let rules = vec![Rule::new(1, 1, Match::ANY, Actions::drop()), Rule::new(1, 2, Match::ANY, Actions::drop())];
        assert_eq!(Reference::build(&rules).unwrap_err(), ClassifierError::DuplicateId(RuleId(1)));
    }
}
