//! `StoredRule`: a rule as a classifier keeps it for its updates (to move it between tables, to
//! hand it back on `remove`), with its match in OVS's *minimatch* form: only the words of the
//! packed key ([`FlowKey::to_words`]) that the mask uses are stored, value and mask side by side.
//!
//! A [`Match`] holds two whole [`FlowKey`]s (value and mask, 224 bytes) whatever it uses; a
//! 5-tuple rule uses three of their fifteen words (addresses, ports, `dl_type` and protocol), so
//! its stored match is those three value/mask pairs (48 bytes) and the port ranges. A rule over
//! wide fields (IPv6, metadata, ARP) stores the wide words it uses, and nothing else changes:
//! [`StoredRule::to_rule`] gives back the rule bit for bit.

use rqvs_flow::key::{word_map, KeyWords, KEY_WORDS};
use rqvs_flow::{Actions, FlowKey, Match, PortRange, Rule, RuleId};
use std::sync::Arc;

use crate::compact::Candidate;

/// A match stored as the words its mask uses (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MiniMatch {
    /// Bit `i`: word `i` of the packed mask is not zero (OVS's miniflow map).
    map: u16,
    /// `tp_src` range (lo, hi), then `tp_dst` range.
    ranges: [u16; 4],
    /// For each word of `map`, lowest first: the value word, then the mask word.
    words: Box<[u64]>,
}

impl MiniMatch {
    pub(crate) fn new(m: &Match) -> MiniMatch {
        let (v, k) = (m.value().to_words(), m.mask().to_words());
        let map = word_map(&k);
        let mut words = Vec::with_capacity(2 * map.count_ones() as usize);
        for i in (0..KEY_WORDS).filter(|&i| map & 1 << i != 0) {
            // A match's value has no bit outside its mask, so the value's other words are zero.
            words.push(v[i]);
            words.push(k[i]);
        }
        let (s, d) = (m.tp_src_range(), m.tp_dst_range());
        MiniMatch { map, ranges: [s.lo, s.hi, d.lo, d.hi], words: words.into_boxed_slice() }
    }

    /// The match this was made from.
    pub(crate) fn to_match(&self) -> Match {
        let mut v: KeyWords = [0; KEY_WORDS];
        let mut k: KeyWords = [0; KEY_WORDS];
        for (n, i) in (0..KEY_WORDS).filter(|&i| self.map & 1 << i != 0).enumerate() {
            v[i] = self.words[2 * n];
            k[i] = self.words[2 * n + 1];
        }
        let [sl, sh, dl, dh] = self.ranges;
        Match::new(
            FlowKey::from_words(&v),
            FlowKey::from_words(&k),
            PortRange { lo: sl, hi: sh },
            PortRange { lo: dl, hi: dh },
        )
        .expect("a stored match was a valid match")
    }

    /// Bytes on the heap (the words).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.words.len() * std::mem::size_of::<u64>()
    }
}

/// A rule with its match as a [`MiniMatch`]; actions, cookie and table, when any is not the
/// common case (`drop`, 0, 0: every ClassBench rule), in a box of their own.
#[derive(Clone, Debug)]
pub(crate) struct StoredRule {
    pub(crate) id: RuleId,
    pub(crate) priority: u32,
    pub(crate) matches: MiniMatch,
    rest: Option<Box<(Actions, u64, u8)>>,
}

impl StoredRule {
    pub(crate) fn new(rule: Rule) -> StoredRule {
        // Every member named: a member added to `Rule` must be stored here too.
        let Rule { id, priority, matches, actions, cookie, table } = rule;
        let common = actions.0 == [rqvs_flow::Action::Drop] && cookie == 0 && table == 0;
        let rest = (!common).then(|| Box::new((actions, cookie, table)));
        StoredRule { id, priority, matches: MiniMatch::new(&matches), rest }
    }

    /// The rule this was made from.
    pub(crate) fn to_rule(&self) -> Rule {
        let (actions, cookie, table) = self.rest.as_deref().cloned().unwrap_or_else(|| (Actions::drop(), 0, 0));
        Rule { id: self.id, priority: self.priority, matches: self.matches.to_match(), actions, cookie, table }
    }

    /// Bytes on the heap: the match's words and, when boxed, actions, cookie and table.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.matches.heap_bytes()
            + self.rest.as_ref().map_or(0, |r| {
                std::mem::size_of::<(Actions, u64, u8)>()
                    + r.0 .0.capacity() * std::mem::size_of::<rqvs_flow::rule::Action>()
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use proptest::prelude::*;

    #[test]
    fn sizes() {
        assert_eq!(std::mem::size_of::<StoredRule>(), 48);
        let mut r = Rule::new(1, 2, Match::ANY, Actions(vec![rqvs_flow::Action::Output(3)]));
        r.cookie = 7;
        r.table = 2;
        assert_eq!(StoredRule::new(r.clone()).to_rule(), r);
        for actions in [Actions::default(), Actions::drop()] {
            let r = Rule::new(1, 2, Match::ANY, actions);
            assert_eq!(StoredRule::new(r.clone()).to_rule(), r);
        }
        assert!(StoredRule::new(Rule::new(1, 2, Match::ANY, Actions::drop())).rest.is_none());
    }

    #[test]
    fn a_five_tuple_rule_stores_three_words() {
        let rules = rqvs_flow::formats::classbench::parse_rules(
            "t",
            "@10.1.2.0/24\t192.168.0.0/16\t1024 : 2047\t80 : 80\t0x06/0xFF\t0x0000/0x0000\t\n",
        )
        .unwrap();
        let s = StoredRule::new(rules[0].clone());
        assert_eq!(s.matches.words.len(), 2 * s.matches.map.count_ones() as usize);
        assert!(s.matches.map.count_ones() <= 3, "map {:#x}", s.matches.map);
        assert_eq!(s.to_rule(), rules[0]);
    }

    proptest! {
        /// Every rule of the differential generator (wide fields, masks and ranges included)
        /// comes back bit for bit.
        #[test]
        fn stored_rules_round_trip(case in testing::arb_case()) {
            for r in &case.rules {
                let back = StoredRule::new(r.clone()).to_rule();
                prop_assert_eq!(&back, r);
            }
        }

        #[test]
        fn wide_matches_round_trip(
            ctx in 0u8..30,
            picks in proptest::collection::vec(any::<(bool, u128, u128, u8)>(), rqvs_flow::field::FIELDS.len()),
        ) {
            let r = Rule::new(3, 9, rqvs_testkit::wide_match(ctx, &picks), Actions::drop());
            prop_assert_eq!(StoredRule::new(r.clone()).to_rule(), r);
        }
    }
}

/// A rule as a remainder holds it, handed out without being made whole: its stored form shared,
/// or a copy of the candidate that holds all of it ([`HeldRule::to_rule`] makes it whole).
#[derive(Clone)]
pub struct HeldRule(pub(crate) Held);

#[derive(Clone)]
pub(crate) enum Held {
    Stored(Arc<StoredRule>),
    Candidate(Candidate),
}

impl HeldRule {
    /// The rule, whole.
    pub fn to_rule(&self) -> Rule {
        match &self.0 {
            Held::Stored(s) => s.to_rule(),
            Held::Candidate(c) => c.whole_rule().expect("a candidate is handed out only when it holds its rule whole"),
        }
    }

    /// The stored form, when the rule is held in one.
    pub(crate) fn stored(&self) -> Option<&Arc<StoredRule>> {
        match &self.0 {
            Held::Stored(s) => Some(s),
            Held::Candidate(_) => None,
        }
    }
}
