//! The bridges of one datapath (`rqvs switch --ovsdb`, issue 37): each bridge's switch by name,
//! for the unixctl socket's commands that name a bridge (`fdb/show BRIDGE`, `ofproto/trace
//! BRIDGE FLOW`) and those that show the one datapath over every bridge
//! (`dpif-netdev/pmd-stats-show`, `dpctl/dump-flows`: [`crate::unixctl::execute_bridges`]).
//! The bridges share the PMD threads ([`crate::shared`]): PMD *i*'s report of the datapath is
//! the sum of each bridge's loop on thread *i* ([`merge_pmd`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use crate::stats::PmdReport;
use crate::Control;

/// The running bridges by name, and the datapath's stop request (`ovs-appctl exit`).
#[derive(Default)]
pub struct Bridges {
    map: RwLock<BTreeMap<String, Arc<Control>>>,
    stop: AtomicBool,
    /// The shared PMD threads' CPUs (`-pmd CORE` arguments are checked against them).
    cpus: RwLock<Vec<Option<usize>>>,
}

impl Bridges {
    pub fn new(cpus: Vec<Option<usize>>) -> Bridges {
        Bridges { cpus: RwLock::new(cpus), ..Bridges::default() }
    }

    /// Bridge `name` is now served by `control` (a bridge started or restarted).
    pub fn set(&self, name: &str, control: Arc<Control>) {
        self.map.write().unwrap_or_else(|e| e.into_inner()).insert(name.to_string(), control);
    }

    /// Bridge `name` is gone.
    pub fn remove(&self, name: &str) {
        self.map.write().unwrap_or_else(|e| e.into_inner()).remove(name);
    }

    pub fn get(&self, name: &str) -> Option<Arc<Control>> {
        self.map.read().unwrap_or_else(|e| e.into_inner()).get(name).cloned()
    }

    /// Every bridge, by name.
    pub fn all(&self) -> Vec<(String, Arc<Control>)> {
        self.map.read().unwrap_or_else(|e| e.into_inner()).iter().map(|(n, c)| (n.clone(), c.clone())).collect()
    }

    pub fn names(&self) -> Vec<String> {
        self.map.read().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect()
    }

    pub fn cpus(&self) -> Vec<Option<usize>> {
        self.cpus.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Asks the datapath (every bridge, the process) to stop.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Adds `r` (one bridge's loop on a PMD thread) into `into` (the thread's report so far): the
/// counts summed, the ports listed after `into`'s, the averages recomputed.
pub fn merge_pmd(into: &mut PmdReport, r: &PmdReport) {
    into.ports.extend(r.ports.iter().cloned());
    into.total.add(&r.total);
    into.outputs += r.outputs;
    into.skipped_outputs += r.skipped_outputs;
    into.no_forward_outputs += r.no_forward_outputs;
    into.controller += r.controller;
    into.packet_ins += r.packet_ins;
    into.packet_in_dropped += r.packet_in_dropped;
    into.packet_in_metered += r.packet_in_metered;
    into.injected.add(&r.injected);
    let (d, o) = (&mut into.datapath, &r.datapath);
    d.packets += o.packets;
    d.emc_hits += o.emc_hits;
    d.megaflow_hits += o.megaflow_hits;
    d.model_hits += o.model_hits;
    d.remainder_hits += o.remainder_hits;
    d.no_match += o.no_match;
    d.megaflow_subtable_lookups += o.megaflow_subtable_lookups;
    d.avg_subtable_lookups_per_megaflow_hit =
        if d.megaflow_hits == 0 { 0.0 } else { d.megaflow_subtable_lookups as f64 / d.megaflow_hits as f64 };
    d.miss_with_success_upcall += o.miss_with_success_upcall;
    d.flow_limit_hits += o.flow_limit_hits;
    d.masks_evicted += o.masks_evicted;
    d.megaflows_evicted += o.megaflows_evicted;
    d.mask_limit_refused += o.mask_limit_refused;
    d.mask_limit_narrowed += o.mask_limit_narrowed;
    d.mfcguard_masks += o.mfcguard_masks;
    d.mfcguard_removed += o.mfcguard_removed;
    d.model_swaps += o.model_swaps;
    d.lost += o.lost;
    d.megaflows += o.megaflows;
    d.masks += o.masks;
    // A coverage is one design instance's: over several, none is shown.
    d.coverage = None;
    into.busy_ns += r.busy_ns;
    into.uptime_s = into.uptime_s.max(r.uptime_s);
    into.avg_ns_per_packet = if into.total.rx == 0 { 0.0 } else { into.busy_ns as f64 / into.total.rx as f64 };
    into.table_matched += r.table_matched;
    if into.design != r.design {
        into.design = "mixed";
    }
    if into.auto.is_none() {
        into.auto = r.auto.clone();
    }
}

/// Each PMD thread's report over every bridge (`pmds[b]`: bridge b's reports, by PMD index).
pub fn merge_pmds(pmds: Vec<Vec<PmdReport>>) -> Vec<PmdReport> {
    let mut out: Vec<PmdReport> = Vec::new();
    for reports in pmds {
        for r in reports {
            match out.iter_mut().find(|o| o.pmd == r.pmd) {
                Some(o) => merge_pmd(o, &r),
                None => out.push(r),
            }
        }
    }
    out.sort_by_key(|r| r.pmd);
    out
}
