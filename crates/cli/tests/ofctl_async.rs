//! Plain `ovs-ofctl monitor` (no `-O`: OpenFlow 1.0, which asks for `NXT_PACKET_IN2`) and
//! `ovs-ofctl packet-out` against `rqvs switch` on veths print what they print against real
//! Open vSwitch 3.1 for the same events: a packet-in from `actions=controller` (a frame from a
//! host, and a 1.0 PACKET_OUT whose action is `controller`), a FLOW_REMOVED of a
//! `send_flow_rem` flow's hard timeout, and the PORT_STATUS of a port whose interface is set
//! down and up again. Open vSwitch runs on dummy ports (`netdev-dummy/receive`,
//! `netdev-dummy/set-admin-state`), rqvs on veths in the test's namespaces; the texts are
//! compared but for durations, MAC addresses, speeds and features (a veth's against a dummy's). A 1.0 PACKET_OUT to port 2 must
//! leave on port 2.
//!
//! Needs root and `ip` (else skipped; a failure with `RQVS_REQUIRE_NETNS=1`) and Open vSwitch
//! (else skipped; a failure with `RQVS_REQUIRE_OVS=1`). The `ovs-ofctl monitor` processes are
//! killed by pid.

mod common;
mod ofswitch;

use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use common::TempDir;
use ofswitch::OfSwitch;

/// The ARP request both switches are sent (the one captured in `rqvs_openflow::of10_async`).
const FRAME: &str = "ffffffffffff00000000000108060001080006040001000000000001c0a80001000000000000c0a80002";

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// A process started by the test: killed by pid and reaped on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What a switch under test is told to do.
trait Switch {
    /// `ovs-ofctl ARGS` (no `-O`) against the switch, where it can reach it.
    fn ofctl(&self) -> Command;
    fn target(&self) -> String;
    /// A frame arrives on port 1.
    fn receive_on_1(&self);
    /// Port 2's interface goes administratively down (`up` false) or up.
    fn set_port_2(&self, up: bool);
}

struct Rqvs(OfSwitch);

impl Switch for Rqvs {
    fn ofctl(&self) -> Command {
        self.0.in_switch_ns("ovs-ofctl")
    }
    fn target(&self) -> String {
        self.0.target()
    }
    fn receive_on_1(&self) {
        self.0.send_from(1, &hex(FRAME));
    }
    fn set_port_2(&self, up: bool) {
        let st = self.0.in_switch_ns("ip").args(["link", "set", "p2", if up { "up" } else { "down" }]).status();
        assert!(st.unwrap().success());
    }
}

struct Ovs(rqvs_testkit::ovs::Ovs);

impl Switch for Ovs {
    fn ofctl(&self) -> Command {
        Command::new("ovs-ofctl")
    }
    fn target(&self) -> String {
        self.0.mgmt()
    }
    fn receive_on_1(&self) {
        self.0.appctl(&["netdev-dummy/receive", "p1", FRAME]).unwrap();
    }
    fn set_port_2(&self, up: bool) {
        self.0.appctl(&["netdev-dummy/set-admin-state", "p2", if up { "up" } else { "down" }]).unwrap();
    }
}

fn ofctl_ok(sw: &dyn Switch, args: &[&str]) {
    let out = sw.ofctl().args(args).output().unwrap();
    assert!(out.status.success(), "ovs-ofctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Runs the events under `ovs-ofctl monitor TARGET 65535`; what the monitor printed, each
/// duration, MAC address and speed line normalized.
fn monitored(sw: &dyn Switch, out: &Path) -> Vec<String> {
    let target = sw.target();
    ofctl_ok(sw, &["add-flow", &target, "cookie=0x34,in_port=1,actions=controller"]);
    let monitor = sw
        .ofctl()
        .args(["monitor", &target, "65535"])
        // Its control socket (`ovs-ofctl.PID.ctl`) goes into the test's directory.
        .env("OVS_RUNDIR", out.parent().unwrap())
        // `monitor` prints what it receives on stderr, with its log lines.
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(out).unwrap())
        .spawn()
        .unwrap();
    let monitor = Proc(monitor);
    // The monitor's SET_CONFIG, NXT_SET_PACKET_IN_FORMAT and barriers.
    std::thread::sleep(Duration::from_millis(1500));
    sw.receive_on_1();
    std::thread::sleep(Duration::from_millis(300));
    // A 1.0 PACKET_OUT whose action sends the frame to the controller: a packet-in.
    ofctl_ok(sw, &["packet-out", &target, "controller", "controller", FRAME]);
    std::thread::sleep(Duration::from_millis(300));
    ofctl_ok(
        sw,
        &[
            "add-flow",
            &target,
            "send_flow_rem,priority=6,cookie=0x12,ip,nw_dst=10.0.0.8,hard_timeout=1,actions=output:2",
        ],
    );
    std::thread::sleep(Duration::from_millis(3000));
    sw.set_port_2(false);
    std::thread::sleep(Duration::from_millis(700));
    sw.set_port_2(true);
    std::thread::sleep(Duration::from_millis(1000));
    // SIGTERM (by pid), not SIGKILL: ovs-ofctl then flushes what it printed into the file.
    let pid = monitor.0.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let mut monitor = monitor;
    let _ = monitor.0.wait();
    let text = std::fs::read_to_string(out).unwrap();
    text.lines()
        // Speeds and features: a veth's (10 Gb/s) are not a dummy port's (none).
        .filter(|l| {
            let t = l.trim_start();
            !["speed:", "current:", "supported:", "advertised:", "peer:"].iter().any(|p| t.starts_with(p))
                && !l.contains("|fatal_signal|")
        })
        .map(|l| {
            l.split(' ')
                .map(|w| {
                    if w.starts_with("duration") {
                        "durationT".to_string()
                    } else if let Some(a) = w.strip_prefix("addr:") {
                        assert_eq!(a.len(), 17, "{l}");
                        "addr:X".to_string()
                    } else {
                        w.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

#[test]
fn ovs_ofctl_monitor_prints_what_it_prints_against_open_vswitch() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let _serial = ofswitch::serial();
    let dir = TempDir::new("ofctl-async");
    let rules = dir.join("rules.flows");
    std::fs::write(&rules, "priority=0,actions=drop\n").unwrap();
    let sw = OfSwitch::start(dir.path(), "ofas", &rules, "orig", true);
    if !sw.has_traffic() {
        return;
    }
    let Some(ovs) = rqvs_testkit::ovs::start_or_skip("ofctl-async") else { return };
    let ovs = Ovs(ovs);
    let want = monitored(&ovs, &dir.join("ovs.monitor"));
    let rqvs = Rqvs(sw);
    let got = monitored(&rqvs, &dir.join("rqvs.monitor"));
    // What Open vSwitch printed: the events are all there (a check of the scenario itself).
    let all = want.join("\n");
    for what in [
        "NXT_PACKET_IN2 (xid=0x0): cookie=0x34 total_len=42 in_port=1 (via action) data_len=42 (unbuffered)",
        "in_port=CONTROLLER (via action)",
        "OFPT_FLOW_REMOVED (xid=0x0): priority=6,ip,nw_dst=10.0.0.8 reason=hard cookie:0x12 durationT idle0",
        "OFPT_PORT_STATUS (xid=0x0): MOD: 2(p2): addr:X",
        "config:     PORT_DOWN",
        "state:      LINK_DOWN",
    ] {
        assert!(all.contains(what), "Open vSwitch printed no {what:?}:\n{all}");
    }
    assert_eq!(got, want, "rqvs:\n{}\n\nOpen vSwitch:\n{all}", got.join("\n"));
}

/// `ovs-ofctl packet-out` without `-O` (1.0's OFPT_PACKET_OUT) sends the frame out of the port
/// its action names, in both syntaxes (`IN_PORT ACTIONS PACKET` and `in_port=... packet=...
/// actions=...`); a packet-out naming a port the switch lacks is refused.
#[test]
fn ovs_ofctl_packet_out_sends_the_frame() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let _serial = ofswitch::serial();
    let dir = TempDir::new("ofctl-packet-out");
    let rules = dir.join("rules.flows");
    std::fs::write(&rules, "priority=0,actions=drop\n").unwrap();
    let sw = OfSwitch::start(dir.path(), "ofpo", &rules, "orig", true);
    if !sw.has_traffic() {
        return;
    }
    let target = sw.target();
    let frame = hex(FRAME);
    for args in [
        vec!["packet-out", &target, "controller", "output:2", FRAME],
        vec!["packet-out", &target, &format!("in_port=1 packet={FRAME} actions=output:2")],
    ] {
        let out = sw.in_switch_ns("ovs-ofctl").args(&args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(sw.received_on(2, Duration::from_secs(2)), vec![frame.clone()], "{args:?}");
    }
    let out =
        sw.in_switch_ns("ovs-ofctl").args(["packet-out", &target, "controller", "output:9", FRAME]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("OFPBAC_BAD_OUT_PORT"), "{err}");
}

/// The `config:` line of port `name` in `ovs-ofctl show`.
fn config_of(show: &str, name: &str) -> String {
    let mut lines = show.lines().skip_while(|l| !l.contains(&format!("({name}):")));
    lines.next().unwrap_or_else(|| panic!("no port {name} in {show}"));
    lines.next().unwrap().trim().trim_start_matches("config:").trim().to_string()
}

/// `mod-port` in OpenFlow 1.0 (no `-O`), 1.3 and 1.4, as Open vSwitch does it: `down` sets the
/// interface administratively down (PORT_DOWN in `show`, LINK_DOWN, no frame leaves through it
/// — it counts as dropped), `up` back; `no-packet-in` is kept and shown, and sends PORT_STATUS
/// to a monitoring connection; `no-forward` stops what leaves through the port and `forward`
/// brings it back, in every version; `no-flood` is 1.0's (1.3 has no NO_FLOOD: `ovs-ofctl`
/// sends nothing to change; more in tests/port_mod_bits.rs); an unknown port
/// is BAD_PORT and a wrong hardware address BAD_HW_ADDR (raw PORT_MODs: `ovs-ofctl` checks both
/// itself).
#[test]
fn ovs_ofctl_mod_port_in_every_version() {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let _serial = ofswitch::serial();
    let dir = TempDir::new("ofctl-mod-port");
    let rules = dir.join("rules.flows");
    std::fs::write(&rules, "in_port=1,actions=output:2\n").unwrap();
    let sw = OfSwitch::start(dir.path(), "ofpm", &rules, "orig", true);
    if !sw.has_traffic() {
        return;
    }
    let target = sw.target();
    let ofctl = |v: Option<&str>, args: &[&str]| {
        let mut c = sw.in_switch_ns("ovs-ofctl");
        if let Some(v) = v {
            c.args(["-O", v]);
        }
        c.args(args).output().unwrap()
    };
    let ok = |v: Option<&str>, args: &[&str]| {
        let o = ofctl(v, args);
        assert!(o.status.success(), "{v:?} {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let frame = hex(FRAME);
    let passes = || {
        sw.send_from(1, &frame);
        sw.received_on(2, Duration::from_millis(500)) == vec![frame.clone()]
    };
    assert!(passes(), "port 2 forwards before any mod-port");
    for v in [None, Some("OpenFlow13"), Some("OpenFlow14")] {
        ok(v, &["mod-port", &target, "p2", "down"]);
        let show = ok(v, &["show", &target]);
        assert_eq!(config_of(&show, "p2"), "PORT_DOWN", "{v:?}: {show}");
        let link = sw.in_switch_ns("ip").args(["-o", "link", "show", "p2"]).output().unwrap();
        let link = String::from_utf8_lossy(&link.stdout).into_owned();
        assert!(!link.contains(",UP") && !link.contains("<UP"), "{v:?}: the interface is still up: {link}");
        // The link watcher reports LINK_DOWN within its period.
        std::thread::sleep(Duration::from_millis(300));
        let show = ok(v, &["show", &target]);
        assert!(show.contains("LINK_DOWN"), "{v:?}: {show}");
        assert!(!passes(), "{v:?}: a frame left through a port set down");
        ok(v, &["mod-port", &target, "p2", "up"]);
        let show = ok(v, &["show", &target]);
        assert_eq!(config_of(&show, "p2"), "0", "{v:?}: {show}");
        let t0 = std::time::Instant::now();
        while !passes() {
            assert!(t0.elapsed() < Duration::from_secs(5), "{v:?}: port 2 does not forward after `up`");
        }
        ok(v, &["mod-port", &target, "p2", "no-packet-in"]);
        assert_eq!(config_of(&ok(v, &["show", &target]), "p2"), "NO_PACKET_IN", "{v:?}");
        ok(v, &["mod-port", &target, "p2", "packet-in"]);
        assert_eq!(config_of(&ok(v, &["show", &target]), "p2"), "0", "{v:?}");
        ok(v, &["mod-port", &target, "p2", "no-forward"]);
        assert_eq!(config_of(&ok(v, &["show", &target]), "p2"), "NO_FWD", "{v:?}");
        assert!(!passes(), "{v:?}: a frame left through a no-forward port");
        ok(v, &["mod-port", &target, "p2", "forward"]);
        assert_eq!(config_of(&ok(v, &["show", &target]), "p2"), "0", "{v:?}");
        assert!(passes(), "{v:?}: port 2 does not forward after `forward`");
    }
    ok(None, &["mod-port", &target, "p2", "no-flood"]);
    assert_eq!(config_of(&ok(None, &["show", &target]), "p2"), "NO_FLOOD");
    // `output:2` still reaches a no-flood port.
    assert!(passes());
    ok(None, &["mod-port", &target, "p2", "flood"]);
    // 1.3 has no NO_FLOOD bit: ovs-ofctl asks for no change (as against Open vSwitch).
    ok(Some("OpenFlow13"), &["mod-port", &target, "p2", "no-flood"]);
    assert_eq!(config_of(&ok(None, &["show", &target]), "p2"), "0");
    assert!(passes());

    // A monitoring connection is told of a PORT_MOD's change.
    let out = dir.join("monitor.txt");
    let mut monitor = Proc(
        sw.in_switch_ns("ovs-ofctl")
            .args(["monitor", &target, "65535"])
            .env("OVS_RUNDIR", dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&out).unwrap())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(1500));
    ok(None, &["mod-port", &target, "p3", "no-packet-in"]);
    std::thread::sleep(Duration::from_millis(500));
    assert!(Command::new("kill").args(["-TERM", &monitor.0.id().to_string()]).status().unwrap().success());
    let _ = monitor.0.wait();
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("OFPT_PORT_STATUS (xid=0x0): MOD: 3(p3)"), "{text}");
    assert!(text.contains("config:     NO_PACKET_IN"), "{text}");

    // Raw PORT_MODs (ovs-ofctl would not send these): errors as OVS's.
    let show = ok(None, &["show", &target]);
    let mac = show.lines().find(|l| l.contains("(p2): addr:")).unwrap().split("addr:").nth(1).unwrap().replace(':', "");
    let script = format!(
        r#"
import socket, struct
def exactly(s, n):
    b = b""
    while len(b) < n:
        more = s.recv(n - len(b))
        assert more, "closed"
        b += more
    return b
def message(s):
    h = exactly(s, 8)
    return h + exactly(s, struct.unpack("!H", h[2:4])[0] - 8)
def one(version, body):
    s = socket.create_connection(("127.0.0.1", {port}))
    s.sendall(struct.pack("!BBHI", version, 0, 8, 1))
    message(s)
    # OFPT_PORT_MOD: 15 in 1.0, 16 in 1.3.
    s.sendall(struct.pack("!BBHI", version, 15 if version == 1 else 16, 8 + len(body), 2) + body)
    m = message(s)
    t, c = struct.unpack("!HH", m[8:12])
    if t == 0xb0c2:
        t, c = struct.unpack("!HH", m[16:20])
    print(m[1], t, c)
mac = bytes.fromhex("{mac}")
for v, port, hw in [(1, 9, mac), (1, 2, bytes(6)), (4, 9, mac), (4, 2, bytes(6))]:
    if v == 1:
        body = struct.pack("!H6sIII4x", port, hw, 1, 1, 0)
    else:
        body = struct.pack("!I4x6s2xIII4x", port, hw, 1, 1, 0)
    one(v, body)
"#,
        port = target.rsplit(':').next().unwrap(),
    );
    let o = sw.in_switch_ns("python3").args(["-c", &script]).output().unwrap();
    let got = String::from_utf8_lossy(&o.stdout).into_owned();
    // 1.0: OFPET_PORT_MOD_FAILED is type 4 (BAD_PORT 0, BAD_HW_ADDR 1); 1.3: type 7.
    assert_eq!(got, "1 4 0\n1 4 1\n1 7 0\n1 7 1\n", "{}", String::from_utf8_lossy(&o.stderr));
    let show = ok(None, &["show", &target]);
    assert_eq!(config_of(&show, "p2"), "0", "a refused PORT_MOD changed the port: {show}");
}
