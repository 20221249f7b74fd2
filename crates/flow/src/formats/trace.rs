//! ClassBench trace files, read and written.
//!
//! A line: `src dst sport dport proto flags rule_index`, decimals separated by whitespace; the
//! seventh column may be absent. `flags` is `(value << 16) | mask` of the flags of the rule the
//! generator aimed at, not a packet value: rqvs takes `value` as the packet's flags, interpreted as
//! in [`crate::formats::classbench`] (TCP: high byte → `tcp_flags`; ICMP: `type<<8 | code` →
//! `tp_src`/`tp_dst`, replacing the line's port columns — for ICMP rqvs, like OVS, keeps type and
//! code where the ports are; when an ICMP line's flags column is 0 its port columns are kept).
//!
//! `rule_index` is the generator's *intended* rule. It is the true first match only ~98% of the
//! time: rqvs reports it and how often it differs, and never uses it as ground truth.
//!
//! Keys read from a trace have `in_port` 1, IPv4 `dl_type`, no MACs and no VLAN.

use std::fmt::Write as _;
use std::io::{BufRead, Read};
use std::path::Path;

use crate::error::{ParseError, Result};
use crate::formats::cursor::Cursor;
use crate::key::{FlowKey, IPPROTO_ICMP, IPPROTO_TCP};
use crate::rule::RuleId;

/// One trace header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceEntry {
    pub key: FlowKey,
    /// The raw flags column, `(value << 16) | mask`.
    pub flags_column: u32,
    /// The rule the generator aimed at (0-based ClassBench line), when the column is present.
    pub intended: Option<RuleId>,
}

impl TraceEntry {
    /// A trace entry for a packet: the flags column is derived from the key (TCP flag byte, or ICMP
    /// type and code), and there is no intended rule.
    pub fn from_key(key: FlowKey) -> TraceEntry {
        let flags_column = if key.is_ip() && key.nw_proto == IPPROTO_TCP && key.tcp_flags & 0xff != 0 {
            (u32::from(key.tcp_flags & 0xff) << 24) | 0xff00
        } else if key.is_ip() && key.nw_proto == IPPROTO_ICMP && key.tp_src <= 0xff && key.tp_dst <= 0xff {
            (u32::from(key.tp_src) << 24) | (u32::from(key.tp_dst) << 16) | 0xffff
        } else {
            0
        };
        TraceEntry { key, flags_column, intended: None }
    }
}

/// Reads a ClassBench trace file (plain or xz).
pub fn read_trace(path: &Path) -> Result<Vec<TraceEntry>> {
    let text = crate::io::read_text(path)?;
    parse_trace(&path.display().to_string(), &text)
}

/// The longest trace line [`TraceReader`] reads: a ClassBench line is under 80 bytes.
pub const MAX_LINE_LEN: usize = 64 << 10;

/// A ClassBench trace read line by line from any [`BufRead`], in constant memory; blank lines and
/// `#` comment lines are skipped, as [`parse_trace`] does, and errors are the same.
pub struct TraceReader<R> {
    name: String,
    src: R,
    line_no: usize,
    line: Vec<u8>,
    in_port: u32,
}

impl<R: BufRead> TraceReader<R> {
    /// `name` names the trace in errors.
    pub fn new(name: &str, src: R) -> TraceReader<R> {
        TraceReader { name: name.to_string(), src, line_no: 0, line: Vec::with_capacity(128), in_port: 1 }
    }

    /// Every key read gets `in_port` (default 1).
    pub fn with_in_port(self, in_port: u32) -> TraceReader<R> {
        TraceReader { in_port, ..self }
    }

    /// The next entry; `None` at the end of the trace.
    pub fn next_entry(&mut self) -> Result<Option<TraceEntry>> {
        loop {
            self.line.clear();
            self.line_no += 1;
            let n = (&mut self.src)
                .take(MAX_LINE_LEN as u64 + 1)
                .read_until(b'\n', &mut self.line)
                .map_err(|e| ParseError::at_line(&self.name, self.line_no, 1, format!("cannot read: {e}")))?;
            if n == 0 {
                return Ok(None);
            }
            if self.line.len() > MAX_LINE_LEN && !self.line.ends_with(b"\n") {
                return Err(ParseError::at_line(
                    &self.name,
                    self.line_no,
                    1,
                    format!("expected a trace line, found a line longer than {MAX_LINE_LEN} bytes"),
                ));
            }
            let mut bytes = &self.line[..];
            if self.line_no == 1 {
                bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
            }
            let text = std::str::from_utf8(bytes).map_err(|e| {
                let column = e.valid_up_to() + 1;
                ParseError::at_line(&self.name, self.line_no, column, "expected UTF-8 text, found a non-UTF-8 byte")
            })?;
            let text = text.strip_suffix('\n').unwrap_or(text);
            let text = text.strip_suffix('\r').unwrap_or(text);
            if text.trim().is_empty() || text.trim_start().starts_with('#') {
                continue;
            }
            let mut entry = parse_line(&self.name, self.line_no, text)?;
            entry.key.in_port = self.in_port;
            return Ok(Some(entry));
        }
    }
}

/// Parses ClassBench trace text; blank lines and `#` comment lines are skipped.
pub fn parse_trace(file: &str, text: &str) -> Result<Vec<TraceEntry>> {
    let mut out = Vec::with_capacity(text.len() / 40);
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        out.push(parse_line(file, i + 1, line)?);
    }
    Ok(out)
}

const COLUMNS: [&str; 7] = [
    "source address (decimal, column 1 of 7)",
    "destination address (decimal, column 2 of 7)",
    "source port 0..65535 (column 3 of 7)",
    "destination port 0..65535 (column 4 of 7)",
    "protocol 0..255 (column 5 of 7)",
    "flags column (decimal, column 6 of 7)",
    "intended rule index (column 7 of 7) or end of line",
];

/// Parses one trace line; `line_no` is 1-based.
pub fn parse_line(file: &str, line_no: usize, line: &str) -> Result<TraceEntry> {
    let mut c = Cursor::new(file, line_no, line);
    let max = [u64::from(u32::MAX), u64::from(u32::MAX), 65535, 65535, 255, u64::from(u32::MAX)];
    let mut v = [0u64; 6];
    for i in 0..6 {
        v[i] = c.decimal(max[i], COLUMNS[i])?;
    }
    c.skip_ws();
    let intended = if c.at_end() { None } else { Some(RuleId(c.decimal(u64::from(u32::MAX), COLUMNS[6])? as u32)) };
    c.skip_ws();
    if !c.at_end() {
        return Err(c.error("end of line after 7 columns"));
    }
    let (proto, flags_column) = (v[4] as u8, v[5] as u32);
    let mut key = FlowKey::ipv4(v[0] as u32, v[1] as u32, proto, v[2] as u16, v[3] as u16);
    let flags = (flags_column >> 16) as u16;
    match proto {
        IPPROTO_TCP => key.tcp_flags = flags >> 8,
        IPPROTO_ICMP if flags_column != 0 => {
            key.tp_src = flags >> 8;
            key.tp_dst = flags & 0xff;
        }
        _ => {}
    }
    Ok(TraceEntry { key, flags_column, intended })
}

/// Writes entries in ClassBench trace layout (tab-separated, one per line).
pub fn write_trace(entries: &[TraceEntry]) -> String {
    let mut out = String::with_capacity(entries.len() * 48);
    for e in entries {
        let k = &e.key;
        let _ =
            write!(out, "{}\t{}\t{}\t{}\t{}\t{}", k.nw_src, k.nw_dst, k.tp_src, k.tp_dst, k.nw_proto, e.flags_column);
        if let Some(id) = e.intended {
            let _ = write!(out, "\t{}", id.0);
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GOLDEN: &str = "3047714019\t3772336843\t0\t65535\t6\t268439552\t685\n\
242413771\t3772336841\t65535\t1525\t17\t0\t241\n\
167772161\t167772162\t8\t1\t1\t134348799\t3\n";

    #[test]
    fn golden() {
        let t = parse_trace("golden", GOLDEN).unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t[0].key.tcp_flags, 0x10);
        assert_eq!(t[0].intended, Some(RuleId(685)));
        assert_eq!(t[1].key.tp_src, 65535);
        // 134348799 = 0x0801ffff: ICMP type 8, code 1.
        assert_eq!((t[2].key.tp_src, t[2].key.tp_dst), (8, 1));
        assert_eq!(write_trace(&t), GOLDEN);
    }

    #[test]
    fn errors() {
        let e = parse_trace("t.trace", "1\t2\t3\t4\t6\n").unwrap_err().to_string();
        assert_eq!(e, "t.trace:1:10: expected flags column (decimal, column 6 of 7), found end of line");
        let e = parse_trace("t.trace", "1\t2\t3\t70000\t6\t0\t1\n").unwrap_err().to_string();
        assert!(e.starts_with("t.trace:1:7: expected destination port 0..65535"), "{e}");
        let e = parse_trace("t.trace", "\n\n1\t2\t3\t4\t6\t0\t1\t9\n").unwrap_err().to_string();
        assert!(e.starts_with("t.trace:3:") && e.contains("end of line after 7 columns"), "{e}");
        let e = parse_trace("t.trace", "1.2.3.4\t2\t3\t4\t6\t0\t1\n").unwrap_err().to_string();
        assert!(e.contains("expected destination address"), "{e}");
    }

    proptest! {
        #[test]
        fn round_trip(src: u32, dst: u32, sp: u16, dp: u16, proto in prop::sample::select(vec![1u8, 6, 17, 47]),
                      flags in 0u16..0x100, idx in prop::option::of(0u32..1_000_000)) {
            let mut key = FlowKey::ipv4(src, dst, proto, sp, dp);
            match proto {
                6 => key.tcp_flags = flags,
                1 => { key.tp_src = sp & 0xff; key.tp_dst = dp & 0xff; }
                _ => {}
            }
            let mut e = TraceEntry::from_key(key);
            e.intended = idx.map(RuleId);
            let back = parse_trace("p", &write_trace(&[e])).unwrap();
            prop_assert_eq!(back, vec![e]);
        }
    }
}
