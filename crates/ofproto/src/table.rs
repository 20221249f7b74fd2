//! The OpenFlow table of a switch: one [`OfprotoTable`] that every PMD's handler (upcalls),
//! the revalidator and the rule-change path share — not a copy per thread (with N PMD threads
//! and 500K rules, copies would be N + 1 tables).
//!
//! - **Versions.** Every commit of a change set (one rule change, or a whole OpenFlow bundle)
//!   makes a new version, as OVS's `ovs_version_t` numbers its classifier's versions; a reader
//!   holds one version for as long as it holds a [`TableRead`].
//! - **Atomic change sets.** [`OfprotoTable::commit`] applies all of a change set or none of it
//!   (a rule the classifier refuses rolls back the ones applied before it), under the write
//!   lock, so no reader ever sees part of a bundle.
//! - **Concurrency.** An `RwLock` around the classifier: readers (the handler, the
//!   revalidator) share it, a commit excludes them while it runs. The lock prefers writers (a
//!   waiting commit holds back new reads: `parking_lot`'s, which hands the lock to the commit
//!   when the reads in progress end; std's lets a woken reader in first, and a handler reading
//!   per upcall in a loop kept a commit waiting through dozens of wake-ups on a busy 2-core
//!   machine), and each reader reads the table **once per lookup**
//!   (one upcall, one megaflow re-checked), so a commit waits for the lookups in progress only,
//!   tens of microseconds at 100K rules. Reads per batch of 64 upcalls or 1,024 megaflows held a
//!   commit for up to 20 ms; ORIG's flow-mod rate (`rqvs bench openflow`) rose about 2× with
//!   one read per lookup (docs/openflow-bench.md). The PMD's fast path never touches the table (it reads the
//!   megaflow cache), so a commit delays upcalls and revalidation, never forwarding. This is
//!   where rqvs departs from OVS: OVS keeps removed and future rules in its classifier tagged
//!   with the versions they are visible in, so lookups at an old version run *during* a commit;
//!   here a reader waits for a commit in progress (measured by the bundle benchmarks; a
//!   multi-version classifier is the next step if that wait shows up in the switch's upcall
//!   latency).
//! - **Revalidation against the latest version**, as OVS's revalidators do: a megaflow checked
//!   after several commits is checked against the newest table, which is the one that decides
//!   new upcalls.
//! - **The change log** ([`TableRead::changes_since`]): every commit records the matches of the
//!   rules it added and removed, so a revalidator re-checks only the megaflows a change can
//!   affect (`rqvs_datapath::revalidator`, *Incremental revalidation*). A commit records "anything may
//!   have changed" instead when the translation is not one table-0 lookup on the packet's own
//!   key: it changes groups or port liveness, or a rule it touches, or any rule the table holds
//!   after it, is outside table 0 or holds an action that looks up a table or a group again
//!   ([`is_single_lookup`]). The log keeps the latest [`CHANGE_LOG_VERSIONS`] commits (and at
//!   most [`CHANGE_LOG_MATCHES`] matches) of the last [`CHANGE_LOG_AGE`]; older ones read as
//!   "anything may have changed".

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, RwLock, Weak};

use parking_lot::{RwLock as TableLock, RwLockReadGuard};
#[cfg(test)]
use std::time::Duration;
use std::time::Instant;

use rqvs_classify::ofproto::{Megaflow, OfprotoClassifier, PrefixFields};
use rqvs_classify::{Classifier, ClassifierError};
use rqvs_flow::group::Group;
use rqvs_flow::{Action, FlowKey, Match, Rule, RuleId};

use crate::crossing;
use crate::later_tables::{LaterConfig, LaterTables};
use crate::xlate::{self, Groups, Xlate};
use crate::DpAction;

/// Commits the change log remembers (module docs).
pub const CHANGE_LOG_VERSIONS: usize = 65_536;
/// Rule matches the change log holds at most, over all the commits it remembers (a match is
/// about 250 bytes: 8 MB). A bigger change set is logged as "anything may have changed".
pub const CHANGE_LOG_MATCHES: usize = 32_768;
/// How long the change log remembers a commit. Revalidators read it within milliseconds of a
/// commit; one that comes back later (an idle PMD) revalidates everything, which is always
/// right. Without this, a switch under slow, endless churn (a controller's few flow-mods a
/// second) would hold the log's whole bound — 8 MB — after hours, as if it leaked (the soak
/// saw ~0.5 KiB per flow-mod for 30 minutes).
pub const CHANGE_LOG_AGE: std::time::Duration = std::time::Duration::from_secs(10);

/// One rule change of a change set.
// A rule is about 300 bytes since the wide key; change sets are built once per flow-mod, not per
// packet, so boxing the common variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum RuleChange {
    Add(Rule),
    /// Removes the rule with this id (absent: nothing).
    Remove(RuleId),
    /// Adds or replaces a group.
    Group(Group),
    /// Removes the group with this id (absent: nothing).
    RemoveGroup(u32),
    /// A port's link went up (`true`) or down.
    PortLive(u32, bool),
    /// A port was removed from the switch (`true`) or is a port again: a removed port's
    /// packets translate to a drop, so the revalidation this change starts deletes every
    /// megaflow of that `in_port` that did anything else.
    PortRemoved(u32, bool),
}

/// The slow path's answer for a packet: the megaflow to install and the action.
pub struct Verdict {
    pub megaflow: Megaflow,
    pub action: DpAction,
    /// The rules the packet passed, as one attribution id ([`crate::chain`]); `None`: none.
    pub rule: Option<RuleId>,
}

struct Versioned {
    classifier: OfprotoClassifier,
    groups: GroupTable,
    version: u64,
    /// Rules held that are not [`is_single_lookup`].
    pipeline_rules: usize,
    log: ChangeLog,
    /// CFLOWS' index of the tables after 0, once asked for
    /// ([`OfprotoTable::index_later_tables`]); kept with the classifier in every commit.
    later: Option<LaterTables>,
    /// Where the later tables' training sessions run ([`OfprotoTable::set_later_trainer`]).
    later_trainer: Option<crate::trainer::TrainerHandle>,
}

/// What the commits since some version changed ([`TableRead::changes_since`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Changes {
    /// Only table-0 rules with these matches (added or removed) changed, and every packet's
    /// translation is one table-0 lookup on its own key, before and after: a packet none of
    /// them matches gets the same translation.
    Rules(Vec<Match>),
    /// Anything may have changed (groups, port liveness, pipeline rules, or commits the log no
    /// longer holds).
    Any,
}

/// The latest commits' changes, oldest first (module docs).
#[derive(Default)]
struct ChangeLog {
    /// `(version, when it was committed, the matches its commit changed, or None: anything)`.
    entries: VecDeque<(u64, Instant, Option<Vec<Match>>)>,
    matches: usize,
    /// Changes after this version and up to the oldest entry's are forgotten.
    forgotten_to: u64,
}

impl ChangeLog {
    fn push(&mut self, version: u64, changed: Option<Vec<Match>>) {
        self.push_at(version, Instant::now(), changed);
    }

    fn push_at(&mut self, version: u64, now: Instant, changed: Option<Vec<Match>>) {
        self.matches += changed.as_ref().map_or(0, Vec::len);
        self.entries.push_back((version, now, changed));
        let too_old = |at: &Instant| now.saturating_duration_since(*at) > CHANGE_LOG_AGE;
        while self.entries.len() > CHANGE_LOG_VERSIONS
            || (self.matches > CHANGE_LOG_MATCHES && self.entries.len() > 1)
            || self.entries.front().is_some_and(|(_, at, _)| too_old(at))
        {
            let Some((v, _, c)) = self.entries.pop_front() else { break };
            self.matches -= c.as_ref().map_or(0, Vec::len);
            self.forgotten_to = v;
        }
        if self.entries.capacity() > 4 * self.entries.len().max(64) {
            self.entries.shrink_to_fit();
        }
    }

    fn since(&self, version: u64) -> Changes {
        if version < self.forgotten_to {
            return Changes::Any;
        }
        let mut out = Vec::new();
        for (v, _, c) in self.entries.iter().rev() {
            if *v <= version {
                break;
            }
            match c {
                Some(m) => out.extend_from_slice(m),
                None => return Changes::Any,
            }
        }
        Changes::Rules(out)
    }
}

/// True when a rule's part of any translation is one lookup: it sits in table 0 and none of its
/// actions looks up a table or a group (resubmit, goto_table, group, write_actions — which may
/// hold a group — and actions rqvs does not know). A table holding only such rules translates
/// every packet by one table-0 lookup on its own key (the change log's condition).
pub fn is_single_lookup(rule: &Rule) -> bool {
    rule.table == 0
        && !rule.actions.0.iter().any(|a| {
            matches!(
                a,
                Action::Resubmit { .. }
                    | Action::GotoTable(_)
                    | Action::Group(_)
                    | Action::WriteActions(_)
                    | Action::ClearActions
                    | Action::Other(_)
            )
        })
}

/// The groups the translation sees, and the liveness of ports (fast-failover groups), changed
/// with the rules ([`RuleChange::Group`], [`RuleChange::RemoveGroup`], [`RuleChange::PortLive`]).
#[derive(Clone, Debug, Default)]
pub struct GroupTable {
    pub groups: BTreeMap<u32, Group>,
    /// Ports whose link is down (every other port is live).
    pub down: BTreeSet<u32>,
    /// Ports removed from the switch ([`RuleChange::PortRemoved`]).
    pub removed: BTreeSet<u32>,
}

impl Groups for GroupTable {
    fn group(&self, id: u32) -> Option<&Group> {
        self.groups.get(&id)
    }

    fn port_live(&self, port: u32) -> bool {
        !self.down.contains(&port)
    }
}

/// The shared, versioned OpenFlow table (module docs). Cloning shares it.
#[derive(Clone)]
pub struct OfprotoTable {
    inner: Arc<TableLock<Versioned>>,
    /// Its patch ports' crossings ([`crate::crossing`]).
    patch: Arc<PatchState>,
}

/// A table's handle that does not keep it.
type WeakTable = (Weak<TableLock<Versioned>>, Weak<PatchState>);

/// A table's patch crossings ([`crate::crossing`]): outside the versioned lock, so a reader of
/// another table can reach them without it.
#[derive(Default)]
struct PatchState {
    resolver: RwLock<Option<crossing::Resolver>>,
    /// The tables whose translations crossed into this one (marked changed at each commit).
    dependents: Mutex<Vec<WeakTable>>,
    on_marked: Mutex<Option<crossing::OnMarked>>,
}

impl OfprotoTable {
    /// Are `self` and `other` handles of one table (not copies)?
    pub fn is_same(&self, other: &OfprotoTable) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

/// A read of the table at one version.
pub struct TableRead<'a> {
    guard: RwLockReadGuard<'a, Versioned>,
    table: &'a OfprotoTable,
}

impl TableRead<'_> {
    /// The slow path's verdict for a (wire) key: the translation through the pipeline
    /// ([`crate::xlate`]) with wildcard tracking. `rule` attributes the whole rule chain
    /// ([`crate::chain`]).
    ///
    /// With a patch resolver ([`OfprotoTable::set_patch_resolver`]) the translation follows the
    /// crossings into the peer bridges ([`crate::crossing::compose`]).
    pub fn classify(&self, key: &FlowKey) -> Verdict {
        let x = self.xlate_crossing(key);
        if self.guard.groups.removed.contains(&key.in_port) {
            // No packet of a removed port is forwarded ([`RuleChange::PortRemoved`]); the
            // megaflow is the translation's, which always examines in_port.
            return Verdict { megaflow: x.megaflow, action: DpAction::Drop, rule: None };
        }
        let rule = crate::chain::attribution_of(&x);
        Verdict { megaflow: x.megaflow, action: x.action(), rule }
    }

    /// The whole translation of a (wire) key: ops, megaflow, rule chain, final key (this
    /// table's alone: no crossing).
    pub fn xlate(&self, key: &FlowKey) -> Xlate {
        xlate::xlate(&self.guard.classifier, &self.guard.groups, key)
    }

    /// [`TableRead::xlate`] with the patch crossings followed when the table has a resolver
    /// ([`crate::crossing`]).
    pub fn xlate_crossing(&self, key: &FlowKey) -> Xlate {
        match self.table.patch_resolver() {
            Some(r) => crossing::compose(self.table, self, &r, key),
            None => self.xlate(key),
        }
    }

    /// Was OpenFlow port `port` removed ([`RuleChange::PortRemoved`])?
    pub fn is_removed(&self, port: u32) -> bool {
        self.guard.groups.removed.contains(&port)
    }

    /// The group table.
    pub fn groups(&self) -> &GroupTable {
        &self.guard.groups
    }

    pub fn version(&self) -> u64 {
        self.guard.version
    }

    pub fn classifier(&self) -> &OfprotoClassifier {
        &self.guard.classifier
    }

    /// The index of the tables after 0, when [`OfprotoTable::index_later_tables`] made one.
    pub fn later(&self) -> Option<&LaterTables> {
        self.guard.later.as_ref()
    }

    /// What the commits after `version` (up to this read's) changed (module docs, *The change
    /// log*).
    pub fn changes_since(&self, version: u64) -> Changes {
        if version >= self.guard.version {
            return Changes::Rules(Vec::new());
        }
        self.guard.log.since(version)
    }
}

impl OfprotoTable {
    /// A table holding `rules`, at version 0.
    pub fn build(rules: &[Rule]) -> Result<OfprotoTable, ClassifierError> {
        let pipeline_rules = rules.iter().filter(|r| !is_single_lookup(r)).count();
        let v = Versioned {
            classifier: OfprotoClassifier::build(rules)?,
            groups: GroupTable::default(),
            version: 0,
            pipeline_rules,
            log: ChangeLog::default(),
            later: None,
            later_trainer: None,
        };
        Ok(OfprotoTable { inner: Arc::new(TableLock::new(v)), patch: Arc::default() })
    }

    /// Reads the table (one version until the read is dropped).
    pub fn read(&self) -> TableRead<'_> {
        // No poisoning: a writer that panicked left the classifier as it was before or after
        // one whole operation of its own (commits roll back on error, not on panic).
        let guard = self.inner.read();
        TableRead { guard, table: self }
    }

    /// Reads the table if that does not wait (a commit holds or waits for the write lock:
    /// `None`). [`crate::crossing`] reads a peer's table so (its *Locks*).
    pub fn try_read(&self) -> Option<TableRead<'_>> {
        let guard = self.inner.try_read()?;
        Some(TableRead { guard, table: self })
    }

    /// Follows this table's patch crossings with `resolver` from now on (`None`: no crossing;
    /// [`crate::crossing`]).
    pub fn set_patch_resolver(&self, resolver: Option<crossing::Resolver>) {
        *self.patch.resolver.write().unwrap_or_else(|e| e.into_inner()) = resolver;
    }

    /// The resolver [`OfprotoTable::set_patch_resolver`] set.
    pub fn patch_resolver(&self) -> Option<crossing::Resolver> {
        self.patch.resolver.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Calls `hook` with the new version each time another table's commit marks this one
    /// changed ([`OfprotoTable::mark_changed`]).
    pub fn set_on_marked(&self, hook: Option<crossing::OnMarked>) {
        *self.patch.on_marked.lock().unwrap_or_else(|e| e.into_inner()) = hook;
    }

    /// `origin`'s translations crossed into this table: each commit here marks it changed.
    pub(crate) fn add_dependent(&self, origin: &OfprotoTable) {
        let mut d = self.patch.dependents.lock().unwrap_or_else(|e| e.into_inner());
        if d.iter().any(|(t, _)| std::ptr::eq(t.as_ptr(), Arc::as_ptr(&origin.inner))) {
            return;
        }
        d.retain(|(t, _)| t.strong_count() > 0);
        d.push((Arc::downgrade(&origin.inner), Arc::downgrade(&origin.patch)));
    }

    /// A new version with "anything may have changed" in the change log, and no rule changed:
    /// what a table whose translations cross into another one gets when that one changes
    /// ([`crate::crossing`], *Revalidation*). Calls the hook ([`OfprotoTable::set_on_marked`]).
    /// Returns the new version.
    pub fn mark_changed(&self) -> u64 {
        let version = {
            let mut t = self.inner.write();
            t.version += 1;
            let v = t.version;
            if let Some(l) = t.later.as_mut() {
                l.at_version(v);
            }
            t.log.push(v, None);
            v
        };
        let hook = self.patch.on_marked.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(h) = hook {
            h(version);
        }
        version
    }

    /// Marks the tables that crossed into this one changed (after a commit, its write lock
    /// released: [`crate::crossing`], *Locks*).
    fn mark_dependents(&self) {
        let deps: Vec<OfprotoTable> = {
            let d = self.patch.dependents.lock().unwrap_or_else(|e| e.into_inner());
            d.iter().filter_map(|(t, p)| Some(OfprotoTable { inner: t.upgrade()?, patch: p.upgrade()? })).collect()
        };
        for t in deps {
            t.mark_changed();
        }
    }

    /// One classification (a read of its own).
    pub fn classify(&self, key: &FlowKey) -> Verdict {
        self.read().classify(key)
    }

    pub fn version(&self) -> u64 {
        self.read().version()
    }

    /// [`OfprotoTable::build`] with the prefix fields of some tables set (OVS's
    /// `Flow_Table:prefixes`, by table; the others keep the process default), as the switch
    /// builds its table at start and for a trace.
    pub fn build_with_prefixes(
        rules: &[Rule],
        prefixes: &[(u8, PrefixFields)],
    ) -> Result<OfprotoTable, ClassifierError> {
        let t = OfprotoTable::build(rules)?;
        for &(table, p) in prefixes {
            t.set_table_prefix_fields(table, p);
        }
        Ok(t)
    }

    /// The prefix fields of one table's tries (OVS's `Flow_Table:prefixes` of its row): the
    /// tries are rebuilt; the rules and so every lookup's winner stay, only the megaflows made
    /// from now on differ ([`OfprotoClassifier::set_table_prefix_fields`]).
    pub fn set_table_prefix_fields(&self, table: u8, prefixes: PrefixFields) {
        let mut t = self.inner.write();
        t.classifier.set_table_prefix_fields(table, prefixes);
    }

    /// Keeps an index of the tables after 0 from now on ([`LaterTables`]: what CFLOWS' walk looks
    /// them up in; the tables past `cfg.learned_min` rules are trained now). Idempotent: a
    /// second call keeps the index the first made.
    pub fn index_later_tables(&self, cfg: LaterConfig) -> Result<(), ClassifierError> {
        let mut t = self.inner.write();
        if t.later.is_none() {
            let tables = 1..=u8::MAX;
            let l = LaterTables::build_with(tables.flat_map(|n| t.classifier.rules_in_table(n)), cfg)?;
            t.later = Some(l);
        }
        Ok(())
    }

    /// Runs the training sessions of the later tables ([`crate::later_tables`]) on `trainer`
    /// rather than on a thread per session.
    pub fn set_later_trainer(&self, trainer: crate::trainer::TrainerHandle) {
        self.inner.write().later_trainer = Some(trainer);
    }

    /// Waits until no training session of the later tables runs (tests, the end of a run).
    pub fn finish_later_training(&self) {
        while self.read().later().is_some_and(LaterTables::training) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Applies a change set atomically (module docs) and returns the new version and the rules
    /// the removals took out. On error nothing is changed.
    pub fn commit(&self, changes: Vec<RuleChange>) -> Result<(u64, Vec<Rule>), ClassifierError> {
        let r = self.commit_locked(changes);
        // Also after an error: a crossing that fell back while the commit ran is translated
        // again ([`crate::crossing`], *Locks*).
        self.mark_dependents();
        r
    }

    fn commit_locked(&self, changes: Vec<RuleChange>) -> Result<(u64, Vec<Rule>), ClassifierError> {
        let mut t = self.inner.write();
        let mut undo: Vec<RuleChange> = Vec::new();
        let mut removed = Vec::new();
        // The matches changed, while the change set stays within single-lookup rules.
        let mut changed: Option<Vec<Match>> = Some(Vec::new());
        let pipeline_before = t.pipeline_rules;
        let stamp = t.version + 1;
        if let Some(l) = t.later.as_mut() {
            l.at_version(stamp);
        }
        for ch in changes {
            if !matches!(ch, RuleChange::Add(_) | RuleChange::Remove(_)) {
                changed = None;
            }
            match ch {
                RuleChange::Add(r) => {
                    let id = r.id;
                    let single = is_single_lookup(&r);
                    let m = r.matches;
                    let indexed = (t.later.is_some() && r.table != 0).then(|| r.clone());
                    if let Err(e) = t.classifier.insert(r) {
                        t.pipeline_rules = pipeline_before;
                        rollback(&mut t, undo);
                        return Err(e);
                    }
                    if let Some(r) = indexed {
                        later_insert(&mut t, r);
                    }
                    if !single {
                        t.pipeline_rules += 1;
                        changed = None;
                    }
                    if let Some(c) = changed.as_mut() {
                        c.push(m);
                    }
                    undo.push(RuleChange::Remove(id));
                }
                RuleChange::Remove(id) => {
                    if let Some(r) = t.classifier.remove(id) {
                        if let Some(l) = t.later.as_mut() {
                            l.remove(r.table, id);
                        }
                        if !is_single_lookup(&r) {
                            t.pipeline_rules -= 1;
                            changed = None;
                        }
                        if let Some(c) = changed.as_mut() {
                            c.push(r.matches);
                        }
                        undo.push(RuleChange::Add(r.clone()));
                        removed.push(r);
                    }
                }
                RuleChange::Group(g) => {
                    let id = g.id;
                    match t.groups.groups.insert(id, g) {
                        Some(old) => undo.push(RuleChange::Group(old)),
                        None => undo.push(RuleChange::RemoveGroup(id)),
                    }
                }
                RuleChange::RemoveGroup(id) => {
                    if let Some(old) = t.groups.groups.remove(&id) {
                        undo.push(RuleChange::Group(old));
                    }
                }
                RuleChange::PortLive(p, live) => {
                    let was = !t.groups.down.contains(&p);
                    set_live(&mut t.groups, p, live);
                    undo.push(RuleChange::PortLive(p, was));
                }
                RuleChange::PortRemoved(p, removed) => {
                    let was = t.groups.removed.contains(&p);
                    set_removed(&mut t.groups, p, removed);
                    undo.push(RuleChange::PortRemoved(p, was));
                }
            }
        }
        if t.pipeline_rules > 0 {
            changed = None;
        }
        t.version += 1;
        let version = t.version;
        t.log.push(version, changed);
        start_later_training(&self.inner, &mut t);
        Ok((version, removed))
    }
}

/// Starts the training sessions the later tables' index asks for after a commit
/// ([`crate::later_tables`], *Training*): each on the trainer when there is one, else on a thread
/// of its own.
fn start_later_training(inner: &Arc<TableLock<Versioned>>, t: &mut Versioned) {
    let Some(l) = t.later.as_mut() else { return };
    for (table, id) in l.due() {
        let weak = Arc::downgrade(inner);
        let job: crate::trainer::Job = Box::new(move || train_later_table(weak, table, id));
        let job = match &t.later_trainer {
            Some(tr) => tr.submit(job).err(),
            None => Some(job),
        };
        if let Some(job) = job {
            if std::thread::Builder::new().name("later-trainer".into()).spawn(job).is_err() {
                if let Some(l) = t.later.as_mut() {
                    l.failed(table, id);
                }
            }
        }
    }
}

/// A training session of later table `table` (session `id`): copies its rules under a read lock,
/// trains with no lock held, installs under the write lock (replaying the changes since the
/// copy). The table gone (the switch stopped): nothing.
fn train_later_table(weak: std::sync::Weak<TableLock<Versioned>>, table: u8, id: u64) {
    let Some(inner) = weak.upgrade() else { return };
    let (rules, copied_at) = {
        let g = inner.read();
        (g.classifier.rules_in_table(table).cloned().collect::<Vec<Rule>>(), g.version)
    };
    drop(inner);
    let built = crate::later_tables::train(&rules);
    drop(rules);
    let Some(inner) = weak.upgrade() else { return };
    let mut g = inner.write();
    let Some(l) = g.later.as_mut() else { return };
    let old = match built {
        Ok(model) => l.install(table, id, copied_at, model),
        Err(_) => {
            l.failed(table, id);
            None
        }
    };
    drop(g);
    drop(old); // freed with no lock held
}

/// Adds a rule the classifier took to the index of the later tables; should the index refuse it
/// (it holds what the classifier holds, so it should not), the index is dropped and the walk
/// goes back to the classifier for every table: slower, never wrong.
fn later_insert(t: &mut Versioned, r: Rule) {
    if let Some(l) = t.later.as_mut() {
        if l.insert(r).is_err() {
            t.later = None;
        }
    }
}

fn set_removed(g: &mut GroupTable, port: u32, removed: bool) {
    if removed {
        g.removed.insert(port);
    } else {
        g.removed.remove(&port);
    }
}

fn set_live(g: &mut GroupTable, port: u32, live: bool) {
    if live {
        g.down.remove(&port);
    } else {
        g.down.insert(port);
    }
}

/// Undoes the changes applied so far, newest first.
fn rollback(t: &mut Versioned, undo: Vec<RuleChange>) {
    for ch in undo.into_iter().rev() {
        match ch {
            RuleChange::Remove(id) => {
                if let (Some(r), Some(l)) = (t.classifier.remove(id), t.later.as_mut()) {
                    l.remove(r.table, id);
                }
            }
            RuleChange::Add(r) => {
                let indexed = (t.later.is_some() && r.table != 0).then(|| r.clone());
                t.classifier.insert(r).expect("a rule the table held before goes back in");
                if let Some(r) = indexed {
                    later_insert(t, r);
                }
            }
            RuleChange::Group(g) => {
                t.groups.groups.insert(g.id, g);
            }
            RuleChange::RemoveGroup(id) => {
                t.groups.groups.remove(&id);
            }
            RuleChange::PortLive(p, live) => set_live(&mut t.groups, p, live),
            RuleChange::PortRemoved(p, removed) => set_removed(&mut t.groups, p, removed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_testkit::overlap::rules;

    #[test]
    fn the_change_log_forgets_commits_older_than_its_age() {
        let m = rules(3).into_iter().map(|r| r.matches).collect::<Vec<_>>();
        let mut log = ChangeLog::default();
        let t0 = Instant::now();
        log.push_at(1, t0, Some(vec![m[0]]));
        log.push_at(2, t0 + Duration::from_secs(1), Some(vec![m[1]]));
        assert_eq!(log.since(0), Changes::Rules(vec![m[1], m[0]]));
        // Past the age of the first two: they are forgotten, a reader from before them sees Any.
        log.push_at(3, t0 + CHANGE_LOG_AGE + Duration::from_secs(2), Some(vec![m[2]]));
        assert_eq!(log.entries.len(), 1);
        assert_eq!(log.matches, 1);
        assert_eq!(log.since(0), Changes::Any);
        assert_eq!(log.since(1), Changes::Any);
        assert_eq!(log.since(2), Changes::Rules(vec![m[2]]));
        assert_eq!(log.since(3), Changes::Rules(vec![]));
    }

    #[test]
    fn a_failed_change_set_changes_nothing() {
        let all = rules(20);
        let t = OfprotoTable::build(&all[..10]).unwrap();
        let key = FlowKey::ipv4(0x0a00_0001, 0x0b00_0001, 6, 1234, 1003);
        let before = t.classify(&key).rule;
        // The last add reuses an id the table holds: the classifier refuses it.
        let changes = vec![
            RuleChange::Remove(all[3].id),
            RuleChange::Add(all[12].clone()),
            RuleChange::Add(all[13].clone()),
            RuleChange::Add(all[5].clone()),
        ];
        assert!(t.commit(changes).is_err());
        assert_eq!(t.version(), 0);
        let r = t.read();
        assert_eq!(r.classifier().len(), 10);
        assert!(r.classifier().rule(all[3].id).is_some() && r.classifier().rule(all[12].id).is_none());
        drop(r);
        assert_eq!(t.classify(&key).rule, before);
        let (v, removed) = t.commit(vec![RuleChange::Remove(all[3].id), RuleChange::Add(all[12].clone())]).unwrap();
        assert_eq!((v, removed.len(), t.read().classifier().len()), (1, 1, 10));
    }

    /// The index of the later tables follows every commit, also one rolled back: its answer in
    /// table 1 is the classifier's for every key, after adds, removes and a failed change set —
    /// with TupleMerge, with a NuevoMatchUP trained when the index is built, and with one
    /// trained in the background (on the trainer thread) when a commit takes the table past the
    /// threshold, while the next commit changes the table. It fails if the learned index answers
    /// otherwise than the classifier, or is not the one serving the table when it should be.
    #[test]
    fn the_index_of_the_later_tables_follows_the_commits() {
        use rqvs_testkit::overlap::keys;
        let mut all = rules(400);
        for r in all.iter_mut() {
            r.table = 1;
        }
        for (learned_min, trainer) in [(usize::MAX, false), (100, false), (320, true)] {
            let cfg = LaterConfig { learned_min, retrain_threshold: 0.1 };
            let t = OfprotoTable::build(&all[..300]).unwrap();
            if trainer {
                t.set_later_trainer(crate::trainer::spawn_trainer().unwrap());
            }
            t.index_later_tables(cfg).unwrap();
            let same = |t: &OfprotoTable, what: &str, learned: Option<bool>| {
                let what = format!("learned_min {learned_min}: {what}");
                let r = t.read();
                assert_eq!(r.classifier().tied_overlaps(1), 0);
                let l = r.later().expect("indexed");
                let d = l.describe();
                assert_eq!(d.len(), 1, "{what}: {d:?}");
                assert_eq!(d[0].rules, r.classifier().rules_in_table(1).count(), "{what}");
                // None: either (a session may have ended or not).
                assert!(learned.is_none_or(|l| l == d[0].learned.is_some()), "{what}: {d:?}");
                let mut hits = 0;
                for k in keys(3000, 7) {
                    let want = r.classifier().lookup_wc_in_table(1, &k).rule;
                    assert_eq!(l.lookup(1, &k), want, "{what}: {k:?}");
                    hits += usize::from(want.is_some());
                }
                assert!(hits >= 1000, "{what}: the keys hit table 1 ({hits})");
            };
            same(&t, "built", Some(learned_min <= 300));
            // Add 50 new ones (350 rules: past 320), then, while that may train, remove every
            // third of the first 300.
            t.commit(all[300..350].iter().cloned().map(RuleChange::Add).collect()).unwrap();
            same(&t, "after an add", (learned_min != 320).then_some(learned_min <= 300));
            t.commit(all[..300].iter().step_by(3).map(|r| RuleChange::Remove(r.id)).collect()).unwrap();
            t.finish_later_training();
            let learned = learned_min <= 350;
            same(&t, "after a commit", Some(learned));
            if learned_min == 320 {
                assert_eq!(t.read().later().unwrap().installs, 1, "trained in the background");
            }
            // A change set that fails on its last add (an id the table holds) changes nothing.
            let changes =
                vec![RuleChange::Remove(all[1].id), RuleChange::Add(all[360].clone()), RuleChange::Add(all[2].clone())];
            assert!(t.commit(changes).is_err());
            same(&t, "after a failed commit", Some(learned));
        }
    }

    /// `build_with_prefixes` sets the prefix fields of the tables it names, and only those.
    #[test]
    fn build_with_prefixes_sets_the_named_tables_only() {
        let all = rules(3);
        let t = OfprotoTable::build_with_prefixes(&all, &[(1, PrefixFields::NONE)]).unwrap();
        let plain = OfprotoTable::build(&all).unwrap();
        let (r, p) = (t.read(), plain.read());
        assert!(r.classifier().table_prefix_fields(1) == PrefixFields::NONE);
        assert!(p.classifier().table_prefix_fields(1) != PrefixFields::NONE, "the default has fields");
        assert!(r.classifier().table_prefix_fields(0) == p.classifier().table_prefix_fields(0));
    }

    #[test]
    fn readers_never_see_half_a_bundle() {
        let all = rules(400);
        let t = OfprotoTable::build(&all[..200]).unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut seen = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let r = t.read();
                    let n = r.classifier().len();
                    // Each commit adds or removes all the rules of the second half at once.
                    assert!(n == 200 || n == all.len(), "a reader saw {n} rules: half a bundle");
                    seen += 1;
                }
                seen
            });
            for round in 0..20 {
                let changes = if round % 2 == 0 {
                    all[200..].iter().cloned().map(RuleChange::Add).collect()
                } else {
                    all[200..].iter().map(|r| RuleChange::Remove(r.id)).collect()
                };
                t.commit(changes).unwrap();
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            assert!(reader.join().unwrap() > 0);
        });
        assert_eq!(t.version(), 20);
    }
}
