//! Remotes as OVS writes them (`unix:PATH`, `tcp:IP:PORT`, `ssl:IP:PORT`) and the byte stream
//! to one.
//!
//! `ssl:` is TLS over TCP with rustls. This crate does not build the TLS configuration: the
//! caller gives a [`TlsConnector`] (`rqvs switch` gives the one its OpenFlow channel uses,
//! `rqvs_switch::tls`, from OVS's `--private-key`, `--certificate`, `--ca-cert` options), asked
//! for the configuration of the moment at each connection. The handshake is completed when the
//! connection is opened, so a refused certificate is an error of the connect, naming TLS.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::error::{Error, Result};

/// OVS's default database socket, what `ovs-vswitchd` connects to without an argument.
pub const DEFAULT_REMOTE: &str = "unix:/run/openvswitch/db.sock";

/// Where the server is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Remote {
    Unix(PathBuf),
    Tcp(SocketAddr),
    /// TLS over TCP: needs a [`TlsConnector`].
    Ssl(SocketAddr),
}

/// The TLS client configuration for `ssl:` remotes, asked for at each connection (it may change:
/// a CA bootstrapped since the last one). `Err` says why there is none.
pub type TlsConnector = Arc<dyn Fn() -> std::result::Result<Arc<rustls::ClientConfig>, String> + Send + Sync>;

impl Remote {
    /// Parses `unix:PATH`, `tcp:IP:PORT` or `ssl:IP:PORT` (IPv6 as `tcp:[::1]:6640`). OVS's
    /// passive methods (`punix:`, `ptcp:`, `pssl:`: the server connects to us) are refused with a
    /// message saying so.
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
        if let Some(addr) = s.strip_prefix("ssl:") {
            return addr.parse::<SocketAddr>().map(Remote::Ssl).map_err(|_| {
                Error::BadRemote(format!("'{s}': expected ssl:IP:PORT (e.g. ssl:127.0.0.1:6640, ssl:[::1]:6640)"))
            });
        }
        if ["punix:", "ptcp:", "pssl:"].iter().any(|p| s.starts_with(p)) {
            return Err(Error::BadRemote(format!(
                "'{s}': passive database remotes (the server connecting to rqvs) are not supported by rqvs; use unix:, tcp: or ssl:"
            )));
        }
        Err(Error::BadRemote(format!("'{s}': expected unix:PATH, tcp:IP:PORT or ssl:IP:PORT")))
    }

    /// Opens a connection (`timeout` bounds a TCP connect and a TLS handshake). An `ssl:`
    /// remote needs `tls`.
    pub fn connect_with(&self, timeout: Duration, tls: Option<&TlsConnector>) -> Result<Stream> {
        let Remote::Ssl(a) = self else { return self.connect(timeout) };
        let Some(tls) = tls else {
            return Err(Error::BadRemote(format!(
                "{self}: an ssl: remote needs TLS settings (--private-key, --certificate, --ca-cert)"
            )));
        };
        let config = tls().map_err(|e| Error::Io(format!("connecting to {self}: TLS: {e}")))?;
        let sock =
            TcpStream::connect_timeout(a, timeout).map_err(|e| Error::Io(format!("connecting to {self}: {e}")))?;
        let _ = sock.set_nodelay(true);
        TlsStream::handshake(sock, config, *a, timeout)
            .map(|t| Stream::Tls(Arc::new(t)))
            .map_err(|e| Error::Io(format!("connecting to {self}: TLS: {e}")))
    }

    /// Opens a connection (`timeout` bounds a TCP connect). An `ssl:` remote is an error: it
    /// needs [`Remote::connect_with`] and TLS settings.
    pub fn connect(&self, timeout: Duration) -> Result<Stream> {
        match self {
            Remote::Ssl(_) => self.connect_with(timeout, None),
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
            Remote::Ssl(a) => write!(f, "ssl:{a}"),
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
    /// Shared by the clones (the reader and the writer): one TLS state for both directions.
    Tls(Arc<TlsStream>),
}

/// A TLS client connection over TCP whose halves are used from two threads (the session's
/// reader, any thread's writer): the TLS state is behind a mutex held while bytes move in or
/// out of it and while records are written — never while the reader waits for the socket
/// (it `peek`s, with the read timeout, without the lock).
pub struct TlsStream {
    sock: TcpStream,
    conn: Mutex<rustls::ClientConnection>,
}

impl std::fmt::Debug for TlsStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsStream").field("sock", &self.sock).finish_non_exhaustive()
    }
}

impl TlsStream {
    /// Completes the handshake on `sock` (the server's certificate checked by `config`'s
    /// verifier) within `timeout`.
    fn handshake(
        sock: TcpStream,
        config: Arc<rustls::ClientConfig>,
        addr: SocketAddr,
        timeout: Duration,
    ) -> std::io::Result<TlsStream> {
        let name = rustls_pki_types::ServerName::IpAddress(addr.ip().into());
        let mut conn =
            rustls::ClientConnection::new(config, name).map_err(|e| std::io::Error::new(ErrorKind::InvalidData, e))?;
        sock.set_read_timeout(Some(timeout))?;
        sock.set_write_timeout(Some(timeout))?;
        let deadline = std::time::Instant::now() + timeout;
        while conn.is_handshaking() {
            if std::time::Instant::now() >= deadline {
                return Err(std::io::Error::new(ErrorKind::TimedOut, "the handshake did not complete"));
            }
            conn.complete_io(&mut &sock)?;
        }
        // Anything the handshake's last flight left to send (e.g. a TLS 1.2 Finished).
        while conn.wants_write() {
            conn.write_tls(&mut &sock)?;
        }
        Ok(TlsStream { sock, conn: Mutex::new(conn) })
    }

    fn lock(&self) -> MutexGuard<'_, rustls::ClientConnection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn read(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match self.lock().reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                // The socket ended without close_notify: the end all the same.
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            // Wait for bytes without the lock (the read timeout ends the wait as an error).
            let mut probe = [0u8; 1];
            let eof = self.sock.peek(&mut probe)? == 0;
            let mut c = self.lock();
            if eof {
                let _ = c.read_tls(&mut std::io::empty());
            } else {
                c.read_tls(&mut &self.sock)?;
            }
            let state = c.process_new_packets().map_err(|e| std::io::Error::new(ErrorKind::InvalidData, e));
            // An alert, a key update's answer.
            while c.wants_write() {
                c.write_tls(&mut &self.sock)?;
            }
            state?;
        }
    }

    fn write(&self, buf: &[u8]) -> std::io::Result<usize> {
        let mut c = self.lock();
        c.writer().write_all(buf)?;
        while c.wants_write() {
            c.write_tls(&mut &self.sock)?;
        }
        Ok(buf.len())
    }
}

impl Stream {
    pub fn try_clone(&self) -> std::io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Tls(t) => Stream::Tls(Arc::clone(t)),
        })
    }

    pub fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Tls(s) => s.sock.set_read_timeout(t),
        }
    }

    pub fn set_write_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_write_timeout(t),
            Stream::Tcp(s) => s.set_write_timeout(t),
            Stream::Tls(s) => s.sock.set_write_timeout(t),
        }
    }

    /// Both directions closed: a thread blocked reading it returns.
    pub fn shutdown(&self) {
        let _ = match self {
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            Stream::Tls(s) => s.sock.shutdown(Shutdown::Both),
        };
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.flush(),
            Stream::Tcp(s) => s.flush(),
            Stream::Tls(_) => Ok(()),
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
        assert_eq!(Remote::parse("ssl:127.0.0.1:6640").unwrap(), Remote::Ssl("127.0.0.1:6640".parse().unwrap()));
        assert_eq!(Remote::parse("ssl:[::1]:6640").unwrap().to_string(), "ssl:[::1]:6640");
        for bad in ["", "unix:", "tcp:1.2.3.4", "tcp:host:1", "ssl:1.2.3.4", "pssl:6640", "ptcp:6640", "/run/db.sock"] {
            let e = Remote::parse(bad).unwrap_err();
            assert!(matches!(e, Error::BadRemote(_)), "{bad}: {e}");
            assert!(e.to_string().contains(bad), "{e}");
        }
    }

    #[test]
    fn an_ssl_remote_without_tls_settings_is_a_clear_error() {
        let e = Remote::parse("ssl:127.0.0.1:1").unwrap().connect(Duration::from_millis(100)).unwrap_err();
        assert!(e.to_string().contains("needs TLS settings (--private-key, --certificate, --ca-cert)"), "{e}");
    }
}
