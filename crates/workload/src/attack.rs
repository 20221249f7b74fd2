//! Attack traffic against the megaflow cache: Tuple Space Explosion (Csikor et al., CoNEXT'19,
//! CVE-2019-25076), its variant against subtable ranking ("TSE 2.0"), and a plain new-flow flood
//! for comparison. Every packet is a wire key (IPv4; [`FlowKey::wire`]) with `in_port` 1.
//!
//! - [`Kind::Tse`], [`Variant::CoLocated`] (the attacker knows the rules): headers chosen so that
//!   the slow path's wildcard tracking ([`OfprotoClassifier::lookup_wc`], OVS's semantics) yields
//!   as many distinct megaflow masks as possible. For every rule (in a seeded order) a base header
//!   is drawn inside it, then each bit of `nw_src`, `nw_dst`, `tp_src`, `tp_dst` is flipped in turn
//!   (a prefix field is un-wildcarded up to the first bit that differs from a rule, a port field
//!   bit by bit, so each position tends to give its own mask); then random combinations of one
//!   flip per field. Each candidate's megaflow mask is computed by the real slow path and the
//!   candidate kept only when its mask is new (greedy). The search stops when it has as many
//!   masks as packets, or after its budget (all single flips, then `4 × packets` combinations).
//!   The packets go round-robin over the masks found; every packet keeps its mask's examined bits
//!   and draws the wildcarded bits of the four fields at random, so it falls in the same megaflow
//!   but is a new microflow (misses the EMC). A key inside a megaflow does not always get the
//!   same mask from the slow path (a trie may stop at another bit), so each packet is checked and
//!   redrawn until its own lookup gives its mask: every packet's slow-path mask is its mask's.
//! - [`Kind::Tse`], [`Variant::General`] (no knowledge of the rules, the paper's general attack):
//!   every packet has random `nw_src`, `nw_dst`, `tp_src`, `tp_dst`, TCP or UDP, and random TCP
//!   flags.
//! - [`Kind::Tse2`]: the co-located mask set, cut to its first `tse2_masks` masks and sent
//!   round-robin. Why: rqvs (as OVS-DPDK) walks subtables in the order of their hits in the last
//!   ranking interval (`rqvs_datapath::dpcls`, `maybe_rank`). Benign traffic mostly hits the EMC,
//!   so its subtables take few hits; every attack packet is a new microflow and takes a
//!   megaflow-cache hit on its subtable. Concentrating the attack's rate on few masks gives each
//!   attack subtable more hits per interval than the benign subtables, so after a ranking the
//!   benign packets that miss the EMC walk all attack subtables before their own. With an attack
//!   rate `R` packets per interval and the hottest benign subtable taking `H` megaflow hits per
//!   interval, any `tse2_masks < R / H` out-ranks it.
//! - [`Kind::Flood`]: a SYN flood to one server (destination address, port and TCP fixed from the
//!   seed), every packet from a random source address and port: a new microflow each, no rule
//!   knowledge.
//!
//! All choices draw from [`Rng`] forks of the seed: a seed names the same packets.

use hashbrown::HashSet;
use rqvs_classify::ofproto::OfprotoClassifier;
use rqvs_flow::key::{IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP};
use rqvs_flow::{FlowKey, Rule};

use crate::rng::Rng;
use crate::trace::header_inside;

/// Most packets an attack may have (every packet is held in memory).
pub const MAX_PACKETS: usize = 10_000_000;

/// Default number of masks TSE 2.0 concentrates on.
pub const DEFAULT_TSE2_MASKS: usize = 16;

/// The attack to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Tse,
    Tse2,
    Flood,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Tse => "tse",
            Kind::Tse2 => "tse2",
            Kind::Flood => "flood",
        }
    }

    pub fn parse(s: &str) -> Result<Kind, String> {
        match s {
            "tse" => Ok(Kind::Tse),
            "tse2" => Ok(Kind::Tse2),
            "flood" => Ok(Kind::Flood),
            _ => Err(format!("expected an attack kind tse | tse2 | flood, found '{s}'")),
        }
    }
}

/// What the attacker knows (TSE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Nothing: random headers.
    General,
    /// The rules: headers searched against the slow path.
    CoLocated,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::General => "general",
            Variant::CoLocated => "co-located",
        }
    }
}

/// An attack's parameters.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub kind: Kind,
    pub variant: Variant,
    pub packets: usize,
    pub rng_seed: u64,
    /// Masks TSE 2.0 concentrates on (≥ 1).
    pub tse2_masks: usize,
}

impl Params {
    pub fn new(kind: Kind, packets: usize, rng_seed: u64) -> Params {
        Params { kind, variant: Variant::CoLocated, packets, rng_seed, tse2_masks: DEFAULT_TSE2_MASKS }
    }
}

/// A generated attack.
#[derive(Clone, Debug)]
pub struct Attack {
    pub keys: Vec<FlowKey>,
    /// Distinct megaflow masks the mask search found (co-located TSE and TSE 2.0: before TSE
    /// 2.0's cut; 0 for the others, which search nothing).
    pub masks_found: usize,
    /// Masks the packets use (TSE 2.0: after the cut).
    pub masks_used: usize,
    /// Slow-path lookups the search made.
    pub candidates: u64,
}

const FIELDS: [(u32, usize); 4] = [(0, 32), (1, 32), (2, 16), (3, 16)];

fn flip(key: &mut FlowKey, field: u32, bit: usize) {
    match field {
        0 => key.nw_src ^= 1 << (31 - bit),
        1 => key.nw_dst ^= 1 << (31 - bit),
        2 => key.tp_src ^= 1 << (15 - bit),
        _ => key.tp_dst ^= 1 << (15 - bit),
    }
}

fn has_ports(proto: u8) -> bool {
    matches!(proto, IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP)
}

/// Generates an attack over `rules` (module docs). Errors on 0 packets, too many, or a
/// co-located attack over an empty rule-set.
pub fn generate(rules: &[Rule], p: &Params) -> Result<Attack, String> {
    if p.packets == 0 || p.packets > MAX_PACKETS {
        return Err(format!("packets must be between 1 and {MAX_PACKETS}, found {}", p.packets));
    }
    if p.tse2_masks == 0 {
        return Err("the number of TSE 2.0 masks must be at least 1".into());
    }
    match (p.kind, p.variant) {
        (Kind::Flood, _) => Ok(plain(flood(p.packets, p.rng_seed))),
        (Kind::Tse, Variant::General) => Ok(plain(general(p.packets, p.rng_seed))),
        (Kind::Tse2, Variant::General) => {
            Err("tse2 needs the co-located variant (it concentrates on masks found from the rules)".into())
        }
        (Kind::Tse, Variant::CoLocated) | (Kind::Tse2, Variant::CoLocated) => {
            if rules.is_empty() {
                return Err("the co-located attack needs at least one rule".into());
            }
            let clf = OfprotoClassifier::build(rules).map_err(|e| format!("cannot build the slow path: {e}"))?;
            let (reps, candidates) = search_masks(&clf, rules, p.packets, p.rng_seed);
            let found = reps.len();
            let used = if p.kind == Kind::Tse2 { found.min(p.tse2_masks) } else { found };
            let keys = fill(&clf, &reps[..used], p.packets, p.rng_seed);
            Ok(Attack { keys, masks_found: found, masks_used: used, candidates })
        }
    }
}

fn plain(keys: Vec<FlowKey>) -> Attack {
    Attack { keys, masks_found: 0, masks_used: 0, candidates: 0 }
}

fn ipv4(nw_src: u32, nw_dst: u32, proto: u8, tp_src: u16, tp_dst: u16, flags: u16) -> FlowKey {
    let mut k = FlowKey::ipv4(nw_src, nw_dst, proto, tp_src, tp_dst);
    k.in_port = 1;
    if proto == IPPROTO_TCP {
        k.tcp_flags = flags;
    }
    k.wire()
}

/// The plain new-flow flood (module docs).
pub fn flood(packets: usize, seed: u64) -> Vec<FlowKey> {
    let mut rng = Rng::fork(seed, 0xf100d);
    let (dst, dport) = (rng.next_u32(), rng.next_u32() as u16);
    (0..packets).map(|_| ipv4(rng.next_u32(), dst, IPPROTO_TCP, rng.next_u32() as u16, dport, 0x02)).collect()
}

/// TSE's general variant (module docs).
pub fn general(packets: usize, seed: u64) -> Vec<FlowKey> {
    let mut rng = Rng::fork(seed, 0x7e5e);
    (0..packets)
        .map(|_| {
            let proto = if rng.chance(0.5) { IPPROTO_TCP } else { IPPROTO_UDP };
            let (s, d, sp, dp) = (rng.next_u32(), rng.next_u32(), rng.next_u32() as u16, rng.next_u32() as u16);
            ipv4(s, d, proto, sp, dp, rng.next_u32() as u16 & 0xff)
        })
        .collect()
}

/// A header and the megaflow mask the slow path gives it.
struct Rep {
    key: FlowKey,
    mask: FlowKey,
}

/// The co-located mask search (module docs): one representative header per distinct mask, in the
/// order found, and the number of slow-path lookups made.
fn search_masks(clf: &OfprotoClassifier, rules: &[Rule], target: usize, seed: u64) -> (Vec<Rep>, u64) {
    let mut rng = Rng::fork(seed, 0x5ea7c4);
    let mut order: Vec<usize> = (0..rules.len()).collect();
    rng.shuffle(&mut order);
    let mut seen: HashSet<FlowKey> = HashSet::new();
    let mut reps: Vec<Rep> = Vec::new();
    let mut candidates = 0u64;
    let mut bases = Vec::with_capacity(order.len());
    let mut try_key = |k: FlowKey, reps: &mut Vec<Rep>| {
        let k = k.wire();
        candidates += 1;
        let mask = clf.lookup_wc(&k).megaflow(&k).mask;
        if seen.insert(mask) {
            reps.push(Rep { key: k, mask });
        }
    };
    // Single flips, rule by rule.
    'rules: for &ri in &order {
        let mut base = header_inside(&rules[ri].matches, &mut rng);
        base.in_port = 1;
        base.dl_type = rqvs_flow::key::ETH_TYPE_IP;
        base.nw_frag = 0;
        bases.push(base);
        try_key(base, &mut reps);
        for &(field, width) in &FIELDS {
            if field >= 2 && !has_ports(base.nw_proto) {
                continue;
            }
            for bit in 0..width {
                if reps.len() >= target {
                    break 'rules;
                }
                let mut k = base;
                flip(&mut k, field, bit);
                try_key(k, &mut reps);
            }
        }
    }
    // Combinations: one random flip (or none) per field, on a random base.
    let mut budget = 4 * target as u64;
    while reps.len() < target && budget > 0 && !bases.is_empty() {
        budget -= 1;
        let mut k = bases[rng.index(bases.len())];
        for &(field, width) in &FIELDS {
            if (field < 2 || has_ports(k.nw_proto)) && rng.chance(0.75) {
                flip(&mut k, field, rng.index(width));
            }
        }
        try_key(k, &mut reps);
    }
    (reps, candidates)
}

/// Attempts at a random fill of a mask's wildcarded bits before the packet repeats its mask's
/// representative header.
const FILL_ATTEMPTS: usize = 16;

/// The packets: round-robin over the masks, wildcarded bits of the four fields random. A key in a
/// megaflow does not always get the same mask from the slow path (a prefix trie can stop at a
/// different bit), so each filled key is checked with the slow path and redrawn when its mask
/// differs; after [`FILL_ATTEMPTS`] the representative itself is sent.
fn fill(clf: &OfprotoClassifier, reps: &[Rep], packets: usize, seed: u64) -> Vec<FlowKey> {
    let mut rng = Rng::fork(seed, 0xf111);
    (0..packets)
        .map(|i| {
            let r = &reps[i % reps.len()];
            let m = &r.mask;
            for attempt in 0..FILL_ATTEMPTS {
                // All four fields first, then one field at a time (fewer changed bits, more
                // often the same lookup path).
                let only = |f: usize| attempt == 0 || attempt % 4 == f;
                let mut k = r.key;
                if only(0) {
                    k.nw_src = (k.nw_src & m.nw_src) | (rng.next_u32() & !m.nw_src);
                }
                if only(1) {
                    k.nw_dst = (k.nw_dst & m.nw_dst) | (rng.next_u32() & !m.nw_dst);
                }
                if has_ports(k.nw_proto) {
                    if only(2) {
                        k.tp_src = (k.tp_src & m.tp_src) | (rng.next_u32() as u16 & !m.tp_src);
                    }
                    if only(3) {
                        k.tp_dst = (k.tp_dst & m.tp_dst) | (rng.next_u32() as u16 & !m.tp_dst);
                    }
                }
                if k != r.key && clf.lookup_wc(&k).megaflow(&k).mask == *m {
                    return k;
                }
            }
            r.key
        })
        .collect()
}

/// Distinct megaflow masks the slow path gives `keys` (each key's own lookup; what an empty
/// megaflow cache would install if every key missed it).
pub fn slow_path_masks(rules: &[Rule], keys: &[FlowKey]) -> Result<usize, String> {
    let clf = OfprotoClassifier::build(rules).map_err(|e| format!("cannot build the slow path: {e}"))?;
    let masks: HashSet<FlowKey> = keys.iter().map(|k| clf.lookup_wc(k).megaflow(k).mask).collect();
    Ok(masks.len())
}
