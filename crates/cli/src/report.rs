//! Reports: the human summary and the `--json` object, with the machine and revision they came from.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::Failure;

/// Where the human summary goes: stdout, or stderr when the JSON object goes to stdout (so that
/// `--json -` prints one JSON object and nothing else on stdout).
#[derive(Clone, Copy)]
pub struct Out {
    to_stderr: bool,
}

impl Out {
    pub fn new(json: Option<&Path>) -> Out {
        Out { to_stderr: json.is_some_and(|p| p == Path::new("-")) }
    }

    /// One line of the summary (see [`stdout`] for what a failed write does).
    pub fn line(&self, s: impl AsRef<str>) {
        let mut line = String::with_capacity(s.as_ref().len() + 1);
        line.push_str(s.as_ref());
        line.push('\n');
        if self.to_stderr {
            // A summary that cannot reach stderr has nowhere to report that either.
            let _ = std::io::stderr().write_all(line.as_bytes());
        } else {
            stdout(line.as_bytes());
        }
    }
}

/// `outln!(out, "fmt", args…)`: one line of the summary through [`Out::line`]; `outln!(out)`
/// an empty line.
macro_rules! outln {
    ($out:expr) => {
        $out.line("")
    };
    ($out:expr, $($arg:tt)*) => {
        $out.line(format!($($arg)*))
    };
}
pub(crate) use outln;

/// Writes `bytes` to stdout and flushes. Every write to stdout goes through here, so that a
/// failed write ends the process the same way wherever it happens, by the error's kind (never by
/// a panic's text): a reader that closed the pipe early (`rqvs … | head`, `EPIPE`) ends it quietly
/// with status 0, as a filter killed by `SIGPIPE` would without the noise (Rust ignores
/// `SIGPIPE`, so the write returns the error instead); any other error (`ENOSPC` on
/// `/dev/full`, `EIO`) is a one-line `rqvs: error: stdout: …` and exit code 1.
pub fn stdout(bytes: &[u8]) {
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_all(bytes).and_then(|()| o.flush()) {
        stdout_failed(&e);
    }
}

/// Ends the process after a failed write to stdout (see [`stdout`]).
pub fn stdout_failed(e: &std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    let _ = writeln!(std::io::stderr(), "rqvs: error: stdout: {e}");
    std::process::exit(1);
}

/// The CPU model from /proc/cpuinfo, or "unknown".
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// The git revision the binary was built from (set by the build environment) or of the working
/// directory, or "unknown".
pub fn git_revision() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// Writes `fields` as one JSON object to `path` (`-` = stdout), adding `rqvs_version`, `git_rev`,
/// `cpu` and the learned index's SIMD `kernel`.
pub fn write_json(path: &Path, command: &str, mut fields: Map<String, Value>) -> Result<(), Failure> {
    fields.insert("command".into(), command.into());
    fields.insert("rqvs_version".into(), env!("CARGO_PKG_VERSION").into());
    fields.insert("git_rev".into(), git_revision().into());
    fields.insert("cpu".into(), cpu_model().into());
    fields.insert("kernel".into(), rqvs_rqrmi::Kernel::active().name().into());
    let text = serde_json::to_string_pretty(&Value::Object(fields))?;
    if path == Path::new("-") {
        stdout(format!("{text}\n").as_bytes());
    } else {
        let mut f =
            std::fs::File::create(path).map_err(|e| Failure(format!("{}: cannot write: {e}", path.display())))?;
        writeln!(f, "{text}").map_err(|e| Failure(format!("{}: cannot write: {e}", path.display())))?;
    }
    Ok(())
}

/// A path shown in reports.
pub fn show(p: &Option<PathBuf>, default: &str) -> String {
    p.as_ref().map_or_else(|| default.to_string(), |p| p.display().to_string())
}

/// The JSON of a capture's statistics.
pub fn capture_json(c: &rqvs_flow::formats::pcap::CaptureStats) -> Value {
    serde_json::json!({
        "frames": c.frames, "ipv4": c.ipv4, "other": c.other, "truncated": c.truncated,
        "malformed": c.malformed, "non_ethernet": c.non_ethernet,
    })
}

/// One line about a capture: frames read, and what was skipped.
pub fn capture_line(c: &rqvs_flow::formats::pcap::CaptureStats) -> String {
    format!(
        "{} frames: {} IPv4, {} other; skipped {} truncated, {} malformed, {} non-Ethernet",
        c.frames, c.ipv4, c.other, c.truncated, c.malformed, c.non_ethernet
    )
}
