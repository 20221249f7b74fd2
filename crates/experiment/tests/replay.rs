//! Replay and compare as library calls (no command line, no stdout): every design gives the
//! reference's action on the sampled packets of the embedded acl1_1k workload, also while rules
//! are added and removed under both update policies and both revalidator modes; the counters
//! sum; the constant-rate ring accounts for every packet; the rate search finds a rate.

use rqvs_classify::nuevomatch::live::Policy;
use rqvs_datapath::revalidator::RevalidatorMode;
use rqvs_experiment::replay::{self, Run};
use rqvs_experiment::{DesignKind, ReplayConfig};

/// The embedded workload (`rules`/`trace` `None`), with `f` applied.
fn config(f: impl FnOnce(&mut ReplayConfig)) -> ReplayConfig {
    let mut c = ReplayConfig::default();
    f(&mut c);
    c
}

fn check(r: &Run) {
    let d = r.design.name();
    assert_eq!(r.mismatches, 0, "{d}: {:?}", r.first_mismatch);
    assert!(r.verified > 500, "{d}: {} verified", r.verified);
    assert!(r.c.outcome_sum_ok(), "{d}: outcomes sum to packets received: {:?}", r.c);
}

fn run(c: &ReplayConfig, d: DesignKind) -> Run {
    let p = replay::prepare(c).unwrap();
    replay::run_design(c, &p, d).unwrap()
}

#[test]
fn every_design_on_the_same_packets() {
    let c = config(|c| {
        c.duration = Some(0.2);
        c.train_interval = 0.005;
    });
    let p = replay::prepare(&c).unwrap();
    let runs: Vec<Run> = DesignKind::ALL.iter().map(|&d| replay::run_design(&c, &p, d).unwrap()).collect();
    for r in &runs {
        check(r);
    }
    assert_eq!(runs[0].c.model_hit, 0);
    assert!(runs[1].c.model_hit > 0, "ccache's model served packets");
    assert!(runs[2].c.model_hit > 0, "cflows' model served packets");
    assert_eq!(runs[2].c.upcall, 0, "cflows has no upcalls");
    assert!(runs[1].report.coverage().is_some() && runs[0].report.coverage().is_none());
}

#[test]
fn cflows_updates_under_both_policies_keep_every_action_right() {
    for policy in [Policy::Instant, Policy::Delayed] {
        let c = config(|c| {
            c.policy = policy;
            c.duration = Some(0.05);
            c.updates = Some("add:150@5ms,del:100@10ms,add:50@20ms".into());
        });
        let r = run(&c, DesignKind::Cflows);
        check(&r);
        assert_eq!(r.update_log.len(), 3, "{policy:?}");
        if policy == Policy::Instant {
            for u in &r.update_log {
                let (call, visible) = (u["update_ms"].as_f64().unwrap(), u["visible_ms"].as_f64().unwrap());
                assert!(visible >= call, "visible once the call returned: {u}");
            }
        }
    }
}

#[test]
fn ccache_with_updates_keeps_every_action_right() {
    let c = config(|c| {
        c.duration = Some(0.05);
        c.train_interval = 0.005;
        c.updates = Some("add:60@10ms,del:30@20ms".into());
    });
    check(&run(&c, DesignKind::Ccache));
}

#[test]
fn orig_updates_with_the_revalidator_thread_or_inline_keep_every_action_right() {
    let mut deleted = Vec::new();
    for mode in [RevalidatorMode::Thread, RevalidatorMode::Inline] {
        let c = config(|c| {
            c.revalidator = mode;
            c.emc_prob = 0.2;
            c.duration = Some(0.4);
            c.updates = Some("add:60@50ms,del:100@100ms,add:40@150ms".into());
        });
        let r = run(&c, DesignKind::Orig);
        check(&r);
        assert_eq!(r.update_log.len(), 3, "{mode:?}");
        for u in &r.update_log {
            let done =
                u["revalidated_ms"].as_f64().unwrap_or_else(|| panic!("{mode:?}: revalidated within 0.25 s: {u}"));
            if mode == RevalidatorMode::Inline {
                assert_eq!(done, u["update_ms"].as_f64().unwrap(), "inline: in the call: {u}");
            } else {
                assert!(u["revalidator_thread_ms"].as_f64().is_some(), "{u}");
            }
        }
        let d: u64 = r.update_log.iter().map(|u| u["megaflows_deleted"].as_u64().unwrap()).sum();
        assert_eq!(d, r.c.deleted_revalidated, "{mode:?}");
        deleted.push(d);
    }
    assert!(deleted.iter().all(|&d| d > 0), "both modes delete megaflows: {deleted:?}");
}

#[test]
fn constant_rate_counts_ring_drops_and_the_search_finds_a_rate() {
    let at = |rate: f64| {
        let c = config(|c| {
            c.passes = 3;
            c.rate = Some(rate);
        });
        run(&c, DesignKind::Orig)
    };
    // Far below what the PMD takes: nothing dropped, every offered packet processed.
    let slow = at(10_000.0);
    check(&slow);
    let rx = slow.rx.unwrap();
    assert_eq!((rx.dropped, slow.c.received), (0, rx.offered));
    // Far above: the ring overflows; processed + dropped = offered.
    let fast = at(1e9);
    check(&fast);
    let rx = fast.rx.unwrap();
    assert!(rx.dropped > rx.offered / 2, "{} of {}", rx.dropped, rx.offered);
    assert_eq!(fast.c.received + rx.dropped, rx.offered);
    assert!(rx.drop_rate() > 0.5);

    let c = ReplayConfig::default();
    let p = replay::prepare(&c).unwrap();
    let mut probes = 0;
    let s = replay::rate_search(&c, &p, DesignKind::Cflows, None, &mut |_, _| probes += 1).unwrap();
    assert!(s.passed && probes >= 2);
    let (rate, best) = &s.probe;
    assert!(*rate > 0.0 && *rate <= 1.5e6 * s.free.mpps);
    assert!(best.rx.unwrap().drop_rate() < 0.01);
}

#[test]
fn bad_settings_are_one_line_errors() {
    let e = replay::prepare(&config(|c| c.retrain_threshold = 1.5)).err().unwrap();
    assert!(e.to_string().contains("--retrain-threshold") && !e.to_string().contains('\n'), "{e}");
    let e = replay::prepare(&config(|c| c.updates = Some("mod:1@1s".into()))).err().unwrap();
    assert!(e.to_string().contains("'add' or 'del'"), "{e}");
    let e = replay::prepare(&config(|c| c.rules = Some("/nonexistent/rules".into()))).err().unwrap();
    assert!(e.to_string().contains("/nonexistent/rules"), "{e}");
}

#[test]
fn several_pmds_split_the_trace_by_flow_and_stay_exact() {
    for d in DesignKind::ALL {
        let c = config(|c| {
            c.pmds = 2;
            c.passes = 2;
            c.train_interval = 0.005;
        });
        let p = replay::prepare(&c).unwrap();
        let r = replay::run_pmds(&c, &p, d).unwrap();
        assert_eq!(r.runs.len(), 2);
        for run in &r.runs {
            check(run);
            assert!(run.c.received > 0, "{}: every PMD gets packets", d.name());
        }
        assert_eq!(r.packets, 2 * p.packets, "{}: every packet on exactly one PMD", d.name());
        assert!(r.mpps > 0.0);
    }
}

/// `--pmds` with a timed update stream (each PMD applies it on its own clock) and with a
/// constant offered rate (split over the PMDs as the trace is): every PMD stays exact, sees
/// every update, and counts what its ring dropped.
#[test]
fn several_pmds_with_updates_and_rate() {
    for d in DesignKind::ALL {
        let c = config(|c| {
            c.pmds = 2;
            // Long enough (≥ 45K packets per PMD) that even CFLOWS reaches the second update.
            c.passes = 10;
            c.updates = Some("add:40@0.1ms,del:10@0.2ms".into());
        });
        let p = replay::prepare(&c).unwrap();
        let r = replay::run_pmds(&c, &p, d).unwrap();
        for run in &r.runs {
            check(run);
            assert_eq!(run.update_log.len(), 2, "{}: each PMD applies every update", d.name());
        }
        let c = config(|c| {
            c.pmds = 2;
            c.rate = Some(1e9);
        });
        let p = replay::prepare(&c).unwrap();
        let r = replay::run_pmds(&c, &p, d).unwrap();
        for run in &r.runs {
            let rx = run.rx.as_ref().expect("constant-rate stats");
            assert!(rx.dropped > 0, "{}: 1 Gpps overflows the ring: {rx:?}", d.name());
            assert_eq!(run.mismatches, 0);
        }
    }
}
