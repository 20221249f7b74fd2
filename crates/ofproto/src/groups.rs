//! The switch's group table (OpenFlow 1.3 §5.6): the groups by id, kept in the table of record
//! ([`crate::record::FlowTable`]) and changed by the same transactions as the flows, so a
//! GROUP_MOD that deletes a group and the flows that use it is one change, and a bundle may
//! mix both.
//!
//! The table is a value behind an [`Arc`]: a transaction changes a copy (copy on write), and
//! [`FlowTable::groups`](crate::record::FlowTable::groups) hands out the committed one — a
//! plain snapshot the datapath's translation reads without a lock.
//!
//! GROUP_MOD's checks, as Open vSwitch 3.1 makes them ([`GroupTable::check`]):
//! - an id above `OFPG_MAX` → `OFPGMFC_INVALID_GROUP`; an add of an existing id →
//!   `OFPGMFC_GROUP_EXISTS`; a modify of a missing one → `OFPGMFC_UNKNOWN_GROUP`;
//! - an indirect group with other than one bucket → `OFPGMFC_INVALID_GROUP`;
//! - a bucket's `group:G` naming a missing group → `OFPBAC_BAD_OUT_GROUP`; a chain of groups
//!   that comes back to the group → `OFPGMFC_LOOP`;
//! - a bucket holding an instruction (goto_table, meter, ...) → `OFPBAC_BAD_TYPE`.
//!
//! Deleting a group (or `OFPG_ALL`) deletes the flows whose actions name it, as OVS does
//! (reason `OFPRR_GROUP_DELETE`); a group another group's bucket still names cannot be
//! deleted alone (`OFPGMFC_CHAINED_GROUP`, OpenFlow's rule). Deleting a missing group is no
//! error.

use std::collections::BTreeMap;
use std::sync::Arc;

use rqvs_flow::group::{Group, GroupType, OFPG_MAX};
use rqvs_flow::Action;
use rqvs_openflow::action::is_instruction;
use rqvs_openflow::group::{GroupModCommand, MAX_GROUPS, OFPG_ALL};
use rqvs_openflow::OfError;

/// `OFPGMFC_CHAINED_GROUP`.
const CHAINED_GROUP: OfError = OfError { kind: 6, code: 9 };

/// One group and when it was added (ns on the switch's clock).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupEntry {
    pub group: Group,
    pub created_ns: u64,
}

/// The group table (module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupTable {
    groups: BTreeMap<u32, GroupEntry>,
}

/// Why a GROUP_MOD (or a flow naming a group) is refused: the OpenFlow error and the reason.
pub type GroupRefusal = (OfError, String);

/// The groups named by `group:G` actions of `actions` (also inside `write_actions`).
pub fn groups_named(actions: &[Action]) -> impl Iterator<Item = u32> + '_ {
    actions.iter().flat_map(|a| match a {
        Action::Group(g) => vec![*g],
        Action::WriteActions(inner) => groups_named(inner).collect(),
        _ => Vec::new(),
    })
}

impl GroupTable {
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    pub fn get(&self, id: u32) -> Option<&Group> {
        self.groups.get(&id).map(|e| &e.group)
    }

    /// A group and its state.
    pub fn entry(&self, id: u32) -> Option<&GroupEntry> {
        self.groups.get(&id)
    }

    /// The groups in id order.
    pub fn iter(&self) -> impl Iterator<Item = &GroupEntry> {
        self.groups.values()
    }

    /// Does `g` exist?
    pub fn contains(&self, g: u32) -> bool {
        self.groups.contains_key(&g)
    }

    /// Checks a GROUP_MOD against the table (module docs); `Ok` with the ids it deletes.
    pub fn check(&self, command: GroupModCommand, g: &Group) -> Result<Vec<u32>, GroupRefusal> {
        let id = g.id;
        match command {
            GroupModCommand::Delete => {
                let gone: Vec<u32> = if id == OFPG_ALL {
                    self.groups.keys().copied().collect()
                } else {
                    self.contains(id).then_some(id).into_iter().collect()
                };
                // A group a remaining group forwards to.
                for e in self.groups.values().filter(|e| !gone.contains(&e.group.id)) {
                    if let Some(d) =
                        e.group.buckets.iter().flat_map(|b| groups_named(&b.actions.0)).find(|x| gone.contains(x))
                    {
                        return Err((CHAINED_GROUP, format!("group {d} is named by group {}'s buckets", e.group.id)));
                    }
                }
                Ok(gone)
            }
            GroupModCommand::Add | GroupModCommand::Modify => {
                if id > OFPG_MAX {
                    return Err((
                        OfError::GROUP_MOD_FAILED_INVALID_GROUP,
                        format!("group {id:#x} is a reserved id (above OFPG_MAX)"),
                    ));
                }
                if command == GroupModCommand::Add && self.contains(id) {
                    return Err((OfError::GROUP_MOD_FAILED_GROUP_EXISTS, format!("group {id} exists")));
                }
                if command == GroupModCommand::Modify && !self.contains(id) {
                    return Err((OfError::GROUP_MOD_FAILED_UNKNOWN_GROUP, format!("group {id} does not exist")));
                }
                if command == GroupModCommand::Add && self.len() >= MAX_GROUPS as usize {
                    return Err((
                        OfError::GROUP_MOD_FAILED_OUT_OF_GROUPS,
                        format!("the table holds {MAX_GROUPS} groups"),
                    ));
                }
                if g.kind == GroupType::Indirect && g.buckets.len() != 1 {
                    return Err((
                        OfError::GROUP_MOD_FAILED_INVALID_GROUP,
                        format!("indirect group {id} has {} buckets (exactly one)", g.buckets.len()),
                    ));
                }
                for (i, b) in g.buckets.iter().enumerate() {
                    if let Some(a) = b.actions.0.iter().find(|a| is_instruction(a)) {
                        return Err((
                            OfError::BAD_ACTION_BAD_TYPE,
                            format!("group {id} bucket {i}: '{a}' is an instruction"),
                        ));
                    }
                    for n in groups_named(&b.actions.0) {
                        if n == id {
                            return Err((
                                OfError::GROUP_MOD_FAILED_LOOP,
                                format!("group {id} bucket {i} names the group itself"),
                            ));
                        }
                        if !self.contains(n) {
                            return Err((
                                OfError::BAD_ACTION_BAD_OUT_GROUP,
                                format!("group {id} bucket {i}: group {n} does not exist"),
                            ));
                        }
                    }
                }
                if let Some(path) = self.loop_through(g) {
                    return Err((OfError::GROUP_MOD_FAILED_LOOP, format!("group {id} would loop: {path}")));
                }
                Ok(Vec::new())
            }
        }
    }

    /// With `g` in place of the group of its id, a chain of groups from `g` back to it (as
    /// text), if any.
    fn loop_through(&self, g: &Group) -> Option<String> {
        let mut stack: Vec<(u32, Vec<u32>)> =
            g.buckets.iter().flat_map(|b| groups_named(&b.actions.0)).map(|n| (n, vec![g.id, n])).collect();
        let mut seen = std::collections::BTreeSet::new();
        while let Some((at, path)) = stack.pop() {
            if at == g.id {
                return Some(path.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(" -> "));
            }
            if !seen.insert(at) {
                continue;
            }
            if let Some(e) = self.groups.get(&at) {
                for n in e.group.buckets.iter().flat_map(|b| groups_named(&b.actions.0)) {
                    let mut p = path.clone();
                    p.push(n);
                    stack.push((n, p));
                }
            }
        }
        None
    }

    /// Sets group `g` (added at `now_ns`, or keeping its creation time when it exists);
    /// returns what was there.
    pub fn set(&mut self, g: Group, now_ns: u64) -> Option<GroupEntry> {
        let created_ns = self.groups.get(&g.id).map_or(now_ns, |e| e.created_ns);
        self.groups.insert(g.id, GroupEntry { group: g, created_ns })
    }

    /// Puts back an entry (a transaction's undo).
    pub(crate) fn restore(&mut self, id: u32, e: Option<GroupEntry>) {
        match e {
            Some(e) => {
                self.groups.insert(id, e);
            }
            None => {
                self.groups.remove(&id);
            }
        }
    }

    pub(crate) fn remove(&mut self, id: u32) -> Option<GroupEntry> {
        self.groups.remove(&id)
    }
}

/// A shared, committed group table (module docs).
pub type SharedGroups = Arc<GroupTable>;

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_flow::group::Bucket;
    use rqvs_flow::Actions;

    fn g(id: u32, kind: GroupType, actions: Vec<Vec<Action>>) -> Group {
        Group { id, kind, buckets: actions.into_iter().map(|a| Bucket::new(Actions(a))).collect() }
    }

    #[test]
    fn group_mod_checks_as_ovs() {
        let mut t = GroupTable::default();
        let add = GroupModCommand::Add;
        let all1 = g(1, GroupType::All, vec![vec![Action::Output(1)], vec![Action::Output(2)]]);
        assert_eq!(t.check(add, &all1), Ok(vec![]));
        t.set(all1.clone(), 0);
        let code = |r: Result<Vec<u32>, GroupRefusal>| r.unwrap_err().0;
        assert_eq!(code(t.check(add, &all1)), OfError::GROUP_MOD_FAILED_GROUP_EXISTS);
        assert_eq!(
            code(t.check(GroupModCommand::Modify, &g(9, GroupType::All, vec![]))),
            OfError::GROUP_MOD_FAILED_UNKNOWN_GROUP
        );
        assert_eq!(
            code(t.check(add, &g(0xffff_ff01, GroupType::All, vec![]))),
            OfError::GROUP_MOD_FAILED_INVALID_GROUP
        );
        assert_eq!(code(t.check(add, &g(2, GroupType::Indirect, vec![]))), OfError::GROUP_MOD_FAILED_INVALID_GROUP);
        // A bucket naming a missing group; the group itself; a chain back to it.
        assert_eq!(
            code(t.check(add, &g(2, GroupType::All, vec![vec![Action::Group(7)]]))),
            OfError::BAD_ACTION_BAD_OUT_GROUP
        );
        assert_eq!(
            code(t.check(add, &g(2, GroupType::All, vec![vec![Action::Group(2)]]))),
            OfError::GROUP_MOD_FAILED_LOOP
        );
        let two = g(2, GroupType::Indirect, vec![vec![Action::Group(1)]]);
        assert_eq!(t.check(add, &two), Ok(vec![]));
        t.set(two, 0);
        let back = g(1, GroupType::All, vec![vec![Action::Group(2)]]);
        let e = t.check(GroupModCommand::Modify, &back).unwrap_err();
        assert_eq!(e.0, OfError::GROUP_MOD_FAILED_LOOP);
        assert!(e.1.contains("1 -> 2 -> 1"), "{}", e.1);
        // Group 1 is named by group 2: not deleted alone; with all, both go.
        let del = |id| Group { id, kind: GroupType::All, buckets: vec![] };
        assert_eq!(code(t.check(GroupModCommand::Delete, &del(1))), CHAINED_GROUP);
        assert_eq!(t.check(GroupModCommand::Delete, &del(OFPG_ALL)), Ok(vec![1, 2]));
        assert_eq!(t.check(GroupModCommand::Delete, &del(2)), Ok(vec![2]));
        assert_eq!(t.check(GroupModCommand::Delete, &del(5)), Ok(vec![]));
        // An instruction in a bucket.
        assert_eq!(
            code(t.check(add, &g(3, GroupType::All, vec![vec![Action::GotoTable(1)]]))),
            OfError::BAD_ACTION_BAD_TYPE
        );
    }
}
