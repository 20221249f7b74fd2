//! Reading input files: `-` for standard input, and xz, gzip and zstd decompressed transparently
//! (told apart by their magic bytes, not by the file name).
//!
//! Two ways in:
//!
//! - **Streams** ([`open`], [`decoder`]): a buffered reader of the decompressed bytes, read as it
//!   is consumed. Packet inputs (captures and ClassBench traces, [`crate::formats::packets`]) are
//!   read this way, in constant memory whatever their length: they have no size limit.
//! - **Whole** ([`read_bytes`], [`read_text`]): for what must be held at once anyway — rule files,
//!   models, seed files. These have a size limit, [`MAX_INPUT_BYTES`] after decompression: a file
//!   (or `/dev/zero`, or a small xz file that expands to gigabytes) that would go past it is an
//!   error naming the limit, read no further, rather than an allocation the kernel ends. The
//!   largest shared ClassBench rule file is 40 MiB decompressed.
//!
//! xz files may hold several concatenated streams (as `pixz` and `xz -T` write them); gzip files
//! several members (as `cat a.gz b.gz` makes); zstd files several frames. A decompression error
//! in the middle of a stream surfaces as an I/O error of the read that met it, which the format
//! readers report with the packet or line they were reading.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use crate::error::{ParseError, Result};

const XZ_MAGIC: &[u8] = &[0xfd, b'7', b'z', b'X', b'Z', 0x00];
const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];
/// The longest magic number [`decoder`] looks at.
const MAGIC_LEN: usize = 6;
/// Buffer of the readers [`open`] returns.
const BUFFER: usize = 256 << 10;

/// The most bytes an input read whole ([`read_bytes`], [`read_text`]) may hold, after
/// decompression: 256 MiB. Streams ([`open`]) have no limit.
pub const MAX_INPUT_BYTES: u64 = 256 << 20;

/// How an input was compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Xz,
    Gzip,
    Zstd,
}

impl Compression {
    /// The compression whose magic number `bytes` start with.
    pub fn sniff(bytes: &[u8]) -> Compression {
        if bytes.starts_with(XZ_MAGIC) {
            Compression::Xz
        } else if bytes.starts_with(GZIP_MAGIC) {
            Compression::Gzip
        } else if bytes.starts_with(ZSTD_MAGIC) {
            Compression::Zstd
        } else {
            Compression::None
        }
    }

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "uncompressed",
            Compression::Xz => "xz",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }
}

/// A buffered reader of a decompressed input.
pub type Input = Box<dyn BufRead + Send>;

/// The name of a path in messages: `<stdin>` for `-`.
pub fn display_name(path: &Path) -> String {
    if is_stdin(path) {
        "<stdin>".to_string()
    } else {
        path.display().to_string()
    }
}

/// True for the path `-`, which means standard input.
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Opens `path` (`-`: standard input) as a stream of its decompressed bytes.
pub fn open(path: &Path) -> Result<Input> {
    let name = display_name(path);
    let raw: Box<dyn Read + Send> = if is_stdin(path) {
        Box::new(std::io::stdin())
    } else {
        Box::new(std::fs::File::open(path).map_err(|e| ParseError::in_file(&name, format!("cannot read: {e}")))?)
    };
    decoder(&name, raw)
}

/// `raw` decompressed when it starts with the magic number of xz, gzip or zstd, else as it is;
/// `name` is used in errors.
pub fn decoder(name: &str, mut raw: impl Read + Send + 'static) -> Result<Input> {
    let head = read_head(&mut raw, MAGIC_LEN).map_err(|e| ParseError::in_file(name, format!("cannot read: {e}")))?;
    let compression = Compression::sniff(&head);
    let raw = BufReader::with_capacity(BUFFER, std::io::Cursor::new(head).chain(raw));
    Ok(match compression {
        Compression::None => Box::new(raw),
        Compression::Xz => {
            Box::new(BufReader::with_capacity(BUFFER, liblzma::bufread::XzDecoder::new_multi_decoder(raw)))
        }
        Compression::Gzip => Box::new(BufReader::with_capacity(BUFFER, flate2::bufread::MultiGzDecoder::new(raw))),
        Compression::Zstd => {
            let d = zstd::stream::read::Decoder::with_buffer(raw)
                .map_err(|e| ParseError::in_file(name, format!("corrupt zstd data: {e}")))?;
            Box::new(BufReader::with_capacity(BUFFER, d))
        }
    })
}

/// The first `n` bytes of `r` (fewer at its end): a pipe may deliver fewer per read.
fn read_head(r: &mut impl Read, n: usize) -> std::io::Result<Vec<u8>> {
    let mut head = vec![0u8; n];
    let mut got = 0;
    while got < n {
        match r.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    head.truncate(got);
    Ok(head)
}

/// The error of an input past [`MAX_INPUT_BYTES`].
fn too_large(name: &str, what: &str) -> ParseError {
    ParseError::in_file(
        name,
        format!("{what} more than the input limit of {} MiB; split it or sample it", MAX_INPUT_BYTES >> 20),
    )
}

/// The bytes of `path` (`-`: standard input), decompressed; at most [`MAX_INPUT_BYTES`].
pub fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    let name = display_name(path);
    let cannot = |e: std::io::Error| ParseError::in_file(&name, format!("cannot read: {e}"));
    let mut raw: Box<dyn Read + Send> =
        if is_stdin(path) { Box::new(std::io::stdin()) } else { Box::new(std::fs::File::open(path).map_err(cannot)?) };
    let head = read_head(&mut raw, MAGIC_LEN).map_err(cannot)?;
    read_all(&name, Compression::sniff(&head), std::io::Cursor::new(head).chain(raw))
}

/// All of `raw` decompressed, at most [`MAX_INPUT_BYTES`]; `name` is used in errors.
fn read_all(name: &str, compression: Compression, raw: impl Read + Send + 'static) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    decoder(name, raw)?.take(MAX_INPUT_BYTES + 1).read_to_end(&mut out).map_err(|e| match compression {
        Compression::None => ParseError::in_file(name, format!("cannot read: {e}")),
        c => ParseError::in_file(name, format!("corrupt {} data: {e}", c.name())),
    })?;
    if out.len() as u64 > MAX_INPUT_BYTES {
        let what = if compression == Compression::None { "holds" } else { "decompresses to" };
        return Err(too_large(name, what));
    }
    Ok(out)
}

/// `raw` decompressed when it starts with the magic number of xz, gzip or zstd (at most
/// [`MAX_INPUT_BYTES`]); `name` is used in errors.
pub fn decompress(name: &str, raw: Vec<u8>) -> Result<Vec<u8>> {
    match Compression::sniff(&raw) {
        Compression::None => Ok(raw),
        c => read_all(name, c, std::io::Cursor::new(raw)),
    }
}

/// The text of `path` (`-`: standard input; decompressed), which must be UTF-8.
pub fn read_text(path: &Path) -> Result<String> {
    let name = display_name(path);
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
