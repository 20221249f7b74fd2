//! Per-flow counters through `ovs-ofctl`: a capture goes through `rqvs switch` (pcap-in port 1,
//! pcap-out ports 2 and 3; every design, one and two PMDs), then `ovs-ofctl -O OpenFlow13
//! dump-flows`' `n_packets`/`n_bytes`, `dump-aggregate` and `rqvs ctl dump-rules --stats` must
//! be those of the frames each flow is the reference winner of (`rqvs_classify::Reference`),
//! frames of several lengths. Loopback TCP only; skipped (with the reason printed) when
//! `ovs-ofctl` is missing, unless `RQVS_REQUIRE_OVS=1`.

mod common;
use common::{ctl, TempDir};

use std::collections::BTreeSet;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rqvs_flow::formats::ofctl;

/// A running `rqvs switch`, killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Running {
    /// `rqvs ctl exit` on `sock`, then waits (at most 10 s) for the exit.
    fn exit(&mut self, sock: &Path) -> std::process::ExitStatus {
        ctl(sock, &["exit"]);
        let t0 = Instant::now();
        loop {
            if let Some(s) = self.0.try_wait().unwrap() {
                return s;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "the switch did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Starts the switch with `rules`, `args` (ports, design, PMDs), the OpenFlow listener on
/// 127.0.0.1:`port` and a management socket; returns once both are up.
fn start_with(dir: &Path, rules: &Path, port: u16, args: &[&str]) -> Running {
    let sock = dir.join("ctl.sock");
    let child = Command::new(env!("CARGO_BIN_EXE_rqvs"))
        .args(["switch", "--rules", rules.to_str().unwrap(), "--ctl", sock.to_str().unwrap()])
        .args(args)
        .args(["--openflow", &format!("ptcp:127.0.0.1:{port}"), "--duration", "300"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let running = Running(child);
    let t0 = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() || !sock.exists() {
        assert!(t0.elapsed() < Duration::from_secs(20), "the switch's OpenFlow listener did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    running
}

/// `ovs-ofctl -O VERSION --no-names ARGS` (asserting success): its stdout.
fn ofctl_ok(version: &str, args: &[&str]) -> String {
    let out = Command::new("ovs-ofctl").args(["-O", version, "--no-names"]).args(args).output().unwrap();
    assert!(out.status.success(), "ovs-ofctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Flow text in one normal form (rqvs's writer), ids and order ignored.
fn normal(text: &str) -> BTreeSet<String> {
    ofctl::parse_flows("flows", text).unwrap().iter().flat_map(|r| ofctl::format_flows(r).unwrap()).collect()
}

/// One `dump-flows` line as flow text: the counters and table dropped.
fn dumped(line: &str) -> BTreeSet<String> {
    let flow: Vec<&str> = line
        .split(", ")
        .filter(|f| {
            !["duration=", "table=", "n_packets=", "n_bytes=", "idle_age=", "hard_age="]
                .iter()
                .any(|p| f.trim_start().starts_with(p))
        })
        .collect();
    normal(&flow.join(","))
}

/// The switch's flows: overlapping, one never hit.
const COUNTED_FLOWS: &str = "\
priority=400,udp,tp_dst=7,actions=output:3
priority=300,udp,tp_dst=53,actions=output:2
priority=200,udp,nw_src=10.1.0.0/16,actions=output:3
priority=150,tcp,nw_src=10.1.0.0/16,tp_dst=80,actions=output:2
priority=100,ip,nw_dst=10.2.0.0/16,actions=output:2
priority=90,tcp,tp_dst=9999,actions=output:3
priority=50,tcp,actions=output:3
priority=10,ip,actions=drop
";

/// `dump-flows` as (flow text, (n_packets, n_bytes)).
fn dumped_counts(text: &str) -> std::collections::BTreeMap<String, (u64, u64)> {
    let mut out = std::collections::BTreeMap::new();
    for l in text.lines().filter(|l| l.trim_start().starts_with("cookie=")) {
        let field = |name: &str| -> u64 {
            let f = l
                .split(", ")
                .find_map(|f| f.trim_start().strip_prefix(name))
                .unwrap_or_else(|| panic!("{name} in {l}"));
            f.trim_end_matches(',').parse().unwrap()
        };
        let flow = dumped(l).into_iter().next().unwrap();
        out.insert(flow, (field("n_packets="), field("n_bytes=")));
    }
    out
}

/// A capture through the switch: each flow's `n_packets`/`n_bytes` in `ovs-ofctl dump-flows`
/// (and the sums in `dump-aggregate`) are those of the frames whose reference winner it is, in
/// every design with one and two PMDs. Frames of several lengths: the bytes are their lengths
/// as the switch receives them.
#[test]
fn dump_flows_counts_each_flows_packets_and_bytes() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    use rqvs_flow::frame::extract_datapath;
    use rqvs_flow::FlowKey;
    let rules = ofctl::parse_flows("flows", COUNTED_FLOWS).unwrap();
    // Keys over the flows' fields; repeated, so caches hit.
    let mut x: u64 = 0x1234_5678;
    let mut next = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let pool: Vec<FlowKey> = (0..300)
        .map(|_| {
            let src = [0x0a01_0000, 0x0a02_0000, 0x0a03_0000][next(3) as usize] | next(65536) as u32;
            let dst = [0x0a01_0000, 0x0a02_0000, 0x0a03_0000][next(3) as usize] | next(65536) as u32;
            let proto = [6, 17, 1][next(3) as usize];
            let dport = [53, 80, 443, 9999, 1234][next(5) as usize];
            let mut k = FlowKey::ipv4(src, dst, proto, 1024 + next(1000) as u16, if proto == 1 { 0 } else { dport });
            if proto == 1 {
                k.tp_src = 8;
            }
            if next(3) == 0 {
                // A VLAN-tagged frame.
                k.vlan_tci = 0x1000 | next(4096) as u16;
            }
            k
        })
        .collect();
    // Frames of several lengths (Ethernet padding after the headers), each as the capture holds it.
    let frames: Vec<Vec<u8>> = (0..4000)
        .map(|_| {
            let mut f = rqvs_flow::frame::build_frame(&pool[next(pool.len() as u64) as usize]);
            f.resize(f.len() + [0, 0, 4, 100, 1400][next(5) as usize], 0);
            f
        })
        .collect();
    let mut pcap: Vec<u8> =
        [0xa1b2_c3d4_u32.to_le_bytes(), [2, 0, 4, 0], [0; 4], [0; 4], 65535_u32.to_le_bytes(), 1_u32.to_le_bytes()]
            .concat();
    for (i, f) in frames.iter().enumerate() {
        for field in [0, i as u32, f.len() as u32, f.len() as u32] {
            pcap.extend_from_slice(&field.to_le_bytes());
        }
        pcap.extend_from_slice(f);
    }
    let reference = rqvs_classify::Reference::build(&rules).unwrap();
    let mut want: std::collections::BTreeMap<String, (u64, u64)> =
        rules.iter().map(|r| (ofctl::format_flows(r).unwrap().remove(0), (0, 0))).collect();
    for f in &frames {
        if let Some(r) = reference.lookup_rule(&extract_datapath(f, 1).unwrap()) {
            let e = want.get_mut(&ofctl::format_flows(r).unwrap()[0]).unwrap();
            e.0 += 1;
            e.1 += f.len() as u64;
        }
    }
    assert!(want.values().filter(|c| c.0 > 0).count() >= 5 && want.values().any(|c| c.0 == 0), "{want:?}");
    let (packets, bytes): (u64, u64) = want.values().fold((0, 0), |(p, b), c| (p + c.0, b + c.1));
    for design in ["orig", "ccache", "cflows"] {
        for pmds in ["1", "2"] {
            let tmp = TempDir::new(&format!("cli-openflow-counts-{design}-{pmds}"));
            let (rules_file, capture) = (tmp.join("rules.txt"), tmp.join("in.pcap"));
            std::fs::write(&rules_file, COUNTED_FLOWS).unwrap();
            std::fs::write(&capture, &pcap).unwrap();
            let port = free_port();
            let in_port = format!("pcap-in:{}", capture.display());
            let out2 = format!("pcap-out:{}", tmp.join("p2.pcap").display());
            let out3 = format!("pcap-out:{}", tmp.join("p3.pcap").display());
            let args = ["--design", design, "--pmds", pmds, "--port", &in_port, "--port", &out2, "--port", &out3];
            let mut sw = start_with(&tmp.0, &rules_file, port, &args);
            let sock = tmp.join("ctl.sock");
            // The capture is done once the port has delivered every frame and the PMDs have
            // decided every one (an ended PMD's last counters stay in `show`).
            let t0 = Instant::now();
            loop {
                let show: serde_json::Value = serde_json::from_str(&ctl(&sock, &["--json", "show"])).unwrap();
                let t = &show["total"];
                let decided = ["forwarded", "to_controller", "dropped", "malformed", "lost"]
                    .iter()
                    .map(|k| t[k].as_u64().unwrap_or(0))
                    .sum::<u64>();
                if show["ports"][0]["rx_packets"] == frames.len()
                    && t["rx"] == frames.len()
                    && decided == frames.len() as u64
                {
                    break;
                }
                assert!(t0.elapsed() < Duration::from_secs(20), "{design}: the capture was not switched: {show}");
                std::thread::sleep(Duration::from_millis(50));
            }
            let t = format!("tcp:127.0.0.1:{port}");
            let got = dumped_counts(&ofctl_ok("OpenFlow13", &["dump-flows", &t]));
            let want_normal: std::collections::BTreeMap<String, (u64, u64)> =
                want.iter().map(|(f, c)| (normal(f).into_iter().next().unwrap(), *c)).collect();
            assert_eq!(got, want_normal, "{design} {pmds} PMDs: per-flow n_packets, n_bytes");
            // `rqvs ctl dump-rules --stats` says the same.
            let ctl_counts: std::collections::BTreeMap<String, (u64, u64)> = ctl(&sock, &["dump-rules", "--stats"])
                .lines()
                .map(|l| {
                    let f: Vec<&str> = l.splitn(4, ", ").collect();
                    let n = |s: &str, k: &str| s.strip_prefix(k).unwrap().parse::<u64>().unwrap();
                    (normal(f[3]).into_iter().next().unwrap(), (n(f[1], "n_packets="), n(f[2], "n_bytes=")))
                })
                .collect();
            assert_eq!(ctl_counts, want_normal, "{design} {pmds} PMDs: rqvs ctl dump-rules --stats");
            let agg = ofctl_ok("OpenFlow13", &["dump-aggregate", &t]);
            assert!(
                agg.contains(&format!("packet_count={packets} byte_count={bytes} flow_count={}", rules.len())),
                "{design} {pmds} PMDs: {agg}"
            );
            let status = sw.exit(&sock);
            assert!(status.success());
        }
    }
}
