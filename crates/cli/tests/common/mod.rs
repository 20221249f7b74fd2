//! What the CLI tests share: running `rqvs`, `rqvs ctl` against a socket (the switch's tests),
//! reading one OpenFlow message from a raw client's socket, and a test directory removed also
//! when the test fails.
//!
//! Each test binary uses part of it.
#![allow(dead_code)]

use std::io::Read;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Output};

/// Runs the `rqvs` binary under test.
pub fn rqvs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rqvs")).args(args).output().expect("run rqvs")
}

/// `rqvs ctl --socket SOCK ARGS` (asserting success): its stdout.
pub fn ctl(sock: &Path, args: &[&str]) -> String {
    let mut a = vec!["ctl", "--socket", sock.to_str().unwrap()];
    a.extend_from_slice(args);
    let out = rqvs(&a);
    assert!(out.status.success(), "rqvs ctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One OpenFlow message (header and body) from `s`; `None` when the connection ends (or a read
/// times out) first.
pub fn read_msg(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut h = [0u8; 8];
    s.read_exact(&mut h).ok()?;
    let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let mut body = vec![0u8; len.saturating_sub(8)];
    s.read_exact(&mut body).ok()?;
    Some([h.to_vec(), body].concat())
}

/// Removes a test's directory at the end, also when it fails.
#[allow(unused_imports)] // not every test binary uses it
pub use rqvs_testkit::TempDir;
