//! `rqvs switch --ovsdb` as an operator uses ovs-vswitchd (issue 37, second part), with the
//! real tools (OVS 3.1's `ovsdb-server`, `ovs-vsctl`, `ovs-ofctl`) and namespaced hosts on veths:
//!
//! - `ovs_ofctl_over_the_bridge_mgmt_socket`: `ovs-ofctl show/dump-flows/add-flow/del-flows br0`
//!   reach the switch through `$OVS_RUNDIR/br0.mgmt`; OpenFlow 1.0 (ovs-ofctl's default) is
//!   refused with a version negotiation failure the tool prints.
//! - `access_and_trunk_ports_for_normal`: `Port.tag`/`trunks`/`vlan_mode` for `NORMAL`: pings
//!   across access and trunk ports (the trunk's host answers tagged frames from a raw socket:
//!   the test kernel may lack 8021q), VLANs kept apart, tagged frames dropped on access ports,
//!   `trunks` changed while running; VLAN ports attached and changed without a datapath restart.
//! - `internal_ports_are_tap_devices`: the bridge's own port and a `type=internal` one are tap
//!   devices in the switch's namespace; a host pings addresses put on them; they keep their
//!   addresses across a datapath restart and go when their interface (or the switch) does.
//! - `in_band_control_reaches_the_controller_through_the_bridge`: a `fail_mode=secure` bridge
//!   with no flow whose controller is reached only through the bridge's own port connects
//!   with OVS's default `connection_mode` (in-band) and not with `out-of-band`; the hidden
//!   in-band rules are OVS's (`ovs-appctl bridge/dump-flows`), invisible to `ovs-ofctl`,
//!   untouched by `del-flows`, and gone with `other_config:disable-in-band=true`.
//! - `ofports_are_any_number_and_the_bridge_port_is_local`: `ofport_request=1000` honoured with
//!   no ports filling the gap; the bridge's own port is `LOCAL` (`Interface.ofport` 65534,
//!   `LOCAL(br0)` in `ovs-ofctl show` over 1.0 and 1.3); flows `in_port=LOCAL` and
//!   `actions=LOCAL` carry a ping between a host and `br0`'s address; `dump-ports br0 LOCAL`,
//!   `ofproto/trace br0 in_port=LOCAL,...` and `fdb/show` name it.
//! - `ports_are_added_and_removed_without_a_datapath_restart`: a port added and removed 10
//!   times while a 100-per-second ping stream between two other ports loses nothing; their
//!   counters keep counting; PORT_STATUS ADD/DEL each time (`ovs-ofctl monitor`); the port
//!   added again forwards; the log shows no datapath restart.
//!
//! - `two_bridges_share_one_datapath`: two `netdev` bridges in one process on the same PMD
//!   threads, two host pairs in one subnet: pings pass within each bridge and never across;
//!   `ovs-ofctl dump-flows` over each bridge's mgmt socket shows only its flows;
//!   `pmd-stats-show` shows the one datapath (one section per PMD thread, every bridge's
//!   frames), `fdb/show`/`ofproto/trace` take the bridge; an interface claimed by a second
//!   bridge gets `Interface.error` (logged once); a third bridge added and the second deleted
//!   while a ping stream crosses the first loses nothing of it.
//!
//! - `passive_controller_targets`: `set-controller br0 punix:PATH ptcp:PORT:127.0.0.1`: both
//!   listened on (`ovs-ofctl add-flow unix:PATH`, `dump-flows tcp:127.0.0.1:PORT` in the
//!   switch's namespace) beside `br0.mgmt`; `del-controller` closes them and removes the file.
//!
//! - `controllers_change_without_a_restart`: `set-controller` six times while a ping stream
//!   crosses br0 (a standing controller throughout, so no change flushes the flows): nothing
//!   lost, the PMDs' counters never reset (no restart), `Controller.is_connected`/`status`
//!   follow each new controller, a kept one keeps its connection, a removed `ptcp:` is closed.
//! - `controller_timers_role_and_status`: `max_backoff` in the reconnection spacing,
//!   `inactivity_probe=0` (no probe) and changed live (the connection closed one interval after
//!   the probe), `role` after a ROLE_REQUEST, `status` keys.
//! - `controller_enable_async_messages`: `false` → no PACKET_IN/PORT_STATUS until SET_ASYNC
//!   asks; `true` set live → both on the running connection.
//! - `controller_dscp`: `other_config:dscp` absent → TOS 0xc0 (DSCP 48) on every packet to the
//!   controller (captured on loopback), changed live → a reconnect with the new DSCP.
//! - `passive_target_connections_take_the_row_settings`: a `ptcp:` row's rate limit, DSCP,
//!   `enable_async_messages` and inactivity probe on the connections its listener accepts.
//! - `controller_without_hello_times_out_connecting`: rconn's CONNECTING timeout, max(1 s,
//!   backoff), the backoff growing.
//! - `a_bridge_gets_the_flows_ovs_gives_it`: a new secure bridge has no flow; the flushes of
//!   OVS's connmgr (first controller, last controller, fail mode without controllers); fail-open
//!   after three of the controller's probe intervals.
//! - `fail_mode_changes_without_a_restart`: `set-fail-mode secure|standalone`, `del-fail-mode`
//!   with a controller away (its arrival flushed the table): secure leaves misses, standalone fails open (NORMAL), secure ends
//!   it; with no controller left standalone has OVS's `priority=0,actions=NORMAL` back.
//! - `ssl_targets_use_the_ssl_table`: `ssl:`/`pssl:` targets without an `SSL` row say so in
//!   `Controller.status`; `set-ssl` (ovs-pki's certificates) connects `ovs-testcontroller`
//!   over `ssl:` and `ovs-ofctl` over `pssl:`; `del-ssl` closes them.
//!
//! - `patch_ports_join_two_bridges`: for each design (orig, ccache, cflows), two bridges each
//!   with one host, joined by a `type=patch` pair made in one `ovs-vsctl` transaction: each
//!   patch interface gets its `ofport` and `link_state`, a ping crosses both bridges (its `statistics` count it; br1
//!   learns the host behind the patch port in `fdb/show`; `dpctl/show` numbers every bridge's
//!   ports in one space, `dpctl/dump-flows` prints those numbers or, with `--names`, the names;
//!   `ofproto/trace br0` nests br1's translation), a flow on either bridge stops it and
//!   its removal restores it; `del-port` of one end stops it, the other end's `error` says its
//!   peer is gone, and adding it again restores it; a patch interface without `options:peer` or
//!   with a peer that is not a patch interface is refused in `error` (logged once).
//! - `patch_crossing_is_one_megaflow`, `a_patch_loop_is_dropped_and_logged_once`: `output:PATCH`
//!   (also inside a group's bucket that rewrites its copy) crossed inside the translation (one
//!   megaflow), and a loop of such crossings dropped.
//! - `a_patch_loop_through_normal_ends`: two bridges joined by two patch pairs with `NORMAL` (a
//!   loop through the datapath's patch hops): a broadcast's copies are dropped after 8
//!   crossings, counted in `coverage/show` (`patch_loop_dropped`), logged once; the loop ends,
//!   the tools answer, every frame is accounted for; with one pair removed a ping crosses.
//!
//! Skips without root/namespaces (unless `RQVS_REQUIRE_NETNS=1`) or without Open vSwitch
//! (unless `RQVS_REQUIRE_OVS=1`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rqvs_ports::testnet::{self, Netns, RawSocket};
use rqvs_testkit::ovsdb_server::{start_or_skip, OvsdbServer};

/// The switch, stopped (killed) when the test ends however it ends.
struct Running(Option<Child>);

impl Running {
    /// Stops the switch with `ovs-appctl exit` and returns what it printed (stdout, stderr).
    fn exit(&mut self, unixctl: &Path) -> (bool, String, String) {
        let _ = Command::new("ovs-appctl").args(["-t", unixctl.to_str().unwrap(), "exit"]).output();
        let mut child = self.0.take().unwrap();
        let t0 = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if t0.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Pings `to` from `h`, `count` times; true when every ping was answered.
fn ping(h: &Netns, to: &str, count: u32) -> bool {
    let out = Command::new("ip")
        .args(["netns", "exec", h.name(), "ping", "-c", &count.to_string(), "-i", "0.2", "-W", "1", to])
        .output()
        .unwrap();
    out.status.success() && String::from_utf8_lossy(&out.stdout).contains(&format!("{count} received"))
}

/// Polls `f` until it holds (15 s at most).
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(15), "{what}: not within 15 s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A private ovsdb-server, the switch's namespace `sw` and the running switch (its pid file,
/// unixctl and management sockets under the server's directory, as `OVS_RUNDIR` says).
struct Env {
    db: OvsdbServer,
    sw: Netns,
    dir: PathBuf,
    unixctl: PathBuf,
    running: Running,
}

impl Env {
    fn start(tag: &str) -> Option<Env> {
        Env::start_with(tag, &[])
    }

    /// [`Env::start`], the switch given `args` too (`--design ...`).
    fn start_with(tag: &str, args: &[&str]) -> Option<Env> {
        if !testnet::available(tag) {
            return None;
        }
        let db = start_or_skip(tag)?;
        db.vsctl(&["--no-wait", "init"]).unwrap();
        let sw = Netns::new("sw").unwrap();
        let dir = db.dir.path().to_path_buf();
        let unixctl = dir.join("rqvs.ctl");
        let child = Command::new("ip")
            .args(["netns", "exec", sw.name(), env!("CARGO_BIN_EXE_rqvs"), "switch", "--ovsdb", &db.remote()])
            .args(["--unixctl", unixctl.to_str().unwrap()])
            .args(args)
            .env("OVS_RUNDIR", &dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let env = Env { db, sw, dir, unixctl, running: Running(Some(child)) };
        eventually("the switch writes datapath_types", || {
            env.db.vsctl(&["get", "open_vswitch", ".", "datapath_types"]).is_ok_and(|s| s.contains("netdev"))
        });
        Some(env)
    }

    /// [`Env::start`], the switch namespace's loopback up (controllers listen there) and a
    /// `netdev` bridge `br0` with `fail_mode=secure` (no flow, no fail-open).
    fn secure_bridge(tag: &str) -> Option<Env> {
        let env = Env::start(tag)?;
        env.sw.ip(&["link", "set", "lo", "up"]).unwrap();
        env.vsctl(&["add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev", "fail_mode=secure"]);
        Some(env)
    }

    /// A host namespace joined to the switch's namespace by a veth (`port` on the switch's side),
    /// with `addr/24` on its end.
    fn host(&self, tag: &str, port: &str, addr: &str) -> Netns {
        let h = Netns::new(tag).unwrap();
        self.sw.veth(port, &h, "e0", 1).unwrap();
        self.sw.wait_running(port, Duration::from_secs(3)).unwrap();
        h.wait_running("e0", Duration::from_secs(3)).unwrap();
        h.ip(&["addr", "add", &format!("{addr}/24"), "dev", "e0"]).unwrap();
        h
    }

    /// `ovs-appctl -t UNIXCTL ARGS`: (success, stdout, stderr).
    fn appctl(&self, args: &[&str]) -> (bool, String, String) {
        let out = Command::new("ovs-appctl").args(["-t", self.unixctl.to_str().unwrap()]).args(args).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
    }

    fn vsctl(&self, args: &[&str]) -> String {
        self.db.vsctl(args).unwrap_or_else(|e| panic!("ovs-vsctl {args:?}: {e}"))
    }

    /// `ovs-ofctl ARGS` with the test's `OVS_RUNDIR` (so `br0` is `DIR/br0.mgmt`).
    fn ofctl(&self, args: &[&str]) -> Output {
        Command::new("ovs-ofctl").args(args).env("OVS_RUNDIR", &self.dir).output().unwrap()
    }

    /// `ovs-ofctl ARGS`, which must succeed: its output.
    fn ofctl_ok(&self, args: &[&str]) -> String {
        let out = self.ofctl(args);
        assert!(out.status.success(), "ovs-ofctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Stops the switch (`ovs-appctl exit`), checks it stopped cleanly with every frame
    /// accounted for, and returns its stderr (the log).
    fn exit(&mut self) -> String {
        let (ok, out, err) = self.running.exit(&self.unixctl);
        assert!(ok, "{out}{err}");
        assert!(out.contains("every frame accounted for"), "{out}");
        err
    }
}

/// The setup most tests share: hosts `h1` (`SUBNET.1`) on `p1` and `h2` (`SUBNET.2`) on `p2`,
/// the switch's loopback up, a `netdev` bridge `br0` with `p1` as OpenFlow port 1 and `p2` as 2.
fn one_bridge_two_hosts(env: &Env, subnet: &str) -> (Netns, Netns) {
    let h1 = env.host("h1", "p1", &format!("{subnet}.1"));
    let h2 = env.host("h2", "p2", &format!("{subnet}.2"));
    env.sw.ip(&["link", "set", "lo", "up"]).unwrap();
    env.vsctl(&["add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev"]);
    env.vsctl(&["add-port", "br0", "p1", "--", "set", "interface", "p1", "ofport_request=1"]);
    env.vsctl(&["add-port", "br0", "p2", "--", "set", "interface", "p2", "ofport_request=2"]);
    (h1, h2)
}

#[test]
fn ovs_ofctl_over_the_bridge_mgmt_socket() {
    let Some(mut env) = Env::start("dropin_mgmt") else { return };
    let h1 = env.host("h1", "p1", "10.79.0.1");
    let _h2 = env.host("h2", "p2", "10.79.0.2");
    env.vsctl(&["add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev"]);
    env.vsctl(&["add-port", "br0", "p1", "--", "set", "interface", "p1", "ofport_request=4"]);
    env.vsctl(&["add-port", "br0", "p2", "--", "set", "interface", "p2", "ofport_request=2"]);
    let mgmt = env.dir.join("br0.mgmt");
    assert!(mgmt.exists(), "{} is made", mgmt.display());

    // ovs-ofctl, unchanged: the bridge's name is its management socket.
    let show = env.ofctl_ok(&["-O", "OpenFlow13", "show", "br0"]);
    assert!(show.contains(" 4(p1): addr:"), "{show}");
    assert!(show.contains(" 2(p2): addr:"), "{show}");
    let flows = env.ofctl_ok(&["-O", "OpenFlow13", "dump-flows", "br0"]);
    assert!(flows.contains("priority=0 actions=NORMAL"), "{flows}");
    assert!(ping(&h1, "10.79.0.2", 2), "NORMAL forwards");
    env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", "br0", "priority=10,ip,actions=drop"]);
    assert!(env.ofctl_ok(&["-O", "OpenFlow13", "dump-flows", "br0"]).contains("priority=10,ip actions=drop"));
    assert!(!ping(&h1, "10.79.0.2", 1), "the flow added by ovs-ofctl drops IP");
    env.ofctl_ok(&["-O", "OpenFlow13", "del-flows", "br0", "ip"]);
    assert!(ping(&h1, "10.79.0.2", 2), "forwarding again");

    // ovs-ofctl without -O speaks OpenFlow 1.0 (with Nicira extensions), which rqvs speaks too.
    let show = env.ofctl_ok(&["show", "br0"]);
    assert!(show.contains(" 2(p2): addr:"), "plain ovs-ofctl show: {show}");
    assert!(env.ofctl_ok(&["dump-flows", "br0"]).contains("actions=NORMAL"), "plain ovs-ofctl dump-flows");

    // The flows the tool added stay when a port is added (live, no datapath restart).
    env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", "br0", "priority=7,arp,actions=NORMAL"]);
    let _h3 = env.host("h3", "p3", "10.79.0.3");
    env.vsctl(&["add-port", "br0", "p3"]);
    assert!(env.ofctl_ok(&["-O", "OpenFlow13", "dump-flows", "br0"]).contains("priority=7,arp actions=NORMAL"));
    assert!(ping(&h1, "10.79.0.3", 2));

    let dir = env.dir.clone();
    env.exit();
    assert!(!dir.join("br0.mgmt").exists(), "the management socket is removed at exit");
}

/// The tagged ARP requests a [`TrunkHost`] saw: (VID, sender IP).
type Seen = Arc<Mutex<Vec<(u16, [u8; 4])>>>;

/// A trunk-side host without kernel VLAN interfaces (the test kernel may have no 8021q): a
/// thread on `e0` of `h` answers ARP and ICMP echo requests tagged with a VID it has an
/// address in (`addrs`), tagged the same way, from [`TRUNK_MAC`]; it records each tagged ARP
/// request's (VID, sender IP).
struct TrunkHost {
    stop: Arc<AtomicBool>,
    seen: Seen,
    thread: Option<std::thread::JoinHandle<std::io::Result<std::io::Result<()>>>>,
}

const TRUNK_MAC: [u8; 6] = [0x02, 0x80, 0, 0, 0, 0x02];

fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl TrunkHost {
    fn start(h: &Netns, addrs: &[(u16, [u8; 4])]) -> TrunkHost {
        let stop = Arc::new(AtomicBool::new(false));
        let seen: Seen = Arc::new(Mutex::new(Vec::new()));
        let (st, se, addrs) = (stop.clone(), seen.clone(), addrs.to_vec());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = h
            .spawn(move || {
                let sock = RawSocket::open("e0")?;
                let _ = ready_tx.send(());
                while !st.load(Ordering::Relaxed) {
                    let Some(f) = sock.recv(Duration::from_millis(50))? else { continue };
                    if f.len() < 18 || f[12..14] != [0x81, 0x00] {
                        continue;
                    }
                    let vid = u16::from_be_bytes([f[14], f[15]]) & 0xfff;
                    let Some(&(_, ip)) = addrs.iter().find(|a| a.0 == vid) else { continue };
                    let (ty, l3) = ([f[16], f[17]], &f[18..]);
                    let mut reply = f[6..12].to_vec();
                    reply.extend_from_slice(&TRUNK_MAC);
                    reply.extend_from_slice(&f[12..16]);
                    if ty == [0x08, 0x06] && l3.len() >= 28 && l3[7] == 1 {
                        se.lock().unwrap().push((vid, [l3[14], l3[15], l3[16], l3[17]]));
                        if l3[24..28] != ip {
                            continue;
                        }
                        reply.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 2]);
                        reply.extend_from_slice(&TRUNK_MAC);
                        reply.extend_from_slice(&ip);
                        reply.extend_from_slice(&l3[8..18]);
                    } else if ty == [0x08, 0x00] && l3.len() >= 28 && l3[9] == 1 && l3[16..20] == ip {
                        let hl = usize::from(l3[0] & 0xf) * 4;
                        let total = usize::from(u16::from_be_bytes([l3[2], l3[3]])).min(l3.len());
                        if l3.get(hl) != Some(&8) || total < hl + 8 {
                            continue;
                        }
                        let mut ipv4 = l3[..total].to_vec();
                        ipv4[12..16].copy_from_slice(&l3[16..20]);
                        ipv4[16..20].copy_from_slice(&l3[12..16]);
                        ipv4[hl] = 0;
                        ipv4[hl + 2..hl + 4].copy_from_slice(&[0, 0]);
                        let c = checksum(&ipv4[hl..]);
                        ipv4[hl + 2..hl + 4].copy_from_slice(&c.to_be_bytes());
                        reply.extend_from_slice(&[0x08, 0x00]);
                        reply.extend_from_slice(&ipv4);
                    } else {
                        continue;
                    }
                    sock.send(&reply)?;
                }
                Ok(())
            })
            .unwrap();
        ready_rx.recv_timeout(Duration::from_secs(5)).expect("the trunk host's socket is open");
        TrunkHost { stop, seen, thread: Some(thread) }
    }

    /// Has a tagged ARP request from `sender` in VLAN `vid` arrived?
    fn saw(&self, vid: u16, sender: [u8; 4]) -> bool {
        self.seen.lock().unwrap().contains(&(vid, sender))
    }
}

impl Drop for TrunkHost {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let r = t.join();
            if !std::thread::panicking() {
                r.unwrap().unwrap().unwrap();
            }
        }
    }
}

/// An ARP request from `sender` (MAC 02:80:00:00:00:SENDER[3]) for `target`, broadcast,
/// tagged with `vid` when given, sent from `h`'s `e0` by a raw socket.
fn send_arp(h: &Netns, vid: Option<u16>, sender: [u8; 4], target: [u8; 4]) {
    let mac = [0x02, 0x80, 0, 0, 1, sender[3]];
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&mac);
    if let Some(v) = vid {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&v.to_be_bytes());
    }
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&mac);
    f.extend_from_slice(&sender);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&target);
    h.run(move || RawSocket::open("e0").and_then(|s| s.send(&f))).unwrap().unwrap();
}

#[test]
fn access_and_trunk_ports_for_normal() {
    let Some(mut env) = Env::start("dropin_vlans") else { return };
    // p1: access VLAN 10; p2: trunk of VLANs 10 and 20; p3: access VLAN 20; p4: every VLAN.
    let h1 = env.host("h1", "p1", "10.80.0.1");
    let h2 = env.host("h2", "p2", "10.80.9.2");
    let h3 = env.host("h3", "p3", "10.80.1.3");
    let h4 = env.host("h4", "p4", "10.80.9.4");
    let trunk = TrunkHost::start(&h2, &[(10, [10, 80, 0, 2]), (20, [10, 80, 1, 2])]);
    env.vsctl(&["add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev"]);
    env.vsctl(&["add-port", "br0", "p1", "tag=10"]);
    env.vsctl(&["add-port", "br0", "p2", "trunks=10,20"]);
    env.vsctl(&["add-port", "br0", "p3", "tag=20"]);
    env.vsctl(&["add-port", "br0", "p4"]);
    assert!(ping(&h1, "10.80.0.2", 3), "access VLAN 10 to the trunk's VLAN 10 (tagged there)");
    assert!(ping(&h3, "10.80.1.2", 3), "access VLAN 20 to the trunk's VLAN 20");
    // VLANs are apart: h3 given an address in h1's subnet still cannot reach it.
    h3.ip(&["addr", "add", "10.80.0.3/24", "dev", "e0"]).unwrap();
    assert!(!ping(&h3, "10.80.0.1", 2), "VLAN 20 does not reach VLAN 10");
    // The trunk's untagged frames are VLAN 0, which it does not carry.
    assert!(!ping(&h2, "10.80.9.4", 1), "untagged on a trunk of listed VLANs");
    // A tagged frame on an access port is dropped; an untagged one is in the port's VLAN.
    send_arp(&h1, Some(10), [10, 80, 0, 99], [10, 80, 0, 2]);
    send_arp(&h1, None, [10, 80, 0, 98], [10, 80, 0, 2]);
    eventually("the untagged ARP reaches the trunk tagged 10", || trunk.saw(10, [10, 80, 0, 98]));
    assert!(!trunk.saw(10, [10, 80, 0, 99]), "tagged frames on an access port are dropped");
    // Only the listed VLANs: the trunk's trunks changed while running.
    env.vsctl(&["set", "port", "p2", "trunks=10"]);
    assert!(!ping(&h3, "10.80.1.2", 2), "VLAN 20 is no longer on the trunk");
    assert!(ping(&h1, "10.80.0.2", 2), "VLAN 10 still is");
    // Without trunks p2 carries every VLAN, 0 (untagged) too.
    env.vsctl(&["clear", "port", "p2", "trunks"]);
    // (h2's neighbour entry for h4 failed above: the kernel's first retries may be slow.)
    eventually("untagged between two ports of every VLAN", || ping(&h2, "10.80.9.4", 1));
    assert!(ping(&h1, "10.80.0.2", 2));
    // An access port's MACs are learned in its VLAN (fdb/show's VLAN column).
    let fdb =
        Command::new("ovs-appctl").args(["-t", env.unixctl.to_str().unwrap(), "fdb/show", "br0"]).output().unwrap();
    let fdb = String::from_utf8_lossy(&fdb.stdout).into_owned();
    assert!(fdb.lines().any(|l| l.split_whitespace().nth(1) == Some("10")), "{fdb}");
    // dot1q-tunnel is refused in the port's interface row; the rest keeps forwarding.
    env.vsctl(&["set", "port", "p3", "vlan_mode=dot1q-tunnel"]);
    let err = env.vsctl(&["get", "interface", "p3", "error"]);
    assert!(err.contains("vlan_mode dot1q-tunnel is not supported by rqvs"), "{err}");
    assert!(ping(&h1, "10.80.0.2", 1));
    drop(trunk);
    drop(h4);
    let log = env.exit();
    assert_eq!(log.matches("vlan_mode dot1q-tunnel is not supported").count(), 1, "logged once: {log}");
    // VLAN ports attached, and their VLANs changed, live: the datapath started once with the
    // bridge, never for a port.
    assert_eq!(log.matches("ovsdb: datapath ports").count(), 1, "{log}");
    assert!(log.contains("port 2=p2 VLANs Trunk([10, 20]) -> Trunk([10])"), "{log}");
}

#[test]
fn internal_ports_are_tap_devices() {
    let Some(mut env) = Env::start("dropin_internal") else { return };
    let h1 = env.host("h1", "p1", "10.81.0.1");
    env.vsctl(&["add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev"]);
    env.vsctl(&["add-port", "br0", "p1"]);
    let types = env.vsctl(&["get", "open_vswitch", ".", "iface_types"]);
    assert_eq!(types.trim(), "[afxdp, internal, patch, system]");
    let br0 = env.vsctl(&["list", "interface", "br0"]);
    assert!(br0.contains("error               : []"), "{br0}");
    assert!(!br0.contains("ofport              : -1"), "{br0}");
    // As with OVS: the operator configures the bridge's interface in the switch's namespace.
    env.sw.ip(&["addr", "add", "10.81.0.254/24", "dev", "br0"]).unwrap();
    env.sw.ip(&["link", "set", "br0", "up"]).unwrap();
    assert!(ping(&h1, "10.81.0.254", 3), "a host reaches the bridge's internal port");
    env.vsctl(&["add-port", "br0", "int1", "--", "set", "interface", "int1", "type=internal"]);
    env.sw.ip(&["addr", "add", "10.81.1.254/24", "dev", "int1"]).unwrap();
    env.sw.ip(&["link", "set", "int1", "up"]).unwrap();
    h1.ip(&["route", "add", "10.81.1.0/24", "dev", "e0"]).unwrap();
    assert!(ping(&h1, "10.81.1.254", 2), "and a type=internal port");
    // A port added (live): the tap devices stay, with their addresses.
    let _h2 = env.host("h2", "p2", "10.81.0.2");
    env.vsctl(&["add-port", "br0", "p2"]);
    assert!(ping(&h1, "10.81.0.254", 2), "br0 kept its address");
    assert!(ping(&h1, "10.81.0.2", 2));
    let sw = env.sw.name().to_string();
    let link =
        |name: &str| Command::new("ip").args(["-n", &sw, "link", "show", name]).output().unwrap().status.success();
    assert!(link("int1"));
    env.vsctl(&["del-port", "br0", "int1"]);
    eventually("int1's tap device goes with its interface", || !link("int1"));
    assert!(link("br0"));
    env.exit();
    assert!(!link("br0"), "br0's tap device goes when the switch stops");
}

/// A controller on a host behind the bridge itself (in-band control, module docs), in ORIG
/// (the hidden rules in the slow path's table) and CFLOWS (in its learned table 0).
#[test]
fn in_band_control_reaches_the_controller_through_the_bridge() {
    for design in ["orig", "cflows"] {
        in_band_control(design);
    }
}

fn in_band_control(design: &str) {
    let Some(mut env) = Env::start_with("dropin_inband", &["--design", design]) else { return };
    let h1 = env.host("h1", "p1", "10.77.0.2");
    env.vsctl(&["add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev", "fail_mode=secure"]);
    env.vsctl(&["add-port", "br0", "p1", "--", "set", "interface", "p1", "ofport_request=1"]);
    // The switch's own address on its bridge's port: its route to the controller is br0.
    env.sw.ip(&["addr", "add", "10.77.0.1/24", "dev", "br0"]).unwrap();
    env.sw.ip(&["link", "set", "br0", "up"]).unwrap();
    // Killed when the test ends however it ends.
    let _controller = Running(Some(
        Command::new("ip")
            .args(["netns", "exec", h1.name(), "ovs-testcontroller", "--noflow", "ptcp:6653:10.77.0.2"])
            .env("OVS_RUNDIR", &env.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    ));
    let connected = |env: &Env| env.vsctl(&["get", "controller", "br0", "is_connected"]).trim() == "true";
    let dump = |env: &Env| {
        let (ok, out, err) = env.appctl(&["bridge/dump-flows", "br0"]);
        assert!(ok, "bridge/dump-flows: {err}");
        out
    };
    // Out of band: the secure bridge's empty table drops the switch's own connection.
    env.vsctl(&[
        "set-controller",
        "br0",
        "tcp:10.77.0.2:6653",
        "--",
        "set",
        "controller",
        "br0",
        "connection_mode=out-of-band",
    ]);
    std::thread::sleep(Duration::from_secs(4));
    assert!(!connected(&env), "out-of-band: no way to the controller through a secure bridge");
    assert!(!dump(&env).contains("priority=18000"), "no in-band rules out of band: {}", dump(&env));
    // OVS's default mode: the hidden rules let the connection through.
    env.vsctl(&["clear", "controller", "br0", "connection_mode"]);
    eventually("the in-band controller connects", || connected(&env));
    let mac = |ns: &str, dev: &str| {
        let out = Command::new("ip")
            .args(["netns", "exec", ns, "cat", &format!("/sys/class/net/{dev}/address")])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let (local, hop) = (mac(env.sw.name(), "br0"), mac(h1.name(), "e0"));
    let want = [
        "priority=180008,tcp,nw_src=10.77.0.2,tp_src=6653,actions=NORMAL".to_string(),
        "priority=180007,tcp,nw_dst=10.77.0.2,tp_dst=6653,actions=NORMAL".to_string(),
        "priority=180006,arp,arp_spa=10.77.0.2,arp_op=1,actions=NORMAL".to_string(),
        "priority=180005,arp,arp_tpa=10.77.0.2,arp_op=2,actions=NORMAL".to_string(),
        format!("priority=180004,arp,dl_src={hop},arp_op=1,actions=NORMAL"),
        format!("priority=180003,arp,dl_dst={hop},arp_op=2,actions=NORMAL"),
        format!("priority=180002,arp,dl_src={local},arp_op=1,actions=NORMAL"),
        format!("priority=180001,arp,dl_dst={local},arp_op=2,actions=NORMAL"),
        format!("priority=180000,udp,in_port=LOCAL,dl_src={local},tp_src=68,tp_dst=67,actions=NORMAL"),
    ];
    // The next hop's rules come once the switch's kernel has resolved the controller's MAC.
    eventually("OVS's nine in-band rules", || {
        let d = dump(&env);
        want.iter().all(|w| d.contains(&format!(", {w}\n")))
    });
    let in_band = |d: &str| d.lines().filter(|l| l.contains("priority=18000")).count();
    let d = dump(&env);
    // Beside them only the controller's own flows (ovs-testcontroller's table-miss flow).
    assert_eq!(in_band(&d), want.len(), "each in-band rule once: {d}");
    assert!(d.lines().all(|l| l.starts_with("duration=")), "table 0 only: {d}");
    let moved: u64 = d
        .lines()
        .filter(|l| l.contains("tp_src=6653"))
        .filter_map(|l| l.split("n_packets=").nth(1)?.split(',').next()?.parse::<u64>().ok())
        .sum();
    assert!(moved > 0, "the controller's packets match the rule from it: {d}");
    // Hidden from OpenFlow: not dumped, not deleted by a flow-mod; the connection stays.
    let flows = env.ofctl_ok(&["-O", "OpenFlow13", "dump-flows", "br0"]);
    assert!(!flows.contains("priority=18"), "{flows}");
    env.ofctl_ok(&["-O", "OpenFlow13", "del-flows", "br0"]);
    assert_eq!(in_band(&dump(&env)), want.len(), "kept: {}", dump(&env));
    std::thread::sleep(Duration::from_secs(1));
    assert!(connected(&env));
    // disable-in-band: the rules go.
    env.vsctl(&["set", "bridge", "br0", "other_config:disable-in-band=true"]);
    eventually("the in-band rules go", || !dump(&env).contains("priority=18000"));
    env.exit();
}

#[test]
fn ofports_are_any_number_and_the_bridge_port_is_local() {
    let Some(mut env) = Env::start("dropin_local") else { return };
    let h1 = env.host("h1", "p1", "10.82.0.1");
    let h2 = env.host("h2", "p2", "10.82.0.2");
    env.vsctl(&["add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev"]);
    // A number far past the ports' count: honoured as it is, no ports made to fill the gap.
    env.vsctl(&["add-port", "br0", "p1", "--", "set", "interface", "p1", "ofport_request=1000"]);
    env.vsctl(&["add-port", "br0", "p2"]);
    assert_eq!(env.vsctl(&["get", "interface", "br0", "ofport"]).trim(), "65534");
    assert_eq!(env.vsctl(&["get", "interface", "p1", "ofport"]).trim(), "1000");
    assert_eq!(env.vsctl(&["get", "interface", "p2", "ofport"]).trim(), "1");
    for v in [&["-O", "OpenFlow13"][..], &[]] {
        let show = env.ofctl_ok(&[v, &["show", "br0"]].concat());
        assert!(show.contains(" LOCAL(br0): addr:"), "{v:?} {show}");
        assert!(show.contains(" 1000(p1): addr:"), "{show}");
        assert!(show.contains(" 1(p2): addr:"), "{show}");
        assert_eq!(show.matches("): addr:").count(), 3, "three ports, nothing between: {show}");
    }
    env.sw.ip(&["addr", "add", "10.82.0.254/24", "dev", "br0"]).unwrap();
    env.sw.ip(&["link", "set", "br0", "up"]).unwrap();
    // Only p1 and the bridge's port talk, by flows naming LOCAL both ways.
    env.ofctl_ok(&["-O", "OpenFlow13", "del-flows", "br0"]);
    env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", "br0", "priority=10,in_port=1000,actions=LOCAL"]);
    env.ofctl_ok(&["add-flow", "br0", "priority=10,in_port=LOCAL,actions=output:1000"]);
    let flows = env.ofctl_ok(&["-O", "OpenFlow13", "dump-flows", "br0"]);
    assert!(flows.contains("priority=10,in_port=1000 actions=LOCAL"), "{flows}");
    assert!(flows.contains("priority=10,in_port=LOCAL actions=output:1000"), "{flows}");
    assert!(ping(&h1, "10.82.0.254", 3), "in_port=1000 → LOCAL and back");
    let trace = Command::new("ovs-appctl")
        .args(["-t", env.unixctl.to_str().unwrap(), "ofproto/trace", "br0", "in_port=LOCAL,ip,nw_dst=10.82.0.1"])
        .output()
        .unwrap();
    let trace = String::from_utf8_lossy(&trace.stdout).into_owned();
    assert!(trace.contains("in_port=LOCAL") && trace.contains("Datapath actions: 1000"), "{trace}");
    assert!(!ping(&h2, "10.82.0.254", 1), "p2 has no flow");
    let ports = env.ofctl_ok(&["-O", "OpenFlow13", "dump-ports", "br0", "LOCAL"]);
    let rx = ports
        .split("rx pkts=")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|n| n.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("{ports}"));
    assert!(ports.contains("port LOCAL:") && rx >= 3, "the bridge's port counted what it received: {ports}");
    // The MAC table names the bridge's port LOCAL too.
    env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", "br0", "priority=20,actions=NORMAL"]);
    assert!(ping(&h2, "10.82.0.254", 2), "NORMAL between p2 and LOCAL");
    let fdb =
        Command::new("ovs-appctl").args(["-t", env.unixctl.to_str().unwrap(), "fdb/show", "br0"]).output().unwrap();
    let fdb = String::from_utf8_lossy(&fdb.stdout).into_owned();
    assert!(fdb.lines().any(|l| l.split_whitespace().next() == Some("LOCAL")), "{fdb}");
    env.exit();
}

/// The number after `key` in `text` (`rx pkts=12,` → 12).
fn count_after(text: &str, key: &str) -> u64 {
    text.split(key)
        .nth(1)
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no '{key}' in {text}"))
}

#[test]
fn ports_are_added_and_removed_without_a_datapath_restart() {
    let Some(mut env) = Env::start("dropin_live") else { return };
    let (h1, _h2) = one_bridge_two_hosts(&env, "10.83.0");
    let h3 = env.host("h3", "p3", "10.83.0.3");
    assert!(ping(&h1, "10.83.0.2", 2), "NORMAL between p1 and p2");
    // PORT_STATUS to a connection that asks for asynchronous messages.
    // (stdbuf: its output line by line, as it is killed at the end.)
    let monitor = Command::new("stdbuf")
        .args(["-oL", "ovs-ofctl", "-O", "OpenFlow13", "monitor", "br0", "65535"])
        .env("OVS_RUNDIR", &env.dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut monitor = Running(Some(monitor));
    std::thread::sleep(Duration::from_millis(300));
    let rx_p2 = |env: &Env| count_after(&env.ofctl_ok(&["-O", "OpenFlow13", "dump-ports", "br0", "2"]), "rx pkts=");
    let before = rx_p2(&env);
    // A steady stream between p1 and p2 (100 pings a second, 6 s) while p3 comes and goes 10
    // times (under a second here).
    const PINGS: u32 = 600;
    let stream = Command::new("ip")
        .args(["netns", "exec", h1.name(), "ping", "-q", "-c", &PINGS.to_string(), "-i", "0.01", "-W", "1"])
        .arg("10.83.0.2")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stream = Running(Some(stream));
    let t0 = Instant::now();
    let mut ofports = Vec::new();
    for _ in 0..10 {
        env.vsctl(&["add-port", "br0", "p3"]);
        ofports.push(env.vsctl(&["get", "interface", "p3", "ofport"]).trim().to_string());
        let show = env.ofctl_ok(&["-O", "OpenFlow13", "show", "br0"]);
        assert!(show.contains("(p3): addr:"), "{show}");
        env.vsctl(&["del-port", "br0", "p3"]);
    }
    let cycles = t0.elapsed();
    assert!(cycles < Duration::from_secs(5), "10 cycles took {cycles:?}: the stream (6 s) must outlast them");
    let during = rx_p2(&env);
    let out = stream.0.take().unwrap().wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.contains(&format!("{PINGS} packets transmitted, {PINGS} received")),
        "no frame lost on p1-p2 while p3 was added and removed 10 times: {out}"
    );
    assert!(during > before, "p2's counters kept counting: {before} then {during}");
    assert!(rx_p2(&env) >= during + u64::from(PINGS) / 2, "and still count");
    assert!(ofports.iter().all(|o| o.parse::<i64>().is_ok_and(|n| n > 0)), "{ofports:?}");
    // Added again, the port works.
    env.vsctl(&["add-port", "br0", "p3"]);
    assert!(ping(&h3, "10.83.0.1", 2), "a re-added port forwards");
    let mut m = monitor.0.take().unwrap();
    let _ = m.kill();
    let out = m.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.matches("): ADD: 3(p3): addr:").count(), 11, "PORT_STATUS ADD: {out}");
    assert_eq!(out.matches("): DEL: 3(p3): addr:").count(), 10, "PORT_STATUS DELETE: {out}");
    let log = env.exit();
    assert_eq!(log.matches("port 3=p3 attached").count(), 11, "{log}");
    assert_eq!(log.matches("port 3=p3 removed").count(), 10, "{log}");
    // Started once without the bridge, once with its management socket: never for a port.
    assert!(log.matches("ovsdb: datapath ports").count() <= 2, "no datapath restart for a port: {log}");
}

#[test]
fn two_bridges_share_one_datapath() {
    let Some(mut env) = Env::start("dropin_2br") else { return };
    // One subnet: only the bridges keep the pairs apart.
    let h1 = env.host("h1", "p1", "10.82.0.1");
    let _h2 = env.host("h2", "p2", "10.82.0.2");
    let h3 = env.host("h3", "p3", "10.82.0.3");
    let _h4 = env.host("h4", "p4", "10.82.0.4");
    env.vsctl(&["add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev"]);
    env.vsctl(&["add-port", "br0", "p1"]);
    env.vsctl(&["add-port", "br0", "p2"]);
    env.vsctl(&["add-br", "br1", "--", "set", "bridge", "br1", "datapath_type=netdev"]);
    env.vsctl(&["add-port", "br1", "p3"]);
    env.vsctl(&["add-port", "br1", "p4"]);
    assert!(env.dir.join("br0.mgmt").exists() && env.dir.join("br1.mgmt").exists(), "a mgmt socket per bridge");
    // Each bridge numbers its own ports.
    assert_eq!(env.vsctl(&["get", "interface", "p3", "ofport"]).trim(), "1");
    assert_eq!(env.vsctl(&["get", "interface", "p2", "ofport"]).trim(), "2");
    assert!(ping(&h1, "10.82.0.2", 3), "within br0");
    assert!(ping(&h3, "10.82.0.4", 3), "within br1");
    assert!(!ping(&h1, "10.82.0.3", 2), "never from br0 to br1");
    assert!(!ping(&h1, "10.82.0.4", 1), "never from br0 to br1");
    assert!(!ping(&h3, "10.82.0.2", 1), "never from br1 to br0");

    // Each bridge's table over its own mgmt socket.
    env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", "br1", "priority=9,arp,actions=NORMAL"]);
    let f0 = env.ofctl_ok(&["-O", "OpenFlow13", "dump-flows", "br0"]);
    let f1 = env.ofctl_ok(&["-O", "OpenFlow13", "dump-flows", "br1"]);
    assert!(f1.contains("priority=9,arp actions=NORMAL") && f1.contains("priority=0 actions=NORMAL"), "{f1}");
    assert!(!f0.contains("priority=9"), "br0 has only its own flows: {f0}");
    let show1 = env.ofctl_ok(&["-O", "OpenFlow13", "show", "br1"]);
    assert!(show1.contains("(p3)") && !show1.contains("(p1)"), "{show1}");
    // A flow on br1 that drops IP leaves br0 forwarding.
    env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", "br1", "priority=10,ip,actions=drop"]);
    assert!(!ping(&h3, "10.82.0.4", 1), "br1's drop");
    assert!(ping(&h1, "10.82.0.2", 2), "br0 is not br1");
    env.ofctl_ok(&["-O", "OpenFlow13", "del-flows", "br1", "ip"]);

    // The one datapath: one section per PMD thread, with both bridges' frames.
    let (ok, stats, err) = env.appctl(&["dpif-netdev/pmd-stats-show"]);
    assert!(ok, "{err}");
    assert_eq!(stats.matches("pmd thread 0 ").count(), 1, "{stats}");
    let received: u64 = stats
        .lines()
        .find_map(|l| l.trim().strip_prefix("packets received: "))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(received >= 20, "both bridges' pings: {stats}");
    let (ok, flows, err) = env.appctl(&["dpctl/dump-flows"]);
    assert!(ok && flows.contains("flow-dump from pmd 0:") && flows.contains("actions:"), "{flows}{err}");
    // fdb/show and ofproto/trace per bridge.
    let (ok, fdb0, err) = env.appctl(&["fdb/show", "br0"]);
    assert!(ok, "{err}");
    let (ok, fdb1, _) = env.appctl(&["fdb/show", "br1"]);
    assert!(ok);
    let macs = |h: &Netns| {
        let out = Command::new("ip").args(["netns", "exec", h.name(), "cat", "/sys/class/net/e0/address"]).output();
        String::from_utf8_lossy(&out.unwrap().stdout).trim().to_string()
    };
    let (m1, m3) = (macs(&h1), macs(&h3));
    assert!(fdb0.contains(&m1) && !fdb0.contains(&m3), "br0's MAC table: {fdb0}");
    assert!(fdb1.contains(&m3) && !fdb1.contains(&m1), "br1's MAC table: {fdb1}");
    let (ok, trace, err) = env.appctl(&["ofproto/trace", "br1", "in_port=1,arp"]);
    assert!(ok && trace.contains("arp, priority 9"), "br1's table traced: {trace}{err}");
    let (ok, _, err) = env.appctl(&["fdb/show", "br7"]);
    assert!(!ok && err.contains("no bridge named br7"), "{err}");

    // A second bridge claiming br0's interface (its port row added to br1 as well: the schema
    // keeps interface names unique): refused in Interface.error, br0 keeps it.
    let p2 = env.vsctl(&["get", "port", "p2", "_uuid"]).trim().to_string();
    env.vsctl(&["add", "bridge", "br1", "ports", &p2]);
    let error = env.vsctl(&["get", "interface", "p2", "error"]);
    assert!(error.contains("could not add network device p2 to bridge br1: it is on bridge br0"), "{error}");
    assert_eq!(env.vsctl(&["get", "interface", "p2", "ofport"]).trim(), "2", "br0's number");
    assert!(ping(&h1, "10.82.0.2", 2), "br0 keeps its port");
    assert!(!env.ofctl_ok(&["-O", "OpenFlow13", "show", "br1"]).contains("(p2)"), "not on br1");
    env.vsctl(&["remove", "bridge", "br1", "ports", &p2]);
    assert_eq!(env.vsctl(&["get", "interface", "p2", "error"]).trim(), "[]", "the error goes with the claim");

    // Bridges added and deleted while br0 forwards: nothing of its ping stream lost.
    let h1n = h1.name().to_string();
    let stream = std::thread::spawn(move || {
        Command::new("ip")
            .args(["netns", "exec", &h1n, "ping", "-c", "40", "-i", "0.1", "-W", "1", "10.82.0.2"])
            .output()
            .unwrap()
    });
    std::thread::sleep(Duration::from_millis(500));
    env.vsctl(&["del-br", "br1"]);
    env.vsctl(&["add-br", "br2", "--", "set", "bridge", "br2", "datapath_type=netdev"]);
    env.vsctl(&["add-port", "br2", "p3"]);
    env.vsctl(&["add-port", "br2", "p4"]);
    let out = stream.join().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("40 received"), "br0's stream across del-br/add-br: {text}");
    assert!(!env.dir.join("br1.mgmt").exists(), "the deleted bridge's mgmt socket is removed");
    assert!(ping(&h3, "10.82.0.4", 2), "the new bridge forwards");
    assert!(!ping(&h3, "10.82.0.1", 1), "and apart from br0");

    let log = env.exit();
    assert_eq!(log.matches("it is on bridge br0").count(), 1, "logged once: {log}");
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn passive_controller_targets() {
    let Some(mut env) = Env::start("dropin_passive") else { return };
    let (h1, _h2) = one_bridge_two_hosts(&env, "10.83.0");
    let sock = env.dir.join("br0.controller");
    let punix = format!("punix:{}", sock.display());
    env.vsctl(&["set-controller", "br0", &punix, "ptcp:6698:127.0.0.1"]);
    eventually("the punix socket is made", || sock.exists());
    let unix = format!("unix:{}", sock.display());
    env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", &unix, "priority=20,ip,actions=drop"]);
    assert!(!ping(&h1, "10.83.0.2", 1), "the flow added over punix: drops IP");
    let tcp = Command::new("ip")
        .args(["netns", "exec", env.sw.name(), "ovs-ofctl", "-O", "OpenFlow13", "dump-flows", "tcp:127.0.0.1:6698"])
        .output()
        .unwrap();
    let flows = String::from_utf8_lossy(&tcp.stdout);
    assert!(tcp.status.success() && flows.contains("priority=20,ip actions=drop"), "ptcp: {flows}");
    assert!(env.ofctl_ok(&["-O", "OpenFlow13", "dump-flows", "br0"]).contains("priority=20,ip actions=drop"));
    let list = env.vsctl(&["list", "controller"]);
    assert!(!list.contains("last_error"), "both targets supported: {list}");
    env.vsctl(&["del-controller", "br0"]);
    eventually("the punix socket is removed", || !sock.exists());
    env.ofctl_ok(&["-O", "OpenFlow13", "del-flows", "br0", "ip"]);
    assert!(ping(&h1, "10.83.0.2", 2), "forwarding again");
    env.exit();
}

/// `rx pkts=` of port `port` of br0 (the PMDs' counters: a restarted switch starts them at 0).
fn rx_pkts(env: &Env, port: &str) -> u64 {
    count_after(&env.ofctl_ok(&["-O", "OpenFlow13", "dump-ports", "br0", port]), "rx pkts=")
}

/// `packets received:` of `pmd-stats-show` (the datapath's, summed over its PMD threads).
fn pmd_received(env: &Env) -> u64 {
    let (ok, stats, err) = env.appctl(&["dpif-netdev/pmd-stats-show"]);
    assert!(ok, "{err}");
    stats
        .lines()
        .filter_map(|l| l.trim().strip_prefix("packets received: "))
        .filter_map(|n| n.parse::<u64>().ok())
        .sum()
}

/// A ping stream from `h` to `to` (`count` pings, one per `interval` s) on a thread: its output.
fn ping_stream(h: &Netns, to: &str, count: u32, interval: &str) -> std::thread::JoinHandle<String> {
    let (name, to, interval) = (h.name().to_string(), to.to_string(), interval.to_string());
    std::thread::spawn(move || {
        let out = Command::new("ip")
            .args(["netns", "exec", &name, "ping", "-q", "-c", &count.to_string(), "-i", &interval, "-W", "1", &to])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    })
}

/// A controller that changes nothing (ovs-testcontroller deletes the switch's flows): it
/// listens on `127.0.0.1:PORT` in the switch's namespace, says HELLO (OpenFlow 1.3), answers
/// ECHO_REQUESTs and counts the connections it accepted. Ends when dropped. Its variants
/// ([`QuietController::start_with`]) send more after the HELLO, answer no ECHO_REQUEST, or
/// close each connection at once.
struct QuietController {
    accepted: Arc<std::sync::atomic::AtomicUsize>,
    /// When each connection was accepted, and when the switch closed one.
    accepts: Arc<Mutex<Vec<Instant>>>,
    closes: Arc<Mutex<Vec<Instant>>>,
    /// The type of every message the switch sent, in order (all connections).
    received: Arc<Mutex<Vec<u8>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

/// How a [`QuietController`] behaves.
#[derive(Clone, Default)]
struct Quirks {
    /// Sent after the HELLO (whole OpenFlow 1.3 messages).
    after_hello: Vec<u8>,
    /// Leaves ECHO_REQUESTs unanswered (the switch's inactivity probe).
    deaf: bool,
    /// Closes each connection at once (the switch's backoff).
    hang_up: bool,
    /// Sends no HELLO (nor `after_hello`): the switch's CONNECTING timeout.
    silent: bool,
    /// While set, reads nothing (the switch's socket buffers, then its queue, fill up); its
    /// sockets' receive buffers are then 4 KB (no autotuning).
    paused: Option<Arc<AtomicBool>>,
}

impl QuietController {
    fn start(env: &Env, port: u16) -> QuietController {
        QuietController::start_with(env, port, Quirks::default())
    }

    fn start_with(env: &Env, port: u16, quirks: Quirks) -> QuietController {
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let accepts = Arc::new(Mutex::new(Vec::new()));
        let closes = Arc::new(Mutex::new(Vec::new()));
        let received = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (a, s, at, cl, rx) = (accepted.clone(), stop.clone(), accepts.clone(), closes.clone(), received.clone());
        let listener = env.sw.run(|| std::net::TcpListener::bind(("127.0.0.1", port))).unwrap().unwrap();
        listener.set_nonblocking(true).unwrap();
        if quirks.paused.is_some() {
            // Accepted connections inherit it (and it turns their autotuning off).
            socket2::SockRef::from(&listener).set_recv_buffer_size(4096).unwrap();
        }
        let thread = std::thread::spawn(move || -> std::io::Result<()> {
            let mut conns = Vec::new();
            while !s.load(Ordering::Relaxed) {
                let Ok((c, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                a.fetch_add(1, Ordering::Relaxed);
                at.lock().unwrap().push(Instant::now());
                if quirks.hang_up {
                    drop(c);
                    continue;
                }
                let (s, cl, rx, quirks) = (s.clone(), cl.clone(), rx.clone(), quirks.clone());
                conns.push(std::thread::spawn(move || converse(c, &quirks, &s, &cl, &rx)));
            }
            for t in conns {
                let _ = t.join();
            }
            Ok(())
        });
        QuietController { accepted, accepts, closes, received, stop, thread: Some(thread) }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }

    fn accepts(&self) -> Vec<Instant> {
        self.accepts.lock().unwrap().clone()
    }

    fn closes(&self) -> Vec<Instant> {
        self.closes.lock().unwrap().clone()
    }

    /// How many messages of OpenFlow type `kind` the switch sent it.
    fn received(&self, kind: u8) -> usize {
        self.received.lock().unwrap().iter().filter(|k| **k == kind).count()
    }
}

impl Drop for QuietController {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl QuietController {
    /// A client of the switch's listener at `127.0.0.1:PORT` (in its namespace) that talks as a
    /// [`QuietController`] does over its one connection (`accepted` is 1).
    fn connect(env: &Env, port: u16, quirks: Quirks) -> QuietController {
        let c = env.sw.run(|| std::net::TcpStream::connect(("127.0.0.1", port))).unwrap().unwrap();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(1));
        let accepts = Arc::new(Mutex::new(vec![Instant::now()]));
        let (closes, received) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, cl, rx) = (stop.clone(), closes.clone(), received.clone());
        let thread = std::thread::spawn(move || {
            converse(c, &quirks, &s, &cl, &rx);
            Ok(())
        });
        QuietController { accepted, accepts, closes, received, stop, thread: Some(thread) }
    }
}

/// One connection of a [`QuietController`]: HELLO (unless `silent`) and `after_hello`, then
/// every message the switch sends counted by type (ECHO_REQUESTs answered unless `deaf`) until
/// `stop` or the switch closes it (then its time pushed on `closes`).
fn converse(
    mut c: std::net::TcpStream,
    quirks: &Quirks,
    s: &AtomicBool,
    cl: &Mutex<Vec<Instant>>,
    rx: &Mutex<Vec<u8>>,
) {
    use std::io::{Read, Write};
    c.set_nonblocking(false).unwrap();
    c.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    if !quirks.silent {
        let _ = c.write_all(&[4, 0, 0, 8, 0, 0, 0, 1]);
        let _ = c.write_all(&quirks.after_hello);
    }
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !s.load(Ordering::Relaxed) {
        if quirks.paused.as_ref().is_some_and(|p| p.load(Ordering::Relaxed)) {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        match c.read(&mut chunk) {
            Ok(0) => {
                cl.lock().unwrap().push(Instant::now());
                return;
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => {
                cl.lock().unwrap().push(Instant::now());
                return;
            }
        }
        while buf.len() >= 8 && buf.len() >= usize::from(u16::from_be_bytes([buf[2], buf[3]])) {
            let len = usize::from(u16::from_be_bytes([buf[2], buf[3]])).max(8);
            let mut msg: Vec<u8> = buf.drain(..len).collect();
            rx.lock().unwrap().push(msg[1]);
            if msg[1] == 2 && !quirks.deaf {
                msg[1] = 3; // ECHO_REQUEST → ECHO_REPLY
                let _ = c.write_all(&msg);
            }
        }
    }
}

/// Issue 37: `set-controller` and `del-controller` change a bridge's OpenFlow channel while
/// its switch runs — no restart: a 50-per-second ping stream across six changes loses
/// nothing (a restart closes and reopens the ports: ~40–60 ms of frames, 2–3 pings at this
/// rate, are lost), and the PMDs' counters (`dump-ports`, `pmd-stats-show`) never go back
/// (a restarted switch starts them at zero); `Controller.is_connected`/`status` follow each
/// new controller; a removed `ptcp:` target's port is closed, a kept controller keeps its
/// connection (the controller sees one connection, not one per change).
#[test]
fn controllers_change_without_a_restart() {
    let Some(mut env) = Env::start("dropin_ctrl_live") else { return };
    let (h1, _h2) = one_bridge_two_hosts(&env, "10.86.0");
    assert!(ping(&h1, "10.86.0.2", 2), "NORMAL between p1 and p2");
    let tc0 = QuietController::start(&env, 6680);
    let tc1 = QuietController::start(&env, 6681);
    let tc2 = QuietController::start(&env, 6682);
    // A standing controller (the first flushes the flows, as OVS's `connmgr_set_controllers`
    // does; the last gone would again): the NORMAL flow it would set up, and `secure`, so the
    // changes below neither flush nor fail open.
    env.vsctl(&["set-controller", "br0", "tcp:127.0.0.1:6680", "--", "set-fail-mode", "br0", "secure"]);
    assert_eq!(env.ofctl_ok(&["-O", "OpenFlow13", "dump-flows", "br0"]).matches("actions=").count(), 0, "flushed");
    env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", "br0", "priority=0,actions=NORMAL"]);
    let ofctl_tcp = |port: u16| {
        Command::new("ip")
            .args(["netns", "exec", env.sw.name(), "ovs-ofctl", "-O", "OpenFlow13", "dump-flows"])
            .arg(format!("tcp:127.0.0.1:{port}"))
            .output()
            .unwrap()
            .status
            .success()
    };
    let connected = |env: &Env, target: &str| {
        env.db
            .vsctl(&["--columns=is_connected,status", "find", "controller", &format!("target=\"{target}\"")])
            .is_ok_and(|s| s.contains("true") && s.contains("state=ACTIVE"))
    };

    // `ovs-vsctl` with its wait (the switch applied the change and wrote `cur_cfg`): timed.
    let vs = |env: &Env, args: &[&str]| {
        let t = Instant::now();
        env.vsctl(args);
        eprintln!("ovs-vsctl {}: {} ms", args.join(" "), t.elapsed().as_millis());
    };
    const PINGS: u32 = 500;
    let mut rx = vec![(rx_pkts(&env, "2"), pmd_received(&env))];
    let stream = ping_stream(&h1, "10.86.0.2", PINGS, "0.02");
    std::thread::sleep(Duration::from_millis(500));
    let mut t_step = Instant::now();
    let mut step = |env: &Env, what: &str| {
        // How long the change took, `ovs-vsctl` (with its wait) and the checks after it: printed
        // for the docs' figures (`--nocapture`).
        eprintln!("{what}: {} ms", t_step.elapsed().as_millis());
        // At least five pings' time (20 ms apart) since the last reading, so they must grow.
        std::thread::sleep(Duration::from_millis(100).saturating_sub(t_step.elapsed()));
        let now = (rx_pkts(env, "2"), pmd_received(env));
        let last = *rx.last().unwrap();
        assert!(now.0 > last.0 && now.1 > last.1, "{what}: the counters keep counting: {last:?} then {now:?}");
        rx.push(now);
        t_step = Instant::now();
    };
    const T0: &str = "tcp:127.0.0.1:6680";
    // 1: a controller and a listener.
    vs(&env, &["set-controller", "br0", T0, "tcp:127.0.0.1:6681", "ptcp:6683:127.0.0.1"]);
    eventually("tcp:127.0.0.1:6681 is connected", || connected(&env, "tcp:127.0.0.1:6681"));
    assert!(ofctl_tcp(6683), "ptcp:6683 listened on");
    step(&env, "set-controller");
    // 2: the listener removed, a second controller added; the first kept.
    vs(&env, &["set-controller", "br0", T0, "tcp:127.0.0.1:6681", "tcp:127.0.0.1:6682"]);
    eventually("tcp:127.0.0.1:6682 is connected", || connected(&env, "tcp:127.0.0.1:6682"));
    assert!(connected(&env, "tcp:127.0.0.1:6681"));
    assert!(!ofctl_tcp(6683), "ptcp:6683 closed");
    step(&env, "a second controller");
    // 3: the first removed.
    vs(&env, &["set-controller", "br0", T0, "tcp:127.0.0.1:6682"]);
    std::thread::sleep(Duration::from_millis(300));
    assert!(connected(&env, "tcp:127.0.0.1:6682"));
    step(&env, "the first controller removed");
    // 4: only the standing one.
    vs(&env, &["set-controller", "br0", T0]);
    step(&env, "all but the standing controller removed");
    // 5, 6: one again, and a target that does not listen (BACKOFF).
    vs(&env, &["set-controller", "br0", T0, "tcp:127.0.0.1:6681"]);
    eventually("tcp:127.0.0.1:6681 is connected again", || connected(&env, "tcp:127.0.0.1:6681"));
    vs(&env, &["set-controller", "br0", T0, "tcp:127.0.0.1:6689"]);
    let dead = |column: &str| env.vsctl(&["--columns", column, "find", "controller", "target=\"tcp:127.0.0.1:6689\""]);
    eventually("a controller nobody listens for is in BACKOFF", || dead("status").contains("BACKOFF"));
    assert!(dead("is_connected").contains("false"));
    assert!(dead("status").contains("last_error=\"Connection refused\""), "{}", dead("status"));
    step(&env, "a controller in backoff");
    assert!(!stream.is_finished(), "the stream (10 s) outlasts the changes");
    let out = stream.join().unwrap();
    assert!(
        out.contains(&format!("{PINGS} packets transmitted, {PINGS} received")),
        "no frame lost across six controller changes: {out}"
    );
    step(&env, "after the stream");
    assert!(rx.last().unwrap().0 >= rx[0].0 + u64::from(PINGS), "p2 counted every ping: {rx:?}");
    env.vsctl(&["del-controller", "br0"]);
    let log = env.exit();
    // Started once without the bridge, once with its management socket: never for a change.
    assert!(log.matches("ovsdb: datapath ports").count() <= 2, "no switch restart: {log}");
    // The kept controller's connection was never closed: one connection each time it was added.
    assert_eq!(tc0.accepted(), 1, "{log}");
    assert_eq!(tc1.accepted(), 2, "{log}");
    assert_eq!(tc2.accepted(), 1, "{log}");
    assert!(!log.contains("panicked"), "{log}");
}

/// Issue 37: `set-fail-mode` and `del-fail-mode` take effect on the running switch, with OVS's
/// semantics: the first controller flushes the table; a `secure` bridge whose controller is
/// away leaves a table miss a miss;
/// `standalone` with no controller admitted for three inactivity probes (15 s) fails open
/// (NORMAL forwarding) — at once here, the controller having been away that long; `secure`
/// again ends fail-open at once; a standalone bridge left with no `Controller` row gets
/// `priority=0,actions=NORMAL` back (OVS's `bridge_configure_remotes`). The switch is never
/// restarted: the PMDs' counters keep counting.
#[test]
fn fail_mode_changes_without_a_restart() {
    let Some(mut env) = Env::start("dropin_failmode") else { return };
    let (h1, _h2) = one_bridge_two_hosts(&env, "10.87.0");
    assert!(ping(&h1, "10.87.0.2", 2), "NORMAL between p1 and p2");
    // A controller nobody listens for, in secure mode: the first controller flushes the table
    // (OVS's `connmgr_set_controllers`), and misses stay misses.
    let t0 = Instant::now();
    env.vsctl(&["set-controller", "br0", "tcp:127.0.0.1:6691", "--", "set-fail-mode", "br0", "secure"]);
    assert_eq!(env.ofctl_ok(&["-O", "OpenFlow13", "dump-flows", "br0"]).matches("actions=").count(), 0, "flushed");
    let before = rx_pkts(&env, "2");
    assert!(!ping(&h1, "10.87.0.2", 2), "secure, no flows: misses stay misses");
    // Three probe intervals without a controller.
    std::thread::sleep(Duration::from_secs(16).saturating_sub(t0.elapsed()));
    assert!(!ping(&h1, "10.87.0.2", 1), "secure does not fail open");
    env.vsctl(&["set-fail-mode", "br0", "standalone"]);
    eventually("standalone fails open", || ping(&h1, "10.87.0.2", 1));
    assert!(ping(&h1, "10.87.0.2", 3), "failed open: NORMAL");
    assert_eq!(env.ofctl_ok(&["-O", "OpenFlow13", "dump-flows", "br0"]).matches("actions=").count(), 0, "hidden");
    env.vsctl(&["set-fail-mode", "br0", "secure"]);
    eventually("secure ends fail-open", || !ping(&h1, "10.87.0.2", 1));
    env.vsctl(&["del-fail-mode", "br0"]);
    eventually("standalone (del-fail-mode) fails open again", || ping(&h1, "10.87.0.2", 1));
    // No controller left, standalone: OVS's NORMAL flow, and a steady stream across the change.
    const PINGS: u32 = 150;
    let stream = ping_stream(&h1, "10.87.0.2", PINGS, "0.02");
    std::thread::sleep(Duration::from_millis(500));
    env.vsctl(&["del-controller", "br0"]);
    let out = stream.join().unwrap();
    assert!(out.contains(&format!("{PINGS} received")), "NORMAL throughout del-controller: {out}");
    let flows = env.ofctl_ok(&["-O", "OpenFlow13", "dump-flows", "br0"]);
    assert!(flows.contains("priority=0 actions=NORMAL"), "{flows}");
    assert!(ping(&h1, "10.87.0.2", 2));
    let after = rx_pkts(&env, "2");
    assert!(after >= before + u64::from(PINGS), "the counters were never reset: {before} then {after}");
    let log = env.exit();
    assert!(log.matches("ovsdb: datapath ports").count() <= 2, "no switch restart: {log}");
    assert_eq!(log.matches("failing open").count(), 2, "{log}");
    assert!(log.contains("the fail mode is secure: no longer in fail-open mode"), "{log}");
    assert!(log.contains("priority=0,actions=NORMAL added"), "{log}");
}

/// `Controller.status` of br0's one controller, as `ovs-vsctl get` prints it.
fn controller_status(env: &Env) -> String {
    env.vsctl(&["get", "controller", "br0", "status"])
}

/// Issue 37: a `Controller` row's `max_backoff` and `inactivity_probe`, with ovs-vswitchd 3.1's
/// semantics, applied to the running connection; its `role` and `status` written back.
/// `max_backoff=1000`: a controller that hangs up at once is tried every second (the default
/// 8 s makes 1, 2, 4 s: 3 attempts in 5.5 s), `status:last_error` "Connection reset by peer".
/// `inactivity_probe=0`: a controller that answers no ECHO_REQUEST keeps its connection
/// (the default 5 s closes it after 10 s); set to 6000 while it runs, the probe goes out at
/// once and the connection is closed 6 s later (`last_error` "Connection timed out"). The
/// controller's ROLE_REQUEST(MASTER) makes `role` `master`; `status` has `state`,
/// `sec_since_connect`, `sec_since_disconnect`.
#[test]
fn controller_timers_role_and_status() {
    let Some(mut env) = Env::secure_bridge("dropin_ctl_timers") else { return };
    let hang_up = QuietController::start_with(&env, 6671, Quirks { hang_up: true, ..Quirks::default() });
    env.vsctl(&["set-controller", "br0", "tcp:127.0.0.1:6671", "--", "set", "controller", "br0", "max_backoff=1000"]);
    std::thread::sleep(Duration::from_millis(5500));
    let accepts = hang_up.accepts();
    let gaps: Vec<f64> = accepts.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()).collect();
    eprintln!("max_backoff=1000: attempts {} apart (s): {gaps:.2?}", accepts.len());
    assert!(accepts.len() >= 5, "max_backoff=1000: an attempt a second: {gaps:.2?}");
    assert!(gaps.iter().all(|g| *g < 1.6), "never more than max_backoff apart: {gaps:.2?}");
    let st = controller_status(&env);
    // Closed with our HELLO unread: a reset (or, had it been read, the end of the file).
    let why =
        ["\"Connection reset by peer\"", "\"End of file\""].iter().any(|e| st.contains(&format!("last_error={e}")));
    assert!(why && st.contains("sec_since_disconnect="), "{st}");
    assert_eq!(env.vsctl(&["get", "controller", "br0", "is_connected"]).trim(), "false");

    // OpenFlow 1.3 ROLE_REQUEST (type 24): role MASTER (2), generation_id 0.
    let mut role_request = vec![4, 24, 0, 24, 0, 0, 0, 9, 0, 0, 0, 2];
    role_request.extend_from_slice(&[0; 12]);
    let deaf =
        QuietController::start_with(&env, 6672, Quirks { after_hello: role_request, deaf: true, ..Quirks::default() });
    env.vsctl(&["set-controller", "br0", "tcp:127.0.0.1:6672", "--", "set", "controller", "br0", "inactivity_probe=0"]);
    eventually("the deaf controller is master", || env.vsctl(&["get", "controller", "br0", "role"]).trim() == "master");
    let connected_at = deaf.accepts()[0];
    assert_eq!(env.vsctl(&["get", "controller", "br0", "is_connected"]).trim(), "true");
    let st = controller_status(&env);
    assert!(st.contains("state=ACTIVE") && st.contains("sec_since_connect="), "{st}");
    // Past the default's probe and its answer's wait (10 s): still the one connection.
    std::thread::sleep(Duration::from_secs(11).saturating_sub(connected_at.elapsed()));
    assert!(deaf.closes().is_empty() && deaf.accepted() == 1, "inactivity_probe=0: never probed");
    let t = Instant::now();
    env.vsctl(&["set", "controller", "br0", "inactivity_probe=6000"]);
    eventually("the unanswered probe closes the connection", || !deaf.closes().is_empty());
    let closed = deaf.closes()[0].duration_since(t).as_secs_f64();
    eprintln!("inactivity_probe=6000 set live: closed {closed:.2} s later");
    assert!((5.5..8.0).contains(&closed), "probe at once, the end 6 s later: {closed:.2} s");
    eventually("last_error says why", || controller_status(&env).contains("last_error=\"Connection timed out\""));
    eventually("reconnected", || deaf.accepted() == 2);
    let log = env.exit();
    assert!(!log.contains("panicked"), "{log}");
}

/// A PACKET_OUT to br0 whose action is `controller`: a PACKET_IN to every controller that takes
/// it; and the bridge's own port set down and up (`mod-port`): PORT_STATUS to every controller.
fn provoke_async(env: &Env) {
    let frame = format!("ffffffffffff00000000000188b5{}", "00".repeat(46));
    env.ofctl_ok(&["-O", "OpenFlow13", "packet-out", "br0", "CONTROLLER", "controller", &frame]);
    env.ofctl_ok(&["-O", "OpenFlow13", "mod-port", "br0", "br0", "down"]);
    env.ofctl_ok(&["-O", "OpenFlow13", "mod-port", "br0", "br0", "up"]);
}

/// OpenFlow 1.3 message types.
const PACKET_IN: u8 = 10;
const PORT_STATUS: u8 = 12;

/// Issue 37: `Controller.enable_async_messages`, as ovs-vswitchd 3.1 reads it: `false` — the
/// controller is sent no PACKET_IN and no PORT_STATUS (every async mask zero) — until it asks
/// with SET_ASYNC (a second controller, whose SET_ASYNC asks for packet-ins of reason ACTION
/// only, gets those and no PORT_STATUS); set to `true` while it runs, the first controller gets
/// both on its running connection.
#[test]
fn controller_enable_async_messages() {
    let Some(mut env) = Env::secure_bridge("dropin_ctl_async") else { return };
    let plain = QuietController::start(&env, 6673);
    // OpenFlow 1.3 SET_ASYNC (type 28): packet-in master/slave masks 1<<ACTION / 0, port-status 0/0,
    // flow-removed 0/0.
    let mut set_async = vec![4, 28, 0, 32, 0, 0, 0, 7];
    for m in [2u32, 0, 0, 0, 0, 0] {
        set_async.extend_from_slice(&m.to_be_bytes());
    }
    let asks = QuietController::start_with(&env, 6674, Quirks { after_hello: set_async, ..Quirks::default() });
    env.vsctl(&[
        "--id=@a",
        "create",
        "controller",
        "target=\"tcp:127.0.0.1:6673\"",
        "enable_async_messages=false",
        "--",
        "--id=@b",
        "create",
        "controller",
        "target=\"tcp:127.0.0.1:6674\"",
        "enable_async_messages=false",
        "--",
        "set",
        "bridge",
        "br0",
        "controller=[@a,@b]",
    ]);
    let connected =
        |env: &Env| env.vsctl(&["--columns=is_connected", "list", "controller"]).matches("true").count() == 2;
    eventually("both controllers connected", || connected(&env));
    std::thread::sleep(Duration::from_millis(300));
    provoke_async(&env);
    eventually("the asking controller gets its packet-in", || asks.received(PACKET_IN) == 1);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!((plain.received(PACKET_IN), plain.received(PORT_STATUS)), (0, 0), "enable_async_messages=false");
    assert_eq!(asks.received(PORT_STATUS), 0, "its SET_ASYNC asked for no port-status");
    let uuid = env.vsctl(&["--bare", "--columns=_uuid", "find", "controller", "target=\"tcp:127.0.0.1:6673\""]);
    env.vsctl(&["set", "controller", uuid.trim(), "enable_async_messages=true"]);
    std::thread::sleep(Duration::from_millis(300));
    provoke_async(&env);
    eventually("enabled live: packet-in and port-status", || {
        plain.received(PACKET_IN) == 1 && plain.received(PORT_STATUS) >= 2
    });
    assert_eq!(plain.accepted(), 1, "on the running connection");
    let log = env.exit();
    assert!(!log.contains("panicked"), "{log}");
}

/// Sends `n` frames from `h`'s `e0`, 50 at a time 20 ms apart (2,500 a second).
fn send_burst(h: &Netns, n: usize) {
    send_burst_of(h, n, 60);
}

/// [`send_burst`] of `len`-byte frames.
fn send_burst_of(h: &Netns, n: usize, len: usize) {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x88, 0xb5];
    f.resize(len.max(60), 0);
    h.run(move || {
        let s = RawSocket::open("e0")?;
        for i in 0..n {
            s.send(&f)?;
            if i % 50 == 49 {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok::<(), std::io::Error>(())
    })
    .unwrap()
    .unwrap();
}

/// A `status` key of br0's controller as a number.
fn status_count(env: &Env, key: &str) -> Option<u64> {
    let out = env.vsctl(&["--if-exists", "get", "controller", "br0", &format!("status:{key}")]);
    out.trim().trim_matches('"').parse().ok()
}

/// Issue 37: `controller_rate_limit` and `controller_burst_limit` (OVS's pinsched): a bridge
/// whose table-miss flow sends to the controller; without a limit 1,000 frames in 0.4 s make
/// 1,000 PACKET_INs; with `controller_rate_limit=100 controller_burst_limit=25` set while it
/// runs, another 1,000 make about 25 (the full bucket) + 100/s while they come + the 25
/// queued, the rest dropped — counted in `status:packet-in-miss-*` (and nothing in the
/// action scheduler's).
#[test]
fn controller_rate_limit() {
    let Some(mut env) = Env::secure_bridge("dropin_ctl_rate") else { return };
    let h1 = env.host("h1", "p1", "10.81.0.1");
    env.vsctl(&["add-port", "br0", "p1"]);
    let tc = QuietController::start(&env, 6677);
    env.vsctl(&["set-controller", "br0", "tcp:127.0.0.1:6677"]);
    eventually("connected", || env.vsctl(&["get", "controller", "br0", "is_connected"]).trim() == "true");
    env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", "br0", "priority=0,actions=controller"]);
    std::thread::sleep(Duration::from_millis(500));
    let before = tc.received(PACKET_IN);
    send_burst(&h1, 1000);
    eventually("no limit: every packet-in", || tc.received(PACKET_IN) >= before + 1000);
    assert_eq!(status_count(&env, "packet-in-miss-dropped"), None, "no limit: no scheduler");

    env.vsctl(&["set", "controller", "br0", "controller_rate_limit=100", "controller_burst_limit=25"]);
    std::thread::sleep(Duration::from_millis(500));
    let before = tc.received(PACKET_IN);
    let t0 = Instant::now();
    send_burst(&h1, 1000);
    let sending = t0.elapsed().as_secs_f64();
    eventually("the backlog sent", || {
        status_count(&env, "packet-in-miss-backlog") == Some(0)
            && status_count(&env, "packet-in-miss-bypassed").unwrap_or(0)
                + status_count(&env, "packet-in-miss-queued").unwrap_or(0)
                >= 1000
    });
    std::thread::sleep(Duration::from_millis(300));
    let got = tc.received(PACKET_IN) - before;
    let n = |k: &str| status_count(&env, k).unwrap_or_else(|| panic!("{k}: {}", controller_status(&env)));
    let (bypassed, queued, dropped) =
        (n("packet-in-miss-bypassed"), n("packet-in-miss-queued"), n("packet-in-miss-dropped"));
    eprintln!(
        "rate limit: {got} of 1000 in {sending:.2} s (+ drain); bypassed {bypassed} queued {queued} dropped {dropped}"
    );
    let most = 25.0 + 100.0 * (t0.elapsed().as_secs_f64()) + 25.0;
    assert!(got >= 50 && (got as f64) <= most, "about 100/s after a burst of 25: {got} (at most {most:.0})");
    assert_eq!(bypassed + queued - dropped, got as u64, "each one sent was bypassed or queued and not dropped");
    assert!(dropped >= 1000 - got as u64 - 30, "the rest dropped: {dropped}");
    assert_eq!(n("packet-in-action-queued") + n("packet-in-action-bypassed"), 0, "no action packet-in");
    let log = env.exit();
    assert!(!log.contains("panicked"), "{log}");
}

/// A `coverage/show` counter (0 when it was never hit).
fn coverage(env: &Env, name: &str) -> u64 {
    let (ok, cov, err) = env.appctl(&["coverage/show"]);
    assert!(ok, "coverage/show: {err}");
    cov.lines().find_map(|l| l.strip_prefix(name)?.trim().strip_prefix("total: ")?.parse().ok()).unwrap_or(0)
}

/// Issue 37: `controller_queue_size` (OVS: the packet-ins that may wait to be written to a
/// controller's socket, 100 by default; one more is dropped and counted in coverage
/// `rconn_overflow`). TCP's buffers in the switch's namespace are held at 4 KB (no
/// autotuning, which otherwise lets a stalled socket take megabytes, more on each run), and the
/// controller stops reading; with `controller_queue_size=10` a burst of 3,000 table-miss
/// frames of 1,400 bytes (each PACKET_IN carries the whole frame) fills the socket, then the
/// queue: the rest overflow. Once it reads again, every packet-in made was either received or
/// counted as an overflow; with the column at 400 the same burst overflows by 390 fewer.
#[test]
fn controller_queue_size() {
    let Some(mut env) = Env::secure_bridge("dropin_ctl_queue") else { return };
    // The switch's namespace only (the controller runs there too, on its loopback).
    env.sw.run(|| std::fs::write("/proc/sys/net/ipv4/tcp_wmem", "4096 4096 4096")).unwrap().unwrap();
    let h1 = env.host("h1", "p1", "10.82.0.1");
    env.vsctl(&["add-port", "br0", "p1"]);
    let paused = Arc::new(AtomicBool::new(false));
    let tc = QuietController::start_with(&env, 6678, Quirks { paused: Some(paused.clone()), ..Quirks::default() });
    env.vsctl(&["set-controller", "br0", "tcp:127.0.0.1:6678"]);
    eventually("connected", || env.vsctl(&["get", "controller", "br0", "is_connected"]).trim() == "true");
    env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", "br0", "priority=0,actions=controller:65535"]);
    let mut overflows = Vec::new();
    for size in ["10", "400"] {
        env.vsctl(&["set", "controller", "br0", &format!("controller_queue_size={size}")]);
        std::thread::sleep(Duration::from_millis(300));
        let (made0, over0, got0) =
            (coverage(&env, "ofproto_packet_in"), coverage(&env, "rconn_overflow"), tc.received(PACKET_IN));
        paused.store(true, Ordering::Relaxed);
        send_burst_of(&h1, 3000, 1400);
        eventually("3,000 packet-ins made", || coverage(&env, "ofproto_packet_in") >= made0 + 3000);
        std::thread::sleep(Duration::from_millis(500));
        paused.store(false, Ordering::Relaxed);
        let made = coverage(&env, "ofproto_packet_in") - made0;
        eventually("each received or counted", || {
            (tc.received(PACKET_IN) - got0) as u64 + coverage(&env, "rconn_overflow") - over0 == made
        });
        let over = coverage(&env, "rconn_overflow") - over0;
        eprintln!("controller_queue_size={size}: {made} packet-ins, {over} overflowed");
        assert!(over > 0, "{size}: the queue overflowed");
        overflows.push(over);
    }
    let fewer = overflows[0] as i64 - overflows[1] as i64;
    assert!((370..=410).contains(&fewer), "390 more may wait: {overflows:?}");
    assert!(env.vsctl(&["get", "controller", "br0", "is_connected"]).trim() == "true", "never disconnected");
    let log = env.exit();
    assert!(!log.contains("panicked"), "{log}");
}

/// The TOS byte of the IPv4/TCP frames to `port` captured on the switch namespace's loopback.
fn tos_to(frames: &[Vec<u8>], port: u16) -> Vec<u8> {
    tos_of(frames, port, 2)
}

/// The TOS byte of the IPv4/TCP frames from `port` captured on the switch namespace's loopback.
fn tos_from(frames: &[Vec<u8>], port: u16) -> Vec<u8> {
    tos_of(frames, port, 0)
}

/// The TOS byte of the IPv4/TCP frames whose TCP port at `at` (0: source, 2: destination) is
/// `port`.
fn tos_of(frames: &[Vec<u8>], port: u16, at: usize) -> Vec<u8> {
    frames
        .iter()
        .filter(|f| f.len() >= 38 && f[12..14] == [8, 0] && f[23] == 6)
        .filter(|f| {
            let tcp = 14 + usize::from(f[14] & 0xf) * 4 + at;
            f.len() >= tcp + 2 && u16::from_be_bytes([f[tcp], f[tcp + 1]]) == port
        })
        .map(|f| f[15])
        .collect()
}

/// Issue 37: the DSCP of a controller connection (`Controller.other_config:dscp`, OVS 3.1):
/// absent → 48 (TOS 0xc0) on every packet the switch sends the controller, its SYN on
/// (captured on the namespace's loopback); set to 10 while connected, the switch reconnects
/// (OVS's `rconn_reconnect`) and the new connection's packets carry TOS 40; an out-of-range
/// value is 48 again.
#[test]
fn controller_dscp() {
    let Some(mut env) = Env::secure_bridge("dropin_ctl_dscp") else { return };
    let cap = env.sw.run(|| RawSocket::open("lo")).unwrap().unwrap();
    let tc = QuietController::start(&env, 6675);
    env.vsctl(&["set-controller", "br0", "tcp:127.0.0.1:6675"]);
    eventually("connected", || env.vsctl(&["get", "controller", "br0", "is_connected"]).trim() == "true");
    let tos = tos_to(&cap.drain(Duration::from_millis(300)).unwrap(), 6675);
    assert!(tos.len() >= 3 && tos.iter().all(|t| *t == 48 << 2), "the default DSCP 48: {tos:?}");
    env.vsctl(&["set", "controller", "br0", "other_config:dscp=10"]);
    eventually("reconnected", || tc.accepted() == 2);
    eventually("connected", || env.vsctl(&["get", "controller", "br0", "is_connected"]).trim() == "true");
    let tos = tos_to(&cap.drain(Duration::from_millis(300)).unwrap(), 6675);
    let new: Vec<u8> = tos.iter().copied().skip_while(|t| *t != 10 << 2).collect();
    assert!(new.len() >= 3 && new.iter().all(|t| *t == 10 << 2), "DSCP 10 after the reconnect: {tos:?}");
    env.vsctl(&["set", "controller", "br0", "other_config:dscp=64"]);
    eventually("reconnected again", || tc.accepted() == 3);
    eventually("connected", || env.vsctl(&["get", "controller", "br0", "is_connected"]).trim() == "true");
    let tos = tos_to(&cap.drain(Duration::from_millis(300)).unwrap(), 6675);
    assert!(tos.last() == Some(&(48 << 2)), "64 is out of range: the default: {tos:?}");
    let log = env.exit();
    assert!(!log.contains("panicked"), "{log}");
}

/// OpenFlow 1.3 SET_CONFIG with miss_send_len 0xffff: a service connection asks for packet-ins.
const SET_CONFIG_MISS_ALL: [u8; 12] = [4, 9, 0, 12, 0, 0, 0, 2, 0, 0, 0xff, 0xff];

/// Issue 37: the connections a `Controller` row's passive target accepts take the row's
/// settings, as OVS's `ofservice` gives them (`ofconn_create`, `ofconn_reconfigure`): a
/// `ptcp:` target with `controller_rate_limit=100 controller_burst_limit=25` and
/// `other_config:dscp=10` — a client that asks for packet-ins gets about 25 + 100/s of a
/// 1,000-frame burst (all 1,000 before), its packets carry TOS 40; the DSCP set to 20 live
/// closes it (OVS's `rconn_reconnect` of an accepted connection) and the next client's packets
/// carry TOS 80; `enable_async_messages=false` leaves it no packet-in; and a client that never
/// answers ECHO_REQUEST is closed after two of the row's probe intervals (5 s each).
#[test]
fn passive_target_connections_take_the_row_settings() {
    let Some(mut env) = Env::secure_bridge("dropin_ptcp_settings") else { return };
    let cap = env.sw.run(|| RawSocket::open("lo")).unwrap().unwrap();
    let h1 = env.host("h1", "p1", "10.83.0.1");
    env.vsctl(&["add-port", "br0", "p1"]);
    // One transaction: the listener is bound with the row's DSCP (its SYN-ACKs carry it).
    env.vsctl(&[
        "set-controller",
        "br0",
        "ptcp:6691:127.0.0.1",
        "--",
        "set",
        "controller",
        "br0",
        "controller_rate_limit=100",
        "controller_burst_limit=25",
        "other_config:dscp=10",
    ]);
    let asks = Quirks { after_hello: SET_CONFIG_MISS_ALL.to_vec(), ..Quirks::default() };
    eventually("ptcp:6691 listened on", || {
        env.sw.run(|| std::net::TcpStream::connect(("127.0.0.1", 6691))).unwrap().is_ok()
    });
    let first = QuietController::connect(&env, 6691, asks.clone());
    env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", "br0", "priority=0,actions=controller"]);
    std::thread::sleep(Duration::from_millis(500));
    let t0 = Instant::now();
    send_burst(&h1, 1000);
    std::thread::sleep(Duration::from_millis(600));
    let got = first.received(PACKET_IN);
    let most = 25.0 + 100.0 * t0.elapsed().as_secs_f64() + 25.0;
    eprintln!("ptcp: rate limit: {got} of 1000 in {:.2} s", t0.elapsed().as_secs_f64());
    assert!(got >= 50 && (got as f64) <= most, "about 100/s after a burst of 25: {got} (at most {most:.0})");
    let tos = tos_from(&cap.drain(Duration::from_millis(100)).unwrap(), 6691);
    assert!(tos.len() >= 3 && tos.iter().all(|t| *t == 10 << 2), "DSCP 10 on the accepted connection: {tos:?}");

    env.vsctl(&["set", "controller", "br0", "other_config:dscp=20", "enable_async_messages=false"]);
    eventually("the DSCP change closed it", || first.closes().len() == 1);
    let second = QuietController::connect(&env, 6691, asks);
    std::thread::sleep(Duration::from_millis(500));
    send_burst(&h1, 100);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(second.received(PACKET_IN), 0, "enable_async_messages=false: no packet-in");
    let tos = tos_from(&cap.drain(Duration::from_millis(100)).unwrap(), 6691);
    assert!(tos.last() == Some(&(20 << 2)), "DSCP 20 on the next connection: {tos:?}");

    let deaf = QuietController::connect(&env, 6691, Quirks { deaf: true, ..Quirks::default() });
    eventually("the silent client probed and closed", || deaf.closes().len() == 1);
    let held = (deaf.closes()[0] - deaf.accepts()[0]).as_secs_f64();
    assert!((9.0..13.0).contains(&held), "two 5 s probe intervals: {held:.1} s");
    assert!(deaf.received(2) >= 1, "an ECHO_REQUEST first");
    assert!(second.closes().is_empty(), "the answering client stays");
    let log = env.exit();
    assert!(!log.contains("panicked"), "{log}");
}

/// Issue 37: OVS's rconn CONNECTING timeout — a controller that accepts the TCP connection and
/// never says HELLO is dropped max(1 s, backoff) after the attempt began ("Connection timed
/// out"), and the backoff keeps growing: connections of ~1 s, ~1 s, ~2 s, 1 s, 2 s apart
/// (before: dropped after two 5 s probe intervals).
#[test]
fn controller_without_hello_times_out_connecting() {
    let Some(mut env) = Env::secure_bridge("dropin_ctl_connecting") else { return };
    let mute = QuietController::start_with(&env, 6676, Quirks { silent: true, ..Quirks::default() });
    env.vsctl(&["set-controller", "br0", "tcp:127.0.0.1:6676"]);
    eventually("three attempts", || mute.closes().len() >= 3);
    let (accepts, closes) = (mute.accepts(), mute.closes());
    let held: Vec<f64> = accepts.iter().zip(&closes).map(|(a, c)| (*c - *a).as_secs_f64()).collect();
    let gaps: Vec<f64> = closes.iter().zip(&accepts[1..]).map(|(c, a)| (*a - *c).as_secs_f64()).collect();
    eprintln!("CONNECTING: held {held:.2?} s, backoff {gaps:.2?} s");
    assert!((0.8..1.6).contains(&held[0]) && (0.8..1.6).contains(&held[1]), "max(1 s, backoff): {held:.2?}");
    assert!((1.7..2.6).contains(&held[2]), "the backoff 2 s: {held:.2?}");
    assert!((0.8..1.4).contains(&gaps[0]) && (1.7..2.4).contains(&gaps[1]), "growing backoff: {gaps:.2?}");
    eventually("last_error says why", || controller_status(&env).contains("last_error=\"Connection timed out\""));
    let log = env.exit();
    assert!(!log.contains("panicked"), "{log}");
}

/// Issue 37: the flows a bridge gets from its fail mode and controllers, as OVS's connmgr
/// makes them: a new `secure` bridge (one `ovs-vsctl` transaction) has no flow and forwards
/// nothing; standalone without controllers gets `priority=0,actions=NORMAL` (the fail mode
/// changing while there are no controllers flushes the table); the first controller flushes
/// every flow (the operator's and NORMAL) and a standalone bridge then fails open after three
/// of the controller's probe intervals (`inactivity_probe=1000`: 3 s; the default: 15 s); the
/// last controller gone flushes again and NORMAL is back, alone.
#[test]
fn a_bridge_gets_the_flows_ovs_gives_it() {
    let Some(mut env) = Env::start("dropin_first_flows") else { return };
    let h1 = env.host("h1", "p1", "10.88.0.1");
    let _h2 = env.host("h2", "p2", "10.88.0.2");
    env.sw.ip(&["link", "set", "lo", "up"]).unwrap();
    let flows = |env: &Env| env.ofctl_ok(&["-O", "OpenFlow13", "dump-flows", "br0"]);
    let n_flows = |env: &Env| flows(env).matches("actions=").count();
    // One transaction: the bridge is secure from its start.
    let add_secure: Vec<&str> =
        "add-br br0 -- set bridge br0 datapath_type=netdev -- set-fail-mode br0 secure".split(' ').collect();
    env.vsctl(&add_secure);
    env.vsctl(&["add-port", "br0", "p1", "--", "set", "interface", "p1", "ofport_request=1"]);
    env.vsctl(&["add-port", "br0", "p2", "--", "set", "interface", "p2", "ofport_request=2"]);
    assert_eq!(n_flows(&env), 0, "a new secure bridge has no flow: {}", flows(&env));
    assert!(!ping(&h1, "10.88.0.2", 1), "and forwards nothing");
    env.vsctl(&["del-fail-mode", "br0"]);
    let f = flows(&env);
    assert!(f.contains("priority=0 actions=NORMAL") && n_flows(&env) == 1, "standalone: NORMAL: {f}");
    assert!(ping(&h1, "10.88.0.2", 2));
    env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", "br0", "priority=5,arp,actions=NORMAL"]);
    let t = Instant::now();
    env.vsctl(&[
        "set-controller",
        "br0",
        "tcp:127.0.0.1:6679",
        "--",
        "set",
        "controller",
        "br0",
        "inactivity_probe=1000",
    ]);
    assert_eq!(n_flows(&env), 0, "the first controller flushes every flow: {}", flows(&env));
    eventually("standalone fails open", || ping(&h1, "10.88.0.2", 1));
    // Printed, not asserted: pings under a loaded machine take seconds longer than the switch
    // (a CI run failed at 10.06 s while the switch's own log said 3 s). The switch's figure is
    // checked below.
    let failed_open = t.elapsed().as_secs_f64();
    eprintln!("pings through {failed_open:.2} s after set-controller (inactivity_probe=1000)");
    env.vsctl(&["del-controller", "br0"]);
    let f = flows(&env);
    assert!(
        f.contains("priority=0 actions=NORMAL") && n_flows(&env) == 1,
        "the last controller gone: NORMAL alone: {f}"
    );
    assert!(ping(&h1, "10.88.0.2", 2));
    env.vsctl(&["set-fail-mode", "br0", "secure"]);
    assert_eq!(n_flows(&env), 0, "secure without controllers: flushed: {}", flows(&env));
    let log = env.exit();
    assert_eq!(log.matches("failing open").count(), 1, "{log}");
    // The switch's own wait before failing open: three 1 s intervals (3 s), not three of the
    // default 5 s ones (15 s).
    let waited: f64 = log
        .split("no controller for ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no \"no controller for N s\" line: {log}"));
    assert!((2.0..8.0).contains(&waited), "three 1 s intervals, not three 5 s ones: {waited} s: {log}");
}

/// Issue 37: `ssl:` and `pssl:` controller targets with `--ovsdb` take their key, certificate
/// and CA from the `SSL` table (`ovs-vsctl set-ssl`), as ovs-vswitchd does: without an `SSL`
/// row each says so in `Controller.status:last_error` (logged once); `set-ssl` with `ovs-pki`
/// credentials connects rqvs to `ovs-testcontroller` over `ssl:` and lets `ovs-ofctl` in over
/// `pssl:` (with the controller CA's certificate; another CA's is refused); `del-ssl` closes
/// them again. The switch is never restarted.
#[test]
fn ssl_targets_use_the_ssl_table() {
    let Some(mut env) = Env::start("dropin_ssl") else { return };
    if !(rqvs_testkit::ovs::testcontroller_available() && rqvs_testkit::ovs::ofctl_available()) {
        return;
    }
    let (sw, ctl) = rqvs_testkit::pki::pki(&env.dir, "pki", "ctl");
    let (_, stranger) = rqvs_testkit::pki::pki(&env.dir, "other", "ctl");
    env.sw.ip(&["link", "set", "lo", "up"]).unwrap();
    env.vsctl(&["add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev"]);
    let tc = Command::new("ip")
        .args(["netns", "exec", env.sw.name(), "ovs-testcontroller", "pssl:6696:127.0.0.1"])
        .arg(format!("--private-key={}", ctl.key.display()))
        .arg(format!("--certificate={}", ctl.cert.display()))
        .arg(format!("--ca-cert={}", ctl.peer_ca.display()))
        .arg(format!("--unixctl={}", env.dir.join("tc.ctl").display()))
        .arg("-vconsole:off")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _tc = Running(Some(tc));
    env.vsctl(&["set-controller", "br0", "ssl:127.0.0.1:6696", "pssl:6695:127.0.0.1"]);
    let status = |target: &str| {
        env.vsctl(&["--columns=is_connected,status", "find", "controller", &format!("target=\"{target}\"")])
    };
    for t in ["ssl:127.0.0.1:6696", "pssl:6695:127.0.0.1"] {
        let s = status(t);
        assert!(s.contains("no SSL configuration") && s.contains("false"), "{t} without an SSL row: {s}");
    }
    // `ovs-ofctl` over TLS in the switch's namespace, with `creds`.
    let ofctl = |creds: &rqvs_testkit::pki::Creds, args: &[&str]| {
        let (command, rest) = args.split_first().unwrap();
        Command::new("ip")
            .args(["netns", "exec", env.sw.name(), "ovs-ofctl", "-O", "OpenFlow13", "--timeout=5"])
            .arg(format!("--private-key={}", creds.key.display()))
            .arg(format!("--certificate={}", creds.cert.display()))
            .arg(format!("--ca-cert={}", creds.peer_ca.display()))
            .args([command, "ssl:127.0.0.1:6695"])
            .args(rest)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    assert!(!ofctl(&ctl, &["dump-flows"]).status.success(), "no pssl: listener without an SSL row");

    env.vsctl(&["set-ssl", sw.key.to_str().unwrap(), sw.cert.to_str().unwrap(), sw.peer_ca.to_str().unwrap()]);
    eventually("ssl:127.0.0.1:6696 is connected", || {
        let s = status("ssl:127.0.0.1:6696");
        s.contains("true") && s.contains("state=ACTIVE")
    });
    let add = ofctl(&ctl, &["add-flow", "priority=33,udp,tp_dst=4242,actions=drop"]);
    assert!(add.status.success(), "add-flow over pssl: {}", String::from_utf8_lossy(&add.stderr));
    let flows = env.ofctl_ok(&["-O", "OpenFlow13", "dump-flows", "br0"]);
    assert!(flows.contains("priority=33,udp,tp_dst=4242 actions=drop"), "{flows}");
    let stranger_cert = rqvs_testkit::pki::Creds {
        key: stranger.key.clone(),
        cert: stranger.cert.clone(),
        peer_ca: ctl.peer_ca.clone(),
    };
    assert!(!ofctl(&stranger_cert, &["dump-flows"]).status.success(), "another CA's client is refused");
    assert!(!status("pssl:6695:127.0.0.1").contains("last_error"), "{}", status("pssl:6695:127.0.0.1"));

    // Without the SSL row again: both closed, each says why.
    env.vsctl(&["del-ssl"]);
    eventually("ssl:127.0.0.1:6696 is disconnected", || {
        let s = status("ssl:127.0.0.1:6696");
        s.contains("false") && s.contains("no SSL configuration")
    });
    assert!(!ofctl(&ctl, &["dump-flows"]).status.success(), "pssl: closed with the SSL row");
    let log = env.exit();
    assert!(log.matches("ovsdb: datapath ports").count() <= 2, "no switch restart: {log}");
    assert_eq!(log.matches("controller ssl:127.0.0.1:6696: no SSL configuration").count(), 1, "once: {log}");
    assert!(log.contains("controller ssl:127.0.0.1:6696: connected"), "{log}");
    assert!(!log.contains("panicked"), "{log}");
}

/// `Flow_Table:prefixes` (issue 35/37): each table of the bridge's slow path takes the prefix
/// fields of its `Flow_Table` row, as ovs-vswitchd does — with an IPv6 trie a miss of
/// `2001:db8::/32` examines only as many bits of the address as rule the prefix out (`/15`
/// instead of `/32`); a field rqvs cannot build a trie on is logged once and skipped.
#[test]
fn flow_table_prefixes_reach_the_slow_path() {
    let Some(mut env) = Env::start("dropin_prefixes") else { return };
    let _h1 = env.host("h1", "p1", "10.84.0.1");
    env.vsctl(&["add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev"]);
    env.vsctl(&["add-port", "br0", "p1", "--", "set", "interface", "p1", "ofport_request=1"]);
    // Table 0 looks at ipv6_dst, table 1 at ipv6_src.
    for flow in [
        "table=0,priority=10,ipv6,ipv6_dst=2001:db8::/32,actions=drop",
        "table=0,priority=1,actions=goto_table:1",
        "table=1,priority=10,ipv6,ipv6_src=2001:db8::/32,actions=drop",
    ] {
        env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", "br0", flow]);
    }
    let megaflow = |env: &Env| {
        let (ok, out, err) = env.appctl(&["ofproto/trace", "br0", "in_port=1,ipv6,ipv6_src=2002::1,ipv6_dst=2002::1"]);
        assert!(ok, "{out}{err}");
        out.lines().find_map(|l| l.strip_prefix("Megaflow: ")).unwrap_or_default().to_string()
    };
    let has = |m: &str, src: u8, dst: u8| {
        m.contains(&format!("ipv6_src=2002::/{src}")) && m.contains(&format!("ipv6_dst=2002::/{dst}"))
    };
    let m = megaflow(&env);
    assert!(has(&m, 32, 32), "no IPv6 trie by default: {m}");
    let create = |table: u8, prefixes: &str| {
        let id = format!("--id=@ft{table}");
        let set = format!("flow_tables:{table}=@ft{table}");
        let prefixes = format!("prefixes={prefixes}");
        env.vsctl(&["--", &id, "create", "Flow_Table", &prefixes, "--", "set", "Bridge", "br0", &set]);
    };
    create(1, "ipv6_src,tun_src");
    eventually("table 1 has the ipv6_src trie, table 0 none", || has(&megaflow(&env), 15, 32));
    create(0, "ipv6_dst");
    eventually("both tables have their tries", || has(&megaflow(&env), 15, 15));
    assert!(
        env.ofctl_ok(&["-O", "OpenFlow13", "dump-flows", "br0"]).contains("ipv6_dst=2001:db8::/32"),
        "the flows stay"
    );
    env.vsctl(&["clear", "Bridge", "br0", "flow_tables"]);
    eventually("back to the default", || has(&megaflow(&env), 32, 32));
    let log = env.exit();
    let note = "flow table 1: 'prefixes': ";
    assert_eq!(log.matches(note).count(), 1, "tun_src's warning logged once:\n{log}");
    // Set live: the bridge's switch started once, never restarted for a change of prefixes.
    assert_eq!(log.matches("ovsdb: datapath ports").count(), 1, "{log}");
    assert_eq!(log.matches("prefix fields set live").count(), 3, "{log}");
}

#[test]
fn patch_ports_join_two_bridges() {
    for (i, design) in ["orig", "ccache", "cflows"].into_iter().enumerate() {
        let Some(mut env) = Env::start_with(&format!("dropin_patch{i}"), &["--design", design]) else { return };
        let h1 = env.host("h1", "p1", "10.84.0.1");
        let h2 = env.host("h2", "p2", "10.84.0.2");
        env.vsctl(&["add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev"]);
        env.vsctl(&["add-port", "br0", "p1"]);
        env.vsctl(&["add-br", "br1", "--", "set", "bridge", "br1", "datapath_type=netdev"]);
        env.vsctl(&["add-port", "br1", "p2"]);
        assert!(!ping(&h1, "10.84.0.2", 1), "{design}: two bridges, no patch yet");
        // Both ends in one transaction (as operators and Neutron make them).
        add_patch_pair(&env);
        for end in ["patch-br0-to-br1", "patch-br1-to-br0"] {
            assert_eq!(env.vsctl(&["get", "interface", end, "ofport"]).trim(), "2", "{design}: {end}'s ofport");
            assert_eq!(env.vsctl(&["get", "interface", end, "error"]).trim(), "[]", "{design}: {end}");
            assert_eq!(env.vsctl(&["get", "interface", end, "link_state"]).trim(), "up", "{design}: {end}");
        }
        let show = env.ofctl_ok(&["-O", "OpenFlow13", "show", "br0"]);
        assert!(show.contains(" 2(patch-br0-to-br): "), "{design}: 15 bytes of the name, as OVS: {show}");
        assert!(ping(&h1, "10.84.0.2", 3), "{design}: a ping across the patch pair");
        let (ok, fdb1, err) = env.appctl(&["fdb/show", "br1"]);
        let mac1 = {
            let out =
                Command::new("ip").args(["netns", "exec", h1.name(), "cat", "/sys/class/net/e0/address"]).output();
            String::from_utf8_lossy(&out.unwrap().stdout).trim().to_string()
        };
        let learned = fdb1.lines().find(|l| l.contains(&mac1)).unwrap_or_default();
        assert!(
            ok && learned.trim_start().starts_with("2 "),
            "{design}: br1 learned h1 on its patch port: {fdb1}{err}"
        );
        // A patch port's statistics: its own counters (it has no kernel device).
        if design == "orig" {
            eventually("patch statistics", || {
                let s = env.vsctl(&["get", "interface", "patch-br1-to-br0", "statistics"]);
                let n = |k: &str| {
                    s.split([',', '{', '}'])
                        .find_map(|f| f.trim().strip_prefix(k)?.strip_prefix('=')?.parse::<u64>().ok())
                        .unwrap_or(0)
                };
                n("rx_packets") >= 3 && n("tx_packets") >= 3 && n("rx_bytes") > 0
            });
        }
        // The one datapath numbers every bridge's ports (OVS's netdev datapath); dump-flows
        // prints those numbers, or the names with --names.
        let (ok, show, err) = env.appctl(&["dpctl/show"]);
        assert!(
            ok && show.contains(
                "  port 0: ovs-netdev (tap)\n  port 1: br0 (tap)\n  port 2: p1\n  port 3: patch-br0-to-br1 (patch)\n  \
                 port 4: br1 (tap)\n  port 5: p2\n  port 6: patch-br1-to-br0 (patch)\n"
            ),
            "{design}: {show}{err}"
        );
        // CFLOWS keeps no megaflows. ORIG and CCACHE cross NORMAL inside the translation:
        // p1's megaflows carry br1's NORMAL (`NORMAL(clone(NORMAL))`: br0's decision, and br1's
        // for what crosses), and no patch port receives (no hop) unless an upcall met a commit.
        if design != "cflows" {
            let (ok, flows, err) = env.appctl(&["dpctl/dump-flows"]);
            let from_p1: Vec<&str> = flows.lines().filter(|l| l.contains(",ip,in_port=2,")).collect();
            assert!(
                ok && !from_p1.is_empty() && from_p1.iter().all(|l| l.ends_with("actions:NORMAL(clone(NORMAL))")),
                "{design}: p1's megaflows cross into br1: {flows}{err}"
            );
            if coverage(&env, "xlate_patch_fallback") == 0 {
                assert!(
                    !flows.contains(",in_port=3,") && !flows.contains(",in_port=6,"),
                    "{design}: no megaflow of a patch port (no hop): {flows}"
                );
            }
            let (ok, flows, err) = env.appctl(&["dpctl/dump-flows", "--names"]);
            assert!(ok && flows.contains(",in_port=p1,") && flows.contains(",in_port=p2,"), "{design}: {flows}{err}");
        } else {
            let (ok, flows, err) = env.appctl(&["dpctl/dump-flows", "--names"]);
            assert!(ok, "{design}: {flows}{err}");
        }
        // ofproto/trace follows the packet into br1 (OVS's nested bridge("br1") section).
        let mac2 = {
            let out =
                Command::new("ip").args(["netns", "exec", h2.name(), "cat", "/sys/class/net/e0/address"]).output();
            String::from_utf8_lossy(&out.unwrap().stdout).trim().to_string()
        };
        let flow = format!("in_port=1,ip,dl_src={mac1},dl_dst={mac2},nw_src=10.84.0.1,nw_dst=10.84.0.2");
        let (ok, trace, err) = env.appctl(&["ofproto/trace", "br0", &flow]);
        assert!(ok, "{design}: {err}");
        let nested = trace.split("    bridge(\"br1\")\n    -------------\n").nth(1).unwrap_or_default();
        assert!(
            trace.contains(
                "bridge(\"br0\")\n-------------\n 0. priority 0\n    NORMAL\n     -> forwarding to learned port\n"
            ) && nested.starts_with("     0. priority 0\n        NORMAL\n         -> forwarding to learned port\n"),
            "{design}: the trace crosses into br1: {trace}"
        );

        // A flow on the peer bridge decides for what crosses into it; its removal restores it.
        env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", "br1", "priority=10,in_port=2,ip,actions=drop"]);
        assert!(!ping(&h1, "10.84.0.2", 2), "{design}: br1's flow drops what crossed");
        env.ofctl_ok(&["-O", "OpenFlow13", "del-flows", "br1", "ip"]);
        assert!(ping(&h1, "10.84.0.2", 2), "{design}: and forwards again");
        // And on the ingress bridge: sending into the patch port explicitly.
        env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", "br0", "priority=10,in_port=1,ip,actions=output:2"]);
        assert!(ping(&h1, "10.84.0.2", 2), "{design}: output:PATCH crosses");
        env.ofctl_ok(&["-O", "OpenFlow13", "del-flows", "br0", "ip"]);

        // Access ports in one VLAN on either side: NORMAL tags the frame for the patch port
        // (which carries every VLAN) and br1 untags it for p2 — crossed as tagged; in two
        // VLANs nothing crosses to p2.
        env.vsctl(&["set", "port", "p1", "tag=10", "--", "set", "port", "p2", "tag=10"]);
        assert!(ping(&h1, "10.84.0.2", 2), "{design}: one VLAN across the pair");
        if design != "cflows" {
            let (ok, flows, err) = env.appctl(&["dpctl/dump-flows"]);
            assert!(
                ok && flows
                    .lines()
                    .any(|l| l.contains(",ip,in_port=2,") && l.ends_with("actions:NORMAL(clone(NORMAL))")),
                "{design}: the tagged crossing: {flows}{err}"
            );
            if coverage(&env, "xlate_patch_fallback") == 0 {
                assert!(!flows.contains(",in_port=6,"), "{design}: no hop into br1: {flows}");
            }
        }
        env.vsctl(&["set", "port", "p2", "tag=20"]);
        assert!(!ping(&h1, "10.84.0.2", 2), "{design}: two VLANs");
        env.vsctl(&["clear", "port", "p1", "tag", "--", "clear", "port", "p2", "tag"]);
        assert!(ping(&h1, "10.84.0.2", 2), "{design}: untagged again");

        // One end removed: the crossing stops; the other end's error says why.
        env.vsctl(&["del-port", "br1", "patch-br1-to-br0"]);
        assert!(!ping(&h1, "10.84.0.2", 2), "{design}: no crossing without the peer");
        let error = env.vsctl(&["get", "interface", "patch-br0-to-br1", "error"]);
        assert!(error.contains("peer interface patch-br1-to-br0 not found"), "{design}: {error}");
        assert_eq!(env.vsctl(&["get", "interface", "patch-br0-to-br1", "ofport"]).trim(), "2", "{design}: kept");
        env.vsctl(&[
            "add-port",
            "br1",
            "patch-br1-to-br0",
            "--",
            "set",
            "interface",
            "patch-br1-to-br0",
            "type=patch",
            "options:peer=patch-br0-to-br1",
        ]);
        assert_eq!(env.vsctl(&["get", "interface", "patch-br0-to-br1", "error"]).trim(), "[]", "{design}");
        assert!(ping(&h1, "10.84.0.2", 2), "{design}: the pair again");

        // Bad peers: none, and one that is not a patch interface.
        env.vsctl(&["add-port", "br0", "lonely", "--", "set", "interface", "lonely", "type=patch"]);
        let error = env.vsctl(&["get", "interface", "lonely", "error"]);
        assert!(error.contains("lonely: patch type requires valid 'peer' argument"), "{design}: {error}");
        env.vsctl(&["set", "interface", "lonely", "options:peer=p2"]);
        let error = env.vsctl(&["get", "interface", "lonely", "error"]);
        assert!(error.contains("lonely: peer interface p2 is not a patch interface"), "{design}: {error}");
        assert!(ping(&h1, "10.84.0.2", 1), "{design}: the pair is not disturbed");

        let log = env.exit();
        assert_eq!(log.matches("patch type requires valid 'peer' argument").count(), 1, "logged once: {log}");
        assert!(!log.contains("panicked"), "{log}");
    }
}

/// Two bridges with a patch pair (ofport 2 on each), `h1` on br0's `p1`, `h2` on br1's `p2`;
/// `fail_mode=secure`: no flow (no `NORMAL`, whose crossings are hops) until the test adds them.
fn patched_bridges(env: &Env) {
    env.vsctl(&["add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev", "fail_mode=secure"]);
    env.vsctl(&["add-port", "br0", "p1"]);
    env.vsctl(&["add-br", "br1", "--", "set", "bridge", "br1", "datapath_type=netdev", "fail_mode=secure"]);
    env.vsctl(&["add-port", "br1", "p2"]);
    add_patch_pair(env);
}

/// The patch pair `patch-br0-to-br1` ↔ `patch-br1-to-br0`.
fn add_patch_pair(env: &Env) {
    patch_pair(env, "patch-br0-to-br1", "patch-br1-to-br0");
}

/// A patch pair: `a` on br0, `b` on br1, both ends in one transaction (as operators and Neutron
/// make them).
fn patch_pair(env: &Env, a: &str, b: &str) {
    let (peer_a, peer_b) = (format!("options:peer={b}"), format!("options:peer={a}"));
    env.vsctl(&[
        "add-port",
        "br0",
        a,
        "--",
        "set",
        "interface",
        a,
        "type=patch",
        &peer_a,
        "--",
        "add-port",
        "br1",
        b,
        "--",
        "set",
        "interface",
        b,
        "type=patch",
        &peer_b,
    ]);
}

/// A patch port's `rx_packets` (`Interface.statistics`).
fn patch_rx(env: &Env, name: &str) -> u64 {
    iface_stat(env, name, "rx_packets")
}

/// One counter of an interface's `statistics` (0 when absent).
fn iface_stat(env: &Env, name: &str, key: &str) -> u64 {
    let s = env.vsctl(&["get", "interface", name, "statistics"]);
    s.split([',', '{', '}'])
        .find_map(|f| f.trim().strip_prefix(key)?.strip_prefix('=')?.parse::<u64>().ok())
        .unwrap_or(0)
}

/// `output:PATCH` crosses inside the translation (ORIG, CCACHE): one megaflow on the ingress
/// bridge with the peer bridge's outputs, no megaflow of a patch port; the crossings counted
/// on both patch ports (`Interface.statistics`: tx of the sending end, rx of its peer); flow
/// changes on either bridge change what crosses. CFLOWS keeps the datapath hop.
#[test]
fn patch_crossing_is_one_megaflow() {
    for (i, design) in ["orig", "ccache", "cflows"].into_iter().enumerate() {
        let Some(mut env) = Env::start_with(&format!("dropin_xpatch{i}"), &["--design", design]) else { return };
        let h1 = env.host("h1", "p1", "10.85.0.1");
        let _h2 = env.host("h2", "p2", "10.85.0.2");
        patched_bridges(&env);
        for (br, a, b) in [("br0", 1, 2), ("br1", 2, 1)] {
            env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", br, &format!("priority=10,in_port={a},actions=output:{b}")]);
            env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", br, &format!("priority=10,in_port={b},actions=output:{a}")]);
        }
        assert!(ping(&h1, "10.85.0.2", 3), "{design}: a ping across the patch pair by output:PATCH flows");
        // br1's flow counts what crossed into it (OVS credits the peer's rules too).
        let dump = env.ofctl_ok(&["-O", "OpenFlow13", "dump-flows", "br1"]);
        let counted = dump
            .lines()
            .find(|l| l.contains("in_port=2") && l.contains("actions=output:1"))
            .and_then(|l| l.split("n_packets=").nth(1)?.split(',').next()?.parse::<u64>().ok());
        assert!(counted.is_some_and(|n| n >= 3), "{design}: br1's flow counted the crossings: {dump}");
        // Datapath numbers: 2 p1, 3 patch-br0-to-br1, 5 p2, 6 patch-br1-to-br0.
        let (ok, show, err) = env.appctl(&["dpctl/show"]);
        assert!(ok && show.contains("  port 2: p1\n") && show.contains("  port 5: p2\n"), "{design}: {show}{err}");
        if design != "cflows" {
            let (ok, flows, err) = env.appctl(&["dpctl/dump-flows"]);
            assert!(ok, "{err}");
            let from_p1: Vec<&str> = flows.lines().filter(|l| l.contains(",in_port=2,") && l.contains("ip")).collect();
            let from_p2: Vec<&str> = flows.lines().filter(|l| l.contains(",in_port=5,") && l.contains("ip")).collect();
            assert!(
                !from_p1.is_empty() && from_p1.iter().all(|l| l.ends_with("actions:5")),
                "{design}: br0's megaflow sends to p2 itself: {flows}"
            );
            assert!(
                !from_p2.is_empty() && from_p2.iter().all(|l| l.ends_with("actions:2")),
                "{design}: and br1's to p1: {flows}"
            );
            // An upcall that met a commit on the peer bridge takes the hop (the commit then
            // revalidates it into a crossing): only then may a patch port have received.
            if coverage(&env, "xlate_patch_fallback") == 0 {
                assert!(
                    !flows.contains(",in_port=3,") && !flows.contains(",in_port=6,"),
                    "{design}: no megaflow of a patch port (no hop): {flows}"
                );
            }
            // Each crossing credited to the sending patch port's tx and its peer's rx, as OVS's
            // `patch_port_output` does (3 pings each way at least; written every 5 s).
            eventually("the crossings counted on the patch ports", || {
                ["patch-br0-to-br1", "patch-br1-to-br0"].iter().all(|p| {
                    iface_stat(&env, p, "tx_packets") >= 3
                        && iface_stat(&env, p, "rx_packets") >= 3
                        && iface_stat(&env, p, "tx_bytes") >= 3 * 98
                })
            });
            // ofproto/trace: the composed megaflow's datapath actions, as one line.
            let flow = "in_port=1,ip,nw_src=10.85.0.1,nw_dst=10.85.0.2";
            let (ok, trace, err) = env.appctl(&["ofproto/trace", "br0", flow]);
            assert!(ok && trace.contains("\nDatapath actions: patch(br1:2:1)\n"), "{design}: {trace}{err}");
            assert!(trace.contains("    bridge(\"br1\")\n"), "{design}: the nested section: {trace}");
        } else {
            assert!(patch_rx(&env, "patch-br1-to-br0") > 0 || ping(&h1, "10.85.0.2", 1), "{design}: the hop");
        }
        // A flow change on the peer bridge changes what crosses (br0's megaflows revalidated).
        env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", "br1", "priority=20,in_port=2,ip,actions=drop"]);
        assert!(!ping(&h1, "10.85.0.2", 2), "{design}: br1's drop decides for what crosses");
        env.ofctl_ok(&["-O", "OpenFlow13", "--strict", "del-flows", "br1", "priority=20,in_port=2,ip"]);
        assert!(ping(&h1, "10.85.0.2", 2), "{design}: and forwards again");
        // And on the ingress bridge.
        env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", "br0", "priority=20,in_port=1,ip,actions=drop"]);
        assert!(!ping(&h1, "10.85.0.2", 2), "{design}: br0's drop");
        env.ofctl_ok(&["-O", "OpenFlow13", "--strict", "del-flows", "br0", "priority=20,in_port=1,ip"]);
        assert!(ping(&h1, "10.85.0.2", 2), "{design}: forwards again");
        if design != "cflows" {
            // A group's bucket that rewrites the packet (a copy of it) crosses inside the
            // translation too: still one megaflow of p1's, now with the copy's crossing.
            env.ofctl_ok(&[
                "-O",
                "OpenFlow13",
                "add-group",
                "br0",
                "group_id=1,type=all,bucket=mod_nw_tos:32,output:2",
            ]);
            env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", "br0", "priority=30,in_port=1,ip,actions=group:1"]);
            assert!(ping(&h1, "10.85.0.2", 2), "{design}: across the pair through the group's bucket");
            let (ok, flows, err) = env.appctl(&["dpctl/dump-flows"]);
            assert!(ok, "{err}");
            let from_p1: Vec<&str> = flows.lines().filter(|l| l.contains(",ip,in_port=2,")).collect();
            assert!(
                !from_p1.is_empty() && from_p1.iter().all(|l| l.ends_with("actions:clone(set(ipv4(tos=0x20/0xfc)),5)")),
                "{design}: the bucket's copy goes to p2 itself: {flows}"
            );
            if coverage(&env, "xlate_patch_fallback") == 0 {
                assert!(!flows.contains(",in_port=3,"), "{design}: no megaflow of br1's patch port: {flows}");
            }
            env.ofctl_ok(&["-O", "OpenFlow13", "--strict", "del-flows", "br0", "priority=30,in_port=1,ip"]);
            env.ofctl_ok(&["-O", "OpenFlow13", "del-groups", "br0"]);
            // `flood` crosses its patch ports inside the translation too: p1's megaflow floods
            // and crosses into br1, whose flow sends to p2 — no megaflow of br1's patch port.
            env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", "br0", "priority=30,in_port=1,ip,actions=flood"]);
            assert!(ping(&h1, "10.85.0.2", 2), "{design}: across the pair by flood");
            let (ok, flows, err) = env.appctl(&["dpctl/dump-flows"]);
            assert!(ok, "{err}");
            let from_p1: Vec<&str> = flows.lines().filter(|l| l.contains(",ip,in_port=2,")).collect();
            assert!(
                !from_p1.is_empty() && from_p1.iter().all(|l| l.ends_with("actions:flood(5)")),
                "{design}: the flood crosses into br1 and on to p2: {flows}"
            );
            if coverage(&env, "xlate_patch_fallback") == 0 {
                assert!(!flows.contains(",in_port=3,"), "{design}: no megaflow of br1's patch port: {flows}");
            }
            // NO_FLOOD on the patch port (a PORT_MOD, read when the frame is sent): nothing
            // crosses; `all` still does.
            env.ofctl_ok(&["mod-port", "br0", "2", "no-flood"]);
            assert!(!ping(&h1, "10.85.0.2", 2), "{design}: the patch port is NO_FLOOD");
            env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", "br0", "priority=31,in_port=1,ip,actions=all"]);
            assert!(ping(&h1, "10.85.0.2", 2), "{design}: all crosses a NO_FLOOD port");
            env.ofctl_ok(&["mod-port", "br0", "2", "flood"]);
            for f in ["priority=30,in_port=1,ip", "priority=31,in_port=1,ip"] {
                env.ofctl_ok(&["-O", "OpenFlow13", "--strict", "del-flows", "br0", f]);
            }
            // A new patch pair on the old pair's numbers (2 on each bridge) counts from zero: one
            // ping (and an ARP probe or two), where the old pair had crossed 9 echo requests
            // (its statistics, written every 5 s, may show fewer).
            let old = iface_stat(&env, "patch-br0-to-br1", "tx_packets");
            env.vsctl(&["del-port", "br0", "patch-br0-to-br1", "--", "del-port", "br1", "patch-br1-to-br0"]);
            patch_pair(&env, "pa", "pb");
            assert_eq!(env.vsctl(&["get", "interface", "pa", "ofport"]).trim(), "2", "{design}: the old number");
            assert!(ping(&h1, "10.85.0.2", 1), "{design}: across the new pair");
            eventually("the new pair's counters written", || iface_stat(&env, "pa", "tx_packets") >= 1);
            let new = iface_stat(&env, "pa", "tx_packets");
            assert!(old >= 3 && new <= 3, "{design}: the new port's own crossings only: {new} (the old one's {old})");
        }
        let log = env.exit();
        assert!(!log.contains("panicked") && !log.contains("crossing was dropped"), "{design}: {log}");
    }
}

/// Flows that bounce a packet between two bridges through their patch pair: the translation
/// stops at its depth, the packet is dropped, counted, logged once; `ofproto/trace` says so;
/// the switch goes on forwarding.
#[test]
fn a_patch_loop_is_dropped_and_logged_once() {
    for (i, design) in ["orig", "ccache"].into_iter().enumerate() {
        let Some(mut env) = Env::start_with(&format!("dropin_ploop{i}"), &["--design", design]) else { return };
        let h1 = env.host("h1", "p1", "10.86.0.1");
        let _h2 = env.host("h2", "p2", "10.86.0.2");
        patched_bridges(&env);
        // br0 sends what p1 sends into the patch; each bridge sends back what crosses into it.
        env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", "br0", "priority=10,in_port=1,actions=output:2"]);
        env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", "br0", "priority=10,in_port=2,actions=in_port"]);
        env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", "br1", "priority=10,in_port=2,actions=in_port"]);
        assert!(!ping(&h1, "10.86.0.2", 3), "{design}: the loop drops");
        let flow = "in_port=1,ip,nw_src=10.86.0.1,nw_dst=10.86.0.2";
        let (ok, trace, err) = env.appctl(&["ofproto/trace", "br0", flow]);
        assert!(
            ok && trace.contains("patch loop") && trace.contains("\nDatapath actions: drop\n"),
            "{design}: {trace}{err}"
        );
        let (ok, flows, err) = env.appctl(&["dpctl/dump-flows"]);
        assert!(
            ok && flows.lines().any(|l| l.contains(",in_port=2,") && l.ends_with("actions:drop")),
            "{design}: {flows}{err}"
        );
        assert!(coverage(&env, "xlate_patch_loop") >= 1, "{design}: counted");
        // The loop gone, the pair forwards.
        env.ofctl_ok(&["-O", "OpenFlow13", "del-flows", "br0"]);
        env.ofctl_ok(&["-O", "OpenFlow13", "del-flows", "br1"]);
        for (br, a, b) in [("br0", 1, 2), ("br1", 2, 1)] {
            env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", br, &format!("priority=10,in_port={a},actions=output:{b}")]);
            env.ofctl_ok(&["-O", "OpenFlow13", "add-flow", br, &format!("priority=10,in_port={b},actions=output:{a}")]);
        }
        // h1's ARP entry failed in the loop: a kernel waits before asking again; start afresh.
        h1.ip(&["neigh", "flush", "dev", "e0"]).unwrap();
        assert!(ping(&h1, "10.86.0.2", 2), "{design}: forwards after the loop is gone");
        let log = env.exit();
        assert_eq!(log.matches("patch loop: a translation").count(), 1, "{design}: logged once: {log}");
        assert!(!log.contains("panicked"), "{design}: {log}");
    }
}

/// `coverage/show`'s `patch_loop_dropped` (0 when it never hit).
fn patch_loops_dropped(env: &Env) -> u64 {
    coverage(env, "patch_loop_dropped")
}

/// Two bridges joined by two patch pairs, both standalone with `NORMAL`: a broadcast (a ping's
/// ARP request) loops through the datapath's patch hops, as through a loop of cables. Each
/// frame is dropped after 8 crossings, counted in `coverage/show` (`patch_loop_dropped`) and
/// logged once; the loop ends (br0's patch ports stop receiving), `ovs-appctl` and `ovs-ofctl`
/// answer, every frame is accounted for; with one pair removed a ping crosses again.
#[test]
fn a_patch_loop_through_normal_ends() {
    for (i, design) in ["orig", "cflows"].into_iter().enumerate() {
        let Some(mut env) = Env::start_with(&format!("dropin_nloop{i}"), &["--design", design]) else { return };
        let h1 = env.host("h1", "p1", "10.88.0.1");
        let h2 = env.host("h2", "p2", "10.88.0.2");
        for (br, port) in [("br0", "p1"), ("br1", "p2")] {
            env.vsctl(&["add-br", br, "--", "set", "bridge", br, "datapath_type=netdev"]);
            env.vsctl(&["add-port", br, port]);
        }
        add_patch_pair(&env);
        patch_pair(&env, "loop-br0", "loop-br1");
        assert_eq!(env.vsctl(&["get", "interface", "loop-br0", "ofport"]).trim(), "3", "{design}");

        // A broadcast into the loop: the ARP request of a ping (whatever the ping's fate).
        let _ = ping(&h1, "10.88.0.2", 1);
        let (ok, _, err) = env.appctl(&["dpif-netdev/pmd-stats-show"]);
        assert!(ok, "{design}: ovs-appctl answers during the loop: {err}");
        assert!(env.ofctl_ok(&["show", "br0"]).contains("loop-br0"), "{design}: ovs-ofctl answers");
        eventually("the loop's frames are dropped and counted", || patch_loops_dropped(&env) > 0);
        // The loop ends: br0's patch ports stop receiving (h1's ARP retries aside: stable for
        // half a second once in 15 s).
        let patch_rx = |env: &Env| rx_pkts(env, "2") + rx_pkts(env, "3");
        eventually("the loop ends", || {
            let before = patch_rx(&env);
            std::thread::sleep(Duration::from_millis(500));
            patch_rx(&env) == before
        });
        assert!(patch_rx(&env) > 0, "{design}: the broadcast crossed by hops");

        // One pair removed: no loop; a ping crosses (MACs learned in the loop are relearned).
        env.vsctl(&["del-port", "br0", "loop-br0", "--", "del-port", "br1", "loop-br1"]);
        for h in [&h1, &h2] {
            h.ip(&["neigh", "flush", "dev", "e0"]).unwrap();
        }
        let dropped = patch_loops_dropped(&env);
        assert!(ping(&h1, "10.88.0.2", 3), "{design}: a ping across the remaining pair");
        assert_eq!(patch_loops_dropped(&env), dropped, "{design}: no loop left");
        let log = env.exit();
        assert_eq!(log.matches("patch loop: a frame").count(), 1, "{design}: logged once: {log}");
        assert!(!log.contains("panicked"), "{design}: {log}");
    }
}
