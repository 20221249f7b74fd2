//! Mixed replay (`ReplayConfig::attack`): an attack interleaved with the benign trace as a
//! second receive queue — every packet of both streams verified against the reference, the
//! streams' packets and costs accounted for separately, the attack's ring bounded, the benign
//! latency measured at a constant rate.

use std::path::{Path, PathBuf};

use rqvs_experiment::gen::{self, TraceFormat, TraceRequest};
use rqvs_experiment::replay::{self, Run};
use rqvs_experiment::{DesignKind, ReplayConfig};
use rqvs_testkit::TempDir;

/// An "attack" for the embedded acl1_1k rules: headers drawn uniformly over the rules at their
/// corners — many flows, many megaflow masks (a stand-in for `rqvs gen attack`).
fn attack_file(dir: &Path, packets: usize) -> PathBuf {
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/acl1_1k_rules.xz");
    let out = gen::gen_trace(&TraceRequest {
        rules,
        locality: "uniform".into(),
        packets,
        rng_seed: 7,
        corner: true,
        max_share: 1.0,
        max_burst: None,
        format: TraceFormat::Pcap,
    })
    .unwrap();
    let path = dir.join("attack.pcap");
    std::fs::write(&path, out.bytes).unwrap();
    path
}

/// `min_checks`: attack packets the run must have verified.
fn check_streams(r: &Run, ring: u64, min_checks: usize) {
    let d = r.design.name();
    let a = r.attack.as_ref().expect("a mixed run reports its streams");
    assert_eq!(r.mismatches, 0, "{d}: {:?}", r.first_mismatch);
    assert_eq!(a.mismatches, 0, "{d}");
    assert!(a.checks >= min_checks, "{d}: attack packets verified: {}", a.checks);
    assert!(r.verified > a.checks + 100, "{d}: benign packets verified too");
    assert!(r.c.outcome_sum_ok(), "{d}: {:?}", r.c);
    assert_eq!(a.benign.packets + a.attack.packets, r.c.received, "{d}: every packet in one stream");
    assert_eq!(a.benign.upcalls + a.attack.upcalls, r.c.upcall, "{d}");
    assert_eq!(a.benign.lost + a.attack.lost, r.c.lost, "{d}");
    // Every attack packet offered was classified, dropped by the full ring or by the policer,
    // or is still waiting in the ring.
    assert_eq!(a.attack.packets + a.ring_dropped + a.policed + a.waiting, a.offered, "{d}: {a:?}");
    assert!(a.waiting <= ring, "{d}: {a:?}");
    assert!(a.attack.packets > 0, "{d}: the attack reached the PMD");
    assert!(a.benign.pmd_ns + a.attack.pmd_ns <= r.c.pmd_ns, "{d}: batches within PMD time");
}

#[test]
fn every_design_forwards_both_streams_exactly() {
    let dir = TempDir::new("mixed");
    let attack = attack_file(dir.path(), 5000);
    let c = ReplayConfig {
        passes: 2,
        attack: Some(attack),
        attack_rate: Some(2e6),
        train_interval: 0.005,
        ..ReplayConfig::default()
    };
    let p = replay::prepare(&c).unwrap();
    for d in DesignKind::ALL {
        let r = replay::run_design(&c, &p, d).unwrap();
        check_streams(&r, c.rx_ring, 100);
        let a = r.attack.unwrap();
        assert_eq!(a.benign.packets, 2 * p.packets, "{}: the benign trace runs unconstrained", d.name());
        if d == DesignKind::Orig {
            assert!(a.attack.upcalls > 100, "the attack's new flows upcall: {a:?}");
            assert!(a.benign.subtables_per_hit().is_some());
        } else if d == DesignKind::Cflows {
            assert_eq!(a.attack.upcalls, 0);
        }
    }
}

#[test]
fn a_slow_attack_and_a_constant_rate_idle_the_pmd_between_arrivals() {
    let dir = TempDir::new("mixed-rate");
    let attack = attack_file(dir.path(), 2000);
    // 100 Kpps of benign traffic, 20 Kpps of attack: the PMD idles, waking for whichever comes
    // first; nothing is dropped.
    // A large ring: a PMD preempted on a loaded machine must not drop (the clock is wall time).
    let c = ReplayConfig {
        rate: Some(1e5),
        attack: Some(attack),
        attack_rate: Some(2e4),
        rx_ring: 1 << 20,
        ..ReplayConfig::default()
    };
    let p = replay::prepare(&c).unwrap();
    let r = replay::run_design(&c, &p, DesignKind::Orig).unwrap();
    check_streams(&r, c.rx_ring, 100);
    let a = r.attack.unwrap();
    let rx = r.rx.unwrap();
    assert_eq!(rx.dropped, 0);
    assert_eq!(a.ring_dropped, 0);
    // Attack packet i arrives at i / rate: by the end of the run (PMD time) exactly this many.
    assert_eq!(a.offered, (r.c.pmd_ns as f64 * 2e4 / 1e9) as u64 + 1, "{a:?}");
    // The run lasts at least as long as the benign trace takes at its rate (longer when a loaded
    // machine slows the PMD): at least a fifth as many attack packets.
    assert!(a.offered as f64 >= p.packets as f64 / 5.0 - 1.0, "{a:?}");
    // The PMD idled between arrivals: its batches took less than the run's PMD time.
    assert!(a.benign.pmd_ns + a.attack.pmd_ns < r.c.pmd_ns, "{a:?}");
    let lat = r.latency.expect("latency at a constant rate");
    assert_eq!(lat.count(), p.packets - p.packets / 20, "benign packets after the warm-up");
    assert!(lat.quantile(0.5).unwrap() > 0 && lat.quantile(0.99).unwrap() <= lat.max());
}

#[test]
fn a_fast_attack_overflows_its_ring_not_the_benign_one() {
    let dir = TempDir::new("mixed-flood");
    let attack = attack_file(dir.path(), 3000);
    let c = ReplayConfig { attack: Some(attack), attack_rate: Some(1e12), rx_ring: 64, ..ReplayConfig::default() };
    let p = replay::prepare(&c).unwrap();
    let r = replay::run_design(&c, &p, DesignKind::Orig).unwrap();
    check_streams(&r, c.rx_ring, 20);
    let a = r.attack.unwrap();
    assert!(a.ring_dropped > a.attack.packets, "{a:?}");
    assert_eq!(a.benign.packets, p.packets);
    // The PMD alternates: a batch of each while the attack's queue is never empty.
    let batches = (a.benign.batches as i64 - a.attack.batches as i64).abs();
    assert!(batches <= 1, "{a:?}");
}

/// `attack_policing`: the attack's packets over the token bucket are dropped before the
/// classifier — the attack classified is at most the bucket's burst and rate over the run's PMD
/// time, the benign trace is all forwarded, and nothing is lost from the accounting.
#[test]
fn a_policed_attack_is_dropped_before_the_classifier() {
    let dir = TempDir::new("mixed-policed");
    let attack = attack_file(dir.path(), 3000);
    // 10 Mpps of attack against a policer of 10 kpps with a burst of 100 packets.
    let c = ReplayConfig {
        passes: 2,
        attack: Some(attack),
        attack_rate: Some(1e7),
        attack_policing: Some("10/0.1".parse().unwrap()),
        ..ReplayConfig::default()
    };
    let p = replay::prepare(&c).unwrap();
    for d in [DesignKind::Orig, DesignKind::Cflows] {
        let r = replay::run_design(&c, &p, d).unwrap();
        check_streams(&r, c.rx_ring, 0);
        let a = r.attack.unwrap();
        assert_eq!(a.benign.packets, 2 * p.packets, "{}", d.name());
        let allowed = 100 + (r.c.pmd_ns as f64 * 1e4 / 1e9) as u64 + 1;
        assert!(a.attack.packets >= 100 && a.attack.packets <= allowed, "{}: {a:?}, at most {allowed}", d.name());
        assert!(a.policed > 10 * a.attack.packets, "{}: {a:?}", d.name());
    }
}

#[test]
fn attack_settings_are_checked() {
    let err = |c: ReplayConfig| replay::prepare(&c).err().expect("an error").0;
    let dir = TempDir::new("mixed-errors");
    let attack = attack_file(dir.path(), 100);
    let base = ReplayConfig { attack: Some(attack.clone()), attack_rate: Some(1e5), ..ReplayConfig::default() };
    assert!(err(ReplayConfig { attack_rate: None, ..base.clone() }).contains("--attack-rate"));
    assert!(err(ReplayConfig { attack: None, ..base.clone() }).contains("expected --attack FILE"));
    let policing = Some("10".parse().unwrap());
    let e = err(ReplayConfig { attack: None, attack_rate: None, attack_policing: policing, ..base.clone() });
    assert!(e.contains("--attack-policing") && e.contains("expected --attack FILE"), "{e}");
    assert!(err(ReplayConfig { attack_rate: Some(0.0), ..base.clone() }).contains("packets per second > 0"));
    assert!(err(ReplayConfig { pmds: 2, ..base.clone() }).contains("one PMD"));
    let missing = dir.join("absent.pcap");
    assert!(err(ReplayConfig { attack: Some(missing), ..base.clone() }).contains("absent.pcap"));
    let empty = dir.join("empty.pcap");
    std::fs::write(&empty, [0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0])
        .unwrap();
    assert!(err(ReplayConfig { attack: Some(empty), ..base }).contains("no packets"));
}
