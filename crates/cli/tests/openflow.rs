//! `rqvs switch --openflow ptcp:127.0.0.1:PORT` driven by the real `ovs-ofctl`, in OpenFlow 1.3
//! and 1.4: `show`, `add-flow`, `add-flows FILE`, `dump-flows` (parsed back and compared as a set
//! with what was loaded), `del-flows` with a match, `del-flows --strict`, `mod-flows`, a refused
//! flow-mod leaving the table alone, and `rqvs ctl dump-rules`/`show` agreeing throughout. A
//! raw client checks the errors: an unknown message type, a HELLO with no common version, and
//! several connections at once. Per-flow counters: a capture through the switch (every design,
//! one and two PMDs), then `ovs-ofctl dump-flows`' `n_packets`/`n_bytes`, `dump-aggregate` and
//! `rqvs ctl dump-rules --stats` are those of the frames each flow is the reference winner of. Loopback TCP only.
//!
//! Skipped (with the reason printed) when `ovs-ofctl` is missing, unless `RQVS_REQUIRE_OVS=1`.

mod common;
use common::{ctl, TempDir};

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use rqvs_flow::formats::ofctl;

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Running {
    /// `rqvs ctl exit` on `sock`, then waits (at most 10 s, else fails with `what`) for the exit.
    fn exit(&mut self, sock: &Path, what: &str) -> std::process::ExitStatus {
        ctl(sock, &["exit"]);
        let t0 = Instant::now();
        loop {
            if let Some(s) = self.0.try_wait().unwrap() {
                return s;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "{what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `--port pcap-out:DIR/...` for ports 1-3 (files in the test's directory: nothing left behind).
fn port_args(dir: &Path) -> Vec<String> {
    ["p1.pcap", "port2.pcap", "port3.pcap"]
        .iter()
        .flat_map(|f| ["--port".to_string(), format!("pcap-out:{}", dir.join(f).display())])
        .collect()
}

/// Starts the switch on three pcap-out ports with `rules`, the OpenFlow listener on
/// `ptcp:127.0.0.1:PORT` and a management socket; returns once the listener accepts.
fn start(dir: &Path, rules: &Path, port: u16, design: &str) -> Running {
    start_on(dir, rules, &format!("ptcp:127.0.0.1:{port}"), port, design)
}

/// [`start`] with the listener given as `--openflow` takes it (`listen`, on 127.0.0.1:`port`).
fn start_on(dir: &Path, rules: &Path, listen: &str, port: u16, design: &str) -> Running {
    start_with(
        dir,
        rules,
        listen,
        port,
        &[&["--design", design], &port_args(dir).iter().map(String::as_str).collect::<Vec<_>>()[..]].concat(),
    )
}

/// [`start_on`] with the switch's other arguments (ports, design, PMDs) given.
fn start_with(dir: &Path, rules: &Path, listen: &str, port: u16, args: &[&str]) -> Running {
    let sock = dir.join("ctl.sock");
    let child = Command::new(env!("CARGO_BIN_EXE_rqvs"))
        .args(["switch", "--rules", rules.to_str().unwrap(), "--ctl", sock.to_str().unwrap()])
        .args(args)
        .args(["--openflow", listen, "--duration", "300"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
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

fn ofctl_run(version: &str, args: &[&str]) -> Output {
    Command::new("ovs-ofctl").args(["-O", version]).args(args).output().unwrap()
}

/// `ovs-ofctl -O VERSION --no-names ARGS` (asserting success): its stdout.
fn ofctl_ok(version: &str, args: &[&str]) -> String {
    let mut a = vec!["--no-names"];
    a.extend_from_slice(args);
    let out = ofctl_run(version, &a);
    assert!(out.status.success(), "ovs-ofctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Flow text in one normal form (rqvs's writer), ids and order ignored.
fn normal(text: &str) -> BTreeSet<String> {
    ofctl::parse_flows("flows", text).unwrap().iter().flat_map(|r| ofctl::format_flows(r).unwrap()).collect()
}

/// `ovs-ofctl dump-flows` output as flow text: the counters and table dropped.
fn dumped(text: &str) -> BTreeSet<String> {
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

/// The switch's table through the management socket.
fn ctl_rules(sock: &Path) -> BTreeSet<String> {
    normal(&ctl(sock, &["dump-rules"]))
}

/// A few dozen flows of several shapes: UDP and TCP on exact ports, prefixes, MACs, cookies.
fn generated() -> (Vec<String>, Vec<String>) {
    let mut udp = Vec::new();
    let mut tcp = Vec::new();
    for i in 0..24u32 {
        udp.push(format!(
            "cookie=0x{:x},priority={},udp,nw_src=10.{}.0.0/16,tp_dst={},actions=output:{}",
            0x100 + i % 3,
            1000 + i,
            i,
            2000 + i,
            2 + i % 2
        ));
        tcp.push(format!(
            "priority={},tcp,dl_src=02:00:00:00:00:{:02x},nw_dst=192.168.{}.0/24,tp_src={},actions=mod_dl_dst:02:00:00:00:01:{:02x},output:3",
            500 + i,
            i,
            i,
            3000 + i,
            i
        ));
    }
    (udp, tcp)
}

#[test]
fn ovs_ofctl_programs_a_running_switch() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    for (version, design) in [("OpenFlow13", "orig"), ("OpenFlow14", "cflows")] {
        let tmp = TempDir::new(&format!("cli-openflow-{version}"));
        let sock = tmp.join("ctl.sock");
        let base = "priority=5,icmp,actions=output:2\npriority=7,arp,actions=drop\n";
        let rules = tmp.join("rules.txt");
        std::fs::write(&rules, base).unwrap();
        let port = free_port();
        let mut sw = start(&tmp.0, &rules, port, design);
        let target = format!("tcp:127.0.0.1:{port}");
        let t = target.as_str();

        // show: one table, the three ports numbered 1.. as the switch numbers them.
        let out = ofctl_run(version, &["show", t]);
        let show = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{show}{}", String::from_utf8_lossy(&out.stderr));
        assert!(show.contains("n_tables:1"), "{show}");
        for p in ["1(p1.pcap)", "2(port2.pcap)", "3(port3.pcap)"] {
            assert!(show.contains(p), "{p} in {show}");
        }
        assert_eq!(dumped(&ofctl_ok(version, &["dump-flows", t])), normal(base));

        // add-flow, then add-flows of a file: the dump is what was loaded.
        let one = "priority=60000,udp,tp_dst=53,actions=output:2";
        ofctl_ok(version, &["add-flow", t, one]);
        let (udp, tcp) = generated();
        let file = tmp.join("add.txt");
        std::fs::write(&file, format!("{}\n{}\n", udp.join("\n"), tcp.join("\n"))).unwrap();
        ofctl_ok(version, &["add-flows", t, file.to_str().unwrap()]);
        let mut all = normal(base);
        all.extend(normal(one));
        all.extend(normal(&udp.join("\n")));
        all.extend(normal(&tcp.join("\n")));
        assert_eq!(all.len(), 2 + 1 + 48);
        assert_eq!(dumped(&ofctl_ok(version, &["dump-flows", t])), all, "{version}: dump-flows after add-flows");
        assert_eq!(ctl_rules(&sock), all, "rqvs ctl dump-rules agrees");
        let json: serde_json::Value = serde_json::from_str(&ctl(&sock, &["--json", "show"])).unwrap();
        assert_eq!(json["rules"], 51);
        // A filtered dump and the aggregate.
        assert_eq!(dumped(&ofctl_ok(version, &["dump-flows", t, "tcp"])), normal(&tcp.join("\n")));
        assert!(ofctl_ok(version, &["dump-aggregate", t]).contains("flow_count=51"));

        // Adding an existing match and priority replaces it.
        let replaced = udp[0].replace("output:2", "output:3");
        ofctl_ok(version, &["add-flow", t, &replaced]);
        all.remove(normal(&udp[0]).iter().next().unwrap());
        all.extend(normal(&replaced));
        assert_eq!(dumped(&ofctl_ok(version, &["dump-flows", t])), all);

        // A refused flow-mod (another table; an add with check_overlap that overlaps a flow of
        // its priority) changes nothing.
        let out = ofctl_run(version, &["--no-names", "add-flow", t, "table=3,priority=1,udp,actions=drop"]);
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("BAD_TABLE_ID"), "{out:?}");
        let out = ofctl_run(
            version,
            &["--no-names", "add-flow", t, "check_overlap,priority=5,icmp,nw_src=10.0.0.0/8,actions=drop"],
        );
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("OFPFMFC_OVERLAP"), "{out:?}");
        assert_eq!(ctl_rules(&sock), all);

        // del-flows with a match (non-strict): every UDP flow under 10.3.0.0/16 and more.
        ofctl_ok(version, &["del-flows", t, "udp,nw_src=10.3.0.0/16"]);
        all.retain(|f| !f.contains("nw_src=10.3.0.0/16"));
        assert_eq!(all.len(), 50);
        assert_eq!(dumped(&ofctl_ok(version, &["dump-flows", t])), all);
        // A cookie filter.
        ofctl_ok(version, &["del-flows", t, "cookie=0x101/-1,udp"]);
        all.retain(|f| !f.contains("cookie=0x101"));
        assert_eq!(dumped(&ofctl_ok(version, &["dump-flows", t])), all);
        // --strict: only the exact match and priority; a wrong priority deletes nothing.
        let strict = "priority=500,tcp,dl_src=02:00:00:00:00:00,nw_dst=192.168.0.0/24,tp_src=3000";
        ofctl_ok(version, &["--strict", "del-flows", t, &strict.replace("500", "501")]);
        assert_eq!(dumped(&ofctl_ok(version, &["dump-flows", t])), all);
        ofctl_ok(version, &["--strict", "del-flows", t, strict]);
        all.remove(normal(&tcp[0]).iter().next().unwrap());
        assert_eq!(dumped(&ofctl_ok(version, &["dump-flows", t])), all);

        // mod-flows: every TCP flow gets new actions, keeping match, priority and cookie.
        ofctl_ok(version, &["mod-flows", t, "tcp,actions=output:1"]);
        let modified: BTreeSet<String> =
            all.iter().map(|f| if f.contains("tcp") { retarget(f) } else { f.clone() }).collect();
        assert_eq!(dumped(&ofctl_ok(version, &["dump-flows", t])), modified);
        // --strict mod-flows: one flow.
        let one_tcp = "priority=501,tcp,dl_src=02:00:00:00:00:01,nw_dst=192.168.1.0/24,tp_src=3001";
        ofctl_ok(version, &["--strict", "mod-flows", t, &format!("{one_tcp},actions=output:2")]);
        let modified: BTreeSet<String> = modified
            .into_iter()
            .map(|f| if f.starts_with("priority=501,") { f.replace("actions=output:1", "actions=output:2") } else { f })
            .collect();
        assert_eq!(dumped(&ofctl_ok(version, &["dump-flows", t])), modified);
        assert_eq!(ctl_rules(&sock), modified, "rqvs ctl dump-rules agrees after mod-flows");
        // The slow path agrees: the strictly modified flow outputs to 2, the others to 1.
        let trace = |p: &str| ctl(&sock, &["ofproto/trace", p]);
        let tr = trace("in_port=1,tcp,dl_src=02:00:00:00:00:01,nw_dst=192.168.1.9,tp_src=3001,tp_dst=80");
        assert!(tr.contains("priority=501") && tr.contains("Datapath actions: 2"), "{design}: {tr}");
        let tr = trace("in_port=1,tcp,dl_src=02:00:00:00:00:02,nw_dst=192.168.2.9,tp_src=3002,tp_dst=80");
        assert!(tr.contains("priority=502") && tr.contains("Datapath actions: 1"), "{design}: {tr}");
        let json: serde_json::Value = serde_json::from_str(&ctl(&sock, &["--json", "show"])).unwrap();
        assert_eq!(json["rules"], modified.len());

        // del-flows without a match empties the table.
        ofctl_ok(version, &["del-flows", t]);
        assert!(dumped(&ofctl_ok(version, &["dump-flows", t])).is_empty());
        assert!(ctl_rules(&sock).is_empty());

        // A clean stop.
        let status = sw.exit(&sock, "the switch did not stop");
        let mut err = String::new();
        sw.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        assert!(status.success(), "{err}");
    }
}

/// A TCP flow's actions replaced by `output:1`.
fn retarget(f: &str) -> String {
    let (m, _) = f.split_once("actions=").unwrap();
    format!("{m}actions=output:1")
}

/// Reads one whole OpenFlow message.
fn read_msg(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut h = [0u8; 8];
    s.read_exact(&mut h).ok()?;
    let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let mut body = vec![0u8; len.saturating_sub(8)];
    s.read_exact(&mut body).ok()?;
    Some([h.to_vec(), body].concat())
}

/// A HELLO of `version` with a version bitmap of `bitmap`.
fn hello(version: u8, bitmap: u32) -> Vec<u8> {
    let mut m = vec![version, 0, 0, 16, 0, 0, 0, 1];
    m.extend_from_slice(&[0, 1, 0, 8]);
    m.extend_from_slice(&bitmap.to_be_bytes());
    m
}

#[test]
fn bad_messages_get_errors_and_connections_are_independent() {
    let tmp = TempDir::new("cli-openflow-raw");
    let rules = tmp.join("rules.txt");
    std::fs::write(&rules, "priority=5,icmp,actions=output:2\n").unwrap();
    let port = free_port();
    let mut sw = start(&tmp.0, &rules, port, "orig");
    let sock = tmp.join("ctl.sock");
    let connect = || {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let h = read_msg(&mut s).expect("the switch's HELLO");
        assert_eq!(h[1], 0, "HELLO first");
        s
    };
    // Two connections at once, 1.3 and 1.4.
    let mut a = connect();
    let mut b = connect();
    a.write_all(&hello(4, 1 << 4)).unwrap();
    b.write_all(&hello(5, (1 << 4) | (1 << 5))).unwrap();
    // An unknown type on `a`: BAD_REQUEST/BAD_TYPE, quoting it; the connection stays.
    a.write_all(&[4, 200, 0, 8, 0, 0, 0, 7]).unwrap();
    let e = read_msg(&mut a).expect("an error");
    assert_eq!((e[0], e[1], &e[4..8], &e[8..12]), (4, 1, &[0, 0, 0, 7][..], &[0, 1, 0, 1][..]), "{e:?}");
    // A truncated FEATURES_REQUEST (length says 12, body of 4 junk bytes): BAD_LEN.
    a.write_all(&[4, 5, 0, 12, 0, 0, 0, 8, 1, 2, 3, 4]).unwrap();
    let e = read_msg(&mut a).expect("an error");
    assert_eq!((e[1], &e[8..12]), (1, &[0, 1, 0, 6][..]), "{e:?}");
    // A message of the other version on `a`: BAD_VERSION.
    a.write_all(&[5, 2, 0, 8, 0, 0, 0, 9]).unwrap();
    let e = read_msg(&mut a).expect("an error");
    assert_eq!((e[1], &e[8..12]), (1, &[0, 1, 0, 0][..]), "{e:?}");
    // `b` is unaffected: ECHO in 1.4.
    b.write_all(&[5, 2, 0, 12, 0, 0, 0, 3, 9, 9, 9, 9]).unwrap();
    let r = read_msg(&mut b).expect("an echo reply");
    assert_eq!(r, vec![5, 3, 0, 12, 0, 0, 0, 3, 9, 9, 9, 9]);
    // A GROUP_MOD (type 15): BAD_TYPE; BARRIER then answers.
    let mut gm = vec![5, 15, 0, 16, 0, 0, 0, 4];
    gm.extend_from_slice(&[0; 8]);
    b.write_all(&gm).unwrap();
    let e = read_msg(&mut b).expect("an error");
    assert_eq!((e[1], &e[8..12]), (1, &[0, 1, 0, 1][..]), "{e:?}");
    b.write_all(&[5, 20, 0, 8, 0, 0, 0, 5]).unwrap();
    assert_eq!(read_msg(&mut b).expect("a barrier reply")[1], 21);
    // Open bundles are limited per connection (64): the 65th gets BUNDLE_FAILED/OUT_OF_BUNDLES.
    for id in 0..65u32 {
        let mut open = vec![5, 33, 0, 16, 0, 0, 0, 6];
        open.extend_from_slice(&id.to_be_bytes());
        open.extend_from_slice(&[0, 0, 0, 1]); // OPEN_REQUEST, ATOMIC
        b.write_all(&open).unwrap();
        let r = read_msg(&mut b).expect("a reply");
        if id < 64 {
            assert_eq!((r[1], &r[12..14]), (33, &[0, 1][..]), "bundle {id} opened: {r:?}");
        } else {
            assert_eq!((r[1], &r[8..12]), (1, &[0, 17, 0, 1][..]), "65th bundle refused: {r:?}");
        }
    }
    // No common version: HELLO_FAILED, then the switch closes.
    let mut c = connect();
    c.write_all(&hello(1, 1 << 1)).unwrap();
    let e = read_msg(&mut c).expect("an error");
    assert_eq!((e[1], &e[8..12]), (1, &[0, 0, 0, 0][..]), "{e:?}");
    assert!(read_msg(&mut c).is_none(), "closed after HELLO_FAILED");
    // A header whose length is below 8 cannot be framed: an error and a close.
    let mut d = connect();
    d.write_all(&hello(4, 1 << 4)).unwrap();
    d.write_all(&[4, 2, 0, 3, 0, 0, 0, 1]).unwrap();
    let e = read_msg(&mut d).expect("an error");
    assert_eq!(&e[8..12], &[0, 1, 0, 6], "{e:?}");
    assert!(read_msg(&mut d).is_none());
    // The table is what it was; the switch stops cleanly with connections open.
    assert_eq!(normal(&ctl(&sock, &["dump-rules"])), normal("priority=5,icmp,actions=output:2"));
    let status = sw.exit(&sock, "the switch did not stop with connections open");
    assert!(status.success());
    assert!(read_msg(&mut a).is_none() && read_msg(&mut b).is_none(), "connections closed at stop");
}

/// Every design takes a converted ClassBench table (acl1 1K: 1,186 flows, `tcp_flags`, port
/// prefixes, cookies) through `ovs-ofctl add-flows`, and its dump — several MULTIPART_REPLY parts
/// — is that table; the slow path then answers with the loaded flows (`ofproto/trace`).
#[test]
fn a_converted_classbench_table_loads_and_dumps_in_every_design() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().and_then(Path::parent).unwrap();
    let acl = root.join("data/default/acl1_1k_rules.xz");
    for (design, version) in [("orig", "OpenFlow13"), ("ccache", "OpenFlow14"), ("cflows", "OpenFlow13")] {
        let tmp = TempDir::new(&format!("cli-openflow-acl-{design}"));
        let flows = tmp.join("acl.ofctl");
        let out = common::rqvs(&[
            "convert",
            "rules",
            acl.to_str().unwrap(),
            "--to",
            "ofctl",
            "--actions",
            "output:2",
            "-o",
            flows.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = std::fs::read_to_string(&flows).unwrap();
        let rules = tmp.join("rules.txt");
        std::fs::write(&rules, "priority=1,arp,actions=drop\n").unwrap();
        let port = free_port();
        let sock = tmp.join("ctl.sock");
        // The short form of the listener: ptcp:PORT on 127.0.0.1.
        let mut sw = start_on(&tmp.0, &rules, &format!("ptcp:{port}"), port, design);
        let t = format!("tcp:127.0.0.1:{port}");
        ofctl_ok(version, &["del-flows", &t]);
        ofctl_ok(version, &["add-flows", &t, flows.to_str().unwrap()]);
        let want = normal(&text);
        assert_eq!(want.len(), 1186);
        let dump = ofctl_ok(version, &["dump-flows", &t]);
        assert_eq!(dumped(&dump), want, "{design} {version}");
        assert_eq!(ctl_rules(&sock), want, "{design}: rqvs ctl dump-rules");
        // The first flow of the file wins for a packet made from it.
        let trace = ctl(
            &sock,
            &["ofproto/trace", "in_port=1,tcp,nw_src=14.114.240.160,nw_dst=78.162.59.75,tp_dst=31000,tcp_flags=0x010"],
        );
        assert!(trace.contains("priority=927") && trace.contains("Datapath actions: 2"), "{design}: {trace}");
        assert!(sw.exit(&sock, "the switch did not stop").success());
    }
}

/// `ovs-ofctl --bundle` (OpenFlow 1.4's bundles, OVS's ONF extension in 1.3): a bundle's flows
/// appear together, and a bundle with one refused flow-mod changes nothing.
#[test]
fn bundles_commit_all_or_nothing() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    for (version, design) in [("OpenFlow13", "orig"), ("OpenFlow14", "cflows")] {
        let tmp = TempDir::new(&format!("cli-openflow-bundle-{version}"));
        let sock = tmp.join("ctl.sock");
        let base = "priority=5,icmp,actions=output:2\n";
        let rules = tmp.join("rules.txt");
        std::fs::write(&rules, base).unwrap();
        let port = free_port();
        let mut sw = start(&tmp.0, &rules, port, design);
        let t = format!("tcp:127.0.0.1:{port}");
        let (udp, tcp) = generated();
        let good = format!("{}\n{}\n", udp.join("\n"), tcp.join("\n"));
        let file = tmp.join("good.txt");
        std::fs::write(&file, &good).unwrap();
        ofctl_ok(version, &["--bundle", "add-flows", &t, file.to_str().unwrap()]);
        let mut all = normal(base);
        all.extend(normal(&good));
        assert_eq!(dumped(&ofctl_ok(version, &["dump-flows", &t])), all, "{version}: after the bundle");
        // One bad flow (table 4) among good ones: the bundle fails, the table is unchanged.
        let bad = tmp.join("bad.txt");
        std::fs::write(
            &bad,
            "priority=9,udp,tp_dst=5,actions=output:2\ntable=4,priority=9,udp,tp_dst=6,actions=output:2\n",
        )
        .unwrap();
        let out = ofctl_run(version, &["--no-names", "--bundle", "add-flows", &t, bad.to_str().unwrap()]);
        assert!(!out.status.success(), "{version}: a bundle with a bad flow-mod is refused");
        assert_eq!(dumped(&ofctl_ok(version, &["dump-flows", &t])), all, "{version}: nothing of it applied");
        // A bundled delete and add together.
        let mixed = tmp.join("mixed.txt");
        std::fs::write(&mixed, "delete udp\nadd priority=77,udp,tp_dst=7,actions=output:3\n").unwrap();
        ofctl_ok(version, &["--bundle", "add-flows", &t, mixed.to_str().unwrap()]);
        all.retain(|f| !f.contains("udp"));
        all.extend(normal("priority=77,udp,tp_dst=7,actions=output:3"));
        assert_eq!(dumped(&ofctl_ok(version, &["dump-flows", &t])), all, "{version}: delete + add");
        assert_eq!(ctl_rules(&sock), all);
        assert!(sw.exit(&sock, "the switch did not stop").success());
    }
}

/// The flows of [`counted`]'s switch: overlapping, some never hit.
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
            let mut sw = start_with(&tmp.0, &rules_file, &format!("ptcp:127.0.0.1:{port}"), port, &args);
            let sock = tmp.join("ctl.sock");
            // The capture is done once the port has delivered every frame and the PMDs, their
            // input finished, have ended (they no longer answer `show`).
            let t0 = Instant::now();
            loop {
                let show: serde_json::Value = serde_json::from_str(&ctl(&sock, &["--json", "show"])).unwrap();
                if show["ports"][0]["rx_packets"] == frames.len() && show["pmds"].as_array().is_some_and(Vec::is_empty)
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
            let status = sw.exit(&sock, "the switch did not stop");
            assert!(status.success());
        }
    }
}

/// `rqvs bench openflow` on the embedded workload: every design streams its flow-mods through
/// the channel with no error and no frame decided wrongly, and the bundle becomes visible (a
/// frame decided by one of its flows after the commit).
#[test]
fn bench_openflow_streams_flow_mods_with_every_frame_checked() {
    let out = Command::new(env!("CARGO_BIN_EXE_rqvs"))
        .args(["bench", "openflow", "--flow-mods", "4000", "--bundle", "40", "--json", "-"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let designs = j["designs"].as_array().unwrap();
    assert_eq!(designs.len(), 3);
    for d in designs {
        let name = d["design"].as_str().unwrap();
        assert_eq!(d["mismatches"], 0, "{name}: {d}");
        assert_eq!(d["errors"], 0, "{name}");
        assert!(d["flow_mods"].as_u64().unwrap() >= 4000, "{name}");
        assert!(d["flow_mods_per_s"].as_f64().unwrap() > 0.0, "{name}");
        assert!(d["frames_exact"].as_u64().unwrap() > 0 && d["frames_during"].as_u64().unwrap() > 0, "{name}: {d}");
        assert!(d["bundle"]["visible_s"].as_f64().is_some(), "{name}: the bundle never became visible: {d}");
    }
}
