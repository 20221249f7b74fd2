//! Multi-PMD runs ([`run_pmds`]): the trace split over PMD threads by flow hash, each verified
//! like a single run.

use rqvs_datapath::DesignKind;
use rqvs_ofproto::OfprotoTable;

use super::feed::Trace;
use super::run::run_design_on;
use super::{Prepared, ReplayConfig, Run};
use crate::Error;

/// What [`run_pmds`] measured.
pub struct PmdRuns {
    /// One run per PMD thread, over its share of the trace.
    pub runs: Vec<Run>,
    /// All PMDs together: packets, and packets per second of the longest PMD time (the rate at
    /// which the PMDs, each on its own core, took the whole trace).
    pub packets: u64,
    pub mpps: f64,
}

impl PmdRuns {
    pub fn mismatches(&self) -> usize {
        self.runs.iter().map(|r| r.mismatches).sum()
    }
}

/// The paper's Fig. 10 offline: the trace split over `c.pmds` PMD threads by flow hash (every
/// packet of a flow on one PMD, in trace order, as RSS spreads flows over receive queues), each
/// thread its own design — its EMC, megaflow cache and models — ORIG and CCACHE over one
/// shared OpenFlow table, each verified like a single run. Timed rule updates and the constant
/// rate are not split yet (an error says so).
pub fn run_pmds(c: &ReplayConfig, p: &Prepared, design: DesignKind) -> Result<PmdRuns, Error> {
    let n = c.pmds;
    if n == 0 {
        return Err(Error("--pmds: expected at least 1".into()));
    }
    let mut shares: Vec<Prepared> = (0..n)
        .map(|i| Prepared {
            all_rules: Vec::new(),
            rules_format: p.rules_format,
            trace: Trace { share: Some((i, n)), ..p.trace.clone() },
            packets: 0,
            capture: p.capture,
            // Every PMD applies the whole update stream on its own clock.
            updates: p.updates.clone(),
            initial: p.initial.clone(),
            samples: Vec::new(),
            n_verify: 0,
            attack: None,
        })
        .collect();
    // One pass over the trace: each PMD's packet count, and the trace's sample in each PMD's
    // positions.
    let mut keys = p.trace.open()?;
    let (mut at, mut next_sample) = (0u64, 0usize);
    while let Some(k) = keys.next_key()? {
        let share = &mut shares[rqvs_datapath::flow_hash(&k.wire()) as usize % n];
        if p.samples.get(next_sample) == Some(&at) {
            share.samples.push(share.packets);
            share.n_verify += 1;
            next_sample += 1;
        }
        share.packets += 1;
        at += 1;
    }
    if let Some(i) = shares.iter().position(|s| s.packets == 0) {
        return Err(Error(format!("--pmds {n}: PMD {i} gets no packet of this trace (too few flows)")));
    }
    // One OpenFlow table for all PMDs (ORIG, CCACHE) — unless a timed update stream runs: each
    // PMD then applies it on its own clock to a table of its own (a replica), since committing
    // one stream N times to one table would apply each change N times.
    let table = if p.updates.is_empty() { Some(OfprotoTable::build(&p.initial)?) } else { None };
    let runs = std::thread::scope(|s| {
        let handles: Vec<_> = shares
            .iter()
            .map(|share| {
                // A constant offered rate is split over the PMDs as the trace is.
                let rate = c.rate.map(|r| r * share.packets as f64 / p.packets as f64);
                let cfg = ReplayConfig { rate, ..c.clone() };
                let table = table.as_ref();
                s.spawn(move || run_design_on(&cfg, share, design, None, table, &mut |_| {}))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a PMD thread panicked")).collect::<Result<Vec<Run>, Error>>()
    })?;
    let packets: u64 = runs.iter().map(|r| r.c.received).sum();
    let longest = runs.iter().map(|r| r.c.pmd_ns).max().unwrap_or(0) as f64 / 1e9;
    Ok(PmdRuns { packets, mpps: packets as f64 / longest.max(1e-12) / 1e6, runs })
}
