//! A small cursor over one line of text that knows its column, shared by the text parsers so every
//! error says where it happened and what was expected there.

use crate::error::ParseError;

/// Reading position inside one line.
pub struct Cursor<'a> {
    file: &'a str,
    line_no: usize,
    text: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(file: &'a str, line_no: usize, text: &'a str) -> Self {
        Cursor { file, line_no, text, pos: 0 }
    }

    pub fn column_of(&self, byte_pos: usize) -> usize {
        self.text[..byte_pos].chars().count() + 1
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    pub fn at_end(&self) -> bool {
        self.pos >= self.text.len()
    }

    pub fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    pub fn skip_ws(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    /// An error at byte position `at`: "expected `expected`, found `<token there>`".
    pub fn error_at(&self, at: usize, expected: &str) -> ParseError {
        let found = describe_token(&self.text[at..]);
        ParseError::at_line(self.file, self.line_no, self.column_of(at), format!("expected {expected}, found {found}"))
    }

    /// An error at the current position.
    pub fn error(&self, expected: &str) -> ParseError {
        self.error_at(self.pos, expected)
    }

    /// An error at byte position `at` with a free-form message.
    pub fn message_at(&self, at: usize, message: impl Into<String>) -> ParseError {
        ParseError::at_line(self.file, self.line_no, self.column_of(at), message)
    }

    /// Consumes `c` (after optional whitespace) or fails.
    pub fn expect(&mut self, c: char, expected: &str) -> Result<(), ParseError> {
        self.skip_ws();
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            Ok(())
        } else {
            Err(self.error(expected))
        }
    }

    /// Consumes `c` if it is next.
    pub fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    /// Takes the longest run of characters satisfying `f`.
    pub fn take_while(&mut self, f: impl Fn(char) -> bool) -> &'a str {
        let rest = self.rest();
        let n = rest.find(|c| !f(c)).unwrap_or(rest.len());
        self.pos += n;
        &rest[..n]
    }

    /// A decimal number no larger than `max`.
    pub fn decimal(&mut self, max: u64, expected: &str) -> Result<u64, ParseError> {
        self.skip_ws();
        let start = self.pos;
        let digits = self.take_while(|c| c.is_ascii_digit());
        match digits.parse::<u64>() {
            Ok(v) if v <= max => Ok(v),
            Ok(_) | Err(_) if !digits.is_empty() => {
                self.pos = start;
                Err(self.message_at(
                    start,
                    format!("expected {expected} (at most {max}), found {}", describe_token(&self.text[start..])),
                ))
            }
            _ => {
                self.pos = start;
                Err(self.error_at(start, expected))
            }
        }
    }

    /// A `0x`-prefixed hexadecimal number no larger than `max`.
    pub fn hex(&mut self, max: u64, expected: &str) -> Result<u64, ParseError> {
        self.skip_ws();
        let start = self.pos;
        let rest = self.rest();
        if !(rest.starts_with("0x") || rest.starts_with("0X")) {
            return Err(self.error(expected));
        }
        self.pos += 2;
        let digits = self.take_while(|c| c.is_ascii_hexdigit());
        match u64::from_str_radix(digits, 16) {
            Ok(v) if v <= max => Ok(v),
            _ => {
                self.pos = start;
                Err(self.message_at(
                    start,
                    format!("expected {expected} (at most {max:#x}), found {}", describe_token(&self.text[start..])),
                ))
            }
        }
    }

    /// A dotted-quad IPv4 address, as a host-order `u32`.
    pub fn ipv4(&mut self, expected: &str) -> Result<u32, ParseError> {
        self.skip_ws();
        let start = self.pos;
        let token = self.take_while(|c| c.is_ascii_digit() || c == '.');
        match parse_ipv4(token) {
            Some(a) => Ok(a),
            None => {
                self.pos = start;
                Err(self.error_at(start, expected))
            }
        }
    }
}

/// A strict dotted-quad parser (four decimal octets, each at most 255).
pub fn parse_ipv4(s: &str) -> Option<u32> {
    let mut parts = s.split('.');
    let mut addr = 0u32;
    for _ in 0..4 {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let v: u32 = p.parse().ok()?;
        if v > 255 {
            return None;
        }
        addr = (addr << 8) | v;
    }
    parts.next().is_none().then_some(addr)
}

/// How an error shows the text found at a position: the next token, quoted, or "end of line".
pub fn describe_token(s: &str) -> String {
    let s = s.trim_start();
    if s.is_empty() {
        return "end of line".to_string();
    }
    let token: String = s.chars().take_while(|c| !c.is_whitespace() && *c != ',').take(24).collect();
    if token.is_empty() {
        format!("'{}'", s.chars().next().unwrap_or(' '))
    } else {
        format!("'{token}'")
    }
}
