//! Attacks over a real ClassBench set: every packet's own slow-path lookup gives one of the masks
//! the search found, so the megaflow cache holds no more masks than the attack reports.

use std::collections::HashSet;

use rqvs_classify::OfprotoClassifier;
use rqvs_flow::formats::classbench;
use rqvs_flow::{FlowKey, Rule};
use rqvs_testkit::data;
use rqvs_workload::attack::{self, Kind, Params};

fn real_rules(seed: &str, size: &str) -> Option<Vec<Rule>> {
    let Some(dir) = data::classbench_dir() else {
        eprintln!("skipping: ClassBench data not found");
        return None;
    };
    let path = data::rules_path(&dir, seed, size);
    let text = rqvs_flow::io::read_text(&path).unwrap();
    Some(classbench::parse_rules(&path.display().to_string(), &text).unwrap())
}

#[test]
fn refreshed_packets_keep_the_masks_the_search_found() {
    let Some(rules) = real_rules("acl1", "1k") else { return };
    let c = OfprotoClassifier::build(&rules).unwrap();
    for (kind, masks) in [(Kind::Tse2, 16), (Kind::Tse, 64)] {
        let mut p = Params::new(kind, 3000, 3);
        p.masks = masks;
        if kind == Kind::Tse {
            p.budget = 2000;
        }
        let (keys, stats) = attack::generate(&rules, &p).unwrap();
        let got: HashSet<FlowKey> = keys.iter().map(|k| c.lookup_wc(k).megaflow(k).mask).collect();
        assert_eq!(got.len(), stats.distinct_masks, "{kind:?}");
        // New microflows: (almost) no header repeats.
        let distinct: HashSet<FlowKey> = keys.iter().copied().collect();
        assert!(distinct.len() * 100 >= keys.len() * 99, "{kind:?}: {} distinct", distinct.len());
    }
}
