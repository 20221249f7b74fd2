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

fn classbench_rules(set: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("RQVS_CLASSBENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/classbench"));
    let p = dir.join("rules").join(format!("{set}.xz"));
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
fn attacks_replay_with_no_mismatch_and_report_orig() {
    let dir = TempDir::new("gen-attack-replay");
    let Some(rules) = classbench_rules("acl1_1k") else { return };
    for kind in ["tse", "tse2", "flood"] {
        let pcap = tmp(&dir, &format!("{kind}.pcap"));
        let out = rqvs(&[
            "gen",
            "attack",
            "--rules",
            rules.to_str().unwrap(),
            "--kind",
            kind,
            "--packets",
            "3000",
            "--rng-seed",
            "2",
            "-o",
            pcap.to_str().unwrap(),
            "--json",
            "-",
        ]);
        assert!(out.status.success(), "{kind}: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        let start = text.find("\n{").map_or(0, |i| i + 1);
        let j: serde_json::Value = serde_json::from_str(&text[start..]).unwrap();
        assert_eq!(j["command"], "gen attack", "{text}");
        assert_eq!(j["orig"]["mismatches"], 0, "{kind}");
        assert!(j["orig"]["masks"].as_u64().unwrap() > 0, "{kind}");
        let out =
            rqvs(&["replay", "--rules", rules.to_str().unwrap(), "--trace", pcap.to_str().unwrap(), "--json", "-"]);
        assert!(out.status.success(), "{kind}: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        let start = text.find("\n{").map_or(0, |i| i + 1);
        let r: serde_json::Value = serde_json::from_str(&text[start..]).unwrap();
        assert_eq!(r["mismatches"], 0, "{kind}: {text}");
        assert_eq!(r["packets"], 3000, "{kind}");
    }
}

#[test]
fn bad_attack_requests_are_one_line_errors() {
    let dir = TempDir::new("gen-attack-bad");
    let o = tmp(&dir, "a.pcap");
    let o = o.to_str().unwrap();
    let err = |args: &[&str]| {
        let out = rqvs(args);
        assert!(!out.status.success(), "{args:?}");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let e = err(&["gen", "attack", "--rules", "/nonexistent/r", "--kind", "tse", "--packets", "10", "-o", o]);
    assert!(e.contains("/nonexistent/r") && !e.contains("panicked"), "{e}");
    let Some(rules) = classbench_rules("acl1_1k") else { return };
    let r = rules.to_str().unwrap();
    let e = err(&["gen", "attack", "--rules", r, "--kind", "tse", "--packets", "0", "-o", o]);
    assert!(e.contains("--packets"), "{e}");
    let e = err(&["gen", "attack", "--rules", r, "--kind", "smurf", "--packets", "10", "-o", o]);
    assert!(e.contains("smurf") && e.contains("tse2"), "{e}");
    let e = err(&["gen", "attack", "--rules", r, "--kind", "tse2", "--variant", "general", "--packets", "10", "-o", o]);
    assert!(e.contains("co-located") && !e.contains("panicked"), "{e}");
}
