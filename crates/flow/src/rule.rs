//! Rules, their actions, and the one winner rule used everywhere in rqvs.
//!
//! **Winner rule.** Among the rules a packet matches, the one with the *highest priority* wins;
//! between equal priorities the *lowest id* wins. Every classifier, cache and test in rqvs uses this
//! rule, through [`Rule::beats`] or [`Rule::rank`]. ClassBench files are first-match lists: rule `i`
//! (0-based line) gets id `i` and priority `n - i`, so the first matching line wins.

use std::cmp::Reverse;
use std::fmt;

use crate::field::Field;
use crate::matching::Match;

/// A rule's identity within one rule-set (ClassBench line index, or ofctl flow index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize), serde(transparent))]
pub struct RuleId(pub u32);

impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// One action of a rule, in OpenFlow 1.0's terms (`ovs-ofctl` names). Those the switch executes
/// are typed; anything else is kept verbatim in [`Action::Other`] (the replay model ignores it;
/// the switch refuses a rule holding one).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Action {
    /// `output:N`
    Output(u32),
    /// `in_port`: back out of the port the packet came in on.
    InPort,
    /// `all`: every port but the input port.
    All,
    /// `flood`: every port but the input port (rqvs has no per-port no-flood flag, so the same
    /// ports as `all`).
    Flood,
    /// `drop`
    Drop,
    /// `controller` or `controller:MAX_LEN`
    Controller(Option<u16>),
    /// `mod_dl_src:MAC`
    SetDlSrc([u8; 6]),
    /// `mod_dl_dst:MAC`
    SetDlDst([u8; 6]),
    /// `mod_vlan_vid:VID` (0..4095): sets the outer tag's VLAN ID, pushing a tag on an untagged
    /// frame.
    SetVlanVid(u16),
    /// `strip_vlan`: removes the outer 802.1Q tag, if any.
    StripVlan,
    /// `mod_nw_tos:TOS` (a multiple of 4: the DSCP bits; ECN is kept).
    SetNwTos(u8),
    /// `dec_ttl`: IPv4 TTL − 1 (checksum updated); a packet whose TTL reaches 0 is dropped.
    DecTtl,
    /// `NORMAL`: the switch's own MAC-learning forwarding (OpenFlow's `OFPP_NORMAL`).
    Normal,
    /// `set_field:VALUE[/MASK]->FIELD` (also what `load`, `mod_nw_src`, ... amount to): the
    /// field's bits under `mask` take `value`'s (both already shifted to the field: bits
    /// `0..field.bits`). `mask` is the field's all-ones for an unmasked set.
    SetField { field: &'static Field, value: u128, mask: u128 },
    /// `push_vlan:ETHERTYPE` (0x8100 or 0x88a8): pushes a tag with VID 0, PCP 0 (as OVS 3.1
    /// does, on an untagged or a tagged packet).
    PushVlan(u16),
    /// `resubmit([PORT],[TABLE])` (Nicira): looks the packet up again, in `table` (the current
    /// table when `None`), as if it had come in on `in_port` (unchanged when `None`); then goes
    /// on with the actions after it.
    Resubmit { in_port: Option<u32>, table: Option<u8> },
    /// `group:ID`: the group's buckets (see [`crate::group`]).
    Group(u32),
    /// `meter:ID` (the instruction): the packet passes meter `ID` first.
    Meter(u32),
    /// `clear_actions` (the instruction): empties the action set.
    ClearActions,
    /// `write_actions(...)` (the instruction): merges the list into the action set.
    WriteActions(Vec<Action>),
    /// `write_metadata:VALUE[/MASK]` (the instruction).
    WriteMetadata { value: u64, mask: u64 },
    /// `goto_table:N` (the instruction; always last): continue the pipeline in table `N`.
    GotoTable(u8),
    /// Anything else (`TABLE`, `learn(...)`, ...), exactly as written (`LOCAL` is
    /// `Output(0xfffe)`).
    Other(String),
}

impl Action {
    /// True for the actions the switch executes in every design: `set_field` on the fields a
    /// frame can be rewritten in ([`SET_FIELD_WRITABLE`]), `push_vlan`, and the pipeline's
    /// actions and instructions (resubmit, groups, the action set, write_metadata, goto_table),
    /// which the one translation (`rqvs_ofproto::xlate`) runs in ORIG, CCACHE and CFLOWS.
    /// `meter` (the switch's meter table enforces it). Not: [`Action::Other`] and `set_field` on
    /// other fields.
    pub fn is_executable(&self) -> bool {
        match self {
            Action::SetField { field, .. } => SET_FIELD_WRITABLE.contains(&field.name),
            Action::WriteActions(inner) => inner.iter().all(Action::is_executable),
            Action::Other(_) => false,
            _ => true,
        }
    }

    /// True for the pipeline's actions and instructions (they continue or redirect the
    /// translation: resubmit, group, goto_table, the action set, write_metadata, meter) — what a
    /// packet-out's action list, which is not translated through the tables, cannot hold.
    pub fn is_pipeline(&self) -> bool {
        matches!(
            self,
            Action::Resubmit { .. }
                | Action::Group(_)
                | Action::Meter(_)
                | Action::ClearActions
                | Action::WriteActions(_)
                | Action::WriteMetadata { .. }
                | Action::GotoTable(_)
        )
    }
}

/// The fields a `set_field` can write into a frame (the switch's executor, through
/// `Frame::set_field`), plus `metadata` and `in_port`, which only the pipeline's key holds.
pub const SET_FIELD_WRITABLE: &[&str] = &[
    "metadata",
    "in_port",
    "dl_src",
    "dl_dst",
    "vlan_tci",
    "vlan_vid",
    "vlan_pcp",
    "nw_src",
    "nw_dst",
    "ip_dscp",
    "nw_ecn",
    "nw_ttl",
    "tcp_src",
    "tcp_dst",
    "udp_src",
    "udp_dst",
    "ipv6_src",
    "ipv6_dst",
    "sctp_src",
    "sctp_dst",
    "icmp_type",
    "icmp_code",
    "icmpv6_type",
    "icmpv6_code",
    "ipv6_label",
    "arp_op",
    "arp_spa",
    "arp_tpa",
    "arp_sha",
    "arp_tha",
    "nd_target",
    "nd_sll",
    "nd_tll",
];

/// A rule's action list, in order. An empty list means drop, as in OpenFlow.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize), serde(transparent))]
pub struct Actions(pub Vec<Action>);

impl Actions {
    pub fn drop() -> Actions {
        Actions(vec![Action::Drop])
    }

    pub fn output(port: u32) -> Actions {
        Actions(vec![Action::Output(port)])
    }

    /// True when the packet leaves on no port (empty list, or only `drop`).
    pub fn is_drop(&self) -> bool {
        self.0.iter().all(|a| matches!(a, Action::Drop))
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // OpenFlow's LOCAL (0xfffe), as ovs-ofctl writes it.
            Action::Output(0xfffe) => f.write_str("LOCAL"),
            Action::Output(p) => write!(f, "output:{p}"),
            Action::Drop => f.write_str("drop"),
            Action::Controller(None) => f.write_str("controller"),
            Action::Controller(Some(n)) => write!(f, "controller:{n}"),
            Action::InPort => f.write_str("in_port"),
            Action::All => f.write_str("all"),
            Action::Flood => f.write_str("flood"),
            Action::SetDlSrc(m) => write!(f, "mod_dl_src:{}", fmt_mac(m)),
            Action::SetDlDst(m) => write!(f, "mod_dl_dst:{}", fmt_mac(m)),
            Action::SetVlanVid(v) => write!(f, "mod_vlan_vid:{v}"),
            Action::StripVlan => f.write_str("strip_vlan"),
            Action::SetNwTos(t) => write!(f, "mod_nw_tos:{t}"),
            Action::DecTtl => f.write_str("dec_ttl"),
            Action::Normal => f.write_str("NORMAL"),
            Action::SetField { field, value, mask } => {
                f.write_str("set_field:")?;
                f.write_str(&field.format_value(*value))?;
                if *mask != field.all_ones() {
                    write!(f, "/{}", field.format_value(*mask))?;
                }
                // OVS's names of OpenFlow 1.2+ (both read back: they are the fields' aliases).
                let name = match field.name {
                    "dl_src" => "eth_src",
                    "dl_dst" => "eth_dst",
                    "nw_src" => "ip_src",
                    "nw_dst" => "ip_dst",
                    n => n,
                };
                write!(f, "->{name}")
            }
            Action::PushVlan(t) => write!(f, "push_vlan:{t:#06x}"),
            Action::Resubmit { in_port: Some(p), table: None } => write!(f, "resubmit:{p}"),
            Action::Resubmit { in_port, table } => {
                f.write_str("resubmit(")?;
                if let Some(p) = in_port {
                    write!(f, "{p}")?;
                }
                f.write_str(",")?;
                if let Some(t) = table {
                    write!(f, "{t}")?;
                }
                f.write_str(")")
            }
            Action::Group(g) => write!(f, "group:{g}"),
            Action::Meter(m) => write!(f, "meter:{m}"),
            Action::ClearActions => f.write_str("clear_actions"),
            Action::WriteActions(list) if list.is_empty() => f.write_str("write_actions()"),
            Action::WriteActions(list) => write!(f, "write_actions({})", Actions(list.clone())),
            Action::WriteMetadata { value, mask } if *mask == u64::MAX => write!(f, "write_metadata:{value:#x}"),
            Action::WriteMetadata { value, mask } => write!(f, "write_metadata:{value:#x}/{mask:#x}"),
            Action::GotoTable(t) => write!(f, "goto_table:{t}"),
            Action::Other(s) => f.write_str(s),
        }
    }
}

fn fmt_mac(m: &[u8; 6]) -> String {
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
}

impl fmt::Display for Actions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("drop");
        }
        for (i, a) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{a}")?;
        }
        Ok(())
    }
}

/// A classification rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Rule {
    pub id: RuleId,
    /// Higher wins. OpenFlow priorities fit in 16 bits; ClassBench sets may need more.
    pub priority: u32,
    pub matches: Match,
    pub actions: Actions,
    /// OpenFlow cookie (0 when the rule did not come from OpenFlow).
    pub cookie: u64,
    /// OpenFlow table (0 by default).
    pub table: u8,
}

impl Rule {
    pub fn new(id: u32, priority: u32, matches: Match, actions: Actions) -> Rule {
        Rule { id: RuleId(id), priority, matches, actions, cookie: 0, table: 0 }
    }

    /// The sort key of the winner rule: smaller ranks first (higher priority, then lower id).
    #[inline]
    pub fn rank(&self) -> (Reverse<u32>, RuleId) {
        (Reverse(self.priority), self.id)
    }

    /// True when `self` wins over `other` for a packet both match.
    #[inline]
    pub fn beats(&self, other: &Rule) -> bool {
        self.rank() < other.rank()
    }
}

/// The winner rule on bare (priority, id) pairs, for classifiers that keep rules elsewhere.
#[inline]
pub fn beats(priority: u32, id: RuleId, other_priority: u32, other_id: RuleId) -> bool {
    (Reverse(priority), id) < (Reverse(other_priority), other_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn winner_rule() {
        let a = Rule::new(5, 10, Match::ANY, Actions::drop());
        let b = Rule::new(3, 10, Match::ANY, Actions::drop());
        let c = Rule::new(9, 11, Match::ANY, Actions::drop());
        assert!(b.beats(&a), "equal priority: lower id wins");
        assert!(c.beats(&a) && c.beats(&b), "higher priority wins");
        assert!(!a.beats(&a));
        assert!(beats(11, RuleId(9), 10, RuleId(3)));
    }

    #[test]
    fn actions_display() {
        assert_eq!(Actions::default().to_string(), "drop");
        let a = Actions(vec![Action::Output(2), Action::Controller(Some(128)), Action::Other("resubmit(,1)".into())]);
        assert_eq!(a.to_string(), "output:2,controller:128,resubmit(,1)");
        assert!(!a.is_drop());
        assert!(Actions::drop().is_drop());
    }
}
