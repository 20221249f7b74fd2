//! CFLOWS' index of the tables after 0: one index per table, kept beside the slow path's tuple
//! space search of the same rules ([`crate::OfprotoTable`] updates both in one commit), so that
//! the PMD's walk past table 0 (`rqvs_datapath::cflows_pipeline`) looks a table up without wildcard
//! tracking, the prefix tries or the staged search, none of which CFLOWS needs (it installs no
//! megaflow).
//!
//! **Which index.** A table holding at least [`LaterConfig::learned_min`] rules is served by a
//! **NuevoMatchUP** of its own (iSets + TupleMerge remainder), a smaller one by a
//! **TupleMerge**. The learned index is per table, not per path (a model over the composition of
//! the tables a packet passes): see `rqvs_datapath::cflows_pipeline`.
//!
//! **The default threshold is "never"** (`usize::MAX`; `rqvs compare|replay
//! --later-learned-min N` sets one), because that is what was measured
//! (docs/pipeline-bench.md): the walk looks a later table up one packet at a time, and one key at
//! a time NuevoMatchUP is slower than TupleMerge at 100K rules, on the benchmark's forwarding
//! table (100K ipc1 prefixes, which TupleMerge holds in 5 tuples: 3.3 vs 1.4 Mpps) and on its ACL
//! (135K acl1 flows in 10 tuples: 2.4 vs 1.9 Mpps); end to end, CFLOWS on the 100K + 100K
//! pipeline with table 1 learned ran at 0.86× (5 paired runs) to 1.03× (10, on a busier machine)
//! of TupleMerge's rate. NuevoMatchUP's own crossover, [`rqvs_classify::nuevomatch::MIN_RULES`], is measured
//! on batched lookups, which the walk does not make.
//!
//! **Training.** When the index is built ([`LaterTables::build`], what CFLOWS does when it is
//! made) a table past the threshold is trained at once, synchronously, as CFLOWS trains table 0's
//! first model. Later, a table that grows past the threshold, or whose model has taken more than
//! [`LaterConfig::retrain_threshold`] of its rules into the remainder since it was trained, gets a
//! **training session**: [`LaterTables::due`] names it after a commit, and the owner
//! ([`crate::OfprotoTable`]) runs the job on the trainer thread ([`crate::trainer`]) when it was
//! given one, else on a thread of its own (as CCACHE's sessions do). The job copies the table's
//! rules under a *read* lock (the PMDs' walks go on; commits wait), builds the model with no lock
//! held, then, under the write lock, replays the changes the commits made to that table after
//! its copy (each change logged with its commit's version, [`LaterTables::at_version`]) and puts
//! the model in place of the table's index ([`LaterTables::install`]). Until then the old index
//! (TupleMerge, or the previous model) serves the table and takes every commit: a table is never
//! looked up in a model that lacks a change. A failed build leaves the old index, and the table
//! is not trained again until its size has moved by `retrain_threshold`.
//!
//! **Exactness.** A table's answer is its highest-priority matching rule, which both indexes and
//! the slow path agree on whenever no two overlapping rules of the table share a priority; where
//! some do (the slow path's `tied_overlaps`), OVS's choice among them is the slow path's, so the
//! walk asks the slow path for that table ([`LaterTables::lookup`]'s callers check it).
//!
//! Not done: a learned table that shrinks below the threshold keeps its model (it stays exact;
//! only its speed is TupleMerge's or not).

use rqvs_classify::nuevomatch::{NuevoMatchConfig, NuevoMatchUp};
use rqvs_classify::{Classifier, ClassifierError, TupleMerge};
use rqvs_flow::{FlowKey, Rule, RuleId};

/// When a table after 0 gets a learned index (module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LaterConfig {
    /// Tables with at least this many rules are served by a NuevoMatchUP of their own; smaller
    /// ones by a TupleMerge. `usize::MAX` (the default, module docs): never.
    pub learned_min: usize,
    /// A learned table is trained again when the rules inserted into its remainder since its
    /// model was trained exceed this share of its rules (as CFLOWS' table 0,
    /// `rqvs_datapath::CflowsConfig::retrain_threshold`).
    pub retrain_threshold: f64,
}

impl Default for LaterConfig {
    fn default() -> Self {
        LaterConfig { learned_min: usize::MAX, retrain_threshold: 0.1 }
    }
}

/// The configuration of every model of a later table: iSets at any size (the threshold, not
/// NuevoMatchUP's own fallback, decides), room in the buckets for inserts.
fn model_config() -> NuevoMatchConfig {
    NuevoMatchConfig::always_learned()
}

/// Trains a later table's model over `rules` (what a training session runs).
pub fn train(rules: &[Rule]) -> Result<NuevoMatchUp, ClassifierError> {
    NuevoMatchUp::build_with(rules, model_config(), TupleMerge::build)
}

/// One table's index. (One per table: the size of the variants does not matter, and boxing
/// either would add an indirection to every lookup.)
#[allow(clippy::large_enum_variant)]
pub enum Index {
    Tm(TupleMerge),
    Learned(NuevoMatchUp),
}

impl Index {
    fn len(&self) -> usize {
        match self {
            Index::Tm(t) => t.len(),
            Index::Learned(m) => m.len(),
        }
    }

    fn insert(&mut self, rule: Rule) -> Result<(), ClassifierError> {
        match self {
            Index::Tm(t) => t.insert(rule),
            Index::Learned(m) => m.insert(rule),
        }
    }

    fn remove(&mut self, id: RuleId) {
        match self {
            Index::Tm(t) => {
                t.remove(id);
            }
            Index::Learned(m) => {
                m.remove(id);
            }
        }
    }

    #[inline]
    fn lookup(&self, key: &FlowKey) -> Option<RuleId> {
        match self {
            Index::Tm(t) => t.lookup(key),
            Index::Learned(m) => m.lookup(key),
        }
    }

    fn memory_bytes(&self) -> usize {
        match self {
            Index::Tm(t) => t.memory_bytes(),
            Index::Learned(m) => m.memory_bytes(),
        }
    }
}

/// A change a commit made to a table while it was being trained, with the commit's version.
enum Logged {
    Insert(Box<Rule>),
    Remove(RuleId),
}

/// A training session running for a table.
struct Session {
    id: u64,
    /// The table's changes since the session started, with their commits' versions, oldest
    /// first: the install replays those after the version its copy of the rules was taken at.
    log: Vec<(u64, Logged)>,
}

struct Table {
    index: Index,
    session: Option<Session>,
    /// The remainder's size of the learned model as trained.
    base_remainder: usize,
    /// The table's size when a training session failed: none again until it moves by
    /// `retrain_threshold`.
    failed_at: Option<usize>,
}

/// What a table's index is, for reports and tests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TableIndex {
    pub table: u8,
    pub rules: usize,
    /// A NuevoMatchUP (`Some(its coverage: the share of rules its iSets hold)`) or TupleMerge.
    pub learned: Option<f64>,
    pub training: bool,
}

/// The index per table after 0 (module docs), indexed by table id; `None`: no rule yet.
#[derive(Default)]
pub struct LaterTables {
    tables: Vec<Option<Table>>,
    cfg: LaterConfig,
    /// The version of the commit under way (the log's stamp).
    version: u64,
    next_session: u64,
    /// Models put in place by training sessions (not the ones built with the index).
    pub installs: u64,
    /// Training sessions whose build or replay failed.
    pub failed_sessions: u64,
}

impl LaterTables {
    /// An index of the rules of tables 1..=254 among `rules` (table-0 rules are skipped), with
    /// [`LaterConfig::default`].
    pub fn build<'a>(rules: impl IntoIterator<Item = &'a Rule>) -> Result<LaterTables, ClassifierError> {
        Self::build_with(rules, LaterConfig::default())
    }

    /// An index of the rules of tables 1..=254 among `rules`; the tables past
    /// `cfg.learned_min` are trained now (module docs).
    pub fn build_with<'a>(
        rules: impl IntoIterator<Item = &'a Rule>,
        cfg: LaterConfig,
    ) -> Result<LaterTables, ClassifierError> {
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
            .map(|rs| {
                if rs.is_empty() {
                    return Ok(None);
                }
                let index = if rs.len() >= cfg.learned_min {
                    Index::Learned(train(rs)?)
                } else {
                    Index::Tm(TupleMerge::build(rs)?)
                };
                Ok(Some(Table::new(index)))
            })
            .collect::<Result<_, ClassifierError>>()?;
        Ok(LaterTables { tables, cfg, ..LaterTables::default() })
    }

    pub fn config(&self) -> LaterConfig {
        self.cfg
    }

    /// Stamps the changes that follow with the version of the commit making them (module docs).
    pub fn at_version(&mut self, version: u64) {
        self.version = version;
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
            Some(table) => {
                table.index.insert(rule.clone())?;
                if let Some(s) = &mut table.session {
                    s.log.push((self.version, Logged::Insert(Box::new(rule))));
                }
                Ok(())
            }
            slot @ None => {
                *slot = Some(Table::new(Index::Tm(TupleMerge::build(std::slice::from_ref(&rule))?)));
                Ok(())
            }
        }
    }

    /// Removes the rule `id` of table `table` (absent: nothing).
    pub fn remove(&mut self, table: u8, id: RuleId) {
        if let Some(Some(t)) = self.tables.get_mut(usize::from(table)) {
            t.index.remove(id);
            if let Some(s) = &mut t.session {
                s.log.push((self.version, Logged::Remove(id)));
            }
        }
    }

    /// The highest-priority rule of `table` matching `key` (an empty or absent table: `None`).
    /// Exact only where the table has no overlapping rules of equal priority (module docs).
    #[inline]
    pub fn lookup(&self, table: u8, key: &FlowKey) -> Option<RuleId> {
        self.tables.get(usize::from(table))?.as_ref()?.index.lookup(key)
    }

    /// Bytes held by the index.
    pub fn memory_bytes(&self) -> usize {
        self.tables.iter().flatten().map(|t| t.index.memory_bytes()).sum()
    }

    /// Each table's index.
    pub fn describe(&self) -> Vec<TableIndex> {
        self.tables
            .iter()
            .enumerate()
            .filter_map(|(n, t)| {
                let t = t.as_ref()?;
                Some(TableIndex {
                    table: n as u8,
                    rules: t.index.len(),
                    learned: match &t.index {
                        Index::Learned(m) => Some(m.coverage()),
                        Index::Tm(_) => None,
                    },
                    training: t.session.is_some(),
                })
            })
            .collect()
    }

    /// True while a training session of any table runs.
    pub fn training(&self) -> bool {
        self.tables.iter().flatten().any(|t| t.session.is_some())
    }

    /// The tables that need a training session now (module docs), each marked as training from
    /// here on: `(table, session id)` for the job, which ends in [`LaterTables::install`] or
    /// [`LaterTables::failed`].
    pub fn due(&mut self) -> Vec<(u8, u64)> {
        let cfg = self.cfg;
        let mut out = Vec::new();
        for (n, t) in self.tables.iter_mut().enumerate() {
            let Some(t) = t else { continue };
            if t.session.is_some() || !t.needs_training(cfg) {
                continue;
            }
            let id = self.next_session;
            self.next_session += 1;
            t.session = Some(Session { id, log: Vec::new() });
            out.push((n as u8, id));
        }
        out
    }

    /// Ends session `id` of `table` with `model`, trained over the table's rules as of version
    /// `copied_at`: the changes logged after that version are replayed on it and it takes the
    /// table's place. Returns the index it replaces (to be freed outside the caller's lock), or
    /// `None` when the session is no longer the table's (the index was rebuilt or dropped) or a
    /// replayed change fails (the old index stays; counted in `failed_sessions`).
    pub fn install(&mut self, table: u8, id: u64, copied_at: u64, mut model: NuevoMatchUp) -> Option<Index> {
        let t = session_of(&mut self.tables, table, id)?;
        let session = t.session.take().expect("session_of checked it");
        for (v, change) in session.log {
            if v <= copied_at {
                continue; // in the copy already
            }
            let ok = match change {
                Logged::Insert(r) => model.insert(*r).is_ok(),
                Logged::Remove(id) => {
                    model.remove(id);
                    true
                }
            };
            if !ok {
                t.failed_at = Some(t.index.len());
                self.failed_sessions += 1;
                return None;
            }
        }
        t.base_remainder = model.remainder().len();
        t.failed_at = None;
        self.installs += 1;
        Some(std::mem::replace(&mut t.index, Index::Learned(model)))
    }

    /// Ends session `id` of `table` without a model (its build failed).
    pub fn failed(&mut self, table: u8, id: u64) {
        if let Some(t) = session_of(&mut self.tables, table, id) {
            t.session = None;
            t.failed_at = Some(t.index.len());
            self.failed_sessions += 1;
        }
    }
}

/// Table `table` when session `id` is its running session.
fn session_of(tables: &mut [Option<Table>], table: u8, id: u64) -> Option<&mut Table> {
    let t = tables.get_mut(usize::from(table))?.as_mut()?;
    (t.session.as_ref()?.id == id).then_some(t)
}

impl Table {
    fn new(index: Index) -> Table {
        let base_remainder = match &index {
            Index::Learned(m) => m.remainder().len(),
            Index::Tm(_) => 0,
        };
        Table { index, session: None, base_remainder, failed_at: None }
    }

    fn needs_training(&self, cfg: LaterConfig) -> bool {
        let len = self.index.len();
        if len < cfg.learned_min || len == 0 {
            return false;
        }
        if let Some(f) = self.failed_at {
            if (len.abs_diff(f) as f64) <= cfg.retrain_threshold * f as f64 {
                return false;
            }
        }
        match &self.index {
            Index::Tm(_) => true,
            Index::Learned(m) => {
                let grown = m.remainder().len().saturating_sub(self.base_remainder);
                grown as f64 > cfg.retrain_threshold * len as f64
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_flow::formats::ofctl;
    use rqvs_testkit::overlap::{keys, rules};

    #[test]
    fn each_table_answers_its_own_rules_and_follows_changes() {
        let text = "\
table=0,priority=5,actions=goto_table:1
table=1,priority=24,ip,nw_dst=10.1.2.0/24,actions=output:2
table=1,priority=16,ip,nw_dst=10.1.0.0/16,actions=output:3
table=2,priority=24,ip,nw_dst=10.1.2.0/24,actions=output:4
";
        let rules = ofctl::parse_flows("t", text).unwrap();
        for learned_min in [usize::MAX, 0] {
            let cfg = LaterConfig { learned_min, ..LaterConfig::default() };
            let mut l = LaterTables::build_with(&rules, cfg).unwrap();
            let learned = l.describe().iter().all(|t| t.learned.is_some());
            assert_eq!(learned, learned_min == 0);
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

    /// The brute-force answer of table 1 among `rules`.
    fn brute(rules: &[Rule], k: &FlowKey) -> Option<RuleId> {
        rules.iter().filter(|r| r.table == 1 && r.matches.matches(k)).max_by_key(|r| r.priority).map(|r| r.id)
    }

    /// A session: the table crosses the threshold, is copied at one version, changes under
    /// later commits (and one before the copy, which must not be replayed twice), and the
    /// trained model replays exactly the changes after its copy. Its answers equal the brute
    /// force's over the rules the table holds at the end.
    #[test]
    fn a_session_replays_the_changes_after_its_copy() {
        let mut all = rules(600);
        for r in all.iter_mut() {
            r.table = 1;
        }
        // No ties: every rule a priority of its own.
        for (i, r) in all.iter_mut().enumerate() {
            r.priority = 1 + i as u32;
        }
        let cfg = LaterConfig { learned_min: 350, retrain_threshold: 0.1 };
        let mut l = LaterTables::build_with(&all[..300], cfg).unwrap();
        assert_eq!(l.describe()[0].learned, None);
        assert!(l.due().is_empty(), "300 rules: below the threshold");
        let mut held: Vec<Rule> = all[..300].to_vec();
        // Commit 1 crosses the threshold.
        l.at_version(1);
        for r in &all[300..360] {
            l.insert(r.clone()).unwrap();
            held.push(r.clone());
        }
        let due = l.due();
        assert_eq!(due.len(), 1);
        let (table, id) = due[0];
        assert!(l.due().is_empty(), "one session at a time");
        // Commit 2 comes before the copy (version 2 is in it).
        l.at_version(2);
        for r in &all[360..380] {
            l.insert(r.clone()).unwrap();
            held.push(r.clone());
        }
        let copy = held.clone();
        // Commits 3 and 4 after the copy: adds, removes, and an add and its rollback.
        l.at_version(3);
        for r in &all[380..450] {
            l.insert(r.clone()).unwrap();
            held.push(r.clone());
        }
        for r in all[..300].iter().step_by(4) {
            l.remove(1, r.id);
            held.retain(|h| h.id != r.id);
        }
        l.at_version(4);
        l.insert(all[450].clone()).unwrap();
        l.remove(1, all[450].id);
        let model = train(&copy).unwrap();
        let old = l.install(table, id, 2, model);
        assert!(matches!(old, Some(Index::Tm(_))));
        let d = l.describe()[0];
        assert!(d.learned.is_some() && !d.training, "{d:?}");
        assert_eq!(d.rules, held.len());
        let mut hits = 0;
        for k in keys(4000, 11) {
            let want = brute(&held, &k);
            assert_eq!(l.lookup(1, &k), want, "{k:?}");
            hits += usize::from(want.is_some());
        }
        assert!(hits > 1000, "the keys hit table 1 ({hits})");
        // A stale session (another id) installs nothing.
        assert!(l.install(table, id, 2, train(&copy).unwrap()).is_none());
    }
}
