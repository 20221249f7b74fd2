//! `rqvs switch --metrics`: the Prometheus/OpenMetrics endpoint scraped while traffic flows
//! through a switch on veths (namespaces the test owns; skipped without root unless
//! `RQVS_REQUIRE_NETNS=1`).

mod common;
use common::{ctl, TempDir};

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rqvs_ports::testnet::{self, Netns, RawSocket};

/// The endpoint inside the switch's namespace (its own loopback: no port can collide).
const ADDR: &str = "127.0.0.1:19100";

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn udp_frame(dst_port: u16, n: u16) -> Vec<u8> {
    let mut k = rqvs_flow::FlowKey::ipv4(0x0a00_0001, 0x0a00_0002, 17, 1000 + n, dst_port);
    k.dl_src = [2, 0, 0, 0, 0, 1];
    k.dl_dst = [2, 0, 0, 0, 0, 2];
    rqvs_flow::frame::build_frame(&k.wire())
}

/// One HTTP exchange with the endpoint, from inside `ns`: (status line, headers, body).
fn http(ns: &Netns, request: &str) -> (String, String, String) {
    let request = request.to_string();
    ns.run(move || {
        let mut s = TcpStream::connect(ADDR).expect("connect to the metrics endpoint");
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).unwrap();
        let (head, body) = reply.split_once("\r\n\r\n").unwrap_or((&reply, ""));
        let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
        (status.to_string(), headers.to_string(), body.to_string())
    })
    .unwrap()
}

/// The samples of a scrape: `name{labels}` → value.
fn scrape(ns: &Netns) -> HashMap<String, f64> {
    let (status, headers, body) = http(ns, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(status.contains("200") && headers.contains("text/plain; version=0.0.4"), "{status}\n{headers}");
    samples(&body)
}

fn samples(body: &str) -> HashMap<String, f64> {
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap_or_else(|| panic!("a sample line: {l}"));
            (k.to_string(), v.parse().unwrap_or_else(|_| panic!("a number: {l}")))
        })
        .collect()
}

fn get(m: &HashMap<String, f64>, k: &str) -> f64 {
    *m.get(k).unwrap_or_else(|| panic!("no sample {k} in the scrape:\n{m:#?}"))
}

/// Counters while traffic flows and after it: the PMD's packets and hit counts add up, per port
/// frames and the ports' transmit counters equal what the hosts sent and got, counters never
/// go back (also across `pmd-stats-clear`), the design and coverage are there; OpenMetrics on
/// request; bad requests get an error status and do not stop the endpoint.
#[test]
fn metrics_endpoint_while_traffic_flows() {
    if !testnet::available("metrics_endpoint_while_traffic_flows") {
        return;
    }
    let tmp = TempDir::new("metrics");
    let sock = tmp.join("ctl.sock");
    let flows = tmp.join("flows.txt");
    std::fs::write(&flows, "priority=10,udp,tp_dst=53,actions=output:2\n").unwrap();
    let sw = Netns::new("msw").unwrap();
    let (h1, h2) = (Netns::new("mh1").unwrap(), Netns::new("mh2").unwrap());
    for (h, p, e) in [(&h1, "p1", "e1"), (&h2, "p2", "e2")] {
        sw.veth(p, h, e, 1).unwrap();
        sw.wait_running(p, Duration::from_secs(3)).unwrap();
        h.wait_running(e, Duration::from_secs(3)).unwrap();
    }
    sw.ip(&["link", "set", "lo", "up"]).unwrap();
    let s1 = h1.run(|| RawSocket::open("e1")).unwrap().unwrap();
    let s2 = h2.run(|| RawSocket::open("e2")).unwrap().unwrap();
    for design in ["orig", "cflows"] {
        let child = Command::new("ip")
            .args(["netns", "exec", sw.name(), env!("CARGO_BIN_EXE_rqvs"), "switch", "--port", "p1", "--port", "p2"])
            .args(["--rules", flows.to_str().unwrap(), "--design", design, "--ctl", sock.to_str().unwrap()])
            .args(["--metrics", ADDR])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut running = Running(child);
        let t0 = Instant::now();
        while !sock.exists() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(200));

        let (forward, dropped) = (300u64, 60u64);
        let mut before = scrape(&sw);
        let mut got = 0u64;
        for i in 0..forward + dropped {
            let port = if i < forward { 53 } else { 80 };
            s1.send(&udp_frame(port, (i % 40) as u16)).unwrap();
            if i % 90 == 89 {
                // Mid-stream: every counter only grows.
                let now = scrape(&sw);
                for (k, v) in &before {
                    if k.contains("_total") {
                        assert!(now.get(k).is_some_and(|n| n >= v), "{k} went back: {v} → {:?}", now.get(k));
                    }
                }
                before = now;
            }
        }
        while s2.recv(Duration::from_millis(500)).unwrap().is_some() {
            got += 1;
        }
        assert_eq!(got, forward, "{design}: frames out of port 2");
        let t0 = Instant::now();
        let m = loop {
            let m = scrape(&sw);
            if get(&m, r#"rqvs_pmd_packets_total{pmd="0"}"#) as u64 == forward + dropped
                || t0.elapsed() > Duration::from_secs(5)
            {
                break m;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let pmd = |name: &str| get(&m, &format!(r#"{name}{{pmd="0"}}"#)) as u64;
        let frames =
            |fate: &str| get(&m, &format!(r#"rqvs_pmd_frames_total{{pmd="0",port="1",fate="{fate}"}}"#)) as u64;
        assert_eq!(pmd("rqvs_pmd_packets_total"), forward + dropped, "{design}");
        assert_eq!(
            (frames("rx"), frames("forwarded"), frames("dropped")),
            (forward + dropped, forward, dropped),
            "{design}"
        );
        // No port is policed here: the policed part of the drops is there, and zero.
        assert_eq!(get(&m, r#"rqvs_pmd_frames_policed_total{pmd="0",port="1"}"#), 0.0, "{design}");
        assert_eq!(get(&m, r#"rqvs_port_tx_packets_total{port="2",name="p2",spec="p2:afpacket"}"#) as u64, forward);
        assert_eq!(
            get(&m, r#"rqvs_port_rx_packets_total{port="1",name="p1",spec="p1:afpacket"}"#) as u64,
            forward + dropped
        );
        assert_eq!(get(&m, r#"rqvs_port_up{port="1",name="p1",spec="p1:afpacket"}"#), 1.0);
        assert_eq!(get(&m, &format!(r#"rqvs_info{{design="{design}",version="{}"}}"#, env!("CARGO_PKG_VERSION"))), 1.0);
        assert_eq!(get(&m, &format!(r#"rqvs_pmd_design{{pmd="0",design="{design}"}}"#)), 1.0);
        assert_eq!(get(&m, "rqvs_openflow_rules"), 1.0);
        let hits = pmd("rqvs_pmd_emc_hits_total") + pmd("rqvs_pmd_megaflow_hits_total");
        if design == "orig" {
            // Every packet: a cache hit or an upcall (none lost at this rate).
            assert_eq!(hits + pmd("rqvs_pmd_upcalls_total") + pmd("rqvs_pmd_lost_total"), forward + dropped);
            assert!(pmd("rqvs_pmd_upcalls_total") >= 2 && pmd("rqvs_pmd_megaflows") >= 1 && pmd("rqvs_pmd_masks") >= 1);
            assert!(get(&m, "rqvs_handler_upcalls_total") as u64 >= pmd("rqvs_pmd_upcalls_total"));
        } else {
            // CFLOWS: every packet from the EMC, the model, the remainder or no rule.
            let model = pmd("rqvs_pmd_model_hits_total") + pmd("rqvs_pmd_remainder_hits_total");
            assert_eq!(pmd("rqvs_pmd_emc_hits_total") + model + pmd("rqvs_pmd_no_match_total"), forward + dropped);
            assert_eq!(pmd("rqvs_pmd_no_match_total"), dropped);
            let coverage = get(&m, r#"rqvs_pmd_model_coverage{pmd="0"}"#);
            assert!((0.0..=1.0).contains(&coverage));
        }
        // pmd-stats-clear is the operator's baseline, not the scraper's.
        assert!(ctl(&sock, &["pmd-stats-show"]).contains(&format!("packets received: {}", forward + dropped)));
        ctl(&sock, &["pmd-stats-clear"]);
        std::thread::sleep(Duration::from_millis(100));
        assert!(ctl(&sock, &["pmd-stats-show"]).contains("packets received: 0"));
        assert_eq!(pmd("rqvs_pmd_packets_total"), scrape(&sw)[r#"rqvs_pmd_packets_total{pmd="0"}"#] as u64);

        // OpenMetrics when asked.
        let (status, headers, body) =
            http(&sw, "GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text; version=1.0.0\r\n\r\n");
        assert!(status.contains("200") && headers.contains("application/openmetrics-text"), "{headers}");
        assert!(body.ends_with("# EOF\n") && body.contains("# TYPE rqvs_pmd_packets counter\n"), "{body}");
        assert_eq!(
            samples(&body.replace("# EOF\n", ""))[r#"rqvs_pmd_packets_total{pmd="0"}"#] as u64,
            forward + dropped
        );
        // Bad requests: an error status each, and the endpoint still answers.
        for (req, want) in [
            ("HELLO\r\n\r\n", "400"),
            ("POST /metrics HTTP/1.1\r\n\r\n", "405"),
            ("GET /nothing HTTP/1.1\r\n\r\n", "404"),
        ] {
            let (status, _, _) = http(&sw, req);
            assert!(status.contains(want), "{req:?}: {status}");
        }
        let long = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20_000));
        assert!(http(&sw, &long).0.contains("431"));
        sw.run(|| drop(TcpStream::connect(ADDR).unwrap())).unwrap(); // connects and hangs up
        assert!(scrape(&sw).contains_key(r#"rqvs_pmd_packets_total{pmd="0"}"#));

        ctl(&sock, &["exit"]);
        let t0 = Instant::now();
        while running.0.try_wait().unwrap().is_none() {
            assert!(t0.elapsed() < Duration::from_secs(10), "the switch did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(running.0.try_wait().unwrap().unwrap().success());
    }
}
