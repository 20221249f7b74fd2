//! Plain `ovs-ofctl` — no `-O`, so OpenFlow 1.0 with the Nicira extensions, its default —
//! against `rqvs switch --openflow`: every common command (`show`, `add-flow`, `add-flows`,
//! `dump-flows` with and without a selection, `mod-flows`, `del-flows` and `--strict`,
//! `dump-aggregate`, `dump-ports`, `dump-tables`, `dump-ports-desc`, `mod-port`, `probe`, and
//! the barriers every change waits for) works, and `dump-flows` / `dump-aggregate` print what
//! they print against real Open vSwitch 3.1 holding the same flows (durations and ages aside).
//! The switch runs on pcap-out ports, its listener on 127.0.0.1 (the OpenFlow side only);
//! skipped (with the reason printed) when `ovs-ofctl` / Open vSwitch is missing, unless
//! `RQVS_REQUIRE_OVS=1`.

mod common;
mod ofswitch;

use std::collections::BTreeSet;
use std::process::{Command, Output};

use common::{ctl, TempDir};
use ofswitch::{normal, OfSwitch};

/// `ovs-ofctl ARGS` — no `-O`.
fn ofctl(args: &[&str]) -> Output {
    Command::new("ovs-ofctl").args(args).output().unwrap()
}

/// [`ofctl`], asserting success: its stdout.
fn ofctl_ok(args: &[&str]) -> String {
    let out = ofctl(args);
    assert!(out.status.success(), "ovs-ofctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The flows of a `dump-flows` reply, each line as printed but for the values of `duration=`
/// and `idle_age=` (time), in one order.
fn dump_lines(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| l.trim_start().starts_with("cookie="))
        .map(|l| {
            l.split(", ")
                .map(|f| match f.split_once('=') {
                    Some((k @ ("duration" | "idle_age"), _)) => format!("{k}=T"),
                    _ => f.to_string(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect()
}

/// The flows of a dump as flow text without counters, in rqvs's normal form, for comparing with
/// what the switch holds (`table=` kept).
fn dumped_flows(text: &str) -> BTreeSet<String> {
    let flows: Vec<String> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("cookie="))
        .map(|l| {
            l.trim()
                .split(", ")
                .filter(|f| {
                    !["duration=", "n_packets=", "n_bytes=", "idle_age=", "hard_age="].iter().any(|p| f.starts_with(p))
                })
                .collect::<Vec<_>>()
                .join(",")
                .replace(" actions=", ",actions=")
        })
        .map(|l| load_as_mod(&l))
        .collect();
    normal(&flows.join("\n"))
}

/// OpenFlow 1.0 carries `mod_nw_ttl` as Nicira's `load`, which `ovs-ofctl` prints as
/// `load:0x9->NXM_NX_IP_TTL[]` (as against Open vSwitch): back to rqvs's flow syntax.
fn load_as_mod(line: &str) -> String {
    let Some((m, actions)) = line.split_once("actions=") else { return line.to_string() };
    let actions: Vec<String> = actions
        .split(',')
        .map(|a| match a.strip_prefix("load:0x").and_then(|x| x.strip_suffix("->NXM_NX_IP_TTL[]")) {
            Some(v) => format!("mod_nw_ttl:{}", u8::from_str_radix(v, 16).unwrap()),
            None => a.to_string(),
        })
        .collect();
    format!("{m}actions={}", actions.join(","))
}

/// Flows that need 1.0's `ofp10_match` and flows that need NXM (a masked MAC, IPv6, TCP flags,
/// `nw_ttl`), in tables 0 and 3, with 1.0's actions and Nicira's (`dec_ttl`, `load`).
const FLOWS: &str = "\
priority=20,tcp,tp_dst=80,actions=output:1
table=3,priority=9,ip,nw_tos=8,actions=output:1
priority=11,ipv6,ipv6_src=::1,actions=output:2
priority=12,dl_src=01:00:00:00:00:00/01:00:00:00:00:00,actions=mod_dl_src:02:00:00:00:00:01,output:2
cookie=0x5,priority=13,udp,actions=mod_nw_src:1.2.3.4,mod_tp_dst:99,output:1
priority=30,arp,actions=NORMAL
priority=31,icmp,icmp_type=8,actions=CONTROLLER:65535
priority=32,tcp,tcp_flags=+syn,actions=dec_ttl,output:3
priority=33,dl_vlan=5,actions=strip_vlan,output:2
priority=34,in_port=2,ip,nw_dst=192.168.0.0/16,actions=mod_vlan_vid:7,output:1
priority=35,ip,nw_ttl=3,actions=mod_nw_ttl:9,output:2
";

#[test]
fn plain_ovs_ofctl_drives_the_switch_in_openflow_1_0() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let _one = ofswitch::serial();
    let dir = TempDir::new("ofctl-default");
    let rules = dir.path().join("rules.txt");
    std::fs::write(&rules, "priority=5,actions=drop\n").unwrap();
    let sw = OfSwitch::start(dir.path(), "ofd", &rules, "orig", false);
    let t = sw.target();
    let t = t.as_str();

    // show: FEATURES_REPLY with the ports (1.0 carries them there), GET_CONFIG_REPLY.
    let show = ofctl_ok(&["show", t]);
    assert!(show.starts_with("OFPT_FEATURES_REPLY"), "{show}");
    assert!(show.contains("n_tables:255"), "{show}");
    for (i, name) in sw.port_names().iter().enumerate() {
        assert!(show.contains(&format!(" {}({name}): addr:", i + 1)), "port {name} in {show}");
    }
    assert!(show.contains("OFPT_GET_CONFIG_REPLY"), "{show}");

    // add-flow (1.0 FLOW_MOD and NXT_FLOW_MOD, NXT_FLOW_MOD_TABLE_ID for table 3) and add-flows.
    let lines: Vec<&str> = FLOWS.lines().collect();
    for l in &lines[..5] {
        ofctl_ok(&["add-flow", t, l]);
    }
    let file = dir.path().join("flows.txt");
    std::fs::write(&file, lines[5..].join("\n")).unwrap();
    ofctl_ok(&["add-flows", t, file.to_str().unwrap()]);
    let mut want = normal(FLOWS);
    want.extend(normal("priority=5,actions=drop"));

    // dump-flows: NXST_FLOW, every flow with its counters, as the switch holds them.
    let dump = ofctl_ok(&["dump-flows", t]);
    assert!(dump.starts_with("NXST_FLOW reply"), "{dump}");
    for l in dump.lines().skip(1) {
        for f in ["cookie=", "duration=", "table=", "n_packets=0", "n_bytes=0", "idle_age=", "priority="] {
            assert!(l.contains(f), "{f} in {l}");
        }
    }
    assert_eq!(dumped_flows(&dump), want, "{dump}");
    let held: BTreeSet<String> = normal(&ctl(&sw.sock, &["dump-rules"]));
    assert_eq!(dumped_flows(&dump).len(), held.len(), "ctl: {held:?}");
    // A selection (NXM in the request), a table.
    assert_eq!(dumped_flows(&ofctl_ok(&["dump-flows", t, "ipv6"])), normal(lines[2]));
    assert_eq!(dumped_flows(&ofctl_ok(&["dump-flows", t, "table=3"])), normal(lines[1]));
    assert_eq!(dumped_flows(&ofctl_ok(&["dump-flows", t, "cookie=0x5/-1"])), normal(lines[4]));

    // dump-aggregate: NXST_AGGREGATE.
    let agg = ofctl_ok(&["dump-aggregate", t]);
    assert_eq!(
        agg.trim(),
        format!("NXST_AGGREGATE reply (xid=0x4): packet_count=0 byte_count=0 flow_count={}", want.len())
    );

    // mod-flows (non-strict: every TCP flow), del-flows --strict, del-flows by cookie.
    ofctl_ok(&["mod-flows", t, "tcp,actions=output:2"]);
    ofctl_ok(&["del-flows", "--strict", t, "priority=5"]);
    ofctl_ok(&["del-flows", t, "cookie=0x5/-1"]);
    let mut want = normal(
        &FLOWS
            .lines()
            .filter(|l| !l.starts_with("cookie=0x5"))
            .map(|l| {
                if l.contains(",tcp,") {
                    format!("{},actions=output:2", l.split(",actions=").next().unwrap())
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n"),
    );
    assert_eq!(dumped_flows(&ofctl_ok(&["dump-flows", t])), want);
    // del-flows with a 1.0 match: every IPv6 flow.
    ofctl_ok(&["del-flows", t, "ipv6"]);
    want.retain(|f| !f.contains("ipv6"));
    assert_eq!(dumped_flows(&ofctl_ok(&["dump-flows", t])), want);

    // dump-ports, dump-tables, dump-ports-desc.
    let ports = ofctl_ok(&["dump-ports", t]);
    assert!(ports.starts_with("OFPST_PORT reply") && ports.contains(": 3 ports"), "{ports}");
    for p in 1..=3 {
        assert!(ports.contains(&format!("  port  {p}: rx pkts=")), "{ports}");
    }
    let tables = ofctl_ok(&["dump-tables", t]);
    assert!(tables.starts_with("OFPST_TABLE reply"), "{tables}");
    let active0: usize = want.iter().filter(|f| !f.contains("table=3")).count();
    assert!(tables.contains(&format!("  table 0:\n    active={active0}, lookup=")), "{tables}");
    assert!(tables.contains("  table 3:\n    active=1, lookup="), "{tables}");
    let desc = ofctl_ok(&["dump-ports-desc", t]);
    assert!(desc.starts_with("OFPST_PORT_DESC reply"), "{desc}");
    for (i, name) in sw.port_names().iter().enumerate() {
        assert!(desc.contains(&format!(" {}({name}): addr:", i + 1)), "{desc}");
    }

    // probe (ECHO).
    ofctl_ok(&["probe", t]);

    // mod-port (more in tests/ofctl_async.rs and port_mod_bits.rs, on veths): `no-packet-in`
    // and `no-flood` are kept and shown; 1.3 has no NO_FLOOD bit, so ovs-ofctl asks for no
    // change there (as against Open vSwitch).
    ofctl_ok(&["mod-port", t, "1", "no-packet-in"]);
    let show = ofctl_ok(&["show", t]);
    let p1 = show.split(&format!(" 1({}): addr:", sw.port_names()[0])).nth(1).unwrap();
    assert!(p1.lines().nth(1).unwrap().contains("config:     NO_PACKET_IN"), "{show}");
    ofctl_ok(&["mod-port", t, "1", "packet-in"]);
    ofctl_ok(&["mod-port", t, "1", "no-flood"]);
    let show = ofctl_ok(&["show", t]);
    let p1 = show.split(&format!(" 1({}): addr:", sw.port_names()[0])).nth(1).unwrap();
    assert!(p1.lines().nth(1).unwrap().contains("config:     NO_FLOOD"), "{show}");
    ofctl_ok(&["mod-port", t, "1", "flood"]);
    let of13 = sw.ofctl("OpenFlow13", &["mod-port", t, "1", "no-flood"]);
    assert!(of13.status.success(), "{of13:?}");
    let show = ofctl_ok(&["show", t]);
    let p1 = show.split(&format!(" 1({}): addr:", sw.port_names()[0])).nth(1).unwrap();
    assert!(p1.lines().nth(1).unwrap().contains("config:     0"), "{show}");

    // What 1.0 and rqvs refuse is an OpenFlow error ovs-ofctl names, and the switch goes on:
    // a VLAN PCP rewrite on a flow without a VLAN (OVS's NX 1.0 code), a queue statistics request.
    let refused = ofctl(&["add-flow", t, "priority=8,ip,actions=mod_vlan_pcp:3,output:2"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("OFPBAC_MATCH_INCONSISTENT"), "{refused:?}");
    let queue = ofctl(&["queue-stats", t]);
    assert!(String::from_utf8_lossy(&queue.stdout).contains("OFPT_ERROR (xid=0x2): OFPBRC_BAD_STAT"), "{queue:?}");
    assert_eq!(dumped_flows(&ofctl_ok(&["dump-flows", t])), want);

    // A flow whose actions 1.0 cannot carry (a bare push_vlan, added in 1.3): the dump is
    // refused with EPERM, nothing half printed; without it, dumps work again.
    let pushed = "priority=40,ip,actions=push_vlan:0x8100,output:1";
    sw.ofctl_ok("OpenFlow13", &["add-flow", t, pushed]);
    let refused = ofctl(&["dump-flows", t]);
    assert!(String::from_utf8_lossy(&refused.stdout).contains("OFPT_ERROR (xid=0x4): OFPBRC_EPERM"), "{refused:?}");
    assert!(!String::from_utf8_lossy(&refused.stdout).contains("cookie="), "{refused:?}");
    ofctl_ok(&["del-flows", "--strict", t, "priority=40,ip"]);
    assert_eq!(dumped_flows(&ofctl_ok(&["dump-flows", t])), want);
}

/// `dump-flows` and `dump-aggregate` print, line for line, what they print against Open
/// vSwitch 3.1 holding the same flows (`duration=` and `idle_age=` aside).
#[test]
fn dump_flows_prints_what_it_prints_against_open_vswitch() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let Some(ovs) = rqvs_testkit::ovs::start_or_skip("ofctl-default") else { return };
    let _one = ofswitch::serial();
    let dir = TempDir::new("ofctl-default-ovs");
    let rules = dir.path().join("rules.txt");
    std::fs::write(&rules, "").unwrap();
    let sw = OfSwitch::start(dir.path(), "ofo", &rules, "orig", false);
    let file = dir.path().join("flows.txt");
    std::fs::write(&file, FLOWS).unwrap();
    let mgmt = ovs.mgmt();
    ofctl_ok(&["del-flows", &mgmt]);
    for t in [sw.target(), mgmt.clone()] {
        ofctl_ok(&["add-flows", &t, file.to_str().unwrap()]);
    }
    for sel in [None, Some("ip"), Some("table=3"), Some("cookie=0x5/-1")] {
        let dump = |t: &str| {
            let mut a = vec!["dump-flows", t];
            a.extend(sel);
            ofctl_ok(&a)
        };
        let (ours, theirs) = (dump(&sw.target()), dump(&mgmt));
        assert_eq!(dump_lines(&ours), dump_lines(&theirs), "dump-flows {sel:?}:\n{ours}\n--- Open vSwitch:\n{theirs}");
        assert!(!dump_lines(&ours).is_empty());
    }
    let agg = |t: &str| ofctl_ok(&["dump-aggregate", t]);
    assert_eq!(agg(&sw.target()), agg(&mgmt));
}
