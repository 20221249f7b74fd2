//! Splitting a byte stream into JSON texts. OVSDB peers send JSON-RPC messages back to back,
//! without a separator (OVS's own parser reads them by nesting depth), so this does the same:
//! bytes are buffered until the object that began at the first non-blank byte closes, with
//! strings and their escapes skipped. Each complete text is then parsed by serde_json.

use serde_json::Value;

use crate::error::{protocol, Result};

/// The largest message accepted (a database's initial contents come in one).
pub const MAX_MESSAGE: usize = 256 << 20;

/// Bytes received and not yet returned as a message.
#[derive(Debug, Default)]
pub struct Framer {
    buf: Vec<u8>,
    /// How far `buf` has been scanned, and the scanner's state there.
    scanned: usize,
    depth: usize,
    in_string: bool,
    escape: bool,
    started: bool,
}

impl Framer {
    pub fn new() -> Framer {
        Framer::default()
    }

    /// Adds received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held that are not a complete message yet.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The next complete message, if one has arrived. Anything but an object or array at the
    /// top level, invalid JSON, or a message over `MAX_MESSAGE` is an error (the caller drops
    /// the connection).
    pub fn next_message(&mut self) -> Result<Option<Value>> {
        let mut i = self.scanned;
        while i < self.buf.len() {
            let b = self.buf[i];
            if !self.started {
                match b {
                    b' ' | b'\t' | b'\r' | b'\n' => {
                        self.buf.drain(..=i);
                        i = 0;
                        continue;
                    }
                    b'{' | b'[' => {
                        self.started = true;
                        self.depth = 1;
                    }
                    _ => {
                        let shown = String::from_utf8_lossy(&self.buf[i..self.buf.len().min(i + 40)]).into_owned();
                        return Err(protocol(format!("expected a JSON object, found '{shown}'")));
                    }
                }
            } else if self.in_string {
                if self.escape {
                    self.escape = false;
                } else if b == b'\\' {
                    self.escape = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
            } else {
                match b {
                    b'"' => self.in_string = true,
                    b'{' | b'[' => self.depth += 1,
                    b'}' | b']' => {
                        self.depth -= 1;
                        if self.depth == 0 {
                            let text: Vec<u8> = self.buf.drain(..=i).collect();
                            self.scanned = 0;
                            self.started = false;
                            return serde_json::from_slice(&text)
                                .map(Some)
                                .map_err(|e| protocol(format!("invalid JSON from the server: {e}")));
                        }
                    }
                    _ => {}
                }
            }
            i += 1;
            if i > MAX_MESSAGE {
                return Err(protocol(format!("a message longer than {MAX_MESSAGE} bytes")));
            }
        }
        self.scanned = i;
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]]) -> Result<Vec<Value>> {
        let mut f = Framer::new();
        let mut out = Vec::new();
        for c in chunks {
            f.push(c);
            while let Some(v) = f.next_message()? {
                out.push(v);
            }
        }
        Ok(out)
    }

    #[test]
    fn messages_back_to_back_and_split_anywhere() {
        let text = br#"{"id":1,"result":["a}b","c\"]{"]} {"method":"echo","params":[],"id":"echo"}
[1,[2]]"#;
        let whole = all(&[text]).unwrap();
        assert_eq!(whole.len(), 3);
        assert_eq!(whole[0]["result"][0], "a}b");
        assert_eq!(whole[0]["result"][1], "c\"]{");
        for cut in 0..text.len() {
            assert_eq!(all(&[&text[..cut], &text[cut..]]).unwrap(), whole, "cut at {cut}");
        }
        let bytes: Vec<&[u8]> = text.chunks(1).collect();
        assert_eq!(all(&bytes).unwrap(), whole);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bad in [&b"hello"[..], b"{\"a\":}", b"123", b"{\"a\":1}}", b"\xff\xfe{"] {
            assert!(all(&[bad]).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        // An unfinished object is no message yet.
        assert_eq!(all(&[b"{\"a\":[1,2"]).unwrap(), Vec::<Value>::new());
    }
}
