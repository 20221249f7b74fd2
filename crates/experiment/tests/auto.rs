//! `--design auto` through the replay: the verification against the reference at each design's
//! epoch window finds 0 mismatches through design switches (forced by thresholds that always
//! want to leave) and timed rule changes, on the embedded set and on real ClassBench sets.

use rqvs_classify::nuevomatch::live::Policy;
use rqvs_experiment::replay::{self, Run};
use rqvs_experiment::{DesignKind, ReplayConfig};

/// Thresholds that leave every design as soon as the dwell allows (ORIG/CCACHE → CFLOWS on
/// any window, CFLOWS → ORIG on any window), with short windows and dwell.
fn flapping(c: &mut ReplayConfig, initial: DesignKind) {
    c.auto = rqvs_datapath::AutoConfig {
        initial: Some(initial),
        window_ns: 2_000_000,
        min_window_packets: 64,
        min_dwell_ns: 5_000_000,
        to_cflows_upcall_share: 0.0,
        leave_cflows_coverage: 2.0,
        leave_cflows_emc_share: 0.0,
        // A new ORIG preinstalls the recent flows on the builder thread (~20-50 µs each here):
        // a few hundred keep the candidate ready within the short runs.
        warm_keys: 256,
        ..rqvs_datapath::AutoConfig::default()
    };
}

fn check(r: &Run, what: &str, min_verified: usize, min_switches: u64) {
    assert_eq!(r.mismatches, 0, "{what}: {:?}", r.first_mismatch);
    assert!(r.verified >= min_verified, "{what}: {} verified", r.verified);
    assert!(r.c.outcome_sum_ok(), "{what}: {:?}", r.c);
    let a = r.auto.as_ref().expect("auto reports");
    assert!(a.design_switches >= min_switches, "{what}: {a:?}");
    let total: u64 = a.time_ns.iter().sum();
    assert_eq!(total, r.c.pmd_ns, "{what}: time per design adds up to the PMD time");
}

#[test]
fn switches_on_the_embedded_set_with_updates() {
    for (policy, initial) in [
        (Policy::Instant, DesignKind::Orig),
        (Policy::Delayed, DesignKind::Cflows),
        (Policy::Instant, DesignKind::Ccache),
    ] {
        let mut c = ReplayConfig {
            duration: Some(0.15),
            updates: Some("add:60@20ms,del:30@50ms,add:40@80ms".into()),
            policy,
            train_interval: 0.002,
            ..ReplayConfig::default()
        };
        flapping(&mut c, initial);
        let p = replay::prepare(&c).unwrap();
        let r = replay::run_design(&c, &p, DesignKind::Auto).unwrap();
        check(&r, &format!("{policy:?} from {initial:?}"), 500, 2);
        assert_eq!(r.updates_not_reached, 0);
    }
}

#[test]
fn switches_on_classbench_sets() {
    let Some(dir) = rqvs_testkit::data::classbench_dir() else { return };
    for (seed, size) in [("fw1", "1k"), ("ipc1", "10k"), ("acl2", "10k")] {
        let mut c = ReplayConfig {
            rules: Some(rqvs_testkit::data::rules_path(&dir, seed, size)),
            trace: Some(rqvs_testkit::data::trace_path(&dir, seed, size)),
            updates: Some("add:50@10ms,del:20@30ms".into()),
            verify: Some(3000),
            duration: Some(0.3),
            emc_prob: 0.2,
            ..ReplayConfig::default()
        };
        flapping(&mut c, DesignKind::Orig);
        let p = replay::prepare(&c).unwrap();
        let r = replay::run_design(&c, &p, DesignKind::Auto).unwrap();
        check(&r, &format!("{seed}_{size}"), 100, 1);
    }
}
