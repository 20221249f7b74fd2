//! `NuevoMatchUp`: the learned classifier of NSDI'22 (§2.2, §5) — iSets with buckets, each indexed
//! by a range index, and a remainder classifier for the rules no iSet holds.
//!
//! **Lookup.** For each iSet, the packet's value on the iSet's field is looked up in the iSet's
//! [`RangeIndex`] (which bucket's range holds it); the bucket's rules, kept in winner order, are
//! validated on every field (`crate::compact`) until the first that matches — the bucket's best —
//! or until none left can beat the best found so far. The best over all iSets is handed to the
//! remainder as a floor ([`Remainder::lookup_beating`]), so it skips every table that cannot win.
//! iSets index five fields but validate all, so rules with more fields stay exact. Before a
//! candidate is read, a pre-filter compares eight candidates at a time on the iSet's two 32-bit
//! words ([`iset::prefilter_words`]: the IPv4 addresses on 5-tuple sets, the IPv6/MAC/metadata
//! windows that tell the bucket's rules apart on wide ones); what it compares exactly the
//! candidate does not check again: a candidate is a 32-byte slot (`slot.rs`: rank, port ranges,
//! protocol, TCP flags, `dl_type`), two to a cache line, and a rule with nothing else keeps no full
//! match in the side slab.
//!
//! **Updates** (instant policy). A removed rule is taken out of its bucket; the bucket's range and
//! the index stay as they are (no retraining: a bucket may become empty and still be found). An
//! inserted rule goes into a bucket when its interval on the iSet's field lies inside that
//! bucket's range and the bucket has room ([`NuevoMatchConfig::insert_slack`]): the model and the
//! ranges stay exact, since every packet the rule matches falls in that range. Otherwise — and
//! always with `insert_slack: None`, the paper's behaviour — it goes to the remainder.
//! [`NuevoMatchUp::coverage`] is the share of live rules held by iSets. Rebuilding (retraining) is
//! the caller's decision: [`NuevoMatchUp::rebuild`].
//!
//! **Small sets.** When the iSets would cover less than the configured minimum, there are none and
//! every lookup is the remainder's alone, at the remainder's speed.
//!
//! The range index is pluggable: [`index::LearnedRanges`] (the RQ-RMI model, default) or
//! [`index::SortedRanges`] (binary search; classifier name `nmu-bs`), both exact.

mod ahead;
pub mod index;
pub mod iset;
pub mod live;
pub mod model_file;
mod rulemap;
mod slot;

use std::sync::Arc;
use std::time::{Duration, Instant};

use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::classifier::{Classifier, ClassifierError, Remainder};
use crate::compact::{Extras, Key};
use crate::prefetch::prefetch;
use crate::stored::{HeldRule, StoredRule};
use crate::TupleMerge;
use index::{LearnedRanges, RangeIndex, SortedRanges};
use iset::{Field, ISetConfig};
use rqvs_flow::key::NarrowKey;
use rulemap::{At, Kept, Location, RuleMap};
use slot::{Slot, WholeSlot};

/// Builds a range index over sorted disjoint ranges.
pub type IndexBuilder = fn(&[(u32, u32)]) -> Result<Box<dyn RangeIndex>, String>;

/// Binary search over the bucket ranges.
pub fn sorted_ranges(ranges: &[(u32, u32)]) -> Result<Box<dyn RangeIndex>, String> {
    SortedRanges::new(ranges).map(|i| Box::new(i) as Box<dyn RangeIndex>)
}

/// An RQ-RMI model over the bucket ranges (the default).
pub fn learned_ranges(ranges: &[(u32, u32)]) -> Result<Box<dyn RangeIndex>, String> {
    LearnedRanges::train(ranges).map(|i| Box::new(i) as Box<dyn RangeIndex>)
}

/// An RQ-RMI model over the bucket ranges trained with NuevoMatch's uniform sampling instead of
/// approximate sampling (`rqvs_rqrmi::Sampling::Uniform`): what approximate sampling saves
/// (Fig. 7b).
pub fn learned_ranges_uniform(ranges: &[(u32, u32)]) -> Result<Box<dyn RangeIndex>, String> {
    let cfg = rqvs_rqrmi::TrainConfig { sampling: rqvs_rqrmi::Sampling::Uniform, ..rqvs_rqrmi::TrainConfig::default() };
    LearnedRanges::train_with(ranges, &cfg).map(|i| Box::new(i) as Box<dyn RangeIndex>)
}

/// Below this many rules the standalone classifier keeps every rule in the remainder (no
/// iSets): there TupleMerge's tables stay in cache and beat the learned path. Measured with
/// `rqvs bench classifiers --classifiers tm,nmu-isets` (batches of 32, geometric means over the
/// 12 seeds): nmu-isets/tm = 0.69x at 1K, 0.74x at 10K, mixed around 30K–60K (generated acl1,
/// fw1, ipc1: 0.66–1.17x), 1.28x at 100K and 1.26x at 500K.
pub const MIN_RULES: usize = 65_536;

/// Configuration of a NuevoMatchUp classifier.
#[derive(Clone, Copy)]
pub struct NuevoMatchConfig {
    pub isets: ISetConfig,
    /// How each iSet's bucket ranges are indexed.
    pub index: IndexBuilder,
    /// Fewer rules than this: no iSets, the remainder holds everything ([`MIN_RULES`] by default;
    /// 0 always builds iSets, as the learned designs do).
    pub min_rules: usize,
    /// In-place inserts: a new rule whose interval on an iSet's field lies inside one bucket's
    /// range joins that bucket (in winner order, reusing removed rules' slots) while the bucket
    /// holds fewer than `bucket_size + slack` rules. `None`: every insert goes to the remainder
    /// (NSDI'22 §5.2). Default [`INSERT_SLACK`].
    pub insert_slack: Option<usize>,
}

/// Default [`NuevoMatchConfig::insert_slack`]: a bucket of `l` = 8 rules (the default) may grow to
/// 24 by inserts (three groups of `LANES`) before inserts into its range go to the remainder.
pub const INSERT_SLACK: usize = 16;

impl Default for NuevoMatchConfig {
    fn default() -> Self {
        NuevoMatchConfig {
            isets: ISetConfig::default(),
            index: learned_ranges,
            min_rules: MIN_RULES,
            insert_slack: Some(INSERT_SLACK),
        }
    }
}

impl NuevoMatchConfig {
    /// The default configuration, with iSets at every size.
    pub fn always_learned() -> Self {
        NuevoMatchConfig { min_rules: 0, ..Default::default() }
    }
}

/// Candidates are scanned in groups of this many (buckets are padded to a multiple of it).
const LANES: usize = 8;

/// The pre-filter of one group of [`LANES`] candidates: their values and masks on the iSet's two
/// pre-filter words ([`iset::prefilter_words`]: the IPv4 addresses on 5-tuple sets, IPv6 or MAC
/// windows on wide ones; `src` is the first word, `dst` the second), side by side (two cache
/// lines, so a group is checked with a few vector compares after one adjacent-line fetch). A slot
/// with `src_v = 1, src_m = 0` passes no key: removed rules and padding.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Group {
    src_v: [u32; LANES],
    src_m: [u32; LANES],
    dst_v: [u32; LANES],
    dst_m: [u32; LANES],
}

impl Group {
    const DEAD: Group = Group { src_v: [1; LANES], src_m: [0; LANES], dst_v: [1; LANES], dst_m: [0; LANES] };
}

/// The pre-filter of an iSet's candidates, one [`Group`] per [`LANES`] slots (an array of
/// structures of arrays; the loop below is plain Rust that the compiler vectorizes).
#[derive(Clone, Default)]
struct Prefilter {
    groups: Vec<Group>,
    len: usize,
}

impl Prefilter {
    fn push(&mut self, [sv, sm, dv, dm]: [u32; 4]) {
        let lane = self.len % LANES;
        if lane == 0 {
            self.groups.push(Group::DEAD);
        }
        let g = self.groups.last_mut().expect("pushed above");
        g.src_v[lane] = sv;
        g.src_m[lane] = sm;
        g.dst_v[lane] = dv;
        g.dst_m[lane] = dm;
        self.len += 1;
    }

    fn push_dead(&mut self) {
        self.push([1, 0, 1, 0]);
    }

    fn is_dead(&self, j: usize) -> bool {
        let g = &self.groups[j / LANES];
        g.src_m[j % LANES] == 0 && g.src_v[j % LANES] == 1
    }

    fn get(&self, j: usize) -> [u32; 4] {
        let (g, i) = (&self.groups[j / LANES], j % LANES);
        [g.src_v[i], g.src_m[i], g.dst_v[i], g.dst_m[i]]
    }

    fn set(&mut self, j: usize, [sv, sm, dv, dm]: [u32; 4]) {
        let (g, i) = (&mut self.groups[j / LANES], j % LANES);
        (g.src_v[i], g.src_m[i], g.dst_v[i], g.dst_m[i]) = (sv, sm, dv, dm);
    }

    fn kill(&mut self, j: usize) {
        let g = &mut self.groups[j / LANES];
        g.src_v[j % LANES] = 1;
        g.src_m[j % LANES] = 0;
    }

    /// Bit `i` set when slot `j + i` passes for these words (`j` a multiple of [`LANES`]).
    #[inline(always)]
    fn group(&self, j: usize, src: u32, dst: u32) -> u32 {
        let g = &self.groups[j / LANES];
        let mut bits = 0u32;
        for i in 0..LANES {
            let ok = ((src & g.src_m[i]) == g.src_v[i]) & ((dst & g.dst_m[i]) == g.dst_v[i]);
            bits |= u32::from(ok) << i;
        }
        bits
    }

    /// The group of slot `j`, to prefetch.
    #[inline(always)]
    fn group_ref(&self, j: usize) -> &Group {
        &self.groups[j / LANES]
    }

    fn memory_bytes(&self) -> usize {
        self.groups.capacity() * std::mem::size_of::<Group>()
    }
}

#[derive(Clone)]
struct ISet {
    field: Field,
    /// The two words the pre-filter compares ([`iset::prefilter_words`]).
    pf: [Field; 2],
    /// Immutable once trained (inserts go to the buckets), so shared by clones.
    index: Arc<dyn RangeIndex>,
    /// Bucket `b` is `cands[spans[b].0..spans[b].1]`, live rules in winner order among dead
    /// slots (removed rules, padding), a multiple of [`LANES`] long and starting at one. A bucket
    /// that outgrows its span by inserts moves to the end of `cands` (its old span stays dead
    /// until the iSet is laid out again: [`ISet::compact`]).
    spans: Vec<(u32, u32)>,
    cands: Vec<Slot>,
    /// Parallel to `cands`: the check made before touching a 32-byte candidate. A candidate
    /// leaves out what this checks exactly ([`slot`]), so it is valid only for a key the
    /// pre-filter passed.
    pre: Prefilter,
    live: usize,
    /// Of the live rules, those kept whole in their candidates (no stored form in the rule map):
    /// a trainer's snapshot copies an iSet's live candidates without asking the map when all of
    /// them are, and skips the iSet when none is.
    whole: usize,
}

/// A rule's winner rank as one number: smaller wins (higher priority, then lower id).
#[inline(always)]
fn rank(priority: u32, id: RuleId) -> u64 {
    (u64::from(!priority) << 32) | u64::from(id.0)
}

impl ISet {
    /// The key's two pre-filter words.
    #[inline(always)]
    fn words<K: Key>(&self, k: &K) -> (u32, u32) {
        (self.pf[0].value_of(k), self.pf[1].value_of(k))
    }

    /// Slot `j` with what gives its rule back (its pre-filter entry and words).
    fn whole_slot(&self, j: usize) -> WholeSlot {
        WholeSlot { slot: self.cands[j], entry: self.pre.get(j), pf: self.pf }
    }

    fn buckets(&self) -> usize {
        self.spans.len()
    }

    #[inline(always)]
    fn span(&self, b: usize) -> (usize, usize) {
        let (from, to) = self.spans[b];
        (from as usize, to as usize)
    }

    /// Moves bucket `b` to the end of `cands`, `len` slots long (its slots first, then dead
    /// ones); its old span stays dead. Returns the new span.
    fn relocate(&mut self, b: usize, len: usize) -> (usize, usize) {
        let (from, to) = self.span(b);
        let at = self.cands.len();
        debug_assert_eq!(at % LANES, 0);
        for j in from..to {
            let (c, e) = (self.cands[j], self.pre.get(j));
            self.cands.push(c);
            self.pre.push(e);
            self.pre.kill(j);
        }
        for _ in to - from..len {
            self.cands.push(Slot::dead());
            self.pre.push_dead();
        }
        self.spans[b] = (at as u32, (at + len) as u32);
        (at, at + len)
    }

    /// Lays the buckets' spans out again one after another in a new array, with a reserve of a
    /// quarter of them (and 64 groups) for buckets that outgrow their span: the spans that
    /// buckets moved away from are gone. Each bucket keeps its span's length (its dead slots
    /// are room for inserts). O(slots); called when the reserve is used up, so its cost per
    /// relocation is bounded (each takes at least a group of the quarter made here).
    fn compact(&mut self) {
        let spanned: usize = self.spans.iter().map(|&(from, to)| (to - from) as usize).sum();
        let capacity = spanned + spanned / 4 + 64 * LANES;
        let mut cands = Vec::with_capacity(capacity);
        let mut pre = Prefilter { groups: Vec::with_capacity(capacity.div_ceil(LANES)), len: 0 };
        for span in &mut self.spans {
            let at = cands.len();
            for j in span.0 as usize..span.1 as usize {
                cands.push(self.cands[j]);
                pre.push(self.pre.get(j));
            }
            *span = (at as u32, cands.len() as u32);
        }
        self.cands = cands;
        self.pre = pre;
    }

    /// Dead slot `d` before `p`: slots `d+1..p` move down one; returns the freed slot `p - 1`.
    fn shift_down(&mut self, d: usize, p: usize) -> usize {
        for j in d..p - 1 {
            self.cands[j] = self.cands[j + 1];
            let e = self.pre.get(j + 1);
            self.pre.set(j, e);
        }
        p - 1
    }

    /// Dead slot `e` at or after `p`: slots `p..e` move up one; returns the freed slot `p`.
    fn shift_up(&mut self, p: usize, e: usize) -> usize {
        for j in (p..e).rev() {
            self.cands[j + 1] = self.cands[j];
            let x = self.pre.get(j);
            self.pre.set(j + 1, x);
        }
        p
    }

    /// The live slot of rule `id` in bucket `b`: the slot that holds the id and is not dead (a
    /// removed rule's slot keeps its rank). The priority is not needed; a bucket's slots are a
    /// few adjacent lines, fetched together.
    fn find_id(&self, b: usize, id: RuleId) -> Option<usize> {
        let (from, to) = self.span(b);
        self.fetch(from, to);
        (from..to).find(|&j| self.cands[j].id == id && !self.pre.is_dead(j))
    }

    /// The bucket whose range holds all of `rule`'s interval on the iSet's field, if any: the
    /// only one an insert may put it in.
    fn bucket_for(&self, rule: &Rule) -> Option<usize> {
        self.bucket_named(rule, None)
    }

    /// [`ISet::bucket_for`], trying bucket `named` first: when its range holds the rule's
    /// interval it is the bucket the model would name (the ranges are disjoint), found with no
    /// inference; otherwise the model's answer.
    fn bucket_named(&self, rule: &Rule, named: Option<usize>) -> Option<usize> {
        let (lo, hi) = self.field.interval(&rule.matches)?;
        let holds = |b: usize| self.index.range(b).is_some_and(|(blo, bhi)| blo <= lo && hi <= bhi);
        if let Some(b) = named.filter(|&b| holds(b)) {
            return Some(b);
        }
        self.index.find(lo).filter(|&b| holds(b))
    }

    /// Where rank `key` goes among the slots `from..to`, sorted by their rank (a removed rule's
    /// slot keeps its priority and id, padding ranks last: [`Slot::dead`]); the slots are fetched
    /// together first, so the search waits for memory once.
    fn position(&self, from: usize, to: usize, key: u64) -> usize {
        self.fetch(from, to);
        self.cands[from..to].partition_point(|c| rank(c.priority, c.id) < key)
    }

    /// Prefetches the slots `from..to` (two to a cache line).
    fn fetch(&self, from: usize, to: usize) {
        for pair in self.cands[from..to].chunks(2) {
            prefetch(&pair[0]);
        }
    }
}

/// The stored form a [`NuevoMatchUp`] keeps of a rule (its match as a minimatch, its actions,
/// cookie and table), shared between copies of one classifier ([`NuevoMatchUp::kept_form`],
/// [`NuevoMatchUp::insert_like`]).
#[derive(Clone)]
pub struct KeptForm(Arc<StoredRule>);

/// Where a classifier placed a rule — an iSet's bucket or the remainder
/// ([`NuevoMatchUp::placement`]) — for a copy of it to place the rule alike
/// ([`NuevoMatchUp::insert_placed`]) without running the model again. A placement the copy
/// cannot take (the bucket's range does not hold the rule: another model) is looked up anew.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement(Location);

/// A rule as the classifier gives it out without making it whole: its stored form, the iSet
/// candidate that holds all of it, or what the remainder holds of it (a trainer's snapshot, a
/// removed rule).
#[derive(Clone)]
pub(crate) enum KeptRule {
    Stored(Arc<StoredRule>),
    Whole(WholeSlot),
    Held(HeldRule),
}

impl KeptRule {
    pub(crate) fn to_rule(&self) -> Rule {
        match self {
            KeptRule::Stored(r) => r.to_rule(),
            KeptRule::Whole(w) => w.to_rule(),
            KeptRule::Held(h) => h.to_rule(),
        }
    }
}

/// iSets + remainder. `R` is the remainder classifier (TupleMerge by default). A clone shares the
/// trained range indexes and copies the rest (buckets, rule map, remainder).
#[derive(Clone)]
pub struct NuevoMatchUp<R: Remainder = TupleMerge> {
    config: NuevoMatchConfig,
    isets: Vec<ISet>,
    remainder: R,
    /// Every rule, with where it lives (kept here for `remove` and `rebuild`), 16 bytes a rule;
    /// a rule its iSet candidate cannot give back whole also keeps its stored form
    /// ([`StoredRule`], behind an `Arc` so that a trainer's snapshot costs the owner a
    /// reference count). See [`rulemap`].
    rules: RuleMap,
    extras: Extras,
    build_time: Duration,
    /// Where `build_time` went.
    phases: BuildPhases,
}

/// The parts of a build: the iSet partition, training the indexes, laying out the buckets (and
/// the rule map), building the remainder.
#[derive(Clone, Copy, Debug, Default)]
struct BuildPhases {
    partition: Duration,
    train: Duration,
    layout: Duration,
    remainder: Duration,
}

impl NuevoMatchUp<TupleMerge> {
    /// Builds with the default configuration and a TupleMerge remainder.
    pub fn build(rules: &[Rule]) -> Result<Self, ClassifierError> {
        Self::build_with(rules, NuevoMatchConfig::default(), TupleMerge::build)
    }
}

impl<R: Remainder> NuevoMatchUp<R> {
    /// Builds iSets over `rules` and the remainder (with `make_remainder`) over the rest.
    pub fn build_with(
        rules: &[Rule],
        config: NuevoMatchConfig,
        make_remainder: impl Fn(&[Rule]) -> Result<R, ClassifierError>,
    ) -> Result<Self, ClassifierError> {
        let t0 = Instant::now();
        let stored = (0..rules.len()).map(|_| None).collect();
        let mut c = Self::build_from(rules, stored, config, make_remainder)?;
        c.build_time = t0.elapsed();
        Ok(c)
    }

    /// [`build_with`](Self::build_with) over rules that are already shared (a trainer's
    /// snapshot): the classifier keeps the stored ones' `Arc`s where it needs a stored rule; the
    /// whole rules are made again only for the build, on the caller's thread.
    pub(crate) fn build_shared(
        snapshot: Vec<KeptRule>,
        config: NuevoMatchConfig,
        make_remainder: impl Fn(&[Rule]) -> Result<R, ClassifierError>,
    ) -> Result<Self, ClassifierError> {
        let t0 = Instant::now();
        let rules: Vec<Rule> = snapshot.iter().map(|r| r.to_rule()).collect();
        let stored = snapshot
            .into_iter()
            .map(|r| match r {
                KeptRule::Stored(s) => Some(s),
                KeptRule::Whole(_) => None,
                KeptRule::Held(h) => h.stored().cloned(),
            })
            .collect();
        let mut c = Self::build_from(&rules, stored, config, make_remainder)?;
        c.build_time = t0.elapsed();
        Ok(c)
    }

    /// The build over `rules`; `stored` (parallel to `rules`) holds the stored forms already
    /// made, kept where one is needed (others are made then).
    fn build_from(
        rules: &[Rule],
        stored: Vec<Option<Arc<StoredRule>>>,
        config: NuevoMatchConfig,
        make_remainder: impl Fn(&[Rule]) -> Result<R, ClassifierError>,
    ) -> Result<Self, ClassifierError> {
        let t0 = Instant::now();
        let (plans, rest) = if rules.len() < config.min_rules {
            (Vec::new(), (0..rules.len()).collect())
        } else {
            iset::partition(rules, &config.isets)
        };
        let partition = t0.elapsed();
        let mut indexes = Vec::with_capacity(plans.len());
        for plan in &plans {
            let ranges: Vec<(u32, u32)> = plan.buckets.iter().map(|b| (b.lo, b.hi)).collect();
            indexes.push((config.index)(&ranges).map_err(|e| ClassifierError::Unsupported(RuleId(0), e))?);
        }
        let train = t0.elapsed() - partition;
        let mut c = Self::assemble(rules, stored, config, &plans, indexes, &rest, make_remainder)?;
        c.build_time = t0.elapsed();
        c.phases.partition = partition;
        c.phases.train = train;
        Ok(c)
    }

    /// Puts a classifier together from a partition (`plans` and `rest` index into `rules`;
    /// `stored`, parallel to `rules`, the stored forms already made, if any) and one ready index
    /// per plan — what `build_with` does after training, and what loading a saved model does
    /// instead of training. A rule whose iSet candidate gives it back whole keeps no stored form.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn assemble(
        rules: &[Rule],
        mut stored: Vec<Option<Arc<StoredRule>>>,
        config: NuevoMatchConfig,
        plans: &[iset::PlannedISet],
        indexes: Vec<Box<dyn RangeIndex>>,
        rest: &[usize],
        make_remainder: impl Fn(&[Rule]) -> Result<R, ClassifierError>,
    ) -> Result<Self, ClassifierError> {
        let t0 = Instant::now();
        if plans.len() > At::MAX_ISETS {
            let why = format!("{} iSets, more than the {} a rule's location can name", plans.len(), At::MAX_ISETS);
            return Err(ClassifierError::Unsupported(RuleId(0), why));
        }
        if let Some(p) = plans.iter().find(|p| p.buckets.len() > At::MAX_BUCKETS) {
            let why = format!(
                "an iSet of {} buckets, more than the {} a rule's location can name",
                p.buckets.len(),
                At::MAX_BUCKETS
            );
            return Err(ClassifierError::Unsupported(RuleId(0), why));
        }
        let mut located = vec![At::REMAINDER; rules.len()];
        // Rules their candidate gives back whole (no stored form kept).
        let mut whole = vec![false; rules.len()];
        let mut extras = Extras::default();
        let mut isets = Vec::with_capacity(plans.len());
        let mut order: Vec<usize> = Vec::new();
        for (s, (plan, index)) in plans.iter().zip(indexes).enumerate() {
            let mut whole_here = 0;
            let pf = iset::prefilter_words(rules, plan);
            let mut spans = Vec::with_capacity(plan.buckets.len());
            // Room for buckets that outgrow their span by inserts to move to the end (untouched
            // until used, so it costs address space, not memory).
            let slots: usize = plan.buckets.iter().map(|b| b.rules.len().next_multiple_of(LANES)).sum();
            let reserve = if config.insert_slack.is_some() { slots / 4 + 64 * LANES } else { 0 };
            let mut all: Vec<Slot> = Vec::with_capacity(slots + reserve);
            let mut pre = Prefilter { groups: Vec::with_capacity((slots + reserve).div_ceil(LANES)), len: 0 };
            for (b, pb) in plan.buckets.iter().enumerate() {
                let from = all.len() as u32;
                order.clear();
                order.extend_from_slice(&pb.rules);
                order.sort_unstable_by_key(|&i| (rank(rules[i].priority, rules[i].id), i));
                for &i in &order {
                    let r = &rules[i];
                    located[i] = At::new(Location::ISet { iset: s, bucket: b }).expect("limits checked above");
                    let (entry, cand) = Slot::new(pf, r, &mut extras);
                    whole[i] = cand.holds_whole(entry, pf, r);
                    whole_here += usize::from(whole[i]);
                    pre.push(entry);
                    all.push(cand);
                }
                let pad = (LANES - all.len() % LANES) % LANES;
                for _ in 0..pad {
                    pre.push_dead();
                    all.push(Slot::dead());
                }
                spans.push((from, all.len() as u32));
            }
            isets.push(ISet {
                field: plan.field,
                pf,
                index: index.into(),
                spans,
                cands: all,
                pre,
                live: plan.rules(),
                whole: whole_here,
            });
        }
        extras.shrink_to_fit();
        let layout = t0.elapsed();
        let rest_rules: Vec<Rule> = rest.iter().map(|&i| rules[i].clone()).collect();
        let remainder = make_remainder(&rest_rules)?;
        let remainder_time = t0.elapsed() - layout;
        // A rule keeps a stored form here unless its iSet candidate or the remainder gives it
        // back.
        let kept_there = remainder.gives_rules_back();
        let mut by_id = RuleMap::with_capacity(rules.len());
        for (i, r) in rules.iter().enumerate() {
            let given_back = whole[i] || (kept_there && located[i] == At::REMAINDER);
            let stored =
                (!given_back).then(|| stored[i].take().unwrap_or_else(|| Arc::new(StoredRule::new(r.clone()))));
            if !by_id.insert(Kept { id: r.id, at: located[i], stored }) {
                return Err(ClassifierError::DuplicateId(r.id));
            }
        }
        let layout = t0.elapsed() - remainder_time;
        let phases = BuildPhases { layout, remainder: remainder_time, ..BuildPhases::default() };
        Ok(NuevoMatchUp { config, isets, remainder, rules: by_id, extras, build_time: t0.elapsed(), phases })
    }

    /// Rebuilds iSets and remainder from the current rules (what a trainer does in the
    /// background), keeping the configuration.
    pub fn rebuild(
        &self,
        make_remainder: impl Fn(&[Rule]) -> Result<R, ClassifierError>,
    ) -> Result<Self, ClassifierError> {
        Self::build_shared(self.snapshot(), self.config, make_remainder)
    }

    /// Every live rule (any order).
    pub fn rules(&self) -> Vec<Rule> {
        self.rules.iter().map(|k| self.kept(k).to_rule()).collect()
    }

    /// The live rule with this id (made from its stored form or its candidate).
    pub fn rule(&self, id: RuleId) -> Option<Rule> {
        self.rules.get(id).map(|k| self.kept(k).to_rule())
    }

    /// Whether rule `id` is held ([`NuevoMatchUp::rule`] without making it).
    pub fn holds(&self, id: RuleId) -> bool {
        self.rules.contains(id)
    }

    /// A rule of the map: its stored form, or a copy of its candidate.
    fn kept(&self, k: &Kept) -> KeptRule {
        match (&k.stored, k.at.get()) {
            (Some(r), _) => KeptRule::Stored(Arc::clone(r)),
            (None, Location::ISet { iset, bucket }) => {
                let s = &self.isets[iset];
                let j = s.find_id(bucket, k.id).expect("a rule of the map is live in its bucket");
                KeptRule::Whole(s.whole_slot(j))
            }
            (None, Location::Remainder) => {
                KeptRule::Held(self.remainder.held_rule(k.id).expect("the remainder gives back the rules it holds"))
            }
        }
    }

    /// Every rule, shared or copied from its candidate (a trainer's snapshot: no rule is made
    /// whole, no memory allocated per rule on the caller's thread). The stored ones from the
    /// map; the remainder's from the remainder ([`Remainder::held_rules`]) when it gives them
    /// back; the others straight from the iSets' live slots, in order (an iSet whose live rules
    /// are all kept whole is copied without asking the map, one with none is skipped).
    pub(crate) fn snapshot(&self) -> Vec<KeptRule> {
        let mut out = Vec::with_capacity(self.rules.len());
        // A remainder that gives its rules back hands them all over at once; over any other,
        // the map keeps their stored forms.
        out.extend(self.rules.iter().filter_map(|k| k.stored.clone().map(KeptRule::Stored)));
        self.remainder.held_rules(&mut |h| out.push(KeptRule::Held(h)));
        for s in self.isets.iter().filter(|s| s.whole > 0) {
            let all = s.whole == s.live;
            for (j, c) in s.cands.iter().enumerate() {
                if !s.pre.is_dead(j) && (all || self.rules.get(c.id).is_some_and(|k| k.stored.is_none())) {
                    out.push(KeptRule::Whole(s.whole_slot(j)));
                }
            }
        }
        debug_assert_eq!(out.len(), self.rules.len(), "every rule once");
        out
    }

    /// Ids of the live rules the iSets hold.
    pub fn iset_ids(&self) -> Vec<RuleId> {
        self.rules.iter().filter(|k| matches!(k.at.get(), Location::ISet { .. })).map(|k| k.id).collect()
    }

    /// Share of live rules held by iSets.
    pub fn coverage(&self) -> f64 {
        let live: usize = self.isets.iter().map(|s| s.live).sum();
        if self.rules.is_empty() {
            0.0
        } else {
            live as f64 / self.rules.len() as f64
        }
    }

    /// The field each iSet indexes, in iSet order.
    pub fn iset_fields(&self) -> Vec<Field> {
        self.isets.iter().map(|s| s.field).collect()
    }

    /// The two words each iSet's pre-filter compares ([`iset::prefilter_words`]), in iSet order.
    pub fn iset_prefilters(&self) -> Vec<[Field; 2]> {
        self.isets.iter().map(|s| s.pf).collect()
    }

    /// Number of iSets.
    pub fn isets(&self) -> usize {
        self.isets.len()
    }

    /// Buckets over all iSets.
    pub fn buckets(&self) -> usize {
        self.isets.iter().map(|s| s.buckets()).sum()
    }

    /// Bytes of the iSets' indexes.
    pub fn index_bytes(&self) -> usize {
        self.isets.iter().map(|s| s.index.memory_bytes()).sum()
    }

    /// The remainder classifier.
    pub fn remainder(&self) -> &R {
        &self.remainder
    }

    /// `lookup_batch`, also returning how many keys' winners the iSets gave (the remainder had
    /// nothing better) — the datapath's "model hit" count.
    pub fn lookup_batch_counted(&self, keys: &[FlowKey], out: &mut [Option<RuleId>]) -> usize {
        self.lookup_keys_counted(keys, out)
    }

    /// [`NuevoMatchUp::lookup_batch_counted`] of narrow keys.
    pub fn lookup_batch_narrow_counted(&self, keys: &[NarrowKey], out: &mut [Option<RuleId>]) -> usize {
        self.lookup_keys_counted(keys, out)
    }

    fn lookup_keys_counted<K: Key>(&self, keys: &[K], out: &mut [Option<RuleId>]) -> usize {
        assert!(out.len() >= keys.len(), "lookup_batch: output shorter than input");
        if self.isets.is_empty() {
            K::lookup_batch(&self.remainder, keys, out); // the small-set fallback: the remainder alone
            return 0;
        }
        let mut from_isets = 0;
        for (chunk, out) in keys.chunks(crate::BATCH).zip(out.chunks_mut(crate::BATCH)) {
            let n = chunk.len();
            let mut best: [Option<(u32, RuleId)>; crate::BATCH] = [None; crate::BATCH];
            let mut values = [0u32; crate::BATCH];
            let mut buckets = [None; crate::BATCH];
            for s in &self.isets {
                for (v, k) in values.iter_mut().zip(chunk) {
                    *v = s.field.value_of(k);
                }
                s.index.find_batch(&values[..n], &mut buckets[..n]);
                // The scans' memory is fetched for every key before any scan starts: first the
                // pre-filter groups of each key's bucket, then the first candidate that passes.
                let mut spans = [(0usize, 0usize); crate::BATCH];
                for j in 0..n {
                    if let Some(b) = buckets[j] {
                        let (from, to) = s.span(b);
                        spans[j] = (from, to);
                        for g in (from..to).step_by(LANES) {
                            let g = s.pre.group_ref(g);
                            prefetch(&g.src_v);
                            prefetch(&g.dst_v);
                        }
                    }
                }
                let mut first = [0u32; crate::BATCH];
                let mut words = [(0u32, 0u32); crate::BATCH];
                for j in 0..n {
                    let (mut from, to) = spans[j];
                    words[j] = s.words(&chunk[j]);
                    while from < to {
                        let bits = s.pre.group(from, words[j].0, words[j].1);
                        if bits != 0 {
                            first[j] = bits;
                            prefetch(&s.cands[from + bits.trailing_zeros() as usize]);
                            break;
                        }
                        from += LANES;
                    }
                    spans[j].0 = from;
                }
                // Matches with fields outside the compact entry (megaflows' in_port and nw_frag)
                // keep them in the side slab: fetch those too before validating.
                if !self.extras.is_empty() {
                    for j in 0..n {
                        if first[j] != 0 {
                            self.extras.prefetch_at(s.cands[spans[j].0 + first[j].trailing_zeros() as usize].extra());
                        }
                    }
                }
                for j in 0..n {
                    let (from, to) = spans[j];
                    self.scan_span(s, from, to, first[j], words[j], &chunk[j], &mut best[j]);
                }
            }
            let from_iset = best;
            K::improve_batch(&self.remainder, chunk, &mut best[..n]);
            for j in 0..n {
                from_isets += usize::from(best[j].is_some() && best[j] == from_iset[j]);
                out[j] = best[j].map(|(_, id)| id);
            }
        }
        from_isets
    }

    /// [`Classifier::insert`] of a rule held elsewhere too (a publisher's copies of one
    /// classifier), telling where it went: `true` into an iSet's bucket, `false` into the
    /// remainder. The classifier keeps the rule in its stored form (`StoredRule`).
    pub fn insert_shared(&mut self, rule: Arc<Rule>) -> Result<bool, ClassifierError> {
        self.insert_stored(&rule, None)
    }

    /// [`Classifier::insert`] of `rule`, keeping `stored` (its stored form when the caller made
    /// one, shared: the owner of a [`live::LiveNuevoMatch`] and its trainer keep the same one)
    /// unless its iSet candidate gives the rule back whole; telling where the rule went: `true`
    /// into an iSet's bucket, `false` into the remainder.
    pub(crate) fn insert_stored(
        &mut self,
        rule: &Rule,
        stored: Option<Arc<StoredRule>>,
    ) -> Result<bool, ClassifierError> {
        self.insert_stored_at(rule, stored, None)
    }

    /// [`NuevoMatchUp::insert_stored`] placed as `named` says, when given
    /// ([`NuevoMatchUp::insert_placed`]).
    fn insert_stored_at(
        &mut self,
        rule: &Rule,
        stored: Option<Arc<StoredRule>>,
        named: Option<Location>,
    ) -> Result<bool, ClassifierError> {
        if self.rules.contains(rule.id) {
            return Err(ClassifierError::DuplicateId(rule.id));
        }
        let (at, whole) = match self.insert_into_bucket(rule, named) {
            Some(placed) => placed,
            None => {
                self.remainder.insert(rule.clone())?;
                // Kept whole here when the remainder gives it back.
                (At::REMAINDER, self.remainder.gives_rules_back())
            }
        };
        let stored = (!whole).then(|| stored.unwrap_or_else(|| Arc::new(StoredRule::new(rule.clone()))));
        let added = self.rules.insert(Kept { id: rule.id, at, stored });
        debug_assert!(added, "checked above");
        Ok(at != At::REMAINDER)
    }

    /// The stored form this classifier keeps of rule `id` (`None`: it keeps none — its slot or
    /// the remainder gives the rule back — or holds no such rule), for a copy of it to keep the
    /// same one ([`NuevoMatchUp::insert_like`]) instead of making its own.
    pub fn kept_form(&self, id: RuleId) -> Option<KeptForm> {
        self.rules.get(id).and_then(|k| k.stored.clone()).map(KeptForm)
    }

    /// Where rule `id` is ([`Placement`]).
    pub fn placement(&self, id: RuleId) -> Option<Placement> {
        self.rules.get(id).map(|k| Placement(k.at.get()))
    }

    /// [`NuevoMatchUp::insert_shared`] in a copy of a classifier that took `rule` already: keeps
    /// that one's stored form of it ([`NuevoMatchUp::kept_form`]), when it needs one, rather than
    /// making another — the two copies of a left-right pair (`rqvs_datapath`'s
    /// `CflowsPublisher`) share one. A form of another rule (another id or priority) is not
    /// kept: the rule's own is made instead.
    pub fn insert_like(&mut self, rule: &Rule, form: Option<KeptForm>) -> Result<bool, ClassifierError> {
        self.insert_placed(rule, form, None)
    }

    /// [`NuevoMatchUp::insert_like`] where the classifier it copies placed the rule
    /// ([`NuevoMatchUp::placement`]): into that bucket when its range holds the rule (the model
    /// is not run), into the remainder when that one did; the iSets before the named one are
    /// not tried (that one took the rule in none of them). Any bucket whose range holds a rule answers
    /// lookups alike, so a placement changes where a rule is kept, never an answer.
    pub fn insert_placed(
        &mut self,
        rule: &Rule,
        form: Option<KeptForm>,
        placement: Option<Placement>,
    ) -> Result<bool, ClassifierError> {
        let stored = form.map(|f| f.0).filter(|s| s.id == rule.id && s.priority == rule.priority);
        debug_assert!(
            stored.as_ref().is_none_or(|s| s.to_rule() == *rule),
            "rule {}: a form of the rule itself",
            rule.id.0
        );
        self.insert_stored_at(rule, stored, placement.map(|p| p.0))
    }

    /// [`Classifier::remove`] of a rule inserted with [`NuevoMatchUp::insert_shared`] (the same).
    pub fn remove_shared(&mut self, id: RuleId) -> Option<Rule> {
        self.remove_stored(id).map(|r| r.to_rule())
    }

    /// [`Classifier::remove`] without making the removed rule whole: whether `id` was held.
    pub fn remove_id(&mut self, id: RuleId) -> bool {
        self.remove_stored(id).is_some()
    }

    /// [`NuevoMatchUp::remove_shared`] giving back the stored form or the candidate (no whole
    /// rule made).
    pub(crate) fn remove_stored(&mut self, id: RuleId) -> Option<KeptRule> {
        let k = self.rules.remove(id)?;
        let was_whole = k.stored.is_none();
        let mut gone = k.stored.map(KeptRule::Stored);
        match k.at.get() {
            Location::Remainder => {
                if gone.is_none() {
                    gone = self.remainder.held_rule(id).map(KeptRule::Held);
                }
                self.remainder.remove(id);
            }
            Location::ISet { iset, bucket } => {
                let s = &mut self.isets[iset];
                if let Some(at) = s.find_id(bucket, id) {
                    gone = gone.or(Some(KeptRule::Whole(s.whole_slot(at))));
                    // Marked dead in place, keeping its rank (the span stays sorted): the
                    // bucket's layout and the index stay as they are.
                    s.pre.kill(at);
                    s.cands[at].release(&mut self.extras);
                    s.cands[at].kill();
                    s.live -= 1;
                    s.whole -= usize::from(was_whole);
                }
            }
        }
        Some(gone.expect("a rule kept whole is live in its bucket or given back by the remainder"))
    }

    /// Puts `rule` into the first iSet bucket whose range holds its interval on the iSet's field
    /// and that has room ([`NuevoMatchConfig::insert_slack`]); `None` when there is none.
    ///
    /// A span's slots are sorted by winner rank, dead ones included (a removed rule's slot keeps
    /// its rank; padding ranks last), so the new rule's place is a binary search away and the
    /// slots between it and the nearest dead slot shift by one. A span without a dead slot moves
    /// to the end of `cands` one group longer, into the reserve made at build time; once that is
    /// used up (or in a clone, whose arrays have none) the iSet is laid out again with a new
    /// reserve ([`ISet::compact`]: O(slots), on the thread that inserts — in the switch, the CFLOWS
    /// manager on a copy no PMD reads). Before, inserts went to the remainder once the reserve
    /// was gone: 40K of the 85K flows re-added by `nmu_churn … acl1_500k.xz 1 openflow`.
    /// Also tells whether the candidate gives the rule back whole (then no stored form is kept).
    fn insert_into_bucket(&mut self, rule: &Rule, named: Option<Location>) -> Option<(At, bool)> {
        let slack = self.config.insert_slack?;
        let most = self.config.isets.bucket_size + slack;
        for (si, s) in self.isets.iter_mut().enumerate() {
            let b = match named {
                None => s.bucket_for(rule),
                Some(Location::Remainder) => return None,
                Some(Location::ISet { iset, bucket }) if iset == si => s.bucket_named(rule, Some(bucket)),
                Some(Location::ISet { iset, .. }) if si < iset => continue,
                Some(Location::ISet { .. }) => s.bucket_for(rule),
            };
            let Some(b) = b else { continue };
            let (mut from, mut to) = s.span(b);
            let dead = (from..to).filter(|&j| s.pre.is_dead(j)).count();
            if to - from - dead >= most {
                continue;
            }
            if dead == 0 {
                let grown = to - from + LANES;
                if s.cands.len() + grown > s.cands.capacity() {
                    s.compact();
                }
                (from, to) = s.relocate(b, grown);
            }
            let key = rank(rule.priority, rule.id);
            let p = from + s.position(from, to, key);
            // The nearest dead slot: after `p` the slots `p..d` move up one, before it `d+1..p`
            // move down one; either way the order stays sorted.
            let after = (p..to).find(|&j| s.pre.is_dead(j));
            let before = (from..p).rev().find(|&j| s.pre.is_dead(j));
            let at = match (before, after) {
                (Some(d), Some(e)) if p - d <= e - p => s.shift_down(d, p),
                (Some(d), None) => s.shift_down(d, p),
                (_, Some(e)) => s.shift_up(p, e),
                (None, None) => unreachable!("a span with room has a dead slot"),
            };
            let (entry, cand) = Slot::new(s.pf, rule, &mut self.extras);
            s.cands[at] = cand;
            s.pre.set(at, entry);
            s.live += 1;
            let whole = cand.holds_whole(entry, s.pf, rule);
            s.whole += usize::from(whole);
            let at = At::new(Location::ISet { iset: si, bucket: b }).expect("assemble checked the limits");
            return Some((at, whole));
        }
        None
    }

    /// One key's lookup, of either kind.
    #[inline(always)]
    fn lookup_one<K: Key>(&self, key: &K) -> Option<RuleId> {
        if self.isets.is_empty() {
            return K::lookup(&self.remainder, key);
        }
        let best = self.search_isets(key);
        K::lookup_beating(&self.remainder, key, best).or(best).map(|(_, id)| id)
    }

    /// The best rule over the iSets for `key` (by the winner rule).
    #[inline]
    fn search_isets<K: Key>(&self, key: &K) -> Option<(u32, RuleId)> {
        let mut best: Option<(u32, RuleId)> = None;
        for s in &self.isets {
            if let Some(b) = s.index.find(s.field.value_of(key)) {
                self.scan_bucket(s, b, key, &mut best);
            }
        }
        best
    }

    /// Scans bucket `b` of iSet `s` for `key`, improving `best`.
    #[inline(always)]
    fn scan_bucket<K: Key>(&self, s: &ISet, b: usize, key: &K, best: &mut Option<(u32, RuleId)>) {
        let (from, to) = s.span(b);
        if from < to {
            // One key has no other key's misses to overlap with, and the slot its pre-filter
            // group passes would be a second miss after the group's: the first group's slots
            // (four lines; a bucket holds up to `l` = 8 rules) are asked for with the group.
            let end = to.min(from + LANES);
            for j in (from..end).step_by(64 / std::mem::size_of::<Slot>()) {
                prefetch(&s.cands[j]);
            }
            prefetch(&s.cands[end - 1]); // `cands` is 32-byte aligned: the group may cross one more line
            let words = s.words(key);
            let first = s.pre.group(from, words.0, words.1);
            self.scan_span(s, from, to, first, words, key, best);
        }
    }

    /// Scans the slots `from..to` of iSet `s` (one bucket) for `key`, improving `best`; `first`
    /// is the pre-filter's answer for the first group (unused when the span is empty), `words`
    /// the key's pre-filter words ([`ISet::words`]).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn scan_span<K: Key>(
        &self,
        s: &ISet,
        from: usize,
        to: usize,
        first: u32,
        words: (u32, u32),
        key: &K,
        best: &mut Option<(u32, RuleId)>,
    ) {
        let mut j = from;
        let mut bits = first;
        while j < to {
            while bits != 0 {
                let c = &s.cands[j + bits.trailing_zeros() as usize];
                bits &= bits - 1;
                if best.is_some_and(|(bp, bid)| !rqvs_flow::rule::beats(c.priority, c.id, bp, bid)) {
                    return; // in winner order: nothing further in the bucket beats `best`
                }
                if c.matches(key, &self.extras) {
                    *best = Some((c.priority, c.id));
                    return;
                }
            }
            j += LANES;
            if j < to {
                bits = s.pre.group(j, words.0, words.1);
            }
        }
    }
}

/// Milliseconds, two decimals.
fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e5).round() / 100.0
}

impl<R: Remainder> Classifier for NuevoMatchUp<R> {
    fn name(&self) -> &'static str {
        "nmu"
    }

    fn lookup(&self, key: &FlowKey) -> Option<RuleId> {
        self.lookup_one(key)
    }

    fn lookup_narrow(&self, key: &NarrowKey) -> Option<RuleId> {
        self.lookup_one(key)
    }

    /// Per iSet, the bucket of every key of the batch in one batched index call (the RQ-RMI
    /// model's batched inference), then the scans; then the remainder per key.
    fn lookup_batch(&self, keys: &[FlowKey], out: &mut [Option<RuleId>]) {
        self.lookup_batch_counted(keys, out);
    }

    fn lookup_batch_narrow(&self, keys: &[NarrowKey], out: &mut [Option<RuleId>]) {
        self.lookup_batch_narrow_counted(keys, out);
    }
    fn insert(&mut self, rule: Rule) -> Result<(), ClassifierError> {
        self.insert_stored(&rule, None).map(|_| ())
    }

    fn remove(&mut self, id: RuleId) -> Option<Rule> {
        self.remove_stored(id).map(|r| r.to_rule())
    }

    fn len(&self) -> usize {
        self.rules.len()
    }

    fn stats(&self) -> Vec<(&'static str, f64)> {
        let mut v = vec![
            ("isets", self.isets.len() as f64),
            ("coverage", (self.coverage() * 1e4).round() / 1e4),
            ("buckets", self.buckets() as f64),
            ("index_bytes", self.index_bytes() as f64),
            ("build_ms", ms(self.build_time)),
            ("partition_ms", ms(self.phases.partition)),
            ("train_ms", ms(self.phases.train)),
            ("layout_ms", ms(self.phases.layout)),
            ("remainder_ms", ms(self.phases.remainder)),
        ];
        for (i, s) in self.isets.iter().enumerate() {
            v.push((["iset0_field", "iset1_field", "iset2_field", "iset3_field"][i.min(3)], s.field as u8 as f64));
        }
        let bounds: Vec<(u64, f64)> = self.isets.iter().filter_map(|s| s.index.error_bound()).collect();
        if !bounds.is_empty() {
            let max = bounds.iter().map(|b| b.0).max().unwrap_or(0);
            let mean = bounds.iter().map(|b| b.1).sum::<f64>() / bounds.len() as f64;
            v.push(("max_err", max as f64));
            v.push(("mean_err", (mean * 100.0).round() / 100.0));
        }
        v
    }

    fn memory_bytes(&self) -> usize {
        self.memory_breakdown().iter().map(|(_, b)| b).sum()
    }

    fn memory_breakdown(&self) -> Vec<(String, usize)> {
        use std::mem::size_of;
        // Every rule, with where it lives, and the stored forms (for updates and rebuilds;
        // shared with a trainer).
        let rules = size_of::<Self>() + self.rules.bytes_with_stored();
        let model: usize = self.isets.iter().map(|s| s.index.memory_bytes()).sum();
        // The buckets: candidates (slots), pre-filter, spans.
        let isets: usize = self
            .isets
            .iter()
            .map(|s| s.spans.capacity() * 8 + s.pre.memory_bytes() + s.cands.capacity() * size_of::<Slot>())
            .sum();
        let mut parts = vec![
            ("rules".to_string(), rules),
            ("model".to_string(), model),
            ("isets".to_string(), isets),
            ("extras".to_string(), self.extras.memory_bytes()),
        ];
        parts.extend(self.remainder.memory_breakdown().into_iter().map(|(k, b)| (format!("remainder.{k}"), b)));
        parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{self, by_id, plain, with_varied_rest};
    use proptest::prelude::*;
    use rqvs_flow::Actions;

    fn small_buckets() -> NuevoMatchConfig {
        NuevoMatchConfig {
            isets: ISetConfig { bucket_size: 2, cluster_size: 2, max_isets: 3, min_coverage: 0.0, wide: true },
            ..NuevoMatchConfig::always_learned()
        }
    }

    /// Inserts into full buckets go on landing in buckets once the reserve is used up: in a
    /// clone (no reserve at all) every one of 1,600 new /32s between 1,600 built ones whose
    /// address lies in a bucket's range joins the iSet, which is laid out again (before, all went
    /// to the remainder), and lookups agree with the reference.
    #[test]
    fn inserts_past_the_reserve_join_their_buckets() {
        let line = |i: u32| {
            format!(
                "@10.{}.{}.{}/32\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000\t\n",
                i >> 16,
                (i >> 8) & 255,
                i & 255
            )
        };
        let text: String = (0..1600).map(|i| line(i * 2)).collect();
        let all = rqvs_flow::formats::classbench::parse_rules("t", &text).unwrap();
        let (built, added): (Vec<Rule>, Vec<Rule>) = all.iter().cloned().partition(|r| r.id.0 % 2 == 0);
        let nm = NuevoMatchUp::build_with(&built, NuevoMatchConfig::always_learned(), TupleMerge::build).unwrap();
        assert_eq!(nm.coverage(), 1.0);
        let mut nm = nm.clone();
        assert_eq!(nm.isets[0].cands.capacity(), nm.isets[0].cands.len(), "a clone has no reserve");
        let s = &nm.isets[0];
        let in_range = |r: &Rule| {
            let (lo, hi) = s.field.interval(&r.matches).unwrap();
            s.index.find(lo).and_then(|b| s.index.range(b)).is_some_and(|(blo, bhi)| blo <= lo && hi <= bhi)
        };
        let joining = added.iter().filter(|r| in_range(r)).count();
        assert!(joining > added.len() * 4 / 5, "{joining} of {} in a bucket's range", added.len());
        for r in &added {
            nm.insert(r.clone()).unwrap();
        }
        assert_eq!(nm.isets[0].live, built.len() + joining, "every insert in a bucket's range joined it");
        assert!(nm.isets[0].cands.capacity() > nm.isets[0].cands.len(), "laid out again with a reserve");
        let reference = crate::reference::Reference::build(&all).unwrap();
        for i in 0..3200u32 {
            let k = FlowKey::ipv4((10 << 24) | i, 1, 6, 1, 1);
            assert_eq!(nm.lookup(&k), reference.lookup(&k), "key {i}");
        }
    }

    /// A copy that takes the rules another took, with that one's stored forms
    /// ([`NuevoMatchUp::insert_like`]), keeps the very same forms (one allocation for both), and
    /// answers as the other; a form of another rule is not kept.
    #[test]
    fn a_copy_keeps_the_stored_forms_it_is_given() {
        let line = |i: u32| {
            format!("@10.0.{}.{}/32\t0.0.0.0/0\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0000/0x0000\t\n", i >> 8, i & 255)
        };
        let text: String = (0..800).map(|i| line(i * 2)).collect();
        let mut all = rqvs_flow::formats::classbench::parse_rules("t", &text).unwrap();
        for r in &mut all {
            // Actions a slot cannot give back: every rule keeps a stored form.
            r.actions = rqvs_flow::Actions(vec![rqvs_flow::Action::Output(r.id.0 % 7 + 1)]);
        }
        let (built, added): (Vec<Rule>, Vec<Rule>) = all.iter().cloned().partition(|r| r.id.0 % 2 == 0);
        let mut a = NuevoMatchUp::build_with(&built, NuevoMatchConfig::always_learned(), TupleMerge::build).unwrap();
        let mut b = a.clone();
        let mut in_isets = Vec::new();
        for r in &added {
            a.insert(r.clone()).unwrap();
            if b.insert_like(r, a.kept_form(r.id)).unwrap() {
                in_isets.push(r);
            }
        }
        assert!(in_isets.len() > added.len() / 2, "{} of {} into the iSets", in_isets.len(), added.len());
        for r in in_isets {
            let (fa, fb) = (a.kept_form(r.id).expect("kept"), b.kept_form(r.id).expect("kept"));
            assert!(Arc::ptr_eq(&fa.0, &fb.0), "rule {}: one form for both copies", r.id.0);
        }
        for i in 0..1600u32 {
            let k = FlowKey::ipv4((10 << 24) | i, 1, 6, 1, 80);
            assert_eq!(a.lookup(&k), b.lookup(&k), "key {i}");
        }
        // Another rule's form: the copy makes the rule's own.
        let (r, other) = (&added[0], &added[1]);
        let mut c = NuevoMatchUp::build_with(&built, NuevoMatchConfig::always_learned(), TupleMerge::build).unwrap();
        c.insert_like(r, a.kept_form(other.id)).unwrap();
        assert_eq!(c.kept_form(r.id).expect("kept").0.to_rule(), *r);
        assert_eq!(c.remove_shared(r.id).as_ref(), Some(r));
    }

    fn one_iset() -> NuevoMatchConfig {
        NuevoMatchConfig {
            isets: ISetConfig { bucket_size: 40, cluster_size: 40, max_isets: 1, min_coverage: 0.0, wide: true },
            ..NuevoMatchConfig::always_learned()
        }
    }

    /// 5-tuple rules: the pre-filter compares the IPv4 addresses, as it always did.

    #[test]
    fn five_tuple_sets_prefilter_the_ipv4_addresses() {
        let text: String = (0..300u32)
            .map(|i| {
                format!(
                    "priority={},tcp,nw_src=10.{}.{}.0/24,nw_dst=192.168.{}.0/24,tp_dst={},actions=drop\n",
                    i % 7,
                    i % 11,
                    i % 256,
                    i % 13,
                    i % 50
                )
            })
            .collect();
        let rules = rqvs_flow::formats::parse_rules("t", &text).unwrap();
        let c = NuevoMatchUp::build_with(&rules, one_iset(), TupleMerge::build).unwrap();
        assert_eq!(c.iset_prefilters(), vec![[Field::NwSrc, Field::NwDst]]);
        assert!(c.extras.is_empty());
    }

    /// IPv6 rules whose prefixes end inside the top words: the pre-filter compares both
    /// addresses' top words, and no candidate keeps a rest in the side slab (nothing is read beyond the
    /// 32-byte slot); rules with longer prefixes keep theirs. Every answer as the reference.
    #[test]
    fn ipv6_prefilter_on_the_top_words() {
        let line = |i: u32, len: u32| {
            format!(
                "priority={},tcp6,ipv6_src=2001:{:x}:{:x}::/{len},ipv6_dst=fd00:{:x}::/32,tp_dst={},actions=drop\n",
                i % 5,
                i % 37,
                i,
                i % 41,
                i % 20
            )
        };
        let short: String = (0..400u32).map(|i| line(i, 32)).collect();
        let rules = rqvs_flow::formats::parse_rules("t", &short).unwrap();
        let c = NuevoMatchUp::build_with(&rules, one_iset(), TupleMerge::build).unwrap();
        let pf = c.iset_prefilters()[0];
        assert!(pf.contains(&Field::Ipv6Src0) && pf.contains(&Field::Ipv6Dst0), "{pf:?}");
        assert!(c.coverage() > 0.5 && c.extras.is_empty(), "coverage {}", c.coverage());
        let long: String = (0..400u32).map(|i| line(i, 48)).collect();
        let long = rqvs_flow::formats::parse_rules("t", &long).unwrap();
        let c = NuevoMatchUp::build_with(&long, one_iset(), TupleMerge::build).unwrap();
        assert!(c.coverage() > 0.5 && !c.extras.is_empty());
        let reference = crate::Reference::build(&long).unwrap();
        for r in &long {
            let mut k = FlowKey::ipv6(r.matches.value().ipv6_src | 5, r.matches.value().ipv6_dst, 6, 9, 0);
            for tp in [0, 3, 19] {
                k.tp_dst = tp;
                assert_eq!(c.lookup(&k), reference.lookup(&k));
                k.ipv6_src ^= 1 << 90; // a bit of the second word, inside the /48
                assert_eq!(c.lookup(&k), reference.lookup(&k));
                k.ipv6_src ^= 1 << 90;
            }
        }
    }

    /// Plain 5-tuple `drop` rules in iSets keep no stored form (the candidate holds them
    /// whole); every rule still comes back bit for bit, through `rule`, a rebuild and `remove`.
    #[test]
    fn five_tuple_rules_are_kept_in_their_candidates() {
        let text: String = (0..300u32)
            .map(|i| {
                let act = if i % 10 == 0 { "output:3" } else { "drop" };
                format!(
                    "priority={},tcp,nw_src=10.{}.{}.0/24,nw_dst=192.168.{}.0/24,tp_dst={},actions={act}\n",
                    i % 7,
                    i % 11,
                    i % 256,
                    i % 13,
                    i % 50
                )
            })
            .collect();
        let rules = rqvs_flow::formats::parse_rules("t", &text).unwrap();
        let mut c = NuevoMatchUp::build_with(&rules, one_iset(), TupleMerge::build).unwrap();
        let whole = c.rules.iter().filter(|k| k.stored.is_none() && k.at != At::REMAINDER).count();
        let in_isets = c.iset_ids().len();
        let plain_in_isets =
            c.iset_ids().iter().filter(|id| rules.iter().any(|r| r.id == **id && r.actions == Actions::drop())).count();
        assert!(in_isets > 200, "{in_isets} rules in iSets");
        assert_eq!(whole, plain_in_isets, "every plain rule an iSet holds is kept whole, and no other");
        assert!(whole < in_isets, "the rules with an output action keep their stored form");
        assert_eq!(by_id(c.rules()), by_id(rules.clone()));
        assert_eq!(by_id(c.rebuild(TupleMerge::build).unwrap().rules()), by_id(rules.clone()));
        for r in &rules {
            assert_eq!(c.remove(r.id).as_ref(), Some(r));
        }
        assert!(c.rules.is_empty());
    }

    /// Can rule `r`, in an iSet of `c`, be given back from its slot and pre-filter entry alone? A
    /// plain rule (`testing::plain`) whose ports are ranges or prefixes and whose IPv4
    /// addresses, if it matches them, are among its iSet's pre-filter words.
    fn held_whole(c: &NuevoMatchUp, r: &Rule) -> bool {
        let Some(Location::ISet { iset, .. }) = c.rules.get(r.id).map(|k| k.at.get()) else { return false };
        let pf = c.isets[iset].pf;
        let k = r.matches.mask();
        plain(r)
            && testing::ports_as_ranges(&r.matches)
            && (k.nw_src == 0 || pf.contains(&Field::NwSrc))
            && (k.nw_dst == 0 || pf.contains(&Field::NwDst))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Every rule comes back bit for bit (`rule`, `rules`, a rebuild from the snapshot,
        /// `remove`), whether its slot holds it whole or it keeps a stored form. Fails when a rule
        /// with an action, cookie or table of its own is taken as whole, when a plain one its slot
        /// can hold (`held_whole`) keeps a stored form, or when a rule is made back wrong from its
        /// slot (checked by mutation: `Slot::holds_whole` always true; `KeptRule::to_rule` with a
        /// wrong priority).
        #[test]
        fn rules_come_back_whole(case in testing::arb_case()) {
            let rules = with_varied_rest(&case.rules);
            let mut c = NuevoMatchUp::build_with(&rules, small_buckets(), TupleMerge::build).unwrap();
            let whole = c.rules.iter().filter(|k| k.stored.is_none() && k.at != At::REMAINDER).count();
            prop_assert!(c.rules.iter().all(|k| k.at != At::REMAINDER || k.stored.is_none()), "TupleMerge gives its rules back");
            let plain_in_isets = c.iset_ids().iter().filter(|id| rules.iter().any(|r| r.id == **id && held_whole(&c, r))).count();
            prop_assert_eq!(whole, plain_in_isets, "kept whole: every plain rule in an iSet, and no other");
            prop_assert_eq!(by_id(c.rules()), by_id(rules.clone()));
            for r in &rules {
                prop_assert_eq!(c.rule(r.id), Some(r.clone()));
            }
            prop_assert_eq!(by_id(c.rebuild(TupleMerge::build).unwrap().rules()), by_id(rules.clone()));
            for r in &rules {
                prop_assert_eq!(c.remove(r.id), Some(r.clone()));
            }
            // Inserted again: into buckets (slack) or the remainder, kept whole or not.
            for r in &rules {
                c.insert(r.clone()).unwrap();
            }
            for r in &rules {
                prop_assert_eq!(c.rule(r.id), Some(r.clone()));
            }
            testing::check_all(&c, &rules, &case.keys, "re-inserted")?;
            // The snapshot after updates: each rule once (the iSets' counts of whole rules kept
            // up to date by removes and inserts).
            prop_assert_eq!(c.snapshot().len(), rules.len());
            prop_assert_eq!(by_id(c.rebuild(TupleMerge::build).unwrap().rules()), by_id(rules.clone()));
            let whole = c.rules.iter().filter(|k| k.stored.is_none() && k.at != At::REMAINDER).count();
            prop_assert_eq!(c.isets.iter().map(|s| s.whole).sum::<usize>(), whole);
            prop_assert!(c.rules.iter().all(|k| k.at != At::REMAINDER || k.stored.is_none()));
        }

        /// Over a remainder that does not give its rules back (TupleSpace), the classifier keeps
        /// the remainder rules' stored forms itself, and they come back bit for bit. Fails when
        /// a remainder rule is left without one.
        #[test]
        fn remainder_rules_come_back_from_a_remainder_that_keeps_none(case in testing::arb_case()) {
            let rules = with_varied_rest(&case.rules);
            let mut c = NuevoMatchUp::build_with(&rules, small_buckets(), crate::TupleSpace::build).unwrap();
            prop_assert!(c.rules.iter().all(|k| k.at != At::REMAINDER || k.stored.is_some()));
            prop_assert_eq!(c.snapshot().len(), rules.len());
            prop_assert_eq!(by_id(c.rules()), by_id(rules.clone()));
            prop_assert_eq!(by_id(c.rebuild(crate::TupleSpace::build).unwrap().rules()), by_id(rules.clone()));
            for r in &rules {
                prop_assert_eq!(c.remove(r.id), Some(r.clone()));
            }
            for r in &rules {
                c.insert(r.clone()).unwrap();
            }
            prop_assert!(c.rules.iter().all(|k| k.at != At::REMAINDER || k.stored.is_some()));
            for r in &rules {
                prop_assert_eq!(c.rule(r.id), Some(r.clone()));
            }
        }

        /// The remainder's batches table by table (what a remainder of 100K rules or more does)
        /// against the brute force, through updates.
        #[test]
        fn differential_table_major_remainder(case in testing::arb_case()) {
            let table_major = |rules: &[Rule]| {
                let mut t = TupleMerge::build(rules)?;
                t.set_table_major_batch_from(0);
                Ok(t)
            };
            testing::check_differential(&case, |rules| {
                Box::new(NuevoMatchUp::build_with(rules, small_buckets(), table_major).unwrap())
            })?;
        }

        /// A clone's arrays have no reserve, so its first insert into a full bucket lays the
        /// iSet out again ([`ISet::compact`]); lookups stay exact through it.
        #[test]
        fn differential_in_a_clone(case in testing::arb_case()) {
            testing::check_differential(&case, |rules| {
                Box::new(NuevoMatchUp::build_with(rules, small_buckets(), TupleMerge::build).unwrap().clone())
            })?;
        }

        #[test]
        fn differential_with_updates(case in testing::arb_case()) {
            testing::check_differential(&case, |rules| {
                Box::new(NuevoMatchUp::build_with(rules, small_buckets(), TupleMerge::build).unwrap())
            })?;
        }

        /// Prefixes of every length over the wide fields, nesting inside each 32-bit window:
        /// iSets on the windows (small buckets, so several iSets form) answer as brute force.
        #[test]
        fn differential_wide_windows(case in testing::arb_wide_prefix_case()) {
            testing::check_differential(&case, |rules| {
                Box::new(NuevoMatchUp::build_with(rules, small_buckets(), TupleMerge::build).unwrap())
            })?;
        }

        /// Rules on the IPv6 addresses alone, prefixes of every length: the pre-filter's two
        /// words hold all a rule matches outside the compact entry whenever its prefixes end
        /// inside them, and then no side-slab entry is read. Fails when the pre-filter checks less
        /// than the compact entry leaves to it (checked by mutation: clearing a whole address
        /// instead of the window in `Field::clear`, comparing one word twice).
        #[test]
        fn differential_ipv6_prefilter(case in testing::arb_ipv6_prefix_case()) {
            testing::check_differential(&case, |rules| {
                Box::new(NuevoMatchUp::build_with(rules, small_buckets(), TupleMerge::build).unwrap())
            })?;
            testing::check_differential(&case, |rules| {
                Box::new(NuevoMatchUp::build_with(rules, one_iset(), TupleMerge::build).unwrap())
            })?;
        }

        /// The default configuration on small sets: the small-set fallback (no iSets).
        #[test]
        fn differential_default_config(case in testing::arb_case()) {
            testing::check_differential(&case, |rules| Box::new(NuevoMatchUp::build(rules).unwrap()))?;
        }

        /// The default iSet parameters with iSets at every size.
        #[test]
        fn differential_always_learned(case in testing::arb_case()) {
            testing::check_differential(&case, |rules| {
                Box::new(NuevoMatchUp::build_with(rules, NuevoMatchConfig::always_learned(), TupleMerge::build).unwrap())
            })?;
        }

        /// Below `min_rules` every rule is in the remainder; at `min_rules` the iSets take them.
        #[test]
        fn min_rules_switches_isets(case in testing::arb_case()) {
            let n = case.rules.len();
            let below = NuevoMatchConfig { min_rules: n + 1, ..small_buckets() };
            let c = NuevoMatchUp::build_with(&case.rules, below, TupleMerge::build).unwrap();
            prop_assert_eq!((c.isets(), c.remainder().len()), (0, n));
            let at = NuevoMatchConfig { min_rules: n, ..small_buckets() };
            let c = NuevoMatchUp::build_with(&case.rules, at, TupleMerge::build).unwrap();
            prop_assert!(n == 0 || c.isets() > 0, "{} rules, no iSet", n);
        }

        /// The paper's inserts (`insert_slack: None`): every insert goes to the remainder.
        #[test]
        fn differential_inserts_to_the_remainder(case in testing::arb_case()) {
            let paper = NuevoMatchConfig { insert_slack: None, ..small_buckets() };
            testing::check_differential(&case, |rules| {
                Box::new(NuevoMatchUp::build_with(rules, paper, TupleMerge::build).unwrap())
            })?;
            let half = case.rules.len() / 2;
            let mut c = NuevoMatchUp::build_with(&case.rules[..half], paper, TupleMerge::build).unwrap();
            let before = c.isets.iter().map(|s| s.live).sum::<usize>();
            for r in &case.rules[half..] { c.insert(r.clone()).unwrap(); }
            prop_assert_eq!(c.isets.iter().map(|s| s.live).sum::<usize>(), before);
        }

        /// Rules taken out of an iSet and put back all find a bucket again (each lies inside the
        /// range of the bucket it came from, which now has room), whatever the slack (one iSet:
        /// with more, a rule may first fill another iSet's bucket its own owner then misses).
        /// Then duplicates fill buckets past their built size, moving full spans.
        #[test]
        fn reinserted_rules_go_back_into_buckets(case in testing::arb_case(), slack in 0usize..3, order in any::<u64>()) {
            let mut config = NuevoMatchConfig { insert_slack: Some(slack), ..small_buckets() };
            config.isets.max_isets = 1;
            let mut c = NuevoMatchUp::build_with(&case.rules, config, TupleMerge::build).unwrap();
            let covered = c.isets.iter().map(|s| s.live).sum::<usize>();
            let mut taken: Vec<Rule> = c.iset_ids().iter().map(|&id| c.remove(id).unwrap()).collect();
            let n = taken.len().max(1);
            taken.rotate_left((order as usize) % n);
            for r in taken { c.insert(r).unwrap(); }
            prop_assert_eq!(c.isets.iter().map(|s| s.live).sum::<usize>(), covered);
            testing::check_all(&c, &case.rules, &case.keys, "re-inserted")?;
            // Duplicates of every rule (new ids, same matches): with slack they fill buckets
            // past their built size, moving full spans; lookups stay exact.
            let mut all = case.rules.clone();
            for r in &case.rules {
                let dup = Rule { id: RuleId(r.id.0 + 1000), ..r.clone() };
                c.insert(dup.clone()).unwrap();
                all.push(dup);
            }
            testing::check_all(&c, &all, &case.keys, "duplicates")?;
            let grown = c.isets.iter().map(|s| s.live).sum::<usize>();
            prop_assert!(slack == 0 || covered == 0 || grown > covered, "slack {}: no duplicate joined a bucket", slack);
            for r in &case.rules { c.remove(r.id).unwrap(); }
            testing::check_all(&c, &all[case.rules.len()..], &case.keys, "originals removed")?;
        }

        #[test]
        fn rebuild_keeps_every_answer(case in testing::arb_case()) {
            let mut c = NuevoMatchUp::build_with(&case.rules, small_buckets(), TupleMerge::build).unwrap();
            let extra: Vec<Rule> = case.rules.iter().map(|r| Rule { id: RuleId(r.id.0 + 1000), ..r.clone() }).collect();
            for r in &extra { c.insert(r.clone()).unwrap(); }
            let rebuilt = c.rebuild(TupleMerge::build).unwrap();
            prop_assert_eq!(rebuilt.len(), c.len());
            for k in &case.keys {
                prop_assert_eq!(rebuilt.lookup(k), c.lookup(k));
            }
        }
    }
}
