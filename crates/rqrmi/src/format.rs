//! The model file: versioned, checksummed, validated on load.
//!
//! Layout (all integers and floats little-endian):
//!
//! ```text
//! magic       8   b"RQRMI\0\r\n"
//! version     u32 = 1
//! key_bits    u32 (32 for u32 keys)
//! n_ranges    u64
//! n_stages    u32
//! widths      n_stages × u32
//! ranges      n_ranges × (lo, hi), key_bits/8 bytes each
//! submodels   Σwidths × 27 × f64 (mean, inv_std, w[8], b[8], v[8], b2)
//! bounds      widths[last] × (i64 err_lo, i64 err_hi)
//! stats       f64 train_ms, u32 sessions, u32 retrained_leaves, u32 leaves_over_target,
//!             u64 samples, u64 leaf_pieces
//! crc32       u32, CRC-32 (IEEE) of every byte before it
//! ```
//!
//! Loading checks, in order: magic, version, key width, stage count and widths, that the
//! stream holds all the bytes the header announces (a corrupt length cannot make it allocate
//! more than the stream holds), the checksum, the ranges (sorted, disjoint), the parameters
//! (finite, bounded), and finally that the error bounds recomputed from the parameters equal
//! the stored ones — so a loaded model is sound whatever the file says.

use std::fmt;
use std::io::{self, Read, Write};

use crate::bound::all_bounds;
use crate::key::Key;
use crate::model::{RqRmi, SubModel, PARAMS};
use crate::train::{check_ranges, check_widths, TrainStats};

const MAGIC: [u8; 8] = *b"RQRMI\0\r\n";
/// The current (and only) format version.
pub const VERSION: u32 = 1;
const HEADER: usize = 8 + 4 + 4 + 8 + 4;
const STATS: usize = 8 + 4 + 4 + 4 + 8 + 8;

/// Why a model could not be loaded (or saved).
#[derive(Debug)]
pub enum FormatError {
    /// An I/O error other than end of input.
    Io(io::Error),
    /// The input ended early.
    Truncated { needed: u64, got: u64 },
    /// Not a model file.
    BadMagic,
    /// A format version this build does not read.
    UnsupportedVersion(u32),
    /// A model over keys of another width.
    KeyWidth { expected: u32, found: u32 },
    /// The bytes were changed after writing.
    Checksum { stored: u32, computed: u32 },
    /// The content is inconsistent (named).
    Invalid(String),
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Io(e) => write!(f, "rqrmi model: I/O error: {e}"),
            FormatError::Truncated { needed, got } => {
                write!(f, "rqrmi model: truncated: needed {needed} bytes, got {got}")
            }
            FormatError::BadMagic => write!(f, "rqrmi model: bad magic: not an rqrmi model file"),
            FormatError::UnsupportedVersion(v) => {
                write!(f, "rqrmi model: format version {v} not supported (this build reads {VERSION})")
            }
            FormatError::KeyWidth { expected, found } => {
                write!(f, "rqrmi model: key width {found} bits, expected {expected}")
            }
            FormatError::Checksum { stored, computed } => {
                write!(f, "rqrmi model: checksum mismatch (stored {stored:08x}, computed {computed:08x}): corrupt file")
            }
            FormatError::Invalid(m) => write!(f, "rqrmi model: invalid: {m}"),
        }
    }
}

impl std::error::Error for FormatError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FormatError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for FormatError {
    fn from(e: io::Error) -> Self {
        FormatError::Io(e)
    }
}

fn crc_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    for (i, e) in t.iter_mut().enumerate() {
        let mut c = i as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 { 0xedb8_8320 ^ (c >> 1) } else { c >> 1 };
        }
        *e = c;
    }
    t
}

/// CRC-32 (IEEE 802.3, as zlib).
pub(crate) fn crc32(data: &[u8]) -> u32 {
    let t = crc_table();
    !data.iter().fold(!0u32, |c, &b| t[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8))
}

fn put_key<K: Key>(buf: &mut Vec<u8>, k: K) {
    buf.extend_from_slice(&k.to_u64().to_le_bytes()[..(K::BITS / 8) as usize]);
}

/// A bounds-checked little-endian reader over the loaded bytes.
struct Cur<'a> {
    b: &'a [u8],
    p: usize,
}

impl Cur<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        // Lengths were checked against the header before parsing; this cannot go past the end.
        let s = &self.b[self.p..self.p + n];
        self.p += n;
        s
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().expect("4 bytes"))
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().expect("8 bytes"))
    }
    fn i64(&mut self) -> i64 {
        i64::from_le_bytes(self.take(8).try_into().expect("8 bytes"))
    }
    fn f64(&mut self) -> f64 {
        f64::from_bits(self.u64())
    }
    fn key<K: Key>(&mut self) -> Option<K> {
        let n = (K::BITS / 8) as usize;
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(self.take(n));
        K::from_u64(u64::from_le_bytes(b))
    }
}

impl<K: Key> RqRmi<K> {
    /// The model as bytes (see the module docs for the layout).
    pub fn to_bytes(&self) -> Vec<u8> {
        let kb = (K::BITS / 8) as usize;
        let mut buf = Vec::with_capacity(HEADER + self.len() * 2 * kb + self.subs.len() * PARAMS * 8 + 64);
        buf.extend_from_slice(&MAGIC);
        buf.extend_from_slice(&VERSION.to_le_bytes());
        buf.extend_from_slice(&K::BITS.to_le_bytes());
        buf.extend_from_slice(&(self.len() as u64).to_le_bytes());
        buf.extend_from_slice(&(self.widths.len() as u32).to_le_bytes());
        for &w in &self.widths {
            buf.extend_from_slice(&(w as u32).to_le_bytes());
        }
        for (&lo, &hi) in self.los.iter().zip(&self.his) {
            put_key(&mut buf, lo);
            put_key(&mut buf, hi);
        }
        for m in &self.subs {
            for p in m.params() {
                buf.extend_from_slice(&p.to_bits().to_le_bytes());
            }
        }
        for &(lo, hi) in &self.bounds {
            buf.extend_from_slice(&lo.to_le_bytes());
            buf.extend_from_slice(&hi.to_le_bytes());
        }
        let s = &self.stats;
        buf.extend_from_slice(&s.train_ms.to_bits().to_le_bytes());
        buf.extend_from_slice(&s.sessions.to_le_bytes());
        buf.extend_from_slice(&s.retrained_leaves.to_le_bytes());
        buf.extend_from_slice(&s.leaves_over_target.to_le_bytes());
        buf.extend_from_slice(&s.samples.to_le_bytes());
        buf.extend_from_slice(&s.leaf_pieces.to_le_bytes());
        let c = crc32(&buf);
        buf.extend_from_slice(&c.to_le_bytes());
        buf
    }

    /// Writes the model (see the module docs for the layout).
    pub fn save(&self, w: &mut impl Write) -> Result<(), FormatError> {
        w.write_all(&self.to_bytes())?;
        Ok(())
    }

    /// Reads a model written by [`save`](Self::save). Never panics on bad input.
    pub fn load(r: &mut impl Read) -> Result<Self, FormatError> {
        let mut head = Vec::with_capacity(HEADER);
        read_up_to(r, &mut head, HEADER as u64)?;
        if head.len() >= 8 && head[..8] != MAGIC {
            return Err(FormatError::BadMagic);
        }
        if head.len() < HEADER {
            return Err(FormatError::Truncated { needed: HEADER as u64, got: head.len() as u64 });
        }
        let mut c = Cur { b: &head, p: 8 };
        let version = c.u32();
        if version != VERSION {
            return Err(FormatError::UnsupportedVersion(version));
        }
        let bits = c.u32();
        if bits != K::BITS {
            return Err(FormatError::KeyWidth { expected: K::BITS, found: bits });
        }
        let n = c.u64();
        let stages = c.u32() as usize;
        if n == 0 || n > u64::from(u32::MAX) {
            return Err(FormatError::Invalid(format!("{n} ranges: 1..={} allowed", u32::MAX)));
        }
        if stages == 0 || stages > crate::train::MAX_STAGES {
            return Err(FormatError::Invalid(format!("{stages} stages: 1..={} allowed", crate::train::MAX_STAGES)));
        }
        let mut wbytes = Vec::with_capacity(stages * 4);
        read_up_to(r, &mut wbytes, stages as u64 * 4)?;
        if wbytes.len() < stages * 4 {
            return Err(FormatError::Truncated {
                needed: (HEADER + stages * 4) as u64,
                got: (HEADER + wbytes.len()) as u64,
            });
        }
        let mut c = Cur { b: &wbytes, p: 0 };
        let widths: Vec<usize> = (0..stages).map(|_| c.u32() as usize).collect();
        check_widths(&widths).map_err(FormatError::Invalid)?;
        let kb = u64::from(K::BITS / 8);
        let nsubs: u64 = widths.iter().map(|&w| w as u64).sum();
        let body = n * 2 * kb + nsubs * PARAMS as u64 * 8 + widths[stages - 1] as u64 * 16 + STATS as u64 + 4;
        let mut all = head;
        all.extend_from_slice(&wbytes);
        let before = all.len() as u64;
        // Grows with the data actually read: a huge announced length on a short stream fails
        // as truncated without allocating it.
        read_up_to(r, &mut all, body)?;
        let got = all.len() as u64;
        if got < before + body {
            return Err(FormatError::Truncated { needed: before + body, got });
        }
        let (data, tail) = all.split_at(all.len() - 4);
        let stored = u32::from_le_bytes(tail.try_into().expect("4 bytes"));
        let computed = crc32(data);
        if stored != computed {
            return Err(FormatError::Checksum { stored, computed });
        }

        let mut c = Cur { b: data, p: before as usize };
        let mut los = Vec::with_capacity(n as usize);
        let mut his = Vec::with_capacity(n as usize);
        for i in 0..n {
            match (c.key::<K>(), c.key::<K>()) {
                (Some(lo), Some(hi)) => {
                    los.push(lo);
                    his.push(hi);
                }
                _ => return Err(FormatError::Invalid(format!("range {i}: key out of range"))),
            }
        }
        check_ranges(&los, &his).map_err(|e| FormatError::Invalid(e.to_string()))?;
        let mut subs = Vec::with_capacity(nsubs as usize);
        for s in 0..nsubs {
            let mut p = [0.0; PARAMS];
            for x in &mut p {
                *x = c.f64();
            }
            let m = SubModel::from_params(&p);
            if !m.is_valid() {
                return Err(FormatError::Invalid(format!("submodel {s}: parameter not finite or too large")));
            }
            subs.push(m);
        }
        let leaves = widths[stages - 1];
        let bounds: Vec<(i64, i64)> = (0..leaves).map(|_| (c.i64(), c.i64())).collect();
        let stats = TrainStats {
            train_ms: c.f64(),
            sessions: c.u32(),
            retrained_leaves: c.u32(),
            leaves_over_target: c.u32(),
            samples: c.u64(),
            leaf_pieces: c.u64(),
        };
        let mut model = RqRmi::from_parts(los, his, widths, subs, bounds, Vec::new(), stats);
        let (recomputed, counts) = all_bounds(&model);
        if let Some(leaf) = (0..leaves).find(|&l| recomputed[l] != model.bounds[l]) {
            return Err(FormatError::Invalid(format!(
                "leaf {leaf}: stored error bound {:?} differs from the one its parameters give {:?}",
                model.bounds[leaf], recomputed[leaf]
            )));
        }
        model.leaf_pieces = counts;
        Ok(model)
    }
}

/// Appends up to `n` bytes from `r` to `buf`, stopping early only at end of input.
fn read_up_to(r: &mut impl Read, buf: &mut Vec<u8>, n: u64) -> Result<(), FormatError> {
    r.take(n).read_to_end(buf)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::crc32;

    #[test]
    fn crc32_check_value() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }
}
