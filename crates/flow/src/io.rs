//! Reading input files, transparently decompressing `.xz` (the shared ClassBench data is xz).

use std::io::Read;
use std::path::Path;

use crate::error::{ParseError, Result};

const XZ_MAGIC: &[u8] = &[0xfd, b'7', b'z', b'X', b'Z', 0x00];

/// The bytes of `path`, decompressed when the file is xz.
pub fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    let name = path.display().to_string();
    let raw = std::fs::read(path).map_err(|e| ParseError::in_file(&name, format!("cannot read: {e}")))?;
    decompress_if_xz(&name, raw)
}

/// `raw`, decompressed when it starts with the xz magic; `name` is used in errors.
pub fn decompress_if_xz(name: &str, raw: Vec<u8>) -> Result<Vec<u8>> {
    if !raw.starts_with(XZ_MAGIC) {
        return Ok(raw);
    }
    let mut out = Vec::with_capacity(raw.len() * 8);
    xz2::read::XzDecoder::new(&raw[..])
        .read_to_end(&mut out)
        .map_err(|e| ParseError::in_file(name, format!("corrupt xz data: {e}")))?;
    Ok(out)
}

/// The text of `path` (decompressed when xz), which must be UTF-8.
pub fn read_text(path: &Path) -> Result<String> {
    let name = path.display().to_string();
    text_from_bytes(&name, read_bytes(path)?)
}

/// `bytes` as UTF-8 text, or an error naming the line of the first invalid byte.
pub fn text_from_bytes(name: &str, bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        let column = at - bytes[..at].iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1) + 1;
        ParseError::at_line(name, line, column, "expected UTF-8 text, found a non-UTF-8 byte")
    })
}
