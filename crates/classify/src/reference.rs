//! `Reference`: the linear-scan classifier, the oracle every other classifier is checked against.
//!
//! Rules are kept sorted in winner order (priority descending, id ascending), so the first rule
//! that matches is the winner and the scan stops there. Each rule is flattened into a 48-byte
//! compact match (`compact.rs`: addresses, port ranges and masks, protocol, TCP flags, dl_type,
//! tested cheapest-and-most-selective first; other fields are checked last, on the words of the rule kept in the side slab `Extras`).
//! `lookup_batch` scans the rules once for the whole batch, testing each rule against every key
//! still unresolved, which reads the rule array once per batch instead of once per packet — the
//! difference between memory-bound and cache-bound on 500K-rule sets.
//!
//! The winner order is held in blocks of at most [`BLOCK_MAX`] rules (an unrolled list): a scan
//! walks the blocks in order, and an insert or a remove moves the rules of one block only, so
//! an update costs O(rules / blocks + blocks) rather than moving every later rule (on a 100K set,
//! removing a rule moved ~19 MB; updating 10% of a 100K set took over a minute).

use std::collections::HashMap;

use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::classifier::{Classifier, ClassifierError, Remainder};
use crate::compact::{CompactMatch, Extras};

/// A block is split in two when an insert takes it past this many rules.
pub const BLOCK_MAX: usize = 1024;

/// Rules in winner order, parallel arrays; empty only while the first rule goes in.
#[derive(Clone, Debug, Default)]
struct Block {
    rules: Vec<Rule>,
    entries: Vec<CompactMatch>,
    ids: Vec<RuleId>,
}

impl Block {
    /// True when every rule of the block ranks before `rank` (an empty block: false).
    fn before(&self, rank: (std::cmp::Reverse<u32>, RuleId)) -> bool {
        self.rules.last().is_some_and(|r| r.rank() < rank)
    }

    fn split_off(&mut self, at: usize) -> Block {
        Block { rules: self.rules.split_off(at), entries: self.entries.split_off(at), ids: self.ids.split_off(at) }
    }
}

/// The linear-scan reference classifier.
#[derive(Clone, Debug)]
pub struct Reference {
    /// The rules in winner order, block after block.
    blocks: Vec<Block>,
    /// Full matches of rules that need fields outside the entry.
    extras: Extras,
    /// Priority of each rule present (its rank, with the id; for duplicate checks and removal).
    present: HashMap<RuleId, u32>,
    /// Split threshold (`BLOCK_MAX`; smaller in tests).
    block_max: usize,
}

impl Default for Reference {
    fn default() -> Reference {
        Reference { blocks: Vec::new(), extras: Extras::default(), present: HashMap::new(), block_max: BLOCK_MAX }
    }
}

impl Reference {
    /// Builds from rules in any order. Duplicate ids are an error.
    pub fn build(rules: &[Rule]) -> Result<Reference, ClassifierError> {
        Reference::build_with_blocks(rules, BLOCK_MAX)
    }

    /// As [`Reference::build`], with blocks split past `block_max` rules (at least 2).
    pub fn build_with_blocks(rules: &[Rule], block_max: usize) -> Result<Reference, ClassifierError> {
        let block_max = block_max.max(2);
        let mut sorted: Vec<Rule> = rules.to_vec();
        sorted.sort_by_key(|r| r.rank());
        let mut r = Reference { present: HashMap::with_capacity(rules.len()), block_max, ..Reference::default() };
        for rule in sorted {
            if r.present.insert(rule.id, rule.priority).is_some() {
                return Err(ClassifierError::DuplicateId(rule.id));
            }
            // Built blocks are half full, so the first inserts into them do not split.
            if r.blocks.last().is_none_or(|b| b.rules.len() >= block_max / 2) {
                r.blocks.push(Block::default());
            }
            let e = CompactMatch::new(&rule.matches, &mut r.extras);
            let b = r.blocks.last_mut().expect("just pushed");
            b.entries.push(e);
            b.ids.push(rule.id);
            b.rules.push(rule);
        }
        Ok(r)
    }

    #[inline(always)]
    fn entry_matches(&self, e: &CompactMatch, k: &FlowKey) -> bool {
        e.matches(k, &self.extras)
    }

    /// The block and position where a rule of this rank is or would go.
    fn locate(&self, rank: (std::cmp::Reverse<u32>, RuleId)) -> (usize, usize) {
        let b = self.blocks.partition_point(|b| b.before(rank)).min(self.blocks.len().saturating_sub(1));
        let at = self.blocks.get(b).map_or(0, |blk| blk.rules.partition_point(|r| r.rank() < rank));
        (b, at)
    }

    /// Entries with their rules and ids, in winner order.
    fn scan(&self) -> impl Iterator<Item = (&CompactMatch, &Rule)> {
        self.blocks.iter().flat_map(|b| b.entries.iter().zip(&b.rules))
    }

    /// The winning rule itself.
    pub fn lookup_rule(&self, key: &FlowKey) -> Option<&Rule> {
        self.scan().find(|(e, _)| self.entry_matches(e, key)).map(|(_, r)| r)
    }

    /// The rule with this id, if present.
    pub fn rule(&self, id: RuleId) -> Option<&Rule> {
        let &priority = self.present.get(&id)?;
        let (b, at) = self.locate((std::cmp::Reverse(priority), id));
        self.blocks.get(b)?.rules.get(at).filter(|r| r.id == id)
    }

    /// Rules in winner order.
    pub fn rules(&self) -> impl Iterator<Item = &Rule> + '_ {
        self.blocks.iter().flat_map(|b| b.rules.iter())
    }
}

impl Remainder for Reference {
    fn lookup_beating(&self, key: &FlowKey, floor: Option<(u32, RuleId)>) -> Option<(u32, RuleId)> {
        for (e, r) in self.scan() {
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
        self.lookup_rule(key).map(|r| r.id)
    }

    fn lookup_batch(&self, keys: &[FlowKey], out: &mut [Option<RuleId>]) {
        assert!(out.len() >= keys.len(), "lookup_batch: output shorter than input");
        for chunk_start in (0..keys.len()).step_by(64) {
            let chunk = &keys[chunk_start..keys.len().min(chunk_start + 64)];
            let out = &mut out[chunk_start..chunk_start + chunk.len()];
            out.fill(None);
            let mut pending: u64 = if chunk.len() == 64 { u64::MAX } else { (1u64 << chunk.len()) - 1 };
            'blocks: for b in &self.blocks {
                for (i, e) in b.entries.iter().enumerate() {
                    let mut bits = pending;
                    while bits != 0 {
                        let j = bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        if self.entry_matches(e, &chunk[j]) {
                            out[j] = Some(b.ids[i]);
                            pending &= !(1u64 << j);
                        }
                    }
                    if pending == 0 {
                        break 'blocks;
                    }
                }
            }
        }
    }

    fn insert(&mut self, rule: Rule) -> Result<(), ClassifierError> {
        if self.present.contains_key(&rule.id) {
            return Err(ClassifierError::DuplicateId(rule.id));
        }
        if self.blocks.is_empty() {
            self.blocks.push(Block::default());
        }
        let (b, at) = self.locate(rule.rank());
        let e = CompactMatch::new(&rule.matches, &mut self.extras);
        self.present.insert(rule.id, rule.priority);
        let blk = &mut self.blocks[b];
        blk.entries.insert(at, e);
        blk.ids.insert(at, rule.id);
        blk.rules.insert(at, rule);
        if blk.rules.len() > self.block_max {
            let half = blk.rules.len() / 2;
            let tail = blk.split_off(half);
            self.blocks.insert(b + 1, tail);
        }
        Ok(())
    }

    fn remove(&mut self, id: RuleId) -> Option<Rule> {
        let priority = self.present.remove(&id)?;
        let (b, at) = self.locate((std::cmp::Reverse(priority), id));
        let blk = &mut self.blocks[b];
        debug_assert_eq!(blk.ids[at], id);
        blk.entries.remove(at).release(&mut self.extras);
        blk.ids.remove(at);
        let rule = blk.rules.remove(at);
        if blk.rules.is_empty() {
            self.blocks.remove(b);
        }
        Some(rule)
    }

    fn len(&self) -> usize {
        self.present.len()
    }

    fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        size_of::<Self>()
            + self.blocks.capacity() * size_of::<Block>()
            + self
                .blocks
                .iter()
                .map(|b| {
                    b.rules.capacity() * size_of::<Rule>()
                        + b.entries.capacity() * size_of::<CompactMatch>()
                        + b.ids.capacity() * size_of::<RuleId>()
                })
                .sum::<usize>()
            + self.extras.memory_bytes()
            + self.present.capacity() * (size_of::<RuleId>() + size_of::<u32>() + 1)
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

        /// Tiny blocks, so inserts split blocks and removes empty them.
        #[test]
        fn differential_with_small_blocks(case in testing::arb_case(), block in 2usize..5) {
            testing::check_differential(&case, |rules| Box::new(Reference::build_with_blocks(rules, block).unwrap()))?;
        }

        #[test]
        fn remainder_lookups_small_blocks(case in testing::arb_case(), block in 2usize..5) {
            testing::check_remainder(&case, &Reference::build_with_blocks(&case.rules, block).unwrap())?;
        }

        #[test]
        fn remainder_lookups(case in testing::arb_case()) {
            testing::check_remainder(&case, &Reference::build(&case.rules).unwrap())?;
        }
    }

    /// Blocks split and vanish as rules come and go; order, `rule` and `len` stay right.
    #[test]
    fn blocks_split_and_empty() {
        let rule = |id: u32, prio: u32| Rule::new(id, prio, Match::ANY, Actions::drop());
        let mut r = Reference::build_with_blocks(&[], 3).unwrap();
        for id in 0..20 {
            r.insert(rule(id, id % 4)).unwrap();
        }
        assert!(r.blocks.len() > 5 && r.blocks.iter().all(|b| !b.rules.is_empty() && b.rules.len() <= 3));
        let ranks: Vec<_> = r.rules().map(|x| x.rank()).collect();
        assert!(ranks.windows(2).all(|w| w[0] < w[1]), "winner order");
        assert_eq!(r.lookup(&FlowKey::default()), Some(RuleId(3)), "highest priority, lowest id");
        for id in 0..20 {
            assert_eq!(r.rule(RuleId(id)).map(|x| x.id), Some(RuleId(id)));
        }
        for id in (0..20).filter(|id| id % 3 != 0) {
            assert_eq!(r.remove(RuleId(id)).map(|x| x.id), Some(RuleId(id)));
        }
        assert_eq!(r.len(), 7);
        assert!(r.blocks.iter().all(|b| !b.rules.is_empty()));
        assert_eq!(r.rules().map(|x| x.id.0).collect::<Vec<_>>(), vec![3, 15, 6, 18, 9, 0, 12]);
        assert_eq!(r.rule(RuleId(1)), None);
    }

    #[test]
    fn duplicate_ids_are_refused() {
        let rules = vec![Rule::new(1, 1, Match::ANY, Actions::drop()), Rule::new(1, 2, Match::ANY, Actions::drop())];
        assert_eq!(Reference::build(&rules).unwrap_err(), ClassifierError::DuplicateId(RuleId(1)));
    }
}
