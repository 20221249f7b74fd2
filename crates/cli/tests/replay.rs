//! `rqvs replay` and `rqvs compare` on the shipped acl1_1k workload: every design gives the
//! reference's action on the sampled packets, also while rules are added and removed under both
//! update policies; the counters sum; bad options get one-line errors.

use std::path::PathBuf;
use std::process::{Command, Output};

fn rqvs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rqvs")).args(args).output().expect("run rqvs")
}

fn data(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/default").join(name).display().to_string()
}

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let start = text.find("\n{").map_or(0, |i| i + 1);
    serde_json::from_str(&text[start..]).expect("JSON report at the end of stdout")
}

fn check_run(r: &serde_json::Value) {
    let design = r["design"].as_str().unwrap();
    assert_eq!(r["mismatches"], 0, "{design}");
    assert!(r["verified"].as_u64().unwrap() > 500, "{design}: {}", r["verified"]);
    let c = &r["counters"];
    let sum: u64 = ["emc_hit", "cd_hit", "megaflow_hit", "model_hit", "remainder_hit", "no_match", "upcall", "lost"]
        .iter()
        .map(|k| c[*k].as_u64().unwrap())
        .sum();
    assert_eq!(sum, c["received"].as_u64().unwrap(), "{design}: outcomes sum to packets received");
}

#[test]
fn compare_runs_every_design_on_the_same_packets() {
    let dir = std::env::temp_dir().join(format!("rqvs-replay-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plot = dir.join("compare.svg");
    let out = rqvs(&[
        "compare",
        "--rules",
        &data("acl1_1k_rules.xz"),
        "--trace",
        &data("acl1_1k_trace.xz"),
        "--duration",
        "0.2",
        "--train-interval",
        "0.005",
        "--plot",
        plot.to_str().unwrap(),
        "--json",
        "-",
    ]);
    let j = json(&out);
    let runs = j["runs"].as_array().unwrap();
    let names: Vec<&str> = runs.iter().map(|r| r["design"].as_str().unwrap()).collect();
    assert_eq!(names, ["orig", "ccache", "cflows"]);
    for r in runs {
        check_run(r);
        assert!(r["speedup"].as_f64().unwrap() > 0.0);
    }
    assert_eq!(runs[0]["counters"]["model_hit"], 0);
    assert!(runs[1]["counters"]["model_hit"].as_u64().unwrap() > 0, "ccache's model served packets");
    assert!(runs[2]["counters"]["model_hit"].as_u64().unwrap() > 0, "cflows' model served packets");
    assert_eq!(runs[2]["counters"]["upcall"], 0, "cflows has no upcalls");
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.contains("<svg") && svg.contains("cflows"), "combined plot drawn");
}

#[test]
fn cflows_updates_under_both_policies_keep_every_action_right() {
    for policy in ["instant", "delayed"] {
        let out = rqvs(&[
            "replay",
            "--design",
            "cflows",
            "--policy",
            policy,
            "--rules",
            &data("acl1_1k_rules.xz"),
            "--trace",
            &data("acl1_1k_trace.xz"),
            "--duration",
            "0.05",
            "--updates",
            "add:150@5ms,del:100@10ms,add:50@20ms",
            "--json",
            "-",
        ]);
        let r = json(&out);
        check_run(&r);
        assert_eq!(r["updates"].as_array().unwrap().len(), 3, "{policy}");
        if policy == "instant" {
            for u in r["updates"].as_array().unwrap() {
                let (call, visible) = (u["update_ms"].as_f64().unwrap(), u["visible_ms"].as_f64().unwrap());
                assert!(visible >= call, "visible once the call returned: {u}");
            }
        }
        assert_eq!(r["policy"], policy);
    }
}

#[test]
fn ccache_with_updates_keeps_every_action_right() {
    let out = rqvs(&[
        "replay",
        "--design",
        "ccache",
        "--rules",
        &data("acl1_1k_rules.xz"),
        "--trace",
        &data("acl1_1k_trace.xz"),
        "--duration",
        "0.05",
        "--train-interval",
        "0.005",
        "--updates",
        "add:60@10ms,del:30@20ms",
        "--json",
        "-",
    ]);
    check_run(&json(&out));
}

#[test]
fn orig_updates_with_the_revalidator_thread_or_inline_keep_every_action_right() {
    let mut deleted = Vec::new();
    for mode in ["thread", "inline"] {
        let out = rqvs(&[
            "replay",
            "--revalidator",
            mode,
            "--rules",
            &data("acl1_1k_rules.xz"),
            "--trace",
            &data("acl1_1k_trace.xz"),
            "--emc-prob",
            "0.2",
            "--duration",
            "0.4",
            "--updates",
            "add:60@50ms,del:100@100ms,add:40@150ms",
            "--json",
            "-",
        ]);
        let r = json(&out);
        check_run(&r);
        assert_eq!(r["revalidator"], mode);
        let ups = r["updates"].as_array().unwrap();
        assert_eq!(ups.len(), 3, "{mode}");
        for u in ups {
            let done = u["revalidated_ms"].as_f64().unwrap_or_else(|| panic!("{mode}: revalidated within 0.25 s: {u}"));
            if mode == "inline" {
                assert_eq!(done, u["update_ms"].as_f64().unwrap(), "inline: in the call: {u}");
            } else {
                assert!(u["revalidator_thread_ms"].as_f64().is_some(), "{u}");
            }
        }
        deleted.push(ups.iter().map(|u| u["megaflows_deleted"].as_u64().unwrap()).sum::<u64>());
        assert_eq!(deleted.last().copied(), r["counters"]["deleted_revalidated"].as_u64(), "{mode}");
    }
    assert!(deleted.iter().all(|&d| d > 0), "both modes delete megaflows: {deleted:?}");
}

#[test]
fn bad_designs_are_one_line_errors() {
    let out = rqvs(&[
        "compare",
        "--designs",
        "orig,bogus",
        "--rules",
        &data("acl1_1k_rules.xz"),
        "--trace",
        &data("acl1_1k_trace.xz"),
    ]);
    assert_eq!(out.status.code(), Some(2), "an unknown design is a usage error");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("invalid value 'bogus'") && err.contains("orig, ccache, cflows"), "{err}");
    let out = rqvs(&[
        "replay",
        "--design",
        "bogus",
        "--rules",
        &data("acl1_1k_rules.xz"),
        "--trace",
        &data("acl1_1k_trace.xz"),
    ]);
    assert_eq!(out.status.code(), Some(2), "clap refuses an unknown --design");
    let out = rqvs(&[
        "replay",
        "--retrain-threshold",
        "1.5",
        "--rules",
        &data("acl1_1k_rules.xz"),
        "--trace",
        &data("acl1_1k_trace.xz"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--retrain-threshold"));
}

#[test]
fn constant_rate_counts_ring_drops_and_the_search_finds_a_rate() {
    let run = |rate: &str| {
        json(&rqvs(&[
            "replay",
            "--rules",
            &data("acl1_1k_rules.xz"),
            "--trace",
            &data("acl1_1k_trace.xz"),
            "--passes",
            "3",
            "--rate",
            rate,
            "--json",
            "-",
        ]))
    };
    // Far below what the PMD takes: nothing dropped, every offered packet processed.
    let slow = run("10000");
    check_run(&slow);
    assert_eq!(slow["rx_dropped"], 0);
    assert_eq!(slow["packets"], slow["rx_offered"]);
    // Far above: the ring overflows; processed + dropped = offered.
    let fast = run("1000000000");
    check_run(&fast);
    let (offered, dropped, got) =
        (fast["rx_offered"].as_u64().unwrap(), fast["rx_dropped"].as_u64().unwrap(), fast["packets"].as_u64().unwrap());
    assert!(dropped > offered / 2, "{dropped} of {offered}");
    assert_eq!(got + dropped, offered);
    assert!(fast["drop_rate_after_warmup"].as_f64().unwrap() > 0.5);

    let out = rqvs(&[
        "replay",
        "--design",
        "cflows",
        "--rules",
        &data("acl1_1k_rules.xz"),
        "--trace",
        &data("acl1_1k_trace.xz"),
        "--rate-search",
        "--json",
        "-",
    ]);
    let r = json(&out);
    let best = r["max_rate_below_1pct_drops"].as_f64().unwrap();
    assert!(best > 0.0 && best <= 1.5e6 * r["unconstrained_mpps"].as_f64().unwrap());
    assert!(r["drop_rate_after_warmup"].as_f64().unwrap() < 0.01);
}
