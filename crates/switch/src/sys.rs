//! The switch's `unsafe`: pinning a thread to a CPU, and the pid file's lock.

/// Pins the calling thread to one CPU. A failure is reported once (by the caller's thread, on
/// stderr) and ignored: the thread runs unpinned.
pub fn pin_to(cpu: usize) {
    if cpu >= libc::CPU_SETSIZE as usize {
        crate::log_warn!("rqvs switch: CPU {cpu} is out of range; the PMD thread runs unpinned");
        return;
    }
    // SAFETY: cpu_set_t is plain data (all zeroes is the empty set); CPU_SET writes inside it
    // (cpu < CPU_SETSIZE, checked above); sched_setaffinity only reads it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        crate::log_warn!(
            "rqvs switch: could not pin a PMD thread to CPU {cpu}: {}; it runs unpinned",
            std::io::Error::last_os_error()
        );
    }
}

/// Takes an exclusive POSIX record lock (`fcntl(F_SETLK, F_WRLCK)`) on the whole of `file`, as
/// OVS's daemons hold their pid files (`ovs-appctl` checks the lock with `F_GETLK`): released
/// when the file is closed or the process ends. `Err` with `WouldBlock` when another process
/// holds it.
pub fn lock_whole_file(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock is plain data (all zeroes: start 0, length 0 = the whole file); fcntl only
    // reads it for F_SETLK; the descriptor is open for as long as `file` is borrowed.
    let rc = unsafe {
        let mut lck: libc::flock = std::mem::zeroed();
        lck.l_type = libc::F_WRLCK as libc::c_short;
        lck.l_whence = libc::SEEK_SET as libc::c_short;
        libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &lck)
    };
    if rc == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EACCES) => Err(std::io::Error::new(std::io::ErrorKind::WouldBlock, e)),
        _ => Err(e),
    }
}
