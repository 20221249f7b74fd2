//! Micro-benchmarks: training time and lookup ns/key (scalar vs AVX2) on random range sets.
//! `cargo bench -p rqvs-rqrmi` (seeded; the seed is in the benchmark name).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use rand::{rngs::StdRng, RngExt, SeedableRng};
use rqvs_rqrmi::{RqRmi, TrainConfig};

const SEED: u64 = 42;

/// `n` disjoint ranges spread over the 32-bit space, widths and gaps random.
fn ranges(n: usize, seed: u64) -> Vec<(u32, u32)> {
    let mut rng = StdRng::seed_from_u64(seed);
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

fn keys(r: &[(u32, u32)], count: usize, seed: u64) -> Vec<u32> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..count)
        .map(|_| {
            let (lo, hi) = r[rng.random_range(0..r.len())];
            rng.random_range(lo..=hi)
        })
        .collect()
}

fn bench_train(c: &mut Criterion) {
    let mut g = c.benchmark_group("train");
    g.sample_size(10);
    for n in [1_000usize, 10_000, 100_000, 500_000] {
        let r = ranges(n, SEED);
        g.bench_function(format!("random_{n}_seed{SEED}"), |b| {
            b.iter_batched(|| (), |_| RqRmi::train(&r, &TrainConfig::default()).unwrap(), BatchSize::PerIteration)
        });
    }
    g.finish();
}

fn bench_lookup(c: &mut Criterion) {
    let mut g = c.benchmark_group("lookup");
    for n in [10_000usize, 500_000] {
        let r = ranges(n, SEED);
        let m = RqRmi::train(&r, &TrainConfig::default()).unwrap();
        let ks = keys(&r, 4096, SEED + 1);
        let mut out = vec![None; ks.len()];
        g.throughput(Throughput::Elements(ks.len() as u64));
        g.bench_function(format!("scalar_single_{n}"), |b| {
            b.iter(|| ks.iter().map(|&k| m.lookup(k).unwrap_or(0)).sum::<usize>())
        });
        for k in rqvs_rqrmi::Kernel::available() {
            g.bench_function(format!("{}_batch_{n}", k.name()), |b| {
                b.iter(|| m.lookup_batch_with(k, &ks, &mut out).unwrap())
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench_train, bench_lookup);
criterion_main!(benches);
