//! Errors of opening a port: one line each, naming the port and what to do about it. Once a port
//! is open nothing returns an error — failures on the packet path are counted and reported as
//! events (see [`crate::stats`]).

use std::fmt;
use std::io;

/// Why a port could not be opened.
#[derive(Debug)]
pub enum PortError {
    /// A `--port` argument that does not parse.
    Spec(String),
    /// No interface of that name in this network namespace.
    NoSuchInterface { port: String },
    /// The kernel lacks what the port type needs (AF_XDP sockets, bpf links, a queue).
    Unsupported { port: String, what: String },
    /// Something else holds the interface or queue (another XDP program, another XDP socket).
    Busy { port: String, what: String },
    /// Raw sockets, BPF and promiscuous mode need root (CAP_NET_RAW, CAP_NET_ADMIN, CAP_BPF).
    Permission { port: String, what: String },
    /// Any other failed system call.
    Os { port: String, op: String, source: io::Error },
    /// A capture file that cannot be read or written.
    Pcap { path: String, message: String },
}

impl PortError {
    /// Classifies a failed system call of operation `op` on `port`.
    pub(crate) fn os(port: &str, op: &str, e: io::Error) -> PortError {
        let port = port.to_string();
        match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => PortError::Permission { port, what: format!("{op}: {e}") },
            Some(libc::EBUSY) => PortError::Busy { port, what: format!("{op}: {e}") },
            Some(libc::EAFNOSUPPORT) | Some(libc::EPROTONOSUPPORT) | Some(libc::ENOPROTOOPT) | Some(libc::ENOSYS) => {
                PortError::Unsupported { port, what: format!("{op}: {e}") }
            }
            Some(libc::ENODEV) | Some(libc::ENXIO) => PortError::NoSuchInterface { port },
            _ => PortError::Os { port, op: op.to_string(), source: e },
        }
    }

    /// A failed `socket(AF_PACKET, ...)` on `port` (its packet sockets, or the control socket
    /// every interface port opens): a kernel without AF_PACKET is named as such, like one
    /// without AF_XDP; anything else is classified by [`PortError::os`].
    pub(crate) fn packet_socket(port: &str, e: io::Error) -> PortError {
        if e.raw_os_error() == Some(libc::EAFNOSUPPORT) {
            PortError::Unsupported {
                port: port.to_string(),
                what: "AF_PACKET sockets (the kernel is built without CONFIG_PACKET)".into(),
            }
        } else {
            PortError::os(port, "packet socket", e)
        }
    }
}

impl fmt::Display for PortError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortError::Spec(msg) => write!(f, "{msg}"),
            PortError::NoSuchInterface { port } => {
                write!(f, "port {port}: no such interface in this network namespace")
            }
            PortError::Unsupported { port, what } => write!(f, "port {port}: not supported by this kernel: {what}"),
            PortError::Busy { port, what } => write!(f, "port {port}: busy: {what}"),
            PortError::Permission { port, what } => {
                write!(
                    f,
                    "port {port}: permission denied (run as root or with CAP_NET_RAW, CAP_NET_ADMIN, CAP_BPF): {what}"
                )
            }
            PortError::Os { port, op, source } => write!(f, "port {port}: {op}: {source}"),
            PortError::Pcap { path, message } => write!(f, "{path}: {message}"),
        }
    }
}

impl std::error::Error for PortError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PortError::Os { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_without_af_packet_is_named() {
        let e = PortError::packet_socket("p1", io::Error::from_raw_os_error(libc::EAFNOSUPPORT));
        assert!(matches!(e, PortError::Unsupported { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            "port p1: not supported by this kernel: AF_PACKET sockets (the kernel is built without CONFIG_PACKET)"
        );
        let e = PortError::packet_socket("p1", io::Error::from_raw_os_error(libc::EPERM));
        assert!(matches!(e, PortError::Permission { .. }), "{e:?}");
    }
}
