//! docs/wide-key-bench.md's timed table is the JSON its commands wrote beside it
//! (docs/wide-key-bench-{of1,of2,acl1v6}.json): every cell — rules, batches and one-key Mpps,
//! ns/pkt, build time, bytes per rule, coverage — compared with the report, rounded as printed,
//! and the report's CPU and commit named in the page (issue 19: numbers in docs come from JSON).

fn docs() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs")
}

/// The rows of the table of `page` whose header line starts with `header`: each row's cells,
/// trimmed, with the characters of `strip` (thousands separators, bold marks) taken out.
fn table(page: &str, header: &str, strip: &[char]) -> Vec<Vec<String>> {
    page.lines()
        .skip_while(|l| !l.starts_with(header))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.trim_matches('|').split('|').map(|c| c.trim().replace(strip, "")).collect())
        .collect()
}

/// The file name part of a wide set as the tables name it.
fn wide_set(name: &str) -> &'static str {
    match name {
        "of1" => "of1",
        "of2" => "of2",
        "acl1 IPv6" => "acl1v6",
        other => panic!("a set this test does not know: {other}"),
    }
}

#[test]
fn the_wide_bench_table_is_its_json() {
    let page = std::fs::read_to_string(docs().join("wide-key-bench.md")).unwrap();
    let header = "| set | rules | classifier | batches Mpps |";
    let rows = table(&page, header, &[',', '*']);
    assert_eq!(rows.len(), 6, "{rows:?}");
    for row in &rows {
        let file = wide_set(&row[0]);
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(docs().join(format!("wide-key-bench-{file}.json"))).unwrap())
                .unwrap();
        assert!(page.contains(&format!("Commit {}.", &json["git_rev"].as_str().unwrap()[..7])), "{file}: commit");
        assert!(page.contains(json["cpu"].as_str().unwrap()), "{file}: CPU");
        let name = match row[2].as_str() {
            "TupleMerge" => "tm",
            "NuevoMatchUP" => "nmu",
            other => panic!("{other}"),
        };
        let c = json["classifiers"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap();
        let f = |k: &str| c[k].as_f64().unwrap_or_else(|| panic!("{file} {name}: {k}"));
        let rules = json["rules"].as_u64().unwrap().to_string();
        assert!(row[1].starts_with(&rules), "{file}: rules {} against {rules}", row[1]);
        let mpps_digits = |x: f64| format!("{x:.3}");
        assert_eq!(row[3], mpps_digits(f("mpps")), "{file} {name}: batches");
        assert_eq!(row[4], format!("{:.0}", f("ns_per_packet")), "{file} {name}: ns/pkt");
        assert_eq!(row[5], mpps_digits(f("mpps_single")), "{file} {name}: one key");
        assert_eq!(row[6], format!("{:.0}", f("build_ms")), "{file} {name}: build");
        assert_eq!(row[7], format!("{:.0}", f("bytes_per_rule")), "{file} {name}: bytes/rule");
        assert_eq!(c["mismatches"], 0, "{file} {name}");
        assert_eq!(c["update_mismatches"], 0, "{file} {name}");
        if name == "nmu" {
            let cov = c["stats"]["coverage"].as_f64().unwrap();
            assert_eq!(row[8], format!("{:.1}%", 100.0 * cov), "{file}: coverage");
        }
    }
}

/// The table of TupleMerge over the wide fields against NuevoMatchUP at 100K and 500K
/// (docs/wide-key-bench-tm-{of1,of2,acl1v6}-{100k,500k}.json), every cell and the ratios.
#[test]
fn the_wide_tuplemerge_table_is_its_json() {
    let page = std::fs::read_to_string(docs().join("wide-key-bench.md")).unwrap();
    let header = "| set | size | rules | classifier | batches Mpps |";
    let rows = table(&page, header, &[',', '*']);
    assert_eq!(rows.len(), 12, "{rows:?}");
    for row in &rows {
        let set = wide_set(&row[0]);
        let file = format!("wide-key-bench-tm-{set}-{}.json", row[1].to_lowercase());
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(docs().join(&file)).unwrap()).unwrap();
        assert!(page.contains(&format!("Commit {} ", &json["git_rev"].as_str().unwrap()[..7])), "{file}: commit");
        assert!(page.contains(json["cpu"].as_str().unwrap()), "{file}: CPU");
        classifier_row(row, &json, &file, 11);
    }
}

/// The table of CFLOWS against ORIG on of1/of2 with 100K-packet traces
/// (docs/wide-key-bench-{rate,passes}-{of1,of2}-100k.json): each Mpps, ratio and mask count as
/// printed, 0 mismatches, the commit named in the text.
#[test]
fn the_cflows_orig_table_is_its_json() {
    let page = std::fs::read_to_string(docs().join("wide-key-bench.md")).unwrap();
    let header = "| set | design | one pass, constant rate";
    let rows = table(&page, header, &['*']);
    assert_eq!(rows.len(), 4, "{rows:?}");
    let load = |kind: &str, set: &str| -> serde_json::Value {
        let file = docs().join(format!("wide-key-bench-{kind}-{set}-100k.json"));
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap()
    };
    for row in &rows {
        let set = row[0].strip_suffix(" 100K").unwrap();
        let design = row[1].to_lowercase();
        let (rate, passes) = (load("rate", set), load("passes", set));
        for j in [&rate, &passes] {
            assert!(page.contains(&format!("commit {}'s", &j["git_rev"].as_str().unwrap()[..7])), "{set}: commit");
        }
        // A rate search's runs are under `rate_search`; a plain compare's under `runs`.
        let run = |j: &serde_json::Value, key: &str, d: &str| {
            j[key].as_array().unwrap().iter().find(|r| r["design"] == d).unwrap().clone()
        };
        let (r, r0) = (run(&rate, "rate_search", &design), run(&rate, "rate_search", "orig"));
        let (p, p0) = (run(&passes, "runs", &design), run(&passes, "runs", "orig"));
        for x in [&r, &p] {
            assert_eq!(x["mismatches"], 0, "{set} {design}");
            // A packet the rate search dropped is not checked.
            assert!((9_900..=10_000).contains(&x["verified"].as_u64().unwrap()), "{set} {design}");
        }
        let f = |x: &serde_json::Value, k: &str| x[k].as_f64().unwrap_or_else(|| panic!("{set} {design}: {k}"));
        let ratio = |a: f64, b: f64| if design == "orig" { String::new() } else { format!(" ({:.1}×)", a / b) };
        let ratio2 = |a: f64, b: f64| if design == "orig" { String::new() } else { format!(" ({:.2}×)", a / b) };
        let (mr, mr0) = (f(&r, "max_rate_below_1pct_drops") / 1e6, f(&r0, "max_rate_below_1pct_drops") / 1e6);
        assert_eq!(row[2], format!("{mr:.3}{}", ratio(mr, mr0)), "{set} {design}: constant rate");
        assert_eq!(
            row[3],
            format!("{:.3}{}", f(&p, "mpps"), ratio(f(&p, "mpps"), f(&p0, "mpps"))),
            "{set} {design}: 3 passes"
        );
        let warm = f(&p, "mpps_after_first_pass");
        assert_eq!(
            row[4],
            format!("{warm:.3}{}", ratio2(warm, f(&p0, "mpps_after_first_pass"))),
            "{set} {design}: warm"
        );
        if design == "orig" {
            let masks = p["counters"]["masks"].as_u64().unwrap();
            assert_eq!(
                row[5],
                format!("{masks} ({:.1} subtables/hit)", f(&p, "avg_subtables_per_hit")),
                "{set}: masks"
            );
        }
    }
}

/// The table of the pre-filter on the iSet's words at 100K and 500K
/// (docs/wide-key-bench-pf-{of1,of2,acl1v6}-{100k,500k}.json): every cell, the ratios, the
/// commit and CPU; the bytes table at 500K (with docs/wide-key-bench-pf-acl1-500k.json).
#[test]
fn the_prefilter_tables_are_their_json() {
    let page = std::fs::read_to_string(docs().join("wide-key-bench.md")).unwrap();
    let load = |file: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(docs().join(file)).unwrap()).unwrap()
    };
    let key = |set: &str| match set {
        "of1" => "of1",
        "of2" => "of2",
        "acl1" => "acl1",
        "acl1 IPv6" => "acl1v6",
        other => panic!("a set this test does not know: {other}"),
    };
    let rows = table(&page, "| wide set | size | rules | classifier | batches Mpps |", &[',', '*']);
    assert_eq!(rows.len(), 12, "{rows:?}");
    for row in &rows {
        let file = format!("wide-key-bench-pf-{}-{}.json", key(&row[0]), row[1].to_lowercase());
        let json = load(&file);
        assert!(page.contains(&format!("Commit {},", &json["git_rev"].as_str().unwrap()[..7])), "{file}: commit");
        assert!(page.contains(json["cpu"].as_str().unwrap()), "{file}: CPU");
        classifier_row(row, &json, &file, 12);
    }
    let rows = table(&page, "| set | classifier | bytes/rule | rules | tables or isets |", &[',', '*']);
    assert_eq!(rows.len(), 8, "{rows:?}");
    for row in &rows {
        let file = format!("wide-key-bench-pf-{}-500k.json", key(&row[0]));
        let json = load(&file);
        let n = json["rules"].as_f64().unwrap();
        let name = if row[1] == "TupleMerge" { "tm" } else { "nmu" };
        let c = json["classifiers"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap().clone();
        assert_eq!(row[2], format!("{:.0}", c["bytes_per_rule"].as_f64().unwrap()), "{file} {name}: bytes/rule");
        let part = |k: &str| -> f64 { c["memory_breakdown"][k].as_f64().unwrap_or(0.0) / n };
        assert_eq!(row[3], format!("{:.0}", part("rules")), "{file} {name}: rules");
        let second = if name == "tm" { "tables" } else { "isets" };
        assert_eq!(row[4], format!("{:.0} ({second})", part(second)), "{file} {name}: {second}");
        assert_eq!(row[6], format!("{:.0}", part("extras")), "{file} {name}: extras");
    }
}

/// One classifier's row of a TupleMerge/NuevoMatchUP table (columns from 2: rules, classifier,
/// batches Mpps, ns/pkt, one key Mpps, build ms, bytes/rule, coverage, batch ratio, and the
/// one-key ratio in column `one_key_ratio`) against its `bench classifiers` JSON.
fn classifier_row(row: &[String], json: &serde_json::Value, file: &str, one_key_ratio: usize) {
    let cs = json["classifiers"].as_array().unwrap();
    let get = |name: &str, k: &str| {
        cs.iter().find(|c| c["name"] == name).unwrap()[k].as_f64().unwrap_or_else(|| panic!("{file} {name}: {k}"))
    };
    let name = match row[3].as_str() {
        "TupleMerge" => "tm",
        "NuevoMatchUP" => "nmu",
        other => panic!("{other}"),
    };
    let f = |k: &str| get(name, k);
    assert_eq!(row[2], json["rules"].as_u64().unwrap().to_string(), "{file}: rules");
    assert_eq!(row[4], format!("{:.3}", f("mpps")), "{file} {name}: batches");
    assert_eq!(row[5], format!("{:.0}", f("ns_per_packet")), "{file} {name}: ns/pkt");
    assert_eq!(row[6], format!("{:.3}", f("mpps_single")), "{file} {name}: one key");
    assert_eq!(row[7], format!("{:.0}", f("build_ms")), "{file} {name}: build");
    assert_eq!(row[8], format!("{:.0}", f("bytes_per_rule")), "{file} {name}: bytes/rule");
    for c in cs {
        assert_eq!(c["mismatches"], 0, "{file}");
        assert_eq!(c["update_mismatches"], 0, "{file}");
    }
    if name == "nmu" {
        let cov = cs.iter().find(|c| c["name"] == "nmu").unwrap()["stats"]["coverage"].as_f64().unwrap();
        assert_eq!(row[9], format!("{:.1}%", 100.0 * cov), "{file}: coverage");
        assert_eq!(row[10], format!("{:.2}×", get("nmu", "mpps") / get("tm", "mpps")), "{file}: ratio");
        assert_eq!(
            row[one_key_ratio],
            format!("{:.2}×", get("nmu", "mpps_single") / get("tm", "mpps_single")),
            "{file}: ratio 1x1"
        );
    }
}

/// The bytes table after the rules moved into their candidates (issue 39 item 3, second pass):
/// each row's bytes per rule and its parts against docs/wide-key-bench-bytes-{set}-500k.json,
/// with the run's commit and CPU named, and no mismatch in the run.
#[test]
fn the_second_bytes_table_is_its_json() {
    let page = std::fs::read_to_string(docs().join("wide-key-bench.md")).unwrap();
    let rows = table(&page, "| set | classifier | B/rule before | B/rule |", &[',', '*']);
    assert_eq!(rows.len(), 8, "{rows:?}");
    for row in &rows {
        let set = match row[0].as_str() {
            "acl1" => "acl1",
            "of1" => "of1",
            "of2" => "of2",
            "acl1 IPv6" => "acl1v6",
            other => panic!("a set this test does not know: {other}"),
        };
        let file = format!("wide-key-bench-bytes-{set}-500k.json");
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(docs().join(&file)).unwrap()).unwrap();
        assert!(page.contains(&format!("commit {}", &json["git_rev"].as_str().unwrap()[..7])), "{file}: commit");
        assert!(page.contains(json["cpu"].as_str().unwrap()), "{file}: CPU");
        let n = json["rules"].as_f64().unwrap();
        let name = if row[1] == "TupleMerge" { "tm" } else { "nmu" };
        let c = json["classifiers"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap().clone();
        assert_eq!(c["mismatches"], 0, "{file} {name}");
        assert_eq!(c["update_mismatches"], 0, "{file} {name}");
        assert_eq!(row[3], format!("{:.0}", c["bytes_per_rule"].as_f64().unwrap()), "{file} {name}: bytes/rule");
        let part = |k: &str| -> f64 { c["memory_breakdown"][k].as_f64().unwrap_or(0.0) / n };
        assert_eq!(row[4], format!("{:.0}", part("rules")), "{file} {name}: rules");
        let second = if name == "tm" { "tables" } else { "isets" };
        assert_eq!(row[5], format!("{:.0} ({second})", part(second)), "{file} {name}: {second}");
        let rest: f64 = c["memory_breakdown"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| !["rules", "tables", "isets", "extras"].contains(&k.as_str()))
            .map(|(_, v)| v.as_f64().unwrap())
            .sum::<f64>()
            / n;
        assert_eq!(row[6], format!("{rest:.0}"), "{file} {name}: the rest");
        assert_eq!(row[7], format!("{:.0}", part("extras")), "{file} {name}: extras");
    }
}

/// The fifth pass's tables (docs/wide-key-bench.md, "Fifth pass"): every cell of the wide sets'
/// runs and of the ClassBench runs against docs/wide-key-bench-xeon-l8/*.json, with no mismatch
/// in any run, the CPU named, and issue 35's ratio (≥ 1.5×) in every wide run.
#[test]
fn the_fifth_pass_tables_are_their_json() {
    let page = std::fs::read_to_string(docs().join("wide-key-bench.md")).unwrap();
    let load = |file: &str| -> serde_json::Value {
        let path = docs().join("wide-key-bench-xeon-l8").join(file);
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    };
    let get = |json: &serde_json::Value, name: &str, k: &str| -> f64 {
        let cs = json["classifiers"].as_array().unwrap();
        for c in cs {
            assert_eq!(c["mismatches"], 0);
            assert_eq!(c["update_mismatches"], 0);
        }
        cs.iter().find(|c| c["name"] == name).unwrap()[k].as_f64().unwrap()
    };
    let wide = table(&page, "| Xeon set | size | run |", &[',', '*']);
    assert_eq!(wide.len(), 15, "{wide:?}");
    for row in &wide {
        let set = wide_set(&row[0]);
        let file = format!("{set}-{}-{}.json", row[1].to_lowercase(), row[2]);
        let json = load(&file);
        assert!(page.contains(json["cpu"].as_str().unwrap()), "{file}: CPU");
        assert!(json["git_rev"].as_str().unwrap().starts_with("f8ceef6"), "{file}: commit");
        let ratio = get(&json, "nmu", "mpps") / get(&json, "tm", "mpps");
        assert_eq!(row[3], format!("{:.2}", get(&json, "tm", "mpps")), "{file}");
        assert_eq!(row[4], format!("{:.2}", get(&json, "nmu", "mpps")), "{file}");
        assert_eq!(row[5], format!("{ratio:.2}×"), "{file}");
        assert_eq!(
            row[6],
            format!("{:.2}×", get(&json, "nmu", "mpps_single") / get(&json, "tm", "mpps_single")),
            "{file}"
        );
        let bytes = format!("{:.0} / {:.0}", get(&json, "tm", "bytes_per_rule"), get(&json, "nmu", "bytes_per_rule"));
        assert_eq!(row[7], bytes, "{file}");
        let nmu = json["classifiers"].as_array().unwrap().iter().find(|c| c["name"] == "nmu").unwrap();
        assert_eq!(row[8], format!("{:.1}%", 100.0 * nmu["stats"]["coverage"].as_f64().unwrap()), "{file}");
        assert!(ratio >= 1.5, "{file}: issue 35's target");
    }
    let classbench = table(&page, "| ClassBench set | TupleMerge batches Mpps |", &[',', '*']);
    assert_eq!(classbench.len(), 7, "{classbench:?}");
    for row in &classbench {
        let file = format!("{}.json", row[0]);
        let json = load(&file);
        assert_eq!(row[1], format!("{:.2}", get(&json, "tm", "mpps")), "{file}");
        assert_eq!(row[2], format!("{:.2}", get(&json, "nmu", "mpps")), "{file}");
        assert_eq!(row[3], format!("{:.2}×", get(&json, "nmu", "mpps") / get(&json, "tm", "mpps")), "{file}");
        assert_eq!(
            row[4],
            format!("{:.2}×", get(&json, "nmu", "mpps_single") / get(&json, "tm", "mpps_single")),
            "{file}"
        );
        let bytes = format!("{:.0} / {:.0}", get(&json, "tm", "bytes_per_rule"), get(&json, "nmu", "bytes_per_rule"));
        assert_eq!(row[5], bytes, "{file}");
    }
}

/// The bytes table of "Fifth pass: the remainder gives its rules back" (docs/wide-key-bench.md):
/// every cell against docs/bytes-remainder-held/*.json (before and after), no mismatch in any
/// run, the commits and the CPU named, and issue 39's targets (≤ 150 B/rule TupleMerge, ≤ 100
/// NuevoMatchUP) in every "after" row.
#[test]
fn the_remainder_bytes_table_is_its_json() {
    let page = std::fs::read_to_string(docs().join("wide-key-bench.md")).unwrap();
    let rows = table(&page, "| set | classifier | B/rule before → after |", &[',', '*']);
    assert_eq!(rows.len(), 8, "{rows:?}");
    let load = |rev: &str, set: &str| -> serde_json::Value {
        let path = docs().join("bytes-remainder-held").join(format!("{rev}-{set}.json"));
        let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(json["git_rev"].as_str().unwrap().starts_with(rev), "{}: commit", path.display());
        assert!(page.contains(json["cpu"].as_str().unwrap()), "{}: CPU", path.display());
        json
    };
    let k = |v: f64| format!("{:.0}K", v / 1e3);
    for row in &rows {
        let (before, after) = (load("f8ceef6", &row[0]), load("089bff3", &row[0]));
        let name = if row[1] == "TupleMerge" { "tm" } else { "nmu" };
        let c = |json: &serde_json::Value| -> serde_json::Value {
            let c = json["classifiers"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap().clone();
            assert_eq!(c["mismatches"], 0, "{} {name}", row[0]);
            assert_eq!(c["update_mismatches"], 0, "{} {name}", row[0]);
            c
        };
        let (cb, ca) = (c(&before), c(&after));
        let n = after["rules"].as_f64().unwrap();
        let bpr = |c: &serde_json::Value| c["bytes_per_rule"].as_f64().unwrap();
        assert_eq!(row[2], format!("{:.1} → {:.1}", bpr(&cb), bpr(&ca)), "{} {name}", row[0]);
        assert!(bpr(&ca) <= if name == "tm" { 150.0 } else { 100.0 }, "{} {name}: issue 39's target", row[0]);
        let part = |c: &serde_json::Value, f: &dyn Fn(&str) -> bool| -> f64 {
            c["memory_breakdown"]
                .as_object()
                .unwrap()
                .iter()
                .filter(|(k, _)| f(k))
                .map(|(_, v)| v.as_f64().unwrap())
                .sum::<f64>()
                / n
        };
        let rules = |k: &str| k == "rules";
        assert_eq!(row[3], format!("{:.1} → {:.1}", part(&cb, &rules), part(&ca, &rules)), "{} {name}", row[0]);
        let third = if name == "tm" {
            let index = |k: &str| k == "index";
            format!("{:.1} → {:.1} (index)", part(&cb, &index), part(&ca, &index))
        } else {
            let rem = |k: &str| k.starts_with("remainder.");
            format!("{:.1} → {:.1} (remainder)", part(&cb, &rem), part(&ca, &rem))
        };
        assert_eq!(row[4], third, "{} {name}", row[0]);
        let rates = |c: &serde_json::Value| {
            format!("{} / {}", k(c["insert_per_s"].as_f64().unwrap()), k(c["remove_per_s"].as_f64().unwrap()))
        };
        assert_eq!(row[5], format!("{} → {}", rates(&cb), rates(&ca)), "{} {name}", row[0]);
    }
}
