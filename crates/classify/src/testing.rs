//! Test support: random rule-sets with heavy overlap on every field kind, and the differential
//! check every classifier runs against the brute-force winner, through builds, inserts and removes.

use proptest::prelude::*;
use rqvs_flow::{Actions, FlowKey, Match, PortRange, Rule, RuleId};

use crate::{Classifier, Remainder};

/// Brute force over `Rule::beats`, independent of any classifier's layout or sorting.
pub fn brute(rules: &[Rule], k: &FlowKey) -> Option<RuleId> {
    let mut best: Option<&Rule> = None;
    for r in rules.iter().filter(|r| r.matches.matches(k)) {
        if best.is_none_or(|b| r.beats(b)) {
            best = Some(r);
        }
    }
    best.map(|r| r.id)
}

/// Keys from a small space so that random rules overlap heavily: IPv4 (most), ARP, and IPv6
/// keys, with the wide fields (metadata, IPv6 addresses and label, ND target, ARP hardware
/// addresses, TTL, VLAN) drawn from small spaces too.
pub fn arb_key() -> impl Strategy<Value = FlowKey> {
    let narrow = (0u32..16, 0u32..16, 0u16..8, 0u16..8, 0u8..3, 0u16..4, 0u32..3, 0u8..2, 0u8..10);
    let wide = (0u64..3, 0u128..8, 0u128..8, 0u8..3, 0u32..3, 0u8..2, 0u16..3);
    (narrow, wide).prop_map(|((s, d, sp, dp, proto, flags, port, mac, kind), (meta, s6, d6, ttl, label, sha, vlan))| {
        let dl_type = match kind {
            0..=6 => 0x0800,
            7 => 0x0806,
            _ => 0x86dd,
        };
        let v6 = dl_type == 0x86dd;
        FlowKey {
            nw_src: if v6 { 0 } else { s << 28 | s },
            nw_dst: if v6 { 0 } else { d << 28 },
            tp_src: sp,
            tp_dst: dp << 13 | dp,
            nw_proto: proto,
            tcp_flags: flags,
            in_port: port,
            dl_src: [mac; 6],
            dl_type,
            vlan_tci: if vlan == 0 { 0 } else { 0x1000 | vlan },
            nw_ttl: ttl,
            metadata: meta,
            ipv6_src: if v6 { s6 << 124 | s6 } else { 0 },
            ipv6_dst: if v6 { d6 << 120 } else { 0 },
            ipv6_label: if v6 { label } else { 0 },
            nd_target: if v6 { s6 << 64 } else { 0 },
            arp_sha: [sha; 6],
            ..FlowKey::default()
        }
    })
}

/// A match over the keys of [`arb_key`]: prefixes and non-prefix masks on addresses, ranges and
/// masks on ports, wildcards anywhere.
pub fn arb_match() -> impl Strategy<Value = Match> {
    (arb_key(), any::<[bool; 10]>(), 0u16..8, 0u16..8, 0u32..=32, 0u16..8, 0u16..8, any::<[bool; 8]>(), 0u32..=128)
        .prop_map(|(k, w, a, b, slen, c, d, x, len6)| {
            let mut m = FlowKey::EXACT;
            m.nw_src = if w[0] {
                0
            } else if w[7] {
                0xc000_000f
            } else {
                rqvs_flow::prefix::prefix_mask(slen, 32)
            };
            m.nw_dst = if w[1] { 0 } else { 0xf000_0000 };
            m.tp_src = if w[2] { 0 } else { 0x6 };
            m.tp_dst = if w[3] {
                0
            } else if w[8] {
                0xe000
            } else {
                0xffff
            };
            m.nw_proto = if w[4] { 0 } else { 0xff };
            m.tcp_flags = if w[5] { 0 } else { 0x3 };
            m.in_port = if w[6] { 0 } else { u32::MAX };
            m.dl_src = if w[7] { [0; 6] } else { [0xff; 6] };
            m.dl_type = if w[9] { 0 } else { 0xffff };
            m.vlan_tci = 0;
            m.nw_tos = 0;
            m.nw_frag = 0;
            m.dl_dst = [0; 6];
            // The wide fields: each examined by about one rule in four, with prefixes and
            // non-prefix masks on the IPv6 addresses.
            m.metadata = if x[0] && x[1] { 3 } else { 0 };
            m.ipv6_src = if x[2] && x[3] {
                if w[7] {
                    0xf000_0000_0000_0000_0000_0000_0000_000f
                } else {
                    u128::MAX.checked_shl(128 - len6).unwrap_or(0)
                }
            } else {
                0
            };
            m.ipv6_dst = if x[4] && x[5] { 0xff00_0000_0000_0000_0000_0000_0000_0000 } else { 0 };
            m.nd_target = if x[6] && x[0] { u128::MAX } else { 0 };
            m.ipv6_label = if x[7] && x[1] { 3 } else { 0 };
            m.nw_ttl = if x[1] && x[3] { 0xff } else { 0 };
            m.arp_sha = if x[5] && x[6] { [0xff; 6] } else { [0; 6] };
            m.vlan_tci = if x[3] && x[7] { 0x1fff } else { 0 };
            let sr = PortRange::new(a.min(b), a.max(b)).unwrap();
            let dr = PortRange::new((c.min(d)) << 13, (c.max(d) << 13) | 0x1fff).unwrap();
            Match::new(k.masked(&m), m, sr, if w[8] { PortRange::ANY } else { dr }).unwrap()
        })
}

/// A differential case: rules (ids unique, priorities from a small set so ties happen), probe
/// keys, and which rules to remove after the build.
#[derive(Clone, Debug)]
pub struct Case {
    pub rules: Vec<Rule>,
    pub keys: Vec<FlowKey>,
    pub removals: Vec<prop::sample::Index>,
}

pub fn arb_case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec((arb_match(), 0u32..6), 1..60),
        prop::collection::vec(arb_key(), 1..80),
        prop::collection::vec(any::<prop::sample::Index>(), 0..12),
    )
        .prop_map(|(spec, keys, removals)| {
            let rules = spec
                .into_iter()
                .enumerate()
                .map(|(i, (m, p))| Rule::new((i as u32 * 7) % 101, p, m, Actions::drop()))
                .collect();
            Case { rules, keys, removals }
        })
}

pub fn check_all(c: &dyn Classifier, rules: &[Rule], keys: &[FlowKey], stage: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(c.len(), rules.len(), "{}: len", stage);
    let mut batch = vec![None; keys.len()];
    c.lookup_batch(keys, &mut batch);
    for (k, b) in keys.iter().zip(&batch) {
        let want = brute(rules, k);
        prop_assert_eq!(c.lookup(k), want, "{}: lookup {:?}", stage, k);
        prop_assert_eq!(*b, want, "{}: lookup_batch {:?}", stage, k);
    }
    // The same batch as narrow keys (those without wide members): the same answers.
    let narrow: Vec<(usize, rqvs_flow::key::NarrowKey)> =
        keys.iter().enumerate().filter_map(|(i, k)| k.narrow().map(|n| (i, n))).collect();
    let nk: Vec<rqvs_flow::key::NarrowKey> = narrow.iter().map(|&(_, n)| n).collect();
    let mut got = vec![None; nk.len()];
    c.lookup_batch_narrow(&nk, &mut got);
    for (&(i, n), g) in narrow.iter().zip(&got) {
        prop_assert_eq!(*g, batch[i], "{}: lookup_batch_narrow {:?}", stage, keys[i]);
        prop_assert_eq!(c.lookup_narrow(&n), batch[i], "{}: lookup_narrow {:?}", stage, keys[i]);
    }
    Ok(())
}

/// Builds from half the rules, inserts the rest, checks; removes some (and re-removes, which must
/// fail), checks; re-inserts them, checks; and checks a duplicate insert is refused.
pub fn check_differential(case: &Case, build: impl Fn(&[Rule]) -> Box<dyn Classifier>) -> Result<(), TestCaseError> {
    let mut rules = case.rules.clone();
    let half = rules.len() / 2;
    let mut c = build(&rules[..half]);
    check_all(c.as_ref(), &rules[..half], &case.keys, "build")?;
    for r in &rules[half..] {
        c.insert(r.clone()).unwrap();
    }
    check_all(c.as_ref(), &rules, &case.keys, "insert")?;
    prop_assert!(c.insert(rules[0].clone()).is_err(), "duplicate insert accepted");
    let mut removed = Vec::new();
    for ix in &case.removals {
        if rules.is_empty() {
            break;
        }
        let victim = rules.remove(ix.index(rules.len()));
        prop_assert_eq!(c.remove(victim.id).map(|x| x.id), Some(victim.id));
        prop_assert!(c.remove(victim.id).is_none());
        removed.push(victim);
    }
    check_all(c.as_ref(), &rules, &case.keys, "remove")?;
    for r in removed {
        c.insert(r.clone()).unwrap();
        rules.push(r);
    }
    check_all(c.as_ref(), &rules, &case.keys, "re-insert")
}

/// `lookup_beating` against a brute force over the rules that beat the floor, for no floor and
/// for the rank of every rule of the case as the floor.
pub fn check_remainder(case: &Case, c: &dyn Remainder) -> Result<(), TestCaseError> {
    let floors: Vec<Option<(u32, RuleId)>> =
        std::iter::once(None).chain(case.rules.iter().map(|r| Some((r.priority, r.id)))).collect();
    for k in &case.keys {
        for &floor in &floors {
            let beating: Vec<Rule> = case
                .rules
                .iter()
                .filter(|r| floor.is_none_or(|(fp, fid)| rqvs_flow::rule::beats(r.priority, r.id, fp, fid)))
                .cloned()
                .collect();
            let want = brute(&beating, k).map(|id| {
                let r = beating.iter().find(|r| r.id == id).expect("winner is in the set");
                (r.priority, r.id)
            });
            prop_assert_eq!(c.lookup_beating(k, floor), want, "floor {:?} key {:?}", floor, k);
        }
    }
    Ok(())
}

/// Prefixes of any length over the wide fields the iSets index by windows (`ipv6_src`,
/// `ipv6_dst`: 0..=128 bits; `dl_dst`: 0..=48; `metadata`: 0..=64) under a few shared base
/// values, so that rules nest and overlap inside every 32-bit window; keys are the bases with a
/// few random bits flipped (inside and just outside the prefixes).
pub fn arb_wide_prefix_case() -> impl Strategy<Value = Case> {
    wide_prefix_case(true)
}

/// [`arb_wide_prefix_case`] with rules on the IPv6 addresses alone (and `dl_type`): two wide
/// fields, so NuevoMatchUP's two pre-filter words can hold every bit of a rule outside the
/// compact entry (then no side-slab entry is kept — and a pre-filter that checked less than it
/// claims would answer wrongly here, prefixes longer than a window included).
pub fn arb_ipv6_prefix_case() -> impl Strategy<Value = Case> {
    wide_prefix_case(false)
}

fn wide_prefix_case(macs_and_metadata: bool) -> impl Strategy<Value = Case> {
    const BASES: [u128; 3] = [
        0x2001_0db8_0000_0001_0000_0000_0000_0001,
        0x2001_0db8_8000_0000_ffff_0000_0000_0000,
        0xfd00_0000_0000_0000_0000_0000_dead_beef,
    ];
    let prefix = |bits: u32| (0usize..3, 0u32..=bits, any::<u128>(), any::<bool>());
    let rule = (prefix(128), prefix(128), prefix(48), prefix(64), 0u32..6);
    let flips = (0usize..3, 0usize..3, 0u32..128, 0u32..128, 0u32..48, 0u32..64, any::<u8>());
    (
        prop::collection::vec(rule, 1..60),
        prop::collection::vec(flips, 1..80),
        prop::collection::vec(any::<prop::sample::Index>(), 0..12),
    )
        .prop_map(move |(spec, flips, removals)| {
            // A prefix of `len` bits of a base (with random bits below it, which the mask drops),
            // or no match on the field when `skip`.
            let pre = |(b, len, noise, skip): (usize, u32, u128, bool), bits: u32| -> (u128, u128) {
                if skip && len % 2 == 0 {
                    return (0, 0);
                }
                // IPv6 alone: the base itself or one bit of it flipped, so that long prefixes
                // (ending in any window) match the keys too.
                let noise = match noise % 2 {
                    _ if macs_and_metadata => noise,
                    0 => 0,
                    _ => 1u128 << ((noise >> 1) % u128::from(bits)),
                };
                let all = if bits == 128 { u128::MAX } else { (1u128 << bits) - 1 };
                let mask = if len == 0 { 0 } else { all & !all.checked_shr(len).unwrap_or(0) };
                let v = (BASES[b] ^ noise) & all;
                (v & mask, mask)
            };
            let mac = |v: u128| -> [u8; 6] { std::array::from_fn(|i| (v >> (8 * (5 - i))) as u8) };
            let rules = spec
                .into_iter()
                .enumerate()
                .map(|(i, (s, d, e, md, p))| {
                    let (mut v, mut m) = (FlowKey::ZERO, FlowKey::ZERO);
                    (v.dl_type, m.dl_type) = (0x86dd, u16::MAX);
                    (v.ipv6_src, m.ipv6_src) = pre(s, 128);
                    (v.ipv6_dst, m.ipv6_dst) = pre(d, 128);
                    if macs_and_metadata {
                        let (ev, em) = pre(e, 48);
                        (v.dl_dst, m.dl_dst) = (mac(ev), mac(em));
                        let (mv, mm) = pre(md, 64);
                        (v.metadata, m.metadata) = (mv as u64, mm as u64);
                    }
                    Rule::new((i as u32 * 7) % 101, p, Match::from_masked(v, m), Actions::drop())
                })
                .collect();
            let keys = flips
                .into_iter()
                .map(|(a, b, fs, fd, fe, fm, which)| {
                    let mut k = FlowKey::ipv6(BASES[a], BASES[b], 6, 1, 2);
                    k.dl_dst = mac(BASES[b] & ((1u128 << 48) - 1));
                    k.metadata = BASES[a] as u64;
                    // Flip one bit of some fields (which ones: the bits of `which`).
                    if which & 1 != 0 {
                        k.ipv6_src ^= 1u128 << fs;
                    }
                    if which & 2 != 0 {
                        k.ipv6_dst ^= 1u128 << fd;
                    }
                    if which & 4 != 0 {
                        k.dl_dst = mac((BASES[b] & ((1u128 << 48) - 1)) ^ 1u128 << fe);
                    }
                    if which & 8 != 0 {
                        k.metadata ^= 1u64 << fm;
                    }
                    k
                })
                .collect();
            Case { rules, keys, removals }
        })
}

/// `m` on the fields of the compact match alone (the others wildcarded).
pub fn five_tuple(m: &rqvs_flow::Match) -> rqvs_flow::Match {
    let k = m.mask();
    let mask = FlowKey {
        nw_src: k.nw_src,
        nw_dst: k.nw_dst,
        tp_src: k.tp_src,
        tp_dst: k.tp_dst,
        nw_proto: k.nw_proto,
        tcp_flags: k.tcp_flags,
        dl_type: k.dl_type,
        ..FlowKey::ZERO
    };
    rqvs_flow::Match::new(m.value().masked(&mask), mask, m.tp_src_range(), m.tp_dst_range()).unwrap()
}

/// A `drop` rule with cookie and table 0 on the compact match's fields alone.
pub fn plain(r: &Rule) -> bool {
    r.actions == Actions::drop() && r.cookie == 0 && r.table == 0 && five_tuple(&r.matches) == r.matches
}

/// Does `m` match each port by a range alone or by a prefix mask alone (what a NuevoMatchUP slot
/// holds as a range)?
pub fn ports_as_ranges(m: &rqvs_flow::Match) -> bool {
    let k = m.mask();
    let port = |mask: u16, range: rqvs_flow::PortRange| {
        mask == 0 || (range.is_any() && rqvs_flow::prefix::prefix_len(u32::from(mask), 16).is_some())
    };
    port(k.tp_src, m.tp_src_range()) && port(k.tp_dst, m.tp_dst_range())
}

/// The case's rules: half of them on the 5-tuple fields alone, plain or with an action, a
/// cookie or a table of their own (none of which a candidate holds); the rest as they are.
pub fn with_varied_rest(rules: &[Rule]) -> Vec<Rule> {
    let output = |i: usize| Actions(vec![rqvs_flow::Action::Output(i as u32)]);
    let vary = |(i, r): (usize, &Rule)| {
        let narrow = Rule { matches: five_tuple(&r.matches), ..r.clone() };
        match i % 8 {
            0..=3 => narrow,
            4 => Rule { actions: output(i), ..narrow },
            5 => Rule { cookie: i as u64 + 1, ..narrow },
            6 => Rule { table: 1, ..narrow },
            _ => r.clone(),
        }
    };
    rules.iter().enumerate().map(vary).collect()
}

/// `rules` in id order.
pub fn by_id(mut rules: Vec<Rule>) -> Vec<Rule> {
    rules.sort_by_key(|r| r.id);
    rules
}
