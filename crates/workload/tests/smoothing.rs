//! Smoothing end to end on a real seed file (acl1): new prefix-length pairs appear, none further
//! than `s` from a pair the seed has, the generator stays deterministic, and the result has the
//! statistics the original db_generator gives with the same smoothness. Then `smooth` itself:
//! small classes worked by hand from the original's `PrefixList::smooth_type` (exact values), and
//! mass and reach on every class of every seed.
//!
//! Reference figures, measured with the original ClassBench db_generator (`db_generator -bc
//! acl1_seed 10000 2 0 0`, built from the published sources): 9,787 rules, 133 distinct (source,
//! destination) length pairs; the dominant pair (32, 32) holds 3,814 rules (0.390), (31, 32)
//! 1,423 (0.145), (32, 31) 1,286 (0.131). Without smoothing the original gives 31 pairs and
//! (32, 32) holds 0.751. Tolerances: shares ±0.03, pair counts ±15%.

use std::collections::{HashMap, HashSet};

use rqvs_flow::Rule;
use rqvs_workload::rules::{generate, Params};
use rqvs_workload::seedfile::{self, TotalLength};
use rqvs_workload::smoothing::smooth;

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
    let seed = seedfile::load("acl1").unwrap();
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

fn spike(total: u8, prob: f64, source: &[(u8, f64)]) -> TotalLength {
    TotalLength { total, prob, source: source.to_vec(), line: 1 }
}

/// One expected total of a smoothed class: `(total, probability, [(source, probability)])`.
type Row = (u8, f64, &'static [(u8, f64)]);

fn assert_table(got: &[TotalLength], want: &[Row]) {
    let totals: Vec<u8> = got.iter().map(|t| t.total).collect();
    assert_eq!(totals, want.iter().map(|w| w.0).collect::<Vec<_>>(), "totals");
    for (t, &(_, wp, wsrc)) in got.iter().zip(want) {
        assert!((t.prob - wp).abs() < 1e-12, "total {}: {} (want {wp})", t.total, t.prob);
        let ok = t.source.len() == wsrc.len()
            && t.source.iter().zip(wsrc).all(|(&(j, q), &(wj, wq))| j == wj && (q - wq).abs() < 1e-12);
        assert!(ok, "total {}: sources {:?} (want {wsrc:?})", t.total, t.source);
    }
}

/// Worked by hand from `PrefixList::smooth_type`: s = 1 spreads each total over ±1 with
/// B(2) = ¼ ½ ¼; h = 0 keeps each spike's own sources; the new totals t ∓ 1 get sources over
/// `j-1..=j` or `j..=j+1` with B(1) = ½ ½, weighted by the spike's total probability — so at total
/// 41, reached from both spikes, the 0.75 spike outweighs the 0.25 one three to one. A spike's
/// own sources are *not* weighted by its total probability (second case: at totals 40 and 41 the
/// own spike weighs 1 against the neighbour's 0.5).
#[test]
fn two_spikes_follow_the_originals_arithmetic() {
    let class = [spike(40, 0.75, &[(24, 1.0)]), spike(42, 0.25, &[(21, 1.0)])];
    let one: &[Row] = &[
        (39, 0.1875, &[(23, 0.5), (24, 0.5)]),
        (40, 0.375, &[(24, 1.0)]),
        (41, 0.25, &[(20, 0.125), (21, 0.125), (24, 0.375), (25, 0.375)]),
        (42, 0.125, &[(21, 1.0)]),
        (43, 0.0625, &[(21, 0.5), (22, 0.5)]),
    ];
    assert_table(&smooth(&class, 1), one);

    let class = [spike(40, 0.5, &[(24, 1.0)]), spike(41, 0.5, &[(20, 1.0)])];
    const THIRD: f64 = 1.0 / 3.0;
    const SIXTH: f64 = 1.0 / 6.0;
    let adjacent: &[Row] = &[
        (39, 0.125, &[(23, 0.5), (24, 0.5)]),
        (40, 0.375, &[(19, SIXTH), (20, SIXTH), (24, 2.0 * THIRD)]),
        (41, 0.375, &[(20, 2.0 * THIRD), (24, SIXTH), (25, SIXTH)]),
        (42, 0.125, &[(20, 0.5), (21, 0.5)]),
    ];
    assert_table(&smooth(&class, 1), adjacent);
}

/// One spike, s = 2 and s = 3, by hand: the own total's sources spread with B(2h), h = ⌊s/2⌋;
/// total t ∓ m's window `j-m..=j` / `j..=j+m` widens by one on each side per 2 of `s - m`.
#[test]
fn one_spike_windows_follow_the_original() {
    let class = [spike(40, 1.0, &[(24, 1.0)])];
    let two: &[Row] = &[
        (38, 1.0 / 16.0, &[(22, 0.25), (23, 0.5), (24, 0.25)]),
        (39, 4.0 / 16.0, &[(23, 0.5), (24, 0.5)]),
        (40, 6.0 / 16.0, &[(23, 0.25), (24, 0.5), (25, 0.25)]),
        (41, 4.0 / 16.0, &[(24, 0.5), (25, 0.5)]),
        (42, 1.0 / 16.0, &[(24, 0.25), (25, 0.5), (26, 0.25)]),
    ];
    assert_table(&smooth(&class, 2), two);
    const B3: [f64; 4] = [0.125, 0.375, 0.375, 0.125];
    let three: &[Row] = &[
        (37, 1.0 / 64.0, &[(21, B3[0]), (22, B3[1]), (23, B3[2]), (24, B3[3])]),
        (38, 6.0 / 64.0, &[(22, 0.25), (23, 0.5), (24, 0.25)]),
        (39, 15.0 / 64.0, &[(22, B3[0]), (23, B3[1]), (24, B3[2]), (25, B3[3])]),
        (40, 20.0 / 64.0, &[(23, 0.25), (24, 0.5), (25, 0.25)]),
        (41, 15.0 / 64.0, &[(23, B3[0]), (24, B3[1]), (25, B3[2]), (26, B3[3])]),
        (42, 6.0 / 64.0, &[(24, 0.25), (25, 0.5), (26, 0.25)]),
        (43, 1.0 / 64.0, &[(24, B3[0]), (25, B3[1]), (26, B3[2]), (27, B3[3])]),
    ];
    assert_table(&smooth(&class, 3), three);
}

/// Every port-pair class of every seed present, s = 1..=4: totals and each total's sources sum
/// to 1, every source is feasible, and every (source, destination) pair is at most s from a pair
/// of the same class before smoothing.
#[test]
fn every_seed_class_keeps_mass_and_reach() {
    let mut checked = 0;
    for name in seedfile::SEEDS {
        let seed = seedfile::load(name).unwrap();
        for (c, class) in seed.prefix_lengths.iter().enumerate() {
            let before: Vec<(i32, i32)> = class
                .iter()
                .filter(|t| t.prob > 0.0)
                .flat_map(|t| {
                    t.source
                        .iter()
                        .filter(|s| s.1 > 0.0)
                        .map(move |s| (i32::from(s.0), i32::from(t.total) - i32::from(s.0)))
                })
                .collect();
            for s in 1..=4u32 {
                let out = smooth(class, s);
                if before.is_empty() {
                    assert!(out.is_empty(), "{name} class {c}: an empty class stays empty");
                    continue;
                }
                let mass: f64 = out.iter().map(|t| t.prob).sum();
                assert!((mass - 1.0).abs() < 1e-9, "{name} class {c} s={s}: totals sum to {mass}");
                for t in &out {
                    let smass: f64 = t.source.iter().map(|x| x.1).sum();
                    assert!((smass - 1.0).abs() < 1e-9, "{name} class {c} s={s} total {}: {smass}", t.total);
                    for &(sl, _) in &t.source {
                        let (sl, dl) = (i32::from(sl), i32::from(t.total) - i32::from(sl));
                        assert!((0..=32).contains(&dl), "{name} class {c} s={s}: infeasible ({sl},{dl})");
                        let d = before.iter().map(|&(a, b)| (a - sl).abs() + (b - dl).abs()).min().unwrap();
                        assert!(d as u32 <= s, "{name} class {c} s={s}: ({sl},{dl}) is {d} away");
                    }
                }
                checked += 1;
            }
        }
    }
    eprintln!("{checked} smoothed classes checked");
}
