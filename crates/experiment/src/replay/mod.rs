//! Replay: a trace through a datapath design, as fast as the PMD takes it or at a constant rate
//! — what `rqvs replay` and `rqvs compare` run ([`prepare`], then [`run_design`] per design; the
//! settings are a plain [`ReplayConfig`]).
//!
//! - **Designs** ([`rqvs_datapath::Design`]): `orig` (EMC → megaflow cache → upcall to the
//!   OpenFlow slow path), `ccache` (EMC → NuevoMatchUP over the megaflows → megaflow cache →
//!   upcall; the model retrained in the background) and `cflows` (EMC → NuevoMatchUP over the
//!   OpenFlow rules → TupleMerge remainder; no megaflows, no upcalls). `rqvs compare` runs several
//!   on the same input.
//! - **Rules.** ClassBench files go to the slow path as they are (the OpenFlow classifier expands
//!   port ranges itself, with u32 priorities, so 100K/500K sets need no 16-bit priority layering),
//!   and every rule gets the action `output:(id+1)` ([`rqvs_datapath::assign_rule_outputs`]), so
//!   an action mismatch always means a wrong rule. ovs-ofctl files keep their actions.
//! - **Time** is PMD time: the measured time of the PMD's batches and of the upcalls it handles
//!   (OVS-DPDK's PMD handles its own upcalls); revalidation after rule updates and periodic sweeps
//!   are not PMD time (another core in OVS). Throughput is packets / PMD time. The trace is
//!   replayed `--passes` times (default 1) or in a loop until `--duration` seconds of PMD time;
//!   after the first pass the report adds the steady-state throughput of the later passes.
//! - **Time series**: a sample every 100 ms of PMD time: throughput, upcalls/s, deletions/s,
//!   megaflows, masks.
//! - **Updates** ([`ReplayConfig::updates`], e.g. `add:60@7s,del:10@9s`): `add:N@Ts` holds N rules out of the initial
//!   table — chosen at random (seed `--seed`) among all rules, so they interleave in priority with
//!   the rest — and inserts them when the PMD clock reaches T; `del:N@Ts` removes N random
//!   installed rules at T. ORIG (and CCACHE) revalidate every megaflow after each update — on the
//!   revalidator thread by default (`--revalidator thread`: the PMD goes on forwarding, the
//!   stale megaflows are deleted at a batch boundary once the thread has re-checked them; the
//!   update log gives `revalidated_ms`, from the call until then), or in the call (`inline`);
//!   CFLOWS applies it by `--policy` (instant: visible at once; delayed: at the next model swap).
//! - **Verification**: `--verify N` trace positions are sampled (seed `--seed`); the action each
//!   gets is recorded once per version of the *visible* rule table (it changes at each update, or
//!   at the model swap for the delayed policy) and compared, after the run, with the reference
//!   classifier's winning rule for that version — or, for a packet that ran while the
//!   revalidator thread had stale megaflows to check, with any version from the oldest of them
//!   on (OVS's eventual consistency; the report counts these packets). For rules of several
//!   tables (`table=N` in an ofctl file) the reference walks the pipeline: `xlate` over a
//!   reference classifier per table (`pipeline_ref`); CFLOWS' right action for a packet whose
//!   table-0 rule ends the pipeline is that rule's own op list. Mismatches are printed next to
//!   the throughput; any makes the exit code 1.
//! - **Flow prediction** (`--predict`, ORIG only, off by default; [`rqvs_datapath::predict`]):
//!   `online` attaches the online predictor — it learns from the upcalls of any trace which flows
//!   follow which, and installs the megaflows of expected follow-ups through the slow path;
//!   `oracle` installs, on a base flow's upcall, exactly the coupled associated flows a coflow
//!   ground truth lists (`--coflow-truth`, as `rqvs gen coflows --truth-out` writes it; its flows
//!   are matched to the trace by 5-tuple). Predicted megaflows, their use and waste are reported;
//!   the prediction work is handler time on the PMD clock (`predict_ns`). The replay ignores
//!   capture timestamps (packets come as fast as the PMD takes them), so the predictor's window
//!   is PMD time and there is no latency model: `rqvs coflows` is the experiment with arrival
//!   times, first-packet latency and handler CPU over coflowiness.
//!
//! The files: this one holds [`ReplayConfig`] and re-exports the public API; `prepare.rs`
//! ([`prepare`], [`Prepared`]), `check.rs` (option validation: [`check_unused`]), `designs.rs`
//! ([`build`], [`auto_builder`]), `run.rs` (the replay loop: [`run_design`] and its variants),
//! `feed.rs` (the trace's packets into the PMD, the constant-rate receive ring), `updates.rs`
//! (the timed rule updates and their log), `verifier.rs` (verification against the reference),
//! `results.rs` (what a run reports: [`Run`], [`Sample`]), `pmds.rs` ([`run_pmds`]) and
//! `rate_search.rs` ([`rate_search`]).

mod check;
mod designs;
mod feed;
mod pipeline_ref;
mod pmds;
mod prepare;
mod rate_search;
mod results;
mod run;
mod updates;
mod verifier;

pub use check::{check_auto, check_defences, check_unused};
pub use designs::{auto_builder, build};
pub use feed::{Trace, TraceKeys, HOLD_BYTES};
pub use pmds::{run_pmds, PmdRuns};
pub use prepare::{prepare, AttackTrace, Prepared};
pub use rate_search::{rate_search, RateSearch};
pub use results::{coverage, AttackRun, Run, RxStats, Sample};
pub use run::{run_design, run_design_progress, run_design_with, Progress};

use std::path::PathBuf;

use rqvs_classify::nuevomatch::live::Policy;
use rqvs_datapath::policer::PolicerSpec;
use rqvs_datapath::revalidator::RevalidatorMode;
use rqvs_datapath::{AutoConfig, CflowsClassifier, MaskEviction};

use crate::inputs;
pub use crate::prediction::{oracle_predictor, Prediction};

/// The seed's streams ([`Rng::fork`](rqvs_flow::rng::Rng::fork) labels), one per random
/// choice, so that one changing does not shift another's draws: the rules held out for `add:`
/// updates, the packets verified, the rules `del:` updates remove, the attack's packets verified.
const STREAM_HELD_OUT: u64 = 1;
const STREAM_VERIFY: u64 = 2;
const STREAM_DELETIONS: u64 = 3;
const STREAM_ATTACK_VERIFY: u64 = 4;
/// MFCGuard's interval when not given, seconds of PMD time (the revalidator's sweep's).
pub const MFCGUARD_INTERVAL_S: f64 = 0.5;
pub use rqvs_datapath::DesignKind;

/// The settings of a replay (what `rqvs replay`'s options fill; the switch and the Python
/// package fill the same). [`Default`] gives the command line's defaults: the embedded
/// workload, ORIG's OVS defaults.
#[derive(Clone, Debug)]
pub struct ReplayConfig {
    /// Rule file: ClassBench or ovs-ofctl flows, plain or .xz (`None`: the embedded ClassBench
    /// acl1_1k set).
    pub rules: Option<PathBuf>,
    /// ClassBench trace or pcap/pcapng capture, plain or .xz (`None`: the embedded acl1_1k
    /// trace).
    pub trace: Option<PathBuf>,
    /// The cuckoo distributor (ORIG, CCACHE).
    pub cd: bool,
    pub emc: bool,
    /// EMC insertion probability (OVS default 0.01; the paper used 0.2).
    pub emc_prob: f64,
    /// EMC entries: a power of two from 2 to 2^21 (OVS: 8192; the paper's Fig. 9: 8K to 2M).
    pub emc_entries: usize,
    /// Replay the trace in a loop until this many seconds of PMD time (else `passes` times).
    pub duration: Option<f64>,
    pub passes: u32,
    /// Constant-rate mode: packets offered per second of PMD time into a ring of `rx_ring`.
    pub rate: Option<f64>,
    pub rx_ring: u64,
    /// Rule updates, e.g. `add:60@7s,del:10@9s`.
    pub updates: Option<String>,
    /// Trace positions checked against the reference (default 10,000; 2,000 above 100,000 rules).
    pub verify: Option<usize>,
    /// Seed for held-out rules, the verification sample and EMC insertion draws.
    pub seed: u64,
    pub flow_limit: usize,
    pub revalidator: RevalidatorMode,
    /// CFLOWS: when inserted rules become visible.
    pub policy: Policy,
    /// CFLOWS: NuevoMatchUP, or TupleMerge alone (the learned index's ablation).
    pub classifier: CflowsClassifier,
    /// Retrain when what was added outside the model exceeds this share (CFLOWS: rules in the
    /// remainder; CCACHE: megaflows in the megaflow cache).
    pub retrain_threshold: f64,
    /// CFLOWS: the tables after 0 with at least this many rules get a learned index each
    /// (`rqvs_ofproto::later_tables`).
    pub later_learned_min: usize,
    /// CCACHE: seconds of PMD time between the manager's checks.
    pub train_interval: f64,
    /// Idle expiry of megaflows, seconds of PMD time.
    pub idle: f64,
    /// in_port given to trace packets.
    pub in_port: u32,
    /// PMD threads the trace is split over by flow hash ([`run_pmds`]; 1 = [`run_design`]).
    pub pmds: usize,
    /// `--design auto`: the controller's thresholds ([`rqvs_datapath::auto`]).
    pub auto: AutoConfig,
    /// ORIG, CCACHE: at most this many megaflow masks per PMD (`None`: no limit, as OVS), and
    /// what happens at the limit ([`rqvs_datapath::dpcls`], defences against Tuple Space
    /// Explosion).
    pub mask_limit: Option<usize>,
    pub mask_eviction: MaskEviction,
    /// ORIG, CCACHE: MFCGuard — every this many seconds of PMD time, delete the subtables whose
    /// megaflows all drop (`None`: off, as OVS).
    pub mfcguard: Option<f64>,
    /// An attack interleaved with the trace ([`crate::mixed`]): a packet file replayed in a
    /// loop, arriving at `attack_rate` packets per second of PMD time.
    pub attack: Option<PathBuf>,
    pub attack_rate: Option<f64>,
    /// Ingress policing on the attack's receive queue ([`rqvs_datapath::policer`]): packets over
    /// the bucket are dropped before they are parsed or classified (`None`: off, as OVS).
    pub attack_policing: Option<PolicerSpec>,
}

impl ReplayConfig {
    /// The rule file as reports name it.
    pub fn rules_name(&self) -> String {
        self.rules.as_ref().map_or(inputs::DEFAULT_RULES_NAME.to_string(), |p| p.display().to_string())
    }

    /// The trace as reports name it.
    pub fn trace_name(&self) -> String {
        self.trace.as_ref().map_or(inputs::DEFAULT_TRACE_NAME.to_string(), |p| p.display().to_string())
    }
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            rules: None,
            trace: None,
            cd: false,
            emc: true,
            emc_prob: 0.01,
            emc_entries: rqvs_datapath::emc::EMC_ENTRIES,
            duration: None,
            passes: 1,
            rate: None,
            rx_ring: 4096,
            updates: None,
            verify: None,
            seed: 1,
            flow_limit: 200_000,
            revalidator: RevalidatorMode::Thread,
            policy: Policy::Instant,
            classifier: CflowsClassifier::NuevoMatch,
            retrain_threshold: 0.1,
            later_learned_min: usize::MAX,
            train_interval: 0.01,
            idle: 10.0,
            in_port: 1,
            pmds: 1,
            auto: AutoConfig::default(),
            mask_limit: None,
            mask_eviction: MaskEviction::default(),
            mfcguard: None,
            attack: None,
            attack_rate: None,
            attack_policing: None,
        }
    }
}
