//! One port, one owner: a switch holds an exclusive lock on each interface it uses, so a second
//! `rqvs switch` on an interface a running one uses is refused with a message naming it (two
//! switches on one interface would each forward every frame: duplicates).
//!
//! The lock is an `flock` (`File::try_lock`) on `/run/rqvs/port-NETNS-IFNAME.lock` — NETNS the
//! inode of the calling thread's network namespace, since two namespaces may each have an
//! interface of the same name — or, where `/run/rqvs` cannot be created (not root), on the same
//! name under the system's temporary directory. The kernel releases the lock when the switch
//! exits, also after `kill -9`: a lock file left behind then is harmless and reused — but, named
//! by a namespace that is gone, it would never be reused: so the first port lock a switch takes
//! sweeps the lock directories of files whose owner is dead (any `port-*.lock` it can lock:
//! removed while locked, as below; [`sweep_dead`]), and a lock found taken by a pid that is
//! dead — such a sweep holding it for a moment — is tried again. A switch that
//! stops removes its lock files (while still holding the lock; a process that opened the file
//! before the removal and locks it afterwards sees that the path no longer names its file and
//! starts over), so test runs over many namespaces do not pile them up. The lock file holds the
//! owner's pid, for the message. Taken in [`crate::Switch::start`] before any port is opened and
//! released when the switch stops.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// A held port lock (released on drop).
#[derive(Debug)]
pub struct PortLock {
    file: File,
    path: PathBuf,
}

impl Drop for PortLock {
    fn drop(&mut self) {
        // Removed while the lock is held: see the module docs for why that is safe. The file
        // closes (and the lock goes) after this, when `file` drops.
        if same_file(&self.file, &self.path) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Does `path` still name the open `file` (same inode on the same device)?
fn same_file(file: &File, path: &std::path::Path) -> bool {
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
        _ => false,
    }
}

/// The directories lock files may live in, in order of preference.
fn lock_dirs() -> [PathBuf; 2] {
    [PathBuf::from("/run/rqvs"), std::env::temp_dir().join("rqvs-locks")]
}

fn file_name(ifname: &str) -> String {
    let ns = std::fs::metadata("/proc/thread-self/ns/net").map(|m| m.ino()).unwrap_or(0);
    format!("port-{ns}-{ifname}.lock")
}

/// The lock file of interface `ifname` in the calling thread's network namespace (the first
/// directory that can hold it), opened.
fn open_lock(ifname: &str) -> Result<(File, PathBuf), String> {
    let mut last = None;
    for dir in lock_dirs() {
        let path = dir.join(file_name(ifname));
        let opened = std::fs::create_dir_all(&dir)
            .and_then(|()| OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path));
        match opened {
            Ok(f) => return Ok((f, path)),
            Err(e) => last = Some(format!("interface {ifname}: cannot open its lock file {}: {e}", path.display())),
        }
    }
    Err(last.unwrap_or_default())
}

/// Removes the `port-*.lock` files in `dir` no live process holds (their owner died, e.g. by
/// `kill -9`): each is locked first and removed while locked (module docs). Returns how many.
pub fn sweep_dead(dir: &std::path::Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with("port-") && name.ends_with(".lock")) {
            continue;
        }
        let path = e.path();
        let Ok(file) = OpenOptions::new().read(true).write(true).open(&path) else { continue };
        // Held: its owner lives. Not held: nobody's — remove it while we hold it.
        if file.try_lock().is_ok() && same_file(&file, &path) && std::fs::remove_file(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Whether process `pid` exists (signal 0: no signal sent, only the check).
fn alive(pid: i32) -> bool {
    // SAFETY: kill(2) with signal 0 sends nothing and touches no memory of ours.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The lock files of dead owners are swept once per process, at its first port lock.
static SWEPT: std::sync::Once = std::sync::Once::new();

/// Takes the lock of interface `ifname`; the error says who holds it.
pub fn acquire(ifname: &str) -> Result<PortLock, String> {
    SWEPT.call_once(|| {
        for dir in lock_dirs() {
            sweep_dead(&dir);
        }
    });
    // A lock taken on a file its owner removed meanwhile is no lock: start over (bounded: each
    // retry means another switch stopped in between, or a sweep held a dead owner's file).
    for _ in 0..16 {
        let (file, path) = open_lock(ifname)?;
        if let Some(lock) = try_acquire(ifname, file, path)? {
            return Ok(lock);
        }
    }
    Err(format!("interface {ifname}: its lock file keeps being replaced by other switches starting and stopping"))
}

/// One attempt: `Ok(None)` when the file was removed by its previous owner before we locked it.
fn try_acquire(ifname: &str, mut file: File, path: PathBuf) -> Result<Option<PortLock>, String> {
    match file.try_lock() {
        Ok(()) if !same_file(&file, &path) => Ok(None),
        Ok(()) => {
            // The pid, for a second switch's message; failing to write it only makes that vaguer.
            let _ = file.set_len(0).and_then(|()| writeln!(file, "{}", std::process::id()));
            Ok(Some(PortLock { file, path }))
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut pid = String::new();
            let _ = file.rewind().and_then(|()| file.read_to_string(&mut pid));
            let pid = pid.trim();
            // No pid yet, or a dead one: the holder is another switch's sweep, about to remove
            // the file, or a switch between its lock and writing its pid: try again shortly.
            if pid.is_empty() || pid.parse::<i32>().is_ok_and(|p| p > 0 && !alive(p)) || !same_file(&file, &path) {
                std::thread::sleep(std::time::Duration::from_millis(5));
                return Ok(None);
            }
            let who = if pid.is_empty() { "another process".to_string() } else { format!("pid {pid}") };
            Err(format!(
                "interface {ifname} is in use by another rqvs switch ({who}; lock {}): one port, one owner",
                path.display()
            ))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(format!("interface {ifname}: cannot lock {}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_on_a_removed_file_is_retaken_on_the_new_one() {
        let name = format!("rqvs-test-removed-{}", std::process::id());
        let first = acquire(&name).unwrap();
        // A second switch opened the file while the first held it...
        let (stale, path) = open_lock(&name).unwrap();
        // ...the first stops (removing it), a third starts on a new file.
        drop(first);
        let third = acquire(&name).unwrap();
        // The second's lock on the old file must not count: it starts over and finds the third.
        assert!(try_acquire(&name, stale, path).unwrap().is_none());
        let e = acquire(&name).unwrap_err();
        assert!(e.contains("in use by another rqvs switch"), "{e}");
        drop(third);
    }

    #[test]
    fn lock_files_of_dead_owners_are_swept_and_held_ones_kept() {
        let dir = std::env::temp_dir().join(format!("rqvs-sweep-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // What `kill -9` leaves: a file with a pid in it and no lock on it.
        let dead = dir.join("port-4026532999-p1.lock");
        std::fs::write(&dead, "999999999\n").unwrap();
        // A live owner's: locked (flock conflicts between open files, also in one process).
        let held_path = dir.join("port-4026532999-p2.lock");
        let held = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&held_path).unwrap();
        held.try_lock().unwrap();
        // Not a lock file: left alone.
        let other = dir.join("notes.txt");
        std::fs::write(&other, "x").unwrap();
        assert_eq!(sweep_dead(&dir), 1);
        assert!(!dead.exists(), "the dead owner's lock file is removed");
        assert!(held_path.exists(), "a held lock file is kept");
        assert!(other.exists());
        drop(held);
        assert_eq!(sweep_dead(&dir), 1, "released: swept too");
        assert!(!held_path.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_lock_held_under_a_dead_pid_is_retried_not_refused() {
        let name = format!("rqvs-test-deadpid-{}", std::process::id());
        let (mut sweeper, path) = open_lock(&name).unwrap();
        sweeper.try_lock().unwrap();
        // The file says a dead pid holds it (a sweep holding a dead owner's file), then the
        // sweep removes it and lets go.
        writeln!(sweeper, "999999999").unwrap();
        let p = path.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            std::fs::remove_file(&p).unwrap();
            drop(sweeper);
        });
        let lock = acquire(&name).unwrap();
        t.join().unwrap();
        assert!(same_file(&lock.file, &path));
        drop(lock);
    }

    #[test]
    fn a_second_lock_on_an_interface_is_refused_and_freed_on_drop() {
        let name = format!("rqvs-test-{}", std::process::id());
        let first = acquire(&name).unwrap();
        let e = acquire(&name).unwrap_err();
        assert!(e.contains("in use by another rqvs switch"), "{e}");
        assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
        let path = first.path.clone();
        assert!(path.exists());
        drop(first);
        assert!(!path.exists(), "a released lock leaves no file behind");
        let again = acquire(&name).unwrap();
        drop(again);
        assert!(!path.exists());
    }
}
