//! Ports attached and removed while the switch runs (`rqvs switch --ovsdb`: `ovs-vsctl
//! add-port`/`del-port` without a datapath restart; [`crate::SwitchConfig::live_ports`]).
//!
//! **Attach** ([`Control::add_port`]): the interface's lock ([`crate::owner`]), the port opened
//! with one queue pair per PMD, the switch's records grown (handle, name, counters), the new
//! numbering ([`crate::ofports::OfPorts::with_port`]: the next index, never a reused one)
//! published, and each PMD handed its queue pair ([`PmdMsg::AddPort`], taken between two
//! batches: its counters grow in place, no other port's change). Returns once every PMD polls
//! it; the OpenFlow connections get PORT_STATUS ADD.
//!
//! **Remove** ([`Control::remove_port`]): the numbering without it published, each PMD drops
//! its queues ([`PmdMsg::RemovePort`]) — the index stays retired: an upcall at the handler may
//! still name it, and its counts stay in `show` (link "removed") so every frame stays accounted
//! for —; once every PMD has, the interface's lock goes (the same interface can be added
//! again, at a new index), the `NORMAL` MAC table forgets the stations learned on it, and the
//! shared OpenFlow table learns that the port is gone and down (one change set:
//! `RuleChange::PortRemoved` — a removed port's packets translate to a drop —, and `PortLive`
//! for fast-failover groups); ORIG/CCACHE PMDs revalidate every megaflow against it, which
//! deletes the megaflows of that `in_port`, and are waited for; then the connections get
//! PORT_STATUS DELETE. A port attached takes its number out of the removed set the same way.
//! A patch port attached or removed has every crossing bridge translate its megaflows again
//! (`crate::crossing::crossings_changed`: what met no crossing may cross now, and the reverse); so
//! does a port's VLANs changed (a `NORMAL` crossing's tag may be another).
//!
//! One change at a time (`port_change`); the link watcher's re-attachment takes the same lock.
//! Only interface ports (`afpacket`, `afxdp`, `tap` devices) are attached this way.

use std::sync::Arc;

use rqvs_ofproto::table::RuleChange;
use rqvs_ports::{LinkState, PortSpec, PortType};

use crate::events::Event;
use crate::ofports::ofport_name;
use crate::pmd::PmdMsg;
use crate::{err, owner, Control, Error, PortInfo};

impl Control {
    /// Attaches the port `spec` numbered `ofport` (module docs); returns its index.
    pub fn add_port(&self, spec: &PortSpec, ofport: u32) -> Result<usize, Error> {
        if !self.live_ports {
            return Err(err("the switch was started with a fixed set of ports (no live port changes)"));
        }
        let _one = self.port_change.lock().unwrap_or_else(|e| e.into_inner());
        let named = |e: String| err(format!("port {} ({spec}): {e}", ofport_name(ofport)));
        let (map, index) = self.ofports().with_port(ofport).map_err(named)?;
        let iface = matches!(spec.port_type, PortType::AfPacket | PortType::AfXdp);
        if iface && self.lock_ports().iter().any(|p| !p.removed && p.spec.as_ref().is_some_and(|s| s.name == spec.name))
        {
            return Err(named(format!("interface {} is a port already", spec.name)));
        }
        let lock = if iface { Some(owner::acquire(&spec.name).map_err(named)?) } else { None };
        let port = rqvs_ports::open(spec, &self.port_config).map_err(|e| named(e.to_string()))?;
        let (handle, rx, tx) = port.split();
        if rx.len() != self.inboxes.len() || tx.len() != self.inboxes.len() {
            return Err(named(format!(
                "opened with {} queues for {} PMD threads (a bug: please report it)",
                rx.len(),
                self.inboxes.len()
            )));
        }
        let state = handle.refresh();
        let map = Arc::new(map);
        // The switch's records first: a PMD's report never names a port they lack.
        self.ports.write().unwrap_or_else(|e| e.into_inner()).push(handle);
        self.retired.lock().unwrap_or_else(|e| e.into_inner()).push(Vec::new());
        self.port_info.write().unwrap_or_else(|e| e.into_inner()).push(PortInfo {
            name: spec.to_string(),
            spec: iface.then(|| spec.clone()),
            policing: None,
            ofport,
            removed: false,
            lock,
        });
        *self.ofports.write().unwrap_or_else(|e| e.into_inner()) = map.clone();
        for ((inbox, rx), tx) in self.inboxes.iter().zip(rx).zip(tx) {
            // A PMD that has ended takes nothing: its queues are dropped with the message.
            let _ = inbox.send(PmdMsg::AddPort {
                port: index,
                ofports: map.clone(),
                queues: Box::new((rx, tx)),
                policer: None,
            });
        }
        self.sync_pmds();
        if let Some(b) = crate::crossing::bridge_of(&self.macs) {
            // A number a removed patch port had: its crossings were that port's.
            crate::patch::crossed::forget(b, Some(ofport));
        }
        self.port_in_table(ofport, false, state == LinkState::Up);
        if matches!(spec.port_type, PortType::Patch(_)) {
            crate::crossing::crossings_changed();
        }
        crate::log_info!("rqvs switch: port {} ({spec}) attached at index {index}", ofport_name(ofport));
        self.emit(vec![Event::PortAdded(index)]);
        Ok(index)
    }

    /// Removes the port numbered `ofport` (module docs).
    pub fn remove_port(&self, ofport: u32) -> Result<(), Error> {
        if !self.live_ports {
            return Err(err("the switch was started with a fixed set of ports (no live port changes)"));
        }
        let _one = self.port_change.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.ofports();
        let Some(i) = now.index(ofport) else {
            return Err(err(format!("port {}: no such port", ofport_name(ofport))));
        };
        let map = Arc::new(now.without(i));
        let (lock, patch) = {
            let mut info = self.port_info.write().unwrap_or_else(|e| e.into_inner());
            let patch = crate::patch::spec_of(&info[i]).is_some_and(|s| matches!(s.port_type, PortType::Patch(_)));
            info[i].removed = true;
            info[i].spec = None;
            (info[i].lock.take(), patch)
        };
        *self.ofports.write().unwrap_or_else(|e| e.into_inner()) = map.clone();
        for inbox in &self.inboxes {
            let _ = inbox.send(PmdMsg::RemovePort { port: i, ofports: map.clone() });
        }
        // Every PMD has dropped its queues: the interface is free.
        self.sync_pmds();
        drop(lock);
        self.macs.forget_port(ofport);
        self.port_flags.forget(ofport);
        self.port_in_table(ofport, true, false);
        if patch {
            crate::crossing::crossings_changed();
        }
        crate::log_info!("rqvs switch: port {} ({}) removed", ofport_name(ofport), self.port_name(i));
        self.emit(vec![Event::PortDeleted(i)]);
        Ok(())
    }

    /// The shared table's view of port `ofport`: removed or not, live or not (module docs); the
    /// ORIG/CCACHE PMDs' revalidation is waited for.
    fn port_in_table(&self, ofport: u32, removed: bool, live: bool) {
        let changes = vec![RuleChange::PortRemoved(ofport, removed), RuleChange::PortLive(ofport, live)];
        match self.table.commit(changes) {
            Ok((version, _)) => {
                *self.trace_table.lock().unwrap_or_else(|e| e.into_inner()) = None;
                if self.design != rqvs_datapath::DesignKind::Cflows {
                    if let Err(e) = self.apply(version, true) {
                        crate::log_warn!("rqvs switch: port {}: revalidating: {e}", ofport_name(ofport));
                    }
                }
            }
            Err(e) => crate::log_warn!("rqvs switch: port {}: the OpenFlow table: {e}", ofport_name(ofport)),
        }
    }

    /// Port `ofport`'s VLANs for `NORMAL` become `vlan` (attached or not yet: set before
    /// [`Control::add_port`] for its first frames to see them); its learned stations are
    /// forgotten ([`crate::normal::MacTable::set_port_vlan`]).
    pub fn set_port_vlan(&self, ofport: u32, vlan: crate::normal::PortVlan) {
        let changed = self.macs.port_vlan(ofport) != vlan;
        self.macs.set_port_vlan(ofport, vlan);
        // Only a `NORMAL` crossing out of this bridge (or nested in one into it) depends on its
        // VLANs, and either needs a patch port here.
        if changed && !self.patch_ports().is_empty() {
            crate::crossing::crossings_changed();
        }
    }

    /// Port index `i`'s OpenFlow number, also once it is removed ([`crate::ofports::NONE`] past
    /// the end).
    pub(crate) fn port_ofport(&self, i: usize) -> u32 {
        self.lock_ports().get(i).map_or(crate::ofports::NONE, |p| p.ofport)
    }

    /// How many port indices (removed ones included).
    pub(crate) fn port_count(&self) -> usize {
        self.lock_ports().len()
    }
}
