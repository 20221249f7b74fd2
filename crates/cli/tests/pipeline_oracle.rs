//! Real Open vSwitch 3.1 as the oracle of a generated two-table pipeline (issue 36): `rqvs gen
//! pipeline` makes an ACL (1K acl1 rules: goto_table:1 or drop; with `--extras` some permits
//! write metadata, push a VLAN tag or put an output in the action set) and a forwarding table
//! (1K ipc1 destination prefixes, LPM, a miss flow), and a trace for it. The same flows go to
//! OVS (`ovs-ofctl --bundle add-flows`), and for ≥ 300 distinct packets of the trace
//! `ovs-appctl ofproto/trace` and `rqvs trace` must print the same rule chain (every `T. ...`
//! line: 100%), the same datapath actions (100%) and the same megaflow (≥ 99%).
//! `generated_pipeline_frames_are_byte_identical_to_ovs`: the frames out of `rqvs switch` for
//! the same pipeline (with rewrites) equal OVS's, byte for byte, every design, 1 and 2 PMDs.

use std::path::Path;

mod common;
use common::{rqvs, TempDir};

/// Packets compared with OVS.
const PACKETS: usize = 320;

/// A trace packet as an ofproto/trace flow, for TCP and UDP (the protocols whose ports both
/// tools read the same way from a ClassBench trace).
fn flow(k: &rqvs_flow::FlowKey) -> Option<String> {
    let (src, dst) = (std::net::Ipv4Addr::from(k.nw_src), std::net::Ipv4Addr::from(k.nw_dst));
    let ip = format!("in_port=1,{{}},nw_src={src},nw_dst={dst},nw_ttl=64");
    match k.nw_proto {
        6 => Some(format!(
            "{},tcp_src={},tcp_dst={},tcp_flags={:#05x}",
            ip.replace("{}", "tcp"),
            k.tp_src,
            k.tp_dst,
            k.tcp_flags
        )),
        17 => Some(format!("{},udp_src={},udp_dst={}", ip.replace("{}", "udp"), k.tp_src, k.tp_dst)),
        _ => None,
    }
}

/// The lines both tools print alike: the lookups (`T. ...`, at any indentation), `Megaflow:`
/// and `Datapath actions:`.
fn keep(text: &str) -> (Vec<String>, String, String) {
    let mut chain = Vec::new();
    let (mut megaflow, mut actions) = (String::new(), String::new());
    for l in text.lines() {
        let t = l.trim_start();
        if t.split_once(". ").is_some_and(|(n, _)| n.parse::<u8>().is_ok()) {
            chain.push(l.to_string());
        } else if let Some(m) = l.strip_prefix("Megaflow: ") {
            megaflow = m.to_string();
        } else if let Some(a) = l.strip_prefix("Datapath actions: ") {
            actions = a.to_string();
        }
    }
    (chain, megaflow, actions)
}

/// rqvs's datapath actions in OVS's notation where they differ: rqvs prints a pushed tag as
/// `push_vlan(tpid=0x8100),set(vlan_vid=TCI)` (the push, then the VID written into it; `TCI`
/// with the CFI bit, 0x1000), OVS as one `push_vlan(vid=VID,pcp=0)`. Nothing else is rewritten.
fn ovs_notation(actions: &str) -> String {
    const PUSH: &str = "push_vlan(tpid=0x8100),set(vlan_vid=";
    let mut out = String::new();
    let mut rest = actions;
    while let Some(i) = rest.find(PUSH) {
        let after = &rest[i + PUSH.len()..];
        let Some(end) = after.find(')') else { break };
        let Ok(tci) = after[..end].parse::<u16>() else { break };
        out.push_str(&rest[..i]);
        out.push_str(&format!("push_vlan(vid={},pcp=0)", tci & 0xfff));
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

fn vsctl(ovs: &rqvs_testkit::ovs::Ovs, args: &[&str]) {
    let db = format!("--db=unix:{}", ovs.dir.join("db.sock").display());
    let out = std::process::Command::new("ovs-vsctl").arg(db).args(args).output().expect("run ovs-vsctl");
    assert!(out.status.success(), "ovs-vsctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn gen(dir: &Path) -> (String, Vec<String>) {
    let (text, packets) = gen_keys(dir);
    (text, packets.into_iter().map(|(f, _)| f).collect())
}

/// The generated pipeline's flows and ≥ [`PACKETS`] distinct TCP/UDP packets of its trace, each
/// as an ofproto/trace flow and as its key.
fn gen_keys(dir: &Path) -> (String, Vec<(String, rqvs_flow::FlowKey)>) {
    let (rules, trace) = (dir.join("pipeline.flows"), dir.join("pipeline.trace"));
    let out = rqvs(&[
        "gen",
        "pipeline",
        "--acl",
        "1000",
        "--fwd",
        "1000",
        "--extras",
        "--ports",
        "4",
        "--rng-seed",
        "7",
        "-o",
        rules.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
        "--packets",
        "5000",
        "--locality",
        "uniform",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&rules).unwrap();
    let mut seen = std::collections::HashSet::new();
    let entries = rqvs_flow::formats::trace::read_trace(&trace).unwrap();
    let flows: Vec<(String, rqvs_flow::FlowKey)> = entries
        .iter()
        .filter_map(|e| flow(&e.key).map(|f| (f, e.key)))
        .filter(|(f, _)| seen.insert(f.clone()))
        .take(PACKETS)
        .collect();
    (text, flows)
}

#[test]
fn notation_of_a_pushed_tag() {
    assert_eq!(ovs_notation("push_vlan(tpid=0x8100),set(vlan_vid=4196),3"), "push_vlan(vid=100,pcp=0),3");
    assert_eq!(ovs_notation("2,push_vlan(tpid=0x8100),set(vlan_vid=4097),4"), "2,push_vlan(vid=1,pcp=0),4");
    assert_eq!(ovs_notation("drop"), "drop");
}

#[test]
fn generated_pipeline_traces_as_ovs() {
    let Some(ovs) = rqvs_testkit::ovs::start_or_skip("cli-pipeline-oracle") else { return };
    // The forwarding rules output to ports 2..=5.
    for p in 3..=5 {
        let name = format!("p{p}");
        vsctl(
            &ovs,
            &["add-port", "br0", &name, "--", "set", "interface", &name, "type=dummy", &format!("ofport_request={p}")],
        );
    }
    let dir = TempDir::new("pipeline-oracle");
    let (flows_text, packets) = gen(dir.path());
    assert_eq!(packets.len(), PACKETS, "the trace has {PACKETS} distinct TCP/UDP packets");
    assert!(
        flows_text.contains("table=1,") && flows_text.contains("push_vlan") && flows_text.contains("write_metadata")
    );
    ovs.replace_flows(&flows_text).unwrap();
    let rules = dir.join("pipeline.flows");
    let params: Vec<Vec<String>> = packets.iter().map(|p| vec!["br0".to_string(), p.clone()]).collect();
    let theirs = ovs.call_many("ofproto/trace", &params, 64).unwrap();
    // rqvs trace, one process per packet, 4 at a time.
    let ours: Vec<String> = std::thread::scope(|s| {
        let chunks: Vec<_> = packets
            .chunks(PACKETS.div_ceil(4))
            .map(|chunk| {
                let rules = rules.to_str().unwrap();
                s.spawn(move || {
                    chunk
                        .iter()
                        .map(|p| {
                            let out = rqvs(&["trace", "--rules", rules, p]);
                            assert!(out.status.success(), "{p}: {}", String::from_utf8_lossy(&out.stderr));
                            String::from_utf8(out.stdout).unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        chunks.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let (mut megaflows_equal, mut reached_table_1, mut chain_diffs, mut action_diffs) = (0, 0, Vec::new(), Vec::new());
    let mut megaflow_diffs = Vec::new();
    // Packets whose walk (in OVS's words) ran each of the extras.
    let ran = |what: &str| theirs.iter().filter(|t| t.contains(what)).count();
    let extras = [ran("write_metadata:"), ran("push_vlan:"), ran("write_actions(")];
    for ((p, o), t) in packets.iter().zip(&ours).zip(&theirs) {
        let (oc, om, oa) = keep(o);
        let (tc, tm, ta) = keep(t);
        reached_table_1 += usize::from(tc.iter().any(|l| l.trim_start().starts_with("1. ")));
        if oc != tc {
            chain_diffs.push(format!("{p}:\n  rqvs {oc:?}\n  OVS  {tc:?}"));
        }
        if ovs_notation(&oa) != ta {
            action_diffs.push(format!("{p}: rqvs '{oa}', OVS '{ta}'"));
        }
        if om == tm {
            megaflows_equal += 1;
        } else {
            megaflow_diffs.push(format!("{p}:\n  rqvs {om}\n  OVS  {tm}"));
        }
    }
    eprintln!(
        "{} packets: {reached_table_1} reached table 1 (write_metadata, push_vlan, write_actions: {extras:?}); chains differ {}, actions differ {}, megaflows equal {megaflows_equal}",
        packets.len(),
        chain_diffs.len(),
        action_diffs.len()
    );
    assert!(chain_diffs.is_empty(), "{} chains differ:\n{}", chain_diffs.len(), chain_diffs.join("\n"));
    assert!(action_diffs.is_empty(), "{} datapath actions differ:\n{}", action_diffs.len(), action_diffs.join("\n"));
    assert!(
        megaflows_equal * 100 >= packets.len() * 99,
        "megaflows equal {megaflows_equal} of {}:\n{}",
        packets.len(),
        megaflow_diffs.join("\n")
    );
    assert!(reached_table_1 * 2 > packets.len(), "most packets pass table 0 ({reached_table_1})");
    assert!(extras.iter().all(|&n| n > 0), "metadata, VLAN push, action set each run: {extras:?}");
}

/// `rqvs compare` on a generated pipeline: every design runs both tables, and the verification
/// (the pipeline walk over a reference classifier per table) finds no mismatch in any.
#[test]
fn compare_runs_a_generated_pipeline_without_mismatches() {
    let dir = TempDir::new("pipeline-compare");
    let (rules, trace) = (dir.join("p.flows"), dir.join("p.trace"));
    let out = rqvs(&[
        "gen",
        "pipeline",
        "--acl",
        "1000",
        "--fwd",
        "1000",
        "--extras",
        "-o",
        rules.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
        "--packets",
        "20000",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json = dir.join("c.json");
    let out = rqvs(&[
        "compare",
        "--rules",
        rules.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
        "--verify",
        "3000",
        "--json",
        json.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let mut designs = 0;
    for l in text.lines().filter(|l| l.starts_with(['o', 'c']) && l.contains("/3000")) {
        designs += 1;
        assert!(l.contains(" 0/3000 "), "{l}");
    }
    assert_eq!(designs, 3, "{text}");
}

/// The generated pipeline with rewrites in its forwarding table, so that frames change on the
/// way: every fifth forwarding flow each decrements the TTL and rewrites the source MAC, writes
/// the DSCP, pops the VLAN tag table 0 pushed (a flow of its own for tagged packets), or
/// outputs twice around a TTL write.
fn with_rewrites(text: &str) -> String {
    let mut out = String::new();
    let mut i = 0;
    for line in text.lines() {
        let fwd = line.contains("table=1,") && !line.contains("priority=0,");
        match line.split_once("actions=output:") {
            Some((m, port)) if fwd => {
                i += 1;
                let actions = match i % 5 {
                    1 => format!("dec_ttl,mod_dl_src:02:00:00:00:00:99,output:{port}"),
                    2 => format!("set_field:46->ip_dscp,output:{port}"),
                    3 => {
                        // pop_vlan needs a tag in the match (OpenFlow 1.1+): tagged packets of
                        // this prefix get a flow of their own, above every untagged one.
                        let (prio, rest) = m.trim_start_matches("priority=").split_once(',').unwrap();
                        let prio: u32 = prio.parse().unwrap();
                        out.push_str(&format!(
                            "priority={},{rest}vlan_tci=0x1000/0x1000,actions=pop_vlan,output:{port}\n",
                            prio + 1000
                        ));
                        format!("output:{port}")
                    }
                    4 => format!("output:{port},mod_nw_ttl:9,output:2"),
                    // Groups ([`GROUPS`]), on four of each five of the rest.
                    _ => match (i / 5) % 5 {
                        0 => format!("output:{port}"),
                        g => format!("group:{g}"),
                    },
                };
                out.push_str(&format!("{m}actions={actions}\n"));
            }
            _ => out.push_str(&format!("{line}\n")),
        }
    }
    out
}

/// The groups of the frames' pipeline, in `ovs-ofctl add-group` syntax: ALL with three buckets,
/// one of them a rewrite; INDIRECT with a rewrite; FAST_FAILOVER whose first bucket watches a
/// live port; SELECT with one bucket — with more, rqvs's choice (its own hash of the flow) would
/// differ from OVS's for the same packet, which is documented, not a bug this test can see.
const GROUPS: [&str; 4] = [
    "group_id=1,type=all,bucket=actions=output:3,bucket=actions=mod_dl_src:02:00:00:00:00:77,output:4,bucket=actions=output:5",
    "group_id=2,type=indirect,bucket=actions=set_field:10->ip_dscp,output:4",
    "group_id=3,type=fast_failover,bucket=watch_port:2,actions=output:2,bucket=watch_port:3,actions=output:3",
    "group_id=4,type=select,bucket=actions=output:5",
];

/// [`GROUPS`] as rqvs's groups; `mutated`: group 1's first bucket outputs to port 2, not 3.
fn groups(mutated: bool) -> Vec<rqvs_flow::group::Group> {
    use rqvs_flow::group::{Bucket, Group, GroupType};
    let acts =
        |s: &str| rqvs_flow::formats::ofctl::parse_flows("g", &format!("actions={s}\n")).unwrap().remove(0).actions;
    let first = if mutated { "output:2" } else { "output:3" };
    vec![
        Group {
            id: 1,
            kind: GroupType::All,
            buckets: vec![
                Bucket::new(acts(first)),
                Bucket::new(acts("mod_dl_src:02:00:00:00:00:77,output:4")),
                Bucket::new(acts("output:5")),
            ],
        },
        Group { id: 2, kind: GroupType::Indirect, buckets: vec![Bucket::new(acts("set_field:10->ip_dscp,output:4"))] },
        Group {
            id: 3,
            kind: GroupType::FastFailover,
            buckets: vec![
                Bucket { watch_port: 2, ..Bucket::new(acts("output:2")) },
                Bucket { watch_port: 3, ..Bucket::new(acts("output:3")) },
            ],
        },
        Group { id: 4, kind: GroupType::Select, buckets: vec![Bucket::new(acts("output:5"))] },
    ]
}

fn pcap_frames(path: &Path) -> Vec<Vec<u8>> {
    let Ok(file) = std::fs::File::open(path) else { return Vec::new() };
    let Ok(mut r) = pcap_file::pcap::PcapReader::new(file) else { return Vec::new() };
    let mut out = Vec::new();
    while let Some(Ok(p)) = r.next_packet() {
        out.push(p.data.into_owned());
    }
    out
}

/// The frames of a generated pipeline (ACL with metadata, VLAN pushes and action sets; a
/// forwarding table with TTL, MAC, DSCP and VLAN rewrites) out of `rqvs switch` — every design,
/// 1 and 2 PMDs — byte for byte the frames real Open vSwitch 3.1 sends for the same input
/// frames: OVS on dummy ports (`netdev-dummy/receive`, each port's `tx_pcap`), rqvs on capture
/// ports; per output port the same multiset of frames.
#[test]
fn generated_pipeline_frames_are_byte_identical_to_ovs() {
    use rqvs_datapath::DesignKind;
    use rqvs_switch::{PortSource, Switch, SwitchConfig};

    let Some(ovs) = rqvs_testkit::ovs::start_or_skip("cli-pipeline-frames") else { return };
    let dir = TempDir::new("pipeline-frames");
    for p in 2..=5 {
        let name = format!("p{p}");
        let pcap = dir.join(format!("ovs-p{p}.pcap"));
        let mut args = vec![];
        if p > 2 {
            args.extend(["add-port", "br0", &name, "--", "set", "interface", &name, "type=dummy"]);
            args.push("--");
        }
        let request = format!("ofport_request={p}");
        let tx = format!("options:tx_pcap={}", pcap.display());
        args.extend(["set", "interface", &name, &request, &tx]);
        vsctl(&ovs, &args);
    }
    let (text, packets) = gen_keys(dir.path());
    let text = with_rewrites(&text);
    for g in GROUPS {
        let out = std::process::Command::new("ovs-ofctl")
            .args(["-O", "OpenFlow13", "add-group", &ovs.mgmt(), g])
            .output()
            .expect("run ovs-ofctl");
        assert!(out.status.success(), "add-group {g}: {}", String::from_utf8_lossy(&out.stderr));
    }
    ovs.replace_flows(&text).unwrap();
    let frames: Vec<Vec<u8>> = packets
        .iter()
        .map(|(_, k)| {
            let mut k = *k;
            k.in_port = 1;
            k.dl_src = [2, 0, 0, 0, 0, 1];
            k.dl_dst = [2, 0, 0, 0, 0, 2];
            k.nw_ttl = 64;
            rqvs_flow::frame::build_frame(&k)
        })
        .collect();
    let hex = |f: &[u8]| f.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let params: Vec<Vec<String>> = frames.iter().map(|f| vec!["p1".to_string(), hex(f)]).collect();
    // netdev-dummy queues at most 100 received frames: send 50 at a time, each time waiting
    // until OVS's PMD has taken them all (`packets received` of pmd-stats-show).
    let received = || -> usize {
        let text = ovs.appctl(&["dpif-netdev/pmd-stats-show"]).unwrap();
        text.lines()
            .filter_map(|l| l.trim().strip_prefix("packets received: "))
            .map(|n| n.trim().parse::<usize>().unwrap())
            .sum()
    };
    let t0 = std::time::Instant::now();
    for (i, chunk) in params.chunks(50).enumerate() {
        ovs.call_many("netdev-dummy/receive", chunk, 16).unwrap();
        let want = (i * 50 + chunk.len()).min(params.len());
        while received() < want {
            assert!(t0.elapsed() < std::time::Duration::from_secs(60), "OVS's PMD took {} of {want}", received());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    assert_eq!(received(), frames.len(), "OVS received every frame once");
    // The PMD writes a frame's outputs after counting it: read until the captures stay put.
    let read_ovs =
        || -> Vec<Vec<Vec<u8>>> { (2..=5).map(|p| pcap_frames(&dir.join(format!("ovs-p{p}.pcap")))).collect() };
    let mut theirs = read_ovs();
    loop {
        std::thread::sleep(std::time::Duration::from_millis(300));
        let again = read_ovs();
        if again == theirs {
            break;
        }
        theirs = again;
    }
    for v in theirs.iter_mut() {
        v.sort();
    }
    let total: usize = theirs.iter().map(Vec::len).sum();
    let tagged = theirs.iter().flatten().filter(|f| f[12..14] == [0x81, 0x00]).count();
    let mac = theirs.iter().flatten().filter(|f| f[6..12] == [2, 0, 0, 0, 0, 0x99]).count();
    let grouped = theirs.iter().flatten().filter(|f| f[6..12] == [2, 0, 0, 0, 0, 0x77]).count();
    // Group 2's DSCP 10 (ToS 0x28) on an untagged IPv4 frame.
    let dscp = theirs.iter().flatten().filter(|f| f[12..14] == [8, 0] && f[15] == 0x28).count();
    eprintln!(
        "{} frames in, OVS sent {total} ({tagged} tagged, {mac} with the rewritten MAC, {grouped} by group 1's \
         rewriting bucket, {dscp} with group 2's DSCP)",
        frames.len()
    );
    assert!(
        total > frames.len() / 2 && tagged > 0 && mac > 0 && grouped > 0 && dscp > 0,
        "a weak corpus: {total} {tagged} {mac} {grouped} {dscp}"
    );
    for g in 1..=4 {
        assert!(text.contains(&format!("actions=group:{g}\n")), "group {g} used");
    }

    let rules = rqvs_flow::formats::ofctl::parse_flows("pipeline", &text).unwrap();
    // rqvs's frames out of ports 2..=5, each port's sorted.
    let run = |design: DesignKind, pmds: usize, groups: Vec<rqvs_flow::group::Group>| -> Vec<Vec<Vec<u8>>> {
        let out = TempDir::new(&format!("pipeline-frames-{}-{pmds}", design.name()));
        let mut ports = vec![PortSource::Frames { name: "p1".into(), frames: frames.clone() }];
        for p in 2..=5 {
            let spec = format!("pcap-out:{}", out.join(format!("p{p}.pcap")).display());
            ports.push(PortSource::Spec(spec.parse().unwrap()));
        }
        let mut cfg = SwitchConfig::new(ports, rules.clone(), design);
        cfg.pmds = pmds;
        cfg.groups = groups;
        let sw = Switch::start(cfg).unwrap();
        let t0 = std::time::Instant::now();
        while !sw.is_finished() && t0.elapsed() < std::time::Duration::from_secs(60) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let report = sw.stop().unwrap();
        assert!(report.balanced(), "{}", report.format());
        (2..=5usize)
            .map(|p| {
                let mut ours = pcap_frames(&out.join(format!("p{p}.pcap")));
                ours.sort();
                ours
            })
            .collect()
    };
    for design in [DesignKind::Orig, DesignKind::Ccache, DesignKind::Cflows] {
        for pmds in [1, 2] {
            let ours = run(design, pmds, groups(false));
            for p in 2..=5usize {
                let (ours, want) = (&ours[p - 2], &theirs[p - 2]);
                if ours != want {
                    let only = |a: &[Vec<u8>], b: &[Vec<u8>]| {
                        a.iter().filter(|f| !b.contains(f)).take(3).map(|f| hex(f)).collect::<Vec<_>>()
                    };
                    panic!(
                        "{} with {pmds} PMD(s), port {p}: {} frames, OVS {}\n  only rqvs: {:?}\n  only OVS: {:?}",
                        design.name(),
                        ours.len(),
                        want.len(),
                        only(ours, want),
                        only(want, ours)
                    );
                }
            }
        }
    }
    // The check sees a group that differs: group 1's first bucket to port 2 instead of 3.
    assert_ne!(run(DesignKind::Orig, 1, groups(true)), theirs, "a changed bucket must change the frames");
}
