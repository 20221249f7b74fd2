//! Save/load: round trip, and every corruption gives a clear error, never a panic.

mod common;

use common::{probe_keys, range_set, truth};
use proptest::prelude::*;
use rqvs_rqrmi::{FormatError, RqRmi, TrainConfig};

fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 { 0xedb8_8320 ^ (c >> 1) } else { c >> 1 };
        }
    }
    !c
}

/// Rewrites the trailing checksum so that only the semantic checks can catch a change.
fn reseal(bytes: &mut [u8]) {
    let n = bytes.len() - 4;
    let c = crc32(&bytes[..n]);
    bytes[n..].copy_from_slice(&c.to_le_bytes());
}

fn sample_model() -> (Vec<(u32, u32)>, RqRmi) {
    let r: Vec<(u32, u32)> = (0..600u32).map(|i| (i * 1000 + (i % 7) * 13, i * 1000 + 500 + (i % 11) * 31)).collect();
    let cfg = TrainConfig { stage_widths: Some(vec![1, 4, 16]), ..TrainConfig::default() };
    let m = RqRmi::train(&r, &cfg).unwrap();
    (r, m)
}

/// Byte offset of the leaf bounds in the file of `m`.
fn bounds_offset(m: &RqRmi) -> usize {
    let stages = m.stage_widths().len();
    let subs: usize = m.stage_widths().iter().sum();
    28 + 4 * stages + 8 * m.len() + 27 * 8 * subs
}

#[test]
fn round_trip_is_identical() {
    let (r, m) = sample_model();
    let mut buf = Vec::new();
    m.save(&mut buf).unwrap();
    let l = RqRmi::<u32>::load(&mut buf.as_slice()).unwrap();
    assert_eq!(l.los(), m.los());
    assert_eq!(l.his(), m.his());
    assert_eq!(l.stage_widths(), m.stage_widths());
    for s in 0..m.stage_widths().len() {
        assert_eq!(l.stage(s), m.stage(s));
    }
    assert_eq!(l.leaf_bounds(), m.leaf_bounds());
    assert_eq!(l.stats(), m.stats());
    assert_eq!(l.max_error(), m.max_error());
    assert_eq!(l.mean_error(), m.mean_error());
    assert_eq!(l.to_bytes(), buf);
    for k in probe_keys(&r, &[]) {
        assert_eq!(l.lookup(k), truth(&r, k));
        assert_eq!(l.predict(k), m.predict(k));
    }
}

#[test]
fn every_truncation_is_an_error() {
    let (_, m) = sample_model();
    let buf = m.to_bytes();
    for len in 0..buf.len() {
        match RqRmi::<u32>::load(&mut &buf[..len]) {
            Err(FormatError::Truncated { needed, got }) => assert!(got < needed, "len {len}: {got} >= {needed}"),
            other => panic!("truncated to {len} of {}: {other:?}", buf.len()),
        }
    }
}

#[test]
fn every_bit_flip_is_an_error() {
    let (_, m) = sample_model();
    let buf = m.to_bytes();
    for i in 0..buf.len() {
        for bit in [0, 3, 7] {
            let mut b = buf.clone();
            b[i] ^= 1 << bit;
            let e = RqRmi::<u32>::load(&mut b.as_slice()).expect_err("a flipped bit was accepted");
            assert!(!e.to_string().is_empty());
        }
    }
}

#[test]
fn header_errors_are_named() {
    let (_, m) = sample_model();
    let buf = m.to_bytes();
    let mut b = buf.clone();
    b[0] = b'X';
    assert!(matches!(RqRmi::<u32>::load(&mut b.as_slice()), Err(FormatError::BadMagic)));
    let mut b = buf.clone();
    b[8] = 9;
    let e = RqRmi::<u32>::load(&mut b.as_slice()).unwrap_err();
    assert!(matches!(e, FormatError::UnsupportedVersion(9)), "{e}");
    assert_eq!(e.to_string(), "rqrmi model: format version 9 not supported (this build reads 1)");
    let mut b = buf.clone();
    b[12] = 64;
    assert!(matches!(RqRmi::<u32>::load(&mut b.as_slice()), Err(FormatError::KeyWidth { expected: 32, found: 64 })));
    let mut b = buf.clone();
    b[buf.len() - 10] ^= 0x40;
    let e = RqRmi::<u32>::load(&mut b.as_slice()).unwrap_err();
    assert!(matches!(e, FormatError::Checksum { .. }), "{e}");
    assert!(e.to_string().contains("checksum mismatch"), "{e}");
    // A huge announced range count on a short stream: truncated, without allocating it.
    let mut b = buf[..40].to_vec();
    b[16..24].copy_from_slice(&(u64::from(u32::MAX)).to_le_bytes());
    assert!(matches!(RqRmi::<u32>::load(&mut b.as_slice()), Err(FormatError::Truncated { .. })));
    assert!(matches!(RqRmi::<u32>::load(&mut &b"RQRMI"[..]), Err(FormatError::Truncated { .. })));
    assert!(matches!(RqRmi::<u32>::load(&mut &b"not a model at all, not at all"[..]), Err(FormatError::BadMagic)));
}

/// A file whose checksum is right but whose content lies is still rejected: the bounds are
/// recomputed from the parameters on load.
#[test]
fn resealed_tampering_is_caught() {
    let (_, m) = sample_model();
    let buf = m.to_bytes();
    let off = bounds_offset(&m);
    // Shrink leaf 0's upper bound by one.
    let mut b = buf.clone();
    let hi = i64::from_le_bytes(b[off + 8..off + 16].try_into().unwrap());
    b[off + 8..off + 16].copy_from_slice(&(hi - 1).to_le_bytes());
    reseal(&mut b);
    let e = RqRmi::<u32>::load(&mut b.as_slice()).unwrap_err();
    assert!(e.to_string().contains("leaf 0: stored error bound"), "{e}");
    // Make range 1 overlap range 0.
    let mut b = buf.clone();
    let base = 28 + 4 * m.stage_widths().len();
    let hi0 = u32::from_le_bytes(b[base + 4..base + 8].try_into().unwrap());
    b[base + 8..base + 12].copy_from_slice(&hi0.to_le_bytes());
    reseal(&mut b);
    let e = RqRmi::<u32>::load(&mut b.as_slice()).unwrap_err();
    assert_eq!(e.to_string(), "rqrmi model: invalid: range 1 overlaps range 0");
    // A NaN weight.
    let mut b = buf.clone();
    let w0 = base + 8 * m.len() + 16;
    b[w0..w0 + 8].copy_from_slice(&f64::NAN.to_bits().to_le_bytes());
    reseal(&mut b);
    let e = RqRmi::<u32>::load(&mut b.as_slice()).unwrap_err();
    assert!(e.to_string().contains("submodel 0: parameter not finite"), "{e}");
}

#[derive(Debug, Clone)]
enum Damage {
    Flip(usize, u8),
    Set(usize, u8),
    Truncate(usize),
    Insert(usize, u8),
    Remove(usize),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<usize>(), 1u8..).prop_map(|(i, x)| Damage::Flip(i, x)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, x)| Damage::Set(i, x)),
        any::<usize>().prop_map(Damage::Truncate),
        (any::<usize>(), any::<u8>()).prop_map(|(i, x)| Damage::Insert(i, x)),
        any::<usize>().prop_map(Damage::Remove),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Damaged files never panic; whatever loads is still exact on every probed key, with
    /// the checksum resealed (so the semantic checks are what stands between the damage and
    /// a wrong answer) or not.
    #[test]
    fn damaged_files_never_panic(r in range_set(60), dmg in proptest::collection::vec(damage(), 1..4), resealed in any::<bool>()) {
        let m = RqRmi::train(&r, &TrainConfig { stage_widths: Some(vec![1, 3]), ..TrainConfig::default() }).unwrap();
        let mut b = m.to_bytes();
        for d in &dmg {
            let n = b.len();
            match *d {
                Damage::Flip(i, x) => b[i % n] ^= x,
                Damage::Set(i, x) => b[i % n] = x,
                Damage::Truncate(i) => b.truncate(i % n),
                Damage::Insert(i, x) => b.insert(i % (n + 1), x),
                Damage::Remove(i) => { b.remove(i % n); }
            }
            if b.is_empty() { break; }
        }
        if resealed && b.len() >= 4 {
            reseal(&mut b);
        }
        if let Ok(l) = RqRmi::<u32>::load(&mut b.as_slice()) {
            let lr: Vec<(u32, u32)> = l.los().iter().copied().zip(l.his().iter().copied()).collect();
            for k in probe_keys(&lr, &[0, u32::MAX]) {
                prop_assert_eq!(l.lookup(k), truth(&lr, k));
            }
        }
    }
}
