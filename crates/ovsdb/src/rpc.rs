//! JSON-RPC 1.0 as OVSDB uses it (RFC 7047 §4): messages, and one synchronous connection.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::datum::short;
use crate::error::{protocol, Error, Result};
use crate::framing::Framer;
use crate::ops::{parse_results, transact_params, Op, OpResult};
use crate::remote::{Remote, Stream, TlsConnector};
use crate::schema::Schema;

/// One JSON-RPC message.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    Request { method: String, params: Value, id: Value },
    Notification { method: String, params: Value },
    Reply { result: Value, id: Value },
    Error { error: Value, id: Value },
}

impl Message {
    pub fn from_json(v: Value) -> Result<Message> {
        let Value::Object(mut o) = v else {
            return Err(protocol(format!("expected a JSON-RPC object, found {}", short(&v))));
        };
        let id = o.remove("id").unwrap_or(Value::Null);
        if let Some(method) = o.remove("method") {
            let method =
                method.as_str().ok_or_else(|| protocol("a request whose 'method' is not a string"))?.to_string();
            let params = o.remove("params").unwrap_or(Value::Null);
            if !params.is_array() {
                return Err(protocol(format!("request '{method}': 'params' is not an array")));
            }
            return Ok(if id.is_null() {
                Message::Notification { method, params }
            } else {
                Message::Request { method, params, id }
            });
        }
        let error = o.remove("error").unwrap_or(Value::Null);
        if id.is_null() {
            return Err(protocol("a reply without an 'id'"));
        }
        if !error.is_null() {
            return Ok(Message::Error { error, id });
        }
        match o.remove("result") {
            Some(result) => Ok(Message::Reply { result, id }),
            None => Err(protocol("a message with neither 'method' nor 'result' nor 'error'")),
        }
    }
}

/// `Error::Server` from an error reply's `error` value.
pub(crate) fn server_error(method: &str, e: &Value) -> Error {
    let (error, details) = match e {
        Value::String(s) => (s.clone(), String::new()),
        Value::Object(o) => (
            o.get("error").and_then(Value::as_str).unwrap_or("error").to_string(),
            o.get("details").and_then(Value::as_str).unwrap_or("").to_string(),
        ),
        other => (other.to_string(), String::new()),
    };
    Error::Server { error: format!("{method}: {error}"), details }
}

/// One connection to a server, used from one thread (the client's session thread, or a caller
/// doing a few requests in turn); `writer` may be shared with other threads that send.
pub struct Connection {
    remote: Remote,
    reader: Stream,
    writer: Arc<Mutex<Stream>>,
    framer: Framer,
    ids: Arc<AtomicU64>,
    /// Messages that arrived while `call` waited for its reply, for the next `recv`.
    backlog: VecDeque<Message>,
}

/// How long `call` waits by default.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

impl Connection {
    pub fn open(remote: &Remote, timeout: Duration) -> Result<Connection> {
        Connection::open_with_ids(remote, timeout, None, Arc::new(AtomicU64::new(1)))
    }

    /// [`Connection::open`] with the TLS configuration an `ssl:` remote needs.
    pub fn open_tls(remote: &Remote, timeout: Duration, tls: &TlsConnector) -> Result<Connection> {
        Connection::open_with_ids(remote, timeout, Some(tls), Arc::new(AtomicU64::new(1)))
    }

    pub(crate) fn open_with_ids(
        remote: &Remote,
        timeout: Duration,
        tls: Option<&TlsConnector>,
        ids: Arc<AtomicU64>,
    ) -> Result<Connection> {
        let reader = remote.connect_with(timeout, tls)?;
        let writer = reader.try_clone().map_err(|e| Error::Io(format!("{remote}: {e}")))?;
        writer.set_write_timeout(Some(CALL_TIMEOUT)).map_err(|e| Error::Io(format!("{remote}: {e}")))?;
        Ok(Connection {
            remote: remote.clone(),
            reader,
            writer: Arc::new(Mutex::new(writer)),
            framer: Framer::new(),
            ids,
            backlog: VecDeque::new(),
        })
    }

    pub fn remote(&self) -> &Remote {
        &self.remote
    }

    pub(crate) fn writer(&self) -> Arc<Mutex<Stream>> {
        Arc::clone(&self.writer)
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed)
    }

    /// Whether `id` is one this connection's id counter has handed out.
    pub(crate) fn issued(&self, id: &Value) -> bool {
        id.as_u64().is_some_and(|i| i > 0 && i < self.ids.load(Ordering::Relaxed)) || id == "echo"
    }

    pub fn send(&self, msg: &Value) -> Result<()> {
        send_on(&self.writer, &self.remote, msg)
    }

    /// The next message, or `None` when `timeout` passes first. End of stream and read errors
    /// are `Error::Disconnected`; bad JSON or JSON-RPC is `Error::Protocol`.
    pub fn recv(&mut self, timeout: Duration) -> Result<Option<Message>> {
        match self.backlog.pop_front() {
            Some(m) => Ok(Some(m)),
            None => self.recv_raw(timeout),
        }
    }

    /// `recv` past the backlog.
    fn recv_raw(&mut self, timeout: Duration) -> Result<Option<Message>> {
        let deadline = Instant::now() + timeout;
        let mut buf = [0u8; 65536];
        loop {
            if let Some(v) = self.framer.next_message()? {
                return Message::from_json(v).map(Some);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let wait = (deadline - now).max(Duration::from_millis(1));
            self.reader.set_read_timeout(Some(wait)).map_err(|e| Error::Io(format!("{}: {e}", self.remote)))?;
            match self.reader.read(&mut buf) {
                Ok(0) => {
                    let partial = if self.framer.pending() > 0 { " in the middle of a message" } else { "" };
                    return Err(Error::Disconnected(format!("{} closed the connection{partial}", self.remote)));
                }
                Ok(n) => self.framer.push(&buf[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
                Err(e) => return Err(Error::Disconnected(format!("reading from {}: {e}", self.remote))),
            }
        }
    }

    /// Sends a request and waits for its reply, answering the server's echo requests meanwhile
    /// and keeping other messages for `recv`.
    pub fn call(&mut self, method: &str, params: Value, timeout: Duration) -> Result<Value> {
        let id = self.next_id();
        self.send(&json!({"method": method, "params": params, "id": id}))?;
        let deadline = Instant::now() + timeout;
        let mut kept = VecDeque::new();
        let result = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break Err(Error::Timeout(format!("no reply to '{method}' from {} in {timeout:?}", self.remote)));
            }
            // Past the backlog: it holds only what an earlier call kept.
            let msg = match self.recv_raw(left) {
                Ok(Some(m)) => m,
                Ok(None) => continue,
                Err(e) => break Err(e),
            };
            match msg {
                Message::Reply { result, id: rid } if rid == id => break Ok(result),
                Message::Error { error, id: rid } if rid == id => break Err(server_error(method, &error)),
                Message::Request { method: m, params, id: rid } if m == "echo" => {
                    self.send(&json!({"result": params, "error": null, "id": rid}))?;
                }
                Message::Reply { id: rid, .. } | Message::Error { id: rid, .. } if !self.issued(&rid) => {
                    break Err(protocol(format!("a reply to id {rid}, which no request had")));
                }
                other => kept.push_back(other),
            }
        };
        self.backlog.extend(kept);
        result
    }

    pub fn list_dbs(&mut self) -> Result<Vec<String>> {
        let v = self.call("list_dbs", json!([]), CALL_TIMEOUT)?;
        let a = v.as_array().ok_or_else(|| protocol(format!("list_dbs: expected an array, found {}", short(&v))))?;
        a.iter()
            .map(|d| d.as_str().map(str::to_string).ok_or_else(|| protocol(format!("list_dbs: {d} is not a name"))))
            .collect()
    }

    pub fn get_schema(&mut self, database: &str) -> Result<Schema> {
        let v = self.call("get_schema", json!([database]), CALL_TIMEOUT)?;
        Schema::from_json(&v)
    }

    pub fn transact(&mut self, database: &str, ops: &[Op]) -> Result<Vec<OpResult>> {
        let v = self.call("transact", transact_params(database, ops), CALL_TIMEOUT)?;
        parse_results(ops, &v)
    }

    pub fn echo(&mut self) -> Result<()> {
        let v = self.call("echo", json!(["rqvs"]), CALL_TIMEOUT)?;
        if v == json!(["rqvs"]) {
            Ok(())
        } else {
            Err(protocol(format!("echo: the server answered {} to [\"rqvs\"]", short(&v))))
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.shutdown();
    }
}

pub(crate) fn send_on(writer: &Mutex<Stream>, remote: &Remote, msg: &Value) -> Result<()> {
    let bytes = serde_json::to_vec(msg).map_err(|e| protocol(format!("encoding a request: {e}")))?;
    let mut w = writer.lock().unwrap_or_else(|p| p.into_inner());
    w.write_all(&bytes).map_err(|e| Error::Disconnected(format!("writing to {remote}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_by_kind() {
        let m = |v: Value| Message::from_json(v);
        assert!(matches!(m(json!({"method": "echo", "params": [], "id": "echo"})).unwrap(), Message::Request { .. }));
        assert!(matches!(
            m(json!({"method": "update", "params": [1, {}], "id": null})).unwrap(),
            Message::Notification { .. }
        ));
        assert!(matches!(m(json!({"result": [], "error": null, "id": 3})).unwrap(), Message::Reply { .. }));
        assert!(matches!(
            m(json!({"result": null, "error": "unknown database", "id": 3})).unwrap(),
            Message::Error { .. }
        ));
        for bad in [
            json!([1]),
            json!({"method": 5}),
            json!({"method": "x", "params": 3, "id": 1}),
            json!({"result": 1}),
            json!({"id": 1}),
        ] {
            assert!(matches!(m(bad.clone()), Err(Error::Protocol(_))), "{bad}");
        }
        let e = server_error("transact", &json!({"error": "syntax error", "details": "bad op"}));
        assert_eq!(e.to_string(), "ovsdb-server: transact: syntax error (bad op)");
    }
}
