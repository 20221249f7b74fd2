//! Every kernel this CPU has agrees with the scalar truth bit for bit: submodel outputs (f64
//! bits) and lookup indexes. The tests print the kernels they ran; `RQVS_REQUIRE_KERNELS=avx2,avx512`
//! makes them fail on a CPU that lacks one of those (CI on a known machine insists).

mod common;

use common::{probe_keys, range_set, truth};
use proptest::prelude::*;
use rqvs_rqrmi::{Kernel, RqRmi, SubModel, TrainConfig, HIDDEN};

/// The SIMD kernels to compare with the scalar one: all this CPU has (checked against
/// `RQVS_REQUIRE_KERNELS`), printed.
fn simd_kernels() -> Vec<Kernel> {
    if let Ok(req) = std::env::var("RQVS_REQUIRE_KERNELS") {
        for name in req.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let k = Kernel::from_name(name).unwrap_or_else(|| panic!("RQVS_REQUIRE_KERNELS: unknown kernel '{name}'"));
            assert!(k.is_available(), "RQVS_REQUIRE_KERNELS names {name}, which this CPU lacks");
        }
    }
    let ks: Vec<Kernel> = Kernel::available().into_iter().filter(|&k| k != Kernel::Scalar).collect();
    eprintln!("SIMD kernels compared with scalar on this CPU: {:?}", ks);
    ks
}

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
        for kernel in simd_kernels() {
            for &k in &keys {
                let x = f64::from(k);
                let s = m.eval(x);
                let v = m.eval_with(kernel, x).unwrap();
                prop_assert_eq!(s.to_bits(), v.to_bits(), "key {}: scalar {} {:?} {}", k, s, kernel, v);
            }
        }
    }
}

/// Pre-activations exactly zero and negative output weights: the `max(z, 0)` and signed-zero
/// corner, where a different `max` or a fused multiply-add would show.
#[test]
fn signed_zero_corner() {
    for kernel in simd_kernels() {
        signed_zero_corner_with(kernel);
    }
}

fn signed_zero_corner_with(kernel: Kernel) {
    for k in [0u32, 1, 12345, 1 << 31, u32::MAX] {
        let x = f64::from(k);
        let mean = 1000.5;
        let inv_std = 0.001;
        let xn = (x - mean) * inv_std;
        let mut m = SubModel { mean, inv_std, w: [1.0; HIDDEN], b: [-xn; HIDDEN], v: [-1.0; HIDDEN], b2: -0.0 };
        m.b[3] = -xn + 1e-300;
        m.v[5] = 3.0;
        assert_eq!(m.eval(x).to_bits(), m.eval_with(kernel, x).unwrap().to_bits(), "key {k}");
    }
    // Keys where x*w + b rounded twice differs from a fused multiply-add: an AVX2 path
    // that used FMA would disagree with the scalar truth here.
    let m2 = SubModel { mean: 0.1, inv_std: 1.0 / 3.0, w: [0.1; HIDDEN], b: [0.7; HIDDEN], v: [1.0; HIDDEN], b2: 0.0 };
    let mut found = 0;
    for k in 0u32..20_000 {
        let x = (f64::from(k) - m2.mean) * m2.inv_std;
        if x.mul_add(m2.w[0], m2.b[0]) != x * m2.w[0] + m2.b[0] {
            found += 1;
            assert_eq!(
                m2.eval(f64::from(k)).to_bits(),
                m2.eval_with(kernel, f64::from(k)).unwrap().to_bits(),
                "key {k}"
            );
        }
    }
    assert!(found > 100, "only {found} keys where FMA differs");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Batch lookups by every kernel equal scalar batch and single-key lookups, which equal
    /// the truth.
    #[test]
    fn lookup_paths_agree(r in range_set(2000), extra in proptest::collection::vec(any::<u32>(), 100), seed in any::<u64>()) {
        let m = RqRmi::train(&r, &TrainConfig { seed, ..TrainConfig::default() }).unwrap();
        let keys = probe_keys(&r, &extra);
        let mut s = vec![Some(usize::MAX); keys.len()];
        m.lookup_batch_with(Kernel::Scalar, &keys, &mut s).unwrap();
        for kernel in simd_kernels() {
            let mut a = vec![Some(usize::MAX - 1); keys.len()];
            m.lookup_batch_with(kernel, &keys, &mut a).unwrap();
            prop_assert_eq!(&a, &s, "{:?}", kernel);
        }
        let mut a = vec![None; keys.len()];
        m.lookup_batch(&keys, &mut a);
        for (i, &k) in keys.iter().enumerate() {
            prop_assert_eq!(a[i], s[i], "key {}", k);
            prop_assert_eq!(s[i], m.lookup(k), "key {}", k);
            prop_assert_eq!(s[i], truth(&r, k), "key {}", k);
        }
    }
}

#[test]
fn unavailable_kernels_are_errors_and_names_round_trip() {
    for k in Kernel::ALL {
        assert_eq!(Kernel::from_name(k.name()), Some(k));
        let m = SubModel { mean: 0.0, inv_std: 1.0, w: [1.0; HIDDEN], b: [0.0; HIDDEN], v: [1.0; HIDDEN], b2: 0.0 };
        match m.eval_with(k, 3.0) {
            Ok(y) => assert!(k.is_available() && y == m.eval(3.0)),
            Err(e) => assert!(!k.is_available() && e.to_string().contains(k.name()), "{e}"),
        }
    }
    assert!(Kernel::available().contains(&Kernel::Scalar));
    assert!(Kernel::best().is_available() && Kernel::active().is_available());
}
