//! Patch crossings in the switch (issue 37): what makes [`rqvs_ofproto::crossing`]'s composed
//! translations run — the resolver each bridge's table asks ("is my port N a patch port, and
//! where is its peer?"), the revalidation a peer's commit starts on the bridges that cross into
//! it, and the execution of an [`Op::Patch`](rqvs_ofproto::actions::Op::Patch) on the peer bridge's ports.
//!
//! - **Resolver** (`link`, when a bridge starts serving: `Bridges::set`). Bridge A's port N
//!   crosses when it is a live `patch` port whose peer interface is a live port of a running
//!   bridge B and both A and B run ORIG or CCACHE (their slow-path table is the whole pipeline;
//!   CFLOWS' is not: its crossings stay the datapath hop of `rqvs_ports::patch`). The resolver
//!   runs with A's table read held, so it never blocks: the ports' lists are read with
//!   `try_read` and the registry of bridges is a mutex no holder of which waits for anything;
//!   an answer it cannot give now is "not a crossing" — the hop, which forwards the same way
//!   (`rqvs_ofproto::crossing`, *Locks*).
//! - **Revalidation.** A commit on B marks every table that crossed into it changed; the hook
//!   set here sends the new version to A's PMDs as A's own commits do (`Control::apply`,
//!   without waiting). A bridge starting or stopping marks every other bridge that crosses
//!   (its crossings into the old table, or into nothing, are translated again).
//! - **Execution.** On the shared PMD threads ([`crate::shared`]) thread *i* runs every bridge's
//!   loop: the executor of A meets [`Op::Patch`](rqvs_ofproto::actions::Op::Patch) and leaves the frame as it is at that point,
//!   with the peer port and the peer's ops, in this thread's list of crossings (`defer`); the
//!   thread hands each one to B's loop on the same thread (`PmdLoop::execute_crossed`),
//!   which runs the ops with B's executor (its MAC table, port flags, meters, packet-in queue)
//!   and B's transmit queues — no receive on B's patch port, no second classification, one
//!   megaflow (A's). A crossing whose bridge has no loop on the thread (it stopped meanwhile) or
//!   that is met outside the shared threads is dropped and counted ([`dropped`], logged once).
//!
//! Counting: the crossing is one output of A's PMD; the peer's copies are B's outputs. The patch
//! ports' counters (`Interface.statistics`) count the hops and the crossings: a crossing is
//! credited to A's patch port's tx and B's patch port's rx (`patch::crossed`).
//!
//! # Loops
//!
//! A translation bounds its own crossings ([`rqvs_ofproto::crossing`], *Loops*), but what it
//! does not cross — every crossing of a CFLOWS bridge, a crossing whose peer table was being
//! committed to, a `NORMAL` crossing deeper than the bound or whose frame leaves with another
//! VLAN tag than the crossing's — is a hop: the frame is received again on
//! the peer port, a new packet to the peer's translation. Two bridges joined by two patch pairs, both with `NORMAL`,
//! would circulate a broadcast for as long as the patch queues have room. So every frame
//! carries the patch crossings it has made, hops and crossings alike: a patch queue's entry
//! holds the count ([`rqvs_ports::patch`], *Loops*), the PMD hands it to the executor with the
//! frame (`Executor::set_crossings`, also across an upcall), the executor sends it on with
//! each output (a patch port adds one) and with each crossing it defers (`defer` adds one).
//! A frame received over a hop after more than [`MAX_CROSSINGS`] crossings is dropped before it
//! is parsed (`dropped` on the port it came in on: every frame stays accounted for), and so is
//! a crossing that would make more; each is counted ([`loops`]: `coverage/show`'s
//! `patch_loop_dropped`) and the first is logged once.
//!
//! The bound is the translation's, [`MAX_CROSSINGS`] (8), not OVS's 64 (its translation depth,
//! which its patch crossings count against since every crossing is inside one translation):
//! a packet may cross as many patch ports whichever way it crosses them, and a hop, unlike a
//! translation, multiplies copies — with *k* patch pairs between two flooding bridges a
//! broadcast makes *k* copies at its first crossing and each copy *k* − 1 more at every next
//! one: *k*·(*k* − 1)^7 at the 8th, where 64 would let three pairs make 3·2^63. Real
//! topologies cross far fewer (OVN's: br-int to a provider bridge and back, 2). Unlike OVS, where the translation that goes too deep drops the whole
//! packet, the copies a looping broadcast left on other ports before the bound stay sent (they
//! were separate frames already).

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use rqvs_datapath::DesignKind;
use rqvs_ofproto::actions::{ActionsId, PatchOp};
use rqvs_ofproto::crossing::{bridge_id, Peer};
use rqvs_ports::PortType;

use crate::patch::MAX_CROSSINGS;
use crate::Control;

/// A crossing met by an executor, waiting for the peer bridge's loop on this thread.
pub(crate) struct Crossed {
    /// The patch crossings the frame has made, this one included (module docs, *Loops*).
    pub crossings: u8,
    pub bridge: u16,
    /// The peer's rules the packet passed (their flow counters count it).
    pub rule: rqvs_flow::RuleId,
    pub in_port: u32,
    pub ops: ActionsId,
    pub frame: Vec<u8>,
}

/// Crossings one thread holds at most between two hand-overs (more are dropped, counted).
const PENDING: usize = 4096;

thread_local! {
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    static PENDING_CROSSINGS: RefCell<Vec<Crossed>> = const { RefCell::new(Vec::new()) };
}

static DROPPED: AtomicU64 = AtomicU64::new(0);
static DROP_LOGGED: AtomicBool = AtomicBool::new(false);
static LOOPS: AtomicU64 = AtomicU64::new(0);
static LOOP_LOGGED: AtomicBool = AtomicBool::new(false);

/// Frames dropped in the datapath as patch loops (module docs, *Loops*): `coverage/show`'s
/// `patch_loop_dropped`.
pub fn loops() -> u64 {
    LOOPS.load(Ordering::Relaxed)
}

/// Whether a frame that has made `crossings` patch crossings is past the bound (*Loops*).
pub(crate) fn past_bound(crossings: u8) -> bool {
    usize::from(crossings) > MAX_CROSSINGS
}

/// `n` frames dropped as patch loops: counted, the first logged.
pub(crate) fn loop_dropped(n: u64) {
    LOOPS.fetch_add(n, Ordering::Relaxed);
    if !LOOP_LOGGED.swap(true, Ordering::Relaxed) {
        crate::log_warn!(
            "rqvs switch: patch loop: a frame crossed patch ports more than {MAX_CROSSINGS} times in the datapath \
             (NORMAL or a CFLOWS bridge sending into a loop of patch ports); it is dropped \
             (each counted in coverage/show as patch_loop_dropped; logged once)"
        );
    }
}

/// Crossings dropped: no loop of their bridge on the thread, or met outside the shared threads.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

fn drop_one(why: &str) {
    DROPPED.fetch_add(1, Ordering::Relaxed);
    if !DROP_LOGGED.swap(true, Ordering::Relaxed) {
        crate::log_warn!("rqvs switch: a patch crossing was dropped: {why} (counted; logged once)");
    }
}

/// This thread hands crossings over ([`crate::shared`]'s threads say so when they start).
pub(crate) fn activate() {
    ACTIVE.with(|a| a.set(true));
}

/// The executor met `p` with the frame as it is, after `crossings` patch crossings (module
/// docs, *Execution*, *Loops*). False when the crossing is dropped (counted).
pub(crate) fn defer(p: PatchOp, frame: &[u8], crossings: u8) -> bool {
    let crossings = crossings.saturating_add(1);
    if past_bound(crossings) {
        loop_dropped(1);
        return false;
    }
    if !ACTIVE.with(Cell::get) {
        drop_one("met outside the shared PMD threads");
        return false;
    }
    PENDING_CROSSINGS.with(|q| {
        let mut q = q.borrow_mut();
        if q.len() >= PENDING {
            drop_one("too many crossings pending on one thread");
            return false;
        }
        crate::patch::crossed::count(&p, frame.len());
        let (bridge, rule, in_port, ops) = (p.bridge, p.rule, p.in_port, p.ops);
        q.push(Crossed { crossings, bridge, rule, in_port, ops, frame: frame.to_vec() });
        true
    })
}

/// The crossings met since the last call, in order.
pub(crate) fn take() -> Vec<Crossed> {
    crate::patch::crossed::flush();
    PENDING_CROSSINGS.with(|q| std::mem::take(&mut *q.borrow_mut()))
}

/// A crossing that found no loop of its bridge.
pub(crate) fn no_loop(c: &Crossed) {
    drop_one(&format!("bridge {} has no PMD loop on this thread", rqvs_ofproto::crossing::bridge_name(c.bridge)));
}

/// The running bridges: (name, its switch's control).
type Registry = Mutex<Vec<(String, Weak<Control>)>>;

/// The running bridges, by name (what the resolvers look peers up in).
fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(Mutex::default)
}

/// The bridge number ([`bridge_id`]) of the bridge whose MAC table is `macs` (how a PMD loop
/// knows its bridge: its setup shares the bridge's MAC table).
pub(crate) fn bridge_of(macs: &Arc<crate::normal::MacTable>) -> Option<u16> {
    let r = registry().lock().unwrap_or_else(|e| e.into_inner());
    r.iter().find_map(|(name, c)| {
        let c = c.upgrade()?;
        Arc::ptr_eq(&c.macs, macs).then(|| bridge_id(name))
    })
}

fn crosses(design: DesignKind) -> bool {
    matches!(design, DesignKind::Orig | DesignKind::Ccache)
}

/// The running bridges whose tables cross, but bridge `except` (when one is named).
fn crossing_bridges(except: Option<&str>) -> Vec<Arc<Control>> {
    let running: Vec<Arc<Control>> = {
        let r = registry().lock().unwrap_or_else(|e| e.into_inner());
        r.iter().filter(|(n, _)| Some(n.as_str()) != except).filter_map(|(_, c)| c.upgrade()).collect()
    };
    // The registry's lock is not held while a table's is taken (module docs, *Resolver*).
    running.into_iter().filter(|c| c.table.patch_resolver().is_some()).collect()
}

/// Every other running bridge's crossings are translated again: a bridge started (its new
/// table has no record of who crossed into the old one) or stopped.
fn mark_others(name: &str) {
    for c in crossing_bridges(Some(name)) {
        c.table.mark_changed();
    }
}

/// A patch port was attached to or removed from a running bridge, or a port's VLANs changed:
/// every bridge that crosses translates its megaflows again, and is waited for (a `NORMAL`,
/// `flood` or `output` that met no crossing there may cross now, or the reverse, and a
/// `NORMAL` crossing's VLAN may be another; until then such a packet takes the hop, which
/// forwards the same way).
pub(crate) fn crossings_changed() {
    for c in crossing_bridges(None) {
        c.table.mark_changed();
        c.settle_changes();
    }
}

/// Bridge `name` is now served by `control`: its table follows patch crossings (module docs).
pub(crate) fn link(name: &str, control: &Arc<Control>) {
    {
        let mut r = registry().lock().unwrap_or_else(|e| e.into_inner());
        r.retain(|(n, c)| n != name && c.strong_count() > 0);
        r.push((name.to_string(), Arc::downgrade(control)));
    }
    // Its patch ports' counters start again, as its ports' own do.
    crate::patch::crossed::forget(bridge_id(name), None);
    if crosses(control.design) {
        follow(control);
    }
    mark_others(name);
}

/// `control`'s table crosses from now on, and its PMDs hear of its peers' changes.
fn follow(control: &Arc<Control>) {
    let resolver: rqvs_ofproto::crossing::Resolver = Arc::new(Ports(Arc::downgrade(control)));
    control.table.set_patch_resolver(Some(resolver));
    let me = Arc::downgrade(control);
    control.table.set_on_marked(Some(Arc::new(move |version| {
        if let Some(c) = me.upgrade() {
            if let Err(e) = c.apply(version, false) {
                crate::log_warn!("rqvs switch: revalidating after a patch peer's change: {e}");
            }
        }
    })));
}

/// Bridge `name` stopped serving.
pub(crate) fn unlink(name: &str) {
    let gone: Vec<Arc<Control>> = {
        let mut r = registry().lock().unwrap_or_else(|e| e.into_inner());
        let gone = r.iter().filter(|(n, _)| n == name).filter_map(|(_, c)| c.upgrade()).collect();
        r.retain(|(n, _)| n != name);
        gone
    };
    for c in gone {
        c.table.set_patch_resolver(None);
        c.table.set_on_marked(None);
    }
    mark_others(name);
}

/// A bridge's answers to its table ([`rqvs_ofproto::crossing::PatchPorts`]). Never block.
struct Ports(Weak<Control>);

impl rqvs_ofproto::crossing::PatchPorts for Ports {
    fn peer(&self, port: u32) -> Option<Peer> {
        resolve(&self.0, port)
    }

    /// The live patch ports (none when the port list is being written: the flood's hop).
    fn patch_ports(&self) -> Vec<u32> {
        let Some(control) = self.0.upgrade() else { return Vec::new() };
        let Ok(ports) = control.port_info.try_read() else { return Vec::new() };
        ports
            .iter()
            .filter(|p| !p.removed)
            .filter(|p| crate::patch::spec_of(p).is_some_and(|s| matches!(s.port_type, PortType::Patch(_))))
            .map(|p| p.ofport)
            .collect()
    }

    /// As the executor's `NORMAL` retags for the port ([`crate::normal::PortVlan`]); checked per
    /// frame there, so an answer made stale by a VLAN change costs a hop, not a wrong crossing.
    fn normal_output(&self, in_port: u32, vlan_tci: u16, port: u32) -> Option<u16> {
        let control = self.0.upgrade()?;
        crate::normal::output_tci(&control.macs.vlans(), in_port, vlan_tci, port)
    }
}

/// The peer of `control`'s port `port`, when it is a crossing (module docs). Never blocks.
fn resolve(control: &Weak<Control>, port: u32) -> Option<Peer> {
    let control = control.upgrade()?;
    let peer_name = {
        let ports = control.port_info.try_read().ok()?;
        let p = ports.iter().find(|p| !p.removed && p.ofport == port)?;
        match crate::patch::spec_of(p)?.port_type {
            PortType::Patch(peer) if !peer.is_empty() => peer,
            _ => return None,
        }
    };
    let bridges: Vec<(String, Arc<Control>)> = {
        let r = registry().lock().unwrap_or_else(|e| e.into_inner());
        r.iter().filter_map(|(n, c)| Some((n.clone(), c.upgrade()?))).collect()
    };
    let from = bridges.iter().find(|(_, c)| Arc::ptr_eq(c, &control)).map(|(n, _)| bridge_id(n))?;
    for (name, peer) in bridges {
        if !crosses(peer.design) {
            continue;
        }
        let found = {
            let ports = peer.port_info.try_read().ok()?;
            ports
                .iter()
                .find(|p| !p.removed && crate::patch::spec_of(p).is_some_and(|s| s.name == peer_name))
                .map(|p| p.ofport)
        };
        if let Some(peer_port) = found {
            return Some(Peer { from, bridge: bridge_id(&name), table: peer.table.clone(), port: peer_port });
        }
    }
    None
}
