//! Real OpenFlow controllers drive `rqvs switch --controller`: Open vSwitch's
//! `ovs-testcontroller` (a learning switch) and an os-ken application
//! (`osken_simple_switch13.py`, Ryu's simple_switch_13 pattern). Two hosts in their own
//! namespaces, with addresses given here on veths made here, ping each other through rqvs; the
//! controllers' flows appear in `ovs-ofctl dump-flows` (the switch also listens with
//! `--openflow`); table misses arrive as PACKET_IN (the switch's counters and the controllers'
//! own logs). And without a controller: `--fail-mode secure` passes no ping, `standalone` fails
//! open (MAC learning) so the ping passes, and a controller that comes later takes over.
//!
//! Everything runs inside the test's namespaces: the switch, the controllers and `ovs-ofctl` in
//! the switch's namespace (its loopback brought up for them), `ping` in the hosts'. Processes
//! started here are killed by pid when a test ends, also when it fails; the namespaces go with
//! the topology.
//!
//! Needs root and `ip` (else skipped; a failure with `RQVS_REQUIRE_NETNS=1`), `ovs-ofctl`,
//! `ovs-testcontroller` and os-ken (each skipped when missing; a failure with
//! `RQVS_REQUIRE_OVS=1`). The tests run one at a time (a lock): they ping with timeouts.

#[path = "../../switch/tests/common/mod.rs"]
mod topo;

mod common;
use common::{ctl, TempDir};

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rqvs_ports::testnet;
use topo::Topo;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// The controller's port and the switch's passive OpenFlow port, on the switch namespace's
/// loopback (a namespace of the test's own: nothing else listens there).
const CONTROLLER_PORT: u16 = 6653;
const OPENFLOW_PORT: u16 = 6654;
/// The hosts' addresses (inside their namespaces only).
const H1: &str = "10.77.0.1";
const H2: &str = "10.77.0.2";

/// The controller a test runs.
enum Controller {
    Ovs,
    OsKen,
}

/// Root, `ip`, `ovs-ofctl` and the controller are here (else the test is skipped, with the
/// reason printed — or fails under `RQVS_REQUIRE_NETNS=1` / `RQVS_REQUIRE_OVS=1`).
fn can_run(test: &str, c: Controller) -> bool {
    testnet::available(test)
        && rqvs_testkit::ovs::ofctl_available()
        && match c {
            Controller::Ovs => rqvs_testkit::ovs::testcontroller_available(),
            Controller::OsKen => rqvs_testkit::ovs::osken_available(),
        }
}

/// A process started by a test; killed (by its pid) and reaped on drop.
struct Proc {
    child: Child,
    what: &'static str,
}

impl Proc {
    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `ip netns exec NS PROGRAM ARGS` (ip execs the program: the child's pid is the program's).
fn in_ns(ns: &testnet::Netns, program: &str, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns.name(), program]).args(args);
    c
}

/// The topology with addresses on hosts 1 and 2 and the switch namespace's loopback up.
fn topology(tag: &str) -> Topo {
    let t = Topo::new(tag, 1);
    t.sw.ip(&["link", "set", "lo", "up"]).unwrap();
    t.hosts[0].ip(&["addr", "add", &format!("{H1}/24"), "dev", "e1"]).unwrap();
    t.hosts[1].ip(&["addr", "add", &format!("{H2}/24"), "dev", "e2"]).unwrap();
    t
}

/// `rqvs switch` in the switch namespace on p1..p3, no flows, a management socket, the
/// passive listener and `extra` (controller, fail mode); waits for the socket.
fn start_switch(t: &Topo, dir: &TempDir, extra: &[&str]) -> Proc {
    let empty = dir.join("empty.flows");
    std::fs::write(&empty, "").unwrap();
    let sock = dir.join("ctl.sock");
    let openflow = format!("ptcp:127.0.0.1:{OPENFLOW_PORT}");
    let mut args = vec!["switch", "--rules", empty.to_str().unwrap(), "--ctl", sock.to_str().unwrap()];
    args.extend(["--port", "p1", "--port", "p2", "--port", "p3", "--openflow", &openflow, "--duration", "300"]);
    args.extend_from_slice(extra);
    let log = std::fs::File::create(dir.join("switch.err")).unwrap();
    let child = in_ns(&t.sw, env!("CARGO_BIN_EXE_rqvs"), &args)
        .stdout(std::fs::File::create(dir.join("switch.out")).unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut p = Proc { child, what: "rqvs switch" };
    let t0 = Instant::now();
    while !sock.exists() {
        assert!(p.running(), "the switch exited: {}", read(&dir.join("switch.err")));
        assert!(t0.elapsed() < Duration::from_secs(20), "the switch did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    p
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// `ovs-ofctl -O OpenFlow13 dump-flows` against the switch's passive listener.
fn dump_flows(t: &Topo) -> String {
    let out = in_ns(&t.sw, "ovs-ofctl", &["-O", "OpenFlow13", "dump-flows", &format!("tcp:127.0.0.1:{OPENFLOW_PORT}")])
        .output()
        .unwrap();
    assert!(out.status.success(), "dump-flows: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Waits until `dump-flows` shows a flow containing `text`.
fn wait_for_flow(t: &Topo, text: &str, within: Duration, sw_log: &Path) {
    let t0 = Instant::now();
    loop {
        let flows = dump_flows(t);
        if flows.contains(text) {
            return;
        }
        assert!(t0.elapsed() < within, "no flow with {text:?} after {within:?}:\n{flows}\n{}", read(sw_log));
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `ping -c COUNT` from host 1 to host 2: did every echo come back?
fn ping(t: &Topo, count: u32) -> bool {
    let out = in_ns(&t.hosts[0], "ping", &["-c", &count.to_string(), "-i", "0.2", "-W", "1", H2]).output().unwrap();
    if !out.status.success() {
        eprintln!("ping: {}", String::from_utf8_lossy(&out.stdout));
    }
    out.status.success() && String::from_utf8_lossy(&out.stdout).contains(&format!("{count} received"))
}

/// The switch's counters (`rqvs ctl show --json`).
fn show(sock: &Path) -> serde_json::Value {
    serde_json::from_str(&ctl(sock, &["--json", "show"])).unwrap()
}

/// `rqvs ctl exit`, then the switch must exit 0 (which it does only with balanced accounting).
fn stop_switch(mut sw: Proc, dir: &TempDir) {
    ctl(&dir.join("ctl.sock"), &["exit"]);
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = sw.child.try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(15), "{} did not exit", sw.what);
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = read(&dir.join("switch.out"));
    assert!(status.success(), "{}\n{out}", read(&dir.join("switch.err")));
    assert!(out.contains("every frame accounted for"), "{out}");
}

/// The flows a learning switch installs for a ping between ports 1 and 2: one each way.
fn assert_learned_flows(flows: &str) {
    let learned: Vec<&str> = flows.lines().filter(|l| l.contains("priority=1,")).collect();
    let one_to_two = learned.iter().any(|l| l.contains("in_port=1") && l.contains("actions=output:2"));
    let two_to_one = learned.iter().any(|l| l.contains("in_port=2") && l.contains("actions=output:1"));
    assert!(one_to_two && two_to_one, "learned flows both ways:\n{flows}");
}

/// A dump-flows line's `n_packets`.
fn packets(line: &str) -> u64 {
    let n = line.split("n_packets=").nth(1).and_then(|r| r.split(',').next());
    n.and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("no n_packets in {line}"))
}

fn testcontroller(t: &Topo, dir: &TempDir, log: &str) -> Proc {
    let target = format!("ptcp:{CONTROLLER_PORT}:127.0.0.1");
    let unixctl = format!("--unixctl={}", dir.join("tc.ctl").display());
    let log_file = format!("--log-file={}", dir.join(log).display());
    // Learned flows carry the controller's default idle timeout (60 s): the switch keeps them
    // while the test reads them, and dump-flows shows the timeout.
    let args = [target.as_str(), &unixctl, &log_file, "-vvconn:file:dbg", "-vconsole:off"];
    let child = in_ns(&t.sw, "ovs-testcontroller", &args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    Proc { child, what: "ovs-testcontroller" }
}

#[test]
fn ovs_testcontroller_drives_rqvs() {
    let _one = serial();
    if !can_run("ovs_testcontroller_drives_rqvs", Controller::Ovs) {
        return;
    }
    let dir = TempDir::new("cli-ctl-tc");
    let t = topology("ctltc");
    let tc = testcontroller(&t, &dir, "tc.log");
    let controller = format!("tcp:127.0.0.1:{CONTROLLER_PORT}");
    let sw = start_switch(&t, &dir, &["--controller", &controller, "--fail-mode", "secure"]);
    // The controller's table-miss flow (it installs one for OpenFlow 1.3 and later).
    wait_for_flow(&t, "priority=0 actions=CONTROLLER:128", Duration::from_secs(15), &dir.join("switch.err"));
    assert!(ping(&t, 3), "ping through rqvs and ovs-testcontroller");
    let flows = dump_flows(&t);
    assert_learned_flows(&flows);
    let learned = flows.lines().filter(|l| l.contains("priority=1,"));
    assert!(learned.clone().all(|l| l.contains("idle_timeout=60")), "the controller's idle timeout kept:\n{flows}");
    assert!(learned.map(packets).sum::<u64>() > 0, "the learned flows counted the pings:\n{flows}");
    // What the controller saw: the version negotiated, table misses as PACKET_IN (no_match).
    let log = read(&dir.join("tc.log"));
    assert!(log.contains("received: OFPT_FEATURES_REPLY (OF1.4)"), "OpenFlow 1.4 negotiated:\n{log}");
    let packet_ins =
        log.lines().filter(|l| l.contains("received: OFPT_PACKET_IN") && l.contains("(via no_match)")).count();
    assert!(packet_ins >= 3, "ARP request, ARP reply, first echo request at least: {packet_ins}\n{log}");
    assert!(!log.contains("OFPT_ERROR"), "the switch refused something:\n{log}");
    let s = show(&dir.join("ctl.sock"));
    assert!(s["packet_ins"].as_u64().unwrap() >= 3, "{s}");
    assert!(s["injected"]["forwarded"].as_u64().unwrap() >= 3, "the controller's PACKET_OUTs: {s}");
    stop_switch(sw, &dir);
    drop(tc);
}

#[test]
fn osken_app_drives_rqvs() {
    let _one = serial();
    if !can_run("osken_app_drives_rqvs", Controller::OsKen) {
        return;
    }
    let dir = TempDir::new("cli-ctl-osken");
    let t = topology("ctlok");
    let app = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/osken_simple_switch13.py");
    let port = CONTROLLER_PORT.to_string();
    let args = [app, "--ofp-listen-host", "127.0.0.1", "--ofp-tcp-listen-port", &port];
    let child = in_ns(&t.sw, "python3", &args)
        .stdout(std::fs::File::create(dir.join("osken.out")).unwrap())
        .stderr(std::fs::File::create(dir.join("osken.err")).unwrap())
        .spawn()
        .unwrap();
    let mut app_proc = Proc { child, what: "os-ken" };
    let controller = format!("tcp:127.0.0.1:{CONTROLLER_PORT}");
    let sw = start_switch(&t, &dir, &["--controller", &controller, "--fail-mode", "secure"]);
    // os-ken takes a moment to listen; the switch retries until it does.
    wait_for_flow(&t, "priority=0 actions=CONTROLLER:65535", Duration::from_secs(30), &dir.join("osken.err"));
    assert!(app_proc.running(), "os-ken exited: {}", read(&dir.join("osken.err")));
    assert!(ping(&t, 3), "ping through rqvs and the os-ken app");
    let flows = dump_flows(&t);
    assert_learned_flows(&flows);
    let out = read(&dir.join("osken.out"));
    let packet_ins: Vec<&str> = out.lines().filter(|l| l.starts_with("packet_in ")).collect();
    assert!(packet_ins.len() >= 3, "{out}");
    // Table misses (reason 0), whole frames.
    assert!(packet_ins.iter().all(|l| l.contains("reason=0")), "{out}");
    assert!(
        packet_ins.iter().all(|l| {
            let field = |k: &str| l.split(' ').find_map(|f| f.strip_prefix(k)).unwrap_or("");
            field("total_len=") == field("data_len=")
        }),
        "{out}"
    );
    let s = show(&dir.join("ctl.sock"));
    assert!(s["packet_ins"].as_u64().unwrap() >= 3, "{s}");
    stop_switch(sw, &dir);
    drop(app_proc);
}

#[test]
fn without_a_controller_secure_drops_standalone_fails_open_until_one_comes() {
    let _one = serial();
    if !can_run("without_a_controller_secure_drops_standalone_fails_open_until_one_comes", Controller::Ovs) {
        return;
    }
    // Nothing listens on the controller's port at first.
    let controller = format!("tcp:127.0.0.1:{CONTROLLER_PORT}");
    let quick = ["--controller", controller.as_str(), "--inactivity-probe", "0.3"];

    let dir = TempDir::new("cli-ctl-secure");
    let t = topology("ctlsec");
    let sw = start_switch(&t, &dir, &[&quick[..], &["--fail-mode", "secure"]].concat());
    std::thread::sleep(Duration::from_secs(2));
    assert!(!ping(&t, 2), "secure: no controller, no flows, no ping");
    assert!(!ctl(&dir.join("ctl.sock"), &["dump-rules"]).contains("fail-open"));
    stop_switch(sw, &dir);
    drop(t);

    let dir = TempDir::new("cli-ctl-standalone");
    let t = topology("ctlsta");
    let sw = start_switch(&t, &dir, &[&quick[..], &["--fail-mode", "standalone"]].concat());
    let sock = dir.join("ctl.sock");
    let t0 = Instant::now();
    while !ctl(&sock, &["dump-rules"]).contains("fail-open") {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "standalone did not fail open: {}",
            read(&dir.join("switch.err"))
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(ping(&t, 3), "standalone: the switch forwards on its own (NORMAL)");
    let fdb = ctl(&sock, &["fdb/show"]);
    assert_eq!(fdb.lines().count(), 3, "two hosts learned:\n{fdb}");
    assert!(!dump_flows(&t).contains("priority="), "the fail-open rule is hidden from OpenFlow");
    // A controller comes: the switch connects (backoff at most 8 s), is admitted, the fail-open
    // rule goes, and the controller's learning switch carries the ping.
    let tc = testcontroller(&t, &dir, "tc.log");
    wait_for_flow(&t, "priority=0 actions=CONTROLLER:128", Duration::from_secs(15), &dir.join("switch.err"));
    assert!(!ctl(&sock, &["dump-rules"]).contains("fail-open"), "fail-open ended");
    assert!(ping(&t, 3), "ping through the controller's flows");
    assert_learned_flows(&dump_flows(&t));
    let err = read(&dir.join("switch.err"));
    assert!(err.contains("failing open") && err.contains("no longer in fail-open mode"), "{err}");
    stop_switch(sw, &dir);
    drop(tc);
}
