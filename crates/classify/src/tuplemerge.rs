//! `TupleMerge` (Daly, Bruschi, Linguaglossa, Pontarelli, Rossi, Tollet, Torng, Yourtchenko,
//! IEEE/ACM ToN 2019): tuple space search with *relaxed* tuples, the remainder classifier of the
//! NSDI'22 paper.
//!
//! A rule's **tuple** is how many leading bits it fixes on each of five fields: nw_src (0..32),
//! nw_dst (0..32), tp_src (0..16), tp_dst (0..16) and nw_proto (0..8). A port range fixes the
//! bits its low and high ends share, so ranges need no expansion. A **table** has a tuple too and
//! accepts any rule whose tuple is at least as long on every field: it hashes the rule (and the
//! packet) on the table's shorter prefixes, so rules with different tuples share one table, and
//! every candidate found in a bucket is *validated* on all its fields (the compact match of
//! `compact.rs`, then any other field of the full match).
//!
//! - **Insert**: into the first table, in priority order, that accepts the rule's tuple. When the
//!   rule's bucket then holds more than the *collision limit* rules (default 10, as the authors'
//!   code), the table is split: the colliding rules' tuples give a longer tuple (halfway towards
//!   their common maximum on the field where they differ most), and every rule of the table that
//!   fits it moves to that table (found or made). When no table accepts the rule, a new table is
//!   made with the rule's tuple *relaxed*: if one address is more than 4 bits longer than the
//!   other, the shorter address and its port are dropped; then address lengths are shortened
//!   (32 → 28, 25..31 → −3, 17..24 → −2, 9..16 → −1).
//! - **Lookup**: tables in descending order of their highest priority; stop once the best match
//!   outranks every remaining table; inside a bucket, rules are in winner order, so the first
//!   match is the bucket's best. Lookups do no bookkeeping.
//! - **Remove**: from its table (known from the rule's record); an emptied table is removed alone.
//!
//! Unlike the authors' code, removing an emptied table does not drop the tables after it, and no
//! statistics are updated on lookups.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};

use hashbrown::HashTable;
use rqvs_flow::prefix::prefix_mask;
use rqvs_flow::{FlowKey, Match, PortRange, Rule, RuleId};

use crate::classifier::{Classifier, ClassifierError};
use crate::compact::{CompactMatch, Extras};

/// Width in bits of each hashed field: nw_src, nw_dst, tp_src, tp_dst, nw_proto.
const WIDTH: [u32; 5] = [32, 32, 16, 16, 8];
/// The authors' default collision limit.
pub const DEFAULT_COLLISION_LIMIT: usize = 10;

/// Leading bits fixed on each of the five fields.
type Tuple = [u8; 5];
type Values = [u32; 5];

/// The five hashed fields of a packet.
#[inline(always)]
fn packet_values(k: &FlowKey) -> Values {
    [k.nw_src, k.nw_dst, u32::from(k.tp_src), u32::from(k.tp_dst), u32::from(k.nw_proto)]
}

/// Leading ones of a `width`-bit mask.
fn leading_ones(mask: u32, width: u32) -> u32 {
    (mask << (32 - width)).leading_ones().min(width)
}

/// Fixed leading bits of a port field constrained by a range and a value/mask.
fn port_prefix(range: PortRange, v: u16, m: u16) -> (u32, u32) {
    let by_range = (range.lo ^ range.hi).leading_zeros(); // of a u16: 0..=16
    let by_mask = leading_ones(u32::from(m), 16);
    if by_mask >= by_range {
        (u32::from(v), by_mask)
    } else {
        (u32::from(range.lo), by_range)
    }
}

/// A rule's tuple and its values on the five fields.
fn rule_tuple(m: &Match) -> (Tuple, Values) {
    let (v, k) = (m.value(), m.mask());
    let (sp, spl) = port_prefix(m.tp_src_range(), v.tp_src, k.tp_src);
    let (dp, dpl) = port_prefix(m.tp_dst_range(), v.tp_dst, k.tp_dst);
    let lens =
        [leading_ones(k.nw_src, 32), leading_ones(k.nw_dst, 32), spl, dpl, leading_ones(u32::from(k.nw_proto), 8)];
    let values = [v.nw_src, v.nw_dst, sp, dp, u32::from(v.nw_proto)];
    (lens.map(|l| l as u8), values)
}

/// TupleMerge's relaxation of a new table's tuple (see the module docs).
fn relax(mut t: Tuple) -> Tuple {
    let (sa, da) = (i32::from(t[0]), i32::from(t[1]));
    if da - sa > 4 {
        t[0] = 0;
        t[2] = 0;
    } else if sa - da > 4 {
        t[1] = 0;
        t[3] = 0;
    }
    for a in [0, 1] {
        t[a] = match t[a] {
            32 => 28,
            l if l > 24 => l - 3,
            l if l > 16 => l - 2,
            l if l > 8 => l - 1,
            l => l,
        };
    }
    t
}

fn fits(rule: &Tuple, table: &Tuple) -> bool {
    (0..5).all(|d| rule[d] >= table[d])
}

/// One candidate rule in a bucket.
struct Candidate {
    priority: u32,
    id: RuleId,
    m: CompactMatch,
}

struct Bucket {
    key: Values,
    hash: u64,
    /// In winner order.
    rules: Vec<Candidate>,
}

struct Table {
    tuple: Tuple,
    masks: Values,
    table: HashTable<Bucket>,
    priorities: BTreeMap<u32, u32>,
    rules: usize,
}

#[inline(always)]
fn hash_values(v: &Values) -> u64 {
    let mut h: u64 = 0x243f_6a88_85a3_08d3;
    for &x in v {
        h = (h.rotate_left(23) ^ u64::from(x)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    h ^ (h >> 29)
}

impl Table {
    fn new(tuple: Tuple) -> Table {
        let masks = std::array::from_fn(|d| prefix_mask(u32::from(tuple[d]), WIDTH[d]));
        Table { tuple, masks, table: HashTable::new(), priorities: BTreeMap::new(), rules: 0 }
    }

    fn key(&self, values: &Values) -> Values {
        std::array::from_fn(|d| values[d] & self.masks[d])
    }

    fn max_priority(&self) -> u32 {
        self.priorities.keys().next_back().copied().unwrap_or(0)
    }

    /// Adds a candidate; returns the size of its bucket afterwards.
    fn add(&mut self, values: &Values, c: Candidate) -> usize {
        let key = self.key(values);
        let hash = hash_values(&key);
        *self.priorities.entry(c.priority).or_insert(0) += 1;
        self.rules += 1;
        let rank = (Reverse(c.priority), c.id);
        match self.table.find_mut(hash, |b| b.key == key) {
            Some(b) => {
                let at = b.rules.partition_point(|x| (Reverse(x.priority), x.id) < rank);
                b.rules.insert(at, c);
                b.rules.len()
            }
            None => {
                self.table.insert_unique(hash, Bucket { key, hash, rules: vec![c] }, |b| b.hash);
                1
            }
        }
    }

    /// Removes rule `id` (with these values and priority); returns its candidate.
    fn take(&mut self, values: &Values, priority: u32, id: RuleId) -> Option<Candidate> {
        let key = self.key(values);
        let hash = hash_values(&key);
        let Ok(mut entry) = self.table.find_entry(hash, |b| b.key == key) else { return None };
        let b = entry.get_mut();
        let at = b.rules.iter().position(|c| c.id == id)?;
        let c = b.rules.remove(at);
        if b.rules.is_empty() {
            entry.remove();
        }
        if let Some(n) = self.priorities.get_mut(&priority) {
            *n -= 1;
            if *n == 0 {
                self.priorities.remove(&priority);
            }
        }
        self.rules -= 1;
        Some(c)
    }

    /// Ids in the bucket the given values hash to.
    fn bucket_ids(&self, values: &Values) -> Vec<RuleId> {
        let key = self.key(values);
        self.table
            .find(hash_values(&key), |b| b.key == key)
            .map_or_else(Vec::new, |b| b.rules.iter().map(|c| c.id).collect())
    }
}

/// A rule and where it is.
struct Record {
    rule: Rule,
    tuple: Tuple,
    values: Values,
    table: u32,
}

/// TupleMerge with online insert and remove.
pub struct TupleMerge {
    tables: Vec<Option<Table>>,
    free: Vec<u32>,
    /// Live table indexes by descending max priority.
    order: Vec<u32>,
    max_priority: Vec<u32>,
    rules: HashMap<RuleId, Record>,
    extras: Extras,
    collision_limit: usize,
}

impl Default for TupleMerge {
    fn default() -> Self {
        TupleMerge::with_collision_limit(DEFAULT_COLLISION_LIMIT)
    }
}

impl TupleMerge {
    pub fn with_collision_limit(collision_limit: usize) -> TupleMerge {
        TupleMerge {
            tables: Vec::new(),
            free: Vec::new(),
            order: Vec::new(),
            max_priority: Vec::new(),
            rules: HashMap::new(),
            extras: Extras::default(),
            collision_limit: collision_limit.max(1),
        }
    }

    /// Builds by inserting rules in descending winner order (so high-priority rules shape the
    /// first tables); duplicate ids are an error.
    pub fn build(rules: &[Rule]) -> Result<TupleMerge, ClassifierError> {
        let mut sorted: Vec<&Rule> = rules.iter().collect();
        sorted.sort_by_key(|r| r.rank());
        let mut t = TupleMerge::default();
        for r in sorted {
            t.insert(r.clone())?;
        }
        Ok(t)
    }

    /// Number of tables.
    pub fn tables(&self) -> usize {
        self.order.len()
    }

    fn table(&self, i: u32) -> &Table {
        self.tables[i as usize].as_ref().expect("live table")
    }

    fn table_mut(&mut self, i: u32) -> &mut Table {
        self.tables[i as usize].as_mut().expect("live table")
    }

    fn find_or_make(&mut self, tuple: Tuple) -> u32 {
        if let Some(&i) = self.order.iter().find(|&&i| self.table(i).tuple == tuple) {
            return i;
        }
        let t = Table::new(tuple);
        let i = match self.free.pop() {
            Some(i) => {
                self.tables[i as usize] = Some(t);
                i
            }
            None => {
                self.tables.push(Some(t));
                self.max_priority.push(0);
                (self.tables.len() - 1) as u32
            }
        };
        self.order.push(i);
        i
    }

    fn reposition(&mut self, i: u32) {
        let max = self.table(i).max_priority();
        self.max_priority[i as usize] = max;
        if let Some(p) = self.order.iter().position(|&x| x == i) {
            self.order.remove(p);
        }
        let maxes = &self.max_priority;
        let at = self.order.partition_point(|&x| maxes[x as usize] >= max);
        self.order.insert(at, i);
    }

    /// Repositions a table after a change, or frees it when empty.
    fn settle(&mut self, i: u32) {
        if self.table(i).rules == 0 {
            self.tables[i as usize] = None;
            self.order.retain(|&x| x != i);
            self.free.push(i);
        } else {
            self.reposition(i);
        }
    }

    /// Moves the rule `id` from its table to table `to`.
    fn move_rule(&mut self, id: RuleId, to: u32) {
        let rec = &self.rules[&id];
        let (from, values, priority) = (rec.table, rec.values, rec.rule.priority);
        let c = self.table_mut(from).take(&values, priority, id).expect("rule is in its table");
        self.table_mut(to).add(&values, c);
        self.rules.get_mut(&id).expect("present").table = to;
    }

    /// Splits table `i` after the bucket of `values` exceeded the collision limit.
    fn split(&mut self, i: u32, values: &Values) {
        let ids = self.table(i).bucket_ids(values);
        let tuples: Vec<Tuple> = ids.iter().map(|id| self.rules[id].tuple).collect();
        let mut compat: Tuple = std::array::from_fn(|d| tuples.iter().map(|t| t[d]).min().unwrap_or(0));
        let sup: Tuple = std::array::from_fn(|d| tuples.iter().map(|t| t[d]).max().unwrap_or(0));
        let Some((d, delta)) = (0..5).map(|d| (d, sup[d] - compat[d])).max_by_key(|&(d, delta)| (delta, Reverse(d)))
        else {
            return;
        };
        if delta == 0 {
            return; // the colliding rules share one tuple: no longer tuple separates them
        }
        compat[d] += delta.div_ceil(2);
        if compat == self.table(i).tuple {
            return;
        }
        let target = self.find_or_make(compat);
        let movers: Vec<RuleId> = self.table(i).table.iter().flat_map(|b| b.rules.iter().map(|c| c.id)).collect();
        for id in movers {
            if fits(&self.rules[&id].tuple, &compat) {
                self.move_rule(id, target);
            }
        }
        self.settle(target);
        self.settle(i);
    }
}

impl Classifier for TupleMerge {
    fn name(&self) -> &'static str {
        "tm"
    }

    fn lookup(&self, key: &FlowKey) -> Option<RuleId> {
        let values = packet_values(key);
        let mut best: Option<(u32, RuleId)> = None;
        for &i in &self.order {
            if let Some((bp, _)) = best {
                if self.max_priority[i as usize] < bp {
                    break;
                }
            }
            let Some(t) = self.tables[i as usize].as_ref() else { continue };
            let k = t.key(&values);
            let Some(b) = t.table.find(hash_values(&k), |b| b.key == k) else { continue };
            for c in &b.rules {
                if let Some((bp, bid)) = best {
                    if !rqvs_flow::rule::beats(c.priority, c.id, bp, bid) {
                        break; // the rest of the bucket ranks lower still
                    }
                }
                if c.m.matches(key, &self.extras) {
                    best = Some((c.priority, c.id));
                    break;
                }
            }
        }
        best.map(|(_, id)| id)
    }

    fn insert(&mut self, rule: Rule) -> Result<(), ClassifierError> {
        if self.rules.contains_key(&rule.id) {
            return Err(ClassifierError::DuplicateId(rule.id));
        }
        let (tuple, values) = rule_tuple(&rule.matches);
        let target = self.order.iter().copied().find(|&i| fits(&tuple, &self.table(i).tuple));
        let i = match target {
            Some(i) => i,
            None => self.find_or_make(relax(tuple)),
        };
        let c =
            Candidate { priority: rule.priority, id: rule.id, m: CompactMatch::new(&rule.matches, &mut self.extras) };
        let id = rule.id;
        self.rules.insert(id, Record { rule, tuple, values, table: i });
        let bucket = self.table_mut(i).add(&values, c);
        self.reposition(i);
        if bucket > self.collision_limit {
            self.split(i, &values);
        }
        Ok(())
    }

    fn remove(&mut self, id: RuleId) -> Option<Rule> {
        let rec = self.rules.remove(&id)?;
        let c = self.table_mut(rec.table).take(&rec.values, rec.rule.priority, id).expect("rule is in its table");
        c.m.release(&mut self.extras);
        self.settle(rec.table);
        Some(rec.rule)
    }

    fn len(&self) -> usize {
        self.rules.len()
    }

    fn stats(&self) -> Vec<(&'static str, f64)> {
        vec![("tables", self.tables() as f64)]
    }

    fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        let mut bytes = size_of::<Self>()
            + self.tables.capacity() * size_of::<Option<Table>>()
            + self.order.capacity() * 4
            + self.max_priority.capacity() * 4
            + self.rules.capacity() * (size_of::<RuleId>() + size_of::<Record>())
            + self.extras.memory_bytes();
        for t in self.tables.iter().flatten() {
            bytes += t.table.capacity() * (size_of::<Bucket>() + 1);
            bytes += t.table.iter().map(|b| b.rules.capacity() * size_of::<Candidate>()).sum::<usize>();
            bytes += t.priorities.len() * 16;
        }
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn differential_with_updates(case in testing::arb_case()) {
            testing::check_differential(&case, |rules| Box::new(TupleMerge::build(rules).unwrap()))?;
        }

        /// A collision limit of 1 forces splits on almost every insert.
        #[test]
        fn differential_with_constant_splitting(case in testing::arb_case()) {
            testing::check_differential(&case, |rules| {
                let mut t = TupleMerge::with_collision_limit(1);
                for r in rules {
                    t.insert(r.clone()).unwrap();
                }
                Box::new(t)
            })?;
        }
    }

    #[test]
    fn tuples_and_relaxation() {
        let rules = rqvs_flow::formats::classbench::parse_rules(
            "t",
            "@10.1.2.0/24\t192.168.0.0/16\t1024 : 2047\t20 : 21\t0x06/0xFF\t0x0000/0x0000\t\n",
        )
        .unwrap();
        let (t, v) = rule_tuple(&rules[0].matches);
        assert_eq!(t, [24, 16, 6, 15, 8]);
        assert_eq!(v[2], 1024);
        assert_eq!(relax([32, 32, 16, 16, 8]), [28, 28, 16, 16, 8]);
        assert_eq!(relax([32, 8, 16, 16, 8]), [28, 0, 16, 0, 8]);
        assert_eq!(relax([24, 16, 6, 15, 8]), [22, 0, 6, 0, 8]);
        assert_eq!(relax([24, 20, 6, 15, 8]), [22, 18, 6, 15, 8]);
    }

    #[test]
    fn removing_an_emptied_table_keeps_the_others() {
        // Three tables; empty the first: lookups through the other two must still work (the
        // authors' code erases every table after the emptied one).
        let text = "@10.0.0.1/32\t10.0.0.2/32\t0 : 65535\t0 : 65535\t0x06/0xFF\t0x0000/0x0000\t\n\
                    @0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0000/0x0000\t\n\
                    @0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000\t\n";
        let rules = rqvs_flow::formats::classbench::parse_rules("t", text).unwrap();
        let mut tm = TupleMerge::build(&rules).unwrap();
        assert_eq!(tm.tables(), 3);
        tm.remove(RuleId(0)).unwrap();
        assert_eq!(tm.tables(), 2);
        assert_eq!(tm.lookup(&FlowKey::ipv4(1, 2, 6, 5, 80)), Some(RuleId(1)));
        assert_eq!(tm.lookup(&FlowKey::ipv4(1, 2, 17, 5, 80)), Some(RuleId(2)));
    }
}
