//! `rqvs switch` and `rqvs ctl` as an operator uses them: the built-in workload, one-line
//! errors that leave nothing behind, and (as root, in private namespaces) the management socket
//! driving a switch on veths while frames flow, and a clean stop on SIGTERM.

mod common;
use common::{ctl, rqvs, TempDir};

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rqvs_ports::testnet::{self, Netns, RawSocket};

/// The test's directory, removed when the test ends (also on failure).
fn temp(name: &str) -> TempDir {
    TempDir::new(&format!("cli-switch-{name}"))
}

/// `rqvs switch ARGS --json DIR/out.json` on the embedded workload, its output captures in `dir`
/// (the system temporary directory the run keeps them in): its output and the JSON report.
fn embedded_switch(dir: &Path, args: &[&str]) -> (std::process::Output, serde_json::Value) {
    let json = dir.join("out.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rqvs"))
        .args(["switch"])
        .args(args)
        .args(["--json", json.to_str().unwrap()])
        .env("TMPDIR", dir)
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    let v = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (out, v)
}

#[test]
fn runs_on_the_embedded_workload_and_accounts_for_every_frame() {
    let tmp = temp("embedded");
    let dir = &tmp.0;
    let (out, v) = embedded_switch(dir, &["--design", "cflows", "--pmds", "2"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("every frame accounted for"), "{text}");
    assert_eq!(v["total"]["rx"], v["ports"][0]["rx_packets"]);
    assert!(v["total"]["rx"].as_u64().unwrap() > 9000);
    // The output captures named in the summary exist.
    let line = text.lines().find(|l| l.contains("output captures:")).unwrap();
    let outdir = Path::new(line.split(": ").nth(1).unwrap().trim());
    assert!(outdir.starts_with(dir) && outdir.join("port2.pcap").exists(), "{}", outdir.display());
}

/// `--design auto --auto ...`: the settings reach each PMD's controller (it starts in ORIG and
/// stays for the run, under the default dwell), the ready line and the final JSON say which
/// were in force.
#[test]
fn auto_settings_reach_the_pmds() {
    let tmp = temp("auto");
    let (out, v) = embedded_switch(&tmp.0, &["--design", "auto", "--auto", "initial=orig", "--auto", "window-ms=10"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ready: auto (settings: initial=orig,window-ms=10) design, "), "{err}");
    let a = &v["pmds"][0]["auto"];
    assert_eq!(a["settings"], "initial=orig,window-ms=10", "{a}");
    assert!(a["time_orig_s"].as_f64().unwrap() > 0.0 && a["time_cflows_s"] == 0.0, "{a}");
}

/// `--ingress-policing`: the ready line names the policed port and its bucket, and the port's
/// frames over it are dropped as `policed` in the final JSON, every frame still accounted for;
/// the summary (the text of `ctl show` too) and the JSON name each port's policer.
#[test]
fn ingress_policing_is_announced_and_counted() {
    let tmp = temp("policing");
    let (out, v) = embedded_switch(&tmp.0, &["--design", "cflows", "--ingress-policing", "1=1/0.5"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("; ingress policing: port 1 at 1 kpps, burst 0.5 kpkts"), "{err}");
    let p1 = &v["ports"][0]["frames"];
    let n = |k: &str| p1[k].as_u64().unwrap_or_else(|| panic!("{k}: {p1}"));
    assert!(n("policed") > 0 && n("dropped") >= n("policed") && n("rx") - n("policed") >= 500, "{p1}");
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("(policed "), "the summary names them: {summary}");
    let line = format!(
        "  port 1 ({}): ingress policing 1 kpps, burst 0.5 kpkts: {} frames policed",
        v["ports"][0]["name"].as_str().unwrap(),
        n("policed")
    );
    assert!(summary.contains(&line), "the summary (and `ctl show`) names the policer: {summary}");
    let (rate, burst) = (&v["ports"][0]["ingress_policing_kpkts_rate"], &v["ports"][0]["ingress_policing_kpkts_burst"]);
    assert_eq!((rate.as_f64(), burst.as_f64()), (Some(1.0), Some(0.5)), "{}", v["ports"][0]);
    assert_eq!(v["ports"][1]["ingress_policing_kpkts_rate"].as_f64(), Some(0.0), "port 2 is not policed");
}

#[test]
fn bad_input_is_one_line_and_leaves_nothing_behind() {
    let tmp = temp("bad");
    let dir = &tmp.0;
    let sock = dir.join("ctl.sock");
    // A file that is not a socket at the socket path: refused, and still the operator's to
    // remove (a stale socket is removed: tests/daemon.rs).
    std::fs::write(&sock, b"").unwrap();
    let out = rqvs(&["switch", "--ctl", sock.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("control socket") && err.contains("not a socket"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    std::fs::remove_file(&sock).unwrap();
    // A rule file with an action the switch does not execute, and a malformed one.
    let flows = dir.join("flows.txt");
    std::fs::write(&flows, "priority=5,ip,actions=enqueue:1:1\n").unwrap();
    let out = rqvs(&["switch", "--rules", flows.to_str().unwrap(), "--ctl", sock.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.contains("action 'enqueue:1:1' is not one the switch executes"), "{err}");
    assert!(!sock.exists(), "no socket left behind");
    std::fs::write(&flows, "priority=5,ip,nw_src=1.2.3,actions=output:2\n").unwrap();
    let out = rqvs(&["switch", "--rules", flows.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.contains("flows.txt:1:"), "{err}");
    // Port specs.
    let out = rqvs(&["switch", "--port", "p1:dpdk"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown port type 'dpdk'"));
    // No switch behind a socket.
    let out = rqvs(&["ctl", "--socket", sock.to_str().unwrap(), "show"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is an rqvs switch running"));
}

struct Running {
    child: Child,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn udp_frame(dst_port: u16) -> Vec<u8> {
    let mut k = rqvs_flow::FlowKey::ipv4(0x0a00_0001, 0x0a00_0002, 17, 1000, dst_port);
    k.dl_src = [2, 0, 0, 0, 0, 1];
    k.dl_dst = [2, 0, 0, 0, 0, 2];
    rqvs_flow::frame::build_frame(&k.wire())
}

/// The management socket while the switch forwards: flows added and deleted take effect,
/// counters and megaflows are reported, `ofproto/trace` names the rule, `exit` and SIGTERM
/// stop it cleanly (exit 0, socket removed, every frame accounted for).
#[test]
fn management_socket_drives_a_running_switch() {
    if !testnet::available("management_socket_drives_a_running_switch") {
        return;
    }
    let tmp = temp("ctl");
    let dir = &tmp.0;
    let sock = dir.join("ctl.sock");
    let flows = dir.join("flows.txt");
    std::fs::write(&flows, "priority=10,udp,tp_dst=53,actions=mod_dl_src:02:00:00:00:00:99,output:2\n").unwrap();
    let sw = Netns::new("sw").unwrap();
    let (h1, h2) = (Netns::new("h1").unwrap(), Netns::new("h2").unwrap());
    for (h, p, e) in [(&h1, "p1", "e1"), (&h2, "p2", "e2")] {
        sw.veth(p, h, e, 1).unwrap();
        sw.wait_running(p, Duration::from_secs(3)).unwrap();
        h.wait_running(e, Duration::from_secs(3)).unwrap();
    }
    let s1 = h1.run(|| RawSocket::open("e1")).unwrap().unwrap();
    let s2 = h2.run(|| RawSocket::open("e2")).unwrap().unwrap();
    for (stop_with_signal, design) in [(false, "orig"), (true, "cflows")] {
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                sw.name(),
                env!("CARGO_BIN_EXE_rqvs"),
                "switch",
                "--port",
                "p1",
                "--port",
                "p2:afxdp",
            ])
            .args(["--rules", flows.to_str().unwrap(), "--design", design, "--ctl", sock.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut running = Running { child };
        let t0 = Instant::now();
        while !sock.exists() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(200));
        assert!(ctl(&sock, &["show"]).contains("p2:afxdp"));
        // The file's flow forwards port 53 with its MAC rewritten; port 80 has no flow.
        s1.send(&udp_frame(53)).unwrap();
        let got = s2.recv(Duration::from_secs(2)).unwrap().expect("forwarded");
        assert_eq!(got[6..12], [2, 0, 0, 0, 0, 0x99]);
        s1.send(&udp_frame(80)).unwrap();
        assert_eq!(s2.recv(Duration::from_millis(300)).unwrap(), None, "no flow: dropped");
        let add = dir.join("add.txt");
        std::fs::write(&add, "priority=20,udp,tp_dst=80,actions=output:2\n").unwrap();
        assert!(ctl(&sock, &["add-flows", add.to_str().unwrap()]).contains("added 1"));
        s1.send(&udp_frame(80)).unwrap();
        assert_eq!(s2.recv(Duration::from_secs(2)).unwrap().expect("forwarded after add-flows"), udp_frame(80));
        let stats = ctl(&sock, &["pmd-stats-show"]);
        assert!(stats.contains("packets received: 3"), "{stats}");
        let trace =
            ctl(&sock, &["ofproto/trace", "in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=1000,tp_dst=80"]);
        assert!(trace.contains("priority 20") && trace.contains("Datapath actions: 2"), "{trace}");
        if design == "orig" {
            let dump = ctl(&sock, &["dump-flows"]);
            assert!(dump.contains("actions:2") && dump.contains("packets:"), "{dump}");
        }
        let json: serde_json::Value = serde_json::from_str(&ctl(&sock, &["--json", "show"])).unwrap();
        assert_eq!(json["ports"][0]["frames"]["forwarded"], 2);
        assert!(ctl(&sock, &["del-flows", "--all"]).contains("deleted 2"));
        // The trace follows the change (CFLOWS rebuilds its table for trace after one).
        let trace =
            ctl(&sock, &["ofproto/trace", "in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=1000,tp_dst=80"]);
        assert!(trace.contains("No match") && trace.contains("Datapath actions: drop"), "{trace}");
        s1.send(&udp_frame(53)).unwrap();
        assert_eq!(s2.recv(Duration::from_millis(300)).unwrap(), None, "deleted: dropped");
        // A bad request does not hurt it.
        // (An unknown command is a usage error of `rqvs ctl` itself, exit 2, before it connects.)
        let out = rqvs(&["ctl", "--socket", sock.to_str().unwrap(), "no-such-command"]);
        assert_eq!(out.status.code(), Some(2));
        if stop_with_signal {
            sigterm(running.child.id());
        } else {
            ctl(&sock, &["exit"]);
        }
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = running.child.try_wait().unwrap() {
                break s;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "the switch did not stop");
            std::thread::sleep(Duration::from_millis(20));
        };
        let out =
            std::mem::replace(&mut running.child, Command::new("true").spawn().unwrap()).wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
        assert!(text.contains("every frame accounted for"), "{text}");
        assert!(!sock.exists(), "socket removed at exit");
    }
}

/// SIGTERM to a process we started (by pid), through `kill(1)`.
fn sigterm(pid: u32) {
    // `ip netns exec` execs the switch, so the pid is the switch's.
    assert!(Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap().success());
}
