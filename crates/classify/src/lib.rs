//! # rqvs-classify: the classify layer
//!
//! One trait, [`Classifier`], and the classifiers that implement it. Every classifier is
//! differential-tested against [`Reference`], a linear scan that is the oracle for all others.
//!
//! The winner rule is the one of the flow layer ([`rqvs_flow::Rule::beats`]): highest priority,
//! then lowest id.
#![deny(unsafe_code)]

mod classifier;
mod compact;
pub mod nuevomatch;
pub mod ofproto;
pub mod prefetch;
pub mod reference;
#[cfg(test)]
mod testing;
pub mod tss;
pub mod tuplemerge;

pub use classifier::{Classifier, ClassifierError, NoRemainder, Remainder, BATCH};
pub use nuevomatch::NuevoMatchUp;
pub use ofproto::OfprotoClassifier;
pub use reference::Reference;
pub use tss::TupleSpace;
pub use tuplemerge::TupleMerge;

/// The classifiers [`build`] makes, by the names reports and command lines use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum ClassifierKind {
    /// The reference: a winner-ordered linear scan.
    Ref,
    /// Tuple space search.
    Tss,
    /// TupleMerge.
    Tm,
    /// The OpenFlow slow path (OVS 3.1 classifier semantics).
    Ofproto,
    /// NuevoMatchUP (TupleMerge alone below `min_rules`).
    Nmu,
    /// NuevoMatchUP with iSets at every size.
    NmuIsets,
    /// NuevoMatchUP with binary search instead of the learned index.
    NmuBs,
}

impl ClassifierKind {
    /// Every kind, in the order reports list them.
    pub const ALL: [ClassifierKind; 7] = [
        ClassifierKind::Ref,
        ClassifierKind::Tss,
        ClassifierKind::Tm,
        ClassifierKind::Ofproto,
        ClassifierKind::Nmu,
        ClassifierKind::NmuIsets,
        ClassifierKind::NmuBs,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ClassifierKind::Ref => "ref",
            ClassifierKind::Tss => "tss",
            ClassifierKind::Tm => "tm",
            ClassifierKind::Ofproto => "ofproto",
            ClassifierKind::Nmu => "nmu",
            ClassifierKind::NmuIsets => "nmu-isets",
            ClassifierKind::NmuBs => "nmu-bs",
        }
    }

    pub fn from_name(s: &str) -> Option<ClassifierKind> {
        ClassifierKind::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// Names accepted by [`build_by_name`], in the order reports list them.
pub const CLASSIFIER_NAMES: &[&str] = &["ref", "tss", "tm", "ofproto", "nmu", "nmu-isets", "nmu-bs"];

/// Builds the classifier called `name` over `rules` ([`ClassifierKind`]'s names).
pub fn build_by_name(name: &str, rules: &[rqvs_flow::Rule]) -> Result<Box<dyn Classifier>, String> {
    match ClassifierKind::from_name(name) {
        Some(k) => build(k, rules),
        None => Err(format!("unknown classifier '{name}' (known: {})", CLASSIFIER_NAMES.join(", "))),
    }
}

/// Builds a classifier of kind `kind` over `rules`.
pub fn build(kind: ClassifierKind, rules: &[rqvs_flow::Rule]) -> Result<Box<dyn Classifier>, String> {
    match kind {
        ClassifierKind::Ref => {
            Reference::build(rules).map(|c| Box::new(c) as Box<dyn Classifier>).map_err(|e| e.to_string())
        }
        ClassifierKind::Tss => {
            TupleSpace::build(rules).map(|c| Box::new(c) as Box<dyn Classifier>).map_err(|e| e.to_string())
        }
        ClassifierKind::Tm => {
            TupleMerge::build(rules).map(|c| Box::new(c) as Box<dyn Classifier>).map_err(|e| e.to_string())
        }
        ClassifierKind::Ofproto => {
            OfprotoClassifier::build(rules).map(|c| Box::new(c) as Box<dyn Classifier>).map_err(|e| e.to_string())
        }
        ClassifierKind::Nmu => {
            NuevoMatchUp::build(rules).map(|c| Box::new(c) as Box<dyn Classifier>).map_err(|e| e.to_string())
        }
        ClassifierKind::NmuIsets => {
            NuevoMatchUp::build_with(rules, nuevomatch::NuevoMatchConfig::always_learned(), TupleMerge::build)
                .map(|c| Box::new(c) as Box<dyn Classifier>)
                .map_err(|e| e.to_string())
        }
        ClassifierKind::NmuBs => {
            let config = nuevomatch::NuevoMatchConfig {
                index: nuevomatch::sorted_ranges,
                ..nuevomatch::NuevoMatchConfig::always_learned()
            };
            NuevoMatchUp::build_with(rules, config, TupleMerge::build)
                .map(|c| Box::new(c) as Box<dyn Classifier>)
                .map_err(|e| e.to_string())
        }
    }
}

/// The winner by definition: the first rule, in winner order, whose [`rqvs_flow::Match`]
/// accepts the key. `sorted` must be in winner order (`Rule::rank`). This is the semantic
/// definition every classifier, the reference included, is verified against.
pub fn winner_by_definition(sorted: &[rqvs_flow::Rule], key: &rqvs_flow::FlowKey) -> Option<rqvs_flow::RuleId> {
    sorted.iter().find(|r| r.matches.matches(key)).map(|r| r.id)
}
