//! Packet headers between numpy and [`FlowKey`]: what `classify` accepts and `read_trace` returns.
//!
//! Two forms of `headers`:
//! - a plain `uint32` array of shape `(n, k)`, `5 <= k <= 11`: the columns are the first `k` of
//!   [`FIELDS`] (`nw_src, nw_dst, tp_src, tp_dst, nw_proto` — a ClassBench 5-tuple — then
//!   `tcp_flags, in_port, dl_type, vlan_tci, nw_tos, nw_frag`), read in place a row at a time.
//!
//! Both are read with the GIL released, a chunk of keys at a time between lookups (the keys stay
//! in cache).
//! - a 1-D structured array whose fields are any of the 21 [`FIELDS`] (`rqvs.HEADER_DTYPE` has
//!   them all; `dl_src`/`dl_dst`/`arp_sha`/`arp_tha` are 48-bit MAC addresses in an integer),
//!   each of an integer dtype in native byte order; the 128-bit fields (`ipv6_src`, `ipv6_dst`,
//!   `nd_target`) are 16 bytes in network order (a `(16,)` subarray of `uint8`, as
//!   `ipaddress.IPv6Address(...).packed` gives them), or an integer dtype for values below 2^64.
//!   It is read in place too, field by field a chunk at a time.
//!
//! Fields not given take a ClassBench packet's values: `in_port` 1, `dl_type` 0x0800 (IPv4), the
//! rest 0. A value wider than its field is an error naming the packet and the field, never
//! truncated. A wrong dtype is a `TypeError`, a wrong shape or value a `ValueError`.

use numpy::ndarray::ArrayView2;
use numpy::{PyArray2, PyArrayDescrMethods, PyArrayMethods, PyReadonlyArray2, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use rqvs_classify::BATCH;
use rqvs_flow::{FlowKey, RuleId};

/// Every header field: the first 11 in the column order of the plain form, then the MACs and
/// the wide fields (structured arrays only).
pub const FIELDS: [&str; 21] = [
    "nw_src",
    "nw_dst",
    "tp_src",
    "tp_dst",
    "nw_proto",
    "tcp_flags",
    "in_port",
    "dl_type",
    "vlan_tci",
    "nw_tos",
    "nw_frag",
    "dl_src",
    "dl_dst",
    "nw_ttl",
    "metadata",
    "ipv6_src",
    "ipv6_dst",
    "ipv6_label",
    "nd_target",
    "arp_sha",
    "arp_tha",
];

/// Width of each field of [`FIELDS`], in bits.
pub const BITS: [u32; 21] = [32, 32, 16, 16, 8, 12, 32, 16, 16, 8, 2, 48, 48, 8, 64, 128, 128, 20, 128, 48, 48];

/// Columns a plain `uint32` array may have (the MACs need the structured form).
const MIN_COLUMNS: usize = 5;
const MAX_COLUMNS: usize = 11;

/// Keys converted and looked up per step (they stay in the L1/L2 cache).
const CHUNK: usize = 256;

/// A ClassBench packet with every field zero: what fields not given take.
fn base_key() -> FlowKey {
    FlowKey::ipv4(0, 0, 0, 0, 0)
}

fn mac(v: u64) -> [u8; 6] {
    let b = v.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

fn mac_value(m: [u8; 6]) -> u64 {
    u64::from_be_bytes([0, 0, m[0], m[1], m[2], m[3], m[4], m[5]])
}

/// Sets field `f` of [`FIELDS`] to `v`, which fits its width.
#[inline(always)]
fn set(k: &mut FlowKey, f: usize, v: u128) {
    match f {
        0 => k.nw_src = v as u32,
        1 => k.nw_dst = v as u32,
        2 => k.tp_src = v as u16,
        3 => k.tp_dst = v as u16,
        4 => k.nw_proto = v as u8,
        5 => k.tcp_flags = v as u16,
        6 => k.in_port = v as u32,
        7 => k.dl_type = v as u16,
        8 => k.vlan_tci = v as u16,
        9 => k.nw_tos = v as u8,
        10 => k.nw_frag = v as u8,
        11 => k.dl_src = mac(v as u64),
        12 => k.dl_dst = mac(v as u64),
        13 => k.nw_ttl = v as u8,
        14 => k.metadata = v as u64,
        15 => k.ipv6_src = v,
        16 => k.ipv6_dst = v,
        17 => k.ipv6_label = v as u32,
        18 => k.nd_target = v,
        19 => k.arp_sha = mac(v as u64),
        _ => k.arp_tha = mac(v as u64),
    }
}

/// Field `f` of [`FIELDS`] of `k`.
pub fn get(k: &FlowKey, f: usize) -> u128 {
    match f {
        0 => k.nw_src.into(),
        1 => k.nw_dst.into(),
        2 => k.tp_src.into(),
        3 => k.tp_dst.into(),
        4 => k.nw_proto.into(),
        5 => k.tcp_flags.into(),
        6 => k.in_port.into(),
        7 => k.dl_type.into(),
        8 => k.vlan_tci.into(),
        9 => k.nw_tos.into(),
        10 => k.nw_frag.into(),
        11 => mac_value(k.dl_src).into(),
        12 => mac_value(k.dl_dst).into(),
        13 => k.nw_ttl.into(),
        14 => k.metadata.into(),
        15 => k.ipv6_src,
        16 => k.ipv6_dst,
        17 => k.ipv6_label.into(),
        18 => k.nd_target,
        19 => mac_value(k.arp_sha).into(),
        _ => mac_value(k.arp_tha).into(),
    }
}

fn out_of_range(at: &str, f: usize, v: i128) -> String {
    format!("headers{at}: {} {v} is out of range 0..{}", FIELDS[f], u128::MAX >> (128 - BITS[f]))
}

/// Headers checked and ready to look up.
pub enum Headers<'py> {
    /// The plain form.
    Plain(PyReadonlyArray2<'py, u32>),
    /// The structured form: where each field is, and the array, held so that its data stays
    /// valid while the layout points into it.
    Structured { layout: Structured, _array: Bound<'py, PyUntypedArray> },
}

/// A view of [`Headers`] that can cross to a thread without the GIL.
pub enum View<'a> {
    Plain(ArrayView2<'a, u32>),
    Structured(&'a Structured),
}

impl Headers<'_> {
    pub fn view(&self) -> View<'_> {
        match self {
            Headers::Plain(a) => View::Plain(a.as_array()),
            Headers::Structured { layout, .. } => View::Structured(layout),
        }
    }
}

impl View<'_> {
    pub fn len(&self) -> usize {
        match self {
            View::Plain(a) => a.nrows(),
            View::Structured(s) => s.n,
        }
    }
}

fn shape_text(shape: &[usize]) -> String {
    match shape {
        [n] => format!("({n},)"),
        _ => format!("({})", shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    }
}

/// Checks `headers` (module docs) and, for the structured form, converts it.
pub fn parse<'py>(headers: &Bound<'py, PyAny>) -> PyResult<Headers<'py>> {
    let Ok(array) = headers.cast::<PyUntypedArray>() else {
        return Err(PyTypeError::new_err(format!(
            "headers: expected a numpy array (uint32 of shape (n, 5) to (n, 11), or structured with rqvs.HEADER_DTYPE's fields), found {}",
            headers.get_type().name()?
        )));
    };
    let dtype = array.dtype();
    if dtype.has_fields() {
        let layout = structured(array)?;
        return Ok(Headers::Structured { layout, _array: array.clone() });
    }
    if !dtype.is_equiv_to(&numpy::dtype::<u32>(headers.py())) {
        return Err(PyTypeError::new_err(format!(
            "headers: expected dtype uint32 (or a structured array with rqvs.HEADER_DTYPE's fields), found {}",
            dtype.str()?
        )));
    }
    let shape = array.shape();
    if shape.len() != 2 || !(MIN_COLUMNS..=MAX_COLUMNS).contains(&shape[1]) {
        return Err(PyValueError::new_err(format!(
            "headers: expected shape (n, 5) to (n, 11), columns {}; found shape {}",
            FIELDS[..MAX_COLUMNS].join(", "),
            shape_text(shape)
        )));
    }
    let plain = array.cast::<PyArray2<u32>>()?;
    let plain = plain.try_readonly().map_err(|e| PyValueError::new_err(format!("headers: {e}")))?;
    Ok(Headers::Plain(plain))
}

/// One field of a structured array: where it is and how to read it.
struct Column {
    field: usize,
    offset: usize,
    /// Bytes of an integer; 16 for a 128-bit field's bytes in network order.
    size: usize,
    signed: bool,
    bytes: bool,
}

/// A structured array's layout: its elements and where each field sits in one.
pub struct Structured {
    data: *const u8,
    stride: isize,
    n: usize,
    columns: Vec<Column>,
}

// SAFETY: `data` points into a numpy array that `Headers::Structured` holds a reference to for as
// long as this layout is used (the GIL released or not), so it stays allocated; it is only read.
// Python code may write the array meanwhile, as it may while numpy's own functions run without
// the GIL: the values read are then some mix of old and new, never memory outside the array.
unsafe impl Send for Structured {}
// SAFETY: as for `Send`: shared use only reads.
unsafe impl Sync for Structured {}

/// Checks a structured array (module docs) and finds its fields; the GIL is held.
fn structured(array: &Bound<'_, PyUntypedArray>) -> PyResult<Structured> {
    let dtype = array.dtype();
    if array.ndim() != 1 {
        return Err(PyValueError::new_err(format!(
            "headers: expected a 1-D structured array, found shape {}",
            shape_text(array.shape())
        )));
    }
    let mut columns = Vec::new();
    for name in dtype.names().unwrap_or_default() {
        let Some(field) = FIELDS.iter().position(|f| *f == name) else {
            return Err(PyValueError::new_err(format!(
                "headers: unknown field '{name}' (known: {})",
                FIELDS.join(", ")
            )));
        };
        let (fd, offset) = dtype.get_field(&name)?;
        let size = fd.itemsize();
        // A 128-bit field as 16 bytes: a (16,) subarray of uint8 (its itemsize is 16).
        let bytes = BITS[field] == 128
            && fd.has_subarray()
            && size == 16
            && fd.base().is_equiv_to(&numpy::dtype::<u8>(array.py()))
            && fd.shape() == vec![16];
        let integer = matches!(fd.kind(), b'u' | b'i') && !fd.has_subarray() && matches!(size, 1 | 2 | 4 | 8);
        if !(integer || bytes) || (integer && fd.is_native_byteorder() == Some(false)) {
            let also = if BITS[field] == 128 { " or a (16,) subarray of uint8 (network order)" } else { "" };
            return Err(PyTypeError::new_err(format!(
                "headers: field '{name}' has dtype {}, expected an integer dtype in native byte order{also}",
                fd.str()?
            )));
        }
        columns.push(Column { field, offset, size, signed: fd.kind() == b'i', bytes });
    }
    // SAFETY: a numpy array object, alive while `array` is (see `Structured`).
    let data = unsafe { (*array.as_array_ptr()).fields.data } as *const u8;
    Ok(Structured { data, stride: array.strides()[0], n: array.len(), columns })
}

impl Structured {
    /// Fills `keys` with elements `first..first + keys.len()`, field by field.
    fn convert(&self, first: usize, keys: &mut [FlowKey]) -> Result<(), String> {
        keys.fill(base_key());
        for c in &self.columns {
            let bits = BITS[c.field];
            // One loop per integer type, so the type is not matched per value.
            macro_rules! column {
                ($t:ty) => {
                    for (j, key) in keys.iter_mut().enumerate() {
                        let i = first + j;
                        // SAFETY: `i < n` elements of `stride` bytes from `data`, and the
                        // field's `offset + size` (the size of `$t`) lies within one element
                        // (numpy's dtype says so); read unaligned because packed dtypes need not
                        // align their fields.
                        let raw = unsafe {
                            self.data.offset(i as isize * self.stride).add(c.offset).cast::<$t>().read_unaligned()
                        };
                        #[allow(unused_comparisons)] // unsigned types: never negative
                        let negative = raw < 0;
                        let v = raw as u64;
                        if negative || (bits < 64 && v >> bits != 0) {
                            return Err(out_of_range(&format!("[{i}]"), c.field, i128::from(raw)));
                        }
                        set(key, c.field, v.into());
                    }
                };
            }
            if c.bytes {
                for (j, key) in keys.iter_mut().enumerate() {
                    let i = first + j;
                    // SAFETY: as in `column!`: 16 bytes at the field's offset lie within element
                    // `i < n` (the subarray's itemsize is 16).
                    let raw = unsafe {
                        self.data.offset(i as isize * self.stride).add(c.offset).cast::<[u8; 16]>().read_unaligned()
                    };
                    set(key, c.field, u128::from_be_bytes(raw));
                }
                continue;
            }
            match (c.size, c.signed) {
                (1, false) => column!(u8),
                (2, false) => column!(u16),
                (4, false) => column!(u32),
                (8, false) => column!(u64),
                (1, true) => column!(i8),
                (2, true) => column!(i16),
                (4, true) => column!(i32),
                _ => column!(i64),
            }
        }
        Ok(())
    }
}

/// Fills `key` from one row of a plain array (`row.len()` columns of [`FIELDS`]).
#[inline(always)]
fn plain_row(row: &[u32], key: &mut FlowKey) -> Result<(), usize> {
    // The fields narrower than 32 bits, checked at once; the culprit found only on an error.
    let mut wide = (row[2] | row[3]) >> 16 | row[4] >> 8;
    *key = base_key();
    key.nw_src = row[0];
    key.nw_dst = row[1];
    key.tp_src = row[2] as u16;
    key.tp_dst = row[3] as u16;
    key.nw_proto = row[4] as u8;
    for (f, &v) in row.iter().enumerate().skip(MIN_COLUMNS) {
        wide |= if BITS[f] < 32 { v >> BITS[f] } else { 0 };
        set(key, f, v.into());
    }
    if wide == 0 {
        Ok(())
    } else {
        Err(row.iter().enumerate().position(|(f, &v)| BITS[f] < 32 && v >> BITS[f] != 0).unwrap_or(0))
    }
}

/// Looks every packet of `view` up with `lookup` (batches of [`BATCH`]) into `out` (rule id, or
/// -1 for no match), converting a chunk at a time; a value too wide for its field stops the run
/// with a message naming it.
pub fn classify(
    view: &View<'_>,
    out: &mut [i64],
    mut lookup: impl FnMut(&[FlowKey], &mut [Option<RuleId>]),
) -> Result<(), String> {
    let mut found = [None; BATCH];
    let mut run = |keys: &[FlowKey], out: &mut [i64]| {
        for (k, o) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            let f = &mut found[..k.len()];
            lookup(k, f);
            for (r, id) in o.iter_mut().zip(f.iter()) {
                *r = id.map_or(-1, |id| i64::from(id.0));
            }
        }
    };
    let mut keys = vec![base_key(); CHUNK];
    for (c, o) in out.chunks_mut(CHUNK).enumerate() {
        let first = c * CHUNK;
        let keys = &mut keys[..o.len()];
        match view {
            View::Structured(s) => s.convert(first, keys)?,
            View::Plain(a) => {
                let cols = a.ncols();
                let mut buf = [0u32; MAX_COLUMNS];
                let contiguous = a.as_slice();
                for (j, key) in keys.iter_mut().enumerate() {
                    let i = first + j;
                    let row = match contiguous {
                        Some(s) => &s[i * cols..(i + 1) * cols],
                        None => {
                            for (col, v) in buf[..cols].iter_mut().enumerate() {
                                *v = a[[i, col]];
                            }
                            &buf[..cols]
                        }
                    };
                    plain_row(row, key).map_err(|f| out_of_range(&format!("[{i}, {f}]"), f, row[f].into()))?;
                }
            }
        }
        run(keys, o);
    }
    Ok(())
}
