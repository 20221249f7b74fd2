//! An iSet's candidate: 32 bytes, two to a cache line.
//!
//! A bucket's slot is checked in two steps: first its **pre-filter** entry (the iSet's two 32-bit
//! words, value and mask, eight slots at a time: `Prefilter` in `mod.rs`), then — for the first
//! slot that passes — its candidate, this [`Slot`]. What the pre-filter compares exactly (the IPv4
//! addresses on 5-tuple sets, IPv6/MAC/metadata windows on wide ones) the slot neither stores nor
//! checks again, so it holds only the rest of a 5-tuple rule: rank (priority, id), port ranges (a
//! prefix mask on a port as the range it accepts), protocol, TCP flags and `dl_type`, and the
//! index of the rule's rest in the side slab ([`Extras`]) when the rule uses anything else
//! (a port mask that is not a prefix or comes with a range, an address the pre-filter does not
//! hold, in_port, MACs, VLAN, IPv6 beyond the words, …).
//!
//! A slot is therefore valid **only for a key the pre-filter passed**; the one-key and batch scans
//! in `mod.rs` reach a slot no other way.
//!
//! A plain rule (action `drop`, cookie 0, table 0, no rest in the slab) is given back from
//! its slot and its pre-filter entry ([`Slot::whole_rule`]); whether a rule may be kept that way is
//! decided by making it back and comparing ([`Slot::holds_whole`]), never by looking at its fields.

use rqvs_flow::prefix::mask_as_range;
use rqvs_flow::{Action, Actions, FlowKey, Match, PortRange, Rule, RuleId};

use super::iset::Field;
use crate::compact::{CompactMatch, Extras, Key};

/// A rule as an iSet bucket holds it (see the module docs). `masked_ports` says, per port (bit 0
/// `tp_src`, bit 1 `tp_dst`), that the rule matched it by a prefix mask (an exact value, or an
/// OpenFlow rule's `tp_dst=0x400/0xfc00`) rather than by a range, so that it is given back in the
/// form it came in; the slot holds either as the range of values it accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(32))]
pub(super) struct Slot {
    pub(super) priority: u32,
    pub(super) id: RuleId,
    sp_lo: u16,
    sp_hi: u16,
    dp_lo: u16,
    dp_hi: u16,
    flags_v: u16,
    flags_m: u16,
    dl_type_v: u16,
    dl_type_m: u16,
    proto_v: u8,
    proto_m: u8,
    masked_ports: u8,
    extra: u32,
}

const _: () = assert!(std::mem::size_of::<Slot>() == 32);

const NO_EXTRA: u32 = CompactMatch::NO_EXTRA;
const MASKED_SRC: u8 = 1;
const MASKED_DST: u8 = 2;

/// A port's condition as a range, and whether it came as a mask: the rule's range when it has no
/// mask on the port; the values a prefix mask accepts when it has no range (OpenFlow's `tp_dst=80`
/// or `tp_dst=0x400/0xfc00`); `None` for a mask that is not a prefix, or a mask and a range
/// together (checked by the side slab).
fn port_range(range: PortRange, value: u16, mask: u16) -> Option<(PortRange, bool)> {
    if mask == 0 {
        return Some((range, false));
    }
    if !range.is_any() {
        return None;
    }
    let (lo, hi) = mask_as_range(u32::from(value), u32::from(mask), 16)?;
    Some((PortRange { lo: lo as u16, hi: hi as u16 }, true))
}

impl Slot {
    /// The slot of `rule` in an iSet whose pre-filter compares the words `pf`, and its pre-filter
    /// entry (`[value, mask]` of the first word, then of the second). A rule that uses any bit
    /// neither the entry nor the slot holds has the rest of its match (those bits) added to `extras`.
    pub(super) fn new(pf: [Field; 2], rule: &Rule, extras: &mut Extras) -> ([u32; 4], Slot) {
        let m = &rule.matches;
        let (v, k) = (m.value(), m.mask());
        let entry = [pf[0].word(v), pf[0].word(k), pf[1].word(v), pf[1].word(k)];
        let src = port_range(m.tp_src_range(), v.tp_src, k.tp_src);
        let dst = port_range(m.tp_dst_range(), v.tp_dst, k.tp_dst);
        // What is left for the side slab: the mask without the pre-filter's words and the
        // slot's own fields (a port goes only when the slot holds it whole).
        let mut rest = *k;
        pf[0].clear(&mut rest);
        pf[1].clear(&mut rest);
        rest.dl_type = 0;
        rest.tcp_flags = 0;
        rest.nw_proto = 0;
        if src.is_some() {
            rest.tp_src = 0;
        }
        if dst.is_some() {
            rest.tp_dst = 0;
        }
        let extra = if rest != FlowKey::ZERO { extras.add(m, &rest) } else { NO_EXTRA };
        // Without a whole port condition the slot still checks the rule's range (a necessary
        // condition); the side slab checks the mask.
        let (sp, sp_masked) = src.unwrap_or((m.tp_src_range(), false));
        let (dp, dp_masked) = dst.unwrap_or((m.tp_dst_range(), false));
        let slot = Slot {
            priority: rule.priority,
            id: rule.id,
            sp_lo: sp.lo,
            sp_hi: sp.hi,
            dp_lo: dp.lo,
            dp_hi: dp.hi,
            flags_v: v.tcp_flags,
            flags_m: k.tcp_flags,
            dl_type_v: v.dl_type,
            dl_type_m: k.dl_type,
            proto_v: v.nw_proto,
            proto_m: k.nw_proto,
            masked_ports: if sp_masked { MASKED_SRC } else { 0 } | if dp_masked { MASKED_DST } else { 0 },
            extra,
        };
        (entry, slot)
    }

    /// A slot that matches nothing and ranks last (padding).
    pub(super) fn dead() -> Slot {
        let any = Rule::new(u32::MAX, 0, Match::ANY, Actions::drop());
        let mut s = Slot::new([Field::NwSrc, Field::NwDst], &any, &mut Extras::default()).1;
        s.kill();
        s
    }

    /// Makes the slot match nothing, keeping its rank (a removed rule's slot stays where the
    /// bucket's order put it). Call [`Slot::release`] first.
    pub(super) fn kill(&mut self) {
        (self.sp_lo, self.sp_hi) = (1, 0);
        self.extra = NO_EXTRA;
    }

    /// Frees the slot's rest in `extras`, if it has one.
    pub(super) fn release(&self, extras: &mut Extras) {
        if self.extra != NO_EXTRA {
            extras.free(self.extra);
        }
    }

    /// The index of the slot's rest in the slab ([`Extras::prefetch_at`]).
    #[inline(always)]
    pub(super) fn extra(&self) -> u32 {
        self.extra
    }

    /// Does `k` satisfy the rule, given that the pre-filter passed it?
    #[inline(always)]
    pub(super) fn matches<K: Key>(&self, k: &K, extras: &Extras) -> bool {
        let (sp, dp) = (k.tp_src(), k.tp_dst());
        self.sp_lo <= sp
            && sp <= self.sp_hi
            && self.dp_lo <= dp
            && dp <= self.dp_hi
            && (k.nw_proto() & self.proto_m) == self.proto_v
            && (k.tcp_flags() & self.flags_m) == self.flags_v
            && (k.dl_type() & self.dl_type_m) == self.dl_type_v
            && (self.extra == NO_EXTRA || extras.matches(self.extra, &k.words()))
    }

    /// The rule made of the slot and its pre-filter entry alone (action `drop`, cookie and table
    /// 0, every other field wildcarded); `None` when the slot has a rest in the slab. Equal
    /// to the rule the slot was made from only when that rule used nothing else — see
    /// [`Slot::holds_whole`].
    pub(super) fn whole_rule(&self, entry: [u32; 4], pf: [Field; 2]) -> Option<Rule> {
        if self.extra != NO_EXTRA || self.sp_lo > self.sp_hi || self.dp_lo > self.dp_hi {
            return None;
        }
        let (sp_masked, dp_masked) = (self.masked_ports & MASKED_SRC != 0, self.masked_ports & MASKED_DST != 0);
        // A prefix's range gives its mask back: the bits where its ends agree.
        let mask_of = |masked: bool, lo: u16, hi: u16| if masked { !(lo ^ hi) } else { 0 };
        let mut value = FlowKey {
            tp_src: if sp_masked { self.sp_lo } else { 0 },
            tp_dst: if dp_masked { self.dp_lo } else { 0 },
            dl_type: self.dl_type_v,
            tcp_flags: self.flags_v,
            nw_proto: self.proto_v,
            ..FlowKey::ZERO
        };
        let mut mask = FlowKey {
            tp_src: mask_of(sp_masked, self.sp_lo, self.sp_hi),
            tp_dst: mask_of(dp_masked, self.dp_lo, self.dp_hi),
            dl_type: self.dl_type_m,
            tcp_flags: self.flags_m,
            nw_proto: self.proto_m,
            ..FlowKey::ZERO
        };
        for (f, w) in pf.iter().zip(entry.chunks(2)) {
            f.set_word(&mut value, w[0]);
            f.set_word(&mut mask, w[1]);
        }
        let range = |masked: bool, lo: u16, hi: u16| if masked { PortRange::ANY } else { PortRange { lo, hi } };
        let matches =
            Match::new(value, mask, range(sp_masked, self.sp_lo, self.sp_hi), range(dp_masked, self.dp_lo, self.dp_hi))
                .ok()?;
        Some(Rule { id: self.id, priority: self.priority, matches, actions: Actions::drop(), cookie: 0, table: 0 })
    }

    /// True when `rule` is exactly what [`Slot::whole_rule`] gives back.
    pub(super) fn holds_whole(&self, entry: [u32; 4], pf: [Field; 2], rule: &Rule) -> bool {
        // What a slot gives back drops, with no cookie or table: any other rule is told apart
        // before the slot's rule is made (a flow-mod's flow always is).
        if rule.cookie != 0 || rule.table != 0 || !matches!(rule.actions.0[..], [Action::Drop]) {
            return false;
        }
        self.whole_rule(entry, pf).as_ref() == Some(rule)
    }
}

/// A slot with what it needs to give its rule back: the pre-filter entry and words beside it
/// (a trainer's snapshot, a removed rule).
#[derive(Clone, Copy, Debug)]
pub(crate) struct WholeSlot {
    pub(super) slot: Slot,
    pub(super) entry: [u32; 4],
    pub(super) pf: [Field; 2],
}

impl WholeSlot {
    pub(crate) fn to_rule(self) -> Rule {
        self.slot.whole_rule(self.entry, self.pf).expect("a slot kept whole gives its rule back")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// A slot behind its pre-filter accepts exactly the keys the rule does (the compact
        /// match, which checks every field itself, is the model), for either pair of words; a
        /// rule made back from a slot is the rule whenever the slot says it holds it whole, and
        /// a plain 5-tuple rule with ranges or exact ports behind the IPv4 words is held whole.
        #[test]
        fn a_slot_behind_its_prefilter_is_the_rule(case in testing::arb_case(), wide in any::<bool>()) {
            let pf = if wide { [Field::Ipv6Src0, Field::DlDstLo] } else { [Field::NwSrc, Field::NwDst] };
            let mut extras = Extras::default();
            let mut compact = Extras::default();
            // Each rule as it is (nearly always with a rest in the slab) and narrowed to
            // its 5-tuple fields (the slot alone decides).
            let narrowed = case.rules.iter().map(|r| Rule { matches: testing::five_tuple(&r.matches), ..r.clone() });
            let rules: Vec<Rule> = case.rules.iter().cloned().chain(narrowed).collect();
            for r in &rules {
                let (e, s) = Slot::new(pf, r, &mut extras);
                let c = CompactMatch::new(&r.matches, &mut compact);
                // The case's keys, and keys at the rule's edges: its value with the ports at
                // their ranges' ends, then one field at a time moved off it.
                let (v, sr, dr) = (r.matches.value(), r.matches.tp_src_range(), r.matches.tp_dst_range());
                let base = FlowKey {
                    tp_src: if sr.is_any() { v.tp_src } else { sr.lo },
                    tp_dst: if dr.is_any() { v.tp_dst } else { dr.hi },
                    ..*v
                };
                let moved: [fn(&mut FlowKey); 9] = [
                    |_| (),
                    |k| k.nw_proto ^= 1,
                    |k| k.dl_type ^= 1,
                    |k| k.tcp_flags ^= 0x12,
                    |k| k.tp_src = k.tp_src.wrapping_sub(1),
                    |k| k.tp_dst = k.tp_dst.wrapping_add(1),
                    |k| k.nw_src ^= 1 << 31,
                    |k| k.in_port ^= 1,
                    |k| k.vlan_tci ^= 0x1001,
                ];
                let edges = moved.iter().map(|f| {
                    let mut k = base;
                    f(&mut k);
                    k
                });
                for k in case.keys.iter().copied().chain(edges) {
                    let k = &k;
                    let passed = (pf[0].value(k) & e[1]) == e[0] && (pf[1].value(k) & e[3]) == e[2];
                    let want = c.matches(k, &compact);
                    prop_assert_eq!(want, r.matches.matches(k));
                    prop_assert_eq!(passed && s.matches(k, &extras), want, "rule {:?} key {:?}", r, k);
                    if let Some(n) = k.narrow() {
                        prop_assert_eq!(passed && s.matches(&n, &extras), c.matches(&n, &compact));
                    }
                }
                if let Some(back) = s.whole_rule(e, pf) {
                    prop_assert_eq!(s.holds_whole(e, pf, r), &back == r);
                }
                if !wide && testing::plain(r) && testing::ports_as_ranges(&r.matches) {
                    prop_assert!(s.holds_whole(e, pf, r), "{:?}", r);
                }
            }
        }
    }

    #[test]
    fn a_dead_slot_matches_nothing_and_ranks_last() {
        let d = Slot::dead();
        assert!(!d.matches(&FlowKey::ZERO, &Extras::default()));
        assert_eq!((d.priority, d.id), (0, RuleId(u32::MAX)));
        assert_eq!(d.whole_rule([1, 0, 1, 0], [Field::NwSrc, Field::NwDst]).map(|r| r.matches), None);
    }
}
