//! rqvs ofproto layer: the OpenFlow pipeline in one crate — the one table every reader shares
//! ([`OfprotoTable`]: versions, atomic change sets, the change log, groups and port liveness),
//! the one translation of a packet through it ([`xlate`]: every table's lookup with wildcard
//! tracking, instructions, action sets, groups, the megaflow; [`crossing`]: on into the peer
//! bridge's table across a patch port), the datapath actions it produces
//! ([`DpAction`], [`actions`]: the interned op lists and their accounting), the rule chains a
//! packet is credited to ([`chain`]), the per-table classifiers of the PMD's walk past table 0
//! ([`later_tables`]), and the switch's table of record ([`record`]: flows with their state —
//! [`flowstate`]: timeouts, flags, carried counts —, OpenFlow's flow-mod transactions, the
//! group table [`groups`] and the meter table [`meters`]).
//!
//! # Where this crate sits, and why
//!
//! ```text
//! flow → classify → ofproto → datapath → switch
//! flow → openflow → ofproto
//! ```
//!
//! - **Above classify.** The per-table lookup with wildcard tracking is OVS's `lib/classifier.c`,
//!   and stays in the classify layer as [`rqvs_classify::OfprotoClassifier`]: it is one of the
//!   classifiers `rqvs_classify::build` makes by name (`ofproto`, beside `ref`, `tss`, `tm`,
//!   `nmu`; what `rqvs classify`, `rqvs bench classifiers`, the Python and C libraries take), and
//!   the workload layer's attack search uses it, which depends on classify only. OVS splits the
//!   same way: `lib/classifier.c` under `ofproto/`. This crate holds what OVS's `ofproto/` does
//!   with it: tables of record with versions, the pipeline walk, translation.
//! - **Below the datapath.** The datapath's handler and revalidator read the shared table and
//!   translate through it ([`table::TableRead::classify`]), and its fast path caches the ops the
//!   translation makes ([`DpAction`]), so the datapath depends on this crate, not the other way
//!   round. The op vocabulary (OVS's datapath actions, `lib/odp-util`, under both `ofproto/` and
//!   `dpif-netdev`) therefore lives here, with the table that interns and holds it.
//! - **On the codec's types, not its wire.** The table of record refuses with OpenFlow's errors
//!   ([`rqvs_openflow::OfError`]) and keeps OpenFlow's flow flags, GROUP_MOD commands and
//!   METER_MOD bodies; it takes those types from `rqvs-openflow` (a codec without I/O, on flow
//!   only) rather than declaring second copies. Nothing here encodes or decodes a message. The
//!   datapath reaches the codec's crate only through this one and names nothing of it.
//! - **Used by the slow path, the switch and the replay, no second copy.** The datapath's
//!   upcall handler and revalidator (ORIG, CCACHE), CFLOWS' pipeline walk, the switch (its
//!   handler thread, PACKET_OUT to TABLE, `ofproto/trace`, the attach and link threads' commits,
//!   and its table of record), `rqvs trace` and the replay's reference walk
//!   (`rqvs_experiment::replay::pipeline_ref`) all call this crate's [`xlate`] over this crate's
//!   [`OfprotoTable`] or [`xlate::Pipeline`].
//! - **Left in the switch**: what is wound into its threads — the PMDs' per-flow and pipeline
//!   counters and their summing (`rqvs_switch::flowstats`), the expiry thread, and `Control`'s
//!   views of the groups (`rqvs_switch::control_groups`).

#![forbid(unsafe_code)]

pub mod actions;
pub mod chain;
pub mod crossing;
pub mod flowstate;
pub mod groups;
pub mod later_tables;
pub mod meters;
pub mod record;
pub mod table;
pub mod trainer;
pub mod xlate;

pub use table::OfprotoTable;

use std::fmt;

use actions::{ActionsId, Op};
use rqvs_flow::{Actions, Rule, RuleId};

/// In a design's per-packet rule attribution (`rqvs_datapath::Design::batch_rules`,
/// `rqvs_datapath::Design::upcall_rules`): no rule decided the packet — none matched (it is dropped, the
/// table-miss default), or it is queued for the handler or lost. No rule has this id.
pub const NO_RULE: RuleId = RuleId(u32::MAX);

/// What the datapath does with a packet: a compact, `Copy` form of a rule's actions that the
/// fast path can hold and apply without allocating ([`actions`]).
///
/// A rule whose actions are one `output` is [`DpAction::Output`]; a rule with no action rqvs
/// executes (drop, or only actions it does not know) drops the packet; any other list is
/// [`DpAction::Apply`], an interned op list. No matching rule drops the packet too (OpenFlow
/// 1.3's table-miss default with no miss rule). `Pending` marks, in a batch's output, a packet
/// whose action the upcall handler decides later.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum DpAction {
    #[default]
    Drop,
    Output(u32),
    /// Apply the interned op list ([`actions::ops`]).
    Apply(ActionsId),
    /// Queued for the slow path (upcall); its action is reported when handled.
    Pending,
    /// Lost: the upcall queue was full.
    Lost,
}

impl DpAction {
    /// The datapath action of OpenFlow actions outside any rule (a packet-out's; see the type's
    /// docs). A rule's actions are [`DpAction::from_rule`]'s: its `controller` ops carry the
    /// rule's cookie.
    pub fn from_actions(a: &Actions) -> DpAction {
        DpAction::of_ops(a.0.iter().filter_map(Op::of))
    }

    /// The datapath action of rule `r` (see the type's docs).
    pub fn from_rule(r: &Rule) -> DpAction {
        DpAction::of_ops(r.actions.0.iter().filter_map(|a| Op::of_rule(a, r)))
    }

    /// [`DpAction::of_op_list`] of `ops`: no op or one output (most flows) decided from the
    /// first two without making the list; a longer list made and interned.
    fn of_ops(mut ops: impl Iterator<Item = Op>) -> DpAction {
        match (ops.next(), ops.next()) {
            (None, _) => DpAction::Drop,
            (Some(Op::Output(p)), None) => DpAction::Output(p),
            (first, second) => DpAction::of_op_list(&first.into_iter().chain(second).chain(ops).collect::<Vec<Op>>()),
        }
    }

    /// The datapath action of an op list (the translation's, [`xlate::Xlate::action`]).
    pub fn of_op_list(ops: &[Op]) -> DpAction {
        match ops[..] {
            [] => DpAction::Drop,
            [Op::Output(p)] => DpAction::Output(p),
            _ => DpAction::Apply(actions::intern(ops)),
        }
    }

    /// [`DpAction::from_rule`] for a rule of the table of record, from the list the flow holds
    /// (`held`, [`actions::hold_rule`]'s) — no list made and searched for. `None` held: the
    /// rule's ops are no list the table holds (or could not be interned), made as `from_rule`
    /// makes them.
    pub(crate) fn of_held(r: &Rule, held: Option<ActionsId>) -> DpAction {
        held.map_or_else(|| DpAction::from_rule(r), DpAction::Apply)
    }

    /// The action for a classification result.
    pub fn of_rule(rule: Option<&Rule>) -> DpAction {
        rule.map_or(DpAction::Drop, DpAction::from_rule)
    }

    /// The ops this action applies, in order (a copy; `Pending` and `Lost` have none).
    pub fn to_ops(self) -> Vec<Op> {
        match self {
            DpAction::Output(p) => vec![Op::Output(p)],
            DpAction::Apply(id) => actions::ops(id).to_vec(),
            DpAction::Drop | DpAction::Pending | DpAction::Lost => Vec::new(),
        }
    }
}

impl fmt::Display for DpAction {
    /// `ovs-appctl dpctl/dump-flows` style: `drop`, `2`, `set(eth(src=..)),2,3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DpAction::Drop => f.write_str("drop"),
            DpAction::Output(p) => write!(f, "{p}"),
            DpAction::Apply(id) => {
                for (i, op) in actions::ops(*id).iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{op}")?;
                }
                Ok(())
            }
            DpAction::Pending => f.write_str("pending"),
            DpAction::Lost => f.write_str("lost"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_map_to_first_output() {
        assert_eq!(DpAction::from_actions(&Actions::output(7)), DpAction::Output(7));
        assert_eq!(DpAction::from_actions(&Actions::drop()), DpAction::Drop);
        assert_eq!(DpAction::from_actions(&Actions(vec![])), DpAction::Drop);
        assert_eq!(DpAction::of_rule(None), DpAction::Drop);
    }
}

/// The README's examples, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
