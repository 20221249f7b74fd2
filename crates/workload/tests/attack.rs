//! Attack generation (`rqvs_workload::attack`): determinism, masks, bad input.

use std::collections::HashSet;

use rqvs_classify::ofproto::OfprotoClassifier;
use rqvs_flow::formats::classbench;
use rqvs_flow::{FlowKey, Rule};
use rqvs_testkit::data;
use rqvs_workload::attack::{self, Kind, Params, Variant};

fn real_rules(name: &str) -> Option<Vec<Rule>> {
    let Some(dir) = data::classbench_dir() else {
        eprintln!("skipping: ClassBench data not found");
        return None;
    };
    let (seed, size) = name.split_once('_').unwrap();
    let path = data::rules_path(&dir, seed, size);
    let text = rqvs_flow::io::read_text(&path).unwrap();
    Some(classbench::parse_rules(&path.display().to_string(), &text).unwrap())
}

/// Every packet of a co-located attack gets, from the slow path, one of the masks it was built
/// for, and (almost) every packet is a new microflow.
#[test]
fn every_packet_keeps_its_mask_and_is_a_new_microflow() {
    let Some(rules) = real_rules("acl1_1k") else { return };
    let clf = OfprotoClassifier::build(&rules).unwrap();
    for (kind, masks) in [(Kind::Tse2, 16), (Kind::Tse, 0)] {
        let mut p = Params::new(kind, 3000, 3);
        p.tse2_masks = 16;
        let a = attack::generate(&rules, &p).unwrap();
        assert_eq!(a.keys.len(), 3000);
        let got: HashSet<FlowKey> = a.keys.iter().map(|k| clf.lookup_wc(k).megaflow(k).mask).collect();
        assert_eq!(got.len(), a.masks_used, "{kind:?}");
        if masks > 0 {
            assert_eq!(a.masks_used, masks);
        }
        let distinct: HashSet<FlowKey> = a.keys.iter().copied().collect();
        assert!(distinct.len() * 100 >= a.keys.len() * 99, "{kind:?}: {} distinct", distinct.len());
    }
    for kind in [Kind::Flood, Kind::Tse] {
        let mut p = Params::new(kind, 3000, 3);
        p.variant = Variant::General;
        let a = attack::generate(&rules, &p).unwrap();
        let distinct: HashSet<FlowKey> = a.keys.iter().copied().collect();
        assert_eq!(distinct.len(), 3000, "{kind:?}");
        assert!(a.keys.iter().all(|k| *k == k.wire() && k.in_port == 1));
    }
}

#[test]
fn bad_parameters_are_errors() {
    let rules = real_rules("acl1_1k").unwrap_or_default();
    assert!(attack::generate(&rules, &Params::new(Kind::Tse, 0, 1)).unwrap_err().contains("packets"));
    let mut p = Params::new(Kind::Tse2, 10, 1);
    p.variant = Variant::General;
    assert!(attack::generate(&rules, &p).unwrap_err().contains("co-located"));
    p.variant = Variant::CoLocated;
    p.tse2_masks = 0;
    assert!(attack::generate(&rules, &p).is_err());
    assert!(attack::generate(&[], &Params::new(Kind::Tse, 10, 1)).unwrap_err().contains("rule"));
    assert_eq!(attack::Kind::parse("smurf").unwrap_err(), "expected an attack kind tse | tse2 | flood, found 'smurf'");
}
