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

/// Keys from a small space so that random rules overlap heavily.
pub fn arb_key() -> impl Strategy<Value = FlowKey> {
    (0u32..16, 0u32..16, 0u16..8, 0u16..8, 0u8..3, 0u16..4, 0u32..3, 0u8..2, prop::bool::weighted(0.9)).prop_map(
        |(s, d, sp, dp, proto, flags, port, mac, ip)| FlowKey {
            nw_src: s << 28 | s,
            nw_dst: d << 28,
            tp_src: sp,
            tp_dst: dp << 13 | dp,
            nw_proto: proto,
            tcp_flags: flags,
            in_port: port,
            dl_src: [mac; 6],
            dl_type: if ip { 0x0800 } else { 0x0806 },
            ..FlowKey::default()
        },
    )
}

/// A match over the keys of [`arb_key`]: prefixes and non-prefix masks on addresses, ranges and
/// masks on ports, wildcards anywhere.
pub fn arb_match() -> impl Strategy<Value = Match> {
    (arb_key(), any::<[bool; 10]>(), 0u16..8, 0u16..8, 0u32..=32, 0u16..8, 0u16..8).prop_map(
        |(k, w, a, b, slen, c, d)| {
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
            let sr = PortRange::new(a.min(b), a.max(b)).unwrap();
            let dr = PortRange::new((c.min(d)) << 13, (c.max(d) << 13) | 0x1fff).unwrap();
            Match::new(k.masked(&m), m, sr, if w[8] { PortRange::ANY } else { dr }).unwrap()
        },
    )
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
