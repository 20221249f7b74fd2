//! Diagnostics: every line rqvs writes to stderr goes through here, so that writing to a full or
//! closed stderr (`2>/dev/full`, a closed pipe) never panics — a line that cannot be written is
//! dropped — and the switch's log lines carry their time and level and can go to a file too.
//!
//! - [`line()`] ([`crate::diag!`]): a plain line (a command's error, `rqvs: error: …`).
//! - [`log()`] ([`crate::log_error!`], [`crate::log_warn!`], [`crate::log_info!`],
//!   [`crate::log_debug!`]): a log line of the running switch, `2026-11-28T13:35:30.123Z WARN
//!   rqvs switch: port p1: link down: no carrier` (UTC, milliseconds), written when its level is
//!   at most the current one ([`set_level`]: `info` by default; `rqvs switch -v` makes it `debug`;
//!   `rqvs ctl vlog/set LEVEL` changes it while the switch runs).
//!
//! With [`set_log_file`] (`rqvs switch --log-file FILE`) every line also goes to the file
//! (appended, created if needed), whatever happens to stderr. [`reopen_log_file`] (SIGHUP, or
//! `ovs-appctl vlog/reopen` as OVS's logrotate configuration sends it) closes the file and opens
//! the path again, so a rotated log continues in a new file.

use std::fmt;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// How serious a log line is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error = 0,
    Warn = 1,
    Info = 2,
    Debug = 3,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Error => "ERROR",
            Level::Warn => "WARN",
            Level::Info => "INFO",
            Level::Debug => "DEBUG",
        }
    }

    /// `error`, `warn`, `info`, `debug` (any case; OVS's `err`, `dbg` and `emer` too).
    pub fn parse(s: &str) -> Option<Level> {
        match s.to_ascii_lowercase().as_str() {
            "error" | "err" | "emer" => Some(Level::Error),
            "warn" | "warning" => Some(Level::Warn),
            "info" => Some(Level::Info),
            "debug" | "dbg" => Some(Level::Debug),
            _ => None,
        }
    }

    fn from_u8(v: u8) -> Level {
        match v {
            0 => Level::Error,
            1 => Level::Warn,
            2 => Level::Info,
            _ => Level::Debug,
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);
static FILE: Mutex<Option<(std::path::PathBuf, std::fs::File)>> = Mutex::new(None);

/// Log lines up to `level` are written from now on.
pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// The current level.
pub fn level() -> Level {
    Level::from_u8(LEVEL.load(Ordering::Relaxed))
}

/// Whether a log line of `level` would be written.
pub fn enabled(level: Level) -> bool {
    level as u8 <= LEVEL.load(Ordering::Relaxed)
}

/// Every line from now on also goes to `path` (appended; created if needed).
pub fn set_log_file(path: &Path) -> std::io::Result<()> {
    let f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    *FILE.lock().unwrap_or_else(|e| e.into_inner()) = Some((path.to_path_buf(), f));
    Ok(())
}

/// Closes the log file and opens its path again (after a rotation). `Ok(None)` when there is no
/// log file; on an error the old file is kept and written to.
pub fn reopen_log_file() -> std::io::Result<Option<std::path::PathBuf>> {
    let mut file = FILE.lock().unwrap_or_else(|e| e.into_inner());
    let Some((path, f)) = file.as_mut() else { return Ok(None) };
    *f = std::fs::OpenOptions::new().create(true).append(true).open(&*path)?;
    Ok(Some(path.clone()))
}

/// Writes `text` (whole lines) to stderr and the log file; failures are ignored.
fn emit(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
    if let Some((_, f)) = FILE.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        let _ = f.write_all(text.as_bytes());
    }
}

/// A plain line (no time, no level).
pub fn line(args: fmt::Arguments<'_>) {
    emit(&format!("{args}\n"));
}

/// A log line, if `level` is enabled.
pub fn log(level: Level, args: fmt::Arguments<'_>) {
    if enabled(level) {
        emit(&format!("{} {:<5} {args}\n", timestamp(SystemTime::now()), level.name()));
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC).
pub fn timestamp(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Days since 1970-01-01 to a civil date (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// A plain line to stderr that never panics ([`line()`]).
#[macro_export]
macro_rules! diag {
    ($($t:tt)*) => { $crate::diag::line(format_args!($($t)*)) };
}

/// A log line at level ERROR ([`log()`]).
#[macro_export]
macro_rules! log_error {
    ($($t:tt)*) => { $crate::diag::log($crate::diag::Level::Error, format_args!($($t)*)) };
}

/// A log line at level WARN ([`log()`]).
#[macro_export]
macro_rules! log_warn {
    ($($t:tt)*) => { $crate::diag::log($crate::diag::Level::Warn, format_args!($($t)*)) };
}

/// A log line at level INFO ([`log()`]).
#[macro_export]
macro_rules! log_info {
    ($($t:tt)*) => { $crate::diag::log($crate::diag::Level::Info, format_args!($($t)*)) };
}

/// A log line at level DEBUG ([`log()`]).
#[macro_export]
macro_rules! log_debug {
    ($($t:tt)*) => { $crate::diag::log($crate::diag::Level::Debug, format_args!($($t)*)) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_utc_civil_dates() {
        assert_eq!(timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        // 2000-02-29 (a leap day) 12:34:56.789 = 951827696.789 s (date -u -d @951827696).
        assert_eq!(timestamp(UNIX_EPOCH + Duration::from_millis(951_827_696_789)), "2000-02-29T12:34:56.789Z");
        // 2026-11-28 13:35:30 = 1795872930 (date -u -d @1795872930).
        assert_eq!(timestamp(UNIX_EPOCH + Duration::from_secs(1_795_872_930)), "2026-11-28T13:35:30.000Z");
    }

    #[test]
    fn levels_parse_and_order() {
        assert_eq!(Level::parse("DBG"), Some(Level::Debug));
        assert_eq!(Level::parse("warn"), Some(Level::Warn));
        assert_eq!(Level::parse("loud"), None);
        assert!(Level::Error < Level::Debug);
    }
}
