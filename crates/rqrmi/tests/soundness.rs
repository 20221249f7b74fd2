//! The error bound is sound: for random range sets, random configurations (poor models
//! included) and keys at every place where the model's behaviour can change, the lookup is
//! the true range (or None in a gap) and the predicted window contains the true range.

mod common;

use common::{from_gaps, probe_keys, range_set, truth};
use proptest::prelude::*;
use rqvs_rqrmi::{RqRmi, Sampling, TrainConfig};

/// Keys next to every ReLU breakpoint of every submodel (the places where the piecewise-linear
/// model bends), as computed from the parameters in exact-ish arithmetic.
fn breakpoint_keys(m: &RqRmi) -> Vec<u32> {
    let mut ks = Vec::new();
    for s in 0..m.stage_widths().len() {
        for sub in m.stage(s) {
            for j in 0..sub.w.len() {
                if sub.w[j] == 0.0 {
                    continue;
                }
                let k = sub.mean + (-sub.b[j] / sub.w[j]) / sub.inv_std;
                if k.is_finite() && k > -3.0 && k < 4294967298.0 {
                    let k = k.floor() as i64;
                    for d in -2..=2 {
                        let x = k + d;
                        if (0..=i64::from(u32::MAX)).contains(&x) {
                            ks.push(x as u32);
                        }
                    }
                }
            }
        }
    }
    ks
}

fn check(r: &[(u32, u32)], cfg: &TrainConfig, extra: &[u32]) -> Result<(), TestCaseError> {
    let m = RqRmi::train(r, cfg).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut ks = probe_keys(r, extra);
    ks.extend(breakpoint_keys(&m));
    for &k in &ks {
        let t = truth(r, k);
        let got = m.lookup(k);
        prop_assert_eq!(got, t, "key {} (ranges {}, widths {:?})", k, r.len(), m.stage_widths());
        if let Some(i) = t {
            let (pos, lo, hi) = m.predict(k);
            prop_assert!(lo <= i && i <= hi, "key {k}: range {i} outside window {lo}..={hi} (pos {pos})");
        }
    }
    let mut out = vec![None; ks.len()];
    m.lookup_batch(&ks, &mut out);
    for (k, o) in ks.iter().zip(&out) {
        prop_assert_eq!(*o, truth(r, *k), "batch, key {}", k);
    }
    Ok(())
}

fn config() -> impl Strategy<Value = TrainConfig> {
    (
        prop_oneof![
            Just(None),
            Just(Some(vec![1])),
            Just(Some(vec![1, 2])),
            Just(Some(vec![1, 7])),
            Just(Some(vec![1, 3, 5])),
            Just(Some(vec![1, 4, 16, 3])),
            Just(Some(vec![1, 8, 64])),
        ],
        prop_oneof![Just(2usize), Just(16), Just(4096)],
        prop_oneof![Just(0u64), Just(4), Just(128)],
        1usize..4,
        any::<u64>(),
        prop_oneof![Just(Sampling::Approximate), Just(Sampling::Uniform)],
    )
        .prop_map(|(stage_widths, samples, error_target, max_sessions, seed, sampling)| TrainConfig {
            stage_widths,
            samples,
            error_target,
            max_sessions,
            seed,
            sampling,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn bound_is_sound(r in range_set(400), cfg in config(), extra in proptest::collection::vec(any::<u32>(), 64)) {
        check(&r, &cfg, &extra)?;
    }
}

/// Every key of a small domain, on sets dense with tiny ranges and gaps: nothing escapes.
#[test]
fn exhaustive_small_domain() {
    let mut rng = 0x1234_5678_9abc_def0u64;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    for case in 0..12 {
        let parts: Vec<(u64, u64)> = (0..3000)
            .map(|_| {
                let g = if next(3) == 0 { 0 } else { next(if case % 2 == 0 { 4 } else { 40 }) };
                let l = if next(4) == 0 { next(200) } else { next(3) };
                (g, l)
            })
            .collect();
        let r = from_gaps(next(1000) as u32, &parts);
        let end = r.last().unwrap().1 + 50;
        for widths in [vec![1, 4], vec![1, 4, 16], vec![1, 2, 32]] {
            for (samples, sampling) in
                [(8, Sampling::Approximate), (4096, Sampling::Approximate), (64, Sampling::Uniform)]
            {
                let cfg = TrainConfig {
                    stage_widths: Some(widths.clone()),
                    samples,
                    seed: case,
                    sampling,
                    ..TrainConfig::default()
                };
                let m = RqRmi::train(&r, &cfg).unwrap();
                for k in 0..=end {
                    assert_eq!(
                        m.lookup(k),
                        truth(&r, k),
                        "case {case}, widths {widths:?}, samples {samples}, {sampling:?}, key {k}"
                    );
                }
            }
        }
    }
}

/// Wide ranges next to narrow ones, at both ends of the key space.
#[test]
fn extremes_of_the_key_space() {
    let sets: Vec<Vec<(u32, u32)>> = vec![
        vec![(0, u32::MAX)],
        vec![(0, 0), (1, u32::MAX - 1), (u32::MAX, u32::MAX)],
        vec![(5, 5), (1 << 31, 1 << 31)],
        (0..1000u32).map(|i| (i, i)).chain([(2000, u32::MAX)]).collect(),
        (0..1000u32).map(|i| (u32::MAX - 2000 + 2 * i, u32::MAX - 2000 + 2 * i)).collect(),
    ];
    for r in &sets {
        for samples in [2, 4096] {
            let cfg = TrainConfig { samples, ..TrainConfig::default() };
            check(r, &cfg, &[0, 1, u32::MAX, u32::MAX - 1, 1 << 31]).unwrap();
        }
    }
}

#[test]
fn bad_input_is_named() {
    use rqvs_rqrmi::TrainError;
    let cfg = TrainConfig::default();
    assert_eq!(RqRmi::<u32>::train(&[], &cfg).unwrap_err(), TrainError::Empty);
    assert_eq!(RqRmi::train(&[(0, 5), (9, 8)], &cfg).unwrap_err(), TrainError::Inverted { index: 1 });
    assert_eq!(RqRmi::train(&[(0, 5), (5, 8)], &cfg).unwrap_err(), TrainError::Overlap { index: 1 });
    assert_eq!(RqRmi::train(&[(10, 15), (0, 8), (20, 30)], &cfg).unwrap_err(), TrainError::Unsorted { index: 1 });
    let e = RqRmi::train(&[(0, 5)], &TrainConfig { stage_widths: Some(vec![2, 4]), ..cfg.clone() }).unwrap_err();
    assert!(matches!(e, TrainError::Config(_)), "{e}");
    assert_eq!(TrainError::Overlap { index: 7 }.to_string(), "range 7 overlaps range 6");
}
