//! # rqvs-classify: the classify layer
//!
//! One trait, [`Classifier`], and the classifiers that implement it. Every classifier is
//! differential-tested against [`Reference`], a linear scan that is the oracle for all others.
//!
//! The winner rule is the one of the flow layer ([`rqvs_flow::Rule::beats`]): highest priority,
//! then lowest id.
//!
//! ```
//! use rqvs_classify::{build_by_name, Classifier};
//! use rqvs_flow::{formats, FlowKey, RuleId};
//!
//! // Rules in ovs-ofctl's syntax (ClassBench rule files work as well): ids in file order.
//! let rules = formats::parse_rules(
//!     "flows.txt",
//!     "priority=20,tcp,nw_dst=10.0.0.0/8,tp_dst=80,actions=output:1\n\
//!      priority=10,ip,nw_dst=10.0.0.0/8,actions=output:2\n",
//! )?;
//! let c: Box<dyn Classifier> = build_by_name("tm", &rules)?; // or "ref", "tss", "ofproto", "nmu", ...
//! let web = FlowKey::ipv4(0xc0a8_0001, 0x0a01_0203, 6, 40000, 80);
//! let dns = FlowKey::ipv4(0xc0a8_0001, 0x0a01_0203, 17, 40000, 53);
//! assert_eq!(c.lookup(&web), Some(RuleId(0)));
//! assert_eq!(c.lookup(&dns), Some(RuleId(1)));
//! assert_eq!(c.lookup(&FlowKey::ipv4(1, 2, 6, 3, 4)), None);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_code)]

mod classifier;
mod compact;
mod extras;
mod idmap;
pub mod nuevomatch;
pub mod ofproto;
pub mod prefetch;
pub mod reference;
mod stored;
#[cfg(test)]
mod testing;
pub mod tss;
pub mod tuplemerge;

pub use classifier::{Classifier, ClassifierError, NoRemainder, Remainder, BATCH};
pub use nuevomatch::NuevoMatchUp;
pub use ofproto::OfprotoClassifier;
pub use reference::Reference;
pub use stored::HeldRule;
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
        ClassifierKind::Nmu | ClassifierKind::NmuIsets | ClassifierKind::NmuBs => {
            let nmu = build_nuevomatch(kind, rules).expect("a NuevoMatchUP kind");
            nmu.map(|c| Box::new(c) as Box<dyn Classifier>).map_err(|e| e.to_string())
        }
    }
}

/// The NuevoMatchUP classifier of kind `kind` over `rules` as its own type (so it can be saved
/// with [`NuevoMatchUp::to_model_bytes`]), or `None` when `kind` is not a NuevoMatchUP kind.
pub fn build_nuevomatch(
    kind: ClassifierKind,
    rules: &[rqvs_flow::Rule],
) -> Option<Result<NuevoMatchUp, ClassifierError>> {
    let config = match kind {
        ClassifierKind::Nmu => nuevomatch::NuevoMatchConfig::default(),
        ClassifierKind::NmuIsets => nuevomatch::NuevoMatchConfig::always_learned(),
        ClassifierKind::NmuBs => nuevomatch::NuevoMatchConfig {
            index: nuevomatch::sorted_ranges,
            ..nuevomatch::NuevoMatchConfig::always_learned()
        },
        _ => return None,
    };
    Some(NuevoMatchUp::build_with(rules, config, TupleMerge::build))
}

/// The winner by definition: the first rule, in winner order, whose [`rqvs_flow::Match`]
/// accepts the key. `sorted` must be in winner order (`Rule::rank`). This is the semantic
/// definition every classifier, the reference included, is verified against.
pub fn winner_by_definition(sorted: &[rqvs_flow::Rule], key: &rqvs_flow::FlowKey) -> Option<rqvs_flow::RuleId> {
    sorted.iter().find(|r| r.matches.matches(key)).map(|r| r.id)
}

/// The README's examples, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
