//! Building a design from a [`ReplayConfig`](super::ReplayConfig): the datapath, ORIG, CCACHE
//! and CFLOWS settings of the options, [`build`] (ORIG and CCACHE optionally over a shared
//! OpenFlow table, for [`run_pmds`](super::run_pmds)) and `--design auto`'s [`auto_builder`].

use rqvs_datapath::ccache::CcacheConfig;
use rqvs_datapath::emc::EmcEntries;
use rqvs_datapath::{
    Auto, AutoConfig, Ccache, Cflows, CflowsClassifier, CflowsConfig, Clock, DatapathConfig, Design, DesignKind,
    MaskLimit, Orig, OrigConfig,
};
use rqvs_flow::Rule;
use rqvs_ofproto::OfprotoTable;

use super::{Prediction, ReplayConfig};
use crate::Error;

/// The EMC's size of the options, checked.
pub(super) fn emc_entries(c: &ReplayConfig) -> Result<EmcEntries, Error> {
    EmcEntries::new(c.emc_entries).map_err(|e| Error(format!("--emc-entries: {e}")))
}

/// The datapath settings of the options.
fn dp_config(c: &ReplayConfig) -> Result<(DatapathConfig, OrigConfig), Error> {
    let dp = DatapathConfig {
        emc: c.emc,
        emc_insert_prob: c.emc_prob,
        emc_entries: emc_entries(c)?,
        clock: Clock::Measured,
        seed: c.seed,
        wire_keys: true,
    };
    let orig = OrigConfig {
        cd: c.cd,
        flow_limit: c.flow_limit,
        idle_ns: (c.idle * 1e9) as u64,
        revalidator: c.revalidator,
        mask_limit: c.mask_limit.map(|masks| MaskLimit { masks, eviction: c.mask_eviction }),
        mfcguard: c.mfcguard.map(|s| (s * 1e9) as u64),
        ..OrigConfig::default()
    };
    Ok((dp, orig))
}

/// Builds a design over the initial rules (with flow prediction when given: ORIG only).
pub fn build(
    c: &ReplayConfig,
    design: DesignKind,
    rules: &[Rule],
    pred: Option<&Prediction>,
) -> Result<Box<dyn Design>, Error> {
    build_on(c, design, rules, pred, None)
}

/// [`build`], ORIG and CCACHE over `table` when given (shared with other PMDs; `rules` are
/// then only CFLOWS').
pub(super) fn build_on(
    c: &ReplayConfig,
    design: DesignKind,
    rules: &[Rule],
    pred: Option<&Prediction>,
    table: Option<&OfprotoTable>,
) -> Result<Box<dyn Design>, Error> {
    let (cfg, orig) = dp_config(c)?;
    if let Some(t) = table {
        let cc = ccache_config(c);
        match (design, pred) {
            (DesignKind::Orig, None) => return Ok(Box::new(Orig::with_table(t.clone(), cfg, orig))),
            (DesignKind::Ccache, None) => return Ok(Box::new(Ccache::with_table(t.clone(), cfg, orig, cc))),
            _ => {}
        }
    }
    if let (Some(pr), DesignKind::Ccache | DesignKind::Cflows | DesignKind::Auto) = (pred, design) {
        return Err(Error(format!(
            "--predict {}: flow prediction installs megaflows through ORIG's slow path; expected --design orig, found '{}'",
            pr.mode,
            design.name()
        )));
    }
    // A rule-set the design cannot hold (past a size limit) is an error naming the file.
    let named = |e: Error| Error(format!("{}: {}: {}", c.rules_name(), design.name(), e.0));
    Ok(match design {
        DesignKind::Orig => {
            let mut d = Orig::new(rules, cfg, orig).map_err(|e| named(e.into()))?;
            if let Some(pr) = pred {
                d.set_predictor(Some(pr.predictor()));
            }
            Box::new(d)
        }
        DesignKind::Ccache => Box::new(Ccache::new(rules, cfg, orig, ccache_config(c)).map_err(|e| named(e.into()))?),
        DesignKind::Cflows => Box::new(Cflows::new(rules, cfg, cflows_config(c)).map_err(|e| named(e.into()))?),
        DesignKind::Auto => Box::new(
            Auto::new(rules, cfg.clock, cfg.wire_keys, auto_config(c), auto_builder(c)?)
                .map_err(|e| named(e.into()))?,
        ),
    })
}

fn cflows_config(c: &ReplayConfig) -> CflowsConfig {
    CflowsConfig {
        policy: c.policy,
        retrain_threshold: c.retrain_threshold,
        classifier: c.classifier,
        later_learned_min: c.later_learned_min,
    }
}

/// Auto's thresholds for a run: TupleMerge alone is no alternative when it is the classifier
/// already (`--classifier tm`).
fn auto_config(c: &ReplayConfig) -> AutoConfig {
    let tm = c.classifier == CflowsClassifier::TupleMerge;
    AutoConfig { cflows_tm_coverage: if tm { 0.0 } else { c.auto.cflows_tm_coverage }, ..c.auto }
}

/// How `--design auto` builds each fixed design: as `--design orig|ccache|cflows` would with the
/// same options (CFLOWS with TupleMerge alone as `--classifier tm` would).
pub fn auto_builder(c: &ReplayConfig) -> Result<rqvs_datapath::auto::Builder, Error> {
    let (cfg, orig) = dp_config(c)?;
    let (cc, cf) = (ccache_config(c), cflows_config(c));
    let tm = CflowsConfig { classifier: CflowsClassifier::TupleMerge, ..cf };
    Ok(std::sync::Arc::new(
        move |to: rqvs_datapath::auto::Target,
              rules: &[Rule]|
              -> Result<Box<dyn Design + Send>, rqvs_classify::ClassifierError> {
            Ok(match to.kind {
                DesignKind::Orig => Box::new(Orig::new(rules, cfg, orig)?),
                DesignKind::Ccache => Box::new(Ccache::new(rules, cfg, orig, cc)?),
                DesignKind::Cflows => Box::new(Cflows::new(rules, cfg, if to.tm_alone { tm } else { cf })?),
                DesignKind::Auto => {
                    return Err(rqvs_classify::ClassifierError::Config("auto builds fixed designs only".into()))
                }
            })
        },
    ))
}

fn ccache_config(c: &ReplayConfig) -> CcacheConfig {
    CcacheConfig {
        retrain_threshold: c.retrain_threshold,
        train_interval_ns: (c.train_interval * 1e9) as u64,
        ..CcacheConfig::default()
    }
}
