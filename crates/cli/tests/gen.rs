//! `rqvs gen` end to end: generated rules and traces are readable by the other commands and
//! classify with no mismatch; bad inputs give one-line errors.

use std::path::PathBuf;
mod common;
use common::{rqvs, TempDir};

fn tmp(dir: &TempDir, name: &str) -> PathBuf {
    dir.join(name)
}

fn seed_file() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/classbench/parameter_files/acl1_seed");
    if p.exists() {
        return Some(p);
    }
    if std::env::var("RQVS_REQUIRE_DATA").as_deref() == Ok("1") {
        panic!("RQVS_REQUIRE_DATA=1 but {} is missing", p.display());
    }
    eprintln!("skipped: {} not found", p.display());
    None
}

#[test]
fn generated_rules_and_trace_classify_without_mismatch() {
    let dir = TempDir::new("gen-generated-rules-and-trace-classify-witho");
    let Some(seed) = seed_file() else { return };
    let rules = tmp(&dir, "acl1_2k.rules");
    let trace = tmp(&dir, "acl1_2k.trace");
    let out = rqvs(&[
        "gen",
        "rules",
        "--seed-file",
        seed.to_str().unwrap(),
        "--count",
        "2000",
        "--rng-seed",
        "7",
        "-o",
        rules.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let again = tmp(&dir, "acl1_2k_again.rules");
    rqvs(&[
        "gen",
        "rules",
        "--seed-file",
        seed.to_str().unwrap(),
        "--count",
        "2000",
        "--rng-seed",
        "7",
        "-o",
        again.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read(&rules).unwrap(), std::fs::read(&again).unwrap(), "same seed, same rules");
    let out = rqvs(&[
        "gen",
        "trace",
        "--rules",
        rules.to_str().unwrap(),
        "--packets",
        "5000",
        "--locality",
        "pareto:1,0.1",
        "--rng-seed",
        "3",
        "-o",
        trace.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for c in ["tm", "nmu"] {
        let out = rqvs(&[
            "classify",
            "--rules",
            rules.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
            "--classifier",
            c,
            "--json",
            "-",
        ]);
        assert!(out.status.success(), "{c}: {}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["packets"], 5000);
        assert_eq!(v["mismatches"], 0);
        assert_eq!(v["verified"], 5000);
    }
}

#[test]
fn bad_seed_file_is_a_one_line_error() {
    let dir = TempDir::new("gen-bad-seed-file-is-a-one-line-error");
    let bad = tmp(&dir, "bad_seed");
    std::fs::write(&bad, "-scale\nnot a number\n").unwrap();
    let out = rqvs(&["gen", "rules", "--seed-file", bad.to_str().unwrap(), "--count", "10"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("bad_seed"), "{err}");
    let out = rqvs(&["gen", "rules", "--seed-file", "no-such-seed", "--count", "10"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn train_then_classify_with_the_model() {
    let dir = TempDir::new("gen-train-then-classify-with-the-model");
    let model = tmp(&dir, "default.nmu");
    let out = rqvs(&["train", "--out", model.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = rqvs(&["classify", "--model", model.to_str().unwrap(), "--json", "-"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["classifier"].as_str(), v["rules"].as_u64(), v["mismatches"].as_u64()),
        (Some("nmu"), Some(927), Some(0))
    );
    let bytes = std::fs::read(&model).unwrap();
    let cut = tmp(&dir, "cut.nmu");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let out = rqvs(&["classify", "--model", cut.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.contains("cut.nmu: model file is truncated"), "{err}");
}

/// `rqvs gen attack`: each kind writes a pcap that replays with 0 mismatches; its report says
/// what it does to ORIG (co-located TSE: many more masks than the general attack, TSE 2.0
/// exactly the masks asked for, the flood few); options that do not apply are usage errors.
#[test]
fn attacks_make_the_masks_they_claim() {
    let dir = TempDir::new("gen-attack");
    let rules = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/default/acl1_1k_rules.xz");
    let rules = rules.to_str().unwrap();
    let mut orig = std::collections::BTreeMap::new();
    for (name, extra) in [
        ("tse", &["--kind", "tse"][..]),
        ("general", &["--kind", "tse", "--variant", "general"]),
        ("tse2", &["--kind", "tse2", "--masks", "40"]),
        ("flood", &["--kind", "flood"]),
    ] {
        let pcap = tmp(&dir, &format!("{name}.pcap"));
        let pcap = pcap.to_str().unwrap();
        let args =
            [&["gen", "attack", "--rules", rules, "--packets", "5000", "-o", pcap, "--json", "-"][..], extra].concat();
        let out = rqvs(&args);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!((j["command"].as_str(), j["packets"].as_u64()), (Some("gen attack"), Some(5000)), "{name}");
        assert_eq!(j["orig"]["mismatches"], 0, "{name}");
        orig.insert(name, j["orig"]["masks"].as_u64().unwrap());
        // The pcap replays through every design with the reference's actions.
        let out = rqvs(&["compare", "--rules", rules, "--trace", pcap, "--designs", "orig,cflows"]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    }
    assert!(orig["tse"] > 4 * orig["general"] && orig["tse"] > 20 * orig["flood"], "{orig:?}");
    assert_eq!(orig["tse2"], 40, "{orig:?}");
    let pcap = tmp(&dir, "x.pcap");
    let pcap = pcap.to_str().unwrap();
    for (args, code, what) in [
        (vec!["--kind", "tse2", "--variant", "general"], 2, "--variant: what a TSE attacker knows"),
        (vec!["--kind", "tse", "--masks", "8"], 2, "--masks: the masks of TSE 2.0"),
        (vec!["--kind", "tse", "--packets", "0"], 2, "--packets"),
        (vec!["--kind", "bogus"], 2, "invalid value 'bogus'"),
    ] {
        let mut a = vec!["gen", "attack", "--rules", rules, "-o", pcap];
        if !args.contains(&"--packets") {
            a.extend(["--packets", "10"]);
        }
        a.extend(args.iter().copied());
        let out = rqvs(&a);
        assert_eq!(out.status.code(), Some(code), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(what),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = rqvs(&["gen", "attack", "--rules", "/nonexistent.rules", "--kind", "tse", "--packets", "10", "-o", pcap]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.rules"));
}

/// ClassBench-ng sets end to end: `gen rules --seed-file of1` (an ovs-ofctl file by default) and
/// `--ipv6`, a pcap trace for each that `classify` replays with no mismatch; an OpenFlow seed
/// refuses the ClassBench format, and a bad `-openflow` section is a one-line file:line error.
#[test]
fn openflow_and_ipv6_sets_classify_without_mismatch() {
    let dir = TempDir::new("gen-openflow-and-ipv6-sets");
    for (name, extra) in [("of1", vec![]), ("acl1", vec!["--ipv6"])] {
        let rules = tmp(&dir, &format!("{name}.ofctl"));
        let trace = tmp(&dir, &format!("{name}.pcap"));
        let mut args = vec!["gen", "rules", "--seed-file", name, "--count", "2000", "-o", rules.to_str().unwrap()];
        args.extend(extra);
        let out = rqvs(&args);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let text = std::fs::read_to_string(&rules).unwrap();
        assert!(text.starts_with("priority="), "{name}: an ovs-ofctl file");
        let out = rqvs(&[
            "gen",
            "trace",
            "--rules",
            rules.to_str().unwrap(),
            "--packets",
            "3000",
            "--format",
            "pcap",
            "-o",
            trace.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let out = rqvs(&[
            "classify",
            "--rules",
            rules.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
            "--classifier",
            "tm",
            "--json",
            "-",
        ]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["packets"], 3000, "{name}");
        assert_eq!(v["mismatches"], 0, "{name}");
    }
    let out = rqvs(&["gen", "rules", "--seed-file", "of1", "--count", "10", "--format", "classbench"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("use --format ofctl"), "{err}");
    let bad = tmp(&dir, "bad_of_seed");
    let text = rqvs_workload::seedfile::embedded("of1").unwrap().replace("  count: 1016", "  count: many");
    std::fs::write(&bad, text).unwrap();
    let out = rqvs(&["gen", "rules", "--seed-file", bad.to_str().unwrap(), "--count", "10"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("bad_of_seed:391:10: expected a positive count, found 'many'"), "{err}");
}
