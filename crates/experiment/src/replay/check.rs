//! Option validation shared by the command line and the Python package: [`check_unused`] refuses
//! settings that none of the designs run would use; [`check_defences`] the defences' values;
//! [`check_auto`] auto's thresholds.

use rqvs_datapath::{AutoConfig, CflowsClassifier};

use super::{DesignKind, ReplayConfig};
use crate::Error;

/// Settings given explicitly (`given(id)`, the option's name with `_`: `emc_prob`) that none
/// of `designs` — or none of the settings they serve — would use: an error naming the option,
/// so that the command line and the Python package refuse what they would otherwise ignore.
/// `names` says which designs run, as given (`--design orig`); `rate_search` whether the run is
/// a rate search (it uses the receive ring).
pub fn check_unused(
    c: &ReplayConfig,
    designs: &[DesignKind],
    names: &str,
    rate_search: bool,
    given: &dyn Fn(&str) -> bool,
) -> Result<(), Error> {
    let refuse = |id: &str, unused: bool, why: &str| -> Result<(), Error> {
        if unused && given(id) {
            return Err(Error(format!("--{}: {why}", id.replace('_', "-"))));
        }
        Ok(())
    };
    let any = |f: fn(DesignKind) -> bool| designs.iter().any(|&d| f(d));
    // `auto` runs all three designs, so it uses every design's settings.
    let megaflows = any(|d| matches!(d, DesignKind::Orig | DesignKind::Ccache | DesignKind::Auto));
    let cflows = any(|d| matches!(d, DesignKind::Cflows | DesignKind::Auto));
    let ccache = any(|d| matches!(d, DesignKind::Ccache | DesignKind::Auto));
    for (id, what) in [
        ("cd", "the cuckoo distributor"),
        ("flow_limit", "the megaflow flow limit"),
        ("idle", "megaflows' idle expiry"),
        ("revalidator", "megaflow revalidation"),
    ] {
        refuse(id, !megaflows, &format!("{what} is ORIG's and CCACHE's; not used by {names}"))?;
    }
    refuse("policy", !cflows, &format!("CFLOWS' update policy; not used by {names}"))?;
    refuse("classifier", !cflows, &format!("CFLOWS' classifier; not used by {names}"))?;
    refuse("later_learned_min", !cflows, &format!("CFLOWS' index of the later tables; not used by {names}"))?;
    refuse(
        "later_learned_min",
        c.classifier == CflowsClassifier::TupleMerge,
        "a learned index of the later tables; not used with --classifier tm (TupleMerge alone)",
    )?;
    refuse("retrain_threshold", !(cflows || ccache), &format!("the learned designs' setting; not used by {names}"))?;
    refuse("train_interval", !ccache, &format!("CCACHE's setting; not used by {names}"))?;
    refuse("emc_prob", !c.emc, "the EMC's insertion probability; not used with --no-emc")?;
    refuse("emc_entries", !c.emc, "the EMC's size; not used with --no-emc")?;
    let ring = c.rate.is_some() || rate_search || c.attack.is_some();
    refuse("rx_ring", !ring, "the receive ring of --rate, --rate-search and --attack; not used without them")?;
    for (id, what) in [
        ("mask_limit", "the mask limit"),
        ("mask_eviction", "the mask limit's policy"),
        ("mfcguard", "MFCGuard"),
        ("mfcguard_interval", "MFCGuard's interval"),
    ] {
        refuse(
            id,
            !megaflows,
            &format!("{what}, a defence of ORIG's and CCACHE's megaflow cache; not used by {names}"),
        )?;
    }
    refuse("mask_eviction", c.mask_limit.is_none(), "the policy at the mask limit; expected --mask-limit")?;
    let auto = any(|d| d == DesignKind::Auto);
    refuse("auto", !auto, &format!("auto's settings; not used by {names}"))?;
    if auto {
        check_auto(&c.auto, c.classifier)?;
    }
    check_defences(c)
}

/// Auto's thresholds hold together ([`AutoConfig::check`]) and use what they set:
/// `cflows-tm-coverage` moves CFLOWS to TupleMerge alone, which `--classifier tm` is already.
pub fn check_auto(a: &AutoConfig, classifier: CflowsClassifier) -> Result<(), Error> {
    a.check().map_err(|e| Error(format!("--auto: {e}")))?;
    if classifier == CflowsClassifier::TupleMerge && a.cflows_tm_coverage != AutoConfig::default().cflows_tm_coverage {
        return Err(Error(
            "--auto: cflows-tm-coverage: moves CFLOWS to TupleMerge alone; not used with --classifier tm (CFLOWS is TupleMerge alone already)".into(),
        ));
    }
    Ok(())
}

/// The defences' values (against Tuple Space Explosion): a limit of at least 1 mask, an
/// MFCGuard interval that is a positive number.
pub fn check_defences(c: &ReplayConfig) -> Result<(), Error> {
    if c.mask_limit == Some(0) {
        return Err(Error("--mask-limit: expected at least 1 mask".into()));
    }
    if c.mfcguard.is_some_and(|s| !(s > 0.0 && s.is_finite())) {
        return Err(Error(format!("--mfcguard: expected an interval > 0 s, found '{}'", c.mfcguard.unwrap_or(0.0))));
    }
    Ok(())
}
