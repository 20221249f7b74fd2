//! Packet headers between numpy and [`FlowKey`]: what `classify` accepts and `read_trace` returns.
//!
//! Two forms of `headers`:
//! - a plain `uint32` array of shape `(n, k)`, `5 <= k <= 11`: the columns are the first `k` of
//!   [`FIELDS`] (`nw_src, nw_dst, tp_src, tp_dst, nw_proto` — a ClassBench 5-tuple — then
//!   `tcp_flags, in_port, dl_type, vlan_tci, nw_tos, nw_frag`). This is the fast path: it is read
//!   in place, with the GIL released, a chunk at a time between lookups.
//! - a 1-D structured array whose fields are any of the 13 [`FIELDS`] (`rqvs.HEADER_DTYPE` has
//!   them all; `dl_src`/`dl_dst` are 48-bit MAC addresses in an integer), each of an integer dtype
//!   in native byte order. It is converted to keys with the GIL held, then looked up without it.
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

/// Every header field, in the column order of the plain form.
pub const FIELDS: [&str; 13] = [
    "nw_src", "nw_dst", "tp_src", "tp_dst", "nw_proto", "tcp_flags", "in_port", "dl_type", "vlan_tci", "nw_tos",
    "nw_frag", "dl_src", "dl_dst",
];

/// Width of each field of [`FIELDS`], in bits.
pub const BITS: [u32; 13] = [32, 32, 16, 16, 8, 12, 32, 16, 16, 8, 2, 48, 48];

/// Columns a plain `uint32` array may have (the MACs need the structured form).
const MIN_COLUMNS: usize = 5;
const MAX_COLUMNS: usize = 11;

/// Keys converted and looked up per step of the plain path (stays in the L1/L2 cache).
const CHUNK: usize = 1024;

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
fn set(k: &mut FlowKey, f: usize, v: u64) {
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
        11 => k.dl_src = mac(v),
        _ => k.dl_dst = mac(v),
    }
}

/// Field `f` of [`FIELDS`] of `k`.
pub fn get(k: &FlowKey, f: usize) -> u64 {
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
        11 => mac_value(k.dl_src),
        _ => mac_value(k.dl_dst),
    }
}

fn out_of_range(at: &str, f: usize, v: i128) -> String {
    format!("headers{at}: {} {v} is out of range 0..{}", FIELDS[f], (1u64 << BITS[f]) - 1)
}

/// Headers checked and ready to look up.
pub enum Headers<'py> {
    /// The plain form, read in place.
    Plain(PyReadonlyArray2<'py, u32>),
    /// The structured form, converted.
    Keys(Vec<FlowKey>),
}

/// A view of [`Headers`] that can cross to a thread without the GIL.
pub enum View<'a> {
    Plain(ArrayView2<'a, u32>),
    Keys(&'a [FlowKey]),
}

impl Headers<'_> {
    pub fn view(&self) -> View<'_> {
        match self {
            Headers::Plain(a) => View::Plain(a.as_array()),
            Headers::Keys(k) => View::Keys(k),
        }
    }
}

impl View<'_> {
    pub fn len(&self) -> usize {
        match self {
            View::Plain(a) => a.nrows(),
            View::Keys(k) => k.len(),
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
        return structured(array).map(Headers::Keys);
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
    size: usize,
    signed: bool,
}

/// Converts a structured array (module docs) to keys; the GIL is held throughout.
fn structured(array: &Bound<'_, PyUntypedArray>) -> PyResult<Vec<FlowKey>> {
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
        let integer = matches!(fd.kind(), b'u' | b'i') && !fd.has_subarray() && matches!(size, 1 | 2 | 4 | 8);
        if !integer || fd.is_native_byteorder() == Some(false) {
            return Err(PyTypeError::new_err(format!(
                "headers: field '{name}' has dtype {}, expected an integer dtype in native byte order",
                fd.str()?
            )));
        }
        columns.push(Column { field, offset, size, signed: fd.kind() == b'i' });
    }
    let n = array.len();
    let stride = array.strides()[0];
    // SAFETY: a numpy array object; its data pointer is valid while we hold the GIL and a
    // reference to the array, which we do until this function returns.
    let data = unsafe { (*array.as_array_ptr()).fields.data } as *const u8;
    let mut keys = vec![base_key(); n];
    for (i, key) in keys.iter_mut().enumerate() {
        for c in &columns {
            // SAFETY: `i < n` elements of `stride` bytes from `data`, and the field's
            // `offset + size` lies within one element (numpy's dtype says so); read unaligned
            // because packed dtypes need not align their fields.
            let v: i128 = unsafe {
                let p = data.offset(i as isize * stride).add(c.offset);
                match (c.size, c.signed) {
                    (1, false) => p.read().into(),
                    (2, false) => p.cast::<u16>().read_unaligned().into(),
                    (4, false) => p.cast::<u32>().read_unaligned().into(),
                    (8, false) => p.cast::<u64>().read_unaligned().into(),
                    (1, true) => p.cast::<i8>().read().into(),
                    (2, true) => p.cast::<i16>().read_unaligned().into(),
                    (4, true) => p.cast::<i32>().read_unaligned().into(),
                    _ => p.cast::<i64>().read_unaligned().into(),
                }
            };
            if v < 0 || v >> BITS[c.field] != 0 {
                return Err(PyValueError::new_err(out_of_range(&format!("[{i}]"), c.field, v)));
            }
            set(key, c.field, v as u64);
        }
    }
    Ok(keys)
}

/// Looks every packet of `view` up with `lookup` (batches of [`BATCH`]) into `out` (rule id, or
/// -1 for no match). The plain form is converted a chunk at a time; a value too wide for its
/// field stops the run with a message naming it.
pub fn classify(
    view: &View<'_>,
    out: &mut [i64],
    lookup: &mut dyn FnMut(&[FlowKey], &mut [Option<RuleId>]),
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
    match view {
        View::Keys(keys) => run(keys, out),
        View::Plain(a) => {
            let cols = a.ncols();
            let mut keys = vec![base_key(); CHUNK];
            let mut row = [0u32; MAX_COLUMNS];
            let contiguous = a.as_slice();
            for (c, o) in out.chunks_mut(CHUNK).enumerate() {
                let first = c * CHUNK;
                for (j, key) in keys[..o.len()].iter_mut().enumerate() {
                    let i = first + j;
                    match contiguous {
                        Some(s) => row[..cols].copy_from_slice(&s[i * cols..(i + 1) * cols]),
                        None => {
                            for (col, v) in row[..cols].iter_mut().enumerate() {
                                *v = a[[i, col]];
                            }
                        }
                    }
                    *key = base_key();
                    for (f, &v) in row[..cols].iter().enumerate() {
                        if BITS[f] < 32 && v >> BITS[f] != 0 {
                            return Err(out_of_range(&format!("[{i}, {f}]"), f, v.into()));
                        }
                        set(key, f, v.into());
                    }
                }
                run(&keys[..o.len()], o);
            }
        }
    }
    Ok(())
}
