//! Every ClassBench file in the shared data parses, with the counts `summary.tsv` gives, and
//! rule files written back are byte-identical to the originals.

use rqvs_testkit::data as shared_data;

use rqvs_flow::formats::{classbench, trace};
use shared_data::*;

#[test]
fn every_rule_and_trace_file_parses_with_the_summary_counts() {
    let Some(dir) = classbench_dir() else { return };
    let summary = std::fs::read_to_string(dir.join("summary.tsv")).unwrap();
    let mut checked = 0;
    for line in summary.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        let (seed, size, rules_actual, trace_headers) = (cols[0], cols[2], cols[3], cols[9]);
        let rules = classbench::read_rules(&rules_path(&dir, seed, size)).unwrap();
        assert_eq!(rules.len().to_string(), rules_actual, "{seed}_{size}: rule count");
        let t = trace::read_trace(&trace_path(&dir, seed, size)).unwrap();
        assert_eq!(t.len().to_string(), trace_headers, "{seed}_{size}: trace length");
        assert!(
            t.iter().all(|e| e.intended.is_some_and(|i| (i.0 as usize) < rules.len())),
            "{seed}_{size}: intended index in range"
        );
        checked += 1;
    }
    assert_eq!(checked, 48, "summary.tsv lists 12 seeds x 4 sizes");
}

#[test]
fn rule_files_round_trip_byte_for_byte() {
    let Some(dir) = classbench_dir() else { return };
    for seed in SEEDS {
        for size in ["1k", "10k"] {
            let path = rules_path(&dir, seed, size);
            let text = rqvs_flow::io::read_text(&path).unwrap();
            let rules = classbench::parse_rules("x", &text).unwrap();
            let written = classbench::write_rules(&rules).unwrap();
            assert!(written == text, "{seed}_{size}: written rules differ from the original");
        }
    }
}
