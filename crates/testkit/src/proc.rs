//! [`Logged`]: a process a test started, its stderr collected as it comes (a thread reads the
//! pipe, so the process never blocks on a full one); killed and reaped when dropped, also when
//! the test fails.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Logged {
    pub child: Child,
    stderr: Arc<Mutex<String>>,
}

impl Logged {
    /// Starts `cmd` with stdin and stdout on /dev/null and stderr collected.
    pub fn start(mut cmd: Command) -> Logged {
        let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (r, into) = (child.stderr.take().unwrap(), stderr.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(r).lines() {
                let Ok(line) = line else { return };
                let mut s = into.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        Logged { child, stderr }
    }

    /// What it has written to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Whether it still runs.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Waits until stderr holds `text`; panics after `within` or if the process ends first.
    pub fn wait_for(&mut self, text: &str, within: Duration) -> String {
        let t0 = Instant::now();
        loop {
            let e = self.stderr();
            if e.contains(text) {
                return e;
            }
            if let Some(s) = self.child.try_wait().unwrap() {
                panic!("ended ({s}) before saying {text:?}: {e}");
            }
            assert!(t0.elapsed() < within, "no {text:?} within {within:?}: {e}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
