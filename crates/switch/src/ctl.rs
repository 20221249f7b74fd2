//! The management socket: a Unix stream socket (`--ctl PATH`) serving one request per
//! connection, and its client (`rqvs ctl`).
//!
//! A request is one line of JSON, `{"cmd": "...", "args": [...], "body": "...", "file": "..."}`
//! (`body`: the contents of a flow file the client read, `file` its name for error messages); the
//! reply is one JSON object, `{"ok": true, "text": "...", "json": ...}` or
//! `{"ok": false, "error": "..."}`, and the server closes the connection. Commands:
//!
//! | command | does |
//! |---|---|
//! | `pmd-stats-show` | each PMD's counters, OVS's `dpif-netdev/pmd-stats-show` layout |
//! | `pmd-stats-clear` | clears them (a baseline, as OVS) |
//! | `dump-flows` | megaflows per PMD, `ovs-appctl dpctl/dump-flows` notation |
//! | `dump-rules` | the OpenFlow table, `ovs-ofctl dump-flows` syntax |
//! | `dump-rules --stats` | the same, each flow after its duration, timeouts, `n_packets` and `n_bytes` |
//! | `ofproto/trace FLOW` | the slow path's rule, megaflow and actions for a packet |
//! | `show` | ports, queues, counters |
//! | `add-flows FILE` | adds the flows (ovs-ofctl syntax) as one commit |
//! | `del-flows FILE` / `del-flows --all` | removes flows (non-strict match) as one commit |
//! | `fdb/show` | the `NORMAL` action's learned addresses (`ovs-appctl fdb/show`) |
//! | `exit` | stops the switch |
//!
//! No request can stop the server or the switch except `exit`: malformed JSON, unknown
//! commands, bad flows and clients that hang up get an error reply (or none) and are forgotten.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rqvs_flow::formats::ofctl;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::{Control, Error};

/// One request (module docs).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Request {
    pub cmd: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub file: Option<String>,
}

/// One reply (module docs).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Reply {
    pub ok: bool,
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub json: Value,
    #[serde(default)]
    pub error: String,
}

impl Reply {
    fn ok(text: String, json: Value) -> Reply {
        Reply { ok: true, text, json, error: String::new() }
    }

    fn err(e: impl std::fmt::Display) -> Reply {
        Reply { ok: false, error: e.to_string(), ..Reply::default() }
    }
}

/// The largest request accepted (a flow file of a few million flows).
const MAX_REQUEST: u64 = 1 << 30;
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// The bound socket; the file is removed when this is dropped.
pub struct Listener {
    listener: UnixListener,
    path: PathBuf,
}

impl Listener {
    /// Binds `path`. A socket there that a process listens on is an error (another switch);
    /// one nobody listens on (left by a switch that was killed) is removed first, and said so;
    /// any other file is an error and left alone.
    pub fn bind(path: &Path) -> Result<Listener, Error> {
        let fail = |why: String| Error(format!("control socket {}: {why}", path.display()));
        if let Ok(meta) = path.symlink_metadata() {
            use std::os::unix::fs::FileTypeExt;
            if !meta.file_type().is_socket() {
                return Err(fail("the file exists and is not a socket (not removed)".into()));
            }
            match UnixStream::connect(path) {
                Ok(_) => return Err(fail("another rqvs switch is listening there".into())),
                Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {
                    std::fs::remove_file(path).map_err(|e| fail(format!("removing the stale socket: {e}")))?;
                    crate::log_warn!(
                        "rqvs switch: control socket {}: removed a stale socket (nothing listened there)",
                        path.display()
                    );
                }
                Err(e) => return Err(fail(format!("the socket exists and cannot be checked: {e}"))),
            }
        }
        let listener = UnixListener::bind(path).map_err(|e| fail(e.to_string()))?;
        // Owner only (0600): the socket changes flows and stops the switch. (Between bind and
        // this, the umask's mode — 0755 with the usual 022 — already refuses other users'
        // connects: connecting needs write permission.)
        if let Err(e) = owner_only(path) {
            let _ = std::fs::remove_file(path);
            return Err(fail(format!("making it owner-only (0600): {e}")));
        }
        listener.set_nonblocking(true).map_err(|e| fail(e.to_string()))?;
        Ok(Listener { listener, path: path.to_path_buf() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serves requests until the switch is asked to stop (polling every 20 ms).
    pub fn serve(&self, control: &Arc<Control>) {
        while !control.stop_requested() {
            match self.listener.accept() {
                Ok((stream, _)) => serve_one(stream, control),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve_one(stream: UnixStream, control: &Arc<Control>) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(IO_TIMEOUT));
    let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
    let mut line = String::new();
    let reply = match BufReader::new((&stream).take(MAX_REQUEST)).read_line(&mut line) {
        Ok(0) => return,
        Ok(_) => match serde_json::from_str::<Request>(&line) {
            Ok(req) => execute(&req, control),
            Err(e) => Reply::err(format!("bad request (expected one line of JSON): {e}")),
        },
        Err(e) => Reply::err(format!("reading the request: {e}")),
    };
    let mut out =
        serde_json::to_string(&reply).unwrap_or_else(|_| r#"{"ok":false,"error":"reply not serialisable"}"#.into());
    out.push('\n');
    let _ = (&stream).write_all(out.as_bytes());
}

/// Where the switch puts its management socket when none is named, and where `rqvs ctl` looks
/// for it: `$RQVS_RUN_DIR` if set, else `/run/rqvs`, else (not writable) `rqvs-run` in the
/// temporary directory.
pub fn run_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("RQVS_RUN_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let run = PathBuf::from("/run/rqvs");
    if std::fs::create_dir_all(&run).is_ok() && writable(&run) {
        return run;
    }
    std::env::temp_dir().join("rqvs-run")
}

fn writable(dir: &Path) -> bool {
    let probe = dir.join(format!(".probe-{}", std::process::id()));
    let ok = std::fs::File::create(&probe).is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
}

/// The default management socket of this process: `RUN_DIR/rqvs-switch.PID.ctl` (the directory
/// created if needed).
pub fn default_socket() -> Result<PathBuf, Error> {
    let dir = run_dir();
    std::fs::create_dir_all(&dir).map_err(|e| Error(format!("{}: {e}", dir.display())))?;
    Ok(dir.join(format!("rqvs-switch.{}.ctl", std::process::id())))
}

/// The management socket of the one running switch in [`run_dir`] (`rqvs ctl` without
/// `--socket`): sockets nobody listens on are skipped; none, or several, is an error that says
/// what to do.
pub fn find_switch() -> Result<PathBuf, Error> {
    let dir = run_dir();
    let mut live: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("rqvs-switch.") && n.ends_with(".ctl"))
                })
                .filter(|p| UnixStream::connect(p).is_ok())
                .collect()
        })
        .unwrap_or_default();
    live.sort();
    match live.len() {
        1 => Ok(live.remove(0)),
        0 => Err(Error(format!(
            "no running rqvs switch has a management socket in {} (start one, or give --socket PATH)",
            dir.display()
        ))),
        _ => Err(Error(format!(
            "{} rqvs switches are running ({}): choose one with --socket PATH",
            live.len(),
            live.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// The commands `rqvs ctl` sends and how many arguments each takes (`(min, max)`; `None`: any
/// number from min). `rqvs ctl` refuses others before connecting (a usage error).
pub const COMMANDS: &[(&str, usize, Option<usize>)] = &[
    ("pmd-stats-show", 0, Some(0)),
    ("pmd-stats-clear", 0, Some(0)),
    ("dump-flows", 0, Some(0)),
    ("dump-rules", 0, Some(1)),
    ("ofproto/trace", 1, None),
    ("show", 0, Some(0)),
    ("add-flows", 1, Some(1)),
    ("del-flows", 1, Some(1)),
    ("fdb/show", 0, Some(0)),
    ("vlog/set", 1, Some(1)),
    ("vlog/list", 0, Some(0)),
    ("vlog/reopen", 0, Some(0)),
    ("exit", 0, Some(0)),
];

/// Checks a command line for `rqvs ctl` against [`COMMANDS`] (and `dump-rules`' one option).
pub fn check_command(cmd: &str, args: &[String]) -> Result<(), String> {
    let Some(&(_, min, max)) = COMMANDS.iter().find(|(c, _, _)| *c == cmd) else {
        let names: Vec<&str> = COMMANDS.iter().map(|(c, _, _)| *c).collect();
        return Err(format!("unknown command '{cmd}' (the commands: {})", names.join(", ")));
    };
    if args.len() < min || max.is_some_and(|m| args.len() > m) {
        let want = match (min, max) {
            (a, Some(b)) if a == b => format!("{a}"),
            (a, Some(b)) => format!("{a} to {b}"),
            (a, None) => format!("at least {a}"),
        };
        return Err(format!("{cmd}: expected {want} argument(s), got {}: {}", args.len(), args.join(" ")));
    }
    if cmd == "dump-rules" && args.first().is_some_and(|a| a != "--stats") {
        return Err(format!("dump-rules: unknown argument '{}' (expected --stats)", args[0]));
    }
    Ok(())
}

/// Runs one request against the switch.
pub fn execute(req: &Request, control: &Control) -> Reply {
    let file = req.file.as_deref().unwrap_or("<request>");
    match req.cmd.as_str() {
        "pmd-stats-show" => {
            let stats = control.pmd_stats();
            let mut text = String::new();
            stats.iter().for_each(|p| p.format(&mut text));
            if let Some((upcalls, batches, busy_ns)) = control.handler_stats() {
                let avg = if upcalls == 0 { 0.0 } else { busy_ns as f64 / upcalls as f64 };
                text.push_str(&format!(
                    "handler thread:\n  upcalls handled: {upcalls} in {batches} batches\n  avg slow-path ns per upcall: {avg:.1}\n"
                ));
            }
            Reply::ok(text, json!(stats))
        }
        "pmd-stats-clear" => {
            control.pmd_stats_clear();
            Reply::ok(String::new(), Value::Null)
        }
        "dump-flows" => {
            let flows = control.dump_flows();
            let mut text = String::new();
            for (pmd, lines) in &flows {
                text += &format!("flow-dump from pmd {pmd}:\n");
                lines.iter().for_each(|l| text += &format!("{l}\n"));
            }
            let j: Vec<Value> = flows.iter().map(|(p, l)| json!({"pmd": p, "flows": l})).collect();
            Reply::ok(text, json!(j))
        }
        "dump-rules" if req.args.iter().any(|a| a == "--stats") => dump_rules_stats(control),
        "dump-rules" => {
            let flows = control.flows();
            let mut text = String::new();
            flows.iter().for_each(|l| text += &format!("{l}\n"));
            Reply::ok(text, json!(flows))
        }
        "ofproto/trace" => {
            // OVS's `ofproto/trace BRIDGE FLOW`: a first argument that is no flow is the bridge
            // (the switch is one; the unixctl socket checks the name against --bridge).
            let args = match req.args.as_slice() {
                [bridge, rest @ ..] if !rest.is_empty() && !bridge.contains('=') && !is_flow_word(bridge) => rest,
                all => all,
            };
            match args.first() {
                None => Reply::err("ofproto/trace: expected a flow, e.g. 'in_port=1,tcp,nw_src=10.0.0.1,tp_dst=80'"),
                Some(flow) => match control.trace(&args.join(",")) {
                    Ok(text) => {
                        let macs = control.mac_entries();
                        let text = crate::normal::annotate_trace(&text, |vlan, mac| {
                            macs.iter().find(|e| e.vlan == vlan && &e.mac == mac).map(|e| e.port)
                        });
                        Reply::ok(text.clone(), json!({"flow": flow, "trace": text}))
                    }
                    Err(e) => Reply::err(e),
                },
            }
        }
        "show" => {
            let r = control.show();
            Reply::ok(r.format(), json!(r))
        }
        "add-flows" => {
            let Some(body) = &req.body else { return Reply::err("add-flows: expected the flows (a file)") };
            match ofctl::parse_flows(file, body) {
                Err(e) => Reply::err(e),
                Ok(rules) => match control.add_flows(rules) {
                    Ok((added, replaced)) => Reply::ok(
                        format!("added {added} flows ({replaced} replaced)\n"),
                        json!({"added": added, "replaced": replaced}),
                    ),
                    Err(e) => Reply::err(e),
                },
            }
        }
        "del-flows" => {
            let all = req.args.iter().any(|a| a == "--all");
            let result = if all {
                control.del_flows(None)
            } else {
                let Some(body) = &req.body else { return Reply::err("del-flows: expected a file of flows, or --all") };
                match ofctl::parse_flows(file, &with_actions(body)) {
                    Err(e) => return Reply::err(e),
                    Ok(rules) => {
                        let ms: Vec<_> = rules.into_iter().map(|r| r.matches).collect();
                        control.del_flows(Some(&ms))
                    }
                }
            };
            match result {
                Ok(n) => Reply::ok(format!("deleted {n} flows\n"), json!({"deleted": n})),
                Err(e) => Reply::err(e),
            }
        }
        "fdb/show" => {
            let entries = control.mac_entries();
            let mac = |m: &[u8; 6]| m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
            // As `ovs-appctl fdb/show` lays it out.
            let mut text = String::from(" port  VLAN  MAC                Age\n");
            for e in &entries {
                let port = crate::ofports::ofport_name(e.port);
                text += &format!("{port:>5}  {:>4}  {}  {:>3}\n", e.vlan, mac(&e.mac), e.age_s);
            }
            let j: Vec<Value> = entries
                .iter()
                .map(|e| json!({"port": e.port, "vlan": e.vlan, "mac": mac(&e.mac), "age": e.age_s}))
                .collect();
            Reply::ok(text, json!(j))
        }
        "vlog/set" => match req.args.first().and_then(|l| crate::diag::Level::parse(l)) {
            Some(level) => {
                crate::diag::set_level(level);
                crate::log_info!("rqvs switch: log level {} (vlog/set)", level.name());
                Reply::ok(format!("log level {}\n", level.name()), json!({"level": level.name()}))
            }
            None => Reply::err("vlog/set: expected a level: error, warn, info or debug"),
        },
        "vlog/reopen" => match crate::diag::reopen_log_file() {
            Ok(Some(path)) => {
                crate::log_info!("rqvs switch: log file {} reopened", path.display());
                Reply::ok(format!("log file {} reopened\n", path.display()), json!({"log_file": path}))
            }
            // OVS's words when there is no log file.
            Ok(None) => Reply::err("Logging to file not configured"),
            Err(e) => Reply::err(format!("reopening the log file: {e}")),
        },
        "vlog/list" => {
            let level = crate::diag::level().name();
            Reply::ok(format!("log level {level}\n"), json!({"level": level}))
        }
        "exit" => {
            control.request_stop();
            Reply::ok("stopping\n".into(), Value::Null)
        }
        other => Reply::err(format!(
            "unknown command '{other}' (expected pmd-stats-show, pmd-stats-clear, dump-flows, dump-rules, ofproto/trace, show, add-flows, del-flows, fdb/show, vlog/set, vlog/list, vlog/reopen, exit)"
        )),
    }
}

/// `dump-rules --stats`: every flow with its statistics, as `ovs-ofctl dump-flows` prints them
/// (a rule with port ranges is several OpenFlow flows; its counts go with the first).
fn dump_rules_stats(control: &Control) -> Reply {
    let mut text = String::new();
    let mut j = Vec::new();
    for s in control.flow_stats(&crate::FlowFilter::all()) {
        let lines = ofctl::format_flows(&s.rule).unwrap_or_else(|e| vec![format!("# rule {}: {e}", s.rule.id)]);
        let d = s.duration_ns as f64 / 1e9;
        let timeouts = |m: &crate::FlowMeta| {
            let mut t = String::new();
            if m.idle_timeout != 0 {
                t += &format!("idle_timeout={}, ", m.idle_timeout);
            }
            if m.hard_timeout != 0 {
                t += &format!("hard_timeout={}, ", m.hard_timeout);
            }
            t
        };
        for (i, line) in lines.into_iter().enumerate() {
            let (p, b) = if i == 0 { (s.counts.packets, s.counts.bytes) } else { (0, 0) };
            text += &format!("duration={d:.3}s, n_packets={p}, n_bytes={b}, {}{line}\n", timeouts(&s.meta));
            j.push(json!({
                "flow": line,
                "duration_s": d,
                "n_packets": p,
                "n_bytes": b,
                "idle_timeout": s.meta.idle_timeout,
                "hard_timeout": s.meta.hard_timeout,
            }));
        }
    }
    Reply::ok(text, json!(j))
}

/// `del-flows` files hold matches without actions (as `ovs-ofctl del-flows`): each flow line
/// without `actions` gets `actions=drop` so the flow parser reads it (line numbers kept).
fn with_actions(body: &str) -> String {
    body.lines()
        .map(|l| {
            let t = l.split('#').next().unwrap_or("").trim();
            if t.is_empty() || t.contains("actions") {
                l.to_string()
            } else {
                format!("{t},actions=drop")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Sends one request and waits for the reply (the `rqvs ctl` client).
pub fn request(path: &Path, req: &Request) -> Result<Reply, Error> {
    let e = |what: &str, x: std::io::Error| Error(format!("control socket {}: {what}: {x}", path.display()));
    let mut s =
        UnixStream::connect(path).map_err(|x| e("connecting (is an rqvs switch running with --ctl here?)", x))?;
    s.set_read_timeout(Some(IO_TIMEOUT * 2)).map_err(|x| e("setting a timeout", x))?;
    let mut line = serde_json::to_string(req).map_err(|x| Error(format!("request: {x}")))?;
    line.push('\n');
    s.write_all(line.as_bytes()).map_err(|x| e("sending", x))?;
    let mut reply = String::new();
    BufReader::new(s).read_line(&mut reply).map_err(|x| e("reading the reply", x))?;
    if reply.is_empty() {
        return Err(Error(format!(
            "control socket {}: the switch closed the connection without a reply",
            path.display()
        )));
    }
    serde_json::from_str(&reply).map_err(|x| Error(format!("control socket {}: bad reply: {x}", path.display())))
}

/// A flow word without `=` (`tcp`, `ip`, ...): not a bridge name in `ofproto/trace`.
fn is_flow_word(w: &str) -> bool {
    matches!(
        w,
        "ip" | "ipv6" | "tcp" | "tcp6" | "udp" | "udp6" | "sctp" | "sctp6" | "icmp" | "icmp6" | "arp" | "rarp" | "eth"
    )
}

/// Makes a socket file owner-only (0600): every socket the switch binds for its managers (this
/// one, unixctl's, a bridge's `.mgmt` and `punix:` listeners) changes flows or stops the switch.
/// (Between bind and this, the umask's mode — 0755 with the usual 022 — already refuses other
/// users' connects: connecting needs write permission.)
pub(crate) fn owner_only(path: &Path) -> std::io::Result<()> {
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
}
