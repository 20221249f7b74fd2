//! `LiveNuevoMatch`: NuevoMatchUP under updates, with a background trainer (NSDI'22 §5, §6.1).
//!
//! One thread owns the classifier and does lookups and updates (the datapath thread); a trainer
//! thread builds new models. They never wait for each other:
//!
//! - **remove**: the rule is marked dead where it is (iSet bucket or remainder); no retraining.
//! - **insert**, *instant* policy: into the remainder at once (visible to the next lookup);
//!   *delayed* policy: staged, invisible until the next model is swapped in.
//! - **training**: when the rules inserted into the remainder since the last model exceed
//!   `threshold` of all rules (or, delayed, when rules are staged), [`LiveNuevoMatch::poll`] hands
//!   a snapshot of the rules to the trainer thread and logs every update made after it. The
//!   trainer, once its model is built, **catches up** with the log itself (taking chunks of
//!   [`CATCH_UP_CHUNK`] from its front under a lock the owner holds only to append; inserted
//!   rules are shared, not copied): instant, it applies the updates to its model; delayed, it
//!   applies the removals and stages the inserts in a map it hands over with the model. So the
//!   owner replays, and frees, just the few updates logged after the trainer's last look. `poll`
//!   then swaps the model in — between two batches, so a lookup never sees a half-built model and the owner never
//!   waits for training (`poll` only ever `try_recv`s). The old model is dropped on another
//!   thread (freeing 500K rules takes milliseconds the datapath should not pay): by the next
//!   session's trainer before it builds when one starts at once, so that two cores never carry
//!   three busy threads, else by a thread of its own.
//!
//! Coverage is reported at all times ([`LiveNuevoMatch::coverage`]).
//!
//! `LiveNuevoMatch` is `Send + Sync`: lookups (`&self`) may run on other threads than the
//! owner's when something excludes them from its updates (`&mut self`), e.g. a reader-writer
//! lock, as the C library's live handle does.
//!
//! ```
//! use rqvs_classify::nuevomatch::live::{LiveNuevoMatch, Policy};
//! use rqvs_flow::{formats, FlowKey, RuleId};
//!
//! // 2,000 rules on disjoint destination /24s: one iSet covers them all.
//! let text: String = (0..2000u32)
//!     .map(|i| format!("priority=1,ip,nw_dst=10.{}.{}.0/24,actions=output:1\n", i / 256, i % 256))
//!     .collect();
//! let rules = formats::parse_rules("flows.txt", &text)?;
//! let mut live = LiveNuevoMatch::new(&rules, Policy::Delayed, 0.1)?;
//! assert!(live.coverage() > 0.99);
//! let key = FlowKey::ipv4(1, 0x0a00_0105, 6, 1, 2); // 10.0.1.5
//! assert_eq!(live.lookup(&key), Some(RuleId(1)));
//!
//! // Delayed: an inserted rule is staged, invisible until the next model is swapped in.
//! let host = formats::parse_rule_line("new", 1, "priority=9,ip,nw_dst=10.0.1.5,actions=drop", 5000, 0)?;
//! live.insert(host)?;
//! assert_eq!(live.lookup(&key), Some(RuleId(1)));
//! live.poll(); // hands the rules to the trainer thread; never blocks
//! live.finish_training(); // (waits, for the example's sake)
//! assert_eq!(live.lookup(&key), Some(RuleId(5000)));
//! assert!(live.remove(RuleId(5000)));
//! assert_eq!(live.lookup(&key), Some(RuleId(1)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rqvs_flow::{FlowKey, Rule, RuleId};

use super::{KeptRule, NuevoMatchConfig, NuevoMatchUp};
use crate::classifier::{Classifier, ClassifierError};
use crate::stored::StoredRule;
use crate::TupleMerge;

/// When inserted rules become visible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Into the remainder at once.
    Instant,
    /// Staged until the next model.
    Delayed,
}

impl Policy {
    /// The policy as command lines and reports spell it.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Instant => "instant",
            Policy::Delayed => "delayed",
        }
    }

    /// The policy called `name` ([`Policy::name`]).
    pub fn from_name(name: &str) -> Option<Policy> {
        [Policy::Instant, Policy::Delayed].into_iter().find(|p| p.name() == name)
    }
}

/// One logged update. Inserts are shared with the owner's model (no copy of the rule).
enum Update {
    Insert(Arc<StoredRule>),
    Remove(RuleId),
}

/// Log entries the trainer takes per lock acquisition while catching up.
pub const CATCH_UP_CHUNK: usize = 1024;

/// Applies a logged update to a new model (and, under the delayed policy, to the rules staged
/// since its snapshot) — what the trainer does while catching up and the owner for the tail.
fn apply(policy: Policy, model: &mut NuevoMatchUp, staged: &mut HashMap<RuleId, Arc<StoredRule>>, u: Update) {
    match (policy, u) {
        (Policy::Instant, Update::Insert(r)) => {
            let _ = model.insert_stored(&r.to_rule(), Some(r));
        }
        (Policy::Instant, Update::Remove(id)) => {
            model.remove_stored(id);
        }
        (Policy::Delayed, Update::Insert(r)) => {
            staged.insert(r.id, r);
        }
        (Policy::Delayed, Update::Remove(id)) => {
            if model.remove_stored(id).is_none() {
                staged.remove(&id);
            }
        }
    }
}

/// One finished training session.
#[derive(Clone, Copy, Debug)]
pub struct Session {
    /// Rules trained on.
    pub rules: usize,
    /// Time the trainer spent building.
    pub train: Duration,
    /// From snapshot to swap (train + waiting for the owner's `poll`).
    pub latency: Duration,
    /// Updates made during training: applied by the trainer (caught up), and replayed by the
    /// owner at the swap.
    pub caught_up: usize,
    pub replayed: usize,
    /// The owner's time in `poll` swapping this model in (the replay included): a pause of its
    /// lookups.
    pub swap: Duration,
    /// The owner's time starting this session (taking the snapshot).
    pub start: Duration,
}

/// What the trainer hands over.
struct Trained {
    model: NuevoMatchUp,
    /// Time spent building.
    train: Duration,
    /// Log entries it already applied.
    caught_up: usize,
    /// The remainder's size as built (before those entries).
    built_remainder: usize,
    /// Delayed policy: the rules those entries staged.
    staged: HashMap<RuleId, Arc<StoredRule>>,
}

struct Training {
    started: Instant,
    /// The owner's time taking the snapshot.
    start: Duration,
    /// Behind a mutex only so that `LiveNuevoMatch` is `Sync` (lookups from other threads, behind
    /// a reader-writer lock); only the owner's `poll` takes it.
    done: Mutex<Receiver<Trained>>,
    worker: JoinHandle<()>,
    rules: usize,
}

/// NuevoMatchUP with online updates and a background trainer.
pub struct LiveNuevoMatch {
    current: NuevoMatchUp,
    policy: Policy,
    threshold: f64,
    config: NuevoMatchConfig,
    /// Delayed policy: inserted rules not yet in any model.
    staged: HashMap<RuleId, Arc<StoredRule>>,
    /// Updates since the snapshot the running training started from.
    /// The trainer takes entries from the front as it applies them; what is left at the swap
    /// is the owner's to replay.
    log: Arc<Mutex<VecDeque<Update>>>,
    training: Option<Training>,
    sessions: Vec<Session>,
    /// Remainder size of the current model as trained (before any insert since).
    base_remainder: usize,
    /// Training sessions whose build failed, and when to try again after one.
    pub failed_sessions: usize,
    retry_at: Option<Instant>,
    /// Instant inserts made so far: into an iSet's bucket, into the remainder.
    placed: (u64, u64),
}

impl LiveNuevoMatch {
    /// Builds the first model synchronously. `threshold`: training starts when the rules
    /// inserted into the remainder since the last model exceed this share of all rules (paper: 0.1).
    pub fn new(rules: &[Rule], policy: Policy, threshold: f64) -> Result<LiveNuevoMatch, ClassifierError> {
        // iSets at every size: the learned designs measure the learned path (the standalone
        // classifier's small-set fallback, `NuevoMatchConfig::min_rules`, is not used here).
        Self::with_config(rules, policy, threshold, NuevoMatchConfig::always_learned())
    }

    /// TupleMerge alone behind the live interface: no iSets (`min_rules` = `usize::MAX`), every
    /// rule in the remainder, updates applied to it at once, never a training session — the
    /// ablation of the learned index (`--design cflows --classifier tm`). The instant policy
    /// only: with no model to wait for, a delayed insert would never become visible.
    pub fn tuplemerge_only(rules: &[Rule]) -> Result<LiveNuevoMatch, ClassifierError> {
        let config = NuevoMatchConfig { min_rules: usize::MAX, ..NuevoMatchConfig::always_learned() };
        Self::with_config(rules, Policy::Instant, 0.1, config)
    }

    /// [`LiveNuevoMatch::new`] with a configuration of its own (every model it trains uses it).
    pub fn with_config(
        rules: &[Rule],
        policy: Policy,
        threshold: f64,
        config: NuevoMatchConfig,
    ) -> Result<LiveNuevoMatch, ClassifierError> {
        let current = NuevoMatchUp::build_with(rules, config, TupleMerge::build)?;
        Ok(Self::from_model(current, policy, threshold, config))
    }

    /// Starts from a model built elsewhere (one loaded with [`NuevoMatchUp::from_model_bytes`]:
    /// no training); every model it trains later uses `config`.
    pub fn from_model(
        current: NuevoMatchUp,
        policy: Policy,
        threshold: f64,
        config: NuevoMatchConfig,
    ) -> LiveNuevoMatch {
        LiveNuevoMatch {
            base_remainder: current.remainder().len(),
            failed_sessions: 0,
            retry_at: None,
            placed: (0, 0),
            current,
            policy,
            threshold,
            config,
            staged: HashMap::new(),
            log: Arc::new(Mutex::new(VecDeque::new())),
            training: None,
            sessions: Vec::new(),
        }
    }

    /// The model lookups use now.
    pub fn current(&self) -> &NuevoMatchUp {
        &self.current
    }

    /// Puts `model` in place of the model lookups use, and gives that one back — for an owner
    /// that keeps the rules in two copies (a left-right publisher, `rqvs_datapath`'s
    /// `CflowsPublisher`): it hands the current model out to be read, and puts its twin back in
    /// once the twin has caught up. Nothing else changes (policy, staged rules, the training
    /// log and sessions), so `model` must hold exactly the rules the current one does before
    /// any other call is made — in particular before [`LiveNuevoMatch::poll`], whose training
    /// snapshot is taken from it. In between, the owner may put a placeholder in (an empty
    /// model) that it calls nothing on.
    pub fn replace_current(&mut self, model: NuevoMatchUp) -> NuevoMatchUp {
        std::mem::replace(&mut self.current, model)
    }

    pub fn lookup(&self, key: &FlowKey) -> Option<RuleId> {
        self.current.lookup(key)
    }

    pub fn lookup_batch(&self, keys: &[FlowKey], out: &mut [Option<RuleId>]) {
        self.current.lookup_batch(keys, out)
    }

    /// `lookup_batch`, returning how many winners the iSets gave ([`NuevoMatchUp::lookup_batch_counted`]).
    pub fn lookup_batch_counted(&self, keys: &[FlowKey], out: &mut [Option<RuleId>]) -> usize {
        self.current.lookup_batch_counted(keys, out)
    }

    /// The rule with this id, visible or staged.
    pub fn rule(&self, id: RuleId) -> Option<Rule> {
        self.staged.get(&id).map(|r| r.to_rule()).or_else(|| self.current.rule(id))
    }

    /// Whether rule `id` is held, staged or in the current model ([`LiveNuevoMatch::rule`]
    /// without making it).
    pub fn holds(&self, id: RuleId) -> bool {
        self.staged.contains_key(&id) || self.current.holds(id)
    }

    /// The policy inserted rules follow.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Share of all rules (staged included) that iSets serve.
    pub fn coverage(&self) -> f64 {
        coverage_of(&self.current, self.staged.len())
    }

    /// Rules in the remainder now.
    pub fn remainder_rules(&self) -> usize {
        self.current.remainder().len()
    }

    /// Instant inserts so far that went into an iSet's bucket, and into the remainder
    /// ([`super::NuevoMatchConfig::insert_slack`]).
    pub fn insert_counts(&self) -> (u64, u64) {
        self.placed
    }

    /// Rules staged (delayed policy).
    pub fn staged(&self) -> usize {
        self.staged.len()
    }

    /// Finished training sessions.
    pub fn sessions(&self) -> &[Session] {
        &self.sessions
    }

    /// True while a model is being trained.
    pub fn training(&self) -> bool {
        self.training.is_some()
    }

    /// Adds a rule by the policy.
    pub fn insert(&mut self, rule: Rule) -> Result<(), ClassifierError> {
        self.insert_stored(&rule)
    }

    /// [`LiveNuevoMatch::insert`] of a rule held elsewhere too (a publisher's copies of the
    /// classifier); the classifier keeps it in its stored form, or in its iSet candidate alone.
    pub fn insert_shared(&mut self, rule: Arc<Rule>) -> Result<(), ClassifierError> {
        self.insert_stored(&rule)
    }

    /// [`LiveNuevoMatch::insert`]. The stored form is made only when something must keep it:
    /// the staging (delayed policy) or the log of a running training, shared with the model.
    fn insert_stored(&mut self, rule: &Rule) -> Result<(), ClassifierError> {
        let logged = self.training.is_some();
        let stored = (logged || self.policy == Policy::Delayed).then(|| Arc::new(StoredRule::new(rule.clone())));
        match self.policy {
            Policy::Instant => {
                let into_iset = self.current.insert_stored(rule, stored.clone())?;
                if into_iset {
                    self.placed.0 += 1;
                } else {
                    self.placed.1 += 1;
                }
            }
            Policy::Delayed => {
                if self.current.rules.contains(rule.id) || self.staged.contains_key(&rule.id) {
                    return Err(ClassifierError::DuplicateId(rule.id));
                }
                self.staged.insert(rule.id, Arc::clone(stored.as_ref().expect("made for the delayed policy")));
            }
        }
        // Logged once accepted: the trainer's model gets exactly the owner's updates.
        if let (true, Some(stored)) = (logged, stored) {
            self.log.lock().expect("log lock").push_back(Update::Insert(stored));
        }
        Ok(())
    }

    /// Removes a rule wherever it is (model or staging); `false` when absent.
    pub fn remove(&mut self, id: RuleId) -> bool {
        let found = self.staged.remove(&id).is_some() || self.current.remove_stored(id).is_some();
        if found && self.training.is_some() {
            self.log.lock().expect("log lock").push_back(Update::Remove(id));
        }
        found
    }

    /// Swaps in a trained model if one is ready, and starts training if needed. Never blocks.
    pub fn poll(&mut self) {
        let mut retired = None;
        if let Some(t) = &self.training {
            let result = t.done.lock().expect("done lock").try_recv();
            if let Err(std::sync::mpsc::TryRecvError::Disconnected) = result {
                // The build failed (it should not on rules the current model holds): keep the
                // current model, which has every update, and retry after a pause.
                let t = self.training.take().expect("checked");
                let _ = t.worker.join();
                self.log.lock().expect("log lock").clear();
                self.failed_sessions += 1;
                self.retry_at = Some(Instant::now() + Duration::from_secs(1));
            } else if let Ok(Trained { mut model, train, caught_up, built_remainder, mut staged }) = result {
                let swap_start = Instant::now();
                let t = self.training.take().expect("checked");
                let _ = t.worker.join(); // it has sent its result: it is finishing
                self.base_remainder = built_remainder;
                // What the trainer did not take: the updates since its last look at the log.
                let log = std::mem::take(&mut *self.log.lock().expect("log lock"));
                let replayed = log.len();
                for u in log {
                    apply(self.policy, &mut model, &mut staged, u);
                }
                // Delayed: the snapshot included the rules staged then; those staged since stay.
                self.staged = staged;
                retired = Some(std::mem::replace(&mut self.current, model));
                self.sessions.push(Session {
                    rules: t.rules,
                    train,
                    latency: t.started.elapsed(),
                    caught_up,
                    replayed,
                    swap: swap_start.elapsed(),
                    start: t.start,
                });
            }
        }
        let waiting = self.retry_at.is_some_and(|t| Instant::now() < t);
        if self.training.is_none() && !waiting && self.needs_training() {
            self.start_training(retired);
        } else if let Some(old) = retired {
            // Freeing a model of 500K rules takes milliseconds the datapath should not pay.
            std::thread::spawn(move || drop(old));
        }
    }

    /// Staged rules wait for a model; otherwise train when the rules inserted into the remainder
    /// since the last training exceed `threshold` of all rules. (Not on the remainder's share
    /// alone: rules the iSets cannot take stay in the remainder after any training, and
    /// retraining would not move them.)
    fn needs_training(&self) -> bool {
        if self.config.min_rules == usize::MAX {
            return false; // a configuration that never builds iSets: nothing to train
        }
        let total = self.current.len() + self.staged.len();
        let grown = self.current.remainder().len().saturating_sub(self.base_remainder);
        total > 0 && (!self.staged.is_empty() || grown as f64 > self.threshold * total as f64)
    }

    /// Starts a session; the trainer first frees `retired` (the model just swapped out), so the
    /// two cores are not shared by three busy threads.
    fn start_training(&mut self, retired: Option<NuevoMatchUp>) {
        let t_start = Instant::now();
        // Shared, not copied: the trainer copies the rules on its own thread.
        let mut snapshot: Vec<KeptRule> = self.current.snapshot();
        snapshot.extend(self.staged.values().cloned().map(KeptRule::Stored));
        let rules = snapshot.len();
        let config = self.config;
        // Before the trainer can read it: the log holds exactly the updates after the snapshot.
        self.log.lock().expect("log lock").clear();
        let (tx, rx) = channel();
        let (log, policy) = (Arc::clone(&self.log), self.policy);
        let worker = std::thread::spawn(move || {
            drop(retired);
            let t0 = Instant::now();
            let Ok(mut model) = NuevoMatchUp::build_shared(snapshot, config, TupleMerge::build) else { return };
            let train = t0.elapsed();
            let built_remainder = model.remainder().len();
            let (mut applied, mut staged) = (0, HashMap::new());
            loop {
                let chunk: Vec<Update> = {
                    let mut log = log.lock().expect("log lock");
                    let n = log.len().min(CATCH_UP_CHUNK);
                    log.drain(..n).collect()
                };
                if chunk.is_empty() {
                    break;
                }
                applied += chunk.len();
                for u in chunk {
                    apply(policy, &mut model, &mut staged, u);
                }
            }
            let _ = tx.send(Trained { model, train, caught_up: applied, built_remainder, staged });
        });
        self.training =
            Some(Training { started: Instant::now(), start: t_start.elapsed(), done: Mutex::new(rx), worker, rules });
    }

    /// Ids of the staged rules (delayed policy).
    pub fn staged_ids(&self) -> Vec<RuleId> {
        self.staged.keys().copied().collect()
    }

    /// Waits until the training running now (if any) has been swapped in. `poll` may start the
    /// next session right after; that one is not waited for.
    pub fn finish_training(&mut self) {
        let done = self.sessions.len();
        while self.training.is_some() && self.sessions.len() == done {
            std::thread::sleep(Duration::from_millis(1));
            self.poll();
        }
    }
}

/// The share of rules the iSets of `current` serve when `staged` more rules wait outside it
/// (staged rules are in no iSet): [`LiveNuevoMatch::coverage`], also for a classifier published
/// apart from its live handle.
pub fn coverage_of(current: &NuevoMatchUp, staged: usize) -> f64 {
    let total = current.len() + staged;
    if total == 0 {
        0.0
    } else {
        current.coverage() * current.len() as f64 / total as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    #[test]
    fn live_is_send_and_sync() {
        fn both<T: Send + Sync>() {}
        both::<LiveNuevoMatch>();
    }
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(60))]
        /// Interleaved inserts, removes, polls and swaps: lookups always equal the brute force over
        /// the live rules that are not staged; with the delayed policy, staged rules become visible
        /// once training has caught up.
        #[test]
        fn lookups_follow_the_visible_rules(case in testing::arb_case(), ops in prop::collection::vec(0u8..4, 1..80),
                                            delayed: bool, threshold in 0.0f64..0.5) {
            let policy = if delayed { Policy::Delayed } else { Policy::Instant };
            let half = case.rules.len() / 2;
            let mut live = LiveNuevoMatch::new(&case.rules[..half], policy, threshold).unwrap();
            let mut all: Vec<Rule> = case.rules[..half].to_vec();
            let mut pool: Vec<Rule> = case.rules[half..].to_vec();
            let check = |live: &LiveNuevoMatch, all: &[Rule], step: usize| -> Result<(), TestCaseError> {
                let staged = live.staged_ids();
                prop_assert!(delayed || staged.is_empty());
                let visible: Vec<Rule> = all.iter().filter(|r| !staged.contains(&r.id)).cloned().collect();
                for k in &case.keys {
                    prop_assert_eq!(live.lookup(k), testing::brute(&visible, k), "step {}", step);
                }
                Ok(())
            };
            for (step, op) in ops.into_iter().enumerate() {
                match op {
                    0 | 1 if !pool.is_empty() => {
                        let r = pool.remove(step % pool.len());
                        live.insert(r.clone()).unwrap();
                        all.push(r);
                    }
                    2 if !all.is_empty() => {
                        let r = all.remove(step % all.len());
                        prop_assert!(live.remove(r.id));
                        prop_assert!(!live.remove(r.id));
                        pool.push(r);
                    }
                    _ => {
                        live.finish_training();
                        live.poll();
                    }
                }
                check(&live, &all, step)?;
            }
            // With no more updates, two rounds of training make every staged rule visible.
            for _ in 0..2 {
                live.poll();
                live.finish_training();
            }
            prop_assert_eq!(live.staged(), 0);
            check(&live, &all, usize::MAX)?;
        }
    }
}
