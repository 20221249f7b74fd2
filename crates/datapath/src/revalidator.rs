//! The revalidator: keeps the megaflow cache consistent with the OpenFlow table and bounded.
//!
//! - **After rule changes** ([`Revalidator::revalidate_all`]): every installed megaflow's key
//!   (the packet that created it, as OVS's ukey holds it) is classified again by the new table.
//!   The megaflow is kept only if the action is the same **and** the new lookup's megaflow mask
//!   examines no bit the installed mask does not (OVS's `revalidate_ukey`: new wildcards must not
//!   be narrower). This keeps the megaflow property: every packet the installed megaflow covers
//!   agrees with the creating key on all bits the new lookup examined, so the new table gives it
//!   the same action. Anything else is deleted; the next packet of it upcalls. A kept megaflow
//!   whose key now has another winner (same action, another rule) is **re-attributed** to that
//!   rule ([`crate::dpcls::Dpcls::set_rule`]; the design's module docs, *Attribution*).
//! - **Incremental revalidation** ([`Revalidator::revalidate_since`], and the thread): the
//!   table's change log ([`rqvs_ofproto::table::TableRead::changes_since`]) names the matches of the
//!   rules added and removed since the version the megaflows were last checked against. When
//!   every translation is one table-0 lookup on the packet's own key (the log says so,
//!   [`rqvs_ofproto::table::Changes::Rules`]), a packet no changed rule matches gets the same
//!   translation from the new table as from the old one, so a megaflow whose region (the packets
//!   its key and mask cover) meets no changed rule's match ([`rqvs_flow::Match::overlaps`])
//!   stays exact and keeps its rule: only the megaflows meeting one are re-checked as above.
//!   The thread finds them with [`MegaflowIndex`] (by IPv4 address prefixes), inline a linear
//!   scan with the cheap intersection test (up to [`INLINE_SCAN_MATCHES`] changed matches; more
//!   re-check every megaflow, as does the thread when the changes outnumber its megaflows). Anything else in the log (groups, port liveness,
//!   rules outside table 0 or with resubmit/goto_table/group actions anywhere in the table, or
//!   commits the log no longer holds: [`rqvs_ofproto::table::Changes::Any`]) re-checks every
//!   megaflow. The version to read changes from is the oldest version a megaflow installed
//!   since the last pass can come from: the caller says it
//!   ([`crate::orig::MegaflowDatapath::table_changed_at`], the switch's PMD passes the newest
//!   version it has heard of, which is what it refuses older verdicts against).
//! - **Idle expiry** ([`Revalidator::sweep`], every [`SWEEP_INTERVAL_NS`] of PMD clock): megaflows
//!   not hit for `idle_ns` (default 10 s, OVS's `max-idle`) are deleted.
//! - **Flow limit** (default 200,000): the handler installs nothing at the limit; when the cache
//!   holds more than the limit (after the limit was lowered), a sweep uses a 100 ms idle time (as
//!   OVS does) and, if still over, deletes the least recently used down to the limit.
//!
//! Revalidation runs on "the other core" in OVS. Two modes ([`RevalidatorMode`]):
//!
//! - **Inline** (the library default; deterministic): a rule change revalidates every megaflow in
//!   the call, before the next packet. `rqvs replay` does not count its time as PMD time (its
//!   effect — deletions, then upcalls — lands on the PMD): as if it took no time at all.
//! - **Thread** (`rqvs replay`'s default): [`RevalidatorThread`], a second thread that reads the
//!   PMD's OpenFlow table (the one shared [`OfprotoTable`], never a copy) and holds a copy of
//!   every installed megaflow's key, mask and action (OVS's ukeys). The PMD sends it, in order on
//!   one channel, the megaflows installed and deleted (from the megaflow cache's
//!   [`crate::dpcls::Journal`], at batch boundaries once it holds [`JOURNAL_BATCH`] entries, and
//!   always before a rule change) and each rule change's epoch; the thread re-checks every
//!   megaflow it holds against the table (the latest version, as OVS's revalidators; a read per
//!   megaflow, so a commit never waits long: `rqvs_ofproto::table`, *Concurrency*) and sends back
//!   the ones to delete (and the kept ones to re-attribute), which the PMD deletes (and
//!   re-attributes) at its next batch boundary (by handle: one deleted or replaced meanwhile is
//!   left alone). Until then packets may still hit megaflows of
//!   the previous table — OVS's eventual consistency: each packet gets the action of one of the
//!   tables between the oldest not yet revalidated and the current
//!   ([`crate::design::Design::oldest_epoch`]), and `rqvs replay` verifies it against that
//!   window. Megaflows the handler installs after the change come from the new table. Idle
//!   expiry and the flow limit stay at the PMD's batch boundaries (the megaflow cache is the
//!   PMD's, without locks), and their time is PMD time (`reval_ns`), as is the PMD's side of
//!   the thread's work (sending the journal, deleting).

use std::collections::VecDeque;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::Instant;

use hashbrown::HashMap;
use rqvs_flow::{FlowKey, RuleId};

use crate::counters::Counters;
use crate::dpcls::{Dpcls, Journal, MegaflowRef};
use rqvs_ofproto::table::{Changes, OfprotoTable, TableRead};
use rqvs_ofproto::DpAction;

mod index;
pub use index::{region, MegaflowIndex};

pub const SWEEP_INTERVAL_NS: u64 = 500_000_000;
/// Inline revalidation scans every megaflow against each changed rule's match when there are at
/// most this many; beyond, it re-checks every megaflow (module docs, *Incremental revalidation*).
pub const INLINE_SCAN_MATCHES: usize = 64;
/// The revalidator thread is sent the megaflow cache's journal once it holds this many entries
/// (and before every rule change, which is all its order matters for).
pub const JOURNAL_BATCH: usize = 1024;
pub const DEFAULT_IDLE_NS: u64 = 10_000_000_000;
pub const DEFAULT_FLOW_LIMIT: usize = 200_000;
const OVER_LIMIT_IDLE_NS: u64 = 100_000_000;

pub struct Revalidator {
    pub idle_ns: u64,
    pub flow_limit: usize,
    next_sweep_ns: u64,
    /// Megaflows re-checked against the table (translated again) after rule changes, in all.
    pub checked: u64,
}

impl Revalidator {
    pub fn new(idle_ns: u64, flow_limit: usize) -> Revalidator {
        Revalidator { idle_ns, flow_limit, next_sweep_ns: SWEEP_INTERVAL_NS, checked: 0 }
    }

    /// Re-checks every megaflow against the current table (deleting the invalid ones,
    /// re-attributing the kept ones); returns how many were deleted.
    pub fn revalidate_all(&mut self, dpcls: &mut Dpcls, table: &OfprotoTable, c: &mut Counters) -> u64 {
        let all = dpcls.megaflow_refs();
        self.recheck(dpcls, table, &all, c)
    }

    /// Re-checks the megaflows the table's changes after version `since` can affect (module
    /// docs, *Incremental revalidation*): every megaflow when the change log says anything may
    /// have changed, else those whose region meets a changed rule's match. Returns how many
    /// were deleted.
    pub fn revalidate_since(&mut self, dpcls: &mut Dpcls, table: &OfprotoTable, since: u64, c: &mut Counters) -> u64 {
        let changes = table.read().changes_since(since);
        match changes {
            Changes::Any => self.revalidate_all(dpcls, table, c),
            Changes::Rules(ms) if ms.is_empty() => 0,
            // Many changes: testing each megaflow against each costs more than re-checking it.
            Changes::Rules(ms) if ms.len() > INLINE_SCAN_MATCHES => self.revalidate_all(dpcls, table, c),
            Changes::Rules(ms) => {
                let hit: Vec<MegaflowRef> = dpcls
                    .megaflow_refs()
                    .into_iter()
                    .filter(|&f| {
                        let e = dpcls.get(f).expect("listed megaflow is live");
                        let r = region(&e.key, &e.megaflow.mask);
                        ms.iter().any(|m| r.overlaps(m))
                    })
                    .collect();
                self.recheck(dpcls, table, &hit, c)
            }
        }
    }

    /// Re-checks the megaflows `refs` (live ones) against the current table.
    fn recheck(&mut self, dpcls: &mut Dpcls, table: &OfprotoTable, refs: &[MegaflowRef], c: &mut Counters) -> u64 {
        let mut deleted = 0;
        self.checked += refs.len() as u64;
        for &f in refs {
            let e = dpcls.get(f).expect("listed megaflow is live");
            // One read per megaflow (`rqvs_ofproto::table`, *Concurrency*).
            let valid = still_valid(&table.read(), &e.key, &e.megaflow.mask, e.action);
            match valid {
                None => {
                    dpcls.remove(f);
                    deleted += 1;
                }
                Some(rule) if rule != e.rule => {
                    dpcls.set_rule(f, rule);
                }
                Some(_) => {}
            }
        }
        c.deleted_revalidated += deleted;
        deleted
    }

    /// The periodic sweep's interval is over.
    pub fn sweep_due(&self, now_ns: u64) -> bool {
        now_ns >= self.next_sweep_ns
    }

    /// Periodic sweep (idle expiry and flow limit) when its interval is over; returns deletions.
    pub fn maybe_sweep(&mut self, dpcls: &mut Dpcls, now_ns: u64, c: &mut Counters) -> u64 {
        if now_ns < self.next_sweep_ns {
            return 0;
        }
        self.next_sweep_ns = now_ns + SWEEP_INTERVAL_NS;
        self.sweep(dpcls, now_ns, c)
    }

    /// Idle expiry and flow-limit enforcement now (module docs).
    pub fn sweep(&mut self, dpcls: &mut Dpcls, now_ns: u64, c: &mut Counters) -> u64 {
        let over = dpcls.len() > self.flow_limit;
        let idle = if over { self.idle_ns.min(OVER_LIMIT_IDLE_NS) } else { self.idle_ns };
        let mut deleted = 0;
        let mut live = Vec::new();
        for f in dpcls.megaflow_refs() {
            let last = dpcls.get(f).expect("live").last_used_ns;
            if now_ns.saturating_sub(last) >= idle {
                dpcls.remove(f);
                c.deleted_idle += 1;
                deleted += 1;
            } else if over {
                live.push((last, f));
            }
        }
        if dpcls.len() > self.flow_limit {
            live.sort_by_key(|&(last, _)| last);
            let excess = dpcls.len() - self.flow_limit;
            for &(_, f) in live.iter().take(excess) {
                dpcls.remove(f);
                c.deleted_limit += 1;
                deleted += 1;
            }
        }
        deleted
    }
}

/// Where rule-change revalidation runs (module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RevalidatorMode {
    #[default]
    Inline,
    Thread,
}

impl RevalidatorMode {
    /// The mode as command lines and reports spell it.
    pub fn name(self) -> &'static str {
        match self {
            RevalidatorMode::Inline => "inline",
            RevalidatorMode::Thread => "thread",
        }
    }

    /// The mode called `name` ([`RevalidatorMode::name`]).
    pub fn from_name(name: &str) -> Option<RevalidatorMode> {
        [RevalidatorMode::Inline, RevalidatorMode::Thread].into_iter().find(|m| m.name() == name)
    }
}

/// What the revalidator thread keeps of one megaflow (OVS's ukey): enough to re-check it, and
/// the rule its packets are attributed to (as the PMD last heard it).
#[derive(Clone, Copy, Debug)]
struct Ukey {
    key: FlowKey,
    mask: FlowKey,
    action: DpAction,
    rule: Option<RuleId>,
}

enum ToThread {
    /// A PMD connects: where its revalidations go.
    Connect(Sender<Revalidation>),
    Installed(Vec<(MegaflowRef, Ukey)>),
    Removed(Vec<MegaflowRef>),
    /// The table changed: the change of this epoch is to be revalidated. Every megaflow the
    /// PMD installs after this message comes from a table of version `known` or later.
    Revalidate {
        epoch: u64,
        known: u64,
    },
}

/// One finished revalidation: every megaflow installed before the rule change of `epoch` (and
/// of the changes coalesced with it) re-checked against the table after it.
#[derive(Clone, Debug)]
pub struct Revalidation {
    /// The latest rule change it covers ([`crate::design::Design::visible_epoch`] after it).
    pub epoch: u64,
    /// The handles to delete (emptied once the PMD has deleted them).
    pub(crate) delete: Vec<MegaflowRef>,
    /// Kept megaflows whose key has another winner now: the rule to attribute them to
    /// (emptied once the PMD has applied them).
    pub(crate) reattribute: Vec<(MegaflowRef, Option<RuleId>)>,
    /// Megaflows the PMD actually deleted (the others were gone already).
    pub deleted: u64,
    /// Megaflows the thread re-checked (translated again); the others could not have changed
    /// (module docs, *Incremental revalidation*).
    pub checked: u64,
    /// Megaflows the thread held for this PMD.
    pub held: u64,
    /// The thread's time on it (re-checking).
    pub thread_ms: f64,
}

/// A PMD's ends of the revalidator thread's channels (module docs).
pub struct RevalidatorThread {
    /// This PMD's number at the thread.
    id: usize,
    to: Option<Sender<(usize, ToThread)>>,
    from: Receiver<Revalidation>,
    /// The thread, when this handle started it for itself ([`RevalidatorThread::spawn`]).
    handle: Option<JoinHandle<()>>,
    /// Epochs of rule changes sent and not yet revalidated, oldest first.
    pending: VecDeque<u64>,
}

/// One revalidator thread serving several PMDs (module docs). The thread ends once this and
/// every handle [`RevalidatorService::connect`] gave are dropped.
pub struct RevalidatorService {
    to: Sender<(usize, ToThread)>,
    next_id: usize,
    handle: Option<JoinHandle<()>>,
}

impl RevalidatorService {
    /// Starts the thread over the shared OpenFlow table.
    pub fn spawn(table: OfprotoTable) -> RevalidatorService {
        let (to, rx) = mpsc::channel::<(usize, ToThread)>();
        let handle = std::thread::Builder::new()
            .name("rqvs-revalidator".into())
            .spawn(move || thread_main(table, rx))
            .expect("spawning the revalidator thread");
        RevalidatorService { to, next_id: 0, handle: Some(handle) }
    }

    /// A handle for one more PMD.
    pub fn connect(&mut self) -> RevalidatorThread {
        let (tx, from) = mpsc::channel::<Revalidation>();
        let id = self.next_id;
        self.next_id += 1;
        let _ = self.to.send((id, ToThread::Connect(tx)));
        RevalidatorThread { id, to: Some(self.to.clone()), from, handle: None, pending: VecDeque::new() }
    }
}

impl RevalidatorThread {
    /// Starts a revalidator thread of its own over the shared OpenFlow table.
    pub fn spawn(table: OfprotoTable) -> RevalidatorThread {
        let mut service = RevalidatorService::spawn(table);
        let mut t = service.connect();
        t.handle = service.handle.take();
        t
    }

    fn send(&self, m: ToThread) {
        // A send fails only when the thread is gone, which `finished` reports as a panic.
        if let Some(to) = &self.to {
            let _ = to.send((self.id, m));
        }
    }

    /// Sends the megaflow cache's journal (installs and deletions since the last call).
    pub fn sync(&self, dpcls: &mut Dpcls) {
        let j: Journal = dpcls.take_journal();
        if j.is_empty() {
            return;
        }
        let installed: Vec<(MegaflowRef, Ukey)> = j
            .installed
            .iter()
            .filter_map(|&f| {
                let e = dpcls.get(f)?;
                Some((f, Ukey { key: e.key, mask: e.megaflow.mask, action: e.action, rule: e.rule }))
            })
            .collect();
        if !installed.is_empty() {
            self.send(ToThread::Installed(installed));
        }
        if !j.removed.is_empty() {
            self.send(ToThread::Removed(j.removed));
        }
    }

    /// Asks for the revalidation of the table change of `epoch` (committed already); `dpcls`'s
    /// journal goes first, so the thread re-checks every megaflow installed before it. `known`:
    /// the oldest table version a megaflow installed after this call can come from (module
    /// docs, *Incremental revalidation*).
    pub fn revalidate(&mut self, dpcls: &mut Dpcls, epoch: u64, known: u64) {
        self.sync(dpcls);
        self.send(ToThread::Revalidate { epoch, known });
        self.pending.push_back(epoch);
    }

    /// No rule change waiting for its revalidation.
    pub fn idle(&self) -> bool {
        self.pending.is_empty()
    }

    /// The epoch of the oldest table whose megaflows may still be installed unchecked, if any
    /// revalidation is pending.
    pub fn oldest_pending(&self) -> Option<u64> {
        self.pending.front().map(|e| e - 1)
    }

    /// Revalidations finished (waiting for them all when `wait`), oldest first; each deletes
    /// nothing yet — the PMD applies them. Panics if the thread died (a bug, not an input).
    pub fn finished(&mut self, wait: bool) -> Vec<Revalidation> {
        let mut done = Vec::new();
        loop {
            let r = if wait && !self.pending.is_empty() {
                match self.from.recv() {
                    Ok(r) => r,
                    Err(_) => self.died(),
                }
            } else {
                match self.from.try_recv() {
                    Ok(r) => r,
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => self.died(),
                }
            };
            while self.pending.front().is_some_and(|&e| e <= r.epoch) {
                self.pending.pop_front();
            }
            done.push(r);
        }
        done
    }

    fn died(&mut self) -> ! {
        let msg = match self.handle.take().map(JoinHandle::join) {
            Some(Err(e)) => e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default(),
            _ => String::new(),
        };
        panic!("the revalidator thread stopped: {msg}");
    }
}

impl Drop for RevalidatorThread {
    fn drop(&mut self) {
        self.to.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// What the thread holds for one PMD: its ukeys and where its revalidations go.
struct Client {
    ukeys: HashMap<MegaflowRef, Ukey>,
    /// The ukeys by address prefix, to find the ones a changed rule meets.
    index: MegaflowIndex<MegaflowRef>,
    /// Every ukey held comes from, or was checked against, a table of this version or later.
    floor: u64,
    reply: Sender<Revalidation>,
}

impl Client {
    fn new(reply: Sender<Revalidation>) -> Client {
        Client { ukeys: HashMap::new(), index: MegaflowIndex::default(), floor: 0, reply }
    }

    /// The ukeys the table's changes after `self.floor` can affect.
    fn affected(&self, table: &OfprotoTable) -> Vec<(MegaflowRef, Ukey)> {
        let changes = table.read().changes_since(self.floor);
        match changes {
            // More changed rules than megaflows: the index's queries would cost more than
            // re-checking every megaflow.
            Changes::Rules(ms) if ms.len() <= self.ukeys.len() => {
                let mut refs = Vec::new();
                for m in &ms {
                    self.index.overlapping(m, &mut refs);
                }
                if ms.len() > 1 {
                    refs.sort_unstable_by_key(|f| (f.slot, f.gen));
                    refs.dedup();
                }
                refs.into_iter().map(|f| (f, self.ukeys[&f])).collect()
            }
            _ => self.ukeys.iter().map(|(&f, &u)| (f, u)).collect(),
        }
    }

    fn forget(&mut self, f: &MegaflowRef) {
        self.ukeys.remove(f);
        self.index.remove(*f);
    }
}

fn thread_main(table: OfprotoTable, rx: Receiver<(usize, ToThread)>) {
    let mut clients: HashMap<usize, Client> = HashMap::new();
    while let Ok(first) = rx.recv() {
        // Everything queued now is applied in order (each PMD's messages arrive in the order it
        // sent them); the rule changes among it are revalidated together, per PMD, against the
        // latest table.
        let t0 = Instant::now();
        // Per PMD: the latest epoch asked for, and its `known` version.
        let mut epochs: Vec<(usize, u64, u64)> = Vec::new();
        let mut next = Some(first);
        while let Some((id, m)) = next {
            match m {
                ToThread::Connect(reply) => {
                    clients.insert(id, Client::new(reply));
                }
                ToThread::Installed(v) => {
                    if let Some(c) = clients.get_mut(&id) {
                        for (f, u) in v {
                            c.index.insert(f, u.key, u.mask);
                            c.ukeys.insert(f, u);
                        }
                    }
                }
                ToThread::Removed(v) => {
                    if let Some(c) = clients.get_mut(&id) {
                        for f in v {
                            c.forget(&f);
                        }
                    }
                }
                ToThread::Revalidate { epoch, known } => match epochs.iter_mut().find(|(i, _, _)| *i == id) {
                    Some(e) => (e.1, e.2) = (epoch, known),
                    None => epochs.push((id, epoch, known)),
                },
            }
            next = rx.try_recv().ok();
        }
        for (id, epoch, known) in epochs {
            let Some(c) = clients.get_mut(&id) else { continue };
            let all = c.affected(&table);
            // Every ukey not in `all` is exact for the table the changes were read from (or a
            // later one); the PMD's next installs come from `known` or later.
            c.floor = known;
            let (checked, held) = (all.len() as u64, c.ukeys.len() as u64);
            let (mut delete, mut reattribute) = (Vec::new(), Vec::new());
            for &(f, u) in &all {
                match still_valid(&table.read(), &u.key, &u.mask, u.action) {
                    None => delete.push(f),
                    Some(rule) if rule != u.rule => reattribute.push((f, rule)),
                    Some(_) => {}
                }
            }
            for f in &delete {
                c.forget(f);
            }
            for &(f, rule) in &reattribute {
                if let Some(u) = c.ukeys.get_mut(&f) {
                    u.rule = rule;
                }
            }
            let thread_ms = t0.elapsed().as_secs_f64() * 1e3;
            let r = Revalidation { epoch, delete, reattribute, deleted: 0, checked, held, thread_ms };
            if c.reply.send(r).is_err() {
                // That PMD is gone.
                clients.remove(&id);
            }
        }
    }
}

/// OVS's `revalidate_ukey`: a megaflow stays when the table gives its key the same action and
/// the new lookup examines no bit its mask does not (module docs). `Some(rule)`: it stays, and
/// its packets are now the table's winner's (`None`: no rule matched).
fn still_valid(table: &TableRead, key: &FlowKey, mask: &FlowKey, action: DpAction) -> Option<Option<RuleId>> {
    let v = table.classify(key);
    (v.action == action && v.megaflow.mask.is_subset_of(mask)).then_some(v.rule)
}
