//! Micro-benchmarks of every classifier on a real 10K ClassBench set (acl1_10k by default;
//! `RQVS_BENCH_SET=fw1_10k` picks another): lookup of one batch of 32 trace packets, one packet
//! at a time, and one update (remove a rule, insert it back).
//!
//! `cargo bench -p rqvs-classify` (needs `../shared/data/classbench` or `RQVS_CLASSBENCH_DIR`).
//! Whole-trace throughput with mismatch counts comes from `rqvs bench classifiers`.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use rqvs_classify::{build_by_name, CLASSIFIER_NAMES};
use rqvs_flow::formats::{classbench, trace};
use rqvs_flow::FlowKey;

fn data_dir() -> PathBuf {
    std::env::var_os("RQVS_CLASSBENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/classbench"))
}

fn benches(c: &mut Criterion) {
    let set = std::env::var("RQVS_BENCH_SET").unwrap_or_else(|_| "acl1_10k".into());
    let dir = data_dir();
    let (Ok(rules), Ok(trace)) = (
        classbench::read_rules(&dir.join("rules").join(format!("{set}.xz"))),
        trace::read_trace(&dir.join("traces").join(format!("{set}_trace.xz"))),
    ) else {
        eprintln!("skipped: ClassBench set {set} not found under {}", dir.display());
        return;
    };
    let keys: Vec<FlowKey> = trace.iter().map(|e| e.key).collect();
    for name in CLASSIFIER_NAMES {
        let mut classifier = build_by_name(name, &rules).expect("builds");
        let mut group = c.benchmark_group(format!("{name}/{set}"));
        let mut at = 0usize;
        let mut out = [None; 32];
        group.bench_function("lookup_batch32", |b| {
            b.iter(|| {
                at = (at + 32) % (keys.len() - 32);
                classifier.lookup_batch(black_box(&keys[at..at + 32]), &mut out);
                black_box(&out);
            })
        });
        group.bench_function("lookup_one", |b| {
            b.iter(|| {
                at = (at + 1) % keys.len();
                black_box(classifier.lookup(black_box(&keys[at])))
            })
        });
        let mut r = 0usize;
        group.bench_function("remove_insert", |b| {
            b.iter_batched(
                || {
                    r = (r + 7919) % rules.len();
                    rules[r].clone()
                },
                |rule| {
                    classifier.remove(rule.id).expect("present");
                    classifier.insert(rule).expect("absent");
                },
                BatchSize::SmallInput,
            )
        });
        group.finish();
    }
}

criterion_group!(name = classify; config = Criterion::default().sample_size(20); targets = benches);
criterion_main!(classify);
