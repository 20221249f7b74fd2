//! **CCACHE** (NSDI'22 §4.1): a learned model over the *megaflows*, between the EMC and the
//! megaflow cache — EMC → NuevoMatchUP over megaflows → megaflow cache (the remainder) → upcall.
//!
//! - **Where megaflows live.** Upcalls install new megaflows in the megaflow cache as in ORIG.
//!   Periodically ([`CcacheConfig::train_interval_ns`] of PMD time, when the megaflows added to
//!   the megaflow cache since the last model exceed [`CcacheConfig::retrain_threshold`] of all) a snapshot of every live
//!   megaflow goes to a trainer thread, which builds NuevoMatchUP over them (each megaflow a rule:
//!   id = its slot, one priority — megaflows never disagree on a packet's action, so any match is
//!   the right one). When the model is ready, [`MegaflowModel::poll`] swaps it in between
//!   batches: the megaflows its iSets hold are **detached** from the megaflow cache's subtables
//!   ([`Dpcls::detach`]; they stay installed, with their handle, stats, expiry and revalidation),
//!   and megaflows the previous model held but this one does not are attached back. The model's
//!   remainder is empty ([`NoRemainder`]): the megaflow cache is the remainder.
//! - **Deletions** (idle expiry, flow limit, revalidation after rule changes) delete megaflows
//!   from the megaflow cache as in ORIG; [`MegaflowModel::sync`] then marks them dead in the
//!   model (no retraining). The datapath calls it right after every deletion pass, so the model
//!   never returns a deleted megaflow.
//! - **Snapshot and swap.** Taking the snapshot stands for the manager thread reading the
//!   megaflow table (OVS would do it under RCU on another core): not PMD time. The swap — detach
//!   and attach — is PMD time. Under the virtual clock the datapath waits for a started training
//!   at once, so runs are a pure function of their inputs.
//! - **Trainer.** Each training session runs on a thread of its own, or, given one
//!   ([`MegaflowModel::set_trainer`]), on a trainer thread shared by every PMD's model
//!   ([`rqvs_ofproto::trainer`], what the switch does).

use hashbrown::HashMap;
use std::sync::mpsc::{channel, Receiver};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rqvs_classify::nuevomatch::{NuevoMatchConfig, NuevoMatchUp};
use rqvs_classify::{Classifier, NoRemainder};
use rqvs_flow::{Actions, Match, Rule, RuleId};

use crate::batch_key::BatchKey;
use crate::counters::Counters;
use crate::design::{CcacheReport, DesignReport, OrigReport};
use crate::dpcls::{Dpcls, MegaflowRef};
use crate::orig::ModelStage;
use rqvs_ofproto::trainer::{Job, TrainerHandle};

/// CCACHE settings.
#[derive(Clone, Copy, Debug)]
pub struct CcacheConfig {
    /// How often (PMD clock) the manager considers training.
    pub train_interval_ns: u64,
    /// Train when the megaflows installed in the megaflow cache since the last model exceed this
    /// share of all megaflows (those the iSets would not take stay there and do not count).
    pub retrain_threshold: f64,
    /// Do not train over fewer megaflows than this.
    pub min_megaflows: usize,
}

impl Default for CcacheConfig {
    fn default() -> Self {
        CcacheConfig { train_interval_ns: 10_000_000, retrain_threshold: 0.1, min_megaflows: 64 }
    }
}

type Model = NuevoMatchUp<NoRemainder>;

/// The model never takes inserts (new megaflows go to the megaflow cache until the next model), so
/// it reserves no room for them.
fn model_config() -> NuevoMatchConfig {
    NuevoMatchConfig { insert_slack: None, ..NuevoMatchConfig::always_learned() }
}

struct Training {
    done: Receiver<(Model, Duration)>,
    /// The session's own thread; `None` when a shared trainer runs it.
    worker: Option<JoinHandle<()>>,
    /// Generation of each snapshotted megaflow's slot.
    gens: HashMap<u32, u32>,
}

/// The learned model over megaflows and its trainer (module docs).
pub struct MegaflowModel {
    cfg: CcacheConfig,
    model: Option<Model>,
    /// Slot → generation of each live megaflow the model holds.
    held: HashMap<u32, u32>,
    training: Option<Training>,
    /// The trainer thread shared with other PMDs ([`rqvs_ofproto::trainer`]); `None`: a thread per session.
    trainer: Option<TrainerHandle>,
    next_train_ns: u64,
    pub swaps: u64,
    pub last_train: Duration,
    /// Megaflows left in the megaflow cache right after the last swap.
    base_outside: usize,
}

impl MegaflowModel {
    pub fn new(cfg: CcacheConfig) -> MegaflowModel {
        MegaflowModel {
            cfg,
            model: None,
            held: HashMap::new(),
            training: None,
            trainer: None,
            next_train_ns: cfg.train_interval_ns,
            swaps: 0,
            last_train: Duration::ZERO,
            base_outside: 0,
        }
    }

    /// Megaflows the model serves now.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// True while a model is being trained.
    pub fn training(&self) -> bool {
        self.training.is_some()
    }

    /// For each key, the live megaflow the model holds that covers it. Returns the number found.
    #[inline]
    pub fn lookup_batch<K: BatchKey>(&self, keys: &[K], out: &mut [Option<MegaflowRef>]) -> usize {
        let Some(m) = &self.model else { return 0 };
        let mut ids = [None; crate::BATCH];
        let n = keys.len();
        K::lookup_batch(m, keys, &mut ids[..n]);
        let mut found = 0;
        for (o, id) in out.iter_mut().zip(&ids[..n]) {
            *o = id.and_then(|id| self.held.get(&id.0).map(|&gen| MegaflowRef { slot: id.0, gen }));
            found += usize::from(o.is_some());
        }
        found
    }

    /// Marks megaflows the megaflow cache deleted as dead in the model.
    pub fn sync(&mut self, dpcls: &Dpcls) {
        let Some(m) = &mut self.model else { return };
        self.held.retain(|&slot, &mut gen| {
            let live = dpcls.get(MegaflowRef { slot, gen }).is_some();
            if !live {
                m.remove(RuleId(slot));
            }
            live
        });
    }

    /// Starts training when due; swaps a trained model in when ready. Returns true on a swap.
    pub fn poll(&mut self, dpcls: &mut Dpcls, now_ns: u64) -> bool {
        let mut swapped = false;
        if let Some(t) = &self.training {
            if let Ok((model, took)) = t.done.try_recv() {
                let t = self.training.take().expect("checked");
                if let Some(w) = t.worker {
                    let _ = w.join();
                }
                self.swap(model, &t.gens, dpcls);
                self.last_train = took;
                self.swaps += 1;
                swapped = true;
            }
        }
        if self.training.is_none() && now_ns >= self.next_train_ns {
            self.next_train_ns = now_ns + self.cfg.train_interval_ns;
            let total = dpcls.len();
            let grown = (total - self.held.len()).saturating_sub(self.base_outside);
            if total >= self.cfg.min_megaflows && grown as f64 > self.cfg.retrain_threshold * total as f64 {
                self.start_training(dpcls);
            }
        }
        swapped
    }

    /// Waits for the running training (if any) and swaps it in (tests, end of runs).
    pub fn finish(&mut self, dpcls: &mut Dpcls) {
        if let Some(t) = self.training.take() {
            if let Ok((model, took)) = t.done.recv() {
                if let Some(w) = t.worker {
                    let _ = w.join();
                }
                self.swap(model, &t.gens, dpcls);
                self.last_train = took;
                self.swaps += 1;
            }
        }
    }

    /// Starts training now over every live megaflow, regardless of the schedule (tests).
    pub fn train_now(&mut self, dpcls: &Dpcls) {
        if self.training.is_none() {
            self.start_training(dpcls);
        }
    }

    fn start_training(&mut self, dpcls: &Dpcls) {
        let mut gens = HashMap::with_capacity(dpcls.len());
        let mut rules = Vec::with_capacity(dpcls.len());
        for f in dpcls.megaflow_refs() {
            let e = dpcls.get(f).expect("listed flow is live");
            gens.insert(f.slot, f.gen);
            let m = Match::from_masked(e.megaflow.value, e.megaflow.mask);
            rules.push(Rule::new(f.slot, 0, m, Actions::drop()));
        }
        let (tx, rx) = channel();
        let job: Job = Box::new(move || {
            let t0 = Instant::now();
            if let Ok(m) = NuevoMatchUp::build_with(&rules, model_config(), NoRemainder::build) {
                let _ = tx.send((m, t0.elapsed()));
            }
        });
        // On the shared trainer, or (none given, or it is gone) on a thread of its own.
        let job = match &self.trainer {
            Some(t) => t.submit(job).err(),
            None => Some(job),
        };
        let worker = job.map(std::thread::spawn);
        self.training = Some(Training { done: rx, worker, gens });
    }

    /// Trains on `t` (a trainer thread shared with other PMDs) instead of a thread per session.
    pub fn set_trainer(&mut self, t: TrainerHandle) {
        self.trainer = Some(t);
    }

    /// Installs `model`: its iSet megaflows that are still live are detached from the megaflow
    /// cache, the previous model's that it does not hold are attached back.
    fn swap(&mut self, mut model: Model, gens: &HashMap<u32, u32>, dpcls: &mut Dpcls) {
        let mut held = HashMap::with_capacity(model.len());
        for id in model.iset_ids() {
            let f = MegaflowRef { slot: id.0, gen: gens[&id.0] };
            if dpcls.get(f).is_some() {
                held.insert(id.0, f.gen);
            }
        }
        // Everything else leaves the model's bookkeeping (dead ones, and the rules the iSets
        // did not take, which the megaflow cache keeps serving).
        for (&slot, _) in gens.iter().filter(|(s, _)| !held.contains_key(*s)) {
            model.remove(RuleId(slot));
        }
        // Detach first: the subtables the new model empties are gone before megaflows are
        // attached back (under a mask limit, room for them).
        for (&slot, &gen) in &held {
            dpcls.detach(MegaflowRef { slot, gen });
        }
        for (&slot, &gen) in &self.held {
            if !held.contains_key(&slot) {
                dpcls.attach(MegaflowRef { slot, gen });
            }
        }
        self.held = held;
        self.base_outside = dpcls.len() - self.held.len();
        if let Some(old) = self.model.replace(model) {
            std::thread::spawn(move || drop(old)); // freeing it is not the PMD's work
        }
    }
}

impl ModelStage for MegaflowModel {
    const NAME: &'static str = "ccache";
    const PRESENT: bool = true;
    #[inline]
    fn lookup_batch<K: BatchKey>(&self, keys: &[K], out: &mut [Option<MegaflowRef>]) -> usize {
        MegaflowModel::lookup_batch(self, keys, out)
    }
    fn sync(&mut self, dpcls: &Dpcls) {
        MegaflowModel::sync(self, dpcls)
    }
    fn poll(&mut self, dpcls: &mut Dpcls, now_ns: u64) -> bool {
        MegaflowModel::poll(self, dpcls, now_ns)
    }
    fn finish(&mut self, dpcls: &mut Dpcls) {
        MegaflowModel::finish(self, dpcls)
    }
    fn train_now(&mut self, dpcls: &mut Dpcls) {
        MegaflowModel::finish(self, dpcls);
        MegaflowModel::train_now(self, dpcls);
        MegaflowModel::finish(self, dpcls);
    }
    fn gauges(&self, c: &mut Counters) {
        c.model_entries = self.len() as u64;
        c.model_swaps = self.swaps;
    }
    fn report(&self, dpcls: &Dpcls, orig: OrigReport) -> DesignReport {
        let total = dpcls.len().max(1) as f64;
        DesignReport::Ccache(
            orig,
            CcacheReport {
                coverage: self.len() as f64 / total,
                model_megaflows: self.len() as u64,
                model_swaps: self.swaps,
                last_training_ms: self.last_train.as_secs_f64() * 1e3,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{expect, keys, rules};
    use crate::{Ccache, Clock, DatapathConfig, Design, OrigConfig};

    fn ccache() -> Ccache {
        let cfg = DatapathConfig {
            emc: false,
            clock: Clock::Virtual { packet_ns: 100, upcall_ns: 1000 },
            ..DatapathConfig::default()
        };
        let cc = CcacheConfig { train_interval_ns: u64::MAX, ..CcacheConfig::default() };
        Ccache::new(&rules(1000)[..800], cfg, OrigConfig::default(), cc).unwrap()
    }

    #[test]
    fn learned_megaflows_leave_the_cache_and_answers_stay_exact() {
        let all = rules(1000);
        let initial = &all[..800];
        let mut dp = ccache();
        let ks = keys(6000, 0);
        assert_eq!(dp.run_keys(&ks), expect(initial, &ks));
        let (megaflows, masks) = (dp.counters().megaflows, dp.counters().masks);
        dp.train_model_now();
        let c = dp.counters();
        assert_eq!(c.megaflows, megaflows, "detached megaflows stay installed");
        assert!(c.model_entries > megaflows / 2, "{c:?}");
        assert!(c.masks < masks, "learned megaflows leave the subtables: {} -> {}", masks, c.masks);
        let ks2 = keys(6000, 7);
        assert_eq!(dp.run_keys(&ks2), expect(initial, &ks2));
        let c = dp.counters();
        assert!(c.model_hit > 0 && c.outcome_sum_ok(), "{c:?}");

        // Rule changes: revalidation deletes megaflows, the model forgets them, answers follow.
        Design::add_rules(&mut dp, all[800..].to_vec()).unwrap();
        assert_eq!(dp.run_keys(&ks), expect(&all, &ks));
        let victims: Vec<RuleId> = all.iter().step_by(4).map(|r| r.id).collect();
        Design::remove_rules(&mut dp, &victims);
        let left: Vec<Rule> = all.iter().filter(|r| !victims.contains(&r.id)).cloned().collect();
        assert_eq!(dp.run_keys(&ks2), expect(&left, &ks2));
        // Retrain over the new megaflow set (previous model's megaflows re-attached or kept).
        dp.train_model_now();
        assert_eq!(dp.run_keys(&ks), expect(&left, &ks));
        assert!(dp.counters().outcome_sum_ok());
    }

    #[test]
    fn two_models_train_on_one_shared_trainer_and_stay_exact() {
        let trainer = rqvs_ofproto::trainer::spawn_trainer().unwrap();
        let initial = &rules(1000)[..800];
        let mut pmds = [ccache(), ccache()];
        for (i, dp) in pmds.iter_mut().enumerate() {
            dp.set_trainer(trainer.clone());
            let ks = keys(4000, i as u32);
            assert_eq!(dp.run_keys(&ks), expect(initial, &ks));
        }
        // The first model queues behind a job the trainer is busy with: it is trained there.
        let (release, blocked) = std::sync::mpsc::channel::<()>();
        assert!(trainer.submit(Box::new(move || blocked.recv().unwrap_or_default())).is_ok());
        let [mut first, mut second] = pmds;
        let waiting = std::thread::spawn(move || {
            first.train_model_now();
            (first, Instant::now())
        });
        std::thread::sleep(Duration::from_secs(2));
        let released = Instant::now();
        release.send(()).unwrap();
        let (first, trained) = waiting.join().unwrap();
        assert!(trained >= released, "trained on the shared trainer, after its other job");
        second.train_model_now();
        let mut pmds = [first, second];
        for (i, dp) in pmds.iter_mut().enumerate() {
            let c = dp.counters();
            assert!(c.model_entries > c.megaflows / 2, "PMD {i}: {c:?}");
            let ks = keys(4000, 10 + i as u32);
            assert_eq!(dp.run_keys(&ks), expect(initial, &ks));
            assert!(dp.counters().model_hit > 0);
        }
    }

    #[test]
    fn idle_expiry_removes_megaflows_from_the_model() {
        let mut dp = ccache();
        let ks = keys(3000, 0);
        dp.run_keys(&ks);
        dp.train_model_now();
        assert!(dp.counters().model_entries > 0);
        dp.advance_clock(20_000_000_000);
        dp.sweep_now();
        let c = dp.counters();
        assert_eq!((c.megaflows, c.model_entries), (0, 0), "{c:?}");
        assert_eq!(dp.run_keys(&ks), expect(&rules(1000)[..800], &ks));
    }
}
