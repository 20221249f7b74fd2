//! Auto's candidate: the new design built beside the current one ([`Candidate::start`]: on a
//! thread of its own with the measured clock, at once with the virtual one), the journal of the
//! rule changes made meanwhile, and the readiness check at each batch boundary
//! ([`Candidate::poll`]); and the recent keys a new ORIG/CCACHE is warmed with ([`Warm`]).

use std::sync::mpsc::{channel, Receiver, TryRecvError};
use std::sync::Arc;

use hashbrown::HashSet;
use rqvs_classify::ClassifierError;
use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::design::{Design, DesignKind};

/// Builds a fixed design ([`Target`]) over rules: the caller's settings for each (replay's
/// options, the switch's).
pub type Builder = Arc<dyn Fn(Target, &[Rule]) -> Result<Box<dyn Design + Send>, ClassifierError> + Send + Sync>;

/// A design auto runs: [`DesignKind::Orig`], `Ccache` or `Cflows`, and for CFLOWS whether it
/// is TupleMerge alone (`--classifier tm`, the ablation) instead of the configured classifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    pub kind: DesignKind,
    pub tm_alone: bool,
}

impl Target {
    /// `kind` with the configured classifier.
    pub fn of(kind: DesignKind) -> Target {
        Target { kind, tm_alone: false }
    }

    /// `orig`, `ccache`, `cflows`, `cflows (tm alone)`.
    pub fn name(self) -> String {
        if self.tm_alone {
            format!("{} (tm alone)", self.kind.name())
        } else {
            self.kind.name().to_string()
        }
    }
}

/// A candidate built on the builder thread, with the megaflows it preinstalled.
type Built = Result<(Box<dyn Design + Send>, usize), ClassifierError>;

/// A rule change made while the candidate was being built, for it to apply once built.
pub(super) enum Change {
    Add(Vec<Rule>),
    Remove(Vec<RuleId>),
    /// The OpenFlow table the designs share was committed to ([`Design::table_changed`]).
    /// With the oldest version later verdicts can come from, when the caller knew it
    /// ([`Design::table_changed_at`]).
    TableChanged(Option<u64>),
}

/// Where a candidate is at a batch boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Progress {
    /// Still building, training or revalidating.
    Waiting,
    /// Built, caught up with the journal, nothing staged or pending: it may be swapped in.
    Ready,
    /// Its build failed or it refused a rule change: to be dropped.
    Failed,
}

/// A candidate design being built or waiting to be ready.
pub(super) struct Candidate {
    pub(super) target: Target,
    pub(super) reason: String,
    /// PMD time of the decision.
    pub(super) decided_ns: u64,
    pub(super) built: Option<Box<dyn Design + Send>>,
    pending: Option<Receiver<Built>>,
    pub(super) journal: Vec<Change>,
    pub(super) preinstalled: u64,
}

impl Candidate {
    /// Starts building `to` over `rules` at PMD time `now`, preinstalling the megaflows of
    /// `warm`: on a thread of its own when `background`, else at once (an error then is the
    /// build's).
    pub(super) fn start(
        builder: &Builder,
        to: Target,
        rules: Vec<Rule>,
        warm: Vec<FlowKey>,
        now: u64,
        reason: String,
        background: bool,
    ) -> Result<Candidate, ClassifierError> {
        let builder = Arc::clone(builder);
        let build = move || -> Built {
            let mut d = builder(to, &rules)?;
            // The candidate's clock is the PMD's, so what it preinstalls is not idle at once.
            d.idle_until(now);
            let n = d.preinstall(&warm);
            Ok((d, n))
        };
        let mut cand = Candidate {
            target: to,
            reason,
            decided_ns: now,
            built: None,
            pending: None,
            journal: Vec::new(),
            preinstalled: 0,
        };
        if background {
            let (tx, rx) = channel();
            std::thread::spawn(move || {
                let _ = tx.send(build());
            });
            cand.pending = Some(rx);
        } else {
            let (d, n) = build()?;
            cand.built = Some(d);
            cand.preinstalled = n as u64;
        }
        Ok(cand)
    }

    /// The candidate's progress at a batch boundary, the current design's clock at `now`: takes
    /// it from the builder thread, applies the journal, lets it maintain itself.
    pub(super) fn poll(&mut self, now: u64) -> Progress {
        if let Some(rx) = &self.pending {
            match rx.try_recv() {
                Ok(Ok((d, n))) => {
                    self.built = Some(d);
                    self.preinstalled = n as u64;
                    self.pending = None;
                }
                Ok(Err(_)) | Err(TryRecvError::Disconnected) => return Progress::Failed,
                Err(TryRecvError::Empty) => return Progress::Waiting,
            }
        }
        let Some(d) = self.built.as_mut() else { return Progress::Waiting };
        for change in std::mem::take(&mut self.journal) {
            let ok = match change {
                Change::Add(rules) => d.add_rules(rules).is_ok(),
                Change::Remove(ids) => {
                    d.remove_rules(&ids);
                    true
                }
                Change::TableChanged(known) => {
                    match known {
                        Some(k) => d.table_changed_at(k),
                        None => d.table_changed(),
                    };
                    true
                }
            };
            if !ok {
                return Progress::Failed;
            }
        }
        d.idle_until(now);
        d.maintain();
        // Training (delayed policy) and revalidation go on in the candidate's background.
        let _ = d.take_revalidations();
        if d.staged_rules().is_empty() && d.oldest_epoch() == d.visible_epoch() {
            Progress::Ready
        } else {
            Progress::Waiting
        }
    }
}

/// The last keys forwarded (one batch in four sampled), for a new ORIG/CCACHE to preinstall
/// their megaflows (module docs: a cold ORIG after CFLOWS).
pub(super) struct Warm {
    cap: usize,
    recent: Vec<FlowKey>,
    at: usize,
    batches: u64,
}

impl Warm {
    pub(super) fn new(cap: usize) -> Warm {
        Warm { cap, recent: Vec::with_capacity(cap), at: 0, batches: 0 }
    }

    /// A batch about to be forwarded.
    pub(super) fn sample(&mut self, keys: &[FlowKey]) {
        self.batches += 1;
        if self.cap == 0 || !self.batches.is_multiple_of(4) {
            return;
        }
        for k in keys {
            if self.recent.len() < self.cap {
                self.recent.push(*k);
            } else {
                self.recent[self.at] = *k;
                self.at += 1;
                if self.at == self.cap {
                    self.at = 0;
                }
            }
        }
    }

    /// The distinct recent keys (as frames carry them, with `wire_keys`).
    pub(super) fn keys(&self, wire_keys: bool) -> Vec<FlowKey> {
        let mut seen = HashSet::with_capacity(self.recent.len());
        self.recent.iter().map(|k| if wire_keys { k.wire() } else { *k }).filter(|k| seen.insert(*k)).collect()
    }
}
