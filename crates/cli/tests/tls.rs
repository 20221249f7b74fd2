//! The OpenFlow channel over TLS with Open vSwitch's own tools: certificates made by `ovs-pki`
//! (in a temporary directory), `ovs-ofctl ... ssl:` against `rqvs switch --openflow pssl:`
//! (add-flow and dump-flows work with the right CA; with the wrong CA on either side nothing
//! connects and the table is unchanged; a plain TCP client gets nothing), and
//! `rqvs switch --controller ssl:` against `ovs-testcontroller pssl:` (the controller's
//! table-miss flow arrives with the right CA, never with the wrong one); `--ssl-protocols` and
//! `--ssl-ciphers` against `ovs-ofctl`'s (a common version and suite connects, none does not);
//! `--bootstrap-ca-cert` against `ovs-testcontroller --peer-ca-cert` (the controller's CA saved
//! on first contact, the switch reconnecting and then checking the controller with it; a
//! controller that sends no CA teaches nothing; a saved CA is one like `--ca-cert`'s).
//!
//! Loopback only, on the embedded workload's pcap ports: no root needed. Skipped (with the
//! reason printed) when `ovs-pki`, `ovs-ofctl` or `ovs-testcontroller` is missing, a failure
//! with `RQVS_REQUIRE_OVS=1`. Processes started here are killed by pid when a test ends.

mod common;
use common::{ctl, TempDir};

use std::path::Path;
use std::process::{Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

const RQVS: &str = env!("CARGO_BIN_EXE_rqvs");

/// A process started here: its stderr collected; killed (by pid) when dropped.
use rqvs_testkit::proc::Logged as Proc;

/// SIGTERM (by pid) and the exit status.
fn terminate(p: &mut Proc) -> ExitStatus {
    let pid = libc::pid_t::try_from(p.child.id()).unwrap();
    // SAFETY: kill(2) has no memory effects; the pid is our child's, not yet reaped.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let t0 = Instant::now();
    loop {
        if let Some(s) = p.child.try_wait().unwrap() {
            return s;
        }
        assert!(t0.elapsed() < Duration::from_secs(15), "did not stop: {}", p.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `tool --version` runs; else skipped (a failure with `RQVS_REQUIRE_OVS=1`).
fn have(tool: &str) -> bool {
    let ok = Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("RQVS_REQUIRE_OVS").as_deref() != Ok("1"),
            "{tool} is required (RQVS_REQUIRE_OVS=1): apt-get install openvswitch-switch openvswitch-testcontroller"
        );
        eprintln!("skipped: {tool} is not installed");
    }
    ok
}

use rqvs_testkit::pki::Creds;

/// A PKI made by `ovs-pki` in `dir/NAME`: a switch's and a controller's credentials.
fn pki(dir: &TempDir, name: &str) -> (Creds, Creds) {
    rqvs_testkit::pki::pki(dir.path(), name, "ctl")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `rqvs switch` with the switch's credentials and `args`.
fn switch(c: &Creds, ctl_sock: &Path, args: &[&str]) -> Proc {
    let mut cmd = Command::new(RQVS);
    cmd.args(["switch", "--ctl", s(ctl_sock), "--private-key", s(&c.key), "--certificate", s(&c.cert)]);
    cmd.args(["--ca-cert", s(&c.peer_ca)]).args(args);
    Proc::start(cmd)
}

/// `ovs-ofctl -O OpenFlow13` over `target` with `c`'s credentials.
fn ofctl(c: &Creds, target: &str, args: &[&str]) -> Output {
    ofctl_with(c, &[], target, args)
}

/// [`ofctl`] with more options (`--ssl-protocols=...`).
fn ofctl_with(c: &Creds, options: &[&str], target: &str, args: &[&str]) -> Output {
    let key = format!("--private-key={}", s(&c.key));
    let cert = format!("--certificate={}", s(&c.cert));
    let ca = format!("--ca-cert={}", s(&c.peer_ca));
    // ovs-ofctl takes the target after the command.
    let (command, rest) = args.split_first().unwrap();
    let mut cmd = Command::new("ovs-ofctl");
    cmd.args(["-O", "OpenFlow13", "--timeout=5", &key, &cert, &ca]).args(options).args([command, target]).args(rest);
    cmd.stdin(Stdio::null()).output().unwrap()
}

/// The listening port the ready line names (`OpenFlow pssl:127.0.0.1:PORT`).
fn pssl_port(ready: &str) -> u16 {
    let rest = ready.split("OpenFlow pssl:127.0.0.1:").nth(1).unwrap_or_else(|| panic!("no pssl in {ready}"));
    rest.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

#[test]
fn ovs_ofctl_over_ssl_needs_the_right_ca() {
    if !(have("ovs-pki") && have("ovs-ofctl")) {
        return;
    }
    let dir = TempDir::new("cli-tls-ofctl");
    let (sw, ctl_creds) = pki(&dir, "good");
    let (_, stranger) = pki(&dir, "other");
    let sock = dir.join("sw.ctl");
    let mut p = switch(&sw, &sock, &["--openflow", "pssl:0:127.0.0.1"]);
    let ready = p.wait_for("rqvs switch: ready", Duration::from_secs(20));
    let target = format!("ssl:127.0.0.1:{}", pssl_port(&ready));
    let flow = "priority=40000,udp,tp_dst=4242,actions=drop";

    let add = ofctl(&ctl_creds, &target, &["add-flow", flow]);
    assert!(add.status.success(), "add-flow over ssl: {}\n{}", String::from_utf8_lossy(&add.stderr), p.stderr());
    let dump = ofctl(&ctl_creds, &target, &["dump-flows", "udp,tp_dst=4242"]);
    let text = String::from_utf8_lossy(&dump.stdout).into_owned();
    assert!(dump.status.success(), "dump-flows over ssl: {}", String::from_utf8_lossy(&dump.stderr));
    assert!(text.contains("priority=40000,udp,tp_dst=4242 actions=drop"), "dump-flows: {text}");
    let rules_before = ctl(&sock, &["dump-rules"]);
    assert!(rules_before.contains("tp_dst=4242"), "{rules_before}");

    // The client trusts another CA: it refuses the switch's certificate.
    let wrong_client_ca = Creds { peer_ca: stranger.peer_ca.clone(), ..clone(&ctl_creds) };
    let r = ofctl(&wrong_client_ca, &target, &["add-flow", "priority=40001,udp,tp_dst=4343,actions=drop"]);
    assert!(!r.status.success(), "a client with the wrong CA connected: {}", String::from_utf8_lossy(&r.stdout));
    // The client's certificate is another CA's: the switch refuses it, and says why.
    let stranger_cert = Creds { peer_ca: ctl_creds.peer_ca.clone(), ..clone(&stranger) };
    let r = ofctl(&stranger_cert, &target, &["add-flow", "priority=40002,udp,tp_dst=4444,actions=drop"]);
    assert!(!r.status.success(), "a client the switch's CA did not sign connected");
    p.wait_for("TLS: invalid peer certificate", Duration::from_secs(5));
    // Plain TCP to a TLS listener: no OpenFlow session.
    let plain = Command::new("ovs-ofctl")
        .args(["-O", "OpenFlow13", "--timeout=3", "add-flow", &target.replace("ssl:", "tcp:")])
        .arg("priority=40003,udp,tp_dst=4545,actions=drop")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!plain.status.success(), "plain TCP reached a pssl listener");
    assert_eq!(ctl(&sock, &["dump-rules"]), rules_before, "a refused client changed the table");

    let status = terminate(&mut p);
    assert!(status.success(), "exit {status}: {}", p.stderr());
    assert!(!p.stderr().contains("panicked"), "{}", p.stderr());
}

fn clone(c: &Creds) -> Creds {
    Creds { key: c.key.clone(), cert: c.cert.clone(), peer_ca: c.peer_ca.clone() }
}

/// A free TCP port on loopback (bound, then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn testcontroller(dir: &TempDir, c: &Creds, port: u16, tag: &str) -> Proc {
    let mut cmd = Command::new("ovs-testcontroller");
    cmd.arg(format!("pssl:{port}:127.0.0.1"));
    cmd.args(["-p", s(&c.key), "-c", s(&c.cert), "-C", s(&c.peer_ca)]);
    cmd.arg(format!("--unixctl={}", dir.join(format!("{tag}.ctl")).display()));
    cmd.arg(format!("--log-file={}", dir.join(format!("{tag}.log")).display()));
    cmd.arg("-vconsole:off");
    Proc::start(cmd)
}

#[test]
fn controller_over_ssl_needs_the_right_ca() {
    if !(have("ovs-pki") && have("ovs-testcontroller")) {
        return;
    }
    let dir = TempDir::new("cli-tls-controller");
    let (sw, ctl_creds) = pki(&dir, "good");
    let (_, stranger) = pki(&dir, "other");
    // The right CAs: the controller's table-miss flow arrives.
    let port = free_port();
    let _tc = testcontroller(&dir, &ctl_creds, port, "tc");
    let sock = dir.join("sw.ctl");
    let target = format!("ssl:127.0.0.1:{port}");
    let mut p = switch(&sw, &sock, &["--controller", &target, "--fail-mode", "secure"]);
    p.wait_for("rqvs switch: ready", Duration::from_secs(20));
    let t0 = Instant::now();
    while !ctl(&sock, &["dump-rules"]).to_lowercase().contains("actions=controller") {
        assert!(t0.elapsed() < Duration::from_secs(15), "no table-miss flow from the controller: {}", p.stderr());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(terminate(&mut p).success(), "{}", p.stderr());

    // A controller whose certificate another CA signed: refused by the switch, no flow.
    let port = free_port();
    let _tc = testcontroller(&dir, &Creds { peer_ca: ctl_creds.peer_ca.clone(), ..clone(&stranger) }, port, "tc2");
    let sock = dir.join("sw2.ctl");
    let target = format!("ssl:127.0.0.1:{port}");
    let mut p = switch(&sw, &sock, &["--controller", &target, "--fail-mode", "secure"]);
    p.wait_for("rqvs switch: ready", Duration::from_secs(20));
    p.wait_for("TLS: invalid peer certificate", Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !ctl(&sock, &["dump-rules"]).to_lowercase().contains("actions=controller"),
        "a flow from an untrusted controller"
    );
    assert!(terminate(&mut p).success(), "{}", p.stderr());
}

#[test]
fn tls_options_are_checked() {
    let dir = TempDir::new("cli-tls-usage");
    let run = |args: &[&str]| {
        let out = Command::new(RQVS).arg("switch").args(args).stdin(Stdio::null()).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = run(&["--openflow", "ptcp:0", "--ca-cert", "/x", "--duration", "1"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--ca-cert: a TLS setting; used only with --openflow pssl:"), "{err}");
    let (code, err) = run(&["--openflow", "pssl:0", "--duration", "1"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("needs --private-key"), "{err}");
    let missing = dir.join("missing.pem");
    let (code, err) =
        run(&["--openflow", "pssl:0", "--private-key", s(&missing), "--certificate", "/x", "--ca-cert", "/y"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&format!("--private-key {}", missing.display())), "{err}");
    let (code, err) = run(&["--openflow", "pssl:0", "--ssl-protocols", "TLSv1.1", "--ca-cert", "/y"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--ssl-protocols 'TLSv1.1': TLSv1.1: rustls does not offer it"), "{err}");
    let (code, err) = run(&["--openflow", "pssl:0", "--ssl-ciphers", "RC4-MD5", "--ca-cert", "/y"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("RC4-MD5: unknown cipher"), "{err}");
    let (code, err) = run(&["--openflow", "pssl:0", "--bootstrap-ca-cert", "/y", "--ca-cert", "/x"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--bootstrap-ca-cert: names the CA, as --ca-cert does"), "{err}");
    let (code, err) = run(&["--openflow", "ptcp:0", "--bootstrap-ca-cert", "/y"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--bootstrap-ca-cert: a TLS setting"), "{err}");
    assert!(!err.contains("panicked"));
}

#[test]
fn ssl_protocols_and_ciphers_must_meet_the_peer() {
    if !(have("ovs-pki") && have("ovs-ofctl")) {
        return;
    }
    let dir = TempDir::new("cli-tls-suites");
    let (sw, ctl_creds) = pki(&dir, "good");
    let add = |p: &mut Proc, options: &[&str], tp: u16| {
        let ready = p.wait_for("rqvs switch: ready", Duration::from_secs(20));
        let target = format!("ssl:127.0.0.1:{}", pssl_port(&ready));
        let flow = format!("priority=40000,udp,tp_dst={tp},actions=drop");
        ofctl_with(&ctl_creds, options, &target, &["add-flow", &flow]).status.success()
    };
    // TLS 1.3 only: an ovs-ofctl held to TLS 1.2 cannot connect; one left to its default can
    // (OVS 3.1's OpenSSL offers TLS 1.3 unless told otherwise).
    let sock = dir.join("v13.ctl");
    let mut p = switch(&sw, &sock, &["--openflow", "pssl:0:127.0.0.1", "--ssl-protocols", "TLSv1.3"]);
    assert!(!add(&mut p, &["--ssl-protocols=TLSv1.2"], 5001), "TLS 1.2 reached a TLS 1.3-only switch");
    assert!(!ctl(&sock, &["dump-rules"]).contains("tp_dst=5001"));
    assert!(terminate(&mut p).success(), "{}", p.stderr());
    // TLS 1.2 with one suite: a client offering only another suite fails; one offering it works.
    let sock = dir.join("v12.ctl");
    let mut p = switch(
        &sw,
        &sock,
        &[
            "--openflow",
            "pssl:0:127.0.0.1",
            "--ssl-protocols",
            "TLSv1.2",
            "--ssl-ciphers",
            "ECDHE-RSA-AES256-GCM-SHA384",
        ],
    );
    let other = ["--ssl-protocols=TLSv1.2", "--ssl-ciphers=ECDHE-RSA-AES128-GCM-SHA256"];
    assert!(!add(&mut p, &other, 5002), "a client without the switch's suite connected");
    let same = ["--ssl-protocols=TLSv1.2", "--ssl-ciphers=ECDHE-RSA-AES256-GCM-SHA384"];
    assert!(add(&mut p, &same, 5003), "a TLS 1.2 client with the switch's suite: {}", p.stderr());
    let rules = ctl(&sock, &["dump-rules"]);
    assert!(rules.contains("tp_dst=5003") && !rules.contains("tp_dst=5002"), "{rules}");
    assert!(terminate(&mut p).success(), "{}", p.stderr());
}

/// `ovs-testcontroller pssl:` sending its CA certificate after its own (`--peer-ca-cert`), or not.
fn teaching_controller(dir: &TempDir, c: &Creds, own_ca: Option<&Path>, port: u16, tag: &str) -> Proc {
    let mut cmd = Command::new("ovs-testcontroller");
    cmd.arg(format!("pssl:{port}:127.0.0.1"));
    cmd.args(["-p", s(&c.key), "-c", s(&c.cert), "-C", s(&c.peer_ca)]);
    if let Some(ca) = own_ca {
        cmd.arg(format!("--peer-ca-cert={}", s(ca)));
    }
    cmd.arg(format!("--unixctl={}", dir.join(format!("{tag}.ctl")).display()));
    cmd.arg(format!("--log-file={}", dir.join(format!("{tag}.log")).display()));
    cmd.arg("-vconsole:off");
    Proc::start(cmd)
}

/// `rqvs switch --controller TARGET --bootstrap-ca-cert CA` with the switch's key and certificate.
fn bootstrapping_switch(c: &Creds, ctl_sock: &Path, target: &str, ca: &Path) -> Proc {
    let mut cmd = Command::new(RQVS);
    cmd.args(["switch", "--ctl", s(ctl_sock), "--private-key", s(&c.key), "--certificate", s(&c.cert)]);
    cmd.args(["--bootstrap-ca-cert", s(ca), "--controller", target, "--fail-mode", "secure"]);
    Proc::start(cmd)
}

/// The base64 bodies of a PEM file's certificates (each unwrapped; text around them ignored).
fn ders(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = Vec::new();
    let mut body: Option<String> = None;
    for line in text.lines().map(str::trim) {
        match (&mut body, line) {
            (None, "-----BEGIN CERTIFICATE-----") => body = Some(String::new()),
            (Some(b), "-----END CERTIFICATE-----") => {
                out.push(std::mem::take(b));
                body = None;
            }
            (Some(b), l) => b.push_str(l),
            (None, _) => {}
        }
    }
    assert!(!out.is_empty(), "no certificate in {}", path.display());
    out
}

fn has_controller_flow(sock: &Path) -> bool {
    ctl(sock, &["dump-rules"]).to_lowercase().contains("actions=controller")
}

#[test]
fn bootstrap_ca_cert_trusts_the_first_controller_and_then_checks_it() {
    if !(have("ovs-pki") && have("ovs-testcontroller")) {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("cli-tls-bootstrap");
    let (sw, ctl_creds) = pki(&dir, "good");
    let (_, stranger) = pki(&dir, "other");
    let controller_ca = dir.join("good/pki/controllerca/cacert.pem");
    let saved = dir.join("bootstrapped-ca.pem");

    // A controller that sends no CA certificate: nothing is learned, no flow arrives.
    let port = free_port();
    let _tc = teaching_controller(&dir, &ctl_creds, None, port, "mute");
    let sock = dir.join("sw0.ctl");
    let mut p = bootstrapping_switch(&sw, &sock, &format!("ssl:127.0.0.1:{port}"), &saved);
    p.wait_for("rqvs switch: ready", Duration::from_secs(20));
    p.wait_for("the controller sends no CA certificate", Duration::from_secs(10));
    assert!(!saved.exists(), "a CA saved from a controller that sent none");
    assert!(!has_controller_flow(&sock), "a flow from an unchecked controller");
    assert!(terminate(&mut p).success(), "{}", p.stderr());

    // One that sends it: saved (read-only, exactly the controller's CA), the switch reconnects
    // and then takes the controller's table-miss flow.
    let port = free_port();
    let _tc = teaching_controller(&dir, &ctl_creds, Some(&controller_ca), port, "teach");
    let sock = dir.join("sw1.ctl");
    let mut p = bootstrapping_switch(&sw, &sock, &format!("ssl:127.0.0.1:{port}"), &saved);
    p.wait_for("rqvs switch: ready", Duration::from_secs(20));
    let log = p.wait_for("saved the controller's CA certificate", Duration::from_secs(10));
    assert!(log.contains(s(&saved)), "{log}");
    assert_eq!(ders(&saved), ders(&controller_ca), "the saved CA is the controller's");
    assert_eq!(std::fs::metadata(&saved).unwrap().permissions().mode() & 0o777, 0o444);
    let t0 = Instant::now();
    while !has_controller_flow(&sock) {
        assert!(t0.elapsed() < Duration::from_secs(15), "no flow after bootstrapping: {}", p.stderr());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(terminate(&mut p).success(), "{}", p.stderr());

    // The saved CA is a CA like --ca-cert's: a controller another CA signed is refused, even
    // one sending its own CA (nothing is learned twice).
    let stranger_ca = dir.join("other/pki/controllerca/cacert.pem");
    let port = free_port();
    let _tc = teaching_controller(
        &dir,
        &Creds { peer_ca: ctl_creds.peer_ca.clone(), ..clone(&stranger) },
        Some(&stranger_ca),
        port,
        "stranger",
    );
    let sock = dir.join("sw2.ctl");
    let mut p = bootstrapping_switch(&sw, &sock, &format!("ssl:127.0.0.1:{port}"), &saved);
    p.wait_for("rqvs switch: ready", Duration::from_secs(20));
    p.wait_for("TLS: invalid peer certificate", Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(500));
    assert!(!has_controller_flow(&sock), "a flow from a controller the saved CA did not sign");
    assert_eq!(ders(&saved), ders(&controller_ca), "the saved CA was not replaced");
    assert!(terminate(&mut p).success(), "{}", p.stderr());
}
