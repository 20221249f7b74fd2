//! The pid file as OVS's daemons keep it (`--pidfile`): the process id and a newline, the file
//! held under an exclusive `fcntl` lock for the process's life — `ovs-appctl -t NAME` reads it
//! and checks the lock to find the daemon's `NAME.PID.ctl` socket — and removed at exit.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use crate::Error;

/// A written, locked pid file; removed when dropped.
pub struct Pidfile {
    path: PathBuf,
    _file: File,
}

impl Pidfile {
    /// Writes this process's id to `path`. A pid file another running process holds is an
    /// error naming it; a stale one (its process gone) is replaced.
    pub fn create(path: &Path) -> Result<Pidfile, Error> {
        let e = |x: std::io::Error| Error(format!("pid file {}: {x}", path.display()));
        let mut file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path).map_err(e)?;
        match crate::sys::lock_whole_file(&file) {
            Ok(()) => {}
            Err(x) if x.kind() == ErrorKind::WouldBlock => {
                let other = std::fs::read_to_string(path).unwrap_or_default();
                return Err(Error(format!(
                    "pid file {}: already locked by running process {}",
                    path.display(),
                    other.trim()
                )));
            }
            Err(x) => return Err(e(x)),
        }
        file.set_len(0).map_err(e)?;
        file.write_all(format!("{}\n", std::process::id()).as_bytes()).map_err(e)?;
        file.flush().map_err(e)?;
        Ok(Pidfile { path: path.to_path_buf(), _file: file })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Pidfile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_locked_and_removed() {
        let dir = std::env::temp_dir().join(format!("rqvs-pidfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.pid");
        std::fs::write(&path, "999999999\n").unwrap(); // stale: replaced
        let p = Pidfile::create(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{}\n", std::process::id()));
        // That the lock is held is checked by `ovs-appctl -t ovs-vswitchd`, which refuses an
        // unlocked pid file (crates/cli/tests/appctl.rs).
        drop(p);
        assert!(!path.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
