//! `rqvs._rqvs`: the extension module of the `rqvs` Python package (python/rqvs wraps it). Its
//! modules, private to the crate:
//!
//! | Python | Rust |
//! |---|---|
//! | `Classifier` (`from_file`, `from_rules`, `classify`, `insert`, `remove`) | `classifier::Classifier` over `rqvs_classify::build` |
//! | `LiveNuevoMatch` (the same, by policy, with its trainer thread) | `classifier::LiveNuevoMatch` over `rqvs_classify::nuevomatch::live` |
//! | numpy headers ↔ `FlowKey` | `headers` |
//! | `replay`, `compare`, `gen_rules`, `gen_trace`, `gen_attack`, `read_trace` | `experiments` over `rqvs_experiment` |
//!
//! Errors are Python exceptions with the command line's one-line messages (`error`); nothing
//! here panics on bad input.

use pyo3::prelude::*;

mod classifier;
mod error;
mod experiments;
mod headers;

#[pymodule]
fn _rqvs(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<classifier::Classifier>()?;
    m.add_class::<classifier::LiveNuevoMatch>()?;
    m.add_function(wrap_pyfunction!(experiments::replay, m)?)?;
    m.add_function(wrap_pyfunction!(experiments::compare, m)?)?;
    m.add_function(wrap_pyfunction!(experiments::gen_rules, m)?)?;
    m.add_function(wrap_pyfunction!(experiments::gen_trace, m)?)?;
    m.add_function(wrap_pyfunction!(experiments::gen_attack, m)?)?;
    m.add_function(wrap_pyfunction!(experiments::read_trace_columns, m)?)?;
    m.add("FIELDS", headers::FIELDS.to_vec())?;
    m.add("CLASSIFIERS", rqvs_classify::CLASSIFIER_NAMES.to_vec())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
