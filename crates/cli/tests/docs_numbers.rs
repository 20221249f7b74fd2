//! Numbers in the README that come from deterministic reports are checked against a fresh run
//! of the command that made them, so a figure cannot drift from what rqvs computes (issue 19:
//! "numbers in docs come from JSON, not from hands"). Each table names its command; a test
//! here reruns it and compares every cell. (Timed figures cannot be checked this way: they are
//! kept with the CPU and commit that made them.)

mod common;
use common::{rqvs, TempDir};

/// The rows of the README's Markdown table whose header starts with `header`.
fn table(readme: &str, header: &str) -> Vec<Vec<String>> {
    let mut lines = readme.lines().skip_while(|l| !l.starts_with(header));
    assert!(lines.next().is_some(), "README: no table '{header}'");
    lines
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.trim_matches('|').split('|').map(|c| c.trim().replace(',', "")).collect())
        .collect()
}

#[test]
fn the_attack_table_is_what_gen_attack_reports() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let rows = table(&readme, "| kind | masks in ORIG");
    assert_eq!(rows.len(), 4, "{rows:?}");
    let rules = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/default/acl1_1k_rules.xz");
    let dir = TempDir::new("docs-numbers");
    let pcap = dir.join("a.pcap").display().to_string();
    for row in rows {
        let kind: Vec<&str> = match row[0].as_str() {
            "tse (co-located)" => vec!["--kind", "tse"],
            "tse (general)" => vec!["--kind", "tse", "--variant", "general"],
            "tse2 (64 masks)" => vec!["--kind", "tse2"],
            "flood" => vec!["--kind", "flood"],
            other => panic!("README: an attack row this test does not know: {other}"),
        };
        let args = [&["gen", "attack", "--rules", rules, "--packets", "20000", "-o", &pcap, "--json", "-"][..], &kind]
            .concat();
        let out = rqvs(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let o = &j["orig"];
        let got = [
            o["masks"].to_string(),
            o["megaflows"].to_string(),
            o["upcalls"].to_string(),
            format!("{:.1}", o["avg_subtables_per_hit"].as_f64().unwrap()),
        ];
        assert_eq!(row[1..], got[..], "README's row '{}' against `rqvs {}`", row[0], args.join(" "));
    }
}

/// The README's table of megaflows from the full 10K traces (`rqvs trace --trace`).
#[test]
fn the_megaflow_table_is_what_trace_reports() {
    let Some(data) = rqvs_testkit::data::classbench_dir() else { return };
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let rows = table(&readme, "| set | flows | subtables | packets | upcalls = megaflows | masks |");
    assert_eq!(rows.len(), 3, "{rows:?}");
    for row in rows {
        let (seed, size) = row[0].split_once('_').expect("SEED_SIZE");
        let rules = rqvs_testkit::data::rules_path(&data, seed, size);
        let trace = rqvs_testkit::data::trace_path(&data, seed, size);
        let args = ["trace", "--rules", rules.to_str().unwrap(), "--trace", trace.to_str().unwrap(), "--json", "-"];
        let out = rqvs(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(j["mismatches"], 0);
        let got: Vec<String> =
            ["flows", "subtables", "packets", "megaflows", "masks"].iter().map(|k| j[*k].to_string()).collect();
        assert_eq!(j["upcalls"], j["megaflows"], "{}", row[0]);
        assert_eq!(row[1..], got[..], "README's row '{}' against `rqvs {}`", row[0], args.join(" "));
    }
}
