//! `rqvs switch --ovsdb ssl:IP:PORT` against a real `ovsdb-server --remote=pssl:PORT:127.0.0.1`
//! (issue 40, item 1: TLS for the OVSDB connection), with certificates made by `ovs-pki` and
//! the OpenFlow channel's options (`--private-key`, `--certificate`, `--ca-cert`):
//!
//! - `ovsdb_over_ssl_configures_the_bridge`: `ovs-vsctl` (over the server's unix socket) adds a
//!   netdev bridge and two ports on veths; `ovs-vsctl`'s wait for `cur_cfg` returns (the switch
//!   read the change over TLS and wrote `cur_cfg` back), the interfaces get their ofports and a
//!   ping crosses the switch.
//! - `ovsdb_over_ssl_with_the_wrong_ca_is_refused_and_retried`: the server's certificate is
//!   signed by a CA the switch was not given: nothing is configured (`cur_cfg` stays 0), the
//!   refusal is logged once (naming TLS), and the switch keeps trying (a relay in front of the
//!   server counts its connections).
//!
//! Needs root and namespaces (the first test's veths; unless `RQVS_REQUIRE_NETNS=1` it skips
//! without them) and Open vSwitch's tools (`ovsdb-server`, `ovsdb-tool`, `ovs-vsctl`, `ovs-pki`;
//! skipped without them unless `RQVS_REQUIRE_OVS=1`). Processes started here are killed by pid
//! when a test ends.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rqvs_ports::testnet::{self, Netns};
use rqvs_testkit::TempDir;

const RQVS: &str = env!("CARGO_BIN_EXE_rqvs");
const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

/// A child process: stderr collected, killed (by pid) when dropped.
use rqvs_testkit::proc::Logged as Proc;

fn have(tool: &str) -> bool {
    let ok = Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("RQVS_REQUIRE_OVS").as_deref() != Ok("1"),
            "{tool} is required (RQVS_REQUIRE_OVS=1): apt-get install openvswitch-switch openvswitch-common"
        );
        eprintln!("skipped: {tool} is not installed");
    }
    ok
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

use rqvs_testkit::pki::Creds;

/// `ovs-pki` in `dir/NAME`: (the switch's credentials, the database server's).
fn pki(dir: &TempDir, name: &str) -> (Creds, Creds) {
    rqvs_testkit::pki::pki(dir.path(), name, "db")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A private `ovsdb-server` on a fresh `Open_vSwitch` database, on `punix:DIR/db.sock` (for
/// `ovs-vsctl`, from any namespace) and `pssl:PORT:127.0.0.1` with `c`'s credentials — the
/// loopback of `ns` when given (the switch's namespace), else this one's.
struct Server {
    dir: PathBuf,
    port: u16,
    _proc: Proc,
}

impl Server {
    fn start(dir: &TempDir, c: &Creds, ns: Option<&Netns>) -> Server {
        let dir = dir.path().to_path_buf();
        let db = dir.join("conf.db");
        let out = Command::new("ovsdb-tool").arg("create").arg(&db).arg(SCHEMA).output().unwrap();
        assert!(out.status.success(), "ovsdb-tool create: {}", String::from_utf8_lossy(&out.stderr));
        let port = free_port();
        let mut cmd = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns.name(), "ovsdb-server"]);
                c
            }
            None => Command::new("ovsdb-server"),
        };
        cmd.arg(&db).arg(format!("--remote=punix:{}", dir.join("db.sock").display()));
        cmd.arg(format!("--remote=pssl:{port}:127.0.0.1"));
        cmd.arg(format!("--private-key={}", s(&c.key))).arg(format!("--certificate={}", s(&c.cert)));
        cmd.arg(format!("--ca-cert={}", s(&c.peer_ca)));
        cmd.arg(format!("--log-file={}", dir.join("ovsdb-server.log").display()));
        cmd.arg(format!("--unixctl={}", dir.join("ovsdb-server.ctl").display()));
        for var in ["OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR"] {
            cmd.env(var, &dir);
        }
        let mut proc = Proc::start(cmd);
        let t0 = Instant::now();
        let listening = || match ns {
            Some(ns) => ns.run(|| TcpStream::connect(("127.0.0.1", port)).is_ok()).unwrap(),
            None => TcpStream::connect(("127.0.0.1", port)).is_ok(),
        };
        while !listening() || !dir.join("db.sock").exists() {
            assert!(proc.alive(), "ovsdb-server ended: {}", proc.stderr());
            assert!(t0.elapsed() < Duration::from_secs(10), "ovsdb-server did not listen on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        let server = Server { dir, port, _proc: proc };
        server.vsctl(&["--no-wait", "init"]).unwrap();
        server
    }

    /// `ovs-vsctl` over the unix socket (waiting for `cur_cfg` unless told `--no-wait`).
    fn vsctl(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new("ovs-vsctl")
            .arg(format!("--db=unix:{}", self.dir.join("db.sock").display()))
            .arg("--timeout=20")
            .args(args)
            .env("OVS_RUNDIR", &self.dir)
            .output()
            .unwrap();
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }
}

/// A TCP relay from a port of its own to `to`, counting the connections it accepted.
fn relay(to: u16, stop: Arc<AtomicBool>) -> (u16, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let count = Arc::new(AtomicU64::new(0));
    let n = count.clone();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let Ok((a, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            n.fetch_add(1, Ordering::Relaxed);
            let Ok(b) = TcpStream::connect(("127.0.0.1", to)) else { continue };
            let _ = a.set_nonblocking(false);
            for (mut from, mut into) in [(a.try_clone().unwrap(), b.try_clone().unwrap()), (b, a)] {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut into);
                    let _ = into.shutdown(std::net::Shutdown::Both);
                    let _ = from.shutdown(std::net::Shutdown::Both);
                });
            }
        }
    });
    (port, count)
}

/// `rqvs switch --ovsdb ssl:127.0.0.1:PORT` with `c`'s credentials, in `ns` (or here).
fn switch(ns: Option<&Netns>, dir: &Path, c: &Creds, port: u16) -> Proc {
    let mut cmd = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns.name(), RQVS]);
            c
        }
        None => Command::new(RQVS),
    };
    cmd.args(["switch", "--ovsdb", &format!("ssl:127.0.0.1:{port}")]);
    cmd.args(["--private-key", s(&c.key), "--certificate", s(&c.cert), "--ca-cert", s(&c.peer_ca)]);
    cmd.args(["--unixctl", s(&dir.join("rqvs.ctl"))]).env("OVS_RUNDIR", dir);
    Proc::start(cmd)
}

fn ping(h: &Netns, to: &str) -> bool {
    let out = Command::new("ip")
        .args(["netns", "exec", h.name(), "ping", "-c", "2", "-i", "0.2", "-W", "1", to])
        .output()
        .unwrap();
    out.status.success()
}

#[test]
fn ovsdb_over_ssl_configures_the_bridge() {
    if !testnet::available("ovsdb_tls")
        || !["ovs-pki", "ovsdb-server", "ovsdb-tool", "ovs-vsctl"].iter().all(|t| have(t))
    {
        return;
    }
    let dir = TempDir::new("ovsdb-tls");
    let (sw_creds, db_creds) = pki(&dir, "pki-a");
    // The switch and the database server's TLS listener in a namespace of the test's.
    let sw = Netns::new("ovtls-sw").unwrap();
    sw.ip(&["link", "set", "lo", "up"]).unwrap();
    let server = Server::start(&dir, &db_creds, Some(&sw));
    let mut hosts = Vec::new();
    for (i, addr) in ["10.81.0.1", "10.81.0.2"].iter().enumerate() {
        let h = Netns::new(&format!("ovtls-h{}", i + 1)).unwrap();
        sw.veth(&format!("p{}", i + 1), &h, "e0", 1).unwrap();
        sw.wait_running(&format!("p{}", i + 1), Duration::from_secs(3)).unwrap();
        h.wait_running("e0", Duration::from_secs(3)).unwrap();
        h.ip(&["addr", "add", &format!("{addr}/24"), "dev", "e0"]).unwrap();
        hosts.push(h);
    }
    let mut rqvs = switch(Some(&sw), server.dir.as_path(), &sw_creds, server.port);

    // ovs-vsctl waits for cur_cfg: it returns only once the switch has applied the change it
    // read over TLS and written cur_cfg back.
    let add = server.vsctl(&["add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev"]);
    assert!(add.is_ok(), "add-br: {add:?}\n{}", rqvs.stderr());
    for p in ["p1", "p2"] {
        let r = server.vsctl(&["add-port", "br0", p]);
        assert!(r.is_ok(), "add-port {p}: {r:?}\n{}", rqvs.stderr());
    }
    let cur: u64 = server.vsctl(&["get", "open_vswitch", ".", "cur_cfg"]).unwrap().parse().unwrap();
    let next: u64 = server.vsctl(&["get", "open_vswitch", ".", "next_cfg"]).unwrap().parse().unwrap();
    assert!(cur >= 3 && cur == next, "cur_cfg {cur}, next_cfg {next}");
    for p in ["p1", "p2"] {
        let ofport: i64 = server.vsctl(&["get", "interface", p, "ofport"]).unwrap().parse().unwrap();
        assert!(ofport >= 1, "{p}: ofport {ofport}\n{}", rqvs.stderr());
    }
    assert!(ping(&hosts[0], "10.81.0.2"), "a ping through the bridge configured over ssl:\n{}", rqvs.stderr());
    assert!(rqvs.alive(), "{}", rqvs.stderr());
    let log = rqvs.stderr();
    assert!(!log.contains("TLS:"), "no TLS failure: {log}");
}

#[test]
fn ovsdb_over_ssl_with_the_wrong_ca_is_refused_and_retried() {
    if !["ovs-pki", "ovsdb-server", "ovsdb-tool", "ovs-vsctl"].iter().all(|t| have(t)) {
        return;
    }
    let dir = TempDir::new("ovsdb-tls-wrong");
    let (_, db_creds) = pki(&dir, "pki-a");
    let (other_sw, _) = pki(&dir, "pki-b");
    let server = Server::start(&dir, &db_creds, None);
    let stop = Arc::new(AtomicBool::new(false));
    let (port, tries) = relay(server.port, stop.clone());
    // The switch checks the server with pki-b's CA: the server's certificate (pki-a's) fails.
    let mut rqvs = switch(None, server.dir.as_path(), &other_sw, port);
    std::thread::sleep(Duration::from_secs(6));
    let log = rqvs.stderr();
    assert!(rqvs.alive(), "the switch keeps running: {log}");
    let refusals: Vec<&str> =
        log.lines().filter(|l| l.contains(&format!("ssl:127.0.0.1:{port}")) && l.contains("TLS")).collect();
    assert_eq!(refusals.len(), 1, "the refusal logged once: {log}");
    assert!(refusals[0].contains("certificate") && refusals[0].contains("reconnecting"), "{log}");
    let n = tries.load(Ordering::Relaxed);
    assert!(n >= 3, "the switch kept trying: {n} connections in 6 s\n{log}");
    assert_eq!(server.vsctl(&["get", "open_vswitch", ".", "cur_cfg"]).unwrap(), "0", "nothing configured");
    assert!(server.vsctl(&["get", "open_vswitch", ".", "datapath_types"]).unwrap() == "[]");
    stop.store(true, Ordering::Relaxed);
}
