//! Faults of issue 40's item 3 that the other fault tests do not cover, with the real binary on
//! veths between private namespaces (root; skipped otherwise, a failure with
//! `RQVS_REQUIRE_NETNS=1`):
//!
//! - `port_renamed_under_the_switch_goes_down_and_comes_back`: port 3's interface renamed
//!   (`ip link set p3 name ...`) while frames flow: the switch runs on, port 3 goes down with a
//!   PORT_STATUS (seen by an OpenFlow 1.3 connection of the test's), forwarding to port 2 goes on; the old name given
//!   back: port 3 is re-attached (as a deleted-and-recreated interface is), a PORT_STATUS says
//!   it is live and frames reach it again; at SIGTERM every frame is accounted for.
//! - `sigkill_and_restart_with_the_same_configuration`: `rqvs switch --controller` killed with
//!   SIGKILL, then started with the same arguments: it starts (the dead process's management
//!   socket and port locks taken over), `ovs-testcontroller` pushes its flows again and a ping
//!   passes again; the dead process's port lock files are swept by the next switch that starts.
//! - `sigkill_and_restart_with_ovsdb`: the same for `rqvs switch --ovsdb`: the bridge and ports
//!   are read again from `ovsdb-server`, a ping passes, `ovs-vsctl`'s wait for `cur_cfg` returns.
//!
//! Processes started here are stopped by pid when a test ends; the namespaces go with it.

mod common;
use common::{ctl, TempDir};

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rqvs_ports::testnet::{self, Netns, RawSocket};

const RQVS: &str = env!("CARGO_BIN_EXE_rqvs");

/// A child process whose stdout and stderr are collected; killed (by pid) when dropped.
struct Proc {
    child: Child,
    out: Arc<Mutex<String>>,
    err: Arc<Mutex<String>>,
}

fn collect(r: impl Read + Send + 'static, into: Arc<Mutex<String>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines() {
            let Ok(line) = line else { return };
            let mut s = into.lock().unwrap();
            s.push_str(&line);
            s.push('\n');
        }
    });
}

impl Proc {
    /// `prog ARGS` in namespace `ns` (`ip netns exec` execs it: the child's pid is the program's).
    fn start(ns: &Netns, prog: &str, args: &[&str], env: &[(&str, &Path)]) -> Proc {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns.name(), prog]).args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let (out, err) = (Arc::new(Mutex::new(String::new())), Arc::new(Mutex::new(String::new())));
        collect(child.stdout.take().unwrap(), out.clone());
        collect(child.stderr.take().unwrap(), err.clone());
        Proc { child, out, err }
    }

    fn stdout(&self) -> String {
        self.out.lock().unwrap().clone()
    }

    fn stderr(&self) -> String {
        self.err.lock().unwrap().clone()
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    fn wait_stderr(&mut self, text: &str, within: Duration) {
        let t0 = Instant::now();
        while !self.stderr().contains(text) {
            assert!(self.running(), "ended before saying {text:?}: {}", self.stderr());
            assert!(t0.elapsed() < within, "no {text:?} within {within:?}: {}", self.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal(&self, sig: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) has no memory effects; the pid is our child's, not yet reaped.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    }

    /// SIGKILL, as abrupt as a crash: nothing of the process's own cleanup runs.
    fn sigkill(&mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.child.wait();
    }

    /// SIGTERM and a clean end: exit 0 and "every frame accounted for"; (stdout, stderr).
    fn stop_cleanly(&mut self, what: &str) -> (String, String) {
        self.signal(libc::SIGTERM);
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(t0.elapsed() < Duration::from_secs(15), "{what}: did not stop: {}", self.stderr());
            std::thread::sleep(Duration::from_millis(20));
        };
        std::thread::sleep(Duration::from_millis(200));
        let (out, err) = (self.stdout(), self.stderr());
        assert!(status.success(), "{what}: exit {status}\n{out}\n{err}");
        assert!(out.contains("every frame accounted for"), "{what}: {out}");
        assert!(!err.contains("panicked"), "{what}: {err}");
        (out, err)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The switch's namespace with `p1..pN`, each the peer of `e0` in host namespace `hN`, whose
/// address is `10.NET.0.N/24`.
fn topo(tag: &str, ports: usize, net: u8) -> (Netns, Vec<Netns>) {
    let sw = Netns::new(&format!("{tag}-sw")).unwrap();
    sw.ip(&["link", "set", "lo", "up"]).unwrap();
    let hosts = (1..=ports)
        .map(|i| {
            let h = Netns::new(&format!("{tag}-h{i}")).unwrap();
            sw.veth(&format!("p{i}"), &h, "e0", 1).unwrap();
            sw.wait_running(&format!("p{i}"), Duration::from_secs(3)).unwrap();
            h.wait_running("e0", Duration::from_secs(3)).unwrap();
            h.ip(&["addr", "add", &format!("10.{net}.0.{i}/24"), "dev", "e0"]).unwrap();
            h
        })
        .collect();
    (sw, hosts)
}

fn ping(h: &Netns, to: &str) -> bool {
    let out = Command::new("ip")
        .args(["netns", "exec", h.name(), "ping", "-c", "2", "-i", "0.2", "-W", "1", to])
        .output()
        .unwrap();
    out.status.success()
}

/// Polls `f` until it holds (`within` at most).
fn eventually(what: &str, within: Duration, f: impl FnMut() -> bool) {
    eventually_or(what, within, f, String::new);
}

/// [`eventually`], with `context` in the failure message.
fn eventually_or(what: &str, within: Duration, mut f: impl FnMut() -> bool, context: impl Fn() -> String) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < within, "{what}: not within {within:?}\n{}", context());
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn have(tool: &str) -> bool {
    let ok = Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("RQVS_REQUIRE_OVS").as_deref() != Ok("1"),
            "{tool} is required (RQVS_REQUIRE_OVS=1): apt-get install openvswitch-switch openvswitch-testcontroller"
        );
        eprintln!("skipped: {tool} is not installed");
    }
    ok
}

/// A UDP frame from e1's side (broadcast destination: it needs no learning), `n` in its payload.
fn frame(n: u32) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 1, 0x08, 0x00]);
    let mut ip = vec![0x45, 0, 0, 32, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 99, 0, 1, 10, 99, 0, 2];
    let s: u32 = ip.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum();
    let folded = !(((s & 0xffff) + (s >> 16)) as u16);
    ip[10..12].copy_from_slice(&folded.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0x30, 0x39, 0x00, 0x35, 0, 12, 0, 0]);
    f.extend_from_slice(&n.to_be_bytes());
    f.resize(60, 0);
    f
}

/// Frames sent on host 1's `e0` (~3,000 a second) and counted as they arrive on hosts 2 and 3.
struct Traffic {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    got: Vec<Arc<AtomicU64>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Traffic {
    fn start(hosts: &[Netns]) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let mut got = Vec::new();
        for h in &hosts[1..] {
            let s = h.run(|| RawSocket::open("e0")).unwrap().unwrap();
            let (stop, n) = (stop.clone(), Arc::new(AtomicU64::new(0)));
            got.push(n.clone());
            threads.push(std::thread::spawn(move || loop {
                match s.recv(Duration::from_millis(20)) {
                    Ok(Some(f)) if f.len() == 60 && f[6..12] == [0x02, 0, 0, 0, 0, 1] => {
                        n.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(None) if stop.load(Ordering::Relaxed) => return,
                    Ok(_) => {}
                    Err(_) => return,
                }
            }));
        }
        let s = hosts[0].run(|| RawSocket::open("e0")).unwrap().unwrap();
        let sent = Arc::new(AtomicU64::new(0));
        let (stop2, sent2) = (stop.clone(), sent.clone());
        threads.push(std::thread::spawn(move || {
            let mut n = 0;
            while !stop2.load(Ordering::Relaxed) {
                for _ in 0..3 {
                    s.send(&frame(n)).unwrap();
                    n += 1;
                    sent2.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }));
        Traffic { stop, sent, got, threads }
    }

    /// Frames that reached host `h` (2 or 3) so far.
    fn got(&self, h: usize) -> u64 {
        self.got[h - 2].load(Ordering::Relaxed)
    }

    /// Waits until `n` more frames reach host `h`; false after 5 s.
    fn more(&self, h: usize, n: u64) -> bool {
        let (from, t0) = (self.got(h), Instant::now());
        while self.got(h) < from + n {
            if t0.elapsed() > Duration::from_secs(5) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }

    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            t.join().unwrap();
        }
        self.sent.load(Ordering::Relaxed)
    }
}

/// An OpenFlow 1.3 connection to the switch that records every PORT_STATUS it receives as
/// (port, state) — `state & 1` OFPPS_LINK_DOWN, `state & 4` OFPPS_LIVE — and answers echoes.
struct PortStatusWatch {
    seen: Arc<Mutex<Vec<(u32, u32)>>>,
}

impl PortStatusWatch {
    fn connect(ns: &Netns, port: u16) -> PortStatusWatch {
        let mut s = ns.run(|| std::net::TcpStream::connect(("127.0.0.1", port))).unwrap().unwrap();
        // HELLO, then SET_CONFIG with a miss_send_len: a passive connection takes asynchronous
        // messages once it asked (as OVS's service connections, e.g. `ovs-ofctl monitor SW 65535`).
        std::io::Write::write_all(&mut s, &[4, 0, 0, 8, 0, 0, 0, 1]).unwrap();
        std::io::Write::write_all(&mut s, &[4, 9, 0, 12, 0, 0, 0, 2, 0, 0, 0xff, 0xff]).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                let n = match s.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                buf.extend_from_slice(&chunk[..n]);
                while buf.len() >= 8 {
                    let len = usize::from(u16::from_be_bytes([buf[2], buf[3]])).max(8);
                    if buf.len() < len {
                        break;
                    }
                    let mut m: Vec<u8> = buf.drain(..len).collect();
                    match m[1] {
                        // ECHO_REQUEST: the reply with the same xid and data.
                        2 => {
                            m[1] = 3;
                            let _ = std::io::Write::write_all(&mut s, &m);
                        }
                        // PORT_STATUS: header, reason, pad[7], ofp_port (port_no, pad, hw_addr,
                        // pad, name[16], config, state, ...).
                        12 if m.len() >= 56 => {
                            let word = |at: usize| u32::from_be_bytes(m[at..at + 4].try_into().unwrap());
                            into.lock().unwrap().push((word(16), word(52)));
                        }
                        _ => {}
                    }
                }
            }
        });
        PortStatusWatch { seen }
    }

    /// The states PORT_STATUS reported for port `no`, in order.
    fn states(&self, no: u32) -> Vec<u32> {
        self.seen.lock().unwrap().iter().filter(|(p, _)| *p == no).map(|(_, s)| *s).collect()
    }
}

#[test]
fn port_renamed_under_the_switch_goes_down_and_comes_back() {
    if !testnet::available("port_renamed_under_the_switch") {
        return;
    }
    let dir = TempDir::new("cli-renamed");
    let (sw, hosts) = topo("ren", 3, 98);
    let (json, sock) = (dir.join("out.json"), dir.join("ctl.sock"));
    let flows = dir.join("flows.txt");
    std::fs::write(&flows, "in_port=1,actions=output:2,output:3\n").unwrap();
    let mut args = vec!["switch", "--rules", flows.to_str().unwrap(), "--json", json.to_str().unwrap()];
    args.extend(["--ctl", sock.to_str().unwrap(), "--openflow", "ptcp:6653"]);
    args.extend(["--port", "p1:afpacket", "--port", "p2:afpacket", "--port", "p3:afpacket"]);
    let mut rqvs = Proc::start(&sw, RQVS, &args, &[]);
    rqvs.wait_stderr("rqvs switch: ready", Duration::from_secs(20));
    let watch = PortStatusWatch::connect(&sw, 6653);
    std::thread::sleep(Duration::from_millis(300));
    let traffic = Traffic::start(&hosts);
    assert!(traffic.more(2, 300) && traffic.more(3, 300), "frames reach ports 2 and 3: {}", rqvs.stderr());

    // Renamed (the kernel renames only a down interface).
    sw.ip(&["link", "set", "p3", "down"]).unwrap();
    sw.ip(&["link", "set", "p3", "name", "renamed3"]).unwrap();
    let (sw_err, seen) = (rqvs.err.clone(), watch.seen.clone());
    let context = move || format!("PORT_STATUS seen {:?}\nrqvs:\n{}", seen.lock().unwrap(), sw_err.lock().unwrap());
    eventually_or(
        "port 3 reported down",
        Duration::from_secs(5),
        || watch.states(3).iter().any(|s| s & 1 != 0 && s & 4 == 0),
        &context,
    );
    eventually("the switch says port 3's interface is gone", Duration::from_secs(5), || {
        rqvs.stderr().lines().any(|l| l.contains("p3") && l.contains("gone"))
    });
    let shown: serde_json::Value = serde_json::from_str(&ctl(&sock, &["--json", "show"])).unwrap();
    assert_eq!(shown["ports"][2]["link"], "gone", "{shown}");
    assert!(traffic.more(2, 1000), "forwarding to port 2 goes on: {}", rqvs.stderr());
    assert!(rqvs.running(), "{}", rqvs.stderr());
    let at_rename = traffic.got(3);
    std::thread::sleep(Duration::from_millis(500));
    assert!(traffic.got(3) <= at_rename + 5, "nothing to the renamed interface's host");

    // The name given back (and up): re-attached as a re-created interface is.
    sw.ip(&["link", "set", "renamed3", "name", "p3"]).unwrap();
    sw.ip(&["link", "set", "p3", "up"]).unwrap();
    sw.wait_running("p3", Duration::from_secs(3)).unwrap();
    eventually("port 3 re-attached", Duration::from_secs(5), || rqvs.stderr().contains("re-attached"));
    eventually_or(
        "port 3 reported live",
        Duration::from_secs(5),
        || watch.states(3).last().is_some_and(|s| s & 4 != 0 && s & 1 == 0),
        &context,
    );
    assert!(traffic.more(3, 500), "frames reach port 3 again: {}", rqvs.stderr());
    let sent = traffic.stop();
    let (out, err) = rqvs.stop_cleanly("renamed");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["ports"][0]["rx_packets"].as_u64().unwrap(), sent, "every frame sent was received:\n{out}");
    assert_eq!(v["ports"][2]["link"], "up", "{out}");
    assert!(v["ports"][2]["tx_dropped"].as_u64().unwrap() > 0, "copies to the gone port counted dropped:\n{out}");
    let p3: Vec<&str> = err.lines().filter(|l| l.contains("rqvs switch: port p3:")).collect();
    assert!(p3.iter().filter(|l| l.contains("gone")).count() == 1, "the loss logged once: {err}");
    eprintln!("{out}\nport 3's PORT_STATUS states: {:?}", watch.states(3));
}

/// The port lock files (`/run/rqvs/port-*.lock`) that name `pid` as their owner.
fn locks_of(pid: u32) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/run/rqvs") else { return Vec::new() };
    entries
        .flatten()
        .filter(|e| std::fs::read_to_string(e.path()).is_ok_and(|s| s.trim() == pid.to_string()))
        .map(|e| e.path().display().to_string())
        .collect()
}

#[test]
fn sigkill_and_restart_with_the_same_configuration() {
    if !testnet::available("sigkill_and_restart") || !have("ovs-testcontroller") {
        return;
    }
    let dir = TempDir::new("cli-sigkill");
    let (sw, hosts) = topo("kill", 2, 97);
    let sock = dir.join("ctl.sock");
    let ctl_log = dir.join("testcontroller.log");
    let ctl_unixctl = dir.join("testcontroller.ctl");
    let _controller = Proc::start(
        &sw,
        "ovs-testcontroller",
        &[
            "ptcp:16633:127.0.0.1",
            &format!("--log-file={}", ctl_log.display()),
            &format!("--unixctl={}", ctl_unixctl.display()),
            "-vconsole:off",
        ],
        &[],
    );
    let args = [
        "switch",
        "--ctl",
        sock.to_str().unwrap(),
        "--controller",
        "tcp:127.0.0.1:16633",
        // Nothing in the table but what the controller pushes.
        "--fail-mode",
        "secure",
        "--port",
        "p1:afpacket",
        "--port",
        "p2:afpacket",
    ];
    let has_controller_flow = || ctl(&sock, &["dump-rules"]).to_lowercase().contains("actions=controller");
    let mut first = Proc::start(&sw, RQVS, &args, &[]);
    first.wait_stderr("rqvs switch: ready", Duration::from_secs(20));
    eventually("the controller's flow", Duration::from_secs(15), has_controller_flow);
    assert!(ping(&hosts[0], "10.97.0.2"), "a ping through the controller's switch: {}", first.stderr());
    let pid = first.child.id();
    first.sigkill();
    let stale = locks_of(pid);
    assert_eq!(stale.len(), 2, "kill -9 leaves the port lock files: {stale:?}");
    assert!(sock.exists(), "kill -9 leaves the management socket");

    // The same command again.
    let mut second = Proc::start(&sw, RQVS, &args, &[]);
    second.wait_stderr("rqvs switch: ready", Duration::from_secs(20));
    eventually("the controller's flow pushed again", Duration::from_secs(15), has_controller_flow);
    assert!(ping(&hosts[0], "10.97.0.2"), "a ping after the restart: {}", second.stderr());
    assert!(locks_of(pid).is_empty(), "the dead switch's lock files are taken over: {:?}", locks_of(pid));
    let pid2 = second.child.id();
    second.sigkill();
    assert_eq!(locks_of(pid2).len(), 2);

    // A switch that starts elsewhere (another namespace, another port) sweeps them: their
    // owner is dead and their namespace's switch is not coming back.
    let (other, _other_hosts) = topo("kill2", 1, 96);
    let mut third = Proc::start(&other, RQVS, &["switch", "--port", "p1:afpacket", "--duration", "1"], &[]);
    third.wait_stderr("rqvs switch: ready", Duration::from_secs(20));
    assert!(locks_of(pid2).is_empty(), "a dead owner's lock files are swept: {:?}", locks_of(pid2));
    let _ = third.stop_cleanly("third");
}

#[test]
fn sigkill_and_restart_with_ovsdb() {
    if !testnet::available("sigkill_and_restart_with_ovsdb") {
        return;
    }
    let Some(db) = rqvs_testkit::ovsdb_server::start_or_skip("sigkill") else { return };
    db.vsctl(&["--no-wait", "init"]).unwrap();
    let (sw, hosts) = topo("kdb", 2, 95);
    let rundir = db.dir.path().to_path_buf();
    let unixctl = rundir.join("rqvs.ctl");
    let remote = db.remote();
    let args = ["switch", "--ovsdb", &remote, "--unixctl", unixctl.to_str().unwrap()];
    let env = [("OVS_RUNDIR", rundir.as_path())];
    let mut first = Proc::start(&sw, RQVS, &args, &env);
    eventually("the switch writes datapath_types", Duration::from_secs(15), || {
        db.vsctl(&["get", "open_vswitch", ".", "datapath_types"]).is_ok_and(|s| s.contains("netdev"))
    });
    db.vsctl(&["add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev"]).unwrap();
    db.vsctl(&["add-port", "br0", "p1", "--", "add-port", "br0", "p2"]).unwrap();
    assert!(ping(&hosts[0], "10.95.0.2"), "a ping through the bridge: {}", first.stderr());
    first.sigkill();

    let mut second = Proc::start(&sw, RQVS, &args, &env);
    // Configured again from the database: the ping passes, and ovs-vsctl's wait for cur_cfg
    // (answered by the new process) returns.
    eventually("a ping after the restart", Duration::from_secs(15), || ping(&hosts[0], "10.95.0.2"));
    let r = db.vsctl(&["set", "bridge", "br0", "other-config:restarted=yes"]);
    assert!(r.is_ok(), "{r:?}: {}", second.stderr());
    for p in ["p1", "p2"] {
        let ofport: i64 = db.vsctl(&["get", "interface", p, "ofport"]).unwrap().trim().parse().unwrap();
        assert!(ofport >= 1, "{p}: {ofport}");
    }
    assert!(second.running(), "{}", second.stderr());
    let _ = Command::new("ovs-appctl").args(["-t", unixctl.to_str().unwrap(), "exit"]).output();
    let t0 = Instant::now();
    while second.running() {
        assert!(t0.elapsed() < Duration::from_secs(10), "did not exit: {}", second.stderr());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(second.stdout().contains("every frame accounted for"), "{}", second.stdout());
}
