//! The OpenFlow channel over many tables and a group table, driven by the real `ovs-ofctl`
//! (1.3 and 1.4) and a raw client:
//!
//! - flows in tables 0..254: `add-flow table=N`, `dump-flows` (all tables, in table order, and
//!   `table=N`), `dump-tables` (active counts per table), `dump-aggregate` over all tables,
//!   `del-flows table=N` and without a table (every table), the same (priority, match) in two
//!   tables being two flows;
//! - groups: `add-group`, `mod-group`, `dump-groups`, `dump-group-stats`, `del-groups`, and
//!   OVS's errors (GROUP_EXISTS, UNKNOWN_GROUP, LOOP, BAD_OUT_GROUP for a bucket or a flow naming
//!   a missing group);
//! - a raw client: a goto_table to the flow's own or an earlier table is BAD_INSTRUCTION
//!   BAD_TABLE_ID; table 255 in an add means table 0 (OVS); nothing changes on a refusal.
//! - As root (veths), the traffic check: flows of tables 1.. — even of higher priority — never
//!   decide a frame (no packet reaches them until goto_table executes), table 0's do.
//!
//! Skipped when `ovs-ofctl` is missing, unless `RQVS_REQUIRE_OVS=1`.

mod common;
mod ofswitch;
use common::{read_msg, TempDir};
use ofswitch::{matches_of, normal, OfSwitch};

use std::collections::BTreeSet;
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use rqvs_flow::formats::ofctl;
use rqvs_flow::{Action, Actions};
use rqvs_openflow::flow_mod::{FlowMod, FlowModCommand};
use rqvs_openflow::{encode, Message, OFP13, OFP14};

/// `dump-flows` lines as `table=N,` + the flow text (duration and counters dropped).
fn dumped_with_tables(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.contains("table="))
        .map(|l| {
            let table = l.split("table=").nth(1).unwrap().split(',').next().unwrap();
            let flow = l.split("n_bytes=").nth(1).unwrap().split_once(", ").map_or("", |x| x.1).trim();
            format!("table={table},{flow}")
        })
        .collect()
}

fn pipeline(version: &str, design: &str) {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let _one = ofswitch::serial();
    let tmp = TempDir::new(&format!("cli-openflow-pipeline-{version}-{design}"));
    let base = "priority=5,udp,actions=output:2\n";
    let rules = tmp.join("rules.txt");
    std::fs::write(&rules, base).unwrap();
    let mut sw = OfSwitch::start(&tmp.0, &format!("pl{}{design}", &version[8..]), &rules, design, true);
    let target = sw.target();
    let t = target.as_str();

    // The datapath id: with interface ports, the smallest of their MACs (OVS's rule), not a
    // constant; on file ports the constant 0x727176730001.
    let show = sw.ofctl_ok(version, &["show", t]);
    let dpid = show.split("dpid:").nth(1).unwrap().split_whitespace().next().unwrap().to_string();
    if sw.has_traffic() {
        let macs: Vec<String> =
            show.split("addr:").skip(1).map(|x| x.split_whitespace().next().unwrap().replace(':', "")).collect();
        assert_eq!(macs.len(), 3, "{show}");
        assert_eq!(dpid, format!("0000{}", macs.iter().min().unwrap()), "{show}");
    } else {
        assert_eq!(dpid, "0000727176730001", "{show}");
    }

    // Flows in tables 1, 2 and 254; the same (priority, match) as table 0's in table 1 is
    // another flow. Higher priorities than table 0's: they would win if the datapath saw them.
    let others = [
        "table=1,priority=5,udp,actions=output:3",
        "table=1,priority=900,udp,tp_dst=53,actions=output:3",
        "table=2,priority=800,udp,actions=drop",
        "table=254,priority=1,actions=output:1",
    ];
    for f in others {
        sw.ofctl_ok(version, &["add-flow", t, f]);
    }
    let dump = sw.ofctl_ok(version, &["dump-flows", t]);
    let lines = dumped_with_tables(&dump);
    assert_eq!(
        lines,
        vec![
            "table=0,priority=5,udp actions=output:2",
            "table=1,priority=900,udp,tp_dst=53 actions=output:3",
            "table=1,priority=5,udp actions=output:3",
            "table=2,priority=800,udp actions=drop",
            "table=254,priority=1 actions=output:1",
        ],
        "{dump}"
    );
    let one = dumped_with_tables(&sw.ofctl_ok(version, &["dump-flows", t, "table=1"]));
    assert_eq!(one.len(), 2, "{one:?}");
    assert!(sw.ofctl_ok(version, &["dump-aggregate", t]).contains("flow_count=5"));
    let tables = sw.ofctl_ok(version, &["dump-tables", t]);
    assert!(tables.contains("table 0") && tables.contains("active=1,"), "{tables}");
    let active = |n: u32| tables.split("table ").filter(|b| b.contains(&format!("active={n},"))).count();
    // Table 1 holds 2; tables 0, 2 and 254 one each (OVS prints runs of equal tables as "ditto").
    assert!(active(2) >= 1, "{tables}");

    // Table 0 alone decides frames: the reference is table 0's flows.
    let table0 = normal(base);
    let mut probes = matches_of(&table0);
    probes.extend(matches_of(&normal("priority=1,udp,tp_dst=53,actions=drop")));
    sw.check_traffic(&table0, &probes, 3, "flows of tables 1.. never decide a frame");

    // del-flows table=1, then without a table (every table).
    sw.ofctl_ok(version, &["del-flows", t, "table=1"]);
    let after = dumped_with_tables(&sw.ofctl_ok(version, &["dump-flows", t]));
    assert_eq!(after.len(), 3, "{after:?}");
    assert!(after.iter().all(|l| !l.starts_with("table=1,")), "{after:?}");
    sw.ofctl_ok(version, &["del-flows", t, "udp"]);
    let after = dumped_with_tables(&sw.ofctl_ok(version, &["dump-flows", t]));
    assert_eq!(after, vec!["table=254,priority=1 actions=output:1"], "udp flows of every table deleted");
    sw.ofctl_ok(version, &["add-flow", t, base.trim()]);

    // Groups.
    sw.ofctl_ok(version, &["add-group", t, "group_id=1,type=all,bucket=output:1,bucket=output:2"]);
    sw.ofctl_ok(
        version,
        &["add-group", t, "group_id=2,type=select,bucket=weight:3,actions=output:1,bucket=weight:5,actions=output:2"],
    );
    sw.ofctl_ok(version, &["add-group", t, "group_id=3,type=indirect,bucket=actions=group:1"]);
    sw.ofctl_ok(version, &["mod-group", t, "group_id=1,type=all,bucket=output:3"]);
    let groups = sw.ofctl_ok(version, &["dump-groups", t]);
    for want in [
        "group_id=1,type=all,bucket=actions=output:3",
        "group_id=2,type=select,bucket=weight:3,actions=output:1,bucket=weight:5,actions=output:2",
        "group_id=3,type=indirect,bucket=actions=group:1",
    ] {
        assert!(groups.contains(want), "{want} in {groups}");
    }
    let stats = sw.ofctl_ok(version, &["dump-group-stats", t]);
    assert!(stats.contains("group_id=2,duration=") && stats.contains("ref_count=0,packet_count=0"), "{stats}");
    let refused = |args: &[&str], code: &str| {
        let out = sw.ofctl(version, args);
        assert!(!out.status.success(), "{args:?} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(code), "{args:?}: {err}");
    };
    refused(&["add-group", t, "group_id=1,type=all,bucket=output:1"], "OFPGMFC_GROUP_EXISTS");
    refused(&["mod-group", t, "group_id=9,type=all,bucket=output:1"], "OFPGMFC_UNKNOWN_GROUP");
    refused(&["mod-group", t, "group_id=1,type=all,bucket=group:3"], "OFPGMFC_LOOP");
    refused(&["add-group", t, "group_id=4,type=all,bucket=group:8"], "OFPBAC_BAD_OUT_GROUP");
    refused(&["add-flow", t, "priority=9,actions=group:8"], "OFPBAC_BAD_OUT_GROUP");
    refused(&["del-groups", t, "group_id=1"], "OFPGMFC_CHAINED_GROUP");
    sw.ofctl_ok(version, &["del-groups", t, "group_id=3"]);
    sw.ofctl_ok(version, &["del-groups", t, "group_id=1"]);
    let groups = sw.ofctl_ok(version, &["dump-groups", t]);
    assert!(
        groups.contains("group_id=2") && !groups.contains("group_id=1") && !groups.contains("group_id=3"),
        "{groups}"
    );
    sw.ofctl_ok(version, &["del-groups", t]);
    assert!(!sw.ofctl_ok(version, &["dump-groups", t]).contains("group_id="));

    assert!(sw.exit().0.success());
}

#[test]
fn tables_and_groups_orig_of13() {
    pipeline("OpenFlow13", "orig");
}

#[test]
fn tables_and_groups_cflows_of14() {
    pipeline("OpenFlow14", "cflows");
}

/// A raw client (the switch on pcap ports, its channel on this namespace's loopback).
#[test]
fn goto_backward_is_bad_table_id_and_table_255_is_table_0() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let tmp = TempDir::new("cli-openflow-pipeline-raw");
    let rules = tmp.join("rules.txt");
    std::fs::write(&rules, "priority=5,udp,actions=output:2\n").unwrap();
    let mut sw = OfSwitch::start(&tmp.0, "", &rules, "orig", false);
    let target = sw.target();
    let t = target.as_str();
    for version in ["OpenFlow13", "OpenFlow14"] {
        // A raw client: goto_table backward or to its own table, BAD_INSTRUCTION BAD_TABLE_ID.
        let v = if version == "OpenFlow13" { OFP13 } else { OFP14 };
        let port: u16 = t.rsplit(':').next().unwrap().parse().unwrap();
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(&encode(v, 1, &Message::Hello(Default::default())).unwrap()).unwrap();
        assert_eq!(read_msg(&mut s).unwrap()[1], 0, "HELLO");
        for (table, to) in [(3u8, 3u8), (3, 1)] {
            let mut r = ofctl::parse_flow("t", 1, "priority=7,ip,actions=drop", 0).unwrap();
            r.table = table;
            r.actions = Actions(vec![Action::Output(1), Action::GotoTable(to)]);
            let fm = FlowMod::from_rule(&r, FlowModCommand::Add).unwrap().remove(0);
            s.write_all(&encode(v, 7, &Message::FlowMod(fm)).unwrap()).unwrap();
            let e = read_msg(&mut s).expect("an error");
            assert_eq!(
                (e[1], &e[4..8], &e[8..12]),
                (1, &[0, 0, 0, 7][..], &[0, 3, 0, 2][..]),
                "goto {table}->{to}: {e:?}"
            );
        }
        // Table 255 in an add: table 0 (OVS chooses the first table).
        let mut r = ofctl::parse_flow("t", 1, "priority=8,arp,actions=drop", 0).unwrap();
        r.table = 255;
        let fm = FlowMod::from_rule(&r, FlowModCommand::Add).unwrap().remove(0);
        s.write_all(&encode(v, 8, &Message::FlowMod(fm)).unwrap()).unwrap();
        s.write_all(&encode(v, 9, &Message::BarrierRequest).unwrap()).unwrap();
        assert_eq!(read_msg(&mut s).unwrap()[1], 21, "no error, then the barrier reply");
        let all: BTreeSet<String> = dumped_with_tables(&sw.ofctl_ok(version, &["dump-flows", t])).into_iter().collect();
        assert!(all.contains("table=0,priority=8,arp actions=drop"), "{all:?}");
    }
    assert_eq!(
        dumped_with_tables(&sw.ofctl_ok("OpenFlow13", &["dump-flows", t])).len(),
        2,
        "the refused flows are not there"
    );
    assert!(sw.exit().0.success());
}
