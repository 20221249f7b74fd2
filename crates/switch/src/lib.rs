//! # rqvs-switch: the running switch
//!
//! `rqvs switch` as a library: ports ([`rqvs_ports`]) in, PMD threads ([`pmd`]) that take
//! batches of frames through a datapath design ([`rqvs_datapath::Design`]) and apply the
//! winning rule's actions to the frames' bytes ([`execute`]), ports out; a [`Control`] handle
//! through which the management socket ([`ctl`]) reads counters and changes rules.
//!
//! ```text
//!              ┌─ PMD 0: rx queue 0 of every port → extract → EMC → … → actions → tx queue 0 ─┐
//!  ports ──────┤                    misses ↓↑ verdicts (bounded queue)                         ├── ports
//!              │                  handler thread (slow path, shared OpenFlow table)            │
//!              └─ PMD 1: rx queue 1 of every port → extract → EMC → … → actions → tx queue 1 ─┘
//!                          ▲ messages between batches (rule changes, stats, dump-flows)
//!  management socket ── Control ── the OpenFlow table of record (ORIG/CCACHE PMDs share it)
//! ```
//!
//! **Threads.** One PMD thread per `--pmds`, optionally pinned (`--pmd-cpus`). Each owns one
//! receive and one transmit queue of every port (AF_PACKET fanout or AF_XDP queues spread the
//! flows; a flow stays on one PMD) and one design instance: ORIG and CCACHE PMDs have their own
//! EMC and megaflow cache over the one shared OpenFlow table, as in OVS. Their upcalls go to
//! one **handler thread** serving every PMD through a bounded queue ([`handler`]; overflow is
//! lost and counted), or with [`UpcallMode::Inline`] are handled by the PMD itself between
//! batches (OVS-DPDK's arrangement). CFLOWS PMDs share one learned classifier, owned by the
//! **manager thread** ([`manager`]: rule changes, model swaps from its one trainer) and
//! published to them with an atomic pointer swap; each PMD keeps its own EMC. One revalidator
//! thread serves every ORIG/CCACHE PMD (each PMD's megaflows kept apart), and one **trainer
//! thread** trains every CCACHE PMD's model over its megaflows, one job at a time
//! (`rqvs_ofproto::trainer`). The paper has a manager thread per PMD; here CFLOWS has one
//! classifier for all PMDs, so one manager owns it (a CCACHE PMD swaps its own model in between
//! batches). With `--design auto` ([`designs`]) each PMD runs its own controller moving it between
//! the three over these same shared structures. Nothing on the packet path takes a lock.
//!
//! **Rules.** The switch keeps the OpenFlow table of record ([`Control`], [`rqvs_ofproto::record`]): `add-flows` with a
//! match and priority already present replaces that flow (OpenFlow's add); `del-flows` removes
//! every flow whose match is at least as specific as a given one (OpenFlow's non-strict
//! delete), or all. Every change — a command, a bundle, a run of FLOW_MODs — is one transaction
//! on the record ([`rqvs_ofproto::record::Txn`]) whose net change is one atomic commit; ORIG/CCACHE PMDs then revalidate their
//! megaflows, CFLOWS' manager publishes the changed classifier; the call returns once every PMD
//! will meet the change at its next batch. Tables 0–254 and only the actions [`execute`]
//! applies are accepted; anything else is refused with the rule named.
//!
//! **Flows' counters and lives.** Each PMD counts every packet it decides for the rule that
//! decided it ([`flowstats`]); FLOW/AGGREGATE requests sum the PMDs' counts with what each flow
//! carries from the flows it replaced ([`Control::flow_stats`]). A flow's state — timeouts,
//! flags, creation and modification times — lives beside its rule in the record
//! ([`rqvs_ofproto::record::FlowMeta`]); the **expiry thread** ([`expiry`]) removes flows whose idle or hard
//! timeout passed through the same transaction path, and the removal of a flow with
//! SEND_FLOW_REM is an event for the OpenFlow connections ([`events`]).
//!
//! **OpenFlow** ([`openflow`]): a passive listener and active connections to controllers; a
//! `controller` action puts a packet-in into a bounded queue the PMD never waits on, and a
//! controller's PACKET_OUT reaches a PMD as a message and leaves through its transmit queues.
//! The `NORMAL` action ([`normal`]) is MAC learning over a lock-free table the PMDs share — what
//! a standalone switch without a controller fails open to.
//!
//! **Frames.** Every frame is accounted for ([`stats`]): per port `rx = forwarded +
//! to_controller + dropped + malformed + lost`; frames injected by PACKET_OUT apart.

pub mod attach;
pub mod bench;
pub mod bridges;
pub mod commit_pipeline;
pub mod control_groups;
pub mod crossing;
pub mod ctl;
pub mod designs;
pub mod diag;
pub mod events;
pub mod execute;
pub mod expiry;
pub mod fault;
pub mod flowstats;
pub mod handler;
pub mod in_band;
pub mod link;
pub mod manager;
pub mod metrics;
pub mod normal;
pub mod notify;
pub mod ofports;
pub mod openflow;
pub mod owner;
pub mod patch;
pub mod pidfile;
pub mod pmd;
pub mod portflags;
pub mod shared;
pub mod stats;
mod sys;
pub mod tls;
pub mod unixctl;
pub mod vswitchd;

use rqvs_ofproto::record::{check_rules, Counts, FlowFilter, FlowMeta, FlowOp, FlowSpec, NetChange, OpError};

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rqvs_datapath::ccache::CcacheConfig;
use rqvs_datapath::policer::{Policer, PolicerSpec};
use rqvs_datapath::revalidator::RevalidatorMode;
use rqvs_datapath::{AutoConfig, CflowsConfig, DatapathConfig, DesignKind, OrigConfig};
use rqvs_flow::formats::ofctl;
use rqvs_flow::{Action, FlowKey, Match, Rule, RuleId};
use rqvs_ofproto::table::RuleChange;
use rqvs_ofproto::{DpAction, OfprotoTable};
use rqvs_ports::{EventHook, PortConfig, PortHandle, PortSpec, PortStats};
use serde::Serialize;

use crate::pmd::{PmdFinal, PmdMsg, PmdSetup};
use crate::stats::{PmdReport, PortFrames};
use rqvs_ofproto::record::FlowTable;

/// A switch error: one line, naming the port, rule or setting.
#[derive(Debug)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Error> for OpError {
    fn from(e: Error) -> OpError {
        OpError::Invalid(e.0)
    }
}

impl std::error::Error for Error {}

fn err(s: impl Into<String>) -> Error {
    Error(s.into())
}

/// Where a port's frames come from.
pub enum PortSource {
    /// `--port` (an interface, or a capture file).
    Spec(PortSpec),
    /// An in-memory `pcap-in` port (the built-in workload, tests).
    Frames { name: String, frames: Vec<Vec<u8>> },
    /// An in-memory output port handing every frame to a function (in-process benchmarks).
    Tap { name: String, tap: rqvs_ports::FrameTap },
}

impl PortSource {
    fn name(&self) -> String {
        match self {
            PortSource::Spec(s) => s.to_string(),
            PortSource::Frames { name, .. } => format!("pcap-in:{name}"),
            PortSource::Tap { name, .. } => format!("tap:{name}"),
        }
    }
}

/// How to run the switch.
pub struct SwitchConfig {
    /// Ports, numbered 1, 2, ... in this order (their OpenFlow port numbers) unless
    /// `ofports` numbers them.
    pub ports: Vec<PortSource>,
    /// Each port's OpenFlow port number, by index (1..=0xfeff or `LOCAL`, [`ofports`]); empty:
    /// 1..N in order.
    pub ofports: Vec<u32>,
    pub rules: Vec<Rule>,
    pub design: DesignKind,
    pub pmds: usize,
    /// CPUs to pin PMD thread i to (`pmd_cpus[i % len]`); empty: unpinned.
    pub pmd_cpus: Vec<usize>,
    /// Spin when idle (OVS-DPDK); otherwise an idle PMD naps 50 µs after 1024 empty polls.
    pub busy_poll: bool,
    /// How `afpacket` ports receive: a TPACKET_V3 ring, or `recvmsg` per frame (no block timer).
    pub rx_mode: rqvs_ports::RxMode,
    /// Where `afxdp` ports attach their XDP program (auto: driver mode when the driver takes it).
    pub xdp_mode: rqvs_ports::XdpMode,
    /// Where upcalls (ORIG, CCACHE) are handled.
    pub upcalls: UpcallMode,
    pub datapath: DatapathConfig,
    pub orig: OrigConfig,
    pub ccache: CcacheConfig,
    pub cflows: CflowsConfig,
    /// `--design auto`: each PMD's controller ([`designs`]).
    pub auto: AutoConfig,
    /// Where port events go (link changes, end of input, first errors).
    pub hook: Option<EventHook>,
    /// How many times `pcap-in` ports deliver their frames (1: once; `u64::MAX`: until stopped).
    pub input_loops: u64,
    /// Give the PMDs a packet-in queue for an OpenFlow channel to take
    /// ([`Control::take_packet_in_queue`]); without one, `controller` actions only count.
    pub packet_in: bool,
    /// Ingress policing per port, by port − 1 (missing or `None`: not policed): OVS's
    /// `ingress_policing_kpkts_rate`/`_burst` ([`rqvs_datapath::policer`]). Each PMD polls its
    /// own queue of a port with its own bucket, of the rate and burst divided by the PMDs.
    pub policing: Vec<Option<PolicerSpec>>,
    /// The `NORMAL` action's MAC table: entries at most (OVS's `mac-table-size`) and how long an
    /// idle station stays (OVS's `mac-aging-time`) ([`normal`]).
    pub mac_table_size: usize,
    pub mac_aging: std::time::Duration,
    /// The VLANs each port carries for `NORMAL`, by index (empty: every port every VLAN;
    /// OVS's `Port.tag`/`trunks`/`vlan_mode`, [`normal::PortVlan`]).
    pub port_vlans: Vec<normal::PortVlan>,
    /// Ports are attached and removed while running ([`Control::add_port`],
    /// [`Control::remove_port`]; `rqvs switch --ovsdb`): the switch may start with none, and
    /// its PMDs run until stopped.
    pub live_ports: bool,
    /// Run on the datapath's shared PMD threads instead of threads of its own (several bridges
    /// in one process: [`shared`]); `pmds` and `pmd_cpus` are then the shared threads'.
    pub shared: Option<Arc<shared::SharedPmds>>,
    /// The slow path's prefix fields of the tables that have their own (a bridge's
    /// `Flow_Table:prefixes`, by table); the others take the process's default (`--prefixes`,
    /// else OVS's `nw_dst,nw_src`).
    pub prefixes: Vec<(u8, rqvs_classify::ofproto::PrefixFields)>,
    /// Groups the switch starts with (as if added by GROUP_MODs before any frame), so that
    /// `rules` may name them from the first frame on.
    pub groups: Vec<rqvs_flow::group::Group>,
}

impl SwitchConfig {
    /// One PMD, unpinned, OVS's defaults (revalidator on its own thread).
    pub fn new(ports: Vec<PortSource>, rules: Vec<Rule>, design: DesignKind) -> SwitchConfig {
        SwitchConfig {
            ports,
            ofports: Vec::new(),
            rules,
            design,
            pmds: 1,
            pmd_cpus: Vec::new(),
            busy_poll: false,
            rx_mode: rqvs_ports::RxMode::Throughput,
            xdp_mode: rqvs_ports::XdpMode::Auto,
            upcalls: UpcallMode::Handler,
            datapath: DatapathConfig::default(),
            orig: OrigConfig { revalidator: RevalidatorMode::Thread, ..OrigConfig::default() },
            ccache: CcacheConfig::default(),
            cflows: CflowsConfig::default(),
            auto: AutoConfig::default(),
            hook: None,
            input_loops: 1,
            packet_in: false,
            policing: Vec::new(),
            mac_table_size: normal::DEFAULT_SIZE,
            mac_aging: normal::DEFAULT_AGING,
            port_vlans: Vec::new(),
            live_ports: false,
            shared: None,
            prefixes: Vec::new(),
            groups: Vec::new(),
        }
    }
}

/// Where the switch's slow path runs (ORIG, CCACHE; CFLOWS has no upcalls).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpcallMode {
    /// One handler thread serves every PMD through bounded queues ([`handler`]).
    Handler,
    /// Each PMD runs the slow path itself between batches (OVS-DPDK's arrangement).
    Inline,
}

/// The priority of the fail-open rule (Open vSwitch's `FAIL_OPEN_PRIORITY`): above every
/// OpenFlow priority.
pub const FAIL_OPEN_PRIORITY: u32 = 0xf0_f0f0;

/// Waits for the PMDs' answers to table changes, each up to [`APPLY_WAIT`] (a stopped PMD
/// answers by dropping its sender; one that does not answer in time is logged).
fn wait_revalidated(answers: impl Iterator<Item = mpsc::Receiver<()>>, version: u64) {
    for r in answers {
        if let Err(mpsc::RecvTimeoutError::Timeout) = r.recv_timeout(APPLY_WAIT) {
            crate::log_warn!(
                "rqvs switch: a PMD has not revalidated for table version {version} after {} s; not waiting any longer",
                APPLY_WAIT.as_secs()
            );
        }
    }
}

/// A running switch.
pub struct Switch {
    threads: Vec<PmdThread>,
    handler: Option<handler::Handler>,
    manager: Option<manager::Manager>,
    /// The expiry thread (idle and hard timeouts, [`expiry`]).
    expiry: Option<JoinHandle<()>>,
    /// The link watcher ([`link`]).
    link: Option<JoinHandle<()>>,
    control: Arc<Control>,
}

/// A PMD of the switch: a thread of its own, or its loop on a shared thread ([`shared`]).
enum PmdThread {
    Own(JoinHandle<PmdFinal>),
    Shared(mpsc::Receiver<PmdFinal>),
}

/// What the switch keeps of each port by datapath index, removed ones included ([`attach`]).
pub(crate) struct PortInfo {
    /// As `show` names it (`PortSource::name`).
    pub(crate) name: String,
    /// The interface port's spec (`None`: files, in-memory), to open it again; `None` too once
    /// removed (never re-attached).
    pub(crate) spec: Option<PortSpec>,
    /// Its ingress policer's setting (`SwitchConfig::policing`).
    pub(crate) policing: Option<PolicerSpec>,
    /// Its OpenFlow number, kept after it is removed (`show` names it so).
    pub(crate) ofport: u32,
    pub(crate) removed: bool,
    /// The interface's lock ([`owner`]), released when the port is removed or the switch stops.
    pub(crate) lock: Option<owner::PortLock>,
}

/// The switch's management handle: counters, flows, rule changes, stop. Shared with the
/// management socket's thread.
pub struct Control {
    design: DesignKind,
    inboxes: Vec<Sender<PmdMsg>>,
    /// The ports' current handles (a re-attached port gets a new one: [`link`]).
    ports: std::sync::RwLock<Vec<PortHandle>>,
    /// Each port's handles from before its re-attachments (their counters still count).
    retired: Mutex<Vec<Vec<PortHandle>>>,
    /// Each port's name, spec, policer and lock, by index ([`PortInfo`]).
    port_info: std::sync::RwLock<Vec<PortInfo>>,
    /// How the ports were opened.
    port_config: PortConfig,
    /// The ports' OpenFlow numbers ([`ofports`]): replaced whole when a port is attached or
    /// removed ([`attach`]).
    ofports: std::sync::RwLock<Arc<ofports::OfPorts>>,
    /// Ports are attached and removed while running ([`SwitchConfig::live_ports`]); one such
    /// change at a time.
    live_ports: bool,
    port_change: Mutex<()>,
    pmd_cpus: Vec<Option<usize>>,
    /// The slow path's OpenFlow table with the groups: shared with the ORIG/CCACHE PMDs, the
    /// handler and the revalidator; in CFLOWS the tables after 0, which its PMDs walk past the
    /// learned table 0 (see `trace_table`).
    table: OfprotoTable,
    /// CFLOWS: the slow path's table of the record for `trace`, built when asked and dropped at
    /// every rule change (`None`).
    trace_table: Mutex<Option<OfprotoTable>>,
    /// [`SwitchConfig::prefixes`], for the tables built on demand ([`Control::whole_table`]);
    /// changed by [`Control::set_prefixes`].
    prefixes: Mutex<Vec<(u8, rqvs_classify::ofproto::PrefixFields)>>,
    rules: Mutex<FlowTable>,
    /// CFLOWS: an OpenFlow connection's run of FLOW_MODs the manager has not answered yet
    /// ([`commit_pipeline`]); locked only with `rules` held.
    inflight: Mutex<commit_pipeline::InFlight>,
    /// ORIG/CCACHE: the PMDs' answers to table changes committed without waiting (a run of
    /// FLOW_MODs, an expiry), waited for at the next change that waits or at
    /// [`Control::settle_changes`] (an OpenFlow BARRIER).
    unsettled: Mutex<Vec<mpsc::Receiver<()>>>,
    /// The handler thread's counters (when there is one).
    handler: Option<Arc<handler::HandlerStats>>,
    /// The CFLOWS manager thread's queue (CFLOWS only).
    manager: Mutex<Option<Sender<manager::ManagerMsg>>>,
    stop: Arc<AtomicBool>,
    /// The switch's clock base (flows' times count from it) and start time.
    started: std::time::Instant,
    /// Per-flow counters of the PMD threads that have ended.
    parting: flowstats::Parting,
    /// Where events go ([`events`]: the OpenFlow channel).
    sinks: Mutex<Vec<events::EventSink>>,
    /// The `NORMAL` action's MAC table (shared with the PMDs).
    macs: Arc<normal::MacTable>,
    /// The ports' PORT_MOD bits ([`portflags`]), shared with the PMDs' executors.
    port_flags: Arc<portflags::PortFlags>,
    /// The packet-in queue's receiving end, until the OpenFlow channel takes it.
    packet_ins: Mutex<Option<mpsc::Receiver<execute::PacketIn>>>,
    /// Packet-outs sent to PMDs so far (spreads them over the PMDs).
    packet_outs: std::sync::atomic::AtomicUsize,
    /// The meters ([`rqvs_ofproto::meters`], shared with the PMDs).
    meters: Arc<rqvs_ofproto::meters::MeterTable>,
    /// In-band control's hidden rules as installed ([`Control::set_in_band`]).
    in_band: Mutex<Vec<Rule>>,
}

impl Switch {
    /// Opens every port (all or none: on failure what was opened is closed), builds one
    /// design per PMD and starts the PMD threads.
    pub fn start(mut cfg: SwitchConfig) -> Result<Switch, Error> {
        if cfg.ports.is_empty() && !cfg.live_ports {
            return Err(err("a switch needs at least one port"));
        }
        check_rules(&cfg.rules).map_err(err)?;
        let ofports = Arc::new(if cfg.ofports.is_empty() {
            ofports::OfPorts::identity(cfg.ports.len())
        } else if cfg.ofports.len() != cfg.ports.len() {
            return Err(err(format!("{} OpenFlow port numbers for {} ports", cfg.ofports.len(), cfg.ports.len())));
        } else {
            ofports::OfPorts::new(cfg.ofports.clone()).map_err(err)?
        });
        let pmds = cfg.shared.as_ref().map_or(cfg.pmds.max(1), |s| s.len());
        let pcfg = PortConfig {
            queues: pmds,
            hook: cfg.hook.clone(),
            pcap: rqvs_ports::PcapConfig { loops: cfg.input_loops.max(1) },
            afpacket: rqvs_ports::AfPacketConfig { rx_mode: cfg.rx_mode, ..Default::default() },
            afxdp: rqvs_ports::AfXdpConfig { mode: cfg.xdp_mode, ..Default::default() },
        };
        // One port, one owner ([`owner`]): the interfaces' locks before any port is opened.
        let mut locks: Vec<Option<owner::PortLock>> = cfg.ports.iter().map(|_| None).collect();
        for (i, src) in cfg.ports.iter().enumerate() {
            if let PortSource::Spec(spec) = src {
                if matches!(spec.port_type, rqvs_ports::PortType::AfPacket | rqvs_ports::PortType::AfXdp) {
                    if cfg.ports[..i].iter().any(|p| matches!(p, PortSource::Spec(s) if s.name == spec.name && matches!(s.port_type, rqvs_ports::PortType::AfPacket | rqvs_ports::PortType::AfXdp))) {
                        return Err(err(format!(
                            "port {} ({spec}): interface {} is given twice",
                            ofports::ofport_name(ofports.ofport(i)),
                            spec.name
                        )));
                    }
                    locks[i] =
                        Some(owner::acquire(&spec.name).map_err(|e| {
                            err(format!("port {} ({spec}): {e}", ofports::ofport_name(ofports.ofport(i))))
                        })?);
                }
            }
        }
        let mut opened = Vec::new();
        for (i, src) in cfg.ports.iter().enumerate() {
            let port = match src {
                PortSource::Spec(spec) => rqvs_ports::open(spec, &pcfg)
                    .map_err(|e| err(format!("port {} ({spec}): {e}", ofports::ofport_name(ofports.ofport(i)))))?,
                PortSource::Frames { name, frames } => rqvs_ports::open_frames(name, frames, &pcfg),
                PortSource::Tap { name, tap } => rqvs_ports::open_tap(name, tap.clone(), &pcfg),
            };
            opened.push(port);
        }
        // The table of record first: a later flow of an equal (priority, match) replaces an
        // earlier one, and the datapath is built from what it keeps, so the two agree.
        let mut record = FlowTable::new(std::mem::take(&mut cfg.rules));
        if !cfg.groups.is_empty() {
            // The starting groups: in the record here, in the datapath's table below.
            let mut txn = record.txn(0);
            for g in &cfg.groups {
                let add = FlowOp::Group(rqvs_openflow::group::GroupModCommand::Add, g.clone());
                txn.apply(&add).map_err(|e| err(format!("group {}: {e}", g.id)))?;
            }
            txn.keep();
        }
        // The datapath holds every table's flows: the translation walks the pipeline.
        let rules: Vec<Rule> = record.iter().cloned().collect();
        // CFLOWS' learned classifier holds table 0; the shared table holds the tables after it
        // (the pipeline the PMDs walk past table 0) and the groups, so a one-table switch pays
        // nothing for it. `trace` builds a whole table when asked ([`Control::trace`]).
        let (t0, table) = if cfg.design == DesignKind::Cflows {
            let (t0, rest): (Vec<Rule>, Vec<Rule>) = rules.iter().cloned().partition(|r| r.table == 0);
            (t0, OfprotoTable::build_with_prefixes(&rest, &cfg.prefixes))
        } else if cfg.design == DesignKind::Auto {
            (
                rules.iter().filter(|r| r.table == 0).cloned().collect(),
                OfprotoTable::build_with_prefixes(&rules, &cfg.prefixes),
            )
        } else {
            (Vec::new(), OfprotoTable::build_with_prefixes(&rules, &cfg.prefixes))
        };
        let table = table.map_err(|e| err(format!("rules: {e}")))?;
        if !cfg.groups.is_empty() {
            table
                .commit(cfg.groups.iter().cloned().map(RuleChange::Group).collect())
                .map_err(|e| err(format!("groups: {e}")))?;
        }
        let mut handles = Vec::new();
        let mut rx: Vec<Vec<_>> = (0..pmds).map(|_| Vec::new()).collect();
        let mut tx: Vec<Vec<_>> = (0..pmds).map(|_| Vec::new()).collect();
        for port in opened {
            let (h, r, t) = port.split();
            handles.push(h);
            for (i, q) in r.into_iter().enumerate() {
                rx[i].push(q);
            }
            for (i, q) in t.into_iter().enumerate() {
                tx[i].push(q);
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let port_flags = Arc::new(portflags::PortFlags::new());
        let macs =
            Arc::new(normal::MacTable::with(cfg.mac_table_size, cfg.mac_aging).with_port_vlans(
                cfg.port_vlans.iter().enumerate().map(|(i, v)| (ofports.ofport(i), v.clone())).collect(),
            ));
        let (packet_in_tx, packet_in_rx) = if cfg.packet_in {
            let (t, r) = mpsc::sync_channel(execute::PACKET_IN_QUEUE);
            (Some(t), Some(r))
        } else {
            (None, None)
        };
        let handler_thread = cfg.upcalls == UpcallMode::Handler && cfg.design != DesignKind::Cflows;
        let (designs, publisher) = designs::build(&cfg, &rules, &t0, &table, handler_thread, pmds)?;
        let cpus: Vec<Option<usize>> = match &cfg.shared {
            Some(s) => s.cpus().to_vec(),
            None => {
                (0..pmds).map(|i| (!cfg.pmd_cpus.is_empty()).then(|| cfg.pmd_cpus[i % cfg.pmd_cpus.len()])).collect()
            }
        };
        let (manager, manager_inbox) = match publisher {
            Some(p) => {
                let (m, inbox) = manager::Manager::spawn(p, stop.clone())
                    .map_err(|e| err(format!("starting the CFLOWS manager thread: {e}")))?;
                (Some(m), Some(inbox))
            }
            None => (None, None),
        };
        // The handler thread, and each PMD's ends of its queues.
        let mut links: Vec<Option<pmd::HandlerLink>> = (0..pmds).map(|_| None).collect();
        let mut handler = None;
        if handler_thread {
            let (replies, answers): (Vec<_>, Vec<_>) = (0..pmds).map(|_| mpsc::channel()).unzip();
            let (h, to) = handler::Handler::spawn(table.clone(), replies, stop.clone())
                .map_err(|e| err(format!("starting the handler thread: {e}")))?;
            for (link, from) in links.iter_mut().zip(answers) {
                *link = Some(pmd::HandlerLink { to: to.clone(), from, cap: cfg.orig.upcall_queue });
            }
            handler = Some(h);
        }
        let handler_stats = handler.as_ref().map(|h: &handler::Handler| h.stats.clone());
        let started = std::time::Instant::now();
        let parting = flowstats::Parting::new(pmds);
        let meter_table = Arc::new(rqvs_ofproto::meters::MeterTable::new());
        let mut inboxes = Vec::new();
        let mut threads = Vec::new();
        for (i, (((design, rx), tx), link)) in designs.into_iter().zip(rx).zip(tx).zip(links).enumerate() {
            let (send, inbox) = mpsc::channel();
            inboxes.push(send);
            let policers = (0..rx.len())
                .map(|p| cfg.policing.get(p).copied().flatten().map(|spec| Policer::new(spec, pmds, 0)))
                .collect();
            let setup = PmdSetup {
                index: i,
                cpu: cpus[i],
                rx: rx.into_iter().map(Some).collect(),
                policers,
                tx_of: (0..tx.len()).collect(),
                tx,
                live_ports: cfg.live_ports,
                design,
                inbox,
                stop: stop.clone(),
                busy_poll: cfg.busy_poll,
                handler: link,
                parting: parting.clone(),
                macs: macs.clone(),
                port_flags: port_flags.clone(),
                ofports: ofports.clone(),
                packet_in: packet_in_tx.clone(),
                meters: meter_table.clone(),
                queue_retired: vec![rqvs_ports::QueueStats::default(); cfg.ports.len()],
                queue_base: vec![rqvs_ports::QueueStats::default(); cfg.ports.len()],
            };
            if let Some(shared) = &cfg.shared {
                threads.push(PmdThread::Shared(shared.join(setup)?));
                continue;
            }
            let pmd_stop = stop.clone();
            let t = std::thread::Builder::new()
                .name(format!("pmd{i}"))
                .spawn(move || fault::guard(&format!("PMD thread {i}"), &pmd_stop, || pmd::run(setup)))
                .map_err(|e| err(format!("starting PMD thread {i}: {e}")))?;
            threads.push(PmdThread::Own(t));
        }
        let port_info = cfg
            .ports
            .iter()
            .zip(locks)
            .enumerate()
            .map(|(i, (p, lock))| PortInfo {
                name: p.name(),
                spec: match p {
                    PortSource::Spec(s)
                        if matches!(s.port_type, rqvs_ports::PortType::AfPacket | rqvs_ports::PortType::AfXdp) =>
                    {
                        Some(s.clone())
                    }
                    _ => None,
                },
                policing: cfg.policing.get(i).copied().flatten(),
                ofport: ofports.ofport(i),
                removed: false,
                lock,
            })
            .collect();
        let control = Arc::new(Control {
            design: cfg.design,
            inboxes,
            ofports: std::sync::RwLock::new(ofports.clone()),
            port_info: std::sync::RwLock::new(port_info),
            live_ports: cfg.live_ports,
            port_change: Mutex::new(()),
            retired: Mutex::new(handles.iter().map(|_| Vec::new()).collect()),
            ports: std::sync::RwLock::new(handles),
            port_config: pcfg,
            pmd_cpus: cpus,
            table,
            trace_table: Mutex::new(None),
            prefixes: Mutex::new(cfg.prefixes.clone()),
            rules: Mutex::new(record),
            inflight: Mutex::new(commit_pipeline::InFlight::default()),
            unsettled: Mutex::new(Vec::new()),
            handler: handler_stats,
            manager: Mutex::new(manager_inbox),
            stop,
            started,
            parting,
            sinks: Mutex::new(Vec::new()),
            macs,
            port_flags,
            packet_ins: Mutex::new(packet_in_rx),
            packet_outs: std::sync::atomic::AtomicUsize::new(0),
            meters: meter_table,
            in_band: Mutex::new(Vec::new()),
        });
        let expiry = expiry::spawn(control.clone()).map_err(|e| err(format!("starting the expiry thread: {e}")))?;
        let link = link::spawn(control.clone()).map_err(|e| err(format!("starting the link watcher thread: {e}")))?;
        Ok(Switch { threads, handler, manager, expiry: Some(expiry), link: Some(link), control })
    }

    pub fn control(&self) -> Arc<Control> {
        self.control.clone()
    }

    /// True once every PMD thread has ended (all input was offline and is done, or stopped).
    /// On shared PMD threads ([`SwitchConfig::shared`]) the switch runs until stopped: false.
    pub fn is_finished(&self) -> bool {
        self.threads.iter().all(|t| match t {
            PmdThread::Own(t) => t.is_finished(),
            PmdThread::Shared(_) => false,
        })
    }

    /// Stops the PMD threads (each finishes its batch and flushes), then closes the ports.
    /// Returns the final report.
    pub fn stop(mut self) -> Result<FinalReport, Error> {
        self.control.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.expiry.take() {
            if t.join().is_err() {
                return Err(err("the expiry thread panicked (a bug: please report it)"));
            }
        }
        if let Some(t) = self.link.take() {
            if t.join().is_err() {
                return Err(err("the link watcher thread panicked (a bug: please report it)"));
            }
        }
        let mut pmds = Vec::new();
        for (i, t) in self.threads.into_iter().enumerate() {
            let f = match t {
                PmdThread::Own(t) => t.join().ok(),
                PmdThread::Shared(r) => r.recv().ok(),
            };
            match f {
                Some(f) => pmds.push(f.report),
                None => return Err(err(format!("PMD thread {i} panicked (a bug: please report it)"))),
            }
        }
        // The interfaces' locks go with the ports (the PMDs, which held their queues, ended).
        for p in self.control.port_info.write().unwrap_or_else(|e| e.into_inner()).iter_mut() {
            p.lock = None;
        }
        // The manager ends when its queue closes.
        if let Ok(mut m) = self.control.manager.lock() {
            m.take();
        }
        if let Some(m) = self.manager {
            if !m.join() {
                return Err(err("the CFLOWS manager thread panicked (a bug: please report it)"));
            }
        }
        // The PMDs held the handler's queue; it ends now.
        if let Some(h) = self.handler {
            if !h.join() {
                return Err(err("the handler thread panicked (a bug: please report it)"));
            }
        }
        Ok(self.control.show_with(pmds))
    }
}

/// A port in `show` and in the final report.
#[derive(Clone, Debug, Serialize)]
pub struct PortReport {
    pub port: u32,
    pub name: String,
    pub link: String,
    pub queues: usize,
    pub rx_packets: u64,
    /// Bytes of the frames counted in `rx_packets` (as received, before any rewrite).
    pub rx_bytes: u64,
    pub rx_lost: u64,
    pub rx_errors: u64,
    pub tx_packets: u64,
    /// Bytes of the frames counted in `tx_packets`.
    pub tx_bytes: u64,
    pub tx_dropped: u64,
    pub tx_errors: u64,
    /// What the PMDs did with this port's frames (summed over PMDs).
    pub frames: PortFrames,
    /// The port's ingress policer, in OVS's units and names (thousands of packets per second,
    /// thousands of packets); 0 and 0: not policed.
    pub ingress_policing_kpkts_rate: f64,
    pub ingress_policing_kpkts_burst: f64,
    /// The port's OpenFlow `config` bits as PORT_DESC reports them (PORT_MOD's, `PORT_DOWN`
    /// while the interface is administratively down), `ovs-ofctl show`'s names; `0`: none.
    pub config: String,
}

/// Everything at the end of a run (or at `show`).
#[derive(Clone, Debug, Serialize)]
pub struct FinalReport {
    pub design: &'static str,
    pub rules: usize,
    pub uptime_s: f64,
    pub ports: Vec<PortReport>,
    pub pmds: Vec<PmdReport>,
    pub total: PortFrames,
    /// Copies staged for output by the PMDs, and the transmit side's count of them
    /// (`tx_packets + tx_dropped` over the ports).
    pub outputs: u64,
    pub tx_accounted: u64,
    /// Frames injected by PACKET_OUT and what became of them (summed over PMDs).
    pub injected: PortFrames,
    /// Packet-ins queued for the OpenFlow channel, and dropped because the queue was full.
    pub packet_ins: u64,
    pub packet_in_dropped: u64,
}

impl FinalReport {
    /// Every frame accounted for: per port and in total `rx = forwarded + to_controller +
    /// dropped + malformed + lost`, the ports' `rx_packets` equal to what the PMDs took, the
    /// injected frames the same way, and every output copy (of received and injected frames)
    /// sent or counted as dropped.
    pub fn balanced(&self) -> bool {
        self.total.balanced()
            && self.injected.balanced()
            && self.ports.iter().all(|p| p.frames.balanced() && p.frames.rx == p.rx_packets)
            && self.outputs == self.tx_accounted
    }

    /// The one-screen summary printed when the switch stops.
    pub fn format(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "rqvs switch ({}, {} rules, {} PMD threads, {:.3} s)",
            self.design,
            self.rules,
            self.pmds.len(),
            self.uptime_s
        );
        let w = self.ports.iter().map(|p| p.name.len()).max().unwrap_or(4).max(4);
        let _ = writeln!(
            s,
            "  {:>4}  {:<w$} {:>5}  {:>10} {:>10} {:>8} {:>9} {:>9} {:>9} {:>7}  {:>10} {:>9}  {:>12} {:>12}",
            "port",
            "name",
            "link",
            "rx",
            "forwarded",
            "to_ctl",
            "dropped",
            "malformed",
            "lost",
            "rx_lost",
            "tx",
            "tx_drop",
            "rx_bytes",
            "tx_bytes"
        );
        for p in &self.ports {
            let f = &p.frames;
            let _ = writeln!(
                s,
                "  {:>4}  {:<w$} {:>5}  {:>10} {:>10} {:>8} {:>9} {:>9} {:>9} {:>7}  {:>10} {:>9}  {:>12} {:>12}",
                p.port,
                p.name,
                p.link,
                p.rx_packets,
                f.forwarded,
                f.to_controller,
                f.dropped,
                f.malformed,
                f.lost,
                p.rx_lost,
                p.tx_packets,
                p.tx_dropped,
                p.rx_bytes,
                p.tx_bytes
            );
        }
        for p in self.ports.iter().filter(|p| p.ingress_policing_kpkts_rate > 0.0) {
            let spec = PolicerSpec { kpps: p.ingress_policing_kpkts_rate, burst_kpkts: p.ingress_policing_kpkts_burst };
            let _ = writeln!(
                s,
                "  port {} ({}): ingress policing {}: {} frames policed",
                p.port,
                p.name,
                spec.describe(),
                p.frames.policed
            );
        }
        portflags::show_lines(&mut s, &self.ports);
        let t = &self.total;
        if self.packet_ins + self.packet_in_dropped + self.injected.rx > 0 {
            let i = &self.injected;
            let _ = writeln!(
                s,
                "  controller: {} packet-ins sent, {} dropped (queue full); {} packet-outs injected = forwarded {} + to controller {} + dropped {}",
                self.packet_ins, self.packet_in_dropped, i.rx, i.forwarded, i.to_controller, i.dropped
            );
        }
        let _ = writeln!(
            s,
            "  total: rx {} = forwarded {} + to_controller {} + dropped {}{} + malformed {} + lost {}; outputs {} = tx + tx_dropped {} ({})",
            t.rx,
            t.forwarded,
            t.to_controller,
            t.dropped,
            t.drop_detail(),
            t.malformed,
            t.lost,
            self.outputs,
            self.tx_accounted,
            if self.balanced() { "every frame accounted for" } else { "MISMATCH" }
        );
        s
    }
}

impl Control {
    pub fn design(&self) -> DesignKind {
        self.design
    }

    /// Asks the switch to stop (the `exit` command; SIGINT/SIGTERM).
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Sends every PMD the message `make` builds around a reply channel, then collects the
    /// answers: `(pmd, answer)` of each PMD that answered within [`REPLY_WAIT`] (a stopped PMD
    /// does not).
    fn ask<T>(&self, make: impl Fn(Sender<T>) -> PmdMsg) -> Vec<(usize, T)> {
        let replies: Vec<_> = self
            .inboxes
            .iter()
            .map(|i| {
                let (s, r) = mpsc::channel();
                i.send(make(s)).ok().map(|()| r)
            })
            .collect();
        replies
            .into_iter()
            .enumerate()
            .filter_map(|(i, r)| r.and_then(|r| r.recv_timeout(REPLY_WAIT).ok()).map(|t| (i, t)))
            .collect()
    }

    /// The handler thread's `(upcalls, batches, busy ns)` since start, when there is one.
    pub fn handler_stats(&self) -> Option<(u64, u64, u64)> {
        self.handler.as_ref().map(|h| {
            let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
            (get(&h.upcalls), get(&h.batches), get(&h.busy_ns))
        })
    }

    /// Each PMD's counters (since the last clear); a PMD that has ended gives its last ones.
    pub fn pmd_stats(&self) -> Vec<PmdReport> {
        self.pmd_reports(true)
    }

    /// Each PMD's counters since it started (`pmd-stats-clear` does not touch them).
    pub fn pmd_totals(&self) -> Vec<PmdReport> {
        self.pmd_reports(false)
    }

    /// Every PMD's report: from the PMD, or, for one that has ended, its last one.
    fn pmd_reports(&self, since_clear: bool) -> Vec<PmdReport> {
        let mut got: Vec<Option<PmdReport>> = self.inboxes.iter().map(|_| None).collect();
        for (i, r) in self.ask(|reply| PmdMsg::Stats { since_clear, reply }) {
            got[i] = Some(r);
        }
        got.into_iter().enumerate().filter_map(|(i, r)| r.or_else(|| self.parting.report(i, since_clear))).collect()
    }

    /// Clears the counters `pmd-stats-show` reports; returns once every running PMD has taken
    /// its baseline (a frame that arrives after the return counts as after the clear).
    pub fn pmd_stats_clear(&self) {
        self.ask(PmdMsg::Clear);
    }

    /// Nanoseconds on the switch's clock (flows' times are on it: [`rqvs_ofproto::record::FlowMeta`]).
    pub fn clock_ns(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    /// Megaflows per PMD, in `ovs-appctl dpctl/dump-flows` notation.
    pub fn dump_flows(&self) -> Vec<(usize, Vec<String>)> {
        self.ask(PmdMsg::DumpFlows)
    }

    /// The ports with their counters, and the PMDs' view of their frames.
    pub fn show(&self) -> FinalReport {
        self.show_with(self.pmd_stats())
    }

    /// [`Control::show`] over reports already gathered (`pmd_stats` or `pmd_totals`).
    pub fn show_with(&self, pmds: Vec<PmdReport>) -> FinalReport {
        let mut total = PortFrames::default();
        let mut injected = PortFrames::default();
        let (mut outputs, mut packet_ins, mut packet_in_dropped) = (0, 0, 0);
        let info = self.lock_ports();
        let mut per_port = vec![PortFrames::default(); info.len()];
        // The ports' counters at the last clear, as each PMD took them (empty: since start).
        let mut base = vec![rqvs_ports::QueueStats::default(); info.len()];
        for p in &pmds {
            for (b, q) in base.iter_mut().zip(&p.port_base) {
                b.add(q);
            }
            total.add(&p.total);
            injected.add(&p.injected);
            outputs += p.outputs;
            packet_ins += p.packet_ins;
            packet_in_dropped += p.packet_in_dropped;
            // (A PMD never has more ports than the switch: a port is in `port_info` before
            // any PMD is told of it.)
            for (pp, f) in per_port.iter_mut().zip(&p.ports) {
                pp.add(f);
            }
        }
        // Removed ports too (`link` "removed"): their frames are in the totals.
        let ports: Vec<PortReport> = (0..info.len())
            .map(|i| {
                let h = self.port(i);
                let mut s: PortStats = self.port_stats(i);
                s.total = s.total.minus(&base[i]);
                PortReport {
                    port: info[i].ofport,
                    name: info[i].name.clone(),
                    link: if info[i].removed { "removed".into() } else { format!("{:?}", s.link).to_lowercase() },
                    queues: h.queues(),
                    rx_packets: s.total.rx_packets,
                    rx_bytes: s.total.rx_bytes,
                    rx_lost: s.total.rx_lost,
                    rx_errors: s.total.rx_errors,
                    tx_packets: s.total.tx_packets,
                    tx_bytes: s.total.tx_bytes,
                    tx_dropped: s.total.tx_dropped,
                    tx_errors: s.total.tx_errors,
                    frames: per_port[i],
                    ingress_policing_kpkts_rate: info[i].policing.map_or(0.0, |p| p.kpps),
                    ingress_policing_kpkts_burst: info[i].policing.map_or(0.0, |p| p.burst_kpkts),
                    config: portflags::names(self.port_config_bits(i)),
                }
            })
            .collect();
        drop(info);
        let tx_accounted = ports.iter().map(|p| p.tx_packets + p.tx_dropped).sum();
        FinalReport {
            design: self.design.name(),
            rules: self.lock_rules().len(),
            uptime_s: self.started.elapsed().as_secs_f64(),
            ports,
            pmds,
            total,
            outputs,
            tx_accounted,
            injected,
            packet_ins,
            packet_in_dropped,
        }
    }

    fn lock_rules(&self) -> std::sync::MutexGuard<'_, FlowTable> {
        // A panic while holding the lock happens before any change is made (changes are
        // committed last), so the map is consistent.
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        // A connection's run in flight is finished first: no one else sees it unanswered
        // ([`commit_pipeline`]).
        let events = self.finish_in_flight(&mut rules);
        if !events.is_empty() {
            drop(rules);
            self.emit(events);
            rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        }
        rules
    }

    /// The rules, in ovs-ofctl syntax (`dump-flows`' OpenFlow half), winner order; a flow hidden
    /// from OpenFlow (the fail-open rule) as a comment line.
    pub fn flows(&self) -> Vec<String> {
        let rules = self.lock_rules();
        let mut v: Vec<&Rule> = rules.iter().collect();
        v.sort_by_key(|r| r.rank());
        v.iter()
            .flat_map(|r| {
                if rules.is_hidden(r) {
                    let what = if r.priority == FAIL_OPEN_PRIORITY { "fail-open" } else { "in-band" };
                    return vec![format!("# {what} rule (hidden from OpenFlow): {}", flow_line(r))];
                }
                ofctl::format_flows(r).unwrap_or_else(|e| vec![format!("# rule {}: {e}", r.id)])
            })
            .collect()
    }

    /// `ofproto/trace`: the slow path's answer for a packet written as an ovs-ofctl match
    /// (`in_port=1,tcp,nw_src=10.0.0.1,tp_dst=80`; unspecified fields are 0).
    pub fn trace(&self, flow: &str) -> Result<String, Error> {
        let key = patch::parse_flow(flow)?;
        // The one translation (rqvs_ofproto::xlate), as the handler runs it.
        let trace = |t: &OfprotoTable| {
            let r = t.read();
            let (x, lines) = rqvs_ofproto::xlate::xlate_traced(r.classifier(), r.groups(), &key);
            rqvs_ofproto::xlate::trace_text("rqvs", &key, &x, &lines)
        };
        if self.design != DesignKind::Cflows {
            return Ok(trace(&self.table));
        }
        let mut cached = self.trace_table.lock().unwrap_or_else(|e| e.into_inner());
        if cached.is_none() {
            *cached = Some(self.whole_table()?);
        }
        Ok(trace(cached.as_ref().expect("built above")))
    }

    /// The slow path's verdict for `key`: the shared table's (ORIG, CCACHE), or in CFLOWS the
    /// one built from the record when asked after a change (its PMDs never consult one).
    fn slow_path(&self, key: &FlowKey) -> Result<rqvs_ofproto::table::Verdict, Error> {
        if self.design != DesignKind::Cflows {
            return Ok(self.table.classify(key));
        }
        let mut cached = self.trace_table.lock().unwrap_or_else(|e| e.into_inner());
        if cached.is_none() {
            *cached = Some(self.whole_table()?);
        }
        Ok(cached.as_ref().expect("built above").classify(key))
    }

    /// CFLOWS: the whole pipeline (every table of the record, and the groups) as one slow-path
    /// table, for `trace` and TABLE packet-outs.
    fn whole_table(&self) -> Result<OfprotoTable, Error> {
        let prefixes = self.prefixes.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let t = OfprotoTable::build_with_prefixes(&self.rules(), &prefixes).map_err(|e| err(e.to_string()))?;
        let groups: Vec<RuleChange> = self.groups().iter().map(|e| RuleChange::Group(e.group.clone())).collect();
        if !groups.is_empty() {
            t.commit(groups).map_err(|e| err(e.to_string()))?;
        }
        Ok(t)
    }

    /// The slow path's prefix fields by table from now on (`Flow_Table:prefixes` changed while
    /// running): each table named takes its fields, a table named before and not now the
    /// process's default. The tries are rebuilt under the table's write lock; the rules, the
    /// flows' counters, the megaflows and the datapath stay (a megaflow made with the old
    /// fields is as right as one made with the new: only how wide it is differs).
    pub fn set_prefixes(&self, want: &[(u8, rqvs_classify::ofproto::PrefixFields)]) {
        let mut prefixes = self.prefixes.lock().unwrap_or_else(|e| e.into_inner());
        for &(table, _) in prefixes.iter().filter(|(t, _)| !want.iter().any(|(w, _)| w == t)) {
            self.table.set_table_prefix_fields(table, rqvs_classify::ofproto::default_prefix_fields());
        }
        for &(table, p) in want {
            self.table.set_table_prefix_fields(table, p);
        }
        *prefixes = want.to_vec();
        *self.trace_table.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// `add-flows`: adds `rules` (their ids are ignored and new ones given) as one commit; a
    /// flow with the match and priority of an existing one replaces it. Returns (added,
    /// replaced).
    pub fn add_flows(&self, new: Vec<Rule>) -> Result<(usize, usize), Error> {
        let ops: Vec<FlowOp> = new.into_iter().map(FlowOp::add).collect();
        let (effects, _) = self.transact("add-flows", &ops, true, true)?;
        Ok(effects.iter().flatten().fold((0, 0), |(a, r), e| (a + e.added, r + e.removed)))
    }

    /// `del-flows`: removes every flow whose match is at least as specific as one of
    /// `matches` (OpenFlow's non-strict delete), or every flow when `matches` is `None`.
    /// Returns the number removed.
    pub fn del_flows(&self, matches: Option<&[Match]>) -> Result<usize, Error> {
        let ops: Vec<FlowOp> = match matches {
            None => vec![FlowOp::Delete(FlowFilter::all())],
            Some(ms) => {
                ms.iter().map(|m| FlowOp::Delete(FlowFilter { matches: Some(*m), ..FlowFilter::all() })).collect()
            }
        };
        Ok(self.transact("del-flows", &ops, true, true)?.1.removed.len())
    }

    /// The table of record's rules, in winner order (a copy).
    pub fn rules(&self) -> Vec<Rule> {
        let rules = self.lock_rules();
        let mut v: Vec<Rule> = rules.iter().cloned().collect();
        v.sort_by_key(|r| r.rank());
        v
    }

    /// The flows `filter` selects (a copy, winner order).
    pub fn select(&self, filter: &FlowFilter) -> Vec<Rule> {
        let rules = self.lock_rules();
        let mut v: Vec<Rule> = rules.select(filter).into_iter().filter_map(|id| rules.get(id).cloned()).collect();
        v.sort_by_key(|r| r.rank());
        v
    }

    /// OpenFlow's delete (strict or not, with cookie and out_port filters): removes the flows
    /// `filter` selects as one commit. Returns the number removed.
    pub fn del_selected(&self, filter: &FlowFilter) -> Result<usize, Error> {
        Ok(self.transact("del-flows", &[FlowOp::Delete(filter.clone())], true, true)?.1.removed.len())
    }

    /// OpenFlow's modify (strict or not): the flows `filter` selects keep their match,
    /// priority and cookie and get `actions`, as one commit. Flows that match nothing are not
    /// added (OpenFlow 1.3's semantics). Returns the number modified.
    pub fn modify_selected(&self, filter: &FlowFilter, actions: &rqvs_flow::Actions) -> Result<usize, Error> {
        let (effects, _) =
            self.transact("mod-flows", &[FlowOp::modify(filter.clone(), actions.clone())], true, true)?;
        Ok(effects.iter().flatten().map(|e| e.added).sum())
    }

    /// A bundle: `ops` applied in order and committed as one change set (all or nothing: an
    /// error leaves the table as it was). Returns the number of flows (added, removed) by the
    /// whole (net: a flow added and deleted inside the bundle counts in neither).
    pub fn apply_ops(&self, ops: &[FlowOp]) -> Result<(usize, usize), Error> {
        let (_, net) = self.transact("bundle", ops, true, true)?;
        Ok((net.added.len(), net.removed.len()))
    }

    /// A run of independent flow-mods (a controller's stream of FLOW_MODs): each applied in
    /// order and atomic on its own — a refused one is left out, with its error, and changes
    /// nothing — and all the accepted ones committed together, as one change set, so a stream
    /// of thousands costs one revalidation (ORIG, CCACHE) or one publication (CFLOWS) instead
    /// of one per flow-mod. When that commit fails every one is refused with its error.
    ///
    /// ORIG/CCACHE do not wait here for the PMDs' revalidation (OpenFlow promises the
    /// datapath has a flow-mod only after a BARRIER: [`Control::settle_changes`]), so the
    /// revalidations of consecutive runs overlap and a PMD that finds several changes queued
    /// revalidates once for all of them.
    pub fn apply_each(&self, ops: &[FlowOp]) -> Vec<Result<rqvs_ofproto::record::OpEffect, OpError>> {
        match self.transact("flow-mod", ops, false, false) {
            Ok((effects, _)) => effects,
            Err(e) => ops.iter().map(|_| Err(OpError::Invalid(e.0.clone()))).collect(),
        }
    }

    /// The one path every rule change takes: `ops` applied in order to the table of record
    /// (`atomic`: the first refused one refuses them all, nothing changed; otherwise refused
    /// ones are left out), the net change committed to the shared OpenFlow table, then to the
    /// PMDs ([`Control::apply`]), then kept in the record; then the removed flows' counts are
    /// settled ([`Control::settle_counts`]: carried to the flows that took over, or reported
    /// in FLOW_REMOVED). Returns each op's effect (or error) and the net change.
    fn transact(
        &self,
        what: &str,
        ops: &[FlowOp],
        atomic: bool,
        settle: bool,
    ) -> Result<(Vec<Result<rqvs_ofproto::record::OpEffect, OpError>>, NetChange), Error> {
        let mut rules = self.lock_rules();
        let now_ns = self.clock_ns();
        let mut txn = rules.txn(now_ns);
        let mut effects = Vec::with_capacity(ops.len());
        let mut refused = None;
        txn.apply_run(ops, |e| match e {
            Err(e) if atomic => {
                refused = Some(e);
                false
            }
            e => {
                effects.push(e);
                true
            }
        });
        if let Some(e) = refused {
            return Err(err(format!("{what}: {e}")));
        }
        let net = txn.net();
        if net.is_empty() {
            txn.keep();
            // Flows added and deleted inside the transaction may still owe a FLOW_REMOVED.
            let events = self.settle_counts(&mut rules, &net, now_ns);
            drop(rules);
            self.emit(events);
            return Ok((effects, net));
        }
        // The learned classifier (CFLOWS, auto) holds table 0; the shared OpenFlow table holds
        // every table (ORIG, CCACHE, auto) or, for CFLOWS, the tables after 0 — and the groups.
        let learned = matches!(self.design, DesignKind::Cflows | DesignKind::Auto);
        let (t0_added, t0_removed): (Vec<(Rule, DpAction)>, Vec<RuleId>) = if learned {
            (
                net.added
                    .iter()
                    .zip(&net.actions)
                    .filter(|(r, _)| r.table == 0)
                    .map(|(r, a)| (r.clone(), *a))
                    .collect(),
                net.removed.iter().filter(|r| r.table == 0).map(|r| r.id).collect(),
            )
        } else {
            (Vec::new(), Vec::new())
        };
        let changes = net.table_changes(self.design != DesignKind::Cflows);
        // The learned classifier first (it may refuse: the transaction is then dropped and the
        // record goes back to what it was).
        let published = learned && !(t0_added.is_empty() && t0_removed.is_empty());
        // The added flows' ids, to take them out again should the commit below fail; the rules
        // themselves go to the manager (moved, not copied: a flow-mod's rule is cloned once, by
        // the transaction's net change).
        let t0_added_ids: Vec<RuleId> =
            if published { t0_added.iter().map(|(r, _)| r.id).collect() } else { Vec::new() };
        if published {
            self.publish(t0_added, t0_removed).map_err(|e| err(format!("{what}: {e}")))?;
        }
        *self.trace_table.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let version = if changes.is_empty() {
            None
        } else {
            match self.table.commit(changes) {
                Ok((v, _)) => Some(v),
                Err(e) => {
                    if published {
                        let back: Vec<(Rule, DpAction)> = net
                            .removed
                            .iter()
                            .filter(|r| r.table == 0)
                            .map(|r| (r.clone(), DpAction::from_rule(r)))
                            .collect();
                        if let Err(undo) = self.publish(back, t0_added_ids) {
                            crate::log_warn!("rqvs switch: {what}: undoing the learned classifier's change: {undo}");
                        }
                    }
                    return Err(err(format!("{what}: {e}")));
                }
            }
        };
        if let Some(version) = version {
            if self.design != DesignKind::Cflows {
                self.apply(version, settle)?;
            }
        }
        txn.keep();
        let events = self.settle_counts(&mut rules, &net, now_ns);
        drop(rules);
        self.emit(events);
        Ok((effects, net))
    }

    /// The live ports' names, in index order.
    pub fn port_names(&self) -> Vec<String> {
        self.lock_ports().iter().filter(|p| !p.removed).map(|p| p.name.clone()).collect()
    }

    /// Port index `i`'s name (a removed port's too; empty past the end).
    pub fn port_name(&self, i: usize) -> String {
        self.lock_ports().get(i).map(|p| p.name.clone()).unwrap_or_default()
    }

    /// The ports' OpenFlow numbers, by index ([`ofports`]), as they are now.
    pub fn ofports(&self) -> Arc<ofports::OfPorts> {
        self.ofports.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn lock_ports(&self) -> std::sync::RwLockReadGuard<'_, Vec<PortInfo>> {
        self.port_info.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Tells the PMDs about a committed change and waits until each has applied it: ORIG/CCACHE
    /// PMDs answer once their megaflows are revalidated (no megaflow of an older table decides
    /// a packet any more), CFLOWS PMDs once their classifiers hold it. So a packet that arrives
    /// after `add-flows`/`del-flows` returns meets the new rules, on every PMD. A stopped PMD
    /// (or manager) is not waited for; one that has not answered within [`APPLY_WAIT`] — a
    /// revalidation of every megaflow takes seconds at 100K rules, so this is far above any
    /// normal wait (it was 5 s, which a loaded machine exceeded: replies then came before the
    /// datapath had the change) — is logged and no longer waited for.
    ///
    /// ORIG/CCACHE without `settle`: the answers are kept (`unsettled`) and waited for later,
    /// with those of earlier such changes, by the next change that settles or by
    /// [`Control::settle_changes`]. CFLOWS always waits: the manager's answer says whether the
    /// learned classifier took the change.
    fn apply(&self, version: u64, settle: bool) -> Result<(), Error> {
        let done: Vec<_> = self
            .inboxes
            .iter()
            .filter_map(|i| {
                let (s, r) = mpsc::channel();
                i.send(PmdMsg::TableChanged(version, s)).is_ok().then_some(r)
            })
            .collect();
        let mut unsettled = self.unsettled.lock().unwrap_or_else(|e| e.into_inner());
        if settle {
            let earlier = std::mem::take(&mut *unsettled);
            drop(unsettled);
            wait_revalidated(earlier.into_iter().chain(done), version);
        } else {
            // Answers already given need no keeping (a client that never sends a BARRIER does
            // not grow this list).
            unsettled.retain(|r| matches!(r.try_recv(), Err(mpsc::TryRecvError::Empty)));
            unsettled.extend(done);
        }
        Ok(())
    }

    /// The learned classifier the CFLOWS (and auto) PMDs share takes a change: the manager
    /// applies and publishes it (all or none), and each PMD's next batch reads the publication.
    fn publish(&self, added: Vec<(Rule, DpAction)>, removed: Vec<RuleId>) -> Result<(), Error> {
        let manager = self.manager.lock().unwrap_or_else(|e| e.into_inner());
        let Some(m) = manager.as_ref() else { return Ok(()) };
        // One change set: a replaced flow is never missing in between.
        let (answer, r) = mpsc::channel();
        let msg = manager::ManagerMsg { remove: removed, add: added, answer };
        if m.send(msg).is_ok() {
            match r.recv_timeout(APPLY_WAIT) {
                Ok(Err(e)) => return Err(err(format!("the learned classifier refused the rules: {e}"))),
                Err(mpsc::RecvTimeoutError::Timeout) => crate::log_warn!(
                    "rqvs switch: the CFLOWS manager has not applied a change after {} s; not waiting any longer",
                    APPLY_WAIT.as_secs()
                ),
                Ok(Ok(())) | Err(mpsc::RecvTimeoutError::Disconnected) => {}
            }
        }
        Ok(())
    }

    /// Waits until the PMDs have revalidated for every table change committed so far (an
    /// OpenFlow BARRIER after FLOW_MODs: [`Control::apply_each`] does not wait). Immediate in
    /// CFLOWS, and when nothing is pending.
    pub fn settle_changes(&self) {
        let pending = std::mem::take(&mut *self.unsettled.lock().unwrap_or_else(|e| e.into_inner()));
        if !pending.is_empty() {
            wait_revalidated(pending.into_iter(), self.table.version());
        }
    }

    /// The number of PMD threads, and the CPU each is pinned to.
    pub fn pmd_cpus(&self) -> &[Option<usize>] {
        &self.pmd_cpus
    }

    /// The packet-in queue's receiving end (once: the OpenFlow channel takes it; `None` when
    /// the switch was started without [`SwitchConfig::packet_in`], or it was taken).
    pub fn take_packet_in_queue(&self) -> Option<mpsc::Receiver<execute::PacketIn>> {
        self.packet_ins.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// The datapath action the table of record gives `frame` arriving on `in_port` (a
    /// packet-out's `TABLE`: the slow path's classification, no megaflow installed).
    pub fn classify_frame(&self, frame: &[u8], in_port: u32) -> Result<DpAction, Error> {
        match rqvs_flow::frame::extract_datapath(frame, in_port) {
            Some(key) => Ok(self.slow_path(&key)?.action),
            None => Ok(DpAction::Drop),
        }
    }

    /// Hands a packet-out to a PMD (they take turns), which sends it between two batches
    /// through its transmit queues. Fails only when the PMDs have stopped.
    pub fn packet_out(&self, po: pmd::PacketOut) -> Result<(), Error> {
        let n = self.inboxes.len().max(1);
        let i = self.packet_outs.fetch_add(1, Ordering::Relaxed) % n;
        let inbox = self.inboxes.get(i).ok_or_else(|| err("the switch has no PMD thread"))?;
        inbox.send(PmdMsg::PacketOut(po)).map_err(|_| err("the switch is stopping"))
    }

    /// Waits until every PMD has handled the messages sent to it before this call — every
    /// packet-out handed over is sent (an OpenFlow BARRIER). A PMD that does not answer within
    /// 5 s is not waited for.
    pub fn sync_pmds(&self) {
        let _ = self.ask(PmdMsg::Sync);
    }

    /// The `NORMAL` action's learned stations that have not aged out.
    pub fn mac_entries(&self) -> Vec<normal::MacEntry> {
        self.macs.entries()
    }

    /// Is the switch failed open ([`Control::fail_open`])?
    pub fn is_failed_open(&self) -> bool {
        self.lock_rules().hides((FAIL_OPEN_PRIORITY, Match::ANY))
    }

    /// Fails open (`--fail-mode standalone` without a controller, as Open vSwitch's
    /// `fail_open_run` does): every flow is removed and one rule added — match everything,
    /// priority [`FAIL_OPEN_PRIORITY`], `actions=NORMAL` — hidden from OpenFlow (no flow-mod
    /// selects it, no stats report it: [`rqvs_ofproto::record::FlowTable::set_hidden`]), as one commit. With
    /// `false` the fail-open rule is removed again (OVS's `fail_open_recover`; the flows that
    /// were removed stay removed: the controller sets up its own). Idempotent. In-band
    /// control's hidden rules ([`Control::set_in_band`]) are not removed.
    pub fn fail_open(&self, on: bool) -> Result<(), Error> {
        let key = (FAIL_OPEN_PRIORITY, Match::ANY);
        let hidden = self.lock_rules().hides(key);
        match (on, hidden) {
            (true, false) => {
                self.lock_rules().set_hidden(key, true);
                let rule = Rule::new(0, FAIL_OPEN_PRIORITY, Match::ANY, rqvs_flow::Actions(vec![Action::Normal]));
                let ops = [FlowOp::Delete(FlowFilter::all()), FlowOp::add(rule)];
                if let Err(e) = self.transact("fail-open", &ops, true, true) {
                    self.lock_rules().set_hidden(key, false);
                    return Err(e);
                }
            }
            (false, true) => {
                self.lock_rules().set_hidden(key, false);
                let strict = FlowFilter { matches: Some(key.1), strict: Some(key.0), ..FlowFilter::all() };
                self.transact("fail-open", &[FlowOp::Delete(strict)], true, true)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Are in-band control's rules ([`in_band`]) installed?
    pub fn has_in_band_rules(&self) -> bool {
        !self.in_band.lock().unwrap_or_else(|p| p.into_inner()).is_empty()
    }

    /// Makes in-band control's hidden table-0 rules `want` (each `NORMAL`, at a priority
    /// above OpenFlow's: [`in_band::rules`]), as OVS's `in_band_run` does: the rules no longer
    /// wanted removed, the new or changed ones added, hidden from OpenFlow like the fail-open
    /// rule, in one commit. Nothing is committed when nothing changed. An empty `want`
    /// removes them all (in-band control off).
    pub fn set_in_band(&self, want: &[Rule]) -> Result<(), Error> {
        let mut now = self.in_band.lock().unwrap_or_else(|p| p.into_inner());
        let same = |a: &Rule, b: &Rule| a.priority == b.priority && a.matches == b.matches;
        let gone: Vec<&Rule> = now.iter().filter(|r| !want.iter().any(|w| same(w, r))).collect();
        let new: Vec<&Rule> =
            want.iter().filter(|w| !now.iter().any(|r| same(w, r) && r.actions == w.actions)).collect();
        if gone.is_empty() && new.is_empty() {
            return Ok(());
        }
        let mut ops = Vec::with_capacity(gone.len() + new.len());
        {
            let mut rules = self.lock_rules();
            for r in &gone {
                rules.set_hidden((r.priority, r.matches), false);
            }
            for r in &new {
                rules.set_hidden((r.priority, r.matches), true);
            }
        }
        for r in &gone {
            ops.push(FlowOp::Delete(FlowFilter {
                table: Some(0),
                matches: Some(r.matches),
                strict: Some(r.priority),
                ..FlowFilter::all()
            }));
        }
        for r in &new {
            ops.push(FlowOp::add(Rule::new(0, r.priority, r.matches, r.actions.clone())));
        }
        if let Err(e) = self.transact("in-band", &ops, true, true) {
            // As it was: the installed rules hidden, the refused ones not.
            let mut rules = self.lock_rules();
            for r in &new {
                rules.set_hidden((r.priority, r.matches), now.iter().any(|o| same(o, r)));
            }
            for r in &gone {
                rules.set_hidden((r.priority, r.matches), true);
            }
            return Err(e);
        }
        *now = want.to_vec();
        Ok(())
    }
}

/// A flow as OVS's `cls_rule_format` prints it — `priority=N,MATCH,actions=A` — for any
/// priority (the hidden flows' are above OpenFlow's 16 bits); port ranges expanded, one line
/// each.
pub fn flow_line(r: &Rule) -> String {
    r.matches
        .expand_port_ranges()
        .iter()
        .map(|m| match ofctl::format_match(m) {
            Ok(f) if f.is_empty() => format!("priority={},actions={}", r.priority, r.actions),
            Ok(f) => format!("priority={},{f},actions={}", r.priority, r.actions),
            Err(e) => format!("priority={},# {e},actions={}", r.priority, r.actions),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// How long the management thread waits for a PMD's answer (counters, dumps).
const REPLY_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long a rule change waits for the PMDs (or the CFLOWS manager) to apply it.
pub const APPLY_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Rules the switch uses for a ClassBench set, which carries no actions: rule `i` outputs to
/// port `2 + i mod (ports − 1)` (port 1 is where traffic comes in), or to port 1 with one port.
pub fn assign_switch_outputs(rules: &mut [Rule], ports: usize) {
    for r in rules {
        let p = if ports <= 1 { 1 } else { 2 + r.id.0 % (ports as u32 - 1) };
        r.actions = rqvs_flow::Actions(vec![Action::Output(p)]);
    }
}

/// The README's examples, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// One step of a xorshift generator (13, 7, 17) on state `s`, which must not be 0: the benchmark's
/// deterministic held-out choice and the packet-in scheduler's tie-break draw from it.
pub(crate) fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}
