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

    /// As [`Out::new`] for a command with `--json OUT` and `--csv OUT`: the summary goes to
    /// stderr when either goes to stdout; both to stdout is an error (one would corrupt the other).
    pub fn with_csv(json: Option<&Path>, csv: Option<&Path>) -> Result<Out, Failure> {
        let dash = |p: Option<&Path>| p.is_some_and(|p| p == Path::new("-"));
        if dash(json) && dash(csv) {
            return Err(Failure("--json - and --csv - would both write to stdout: give one of them a file".into()));
        }
        Ok(Out { to_stderr: dash(json) || dash(csv) })
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

pub use rqvs_experiment::report::{capture_json, cpu_model};

/// Writes `fields` as one JSON object to `path` (`-` = stdout), adding what every report carries
/// (`rqvs_experiment::report::envelope`: schema version, the build's provenance, CPU, kernel).
pub fn write_json(path: &Path, command: &str, fields: Map<String, Value>) -> Result<(), Failure> {
    let fields = rqvs_experiment::report::envelope(command, fields);
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

/// Writes a report's table (`rows`, the same objects as in its JSON report) as CSV to `path`
/// (`-` = stdout; see `rqvs_experiment::report::csv` for the columns).
pub fn write_csv(path: &Path, rows: &[Value]) -> Result<(), Failure> {
    let text = rqvs_experiment::report::csv(rows);
    if path == Path::new("-") {
        stdout(text.as_bytes());
        Ok(())
    } else {
        std::fs::write(path, text).map_err(|e| Failure(format!("{}: cannot write: {e}", path.display())))
    }
}

/// A path shown in reports.
pub fn show(p: &Option<PathBuf>, default: &str) -> String {
    p.as_ref().map_or_else(|| default.to_string(), |p| p.display().to_string())
}

/// One line about a capture: frames read, and what was skipped.
pub fn capture_line(c: &rqvs_flow::formats::pcap::CaptureStats) -> String {
    format!(
        "{} frames: {} IPv4, {} other; skipped {} truncated, {} malformed",
        c.frames, c.ipv4, c.other, c.truncated, c.malformed
    )
}
