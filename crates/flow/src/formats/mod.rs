//! The file formats rules and packets are read from and written to.
//!
//! | format | read | write | module |
//! |---|---|---|---|
//! | ClassBench rules | yes | yes | [`classbench`] |
//! | ClassBench traces | yes | yes | [`trace`] |
//! | ovs-ofctl flows (`add-flows` files) | yes | yes | [`ofctl`] |
//! | pcap / pcapng frames → `FlowKey` (Ethernet, raw IP, cooked, loopback link types) | yes | pcap | [`pcap`] |
//! | either packet input, as a stream | yes | | [`packets`] |
//!
//! Every reader returns a [`crate::ParseError`] naming the file, the line (or packet) and column,
//! and what was expected there. xz, gzip and zstd files are decompressed transparently, and `-`
//! is standard input ([`crate::io`]). Packet inputs are read as streams, in constant memory;
//! rule files are read whole.

pub mod classbench;
pub(crate) mod cursor;
pub mod ofctl;
pub mod packets;
pub mod pcap;
pub mod trace;

/// How a rule file is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleFormat {
    ClassBench,
    Ofctl,
}

/// Guesses a rule file's format from its first non-blank line: `@` starts a ClassBench rule.
pub fn sniff_rule_format(text: &str) -> RuleFormat {
    let first = text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('#'));
    match first {
        Some(l) if l.starts_with('@') => RuleFormat::ClassBench,
        _ => RuleFormat::Ofctl,
    }
}

/// Reads a rule file of either format (ClassBench or ovs-ofctl flows), plain or xz.
pub fn read_rules(path: &std::path::Path) -> crate::Result<Vec<crate::Rule>> {
    let text = crate::io::read_text(path)?;
    parse_rules(&path.display().to_string(), &text)
}

/// Parses rule text of either format; `file` names the input in errors.
pub fn parse_rules(file: &str, text: &str) -> crate::Result<Vec<crate::Rule>> {
    match sniff_rule_format(text) {
        RuleFormat::ClassBench => classbench::parse_rules(file, text),
        RuleFormat::Ofctl => ofctl::parse_flows(file, text),
    }
}

/// One rule from one line of either format, with id `id` (what an embedding inserts).
///
/// A ClassBench line (starting with `@`) has no priority of its own: it gets
/// `classbench_priority`. An ovs-ofctl flow has its own (`priority=`, default 32768) and the
/// argument is not used. `file` and `line_no` name the input in errors.
pub fn parse_rule_line(
    file: &str,
    line_no: usize,
    line: &str,
    id: u32,
    classbench_priority: u32,
) -> crate::Result<crate::Rule> {
    if line.contains('\n') {
        return Err(crate::ParseError::at_line(file, line_no, 1, "expected one rule on one line, found a newline"));
    }
    match sniff_rule_format(line) {
        RuleFormat::ClassBench => {
            let f = classbench::parse_line(file, line_no, line.trim())?;
            let m = classbench::to_match(&f).map_err(|e| crate::ParseError::at_line(file, line_no, 1, e))?;
            Ok(crate::Rule::new(id, classbench_priority, m, crate::Actions::drop()))
        }
        RuleFormat::Ofctl => {
            let content = line.split('#').next().unwrap_or("");
            if content.trim().is_empty() {
                return Err(crate::ParseError::at_line(file, line_no, 1, "expected a rule, found an empty line"));
            }
            ofctl::parse_flow(file, line_no, content, id)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rule_line_of_either_format() {
        let r = parse_rule_line("x", 1, "@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0000/0x0000", 7, 99)
            .unwrap();
        assert_eq!((r.id.0, r.priority), (7, 99));
        assert_eq!(r.matches.tp_dst_range(), crate::PortRange::exact(80));
        let r = parse_rule_line("x", 1, "priority=5,tcp,tp_dst=22,actions=drop", 3, 99).unwrap();
        assert_eq!((r.id.0, r.priority), (3, 5));
        let e = parse_rule_line("x", 4, "@10.0.0.0/33 0.0.0.0/0 0 : 1 0 : 1 0x06/0xFF", 0, 1).unwrap_err();
        assert!(e.to_string().starts_with("x:4:"), "{e}");
        assert!(parse_rule_line("x", 1, "   ", 0, 1).is_err());
        assert!(parse_rule_line("x", 1, "tcp,actions=drop\ntcp,actions=drop", 0, 1).is_err());
    }
}
