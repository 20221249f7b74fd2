//! `rqvs_live_*`: NuevoMatchUP under updates, with its background trainer.

use std::os::raw::{c_char, c_int};
use std::ptr::null_mut;

use super::*;
use crate::handle::{self, rqvs_live};
use crate::types::{rqvs_live_stats, rqvs_rule};

/// Builds a live NuevoMatchUP classifier over the rules of a file (as
/// `rqvs_classifier_from_file`: ClassBench or ovs-ofctl, plain or xz, ids = line numbers),
/// training its first model now, on the calling thread (iSets at every size).
///
/// Later, a background thread retrains when the rules inserted into the remainder since the
/// last model exceed `retrain_threshold` of all rules (0..1; the NuevoMatchUP paper uses 0.1),
/// or when rules are staged (`RQVS_POLICY_DELAYED`); lookups never wait for training, and the
/// new model is swapped in by the next update or `rqvs_live_poll`.
///
/// `policy` is an `rqvs_policy` value. Returns a new handle the caller owns (free with
/// `rqvs_live_free`), or NULL with `*err` set (as `rqvs_classifier_from_file`; an unknown policy
/// or a threshold outside 0..1 is RQVS_ERR_INVALID).
///
/// Thread-safety contract of a live handle: lookups (`rqvs_live_classify_batch`, `_len`,
/// `_get_stats`, `_save_model`) may run from any number of threads at once, concurrently with
/// updates (`_insert_*`, `_remove`, `_poll`, `_finish_training`) made from another thread.
/// Updates are serialized with a reader-writer lock: one waits for the lookups in progress
/// (each call holds the read lock for its whole batch, so one call sees one rule set), and
/// lookups wait for an update (microseconds; a model swap replays the few updates made during
/// training). Make updates from one thread: they are safe from several, but then their order
/// is whatever the lock gives. `rqvs_live_free` needs every other call to have returned.
///
/// # Safety
/// `rules_path` is NULL or a NUL-terminated string; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rqvs_live_from_file(
    rules_path: *const c_char,
    policy: u32,
    retrain_threshold: f64,
    err: *mut *mut rqvs_error,
) -> *mut rqvs_live {
    // SAFETY: the pointers are as this function's contract says.
    unsafe {
        run(err, null_mut(), || {
            let rules = handle::read_rules(text(rules_path, "rules_path")?)?;
            Ok(into_handle(rqvs_live::build(&rules, policy, retrain_threshold)?))
        })
    }
}

/// `rqvs_live_from_file` over `n` rules in struct form (rule `i` gets id `i`; `rules` may be
/// NULL when `n` is 0). The array is only read during the call.
///
/// # Safety
/// `rules` is NULL or points to `n` rules; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rqvs_live_from_rules(
    rules: *const rqvs_rule,
    n: usize,
    policy: u32,
    retrain_threshold: f64,
    err: *mut *mut rqvs_error,
) -> *mut rqvs_live {
    // SAFETY: the pointers are as this function's contract says.
    unsafe {
        run(err, null_mut(), || {
            let rules = handle::rules_from_structs(slice(rules, n, "rules")?)?;
            Ok(into_handle(rqvs_live::build(&rules, policy, retrain_threshold)?))
        })
    }
}

/// A live classifier starting from a saved model (`rqvs_live_save_model`,
/// `rqvs_classifier_save_model`, `rqvs train`), without training; later models are trained as
/// `rqvs_live_from_file` says. Errors as `rqvs_classifier_load_model`.
///
/// # Safety
/// `model_path` is NULL or a NUL-terminated string; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rqvs_live_load_model(
    model_path: *const c_char,
    policy: u32,
    retrain_threshold: f64,
    err: *mut *mut rqvs_error,
) -> *mut rqvs_live {
    // SAFETY: the pointers are as this function's contract says.
    unsafe {
        run(err, null_mut(), || {
            Ok(into_handle(rqvs_live::load_model(text(model_path, "model_path")?, policy, retrain_threshold)?))
        })
    }
}

/// Saves the model lookups use now (removed rules gone, inserted ones in the remainder; rules
/// staged under the delayed policy are not in it) for `rqvs_live_load_model` or
/// `rqvs_classifier_load_model`. Returns RQVS_OK or an error code with `*err` set.
/// Thread safety: a lookup.
///
/// # Safety
/// `live` is NULL or a live handle; `model_path` is NULL or a NUL-terminated string; `err` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rqvs_live_save_model(
    live: *const rqvs_live,
    model_path: *const c_char,
    err: *mut *mut rqvs_error,
) -> c_int {
    // SAFETY: the pointers are as this function's contract says.
    unsafe { run_status(err, || get(live, "live")?.save_model(text(model_path, "model_path")?)) }
}

/// Rules held, staged ones included (0 for NULL). Thread safety: a lookup.
///
/// # Safety
/// `live` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn rqvs_live_len(live: *const rqvs_live) -> usize {
    // SAFETY: `live` is as this function's contract says.
    infallible(0, || unsafe { get(live, "live") }.and_then(|l| l.rule_count()).unwrap_or(0))
}

/// `rqvs_classify_batch` on the live classifier: `rule_ids[i]` = the winner's id or -1. Returns
/// RQVS_OK, RQVS_ERR_NULL or RQVS_ERR_PANIC. Thread safety: a lookup (see
/// `rqvs_live_from_file`): any number of threads, also while another thread updates.
///
/// # Safety
/// `live` is NULL or a live handle; `keys` is NULL or points to `n` keys; `rule_ids` is NULL or
/// points to `n` writable `int64_t`s not otherwise in use during the call.
#[no_mangle]
pub unsafe extern "C" fn rqvs_live_classify_batch(
    live: *const rqvs_live,
    keys: *const rqvs_key,
    n: usize,
    rule_ids: *mut i64,
) -> c_int {
    status(|| {
        // SAFETY: the pointers are as this function's contract says.
        let (l, k, out) = unsafe { (get(live, "live")?, slice(keys, n, "keys")?, slice_mut(rule_ids, n, "rule_ids")?) };
        l.classify(super::keys(k), out)
    })
}

/// Inserts a rule given as text (as `rqvs_classifier_insert_text`) by the handle's policy, then
/// polls the trainer (never waits for it). Returns the new id, or -1 with `*err` set.
/// Thread safety: an update (see `rqvs_live_from_file`).
///
/// # Safety
/// `live` is NULL or a live handle; `rule` is NULL or a NUL-terminated string; `err` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn rqvs_live_insert_text(
    live: *mut rqvs_live,
    rule: *const c_char,
    priority: u32,
    err: *mut *mut rqvs_error,
) -> i64 {
    // SAFETY: the pointers are as this function's contract says.
    unsafe {
        run(err, -1, || {
            let (l, rule) = (get(live, "live")?, text(rule, "rule")?);
            Ok(i64::from(l.insert(|id| handle::parse_rule(rule, id, priority))?))
        })
    }
}

/// Inserts a rule in struct form (as `rqvs_classifier_insert_rule`) by the handle's policy, then
/// polls the trainer. Returns the new id, or -1 with `*err` set. Thread safety: an update.
///
/// # Safety
/// `live` is NULL or a live handle; `rule` is NULL or points to a rule; `err` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn rqvs_live_insert_rule(
    live: *mut rqvs_live,
    rule: *const rqvs_rule,
    err: *mut *mut rqvs_error,
) -> i64 {
    // SAFETY: the pointers are as this function's contract says.
    unsafe {
        run(err, -1, || {
            let (l, rule) = (get(live, "live")?, get(rule, "rule")?);
            Ok(i64::from(l.insert(|id| handle::struct_rule(rule, id))?))
        })
    }
}

/// Removes the rule with id `id` (visible or staged), writing it to `removed` when that is not
/// NULL, then polls the trainer. Returns RQVS_OK, or RQVS_ERR_NOT_FOUND / RQVS_ERR_NULL with
/// `*err` set. Thread safety: an update.
///
/// # Safety
/// `live` is NULL or a live handle; `removed` is NULL or writable; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rqvs_live_remove(
    live: *mut rqvs_live,
    id: u32,
    removed: *mut rqvs_rule,
    err: *mut *mut rqvs_error,
) -> c_int {
    // SAFETY: the pointers are as this function's contract says.
    unsafe {
        run_status(err, || {
            let rule = get(live, "live")?.remove(id)?;
            write_opt(removed, rqvs_rule::from(&rule));
            Ok(())
        })
    }
}

/// Swaps in a model the trainer has finished, and starts training if the threshold is passed;
/// never waits for training. Updates poll by themselves; call this when no update comes for a
/// while. Returns RQVS_OK or an error code. Thread safety: an update.
///
/// # Safety
/// `live` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn rqvs_live_poll(live: *mut rqvs_live) -> c_int {
    // SAFETY: `live` is as this function's contract says.
    status(|| unsafe { get(live, "live") }?.poll())
}

/// Waits until the training running now (if any) has finished and its model is swapped in
/// (lookups from other threads go on meanwhile). Training for 100K rules takes well under a
/// second on one core. Returns RQVS_OK or an error code. Thread safety: an update.
///
/// # Safety
/// `live` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn rqvs_live_finish_training(live: *mut rqvs_live) -> c_int {
    // SAFETY: `live` is as this function's contract says.
    status(|| unsafe { get(live, "live") }?.finish_training())
}

/// Fills `*stats` with what the live classifier is doing. Returns RQVS_OK or an error code.
/// Thread safety: a lookup.
///
/// # Safety
/// `live` is NULL or a live handle; `stats` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rqvs_live_get_stats(live: *const rqvs_live, stats: *mut rqvs_live_stats) -> c_int {
    status(|| {
        // SAFETY: the pointers are as this function's contract says.
        let (l, out) = unsafe { (get(live, "live")?, get_mut(stats, "stats")?) };
        *out = l.stats()?;
        Ok(())
    })
}

/// Frees a live classifier; NULL does nothing. Returns at once: a training session still
/// running finishes on its own thread and frees its model there. Thread safety: every other
/// call on `live` must have returned, and none may follow.
///
/// # Safety
/// `live` is NULL or a handle from this library that was not freed.
#[no_mangle]
pub unsafe extern "C" fn rqvs_live_free(live: *mut rqvs_live) {
    // SAFETY: `live` is as this function's contract says.
    infallible((), || unsafe { free_handle(live) })
}
