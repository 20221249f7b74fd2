//! `CompactMatch`: a rule's match flattened for fast validation, shared by the classifiers that
//! check candidates field by field (the reference scan and TupleMerge buckets).
//!
//! The 48-byte entry holds what ClassBench-style rules use — addresses, port ranges and port
//! masks, protocol, TCP flags, dl_type — tested cheapest and most selective first. A rule that also
//! matches other fields (in_port, MACs, VLAN, ToS, fragments, TTL, metadata, IPv6, ND, ARP
//! hardware addresses) keeps the words of its match that hold those bits in the [`Extras`] slab
//! (`extras.rs`) and the entry holds their index, checked last. (NuevoMatchUP's iSet buckets hold
//! a smaller candidate of their own behind their pre-filter: `nuevomatch/slot.rs`; they share the
//! slab and the [`Key`] trait.)

use rqvs_flow::key::{KeyWords, NarrowKey};
use rqvs_flow::{Actions, FlowKey, Match, PortRange, Rule, RuleId};

use crate::classifier::{Classifier, Remainder};
pub(crate) use crate::extras::Extras;

/// A packet's key as the lookups read it: a [`FlowKey`], or a [`NarrowKey`] (the same narrow
/// fields without the wide ones, for batches of 5-tuple packets). The hot paths of TupleMerge and
/// NuevoMatchUP are written once over this trait and compiled for both.
pub(crate) trait Key: Copy {
    fn nw_src(&self) -> u32;
    fn nw_dst(&self) -> u32;
    fn tp_src(&self) -> u16;
    fn tp_dst(&self) -> u16;
    fn nw_proto(&self) -> u8;
    fn tcp_flags(&self) -> u16;
    fn dl_type(&self) -> u16;
    /// The other members TupleMerge's wide tuples hash (`tuplemerge::wide_value`); a
    /// [`NarrowKey`] has the wide ones (metadata, IPv6, ND, ARP hardware addresses) zero.
    fn in_port(&self) -> u32;
    fn vlan_tci(&self) -> u16;
    fn nw_tos(&self) -> u8;
    fn nw_frag(&self) -> u8;
    fn nw_ttl(&self) -> u8;
    fn dl_src(&self) -> [u8; 6];
    fn dl_dst(&self) -> [u8; 6];
    fn metadata(&self) -> u64;
    fn ipv6_src(&self) -> u128;
    fn ipv6_dst(&self) -> u128;
    fn ipv6_label(&self) -> u32;
    fn nd_target(&self) -> u128;
    fn arp_sha(&self) -> [u8; 6];
    fn arp_tha(&self) -> [u8; 6];
    /// The key packed by [`FlowKey::to_words`] (for the check of a rule's rest in [`Extras`]).
    fn words(&self) -> KeyWords;
    /// The classifier's `lookup` of a key of this type.
    fn lookup<C: Classifier + ?Sized>(c: &C, key: &Self) -> Option<RuleId>;
    /// The remainder's `lookup_beating` of a key of this type.
    fn lookup_beating<R: Remainder + ?Sized>(r: &R, key: &Self, floor: Option<(u32, RuleId)>) -> Option<(u32, RuleId)>;
    /// The remainder's `lookup_batch` of keys of this type.
    fn lookup_batch<C: Classifier + ?Sized>(c: &C, keys: &[Self], out: &mut [Option<RuleId>]);
    /// The remainder's `improve_batch` of keys of this type.
    fn improve_batch<R: Remainder + ?Sized>(r: &R, keys: &[Self], best: &mut [Option<(u32, RuleId)>]);
}

macro_rules! key_fields {
    () => {
        #[inline(always)]
        fn nw_src(&self) -> u32 {
            self.nw_src
        }
        #[inline(always)]
        fn nw_dst(&self) -> u32 {
            self.nw_dst
        }
        #[inline(always)]
        fn tp_src(&self) -> u16 {
            self.tp_src
        }
        #[inline(always)]
        fn tp_dst(&self) -> u16 {
            self.tp_dst
        }
        #[inline(always)]
        fn nw_proto(&self) -> u8 {
            self.nw_proto
        }
        #[inline(always)]
        fn tcp_flags(&self) -> u16 {
            self.tcp_flags
        }
        #[inline(always)]
        fn dl_type(&self) -> u16 {
            self.dl_type
        }
        #[inline(always)]
        fn in_port(&self) -> u32 {
            self.in_port
        }
        #[inline(always)]
        fn vlan_tci(&self) -> u16 {
            self.vlan_tci
        }
        #[inline(always)]
        fn nw_tos(&self) -> u8 {
            self.nw_tos
        }
        #[inline(always)]
        fn nw_frag(&self) -> u8 {
            self.nw_frag
        }
        #[inline(always)]
        fn nw_ttl(&self) -> u8 {
            self.nw_ttl
        }
        #[inline(always)]
        fn dl_src(&self) -> [u8; 6] {
            self.dl_src
        }
        #[inline(always)]
        fn dl_dst(&self) -> [u8; 6] {
            self.dl_dst
        }
    };
}

/// The wide members' accessors: a `FlowKey`'s own members, or zero (a `NarrowKey` has none).
macro_rules! wide_fields {
    (own) => {
        wide_fields!(@each self, metadata: u64, ipv6_src: u128, ipv6_dst: u128, ipv6_label: u32,
            nd_target: u128, arp_sha: [u8; 6], arp_tha: [u8; 6]);
    };
    (@each $s:ident, $($name:ident: $ty:ty),*) => {$(
        #[inline(always)]
        fn $name(&$s) -> $ty {
            $s.$name
        }
    )*};
    (zero) => {
        wide_fields!(@zero metadata: u64, ipv6_src: u128, ipv6_dst: u128, ipv6_label: u32,
            nd_target: u128, arp_sha: [u8; 6], arp_tha: [u8; 6]);
    };
    (@zero $($name:ident: $ty:ty),*) => {$(
        #[inline(always)]
        fn $name(&self) -> $ty {
            <$ty>::default()
        }
    )*};
}

impl Key for FlowKey {
    key_fields!();
    wide_fields!(own);
    #[inline(always)]
    fn words(&self) -> KeyWords {
        self.to_words()
    }
    fn lookup<C: Classifier + ?Sized>(c: &C, key: &Self) -> Option<RuleId> {
        c.lookup(key)
    }
    fn lookup_beating<R: Remainder + ?Sized>(r: &R, key: &Self, floor: Option<(u32, RuleId)>) -> Option<(u32, RuleId)> {
        r.lookup_beating(key, floor)
    }
    fn lookup_batch<C: Classifier + ?Sized>(c: &C, keys: &[Self], out: &mut [Option<RuleId>]) {
        c.lookup_batch(keys, out)
    }
    fn improve_batch<R: Remainder + ?Sized>(r: &R, keys: &[Self], best: &mut [Option<(u32, RuleId)>]) {
        r.improve_batch(keys, best)
    }
}

impl Key for NarrowKey {
    key_fields!();
    wide_fields!(zero);
    #[inline(always)]
    fn words(&self) -> KeyWords {
        let n = self.to_narrow_words();
        std::array::from_fn(|i| if i < n.len() { n[i] } else { 0 })
    }
    fn lookup<C: Classifier + ?Sized>(c: &C, key: &Self) -> Option<RuleId> {
        c.lookup_narrow(key)
    }
    fn lookup_beating<R: Remainder + ?Sized>(r: &R, key: &Self, floor: Option<(u32, RuleId)>) -> Option<(u32, RuleId)> {
        r.lookup_beating_narrow(key, floor)
    }
    fn lookup_batch<C: Classifier + ?Sized>(c: &C, keys: &[Self], out: &mut [Option<RuleId>]) {
        c.lookup_batch_narrow(keys, out)
    }
    fn improve_batch<R: Remainder + ?Sized>(r: &R, keys: &[Self], best: &mut [Option<(u32, RuleId)>]) {
        r.improve_batch_narrow(keys, best)
    }
}

/// A rule as hash buckets and iSet buckets hold it: rank and compact match.
#[derive(Clone, Copy)]
pub(crate) struct Candidate {
    pub(crate) priority: u32,
    pub(crate) id: RuleId,
    pub(crate) m: CompactMatch,
}

impl Candidate {
    /// True when `rule` is exactly what this candidate gives back ([`Candidate::whole_rule`]):
    /// a `drop` rule with cookie and table 0 whose match uses no field outside the compact
    /// match (every ClassBench rule). Decided by making the rule back and comparing, never by
    /// looking at the rule's fields.
    pub(crate) fn holds_whole(&self, rule: &Rule) -> bool {
        self.whole_rule().as_ref() == Some(rule)
    }

    /// The rule this candidate holds all of, when it does (see [`Candidate::holds_whole`]).
    pub(crate) fn whole_rule(&self) -> Option<Rule> {
        let matches = self.m.to_match()?;
        Some(Rule { id: self.id, priority: self.priority, matches, actions: Actions::drop(), cookie: 0, table: 0 })
    }
}

/// A match flattened for validation. `extra` is an index into the owner's [`Extras`], or
/// [`CompactMatch::NO_EXTRA`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct CompactMatch {
    src_v: u32,
    src_m: u32,
    dst_v: u32,
    dst_m: u32,
    sp_lo: u16,
    sp_hi: u16,
    dp_lo: u16,
    dp_hi: u16,
    sp_v: u16,
    sp_m: u16,
    dp_v: u16,
    dp_m: u16,
    dl_type_v: u16,
    dl_type_m: u16,
    flags_v: u16,
    flags_m: u16,
    proto_v: u8,
    proto_m: u8,
    pub(crate) extra: u32,
}

impl CompactMatch {
    pub(crate) const NO_EXTRA: u32 = u32::MAX;

    /// Flattens `m`, storing the rest of it in `extras` when it uses fields outside the entry.
    pub(crate) fn new(m: &Match, extras: &mut Extras) -> CompactMatch {
        let (v, k) = (m.value(), m.mask());
        let rest = FlowKey { nw_src: 0, nw_dst: 0, tp_src: 0, tp_dst: 0, dl_type: 0, tcp_flags: 0, nw_proto: 0, ..*k };
        let extra = if rest != FlowKey::ZERO { extras.add(m, &rest) } else { Self::NO_EXTRA };
        CompactMatch {
            src_v: v.nw_src,
            src_m: k.nw_src,
            dst_v: v.nw_dst,
            dst_m: k.nw_dst,
            sp_lo: m.tp_src_range().lo,
            sp_hi: m.tp_src_range().hi,
            dp_lo: m.tp_dst_range().lo,
            dp_hi: m.tp_dst_range().hi,
            sp_v: v.tp_src,
            sp_m: k.tp_src,
            dp_v: v.tp_dst,
            dp_m: k.tp_dst,
            dl_type_v: v.dl_type,
            dl_type_m: k.dl_type,
            flags_v: v.tcp_flags,
            flags_m: k.tcp_flags,
            proto_v: v.nw_proto,
            proto_m: k.nw_proto,
            extra,
        }
    }

    /// The match made of the entry's fields alone (every other field wildcarded); `None` when
    /// the entry has a rest in the side slab. Equal to the match the entry was made from
    /// only when that match used no field outside the entry — callers compare before relying
    /// on it (NuevoMatchUP's rule map keeps no stored rule when they are equal).
    pub(crate) fn to_match(self) -> Option<Match> {
        if self.extra != Self::NO_EXTRA {
            return None;
        }
        let value = FlowKey {
            nw_src: self.src_v,
            nw_dst: self.dst_v,
            tp_src: self.sp_v,
            tp_dst: self.dp_v,
            dl_type: self.dl_type_v,
            tcp_flags: self.flags_v,
            nw_proto: self.proto_v,
            ..FlowKey::ZERO
        };
        let mask = FlowKey {
            nw_src: self.src_m,
            nw_dst: self.dst_m,
            tp_src: self.sp_m,
            tp_dst: self.dp_m,
            dl_type: self.dl_type_m,
            tcp_flags: self.flags_m,
            nw_proto: self.proto_m,
            ..FlowKey::ZERO
        };
        let ranges = (PortRange { lo: self.sp_lo, hi: self.sp_hi }, PortRange { lo: self.dp_lo, hi: self.dp_hi });
        Match::new(value, mask, ranges.0, ranges.1).ok()
    }

    /// Frees the entry's slot in `extras`, if it has one.
    pub(crate) fn release(&self, extras: &mut Extras) {
        if self.extra != Self::NO_EXTRA {
            extras.free(self.extra);
        }
    }

    /// Does `k` satisfy the match?
    #[inline(always)]
    pub(crate) fn matches<K: Key>(&self, k: &K, extras: &Extras) -> bool {
        self.matches_compact(k) && (self.extra == Self::NO_EXTRA || extras.matches(self.extra, &k.words()))
    }

    #[inline(always)]
    fn matches_compact<K: Key>(&self, k: &K) -> bool {
        let (sp, dp) = (k.tp_src(), k.tp_dst());
        (k.nw_src() & self.src_m) == self.src_v
            && (k.nw_dst() & self.dst_m) == self.dst_v
            && self.sp_lo <= sp
            && sp <= self.sp_hi
            && self.dp_lo <= dp
            && dp <= self.dp_hi
            && (k.nw_proto() & self.proto_m) == self.proto_v
            && (sp & self.sp_m) == self.sp_v
            && (dp & self.dp_m) == self.dp_v
            && (k.tcp_flags() & self.flags_m) == self.flags_v
            && (k.dl_type() & self.dl_type_m) == self.dl_type_v
    }
}
