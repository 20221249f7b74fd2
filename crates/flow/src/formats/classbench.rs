//! ClassBench rule files (Taylor & Turner, ToN 2007), read and written.
//!
//! A line: `@src/len  dst/len  sport_lo : sport_hi  dport_lo : dport_hi  proto/mask  flags/mask`,
//! fields separated by whitespace (the generator uses tabs and a trailing tab). The flags column
//! may be absent (older files). The first matching line wins: line `i` (0-based, counting rule
//! lines only) becomes rule id `i` with priority `n - i`. Blank lines and lines starting with
//! `#` (comments, as in ofctl files; the format sniffer skips them too) are not rules.
//!
//! Interpretation, which every rqvs component uses:
//! - Every rule requires IPv4 (`dl_type=0x0800`); addresses are prefixes (host bits beyond the
//!   prefix are ignored, as the generator never sets them); ports are native inclusive ranges.
//! - **Flags, TCP** (`proto` exactly 6): the high byte is the TCP flag byte (`0x1000/0x1000` = ACK
//!   set), matched against `tcp_flags`. A set bit in the low byte is an error.
//! - **Flags, ICMP** (`proto` exactly 1): the value is `type<<8 | code`. As in OVS, rqvs keeps the
//!   ICMP type in `tp_src` and the code in `tp_dst`, so a type (code) mask becomes a `tp_src`
//!   (`tp_dst`) mask that also requires the high byte to be zero, like `icmp_type=N` in OpenFlow.
//! - Flags on any other protocol are an error (the ClassBench generator never writes them).

use std::fmt::Write as _;
use std::path::Path;

use crate::error::{ParseError, Result};
use crate::formats::cursor::Cursor;
use crate::key::{FlowKey, ETH_TYPE_IP, IPPROTO_ICMP, IPPROTO_TCP};
use crate::matching::{Match, PortRange};
use crate::prefix::{prefix_len, prefix_mask};
use crate::rule::{Actions, Rule};

/// One parsed ClassBench line, before ids and priorities are assigned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassBenchFields {
    pub src: (u32, u8),
    pub dst: (u32, u8),
    pub sport: PortRange,
    pub dport: PortRange,
    pub proto: (u8, u8),
    pub flags: (u16, u16),
}

/// Reads a ClassBench rule file (plain or xz).
pub fn read_rules(path: &Path) -> Result<Vec<Rule>> {
    let text = crate::io::read_text(path)?;
    parse_rules(&path.display().to_string(), &text)
}

/// Parses ClassBench rule text; `file` names the input in errors. Blank lines are skipped.
pub fn parse_rules(file: &str, text: &str) -> Result<Vec<Rule>> {
    let mut matches = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let fields = parse_line(file, i + 1, line)?;
        let m = to_match(&fields).map_err(|msg| ParseError::at_line(file, i + 1, 1, msg))?;
        matches.push(m);
    }
    let n = matches.len() as u32;
    Ok(matches.into_iter().enumerate().map(|(i, m)| Rule::new(i as u32, n - i as u32, m, Actions::drop())).collect())
}

/// Parses one rule line (without its newline); `line_no` is 1-based.
pub fn parse_line(file: &str, line_no: usize, line: &str) -> Result<ClassBenchFields> {
    let mut c = Cursor::new(file, line_no, line);
    c.expect('@', "'@' at the start of a ClassBench rule")?;
    let src = prefix(&mut c, "source")?;
    let dst = prefix(&mut c, "destination")?;
    let sport = port_range(&mut c, "source port")?;
    let dport = port_range(&mut c, "destination port")?;
    let pv = c.hex(0xff, "protocol value like 0x06")? as u8;
    c.expect('/', "'/' between protocol value and mask")?;
    let pm_at = c.pos();
    let pm = c.hex(0xff, "protocol mask 0xFF or 0x00")? as u8;
    if pm != 0xff && pm != 0 {
        return Err(c.message_at(pm_at, format!("expected protocol mask 0xFF or 0x00, found {pm:#04x}")));
    }
    if pv & !pm != 0 {
        return Err(c.message_at(pm_at, format!("protocol value {pv:#04x} has bits outside mask {pm:#04x}")));
    }
    c.skip_ws();
    let flags = if c.at_end() {
        (0, 0)
    } else {
        let fv = c.hex(0xffff, "flags value like 0x1000")? as u16;
        c.expect('/', "'/' between flags value and mask")?;
        let fm_at = c.pos();
        let fm = c.hex(0xffff, "flags mask like 0x1000")? as u16;
        if fv & !fm != 0 {
            return Err(c.message_at(fm_at, format!("flags value {fv:#06x} has bits outside mask {fm:#06x}")));
        }
        (fv, fm)
    };
    c.skip_ws();
    if !c.at_end() {
        return Err(c.error("end of line after the flags column (7 columns in all)"));
    }
    Ok(ClassBenchFields { src, dst, sport, dport, proto: (pv, pm), flags })
}

fn prefix(c: &mut Cursor<'_>, what: &str) -> Result<(u32, u8)> {
    let addr = c.ipv4(&format!("{what} address like 10.0.0.0"))?;
    if !c.eat('/') {
        return Err(c.error(&format!("'/' and a prefix length after the {what} address")));
    }
    let at = c.pos();
    let len = c.decimal(32, &format!("{what} prefix length 0..32"));
    let len = len.map_err(|_| c.error_at(at, &format!("{what} prefix length 0..32")))? as u32;
    Ok((addr & prefix_mask(len, 32), len as u8))
}

fn port_range(c: &mut Cursor<'_>, what: &str) -> Result<PortRange> {
    c.skip_ws();
    let at = c.pos();
    let lo = c.decimal(65535, &format!("{what} range low end 0..65535"))? as u16;
    c.expect(':', &format!("':' in the {what} range 'lo : hi'"))?;
    let hi = c.decimal(65535, &format!("{what} range high end 0..65535"))? as u16;
    PortRange::new(lo, hi)
        .ok_or_else(|| c.message_at(at, format!("{what} range {lo} : {hi} is reversed (expected lo <= hi)")))
}

/// The rqvs match of a ClassBench line (see the module docs for the flags interpretation).
pub fn to_match(f: &ClassBenchFields) -> std::result::Result<Match, String> {
    let mut value = FlowKey::default();
    let mut mask = FlowKey::default();
    value.dl_type = ETH_TYPE_IP;
    mask.dl_type = u16::MAX;
    mask.nw_src = prefix_mask(u32::from(f.src.1), 32);
    value.nw_src = f.src.0 & mask.nw_src;
    mask.nw_dst = prefix_mask(u32::from(f.dst.1), 32);
    value.nw_dst = f.dst.0 & mask.nw_dst;
    value.nw_proto = f.proto.0;
    mask.nw_proto = f.proto.1;
    let (fv, fm) = f.flags;
    if fm != 0 {
        match (f.proto.0, f.proto.1) {
            (IPPROTO_TCP, 0xff) => {
                if fm & 0xff != 0 {
                    return Err(format!(
                        "flags {fv:#06x}/{fm:#06x}: for TCP only the high byte (the TCP flag byte) may be matched"
                    ));
                }
                value.tcp_flags = fv >> 8;
                mask.tcp_flags = fm >> 8;
            }
            (IPPROTO_ICMP, 0xff) => {
                let (tm, cm) = (fm >> 8, fm & 0xff);
                if tm != 0 {
                    mask.tp_src = 0xff00 | tm;
                    value.tp_src = (fv >> 8) & tm;
                }
                if cm != 0 {
                    mask.tp_dst = 0xff00 | cm;
                    value.tp_dst = fv & cm;
                }
            }
            (p, m) => {
                return Err(format!(
                    "flags {fv:#06x}/{fm:#06x} on protocol {p:#04x}/{m:#04x}: expected flags 0x0000/0x0000 (rqvs reads flags only for TCP and ICMP)"
                ))
            }
        }
    }
    Match::new(value, mask, f.sport, f.dport).map_err(|e| e.to_string())
}

/// The ClassBench fields of a match, when it has the shape of a ClassBench rule.
pub fn from_match(m: &Match) -> std::result::Result<ClassBenchFields, String> {
    let (v, k) = (m.value(), m.mask());
    if v.dl_type != ETH_TYPE_IP || k.dl_type != u16::MAX {
        return Err("ClassBench rules are IPv4 rules: dl_type must be exactly 0x0800".into());
    }
    let extra = FlowKey { nw_src: 0, nw_dst: 0, tp_src: 0, tp_dst: 0, dl_type: 0, tcp_flags: 0, nw_proto: 0, ..*k };
    if extra != FlowKey::default() {
        return Err("ClassBench rules match only addresses, ports, protocol and flags".into());
    }
    let src_len = prefix_len(k.nw_src, 32).ok_or("nw_src mask is not a prefix")?;
    let dst_len = prefix_len(k.nw_dst, 32).ok_or("nw_dst mask is not a prefix")?;
    if k.nw_proto != 0 && k.nw_proto != 0xff {
        return Err("nw_proto mask must be 0xFF or 0x00".into());
    }
    let proto = (v.nw_proto, k.nw_proto);
    let mut flags = (0u16, 0u16);
    if k.tcp_flags != 0 {
        if proto != (IPPROTO_TCP, 0xff) || k.tcp_flags > 0xff {
            return Err("tcp_flags can be written only for TCP and only in the flag byte".into());
        }
        flags = (v.tcp_flags << 8, k.tcp_flags << 8);
    }
    let (mut sport, mut dport) = (m.tp_src_range(), m.tp_dst_range());
    if k.tp_src != 0 || k.tp_dst != 0 {
        if proto == (IPPROTO_ICMP, 0xff) {
            // ICMP type and code live in the port fields: ClassBench writes them as flags.
            let tm = icmp_byte_mask(k.tp_src).ok_or("ICMP type/code masks must cover whole bytes")?;
            let cm = icmp_byte_mask(k.tp_dst).ok_or("ICMP type/code masks must cover whole bytes")?;
            flags = ((v.tp_src << 8) | v.tp_dst, (tm << 8) | cm);
        } else {
            // An exact port or a prefix of ports (what port-range expansion writes) is a range.
            sport = m.tp_src_interval().ok_or("a tp_src mask that is not a prefix has no ClassBench port range")?;
            dport = m.tp_dst_interval().ok_or("a tp_dst mask that is not a prefix has no ClassBench port range")?;
        }
    }
    Ok(ClassBenchFields { src: (v.nw_src, src_len as u8), dst: (v.nw_dst, dst_len as u8), sport, dport, proto, flags })
}

/// `0xff00 | byte_mask` → `byte_mask`; `0` → `0`; anything else is not an ICMP type/code mask.
fn icmp_byte_mask(m: u16) -> Option<u16> {
    match m {
        0 => Some(0),
        m if m & 0xff00 == 0xff00 && m & 0xff != 0 => Some(m & 0xff),
        _ => None,
    }
}

/// One rule line in the generator's own layout (tabs, trailing tab), without a newline.
pub fn format_line(f: &ClassBenchFields) -> String {
    let mut s = String::with_capacity(96);
    let ip = |a: u32| std::net::Ipv4Addr::from(a);
    let _ = write!(
        s,
        "@{}/{}\t{}/{}\t{} : {}\t{} : {}\t0x{:02x}/0x{:02X}\t0x{:04x}/0x{:04x}\t",
        ip(f.src.0),
        f.src.1,
        ip(f.dst.0),
        f.dst.1,
        f.sport.lo,
        f.sport.hi,
        f.dport.lo,
        f.dport.hi,
        f.proto.0,
        f.proto.1,
        f.flags.0,
        f.flags.1
    );
    s
}

/// Writes rules as a ClassBench file, in winner order (the file is first-match). Fails on the
/// first rule that has no ClassBench form, naming its id.
pub fn write_rules(rules: &[Rule]) -> std::result::Result<String, String> {
    let mut sorted: Vec<&Rule> = rules.iter().collect();
    sorted.sort_by_key(|r| r.rank());
    let mut out = String::with_capacity(rules.len() * 80);
    for r in sorted {
        let f = from_match(&r.matches).map_err(|e| format!("rule {}: {e}", r.id))?;
        out.push_str(&format_line(&f));
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOLDEN: &str = "@14.114.240.160/32\t78.162.59.75/32\t0 : 65535\t31000 : 31000\t0x06/0xFF\t0x1000/0x1000\t\n\
@10.0.0.0/8\t0.0.0.0/0\t1024 : 65535\t20 : 21\t0x11/0xFF\t0x0000/0x0000\t\n\
@0.0.0.0/0\t192.168.0.0/16\t0 : 65535\t0 : 65535\t0x01/0xFF\t0x0800/0xff00\t\n\
@0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000\t\n";

    #[test]
    fn golden_round_trip() {
        let rules = parse_rules("golden", GOLDEN).unwrap();
        assert_eq!(rules.len(), 4);
        assert_eq!(rules[0].priority, 4);
        assert_eq!(rules[3].priority, 1);
        assert_eq!(rules[0].matches.mask().tcp_flags, 0x10);
        assert_eq!(rules[2].matches.value().tp_src, 8);
        assert_eq!(rules[2].matches.mask().tp_src, 0xffff);
        assert_eq!(rules[1].matches.tp_dst_range(), PortRange { lo: 20, hi: 21 });
        assert_eq!(write_rules(&rules).unwrap(), GOLDEN);
    }

    #[test]
    fn icmp_type_matches_like_openflow() {
        let rules =
            parse_rules("t", "@0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x01/0xFF\t0x0800/0xff00\t").unwrap();
        let m = &rules[0].matches;
        assert!(m.matches(&FlowKey::ipv4(1, 2, 1, 8, 0)));
        assert!(!m.matches(&FlowKey::ipv4(1, 2, 1, 0xff08, 0)));
        assert!(!m.matches(&FlowKey::ipv4(1, 2, 1, 0, 0)));
    }

    fn err(line: &str) -> String {
        parse_rules("r.txt", line).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_file_line_column() {
        assert_eq!(
            err("@1.2.3.4/33\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x06/0xFF\t0x0000/0x0000"),
            "r.txt:1:10: expected source prefix length 0..32, found '33'"
        );
        assert_eq!(
            err("@1.2.3.256/32\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x06/0xFF\t0x0000/0x0000"),
            "r.txt:1:2: expected source address like 10.0.0.0, found '1.2.3.256/32'"
        );
        assert_eq!(
            err("@1.2.3.4/32\t0.0.0.0/0\t9 : 5\t0 : 65535\t0x06/0xFF\t0x0000/0x0000"),
            "r.txt:1:23: source port range 9 : 5 is reversed (expected lo <= hi)"
        );
        assert!(err("@1.2.3.4/32\t0.0.0.0/0\t0 : 65535\t0x06/0xFF").contains("expected ':'"));
        assert!(err("@1.2.3.4/32\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x06/0xFF\t0x0000/0x0000\textra")
            .contains("expected end of line"));
        assert!(err("\n1.2.3.4/32").starts_with("r.txt:2:1: expected '@'"));
        assert!(err("@0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x11/0xFF\t0x1000/0x1000")
            .contains("rqvs reads flags only for TCP and ICMP"));
        assert!(err("@0.0.0.0/0\t0.0.0.0/0\t0 : 65536\t0 : 65535\t0x11/0xFF\t0x0000/0x0000").contains("at most 65535"));
    }
}
