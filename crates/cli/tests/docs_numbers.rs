//! Numbers in the README that come from deterministic reports are checked against a fresh run
//! of the command that made them, so a figure cannot drift from what rqvs computes (issue 19:
//! "numbers in docs come from JSON, not from hands"). Each table names its command; a test
//! here reruns it and compares every cell. Timed figures cannot be rerun that way (they depend on
//! the machine): the timed tables of docs/tse.md and docs/designs.md are checked cell by cell
//! against the JSON their commands kept beside them in docs/, with the CPU and commit.

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

/// A file of the repository, from this crate's directory.
fn repo_file(path: &str) -> String {
    let p = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// The rows of the first table after the line `section` (whole line) whose header starts with
/// `header`.
fn table_after(doc: &str, section: &str, header: &str) -> Vec<Vec<String>> {
    let from = doc.lines().position(|l| l == section).unwrap_or_else(|| panic!("no line '{section}'"));
    let rest: Vec<&str> = doc.lines().skip(from).collect();
    table(&rest.join("\n"), header)
}

/// The timed tables of docs/tse.md and docs/designs.md are the JSON their commands kept beside
/// them (`scripts/tse_curve.py`, `scripts/cflows_ablation.py --json`, `scripts/compare_all.py
/// --json`, `scripts/auto_cold_orig.py`): a cell edited by hand, or a table left behind by a new measurement, fails here.
#[test]
fn timed_tables_are_their_kept_json() {
    let json = |p: &str| -> serde_json::Value { serde_json::from_str(&repo_file(p)).unwrap() };
    let f = |v: &serde_json::Value, d: usize| format!("{:.*}", d, v.as_f64().unwrap_or_else(|| panic!("{v}")));

    // The TSE curve: benign Mpps per variant and attack rate.
    let tse = repo_file("docs/tse.md");
    let curve = json("docs/tse-curve.json");
    let rates = ["0", "1000", "10000", "100000", "1e+06"];
    for size in ["1k", "10k", "100k"] {
        let rows = table_after(&tse, &format!("**{size} rules**"), "| variant | clean");
        assert_eq!(rows.len(), 5, "docs/tse.md {size}: {rows:?}");
        for row in rows {
            let cells = &curve[size][&row[0]];
            for (i, rate) in rates.iter().enumerate() {
                let mpps = f(&cells[*rate]["benign_mpps"], 3);
                assert!(
                    row[1 + i].starts_with(&mpps),
                    "docs/tse.md {size} {} at {rate}: {} against {mpps}",
                    row[0],
                    row[1 + i]
                );
            }
        }
    }
    // With ingress policing: benign Mpps at 1e6 and the share of the variant's clean rate.
    let policing = json("docs/tse-policing.json");
    let rows = table(&tse, "| rules | orig | orig+policing |");
    assert_eq!(rows.len(), 3, "docs/tse.md policing: {rows:?}");
    let variants = ["orig", "orig+policing", "cflows", "cflows+policing", "auto", "auto+policing"];
    for row in rows {
        let size = row[0].to_lowercase();
        for (i, v) in variants.iter().enumerate() {
            let cell = &policing[&size][v];
            let (clean, attacked) =
                (cell["0"]["benign_mpps"].as_f64().unwrap(), cell["1e+06"]["benign_mpps"].as_f64().unwrap());
            let want = format!("{attacked:.3} ({:.0}%)", 100.0 * attacked / clean);
            assert_eq!(row[1 + i], want, "docs/tse.md policing {size} {v}");
            assert_eq!(cell["1e+06"]["mismatches"], 0, "{size} {v}");
        }
    }
    // The paired compare: each design's median and auto against the best fixed design.
    let cmp = json("docs/tse-compare.json");
    let rows = table(&tse, "| rules | attack pps | orig |");
    assert_eq!(rows.len(), 15, "docs/tse.md compare: {rows:?}");
    for row in rows {
        let rate = match row[1].as_str() {
            "clean" => "0",
            "1e+03" => "1000",
            "1e+04" => "10000",
            "1e+05" => "100000",
            other => other,
        };
        let cell = &cmp[format!("{} {rate}", row[0])];
        for (i, d) in ["orig", "ccache", "cflows", "auto"].iter().enumerate() {
            assert_eq!(row[2 + i], f(&cell["median_mpps"][d], 3), "docs/tse.md compare {} {rate} {d}", row[0]);
        }
        assert_eq!(row[6], f(&cell["auto_over_best"], 2), "docs/tse.md compare {} {rate} auto/best", row[0]);
    }

    // Auto against CFLOWS at 1e6 attack pps, 8 pairs per size.
    let pairs = json("docs/tse-auto-1e6.json");
    let rows = table(&tse, "| rules | auto/CFLOWS benign Mpps");
    assert_eq!(rows.len(), 2, "docs/tse.md auto at 1e6: {rows:?}");
    for row in rows {
        let cell = &pairs["sizes"][row[0].to_lowercase()];
        let runs = cell["runs"].as_array().unwrap();
        assert_eq!(row[1], f(&cell["auto_over_cflows_median"], 2), "docs/tse.md auto at 1e6 {}", row[0]);
        let range = format!("{}–{}", f(&cell["auto_over_cflows_min"], 2), f(&cell["auto_over_cflows_max"], 2));
        assert_eq!(row[2], range, "docs/tse.md auto at 1e6 {}", row[0]);
        assert_eq!(row[3], format!("{} of {}", cell["within_10pct"], runs.len()), "docs/tse.md auto at 1e6 {}", row[0]);
        let ns = format!("{} / {}", f(&cell["attack_ns_auto_median"], 0), f(&cell["attack_ns_cflows_median"], 0));
        assert_eq!(row[4], ns, "docs/tse.md auto at 1e6 {}", row[0]);
        assert!(runs.iter().all(|r| r["mismatches"] == 0 && r["verified"].as_u64() > Some(0)), "{}", row[0]);
    }

    // docs/designs.md: the ablation and auto per seed and size.
    let designs = repo_file("docs/designs.md");
    let ablation = json("docs/cflows-ablation.json");
    let cells = ablation["cells"].as_array().unwrap();
    let rows = table(&designs, "| seed | size | rules | NuevoMatchUP coverage |");
    assert_eq!(rows.len(), cells.len(), "docs/designs.md ablation");
    for (row, c) in rows.iter().zip(cells) {
        assert_eq!((row[0].as_str(), row[1].as_str()), (c["seed"].as_str().unwrap(), c["size"].as_str().unwrap()));
        assert_eq!(row[4], f(&c["mpps"]["nmu"], 2), "ablation {row:?}");
        assert_eq!(row[5], f(&c["mpps"]["tm"], 2), "ablation {row:?}");
        assert_eq!(row[6], format!("{}x", f(&c["tm_over_nmu"], 2)), "ablation {row:?}");
    }
    let auto = json("docs/auto-choice.json");
    let cells = auto["cells"].as_array().unwrap();
    let rows = table(&designs, "| seed | size | orig | ccache | cflows | auto | best fixed |");
    assert_eq!(rows.len(), cells.len(), "docs/designs.md auto");
    for (row, c) in rows.iter().zip(cells) {
        assert_eq!((row[0].as_str(), row[1].as_str()), (c["seed"].as_str().unwrap(), c["size"].as_str().unwrap()));
        for (i, d) in ["orig", "ccache", "cflows", "auto"].iter().enumerate() {
            assert_eq!(row[2 + i], f(&c["mpps"][d], 2), "auto {row:?} {d}");
        }
    }

    // docs/nuevomatch.md: NuevoMatchUP against TupleMerge on the Intel Xeon, two runs per set,
    // beside the AMD EPYC's figure.
    let nmu = repo_file("docs/nuevomatch.md");
    let intel = json("docs/nmu-tm-intel.json");
    let rows = table(&nmu, "| seed | size | nmu/tm, run 1 |");
    assert_eq!(rows.len(), 26, "docs/nuevomatch.md Intel: {rows:?}");
    let x = |v: &serde_json::Value| format!("{}x", f(v, 2));
    for row in &rows[..24] {
        let size = &intel["sizes"][&row[1]];
        let cell = size["rows"].as_array().unwrap().iter().find(|r| r["seed"] == row[0].as_str()).expect("a kept seed");
        let runs = cell["runs"].as_array().unwrap();
        assert_eq!(
            row[2..5],
            [x(&runs[0]["nmu_over_tm"]), x(&runs[1]["nmu_over_tm"]), x(&cell["amd_nmu_over_tm"])],
            "{row:?}"
        );
        assert!(runs.iter().all(|r| r["mismatches"] == 0 && r["verified"].as_u64() > Some(0)), "{row:?}");
        assert_eq!(row[5], "0", "{row:?}");
    }
    for row in &rows[24..] {
        let size = &intel["sizes"][&row[1]];
        let g = size["geomean_runs"].as_array().unwrap();
        assert_eq!(row[2..5], [x(&g[0]), x(&g[1]), x(&size["geomean_amd"])], "{row:?}");
    }
    intel_small_rows(&nmu);
    cold_orig_rows(&designs);
}

/// docs/nuevomatch.md's 1K/10K sweep on the Intel Xeon: every cell is
/// docs/nmu-tm-intel-small.json's (scripts/cpu_table.py), two runs beside the AMD EPYC's figure,
/// for nmu-isets/tm and nmu/tm, 0 mismatches in every run.
fn intel_small_rows(nmu: &str) {
    let small: serde_json::Value = serde_json::from_str(&repo_file("docs/nmu-tm-intel-small.json")).unwrap();
    let f = |v: &serde_json::Value, d: usize| format!("{:.*}", d, v.as_f64().unwrap_or_else(|| panic!("{v}")));
    let rows = table(nmu, "| seed | size | nmu-isets/tm, run 1 |");
    assert_eq!(rows.len(), 26, "docs/nuevomatch.md Intel 1K/10K: {rows:?}");
    let x = |v: &serde_json::Value| format!("{}x", f(v, 2));
    for row in &rows[..24] {
        let size = &small["sizes"][&row[1]];
        let cell = size["rows"].as_array().unwrap().iter().find(|r| r["seed"] == row[0].as_str()).expect("a kept seed");
        let runs = cell["runs"].as_array().unwrap();
        let mut want = Vec::new();
        for c in ["nmu-isets", "nmu"] {
            want.extend(runs.iter().map(|r| x(&r[format!("{c}_over_tm")])));
            want.push(x(&cell[format!("amd_{c}_over_tm")]));
        }
        assert_eq!(row[2..8], want[..], "{row:?}");
        assert!(runs.iter().all(|r| r["mismatches"] == 0 && r["verified"].as_u64() > Some(0)), "{row:?}");
        assert_eq!(row[8], "0", "{row:?}");
    }
    for row in &rows[24..] {
        let size = &small["sizes"][&row[1]];
        let mut want = Vec::new();
        for c in ["nmu-isets", "nmu"] {
            want.extend(size[format!("geomean_{c}_over_tm_runs")].as_array().unwrap().iter().map(x));
            want.push(x(&size[format!("geomean_{c}_over_tm_amd")]));
        }
        assert_eq!(row[2..8], want[..], "{row:?}");
    }
}

/// docs/designs.md's "Auto out of a cold ORIG": each row is its run's JSON in
/// docs/auto-cold-orig/ (scripts/auto_cold_orig.py, whose docs define the columns).
fn cold_orig_rows(designs: &str) {
    let rows = table(designs, "| run | attack pps | design | decided at (s) |");
    assert_eq!(rows.len(), 12, "docs/designs.md cold ORIG: {rows:?}");
    let num = |v: &serde_json::Value| v.as_f64().unwrap_or_else(|| panic!("{v}"));
    let mean = |xs: &[f64]| {
        if xs.is_empty() {
            "–".to_string()
        } else {
            format!("{:.2}", xs.iter().sum::<f64>() / xs.len() as f64)
        }
    };
    for row in rows {
        let run = row[0].trim_matches('`');
        let r: serde_json::Value =
            serde_json::from_str(&repo_file(&format!("docs/auto-cold-orig/{run}.json"))).unwrap();
        let (att, auto) = (&r["attack"], &r["auto"]);
        assert_eq!(row[1] == "clean", att.is_null(), "{run}");
        let mut design = r["design"].as_str().unwrap().to_string();
        if let Some(settings) = auto["settings"].as_object() {
            let s: Vec<String> = settings.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap())).collect();
            design = format!("{design} {}", s.join(""));
        }
        assert_eq!(row[2], format!("`{design}`"), "{run}");
        let benign: Vec<(f64, f64)> = r["series"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (num(&s["t_s"]), num(if att.is_null() { &s["mpps"] } else { &s["benign_mpps"] })))
            .collect();
        let end = benign.last().unwrap().0;
        let last: Vec<f64> = benign.iter().filter(|(t, _)| *t > end - 1.0).map(|b| b.1).collect();
        assert_eq!(row[9], mean(&last), "{run}: last 1 s");
        let checked = r["verified"].as_u64().unwrap() + att["verified"].as_u64().unwrap_or(0);
        assert_eq!((r["mismatches"].as_u64(), att["mismatches"].as_u64().unwrap_or(0)), (Some(0), 0), "{run}");
        assert_eq!(row[10], format!("{checked} (0)"), "{run}");
        let Some(sw) = auto["switches"].as_array().and_then(|s| s.first()) else {
            assert!(row[3..9].iter().all(|c| c == "–"), "{run}: {row:?}");
            continue;
        };
        let swap = num(&sw["at_s"]);
        let decided = swap - num(&sw["ready_ms"]) / 1e3;
        assert_eq!(row[3], format!("{decided:.3}"), "{run}");
        assert_eq!(row[4], sw["reason"].as_str().unwrap().replace(',', ""), "{run}");
        assert_eq!(row[5], sw["to"].as_str().unwrap(), "{run}");
        assert_eq!(row[6], format!("{:.0}", num(&sw["ready_ms"])), "{run}");
        let before: Vec<f64> = benign.iter().filter(|(t, _)| *t <= decided).map(|b| b.1).collect();
        assert_eq!(row[7], mean(&before[before.len().saturating_sub(5)..]), "{run}: ORIG before");
        let dip =
            benign.iter().filter(|(t, _)| decided < *t && *t <= swap + 0.3).map(|b| b.1).fold(f64::INFINITY, f64::min);
        assert_eq!(row[8], if dip.is_finite() { format!("{dip:.2}") } else { "–".into() }, "{run}: lowest");
    }
}
/// The committed page of the last `rqvs paper --full` run (docs/paper/README.md) is its kept
/// JSON (docs/paper/json/ID.json, which `rqvs paper` rebuilds from the cells every run): every
/// figure's claims and table rows are on the page as the JSON has them, with 0 mismatches; and
/// the claims the README quotes under "What the full run shows" are the page's, word for word.
#[test]
fn the_paper_page_and_the_readme_claims_are_the_full_runs_json() {
    let page = repo_file("docs/paper/README.md");
    let dir = format!("{}/../../docs/paper/json", env!("CARGO_MANIFEST_DIR"));
    let mut claims = Vec::new();
    let mut figures = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        let id = j["id"].as_str().unwrap();
        assert_eq!(j["mode"], "Full", "{id}: the committed page is a full run's");
        assert_eq!(j["mismatches"], 0, "{id}");
        let s = |v: &serde_json::Value| v.as_str().unwrap_or_else(|| panic!("{id}: {v}")).to_string();
        for c in j["claims"].as_array().unwrap() {
            let mark = match c["holds"].as_bool() {
                Some(true) => "holds",
                Some(false) => "**does not hold**",
                None => "—",
            };
            let line = format!("- {id} ({mark}): {} — paper {}, rqvs {}", s(&c["what"]), s(&c["paper"]), s(&c["rqvs"]));
            assert!(page.lines().any(|l| l == line), "docs/paper/README.md lacks the claim of {p:?}: {line}");
            claims.push(line);
        }
        for r in j["rows"].as_array().unwrap() {
            let cells: Vec<String> = r.as_array().unwrap().iter().map(s).collect();
            let row = format!("| {} |", cells.join(" | "));
            assert!(page.lines().any(|l| l == row), "docs/paper/README.md lacks the row of {p:?}: {row}");
        }
        figures += 1;
    }
    assert!(figures >= 15, "{figures} figures in {dir}");
    let readme = repo_file("README.md");
    let quoted: Vec<&str> = readme
        .lines()
        .skip_while(|l| *l != "### What the full run shows")
        .skip(1)
        .take_while(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with("- fig") || l.starts_with("- table"))
        .collect();
    assert!(quoted.len() >= 5, "README: the claims under 'What the full run shows': {quoted:?}");
    for q in quoted {
        assert!(claims.iter().any(|c| c == q), "README quotes a claim the full run's JSON does not make: {q}");
    }
}

/// docs/switch-bench.md's TSE curve through the real switch: every row is a row of the
/// `scripts/bench_switch.py --attack` JSON kept in docs/switch-tse/ (`police-*` runs add
/// `--ingress-policing`, shown as `+policing`), formatted as `scripts/switch_tse_table.py` does.
#[test]
fn the_switch_tse_curve_is_its_kept_json() {
    let doc = repo_file("docs/switch-bench.md");
    let mut runs: Vec<(serde_json::Value, &str)> = Vec::new();
    for size in ["1k", "10k", "100k"] {
        for (file, suffix) in [("tse", ""), ("police", "+policing")] {
            let j = serde_json::from_str(&repo_file(&format!("docs/switch-tse/{file}-{size}.json"))).unwrap();
            runs.push((j, suffix));
        }
    }
    let label = |r: &serde_json::Value, suffix: &str| {
        let d = r["design"].as_str().map(|d| format!("/{d}{suffix}")).unwrap_or_default();
        format!("{}-{}{d}", r["switch"].as_str().unwrap(), r["port_type"].as_str().unwrap())
    };
    let kpps = |v: &serde_json::Value| format!("{:.1}", v.as_f64().unwrap() / 1e3);
    let rows = table(&doc, "| rules | switch | attack Kpps | benign Kpps | % of clean |");
    let all: Vec<(&serde_json::Value, String)> =
        runs.iter().flat_map(|(j, s)| j["rows"].as_array().unwrap().iter().map(move |r| (r, label(r, s)))).collect();
    assert_eq!(rows.len(), all.len(), "one table row per kept row");
    for row in &rows {
        let (r, _) = all
            .iter()
            .find(|(r, l)| {
                (r["rules"].to_string(), l.as_str(), format!("{}", r["attack_pps"].as_f64().unwrap() / 1e3))
                    == (row[0].clone(), row[1].as_str(), row[2].clone())
            })
            .unwrap_or_else(|| panic!("no kept row for {row:?}"));
        assert_eq!(r["status"], "ok", "{row:?}");
        assert_eq!(row[5], kpps(&r["sender_top_into_switch_pps"]), "{row:?}");
        let sample =
            if r["switch_sample_at_best"].is_object() { &r["switch_sample_at_best"] } else { &r["switch_sample_top"] };
        assert_eq!(
            (row[8].as_str(), row[9].as_str()),
            (&*sample["megaflows"].to_string(), &*sample["masks"].to_string()),
            "{row:?}"
        );
        let Some(best) = r["best_pps"].as_f64() else {
            // No probe passed: the row says so and gives no rate.
            assert!(r["reason"].as_str().is_some_and(|why| why.starts_with("no probe had")), "{row:?}");
            assert!([&row[3], &row[4], &row[6], &row[7]].iter().all(|c| *c == "–"), "{row:?}");
            continue;
        };
        let sender = if r["bound_by"] == "sender" { "≥ " } else { "" };
        assert_eq!(row[3], format!("{sender}{}", kpps(&r["best_pps"])), "{row:?}");
        assert_eq!(row[7], kpps(&r["attack_at_best"]["delivered_pps"]), "{row:?}");
        // The clean rate a row is a share of: its design's (without +policing) at attack 0; a
        // rate the sender bounded is a floor, so the share is then a bound (or none).
        let base = row[1].split('+').next().unwrap();
        let (clean, _) = all
            .iter()
            .find(|(c, l)| {
                c["rules"].as_u64().map(|n| n.to_string()).as_deref() == Some(row[0].as_str())
                    && l == base
                    && c["attack_pps"] == 0
            })
            .expect("a clean row");
        let pct = 100.0 * best / clean["best_pps"].as_f64().unwrap();
        let share = match (r["attack_pps"] == 0, r["bound_by"] == "sender", clean["bound_by"] == "sender") {
            (true, ..) => "100%".to_string(),
            (false, false, false) => format!("{pct:.0}%"),
            (false, true, false) => format!("≥ {pct:.0}%"),
            (false, false, true) => format!("≤ {pct:.0}%"),
            (false, true, true) => "–".to_string(),
        };
        assert_eq!(row[4], share, "{row:?}");
        assert_eq!(
            row[6],
            format!("{:.0}%", 100.0 * best / r["sender_top_into_switch_pps"].as_f64().unwrap()),
            "{row:?}"
        );
    }
}

/// docs/nuevomatch.md, "Issue 39's floor on 5b8c619": every cell of the twelve-seed (100K) and
/// four-set (500K) table against docs/nmu-tm-xeon-5b8c619/{avx512,avx2}-{100k,500k}/*.json, the
/// geometric means made from them, no mismatch in any run, the CPU named.
#[test]
fn the_floor_table_is_its_json() {
    let doc = repo_file("docs/nuevomatch.md");
    let rows = table(&doc, "| set | AVX-512: TupleMerge / NuevoMatchUP Mpps |");
    assert_eq!(rows.len(), 18, "{rows:?}");
    let load = |kernel: &str, set: &str| -> (f64, f64, f64, f64) {
        let size = set.rsplit('_').next().unwrap();
        let path = format!("docs/nmu-tm-xeon-5b8c619/{kernel}-{size}/{set}.json");
        let j: serde_json::Value = serde_json::from_str(&repo_file(&path)).unwrap();
        assert!(doc.contains(j["cpu"].as_str().unwrap()), "{path}: CPU");
        assert!(j["git_rev"].as_str().unwrap().starts_with("5b8c619"), "{path}: commit");
        let c = |n: &str| j["classifiers"].as_array().unwrap().iter().find(|c| c["name"] == n).unwrap().clone();
        let (tm, nmu) = (c("tm"), c("nmu"));
        for c in [&tm, &nmu] {
            assert_eq!(c["mismatches"], 0, "{path}");
            assert_eq!(c["update_mismatches"], 0, "{path}");
        }
        let v = |c: &serde_json::Value, k: &str| c[k].as_f64().unwrap();
        (v(&tm, "mpps"), v(&nmu, "mpps"), v(&tm, "mpps_single"), v(&nmu, "mpps_single"))
    };
    let geo = |l: &[f64]| (l.iter().map(|x| x.ln()).sum::<f64>() / l.len() as f64).exp();
    let (mut b5, mut b2, mut s5, mut s2) = (vec![], vec![], vec![], vec![]);
    for row in &rows {
        if let Some(size) = row[0].strip_prefix("**geomean ").and_then(|s| s.strip_suffix("**")) {
            assert_eq!(row[2], format!("**{:.2}×**", geo(&b5)), "{size}");
            assert_eq!(row[4], format!("**{:.2}×**", geo(&b2)), "{size}");
            assert_eq!(row[5], format!("{:.2}× / {:.2}×", geo(&s5), geo(&s2)), "{size}");
            (b5, b2, s5, s2) = (vec![], vec![], vec![], vec![]);
            continue;
        }
        let (t5, n5, ts5, ns5) = load("avx512", &row[0]);
        let (t2, n2, ts2, ns2) = load("avx2", &row[0]);
        assert_eq!(row[1], format!("{t5:.2} / {n5:.2}"), "{row:?}");
        assert_eq!(row[2], format!("{:.2}×", n5 / t5), "{row:?}");
        assert_eq!(row[3], format!("{t2:.2} / {n2:.2}"), "{row:?}");
        assert_eq!(row[4], format!("{:.2}×", n2 / t2), "{row:?}");
        assert_eq!(row[5], format!("{:.2}× / {:.2}×", ns5 / ts5, ns2 / ts2), "{row:?}");
        b5.push(n5 / t5);
        b2.push(n2 / t2);
        s5.push(ns5 / ts5);
        s2.push(ns2 / ts2);
    }
}

/// docs/switch-bench.md's table of the switch with the XDP sender is the JSON of its three
/// invocations (`scripts/bench_switch.py --sender rqvs --sender-engine xdp`), cell by cell,
/// ratios included.
#[test]
fn the_xdp_sender_switch_table_is_its_kept_json() {
    let doc = repo_file("docs/switch-bench.md");
    let rows = table_after(
        &doc,
        "### The XDP engine, its system calls made cheap: ≥ 2× tcpreplay met (session of 2026-12-03)",
        "| switch | run | 1 rule |",
    );
    assert_eq!(rows.len(), 6, "{rows:?}");
    let mut label = String::new();
    for row in rows {
        if !row[0].is_empty() {
            label = row[0].clone();
        }
        let (switch, port) = match label.as_str() {
            "OVS 3.1 afxdp (generic)" => ("ovs", "afxdp"),
            "rqvs CFLOWS afxdp" => ("rqvs", "afxdp"),
            "rqvs CFLOWS afpacket" => ("rqvs", "afpacket"),
            other => panic!("a row this test does not know: {other}"),
        };
        let j: serde_json::Value =
            serde_json::from_str(&repo_file(&format!("docs/switch-bench-xdp-sender-{}.json", row[1]))).unwrap();
        let best = |rules: u64| -> Option<f64> {
            let r =
                j["rows"].as_array().unwrap().iter().find(|r| {
                    r["switch"] == switch && r["port_type"] == port && r["rules"].as_u64().unwrap() == rules
                })?;
            assert_eq!(r["bound_by"], "switch", "{label} {} {rules}", row[1]);
            Some(r["best_pps"].as_f64()? / 1e3)
        };
        for (cell, rules) in [(2, 1), (3, 99_597), (4, 497_820)] {
            let text = row[cell].replace("**", "");
            match best(rules) {
                Some(k) => assert_eq!(text, format!("{k:.1}"), "{label} {} {rules}", row[1]),
                None => assert!(text == "–" || text.starts_with('<'), "{label} {} {rules}: {text}", row[1]),
            }
        }
        if let (Some(one), Some(big)) = (best(1), best(497_820)) {
            assert_eq!(row[5].replace("**", ""), format!("{:.1}%", 100.0 * big / one), "{label} {}", row[1]);
        }
    }
}
