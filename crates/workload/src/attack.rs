//! Attack traffic against the megaflow cache: Tuple Space Explosion (Csikor et al., CoNEXT'19;
//! CVE-2019-25076) and a plain new-flow flood.
//!
//! OVS's slow path un-wildcards, for each packet, the header bits its lookup examined (prefix
//! tries for the addresses, the ports, the staged lookup), and the megaflow it installs has
//! exactly that mask. A packet that differs from a rule in one bit at position *i* of a field
//! gets a mask with that field's bits un-wildcarded down to *i*: one new mask (one more hash
//! table in the megaflow cache, probed by every packet that misses the ones before it) per bit
//! position, and their products across fields. Every attack here computes the masks with the
//! real slow path ([`OfprotoClassifier::lookup_wc`], the one the datapath uses) rather than
//! predicting them.
//!
//! - [`Kind::Tse`], **co-located** ([`Knowledge::Rules`]: the attacker knows the rules, as a
//!   tenant that wrote its own ACL): for rules in random order, a header inside the rule and every
//!   single-bit flip of the fields it matches (addresses within their prefixes, ports), then
//!   random pairs of flips across two fields; a header is kept when its megaflow mask is new
//!   (greedy). The packets are those headers, then — when more packets are asked for — the same
//!   headers again with fresh random bits wherever their megaflow is wildcarded (new microflows:
//!   they miss the EMC and walk the subtables to their own megaflow).
//! - [`Kind::Tse`], **general** ([`Knowledge::None`]): no knowledge of the rules — uniformly random
//!   addresses and ports, TCP or UDP (TSE's general attack): the masks are whatever the rules'
//!   wildcard tracking makes of random bits.
//! - [`Kind::Tse2`]: the co-located headers of the first `masks` distinct masks only, sent round
//!   after round (fresh microflows each round). OVS ranks subtables by hits (rqvs every second of
//!   PMD time), which blunts the plain attack: its thousands of masks each take few hits and rank
//!   behind the busy benign subtables. Spread over few masks instead — at a rate R over M masks
//!   with R/M above the busiest benign subtable's hit rate — every attack subtable out-ranks the
//!   benign ones, and every benign packet probes all M of them first: the ranking works for the
//!   attack (`crates/experiment/tests/attack_ranking.rs`: 16 benign flows, 4 attack packets per
//!   benign one — benign subtables per megaflow hit 2.5 clean, 2.5 under TSE, 10.5 under TSE 2.0
//!   with 8 masks).
//! - [`Kind::Flood`]: new-flow flood for comparison — one service (a header inside a random rule)
//!   and every packet a new client (random source address low 16 bits and source port): many
//!   microflows and upcalls, few masks.

use hashbrown::HashSet;
use rqvs_classify::OfprotoClassifier;
use rqvs_flow::key::{ETH_TYPE_IP, IPPROTO_TCP, IPPROTO_UDP};
use rqvs_flow::rng::Rng;
use rqvs_flow::{FlowKey, Rule};

/// Which attack ([`generate`]; module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Tse,
    Tse2,
    Flood,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Tse, Kind::Tse2, Kind::Flood];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Tse => "tse",
            Kind::Tse2 => "tse2",
            Kind::Flood => "flood",
        }
    }
}

/// What the attacker knows ([`Kind::Tse`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Knowledge {
    /// The co-located attacker: the rules.
    Rules,
    /// The general attacker: nothing.
    None,
}

impl Knowledge {
    pub fn name(self) -> &'static str {
        match self {
            Knowledge::Rules => "co-located",
            Knowledge::None => "general",
        }
    }
}

/// The attack to generate.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub kind: Kind,
    pub knowledge: Knowledge,
    pub packets: usize,
    /// [`Kind::Tse2`]: the distinct masks the attack is spread over.
    pub masks: usize,
    /// Most slow-path lookups spent searching for new masks.
    pub budget: usize,
    pub seed: u64,
}

impl Params {
    pub fn new(kind: Kind, packets: usize, seed: u64) -> Params {
        Params { kind, knowledge: Knowledge::Rules, packets, masks: 64, budget: 200_000, seed }
    }
}

/// What [`generate`] found.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Distinct megaflow masks the headers searched for produce in the slow path (co-located:
    /// the greedy search's result; the others: counted over the packets).
    pub distinct_masks: usize,
    /// Slow-path lookups the search made.
    pub lookups: usize,
}

/// Errors are one line.
pub type Result<T> = std::result::Result<T, String>;

/// The megaflow mask the slow path gives `key` (a wire key).
fn mask_of(c: &OfprotoClassifier, key: &FlowKey) -> FlowKey {
    c.lookup_wc(key).megaflow(key).mask
}

/// A random IPv4 TCP or UDP header.
fn random_key(rng: &mut Rng) -> FlowKey {
    let proto = if rng.chance(0.5) { IPPROTO_TCP } else { IPPROTO_UDP };
    FlowKey::ipv4(rng.next_u32(), rng.next_u32(), proto, rng.next_u32() as u16, rng.next_u32() as u16).wire()
}

/// A random header inside `r` (IPv4; TCP or UDP when the rule leaves the protocol open).
fn inside(r: &Rule, rng: &mut Rng) -> FlowKey {
    let (v, m) = (r.matches.value(), r.matches.mask());
    let bits = |value: u32, mask: u32, rng: &mut Rng| (value & mask) | (rng.next_u32() & !mask);
    let proto = if m.nw_proto == 0xff {
        v.nw_proto
    } else if rng.chance(0.5) {
        IPPROTO_TCP
    } else {
        IPPROTO_UDP
    };
    let port = |range: rqvs_flow::PortRange, rng: &mut Rng| rng.range_u32(range.lo.into(), range.hi.into()) as u16;
    let (sp, dp) = (port(r.matches.tp_src_range(), rng), port(r.matches.tp_dst_range(), rng));
    let mut k = FlowKey::ipv4(bits(v.nw_src, m.nw_src, rng), bits(v.nw_dst, m.nw_dst, rng), proto, sp, dp);
    k.dl_type = ETH_TYPE_IP;
    k.wire()
}

/// `key` with fresh random bits wherever `mask` is wildcarded (addresses and ports): the same
/// megaflow, a new microflow.
fn refresh(key: &FlowKey, mask: &FlowKey, rng: &mut Rng) -> FlowKey {
    let mut k = *key;
    k.nw_src = (k.nw_src & mask.nw_src) | (rng.next_u32() & !mask.nw_src);
    k.nw_dst = (k.nw_dst & mask.nw_dst) | (rng.next_u32() & !mask.nw_dst);
    if matches!(k.nw_proto, IPPROTO_TCP | IPPROTO_UDP) {
        k.tp_src = (k.tp_src & mask.tp_src) | (rng.next_u32() as u16 & !mask.tp_src);
        k.tp_dst = (k.tp_dst & mask.tp_dst) | (rng.next_u32() as u16 & !mask.tp_dst);
    }
    k.wire()
}

/// `key` with bit `bit` of field `field` (0 nw_src, 1 nw_dst, 2 tp_src, 3 tp_dst) flipped.
fn flip(key: &FlowKey, field: usize, bit: u32) -> FlowKey {
    let mut k = *key;
    match field {
        0 => k.nw_src ^= 1 << bit,
        1 => k.nw_dst ^= 1 << bit,
        2 => k.tp_src ^= 1 << bit,
        _ => k.tp_dst ^= 1 << bit,
    }
    k.wire()
}

/// The (field, bit) positions a rule's match examines: address bits within its prefixes, every
/// port bit of a port it restricts (TCP/UDP).
fn positions(r: &Rule, key: &FlowKey) -> Vec<(usize, u32)> {
    let m = r.matches.mask();
    let mut v = Vec::new();
    for bit in 0..32 {
        if m.nw_src >> bit & 1 == 1 {
            v.push((0, bit));
        }
        if m.nw_dst >> bit & 1 == 1 {
            v.push((1, bit));
        }
    }
    if matches!(key.nw_proto, IPPROTO_TCP | IPPROTO_UDP) {
        for bit in 0..16 {
            if !r.matches.tp_src_range().is_any() {
                v.push((2, bit));
            }
            if !r.matches.tp_dst_range().is_any() {
                v.push((3, bit));
            }
        }
    }
    v
}

/// The co-located search: headers, each with a megaflow mask none before it has, at most
/// `want` of them, within `budget` slow-path lookups.
fn colocated(
    c: &OfprotoClassifier,
    rules: &[Rule],
    want: usize,
    budget: usize,
    rng: &mut Rng,
) -> (Vec<(FlowKey, FlowKey)>, usize) {
    let mut seen: HashSet<FlowKey> = HashSet::new();
    let mut found = Vec::new();
    let mut lookups = 0;
    let mut order: Vec<usize> = (0..rules.len()).collect();
    rng.shuffle(&mut order);
    let mut try_key = |k: FlowKey, found: &mut Vec<(FlowKey, FlowKey)>, lookups: &mut usize| {
        *lookups += 1;
        let m = mask_of(c, &k);
        if seen.insert(m) {
            found.push((k, m));
        }
    };
    'rules: for &i in &order {
        let r = &rules[i];
        let base = inside(r, rng);
        let pos = positions(r, &base);
        try_key(base, &mut found, &mut lookups);
        for &(field, bit) in &pos {
            if found.len() >= want || lookups >= budget {
                break 'rules;
            }
            try_key(flip(&base, field, bit), &mut found, &mut lookups);
        }
        // Products across fields: random pairs of flips in two different fields.
        for _ in 0..pos.len().min(64) {
            if found.len() >= want || lookups >= budget {
                break 'rules;
            }
            let (a, b) = (pos[rng.index(pos.len())], pos[rng.index(pos.len())]);
            if a.0 != b.0 {
                try_key(flip(&flip(&base, a.0, a.1), b.0, b.1), &mut found, &mut lookups);
            }
        }
    }
    (found, lookups)
}

/// Generates the attack's packets over `rules` (wire keys, in sending order) and what the
/// search found. Errors: no rules, no packets asked for, `masks` 0 for tse2, a rule set the
/// slow path refuses.
pub fn generate(rules: &[Rule], p: &Params) -> Result<(Vec<FlowKey>, Stats)> {
    if p.packets == 0 {
        return Err("--packets: expected at least 1".into());
    }
    if rules.is_empty() && (p.kind != Kind::Tse || p.knowledge == Knowledge::Rules) {
        return Err("the rule set is empty: nothing to attack".into());
    }
    if p.kind == Kind::Tse2 && p.masks == 0 {
        return Err("--masks: expected at least 1".into());
    }
    let c = OfprotoClassifier::build(rules).map_err(|e| e.to_string())?;
    let mut rng = Rng::new(p.seed);
    let mut stats = Stats::default();
    let keys = match (p.kind, p.knowledge) {
        (Kind::Tse, Knowledge::None) => (0..p.packets).map(|_| random_key(&mut rng)).collect(),
        (Kind::Flood, _) => {
            let service = inside(&rules[rng.index(rules.len())], &mut rng);
            (0..p.packets)
                .map(|_| {
                    let mut k = service;
                    k.nw_src = (k.nw_src & 0xffff_0000) | (rng.next_u32() & 0xffff);
                    if matches!(k.nw_proto, IPPROTO_TCP | IPPROTO_UDP) {
                        k.tp_src = rng.next_u32() as u16;
                    }
                    k.wire()
                })
                .collect()
        }
        (kind, _) => {
            let want = if kind == Kind::Tse2 { p.masks } else { p.packets };
            let (found, lookups) = colocated(&c, rules, want, p.budget, &mut rng);
            stats.lookups = lookups;
            stats.distinct_masks = found.len();
            if found.is_empty() {
                return Err("no header found within the search budget".into());
            }
            let mut keys: Vec<FlowKey> = found.iter().map(|(k, _)| *k).take(p.packets).collect();
            let mut i = 0;
            while keys.len() < p.packets {
                let (k, m) = &found[i % found.len()];
                keys.push(refresh(k, m, &mut rng));
                i += 1;
            }
            keys
        }
    };
    if stats.distinct_masks == 0 {
        let masks: HashSet<FlowKey> = keys.iter().map(|k| mask_of(&c, k)).collect();
        stats.distinct_masks = masks.len();
        stats.lookups = keys.len();
    }
    Ok((keys, stats))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_flow::formats;

    fn rules() -> Vec<Rule> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiment/data/acl1_1k_rules.xz");
        formats::parse_rules("acl1_1k", &rqvs_flow::io::read_text(&dir).unwrap()).unwrap()
    }

    fn masks(rules: &[Rule], keys: &[FlowKey]) -> usize {
        let c = OfprotoClassifier::build(rules).unwrap();
        keys.iter().map(|k| mask_of(&c, k)).collect::<HashSet<_>>().len()
    }

    #[test]
    fn colocated_tse_makes_more_masks_than_the_general_attack_and_the_flood() {
        let rules = rules();
        let n = 3000;
        let gen = |kind, knowledge| generate(&rules, &Params { knowledge, ..Params::new(kind, n, 7) }).unwrap();
        let (tse, st) = gen(Kind::Tse, Knowledge::Rules);
        let (general, _) = gen(Kind::Tse, Knowledge::None);
        let (flood, _) = gen(Kind::Flood, Knowledge::Rules);
        assert_eq!((tse.len(), general.len(), flood.len()), (n, n, n));
        let (m_tse, m_general, m_flood) = (masks(&rules, &tse), masks(&rules, &general), masks(&rules, &flood));
        assert_eq!(m_tse, st.distinct_masks, "the search's count is the slow path's");
        assert!(m_tse > 2 * m_general && m_tse > 10 * m_flood, "tse {m_tse}, general {m_general}, flood {m_flood}");
        // Every flood packet is a new microflow.
        assert_eq!(flood.iter().collect::<HashSet<_>>().len(), n);
    }

    #[test]
    fn tse2_spreads_over_the_masks_asked_for() {
        let rules = rules();
        let (keys, st) = generate(&rules, &Params { masks: 20, ..Params::new(Kind::Tse2, 1000, 3) }).unwrap();
        assert_eq!((keys.len(), st.distinct_masks, masks(&rules, &keys)), (1000, 20, 20));
        // Round after round: each mask 50 times, every packet a new microflow.
        assert!(keys.iter().collect::<HashSet<_>>().len() > 990);
    }

    #[test]
    fn the_same_seed_gives_the_same_attack() {
        let rules = rules();
        for kind in Kind::ALL {
            let a = generate(&rules, &Params::new(kind, 500, 11)).unwrap().0;
            assert_eq!(a, generate(&rules, &Params::new(kind, 500, 11)).unwrap().0, "{}", kind.name());
            assert_ne!(a, generate(&rules, &Params::new(kind, 500, 12)).unwrap().0, "{}", kind.name());
        }
    }

    #[test]
    fn bad_parameters_are_errors() {
        let rules = rules();
        assert!(generate(&rules, &Params::new(Kind::Tse, 0, 1)).unwrap_err().contains("--packets"));
        assert!(generate(&rules, &Params { masks: 0, ..Params::new(Kind::Tse2, 10, 1) })
            .unwrap_err()
            .contains("--masks"));
        assert!(generate(&[], &Params::new(Kind::Flood, 10, 1)).unwrap_err().contains("empty"));
    }
}
