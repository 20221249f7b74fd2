//! Reports: the human summary and the `--json` object, with the machine and revision they came from.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::Failure;

/// Where the human summary goes: stdout, or stderr when the JSON object goes to stdout.
pub struct Out {
    to_stderr: bool,
}

impl Out {
    pub fn new(json: Option<&Path>) -> Out {
        Out { to_stderr: json.is_some_and(|p| p == Path::new("-")) }
    }

    pub fn line(&self, s: impl AsRef<str>) {
        if self.to_stderr {
            eprintln!("{}", s.as_ref());
        } else {
            println!("{}", s.as_ref());
        }
    }
}

pub use rqvs_experiment::report::{capture_json, cpu_model};

/// Writes `fields` as one JSON object to `path` (`-` = stdout), adding `rqvs_version`, `git_rev`,
/// `cpu` and the learned index's SIMD `kernel`.
pub fn write_json(path: &Path, command: &str, fields: Map<String, Value>) -> Result<(), Failure> {
    let fields = rqvs_experiment::report::envelope(command, fields);
    let text = serde_json::to_string_pretty(&Value::Object(fields))?;
    if path == Path::new("-") {
        println!("{text}");
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

/// One line about a capture: frames read, and what was skipped.
pub fn capture_line(c: &rqvs_flow::formats::pcap::CaptureStats) -> String {
    format!(
        "{} frames: {} IPv4, {} other; skipped {} truncated, {} malformed, {} non-Ethernet",
        c.frames, c.ipv4, c.other, c.truncated, c.malformed, c.non_ethernet
    )
}
