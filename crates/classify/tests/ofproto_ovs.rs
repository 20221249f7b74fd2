//! OfprotoClassifier against real Open vSwitch 3.1 (`ofproto/trace` over the JSON-RPC control
//! socket of a private userspace instance, see `tests/ovs/mod.rs`).
//!
//! For each rule-set — a hand-written one (overlapping prefixes, port masks, protocol wildcards,
//! TCP flags, ICMP, in_port, ToS) and the ClassBench acl1, fw1 and ipc1 sets at 1K and 10K
//! converted by rqvs (distinct priorities per ClassBench rule) — and for each compared packet:
//! - the matched rule must be OVS's (same match, priority and cookie): 100%;
//! - the megaflow text must equal OVS's "Megaflow:" line for at least 99% of the packets; every
//!   difference is printed with whether rqvs is less or more specific, and a less specific one
//!   must still satisfy the megaflow property (checked with random packets inside it).
//!
//! Packets per ClassBench set: the first `RQVS_OVS_PACKETS` (default 3000) of its trace.
//! Skips with a message when OVS cannot start, unless `RQVS_REQUIRE_OVS=1`.

use rqvs_testkit::ovs;
// One copy, shared by the crates whose tests read the ClassBench data.
use rqvs_testkit::data as shared_data;

use rand::{RngExt, SeedableRng};
use rqvs_classify::ofproto::{format_packet, OfprotoClassifier};
use rqvs_classify::winner_by_definition;
use rqvs_flow::formats::{classbench, ofctl, trace};
use rqvs_flow::{Actions, FlowKey, Rule};

const HAND: &str = "\
priority=900,tcp,nw_src=10.1.2.0/24,nw_dst=192.168.1.0/24,tp_dst=80,actions=output:2
priority=890,tcp,nw_src=10.1.0.0/16,tp_dst=0x50/0xfff0,actions=drop
priority=880,tcp,nw_src=10.0.0.0/8,nw_dst=192.168.0.0/16,tp_src=0x400/0xfc00,actions=output:2
priority=870,udp,nw_dst=192.168.1.128/25,udp_dst=53,actions=output:2
priority=860,udp,nw_src=10.1.2.3,actions=drop
priority=850,ip,nw_src=10.1.2.0/23,nw_dst=172.16.0.0/12,actions=output:2
priority=840,tcp,tcp_flags=+syn-ack,tp_dst=0x0/0xfc00,actions=drop
priority=830,icmp,icmp_type=8,nw_dst=192.168.0.0/16,actions=output:2
priority=820,icmp,nw_src=10.0.0.0/8,actions=drop
priority=810,in_port=2,ip,actions=drop
priority=800,ip,nw_tos=32,nw_src=10.0.0.0/9,actions=output:2
priority=790,tcp,nw_dst=192.168.1.7,tp_src=1024,tp_dst=0x1f90/0xfff8,actions=output:2
priority=780,sctp,nw_dst=192.168.0.0/17,actions=output:2
priority=770,ip,nw_proto=47,nw_src=10.1.0.0/16,actions=output:2
priority=760,tcp,nw_src=10.1.2.0/25,nw_dst=192.168.1.0/26,actions=drop
priority=750,udp,udp_src=0x8000/0x8000,actions=drop
priority=700,ip,nw_dst=192.168.0.0/16,actions=output:2
priority=650,ip,nw_src=10.1.0.0/16,nw_dst=10.1.0.0/16,actions=drop
priority=600,tcp,actions=output:2
priority=500,arp,actions=output:2
priority=100,ip,nw_src=0.0.0.0/1,actions=drop
";

const ADDRS: [u32; 8] =
    [0x0a01_0203, 0x0a01_0380, 0x0a80_0001, 0xc0a8_0107, 0xc0a8_01c1, 0xac10_0001, 0xc0a8_8001, 0x8001_0203];

fn hand_packets(n: usize) -> Vec<FlowKey> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let ports = [0u16, 53, 80, 81, 0x1f90, 0x1f97, 1024, 1030, 0x8001, 40000];
    (0..n)
        .map(|_| {
            let mut k = FlowKey::ipv4(
                ADDRS[rng.random_range(0..8)] ^ rng.random::<u32>().checked_shr(rng.random_range(8..33)).unwrap_or(0),
                ADDRS[rng.random_range(0..8)] ^ rng.random::<u32>().checked_shr(rng.random_range(8..33)).unwrap_or(0),
                [6, 6, 17, 17, 1, 132, 47][rng.random_range(0..7)],
                ports[rng.random_range(0..ports.len())],
                ports[rng.random_range(0..ports.len())],
            );
            if k.nw_proto == 1 {
                k.tp_src = [0, 3, 8, 11][rng.random_range(0..4)];
                k.tp_dst = rng.random_range(0..4);
            }
            k.in_port = rng.random_range(1..3);
            k.tcp_flags = [0, 0x002, 0x012, 0x010, 0x011][rng.random_range(0..5)];
            k.nw_tos = [0, 0, 32, 33, 64][rng.random_range(0..5)];
            if rng.random_range(0..40) == 0 {
                k.dl_type = rqvs_flow::key::ETH_TYPE_ARP;
                k.nw_proto = 1;
            }
            k.wire()
        })
        .collect()
}

/// One compared set's figures.
#[derive(Default)]
struct Outcome {
    packets: usize,
    rule_agree: usize,
    megaflow_agree: usize,
    less_specific: usize,
    more_specific: usize,
    incomparable: usize,
}

fn compare(o: &ovs::Ovs, name: &str, flows: &[Rule], keys: &[FlowKey]) -> Outcome {
    o.replace_flows(&ovs::flows_text(flows)).unwrap_or_else(|e| panic!("{name}: loading flows into OVS: {e}"));
    let c = OfprotoClassifier::build(flows).unwrap();
    let mut sorted = flows.to_vec();
    sorted.sort_by_key(|r| r.rank());
    let texts: Vec<String> = keys.iter().map(format_packet).collect();
    let traces = o.trace_many(&texts).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut out = Outcome { packets: keys.len(), ..Outcome::default() };
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut shown = 0;
    for ((k, t), text) in keys.iter().zip(&traces).zip(&texts) {
        let l = c.lookup_wc(k);
        assert_eq!(l.rule, winner_by_definition(&sorted, k), "{name}: rqvs winner of {text}");
        let ours = l.rule.map(|id| c.rule(id).unwrap());
        let same_rule = match (ours, &t.rule) {
            (None, None) => true,
            (Some(r), Some((m, prio, cookie))) => {
                let theirs = ofctl::parse_flow("ovs", 1, &format!("{m},actions=drop"), 0)
                    .unwrap_or_else(|e| panic!("{name}: OVS rule text '{m}': {e}"));
                theirs.matches == r.matches && *prio == r.priority && *cookie == r.cookie
            }
            _ => false,
        };
        assert!(same_rule, "{name}: packet {text}: rqvs rule {:?}, OVS {:?}", ours.map(ofctl::format_flows), t.rule);
        out.rule_agree += 1;
        let mf = l.megaflow(k);
        let ours_text = mf.to_string();
        if ours_text == t.megaflow {
            out.megaflow_agree += 1;
            continue;
        }
        let (_, their_mask) = ovs::parse_megaflow(&t.megaflow)
            .unwrap_or_else(|| panic!("{name}: cannot read OVS megaflow '{}'", t.megaflow));
        let kind = if mf.mask.is_subset_of(&their_mask) {
            out.less_specific += 1;
            // Less specific than OVS: must still satisfy the megaflow property.
            for _ in 0..200 {
                let r = FlowKey {
                    nw_src: rng.random(),
                    nw_dst: rng.random(),
                    tp_src: rng.random(),
                    tp_dst: rng.random(),
                    tcp_flags: rng.random::<u16>() & 0xfff,
                    nw_tos: rng.random(),
                    ..FlowKey::default()
                };
                let q = FlowKey {
                    nw_src: mf.value.nw_src | (r.nw_src & !mf.mask.nw_src),
                    nw_dst: mf.value.nw_dst | (r.nw_dst & !mf.mask.nw_dst),
                    tp_src: mf.value.tp_src | (r.tp_src & !mf.mask.tp_src),
                    tp_dst: mf.value.tp_dst | (r.tp_dst & !mf.mask.tp_dst),
                    tcp_flags: mf.value.tcp_flags | (r.tcp_flags & !mf.mask.tcp_flags),
                    nw_tos: mf.value.nw_tos | (r.nw_tos & !mf.mask.nw_tos),
                    ..*k
                };
                let q = q.wire();
                if mf.contains(&q) {
                    assert_eq!(winner_by_definition(&sorted, &q), l.rule, "{name}: megaflow {ours_text} is too wide");
                }
            }
            "rqvs less specific"
        } else if their_mask.is_subset_of(&mf.mask) {
            out.more_specific += 1;
            "rqvs more specific"
        } else {
            out.incomparable += 1;
            "incomparable"
        };
        if shown < 20 {
            shown += 1;
            eprintln!("{name}: megaflow differs ({kind}) for {text}\n    rqvs: {ours_text}\n    OVS:  {}", t.megaflow);
        }
    }
    out
}

#[test]
fn ofproto_classifier_agrees_with_ovs() {
    let Some(o) = ovs::start_or_skip("ofproto") else {
        return;
    };
    let mut report = Vec::new();
    let hand = ofctl::parse_flows("hand", HAND).unwrap();
    report.push(("hand", compare(&o, "hand", &hand, &hand_packets(3000))));

    if let Some(dir) = shared_data::classbench_dir() {
        let n: usize = std::env::var("RQVS_OVS_PACKETS").ok().and_then(|s| s.parse().ok()).unwrap_or(3000);
        for seed in ["acl1", "fw1", "ipc1"] {
            for size in ["1k", "10k"] {
                let rules = classbench::read_rules(&shared_data::rules_path(&dir, seed, size)).unwrap();
                let conv = rqvs_flow::convert::classbench_to_openflow(&rules, &Actions::drop()).unwrap();
                let entries = trace::read_trace(&shared_data::trace_path(&dir, seed, size)).unwrap();
                let keys: Vec<FlowKey> = entries.iter().take(n).map(|e| e.key.wire()).collect();
                let name: &'static str = Box::leak(format!("{seed}_{size}").into_boxed_str());
                report.push((name, compare(&o, name, &conv.flows, &keys)));
            }
        }
    }
    eprintln!("set        packets  rule-agree  megaflow-agree  less-specific  more-specific  incomparable");
    for (name, r) in &report {
        eprintln!(
            "{name:<10} {:>7}  {:>9.2}%  {:>13.2}%  {:>13}  {:>13}  {:>12}",
            r.packets,
            100.0 * r.rule_agree as f64 / r.packets as f64,
            100.0 * r.megaflow_agree as f64 / r.packets as f64,
            r.less_specific,
            r.more_specific,
            r.incomparable
        );
    }
    for (name, r) in &report {
        assert_eq!(r.rule_agree, r.packets, "{name}: matched rule must always be OVS's");
        assert!(
            r.megaflow_agree * 100 >= r.packets * 99,
            "{name}: megaflow agreement {}/{} is below 99%",
            r.megaflow_agree,
            r.packets
        );
    }
}
