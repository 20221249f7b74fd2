//! Remotes as OVS writes them (`unix:PATH`, `tcp:IP:PORT`) and the byte stream to one.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};

/// OVS's default database socket, what `ovs-vswitchd` connects to without an argument.
pub const DEFAULT_REMOTE: &str = "unix:/run/openvswitch/db.sock";

/// Where the server is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Remote {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl Remote {
    /// Parses `unix:PATH` or `tcp:IP:PORT` (IPv6 as `tcp:[::1]:6640`). OVS's `ssl:` is refused
    /// with a message saying so.
    pub fn parse(s: &str) -> Result<Remote> {
        if let Some(path) = s.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(Error::BadRemote(format!("'{s}': expected a socket path after 'unix:'")));
            }
            return Ok(Remote::Unix(PathBuf::from(path)));
        }
        if let Some(addr) = s.strip_prefix("tcp:") {
            return addr.parse::<SocketAddr>().map(Remote::Tcp).map_err(|_| {
                Error::BadRemote(format!("'{s}': expected tcp:IP:PORT (e.g. tcp:127.0.0.1:6640, tcp:[::1]:6640)"))
            });
        }
        if s.starts_with("ssl:") {
            return Err(Error::BadRemote(format!("'{s}': ssl: remotes are not supported by rqvs (use unix: or tcp:)")));
        }
        Err(Error::BadRemote(format!("'{s}': expected unix:PATH or tcp:IP:PORT")))
    }

    /// Opens a connection (`timeout` bounds a TCP connect).
    pub fn connect(&self, timeout: Duration) -> Result<Stream> {
        match self {
            Remote::Unix(p) => {
                UnixStream::connect(p).map(Stream::Unix).map_err(|e| Error::Io(format!("connecting to {self}: {e}")))
            }
            Remote::Tcp(a) => {
                let s = TcpStream::connect_timeout(a, timeout)
                    .map_err(|e| Error::Io(format!("connecting to {self}: {e}")))?;
                let _ = s.set_nodelay(true);
                Ok(Stream::Tcp(s))
            }
        }
    }
}

impl std::fmt::Display for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Remote::Unix(p) => write!(f, "unix:{}", p.display()),
            Remote::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

impl std::str::FromStr for Remote {
    type Err = Error;
    fn from_str(s: &str) -> Result<Remote> {
        Remote::parse(s)
    }
}

/// A connected stream of either kind.
#[derive(Debug)]
pub enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    pub fn try_clone(&self) -> std::io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }

    pub fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Tcp(s) => s.set_read_timeout(t),
        }
    }

    pub fn set_write_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_write_timeout(t),
            Stream::Tcp(s) => s.set_write_timeout(t),
        }
    }

    /// Both directions closed: a thread blocked reading it returns.
    pub fn shutdown(&self) {
        let _ = match self {
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
        };
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.flush(),
            Stream::Tcp(s) => s.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remotes_parse_as_ovs_writes_them() {
        assert_eq!(
            Remote::parse("unix:/run/openvswitch/db.sock").unwrap(),
            Remote::Unix("/run/openvswitch/db.sock".into())
        );
        assert_eq!(Remote::parse("tcp:127.0.0.1:6640").unwrap().to_string(), "tcp:127.0.0.1:6640");
        assert_eq!(Remote::parse("tcp:[::1]:6640").unwrap().to_string(), "tcp:[::1]:6640");
        for bad in ["", "unix:", "tcp:1.2.3.4", "tcp:host:1", "ssl:1.2.3.4:6640", "/run/db.sock"] {
            let e = Remote::parse(bad).unwrap_err();
            assert!(matches!(e, Error::BadRemote(_)), "{bad}: {e}");
            assert!(e.to_string().contains(bad), "{e}");
        }
    }
}
