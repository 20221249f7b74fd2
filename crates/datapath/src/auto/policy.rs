//! Auto's policy: the thresholds ([`AutoConfig`]), a window's signals ([`Signals`]), the choice
//! they make ([`decide`]) and the hysteresis that keeps it from flapping (`Dwell`). Pure
//! functions of counters and PMD time; the parent module's docs give the policy in words.

use super::build::Target;
use crate::{Counters, DesignKind};

/// The controller's thresholds (module docs give the policy and where the defaults come from).
#[derive(Clone, Copy, Debug)]
pub struct AutoConfig {
    /// The first design; `None`: CFLOWS from `cflows_rules` rules, ORIG below.
    pub initial: Option<DesignKind>,
    pub cflows_rules: usize,
    /// PMD time between decisions.
    pub window_ns: u64,
    pub min_window_packets: u64,
    /// Least PMD time in a design before it may be left (doubled by reversals).
    pub min_dwell_ns: u64,
    pub to_cflows_upcall_share: f64,
    pub to_cflows_subtables: f64,
    pub to_cflows_masks: u64,
    pub to_ccache_subtables: f64,
    pub ccache_max_upcall_share: f64,
    pub to_orig_subtables: f64,
    pub leave_cflows_coverage: f64,
    pub leave_cflows_emc_share: f64,
    /// CFLOWS → CFLOWS with TupleMerge alone when its learned classifier's coverage of the
    /// rules is below this (the learned index then adds a lookup and gains little); 0: never.
    pub cflows_tm_coverage: f64,
    /// Recent distinct keys preinstalled into a new ORIG/CCACHE (0: none).
    pub warm_keys: usize,
    /// CCACHE is a candidate at all (false: ORIG ↔ CFLOWS only).
    pub ccache: bool,
}

impl Default for AutoConfig {
    fn default() -> Self {
        AutoConfig {
            initial: None,
            cflows_rules: 0,
            window_ns: 100_000_000,
            min_window_packets: 1024,
            min_dwell_ns: 1_000_000_000,
            to_cflows_upcall_share: 0.25,
            to_cflows_subtables: 24.0,
            to_cflows_masks: 512,
            to_ccache_subtables: 8.0,
            ccache_max_upcall_share: 0.05,
            to_orig_subtables: 3.0,
            leave_cflows_coverage: 0.3,
            leave_cflows_emc_share: 0.9,
            cflows_tm_coverage: 0.0,
            warm_keys: 4096,
            ccache: true,
        }
    }
}

/// The signals of one window (module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Signals {
    pub packets: u64,
    pub upcall_share: f64,
    pub upcalls_per_s: f64,
    pub subtables_per_hit: f64,
    pub masks: u64,
    pub emc_share: f64,
    pub coverage: f64,
}

impl Signals {
    /// The signals between two readings of one design's counters.
    pub(super) fn of(now: &Counters, before: &Counters) -> Signals {
        let packets = now.received - before.received;
        let ns = (now.pmd_ns - before.pmd_ns).max(1);
        let hits = (now.cd_hit + now.megaflow_hit) - (before.cd_hit + before.megaflow_hit);
        let total = if now.rules > 0 { now.rules } else { now.megaflows };
        Signals {
            packets,
            upcall_share: (now.upcall_ns - before.upcall_ns) as f64 / ns as f64,
            upcalls_per_s: (now.upcall - before.upcall) as f64 / (ns as f64 / 1e9),
            subtables_per_hit: if hits == 0 {
                0.0
            } else {
                (now.megaflow_subtables - before.megaflow_subtables) as f64 / hits as f64
            },
            masks: now.masks,
            emc_share: (now.emc_hit - before.emc_hit) as f64 / packets.max(1) as f64,
            coverage: if total == 0 { 0.0 } else { now.model_entries as f64 / total as f64 },
        }
    }
}

/// The policy's choice for a window's signals in design `current`, with its reason (module
/// docs).
pub fn decide(cfg: &AutoConfig, current: Target, s: &Signals) -> Option<(Target, String)> {
    let kind = current.kind;
    let fixed = |(k, why)| (Target::of(k), why);
    let to_cflows = if s.upcall_share >= cfg.to_cflows_upcall_share {
        Some(format!("upcall share {:.1}% >= {:.1}%", s.upcall_share * 1e2, cfg.to_cflows_upcall_share * 1e2))
    } else if s.subtables_per_hit >= cfg.to_cflows_subtables {
        Some(format!("{:.1} subtables/hit >= {:.1}", s.subtables_per_hit, cfg.to_cflows_subtables))
    } else if s.masks >= cfg.to_cflows_masks {
        Some(format!("{} masks >= {}", s.masks, cfg.to_cflows_masks))
    } else {
        None
    };
    let choice = match kind {
        DesignKind::Orig | DesignKind::Ccache if to_cflows.is_some() => to_cflows.map(|r| (DesignKind::Cflows, r)),
        DesignKind::Orig
            if cfg.ccache
                && s.subtables_per_hit >= cfg.to_ccache_subtables
                && s.upcall_share < cfg.ccache_max_upcall_share =>
        {
            Some((
                DesignKind::Ccache,
                format!(
                    "{:.1} subtables/hit >= {:.1}, upcall share {:.1}% < {:.1}%",
                    s.subtables_per_hit,
                    cfg.to_ccache_subtables,
                    s.upcall_share * 1e2,
                    cfg.ccache_max_upcall_share * 1e2
                ),
            ))
        }
        DesignKind::Ccache if s.subtables_per_hit <= cfg.to_orig_subtables => Some((
            DesignKind::Orig,
            format!("{:.1} subtables/hit <= {:.1}", s.subtables_per_hit, cfg.to_orig_subtables),
        )),
        DesignKind::Cflows if s.coverage < cfg.leave_cflows_coverage && s.emc_share >= cfg.leave_cflows_emc_share => {
            Some((
                DesignKind::Orig,
                format!(
                    "coverage {:.1}% < {:.1}%, EMC share {:.1}% >= {:.1}%",
                    s.coverage * 1e2,
                    cfg.leave_cflows_coverage * 1e2,
                    s.emc_share * 1e2,
                    cfg.leave_cflows_emc_share * 1e2
                ),
            ))
        }
        _ => None,
    };
    match choice {
        Some(c) => Some(fixed(c)),
        // The learned index holds too few rules to pay for its lookup: TupleMerge alone.
        None if kind == DesignKind::Cflows && !current.tm_alone && s.coverage < cfg.cflows_tm_coverage => Some((
            Target { kind, tm_alone: true },
            format!("coverage {:.1}% < {:.1}%: TupleMerge alone", s.coverage * 1e2, cfg.cflows_tm_coverage * 1e2),
        )),
        None => None,
    }
}

/// The hysteresis in time (module docs): no switch before the dwell has passed in a design; a
/// quick return to the design just left doubles the dwell (up to 64× the least), a long stay
/// resets it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Dwell {
    min_ns: u64,
    dwell_ns: u64,
    /// When the current design was entered (PMD time).
    entered_ns: u64,
    /// The design left last and when.
    left: Option<(Target, u64)>,
}

impl Dwell {
    pub(super) fn new(min_ns: u64) -> Dwell {
        Dwell { min_ns, dwell_ns: min_ns, entered_ns: 0, left: None }
    }

    pub(super) fn entered_ns(&self) -> u64 {
        self.entered_ns
    }

    /// The current design may be left at `now`.
    pub(super) fn may_leave(&self, now: u64) -> bool {
        now - self.entered_ns >= self.dwell_ns
    }

    /// A switch from `from` to `to` at `now`.
    pub(super) fn switched(&mut self, now: u64, from: Target, to: Target) {
        match self.left {
            Some((k, at)) if k == to && now - at < 4 * self.dwell_ns => {
                self.dwell_ns = (self.dwell_ns * 2).min(self.min_ns.saturating_mul(64));
            }
            _ if now - self.entered_ns >= 16 * self.dwell_ns => self.dwell_ns = self.min_ns,
            _ => {}
        }
        self.left = Some((from, now));
        self.entered_ns = now;
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{builder, flapping, virtual_cfg};
    use super::super::Auto;
    use super::*;
    use crate::testutil::{expect, keys, rules};
    use rqvs_classify::nuevomatch::live::Policy;

    /// The coverage threshold: below it CFLOWS wants TupleMerge alone, at or above it (or when
    /// already there, or at 0: off) nothing; leaving for ORIG comes first.
    #[test]
    fn low_coverage_chooses_tuple_merge_alone() {
        let cfg = AutoConfig { cflows_tm_coverage: 0.5, leave_cflows_emc_share: 0.9, ..AutoConfig::default() };
        let s = |coverage, emc_share| Signals { packets: 5000, coverage, emc_share, ..Signals::default() };
        let nmu = Target::of(DesignKind::Cflows);
        let tm = Target { kind: DesignKind::Cflows, tm_alone: true };
        assert_eq!(decide(&cfg, nmu, &s(0.4, 0.5)).map(|d| d.0), Some(tm));
        assert_eq!(decide(&cfg, nmu, &s(0.6, 0.5)), None);
        assert_eq!(decide(&cfg, tm, &s(0.0, 0.5)), None);
        assert_eq!(decide(&cfg, nmu, &s(0.2, 0.95)).map(|d| d.0), Some(Target::of(DesignKind::Orig)));
        assert_eq!(decide(&AutoConfig { cflows_tm_coverage: 0.0, ..cfg }, nmu, &s(0.4, 0.5)), None);
    }

    /// With flapping thresholds the dwell doubles at each reversal: the stays grow, so the
    /// switches are logarithmic in time, not linear.
    #[test]
    fn reversals_double_the_dwell() {
        let rs = rules(200);
        let ks = keys(2000, 1);
        let mut dp =
            Auto::new(&rs, virtual_cfg().clock, true, flapping(DesignKind::Orig), builder(Policy::Instant)).unwrap();
        for _ in 0..100 {
            crate::pmd::run_keys(&mut dp, &ks);
        }
        let r = dp.report_now();
        let stays: Vec<u64> = r.log.windows(2).map(|w| w[1].at_ns - w[0].at_ns).collect();
        assert!(r.design_switches >= 4, "{r:?}");
        // 20M ns of PMD time at a 50 µs dwell: 400 switches without the doubling.
        assert!(r.design_switches <= 12, "{} switches: {stays:?}", r.design_switches);
        assert!(stays.windows(2).all(|w| w[1] + 20_000 >= w[0]), "stays shrink: {stays:?}");
    }

    /// The default thresholds on a steady trace: at most one switch (the cold start), no
    /// flapping.
    #[test]
    fn a_steady_trace_does_not_flap() {
        let rs = rules(300);
        let ks = keys(20_000, 5);
        for initial in [None, Some(DesignKind::Orig)] {
            let cfg = AutoConfig { initial, window_ns: 100_000, min_dwell_ns: 500_000, ..AutoConfig::default() };
            let mut dp = Auto::new(&rs, virtual_cfg().clock, true, cfg, builder(Policy::Instant)).unwrap();
            for _ in 0..20 {
                assert_eq!(crate::pmd::run_keys(&mut dp, &ks), expect(&rs, &ks));
            }
            let r = dp.report_now();
            assert!(r.design_switches <= 1, "{initial:?}: {r:?}");
        }
    }
}
