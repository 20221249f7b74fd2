//! ClassBench-ng's workloads: OpenFlow sets from the of1/of2 seeds and IPv6 sets from the
//! classic seeds — deterministic, faithful to their seeds, written and read back as ovs-ofctl
//! text, traced as pcap, the same winners in every classifier, and accepted by real OVS.

use rqvs_classify::{Classifier, Reference};
use rqvs_flow::formats::{ofctl, pcap};
use rqvs_flow::key::{ETH_TYPE_IP, ETH_TYPE_IPV6, IPPROTO_TCP, IPPROTO_UDP};
use rqvs_flow::{FlowKey, Rule, RuleId};
use rqvs_workload::ofrules::{self, OpenFlowStats};
use rqvs_workload::ofseed::{self, Attr};
use rqvs_workload::rules::{self, Params};
use rqvs_workload::trace::{self, Locality};
use rqvs_workload::{ipv6, seedfile};

fn seed(name: &str) -> (seedfile::SeedFile, ofseed::OpenFlowSection) {
    let (file, text) = seedfile::read(name).unwrap();
    (seedfile::parse(&file, &text).unwrap(), ofseed::parse(&file, &text).unwrap().unwrap())
}

fn of_set(name: &str, n: usize, rng: u64) -> ofrules::OpenFlowSet {
    let (s, of) = seed(name);
    ofrules::generate(&s, &of, &Params::new(n, rng)).unwrap()
}

fn ipv6_flows(name: &str, n: usize) -> Vec<Rule> {
    let g = rules::generate(&seedfile::load(name).unwrap(), &Params::new(n, 7)).unwrap();
    ipv6::to_flows(&g.rules).unwrap().flows
}

fn batch(c: &dyn Classifier, keys: &[FlowKey]) -> Vec<Option<RuleId>> {
    let mut out = vec![None; keys.len()];
    for (k, o) in keys.chunks(32).zip(out.chunks_mut(32)) {
        c.lookup_batch(k, o);
    }
    out
}

#[test]
fn openflow_sets_are_deterministic_by_seed() {
    for name in seedfile::OPENFLOW_SEEDS {
        let text = |rng| ofctl::write_flows(&ofrules::to_flows(&of_set(name, 3000, rng).rules).unwrap().flows).unwrap();
        let a = text(5);
        assert_eq!(a, text(5), "{name}: same seed, same set");
        assert_ne!(a, text(6), "{name}: another seed, another set");
    }
    let six = |rng| {
        let g = rules::generate(&seedfile::load("acl1").unwrap(), &Params::new(2000, rng)).unwrap();
        ofctl::write_flows(&ipv6::to_flows(&g.rules).unwrap().flows).unwrap()
    };
    assert_eq!(six(3), six(3));
    assert_ne!(six(3), six(4));
}

/// The combination shares, OUIs and in_port values of generated 10K sets are the seed's.
#[test]
fn openflow_sets_have_their_seeds_statistics() {
    for name in seedfile::OPENFLOW_SEEDS {
        let (_, of) = seed(name);
        let set = of_set(name, 10_000, 1);
        assert!(set.rules.len() > 9_000, "{name}: {} rules of 10000", set.rules.len());
        let st = OpenFlowStats::of(&set);
        let (gap, worst) = st.worst_combination_share_gap(&of);
        eprintln!("{name}: {} rules, worst combination gap {:.2} points ({})", st.rules, gap * 100.0, worst.label());
        assert!(gap < 0.015, "{name}: combination {} is {:.2} points off its seed share", worst.label(), gap * 100.0);
        // Every combination the seed gives 20 rules or more of 10K is drawn.
        let total: u64 = of.rule_distribution.iter().map(|c| c.count).sum();
        for c in of.rule_distribution.iter().filter(|c| c.count * 10_000 >= 20 * total) {
            assert!(
                st.combinations.iter().any(|x| x.0 == c.combination),
                "{name}: {} never drawn",
                c.combination.label()
            );
        }
        // Every OUI and in_port comes from the seed; the seed's most frequent OUI leads.
        for (ours, seeds) in [(&st.dl_src_ouis, &of.dl_src), (&st.dl_dst_ouis, &of.dl_dst)] {
            assert!(ours.iter().all(|(o, _)| seeds.iter().any(|(s, _)| s == o)), "{name}: {ours:?}");
            let top = seeds.iter().max_by_key(|x| x.1).unwrap().0;
            assert_eq!(ours[0].0, top, "{name}");
            let want =
                seeds.iter().find(|x| x.0 == top).unwrap().1 as f64 / seeds.iter().map(|x| x.1).sum::<u64>() as f64;
            let got = ours[0].1 as f64 / ours.iter().map(|x| x.1).sum::<usize>() as f64;
            assert!((got - want).abs() < 0.02, "{name}: OUI {} share {got:.3}, seed {want:.3}", ofrules::fmt_oui(top));
        }
        assert!(st.in_ports.iter().all(|(p, _)| of.in_port.iter().any(|(s, _)| s == p)), "{name}");
        // Each rule specifies exactly its combination's fields, with OVS's prerequisites.
        for (r, c) in set.rules.iter().zip(&set.combinations) {
            let (v, k) = (r.matches.value(), r.matches.mask());
            assert_eq!(k.in_port != 0, c.has(Attr::InPort));
            assert_eq!(k.dl_src != [0; 6], c.has(Attr::DlSrc));
            assert_eq!(k.dl_dst != [0; 6], c.has(Attr::DlDst));
            assert_eq!(r.matches.tp_dst_range().is_any(), !c.has(Attr::TpDst));
            assert_eq!(r.matches.tp_src_range().is_any(), !c.has(Attr::TpSrc));
            if c.has_ip() {
                assert_eq!((k.dl_type, v.dl_type), (u16::MAX, ETH_TYPE_IP), "{name}: IPv4 fields need ip");
            }
            if c.has(Attr::TpSrc) || c.has(Attr::TpDst) {
                assert!(
                    k.nw_proto == 0xff && matches!(v.nw_proto, IPPROTO_TCP | IPPROTO_UDP),
                    "{name}: ports need tcp/udp"
                );
            }
            assert_eq!(r.actions, rqvs_flow::Actions::output(r.id.0 + 1));
        }
    }
}

/// Every generated flow is written as ovs-ofctl text and reads back identically (match,
/// priority, cookie, action); priorities are distinct and follow the generator's order.
#[test]
fn generated_flows_parse_back_identically() {
    let mut tables: Vec<(String, Vec<Rule>)> = Vec::new();
    for name in seedfile::OPENFLOW_SEEDS {
        let set = of_set(name, 10_000, 3);
        let conv = ofrules::to_flows(&set.rules).unwrap();
        assert!(conv.skipped.is_empty(), "{name}: {:?}", &conv.skipped[..conv.skipped.len().min(3)]);
        assert_eq!(conv.flows.len(), set.rules.len(), "{name}: of1/of2 ports are exact, no expansion");
        for (i, f) in conv.flows.iter().enumerate() {
            assert_eq!(f.priority as usize, set.rules.len() - i, "{name}: distinct priorities in order");
        }
        tables.push((name.to_string(), conv.flows));
    }
    for s in seedfile::SEEDS {
        tables.push((format!("{s} ipv6"), ipv6_flows(s, 2_000)));
    }
    for (name, flows) in tables {
        let text = ofctl::write_flows(&flows).unwrap();
        let back = ofctl::parse_flows(&name, &text).unwrap();
        assert_eq!(back, flows, "{name}: ofctl round trip");
        if name.ends_with("ipv6") {
            assert!(flows.iter().all(|f| f.matches.value().dl_type == ETH_TYPE_IPV6), "{name}");
            assert!(text.contains("ipv6_src=") || text.contains("ipv6_dst="), "{name}");
        }
    }
}

/// Headers of a trace fall inside the rule they aim at (MACs, VLAN, in_port, IPv6 included),
/// and survive a pcap: what is read back is the header reduced to its frame.
#[test]
fn traces_of_wide_sets_hit_their_rules_and_survive_pcap() {
    let of1 = ofrules::to_flows(&of_set("of1", 5_000, 2).rules).unwrap().flows;
    let six = ipv6_flows("acl2", 5_000);
    for (name, flows) in [("of1", of1), ("acl2 ipv6", six)] {
        let mut p = trace::Params::new(20_000, Locality::Uniform, 9);
        let (packets, _) = trace::generate(&flows, &p).unwrap();
        for pk in &packets {
            let r = flows.iter().find(|f| f.id == pk.intended).unwrap();
            assert!(r.matches.matches(&pk.key), "{name}: {:?} outside rule {}", pk.key, r.id);
        }
        let differs = packets.iter().filter(|p| p.winner != Some(p.intended)).count();
        eprintln!("{name}: intended ≠ winner for {differs} of {}", packets.len());
        p.wire = true;
        let (packets, st) = trace::generate(&flows, &p).unwrap();
        let keys: Vec<FlowKey> = packets.iter().map(|p| p.key).collect();
        let (bytes, ws) = pcap::write_pcap(&keys, None);
        assert_eq!(ws.packets, keys.len(), "{name}");
        let back = pcap::parse_capture(name, &bytes, 1).unwrap();
        assert_eq!(back.keys.len(), keys.len(), "{name}");
        for (k, b) in keys.iter().zip(&back.keys) {
            assert_eq!(FlowKey { in_port: 1, ..*k }, *b, "{name}: pcap changed a header");
        }
        assert!(
            st.unmatched < keys.len() / 100,
            "{name}: {} of {} wire headers match no rule",
            st.unmatched,
            keys.len()
        );
    }
}

/// Every classifier gives the reference's winner on an of1 10K set and an IPv6 10K set, on a
/// trace aimed at their rules, as built and after 10% of the rules are removed and re-inserted.
#[test]
fn every_classifier_agrees_with_the_reference_on_of1_and_ipv6_sets() {
    let of1 = ofrules::to_flows(&of_set("of1", 10_000, 4).rules).unwrap().flows;
    let six = ipv6_flows("acl1", 10_000);
    for (name, rules) in [("of1 10K", of1), ("acl1 ipv6 10K", six)] {
        let mut p = trace::Params::new(30_000, Locality::Uniform, 11);
        p.wire = true;
        let (packets, _) = trace::generate(&rules, &p).unwrap();
        let mut keys: Vec<FlowKey> = packets.iter().map(|p| p.key).collect();
        // And headers near no rule: random in_port, MACs, addresses.
        let mut rng = rqvs_workload::rng::Rng::new(5);
        for k in keys.clone().iter().take(3000) {
            let mut m = *k;
            m.in_port = rng.below(40_000) as u32;
            m.dl_dst[5] ^= rng.next_u32() as u8;
            m.nw_dst ^= rng.next_u32() & 0xff;
            m.ipv6_src ^= u128::from(rng.next_u32());
            keys.push(m);
        }
        let want = batch(&Reference::build(&rules).unwrap(), &keys);
        let mut sorted = rules.clone();
        sorted.sort_by_key(|r| r.rank());
        for (i, k) in keys.iter().enumerate().step_by(17) {
            assert_eq!(want[i], rqvs_classify::winner_by_definition(&sorted, k), "{name}: reference");
        }
        for cname in rqvs_classify::CLASSIFIER_NAMES.iter().filter(|&&n| n != "ref") {
            let mut c = rqvs_classify::build_by_name(cname, &rules).unwrap();
            let bad = batch(c.as_ref(), &keys).iter().zip(&want).filter(|(g, w)| g != w).count();
            assert_eq!(bad, 0, "{cname} on {name}: mismatches after build");
            let mut victims: Vec<&Rule> = rules.iter().step_by(10).collect();
            victims.sort_by_key(|r| (r.id.0.wrapping_mul(2_654_435_761), r.id));
            for r in &victims {
                assert!(c.remove(r.id).is_some());
            }
            for r in victims.iter().rev() {
                c.insert((*r).clone()).unwrap();
            }
            let bad = batch(c.as_ref(), &keys).iter().zip(&want).filter(|(g, w)| g != w).count();
            assert_eq!(bad, 0, "{cname} on {name}: mismatches after remove/re-insert");
        }
    }
}

/// Real `ovs-ofctl add-flows` accepts an of1 1K set and an IPv6 1K set (skips without OVS,
/// unless `RQVS_REQUIRE_OVS=1`).
#[test]
fn real_ovs_accepts_generated_sets() {
    let Some(ovs) = rqvs_testkit::ovs::start_or_skip("ClassBench-ng sets") else { return };
    let of1 = ofrules::to_flows(&of_set("of1", 1_000, 1).rules).unwrap().flows;
    let of2 = ofrules::to_flows(&of_set("of2", 1_000, 1).rules).unwrap().flows;
    let six = ipv6_flows("fw1", 1_000);
    for (name, flows) in [("of1", of1), ("of2", of2), ("fw1 ipv6", six)] {
        let text = ofctl::write_flows(&flows).unwrap();
        ovs.replace_flows(&text).unwrap_or_else(|e| panic!("{name}: ovs-ofctl add-flows refused the set: {e}"));
        let dump = std::process::Command::new("ovs-ofctl").args(["dump-flows", &ovs.mgmt()]).output().unwrap();
        let dumped = String::from_utf8_lossy(&dump.stdout);
        let back = ofctl::parse_flows("dump", &dumped).unwrap();
        assert_eq!(back.len(), flows.len(), "{name}: OVS holds every flow");
    }
}
