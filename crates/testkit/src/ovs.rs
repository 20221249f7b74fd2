//! A private, userspace-only Open vSwitch instance for tests (the recipe of
//! `../shared/ovs-oracle.md`): `ovsdb-server` + `ovs-vswitchd --enable-dummy=override
//! --disable-system`, one netdev bridge `br0` with dummy ports 1 and 2, and a JSON-RPC client on
//! the vswitchd control socket that keeps many `ofproto/trace` requests in flight.
//!
//! Everything runs under a fresh directory in the system temp dir; `Drop` stops both daemons
//! through their control sockets (never by process name) and removes the directory.

use std::io::{BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;

use rqvs_flow::key::*;
use rqvs_flow::FlowKey;

pub struct Ovs {
    pub dir: PathBuf,
    vswitchd_ctl: PathBuf,
    ovsdb_ctl: Option<PathBuf>,
}

/// Starts OVS, or returns `None` after printing why when it cannot start here — unless
/// `RQVS_REQUIRE_OVS=1`, in which case it panics.
pub fn start_or_skip(name: &str) -> Option<Ovs> {
    match Ovs::start(name) {
        Ok(o) => Some(o),
        Err(e) => {
            if std::env::var("RQVS_REQUIRE_OVS").as_deref() == Ok("1") {
                panic!("RQVS_REQUIRE_OVS=1 but Open vSwitch could not start: {e}");
            }
            eprintln!("skipped: Open vSwitch could not start ({e}); install openvswitch-switch to run this test");
            None
        }
    }
}

/// Whether `ovs-ofctl` runs here (tests that need only the client, no daemon). When it does not,
/// prints why the test is skipped — or panics with `RQVS_REQUIRE_OVS=1` (set by `.ci/run`).
pub fn ofctl_available() -> bool {
    tool_available(Command::new("ovs-ofctl").arg("--version"), "ovs-ofctl", "apt-get install openvswitch-switch")
}

/// Whether `ovs-testcontroller` (OVS's learning-switch controller) runs here; as
/// [`ofctl_available`].
pub fn testcontroller_available() -> bool {
    tool_available(
        Command::new("ovs-testcontroller").arg("--version"),
        "ovs-testcontroller",
        "apt-get install openvswitch-testcontroller",
    )
}

/// Whether `python3` can import os-ken (the OpenFlow controller framework, Ryu's successor);
/// as [`ofctl_available`].
pub fn osken_available() -> bool {
    tool_available(
        Command::new("python3").args(["-c", "import os_ken.base.app_manager"]),
        "os-ken",
        "pip install os-ken",
    )
}

/// The `bin` directory of a Python virtual environment holding Faucet 1.10 (`faucet`,
/// `gauge`, and the `osken-manager` Faucet runs from its PATH): `$RQVS_FAUCET_VENV/bin`, by
/// default `/opt/faucet-venv/bin` (where `.ci/run` installs it); as [`ofctl_available`].
pub fn faucet_bin() -> Option<PathBuf> {
    let venv = std::env::var_os("RQVS_FAUCET_VENV").map_or_else(|| PathBuf::from("/opt/faucet-venv"), PathBuf::from);
    let bin = venv.join("bin");
    let install = format!("python3 -m venv {0} && {0}/bin/pip install faucet==1.10.12", venv.display());
    tool_available(Command::new(bin.join("faucet")).arg("--version"), "Faucet", &install).then_some(bin)
}

/// Runs `cmd`; when it fails, prints that the test is skipped and how to get `what` — or panics
/// with `RQVS_REQUIRE_OVS=1`.
fn tool_available(cmd: &mut Command, what: &str, install: &str) -> bool {
    let ok = cmd.output().is_ok_and(|o| o.status.success());
    if !ok {
        if std::env::var("RQVS_REQUIRE_OVS").as_deref() == Ok("1") {
            panic!("RQVS_REQUIRE_OVS=1 but {what} cannot run ({install})");
        }
        eprintln!("skipped: {what} not found ({install})");
    }
    ok
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{:?}: {e}", cmd.get_program()))?;
    if !out.status.success() {
        return Err(format!(
            "{:?} {:?} failed: {}",
            cmd.get_program(),
            cmd.get_args().collect::<Vec<_>>(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn read_pid(path: &Path) -> Result<u32, String> {
    for _ in 0..100 {
        if let Ok(s) = std::fs::read_to_string(path) {
            if let Ok(p) = s.trim().parse() {
                return Ok(p);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Err(format!("no pid file {}", path.display()))
}

impl Ovs {
    pub fn start(name: &str) -> Result<Ovs, String> {
        let dir = std::env::temp_dir().join(format!("rqvs-ovs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let schema = Path::new("/usr/share/openvswitch/vswitch.ovsschema");
        if !schema.exists() {
            return Err(format!("{} not found", schema.display()));
        }
        let d = |f: &str| dir.join(f).display().to_string();
        let env = |c: &mut Command| {
            c.env("OVS_RUNDIR", &dir).env("OVS_DBDIR", &dir).env("OVS_LOGDIR", &dir);
        };
        let mut ovs = Ovs { dir: dir.clone(), vswitchd_ctl: PathBuf::new(), ovsdb_ctl: None };
        let mut c = Command::new("ovsdb-tool");
        run(c.args(["create", &d("conf.db"), schema.to_str().unwrap()]))?;
        let mut c = Command::new("ovsdb-server");
        env(&mut c);
        run(c.args([
            &d("conf.db"),
            &format!("--remote=punix:{}", d("db.sock")),
            &format!("--pidfile={}", d("ovsdb-server.pid")),
            &format!("--log-file={}", d("ovsdb-server.log")),
            "--detach",
        ]))?;
        let pid = read_pid(&dir.join("ovsdb-server.pid"))?;
        ovs.ovsdb_ctl = Some(dir.join(format!("ovsdb-server.{pid}.ctl")));
        let db = format!("unix:{}", d("db.sock"));
        run(Command::new("ovs-vsctl").args([&format!("--db={db}"), "--no-wait", "init"]))?;
        let mut c = Command::new("ovs-vswitchd");
        env(&mut c);
        run(c.args([
            &db,
            "--enable-dummy=override",
            "--disable-system",
            &format!("--pidfile={}", d("ovs-vswitchd.pid")),
            &format!("--log-file={}", d("ovs-vswitchd.log")),
            "--detach",
        ]))?;
        let pid = read_pid(&dir.join("ovs-vswitchd.pid"))?;
        ovs.vswitchd_ctl = dir.join(format!("ovs-vswitchd.{pid}.ctl"));
        run(Command::new("ovs-vsctl").args([
            &format!("--db={db}"),
            "add-br",
            "br0",
            "--",
            "set",
            "bridge",
            "br0",
            "datapath_type=netdev",
            "--",
            "add-port",
            "br0",
            "p1",
            "--",
            "set",
            "interface",
            "p1",
            "type=dummy",
            "ofport_request=1",
            "--",
            "add-port",
            "br0",
            "p2",
            "--",
            "set",
            "interface",
            "p2",
            "type=dummy",
            "ofport_request=2",
        ]))?;
        Ok(ovs)
    }

    /// The bridge's OpenFlow management socket.
    pub fn mgmt(&self) -> String {
        format!("unix:{}", self.dir.join("br0.mgmt").display())
    }

    /// Replaces br0's flows with `text` (ovs-ofctl flow lines), in one bundle.
    pub fn replace_flows(&self, text: &str) -> Result<(), String> {
        run(Command::new("ovs-ofctl").args(["del-flows", &self.mgmt()]))?;
        let file = self.dir.join("flows.ofctl");
        std::fs::write(&file, text).map_err(|e| e.to_string())?;
        run(Command::new("ovs-ofctl").args(["-O", "OpenFlow14", "--bundle", "add-flows", &self.mgmt()]).arg(&file))?;
        Ok(())
    }

    /// `ovs-appctl` on the vswitchd control socket.
    pub fn appctl(&self, args: &[&str]) -> Result<String, String> {
        run(Command::new("ovs-appctl").arg("-t").arg(&self.vswitchd_ctl).args(args))
    }

    /// Sends many JSON-RPC requests `method(params)` with up to `window` in flight; returns each
    /// result string in request order.
    pub fn call_many(&self, method: &str, params: &[Vec<String>], window: usize) -> Result<Vec<String>, String> {
        let stream =
            UnixStream::connect(&self.vswitchd_ctl).map_err(|e| format!("{}: {e}", self.vswitchd_ctl.display()))?;
        let mut writer = stream.try_clone().map_err(|e| e.to_string())?;
        let mut reader = serde_json::Deserializer::from_reader(BufReader::new(stream)).into_iter::<serde_json::Value>();
        let mut out = vec![String::new(); params.len()];
        let mut sent = 0;
        let mut received = 0;
        while received < params.len() {
            let mut batch = Vec::new();
            while sent < params.len() && sent - received < window {
                let req = serde_json::json!({"method": method, "params": params[sent], "id": sent});
                batch.extend_from_slice(req.to_string().as_bytes());
                sent += 1;
            }
            if !batch.is_empty() {
                writer.write_all(&batch).map_err(|e| e.to_string())?;
            }
            let msg = reader.next().ok_or("control socket closed")?.map_err(|e| e.to_string())?;
            let id = msg["id"].as_u64().ok_or_else(|| format!("reply without id: {msg}"))? as usize;
            if !msg["error"].is_null() {
                return Err(format!("{method} {:?}: {}", params[id], msg["error"]));
            }
            out[id] = msg["result"].as_str().unwrap_or_default().to_string();
            received += 1;
        }
        Ok(out)
    }

    /// `ofproto/trace br0 FLOW` for every flow, parsed.
    pub fn trace_many(&self, flows: &[String]) -> Result<Vec<Trace>, String> {
        let params: Vec<Vec<String>> = flows.iter().map(|f| vec!["br0".to_string(), f.clone()]).collect();
        let texts = self.call_many("ofproto/trace", &params, 64)?;
        texts.iter().zip(flows).map(|(t, f)| parse_trace(t).map_err(|e| format!("trace of {f}: {e}"))).collect()
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        if !self.vswitchd_ctl.as_os_str().is_empty() {
            let _ = Command::new("ovs-appctl").arg("-t").arg(&self.vswitchd_ctl).arg("exit").output();
        }
        if let Some(ctl) = &self.ovsdb_ctl {
            let _ = Command::new("ovs-appctl").arg("-t").arg(ctl).arg("exit").output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What one `ofproto/trace` said about table 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// The matched rule's match text (as OVS prints it), priority and cookie; `None` = no match.
    pub rule: Option<(String, u32, u64)>,
    /// The text after `Megaflow: `.
    pub megaflow: String,
}

pub fn parse_trace(text: &str) -> Result<Trace, String> {
    let mut rule = None;
    let mut seen_rule = false;
    let mut megaflow = None;
    for line in text.lines() {
        if let Some(r) = line.strip_prefix(" 0. ") {
            if seen_rule {
                continue;
            }
            seen_rule = true;
            if r.starts_with("No match") {
                continue;
            }
            let (m, rest) = match r.find("priority ") {
                Some(i) => (r[..i].trim_end_matches([',', ' ']).to_string(), &r[i + "priority ".len()..]),
                None => return Err(format!("expected 'priority N' in '{r}'")),
            };
            let mut parts = rest.split(", ");
            let prio = parts.next().unwrap_or("").trim().parse().map_err(|_| format!("bad priority in '{r}'"))?;
            let mut cookie = 0;
            for p in parts {
                if let Some(c) = p.strip_prefix("cookie 0x") {
                    cookie = u64::from_str_radix(c.trim(), 16).map_err(|_| format!("bad cookie in '{r}'"))?;
                }
            }
            rule = Some((m, prio, cookie));
        } else if let Some(m) = line.strip_prefix("Megaflow: ") {
            megaflow = Some(m.to_string());
        }
    }
    Ok(Trace { rule, megaflow: megaflow.ok_or("no 'Megaflow:' line")? })
}

/// Parses a megaflow as OVS prints it into value and mask (the fields rqvs keys carry); `None`
/// when it names a field rqvs does not know.
pub fn parse_megaflow(s: &str) -> Option<(FlowKey, FlowKey)> {
    let (mut v, mut m) = (FlowKey::default(), FlowKey::default());
    let num = |x: &str| -> Option<u32> {
        match x.strip_prefix("0x") {
            Some(h) => u32::from_str_radix(h, 16).ok(),
            None => x.parse().ok(),
        }
    };
    let masked16 = |x: &str| -> Option<(u16, u16)> {
        match x.split_once('/') {
            Some((a, b)) => Some((num(a)? as u16, num(b)? as u16)),
            None => Some((num(x)? as u16, u16::MAX)),
        }
    };
    for item in s.split(',') {
        let (k, val) = item.split_once('=').unwrap_or((item, ""));
        match k {
            "recirc_id" | "eth" => {}
            "ip" | "tcp" | "udp" | "icmp" | "sctp" => {
                v.dl_type = ETH_TYPE_IP;
                m.dl_type = u16::MAX;
                let p = match k {
                    "tcp" => IPPROTO_TCP,
                    "udp" => IPPROTO_UDP,
                    "icmp" => IPPROTO_ICMP,
                    "sctp" => IPPROTO_SCTP,
                    _ => continue,
                };
                v.nw_proto = p;
                m.nw_proto = u8::MAX;
            }
            "arp" => {
                v.dl_type = ETH_TYPE_ARP;
                m.dl_type = u16::MAX;
            }
            "dl_type" => {
                v.dl_type = num(val)? as u16;
                m.dl_type = u16::MAX;
            }
            "in_port" => {
                v.in_port = if val == "LOCAL" { 0xfffe } else { num(val)? };
                m.in_port = u32::MAX;
            }
            "nw_src" | "nw_dst" | "arp_spa" | "arp_tpa" => {
                let (a, mask) = match val.split_once('/') {
                    Some((a, l)) if !l.contains('.') => {
                        let l: u32 = l.parse().ok()?;
                        (a, if l == 0 { 0 } else { u32::MAX << (32 - l) })
                    }
                    Some((a, l)) => (a, u32::from(l.parse::<std::net::Ipv4Addr>().ok()?)),
                    None => (val, u32::MAX),
                };
                let a = u32::from(a.parse::<std::net::Ipv4Addr>().ok()?);
                if k == "nw_src" || k == "arp_spa" {
                    (v.nw_src, m.nw_src) = (a, mask);
                } else {
                    (v.nw_dst, m.nw_dst) = (a, mask);
                }
            }
            "nw_proto" | "arp_op" => {
                v.nw_proto = num(val)? as u8;
                m.nw_proto = u8::MAX;
            }
            "nw_tos" => {
                v.nw_tos |= num(val)? as u8;
                m.nw_tos |= 0xfc;
            }
            "nw_ecn" => {
                v.nw_tos |= num(val)? as u8;
                m.nw_tos |= 0x03;
            }
            "nw_frag" => {
                (v.nw_frag, m.nw_frag) = match val {
                    "no" => (0, 3),
                    "first" => (1, 3),
                    "later" => (3, 3),
                    "yes" => (1, 1),
                    "not_later" => (0, 2),
                    _ => return None,
                }
            }
            "tp_src" | "icmp_type" => (v.tp_src, m.tp_src) = masked16(val)?,
            "tp_dst" | "icmp_code" => (v.tp_dst, m.tp_dst) = masked16(val)?,
            "tcp_flags" => {
                const NAMES: [&str; 12] =
                    ["fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns", "[200]", "[400]", "[800]"];
                let bit = |n: &str| NAMES.iter().position(|x| *x == n).map(|b| 1u16 << b);
                if val.starts_with(['+', '-']) {
                    let mut rest = val;
                    while !rest.is_empty() {
                        let plus = rest.starts_with('+');
                        rest = &rest[1..];
                        let end = rest.find(['+', '-']).unwrap_or(rest.len());
                        let b = bit(&rest[..end])?;
                        m.tcp_flags |= b;
                        if plus {
                            v.tcp_flags |= b;
                        }
                        rest = &rest[end..];
                    }
                } else {
                    m.tcp_flags = TCP_FLAGS_MASK;
                    if val != "0" {
                        for n in val.split('|') {
                            v.tcp_flags |= bit(n)?;
                        }
                    }
                }
            }
            _ => return None,
        }
    }
    Some((v, m))
}

/// A rule-set for OVS made of rqvs rules, written by rqvs's ofctl writer.
pub fn flows_text(rules: &[rqvs_flow::Rule]) -> String {
    rqvs_flow::formats::ofctl::write_flows(rules).expect("rules OpenFlow can express")
}
