//! `rqvs replay` and `rqvs compare` as commands: options reach the library, the JSON report and
//! the plot are written, bad options are errors. What a replay does (every design, updates,
//! revalidator modes, the receive ring) is tested as library code in
//! `crates/experiment/tests/replay.rs`.

use std::path::PathBuf;
use std::process::Output;

mod common;
use common::{rqvs, TempDir};

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
    let dir = TempDir::new("replay-compare");
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
fn replay_options_reach_the_run() {
    let out = rqvs(&[
        "replay",
        "--design",
        "cflows",
        "--policy",
        "delayed",
        "--duration",
        "0.05",
        "--updates",
        "add:150@5ms,del:100@10ms",
        "--json",
        "-",
    ]);
    let r = json(&out);
    check_run(&r);
    assert_eq!((r["design"].as_str(), r["policy"].as_str()), (Some("cflows"), Some("delayed")));
    assert_eq!(r["updates"].as_array().unwrap().len(), 2);
    assert!(r["rules_file"].as_str().unwrap().contains("default"), "the embedded workload without --rules");
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
    assert_eq!(out.status.code(), Some(2), "a share outside 0..1 is a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--retrain-threshold"));
}

#[test]
fn the_rate_search_reports_its_rate() {
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
    assert_eq!(r["rx_offered"], r["packets"].as_u64().unwrap() + r["rx_dropped"].as_u64().unwrap());
}

/// `compare --rate-search` searches every design and puts their highest rates side by side;
/// options a rate search cannot use are errors, not ignored.
#[test]
fn compare_searches_the_rate_of_every_design() {
    let (rules, trace) = (data("acl1_1k_rules.xz"), data("acl1_1k_trace.xz"));
    let base = ["compare", "--rules", &rules, "--trace", &trace, "--designs", "orig,cflows", "--rate-search"];
    let out = rqvs(&[&base[..], &["--passes", "3", "--json", "-"]].concat());
    let r = json(&out);
    let s = r["rate_search"].as_array().unwrap();
    assert_eq!(r["designs"], serde_json::json!(["orig", "cflows"]));
    assert_eq!(s.len(), 2);
    assert_eq!(s[0]["max_rate_speedup"], 1.0);
    for (x, design) in s.iter().zip(["orig", "cflows"]) {
        assert_eq!(x["design"], design);
        let best = x["max_rate_below_1pct_drops"].as_f64().unwrap();
        assert!(best > 0.0 && best <= 1.5e6 * x["unconstrained_mpps"].as_f64().unwrap());
        assert!(x["drop_rate_after_warmup"].as_f64().unwrap() < 0.01 && x["mismatches"] == 0);
        assert_eq!(x["rate"].as_f64(), Some(best), "the probe's run is the one at the best rate");
    }
    let ratio =
        s[1]["max_rate_below_1pct_drops"].as_f64().unwrap() / s[0]["max_rate_below_1pct_drops"].as_f64().unwrap();
    assert!((s[1]["max_rate_speedup"].as_f64().unwrap() - ratio).abs() < 1e-9);
    // The unconstrained runs are the usual compare report.
    assert_eq!(r["runs"].as_array().unwrap().len(), 2);
    for (extra, message) in [
        (&["--plot", "/tmp/never.svg"][..], "--plot: draws one run's time series; not with --rate-search"),
        (&["--rate", "1000"][..], "--rate"),
    ] {
        let out = rqvs(&[&base[..], extra].concat());
        assert_ne!(out.status.code(), Some(0));
        assert!(String::from_utf8_lossy(&out.stderr).contains(message), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let out = rqvs(&["replay", "--rate-search", "--pmds", "2"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--rate-search: runs on one PMD; --pmds is not used with it"));
}

/// `--attack FILE --attack-rate PPS`: replay and compare report the benign and the attack
/// streams apart (text and JSON); the two options go together.
#[test]
fn an_attack_mixed_into_replay_and_compare() {
    let dir = TempDir::new("attack");
    let attack = dir.join("attack.pcap").display().to_string();
    let rules = data("acl1_1k_rules.xz");
    let gen = rqvs(&[
        "gen",
        "trace",
        "--rules",
        &rules,
        "--packets",
        "3000",
        "--locality",
        "uniform",
        "--corner",
        "--format",
        "pcap",
        "-o",
        &attack,
    ]);
    assert!(gen.status.success(), "{}", String::from_utf8_lossy(&gen.stderr));
    let trace = data("acl1_1k_trace.xz");
    let common = ["--rules", &rules, "--trace", &trace, "--attack", &attack, "--attack-rate", "1e6"];
    let out = rqvs(&[&["replay", "--json", "-"][..], &common].concat());
    let text = String::from_utf8_lossy(&out.stderr);
    let r = json(&out);
    check_run(&r);
    let a = &r["attack"];
    assert_eq!(a["mismatches"], 0);
    assert!(a["verified"].as_u64().unwrap() > 100, "{a}");
    let (benign, att) = (&a["benign"], &a["attack"]);
    assert_eq!(
        benign["packets"].as_u64().unwrap() + att["packets"].as_u64().unwrap(),
        r["packets"].as_u64().unwrap(),
        "{a}"
    );
    assert!(att["upcalls"].as_u64().unwrap() > 0 && benign["subtables_per_hit"].as_f64().is_some(), "{a}");
    assert!(text.contains("attack              ") && text.contains("  benign"), "{text}");
    // The time series separates the benign packets too: each 100 ms sample's benign part is
    // below its total, by about the attack's rate; without an attack there is none. (A sample is
    // taken after the first batch past each 100 ms of PMD time, and the clock is wall time: a
    // PMD preempted for 200 ms in one batch on a loaded machine skips a sample, as one CI run
    // did with 0.35 s; 1 s leaves room for that.)
    let out = rqvs(&[&["replay", "--duration", "1", "--verify", "1000", "--json", "-"][..], &common].concat());
    let r = json(&out);
    let series = r["series"].as_array().unwrap();
    assert!(series.len() >= 3, "{series:?}");
    for s in series {
        let (all, benign) = (s["mpps"].as_f64().unwrap(), s["benign_mpps"].as_f64().unwrap());
        assert!(benign > 0.0 && benign < all && all - benign < 1.2, "{s}");
    }
    let out = rqvs(&["replay", "--rules", &rules, "--trace", &trace, "--duration", "0.15", "--json", "-"]);
    let r = json(&out);
    assert!(!r["series"].as_array().unwrap().is_empty() && r["series"][0]["benign_mpps"].is_null(), "{}", r["series"]);

    let out = rqvs(&[&["compare", "--designs", "orig,cflows"][..], &common].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("benign Mpps") && text.contains("attack mism."), "{text}");
    let rows: Vec<&str> =
        text.lines().skip_while(|l| !l.contains("benign Mpps")).skip(1).take_while(|l| !l.is_empty()).collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(rows.iter().all(|l| l.split_whitespace().last().is_some_and(|m| m.starts_with("0/"))), "{text}");

    let out = rqvs(&["replay", "--rules", &rules, "--trace", &trace, "--attack", &attack]);
    assert_eq!(out.status.code(), Some(2), "--attack needs --attack-rate");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--attack-rate"));
    let out = rqvs(&["replay", "--attack", &attack, "--attack-rate", "0"]);
    assert_eq!(out.status.code(), Some(2), "a rate of 0 is a usage error");

    // --attack-policing: the attack's packets over the bucket are dropped before the classifier
    // and reported (text and JSON); offered = classified + ring drops + policed + waiting.
    let policed = [&common[..], &["--attack-policing", "10/0.2", "--json", "-"]].concat();
    let out = rqvs(&[&["replay"][..], &policed].concat());
    let text = String::from_utf8_lossy(&out.stderr);
    let r = json(&out);
    check_run(&r);
    let a = &r["attack"];
    let n = |k: &str| a[k].as_u64().unwrap_or_else(|| panic!("{k}: {a}"));
    assert_eq!(a["policing"]["kpps"], 10.0);
    assert_eq!(a["policing"]["burst_kpkts"], 0.2);
    assert!(n("policed") > 0, "{a}");
    assert_eq!(
        a["attack"]["packets"].as_u64().unwrap() + n("ring_dropped") + n("policed") + n("waiting"),
        n("offered")
    );
    assert!(text.contains("by its policer (10 kpps, burst 0.2 kpkts)"), "{text}");
    let out = rqvs(&["replay", "--rules", &rules, "--trace", &trace, "--attack-policing", "10"]);
    assert_eq!(out.status.code(), Some(2), "--attack-policing needs --attack");
    let out = rqvs(&[&["replay"][..], &common, &["--attack-policing", "10/0"]].concat());
    assert_eq!(out.status.code(), Some(2), "a burst of 0 is a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected KPPS[/BURST]"));
}

/// `--auto` reaches the controller: by default auto starts in CFLOWS, with `initial=orig` in
/// ORIG (the time per design says so), and a threshold set low moves it for that reason; the
/// report and the JSON say which settings were in force.
#[test]
fn auto_settings_change_what_auto_does() {
    let run = |auto: &[&str]| {
        let mut args = vec!["replay", "--design", "auto", "--passes", "5", "--verify", "1000", "--json", "-"];
        for a in auto {
            args.extend(["--auto", a]);
        }
        let out = rqvs(&args);
        // The summary goes to stderr when the JSON takes stdout.
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        (json(&out), text)
    };
    let (r, text) = run(&[]);
    check_run(&r);
    assert!(r["auto"]["time_cflows_s"].as_f64().unwrap() > 0.0, "{}", r["auto"]);
    assert_eq!(r["auto"]["time_orig_s"], 0.0, "{}", r["auto"]);
    assert_eq!(r["auto"]["settings"], serde_json::json!({}));
    assert!(text.contains("\n  settings          defaults\n"), "{text}");
    // The default dwell (1 s) keeps it in ORIG for the whole run.
    let (r, text) = run(&["initial=orig", "window-ms=50"]);
    check_run(&r);
    assert!(r["auto"]["time_orig_s"].as_f64().unwrap() > 0.0, "{}", r["auto"]);
    assert_eq!(r["auto"]["time_cflows_s"], 0.0, "{}", r["auto"]);
    assert_eq!(r["auto"]["settings"], serde_json::json!({"initial": "orig", "window-ms": "50"}));
    assert!(text.contains("\n  settings          initial=orig,window-ms=50\n"), "{text}");
    // Short windows and no dwell: the first window decides. With upcalls never a reason, the
    // masks threshold is the one that moves it when set low (and CCACHE no candidate).
    let quick = "initial=orig,min-dwell-ms=0,window-ms=1,min-window-packets=64,to-cflows-upcall-share=1,ccache=false";
    let reasons = |r: &serde_json::Value| -> Vec<String> {
        r["auto"]["switches"].as_array().unwrap().iter().map(|s| s["reason"].as_str().unwrap().to_string()).collect()
    };
    let (r, _) = run(&[quick, "to-cflows-masks=1,to-cflows-subtables=1000"]);
    check_run(&r);
    assert!(reasons(&r).first().is_some_and(|w| w.ends_with("masks >= 1")), "{:?}", reasons(&r));
    let (r, _) = run(&[quick, "to-cflows-subtables=1000"]);
    check_run(&r);
    assert_eq!(r["auto"]["design_switches"], 0, "{:?}", reasons(&r));
}

/// A bad `--auto` is a usage error naming the key and what it expects.
#[test]
fn bad_auto_settings_are_usage_errors() {
    for (args, err) in [
        (&["--auto", "window=5"][..], "unknown key 'window' (known: initial, cflows-rules, window-ms,"),
        (&["--auto", "window-ms"], "expected KEY=VALUE, found 'window-ms'"),
        (&["--auto", "to-cflows-upcall-share=2"], "to-cflows-upcall-share: expected a share 0 ≤ x ≤ 1, found '2'"),
        (&["--auto", "initial=fast"], "initial: expected orig, ccache, cflows or auto, found 'fast'"),
        (&["--auto", "ccache=1"], "ccache: expected true or false, found '1'"),
        (&["--auto", "window-ms=5", "--auto", "window-ms=6"], "rqvs: error: --auto: window-ms: given twice"),
        (&["--auto", "initial=ccache,ccache=false"], "rqvs: error: --auto: initial: ccache is not a candidate"),
        (
            &["--auto", "to-orig-subtables=9"],
            "rqvs: error: --auto: to-orig-subtables: expected below to-ccache-subtables",
        ),
        (&["--classifier", "tm", "--auto", "cflows-tm-coverage=0.5"], "not used with --classifier tm"),
    ] {
        for cmd in [&["replay", "--design", "auto"][..], &["compare", "--designs", "orig,auto"]] {
            let out = rqvs(&[cmd, args].concat());
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(stderr.contains(err), "{args:?}: {stderr}");
        }
    }
}
