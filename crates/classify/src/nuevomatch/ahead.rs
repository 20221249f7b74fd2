//! Updates asked for ahead. A run of updates (a change set of hundreds of flows in the switch's
//! CFLOWS manager) waits on memory one update after another: each removal misses in the rule
//! map, then in its bucket's slots and pre-filter group; each insert in the rule map, then in its
//! bucket's pre-filter groups and slots. The lookups' batch path overlaps such misses across its
//! keys ([`NuevoMatchUp::lookup_batch`]); these hints do the same for a run of updates: called
//! before update `i`, they ask for the rule-map slot of update `i + MAP_AHEAD` and for the
//! bucket lines of update `i + LINES_AHEAD` (whose rule-map slot the first hint brought in), so
//! the update itself finds them in cache. Only hints: they read and change nothing the updates
//! depend on (an update between the hint and its own may move what the hint asked for; it then
//! misses as it would have); the test below runs updates with them against the same updates
//! without them and the brute force.

use rqvs_flow::{Rule, RuleId};

use super::rulemap::Location;
use super::{ISet, NuevoMatchUp, Placement, LANES};
use crate::classifier::Remainder;
use crate::prefetch::prefetch;

/// How many updates ahead the rule-map slot is asked for.
const MAP_AHEAD: usize = 8;
/// How many updates ahead the bucket's lines are asked for (fewer than [`MAP_AHEAD`]: the rule
/// map's slot, which names the bucket of a removal, is in cache by then).
const LINES_AHEAD: usize = 4;

impl ISet {
    /// Asks for the lines of bucket `b`: its slots and their pre-filter groups (both lines of a
    /// group when `whole`, which an insert writes; the first, which a removal reads, otherwise).
    fn prefetch_bucket(&self, b: usize, whole: bool) {
        let Some(&(from, to)) = self.spans.get(b) else { return };
        let (from, to) = (from as usize, (to as usize).min(self.cands.len()));
        if from >= to {
            return;
        }
        self.fetch(from, to);
        for j in (from..to).step_by(LANES) {
            let g = self.pre.group_ref(j);
            prefetch(&g.src_v);
            if whole {
                prefetch(&g.dst_v);
            }
        }
    }
}

impl<R: Remainder> NuevoMatchUp<R> {
    /// Hints for a run of removals of `ids`, called before removing `ids[i]` (module docs).
    pub fn prefetch_removals(&self, ids: &[RuleId], i: usize) {
        if let Some(&id) = ids.get(i + MAP_AHEAD) {
            self.rules.prefetch(id);
        }
        let Some(&id) = ids.get(i + LINES_AHEAD) else { return };
        let Some(k) = self.rules.get(id) else { return };
        if let Some(stored) = &k.stored {
            // Its count is dropped with the rule map's slot.
            prefetch(&**stored);
        }
        if let Location::ISet { iset, bucket } = k.at.get() {
            if let Some(s) = self.isets.get(iset) {
                s.prefetch_bucket(bucket, false);
            }
        }
    }

    /// Hints for a run of inserts of `items` (`rule` of each), called before inserting item `i`
    /// (module docs): the bucket asked for is the one an insert tries first.
    pub fn prefetch_inserts<T>(&self, items: &[T], i: usize, rule: impl Fn(&T) -> &Rule) {
        if let Some(t) = items.get(i + MAP_AHEAD) {
            self.rules.prefetch(rule(t).id);
        }
        let Some(t) = items.get(i + LINES_AHEAD) else { return };
        if self.config.insert_slack.is_none() {
            return;
        }
        if let Some((s, b)) = self.isets.iter().find_map(|s| Some((s, s.bucket_for(rule(t))?))) {
            s.prefetch_bucket(b, true);
        }
    }

    /// [`NuevoMatchUp::prefetch_inserts`] for a run of [`NuevoMatchUp::insert_placed`]: the
    /// bucket asked for is the one `placement` names (no model run for the hint either).
    pub fn prefetch_placed<T>(
        &self,
        items: &[T],
        i: usize,
        rule: impl Fn(&T) -> &Rule,
        placement: impl Fn(&T) -> Option<Placement>,
    ) {
        if let Some(t) = items.get(i + MAP_AHEAD) {
            self.rules.prefetch(rule(t).id);
        }
        let Some(t) = items.get(i + LINES_AHEAD) else { return };
        if let Some(Placement(Location::ISet { iset, bucket })) = placement(t) {
            if let Some(s) = self.isets.get(iset) {
                s.prefetch_bucket(bucket, true);
            }
        }
    }

    /// Hints for a run of searches of the rule map ([`NuevoMatchUp::holds`]), called before
    /// searching for `ids[i]`.
    pub fn prefetch_ids<T>(&self, items: &[T], i: usize, id: impl Fn(&T) -> RuleId) {
        if let Some(t) = items.get(i + MAP_AHEAD) {
            self.rules.prefetch(id(t));
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use rqvs_flow::Rule;

    use super::super::{iset::ISetConfig, NuevoMatchConfig, NuevoMatchUp};
    use crate::classifier::Classifier;
    use crate::testing;
    use crate::TupleMerge;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// Runs of removals and inserts with the hints give the classifier the updates alone
        /// give (the same rules, the brute force's answers), through removals of absent ids,
        /// inserts that relocate and re-lay out buckets (buckets of 2: the reserve runs out), and
        /// hints for updates past the run's end. Fails when a hint reads out of bounds. A copy
        /// inserting as the first placed each rule (`insert_placed`, the twin's way) ends with
        /// every rule where the first put it; one handed wrong placements still answers right.
        #[test]
        fn updates_with_hints_are_the_updates(case in testing::arb_case(), seed in any::<u64>()) {
            let config = NuevoMatchConfig {
                isets: ISetConfig { bucket_size: 2, cluster_size: 2, max_isets: 3, min_coverage: 0.0, wide: true },
                ..NuevoMatchConfig::always_learned()
            };
            let rules = testing::with_varied_rest(&case.rules);
            let mut hinted = NuevoMatchUp::build_with(&rules, config, TupleMerge::build).unwrap();
            let mut plain = hinted.clone();
            // Every other rule removed (in an order of the seed's), with an absent id among them.
            let mut gone: Vec<Rule> = rules.iter().filter(|r| (u64::from(r.id.0) ^ seed) % 2 == 0).cloned().collect();
            let turn = (seed as usize) % gone.len().max(1);
            gone.rotate_left(turn);
            let mut ids: Vec<_> = gone.iter().map(|r| r.id).collect();
            ids.insert(ids.len() / 2, rqvs_flow::RuleId(u32::MAX - 1));
            for (i, &id) in ids.iter().enumerate() {
                hinted.prefetch_removals(&ids, i);
                prop_assert_eq!(hinted.remove_id(id), plain.remove_id(id));
            }
            let kept: Vec<Rule> = rules.iter().filter(|r| !gone.contains(r)).cloned().collect();
            testing::check_all(&hinted, &kept, &case.keys, "removed")?;
            // A copy that takes each insert as `hinted` placed it (the twin's way), and one
            // that is handed a wrong placement (another rule's) for every insert.
            let mut placed = hinted.clone();
            let mut misplaced = hinted.clone();
            let mut placements = Vec::new();
            for (i, r) in gone.iter().enumerate() {
                hinted.prefetch_inserts(&gone, i, |r| r);
                prop_assert_eq!(hinted.insert(r.clone()).is_ok(), plain.insert(r.clone()).is_ok());
                placements.push((r.clone(), hinted.placement(r.id)));
            }
            for (i, (r, at)) in placements.iter().enumerate() {
                placed.prefetch_placed(&placements, i, |(r, _)| r, |&(_, at)| at);
                prop_assert!(placed.insert_placed(r, None, *at).is_ok());
                prop_assert_eq!(placed.placement(r.id), *at, "placed where the master placed it");
                let other = placements[(i + 1 + seed as usize) % placements.len()].1;
                prop_assert!(misplaced.insert_placed(r, None, other).is_ok());
            }
            testing::check_all(&hinted, &rules, &case.keys, "re-inserted")?;
            testing::check_all(&placed, &rules, &case.keys, "re-inserted as placed")?;
            testing::check_all(&misplaced, &rules, &case.keys, "re-inserted with wrong placements")?;
            prop_assert_eq!(testing::by_id(hinted.rules()), testing::by_id(plain.rules()));
            prop_assert_eq!(testing::by_id(placed.rules()), testing::by_id(plain.rules()));
        }
    }
}
