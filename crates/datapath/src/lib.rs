//! rqvs datapath layer: OVS's userspace (dpif-netdev) fast path in front of the OpenFlow slow
//! path — the **ORIG** design of NSDI'22 §2.1.
//!
//! A packet's path ([`pmd::Datapath::process_batch`], batches of [`BATCH`] = 32):
//! 1. **EMC** ([`emc`]): exact match on the whole key, 8192 entries, 2 candidate slots per hash,
//!    probabilistic insertion; an entry points at a megaflow and dies with it.
//! 2. **Cuckoo distributor** ([`cd`], optional): flow hash → the subtable it hit last time; the
//!    hinted subtable is probed first.
//! 3. **Megaflow cache** ([`dpcls`]): tuple space search over megaflow masks, no priorities,
//!    first hit wins, subtables ranked by hits every second of PMD time.
//! 4. **Upcall** ([`upcall`]): a bounded queue to the handler, which classifies with the slow path
//!    ([`rqvs_classify::OfprotoClassifier`] with wildcard tracking), installs the megaflow and gives
//!    the packet its action. Overflowing packets are dropped and counted (`lost`).
//!
//! The [`revalidator`] re-checks installed megaflows after OpenFlow rule changes, expires idle
//! ones and enforces the flow limit. [`predict`] (off by default) installs the megaflows of flows
//! expected to follow a coflow's base flow, through the same slow path. All counters are in one [`counters::Counters`] whose
//! per-packet outcomes never overlap and sum to the packets received.
//!
//! **Time.** Everything that depends on time (idle expiry, subtable ranking, the CD's on/off
//! decision, the replay's 100 ms series, timed rule updates) reads the datapath's *PMD clock*,
//! a nanosecond count the caller advances ([`pmd::Datapath::advance_clock`]): by measured PMD
//! time in `rqvs replay`, by a fixed cost per packet in tests, so tests are deterministic.
//!
//! **Threads.** This version runs the PMD and the handler/revalidator interleaved in one thread
//! (upcalls handled at batch boundaries, as OVS-DPDK's PMD does its own upcalls inline);
//! the two-thread mode is not built yet.
//!
//! **The megaflow property** (tested): a packet that hits an installed megaflow gets the action
//! the slow path would give it, so the datapath's action for every packet is the action of the
//! reference classifier's winning rule.

#![forbid(unsafe_code)]

pub mod ccache;
pub mod cd;
pub mod cflows;
pub mod counters;
pub mod design;
pub mod dpcls;
pub mod emc;
pub mod pmd;
pub mod predict;
pub mod revalidator;
#[cfg(test)]
mod testutil;
pub mod upcall;

pub use cflows::{Cflows, LearnedConfig};
pub use counters::Counters;
pub use design::Design;
pub use pmd::{Config, Datapath};
pub use rqvs_classify::BATCH;

use rqvs_flow::{Action, Actions, FlowKey, Rule};

/// What the datapath does with a packet: a compact, `Copy` form of a rule's actions that the
/// fast path can hold and apply without allocating.
///
/// A rule's actions map to the first `output` they contain ([`DpAction::Output`]); a rule with
/// no output (drop, controller, anything rqvs does not execute) drops the packet; no matching
/// rule drops it too (OpenFlow's table-miss default with no miss rule). `Pending` marks, in a
/// batch's output, a packet whose action the upcall handler decides later.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum DpAction {
    #[default]
    Drop,
    Output(u32),
    /// Queued for the slow path (upcall); its action is reported when handled.
    Pending,
    /// Lost: the upcall queue was full.
    Lost,
}

impl DpAction {
    /// The datapath action of a rule's OpenFlow actions (see the type's docs).
    pub fn from_actions(a: &Actions) -> DpAction {
        a.0.iter()
            .find_map(|x| match x {
                Action::Output(p) => Some(DpAction::Output(*p)),
                _ => None,
            })
            .unwrap_or(DpAction::Drop)
    }

    /// The action for a classification result.
    pub fn of_rule(rule: Option<&Rule>) -> DpAction {
        rule.map_or(DpAction::Drop, |r| DpAction::from_actions(&r.actions))
    }
}

/// Gives every rule the action `output:(id + 1)`, so that distinct rules have distinct actions
/// and an action mismatch always means a wrong rule. ClassBench files carry no actions; `rqvs
/// replay` applies this to them (documented in the README). Port 0 is never used.
pub fn assign_rule_outputs(rules: &mut [Rule]) {
    for r in rules {
        r.actions = Actions::output(r.id.0 + 1);
    }
}

/// The 32-bit flow hash of a packet key (OVS's RSS hash plays this role): a multiply-xorshift
/// mix of [`FlowKey::to_words`]. Used by the EMC and the cuckoo distributor.
#[inline]
pub fn flow_hash(k: &FlowKey) -> u32 {
    let w = k.to_words();
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15;
    for x in w {
        h = (h ^ x).wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 32;
    }
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    (h ^ (h >> 29)) as u32
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

    #[test]
    fn hash_depends_on_every_word() {
        let a = FlowKey::ipv4(1, 2, 6, 3, 4);
        let mut b = a;
        b.dl_dst[5] = 1;
        assert_ne!(flow_hash(&a), flow_hash(&b));
        let mut c = a;
        c.tp_dst = 5;
        assert_ne!(flow_hash(&a), flow_hash(&c));
    }
}
