//! The bridges of one datapath (`rqvs switch --ovsdb`, issue 37): each bridge's switch by name,
//! for the unixctl socket's commands that name a bridge (`fdb/show BRIDGE`, `ofproto/trace
//! BRIDGE FLOW`) and those that show the one datapath over every bridge
//! (`dpif-netdev/pmd-stats-show`, `dpctl/dump-flows`: [`crate::unixctl::execute_bridges`]).
//! The bridges share the PMD threads ([`crate::shared`]): PMD *i*'s report of the datapath is
//! the sum of each bridge's loop on thread *i* ([`merge_pmd`]).
//!
//! **Datapath port numbers** ([`Bridges::datapath_ports`]): each bridge numbers its own ports
//! (OpenFlow numbers); the one datapath numbers every bridge's ports in one space, as OVS's
//! netdev datapath does (its `odp` port numbers, which `dpctl/dump-flows` prints): from 1, the
//! lowest free number to a port that appears (by bridge name, the bridge's own port first,
//! then by OpenFlow number), kept while it stays; 0 is the datapath's own (`ovs-netdev`).
//! Numbers are given when asked (the unixctl commands that print them), so a port that came
//! and went between two asks never had one.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::stats::PmdReport;
use crate::Control;

/// The running bridges by name, and the datapath's stop request (`ovs-appctl exit`).
#[derive(Default)]
pub struct Bridges {
    map: RwLock<BTreeMap<String, Arc<Control>>>,
    stop: AtomicBool,
    /// The shared PMD threads' CPUs (`-pmd CORE` arguments are checked against them).
    cpus: RwLock<Vec<Option<usize>>>,
    /// The datapath's port numbers by (bridge, interface name) (module docs).
    odp: Mutex<BTreeMap<(String, String), u32>>,
}

/// A port as the datapath numbers it ([`Bridges::datapath_ports`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DpPort {
    pub bridge: String,
    /// Its interface's name.
    pub name: String,
    /// Its OpenFlow number on its bridge.
    pub ofport: u32,
    /// Its datapath number.
    pub odp: u32,
    /// Its type as `dpctl/show` prints it (empty: a system interface).
    pub kind: &'static str,
}

impl Bridges {
    pub fn new(cpus: Vec<Option<usize>>) -> Bridges {
        Bridges { cpus: RwLock::new(cpus), ..Bridges::default() }
    }

    /// Bridge `name` is now served by `control` (a bridge started or restarted).
    pub fn set(&self, name: &str, control: Arc<Control>) {
        crate::crossing::link(name, &control);
        self.map.write().unwrap_or_else(|e| e.into_inner()).insert(name.to_string(), control);
    }

    /// Bridge `name` is gone.
    pub fn remove(&self, name: &str) {
        self.map.write().unwrap_or_else(|e| e.into_inner()).remove(name);
        crate::crossing::unlink(name);
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

    /// Every bridge's live ports with their datapath numbers (module docs), in datapath order.
    pub fn datapath_ports(&self) -> Vec<DpPort> {
        let mut now: Vec<(String, String, u32, &'static str)> = Vec::new();
        for (bridge, c) in self.all() {
            let mut ports = c.port_list();
            ports.sort_by_key(|(ofport, _, _)| (*ofport != crate::ofports::LOCAL, *ofport));
            now.extend(ports.into_iter().map(|(ofport, name, kind)| (bridge.clone(), name, ofport, kind)));
        }
        let mut odp = self.odp.lock().unwrap_or_else(|e| e.into_inner());
        odp.retain(|(b, n), _| now.iter().any(|(b2, n2, _, _)| b == b2 && n == n2));
        let mut out = Vec::with_capacity(now.len());
        for (bridge, name, ofport, kind) in now {
            let key = (bridge.clone(), name.clone());
            let n = match odp.get(&key) {
                Some(&n) => n,
                None => {
                    let n = (1..).find(|n| !odp.values().any(|v| v == n)).expect("a free number");
                    odp.insert(key, n);
                    n
                }
            };
            out.push(DpPort { bridge, name, ofport, odp: n, kind });
        }
        out.sort_by_key(|p| p.odp);
        out
    }
}

/// `dpctl/show`: the datapath's lookups and megaflows over `pmds` (every PMD's report), and its
/// ports (OVS's layout; port 0 is the datapath's own).
pub fn dpctl_show(ports: &[DpPort], pmds: &[PmdReport]) -> String {
    let d = |f: fn(&crate::stats::DatapathStats) -> u64| pmds.iter().map(|p| f(&p.datapath)).sum::<u64>();
    let hits = d(|s| s.emc_hits + s.megaflow_hits + s.model_hits + s.remainder_hits);
    let missed = d(|s| s.miss_with_success_upcall + s.no_match);
    let mut s = format!(
        "{}:\n  lookups: hit:{hits} missed:{missed} lost:{}\n  flows: {}\n  port 0: ovs-netdev (tap)\n",
        crate::unixctl::DATAPATH_NAME,
        d(|s| s.lost),
        d(|s| s.megaflows)
    );
    for p in ports {
        if p.kind.is_empty() {
            s += &format!("  port {}: {}\n", p.odp, p.name);
        } else {
            s += &format!("  port {}: {} ({})\n", p.odp, p.name, p.kind);
        }
    }
    s
}

/// A megaflow line of `dpctl/dump-flows` (`MATCH, packets:N, used:T, actions:A`) of a bridge
/// whose ports `label` names (its OpenFlow number → the datapath's number, or the port's name):
/// `in_port=` and every output port of the actions (within `clone(...)` too) relabelled; what
/// `label` does not know stays as it was.
pub fn relabel_flow(line: &str, label: &dyn Fn(u32) -> Option<String>) -> String {
    relabel_flow_across(line, label, &|_, _| None)
}

/// [`relabel_flow`] of a megaflow whose actions cross patch ports
/// ([`rqvs_ofproto::crossing`]): a crossing's ops (`patch(BRIDGE:PORT:OPS)`) are the peer
/// bridge's, relabelled by `peer(BRIDGE, ofport)`, and shown where the crossing is — its outputs
/// in place (as OVS's composed datapath actions show them), inside `clone(...)` when they
/// rewrite the frame (the ops after the crossing see it as it was).
pub fn relabel_flow_across(
    line: &str,
    label: &dyn Fn(u32) -> Option<String>,
    peer: &dyn Fn(&str, u32) -> Option<String>,
) -> String {
    let mut out = String::with_capacity(line.len());
    let (matches, actions) = match line.rfind(", actions:") {
        Some(at) => (&line[..at], Some(&line[at + ", actions:".len()..])),
        None => (line, None),
    };
    let mut parts: Vec<String> = Vec::new();
    for f in matches.split(',') {
        let relabelled = f.strip_prefix("in_port=").and_then(|p| {
            let n = if p == "LOCAL" { Some(crate::ofports::LOCAL) } else { p.parse().ok() };
            n.and_then(label).map(|l| format!("in_port={l}"))
        });
        parts.push(relabelled.unwrap_or_else(|| f.to_string()));
    }
    out.push_str(&parts.join(","));
    if let Some(a) = actions {
        out.push_str(", actions:");
        out.push_str(&relabel_actions(a, label, peer));
    }
    out
}

/// The actions of a megaflow line, relabelled ([`relabel_flow`]).
fn relabel_actions(
    actions: &str,
    label: &dyn Fn(u32) -> Option<String>,
    peer: &dyn Fn(&str, u32) -> Option<String>,
) -> String {
    // Top-level commas only (`set(...)` and `clone(...)` hold their own).
    let mut tokens: Vec<&str> = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in actions.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                tokens.push(&actions[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    tokens.push(&actions[start..]);
    tokens
        .into_iter()
        .map(|t| {
            // `clone(...)`, and a flood's or NORMAL's crossings (`flood(...)`, `all(...)`,
            // `NORMAL(...)`: the op and its patch ports' crossings, each shown as an explicit
            // crossing is).
            let wrapped = ["clone", "flood", "all", "NORMAL"].into_iter().find_map(|w| {
                t.strip_prefix(w).and_then(|r| r.strip_prefix('(')).and_then(|r| r.strip_suffix(')')).map(|r| (w, r))
            });
            if let Some((w, inner)) = wrapped {
                format!("{w}({})", relabel_actions(inner, label, peer))
            } else if let Some((bridge, ops)) = t
                .strip_prefix("patch(")
                .and_then(|r| r.strip_suffix(')'))
                .and_then(|r| r.split_once(':'))
                .and_then(|(b, r)| Some((b, r.split_once(':')?.1)))
            {
                let inner = relabel_actions(ops, &|p| peer(bridge, p), peer);
                let outputs_only =
                    ops.split(',').all(|o| o.parse::<u32>().is_ok() || o.starts_with("patch(") || o == "drop");
                if outputs_only {
                    inner
                } else {
                    format!("clone({inner})")
                }
            } else {
                t.parse::<u32>().ok().and_then(label).unwrap_or_else(|| t.to_string())
            }
        })
        .collect::<Vec<_>>()
        .join(",")
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

#[cfg(test)]
mod tests {
    use super::{relabel_flow, relabel_flow_across};

    #[test]
    fn a_flood_shows_its_crossings() {
        let label = |p: u32| (p < 10).then(|| (p + 1).to_string());
        let peer = |b: &str, p: u32| (b == "br1").then(|| (p + 4).to_string());
        let line = "in_port=1, actions:flood(patch(br1:2:1),patch(br1:3:mod_nw_tos:32,1))";
        assert_eq!(relabel_flow_across(line, &label, &peer), "in_port=2, actions:flood(5,clone(mod_nw_tos:32,5))");
        let line = "in_port=1, actions:NORMAL(patch(br1:2:NORMAL),patch(br1:3:drop))";
        assert_eq!(relabel_flow_across(line, &label, &peer), "in_port=2, actions:NORMAL(clone(NORMAL),drop)");
    }

    #[test]
    fn a_crossing_shows_the_peer_bridges_outputs() {
        let label = |p: u32| (p < 10).then(|| (p + 1).to_string());
        let peer = |b: &str, p: u32| (b == "br1").then(|| (p + 4).to_string());
        let line = "recirc_id=0,eth,in_port=1, packets:3, used:0.1s, actions:3,patch(br1:2:1,3)";
        assert_eq!(
            relabel_flow_across(line, &label, &peer),
            "recirc_id=0,eth,in_port=2, packets:3, used:0.1s, actions:4,5,7"
        );
        let line = "recirc_id=0,eth,in_port=1, packets:3, used:0.1s, actions:patch(br1:2:pop_vlan,1),3";
        assert_eq!(
            relabel_flow_across(line, &label, &peer),
            "recirc_id=0,eth,in_port=2, packets:3, used:0.1s, actions:clone(pop_vlan,5),4"
        );
    }

    #[test]
    fn megaflow_lines_are_relabelled() {
        let label = |p: u32| match p {
            1 => Some("4".to_string()),
            2 => Some("5".to_string()),
            crate::ofports::LOCAL => Some("3".to_string()),
            _ => None,
        };
        let line = "recirc_id=0,eth,ip,in_port=1,nw_frag=no, packets:3, used:0.1s, actions:set(eth(src=00:00:00:00:00:01)),2,clone(pop_vlan,65534),9";
        assert_eq!(
            relabel_flow(line, &label),
            "recirc_id=0,eth,ip,in_port=4,nw_frag=no, packets:3, used:0.1s, actions:set(eth(src=00:00:00:00:00:01)),5,clone(pop_vlan,3),9"
        );
        let local = "recirc_id=0,eth,in_port=LOCAL, packets:0, used:never, actions:drop";
        assert_eq!(relabel_flow(local, &label), "recirc_id=0,eth,in_port=3, packets:0, used:never, actions:drop");
        let names = |p: u32| (p == 1).then(|| "p1".to_string());
        assert_eq!(
            relabel_flow("recirc_id=0,eth,in_port=2, packets:1, used:0.0s, actions:1,NORMAL", &names),
            "recirc_id=0,eth,in_port=2, packets:1, used:0.0s, actions:p1,NORMAL"
        );
    }
}
