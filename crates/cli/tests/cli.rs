//! The `rqvs` binary as a new user meets it: the default run, JSON output, exit codes, and
//! one-line errors naming file and line for malformed inputs.

mod common;
use common::{rqvs, TempDir};

use std::path::PathBuf;

/// The directory of test `test` (`rqvs-cli-PID-TEST` in the temporary directory): removed when
/// the test ends, also when it fails.
fn test_dir(test: &str) -> TempDir {
    TempDir::new(&format!("cli-{test}"))
}

/// Writes `contents` to file `name` in `dir`.
fn tmp(dir: &TempDir, name: &str, contents: &[u8]) -> PathBuf {
    let p = dir.0.join(name);
    std::fs::write(&p, contents).unwrap();
    p
}

const GOOD_RULE: &str = "@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0000/0x0000\t\n";
const GOOD_TRACE: &str = "167772161\t1\t1000\t80\t6\t0\t0\n";

#[test]
fn default_run_compares_the_three_designs_on_the_embedded_workload() {
    let out = rqvs(&[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("927 rules") && s.contains("9328 packets"), "{s}");
    for design in ["orig", "ccache", "cflows"] {
        let row =
            s.lines().find(|l| l.starts_with(&format!("{design} "))).unwrap_or_else(|| panic!("{design} row: {s}"));
        assert!(row.contains(" 0/"), "{design}: no mismatch: {row}");
    }
}

#[test]
fn classify_without_arguments_verifies_the_embedded_workload() {
    let out = rqvs(&["classify"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("927 rules") && s.contains("9328 packets") && s.contains(": 0 mismatches (seed 1)"), "{s}");
}

#[test]
fn json_to_stdout_is_one_object_with_stable_fields() {
    let out = rqvs(&["classify", "--json", "-", "--verify", "500"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON object");
    for field in [
        "command",
        "rules",
        "packets",
        "distinct_flows",
        "build_ms",
        "ns_per_packet",
        "mpps",
        "verified",
        "mismatches",
        "intended_checked",
        "intended_differs",
        "seed",
        "git_rev",
        "cpu",
    ] {
        assert!(v.get(field).is_some(), "missing {field}");
    }
    assert_eq!(v["mismatches"], 0);
    assert_eq!(v["verified"], 500);
    assert_eq!(v["rules"], 927);
}

fn expect_error(args: &[&str], needle: &str) {
    let out = rqvs(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "args {args:?}: stderr {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one-line error expected, got: {err}");
    assert!(err.contains(needle), "error {err:?} should contain {needle:?}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn malformed_inputs_give_one_line_errors_with_file_and_line() {
    let dir = test_dir("malformed");
    let trace = tmp(&dir, "good.trace", GOOD_TRACE.as_bytes());
    let t = trace.to_str().unwrap();
    let cases: [(&str, String, &str); 6] = [
        ("columns.rules", format!("{GOOD_RULE}@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\n"), "columns.rules:2:"),
        (
            "badip.rules",
            "@10.0.0.300/8\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x06/0xFF\t0x0000/0x0000\n".into(),
            "badip.rules:1:2: expected source address",
        ),
        (
            "len33.rules",
            "@10.0.0.0/33\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x06/0xFF\t0x0000/0x0000\n".into(),
            "len33.rules:1:11: expected source prefix length 0..32",
        ),
        (
            "reversed.rules",
            "@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t90 : 80\t0x06/0xFF\t0x0000/0x0000\n".into(),
            "reversed.rules:1:",
        ),
        (
            "unknown.ofctl",
            "priority=5,tcp,tp_dst=80,actions=drop\npriority=4,tcp,nw_srcc=1.2.3.4,actions=drop\n".into(),
            "unknown.ofctl:2:16: unknown or unsupported field 'nw_srcc'",
        ),
        ("prereq.ofctl", "priority=5,tp_dst=80,actions=drop\n".into(), "prereq.ofctl:1:12: tp_dst needs"),
    ];
    for (name, text, needle) in cases {
        let p = tmp(&dir, name, text.as_bytes());
        expect_error(&["classify", "--rules", p.to_str().unwrap(), "--trace", t], needle);
    }
    let rules = tmp(&dir, "good.rules", GOOD_RULE.as_bytes());
    let r = rules.to_str().unwrap();
    let bad_trace = tmp(&dir, "cols.trace", format!("{GOOD_TRACE}1\t2\t3\n").as_bytes());
    expect_error(
        &["classify", "--rules", r, "--trace", bad_trace.to_str().unwrap()],
        "cols.trace:2:6: expected destination port",
    );
    expect_error(&["classify", "--rules", "/nonexistent/x.rules"], "/nonexistent/x.rules: cannot read");
}

#[test]
fn truncated_pcap_is_a_clear_error() {
    let dir = test_dir("pcap");
    let trace = tmp(&dir, "for-pcap.trace", GOOD_TRACE.repeat(3).as_bytes());
    let pcap = trace.with_extension("pcap");
    let out = rqvs(&["convert", "trace", trace.to_str().unwrap(), "--to", "pcap", "-o", pcap.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&pcap).unwrap();
    let cut = tmp(&dir, "cut.pcap", &bytes[..bytes.len() - 10]);
    let rules = tmp(&dir, "good2.rules", GOOD_RULE.as_bytes());
    expect_error(
        &["classify", "--rules", rules.to_str().unwrap(), "--trace", cut.to_str().unwrap()],
        "cut.pcap: packet 3",
    );
    // The whole capture classifies like the trace it came from.
    let out = rqvs(&["classify", "--rules", rules.to_str().unwrap(), "--trace", pcap.to_str().unwrap(), "--json", "-"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((v["packets"].as_u64(), v["matched"].as_u64(), v["mismatches"].as_u64()), (Some(3), Some(3), Some(0)));
}

#[test]
fn usage_errors_exit_2_and_every_subcommand_has_help() {
    assert_eq!(rqvs(&["classify", "--no-such-flag"]).status.code(), Some(2));
    assert_eq!(rqvs(&["convert", "rules"]).status.code(), Some(2));
    for args in [
        &["--help"][..],
        &["classify", "--help"],
        &["convert", "--help"],
        &["convert", "rules", "--help"],
        &["convert", "trace", "--help"],
    ] {
        let out = rqvs(args);
        assert!(out.status.success() && !out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn convert_rules_to_ofctl_and_back_to_classbench() {
    let dir = test_dir("convert");
    let rules = tmp(
        &dir,
        "conv.rules",
        format!("{GOOD_RULE}@0.0.0.0/0\t0.0.0.0/0\t1024 : 65535\t0 : 65535\t0x11/0xFF\t0x0000/0x0000\t\n").as_bytes(),
    );
    let out = rqvs(&["convert", "rules", rules.to_str().unwrap(), "--to", "ofctl", "--actions", "output:2"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 1 + 6, "{text}");
    assert!(text.starts_with("priority=2,tcp,nw_src=10.0.0.0/8,tp_dst=80,actions=output:2\n"), "{text}");
    let rt = rqvs(&["convert", "rules", rules.to_str().unwrap(), "--to", "classbench"]);
    assert_eq!(String::from_utf8_lossy(&rt.stdout), std::fs::read_to_string(&rules).unwrap());
}

#[test]
fn a_reader_closing_stdout_early_is_not_a_panic() {
    let data_file =
        |n: &str| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/default").join(n).display().to_string();
    use std::io::Read;
    use std::process::Stdio;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_rqvs"))
        // ~1 MB of ClassBench trace lines on stdout: far more than a pipe buffers.
        .args(["gen", "trace", "--rules", &data_file("acl1_1k_rules.xz"), "--packets", "50000", "--rng-seed", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 1];
    child.stdout.as_mut().unwrap().read_exact(&mut first).unwrap();
    drop(child.stdout.take()); // like `| head -c 1`
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.status.success(), "{:?} {err}", out.status);
}

#[test]
fn bench_updates_checks_every_recorded_batch_and_tells_where_inserts_went() {
    let run = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["bench", "updates", "--rate", "20000", "--seconds", "1", "--json", "-"];
        args.extend_from_slice(extra);
        let out = rqvs(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let s = String::from_utf8_lossy(&out.stdout);
        let start = s.find("\n{").map_or(0, |i| i + 1);
        serde_json::from_str(&s[start..]).expect("one JSON object after the text lines")
    };
    for (extra, into_buckets) in [(&[][..], true), (&["--insert-slack", "none"][..], false)] {
        let j = run(extra);
        assert_eq!(j["mismatches"], 0, "{extra:?}");
        assert!(j["checked"].as_u64().unwrap() > 1000, "{extra:?}: {}", j["checked"]);
        let inserts = j["inserts_into_buckets"].as_u64().unwrap() + j["inserts_into_remainder"].as_u64().unwrap();
        let updates = j["updates"].as_u64().unwrap();
        assert!(updates > 15_000 && inserts.abs_diff(updates / 2) <= 1, "{extra:?}: {inserts} inserts of {updates}");
        assert_eq!(j["inserts_into_buckets"].as_u64().unwrap() > 0, into_buckets, "{extra:?}");
    }
    let j = run(&["--policy", "delayed"]);
    assert_eq!(j["mismatches"], 0);
    assert!(j["sessions"].as_u64().unwrap() > 0);
    let out = rqvs(&["bench", "updates", "--rate", "1000000", "--seconds", "100"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("at most 20000000"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = rqvs(&["bench", "updates", "--insert-slack", "some"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected a number of rules or 'none'"));
}

/// The CSV of a table report holds the same rows and values as its JSON (`--csv OUT`), and bench
/// figures come with their spread over the passes (min ≤ median ≤ max).
#[test]
fn csv_tables_hold_the_json_rows_and_benchmarks_their_spread() {
    let dir = test_dir("csv");
    let (csv, json) = (dir.join("t.csv"), dir.join("t.json"));
    let (c, j) = (csv.to_str().unwrap(), json.to_str().unwrap());
    let parse = |c: &std::path::Path| -> Vec<Vec<String>> {
        std::fs::read_to_string(c).unwrap().lines().map(|l| l.split(',').map(str::to_string).collect()).collect()
    };
    let out = rqvs(&["bench", "classifiers", "--classifiers", "tss,tm", "--min-ms", "20", "--csv", c, "--json", j]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let table = parse(&csv);
    let rows = v["classifiers"].as_array().unwrap();
    assert_eq!(table.len(), 1 + rows.len(), "{table:?}");
    let col = |name: &str| table[0].iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name}"));
    assert!(table[0].iter().any(|h| h.starts_with("stats.")), "nested objects are columns: {:?}", table[0]);
    for (row, r) in table[1..].iter().zip(rows) {
        for name in ["name", "mpps", "mpps_min", "mpps_max", "ns_per_packet_min", "memory_bytes"] {
            // Numbers compared as numbers (serde_json's reader may round the last digit).
            match &r.pointer(&format!("/{}", name.replace('.', "/"))).unwrap() {
                serde_json::Value::String(s) => assert_eq!(&row[col(name)], s, "{name}"),
                x => {
                    let (got, want): (f64, f64) = (row[col(name)].parse().unwrap(), x.as_f64().unwrap());
                    assert!((got - want).abs() <= want.abs() * 1e-12, "{name}: {got} vs {want}");
                }
            }
        }
        let (lo, mid, hi) =
            (r["mpps_min"].as_f64().unwrap(), r["mpps"].as_f64().unwrap(), r["mpps_max"].as_f64().unwrap());
        assert!(lo <= mid && mid <= hi && r["timed_passes"].as_u64().unwrap() >= 1, "{r}");
    }
    let out = rqvs(&["compare", "--designs", "orig,cflows", "--verify", "100", "--csv", c]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = parse(&csv);
    assert_eq!(table.len(), 3, "{table:?}");
    assert!(table[0].iter().any(|h| h == "counters.upcall"), "{:?}", table[0]);
    expect_error(&["compare", "--json", "-", "--csv", "-"], "--json - and --csv - would both write to stdout");
}

#[test]
fn defences_limit_the_masks_of_orig_and_ccache_and_are_an_error_with_cflows() {
    for design in ["orig", "ccache"] {
        let out = rqvs(&["replay", "--design", design, "--mask-limit", "3", "--mfcguard", "--json", "-"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let c = &v["counters"];
        assert_eq!(v["mismatches"], 0, "{design}");
        assert!(c["masks"].as_u64().unwrap() <= 3, "{design}: {c}");
        assert!(c["install_mask_narrowed"].as_u64().unwrap() > 0, "{design}: {c}");
        assert_eq!(
            (v["mask_limit"].as_u64(), v["mask_eviction"].as_str(), v["mfcguard_s"].as_f64()),
            (Some(3), Some("narrow"), Some(0.5))
        );
    }
    let out = rqvs(&["replay", "--mask-limit", "3", "--mask-eviction", "refuse", "--json", "-"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["counters"]["install_mask_refused"].as_u64().unwrap() > 0 && v["counters"]["masks_evicted"] == 0);
    // Off by default: no limit, nothing evicted, and the report says so.
    let v: serde_json::Value = serde_json::from_slice(&rqvs(&["replay", "--json", "-"]).stdout).unwrap();
    assert!(v["counters"]["masks"].as_u64().unwrap() > 3 && v["counters"]["masks_evicted"] == 0);
    assert!(v["mask_limit"].is_null() && v["mfcguard_s"].is_null());
    // With CFLOWS only (no megaflows), each is a usage error.
    let defence = "a defence of ORIG's and CCACHE's megaflow cache; not used by";
    for (args, needle) in [
        (
            &["replay", "--design", "cflows", "--mask-limit", "4"][..],
            format!("--mask-limit: the mask limit, {defence} --design cflows"),
        ),
        (
            &["compare", "--designs", "cflows", "--mfcguard"][..],
            format!("--mfcguard: MFCGuard, {defence} --designs cflows"),
        ),
        (
            &["switch", "--design", "cflows", "--mfcguard"][..],
            format!("--mfcguard: MFCGuard, {defence} --design cflows"),
        ),
    ] {
        let out = rqvs(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(&needle), "{args:?}: {err:?} should contain {needle:?}");
    }
}
