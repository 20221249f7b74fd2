//! OfprotoClassifier against the definition of the winner, and the megaflow property.
//!
//! - Differential: on random overlapping OpenFlow-valid rules (prefixes of a few shared base
//!   addresses, exact/masked/ranged ports, TCP flags, ICMP type, ToS, VLAN, ARP, in_port; priorities
//!   with and without ties) and through removals and re-insertions, the matched rule always equals
//!   `winner_by_definition`.
//! - Megaflow property: any packet that agrees with a classified packet on every bit of its
//!   megaflow's mask is classified to the same rule — checked with random packets drawn inside
//!   each megaflow (free bits random), realised as OVS would hold them (`FlowKey::wire`).
//! - Megaflows of one table never overlap in effect: a packet inside a megaflow gets that same
//!   megaflow's rule (the property above) — so installing megaflows is order-independent for
//!   correctness.

use proptest::prelude::*;
use rqvs_classify::ofproto::OfprotoClassifier;
use rqvs_classify::{winner_by_definition, Classifier};
use rqvs_flow::key::*;
use rqvs_flow::{Actions, FlowKey, Match, PortRange, Rule, RuleId};

const BASES: [u32; 5] = [0x0a00_0000, 0x0a01_0200, 0xc0a8_0100, 0xc0a8_0000, 0x8000_0000];
const PORTS: [u16; 6] = [0, 53, 80, 1024, 1030, 0xfc00];

fn pmask(len: u32) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len)
    }
}

#[derive(Clone, Debug)]
struct Spec {
    src: (usize, u32, bool),
    dst: (usize, u32, bool),
    proto: u8, // 0 none, 1 tcp, 2 udp, 3 icmp, 4 proto 47, 5 arp, 6 no dl_type
    tp_src: (u8, usize, u16),
    tp_dst: (u8, usize, u16),
    flags: (u16, u16),
    in_port: Option<u32>,
    tos: Option<u8>,
    vlan: Option<u16>,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        (0..BASES.len(), 0u32..=32, prop::bool::weighted(0.1)),
        (0..BASES.len(), 0u32..=32, prop::bool::weighted(0.1)),
        0u8..7,
        (0u8..5, 0..PORTS.len(), any::<u16>()),
        (0u8..5, 0..PORTS.len(), any::<u16>()),
        (any::<u16>(), any::<u16>()),
        prop::option::weighted(0.15, 1u32..4),
        prop::option::weighted(0.1, 0u8..64),
        prop::option::weighted(0.1, 0u16..4),
    )
        .prop_map(|(src, dst, proto, tp_src, tp_dst, flags, in_port, tos, vlan)| Spec {
            src,
            dst,
            proto,
            tp_src,
            tp_dst,
            flags,
            in_port,
            tos,
            vlan,
        })
}

/// A port match: any, exact, prefix mask, arbitrary mask, or a range.
fn port(kind: u8, base: u16, noise: u16) -> (u16, u16, PortRange) {
    match kind {
        0 => (0, 0, PortRange::ANY),
        1 => (base, u16::MAX, PortRange::ANY),
        2 => {
            let m = u16::MAX << (noise % 16);
            (base & m, m, PortRange::ANY)
        }
        3 => (base & noise, noise, PortRange::ANY),
        _ => (
            0,
            0,
            PortRange::new(base.min(base.wrapping_add(noise % 3000)), base.max(base.wrapping_add(noise % 3000)))
                .unwrap(),
        ),
    }
}

fn to_rule(id: u32, priority: u32, s: &Spec) -> Rule {
    let mut v = FlowKey::default();
    let mut m = FlowKey::default();
    let (mut rs, mut rd) = (PortRange::ANY, PortRange::ANY);
    if let Some(p) = s.in_port {
        v.in_port = p;
        m.in_port = u32::MAX;
    }
    if let Some(vid) = s.vlan {
        v.vlan_tci = VLAN_CFI | vid;
        m.vlan_tci = VLAN_CFI | VLAN_VID_MASK;
    }
    if s.proto != 6 {
        let arp = s.proto == 5;
        v.dl_type = if arp { ETH_TYPE_ARP } else { ETH_TYPE_IP };
        m.dl_type = u16::MAX;
        for (field, (b, len, odd), (fv, fm)) in
            [(0, s.src, (&mut v.nw_src, &mut m.nw_src)), (1, s.dst, (&mut v.nw_dst, &mut m.nw_dst))]
        {
            let _ = field;
            let mask = if odd { pmask(len) ^ 0x00ff_0000 } else { pmask(len) };
            *fm = mask;
            *fv = BASES[b] & mask;
        }
        if !arp {
            if let Some(t) = s.tos {
                v.nw_tos = (t << 2) & 0xfc;
                m.nw_tos = 0xfc;
            }
        }
        let proto = match s.proto {
            1 => Some(IPPROTO_TCP),
            2 => Some(IPPROTO_UDP),
            3 => Some(IPPROTO_ICMP),
            4 => Some(47),
            _ => None,
        };
        if let Some(p) = proto {
            v.nw_proto = p;
            m.nw_proto = u8::MAX;
        }
        match proto {
            Some(IPPROTO_TCP | IPPROTO_UDP) => {
                let (sv, sm, sr) = port(s.tp_src.0, PORTS[s.tp_src.1], s.tp_src.2);
                let (dv, dm, dr) = port(s.tp_dst.0, PORTS[s.tp_dst.1], s.tp_dst.2);
                (v.tp_src, m.tp_src, rs) = (sv, sm, sr);
                (v.tp_dst, m.tp_dst, rd) = (dv, dm, dr);
                if proto == Some(IPPROTO_TCP) && s.flags.1 % 3 < 1 {
                    m.tcp_flags = s.flags.1 & 0x3f;
                    v.tcp_flags = s.flags.0 & m.tcp_flags;
                }
            }
            Some(IPPROTO_ICMP) if s.tp_src.0 > 2 => {
                v.tp_src = s.tp_src.2 % 4;
                m.tp_src = u16::MAX;
            }
            _ => {}
        }
    }
    Rule::new(id, priority, Match::new(v, m, rs, rd).unwrap(), Actions::drop())
}

/// A packet near a rule's value: some fields kept, others random.
fn packet(rules: &[Rule], pick: usize, noise: [u32; 4], keep: u8) -> FlowKey {
    let base = if rules.is_empty() { FlowKey::default() } else { *rules[pick % rules.len()].matches.value() };
    let mut k = base;
    let arp = keep & 0x80 != 0 && base.dl_type == ETH_TYPE_ARP;
    k.dl_type = if arp {
        ETH_TYPE_ARP
    } else if keep & 0x40 != 0 && noise[3] % 13 < 1 {
        0x86dd
    } else {
        ETH_TYPE_IP
    };
    k.in_port = 1 + noise[3] % 3;
    if keep & 1 == 0 {
        k.nw_src ^= noise[0] >> (noise[3] % 32);
    }
    if keep & 2 == 0 {
        k.nw_dst ^= noise[1] >> (noise[2] % 32);
    }
    if keep & 4 == 0 {
        k.nw_proto = [IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMP, 47][(noise[2] % 4) as usize];
    } else if k.nw_proto == 0 {
        k.nw_proto = IPPROTO_TCP;
    }
    if keep & 8 == 0 {
        k.tp_src = PORTS[(noise[0] % 6) as usize] ^ (noise[1] as u16 & 0x7);
    }
    if keep & 16 == 0 {
        k.tp_dst = PORTS[(noise[1] % 6) as usize] ^ (noise[2] as u16 >> 13);
    }
    k.tcp_flags = (noise[3] >> 8) as u16 & 0x3f;
    if keep & 32 == 0 {
        k.nw_tos = (noise[2] >> 5) as u8 & 0xfc;
        k.vlan_tci = if noise[0] % 5 < 1 { VLAN_CFI | (noise[1] % 4) as u16 } else { 0 };
    }
    k.wire()
}

fn sorted(rules: &[Rule]) -> Vec<Rule> {
    let mut s = rules.to_vec();
    s.sort_by_key(|r| r.rank());
    s
}

/// Checks the winner and the megaflow property for one packet.
fn check(c: &OfprotoClassifier, sorted: &[Rule], k: &FlowKey, inside: &[[u32; 4]]) -> Result<(), TestCaseError> {
    let l = c.lookup_wc(k);
    let want = winner_by_definition(sorted, k);
    prop_assert_eq!(l.rule, want, "winner of {:?}", k);
    let mf = l.megaflow(k);
    prop_assert!(mf.contains(k));
    for n in inside {
        // Random bits everywhere the megaflow does not look.
        let mut r = FlowKey {
            nw_src: n[0],
            nw_dst: n[1],
            tp_src: n[2] as u16,
            tp_dst: (n[2] >> 16) as u16,
            in_port: n[3],
            dl_type: n[3] as u16,
            vlan_tci: (n[0] >> 16) as u16 | VLAN_CFI,
            tcp_flags: (n[1] >> 20) as u16 & TCP_FLAGS_MASK,
            nw_proto: (n[3] >> 8) as u8,
            nw_tos: (n[3] >> 16) as u8,
            nw_frag: 0,
            dl_src: [n[0] as u8, 1, 2, 3, 4, n[1] as u8],
            dl_dst: [n[2] as u8, 5, 6, 7, 8, n[3] as u8],
            ..FlowKey::ZERO
        };
        if n[3] % 2 == 0 {
            r.vlan_tci = 0;
        }
        let mut q = mf.value;
        let free = |a: u32, m: u32| a & !m;
        q.nw_src |= free(r.nw_src, mf.mask.nw_src);
        q.nw_dst |= free(r.nw_dst, mf.mask.nw_dst);
        q.tp_src |= r.tp_src & !mf.mask.tp_src;
        q.tp_dst |= r.tp_dst & !mf.mask.tp_dst;
        q.vlan_tci |= r.vlan_tci & !mf.mask.vlan_tci;
        q.tcp_flags |= r.tcp_flags & !mf.mask.tcp_flags;
        q.nw_proto |= r.nw_proto & !mf.mask.nw_proto;
        q.nw_tos |= r.nw_tos & !mf.mask.nw_tos;
        for i in 0..6 {
            q.dl_src[i] |= r.dl_src[i] & !mf.mask.dl_src[i];
            q.dl_dst[i] |= r.dl_dst[i] & !mf.mask.dl_dst[i];
        }
        let q = q.wire();
        if !mf.contains(&q) {
            continue; // not a packet that can exist inside this megaflow
        }
        prop_assert_eq!(
            winner_by_definition(sorted, &q),
            l.rule,
            "packet {:?} inside megaflow {} of {:?} gets another rule",
            q,
            mf,
            k
        );
        prop_assert_eq!(c.lookup_wc(&q).rule, l.rule);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn equals_definition_and_megaflow_property(
        specs in prop::collection::vec(spec(), 1..40),
        prios in prop::collection::vec(0u32..12, 40),
        distinct in any::<bool>(),
        packets in prop::collection::vec((any::<usize>(), any::<[u32; 4]>(), any::<u8>()), 1..40),
        inside in prop::collection::vec(any::<[u32; 4]>(), 8),
        removals in prop::collection::vec(any::<bool>(), 40),
    ) {
        let rules: Vec<Rule> = specs
            .iter()
            .enumerate()
            .map(|(i, s)| to_rule(i as u32, if distinct { 1000 - i as u32 * 7 % 997 } else { prios[i] }, s))
            .collect();
        let mut c = OfprotoClassifier::build(&rules).unwrap();
        let all = sorted(&rules);
        let keys: Vec<FlowKey> = packets.iter().map(|&(p, n, keep)| packet(&rules, p, n, keep)).collect();
        for k in &keys {
            check(&c, &all, k, &inside)?;
        }
        // Remove some, check, put them back (in another order), check again.
        let mut kept = Vec::new();
        let mut gone = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            if removals[i] {
                let removed = c.remove(r.id);
                prop_assert_eq!(removed.as_ref(), Some(r));
                gone.push(r.clone());
            } else {
                kept.push(r.clone());
            }
        }
        prop_assert_eq!(c.len(), kept.len());
        let some = sorted(&kept);
        for k in &keys {
            check(&c, &some, k, &inside)?;
        }
        for r in gone.into_iter().rev() {
            c.insert(r).unwrap();
        }
        for k in &keys {
            check(&c, &all, k, &inside)?;
        }
        prop_assert_eq!(c.remove(RuleId(9999)), None);
    }

    /// The count of overlapping equal-priority pairs (what decides whether a lookup may stop at
    /// OVS's point) equals the pairwise definition through inserts and removals.
    #[test]
    fn tied_overlaps_equal_pairwise_count(
        specs in prop::collection::vec(spec(), 1..40),
        prios in prop::collection::vec(0u32..4, 40),
        removals in prop::collection::vec(any::<bool>(), 40),
    ) {
        let rules: Vec<Rule> = specs.iter().enumerate().map(|(i, s)| to_rule(i as u32, prios[i], s)).collect();
        let pairs = |held: &[&Rule]| {
            let mut n = 0;
            for (i, a) in held.iter().enumerate() {
                for b in &held[i + 1..] {
                    if a.priority == b.priority && a.matches.overlaps(&b.matches) {
                        n += 1;
                    }
                }
            }
            n
        };
        let mut c = OfprotoClassifier::build(&rules).unwrap();
        prop_assert_eq!(c.tied_overlaps(0), pairs(&rules.iter().collect::<Vec<_>>()));
        let mut held: Vec<&Rule> = rules.iter().collect();
        for (i, r) in rules.iter().enumerate() {
            if removals[i] {
                c.remove(r.id).unwrap();
                held.retain(|h| h.id != r.id);
                prop_assert_eq!(c.tied_overlaps(0), pairs(&held));
            }
        }
        for (i, r) in rules.iter().enumerate().rev() {
            if removals[i] {
                c.insert(r.clone()).unwrap();
                held.push(r);
                prop_assert_eq!(c.tied_overlaps(0), pairs(&held));
            }
        }
    }
}
