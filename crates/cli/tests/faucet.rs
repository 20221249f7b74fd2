//! Real Faucet 1.10 (the production OpenFlow controller, from PyPI in its own virtual
//! environment) drives `rqvs switch --controller`: a multi-table pipeline (VLAN, eth_src,
//! eth_dst, flood tables with goto_table, push/pop VLAN, learning with hard and idle timeouts),
//! as on Open vSwitch.
//!
//! The network: five hosts in namespaces of their own, on veths to the switch's ports 1..5.
//! VLAN 100 ("office"): ports 1 and 2 native, port 5 tagged; VLAN 200 ("guest"): ports 3 and 4
//! native, port 5 tagged. Host 5 is the test itself on a raw socket (the kernels these tests
//! run on may lack 802.1Q interfaces): it answers ARP and ping, tagged, for one address in each
//! VLAN. Checked, for each design and
//! with 1 and 2 PMDs: pings within a VLAN pass, untagged and tagged; nothing crosses VLANs (host
//! 3 also holds an address in VLAN 100's subnet: reachable only if frames leaked); learned hosts
//! appear in `dump-flows`; a port whose link goes down makes Faucet delete its hosts' flows
//! (PORT_STATUS); and a Faucet ACL on port 1 (drop TCP to port 22, allow the rest) drops the
//! ssh-port connection and passes the rest. With Gauge (Faucet's statistics collector, a second
//! controller of the switch): its Prometheus output has the ports' and the flows' counters, and
//! they move with the traffic. Routing: IPv4 and IPv6 between the VLANs through Faucet's router.
//!
//! Everything runs inside the test's namespaces: the switch, Faucet and `ovs-ofctl` in the
//! switch's namespace (its loopback up, Faucet listening on 127.0.0.1 there), traffic in the
//! hosts'. Processes started here are killed by pid when a test ends, also when it fails.
//!
//! Needs root and `ip` (else skipped; a failure with `RQVS_REQUIRE_NETNS=1`), `ovs-ofctl` and
//! Faucet 1.10 in a virtual environment (`rqvs_testkit::ovs::faucet_bin`; skipped when missing,
//! a failure with `RQVS_REQUIRE_OVS=1`). The tests run one at a time.

mod common;
use common::{ctl, TempDir};

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rqvs_ports::testnet::{self, Netns, RawSocket};
use rqvs_testkit::pki::Creds;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Faucet's OpenFlow port and the switch's passive one, on the switch namespace's loopback.
const FAUCET_PORT: u16 = 6653;
const OPENFLOW_PORT: u16 = 6654;
/// Gauge's OpenFlow port and its Prometheus port, on the same loopback.
const GAUGE_PORT: u16 = 6655;
const GAUGE_PROMETHEUS_PORT: u16 = 9303;
/// Faucet's own cookie on every flow it writes.
const FAUCET_COOKIE: &str = "cookie=0x5adc15c0";

/// The two VLANs' subnets (/24).
const OFFICE: &str = "10.78.100";
const GUEST: &str = "10.78.200";
/// Their IPv6 subnets (/64), for routing.
const OFFICE6: &str = "fd78:100:";
const GUEST6: &str = "fd78:200:";

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

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// `ip netns exec NS PROGRAM ARGS` (ip execs the program: the child's pid is the program's).
fn in_ns(ns: &Netns, program: &str, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns.name(), program]).args(args);
    c
}

struct Net {
    sw: Netns,
    hosts: Vec<Netns>,
}

/// Five hosts on p1..p5, addressed as the module docs say.
fn network(tag: &str) -> Net {
    let sw = Netns::new(&format!("{tag}-sw")).unwrap();
    sw.ip(&["link", "set", "lo", "up"]).unwrap();
    let hosts: Vec<Netns> = (1..=5).map(|i| Netns::new(&format!("{tag}-h{i}")).unwrap()).collect();
    for (i, h) in hosts.iter().enumerate() {
        let (p, e) = (format!("p{}", i + 1), format!("e{}", i + 1));
        sw.veth(&p, h, &e, 1).unwrap();
        sw.wait_running(&p, Duration::from_secs(3)).unwrap();
        h.wait_running(&e, Duration::from_secs(3)).unwrap();
    }
    let addr = |h: &Netns, a: &str, dev: &str| h.ip(&["addr", "add", a, "dev", dev]).unwrap();
    addr(&hosts[0], &format!("{OFFICE}.1/24"), "e1");
    addr(&hosts[1], &format!("{OFFICE}.2/24"), "e2");
    addr(&hosts[2], &format!("{GUEST}.3/24"), "e3");
    // A trap: reachable from the office VLAN only if the switch leaks frames across VLANs.
    addr(&hosts[2], &format!("{OFFICE}.33/24"), "e3");
    addr(&hosts[3], &format!("{GUEST}.4/24"), "e4");
    Net { sw, hosts }
}

const CONFIG: &str = r#"
vlans:
  office:
    vid: 100
  guest:
    vid: 200
acls:
  no_ssh:
    - rule:
        dl_type: 0x800
        nw_proto: 6
        tcp_dst: 22
        actions:
          allow: 0
    - rule:
        actions:
          allow: 1
dps:
  rqvs1:
    dp_id: 0x1
    hardware: "Open vSwitch"
    interfaces:
      1:
        native_vlan: office
        acls_in: [no_ssh]
      2:
        native_vlan: office
      3:
        native_vlan: guest
      4:
        native_vlan: guest
      5:
        tagged_vlans: [office, guest]
"#;

/// Inter-VLAN routing: Faucet's virtual IPs in both VLANs, one router between them (its IPv4
/// FIB, VIP and ARP tables; Faucet answers ARP for the VIPs and resolves the hosts through
/// packet-ins and packet-outs).
const ROUTING_CONFIG: &str = r#"
vlans:
  office:
    vid: 100
    faucet_vips: ["10.78.100.254/24", "fd78:100::254/64"]
  guest:
    vid: 200
    faucet_vips: ["10.78.200.254/24", "fd78:200::254/64"]
routers:
  office-guest:
    vlans: [office, guest]
dps:
  rqvs1:
    dp_id: 0x1
    hardware: "Open vSwitch"
    interfaces:
      1:
        native_vlan: office
      2:
        native_vlan: office
      3:
        native_vlan: guest
      4:
        native_vlan: guest
"#;

/// Faucet in the switch's namespace, its files in `dir`.
fn faucet(net: &Net, dir: &TempDir, bin: &Path) -> Proc {
    faucet_with(net, dir, bin, CONFIG)
}

fn faucet_with(net: &Net, dir: &TempDir, bin: &Path, config: &str) -> Proc {
    faucet_tls(net, dir, bin, config, None)
}

/// Faucet listening for TLS with `tls` (os-ken's `ctl-privkey`, `ctl-cert`, `ca-certs`: it
/// checks the switch's certificate) when given, plain TCP otherwise.
fn faucet_tls(net: &Net, dir: &TempDir, bin: &Path, config: &str, tls: Option<&Creds>) -> Proc {
    std::fs::write(dir.join("faucet.yaml"), config).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut args = vec!["--ryu-ofp-listen-host=127.0.0.1".to_string()];
    match tls {
        None => args.push(format!("--ryu-ofp-tcp-listen-port={FAUCET_PORT}")),
        Some(c) => args.extend([
            format!("--ryu-ofp-ssl-listen-port={FAUCET_PORT}"),
            format!("--ryu-ctl-privkey={}", c.key.display()),
            format!("--ryu-ctl-cert={}", c.cert.display()),
            format!("--ryu-ca-certs={}", c.peer_ca.display()),
        ]),
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let child = in_ns(&net.sw, bin.join("faucet").to_str().unwrap(), &args)
        .env("PATH", path)
        .env("FAUCET_CONFIG", dir.join("faucet.yaml"))
        .env("FAUCET_LOG", dir.join("faucet.log"))
        .env("FAUCET_EXCEPTION_LOG", dir.join("faucet_exception.log"))
        .env("FAUCET_PROMETHEUS_ADDR", "127.0.0.1")
        .env("FAUCET_PROMETHEUS_PORT", "9302")
        .stdout(std::fs::File::create(dir.join("faucet.out")).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Proc { child, what: "faucet" }
}

/// `rqvs switch` on p1..p5 with Faucet as its controller, in fail-mode secure (nothing passes
/// until Faucet programs it), datapath id 1 (Faucet drops a switch whose id is not its dp_id).
fn start_switch(net: &Net, dir: &TempDir, design: &str, pmds: usize) -> Proc {
    start_switch_with(net, dir, design, pmds, false, None)
}

/// As [`start_switch`], with Gauge as a second controller when `gauge`, and Faucet reached
/// over TLS with `tls` (the switch's credentials) when given.
fn start_switch_with(net: &Net, dir: &TempDir, design: &str, pmds: usize, gauge: bool, tls: Option<&Creds>) -> Proc {
    let sock = dir.join("ctl.sock");
    let controller = format!("{}:127.0.0.1:{FAUCET_PORT}", if tls.is_some() { "ssl" } else { "tcp" });
    let gauge_controller = format!("tcp:127.0.0.1:{GAUGE_PORT}");
    let openflow = format!("ptcp:127.0.0.1:{OPENFLOW_PORT}");
    let pmds = pmds.to_string();
    let mut args = vec!["switch", "--ctl", sock.to_str().unwrap(), "--design", design, "--pmds", &pmds];
    for p in ["p1", "p2", "p3", "p4", "p5"] {
        args.extend(["--port", p]);
    }
    args.extend(["--controller", &controller, "--fail-mode", "secure", "--datapath-id", "0x1"]);
    if gauge {
        args.extend(["--controller", &gauge_controller]);
    }
    let tls_paths =
        tls.map(|c| [c.key.display().to_string(), c.cert.display().to_string(), c.peer_ca.display().to_string()]);
    if let Some([key, cert, ca]) = &tls_paths {
        args.extend(["--private-key", key, "--certificate", cert, "--ca-cert", ca]);
    }
    args.extend(["--openflow", &openflow, "--duration", "300"]);
    let child = in_ns(&net.sw, env!("CARGO_BIN_EXE_rqvs"), &args)
        .stdout(std::fs::File::create(dir.join("switch.out")).unwrap())
        .stderr(std::fs::File::create(dir.join("switch.err")).unwrap())
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

fn dump_flows(net: &Net) -> String {
    ofctl13(net, "dump-flows")
}

/// Waits until `ok(dump-flows)`; the logs in the message when it does not come.
fn wait_flows(net: &Net, dir: &TempDir, what: &str, within: Duration, ok: impl Fn(&str) -> bool) -> String {
    let t0 = Instant::now();
    loop {
        let flows = dump_flows(net);
        if ok(&flows) {
            return flows;
        }
        assert!(
            t0.elapsed() < within,
            "{what}: not after {within:?}:\n{flows}\n--- switch:\n{}\n--- faucet:\n{}\n{}",
            read(&dir.join("switch.err")),
            read(&dir.join("faucet.log")),
            read(&dir.join("faucet_exception.log"))
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `ping -c COUNT` from host `from` (1-based) to `to`: did every echo come back?
fn ping(net: &Net, from: usize, to: &str, count: u32) -> bool {
    let c = count.to_string();
    let out = in_ns(&net.hosts[from - 1], "ping", &["-c", &c, "-i", "0.2", "-W", "1", to]).output().unwrap();
    out.status.success() && String::from_utf8_lossy(&out.stdout).contains(&format!("{count} received"))
}

/// Pings until one passes (the first ARP goes to Faucet, which learns and programs the host).
fn ping_eventually(net: &Net, from: usize, to: &str) -> bool {
    (0..5).any(|_| ping(net, from, to, 2))
}

/// A TCP connection from host `from` to `to:port` (a listener there): did it open within 2 s?
fn connects(net: &Net, from: usize, to: &str, port: u16) -> bool {
    let code = format!(
        "import socket,sys\ns=socket.socket()\ns.settimeout(2)\ntry:\n  s.connect(('{to}',{port}))\n  print('open')\nexcept Exception as e:\n  print('closed',e)"
    );
    let out = in_ns(&net.hosts[from - 1], "python3", &["-c", &code]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).starts_with("open")
}

/// A listener on `port` in host `host` that accepts and closes connections.
fn listener(net: &Net, host: usize, port: u16) -> Proc {
    let code = format!(
        "import socket\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(('0.0.0.0',{port}))\ns.listen(8)\nwhile True:\n  c,_=s.accept()\n  c.close()"
    );
    let child = in_ns(&net.hosts[host - 1], "python3", &["-c", &code]).spawn().unwrap();
    Proc { child, what: "listener" }
}

/// Host 5, tagged in both VLANs: answers ARP requests and ICMP echo requests for `OFFICE.5`
/// (VLAN 100) and `GUEST.5` (VLAN 200), in the request's VLAN, until `stop`.
fn tagged_host(net: &Net, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<std::io::Result<std::io::Result<()>>> {
    const MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x05];
    let ip = |net: &str| -> [u8; 4] {
        let a: std::net::Ipv4Addr = format!("{net}.5").parse().unwrap();
        a.octets()
    };
    let (office, guest) = (ip(OFFICE), ip(GUEST));
    net.hosts[4]
        .spawn(move || -> std::io::Result<()> {
            let sock = RawSocket::open("e5")?;
            while !stop.load(Ordering::Relaxed) {
                let Some(mut f) = sock.recv(Duration::from_millis(100))? else { continue };
                if f.len() < 18 || f[12..14] != [0x81, 0x00] {
                    continue;
                }
                let vid = u16::from_be_bytes([f[14], f[15]]) & 0xfff;
                let mine = match vid {
                    100 => office,
                    200 => guest,
                    _ => continue,
                };
                let ethertype = [f[16], f[17]];
                let l3 = 18;
                if ethertype == [0x08, 0x06]
                    && f.len() >= l3 + 28
                    && f[l3 + 6..l3 + 8] == [0, 1]
                    && f[l3 + 24..l3 + 28] == mine
                {
                    // ARP request for us: the reply, in the same VLAN.
                    let (sha, spa) = (f[l3 + 8..l3 + 14].to_vec(), f[l3 + 14..l3 + 18].to_vec());
                    f.copy_within(6..12, 0);
                    f[6..12].copy_from_slice(&MAC);
                    f[l3 + 7] = 2;
                    f[l3 + 8..l3 + 14].copy_from_slice(&MAC);
                    f[l3 + 14..l3 + 18].copy_from_slice(&mine);
                    f[l3 + 18..l3 + 24].copy_from_slice(&sha);
                    f[l3 + 24..l3 + 28].copy_from_slice(&spa);
                    sock.send(&f)?;
                } else if ethertype == [0x08, 0x00] && f.len() >= l3 + 28 && f[l3 + 16..l3 + 20] == mine {
                    let ihl = usize::from(f[l3] & 0xf) * 4;
                    let icmp = l3 + ihl;
                    if f[l3 + 9] != 1 || f.len() < icmp + 8 || f[icmp] != 8 {
                        continue;
                    }
                    // Echo request to us: swap addresses, type 0, checksum adjusted (RFC 1624).
                    let src = f[0..6].to_vec();
                    f.copy_within(6..12, 0);
                    f[6..12].copy_from_slice(&src);
                    let ips = f[l3 + 12..l3 + 20].to_vec();
                    f[l3 + 12..l3 + 16].copy_from_slice(&ips[4..8]);
                    f[l3 + 16..l3 + 20].copy_from_slice(&ips[0..4]);
                    f[icmp] = 0;
                    let sum = u32::from(u16::from_be_bytes([f[icmp + 2], f[icmp + 3]])) + 0x0800;
                    let sum = ((sum & 0xffff) + (sum >> 16)) as u16;
                    f[icmp + 2..icmp + 4].copy_from_slice(&sum.to_be_bytes());
                    sock.send(&f)?;
                }
            }
            Ok(())
        })
        .unwrap()
}

fn mac_of(net: &Net, host: usize) -> String {
    let dev = format!("e{host}");
    let out = in_ns(&net.hosts[host - 1], "cat", &[&format!("/sys/class/net/{dev}/address")]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Gauge (from Faucet's venv) in the switch's namespace: port and flow-table statistics polled
/// every 2 s into its Prometheus output.
fn gauge(net: &Net, dir: &TempDir, bin: &Path) -> Proc {
    let config = format!(
        "faucet_configs:\n  - {}\nwatchers:\n  ports:\n    dps: [rqvs1]\n    type: port_stats\n    interval: 2\n    db: prom\n  flows:\n    dps: [rqvs1]\n    type: flow_table\n    interval: 2\n    db: prom\ndbs:\n  prom:\n    type: prometheus\n    prometheus_addr: 127.0.0.1\n    prometheus_port: {GAUGE_PROMETHEUS_PORT}\n",
        dir.join("faucet.yaml").display()
    );
    std::fs::write(dir.join("gauge.yaml"), config).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let port = format!("--ryu-ofp-tcp-listen-port={GAUGE_PORT}");
    let child = in_ns(&net.sw, bin.join("gauge").to_str().unwrap(), &[&port, "--ryu-ofp-listen-host=127.0.0.1"])
        .env("PATH", path)
        .env("GAUGE_CONFIG", dir.join("gauge.yaml"))
        .env("GAUGE_LOG", dir.join("gauge.log"))
        .env("GAUGE_EXCEPTION_LOG", dir.join("gauge_exception.log"))
        .stdout(std::fs::File::create(dir.join("gauge.out")).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Proc { child, what: "gauge" }
}

/// Gauge's Prometheus page (empty when it does not answer yet).
fn gauge_metrics(net: &Net) -> String {
    let code = format!(
        "import urllib.request\nprint(urllib.request.urlopen('http://127.0.0.1:{GAUGE_PROMETHEUS_PORT}/metrics', timeout=5).read().decode())"
    );
    let out = in_ns(&net.sw, "python3", &["-c", &code]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of the first sample of `metric` whose labels contain every one of `labels`.
fn sample(metrics: &str, metric: &str, labels: &[&str]) -> Option<f64> {
    metrics.lines().find_map(|l| {
        let rest = l.strip_prefix(metric)?.strip_prefix('{')?;
        let (lab, value) = rest.split_once("} ")?;
        labels.iter().all(|x| lab.contains(x)).then(|| value.trim().parse().ok())?
    })
}

/// The sum of every `flow_packet_count_TABLE` sample (all of Faucet's tables).
fn flow_packets(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("flow_packet_count_"))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.trim().parse::<f64>().ok()))
        .sum()
}

/// Waits until Gauge's page satisfies `ok`; the page and Gauge's logs in the message otherwise.
fn wait_gauge(net: &Net, dir: &TempDir, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let t0 = Instant::now();
    loop {
        let m = gauge_metrics(net);
        if ok(&m) {
            return m;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(40),
            "{what}: not after 40 s:\n{m}\n--- gauge:\n{}\n{}",
            read(&dir.join("gauge.log")),
            read(&dir.join("gauge_exception.log"))
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn run(tag: &str, design: &str, pmds: usize, with_gauge: bool) {
    let _one = serial();
    if !testnet::available(tag) || !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let Some(bin) = rqvs_testkit::ovs::faucet_bin() else { return };
    let dir = TempDir::new(&format!("cli-faucet-{tag}"));
    let net = network(tag);
    let mut f = faucet(&net, &dir, &bin);
    let g = with_gauge.then(|| gauge(&net, &dir, &bin));
    let mut sw = start_switch_with(&net, &dir, design, pmds, with_gauge, None);
    let stop = Arc::new(AtomicBool::new(false));
    let h5 = tagged_host(&net, Arc::clone(&stop));

    // Faucet programs its pipeline: every flow carries its cookie, tables 0..3 at least, each
    // with its miss flow.
    let flows = wait_flows(&net, &dir, "Faucet's pipeline", Duration::from_secs(30), |f| {
        f.contains(FAUCET_COOKIE) && f.contains("table=3")
    });
    assert!(!read(&dir.join("faucet.log")).contains("OFPErrorMsg"), "the switch refused a flow-mod:\n{flows}");

    // Within a VLAN: untagged to untagged, untagged to tagged.
    assert!(ping_eventually(&net, 1, &format!("{OFFICE}.2")), "office: h1 → h2");
    assert!(ping_eventually(&net, 3, &format!("{GUEST}.4")), "guest: h3 → h4");
    assert!(ping_eventually(&net, 1, &format!("{OFFICE}.5")), "office: h1 → h5 (tagged 100)");
    assert!(ping_eventually(&net, 4, &format!("{GUEST}.5")), "guest: h4 → h5 (tagged 200)");
    // Across VLANs: nothing.
    assert!(!ping(&net, 1, &format!("{OFFICE}.33"), 3), "a frame crossed from VLAN 100 to VLAN 200");

    // Learned hosts appear as flows on their MACs.
    let flows = dump_flows(&net);
    for h in [1, 2, 3, 4] {
        let mac = mac_of(&net, h);
        assert!(flows.contains(&mac), "host {h} ({mac}) learned:\n{flows}");
    }

    // Gauge (check (d) of issue 36): the ports' and the flows' counters in its Prometheus
    // output, moving with the traffic.
    if let Some(mut g) = g {
        let port1 = ["port=\"1\""];
        let m = wait_gauge(&net, &dir, "Gauge's port and flow statistics", |m| {
            sample(m, "of_port_rx_packets", &port1).is_some_and(|v| v > 0.0) && flow_packets(m) > 0.0
        });
        let (rx0, flows0) = (sample(&m, "of_port_rx_packets", &port1).unwrap(), flow_packets(&m));
        assert!(sample(&m, "of_port_rx_bytes", &port1).is_some_and(|v| v >= 60.0 * rx0), "bytes with packets:\n{m}");
        assert!(ping(&net, 1, &format!("{OFFICE}.2"), 10), "office: h1 → h2, 10 pings");
        wait_gauge(&net, &dir, "Gauge's counters moving with 10 more pings", |m| {
            sample(m, "of_port_rx_packets", &port1).is_some_and(|v| v >= rx0 + 10.0) && flow_packets(m) >= flows0 + 20.0
        });
        assert!(g.running(), "gauge exited: {}", read(&dir.join("gauge.out")));
        let exceptions = read(&dir.join("gauge_exception.log"));
        assert!(exceptions.trim().is_empty(), "Gauge raised:\n{exceptions}");
    }

    // The ACL on port 1: TCP to port 22 dropped, to port 80 passed.
    let _ssh = listener(&net, 2, 22);
    let _web = listener(&net, 2, 80);
    std::thread::sleep(Duration::from_millis(300));
    assert!(connects(&net, 1, &format!("{OFFICE}.2"), 80), "the ACL passes TCP to port 80");
    assert!(!connects(&net, 1, &format!("{OFFICE}.2"), 22), "the ACL drops TCP to port 22");

    // Port 2's link goes down: the switch says so (PORT_STATUS), Faucet forgets host 2.
    let mac2 = mac_of(&net, 2);
    net.hosts[1].ip(&["link", "set", "e2", "down"]).unwrap();
    wait_flows(&net, &dir, "host 2's flows removed after its port went down", Duration::from_secs(20), |f| {
        !f.contains(&mac2)
    });

    assert!(f.running(), "faucet exited: {}", read(&dir.join("faucet.out")));
    assert!(sw.running(), "the switch exited: {}", read(&dir.join("switch.err")));
    let exceptions = read(&dir.join("faucet_exception.log"));
    assert!(exceptions.trim().is_empty(), "Faucet raised:\n{exceptions}");
    stop.store(true, Ordering::Relaxed);
    h5.join().unwrap().unwrap().unwrap();
    // A clean stop, every frame accounted for.
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
    drop(f);
}

/// Inter-VLAN routing through Faucet's router tables (check (c) of issue 36, IPv4 and IPv6): hosts of
/// VLAN 100 and VLAN 200 ping each
/// other through the switch (each with its VLAN's VIP as default gateway), and the TTL the far
/// host sees is one lower (the switch routed, `dec_ttl`).
fn run_routing(tag: &str, design: &str, pmds: usize) {
    let _one = serial();
    if !testnet::available(tag) || !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let Some(bin) = rqvs_testkit::ovs::faucet_bin() else { return };
    let dir = TempDir::new(&format!("cli-faucet-{tag}"));
    let net = network(tag);
    for (h, gw, gw6) in [(0, OFFICE, OFFICE6), (1, OFFICE, OFFICE6), (2, GUEST, GUEST6), (3, GUEST, GUEST6)] {
        net.hosts[h].ip(&["route", "add", "default", "via", &format!("{gw}.254")]).unwrap();
        // IPv6: host N is PREFIX:N (no duplicate address detection: usable at once).
        let dev = format!("e{}", h + 1);
        // The test network starts with IPv6 off on its veths (no stray neighbour discovery).
        let on = format!("net.ipv6.conf.{dev}.disable_ipv6=0");
        assert!(in_ns(&net.hosts[h], "sysctl", &["-qw", &on]).status().unwrap().success(), "{on}");
        net.hosts[h].ip(&["-6", "addr", "add", &format!("{gw6}:{}/64", h + 1), "dev", &dev, "nodad"]).unwrap();
        net.hosts[h].ip(&["-6", "route", "add", "default", "via", &format!("{gw6}:254"), "dev", &dev]).unwrap();
    }
    let mut f = faucet_with(&net, &dir, &bin, ROUTING_CONFIG);
    let mut sw = start_switch(&net, &dir, design, pmds);
    wait_flows(&net, &dir, "Faucet's routing pipeline", Duration::from_secs(30), |f| {
        f.contains(FAUCET_COOKIE) && f.contains("table=3")
    });
    // The gateway first (Faucet answers ARP and ping for its VIPs), then across.
    assert!(ping_eventually(&net, 1, &format!("{OFFICE}.254")), "h1 → its gateway (Faucet's VIP)");
    let diag = |net: &Net| {
        format!(
            "{}\n--- switch:\n{}\n--- faucet:\n{}",
            dump_flows(net),
            read(&dir.join("switch.err")),
            read(&dir.join("faucet.log"))
        )
    };
    // (Host 3 holds an address in VLAN 100's subnet, the other test's trap: it would answer
    // on-link, not through the router; hosts 1, 2 and 4 are plain.)
    assert!(ping_eventually(&net, 1, &format!("{GUEST}.4")), "routed: h1 (VLAN 100) → h4 (VLAN 200)\n{}", diag(&net));
    assert!(ping_eventually(&net, 4, &format!("{OFFICE}.2")), "routed: h4 (VLAN 200) → h2 (VLAN 100)\n{}", diag(&net));
    // Routed, not bridged: the reply's TTL is the sender's default (64) less one hop.
    let out = in_ns(&net.hosts[0], "ping", &["-c", "1", "-W", "1", &format!("{GUEST}.4")]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ttl=63"), "one routed hop:\n{text}");
    let flows = dump_flows(&net);
    assert!(flows.contains("dec_ttl"), "Faucet's routes decrement the TTL:\n{flows}");
    // IPv6 (Faucet's ND for its VIPs and the hosts, its ipv6_fib table): the gateway, then
    // across, one hop (hop limit 64 less one).
    let ping6 = |from: usize, to: &str| {
        (0..5).any(|_| {
            let out =
                in_ns(&net.hosts[from - 1], "ping", &["-6", "-c", "2", "-i", "0.2", "-W", "1", to]).output().unwrap();
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("2 received")
        })
    };
    assert!(ping6(1, &format!("{OFFICE6}:254")), "IPv6: h1 → its gateway\n{}", diag(&net));
    assert!(ping6(1, &format!("{GUEST6}:4")), "routed IPv6: h1 (VLAN 100) → h4 (VLAN 200)\n{}", diag(&net));
    assert!(ping6(4, &format!("{OFFICE6}:2")), "routed IPv6: h4 (VLAN 200) → h2 (VLAN 100)\n{}", diag(&net));
    let out = in_ns(&net.hosts[0], "ping", &["-6", "-c", "1", "-W", "1", &format!("{GUEST6}:4")]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ttl=63") || text.contains("hlim=63"), "one routed IPv6 hop:\n{text}\n{}", diag(&net));
    let flows = dump_flows(&net);
    assert!(flows.contains("ipv6_dst="), "Faucet's IPv6 FIB:\n{flows}");
    assert!(f.running(), "faucet exited: {}", read(&dir.join("faucet.out")));
    assert!(sw.running(), "the switch exited: {}", read(&dir.join("switch.err")));
    let exceptions = read(&dir.join("faucet_exception.log"));
    assert!(exceptions.trim().is_empty(), "Faucet raised:\n{exceptions}");
    assert!(!read(&dir.join("faucet.log")).contains("OFPErrorMsg"), "the switch refused a message");
}

/// Faucet over TLS (issue 40): os-ken listening with `ovs-pki` certificates and checking the
/// switch's, `rqvs switch --controller ssl:` checking Faucet's; Faucet programs its pipeline over
/// the encrypted channel and hosts of one VLAN ping, of two do not.
#[test]
fn faucet_over_tls() {
    let _one = serial();
    let tag = "faucet_over_tls";
    if !testnet::available(tag) || !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let Some(bin) = rqvs_testkit::ovs::faucet_bin() else { return };
    if Command::new("ovs-pki").arg("--version").output().is_err() {
        assert!(std::env::var("RQVS_REQUIRE_OVS").as_deref() != Ok("1"), "ovs-pki is required (openvswitch-common)");
        eprintln!("skipped: ovs-pki is not installed");
        return;
    }
    let dir = TempDir::new("cli-faucet-tls");
    let (switch_creds, faucet_creds) = rqvs_testkit::pki::pki(dir.path(), "pki", "faucet");
    let net = network("fctls");
    let mut f = faucet_tls(&net, &dir, &bin, CONFIG, Some(&faucet_creds));
    let mut sw = start_switch_with(&net, &dir, "orig", 1, false, Some(&switch_creds));
    let flows = wait_flows(&net, &dir, "Faucet's pipeline over TLS", Duration::from_secs(30), |f| {
        f.contains(FAUCET_COOKIE) && f.contains("table=3")
    });
    assert!(!read(&dir.join("faucet.log")).contains("OFPErrorMsg"), "the switch refused a flow-mod:\n{flows}");
    assert!(ping_eventually(&net, 1, &format!("{OFFICE}.2")), "office: h1 → h2");
    assert!(!ping(&net, 1, &format!("{OFFICE}.33"), 2), "a frame crossed from VLAN 100 to VLAN 200");
    assert!(f.running(), "faucet exited: {}", read(&dir.join("faucet.out")));
    assert!(sw.running(), "the switch exited: {}", read(&dir.join("switch.err")));
    let exceptions = read(&dir.join("faucet_exception.log"));
    assert!(exceptions.trim().is_empty(), "Faucet raised:\n{exceptions}");
}

#[test]
fn faucet_routes_between_vlans_orig() {
    run_routing("fcrorig", "orig", 1);
}

#[test]
fn faucet_routes_between_vlans_ccache() {
    run_routing("fcrcc", "ccache", 1);
}

#[test]
fn faucet_routes_between_vlans_cflows() {
    run_routing("fcrcf", "cflows", 2);
}

#[test]
fn faucet_l2_vlans_and_acl_orig() {
    run("fcorig", "orig", 1, true);
}

#[test]
fn faucet_l2_vlans_and_acl_ccache() {
    run("fccc", "ccache", 1, false);
}

#[test]
fn faucet_l2_vlans_and_acl_cflows() {
    run("fccf", "cflows", 1, true);
}

#[test]
fn faucet_l2_vlans_and_acl_orig_two_pmds() {
    run("fcorig2", "orig", 2, false);
}

#[test]
fn faucet_l2_vlans_and_acl_cflows_two_pmds() {
    run("fccf2", "cflows", 2, false);
}

/// `ovs-ofctl -O OpenFlow13 CMD` against the switch's OpenFlow listener.
fn ofctl13(net: &Net, cmd: &str) -> String {
    let target = format!("tcp:127.0.0.1:{OPENFLOW_PORT}");
    let out = in_ns(&net.sw, "ovs-ofctl", &["-O", "OpenFlow13", cmd, &target]).output().unwrap();
    assert!(out.status.success(), "{cmd}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Faucet's page (its own Prometheus port, 9302), empty when it does not answer yet.
fn faucet_metrics(net: &Net) -> String {
    let code = "import urllib.request\nprint(urllib.request.urlopen('http://127.0.0.1:9302/metrics', timeout=5).read().decode())";
    let out = in_ns(&net.sw, "python3", &["-c", code]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The first number after `key:` in `text` (`ovs-ofctl meter-stats` output).
fn stat(text: &str, key: &str) -> Option<u64> {
    let at = text.find(&format!("{key}:"))? + key.len() + 1;
    text[at..].split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// Faucet's `packetin_pps` (issue 36): Faucet installs the controller meter (`OFPM_CONTROLLER`,
/// a drop band in packets per second) and the switch holds packet-ins to its rate. Host 1 sends
/// 3,000 frames in about a second, each from a new source MAC (each misses Faucet's eth_src
/// table: a packet-in to learn it); the meter's statistics count them in and its band drops the
/// excess, and Faucet receives no more packet-ins than the rate and the burst let through.
#[test]
fn faucet_packetin_pps_limits_packet_ins() {
    const PPS: u64 = 20;
    const FRAMES: u64 = 3000;
    let _one = serial();
    let tag = "fcpps";
    if !testnet::available(tag) || !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let Some(bin) = rqvs_testkit::ovs::faucet_bin() else { return };
    let dir = TempDir::new("cli-faucet-pps");
    let net = network(tag);
    let config = CONFIG.replace(
        "    hardware: \"Open vSwitch\"\n",
        &format!("    hardware: \"Open vSwitch\"\n    packetin_pps: {PPS}\n"),
    );
    let mut f = faucet_with(&net, &dir, &bin, &config);
    let mut sw = start_switch(&net, &dir, "orig", 1);
    wait_flows(&net, &dir, "Faucet's pipeline", Duration::from_secs(30), |f| {
        f.contains(FAUCET_COOKIE) && f.contains("table=3")
    });
    let meters = ofctl13(&net, "dump-meters");
    assert!(
        meters.contains("meter=controller pktps") && meters.contains(&format!("type=drop rate={PPS}")),
        "Faucet's controller meter:\n{meters}"
    );
    let packet_ins = |net: &Net| sample(&faucet_metrics(net), "of_packet_ins_total", &[]).unwrap_or(0.0);
    // Faucet's page comes up with the connection; wait for it.
    let t0 = Instant::now();
    while !faucet_metrics(&net).contains("of_packet_ins_total") {
        assert!(t0.elapsed() < Duration::from_secs(20), "Faucet's metrics page");
        std::thread::sleep(Duration::from_millis(200));
    }
    let before = ofctl13(&net, "meter-stats");
    let (ins0, dropped0) = (stat(&before, "packet_in_count").unwrap(), stat(&before, "packet_count").unwrap());
    let faucet0 = packet_ins(&net);

    let t0 = Instant::now();
    net.hosts[0]
        .spawn(move || -> std::io::Result<()> {
            let sock = RawSocket::open("e1")?;
            for i in 0..FRAMES {
                let mut frame = vec![0xff; 6];
                frame.extend_from_slice(&[0x02, 0xaa, 0, 0, (i >> 8) as u8, i as u8]);
                frame.extend_from_slice(&[0x88, 0xb5]);
                frame.resize(60, 0);
                sock.send(&frame)?;
                if i % 100 == 99 {
                    std::thread::sleep(Duration::from_millis(30));
                }
            }
            Ok(())
        })
        .unwrap()
        .join()
        .unwrap()
        .unwrap()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let secs = t0.elapsed().as_secs_f64();
    let after = ofctl13(&net, "meter-stats");
    let (ins, dropped) =
        (stat(&after, "packet_in_count").unwrap() - ins0, stat(&after, "packet_count").unwrap() - dropped0);
    // Faucet counts what it reads; give it a moment to read the last ones.
    std::thread::sleep(Duration::from_secs(1));
    let faucet = packet_ins(&net) - faucet0;
    eprintln!(
        "{FRAMES} frames in {secs:.2} s: the controller meter took {ins}, dropped {dropped}; Faucet read {faucet} packet-ins"
    );
    assert!(ins >= FRAMES * 9 / 10, "the frames reached the controller meter: {ins}\n{after}");
    let passed = ins - dropped;
    // The rate over the burst's time, plus a bucket of one second's worth.
    let allowed = (PPS as f64 * (secs + 1.0)).ceil() as u64 + PPS;
    assert!(
        passed <= allowed && passed >= PPS / 2,
        "{passed} packet-ins passed the meter (allowed {allowed})\n{after}"
    );
    assert!(faucet <= allowed as f64 + 10.0, "Faucet read {faucet} packet-ins (allowed {allowed})");
    assert!(f.running(), "faucet exited: {}", read(&dir.join("faucet.out")));
    assert!(sw.running(), "the switch exited: {}", read(&dir.join("switch.err")));
    let exceptions = read(&dir.join("faucet_exception.log"));
    assert!(exceptions.trim().is_empty(), "Faucet raised:\n{exceptions}");
}
