//! `OfprotoClassifier`: the OpenFlow slow path with wildcard tracking, after Open vSwitch 3.1's
//! `lib/classifier.c` (semantics read there, code written here).
//!
//! A packet's lookup returns the winning rule **and** the wildcards: every header bit the lookup
//! had to examine. Those bits, plus the fields OVS's translation always examines
//! ([`megaflow`]), are the mask of the megaflow the datapath installs for the packet. How few bits
//! a lookup examines decides how many megaflows and masks the fast path holds, so the search is
//! OVS's, step by step:
//!
//! - **Subtables by priority.** Rules sharing one mask form a subtable; subtables are searched in
//!   descending order of their highest priority (ties keep creation order, as OVS's stable
//!   priority vector does). The search stops at the first subtable whose highest priority is not
//!   above the best match found so far, and a subtable the search does not reach adds no bits.
//! - **Staged lookup** ([`subtable`]): each subtable checks metadata, then L2, then L3, then L4,
//!   stopping at the first stage no rule of it agrees with; later stages add no bits.
//! - **Prefix tries** ([`trie`]) on the table's prefix fields ([`prefixes`], OVS's
//!   `Flow_Table:prefixes`: by default `nw_dst` and `nw_src`, in that order; up to three of
//!   `nw_src`, `nw_dst`, `ipv6_src`, `ipv6_dst`, or none): a subtable whose prefix on the field
//!   cannot match is skipped after examining only as many leading address bits as rule out the
//!   longer prefixes; and a per-subtable trie over the ports does the same for the final stage.
//!
//! **Tables.** Rules carry an OpenFlow table id; each table is its own classifier with its own
//! tries. [`OfprotoClassifier::lookup_wc`] and the [`Classifier`] trait look up table 0 (the
//! pipeline — `goto_table`, `resubmit` — is not executed yet);
//! [`OfprotoClassifier::lookup_wc_in_table`] looks up any table.
//!
//! **Port ranges.** OpenFlow has none; a rule with port ranges (a ClassBench rule) is held as the
//! exact prefix expansion of its ranges, every part with the rule's id and priority. To compare
//! with OVS, convert the set first (`rqvs_flow::convert::classbench_to_openflow`), as OVS holds
//! what was converted.
//!
//! **Equal priorities.** OVS leaves the winner among overlapping rules of equal priority
//! undefined (its search stops at the first subtable whose highest priority is not above the
//! best match's). rqvs's winner rule is the lowest id. While the table holds no pair of
//! overlapping rules of equal priority (tracked on every insert and remove; ClassBench
//! conversions and sets with distinct priorities never do), the search is exactly OVS's. When it
//! does, the search also visits subtables whose highest priority equals the best match's and that
//! hold a lower id at that priority: the winner follows rqvs's rule, and megaflows can be more
//! specific than OVS's — where OVS's answer is undefined anyway.
//!
//! Not modelled: conjunctive matches, rule versions (concurrent updates), OVS's hash collisions
//! in stage indices (which can only add bits in OVS), and the fields rqvs keys do not carry
//! (tunnel, connection tracking, registers, MPLS).

pub mod megaflow;
pub mod prefixes;
pub mod subtable;
pub mod trie;

use std::collections::BTreeMap;

use hashbrown::HashMap;

use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::classifier::{Classifier, ClassifierError};
pub use megaflow::{format_flow, format_megaflow, format_packet, format_tcp_flags, Megaflow};
use prefixes::Tries;
pub use prefixes::{
    default_prefix_fields, set_default_prefix_fields, PrefixField, PrefixFields, PrefixFieldsError, MAX_PREFIX_FIELDS,
};
use subtable::{Entry, Subtable, TrieCtx};
pub use trie::{PrefixTrie, TrieKey, TrieLookup};

/// A lookup's result: the winning rule and the wildcards the classifier examined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lookup {
    pub rule: Option<RuleId>,
    /// The bits examined (a mask). Without OVS's translation additions: see [`Lookup::megaflow`].
    pub wildcards: FlowKey,
    /// Subtables searched (a measure of lookup cost).
    pub subtables_searched: u32,
}

impl Lookup {
    /// The megaflow this lookup creates for `key`.
    pub fn megaflow(&self, key: &FlowKey) -> Megaflow {
        Megaflow::from_wildcards(key, &self.wildcards)
    }
}

/// Where one part (one port-range expansion) of a rule is held.
#[derive(Clone, Copy, Debug)]
struct Part {
    subtable: usize,
    value: FlowKey,
}

/// One OpenFlow table.
#[derive(Clone, Debug, Default)]
pub struct OfTable {
    subtables: Vec<Option<Subtable>>,
    free: Vec<usize>,
    by_mask: HashMap<FlowKey, usize>,
    /// Live subtables in search order, each with what a lookup reads before touching it.
    order: Vec<Hot>,
    /// The classifier-wide tries, one per prefix field.
    tries: Tries,
    rules: HashMap<RuleId, (Rule, Vec<Part>)>,
    /// Every rule's parts, grouped by priority: what finds a new rule's overlapping equals.
    by_priority: HashMap<u32, Peers>,
    /// Rules with an overlapping rule of equal priority, and those rules. Empty in every set
    /// whose equal priorities never overlap (the case where the search is exactly OVS's).
    tied: HashMap<RuleId, Vec<RuleId>>,
    /// Pairs of overlapping rules of equal priority (each pair once).
    tied_overlaps: usize,
    next_seq: u64,
    /// Parts of every rule (its port ranges expanded), at most [`MAX_EXPANDED`].
    parts: usize,
}

/// A live subtable as the search order holds it: what a lookup reads to pass it by or rule it
/// out — its best rank, and its prefix lengths when the tries are its first check — without
/// touching the subtable itself (a few hundred bytes elsewhere; reading its stage list was about
/// a tenth of `find_wc`'s time in a profile of acl1_100k's upcalls, though paired runs showed no
/// measurable change in lookup rate: docs/openflow-bench.md).
#[derive(Clone, Copy, Debug)]
struct Hot {
    subtable: u32,
    /// The subtable's best rank ([`Subtable::best_rank`]; live subtables are never empty).
    best: (std::cmp::Reverse<u32>, RuleId),
    /// The subtable's prefix lengths ([`Subtable::trie_plen`]) when [`Subtable::tries_first`],
    /// else `None` (the subtable checks the tries itself, after its earlier stages).
    tries_first: Option<[u32; MAX_PREFIX_FIELDS]>,
}

impl Hot {
    fn of(si: usize, st: &Subtable) -> Hot {
        Hot {
            subtable: si as u32,
            best: st.best_rank().expect("a live subtable holds a rule"),
            tries_first: st.tries_first().then_some(st.trie_plen),
        }
    }

    fn max_priority(&self) -> u32 {
        self.best.0 .0
    }
}

/// The most parts (rules with their port ranges expanded to prefixes) one table holds: a rule of
/// two wide port ranges makes up to 30 × 30 parts, each a few hundred bytes in subtables, tries
/// and peers, so a set of 10K such rules would take gigabytes. Rqvs's OpenFlow conversion has
/// the same limit ([`rqvs_flow::convert::MAX_FLOWS`]).
pub const MAX_EXPANDED: usize = rqvs_flow::convert::MAX_FLOWS;

/// The parts of the rules of one priority, by the masks of their addresses, then by mask, then
/// by (masked) value.
///
/// Two value/mask parts overlap when their values agree on the bits both masks specify. The
/// candidates are the values that agree on the leading address bits both masks specify: within
/// one class of parts (the same `nw_src` and `nw_dst` masks, whatever their other fields) those
/// bits are the same for every part, so the candidates are one range of the class's values
/// sorted source-first or destination-first (whichever the common mask covers more of), each
/// then compared word by word. Only a part wildcarding the leading bits of both addresses scans
/// a whole class. A flow-mod thus costs one range lookup per address class of its priority, not
/// one per mask: acl1 100K's 136K flows hold 98K at one priority, whose masks differ mostly in
/// their ports and protocol.
#[derive(Clone, Debug, Default)]
struct Peers {
    classes: HashMap<(u32, u32), PeerClass>,
}

#[derive(Clone, Debug, Default)]
struct PeerClass {
    /// Rules by value, per mask; a slot of a mask no part holds any more is reused.
    groups: Vec<PeerGroup>,
    by_mask: HashMap<FlowKey, u32>,
    free: Vec<u32>,
    /// `(group, value)` of every group's values by `nw_src:nw_dst` and by `nw_dst:nw_src`.
    by_addrs: [BTreeMap<u64, Vec<(u32, FlowKey)>>; 2],
}

#[derive(Clone, Debug, Default)]
struct PeerGroup {
    mask_words: rqvs_flow::key::KeyWords,
    by_value: HashMap<FlowKey, Vec<RuleId>>,
}

impl Peers {
    /// Rules (other than `id`) with a part overlapping `value`/`mask`, added to `out` once each.
    fn overlapping(&self, id: RuleId, value: &FlowKey, mask: &FlowKey, out: &mut Vec<RuleId>) {
        let mut push = |ids: &[RuleId]| {
            for &o in ids {
                if o != id && !out.contains(&o) {
                    out.push(o);
                }
            }
        };
        let vw = value.to_words();
        let mw = mask.to_words();
        for (&(src, dst), class) in &self.classes {
            let mut common = FlowKey::ZERO;
            common.nw_src = mask.nw_src & src;
            common.nw_dst = mask.nw_dst & dst;
            let (dst_first, range) = value.addr_range(&common);
            for entries in class.by_addrs[usize::from(dst_first)].range(range).map(|(_, e)| e) {
                for (g, v2) in entries {
                    let group = &class.groups[*g as usize];
                    let v2w = v2.to_words();
                    if (0..rqvs_flow::key::KEY_WORDS).all(|i| (vw[i] ^ v2w[i]) & mw[i] & group.mask_words[i] == 0) {
                        push(&group.by_value[v2]);
                    }
                }
            }
        }
    }

    fn insert(&mut self, id: RuleId, value: FlowKey, mask: FlowKey) {
        let class = self.classes.entry((mask.nw_src, mask.nw_dst)).or_default();
        let g = match class.by_mask.get(&mask) {
            Some(&g) => g,
            None => {
                let group = PeerGroup { mask_words: mask.to_words(), by_value: HashMap::new() };
                let g = match class.free.pop() {
                    Some(g) => {
                        class.groups[g as usize] = group;
                        g
                    }
                    None => {
                        class.groups.push(group);
                        (class.groups.len() - 1) as u32
                    }
                };
                class.by_mask.insert(mask, g);
                g
            }
        };
        let ids = class.groups[g as usize].by_value.entry(value).or_default();
        if ids.is_empty() {
            for (order, index) in class.by_addrs.iter_mut().enumerate() {
                index.entry(value.addr_key(order == 1)).or_default().push((g, value));
            }
        }
        ids.push(id);
    }

    fn remove(&mut self, id: RuleId, value: &FlowKey, mask: &FlowKey) {
        let key = (mask.nw_src, mask.nw_dst);
        let Some(class) = self.classes.get_mut(&key) else { return };
        let Some(&g) = class.by_mask.get(mask) else { return };
        let group = &mut class.groups[g as usize];
        if let Some(ids) = group.by_value.get_mut(value) {
            ids.retain(|&o| o != id);
            if ids.is_empty() {
                group.by_value.remove(value);
                for (order, index) in class.by_addrs.iter_mut().enumerate() {
                    let k = value.addr_key(order == 1);
                    if let Some(entries) = index.get_mut(&k) {
                        entries.retain(|(eg, v)| !(*eg == g && v == value));
                        if entries.is_empty() {
                            index.remove(&k);
                        }
                    }
                }
            }
        }
        if class.groups[g as usize].by_value.is_empty() {
            class.by_mask.remove(mask);
            class.groups[g as usize] = PeerGroup::default();
            class.free.push(g);
        }
        if class.by_mask.is_empty() {
            self.classes.remove(&key);
        }
    }

    fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }
}

impl OfTable {
    fn insert(&mut self, rule: Rule) -> Result<(), ClassifierError> {
        if self.rules.contains_key(&rule.id) {
            return Err(ClassifierError::DuplicateId(rule.id));
        }
        let entry = Entry { priority: rule.priority, id: rule.id };
        let mut parts = Vec::new();
        let expanded = rule.matches.expand_port_ranges();
        if self.parts + expanded.len() > MAX_EXPANDED {
            return Err(ClassifierError::Unsupported(
                rule.id,
                format!(
                    "its port ranges expand to {} prefixes, past the limit of {MAX_EXPANDED} expanded entries in one table ({} already)",
                    expanded.len(),
                    self.parts
                ),
            ));
        }
        self.parts += expanded.len();
        let peers = self.by_priority.entry(rule.priority).or_default();
        let mut overlapping = Vec::new();
        for m in &expanded {
            peers.overlapping(rule.id, m.value(), m.mask(), &mut overlapping);
        }
        for m in &expanded {
            peers.insert(rule.id, *m.value(), *m.mask());
        }
        if !overlapping.is_empty() {
            self.tied_overlaps += overlapping.len();
            for &o in &overlapping {
                self.tied.entry(o).or_default().push(rule.id);
            }
            self.tied.insert(rule.id, overlapping);
        }
        for m in expanded {
            let mask = *m.mask();
            let value = *m.value();
            let si = match self.by_mask.get(&mask) {
                Some(&si) => si,
                None => self.create_subtable(mask),
            };
            let st = self.subtables[si].as_mut().expect("live subtable");
            for (j, plen) in st.trie_plen.into_iter().enumerate() {
                if plen > 0 {
                    self.tries.insert(j, &value, plen);
                }
            }
            st.insert(value, entry);
            parts.push(Part { subtable: si, value });
            self.refresh(si);
        }
        self.rules.insert(rule.id, (rule, parts));
        self.resort();
        Ok(())
    }

    fn remove(&mut self, id: RuleId) -> Option<Rule> {
        let (rule, parts) = self.rules.remove(&id)?;
        self.parts -= parts.len();
        let entry = Entry { priority: rule.priority, id };
        for p in parts {
            let st = self.subtables[p.subtable].as_mut().expect("live subtable");
            st.remove(p.value, entry);
            for (j, plen) in st.trie_plen.into_iter().enumerate() {
                if plen > 0 {
                    self.tries.remove(j, &p.value, plen);
                }
            }
            if st.is_empty() {
                let mask = st.mask;
                self.subtables[p.subtable] = None;
                self.by_mask.remove(&mask);
                self.order.retain(|h| h.subtable as usize != p.subtable);
                self.free.push(p.subtable);
            } else {
                self.refresh(p.subtable);
            }
        }
        let peers = self.by_priority.get_mut(&rule.priority).expect("priority group");
        for m in rule.matches.expand_port_ranges() {
            peers.remove(id, m.value(), m.mask());
        }
        if peers.is_empty() {
            self.by_priority.remove(&rule.priority);
        }
        for o in self.tied.remove(&id).unwrap_or_default() {
            self.tied_overlaps -= 1;
            if let Some(list) = self.tied.get_mut(&o) {
                list.retain(|&r| r != id);
                if list.is_empty() {
                    self.tied.remove(&o);
                }
            }
        }
        self.resort();
        Some(rule)
    }

    fn create_subtable(&mut self, mask: FlowKey) -> usize {
        let st = Subtable::new(mask, self.next_seq, &self.tries.fields);
        self.next_seq += 1;
        let si = match self.free.pop() {
            Some(si) => {
                self.subtables[si] = Some(st);
                si
            }
            None => {
                self.subtables.push(Some(st));
                self.subtables.len() - 1
            }
        };
        self.by_mask.insert(mask, si);
        // Its entry in the search order comes with its first rule (`refresh`).
        si
    }

    /// Brings subtable `si`'s entry in the search order up to date with it (appending one for a
    /// new subtable); [`OfTable::resort`] then puts it in its place.
    fn refresh(&mut self, si: usize) {
        let hot = Hot::of(si, self.subtables[si].as_ref().expect("live subtable"));
        match self.order.iter_mut().find(|h| h.subtable as usize == si) {
            Some(h) => *h = hot,
            None => self.order.push(hot),
        }
    }

    /// Stable sort by descending highest priority: a new subtable comes after existing ones of
    /// the same priority, as in OVS's priority vector (appended, then stably sorted). The order
    /// is sorted but for the entries just refreshed, which the adaptive sort takes in linear time.
    fn resort(&mut self) {
        self.order.sort_by_key(|h| std::cmp::Reverse(h.max_priority()));
    }

    fn lookup_wc(&self, key: &FlowKey) -> Lookup {
        let mut wc = FlowKey::default();
        let mut ctx = TrieCtx::default();
        let mut best: Option<Entry> = None;
        let mut searched = 0;
        let kw = key.to_words();
        for h in &self.order {
            if let Some(b) = best {
                let max = h.max_priority();
                if max < b.priority {
                    break;
                }
                if max == b.priority {
                    if self.tied_overlaps == 0 {
                        break; // OVS: stop at the first subtable not above the best match.
                    }
                    if h.best >= b.rank() {
                        continue;
                    }
                }
            }
            searched += 1;
            // The tries first, from the order's entry: a subtable they rule out is not touched.
            if let Some(plen) = &h.tries_first {
                if subtable::check_tries(plen, key, &self.tries, &mut ctx, &mut wc) {
                    continue;
                }
            }
            let st = self.subtables[h.subtable as usize].as_ref().expect("live subtable");
            if let Some(e) = st.find_wc(key, &kw, &self.tries, &mut ctx, &mut wc, h.tries_first.is_some()) {
                match best {
                    Some(b) if b.rank() <= e.rank() => {}
                    _ => best = Some(e),
                }
            }
        }
        Lookup { rule: best.map(|e| e.id), wildcards: wc, subtables_searched: searched }
    }

    fn memory_bytes(&self) -> usize {
        let st: usize = self.subtables.iter().flatten().map(Subtable::memory_bytes).sum();
        let rules = self.rules.capacity() * (std::mem::size_of::<Rule>() + 64)
            + self.rules.values().map(|(_, p)| p.capacity() * std::mem::size_of::<Part>()).sum::<usize>();
        st + rules + self.tries.memory_bytes() + self.order.capacity() * std::mem::size_of::<Hot>()
    }

    fn new(prefixes: PrefixFields) -> OfTable {
        OfTable { tries: Tries::new(prefixes), ..OfTable::default() }
    }

    /// Rebuilds the tries for new prefix fields (OVS's `classifier_set_prefix_fields`: every
    /// subtable's prefix lengths recomputed, every rule re-inserted into the new tries).
    fn set_prefix_fields(&mut self, prefixes: PrefixFields) {
        self.tries = Tries::new(prefixes);
        for st in self.subtables.iter_mut().flatten() {
            st.set_prefix_fields(&prefixes);
        }
        for h in &mut self.order {
            *h = Hot::of(h.subtable as usize, self.subtables[h.subtable as usize].as_ref().expect("live subtable"));
        }
        for (_, parts) in self.rules.values() {
            for p in parts {
                let st = self.subtables[p.subtable].as_ref().expect("live subtable");
                for (j, plen) in st.trie_plen.into_iter().enumerate() {
                    if plen > 0 {
                        self.tries.insert(j, &p.value, plen);
                    }
                }
            }
        }
    }
}

/// The OpenFlow tables of one bridge, looked up with wildcard tracking (module docs).
#[derive(Clone, Debug)]
pub struct OfprotoClassifier {
    /// Indexed by table id; tables are created on first use.
    tables: Vec<OfTable>,
    len: usize,
    /// The prefix fields of every table without one of its own.
    prefixes: PrefixFields,
    /// Tables with prefix fields of their own ([`OfprotoClassifier::set_table_prefix_fields`]).
    own: Vec<(u8, PrefixFields)>,
}

impl Default for OfprotoClassifier {
    /// An empty classifier with the process's default prefix fields
    /// ([`default_prefix_fields`]).
    fn default() -> Self {
        OfprotoClassifier::with_prefix_fields(default_prefix_fields())
    }
}

impl OfprotoClassifier {
    /// An empty classifier with the process's default prefix fields
    /// ([`default_prefix_fields`]: OVS's `nw_dst,nw_src` unless the process set others).
    pub fn new() -> OfprotoClassifier {
        OfprotoClassifier::default()
    }

    /// An empty classifier with prefix tries on `prefixes`.
    pub fn with_prefix_fields(prefixes: PrefixFields) -> OfprotoClassifier {
        OfprotoClassifier { tables: Vec::new(), len: 0, prefixes, own: Vec::new() }
    }

    /// The prefix fields of table `table`.
    pub fn table_prefix_fields(&self, table: u8) -> PrefixFields {
        self.own.iter().find(|(t, _)| *t == table).map_or(self.prefixes, |(_, p)| *p)
    }

    /// Sets the prefix fields of one table (OVS's `Flow_Table:prefixes` of that table's row),
    /// rebuilding its tries; [`OfprotoClassifier::set_prefix_fields`] no longer changes them.
    pub fn set_table_prefix_fields(&mut self, table: u8, prefixes: PrefixFields) {
        match self.own.iter_mut().find(|(t, _)| *t == table) {
            Some((_, p)) => *p = prefixes,
            None => self.own.push((table, prefixes)),
        }
        if let Some(t) = self.tables.get_mut(usize::from(table)) {
            if t.tries.fields != prefixes {
                t.set_prefix_fields(prefixes);
            }
        }
    }

    /// The prefix fields of every table without prefix fields of its own.
    pub fn prefix_fields(&self) -> PrefixFields {
        self.prefixes
    }

    /// Sets the prefix fields of every table (OVS's `Flow_Table:prefixes`, here for all tables
    /// at once), rebuilding the tries of the rules held. Lookups afterwards examine the bits the
    /// new tries need; the matched rules do not change.
    pub fn set_prefix_fields(&mut self, prefixes: PrefixFields) {
        if prefixes == self.prefixes {
            return;
        }
        self.prefixes = prefixes;
        let own = &self.own;
        for (i, t) in self.tables.iter_mut().enumerate() {
            if !own.iter().any(|(o, _)| usize::from(*o) == i) {
                t.set_prefix_fields(prefixes);
            }
        }
    }

    /// A classifier holding `rules` (inserted in the given order, as `ovs-ofctl add-flows` does).
    pub fn build(rules: &[Rule]) -> Result<OfprotoClassifier, ClassifierError> {
        OfprotoClassifier::build_with_prefix_fields(rules, default_prefix_fields())
    }

    /// [`OfprotoClassifier::build`] with prefix tries on `prefixes`.
    pub fn build_with_prefix_fields(
        rules: &[Rule],
        prefixes: PrefixFields,
    ) -> Result<OfprotoClassifier, ClassifierError> {
        let mut c = OfprotoClassifier::with_prefix_fields(prefixes);
        for r in rules {
            c.insert(r.clone())?;
        }
        Ok(c)
    }

    /// Looks `key` up in table 0: the winning rule and the wildcards.
    pub fn lookup_wc(&self, key: &FlowKey) -> Lookup {
        self.lookup_wc_in_table(0, key)
    }

    /// Looks `key` up in one table (an absent table matches nothing and examines nothing).
    pub fn lookup_wc_in_table(&self, table: u8, key: &FlowKey) -> Lookup {
        match self.tables.get(usize::from(table)) {
            Some(t) => t.lookup_wc(key),
            None => Lookup { rule: None, wildcards: FlowKey::default(), subtables_searched: 0 },
        }
    }

    /// The rule with this id, if held.
    pub fn rule(&self, id: RuleId) -> Option<&Rule> {
        self.tables.iter().find_map(|t| t.rules.get(&id).map(|(r, _)| r))
    }

    /// The rule with this id in table `table`, if held there.
    pub fn rule_in_table(&self, table: u8, id: RuleId) -> Option<&Rule> {
        self.tables.get(usize::from(table)).and_then(|t| t.rules.get(&id)).map(|(r, _)| r)
    }

    /// The rules of table `table`, in no order.
    pub fn rules_in_table(&self, table: u8) -> impl Iterator<Item = &Rule> {
        self.tables.get(usize::from(table)).into_iter().flat_map(|t| t.rules.values().map(|(r, _)| r))
    }

    /// Pairs of overlapping rules of equal priority in a table: while 0, every lookup in it is
    /// exactly OVS's (module docs, "Equal priorities").
    pub fn tied_overlaps(&self, table: u8) -> usize {
        self.tables.get(usize::from(table)).map_or(0, |t| t.tied_overlaps)
    }

    /// Number of subtables (distinct masks) in a table.
    pub fn subtables(&self, table: u8) -> usize {
        self.tables.get(usize::from(table)).map_or(0, |t| t.order.len())
    }

    fn table_of(&self, id: RuleId) -> Option<usize> {
        self.tables.iter().position(|t| t.rules.contains_key(&id))
    }
}

impl Classifier for OfprotoClassifier {
    fn name(&self) -> &'static str {
        "ofproto"
    }

    fn lookup(&self, key: &FlowKey) -> Option<RuleId> {
        self.lookup_wc(key).rule
    }

    fn insert(&mut self, rule: Rule) -> Result<(), ClassifierError> {
        if self.table_of(rule.id).is_some() {
            return Err(ClassifierError::DuplicateId(rule.id));
        }
        let t = usize::from(rule.table);
        if self.tables.len() <= t {
            let first = self.tables.len();
            let prefixes: Vec<PrefixFields> = (first..=t).map(|i| self.table_prefix_fields(i as u8)).collect();
            self.tables.extend(prefixes.into_iter().map(OfTable::new));
        }
        self.tables[t].insert(rule)?;
        self.len += 1;
        Ok(())
    }

    fn remove(&mut self, id: RuleId) -> Option<Rule> {
        let t = self.table_of(id)?;
        let r = self.tables[t].remove(id);
        if r.is_some() {
            self.len -= 1;
        }
        r
    }

    fn len(&self) -> usize {
        self.len
    }

    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.tables.iter().map(OfTable::memory_bytes).sum::<usize>()
    }
}

#[cfg(test)]
mod table_prefix_tests {
    use super::*;

    /// A table's own prefix fields change its lookups' wildcards and no other table's; the
    /// classifier-wide setting leaves a table with its own alone; a table made later takes its
    /// own fields.
    #[test]
    fn each_table_has_its_own_prefix_fields() {
        let text = "\
table=0,priority=10,ipv6,ipv6_dst=2001:db8::/32,actions=drop
table=1,priority=10,ipv6,ipv6_dst=2001:db8::/32,actions=drop
";
        let rules = rqvs_flow::formats::ofctl::parse_flows("t", text).unwrap();
        let mut c = OfprotoClassifier::build_with_prefix_fields(&rules, PrefixFields::OVS_DEFAULT).unwrap();
        let k = FlowKey::ipv6(1, 0x2002_u128 << 112 | 1, 6, 1, 2);
        let bits = |c: &OfprotoClassifier, t: u8| c.lookup_wc_in_table(t, &k).wildcards.ipv6_dst.count_ones();
        assert_eq!((bits(&c, 0), bits(&c, 1)), (32, 32), "no IPv6 trie");
        let v6 = PrefixFields::parse("ipv6_dst").unwrap();
        c.set_table_prefix_fields(1, v6);
        assert_eq!(c.table_prefix_fields(1), v6);
        assert_eq!(bits(&c, 0), 32, "table 0 keeps the default");
        assert!(bits(&c, 1) < 32, "table 1's trie rules the prefix out with fewer bits");
        c.set_prefix_fields(PrefixFields::NONE);
        assert_eq!(c.table_prefix_fields(1), v6, "the classifier-wide setting leaves table 1 alone");
        c.set_table_prefix_fields(3, v6);
        let mut r = rules[1].clone();
        r.table = 3;
        r.id = RuleId(9);
        c.insert(r).unwrap();
        assert!(bits(&c, 3) < 32, "a table made after its setting takes it");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_flow::formats::ofctl;

    fn table(text: &str) -> OfprotoClassifier {
        OfprotoClassifier::build(&ofctl::parse_flows("t", text).unwrap()).unwrap()
    }

    /// Expectations copied from real OVS 3.1 `ofproto/trace` output on this rule set.
    #[test]
    fn ovs_examples() {
        let c = table(
            "priority=400,tcp,nw_src=10.1.0.0/16,nw_dst=192.168.2.0/24,tp_dst=0x400/0xfc00,actions=output:2\n\
             priority=300,udp,nw_dst=192.168.0.0/16,tp_src=53,actions=output:2\n\
             priority=200,icmp,icmp_type=8,actions=drop\n\
             priority=100,ip,nw_src=10.0.0.0/8,actions=output:2\n\
             priority=50,tcp,tcp_flags=+syn,actions=output:2\n\
             priority=0,actions=drop\n",
        );
        let cases: [(FlowKey, u32, &str); 5] = [
            (
                FlowKey::ipv4(0x0a01_0203, 0xc0a8_0207, 6, 1030, 1025),
                0,
                "recirc_id=0,eth,tcp,in_port=1,nw_src=10.1.0.0/16,nw_dst=192.168.2.0/24,nw_frag=no,tp_dst=0x400/0xfc00",
            ),
            (
                FlowKey { tcp_flags: 0x012, ..FlowKey::ipv4(0x0a02_0203, 0xc0a8_0307, 6, 1030, 81) },
                3,
                "recirc_id=0,eth,tcp,in_port=1,nw_src=10.0.0.0/8,nw_dst=192.168.3.0/24,nw_frag=no",
            ),
            (
                FlowKey::ipv4(0x0102_0304, 0xc0a8_0307, 17, 53, 81),
                1,
                "recirc_id=0,eth,udp,in_port=1,nw_dst=192.168.3.0/24,nw_frag=no,tp_src=53",
            ),
            (
                FlowKey::ipv4(0x0102_0304, 0x0203_0405, 47, 0, 0),
                5,
                "recirc_id=0,eth,ip,in_port=1,nw_src=0.0.0.0/5,nw_dst=0.0.0.0/1,nw_proto=47,nw_frag=no",
            ),
            (
                FlowKey::ipv4(0x0102_0304, 0x0203_0405, 1, 3, 1),
                5,
                "recirc_id=0,eth,icmp,in_port=1,nw_src=0.0.0.0/5,nw_dst=0.0.0.0/1,nw_frag=no,icmp_type=0x0/0xf8",
            ),
        ];
        for (k, rule, mf) in cases {
            let l = c.lookup_wc(&k);
            assert_eq!(l.rule, Some(RuleId(rule)), "{k:?}");
            assert_eq!(l.megaflow(&k).to_string(), mf, "{k:?}");
        }
    }

    #[test]
    fn updates_and_tables() {
        let mut c = table("priority=10,ip,nw_src=10.0.0.0/8,actions=drop\ntable=1,priority=5,ip,actions=drop\n");
        let k = FlowKey::ipv4(0x0a00_0001, 1, 6, 1, 2);
        assert_eq!(c.lookup_wc(&k).rule, Some(RuleId(0)));
        assert_eq!(c.lookup_wc_in_table(1, &k).rule, Some(RuleId(1)));
        assert_eq!(c.len(), 2);
        assert!(c.remove(RuleId(0)).is_some());
        assert_eq!(c.lookup_wc(&k).rule, None);
        assert_eq!(c.subtables(0), 0);
        assert_eq!(c.lookup_wc(&k).wildcards, FlowKey::default());
        assert!(matches!(c.insert(c.rule(RuleId(1)).unwrap().clone()), Err(ClassifierError::DuplicateId(_))));
    }
}
