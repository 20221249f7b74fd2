//! The soak (issue 40; `scripts/soak.sh`, docs/soak.md — not in CI: `#[ignore]`). For one
//! design (`RQVS_SOAK_DESIGN`, default `orig`) and `RQVS_SOAK_MINUTES` minutes (default 30),
//! `rqvs switch` runs on veths between private namespaces (the churn test's topology, plus a
//! fourth port that carries no traffic) while:
//!
//! - frames flow in on port 1 continuously (the churn test's 64 flows, [`churn::BURST`] frames
//!   every 10 ms: 1,600 a second), captured on every host;
//! - `ovs-ofctl` changes the flows over OpenFlow without pause (a flow on a match no frame has,
//!   re-added with one of 1,000 action lists in turn and deleted every tenth time), and at a third
//!   of the run adds the churn test's CHANGE flows (which move traffic), at two thirds deletes them;
//! - a controller (a minimal one in this test: HELLO, echo replies) is connected with
//!   `--controller tcp:` and drops the connection every minute; the switch reconnects;
//! - port 4 flaps (down for 2 s every 20 s).
//!
//! At the end: the churn test's check with ring losses accounted ([`churn::check_accounted`])
//! on every frame sent — each frame that arrived left exactly the ports, with exactly the bytes,
//! that the reference's winner under one visible rule set says (0 mismatches); frames the
//! kernel dropped from port 1's receive ring are accepted only as counted (`rx_packets +
//! rx_lost = sent`; the frames that left no copy where one was due are at most `rx_lost`) and
//! reported; the switch accounts for every frame (every port: received = forwarded + dropped +
//! lost, "every frame accounted for", exit 0). The switch's RSS and its descriptors that can
//! leak (open descriptors minus its established TCP connections: OpenFlow clients, the
//! controller, metrics scrapes), sampled every 5 s: RSS's level (the median of the samples) in
//! the last quarter of the run must be less than 5% above its level in the second quarter (the
//! first is the warm-up; the highest sample is printed too), and once the churn and the
//! flapping stop the descriptors that can leak must come back (within 10 s) to their fewest
//! after the warm-up.

#[path = "../../switch/tests/churn/mod.rs"]
mod churn;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rqvs_ports::testnet::{self, Netns};
use rqvs_testkit::TempDir;

const RQVS: &str = env!("CARGO_BIN_EXE_rqvs");
const CONTROLLER_PORT: u16 = 16653;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// `ovs-ofctl -O OpenFlow13 ARGS` against the switch's listener, in its namespace.
fn ofctl(ns: &str, args: &[&str]) -> bool {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, "ovs-ofctl", "-O", "OpenFlow13", "--timeout=10"]);
    let (cmd, rest) = args.split_first().unwrap();
    c.args([cmd, "tcp:127.0.0.1:6653"]).args(rest).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    c.status().is_ok_and(|s| s.success())
}

/// A controller that says HELLO, answers echoes and hangs up every `every`: connections made.
fn controller(listener: TcpListener, every: Duration, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        listener.set_nonblocking(true).unwrap();
        let mut connections = 0;
        while !stop.load(Ordering::Relaxed) {
            let Ok((mut s, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            connections += 1;
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
            let _ = s.write_all(&[4, 0, 0, 8, 0, 0, 0, 1]);
            let t0 = Instant::now();
            let mut buf = Vec::new();
            while t0.elapsed() < every && !stop.load(Ordering::Relaxed) {
                let mut chunk = [0u8; 4096];
                match s.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    Err(_) => continue,
                }
                while buf.len() >= 8 {
                    let len = usize::from(u16::from_be_bytes([buf[2], buf[3]])).max(8);
                    if buf.len() < len {
                        break;
                    }
                    let mut m: Vec<u8> = buf.drain(..len).collect();
                    if m[1] == 2 {
                        m[1] = 3; // ECHO_REQUEST → ECHO_REPLY, same xid and data
                        let _ = s.write_all(&m);
                    }
                }
            }
        }
        connections
    })
}

fn proc_status(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// What the process's descriptors are (for a failure message): `fd -> target (TCP state)`.
fn fd_targets(pid: u32) -> String {
    let mut states = std::collections::HashMap::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() > 9 {
                states.insert(format!("socket:[{}]", cols[9]), cols[3].to_string());
            }
        }
    }
    let mut out = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/fd")).into_iter().flatten().flatten() {
        let target = std::fs::read_link(e.path()).map(|t| t.to_string_lossy().into_owned()).unwrap_or_default();
        let st = states.get(&target).map_or(String::new(), |s| format!(" (tcp state {s})"));
        out.push(format!("{} -> {target}{st}", e.file_name().to_string_lossy()));
    }
    out.join("\n")
}

/// The process's descriptors that can leak — all of them minus its established TCP connections
/// (OpenFlow clients such as `ovs-ofctl`, the controller, a metrics scrape: they come and go with
/// their peers) — and all of them.
fn fds(pid: u32) -> Option<(u64, u64)> {
    // Socket inodes of established TCP connections in the process's network namespace.
    let mut established = std::collections::HashSet::new();
    for table in ["tcp", "tcp6"] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else { continue };
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            // sl local remote st ... inode (the 10th column); st 01 = ESTABLISHED.
            if cols.len() > 9 && cols[3] == "01" {
                established.insert(format!("socket:[{}]", cols[9]));
            }
        }
    }
    let (mut all, mut leakable) = (0, 0);
    for e in std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.flatten() {
        all += 1;
        let target = std::fs::read_link(e.path()).map(|t| t.to_string_lossy().into_owned()).unwrap_or_default();
        if !established.contains(&target) {
            leakable += 1;
        }
    }
    Some((leakable, all))
}

fn collect(r: impl Read + Send + 'static, into: Arc<Mutex<String>>) {
    std::thread::spawn(move || {
        let mut r = std::io::BufReader::new(r);
        let mut line = String::new();
        while std::io::BufRead::read_line(&mut r, &mut line).is_ok_and(|n| n > 0) {
            into.lock().unwrap().push_str(&line);
            line.clear();
        }
    });
}

/// The switch process, killed (by pid) if the test ends before stopping it.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
#[ignore = "the soak: scripts/soak.sh"]
fn soak() {
    if !testnet::available("soak") || !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let design: String = env_or("RQVS_SOAK_DESIGN", "orig".to_string());
    let minutes: f64 = env_or("RQVS_SOAK_MINUTES", 30.0);
    let run = Duration::from_secs_f64(minutes * 60.0);
    let what = format!("soak {design} {minutes} min");
    let dir = TempDir::new(&format!("soak-{design}"));
    let file = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    // ovs-ofctl deletes from a file with add-flows and `delete MATCH` lines.
    let deletes: String = churn::DELETE.lines().map(|l| format!("delete {l}\n")).collect();
    let (base, change, delete) =
        (file("base.txt", churn::BASE), file("change.txt", churn::CHANGE), file("delete.txt", &deletes));
    let (sock, json_path) = (dir.join("ctl.sock"), dir.join("out.json"));
    let topo = churn::Topo::new(&format!("sk{}", &design[..2]), 1);
    // Port 4: no traffic, flapping.
    let h4 = Netns::new(&format!("sk{}-h4", &design[..2])).unwrap();
    topo.sw.veth("p4", &h4, "e4", 1).unwrap();
    topo.sw.wait_running("p4", Duration::from_secs(3)).unwrap();
    topo.sw.ip(&["link", "set", "lo", "up"]).unwrap();
    // `stop` ends the churn and the flapping; `stop_ctrl` the controller, after the last sample.
    let (stop, stop_ctrl) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let listener = topo.sw.run(|| TcpListener::bind(("127.0.0.1", CONTROLLER_PORT))).unwrap().unwrap();
    let ctrl = controller(listener, Duration::from_secs(60), stop_ctrl.clone());

    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", topo.sw.name(), RQVS, "switch", "--design", &design]);
    cmd.args(["--rules", base.to_str().unwrap(), "--emc-prob", "0.2", "--ctl", sock.to_str().unwrap()]);
    cmd.args(["--json", json_path.to_str().unwrap(), "--openflow", "ptcp:6653"]);
    cmd.args(["--metrics", &format!("127.0.0.1:{METRICS_PORT}")]);
    cmd.args(["--controller", &format!("tcp:127.0.0.1:{CONTROLLER_PORT}"), "--fail-mode", "secure"]);
    for p in 1..=4 {
        cmd.args(["--port", &format!("p{p}:afpacket")]);
    }
    let mut guard = Killed(cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
    let child = &mut guard.0;
    let (out, err) = (Arc::new(Mutex::new(String::new())), Arc::new(Mutex::new(String::new())));
    collect(child.stdout.take().unwrap(), out.clone());
    collect(child.stderr.take().unwrap(), err.clone());
    let pid = child.id();
    let t0 = Instant::now();
    while !err.lock().unwrap().contains("rqvs switch: ready") {
        assert!(child.try_wait().unwrap().is_none(), "{what}: ended: {}", err.lock().unwrap());
        assert!(t0.elapsed() < Duration::from_secs(30), "{what}: not ready");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Flow-mod churn over OpenFlow.
    let flow_mods = Arc::new(AtomicU64::new(0));
    let churner = {
        let (stop, n, ns) = (stop.clone(), flow_mods.clone(), topo.sw.name().to_string());
        std::thread::spawn(move || {
            let mut i = 0u32;
            let mut failed = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // A list no flow had before, every time: the action table must free them.
                let b = i.to_be_bytes();
                let flow = format!(
                    "priority=300,tcp,nw_dst=10.77.0.1,tp_dst=7,actions=mod_dl_src:02:{:02x}:{:02x}:{:02x}:{:02x}:00,output:2",
                    b[0], b[1], b[2], b[3]
                );
                if ofctl(&ns, &["add-flow", &flow]) {
                    n.fetch_add(1, Ordering::Relaxed);
                } else {
                    failed += 1;
                }
                if i % 10 == 9 {
                    if ofctl(&ns, &["del-flows", "tcp,nw_dst=10.77.0.1"]) {
                        n.fetch_add(1, Ordering::Relaxed);
                    } else {
                        failed += 1;
                    }
                }
                i += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            failed
        })
    };
    // Port 4 flapping.
    let flapper = {
        let (stop, ns) = (stop.clone(), topo.sw.name().to_string());
        std::thread::spawn(move || {
            let link = |state: &str| {
                let s = Command::new("ip").args(["-n", &ns, "link", "set", "p4", state]).status();
                assert!(s.is_ok_and(|s| s.success()), "ip link set p4 {state}");
            };
            let mut flaps = 0u64;
            let mut last = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                if last.elapsed() >= Duration::from_secs(20) {
                    link("down");
                    std::thread::sleep(Duration::from_secs(2));
                    link("up");
                    flaps += 1;
                    last = Instant::now();
                }
            }
            flaps
        })
    };

    let traffic = churn::Traffic::start_every(&topo, Duration::from_millis(10));
    let start = Instant::now();
    // (time, RSS KiB, descriptors that can leak, all descriptors)
    let mut samples: Vec<(f64, u64, u64, u64)> = Vec::new();
    // (time, lists, freed, stale) of the action table, from the metrics.
    let mut table: Vec<(f64, u64, u64, u64)> = Vec::new();
    let mut add = None;
    let mut del = None;
    while start.elapsed() < run {
        std::thread::sleep(Duration::from_secs(5).min(run.saturating_sub(start.elapsed())));
        if let (Some(rss), Some((leakable, all))) = (proc_status(pid, "VmRSS:"), fds(pid)) {
            samples.push((start.elapsed().as_secs_f64(), rss, leakable, all));
        }
        if let Some((lists, freed, stale)) = action_table(&topo.sw) {
            table.push((start.elapsed().as_secs_f64(), lists, freed, stale));
        }
        if add.is_none() && start.elapsed() >= run / 3 {
            let (ok, c) = churn::timed(|| ofctl(topo.sw.name(), &["add-flows", change.to_str().unwrap()]));
            assert!(ok, "{what}: ovs-ofctl add-flows CHANGE");
            add = Some(c);
        }
        if del.is_none() && start.elapsed() >= run * 2 / 3 {
            let (ok, c) = churn::timed(|| ofctl(topo.sw.name(), &["add-flows", delete.to_str().unwrap()]));
            assert!(ok, "{what}: ovs-ofctl add-flows with the DELETE lines");
            del = Some(c);
        }
        assert!(child.try_wait().unwrap().is_none(), "{what}: the switch ended: {}", err.lock().unwrap());
    }
    let (sent, captured) = traffic.finish();
    stop.store(true, Ordering::Relaxed);
    let failed_mods = churner.join().unwrap();
    let flaps = flapper.join().unwrap();
    // The churn has stopped: what can leak comes back to its count after warm-up (polled for up
    // to 10 s: a connection being closed holds its descriptors — one connection has several,
    // its reader's and writer's — until the switch's threads see the end).
    let fd_floor = samples.iter().filter(|s| s.0 >= run.as_secs_f64() / 4.0).map(|s| s.2).min().unwrap_or(0);
    let t_end = Instant::now();
    let fd_end = loop {
        let f = fds(pid).expect("the switch's descriptors");
        if f.0 <= fd_floor || t_end.elapsed() >= Duration::from_secs(10) {
            break f;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let fd_list = fd_targets(pid);
    stop_ctrl.store(true, Ordering::Relaxed);
    let connections = ctrl.join().unwrap();
    // SAFETY: kill(2) has no memory effects; the pid is our child's, not yet reaped.
    assert_eq!(unsafe { libc::kill(libc::pid_t::try_from(pid).unwrap(), libc::SIGTERM) }, 0);
    let t1 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(t1.elapsed() < Duration::from_secs(30), "{what}: did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(300));
    let stdout = out.lock().unwrap().clone();
    let stderr = err.lock().unwrap().clone();
    assert!(status.success(), "{what}: exit {status}\n{stdout}\n{stderr}");
    assert!(stdout.contains("every frame accounted for"), "{what}: {stdout}");
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");

    let v = json(&json_path);
    let ports = v["ports"].as_array().unwrap();
    let sum = |field: &str| ports.iter().map(|p| p[field].as_u64().unwrap()).sum::<u64>();
    // Only port 1 receives the test's frames: its ring's losses are accepted as counted (and
    // reported), any other port's are not.
    let rx_lost: Vec<u64> = ports.iter().map(|p| p["rx_lost"].as_u64().unwrap()).collect();
    assert_eq!(rx_lost[1..].iter().sum::<u64>(), 0, "{what}: rx_lost per port {rx_lost:?}\n{stdout}");
    let acct = churn::Accounting {
        port1_rx: ports[0]["rx_packets"].as_u64().unwrap(),
        rx_lost: rx_lost[0],
        lost: v["total"]["lost"].as_u64().unwrap(),
        malformed: v["total"]["malformed"].as_u64().unwrap(),
        tx_dropped: sum("tx_dropped"),
        balanced: true,
        text: stdout.clone(),
    };
    let summary = churn::check_accounted(&what, &sent, &captured, add.unwrap(), del.unwrap(), &acct);

    // RSS and descriptors after the warm-up (the first quarter).
    let warm: Vec<_> = samples.iter().filter(|s| s.0 >= run.as_secs_f64() / 4.0).copied().collect();
    assert!(!warm.is_empty(), "{what}: no samples");
    let (rss0, fd0) = (warm[0].1, warm.iter().map(|s| s.2).min().unwrap());
    let rss_max = warm.iter().map(|s| s.1).max().unwrap();
    let rss_end = warm.last().unwrap().1;
    // Growth: the level (median) of the last quarter of the run against the level of the quarter
    // after the warm-up — a leak raises the level; a passing spike (a revalidation, a burst of
    // connections' buffers) does not. The highest sample is printed beside it.
    let quarter = |q: f64| {
        let t = run.as_secs_f64();
        let mut v: Vec<u64> =
            samples.iter().filter(|s| s.0 >= t * q / 4.0 && s.0 < t * (q + 1.0) / 4.0 + 1.0).map(|s| s.1).collect();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    };
    let (level1, level3) = (quarter(1.0), quarter(3.0));
    let growth = (level3 as f64 - level1 as f64) / level1.max(1) as f64 * 100.0;
    let spike = (rss_max as f64 - level1 as f64) / level1.max(1) as f64 * 100.0;
    let fd_max = warm.iter().map(|s| s.2).max().unwrap();
    let fd_all_max = warm.iter().map(|s| s.3).max().unwrap();
    let port4 = &ports[3];
    let lists_max = table.iter().map(|t| t.1).max().unwrap_or(0);
    let (freed, stale) = table.last().map_or((0, 0), |t| (t.2, t.3));
    println!(
        "SOAK {design}: {minutes} min; frames sent {}, port 1 rx {}, rx_lost (port 1's ring) {}, of them forwardable \
         frames with no copy {}; captured {}; mismatches 0 (check passed: {summary:?}); \
         flow-mods {} ({} ovs-ofctl failures); controller connections {connections}; port 4 flaps {flaps} \
         (rx {}); RSS {} KiB at warm-up end, level (median) {level1} KiB in the 2nd quarter, {level3} KiB in the last \
         ({growth:+.1}%), max {} KiB (+{spike:.1}% over the 2nd quarter's level), at the end {rss_end} KiB, first {} KiB; \
         fds that can leak: fewest after warm-up {fd0}, max {fd_max}, after the churn {} (all fds max {fd_all_max}); \
         action lists max {lists_max}, freed {freed}, stale reads {stale}; samples {}",
        sent.len(),
        acct.port1_rx,
        acct.rx_lost,
        summary.lost,
        captured.iter().map(Vec::len).sum::<usize>(),
        flow_mods.load(Ordering::Relaxed),
        failed_mods,
        port4["rx_packets"].as_u64().unwrap_or(0),
        rss0,
        rss_max,
        samples[0].1,
        fd_end.0,
        samples.len()
    );
    println!("SOAK {design} summary:\n{stdout}");
    assert!(connections as f64 >= minutes.floor(), "{what}: {connections} controller connections");
    assert!(growth < 5.0, "{what}: RSS grew {growth:.1}% after warm-up: {samples:?}");
    assert!(
        fd_end.0 <= fd0,
        "{what}: descriptors that can leak grew: {fd0} at fewest after warm-up, {} 10 s after the churn: {samples:?}\n{fd_list}",
        fd_end.0
    );
    // Every add-flow invents a list: the table holds about a second's worth, never the run's.
    assert!(table.len() as f64 >= run.as_secs_f64() / 10.0, "{what}: too few metrics scrapes: {table:?}");
    assert!(lists_max < 1_000, "{what}: the action table held {lists_max} lists: {table:?}");
    assert!(freed as f64 >= flow_mods.load(Ordering::Relaxed) as f64 * 0.5, "{what}: {freed} lists freed");
    assert_eq!(stale, 0, "{what}: reads of freed action lists");
}

/// The metrics endpoint's port (on the switch namespace's loopback).
const METRICS_PORT: u16 = 19090;

/// (lists, freed, stale reads) of the switch's action table, from its metrics.
fn action_table(ns: &Netns) -> Option<(u64, u64, u64)> {
    let body = ns
        .run(|| -> std::io::Result<String> {
            let mut s = std::net::TcpStream::connect(("127.0.0.1", METRICS_PORT))?;
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            std::io::Write::write_all(&mut s, b"GET /metrics HTTP/1.0\r\n\r\n")?;
            let mut body = String::new();
            s.read_to_string(&mut body)?;
            Ok(body)
        })
        .ok()?
        .ok()?;
    let value = |name: &str| -> Option<u64> {
        body.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse::<f64>().ok()).map(|v| v as u64)
    };
    Some((
        value("rqvs_action_lists")?,
        value("rqvs_action_lists_freed_total")?,
        value("rqvs_action_lists_stale_total")?,
    ))
}
