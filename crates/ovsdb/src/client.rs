//! `Client`: a connection kept up by a session thread — schema checked, tables monitored into
//! a `Replica`, echo requests answered, transactions sent from any thread — that reconnects
//! with backoff whenever the connection drops or the server sends something it cannot read,
//! and then monitors again from scratch (the replica is replaced, never merged: nothing left
//! over from before the restart, nothing twice).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::datum::short;
use crate::error::{context, protocol, Error, Result};
use crate::ops::{parse_results, transact_params, Op, OpResult};
use crate::remote::{Remote, Stream, TlsConnector};
use crate::replica::Replica;
use crate::rpc::{send_on, server_error, Connection, Message, CALL_TIMEOUT};
use crate::schema::{Schema, Version};

/// A table to monitor: all its columns (`columns: None`) or those named.
#[derive(Clone, Debug)]
pub struct MonitorTable {
    pub name: String,
    pub columns: Option<Vec<String>>,
}

impl MonitorTable {
    pub fn all(name: &str) -> MonitorTable {
        MonitorTable { name: name.to_string(), columns: None }
    }

    pub fn columns(name: &str, columns: &[&str]) -> MonitorTable {
        MonitorTable { name: name.to_string(), columns: Some(columns.iter().map(|c| c.to_string()).collect()) }
    }
}

/// A log line's sink (the switch's logger; by default standard error).
pub type LogFn = Arc<dyn Fn(&str) + Send + Sync>;

/// What the client connects to and keeps.
#[derive(Clone)]
pub struct ClientConfig {
    pub remote: Remote,
    pub database: String,
    /// The schema must have this major version and be at least this (`None`: any).
    pub min_version: Option<Version>,
    pub tables: Vec<MonitorTable>,
    /// Reconnection waits: `min_backoff`, doubled after each failed attempt up to
    /// `max_backoff` (OVS: 1 s to 8 s).
    pub min_backoff: Duration,
    pub max_backoff: Duration,
    /// After this long without a message the client sends an echo request; after twice this
    /// long it reconnects (OVS's inactivity probe). Zero: never.
    pub probe_interval: Duration,
    pub log: LogFn,
    /// The TLS configuration of an `ssl:` remote (`None`: such a remote fails to connect, saying
    /// it needs TLS settings).
    pub tls: Option<TlsConnector>,
}

impl ClientConfig {
    pub fn new(remote: Remote, database: &str, tables: Vec<MonitorTable>) -> ClientConfig {
        ClientConfig {
            remote,
            database: database.to_string(),
            min_version: None,
            tables,
            min_backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(8),
            probe_interval: Duration::from_secs(5),
            log: Arc::new(|line: &str| eprintln!("{line}")),
            tls: None,
        }
    }
}

/// The connection's state as callers see it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Status {
    pub connected: bool,
    /// Sessions that reached the monitored state (1 after the first connection; each reconnect
    /// adds one).
    pub sessions: u64,
    /// The last failure (connection, schema, protocol), cleared by nothing: see `connected`.
    pub last_error: Option<Error>,
}

struct State {
    replica: Replica,
    schema: Option<Schema>,
    /// Bumped at every change of the replica or of the connection.
    seqno: u64,
    status: Status,
    /// Transactions in flight: id → its reply once it came.
    pending: HashMap<u64, Option<Result<Value>>>,
    writer: Option<(Arc<Mutex<Stream>>, Remote)>,
    /// The connection being set up or served, for `Drop` to shut down (a server that accepted
    /// and never answers must not hold the client's owner for a call's timeout).
    closer: Option<Arc<Mutex<Stream>>>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    stop: AtomicBool,
    ids: Arc<AtomicU64>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A monitored database (module docs). Dropping it ends the session thread.
pub struct Client {
    shared: Arc<Shared>,
    config: ClientConfig,
    thread: Option<JoinHandle<()>>,
}

impl Client {
    /// Starts the session thread; the first connection is made there (see `wait_connected`).
    pub fn start(config: ClientConfig) -> Client {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                replica: Replica::new(),
                schema: None,
                seqno: 0,
                status: Status::default(),
                pending: HashMap::new(),
                writer: None,
                closer: None,
            }),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
            ids: Arc::new(AtomicU64::new(1)),
        });
        let (s, c) = (Arc::clone(&shared), config.clone());
        let thread = std::thread::Builder::new()
            .name("ovsdb".into())
            .spawn(move || session_loop(&s, &c))
            .expect("spawning the OVSDB session thread");
        Client { shared, config, thread: Some(thread) }
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Waits until the tables are monitored. A schema error is returned at once (it will not
    /// go away by waiting); other failures when `timeout` passes.
    pub fn wait_connected(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        loop {
            if st.status.connected {
                return Ok(());
            }
            if let Some(e @ Error::Schema(_)) = &st.status.last_error {
                return Err(e.clone());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(st.status.last_error.clone().unwrap_or_else(|| {
                    Error::Timeout(format!("not connected to {} after {timeout:?}", self.config.remote))
                }));
            }
            st = self.shared.changed.wait_timeout(st, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    pub fn status(&self) -> Status {
        self.shared.lock().status.clone()
    }

    /// The schema of the current (or last) session.
    pub fn schema(&self) -> Option<Schema> {
        self.shared.lock().schema.clone()
    }

    /// A number that changes whenever the replica or the connection does.
    pub fn seqno(&self) -> u64 {
        self.shared.lock().seqno
    }

    /// Runs `f` on the replica (under the lock: keep it short).
    pub fn with_replica<T>(&self, f: impl FnOnce(&Replica) -> T) -> T {
        f(&self.shared.lock().replica)
    }

    /// A copy of the replica.
    pub fn snapshot(&self) -> (u64, Replica) {
        let st = self.shared.lock();
        (st.seqno, st.replica.clone())
    }

    /// Waits until `seqno()` differs from `seen`, or `timeout`; returns the current one.
    pub fn wait_change(&self, seen: u64, timeout: Duration) -> u64 {
        let st = self.shared.lock();
        let (st, _) = self
            .shared
            .changed
            .wait_timeout_while(st, timeout, |s| s.seqno == seen && !self.shared.stop.load(Ordering::Relaxed))
            .unwrap_or_else(|p| p.into_inner());
        st.seqno
    }

    /// Waits until `pred` holds on the replica (checked at every change), or `timeout`.
    pub fn wait_until(&self, timeout: Duration, mut pred: impl FnMut(&Replica) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        loop {
            if st.status.connected && pred(&st.replica) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            st = self.shared.changed.wait_timeout(st, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// Sends a transaction and waits for its result (`CALL_TIMEOUT` at most). Fails at once
    /// with `Error::Disconnected` when there is no session (the caller writes again after the
    /// next one: `Status::sessions` changes).
    pub fn transact(&self, ops: &[Op]) -> Result<Vec<OpResult>> {
        let id = self.shared.ids.fetch_add(1, Ordering::Relaxed);
        let (writer, remote) = {
            let mut st = self.shared.lock();
            let Some((w, r)) = st.writer.clone() else {
                return Err(Error::Disconnected(format!("not connected to {}", self.config.remote)));
            };
            st.pending.insert(id, None);
            (w, r)
        };
        let msg = json!({"method": "transact", "params": transact_params(&self.config.database, ops), "id": id});
        if let Err(e) = send_on(&writer, &remote, &msg) {
            self.shared.lock().pending.remove(&id);
            return Err(e);
        }
        let deadline = Instant::now() + CALL_TIMEOUT;
        let mut st = self.shared.lock();
        loop {
            match st.pending.get(&id) {
                Some(Some(_)) => {
                    let reply = st.pending.remove(&id).flatten().expect("present");
                    drop(st);
                    return parse_results(ops, &reply?);
                }
                Some(None) => {}
                None => {
                    return Err(Error::Disconnected(format!("{remote}: the connection dropped during the transaction")))
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                st.pending.remove(&id);
                return Err(Error::Timeout(format!("no reply to a transaction from {remote} in {CALL_TIMEOUT:?}")));
            }
            st = self.shared.changed.wait_timeout(st, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        let (writer, closer) = {
            let mut st = self.shared.lock();
            (st.writer.take(), st.closer.take())
        };
        for w in writer.map(|(w, _)| w).into_iter().chain(closer) {
            w.lock().unwrap_or_else(|p| p.into_inner()).shutdown();
        }
        self.shared.changed.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The monitor's id in requests and update notifications.
const MONITOR_ID: &str = "rqvs";
/// How often the session thread looks at the stop flag while waiting.
const TICK: Duration = Duration::from_millis(100);
/// A session that lasted this long ends a run of identical faults (the next one is logged).
const STABLE: Duration = Duration::from_secs(5);

fn session_loop(shared: &Arc<Shared>, config: &ClientConfig) {
    let mut backoff = config.min_backoff;
    let mut logged: Option<String> = None;
    while !shared.stop.load(Ordering::Relaxed) {
        let mut reached = false;
        let began = Instant::now();
        let err = match session(shared, config, &mut reached) {
            Ok(()) => break,
            Err(e) => e,
        };
        {
            let mut st = shared.lock();
            st.writer = None;
            st.pending.retain(|_, r| r.is_some());
            st.status.connected = false;
            st.status.last_error = Some(err.clone());
            st.seqno += 1;
        }
        shared.changed.notify_all();
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        // Each distinct fault logged once: a server that stays down, or that breaks every session
        // the same way, is one line, not one per try. A session that lasted is a fresh start.
        if reached && began.elapsed() >= STABLE {
            logged = None;
        }
        let line = format!("ovsdb {}: {err}", config.remote);
        if logged.as_deref() != Some(line.as_str()) {
            (config.log)(&format!("{line} (reconnecting)"));
            logged = Some(line);
        }
        backoff = if reached { config.min_backoff } else { (backoff * 2).min(config.max_backoff) };
        let until = Instant::now() + if reached { config.min_backoff } else { backoff };
        while Instant::now() < until && !shared.stop.load(Ordering::Relaxed) {
            std::thread::sleep(TICK.min(until.saturating_duration_since(Instant::now())));
        }
    }
    let mut st = shared.lock();
    st.writer = None;
    st.status.connected = false;
    st.pending.clear();
    drop(st);
    shared.changed.notify_all();
}

/// One session: connect, check, monitor, then serve messages until an error (or the stop flag:
/// `Ok`). `reached` is set once the tables are monitored.
fn session(shared: &Arc<Shared>, config: &ClientConfig, reached: &mut bool) -> Result<()> {
    let mut conn = Connection::open_with_ids(
        &config.remote,
        Duration::from_secs(5),
        config.tls.as_ref(),
        Arc::clone(&shared.ids),
    )?;
    shared.lock().closer = Some(conn.writer());
    if shared.stop.load(Ordering::Relaxed) {
        return Ok(());
    }
    let dbs = conn.list_dbs()?;
    if !dbs.contains(&config.database) {
        return Err(Error::Schema(format!(
            "{} has no database '{}' (it has: {})",
            config.remote,
            config.database,
            dbs.join(", ")
        )));
    }
    let schema = conn.get_schema(&config.database)?;
    let wanted: Vec<(&str, Vec<&str>)> = config
        .tables
        .iter()
        .map(|t| (t.name.as_str(), t.columns.iter().flatten().map(String::as_str).collect()))
        .collect();
    let wanted_refs: Vec<(&str, &[&str])> = wanted.iter().map(|(t, c)| (*t, c.as_slice())).collect();
    schema.check(&config.database, config.min_version.unwrap_or(Version(schema.version.0, 0, 0)), &wanted_refs)?;
    let requests: serde_json::Map<String, Value> = config
        .tables
        .iter()
        .map(|t| {
            let r = match &t.columns {
                Some(c) => json!({"columns": c}),
                None => json!({}),
            };
            (t.name.clone(), r)
        })
        .collect();
    let initial = conn.call("monitor", json!([config.database, MONITOR_ID, requests]), CALL_TIMEOUT)?;
    let mut replica = Replica::new();
    replica.apply(&initial).map_err(context("monitor's initial contents"))?;
    {
        let mut st = shared.lock();
        st.replica = replica;
        st.schema = Some(schema);
        st.writer = Some((conn.writer(), config.remote.clone()));
        st.status.connected = true;
        st.status.sessions += 1;
        st.seqno += 1;
    }
    *reached = true;
    shared.changed.notify_all();
    serve(shared, config, &mut conn)
}

fn serve(shared: &Arc<Shared>, config: &ClientConfig, conn: &mut Connection) -> Result<()> {
    let mut last_heard = Instant::now();
    let mut probed = false;
    loop {
        if shared.stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let msg = match conn.recv(TICK)? {
            Some(m) => m,
            None => {
                let idle = last_heard.elapsed();
                let p = config.probe_interval;
                if !p.is_zero() && idle >= p * 2 {
                    return Err(Error::Timeout(format!(
                        "no message from {} in {:?} (inactivity probe)",
                        config.remote, idle
                    )));
                }
                if !p.is_zero() && idle >= p && !probed {
                    conn.send(&json!({"method": "echo", "params": [], "id": "echo"}))?;
                    probed = true;
                }
                continue;
            }
        };
        last_heard = Instant::now();
        probed = false;
        match msg {
            Message::Request { method, params, id } if method == "echo" => {
                conn.send(&json!({"result": params, "error": null, "id": id}))?;
            }
            Message::Request { method, id, .. } => {
                conn.send(&json!({"result": null, "error": format!("unknown method '{method}'"), "id": id}))?;
            }
            Message::Notification { method, params } if method == "update" => {
                let updates = match params.as_array().map(Vec::as_slice) {
                    Some([id, updates]) if id == MONITOR_ID => updates,
                    _ => return Err(protocol(format!("an update notification with params {}", short(&params)))),
                };
                let mut st = shared.lock();
                st.replica.apply(updates).map_err(context("update"))?;
                st.seqno += 1;
                drop(st);
                shared.changed.notify_all();
            }
            // "locked", "stolen" and anything newer: nothing this client asked for.
            Message::Notification { .. } => {}
            Message::Reply { id, .. } | Message::Error { id, .. } if id == "echo" => {}
            Message::Reply { result, id } => deliver(shared, conn, &id, Ok(result))?,
            Message::Error { error, id } => deliver(shared, conn, &id, Err(server_error("transact", &error)))?,
        }
    }
}

/// A transaction's reply to its waiter. A reply to an id this client never used is a protocol
/// error; one whose waiter gave up is dropped.
fn deliver(shared: &Arc<Shared>, conn: &Connection, id: &Value, reply: Result<Value>) -> Result<()> {
    if !conn.issued(id) {
        return Err(protocol(format!("a reply to id {id}, which no request had")));
    }
    let Some(id) = id.as_u64() else { return Ok(()) };
    let mut st = shared.lock();
    if let Some(slot) = st.pending.get_mut(&id) {
        *slot = Some(reply);
        drop(st);
        shared.changed.notify_all();
    }
    Ok(())
}
