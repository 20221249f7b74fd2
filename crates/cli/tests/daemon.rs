//! Daemon habits (issue 38): writing to a full stderr never panics; `rqvs ctl`'s usage errors
//! exit 2; the switch makes a management socket by default that `rqvs ctl` finds by itself; a
//! stale socket (after `kill -9`) is removed at the next start, a live one or another file is
//! not; log lines carry time and level, go to `--log-file`, and `vlog/set` changes the level.
//!
//! No root needed: the switch runs on its embedded pcap ports with an OpenFlow listener on
//! loopback (which keeps it running); every socket lives in the test's own `RQVS_RUN_DIR`.
//! Processes started here are killed by pid when a test ends.

mod common;
use common::TempDir;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const RQVS: &str = env!("CARGO_BIN_EXE_rqvs");

fn full() -> std::fs::File {
    std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap()
}

#[test]
fn a_full_stderr_never_panics() {
    let cases: [(&[&str], i32); 4] = [
        (&["classify", "--rules", "/nonexistent"], 1),
        (&["ctl", "no-such-command"], 2),
        (&["switch", "--port", "a", "--port", "a"], 2),
        (&["switch", "--port", "no-such-interface-38"], 1),
    ];
    for (args, code) in cases {
        let out = Command::new(RQVS).args(args).stderr(full()).stdout(Stdio::null()).output().unwrap();
        assert_eq!(out.status.code(), Some(code), "rqvs {args:?} 2>/dev/full");
    }
}

fn ctl_in(run: &Path, args: &[&str]) -> Output {
    Command::new(RQVS).arg("ctl").args(args).env("RQVS_RUN_DIR", run).output().unwrap()
}

#[test]
fn ctl_usage_errors_exit_2() {
    let dir = TempDir::new("ctl-usage");
    for (args, what) in [
        (&["frobnicate"][..], "unknown command 'frobnicate'"),
        (&["dump-flows", "in_port=1"], "dump-flows: expected 0 argument(s), got 1"),
        (&["show", "extra"], "show: expected 0"),
        (&["add-flows"], "add-flows: expected 1"),
        (&["dump-rules", "--bogus"], "unknown argument '--bogus'"),
        (&["vlog/set"], "vlog/set: expected 1"),
    ] {
        let out = ctl_in(&dir.join("run"), args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "rqvs ctl {args:?}: {err}");
        assert!(err.starts_with("rqvs: error: ") && err.contains(what), "rqvs ctl {args:?}: {err}");
    }
    // A well-formed command with no switch: not a usage error.
    let out = ctl_in(&dir.join("run"), &["show"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no running rqvs switch"));
}

/// A switch on its embedded ports kept running by an OpenFlow listener on loopback.
struct Sw {
    child: Child,
    err: PathBuf,
}

impl Sw {
    fn start(run: &Path, dir: &TempDir, tag: &str, extra: &[&str]) -> Sw {
        let err = dir.join(format!("{tag}.err"));
        let child = Command::new(RQVS)
            .args(["switch", "--openflow", "ptcp:127.0.0.1:0", "--duration", "60"])
            .args(extra)
            .env("RQVS_RUN_DIR", run)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        let mut sw = Sw { child, err };
        let t0 = Instant::now();
        while !sw.stderr().contains("rqvs switch: ready") {
            assert!(sw.child.try_wait().unwrap().is_none(), "the switch exited: {}", sw.stderr());
            assert!(t0.elapsed() < Duration::from_secs(30), "the switch did not come up: {}", sw.stderr());
            std::thread::sleep(Duration::from_millis(50));
        }
        sw
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }
}

impl Drop for Sw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn timestamped(line: &str, level: &str) -> bool {
    let b = line.as_bytes();
    line.len() > 25
        && b[4] == b'-'
        && b[10] == b'T'
        && &line[19..20] == "."
        && &line[23..25] == "Z "
        && line[25..].starts_with(level)
        && line[..4].bytes().all(|c| c.is_ascii_digit())
}

#[test]
fn default_socket_found_by_ctl_stale_socket_removed_logs_timed() {
    let dir = TempDir::new("daemon");
    let run = dir.join("run");
    let log = dir.join("switch.log");
    let sw = Sw::start(&run, &dir, "first", &["--log-file", log.to_str().unwrap()]);
    let sock = run.join(format!("rqvs-switch.{}.ctl", sw.child.id()));
    assert!(sock.exists(), "the default socket {}", sock.display());
    // Found without --socket.
    let out = ctl_in(&run, &["show"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Once its PMD has ended (the embedded input is done; on a loaded machine that can take a
    // moment), `show` still has its counters, and they add up.
    let t0 = Instant::now();
    loop {
        let out = ctl_in(&run, &["show"]);
        if String::from_utf8_lossy(&out.stdout).contains("every frame accounted for") {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "{out:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Time and level on every log line; the same lines in the log file.
    let ready = sw.stderr().lines().find(|l| l.contains("rqvs switch: ready")).unwrap().to_string();
    assert!(timestamped(&ready, "INFO  rqvs switch: ready"), "{ready}");
    assert!(ready.contains(&sock.display().to_string()), "the ready line names the socket: {ready}");
    assert!(std::fs::read_to_string(&log).unwrap().contains(&ready), "--log-file");
    // vlog/set changes the level, said in the log.
    let out = ctl_in(&run, &["vlog/set", "debug"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&ctl_in(&run, &["vlog/list"]).stdout).trim(), "log level DEBUG");
    assert!(ctl_in(&run, &["vlog/set", "loud"]).status.code() == Some(1), "an unknown level is refused");

    // A second switch: the default is per process; ctl must then be told which.
    let second = Sw::start(&run, &dir, "second", &[]);
    let out = ctl_in(&run, &["show"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("2 rqvs switches are running"), "{out:?}");
    // A live socket named with --ctl is refused.
    let out = Command::new(RQVS)
        .args(["switch", "--ctl", sock.to_str().unwrap(), "--duration", "1"])
        .env("RQVS_RUN_DIR", &run)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("another rqvs switch is listening there"));
    drop(second);

    // kill -9: the socket stays behind, dead.
    let mut sw = sw;
    sw.child.kill().unwrap();
    sw.child.wait().unwrap();
    assert!(sock.exists());
    let out = ctl_in(&run, &["show"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no running rqvs switch"), "{out:?}");
    // A new switch on that path removes it, says so, and serves there.
    let third = Sw::start(&run, &dir, "third", &["--ctl", sock.to_str().unwrap()]);
    assert!(third.stderr().contains("removed a stale socket"), "{}", third.stderr());
    let out = Command::new(RQVS).args(["ctl", "--socket", sock.to_str().unwrap(), "show"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    drop(third);
    // Any other file at the path is the operator's: refused, left alone.
    let file = dir.join("not-a-socket");
    std::fs::write(&file, b"keep me").unwrap();
    let out = Command::new(RQVS).args(["switch", "--ctl", file.to_str().unwrap(), "--duration", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a socket"));
    assert_eq!(std::fs::read(&file).unwrap(), b"keep me");
}
