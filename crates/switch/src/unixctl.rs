//! OVS's unixctl protocol, so that `ovs-appctl -t PATH COMMAND ARGS` manages an rqvs switch as
//! it manages `ovs-vswitchd`: JSON-RPC over a Unix stream socket, a request
//! `{"method": COMMAND, "params": [STRING...], "id": ID}`, a reply `{"result": STRING,
//! "error": null, "id": ID}` or `{"result": null, "error": STRING, "id": ID}`; several requests
//! may follow each other on one connection.
//!
//! Each command is answered by what the management socket (`ctl.rs`, `rqvs ctl`) already
//! computes — one implementation, two protocols:
//!
//! | unixctl command | `rqvs ctl` command | layout |
//! |---|---|---|
//! | `list-commands`, `version`, `exit` | — (`exit`) | OVS's (`version` names rqvs) |
//! | `dpif-netdev/pmd-stats-show`, `-clear` | `pmd-stats-show`, `-clear` | rqvs's `pmd-stats-show` (OVS's lines and names, plus the design's) |
//! | `dpif-netdev/pmd-rxq-show` | (`show`'s ports and queues) | OVS's, with `pmd usage: NOT AVAIL` (rqvs does not measure it per queue) |
//! | `dpctl/dump-flows [-m] [--names] [DP]` | `dump-flows` | OVS's megaflow notation, one `flow-dump from pmd N:` header per PMD; with several bridges the ports as the one datapath numbers them ([`crate::bridges::Bridges::datapath_ports`]), by name with `-m`/`--names` |
//! | `dpctl/show [DP]` | — | OVS's: `lookups: hit: missed: lost:`, `flows:`, `port N: NAME (TYPE)` (one switch: its OpenFlow numbers) |
//! | `ofproto/trace BRIDGE FLOW` | `ofproto/trace FLOW` | OVS's layout under `bridge("BRIDGE")`; across patch ports the peer bridge nested ([`crate::patch::trace`]) |
//! | `fdb/show BRIDGE` | `fdb/show` | OVS's ` port  VLAN  MAC  Age` columns |
//! | `bridge/dump-flows BRIDGE` | — | OVS's: every flow, the hidden ones (in-band, fail-open) too |
//! | `coverage/show` | (the PMDs' totals) | OVS's heading, then `NAME total: N` (rqvs keeps no per-interval rates) |
//! | `vlog/set SPEC`, `vlog/list` | — | accepted and checked as OVS does; rqvs has one log level (everything is logged once) |
//! | `vlog/reopen` | `vlog/reopen` (and SIGHUP) | OVS's: the `--log-file` closed and opened again (after logrotate) |
//!
//! Each connection is served on its own thread, at most [`MAX_CONNECTIONS`] at once (more are
//! closed at once), each closed after 10 s without a request.
//!
//! A bridge argument must name the switch's bridge (`no bridge named X` otherwise, as OVS).
//! With several bridges (`rqvs switch --ovsdb`, [`UnixctlServer::serve_bridges`]) a command
//! naming a bridge runs on that bridge's switch, and the datapath's commands (`dpif-netdev/*`,
//! `dpctl/dump-flows`, `coverage/show`) show every bridge's loops on each PMD thread together
//! ([`execute_bridges`]). No
//! request can stop the server or the switch except `exit`: malformed JSON closes that
//! connection, a bad command gets an error reply.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rqvs_ovsdb::{Framer, Message};
use serde_json::{json, Value};

use crate::bridges::{merge_pmds, Bridges};
use crate::ctl::{self, Request};
use crate::{Control, Error};

/// `(name, usage, min args, max args)`, sorted by name as `list-commands` prints them.
const COMMANDS: &[(&str, &str, usize, usize)] = &[
    ("bridge/dump-flows", "[--offload-stats] bridge", 1, 2),
    ("coverage/show", "", 0, 0),
    ("dpctl/dump-flows", "[-m] [--names | --no-names] [dp]", 0, 3),
    ("dpctl/show", "[-s] [-m] [dp]", 0, 3),
    ("dpif-netdev/pmd-rxq-show", "[-pmd core] [dp]", 0, 3),
    ("dpif-netdev/pmd-stats-clear", "[-pmd core] [dp]", 0, 3),
    ("dpif-netdev/pmd-stats-show", "[-pmd core] [dp]", 0, 3),
    ("exit", "[--cleanup]", 0, 1),
    ("fdb/show", "bridge", 1, 1),
    ("list-commands", "", 0, 0),
    ("ofproto/trace", "bridge br_flow", 2, usize::MAX),
    ("version", "", 0, 0),
    ("vlog/list", "", 0, 0),
    ("vlog/reopen", "", 0, 0),
    ("vlog/set", "{spec | PATTERN:destination:pattern}", 0, usize::MAX),
];

/// The datapath name `dpctl/` and `dpif-netdev/` commands accept (OVS's userspace datapath's).
pub const DATAPATH_NAME: &str = "netdev@ovs-netdev";

/// The bound socket; the file is removed when this is dropped.
pub struct UnixctlServer {
    listener: UnixListener,
    path: PathBuf,
    bridge: String,
    /// Connections being served now (each on its own thread; at most [`MAX_CONNECTIONS`]).
    active: Arc<AtomicUsize>,
}

/// Connections served at once; one more is closed at once (`ovs-appctl` opens one per command).
pub const MAX_CONNECTIONS: usize = 32;

/// `RUNDIR/ovs-vswitchd.PID.ctl`, where `ovs-appctl -t ovs-vswitchd` looks (RUNDIR:
/// `OVS_RUNDIR`, else `/run/openvswitch`).
pub fn default_path(pid: u32) -> PathBuf {
    rundir().join(format!("ovs-vswitchd.{pid}.ctl"))
}

/// OVS's run directory: `OVS_RUNDIR`, else `/run/openvswitch`.
pub fn rundir() -> PathBuf {
    std::env::var_os("OVS_RUNDIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/run/openvswitch"))
}

impl UnixctlServer {
    /// Binds `path` for the bridge `bridge`. A socket some process still answers on is an
    /// error; a file nothing listens on (a switch that was killed) is replaced, as OVS does.
    pub fn bind(path: &Path, bridge: &str) -> Result<UnixctlServer, Error> {
        let e = |x: std::io::Error| Error(format!("unixctl socket {}: {x}", path.display()));
        if path.symlink_metadata().is_ok() {
            if UnixStream::connect(path).is_ok() {
                return Err(Error(format!("unixctl socket {}: a process is listening there", path.display())));
            }
            std::fs::remove_file(path).map_err(e)?;
        }
        let listener = UnixListener::bind(path).map_err(e)?;
        if let Err(x) = ctl::owner_only(path) {
            let _ = std::fs::remove_file(path);
            return Err(e(x));
        }
        listener.set_nonblocking(true).map_err(e)?;
        Ok(UnixctlServer {
            listener,
            path: path.to_path_buf(),
            bridge: bridge.to_string(),
            active: Arc::new(AtomicUsize::new(0)),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serves connections (a thread each) until the switch is asked to stop.
    pub fn serve(&self, control: &Arc<Control>) {
        let target = Target::One(Arc::clone(control), self.bridge.clone());
        self.serve_target(&target, &|| control.stop_requested());
    }

    /// Serves the bridges of one datapath ([`Bridges`]: `rqvs switch --ovsdb`) until
    /// [`Bridges::request_stop`].
    pub fn serve_bridges(&self, bridges: &Arc<Bridges>) {
        let target = Target::Many(Arc::clone(bridges));
        self.serve_target(&target, &|| bridges.stop_requested());
    }

    fn serve_target(&self, target: &Target, stopped: &dyn Fn() -> bool) {
        while !stopped() {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if self.active.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
                        self.active.fetch_sub(1, Ordering::AcqRel);
                        continue; // dropped: closed
                    }
                    let (t, n) = (target.clone(), Arc::clone(&self.active));
                    let spawned = std::thread::Builder::new().name("unixctl".into()).spawn(move || {
                        serve_one(stream, &t);
                        n.fetch_sub(1, Ordering::AcqRel);
                    });
                    if spawned.is_err() {
                        self.active.fetch_sub(1, Ordering::AcqRel);
                    }
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}

impl Drop for UnixctlServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One connection: requests until the client hangs up, sends garbage, or is silent for 10 s
/// (so [`MAX_CONNECTIONS`] idle clients hold the socket for 10 s at most).
/// What a connection's commands run against.
#[derive(Clone)]
enum Target {
    /// One bridge's switch (`rqvs switch --port ...`) and the bridge name it answers to.
    One(Arc<Control>, String),
    /// Every bridge of the datapath ([`Bridges`]).
    Many(Arc<Bridges>),
}

fn serve_one(mut stream: UnixStream, target: &Target) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(30)));
    let mut framer = Framer::new();
    let mut buf = [0u8; 16384];
    loop {
        let msg = match framer.next_message() {
            Ok(Some(m)) => m,
            Ok(None) => match stream.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    framer.push(&buf[..n]);
                    continue;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return,
            },
            Err(_) => return,
        };
        let (method, params, id) = match Message::from_json(msg) {
            Ok(Message::Request { method, params, id }) => (method, params, id),
            Ok(_) => continue,
            Err(_) => return,
        };
        let reply = match string_params(&method, &params) {
            Ok(args) => match match target {
                Target::One(control, bridge) => execute(&method, &args, control, bridge),
                Target::Many(bridges) => execute_bridges(&method, &args, bridges),
            } {
                Ok(text) => json!({"result": text, "error": null, "id": id}),
                Err(text) => json!({"result": null, "error": text, "id": id}),
            },
            Err(text) => json!({"result": null, "error": text, "id": id}),
        };
        if stream.write_all(reply.to_string().as_bytes()).is_err() {
            return;
        }
    }
}

fn string_params(method: &str, params: &Value) -> Result<Vec<String>, String> {
    let arr = params.as_array().map(Vec::as_slice).unwrap_or_default();
    arr.iter()
        .map(|p| p.as_str().map(str::to_string).ok_or_else(|| format!("\"{method}\" command has non-string argument")))
        .collect()
}

/// Runs one command (module docs): the reply's text, or its error.
/// The command's arguments checked against [`COMMANDS`], in OVS's words.
fn check_args(method: &str, args: &[String]) -> Result<(), String> {
    let Some(&(_, _, min, max)) = COMMANDS.iter().find(|c| c.0 == method) else {
        return Err(format!(
            "\"{method}\" is not a valid command (use \"list-commands\" to see a list of valid commands)"
        ));
    };
    if args.len() < min {
        return Err(format!("\"{method}\" command requires at least {min} arguments"));
    }
    if args.len() > max {
        return Err(format!("\"{method}\" command takes at most {max} arguments"));
    }
    Ok(())
}

pub fn execute(method: &str, args: &[String], control: &Control, bridge: &str) -> Result<String, String> {
    check_args(method, args)?;
    let via_ctl = |cmd: &str, args: Vec<String>| -> Result<String, String> {
        let r = ctl::execute(&Request { cmd: cmd.into(), args, ..Request::default() }, control);
        if r.ok {
            Ok(r.text)
        } else {
            Err(r.error)
        }
    };
    let check_bridge = |b: &str| if b == bridge { Ok(()) } else { Err(format!("no bridge named {b}")) };
    if let Some(r) = no_bridge(method, args) {
        return r;
    }
    match method {
        "exit" => {
            control.request_stop();
            Ok(String::new())
        }
        "dpif-netdev/pmd-stats-show"
        | "dpif-netdev/pmd-stats-clear"
        | "dpif-netdev/pmd-rxq-show"
        | "dpctl/dump-flows"
        | "dpctl/show" => {
            check_dp_args(method, args, control.pmd_cpus())?;
            match method {
                // One switch: its OpenFlow numbers are the datapath's.
                "dpctl/show" => {
                    let ports: Vec<crate::bridges::DpPort> = control
                        .port_list()
                        .into_iter()
                        .map(|(ofport, name, kind)| crate::bridges::DpPort {
                            bridge: bridge.to_string(),
                            name,
                            ofport,
                            odp: ofport,
                            kind,
                        })
                        .collect();
                    Ok(crate::bridges::dpctl_show(&ports, &control.pmd_stats()))
                }
                "dpif-netdev/pmd-stats-show" => via_ctl("pmd-stats-show", vec![]),
                "dpif-netdev/pmd-stats-clear" => via_ctl("pmd-stats-clear", vec![]),
                "dpctl/dump-flows" => via_ctl("dump-flows", vec![]),
                _ => Ok(rxq_show(control)),
            }
        }
        "fdb/show" => {
            check_bridge(&args[0])?;
            via_ctl("fdb/show", vec![])
        }
        "bridge/dump-flows" => {
            check_bridge(bridge_arg(args)?)?;
            Ok(dump_flows(control))
        }
        "ofproto/trace" => {
            check_bridge(&args[0])?;
            via_ctl("ofproto/trace", args[1..].to_vec()).map(|t| crate::patch::retitle(&t, &args[0]))
        }
        "coverage/show" => Ok(coverage(control)),
        "vlog/reopen" => via_ctl("vlog/reopen", vec![]).map(|_| String::new()),
        _ => unreachable!("every command of COMMANDS is matched"),
    }
}

/// `bridge/dump-flows`'s bridge: its last argument (`--offload-stats` before it accepted: no
/// flow of rqvs is offloaded).
fn bridge_arg(args: &[String]) -> Result<&str, String> {
    match args {
        [b] => Ok(b),
        [o, b] if o == "--offload-stats" => Ok(b),
        _ => Err("invalid arguments: bridge/dump-flows [--offload-stats] bridge".into()),
    }
}

/// OVS's `bridge/dump-flows`: every flow of the bridge, the hidden ones (in-band control's,
/// the fail-open rule) too — `[table_id=N, ]duration=Ns, n_packets=N, n_bytes=N,
/// priority=P,MATCH,actions=A` per line, each table's flows from the highest priority.
fn dump_flows(control: &Control) -> String {
    let mut flows = control.all_flow_stats();
    flows.sort_by_key(|f| (f.rule.table, std::cmp::Reverse(f.rule.priority), f.rule.id));
    let mut s = String::new();
    for f in &flows {
        let table = if f.rule.table == 0 { String::new() } else { format!("table_id={}, ", f.rule.table) };
        for line in crate::flow_line(&f.rule).lines() {
            s += &format!(
                "{table}duration={}s, n_packets={}, n_bytes={}, {line}\n",
                f.duration_ns / 1_000_000_000,
                f.counts.packets,
                f.counts.bytes
            );
        }
    }
    s
}

/// `[-m] [--names|--no-names] [-pmd CORE] [DP]`: the flags are accepted (rqvs's output is the
/// same either way), `-pmd N` must name a PMD's core, a datapath must be rqvs's.
/// The commands that need no bridge: their answer, or `None`.
fn no_bridge(method: &str, args: &[String]) -> Option<Result<String, String>> {
    Some(match method {
        "list-commands" => {
            let mut s = String::from("The available commands are:\n");
            for (name, usage, _, _) in COMMANDS {
                s += &format!("  {name:<23} {usage}\n");
            }
            Ok(s)
        }
        "version" => Ok(format!("rqvs switch (rqvs) {}\n", env!("CARGO_PKG_VERSION"))),
        "vlog/set" => args.iter().try_for_each(|a| vlog_spec(a)).map(|()| String::new()),
        "vlog/list" => Ok("                 console    syslog    file\n                 -------    ------    ------\nrqvs                INFO      INFO      INFO\n".into()),
        _ => return None,
    })
}

/// A command over every bridge of the datapath ([`Bridges`], `rqvs switch --ovsdb`): the
/// commands that name a bridge run on it (`no bridge named X` else); the datapath's
/// (`dpif-netdev/*`, `dpctl/dump-flows`, `coverage/show`) show every bridge's loops on each
/// PMD thread together, as OVS shows its one datapath.
pub fn execute_bridges(method: &str, args: &[String], bridges: &Bridges) -> Result<String, String> {
    check_args(method, args)?;
    let all = bridges.all();
    let bridge = |name: &str| bridges.get(name).ok_or_else(|| format!("no bridge named {name}"));
    match method {
        "exit" => {
            bridges.request_stop();
            Ok(String::new())
        }
        "fdb/show" => execute(method, args, &*bridge(&args[0])?, &args[0]),
        "bridge/dump-flows" => Ok(dump_flows(&*bridge(bridge_arg(args)?)?)),
        // Followed across patch ports into the peer bridges ([`crate::patch::trace`]).
        "ofproto/trace" => crate::patch::trace(bridges, &args[0], &args[1..].join(",")),
        "dpif-netdev/pmd-stats-show" => {
            check_dp_args(method, args, &bridges.cpus())?;
            let mut text = String::new();
            merge_pmds(all.iter().map(|(_, c)| c.pmd_stats()).collect()).iter().for_each(|p| p.format(&mut text));
            for (name, c) in &all {
                if let Some((upcalls, batches, busy_ns)) = c.handler_stats() {
                    let avg = if upcalls == 0 { 0.0 } else { busy_ns as f64 / upcalls as f64 };
                    text.push_str(&format!(
                        "handler thread of {name}:\n  upcalls handled: {upcalls} in {batches} batches\n  avg slow-path ns per upcall: {avg:.1}\n"
                    ));
                }
            }
            Ok(text)
        }
        "dpif-netdev/pmd-stats-clear" => {
            check_dp_args(method, args, &bridges.cpus())?;
            all.iter().for_each(|(_, c)| c.pmd_stats_clear());
            Ok(String::new())
        }
        "dpctl/show" => {
            check_dp_args(method, args, &bridges.cpus())?;
            let pmds: Vec<_> = all.iter().flat_map(|(_, c)| c.pmd_stats()).collect();
            Ok(crate::bridges::dpctl_show(&bridges.datapath_ports(), &pmds))
        }
        "dpctl/dump-flows" => {
            check_dp_args(method, args, &bridges.cpus())?;
            let mut by_pmd: std::collections::BTreeMap<usize, Vec<String>> = Default::default();
            for i in 0..bridges.cpus().len() {
                by_pmd.insert(i, Vec::new());
            }
            // Ports as the datapath numbers them (OVS's netdev datapath: one space over the
            // bridges), or by name with `-m`/`--names` (OVS's default: names when verbose).
            let names = args.iter().rev().find_map(|a| match a.as_str() {
                "--names" => Some(true),
                "--no-names" => Some(false),
                _ => None,
            });
            let names = names.unwrap_or_else(|| args.iter().any(|a| a == "-m" || a == "--more"));
            let ports = bridges.datapath_ports();
            for (bridge, c) in &all {
                let label = |p: u32| {
                    ports.iter().find(|d| &d.bridge == bridge && d.ofport == p).map(|d| {
                        if names {
                            d.name.clone()
                        } else {
                            d.odp.to_string()
                        }
                    })
                };
                let peer = |b: &str, p: u32| {
                    ports.iter().find(|d| d.bridge == b && d.ofport == p).map(|d| {
                        if names {
                            d.name.clone()
                        } else {
                            d.odp.to_string()
                        }
                    })
                };
                for (pmd, lines) in c.dump_flows() {
                    by_pmd
                        .entry(pmd)
                        .or_default()
                        .extend(lines.iter().map(|l| crate::bridges::relabel_flow_across(l, &label, &peer)));
                }
            }
            let mut text = String::new();
            for (pmd, lines) in by_pmd {
                text += &format!("flow-dump from pmd {pmd}:\n");
                lines.iter().for_each(|l| text += &format!("{l}\n"));
            }
            Ok(text)
        }
        "dpif-netdev/pmd-rxq-show" => {
            check_dp_args(method, args, &bridges.cpus())?;
            let mut s = String::new();
            for (i, cpu) in bridges.cpus().iter().enumerate() {
                let core = cpu.map_or(format!("unpinned (pmd {i})"), |c| c.to_string());
                s += &format!("pmd thread numa_id 0 core_id {core}:\n  isolated : false\n");
                for (_, c) in &all {
                    for name in c.port_names() {
                        s += &format!("  port: {name:<16}  queue-id: {i:>2} (enabled)   pmd usage: NOT AVAIL\n");
                    }
                }
            }
            Ok(s)
        }
        "coverage/show" => {
            let pmds: Vec<_> = all.iter().flat_map(|(_, c)| c.pmd_totals()).collect();
            Ok(coverage_of(&pmds))
        }
        "vlog/reopen" => match crate::diag::reopen_log_file() {
            Ok(Some(path)) => {
                crate::log_info!("rqvs switch: log file {} reopened", path.display());
                Ok(String::new())
            }
            Ok(None) => Err("Logging to file not configured".into()),
            Err(e) => Err(format!("reopening the log file: {e}")),
        },
        // The rest needs no bridge: any one's answer is the datapath's.
        _ => match all.first() {
            Some((name, c)) => execute(method, args, c, name),
            None => no_bridge(method, args).unwrap_or_else(|| Err(format!("\"{method}\": no bridge is configured"))),
        },
    }
}

fn check_dp_args(method: &str, args: &[String], cpus: &[Option<usize>]) -> Result<(), String> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-m" | "--more" | "--names" | "--no-names" | "-s" | "--statistics" => {}
            "-pmd" => {
                let core = it.next().ok_or_else(|| format!("{method}: -pmd needs a core id"))?;
                let n: usize = core.parse().map_err(|_| format!("{method}: invalid pmd core '{core}'"))?;
                if !cpus.contains(&Some(n)) {
                    return Err(format!(
                        "{method}: no pmd thread on core {n} (rqvs runs a PMD on a core only with --pmd-cpus)"
                    ));
                }
            }
            dp if dp == DATAPATH_NAME || dp == "ovs-netdev" => {}
            other => return Err(format!("{method}: datapath '{other}' not found (rqvs's is {DATAPATH_NAME})")),
        }
    }
    Ok(())
}

/// `dpif-netdev/pmd-rxq-show`: PMD i polls queue i of every port.
fn rxq_show(control: &Control) -> String {
    let mut s = String::new();
    for (i, cpu) in control.pmd_cpus().iter().enumerate() {
        let core = cpu.map_or(format!("unpinned (pmd {i})"), |c| c.to_string());
        s += &format!("pmd thread numa_id 0 core_id {core}:\n  isolated : false\n");
        for name in control.port_names() {
            s += &format!("  port: {name:<16}  queue-id: {i:>2} (enabled)   pmd usage: NOT AVAIL\n");
        }
    }
    s
}

/// `coverage/show` over the PMDs' totals since start.
fn coverage(control: &Control) -> String {
    coverage_of(&control.pmd_totals())
}

fn coverage_of(pmds: &[crate::stats::PmdReport]) -> String {
    let sum = |f: &dyn Fn(&crate::stats::PmdReport) -> u64| pmds.iter().map(f).sum::<u64>();
    let rows: [(&str, u64); 15] = [
        ("dpif_netdev_packets", sum(&|p| p.total.rx)),
        ("dpif_netdev_emc_hit", sum(&|p| p.datapath.emc_hits)),
        ("dpif_netdev_megaflow_hit", sum(&|p| p.datapath.megaflow_hits)),
        ("dpif_netdev_model_hit", sum(&|p| p.datapath.model_hits)),
        ("dpif_netdev_upcall", sum(&|p| p.datapath.miss_with_success_upcall)),
        ("dpif_netdev_lost", sum(&|p| p.datapath.lost)),
        ("dpif_netdev_flow_limit", sum(&|p| p.datapath.flow_limit_hits)),
        ("datapath_drop", sum(&|p| p.total.dropped)),
        ("datapath_malformed", sum(&|p| p.total.malformed)),
        ("ofproto_packet_in", sum(&|p| p.packet_ins)),
        // Packet-ins past a connection's `controller_queue_size` (OVS's counter of that name).
        ("rconn_overflow", crate::openflow::packet_in::overflows()),
        // The process's patch crossings ([`crate::crossing`]): loops dropped, crossings left to
        // the hop while the peer's table was committed to, crossings no loop took.
        ("xlate_patch_loop", rqvs_ofproto::crossing::loops()),
        ("xlate_patch_fallback", rqvs_ofproto::crossing::fallbacks()),
        ("patch_crossing_dropped", crate::crossing::dropped()),
        // Frames a loop of patch ports took past the bound in the datapath (hops, crossings).
        ("patch_loop_dropped", crate::crossing::loops()),
    ];
    let mut s = String::from("Event coverage, totals since start (rqvs keeps no per-interval rates):\n");
    let mut never = 0;
    for (name, n) in rows {
        if n == 0 {
            never += 1;
        } else {
            s += &format!("{name:<26} total: {n}\n");
        }
    }
    s += &format!("{never} events never hit\n");
    s
}

/// One `vlog/set` argument as OVS reads it: `MODULE[:DESTINATION[:LEVEL]]` words separated by
/// `:` or spaces, each a module (`ANY` or rqvs's `rqvs`), a destination (`console`, `syslog`,
/// `file`, `any`) or a level (`off`, `emer`, `err`, `warn`, `info`, `dbg`); `PATTERN:DEST:FMT`.
fn vlog_spec(spec: &str) -> Result<(), String> {
    const DESTS: &[&str] = &["console", "syslog", "file", "any"];
    const LEVELS: &[&str] = &["off", "emer", "err", "warn", "info", "dbg", "any"];
    if let Some(rest) = spec.strip_prefix("PATTERN:") {
        let (dest, _) =
            rest.split_once(':').ok_or_else(|| "Please supply a valid pattern and destination".to_string())?;
        if !DESTS.contains(&dest.to_ascii_lowercase().as_str()) {
            return Err(format!("unknown destination \"{dest}\""));
        }
        return Ok(());
    }
    for word in spec.split([':', ' ']).filter(|w| !w.is_empty()) {
        let w = word.to_ascii_lowercase();
        if !(DESTS.contains(&w.as_str())
            || LEVELS.contains(&w.as_str())
            || w == "rqvs"
            || w == "ofproto"
            || w == "dpif_netdev")
        {
            return Err(format!("no destination, level, or module \"{word}\""));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_is_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("rqvs-unixctl-mode-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.ctl");
        let server = UnixctlServer::bind(&path, "br0").unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        drop(server);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn commands_are_sorted_and_vlog_specs_checked() {
        let names: Vec<_> = COMMANDS.iter().map(|c| c.0).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        for ok in ["", "info", "console:dbg", "ANY:file:off", "rqvs:syslog:warn", "PATTERN:console:%m"] {
            assert_eq!(vlog_spec(ok), Ok(()), "{ok}");
        }
        assert_eq!(vlog_spec("nosuch:dbg"), Err("no destination, level, or module \"nosuch\"".into()));
        assert!(vlog_spec("PATTERN:nowhere:%m").is_err());
    }
}
