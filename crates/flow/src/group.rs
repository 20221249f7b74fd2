//! OpenFlow groups (OpenFlow 1.3 §5.6): a group is a list of buckets, each an action list,
//! and a type that says which buckets a packet takes. A rule reaches one with
//! [`Action::Group`](crate::Action::Group).
//!
//! This module only describes groups; the switch keeps the group table (GROUP_MOD) and the
//! translation executes them.

use std::fmt;

use crate::rule::Actions;

/// OFPG_ANY / "no group" in watch_group and filters.
pub const OFPG_ANY: u32 = 0xffff_ffff;
/// OFPP_ANY / "no port" in watch_port and filters.
pub const OFPP_ANY: u32 = 0xffff_ffff;
/// The highest group id a GROUP_MOD may name (OFPG_MAX).
pub const OFPG_MAX: u32 = 0xffff_ff00;

/// Which buckets a packet takes (`enum ofp_group_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum GroupType {
    /// Every bucket, each on its own copy of the packet (flooding, multicast).
    All,
    /// One bucket, chosen by a hash of the flow weighted by the buckets' weights (OVS's default
    /// selection method).
    Select,
    /// The one bucket (a shared next hop).
    Indirect,
    /// The first bucket whose watch port / watch group is live.
    FastFailover,
}

impl GroupType {
    /// The name ovs-ofctl writes (`type=all`, ...).
    pub fn name(self) -> &'static str {
        match self {
            GroupType::All => "all",
            GroupType::Select => "select",
            GroupType::Indirect => "indirect",
            GroupType::FastFailover => "fast_failover",
        }
    }

    /// The type of an ovs-ofctl name.
    pub fn by_name(s: &str) -> Option<GroupType> {
        [GroupType::All, GroupType::Select, GroupType::Indirect, GroupType::FastFailover]
            .into_iter()
            .find(|t| t.name() == s)
    }
}

/// One bucket of a group.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Bucket {
    /// Relative weight (select groups; 0 means never chosen).
    pub weight: u16,
    /// The port whose liveness decides the bucket (fast failover; [`OFPP_ANY`]: none).
    pub watch_port: u32,
    /// The group whose liveness decides the bucket (fast failover; [`OFPG_ANY`]: none).
    pub watch_group: u32,
    /// The bucket's actions (an action set: OpenFlow executes a bucket's actions as one).
    pub actions: Actions,
}

impl Bucket {
    /// A bucket with these actions, weight 1 and nothing watched.
    pub fn new(actions: Actions) -> Bucket {
        Bucket { weight: 1, watch_port: OFPP_ANY, watch_group: OFPG_ANY, actions }
    }
}

/// One group of a switch's group table.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Group {
    pub id: u32,
    pub kind: GroupType,
    pub buckets: Vec<Bucket>,
}

impl fmt::Display for Group {
    /// ovs-ofctl's `dump-groups` line body: `group_id=1,type=all,bucket=actions=output:1,...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "group_id={},type={}", self.id, self.kind.name())?;
        for b in &self.buckets {
            f.write_str(",bucket=")?;
            if self.kind == GroupType::Select && b.weight != 1 {
                write!(f, "weight:{},", b.weight)?;
            }
            if b.watch_port != OFPP_ANY {
                write!(f, "watch_port:{},", b.watch_port)?;
            }
            if b.watch_group != OFPG_ANY {
                write!(f, "watch_group:{},", b.watch_group)?;
            }
            write!(f, "actions={}", b.actions)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::Action;

    #[test]
    fn display_as_ovs_ofctl() {
        let g = Group {
            id: 7,
            kind: GroupType::Select,
            buckets: vec![
                Bucket { weight: 3, ..Bucket::new(Actions::output(1)) },
                Bucket::new(Actions(vec![Action::Output(2)])),
            ],
        };
        assert_eq!(g.to_string(), "group_id=7,type=select,bucket=weight:3,actions=output:1,bucket=actions=output:2");
        assert_eq!(GroupType::by_name("fast_failover"), Some(GroupType::FastFailover));
        assert_eq!(GroupType::by_name("ff"), None);
    }
}
