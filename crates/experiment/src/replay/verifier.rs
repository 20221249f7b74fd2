//! Verification ([module docs](super)): [`Verifier`] records the action each sampled packet got
//! per version of the visible rule table, and after the run compares it with the reference
//! classifier of that version (or of any version in its revalidation window), built lazily
//! ([`References`]).

use rqvs_classify::Reference;
use rqvs_datapath::pmd::BatchOutcome;
use rqvs_datapath::DesignKind;
use rqvs_flow::{FlowKey, Rule};
use rqvs_ofproto::DpAction;

use super::pipeline_ref::{is_pipeline, PipelineReference};
use super::Prepared;
use crate::Error;

/// The reference of one rule-table version: the classifier of its one table, or, for rules of
/// several tables, the pipeline walk over a classifier per table ([`PipelineReference`]).
enum Built {
    Table(Reference),
    Pipeline(PipelineReference),
}

/// The reference classifier of each rule-table version, built when first needed.
struct References<'a> {
    versions: &'a [Vec<Rule>],
    built: Vec<Option<Built>>,
    design: DesignKind,
}

impl References<'_> {
    /// The reference's action for `key` under version `v`, and a second action that is right
    /// too (`auto` over a pipeline: the translation's or CFLOWS').
    fn action(&mut self, v: usize, key: &FlowKey) -> Result<(DpAction, Option<DpAction>), Error> {
        let r = match &mut self.built[v] {
            Some(r) => r,
            slot => {
                let rules = &self.versions[v];
                slot.insert(if is_pipeline(rules) {
                    Built::Pipeline(PipelineReference::build(rules)?)
                } else {
                    Built::Table(Reference::build(rules)?)
                })
            }
        };
        Ok(match r {
            Built::Table(r) => (DpAction::of_rule(r.lookup_rule(&key.wire())), None),
            Built::Pipeline(p) => p.actions(&key.wire(), self.design),
        })
    }

    /// Is `a` the action of `key` under version `v`?
    fn accepts(&mut self, v: usize, key: &FlowKey, a: DpAction) -> Result<bool, Error> {
        let (want, also) = self.action(v, key)?;
        Ok(want == a || also == Some(a))
    }

    /// Frees the references of versions before `v` (no later check needs them).
    fn drop_before(&mut self, v: usize) {
        self.built.iter_mut().take(v).for_each(|r| *r = None);
    }
}

/// Verification bookkeeping: the actions sampled packets got, per version of the visible rule
/// table, checked against the reference after the run. A sample is a slot: its position in
/// [`Prepared::samples`], whose key is kept when the packet is read.
pub(super) struct Verifier {
    pub(super) keys: Vec<FlowKey>,
    recorded: Vec<bool>,
    /// (oldest version the action may come from, version, slot, action)
    checks: Vec<(usize, usize, usize, DpAction)>,
    versions: Vec<Vec<Rule>>,
    /// The visible epoch of each version, for the oldest version a packet may see.
    version_epochs: Vec<u64>,
    /// The design run (what its right action for a pipeline is, [`PipelineReference::actions`]).
    design: DesignKind,
}

impl Verifier {
    pub(super) fn new(p: &Prepared, epoch: u64, design: DesignKind) -> Verifier {
        let slots = p.samples.len() + p.attack.as_ref().map_or(0, |a| a.samples.len());
        Verifier {
            keys: vec![FlowKey::default(); slots],
            recorded: vec![false; slots],
            checks: Vec::with_capacity(p.n_verify * (p.updates.len() + 1)),
            versions: vec![p.initial.clone()],
            version_epochs: vec![epoch],
            design,
        }
    }

    /// The versions a batch run with `oldest_epoch` pending may get actions from.
    fn window(&self, oldest_epoch: u64) -> (usize, usize) {
        let v = self.versions.len() - 1;
        (self.version_epochs.partition_point(|&e| e <= oldest_epoch).saturating_sub(1).min(v), v)
    }

    /// A fast-path action of the packet of sample `slot` (if sampled).
    fn fast_path(&mut self, (lo, v): (usize, usize), slot: Option<usize>, a: DpAction) {
        if let Some(q) = slot {
            if !self.recorded[q] && !matches!(a, DpAction::Pending | DpAction::Lost) {
                // Checked within a window: checked again once the window closes.
                self.recorded[q] = lo == v;
                self.checks.push((lo, v, q, a));
            }
        }
    }

    /// Records what one iteration of the PMD loop gave the batch whose first packet is
    /// `seq0` and whose sample slots are `slots`; `slot_of` names the slot of an upcall from an
    /// earlier batch.
    pub(super) fn batch(
        &mut self,
        o: &BatchOutcome,
        seq0: u64,
        slots: &[Option<usize>],
        slot_of: impl Fn(u64) -> Option<usize>,
    ) {
        let (lo, v) = self.window(o.window.oldest);
        for (i, a) in o.actions.iter().enumerate() {
            self.fast_path((lo, v), slots[i], *a);
        }
        for &(s, a) in o.upcalls {
            let slot = match s.checked_sub(seq0) {
                Some(i) if i < slots.len() as u64 => slots[i as usize],
                _ => slot_of(s),
            };
            self.handled(v, slot, a);
        }
    }

    /// The handler's action (classified with the current table, version `v`).
    fn handled(&mut self, v: usize, slot: Option<usize>, a: DpAction) {
        if let Some(q) = slot {
            if !self.recorded[q] {
                self.recorded[q] = true;
                self.checks.push((v, v, q, a));
            }
        }
    }

    /// The visible table changed to `table` at `epoch`.
    pub(super) fn new_version(&mut self, table: Vec<Rule>, epoch: u64) {
        self.versions.push(table);
        self.version_epochs.push(epoch);
        self.recorded.iter_mut().for_each(|r| *r = false);
    }

    /// Compares every recorded action with the reference of its version (or of any version in
    /// its window).
    pub(super) fn finish(mut self, p: &Prepared) -> Result<Checked, Error> {
        let benign = p.samples.len();
        let (mut mismatches, mut attack_mismatches, mut attack_checks) = (0usize, 0usize, 0usize);
        let mut windowed_checks = 0usize;
        let mut first_mismatch = None;
        let mut references = References {
            versions: &self.versions,
            built: (0..self.versions.len()).map(|_| None).collect(),
            design: self.design,
        };
        self.checks.sort_by_key(|c| c.1);
        // The oldest version any later check may need: references older than it are dropped (one
        // reference of a 500K-rule table is large; a run may have many versions).
        let mut need_from = vec![usize::MAX; self.checks.len() + 1];
        for i in (0..self.checks.len()).rev() {
            need_from[i] = need_from[i + 1].min(self.checks[i].0);
        }
        for (i, &(lo, v, q, a)) in self.checks.iter().enumerate() {
            references.drop_before(need_from[i]);
            attack_checks += usize::from(q >= benign);
            let key = &self.keys[q];
            if references.accepts(v, key, a)? {
                continue;
            }
            let want = references.action(v, key)?.0;
            let mut older = false;
            for w in lo..v {
                older |= references.accepts(w, key, a)?;
            }
            if older {
                windowed_checks += 1;
            } else {
                mismatches += 1;
                let packet = match (q.checked_sub(benign), &p.attack) {
                    (Some(i), Some(att)) => {
                        attack_mismatches += 1;
                        format!("attack packet {}", att.samples[i])
                    }
                    _ => format!("packet {}", p.samples[q]),
                };
                first_mismatch.get_or_insert(format!("{packet}: datapath {a:?}, reference {want:?}"));
            }
        }
        Ok(Checked {
            checks: self.checks.len(),
            mismatches,
            windowed_checks,
            first_mismatch,
            attack_checks,
            attack_mismatches,
        })
    }
}

/// What [`Verifier::finish`] found.
pub(super) struct Checked {
    pub(super) checks: usize,
    /// Of every stream (the attack's included).
    pub(super) mismatches: usize,
    pub(super) windowed_checks: usize,
    pub(super) first_mismatch: Option<String>,
    pub(super) attack_checks: usize,
    pub(super) attack_mismatches: usize,
}
