//! The AVX2 path agrees with the scalar truth bit for bit: submodel outputs (f64 bits) and
//! lookup indexes. Skipped (with a message) on CPUs without AVX2.

mod common;

use common::{probe_keys, range_set, truth};
use proptest::prelude::*;
use rqvs_rqrmi::{RqRmi, SubModel, TrainConfig, HIDDEN};

fn param() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(-0.0),
        -1.0f64..1.0,
        -1e6f64..1e6,
        (-40i32..40, -1.0f64..1.0).prop_map(|(e, m)| m * 2f64.powi(e)),
    ]
}

fn submodel() -> impl Strategy<Value = SubModel> {
    (
        0.0f64..4.3e9,
        (1e-10f64..1.0),
        proptest::array::uniform8(param()),
        proptest::array::uniform8(param()),
        proptest::array::uniform8(param()),
        param(),
    )
        .prop_map(|(mean, inv_std, w, b, v, b2)| SubModel { mean, inv_std, w, b, v, b2 })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn eval_bits_agree(m in submodel(), keys in proptest::collection::vec(any::<u32>(), 16)) {
        if !rqvs_rqrmi::simd_available() {
            return Ok(());
        }
        for k in keys {
            let x = f64::from(k);
            let s = m.eval(x);
            let v = m.eval_avx2(x).unwrap();
            prop_assert_eq!(s.to_bits(), v.to_bits(), "key {}: scalar {} avx2 {}", k, s, v);
        }
    }
}

/// Pre-activations exactly zero and negative output weights: the `max(z, 0)` and signed-zero
/// corner, where a different `max` or a fused multiply-add would show.
#[test]
fn signed_zero_corner() {
    if !rqvs_rqrmi::simd_available() {
        eprintln!("no AVX2 on this CPU: skipped");
        return;
    }
    for k in [0u32, 1, 12345, 1 << 31, u32::MAX] {
        let x = f64::from(k);
        let mean = 1000.5;
        let inv_std = 0.001;
        let xn = (x - mean) * inv_std;
        let mut m = SubModel { mean, inv_std, w: [1.0; HIDDEN], b: [-xn; HIDDEN], v: [-1.0; HIDDEN], b2: -0.0 };
        m.b[3] = -xn + 1e-300;
        m.v[5] = 3.0;
        assert_eq!(m.eval(x).to_bits(), m.eval_avx2(x).unwrap().to_bits(), "key {k}");
    }
    // Keys where x*w + b rounded twice differs from a fused multiply-add: an AVX2 path
    // that used FMA would disagree with the scalar truth here.
    let m2 = SubModel { mean: 0.1, inv_std: 1.0 / 3.0, w: [0.1; HIDDEN], b: [0.7; HIDDEN], v: [1.0; HIDDEN], b2: 0.0 };
    let mut found = 0;
    for k in 0u32..20_000 {
        let x = (f64::from(k) - m2.mean) * m2.inv_std;
        if x.mul_add(m2.w[0], m2.b[0]) != x * m2.w[0] + m2.b[0] {
            found += 1;
            assert_eq!(m2.eval(f64::from(k)).to_bits(), m2.eval_avx2(f64::from(k)).unwrap().to_bits(), "key {k}");
        }
    }
    assert!(found > 100, "only {found} keys where FMA differs");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Batch lookups (AVX2 when available) equal scalar batch and single-key lookups, which
    /// equal the truth.
    #[test]
    fn lookup_paths_agree(r in range_set(2000), extra in proptest::collection::vec(any::<u32>(), 100), seed in any::<u64>()) {
        let m = RqRmi::train(&r, &TrainConfig { seed, ..TrainConfig::default() }).unwrap();
        let keys = probe_keys(&r, &extra);
        let mut a = vec![None; keys.len()];
        let mut s = vec![Some(usize::MAX); keys.len()];
        m.lookup_batch(&keys, &mut a);
        m.lookup_batch_scalar(&keys, &mut s);
        for (i, &k) in keys.iter().enumerate() {
            prop_assert_eq!(a[i], s[i], "key {}", k);
            prop_assert_eq!(s[i], m.lookup(k), "key {}", k);
            prop_assert_eq!(s[i], truth(&r, k), "key {}", k);
        }
    }
}
