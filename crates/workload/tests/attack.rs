//! Attack generation (`rqvs_workload::attack`): determinism, masks, bad input.

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

#[test]
fn every_packet_keeps_its_masks_megaflow() {
    let Some(rules) = real_rules("acl1_1k") else { return };
    let clf = OfprotoClassifier::build(&rules).unwrap();
    let mut p = Params::new(Kind::Tse2, 2000, 3);
    p.tse2_masks = 16;
    let a = attack::generate(&rules, &p).unwrap();
    let masks: std::collections::HashSet<FlowKey> = a.keys.iter().map(|k| clf.lookup_wc(k).megaflow(k).mask).collect();
    for k in &a.keys[..40] {
        eprintln!("{k:?} {:?}", clf.lookup_wc(k).megaflow(k).mask);
    }
    assert_eq!(masks.len(), 16);
}
