//! Shared fixtures of the datapath's unit tests: a rule-set whose rules overlap (a /24 source and
//! a port range each, plus a catch-all), packets that hit it, and the reference's actions.

use rqvs_classify::Reference;
use rqvs_flow::{FlowKey, Rule, RuleId};
use rqvs_ofproto::DpAction;
pub use rqvs_testkit::overlap::{attack_keys, keys, rules};

/// The reference classifier's action for each key.
pub fn expect(rules: &[Rule], keys: &[FlowKey]) -> Vec<DpAction> {
    let r = Reference::build(rules).unwrap();
    keys.iter().map(|k| DpAction::of_rule(r.lookup_rule(&k.wire()))).collect()
}

/// The reference classifier's winner for each key ([`rqvs_ofproto::NO_RULE`] when none matches): the
/// rule a design must attribute the packet to.
pub fn expect_rules(rules: &[Rule], keys: &[FlowKey]) -> Vec<RuleId> {
    let r = Reference::build(rules).unwrap();
    keys.iter().map(|k| r.lookup_rule(&k.wire()).map_or(rqvs_ofproto::NO_RULE, |r| r.id)).collect()
}
