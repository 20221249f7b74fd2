//! Timed rule updates ([`ReplayConfig::updates`](super::ReplayConfig::updates), e.g.
//! `add:60@7s,del:10@9s`): the schedule parsed ([`parse_updates`]), and [`Updates`], which
//! applies it on the PMD clock during a run and keeps the update log (with the revalidator
//! thread's latency and deletions filled in when they arrive).

use std::collections::HashSet;

use rqvs_datapath::Design;
use rqvs_flow::rng::Rng;
use rqvs_flow::{Rule, RuleId};

use crate::Error;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum UpdateOp {
    Add,
    Del,
}

#[derive(Clone, Debug)]
pub(super) struct Update {
    pub(super) op: UpdateOp,
    pub(super) n: usize,
    pub(super) at_ns: u64,
    pub(super) rules: Vec<Rule>,
}

/// Parses `add:60@7s,del:10@9.5s` (seconds; `ms` also accepted).
pub(super) fn parse_updates(spec: &str) -> Result<Vec<Update>, Error> {
    let mut out = Vec::new();
    for (i, part) in spec.split(',').enumerate() {
        let err = |what: &str| Error(format!("--updates: item {} '{part}': expected {what} (e.g. 'add:60@7s')", i + 1));
        let (op, rest) = part.split_once(':').ok_or_else(|| err("OP:N@TIME"))?;
        let op = match op.trim() {
            "add" => UpdateOp::Add,
            "del" => UpdateOp::Del,
            _ => return Err(err("operation 'add' or 'del'")),
        };
        let (n, t) = rest.split_once('@').ok_or_else(|| err("N@TIME"))?;
        let n: usize = n.trim().parse().map_err(|_| err("a rule count"))?;
        let t = t.trim();
        let secs: f64 = if let Some(ms) = t.strip_suffix("ms") {
            ms.parse::<f64>().map_err(|_| err("a time like 7s or 500ms"))? / 1e3
        } else {
            t.strip_suffix('s').unwrap_or(t).parse().map_err(|_| err("a time like 7s or 500ms"))?
        };
        if !(secs >= 0.0 && secs.is_finite()) {
            return Err(err("a non-negative time"));
        }
        out.push(Update { op, n, at_ns: (secs * 1e9) as u64, rules: Vec::new() });
    }
    out.sort_by_key(|u| u.at_ns);
    Ok(out)
}

/// The timed rule updates of a run and their log.
pub(super) struct Updates<'a> {
    pub(super) pending: std::iter::Peekable<std::slice::Iter<'a, Update>>,
    /// The rule table as the updates leave it (visible or staged).
    pub(super) table: Vec<Rule>,
    pub(super) rng: Rng,
    pub(super) log: Vec<serde_json::Value>,
    /// Updates not yet visible: (index in `log`, call time, rule ids added).
    pub(super) waiting: Vec<(usize, std::time::Instant, Vec<RuleId>)>,
    /// Time spent in the update calls.
    pub(super) call_ms: f64,
    pub(super) wall: std::time::Instant,
}

impl Updates<'_> {
    /// The run ended at PMD time `end_ns`: every update still pending goes into the log as not
    /// reached. Returns how many.
    pub(super) fn not_reached(&mut self, end_ns: u64) -> usize {
        let mut n = 0;
        for u in self.pending.by_ref() {
            n += 1;
            self.log.push(serde_json::json!({
                "op": if u.op == UpdateOp::Add { "add" } else { "del" },
                "rules": u.n, "at_s": u.at_ns as f64 / 1e9, "reached": false,
                "run_ended_s": end_ns as f64 / 1e9,
            }));
        }
        n
    }

    /// Applies every update due at PMD time `now`.
    pub(super) fn apply_due(&mut self, dp: &mut dyn Design, now: u64) -> Result<(), Error> {
        while let Some(u) = self.pending.next_if(|u| u.at_ns <= now) {
            let t = std::time::Instant::now();
            let deleted = match u.op {
                UpdateOp::Add => {
                    self.table.extend(u.rules.iter().cloned());
                    dp.add_rules(u.rules.clone())?
                }
                UpdateOp::Del => {
                    let mut ids: Vec<RuleId> = self.table.iter().map(|r| r.id).collect();
                    self.rng.shuffle(&mut ids);
                    ids.truncate(u.n);
                    let gone: HashSet<RuleId> = ids.iter().copied().collect();
                    self.table.retain(|r| !gone.contains(&r.id));
                    dp.remove_rules(&ids)
                }
            };
            let ms = t.elapsed().as_secs_f64() * 1e3;
            self.call_ms += ms;
            let threaded = dp.oldest_epoch() != dp.visible_epoch();
            self.log.push(serde_json::json!({
                "op": if u.op == UpdateOp::Add { "add" } else { "del" },
                "rules": u.n, "at_s": now as f64 / 1e9, "reached": true, "megaflows_deleted": deleted, "update_ms": ms,
                "visible_ms": serde_json::Value::Null,
                // Revalidator thread: deletions and their latency arrive later (filled in then).
                "epoch": dp.visible_epoch(),
                "called_ms": (t - self.wall).as_secs_f64() * 1e3,
                "revalidated_ms": if threaded { serde_json::Value::Null } else { serde_json::json!(ms) },
            }));
            if u.op == UpdateOp::Add {
                self.waiting.push((self.log.len() - 1, t, u.rules.iter().map(|r| r.id).collect()));
            } else {
                // Removals take effect in the call, in every design.
                self.log.last_mut().expect("pushed")["visible_ms"] = serde_json::json!(ms);
            }
        }
        Ok(())
    }

    /// The revalidator thread finished `revalidations`: their latency and deletions.
    pub(super) fn revalidated(&mut self, revalidations: &[rqvs_datapath::revalidator::Revalidation]) {
        for r in revalidations {
            for e in self.log.iter_mut().filter(|e| e["epoch"].as_u64().is_some_and(|x| x <= r.epoch)) {
                if e["revalidated_ms"].is_null() {
                    let t = e["called_ms"].as_f64().unwrap_or(0.0);
                    e["revalidated_ms"] = serde_json::json!(self.wall.elapsed().as_secs_f64() * 1e3 - t);
                    e["revalidator_thread_ms"] = serde_json::json!(r.thread_ms);
                }
            }
            if let Some(e) = self.log.iter_mut().rev().find(|e| e["epoch"].as_u64() == Some(r.epoch)) {
                e["megaflows_deleted"] = serde_json::json!(r.deleted);
            }
        }
    }

    /// The visible rules changed: updates whose rules are all visible now get their latency as
    /// the controller sees it (from the call until lookups reflect it). Returns the visible table.
    pub(super) fn visible_table(&mut self, dp: &dyn Design) -> Vec<Rule> {
        let staged: HashSet<RuleId> = dp.staged_rules().into_iter().collect();
        let log = &mut self.log;
        self.waiting.retain(|(i, t, ids)| {
            let visible = ids.iter().all(|id| !staged.contains(id));
            if visible {
                log[*i]["visible_ms"] = serde_json::json!(t.elapsed().as_secs_f64() * 1e3);
            }
            !visible
        });
        self.table.iter().filter(|r| !staged.contains(&r.id)).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_specs() {
        let u = parse_updates("del:3@500ms, add:60@7s").unwrap();
        assert_eq!((u[0].op, u[0].n, u[0].at_ns), (UpdateOp::Del, 3, 500_000_000));
        assert_eq!((u[1].op, u[1].n, u[1].at_ns), (UpdateOp::Add, 60, 7_000_000_000));
        assert!(parse_updates("mod:1@1s").is_err());
        assert!(parse_updates("add:x@1s").is_err());
        assert!(parse_updates("add:1@-1s").is_err());
    }
}
