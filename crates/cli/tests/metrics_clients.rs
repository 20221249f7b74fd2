//! The metrics endpoint under clients that misbehave, on the real binary over loopback (the
//! embedded workload's pcap ports; no root needed): stalled clients (connected, silent) and a
//! client trickling one byte a second do not delay the next scrape, which is answered at once;
//! the trickler is dropped after 5 s in all; beyond 16 connections at once one more gets 503.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const RQVS: &str = env!("CARGO_BIN_EXE_rqvs");

struct Proc {
    child: Child,
    stderr: Arc<Mutex<String>>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `rqvs switch --metrics 127.0.0.1:0 --openflow ptcp:0` (it runs until stopped): the process
/// and the metrics address from its ready line.
fn start() -> (Proc, String) {
    let mut child = Command::new(RQVS)
        .args(["switch", "--metrics", "127.0.0.1:0", "--openflow", "ptcp:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = Arc::new(Mutex::new(String::new()));
    let (r, into) = (child.stderr.take().unwrap(), stderr.clone());
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines() {
            let Ok(line) = line else { return };
            let mut s = into.lock().unwrap();
            s.push_str(&line);
            s.push('\n');
        }
    });
    let p = Proc { child, stderr };
    let t0 = Instant::now();
    loop {
        let e = p.stderr.lock().unwrap().clone();
        if let Some(rest) = e.split("metrics http://").nth(1) {
            return (p, rest.split('/').next().unwrap().to_string());
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "not ready: {e}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One scrape: the status line and how long it took.
fn scrape(addr: &str) -> (String, Duration) {
    let t0 = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    (reply.lines().next().unwrap_or("").to_string(), t0.elapsed())
}

#[test]
fn a_stalled_client_does_not_hold_the_next_scrape() {
    let (p, addr) = start();
    let (status, _) = scrape(&addr);
    assert_eq!(status, "HTTP/1.1 200 OK");
    // Five silent clients and one trickling a byte a second.
    let silent: Vec<TcpStream> = (0..5).map(|_| TcpStream::connect(&addr).unwrap()).collect();
    let mut trickler = TcpStream::connect(&addr).unwrap();
    let t_trickle = Instant::now();
    let trickle = std::thread::spawn(move || {
        trickler.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        for b in b"GET /metrics HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" {
            if trickler.write_all(&[*b]).is_err() {
                return;
            }
            let mut buf = [0u8; 64];
            match trickler.read(&mut buf) {
                Ok(0) => return, // closed by the switch
                Ok(_) => return,
                Err(_) => {}
            }
            if t_trickle.elapsed() > Duration::from_secs(20) {
                return;
            }
        }
    });
    std::thread::sleep(Duration::from_millis(200));
    for _ in 0..3 {
        let (status, took) = scrape(&addr);
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(took < Duration::from_secs(2), "a scrape behind stalled clients took {took:?}");
    }
    trickle.join().unwrap();
    let held = t_trickle.elapsed();
    assert!(held >= Duration::from_secs(4) && held < Duration::from_secs(8), "the trickler was held {held:?}");
    drop(silent);
    assert!(!p.stderr.lock().unwrap().contains("panicked"));
}

#[test]
fn clients_beyond_the_limit_get_503() {
    let (p, addr) = start();
    let silent: Vec<TcpStream> = (0..16).map(|_| TcpStream::connect(&addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let (status, took) = scrape(&addr);
    assert_eq!(status, "HTTP/1.1 503 Service Unavailable");
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(p.stderr.lock().unwrap().contains("16 scrapes in progress: answered 503"));
    drop(silent);
    // The silent ones close: scrapes are served again.
    let t0 = Instant::now();
    loop {
        let (status, _) = scrape(&addr);
        if status == "HTTP/1.1 200 OK" {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "still refused: {status}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
