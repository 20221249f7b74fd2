//! A server that sends garbage: every kind of malformed message is an error the client keeps
//! (`Status::last_error`), logs once, and recovers from by reconnecting — never a panic. The
//! server is a fake on a Unix socket in the test's directory (no Open vSwitch needed).

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rqvs_ovsdb::*;
use serde_json::{json, Value};

const SCHEMA: &str = r#"{"name": "Open_vSwitch", "version": "8.3.1",
  "tables": {"Bridge": {"columns": {"name": {"type": "string"}}}}}"#;
const U1: &str = "00000000-0000-0000-0000-000000000001";

/// Where the fake puts its garbage.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Raw bytes instead of the list_dbs reply.
    Bytes(&'static [u8]),
    /// This JSON instead of the list_dbs reply (`ID` replaced by the request's id).
    ListDbs(&'static str),
    /// This JSON as monitor's result.
    Initial(&'static str),
    /// This JSON sent after a good monitor reply.
    After(&'static str),
    /// Accepts and never answers.
    Silent,
}

struct Fake {
    dir: rqvs_testkit::TempDir,
    connections: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Fake {
    fn start(fault: Fault) -> Fake {
        let dir = rqvs_testkit::TempDir::new("ovsdb-fake");
        let listener = UnixListener::bind(dir.join("db.sock")).unwrap();
        listener.set_nonblocking(true).unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (n, s) = (Arc::clone(&connections), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        n.fetch_add(1, Ordering::Relaxed);
                        serve(stream, fault, &s);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Fake { dir, connections, stop, thread: Some(thread) }
    }

    fn remote(&self) -> Remote {
        Remote::parse(&format!("unix:{}", self.dir.join("db.sock").display())).unwrap()
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(mut stream: UnixStream, fault: Fault, stop: &AtomicBool) {
    stream.set_nonblocking(false).unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut framer = Framer::new();
    let mut buf = [0u8; 4096];
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(5) {
        let msg = match framer.next_message() {
            Ok(Some(m)) => m,
            Ok(None) => match stream.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    framer.push(&buf[..n]);
                    continue;
                }
                Err(_) => continue,
            },
            Err(_) => return,
        };
        let id = msg["id"].clone();
        let reply = |r: Value| json!({"result": r, "error": null, "id": id}).to_string();
        if matches!(fault, Fault::Silent) {
            continue;
        }
        let out = match (msg["method"].as_str(), fault) {
            (Some("list_dbs"), Fault::Bytes(b)) => {
                let _ = stream.write_all(b);
                return;
            }
            (Some("list_dbs"), Fault::ListDbs(text)) => text.replace("ID", &id.to_string()),
            (Some("list_dbs"), _) => reply(json!(["Open_vSwitch"])),
            (Some("get_schema"), _) => reply(serde_json::from_str(SCHEMA).unwrap()),
            (Some("monitor"), Fault::Initial(text)) => reply(serde_json::from_str(text).unwrap()),
            (Some("monitor"), Fault::After(text)) => {
                let good = reply(json!({"Bridge": {U1: {"new": {"name": "br0"}}}}));
                format!("{good}{text}")
            }
            _ => continue,
        };
        if stream.write_all(out.as_bytes()).is_err() {
            return;
        }
    }
}

fn run(fault: Fault, expect: &str) {
    run_as(fault, expect, true)
}

fn run_as(fault: Fault, expect: &str, protocol: bool) {
    let fake = Fake::start(fault);
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut config = ClientConfig::new(fake.remote(), "Open_vSwitch", vec![MonitorTable::all("Bridge")]);
    config.min_backoff = Duration::from_millis(10);
    config.max_backoff = Duration::from_millis(20);
    let l = Arc::clone(&lines);
    config.log = Arc::new(move |s: &str| l.lock().unwrap().push(s.to_string()));
    let client = Client::start(config);
    // Several attempts, each refused the same way.
    let deadline = Instant::now() + Duration::from_secs(10);
    while fake.connections.load(Ordering::Relaxed) < 4 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(fake.connections.load(Ordering::Relaxed) >= 4, "{fault:?}: the client did not reconnect");
    let status = client.status();
    let err = status.last_error.clone().unwrap_or_else(|| panic!("{fault:?}: no error in {status:?}"));
    assert_eq!(matches!(err, Error::Protocol(_)), protocol, "{fault:?}: {err}");
    assert!(err.to_string().contains(expect), "{fault:?}: '{err}' does not say '{expect}'");
    drop(client);
    let lines = lines.lock().unwrap();
    let same: Vec<_> = lines.iter().filter(|l| l.contains(expect)).collect();
    assert_eq!(same.len(), 1, "{fault:?}: one fault, logged once: {lines:?}");
}

#[test]
fn bytes_that_are_not_json() {
    run(Fault::Bytes(b"hello, world"), "expected a JSON object, found 'hello, world'");
    run(Fault::Bytes(b"{\"id\": 1, \"result\": [\xff\xfe]}"), "invalid JSON");
    run_as(Fault::Bytes(b"{\"id\": 1, \"res"), "closed the connection in the middle of a message", false);
}

#[test]
fn json_that_is_not_json_rpc() {
    run(Fault::ListDbs(r#"{"foo": 1}"#), "a reply without an 'id'");
    run(Fault::ListDbs(r#"{"id": ID}"#), "neither 'method' nor 'result' nor 'error'");
    run(Fault::ListDbs(r#"{"result": 5, "error": null, "id": ID}"#), "list_dbs: expected an array, found 5");
    run(Fault::ListDbs(r#"{"result": [], "error": null, "id": 999}"#), "a reply to id 999, which no request had");
}

#[test]
fn malformed_rows_and_updates() {
    run(Fault::Initial(r#"{"Bridge": {"nope": {"new": {}}}}"#), "'nope' is not a UUID");
    run(
        Fault::Initial(r#"{"Bridge": {"00000000-0000-0000-0000-000000000001": {"new": {"name": {"a": 1}}}}}"#),
        "column 'name'",
    );
    run(Fault::Initial(r#"[1, 2]"#), "expected table updates");
    run(
        Fault::After(r#"{"method": "update", "params": ["rqvs", {"Bridge": {"x": {}}}], "id": null}"#),
        "update: table Bridge: 'x' is not a UUID",
    );
    run(Fault::After(r#"{"method": "update", "params": ["other", {}], "id": null}"#), "an update notification");
    run(Fault::After(r#"{"result": [], "error": null, "id": 424242}"#), "a reply to id 424242, which no request had");
}

#[test]
fn a_silent_server_does_not_hold_the_client() {
    let fake = Fake::start(Fault::Silent);
    let client = Client::start(ClientConfig::new(fake.remote(), "Open_vSwitch", vec![MonitorTable::all("Bridge")]));
    let deadline = Instant::now() + Duration::from_secs(10);
    while fake.connections.load(Ordering::Relaxed) < 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(100));
    assert!(!client.status().connected);
    // list_dbs is waiting for its reply (30 s at most); dropping the client cuts it short.
    let t0 = Instant::now();
    drop(client);
    assert!(t0.elapsed() < Duration::from_secs(2), "drop took {:?}", t0.elapsed());
}
