//! An OVSDB client (RFC 7047), written on serde_json over `unix:PATH`, `tcp:IP:PORT` and
//! `ssl:IP:PORT` (rustls), with no other rqvs crate beneath it: what `rqvs switch --ovsdb` reads its configuration through.
//!
//! - [`Connection`]: one JSON-RPC connection used from one thread — `list_dbs`, `get_schema`,
//!   `transact`, `echo`, any `call` — that answers the server's echo requests while it waits.
//! - [`Client`]: a connection kept by a session thread: the database's schema checked
//!   ([`Schema::check`]: name, major version, minimum version, the tables and columns it
//!   monitors), the tables monitored into a [`Replica`] (initial contents, then every `update`),
//!   echo requests answered and sent (the inactivity probe), transactions from any thread; on
//!   any failure — the server gone, a malformed message — it reconnects with backoff and
//!   monitors again from scratch, replacing the replica.
//! - [`Op`] (insert with a `uuid-name`, update, mutate, delete, select, wait, comment),
//!   [`Condition`], [`Mutation`]: transactions; [`Datum`]/[`Atom`]/[`Row`]: values as RFC 7047
//!   §5.1 encodes them (sets, maps, uuid and named-uuid).
//!
//! Nothing a server sends can panic this crate: bad JSON, bad JSON-RPC, a malformed row or
//! datum is an [`Error::Protocol`] naming what was found, and the session starts over.
//!
//! Not implemented: `monitor_cond`/`monitor_cond_since` (OVS 2.6+'s conditional and
//! incremental monitors; the plain `monitor` re-reads the whole tables after a reconnect),
//! `lock`/`steal` (ovs-vswitchd takes the `ovs_vswitchd` lock so that two do not run on one
//! database; rqvs does not), passive remotes (`pssl:`, `ptcp:`, `punix:`: the server
//! connecting to the client), clustered databases (`_Server` database). `ssl:` remotes take a
//! [`TlsConnector`] (the rustls configuration is the caller's: [`ClientConfig::tls`]).
//!
//! ```no_run
//! use rqvs_ovsdb::{Client, ClientConfig, MonitorTable, Remote};
//! let remote = Remote::parse("unix:/run/openvswitch/db.sock").unwrap();
//! let client = Client::start(ClientConfig::new(remote, "Open_vSwitch", vec![MonitorTable::all("Bridge")]));
//! client.wait_connected(std::time::Duration::from_secs(5)).unwrap();
//! client.with_replica(|r| {
//!     for (uuid, row) in r.rows("Bridge") {
//!         println!("{uuid} {}", row.str("name").unwrap_or(""));
//!     }
//! });
//! ```

mod client;
mod datum;
mod error;
mod framing;
mod ops;
mod remote;
mod replica;
mod rpc;
mod schema;

pub use client::{Client, ClientConfig, LogFn, MonitorTable, Status};
pub use datum::{Atom, Datum, Row, Uuid};
pub use error::{Error, Result};
pub use framing::{Framer, MAX_MESSAGE};
pub use ops::{parse_results, transact_params, Condition, Mutation, Op, OpResult};
pub use remote::{Remote, Stream, TlsConnector, TlsStream, DEFAULT_REMOTE};
pub use replica::Replica;
pub use rpc::{Connection, Message, CALL_TIMEOUT};
pub use schema::{Schema, Version};

/// The README's examples, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
