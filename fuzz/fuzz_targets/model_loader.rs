//! NuevoMatchUP model loader (`classify --model`): the input is a model file's payload, sealed
//! with a valid header and checksum (`model_file::seal`) so that mutations reach the checks of
//! the body (rules, iSets, RQ-RMI models, the remainder). Loading never panics; whatever loads
//! saves, reloads and answers the same (`model_file::fuzz_check`). Seeds: fuzz/seeds/model_loader
//! (`crates/classify/tests/model_loader.rs` replays them and their mutations in every test run).
#![no_main]
use libfuzzer_sys::fuzz_target;
use rqvs_classify::nuevomatch::model_file;

fuzz_target!(|payload: &[u8]| {
    model_file::fuzz_check(payload);
});
