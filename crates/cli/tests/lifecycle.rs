//! `rqvs switch` as a daemon (issue 37, item 4): `--detach` returns once the switch in the
//! background is ready and fails with the switch's own error when it cannot start; readiness
//! and stopping told through `NOTIFY_SOCKET` (systemd's `Type=notify`); SIGHUP and `vlog/reopen`
//! reopen `--log-file` after a rotation; with `--ovsdb`, ready means the database's
//! configuration is applied (`cur_cfg` written).
//!
//! The first three need no root: the switch runs on its embedded pcap ports with an OpenFlow
//! listener on loopback, sockets in the test's own `RQVS_RUN_DIR`. The OVSDB case needs
//! network namespaces (the bridge's internal port is a tap device) and ovsdb-server. Every
//! process started here is stopped by pid (the detached switch by the pid in its pid file).

mod common;
use common::TempDir;

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RQVS: &str = env!("CARGO_BIN_EXE_rqvs");

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists; pid is one this test started.
    unsafe { libc::kill(pid, 0) == 0 }
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: pid is a process this test started (read from its pid file).
    unsafe {
        libc::kill(pid, sig);
    }
}

fn eventually(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(secs), "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Stops the detached switch by its pid when a test ends, also when it fails.
struct Detached(i32);

impl Drop for Detached {
    fn drop(&mut self) {
        if alive(self.0) {
            signal(self.0, libc::SIGKILL);
        }
    }
}

fn read_pid(path: &Path) -> i32 {
    std::fs::read_to_string(path).unwrap().trim().parse().unwrap()
}

fn ctl_in(run: &Path, args: &[&str]) -> std::process::Output {
    Command::new(RQVS).arg("ctl").args(args).env("RQVS_RUN_DIR", run).output().unwrap()
}

#[test]
fn detach_returns_once_ready_and_sighup_reopens_the_log() {
    let dir = TempDir::new("detach");
    let run = dir.join("run");
    let (pidfile, log) = (dir.join("rqvs.pid"), dir.join("rqvs.log"));
    let t0 = Instant::now();
    let out = Command::new(RQVS)
        .args(["switch", "--openflow", "ptcp:127.0.0.1:0", "--duration", "120", "--detach", "--no-chdir"])
        .args(["--pidfile", pidfile.to_str().unwrap(), "--log-file", log.to_str().unwrap()])
        .env("RQVS_RUN_DIR", &run)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "rqvs switch --detach: {}", String::from_utf8_lossy(&out.stderr));
    assert!(t0.elapsed() < Duration::from_secs(60));
    // Returned only once ready: the pid file names a live process whose log says so.
    let pid = read_pid(&pidfile);
    let _guard = Detached(pid);
    assert!(alive(pid), "the detached switch runs");
    assert_ne!(pid as u32, std::process::id());
    assert!(std::fs::read_to_string(&log).unwrap().contains("rqvs switch: ready"), "ready before --detach returned");
    // Managed as usual: rqvs ctl finds its default socket.
    let show = ctl_in(&run, &["show"]);
    assert!(show.status.success(), "{}", String::from_utf8_lossy(&show.stderr));

    // logrotate: the file moved away, SIGHUP, lines go to a new file of the same name.
    let rotated = dir.join("rqvs.log.1");
    std::fs::rename(&log, &rotated).unwrap();
    signal(pid, libc::SIGHUP);
    eventually("the log file reopened after SIGHUP", 10, || {
        std::fs::read_to_string(&log).is_ok_and(|s| s.contains("reopened (SIGHUP)"))
    });
    assert!(alive(pid), "SIGHUP with a log file does not stop the switch");
    assert!(!std::fs::read_to_string(&rotated).unwrap().contains("reopened"), "the old file is closed");
    // The same through the management socket (what `ovs-appctl vlog/reopen` runs).
    std::fs::rename(&log, dir.join("rqvs.log.2")).unwrap();
    let out = ctl_in(&run, &["vlog/reopen"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read_to_string(&log).unwrap().contains("reopened"), "vlog/reopen");

    // SIGTERM: a clean stop, the pid file removed.
    signal(pid, libc::SIGTERM);
    eventually("the detached switch stops", 30, || !alive(pid));
    assert!(!pidfile.exists(), "the pid file is removed at exit");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("every frame accounted for"), "{text}");
}

#[test]
fn detach_fails_with_the_switch_s_own_error() {
    let out = Command::new(RQVS)
        .args(["switch", "--detach", "--port", "no-such-interface-37"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no-such-interface-37"), "the switch's error is relayed: {err}");
    assert!(err.contains("exited before it was ready"), "{err}");
    // A usage error keeps its exit code.
    let out = Command::new(RQVS).args(["switch", "--detach", "--port", "a", "--port", "a"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn readiness_and_stopping_are_told_to_the_notify_socket() {
    let dir = TempDir::new("notify");
    let sock_path = dir.join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut child = Command::new(RQVS)
        .args(["switch", "--openflow", "ptcp:127.0.0.1:0", "--duration", "60"])
        .env("RQVS_RUN_DIR", dir.join("run"))
        .env("NOTIFY_SOCKET", &sock_path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 512];
    let n = sock.recv(&mut buf).expect("READY=1 within 60 s");
    let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(msg.lines().any(|l| l == "READY=1"), "{msg}");
    assert!(msg.lines().any(|l| l == format!("MAINPID={}", child.id())), "{msg}");
    signal(child.id() as i32, libc::SIGTERM);
    let n = sock.recv(&mut buf).expect("STOPPING=1");
    assert_eq!(&buf[..n], b"STOPPING=1");
    assert!(child.wait().unwrap().success());
}

#[test]
fn detached_with_ovsdb_returns_once_the_configuration_is_applied() {
    use rqvs_ports::testnet::{self, Netns};
    let tag = "detached_with_ovsdb_returns_once_the_configuration_is_applied";
    if !testnet::available(tag) {
        return;
    }
    let Some(db) = rqvs_testkit::ovsdb_server::start_or_skip(tag) else { return };
    db.vsctl(&["--no-wait", "init"]).unwrap();
    db.vsctl(&["--no-wait", "add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev"]).unwrap();
    let next: i64 = db.vsctl(&["get", "open_vswitch", ".", "next_cfg"]).unwrap().trim().parse().unwrap();
    let sw = Netns::new("life").unwrap();
    let dir = db.dir.path().to_path_buf();
    let (pidfile, log) = (dir.join("rqvs.pid"), dir.join("rqvs.log"));
    let out = Command::new("ip")
        .args(["netns", "exec", sw.name(), RQVS, "switch", "--ovsdb", &db.remote(), "--detach"])
        .args(["--pidfile", pidfile.to_str().unwrap(), "--log-file", log.to_str().unwrap()])
        .env("OVS_RUNDIR", &dir)
        .env("RQVS_RUN_DIR", dir.join("run"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "rqvs switch --ovsdb --detach: {}", String::from_utf8_lossy(&out.stderr));
    let pid = read_pid(&pidfile);
    let _guard = Detached(pid);
    // Ready means configured: cur_cfg has caught up and the bridge has its datapath id already.
    let cur: i64 = db.vsctl(&["get", "open_vswitch", ".", "cur_cfg"]).unwrap().trim().parse().unwrap();
    assert_eq!(cur, next, "cur_cfg written before --detach returned");
    let dpid = db.vsctl(&["get", "bridge", "br0", "datapath_id"]).unwrap();
    assert!(dpid.trim().trim_matches('"').len() == 16, "datapath_id: {dpid}");
    signal(pid, libc::SIGTERM);
    eventually("the detached switch stops", 30, || !alive(pid));
    assert!(!pidfile.exists());
}

/// The units in dist/ start rqvs with options it has, and systemd accepts the unit file.
#[test]
fn dist_units_name_real_options() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let help = Command::new(RQVS).args(["switch", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let units = [root.join("dist/rqvs-vswitchd.service"), root.join("dist/ovs-vswitchd.service.d/rqvs.conf")];
    for unit in &units {
        let text = std::fs::read_to_string(unit).unwrap();
        let exec: Vec<&str> =
            text.lines().filter_map(|l| l.strip_prefix("ExecStart=")).filter(|l| !l.is_empty()).collect();
        assert_eq!(exec.len(), 1, "{}: one ExecStart command", unit.display());
        let args: Vec<&str> = exec[0].split_whitespace().collect();
        assert_eq!(&args[..2], ["/usr/local/bin/rqvs", "switch"], "{}", unit.display());
        for opt in args.iter().filter(|a| a.starts_with("--")) {
            assert!(
                help.contains(&format!("{opt} "))
                    || help.contains(&format!("{opt}["))
                    || help.contains(&format!("{opt}\n")),
                "{}: {opt} is not an option of rqvs switch",
                unit.display()
            );
        }
        assert!(text.contains("Type=notify"), "{}: rqvs tells systemd when it is ready", unit.display());
    }
    // systemd's own check, with the binary under test in place of the installed one.
    if Command::new("systemd-analyze").arg("--version").output().is_err() {
        eprintln!("skipped systemd-analyze verify: not installed");
        return;
    }
    if !Path::new("/lib/systemd/system/ovsdb-server.service").exists() {
        eprintln!("skipped systemd-analyze verify: ovsdb-server.service (openvswitch-switch) not installed");
        return;
    }
    let dir = TempDir::new("units");
    let unit = dir.join("rqvs-vswitchd.service");
    let text = std::fs::read_to_string(&units[0]).unwrap().replace("/usr/local/bin/rqvs", RQVS);
    std::fs::write(&unit, text).unwrap();
    let out = Command::new("systemd-analyze").arg("verify").arg(&unit).output().unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "systemd-analyze verify: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
