//! Each PMD's design, and what the designs share: the OpenFlow table (ORIG, CCACHE; also the
//! handler's and the revalidator's), one revalidator thread, one CCACHE trainer thread, one
//! CFLOWS classifier published by the manager thread ([`crate::manager`]).
//!
//! **`--design auto`** ([`rqvs_datapath::auto`]): each PMD runs its own controller
//! ([`Auto::shared`]) over the same shared structures, so a switch of design builds nothing
//! big: a new ORIG/CCACHE is an empty megaflow cache over the shared table (warmed with the
//! PMD's recent flows on the builder thread), a new CFLOWS a reader of the published
//! classifier. The switch keeps both the table and the classifier up to date for auto (every
//! change goes to both: [`crate::Control`]); a candidate learns of the table's commits from its
//! journal. The controller's clock is the PMD's measured one, its builder runs on a thread of
//! its own, and every switch is logged by the PMD ([`crate::pmd`]) with its reason.

use std::sync::{Arc, Mutex};

use rqvs_classify::ClassifierError;
use rqvs_datapath::auto::Target;
use rqvs_datapath::ccache::CcacheConfig;
use rqvs_datapath::revalidator::{RevalidatorMode, RevalidatorService};
use rqvs_datapath::{
    Auto, AutoConfig, Ccache, CflowsPublisher, CflowsReaders, DatapathConfig, Design, DesignKind, Orig, OrigConfig,
};
use rqvs_flow::Rule;
use rqvs_ofproto::trainer::TrainerHandle;
use rqvs_ofproto::OfprotoTable;

use crate::{err, Error, SwitchConfig};

/// A PMD's design.
pub(crate) type PmdDesign = Box<dyn Design + Send>;

/// Makes one PMD's fixed design over the shared structures.
struct Makers {
    table: OfprotoTable,
    orig: OrigConfig,
    ccache: CcacheConfig,
    revalidator: Option<Mutex<RevalidatorService>>,
    trainer: Option<TrainerHandle>,
    readers: Option<CflowsReaders>,
}

impl Makers {
    fn make(&self, to: Target, dp: DatapathConfig) -> Result<PmdDesign, ClassifierError> {
        if to.tm_alone {
            return Err(ClassifierError::Config("CFLOWS with TupleMerge alone: not in the switch".into()));
        }
        let reval = || self.revalidator.as_ref().map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).connect());
        Ok(match to.kind {
            DesignKind::Orig => {
                let mut d = Orig::with_table(self.table.clone(), dp, self.orig);
                if let Some(t) = reval() {
                    d.set_revalidator(t);
                }
                Box::new(d)
            }
            DesignKind::Ccache => {
                let mut d = Ccache::with_table(self.table.clone(), dp, self.orig, self.ccache);
                if let Some(t) = reval() {
                    d.set_revalidator(t);
                }
                if let Some(t) = &self.trainer {
                    d.set_trainer(t.clone());
                }
                Box::new(d)
            }
            // The tables after 0 and the groups: the shared table (all tables, for auto).
            DesignKind::Cflows => match &self.readers {
                Some(r) => Box::new(r.reader(dp).with_pipeline(self.table.clone())),
                None => return Err(ClassifierError::Config("CFLOWS: no shared classifier (a bug)".into())),
            },
            DesignKind::Auto => return Err(ClassifierError::Config("auto builds fixed designs only".into())),
        })
    }
}

/// The designs of `pmds` PMDs over `rules` (already in `table`; CFLOWS' table holds the tables
/// after 0, and `t0`, table 0's rules, go to the learned classifier of CFLOWS and auto);
/// `handler_thread`: ORIG/CCACHE upcalls go to the handler thread. Returns them and the CFLOWS
/// publisher (CFLOWS, auto) for the manager thread.
pub(crate) fn build(
    cfg: &SwitchConfig,
    rules: &[Rule],
    t0: &[Rule],
    table: &OfprotoTable,
    handler_thread: bool,
    pmds: usize,
) -> Result<(Vec<PmdDesign>, Option<CflowsPublisher>), Error> {
    let design = cfg.design;
    let megaflows = design != DesignKind::Cflows;
    // With the handler thread, a design's own upcall queue only stages one batch's misses
    // on their way to the handler (whose queue is the bounded one).
    let orig = if handler_thread { OrigConfig { upcall_queue: rqvs_datapath::BATCH, ..cfg.orig } } else { cfg.orig };
    // One revalidator thread for every ORIG/CCACHE PMD (each PMD connects to it).
    let revalidator = (cfg.orig.revalidator == RevalidatorMode::Thread && megaflows)
        .then(|| Mutex::new(RevalidatorService::spawn(table.clone())));
    let orig = if revalidator.is_some() { OrigConfig { revalidator: RevalidatorMode::Inline, ..orig } } else { orig };
    // CFLOWS: one learned classifier for every PMD, owned by the manager thread.
    let publisher = match design {
        DesignKind::Cflows | DesignKind::Auto => {
            Some(CflowsPublisher::new(t0, cfg.cflows).map_err(|e| err(format!("rules: {e}")))?)
        }
        _ => None,
    };
    // CCACHE: one trainer thread for every PMD's model (the paper's §6). CFLOWS: the same
    // thread trains the learned indexes of the tables after 0 (`rqvs_ofproto::later_tables`).
    let trainer = (design == DesignKind::Ccache || publisher.is_some())
        .then(|| rqvs_ofproto::trainer::spawn_trainer().map_err(|e| err(format!("starting the trainer thread: {e}"))))
        .transpose()?;
    if let (Some(t), Some(_)) = (&trainer, &publisher) {
        table.set_later_trainer(t.clone());
    }
    let makers = Arc::new(Makers {
        table: table.clone(),
        orig,
        ccache: cfg.ccache,
        revalidator,
        trainer,
        readers: publisher.as_ref().map(CflowsPublisher::readers),
    });
    let mut designs: Vec<PmdDesign> = Vec::new();
    for i in 0..pmds {
        // Keys come from frames (`extract_datapath`): no header-tuple normalisation.
        let dp = DatapathConfig { seed: cfg.datapath.seed.wrapping_add(i as u64), wire_keys: false, ..cfg.datapath };
        let d = if design == DesignKind::Auto {
            let m = Arc::clone(&makers);
            let builder: rqvs_datapath::auto::Builder = Arc::new(move |to, _rules: &[Rule]| m.make(to, dp));
            // TupleMerge alone would need a second shared classifier: not offered here.
            let auto = AutoConfig { cflows_tm_coverage: 0.0, ..cfg.auto };
            Box::new(Auto::shared(rules.len(), dp.clock, false, auto, builder).map_err(|e| err(format!("rules: {e}")))?)
        } else {
            makers.make(Target::of(design), dp).map_err(|e| err(format!("rules: {e}")))?
        };
        designs.push(d);
    }
    Ok((designs, publisher))
}
