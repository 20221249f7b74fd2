//! The C API's overhead on batch classification, in one process so that both sides see the
//! same machine load: rounds alternate between the `rqvs classify` loop (the classifier built
//! by `rqvs_classify::build`, `lookup_batch` in batches of 32 over the whole trace) and one
//! `rqvs_classify_batch` call over the same keys through the exported C symbols (declared here
//! as C declares them, so nothing is inlined across the boundary). Prints each round's Mpps,
//! the medians and their ratio, and checks that both give the same ids.
//!
//! ```sh
//! cargo run --release -p rqvs-capi --example overhead -- RULES TRACE [KIND] [ROUNDS]
//! ```
//! (`examples/c/bench.c` is the same measurement from a C program.)

use std::ffi::CString;
use std::os::raw::{c_char, c_int};
use std::path::Path;
use std::time::Instant;

use rqvs::types::rqvs_key;
use rqvs_classify::BATCH;
use rqvs_flow::RuleId;

/// `rqvs_classifier` and `rqvs_error`, opaque as C sees them.
type Opaque = std::ffi::c_void;

extern "C" {
    fn rqvs_classifier_from_file(path: *const c_char, kind: *const c_char, err: *mut *mut Opaque) -> *mut Opaque;
    fn rqvs_classify_batch(c: *const Opaque, keys: *const rqvs_key, n: usize, ids: *mut i64) -> c_int;
    fn rqvs_classifier_free(c: *mut Opaque);
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: overhead RULES TRACE [KIND] [ROUNDS]");
        std::process::exit(2);
    }
    let kind = args.get(3).map_or("nmu", String::as_str);
    let rounds: usize = args.get(4).and_then(|r| r.parse().ok()).unwrap_or(9);
    let rules = rqvs_flow::formats::read_rules(Path::new(&args[1])).unwrap_or_else(|e| panic!("{e}"));
    let keys: Vec<_> = rqvs_experiment::inputs::load_packets(Some(Path::new(&args[2])), 1)
        .unwrap_or_else(|e| panic!("{e}"))
        .entries
        .iter()
        .map(|e| e.key)
        .collect();
    let c_keys: Vec<rqvs_key> = keys.iter().map(rqvs_key::from).collect();

    let rust = rqvs_classify::build_by_name(kind, &rules).unwrap_or_else(|e| panic!("{e}"));
    let (path, kind_c) = (CString::new(args[1].as_str()).unwrap(), CString::new(kind).unwrap());
    // SAFETY: two NUL-terminated strings; NULL for the error (allowed).
    let handle = unsafe { rqvs_classifier_from_file(path.as_ptr(), kind_c.as_ptr(), std::ptr::null_mut()) };
    assert!(!handle.is_null(), "the C API could not build {kind} over {}", args[1]);

    let mut results: Vec<Option<RuleId>> = vec![None; keys.len()];
    let mut ids: Vec<i64> = vec![0; keys.len()];
    let (mut rust_mpps, mut c_mpps) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        let t = Instant::now();
        for (k, r) in keys.chunks(BATCH).zip(results.chunks_mut(BATCH)) {
            rust.lookup_batch(k, r);
        }
        rust_mpps.push(keys.len() as f64 / t.elapsed().as_secs_f64() / 1e6);
        let t = Instant::now();
        // SAFETY: a live handle, `n` keys and `n` writable ids, nothing else using them.
        let rc = unsafe { rqvs_classify_batch(handle, c_keys.as_ptr(), c_keys.len(), ids.as_mut_ptr()) };
        c_mpps.push(keys.len() as f64 / t.elapsed().as_secs_f64() / 1e6);
        assert_eq!(rc, 0);
        println!("round {round}: Rust {:.3} Mpps, C API {:.3} Mpps", rust_mpps[round - 1], c_mpps[round - 1]);
    }
    let same = results.iter().zip(&ids).all(|(r, &i)| r.map_or(-1, |id| i64::from(id.0)) == i);
    assert!(same, "the C API and the Rust classifier gave different ids");
    // SAFETY: the handle from `rqvs_classifier_from_file`, freed once.
    unsafe { rqvs_classifier_free(handle) };
    let (r, c) = (median(&mut rust_mpps), median(&mut c_mpps));
    println!(
        "{kind} over {} rules, {} packets: median Rust {r:.3} Mpps, C API {c:.3} Mpps: C/Rust = {:.3} (same ids)",
        rules.len(),
        keys.len(),
        c / r
    );
}
