//! Flow prediction for coflows: the predictor never changes a packet's action (every packet of
//! generated workloads against the reference), the oracle avoids at least as many upcalls as the
//! online predictor and it at least as many as no prediction, `rqvs coflows` runs a small
//! experiment end to end, and `rqvs gen coflows` writes files the rest of rqvs reads.
//!
//! `rqvs replay --predict off|online|oracle`: on a generated coflow trace, online prediction
//! installs megaflows that are used and removes upcalls, the oracle (the ground truth `rqvs gen
//! coflows --truth-out` writes) removes more and wastes nothing, every packet still gets the
//! reference's action; online prediction runs on a ClassBench trace too; a missing or wrong
//! ground truth and other designs are one-line errors.

use std::process::Output;

mod common;
use common::{rqvs, TempDir};

use rqvs_classify::Reference;
use rqvs_datapath::predict::{PredictConfig, Predictor};
use rqvs_datapath::{Clock, DatapathConfig, Orig, OrigConfig};
use rqvs_ofproto::DpAction;
use rqvs_workload::coflow::{self, Params, SizeDist, Workload};

fn text(o: &Output) -> String {
    format!("stdout: {}\nstderr: {}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", text(out));
    let s = String::from_utf8_lossy(&out.stdout);
    let start = s.find("\n{").map_or(0, |i| i + 1);
    serde_json::from_str(&s[start..]).expect("JSON report at the end of stdout")
}

fn tmp(dir: &TempDir, name: &str) -> std::path::PathBuf {
    dir.join(name)
}

/// Every received packet has one outcome (predictions are not packets).
fn assert_outcomes_sum(c: &serde_json::Value) {
    let sum: u64 = ["emc_hit", "cd_hit", "megaflow_hit", "model_hit", "remainder_hit", "upcall", "lost"]
        .iter()
        .map(|k| c[*k].as_u64().unwrap())
        .sum();
    assert_eq!(sum, c["received"].as_u64().unwrap(), "outcomes sum to packets received: {c}");
}

fn workload(dist: SizeDist, coflows: usize, x: f64) -> Workload {
    coflow::generate(&Params::new(dist, coflows, x, 7)).unwrap()
}

/// Every packet in trace order through a datapath (batches of 32, handler at batch boundaries);
/// returns the actions and the upcall count.
fn replay(w: &Workload, predictor: Option<Predictor>) -> (Vec<DpAction>, u64) {
    let cfg =
        DatapathConfig { clock: Clock::Virtual { packet_ns: 1_000, upcall_ns: 1_000 }, ..DatapathConfig::default() };
    let mut dp = Orig::new(&w.rules, cfg, OrigConfig::default()).unwrap();
    dp.set_predictor(predictor);
    let actions = dp.run_keys(&w.keys());
    let c = dp.counters();
    assert!(c.outcome_sum_ok(), "{c:?}");
    assert_eq!(c.received, w.packets.len() as u64, "predictions are not packets");
    (actions, c.upcall)
}

#[test]
fn predictions_never_change_an_action() {
    for (dist, n, x) in [(SizeDist::Rpc, 3_000, 0.75), (SizeDist::Hadoop, 150, 0.5)] {
        let w = workload(dist, n, x);
        let reference = Reference::build(&w.rules).unwrap();
        let want: Vec<DpAction> =
            w.keys().iter().map(|k| DpAction::of_rule(reference.lookup_rule(&k.wire()))).collect();
        // An eager online predictor (no thresholds: many wrong predictions) and the oracle.
        let eager = PredictConfig { min_confidence: 0.0, min_support: 1, per_upcall: 16.0, ..PredictConfig::default() };
        let oracle =
            Predictor::oracle(PredictConfig { per_upcall: f64::INFINITY, ..PredictConfig::default() }, w.oracle());
        for (name, p) in [("off", None), ("online", Some(Predictor::online(eager))), ("oracle", Some(oracle))] {
            let (got, _) = replay(&w, p);
            let wrong = got.iter().zip(&want).filter(|(a, b)| a != b).count();
            assert_eq!(wrong, 0, "{dist:?} {name}: {wrong} of {} packets", got.len());
        }
    }
}

#[test]
fn oracle_avoids_more_upcalls_than_online_and_online_more_than_off() {
    let w = workload(SizeDist::Hadoop, 300, 1.0);
    let (_, off) = replay(&w, None);
    let (_, online) = replay(&w, Some(Predictor::online(PredictConfig::default())));
    let oracle = Predictor::oracle(PredictConfig { per_upcall: f64::INFINITY, ..PredictConfig::default() }, w.oracle());
    let (_, oracle) = replay(&w, Some(oracle));
    assert!(off > online && online > oracle, "upcalls: off {off}, online {online}, oracle {oracle}");
    // Every coupled associated flow can be predicted: the oracle leaves little but base flows.
    assert!(oracle <= off / 3, "upcalls: off {off}, oracle {oracle}");
    // At coflowiness 0 there is nothing to predict.
    let w0 = workload(SizeDist::Hadoop, 300, 0.0);
    let (_, off0) = replay(&w0, None);
    let (_, online0) = replay(&w0, Some(Predictor::online(PredictConfig::default())));
    assert_eq!(off0, online0);
}

#[test]
fn coflows_experiment_end_to_end() {
    let dir = TempDir::new("coflows-coflows-experiment-end-to-end");
    let plot = tmp(&dir, "coflows.svg");
    let out = rqvs(&[
        "coflows",
        "--dist",
        "hadoop",
        "--coflows",
        "200",
        "--coflowiness",
        "0,0.25,1",
        "--cost",
        "virtual:200,1500",
        "--plot",
        plot.to_str().unwrap(),
        "--json",
        "-",
    ]);
    let j = json(&out);
    assert_eq!(j["command"], "coflows");
    assert_eq!(j["mismatches"], 0);
    let runs = j["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 12, "3 coflowiness values × off, online, oracle, preload");
    let get = |x: f64, m: &str| {
        runs.iter()
            .find(|r| r["coflowiness"].as_f64() == Some(x) && r["predict"] == m)
            .unwrap_or_else(|| panic!("{x} {m}"))
    };
    for r in runs {
        assert_eq!(r["mismatches"], 0);
        assert!(r["verified"].as_u64().unwrap() > 5_000, "{}", r["verified"]);
        assert_outcomes_sum(&r["counters"]);
        let share = r["handler_cpu_share"].as_f64().unwrap();
        assert!(share > 0.0 && share < 1.0, "{share}");
        assert_eq!(r["upcalls_per_s"]["values"].as_array().unwrap().len(), 50);
    }
    let up = |x, m| get(x, m)["upcalls"].as_u64().unwrap();
    // Nothing to predict at coflowiness 0: every setting sees the same trace the same way.
    for m in ["online", "oracle", "preload"] {
        assert_eq!(up(0.0, m), up(0.0, "off"), "{m}");
    }
    assert!(up(1.0, "off") > up(1.0, "online") && up(1.0, "online") > up(1.0, "oracle"));
    assert!(up(1.0, "preload") <= up(1.0, "oracle"));
    let lat = |x, m: &str, k: &str| get(x, m)["first_assoc_latency"][k].as_f64().unwrap();
    assert!(lat(1.0, "preload", "mean_us") < lat(1.0, "off", "mean_us") / 3.0);
    // The oracle's and the preload's predictions are all used; the handler does not pay for the
    // preload.
    assert_eq!(get(1.0, "oracle")["wasted"], 0);
    assert!(get(1.0, "preload")["preloaded"].as_u64().unwrap() > 500);
    let busy = |m: &str| get(1.0, m)["handler_busy_s"].as_f64().unwrap();
    assert!(busy("preload") < busy("off"));
    let wr = get(1.0, "online")["wasted_ratio"].as_f64().unwrap();
    assert!((0.0..0.5).contains(&wr), "wasted ratio {wr}");
    assert!(j["study_check"]["preload"]["vs_off_same_trace"]["handler_cpu_change_pct"].is_number());
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("coflowiness") && svg.contains("online"));
    // The human table names the mismatches.
    let o = rqvs(&["coflows", "--dist", "rpc", "--coflows", "100", "--coflowiness", "0.5", "--predict", "off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("0 mismatches"), "{}", text(&o));
}

#[test]
fn gen_coflows_writes_a_trace_its_rules_and_the_truth() {
    let dir = TempDir::new("coflows-gen-coflows-writes-a-trace-its-rules-and");
    let (pcap, rules, truth) = gen(&dir, "rpc", "0.5", "500", "3", "c");
    let w = coflow::generate(&Params::new(SizeDist::Rpc, 500, 0.5, 3)).unwrap();
    let t = std::fs::read_to_string(&truth).unwrap();
    assert_eq!(t.lines().count(), w.flows.len() + 1);
    assert_eq!(t.lines().filter(|l| l.contains("\tassociated\tyes\t")).count(), w.summary().coupled);
    // The slow path replays the capture against the rules (every megaflow hit checked).
    let o = rqvs(&["trace", "--rules", &rules, "--trace", &pcap, "--json", "-"]);
    let j = json(&o);
    assert_eq!(j["mismatches"], 0);
    assert_eq!(j["packets"].as_u64().unwrap(), w.packets.len() as u64);
    // Same seed, same bytes.
    let (again, _, _) = gen(&dir, "rpc", "0.5", "500", "3", "c2");
    assert_eq!(std::fs::read(&pcap).unwrap(), std::fs::read(&again).unwrap());
}

#[test]
fn bad_options_are_one_line_errors() {
    // Exit code 1: checked by the command; 2: a number outside the range its --help documents.
    for (args, code, what) in [
        (vec!["coflows", "--dist", "rpc", "--coflowiness", "0,1.5"], 1, "--coflowiness: item 2 '1.5'"),
        (vec!["coflows", "--dist", "rpc", "--cost", "virtual:x"], 1, "--cost"),
        (vec!["coflows", "--dist", "rpc", "--coflows", "0"], 2, "--coflows"),
        (vec!["coflows", "--dist", "rpc", "--min-confidence", "2"], 2, "--min-confidence"),
        (vec!["coflows", "--dist", "rpc", "--predict-budget", "0"], 2, "--predict-budget"),
        (vec!["gen", "coflows", "--dist", "rpc", "--coflowiness", "1.5", "--out", "/tmp/x.pcap"], 2, "--coflowiness"),
        (
            vec!["gen", "coflows", "--dist", "rpc", "--coflowiness", "0.5", "--out", "/nonexistent/dir/x.pcap"],
            1,
            "cannot write",
        ),
    ] {
        let o = rqvs(&args);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        let first = err.lines().next().unwrap_or_default();
        assert!(first.contains(what), "{args:?}: {err}");
        if code == 1 {
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        } else {
            assert!(first.contains("is out of the range"), "{args:?}: {err}");
        }
        assert!(!err.contains("panicked"), "{err}");
    }
    let o = rqvs(&["gen", "coflows", "--dist", "rpc", "--coflowiness", "0.5"]);
    assert_eq!(o.status.code(), Some(2), "missing --out is a usage error");
    // An unknown distribution is a usage error too.
    let o = rqvs(&["coflows", "--dist", "web"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("'hadoop' or 'rpc'"));
    // An unknown prediction setting is a usage error (clap names the value and the choices).
    let o = rqvs(&["coflows", "--dist", "rpc", "--predict", "off,magic"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("invalid value 'magic'") && err.contains("preload"), "{err}");
}

fn data(name: &str) -> String {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/default").join(name).display().to_string()
}

/// `rqvs gen coflows` into files named by `tag`: (trace, rules, ground truth).
fn gen(dir: &TempDir, dist: &str, x: &str, coflows: &str, seed: &str, tag: &str) -> (String, String, String) {
    let (pcap, rules, truth) =
        (tmp(dir, &format!("{tag}.pcap")), tmp(dir, &format!("{tag}.ofctl")), tmp(dir, &format!("{tag}.tsv")));
    let o = rqvs(&[
        "gen",
        "coflows",
        "--dist",
        dist,
        "--coflowiness",
        x,
        "--coflows",
        coflows,
        "--rng-seed",
        seed,
        "--out",
        pcap.to_str().unwrap(),
        "--rules-out",
        rules.to_str().unwrap(),
        "--truth-out",
        truth.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let s = |p: std::path::PathBuf| p.to_str().unwrap().to_string();
    (s(pcap), s(rules), s(truth))
}

fn replay_cli(rules: &str, trace: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["replay", "--rules", rules, "--trace", trace, "--verify", "1000000", "--json", "-"];
    args.extend_from_slice(extra);
    let j = json(&rqvs(&args));
    assert_eq!(j["mismatches"], 0, "{extra:?}");
    assert_eq!(j["verified"], j["packets"], "{extra:?}: every packet checked");
    assert_outcomes_sum(&j["counters"]);
    j
}

#[test]
fn prediction_on_a_coflow_trace_removes_upcalls_without_changing_actions() {
    let dir = TempDir::new("coflows-prediction-on-a-coflow-trace-removes-upc");
    let (trace, rules, truth) = gen(&dir, "hadoop", "1", "150", "5", "h1");
    let off = replay_cli(&rules, &trace, &[]);
    let online = replay_cli(&rules, &trace, &["--predict", "online"]);
    let oracle = replay_cli(&rules, &trace, &["--predict", "oracle", "--coflow-truth", &truth]);
    let upcalls = |j: &serde_json::Value| j["counters"]["upcall"].as_u64().unwrap();
    let get = |j: &serde_json::Value, k: &str| j["prediction"][k].as_u64().unwrap_or_else(|| panic!("{k}: {j}"));

    assert_eq!(off["predict"], "off");
    assert!(off["prediction"].is_null());
    assert_eq!(off["counters"]["preinstalled"], 0);

    assert_eq!(online["predict"], "online");
    assert!(get(&online, "predicted") > 50 && get(&online, "used") > 50, "{}", online["prediction"]);
    assert_eq!(get(&online, "predicted"), online["counters"]["preinstalled"].as_u64().unwrap());
    assert!(upcalls(&online) < upcalls(&off), "upcalls: off {}, online {}", upcalls(&off), upcalls(&online));
    // The ratio is what the counters say: not hit by the end / installed.
    let ratio = online["prediction"]["wasted_ratio"].as_f64().unwrap();
    let unused = get(&online, "wasted") + get(&online, "outstanding");
    assert!((ratio - unused as f64 / get(&online, "predicted") as f64).abs() < 1e-12);
    assert_eq!(get(&online, "used") + unused, get(&online, "predicted"));
    assert!(online["prediction"]["share_predict"].as_f64().unwrap() > 0.0);

    // The oracle predicts exactly the coupled flows: all used, fewer upcalls than online.
    assert_eq!(oracle["predict"], "oracle");
    assert!(get(&oracle, "predicted") > 300, "{}", oracle["prediction"]);
    assert_eq!(get(&oracle, "used"), get(&oracle, "predicted"), "{}", oracle["prediction"]);
    assert!(upcalls(&oracle) < upcalls(&online), "upcalls: online {}, oracle {}", upcalls(&online), upcalls(&oracle));

    // The text report has the prediction line.
    let o = rqvs(&["replay", "--rules", &rules, "--trace", &trace, "--predict", "online"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("prediction          online: ") && out.contains("wasted ratio"), "{out}");
    assert!(out.contains("mismatches 0 of"), "{out}");
}

#[test]
fn online_prediction_runs_on_a_classbench_trace() {
    let j = replay_cli(&data("acl1_1k_rules.xz"), &data("acl1_1k_trace.xz"), &["--predict", "online"]);
    assert_eq!(j["predict"], "online");
    let p = &j["prediction"];
    assert!(p["observed"].as_u64().unwrap() > 0, "{p}");
    assert_eq!(p["observed"], j["counters"]["upcall"], "the predictor sees every upcall");
}

#[test]
fn prediction_errors_name_what_is_missing() {
    let dir = TempDir::new("coflows-prediction-errors-name-what-is-missing");
    let (trace, rules, truth) = gen(&dir, "hadoop", "0.5", "150", "6", "h6");
    let (_, _, other_truth) = gen(&dir, "hadoop", "0.5", "150", "8", "h8");
    let bad_truth = tmp(&dir, "bad.tsv");
    std::fs::write(&bad_truth, "0\t0\tbase\t-\t10.1.0.1\t172.30.0.1\t17\t40000\t2100\t100\t1\t0\n1\t0\tbass\n")
        .unwrap();
    let bad = bad_truth.to_str().unwrap();
    for (extra, code, what) in [
        (vec!["--predict", "oracle"], 1, "--predict oracle needs the coflow ground truth: --coflow-truth FILE"),
        (
            vec!["--coflow-truth", truth.as_str()],
            2,
            "--coflow-truth: the oracle's ground truth; used only with --predict oracle",
        ),
        (vec!["--predict", "online", "--design", "cflows"], 1, "expected --design orig"),
        (vec!["--predict", "oracle", "--coflow-truth", other_truth.as_str()], 1, "is not in the trace"),
        (vec!["--predict", "oracle", "--coflow-truth", bad], 1, "bad.tsv:2:1: expected 12 tab-separated columns"),
        (vec!["--predict", "oracle", "--coflow-truth", "/nonexistent/t.tsv"], 1, "/nonexistent/t.tsv"),
        // Outside the documented ranges: usage errors (exit code 2).
        (vec!["--predict", "online", "--min-confidence", "1.5"], 2, "--min-confidence"),
        (vec!["--predict", "online", "--window-ms", "0"], 2, "--window-ms"),
    ] {
        let mut args = vec!["replay", "--rules", rules.as_str(), "--trace", trace.as_str()];
        args.extend_from_slice(&extra);
        let o = rqvs(&args);
        assert_eq!(o.status.code(), Some(code), "{extra:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        let first = err.lines().next().unwrap_or_default();
        assert!(first.contains(what), "{extra:?}: {err}");
        assert!(code == 2 || err.lines().count() == 1, "{extra:?}: {err}");
    }
    let o = rqvs(&["replay", "--rules", &rules, "--trace", &trace, "--predict", "magic"]);
    assert_eq!(o.status.code(), Some(2), "an unknown mode is a usage error: {}", text(&o));
}
