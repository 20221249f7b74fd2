//! A PMD thread of the switch: it owns receive queue *i* and transmit queue *i* of every port
//! and one design instance, and loops: poll each receive queue for a batch of up to 32 frames,
//! parse them into keys, take the batch through the PMD loop ([`rqvs_datapath::Pmd`]: the
//! design's fast path, then the handler on what missed it), apply each packet's action to its
//! frame, flush the transmit queues, give the batch back; housekeeping and the management
//! thread's messages between batches.
//!
//! Upcalls (ORIG, CCACHE) go to the handler thread ([`crate::handler`]) and come back with
//! their verdicts, which the PMD installs and executes at its next iteration; or, with
//! `--upcalls inline`, the PMD runs the slow path itself (OVS-DPDK's arrangement).
//!
//! Each packet classified is counted for the rule that decided it, in the PMD's own per-flow
//! counters ([`crate::flowstats`]), which the management side reads with
//! [`PmdMsg::FlowStats`].
//!
//! Packet-outs (OpenFlow PACKET_OUT) arrive as [`PmdMsg::PacketOut`]: the PMD owns transmit
//! queue *i* of every port, so the frame is sent from here, between batches, through the same
//! executor (counted in `injected`, see [`crate::stats`]).
//!
//! **Ports attached and removed live** ([`PmdMsg::AddPort`], [`PmdMsg::RemovePort`], between
//! two batches): a new port's receive and transmit queue join the PMD's, its counters are grown
//! in place (every other port's counts kept); a removed port's queues are dropped and its index
//! stays retired (`None`) — never reused, as an upcall at the handler may still name it; its
//! counts stay. The receive queues are by datapath index; the transmit queues are the live
//! ports' only, in index order, with the executor's map of their ofports.
//!
//! Nothing on this path takes a lock: queues and the design are the thread's own; ORIG and
//! CCACHE read the shared OpenFlow table only in the handler and the revalidator; messages and
//! the handler's answers are polled with a non-blocking `try_recv`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rqvs_datapath::policer::Policer;
use rqvs_datapath::upcall::Upcall;
use rqvs_datapath::{Design, DesignReport, Pmd, BATCH};
use rqvs_flow::frame::extract_datapath;
use rqvs_flow::{FlowKey, RuleId};
use rqvs_ofproto::{DpAction, NO_RULE};
use rqvs_ports::{RxQueue, TxQueue};
use serde::Serialize;

use crate::execute::Executor;
use crate::flowstats::{FlowCounters, Parting};
use crate::handler::{UpcallBatch, UpcallItem};
use crate::ofports::OfPorts;
use crate::stats::{PmdCounters, PmdReport};
use rqvs_ofproto::flowstate::FlowCount;

/// A message from the management thread, handled between batches.
pub enum PmdMsg {
    /// The shared OpenFlow table was committed to (ORIG, CCACHE), now at this version:
    /// revalidate, and answer once no megaflow of an older table can decide a packet.
    TableChanged(u64, Sender<()>),
    /// Counters now: since the last clear when `since_clear` (`pmd-stats-show`), else since the
    /// PMD started (the metrics endpoint's counters, which never go back).
    Stats { since_clear: bool, reply: Sender<PmdReport> },
    /// Clears the counters `pmd-stats-show` reports (OVS keeps a baseline too); answers once
    /// the baseline is taken, so frames sent after the answer count as after the clear.
    Clear(Sender<()>),
    /// The megaflows, one `ovs-appctl dpctl/dump-flows` line each.
    DumpFlows(Sender<Vec<String>>),
    /// The per-flow counts of `rules`, in their order; cleared here when `take` (the flows are
    /// gone, or modified under new ids). A PMD that has ended does not answer: its counts are
    /// in [`Parting`].
    FlowStats { rules: Arc<[RuleId]>, take: bool, reply: Sender<Vec<FlowCount>> },
    /// A packet-out to execute: its frame, its in_port, and its ops (a flow's ops already
    /// spliced in where the packet-out said `TABLE`).
    PacketOut(PacketOut),
    /// Answered once every message before it is handled (a packet-out before it is sent): an
    /// OpenFlow BARRIER's wait.
    Sync(Sender<()>),
    /// Port `port` (0-based) was opened again after its interface came back ([`crate::link`]):
    /// this PMD's receive and transmit queue of it replace the old ones.
    Reattach { port: usize, queues: Box<(RxQueue, TxQueue)> },
    /// A port attached live at index `port` (the next one), with this PMD's queues of it, its
    /// ingress policer, and the ports' numbering that includes it (module docs).
    AddPort { port: usize, ofports: Arc<OfPorts>, queues: Box<(RxQueue, TxQueue)>, policer: Option<Policer> },
    /// Port `port` removed: its queues are dropped, its index retired; `ofports` no longer has it.
    RemovePort { port: usize, ofports: Arc<OfPorts> },
}

/// A PACKET_OUT as a PMD executes it.
#[derive(Clone, Debug)]
pub struct PacketOut {
    pub frame: Vec<u8>,
    /// The packet-out's in_port (rqvs numbering: `CONTROLLER` is 0xfffd).
    pub in_port: u32,
    pub ops: Vec<rqvs_ofproto::actions::Op>,
}

/// What a PMD thread is given.
pub struct PmdSetup {
    pub index: usize,
    pub cpu: Option<usize>,
    /// Receive queue of each port, by datapath index (`None`: the port was removed).
    pub rx: Vec<Option<RxQueue>>,
    /// Each receive queue's ingress policer (`None`: not policed), by port − 1.
    pub policers: Vec<Option<Policer>>,
    /// The live ports' transmit queues, in index order (module docs).
    pub tx: Vec<TxQueue>,
    /// The datapath index of each of `tx`.
    pub tx_of: Vec<usize>,
    /// Ports come and go while running ([`PmdMsg::AddPort`]): run until stopped, also with no
    /// port or only finished ones.
    pub live_ports: bool,
    pub design: Box<dyn Design + Send>,
    pub inbox: Receiver<PmdMsg>,
    pub stop: Arc<AtomicBool>,
    /// Spin without sleeping when idle (OVS-DPDK's behaviour); otherwise sleep briefly after a
    /// run of empty polls.
    pub busy_poll: bool,
    /// The handler thread; `None`: upcalls handled inline.
    pub handler: Option<HandlerLink>,
    /// Where this PMD leaves its per-flow counters when it ends.
    pub parting: Parting,
    /// The `NORMAL` action's MAC table (shared by every PMD).
    pub macs: Arc<crate::normal::MacTable>,
    /// The ports' OpenFlow numbers (a received frame's `in_port`), by datapath index.
    pub ofports: Arc<OfPorts>,
    /// The ports' PORT_MOD bits (the executor applies them).
    pub port_flags: Arc<crate::portflags::PortFlags>,
    /// The packet-in queue's sending end (`None`: no OpenFlow channel).
    pub packet_in: Option<std::sync::mpsc::SyncSender<crate::execute::PacketIn>>,
    /// The switch's meters ([`rqvs_ofproto::meters`]).
    pub meters: Arc<rqvs_ofproto::meters::MeterTable>,
    /// Per port, the counters of this PMD's queues of the port's handles before a
    /// re-attachment ([`PmdMsg::Reattach`]).
    pub queue_retired: Vec<rqvs_ports::QueueStats>,
    /// Per port, this PMD's queue counters (retired included) at the last `pmd-stats-clear`:
    /// taken by the thread that moves them, at the same moment as the PMD's own baseline, so
    /// that counters since the clear add up exactly.
    pub queue_base: Vec<rqvs_ports::QueueStats>,
}

/// A PMD's ends of the handler thread's queues.
pub struct HandlerLink {
    pub to: SyncSender<UpcallBatch>,
    pub from: Receiver<UpcallBatch>,
    /// Packets this PMD may have at the handler at once.
    pub cap: usize,
}

/// How long a stopping PMD waits for the handler's last answers before counting them lost.
const HANDLER_DRAIN: Duration = Duration::from_secs(5);

/// Empty polls of every queue before an idle PMD naps (when not busy-polling).
pub(crate) const IDLE_POLLS: u32 = 1024;
pub(crate) const NAP: Duration = Duration::from_micros(50);

/// The final state of a PMD thread when it stops.
#[derive(Clone, Debug, Serialize)]
pub struct PmdFinal {
    pub report: PmdReport,
}

/// What the PMD owes: its upcalls at the handler thread, and answers to rule changes waiting
/// for their revalidation.
struct Inflight {
    /// `(epoch, answer)`: sent once the design's oldest live epoch reaches the epoch.
    revalidations: Vec<(u64, Sender<()>)>,
    /// Table changes taken from the inbox and not yet revalidated for: all of them start one
    /// revalidation once the inbox is drained (commits that queued up while the PMD was busy
    /// cost one pass over the megaflows, not one each).
    changed: Vec<Sender<()>>,
    /// Packets at the handler, in all and by port.
    n: usize,
    by_port: Vec<usize>,
    /// The newest table version this PMD has revalidated against.
    known_version: u64,
    /// Every receive queue is a file's: wait for room instead of losing packets.
    offline: bool,
    taken: Vec<Upcall>,
}

/// What one [`PmdLoop::step`] did.
#[derive(Clone, Copy, Debug)]
pub struct Step {
    /// Frames received.
    pub got: usize,
    /// The PMD is to stop: [`PmdLoop::finish`] it.
    pub end: bool,
}

/// A PMD's state between iterations: one bridge's receive queues, design instance, executor
/// and counters. A thread of its own runs one ([`run`]); a thread of the shared datapath runs
/// one per bridge ([`crate::shared`]).
pub struct PmdLoop {
    s: PmdSetup,
    t0: Instant,
    pmd: Pmd,
    action_reader: rqvs_ofproto::actions::Reader,
    exec: Executor,
    c: PmdCounters,
    baseline: (PmdCounters, rqvs_datapath::Counters),
    flows: FlowCounters,
    keys: [FlowKey; BATCH],
    /// Which frame of the batch each key came from.
    frame_of: [usize; BATCH],
    seq: u64,
    switches_logged: u64,
    test_panic: bool,
    up: Inflight,
}

/// Runs a PMD thread to completion: until `stop`, or until every receive queue is an offline
/// one that has delivered all its frames.
pub fn run(s: PmdSetup) -> PmdFinal {
    if let Some(cpu) = s.cpu {
        crate::sys::pin_to(cpu);
    }
    let busy_poll = s.busy_poll;
    let mut l = PmdLoop::new(s);
    let mut idle_polls = 0u32;
    loop {
        let step = l.step();
        if step.end {
            break;
        }
        if step.got == 0 {
            idle_polls += 1;
            if !busy_poll && idle_polls >= IDLE_POLLS {
                std::thread::sleep(NAP);
            }
        } else {
            idle_polls = 0;
        }
    }
    l.finish()
}

impl PmdLoop {
    /// Takes a PMD's setup; the thread that steps it is the PMD (pinning is the caller's).
    pub fn new(mut s: PmdSetup) -> PmdLoop {
        let t0 = Instant::now();
        let pmd = Pmd::new();
        // The batch uses action lists it does not hold; each iteration's start is its quiescent
        // point for the action table's freeing (`rqvs_ofproto::actions`, *Freeing*).
        let action_reader = rqvs_ofproto::actions::Reader::register();
        let exec =
            Executor::new(s.macs.clone(), s.packet_in.take().map(|q| crate::execute::PacketInQueue::new(q, s.index)))
                .with_ports(tx_map(&s))
                .with_meters(s.meters.clone())
                .with_port_flags(s.port_flags.clone());
        let c = PmdCounters::new(s.rx.len());
        let baseline = (PmdCounters::default(), s.design.counters());
        let flows = FlowCounters::new();
        let keys = [FlowKey::default(); BATCH];
        // Which frame of the batch each key came from.
        let frame_of = [0usize; BATCH];
        let seq: u64 = 0;
        let switches_logged = 0u64;
        let test_panic = s.index == 0 && crate::fault::test_panic("pmd");
        let up = Inflight {
            revalidations: Vec::new(),
            changed: Vec::new(),
            n: 0,
            by_port: vec![0; s.rx.len()],
            known_version: 0,
            offline: !s.live_ports && s.rx.iter().flatten().all(RxQueue::is_offline),
            taken: Vec::new(),
        };
        PmdLoop {
            s,
            t0,
            pmd,
            action_reader,
            exec,
            c,
            baseline,
            flows,
            keys,
            frame_of,
            seq,
            switches_logged,
            test_panic,
            up,
        }
    }

    /// Runs a patch crossing into this loop's bridge ([`crate::crossing`]): the peer's ops on the
    /// frame, with this bridge's executor and transmit queues; the copies count as this PMD's
    /// outputs, the packet in the flow counters of this bridge's rules it passed (`rule`).
    pub(crate) fn execute_crossed(&mut self, c: &crate::crossing::Crossed) {
        if c.rule != NO_RULE {
            self.flows.hit(c.rule, c.frame.len());
        }
        let ops = rqvs_ofproto::actions::ops(c.ops);
        self.exec.set_crossings(c.crossings);
        let o = self.exec.execute_crossed(&c.frame, c.in_port, &ops, &mut self.s.tx);
        self.c.no_forward_outputs += u64::from(o.no_forward);
        let _ = outcome(&mut self.c, o);
        flush(&mut self.s.tx);
    }

    /// The bridge's MAC table (the loop's bridge, as [`crate::crossing::bridge_of`] finds it).
    pub(crate) fn macs(&self) -> &Arc<crate::normal::MacTable> {
        &self.s.macs
    }

    /// One iteration: every receive queue polled once, housekeeping, the inbox's messages.
    /// `end`: the PMD is to stop (then [`PmdLoop::finish`]).
    pub fn step(&mut self) -> Step {
        let PmdLoop {
            s,
            t0,
            pmd,
            action_reader,
            exec,
            c,
            baseline,
            flows,
            keys,
            frame_of,
            seq,
            switches_logged,
            test_panic,
            up,
        } = self;
        action_reader.quiescent();
        let mut got = 0usize;
        if let Some(link) = &s.handler {
            if up.n > 0 {
                let busy = Instant::now();
                if answers(link, s.design.as_mut(), up, c, exec, &mut s.tx, flows, &s.ofports, None) > 0 {
                    c.busy_ns += busy.elapsed().as_nanos() as u64;
                }
            }
        }
        for p in 0..s.rx.len() {
            let in_port = s.ofports.ofport(p);
            let Some(q) = s.rx[p].as_mut() else { continue };
            let batch = q.recv();
            let n_frames = batch.len();
            if n_frames == 0 {
                continue;
            }
            if *test_panic {
                panic!("RQVS_TEST_PANIC=pmd: PMD 0's test panic");
            }
            let busy = Instant::now();
            got += n_frames;
            c.rx[p] += n_frames as u64;
            // Ingress policing: the frames over the bucket (the batch's tail) are dropped before
            // they are parsed.
            let passed = match s.policers.get_mut(p).and_then(Option::as_mut) {
                Some(policer) => {
                    let pass = policer.admit(t0.elapsed().as_nanos() as u64, n_frames);
                    c.policed[p] += (n_frames - pass) as u64;
                    c.dropped[p] += (n_frames - pass) as u64;
                    pass
                }
                None => n_frames,
            };
            let mut n = 0;
            for (i, f) in batch.iter().take(passed).enumerate() {
                // A frame past the patch crossings' bound: a loop of patch ports ends here.
                if crate::crossing::past_bound(batch.crossings(i)) {
                    c.dropped[p] += 1;
                    crate::crossing::loop_dropped(1);
                    continue;
                }
                match extract_datapath(f, in_port) {
                    Some(k) => {
                        keys[n] = k;
                        frame_of[n] = i;
                        n += 1;
                    }
                    None => c.malformed[p] += 1,
                }
            }
            let seq0 = *seq;
            *seq += n as u64;
            let (_, actions) = pmd.receive(s.design.as_mut(), &keys[..n], seq0);
            // The per-flow counters: fetched now, counted after the actions, so their cache
            // misses hide behind the frame work (a `Pending` or `Lost` packet's rule is NO_RULE:
            // its count comes with its upcall's answer, or never).
            let rules = s.design.batch_rules();
            for (j, &a) in actions.iter().enumerate() {
                // One fetch per packet's work, not all at once: the fill buffers do not overflow.
                flows.prefetch(rules.get(j).copied().unwrap_or(NO_RULE));
                match a {
                    DpAction::Pending => {}
                    DpAction::Lost => c.lost[p] += 1,
                    a => {
                        exec.set_crossings(batch.crossings(frame_of[j]));
                        account(c, p, exec.execute(batch.get(frame_of[j]).unwrap_or(&[]), in_port, a, &mut s.tx));
                    }
                }
            }
            for (j, &rule) in rules.iter().enumerate() {
                flows.hit(rule, batch.get(frame_of[j]).map_or(0, <[u8]>::len));
            }
            match &s.handler {
                Some(link) => {
                    up.taken.clear();
                    s.design.take_upcalls(&mut up.taken);
                    if !up.taken.is_empty() {
                        let items = up
                            .taken
                            .iter()
                            .map(|u| {
                                let i = frame_of[(u.seq - seq0) as usize];
                                let frame = batch.get(i).unwrap_or(&[]).to_vec();
                                UpcallItem { upcall: *u, port: p, frame, crossings: batch.crossings(i), verdict: None }
                            })
                            .collect();
                        drop(batch);
                        send_upcalls(
                            link,
                            s.index,
                            items,
                            s.design.as_mut(),
                            up,
                            c,
                            exec,
                            &mut s.tx,
                            flows,
                            &s.ofports,
                        );
                    }
                }
                None => {
                    let handled = pmd.handle(s.design.as_mut());
                    let rules = s.design.upcall_rules();
                    for (i, &(q, a)) in handled.iter().enumerate() {
                        let f = frame_of[(q - seq0) as usize];
                        let frame = batch.get(f).unwrap_or(&[]);
                        flows.hit(rules.get(i).copied().unwrap_or(NO_RULE), frame.len());
                        exec.set_crossings(batch.crossings(f));
                        account(c, p, exec.execute(frame, in_port, a, &mut s.tx));
                    }
                }
            }
            flush(&mut s.tx);
            c.busy_ns += busy.elapsed().as_nanos() as u64;
        }
        pmd.housekeep(s.design.as_mut());
        if s.design.design_switches() != *switches_logged {
            *switches_logged = log_switches(s, *switches_logged);
        }
        if !up.revalidations.is_empty() {
            let oldest = s.design.oldest_epoch();
            up.revalidations.retain(|(epoch, answer)| {
                let done = oldest >= *epoch;
                if done {
                    let _ = answer.send(());
                }
                !done
            });
        }
        s.design.idle_until(t0.elapsed().as_nanos() as u64);
        c.iterations += 1;
        while let Ok(msg) = s.inbox.try_recv() {
            handle_msg(msg, s, c, baseline, up, exec, flows, t0);
        }
        if !up.changed.is_empty() {
            // Verdicts older than `known_version` are not installed from now on: the
            // revalidator reads the table's changes after it (incremental revalidation).
            s.design.table_changed_at(up.known_version);
            let epoch = s.design.visible_epoch();
            up.revalidations.extend(up.changed.drain(..).map(|answer| (epoch, answer)));
        }
        let stop = s.stop.load(Ordering::Relaxed);
        // Stop after this iteration: what is queued in the kernel is counted by the ports
        // (rx_lost) when they close; what was taken is sent by `finish`.
        let end = stop || (got == 0 && !s.live_ports && s.rx.iter().flatten().all(RxQueue::is_finished));
        Step { got, end }
    }

    /// Ends the PMD: the handler's last answers taken, its counters left in [`Parting`].
    pub fn finish(self) -> PmdFinal {
        let PmdLoop { mut s, t0, mut exec, mut c, baseline, mut flows, mut up, .. } = self;
        // The handler's last answers: every packet taken is sent or counted.
        if let Some(link) = s.handler.take() {
            while up.n > 0 {
                if answers(
                    &link,
                    s.design.as_mut(),
                    &mut up,
                    &mut c,
                    &mut exec,
                    &mut s.tx,
                    &mut flows,
                    &s.ofports,
                    Some(HANDLER_DRAIN),
                ) == 0
                {
                    // No answer in time (the handler is gone): what it held is lost.
                    for (p, n) in up.by_port.iter_mut().enumerate() {
                        c.lost[p] += *n as u64;
                        *n = 0;
                    }
                    up.n = 0;
                }
            }
        }
        flush(&mut s.tx);
        s.design.settle();
        let mut report = report(&s, &c, &PmdCounters::default(), &Default::default(), &t0);
        report.table_matched = flows.matched();
        report.pipeline = flows.pipeline().clone();
        let mut since_clear = self::report(&s, &c, &baseline.0, &baseline.1, &t0);
        since_clear.port_base = s.queue_base.clone();
        since_clear.table_matched = flows.matched();
        since_clear.pipeline = flows.pipeline().clone();
        s.parting.leave_reports(s.index, [since_clear, report.clone()]);
        // The per-flow counters stay readable after the thread ends (a flow-stats request now
        // goes unanswered: the asker reads them there).
        s.parting.leave(s.index, std::mem::take(&mut flows));
        // Answer anything still waiting, so no caller blocks on a stopped PMD.
        while let Ok(msg) = s.inbox.try_recv() {
            if matches!(msg, PmdMsg::FlowStats { .. }) {
                continue;
            }
            let mut b = (PmdCounters::default(), Default::default());
            handle_msg(msg, &mut s, &mut c, &mut b, &mut up, &mut exec, &mut flows, &t0);
        }
        PmdFinal { report }
    }
}

/// Logs `--design auto`'s switches after the first `logged` (each once, with its reason);
/// returns how many are logged now.
fn log_switches(s: &PmdSetup, logged: u64) -> u64 {
    let Some(r) = s.design.auto_report() else { return logged };
    for e in r.log.iter().skip(logged as usize) {
        crate::log_info!(
            "rqvs switch: pmd {}: design {} -> {} at {:.3} s: {} (ready in {:.1} ms, {} megaflows preinstalled)",
            s.index,
            e.from_name(),
            e.to_name(),
            e.at_ns as f64 / 1e9,
            e.reason,
            e.ready_ns as f64 / 1e6,
            e.preinstalled
        );
    }
    r.design_switches
}

/// The executor's map: the ofport of each live port's transmit queue (`s.tx`).
fn tx_map(s: &PmdSetup) -> Arc<OfPorts> {
    let numbers = s.tx_of.iter().map(|&i| s.ofports.ofport(i)).collect();
    // The live ports' numbers are distinct and valid, as `s.ofports` checked them.
    Arc::new(OfPorts::new(numbers).unwrap_or_else(|_| OfPorts::identity(0)))
}

fn flush(tx: &mut [TxQueue]) {
    for q in tx.iter_mut() {
        if q.pending() > 0 {
            q.flush();
        }
    }
}

/// Sends one batch of upcalls to the handler: what does not fit (this PMD's in-flight cap, or
/// the handler's full queue) is lost — unless the PMD reads files, which waits for room.
#[allow(clippy::too_many_arguments)]
fn send_upcalls(
    link: &HandlerLink,
    pmd: usize,
    mut items: Vec<UpcallItem>,
    design: &mut dyn Design,
    up: &mut Inflight,
    c: &mut PmdCounters,
    exec: &mut Executor,
    tx: &mut [TxQueue],
    flows: &mut FlowCounters,
    ofports: &OfPorts,
) {
    if up.offline {
        // A file waits: in pieces of at most the cap, each when there is room for it.
        while !items.is_empty() {
            let rest = items.split_off(items.len().min(link.cap.max(1)));
            while up.n > 0 && up.n + items.len() > link.cap {
                if answers(link, design, up, c, exec, tx, flows, ofports, Some(HANDLER_DRAIN)) == 0 {
                    break;
                }
            }
            send_batch(link, pmd, items, design, up, c, true);
            items = rest;
        }
        return;
    }
    let room = link.cap.saturating_sub(up.n).min(items.len());
    let excess = items.split_off(room);
    lose(excess, design, c);
    send_batch(link, pmd, items, design, up, c, false);
}

/// One batch into the handler's queue (waiting for room when `wait`); lost when it does not go.
fn send_batch(
    link: &HandlerLink,
    pmd: usize,
    items: Vec<UpcallItem>,
    design: &mut dyn Design,
    up: &mut Inflight,
    c: &mut PmdCounters,
    wait: bool,
) {
    if items.is_empty() {
        return;
    }
    let n = items.len();
    let by_port: Vec<usize> = items.iter().map(|it| it.port).collect();
    let sent = match link.to.try_send(UpcallBatch { pmd, items }) {
        Ok(()) => Ok(()),
        Err(TrySendError::Full(b)) if wait => link.to.send(b).map_err(|e| e.0),
        Err(TrySendError::Full(b) | TrySendError::Disconnected(b)) => Err(b),
    };
    match sent {
        Ok(()) => {
            up.n += n;
            for p in by_port {
                up.by_port[p] += 1;
            }
        }
        Err(b) => lose(b.items, design, c),
    }
}

/// Upcalls that never reached the handler: lost, on their ports and in the design's counters.
fn lose(items: Vec<UpcallItem>, design: &mut dyn Design, c: &mut PmdCounters) {
    for it in items {
        design.complete_upcall(&it.upcall, None, false);
        c.lost[it.port] += 1;
    }
}

/// Takes the handler's answers — what has arrived, or (with `wait`) the next batch within that
/// time — installs their megaflows, counts each packet for its verdict's rule, applies the
/// actions to the frames and sends them. Returns the packets answered.
#[allow(clippy::too_many_arguments)]
fn answers(
    link: &HandlerLink,
    design: &mut dyn Design,
    up: &mut Inflight,
    c: &mut PmdCounters,
    exec: &mut Executor,
    tx: &mut [TxQueue],
    flows: &mut FlowCounters,
    ofports: &OfPorts,
    wait: Option<Duration>,
) -> usize {
    let mut done = 0;
    loop {
        let b = match wait {
            Some(d) if done == 0 => match link.from.recv_timeout(d) {
                Ok(b) => b,
                Err(_) => break,
            },
            _ => match link.from.try_recv() {
                Ok(b) => b,
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            },
        };
        for it in b.items {
            up.n -= 1;
            up.by_port[it.port] -= 1;
            done += 1;
            let a = match &it.verdict {
                Some((v, version)) => design.complete_upcall(&it.upcall, Some(v), *version >= up.known_version),
                None => design.complete_upcall(&it.upcall, None, false),
            };
            match a {
                DpAction::Lost | DpAction::Pending => c.lost[it.port] += 1,
                a => {
                    let rule = it.verdict.as_ref().and_then(|(v, _)| v.rule).unwrap_or(NO_RULE);
                    flows.hit(rule, it.frame.len());
                    // By the datapath's numbering (a removed port's late answer: NONE).
                    let in_port = ofports.ofport(it.port);
                    exec.set_crossings(it.crossings);
                    account(c, it.port, exec.execute(&it.frame, in_port, a, tx));
                }
            }
        }
    }
    if done > 0 {
        flush(tx);
    }
    done
}

/// Where a frame ended (see [`crate::stats`]).
enum End {
    Forwarded,
    ToController,
    Dropped,
    Lost,
}

/// Counts the copies and packet-ins of one frame's outcome; says where the frame ended.
fn outcome(c: &mut PmdCounters, o: crate::execute::Outcome) -> End {
    c.outputs += u64::from(o.outputs);
    c.skipped_outputs += u64::from(o.skipped);
    c.controller += u64::from(o.to_controller);
    c.packet_ins += u64::from(o.packet_ins);
    c.packet_in_dropped += u64::from(o.packet_in_dropped);
    c.packet_in_metered += u64::from(o.packet_in_metered);
    if o.outputs > 0 || o.crossed > 0 {
        End::Forwarded
    } else if o.packet_ins > 0 {
        End::ToController
    } else if o.packet_in_dropped > 0 {
        End::Lost
    } else {
        End::Dropped
    }
}

fn account(c: &mut PmdCounters, p: usize, o: crate::execute::Outcome) {
    c.port_mod_reasons(p, &o);
    if o.ttl_expired {
        c.ttl_expired[p] += 1;
    }
    if o.metered {
        c.metered[p] += 1;
    }
    match outcome(c, o) {
        End::Forwarded => c.forwarded[p] += 1,
        End::ToController => c.to_controller[p] += 1,
        End::Dropped => c.dropped[p] += 1,
        End::Lost => c.lost[p] += 1,
    }
}

/// A packet-out's frame through the executor, counted in `injected` (a full packet-in queue
/// drops it: `dropped` there, the packet-in counted as dropped).
fn packet_out(c: &mut PmdCounters, exec: &mut Executor, tx: &mut [TxQueue], po: &PacketOut) {
    exec.set_crossings(0);
    let o = exec.execute_packet_out(&po.frame, po.in_port, &po.ops, tx);
    c.no_forward_outputs += u64::from(o.no_forward);
    c.injected.rx += 1;
    if o.ttl_expired {
        c.injected.ttl_expired += 1;
    }
    match outcome(c, o) {
        End::Forwarded => c.injected.forwarded += 1,
        End::ToController => c.injected.to_controller += 1,
        End::Dropped | End::Lost => c.injected.dropped += 1,
    }
    flush(tx);
}

#[allow(clippy::too_many_arguments)]
fn handle_msg(
    msg: PmdMsg,
    s: &mut PmdSetup,
    c: &mut PmdCounters,
    baseline: &mut (PmdCounters, rqvs_datapath::Counters),
    up: &mut Inflight,
    exec: &mut Executor,
    flows: &mut FlowCounters,
    t0: &Instant,
) {
    match msg {
        PmdMsg::FlowStats { rules, take, reply } => {
            let _ = reply.send(if take { flows.take(&rules) } else { flows.read(&rules) });
        }
        PmdMsg::PacketOut(po) => packet_out(c, exec, &mut s.tx, &po),
        PmdMsg::Sync(answer) => {
            let _ = answer.send(());
        }
        PmdMsg::Reattach { port, queues } => {
            let (rx, tx) = *queues;
            let t = s.tx_of.iter().position(|&i| i == port);
            if let (Some(Some(r)), Some(t)) = (s.rx.get_mut(port), t) {
                if let Some(q) = s.queue_retired.get_mut(port) {
                    q.add(&r.stats());
                }
                *r = rx;
                s.tx[t] = tx;
            }
        }
        PmdMsg::AddPort { port, ofports, queues, policer } => {
            let (rx, tx) = *queues;
            let n = port + 1;
            s.rx.resize_with(n.max(s.rx.len()), || None);
            s.rx[port] = Some(rx);
            s.policers.resize_with(n.max(s.policers.len()), || None);
            s.policers[port] = policer;
            let at = s.tx_of.partition_point(|&i| i < port);
            s.tx.insert(at, tx);
            s.tx_of.insert(at, port);
            s.queue_retired.resize(n.max(s.queue_retired.len()), rqvs_ports::QueueStats::default());
            s.queue_base.resize(n.max(s.queue_base.len()), rqvs_ports::QueueStats::default());
            c.grow(n);
            baseline.0.grow(n);
            up.by_port.resize(n.max(up.by_port.len()), 0);
            s.ofports = ofports;
            exec.set_ports(tx_map(s));
        }
        PmdMsg::RemovePort { port, ofports } => {
            if let Some(t) = s.tx_of.iter().position(|&i| i == port) {
                s.tx_of.remove(t);
                // Dropped: flushed first, what it staged counted sent or dropped.
                drop(s.tx.remove(t));
            }
            if let Some(slot) = s.rx.get_mut(port) {
                if let (Some(r), Some(q)) = (slot.take(), s.queue_retired.get_mut(port)) {
                    // Its counts stay the port's (a clear's baseline reads them here).
                    q.add(&r.stats());
                }
            }
            if let Some(p) = s.policers.get_mut(port) {
                *p = None;
            }
            s.ofports = ofports;
            exec.set_ports(tx_map(s));
        }
        PmdMsg::TableChanged(version, answer) => {
            up.known_version = up.known_version.max(version);
            up.changed.push(answer);
        }
        PmdMsg::Stats { since_clear: true, reply } => {
            let mut r = report(s, c, &baseline.0, &baseline.1, t0);
            r.port_base = s.queue_base.clone();
            r.table_matched = flows.matched();
            r.pipeline = flows.pipeline().clone();
            let _ = reply.send(r);
        }
        PmdMsg::Stats { since_clear: false, reply } => {
            let zero = PmdCounters::new(c.rx.len());
            let mut r = report(s, c, &zero, &rqvs_datapath::Counters::default(), t0);
            r.table_matched = flows.matched();
            r.pipeline = flows.pipeline().clone();
            let _ = reply.send(r);
        }
        PmdMsg::Clear(reply) => {
            *baseline = (c.clone(), s.design.counters());
            s.queue_base =
                s.rx.iter()
                    .zip(&s.queue_retired)
                    .map(|(q, retired)| {
                        let mut b = *retired;
                        if let Some(q) = q {
                            b.add(&q.stats());
                        }
                        b
                    })
                    .collect();
            let _ = reply.send(());
        }
        PmdMsg::DumpFlows(reply) => {
            let mut lines = Vec::new();
            let now = s.design.now_ns();
            s.design.for_each_megaflow(&mut |e| {
                let used = now.saturating_sub(e.last_used_ns) as f64 / 1e9;
                lines.push(format!(
                    "{}, packets:{}, used:{}, actions:{}",
                    rqvs_classify::ofproto::format_megaflow(&e.megaflow.value, &e.megaflow.mask),
                    e.hits,
                    if e.hits == 0 { "never".to_string() } else { format!("{used:.3}s") },
                    e.action
                ));
            });
            let _ = reply.send(lines);
        }
    }
}

fn report(
    s: &PmdSetup,
    c: &PmdCounters,
    base: &PmdCounters,
    dbase: &rqvs_datapath::Counters,
    t0: &Instant,
) -> PmdReport {
    let d = s.design.counters();
    let design: DesignReport = s.design.report();
    let mut r = PmdReport::new(s.index, s.cpu, c.minus(base), d, *dbase, design, t0.elapsed());
    r.auto = s.design.auto_report().map(|a| crate::stats::AutoStats::new(&a));
    r
}
