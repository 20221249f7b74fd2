//! The switch's one `unsafe`: pinning a thread to a CPU.

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
