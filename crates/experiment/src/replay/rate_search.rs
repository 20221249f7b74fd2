//! `--rate-search` ([`rate_search`]): the highest constant rate a design sustains with < 1%
//! drops, by bisection.

use rqvs_datapath::DesignKind;

use super::{run_design_with, Prediction, Prepared, ReplayConfig, Run};
use crate::Error;

/// What [`rate_search`] found.
pub struct RateSearch {
    /// The run at full speed (no rate limit).
    pub free: Run,
    /// The highest probe with < 1% drops after the warm-up (rate, run) — or, when even the
    /// lowest probe dropped more (`passed` false), that probe.
    pub probe: (f64, Run),
    pub passed: bool,
    /// The best probe is within 5% of the search's upper bound (1.5× the unconstrained rate):
    /// nothing dropped up to there, so the run is too short for the receive ring to fill (a
    /// longer `--duration` or more `--passes` gives a true limit). The rate is then a lower
    /// bound of the design's, not its limit.
    pub at_bound: bool,
}

/// The highest offered rate with < 1% drops after the warm-up, by bisection between 1/100 and
/// 1.5× the rate the design sustains unconstrained (to within 5%); each probe replays the trace
/// through a freshly built design and is reported to `on_probe`. A probe with mismatches is an
/// error.
pub fn rate_search(
    c: &ReplayConfig,
    p: &Prepared,
    design: DesignKind,
    pred: Option<&Prediction>,
    on_probe: &mut dyn FnMut(f64, &Run),
) -> Result<RateSearch, Error> {
    let free = run_design_with(c, p, design, pred)?;
    let mut probe = |rate: f64| -> Result<Run, Error> {
        let r = run_design_with(&ReplayConfig { rate: Some(rate), ..c.clone() }, p, design, pred)?;
        on_probe(rate, &r);
        if r.mismatches > 0 {
            return Err(Error(format!("{} packets got an action other than the reference's", r.mismatches)));
        }
        Ok(r)
    };
    let bound = free.mpps * 1e6 * 1.5;
    let (mut lo, mut hi) = (free.mpps * 1e6 / 100.0, bound);
    let ok = |r: &Run| r.rx.is_some_and(|x| x.drop_rate() < 0.01);
    let mut best = (lo, probe(lo)?);
    if !ok(&best.1) {
        return Ok(RateSearch { free, probe: best, passed: false, at_bound: false });
    }
    while hi / lo > 1.05 {
        let mid = (lo * hi).sqrt();
        let r = probe(mid)?;
        if ok(&r) {
            lo = mid;
            best = (mid, r);
        } else {
            hi = mid;
        }
    }
    let at_bound = best.0 * 1.05 >= bound;
    Ok(RateSearch { free, probe: best, passed: true, at_bound })
}
