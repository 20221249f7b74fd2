//! `rqvs switch --openflow` driven by the real `ovs-ofctl`, in OpenFlow 1.3 and 1.4, without
//! `--no-names` (the switch answers TABLE_FEATURES and PORT_DESC, which `ovs-ofctl` asks for to
//! map names): `show`, `add-flow`, `add-flows FILE`, `dump-flows` (parsed back and compared as
//! a set with what was loaded), `del-flows` with a match and with a cookie, `del-flows
//! --strict`, `mod-flows` and `--strict mod-flows`, `--bundle add-flows` (all or nothing),
//! refused flow-mods (a missing group: BAD_OUT_GROUP; `check_overlap`: OVERLAP) leaving the table alone, `dump-table-features`, and `rqvs ctl dump-rules`
//! agreeing throughout. As root, the switch runs on veths between private namespaces and every
//! operation is checked by traffic: frames built from the flows — the table's, and those just
//! added, modified or deleted — must leave exactly as the reference winner of the table the
//! switch should then hold says (`tests/ofswitch/mod.rs`). ORIG, CCACHE and CFLOWS, each in both
//! versions across the tests here and in `tests/openflow_traffic.rs` (the acl1_10k table).
//!
//! A raw client checks the errors: unknown types, malformed, truncated and oversize messages,
//! wrong versions, a HELLO with no common version, and several connections at once; the table
//! never changes. The acl1 1K table loads and dumps with `--no-names` (names never asked for).
//!
//! Skipped (with the reason printed) when `ovs-ofctl` is missing, unless `RQVS_REQUIRE_OVS=1`;
//! without root the OpenFlow side runs on pcap ports and the traffic checks are skipped, unless
//! `RQVS_REQUIRE_NETNS=1`.

mod common;
mod ofswitch;
use common::{ctl, TempDir};
use ofswitch::{matches_of, normal, selected, with_actions, OfSwitch};

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use rqvs_flow::Match;

/// A few dozen flows of several shapes: UDP and TCP on exact ports, prefixes, MACs, cookies.
fn generated() -> (Vec<String>, Vec<String>) {
    let mut udp = Vec::new();
    let mut tcp = Vec::new();
    for i in 0..24u32 {
        udp.push(format!(
            "cookie=0x{:x},priority={},udp,nw_src=10.{}.0.0/16,tp_dst={},actions=output:{}",
            0x100 + i % 3,
            1000 + i,
            i,
            2000 + i,
            2 + i % 2
        ));
        tcp.push(format!(
            "priority={},tcp,dl_src=02:00:00:00:00:{:02x},nw_dst=192.168.{}.0/24,tp_src={},actions=mod_dl_dst:02:00:00:00:01:{:02x},output:3",
            500 + i,
            i,
            i,
            3000 + i,
            i
        ));
    }
    (udp, tcp)
}

/// The matches of flow text.
fn m(text: &str) -> Vec<Match> {
    matches_of(&normal(text))
}

/// The traffic check after an operation: two frames of every flow of `table` and of `focus`
/// (flows just changed or deleted); with traffic, many must have a winner.
fn traffic(sw: &mut OfSwitch, table: &BTreeSet<String>, focus: &[Match], what: &str) {
    let mut flows = matches_of(table);
    flows.extend_from_slice(focus);
    let (n, hits) = sw.check_traffic(table, &flows, 2, what);
    let weak = n < table.len().min(10) || 2 * hits < n;
    assert!(!sw.has_traffic() || !weak, "{what}: a weak workload ({n} frames, {hits} with a winner)");
}

/// One switch, one version: every operation, each followed by a dump and the traffic check.
fn programs(version: &str, design: &str) {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let _one = ofswitch::serial();
    let tag = format!("ofp{}{design}", &version[8..]);
    let tmp = TempDir::new(&format!("cli-openflow-{version}-{design}"));
    let base = "priority=5,icmp,actions=output:2\npriority=7,arp,actions=drop\n";
    let rules = tmp.join("rules.txt");
    std::fs::write(&rules, base).unwrap();
    let mut sw = OfSwitch::start(&tmp.0, &tag, &rules, design, true);
    let target = sw.target();
    let t = target.as_str();

    // show: 255 tables, the three ports numbered 1.. as the switch numbers them, named.
    let out = sw.ofctl(version, &["show", t]);
    let show = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{show}{}", String::from_utf8_lossy(&out.stderr));
    assert!(show.contains("n_tables:255"), "{show}");
    for (i, name) in sw.port_names().iter().enumerate() {
        assert!(show.contains(&format!(" {}({name}):", i + 1)), "port {} in {show}", i + 1);
    }
    let mut all = normal(base);
    assert_eq!(sw.dump(version), all);
    traffic(&mut sw, &all, &[], "the rules the switch started with");

    // add-flow, then add-flows of a file: the dump is what was loaded.
    let one = "priority=60000,udp,tp_dst=53,actions=output:2";
    sw.ofctl_ok(version, &["add-flow", t, one]);
    all.extend(normal(one));
    assert_eq!(sw.dump(version), all);
    traffic(&mut sw, &all, &[], "add-flow");
    let (udp, tcp) = generated();
    let file = tmp.join("add.txt");
    std::fs::write(&file, format!("{}\n{}\n", udp.join("\n"), tcp.join("\n"))).unwrap();
    sw.ofctl_ok(version, &["add-flows", t, file.to_str().unwrap()]);
    all.extend(normal(&udp.join("\n")));
    all.extend(normal(&tcp.join("\n")));
    assert_eq!(all.len(), 2 + 1 + 48);
    assert_eq!(sw.dump(version), all, "{version}: dump-flows after add-flows");
    assert_eq!(sw.ctl_rules(), all, "rqvs ctl dump-rules agrees");
    let json: serde_json::Value = serde_json::from_str(&ctl(&sw.sock, &["--json", "show"])).unwrap();
    assert_eq!(json["rules"], 51);
    traffic(&mut sw, &all, &[], "add-flows");
    // A filtered dump and the aggregate.
    assert_eq!(ofswitch::dumped(&sw.ofctl_ok(version, &["dump-flows", t, "tcp"])), normal(&tcp.join("\n")));
    assert!(sw.ofctl_ok(version, &["dump-aggregate", t]).contains("flow_count=51"));

    // Adding an existing match and priority replaces it.
    let replaced = udp[0].replace("output:2", "output:3");
    sw.ofctl_ok(version, &["add-flow", t, &replaced]);
    all.remove(normal(&udp[0]).iter().next().unwrap());
    all.extend(normal(&replaced));
    assert_eq!(sw.dump(version), all);
    traffic(&mut sw, &all, &m(&replaced), "add-flow replacing a flow");

    // A refused flow-mod (a group that does not exist; an add with check_overlap that overlaps
    // a flow of its priority) changes nothing: UDP frames that miss every flow still leave
    // nowhere, ICMP frames from 10/8 still meet priority=5,icmp.
    let out = sw.ofctl(version, &["add-flow", t, "priority=1,udp,actions=group:77"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("OFPBAC_BAD_OUT_GROUP"), "{out:?}");
    let overlap = "check_overlap,priority=5,icmp,nw_src=10.0.0.0/8,actions=output:3";
    let out = sw.ofctl(version, &["add-flow", t, overlap]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("OFPFMFC_OVERLAP"), "{out:?}");
    assert_eq!(sw.ctl_rules(), all);
    let mut focus = m("priority=1,udp,actions=drop");
    focus.extend(m("priority=5,icmp,nw_src=10.0.0.0/8,actions=drop"));
    traffic(&mut sw, &all, &focus, "refused flow-mods");

    // del-flows with a match (non-strict): every UDP flow under 10.3.0.0/16 and more.
    let gone = selected(&all, "udp,nw_src=10.3.0.0/16", 0, 0);
    assert_eq!(gone.len(), 1);
    sw.ofctl_ok(version, &["del-flows", t, "udp,nw_src=10.3.0.0/16"]);
    all.retain(|f| !gone.contains(f));
    assert_eq!(sw.dump(version), all);
    traffic(&mut sw, &all, &matches_of(&gone), "del-flows with a match");
    // A cookie filter.
    let gone = selected(&all, "udp", 0x101, u64::MAX);
    assert_eq!(gone.len(), 8);
    sw.ofctl_ok(version, &["del-flows", t, "cookie=0x101/-1,udp"]);
    all.retain(|f| !gone.contains(f));
    assert_eq!(sw.dump(version), all);
    traffic(&mut sw, &all, &matches_of(&gone), "del-flows with a cookie");
    // --strict: only the exact match and priority; a wrong priority deletes nothing.
    let strict = "priority=500,tcp,dl_src=02:00:00:00:00:00,nw_dst=192.168.0.0/24,tp_src=3000";
    sw.ofctl_ok(version, &["--strict", "del-flows", t, &strict.replace("500", "501")]);
    assert_eq!(sw.dump(version), all);
    sw.ofctl_ok(version, &["--strict", "del-flows", t, strict]);
    all.remove(normal(&tcp[0]).iter().next().unwrap());
    assert_eq!(sw.dump(version), all);
    traffic(&mut sw, &all, &m(&tcp[0]), "del-flows --strict");

    // mod-flows: every TCP flow gets new actions, keeping match, priority and cookie.
    sw.ofctl_ok(version, &["mod-flows", t, "tcp,actions=output:2"]);
    let modded = selected(&all, "tcp", 0, 0);
    assert_eq!(modded.len(), 23);
    all = all.into_iter().map(|f| if modded.contains(&f) { with_actions(&f, "output:2") } else { f }).collect();
    assert_eq!(sw.dump(version), all);
    traffic(&mut sw, &all, &[], "mod-flows");
    // --strict mod-flows: one flow.
    let one_tcp = "priority=501,tcp,dl_src=02:00:00:00:00:01,nw_dst=192.168.1.0/24,tp_src=3001";
    sw.ofctl_ok(
        version,
        &["--strict", "mod-flows", t, &format!("{one_tcp},actions=mod_dl_src:02:00:00:00:0e:0e,output:3")],
    );
    all =
        all.into_iter()
            .map(|f| {
                if f.starts_with("priority=501,") {
                    with_actions(&f, "mod_dl_src:02:00:00:00:0e:0e,output:3")
                } else {
                    f
                }
            })
            .collect();
    assert_eq!(sw.dump(version), all);
    assert_eq!(sw.ctl_rules(), all, "rqvs ctl dump-rules agrees after mod-flows");
    traffic(&mut sw, &all, &m(&format!("{one_tcp},actions=drop")), "mod-flows --strict");
    // The slow path agrees: the strictly modified flow outputs to 3, the others to 2.
    let trace = |p: &str| ctl(&sw.sock, &["ofproto/trace", p]);
    let tr = trace("in_port=1,tcp,dl_src=02:00:00:00:00:01,nw_dst=192.168.1.9,tp_src=3001,tp_dst=80");
    assert!(
        tr.contains("priority 501") && tr.contains("Datapath actions: set(eth(src=02:00:00:00:0e:0e)),3"),
        "{design}: {tr}"
    );
    let tr = trace("in_port=1,tcp,dl_src=02:00:00:00:00:02,nw_dst=192.168.2.9,tp_src=3002,tp_dst=80");
    assert!(tr.contains("priority 502") && tr.contains("Datapath actions: 2"), "{design}: {tr}");
    let json: serde_json::Value = serde_json::from_str(&ctl(&sw.sock, &["--json", "show"])).unwrap();
    assert_eq!(json["rules"], all.len());

    // del-flows without a match empties the table: every frame misses.
    let before = matches_of(&all);
    sw.ofctl_ok(version, &["del-flows", t]);
    assert!(sw.dump(version).is_empty());
    assert!(sw.ctl_rules().is_empty());
    sw.check_traffic(&BTreeSet::new(), &before, 2, "del-flows of everything");

    // A clean stop.
    let (status, err) = sw.exit();
    assert!(status.success(), "{err}");
}

#[test]
fn ovs_ofctl_programs_a_running_switch_orig_of13() {
    programs("OpenFlow13", "orig");
}

#[test]
fn ovs_ofctl_programs_a_running_switch_ccache_of14() {
    programs("OpenFlow14", "ccache");
}

#[test]
fn ovs_ofctl_programs_a_running_switch_cflows_of14() {
    programs("OpenFlow14", "cflows");
}

/// Every design takes a converted ClassBench table (acl1 1K: 1,186 flows, `tcp_flags`, port
/// prefixes, cookies) through `ovs-ofctl --no-names add-flows` (the one test here that keeps
/// `--no-names`: `ovs-ofctl` then asks for no table or port names), and its dump — several
/// MULTIPART_REPLY parts — is that table; the slow path then answers with the loaded flows
/// (`ofproto/trace`). The listener in its short form, `ptcp:PORT`.
#[test]
fn a_converted_classbench_table_loads_and_dumps_in_every_design() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().and_then(Path::parent).unwrap();
    let acl = root.join("data/default/acl1_1k_rules.xz");
    for (design, version) in [("orig", "OpenFlow13"), ("ccache", "OpenFlow14"), ("cflows", "OpenFlow13")] {
        let tmp = TempDir::new(&format!("cli-openflow-acl-{design}"));
        let flows = tmp.join("acl.ofctl");
        let out = common::rqvs(&[
            "convert",
            "rules",
            acl.to_str().unwrap(),
            "--to",
            "ofctl",
            "--actions",
            "output:2",
            "-o",
            flows.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = std::fs::read_to_string(&flows).unwrap();
        let rules = tmp.join("rules.txt");
        std::fs::write(&rules, "priority=1,arp,actions=drop\n").unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let listen = format!("ptcp:{port}");
        let mut sw = OfSwitch::start_on(&tmp.0, "", &rules, design, false, Some((&listen, port)));
        let t = sw.target();
        sw.ofctl_ok(version, &["--no-names", "del-flows", &t]);
        sw.ofctl_ok(version, &["--no-names", "add-flows", &t, flows.to_str().unwrap()]);
        let want = normal(&text);
        assert_eq!(want.len(), 1186);
        let dump = sw.ofctl_ok(version, &["--no-names", "dump-flows", &t]);
        assert_eq!(ofswitch::dumped(&dump), want, "{design} {version}");
        assert_eq!(sw.ctl_rules(), want, "{design}: rqvs ctl dump-rules");
        // The first flow of the file wins for a packet made from it.
        let trace = ctl(
            &sw.sock,
            &["ofproto/trace", "in_port=1,tcp,nw_src=14.114.240.160,nw_dst=78.162.59.75,tp_dst=31000,tcp_flags=0x010"],
        );
        assert!(trace.contains("priority 927") && trace.contains("Datapath actions: 2"), "{design}: {trace}");
        assert!(sw.exit().0.success());
    }
}

/// `ovs-ofctl --bundle` (OpenFlow 1.4's bundles, OVS's ONF extension in 1.3): a bundle's flows
/// appear together, a bundle with one refused flow-mod changes nothing, and a bundled delete
/// and add apply together — each checked by traffic.
fn bundles(version: &str, design: &str) {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let _one = ofswitch::serial();
    let tmp = TempDir::new(&format!("cli-openflow-bundle-{version}-{design}"));
    let base = "priority=5,icmp,actions=output:2\n";
    let rules = tmp.join("rules.txt");
    std::fs::write(&rules, base).unwrap();
    let mut sw = OfSwitch::start(&tmp.0, &format!("ofb{}{design}", &version[8..]), &rules, design, true);
    let t = sw.target();
    let (udp, tcp) = generated();
    let good = format!("{}\n{}\n", udp.join("\n"), tcp.join("\n"));
    let file = tmp.join("good.txt");
    std::fs::write(&file, &good).unwrap();
    sw.ofctl_ok(version, &["--bundle", "add-flows", &t, file.to_str().unwrap()]);
    let mut all = normal(base);
    all.extend(normal(&good));
    assert_eq!(sw.dump(version), all, "{version}: after the bundle");
    traffic(&mut sw, &all, &[], "--bundle add-flows");
    // One bad flow (naming a missing group) among good ones: the bundle fails, the table is
    // unchanged.
    let bad_flows = "priority=9,udp,tp_dst=5,actions=output:2\npriority=9,udp,tp_dst=6,actions=group:4\n";
    let bad = tmp.join("bad.txt");
    std::fs::write(&bad, bad_flows).unwrap();
    let out = sw.ofctl(version, &["--bundle", "add-flows", &t, bad.to_str().unwrap()]);
    assert!(!out.status.success(), "{version}: a bundle with a bad flow-mod is refused");
    assert_eq!(sw.dump(version), all, "{version}: nothing of it applied");
    traffic(&mut sw, &all, &m("priority=9,udp,tp_dst=5,actions=drop"), "a refused bundle");
    // A bundled delete and add together.
    let mixed = tmp.join("mixed.txt");
    std::fs::write(&mixed, "delete udp\nadd priority=77,udp,tp_dst=7,actions=output:3\n").unwrap();
    sw.ofctl_ok(version, &["--bundle", "add-flows", &t, mixed.to_str().unwrap()]);
    let gone = selected(&all, "udp", 0, 0);
    assert_eq!(gone.len(), 24);
    all.retain(|f| !gone.contains(f));
    all.extend(normal("priority=77,udp,tp_dst=7,actions=output:3"));
    assert_eq!(sw.dump(version), all, "{version}: delete + add");
    assert_eq!(sw.ctl_rules(), all);
    traffic(&mut sw, &all, &matches_of(&gone), "a bundled delete and add");
    assert!(sw.exit().0.success());
}

#[test]
fn bundles_commit_all_or_nothing_orig_of13() {
    bundles("OpenFlow13", "orig");
}

#[test]
fn bundles_commit_all_or_nothing_cflows_of13() {
    bundles("OpenFlow13", "cflows");
}

#[test]
fn bundles_commit_all_or_nothing_ccache_of14() {
    bundles("OpenFlow14", "ccache");
}

/// `ovs-ofctl dump-table-features` (1.3 and 1.4) prints what rqvs's tables support: 255
/// tables (0 "classifier", the others "tableN", each the same but for its next tables),
/// metadata matched and written whole; instructions meter, apply/clear/write actions,
/// write_metadata and goto_table (not in table 254, the last); the same actions in write and
/// apply lists (output, group, set_field, strip_vlan, push_vlan, dec_ttl); set_field of every
/// writable field; next tables the later ones; every field rqvs matches (the wide key's too),
/// masked where it takes a mask. Each item parsed from what `ovs-ofctl` printed.
#[test]
fn dump_table_features_says_what_the_tables_support() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let tmp = TempDir::new("cli-openflow-features");
    let rules = tmp.join("rules.txt");
    std::fs::write(&rules, "priority=5,icmp,actions=output:2\n").unwrap();
    let mut sw = OfSwitch::start(&tmp.0, "", &rules, "orig", false);
    let t = sw.target();
    for version in ["OpenFlow13", "OpenFlow14"] {
        let out = sw.ofctl_ok(version, &["dump-table-features", &t]);
        // `  key: value` lines of table 0, the value split into words ("eth_{src,dst}" expanded).
        let table0 = out.split("  table 1 ").next().unwrap();
        let item = |key: &str| -> Option<BTreeSet<String>> {
            let line = table0.lines().find(|l| l.trim_start().starts_with(&format!("{key}:")))?;
            Some(line.split_once(':').unwrap().1.split_whitespace().flat_map(expand).collect())
        };
        let set = |s: &str| s.split_whitespace().map(String::from).collect::<BTreeSet<String>>();
        assert!(out.contains("  table 0 (\"classifier\"):") && out.contains("  table 1 (\"table1\"): ditto"), "{out}");
        assert!(out.contains("  table 254 (\"table254\"):") && !out.contains("table 255"), "{out}");
        assert!(table0.contains("max_entries=4294967295"), "{out}");
        assert!(table0.contains("metadata: match=0xffffffffffffffff write=0xffffffffffffffff"), "{out}");
        assert!(table0.contains("next tables: 1-254"), "{out}");
        let all = "meter apply_actions clear_actions write_actions write_metadata goto_table";
        assert_eq!(item("instructions"), Some(set(all)), "{out}");
        assert_eq!(item("actions"), Some(set("output group set_field strip_vlan push_vlan dec_ttl")), "{out}");
        assert!(table0.contains("Write-Actions and Apply-Actions features:"), "the same lists: {out}");
        let writable = "metadata in_port_oxm eth_src eth_dst vlan_vid vlan_pcp ip_src ip_dst ipv6_src ipv6_dst \
                        ipv6_label ip_dscp nw_ecn nw_ttl arp_op arp_spa arp_tpa arp_sha arp_tha tcp_src tcp_dst \
                        udp_src udp_dst sctp_src sctp_dst icmp_type icmp_code icmpv6_type icmpv6_code nd_target \
                        nd_sll nd_tll";
        assert_eq!(item("supported on Set-Field"), Some(set(writable)), "{out}");
        let masked = "metadata eth_src eth_dst vlan_tci vlan_vid ip_src ip_dst ipv6_src ipv6_dst ipv6_label ip_frag \
                      arp_spa arp_tpa arp_sha arp_tha tcp_src tcp_dst tcp_flags udp_src udp_dst sctp_src sctp_dst \
                      nd_target nd_sll nd_tll";
        assert_eq!(item("arbitrary mask"), Some(set(masked)), "{out}");
        let exact = "in_port_oxm eth_type vlan_pcp nw_proto nw_ttl ip_dscp nw_ecn arp_op icmp_type icmp_code icmpv6_type icmpv6_code";
        assert_eq!(item("exact match or wildcard"), Some(set(exact)), "{out}");
        assert!(item("must exact match").is_none(), "every field can be wildcarded: {out}");
        // The last table: no goto_table, no next tables.
        let last = out.split("  table 254 ").nth(1).unwrap();
        assert!(
            last.contains("instructions: meter apply_actions clear_actions write_actions write_metadata\n"),
            "{out}"
        );
        assert!(!last.contains("next tables"), "{out}");
        if version == "OpenFlow14" {
            assert!(out.contains("eviction: not supported") && out.contains("vacancy events: not supported"), "{out}");
        }
    }
    assert!(sw.exit().0.success());
}

/// `eth_{src,dst}` → `eth_src`, `eth_dst` (how `ovs-ofctl` abbreviates field lists).
fn expand(word: &str) -> Vec<String> {
    match word.split_once('{') {
        Some((pre, rest)) => rest.trim_end_matches('}').split(',').map(|s| format!("{pre}{s}")).collect(),
        None => vec![word.to_string()],
    }
}

/// `rqvs bench openflow` on the embedded workload with `pmds` PMDs: every design streams its
/// flow-mods through the channel (CFLOWS' pipelined, `tests/openflow_pipelined.rs`) while
/// traffic flows, with no error and no frame decided wrongly, and the bundle becomes visible (a
/// frame decided by one of its flows after the commit).
fn bench_openflow_checks_every_frame(pmds: usize) {
    // Not beside the traffic checks: it loads both cores.
    let _one = ofswitch::serial();
    let pmds = pmds.to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_rqvs"))
        .args(["bench", "openflow", "--pmds", &pmds, "--flow-mods", "4000", "--bundle", "40", "--json", "-"])
        // `tests/openflow_pipelined.rs`' hook is not for this one.
        .env_remove("RQVS_TEST_REFUSE_PRIORITY")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let designs = j["designs"].as_array().unwrap();
    assert_eq!(designs.len(), 3);
    for d in designs {
        let name = d["design"].as_str().unwrap();
        assert_eq!(d["mismatches"], 0, "{name} ({pmds} PMDs): {d}");
        assert_eq!(d["errors"], 0, "{name} ({pmds} PMDs)");
        assert!(d["flow_mods"].as_u64().unwrap() >= 4000, "{name} ({pmds} PMDs)");
        assert!(d["flow_mods_per_s"].as_f64().unwrap() > 0.0, "{name} ({pmds} PMDs)");
        assert!(
            d["frames_exact"].as_u64().unwrap() > 0 && d["frames_during"].as_u64().unwrap() > 0,
            "{name} ({pmds} PMDs): {d}"
        );
        assert!(
            d["bundle"]["visible_s"].as_f64().is_some(),
            "{name} ({pmds} PMDs): the bundle never became visible: {d}"
        );
    }
}

#[test]
fn bench_openflow_streams_flow_mods_with_every_frame_checked() {
    bench_openflow_checks_every_frame(1);
}

#[test]
fn bench_openflow_with_two_pmds_checks_every_frame() {
    bench_openflow_checks_every_frame(2);
}
