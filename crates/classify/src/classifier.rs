//! The `Classifier` trait and its concurrency contract.

use std::fmt;

use rqvs_flow::key::NarrowKey;
use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::stored::HeldRule;

/// The datapath's unit of work: packets are looked up in batches of this many.
pub const BATCH: usize = 32;

/// Why an update was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClassifierError {
    /// A rule with this id is already present.
    DuplicateId(RuleId),
    /// The classifier cannot hold this rule (it says why).
    Unsupported(RuleId, String),
    /// The classifier cannot be built as configured (it says why).
    Config(String),
}

impl fmt::Display for ClassifierError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClassifierError::DuplicateId(id) => write!(f, "rule id {id} is already present"),
            ClassifierError::Unsupported(id, why) => write!(f, "rule {id}: {why}"),
            ClassifierError::Config(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for ClassifierError {}

/// A multi-field packet classifier: given a packet's [`FlowKey`], the id of the winning rule.
///
/// # Concurrency contract
/// - **Lookups** (`lookup`, `lookup_batch`, `len`, `memory_bytes`, `name`) take `&self` and may run
///   concurrently from any number of threads, provided nothing mutates the classifier meanwhile.
/// - **Modifiers** (`insert`, `remove`) take `&mut self`: the caller excludes every other call.
///   Designs that update while lookups run (CFLOWS, CCACHE) do so by building a new version and
///   swapping it in atomically, not by mutating under readers.
pub trait Classifier: Send + Sync {
    /// Short name used on the command line and in reports (`ref`, `tss`, `tm`, ...).
    fn name(&self) -> &'static str;

    /// The winning rule for `key` ([`Rule::beats`]), or `None` when no rule matches.
    fn lookup(&self, key: &FlowKey) -> Option<RuleId>;

    /// Looks up every key of `keys` into the same position of `out`.
    ///
    /// ```
    /// use rqvs_classify::{Classifier, TupleMerge, BATCH};
    /// use rqvs_flow::{formats, FlowKey, RuleId};
    ///
    /// let rules = formats::parse_rules("flows.txt", "priority=1,udp,tp_dst=53,actions=output:1\n")?;
    /// let c = TupleMerge::build(&rules)?;
    /// // A batch of BATCH (32) keys, as the datapath looks them up: every other one is DNS.
    /// let keys: Vec<FlowKey> = (0..BATCH as u16).map(|i| FlowKey::ipv4(1, 2, 17, 1000 + i, 53 + i % 2)).collect();
    /// let mut out = [None; BATCH];
    /// c.lookup_batch(&keys, &mut out);
    /// assert!(out.iter().step_by(2).all(|&r| r == Some(RuleId(0))));
    /// assert!(out.iter().skip(1).step_by(2).all(|r| r.is_none()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Panics
    /// When `out` is shorter than `keys`.
    fn lookup_batch(&self, keys: &[FlowKey], out: &mut [Option<RuleId>]) {
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = self.lookup(k);
        }
    }

    /// [`Classifier::lookup`] of a key without wide members, held as a [`NarrowKey`]: the same
    /// answer as for its [`NarrowKey::widen`]ed key. TupleMerge and NuevoMatchUP read the narrow
    /// key directly; the default widens it.
    fn lookup_narrow(&self, key: &NarrowKey) -> Option<RuleId> {
        self.lookup(&key.widen())
    }

    /// [`Classifier::lookup_batch`] of keys without wide members, held as [`NarrowKey`]s (40
    /// bytes each instead of 112): the same answers as for their [`NarrowKey::widen`]ed keys.
    /// TupleMerge and NuevoMatchUP read the narrow keys directly; the default widens them.
    ///
    /// # Panics
    /// When `out` is shorter than `keys`.
    fn lookup_batch_narrow(&self, keys: &[NarrowKey], out: &mut [Option<RuleId>]) {
        assert!(out.len() >= keys.len(), "lookup_batch_narrow: output shorter than input");
        let mut wide = [FlowKey::ZERO; BATCH];
        for (chunk, out) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            for (w, k) in wide.iter_mut().zip(chunk) {
                *w = k.widen();
            }
            self.lookup_batch(&wide[..chunk.len()], out);
        }
    }

    /// Adds a rule; refuses an id that is already present. With [`Classifier::remove`]:
    ///
    /// ```
    /// use rqvs_classify::{Classifier, TupleSpace};
    /// use rqvs_flow::{formats, FlowKey, RuleId};
    ///
    /// let mut c = TupleSpace::build(&[])?;
    /// let key = FlowKey::ipv4(0x0a00_0001, 0x0a00_0002, 6, 1234, 22);
    /// // The id (7) and priority (100) come from the caller; the line is ovs-ofctl's syntax.
    /// let ssh = formats::parse_rule_line("ssh", 1, "priority=100,tcp,tp_dst=22,actions=drop", 7, 0)?;
    /// c.insert(ssh.clone())?;
    /// assert_eq!(c.lookup(&key), Some(RuleId(7)));
    /// assert!(c.insert(ssh).is_err()); // the id is taken
    /// assert_eq!(c.remove(RuleId(7)).map(|r| r.priority), Some(100));
    /// assert_eq!(c.lookup(&key), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn insert(&mut self, rule: Rule) -> Result<(), ClassifierError>;

    /// Removes the rule with this id, returning it, or `None` when absent.
    fn remove(&mut self, id: RuleId) -> Option<Rule>;

    /// Number of rules held.
    fn len(&self) -> usize;

    /// True when no rule is held.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Classifier-specific figures for reports (subtables, tables, expansion, coverage, ...), as
    /// `(name, value)` pairs with stable names.
    fn stats(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }

    /// Heap and inline bytes used by the classifier's own structures (an estimate that counts
    /// every allocation it makes, not allocator overhead).
    fn memory_bytes(&self) -> usize;

    /// [`Classifier::memory_bytes`] by structure, as `(part, bytes)` pairs with stable names that
    /// add up to it (what `bench classifiers` reports per part: `rules`, `model`, `isets`,
    /// `tables`, `index`, `remainder.tables`, ...). The default is one part, `all`.
    fn memory_breakdown(&self) -> Vec<(String, usize)> {
        vec![("all".to_string(), self.memory_bytes())]
    }
}

/// A classifier that can serve as the *remainder* of a learned classifier: it answers "the best
/// rule that beats this one", so rules found elsewhere (in iSets) let it skip what cannot win.
pub trait Remainder: Classifier {
    /// The winner among the rules that beat `floor` (a `(priority, id)` found elsewhere, compared
    /// by the winner rule), with its priority; `None` when no rule matching `key` beats it.
    fn lookup_beating(&self, key: &FlowKey, floor: Option<(u32, RuleId)>) -> Option<(u32, RuleId)>;

    /// For every key, replaces `best[j]` by the winner among it and the rules matching
    /// `keys[j]` (`best` at least as long as `keys`): `lookup_beating` for a batch, which a
    /// remainder may run in an order that overlaps the keys' cache misses.
    fn improve_batch(&self, keys: &[FlowKey], best: &mut [Option<(u32, RuleId)>]) {
        for (k, b) in keys.iter().zip(best.iter_mut()) {
            if let Some(better) = self.lookup_beating(k, *b) {
                *b = Some(better);
            }
        }
    }

    /// The rule `id` as this remainder holds it, handed out without being made whole; `None`
    /// when it does not hold `id`. The default holds none for anyone: see
    /// [`Remainder::gives_rules_back`].
    fn held_rule(&self, _id: RuleId) -> Option<HeldRule> {
        None
    }

    /// Every rule this remainder holds, as [`Remainder::held_rule`] gives it, handed to `each`
    /// in any order (a learned classifier's snapshot for its trainer). The default hands none.
    fn held_rules(&self, _each: &mut dyn FnMut(HeldRule)) {}

    /// Whether [`Remainder::held_rule`] answers for every rule this remainder holds. A learned
    /// classifier over such a remainder keeps no stored form of its own for the rules it puts
    /// there (NuevoMatchUP over TupleMerge: about 100 bytes per remainder rule); over one that
    /// does not (the default), it keeps one for each.
    fn gives_rules_back(&self) -> bool {
        false
    }

    /// [`Remainder::lookup_beating`] of a narrow key (the default widens it).
    fn lookup_beating_narrow(&self, key: &NarrowKey, floor: Option<(u32, RuleId)>) -> Option<(u32, RuleId)> {
        self.lookup_beating(&key.widen(), floor)
    }

    /// [`Remainder::improve_batch`] of narrow keys (the default widens each).
    fn improve_batch_narrow(&self, keys: &[NarrowKey], best: &mut [Option<(u32, RuleId)>]) {
        for (k, b) in keys.iter().zip(best.iter_mut()) {
            if let Some(better) = self.lookup_beating(&k.widen(), *b) {
                *b = Some(better);
            }
        }
    }
}

/// A remainder that holds no rules and matches nothing: for a learned classifier whose caller
/// keeps the rules the iSets do not take somewhere else (CCACHE keeps them in the megaflow
/// cache). Building over rules keeps nothing; `insert` refuses, because a rule put here would
/// silently never match.
#[derive(Default, Debug)]
pub struct NoRemainder;

impl NoRemainder {
    /// Keeps none of `rules`: the caller serves them.
    pub fn build(_rules: &[Rule]) -> Result<NoRemainder, ClassifierError> {
        Ok(NoRemainder)
    }
}

impl Classifier for NoRemainder {
    fn name(&self) -> &'static str {
        "none"
    }
    fn lookup(&self, _: &FlowKey) -> Option<RuleId> {
        None
    }
    fn insert(&mut self, rule: Rule) -> Result<(), ClassifierError> {
        Err(ClassifierError::Unsupported(rule.id, "this learned classifier has no remainder".into()))
    }
    fn remove(&mut self, _: RuleId) -> Option<Rule> {
        None
    }
    fn len(&self) -> usize {
        0
    }
    fn memory_bytes(&self) -> usize {
        0
    }
}

impl Remainder for NoRemainder {
    fn lookup_beating(&self, _: &FlowKey, _: Option<(u32, RuleId)>) -> Option<(u32, RuleId)> {
        None
    }
}
