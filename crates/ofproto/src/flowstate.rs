//! A flow's state besides its rule, which the switch's table of record ([`crate::record`]) keeps
//! beside each rule ([`FlowMeta`]): its idle and hard timeouts and `OFPFF_*` flags (from the
//! add: [`FlowSpec`]), its creation and modification times, its last hit as the management side
//! knows it, and the counts *carried* from the flows it replaced. A flow keeps OVS 3.1's
//! semantics (`ofproto.c` `replace_rule_start`, `ofproto-dpif.c`
//! `rule_insert`, `rule_expire`):
//! - an **add** makes a new flow: duration, hard timeout and idle time count from now, with the
//!   add's timeouts and flags; one that *replaces* a flow (equal match and priority) takes over
//!   its packet and byte counts unless the add has RESET_COUNTS, and always its last-hit time;
//! - a **modify** gives the selected flows new actions under new ids (`rqvs_switch::Control`'s
//!   datapaths key everything by id) and keeps their cookie, timeouts, flags and creation
//!   time (so their duration), their counts unless the modify has RESET_COUNTS, and their
//!   last-hit time; their hard timeout counts from the modify (OVS's `modified`);
//! - a **delete** or an **expiry** ([`crate::record::FlowOp::Expire`]) removes flows with a
//!   [`Reason`]; those with SEND_FLOW_REM owe a FLOW_REMOVED ([`crate::record::NetChange::deleted`]).
//!
//! The packet counts themselves live in the PMDs (by rule id, `rqvs_switch::flowstats`): a
//! transaction records which flow each removed flow's counts go to ([`Heir`],
//! [`crate::record::NetChange::heir`]), and `rqvs_switch::Control` moves them there once the change
//! is applied everywhere. The PMDs keep no
//! times: a flow's last hit is the last time the expiry thread saw its count move
//! ([`crate::record::FlowTable::observe`]).

use rqvs_flow::RuleId;
use rqvs_openflow::flow_mod::{
    OFPFF_CHECK_OVERLAP, OFPFF_NO_BYT_COUNTS, OFPFF_NO_PKT_COUNTS, OFPFF_RESET_COUNTS, OFPFF_SEND_FLOW_REM,
    OFPRR_DELETE, OFPRR_GROUP_DELETE, OFPRR_HARD_TIMEOUT, OFPRR_IDLE_TIMEOUT,
};

/// One rule's counters at one PMD (or summed over PMDs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowCount {
    pub packets: u64,
    /// Frame lengths as received.
    pub bytes: u64,
}

impl FlowCount {
    /// Sums `o` into this.
    pub fn add(&mut self, o: &FlowCount) {
        self.packets += o.packets;
        self.bytes += o.bytes;
    }
}

/// The `OFPFF_*` flags a flow keeps and reports (OVS's `OFPUTIL_FF_STATE`).
pub const KEPT_FLAGS: u16 =
    OFPFF_SEND_FLOW_REM | OFPFF_CHECK_OVERLAP | OFPFF_RESET_COUNTS | OFPFF_NO_PKT_COUNTS | OFPFF_NO_BYT_COUNTS;

/// What an add asks of its flow besides the rule: OpenFlow's FLOW_MOD timeouts and flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowSpec {
    /// Seconds without a packet before the flow expires (0: never).
    pub idle_timeout: u16,
    /// Seconds after its add (or last modify) before the flow expires (0: never).
    pub hard_timeout: u16,
    /// `OFPFF_*` (CHECK_OVERLAP is checked; [`KEPT_FLAGS`] are kept).
    pub flags: u16,
    /// OpenFlow 1.4's eviction importance (kept and reported; rqvs evicts nothing).
    pub importance: u16,
}

/// Whether a modify keeps the flows' packet and byte counts (RESET_COUNTS: not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counts {
    Keep,
    Reset,
}

/// Why a flow left the table (OpenFlow's `OFPRR_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    IdleTimeout,
    HardTimeout,
    Delete,
    /// The group its actions name was deleted.
    GroupDelete,
}

impl Reason {
    /// The `OFPRR_*` code.
    pub fn code(self) -> u8 {
        match self {
            Reason::IdleTimeout => OFPRR_IDLE_TIMEOUT,
            Reason::HardTimeout => OFPRR_HARD_TIMEOUT,
            Reason::Delete => OFPRR_DELETE,
            Reason::GroupDelete => OFPRR_GROUP_DELETE,
        }
    }
}

/// A flow's state beside its rule (module docs). Times are ns on the switch's clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowMeta {
    /// When the flow was added: its duration counts from it.
    pub created_ns: u64,
    /// When it was added or last modified: its hard timeout counts from it.
    pub modified_ns: u64,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    /// The `OFPFF_*` flags it keeps ([`KEPT_FLAGS`]).
    pub flags: u16,
    pub importance: u16,
    /// Its last hit as far as the management side knows: its add (OVS counts a new flow as
    /// used when added), the flow it replaced or was modified from (OVS forwards it), or the
    /// last time its count was seen to move ([`crate::record::FlowTable::observe`]).
    pub used_ns: u64,
    /// The PMDs' packets under its id when last looked at (a count that moved since is a hit).
    pub seen: u64,
    /// Packets and bytes of the flows it replaced (or was modified from), not counted at the
    /// PMDs under its own id.
    pub carried: FlowCount,
    /// The action list the flow holds in the datapath's action table while it is in the table
    /// of record ([`crate::actions::hold_rule`]; set there, released by it on the way out).
    pub(crate) held: Option<crate::actions::ActionsId>,
}

impl FlowMeta {
    /// A flow added at `now_ns` as `spec` asks.
    pub fn new(spec: &FlowSpec, now_ns: u64) -> FlowMeta {
        FlowMeta {
            created_ns: now_ns,
            modified_ns: now_ns,
            idle_timeout: spec.idle_timeout,
            hard_timeout: spec.hard_timeout,
            flags: spec.flags & KEPT_FLAGS,
            importance: spec.importance,
            used_ns: now_ns,
            seen: 0,
            carried: FlowCount::default(),
            held: None,
        }
    }

    /// Has a timeout (the expiry thread looks at it).
    pub fn expires(&self) -> bool {
        self.idle_timeout != 0 || self.hard_timeout != 0
    }

    /// Why the flow has expired at `now_ns`, if it has (OVS's `rule_expire`: the hard timeout
    /// first, then the idle time since its last hit).
    pub fn expired(&self, now_ns: u64) -> Option<Reason> {
        let s = |t: u16| u64::from(t) * 1_000_000_000;
        if self.hard_timeout != 0 && now_ns > self.modified_ns + s(self.hard_timeout) {
            return Some(Reason::HardTimeout);
        }
        if self.idle_timeout != 0 && now_ns > self.used_ns + s(self.idle_timeout) {
            return Some(Reason::IdleTimeout);
        }
        None
    }

    /// The state of a flow that takes over from this one at `now_ns`: `spec`'s (an add that
    /// replaces it) or this one's with the hard timeout restarting (a modify); the counts
    /// carried unless `Reset`, the last hit always (module docs).
    pub(crate) fn heir(&self, spec: Option<&FlowSpec>, counts: Counts, now_ns: u64) -> FlowMeta {
        let base = match spec {
            Some(spec) => FlowMeta::new(spec, now_ns),
            None => FlowMeta { modified_ns: now_ns, ..*self },
        };
        let carried = if counts == Counts::Keep { self.carried } else { FlowCount::default() };
        FlowMeta { used_ns: self.used_ns, seen: 0, carried, ..base }
    }
}

/// The flow that takes over a replaced or modified flow's counts ([`crate::record::NetChange::heir`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heir {
    pub to: RuleId,
    /// Whether the packets and bytes go along (`Reset`: they do not).
    pub counts: Counts,
    /// The replaced flow's packets at the PMDs when last looked at ([`FlowMeta::seen`]): more
    /// when its counts are taken is a hit the heir's last hit must know of.
    pub seen: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(idle: u16, hard: u16, flags: u16) -> FlowSpec {
        FlowSpec { idle_timeout: idle, hard_timeout: hard, flags, importance: 0 }
    }

    #[test]
    fn timeouts_expire_as_ovs_counts_them() {
        let s = 1_000_000_000u64;
        let m = FlowMeta::new(&spec(2, 5, 0), 10 * s);
        assert_eq!(m.expired(12 * s), None, "idle exactly 2 s: not yet (OVS: now > used + idle)");
        assert_eq!(m.expired(12 * s + 1), Some(Reason::IdleTimeout));
        assert_eq!(FlowMeta { used_ns: 11 * s, ..m }.expired(12 * s + 1), None, "a hit 1 s ago");
        assert_eq!(FlowMeta { used_ns: 15 * s, ..m }.expired(15 * s + 1), Some(Reason::HardTimeout), "hard first");
        let never = FlowMeta::new(&spec(0, 0, 0), 0);
        assert_eq!(never.expired(u64::MAX / 2), None);
        assert!(!never.expires());
    }
}
