//! Exactness while rules change under traffic: for every design, on afpacket and afxdp ports,
//! with 1 and 2 PMDs, a switch on veths between private namespaces forwards a continuous stream
//! of frames while a set of higher-priority rules that changes the output of some flows is
//! added and then deleted through [`Control`]. Every frame sent is accounted for, every copy
//! that leaves a port is what the reference winner's actions under one rule set visible at the
//! time say, byte for byte, and frames sent once a change is acknowledged and settled follow
//! the new rules exactly. The definitions are in `churn/mod.rs` (shared with the CLI's test
//! through the management socket); its topology and action interpreter are the ones
//! `tests/exact.rs` uses too (`common/mod.rs`).
//!
//! `--design auto` runs the same with thresholds that always want to leave the current design
//! (ORIG ↔ CFLOWS, or ORIG ↔ CCACHE): its PMDs switch designs while the rules change, and the
//! frames are exactly as above; `pmd-stats-show` and the metrics count the switches.
//!
//! As root only (skipped otherwise, a failure with `RQVS_REQUIRE_NETNS=1`). The cases run one
//! at a time (a lock): each measures a switch at a fixed rate and should not share the CPUs
//! with another. About 2.5 s each.

mod churn;

use std::sync::Mutex;
use std::time::Instant;

use rqvs_datapath::{AutoConfig, DesignKind};
use rqvs_ports::testnet;
use rqvs_switch::{FinalReport, PortSource, Switch, SwitchConfig};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn accounting(r: &FinalReport) -> churn::Accounting {
    churn::Accounting {
        port1_rx: r.ports[0].rx_packets,
        rx_lost: r.ports.iter().map(|p| p.rx_lost).sum(),
        lost: r.total.lost,
        malformed: r.total.malformed,
        tx_dropped: r.ports.iter().map(|p| p.tx_dropped).sum(),
        balanced: r.balanced(),
        text: r.format(),
    }
}

/// Auto's thresholds that leave every design at each decision (10 ms windows, a 20 ms dwell
/// that reversals double): between ORIG and CFLOWS, or (`ccache`) ORIG and CCACHE.
fn flapping(ccache: bool) -> AutoConfig {
    let never = f64::INFINITY;
    AutoConfig {
        initial: Some(DesignKind::Orig),
        window_ns: 10_000_000,
        min_window_packets: 1,
        min_dwell_ns: 20_000_000,
        to_cflows_upcall_share: if ccache { never } else { 0.0 },
        to_cflows_subtables: never,
        to_cflows_masks: u64::MAX,
        to_ccache_subtables: if ccache { 0.0 } else { never },
        ccache_max_upcall_share: never,
        to_orig_subtables: never,
        leave_cflows_coverage: never,
        leave_cflows_emc_share: 0.0,
        ccache,
        ..AutoConfig::default()
    }
}

fn rules_change_under_traffic(ty: &str, design: DesignKind, pmds: usize) {
    rules_change_under_traffic_with(ty, design, pmds, None)
}

fn rules_change_under_traffic_with(ty: &str, design: DesignKind, pmds: usize, auto: Option<AutoConfig>) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let what = format!("{ty} {} {pmds} PMDs", design.name());
    let t = Instant::now();
    let topo = churn::Topo::new("upd", pmds);
    let ports: Vec<PortSource> = (1..=3).map(|p| PortSource::Spec(format!("p{p}:{ty}").parse().unwrap())).collect();
    let mut cfg = SwitchConfig::new(ports, churn::parse("base", churn::BASE), design);
    cfg.pmds = pmds;
    // Some EMC hits (entries that must die with a change) without every packet being one.
    cfg.datapath.emc_insert_prob = 0.2;
    if let Some(a) = auto {
        cfg.auto = a;
    }
    let sw = topo.sw.run(move || Switch::start(cfg)).unwrap().unwrap();
    let control = sw.control();
    let traffic = churn::Traffic::start(&topo);
    std::thread::sleep(churn::PHASES[0]);
    let (added, add) = churn::timed(|| control.add_flows(churn::parse("change", churn::CHANGE)));
    assert_eq!(added.unwrap(), (5, 0), "{what}: add-flows");
    std::thread::sleep(churn::PHASES[1]);
    let (deleted, del) = churn::timed(|| control.del_flows(Some(&churn::delete_matches())));
    assert_eq!(deleted.unwrap(), 5, "{what}: del-flows removes exactly the added flows");
    std::thread::sleep(churn::PHASES[2]);
    let (sent, captured) = traffic.finish();
    let report = sw.stop().unwrap();
    let s = churn::check(&what, &sent, &captured, add, del, &accounting(&report));
    eprintln!("{what}: {s:?} in {:.1} s", t.elapsed().as_secs_f64());
    if design == DesignKind::Auto {
        let switches: u64 = report.pmds.iter().filter_map(|p| p.auto.as_ref()).map(|a| a.design_switches).sum();
        let mut show = String::new();
        report.pmds.iter().for_each(|p| p.format(&mut show));
        assert!(switches >= 2 * pmds as u64, "{what}: the PMDs switched designs\n{show}");
        let metrics = rqvs_switch::metrics::render_report(&report, None, None, false);
        assert!(metrics.contains("rqvs_pmd_design_switches_total{pmd=\"0\"} "), "{what}: {metrics}");
        eprintln!("{what}: {switches} design switches");
    }
}

macro_rules! churn_tests {
    ($($name:ident => ($ty:literal, $d:expr, $p:expr)),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                if testnet::available(stringify!($name)) {
                    rules_change_under_traffic($ty, $d, $p);
                }
            }
        )*
    };
}

churn_tests!(
    afpacket_orig_1 => ("afpacket", DesignKind::Orig, 1),
    afpacket_orig_2 => ("afpacket", DesignKind::Orig, 2),
    afpacket_ccache_1 => ("afpacket", DesignKind::Ccache, 1),
    afpacket_ccache_2 => ("afpacket", DesignKind::Ccache, 2),
    afpacket_cflows_1 => ("afpacket", DesignKind::Cflows, 1),
    afpacket_cflows_2 => ("afpacket", DesignKind::Cflows, 2),
    afxdp_orig_1 => ("afxdp", DesignKind::Orig, 1),
    afxdp_orig_2 => ("afxdp", DesignKind::Orig, 2),
    afxdp_ccache_1 => ("afxdp", DesignKind::Ccache, 1),
    afxdp_ccache_2 => ("afxdp", DesignKind::Ccache, 2),
    afxdp_cflows_1 => ("afxdp", DesignKind::Cflows, 1),
    afxdp_cflows_2 => ("afxdp", DesignKind::Cflows, 2),
);

macro_rules! auto_churn_tests {
    ($($name:ident => ($ty:literal, $p:expr, $ccache:expr)),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                if testnet::available(stringify!($name)) {
                    rules_change_under_traffic_with($ty, DesignKind::Auto, $p, Some(flapping($ccache)));
                }
            }
        )*
    };
}

auto_churn_tests!(
    afpacket_auto_cflows_1 => ("afpacket", 1, false),
    afpacket_auto_cflows_2 => ("afpacket", 2, false),
    afpacket_auto_ccache_2 => ("afpacket", 2, true),
    afxdp_auto_cflows_2 => ("afxdp", 2, false),
);
