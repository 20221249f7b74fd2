//! Every classifier on rules over the wide key's fields (IPv6, ND, ARP hardware addresses,
//! metadata, TTL, VLAN): written in ovs-ofctl syntax, each rule's winners checked against the
//! semantic definition on keys that differ from a rule's in exactly one wide field. Random wide
//! rule-sets are covered by every classifier's proptests (`testing::arb_case`).

use rqvs_classify::{build, winner_by_definition, ClassifierKind};
use rqvs_flow::formats::ofctl::parse_flows;
use rqvs_flow::key::{ETH_TYPE_ARP, ETH_TYPE_IPV6, IPPROTO_ICMPV6, IPPROTO_TCP};
use rqvs_flow::rule::beats;
use rqvs_flow::{FlowKey, Rule};

const FLOWS: &str = "\
priority=50,tcp6,ipv6_src=2001:db8::/32,tp_dst=80,actions=output:1
priority=40,ipv6,ipv6_dst=2001:db8:0:1::/64,actions=output:2
priority=60,icmp6,icmp_type=135,icmp_code=0,nd_target=2001:db8::1,actions=output:3
priority=60,icmp6,icmp_type=136,icmp_code=0,nd_tll=00:00:00:00:00:07,actions=output:4
priority=30,arp,arp_sha=00:00:00:00:00:09,actions=output:5
priority=35,ip,nw_ttl=1,actions=output:6
priority=45,metadata=0x5/0xf,actions=output:7
priority=55,ipv6,ipv6_label=0x12345,actions=output:8
priority=20,vlan_vid=0x1005,actions=output:9
priority=25,vlan_vid=0x1000/0x1000,vlan_pcp=3,actions=output:10
priority=1,actions=drop
";

fn keys() -> Vec<FlowKey> {
    let a = u128::from("2001:db8::1".parse::<std::net::Ipv6Addr>().unwrap());
    let b = u128::from("2001:db8:0:1::9".parse::<std::net::Ipv6Addr>().unwrap());
    let v6 = |src, dst, proto, sp, dp| FlowKey::ipv6(src, dst, proto, sp, dp);
    let mut out = vec![
        v6(a, b, IPPROTO_TCP, 1000, 80),
        v6(a ^ 1 << 100, b, IPPROTO_TCP, 1000, 80),
        v6(a ^ 1 << 100, b ^ 1 << 70, IPPROTO_TCP, 1000, 80),
        FlowKey { nd_target: a, ..v6(0, 0, IPPROTO_ICMPV6, 135, 0) },
        FlowKey { nd_target: a ^ 1, ..v6(0, 0, IPPROTO_ICMPV6, 135, 0) },
        FlowKey { arp_tha: [0, 0, 0, 0, 0, 7], ..v6(0, 0, IPPROTO_ICMPV6, 136, 0) },
        FlowKey { arp_tha: [0, 0, 0, 0, 0, 8], ..v6(0, 0, IPPROTO_ICMPV6, 136, 0) },
        FlowKey { ipv6_label: 0x12345, ..v6(a, a, 17, 1, 2) },
        FlowKey { ipv6_label: 0x12344, ..v6(a, a, 17, 1, 2) },
        FlowKey { dl_type: ETH_TYPE_ARP, arp_sha: [0, 0, 0, 0, 0, 9], ..FlowKey::default() },
        FlowKey { dl_type: ETH_TYPE_ARP, arp_sha: [0, 0, 0, 0, 0, 8], ..FlowKey::default() },
        FlowKey { nw_ttl: 1, ..FlowKey::ipv4(1, 2, 6, 3, 4) },
        FlowKey { nw_ttl: 2, ..FlowKey::ipv4(1, 2, 6, 3, 4) },
        FlowKey { metadata: 0x15, ..FlowKey::ipv4(1, 2, 6, 3, 4) },
        FlowKey { metadata: 0x16, ..FlowKey::ipv4(1, 2, 6, 3, 4) },
        FlowKey { vlan_tci: 0x1005, ..FlowKey::ipv4(1, 2, 6, 3, 4) },
        FlowKey { vlan_tci: 0x7006, ..FlowKey::ipv4(1, 2, 6, 3, 4) },
        FlowKey { vlan_tci: 0x5006, ..FlowKey::ipv4(1, 2, 6, 3, 4) },
    ];
    // Every key again with a few narrow fields moved, so no classifier can lean on them.
    let more: Vec<FlowKey> = out.iter().map(|k| FlowKey { in_port: 3, dl_src: [1; 6], ..*k }).collect();
    out.extend(more);
    assert!(out.iter().any(|k| k.dl_type == ETH_TYPE_IPV6));
    out
}

#[test]
fn every_classifier_answers_wide_rules_as_the_definition() {
    let mut rules: Vec<Rule> = parse_flows("wide.ofctl", FLOWS).unwrap();
    let keys = keys();
    // The expected winners, by hand for a few (the definition is checked against them).
    let mut sorted = rules.clone();
    sorted.sort_by(|a, b| {
        if beats(a.priority, a.id, b.priority, b.id) {
            std::cmp::Ordering::Less
        } else {
            std::cmp::Ordering::Greater
        }
    });
    let want: Vec<Option<u32>> = keys.iter().map(|k| winner_by_definition(&sorted, k).map(|r| r.0)).collect();
    assert_eq!(&want[..5], &[Some(0), Some(1), Some(10), Some(2), Some(10)]);
    assert_eq!(&want[5..9], &[Some(3), Some(10), Some(7), Some(10)]);
    assert_eq!(&want[9..18], &[Some(4), Some(10), Some(5), Some(10), Some(6), Some(10), Some(8), Some(9), Some(10)]);
    for kind in &ClassifierKind::ALL {
        let c = build(*kind, &rules).unwrap();
        let got: Vec<Option<u32>> = keys.iter().map(|k| c.lookup(k).map(|r| r.0)).collect();
        assert_eq!(got, want, "{}", c.name());
        let mut batch = vec![None; keys.len()];
        c.lookup_batch(&keys, &mut batch);
        assert_eq!(batch.iter().map(|r| r.map(|r| r.0)).collect::<Vec<_>>(), want, "{} (batch)", c.name());
    }
    // Removing and re-inserting every other rule changes nothing.
    for kind in &ClassifierKind::ALL {
        let mut c = build(*kind, &rules).unwrap();
        let removed: Vec<Rule> = rules.iter().step_by(2).cloned().collect();
        for r in &removed {
            c.remove(r.id).unwrap();
        }
        for r in removed {
            c.insert(r).unwrap();
        }
        let got: Vec<Option<u32>> = keys.iter().map(|k| c.lookup(k).map(|r| r.0)).collect();
        assert_eq!(got, want, "{} after remove and re-insert", c.name());
    }
    rules.clear();
}
