//! Traces, mappings, update streams and format round trips on generated sets.

use std::time::Instant;

use rqvs_classify::{winner_by_definition, Classifier, TupleMerge};
use rqvs_flow::formats::{classbench, ofctl, pcap, trace as cbtrace};
use rqvs_flow::{Actions, FlowKey, Rule};
use rqvs_workload::rules::{generate, Params};
use rqvs_workload::seedfile;
use rqvs_workload::trace::{self, Locality, Mode};
use rqvs_workload::{map, updates};

fn set(seed: &str, n: usize) -> Option<Vec<Rule>> {
    Some(generate(&seedfile::load(seed).unwrap(), &Params::new(n, 42)).unwrap().rules)
}

fn sorted(rules: &[Rule]) -> Vec<Rule> {
    let mut s = rules.to_vec();
    s.sort_by_key(|r| r.rank());
    s
}

#[test]
fn traces_cap_headers_and_compute_true_winners() {
    let Some(rules) = set("acl1", 10_000) else { return };
    let by_def = sorted(&rules);
    for (loc, mode) in [
        ("pareto:1,0.1", Mode::Inside),
        ("pareto:1,1", Mode::Inside),
        ("pareto:1,1", Mode::Corner),
        ("zipf:1.2", Mode::Inside),
        ("uniform", Mode::Inside),
    ] {
        let mut p = trace::Params::new(100_000, Locality::parse(loc).unwrap(), 7);
        p.mode = mode;
        let t = Instant::now();
        let (pk, st) = trace::generate(&rules, &p).unwrap();
        eprintln!(
            "{loc} {mode:?}: {:?} in {:?}",
            (st.flows, st.top_share, st.intended_differs, st.capped),
            t.elapsed()
        );
        assert_eq!(pk.len(), 100_000);
        assert!(st.top_share <= 0.05, "{loc}: top header {:.3}", st.top_share);
        assert_eq!(st.unmatched, 0);
        for x in pk.iter().step_by(97) {
            assert!(rules[x.intended.0 as usize].matches.matches(&x.key), "header outside its intended rule");
            assert_eq!(x.winner, winner_by_definition(&by_def, &x.key));
        }
        let flows: u64 = st.flow_sizes.iter().map(|b| b.2).sum();
        let packets: u64 = st.flow_sizes.iter().map(|b| b.3).sum();
        assert_eq!((flows as usize, packets as usize), (st.flows, 100_000));
    }
    // Determinism.
    let p = trace::Params::new(5_000, Locality::parse("pareto:1,0.1").unwrap(), 3);
    assert_eq!(trace::generate(&rules, &p).unwrap().0, trace::generate(&rules, &p).unwrap().0);
    let mut q = p;
    q.rng_seed = 4;
    assert_ne!(trace::generate(&rules, &p).unwrap().0, trace::generate(&rules, &q).unwrap().0);
}

#[test]
fn traces_round_trip_through_classbench_and_pcap() {
    let Some(rules) = set("fw2", 5_000) else { return };
    let mut p = trace::Params::new(20_000, Locality::parse("pareto:1,0.1").unwrap(), 1);
    let (pk, _) = trace::generate(&rules, &p).unwrap();
    let entries: Vec<cbtrace::TraceEntry> = pk
        .iter()
        .map(|x| cbtrace::TraceEntry { intended: Some(x.intended), ..cbtrace::TraceEntry::from_key(x.key) })
        .collect();
    let back = cbtrace::parse_trace("t", &cbtrace::write_trace(&entries)).unwrap();
    assert_eq!(back.iter().map(|e| e.key).collect::<Vec<_>>(), pk.iter().map(|x| x.key).collect::<Vec<_>>());
    assert_eq!(
        back.iter().map(|e| e.intended).collect::<Vec<_>>(),
        pk.iter().map(|x| Some(x.intended)).collect::<Vec<_>>()
    );
    // pcap: with `wire`, what is written is what is classified.
    p.wire = true;
    let (pk, _) = trace::generate(&rules, &p).unwrap();
    let keys: Vec<FlowKey> = pk.iter().map(|x| x.key).collect();
    let (bytes, ws) = pcap::write_pcap(&keys, None);
    assert_eq!(ws.ports_dropped, 0);
    let cap = pcap::parse_capture("t.pcap", &bytes, 1).unwrap();
    assert_eq!(cap.keys, keys);
}

#[test]
fn generated_sets_round_trip_through_classbench_and_ofctl() {
    for s in ["acl1", "fw1", "ipc1"] {
        let Some(rules) = set(s, 3_000) else { return };
        let text = classbench::write_rules(&rules).unwrap();
        let back = classbench::parse_rules("g", &text).unwrap();
        assert_eq!(back, rules, "{s}");
        let conv = rqvs_flow::convert::classbench_to_openflow(&rules, &Actions::drop()).unwrap();
        let flows = ofctl::parse_flows("g.flows", &ofctl::write_flows(&conv.flows).unwrap()).unwrap();
        assert_eq!(flows.len(), conv.flows.len());
        assert_eq!(conv.converted + conv.skipped.len(), rules.len());
    }
}

#[test]
fn mapping_places_flows_on_a_100k_set_and_keeps_order() {
    let Some(big) = set("acl1", 100_000) else { return };
    let Some(small) = set("ipc1", 1_000) else { return };
    // A capture-like input: Zipf flows from another set, 1 µs apart.
    let p = trace::Params { wire: true, ..trace::Params::new(50_000, Locality::parse("zipf:1.1").unwrap(), 5) };
    let (pk, _) = trace::generate(&small, &p).unwrap();
    let keys: Vec<FlowKey> = pk.iter().map(|x| x.key).collect();
    let ts: Vec<u64> = (0..keys.len() as u64).map(|i| 1_000_000_000 + i * 1_000 + (i % 7) * 100_000).collect();
    let (bytes, _) = pcap::write_pcap(&keys, Some(&ts));
    let cap = pcap::parse_capture("in.pcap", &bytes, 1).unwrap();
    let t = Instant::now();
    let (out, rep) = map::map_capture(&big, &cap, &map::Params::new(9)).unwrap();
    eprintln!("map: {rep:?} in {:?}", t.elapsed());
    assert_eq!(out.len(), cap.keys.len());
    assert!(rep.placed as f64 >= 0.99 * rep.flows as f64, "{rep:?}");
    // Same flow structure: packets i and j share a flow before iff they do after.
    let mut first_in = std::collections::HashMap::new();
    let mut first_out = std::collections::HashMap::new();
    for (i, (a, b)) in cap.keys.iter().zip(&out).enumerate() {
        let fa = *first_in.entry((a.nw_src, a.nw_dst, a.nw_proto, a.tp_src, a.tp_dst)).or_insert(i);
        let fb =
            *first_out.entry((b.key.nw_src, b.key.nw_dst, b.key.nw_proto, b.key.tp_src, b.key.tp_dst)).or_insert(i);
        assert!(fb <= fa, "packet {i}: a flow was split");
    }
    let out_keys: Vec<FlowKey> = out.iter().map(|m| m.key).collect();
    let (bytes2, _) = pcap::write_pcap(&out_keys, Some(&cap.timestamps_ns));
    let cap2 = pcap::parse_capture("out.pcap", &bytes2, 1).unwrap();
    assert_eq!(cap2.keys, out_keys);
    assert_eq!(cap2.timestamps_ns, cap.timestamps_ns);
}

#[test]
fn update_streams_round_trip_and_apply() {
    let Some(rules) = set("fw1", 10_000) else { return };
    let s = updates::generate(&rules, 0.2, [2, 1, 1], None, 11).unwrap();
    let (i, r, m) = s.counts();
    assert_eq!(s.initial.len() + (0.2 * rules.len() as f64).round() as usize, rules.len());
    assert_eq!(i + r + m, s.ops.len());
    assert!(i > r && r > 0 && m > 0, "{:?}", (i, r, m));
    let text = updates::write(&s, &["test".into()]).unwrap();
    assert_eq!(updates::parse("u", &text).unwrap(), s);
    assert_eq!(updates::generate(&rules, 0.2, [2, 1, 1], None, 11).unwrap(), s);
    // Apply to a classifier and to a plain model; they agree with the definition.
    let mut tm = TupleMerge::build(&s.initial).unwrap();
    let mut model: std::collections::BTreeMap<u32, Rule> = s.initial.iter().map(|r| (r.id.0, r.clone())).collect();
    for op in &s.ops {
        match op {
            updates::Op::Insert(r) => {
                assert!(model.insert(r.id.0, r.clone()).is_none(), "insert of an installed id");
                tm.insert(r.clone()).unwrap();
            }
            updates::Op::Remove(id) => {
                assert!(model.remove(&id.0).is_some(), "remove of an absent id");
                tm.remove(*id).unwrap();
            }
            updates::Op::Modify(r) => {
                assert!(model.insert(r.id.0, r.clone()).is_some(), "modify of an absent id");
                tm.remove(r.id).unwrap();
                tm.insert(r.clone()).unwrap();
            }
        }
    }
    let now: Vec<Rule> = sorted(&model.into_values().collect::<Vec<_>>());
    let (pk, _) = trace::generate(&now, &trace::Params::new(5_000, Locality::Uniform, 2)).unwrap();
    for x in &pk {
        assert_eq!(tm.lookup(&x.key), winner_by_definition(&now, &x.key));
    }
}
