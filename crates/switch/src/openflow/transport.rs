//! The byte stream under an OpenFlow connection: plain TCP (`tcp:`, `ptcp:`), TLS over TCP
//! (`ssl:`, `pssl:`, rustls) or a unix socket (`punix:`, the bridge's `BRIDGE.mgmt`). A connection uses it as two halves — a reader for its reader
//! thread, a writer for its writer thread — so the message handling (`connection.rs`) is the
//! same for both.
//!
//! TLS has one state machine for both directions; the halves share it behind a mutex, held only
//! while bytes are moved in or out of it, never while a socket call waits: the reader waits for
//! the socket to be readable (`peek`, with the connection's read timeout) without it, and only the
//! writer thread writes to the socket (the reader, when the TLS state has bytes to send — the
//! handshake, an alert — wakes the writer with an empty message on its queue).

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// A connected stream, before it is split.
pub(crate) enum Stream {
    Tcp(TcpStream),
    Tls(TcpStream, Box<rustls::Connection>),
    Unix(UnixStream),
}

/// The socket under a stream: what a connection sets options on and shuts down.
pub(crate) enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Socket {
    /// Blocking, with these timeouts (and for TCP no Nagle delay).
    pub fn prepare(&self, read: Duration, write: Duration) {
        match self {
            Socket::Tcp(s) => {
                let _ = s.set_nonblocking(false);
                let _ = s.set_nodelay(true);
                let _ = s.set_read_timeout(Some(read));
                let _ = s.set_write_timeout(Some(write));
            }
            Socket::Unix(s) => {
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(read));
                let _ = s.set_write_timeout(Some(write));
            }
        }
    }

    /// Whether a read would not wait: bytes (or the end of the stream, or an error) are there
    /// now. A peek that does not wait (`MSG_DONTWAIT`), so the socket stays blocking for the
    /// writer thread's clone (`O_NONBLOCK` belongs to the open file, which clones share). Under
    /// TLS it sees the encrypted bytes; plaintext already decrypted is read on the next pass.
    pub fn readable_now(&self) -> bool {
        let mut one = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        let sock = match self {
            Socket::Tcp(s) => socket2::SockRef::from(s),
            Socket::Unix(s) => socket2::SockRef::from(s),
        };
        !matches!(sock.recv_with_flags(&mut one, libc::MSG_PEEK | libc::MSG_DONTWAIT), Err(e) if e.kind() == ErrorKind::WouldBlock)
    }

    pub fn try_clone(&self) -> io::Result<Socket> {
        Ok(match self {
            Socket::Tcp(s) => Socket::Tcp(s.try_clone()?),
            Socket::Unix(s) => Socket::Unix(s.try_clone()?),
        })
    }

    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.shutdown(how),
            Socket::Unix(s) => s.shutdown(how),
        }
    }
}

/// The halves of a [`Stream`], and the socket to shut down.
pub(crate) struct Halves {
    pub reader: Box<dyn Read + Send>,
    pub writer: Box<dyn Write + Send>,
    pub socket: Socket,
}

impl Stream {
    /// The socket under the stream (a clone of its descriptor).
    pub fn socket(&self) -> io::Result<Socket> {
        match self {
            Stream::Tcp(s) | Stream::Tls(s, _) => Ok(Socket::Tcp(s.try_clone()?)),
            Stream::Unix(s) => Ok(Socket::Unix(s.try_clone()?)),
        }
    }

    /// `tcp`, `ssl` or `unix`, as the targets name them.
    pub fn scheme(&self) -> &'static str {
        match self {
            Stream::Tcp(_) => "tcp",
            Stream::Tls(..) => "ssl",
            Stream::Unix(_) => "unix",
        }
    }

    /// Splits the stream; `wake` is the writer thread's queue (TLS: the reader posts an empty
    /// message there when the TLS state has bytes to send).
    pub fn split(self, wake: SyncSender<Vec<u8>>) -> io::Result<Halves> {
        match self {
            Stream::Tcp(s) => Ok(Halves {
                reader: Box::new(s.try_clone()?),
                writer: Box::new(s.try_clone()?),
                socket: Socket::Tcp(s),
            }),
            Stream::Unix(s) => Ok(Halves {
                reader: Box::new(s.try_clone()?),
                writer: Box::new(s.try_clone()?),
                socket: Socket::Unix(s),
            }),
            Stream::Tls(s, mut conn) => {
                // The writer's queue is the bound on what waits to be sent.
                conn.set_buffer_limit(None);
                let conn = Arc::new(Mutex::new(*conn));
                Ok(Halves {
                    reader: Box::new(TlsReader { sock: s.try_clone()?, conn: conn.clone(), wake }),
                    writer: Box::new(TlsWriter { sock: s.try_clone()?, conn, out: Vec::new(), unflushed: 0 }),
                    socket: Socket::Tcp(s),
                })
            }
        }
    }
}

fn lock(c: &Mutex<rustls::Connection>) -> MutexGuard<'_, rustls::Connection> {
    c.lock().unwrap_or_else(|e| e.into_inner())
}

/// A TLS error as an `InvalidData` I/O error whose text says it is TLS's.
fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, format!("TLS: {e}"))
}

struct TlsReader {
    sock: TcpStream,
    conn: Arc<Mutex<rustls::Connection>>,
    wake: SyncSender<Vec<u8>>,
}

impl TlsReader {
    /// Feeds what the socket has (`eof`: nothing more will come) to the TLS state; wakes the
    /// writer when the state has bytes to send (also before a TLS error is returned: its alert).
    fn feed(&mut self, eof: bool) -> io::Result<()> {
        let mut c = lock(&self.conn);
        if eof {
            let _ = c.read_tls(&mut io::empty());
        } else {
            c.read_tls(&mut self.sock)?;
        }
        let state = c.process_new_packets();
        let wants_write = c.wants_write();
        drop(c);
        if wants_write {
            // Fails only once the writer is gone, when nothing can be sent anyway.
            let _ = self.wake.send(Vec::new());
        }
        state.map(|_| ()).map_err(tls_error)
    }
}

impl Read for TlsReader {
    /// Plaintext; `Ok(0)` at the end (the peer's close_notify, or the socket's end); the
    /// socket's read timeout as `WouldBlock`/`TimedOut`; a TLS failure as `InvalidData`.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match lock(&self.conn).reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                // The socket ended without close_notify: the end all the same.
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            let mut probe = [0u8; 1];
            match self.sock.peek(&mut probe) {
                Ok(0) => self.feed(true)?,
                Ok(_) => self.feed(false)?,
                Err(e) => return Err(e),
            }
        }
    }
}

struct TlsWriter {
    sock: TcpStream,
    conn: Arc<Mutex<rustls::Connection>>,
    /// Records taken from the TLS state, on their way to the socket.
    out: Vec<u8>,
    /// Plaintext written since the last flush.
    unflushed: usize,
}

/// Plaintext taken before the writer pushes records to the socket (the bound on what the TLS
/// state holds: the writer thread writes a batch of queued messages before it flushes).
const TLS_FLUSH_AT: usize = 256 * 1024;

impl Write for TlsWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = lock(&self.conn).writer().write(buf)?;
        self.unflushed += n;
        if self.unflushed >= TLS_FLUSH_AT {
            self.flush()?;
        }
        Ok(n)
    }

    /// Encrypts what is pending and writes it to the socket (the mutex is released before the
    /// socket write; only this thread writes to the socket, so records stay in order).
    fn flush(&mut self) -> io::Result<()> {
        self.unflushed = 0;
        loop {
            self.out.clear();
            {
                let mut c = lock(&self.conn);
                while c.wants_write() && self.out.len() < TLS_FLUSH_AT {
                    c.write_tls(&mut self.out)?;
                }
            }
            if self.out.is_empty() {
                return Ok(());
            }
            self.sock.write_all(&self.out)?;
        }
    }
}

impl Drop for TlsWriter {
    /// The connection's end: close_notify, so the peer sees a clean end (best effort: the
    /// socket may be shut down already).
    fn drop(&mut self) {
        lock(&self.conn).send_close_notify();
        let _ = self.flush();
    }
}
