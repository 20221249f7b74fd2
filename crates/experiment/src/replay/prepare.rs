//! [`prepare`]: everything a run needs, loaded and checked once for all the designs of a
//! comparison — the rules, the trace counted, the rules held out for `add:` updates, the
//! verification sample's positions, the attack of a mixed replay ([`Prepared`]).

use std::collections::HashSet;
use std::path::Path;

use rqvs_classify::nuevomatch::live::Policy;
use rqvs_datapath::{assign_rule_outputs, CflowsClassifier};
use rqvs_flow::formats::{self, RuleFormat};
use rqvs_flow::rng::Rng;
use rqvs_flow::Rule;

use super::feed::{Trace, HOLD_BYTES};
use super::updates::{parse_updates, Update, UpdateOp};
use super::{ReplayConfig, STREAM_ATTACK_VERIFY, STREAM_HELD_OUT, STREAM_VERIFY};
use crate::{inputs, Error};

/// Rules from a ClassBench file (with `output:(id+1)` actions) or an ofctl file; the embedded
/// ClassBench set without one.
fn load_rules(path: Option<&Path>) -> Result<(Vec<Rule>, &'static str), Error> {
    let Some(path) = path else {
        let mut rules = inputs::load_rules(None)?;
        assign_rule_outputs(&mut rules);
        return Ok((rules, "classbench"));
    };
    let text = rqvs_flow::io::read_text(path)?;
    let name = path.display().to_string();
    match formats::sniff_rule_format(&text) {
        RuleFormat::Ofctl => Ok((formats::ofctl::parse_flows(&name, &text)?, "ofctl")),
        RuleFormat::ClassBench => {
            let mut rules = formats::classbench::parse_rules(&name, &text)?;
            assign_rule_outputs(&mut rules);
            Ok((rules, "classbench"))
        }
    }
}

/// Everything a run needs, loaded once (shared by the designs `rqvs compare` runs). The trace is
/// not held (unless short): [`Prepared::trace`] reads it again for every pass and design.
pub struct Prepared {
    pub all_rules: Vec<Rule>,
    pub rules_format: &'static str,
    /// The packets, pass after pass.
    pub trace: Trace,
    /// Packets in one pass over the trace.
    pub packets: u64,
    /// How the capture's frames were counted, for a capture.
    pub capture: Option<rqvs_flow::formats::pcap::CaptureStats>,
    pub(super) updates: Vec<Update>,
    pub initial: Vec<Rule>,
    /// Sampled trace positions, ascending.
    pub(super) samples: Vec<u64>,
    pub n_verify: usize,
    /// The attack interleaved with the trace ([`crate::mixed`]).
    pub attack: Option<AttackTrace>,
}

/// The attack of a mixed replay, loaded once ([`prepare`]).
pub struct AttackTrace {
    pub trace: Trace,
    /// Packets in one pass over the attack file.
    pub packets: u64,
    /// Packets per second of PMD time.
    pub rate: f64,
    /// Sampled positions of the attack file, ascending (verified like the trace's).
    pub(super) samples: Vec<u64>,
}

/// `n` of `len` positions sampled from `rng`, ascending (memory: `n`, not `len`).
fn sample_positions(len: u64, n: usize, rng: &mut Rng) -> Vec<u64> {
    let n = (n as u64).min(len);
    if n == len {
        return (0..len).collect();
    }
    rng.sample_sorted_u64(len, n)
}

/// Loads and checks everything a run needs (once for all the designs of a comparison).
pub fn prepare(c: &ReplayConfig) -> Result<Prepared, Error> {
    if !(0.0..=1.0).contains(&c.emc_prob) {
        return Err(Error(format!("--emc-prob: expected a probability 0..1, found '{}'", c.emc_prob)));
    }
    super::designs::emc_entries(c)?;
    if !(0.0..=1.0).contains(&c.retrain_threshold) {
        return Err(Error(format!("--retrain-threshold: expected a share 0..1, found '{}'", c.retrain_threshold)));
    }
    if c.classifier == CflowsClassifier::TupleMerge && c.policy == Policy::Delayed {
        return Err(Error(
            "--classifier tm: TupleMerge alone has no model for the delayed policy to wait for (use --policy instant)"
                .into(),
        ));
    }
    if c.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
        return Err(Error(format!("--rate: expected packets per second > 0, found '{}'", c.rate.unwrap_or(0.0))));
    }
    if c.rx_ring == 0 {
        return Err(Error("--rx-ring: expected at least 1 packet".into()));
    }
    if c.passes == 0 {
        return Err(Error("--passes: expected at least 1".into()));
    }
    if !(c.train_interval > 0.0 && c.train_interval.is_finite()) {
        return Err(Error(format!("--train-interval: expected seconds > 0, found '{}'", c.train_interval)));
    }
    let (all_rules, rules_format) = load_rules(c.rules.as_deref())?;
    let counted = inputs::PacketSource::count(c.trace.as_deref(), c.in_port, HOLD_BYTES)?;
    let (trace, packets, capture) = (Trace { source: counted.source, share: None }, counted.packets, counted.capture);
    if packets == 0 {
        return Err(Error(format!("{}: no packets", c.trace_name())));
    }
    let mut updates = match &c.updates {
        Some(s) => parse_updates(s)?,
        None => Vec::new(),
    };
    let mut order: Vec<usize> = (0..all_rules.len()).collect();
    Rng::fork(c.seed, STREAM_HELD_OUT).shuffle(&mut order);
    let mut held: HashSet<usize> = HashSet::new();
    let mut next = 0;
    for u in updates.iter_mut().filter(|u| u.op == UpdateOp::Add) {
        if next + u.n > order.len() {
            return Err(Error(format!("--updates: cannot hold out {} more rules of {}", u.n, all_rules.len())));
        }
        for &i in &order[next..next + u.n] {
            held.insert(i);
            u.rules.push(all_rules[i].clone());
        }
        next += u.n;
    }
    let initial: Vec<Rule> =
        all_rules.iter().enumerate().filter(|(i, _)| !held.contains(i)).map(|(_, r)| r.clone()).collect();
    // The table along the schedule: a deletion of more rules than it holds then is an error,
    // not a report of rules deleted that never were.
    let mut size = initial.len();
    for u in &updates {
        match u.op {
            UpdateOp::Add => size += u.n,
            UpdateOp::Del if u.n > size => {
                return Err(Error(format!(
                    "--updates: 'del:{}@{}s' deletes {} rules, but the table holds {size} then ({} rules, {} held out for later adds)",
                    u.n,
                    u.at_ns as f64 / 1e9,
                    u.n,
                    all_rules.len(),
                    all_rules.len() - initial.len()
                )))
            }
            UpdateOp::Del => size -= u.n,
        }
    }
    let wanted = c.verify.unwrap_or(if all_rules.len() > 100_000 { 2_000 } else { 10_000 });
    let samples = sample_positions(packets, wanted, &mut Rng::fork(c.seed, STREAM_VERIFY));
    let attack = prepare_attack(c, wanted)?;
    Ok(Prepared {
        all_rules,
        rules_format,
        trace,
        packets,
        capture,
        updates,
        initial,
        n_verify: samples.len(),
        samples,
        attack,
    })
}

/// The attack of a mixed replay (`attack`, `attack_rate`: both or neither), its packets
/// counted and `wanted` of its positions sampled for verification.
fn prepare_attack(c: &ReplayConfig, wanted: usize) -> Result<Option<AttackTrace>, Error> {
    let (path, rate) = match (&c.attack, c.attack_rate) {
        (None, None) if c.attack_policing.is_some() => {
            return Err(Error("--attack-policing: polices an attack's queue; expected --attack FILE".into()))
        }
        (None, None) => return Ok(None),
        (Some(path), Some(rate)) => (path, rate),
        (Some(_), None) => return Err(Error("--attack: expected --attack-rate PPS too".into())),
        (None, Some(_)) => return Err(Error("--attack-rate: the rate of an attack; expected --attack FILE".into())),
    };
    if !(rate > 0.0 && rate.is_finite()) {
        return Err(Error(format!("--attack-rate: expected packets per second > 0, found '{rate}'")));
    }
    if c.pmds > 1 {
        return Err(Error("--attack: mixed replay runs on one PMD; --pmds is not used with it".into()));
    }
    let counted = inputs::PacketSource::count(Some(path), c.in_port, HOLD_BYTES)?;
    if counted.packets == 0 {
        return Err(Error(format!("{}: no packets", path.display())));
    }
    let samples = sample_positions(counted.packets, wanted, &mut Rng::fork(c.seed, STREAM_ATTACK_VERIFY));
    Ok(Some(AttackTrace {
        trace: Trace { source: counted.source, share: None },
        packets: counted.packets,
        rate,
        samples,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rules held out for `add:` and the packets verified are a function of the seed alone,
    /// pinned (the rules `del:` removes come from the third stream, checked through the CLI's
    /// determinism test).
    #[test]
    fn held_out_rules_and_verified_packets_are_pinned() {
        let c = ReplayConfig { updates: Some("add:4@1s".into()), verify: Some(5), seed: 5, ..ReplayConfig::default() };
        let p = prepare(&c).unwrap();
        let held: Vec<u32> = p.updates[0].rules.iter().map(|r| r.id.0).collect();
        let verified: Vec<u64> = p.samples.clone();
        assert_eq!((held.as_slice(), verified.as_slice()), (&PIN_HELD[..], &PIN_VERIFIED[..]));
        let other = prepare(&ReplayConfig { seed: 6, ..c }).unwrap();
        assert_ne!(other.updates[0].rules.iter().map(|r| r.id.0).collect::<Vec<_>>(), held);
    }
    const PIN_HELD: [u32; 4] = [768, 241, 633, 881];
    const PIN_VERIFIED: [u64; 5] = [959, 1401, 1404, 2778, 2800];
}
