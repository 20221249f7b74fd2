//! The pipeline's counters through `ovs-ofctl -O OpenFlow13` (as root, on veths): TABLE stats
//! count a lookup in every table a packet visits and a match where a flow matched, and GROUP
//! stats count each group's and each bucket's packets and bytes, as Open vSwitch 3.1 counts them.
//!
//! The expected numbers are what a real OVS 3.1 printed for the same pipeline and packets
//! (`ovs-appctl netdev-dummy/receive` on a dummy bridge): `dump-tables` said table 0
//! `lookup=6, matched=5`, table 1 `lookup=4, matched=3`, table 2 `lookup=1, matched=1`, table 3
//! `lookup=1, matched=0`; `dump-group-stats` the group's 3 packets, and 3 for each bucket of the
//! ALL group; a `mod-group` started the group's counts again. Every design (ORIG, CCACHE,
//! CFLOWS): the second and third packets of a flow take the datapath's fast path (megaflow, EMC),
//! and are counted the same.
//!
//! Skipped without `ovs-ofctl` (unless `RQVS_REQUIRE_OVS=1`) or without namespaces (unless
//! `RQVS_REQUIRE_NETNS=1`).

mod common;
mod ofswitch;
use common::TempDir;
use ofswitch::OfSwitch;

use std::time::Duration;

use rqvs_flow::frame::build_frame;
use rqvs_flow::key::{ETH_TYPE_IP, IPPROTO_UDP};
use rqvs_flow::FlowKey;

const V: &str = "OpenFlow13";

fn frame(src: u32, dst: u32) -> Vec<u8> {
    let mut k = FlowKey::ipv4(src, dst, IPPROTO_UDP, 1000, 2000);
    k.dl_type = ETH_TYPE_IP;
    k.nw_ttl = 64;
    k.dl_src = [2, 0, 0, 0, 0, 1];
    k.dl_dst = [2, 0, 0, 0, 0, 2];
    build_frame(&k.wire())
}

/// `table N:` block's `lookup=` and `matched=` in `dump-tables` output.
fn table(text: &str, t: u8) -> (u64, u64) {
    let block = text.split(&format!("table {t}:")).nth(1).unwrap_or_else(|| panic!("no table {t}: {text}"));
    let n = |name: &str| -> u64 {
        block.split(name).nth(1).unwrap().split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
    };
    (n("lookup="), n("matched="))
}

fn counters(design: &str) {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let _one = ofswitch::serial();
    let tmp = TempDir::new(&format!("cli-openflow-pipeline-counters-{design}"));
    let rules = tmp.join("rules.txt");
    std::fs::write(&rules, "table=9,priority=1,actions=drop\n").unwrap();
    let sw = OfSwitch::start(&tmp.0, &format!("pc{design}"), &rules, design, true);
    if !sw.has_traffic() {
        return;
    }
    let target = sw.target();
    let t = target.as_str();
    sw.ofctl_ok(V, &["add-group", t, "group_id=1,type=all,bucket=output:2,bucket=output:3"]);
    for f in [
        "table=0,priority=5,udp,nw_dst=10.0.0.1,actions=goto_table:1",
        "table=0,priority=4,udp,nw_dst=10.0.0.2,actions=goto_table:2",
        "table=1,priority=5,udp,nw_src=10.0.0.9,actions=group:1",
        "table=2,priority=0,actions=resubmit(,3)",
    ] {
        sw.ofctl_ok(V, &["add-flow", t, f]);
    }
    let before = sw.ofctl_ok(V, &["dump-tables", t]);
    let t0_before = table(&before, 0);
    let (f1, f2, f3, f4) = (
        frame(0x0a00_0009, 0x0a00_0001),
        frame(0x0a00_0008, 0x0a00_0001),
        frame(0x0a00_0008, 0x0a00_0002),
        frame(0x0a00_0008, 0x0a00_0003),
    );
    for f in [&f1, &f1, &f1, &f2, &f3, &f4] {
        sw.send_from(1, f);
        std::thread::sleep(Duration::from_millis(30));
    }
    let got2 = sw.received_on(2, Duration::from_millis(300));
    assert_eq!(got2.iter().filter(|f| **f == f1).count(), 3, "{design}: the group's first bucket");
    std::thread::sleep(Duration::from_millis(100));

    let tables = sw.ofctl_ok(V, &["dump-tables", t]);
    let t0 = table(&tables, 0);
    // Table 0: six more lookups (the hosts' own frames may add misses), five more matches.
    assert!(t0.0 - t0_before.0 >= 6, "{design}: {tables}");
    assert_eq!(t0.1 - t0_before.1, 5, "{design}: {tables}");
    assert_eq!(table(&tables, 1), (4, 3), "{design}: {tables}");
    assert_eq!(table(&tables, 2), (1, 1), "{design}: {tables}");
    assert_eq!(table(&tables, 3), (1, 0), "{design}: {tables}");
    assert_eq!(table(&tables, 4), (0, 0), "{design}: {tables}");

    let len = f1.len();
    let stats = sw.ofctl_ok(V, &["dump-group-stats", t]);
    let want = format!(
        "ref_count=1,packet_count=3,byte_count={b},bucket0:packet_count=3,byte_count={b},bucket1:packet_count=3,byte_count={b}",
        b = 3 * len
    );
    assert!(stats.contains(&want), "{design}: {stats}\nwant {want}");

    // A mod-group starts the counts again (OVS); a packet after it counts once.
    sw.ofctl_ok(V, &["mod-group", t, "group_id=1,type=all,bucket=output:3"]);
    let stats = sw.ofctl_ok(V, &["dump-group-stats", t]);
    assert!(stats.contains("packet_count=0,byte_count=0,bucket0:packet_count=0,byte_count=0"), "{design}: {stats}");
    std::thread::sleep(Duration::from_millis(300));
    sw.send_from(1, &f1);
    std::thread::sleep(Duration::from_millis(300));
    let stats = sw.ofctl_ok(V, &["dump-group-stats", t]);
    let want = format!("packet_count=1,byte_count={len},bucket0:packet_count=1,byte_count={len}");
    assert!(stats.contains(&want), "{design}: {stats}\nwant {want}");
}

#[test]
fn pipeline_counters_orig() {
    counters("orig");
}

#[test]
fn pipeline_counters_ccache() {
    counters("ccache");
}

#[test]
fn pipeline_counters_cflows() {
    counters("cflows");
}
