//! CFLOWS' index of the tables after 0: one [`TupleMerge`] per table, kept beside the slow
//! path's tuple space search of the same rules ([`crate::OfprotoTable`] updates both in one
//! commit), so that the PMD's walk past table 0 (`rqvs_datapath::cflows_pipeline`) looks a table up
//! without wildcard tracking, the prefix tries or the staged search, none of which CFLOWS needs
//! (it installs no megaflow).
//!
//! **Exactness.** A table's answer is its highest-priority matching rule, which TupleMerge and
//! the slow path agree on whenever no two overlapping rules of the table share a priority; where
//! some do (the slow path's `tied_overlaps`), OVS's choice among them is the slow path's, so the
//! walk asks the slow path for that table ([`LaterTables::lookup`]'s callers check it).
//!
//! Only TupleMerge for now: a learned index (NuevoMatchUP) per large later table would need a
//! trainer per table and its publication; in the pipelines measured (docs/pipeline-bench.md) the
//! later table is an LPM table on one field, which TupleMerge serves with a few probes.

use rqvs_classify::{Classifier, ClassifierError, TupleMerge};
use rqvs_flow::{FlowKey, Rule, RuleId};

/// A TupleMerge per table after 0 (module docs), indexed by table id; `None`: no rule yet.
#[derive(Default)]
pub struct LaterTables {
    tables: Vec<Option<TupleMerge>>,
}

impl LaterTables {
    /// An index of the rules of tables 1..=254 among `rules` (table-0 rules are skipped).
    pub fn build<'a>(rules: impl IntoIterator<Item = &'a Rule>) -> Result<LaterTables, ClassifierError> {
        let mut by_table: Vec<Vec<Rule>> = Vec::new();
        for r in rules.into_iter().filter(|r| r.table != 0) {
            let t = usize::from(r.table);
            if by_table.len() <= t {
                by_table.resize_with(t + 1, Vec::new);
            }
            by_table[t].push(r.clone());
        }
        let tables = by_table
            .iter()
            .map(|rs| if rs.is_empty() { Ok(None) } else { TupleMerge::build(rs).map(Some) })
            .collect::<Result<_, _>>()?;
        Ok(LaterTables { tables })
    }

    /// Adds a rule (of a table after 0; a table-0 rule is ignored).
    pub fn insert(&mut self, rule: Rule) -> Result<(), ClassifierError> {
        if rule.table == 0 {
            return Ok(());
        }
        let t = usize::from(rule.table);
        if self.tables.len() <= t {
            self.tables.resize_with(t + 1, || None);
        }
        match &mut self.tables[t] {
            Some(tm) => tm.insert(rule),
            slot @ None => {
                *slot = Some(TupleMerge::build(std::slice::from_ref(&rule))?);
                Ok(())
            }
        }
    }

    /// Removes the rule `id` of table `table` (absent: nothing).
    pub fn remove(&mut self, table: u8, id: RuleId) {
        if let Some(Some(tm)) = self.tables.get_mut(usize::from(table)) {
            tm.remove(id);
        }
    }

    /// The highest-priority rule of `table` matching `key` (an empty or absent table: `None`).
    /// Exact only where the table has no overlapping rules of equal priority (module docs).
    #[inline]
    pub fn lookup(&self, table: u8, key: &FlowKey) -> Option<RuleId> {
        self.tables.get(usize::from(table))?.as_ref()?.lookup(key)
    }

    /// Bytes held by the index.
    pub fn memory_bytes(&self) -> usize {
        self.tables.iter().flatten().map(|t| t.memory_bytes()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_flow::formats::ofctl;

    #[test]
    fn each_table_answers_its_own_rules_and_follows_changes() {
        let text = "\
table=0,priority=5,actions=goto_table:1
table=1,priority=24,ip,nw_dst=10.1.2.0/24,actions=output:2
table=1,priority=16,ip,nw_dst=10.1.0.0/16,actions=output:3
table=2,priority=24,ip,nw_dst=10.1.2.0/24,actions=output:4
";
        let rules = ofctl::parse_flows("t", text).unwrap();
        let mut l = LaterTables::build(&rules).unwrap();
        let k = FlowKey::ipv4(0x0a00_0001, 0x0a01_0203, 6, 1, 2);
        assert_eq!(l.lookup(0, &k), None, "table 0 is not indexed");
        assert_eq!(l.lookup(1, &k), Some(rules[1].id));
        assert_eq!(l.lookup(2, &k), Some(rules[3].id));
        assert_eq!(l.lookup(3, &k), None);
        l.remove(1, rules[1].id);
        assert_eq!(l.lookup(1, &k), Some(rules[2].id));
        let mut r = rules[1].clone();
        r.table = 7;
        l.insert(r.clone()).unwrap();
        assert_eq!(l.lookup(7, &k), Some(r.id));
        assert!(l.insert(r).is_err(), "an id twice");
    }
}
