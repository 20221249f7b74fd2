//! The switch's access rules and limits, on the real binary over loopback (the embedded
//! workload's pcap ports; no root needed except where said):
//!
//! - the management socket is created owner-only (0600);
//! - 200 OpenFlow connections at once: 64 (`--max-connections`' default) are served (each gets
//!   the switch's HELLO), the other 136 are closed at once, with a log line and a count in the
//!   summary; a served connection that never sends a HELLO is dropped after 10 s (logged), and
//!   then new connections are served again;
//! - a `ptcp:` listener on a wildcard address is bound with a warning, logged once (root: in a
//!   private network namespace, so nothing listens on the host's interfaces).

mod common;
use common::TempDir;

use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const RQVS: &str = env!("CARGO_BIN_EXE_rqvs");

/// `rqvs switch` started here: stderr collected; killed (by pid) when dropped.
struct Proc {
    child: Child,
    stderr: Arc<Mutex<String>>,
    stdout: Arc<Mutex<String>>,
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
    fn start(mut cmd: Command) -> Proc {
        let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let (stderr, stdout) = (Arc::new(Mutex::new(String::new())), Arc::new(Mutex::new(String::new())));
        collect(child.stderr.take().unwrap(), stderr.clone());
        collect(child.stdout.take().unwrap(), stdout.clone());
        Proc { child, stderr, stdout }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    fn wait_for(&mut self, text: &str, within: Duration) -> String {
        let t0 = Instant::now();
        loop {
            let e = self.stderr();
            if e.contains(text) {
                return e;
            }
            if let Some(s) = self.child.try_wait().unwrap() {
                panic!("ended ({s}) before saying {text:?}: {e}");
            }
            assert!(t0.elapsed() < within, "no {text:?} within {within:?}: {e}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM (by pid); the exit status once it ended (its output read to the end).
    fn terminate(&mut self) -> ExitStatus {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) has no memory effects; the pid is our child's, not yet reaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let t0 = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                std::thread::sleep(Duration::from_millis(200));
                return s;
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "did not stop: {}", self.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
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

/// The port the ready line names (`OpenFlow ptcp:127.0.0.1:PORT`).
fn ptcp_port(ready: &str) -> u16 {
    let rest = ready.split("OpenFlow ptcp:127.0.0.1:").nth(1).unwrap_or_else(|| panic!("no ptcp in {ready}"));
    rest.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

/// What the switch does with a new connection: sends its HELLO (`true`), or closes it (`false`).
fn greeted(c: &mut TcpStream) -> bool {
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut head = [0u8; 8];
    match c.read_exact(&mut head) {
        Ok(()) => {
            assert_eq!(head[1], 0, "the first message is not a HELLO: {head:?}");
            true
        }
        Err(e) => {
            assert!(
                matches!(e.kind(), std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset),
                "neither a HELLO nor a close: {e}"
            );
            false
        }
    }
}

/// Whether the switch closed `c` (EOF or reset) within `within`.
fn closed_within(c: &mut TcpStream, within: Duration) -> bool {
    c.set_read_timeout(Some(within)).unwrap();
    let mut b = [0u8; 64];
    loop {
        match c.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[test]
fn ctl_socket_is_owner_only() {
    let dir = TempDir::new("cli-limits-ctl");
    let sock = dir.join("sw.ctl");
    let mut p = Proc::start({
        let mut c = Command::new(RQVS);
        c.args(["switch", "--ctl", sock.to_str().unwrap(), "--openflow", "ptcp:0"]);
        c
    });
    p.wait_for("rqvs switch: ready", Duration::from_secs(20));
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the management socket's mode is {mode:o}");
    assert!(p.terminate().success(), "{}", p.stderr());
}

#[test]
fn connections_beyond_the_limit_are_refused_and_silent_peers_dropped() {
    let mut p = Proc::start({
        let mut c = Command::new(RQVS);
        c.args(["switch", "--openflow", "ptcp:0"]);
        c
    });
    let ready = p.wait_for("rqvs switch: ready", Duration::from_secs(20));
    let port = ptcp_port(&ready);
    let t0 = Instant::now();
    let mut conns: Vec<TcpStream> = (0..200).map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap()).collect();
    let mut served = Vec::new();
    let mut refused = 0;
    for mut c in conns.drain(..) {
        if greeted(&mut c) {
            served.push(c);
        } else {
            refused += 1;
        }
    }
    assert_eq!(served.len(), 64, "served connections ({refused} refused): {}", p.stderr());
    assert_eq!(refused, 136);
    let log = p.wait_for("connection refused: 64 connections open (--max-connections)", Duration::from_secs(5));
    // Logged without flooding: a line for the first of the burst, then at most one a second.
    let lines = log.lines().filter(|l| l.contains("connection refused")).count();
    assert!((1..=10).contains(&lines), "{lines} refusal lines: {log}");
    // The served ones never said HELLO: dropped after 10 s, each logged.
    for c in &mut served {
        let left = Duration::from_secs(25).saturating_sub(t0.elapsed());
        assert!(closed_within(c, left), "a silent connection kept after {:?}: {}", t0.elapsed(), p.stderr());
    }
    assert!(t0.elapsed() >= Duration::from_secs(9), "dropped too early: {:?}", t0.elapsed());
    let log = p.wait_for("no HELLO within 10 s: disconnecting", Duration::from_secs(2));
    assert_eq!(log.matches("no HELLO within 10 s").count(), 64, "{log}");
    // Slots free again: a new connection is served.
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert!(greeted(&mut c), "a connection after the silent ones were dropped: {}", p.stderr());
    drop(c);
    let status = p.terminate();
    assert!(status.success(), "exit {status}: {}", p.stderr());
    let out = p.stdout.lock().unwrap().clone();
    assert!(out.contains("136 connections refused (--max-connections), 64 dropped without a HELLO"), "{out}");
}

#[test]
fn wildcard_listener_without_tls_is_warned_about() {
    if !rqvs_ports::testnet::available("wildcard_listener_without_tls_is_warned_about") {
        return;
    }
    // In a namespace of its own: the wildcard covers only its loopback.
    let ns = rqvs_ports::testnet::Netns::new("lim-wild").unwrap();
    let mut p = Proc::start({
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns.name(), RQVS, "switch", "--openflow", "ptcp:0:0.0.0.0", "--duration", "1"]);
        c
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = p.child.try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "{}", p.stderr());
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(200));
    assert!(status.success(), "{}", p.stderr());
    let e = p.stderr();
    assert_eq!(e.matches("listens on every address without TLS").count(), 1, "{e}");
    // Loopback (the default): no warning.
    let out = Command::new(RQVS).args(["switch", "--openflow", "ptcp:0", "--duration", "0.5"]).output().unwrap();
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("without TLS"));
}

/// The peak resident memory of a running process (`VmHWM`), in MiB.
fn peak_mib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kb| kb / 1024)
}

#[test]
fn an_endless_pcap_in_stream_is_read_in_bounded_memory() {
    let dir = TempDir::new("cli-limits-stream");
    let fifo = dir.join("endless.pcap");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    // A capture without end: the header, then 1400-byte UDP frames until the switch closes the
    // FIFO (the write fails then).
    let path = fifo.clone();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let mut header = Vec::new();
        for v in [0xa1b2_c3d4u32.to_le_bytes().as_slice(), &2u16.to_le_bytes(), &4u16.to_le_bytes(), &[0; 8]] {
            header.extend_from_slice(v);
        }
        header.extend_from_slice(&65535u32.to_le_bytes());
        header.extend_from_slice(&1u32.to_le_bytes());
        f.write_all(&header).unwrap();
        let mut k = rqvs_flow::FlowKey::ipv4(0x0a00_0001, 0x0a00_0002, 17, 1000, 53);
        k.dl_src = [2, 0, 0, 0, 0, 1];
        k.dl_dst = [2, 0, 0, 0, 0, 2];
        let mut frame = rqvs_flow::frame::build_frame(&k.wire());
        frame.resize(1400, 0);
        let mut chunk = Vec::new();
        for _ in 0..64 {
            chunk.extend_from_slice(&[0u8; 8]);
            chunk.extend_from_slice(&(frame.len() as u32).to_le_bytes());
            chunk.extend_from_slice(&(frame.len() as u32).to_le_bytes());
            chunk.extend_from_slice(&frame);
        }
        let mut bytes = 0u64;
        while f.write_all(&chunk).is_ok() {
            bytes += chunk.len() as u64;
        }
        bytes
    });
    let fifo_arg = format!("pcap-in:{}", fifo.display());
    let mut p = Proc::start({
        let mut c = Command::new(RQVS);
        c.args(["switch", "--port", &fifo_arg, "--port", "pcap-out:/dev/null", "--duration", "4"]);
        c
    });
    let pid = p.child.id();
    let mut peak = 0;
    let t0 = Instant::now();
    let status = loop {
        if let Some(m) = peak_mib(pid) {
            peak = peak.max(m);
        }
        if let Some(s) = p.child.try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{}", p.stderr());
        std::thread::sleep(Duration::from_millis(50));
    };
    let written = writer.join().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(status.success(), "{status}: {}", p.stderr());
    let out = p.stdout.lock().unwrap().clone();
    eprintln!("streamed {} MiB through the FIFO; peak RSS {peak} MiB", written >> 20);
    assert!(written > 256 << 20, "the stream was too short to show anything: {written} bytes\n{out}");
    assert!(peak < 256, "peak RSS {peak} MiB reading an endless capture");
    assert!(out.contains("every frame accounted for"), "{out}");
}

/// `--max-action-lists`: `ovs-ofctl add-flow` with a new action list beyond the limit gets
/// OpenFlow's `OFPFMFC_TABLE_FULL` while the flows holding the table's lists are there; flows
/// reusing a list the table holds are still taken, and the metrics say how many lists there
/// are and how many were refused. Once the flows are deleted their lists are freed (about a
/// second later) and new lists are taken again.
#[test]
fn action_lists_past_the_limit_are_refused_with_table_full() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let mut p = Proc::start({
        let mut c = Command::new(RQVS);
        c.args(["switch", "--openflow", "ptcp:0", "--max-action-lists", "3", "--metrics", "127.0.0.1:0"]);
        c
    });
    let ready = p.wait_for("rqvs switch: ready", Duration::from_secs(20));
    let target = format!("tcp:127.0.0.1:{}", ptcp_port(&ready));
    let ofctl = |args: &[&str]| {
        let out = Command::new("ovs-ofctl").args(["-O", "OpenFlow13"]).args(args).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let flow = |i: u32| format!("priority=9,udp,tp_dst={i},actions=output:2,output:{}", 10 + i);
    for i in 1..=3 {
        let (ok, err) = ofctl(&["add-flow", &target, &flow(i)]);
        assert!(ok, "list {i} of 3: {err}");
    }
    // The flows hold their lists: a fourth list is refused.
    let (ok, err) = ofctl(&["add-flow", &target, &flow(4)]);
    assert!(!ok && err.contains("OFPFMFC_TABLE_FULL"), "a fourth list: {err}");
    // A list the table holds is taken; a single output needs no list.
    assert!(ofctl(&["add-flow", &target, &flow(2).replace("tp_dst=2", "tp_dst=99")]).0);
    assert!(ofctl(&["add-flow", &target, "priority=9,udp,tp_dst=5,actions=output:3"]).0);
    let log = p.wait_for("flow_mod refused: the action table is full", Duration::from_secs(5));
    assert!(log.contains("holds 3 distinct action lists"), "{log}");
    let metrics_at = ready.split("metrics http://").nth(1).and_then(|r| r.split('/').next()).expect("metrics address");
    let mut s = TcpStream::connect(metrics_at).unwrap();
    std::io::Write::write_all(&mut s, b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    assert!(body.contains("\nrqvs_action_lists 3\n"), "{body}");
    assert!(body.contains("\nrqvs_action_lists_limit 3\n"), "{body}");
    assert!(body.contains("\nrqvs_action_lists_refused_total 1\n"), "{body}");
    // Deleted, the flows' lists are freed: the fourth list is taken (within a few seconds).
    assert!(ofctl(&["del-flows", &target, "udp"]).0);
    let t = std::time::Instant::now();
    loop {
        let (ok, err) = ofctl(&["add-flow", &target, &flow(4)]);
        if ok {
            break;
        }
        assert!(err.contains("OFPFMFC_TABLE_FULL"), "{err}");
        assert!(t.elapsed() < Duration::from_secs(10), "the deleted flows' lists were not freed: {err}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut s = TcpStream::connect(metrics_at).unwrap();
    std::io::Write::write_all(&mut s, b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    assert!(body.contains("\nrqvs_action_lists_freed_total "), "{body}");
    assert!(!body.contains("\nrqvs_action_lists_freed_total 0\n"), "{body}");
    assert!(body.contains("\nrqvs_action_lists_stale_total 0\n"), "{body}");
    assert!(p.terminate().success(), "{}", p.stderr());
}
