//! What the `ovs-ofctl` tests share (`tests/openflow.rs`, `tests/openflow_traffic.rs`): a
//! running `rqvs switch --openflow` ([`OfSwitch`]), `ovs-ofctl` against it, flow sets in one
//! normal form ([`normal`], [`dumped`]), and the traffic check ([`OfSwitch::check_traffic`]).
//!
//! **Where the switch runs.** With traffic (root; a failure under `RQVS_REQUIRE_NETNS=1` when it
//! cannot), on the switch tests' topology ([`Topo`]: `p1..p3` in a private namespace, `eN` in
//! host namespace `hN`), its OpenFlow listener on that namespace's loopback and `ovs-ofctl`
//! run there too (`ip netns exec`). Without, in this namespace on three pcap-out ports, the
//! listener on 127.0.0.1 — the OpenFlow side alone is checked.
//!
//! **The traffic check.** Frames are built from flows the caller names (the table's, a sample
//! of it, and the flows just changed or deleted): each flow's match with its wildcarded bits
//! filled in at random ([`key_for`]). Every frame carries a sequence number in its last four
//! bytes (Ethernet padding, beyond the IPv4 total length: no rule matches it and no action
//! changes it) and enters on port 1. What leaves each port is captured; each frame's copies —
//! the set of (port, bytes) — must be exactly what the actions of its winner in the reference
//! classifier (`rqvs_classify::Reference`, over the flows the test says the switch holds) make
//! of it, by the switch tests' independent interpreter ([`outputs`]). A frame no rule matches
//! leaves no copy. Nothing unattributable may arrive. The check runs [`SETTLE`] after the
//! change's acknowledgement (ORIG/CCACHE revalidate their megaflows in the background).
#![allow(dead_code)]

#[path = "../../../switch/tests/common/mod.rs"]
mod swcommon;
pub use swcommon::{outputs, Rng, Topo, PORTS};

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rqvs_classify::Reference;
use rqvs_flow::formats::ofctl;
use rqvs_flow::frame::{build_frame, extract_datapath};
use rqvs_flow::key::{ETH_TYPE_IP, IPPROTO_ICMP, IPPROTO_TCP, IPPROTO_UDP};
use rqvs_flow::{FlowKey, Match, Rule};
use rqvs_ports::testnet::{self, RawSocket};

use crate::common::ctl;

/// How long after a change is acknowledged the switch may still decide packets by the rules
/// before it (the revalidator's work in ORIG and CCACHE; see `switch/tests/churn`).
pub const SETTLE: Duration = Duration::from_millis(200);

/// Traffic tests of one binary run one at a time: each sends frames and expects none lost.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where the switch's ports are.
enum Net {
    Veths { topo: Topo, socks: Vec<RawSocket> },
    Pcap,
}

/// A running `rqvs switch --openflow` (see the module documentation). Dropping it kills the
/// process (by pid) before the namespaces go.
pub struct OfSwitch {
    child: Child,
    stderr: Arc<Mutex<String>>,
    /// The management socket.
    pub sock: PathBuf,
    port: u16,
    net: Net,
    /// The next frame's sequence number (never reused: a late frame cannot pass for a new one).
    seq: u32,
    rng: Rng,
}

impl Drop for OfSwitch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl OfSwitch {
    /// Starts the switch with `rules` and `design`, the management socket in `dir`; on veths
    /// when `traffic` and the test may create namespaces (`tag` names them), else on pcap-out
    /// ports in `dir`. `listen` is the `--openflow` argument (`None`: `ptcp:127.0.0.1:PORT`);
    /// its port must be the one it names. Returns once the switch says it is ready.
    pub fn start(dir: &Path, tag: &str, rules: &Path, design: &str, traffic: bool) -> OfSwitch {
        OfSwitch::start_on(dir, tag, rules, design, traffic, None)
    }

    /// [`OfSwitch::start`] with the listener given as `--openflow` takes it (`(text, port)`).
    pub fn start_on(
        dir: &Path,
        tag: &str,
        rules: &Path,
        design: &str,
        traffic: bool,
        listen: Option<(&str, u16)>,
    ) -> OfSwitch {
        let sock = dir.join("ctl.sock");
        let rqvs = env!("CARGO_BIN_EXE_rqvs");
        let (net, mut cmd, port) = if traffic && testnet::available(tag) {
            let topo = Topo::new(tag, 1);
            topo.sw.ip(&["link", "set", "lo", "up"]).unwrap();
            let socks: Vec<RawSocket> = (1..=PORTS as usize).map(|p| topo.host_socket(p)).collect();
            let mut c = Command::new("ip");
            c.args(["netns", "exec", topo.sw.name(), rqvs, "switch"]);
            for p in 1..=PORTS {
                c.args(["--port".to_string(), format!("p{p}:afpacket")]);
            }
            (Net::Veths { topo, socks }, c, 6653)
        } else {
            let mut c = Command::new(rqvs);
            c.arg("switch");
            for f in ["p1.pcap", "port2.pcap", "port3.pcap"] {
                c.args(["--port".to_string(), format!("pcap-out:{}", dir.join(f).display())]);
            }
            (Net::Pcap, c, free_port())
        };
        let (listen, port) = match listen {
            Some((l, p)) => (l.to_string(), p),
            None => (format!("ptcp:127.0.0.1:{port}"), port),
        };
        cmd.args(["--rules", rules.to_str().unwrap(), "--ctl", sock.to_str().unwrap()]).args([
            "--openflow",
            &listen,
            "--duration",
            "600",
            "--design",
            design,
        ]);
        let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (err, into) = (child.stderr.take().unwrap(), stderr.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let mut s = into.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        let mut sw = OfSwitch { child, stderr, sock, port, net, seq: 0, rng: Rng(0x0f5e_ed00 ^ u64::from(port)) };
        let t0 = Instant::now();
        while !sw.stderr().contains("rqvs switch: ready") || !sw.sock.exists() {
            if let Some(s) = sw.child.try_wait().unwrap() {
                panic!("the switch ended before it was ready ({s}): {}", sw.stderr());
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "the switch is not ready: {}", sw.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
        sw
    }

    /// What the switch printed on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Whether frames can be sent (the switch is on veths).
    pub fn has_traffic(&self) -> bool {
        matches!(self.net, Net::Veths { .. })
    }

    /// The `ovs-ofctl` target.
    pub fn target(&self) -> String {
        format!("tcp:127.0.0.1:{}", self.port)
    }

    /// The names of ports 1..=3 as `show` prints them.
    pub fn port_names(&self) -> [&'static str; 3] {
        match self.net {
            Net::Veths { .. } => ["p1", "p2", "p3"],
            Net::Pcap => ["p1.pcap", "port2.pcap", "port3.pcap"],
        }
    }

    /// `ovs-ofctl -O VERSION ARGS`, in the switch's namespace when it has one.
    pub fn ofctl(&self, version: &str, args: &[&str]) -> Output {
        let mut c = match &self.net {
            Net::Veths { topo, .. } => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", topo.sw.name(), "ovs-ofctl"]);
                c
            }
            Net::Pcap => Command::new("ovs-ofctl"),
        };
        c.args(["-O", version]).args(args).output().unwrap()
    }

    /// A TCP connection to the switch's OpenFlow listener, made in its namespace when it has
    /// one (the socket stays usable from any thread).
    #[allow(dead_code)]
    pub fn connect(&self) -> std::net::TcpStream {
        let connect = || std::net::TcpStream::connect(("127.0.0.1", self.port));
        match &self.net {
            Net::Veths { topo, .. } => topo.sw.run(connect).expect("into the switch's namespace"),
            Net::Pcap => connect(),
        }
        .expect("a connection to the switch's OpenFlow listener")
    }

    /// A command run in the switch's namespace (on veths; else as it is).
    #[allow(dead_code)]
    pub fn in_switch_ns(&self, program: &str) -> Command {
        match &self.net {
            Net::Veths { topo, .. } => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", topo.sw.name(), program]);
                c
            }
            Net::Pcap => Command::new(program),
        }
    }

    /// Sends `frame` from the host on port `port` (1-based; on veths only).
    #[allow(dead_code)]
    pub fn send_from(&self, port: usize, frame: &[u8]) {
        match &self.net {
            Net::Veths { socks, .. } => socks[port - 1].send(frame).unwrap(),
            Net::Pcap => panic!("no veths: no frames can be sent"),
        }
    }

    /// The frames the host on port `port` receives until `quiet` passes without one.
    #[allow(dead_code)]
    pub fn received_on(&self, port: usize, quiet: Duration) -> Vec<Vec<u8>> {
        match &self.net {
            Net::Veths { socks, .. } => socks[port - 1].drain(quiet).unwrap(),
            Net::Pcap => Vec::new(),
        }
    }

    /// [`OfSwitch::ofctl`], asserting success: its stdout.
    pub fn ofctl_ok(&self, version: &str, args: &[&str]) -> String {
        let out = self.ofctl(version, args);
        assert!(out.status.success(), "ovs-ofctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `dump-flows` as a flow set ([`dumped`]).
    pub fn dump(&self, version: &str) -> BTreeSet<String> {
        dumped(&self.ofctl_ok(version, &["dump-flows", &self.target()]))
    }

    /// The switch's table through the management socket.
    pub fn ctl_rules(&self) -> BTreeSet<String> {
        normal(&ctl(&self.sock, &["dump-rules"]))
    }

    /// `rqvs ctl exit`, then waits (at most 10 s) for the exit; returns the status and stderr.
    pub fn exit(&mut self) -> (ExitStatus, String) {
        ctl(&self.sock, &["exit"]);
        let t0 = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                std::thread::sleep(Duration::from_millis(50));
                return (s, self.stderr());
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "the switch did not stop: {}", self.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The traffic check (see the module documentation): frames built from `flows` (up to
    /// `per_flow` each; flows no frame can be built for — not IPv4, another input port, a
    /// VLAN — are skipped) enter on port 1, and each must leave exactly as `table`'s reference
    /// winner says. Returns how many frames were checked and how many had a winner; does
    /// nothing (returns zeros) without veths.
    pub fn check_traffic(
        &mut self,
        table: &BTreeSet<String>,
        flows: &[Match],
        per_flow: usize,
        what: &str,
    ) -> (usize, usize) {
        let Net::Veths { socks, .. } = &self.net else { return (0, 0) };
        std::thread::sleep(SETTLE);
        let rules = rules_of(table);
        let reference = Reference::build(&rules).unwrap();
        let first = self.seq;
        let mut frames: Vec<Vec<u8>> = Vec::new();
        for m in flows {
            for _ in 0..per_flow {
                let Some(k) = key_for(m, &mut self.rng) else { break };
                let mut f = build_frame(&k.wire());
                if !has_room(&f) {
                    break;
                }
                let n = f.len();
                f[n - 4..].copy_from_slice(&(first + frames.len() as u32).to_be_bytes());
                frames.push(f);
            }
        }
        self.seq += frames.len() as u32;
        let mut want: Vec<Vec<(u32, Vec<u8>)>> = Vec::with_capacity(frames.len());
        let mut winners = Vec::with_capacity(frames.len());
        for f in &frames {
            let key = extract_datapath(f, 1).expect("a frame built from a key parses");
            let w = reference.lookup_rule(&key);
            let mut copies = w.map(|r| outputs(f, 1, &r.actions.0)).unwrap_or_default();
            copies.sort();
            want.push(copies);
            winners.push(w.map(|r| ofctl::format_flows(r).map(|v| v.join(" ")).unwrap_or_default()));
        }
        let before = Counts::of(&self.sock);
        for (i, f) in frames.iter().enumerate() {
            socks[0].send(f).unwrap();
            if i % 32 == 31 {
                // Below capacity: this checks exactness, not speed.
                std::thread::sleep(Duration::from_micros(300));
            }
        }
        // Every frame received and decided, every copy sent, nothing lost: then the copies are
        // on their way to the capturing sockets.
        let t0 = Instant::now();
        let after = loop {
            let c = Counts::of(&self.sock);
            if c.rx - before.rx == frames.len() as u64 && c.decided == c.rx && c.copies == c.accounted {
                break c;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "{what}: {} frames sent; the switch: {before:?} → {c:?}",
                frames.len()
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!((after.lost, after.tx_dropped), (before.lost, before.tx_dropped), "{what}: frames or copies lost");
        let mut got: BTreeMap<u32, Vec<(u32, Vec<u8>)>> = BTreeMap::new();
        let mut stray = Vec::new();
        for (i, s) in socks.iter().enumerate() {
            for f in s.drain(Duration::from_millis(100)).unwrap() {
                let seq = (f.len() >= 60).then(|| u32::from_be_bytes(f[f.len() - 4..].try_into().unwrap()));
                match seq {
                    Some(q) if (first..self.seq).contains(&q) => got.entry(q).or_default().push((i as u32 + 1, f)),
                    _ => stray.push((i + 1, f)),
                }
            }
        }
        assert!(
            stray.is_empty(),
            "{what}: {} frames nobody sent now, e.g. out of port {}: {:02x?}",
            stray.len(),
            stray[0].0,
            stray[0].1
        );
        let mut bad = Vec::new();
        for (i, w) in want.iter().enumerate() {
            let mut g = got.remove(&(first + i as u32)).unwrap_or_default();
            g.sort();
            if g != *w {
                let ports = |v: &[(u32, Vec<u8>)]| v.iter().map(|(p, _)| *p).collect::<Vec<_>>();
                bad.push(format!(
                    "frame {i} ({}): winner {}; want ports {:?}, got {:?}{}",
                    rqvs_classify::ofproto::format_packet(&extract_datapath(&frames[i], 1).unwrap()),
                    winners[i].as_deref().unwrap_or("none (table miss)"),
                    ports(w),
                    ports(&g),
                    if ports(w) == ports(&g) { " (bytes differ)" } else { "" }
                ));
            }
        }
        assert!(
            bad.is_empty(),
            "{what}: {} of {} frames left the switch wrongly:\n{}",
            bad.len(),
            frames.len(),
            bad[..bad.len().min(8)].join("\n")
        );
        let hits = winners.iter().filter(|w| w.is_some()).count();
        (frames.len(), hits)
    }
}

/// The switch's counters the traffic check waits on (`rqvs ctl --json show`): port 1's frames
/// received, decided (forwarded, dropped, malformed or lost) and lost, the copies made and
/// accounted for (sent or dropped on transmit), the copies dropped on transmit.
#[derive(Debug)]
struct Counts {
    rx: u64,
    decided: u64,
    lost: u64,
    copies: u64,
    accounted: u64,
    tx_dropped: u64,
}

impl Counts {
    fn of(sock: &Path) -> Counts {
        let j: serde_json::Value = serde_json::from_str(&ctl(sock, &["--json", "show"])).unwrap();
        let n = |v: &serde_json::Value| v.as_u64().unwrap_or_else(|| panic!("a count in {j}"));
        let p1 = &j["ports"][0]["frames"];
        let ports = j["ports"].as_array().unwrap();
        Counts {
            rx: n(&p1["rx"]),
            decided: ["forwarded", "dropped", "malformed", "lost"].iter().map(|k| n(&p1[k])).sum(),
            lost: n(&p1["lost"]) + n(&j["ports"][0]["rx_lost"]),
            copies: n(&j["outputs"]),
            accounted: n(&j["tx_accounted"]),
            tx_dropped: ports.iter().map(|p| n(&p["tx_dropped"])).sum(),
        }
    }
}

/// Whether a frame has four bytes of padding beyond its IPv4 packet for the sequence number.
fn has_room(f: &[u8]) -> bool {
    f.len() >= 60 && f[12..14] == [8, 0] && 14 + usize::from(u16::from_be_bytes([f[16], f[17]])) + 4 <= f.len()
}

/// A packet `m` matches: its value, the wildcarded bits at random (TCP or UDP when the
/// protocol is free; ports within the match's ranges). `None` when the test cannot send one:
/// not IPv4, another input port than 1, a VLAN tag, a fragment.
pub fn key_for(m: &Match, rng: &mut Rng) -> Option<FlowKey> {
    let (v, k) = (m.value(), m.mask());
    let fill32 = |v: u32, k: u32, r: u64| v & k | (r as u32) & !k;
    if (k.dl_type != 0 && v.dl_type != ETH_TYPE_IP)
        || (k.in_port != 0 && v.in_port != 1)
        || k.vlan_tci != 0
        || (k.nw_frag != 0 && v.nw_frag != 0)
    {
        return None;
    }
    let proto = if k.nw_proto != 0 { v.nw_proto } else { [IPPROTO_TCP, IPPROTO_UDP][rng.below(2) as usize] };
    let mut key =
        FlowKey::ipv4(fill32(v.nw_src, k.nw_src, rng.next()), fill32(v.nw_dst, k.nw_dst, rng.next()), proto, 0, 0);
    let mac = |v: [u8; 6], k: [u8; 6], d: [u8; 6]| -> [u8; 6] { std::array::from_fn(|i| v[i] & k[i] | d[i] & !k[i]) };
    key.dl_src = mac(v.dl_src, k.dl_src, [2, 0, 0, 0, 1, rng.below(256) as u8]);
    key.dl_dst = mac(v.dl_dst, k.dl_dst, [2, 0, 0, 0, 2, 1]);
    key.nw_tos = v.nw_tos & k.nw_tos | (rng.below(256) as u8) & !k.nw_tos & 0xfc;
    if matches!(proto, IPPROTO_TCP | IPPROTO_UDP) {
        let port = |v: u16, k: u16, range: rqvs_flow::PortRange, rng: &mut Rng| {
            (0..32)
                .map(|_| {
                    let x = range.lo + (rng.below(u64::from(range.hi - range.lo) + 1) as u16);
                    x & !k | v & k
                })
                .find(|x| range.contains(*x))
        };
        key.tp_src = port(v.tp_src, k.tp_src, m.tp_src_range(), rng)?;
        key.tp_dst = port(v.tp_dst, k.tp_dst, m.tp_dst_range(), rng)?;
    } else if proto == IPPROTO_ICMP {
        key.tp_src = v.tp_src & k.tp_src | (rng.below(256) as u16) & !k.tp_src & 0xff;
        key.tp_dst = v.tp_dst & k.tp_dst | (rng.below(256) as u16) & !k.tp_dst & 0xff;
    }
    if proto == IPPROTO_TCP {
        key.tcp_flags = v.tcp_flags & k.tcp_flags | (rng.below(64) as u16) & !k.tcp_flags;
    }
    m.matches(&key).then_some(key)
}

/// Flow text in one normal form (rqvs's writer), ids and order ignored.
pub fn normal(text: &str) -> BTreeSet<String> {
    ofctl::parse_flows("flows", text).unwrap().iter().flat_map(|r| ofctl::format_flows(r).unwrap()).collect()
}

/// The rules of a flow set (ids in its order).
pub fn rules_of(flows: &BTreeSet<String>) -> Vec<Rule> {
    let text: String = flows.iter().map(|f| format!("{f}\n")).collect();
    ofctl::parse_flows("table", &text).unwrap()
}

/// The matches of a flow set.
pub fn matches_of(flows: &BTreeSet<String>) -> Vec<Match> {
    rules_of(flows).into_iter().map(|r| r.matches).collect()
}

/// `ovs-ofctl dump-flows` output as flow text: the counters and table dropped.
pub fn dumped(text: &str) -> BTreeSet<String> {
    let flows: Vec<String> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("cookie="))
        .map(|l| {
            l.split(", ")
                .filter(|f| {
                    !["duration=", "table=", "n_packets=", "n_bytes=", "idle_age=", "hard_age="]
                        .iter()
                        .any(|p| f.trim_start().starts_with(p))
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .map(|l| set_field_as_mod(&l))
        .collect();
    normal(&flows.join("\n"))
}

/// `ovs-ofctl` prints OpenFlow 1.2+'s MAC rewrites as `set_field:MAC->eth_dst`; rqvs's flow
/// syntax names them `mod_dl_dst:MAC` (the same action).
fn set_field_as_mod(line: &str) -> String {
    let Some((m, actions)) = line.split_once("actions=") else { return line.to_string() };
    let actions: Vec<String> = actions
        .split(',')
        .map(|a| match a.strip_prefix("set_field:").and_then(|x| x.split_once("->")) {
            Some((mac, "eth_dst")) => format!("mod_dl_dst:{mac}"),
            Some((mac, "eth_src")) => format!("mod_dl_src:{mac}"),
            _ => a.to_string(),
        })
        .collect();
    format!("{m}actions={}", actions.join(","))
}

/// OpenFlow's non-strict selection, written here independently of the switch: `flow` is
/// selected by `by` when every packet it matches `by` matches (its mask covers `by`'s and
/// agrees on `by`'s bits, its port ranges lie within `by`'s) and its cookie agrees with
/// `cookie` under `cookie_mask`.
pub fn selects(by: &Match, cookie: u64, cookie_mask: u64, flow: &Rule) -> bool {
    let (bm, fm) = (by.mask(), flow.matches.mask());
    let within = |i: rqvs_flow::PortRange, o: rqvs_flow::PortRange| o.lo <= i.lo && i.hi <= o.hi;
    bm.is_subset_of(fm)
        && flow.matches.value().masked(bm) == *by.value()
        && within(flow.matches.tp_src_range(), by.tp_src_range())
        && within(flow.matches.tp_dst_range(), by.tp_dst_range())
        && flow.cookie & cookie_mask == cookie & cookie_mask
}

/// The match of an `ovs-ofctl` match argument (`tcp,nw_src=10.0.0.0/8`).
pub fn match_of(text: &str) -> Match {
    let line = if text.is_empty() { "actions=drop".to_string() } else { format!("{text},actions=drop") };
    ofctl::parse_flow("match", 1, &line, 0).unwrap().matches
}

/// The flows of `table` that `by` (with a cookie and mask) selects, as flow lines.
pub fn selected(table: &BTreeSet<String>, by: &str, cookie: u64, cookie_mask: u64) -> BTreeSet<String> {
    let m = match_of(by);
    table
        .iter()
        .filter(|f| {
            let r = ofctl::parse_flow("flow", 1, f, 0).unwrap();
            selects(&m, cookie, cookie_mask, &r)
        })
        .cloned()
        .collect()
}

/// `flow` with its actions replaced.
pub fn with_actions(flow: &str, actions: &str) -> String {
    let (m, _) = flow.split_once("actions=").unwrap();
    format!("{m}actions={actions}")
}
