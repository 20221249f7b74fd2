//! The switch's counters: per PMD thread and input port, what became of every frame taken from
//! a receive queue, and the reports `pmd-stats-show` and `show` print.
//!
//! **Accounting.** Every frame a PMD takes from port *p* ends as exactly one of: `forwarded`
//! (at least one copy staged for transmission), `to_controller` (no copy on a port, but a
//! packet-in queued for the OpenFlow channel), `dropped` (no copy: the rule drops it, no rule
//! matched, every output was skipped, `dec_ttl` expired it before any output, or its
//! `controller` action had no OpenFlow channel to go to, or the port's ingress policer dropped
//! it before it was parsed: `policed`, a part of `dropped`; the port is `NO_RECV` (PORT_MOD):
//! `no_receive`, a part of `dropped`; every copy went to `NO_FWD` ports: `no_forward`, a part
//! of `dropped`; it came over a patch hop past the patch crossings' bound, a patch loop:
//! dropped before it was parsed, counted process-wide in `coverage/show`'s
//! `patch_loop_dropped`, see `crate::crossing`), `malformed` (shorter than an Ethernet
//! header: dropped, as OVS drops it; every longer frame is classified, a damaged header's fields
//! zero, see `rqvs_flow::frame::extract_datapath`) or `lost` (a queue was full: the upcall
//! queue, or the packet-in queue when the controller was its only destination). So per port
//! and in total `rx = forwarded + to_controller + dropped + malformed + lost`.
//!
//! **Injected frames** (PACKET_OUT) come from the controller, not from a port's receive queue:
//! they are counted apart, in `injected` (its `rx` is the packet-outs executed; each ends as
//! `forwarded`, `to_controller` or `dropped` the same way), so a port's `rx` stays equal to the
//! frames its receive queues delivered. Their copies are outputs like any other.
//!
//! Copies are counted once more on the transmit side by the ports: `outputs = tx_packets +
//! tx_dropped` over all ports. What the kernel dropped before the switch saw it is the ports'
//! `rx_lost`.

use rqvs_datapath::{Counters, DesignReport};
use serde::Serialize;

/// A PMD thread's own counters (module docs); vectors are indexed by input port − 1.
#[derive(Clone, Debug, Default)]
pub struct PmdCounters {
    pub rx: Vec<u64>,
    pub forwarded: Vec<u64>,
    pub to_controller: Vec<u64>,
    pub dropped: Vec<u64>,
    pub malformed: Vec<u64>,
    pub lost: Vec<u64>,
    /// Of `forwarded` and `dropped`: packets whose action list stopped at an expired TTL.
    pub ttl_expired: Vec<u64>,
    /// Of `dropped`: frames the port's ingress policer dropped before they were parsed.
    pub policed: Vec<u64>,
    /// Of `dropped`: frames a meter's band dropped ([`rqvs_ofproto::meters`]).
    pub metered: Vec<u64>,
    /// Of `dropped`: frames received on a `NO_RECV` port ([`crate::portflags`]).
    pub no_receive: Vec<u64>,
    /// Of `dropped`: frames whose every copy went to a `NO_FWD` port.
    pub no_forward: Vec<u64>,
    /// Copies staged for transmission.
    pub outputs: u64,
    /// Outputs skipped (to the input port, to a port that does not exist).
    pub skipped_outputs: u64,
    /// Outputs skipped because their port is `NO_FWD`.
    pub no_forward_outputs: u64,
    /// `controller` actions met.
    pub controller: u64,
    /// Packet-ins queued for the OpenFlow channel.
    pub packet_ins: u64,
    /// Packet-ins dropped: the queue was full.
    pub packet_in_dropped: u64,
    /// Packet-ins the controller meter dropped.
    pub packet_in_metered: u64,
    /// Frames injected by PACKET_OUT (module docs).
    pub injected: PortFrames,
    /// Time spent on batches that had frames.
    pub busy_ns: u64,
    /// Loop iterations (every port polled once).
    pub iterations: u64,
}

fn sub(a: &[u64], b: &[u64]) -> Vec<u64> {
    a.iter().enumerate().map(|(i, x)| x - b.get(i).copied().unwrap_or(0)).collect()
}

impl PmdCounters {
    pub fn new(ports: usize) -> PmdCounters {
        let z = vec![0; ports];
        PmdCounters {
            rx: z.clone(),
            forwarded: z.clone(),
            to_controller: z.clone(),
            dropped: z.clone(),
            malformed: z.clone(),
            lost: z.clone(),
            ttl_expired: z.clone(),
            policed: z.clone(),
            metered: z.clone(),
            no_receive: z.clone(),
            no_forward: z,
            ..PmdCounters::default()
        }
    }

    /// Counters for a port attached live (index `ports - 1`): the vectors grown in place, every
    /// other port's counts kept.
    pub fn grow(&mut self, ports: usize) {
        for v in [
            &mut self.rx,
            &mut self.forwarded,
            &mut self.to_controller,
            &mut self.dropped,
            &mut self.malformed,
            &mut self.lost,
            &mut self.ttl_expired,
            &mut self.policed,
            &mut self.metered,
            &mut self.no_receive,
            &mut self.no_forward,
        ] {
            if v.len() < ports {
                v.resize(ports, 0);
            }
        }
    }

    /// These counters since `base` (a copy taken at `pmd-stats-clear`).
    pub fn minus(&self, base: &PmdCounters) -> PmdCounters {
        PmdCounters {
            rx: sub(&self.rx, &base.rx),
            forwarded: sub(&self.forwarded, &base.forwarded),
            to_controller: sub(&self.to_controller, &base.to_controller),
            dropped: sub(&self.dropped, &base.dropped),
            malformed: sub(&self.malformed, &base.malformed),
            lost: sub(&self.lost, &base.lost),
            ttl_expired: sub(&self.ttl_expired, &base.ttl_expired),
            policed: sub(&self.policed, &base.policed),
            metered: sub(&self.metered, &base.metered),
            no_receive: sub(&self.no_receive, &base.no_receive),
            no_forward: sub(&self.no_forward, &base.no_forward),
            outputs: self.outputs - base.outputs,
            skipped_outputs: self.skipped_outputs - base.skipped_outputs,
            no_forward_outputs: self.no_forward_outputs - base.no_forward_outputs,
            controller: self.controller - base.controller,
            packet_ins: self.packet_ins - base.packet_ins,
            packet_in_dropped: self.packet_in_dropped - base.packet_in_dropped,
            packet_in_metered: self.packet_in_metered - base.packet_in_metered,
            injected: self.injected.minus(&base.injected),
            busy_ns: self.busy_ns - base.busy_ns,
            iterations: self.iterations - base.iterations,
        }
    }

    /// Counts the PORT_MOD reasons of one frame from port index `p` that ended `dropped` or
    /// otherwise (`o`: the executor's outcome): `no_receive`, `no_forward` (module docs).
    pub(crate) fn port_mod_reasons(&mut self, p: usize, o: &crate::execute::Outcome) {
        self.no_forward_outputs += u64::from(o.no_forward);
        if o.no_receive {
            self.no_receive[p] += 1;
        } else if o.no_forward > 0 && o.outputs == 0 && o.packet_ins == 0 && o.packet_in_dropped == 0 {
            self.no_forward[p] += 1;
        }
    }
}

/// One input port's frames at one PMD (module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PortFrames {
    pub rx: u64,
    pub forwarded: u64,
    pub to_controller: u64,
    pub dropped: u64,
    pub malformed: u64,
    pub lost: u64,
    pub ttl_expired: u64,
    /// Of `dropped`: dropped by the port's ingress policer (`--ingress-policing`).
    pub policed: u64,
    /// Of `dropped`: dropped by a meter's band.
    pub metered: u64,
    /// Of `dropped`: received while the port was `NO_RECV` (PORT_MOD).
    pub no_receive: u64,
    /// Of `dropped`: every copy went to `NO_FWD` ports (PORT_MOD).
    pub no_forward: u64,
}

impl PortFrames {
    pub fn add(&mut self, o: &PortFrames) {
        self.rx += o.rx;
        self.forwarded += o.forwarded;
        self.to_controller += o.to_controller;
        self.dropped += o.dropped;
        self.malformed += o.malformed;
        self.lost += o.lost;
        self.ttl_expired += o.ttl_expired;
        self.policed += o.policed;
        self.metered += o.metered;
        self.no_receive += o.no_receive;
        self.no_forward += o.no_forward;
    }

    /// These counts since `base`.
    pub fn minus(&self, base: &PortFrames) -> PortFrames {
        PortFrames {
            rx: self.rx - base.rx,
            forwarded: self.forwarded - base.forwarded,
            to_controller: self.to_controller - base.to_controller,
            dropped: self.dropped - base.dropped,
            malformed: self.malformed - base.malformed,
            lost: self.lost - base.lost,
            ttl_expired: self.ttl_expired - base.ttl_expired,
            policed: self.policed - base.policed,
            metered: self.metered - base.metered,
            no_receive: self.no_receive - base.no_receive,
            no_forward: self.no_forward - base.no_forward,
        }
    }

    /// The reasons of `dropped` that are not 0 besides `ttl_expired`, as ` (policed N,
    /// metered N, no_receive N, no_forward N)` (empty when all are 0).
    pub fn drop_detail(&self) -> String {
        let parts: Vec<String> = [
            ("policed", self.policed),
            ("metered", self.metered),
            ("no_receive", self.no_receive),
            ("no_forward", self.no_forward),
        ]
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
        if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join(", "))
        }
    }

    /// `rx = forwarded + to_controller + dropped + malformed + lost`.
    pub fn balanced(&self) -> bool {
        self.rx == self.forwarded + self.to_controller + self.dropped + self.malformed + self.lost
    }
}

/// The datapath's view of the packets (OVS's `pmd-stats-show` lines).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct DatapathStats {
    pub packets: u64,
    pub emc_hits: u64,
    pub megaflow_hits: u64,
    /// Model hits (CCACHE: megaflows found by the model; CFLOWS: rules found by the model).
    pub model_hits: u64,
    /// CFLOWS: rules found in the TupleMerge remainder.
    pub remainder_hits: u64,
    /// CFLOWS: packets no rule matched.
    pub no_match: u64,
    pub avg_subtable_lookups_per_megaflow_hit: f64,
    /// Subtables searched for the megaflow hits (the average's numerator).
    pub megaflow_subtable_lookups: u64,
    pub miss_with_success_upcall: u64,
    /// Megaflows not installed or evicted at the flow limit (refused installs, predicted ones
    /// included, plus deletions over the limit).
    pub flow_limit_hits: u64,
    /// Defences against Tuple Space Explosion (ORIG, CCACHE; `rqvs_datapath::Counters`):
    /// subtables evicted at the mask limit and their megaflows, installs refused or narrowed at it, and
    /// drop-only subtables MFCGuard deleted and their megaflows.
    pub masks_evicted: u64,
    pub megaflows_evicted: u64,
    pub mask_limit_refused: u64,
    pub mask_limit_narrowed: u64,
    pub mfcguard_masks: u64,
    pub mfcguard_removed: u64,
    /// Models trained and swapped in (CCACHE, CFLOWS).
    pub model_swaps: u64,
    pub lost: u64,
    pub megaflows: u64,
    pub masks: u64,
    /// Share of rules (CFLOWS) or megaflows (CCACHE) the model's iSets hold.
    pub coverage: Option<f64>,
}

/// One PMD thread's report (`pmd-stats-show`, the final counters).
#[derive(Clone, Debug, Serialize)]
pub struct PmdReport {
    pub pmd: usize,
    pub cpu: Option<usize>,
    pub design: &'static str,
    pub ports: Vec<PortFrames>,
    pub total: PortFrames,
    pub outputs: u64,
    pub skipped_outputs: u64,
    /// Outputs skipped because their port is `NO_FWD` (PORT_MOD).
    pub no_forward_outputs: u64,
    pub controller: u64,
    pub packet_ins: u64,
    pub packet_in_dropped: u64,
    /// Packet-ins the controller meter dropped.
    pub packet_in_metered: u64,
    /// Frames injected by PACKET_OUT, and what became of them (module docs).
    pub injected: PortFrames,
    pub datapath: DatapathStats,
    pub busy_ns: u64,
    pub uptime_s: f64,
    pub avg_ns_per_packet: f64,
    /// `--design auto`: the controller's switches (`design` is the current design).
    pub auto: Option<AutoStats>,
    /// Per port, this PMD's queue counters at the last `pmd-stats-clear` (zero in counters
    /// since start): `Control::show_with` subtracts them from the ports' counters.
    #[serde(skip)]
    pub port_base: Vec<rqvs_ports::QueueStats>,
    /// Packets some flow decided, since the PMD started (OpenFlow TABLE stats'
    /// `matched_count`; `datapath.packets` since the start is the `lookup_count`).
    pub table_matched: u64,
    /// The pipeline's counters past table 0's lookup, since the PMD started (TABLE stats of
    /// the other tables, GROUP stats: [`crate::flowstats::PipelineCounts`]).
    #[serde(skip)]
    pub pipeline: crate::flowstats::PipelineCounts,
}

/// A PMD's `--design auto` controller (`rqvs_datapath::AutoReport`), since the PMD started
/// (`pmd-stats-clear` does not reset it).
#[derive(Clone, Debug, Serialize)]
pub struct AutoStats {
    pub design_switches: u64,
    /// Seconds of PMD time in ORIG, CCACHE, CFLOWS.
    pub time_orig_s: f64,
    pub time_ccache_s: f64,
    pub time_cflows_s: f64,
    /// Candidates dropped (their build failed, or a rule change refused).
    pub candidates_abandoned: u64,
    /// The last switch: `from -> to: reason`.
    pub last_switch: Option<String>,
    /// The thresholds in force that are not the defaults, `key=value,...` (`--auto`), or
    /// `defaults`.
    pub settings: String,
}

impl AutoStats {
    pub fn new(a: &rqvs_datapath::AutoReport) -> AutoStats {
        let s = |i: usize| a.time_ns[i] as f64 / 1e9;
        AutoStats {
            design_switches: a.design_switches,
            time_orig_s: s(0),
            time_ccache_s: s(1),
            time_cflows_s: s(2),
            candidates_abandoned: a.abandoned,
            last_switch: a.log.last().map(|e| format!("{} -> {}: {}", e.from_name(), e.to_name(), e.reason)),
            settings: a.settings_line(),
        }
    }

    /// `(design, seconds)` for each design.
    pub fn times(&self) -> [(&'static str, f64); 3] {
        [("orig", self.time_orig_s), ("ccache", self.time_ccache_s), ("cflows", self.time_cflows_s)]
    }
}

impl PmdReport {
    pub(crate) fn new(
        pmd: usize,
        cpu: Option<usize>,
        c: PmdCounters,
        d: Counters,
        dbase: Counters,
        design: DesignReport,
        uptime: std::time::Duration,
    ) -> PmdReport {
        let ports: Vec<PortFrames> = (0..c.rx.len())
            .map(|i| PortFrames {
                rx: c.rx[i],
                forwarded: c.forwarded[i],
                to_controller: c.to_controller[i],
                dropped: c.dropped[i],
                malformed: c.malformed[i],
                lost: c.lost[i],
                ttl_expired: c.ttl_expired[i],
                policed: c.policed[i],
                metered: c.metered[i],
                no_receive: c.no_receive[i],
                no_forward: c.no_forward[i],
            })
            .collect();
        let mut total = PortFrames::default();
        ports.iter().for_each(|p| total.add(p));
        let mf_hits = d.megaflow_hit + d.cd_hit - dbase.megaflow_hit - dbase.cd_hit;
        let datapath = DatapathStats {
            packets: d.received - dbase.received,
            emc_hits: d.emc_hit - dbase.emc_hit,
            megaflow_hits: mf_hits,
            model_hits: d.model_hit - dbase.model_hit,
            remainder_hits: d.remainder_hit - dbase.remainder_hit,
            no_match: d.no_match - dbase.no_match,
            avg_subtable_lookups_per_megaflow_hit: if mf_hits == 0 {
                0.0
            } else {
                (d.megaflow_subtables - dbase.megaflow_subtables) as f64 / mf_hits as f64
            },
            megaflow_subtable_lookups: d.megaflow_subtables - dbase.megaflow_subtables,
            miss_with_success_upcall: d.upcall - dbase.upcall,
            // Refusals at the mask limit are counted among the refused installs: not the flow limit's.
            flow_limit_hits: (d.install_refused + d.preinstall_refused + d.deleted_limit - d.install_mask_refused)
                - (dbase.install_refused + dbase.preinstall_refused + dbase.deleted_limit - dbase.install_mask_refused),
            masks_evicted: d.masks_evicted - dbase.masks_evicted,
            megaflows_evicted: d.megaflows_evicted - dbase.megaflows_evicted,
            mask_limit_refused: d.install_mask_refused - dbase.install_mask_refused,
            mask_limit_narrowed: d.install_mask_narrowed - dbase.install_mask_narrowed,
            mfcguard_masks: d.mfcguard_masks - dbase.mfcguard_masks,
            mfcguard_removed: d.mfcguard_removed - dbase.mfcguard_removed,
            model_swaps: d.model_swaps - dbase.model_swaps,
            lost: d.lost - dbase.lost,
            megaflows: d.megaflows,
            masks: d.masks,
            coverage: design.coverage(),
        };
        let avg = if total.rx == 0 { 0.0 } else { c.busy_ns as f64 / total.rx as f64 };
        PmdReport {
            pmd,
            cpu,
            design: design_name(&design),
            ports,
            total,
            outputs: c.outputs,
            skipped_outputs: c.skipped_outputs,
            no_forward_outputs: c.no_forward_outputs,
            controller: c.controller,
            packet_ins: c.packet_ins,
            packet_in_dropped: c.packet_in_dropped,
            packet_in_metered: c.packet_in_metered,
            injected: c.injected,
            datapath,
            busy_ns: c.busy_ns,
            uptime_s: uptime.as_secs_f64(),
            avg_ns_per_packet: avg,
            auto: None,
            port_base: Vec::new(),
            table_matched: 0,
            pipeline: Default::default(),
        }
    }

    /// OVS's `dpif-netdev/pmd-stats-show` layout, with the learned designs' lines added.
    pub fn format(&self, out: &mut String) {
        use std::fmt::Write as _;
        let d = &self.datapath;
        let core = self.cpu.map_or("unpinned".to_string(), |c| c.to_string());
        let design = match &self.auto {
            Some(_) => format!("auto: {}", self.design),
            None => self.design.to_string(),
        };
        let _ = writeln!(out, "pmd thread {} core_id {core} ({design}):", self.pmd);
        if let Some(a) = &self.auto {
            let _ = writeln!(
                out,
                "  design switches: {} (time in orig {:.3} s, ccache {:.3} s, cflows {:.3} s; candidates abandoned: {})",
                a.design_switches, a.time_orig_s, a.time_ccache_s, a.time_cflows_s, a.candidates_abandoned
            );
            if let Some(l) = &a.last_switch {
                let _ = writeln!(out, "  last design switch: {l}");
            }
            let _ = writeln!(out, "  auto settings: {}", a.settings);
        }
        let _ = writeln!(out, "  packets received: {}", self.total.rx);
        let _ = writeln!(out, "  emc hits: {}", d.emc_hits);
        let _ = writeln!(out, "  megaflow hits: {}", d.megaflow_hits);
        if self.design != "orig" {
            let _ = writeln!(out, "  model hits: {}", d.model_hits);
        }
        if self.design == "cflows" {
            let _ = writeln!(out, "  remainder hits: {}", d.remainder_hits);
            let _ = writeln!(out, "  no match: {}", d.no_match);
        }
        let _ =
            writeln!(out, "  avg. subtable lookups per megaflow hit: {:.2}", d.avg_subtable_lookups_per_megaflow_hit);
        let _ = writeln!(out, "  miss with success upcall: {}", d.miss_with_success_upcall);
        let _ = writeln!(out, "  miss with failed upcall: 0");
        // Every packet the design lost (its queue full) or the handler's queue refused is a
        // frame lost on its port: the port count is the one count.
        let _ = writeln!(out, "  lost: {}", self.total.lost);
        if let Some(c) = d.coverage {
            let _ = writeln!(out, "  coverage: {:.1}%", c * 100.0);
        }
        // The defences' lines, once one has acted (OVS's layout otherwise).
        if d.masks_evicted + d.mask_limit_refused + d.mask_limit_narrowed + d.mfcguard_masks > 0 {
            let _ = writeln!(
                out,
                "  mask limit: {} masks evicted ({} megaflows), {} installs refused, {} narrowed",
                d.masks_evicted, d.megaflows_evicted, d.mask_limit_refused, d.mask_limit_narrowed
            );
            let _ = writeln!(out, "  mfcguard: {} masks removed ({} megaflows)", d.mfcguard_masks, d.mfcguard_removed);
        }
        let _ = writeln!(out, "  malformed frames: {}", self.total.malformed);
        let _ = write!(
            out,
            "  dropped: {} (ttl expired: {}, policed: {}, metered: {}",
            self.total.dropped, self.total.ttl_expired, self.total.policed, self.total.metered
        );
        // PORT_MOD's reasons only once a port has had them (the layout stays otherwise).
        let _ = if self.total.no_receive + self.total.no_forward + self.no_forward_outputs > 0 {
            writeln!(
                out,
                ", no_receive: {}, no_forward: {}; outputs to no_forward ports skipped: {})",
                self.total.no_receive, self.total.no_forward, self.no_forward_outputs
            )
        } else {
            writeln!(out, ")")
        };
        let _ = writeln!(
            out,
            "  to controller: {} (packet-ins sent: {}, dropped: {}, metered: {}; frames sent only there: {})",
            self.controller, self.packet_ins, self.packet_in_dropped, self.packet_in_metered, self.total.to_controller
        );
        if self.injected.rx > 0 {
            let i = &self.injected;
            let _ = writeln!(
                out,
                "  injected (packet-out): {} (forwarded {}, to controller {}, dropped {})",
                i.rx, i.forwarded, i.to_controller, i.dropped
            );
        }
        let _ = writeln!(out, "  processing time: {:.3} s of {:.3} s", self.busy_ns as f64 / 1e9, self.uptime_s);
        let _ = writeln!(out, "  avg processing ns per packet: {:.1}", self.avg_ns_per_packet);
        if let Some(mhz) = cpu_mhz() {
            let _ = writeln!(
                out,
                "  avg processing cycles per packet: {:.1} (at {mhz:.0} MHz)",
                self.avg_ns_per_packet * mhz / 1e3
            );
        }
    }
}

fn design_name(r: &DesignReport) -> &'static str {
    match r {
        DesignReport::Orig(_) => "orig",
        DesignReport::Ccache(..) => "ccache",
        DesignReport::Cflows(_) => "cflows",
    }
}

/// The CPU's clock from /proc/cpuinfo (cycles are derived from time: no cycle counter is read).
fn cpu_mhz() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines().find(|l| l.starts_with("cpu MHz"))?.split(':').nth(1)?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port attached live grows every per-port vector: the report reads each one at every
    /// port's index (a vector left out of `grow` panics here).
    #[test]
    fn grown_counters_report_every_port() {
        let mut c = PmdCounters::new(1);
        c.grow(3);
        c.rx[2] = 5;
        let d = Counters::default();
        let r = PmdReport::new(
            0,
            None,
            c,
            d,
            d,
            DesignReport::Cflows(rqvs_datapath::design::CflowsReport {
                coverage: 0.0,
                isets: 0,
                remainder_rules: 0,
                staged_rules: 0,
                training_sessions: 0,
                last_training_ms: None,
                later_learned_tables: 0,
                later_learned_rules: 0,
            }),
            std::time::Duration::ZERO,
        );
        assert_eq!(r.ports.len(), 3);
        assert_eq!(r.ports[2].rx, 5);
    }
}
