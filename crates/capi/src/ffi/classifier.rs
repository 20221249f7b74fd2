//! `rqvs_classifier_*` and `rqvs_classify_batch`: a classifier of any kind.

use std::os::raw::{c_char, c_int};
use std::ptr::null_mut;

use super::*;
use crate::handle::{self, rqvs_classifier};
use crate::types::rqvs_rule;

/// Builds a classifier of kind `kind` over the rules of a file: ClassBench rules or ovs-ofctl
/// flows (told apart by the first line), plain or xz-compressed. Rule ids are line numbers,
/// 0-based, counting rule lines only (as the `rqvs` command numbers them).
///
/// `kind`: "ref" (the reference: a linear scan in winner order), "tss" (tuple space search),
/// "tm" (TupleMerge), "ofproto" (the OpenFlow slow path, OVS semantics), "nmu" (NuevoMatchUP;
/// TupleMerge alone below 65,536 rules), "nmu-isets" (NuevoMatchUP with iSets at every size),
/// "nmu-bs" (NuevoMatchUP with binary search instead of the learned index).
///
/// Returns a new classifier the caller owns (free it with `rqvs_classifier_free`), or NULL on
/// failure with `*err` set (RQVS_ERR_IO, RQVS_ERR_PARSE with `file:line:column: expected …`,
/// RQVS_ERR_INVALID for an unknown kind, RQVS_ERR_NULL). `err` may be NULL; when it is not,
/// `*err` is set to NULL on success and to a new error (free it with `rqvs_error_free`) on
/// failure — the same for every function that takes `err`.
///
/// Thread safety: any thread; the strings are only read during the call.
///
/// # Safety
/// `rules_path` and `kind` are NULL or NUL-terminated strings; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rqvs_classifier_from_file(
    rules_path: *const c_char,
    kind: *const c_char,
    err: *mut *mut rqvs_error,
) -> *mut rqvs_classifier {
    // SAFETY: the pointers are as this function's contract says.
    unsafe {
        run(err, null_mut(), || {
            let (path, kind) = (text(rules_path, "rules_path")?, text(kind, "kind")?);
            Ok(into_handle(rqvs_classifier::build(kind, &handle::read_rules(path)?)?))
        })
    }
}

/// Builds a classifier of kind `kind` over rule text (ClassBench lines or ovs-ofctl flows, one
/// rule a line); errors name the text `name` (`name:line:column: …`). As
/// `rqvs_classifier_from_file` otherwise.
///
/// # Safety
/// `rules_text`, `name` and `kind` are NULL or NUL-terminated strings; `err` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn rqvs_classifier_from_text(
    rules_text: *const c_char,
    name: *const c_char,
    kind: *const c_char,
    err: *mut *mut rqvs_error,
) -> *mut rqvs_classifier {
    // SAFETY: the pointers are as this function's contract says.
    unsafe {
        run(err, null_mut(), || {
            let (body, name, kind) = (text(rules_text, "rules_text")?, text(name, "name")?, text(kind, "kind")?);
            Ok(into_handle(rqvs_classifier::build(kind, &handle::parse_rules(name, body)?)?))
        })
    }
}

/// Builds a classifier of kind `kind` over `n` rules in struct form; rule `i` gets id `i`.
/// `rules` may be NULL when `n` is 0 (an empty classifier). Fails with RQVS_ERR_INVALID (naming
/// the rule) when a rule's value has bits outside its mask or a port range is empty. Ownership
/// and `err` as `rqvs_classifier_from_file`; the array is only read during the call.
///
/// # Safety
/// `rules` is NULL or points to `n` initialized rules; `kind` is NULL or a NUL-terminated
/// string; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rqvs_classifier_from_rules(
    rules: *const rqvs_rule,
    n: usize,
    kind: *const c_char,
    err: *mut *mut rqvs_error,
) -> *mut rqvs_classifier {
    // SAFETY: the pointers are as this function's contract says.
    unsafe {
        run(err, null_mut(), || {
            let (rules, kind) = (handle::rules_from_structs(slice(rules, n, "rules")?)?, text(kind, "kind")?);
            Ok(into_handle(rqvs_classifier::build(kind, &rules)?))
        })
    }
}

/// Loads a NuevoMatchUP model saved by `rqvs_classifier_save_model`, `rqvs_live_save_model` or
/// `rqvs train` (its rules, iSets and trained indexes: no training). The classifier's kind is
/// "nmu". Fails with RQVS_ERR_IO or RQVS_ERR_MODEL (a truncated, corrupt or foreign file).
/// Ownership and `err` as `rqvs_classifier_from_file`.
///
/// # Safety
/// `model_path` is NULL or a NUL-terminated string; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rqvs_classifier_load_model(
    model_path: *const c_char,
    err: *mut *mut rqvs_error,
) -> *mut rqvs_classifier {
    // SAFETY: the pointers are as this function's contract says.
    unsafe { run(err, null_mut(), || Ok(into_handle(rqvs_classifier::load_model(text(model_path, "model_path")?)?))) }
}

/// Saves a NuevoMatchUP classifier's trained model (kinds "nmu" and "nmu-isets"; "nmu-bs" and
/// the other kinds have none: RQVS_ERR_INVALID) to `model_path`, for
/// `rqvs_classifier_load_model`. Returns RQVS_OK or an error code (`*err` as
/// `rqvs_classifier_from_file`).
///
/// Thread safety: a lookup; may run concurrently with other lookups, not with an update of
/// the same classifier.
///
/// # Safety
/// `c` is NULL or a live classifier; `model_path` is NULL or a NUL-terminated string; `err` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rqvs_classifier_save_model(
    c: *const rqvs_classifier,
    model_path: *const c_char,
    err: *mut *mut rqvs_error,
) -> c_int {
    // SAFETY: the pointers are as this function's contract says.
    unsafe { run_status(err, || get(c, "classifier")?.save_model(text(model_path, "model_path")?)) }
}

/// The number of rules the classifier holds (0 for NULL).
///
/// Thread safety: a lookup (see `rqvs_classify_batch`).
///
/// # Safety
/// `c` is NULL or a live classifier.
#[no_mangle]
pub unsafe extern "C" fn rqvs_classifier_len(c: *const rqvs_classifier) -> usize {
    // SAFETY: `c` is as this function's contract says.
    infallible(0, || unsafe { get(c, "classifier") }.map_or(0, |c| c.rule_count()))
}

/// The classifier's kind ("ref", "tss", "tm", "ofproto", "nmu", "nmu-isets", "nmu-bs"), a
/// static string the caller must not free; NULL for a NULL classifier.
///
/// # Safety
/// `c` is NULL or a live classifier.
#[no_mangle]
pub unsafe extern "C" fn rqvs_classifier_kind(c: *const rqvs_classifier) -> *const c_char {
    // SAFETY: `c` is as this function's contract says.
    infallible(std::ptr::null(), || {
        unsafe { get(c, "classifier") }.map_or(std::ptr::null(), |c| c.kind_name().as_ptr().cast())
    })
}

/// Classifies `n` packets: `rule_ids[i]` receives the id of the rule that wins for `keys[i]`
/// (highest priority, then lowest id), or -1 (RQVS_NO_MATCH) when no rule matches. The keys are
/// read in place (no copy) in batches of 32, as the `rqvs` command's `classify` does.
///
/// Returns RQVS_OK, RQVS_ERR_NULL (`c` NULL, or `keys` or `rule_ids` NULL with `n` > 0; nothing
/// is written) or RQVS_ERR_PANIC (an internal error; `rule_ids` is then unspecified).
/// `rqvs_status_str` describes a code.
///
/// Thread safety: lookups (`rqvs_classify_batch`, `rqvs_classifier_len`, `_kind`,
/// `_save_model`) may run concurrently from any number of threads; updates (`_insert_*`,
/// `_remove`) and `rqvs_classifier_free` need the classifier to themselves: the caller excludes
/// every other call on it meanwhile (a reader-writer lock, or one thread). For updates while
/// other threads look up, use the live handle (`rqvs_live`).
///
/// # Safety
/// `c` is NULL or a live classifier; `keys` is NULL or points to `n` keys; `rule_ids` is NULL or
/// points to `n` writable `int64_t`s not otherwise in use during the call.
#[no_mangle]
pub unsafe extern "C" fn rqvs_classify_batch(
    c: *const rqvs_classifier,
    keys: *const rqvs_key,
    n: usize,
    rule_ids: *mut i64,
) -> c_int {
    status(|| {
        // SAFETY: the pointers are as this function's contract says.
        let (c, k, out) =
            unsafe { (get(c, "classifier")?, slice(keys, n, "keys")?, slice_mut(rule_ids, n, "rule_ids")?) };
        c.classify(super::keys(k), out);
        Ok(())
    })
}

/// Inserts one rule given as text: a ClassBench line (starting with '@'), which gets priority
/// `priority`, or an ovs-ofctl flow (`priority=…,tcp,tp_dst=80,actions=drop`), which has its
/// own priority (default 32768; the argument is then not used). The rule gets the next id after
/// the largest the classifier has held.
///
/// Returns the new rule's id, or -1 with `*err` set: RQVS_ERR_PARSE
/// (`rule:1:column: expected …`), RQVS_ERR_RULE (the classifier cannot hold it), RQVS_ERR_NULL.
/// A failed insert changes nothing and uses up no id.
///
/// Thread safety: an update: the caller excludes every other call on `c` (see
/// `rqvs_classify_batch`).
///
/// # Safety
/// `c` is NULL or a live classifier no other thread uses during the call; `rule` is NULL or a
/// NUL-terminated string; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rqvs_classifier_insert_text(
    c: *mut rqvs_classifier,
    rule: *const c_char,
    priority: u32,
    err: *mut *mut rqvs_error,
) -> i64 {
    // SAFETY: the pointers are as this function's contract says.
    unsafe {
        run(err, -1, || {
            let (c, rule) = (get_mut(c, "classifier")?, text(rule, "rule")?);
            Ok(i64::from(c.insert(|id| handle::parse_rule(rule, id, priority))?))
        })
    }
}

/// Inserts one rule in struct form (its actions are `drop`), under the next id, which it
/// returns; -1 with `*err` set on failure (RQVS_ERR_INVALID for a value outside its mask or an
/// empty port range, RQVS_ERR_RULE, RQVS_ERR_NULL). The struct is only read during the call.
/// Thread safety: an update (see `rqvs_classifier_insert_text`).
///
/// # Safety
/// `c` is NULL or a live classifier no other thread uses during the call; `rule` is NULL or
/// points to a rule; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rqvs_classifier_insert_rule(
    c: *mut rqvs_classifier,
    rule: *const rqvs_rule,
    err: *mut *mut rqvs_error,
) -> i64 {
    // SAFETY: the pointers are as this function's contract says.
    unsafe {
        run(err, -1, || {
            let (c, rule) = (get_mut(c, "classifier")?, get(rule, "rule")?);
            Ok(i64::from(c.insert(|id| handle::struct_rule(rule, id))?))
        })
    }
}

/// Removes the rule with id `id`. When `removed` is not NULL it receives the rule in struct
/// form (for re-inserting it; its actions are not kept). Returns RQVS_OK, or
/// RQVS_ERR_NOT_FOUND (no rule has this id; nothing changes), RQVS_ERR_NULL, with `*err` set.
/// Thread safety: an update (see `rqvs_classifier_insert_text`).
///
/// # Safety
/// `c` is NULL or a live classifier no other thread uses during the call; `removed` is NULL or
/// writable; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rqvs_classifier_remove(
    c: *mut rqvs_classifier,
    id: u32,
    removed: *mut rqvs_rule,
    err: *mut *mut rqvs_error,
) -> c_int {
    // SAFETY: the pointers are as this function's contract says.
    unsafe {
        run_status(err, || {
            let rule = get_mut(c, "classifier")?.remove(id)?;
            write_opt(removed, rqvs_rule::from(&rule));
            Ok(())
        })
    }
}

/// Frees a classifier and everything it holds; NULL does nothing. The handle is invalid after.
/// Thread safety: no other call on `c` may be running or follow.
///
/// # Safety
/// `c` is NULL or a classifier from this library that was not freed.
#[no_mangle]
pub unsafe extern "C" fn rqvs_classifier_free(c: *mut rqvs_classifier) {
    // SAFETY: `c` is as this function's contract says.
    infallible((), || unsafe { free_handle(c) })
}
