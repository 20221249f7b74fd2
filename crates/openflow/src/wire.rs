//! Bytes in and out: [`Reader`], a bounds-checked cursor over a message (every read returns a
//! [`DecodeError`] instead of panicking), [`Writer`], and the 8-byte OpenFlow [`Header`].

use crate::error::{DecodeError, EncodeError};

/// The OpenFlow header: version, type, total length (header included), transaction id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub version: u8,
    pub kind: u8,
    pub length: u16,
    pub xid: u32,
}

impl Header {
    pub const LEN: usize = 8;

    /// The header at the start of `bytes` (which may hold more than one message, or less than
    /// this one: the caller reads `length` bytes before decoding the body).
    pub fn peek(bytes: &[u8]) -> Result<Header, DecodeError> {
        let mut r = Reader::new(bytes, "ofp_header");
        let h = Header { version: r.u8()?, kind: r.u8()?, length: r.u16()?, xid: r.u32()? };
        if usize::from(h.length) < Header::LEN {
            return Err(DecodeError::BadLength { what: "ofp_header", len: usize::from(h.length) });
        }
        Ok(h)
    }

    /// Writes the header with a length patched in by [`Writer::finish_message`].
    pub fn write(&self, w: &mut Writer) {
        w.u8(self.version);
        w.u8(self.kind);
        w.u16(self.length);
        w.u32(self.xid);
    }
}

/// A bounds-checked cursor over bytes; `what` names the structure in errors.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8], what: &'static str) -> Reader<'a> {
        Reader { bytes, at: 0, what }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// Offset of the next byte.
    pub fn position(&self) -> usize {
        self.at
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.remaining() < n {
            return Err(DecodeError::Truncated { what: self.what, need: n, have: self.remaining() });
        }
        let s = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    /// A reader over the next `n` bytes (a sub-structure), named `what`.
    pub fn sub(&mut self, n: usize, what: &'static str) -> Result<Reader<'a>, DecodeError> {
        Ok(Reader::new(self.take(n)?, what))
    }

    pub fn skip(&mut self, n: usize) -> Result<(), DecodeError> {
        self.take(n).map(|_| ())
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// The rest.
    pub fn rest(&mut self) -> &'a [u8] {
        let s = &self.bytes[self.at..];
        self.at = self.bytes.len();
        s
    }
}

/// A growing buffer of big-endian fields.
#[derive(Clone, Debug, Default)]
pub struct Writer {
    pub bytes: Vec<u8>,
}

impl Writer {
    pub fn new() -> Writer {
        Writer::default()
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn u8(&mut self, v: u8) {
        self.bytes.push(v);
    }

    pub fn u16(&mut self, v: u16) {
        self.bytes.extend_from_slice(&v.to_be_bytes());
    }

    pub fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_be_bytes());
    }

    pub fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_be_bytes());
    }

    pub fn put(&mut self, b: &[u8]) {
        self.bytes.extend_from_slice(b);
    }

    pub fn zeros(&mut self, n: usize) {
        self.bytes.resize(self.bytes.len() + n, 0);
    }

    /// Zero bytes up to the next multiple of 8 (OpenFlow pads matches, actions and
    /// instructions to 8 bytes).
    pub fn pad8(&mut self) {
        self.zeros((8 - self.bytes.len() % 8) % 8);
    }

    /// Writes `v` as a big-endian u16 at byte `at` (a length field known only at the end).
    pub fn patch_u16(&mut self, at: usize, v: u16) {
        self.bytes[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }

    /// Patches the header's length (bytes 2..4) with the message's length; an error when the
    /// message is longer than OpenFlow's 64 KiB.
    pub fn finish_message(mut self) -> Result<Vec<u8>, EncodeError> {
        let len = self.bytes.len();
        let l = u16::try_from(len).map_err(|_| DecodeError::BadLength { what: "message (over 65535 bytes)", len })?;
        self.patch_u16(2, l);
        Ok(self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn reads_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40), n in 0usize..50) {
            let mut r = Reader::new(&bytes, "test");
            let _ = r.u8();
            let _ = r.u16();
            let _ = r.take(n);
            let _ = r.u64();
            let _ = r.sub(n, "sub");
            let _ = Header::peek(&bytes);
            prop_assert!(r.position() <= bytes.len());
        }

        #[test]
        fn header_round_trips(version: u8, kind: u8, xid: u32, body in proptest::collection::vec(any::<u8>(), 0..100)) {
            let mut w = Writer::new();
            Header { version, kind, length: 0, xid }.write(&mut w);
            w.put(&body);
            let bytes = w.finish_message().unwrap();
            let h = Header::peek(&bytes).unwrap();
            prop_assert_eq!(h, Header { version, kind, length: (8 + body.len()) as u16, xid });
        }
    }

    #[test]
    fn short_and_impossible_headers_are_errors() {
        assert!(matches!(Header::peek(&[4, 0, 0]), Err(DecodeError::Truncated { .. })));
        assert!(matches!(Header::peek(&[4, 0, 0, 7, 0, 0, 0, 1]), Err(DecodeError::BadLength { len: 7, .. })));
        let mut w = Writer::new();
        w.zeros(70_000);
        assert!(w.finish_message().is_err());
    }
}
