//! CFLOWS over a multi-table pipeline: the learned classifier serves **table 0**; a packet whose
//! table-0 rule continues the pipeline (goto_table, resubmit, a group, the action set,
//! write_metadata — [`rqvs_flow::Action::is_pipeline`]) is translated by the one translation
//! ([`rqvs_ofproto::xlate`]) over [`CflowsPipe`]: table 0 from the learned classifier, the later tables
//! and the groups from an [`OfprotoTable`] (the *rest*: tuple space search per table).
//!
//! **How a learned index serves a pipeline here: per table, not per path.** Table 0 is the
//! table every packet meets; the learned index classifies it exactly as in one-table CFLOWS. A
//! rule that ends the pipeline costs nothing more. A rule that continues it costs one
//! translation per EMC miss, whose result — the composed datapath action and the rule chain —
//! the EMC then caches per key, as OVS's EMC caches a megaflow's composed actions. Each later
//! table is looked up in an index of its own ([`rqvs_ofproto::later_tables`], kept by the rest's
//! commits): a NuevoMatchUP when it holds at least [`crate::CflowsConfig::later_learned_min`]
//! rules, trained on the trainer thread, a TupleMerge below (Faucet's and OpenStack's later
//! tables are small). Not per path — one model over the rule chains a packet can follow — because
//! a path is the composition of the tables it passes: their cross product in rules (100K ACL
//! rules × 100K prefixes), retrained on a change in any of them, and what it would cache per
//! flow the EMC and the translation cache below already hold.
//!
//! **The translation cache** ([`XCache`], one per PMD): composed results `(action, chain)`,
//! deduplicated and each holding its action list (so the action table does not free it while
//! cached), which EMC entries name by index with a generation of their own (its top bit
//! set, so it never equals a table generation). It is emptied, retiring every entry naming it,
//! whenever the rules change anywhere: the rule set's epoch (table 0) or the rest's version (the
//! later tables, the groups, port liveness). Between a commit to the rest and the publication of
//! table 0's part of the same change, a packet can meet the new table 0 with the old later
//! tables: the switch publishes table 0's part, then commits the rest. A bundle spanning tables
//! is not seen atomically by CFLOWS' PMDs (ORIG and CCACHE see it atomically).

use hashbrown::HashMap;
use rqvs_classify::nuevomatch::NuevoMatchUp;
use rqvs_classify::ofproto::OfprotoClassifier;
use rqvs_classify::Classifier;
use rqvs_flow::field::Member;
use rqvs_flow::{Action, FlowKey, Rule, RuleId};

use crate::cflows::{RuleRef, Table};
use crate::emc::EmcTarget;
use rqvs_ofproto::later_tables::LaterTables;
use rqvs_ofproto::table::OfprotoTable;
use rqvs_ofproto::xlate::{self, Pipeline};
use rqvs_ofproto::DpAction;

/// Set in the generation of an EMC entry that names a translation cache entry.
pub(crate) const X_GEN: u32 = 1 << 31;
/// Composed results a PMD's translation cache holds at most; past it, packets are translated
/// without caching until the next change empties it.
pub const XCACHE_MAX: usize = 1 << 16;

/// The action CFLOWS keeps for rule `r` of table 0: its datapath action, or
/// [`DpAction::Pending`] when it continues the pipeline (translate: module docs).
pub fn rule_action(r: &Rule) -> DpAction {
    if continues(r) {
        DpAction::Pending
    } else {
        DpAction::from_rule(r)
    }
}

/// Does `r` need the translation: does it continue the pipeline past its own actions, or write
/// `metadata` or `in_port` (which live only in the pipeline's key: the translation, not the
/// rule's op list, knows what they change), or `dec_ttl` (the translation decides an expiry
/// with the rule's cookie and table, which the INVALID_TTL packet-in carries)?
pub fn continues(r: &Rule) -> bool {
    r.actions.0.iter().any(|a| {
        a.is_pipeline()
            || matches!(a, Action::DecTtl)
            || matches!(a, Action::SetField { field, .. } if matches!(field.member, Member::Metadata | Member::InPort))
    })
}

/// Table 0 from the learned classifier, the others from the rest (module docs): through its
/// index of the tables after 0 ([`LaterTables`]) where it has one and the table has no
/// overlapping rules of equal priority, otherwise its tuple space search. No wildcards.
pub struct CflowsPipe<'a> {
    pub nm: &'a NuevoMatchUp,
    pub rest: &'a OfprotoClassifier,
    pub later: Option<&'a LaterTables>,
}

impl Pipeline for CflowsPipe<'_> {
    fn lookup(&self, table: u8, key: &FlowKey, _wc: &mut FlowKey) -> Option<Rule> {
        if table == 0 {
            return self.nm.lookup(key).and_then(|id| self.nm.rule(id));
        }
        let id = match self.later {
            Some(l) if self.rest.tied_overlaps(table) == 0 => l.lookup(table, key),
            _ => self.rest.lookup_wc_in_table(table, key).rule,
        };
        id.and_then(|id| self.rest.rule_in_table(table, id)).cloned()
    }
}

/// A PMD's translation cache (module docs).
#[derive(Default)]
pub struct XCache {
    /// The generation EMC entries naming this cache carry (without [`X_GEN`]).
    epoch: u32,
    /// (rule set epoch, rest version) the entries were made under.
    seen: Option<(u64, u64)>,
    entries: Vec<(DpAction, RuleId)>,
    index: HashMap<(DpAction, RuleId), u32>,
    /// Translations run (EMC misses of continuing rules).
    pub translations: u64,
}

/// The pipeline part of a CFLOWS design: the rest and this PMD's translation cache.
pub struct Walker {
    pub rest: OfprotoTable,
    xc: XCache,
}

impl Walker {
    /// The walk over `rest`, which from now on keeps an index of its tables after 0 for it
    /// ([`OfprotoTable::index_later_tables`] with `later`; should building it fail, the tables
    /// are looked up in the rest's classifier).
    pub fn new(rest: OfprotoTable, later: rqvs_ofproto::later_tables::LaterConfig) -> Walker {
        let _ = rest.index_later_tables(later);
        Walker { rest, xc: XCache::default() }
    }

    /// At a batch's start: empties the cache when the rules changed since it was filled.
    pub(crate) fn begin(&mut self, rules_epoch: u64) {
        let now = (rules_epoch, self.rest.version());
        if self.xc.seen != Some(now) {
            let xc = &mut self.xc;
            xc.seen = Some(now);
            // The cache's holds on its action lists ([`rqvs_ofproto::actions`]: freed once no one
            // holds them).
            rqvs_ofproto::actions::release_actions(xc.entries.iter().map(|e| e.0));
            xc.entries.clear();
            xc.index.clear();
            // Never X_GEN | 0x7fff_ffff == RuleRef::NONE's generation.
            xc.epoch = (xc.epoch + 1) % (X_GEN - 1);
        }
    }

    /// The cached result an EMC entry names.
    #[inline]
    pub(crate) fn cached(&self, r: RuleRef) -> (DpAction, RuleId) {
        self.xc.entries.get(r.id as usize).copied().unwrap_or((DpAction::Drop, rqvs_ofproto::NO_RULE))
    }

    /// Translates `key` (table 0 first, through `nm`); the composed action, the chain's
    /// attribution id, and the EMC entry naming the cached result (`None`: the cache is full).
    pub(crate) fn translate(&mut self, nm: &NuevoMatchUp, key: &FlowKey) -> (DpAction, RuleId, Option<RuleRef>) {
        let read = self.rest.read();
        let pipe = CflowsPipe { nm, rest: read.classifier(), later: read.later() };
        let x = xlate::xlate(&pipe, read.groups(), key);
        drop(read);
        let action = x.action();
        let rule = rqvs_ofproto::chain::attribution_of(&x).unwrap_or(rqvs_ofproto::NO_RULE);
        let xc = &mut self.xc;
        xc.translations += 1;
        let slot = match xc.index.get(&(action, rule)) {
            Some(&i) => Some(i),
            // Cached only with a hold on its list (an EMC entry may name it long after).
            None if xc.entries.len() < XCACHE_MAX && rqvs_ofproto::actions::hold_action(action) => {
                let i = xc.entries.len() as u32;
                xc.entries.push((action, rule));
                xc.index.insert((action, rule), i);
                Some(i)
            }
            None => None,
        };
        (action, rule, slot.map(|id| RuleRef { id, gen: X_GEN | xc.epoch }))
    }

    /// `r` with the learned tables after 0 ([`rqvs_ofproto::later_tables`]) counted in.
    pub(crate) fn with_later(&self, mut r: crate::design::CflowsReport) -> crate::design::CflowsReport {
        let read = self.rest.read();
        let learned =
            read.later().map(|l| l.describe()).unwrap_or_default().into_iter().filter(|t| t.learned.is_some());
        for t in learned {
            r.later_learned_tables += 1;
            r.later_learned_rules += t.rules as u64;
        }
        r
    }

    /// Translations run so far.
    pub fn translations(&self) -> u64 {
        self.xc.translations
    }
}

impl Drop for Walker {
    fn drop(&mut self) {
        rqvs_ofproto::actions::release_actions(self.xc.entries.iter().map(|e| e.0));
    }
}

/// What decides whether an EMC entry is live in CFLOWS: the table (rule entries) and the
/// translation cache (entries with [`X_GEN`]).
pub(crate) struct Live<'a> {
    pub table: &'a Table,
    pub walker: Option<&'a Walker>,
}

impl EmcTarget<RuleRef> for Live<'_> {
    #[inline]
    fn is_live(&self, r: RuleRef) -> bool {
        if r.gen & X_GEN == 0 {
            return self.table.is_live(r);
        }
        self.walker.is_some_and(|w| r.gen == X_GEN | w.xc.epoch && (r.id as usize) < w.xc.entries.len())
    }
}
