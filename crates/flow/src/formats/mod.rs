//! The file formats rules and packets are read from and written to.
//!
//! | format | read | write | module |
//! |---|---|---|---|
//! | ClassBench rules | yes | yes | [`classbench`] |
//! | ClassBench traces | yes | yes | [`trace`] |
//! | ovs-ofctl flows (`add-flows` files) | yes | yes | [`ofctl`] |
//! | pcap / pcapng frames → `FlowKey` | yes | pcap | [`pcap`] |
//!
//! Every reader returns a [`crate::ParseError`] naming the file, the line (or packet) and column,
//! and what was expected there. `.xz` files are decompressed transparently.

pub mod classbench;
pub(crate) mod cursor;
pub mod ofctl;
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
