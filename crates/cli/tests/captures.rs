//! Captures as they come: every link type gives the keys of its Ethernet equivalent — captures
//! made by conversion from the ClassBench-derived Ethernet pcap, and real `tcpdump -i any`
//! captures on namespaces this test owns (root only; skipped otherwise, a failure with
//! `RQVS_REQUIRE_NETNS=1`) — and a capture larger than the memory budget streams through `rqvs
//! replay` with bounded peak RSS.

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{rqvs, TempDir};
use rqvs_flow::formats::pcap::{self, LinkType};
use rqvs_flow::FlowKey;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/default").join(name)
}

fn ok(args: &[&str]) -> String {
    let out = rqvs(args);
    assert!(out.status.success(), "rqvs {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The keys a capture of `link` gives for the Ethernet key `k` (README, "Input formats").
fn as_link(link: LinkType, k: &FlowKey) -> FlowKey {
    match link {
        LinkType::Ethernet => *k,
        LinkType::LinuxSll | LinkType::LinuxSll2 => FlowKey { dl_dst: [0; 6], ..*k },
        _ => FlowKey { dl_dst: [0; 6], dl_src: [0; 6], vlan_tci: 0, ..*k },
    }
}

fn link_number(path: &Path) -> u32 {
    let b = std::fs::read(path).unwrap();
    u32::from_le_bytes([b[20], b[21], b[22], b[23]])
}

/// The frames of a capture with their timestamps (ns).
type Frames = Vec<(Vec<u8>, u64)>;

/// A pcapng (little-endian) with one interface per capture, each of its capture's link type,
/// and the packets of the captures interleaved (packet i of each in turn), timestamps in µs.
fn mixed_pcapng(captures: &[(LinkType, Frames)]) -> Vec<u8> {
    fn block(out: &mut Vec<u8>, block_type: u32, body: &[u8]) {
        let len = 12 + body.len().div_ceil(4) * 4;
        out.extend_from_slice(&block_type.to_le_bytes());
        out.extend_from_slice(&(len as u32).to_le_bytes());
        out.extend_from_slice(body);
        out.resize(out.len() + (4 - body.len() % 4) % 4, 0);
        out.extend_from_slice(&(len as u32).to_le_bytes());
    }
    let mut out = Vec::new();
    let mut shb = vec![0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0];
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    block(&mut out, 0x0a0d_0d0a, &shb);
    for (link, _) in captures {
        let mut idb = (link.number() as u16).to_le_bytes().to_vec();
        idb.extend_from_slice(&[0, 0]);
        idb.extend_from_slice(&0u32.to_le_bytes());
        block(&mut out, 1, &idb);
    }
    let longest = captures.iter().map(|c| c.1.len()).max().unwrap_or(0);
    for i in 0..longest {
        for (iface, (_, frames)) in captures.iter().enumerate() {
            let Some((frame, ts_ns)) = frames.get(i) else { continue };
            let us = ts_ns / 1_000;
            let mut epb = (iface as u32).to_le_bytes().to_vec();
            epb.extend_from_slice(&((us >> 32) as u32).to_le_bytes());
            epb.extend_from_slice(&(us as u32).to_le_bytes());
            epb.extend_from_slice(&(frame.len() as u32).to_le_bytes());
            epb.extend_from_slice(&(frame.len() as u32).to_le_bytes());
            epb.extend_from_slice(frame);
            block(&mut out, 6, &epb);
        }
    }
    out
}

/// The raw frames and timestamps of a classic pcap (little-endian, µs), as written.
fn frames_of(path: &Path) -> Frames {
    let b = std::fs::read(path).unwrap();
    let nanos = b[..4] == [0x4d, 0x3c, 0xb2, 0xa1];
    assert!(nanos || b[..4] == [0xd4, 0xc3, 0xb2, 0xa1], "{}: expected a little-endian pcap", path.display());
    let mut at = 24;
    let mut out = Vec::new();
    while at + 16 <= b.len() {
        let f = |i: usize| u64::from(u32::from_le_bytes([b[at + i], b[at + i + 1], b[at + i + 2], b[at + i + 3]]));
        let (sec, frac, len) = (f(0), f(4), f(8) as usize);
        out.push((b[at + 16..at + 16 + len].to_vec(), sec * 1_000_000_000 + frac * if nanos { 1 } else { 1_000 }));
        at += 16 + len;
    }
    out
}

/// The ClassBench-derived Ethernet pcap converted to every link type reads back as the same
/// keys, with the link type's MACs; the classification is the same; a pcapng mixing them too.
#[test]
fn converted_link_types_give_the_keys_of_their_ethernet_equivalent() {
    let dir = TempDir::new("captures-convert");
    let trace = data("acl1_1k_trace.xz");
    let eth = dir.join("eth.pcap");
    ok(&["convert", "trace", trace.to_str().unwrap(), "--to", "pcap", "-o", eth.to_str().unwrap()]);
    let want = pcap::read_capture(&eth, 1).unwrap().keys;
    assert_eq!(want.len(), 9_328);
    let classify = |path: &Path| {
        let out = ok(&["classify", "--trace", path.to_str().unwrap(), "--json", "-"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        (v["packets"].as_u64().unwrap(), v["matched"].as_u64().unwrap(), v["mismatches"].as_u64().unwrap())
    };
    let eth_classified = classify(&eth);
    let mut all = vec![(LinkType::Ethernet, frames_of(&eth))];
    for (arg, link, number) in [
        ("raw", LinkType::Raw, 101),
        ("ipv4", LinkType::Ipv4, 228),
        ("null", LinkType::Null, 0),
        ("loop", LinkType::Loop, 108),
        ("sll", LinkType::LinuxSll, 113),
        ("sll2", LinkType::LinuxSll2, 276),
    ] {
        let path = dir.join(format!("{arg}.pcap"));
        ok(&["convert", "trace", eth.to_str().unwrap(), "--to", "pcap", "--link", arg, "-o", path.to_str().unwrap()]);
        assert_eq!(link_number(&path), number, "{arg}");
        let got = pcap::read_capture(&path, 1).unwrap();
        let expected: Vec<FlowKey> = want.iter().map(|k| as_link(link, k)).collect();
        assert_eq!(got.keys, expected, "{arg}");
        assert_eq!(classify(&path), eth_classified, "{arg}");
        all.push((link, frames_of(&path)));
    }
    // One pcapng, one interface per link type, packets interleaved.
    let mixed = dir.join("mixed.pcapng");
    std::fs::write(&mixed, mixed_pcapng(&all)).unwrap();
    let got = pcap::read_capture(&mixed, 1).unwrap();
    let expected: Vec<FlowKey> =
        want.iter().flat_map(|k| all.iter().map(|(link, _)| as_link(*link, k)).collect::<Vec<_>>()).collect();
    assert_eq!(got.keys.len(), expected.len());
    assert_eq!(got.keys, expected);
    // As a ClassBench trace (5-tuple and flags), every packet seven times in a row.
    let text = ok(&["convert", "trace", mixed.to_str().unwrap(), "--to", "classbench"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 7 * 9_328);
    assert!(lines.chunks(7).all(|c| c.iter().all(|l| *l == c[0])), "interleaved packets differ");
}

/// xz, gzip and zstd inputs and `-` (standard input) read as the plain file does.
#[test]
fn compressed_captures_and_standard_input() {
    let dir = TempDir::new("captures-compressed");
    let sll = dir.join("sll.pcap");
    let trace = data("acl1_1k_trace.xz");
    ok(&["convert", "trace", trace.to_str().unwrap(), "--to", "pcap", "--link", "sll", "-o", sll.to_str().unwrap()]);
    let plain = std::fs::read(&sll).unwrap();
    let want = ok(&["convert", "trace", sll.to_str().unwrap(), "--to", "classbench"]);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&plain).unwrap();
    let mut xz = liblzma::write::XzEncoder::new(Vec::new(), 1);
    xz.write_all(&plain).unwrap();
    for (name, bytes) in [
        ("c.gz", gz.finish().unwrap()),
        ("c.xz", xz.finish().unwrap()),
        ("c.zst", zstd::stream::encode_all(&plain[..], 1).unwrap()),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(ok(&["convert", "trace", path.to_str().unwrap(), "--to", "classbench"]), want, "{name}");
        // The same through standard input.
        let mut child = Command::new(env!("CARGO_BIN_EXE_rqvs"))
            .args(["convert", "trace", "-", "--to", "classbench"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let feeder = std::thread::spawn(move || stdin.write_all(&bytes));
        let mut out = String::new();
        child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        assert!(child.wait().unwrap().success(), "{name} on stdin");
        feeder.join().unwrap().unwrap();
        assert_eq!(out, want, "{name} on stdin");
    }
    // replay reads standard input too (held: it cannot be read twice).
    let mut child = Command::new(env!("CARGO_BIN_EXE_rqvs"))
        .args(["replay", "--trace", "-", "--passes", "2", "--json", "-"])
        .stdin(std::fs::File::open(&sll).unwrap())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert!(child.wait().unwrap().success());
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["trace_packets"], 9_328, "{v}");
    assert_eq!(v["mismatches"], 0, "{v}");
}

/// Peak RSS of `rqvs ARGS` (the child's `ru_maxrss`), in MB, and its exit status.
// The child is reaped by `wait4` (which gives its resource usage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn peak_rss_mb(args: &[&str]) -> (u64, i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rqvs"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rqvs");
    let mut err = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let (mut status, mut usage) = (0i32, std::mem::MaybeUninit::<libc::rusage>::zeroed());
    // SAFETY: waits for our own child, writing into the two locals; `usage` is a plain C struct
    // that wait4 fills (zeroed before, so it is initialised either way).
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, usage.as_mut_ptr()) };
    assert_eq!(pid, child.id() as libc::pid_t, "wait4: {}", std::io::Error::last_os_error());
    // SAFETY: zero-initialised above and filled by wait4.
    let usage = unsafe { usage.assume_init() };
    let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -1 };
    (usage.ru_maxrss as u64 / 1024, code, reader.join().unwrap())
}

/// A capture of 4.2M packets (320 MB) replays with a peak RSS far below its size and below
/// what holding its keys would take (4.2M × 40 bytes = 168 MB).
#[test]
fn a_capture_larger_than_the_memory_budget_streams_through_replay() {
    const PACKETS: usize = 4_200_000;
    const BUDGET_MB: u64 = 120;
    let dir = TempDir::new("captures-big");
    let path = dir.join("big.pcap");
    let start = Instant::now();
    // The default trace's headers over and over, each round with its own source port offset
    // (new flows) every eighth round.
    let base: Vec<FlowKey> =
        rqvs_flow::formats::trace::read_trace(&data("acl1_1k_trace.xz")).unwrap().into_iter().map(|e| e.key).collect();
    {
        let file = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&path).unwrap());
        let mut w = pcap::PcapWriter::new(file, LinkType::Ethernet).unwrap();
        for i in 0..PACKETS {
            let k = base[i % base.len()];
            let k = FlowKey { tp_src: k.tp_src.wrapping_add((i / base.len() / 8) as u16), ..k };
            w.write_key(&k, Some(i as u64 * 100)).unwrap();
        }
        w.finish().unwrap();
    }
    let size_mb = std::fs::metadata(&path).unwrap().len() >> 20;
    assert!(size_mb > 2 * BUDGET_MB, "{size_mb} MB");
    let (peak, code, stderr) = peak_rss_mb(&["replay", "--trace", path.to_str().unwrap(), "--verify", "2000"]);
    assert_eq!(code, 0, "{stderr}");
    eprintln!(
        "replay of {PACKETS} packets ({size_mb} MB): peak RSS {peak} MB (budget {BUDGET_MB} MB); {:.1} s in all",
        start.elapsed().as_secs_f64()
    );
    assert!(peak < BUDGET_MB, "peak RSS {peak} MB, budget {BUDGET_MB} MB, capture {size_mb} MB");
    // convert streams as well.
    let out = dir.join("big.trace");
    let (peak, code, stderr) =
        peak_rss_mb(&["convert", "trace", path.to_str().unwrap(), "--to", "classbench", "-o", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(peak < BUDGET_MB, "convert: peak RSS {peak} MB");
}

/// Runs `tcpdump ARGS` in namespace `ns` until stopped; its stderr says when it listens.
struct Tcpdump {
    child: std::process::Child,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Tcpdump {
    fn start(ns: &str, args: &[&str]) -> Tcpdump {
        let mut child = Command::new("ip")
            // A small snap length and a large buffer: in immediate mode libpcap's ring has one
            // snap-length slot per packet, 8 of them at the defaults, and a burst overflows it.
            .args(["netns", "exec", ns, "tcpdump", "-n", "-U", "--immediate-mode", "-s", "256", "-B", "16384"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn tcpdump");
        // Wait for "listening on ...".
        let mut err = child.stderr.take().unwrap();
        let mut seen = Vec::new();
        let mut byte = [0u8; 1];
        let deadline = Instant::now() + Duration::from_secs(10);
        while !String::from_utf8_lossy(&seen).contains("listening on") {
            assert!(Instant::now() < deadline, "tcpdump {args:?} did not start: {}", String::from_utf8_lossy(&seen));
            match err.read(&mut byte) {
                Ok(1) => seen.push(byte[0]),
                _ => panic!("tcpdump {args:?} ended: {}", String::from_utf8_lossy(&seen)),
            }
        }
        let stderr = std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = err.read_to_string(&mut rest);
            rest
        });
        Tcpdump { child, stderr: Some(stderr) }
    }

    /// Stops it (SIGINT, by its pid: it flushes and exits); what it said on stderr.
    fn stop(mut self) -> String {
        // SAFETY: signals our own child process by pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        let _ = self.child.wait();
        self.stderr.take().map(|h| h.join().unwrap()).unwrap_or_default()
    }
}

impl Drop for Tcpdump {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn sorted(mut v: Vec<FlowKey>) -> Vec<FlowKey> {
    v.sort_by_key(|k| format!("{k:?}"));
    v
}

/// Real `tcpdump` captures of the same traffic — on the veth (Ethernet) and on `any` (Linux
/// cooked v1 and v2) — give the same keys, with the cooked types' MACs; a pcapng mixing the
/// three interfaces reads each with its own link type.
#[test]
fn tcpdump_any_captures_give_the_keys_of_the_ethernet_capture() {
    use rqvs_ports::testnet::{available, Netns};
    if !available("tcpdump_any_captures_give_the_keys_of_the_ethernet_capture") {
        return;
    }
    if Command::new("tcpdump").arg("--version").output().is_err() {
        assert_ne!(std::env::var("RQVS_REQUIRE_NETNS").as_deref(), Ok("1"), "tcpdump is not installed");
        eprintln!("skipping: tcpdump is not installed");
        return;
    }
    let dir = TempDir::new("captures-tcpdump");
    let a = Netns::new("capa").unwrap();
    let b = Netns::new("capb").unwrap();
    a.veth("va", &b, "vb", 1).unwrap();
    a.ip(&["addr", "add", "10.77.0.1/24", "dev", "va"]).unwrap();
    b.ip(&["addr", "add", "10.77.0.2/24", "dev", "vb"]).unwrap();
    a.wait_running("va", Duration::from_secs(5)).unwrap();
    b.wait_running("vb", Duration::from_secs(5)).unwrap();
    let (eth, sll, sll2) = (dir.join("eth.pcap"), dir.join("sll.pcap"), dir.join("sll2.pcap"));
    let dumps = [
        Tcpdump::start(a.name(), &["-i", "va", "-w", eth.to_str().unwrap()]),
        Tcpdump::start(a.name(), &["-i", "any", "-y", "LINUX_SLL", "-w", sll.to_str().unwrap()]),
        Tcpdump::start(a.name(), &["-i", "any", "-y", "LINUX_SLL2", "-w", sll2.to_str().unwrap()]),
    ];
    // Traffic from a: ARP, UDP datagrams to closed ports (ICMP port unreachable back), TCP
    // connections refused (SYN, RST).
    a.run(|| {
        let udp = std::net::UdpSocket::bind("10.77.0.1:0").unwrap();
        for port in 0..20u16 {
            let _ = udp.send_to(b"rqvs", ("10.77.0.2", 4000 + port));
            let _ = std::net::TcpStream::connect_timeout(
                &std::net::SocketAddr::from(([10, 77, 0, 2], 5000 + port)),
                Duration::from_millis(200),
            );
        }
    })
    .unwrap();
    // Until the three files hold the same packets and stop growing (tcpdump may lag on a loaded
    // machine: what is still in its ring when it stops is lost).
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = (usize::MAX, 0, 0);
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = (frames_of(&eth).len(), frames_of(&sll).len(), frames_of(&sll2).len());
        if (now.0 == now.1 && now.1 == now.2 && now == last) || Instant::now() > deadline {
            break;
        }
        last = now;
    }
    let said: Vec<String> = dumps.into_iter().map(Tcpdump::stop).collect();
    assert_eq!((link_number(&eth), link_number(&sll), link_number(&sll2)), (1, 113, 276));
    let keys = |p: &Path| pcap::read_capture(p, 1).unwrap();
    let (e, s1, s2) = (keys(&eth), keys(&sll), keys(&sll2));
    eprintln!("captured {} / {} / {} packets; tcpdump: {said:?}", e.keys.len(), s1.keys.len(), s2.keys.len());
    assert!(e.keys.len() >= 60, "{} packets captured", e.keys.len());
    assert_eq!(e.stats.skipped() + s1.stats.skipped() + s2.stats.skipped(), 0);
    let want = sorted(e.keys.iter().map(|k| as_link(LinkType::LinuxSll, k)).collect());
    assert_eq!(sorted(s1.keys.clone()), want, "LINUX_SLL");
    assert_eq!(sorted(s2.keys.clone()), want, "LINUX_SLL2");
    assert!(e.keys.iter().any(|k| k.dl_type == 0x0806), "an ARP packet");
    assert!(e.keys.iter().any(|k| k.nw_proto == 1), "an ICMP packet");
    assert!(e.keys.iter().any(|k| k.nw_proto == 6 && k.tcp_flags & 0x04 != 0), "a TCP RST");
    // The three in one pcapng, each interface its own link type.
    let captures = vec![
        (LinkType::Ethernet, frames_of(&eth)),
        (LinkType::LinuxSll, frames_of(&sll)),
        (LinkType::LinuxSll2, frames_of(&sll2)),
    ];
    let mixed = dir.join("mixed.pcapng");
    std::fs::write(&mixed, mixed_pcapng(&captures)).unwrap();
    let m = keys(&mixed);
    let mut expected = Vec::new();
    for i in 0..e.keys.len().max(s1.keys.len()).max(s2.keys.len()) {
        for c in [&e, &s1, &s2] {
            expected.extend(c.keys.get(i));
        }
    }
    assert_eq!(m.keys, expected);
    // The CLI reads it: every packet classified.
    let out = ok(&["classify", "--trace", mixed.to_str().unwrap(), "--json", "-"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["packets"].as_u64(), Some(expected.len() as u64), "{v}");
}

/// `rqvs gen map` on a raw-IP capture (as CAIDA's are) keeps its packet count, timestamps and
/// flow structure: every packet of a flow gets its flow's new 5-tuple.
#[test]
fn gen_map_on_a_raw_ip_capture_keeps_timestamps_and_flows() {
    let dir = TempDir::new("captures-map");
    let raw = dir.join("raw.pcap");
    let keys: Vec<FlowKey> =
        rqvs_flow::formats::trace::read_trace(&data("acl1_1k_trace.xz")).unwrap().into_iter().map(|e| e.key).collect();
    // Uneven gaps, to the µs (what a pcap holds).
    let ts: Vec<u64> =
        (0..keys.len() as u64).map(|i| 1_600_000_000_000_000_000 + i * 1_000 + (i % 7) * 13_000).collect();
    {
        let mut w = pcap::PcapWriter::new(std::fs::File::create(&raw).unwrap(), LinkType::Raw).unwrap();
        for (k, &t) in keys.iter().zip(&ts) {
            w.write_key(k, Some(t)).unwrap();
        }
        w.finish().unwrap();
    }
    let out = dir.join("mapped.pcap");
    let rules = data("acl1_1k_rules.xz");
    ok(&[
        "gen",
        "map",
        "--rules",
        rules.to_str().unwrap(),
        "--pcap",
        raw.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let before = pcap::read_capture(&raw, 1).unwrap();
    let after = pcap::read_capture(&out, 1).unwrap();
    assert_eq!(before.keys.len(), keys.len());
    assert_eq!(after.keys.len(), before.keys.len());
    assert_eq!(after.timestamps_ns, ts);
    let five = |k: &FlowKey| (k.nw_src, k.nw_dst, k.nw_proto, k.tp_src, k.tp_dst);
    let mut first_of = std::collections::HashMap::new();
    for (b, a) in before.keys.iter().zip(&after.keys) {
        // The first packet of each input flow names its output flow; every later one agrees.
        let m = *first_of.entry(five(b)).or_insert(five(a));
        assert_eq!(five(a), m);
    }
    assert!(first_of.len() > 1000, "{} flows", first_of.len());
}
