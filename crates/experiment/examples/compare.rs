//! What `rqvs compare` runs, as library calls: the embedded ClassBench acl1 workload (927 rules,
//! 9,328 packets) through ORIG, CCACHE and CFLOWS, every sampled packet verified against the
//! reference classifier.
//!
//! `cargo run --release -p rqvs-experiment --example compare`

use rqvs_experiment::{prepare, run_design, DesignKind, ReplayConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cfg = ReplayConfig::default(); // no files: the embedded default workload
    let prepared = prepare(&cfg)?;
    for design in [DesignKind::Orig, DesignKind::Ccache, DesignKind::Cflows] {
        let run = run_design(&cfg, &prepared, design)?;
        println!(
            "{:7} {:6.2} Mpps, {} packets verified, {} mismatches",
            design.name(),
            run.mpps,
            run.verified,
            run.mismatches
        );
        if run.mismatches != 0 {
            return Err(format!("{}: mismatches against the reference", design.name()).into());
        }
    }
    Ok(())
}
