//! Training and lookup figures for the rqrmi layer on generated range sets.
//!
//! `cargo run -p rqvs-rqrmi --release --example measure [-- SEED]`
//!
//! Prints, per set: ranges, stage widths, training ms, sessions, max and mean error bound,
//! memory, and lookup ns/key for the scalar single-key path, the scalar batch path and the
//! AVX2 batch path (measured in the same run, so compare them as ratios), with the number of
//! lookups that disagree with a brute-force search (must be 0).

use std::hint::black_box;
use std::time::Instant;

use rand::{rngs::StdRng, RngExt, SeedableRng};
use rqvs_rqrmi::Kernel;
use rqvs_rqrmi::{RqRmi, TrainConfig};

/// `n` disjoint ranges spread over the 32-bit space, random widths and gaps.
fn random_ranges(n: usize, rng: &mut StdRng) -> Vec<(u32, u32)> {
    let span = (u64::from(u32::MAX) / n as u64).max(2);
    let mut out = Vec::with_capacity(n);
    let mut at = 0u64;
    for _ in 0..n {
        let lo = at + rng.random_range(0..span / 2);
        let hi = lo + rng.random_range(0..span / 2);
        out.push((lo as u32, hi as u32));
        at = hi + 1;
    }
    out
}

/// About `n` disjoint ranges from distinct /24../32 prefixes clustered in random /16 blocks
/// (as routing tables and ACLs are): prefixes contained in an earlier one are dropped.
fn prefix_ranges(n: usize, rng: &mut StdRng) -> Vec<(u32, u32)> {
    let blocks: Vec<u32> = (0..(n / 64).max(1)).map(|_| rng.random::<u32>() & 0xffff_0000).collect();
    let mut ps: Vec<(u32, u32)> = (0..n + n / 4)
        .map(|_| {
            let len = rng.random_range(24..=32u32);
            let base = blocks[rng.random_range(0..blocks.len())] | (rng.random::<u32>() & 0xffff);
            let mask = if len == 32 { u32::MAX } else { !(u32::MAX >> len) };
            let lo = base & mask;
            (lo, lo | !mask)
        })
        .collect();
    ps.sort_unstable();
    let mut out: Vec<(u32, u32)> = Vec::with_capacity(n);
    for p in ps {
        if out.last().is_none_or(|l| p.0 > l.1) {
            out.push(p);
        }
    }
    out.truncate(n);
    out
}

fn truth(r: &[(u32, u32)], k: u32) -> Option<usize> {
    let p = r.partition_point(|&(lo, _)| lo <= k);
    (p > 0 && k <= r[p - 1].1).then(|| p - 1)
}

fn ns_per_key(reps: usize, keys: usize, mut f: impl FnMut()) -> f64 {
    f();
    let t = Instant::now();
    for _ in 0..reps {
        f();
    }
    t.elapsed().as_nanos() as f64 / (reps * keys) as f64
}

/// Training time, error and AVX2 lookup time of several stage widths on the same sets.
fn widths_table(seed: u64) {
    println!("\nstage widths (same sets; paper Table 1 categories first)");
    println!(
        "{:<8} {:>7} {:<14} {:>8} {:>6} {:>7} {:>9} {:>8}",
        "set", "ranges", "widths", "train_ms", "maxerr", "meanerr", "memory", "ns_avx2"
    );
    for kind in ["random", "prefix"] {
        for n in [100_000usize, 500_000] {
            let mut rng = StdRng::seed_from_u64(seed ^ n as u64);
            let r = if kind == "random" { random_ranges(n, &mut rng) } else { prefix_ranges(n, &mut rng) };
            let keys: Vec<u32> = (0..1 << 16)
                .map(|_| {
                    let (lo, hi) = r[rng.random_range(0..r.len())];
                    rng.random_range(lo..=hi)
                })
                .collect();
            let mut out = vec![None; keys.len()];
            for w in [
                vec![1, 4, 128],
                vec![1, 8, 256],
                vec![1, 8, 512],
                vec![1, 16, 1024],
                vec![1, 16, 4096],
                vec![1, 4, 32, 512],
            ] {
                let cfg = TrainConfig { stage_widths: Some(w.clone()), seed, ..TrainConfig::default() };
                let m = RqRmi::train(&r, &cfg).expect("train");
                let ns = ns_per_key(20, keys.len(), || m.lookup_batch(black_box(&keys), &mut out));
                println!(
                    "{:<8} {:>7} {:<14} {:>8.1} {:>6} {:>7.1} {:>9} {:>8.1}",
                    kind,
                    r.len(),
                    format!("{w:?}").replace(' ', ""),
                    m.stats().train_ms,
                    m.max_error(),
                    m.mean_error(),
                    m.memory_bytes(),
                    ns
                );
            }
        }
    }
}

fn main() {
    let seed: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let kernels: Vec<String> = Kernel::available().iter().map(|k| k.name().to_string()).collect();
    println!("seed {seed}, kernels {}", kernels.join(","));
    println!(
        "{:<8} {:>7} {:<12} {:>8} {:>4} {:>6} {:>7} {:>9} {:>8} {:>9} {:>8} {:>9} {:>6}",
        "set",
        "ranges",
        "widths",
        "train_ms",
        "sess",
        "maxerr",
        "meanerr",
        "memory",
        "ns_one",
        "ns_scalar",
        "ns_avx2",
        "ns_avx512",
        "wrong"
    );
    for kind in ["random", "prefix"] {
        for n in [1_000usize, 10_000, 100_000, 500_000] {
            let mut rng = StdRng::seed_from_u64(seed ^ n as u64);
            let r = if kind == "random" { random_ranges(n, &mut rng) } else { prefix_ranges(n, &mut rng) };
            let m = RqRmi::train(&r, &TrainConfig { seed, ..TrainConfig::default() }).expect("train");
            let mut keys: Vec<u32> = (0..1 << 16)
                .map(|_| {
                    let (lo, hi) = r[rng.random_range(0..r.len())];
                    rng.random_range(lo..=hi)
                })
                .collect();
            keys.extend((0..1 << 12).map(|_| rng.random::<u32>()));
            let mut out = vec![None; keys.len()];
            let mut wrong = 0;
            for k in Kernel::available() {
                m.lookup_batch_with(k, &keys, &mut out).expect("available");
                for (key, o) in keys.iter().zip(&out) {
                    wrong += usize::from(*o != truth(&r, *key));
                }
            }
            for &key in &keys {
                wrong += usize::from(m.lookup(key) != truth(&r, key));
            }
            let reps = 20;
            let one = ns_per_key(reps, keys.len(), || {
                for &k in &keys {
                    black_box(m.lookup(black_box(k)));
                }
            });
            let mut per_kernel = |k: Kernel| {
                if !k.is_available() {
                    return "-".to_string();
                }
                let ns = ns_per_key(reps, keys.len(), || {
                    m.lookup_batch_with(k, black_box(&keys), &mut out).expect("available")
                });
                format!("{ns:.1}")
            };
            let (scalar, avx2, avx512) =
                (per_kernel(Kernel::Scalar), per_kernel(Kernel::Avx2), per_kernel(Kernel::Avx512));
            let s = m.stats();
            println!(
                "{:<8} {:>7} {:<12} {:>8.1} {:>4} {:>6} {:>7.1} {:>9} {:>8.1} {:>9} {:>8} {:>9} {:>6}",
                kind,
                r.len(),
                format!("{:?}", m.stage_widths()).replace(' ', ""),
                s.train_ms,
                s.sessions,
                m.max_error(),
                m.mean_error(),
                m.memory_bytes(),
                one,
                scalar,
                avx2,
                avx512,
                wrong
            );
        }
    }
    widths_table(seed);
}
