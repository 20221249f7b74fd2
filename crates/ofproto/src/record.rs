//! The switch's OpenFlow table of record ([`FlowTable`]): the flows by id, an index by
//! (priority, match) — OpenFlow's identity of a flow — and the next id to give; and the one
//! way it changes, a transaction ([`Txn`]) of flow-mods ([`FlowOp`]).
//!
//! A transaction applies its flow-mods to the record in order, keeping an undo log, and yields
//! the **net change** against the record as it was: the flows removed that existed before, and
//! the flows added that still exist at the end (a flow added and then deleted inside one
//! transaction never reaches the datapath). The caller commits that net change to the shared
//! OpenFlow table and the PMDs (`rqvs_switch::Control`) and then keeps the transaction, or aborts it
//! (the record goes back to what it was). Each flow-mod is checked before it touches the record,
//! so a refused one changes nothing: a bundle aborts the whole transaction, a run of single
//! flow-mods (`rqvs_switch::Control::apply_each`) just leaves the refused one out.
//!
//! **Hidden flows.** The switch's own table-0 flows are hidden from OpenFlow, as Open vSwitch
//! hides its: the fail-open rule while the switch is failed open (`--fail-mode standalone`
//! without a controller, `rqvs_switch::Control::fail_open`) and in-band control's rules
//! (`rqvs_switch::Control::set_in_band`). No selection ([`FlowTable::select`]: flow-mods'
//! modify and delete, flow stats) takes a flow at a hidden (priority, match). It is still a
//! flow of the table (`rqvs ctl dump-rules` shows it, `ovs-appctl bridge/dump-flows` too).
//!
//! Costs: an add, a strict modify and a strict delete find their flow through the index (no
//! scan); a non-strict modify or delete scans the table, as its selection is by match
//! containment. So one flow-mod costs O(1) or O(flows it selects), never a copy of the table
//! (an add with CHECK_OVERLAP scans the flows of its priority).
//!
//! Each flow keeps its state beside its rule ([`FlowMeta`], [`crate::flowstate`]: timeouts,
//! flags, times, carried counts, with OVS 3.1's add/modify/RESET_COUNTS semantics); a
//! transaction records which flow takes over each replaced or modified flow's counts
//! ([`NetChange::heir`]) and the flows it deleted or expired, with why ([`NetChange::deleted`]).
//!
//! **Tables.** The record holds the flows of every table, 0..=254 (`Rule::table`); a flow's
//! identity is (table, priority, match). A filter ([`FlowFilter::table`]) selects in one table
//! or all (`OFPTT_ALL`), and by `out_port` / `out_group` as OVS does (outputs and groups in the
//! apply actions and in `write_actions`). An add or modify is checked as OVS checks it
//! ([`check_flow`]): table 255 is `OFPFMFC_BAD_TABLE_ID`; a `goto_table` to the flow's own
//! table or an earlier one `OFPBIC_BAD_TABLE_ID`; a `group:G` naming a missing group
//! `OFPBAC_BAD_OUT_GROUP`; then whether the switch executes the actions.
//!
//! **Groups.** The group table ([`crate::groups`]) lives here too, changed by
//! [`FlowOp::Group`] in the same transactions: a group's deletion deletes the flows that name
//! it (reason `OFPRR_GROUP_DELETE`), as one change.
//!
//! **The datapath's view.** Every table's flows and the groups go to the datapath
//! ([`NetChange::added`], [`NetChange::removed`], [`NetChange::groups`]): the translation
//! (`crate::xlate`) walks the pipeline from table 0.

mod index;

use std::collections::{BTreeMap, BTreeSet};

// foldhash, not SipHash: a bundle of 125K flows hashes each match and id several times.
use hashbrown::HashMap;
use std::fmt;

use std::sync::Arc;

use crate::DpAction;
use index::{FlowIndex, Identity};
use rqvs_flow::group::Group;
use rqvs_flow::{Action, Actions, Match, Rule, RuleId};
use rqvs_openflow::flow_mod::{OFPFF_CHECK_OVERLAP, OFPFF_RESET_COUNTS};
use rqvs_openflow::group::GroupModCommand;
use rqvs_openflow::OfError;

use crate::flowstate::FlowCount;
pub use crate::flowstate::{Counts, FlowMeta, FlowSpec, Heir, Reason, KEPT_FLAGS};
use crate::groups::{groups_named, GroupEntry, GroupTable};
use rqvs_flow::formats::ofctl;

use crate::table::RuleChange;

/// The last table (`OFPTT_MAX`).
pub const LAST_TABLE: u8 = 254;

/// The actions the switch executes, for error messages.
pub const EXECUTED_ACTIONS: &str = "output:N, LOCAL, in_port, all, flood, NORMAL, drop, controller, mod_dl_src, mod_dl_dst, mod_vlan_vid, strip_vlan, mod_nw_tos, dec_ttl, push_vlan, set_field/mod_nw_*/mod_tp_* on the MACs, VLAN VID/PCP, IPv4 addresses/DSCP/ECN/TTL, TCP/UDP/SCTP ports, IPv6 addresses/flow label, ICMP type/code, ARP and ND fields, metadata, in_port, and the pipeline: goto_table, resubmit, group, meter, write_actions, clear_actions, write_metadata";

/// Refuses rules the switch cannot run as written (another table, an action it does not
/// execute, the id [`crate::NO_RULE`] that the datapath reads as "no rule" and the table of
/// record's index cannot hold), naming the rule.
pub fn check_rules(rules: &[Rule]) -> Result<(), String> {
    // The rule's text only when it is refused (formatting every rule would cost more than
    // checking it).
    let text = |r: &Rule| {
        ofctl::format_flows(r).ok().and_then(|v| v.into_iter().next()).unwrap_or_else(|| format!("rule {}", r.id))
    };
    for r in rules {
        // Numbered from 1 in messages (a rule's position in its file), in u64: id u32::MAX is
        // refused below, not wrapped to 0.
        let n = u64::from(r.id.0) + 1;
        if r.id == crate::NO_RULE {
            return Err(format!(
                "flow {n}: id {} is the datapath's mark for \"no rule\" — a table holds at most {} flows",
                r.id.0,
                crate::NO_RULE.0
            ));
        }
        if r.table > LAST_TABLE {
            let flow = text(r);
            return Err(format!("flow {n} ({flow}): table {} — tables are 0..=254", r.table));
        }
        if let Some(a) = r.actions.0.iter().find(|a| !a.is_executable()) {
            let flow = text(r);
            return Err(format!("flow {n} ({flow}): action '{a}' is not one the switch executes ({EXECUTED_ACTIONS})"));
        }
    }
    Ok(())
}

/// The checks of an add or modify against the tables and groups (module docs), before the
/// switch's own ([`check_rules`]: the actions it executes).
pub fn check_flow(r: &Rule, groups: &GroupTable) -> Result<(), OpError> {
    if r.table > LAST_TABLE {
        return Err(OpError::Of(
            OfError::FLOW_MOD_FAILED_BAD_TABLE_ID,
            format!("table {} (tables are 0..=254)", r.table),
        ));
    }
    let mut actions: Vec<&Action> = r.actions.0.iter().collect();
    for a in &r.actions.0 {
        if let Action::WriteActions(inner) = a {
            actions.extend(inner);
        }
    }
    for a in actions {
        match a {
            Action::GotoTable(t) if *t <= r.table => {
                return Err(OpError::Of(
                    OfError::BAD_INSTRUCTION_BAD_TABLE_ID,
                    format!("goto_table:{t} in table {}: a goto goes to a later table", r.table),
                ))
            }
            Action::GotoTable(t) if *t > LAST_TABLE => {
                return Err(OpError::Of(OfError::BAD_INSTRUCTION_BAD_TABLE_ID, format!("goto_table:{t}")))
            }
            _ => {}
        }
    }
    if let Some(g) = groups_named(&r.actions.0).find(|g| !groups.contains(*g)) {
        return Err(OpError::Of(OfError::BAD_ACTION_BAD_OUT_GROUP, format!("group {g} does not exist")));
    }
    check_rules(std::slice::from_ref(r)).map_err(|e| OpError::Of(OfError::BAD_ACTION_BAD_TYPE, e))
}

/// One flow-mod against the table of record.
#[derive(Clone, Debug)]
pub enum FlowOp {
    /// Add (replacing the flow of equal match and priority); the id is ignored.
    Add(Rule, FlowSpec),
    /// Replace the actions of the selected flows (module docs: what they keep).
    Modify(FlowFilter, Actions, Counts),
    /// Remove the selected flows (reason [`Reason::Delete`]).
    Delete(FlowFilter),
    /// Remove this flow, if it is still in the table: its idle or hard timeout passed.
    Expire(RuleId, Reason),
    /// A GROUP_MOD ([`crate::groups`]).
    Group(GroupModCommand, Group),
}

impl FlowOp {
    /// An add with no timeouts and no flags.
    pub fn add(r: Rule) -> FlowOp {
        FlowOp::Add(r, FlowSpec::default())
    }

    /// A modify that keeps the flows' counts.
    pub fn modify(f: FlowFilter, actions: Actions) -> FlowOp {
        FlowOp::Modify(f, actions, Counts::Keep)
    }
}

/// Why a flow-mod is refused (nothing changed).
#[derive(Debug)]
pub enum OpError {
    /// The switch cannot run what it would add (another table, an action it does not execute),
    /// or the change could not be committed.
    Invalid(String),
    /// An add with CHECK_OVERLAP overlaps a flow of the same priority (`OFPFMFC_OVERLAP`).
    Overlap(String),
    /// The flow's action list would be a new one in a full action table
    /// ([`crate::actions::admit_rule`], `OFPFMFC_TABLE_FULL`).
    TableFull(String),
    /// Refused with this OpenFlow error (a bad table, a missing group, a GROUP_MOD's checks).
    Of(OfError, String),
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpError::Invalid(e) => write!(f, "{e}"),
            OpError::Overlap(s) | OpError::TableFull(s) => f.write_str(s),
            OpError::Of(e, s) => write!(f, "{s} ({e})"),
        }
    }
}

/// Admits the rules' action lists into the datapath's action table (its limit: module docs of
/// [`crate::actions`]). Lists admitted for a flow-mod that is refused later stay.
fn admit_actions<'a>(rules: impl IntoIterator<Item = &'a Rule>) -> Result<(), OpError> {
    for r in rules {
        admit_one(r)?;
    }
    Ok(())
}

/// [`admit_actions`] of one rule; the id of its list, for [`crate::actions::hold_admitted`].
fn admit_one(r: &Rule) -> Result<Option<crate::actions::ActionsId>, OpError> {
    crate::actions::admit_rule(r).map_err(|e| OpError::TableFull(e.to_string()))
}

/// Which flows an OpenFlow modify, delete or flow-stats request selects.
#[derive(Clone, Debug)]
pub struct FlowFilter {
    /// The match: non-strict, every flow whose match is at least as specific (`None`: all);
    /// strict, the flow with exactly this match and `strict`'s priority.
    pub matches: Option<Match>,
    /// `Some(priority)`: strict.
    pub strict: Option<u32>,
    /// `(cookie, mask)`: only flows whose cookie agrees on the mask's bits (mask 0: all).
    pub cookie: (u64, u64),
    /// Only flows with an `output:N` to this port.
    pub out_port: Option<u32>,
    /// Only flows of this table (`None`: every table, OpenFlow's `OFPTT_ALL`).
    pub table: Option<u8>,
    /// Only flows with a `group:G` to this group.
    pub out_group: Option<u32>,
}

impl FlowFilter {
    /// Every flow.
    pub fn all() -> FlowFilter {
        FlowFilter { matches: None, strict: None, cookie: (0, 0), out_port: None, table: None, out_group: None }
    }

    /// Does it select `r`?
    pub fn selects(&self, r: &Rule) -> bool {
        let m = match (&self.matches, self.strict) {
            (None, None) => true,
            (Some(m), None) => covers(m, &r.matches),
            (m, Some(p)) => r.priority == p && m.is_none_or(|m| m == r.matches),
        };
        let (cookie, mask) = self.cookie;
        m && (r.cookie & mask) == (cookie & mask)
            && self.table.is_none_or(|t| r.table == t)
            && self.out_port.is_none_or(|p| outputs_to(&r.actions.0, p))
            && self.out_group.is_none_or(|g| groups_named(&r.actions.0).any(|x| x == g))
    }
}

/// Does the list (with its `write_actions`) output to port `p`?
fn outputs_to(actions: &[Action], p: u32) -> bool {
    actions.iter().any(|a| match a {
        Action::Output(o) => *o == p,
        Action::WriteActions(inner) => outputs_to(inner, p),
        _ => false,
    })
}

/// Does `general` match every packet `specific` matches? (Sound: value/mask containment on
/// every field and range containment on the ports.)
pub fn covers(general: &Match, specific: &Match) -> bool {
    let (gm, sm) = (general.mask(), specific.mask());
    gm.is_subset_of(sm)
        && specific.value().masked(gm) == *general.value()
        && range_within(specific.tp_src_range(), general.tp_src_range())
        && range_within(specific.tp_dst_range(), general.tp_dst_range())
}

/// A rule's identity (table, priority, match), borrowed.
fn identity(r: &Rule) -> Identity<'_> {
    (r.table, r.priority, &r.matches)
}

/// The one identity `op` probes the index for, when it names one: an add's, or a strict
/// selection's in the table it names.
fn op_identity(op: &FlowOp) -> Option<Identity<'_>> {
    match op {
        FlowOp::Add(r, _) => Some(identity(r)),
        FlowOp::Modify(f, ..) | FlowOp::Delete(f) => match (f.table, f.strict, &f.matches) {
            (Some(t), Some(p), Some(m)) => Some((t, p, m)),
            _ => None,
        },
        FlowOp::Expire(..) | FlowOp::Group(..) => None,
    }
}

fn range_within(inner: rqvs_flow::PortRange, outer: rqvs_flow::PortRange) -> bool {
    outer.lo <= inner.lo && inner.hi <= outer.hi
}

/// A flow of the table: its rule and its state.
type Flow = Box<(Rule, FlowMeta)>;

/// The table of record (module docs).
pub struct FlowTable {
    by_id: BTreeMap<RuleId, Flow>,
    index: FlowIndex,
    /// The number of flows in each table (hidden ones too), kept with `by_id`: a strict
    /// selection naming no table probes the index in the tables that have flows, and
    /// [`FlowTable::active_per_table`] reads it, neither walking every flow.
    per_table: Box<[u32; 256]>,
    /// The group table (copy on write: [`FlowTable::groups`] hands out the committed one).
    groups: Arc<GroupTable>,
    /// The flows with a timeout.
    timed: BTreeSet<RuleId>,
    next_id: u32,
    /// The table-0 (priority, match) pairs hidden from selections (module docs): a few.
    hidden: Vec<(u32, Match)>,
}

impl FlowTable {
    /// The table holding `rules` (their ids kept; a later duplicate of a (priority, match)
    /// pair replaces the earlier one, as a sequence of adds would), added at time 0 with no
    /// timeouts or flags.
    pub fn new(rules: Vec<Rule>) -> FlowTable {
        let next_id = rules.iter().map(|r| r.id.0.saturating_add(1)).max().unwrap_or(0);
        // The flows hold their lists, so the switch's action table frees the others (also
        // when it has no PMD to do it).
        crate::actions::enable_freeing();
        let mut t = FlowTable {
            by_id: BTreeMap::new(),
            index: FlowIndex::with_capacity(rules.len()),
            per_table: Box::new([0; 256]),
            groups: Arc::new(GroupTable::default()),
            timed: BTreeSet::new(),
            next_id,
            hidden: Vec::new(),
        };
        for r in rules {
            let held = crate::actions::hold_rule(&r);
            let h = t.index.hash(identity(&r));
            let by_id = &t.by_id;
            if let Some(old) =
                t.index.insert(h, r.id, |o| by_id.get(&o).is_some_and(|f| identity(&f.0) == identity(&r)))
            {
                if let Some(o) = t.by_id.remove(&old) {
                    crate::actions::release_held(o.1.held);
                    t.per_table[usize::from(o.0.table)] -= 1;
                }
            }
            t.per_table[usize::from(r.table)] += 1;
            t.by_id.insert(r.id, Box::new((r, FlowMeta { held, ..FlowMeta::default() })));
        }
        t
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn get(&self, id: RuleId) -> Option<&Rule> {
        self.by_id.get(&id).map(|f| &f.0)
    }

    /// A flow's state.
    pub fn meta(&self, id: RuleId) -> Option<&FlowMeta> {
        self.by_id.get(&id).map(|f| &f.1)
    }

    /// The flows in id order.
    pub fn iter(&self) -> impl Iterator<Item = &Rule> {
        self.by_id.values().map(|f| &f.0)
    }

    /// The flows with a timeout, and their state.
    pub fn timed(&self) -> impl Iterator<Item = (&Rule, &FlowMeta)> {
        self.timed.iter().filter_map(|id| self.by_id.get(id)).map(|f| (&f.0, &f.1))
    }

    /// Adds counts a flow took over to what it carries (`rqvs_switch::Control`, once the PMDs'
    /// counts of the flows it replaced are taken), with a hit at `used_ns` when they held one
    /// not seen yet.
    pub fn carry(&mut self, id: RuleId, c: &FlowCount, used_ns: Option<u64>) {
        if let Some(m) = self.by_id.get_mut(&id).map(|f| &mut f.1) {
            m.carried.add(c);
            m.used_ns = m.used_ns.max(used_ns.unwrap_or(0));
        }
    }

    /// The PMDs count `packets` under `id` at `now_ns` (the expiry thread looks): a count that
    /// moved since the last look is a hit, so the flow was used by now.
    pub fn observe(&mut self, id: RuleId, packets: u64, now_ns: u64) {
        if let Some(m) = self.by_id.get_mut(&id).map(|f| &mut f.1) {
            if packets != m.seen {
                m.seen = packets;
                m.used_ns = m.used_ns.max(now_ns);
            }
        }
    }

    /// The committed group table (a snapshot: module docs of [`crate::groups`]).
    pub fn groups(&self) -> Arc<GroupTable> {
        self.groups.clone()
    }

    /// The number of flows in each table that has any.
    pub fn active_per_table(&self) -> BTreeMap<u8, u32> {
        self.tables_with_flows().map(|t| (t, self.per_table[usize::from(t)])).collect()
    }

    /// The flow at identity `key` (table, priority, match), through the index; `h` is the
    /// key's hash when the caller has it.
    fn find(&self, key: Identity<'_>, h: Option<u64>) -> Option<RuleId> {
        let by_id = &self.by_id;
        let h = h.unwrap_or_else(|| self.index.hash(key));
        self.index.get(h, |id| by_id.get(&id).is_some_and(|f| identity(&f.0) == key))
    }

    /// The tables that have flows, in order.
    fn tables_with_flows(&self) -> impl Iterator<Item = u8> + '_ {
        (0..=u8::MAX).filter(|&t| self.per_table[usize::from(t)] > 0)
    }

    /// The ids of the flows `f` selects: through the index when `f` is strict with a match
    /// (in its table, or in each table when it names none). Never a hidden flow.
    pub fn select(&self, f: &FlowFilter) -> Vec<RuleId> {
        self.select_hashed(f, None)
    }

    /// [`FlowTable::select`]; `h`, when given, is the hash of the one identity `f` names
    /// ([`op_identity`]).
    fn select_hashed(&self, f: &FlowFilter, h: Option<u64>) -> Vec<RuleId> {
        match (&f.matches, f.strict) {
            (Some(m), Some(p)) => {
                let found = |t: u8| {
                    self.find((t, p, m), h.filter(|_| f.table.is_some()))
                        .filter(|id| self.by_id.get(id).is_some_and(|x| f.selects(&x.0) && !self.is_hidden(&x.0)))
                };
                match f.table {
                    Some(t) => found(t).into_iter().collect(),
                    None => self.tables_with_flows().filter_map(found).collect(),
                }
            }
            _ => self.by_id.values().filter(|x| f.selects(&x.0) && !self.is_hidden(&x.0)).map(|x| x.0.id).collect(),
        }
    }

    /// Hides table 0's flow at `key` (priority, match) from selections (module docs), or shows
    /// it again (`hide` false).
    pub fn set_hidden(&mut self, key: (u32, Match), hide: bool) {
        let at = self.hidden.iter().position(|k| *k == key);
        match (hide, at) {
            (true, None) => self.hidden.push(key),
            (false, Some(i)) => {
                self.hidden.swap_remove(i);
            }
            _ => {}
        }
    }

    /// Is table 0's (priority, match) `key` hidden from selections?
    pub fn hides(&self, key: (u32, Match)) -> bool {
        self.hidden.contains(&key)
    }

    /// Is `r` hidden from selections? (Hidden flows are table 0's.)
    pub fn is_hidden(&self, r: &Rule) -> bool {
        r.table == 0 && self.hides((r.priority, r.matches))
    }

    /// A transaction on the table at `now_ns` on the switch's clock (module docs).
    pub fn txn(&mut self, now_ns: u64) -> Txn<'_> {
        let next_id = self.next_id;
        Txn {
            table: self,
            undo: Vec::new(),
            next_id,
            now_ns,
            first: next_id,
            removed: Vec::new(),
            heir: HashMap::new(),
            deleted: Vec::new(),
        }
    }

    /// Every change of the flows goes through here and [`FlowTable::remove`]: each flow holds
    /// its action list in the datapath's action table while it is in the table
    /// ([`crate::actions::hold_rule`]).
    /// `h`, when given, is the hash of `f`'s identity.
    fn insert(&mut self, f: Flow, h: Option<u64>) -> Option<Flow> {
        let held = crate::actions::hold_rule(&f.0);
        self.insert_held(f, h, held)
    }

    /// [`FlowTable::insert`] of a flow whose list the caller has held already (`held`).
    fn insert_held(&mut self, mut f: Flow, h: Option<u64>, held: Option<crate::actions::ActionsId>) -> Option<Flow> {
        let (id, expires) = (f.0.id, f.1.expires());
        f.1.held = held;
        debug_assert!(h.is_none_or(|h| h == self.index.hash(identity(&f.0))), "the hash given is the flow's");
        let h = h.unwrap_or_else(|| self.index.hash(identity(&f.0)));
        let by_id = &self.by_id;
        let old = self
            .index
            .insert(h, id, |o| by_id.get(&o).is_some_and(|x| identity(&x.0) == identity(&f.0)))
            .and_then(|old| self.by_id.remove(&old));
        if let Some(o) = old.as_deref() {
            crate::actions::release_held(o.1.held);
            self.timed.remove(&o.0.id);
            self.per_table[usize::from(o.0.table)] -= 1;
        }
        if expires {
            self.timed.insert(id);
        }
        self.per_table[usize::from(f.0.table)] += 1;
        self.by_id.insert(id, f);
        old
    }

    /// `h`, when given, is the hash of the flow's identity.
    fn remove(&mut self, id: RuleId, h: Option<u64>) -> Option<Flow> {
        let f = self.by_id.remove(&id)?;
        crate::actions::release_held(f.1.held);
        self.per_table[usize::from(f.0.table)] -= 1;
        debug_assert!(h.is_none_or(|h| h == self.index.hash(identity(&f.0))), "the hash given is the flow's");
        self.index.remove(h.unwrap_or_else(|| self.index.hash(identity(&f.0))), id);
        self.timed.remove(&id);
        Some(f)
    }
}

impl Drop for FlowTable {
    /// The flows release their action lists.
    fn drop(&mut self) {
        for f in self.by_id.values() {
            crate::actions::release_held(f.1.held);
        }
    }
}

impl FlowTable {
    /// A flow of `table` and `priority` other than an identical one that some packet matches
    /// together with `m` (CHECK_OVERLAP).
    fn overlapping(&self, table: u8, priority: u32, m: &Match) -> Option<&Rule> {
        self.by_id
            .values()
            .map(|f| &f.0)
            .find(|r| r.table == table && r.priority == priority && r.matches != *m && r.matches.overlaps(m))
    }
}

/// What one flow-mod did to the table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpEffect {
    /// Flows added (an add, or a modify's replacements).
    pub added: usize,
    /// Flows removed (a delete's, a modify's originals, the flow an add replaced).
    pub removed: usize,
}

/// The net change of a transaction against the table as it was before it.
#[derive(Debug, Default)]
pub struct NetChange {
    /// Flows that exist after it and did not before (id order).
    pub added: Vec<Rule>,
    /// The datapath action of each flow of `added`, in its order ([`DpAction::from_rule`]'s),
    /// made from the list the flow holds in the action table — no search for it.
    pub actions: Vec<DpAction>,
    /// Flows that existed before it and do not after.
    pub removed: Vec<Rule>,
    /// Flows it deleted or expired (that existed before it, or that it added), with their state
    /// and why: those with SEND_FLOW_REM owe a FLOW_REMOVED.
    pub deleted: Vec<(Rule, FlowMeta, Reason)>,
    /// A flow replaced (by an add) or modified (under a new id) → the flow that takes over its
    /// counts.
    pub heir: HashMap<RuleId, Heir>,
    /// Groups it set or removed: each one's id and what it is after it (`None`: removed).
    pub groups: Vec<(u32, Option<Group>)>,
}

impl NetChange {
    /// The change set that brings the shared table ([`crate::OfprotoTable`]) where this net
    /// change brought the record: the removed flows' removals, then the added flows, then the
    /// groups set or removed. `table0`: whether the shared table holds table 0 (not when a
    /// learned classifier serves it, CFLOWS).
    pub fn table_changes(&self, table0: bool) -> Vec<RuleChange> {
        let in_table = |r: &&Rule| table0 || r.table != 0;
        let mut changes: Vec<RuleChange> =
            self.removed.iter().filter(in_table).map(|r| RuleChange::Remove(r.id)).collect();
        changes.extend(self.added.iter().filter(in_table).cloned().map(RuleChange::Add));
        for (id, g) in &self.groups {
            changes.push(match g {
                Some(g) => RuleChange::Group(g.clone()),
                None => RuleChange::RemoveGroup(*id),
            });
        }
        changes
    }

    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.groups.is_empty()
    }
}

enum Undo {
    /// A flow was inserted (and replaced this one, if any).
    Inserted(RuleId, Option<Flow>),
    Removed(Flow),
    /// A flow was deleted: it is the last of the transaction's `deleted` not yet taken back
    /// (held there once, not copied for the log as well).
    Deleted,
    /// A group was set or removed; this was there before.
    Group(u32, Option<GroupEntry>),
}

/// A transaction of flow-mods on a [`FlowTable`] (module docs). Dropping it without
/// [`Txn::keep`] undoes it.
pub struct Txn<'a> {
    table: &'a mut FlowTable,
    undo: Vec<Undo>,
    next_id: u32,
    now_ns: u64,
    /// The table's next id when the transaction began: the flows it added are the ones of
    /// this id or above (ids are handed out in order and never reused).
    first: u32,
    /// Flows that existed before it and it removed.
    removed: Vec<Rule>,
    /// See [`NetChange::heir`].
    heir: HashMap<RuleId, Heir>,
    /// See [`NetChange::deleted`].
    deleted: Vec<(Rule, FlowMeta, Reason)>,
}

/// How many flow-mods ahead [`Txn::apply_run`] asks for the index line a flow-mod will
/// probe: far enough for a miss to arrive while the flow-mods before it are applied (each
/// takes a few microseconds), near enough for the line to still be there.
pub const INDEX_AHEAD: usize = 8;

impl Txn<'_> {
    /// [`Txn::apply`] of each of `ops` in order, handing `each` the op's effect (it returns
    /// false to stop the run there). Each op's identity (an add's, a strict
    /// delete's or modify's in the table it names) is hashed once, [`INDEX_AHEAD`] ops before
    /// it is applied, and the index line it will probe asked for then: the run's index misses
    /// overlap with the work of the ops before them instead of following it, and the op's
    /// lookups and its insert or removal share the one hash. The effects are [`Txn::apply`]'s.
    pub fn apply_run(&mut self, ops: &[FlowOp], mut each: impl FnMut(Result<OpEffect, OpError>) -> bool) {
        const RING: usize = INDEX_AHEAD.next_power_of_two() * 2;
        let mut ring = [None; RING];
        // At most one entry per flow-mod for most runs (adds, strict deletes).
        self.undo.reserve(ops.len());
        let ask = |t: &FlowTable, ring: &mut [Option<u64>; RING], j: usize| {
            ring[j % RING] = ops.get(j).and_then(op_identity).map(|key| {
                let h = t.index.hash(key);
                t.index.prefetch(h);
                h
            });
        };
        for j in 0..INDEX_AHEAD.min(ops.len()) {
            ask(self.table, &mut ring, j);
        }
        for (i, op) in ops.iter().enumerate() {
            ask(self.table, &mut ring, i + INDEX_AHEAD);
            let e = self.apply_hashed(op, ring[i % RING]);
            if !each(e) {
                return;
            }
        }
    }

    /// Applies one flow-mod: checked first (an error changes nothing), then applied.
    pub fn apply(&mut self, op: &FlowOp) -> Result<OpEffect, OpError> {
        self.apply_hashed(op, None)
    }

    /// [`Txn::apply`]; `h`, when given, is the hash of `op`'s identity ([`op_identity`]): the
    /// index calls take it instead of hashing again. Every flow it inserts or removes with it
    /// has that identity (an add's flow and the one it replaces; the flows a strict
    /// selection in a named table finds).
    fn apply_hashed(&mut self, op: &FlowOp, h: Option<u64>) -> Result<OpEffect, OpError> {
        debug_assert!(h.is_none() || op_identity(op).is_some());
        match op {
            FlowOp::Add(r, spec) => {
                check_flow(r, &self.table.groups)?;
                let admitted = admit_one(r)?;
                let replaces = self.table.find(identity(r), h);
                if replaces.is_none() && spec.flags & OFPFF_CHECK_OVERLAP != 0 {
                    if let Some(o) = self.table.overlapping(r.table, r.priority, &r.matches) {
                        let text = |r: &Rule| rqvs_flow::formats::ofctl::format_match(&r.matches).unwrap_or_default();
                        return Err(OpError::Overlap(format!(
                            "check_overlap: priority {} {} overlaps {}",
                            r.priority,
                            text(r),
                            text(o)
                        )));
                    }
                }
                self.ids_for(1)?;
                let mut r = r.clone();
                r.id = self.new_id();
                let counts = if spec.flags & OFPFF_RESET_COUNTS != 0 { Counts::Reset } else { Counts::Keep };
                // OVS forwards the last hit too: the idle time goes on from the old flow's.
                let old = replaces.and_then(|id| self.table.meta(id)).copied();
                let meta =
                    old.map_or_else(|| FlowMeta::new(spec, self.now_ns), |o| o.heir(Some(spec), counts, self.now_ns));
                let id = r.id;
                let held = crate::actions::hold_admitted(&r, admitted);
                if let (Some(from), Some(o)) = (self.insert_held(Box::new((r, meta)), h, held), old) {
                    self.heir.insert(from, Heir { to: id, counts, seen: o.seen });
                }
                Ok(OpEffect { added: 1, removed: usize::from(replaces.is_some()) })
            }
            FlowOp::Modify(f, actions, counts) => {
                let ids = self.table.select_hashed(f, h);
                let mut new: Vec<Flow> = ids
                    .iter()
                    .filter_map(|id| self.table.by_id.get(id))
                    .map(|f| Box::new((Rule { actions: actions.clone(), ..f.0.clone() }, f.1)))
                    .collect();
                for f in &new {
                    check_flow(&f.0, &self.table.groups)?;
                }
                admit_actions(new.iter().map(|f| &f.0))?;
                self.ids_for(new.len())?;
                for (id, f) in ids.iter().zip(&mut new) {
                    let (r, m) = &mut **f;
                    if let Some(old) = self.take_out(*id, h) {
                        self.undo.push(Undo::Removed(old));
                    }
                    r.id = self.new_id();
                    // Kept: created, timeouts, flags, importance; the hard timeout restarts.
                    self.heir.insert(*id, Heir { to: r.id, counts: *counts, seen: m.seen });
                    *m = m.heir(None, *counts, self.now_ns);
                }
                let n = new.len();
                for f in new {
                    self.insert(f, h);
                }
                Ok(OpEffect { added: n, removed: n })
            }
            FlowOp::Delete(f) => {
                let ids = self.table.select_hashed(f, h);
                for id in &ids {
                    self.delete(*id, Reason::Delete, h);
                }
                Ok(OpEffect { added: 0, removed: ids.len() })
            }
            FlowOp::Expire(id, reason) => {
                let gone = self.delete(*id, *reason, None);
                Ok(OpEffect { added: 0, removed: usize::from(gone) })
            }
            FlowOp::Group(command, g) => {
                let gone = self.table.groups.check(*command, g).map_err(|(e, why)| OpError::Of(e, why))?;
                if *command != GroupModCommand::Delete {
                    let old = Arc::make_mut(&mut self.table.groups).set(g.clone(), self.now_ns);
                    self.undo.push(Undo::Group(g.id, old));
                    return Ok(OpEffect::default());
                }
                // The flows that name a deleted group go with it.
                let mut removed = 0;
                for id in gone {
                    let f = FlowFilter { out_group: Some(id), ..FlowFilter::all() };
                    for fid in self.table.select(&f) {
                        removed += usize::from(self.delete(fid, Reason::GroupDelete, None));
                    }
                    let old = Arc::make_mut(&mut self.table.groups).remove(id);
                    self.undo.push(Undo::Group(id, old));
                }
                Ok(OpEffect { added: 0, removed })
            }
        }
    }

    /// The change so far against the table as it was (module docs).
    pub fn net(&self) -> NetChange {
        // In id order, one walk along the end of the table (no lookup per flow), into lists
        // sized once: the flows added are among the ids handed out since `first` (grown by
        // doubling, a run's list of ~300-byte rules was copied ~10 times, into fresh pages).
        let most = (self.next_id - self.first) as usize;
        let (mut added, mut actions) = (Vec::with_capacity(most), Vec::with_capacity(most));
        for (_, f) in self.table.by_id.range(RuleId(self.first)..) {
            added.push(f.0.clone());
            actions.push(DpAction::of_held(&f.0, f.1.held));
        }
        let ids: BTreeSet<u32> =
            self.undo.iter().filter_map(|u| if let Undo::Group(id, _) = u { Some(*id) } else { None }).collect();
        let groups = ids.into_iter().map(|id| (id, self.table.groups.get(id).cloned())).collect();
        NetChange {
            added,
            actions,
            removed: self.removed.clone(),
            deleted: self.deleted.clone(),
            heir: self.heir.clone(),
            groups,
        }
    }

    /// Keeps the changes (the transaction was committed downstream).
    pub fn keep(mut self) {
        self.table.next_id = self.next_id;
        self.undo.clear();
    }

    /// Whether the change so far is empty, and whether it is all in table 0 (no flow of
    /// another table added or removed, no group set or removed) — what [`Txn::net`] would say,
    /// without making it.
    pub fn net_shape(&self) -> (bool, bool) {
        let added = self.table.by_id.range(RuleId(self.first)..).map(|(_, f)| &f.0);
        let groups = self.undo.iter().any(|u| matches!(u, Undo::Group(..)));
        let empty = self.removed.is_empty() && !groups && added.clone().next().is_none();
        let table0 = !groups && self.removed.iter().chain(added).all(|r| r.table == 0);
        (empty, table0)
    }

    /// Keeps the changes but not for good, handing over the net change ([`Txn::net`]) — moved
    /// out of the transaction, not copied (the added flows are, from the table): the commit
    /// downstream is still under way (a pipelined run, `rqvs_switch::Control::apply_each_pipelined`).
    /// [`FlowTable::undo`] with the returned log and that net change takes the transaction
    /// back — valid only while no other transaction has been kept on the table since (the
    /// caller's to ensure); a later transaction left unkept (dropped) undoes itself first, so
    /// it does not count.
    pub fn keep_undoable_net(mut self) -> (NetChange, KeptTxn) {
        let mut net = NetChange {
            added: Vec::new(),
            actions: Vec::new(),
            removed: std::mem::take(&mut self.removed),
            deleted: std::mem::take(&mut self.deleted),
            heir: std::mem::take(&mut self.heir),
            groups: Vec::new(),
        };
        let shell = self.net();
        (net.added, net.actions, net.groups) = (shell.added, shell.actions, shell.groups);
        self.table.next_id = self.next_id;
        (net, KeptTxn { undo: std::mem::take(&mut self.undo), next_id: self.first })
    }

    /// Ids are handed out in order and never reused (the transaction's added flows are those
    /// from `first` on, and the datapath may still hold a removed flow's id), up to the
    /// sentinel [`crate::NO_RULE`]: an add or modify that needs `n` more than are left is
    /// refused before it changes anything, rather than wrapping to a live flow's id.
    fn ids_for(&self, n: usize) -> Result<(), OpError> {
        let left = crate::NO_RULE.0 - self.next_id;
        if n > left as usize {
            return Err(OpError::TableFull(format!(
                "flow ids are used up: the table has handed out all {} (one per add and per modified \
                 flow since the switch started; rqvs does not reuse them)",
                crate::NO_RULE.0
            )));
        }
        Ok(())
    }

    /// The next id; [`Txn::ids_for`] said there is one.
    fn new_id(&mut self) -> RuleId {
        let id = RuleId(self.next_id);
        debug_assert!(id != crate::NO_RULE, "ids_for checked the limit");
        self.next_id += 1;
        id
    }

    /// Inserts `f` (`h`, when given: the hash of its identity); the id of the flow it
    /// replaced, if any.
    fn insert(&mut self, f: Flow, h: Option<u64>) -> Option<RuleId> {
        let held = crate::actions::hold_rule(&f.0);
        self.insert_held(f, h, held)
    }

    /// [`Txn::insert`] of a flow whose list is held already (`held`: [`crate::actions::hold_admitted`]).
    fn insert_held(&mut self, f: Flow, h: Option<u64>, held: Option<crate::actions::ActionsId>) -> Option<RuleId> {
        let id = f.0.id;
        let old = self.table.insert_held(f, h, held);
        if let Some(o) = old.as_ref().map(|f| &f.0) {
            self.forget(o);
        }
        let replaced = old.as_ref().map(|f| f.0.id);
        self.undo.push(Undo::Inserted(id, old));
        replaced
    }

    /// Takes flow `id` out of the table (`h`, when given: the hash of its identity); the
    /// caller logs how to put it back.
    fn take_out(&mut self, id: RuleId, h: Option<u64>) -> Option<Flow> {
        let f = self.table.remove(id, h)?;
        self.forget(&f.0);
        Some(f)
    }

    /// Removes a flow for `reason` (a delete, an expiry); false when it is not there. The flow
    /// goes to `deleted`, where the undo log finds it ([`Undo::Deleted`]).
    fn delete(&mut self, id: RuleId, reason: Reason, h: Option<u64>) -> bool {
        match self.take_out(id, h) {
            Some(f) => {
                let (r, m) = *f;
                self.deleted.push((r, m, reason));
                self.undo.push(Undo::Deleted);
                true
            }
            None => false,
        }
    }

    /// A flow left the table: net, it was added here (and is no more) or it existed before.
    fn forget(&mut self, r: &Rule) {
        if r.id.0 < self.first {
            self.removed.push(r.clone());
        }
    }
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        let Txn { table, undo, deleted, .. } = self;
        table.roll_back(std::mem::take(undo), deleted);
    }
}

/// A transaction kept with [`Txn::keep_undoable_net`]: with its net change, what
/// [`FlowTable::undo`] needs to take it back.
pub struct KeptTxn {
    undo: Vec<Undo>,
    /// The table's next id before the transaction (ids it handed out are handed out again).
    next_id: u32,
}

impl FlowTable {
    /// Takes back a transaction kept with [`Txn::keep_undoable_net`], given the net change it
    /// handed over (its deleted flows are the ones put back: the log does not copy them): the
    /// table is again what it was before it, its next id too (so the flows of a transaction
    /// redone after it get the ids they would have got). Only valid while no other transaction
    /// has been kept since.
    pub fn undo(&mut self, kept: KeptTxn, net: NetChange) {
        let mut deleted = net.deleted;
        self.roll_back(kept.undo, &mut deleted);
        debug_assert!(deleted.is_empty(), "the net change is the transaction's own");
        self.next_id = kept.next_id;
    }

    /// Undoes `undo` (last first); `deleted`: the transaction's deleted flows, those its
    /// [`Undo::Deleted`] entries put back (taken from the end).
    fn roll_back(&mut self, mut undo: Vec<Undo>, deleted: &mut Vec<(Rule, FlowMeta, Reason)>) {
        for u in undo.drain(..).rev() {
            match u {
                Undo::Inserted(id, old) => {
                    self.remove(id, None);
                    if let Some(o) = old {
                        self.insert(o, None);
                    }
                }
                Undo::Removed(r) => {
                    self.insert(r, None);
                }
                Undo::Deleted => {
                    let (r, m, _) = deleted.pop().expect("each deleted flow is logged once");
                    self.insert(Box::new((r, m)), None);
                }
                Undo::Group(id, old) => Arc::make_mut(&mut self.groups).restore(id, old),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_flow::formats::ofctl;
    use rqvs_openflow::flow_mod::OFPFF_SEND_FLOW_REM;

    fn rules(text: &str) -> Vec<Rule> {
        ofctl::parse_flows("t", text).unwrap()
    }

    fn texts(t: &FlowTable) -> Vec<String> {
        let mut v: Vec<String> = t.iter().flat_map(|r| ofctl::format_flows(r).unwrap()).collect();
        v.sort();
        v
    }

    /// A rule numbered `NO_RULE` (u32::MAX) is refused with an error naming it, not formatted
    /// as flow 0 (its number wrapped) nor handed to the index (which cannot hold it).
    #[test]
    fn the_no_rule_id_is_refused_by_name() {
        let mut r = rules("priority=1,actions=output:1").remove(0);
        r.id = crate::NO_RULE;
        let e = check_rules(&[r.clone()]).unwrap_err();
        assert!(e.starts_with("flow 4294967296: id 4294967295 is the datapath's mark"), "{e}");
        r.id = RuleId(crate::NO_RULE.0 - 1);
        r.table = 255;
        let e = check_rules(&[r]).unwrap_err();
        assert!(e.starts_with("flow 4294967295 ("), "{e}");
    }

    /// The record's net change as the shared table's change set: removals, then adds, then the
    /// groups; without table 0 (CFLOWS' learned classifier serves it) table-0 flows stay out.
    #[test]
    fn a_net_change_becomes_the_shared_tables_change_set() {
        use crate::table::RuleChange;
        use rqvs_flow::group::{Group, GroupType};
        let rs = rules(
            "table=0,priority=1,actions=output:1\n\
             table=1,priority=1,actions=output:2\n\
             table=0,priority=2,ip,actions=drop\n",
        );
        let net = NetChange {
            added: vec![rs[0].clone(), rs[1].clone()],
            actions: vec![DpAction::Output(1), DpAction::Output(2)],
            removed: vec![rs[2].clone()],
            deleted: Vec::new(),
            heir: HashMap::default(),
            groups: vec![(7, Some(Group { id: 7, kind: GroupType::All, buckets: Vec::new() })), (8, None)],
        };
        let names = |changes: Vec<RuleChange>| -> Vec<String> {
            changes
                .iter()
                .map(|c| match c {
                    RuleChange::Add(r) => format!("add {}", r.id.0),
                    RuleChange::Remove(id) => format!("remove {}", id.0),
                    RuleChange::Group(g) => format!("group {}", g.id),
                    RuleChange::RemoveGroup(id) => format!("remove group {id}"),
                    other => format!("{other:?}"),
                })
                .collect()
        };
        assert_eq!(names(net.table_changes(true)), ["remove 2", "add 0", "add 1", "group 7", "remove group 8"]);
        assert_eq!(names(net.table_changes(false)), ["add 1", "group 7", "remove group 8"]);
    }

    fn table() -> FlowTable {
        FlowTable::new(rules(
            "priority=10,tcp,tp_dst=80,actions=output:2\n\
             priority=20,ip,nw_src=10.0.0.0/8,actions=output:3\n\
             cookie=0x5,priority=30,udp,actions=drop\n",
        ))
    }

    #[test]
    fn an_add_or_modify_past_the_last_id_is_refused_and_changes_nothing() {
        let mut t = table();
        t.next_id = crate::NO_RULE.0 - 2;
        let before = texts(&t);
        let mut x = t.txn(0);
        // A modify of two flows with two ids left takes them both.
        let by_ip = FlowFilter { cookie: (0, u64::MAX), ..FlowFilter::all() };
        assert_eq!(x.apply(&FlowOp::modify(by_ip.clone(), Actions(vec![Action::Output(4)]))).unwrap().added, 2);
        // None left: an add is refused, and so is a modify, before either changes anything.
        let after = format!("{:?}", x.net());
        let add = FlowOp::add(rules("priority=5,arp,actions=output:1").remove(0));
        let e = x.apply(&add).unwrap_err();
        assert!(matches!(e, OpError::TableFull(_)) && e.to_string().contains("flow ids are used up"), "{e}");
        assert!(matches!(
            x.apply(&FlowOp::modify(by_ip, Actions(vec![Action::Output(5)]))),
            Err(OpError::TableFull(_))
        ));
        assert_eq!(format!("{:?}", x.net()), after);
        // A delete still works, and frees no id.
        assert_eq!(x.apply(&FlowOp::Delete(FlowFilter::all())).unwrap().removed, 3);
        assert!(matches!(x.apply(&add), Err(OpError::TableFull(_))));
        drop(x);
        assert_eq!(texts(&t), before);
        assert_eq!(t.next_id, crate::NO_RULE.0 - 2);
        // A table built from a flow holding the last id below the sentinel has none left either.
        let mut last = rules("priority=5,arp,actions=output:1");
        last[0].id = RuleId(crate::NO_RULE.0 - 1);
        let mut t = FlowTable::new(last);
        assert!(matches!(t.txn(0).apply(&add), Err(OpError::TableFull(_))));
    }

    #[test]
    fn a_dropped_transaction_leaves_the_table_as_it_was() {
        let mut t = table();
        let before = texts(&t);
        let index_before = t.index.clone();
        {
            let mut x = t.txn(0);
            x.apply(&FlowOp::add(rules("priority=10,tcp,tp_dst=80,actions=output:1").remove(0))).unwrap();
            x.apply(&FlowOp::Delete(FlowFilter::all())).unwrap();
            x.apply(&FlowOp::add(rules("priority=5,arp,actions=output:1").remove(0))).unwrap();
        }
        assert_eq!(texts(&t), before);
        assert_eq!(t.index, index_before);
        assert_eq!(t.next_id, 3);
    }

    #[test]
    fn a_kept_transaction_is_undone_under_a_dropped_one_and_redone_alike() {
        let mut t = table();
        let (before, index_before) = (texts(&t), t.index.clone());
        let first = |x: &mut Txn<'_>| {
            x.apply(&FlowOp::add(rules("priority=10,tcp,tp_dst=80,actions=output:1").remove(0))).unwrap();
            x.apply(&FlowOp::Delete(FlowFilter { cookie: (5, u64::MAX), ..FlowFilter::all() })).unwrap();
            x.apply(&FlowOp::add(rules("priority=5,arp,actions=output:1").remove(0))).unwrap();
        };
        let mut x = t.txn(0);
        first(&mut x);
        assert_eq!(x.net_shape(), (false, true));
        let expected = format!("{:?}", x.net());
        let (net, kept) = x.keep_undoable_net();
        assert_eq!(format!("{net:?}"), expected, "the net change handed over is the one net() makes");
        let after_first = texts(&t);
        assert_ne!(after_first, before);
        // A later transaction on top, dropped (it undoes itself), then the first one undone.
        {
            let mut y = t.txn(0);
            assert_eq!(y.net_shape(), (true, true));
            y.apply(&FlowOp::Delete(FlowFilter::all())).unwrap();
            y.apply(&FlowOp::add(rules("table=1,priority=7,udp,actions=output:3").remove(0))).unwrap();
            assert_eq!(y.net_shape(), (false, false));
        }
        assert_eq!(texts(&t), after_first);
        t.undo(kept, net);
        assert_eq!(texts(&t), before);
        assert_eq!(t.index, index_before);
        assert_eq!(t.next_id, 3);
        // Redone, it gives the same flows the same ids.
        let mut x = t.txn(0);
        first(&mut x);
        x.keep();
        assert_eq!(texts(&t), after_first);
        assert_eq!(t.iter().map(|r| r.id.0).collect::<Vec<_>>(), vec![1, 3, 4]);
    }

    #[test]
    fn net_change_counts_only_what_crosses_the_transaction() {
        let mut t = table();
        let mut x = t.txn(0);
        // Replaces flow 0: removed (existed before), and the new one added.
        let e = x.apply(&FlowOp::add(rules("priority=10,tcp,tp_dst=80,actions=output:1").remove(0))).unwrap();
        assert_eq!(e, OpEffect { added: 1, removed: 1 });
        // Added then deleted inside: never crosses.
        x.apply(&FlowOp::add(rules("priority=5,arp,actions=output:1").remove(0))).unwrap();
        let strict = |text: &str| {
            let r = rules(text).remove(0);
            FlowFilter { matches: Some(r.matches), strict: Some(r.priority), ..FlowFilter::all() }
        };
        assert_eq!(x.apply(&FlowOp::Delete(strict("priority=5,arp,actions=drop"))).unwrap().removed, 1);
        // A modify by cookie: the original removed, a replacement added.
        let by_cookie = FlowFilter { cookie: (5, u64::MAX), ..FlowFilter::all() };
        let m = x.apply(&FlowOp::modify(by_cookie, Actions(vec![Action::Output(1)]))).unwrap();
        assert_eq!(m, OpEffect { added: 1, removed: 1 });
        let net = x.net();
        let ids = |v: &[Rule]| v.iter().map(|r| r.id.0).collect::<Vec<_>>();
        assert_eq!(ids(&net.removed), vec![0, 2]);
        assert_eq!(ids(&net.added), vec![3, 5]);
        x.keep();
        assert_eq!(t.len(), 3);
        assert_eq!(t.next_id, 6);
        assert_eq!(t.select(&strict("priority=10,tcp,tp_dst=80,actions=drop")), vec![RuleId(3)]);
    }

    /// The actions a net change hands over are those the rules make (the lists their flows hold
    /// in the action table), also in the net change `keep_undoable_net` moves out.
    #[test]
    fn net_change_actions_are_the_rules_own() {
        let mut t = table();
        let mut x = t.txn(0);
        for text in [
            "priority=40,tcp,tp_dst=22,actions=output:1",
            "priority=41,udp,actions=drop",
            "priority=42,ip,nw_dst=10.1.0.0/16,actions=mod_dl_dst:00:00:00:00:00:07,output:2",
            "priority=43,arp,actions=output:1,output:3",
        ] {
            x.apply(&FlowOp::add(rules(text).remove(0))).unwrap();
        }
        let net = x.net();
        assert_eq!(net.actions.len(), 4);
        assert!(matches!(net.actions[2], DpAction::Apply(_)) && matches!(net.actions[3], DpAction::Apply(_)));
        for (r, a) in net.added.iter().zip(&net.actions) {
            assert_eq!(*a, DpAction::from_rule(r), "flow {}", r.id.0);
        }
        let (moved, _kept) = x.keep_undoable_net();
        assert_eq!(moved.actions, net.actions);
    }

    #[test]
    fn an_unheld_flows_action_is_the_rules_own() {
        for text in [
            "priority=1,actions=drop",
            "priority=1,actions=output:4",
            "priority=1,actions=output:1,output:3",
            "priority=1,actions=mod_dl_dst:00:00:00:00:00:07,output:2",
            "priority=1,actions=goto_table:1",
            "priority=1,actions=output:2,goto_table:1",
        ] {
            let r = rules(text).remove(0);
            // The action of the rule's whole op list, as the translation makes it.
            let ops: Vec<_> = r.actions.0.iter().filter_map(|a| crate::actions::Op::of_rule(a, &r)).collect();
            assert_eq!(DpAction::of_held(&r, None), DpAction::of_op_list(&ops), "{text}");
        }
    }

    #[test]
    fn a_refused_flow_mod_changes_nothing() {
        let mut t = table();
        let before = texts(&t);
        let mut x = t.txn(0);
        let mut bad = rules("priority=1,actions=output:1").remove(0);
        bad.table = 255;
        assert!(x.apply(&FlowOp::add(bad)).is_err());
        assert!(x.net().is_empty());
        x.keep();
        assert_eq!(texts(&t), before);
    }

    #[test]
    fn strict_selection_through_the_index_equals_the_scan() {
        let t = table();
        for r in t.iter() {
            for p in [r.priority, r.priority + 1] {
                let f = FlowFilter { matches: Some(r.matches), strict: Some(p), ..FlowFilter::all() };
                let scan: Vec<RuleId> = t.iter().filter(|o| f.selects(o)).map(|o| o.id).collect();
                assert_eq!(t.select(&f), scan);
            }
        }
    }

    /// The flows per table the table keeps ([`FlowTable::active_per_table`], and the tables a
    /// strict selection naming none probes) against a count over every flow, through adds in
    /// several tables, replacements, deletes, and a transaction taken back.
    #[test]
    fn flows_per_table_stay_counted() {
        let walk = |t: &FlowTable| {
            let mut n = BTreeMap::new();
            for r in t.iter() {
                *n.entry(r.table).or_insert(0u32) += 1;
            }
            n
        };
        let check = |t: &FlowTable| {
            assert_eq!(t.active_per_table(), walk(t));
            for r in t.iter() {
                let f = FlowFilter { matches: Some(r.matches), strict: Some(r.priority), ..FlowFilter::all() };
                let mut scan: Vec<RuleId> = t.iter().filter(|o| f.selects(o)).map(|o| o.id).collect();
                let mut got = t.select(&f);
                scan.sort();
                got.sort();
                assert_eq!(got, scan, "strict, every table: {r:?}");
            }
        };
        let mut t = table();
        check(&t);
        let base = t.iter().next().unwrap().clone();
        let in_table = |table: u8, port: u32| {
            let mut r = base.clone();
            r.table = table;
            r.actions = Actions::output(port);
            r
        };
        let mut x = t.txn(0);
        for (table, port) in [(3, 1), (7, 1), (3, 2), (200, 4)] {
            x.apply(&FlowOp::add(in_table(table, port))).unwrap();
        }
        x.keep();
        check(&t);
        assert_eq!(t.active_per_table().get(&3), Some(&1), "the second add in table 3 replaced the first");
        // Strict, no table: the same (priority, match) in tables 0, 3, 7 and 200.
        let every = FlowFilter { matches: Some(base.matches), strict: Some(base.priority), ..FlowFilter::all() };
        assert_eq!(t.select(&every).len(), 4);
        {
            let mut x = t.txn(0);
            x.apply(&FlowOp::Delete(every.clone())).unwrap();
            check(&*x.table);
        }
        check(&t);
        assert_eq!(t.select(&every).len(), 4, "the dropped transaction took its deletes back");
        let mut x = t.txn(0);
        assert_eq!(x.apply(&FlowOp::Delete(every.clone())).unwrap().removed, 4);
        x.keep();
        check(&t);
        assert!(t.select(&every).is_empty());
    }

    fn strict(text: &str) -> FlowFilter {
        let r = rules(text).remove(0);
        FlowFilter { matches: Some(r.matches), strict: Some(r.priority), ..FlowFilter::all() }
    }

    fn spec(idle: u16, hard: u16, flags: u16) -> FlowSpec {
        FlowSpec { idle_timeout: idle, hard_timeout: hard, flags, importance: 0 }
    }

    /// OVS 3.1's flow state: a modify keeps creation, timeouts, flags and counts (not with
    /// RESET_COUNTS) and restarts the hard timeout; an add that replaces starts a new flow with
    /// the old one's counts (not with RESET_COUNTS) and last hit; heirs are recorded for the
    /// PMDs' counts; deletes and expiries are reported with their state and reason.
    #[test]
    fn flow_state_follows_ovs() {
        let mut t = FlowTable::new(Vec::new());
        let add = |r: &str, s: FlowSpec| FlowOp::Add(rules(r).remove(0), s);
        let only = |t: &FlowTable| t.iter().next().unwrap().id;
        let mut x = t.txn(1_000);
        x.apply(&add("priority=10,tcp,actions=output:2", spec(5, 60, OFPFF_SEND_FLOW_REM | 0x20))).unwrap();
        x.keep();
        let id0 = only(&t);
        let m0 = *t.meta(id0).unwrap();
        assert_eq!((m0.created_ns, m0.modified_ns, m0.idle_timeout, m0.hard_timeout), (1_000, 1_000, 5, 60));
        assert_eq!(m0.flags, OFPFF_SEND_FLOW_REM, "only the kept flags");
        assert_eq!((m0.carried, m0.used_ns), (FlowCount::default(), 1_000), "used when added");
        assert_eq!(t.timed().count(), 1);
        t.carry(id0, &FlowCount { packets: 7, bytes: 700 }, Some(1_500));

        // Modify: a new id; created, timeouts, flags, counts and last hit kept; modified now.
        let mut x = t.txn(2_000);
        x.apply(&FlowOp::modify(strict("priority=10,tcp,actions=drop"), Actions(vec![Action::Output(3)]))).unwrap();
        let net = x.net();
        x.keep();
        let id1 = only(&t);
        assert_ne!(id1, id0);
        assert_eq!(net.heir.get(&id0), Some(&Heir { to: id1, counts: Counts::Keep, seen: 0 }));
        let m1 = *t.meta(id1).unwrap();
        let state = |m: &FlowMeta| (m.created_ns, m.modified_ns, m.idle_timeout, m.hard_timeout, m.flags);
        assert_eq!(state(&m1), (1_000, 2_000, 5, 60, 1));
        assert_eq!((m1.carried, m1.used_ns), (FlowCount { packets: 7, bytes: 700 }, 1_500));
        // The expiry thread sees its count move: a hit; a count that stays is none.
        t.observe(id1, 4, 2_500);
        t.observe(id1, 4, 2_700);
        assert_eq!((t.meta(id1).unwrap().seen, t.meta(id1).unwrap().used_ns), (4, 2_500));

        // Modify with RESET_COUNTS: the counts restart, the last hit stays.
        let mut x = t.txn(3_000);
        let reset =
            FlowOp::Modify(strict("priority=10,tcp,actions=drop"), Actions(vec![Action::Output(2)]), Counts::Reset);
        x.apply(&reset).unwrap();
        let net = x.net();
        x.keep();
        let id2 = only(&t);
        assert_eq!(net.heir.get(&id1), Some(&Heir { to: id2, counts: Counts::Reset, seen: 4 }));
        let m2 = *t.meta(id2).unwrap();
        assert_eq!((m2.carried, m2.used_ns, m2.seen), (FlowCount::default(), 2_500, 0));
        t.carry(id2, &FlowCount { packets: 3, bytes: 300 }, Some(3_500));

        // An add that replaces: a new flow (created now, its own timeouts and flags) with the
        // old counts and last hit; no FLOW_REMOVED for the replaced one.
        let mut x = t.txn(4_000);
        x.apply(&add("priority=10,tcp,actions=output:1", spec(0, 0, 0))).unwrap();
        let net = x.net();
        x.keep();
        let id3 = only(&t);
        assert_eq!(net.heir.get(&id2).map(|h| (h.to, h.counts)), Some((id3, Counts::Keep)));
        assert!(net.deleted.is_empty());
        let m3 = *t.meta(id3).unwrap();
        assert_eq!(state(&m3), (4_000, 4_000, 0, 0, 0));
        assert_eq!((m3.carried, m3.used_ns), (FlowCount { packets: 3, bytes: 300 }, 3_500));
        assert_eq!(t.timed().count(), 0, "no timeout any more");
        // ... and with RESET_COUNTS, none.
        let mut x = t.txn(5_000);
        x.apply(&add("priority=10,tcp,actions=output:1", spec(0, 0, OFPFF_RESET_COUNTS))).unwrap();
        x.keep();
        let m4 = *t.meta(only(&t)).unwrap();
        assert_eq!((m4.carried, m4.used_ns), (FlowCount::default(), 3_500));
        let id4 = only(&t);

        // Delete and expire: reported with state and reason; an expiry of a flow gone is nothing.
        let mut x = t.txn(6_000);
        x.apply(&add("priority=20,udp,actions=output:1", spec(1, 0, OFPFF_SEND_FLOW_REM))).unwrap();
        let gone = x.apply(&FlowOp::Delete(strict("priority=10,tcp,actions=drop"))).unwrap();
        assert_eq!(gone.removed, 1);
        let udp = x.net().added[0].id;
        assert_eq!(x.apply(&FlowOp::Expire(udp, Reason::IdleTimeout)).unwrap().removed, 1);
        assert_eq!(x.apply(&FlowOp::Expire(udp, Reason::IdleTimeout)).unwrap().removed, 0);
        let net = x.net();
        x.keep();
        let why: Vec<(RuleId, Reason)> = net.deleted.iter().map(|(r, _, w)| (r.id, *w)).collect();
        assert_eq!(why, vec![(id4, Reason::Delete), (udp, Reason::IdleTimeout)]);
        assert!(t.is_empty() && t.timed().count() == 0);
    }

    /// CHECK_OVERLAP refuses an add that some packet could match together with a flow of the
    /// same priority (not one of another priority, not the identical flow, which it replaces),
    /// and changes nothing.
    #[test]
    fn check_overlap_refuses_overlapping_adds_of_equal_priority() {
        let mut t = table();
        let before = texts(&t);
        let check = spec(0, 0, OFPFF_CHECK_OVERLAP);
        let mut x = t.txn(0);
        // tcp,tp_dst=80 at 10 holds; tcp,nw_src=10.0.0.0/8 at 10 overlaps it (a packet from
        // 10.1.1.1 to port 80 matches both).
        let r = x.apply(&FlowOp::Add(rules("priority=10,tcp,nw_src=10.0.0.0/8,actions=drop").remove(0), check));
        assert!(matches!(r, Err(OpError::Overlap(_))), "{r:?}");
        // Disjoint: udp at 10.
        x.apply(&FlowOp::Add(rules("priority=10,udp,actions=drop").remove(0), check)).unwrap();
        // Same match at another priority: no overlap at its priority.
        x.apply(&FlowOp::Add(rules("priority=11,tcp,tp_dst=80,actions=drop").remove(0), check)).unwrap();
        // The identical flow: replaced, not refused.
        let e = x.apply(&FlowOp::Add(rules("priority=10,tcp,tp_dst=80,actions=output:9").remove(0), check)).unwrap();
        assert_eq!(e.removed, 1);
        // Without the flag an overlapping add is taken.
        x.apply(&FlowOp::add(rules("priority=10,tcp,nw_src=10.0.0.0/8,actions=drop").remove(0))).unwrap();
        drop(x);
        assert_eq!(texts(&t), before);
    }

    /// The table's flows as comparable text: (priority, match, cookie, actions).
    fn contents<'a>(rules: impl Iterator<Item = &'a Rule>) -> Vec<String> {
        let mut v: Vec<String> = rules
            .map(|r| format!("{}|{:?}|{:?}|{}|{:?}", r.table, r.priority, r.matches, r.cookie, r.actions))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn tables_and_groups() {
        use rqvs_flow::group::{Bucket, GroupType};
        let mut t = table();
        let g = |id, a: Vec<Action>| Group { id, kind: GroupType::All, buckets: vec![Bucket::new(Actions(a))] };
        let mut x = t.txn(0);
        // The same (priority, match) in two tables: two flows; table 255 refused.
        let mut r1 = rules("priority=10,tcp,tp_dst=80,actions=output:1").remove(0);
        r1.table = 1;
        assert_eq!(x.apply(&FlowOp::add(r1.clone())).unwrap(), OpEffect { added: 1, removed: 0 });
        let mut bad = r1.clone();
        bad.table = 255;
        assert!(matches!(x.apply(&FlowOp::add(bad)), Err(OpError::Of(OfError::FLOW_MOD_FAILED_BAD_TABLE_ID, _))));
        // goto_table backward or to itself: BAD_TABLE_ID; forward: accepted (here it replaces
        // the flow of the same table, priority and match).
        for (to, e) in [(1, OfError::BAD_INSTRUCTION_BAD_TABLE_ID), (0, OfError::BAD_INSTRUCTION_BAD_TABLE_ID)] {
            let mut r = r1.clone();
            r.actions = Actions(vec![Action::GotoTable(to)]);
            match x.apply(&FlowOp::add(r)) {
                Err(OpError::Of(got, why)) => assert_eq!(got, e, "goto_table:{to}: {why}"),
                other => panic!("goto_table:{to}: {other:?}"),
            }
        }
        let mut forward = r1.clone();
        forward.actions = Actions(vec![Action::GotoTable(2)]);
        assert_eq!(x.apply(&FlowOp::add(forward)).unwrap(), OpEffect { added: 1, removed: 1 });
        // A flow naming a missing group: BAD_OUT_GROUP.
        let mut r = r1.clone();
        r.actions = Actions(vec![Action::Group(7)]);
        assert!(matches!(x.apply(&FlowOp::add(r)), Err(OpError::Of(OfError::BAD_ACTION_BAD_OUT_GROUP, _))));
        // Groups: add, exists, then modify.
        x.apply(&FlowOp::Group(GroupModCommand::Add, g(7, vec![Action::Output(1)]))).unwrap();
        assert!(matches!(
            x.apply(&FlowOp::Group(GroupModCommand::Add, g(7, vec![]))),
            Err(OpError::Of(OfError::GROUP_MOD_FAILED_GROUP_EXISTS, _))
        ));
        x.apply(&FlowOp::Group(GroupModCommand::Modify, g(7, vec![Action::Output(2)]))).unwrap();
        // Delete in table 1 only; then with table=ALL.
        let in_table = |t| FlowFilter { table: Some(t), ..FlowFilter::all() };
        assert_eq!(x.apply(&FlowOp::Delete(in_table(1))).unwrap().removed, 1);
        assert_eq!(x.apply(&FlowOp::Delete(in_table(1))).unwrap().removed, 0);
        x.keep();
        assert_eq!(t.len(), 3);
        assert_eq!(t.groups().get(7).unwrap().buckets[0].actions, Actions::output(2));
        assert_eq!(t.active_per_table(), BTreeMap::from([(0, 3)]));
        // A dropped transaction takes its group changes back.
        {
            let mut x = t.txn(0);
            x.apply(&FlowOp::Group(GroupModCommand::Add, g(8, vec![]))).unwrap();
            x.apply(&FlowOp::Group(GroupModCommand::Delete, g(7, vec![]))).unwrap();
        }
        assert!(t.groups().get(7).is_some() && t.groups().get(8).is_none());
    }

    /// Deleting a group deletes the flows that name it (in apply actions or write_actions, in
    /// any table), with reason GROUP_DELETE; out_group selects them.
    #[test]
    fn a_group_delete_takes_its_flows() {
        use rqvs_flow::group::{Bucket, GroupType};
        let mut named =
            rules("priority=5,ip,actions=drop\npriority=6,ip,actions=drop\npriority=7,ip,actions=output:1").into_iter();
        let mut a = named.next().unwrap();
        a.actions = Actions(vec![Action::Group(3)]);
        let mut b = named.next().unwrap();
        b.table = 4;
        b.id = RuleId(1);
        b.actions = Actions(vec![Action::WriteActions(vec![Action::Group(3)])]);
        let mut c = named.next().unwrap();
        c.id = RuleId(2);
        let mut t = FlowTable::new(vec![a, b, c]);
        let g3 = Group { id: 3, kind: GroupType::Indirect, buckets: vec![Bucket::new(Actions::output(2))] };
        let mut x = t.txn(0);
        x.apply(&FlowOp::Group(GroupModCommand::Add, g3.clone())).unwrap();
        x.keep();
        let by_group = FlowFilter { out_group: Some(3), ..FlowFilter::all() };
        assert_eq!(t.select(&by_group), vec![RuleId(0), RuleId(1)]);
        let mut x = t.txn(0);
        let e = x.apply(&FlowOp::Group(GroupModCommand::Delete, Group { buckets: vec![], ..g3 })).unwrap();
        assert_eq!(e.removed, 2);
        let net = x.net();
        assert!(net.deleted.iter().all(|(_, _, why)| *why == Reason::GroupDelete));
        x.keep();
        assert_eq!(t.len(), 1);
        assert!(t.groups().is_empty());
    }

    const MATCHES: [&str; 7] =
        ["", "ip,", "tcp,", "tcp,tp_dst=80,", "ip,nw_src=10.0.0.0/8,", "ip,nw_src=10.1.0.0/16,", "udp,"];

    /// One op; `table` 3 is "every table" in a filter (an add goes to table 0 then).
    #[allow(clippy::too_many_arguments)]
    fn op_of(kind: u8, p: u32, m: usize, cookie: u64, out: u32, strict: bool, any_match: bool, table: u8) -> FlowOp {
        let mut r = rules(&format!("cookie={cookie},priority={p},{}actions=output:{out}", MATCHES[m])).remove(0);
        r.table = table % 3;
        let filter = FlowFilter {
            matches: (!any_match).then_some(r.matches),
            strict: strict.then_some(p),
            cookie: if cookie == 2 { (0, 0) } else { (cookie, u64::MAX) },
            out_port: (out == 3).then_some(2),
            table: (table < 3).then_some(table),
            out_group: None,
        };
        match kind % 3 {
            0 => FlowOp::add(r),
            1 => FlowOp::modify(filter, r.actions),
            _ => FlowOp::Delete(filter),
        }
    }

    /// The definition: each op on a plain list, scanning it.
    fn naive(list: &mut Vec<Rule>, op: &FlowOp) {
        match op {
            FlowOp::Add(r, _) => {
                list.retain(|o| !(o.table == r.table && o.priority == r.priority && o.matches == r.matches));
                list.push(r.clone());
            }
            FlowOp::Modify(f, a, _) => {
                for r in list.iter_mut().filter(|r| f.selects(r)) {
                    r.actions = a.clone();
                }
            }
            FlowOp::Delete(f) => list.retain(|r| !f.selects(r)),
            FlowOp::Expire(id, _) => list.retain(|r| r.id != *id),
            FlowOp::Group(..) => unreachable!("no group ops in this test"),
        }
    }

    proptest::proptest! {
        #[test]
        fn transactions_agree_with_the_definition(
            start in proptest::collection::vec((1u32..4, 0usize..7, 0u64..3, 1u32..4, 0u8..3), 0..12),
            ops in proptest::collection::vec(((0u8..3, 1u32..4, 0usize..7, 0u64..3, 1u32..4), proptest::bool::ANY, proptest::bool::ANY, 0u8..4), 1..20),
            keep in proptest::bool::ANY,
        ) {
            let start: Vec<Rule> = start
                .iter()
                .enumerate()
                .map(|(i, &(p, m, c, o, table))| {
                    let mut r = rules(&format!("cookie={c},priority={p},{}actions=output:{o}", MATCHES[m])).remove(0);
                    r.id = RuleId(i as u32);
                    r.table = table;
                    r
                })
                .collect();
            let mut t = FlowTable::new(start.clone());
            let mut list: Vec<Rule> = t.iter().cloned().collect();
            let before = contents(t.iter());
            let ops: Vec<FlowOp> = ops.iter().map(|&((k, p, m, c, o), s, a, t)| op_of(k, p, m, c, o, s, a, t)).collect();
            let mut x = t.txn(0);
            // One by one when not kept, as a run (the switch's way) when kept: the same effects.
            for op in &ops {
                if !keep {
                    x.apply(op).unwrap();
                }
                naive(&mut list, op);
            }
            if keep {
                x.apply_run(&ops, |e| {
                    e.unwrap();
                    true
                });
            }
            let net = x.net();
            if keep {
                x.keep();
                proptest::prop_assert_eq!(contents(t.iter()), contents(list.iter()));
                // Before − removed + added = after.
                let removed: std::collections::HashSet<RuleId> = net.removed.iter().map(|r| r.id).collect();
                // Removed: flows of the table before, once each; added: flows of the table after.
                let was = FlowTable::new(start.clone());
                proptest::prop_assert_eq!(removed.len(), net.removed.len());
                proptest::prop_assert!(net.removed.iter().all(|r| was.get(r.id).is_some()));
                proptest::prop_assert!(net.added.iter().all(|r| was.get(r.id).is_none() && t.get(r.id).is_some()));
                let mut rebuilt: Vec<Rule> = FlowTable::new(start.clone()).iter().filter(|r| !removed.contains(&r.id)).cloned().collect();
                rebuilt.extend(net.added.iter().cloned());
                proptest::prop_assert_eq!(contents(rebuilt.iter()), contents(t.iter()));
                // The index holds exactly the table.
                proptest::prop_assert_eq!(t.index.len(), t.len());
                for r in t.iter() {
                    proptest::prop_assert_eq!(t.find(identity(r), None), Some(r.id));
                }
            } else {
                drop(x);
                proptest::prop_assert_eq!(contents(t.iter()), before);
            }
        }
    }
}
