//! [`OvsdbServer`]: a private `ovsdb-server` on a fresh database (`ovsdb-tool create` from OVS's
//! schema, or another schema a test gives), in a [`TempDir`], run as this process's child (not
//! `--detach`ed: its pid is the child's, stopped by it, never by name), with `ovs-vsctl`
//! pointed at it. No `ovs-vswitchd` runs: the switch under test takes its place.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::TempDir;

/// OVS's schema for the `Open_vSwitch` database (Debian's openvswitch-common).
pub const VSWITCH_SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

pub struct OvsdbServer {
    pub dir: TempDir,
    child: Option<Child>,
}

/// Starts a server on OVS's schema, or returns `None` after printing why it cannot start here —
/// unless `RQVS_REQUIRE_OVS=1`, in which case it panics.
pub fn start_or_skip(tag: &str) -> Option<OvsdbServer> {
    match OvsdbServer::start(tag, Path::new(VSWITCH_SCHEMA)) {
        Ok(s) => Some(s),
        Err(e) => {
            if std::env::var("RQVS_REQUIRE_OVS").as_deref() == Ok("1") {
                panic!("RQVS_REQUIRE_OVS=1 but ovsdb-server could not start: {e}");
            }
            eprintln!("skipped: ovsdb-server could not start ({e}); install openvswitch-switch to run this test");
            None
        }
    }
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

impl OvsdbServer {
    /// Creates `conf.db` from `schema` and starts the server on `punix:DIR/db.sock`.
    pub fn start(tag: &str, schema: &Path) -> Result<OvsdbServer, String> {
        if !schema.exists() {
            return Err(format!("{} not found", schema.display()));
        }
        let mut s = OvsdbServer { dir: TempDir::new(&format!("ovsdb-{tag}")), child: None };
        run(Command::new("ovsdb-tool").arg("create").arg(s.db_file()).arg(schema))?;
        s.spawn()?;
        Ok(s)
    }

    pub fn db_file(&self) -> PathBuf {
        self.dir.join("conf.db")
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.join("db.sock")
    }

    /// `unix:DIR/db.sock`.
    pub fn remote(&self) -> String {
        format!("unix:{}", self.socket().display())
    }

    /// The server's pid while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn spawn(&mut self) -> Result<(), String> {
        let _ = std::fs::remove_file(self.socket());
        let child = Command::new("ovsdb-server")
            .arg(self.db_file())
            .arg(format!("--remote=punix:{}", self.socket().display()))
            .arg(format!("--log-file={}", self.dir.join("ovsdb-server.log").display()))
            .arg(format!("--unixctl={}", self.dir.join("ovsdb-server.ctl").display()))
            .env("OVS_RUNDIR", self.dir.path())
            .env("OVS_DBDIR", self.dir.path())
            .env("OVS_LOGDIR", self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("ovsdb-server: {e}"))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if UnixStream::connect(self.socket()).is_ok() {
                return Ok(());
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                self.child = None;
                let log = std::fs::read_to_string(self.dir.join("ovsdb-server.log")).unwrap_or_default();
                return Err(format!("ovsdb-server exited ({status}): {}", log.trim()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stop();
        Err(format!("ovsdb-server did not listen on {} within 10 s", self.socket().display()))
    }

    /// Stops the server (SIGKILL to the child, then reaped): as abrupt as a crash.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_file(self.socket());
    }

    /// Starts it again on the same database file.
    pub fn restart(&mut self) -> Result<(), String> {
        self.stop();
        self.spawn()
    }

    /// `ovs-vsctl --db=REMOTE --timeout=30 ARGS` (its own files in the test's directory).
    pub fn vsctl(&self, args: &[&str]) -> Result<String, String> {
        run(Command::new("ovs-vsctl")
            .arg(format!("--db={}", self.remote()))
            .arg("--timeout=30")
            .args(args)
            .env("OVS_RUNDIR", self.dir.path())
            .env("OVS_DBDIR", self.dir.path())
            .env("OVS_LOGDIR", self.dir.path()))
    }

    /// `ovsdb-tool transact conf.db JSON` (only while the server is stopped).
    pub fn tool_transact(&self, json: &str) -> Result<String, String> {
        run(Command::new("ovsdb-tool").arg("transact").arg(self.db_file()).arg(json))
    }
}

impl Drop for OvsdbServer {
    fn drop(&mut self) {
        self.stop();
    }
}
