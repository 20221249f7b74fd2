//! What makes `rqvs switch` manageable as `ovs-vswitchd` is: the unixctl socket `ovs-appctl`
//! talks to (`--unixctl`, `rqvs_switch::unixctl`) and the pid file it finds that socket by
//! (`--pidfile`).

use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

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
