//! TCP and UDP between two hosts through `rqvs switch` with `actions=NORMAL`, the hosts' veths
//! left with their default offloads (transmit checksums and TSO on): the switch completes the
//! checksums the hosts leave to "the device" and cuts their TSO super-frames
//! (`crates/ports/src/csum.rs`). Before that, every forwarded TCP segment arrived with a bad
//! checksum and `curl` timed out (issue 38).
//!
//! `curl` fetches, from `python3 -m http.server` on host 2, a 1 MB random file (hundreds of
//! segments, super-frames among them) and a small one, and the bytes must be those served; a
//! UDP datagram goes each way. For each design on afpacket ports. On afxdp ports (`--xdp-mode
//! auto`, the default: driver mode on a veth, where the kernel stops the peer's TSO/GSO) a 2 MB
//! body too; with `--xdp-mode generic` the bulk transfer does not complete and the super-frames
//! the kernel could not give the AF_XDP socket are counted in the port's `rx_lost` (see the
//! README).
//!
//! Needs root and `ip` (else skipped; a failure with `RQVS_REQUIRE_NETNS=1`), `curl` and
//! `python3` (likewise). Everything runs in the test's namespaces; processes started here are
//! killed by pid when the test ends, also when it fails.

#[path = "../../switch/tests/common/mod.rs"]
mod topo;

mod common;
use common::{ctl, TempDir};

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rqvs_ports::testnet;
use topo::{Rng, Topo};

const H1: &str = "10.78.0.1";
const H2: &str = "10.78.0.2";

fn can_run(test: &str) -> bool {
    if !testnet::available(test) {
        return false;
    }
    for tool in ["curl", "python3"] {
        if Command::new(tool).arg("--version").output().is_err() {
            assert!(
                std::env::var("RQVS_REQUIRE_NETNS").as_deref() != Ok("1"),
                "{test}: RQVS_REQUIRE_NETNS=1 but `{tool}` is not installed"
            );
            eprintln!("skipping {test}: `{tool}` is not installed");
            return false;
        }
    }
    true
}

/// A process started by the test; killed by its pid and reaped on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn in_ns(ns: &testnet::Netns, program: &str, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns.name(), program]).args(args);
    c
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// Hosts 1 and 2 addressed; host 2 serves `dir` over HTTP on port 8000.
fn topology(tag: &str, www: &Path) -> (Topo, Proc) {
    let t = Topo::new(tag, 1);
    t.hosts[0].ip(&["addr", "add", &format!("{H1}/24"), "dev", "e1"]).unwrap();
    t.hosts[1].ip(&["addr", "add", &format!("{H2}/24"), "dev", "e2"]).unwrap();
    let server = in_ns(
        &t.hosts[1],
        "python3",
        &["-m", "http.server", "--bind", H2, "--directory", www.to_str().unwrap(), "8000"],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    (t, Proc(server))
}

fn start_switch(t: &Topo, dir: &TempDir, design: &str, kind: &str, extra: &[&str]) -> Proc {
    let flows = dir.join("normal.flows");
    std::fs::write(&flows, "priority=0,actions=NORMAL\n").unwrap();
    let sock = dir.join("ctl.sock");
    let _ = std::fs::remove_file(&sock);
    let ports: Vec<String> = (1..=3).map(|i| format!("p{i}:{kind}")).collect();
    let mut args = vec!["switch", "--rules", flows.to_str().unwrap(), "--ctl", sock.to_str().unwrap()];
    args.extend(["--design", design, "--duration", "120"]);
    args.extend(extra);
    for p in &ports {
        args.extend(["--port", p.as_str()]);
    }
    let child = in_ns(&t.sw, env!("CARGO_BIN_EXE_rqvs"), &args)
        .stdout(std::fs::File::create(dir.join("switch.out")).unwrap())
        .stderr(std::fs::File::create(dir.join("switch.err")).unwrap())
        .spawn()
        .unwrap();
    let mut p = Proc(child);
    let t0 = Instant::now();
    while !sock.exists() {
        assert!(p.0.try_wait().unwrap().is_none(), "the switch exited: {}", read(&dir.join("switch.err")));
        assert!(t0.elapsed() < Duration::from_secs(30), "the switch did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    p
}

/// `curl` from host 1 of `file` into `out`; true on HTTP 200 within `secs`.
fn fetch(t: &Topo, file: &str, out: &Path, secs: u32) -> bool {
    let url = format!("http://{H2}:8000/{file}");
    let o = in_ns(&t.hosts[0], "curl", &["-sf", "-m", &secs.to_string(), "-o", out.to_str().unwrap(), &url])
        .output()
        .unwrap();
    o.status.success()
}

/// One UDP datagram of `size` bytes from `from` (address `src`) to `dst`:9999 where `to` listens;
/// true if it arrives with the same bytes (the receiving kernel drops a bad checksum).
fn udp(from: &testnet::Netns, to: &testnet::Netns, dst: &str, size: usize) -> bool {
    let listen = format!(
        "import socket,sys\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.bind(('{dst}',9999))\n\
         s.settimeout(5)\nprint('ready',flush=True)\nd,_=s.recvfrom(65535)\n\
         sys.exit(0 if d==bytes(i%251 for i in range({size})) else 3)"
    );
    let mut rx = in_ns(to, "python3", &["-c", &listen]).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = [0u8; 6];
    std::io::Read::read_exact(rx.stdout.as_mut().unwrap(), &mut line).unwrap();
    let send = format!(
        "import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
         s.sendto(bytes(i%251 for i in range({size})),('{dst}',9999))"
    );
    let mut ok = false;
    for _ in 0..5 {
        assert!(in_ns(from, "python3", &["-c", &send]).status().unwrap().success());
        std::thread::sleep(Duration::from_millis(200));
        if let Some(s) = rx.try_wait().unwrap() {
            ok = s.success();
            break;
        }
    }
    let _ = rx.kill();
    let _ = rx.wait();
    ok
}

fn stop_switch(mut sw: Proc, dir: &TempDir) -> String {
    ctl(&dir.join("ctl.sock"), &["exit"]);
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = sw.0.try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(15), "the switch did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = read(&dir.join("switch.out"));
    assert!(status.success(), "{}\n{out}", read(&dir.join("switch.err")));
    assert!(out.contains("every frame accounted for"), "{out}");
    out
}

fn web_dir(dir: &TempDir) -> (std::path::PathBuf, Vec<u8>) {
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let mut rng = Rng(0x38);
    let big: Vec<u8> = (0..1_000_000).map(|_| rng.next() as u8).collect();
    std::fs::write(www.join("big"), &big).unwrap();
    std::fs::write(www.join("small"), b"hello through rqvs\n").unwrap();
    let bulk: Vec<u8> = (0..2_000_000).map(|_| rng.next() as u8).collect();
    std::fs::write(www.join("bulk"), bulk).unwrap();
    (www, big)
}

#[test]
fn tcp_and_udp_pass_with_default_offloads_afpacket_every_design() {
    if !can_run("tcp_and_udp_pass_with_default_offloads_afpacket_every_design") {
        return;
    }
    let dir = TempDir::new("offload-afpacket");
    let (www, big) = web_dir(&dir);
    let (t, _server) = topology("offl", &www);
    for design in ["orig", "ccache", "cflows"] {
        let sw = start_switch(&t, &dir, design, "afpacket", &[]);
        let small = dir.join("small.got");
        // The server may still be starting: a few tries for the first request.
        let t0 = Instant::now();
        while !fetch(&t, "small", &small, 3) {
            assert!(t0.elapsed() < Duration::from_secs(20), "{design}: small GET never succeeded");
        }
        assert_eq!(std::fs::read(&small).unwrap(), b"hello through rqvs\n", "{design}");
        let got = dir.join("big.got");
        assert!(fetch(&t, "big", &got, 20), "{design}: 1 MB GET failed");
        assert!(std::fs::read(&got).unwrap() == big, "{design}: the 1 MB body differs");
        assert!(udp(&t.hosts[0], &t.hosts[1], H2, 1000), "{design}: UDP h1 -> h2");
        assert!(udp(&t.hosts[1], &t.hosts[0], H1, 1000), "{design}: UDP h2 -> h1");
        stop_switch(sw, &dir);
    }
}

#[test]
fn tcp_passes_with_default_offloads_afxdp() {
    if !can_run("tcp_passes_with_default_offloads_afxdp") {
        return;
    }
    let dir = TempDir::new("offload-afxdp");
    let (www, _) = web_dir(&dir);
    let (t, _server) = topology("offx", &www);
    let sw = start_switch(&t, &dir, "orig", "afxdp", &[]);
    let small = dir.join("small.got");
    let t0 = Instant::now();
    while !fetch(&t, "small", &small, 3) {
        assert!(t0.elapsed() < Duration::from_secs(20), "small GET over afxdp never succeeded");
    }
    assert_eq!(std::fs::read(&small).unwrap(), b"hello through rqvs\n");
    assert!(udp(&t.hosts[0], &t.hosts[1], H2, 1000), "UDP h1 -> h2 over afxdp");
    // Bulk TCP with the hosts' TSO on: driver-mode XDP on the veths (the kernel turned their
    // peers' segmentation offloads off), nothing lost.
    let bulk = dir.join("bulk.got");
    assert!(fetch(&t, "bulk", &bulk, 20), "2 MB GET over afxdp failed: {}", read(&dir.join("switch.err")));
    assert!(std::fs::read(&bulk).unwrap() == std::fs::read(www.join("bulk")).unwrap(), "the 2 MB body differs");
    let show = ctl(&dir.join("ctl.sock"), &["show"]);
    assert!(!read(&dir.join("switch.err")).contains("generic mode"), "{}", read(&dir.join("switch.err")));
    stop_switch(sw, &dir);
    assert!(rx_lost(&show).iter().all(|&n| n == 0), "{show}");

    // Generic mode: the hosts' super-frames do not fit an AF_XDP chunk; the transfer stalls
    // and the loss is counted on the receiving ports.
    let sw = start_switch(&t, &dir, "orig", "afxdp", &["--xdp-mode", "generic"]);
    let t0 = Instant::now();
    while !fetch(&t, "small", &small, 3) {
        assert!(t0.elapsed() < Duration::from_secs(20), "small GET over generic afxdp never succeeded");
    }
    assert!(!fetch(&t, "bulk", &bulk, 5), "a 2 MB GET passed generic-mode AF_XDP: the README is wrong now");
    let show = ctl(&dir.join("ctl.sock"), &["show"]);
    assert!(rx_lost(&show).iter().sum::<u64>() > 0, "the super-frames lost are not counted: {show}");
    stop_switch(sw, &dir);
}

/// The `rx_lost` column of `rqvs ctl show`, per port.
fn rx_lost(show: &str) -> Vec<u64> {
    let mut lines = show.lines().skip_while(|l| !l.contains("rx_lost"));
    let head: Vec<&str> = lines.next().unwrap_or_else(|| panic!("no header in {show}")).split_whitespace().collect();
    let col = head.iter().position(|h| *h == "rx_lost").unwrap();
    lines
        .take_while(|l| !l.trim_start().starts_with("total") && !l.contains("): "))
        .filter_map(|l| l.split_whitespace().nth(col).and_then(|v| v.parse().ok()))
        .collect()
}
