//! ClassBench parameter ("seed") files: the statistics of a real filter set that `db_generator`
//! (and [`crate::rules`]) reproduce.
//!
//! A seed file is a sequence of sections, each a line `-name` followed by data lines and ended by a
//! line `#`. The sections, in the order the original writes them:
//!
//! | section | data lines |
//! |---|---|
//! | `-scale` | the size of the set the statistics were taken from |
//! | `-prots` | `proto prob p_0 … p_24`: protocol frequency and its 25 port-pair class probabilities |
//! | `-flags` | `proto 0xVVVV/0xMMMM,prob …`: flag specifications per protocol |
//! | `-extra` | number of extra fields (rqvs supports 0, which all 12 seeds have) |
//! | `-spar -spem -dpar -dpem` | `prob lo:hi`: arbitrary ranges / exact ports, source and destination |
//! | `-wc_wc` … `-em_em` (25) | `total,prob slen,prob …`: total prefix length (0..64) and, given it, the source length |
//! | `-snest`, `-dnest` | the prefix nesting threshold of the source / destination trie |
//! | `-sskew`, `-dskew` | `level p1 p2 skew` for levels 0..32: one-child / two-child probability and skew |
//! | `-pcorr` | `level corr`: probability that the destination follows the source at that level |
//!
//! Port-pair classes are numbered as in the original (`PORT_PAIR_CLASSES`): WC wildcard, HI
//! 1024:65535, LO 0:1023, AR an arbitrary range, EM an exact port.
//!
//! Parsing is strict where the original (`fscanf`) was lax: a malformed data line is an error
//! naming `file:line:column` and what was expected, never silently the end of a section.

use rqvs_flow::{ParseError, PortRange};

/// The 25 port-pair classes, in the original's numbering (`source_destination`).
pub const PORT_PAIR_CLASSES: [&str; 25] = [
    "wc_wc", "wc_hi", "hi_wc", "hi_hi", "wc_lo", "lo_wc", "hi_lo", "lo_hi", "lo_lo", "wc_ar", "ar_wc", "hi_ar",
    "ar_hi", "wc_em", "em_wc", "hi_em", "em_hi", "lo_ar", "ar_lo", "lo_em", "em_lo", "ar_ar", "ar_em", "em_ar",
    "em_em",
];

/// The names of the 12 seed files shipped with ClassBench.
pub const SEEDS: [&str; 12] =
    ["acl1", "acl2", "acl3", "acl4", "acl5", "fw1", "fw2", "fw3", "fw4", "fw5", "ipc1", "ipc2"];

/// One protocol of `-prots`.
#[derive(Clone, Debug, PartialEq)]
pub struct Protocol {
    pub proto: u8,
    pub prob: f64,
    /// Probability of each port-pair class for this protocol.
    pub port_pairs: [f64; 25],
    /// Line in the file (for errors found later).
    pub line: usize,
}

/// One flag specification of `-flags`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlagSpec {
    pub value: u16,
    pub mask: u16,
    pub prob: f64,
}

/// One total prefix length of a port-pair class, with its source-length distribution.
#[derive(Clone, Debug, PartialEq)]
pub struct TotalLength {
    pub total: u8,
    pub prob: f64,
    /// `(source length, probability)`.
    pub source: Vec<(u8, f64)>,
    pub line: usize,
}

/// Trie parameters of one level (`-sskew`/`-dskew`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Skew {
    /// Probability that a node at this level has one child.
    pub p1: f64,
    /// Probability that it has two.
    pub p2: f64,
    /// Skew of a two-child node: 1 − (lighter subtree / heavier subtree).
    pub skew: f64,
}

/// A parsed seed file.
#[derive(Clone, Debug, PartialEq)]
pub struct SeedFile {
    pub name: String,
    pub scale: u32,
    pub protocols: Vec<Protocol>,
    /// `(protocol, specifications)`.
    pub flags: Vec<(u8, Vec<FlagSpec>)>,
    pub sport_ranges: Vec<(f64, PortRange)>,
    pub sport_exact: Vec<(f64, PortRange)>,
    pub dport_ranges: Vec<(f64, PortRange)>,
    pub dport_exact: Vec<(f64, PortRange)>,
    /// Prefix-length distributions per port-pair class.
    pub prefix_lengths: Vec<Vec<TotalLength>>,
    pub snest: u32,
    pub sskew: [Skew; 33],
    pub dnest: u32,
    pub dskew: [Skew; 33],
    pub pcorr: [f64; 33],
}

/// The names of the two OpenFlow seeds published with ClassBench-ng (Matoušek et al., ANCS 2017):
/// a classic seed followed by an `-openflow` section ([`crate::ofseed`]).
pub const OPENFLOW_SEEDS: [&str; 2] = ["of1", "of2"];

/// The text of a seed file shipped with ClassBench (`acl1` … `ipc2`) or ClassBench-ng (`of1`,
/// `of2`), embedded in the crate (`crates/workload/seeds/`, copies of ClassBench's
/// `parameter_files` and of ClassBench-ng's `seeds/`, MIT licence in
/// `seeds/classbench-ng-LICENSE.txt`), so that a program needs no data directory; `None` for any
/// other name.
pub fn embedded(name: &str) -> Option<&'static str> {
    macro_rules! seeds {
        ($($n:literal),*) => {
            match name {
                $($n => Some(include_str!(concat!("../seeds/", $n, "_seed"))),)*
                _ => None,
            }
        };
    }
    seeds!("acl1", "acl2", "acl3", "acl4", "acl5", "fw1", "fw2", "fw3", "fw4", "fw5", "ipc1", "ipc2", "of1", "of2")
}

/// The name errors give a seed (`<seed acl1>` for an embedded one, else the path) and its text.
pub fn read(name_or_path: &str) -> Result<(String, std::borrow::Cow<'static, str>), String> {
    if let Some(text) = embedded(name_or_path) {
        return Ok((format!("<seed {name_or_path}>"), std::borrow::Cow::Borrowed(text)));
    }
    let path = std::path::Path::new(name_or_path);
    let text = rqvs_flow::io::read_text(path).map_err(|e| e.to_string())?;
    Ok((path.display().to_string(), std::borrow::Cow::Owned(text)))
}

struct Section<'a> {
    name: &'a str,
    line: usize,
    /// `(line number, text)` of each data line.
    data: Vec<(usize, &'a str)>,
}

/// Reads a seed file: `acl1` … `ipc2` name an [`embedded`] seed (errors name it `<seed acl1>`);
/// anything else is the path of a seed file (plain or `.xz`).
pub fn load(name_or_path: &str) -> Result<SeedFile, String> {
    let (name, text) = read(name_or_path)?;
    parse(&name, &text).map_err(|e| e.to_string())
}

/// Parses seed-file text; `file` names it in errors.
pub fn parse(file: &str, text: &str) -> Result<SeedFile, ParseError> {
    let sections = split_sections(file, text)?;
    let find = |name: &str| -> Result<&Section<'_>, ParseError> {
        sections.iter().find(|s| s.name == name).ok_or_else(|| {
            ParseError::in_file(file, format!("expected a section '-{name}' (a ClassBench seed file has -scale, -prots, -flags, -extra, -spar, -spem, -dpar, -dpem, 25 port-pair sections, -snest, -sskew, -dnest, -dskew, -pcorr)"))
        })
    };
    let scale_sec = find("scale")?;
    let scale = single_int(file, scale_sec, "the size of the original set (a positive integer)")? as u32;
    if scale == 0 {
        return Err(ParseError::at_line(file, scale_sec.line + 1, 1, "expected a positive scale, found '0'"));
    }
    let mut protocols = Vec::new();
    for &(ln, l) in &find("prots")?.data {
        let toks = tokens(l);
        if toks.len() != 27 {
            return Err(ParseError::at_line(
                file,
                ln,
                1,
                format!(
                    "expected 27 columns (protocol, probability, 25 port-pair probabilities), found {}",
                    toks.len()
                ),
            ));
        }
        let proto = int(file, ln, toks[0], 255, "protocol number 0..255")? as u8;
        let prob = prob(file, ln, toks[1])?;
        let mut port_pairs = [0.0; 25];
        for (i, t) in toks[2..].iter().enumerate() {
            port_pairs[i] = self::prob(file, ln, *t)?;
        }
        protocols.push(Protocol { proto, prob, port_pairs, line: ln });
    }
    if protocols.is_empty() {
        let s = find("prots")?;
        return Err(ParseError::at_line(file, s.line + 1, 1, "expected at least one protocol line under -prots"));
    }
    let mut flags = Vec::new();
    for &(ln, l) in &find("flags")?.data {
        let toks = tokens(l);
        let proto = int(file, ln, toks[0], 255, "protocol number 0..255")? as u8;
        let mut specs = Vec::new();
        for t in &toks[1..] {
            let (spec, p) = t.text.split_once(',').ok_or_else(|| err(file, ln, *t, "flags like 0x1000/0x1000,0.5"))?;
            let (v, m) = spec.split_once('/').ok_or_else(|| err(file, ln, *t, "flags like 0x1000/0x1000,0.5"))?;
            let hex = |s: &str| {
                s.strip_prefix("0x")
                    .and_then(|h| u16::from_str_radix(h, 16).ok())
                    .ok_or_else(|| err(file, ln, *t, "flags like 0x1000/0x1000,0.5"))
            };
            let (value, mask) = (hex(v)?, hex(m)?);
            let p: f64 = p.parse().map_err(|_| err(file, ln, *t, "flags like 0x1000/0x1000,0.5"))?;
            specs.push(FlagSpec { value: value & mask, mask, prob: p });
        }
        flags.push((proto, specs));
    }
    let extra = single_int(file, find("extra")?, "the number of extra fields")?;
    if extra != 0 {
        let s = find("extra")?;
        return Err(ParseError::at_line(
            file,
            s.line + 1,
            1,
            format!("expected 0 extra fields (rqvs generates the standard 5 fields and flags), found '{extra}'"),
        ));
    }
    let ports = |name: &str| -> Result<Vec<(f64, PortRange)>, ParseError> {
        let mut out = Vec::new();
        for &(ln, l) in &find(name)?.data {
            let toks = tokens(l);
            if toks.len() != 2 {
                return Err(ParseError::at_line(file, ln, 1, "expected 'probability lo:hi'"));
            }
            let p = prob(file, ln, toks[0])?;
            let (lo, hi) = toks[1].text.split_once(':').ok_or_else(|| err(file, ln, toks[1], "a port range lo:hi"))?;
            let lo = int(file, ln, Tok { text: lo, col: toks[1].col }, 65535, "port 0..65535")? as u16;
            let hi = int(file, ln, Tok { text: hi, col: toks[1].col }, 65535, "port 0..65535")? as u16;
            let r = PortRange::new(lo, hi).ok_or_else(|| err(file, ln, toks[1], "a port range with lo <= hi"))?;
            out.push((p, r));
        }
        Ok(out)
    };
    let (sport_ranges, sport_exact) = (ports("spar")?, ports("spem")?);
    let (dport_ranges, dport_exact) = (ports("dpar")?, ports("dpem")?);
    let mut prefix_lengths = Vec::with_capacity(25);
    for class in PORT_PAIR_CLASSES {
        let mut v = Vec::new();
        for &(ln, l) in &find(class)?.data {
            let toks = tokens(l);
            let mut pairs = Vec::new();
            for t in &toks {
                let (a, b) = t.text.split_once(',').ok_or_else(|| err(file, ln, *t, "length,probability"))?;
                let len = int(file, ln, Tok { text: a, col: t.col }, 64, "prefix length")? as u8;
                let p = prob(file, ln, Tok { text: b, col: t.col })?;
                pairs.push((len, p));
            }
            let (total, p) = pairs[0];
            let source = pairs[1..].to_vec();
            if let Some(&(s, _)) = source.iter().find(|&&(s, _)| s > 32) {
                return Err(ParseError::at_line(file, ln, 1, format!("expected source lengths 0..32, found '{s}'")));
            }
            v.push(TotalLength { total, prob: p, source, line: ln });
        }
        prefix_lengths.push(v);
    }
    let snest = single_int(file, find("snest")?, "the source nesting threshold")? as u32;
    let dnest = single_int(file, find("dnest")?, "the destination nesting threshold")? as u32;
    let skew = |name: &str| -> Result<[Skew; 33], ParseError> {
        let mut out = [Skew::default(); 33];
        for &(ln, l) in &find(name)?.data {
            let toks = tokens(l);
            if toks.len() != 4 {
                return Err(ParseError::at_line(file, ln, 1, "expected 'level p1 p2 skew' (4 columns)"));
            }
            let level = int(file, ln, toks[0], 32, "level 0..32")? as usize;
            out[level] =
                Skew { p1: prob(file, ln, toks[1])?, p2: prob(file, ln, toks[2])?, skew: prob(file, ln, toks[3])? };
        }
        Ok(out)
    };
    let (sskew, dskew) = (skew("sskew")?, skew("dskew")?);
    let mut pcorr = [0.0; 33];
    for &(ln, l) in &find("pcorr")?.data {
        let toks = tokens(l);
        if toks.len() != 2 {
            return Err(ParseError::at_line(file, ln, 1, "expected 'level correlation' (2 columns)"));
        }
        let level = int(file, ln, toks[0], 32, "level 0..32")? as usize;
        pcorr[level] = prob(file, ln, toks[1])?;
    }
    let seed = SeedFile {
        name: file.to_string(),
        scale,
        protocols,
        flags,
        sport_ranges,
        sport_exact,
        dport_ranges,
        dport_exact,
        prefix_lengths,
        snest,
        sskew,
        dnest,
        dskew,
        pcorr,
    };
    seed.validate()?;
    Ok(seed)
}

impl SeedFile {
    /// Checks that every class a protocol can draw has what the generator needs to fill it.
    fn validate(&self) -> Result<(), ParseError> {
        for p in &self.protocols {
            for (c, &pp) in p.port_pairs.iter().enumerate() {
                if pp <= 0.0 {
                    continue;
                }
                let name = PORT_PAIR_CLASSES[c];
                let usable = self.prefix_lengths[c].iter().any(|t| {
                    t.prob > 0.0 && t.source.iter().any(|&(s, sp)| sp > 0.0 && s <= t.total && t.total - s <= 32)
                });
                if !usable {
                    return Err(ParseError::at_line(
                        &self.name,
                        p.line,
                        1,
                        format!(
                            "protocol {} uses port-pair class {name} but section -{name} has no usable prefix lengths",
                            p.proto
                        ),
                    ));
                }
                let (s, d) = name.split_once('_').unwrap_or((name, name));
                for (side, list, sec) in [
                    (s, &self.sport_ranges, "spar"),
                    (s, &self.sport_exact, "spem"),
                    (d, &self.dport_ranges, "dpar"),
                    (d, &self.dport_exact, "dpem"),
                ] {
                    let needed = (side == "ar" && sec.ends_with("ar")) || (side == "em" && sec.ends_with("em"));
                    if needed && list.is_empty() {
                        return Err(ParseError::at_line(
                            &self.name,
                            p.line,
                            1,
                            format!("protocol {} uses port-pair class {name} but section -{sec} is empty", p.proto),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

fn split_sections<'a>(file: &str, text: &'a str) -> Result<Vec<Section<'a>>, ParseError> {
    let mut out: Vec<Section<'a>> = Vec::new();
    let mut open = false;
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let l = raw.trim();
        if l.is_empty() {
            continue;
        }
        if l == "#" {
            open = false;
            continue;
        }
        if let Some(name) = l.strip_prefix('-') {
            if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !name.is_empty() {
                if out.iter().any(|s| s.name == name) {
                    return Err(ParseError::at_line(file, ln, 1, format!("section -{name} appears twice")));
                }
                out.push(Section { name, line: ln, data: Vec::new() });
                open = true;
                continue;
            }
        }
        match out.last_mut() {
            Some(s) if open => s.data.push((ln, raw)),
            _ => {
                return Err(ParseError::at_line(
                    file,
                    ln,
                    1,
                    format!("expected a section header like '-prots' or '#', found '{}'", clip(l)),
                ))
            }
        }
    }
    Ok(out)
}

#[derive(Clone, Copy)]
struct Tok<'a> {
    text: &'a str,
    col: usize,
}

fn tokens(line: &str) -> Vec<Tok<'_>> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices() {
        if c.is_whitespace() {
            if let Some(s) = start.take() {
                out.push(Tok { text: &line[s..i], col: s + 1 });
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        out.push(Tok { text: &line[s..], col: s + 1 });
    }
    out
}

fn clip(s: &str) -> String {
    s.chars().take(40).collect()
}

fn err(file: &str, ln: usize, t: Tok<'_>, what: &str) -> ParseError {
    ParseError::at_line(file, ln, t.col, format!("expected {what}, found '{}'", clip(t.text)))
}

fn int(file: &str, ln: usize, t: Tok<'_>, max: u64, what: &str) -> Result<u64, ParseError> {
    match t.text.parse::<u64>() {
        Ok(v) if v <= max => Ok(v),
        _ => Err(err(file, ln, t, what)),
    }
}

fn prob(file: &str, ln: usize, t: Tok<'_>) -> Result<f64, ParseError> {
    match t.text.parse::<f64>() {
        Ok(v) if (0.0..=1.0 + 1e-6).contains(&v) => Ok(v),
        _ => Err(err(file, ln, t, "a probability 0..1")),
    }
}

fn single_int(file: &str, s: &Section<'_>, what: &str) -> Result<u64, ParseError> {
    match s.data.as_slice() {
        [(ln, l)] => {
            let toks = tokens(l);
            if toks.len() != 1 {
                return Err(ParseError::at_line(file, *ln, 1, format!("expected {what} alone on the line")));
            }
            int(file, *ln, toks[0], u64::from(u32::MAX), what)
        }
        _ => Err(ParseError::at_line(file, s.line + 1, 1, format!("expected one line with {what} after -{}", s.name))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_twelve_seeds_parse() {
        for s in SEEDS {
            let f = load(s).unwrap();
            assert!(f.scale > 0 && !f.protocols.is_empty(), "{s}");
            let total: f64 = f.protocols.iter().map(|p| p.prob).sum();
            assert!((total - 1.0).abs() < 0.01, "{s}: protocol probabilities sum to {total}");
        }
        let acl1 = load("acl1").unwrap();
        assert_eq!(acl1.scale, 733);
        assert_eq!(acl1.protocols.iter().map(|p| p.proto).collect::<Vec<_>>(), vec![0, 1, 6, 17]);
        assert_eq!(acl1.snest, 4);
        assert_eq!(acl1.dport_exact[0], (0.18823530, PortRange::exact(1521)));
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = parse("x_seed", "-scale\n12\n#\n-prots\n6\t0.5\t0.1\n#\n").unwrap_err().to_string();
        assert_eq!(e, "x_seed:5:1: expected 27 columns (protocol, probability, 25 port-pair probabilities), found 3");
        let e = parse("x_seed", "-scale\nabc\n#\n").unwrap_err().to_string();
        assert!(e.starts_with("x_seed:2:1: expected the size"), "{e}");
        let e = parse("x_seed", "garbage\n").unwrap_err().to_string();
        assert!(e.starts_with("x_seed:1:1: expected a section header"), "{e}");
        let e = parse("x_seed", "-scale\n5\n#\n").unwrap_err().to_string();
        assert!(e.starts_with("x_seed: expected a section '-prots'"), "{e}");
    }
}
