//! `rqvs switch` (the running switch over ports, library `rqvs-switch`) and `rqvs ctl` (its
//! management socket's client).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rqvs_datapath::DesignKind;
use rqvs_experiment::inputs;
use rqvs_flow::formats::{self, RuleFormat};
use rqvs_flow::frame::build_frame;
use rqvs_flow::io::read_text;
use rqvs_flow::Rule;
use rqvs_ports::{PortEvent, PortSpec};

use crate::report::outln;
use rqvs_switch::ctl::{self, Listener, Request};
use rqvs_switch::metrics::MetricsListener;
use rqvs_switch::openflow::{self, Channel, ChannelConfig, FailMode, OpenflowListener};
use rqvs_switch::{PortSource, Switch, SwitchConfig, UpcallMode};

use crate::Failure;
use rqvs_datapath::policer::PolicerSpec;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A port: NAME or NAME:afpacket (an interface through AF_PACKET), NAME:afxdp, pcap-in:FILE,
    /// pcap-out:FILE. Repeat for each port; they are numbered 1, 2, ... in this order. Without
    /// any: the embedded workload's frames on pcap-in port 1 and two pcap-out ports in a
    /// temporary directory.
    #[arg(long = "port", value_name = "NAME[:TYPE]")]
    pub(crate) ports: Vec<String>,
    /// Rule file: ovs-ofctl flows (with actions), or ClassBench (no actions: rule i outputs to
    /// port 2 + i mod (ports − 1)); plain or .xz. Default: the embedded acl1_1k set; with
    /// --port and --controller/--openflow, what Open vSwitch gives a new bridge
    /// (`priority=0,actions=NORMAL`; nothing with --fail-mode secure).
    #[arg(long)]
    pub(crate) rules: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "orig")]
    pub(crate) design: DesignKind,
    /// CFLOWS: the classifier over the OpenFlow rules — NuevoMatchUP (nmu) or TupleMerge alone
    /// (tm, no learned index).
    #[arg(long, value_enum, default_value_t = crate::args::CflowsClassifierArg::Nmu)]
    classifier: crate::args::CflowsClassifierArg,
    #[command(flatten)]
    pub(crate) prefixes: crate::prefixes::Prefixes,
    /// PMD threads (each polls one queue of every port) [range: 1 ≤ x ≤ 64].
    #[arg(long, default_value_t = 1, value_parser = crate::args::range::between(1usize, 64))]
    pub(crate) pmds: usize,
    /// CPUs to pin the PMD threads to, e.g. `0,1` or `0-3` (PMD i on the i-th, cycling).
    #[arg(long, value_name = "LIST")]
    pub(crate) pmd_cpus: Option<String>,
    /// Management socket (Unix) for `rqvs ctl`. Default: RUN_DIR/rqvs-switch.PID.ctl, which
    /// `rqvs ctl` finds by itself (RUN_DIR: $RQVS_RUN_DIR, else /run/rqvs). A socket nobody
    /// listens on (left by a killed switch) is removed; a live one is an error.
    #[arg(long, value_name = "SOCKET")]
    pub(crate) ctl: Option<PathBuf>,
    /// Also write every log line to FILE (appended).
    #[arg(long, value_name = "FILE")]
    pub(crate) log_file: Option<PathBuf>,
    /// Log more: -v adds the debug lines (`rqvs ctl vlog/set LEVEL` changes the level later).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
    /// Serve the counters for Prometheus/OpenMetrics scrapers at `http://ADDR/metrics`, e.g.
    /// `127.0.0.1:9100` (port 0 picks one; the ready line says which).
    #[arg(long, value_name = "IP:PORT")]
    pub(crate) metrics: Option<String>,
    /// Write the final counters as JSON here.
    #[arg(long, value_name = "OUT")]
    pub(crate) json: Option<PathBuf>,
    /// Spin when idle, as OVS-DPDK's PMDs do (default: nap 50 µs after 1024 empty polls).
    #[arg(long)]
    busy_poll: bool,
    /// How afpacket ports receive: 'throughput' (a TPACKET_V3 ring, frames handed over a block
    /// at a time: full, or after the 1 ms block timer) or 'latency' (recvmsg per frame, no
    /// block timer: a lone frame crosses at once, at a copy and a system call per frame; see
    /// docs/switch-bench.md).
    #[arg(long, value_name = "MODE", default_value = "throughput")]
    rx_mode: rqvs_ports::RxMode,
    /// Where afxdp ports attach their XDP program: 'native' (driver mode: on a veth the kernel
    /// then stops its peer's TSO/GSO, so bulk TCP from a host passes), 'generic' (any
    /// interface; a TSO super-frame does not fit an AF_XDP chunk and is lost, counted in
    /// rx_lost) or 'auto' (native when the driver takes it, else generic, logged).
    #[arg(long, value_name = "MODE", default_value = "auto")]
    xdp_mode: rqvs_ports::XdpMode,
    /// Stop after this many seconds (default: at SIGINT/SIGTERM, `rqvs ctl exit`, or when every
    /// port is a pcap-in port that has delivered all its frames) [range: 0 < x ≤ 1000000000].
    #[arg(long, value_name = "SECONDS", value_parser = crate::args::range::above(0.0, 1e9))]
    pub(crate) duration: Option<f64>,
    /// EMC insertion probability (OVS default 0.01) [range: 0 ≤ x ≤ 1].
    #[arg(long, default_value_t = 0.01, value_parser = crate::args::range::share())]
    emc_prob: f64,
    /// EMC entries of each PMD (OVS: 8192) [range: a power of two, 2 ≤ x ≤ 2097152].
    #[arg(long, default_value_t = rqvs_datapath::emc::EMC_ENTRIES, value_parser = crate::args::range::emc_entries)]
    emc_entries: usize,
    /// Where ORIG and CCACHE run the slow path: `handler` (one handler thread serves every PMD
    /// through bounded queues; overflow is lost and counted) or `inline` (each PMD runs it
    /// between batches, as OVS-DPDK's PMDs do).
    #[arg(long, value_enum, default_value = "handler")]
    upcalls: Upcalls,
    /// OpenFlow 1.3/1.4 channel: listen on `ptcp:[PORT][:IP]` (plain TCP) or `pssl:[PORT][:IP]`
    /// (TLS: --private-key, --certificate, --ca-cert) for `ovs-ofctl` and controllers; IP
    /// default 127.0.0.1, PORT 6653 (`ptcp:IP:PORT` works too). With it the switch keeps
    /// running after its pcap-in ports are done (until SIGINT/SIGTERM, `rqvs ctl exit` or
    /// --duration).
    #[arg(long, value_name = "ptcp:|pssl:[PORT][:IP]")]
    pub(crate) openflow: Option<String>,
    /// OpenFlow controller to connect to, `tcp:IP[:PORT]` or `ssl:IP[:PORT]` (TLS; PORT default
    /// 6653); repeat for several. The switch keeps reconnecting (backoff 1 s doubling to 8 s),
    /// probes an idle connection with ECHO_REQUEST, sends table misses and `controller` actions
    /// as PACKET_IN.
    #[arg(long = "controller", value_name = "tcp:|ssl:IP[:PORT]")]
    pub(crate) controllers: Vec<String>,
    #[command(flatten)]
    pub(crate) tls: crate::switch_channel::TlsArgs,
    /// The NORMAL action's MAC learning: seconds a station stays learned without sending (OVS's
    /// mac-aging-time) [range: 1 ≤ x ≤ 86400].
    #[arg(long, value_name = "SECONDS", default_value_t = 300, value_parser = crate::args::range::between(1u64, 86_400))]
    pub(crate) mac_aging_time: u64,
    /// The NORMAL action's MAC learning: stations learned at most, per (VLAN, address) (OVS's
    /// mac-table-size) [range: 4 ≤ x ≤ 1048576].
    #[arg(long, value_name = "N", default_value_t = rqvs_switch::normal::DEFAULT_SIZE, value_parser = crate::args::range::between(4usize, 1 << 20))]
    pub(crate) mac_table_size: usize,
    /// With --openflow: connections served at once; another is closed at once and logged
    /// [range: 1 ≤ x ≤ 65536].
    #[arg(long, value_name = "N", default_value_t = openflow::DEFAULT_MAX_CONNECTIONS, value_parser = crate::args::range::between(1usize, 65536))]
    pub(crate) max_connections: usize,
    /// Distinct action lists the datapath holds at most: a flow-mod that would add one more is
    /// refused (OFPFMFC_TABLE_FULL). A list is freed about a second after the last flow or
    /// megaflow using it goes, so a controller inventing more lists a second than this reaches
    /// it [range: 1 ≤ x ≤ 4194304].
    #[arg(long, value_name = "N", default_value_t = rqvs_ofproto::actions::DEFAULT_LIMIT, value_parser = crate::args::range::between(1usize, rqvs_ofproto::actions::MAX_LISTS))]
    pub(crate) max_action_lists: usize,
    /// With --controller: what happens while no controller is there. `secure`: the flows stay,
    /// nothing else; `standalone` (Open vSwitch's default): after three inactivity probes
    /// without a controller the flows are removed and the switch forwards as a MAC-learning
    /// switch (NORMAL) until a controller is admitted.
    #[arg(long, value_enum, default_value = "standalone")]
    fail_mode: FailModeArg,
    /// With --controller: seconds of silence after which a controller is sent an ECHO_REQUEST
    /// (and disconnected after as long again without an answer); OVS's default is 5
    /// [range: 0 < x ≤ 86400].
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0, value_parser = crate::args::range::above(0.0, 86_400.0))]
    inactivity_probe: f64,
    /// The OpenFlow datapath id (1 to 16 hex digits, `0x` allowed). Default, as Open vSwitch
    /// derives it from the bridge's MAC: the smallest MAC of the switch's interface ports
    /// (afpacket, afxdp), else (file ports only) 0x0000727176730001.
    #[arg(long, value_name = "HEX", value_parser = parse_datapath_id)]
    datapath_id: Option<u64>,
    #[command(flatten)]
    defences: crate::args::Defences,
    #[command(flatten)]
    auto: crate::args::AutoArgs,
    /// Ingress policing on a port, OVS's `ingress_policing_kpkts_rate` and `_burst`: PORT (its
    /// number, or its `--port` argument or the NAME in it) admits KPPS thousand frames per second
    /// with bursts of at most BURST thousand (default 16); the frames over it are dropped before
    /// they are parsed or classified, counted as `dropped` and `policed`. Repeat for each port.
    #[arg(long = "ingress-policing", value_name = "PORT=KPPS[/BURST]", value_parser = policing_arg)]
    pub(crate) ingress_policing: Vec<(String, PolicerSpec)>,
    #[command(flatten)]
    pub(crate) daemon: crate::daemon::DaemonArgs,
    /// Take the configuration from an OVSDB server as ovs-vswitchd does (`unix:PATH`,
    /// `tcp:IP:PORT` or `ssl:IP:PORT` with --private-key, --certificate, --ca-cert; without a
    /// value OVS's `unix:/run/openvswitch/db.sock`): the first bridge
    /// with datapath_type=netdev, its interfaces as ports, status written back
    /// (docs/ovs-dropin.md). Not with --port, --openflow, --controller, --metrics.
    #[arg(long, value_name = "REMOTE")]
    pub(crate) ovsdb: Option<Option<String>>,
}

/// One `--ingress-policing PORT=KPPS[/BURST]`.
fn policing_arg(s: &str) -> Result<(String, PolicerSpec), String> {
    let (port, spec) = s.split_once('=').ok_or_else(|| format!("expected PORT=KPPS[/BURST], found '{s}'"))?;
    if port.is_empty() {
        return Err(format!("expected PORT=KPPS[/BURST] with a port, found '{s}'"));
    }
    Ok((port.to_string(), crate::args::policer(spec)?))
}

/// `--datapath-id`: 1 to 16 hex digits, `0x` allowed.
fn parse_datapath_id(s: &str) -> Result<u64, String> {
    let h = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
    if h.is_empty() || h.len() > 16 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("'{s}': expected 1 to 16 hex digits (a 64-bit datapath id)"));
    }
    u64::from_str_radix(h, 16).map_err(|e| format!("'{s}': {e}"))
}

/// The default datapath id (see `--datapath-id`): the smallest MAC of the interface ports, read
/// from `/sys/class/net/NAME/address` in the switch's namespace.
fn default_datapath_id(ports: &[String]) -> Option<u64> {
    ports
        .iter()
        .filter_map(|n| n.parse::<PortSpec>().ok())
        .filter(|s| matches!(s.port_type, rqvs_ports::PortType::AfPacket | rqvs_ports::PortType::AfXdp))
        .filter_map(|s| std::fs::read_to_string(format!("/sys/class/net/{}/address", s.name)).ok())
        .filter_map(|mac| u64::from_str_radix(&mac.trim().replace(':', ""), 16).ok())
        .filter(|&m| m != 0)
        .min()
}

/// The `--port` arguments, or the embedded run's ports when none is given.
fn port_args(a: &Args) -> Vec<String> {
    if a.ports.is_empty() {
        vec!["pcap-in:embedded".into(), "pcap-out:port2".into(), "pcap-out:port3".into()]
    } else {
        a.ports.clone()
    }
}

/// One port, one owner: the same interface (`p1` and `p1:afxdp` alike) or output file given
/// twice as `--port` is a usage error (it would see, or write, every frame twice). Reading one
/// capture twice is allowed. Arguments that do not parse are left to `run`'s error.
fn duplicate_ports(names: &[String]) -> Result<(), String> {
    let mut seen: Vec<(String, usize)> = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let Ok(spec) = n.parse::<PortSpec>() else { continue };
        let key = match &spec.port_type {
            rqvs_ports::PortType::AfPacket | rqvs_ports::PortType::AfXdp | rqvs_ports::PortType::Tap => {
                format!("interface {}", spec.name)
            }
            rqvs_ports::PortType::PcapOut(p) => format!("file {}", p.display()),
            rqvs_ports::PortType::Patch(_) => format!("patch port {}", spec.name),
            rqvs_ports::PortType::PcapIn(_) => continue,
        };
        if let Some((_, j)) = seen.iter().find(|(k, _)| *k == key) {
            return Err(format!(
                "--port {n}: {key} is already port {} (--port {}): one port, one owner",
                j + 1,
                names[*j]
            ));
        }
        seen.push((key, i));
    }
    Ok(())
}

/// `--ingress-policing` for the ports `names` (the `--port` arguments): the policer of each
/// port, by port − 1; a port that does not exist, or is policed twice, is an error.
fn policing(given: &[(String, PolicerSpec)], names: &[String]) -> Result<Vec<Option<PolicerSpec>>, String> {
    let mut out = vec![None; names.len()];
    for (port, spec) in given {
        let usage = |why: String| format!("--ingress-policing {port}={spec}: {why}");
        let i = match port.parse::<usize>() {
            Ok(n) if (1..=names.len()).contains(&n) => n - 1,
            Ok(n) => return Err(usage(format!("no port {n}: the ports are 1..{}", names.len()))),
            Err(_) => {
                // The whole `--port` argument, or the interface in NAME:TYPE (a capture port's
                // argument is TYPE:FILE: only the whole of it names it).
                let named = |n: &&String| {
                    *n == port
                        || (!n.starts_with("pcap-")
                            && n.strip_prefix(port.as_str()).is_some_and(|rest| rest.starts_with(':')))
                };
                let found: Vec<usize> = names.iter().enumerate().filter(|(_, n)| named(n)).map(|(i, _)| i).collect();
                match found[..] {
                    [i] => i,
                    [] => return Err(usage(format!("no port named '{port}' (the ports: {})", names.join(", ")))),
                    _ => return Err(usage(format!("'{port}' names {} ports: give a port number", found.len()))),
                }
            }
        };
        if out[i].is_some() {
            return Err(usage(format!("port {} is policed twice", i + 1)));
        }
        out[i] = Some(*spec);
    }
    Ok(out)
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum FailModeArg {
    Secure,
    Standalone,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum Upcalls {
    Handler,
    Inline,
}

pub(crate) fn parse_cpus(s: &str) -> Result<Vec<usize>, Failure> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || Failure(format!("--pmd-cpus '{s}': expected CPU numbers like 0,1 or 0-3, found '{part}'"));
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b || b >= 1024 {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok().filter(|&c: &usize| c < 1024).ok_or_else(bad)?),
        }
    }
    if out.is_empty() {
        return Err(Failure(format!("--pmd-cpus '{s}': no CPU given")));
    }
    Ok(out)
}

/// The embedded run's output directory: removed again unless the switch got to run (a bad
/// rule file or a stale socket leaves nothing behind).
struct OutDir {
    path: std::path::PathBuf,
    keep: bool,
}

impl Drop for OutDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Options `rqvs switch` accepts but would not use with the design and the other options given:
/// usage errors ([`crate::args::Given`]).
pub fn unused(a: &Args, g: &crate::args::Given) -> Result<(), String> {
    let design = a.design.name();
    // `auto` runs all three designs, so it uses every design's settings.
    g.refuse(
        "classifier",
        !matches!(a.design, DesignKind::Cflows | DesignKind::Auto),
        &format!("CFLOWS' classifier; not used by --design {design}"),
    )?;
    g.refuse(
        "upcalls",
        a.design == DesignKind::Cflows,
        "where ORIG and CCACHE run the slow path; CFLOWS has no upcalls",
    )?;
    for id in ["fail_mode", "inactivity_probe"] {
        g.refuse(id, a.controllers.is_empty(), "a controller connection's setting; used only with --controller")?;
    }
    g.refuse(
        "datapath_id",
        a.controllers.is_empty() && a.openflow.is_none(),
        "the OpenFlow channel's setting; used only with --controller or --openflow",
    )?;
    a.tls.unused(g, any_tls_target(a))?;
    g.refuse(
        "xdp_mode",
        !a.ports.iter().any(|p| p.ends_with(":afxdp")),
        "where afxdp ports attach their XDP program; used only with NAME:afxdp ports",
    )?;
    g.refuse(
        "max_connections",
        a.openflow.is_none(),
        "the passive OpenFlow listener's limit; used only with --openflow",
    )?;
    for (id, what) in [
        ("mask_limit", "the mask limit"),
        ("mask_eviction", "the mask limit's policy"),
        ("mfcguard", "MFCGuard"),
        ("mfcguard_interval", "MFCGuard's interval"),
    ] {
        g.refuse(
            id,
            a.design == DesignKind::Cflows,
            &format!("{what}, a defence of ORIG's and CCACHE's megaflow cache; not used by --design {design}"),
        )?;
    }
    for (id, why) in [
        ("ports", "with --ovsdb the ports are the bridge's interfaces in the database"),
        (
            "openflow",
            "with --ovsdb the OpenFlow channels are each bridge's BRIDGE.mgmt socket and its ptcp:/pssl:/punix: Controller rows (ovs-vsctl set-controller)",
        ),
        ("controllers", "with --ovsdb the controllers are each bridge's Controller rows (ovs-vsctl set-controller)"),
        ("metrics", "not served across --ovsdb's datapath restarts yet"),
        ("ingress_policing", "with --ovsdb the Interface's ingress_policing columns are not read yet"),
    ] {
        g.refuse(id, a.ovsdb.is_some(), why)?;
    }
    g.refuse("bridge", a.daemon.unixctl.is_none(), "the bridge ovs-appctl's commands name; used only with --unixctl")?;
    g.refuse("auto", a.design != DesignKind::Auto, &format!("auto's settings; not used by --design {design}"))?;
    policing(&a.ingress_policing, &port_args(a))?;
    duplicate_ports(&a.ports)?;
    let auto = a.auto.check()?;
    rqvs_experiment::replay::check_auto(&auto, a.classifier.classifier()).map_err(|e| e.0)
}

/// Does an `ssl:` controller or a `pssl:` listener need the TLS options?
pub(crate) fn any_tls_target(a: &Args) -> bool {
    a.openflow.as_deref().is_some_and(|t| t.starts_with("pssl:"))
        || a.controllers.iter().any(|c| c.starts_with("ssl:"))
        || a.ovsdb.as_ref().is_some_and(|r| r.as_deref().is_some_and(|r| r.starts_with("ssl:")))
}

/// The datapath settings of `a` (everything but ports, rules and the OpenFlow channel).
fn configure(
    a: &Args,
    cfg: &mut SwitchConfig,
    pmd_cpus: Vec<usize>,
    hook: rqvs_ports::EventHook,
) -> Result<(), Failure> {
    cfg.cflows.classifier = a.classifier.classifier();
    cfg.auto = a.auto.config();
    (cfg.orig.mask_limit, cfg.orig.mfcguard) = a.defences.orig();
    cfg.pmds = a.pmds;
    cfg.pmd_cpus = pmd_cpus;
    cfg.busy_poll = a.busy_poll;
    cfg.rx_mode = a.rx_mode;
    cfg.xdp_mode = a.xdp_mode;
    cfg.upcalls = match a.upcalls {
        Upcalls::Handler => UpcallMode::Handler,
        Upcalls::Inline => UpcallMode::Inline,
    };
    cfg.datapath.emc_insert_prob = a.emc_prob;
    cfg.datapath.emc_entries =
        rqvs_datapath::emc::EmcEntries::new(a.emc_entries).map_err(|e| Failure(format!("--emc-entries: {e}")))?;
    cfg.hook = Some(hook);
    Ok(())
}

pub fn run(a: &Args) -> Result<(), Failure> {
    a.prefixes.apply();
    if a.daemon.detach {
        // The same command line runs in the background; this process returns once it is ready.
        return crate::daemon::detach();
    }
    if a.verbose > 0 {
        rqvs_switch::diag::set_level(rqvs_switch::diag::Level::Debug);
    }
    if let Some(f) = &a.log_file {
        rqvs_switch::diag::set_log_file(f).map_err(|e| Failure(format!("--log-file {}: {e}", f.display())))?;
    }
    // Process-wide, as the action table is (module docs of rqvs_ofproto::actions).
    rqvs_ofproto::actions::set_limit(a.max_action_lists);
    if let Some(remote) = &a.ovsdb {
        return crate::dropin::run(a, remote.as_deref(), |cfg, cpus, hook| configure(a, cfg, cpus, hook));
    }
    if a.pmds == 0 || a.pmds > 64 {
        return Err(Failure(format!("--pmds {}: expected 1..64", a.pmds)));
    }
    let pmd_cpus = a.pmd_cpus.as_deref().map(parse_cpus).transpose()?.unwrap_or_default();
    let (ports, mut out_dir) = port_sources(a)?;
    let (rules, classbench) = initial_rules(a, ports.len())?;
    // The socket first: a stale one is an error before any port is opened.
    let ctl_path = match &a.ctl {
        Some(p) => p.clone(),
        None => rqvs_switch::ctl::default_socket()?,
    };
    let listener = Some(Listener::bind(&ctl_path)?);
    let mut daemon = a.daemon.bind()?;
    let metrics = a.metrics.as_deref().map(MetricsListener::bind).transpose()?;
    let metrics_addr = metrics.as_ref().and_then(MetricsListener::local_addr);
    let tls = a.tls.load(any_tls_target(a))?;
    let of_listener = match &a.openflow {
        Some(t) => Some(OpenflowListener::bind_target(&openflow::parse_target(t)?, tls.clone())?),
        None => None,
    };
    let controllers = a.controllers.iter().map(|c| openflow::parse_controller(c)).collect::<Result<Vec<_>, _>>()?;
    if !(a.inactivity_probe.is_finite() && (0.1..=3600.0).contains(&a.inactivity_probe)) {
        return Err(Failure(format!("--inactivity-probe {}: expected 0.1..3600 seconds", a.inactivity_probe)));
    }
    let channel_wanted = of_listener.is_some() || !controllers.is_empty();
    let of_addr = of_listener.as_ref().and_then(OpenflowListener::local_addr);
    let of_tls = a.openflow.as_deref().is_some_and(|t| t.starts_with("pssl:"));
    let cfg = switch_config(a, ports, rules, pmd_cpus, channel_wanted)?;
    let policed: Vec<String> = cfg
        .policing
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.map(|p| format!("port {} at {}", i + 1, p.describe())))
        .collect();
    let n_rules = cfg.rules.len();
    let names: Vec<String> = a.ports.clone();
    let switch = Switch::start(cfg)?;
    if let Some(d) = &mut out_dir {
        d.keep = true;
    }
    let control = switch.control();
    let signalled = Arc::new(AtomicBool::new(false));
    for sig in [libc::SIGINT, libc::SIGTERM] {
        signal_hook::flag::register(sig, signalled.clone())
            .map_err(|e| Failure(format!("installing a signal handler: {e}")))?;
    }
    crate::daemon::on_sighup(a.log_file.is_some(), &signalled)?;
    let server = listener.map(|l| {
        let c = control.clone();
        std::thread::Builder::new().name("ctl".into()).spawn(move || l.serve(&c))
    });
    let server = server.transpose().map_err(|e| Failure(format!("starting the management thread: {e}")))?;
    daemon.serve(&control)?;
    let n_controllers = controllers.len();
    let channel = if channel_wanted {
        Some(Channel::start(&control, channel_config(a, of_listener, controllers, tls))?)
    } else {
        None
    };
    let metrics_server = metrics.map(|m| {
        let (c, source) = (control.clone(), channel.as_ref().map(Channel::stats_source));
        std::thread::Builder::new().name("metrics".into()).spawn(move || m.serve(&c, source))
    });
    let metrics_server =
        metrics_server.transpose().map_err(|e| Failure(format!("starting the metrics thread: {e}")))?;
    let design = match a.design {
        DesignKind::Auto => format!("auto (settings: {})", a.auto.config().settings_line()),
        d => d.name().to_string(),
    };
    let endpoints = format!("; management socket {}", ctl_path.display())
        + &of_addr.map_or(String::new(), |s| format!("; OpenFlow {}:{s}", if of_tls { "pssl" } else { "ptcp" }))
        + &metrics_addr.map_or(String::new(), |s| format!("; metrics http://{s}/metrics"));
    rqvs_switch::log_info!(
        "rqvs switch: ready: {design} design, {n_rules} rules{}, {} PMD thread(s), ports {}{endpoints}{}{}{}",
        if classbench { " (ClassBench: rule i outputs to port 2 + i mod (ports - 1))" } else { "" },
        a.pmds,
        if names.is_empty() { "1: embedded trace (pcap-in), 2-3: pcap-out".to_string() } else { names.join(", ") },
        if n_controllers > 0 {
            format!("; {n_controllers} controller(s), fail mode {:?}", a.fail_mode).to_lowercase()
        } else {
            String::new()
        },
        if policed.is_empty() { String::new() } else { format!("; ingress policing: {}", policed.join(", ")) },
        daemon.describe()
    );
    rqvs_switch::notify::ready(&format!("{design} design, {} PMD thread(s)", a.pmds));
    let t0 = Instant::now();
    let is_done = || {
        let timed_out = a.duration.is_some_and(|d| t0.elapsed().as_secs_f64() >= d);
        timed_out || (switch.is_finished() && channel.is_none() && !daemon.serves())
    };
    wait_for_stop(&control, &signalled, is_done);
    rqvs_switch::notify::stopping();
    let report = switch.stop()?;
    rqvs_switch::log_info!(
        "rqvs switch: stopped: {}",
        if report.balanced() { "every frame accounted for" } else { "frame accounting does not balance" }
    );
    if let Some(s) = server {
        let _ = s.join();
    }
    drop(daemon);
    if let Some(s) = metrics_server {
        let _ = s.join();
    }
    let channel_stats = channel.map(|c| {
        let s = c.stats();
        c.join();
        s
    });
    final_report(a, &report, channel_stats.as_ref(), out_dir.as_ref())
}

/// The datapath's configuration from the command line (`packet_in` when an OpenFlow channel
/// will take packet-ins).
fn switch_config(
    a: &Args,
    ports: Vec<PortSource>,
    rules: Vec<Rule>,
    pmd_cpus: Vec<usize>,
    packet_in: bool,
) -> Result<SwitchConfig, Failure> {
    if a.classifier == crate::args::CflowsClassifierArg::Tm
        && !matches!(a.design, DesignKind::Cflows | DesignKind::Auto)
    {
        return Err(Failure("--classifier tm: CFLOWS' classifier; expected --design cflows or auto".into()));
    }
    let hook: rqvs_ports::EventHook = Arc::new(|e: &PortEvent| match e.kind {
        rqvs_ports::EventKind::LinkUp | rqvs_ports::EventKind::EndOfInput => {
            rqvs_switch::log_info!("rqvs switch: {e}")
        }
        _ => rqvs_switch::log_warn!("rqvs switch: {e}"),
    });
    let mut cfg = SwitchConfig::new(ports, rules, a.design);
    configure(a, &mut cfg, pmd_cpus, hook)?;
    cfg.packet_in = packet_in;
    cfg.policing = policing(&a.ingress_policing, &port_args(a))?;
    cfg.mac_aging = Duration::from_secs(a.mac_aging_time);
    cfg.mac_table_size = a.mac_table_size;
    Ok(cfg)
}

/// The OpenFlow channel's configuration from the command line.
fn channel_config(
    a: &Args,
    listen: Option<OpenflowListener>,
    controllers: Vec<openflow::ControllerTarget>,
    tls: Option<Arc<openflow::Tls>>,
) -> ChannelConfig {
    ChannelConfig {
        listen,
        controllers,
        tls,
        max_connections: a.max_connections,
        fail_mode: match a.fail_mode {
            FailModeArg::Secure => FailMode::Secure,
            FailModeArg::Standalone => FailMode::Standalone,
        },
        inactivity_probe: Duration::from_secs_f64(a.inactivity_probe),
        datapath_id: a
            .datapath_id
            .or_else(|| default_datapath_id(&port_args(a)))
            .unwrap_or(openflow::DEFAULT_DATAPATH_ID),
        ..ChannelConfig::new()
    }
}

/// Until the switch is asked to stop (a signal, `exit` on a management socket) or `done`
/// says so (checked every 20 ms); then asks every thread to stop.
fn wait_for_stop(control: &rqvs_switch::Control, signalled: &AtomicBool, done: impl Fn() -> bool) {
    loop {
        std::thread::sleep(Duration::from_millis(20));
        if signalled.load(Ordering::Relaxed) {
            control.request_stop();
        }
        if control.stop_requested() || done() {
            break;
        }
    }
    control.request_stop();
}

/// The ports of `rqvs switch`: those given, or the embedded run's (its trace as a frame source,
/// two pcap-out captures in a directory of its own, kept for the user once the switch starts).
fn port_sources(a: &Args) -> Result<(Vec<PortSource>, Option<OutDir>), Failure> {
    if !a.ports.is_empty() {
        let ports =
            a.ports.iter().map(|p| Ok(PortSource::Spec(p.parse::<PortSpec>()?))).collect::<Result<_, Failure>>()?;
        return Ok((ports, None));
    }
    let packets = inputs::load_packets(None, 1)?;
    let frames = packets.entries.iter().map(|e| build_frame(&e.key)).collect();
    let dir = std::env::temp_dir().join(format!("rqvs-switch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| Failure(format!("{}: {e}", dir.display())))?;
    let dir = OutDir { path: dir, keep: false };
    let mut ports = vec![PortSource::Frames { name: "embedded-acl1_1k-trace".into(), frames }];
    for p in [2, 3] {
        let f = dir.path.join(format!("port{p}.pcap"));
        ports.push(PortSource::Spec(format!("pcap-out:{}", f.display()).parse::<PortSpec>()?));
    }
    Ok((ports, Some(dir)))
}

/// The switch's first OpenFlow table, and whether it came from a ClassBench file (its rules'
/// outputs then spread over the `n_ports` ports). A switch on real ports under an OpenFlow
/// channel, given no flows, starts as Open vSwitch starts a new bridge:
/// `priority=0,actions=NORMAL` in fail-mode standalone, nothing in secure (the controller
/// programs it). The embedded run keeps its demo table.
fn initial_rules(a: &Args, n_ports: usize) -> Result<(Vec<Rule>, bool), Failure> {
    let new_bridge = !a.ports.is_empty() && (a.openflow.is_some() || !a.controllers.is_empty());
    let (mut rules, classbench) = match &a.rules {
        None if new_bridge => match a.fail_mode {
            FailModeArg::Secure => (Vec::new(), false),
            FailModeArg::Standalone => (formats::parse_rules("new bridge", "priority=0,actions=NORMAL\n")?, false),
        },
        None => (inputs::load_rules(None)?, true),
        Some(p) => {
            let text = read_text(p)?;
            let classbench = formats::sniff_rule_format(&text) == RuleFormat::ClassBench;
            (formats::parse_rules(&p.display().to_string(), &text)?, classbench)
        }
    };
    if classbench {
        rqvs_switch::assign_switch_outputs(&mut rules, n_ports);
    }
    Ok((rules, classbench))
}

/// What `rqvs switch` prints (and writes as JSON) when it has stopped; an error when the frame
/// accounting does not balance.
fn final_report(
    a: &Args,
    report: &rqvs_switch::FinalReport,
    channel_stats: Option<&openflow::ChannelStats>,
    out_dir: Option<&OutDir>,
) -> Result<(), Failure> {
    let out = crate::report::Out::new(a.json.as_deref());
    out.line(report.format().trim_end_matches('\n'));
    if let Some(c) = channel_stats {
        outln!(out,
            "  openflow: {} PACKET_INs sent, {} dropped (a connection's queue full), {} with no connection to take them; {} PACKET_OUTs, {} refused; failed open {} times; {} connections refused (--max-connections), {} dropped without a HELLO",
            c.packet_ins_sent, c.packet_ins_dropped, c.packet_ins_unsent, c.packet_outs, c.packet_outs_refused, c.fail_opens,
            c.connections_refused, c.hello_timeouts
        );
    }
    if let Some(d) = out_dir {
        outln!(out, "  output captures: {}", d.path.display());
    }
    if let Some(p) = &a.json {
        let serde_json::Value::Object(mut fields) = serde_json::json!(report) else { unreachable!("a struct") };
        if let Some(c) = channel_stats {
            fields.insert("openflow".into(), serde_json::json!(c));
        }
        crate::report::write_json(p, "switch", fields)?;
    }
    if !report.balanced() {
        return Err(Failure(
            "frame accounting does not balance (a bug: please report it with the counters above)".into(),
        ));
    }
    Ok(())
}

#[derive(clap::Args, Debug)]
pub struct CtlArgs {
    /// The switch's management socket (`rqvs switch --ctl`). Default: the one running switch's
    /// in RUN_DIR ($RQVS_RUN_DIR, else /run/rqvs).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Print the reply as JSON.
    #[arg(long)]
    json: bool,
    /// pmd-stats-show, pmd-stats-clear, dump-flows, dump-rules [--stats], ofproto/trace FLOW, show,
    /// add-flows FILE, del-flows FILE|--all, fdb/show, vlog/set LEVEL, vlog/list, vlog/reopen, exit.
    command: String,
    #[arg(allow_hyphen_values = true)]
    args: Vec<String>,
}

/// `rqvs ctl`'s usage errors (exit 2): an unknown command, or the wrong number of arguments.
pub fn check_ctl(a: &CtlArgs) -> Result<(), String> {
    ctl::check_command(&a.command, &a.args)
}

pub fn run_ctl(a: &CtlArgs) -> Result<(), Failure> {
    let mut req = Request { cmd: a.command.clone(), args: a.args.clone(), ..Request::default() };
    let takes_file = matches!(a.command.as_str(), "add-flows" | "del-flows");
    if takes_file {
        if let Some(f) = a.args.iter().find(|x| !x.starts_with("--")) {
            let path = Path::new(f);
            req.body = Some(read_text(path)?);
            req.file = Some(f.clone());
        }
    }
    let socket = match &a.socket {
        Some(p) => p.clone(),
        None => ctl::find_switch()?,
    };
    let reply = ctl::request(&socket, &req)?;
    if !reply.ok {
        return Err(Failure(reply.error));
    }
    if a.json {
        crate::report::stdout(format!("{}\n", serde_json::to_string_pretty(&reply.json)?).as_bytes());
    } else {
        crate::report::stdout(reply.text.as_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::policing;

    #[test]
    fn policed_ports_are_named_by_number_argument_or_interface() {
        let names: Vec<String> =
            ["veth1:afxdp", "veth2", "pcap-in:in.pcap", "pcap-out:veth1"].iter().map(|s| s.to_string()).collect();
        let spec = "100".parse().unwrap();
        let at = |port: &str| -> Result<usize, String> {
            let p = policing(&[(port.to_string(), spec)], &names)?;
            Ok(p.iter().position(Option::is_some).unwrap())
        };
        assert_eq!(at("1"), Ok(0));
        assert_eq!(at("veth1"), Ok(0), "the interface of NAME:TYPE");
        assert_eq!(at("veth1:afxdp"), Ok(0));
        assert_eq!(at("veth2"), Ok(1));
        assert_eq!(at("pcap-in:in.pcap"), Ok(2));
        assert_eq!(at("4"), Ok(3));
        assert!(at("pcap-in").unwrap_err().contains("no port named 'pcap-in'"));
        assert!(at("5").unwrap_err().contains("no port 5: the ports are 1..4"));
        let twice = policing(&[("veth1".into(), spec), ("1".into(), spec)], &names).unwrap_err();
        assert!(twice.contains("port 1 is policed twice"), "{twice}");
        let two: Vec<String> = ["eth0:afxdp", "eth0:afpacket"].iter().map(|s| s.to_string()).collect();
        let e = policing(&[("eth0".into(), spec)], &two).unwrap_err();
        assert!(e.contains("'eth0' names 2 ports: give a port number"), "{e}");
    }
}
