//! The model loader's fuzz check (`model_file::fuzz_check`, the body of
//! `fuzz/fuzz_targets/model_loader.rs`) on its seeds and on deterministic mutations of them —
//! flipped bytes, overwritten words, cut and duplicated spans, in payloads whose header and
//! checksum stay valid — so every test run fuzzes the loader's body a little (a few thousand
//! inputs; `cargo +nightly fuzz run model_loader` runs it for longer).

use rqvs_classify::nuevomatch::model_file::{fuzz_check, fuzz_seeds, seal};
use rqvs_classify::NuevoMatchUp;

/// xorshift64*: a fixed sequence, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One mutation of `p`.
fn mutate(rng: &mut Rng, p: &[u8]) -> Vec<u8> {
    let mut m = p.to_vec();
    if m.is_empty() {
        return m;
    }
    match rng.below(5) {
        0 => {
            let i = rng.below(m.len());
            m[i] ^= 1 << rng.below(8);
        }
        1 => {
            // A word set to an interesting value: counts and lengths are u32.
            let i = rng.below(m.len().saturating_sub(4)) & !3;
            let v: u32 = [0, 1, 2, 255, 256, 257, 0xffff, u32::MAX, u32::MAX / 2][rng.below(9)];
            if i + 4 <= m.len() {
                m[i..i + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
        2 => {
            let i = rng.below(m.len());
            m.truncate(i);
        }
        3 => {
            let (a, n) = (rng.below(m.len()), 1 + rng.below(64));
            let span: Vec<u8> = m[a..(a + n).min(m.len())].to_vec();
            let at = rng.below(m.len());
            m.splice(at..at, span);
        }
        _ => {
            let (a, n) = (rng.below(m.len()), 1 + rng.below(16));
            m.drain(a..(a + n).min(m.len()));
        }
    }
    m
}

#[test]
fn seeds_load_and_round_trip() {
    let seeds = fuzz_seeds();
    assert!(seeds.len() >= 4, "every seed model builds");
    for s in &seeds {
        NuevoMatchUp::from_model_bytes(&seal(s)).expect("a seed is a valid model");
        fuzz_check(s);
    }
}

#[test]
fn mutated_seeds_never_panic_the_loader() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let (mut loaded, mut refused) = (0, 0);
    for s in fuzz_seeds() {
        let mut cur = s.clone();
        for i in 0..1500 {
            // Stacked mutations, restarting from the seed now and then.
            if i % 8 == 0 {
                cur = s.clone();
            }
            cur = mutate(&mut rng, &cur);
            fuzz_check(&cur);
            if NuevoMatchUp::from_model_bytes(&seal(&cur)).is_ok() {
                loaded += 1;
            } else {
                refused += 1;
            }
        }
    }
    // Both outcomes occur: the mutations reach past the header into checks that refuse, and
    // some (a changed action, port or prefix) still describe a valid model.
    assert!(refused > 0 && loaded > 0, "loaded {loaded}, refused {refused}");
}
