//! Locating the shared ClassBench data (`../shared/data/classbench` beside the checkout).
//!
//! Tests that need it skip with a message when it is absent, unless `RQVS_REQUIRE_DATA=1` (set
//! by `.ci/run`), in which case its absence is a failure.

use std::path::PathBuf;

pub const SEEDS: [&str; 12] =
    ["acl1", "acl2", "acl3", "acl4", "acl5", "fw1", "fw2", "fw3", "fw4", "fw5", "ipc1", "ipc2"];

/// The ClassBench data directory, or `None` (after printing why) when the test should skip.
pub fn classbench_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("RQVS_CLASSBENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/classbench"));
    if dir.join("rules").is_dir() {
        return Some(dir);
    }
    if std::env::var("RQVS_REQUIRE_DATA").as_deref() == Ok("1") {
        panic!("RQVS_REQUIRE_DATA=1 but the ClassBench data is not at {}", dir.display());
    }
    eprintln!("skipped: ClassBench data not found at {} (set RQVS_CLASSBENCH_DIR)", dir.display());
    None
}

/// `rules/<seed>_<size>.xz`
pub fn rules_path(dir: &std::path::Path, seed: &str, size: &str) -> PathBuf {
    dir.join("rules").join(format!("{seed}_{size}.xz"))
}

/// `traces/<seed>_<size>_trace.xz`
pub fn trace_path(dir: &std::path::Path, seed: &str, size: &str) -> PathBuf {
    dir.join("traces").join(format!("{seed}_{size}_trace.xz"))
}
