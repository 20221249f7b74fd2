//! Test fixtures shared by rqvs's crates (a dev-dependency only; never published):
//!
//! - [`data`]: where the shared ClassBench data is (`../shared/data/classbench` beside the
//!   checkout, or `RQVS_CLASSBENCH_DIR`); tests skip with a message when it is absent, and fail
//!   instead under `RQVS_REQUIRE_DATA=1`.
//! - [`ovs`]: a private, userspace-only Open vSwitch 3.1 instance with a JSON-RPC client for
//!   `ofproto/trace` — the oracle for the slow path; checks for `ovs-ofctl`,
//!   `ovs-testcontroller` and os-ken (real controllers); `RQVS_REQUIRE_OVS=1` makes their absence
//!   a failure.
//! - [`ovsdb_server`]: a private `ovsdb-server` on a fresh `Open_vSwitch` database (no
//!   `ovs-vswitchd`), `ovs-vsctl` pointed at it; restartable on the same file.
//! - [`proc::Logged`]: a started process whose stderr is collected, killed on drop.
//! - [`pki`]: certificates made by `ovs-pki` (a switch's and a controller's).
//! - [`wide_match`]: a match over every field of the field table, from proptest's picks.
//! - [`overlap`]: an overlapping rule-set and packets that hit it (the datapath's and the
//!   ofproto layer's unit tests).
//! - [`TempDir`]: a test's directory in the system temporary directory, removed on drop (also
//!   when the test fails).

#![forbid(unsafe_code)]

pub mod data;
pub mod overlap;
pub mod ovs;
pub mod ovsdb_server;
pub mod pki;
pub mod proc;
pub mod temp;
pub mod wide;

pub use temp::TempDir;
pub use wide::wide_match;
