//! The metrics endpoint (`rqvs switch --metrics 127.0.0.1:PORT`): the switch's counters in the
//! Prometheus text format (0.0.4) or OpenMetrics 1.0 (when the scraper's `Accept` asks for
//! `application/openmetrics-text`), served over HTTP/1.x at `GET /metrics` (and `/`).
//!
//! What is there — what OVS operators ask their exporters for, named after `pmd-stats-show`:
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `rqvs_info` | gauge (1) | `design`, `version` |
//! | `rqvs_uptime_seconds`, `rqvs_openflow_rules` | gauge | |
//! | `rqvs_action_lists`, `rqvs_action_lists_limit`, `rqvs_action_table_bytes` (the datapath's interned action lists: those a flow or megaflow uses, and unused ones for about a second; `--max-action-lists` bounds them) | gauge | |
//! | `rqvs_action_lists_refused_total` (new lists refused, the table full: flow-mods answered `OFPFMFC_TABLE_FULL`), `rqvs_action_lists_freed_total`, `rqvs_action_lists_stale_total` (reads of a freed list: 0) | counter | |
//! | `rqvs_pmd_design` | gauge (1) | `pmd`, `design` |
//! | `rqvs_pmd_packets_total`, `_emc_hits_total`, `_megaflow_hits_total`, `_model_hits_total`, `_remainder_hits_total`, `_no_match_total`, `_upcalls_total`, `_lost_total`, `_flow_limit_hits_total`, `_masks_evicted_total`, `_megaflows_evicted_total`,  `_mask_limit_refused_total`, `_mask_limit_narrowed_total`, `_mfcguard_masks_total`, `_mfcguard_removed_total` (the defences against Tuple Space Explosion), `_megaflow_subtable_lookups_total`, `_model_swaps_total`, `_busy_seconds_total` | counter | `pmd` |
//! | `rqvs_pmd_megaflows`, `rqvs_pmd_masks`, `rqvs_pmd_subtables_per_megaflow_hit`, `rqvs_pmd_model_coverage` (CCACHE, CFLOWS) | gauge | `pmd` |
//! | `rqvs_pmd_design_switches_total` (`--design auto`) | counter | `pmd` |
//! | `rqvs_pmd_design_seconds_total` (`--design auto`) | counter | `pmd`, `design` |
//! | `rqvs_pmd_frames_total` | counter | `pmd`, `port`, `fate` (`rx`, `forwarded`, `to_controller`, `dropped`, `malformed`, `lost`) |
//! | `rqvs_pmd_frames_policed_total` (of `dropped`: the port's ingress policer's) | counter | `pmd`, `port` |
//! | `rqvs_pmd_frames_no_receive_total`, `rqvs_pmd_frames_no_forward_total` (of `dropped`: PORT_MOD's `no-receive` on the port; every copy to `no-forward` ports) | counter | `pmd`, `port` |
//! | `rqvs_port_rx_packets_total`, `_rx_lost_total`, `_rx_errors_total`, `_tx_packets_total`, `_tx_dropped_total`, `_tx_errors_total` | counter | `port`, `name` |
//! | `rqvs_port_up` | gauge | `port`, `name` |
//! | `rqvs_handler_upcalls_total`, `rqvs_handler_busy_seconds_total` | counter | (with a handler thread) |
//! | `rqvs_openflow_connections` | gauge | (with an OpenFlow channel) |
//! | `rqvs_openflow_packet_ins_total` | counter | `result` (`sent`, `dropped`, `unsent`) |
//! | `rqvs_openflow_packet_outs_total` | counter | `result` (`executed`, `refused`) |
//!
//! Counters count from the start of each PMD (`pmd-stats-clear` does not reset them, so a
//! scraper's rates stay right). `rqvs_pmd_subtables_per_megaflow_hit` is the average since the
//! start; a rate is `rate(…subtable_lookups_total) / rate(…megaflow_hits_total)`.
//!
//! The server answers each connection on a thread of its own, [`MAX_CLIENTS`] at once (one more
//! is answered `503 Service Unavailable` and closed at once); each connection has 5 s in all to
//! send its request head (at most 8 KiB) and 5 s for each write of the answer: a scraper that
//! stalls, trickles bytes or sends garbage holds only its own thread, gets an error status (or
//! nothing) and is forgotten, and the next scrape is answered at once; nothing a client sends can
//! stop the switch.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use crate::openflow::ChannelStats;
use crate::{Control, Error};

/// Where the OpenFlow channel's counters come from, when there is a channel.
pub type ChannelSource = Arc<dyn Fn() -> ChannelStats + Send + Sync>;

const IO_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_HEAD: usize = 8 << 10;
/// Connections served at once.
pub const MAX_CLIENTS: usize = 16;

/// The bound endpoint.
pub struct MetricsListener {
    listener: TcpListener,
}

impl MetricsListener {
    /// Binds `addr` (`127.0.0.1:9100`; port 0 picks one: [`MetricsListener::local_addr`]).
    pub fn bind(addr: &str) -> Result<MetricsListener, Error> {
        let a: SocketAddr = addr
            .parse()
            .map_err(|_| Error(format!("--metrics {addr}: expected an address and port, e.g. 127.0.0.1:9100")))?;
        let listener = TcpListener::bind(a).map_err(|e| Error(format!("--metrics {addr}: {e}")))?;
        listener.set_nonblocking(true).map_err(|e| Error(format!("--metrics {addr}: {e}")))?;
        Ok(MetricsListener { listener })
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves scrapes until the switch is asked to stop (polling every 20 ms), each connection
    /// on its own thread ([`MAX_CLIENTS`] at once). At the stop, waits up to a second for the
    /// connections being answered (a stalled one ends by its own timeout).
    pub fn serve(&self, control: &Arc<Control>, channel: Option<ChannelSource>) {
        let mut clients: Vec<std::thread::JoinHandle<()>> = Vec::new();
        let mut refused_logged = false;
        while !control.stop_requested() {
            match self.listener.accept() {
                Ok((mut stream, peer)) => {
                    clients.retain(|t| !t.is_finished());
                    if clients.len() >= MAX_CLIENTS {
                        if !refused_logged {
                            crate::log_warn!("rqvs switch: metrics {peer}: {MAX_CLIENTS} scrapes in progress: answered 503 (logged once)");
                            refused_logged = true;
                        }
                        let _ = stream.set_nonblocking(true);
                        let _ = stream.write_all(
                            b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        );
                        continue;
                    }
                    let (c, ch) = (control.clone(), channel.clone());
                    let spawned = std::thread::Builder::new()
                        .name("metrics-client".into())
                        .spawn(move || serve_one(stream, &c, ch.as_ref()));
                    match spawned {
                        Ok(t) => clients.push(t),
                        Err(e) => crate::log_warn!("rqvs switch: metrics {peer}: no thread for it: {e}"),
                    }
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        let until = std::time::Instant::now() + Duration::from_secs(1);
        while clients.iter().any(|t| !t.is_finished()) && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        for t in clients.into_iter().filter(|t| t.is_finished()) {
            let _ = t.join();
        }
    }
}

fn serve_one(mut stream: TcpStream, control: &Arc<Control>, channel: Option<&ChannelSource>) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(IO_TIMEOUT));
    let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
    let Some(head) = read_head(&mut stream) else { return };
    let (status, content_type, body) = respond(&head, || (control.as_ref(), channel));
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(reply.as_bytes());
}

/// The request head (up to the blank line), or `None` when the client hung up, took more than
/// [`IO_TIMEOUT`] in all, or sent more than [`MAX_HEAD`] bytes without one.
fn read_head(stream: &mut TcpStream) -> Option<String> {
    let deadline = std::time::Instant::now() + IO_TIMEOUT;
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && !buf.windows(2).any(|w| w == b"\n\n") {
        // A trickle of bytes does not extend the time: the head's deadline is for all of it.
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return None;
        }
        let _ = stream.set_read_timeout(Some(left));
        if buf.len() > MAX_HEAD {
            let _ = stream.write_all(b"HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n");
            // Closing with unread bytes would reset the connection before the client reads the
            // status: take (a bounded amount of) the rest first.
            let _ = stream.shutdown(std::net::Shutdown::Write);
            let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
            let _ = std::io::copy(&mut (&*stream).take(1 << 20), &mut std::io::sink());
            return None;
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// The status line, content type and body for a request head.
fn respond<'a>(
    head: &str,
    source: impl FnOnce() -> (&'a Control, Option<&'a ChannelSource>),
) -> (&'static str, &'static str, String) {
    let text = "text/plain; charset=utf-8";
    let mut request = head.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (request.next().unwrap_or(""), request.next().unwrap_or(""));
    if !request.next().is_some_and(|v| v.starts_with("HTTP/1.")) {
        return ("400 Bad Request", text, "expected an HTTP/1.x request line\n".into());
    }
    if method != "GET" && method != "HEAD" {
        return ("405 Method Not Allowed", text, "only GET /metrics\n".into());
    }
    if !matches!(path.split('?').next(), Some("/metrics" | "/")) {
        return ("404 Not Found", text, "the metrics are at /metrics\n".into());
    }
    let openmetrics = head.lines().any(|l| {
        l.split_once(':')
            .is_some_and(|(k, v)| k.trim().eq_ignore_ascii_case("accept") && v.contains("application/openmetrics-text"))
    });
    let (control, channel) = source();
    let body = render(control, channel.map(|c| c()), openmetrics);
    let body = if method == "HEAD" { String::new() } else { body };
    if openmetrics {
        ("200 OK", "application/openmetrics-text; version=1.0.0; charset=utf-8", body)
    } else {
        ("200 OK", "text/plain; version=0.0.4; charset=utf-8", body)
    }
}

/// Writes metric families: `# TYPE` (and `# HELP`) once, then samples.
struct Exposition {
    out: String,
    openmetrics: bool,
}

impl Exposition {
    /// Starts a family. `name` of a counter ends in `_total`; OpenMetrics names the family
    /// without it.
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let family = if kind == "counter" && self.openmetrics { name.trim_end_matches("_total") } else { name };
        let _ = writeln!(self.out, "# HELP {family} {help}");
        let _ = writeln!(self.out, "# TYPE {family} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }

    /// A family with one sample per item.
    fn each<T>(
        &mut self,
        name: &str,
        kind: &str,
        help: &str,
        items: &[T],
        f: impl Fn(&T) -> (Vec<(&str, String)>, f64),
    ) {
        if items.is_empty() {
            return;
        }
        self.family(name, kind, help);
        for it in items {
            let (labels, v) = f(it);
            let l: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
            self.sample(name, &l, v);
        }
    }
}

/// A label value as the formats quote it.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The exposition of the switch's counters now (module docs).
pub fn render(control: &Control, channel: Option<ChannelStats>, openmetrics: bool) -> String {
    render_report(&control.show_with(control.pmd_totals()), control.handler_stats(), channel, openmetrics)
}

/// The exposition of a report ([`Control::show_with`], or the final one) with the handler
/// thread's `(upcalls, batches, busy ns)`.
pub fn render_report(
    show: &crate::FinalReport,
    handler: Option<(u64, u64, u64)>,
    channel: Option<ChannelStats>,
    openmetrics: bool,
) -> String {
    let pmds = &show.pmds;
    let mut x = Exposition { out: String::new(), openmetrics };

    x.family("rqvs_info", "gauge", "The switch: its configured datapath design and rqvs version.");
    x.sample("rqvs_info", &[("design", show.design), ("version", env!("CARGO_PKG_VERSION"))], 1.0);
    x.family("rqvs_uptime_seconds", "gauge", "Seconds since the switch started.");
    x.sample("rqvs_uptime_seconds", &[], show.uptime_s);
    x.family("rqvs_openflow_rules", "gauge", "Flows in the OpenFlow table.");
    x.sample("rqvs_openflow_rules", &[], show.rules as f64);
    let a = rqvs_ofproto::actions::stats();
    x.family(
        "rqvs_action_lists",
        "gauge",
        "Distinct action lists the datapath's action table holds (used by a flow or megaflow, or unused for under a second).",
    );
    x.sample("rqvs_action_lists", &[], a.lists as f64);
    x.family("rqvs_action_lists_limit", "gauge", "The most action lists the table takes (--max-action-lists).");
    x.sample("rqvs_action_lists_limit", &[], a.limit as f64);
    x.family("rqvs_action_table_bytes", "gauge", "Approximate bytes of the action table's lists.");
    x.sample("rqvs_action_table_bytes", &[], a.bytes as f64);
    x.family("rqvs_action_lists_refused_total", "counter", "New action lists refused, the table being full.");
    x.sample("rqvs_action_lists_refused_total", &[], a.refused as f64);
    x.family("rqvs_action_lists_freed_total", "counter", "Action lists freed, no flow or megaflow using them.");
    x.sample("rqvs_action_lists_freed_total", &[], a.freed as f64);
    x.family(
        "rqvs_action_lists_stale_total",
        "counter",
        "Reads of an action list freed already (0 unless a holder kept an id uncounted too long).",
    );
    x.sample("rqvs_action_lists_stale_total", &[], a.stale as f64);

    let pmd = |p: &crate::stats::PmdReport| vec![("pmd", p.pmd.to_string())];
    x.each("rqvs_pmd_design", "gauge", "The design a PMD runs (1 for the one in use).", pmds, |p| {
        (vec![("pmd", p.pmd.to_string()), ("design", p.design.to_string())], 1.0)
    });
    type Field = fn(&crate::stats::PmdReport) -> f64;
    let counters: [(&str, &str, Field); 18] = [
        ("rqvs_pmd_packets_total", "Packets the datapath received.", |p| p.datapath.packets as f64),
        ("rqvs_pmd_emc_hits_total", "Packets found in the exact-match cache.", |p| p.datapath.emc_hits as f64),
        ("rqvs_pmd_megaflow_hits_total", "Packets found in the megaflow cache.", |p| p.datapath.megaflow_hits as f64),
        (
            "rqvs_pmd_model_hits_total",
            "Packets the learned model answered (CCACHE: a megaflow; CFLOWS: a rule).",
            |p| p.datapath.model_hits as f64,
        ),
        ("rqvs_pmd_remainder_hits_total", "CFLOWS: packets the remainder classifier answered.", |p| {
            p.datapath.remainder_hits as f64
        }),
        ("rqvs_pmd_no_match_total", "CFLOWS: packets no rule matched.", |p| p.datapath.no_match as f64),
        ("rqvs_pmd_upcalls_total", "Misses answered by an upcall to the slow path.", |p| {
            p.datapath.miss_with_success_upcall as f64
        }),
        ("rqvs_pmd_lost_total", "Packets lost by the datapath (upcall queue full).", |p| p.datapath.lost as f64),
        ("rqvs_pmd_flow_limit_hits_total", "Megaflows refused or evicted at the flow limit.", |p| {
            p.datapath.flow_limit_hits as f64
        }),
        ("rqvs_pmd_masks_evicted_total", "Megaflow subtables evicted at the mask limit.", |p| {
            p.datapath.masks_evicted as f64
        }),
        ("rqvs_pmd_megaflows_evicted_total", "Megaflows deleted with subtables evicted at the mask limit.", |p| {
            p.datapath.megaflows_evicted as f64
        }),
        ("rqvs_pmd_mask_limit_refused_total", "Megaflow installs refused at the mask limit.", |p| {
            p.datapath.mask_limit_refused as f64
        }),
        ("rqvs_pmd_mask_limit_narrowed_total", "Megaflows installed under a narrower mask at the mask limit.", |p| {
            p.datapath.mask_limit_narrowed as f64
        }),
        ("rqvs_pmd_mfcguard_masks_total", "Drop-only subtables MFCGuard deleted.", |p| {
            p.datapath.mfcguard_masks as f64
        }),
        ("rqvs_pmd_mfcguard_removed_total", "Megaflows MFCGuard deleted.", |p| p.datapath.mfcguard_removed as f64),
        ("rqvs_pmd_megaflow_subtable_lookups_total", "Subtables searched for megaflow hits.", |p| {
            p.datapath.megaflow_subtable_lookups as f64
        }),
        ("rqvs_pmd_model_swaps_total", "Models trained and swapped in.", |p| p.datapath.model_swaps as f64),
        ("rqvs_pmd_busy_seconds_total", "Seconds the PMD spent on batches that had packets.", |p| {
            p.busy_ns as f64 / 1e9
        }),
    ];
    for (name, help, f) in counters {
        x.each(name, "counter", help, pmds, |p| (pmd(p), f(p)));
    }
    let gauges: [(&str, &str, Field); 3] = [
        ("rqvs_pmd_megaflows", "Megaflows installed.", |p| p.datapath.megaflows as f64),
        ("rqvs_pmd_masks", "Distinct megaflow masks (subtables).", |p| p.datapath.masks as f64),
        ("rqvs_pmd_subtables_per_megaflow_hit", "Average subtables searched per megaflow hit since the start.", |p| {
            p.datapath.avg_subtable_lookups_per_megaflow_hit
        }),
    ];
    for (name, help, f) in gauges {
        x.each(name, "gauge", help, pmds, |p| (pmd(p), f(p)));
    }
    let auto: Vec<_> = pmds.iter().filter_map(|p| p.auto.as_ref().map(|a| (p.pmd, a))).collect();
    x.each(
        "rqvs_pmd_design_switches_total",
        "counter",
        "--design auto: switches between designs.",
        &auto,
        |(p, a): &(usize, &crate::stats::AutoStats)| (vec![("pmd", p.to_string())], a.design_switches as f64),
    );
    let times: Vec<_> = auto.iter().flat_map(|(p, a)| a.times().map(|(d, t)| (*p, d, t))).collect();
    x.each(
        "rqvs_pmd_design_seconds_total",
        "counter",
        "--design auto: seconds of PMD time in each design.",
        &times,
        |(p, d, t): &(usize, &str, f64)| (vec![("pmd", p.to_string()), ("design", d.to_string())], *t),
    );
    let covered: Vec<_> = pmds.iter().filter_map(|p| p.datapath.coverage.map(|c| (p.pmd, c))).collect();
    x.each(
        "rqvs_pmd_model_coverage",
        "gauge",
        "Share of rules (CFLOWS) or megaflows (CCACHE) the model's iSets hold.",
        &covered,
        |(p, c): &(usize, f64)| (vec![("pmd", p.to_string())], *c),
    );
    let mut frames = Vec::new();
    let mut policed = Vec::new();
    let (mut no_receive, mut no_forward) = (Vec::new(), Vec::new());
    for p in pmds {
        for (i, f) in p.ports.iter().enumerate() {
            // The port's OpenFlow number (the report's ports are in the PMDs' index order).
            let port = show.ports.get(i).map_or(i as u32 + 1, |r| r.port);
            policed.push((p.pmd, port, f.policed));
            no_receive.push((p.pmd, port, f.no_receive));
            no_forward.push((p.pmd, port, f.no_forward));
            for (fate, v) in [
                ("rx", f.rx),
                ("forwarded", f.forwarded),
                ("to_controller", f.to_controller),
                ("dropped", f.dropped),
                ("malformed", f.malformed),
                ("lost", f.lost),
            ] {
                frames.push((p.pmd, port, fate, v));
            }
        }
    }
    x.each(
        "rqvs_pmd_frames_total",
        "counter",
        "Frames a PMD took from a port, by what became of them (rx = the sum of the others).",
        &frames,
        |(pmd, port, fate, v): &(usize, u32, &str, u64)| {
            (vec![("pmd", pmd.to_string()), ("port", port.to_string()), ("fate", fate.to_string())], *v as f64)
        },
    );
    x.each(
        "rqvs_pmd_frames_policed_total",
        "counter",
        "Of the dropped frames: those the port's ingress policer dropped before they were parsed.",
        &policed,
        |(pmd, port, v): &(usize, u32, u64)| (vec![("pmd", pmd.to_string()), ("port", port.to_string())], *v as f64),
    );
    for (name, help, v) in [
        (
            "rqvs_pmd_frames_no_receive_total",
            "Of the dropped frames: those received while the port was no-receive (PORT_MOD).",
            &no_receive,
        ),
        (
            "rqvs_pmd_frames_no_forward_total",
            "Of the dropped frames: those whose every copy went to no-forward ports (PORT_MOD).",
            &no_forward,
        ),
    ] {
        x.each(name, "counter", help, v, |(pmd, port, v): &(usize, u32, u64)| {
            (vec![("pmd", pmd.to_string()), ("port", port.to_string())], *v as f64)
        });
    }

    type PortField = fn(&crate::PortReport) -> f64;
    let ports: [(&str, &str, PortField); 8] = [
        ("rqvs_port_rx_packets_total", "Frames received from the port's queues.", |p| p.rx_packets as f64),
        ("rqvs_port_rx_bytes_total", "Bytes of the frames received.", |p| p.rx_bytes as f64),
        ("rqvs_port_tx_bytes_total", "Bytes of the frames transmitted.", |p| p.tx_bytes as f64),
        ("rqvs_port_rx_lost_total", "Frames the kernel or the ring dropped before the switch saw them.", |p| {
            p.rx_lost as f64
        }),
        ("rqvs_port_rx_errors_total", "Receive errors.", |p| p.rx_errors as f64),
        ("rqvs_port_tx_packets_total", "Frames transmitted.", |p| p.tx_packets as f64),
        ("rqvs_port_tx_dropped_total", "Frames not transmitted (queue full).", |p| p.tx_dropped as f64),
        ("rqvs_port_tx_errors_total", "Transmit errors.", |p| p.tx_errors as f64),
    ];
    // `name` is the interface (`p1` for `--port p1:afpacket`), as operators name ports; `spec`
    // the `--port` argument. Files keep their whole spec in both.
    let port = |p: &crate::PortReport| {
        let ifname = match p.name.split_once(':') {
            Some(("pcap-in" | "pcap-out", _)) | None => p.name.as_str(),
            Some((ifname, _)) => ifname,
        };
        vec![("port", p.port.to_string()), ("name", ifname.to_string()), ("spec", p.name.clone())]
    };
    for (name, help, f) in ports {
        x.each(name, "counter", help, &show.ports, |p| (port(p), f(p)));
    }
    x.each("rqvs_port_up", "gauge", "1 when the port's link is up.", &show.ports, |p| {
        (port(p), if p.link == "up" { 1.0 } else { 0.0 })
    });

    if let Some((upcalls, _batches, busy_ns)) = handler {
        x.family("rqvs_handler_upcalls_total", "counter", "Upcalls the handler thread answered.");
        x.sample("rqvs_handler_upcalls_total", &[], upcalls as f64);
        x.family("rqvs_handler_busy_seconds_total", "counter", "Seconds the handler thread spent on upcalls.");
        x.sample("rqvs_handler_busy_seconds_total", &[], busy_ns as f64 / 1e9);
    }
    if let Some(c) = channel {
        x.family("rqvs_openflow_connections", "gauge", "OpenFlow connections open.");
        x.sample("rqvs_openflow_connections", &[], c.connections as f64);
        x.family(
            "rqvs_openflow_packet_ins_total",
            "counter",
            "Packet-ins: sent, dropped (queue full), unsent (no taker).",
        );
        for (r, v) in [("sent", c.packet_ins_sent), ("dropped", c.packet_ins_dropped), ("unsent", c.packet_ins_unsent)]
        {
            x.sample("rqvs_openflow_packet_ins_total", &[("result", r)], v as f64);
        }
        x.family("rqvs_openflow_packet_outs_total", "counter", "Packet-outs executed or refused.");
        for (r, v) in [("executed", c.packet_outs), ("refused", c.packet_outs_refused)] {
            x.sample("rqvs_openflow_packet_outs_total", &[("result", r)], v as f64);
        }
    }
    if openmetrics {
        x.out.push_str("# EOF\n");
    }
    x.out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape("x\ny"), "x\\ny");
    }

    #[test]
    fn openmetrics_counter_families_drop_total() {
        let mut x = Exposition { out: String::new(), openmetrics: true };
        x.family("rqvs_pmd_packets_total", "counter", "h");
        x.sample("rqvs_pmd_packets_total", &[("pmd", "0")], 3.0);
        assert_eq!(
            x.out,
            "# HELP rqvs_pmd_packets h\n# TYPE rqvs_pmd_packets counter\nrqvs_pmd_packets_total{pmd=\"0\"} 3\n"
        );
        let mut x = Exposition { out: String::new(), openmetrics: false };
        x.family("rqvs_pmd_packets_total", "counter", "h");
        assert!(x.out.contains("# TYPE rqvs_pmd_packets_total counter"));
    }
}
