//! `TupleMerge` (Daly, Bruschi, Linguaglossa, Pontarelli, Rossi, Tollet, Torng, Yourtchenko,
//! IEEE/ACM ToN 2019): tuple space search with *relaxed* tuples, the remainder classifier of the
//! NSDI'22 paper.
//!
//! A rule's **tuple** is how many leading bits it fixes on each field: the five classic ones,
//! nw_src (0..32), nw_dst (0..32), tp_src (0..16), tp_dst (0..16) and nw_proto (0..8), and the
//! wide ones ([`WIDE_DIMS`]: in_port, dl_type, VLAN, ToS, fragments, TTL, TCP flags, the MACs,
//! metadata, IPv6 addresses (0..128), flow label, ND target, ARP hardware addresses), each viewed
//! so that OpenFlow's usual masks are prefixes (`vlan_vid` with OFPVID_PRESENT is a 13-bit
//! prefix of the VLAN dimension). A port range fixes the bits its low and high ends share, so
//! ranges need no expansion. A **table** has a tuple too and
//! accepts any rule whose tuple is at least as long on every field: it hashes the rule (and the
//! packet) on the table's shorter prefixes, so rules with different tuples share one table, and
//! every candidate found in a bucket is *validated* on all its fields (the compact match of
//! `compact.rs`, then any other field, on the words of it kept in the side slab `extras.rs`).
//!
//! - **Insert**: into the first table, in priority order, that accepts the rule's tuple. When the
//!   rule's bucket then holds more than the *collision limit* rules (default 10, as the authors'
//!   code), the table is split: the colliding rules' tuples give a longer tuple (halfway towards
//!   their common maximum on the field where they differ most), and every rule of the table that
//!   fits it moves to that table (found or made). A bucket whose split found no longer tuple
//!   notes its rules' shortest and longest lengths; inserts that leave both unchanged do not
//!   try again (the split would find the same nothing), any other change forgets the note.
//!   When no table accepts the rule, a new table is made with the rule's tuple *relaxed*: if
//!   one address is more than 4 bits longer than the other, the shorter address is dropped;
//!   address lengths are shortened (32 → 28, 25..31 → −3, 17..24 → −2, 9..16 → −1; IPv6
//!   addresses the same way, by an eighth: 128 → 112, 64 → 56);
//!   and, unlike the authors' code, both ports are dropped — only splits bring ports into a
//!   table's tuple (measured: fewer tables, faster lookups) — and so are the wide fields with
//!   few values (`dl_type`, `nw_frag`, `nw_ttl`, `tcp_flags`). MACs, `in_port`, VLAN, ToS and
//!   metadata keep their lengths (OpenFlow tables match them exactly or by OUI). A split on the
//!   wide fields goes to the field of the widest difference as on the classic ones; colliding
//!   rules that share one tuple move to a table with their own lengths on the wide fields
//!   (where the relaxed table hashed fewer bits: rules that differ in bits 56..63 of an IPv6
//!   /64). A 5-tuple set's tables hash no wide field (every rule's only wide length is
//!   `dl_type`'s, which relaxing drops and no split raises), so its lookups do what they did.
//! - **Hashing**: a table hashes its classic fields' masked values and, when its tuple has wide
//!   lengths, a 32-bit fingerprint of the masked wide fields (buckets key on it: two groups of
//!   rules that share it share a bucket, whose candidates are validated anyway). A bucket is
//!   one cache line: the key's 63-bit hash (the key itself is not stored: keys whose hashes are
//!   equal share a bucket, exact for the same reason) and the best rule inline; the others, in
//!   winner order, in a side table under the same hash (most buckets hold one rule).
//! - **Lookup**: tables in descending order of their highest priority; stop once the best match
//!   outranks every remaining table; inside a bucket, rules are in winner order, so the first
//!   match is the bucket's best. Lookups do no bookkeeping.
//! - **Remove**: from its table (known from the rule's record); an emptied table is removed alone.
//!
//! Unlike the authors' code, removing an emptied table does not drop the tables after it, and no
//! statistics are updated on lookups.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::sync::Arc;

use hashbrown::HashTable;
use rqvs_flow::prefix::prefix_mask;
use rqvs_flow::{FlowKey, Match, PortRange, Rule, RuleId};

use crate::classifier::{Classifier, ClassifierError, Remainder, BATCH};
use crate::compact::{Candidate, CompactMatch, Extras, Key};
use crate::idmap::{IdIndex, IdMap};
use crate::stored::{Held, HeldRule, StoredRule};
use rqvs_flow::key::NarrowKey;

/// Width in bits of each classic hashed field: nw_src, nw_dst, tp_src, tp_dst, nw_proto.
const WIDTH: [u32; 5] = [32, 32, 16, 16, 8];
/// Rule count from which `lookup_batch` goes table by table instead of key by key.
const TABLE_MAJOR_BATCH_RULES: usize = 100_000;
/// The authors' default collision limit.
pub const DEFAULT_COLLISION_LIMIT: usize = 10;

/// The wide dimensions of a tuple, after the five classic ones: every other member of the key,
/// each viewed so that the masks OpenFlow tables use are prefixes (`wide_value`: VLAN as CFI and
/// VID first, then PCP; fragments as ANY then LATER).
pub const WIDE_DIMS: [&str; NW] = [
    "in_port",
    "dl_type",
    "vlan_tci",
    "nw_tos",
    "nw_frag",
    "nw_ttl",
    "tcp_flags",
    "dl_src",
    "dl_dst",
    "metadata",
    "ipv6_src",
    "ipv6_dst",
    "ipv6_label",
    "nd_target",
    "arp_sha",
    "arp_tha",
];
/// Number of wide dimensions.
const NW: usize = 16;
/// Width in bits of each wide dimension.
const WIDE_WIDTH: [u32; NW] = [32, 16, 16, 8, 2, 8, 12, 48, 48, 64, 128, 128, 20, 128, 48, 48];
/// Number of dimensions of a tuple.
const DIMS: usize = 5 + NW;
/// The wide dimensions of IPv6 addresses (relaxed like IPv4's).
const D_IPV6_SRC: usize = 5 + 10;
const D_IPV6_DST: usize = 5 + 11;

/// Leading bits fixed on each dimension: the five classic fields, then [`WIDE_DIMS`].
type Tuple = [u8; DIMS];
/// The five classic hashed fields, then (index 5) a fingerprint of the wide ones a table hashes.
type Values = [u32; 6];

/// The five classic hashed fields of a packet (the wide fingerprint is per table).
#[inline(always)]
fn packet_values<K: Key>(k: &K) -> Values {
    [k.nw_src(), k.nw_dst(), u32::from(k.tp_src()), u32::from(k.tp_dst()), u32::from(k.nw_proto()), 0]
}

fn mac(m: [u8; 6]) -> u128 {
    m.iter().fold(0u128, |a, &b| a << 8 | u128::from(b))
}

/// Wide dimension `d` of a key (or of a mask), in the low [`WIDE_WIDTH`]`[d]` bits, viewed so that
/// OpenFlow's usual masks are prefixes: `vlan_tci` as CFI and VID first, then PCP (`vlan_vid`
/// with OFPVID_PRESENT, mask 0x1fff, is a 13-bit prefix; "a tag is present", 0x1000, is 1 bit);
/// `nw_frag` as `ANY` then `LATER`. A mask that is not a prefix in this view counts by its
/// leading ones, the rest is left to validation.
#[inline(always)]
fn wide_value<K: Key>(k: &K, d: usize) -> u128 {
    match d {
        0 => u128::from(k.in_port()),
        1 => u128::from(k.dl_type()),
        2 => {
            let t = k.vlan_tci();
            u128::from((t & 0x1fff) << 3 | t >> 13)
        }
        3 => u128::from(k.nw_tos()),
        4 => {
            let f = k.nw_frag();
            u128::from((f & 1) << 1 | (f >> 1) & 1)
        }
        5 => u128::from(k.nw_ttl()),
        6 => u128::from(k.tcp_flags() & 0x0fff),
        7 => mac(k.dl_src()),
        8 => mac(k.dl_dst()),
        9 => u128::from(k.metadata()),
        10 => k.ipv6_src(),
        11 => k.ipv6_dst(),
        12 => u128::from(k.ipv6_label()),
        13 => k.nd_target(),
        14 => mac(k.arp_sha()),
        _ => mac(k.arp_tha()),
    }
}

/// The mask of the first `len` bits of a `width`-bit wide dimension.
fn wide_prefix_mask(len: u32, width: u32) -> u128 {
    if len == 0 {
        0
    } else {
        (u128::MAX >> (128 - len)) << (width - len)
    }
}

/// Leading ones of a `width`-bit mask.
fn leading_ones(mask: u32, width: u32) -> u32 {
    (mask << (32 - width)).leading_ones().min(width)
}

/// Leading ones of a `width`-bit wide mask.
fn wide_leading_ones(mask: u128, width: u32) -> u32 {
    (mask << (128 - width)).leading_ones().min(width)
}

/// The hashed bits of a port field constrained by a range and a value/mask. As in TupleMerge, a
/// range counts only when it is one value (16 bits) and is otherwise left to validation (0 bits):
/// finer lengths for ranges (their common prefix) multiply tuples, hence tables, for little
/// selectivity. A prefix mask counts by its leading ones.
fn port_prefix(range: PortRange, v: u16, m: u16) -> (u32, u32) {
    let by_range = if range.lo == range.hi { 16 } else { 0 };
    let by_mask = leading_ones(u32::from(m), 16);
    if by_mask >= by_range {
        (u32::from(v), by_mask)
    } else {
        (u32::from(range.lo), by_range)
    }
}

/// A rule's tuple (every dimension) and its values on the five classic fields.
fn rule_tuple(m: &Match) -> (Tuple, Values) {
    let (v, k) = (m.value(), m.mask());
    let (sp, spl) = port_prefix(m.tp_src_range(), v.tp_src, k.tp_src);
    let (dp, dpl) = port_prefix(m.tp_dst_range(), v.tp_dst, k.tp_dst);
    let lens =
        [leading_ones(k.nw_src, 32), leading_ones(k.nw_dst, 32), spl, dpl, leading_ones(u32::from(k.nw_proto), 8)];
    let values = [v.nw_src, v.nw_dst, sp, dp, u32::from(v.nw_proto), 0];
    let tuple = std::array::from_fn(|d| {
        if d < 5 {
            lens[d] as u8
        } else {
            wide_leading_ones(wide_value(k, d - 5), WIDE_WIDTH[d - 5]) as u8
        }
    });
    (tuple, values)
}

/// TupleMerge's shortening of an address prefix of `l` bits out of `width`: 32 → 28,
/// 25..31 → −3, 17..24 → −2, 9..16 → −1 for IPv4; for IPv6 the same proportion (−1/8).
fn shorten(l: u8, width: u32) -> u8 {
    if width == 32 {
        match l {
            32 => 28,
            l if l > 24 => l - 3,
            l if l > 16 => l - 2,
            l if l > 8 => l - 1,
            l => l,
        }
    } else {
        l - l / 8
    }
}

/// TupleMerge's relaxation of a new table's tuple (see the module docs).
fn relax(mut t: Tuple) -> Tuple {
    for (s, d, width) in [(0, 1, 32u32), (D_IPV6_SRC, D_IPV6_DST, 128)] {
        let (sa, da) = (i32::from(t[s]), i32::from(t[d]));
        if da - sa > 4 {
            t[s] = 0;
        } else if sa - da > 4 {
            t[d] = 0;
        }
        t[s] = shorten(t[s], width);
        t[d] = shorten(t[d], width);
    }
    // Ports are left to splits: a new table hashes addresses and protocol only. Measured on the
    // 100K ClassBench sets, this gives fewer tables (ipc1: 24 instead of 33) and faster lookups
    // (ipc1: ~5.0 instead of ~3.4 Mpps) than keeping exact ports in new tables.
    t[2] = 0;
    t[3] = 0;
    // So are the wide fields that split a set into few groups (every IPv4 rule fixes dl_type;
    // fragments, TTL and TCP flags are rare in tables): a 5-tuple set's tables hash no wide
    // field, and its lookups do exactly what they did before the wide dimensions.
    for d in 0..NW {
        if RELAX_DROPS[d] {
            t[5 + d] = 0;
        }
    }
    t
}

/// The wide dimensions a new table does not hash (see [`relax`]): `dl_type`, `nw_frag`,
/// `nw_ttl`, `tcp_flags`.
const RELAX_DROPS: [bool; NW] =
    [false, true, false, false, true, true, true, false, false, false, false, false, false, false, false, false];

fn fits(rule: &Tuple, table: &Tuple) -> bool {
    (0..DIMS).all(|d| rule[d] >= table[d])
}

/// Bit 63 of a bucket's `hash`: the bucket has a tail (its other rules) in the table's `tails`.
const TAIL: u64 = 1 << 63;

/// The rules of one hash key, in winner order, the best inline: one cache line (most buckets
/// hold one rule, and a lookup that finds it touches no other memory), so the key itself is not
/// stored — the bucket is known by its key's 63-bit hash. Keys whose hashes are equal share a
/// bucket; that is exact, since every candidate is validated whole against the packet and
/// candidates stay in winner order (as keys sharing the wide fingerprint share a bucket).
#[derive(Clone)]
#[repr(C, align(64))]
struct Bucket {
    /// The key's hash, with [`TAIL`] set when more rules share the bucket.
    hash: u64,
    head: Candidate,
}

impl Bucket {
    #[inline(always)]
    fn id(&self) -> u64 {
        self.hash & !TAIL
    }

    #[inline(always)]
    fn has_tail(&self) -> bool {
        self.hash & TAIL != 0
    }
}

const _: () = assert!(std::mem::size_of::<Bucket>() == 64, "a bucket is one cache line");

/// A bucket's rules after its head, in winner order, under the bucket's hash.
#[derive(Clone)]
struct Tail {
    hash: u64,
    rules: Vec<Candidate>,
    /// The shortest and the longest length on each field over the bucket's rules when a split of
    /// the bucket last found no longer tuple ([`TupleMerge::split`]): the split depends on
    /// nothing else, so while an insert leaves both unchanged it would find none again and is
    /// not tried (a bucket of port-expanded flows past the collision limit is otherwise read
    /// whole on every insert into it). Any other change to the bucket clears it.
    unsplit: Option<Box<(Tuple, Tuple)>>,
}

#[derive(Clone)]
struct Table {
    /// Stable id (rules' records refer to it; the table's index changes as the order does).
    id: u32,
    /// At least the highest priority held: exact while `max_count` > 0 (that many rules have
    /// it), an upper bound after the last of them went (lookups only skip a table whose bound
    /// cannot win, so a bound is as safe as the maximum). `TupleMerge::settle` makes it exact
    /// again once it is worth a scan of the table ([`Table::settle_max`]), as OVS's subtables
    /// keep `max_priority` and `max_count` instead of a count per priority (16 bytes a rule).
    max_priority: u32,
    max_count: u32,
    /// Rules removed since `max_priority` became a bound.
    stale_removals: u32,
    tuple: Tuple,
    masks: Values,
    /// The classic fields with a non-zero length, and 5 (the wide fingerprint) when the table
    /// hashes a wide field: the only values hashed.
    active: Vec<u8>,
    /// The wide dimensions with a non-zero length and their masks (empty for a 5-tuple table,
    /// whose lookups then never read a wide member).
    wide: Vec<(u8, u128)>,
    table: HashTable<Bucket>,
    /// The tails of the buckets with more than one rule.
    tails: HashTable<Tail>,
    rules: usize,
}

/// Where hashbrown files a bucket of hash `hash` (a key's 63-bit hash): hashbrown takes its
/// 7-bit tag from the top bits and the position from the bottom ones, so the hash is rotated to
/// keep the always-zero bit 63 (the [`TAIL`] flag's place) out of both — in place, one tag bit
/// would always be 0 and a probe would meet twice the false tag matches.
#[inline(always)]
fn slot(hash: u64) -> u64 {
    hash.rotate_right(23)
}

/// Hash of a table key: the masked values of the hashed fields (the others are zero).
#[inline(always)]
fn hash_values(v: &Values, active: &[u8]) -> u64 {
    let mut h: u64 = 0x243f_6a88_85a3_08d3;
    for &d in active {
        h = (h.rotate_left(23) ^ u64::from(v[d as usize])).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    (h ^ (h >> 29)) & !TAIL
}

impl Table {
    fn new(id: u32, tuple: Tuple) -> Table {
        let masks = std::array::from_fn(|d| if d < 5 { prefix_mask(u32::from(tuple[d]), WIDTH[d]) } else { 0 });
        let wide: Vec<(u8, u128)> = (0..NW)
            .filter(|&d| tuple[5 + d] > 0)
            .map(|d| (d as u8, wide_prefix_mask(u32::from(tuple[5 + d]), WIDE_WIDTH[d])))
            .collect();
        let mut active: Vec<u8> = (0..5u8).filter(|&d| tuple[d as usize] > 0).collect();
        if !wide.is_empty() {
            active.push(5);
        }
        Table {
            id,
            max_priority: 0,
            max_count: 0,
            stale_removals: 0,
            tuple,
            masks,
            active,
            wide,
            table: HashTable::new(),
            tails: HashTable::new(),
            rules: 0,
        }
    }

    /// The table's key of a packet (or of a rule's value) `k` whose classic values are `values`:
    /// those masked, and a fingerprint of the wide fields the table hashes, masked. Two keys
    /// that differ only in the fingerprint's inputs may share it: they share a bucket, whose
    /// candidates are validated whole anyway.
    #[inline(always)]
    fn key<K: Key>(&self, values: &Values, k: &K) -> Values {
        let mut out: Values = std::array::from_fn(|d| values[d] & self.masks[d]);
        if !self.wide.is_empty() {
            out[5] = self.wide_fingerprint(k);
        }
        out
    }

    #[inline]
    fn wide_fingerprint<K: Key>(&self, k: &K) -> u32 {
        let mut h: u64 = 0x1319_8a2e_0370_7344;
        for &(d, m) in &self.wide {
            let v = wide_value(k, usize::from(d)) & m;
            h = (h.rotate_left(29) ^ (v as u64)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            h = (h.rotate_left(29) ^ ((v >> 64) as u64)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
        (h ^ h >> 32) as u32
    }

    #[inline(always)]
    fn hash(&self, key: &Values) -> u64 {
        hash_values(key, &self.active)
    }

    /// The rules of a bucket after its head.
    #[inline(always)]
    fn tail(&self, b: &Bucket) -> &[Candidate] {
        if !b.has_tail() {
            return &[];
        }
        let hash = b.id();
        self.tails.find(slot(hash), |t| t.hash == hash).map_or(&[], |t| &t.rules)
    }

    /// A bucket's rules in winner order.
    fn candidates<'a>(&'a self, b: &'a Bucket) -> impl Iterator<Item = &'a Candidate> {
        std::iter::once(&b.head).chain(self.tail(b))
    }

    /// Every rule id the table holds.
    fn ids(&self) -> impl Iterator<Item = RuleId> + '_ {
        self.table.iter().flat_map(|b| self.candidates(b).map(|c| c.id))
    }

    /// The hash of the bucket a rule (classic values `values`, whole value `rv`) goes to here.
    fn hash_of(&self, values: &Values, rv: &FlowKey) -> u64 {
        self.hash(&self.key(values, rv))
    }

    /// Adds a candidate to the bucket of hash `hash` ([`Table::hash_of`] its rule); returns the
    /// size of the bucket afterwards, and whether a split of it would still find no longer
    /// tuple (`tuple`: the rule's; `None` forgets what the bucket's last split found).
    fn add(&mut self, hash: u64, c: Candidate, tuple: Option<&Tuple>) -> (usize, bool) {
        if self.rules == 0 || c.priority > self.max_priority {
            (self.max_priority, self.max_count, self.stale_removals) = (c.priority, 1, 0);
        } else if c.priority == self.max_priority {
            // A bound no rule has (`max_count` 0) is exact again with this one.
            self.max_count += 1;
            self.stale_removals = 0;
        }
        self.rules += 1;
        let Some(b) = self.table.find_mut(slot(hash), |b| b.id() == hash) else {
            // The hash is the bucket's own (kept: the table grows without the key).
            self.table.insert_unique(slot(hash), Bucket { hash, head: c }, |b| slot(b.id()));
            return (1, false);
        };
        let displaced = if (Reverse(c.priority), c.id) < (Reverse(b.head.priority), b.head.id) {
            std::mem::replace(&mut b.head, c)
        } else {
            c
        };
        b.hash |= TAIL;
        let tail = match self.tails.find_mut(slot(hash), |t| t.hash == hash) {
            Some(t) => t,
            None => self
                .tails
                .insert_unique(slot(hash), Tail { hash, rules: Vec::new(), unsplit: None }, |t| slot(t.hash))
                .into_mut(),
        };
        let unsplit = match (tuple, &tail.unsplit) {
            (Some(t), Some(u)) => (0..DIMS).all(|d| u.0[d] <= t[d] && t[d] <= u.1[d]),
            _ => false,
        };
        if !unsplit {
            tail.unsplit = None;
        }
        let rank = (Reverse(displaced.priority), displaced.id);
        let at = tail.rules.partition_point(|x| (Reverse(x.priority), x.id) < rank);
        tail.rules.insert(at, displaced);
        (1 + tail.rules.len(), unsplit)
    }

    /// Notes that a split of the bucket of hash `hash`, whose rules' lengths span `lo..=hi`,
    /// found no longer tuple ([`Tail::unsplit`]).
    fn note_unsplit(&mut self, hash: u64, lo: Tuple, hi: Tuple) {
        if let Some(t) = self.tails.find_mut(slot(hash), |t| t.hash == hash) {
            t.unsplit = Some(Box::new((lo, hi)));
        }
    }

    /// Rule `id`'s candidate in the bucket of hash `hash`.
    fn candidate(&self, hash: u64, id: RuleId) -> Option<&Candidate> {
        let b = self.table.find(slot(hash), |b| b.id() == hash)?;
        self.candidates(b).find(|c| c.id == id)
    }

    /// Removes rule `id` from the bucket of hash `hash`; returns its candidate.
    fn take(&mut self, hash: u64, id: RuleId) -> Option<Candidate> {
        let Ok(mut entry) = self.table.find_entry(slot(hash), |b| b.id() == hash) else { return None };
        let b = entry.get_mut();
        let c = if !b.has_tail() {
            if b.head.id != id {
                return None;
            }
            entry.remove().0.head
        } else {
            let Ok(mut t) = self.tails.find_entry(slot(hash), |t| t.hash == hash) else { return None };
            t.get_mut().unsplit = None;
            let tail = &mut t.get_mut().rules;
            let c = if b.head.id == id {
                std::mem::replace(&mut b.head, tail.remove(0))
            } else {
                let at = tail.iter().position(|c| c.id == id)?;
                tail.remove(at)
            };
            if tail.is_empty() {
                t.remove();
                b.hash &= !TAIL;
            }
            c
        };
        if self.max_count == 0 {
            self.stale_removals += 1;
        } else if c.priority == self.max_priority {
            self.max_count -= 1;
            self.stale_removals = u32::from(self.max_count == 0);
        }
        self.rules -= 1;
        Some(c)
    }

    /// Makes `max_priority` exact again when it is a bound and a scan of the table is cheap or
    /// paid for: the table is small, or an eighth of its rules were removed since (so the scans
    /// cost O(1) per removal however the rules go, highest first included).
    fn settle_max(&mut self) {
        if self.max_count > 0 || self.rules == 0 {
            return;
        }
        if self.rules > 8 && (self.stale_removals as usize) * 8 < self.rules {
            return;
        }
        let (mut max, mut count) = (0, 0);
        for b in self.table.iter() {
            for c in self.candidates(b) {
                if count == 0 || c.priority > max {
                    (max, count) = (c.priority, 1);
                } else if c.priority == max {
                    count += 1;
                }
            }
        }
        (self.max_priority, self.max_count, self.stale_removals) = (max, count, 0);
    }

    /// Looks the key whose table key hashes to `hash` up in this table, improving `best`.
    /// Bucket rules are in winner order: the first that validates is the bucket's best, and the
    /// scan stops at the first that cannot beat `best`.
    #[inline(always)]
    fn probe<K: Key>(&self, hash: u64, key: &K, extras: &Extras, best: &mut Option<(u32, RuleId)>) {
        let Some(b) = self.table.find(slot(hash), |b| b.id() == hash) else { return };
        let mut settles = |c: &Candidate| {
            if let Some((bp, bid)) = *best {
                if !rqvs_flow::rule::beats(c.priority, c.id, bp, bid) {
                    return true;
                }
            }
            if c.m.matches(key, extras) {
                *best = Some((c.priority, c.id));
                return true;
            }
            false
        };
        if settles(&b.head) || !b.has_tail() {
            return;
        }
        for c in self.tail(b) {
            if settles(c) {
                return;
            }
        }
    }

    /// Ids in the bucket of hash `hash`.
    fn bucket_ids(&self, hash: u64) -> Vec<RuleId> {
        self.table
            .find(slot(hash), |b| b.id() == hash)
            .map_or_else(Vec::new, |b| self.candidates(b).map(|c| c.id).collect())
    }
}

/// Where a rule is — its table, its bucket's hash there, its tuple — and, only when its
/// candidate cannot give it back ([`Candidate::holds_whole`]: a rule with actions, a cookie, a
/// table or a field outside the compact match), its stored form. A plain 5-tuple `drop` rule
/// (every ClassBench rule) is made back from its candidate when it moves or goes: 32 bytes a
/// rule, where a stored rule took 64 and its match's words besides.
#[derive(Clone)]
struct Record {
    /// The hash of the rule's bucket in its table ([`Table::hash_of`]).
    hash: u64,
    /// The rule's stored form (its match as the words it uses: [`StoredRule`]); `None` when
    /// its candidate holds all of it.
    stored: Option<Arc<StoredRule>>,
    /// The wide part's index in `TupleMerge::wide_tuples` (0: all zero, every 5-tuple rule).
    wide_tuple: u32,
    /// The rule's table; [`FREE_RECORD`] for a free slot of the slab.
    table: u32,
    /// The classic part of the rule's tuple.
    tuple: [u8; 5],
}

const _: () = assert!(std::mem::size_of::<Record>() == 32, "a record is 32 bytes");

/// `Record::table` of a free slot in `TupleMerge::records`.
const FREE_RECORD: u32 = u32::MAX;

/// TupleMerge with online insert and remove.
#[derive(Clone)]
pub struct TupleMerge {
    /// Tables in lookup order: descending max priority.
    tables: Vec<Table>,
    /// Table id → index in `tables` (`u32::MAX` for a free id). Rules refer to tables by id.
    position: Vec<u32>,
    free_ids: Vec<u32>,
    /// Rule id → its slot in `records`.
    slots: IdMap<IdIndex>,
    /// The rules, in stable slots (a slab: removed rules' slots are in `free_records`, marked
    /// [`FREE_RECORD`]), so that the id map holds 8-byte entries rather than whole records.
    records: Vec<Record>,
    free_records: Vec<u32>,
    /// The distinct wide parts of the rules' tuples (few: one per field combination and prefix
    /// lengths), index 0 all zero; and their indexes.
    wide_tuples: Vec<[u8; NW]>,
    wide_tuple_index: HashMap<[u8; NW], u32>,
    extras: Extras,
    collision_limit: usize,
    /// Rule count from which `lookup_batch` goes table by table.
    table_major_from: usize,
    /// Skips the splits [`Tail::unsplit`] says would find nothing (always, but in the test that
    /// checks the skip changes nothing).
    skip_unsplit: bool,
}

impl Default for TupleMerge {
    fn default() -> Self {
        TupleMerge::with_collision_limit(DEFAULT_COLLISION_LIMIT)
    }
}

impl TupleMerge {
    pub fn with_collision_limit(collision_limit: usize) -> TupleMerge {
        TupleMerge {
            tables: Vec::new(),
            position: Vec::new(),
            free_ids: Vec::new(),
            slots: IdMap::default(),
            records: Vec::new(),
            free_records: Vec::new(),
            wide_tuples: vec![[0; NW]],
            wide_tuple_index: HashMap::from([([0; NW], 0)]),
            extras: Extras::default(),
            collision_limit: collision_limit.max(1),
            table_major_from: TABLE_MAJOR_BATCH_RULES,
            skip_unsplit: true,
        }
    }

    /// Sets the rule count from which `lookup_batch` works table by table rather than key by key
    /// (default 100,000). Both give the same answers; this only moves the speed trade-off.
    pub fn set_table_major_batch_from(&mut self, rules: usize) {
        self.table_major_from = rules;
    }

    /// Builds by inserting rules in descending winner order (so high-priority rules shape the
    /// first tables); duplicate ids are an error.
    pub fn build(rules: &[Rule]) -> Result<TupleMerge, ClassifierError> {
        let mut sorted: Vec<&Rule> = rules.iter().collect();
        sorted.sort_by_key(|r| r.rank());
        let mut t = TupleMerge::default();
        // The id map sized for the set (80% full), not grown to a power of two.
        t.slots = IdMap::with_capacity(rules.len());
        for r in sorted {
            t.insert(r.clone())?;
        }
        t.records.shrink_to_fit();
        t.extras.shrink_to_fit();
        Ok(t)
    }

    /// (tuple, rules, max priority) of each table, in lookup order.
    /// (tuple, rules, max priority) of each table, in lookup order; the tuple is the five classic
    /// lengths then those of [`WIDE_DIMS`].
    pub fn table_summary(&self) -> Vec<([u8; DIMS], usize, u32)> {
        self.tables.iter().map(|t| (t.tuple, t.rules, t.max_priority)).collect()
    }

    /// Number of tables.
    pub fn tables(&self) -> usize {
        self.tables.len()
    }

    fn record(&self, id: RuleId) -> &Record {
        let r = &self.records[self.slots.get(id).expect("a rule of the map").index as usize];
        debug_assert!(r.table != FREE_RECORD, "a live rule's slot holds it");
        r
    }

    /// Rule `id`'s classic values and the whole value of its match (what its buckets are
    /// hashed from): from its stored form, or made back from its candidate.
    fn values_of(&self, id: RuleId) -> (Values, FlowKey) {
        let rec = self.record(id);
        let m = match &rec.stored {
            Some(s) => s.matches.to_match(),
            None => {
                let c = self.table(rec.table).candidate(rec.hash, id).expect("a rule's record names its bucket");
                c.m.to_match().expect("a rule kept without its stored form has its whole match in its candidate")
            }
        };
        (rule_tuple(&m).1, *m.value())
    }

    /// The whole tuple of rule `id`.
    fn tuple_of(&self, id: RuleId) -> Tuple {
        let r = self.record(id);
        let w = &self.wide_tuples[r.wide_tuple as usize];
        std::array::from_fn(|d| if d < 5 { r.tuple[d] } else { w[d - 5] })
    }

    /// The index of a wide tuple part in `wide_tuples` (added when new).
    fn intern_wide(&mut self, t: &Tuple) -> u32 {
        let w: [u8; NW] = std::array::from_fn(|d| t[5 + d]);
        if let Some(&i) = self.wide_tuple_index.get(&w) {
            return i;
        }
        self.wide_tuples.push(w);
        let i = (self.wide_tuples.len() - 1) as u32;
        self.wide_tuple_index.insert(w, i);
        i
    }

    fn record_mut(&mut self, id: RuleId) -> &mut Record {
        &mut self.records[self.slots.get(id).expect("a rule of the map").index as usize]
    }

    fn table(&self, id: u32) -> &Table {
        &self.tables[self.position[id as usize] as usize]
    }

    fn table_mut(&mut self, id: u32) -> &mut Table {
        let p = self.position[id as usize] as usize;
        &mut self.tables[p]
    }

    fn renumber(&mut self, from: usize, to: usize) {
        for p in from..to.min(self.tables.len()) {
            self.position[self.tables[p].id as usize] = p as u32;
        }
    }

    /// The table with this tuple, made (empty, last) when there is none.
    fn find_or_make(&mut self, tuple: Tuple) -> u32 {
        if let Some(t) = self.tables.iter().find(|t| t.tuple == tuple) {
            return t.id;
        }
        let id = self.free_ids.pop().unwrap_or_else(|| {
            self.position.push(u32::MAX);
            (self.position.len() - 1) as u32
        });
        self.tables.push(Table::new(id, tuple));
        self.position[id as usize] = (self.tables.len() - 1) as u32;
        id
    }

    /// Puts table `id` back in lookup order after its priorities changed, or drops it when empty.
    fn settle(&mut self, id: u32) {
        let p = self.position[id as usize] as usize;
        let mut t = self.tables.remove(p);
        if t.rules == 0 {
            self.position[id as usize] = u32::MAX;
            self.free_ids.push(id);
            self.renumber(p, self.tables.len());
            return;
        }
        t.settle_max();
        let q = self.tables.partition_point(|x| x.max_priority >= t.max_priority);
        self.tables.insert(q, t);
        self.renumber(p.min(q), p.max(q) + 1);
    }

    /// Moves the rule `id` from its table to table `to`.
    fn move_rule(&mut self, id: RuleId, to: u32) {
        let (values, rv) = self.values_of(id);
        let (from, hash) = (self.record(id).table, self.record(id).hash);
        let c = self.table_mut(from).take(hash, id).expect("rule is in its table");
        let hash = self.table(to).hash_of(&values, &rv);
        self.table_mut(to).add(hash, c, None);
        let rec = self.record_mut(id);
        (rec.table, rec.hash) = (to, hash);
    }

    /// Splits table `i` after its bucket of hash `hash` exceeded the collision limit.
    fn split(&mut self, i: u32, hash: u64) {
        let ids = self.table(i).bucket_ids(hash);
        let tuples: Vec<Tuple> = ids.iter().map(|&id| self.tuple_of(id)).collect();
        let lo: Tuple = std::array::from_fn(|d| tuples.iter().map(|t| t[d]).min().unwrap_or(0));
        let mut compat = lo;
        let sup: Tuple = std::array::from_fn(|d| tuples.iter().map(|t| t[d]).max().unwrap_or(0));
        let Some((d, delta)) = (0..DIMS).map(|d| (d, sup[d] - compat[d])).max_by_key(|&(d, delta)| (delta, Reverse(d)))
        else {
            return;
        };
        let table = self.table(i).tuple;
        if delta == 0 {
            // The colliding rules share one tuple. Where the table hashes fewer bits of a wide
            // field than they fix (relaxed: an IPv6 /64 hashed as /56, a MAC the table does not
            // hash), their own lengths may separate them: the split goes to those (not to the
            // fields relaxing drops for their few values, as `dl_type`). On the classic fields
            // no longer tuple is tried (rqvs's measured behaviour on the 5-tuple sets, as it was).
            compat = std::array::from_fn(|d| if d < 5 || RELAX_DROPS[d - 5] { table[d] } else { compat[d] });
        } else {
            // The classic fields as the authors' split (their common lengths); the wide ones as
            // the table's, but for the field of the widest difference. A 5-tuple set (every wide
            // difference zero) splits exactly as before the wide dimensions.
            for w in 5..DIMS {
                if w != d {
                    compat[w] = table[w];
                }
            }
            compat[d] += delta / 2;
        }
        if compat == table {
            self.table_mut(i).note_unsplit(hash, lo, sup);
            return;
        }
        let target = self.find_or_make(compat);
        let movers: Vec<RuleId> = self.table(i).ids().collect();
        for id in movers {
            if fits(&self.tuple_of(id), &compat) {
                self.move_rule(id, target);
            }
        }
        self.settle(target);
        self.settle(i);
    }
}

impl TupleMerge {
    /// The best of `best` and the rules matching `key`.
    #[inline]
    fn search<K: Key>(&self, key: &K, mut best: Option<(u32, RuleId)>) -> Option<(u32, RuleId)> {
        if self.tables.first().is_none_or(|t| best.is_some_and(|(bp, _)| t.max_priority < bp)) {
            return best; // no table can win: not even the key's values are needed
        }
        let values = packet_values(key);
        for t in &self.tables {
            if best.is_some_and(|(bp, _)| t.max_priority < bp) {
                break; // tables are in descending max priority: nothing left can win
            }
            t.probe(t.hash(&t.key(&values, key)), key, &self.extras, &mut best);
        }
        best
    }
}

impl TupleMerge {
    /// [`search`](Self::search) for a batch of at most [`BATCH`] keys, table by table: the
    /// hashes of every key that still needs a table are computed before any of them probes it, so
    /// the probes' cache misses overlap. `best[j]` is improved in place.
    fn search_batch<K: Key>(&self, keys: &[K], best: &mut [Option<(u32, RuleId)>]) {
        let n = keys.len();
        debug_assert!(n <= BATCH && best.len() >= n);
        let values: [Values; BATCH] = std::array::from_fn(|j| keys.get(j).map_or([0; 6], packet_values));
        let mut hashes = [0u64; BATCH];
        for t in &self.tables {
            let mut need: u32 = 0;
            for j in 0..n {
                if best[j].is_none_or(|(bp, _)| t.max_priority >= bp) {
                    hashes[j] = t.hash(&t.key(&values[j], &keys[j]));
                    need |= 1 << j;
                }
            }
            if need == 0 {
                break; // every key has a match no later table can beat
            }
            while need != 0 {
                let j = need.trailing_zeros() as usize;
                need &= need - 1;
                t.probe(hashes[j], &keys[j], &self.extras, &mut best[j]);
            }
        }
    }
}

impl Remainder for TupleMerge {
    fn held_rule(&self, id: RuleId) -> Option<HeldRule> {
        let rec = &self.records[self.slots.get(id)?.index as usize];
        Some(HeldRule(match &rec.stored {
            Some(s) => Held::Stored(Arc::clone(s)),
            None => Held::Candidate(*self.table(rec.table).candidate(rec.hash, id).expect("rule is in its table")),
        }))
    }

    fn held_rules(&self, each: &mut dyn FnMut(HeldRule)) {
        // The stored forms from the slab, then every other rule from the tables' buckets, in
        // memory order: no id map probed, no bucket found by hash.
        let mut stored = std::collections::HashSet::new();
        for s in self.records.iter().filter_map(|r| r.stored.as_ref()) {
            stored.insert(s.id);
            each(HeldRule(Held::Stored(Arc::clone(s))));
        }
        for t in &self.tables {
            for b in t.table.iter() {
                for c in t.candidates(b).filter(|c| !stored.contains(&c.id)) {
                    each(HeldRule(Held::Candidate(*c)));
                }
            }
        }
    }

    fn gives_rules_back(&self) -> bool {
        true
    }

    fn lookup_beating(&self, key: &FlowKey, floor: Option<(u32, RuleId)>) -> Option<(u32, RuleId)> {
        self.search(key, floor).filter(|b| Some(*b) != floor)
    }

    fn lookup_beating_narrow(&self, key: &NarrowKey, floor: Option<(u32, RuleId)>) -> Option<(u32, RuleId)> {
        self.search(key, floor).filter(|b| Some(*b) != floor)
    }

    fn improve_batch(&self, keys: &[FlowKey], best: &mut [Option<(u32, RuleId)>]) {
        self.improve(keys, best);
    }

    fn improve_batch_narrow(&self, keys: &[NarrowKey], best: &mut [Option<(u32, RuleId)>]) {
        self.improve(keys, best);
    }
}

impl TupleMerge {
    /// [`Remainder::improve_batch`] over keys of either kind. A key whose best already beats
    /// every table (the first table's maximum is below it) is not searched at all: as a
    /// remainder under iSets, that is most keys when the remainder holds low-priority rules
    /// (acl1: its 130 remainder rules are among the lowest), and the search's set-up (the key's
    /// values, the call) was most of its time.
    #[inline]
    fn improve<K: Key>(&self, keys: &[K], best: &mut [Option<(u32, RuleId)>]) {
        let Some(top) = self.tables.first().map(|t| t.max_priority) else { return };
        if self.slots.len() >= self.table_major_from {
            // As TupleMerge's own batches at this size: table by table, each table probed only
            // for the keys whose best it can still beat.
            for (kc, bc) in keys.chunks(BATCH).zip(best.chunks_mut(BATCH)) {
                if bc.iter().any(|b| b.is_none_or(|(bp, _)| top >= bp)) {
                    self.search_batch(kc, bc);
                }
            }
            return;
        }
        for (k, b) in keys.iter().zip(best.iter_mut()) {
            if b.is_some_and(|(bp, _)| top < bp) {
                continue;
            }
            if let Some(better) = self.search(k, *b).filter(|x| Some(*x) != *b) {
                *b = Some(better);
            }
        }
    }
}

impl TupleMerge {
    /// `lookup_batch` over keys of either kind (see [`Classifier::lookup_batch`] below).
    fn lookup_keys<K: Key>(&self, keys: &[K], out: &mut [Option<RuleId>]) {
        assert!(out.len() >= keys.len(), "lookup_batch: output shorter than input");
        if self.slots.len() < self.table_major_from {
            for (k, o) in keys.iter().zip(out.iter_mut()) {
                *o = self.search(k, None).map(|(_, id)| id);
            }
            return;
        }
        for (chunk, out) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            let mut best: [Option<(u32, RuleId)>; BATCH] = [None; BATCH];
            self.search_batch(chunk, &mut best);
            for (o, b) in out.iter_mut().zip(&best) {
                *o = b.map(|(_, id)| id);
            }
        }
    }
}

impl Classifier for TupleMerge {
    fn name(&self) -> &'static str {
        "tm"
    }

    fn lookup(&self, key: &FlowKey) -> Option<RuleId> {
        self.search(key, None).map(|(_, id)| id)
    }

    fn lookup_narrow(&self, key: &NarrowKey) -> Option<RuleId> {
        self.search(key, None).map(|(_, id)| id)
    }

    /// On large sets, table by table for the whole batch: the hashes of every key that still needs
    /// a table are computed before any of them probes it, so the probes' cache misses overlap. On
    /// sets whose tables stay in cache, key by key, which measured faster there (fewer
    /// unpredictable branches: fw1_10k ~12 vs ~9 Mpps).
    fn lookup_batch(&self, keys: &[FlowKey], out: &mut [Option<RuleId>]) {
        self.lookup_keys(keys, out);
    }

    fn lookup_batch_narrow(&self, keys: &[NarrowKey], out: &mut [Option<RuleId>]) {
        self.lookup_keys(keys, out);
    }

    fn insert(&mut self, rule: Rule) -> Result<(), ClassifierError> {
        if self.slots.contains(rule.id) {
            return Err(ClassifierError::DuplicateId(rule.id));
        }
        let (tuple, values) = rule_tuple(&rule.matches);
        let rv = *rule.matches.value();
        let target = self.tables.iter().find(|t| fits(&tuple, &t.tuple)).map(|t| t.id);
        let i = match target {
            Some(i) => i,
            None => self.find_or_make(relax(tuple)),
        };
        let c =
            Candidate { priority: rule.priority, id: rule.id, m: CompactMatch::new(&rule.matches, &mut self.extras) };
        let id = rule.id;
        let wide_tuple = self.intern_wide(&tuple);
        let hash = self.table(i).hash_of(&values, &rv);
        let rec = Record {
            hash,
            stored: (!c.holds_whole(&rule)).then(|| Arc::new(StoredRule::new(rule))),
            wide_tuple,
            table: i,
            tuple: std::array::from_fn(|d| tuple[d]),
        };
        let slot = match self.free_records.pop() {
            Some(slot) => {
                self.records[slot as usize] = rec;
                slot
            }
            None => {
                self.records.push(rec);
                (self.records.len() - 1) as u32
            }
        };
        self.slots.insert(IdIndex { id, index: slot });
        let (bucket, unsplit) = self.table_mut(i).add(hash, c, Some(&tuple));
        self.settle(i);
        if bucket > self.collision_limit && !(unsplit && self.skip_unsplit) {
            self.split(i, hash);
        }
        Ok(())
    }

    fn remove(&mut self, id: RuleId) -> Option<Rule> {
        let slot = self.slots.remove(id)?.index;
        let free = Record { hash: 0, stored: None, wide_tuple: 0, table: FREE_RECORD, tuple: [0; 5] };
        let rec = std::mem::replace(&mut self.records[slot as usize], free);
        self.free_records.push(slot);
        let c = self.table_mut(rec.table).take(rec.hash, id).expect("rule is in its table");
        let rule = match rec.stored {
            Some(s) => s.to_rule(),
            None => c.whole_rule().expect("a rule kept without its stored form is whole in its candidate"),
        };
        c.m.release(&mut self.extras);
        self.settle(rec.table);
        Some(rule)
    }

    fn len(&self) -> usize {
        self.slots.len()
    }

    fn stats(&self) -> Vec<(&'static str, f64)> {
        vec![("tables", self.tables() as f64)]
    }

    fn memory_breakdown(&self) -> Vec<(String, usize)> {
        use std::mem::size_of;
        // The rules as kept for updates: the id map, the slab and each rule's stored words and
        // actions.
        let rules = self.slots.memory_bytes()
            + self.records.capacity() * size_of::<Record>()
            + self.free_records.capacity() * 4
            + self.wide_tuples.capacity() * NW
            + self.wide_tuple_index.capacity() * (NW + 4 + 1)
            + self
                .records
                .iter()
                .filter_map(|r| r.stored.as_ref())
                .map(|s| 2 * size_of::<usize>() + size_of::<StoredRule>() + s.heap_bytes())
                .sum::<usize>();
        // The hash tables: buckets (the key's hash, the best candidate inline) and their tails.
        let mut tables = 0;
        // What orders and finds the tables: the table list, id positions, hashed fields, and
        // each table's priority counts.
        let mut index = size_of::<Self>()
            + self.tables.capacity() * size_of::<Table>()
            + self.position.capacity() * 4
            + self.free_ids.capacity() * 4;
        for t in &self.tables {
            index += t.active.capacity() + t.wide.capacity() * size_of::<(u8, u128)>();
            tables += t.table.capacity() * (size_of::<Bucket>() + 1) + t.tails.capacity() * (size_of::<Tail>() + 1);
            tables += t.tails.iter().map(|t| t.rules.capacity() * size_of::<Candidate>()).sum::<usize>();
            tables += t.tails.iter().filter(|t| t.unsplit.is_some()).count() * size_of::<(Tuple, Tuple)>();
        }
        vec![
            ("rules".to_string(), rules),
            ("tables".to_string(), tables),
            ("index".to_string(), index),
            ("extras".to_string(), self.extras.memory_bytes()),
        ]
    }

    fn memory_bytes(&self) -> usize {
        self.memory_breakdown().iter().map(|(_, b)| b).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn remainder_lookups(case in testing::arb_case()) {
            testing::check_remainder(&case, &TupleMerge::build(&case.rules).unwrap())?;
        }

        #[test]
        fn differential_with_updates(case in testing::arb_case()) {
            testing::check_differential(&case, |rules| Box::new(TupleMerge::build(rules).unwrap()))?;
        }

        /// Every rule comes back bit for bit from `remove`, whether its candidate holds it (a
        /// plain 5-tuple `drop` rule: no stored form) or it keeps a stored form — through splits
        /// (rules moved between tables are made back from their candidates) and re-insertion.
        /// Fails when a rule with an action, cookie or table of its own is taken as whole, or
        /// when a plain one keeps a stored form.
        #[test]
        fn removed_rules_come_back_whole(case in testing::arb_case()) {
            let rules = testing::with_varied_rest(&case.rules);
            let mut t = TupleMerge::build(&rules).unwrap();
            let whole = t.records.iter().filter(|r| r.table != FREE_RECORD && r.stored.is_none()).count();
            prop_assert_eq!(whole, rules.iter().filter(|r| testing::plain(r)).count());
            for round in 0..2 {
                for r in &rules {
                    prop_assert_eq!(t.remove(r.id), Some(r.clone()), "round {}", round);
                }
                prop_assert_eq!(t.len(), 0);
                for r in &rules {
                    t.insert(r.clone()).unwrap();
                }
                testing::check_all(&t, &rules, &case.keys, "re-inserted")?;
            }
        }

        /// Rules removed highest priority first (the order that keeps a table's maximum a
        /// bound longest) and put back, looking up after every step: every table's
        /// `max_priority` is at least its highest rule's, equal to it with `max_count` right
        /// whenever `max_count` > 0, and every answer is the brute force's. Fails when a removal
        /// lowers the bound below a rule still held, or when a bound is taken as exact.
        #[test]
        fn table_maxima_are_bounds_through_removals(case in testing::arb_case()) {
            let mut t = TupleMerge::build(&case.rules).unwrap();
            let mut order: Vec<&Rule> = case.rules.iter().collect();
            order.sort_by_key(|r| (std::cmp::Reverse(r.priority), r.id));
            let mut live: Vec<Rule> = case.rules.clone();
            for (n, r) in order.iter().enumerate() {
                prop_assert!(t.remove(r.id).is_some());
                live.retain(|x| x.id != r.id);
                check_table_maxima(&t)?;
                for k in &case.keys {
                    prop_assert_eq!(t.lookup(k), testing::brute(&live, k));
                }
                if n % 3 == 0 {
                    t.insert((*r).clone()).unwrap();
                    live.push((*r).clone());
                    check_table_maxima(&t)?;
                    prop_assert!(t.remove(r.id).is_some());
                    live.retain(|x| x.id != r.id);
                }
            }
            prop_assert_eq!(t.tables(), 0);
        }

        #[test]
        fn differential_table_major_batches(case in testing::arb_case()) {
            testing::check_differential(&case, |rules| {
                let mut t = TupleMerge::build(rules).unwrap();
                t.set_table_major_batch_from(0);
                Box::new(t)
            })?;
        }

        /// Prefixes of every length on IPv6 addresses, `dl_dst` and metadata: tuples over the wide
        /// dimensions, relaxed and split.
        #[test]
        fn differential_wide_prefixes(case in testing::arb_wide_prefix_case()) {
            testing::check_differential(&case, |rules| Box::new(TupleMerge::build(rules).unwrap()))?;
        }

        #[test]
        fn differential_wide_prefixes_constant_splitting(case in testing::arb_wide_prefix_case()) {
            testing::check_differential(&case, |rules| {
                let mut t = TupleMerge::with_collision_limit(1);
                t.set_table_major_batch_from(0);
                for r in rules {
                    t.insert(r.clone()).unwrap();
                }
                Box::new(t)
            })?;
        }

        /// Skipping the splits a bucket's last split says would find nothing changes nothing:
        /// through inserts, removals and re-inserts (collision limits 1 to 3, so buckets pass
        /// the limit and splits fail often), every rule sits in the same table, and the tables
        /// are the same, as in a TupleMerge that tries every split. Fails when an insert that
        /// widens a bucket's lengths leaves the note in place (tried; for a removal see
        /// `a_removal_forgets_that_a_split_found_nothing`).
        #[test]
        fn skipped_splits_are_the_ones_that_find_nothing(
            case in prop_oneof![testing::arb_case(), testing::arb_wide_prefix_case()],
            limit in 1usize..4,
        ) {
            let mut skip = TupleMerge::with_collision_limit(limit);
            let mut every = TupleMerge::with_collision_limit(limit);
            every.skip_unsplit = false;
            let same = |a: &TupleMerge, b: &TupleMerge, rules: &[Rule], step: &str| -> Result<(), TestCaseError> {
                prop_assert_eq!(a.table_summary(), b.table_summary(), "{}", step);
                for r in rules {
                    let place = |t: &TupleMerge| t.slots.get(r.id).map(|_| t.table(t.record(r.id).table).tuple);
                    prop_assert_eq!(place(a), place(b), "{}: rule {}", step, r.id.0);
                }
                Ok(())
            };
            for r in &case.rules {
                skip.insert(r.clone()).unwrap();
                every.insert(r.clone()).unwrap();
            }
            same(&skip, &every, &case.rules, "built")?;
            // Each step removes a rule and puts back the one removed two steps before, then all
            // come back.
            let gone: Vec<&Rule> = case.removals.iter().map(|i| i.get(&case.rules)).collect();
            let back = |t: &mut TupleMerge, r: &Rule| {
                if t.slots.get(r.id).is_none() {
                    t.insert(r.clone()).unwrap();
                }
            };
            for (step, r) in gone.iter().enumerate() {
                prop_assert_eq!(skip.remove(r.id).is_some(), every.remove(r.id).is_some());
                same(&skip, &every, &case.rules, &format!("removal {step}"))?;
                if let Some(r) = step.checked_sub(2).map(|s| gone[s]) {
                    back(&mut skip, r);
                    back(&mut every, r);
                    same(&skip, &every, &case.rules, &format!("re-insert {step}"))?;
                }
            }
            for r in &gone {
                back(&mut skip, r);
                back(&mut every, r);
            }
            same(&skip, &every, &case.rules, "all back")?;
        }

        /// A collision limit of 1 forces splits on almost every insert.
        #[test]
        fn differential_with_constant_splitting(case in testing::arb_case()) {
            testing::check_differential(&case, |rules| {
                let mut t = TupleMerge::with_collision_limit(1);
                t.set_table_major_batch_from(0);
                for r in rules {
                    t.insert(r.clone()).unwrap();
                }
                Box::new(t)
            })?;
        }
    }

    fn check_table_maxima(t: &TupleMerge) -> Result<(), TestCaseError> {
        for tb in &t.tables {
            let prios: Vec<u32> = tb.table.iter().flat_map(|b| tb.candidates(b).map(|c| c.priority)).collect();
            prop_assert_eq!(prios.len(), tb.rules);
            let max = prios.iter().copied().max().expect("an empty table is dropped");
            prop_assert!(tb.max_priority >= max, "bound {} under a held rule's {}", tb.max_priority, max);
            if tb.max_count > 0 {
                prop_assert_eq!(tb.max_priority, max);
                prop_assert_eq!(tb.max_count as usize, prios.iter().filter(|&&p| p == max).count());
            }
        }
        let bounds: Vec<u32> = t.tables.iter().map(|tb| tb.max_priority).collect();
        prop_assert!(bounds.windows(2).all(|w| w[0] >= w[1]), "tables in descending bound order");
        Ok(())
    }

    /// A big table whose highest rules go one by one keeps its bound until an eighth of its
    /// rules have gone, then scans once and is exact again.
    #[test]
    fn a_stale_maximum_is_made_exact_after_an_eighth_of_the_rules() {
        let text: String = (0..80)
            .map(|i| format!("@10.0.{i}.1/32\t10.0.0.2/32\t0 : 65535\t0 : 65535\t0x06/0xFF\t0x0000/0x0000\t\n"))
            .collect();
        let rules = rqvs_flow::formats::classbench::parse_rules("t", &text).unwrap();
        let mut tm = TupleMerge::build(&rules).unwrap();
        assert_eq!(tm.tables(), 1);
        let top = rules.iter().map(|r| r.priority).max().unwrap();
        let mut by_priority: Vec<&Rule> = rules.iter().collect();
        by_priority.sort_by_key(|r| std::cmp::Reverse(r.priority));
        for (n, r) in by_priority.iter().take(9).enumerate() {
            tm.remove(r.id).unwrap();
            let tb = &tm.tables[0];
            if n < 8 {
                // 8 removals of 80: not yet an eighth of the 72 left.
                assert_eq!((tb.max_priority, tb.max_count), (top, 0), "after {} removals", n + 1);
            } else {
                // 9 removals, 71 left: scanned.
                assert_eq!((tb.max_priority, tb.max_count), (by_priority[9].priority, 1));
            }
        }
    }

    #[test]
    fn relax_drops_names_its_fields() {
        let dropped: Vec<&str> = (0..NW).filter(|&d| RELAX_DROPS[d]).map(|d| WIDE_DIMS[d]).collect();
        assert_eq!(dropped, ["dl_type", "nw_frag", "nw_ttl", "tcp_flags"]);
        assert_eq!(WIDE_DIMS[D_IPV6_SRC - 5], "ipv6_src");
        assert_eq!(WIDE_DIMS[D_IPV6_DST - 5], "ipv6_dst");
    }

    #[test]
    fn tuples_and_relaxation() {
        let rules = rqvs_flow::formats::classbench::parse_rules(
            "t",
            "@10.1.2.0/24\t192.168.0.0/16\t1024 : 2047\t80 : 80\t0x06/0xFF\t0x0000/0x0000\t\n",
        )
        .unwrap();
        let (t, v) = rule_tuple(&rules[0].matches);
        // dl_type (wide dimension 1) is exact in every ClassBench rule; nothing else is wide.
        assert_eq!(t[..5], [24, 16, 0, 16, 8]);
        assert_eq!(t[5..], wide([(1, 16)]));
        assert_eq!((v[0], v[3]), (0x0a01_0200, 80));
        let classic =
            |c: [u8; 5], w: [u8; NW]| -> Tuple { std::array::from_fn(|d| if d < 5 { c[d] } else { w[d - 5] }) };
        // Relaxing drops dl_type: a 5-tuple rule's new table hashes no wide field.
        assert_eq!(relax(classic([32, 32, 16, 16, 8], wide([(1, 16)]))), classic([28, 28, 0, 0, 8], [0; NW]));
        assert_eq!(relax(classic([32, 8, 16, 16, 8], [0; NW])), classic([28, 0, 0, 0, 8], [0; NW]));
        assert_eq!(relax(classic([24, 16, 6, 15, 8], [0; NW])), classic([22, 0, 0, 0, 8], [0; NW]));
        assert_eq!(relax(classic([24, 20, 0, 16, 0], [0; NW])), classic([22, 18, 0, 0, 0], [0; NW]));
        // IPv6 addresses as IPv4's, in proportion; MACs, in_port and VLAN are kept.
        assert_eq!(
            relax(classic([0, 0, 0, 0, 6], wide([(10, 64), (11, 48), (8, 48), (0, 32), (2, 13)]))),
            classic([0, 0, 0, 0, 6], wide([(10, 56), (8, 48), (0, 32), (2, 13)]))
        );
    }

    fn wide(dims: impl IntoIterator<Item = (usize, u8)>) -> [u8; NW] {
        let mut w = [0; NW];
        for (d, l) in dims {
            w[d] = l;
        }
        w
    }

    /// A plain 5-tuple `drop` rule keeps no stored form (its candidate gives it back): the
    /// `rules` part is its 32-byte record and its slot in the id map — under 64 bytes a rule (it
    /// was about 330 with whole `Rule`s, about 100 with stored matches). A rule with actions
    /// keeps its stored form.
    #[test]
    fn five_tuple_rules_are_kept_narrow() {
        let text: String = (0..2000u32)
            .map(|i| {
                format!(
                    "@10.{}.{}.0/24\t192.168.{}.0/24\t0 : 65535\t{} : {}\t0x06/0xFF\t0x0000/0x0000\t\n",
                    i % 200,
                    i / 200,
                    i % 97,
                    i % 1000,
                    i % 1000 + 10
                )
            })
            .collect();
        let rules = rqvs_flow::formats::classbench::parse_rules("t", &text).unwrap();
        let tm = TupleMerge::build(&rules).unwrap();
        let parts = tm.memory_breakdown();
        let rules_part = parts.iter().find(|(k, _)| k == "rules").unwrap().1;
        assert!(rules_part / rules.len() < 64, "{} bytes a rule: {parts:?}", rules_part / rules.len());
        assert!(tm.records.iter().all(|r| r.stored.is_none()), "every rule here is whole in its candidate");
        let mut with_actions = rules.clone();
        with_actions[7].actions = rqvs_flow::Actions(vec![rqvs_flow::Action::Output(2)]);
        let tm2 = TupleMerge::build(&with_actions).unwrap();
        assert_eq!(tm2.records.iter().filter(|r| r.stored.is_some()).count(), 1);
        let mut t = tm2.clone();
        assert_eq!(t.remove(with_actions[7].id).as_ref(), Some(&with_actions[7]), "its actions come back");
        assert_eq!(parts.iter().map(|(_, b)| b).sum::<usize>(), tm.memory_bytes());
        for r in &rules[..50] {
            let mut t = tm.clone();
            assert_eq!(t.remove(r.id).as_ref(), Some(r), "the removed rule comes back whole");
        }
    }

    /// Rules that differ only in `eth_dst` (of1/of2's shape) or only in their IPv6 addresses land
    /// in distinct buckets: their tables hash those fields, so no bucket outgrows the collision
    /// limit and a lookup validates one candidate.
    #[test]
    fn wide_fields_are_hashed() {
        let mut rules = Vec::new();
        for i in 0..3000u32 {
            let (mut v, mut m) = (FlowKey::ZERO, FlowKey::ZERO);
            (v.dl_type, m.dl_type) = (0x0800, u16::MAX);
            (v.in_port, m.in_port) = (1 + i % 3, u32::MAX);
            v.dl_dst = [0xfa, 0x16, 0x3e, (i >> 16) as u8, (i >> 8) as u8, i as u8];
            m.dl_dst = [0xff; 6];
            rules.push(Rule::new(i, 10, Match::from_masked(v, m), rqvs_flow::Actions::drop()));
            let (mut v, mut m) = (FlowKey::ZERO, FlowKey::ZERO);
            (v.dl_type, m.dl_type) = (0x86dd, u16::MAX);
            (v.ipv6_src, m.ipv6_src) = (0x2001_0db8u128 << 96 | u128::from(i) << 64, u128::MAX << 64);
            (v.nw_proto, m.nw_proto) = (6, 0xff);
            rules.push(Rule::new(10_000 + i, 20, Match::from_masked(v, m), rqvs_flow::Actions::drop()));
        }
        let tm = TupleMerge::build(&rules).unwrap();
        let dl_dst = 5 + WIDE_DIMS.iter().position(|&f| f == "dl_dst").unwrap();
        let summary = tm.table_summary();
        assert!(summary.len() <= 4, "{} tables", summary.len());
        assert!(summary.iter().any(|(t, n, _)| t[dl_dst] == 48 && *n == 3000), "{summary:?}");
        assert!(summary.iter().any(|(t, n, _)| t[D_IPV6_SRC] >= 56 && *n == 3000), "{summary:?}");
        for t in &tm.tables {
            assert!(t.table.iter().all(|b| !b.has_tail()), "a bucket holds colliding rules");
        }
        let mut k = FlowKey { in_port: 1 + 1234 % 3, dl_type: 0x0800, ..FlowKey::ZERO };
        k.dl_dst = [0xfa, 0x16, 0x3e, 0, 1234u32.to_be_bytes()[2], 1234u32.to_be_bytes()[3]];
        assert_eq!(tm.lookup(&k), Some(RuleId(1234)));
        let k6 = FlowKey::ipv6(0x2001_0db8u128 << 96 | 77u128 << 64 | 5, 1, 6, 1, 2);
        assert_eq!(tm.lookup(&k6), Some(RuleId(10_077)));
        assert_eq!(tm.lookup(&k6.narrow().map_or(k6, |n| n.widen())), Some(RuleId(10_077)));
    }

    /// A removal can make a split possible that was not: a bucket of a /28 rule and two /29
    /// ones (on both addresses) in a /28 table finds no longer tuple; once the /28 rule goes,
    /// the /29 rules and a new /29-/28 one split to a /29-/28 table. The note of the failed split
    /// must not outlive the removal (fails when `Table::take` keeps it — tried).
    #[test]
    fn a_removal_forgets_that_a_split_found_nothing() {
        let line = |src: &str, dst: &str| format!("@{src}\t{dst}\t0 : 65535\t0 : 65535\t0x06/0xFF\t0x0000/0x0000\t\n");
        let text = [
            line("10.0.0.1/32", "20.0.0.1/32"), // makes the /28 table (relaxed), alone in its bucket
            line("1.1.1.0/28", "2.2.2.0/28"),
            line("1.1.1.0/29", "2.2.2.0/29"),
            line("1.1.1.8/29", "2.2.2.8/29"),
            line("1.1.1.0/29", "2.2.2.0/28"),
        ]
        .concat();
        let rules = rqvs_flow::formats::classbench::parse_rules("t", &text).unwrap();
        let mut tm = TupleMerge::with_collision_limit(1);
        for r in &rules[..4] {
            tm.insert(r.clone()).unwrap();
        }
        let tuple_of = |tm: &TupleMerge, id: RuleId| tm.table(tm.record(id).table).tuple;
        assert_eq!(tm.tables(), 1, "the /28 and /29 rules' split found no longer tuple");
        assert_eq!(tuple_of(&tm, rules[2].id)[..2], [28, 28]);
        tm.remove(rules[1].id).unwrap();
        tm.insert(rules[4].clone()).unwrap();
        for r in &rules[2..] {
            assert_eq!(tuple_of(&tm, r.id)[..2], [29, 28], "the split after the removal");
        }
    }

    #[test]
    fn removing_an_emptied_table_keeps_the_others() {
        // Three tables; empty the first: lookups through the other two must still work (the
        // authors' code erases every table after the emptied one).
        let text = "@10.0.0.1/32\t10.0.0.2/32\t0 : 65535\t0 : 65535\t0x06/0xFF\t0x0000/0x0000\t\n\
                    @0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0000/0x0000\t\n\
                    @0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000\t\n";
        let rules = rqvs_flow::formats::classbench::parse_rules("t", text).unwrap();
        let mut tm = TupleMerge::build(&rules).unwrap();
        assert_eq!(tm.tables(), 3);
        tm.remove(RuleId(0)).unwrap();
        assert_eq!(tm.tables(), 2);
        assert_eq!(tm.lookup(&FlowKey::ipv4(1, 2, 6, 5, 80)), Some(RuleId(1)));
        assert_eq!(tm.lookup(&FlowKey::ipv4(1, 2, 17, 5, 80)), Some(RuleId(2)));
    }

    /// Rules that share a table key share one bucket: the best inline, the others in the
    /// table's tails, in winner order, through removals of the head and of the tail's members.
    #[test]
    fn a_bucket_keeps_its_rules_in_winner_order_through_its_tail() {
        // Five rules on one address pair (one key of the one table), different port ranges.
        let line = |sp: &str| format!("@10.0.0.1/32\t10.0.0.2/32\t{sp}\t0 : 65535\t0x06/0xFF\t0x0000/0x0000\t\n");
        let text: String = ["0 : 65535", "0 : 1023", "1 : 1", "0 : 99", "2 : 2"].iter().map(|sp| line(sp)).collect();
        let rules = rqvs_flow::formats::classbench::parse_rules("t", &text).unwrap();
        let mut tm = TupleMerge::build(&rules[1..]).unwrap();
        assert_eq!(tm.tables(), 1);
        let t = &tm.tables[0];
        assert_eq!(t.table.len(), 1, "one bucket");
        assert_eq!(t.ids().count(), 4);
        // The best rule goes in last: it becomes the head, the old head the tail's first.
        tm.insert(rules[0].clone()).unwrap();
        let k = |sp| FlowKey::ipv4(0x0a00_0001, 0x0a00_0002, 6, sp, 80);
        let want = |tm: &TupleMerge, sp| {
            rules.iter().filter(|r| tm.slots.contains(r.id)).find(|r| r.matches.matches(&k(sp))).map(|r| r.id)
        };
        for round in 0..5 {
            for sp in [0, 1, 2, 50, 500, 5000] {
                assert_eq!(tm.lookup(&k(sp)), want(&tm, sp), "round {round}, port {sp}");
                assert_eq!(tm.lookup_narrow(&k(sp).narrow().unwrap()), want(&tm, sp));
            }
            // Remove the head (0, 2, 4) or a member of the tail (1, 3) in turn.
            let id = RuleId([0, 3, 1, 4, 2][round]);
            tm.remove(id).unwrap();
            let t = &tm.tables.first();
            let live = t.map_or(0, |t| t.ids().count());
            assert_eq!(live, 4 - round, "round {round}");
            assert!(t.is_none_or(|t| t.table.iter().all(|b| b.has_tail() == (t.tails.len() == 1))));
        }
    }
}
