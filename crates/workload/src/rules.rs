//! ClassBench-compatible rule-set generation.
//!
//! The algorithm is the original `db_generator -bc SEED N 0 0 0` (Taylor & Turner, ToN 2007;
//! `custom_db.cc`, `sbintree.cc`, `dbintree.cc`), which the shared real sets were made with,
//! re-implemented from its description and sources, not translated line by line:
//!
//! 1. **Application specification**, per rule, independently: a protocol from `-prots`; a flag
//!    specification from `-flags` for that protocol (none if the protocol has none); a port-pair
//!    class from the protocol's 25 class probabilities (biased by `port_scope`); the ports of the
//!    class (WC 0:65535, HI 1024:65535, LO 0:1023, AR/EM drawn from `-spar/-spem/-dpar/-dpem`);
//!    a total prefix length and, given it, a source length from the class's `-xx_yy` section
//!    (the total biased by `addr_scope`).
//! 2. **Source addresses** from a binary trie built top-down: at each node the rules whose source
//!    length equals the depth stop there; the rest go to one child (probability `p1` of
//!    `-sskew`) or are split between two children with the level's skew (heavy side
//!    `floor(n / (2 - skew))`), on a random heavy side. Once a path holds `snest − 1` nested
//!    prefixes, rules ending at the next level are kept on a side of their own, which bounds
//!    prefix nesting at `snest`.
//! 3. **Destination addresses** from a second trie in two passes: the first pass ("stubs") lets
//!    each rule's destination follow its source address bit by bit with the per-level
//!    probability of `-pcorr` and parks it on the opposite branch when the correlation breaks (or
//!    when its source prefix ends next level, to avoid copying it); the second pass finishes the
//!    trie with `-dskew`/`-dnest` as for sources, taking the weight already parked under each child
//!    into account when splitting.
//! 4. **Scaling** (the `-b` switch the shared sets were made with): when `count` exceeds the seed's
//!    `-scale`, the skew of the top trie levels is reduced (two-child nodes made more likely and
//!    more balanced) until the trie can hold `count / scale` times more prefixes — the original's
//!    `scale_skew`.
//! 5. **Duplicates** (identical on every field) are removed — with a hash set, where the original
//!    compared each rule with every rule of its tuple (quadratic on big sets). Rules are then
//!    ordered by the original's *scope* (`(32−sl)+(32−dl)+log2 sport width+log2 dport
//!    width+8·[proto wildcard]+[flags wildcard]`, truncated), most specific first; rules of equal
//!    scope keep their tuples' order of first appearance and, within a tuple, generation order.
//!    Like the original, the result can be smaller than `count`.
//!
//! **Smoothing** (`Params::smoothing`, the original's `<smoothness>`): each class's prefix-length
//! distribution is spread binomially before drawing ([`crate::smoothing`]); 0 — the shared sets'
//! value and rqvs' default — leaves it untouched.
//!
//! Simplifications, stated: `-extra` fields must be 0 (they are in
//! all 12 seeds); probabilities are f64 where the original used f32; the random generator is
//! [`Rng`], so a seed never reproduces the original's bytes, only its statistics. A total prefix
//! length whose source distribution has no valid length (source > total, or total − source > 32)
//! is dropped and the others renormalised, where the original would divide by zero.
//!
//! Cost: each trie pass touches every rule once per level, O(33 · n); 500K rules take about a
//! second.

use hashbrown::HashSet;
use rqvs_flow::formats::classbench::{self, ClassBenchFields};
use rqvs_flow::prefix::prefix_mask;
use rqvs_flow::{Actions, PortRange, Rule};

use crate::rng::Rng;
use crate::seedfile::{SeedFile, Skew, TotalLength, PORT_PAIR_CLASSES};

/// What to generate.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Target number of rules (the result may be smaller after duplicates are removed).
    pub count: usize,
    pub rng_seed: u64,
    /// Address scope, −1..1 (positive favours shorter prefixes); 0 as in the shared sets.
    pub addr_scope: f64,
    /// Port scope, −1..1 (positive favours wider port classes); 0 as in the shared sets.
    pub port_scope: f64,
    /// The original's `-b` switch (skew scaling with the set size); on for the shared sets.
    pub scale_skew: bool,
    /// The original's `<smoothness>`: spreads each prefix-length spike over lengths up to this
    /// far away ([`crate::smoothing`]); 0 (no smoothing) as in the shared sets.
    pub smoothing: u32,
}

impl Params {
    pub fn new(count: usize, rng_seed: u64) -> Params {
        Params { count, rng_seed, addr_scope: 0.0, port_scope: 0.0, scale_skew: true, smoothing: 0 }
    }
}

/// A generated set.
#[derive(Clone, Debug)]
pub struct Generated {
    /// The rules, in ClassBench order: rule `i` has id `i` and priority `n − i`.
    pub rules: Vec<Rule>,
    /// The same rules as ClassBench fields.
    pub fields: Vec<ClassBenchFields>,
    /// Rules drawn before duplicates were removed (= `count`).
    pub drawn: usize,
    pub duplicates: usize,
}

#[derive(Clone, Copy, Debug)]
struct Filter {
    sa: u32,
    da: u32,
    sl: u8,
    dl: u8,
    sp: PortRange,
    dp: PortRange,
    proto: u8,
    flags: (u16, u16),
}

/// A cumulative distribution over the entries of positive weight: `pick(r)` is the first such
/// entry whose cumulative weight is ≥ r (the original's `r <= cum[i]` scan, by binary search).
pub(crate) struct Cdf {
    idx: Vec<usize>,
    cum: Vec<f64>,
}

impl Cdf {
    pub(crate) fn new(weights: impl IntoIterator<Item = f64>) -> Cdf {
        let w: Vec<(usize, f64)> = weights.into_iter().enumerate().filter(|&(_, x)| x > 0.0).collect();
        let total: f64 = w.iter().map(|x| x.1).sum();
        let mut acc = 0.0;
        let mut cum: Vec<f64> = w
            .iter()
            .map(|&(_, x)| {
                acc += x / total;
                acc
            })
            .collect();
        // Like the original, the last entry closes the distribution (rounding never falls off).
        if let Some(last) = cum.last_mut() {
            *last = 1.0;
        }
        Cdf { idx: w.iter().map(|x| x.0).collect(), cum }
    }

    /// `r` in [0, 1]; the distribution must have an entry of positive weight.
    pub(crate) fn pick(&self, r: f64) -> usize {
        self.idx[self.cum.partition_point(|&c| c < r).min(self.cum.len() - 1)]
    }
}

/// Every field of a generated rule, for the duplicate filter.
type RuleKey = (u32, u32, u8, u8, u32, u32, u8, u32);
/// A protocol's flag specifications and their distribution.
type FlagDist = (Vec<(u16, u16)>, Cdf);
/// A total prefix length, its probability and its valid source lengths.
type UsableTotal = (u8, f64, Vec<(u8, f64)>);

struct LengthDist {
    totals: Vec<u8>,
    total_cdf: Cdf,
    sources: Vec<(Vec<u8>, Cdf)>,
}

/// The original's `random_scope`: a number in [0,1) biased towards 0 (scope > 0) or 1 (< 0).
fn random_scope(rng: &mut Rng, scope: f64) -> f64 {
    let p = rng.f64();
    p * (scope * p - scope + 1.0)
}

/// The most rules [`generate`] draws: every rule is held (and hashed, to remove duplicates) in
/// memory: about 320 bytes each with its text, 3.2 GB at the limit.
pub const MAX_COUNT: usize = 10_000_000;

/// Generates a rule-set from a seed file.
pub fn generate(seed: &SeedFile, params: &Params) -> Result<Generated, String> {
    generate_inner(seed, params, false)
}

/// [`generate`] without step 5's duplicate removal: every drawn rule, in the same order (equal
/// rules next to each other), `duplicates` counting the ones [`generate`] would have removed.
/// For generators that add fields afterwards ([`crate::ofrules`]), which make most of them
/// distinct and remove the rest themselves.
pub fn generate_with_duplicates(seed: &SeedFile, params: &Params) -> Result<Generated, String> {
    generate_inner(seed, params, true)
}

fn generate_inner(seed: &SeedFile, params: &Params, keep_duplicates: bool) -> Result<Generated, String> {
    if params.count == 0 || params.count > MAX_COUNT {
        return Err(format!("expected a rule count in 1..={MAX_COUNT}, found {}", params.count));
    }
    if !(-1.0..=1.0).contains(&params.addr_scope) || !(-1.0..=1.0).contains(&params.port_scope) {
        return Err("expected address and port scopes in -1..1".into());
    }
    if params.smoothing > crate::smoothing::MAX_SMOOTHING {
        return Err(format!(
            "expected a smoothing of 0..={}, found {}",
            crate::smoothing::MAX_SMOOTHING,
            params.smoothing
        ));
    }
    let n = params.count;
    let mut rng = Rng::new(params.rng_seed);
    let mut filters = specify(seed, params, &mut rng);

    let scale_factor = n as f64 / f64::from(seed.scale);
    let mut sskew = seed.sskew;
    let mut dskew = seed.dskew;
    if params.scale_skew && scale_factor > 1.0 {
        scale_skew(&mut sskew, scale_factor);
        scale_skew(&mut dskew, scale_factor);
    }
    let all: Vec<u32> = (0..n as u32).collect();
    let mut src = SourceTrie { f: &mut filters, skew: &sskew, nest: seed.snest, rng: &mut rng };
    src.node(0, 0, all.clone(), 0);
    let mut dst = DestTrie {
        f: &mut filters,
        skew: &dskew,
        nest: seed.dnest,
        corr: &seed.pcorr,
        rng: &mut rng,
        nodes: vec![DNode::new(0)],
    };
    dst.stub(0, 0, all.clone(), 0);
    dst.finish(0, 0, all, 0);
    drop(dst);

    // Duplicates, then the original's order (scope, tuple first seen, generation order).
    let mut seen: HashSet<RuleKey> = HashSet::with_capacity(n);
    let mut tuple_first: hashbrown::HashMap<(u8, u8, u32, u32, bool, bool), usize> = hashbrown::HashMap::new();
    let mut kept: Vec<(i32, usize, usize)> = Vec::with_capacity(n);
    for (i, f) in filters.iter().enumerate() {
        let key = (
            f.sa,
            f.da,
            f.sl,
            f.dl,
            u32::from(f.sp.lo) << 16 | u32::from(f.sp.hi),
            u32::from(f.dp.lo) << 16 | u32::from(f.dp.hi),
            f.proto,
            u32::from(f.flags.0) << 16 | u32::from(f.flags.1),
        );
        let tuple = (f.sl, f.dl, f.sp.len(), f.dp.len(), f.proto > 0, f.flags.1 > 0);
        let next = tuple_first.len();
        let t = *tuple_first.entry(tuple).or_insert(next);
        if !seen.insert(key) && !keep_duplicates {
            continue;
        }
        let scope = (32 - i32::from(f.sl)) as f64
            + (32 - i32::from(f.dl)) as f64
            + (f64::from(f.sp.len())).ln() / 2f64.ln()
            + (f64::from(f.dp.len())).ln() / 2f64.ln()
            + if f.proto > 0 { 0.0 } else { 8.0 }
            + if f.flags.1 > 0 { 0.0 } else { 1.0 };
        kept.push((scope as i32, t, i));
    }
    kept.sort_unstable();
    let total = kept.len() as u32;
    let mut rules = Vec::with_capacity(kept.len());
    let mut fields = Vec::with_capacity(kept.len());
    for (pos, &(_, _, i)) in kept.iter().enumerate() {
        let f = &filters[i];
        let cb = ClassBenchFields {
            src: (f.sa & prefix_mask(u32::from(f.sl), 32), f.sl),
            dst: (f.da & prefix_mask(u32::from(f.dl), 32), f.dl),
            sport: f.sp,
            dport: f.dp,
            proto: (f.proto, if f.proto > 0 { 0xff } else { 0 }),
            flags: f.flags,
        };
        let m = classbench::to_match(&cb).map_err(|e| format!("{}: generated rule {pos}: {e}", seed.name))?;
        rules.push(Rule::new(pos as u32, total - pos as u32, m, Actions::drop()));
        fields.push(cb);
    }
    Ok(Generated { rules, fields, drawn: n, duplicates: n - seen.len() })
}

/// Step 1: protocol, flags, ports and prefix lengths of every rule.
fn specify(seed: &SeedFile, params: &Params, rng: &mut Rng) -> Vec<Filter> {
    let prot_cdf = Cdf::new(seed.protocols.iter().map(|p| p.prob));
    let class_cdfs: Vec<Cdf> = seed.protocols.iter().map(|p| Cdf::new(p.port_pairs)).collect();
    let flag_cdfs: Vec<Option<FlagDist>> = seed
        .protocols
        .iter()
        .map(|p| {
            seed.flags.iter().find(|(proto, _)| *proto == p.proto).map(|(_, specs)| {
                (specs.iter().map(|s| (s.value, s.mask)).collect(), Cdf::new(specs.iter().map(|s| s.prob)))
            })
        })
        .collect();
    let ports =
        |list: &[(f64, PortRange)]| (list.iter().map(|x| x.1).collect::<Vec<_>>(), Cdf::new(list.iter().map(|x| x.0)));
    let spar = ports(&seed.sport_ranges);
    let spem = ports(&seed.sport_exact);
    let dpar = ports(&seed.dport_ranges);
    let dpem = ports(&seed.dport_exact);
    let smoothed: Vec<Vec<TotalLength>> = if params.smoothing > 0 {
        seed.prefix_lengths.iter().map(|c| crate::smoothing::smooth(c, params.smoothing)).collect()
    } else {
        Vec::new()
    };
    let classes: &[Vec<TotalLength>] = if params.smoothing > 0 { &smoothed } else { &seed.prefix_lengths };
    let lengths: Vec<LengthDist> = classes
        .iter()
        .map(|class| {
            let usable: Vec<UsableTotal> = class
                .iter()
                .filter_map(|t| {
                    let src: Vec<(u8, f64)> = t
                        .source
                        .iter()
                        .copied()
                        .filter(|&(s, p)| p > 0.0 && s <= t.total && t.total - s <= 32)
                        .collect();
                    (t.prob > 0.0 && !src.is_empty()).then_some((t.total, t.prob, src))
                })
                .collect();
            LengthDist {
                totals: usable.iter().map(|u| u.0).collect(),
                total_cdf: Cdf::new(usable.iter().map(|u| u.1)),
                sources: usable
                    .iter()
                    .map(|u| (u.2.iter().map(|x| x.0).collect(), Cdf::new(u.2.iter().map(|x| x.1))))
                    .collect(),
            }
        })
        .collect();
    let draw = |rng: &mut Rng, list: &(Vec<PortRange>, Cdf)| list.0[list.1.pick(rng.f64())];
    const WC: PortRange = PortRange::ANY;
    const HI: PortRange = PortRange { lo: 1024, hi: 65535 };
    const LO: PortRange = PortRange { lo: 0, hi: 1023 };
    let mut out = Vec::with_capacity(params.count);
    for _ in 0..params.count {
        let pi = prot_cdf.pick(rng.f64());
        let proto = seed.protocols[pi].proto;
        let flags = match &flag_cdfs[pi] {
            Some((specs, cdf)) => specs[cdf.pick(rng.f64())],
            None => (0, 0),
        };
        let class = class_cdfs[pi].pick(random_scope(rng, params.port_scope));
        let name = PORT_PAIR_CLASSES[class];
        let side = |rng: &mut Rng, kind: &str, ar: &(Vec<PortRange>, Cdf), em: &(Vec<PortRange>, Cdf)| match kind {
            "hi" => HI,
            "lo" => LO,
            "ar" => draw(rng, ar),
            "em" => draw(rng, em),
            _ => WC,
        };
        let sp = side(rng, &name[..2], &spar, &spem);
        let dp = side(rng, &name[3..], &dpar, &dpem);
        let ld = &lengths[class];
        let ti = ld.total_cdf.pick(random_scope(rng, params.addr_scope));
        let total = ld.totals[ti];
        let (slens, scdf) = &ld.sources[ti];
        let sl = slens[scdf.pick(rng.f64())];
        out.push(Filter { sa: 0, da: 0, sl, dl: total - sl, sp, dp, proto, flags });
    }
    out
}

/// The original's `scale_skew`: balance the top levels until the trie's "D" grows by `factor`.
fn scale_skew(skew: &mut [Skew; 33], factor: f64) {
    let mut target = factor;
    for s in skew.iter_mut().take(32) {
        if target <= 0.0 {
            break;
        }
        let node_d = 2.0 * ((1.0 - s.p2) + s.skew * s.p2);
        if node_d <= target {
            target -= node_d;
            *s = Skew { p1: 0.0, p2: 1.0, skew: 0.0 };
        } else {
            let p2d = node_d - 2.0 * s.skew;
            if p2d > target {
                let new_d = node_d - target;
                s.p2 = ((new_d / 2.0) - 1.0) / (s.skew - 1.0);
                s.p1 = 1.0 - s.p2;
            } else {
                s.p2 = 1.0;
                s.p1 = 0.0;
                s.skew = (2.0 * s.skew - target) / 2.0;
            }
            return;
        }
    }
}

fn child_addrs(lev: u32, addr: u32) -> [u32; 2] {
    let base = addr & prefix_mask(lev, 32);
    [base, base | (1u32 << (31 - lev))]
}

struct SourceTrie<'a> {
    f: &'a mut [Filter],
    skew: &'a [Skew; 33],
    nest: u32,
    rng: &'a mut Rng,
}

impl SourceTrie<'_> {
    fn node(&mut self, lev: u32, addr: u32, list: Vec<u32>, cur_nest: u32) {
        let mut rest = Vec::with_capacity(list.len());
        let (mut here, mut lev1) = (false, false);
        for q in list {
            let f = &mut self.f[q as usize];
            if u32::from(f.sl) == lev {
                f.sa = addr;
                here = true;
            } else {
                rest.push(q);
                lev1 |= u32::from(f.sl) == lev + 1;
            }
        }
        let my_nest = cur_nest + u32::from(here);
        if rest.is_empty() {
            return;
        }
        let path = usize::from(self.rng.f64() >= 0.5);
        let addrs = child_addrs(lev, addr);
        if rest.len() > 1 && my_nest + 1 >= self.nest && lev1 && lev < 31 {
            let (nest, other): (Vec<u32>, Vec<u32>) =
                rest.into_iter().partition(|&q| u32::from(self.f[q as usize].sl) == lev + 1);
            let (heavy, light) = if nest.len() > other.len() { (nest, other) } else { (other, nest) };
            self.node(lev + 1, addrs[path], heavy, my_nest);
            self.node(lev + 1, addrs[1 - path], light, my_nest);
            return;
        }
        let s = self.skew[lev as usize];
        if self.rng.f64() < s.p1 || rest.len() == 1 {
            self.node(lev + 1, addrs[path], rest, my_nest);
        } else {
            let heavy = (rest.len() as f64 / (2.0 - s.skew)).floor() as usize;
            let lite = rest.len() - heavy.min(rest.len());
            let heavy_list = rest.split_off(lite);
            self.node(lev + 1, addrs[path], heavy_list, my_nest);
            self.node(lev + 1, addrs[1 - path], rest, my_nest);
        }
    }
}

const NONE: u32 = u32::MAX;

struct DNode {
    child: [u32; 2],
    wt: [usize; 2],
    valid: bool,
    lvl: u8,
    stubs: Vec<u32>,
}

impl DNode {
    fn new(lvl: u8) -> DNode {
        DNode { child: [NONE; 2], wt: [0; 2], valid: false, lvl, stubs: Vec::new() }
    }
}

struct DestTrie<'a> {
    f: &'a mut [Filter],
    skew: &'a [Skew; 33],
    nest: u32,
    corr: &'a [f64; 33],
    rng: &'a mut Rng,
    nodes: Vec<DNode>,
}

impl DestTrie<'_> {
    fn child(&mut self, node: u32, dir: usize) -> u32 {
        let c = self.nodes[node as usize].child[dir];
        if c != NONE {
            return c;
        }
        let lvl = self.nodes[node as usize].lvl + 1;
        let id = self.nodes.len() as u32;
        self.nodes.push(DNode::new(lvl));
        self.nodes[node as usize].child[dir] = id;
        id
    }

    /// First pass: destinations follow sources while the correlation holds.
    fn stub(&mut self, node: u32, addr: u32, list: Vec<u32>, cur_nest: u32) {
        let lev = u32::from(self.nodes[node as usize].lvl);
        let mut rest = Vec::with_capacity(list.len());
        let mut lev1 = false;
        for q in list {
            let f = &mut self.f[q as usize];
            if u32::from(f.dl) == lev {
                f.da = addr;
                self.nodes[node as usize].valid = true;
            } else {
                rest.push(q);
                lev1 |= u32::from(f.dl) == lev + 1;
            }
        }
        let my_nest = cur_nest + u32::from(self.nodes[node as usize].valid);
        if rest.len() > 1 && my_nest + 1 >= self.nest && lev1 && lev < 31 {
            self.nodes[node as usize].stubs.extend(rest);
            return;
        }
        if rest.is_empty() {
            return;
        }
        let addrs = child_addrs(lev, addr);
        let mut follow: [Vec<u32>; 2] = [Vec::new(), Vec::new()];
        for q in rest {
            let f = self.f[q as usize];
            if u32::from(f.sl) <= lev {
                self.nodes[node as usize].stubs.push(q);
                continue;
            }
            let bit = ((f.sa >> (31 - lev)) & 1) as usize;
            if u32::from(f.sl) != lev + 1 && self.rng.f64() <= self.corr[lev as usize + 1] {
                follow[bit].push(q);
            } else {
                let c = self.child(node, 1 - bit);
                self.nodes[c as usize].stubs.push(q);
                self.nodes[node as usize].wt[1 - bit] += 1;
            }
        }
        for (dir, list) in follow.into_iter().enumerate() {
            if !list.is_empty() {
                self.nodes[node as usize].wt[dir] += list.len();
                let c = self.child(node, dir);
                self.stub(c, addrs[dir], list, my_nest);
            }
        }
    }

    /// Second pass: complete every destination with the skew and nesting of `-dskew`/`-dnest`.
    fn finish(&mut self, node: u32, addr: u32, list: Vec<u32>, cur_nest: u32) {
        let lev = u32::from(self.nodes[node as usize].lvl);
        let stubs = std::mem::take(&mut self.nodes[node as usize].stubs);
        let mut rest = Vec::with_capacity(list.len() + stubs.len());
        let mut lev1 = false;
        for q in list.into_iter().chain(stubs) {
            let f = &mut self.f[q as usize];
            if u32::from(f.dl) == lev {
                f.da = addr;
                self.nodes[node as usize].valid = true;
            } else {
                rest.push(q);
            }
            lev1 |= u32::from(f.dl) == lev + 1;
        }
        let my_nest = cur_nest + u32::from(self.nodes[node as usize].valid);
        let n = &self.nodes[node as usize];
        let (wt, child) = (n.wt, n.child);
        if rest.is_empty() {
            if lev < 32 {
                let addrs = child_addrs(lev, addr);
                for dir in 0..2 {
                    if wt[dir] > 0 {
                        self.finish(child[dir], addrs[dir], Vec::new(), my_nest);
                    }
                }
            }
            return;
        }
        debug_assert!(lev < 32, "a rule reached depth 32 with a longer destination");
        let addrs = child_addrs(lev, addr);
        let path = match wt[0].cmp(&wt[1]) {
            std::cmp::Ordering::Greater => 0,
            std::cmp::Ordering::Less => 1,
            std::cmp::Ordering::Equal => usize::from(self.rng.f64() >= 0.5),
        };
        if rest.len() > 1 && my_nest + 1 >= self.nest && lev1 && lev < 31 {
            let (nest, other): (Vec<u32>, Vec<u32>) =
                rest.into_iter().partition(|&q| u32::from(self.f[q as usize].dl) == lev + 1);
            let (heavy, light) = if nest.len() > other.len() { (nest, other) } else { (other, nest) };
            let (ch, cl) = (self.child(node, path), self.child(node, 1 - path));
            self.nodes[node as usize].wt[path] += heavy.len();
            self.nodes[node as usize].wt[1 - path] += light.len();
            self.finish(ch, addrs[path], heavy, my_nest);
            self.finish(cl, addrs[1 - path], light, my_nest);
            return;
        }
        let s = self.skew[lev as usize];
        if self.rng.f64() < s.p1 && (child[0] == NONE || child[1] == NONE) {
            let dir = if child[0] != NONE {
                0
            } else if child[1] != NONE {
                1
            } else {
                path
            };
            let c = self.child(node, dir);
            self.finish(c, addrs[dir], rest, my_nest);
            return;
        }
        let total = rest.len() + wt[0] + wt[1];
        let thvy = (total as f64 / (2.0 - s.skew)).floor() as i64;
        let tlite = total as i64 - thvy;
        let delta_hvy = thvy - wt[path] as i64;
        let delta_lite = tlite - wt[1 - path] as i64;
        let other = 1 - path;
        if delta_lite <= 0 || delta_hvy <= 0 {
            let to = if delta_lite <= 0 { path } else { other };
            let c = self.child(node, to);
            self.finish(c, addrs[to], rest, my_nest);
            if wt[1 - to] > 0 {
                self.finish(child[1 - to], addrs[1 - to], Vec::new(), my_nest);
            }
            return;
        }
        let heavy = rest.split_off(delta_lite as usize);
        let (ch, cl) = (self.child(node, path), self.child(node, other));
        self.finish(ch, addrs[path], heavy, my_nest);
        self.finish(cl, addrs[other], rest, my_nest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seedfile;

    fn seed(name: &str) -> Option<SeedFile> {
        Some(seedfile::load(name).unwrap())
    }

    #[test]
    fn deterministic_valid_and_ordered() {
        let Some(s) = seed("acl1") else { return };
        let a = generate(&s, &Params::new(3000, 5)).unwrap();
        let b = generate(&s, &Params::new(3000, 5)).unwrap();
        let c = generate(&s, &Params::new(3000, 6)).unwrap();
        assert_eq!(a.fields, b.fields);
        assert_ne!(a.fields, c.fields);
        assert!(a.rules.len() > 2000 && a.rules.len() + a.duplicates == 3000);
        let distinct: HashSet<_> = a.fields.iter().map(|f| format!("{f:?}")).collect();
        assert_eq!(distinct.len(), a.fields.len(), "duplicates left");
        for (i, r) in a.rules.iter().enumerate() {
            assert_eq!(r.id.0 as usize, i);
            // host bits beyond the prefix are zero, as ClassBench writes them
            let f = &a.fields[i];
            assert_eq!(f.src.0 & !prefix_mask(u32::from(f.src.1), 32), 0);
        }
    }

    #[test]
    fn cdf_picks_by_weight() {
        let c = Cdf::new([0.0, 0.25, 0.0, 0.75]);
        assert_eq!(c.pick(0.0), 1);
        assert_eq!(c.pick(0.2), 1);
        assert_eq!(c.pick(0.3), 3);
        assert_eq!(c.pick(1.0), 3);
    }
}
