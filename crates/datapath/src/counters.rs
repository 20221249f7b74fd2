//! The datapath's counters, in one type (like `dpif-netdev/pmd-stats-show`).
//!
//! **Per-packet outcomes** — exactly one per received packet, so they never overlap and
//! `emc_hit + cd_hit + megaflow_hit + model_hit + remainder_hit + no_match + upcall + lost ==
//! received` ([`Counters::outcome_sum_ok`]):
//! - `emc_hit`: found in the EMC;
//! - `cd_hit`: found in the megaflow subtable the cuckoo distributor named;
//! - `megaflow_hit`: found by the megaflow subtable walk;
//! - `upcall`: missed everything and was queued to the slow path (counted when queued; the
//!   handler gives it its action);
//! - `lost`: missed everything and the upcall queue was full: dropped.
//! - `model_hit` (CFLOWS, CCACHE): the learned model's iSets gave the winner;
//! - `remainder_hit` (CFLOWS): the remainder after the model gave the winner (a better rule than
//!   the iSets', or the only one);
//! - `no_match` (CFLOWS): no rule matched — the packet is dropped (OpenFlow's table-miss
//!   default). ORIG and CCACHE send such packets to the slow path like any other miss.
//!
//! The rest are costs and gauges: `upcall_ns` (slow-path classification and installation time),
//! `megaflow_subtables` (subtables probed by all CD and megaflow hits — divided by those hits,
//! OVS's "avg. subtable lookups per megaflow hit"), CD hints that failed, installations,
//! deletions by cause (the defences' evictions and MFCGuard's among them), and the gauges `megaflows` and `masks`, filled in by
//! [`crate::Design::counters`].
//!
//! Flow prediction ([`crate::predict`]) installs megaflows without packets: `preinstalled`,
//! `preinstall_existing`, `preinstall_refused` and its handler time `predict_ns` are not
//! per-packet outcomes and stay out of the sum.

/// The counters (module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub received: u64,
    pub emc_hit: u64,
    pub cd_hit: u64,
    pub megaflow_hit: u64,
    pub upcall: u64,
    pub lost: u64,
    pub model_hit: u64,
    pub remainder_hit: u64,
    pub no_match: u64,

    /// Time the handler spent on upcalls (slow path + install), ns.
    pub upcall_ns: u64,
    /// Subtables probed by CD and megaflow hits (the hinted probe counts as one).
    pub megaflow_subtables: u64,
    /// Packets for which the CD had a hint that did not hit (then the walk ran).
    pub cd_wrong_hint: u64,
    /// Packets for which the CD (while active) had no hint.
    pub cd_no_hint: u64,
    /// EMC insertions performed.
    pub emc_inserts: u64,

    /// Megaflows installed by upcalls; upcalls whose megaflow was already installed (another
    /// upcall of the same batch installed it) or not installed (flow limit).
    pub installed: u64,
    pub install_existing: u64,
    pub install_refused: u64,
    /// Upcalls a handler thread answered from a table older than one the PMD had already
    /// revalidated against: the packet got that answer, the megaflow was not installed (it
    /// could outlive its revalidation). Always 0 with the handler inline.
    pub install_stale: u64,
    /// Megaflows deleted: by revalidation after rule changes, as idle, over the flow limit.
    pub deleted_revalidated: u64,
    pub deleted_idle: u64,
    pub deleted_limit: u64,
    /// Defences against Tuple Space Explosion ([`crate::orig::OrigConfig`]): subtables evicted
    /// at the mask limit and the megaflows deleted with them (CCACHE: also megaflows a new
    /// model let go that found no room); installs (upcalls and predictions, already in
    /// `install_refused` and `preinstall_refused`) refused at the mask limit; drop-only
    /// subtables MFCGuard deleted and their megaflows. `install_mask_narrowed` below.
    pub masks_evicted: u64,
    pub megaflows_evicted: u64,
    pub install_mask_refused: u64,
    /// Megaflows installed under a narrower mask than the slow path's at the mask limit
    /// (`narrow` policy).
    pub install_mask_narrowed: u64,
    pub mfcguard_masks: u64,
    pub mfcguard_removed: u64,

    /// Megaflows installed ahead of packets (flow prediction, `Orig::preinstall`); keys an
    /// installed megaflow already covered; keys refused at the flow limit.
    pub preinstalled: u64,
    pub preinstall_existing: u64,
    pub preinstall_refused: u64,
    /// Handler time spent on flow prediction (learning, proposing, preinstalling), ns.
    pub predict_ns: u64,

    /// Packets by action: output to a port, dropped by the rule (or no rule).
    pub tx: u64,
    pub dropped_by_action: u64,

    /// Gauges. `rules`: OpenFlow rules visible to the fast path (CFLOWS); `model_entries`:
    /// rules (CFLOWS) or megaflows (CCACHE) the model's iSets hold — coverage is
    /// `model_entries / rules` or `/ megaflows`.
    pub megaflows: u64,
    pub masks: u64,
    pub rules: u64,
    pub model_entries: u64,
    /// Models trained and swapped in.
    pub model_swaps: u64,

    /// PMD clock, ns, and its parts measured per stage (measured clock only).
    pub pmd_ns: u64,
    pub emc_ns: u64,
    pub dpcls_ns: u64,
    /// Time in the learned model and its remainder (CFLOWS, CCACHE).
    pub model_ns: u64,
    /// PMD time in the idle/flow-limit sweeps and in applying the revalidator thread's work
    /// (sending it the journal, deleting what it returns).
    pub reval_ns: u64,
}

impl Counters {
    /// Sum of the per-packet outcomes.
    pub fn outcome_sum(&self) -> u64 {
        self.emc_hit
            + self.cd_hit
            + self.megaflow_hit
            + self.model_hit
            + self.remainder_hit
            + self.no_match
            + self.upcall
            + self.lost
    }

    /// The invariant: outcomes sum to packets received.
    pub fn outcome_sum_ok(&self) -> bool {
        self.outcome_sum() == self.received
    }

    /// Average subtables probed per CD or megaflow hit.
    pub fn avg_subtables_per_hit(&self) -> f64 {
        let hits = self.cd_hit + self.megaflow_hit;
        if hits == 0 {
            0.0
        } else {
            self.megaflow_subtables as f64 / hits as f64
        }
    }

    /// All megaflow deletions.
    pub fn deleted(&self) -> u64 {
        self.deleted_revalidated
            + self.deleted_idle
            + self.deleted_limit
            + self.megaflows_evicted
            + self.mfcguard_removed
    }

    /// `(name, value)` pairs, for reports.
    pub fn fields(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("received", self.received),
            ("emc_hit", self.emc_hit),
            ("cd_hit", self.cd_hit),
            ("megaflow_hit", self.megaflow_hit),
            ("upcall", self.upcall),
            ("lost", self.lost),
            ("model_hit", self.model_hit),
            ("remainder_hit", self.remainder_hit),
            ("no_match", self.no_match),
            ("upcall_ns", self.upcall_ns),
            ("megaflow_subtables", self.megaflow_subtables),
            ("cd_wrong_hint", self.cd_wrong_hint),
            ("cd_no_hint", self.cd_no_hint),
            ("emc_inserts", self.emc_inserts),
            ("installed", self.installed),
            ("install_existing", self.install_existing),
            ("install_refused", self.install_refused),
            ("install_stale", self.install_stale),
            ("deleted_revalidated", self.deleted_revalidated),
            ("deleted_idle", self.deleted_idle),
            ("deleted_limit", self.deleted_limit),
            ("masks_evicted", self.masks_evicted),
            ("megaflows_evicted", self.megaflows_evicted),
            ("install_mask_refused", self.install_mask_refused),
            ("install_mask_narrowed", self.install_mask_narrowed),
            ("mfcguard_masks", self.mfcguard_masks),
            ("mfcguard_removed", self.mfcguard_removed),
            ("preinstalled", self.preinstalled),
            ("preinstall_existing", self.preinstall_existing),
            ("preinstall_refused", self.preinstall_refused),
            ("predict_ns", self.predict_ns),
            ("tx", self.tx),
            ("dropped_by_action", self.dropped_by_action),
            ("megaflows", self.megaflows),
            ("masks", self.masks),
            ("rules", self.rules),
            ("model_entries", self.model_entries),
            ("model_swaps", self.model_swaps),
            ("pmd_ns", self.pmd_ns),
            ("emc_ns", self.emc_ns),
            ("dpcls_ns", self.dpcls_ns),
            ("model_ns", self.model_ns),
            ("reval_ns", self.reval_ns),
        ]
    }
}
