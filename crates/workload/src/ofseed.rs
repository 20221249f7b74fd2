//! The `-openflow` section of a ClassBench-ng seed (Matoušek, Antichi, Lučanský, Moore, Kořenek:
//! "ClassBench-ng: Recasting ClassBench After a Decade of Network Evolution", ANCS 2017): what
//! its analyser found in a real OpenFlow table beyond the classic 5-tuple statistics.
//!
//! The section follows the classic sections and is YAML, as the analyser dumps it:
//!
//! ```text
//! -openflow
//! ---
//! in_port:
//!   '71': 2
//! eth_type:
//!   '0x800': 9502
//! dl_src:
//!   fa:16:3e: 838
//! dl_dst:
//!   '01:00:00': 85
//! unique_vlan_ids_count: 0
//! empty_rules_count: 3190
//! rule_distribution:
//! - attributes:
//!   - dl_dst
//!   - nw_dst
//!   count: 180
//! #
//! ```
//!
//! `in_port`, `eth_type`, `dl_src` and `dl_dst` map each value seen (for the MACs: the OUI, the
//! first three bytes) to how many rules had it; `rule_distribution` lists the combinations of
//! fields rules specified, with counts. Attribute names: `in_port`, `dl_src`, `dl_dst`,
//! `eth_type` (also `dl_type`), `dl_vlan`, `dl_pcp` (also `dl_vlan_pcp`), `nw_src`, `nw_dst`,
//! `nw_proto`, `nw_tos`, `tp_src`, `tp_dst`.
//!
//! The parser is a small hand-written one for exactly this subset (block mappings of scalars,
//! `{}` for an empty one, and the list of `attributes`/`count` items), not a YAML library: the
//! subset is a few lines of grammar, every error can name `file:line:column` and what was
//! expected, and the maintained-YAML-crate situation (serde_yaml is archived) would add a
//! dependency for no gain. Anything outside the subset (anchors, flow style, multi-line
//! scalars, unknown keys) is an error, never silently ignored.

use rqvs_flow::ParseError;

/// A field a rule of the analysed table specified (ClassBench-ng's attribute names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Attr {
    InPort,
    DlSrc,
    DlDst,
    EthType,
    DlVlan,
    DlPcp,
    NwSrc,
    NwDst,
    NwProto,
    NwTos,
    TpSrc,
    TpDst,
}

impl Attr {
    /// Every attribute, in the order combinations are printed.
    pub const ALL: [Attr; 12] = [
        Attr::InPort,
        Attr::DlSrc,
        Attr::DlDst,
        Attr::EthType,
        Attr::DlVlan,
        Attr::DlPcp,
        Attr::NwSrc,
        Attr::NwDst,
        Attr::NwProto,
        Attr::NwTos,
        Attr::TpSrc,
        Attr::TpDst,
    ];

    /// ClassBench-ng's name.
    pub fn name(self) -> &'static str {
        match self {
            Attr::InPort => "in_port",
            Attr::DlSrc => "dl_src",
            Attr::DlDst => "dl_dst",
            Attr::EthType => "eth_type",
            Attr::DlVlan => "dl_vlan",
            Attr::DlPcp => "dl_pcp",
            Attr::NwSrc => "nw_src",
            Attr::NwDst => "nw_dst",
            Attr::NwProto => "nw_proto",
            Attr::NwTos => "nw_tos",
            Attr::TpSrc => "tp_src",
            Attr::TpDst => "tp_dst",
        }
    }

    /// The attribute of a name (ClassBench-ng's, and the aliases its analyser versions used).
    pub fn parse(s: &str) -> Option<Attr> {
        Some(match s {
            "in_port" => Attr::InPort,
            "dl_src" => Attr::DlSrc,
            "dl_dst" => Attr::DlDst,
            "eth_type" | "dl_type" => Attr::EthType,
            "dl_vlan" => Attr::DlVlan,
            "dl_pcp" | "dl_vlan_pcp" => Attr::DlPcp,
            "nw_src" => Attr::NwSrc,
            "nw_dst" => Attr::NwDst,
            "nw_proto" => Attr::NwProto,
            "nw_tos" => Attr::NwTos,
            "tp_src" => Attr::TpSrc,
            "tp_dst" => Attr::TpDst,
            _ => return None,
        })
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// A set of attributes: the fields one rule specifies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Combination(pub u16);

impl Combination {
    pub fn has(self, a: Attr) -> bool {
        self.0 & a.bit() != 0
    }

    pub fn with(self, a: Attr) -> Combination {
        Combination(self.0 | a.bit())
    }

    pub fn attrs(self) -> impl Iterator<Item = Attr> {
        Attr::ALL.into_iter().filter(move |a| self.has(*a))
    }

    /// Does the combination specify a field of the IPv4 header or above (which needs
    /// `dl_type=0x0800` in OpenFlow)?
    pub fn has_ip(self) -> bool {
        [Attr::NwSrc, Attr::NwDst, Attr::NwProto, Attr::NwTos, Attr::TpSrc, Attr::TpDst].iter().any(|&a| self.has(a))
    }

    /// The names joined by `,` (`dl_dst,nw_dst`), `(empty)` for none.
    pub fn label(self) -> String {
        if self.0 == 0 {
            return "(empty)".into();
        }
        self.attrs().map(Attr::name).collect::<Vec<_>>().join(",")
    }
}

/// One entry of `rule_distribution`.
#[derive(Clone, Debug, PartialEq)]
pub struct CombinationCount {
    pub combination: Combination,
    pub count: u64,
    /// Line of the entry's `- ` in the seed file.
    pub line: usize,
}

/// A parsed `-openflow` section.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct OpenFlowSection {
    /// `(in_port, count)`, in file order.
    pub in_port: Vec<(u32, u64)>,
    /// `(ethertype, count)`.
    pub eth_type: Vec<(u16, u64)>,
    /// `(OUI, count)`.
    pub dl_src: Vec<([u8; 3], u64)>,
    pub dl_dst: Vec<([u8; 3], u64)>,
    pub unique_vlan_ids_count: u64,
    pub empty_rules_count: u64,
    pub rule_distribution: Vec<CombinationCount>,
    /// Line of `-openflow`.
    pub line: usize,
}

const KEYS: &str = "in_port, eth_type, dl_src, dl_dst, unique_vlan_ids_count, empty_rules_count, rule_distribution";

/// Finds and parses the `-openflow` section of seed-file text; `Ok(None)` when there is none.
pub fn parse(file: &str, text: &str) -> Result<Option<OpenFlowSection>, ParseError> {
    let lines: Vec<&str> = text.lines().collect();
    let Some(start) = lines.iter().position(|l| l.trim() == "-openflow") else { return Ok(None) };
    let mut p = Parser { file, lines: &lines, i: start + 1 };
    let mut sec = OpenFlowSection { line: start + 1, ..OpenFlowSection::default() };
    let mut seen: Vec<&str> = Vec::new();
    if p.peek().is_some_and(|l| l.trim() == "---") {
        p.i += 1;
    }
    loop {
        let Some(raw) = p.peek() else {
            return Err(ParseError::at_line(
                file,
                lines.len(),
                1,
                "expected a line '#' closing the -openflow section, found the end of the file",
            ));
        };
        let ln = p.i + 1;
        let t = raw.trim_end();
        if t.trim().is_empty() {
            p.i += 1;
            continue;
        }
        if t.trim() == "#" {
            break;
        }
        if indent(t) != 0 {
            return Err(ParseError::at_line(file, ln, 1, format!("expected a key at column 1 (one of {KEYS})")));
        }
        let (key, rest) = t.split_once(':').ok_or_else(|| {
            ParseError::at_line(file, ln, 1, format!("expected 'key:' (one of {KEYS}), found '{}'", clip(t)))
        })?;
        if seen.contains(&key) {
            return Err(ParseError::at_line(file, ln, 1, format!("key '{key}' appears twice")));
        }
        let rest = rest.trim();
        let value_col = t.len() - t[key.len() + 1..].trim_start().len() + 1;
        p.i += 1;
        match key {
            "in_port" => {
                sec.in_port = p.map(rest, value_col, "an OpenFlow port number 1..4294967040", |s| {
                    s.parse::<u32>().ok().filter(|&v| (1..=0xffff_ff00).contains(&v))
                })?
            }
            "eth_type" | "dl_type" => {
                sec.eth_type = p.map(rest, value_col, "an ethertype 0x600..0xffff in hex (0x800)", |s| {
                    s.strip_prefix("0x").and_then(|h| u16::from_str_radix(h, 16).ok()).filter(|&v| v >= 0x600)
                })?
            }
            "dl_src" | "dl_dst" => {
                let v = p.map(rest, value_col, "an OUI of three hex bytes (fa:16:3e)", parse_oui)?;
                if key == "dl_src" {
                    sec.dl_src = v;
                } else {
                    sec.dl_dst = v;
                }
            }
            "unique_vlan_ids_count" | "empty_rules_count" => {
                let v = rest.parse::<u64>().map_err(|_| {
                    ParseError::at_line(
                        file,
                        ln,
                        value_col,
                        format!("expected a count after '{key}:', found '{}'", clip(rest)),
                    )
                })?;
                if key == "unique_vlan_ids_count" {
                    if v > 4094 {
                        return Err(ParseError::at_line(
                            file,
                            ln,
                            value_col,
                            format!("expected at most 4094 VLAN ids, found {v}"),
                        ));
                    }
                    sec.unique_vlan_ids_count = v;
                } else {
                    sec.empty_rules_count = v;
                }
            }
            "rule_distribution" => sec.rule_distribution = p.distribution(rest, value_col)?,
            _ => {
                return Err(ParseError::at_line(file, ln, 1, format!("expected one of {KEYS}, found '{}'", clip(key))))
            }
        }
        seen.push(key);
    }
    let close = p.i + 1;
    if sec.rule_distribution.is_empty() {
        return Err(ParseError::at_line(
            file,
            close,
            1,
            "expected a 'rule_distribution' with at least one combination before the closing '#'",
        ));
    }
    sec.validate(file)?;
    Ok(Some(sec))
}

impl OpenFlowSection {
    /// Every value a combination needs has a distribution to be drawn from.
    fn validate(&self, file: &str) -> Result<(), ParseError> {
        for c in &self.rule_distribution {
            let missing = |what: &str| {
                ParseError::at_line(
                    file,
                    c.line,
                    1,
                    format!("combination {} uses {what}, but the section has none", c.combination.label()),
                )
            };
            let comb = c.combination;
            if comb.has(Attr::InPort) && self.in_port.is_empty() {
                return Err(missing("in_port (values under 'in_port:')"));
            }
            if comb.has(Attr::DlSrc) && self.dl_src.is_empty() {
                return Err(missing("dl_src (OUIs under 'dl_src:')"));
            }
            if comb.has(Attr::DlDst) && self.dl_dst.is_empty() {
                return Err(missing("dl_dst (OUIs under 'dl_dst:')"));
            }
            if comb.has(Attr::DlVlan) && self.unique_vlan_ids_count == 0 {
                return Err(missing("dl_vlan (a unique_vlan_ids_count above 0)"));
            }
            if comb.has(Attr::EthType) && !comb.has_ip() && self.eth_type.is_empty() {
                return Err(missing("eth_type without IP fields (values under 'eth_type:')"));
            }
        }
        Ok(())
    }
}

struct Parser<'a> {
    file: &'a str,
    lines: &'a [&'a str],
    /// Index of the next line.
    i: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&'a str> {
        self.lines.get(self.i).copied()
    }

    /// The block mapping `  key: count` under a key (`rest` is what followed the key's colon:
    /// empty, or `{}` for an empty mapping).
    fn map<T>(
        &mut self,
        rest: &str,
        rest_col: usize,
        what: &str,
        value: impl Fn(&str) -> Option<T>,
    ) -> Result<Vec<(T, u64)>, ParseError> {
        let ln = self.i;
        if rest == "{}" {
            return Ok(Vec::new());
        }
        if !rest.is_empty() {
            return Err(ParseError::at_line(
                self.file,
                ln,
                rest_col,
                format!("expected the values on the following lines ('  value: count'), found '{}'", clip(rest)),
            ));
        }
        let mut out = Vec::new();
        while let Some(raw) = self.peek() {
            let t = raw.trim_end();
            if t.trim().is_empty() {
                self.i += 1;
                continue;
            }
            if indent(t) == 0 {
                break;
            }
            let ln = self.i + 1;
            let col = indent(t) + 1;
            let body = t.trim_start();
            let (key, count) = split_entry(body).ok_or_else(|| {
                ParseError::at_line(self.file, ln, col, format!("expected 'value: count', found '{}'", clip(body)))
            })?;
            let v = value(key).ok_or_else(|| {
                ParseError::at_line(self.file, ln, col, format!("expected {what}, found '{}'", clip(key)))
            })?;
            let count_col = col + body.len() - count.len();
            let n = count.parse::<u64>().ok().filter(|&n| n > 0).ok_or_else(|| {
                ParseError::at_line(
                    self.file,
                    ln,
                    count_col,
                    format!("expected a positive count, found '{}'", clip(count)),
                )
            })?;
            out.push((v, n));
            self.i += 1;
        }
        if out.is_empty() {
            return Err(ParseError::at_line(
                self.file,
                ln,
                1,
                "expected at least one '  value: count' line (or '{}' for none)",
            ));
        }
        Ok(out)
    }

    /// The `rule_distribution` list.
    fn distribution(&mut self, rest: &str, rest_col: usize) -> Result<Vec<CombinationCount>, ParseError> {
        let ln0 = self.i;
        if !rest.is_empty() {
            return Err(ParseError::at_line(
                self.file,
                ln0,
                rest_col,
                format!("expected the combinations on the following lines ('- attributes:'), found '{}'", clip(rest)),
            ));
        }
        let mut out: Vec<CombinationCount> = Vec::new();
        // The indentation of the items' '-' (0 as the analyser writes it; 2 also accepted).
        let mut item_indent: Option<usize> = None;
        // Within an item: its keys' column, and whether we are inside its attribute list.
        let mut cur: Option<(usize, Option<Combination>, Option<u64>, bool)> = None;
        let finish = |cur: Option<(usize, Option<Combination>, Option<u64>, bool)>,
                      out: &mut Vec<CombinationCount>,
                      file: &str|
         -> Result<(), ParseError> {
            if let Some((line, comb, count, _)) = cur {
                let combination = comb.ok_or_else(|| {
                    ParseError::at_line(file, line, 1, "expected 'attributes:' in this rule_distribution item")
                })?;
                let count = count.ok_or_else(|| {
                    ParseError::at_line(file, line, 1, "expected 'count: N' in this rule_distribution item")
                })?;
                if let Some(prev) = out.iter().find(|c| c.combination == combination) {
                    return Err(ParseError::at_line(
                        file,
                        line,
                        1,
                        format!("combination {} appears twice (first at line {})", combination.label(), prev.line),
                    ));
                }
                out.push(CombinationCount { combination, count, line });
            }
            Ok(())
        };
        while let Some(raw) = self.peek() {
            let t = raw.trim_end();
            let ln = self.i + 1;
            if t.trim().is_empty() {
                self.i += 1;
                continue;
            }
            let ind = indent(t);
            let body = t.trim_start();
            let at = |col: usize, msg: String| ParseError::at_line(self.file, ln, col, msg);
            if body == "#" {
                break;
            }
            let item_ind = *item_indent.get_or_insert(ind);
            if ind < item_ind || (ind == 0 && !body.starts_with("- ")) {
                break;
            }
            let mut key_part = body;
            let key_col;
            if ind == item_ind {
                let Some(after) = body.strip_prefix("- ") else {
                    return Err(at(
                        ind + 1,
                        format!("expected '- attributes:' starting an item, found '{}'", clip(body)),
                    ));
                };
                finish(cur.take(), &mut out, self.file)?;
                cur = Some((ln, None, None, false));
                key_part = after.trim_start();
                key_col = ind + 1 + body.len() - key_part.len();
            } else {
                key_col = ind + 1;
            }
            let Some(c) = cur.as_mut() else {
                return Err(at(ind + 1, "expected '- attributes:' starting an item".into()));
            };
            let item_key_col = item_ind + 3;
            if let Some(name) = key_part.strip_prefix("- ") {
                // An attribute of the list, at the item's key column (or deeper).
                if !c.3 || key_col < item_key_col {
                    return Err(at(key_col, format!("expected 'attributes:' or 'count:', found '{}'", clip(key_part))));
                }
                let name = name.trim();
                let a = Attr::parse(name).ok_or_else(|| {
                    at(
                        key_col + 2,
                        format!(
                            "expected an attribute ({}), found '{}'",
                            Attr::ALL.map(Attr::name).join(", "),
                            clip(name)
                        ),
                    )
                })?;
                let comb = c.1.get_or_insert(Combination::default());
                if comb.has(a) {
                    return Err(at(key_col + 2, format!("attribute {} listed twice", a.name())));
                }
                *comb = comb.with(a);
                self.i += 1;
                continue;
            }
            if key_col != item_key_col {
                return Err(at(
                    key_col,
                    format!("expected 'attributes:' or 'count:' at column {item_key_col}, found '{}'", clip(key_part)),
                ));
            }
            c.3 = false;
            match key_part.split_once(':') {
                Some(("attributes", v)) if v.trim().is_empty() || v.trim() == "[]" => {
                    if c.1.is_some() {
                        return Err(at(key_col, "'attributes' appears twice in this item".into()));
                    }
                    c.1 = Some(Combination::default());
                    c.3 = v.trim().is_empty();
                }
                Some(("count", v)) => {
                    let v = v.trim();
                    let n =
                        v.parse::<u64>().ok().filter(|&n| n > 0).ok_or_else(|| {
                            at(key_col + 7, format!("expected a positive count, found '{}'", clip(v)))
                        })?;
                    if c.2.replace(n).is_some() {
                        return Err(at(key_col, "'count' appears twice in this item".into()));
                    }
                }
                _ => {
                    return Err(at(
                        key_col,
                        format!("expected 'attributes:' or 'count: N', found '{}'", clip(key_part)),
                    ))
                }
            }
            self.i += 1;
        }
        finish(cur.take(), &mut out, self.file)?;
        Ok(out)
    }
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// `key: value` with the key plain (up to the first `": "`) or single/double quoted.
fn split_entry(body: &str) -> Option<(&str, &str)> {
    let (key, rest) = match body.chars().next()? {
        q @ ('\'' | '"') => {
            let end = body[1..].find(q)? + 1;
            (&body[1..end], body[end + 1..].strip_prefix(':')?)
        }
        _ => {
            let at = body.find(": ")?;
            (&body[..at], &body[at + 1..])
        }
    };
    let value = rest.trim();
    (!value.is_empty() && rest.starts_with(' ')).then_some((key, value))
}

fn parse_oui(s: &str) -> Option<[u8; 3]> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 3 {
        return None;
    }
    let mut out = [0u8; 3];
    for (o, p) in out.iter_mut().zip(parts) {
        if p.len() != 2 {
            return None;
        }
        *o = u8::from_str_radix(p, 16).ok()?;
    }
    Some(out)
}

fn clip(s: &str) -> String {
    s.chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sec(name: &str) -> OpenFlowSection {
        let (file, text) = crate::seedfile::read(name).unwrap();
        parse(&file, &text).unwrap().unwrap()
    }

    #[test]
    fn both_seeds_parse() {
        let of1 = sec("of1");
        assert_eq!(of1.rule_distribution.len(), 17);
        assert_eq!(of1.rule_distribution.iter().map(|c| c.count).sum::<u64>(), 13_778);
        assert_eq!(of1.eth_type, vec![(0x800, 9502)]);
        assert_eq!(of1.dl_src, vec![([0xfa, 0x16, 0x3e], 838)]);
        assert_eq!(of1.dl_dst.len(), 8);
        assert_eq!(of1.dl_dst[5], ([1, 0, 0], 85));
        assert_eq!(of1.in_port[0], (71, 2));
        assert_eq!(of1.empty_rules_count, 3190);
        assert_eq!(of1.rule_distribution[0].combination.label(), "dl_dst");
        assert_eq!(of1.rule_distribution[2].combination.label(), "dl_src,eth_type,nw_src,nw_proto,tp_dst");
        let of2 = sec("of2");
        assert!(of2.rule_distribution.len() >= 10);
        assert!(parse("acl1", crate::seedfile::embedded("acl1").unwrap()).unwrap().is_none());
    }

    fn err(yaml: &str) -> String {
        parse("s_seed", &format!("-scale\n1\n#\n-openflow\n{yaml}#\n")).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_line_column_and_what_was_expected() {
        let ok = "---\nin_port:\n  '1': 2\nrule_distribution:\n- attributes:\n  - in_port\n  count: 3\n";
        assert!(parse("s_seed", &format!("-openflow\n{ok}#\n")).unwrap().is_some());
        assert_eq!(err("---\nin_port:\n  '1': x\n"), "s_seed:7:8: expected a positive count, found 'x'");
        assert_eq!(
            err("---\ndl_src:\n  fa:16: 3\n"),
            "s_seed:7:3: expected an OUI of three hex bytes (fa:16:3e), found 'fa:16'"
        );
        assert!(err("---\nfoo: 1\n").starts_with("s_seed:6:1: expected one of in_port"), "{}", err("---\nfoo: 1\n"));
        assert!(err("rule_distribution:\n- attributes:\n  - nw_ttl\n  count: 1\n")
            .starts_with("s_seed:7:5: expected an attribute (in_port"));
        assert_eq!(
            err("rule_distribution:\n- attributes:\n  - in_port\n  count: 1\n"),
            "s_seed:6:1: combination in_port uses in_port (values under 'in_port:'), but the section has none"
        );
        assert_eq!(
            err("rule_distribution:\n- attributes:\n  - nw_src\n"),
            "s_seed:6:1: expected 'count: N' in this rule_distribution item"
        );
        assert_eq!(
            err("in_port:\n  '1': 2\n"),
            "s_seed:7:1: expected a 'rule_distribution' with at least one combination before the closing '#'"
        );
        let e = parse("s_seed", "-openflow\n---\nin_port:\n  '1': 2\n").unwrap_err().to_string();
        assert!(e.starts_with("s_seed:4:1: expected a line '#'"), "{e}");
        assert!(err("in_port: 5\n").starts_with("s_seed:5:10: expected the values on the following lines"));
    }
}
