//! What makes `rqvs switch` manageable as `ovs-vswitchd` is: the unixctl socket `ovs-appctl`
//! talks to (`--unixctl`, `rqvs_switch::unixctl`), the pid file it finds that socket by
//! (`--pidfile`), `--detach` (the command returns once the switch in the background is ready),
//! readiness told to systemd (`rqvs_switch::notify`, `Type=notify` units) and SIGHUP reopening
//! `--log-file` after a rotation.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rqvs_switch::notify;

use rqvs_switch::pidfile::Pidfile;
use rqvs_switch::unixctl::{self, UnixctlServer};
use rqvs_switch::Control;

use crate::Failure;

#[derive(clap::Args, Debug, Default)]
pub struct DaemonArgs {
    /// Serve OVS's unixctl protocol for `ovs-appctl -t PATH` here; without a value at
    /// `$OVS_RUNDIR/ovs-vswitchd.PID.ctl` (default `/run/openvswitch/`), where `ovs-appctl -t
    /// ovs-vswitchd` looks (with --pidfile). With it the switch runs until `exit`, a signal or
    /// --duration.
    #[arg(long, value_name = "PATH")]
    pub unixctl: Option<Option<PathBuf>>,
    /// Write the process id here; without a value to `$OVS_RUNDIR/ovs-vswitchd.pid`. Removed at
    /// exit; held under a lock as OVS's daemons hold theirs. A pid file a running process holds is an
    /// error.
    #[arg(long, value_name = "PATH")]
    pub pidfile: Option<Option<PathBuf>>,
    /// The bridge name `ovs-appctl`'s bridge arguments (`ofproto/trace`, `fdb/show`) must give.
    #[arg(long, value_name = "NAME", default_value = "br0")]
    pub bridge: String,
    /// Run in the background, as OVS's daemons do: the command returns (exit 0) once the switch
    /// is ready (ports open; with --ovsdb, the database's configuration applied), or fails with
    /// the switch's own error if it stops before. The switch then has no terminal: use
    /// --log-file (and --pidfile/--unixctl to manage it).
    #[arg(long)]
    pub detach: bool,
    /// Accepted for OVS's command lines (ovs-ctl passes it): rqvs never changes its working
    /// directory, detached or not.
    #[arg(long)]
    pub no_chdir: bool,
}

/// `--detach`: starts the same command line without `--detach` as a child in its own process
/// group (stdin and stdout on /dev/null), relays its stderr until it is ready, and returns when
/// it says `READY=1` through the notify socket it is given (`rqvs_switch::notify`, the
/// protocol systemd uses; an outer `NOTIFY_SOCKET` is told by the child itself).
/// An error when the child exits first, with its status (its own error was relayed).
pub fn detach() -> Result<(), Failure> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let nonce = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    let name = format!("rqvs-detach-{}-{nonce}", std::process::id());
    let addr = SocketAddr::from_abstract_name(name.as_bytes())
        .map_err(|e| Failure(format!("--detach: the notify socket: {e}")))?;
    let sock = UnixDatagram::bind_addr(&addr).map_err(|e| Failure(format!("--detach: the notify socket: {e}")))?;
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| Failure(format!("--detach: the notify socket: {e}")))?;
    let exe = std::env::current_exe().map_err(|e| Failure(format!("--detach: this program's path: {e}")))?;
    let args = std::env::args_os().skip(1).filter(|a| a != "--detach");
    let mut child = Command::new(exe)
        .args(args)
        .env(notify::DETACH_SOCKET, format!("@{name}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| Failure(format!("--detach: starting the switch: {e}")))?;
    // Until the parent exits its stderr is the child's; after that the child's lines go to its
    // --log-file only (writes to the closed pipe fail quietly: rqvs_switch::diag).
    let relay = child.stderr.take().map(|err| {
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                rqvs_switch::diag!("{line}");
            }
        })
    });
    let mut buf = [0u8; 4096];
    loop {
        if let Ok(n) = sock.recv(&mut buf) {
            let msg = String::from_utf8_lossy(&buf[..n]);
            if msg.lines().any(|l| l == "READY=1") {
                return Ok(());
            }
        }
        match child.try_wait() {
            Ok(None) => {}
            Ok(Some(status)) => {
                if let Some(r) = relay {
                    let _ = r.join();
                }
                // Its own error was relayed: exit as it did (2 for a usage error).
                rqvs_switch::diag!("rqvs: error: --detach: the switch exited before it was ready ({status})");
                std::process::exit(status.code().unwrap_or(1));
            }
            Err(e) => return Err(Failure(format!("--detach: waiting for the switch: {e}"))),
        }
    }
}

/// SIGHUP: with a log file it is closed and opened again (after logrotate moved it); without
/// one SIGHUP stops the switch as SIGTERM does (`stop`), as OVS's daemons treat it.
pub fn on_sighup(log_file: bool, stop: &Arc<AtomicBool>) -> Result<(), Failure> {
    let err = |e: std::io::Error| Failure(format!("installing a signal handler: {e}"));
    if !log_file {
        signal_hook::flag::register(libc::SIGHUP, Arc::clone(stop)).map_err(err)?;
        return Ok(());
    }
    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(libc::SIGHUP, Arc::clone(&hup)).map_err(err)?;
    std::thread::Builder::new()
        .name("sighup".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_millis(100));
            if hup.swap(false, Ordering::Relaxed) {
                match rqvs_switch::diag::reopen_log_file() {
                    Ok(Some(p)) => rqvs_switch::log_info!("rqvs switch: log file {} reopened (SIGHUP)", p.display()),
                    Ok(None) => {}
                    Err(e) => rqvs_switch::log_error!("rqvs switch: reopening the log file (SIGHUP): {e}"),
                }
            }
        })
        .map_err(|e| Failure(format!("starting the SIGHUP thread: {e}")))?;
    Ok(())
}

/// The pid file and the bound unixctl socket, before the switch starts.
pub struct Daemon {
    pidfile: Option<Pidfile>,
    unixctl: Option<UnixctlServer>,
    thread: Option<JoinHandle<()>>,
}

impl DaemonArgs {
    /// Writes the pid file and binds the socket (errors before any port is opened).
    pub fn bind(&self) -> Result<Daemon, Failure> {
        let pid = std::process::id();
        let mut d = Daemon { pidfile: None, unixctl: None, thread: None };
        if let Some(p) = &self.pidfile {
            let path = p.clone().unwrap_or_else(|| unixctl::rundir().join("ovs-vswitchd.pid"));
            d.pidfile = Some(Pidfile::create(&path)?);
        }
        if let Some(p) = &self.unixctl {
            let path = p.clone().unwrap_or_else(|| unixctl::default_path(pid));
            d.unixctl = Some(UnixctlServer::bind(&path, &self.bridge)?);
        }
        Ok(d)
    }
}

impl Daemon {
    /// Whether a unixctl socket is served (the switch then runs until told to stop).
    pub fn serves(&self) -> bool {
        self.unixctl.is_some() || self.thread.is_some()
    }

    /// What the ready line says about it.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        if let Some(u) = &self.unixctl {
            s += &format!("; unixctl {}", u.path().display());
        }
        if let Some(p) = &self.pidfile {
            s += &format!("; pid file {}", p.path().display());
        }
        s
    }

    /// The bound unixctl socket, for a caller that serves it itself (`--ovsdb`).
    pub fn take_unixctl(&mut self) -> Option<UnixctlServer> {
        self.unixctl.take()
    }

    /// Serves the socket on its own thread until the switch is asked to stop.
    pub fn serve(&mut self, control: &Arc<Control>) -> Result<(), Failure> {
        if let Some(server) = self.unixctl.take() {
            let c = Arc::clone(control);
            let t = std::thread::Builder::new()
                .name("unixctl".into())
                .spawn(move || server.serve(&c))
                .map_err(|e| Failure(format!("starting the unixctl thread: {e}")))?;
            self.thread = Some(t);
        }
        Ok(())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // The serving thread returns once the switch is asked to stop (the caller did).
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // The pid file goes last (its Drop removes it).
        self.pidfile = None;
    }
}
