//! rqvs datapath layer: the fast paths of the three designs of NSDI'22 (§2.1, §4), one batch of
//! [`BATCH`] = 32 packets at a time, driven by one PMD loop ([`pmd::Pmd`]).
//!
//! # Designs ([`Design`])
//!
//! - **ORIG** ([`Orig`], OVS's userspace dpif-netdev): EMC → (cuckoo distributor) → megaflow
//!   cache → upcall. The [`emc`] matches whole keys (8192 entries by default, 2 candidate slots,
//!   probabilistic insertion); the cuckoo distributor ([`cd`], optional) names the subtable a flow
//!   hit last time; the megaflow cache ([`dpcls`]) is a tuple space search over megaflow masks,
//!   first hit wins, subtables ranked by hits every second of PMD time; a miss is an
//!   [`upcall`]: a bounded queue to the handler, which classifies with the OpenFlow slow path
//!   ([`rqvs_classify::OfprotoClassifier`] with wildcard tracking), installs the megaflow
//!   ([`dpcls::Dpcls::install`], the one place megaflows are installed) and gives the packet its
//!   action. Overflowing packets are dropped and counted (`lost`).
//! - **CCACHE** ([`Ccache`]): ORIG with a learned model over the megaflows ([`ccache`]) between
//!   the EMC and the megaflow cache; both are [`orig::MegaflowDatapath`] with a different model
//!   stage ([`orig::ModelStage`]).
//! - **CFLOWS** ([`Cflows`]): EMC → NuevoMatchUP over the OpenFlow rules → TupleMerge
//!   remainder; no megaflows, no upcalls ([`cflows`]).
//!
//! Settings common to every design are one [`DatapathConfig`]; each design has its own
//! ([`orig::OrigConfig`], [`ccache::CcacheConfig`], [`cflows::CflowsConfig`]) and its own typed
//! report ([`design::DesignReport`]). All counters are in one [`counters::Counters`] whose
//! per-packet outcomes never overlap and sum to the packets received.
//!
//! # Threads
//!
//! The PMD thread runs [`pmd::Pmd`]: the batch through the design, then the handler (upcalls are
//! handled on the PMD thread, as OVS-DPDK's PMD does), then housekeeping. Beside it: the
//! [`revalidator`] thread (ORIG/CCACHE, [`orig::OrigConfig::revalidator`]) re-checks megaflows
//! after OpenFlow rule changes while the PMD forwards, the PMD applying its deletions at batch
//! boundaries; a trainer thread per learned model (CCACHE's model over megaflows, CFLOWS'
//! `LiveNuevoMatch`) trains in the background, the PMD swapping the new model in between batches.
//! The PMD never waits for either. [`predict`] (off by default) installs the megaflows of flows
//! expected to follow a coflow's base flow, through the same slow path.
//!
//! # Time
//!
//! Everything that depends on time (idle expiry, subtable ranking, the CD's on/off decision,
//! training intervals, a replay's time series, timed rule updates) reads the design's *PMD
//! clock* ([`clock::Clock`]): measured PMD time in `rqvs replay` and the switch, fixed costs per
//! packet and upcall in tests, so tests are deterministic.
//!
//! # A datapath fed a batch
//!
//! ```
//! use rqvs_datapath::{pmd::Pmd, DatapathConfig, Design, Orig, OrigConfig, BATCH};
//! use rqvs_ofproto::DpAction;
//! use rqvs_flow::{formats, FlowKey};
//!
//! let rules = formats::parse_rules(
//!     "flows.txt",
//!     "priority=20,tcp,tp_dst=80,actions=output:1\n\
//!      priority=10,ip,actions=output:2\n",
//! )?;
//! let mut dp = Orig::new(&rules, DatapathConfig::default(), OrigConfig::default())?;
//! let mut pmd = Pmd::new();
//! // One batch: 32 packets of two flows (web and ssh).
//! let keys: Vec<FlowKey> =
//!     (0..BATCH).map(|i| FlowKey::ipv4(0x0a00_0001, 0x0a00_0002, 6, 5555, if i % 2 == 0 { 80 } else { 22 })).collect();
//!
//! // The first batch misses the empty megaflow cache: every packet is an upcall, which the
//! // handler classifies with the OpenFlow rules, installing one megaflow per flow.
//! let first = pmd.run_batch(&mut dp, &keys, 0);
//! assert!(first.actions.iter().all(|&a| a == DpAction::Pending));
//! assert_eq!(first.upcalls.len(), BATCH);
//! assert_eq!(first.upcalls[0], (0, DpAction::Output(1)));
//! assert_eq!(first.upcalls[1], (1, DpAction::Output(2)));
//!
//! // The next batch is served by the fast path.
//! let second = pmd.run_batch(&mut dp, &keys, BATCH as u64);
//! assert_eq!(second.actions[..2], [DpAction::Output(1), DpAction::Output(2)]);
//! assert!(second.upcalls.is_empty());
//! let c = dp.counters();
//! assert_eq!((c.received, c.upcall), (2 * BATCH as u64, BATCH as u64));
//! assert_eq!(c.emc_hit + c.megaflow_hit, BATCH as u64);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The megaflow property (tested)
//!
//! A packet that hits an installed megaflow gets the action the slow path would give it, so the
//! datapath's action for every packet is the action of the reference classifier's winning rule.

#![forbid(unsafe_code)]

pub mod auto;
pub mod batch_key;
pub mod ccache;
pub mod cd;
pub mod cflows;
pub mod cflows_pipeline;
pub mod cflows_shared;
pub mod clock;
pub mod counters;
pub mod design;
pub mod dpcls;
pub mod emc;
pub mod orig;
pub mod pmd;
pub mod policer;
pub mod predict;
pub mod revalidator;
#[cfg(test)]
mod shared_table_tests;
#[cfg(test)]
mod testutil;
pub mod upcall;

pub use auto::{Auto, AutoConfig, AutoReport, AutoSettings};
pub use cflows::{Cflows, CflowsClassifier, CflowsConfig};
pub use cflows_shared::{CflowsPublisher, CflowsReaders, SharedCflows};
pub use clock::Clock;
pub use counters::Counters;
pub use design::{Design, DesignKind, DesignReport};
pub use dpcls::{MaskEviction, MaskLimit};
pub use orig::{Ccache, Orig, OrigConfig};
pub use pmd::Pmd;
pub use rqvs_classify::BATCH;

/// Settings every design shares.
#[derive(Clone, Copy, Debug)]
pub struct DatapathConfig {
    /// EMC enabled.
    pub emc: bool,
    /// EMC insertion probability (OVS default 1/100).
    pub emc_insert_prob: f64,
    /// The EMC's size (OVS's 8192 entries by default).
    pub emc_entries: emc::EmcEntries,
    pub clock: Clock,
    /// Seed of the EMC insertion draws.
    pub seed: u64,
    /// Normalise every key with [`FlowKey::wire`] before the lookup: keys that are header
    /// tuples (ClassBench traces, which put ports on any protocol). False for keys made from
    /// real frames (the switch's ports, `rqvs_flow::frame::extract_datapath`): they are what
    /// OVS's datapath reads already, and `wire` would re-read a cut VLAN tag's ethertype as a tag.
    pub wire_keys: bool,
}

impl Default for DatapathConfig {
    fn default() -> Self {
        DatapathConfig {
            emc: true,
            emc_insert_prob: 0.01,
            emc_entries: emc::EmcEntries::default(),
            clock: Clock::Measured,
            seed: 1,
            wire_keys: true,
        }
    }
}

use rqvs_flow::{Actions, FlowKey, Rule};

/// Gives every rule the action `output:(id + 1)`, so that distinct rules have distinct actions
/// and an action mismatch always means a wrong rule. ClassBench files carry no actions; `rqvs
/// replay` applies this to them (documented in the README). Port 0 is never used.
pub fn assign_rule_outputs(rules: &mut [Rule]) {
    for r in rules {
        r.actions = Actions::output(r.id.0 + 1);
    }
}

/// The 32-bit flow hash of a packet key (OVS's RSS hash plays this role): a multiply-xorshift
/// mix of [`FlowKey::to_narrow_words`], then of the wide words when the key has any. Used by the EMC and the cuckoo distributor (and, in the
/// switch, to spread flows over PMD threads).
#[inline]
pub fn flow_hash(k: &FlowKey) -> u32 {
    let h = hash_narrow_words(&k.to_narrow_words());
    // The wide words only when the key has any (a 5-tuple key hashes as it always did).
    if k.is_narrow_mask() {
        return finish_hash(h);
    }
    finish_hash(k.to_words()[rqvs_flow::key::NARROW_WORDS..].iter().fold(h, |h, &x| mix_hash(h, x)))
}

/// [`flow_hash`] of a narrow key (`flow_hash_narrow(&k.narrow()?) == flow_hash(&k)`).
#[inline]
pub fn flow_hash_narrow(k: &rqvs_flow::key::NarrowKey) -> u32 {
    finish_hash(hash_narrow_words(&k.to_narrow_words()))
}

#[inline(always)]
fn mix_hash(h: u64, x: u64) -> u64 {
    let h = (h ^ x).wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ h >> 32
}

#[inline(always)]
fn hash_narrow_words(w: &rqvs_flow::key::NarrowWords) -> u64 {
    w.iter().fold(0x9e37_79b9_7f4a_7c15, |h, &x| mix_hash(h, x))
}

#[inline(always)]
fn finish_hash(h: u64) -> u32 {
    let h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    (h ^ (h >> 29)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A narrow key hashes the same as its whole form (the EMC is shared by both paths).
        #[test]
        fn the_narrow_hash_is_the_hash(w in proptest::prelude::any::<[u64; 5]>(), wide in proptest::prelude::any::<u64>()) {
            let mut k = FlowKey::from_words(&[w[0], w[1], w[2], w[3], w[4], 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            let n = k.narrow().expect("no wide word");
            proptest::prop_assert_eq!(flow_hash(&k), flow_hash_narrow(&n));
            k.metadata = wide | 1;
            proptest::prop_assert_ne!(flow_hash(&k), flow_hash_narrow(&n));
        }
    }

    #[test]
    fn hash_depends_on_every_word() {
        let a = FlowKey::ipv4(1, 2, 6, 3, 4);
        let mut b = a;
        b.dl_dst[5] = 1;
        assert_ne!(flow_hash(&a), flow_hash(&b));
        let mut c = a;
        c.tp_dst = 5;
        assert_ne!(flow_hash(&a), flow_hash(&c));
    }
}

/// The README's examples, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
