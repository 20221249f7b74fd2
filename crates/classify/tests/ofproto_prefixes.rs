//! OfprotoClassifier with configurable prefix fields (OVS's `Flow_Table:prefixes`), on IPv6 and
//! IPv4 rules mixed:
//!
//! - the matched rule equals `winner_by_definition` for every prefix-field setting (default,
//!   `ipv6_src,ipv6_dst`, one IPv6 field, a mix, `none`), through removals, re-insertions and a
//!   change of the setting on a full classifier;
//! - megaflow property: a packet agreeing with a classified packet on every bit of its megaflow's
//!   mask gets the same rule (free bits of both IPv6 and IPv4 addresses and ports random);
//! - the tries only ever remove bits: the wildcards with any setting are a subset of those
//!   without tries (`none`), as OVS's `check_tries` never un-wildcards more than the subtable's
//!   prefix length.

use proptest::prelude::*;
use rqvs_classify::ofproto::{OfprotoClassifier, PrefixFields};
use rqvs_classify::{winner_by_definition, Classifier};
use rqvs_flow::key::*;
use rqvs_flow::{Actions, FlowKey, Match, PortRange, Rule};

const BASES6: [u128; 4] = [
    0x2001_0db8_0000_0000_0000_0000_0000_0000,
    0x2001_0db8_0001_0002_0000_0000_0000_0001,
    0x2001_0db8_8000_0000_0000_0000_0000_0000,
    0xfe80_0000_0000_0000_0000_0000_0000_0000,
];
const BASES4: [u32; 3] = [0x0a00_0000, 0x0a01_0200, 0xc0a8_0100];

const SETTINGS: [&str; 6] =
    ["nw_dst,nw_src", "ipv6_src,ipv6_dst", "ipv6_dst", "ipv6_dst,nw_src,ipv6_src", "none", "nw_src,ipv6_src"];

fn pmask128(len: u32) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - len)
    }
}

fn pmask32(len: u32) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len)
    }
}

#[derive(Clone, Debug)]
struct Spec {
    v6: bool,
    src: (usize, u32),
    dst: (usize, u32),
    /// 0 none, 1 tcp, 2 udp.
    proto: u8,
    tp_dst: Option<(u16, u32)>,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop::bool::weighted(0.8),
        (0..BASES6.len(), prop_oneof![0u32..=128, 0u32..=64, 28u32..=36]),
        (0..BASES6.len(), prop_oneof![0u32..=128, 0u32..=64, 44u32..=52]),
        0u8..3,
        prop::option::weighted(0.4, (any::<u16>(), 0u32..=16)),
    )
        .prop_map(|(v6, src, dst, proto, tp_dst)| Spec { v6, src, dst, proto, tp_dst })
}

fn to_rule(id: u32, priority: u32, s: &Spec) -> Rule {
    let mut v = FlowKey::default();
    let mut m = FlowKey::default();
    m.dl_type = u16::MAX;
    if s.v6 {
        v.dl_type = ETH_TYPE_IPV6;
        m.ipv6_src = pmask128(s.src.1);
        v.ipv6_src = BASES6[s.src.0] & m.ipv6_src;
        m.ipv6_dst = pmask128(s.dst.1);
        v.ipv6_dst = BASES6[s.dst.0] & m.ipv6_dst;
    } else {
        v.dl_type = ETH_TYPE_IP;
        m.nw_src = pmask32(s.src.1.min(32));
        v.nw_src = BASES4[s.src.0 % 3] & m.nw_src;
        m.nw_dst = pmask32(s.dst.1.min(32));
        v.nw_dst = BASES4[s.dst.0 % 3] & m.nw_dst;
    }
    if s.proto > 0 {
        v.nw_proto = if s.proto == 1 { IPPROTO_TCP } else { IPPROTO_UDP };
        m.nw_proto = u8::MAX;
        if let Some((port, len)) = s.tp_dst {
            m.tp_dst = if len == 0 { 0 } else { u16::MAX << (16 - len) };
            v.tp_dst = port & m.tp_dst;
        }
    }
    Rule::new(id, priority, Match::new(v, m, PortRange::ANY, PortRange::ANY).unwrap(), Actions::drop())
}

/// A packet near a rule's value: addresses with random low bits past a random point.
fn packet(rules: &[Rule], pick: usize, noise: [u128; 2], cut: [u32; 2], other: u32) -> FlowKey {
    let base = *rules[pick % rules.len()].matches.value();
    let mut k = base;
    k.in_port = 1;
    if other.is_multiple_of(11) {
        k.dl_type = if k.dl_type == ETH_TYPE_IPV6 { ETH_TYPE_IP } else { ETH_TYPE_IPV6 };
    }
    k.ipv6_src = (base.ipv6_src & pmask128(cut[0])) | (noise[0] & !pmask128(cut[0]));
    k.ipv6_dst = (base.ipv6_dst & pmask128(cut[1])) | (noise[1] & !pmask128(cut[1]));
    k.nw_src = (base.nw_src & pmask32(cut[0] % 33)) | (noise[0] as u32 & !pmask32(cut[0] % 33));
    k.nw_dst = (base.nw_dst & pmask32(cut[1] % 33)) | (noise[1] as u32 & !pmask32(cut[1] % 33));
    k.nw_proto = [IPPROTO_TCP, IPPROTO_UDP, 47][(other % 3) as usize];
    k.tp_src = (other >> 8) as u16;
    k.tp_dst = if other & 0x10 != 0 { base.tp_dst ^ ((other >> 20) as u16 & 0xff) } else { (other >> 12) as u16 };
    k.wire()
}

fn sorted(rules: &[Rule]) -> Vec<Rule> {
    let mut s = rules.to_vec();
    s.sort_by_key(|r| r.rank());
    s
}

/// The winner, the megaflow property, and wildcards within those of `plain` (no tries).
fn check(
    c: &OfprotoClassifier,
    plain: &OfprotoClassifier,
    sorted: &[Rule],
    k: &FlowKey,
    inside: &[[u128; 2]],
) -> Result<(), TestCaseError> {
    let l = c.lookup_wc(k);
    prop_assert_eq!(l.rule, winner_by_definition(sorted, k), "winner of {:?} with {}", k, c.prefix_fields());
    let p = plain.lookup_wc(k);
    prop_assert_eq!(p.rule, l.rule);
    prop_assert_eq!(
        l.wildcards.union(&p.wildcards),
        p.wildcards,
        "{} examines bits that no tries do not, for {:?}",
        c.prefix_fields(),
        k
    );
    let mf = l.megaflow(k);
    prop_assert!(mf.contains(k));
    for n in inside {
        let mut q = mf.value;
        q.in_port = k.in_port;
        q.ipv6_src |= n[0] & !mf.mask.ipv6_src;
        q.ipv6_dst |= n[1] & !mf.mask.ipv6_dst;
        q.nw_src |= (n[0] >> 64) as u32 & !mf.mask.nw_src;
        q.nw_dst |= (n[1] >> 64) as u32 & !mf.mask.nw_dst;
        q.tp_src |= (n[0] >> 32) as u16 & !mf.mask.tp_src;
        q.tp_dst |= (n[1] >> 32) as u16 & !mf.mask.tp_dst;
        q.nw_proto |= [IPPROTO_TCP, IPPROTO_UDP, 47][(n[0] % 3) as usize] & !mf.mask.nw_proto;
        q.nw_ttl = k.nw_ttl;
        let q = q.wire();
        if !mf.contains(&q) {
            continue;
        }
        prop_assert_eq!(winner_by_definition(sorted, &q), l.rule, "{:?} inside megaflow {} of {:?}", q, mf, k);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn every_prefix_setting_equals_definition(
        specs in prop::collection::vec(spec(), 1..40),
        distinct in any::<bool>(),
        prios in prop::collection::vec(0u32..8, 40),
        setting in 0..SETTINGS.len(),
        next_setting in 0..SETTINGS.len(),
        packets in prop::collection::vec((any::<usize>(), any::<[u128; 2]>(), any::<[u8; 2]>(), any::<u32>()), 1..30),
        inside in prop::collection::vec(any::<[u128; 2]>(), 6),
        removals in prop::collection::vec(any::<bool>(), 40),
    ) {
        let rules: Vec<Rule> = specs
            .iter()
            .enumerate()
            .map(|(i, s)| to_rule(i as u32, if distinct { 1000 - i as u32 * 7 % 997 } else { prios[i] }, s))
            .collect();
        let prefixes: PrefixFields = SETTINGS[setting].parse().unwrap();
        let mut c = OfprotoClassifier::build_with_prefix_fields(&rules, prefixes).unwrap();
        prop_assert_eq!(c.prefix_fields(), prefixes);
        let mut plain = OfprotoClassifier::build_with_prefix_fields(&rules, PrefixFields::NONE).unwrap();
        let all = sorted(&rules);
        let keys: Vec<FlowKey> = packets
            .iter()
            .map(|&(p, n, cut, o)| packet(&rules, p, n, [u32::from(cut[0]) % 129, u32::from(cut[1]) % 129], o))
            .collect();
        for k in &keys {
            check(&c, &plain, &all, k, &inside)?;
        }
        let mut kept = Vec::new();
        let mut gone = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            if removals[i] {
                let removed = c.remove(r.id);
                prop_assert_eq!(removed.as_ref(), Some(r));
                plain.remove(r.id).unwrap();
                gone.push(r.clone());
            } else {
                kept.push(r.clone());
            }
        }
        let some = sorted(&kept);
        for k in &keys {
            check(&c, &plain, &some, k, &inside)?;
        }
        // Another setting on the classifier as it is: the same as one built with it and
        // changed the same way. (Not always as one built from the kept rules alone: a removal
        // that lowers a subtable's highest priority moves it among the subtables of equal
        // priority, and which of those a lookup stops after depends on their order — OVS's
        // priority vector, sorted by an unstable qsort, depends on its history as well.)
        let next: PrefixFields = SETTINGS[next_setting].parse().unwrap();
        c.set_prefix_fields(next);
        let mut same_history = OfprotoClassifier::build_with_prefix_fields(&rules, next).unwrap();
        for r in &gone {
            same_history.remove(r.id).unwrap();
        }
        for k in &keys {
            check(&c, &plain, &some, k, &inside)?;
            prop_assert_eq!(c.lookup_wc(k).wildcards, same_history.lookup_wc(k).wildcards);
        }
        for r in gone.into_iter().rev() {
            c.insert(r.clone()).unwrap();
            plain.insert(r).unwrap();
        }
        for k in &keys {
            check(&c, &plain, &all, k, &inside)?;
        }
    }
}

fn v6(s: &str) -> u128 {
    u128::from(s.parse::<std::net::Ipv6Addr>().unwrap())
}

/// One rule on an IPv6 /32 and a packet outside it: with a trie on `ipv6_src` the megaflow
/// examines the 4 leading bits that rule it out (OVS's `trie_lookup`: 2001:: and 3000:: part at
/// bit 3), without it the whole /32.
#[test]
fn ipv6_trie_narrows_megaflow() {
    let rules = rqvs_flow::formats::ofctl::parse_flows(
        "t",
        "priority=10,tcp6,ipv6_src=2001:db8::/32,tp_dst=80,actions=drop\npriority=0,actions=drop\n",
    )
    .unwrap();
    let mut k = FlowKey::ZERO;
    k.dl_type = ETH_TYPE_IPV6;
    k.nw_proto = IPPROTO_TCP;
    k.ipv6_src = v6("3000::1");
    k.tp_dst = 80;
    let k = k.wire();
    for (setting, bits) in
        [("ipv6_src", 4), ("ipv6_src,ipv6_dst", 4), ("nw_dst,nw_src", 32), ("none", 32), ("ipv6_dst", 32)]
    {
        let c = OfprotoClassifier::build_with_prefix_fields(&rules, setting.parse().unwrap()).unwrap();
        let l = c.lookup_wc(&k);
        assert_eq!(l.rule, Some(rqvs_flow::RuleId(1)), "{setting}");
        assert_eq!(l.wildcards.ipv6_src, pmask128(bits), "{setting}: {}", l.megaflow(&k));
    }
}
