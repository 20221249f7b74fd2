//! The [`Design`] trait: what the PMD loop ([`crate::pmd::Pmd`]) drives, whichever datapath
//! design is behind it — ORIG ([`crate::Orig`]), CCACHE ([`crate::Ccache`]), CFLOWS
//! ([`crate::Cflows`]) — and each design's typed report ([`DesignReport`]).
//!
//! The contract is the PMD loop's: [`Design::process_batch`] on each batch (the PMD's work),
//! [`Design::handle_upcalls`] for the packets it queued (empty for designs without upcalls),
//! [`Design::maintain`] at batch boundaries (ranking, sweeps, model swaps), and OpenFlow rule
//! changes through [`Design::add_rules`] / [`Design::remove_rules`] between batches.
//!
//! **Attribution.** Each packet is attributed to the OpenFlow rule that decided its action
//! ([`Design::batch_rules`], [`Design::upcall_rules`]; the switch's per-flow counters count
//! them): in ORIG and CCACHE the megaflow's rule ([`crate::dpcls::MegaflowEntry::rule`], set
//! from the slow path's verdict when installed), in CFLOWS the winner the EMC or the classifier
//! names. A rule change can leave a megaflow's action and mask valid while another rule now
//! wins for its key (a flow replaced by one with the same actions, or a new rule of higher
//! priority with the same actions): revalidation keeps such a megaflow and **re-attributes** it
//! to the new winner (inline at once, from the revalidator thread with its deletions), as
//! OVS's revalidators move a kept flow's statistics to the rule its xlate now names. Deleting
//! it instead would cost an upcall per kept flow after every such change. Between the change
//! and its revalidation a kept megaflow's packets still count for the old rule — the same
//! window in which the old table may still decide them.
//!
//! **Visibility.** [`Design::visible_epoch`] changes whenever the set of OpenFlow rules that
//! decides packets' actions changes: at each update for ORIG and for CFLOWS' instant policy, at
//! the model swap for the delayed policy (rules staged until then are not visible:
//! [`Design::staged_rules`]). Verification compares each packet with the reference over the rules
//! visible when it was classified — or, while [`Design::oldest_epoch`] lags behind (ORIG with
//! the revalidator thread), over any of the rule sets from that epoch to the visible one.

use rqvs_classify::ClassifierError;
use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::dpcls::MegaflowEntry;
use crate::predict::PredictStats;
use crate::revalidator::Revalidation;
use crate::upcall::Upcall;
use crate::Counters;
use rqvs_ofproto::table::Verdict;
use rqvs_ofproto::DpAction;

/// A datapath design.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum DesignKind {
    /// EMC → megaflow cache → upcall to the OpenFlow slow path.
    Orig,
    /// EMC → NuevoMatchUP over the megaflows → megaflow cache → upcall.
    Ccache,
    /// EMC → NuevoMatchUP over the OpenFlow rules → TupleMerge remainder; no upcalls.
    Cflows,
    /// A controller that moves between the three as the traffic asks ([`crate::auto`]).
    Auto,
}

impl DesignKind {
    /// The three fixed designs (not [`DesignKind::Auto`], which runs them).
    pub const ALL: [DesignKind; 3] = [DesignKind::Orig, DesignKind::Ccache, DesignKind::Cflows];

    /// `orig`, `ccache`, `cflows` (the names in reports and on the command line).
    pub fn name(self) -> &'static str {
        match self {
            DesignKind::Orig => "orig",
            DesignKind::Ccache => "ccache",
            DesignKind::Cflows => "cflows",
            DesignKind::Auto => "auto",
        }
    }

    /// The design named `s`.
    pub fn from_name(s: &str) -> Option<DesignKind> {
        DesignKind::ALL.into_iter().chain([DesignKind::Auto]).find(|d| d.name() == s)
    }
}

pub trait Design {
    /// `orig`, `cflows`, ...
    fn name(&self) -> &'static str;
    /// The PMD's work on one batch (see [`crate::orig::MegaflowDatapath::process_batch`] for `seq0`/`out`).
    fn process_batch(&mut self, keys: &[FlowKey], seq0: u64, out: &mut [DpAction]);
    /// Handles queued upcalls; `(sequence number, action)` per handled packet.
    fn handle_upcalls(&mut self) -> &[(u64, DpAction)];
    /// The OpenFlow rule that decided each packet of the last [`Design::process_batch`], in
    /// the batch's order ([`rqvs_ofproto::NO_RULE`]: none matched, or the packet is `Pending`/`Lost`) — what
    /// per-flow counters count (module docs: *Attribution*).
    fn batch_rules(&self) -> &[RuleId];
    /// The rule that decided each upcall the last [`Design::handle_upcalls`] handled, in the
    /// order of its results (empty for designs without upcalls). An upcall completed by
    /// [`Design::complete_upcall`] was decided by its verdict's `rule`.
    fn upcall_rules(&self) -> &[RuleId] {
        &[]
    }
    /// Moves the upcalls [`Design::process_batch`] queued to `out`, for a handler on another
    /// thread — the alternative to [`Design::handle_upcalls`] (the switch's handler thread
    /// classifies them with the shared OpenFlow table and hands the verdicts back to
    /// [`Design::complete_upcall`] on this PMD). Nothing for designs without upcalls.
    fn take_upcalls(&mut self, _out: &mut Vec<Upcall>) {}
    /// The handler's verdict for an upcall from [`Design::take_upcalls`]: installs its
    /// megaflow (unless `install` is false: the verdict came from a table older than one this
    /// PMD has revalidated against — the packet still gets its action, counted
    /// `install_stale`), tells the EMC, counts the action; returns it. `None`: the handler's
    /// queue was full, the packet is lost (counted `lost` instead of `upcall`).
    fn complete_upcall(&mut self, _u: &Upcall, _v: Option<&Verdict>, _install: bool) -> DpAction {
        DpAction::Drop
    }
    /// Batch-boundary housekeeping; returns megaflows deleted.
    fn maintain(&mut self) -> u64;
    /// Adds OpenFlow rules; returns megaflows deleted as a consequence (none in CFLOWS).
    fn add_rules(&mut self, rules: Vec<Rule>) -> Result<u64, ClassifierError>;
    /// Removes OpenFlow rules (absent ids ignored); returns megaflows deleted.
    fn remove_rules(&mut self, ids: &[RuleId]) -> u64;
    /// Counters with gauges filled in.
    fn counters(&self) -> Counters;
    /// PMD clock, ns.
    fn now_ns(&self) -> u64;
    /// An idle PMD waiting for packets: the clock moves to `ns` (if later).
    fn idle_until(&mut self, ns: u64);
    /// Changes whenever the visible rule set changes (module docs).
    fn visible_epoch(&self) -> u64;
    /// The oldest epoch whose rule set may still decide a packet: megaflows of an earlier
    /// table waiting for an asynchronous revalidation ([`crate::revalidator`]); the visible
    /// epoch when none are.
    fn oldest_epoch(&self) -> u64 {
        self.visible_epoch()
    }
    /// Asynchronous revalidations finished since the last call.
    fn take_revalidations(&mut self) -> Vec<Revalidation> {
        Vec::new()
    }
    /// Rules added but not yet visible (delayed policy).
    fn staged_rules(&self) -> Vec<RuleId> {
        Vec::new()
    }
    /// The design's own figures.
    fn report(&self) -> DesignReport;
    /// Flow prediction's counters, checked now ([`crate::predict`]; ORIG only, when on).
    fn prediction_stats(&mut self) -> Option<PredictStats> {
        None
    }
    /// Waits for background work (training) to finish and be applied; for tests and for a
    /// clean end of a run.
    fn settle(&mut self) {}
    /// The OpenFlow table this design shares with others ([`rqvs_ofproto::OfprotoTable`]) was changed
    /// by someone else's commit: revalidate (ORIG, CCACHE). Returns megaflows deleted now. A
    /// no-op for designs that own their rules (CFLOWS: changes go through
    /// [`Design::add_rules`]).
    fn table_changed(&mut self) -> u64 {
        0
    }
    /// [`Design::table_changed`] for a PMD whose upcalls another thread classifies: every
    /// verdict it installs from now on comes from a table of version `known` or later
    /// ([`crate::orig::MegaflowDatapath::table_changed_at`]).
    fn table_changed_at(&mut self, _known: u64) -> u64 {
        self.table_changed()
    }
    /// Calls `f` on every installed megaflow (none for designs without a megaflow cache).
    fn for_each_megaflow(&self, _f: &mut dyn FnMut(&MegaflowEntry)) {}
    /// Installs the megaflows of `keys` ahead of their packets through the slow path
    /// ([`crate::orig::MegaflowDatapath::preinstall`]); returns how many. Nothing for designs
    /// without a megaflow cache. [`crate::auto`] warms a new ORIG/CCACHE with it.
    fn preinstall(&mut self, _keys: &[FlowKey]) -> usize {
        0
    }
    /// The adaptive design's switches and time per design ([`crate::auto`]); `None` for a fixed
    /// design.
    fn auto_report(&self) -> Option<crate::auto::AutoReport> {
        None
    }
    /// The adaptive design's switches so far (a cheap [`Design::auto_report`]`.design_switches`
    /// for a PMD loop that logs each); 0 for a fixed design.
    fn design_switches(&self) -> u64 {
        0
    }
}

/// ORIG's figures (and CCACHE's megaflow cache's).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OrigReport {
    /// Subtables of the OpenFlow table (the slow path's classifier).
    pub openflow_subtables: u64,
    /// The cuckoo distributor's ranking intervals (on, off), when configured.
    pub cd_intervals: Option<(u64, u64)>,
}

/// CCACHE's model over the megaflows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CcacheReport {
    /// Share of the installed megaflows the model serves.
    pub coverage: f64,
    pub model_megaflows: u64,
    pub model_swaps: u64,
    pub last_training_ms: f64,
}

/// CFLOWS' learned classifier over the OpenFlow rules.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CflowsReport {
    /// Share of the rules the iSets serve.
    pub coverage: f64,
    pub isets: u64,
    pub remainder_rules: u64,
    /// Rules inserted and not yet visible (delayed policy).
    pub staged_rules: u64,
    pub training_sessions: u64,
    /// The last training session's time, once one ran.
    pub last_training_ms: Option<f64>,
    /// Tables after 0 looked up in a NuevoMatchUP of their own, and the rules they hold
    /// ([`rqvs_ofproto::later_tables`]).
    pub later_learned_tables: u64,
    pub later_learned_rules: u64,
}

/// A design's typed report.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DesignReport {
    Orig(OrigReport),
    Ccache(OrigReport, CcacheReport),
    Cflows(CflowsReport),
}

impl DesignReport {
    /// The megaflow datapath's part (ORIG, CCACHE).
    pub fn orig(&self) -> Option<&OrigReport> {
        match self {
            DesignReport::Orig(o) | DesignReport::Ccache(o, _) => Some(o),
            DesignReport::Cflows(_) => None,
        }
    }

    /// The learned model's coverage (CCACHE: of the megaflows; CFLOWS: of the rules).
    pub fn coverage(&self) -> Option<f64> {
        match self {
            DesignReport::Orig(_) => None,
            DesignReport::Ccache(_, c) => Some(c.coverage),
            DesignReport::Cflows(c) => Some(c.coverage),
        }
    }

    /// `(name, value)` pairs, for JSON reports and tables.
    pub fn fields(&self) -> Vec<(&'static str, f64)> {
        let mut v = Vec::new();
        if let Some(o) = self.orig() {
            v.push(("openflow_subtables", o.openflow_subtables as f64));
            if let Some((on, off)) = o.cd_intervals {
                v.push(("cd_intervals_on", on as f64));
                v.push(("cd_intervals_off", off as f64));
            }
        }
        match self {
            DesignReport::Orig(_) => {}
            DesignReport::Ccache(_, c) => {
                v.push(("coverage", c.coverage));
                v.push(("model_megaflows", c.model_megaflows as f64));
                v.push(("model_swaps", c.model_swaps as f64));
                v.push(("last_training_ms", c.last_training_ms));
            }
            DesignReport::Cflows(c) => {
                v.push(("coverage", c.coverage));
                v.push(("isets", c.isets as f64));
                v.push(("remainder_rules", c.remainder_rules as f64));
                v.push(("staged_rules", c.staged_rules as f64));
                v.push(("training_sessions", c.training_sessions as f64));
                if let Some(ms) = c.last_training_ms {
                    v.push(("last_training_ms", ms));
                }
                if c.later_learned_tables > 0 {
                    v.push(("later_learned_tables", c.later_learned_tables as f64));
                    v.push(("later_learned_rules", c.later_learned_rules as f64));
                }
            }
        }
        v
    }
}
