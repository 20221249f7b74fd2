//! The verification's reference for a rule file of several tables ([`PipelineReference`]): per
//! table, the reference classifier (the winner by definition, [`rqvs_classify::Reference`]),
//! walked by the one translation [`rqvs_ofproto::xlate::xlate`] — so the designs' pipeline
//! walks (ORIG's and CCACHE's over the OpenFlow slow path with wildcards, CFLOWS' over its
//! learned table 0) are checked against per-table lookups that share none of their code. The
//! replay has no group table: a `group:N` action finds no group (drops), in the designs and
//! here alike.

use rqvs_classify::Reference;
use rqvs_datapath::{cflows_pipeline, DesignKind};
use rqvs_flow::{FlowKey, Rule};
use rqvs_ofproto::xlate::{xlate, NoGroups, Pipeline};
use rqvs_ofproto::DpAction;

use crate::Error;

/// Does a rule table use tables past 0 (then the verification walks the pipeline)?
pub(super) fn is_pipeline(rules: &[Rule]) -> bool {
    rules.iter().any(|r| r.table != 0)
}

/// Per table, the reference classifier of its rules.
pub(super) struct PipelineReference {
    tables: Vec<Option<Reference>>,
}

impl PipelineReference {
    pub(super) fn build(rules: &[Rule]) -> Result<PipelineReference, Error> {
        let mut per: Vec<Vec<Rule>> = Vec::new();
        for r in rules {
            let t = usize::from(r.table);
            if per.len() <= t {
                per.resize_with(t + 1, Vec::new);
            }
            per[t].push(r.clone());
        }
        let tables = per
            .iter()
            .map(|t| if t.is_empty() { Ok(None) } else { Reference::build(t).map(Some) })
            .collect::<Result<_, _>>()?;
        Ok(PipelineReference { tables })
    }

    /// The actions a design may give `key` (a wire key, as the designs classify): the
    /// translation's ops for ORIG and CCACHE; for CFLOWS the same, except that a packet whose
    /// table-0 rule ends the pipeline there gets that rule's own op list (CFLOWS serves table 0
    /// from its learned classifier without translating, [`cflows_pipeline`]); `auto` moves
    /// between the designs, so either is right for it.
    pub(super) fn actions(&self, key: &FlowKey, design: DesignKind) -> (DpAction, Option<DpAction>) {
        let x = xlate(self, &NoGroups, key);
        let translated = x.action();
        let cflows = || {
            let first = x.first_rule().and_then(|id| self.tables.first()?.as_ref()?.rule(id));
            match first {
                Some(r) if !cflows_pipeline::continues(r) => DpAction::from_rule(r),
                _ => translated,
            }
        };
        match design {
            DesignKind::Orig | DesignKind::Ccache => (translated, None),
            DesignKind::Cflows => (cflows(), None),
            DesignKind::Auto => (translated, Some(cflows())),
        }
    }
}

impl Pipeline for PipelineReference {
    fn lookup(&self, table: u8, key: &FlowKey, _wc: &mut FlowKey) -> Option<Rule> {
        self.tables.get(usize::from(table))?.as_ref()?.lookup_rule(key).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_flow::formats::ofctl;

    fn key(dst: u32, dport: u16) -> FlowKey {
        let mut k = FlowKey::ZERO;
        k.in_port = 1;
        k.dl_type = rqvs_flow::key::ETH_TYPE_IP;
        k.nw_proto = rqvs_flow::key::IPPROTO_TCP;
        k.nw_src = 0x0a00_0001;
        k.nw_dst = dst;
        k.tp_dst = dport;
        k.nw_ttl = 64;
        k
    }

    /// A permit reaches table 1's longest prefix; a drop in table 0 ends there (CFLOWS: the
    /// rule's own op list); a miss in table 1 takes the miss flow.
    #[test]
    fn walks_both_tables() {
        let text = "priority=20,tcp,tp_dst=22,actions=drop\n\
                    priority=10,tcp,actions=goto_table:1\n\
                    table=1,priority=25,ip,nw_dst=10.1.0.0/24,actions=output:3\n\
                    table=1,priority=17,ip,nw_dst=10.0.0.0/16,actions=output:2\n\
                    table=1,priority=0,actions=output:4\n";
        let rules = ofctl::parse_flows("p.flows", text).unwrap();
        assert!(is_pipeline(&rules));
        let r = PipelineReference::build(&rules).unwrap();
        let out = |k: &FlowKey, d| r.actions(k, d).0;
        assert_eq!(out(&key(0x0a01_0005, 80), DesignKind::Orig), DpAction::Output(3));
        assert_eq!(out(&key(0x0a00_0205, 80), DesignKind::Cflows), DpAction::Output(2));
        assert_eq!(out(&key(0x0b00_0005, 80), DesignKind::Ccache), DpAction::Output(4));
        assert_eq!(out(&key(0x0a01_0005, 22), DesignKind::Orig), DpAction::Drop);
        let drop_rule = DpAction::from_rule(&rules[0]);
        assert_eq!(out(&key(0x0a01_0005, 22), DesignKind::Cflows), drop_rule);
        assert_eq!(r.actions(&key(0x0a01_0005, 22), DesignKind::Auto), (DpAction::Drop, Some(drop_rule)));
        // A reference of table 0 alone (what the verification used before) would say
        // otherwise: the goto's rule has no output.
        let t0 = Reference::build(&rules[..2]).unwrap();
        assert_ne!(DpAction::of_rule(t0.lookup_rule(&key(0x0a01_0005, 80))), DpAction::Output(3));
    }
}
