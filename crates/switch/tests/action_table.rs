//! The datapath's action table under a controller that keeps inventing action lists (issue 40):
//! while frames flow through a switch with 2 PMDs on veths between private namespaces, a
//! controller-like loop installs and deletes 10^5 flows, each with an action list no other
//! flow has, through [`rqvs_switch::Control::apply_each`] (what the OpenFlow channel does with a
//! run of FLOW_MODs). Each flow replaces the one before it, so its list loses its last holder
//! (the table of record; no frame hits it, so no megaflow holds it) and is freed about
//! [`actions::GRACE`] later (`rqvs_ofproto::actions`, *Freeing*). The table's limit
//! ([`actions::set_limit`], the switch's `--max-action-lists`) is set to half the lists the loop
//! invents: without freeing, the second half would be refused (`OFPFMFC_TABLE_FULL`); with it,
//! none is, the table's live size (the `rqvs_action_lists` gauge) stays under the limit, and
//! once the loop stops it goes back to the lists the rules use. Meanwhile the traffic's rules
//! change too (the churn test's add and delete, `churn/mod.rs`) and every frame is checked
//! exact against the reference, byte for byte, and accounted for; no frame read a freed list
//! (`stale` reads: 0).
//!
//! As root only (skipped otherwise, a failure with `RQVS_REQUIRE_NETNS=1`).

mod churn;

use std::sync::Mutex;
use std::time::Instant;

use rqvs_datapath::DesignKind;
use rqvs_flow::formats::ofctl;
use rqvs_ofproto::actions;
use rqvs_ofproto::record::{FlowOp, OpError};
use rqvs_ports::testnet;
use rqvs_switch::{FinalReport, PortSource, Switch, SwitchConfig};

/// The table is process-wide: one case at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Distinct lists the loop installs (and deletes).
const LISTS: u32 = 100_000;
/// The loop's most flow-mods a second.
const PACE: f64 = 10_000.0;
/// Flow-mods per `apply_each` (a controller's run before a BARRIER).
const RUN: u32 = 100;
/// New lists the table may hold at once during the test: half those the loop invents.
const ROOM: usize = LISTS as usize / 2;

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

/// Flow `i` of the loop: one match no frame of the workload has (10.77.0.1, TCP port 7), so each
/// replaces the one before it, and an action list of its own (the source MAC says `i`, and
/// `case`: each case's lists are new to the process-wide table).
fn churn_flow(case: u8, i: u32) -> FlowOp {
    let b = i.to_be_bytes();
    let text = format!(
        "priority=300,tcp,nw_dst=10.77.0.1,tp_dst=7,actions=mod_dl_src:02:{:02x}:{:02x}:{:02x}:{:02x}:{case:02x},output:2,output:3",
        b[0], b[1], b[2], b[3]
    );
    FlowOp::add(ofctl::parse_flows("churn", &text).unwrap().remove(0))
}

fn lists_under_churn(design: DesignKind, case: u8) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let what = format!("afpacket {} 2 PMDs", design.name());
    let t = Instant::now();
    let topo = churn::Topo::new("acts", 2);
    let ports: Vec<PortSource> = (1..=3).map(|p| PortSource::Spec(format!("p{p}:afpacket").parse().unwrap())).collect();
    let mut cfg = SwitchConfig::new(ports, churn::parse("base", churn::BASE), design);
    cfg.pmds = 2;
    cfg.datapath.emc_insert_prob = 0.2;
    // Room for the rule sets' own lists (interned by the slow path: they pass the limit) and
    // ROOM new ones.
    let start = actions::stats();
    let limit = start.lists + ROOM;
    actions::set_limit(limit);
    let sw = topo.sw.run(move || Switch::start(cfg)).unwrap().unwrap();
    let control = sw.control();
    let traffic = churn::Traffic::start(&topo);
    std::thread::sleep(churn::PHASES[0]);
    let (added, add) = churn::timed(|| control.add_flows(churn::parse("change", churn::CHANGE)));
    assert_eq!(added.unwrap(), (5, 0), "{what}: add-flows");

    // The controller's loop, while the traffic follows the CHANGE rule set.
    let (mut accepted, mut refused, mut peak) = (0u32, 0u32, 0usize);
    // Paced at about PACE flow-mods a second at most (some ten seconds): the lists of the
    // deleted flows are freed about a second after their deletion, so the table holds the
    // lists of about a second's flow-mods — a controller inventing more lists than the limit
    // in a second is refused.
    let paced = Instant::now();
    for run in 0..LISTS / RUN {
        let due = std::time::Duration::from_secs_f64(f64::from(run * RUN) / PACE);
        if let Some(wait) = due.checked_sub(paced.elapsed()) {
            std::thread::sleep(wait);
        }
        let ops: Vec<FlowOp> = (run * RUN..(run + 1) * RUN).map(|i| churn_flow(case, i)).collect();
        for r in control.apply_each(&ops) {
            match r {
                Ok(_) => accepted += 1,
                Err(OpError::TableFull(why)) => {
                    assert!(why.contains("--max-action-lists"), "{what}: {why}");
                    refused += 1
                }
                Err(e) => panic!("{what}: flow-mod refused for another reason: {e}"),
            }
        }
        peak = peak.max(actions::stats().lists);
        assert!(peak <= limit + 8, "{what}: the table grew past its limit {limit}: {:?}", actions::stats());
    }
    control.settle_changes();
    std::thread::sleep(churn::PHASES[1]);
    // The loop's lists, unused now, are freed after the grace (the PMDs collect).
    let deadline = Instant::now() + actions::GRACE * 5;
    while actions::stats().lists > start.lists + 64 && Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let after = actions::stats();
    let (deleted, del) = churn::timed(|| control.del_flows(Some(&churn::delete_matches())));
    assert_eq!(deleted.unwrap(), 5, "{what}: del-flows removes exactly the CHANGE flows");
    std::thread::sleep(churn::PHASES[2]);
    let (sent, captured) = traffic.finish();
    let report = sw.stop().unwrap();
    let s = churn::check(&what, &sent, &captured, add, del, &accounting(&report));
    let st = actions::stats();
    eprintln!(
        "{what}: {accepted} flow-mods accepted, {refused} refused (table full); table {} lists at the start, peak {peak} (limit {limit}), {} after the loop; {} freed, {} stale reads; {s:?} in {:.1} s",
        start.lists,
        after.lists,
        st.freed - start.freed,
        st.stale - start.stale,
        t.elapsed().as_secs_f64()
    );
    assert_eq!(accepted + refused, LISTS);
    // Without freeing, everything past ROOM would have been refused.
    assert_eq!(refused, 0, "{what}: flow-mods refused: the table did not free");
    assert!(
        after.lists <= start.lists + 64,
        "{what}: {} lists left after the loop ({} at the start): lists of deleted flows not freed",
        after.lists,
        start.lists
    );
    assert!(st.freed - start.freed >= u64::from(LISTS) - 64, "{what}: {} freed", st.freed - start.freed);
    assert_eq!(st.stale, start.stale, "{what}: a frame or a hold read a freed list");
    assert_eq!(st.unbalanced, 0, "{what}: a release without a hold");
}

#[test]
fn action_lists_bounded_under_churn_orig_2() {
    if testnet::available("action_lists_bounded_under_churn_orig_2") {
        lists_under_churn(DesignKind::Orig, 1);
    }
}

#[test]
fn action_lists_bounded_under_churn_cflows_2() {
    if testnet::available("action_lists_bounded_under_churn_cflows_2") {
        lists_under_churn(DesignKind::Cflows, 2);
    }
}
