//! A PMD thread of the switch: it owns receive queue *i* and transmit queue *i* of every port
//! and one design instance, and loops: poll each receive queue for a batch of up to 32 frames,
//! parse them into keys, take the batch through the PMD loop ([`rqvs_datapath::Pmd`]: the
//! design's fast path, then the handler on what missed it), apply each packet's action to its
//! frame, flush the transmit queues, give the batch back; housekeeping and the management
//! thread's messages between batches.
//!
//! Nothing on this path takes a lock: queues and the design are the thread's own; ORIG and
//! CCACHE read the shared OpenFlow table only in the handler and the revalidator; messages are
//! polled with a non-blocking `try_recv`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rqvs_datapath::{Design, DesignReport, DpAction, Pmd, BATCH};
use rqvs_flow::frame::{extract, Extract};
use rqvs_flow::{FlowKey, Rule, RuleId};
use rqvs_ports::{RxQueue, TxQueue};
use serde::Serialize;

use crate::execute::Executor;
use crate::stats::{PmdCounters, PmdReport};

/// A message from the management thread, handled between batches.
pub enum PmdMsg {
    /// The shared OpenFlow table was committed to (ORIG, CCACHE): revalidate.
    TableChanged,
    /// CFLOWS: rule changes for this PMD's own classifier.
    AddRules(Vec<Rule>, Sender<Result<(), String>>),
    RemoveRules(Vec<RuleId>),
    /// Counters now (since the last clear when `since_clear`).
    Stats(Sender<PmdReport>),
    /// Clears the counters `pmd-stats-show` reports (OVS keeps a baseline too).
    Clear,
    /// The megaflows, one `ovs-appctl dpctl/dump-flows` line each.
    DumpFlows(Sender<Vec<String>>),
}

/// What a PMD thread is given.
pub struct PmdSetup {
    pub index: usize,
    pub cpu: Option<usize>,
    pub rx: Vec<RxQueue>,
    pub tx: Vec<TxQueue>,
    pub design: Box<dyn Design + Send>,
    pub inbox: Receiver<PmdMsg>,
    pub stop: Arc<AtomicBool>,
    /// Spin without sleeping when idle (OVS-DPDK's behaviour); otherwise sleep briefly after a
    /// run of empty polls.
    pub busy_poll: bool,
}

/// Empty polls of every queue before an idle PMD naps (when not busy-polling).
const IDLE_POLLS: u32 = 1024;
const NAP: Duration = Duration::from_micros(50);

/// The final state of a PMD thread when it stops.
#[derive(Clone, Debug, Serialize)]
pub struct PmdFinal {
    pub report: PmdReport,
}

/// Runs a PMD thread to completion: until `stop`, or until every receive queue is an offline
/// one that has delivered all its frames.
pub fn run(mut s: PmdSetup) -> PmdFinal {
    if let Some(cpu) = s.cpu {
        crate::sys::pin_to(cpu);
    }
    let t0 = Instant::now();
    let mut pmd = Pmd::new();
    let mut exec = Executor::new();
    let mut c = PmdCounters::new(s.rx.len());
    let mut baseline = (PmdCounters::default(), s.design.counters());
    let mut keys = [FlowKey::default(); BATCH];
    // Which frame of the batch each key came from.
    let mut frame_of = [0usize; BATCH];
    let mut seq: u64 = 0;
    let mut idle_polls = 0u32;
    let ports = s.rx.len();
    loop {
        let mut got = 0usize;
        for p in 0..ports {
            let in_port = p as u32 + 1;
            let batch = s.rx[p].recv();
            let n_frames = batch.len();
            if n_frames == 0 {
                continue;
            }
            let busy = Instant::now();
            got += n_frames;
            c.rx[p] += n_frames as u64;
            let mut n = 0;
            for (i, f) in batch.iter().enumerate() {
                match extract(f, in_port) {
                    Extract::Ipv4(k) | Extract::Other(k) => {
                        keys[n] = k;
                        frame_of[n] = i;
                        n += 1;
                    }
                    Extract::Truncated { .. } | Extract::Malformed { .. } => c.malformed[p] += 1,
                }
            }
            let seq0 = seq;
            seq += n as u64;
            let (_, actions) = pmd.receive(s.design.as_mut(), &keys[..n], seq0);
            for (j, &a) in actions.iter().enumerate() {
                match a {
                    DpAction::Pending => {}
                    DpAction::Lost => c.lost[p] += 1,
                    a => account(&mut c, p, exec.execute(batch.get(frame_of[j]).unwrap_or(&[]), in_port, a, &mut s.tx)),
                }
            }
            for &(q, a) in pmd.handle(s.design.as_mut()) {
                let j = (q - seq0) as usize;
                account(&mut c, p, exec.execute(batch.get(frame_of[j]).unwrap_or(&[]), in_port, a, &mut s.tx));
            }
            for q in s.tx.iter_mut() {
                if q.pending() > 0 {
                    q.flush();
                }
            }
            drop(batch);
            c.busy_ns += busy.elapsed().as_nanos() as u64;
        }
        pmd.housekeep(s.design.as_mut());
        s.design.idle_until(t0.elapsed().as_nanos() as u64);
        c.iterations += 1;
        while let Ok(msg) = s.inbox.try_recv() {
            handle_msg(msg, &mut s, &mut c, &mut baseline, &t0);
        }
        if got == 0 {
            if s.stop.load(Ordering::Relaxed) || s.rx.iter().all(RxQueue::is_finished) {
                break;
            }
            idle_polls += 1;
            if !s.busy_poll && idle_polls >= IDLE_POLLS {
                std::thread::sleep(NAP);
            }
        } else {
            idle_polls = 0;
            if s.stop.load(Ordering::Relaxed) {
                // Stop after this iteration: what is queued in the kernel is counted by the
                // ports (rx_lost) when they close; what we took has been sent.
                break;
            }
        }
    }
    for q in s.tx.iter_mut() {
        q.flush();
    }
    s.design.settle();
    let report = report(&s, &c, &PmdCounters::default(), &Default::default(), &t0);
    // Answer anything still waiting, so no caller blocks on a stopped PMD.
    while let Ok(msg) = s.inbox.try_recv() {
        let mut b = (PmdCounters::default(), Default::default());
        handle_msg(msg, &mut s, &mut c, &mut b, &t0);
    }
    PmdFinal { report }
}

fn account(c: &mut PmdCounters, p: usize, o: crate::execute::Outcome) {
    c.outputs += u64::from(o.outputs);
    c.skipped_outputs += u64::from(o.skipped);
    c.controller += u64::from(o.to_controller);
    if o.ttl_expired {
        c.ttl_expired[p] += 1;
    }
    if o.outputs > 0 {
        c.forwarded[p] += 1;
    } else {
        c.dropped[p] += 1;
    }
}

fn handle_msg(
    msg: PmdMsg,
    s: &mut PmdSetup,
    c: &mut PmdCounters,
    baseline: &mut (PmdCounters, rqvs_datapath::Counters),
    t0: &Instant,
) {
    match msg {
        PmdMsg::TableChanged => {
            s.design.table_changed();
        }
        PmdMsg::AddRules(rules, reply) => {
            let r = s.design.add_rules(rules).map(|_| ()).map_err(|e| e.to_string());
            let _ = reply.send(r);
        }
        PmdMsg::RemoveRules(ids) => {
            s.design.remove_rules(&ids);
        }
        PmdMsg::Stats(reply) => {
            let _ = reply.send(report(s, c, &baseline.0, &baseline.1, t0));
        }
        PmdMsg::Clear => *baseline = (c.clone(), s.design.counters()),
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
    PmdReport::new(s.index, s.cpu, c.minus(base), d, *dbase, design, t0.elapsed())
}
