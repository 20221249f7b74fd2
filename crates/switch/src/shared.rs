//! The shared datapath's PMD threads: several bridges in one process, one set of PMD threads
//! (OVS's one userspace datapath, issue 37).
//!
//! Each bridge is a [`crate::Switch`] of its own — its OpenFlow table of record, its slow-path
//! table and groups, its MAC table, its OpenFlow port numbering, its channel — started with
//! [`crate::SwitchConfig::shared`] set: instead of starting PMD threads it hands its PMD *i*'s
//! setup (its receive and transmit queues of its ports, and its design instance) to thread *i*
//! of the [`SharedPmds`]. Thread *i* runs one [`PmdLoop`] per bridge, one iteration of each in
//! turn: a frame received on a bridge's port is classified by that bridge's design instance
//! (ORIG/CCACHE/CFLOWS state over that bridge's tables only), so the megaflows of two bridges
//! never mix — the decided design (ARCHITECTURE.md): one design instance per bridge per PMD,
//! picked by the receiving port's bridge.
//!
//! A bridge joins and leaves while the others forward: its loops are added between two
//! iterations, and when its stop flag is set each of its loops ends ([`PmdLoop::finish`]) and
//! gives its final report to the bridge's [`crate::Switch::stop`].
//!
//! What is per bridge and not shared (as built): each bridge has its own handler thread (ORIG
//! and CCACHE upcalls), revalidator, expiry thread and link watcher; OVS has one set for the
//! datapath. An idle thread naps as a PMD of its own does (after `pmd::IDLE_POLLS`
//! iterations in which no bridge received a frame, unless busy-polling).
//!
//! A panic in one bridge's loop is logged once, stops that bridge (its `stop` flag, as
//! [`crate::fault::guard`] does for a PMD thread of its own), and the thread goes on with the
//! other bridges' loops; that bridge's `Switch::stop` then reports the panic.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::pmd::{PmdFinal, PmdLoop, PmdSetup, IDLE_POLLS, NAP};
use crate::Error;

/// A bridge's PMD setup joining a thread, and where its final report goes.
struct Join {
    setup: PmdSetup,
    done: Sender<PmdFinal>,
}

/// The datapath's PMD threads, shared by every bridge (module docs).
pub struct SharedPmds {
    inboxes: Vec<Sender<Join>>,
    cpus: Vec<Option<usize>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    stop: Arc<AtomicBool>,
}

impl SharedPmds {
    /// Starts `n` (at least 1) PMD threads, thread *i* pinned to `cpus[i % len]` (none when
    /// empty), spinning when idle if `busy_poll`. They run bridges' loops until dropped.
    pub fn start(n: usize, cpus: &[usize], busy_poll: bool) -> Result<Arc<SharedPmds>, Error> {
        let n = n.max(1);
        let stop = Arc::new(AtomicBool::new(false));
        let cpus: Vec<Option<usize>> = (0..n).map(|i| (!cpus.is_empty()).then(|| cpus[i % cpus.len()])).collect();
        let mut inboxes = Vec::new();
        let mut threads = Vec::new();
        for (i, cpu) in cpus.iter().copied().enumerate() {
            let (send, inbox) = mpsc::channel();
            inboxes.push(send);
            let stop = stop.clone();
            let t = std::thread::Builder::new()
                .name(format!("pmd{i}"))
                .spawn(move || run(i, cpu, inbox, &stop, busy_poll))
                .map_err(|e| Error(format!("starting PMD thread {i}: {e}")))?;
            threads.push(t);
        }
        Ok(Arc::new(SharedPmds { inboxes, cpus, threads: Mutex::new(threads), stop }))
    }

    /// How many PMD threads.
    pub fn len(&self) -> usize {
        self.inboxes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inboxes.is_empty()
    }

    /// Each thread's CPU.
    pub fn cpus(&self) -> &[Option<usize>] {
        &self.cpus
    }

    /// Hands a bridge's PMD `setup` to thread `setup.index`; its final report arrives on the
    /// returned queue once the bridge's `stop` is set (the queue closes without one if the loop
    /// panicked).
    pub(crate) fn join(&self, setup: PmdSetup) -> Result<Receiver<PmdFinal>, Error> {
        let i = setup.index;
        let (done, finals) = mpsc::channel();
        let inbox = self.inboxes.get(i).ok_or_else(|| Error(format!("no shared PMD thread {i}")))?;
        inbox.send(Join { setup, done }).map_err(|_| Error(format!("shared PMD thread {i} has ended")))?;
        Ok(finals)
    }
}

impl Drop for SharedPmds {
    /// Ends the threads once every bridge's loops have ended (every bridge stopped first).
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        for t in threads {
            let _ = t.join();
        }
    }
}

/// One bridge's loop on a thread.
struct Entry {
    lp: PmdLoop,
    /// Its bridge's number in patch crossings, once known ([`crate::crossing::bridge_of`]).
    bridge: Option<u16>,
    done: Sender<PmdFinal>,
    /// The bridge's stop flag (set when its loop panics).
    stop: Arc<AtomicBool>,
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_string())
}

fn admit(entries: &mut Vec<Entry>, j: Join) {
    let stop = j.setup.stop.clone();
    entries.push(Entry { lp: PmdLoop::new(j.setup), bridge: None, done: j.done, stop });
}

/// Hands the patch crossings the last step met to their bridges' loops on this thread (which
/// may meet more: a crossing's ops cross again), until none is left ([`crate::crossing`]).
fn hand_over(i: usize, entries: &mut [Entry]) {
    if let Some(msg) = rqvs_ofproto::crossing::loop_to_log() {
        crate::log_warn!("rqvs switch: PMD thread {i}: {msg}");
    }
    loop {
        let crossed = crate::crossing::take();
        if crossed.is_empty() {
            return;
        }
        for c in crossed {
            let mut at = entries.iter().position(|e| e.bridge == Some(c.bridge));
            if at.is_none() {
                for e in entries.iter_mut().filter(|e| e.bridge.is_none()) {
                    e.bridge = crate::crossing::bridge_of(e.lp.macs());
                }
                at = entries.iter().position(|e| e.bridge == Some(c.bridge));
            }
            match at {
                Some(j) => {
                    let e = &mut entries[j];
                    if catch_unwind(AssertUnwindSafe(|| e.lp.execute_crossed(&c))).is_err() {
                        crate::log_error!(
                            "rqvs switch: PMD thread {i} panicked running a patch crossing; stopping its bridge (a bug: please report it)"
                        );
                        e.stop.store(true, Ordering::Relaxed);
                    }
                }
                None => crate::crossing::no_loop(&c),
            }
        }
    }
}

fn run(i: usize, cpu: Option<usize>, inbox: Receiver<Join>, stop: &AtomicBool, busy_poll: bool) {
    if let Some(cpu) = cpu {
        crate::sys::pin_to(cpu);
    }
    crate::crossing::activate();
    let mut entries: Vec<Entry> = Vec::new();
    let mut idle_polls = 0u32;
    loop {
        loop {
            match inbox.try_recv() {
                Ok(j) => admit(&mut entries, j),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) if entries.is_empty() => return,
                Err(TryRecvError::Disconnected) => break,
            }
        }
        if entries.is_empty() {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            match inbox.recv_timeout(Duration::from_millis(50)) {
                Ok(j) => admit(&mut entries, j),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            continue;
        }
        let mut got = 0usize;
        let mut k = 0;
        while k < entries.len() {
            match catch_unwind(AssertUnwindSafe(|| entries[k].lp.step())) {
                Ok(step) if !step.end => {
                    got += step.got;
                    k += 1;
                    hand_over(i, &mut entries);
                }
                Ok(_) => {
                    let e = entries.remove(k);
                    match catch_unwind(AssertUnwindSafe(|| e.lp.finish())) {
                        Ok(f) => {
                            let _ = e.done.send(f);
                        }
                        Err(p) => crate::log_error!(
                            "rqvs switch: PMD thread {i} panicked ending a bridge's loop: {} (a bug: please report it)",
                            panic_message(p.as_ref())
                        ),
                    }
                }
                Err(p) => {
                    let e = entries.remove(k);
                    crate::log_error!(
                        "rqvs switch: PMD thread {i} panicked: {}; stopping its bridge (a bug: please report it)",
                        panic_message(p.as_ref())
                    );
                    e.stop.store(true, Ordering::Relaxed);
                    // Its loop is dropped without a final report: the bridge's stop says so.
                    drop(e);
                }
            }
        }
        if got == 0 {
            idle_polls = idle_polls.saturating_add(1);
            if !busy_poll && idle_polls >= IDLE_POLLS {
                std::thread::sleep(NAP);
            }
        } else {
            idle_polls = 0;
        }
    }
}
