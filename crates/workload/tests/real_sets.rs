//! Generated sets against the shared real ClassBench sets (made with the original generator from
//! the same seed files): prefix-length histograms, port classes, protocol mix, flags share and
//! distinct tuples must agree within the tolerances below, for all 12 seeds.
//!
//! Tolerances (total variation distance unless stated), chosen from the spread measured between
//! rqvs seeds and the real sets, with headroom, and tight enough that dropping a step of the
//! algorithm (skew scaling, nesting, correlation, the class-specific length distributions) fails:
//! - prefix lengths: src and dst ≤ 0.04 (measured ≤ 0.029 at 10K, ≤ 0.008 at 100K);
//! - port classes ≤ 0.02 each side, protocols ≤ 0.025, flags share ±0.02 (measured ≤ 0.017);
//! - distinct (src len, dst len, proto-wildcard) tuples: ratio 0.9..1.1 (measured 1.00..1.03);
//! - rules left after duplicate removal (which depends on the address tries): ratio 0.9..1.1 at
//!   10K (measured 0.957..1.082), 0.95..1.05 at 100K (measured 0.976..1.003);
//! - distinct source and destination prefixes: ratio 0.4..2.5 only — they swing from run to run
//!   of the trie construction (measured 0.52..1.47 at 10K, 0.65..1.01 at 100K).

use std::path::PathBuf;
use std::time::Instant;

use rqvs_workload::rules::{generate, Params};
use rqvs_workload::seedfile::{self, SEEDS};
use rqvs_workload::stats::RuleStats;

fn data_dir() -> Option<PathBuf> {
    rqvs_testkit::data::classbench_dir()
}

/// The embedded seeds are ClassBench's `parameter_files`, byte for byte.
#[test]
fn embedded_seeds_are_the_shared_parameter_files() {
    let Some(base) = data_dir() else { return };
    for s in SEEDS {
        let file = std::fs::read_to_string(base.join(format!("parameter_files/{s}_seed"))).unwrap();
        assert!(seedfile::embedded(s) == Some(file.as_str()), "embedded seed {s} differs from the shared file");
    }
    assert_eq!(seedfile::embedded("acl6"), None);
}

fn check(size: &str, count: usize, rules_tol: f64) {
    let Some(base) = data_dir() else { return };
    let mut failures = Vec::new();
    for s in SEEDS {
        let seed = seedfile::load(s).unwrap();
        let real = rqvs_flow::formats::classbench::read_rules(&base.join(format!("rules/{s}_{size}.xz"))).unwrap();
        let t = Instant::now();
        let gen = generate(&seed, &Params::new(count, 1)).unwrap();
        let ms = t.elapsed().as_millis();
        let (a, b) = (RuleStats::of(&gen.rules).unwrap(), RuleStats::of(&real).unwrap());
        let c = a.compare(&b);
        eprintln!(
            "{s}_{size}: generated {} (real {}) in {ms} ms; tuples {} vs {}; {c}",
            gen.rules.len(),
            real.len(),
            a.tuples,
            b.tuples
        );
        let ok = c.src_len <= 0.04
            && c.dst_len <= 0.04
            && c.sport_class <= 0.02
            && c.dport_class <= 0.02
            && c.protocol <= 0.025
            && c.flags <= 0.02
            && (0.9..=1.1).contains(&c.tuples_ratio)
            && (1.0 - rules_tol..=1.0 + rules_tol).contains(&c.rules_ratio)
            && (0.4..=2.5).contains(&c.src_prefixes_ratio)
            && (0.4..=2.5).contains(&c.dst_prefixes_ratio);
        if !ok {
            failures.push(format!("{s}_{size}: {c}"));
        }
    }
    assert!(failures.is_empty(), "outside tolerance:\n{}", failures.join("\n"));
}

#[test]
fn all_seeds_10k_match_real_sets() {
    check("10k", 10_000, 0.1);
}

#[test]
fn all_seeds_100k_match_real_sets() {
    check("100k", 100_000, 0.05);
}
