//! `Reference`: the linear-scan classifier, the oracle every other classifier is checked against.
//!
//! Rules are kept sorted in winner order (priority descending, id ascending), so the first rule
//! that matches is the winner and the scan stops there. Each rule is flattened into a 48-byte
//! compact match (`compact.rs`: addresses, port ranges and masks, protocol, TCP flags, dl_type,
//! tested cheapest-and-most-selective first; other fields are checked on the full match last). `lookup_batch` scans the rules once for the whole batch, testing each rule
//! against every key still unresolved, which reads the rule array once per batch instead of once
//! per packet — the difference between memory-bound and cache-bound on 500K-rule sets.

use std::collections::HashSet;

use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::classifier::{Classifier, ClassifierError, Remainder};
use crate::compact::{CompactMatch, Extras};

/// The linear-scan reference classifier.
#[derive(Clone, Debug, Default)]
pub struct Reference {
    /// Rules in winner order, parallel to `entries` and `ids`.
    rules: Vec<Rule>,
    entries: Vec<CompactMatch>,
    ids: Vec<RuleId>,
    /// Full matches of rules that need fields outside the entry.
    extras: Extras,
    /// Ids present (for duplicate checks).
    present: HashSet<RuleId>,
}

impl Reference {
    /// Builds from rules in any order. Duplicate ids are an error.
    pub fn build(rules: &[Rule]) -> Result<Reference, ClassifierError> {
        let mut sorted: Vec<Rule> = rules.to_vec();
        sorted.sort_by_key(|r| r.rank());
        let mut r = Reference { present: HashSet::with_capacity(rules.len()), ..Reference::default() };
        for rule in sorted {
            if !r.present.insert(rule.id) {
                return Err(ClassifierError::DuplicateId(rule.id));
            }
            r.push(rule);
        }
        Ok(r)
    }

    fn push(&mut self, rule: Rule) {
        let e = CompactMatch::new(&rule.matches, &mut self.extras);
        self.entries.push(e);
        self.ids.push(rule.id);
        self.rules.push(rule);
    }

    #[inline(always)]
    fn entry_matches(&self, e: &CompactMatch, k: &FlowKey) -> bool {
        e.matches(k, &self.extras)
    }

    /// The winning rule itself.
    pub fn lookup_rule(&self, key: &FlowKey) -> Option<&Rule> {
        self.entries.iter().position(|e| self.entry_matches(e, key)).map(|i| &self.rules[i])
    }

    /// The rule with this id, if present.
    pub fn rule(&self, id: RuleId) -> Option<&Rule> {
        if !self.present.contains(&id) {
            return None;
        }
        self.rules.iter().find(|r| r.id == id)
    }

    /// Rules in winner order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }
}

impl Remainder for Reference {
    fn lookup_beating(&self, key: &FlowKey, floor: Option<(u32, RuleId)>) -> Option<(u32, RuleId)> {
        for (r, e) in self.rules.iter().zip(&self.entries) {
            if floor.is_some_and(|(fp, fid)| !rqvs_flow::rule::beats(r.priority, r.id, fp, fid)) {
                return None; // rules are in winner order: none of the rest beats the floor
            }
            if self.entry_matches(e, key) {
                return Some((r.priority, r.id));
            }
        }
        None
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
        if self.present.contains(&rule.id) {
            return Err(ClassifierError::DuplicateId(rule.id));
        }
        let at = self.rules.partition_point(|r| r.rank() < rule.rank());
        let e = CompactMatch::new(&rule.matches, &mut self.extras);
        self.present.insert(rule.id);
        self.entries.insert(at, e);
        self.ids.insert(at, rule.id);
        self.rules.insert(at, rule);
        Ok(())
    }

    fn remove(&mut self, id: RuleId) -> Option<Rule> {
        if !self.present.remove(&id) {
            return None;
        }
        let at = self.ids.iter().position(|&x| x == id)?;
        self.entries.remove(at).release(&mut self.extras);
        self.ids.remove(at);
        Some(self.rules.remove(at))
    }

    fn len(&self) -> usize {
        self.rules.len()
    }

    fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        size_of::<Self>()
            + self.rules.capacity() * size_of::<Rule>()
            + self.entries.capacity() * size_of::<CompactMatch>()
            + self.ids.capacity() * size_of::<RuleId>()
            + self.extras.memory_bytes()
            + self.present.capacity() * (size_of::<RuleId>() + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use proptest::prelude::*;
    use rqvs_flow::{Actions, Match};

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn differential_with_updates(case in testing::arb_case()) {
            testing::check_differential(&case, |rules| Box::new(Reference::build(rules).unwrap()))?;
        }

        #[test]
        fn remainder_lookups(case in testing::arb_case()) {
            testing::check_remainder(&case, &Reference::build(&case.rules).unwrap())?;
        }
    }

    #[test]
    fn duplicate_ids_are_refused() {
        let rules = vec![Rule::new(1, 1, Match::ANY, Actions::drop()), Rule::new(1, 2, Match::ANY, Actions::drop())];
        assert_eq!(Reference::build(&rules).unwrap_err(), ClassifierError::DuplicateId(RuleId(1)));
    }
}
