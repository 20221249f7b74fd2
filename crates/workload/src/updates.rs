//! Update streams: inserts, removals and modifications drawn from a held-out part of a rule-set.
//!
//! A fraction `F` of the rules (chosen uniformly, seeded) is held out; the rest is the initial
//! table. Each operation's kind is drawn with the weights of the mix `I:R:M`:
//! - **insert** a held-out rule (with its own id and priority);
//! - **remove** an installed rule chosen uniformly; it returns to the held-out pool, so it can be
//!   inserted again later (churn, as a controller re-adding a route);
//! - **modify** an installed rule: its match is replaced by the match of a held-out rule, keeping
//!   its id and priority (that held-out rule is used up).
//!
//! A kind that cannot be drawn (nothing held out, nothing installed) is skipped for another; the
//! stream stops early only when none can. Default length: the number of held-out rules.
//!
//! ## Text format (`rqvs-updates 1`)
//!
//! ```text
//! # rqvs-updates 1
//! # any comment line
//! I <id> <priority> <ClassBench rule line>      ← before `start`: the initial table
//! start
//! I <id> <priority> <ClassBench rule line>      ← insert
//! R <id>                                        ← remove
//! M <id> <priority> <ClassBench rule line>      ← modify: replace the match of installed <id>
//! ```
//!
//! Fields are separated by single spaces up to the rule, which is the ClassBench line as
//! [`format_line`] writes it (starting with `@`). Ids are unique among installed rules; the winner
//! rule is rqvs's usual one (highest priority, then lowest id).

use rqvs_flow::formats::classbench::{self, format_line, from_match};
use rqvs_flow::{Actions, ParseError, Rule, RuleId};

use crate::rng::Rng;

/// One update.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Insert(Rule),
    Remove(RuleId),
    Modify(Rule),
}

/// The initial table and the updates that follow.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Stream {
    pub initial: Vec<Rule>,
    pub ops: Vec<Op>,
}

impl Stream {
    pub fn counts(&self) -> (usize, usize, usize) {
        self.ops.iter().fold((0, 0, 0), |(i, r, m), op| match op {
            Op::Insert(_) => (i + 1, r, m),
            Op::Remove(_) => (i, r + 1, m),
            Op::Modify(_) => (i, r, m + 1),
        })
    }
}

/// Parses `I:R:M` weights (non-negative integers, not all zero).
pub fn parse_mix(s: &str) -> Result<[u32; 3], String> {
    let bad = || format!("expected --mix INSERT:REMOVE:MODIFY weights like 1:1:0, found '{s}'");
    let v: Vec<u32> = s.split(':').map(|x| x.parse().map_err(|_| bad())).collect::<Result<_, _>>()?;
    match v.as_slice() {
        &[i, r, m] if i + r + m > 0 => Ok([i, r, m]),
        _ => Err(bad()),
    }
}

/// The most operations [`generate`] draws (every one is held in memory with its rule).
pub const MAX_OPS: usize = 10_000_000;

/// Draws a stream (see the module docs).
pub fn generate(
    rules: &[Rule],
    fraction: f64,
    mix: [u32; 3],
    ops: Option<usize>,
    rng_seed: u64,
) -> Result<Stream, String> {
    if !(0.0..=1.0).contains(&fraction) {
        return Err(format!("expected --fraction in 0..1, found {fraction}"));
    }
    if ops.is_some_and(|n| n > MAX_OPS) {
        return Err(format!("expected --ops in 0..={MAX_OPS}, found {}", ops.unwrap_or(0)));
    }
    let mut rng = Rng::new(rng_seed);
    let mut order: Vec<usize> = (0..rules.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let held = (fraction * rules.len() as f64).round() as usize;
    let mut pool: Vec<Rule> = order[..held].iter().map(|&i| rules[i].clone()).collect();
    let mut installed: Vec<Rule> = order[held..].iter().map(|&i| rules[i].clone()).collect();
    installed.sort_by_key(|r| r.id);
    let initial = installed.clone();
    let n_ops = ops.unwrap_or(held);
    let total = f64::from(mix.iter().sum::<u32>());
    let mut out = Vec::with_capacity(n_ops);
    while out.len() < n_ops {
        let can = [!pool.is_empty(), !installed.is_empty(), !pool.is_empty() && !installed.is_empty()];
        let w: Vec<f64> = (0..3).map(|k| if can[k] { f64::from(mix[k]) } else { 0.0 }).collect();
        let wsum: f64 = w.iter().sum();
        if wsum == 0.0 || total == 0.0 {
            break;
        }
        let x = rng.f64() * wsum;
        let kind = if x < w[0] {
            0
        } else if x < w[0] + w[1] {
            1
        } else {
            2
        };
        match kind {
            0 => {
                let r = pool.swap_remove(rng.below(pool.len() as u64) as usize);
                installed.push(r.clone());
                out.push(Op::Insert(r));
            }
            1 => {
                let r = installed.swap_remove(rng.below(installed.len() as u64) as usize);
                out.push(Op::Remove(r.id));
                pool.push(r);
            }
            _ => {
                let donor = pool.swap_remove(rng.below(pool.len() as u64) as usize);
                let i = rng.below(installed.len() as u64) as usize;
                installed[i].matches = donor.matches;
                out.push(Op::Modify(installed[i].clone()));
            }
        }
    }
    Ok(Stream { initial, ops: out })
}

fn rule_text(r: &Rule) -> Result<String, String> {
    let f = from_match(&r.matches)
        .map_err(|e| format!("rule {}: {e} (the update format carries ClassBench rules)", r.id))?;
    Ok(format!("{} {} {}", r.id.0, r.priority, format_line(&f)))
}

/// Writes a stream in the `rqvs-updates 1` format; `comment` lines go in the header.
pub fn write(stream: &Stream, comment: &[String]) -> Result<String, String> {
    let mut s = String::from("# rqvs-updates 1\n");
    for c in comment {
        s.push_str(&format!("# {c}\n"));
    }
    for r in &stream.initial {
        s.push_str(&format!("I {}\n", rule_text(r)?));
    }
    s.push_str("start\n");
    for op in &stream.ops {
        match op {
            Op::Insert(r) => s.push_str(&format!("I {}\n", rule_text(r)?)),
            Op::Remove(id) => s.push_str(&format!("R {}\n", id.0)),
            Op::Modify(r) => s.push_str(&format!("M {}\n", rule_text(r)?)),
        }
    }
    Ok(s)
}

/// Parses the `rqvs-updates 1` format; errors name `file:line:column`.
pub fn parse(file: &str, text: &str) -> Result<Stream, ParseError> {
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, "# rqvs-updates 1")) => {}
        _ => return Err(ParseError::at_line(file, 1, 1, "expected the header '# rqvs-updates 1'")),
    }
    let mut stream = Stream::default();
    let mut started = false;
    for (i, line) in lines {
        let ln = i + 1;
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if line == "start" {
            if started {
                return Err(ParseError::at_line(file, ln, 1, "expected one 'start' line, found a second"));
            }
            started = true;
            continue;
        }
        let (op, rest) = line.split_once(' ').unwrap_or((line, ""));
        let num = |s: &str, col: usize, what: &str| {
            s.parse::<u32>().map_err(|_| ParseError::at_line(file, ln, col, format!("expected {what}, found '{s}'")))
        };
        match op {
            "R" if started => stream.ops.push(Op::Remove(RuleId(num(rest.trim(), 3, "a rule id")?))),
            "I" | "M" if op == "I" || started => {
                let mut parts = rest.splitn(3, ' ');
                let id = num(parts.next().unwrap_or(""), 3, "a rule id")?;
                let col = 3 + id.to_string().len() + 1;
                let prio = num(parts.next().unwrap_or(""), col, "a priority")?;
                let rule_col = col + prio.to_string().len() + 1;
                let rule = parts.next().unwrap_or("");
                let f = classbench::parse_line(file, ln, rule).map_err(|mut e| {
                    if let rqvs_flow::Position::Line { column, .. } = &mut e.position {
                        *column += rule_col - 1;
                    }
                    e
                })?;
                let m = classbench::to_match(&f).map_err(|e| ParseError::at_line(file, ln, rule_col, e))?;
                let r = Rule::new(id, prio, m, Actions::drop());
                match (op, started) {
                    ("I", false) => stream.initial.push(r),
                    ("I", true) => stream.ops.push(Op::Insert(r)),
                    _ => stream.ops.push(Op::Modify(r)),
                }
            }
            _ => {
                return Err(ParseError::at_line(
                    file,
                    ln,
                    1,
                    format!(
                        "expected {}, found '{}'",
                        if started { "'I', 'R' or 'M'" } else { "'I' (initial rules) or 'start'" },
                        line.chars().take(20).collect::<String>()
                    ),
                ))
            }
        }
    }
    if !started {
        return Err(ParseError::at_line(
            file,
            text.lines().count().max(1),
            1,
            "expected a 'start' line before the end",
        ));
    }
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_and_errors() {
        assert_eq!(parse_mix("1:2:0").unwrap(), [1, 2, 0]);
        assert!(parse_mix("0:0:0").is_err());
        assert!(parse_mix("1:2").is_err());
        let e = parse("u.txt", "# rqvs-updates 1\nstart\nX 3\n").unwrap_err().to_string();
        assert_eq!(e, "u.txt:3:1: expected 'I', 'R' or 'M', found 'X 3'");
        let e = parse("u.txt", "# rqvs-updates 1\nstart\nI 3 x @1.2.3.4/32\n").unwrap_err().to_string();
        assert_eq!(e, "u.txt:3:5: expected a priority, found 'x'");
        let e = parse("u.txt", "# rqvs-updates 1\nstart\nI 3 4 @1.2.3.4/33\t0.0.0.0/0\n").unwrap_err().to_string();
        assert!(e.starts_with("u.txt:3:"), "{e}");
        assert!(parse("u.txt", "hello\n").unwrap_err().to_string().starts_with("u.txt:1:1: expected the header"));
    }
}
