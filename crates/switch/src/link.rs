//! The link watcher: a thread that follows each port's carrier and admin state, tells the
//! OpenFlow channel of every change ([`Event::PortStatus`] → OFPT_PORT_STATUS) and re-attaches
//! a port whose interface was deleted once an interface of the same name exists again.
//!
//! **Polling, not netlink.** Every [`WATCH_EVERY`] (100 ms) it asks the kernel about each port
//! ([`PortHandle::refresh`]: `SIOCGIFNAME` + `SIOCGIFFLAGS` on a socket in the port's namespace,
//! and the kernel's loss counters). We chose this over an `RTM_NEWLINK` subscription on a
//! `NETLINK_ROUTE` socket because: the ports already hold a control socket in their interface's
//! namespace (a switch can be started from a thread that entered a namespace, where a netlink
//! socket would have to be opened the same way) and a flag read is two system calls, so a
//! switch with 16 ports costs ~320 system calls a second — nothing next to a PMD; a netlink
//! listener would need message parsing, a buffer that can overflow (ENOBUFS, after which a
//! full re-read is needed anyway) and a second code path for the state the ports already read.
//! What polling gives up: a change shorter than 100 ms (down and up again between two looks)
//! is not seen; a change is seen within 100 ms (plus the system's scheduling delay).
//!
//! **Re-attachment.** A port whose interface is gone (deleted, or moved to another namespace)
//! is opened again by its spec, with the switch's port configuration, as soon as that succeeds
//! (an interface of the same name exists and is usable): each PMD gets its new receive and
//! transmit queue ([`PmdMsg::Reattach`], handled between two batches), the new handle replaces
//! the old one, and the old handle is kept so that the port's counters continue from where
//! they were (its counters plus the new ones). `pcap` and in-memory ports are never gone.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rqvs_ports::{EventKind, LinkState, PortEvent, PortHandle};

use crate::events::Event;
use crate::pmd::PmdMsg;
use crate::Control;

/// How often the watcher looks at the ports.
pub const WATCH_EVERY: Duration = Duration::from_millis(100);

/// Starts the watcher thread; it ends when the switch stops.
pub(crate) fn spawn(control: Arc<Control>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name("link".into()).spawn(move || {
        let mut last: Vec<LinkState> = Vec::new();
        while !control.stop.load(Ordering::Relaxed) {
            control.watch_links(&mut last);
            // Sleep in short steps so that a stop is not kept waiting.
            for _ in 0..10 {
                if control.stop.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(WATCH_EVERY / 10);
            }
        }
    })
}

impl Control {
    /// The current handle of port `i` (0-based).
    pub(crate) fn port(&self, i: usize) -> PortHandle {
        self.ports.read().unwrap_or_else(|e| e.into_inner())[i].clone()
    }

    /// One look at every port: refresh, re-attach the gone ones that can be, report changes. A
    /// port attached since the last look is first seen as it is; a removed one is not looked at.
    pub(crate) fn watch_links(&self, last: &mut Vec<LinkState>) {
        while last.len() < self.port_count() {
            last.push(self.port(last.len()).link());
        }
        let map = self.ofports();
        for (i, seen) in last.iter_mut().enumerate() {
            if !map.is_live(i) {
                continue;
            }
            let mut now = self.port(i).refresh();
            if now == LinkState::Gone {
                if let Some(state) = self.reattach(i) {
                    now = state;
                }
            }
            if now != *seen {
                crate::log_debug!(
                    "rqvs switch: port {} ({}): link {seen:?} -> {now:?}: PORT_STATUS to the OpenFlow connections",
                    crate::ofports::ofport_name(map.ofport(i)),
                    self.port_name(i)
                );
                let was_live = *seen == LinkState::Up;
                *seen = now;
                if was_live != (now == LinkState::Up) {
                    self.port_liveness(map.ofport(i), now == LinkState::Up);
                }
                self.emit(vec![Event::PortStatus(map.ofport(i))]);
            }
        }
    }

    /// Port `port`'s liveness changed: the translation's fast-failover groups follow it (the
    /// shared table takes it; ORIG/CCACHE revalidate, CFLOWS' PMDs see the table's new version).
    fn port_liveness(&self, port: u32, live: bool) {
        match self.table.commit(vec![rqvs_ofproto::table::RuleChange::PortLive(port, live)]) {
            Ok((version, _)) => {
                *self.trace_table.lock().unwrap_or_else(|e| e.into_inner()) = None;
                if self.design != rqvs_datapath::DesignKind::Cflows {
                    if let Err(e) = self.apply(version, false) {
                        crate::log_warn!("rqvs switch: port {port}: liveness for fast-failover groups: {e}");
                    }
                }
            }
            Err(e) => crate::log_warn!("rqvs switch: port {port}: liveness for fast-failover groups: {e}"),
        }
    }

    /// Opens port `i` again (module docs); its new link state, or `None` while it cannot be.
    fn reattach(&self, i: usize) -> Option<LinkState> {
        // Not while a port is attached or removed ([`crate::attach`]).
        let _one = self.port_change.lock().unwrap_or_else(|e| e.into_inner());
        let spec = self.lock_ports().get(i)?.spec.clone()?;
        let spec = &spec;
        if self.stop.load(Ordering::Relaxed) {
            return None;
        }
        // Failures are the normal case while the interface is absent: not reported.
        let port = rqvs_ports::open(spec, &self.port_config).ok()?;
        let (handle, rx, tx) = port.split();
        if rx.len() != self.inboxes.len() || tx.len() != self.inboxes.len() {
            return None;
        }
        for ((inbox, rx), tx) in self.inboxes.iter().zip(rx).zip(tx) {
            // A PMD that has ended takes nothing: its queue is dropped with the message.
            let _ = inbox.send(PmdMsg::Reattach { port: i, queues: Box::new((rx, tx)) });
        }
        let state = handle.refresh();
        let old = std::mem::replace(&mut self.ports.write().unwrap_or_else(|e| e.into_inner())[i], handle);
        self.retired.lock().unwrap_or_else(|e| e.into_inner())[i].push(old);
        if let Some(hook) = &self.port_config.hook {
            hook(&PortEvent {
                port: spec.name.clone(),
                kind: EventKind::LinkUp,
                detail: format!("re-attached (the interface is back), link {state:?}").to_lowercase(),
            });
        }
        Some(state)
    }

    /// Port `i`'s counters: those of its current handle plus those of the handles it had
    /// before re-attachments.
    pub(crate) fn port_stats(&self, i: usize) -> rqvs_ports::PortStats {
        let mut s = self.port(i).stats();
        for old in self.retired.lock().unwrap_or_else(|e| e.into_inner())[i].iter() {
            s.total.add(&old.stats().total);
        }
        s
    }
}
