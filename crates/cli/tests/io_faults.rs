//! Faults of issue 40 not covered elsewhere, on the real binary (loopback and files only; no
//! root needed):
//!
//! - a controller that disconnects in the middle of a flow dump (a 20,000-flow FLOW_STATS reply
//!   being written, the client gone after its first bytes, or never reading at all), ten times
//!   each: the switch serves the next connection (whose dump is whole), the table is unchanged,
//!   and it stops cleanly (exit 0 at SIGTERM);
//! - `--json` and `pcap-out` on a full disk (`/dev/full`): a one-line error naming the file and
//!   `No space left on device`, exit 1, no panic.
//!
//! (A disconnect in the middle of a bundle: `tests/thread_faults.rs`.)

mod common;
use common::{ctl, TempDir};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rqvs_openflow::flow_mod::FlowStatsRequest;
use rqvs_openflow::multipart::{MultipartRequest, MultipartRequestBody};
use rqvs_openflow::{encode, Message, OFP14};

const RQVS: &str = env!("CARGO_BIN_EXE_rqvs");

/// Reads one whole OpenFlow message.
fn read_msg(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut h = [0u8; 8];
    s.read_exact(&mut h)?;
    let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let mut body = vec![0u8; len.saturating_sub(8)];
    s.read_exact(&mut body)?;
    Ok([h.to_vec(), body].concat())
}

/// Connects and negotiates OpenFlow 1.4.
fn connect(port: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(read_msg(&mut s).unwrap()[1], 0, "the switch's HELLO");
    s.write_all(&[OFP14, 0, 0, 16, 0, 0, 0, 1, 0, 1, 0, 8, 0, 0, 0, 1 << 5]).unwrap();
    s
}

/// A FLOW_STATS request for every flow.
fn dump_request(xid: u32) -> Vec<u8> {
    let m = MultipartRequest { flags: 0, body: MultipartRequestBody::Flow(FlowStatsRequest::all()) };
    encode(OFP14, xid, &Message::MultipartRequest(m)).unwrap()
}

/// The flows a whole dump reports: MULTIPART_REPLY parts read until the one without MORE.
fn whole_dump(s: &mut TcpStream, xid: u32) -> usize {
    s.write_all(&dump_request(xid)).unwrap();
    let mut flows = 0;
    loop {
        let m = read_msg(s).expect("a reply part");
        if m[1] != 19 {
            continue; // not a MULTIPART_REPLY (an echo)
        }
        let body = &m[16..];
        flows += rqvs_openflow::flow_mod::FlowStats::decode_all(OFP14, body).expect("flow stats").len();
        if u16::from_be_bytes([m[10], m[11]]) & 1 == 0 {
            return flows;
        }
    }
}

/// `rqvs switch` with its stderr collected.
struct Switch {
    child: Child,
    stderr: Arc<Mutex<String>>,
}

impl Switch {
    fn start(args: &[&str]) -> (Switch, String) {
        let mut child = Command::new(RQVS)
            .arg("switch")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (r, into) = (child.stderr.take().unwrap(), stderr.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(r).lines().map_while(Result::ok) {
                let mut s = into.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        let mut sw = Switch { child, stderr };
        let t0 = Instant::now();
        loop {
            let e = sw.stderr();
            if e.contains("rqvs switch: ready") {
                return (sw, e);
            }
            if let Some(s) = sw.child.try_wait().unwrap() {
                panic!("ended ({s}) before it was ready: {e}");
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "not ready: {e}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// SIGTERM (by pid): whether it exited 0 within 20 s.
    fn terminate(&mut self) -> bool {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) has no memory effects; the pid is our child's, not yet reaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(20) {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[test]
fn a_controller_gone_mid_dump_leaves_the_switch_serving() {
    const FLOWS: usize = 20_000;
    let dir = TempDir::new("cli-faults-dump");
    let sock = dir.join("sw.ctl");
    let rules = dir.join("rules.txt");
    let text: String = (0..FLOWS)
        .map(|i| format!("priority={},udp,nw_dst=10.{}.{}.1,actions=output:2\n", 10 + i % 7, i / 250, i % 250))
        .collect();
    std::fs::write(&rules, text).unwrap();
    let (mut sw, ready) =
        Switch::start(&["--openflow", "ptcp:0", "--ctl", sock.to_str().unwrap(), "--rules", rules.to_str().unwrap()]);
    let port: u16 = ready
        .split("OpenFlow ptcp:127.0.0.1:")
        .nth(1)
        .unwrap()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let before = ctl(&sock, &["dump-rules"]);
    let t0 = Instant::now();
    for round in 0..10u32 {
        // Gone after the first bytes of the reply.
        let mut a = connect(port);
        a.write_all(&dump_request(2 + round)).unwrap();
        let mut first = [0u8; 512];
        a.read_exact(&mut first).unwrap();
        drop(a);
        // Never reads: the reply backs up in the socket; gone while the switch is writing.
        let mut b = connect(port);
        b.write_all(&dump_request(3 + round)).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        drop(b);
    }
    // The next controller gets a whole dump; the table is as it was.
    let mut c = connect(port);
    assert_eq!(whole_dump(&mut c, 99), FLOWS, "a whole dump after the aborted ones: {}", sw.stderr());
    drop(c);
    assert_eq!(ctl(&sock, &["dump-rules"]), before, "aborted dumps changed the table");
    let log = sw.stderr();
    assert!(!log.contains("panicked"), "{log}");
    assert!(sw.terminate(), "the switch did not stop cleanly after the aborted dumps: {}", sw.stderr());
    eprintln!("20 aborted dumps of {FLOWS} flows and a whole one in {:.1} s", t0.elapsed().as_secs_f64());
}

/// `rqvs switch ARGS` on the embedded workload's pcap ports, to its end: (exit code, stderr).
fn run_to_end(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(RQVS).arg("switch").args(args).stdin(Stdio::null()).stdout(Stdio::null()).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn json_and_pcap_out_on_a_full_disk_are_one_line_errors() {
    let dir = TempDir::new("cli-faults-full");
    // --json: the run completes, writing its report fails.
    let (code, err) = run_to_end(&["--json", "/dev/full", "--ctl", dir.join("a.ctl").to_str().unwrap()]);
    assert_eq!(code, Some(1), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert_eq!(last, "rqvs: error: /dev/full: cannot write: No space left on device (os error 28)", "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // pcap-out: the port's first write fails; the switch stops with the port named.
    let input = dir.join("in.pcap");
    let xz = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/default/acl1_1k_zipf.pcap.xz");
    let pcap = Command::new("xz").arg("-dc").arg(&xz).output().unwrap();
    assert!(pcap.status.success() && pcap.stdout.len() > 1000);
    std::fs::write(&input, &pcap.stdout).unwrap();
    let (code, err) = run_to_end(&[
        "--port",
        &format!("pcap-in:{}", input.display()),
        "--port",
        "pcap-out:/dev/full",
        "--port",
        &format!("pcap-out:{}", dir.join("out3.pcap").display()),
        "--ctl",
        dir.join("b.ctl").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("rqvs: error: port 2 (pcap-out:/dev/full): /dev/full: cannot write: No space left on device"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}
