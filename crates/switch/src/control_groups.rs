//! The switch's views of the group table of record ([`rqvs_ofproto::groups`]): the committed
//! snapshot, GROUP stats with the PMDs' counts, the flows per table, and a bundled FLOW_MOD's
//! early check against the groups.

use std::collections::BTreeMap;

use rqvs_flow::group::{Group, GroupType};
use rqvs_ofproto::groups::{groups_named, SharedGroups};
use rqvs_openflow::group::OFPG_ALL;

impl crate::Control {
    /// The committed group table (a snapshot, [`SharedGroups`]): what GROUP_DESC reports and
    /// what the datapath's translation reads.
    pub fn groups(&self) -> SharedGroups {
        self.lock_rules().groups()
    }

    /// GROUP stats of group `id`, or of every group for `OFPG_ALL` (a missing group: none).
    /// `ref_count` is the number of flows whose actions name the group. Packet and byte counts
    /// are 0, per group and per bucket: no packet executes a group until the pipeline is
    /// translated (the xlate work), which will count them.
    pub fn group_stats(&self, id: u32) -> Vec<rqvs_openflow::group::GroupStats> {
        let now = self.clock_ns();
        let totals = self.pipeline_totals();
        let rules = self.lock_rules();
        let groups = rules.groups();
        let mut refs: BTreeMap<u32, u32> = BTreeMap::new();
        for r in rules.iter() {
            let mut named: Vec<u32> = groups_named(&r.actions.0).collect();
            named.dedup();
            for g in named {
                *refs.entry(g).or_insert(0) += 1;
            }
        }
        groups
            .iter()
            .filter(|e| id == OFPG_ALL || e.group.id == id)
            .map(|e| {
                let d = now.saturating_sub(e.created_ns);
                let c = self.group_counts(&totals, e.group.id);
                let bucket = |i: usize| c.buckets.get(i).map_or((0, 0), |b| (b.packets, b.bytes));
                rqvs_openflow::group::GroupStats {
                    group_id: e.group.id,
                    ref_count: refs.get(&e.group.id).copied().unwrap_or(0),
                    packet_count: c.total.packets,
                    byte_count: c.total.bytes,
                    duration_sec: (d / 1_000_000_000).min(u64::from(u32::MAX)) as u32,
                    duration_nsec: (d % 1_000_000_000) as u32,
                    buckets: (0..e.group.buckets.len()).map(bucket).collect(),
                }
            })
            .collect()
    }

    /// The number of flows in each table that has any (hidden flows not counted).
    pub fn active_per_table(&self) -> BTreeMap<u8, u32> {
        let rules = self.lock_rules();
        let mut n = rules.active_per_table();
        for r in rules.iter().filter(|r| rules.is_hidden(r)) {
            if let Some(c) = n.get_mut(&r.table) {
                *c -= 1;
            }
        }
        n
    }
}

impl crate::Control {
    /// Checks an add or modify against the tables and the committed groups as they are now
    /// ([`rqvs_ofproto::record::check_flow`]; `also` are groups an earlier message of the same bundle
    /// adds): what a bundled FLOW_MOD is refused with when it is added to the bundle, as OVS
    /// checks each message then. Other ops pass (they are checked at the commit).
    pub fn precheck(&self, op: &crate::FlowOp, also: &[u32]) -> Result<(), crate::OpError> {
        let rules: Vec<&rqvs_flow::Rule> = match op {
            crate::FlowOp::Add(r, _) => vec![r],
            _ => return Ok(()),
        };
        let mut groups = (*self.groups()).clone();
        for &g in also {
            groups.set(Group { id: g, kind: GroupType::All, buckets: Vec::new() }, 0);
        }
        rules.into_iter().try_for_each(|r| rqvs_ofproto::record::check_flow(r, &groups))
    }
}
