//! Reading input files, transparently decompressing `.xz` (the shared ClassBench data is xz).
//!
//! Every input is read whole, so every input has a size limit, [`MAX_INPUT_BYTES`] after
//! decompression: a file (or `/dev/zero`, or a small xz file that expands to gigabytes) that
//! would go past it is an error naming the limit, read no further, rather than an allocation the
//! kernel ends. The largest shared ClassBench file is 40 MiB decompressed.

use std::io::Read;
use std::path::Path;

use crate::error::{ParseError, Result};

const XZ_MAGIC: &[u8] = &[0xfd, b'7', b'z', b'X', b'Z', 0x00];

/// The most bytes an input may hold, after decompression: 256 MiB.
pub const MAX_INPUT_BYTES: u64 = 256 << 20;

/// The error of an input past [`MAX_INPUT_BYTES`].
fn too_large(name: &str, what: &str) -> ParseError {
    ParseError::in_file(
        name,
        format!("{what} more than the input limit of {} MiB; split it or sample it", MAX_INPUT_BYTES >> 20),
    )
}

/// Appends at most `limit` bytes of `r` to `out`: false when `r` holds more.
fn read_limited(r: impl Read, limit: u64, out: &mut Vec<u8>) -> std::io::Result<bool> {
    r.take(limit + 1).read_to_end(out)?;
    Ok(out.len() as u64 <= limit)
}

/// The bytes of `path`, decompressed when the file is xz; at most [`MAX_INPUT_BYTES`] either way.
pub fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    let name = path.display().to_string();
    let cannot = |e: std::io::Error| ParseError::in_file(&name, format!("cannot read: {e}"));
    let file = std::fs::File::open(path).map_err(cannot)?;
    let mut raw = Vec::new();
    if !read_limited(file, MAX_INPUT_BYTES, &mut raw).map_err(cannot)? {
        return Err(too_large(&name, "holds"));
    }
    decompress_if_xz(&name, raw)
}

/// `raw`, decompressed when it starts with the xz magic (at most [`MAX_INPUT_BYTES`]); `name` is
/// used in errors.
pub fn decompress_if_xz(name: &str, raw: Vec<u8>) -> Result<Vec<u8>> {
    if !raw.starts_with(XZ_MAGIC) {
        return Ok(raw);
    }
    let mut out = Vec::with_capacity(raw.len().saturating_mul(8).min(MAX_INPUT_BYTES as usize));
    let within = read_limited(xz2::read::XzDecoder::new(&raw[..]), MAX_INPUT_BYTES, &mut out)
        .map_err(|e| ParseError::in_file(name, format!("corrupt xz data: {e}")))?;
    if !within {
        return Err(too_large(name, "decompresses to"));
    }
    Ok(out)
}

/// The text of `path` (decompressed when xz), which must be UTF-8.
pub fn read_text(path: &Path) -> Result<String> {
    let name = path.display().to_string();
    text_from_bytes(&name, read_bytes(path)?)
}

/// `bytes` as UTF-8 text without a leading byte-order mark (editors on Windows write one), or
/// an error naming the line of the first invalid byte.
pub fn text_from_bytes(name: &str, mut bytes: Vec<u8>) -> Result<String> {
    const BOM: &[u8] = b"\xef\xbb\xbf";
    if bytes.starts_with(BOM) {
        bytes.drain(..BOM.len());
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        let column = at - bytes[..at].iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1) + 1;
        ParseError::at_line(name, line, column, "expected UTF-8 text, found a non-UTF-8 byte")
    })
}
