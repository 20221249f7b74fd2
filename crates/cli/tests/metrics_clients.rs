//! The metrics endpoint under clients that misbehave, on the real binary over loopback (the
//! embedded workload's pcap ports; no root needed): stalled clients (connected, silent) and a
//! client trickling one byte a second do not delay the next scrape, which is answered at once;
//! the trickler is dropped after 5 s in all; beyond 16 connections at once one more gets 503.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use rqvs_testkit::proc::Logged;

const RQVS: &str = env!("CARGO_BIN_EXE_rqvs");

/// `rqvs switch --metrics 127.0.0.1:0 --openflow ptcp:0` (it runs until stopped): the process
/// and the metrics address from its ready line.
fn start() -> (Logged, String) {
    let mut cmd = Command::new(RQVS);
    cmd.args(["switch", "--metrics", "127.0.0.1:0", "--openflow", "ptcp:0"]);
    let mut p = Logged::start(cmd);
    let e = p.wait_for("metrics http://", Duration::from_secs(20));
    let rest = e.split("metrics http://").nth(1).expect("waited for it");
    let addr = rest.split('/').next().unwrap().to_string();
    (p, addr)
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
    assert!(!p.stderr().contains("panicked"));
}

#[test]
fn clients_beyond_the_limit_get_503() {
    let (mut p, addr) = start();
    let silent: Vec<TcpStream> = (0..16).map(|_| TcpStream::connect(&addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let (status, took) = scrape(&addr);
    assert_eq!(status, "HTTP/1.1 503 Service Unavailable");
    assert!(took < Duration::from_secs(2), "{took:?}");
    // The switch logs before it answers, but its log reaches this process through a pipe and a
    // reader thread, which may not have it yet: read it until the line is there.
    p.wait_for("16 scrapes in progress: answered 503", Duration::from_secs(5));
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
