//! Smoothing end to end on a real seed file (acl1): new prefix-length pairs appear, none further
//! than `s` from a pair the seed has, the generator stays deterministic, and the result has the
//! statistics the original db_generator gives with the same smoothness.
//!
//! Reference figures, measured with the original ClassBench db_generator (`db_generator -bc
//! acl1_seed 10000 2 0 0`, built from the published sources): 9,787 rules, 133 distinct (source,
//! destination) length pairs; the dominant pair (32, 32) holds 3,814 rules (0.390), (31, 32)
//! 1,423 (0.145), (32, 31) 1,286 (0.131). Without smoothing the original gives 31 pairs and
//! (32, 32) holds 0.751. Tolerances: shares ±0.03, pair counts ±15%.

use std::collections::{HashMap, HashSet};

use rqvs_flow::Rule;
use rqvs_workload::rules::{generate, Params};
use rqvs_workload::seedfile;

fn lengths(rules: &[Rule]) -> HashMap<(u8, u8), usize> {
    let mut m = HashMap::new();
    for r in rules {
        let k = (r.matches.mask().nw_src.count_ones() as u8, r.matches.mask().nw_dst.count_ones() as u8);
        *m.entry(k).or_insert(0) += 1;
    }
    m
}

fn share(m: &HashMap<(u8, u8), usize>, k: (u8, u8)) -> f64 {
    m.get(&k).copied().unwrap_or(0) as f64 / m.values().sum::<usize>() as f64
}

#[test]
fn smoothing_spreads_lengths_like_the_original() {
    let dir = seedfile::default_dir();
    let seed = match seedfile::load("acl1", &dir) {
        Ok(s) => s,
        Err(e) => {
            assert!(std::env::var("RQVS_REQUIRE_DATA").is_err(), "{e}");
            eprintln!("skipping: {e}");
            return;
        }
    };
    // Every (source, destination) pair the seed can produce, over all classes.
    let seed_pairs: HashSet<(u8, u8)> = seed
        .prefix_lengths
        .iter()
        .flatten()
        .filter(|t| t.prob > 0.0)
        .flat_map(|t| t.source.iter().filter(|s| s.1 > 0.0 && s.0 <= t.total).map(move |s| (s.0, t.total - s.0)))
        .collect();

    let plain = lengths(&generate(&seed, &Params::new(10_000, 1)).unwrap().rules);
    assert!(plain.keys().all(|k| seed_pairs.contains(k)), "without smoothing only the seed's pairs");
    assert!((share(&plain, (32, 32)) - 0.751).abs() <= 0.03, "{}", share(&plain, (32, 32)));

    for s in [1u32, 2, 4] {
        let params = Params { smoothing: s, ..Params::new(10_000, 1) };
        let a = generate(&seed, &params).unwrap();
        let b = generate(&seed, &params).unwrap();
        assert_eq!(a.rules, b.rules, "deterministic for a seed (s={s})");
        let m = lengths(&a.rules);
        assert!(m.keys().any(|k| !seed_pairs.contains(k)), "s={s}: new pairs appear");
        for &(sl, dl) in m.keys() {
            let d = seed_pairs
                .iter()
                .map(|&(a, b)| (i32::from(a) - i32::from(sl)).abs() + (i32::from(b) - i32::from(dl)).abs())
                .min()
                .unwrap();
            assert!(d as u32 <= s, "s={s}: ({sl},{dl}) is {d} from every seed pair");
        }
        if s == 2 {
            assert!((share(&m, (32, 32)) - 0.390).abs() <= 0.03, "(32,32) {}", share(&m, (32, 32)));
            assert!((share(&m, (31, 32)) - 0.145).abs() <= 0.03, "(31,32) {}", share(&m, (31, 32)));
            assert!((share(&m, (32, 31)) - 0.131).abs() <= 0.03, "(32,31) {}", share(&m, (32, 31)));
            assert!((113..=153).contains(&m.len()), "{} distinct pairs (original: 133)", m.len());
        }
    }
    let too_much = Params { smoothing: 65, ..Params::new(100, 1) };
    assert!(generate(&seed, &too_much).unwrap_err().contains("smoothing"));
}
