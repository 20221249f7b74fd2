//! Per-flow counters: the packets and bytes of every OpenFlow rule, kept by each PMD thread on
//! its own and summed by the management side.
//!
//! **Where a packet is counted.** The PMD counts each packet it classified for the rule that
//! decided it — the design names it ([`rqvs_datapath::Design::batch_rules`] for the fast path,
//! [`rqvs_datapath::Design::upcall_rules`] for upcalls handled inline, the verdict's `rule`
//! for the handler thread's answers) — with the frame's length as received. Packets no rule
//! matched (the table-miss drop), malformed frames and lost upcalls count for no flow.
//!
//! **Storage.** [`FlowCounters`] is the PMD's own: no lock, no atomic, no allocation per
//! packet, 16 bytes a rule (a cache line holds four; an entry never straddles two). Rule ids are never reused by the switch (every add and modify takes a new one), so
//! over a long run the ids in use are a sparse subset of a growing range; the counters are
//! kept in pages of [`PAGE`] rules, a page allocated the first time one of its rules is hit
//! and freed when a [`FlowCounters::take`] leaves it empty — memory follows the rules that are
//! hit, not the highest id ever given. A hit is two dependent loads (page, entry) and two
//! stores; the entry is usually a cache miss (a table of 100K flows' counters does not fit the
//! caches), so the PMD prefetches a batch's entries as soon as the design has named the rules
//! and counts after applying the actions, which hides the misses behind the frame work.
//!
//! **Reading them.** The management side asks every PMD between its batches
//! ([`crate::pmd::PmdMsg::FlowStats`]) for the counts of a list of rules and sums them
//! ([`FlowCount::add`]); a removed (or modified) flow's counts are *taken* — read and cleared —
//! once the change is applied on every PMD, so no later packet can count for it. ORIG and
//! CCACHE apply a run of flow-mods or an expiry without waiting for the PMDs' revalidation (a
//! BARRIER waits for it: `Control::apply_each`), so there the counts are taken once every PMD
//! has been told: a packet a stale megaflow forwards before its PMD has revalidated counts for
//! no flow — as in Open vSwitch, whose FLOW_REMOVED carries what its revalidators had credited
//! to the rule by then. A PMD thread
//! that ends (its capture files are done) leaves its counters in [`Parting`], where the
//! management side reads them from then on.
//!
//! **Last hits.** The PMDs keep no time: a flow's last hit, which only idle timeouts need, is
//! what the management side sees of its counts — the expiry thread ([`crate::expiry`]) reads the
//! counts of the flows with an idle timeout a few times a second, and a count that moved means a
//! hit since the last look ([`rqvs_ofproto::record::FlowTable::observe`]). A time per packet would make
//! an entry 24 bytes: measured on acl1_100k through CFLOWS (136K flows, the counters far beyond
//! the caches), the counting took 4.6% of a PMD's time so, 1.8% at 16 bytes
//! (docs/switch-bench.md).

use std::collections::HashMap;
use std::sync::{mpsc, Arc, Mutex};

use rqvs_flow::{Rule, RuleId};
use rqvs_ofproto::flowstate::FlowCount;
use rqvs_ofproto::NO_RULE;
use rqvs_openflow::flow_mod::OFPFF_SEND_FLOW_REM;

use crate::events::{Event, FlowRemoved};
use crate::pmd::PmdMsg;
use crate::{Control, REPLY_WAIT};
use rqvs_ofproto::record::{Counts, FlowFilter, FlowMeta, FlowTable, NetChange};

/// Rules per page of counters.
pub const PAGE: usize = 1024;
const PAGE_BITS: u32 = PAGE.trailing_zeros();

type Page = Box<[FlowCount]>;

/// Where a rule's counters are: (page, entry).
#[inline]
fn place(rule: RuleId) -> (usize, usize) {
    ((rule.0 >> PAGE_BITS) as usize, rule.0 as usize & (PAGE - 1))
}

/// A PMD's counters of every rule it has seen (module docs).
#[derive(Default)]
pub struct FlowCounters {
    pages: Vec<Option<Page>>,
    /// Packets counted for some flow since the PMD started (the table's `matched_count`).
    matched: u64,
    /// The pipeline's counters: tables after the first lookup, groups, buckets.
    pipeline: PipelineCounts,
}

/// A group's packets and bytes, and each bucket's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupCount {
    pub total: FlowCount,
    pub buckets: Vec<FlowCount>,
}

impl GroupCount {
    /// Sums `o` into this.
    pub fn add(&mut self, o: &GroupCount) {
        self.total.add(&o.total);
        if self.buckets.len() < o.buckets.len() {
            self.buckets.resize(o.buckets.len(), FlowCount::default());
        }
        for (b, x) in self.buckets.iter_mut().zip(&o.buckets) {
            b.add(x);
        }
    }

    /// These counts since `base` (saturating: a count never goes below 0).
    pub fn minus(&self, base: &GroupCount) -> GroupCount {
        let sub = |a: &FlowCount, b: &FlowCount| FlowCount {
            packets: a.packets.saturating_sub(b.packets),
            bytes: a.bytes.saturating_sub(b.bytes),
        };
        GroupCount {
            total: sub(&self.total, &base.total),
            buckets: self
                .buckets
                .iter()
                .enumerate()
                .map(|(i, c)| sub(c, base.buckets.get(i).unwrap_or(&FlowCount::default())))
                .collect(),
        }
    }
}

/// What a PMD counted of the pipeline besides the rules ([`rqvs_ofproto::chain::Credit`]):
/// per table the lookups and the matches past each packet's first lookup (table 0's, which the
/// PMD's own counters have: every packet classified looked it up, those a flow decided matched),
/// and per group (by id) its packets and bytes and each bucket's. Since the PMD started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PipelineCounts {
    /// `(lookups, matched)` by table (empty until a packet went past table 0).
    pub tables: Vec<(u64, u64)>,
    pub groups: HashMap<u32, GroupCount>,
}

impl PipelineCounts {
    /// Sums `o` into this.
    pub fn add(&mut self, o: &PipelineCounts) {
        if self.tables.len() < o.tables.len() {
            self.tables.resize(o.tables.len(), (0, 0));
        }
        for (t, x) in self.tables.iter_mut().zip(&o.tables) {
            t.0 += x.0;
            t.1 += x.1;
        }
        for (g, c) in &o.groups {
            self.groups.entry(*g).or_default().add(c);
        }
    }

    #[inline]
    fn credit(&mut self, c: &rqvs_ofproto::chain::Credit, bytes: u64) {
        use rqvs_ofproto::chain::Credit;
        match *c {
            Credit::Lookup { table, matched } => {
                if self.tables.is_empty() {
                    self.tables = vec![(0, 0); 256];
                }
                let t = &mut self.tables[usize::from(table)];
                t.0 += 1;
                t.1 += u64::from(matched);
            }
            Credit::Group(g) => {
                let e = self.groups.entry(g).or_default();
                e.total.packets += 1;
                e.total.bytes += bytes;
            }
            Credit::Bucket { group, bucket } => {
                let e = self.groups.entry(group).or_default();
                let b = bucket as usize;
                if e.buckets.len() <= b {
                    e.buckets.resize(b + 1, FlowCount::default());
                }
                e.buckets[b].packets += 1;
                e.buckets[b].bytes += bytes;
            }
        }
    }
}

impl FlowCounters {
    pub fn new() -> FlowCounters {
        FlowCounters::default()
    }

    /// Packets a flow decided since the PMD started (kept when flows go).
    pub fn matched(&self) -> u64 {
        self.matched
    }

    /// The pipeline's counters since the PMD started ([`PipelineCounts`]).
    pub fn pipeline(&self) -> &PipelineCounts {
        &self.pipeline
    }

    /// A packet of `bytes` bytes decided by `rule` ([`NO_RULE`]: counted nowhere) — a rule, or
    /// a chain of rules the pipeline passed ([`rqvs_ofproto::chain`]: each rule is credited).
    #[inline]
    pub fn hit(&mut self, rule: RuleId, bytes: usize) {
        if rule == NO_RULE {
            return;
        }
        self.matched += 1;
        if rule.0 & rqvs_ofproto::chain::CHAIN_BIT != 0 {
            for &r in rqvs_ofproto::chain::rules(rule) {
                self.count(r, bytes);
            }
            for c in rqvs_ofproto::chain::credits(rule) {
                self.pipeline.credit(c, bytes as u64);
            }
        } else {
            self.count(rule, bytes);
        }
    }

    #[inline]
    fn count(&mut self, rule: RuleId, bytes: usize) {
        let (p, i) = place(rule);
        if p >= self.pages.len() {
            self.pages.resize_with(p + 1, || None);
        }
        let page = self.pages[p].get_or_insert_with(|| vec![FlowCount::default(); PAGE].into_boxed_slice());
        let e = &mut page[i];
        e.packets += 1;
        e.bytes += bytes as u64;
    }

    /// Asks the CPU to fetch `rule`'s counters ahead of its [`FlowCounters::hit`] (a hint; a
    /// page not allocated yet is left alone).
    #[inline]
    pub fn prefetch(&self, rule: RuleId) {
        if rule.0 & rqvs_ofproto::chain::CHAIN_BIT != 0 {
            return;
        }
        let (p, i) = place(rule);
        if let Some(Some(page)) = self.pages.get(p) {
            rqvs_classify::prefetch::prefetch(&page[i]);
        }
    }

    /// The counts of `rule` (zero when never hit).
    pub fn get(&self, rule: RuleId) -> FlowCount {
        let (p, i) = place(rule);
        self.pages.get(p).and_then(Option::as_ref).map_or_else(FlowCount::default, |page| page[i])
    }

    /// The counts of each of `rules`.
    pub fn read(&self, rules: &[RuleId]) -> Vec<FlowCount> {
        rules.iter().map(|&r| self.get(r)).collect()
    }

    /// The counts of each of `rules`, cleared here (their flows are gone); a page left with no
    /// counts is freed.
    pub fn take(&mut self, rules: &[RuleId]) -> Vec<FlowCount> {
        let out = self.read(rules);
        for &r in rules {
            let (p, i) = place(r);
            if let Some(slot) = self.pages.get_mut(p) {
                if let Some(page) = slot.as_mut() {
                    page[i] = FlowCount::default();
                    if page.iter().all(|e| e.packets == 0) {
                        *slot = None;
                    }
                }
            }
        }
        while self.pages.last().is_some_and(Option::is_none) {
            self.pages.pop();
        }
        out
    }

    /// Pages allocated (tests, memory reports).
    pub fn pages(&self) -> usize {
        self.pages.iter().filter(|p| p.is_some()).count()
    }
}

/// The counters of PMD threads that have ended, by PMD index (module docs); and their last
/// reports (since the last clear, since the start), which `show` and the metrics use for a PMD
/// that no longer answers (every input was a file, and it is done).
///
/// It also keeps each group's **base**: the PMDs' counts of the group id when its current
/// version was added or last modified (OVS starts a group's counts again at both), which the
/// group statistics subtract ([`Control::group_counts`]).
#[derive(Clone, Default)]
#[allow(clippy::type_complexity)]
pub struct Parting(
    Arc<Mutex<Vec<Option<FlowCounters>>>>,
    Arc<Mutex<Vec<Option<[crate::stats::PmdReport; 2]>>>>,
    Arc<Mutex<HashMap<u32, GroupCount>>>,
);

impl Parting {
    pub fn new(pmds: usize) -> Parting {
        Parting(
            Arc::new(Mutex::new((0..pmds).map(|_| None).collect())),
            Arc::new(Mutex::new((0..pmds).map(|_| None).collect())),
            Arc::new(Mutex::new(HashMap::new())),
        )
    }

    fn bases(&self) -> std::sync::MutexGuard<'_, HashMap<u32, GroupCount>> {
        self.2.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// PMD `pmd` ends: its reports since the last clear and since the start.
    pub fn leave_reports(&self, pmd: usize, reports: [crate::stats::PmdReport; 2]) {
        if let Some(slot) = self.1.lock().unwrap_or_else(|e| e.into_inner()).get_mut(pmd) {
            *slot = Some(reports);
        }
    }

    /// The last report of PMD `pmd` if it has ended: since the last clear, or since the start.
    pub fn report(&self, pmd: usize, since_clear: bool) -> Option<crate::stats::PmdReport> {
        let g = self.1.lock().unwrap_or_else(|e| e.into_inner());
        g.get(pmd)?.as_ref().map(|r| r[usize::from(!since_clear)].clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Option<FlowCounters>>> {
        // Nothing panics while holding it.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// PMD `pmd` ends and leaves its counters.
    pub fn leave(&self, pmd: usize, c: FlowCounters) {
        if let Some(slot) = self.lock().get_mut(pmd) {
            *slot = Some(c);
        }
    }

    /// The counts of `rules` at PMD `pmd` if it has ended (cleared there when `take`).
    pub fn counts(&self, pmd: usize, rules: &[RuleId], take: bool) -> Option<Vec<FlowCount>> {
        let mut g = self.lock();
        let c = g.get_mut(pmd)?.as_mut()?;
        Some(if take { c.take(rules) } else { c.read(rules) })
    }
}

/// One flow's statistics (a FLOW multipart entry, a `dump-flows` line).
#[derive(Clone, Debug)]
pub struct FlowStat {
    pub rule: Rule,
    pub meta: FlowMeta,
    /// Its packets, bytes and last hit: what it carries plus what the PMDs counted.
    pub counts: FlowCount,
    /// Since its add (a modify keeps it).
    pub duration_ns: u64,
}

impl Control {
    /// The pipeline's counters summed over the PMDs, since they started
    /// ([`PipelineCounts`]).
    pub fn pipeline_totals(&self) -> PipelineCounts {
        let mut sum = PipelineCounts::default();
        for r in self.pmd_totals() {
            sum.add(&r.pipeline);
        }
        sum
    }

    /// Group `id`'s packets and bytes (and its buckets') since its current version was added
    /// or modified, from `totals` ([`Control::pipeline_totals`]).
    pub fn group_counts(&self, totals: &PipelineCounts, id: u32) -> GroupCount {
        let now = totals.groups.get(&id).cloned().unwrap_or_default();
        match self.parting.bases().get(&id) {
            Some(base) => now.minus(base),
            None => now,
        }
    }

    /// The per-flow counts of `rules` summed over the PMDs (cleared at every PMD when `take`:
    /// the flows are gone; module docs), in their order; a PMD thread that has ended counts
    /// with what it left.
    pub fn flow_counts(&self, rules: &[RuleId], take: bool) -> Vec<FlowCount> {
        let mut sum = vec![FlowCount::default(); rules.len()];
        if rules.is_empty() {
            return sum;
        }
        let shared: Arc<[RuleId]> = rules.into();
        let replies: Vec<_> = self
            .inboxes
            .iter()
            .map(|i| {
                let (reply, r) = mpsc::channel();
                i.send(PmdMsg::FlowStats { rules: shared.clone(), take, reply }).ok().map(|()| r)
            })
            .collect();
        for (pmd, r) in replies.into_iter().enumerate() {
            // A PMD answers, or has ended (its counters are in `parting`), or — stuck longer than
            // REPLY_WAIT — is skipped.
            let counts =
                r.and_then(|r| r.recv_timeout(REPLY_WAIT).ok()).or_else(|| self.parting.counts(pmd, rules, take));
            for (s, c) in sum.iter_mut().zip(counts.iter().flatten()) {
                s.add(c);
            }
        }
        sum
    }

    /// The flows `filter` selects with their statistics, in winner order. The table of record
    /// stays locked while the PMDs are asked, so no change moves counts between flows
    /// meanwhile.
    pub fn flow_stats(&self, filter: &FlowFilter) -> Vec<FlowStat> {
        let rules = self.lock_rules();
        let ids = rules.select(filter);
        self.stats_of(&rules, ids)
    }

    /// Every flow with its statistics, the hidden ones (fail-open, in-band) too, in winner
    /// order (`ovs-appctl bridge/dump-flows`).
    pub fn all_flow_stats(&self) -> Vec<FlowStat> {
        let rules = self.lock_rules();
        let ids = rules.iter().map(|r| r.id).collect();
        self.stats_of(&rules, ids)
    }

    /// The statistics of the flows `ids` of `rules` (locked by the caller), in winner order.
    fn stats_of(&self, rules: &FlowTable, ids: Vec<RuleId>) -> Vec<FlowStat> {
        let now = self.clock_ns();
        let counts = self.flow_counts(&ids, false);
        let mut v: Vec<FlowStat> = ids
            .iter()
            .zip(counts)
            .filter_map(|(&id, c)| {
                let (rule, meta) = (rules.get(id)?.clone(), *rules.meta(id)?);
                let mut counts = meta.carried;
                counts.add(&c);
                Some(FlowStat { rule, meta, counts, duration_ns: now.saturating_sub(meta.created_ns) })
            })
            .collect();
        v.sort_by_key(|s| (s.rule.table, s.rule.rank()));
        v
    }

    /// After a transaction is committed and applied on every PMD: takes the PMDs' counts of the
    /// flows it removed and gives them to the flows that took over ([`NetChange::heir`], packets
    /// and bytes unless RESET_COUNTS; a hit the expiry thread had not seen yet makes now the
    /// heir's last hit), and returns a FLOW_REMOVED event for each deleted or expired flow with
    /// SEND_FLOW_REM, with its counts. Called with the table of record locked (`rules`), so no
    /// flow-stats request sees counts in between.
    pub(crate) fn settle_counts(&self, rules: &mut FlowTable, net: &NetChange, now_ns: u64) -> Vec<Event> {
        // A group added, modified or deleted starts its counts again (OVS): its base is what
        // the PMDs have counted of its id so far.
        if !net.groups.is_empty() {
            let now = self.pipeline_totals();
            let mut bases = self.parting.bases();
            for (id, _) in &net.groups {
                bases.insert(*id, now.groups.get(id).cloned().unwrap_or_default());
            }
        }
        let removed: Vec<RuleId> = net.removed.iter().map(|r| r.id).collect();
        let taken = self.flow_counts(&removed, true);
        let mut owed: HashMap<RuleId, (FlowCount, bool)> = HashMap::new();
        for (&id, mut c) in removed.iter().zip(taken) {
            // Along the chain of heirs (a flow modified twice in one bundle) to the last one.
            let mut at = id;
            let mut hit = false;
            for _ in 0..=net.heir.len() {
                let Some(h) = net.heir.get(&at) else { break };
                hit |= at == id && c.packets > h.seen;
                if h.counts == Counts::Reset {
                    c = FlowCount::default();
                }
                at = h.to;
            }
            let o = owed.entry(at).or_default();
            o.0.add(&c);
            o.1 |= hit;
        }
        for (id, (c, hit)) in &owed {
            rules.carry(*id, c, hit.then_some(now_ns));
        }
        let mut events = Vec::new();
        if crate::events::watched() {
            if let Some(e) = flow_changes(rules, net) {
                events.push(e);
            }
        }
        events.extend(net.deleted.iter().filter(|(_, m, _)| m.flags & OFPFF_SEND_FLOW_REM != 0).map(
            |(rule, m, reason)| {
                let mut counts = m.carried;
                if let Some((c, _)) = owed.get(&rule.id) {
                    counts.add(c);
                }
                Event::FlowRemoved(FlowRemoved {
                    rule: rule.clone(),
                    reason: *reason,
                    duration_ns: now_ns.saturating_sub(m.created_ns),
                    idle_timeout: m.idle_timeout,
                    hard_timeout: m.hard_timeout,
                    counts,
                })
            },
        ));
        events
    }
}

/// The flows `net` changed, for flow monitors ([`crate::events`], *Flow changes*): added ones,
/// deleted ones with their reason, and modified ones — those that took over from a flow (a
/// modify, an add over the same match) with other actions; `None` when it changed none.
fn flow_changes(rules: &FlowTable, net: &NetChange) -> Option<Event> {
    use crate::events::{Change, FlowChange, FlowChanges};
    let removed: HashMap<RuleId, &rqvs_flow::Rule> = net.removed.iter().map(|r| (r.id, r)).collect();
    let from: HashMap<RuleId, RuleId> = net.heir.iter().map(|(f, h)| (h.to, *f)).collect();
    let mut flows = Vec::new();
    for r in net.added.iter().filter(|r| !rules.is_hidden(r)) {
        let meta = rules.meta(r.id);
        // A modify keeps the flow's creation time; an add that replaces a flow is a new flow
        // (OVS reports it ADDED, whatever its actions were); a modify that leaves the actions
        // as they were is not reported (as OVS).
        let modified = meta.is_some_and(|m| m.created_ns < m.modified_ns);
        let change = match from.get(&r.id).and_then(|f| removed.get(f)) {
            Some(old) if modified && old.actions == r.actions => continue,
            Some(_) if modified => Change::Modified,
            _ => Change::Added,
        };
        let (idle_timeout, hard_timeout) = meta.map_or((0, 0), |m| (m.idle_timeout, m.hard_timeout));
        flows.push(FlowChange { change, rule: r.clone(), idle_timeout, hard_timeout });
    }
    for (r, m, reason) in net.deleted.iter().filter(|(r, _, _)| !rules.is_hidden(r)) {
        flows.push(FlowChange {
            change: Change::Deleted(*reason),
            rule: r.clone(),
            idle_timeout: m.idle_timeout,
            hard_timeout: m.hard_timeout,
        });
    }
    if flows.is_empty() {
        return None;
    }
    let origin = crate::events::Origin::current();
    Some(Event::FlowsChanged(std::sync::Arc::new(FlowChanges { origin, flows })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_count_per_rule_and_take_clears_and_frees() {
        let mut c = FlowCounters::new();
        c.hit(RuleId(3), 60);
        c.hit(RuleId(3), 100);
        c.hit(RuleId(5000), 1500);
        c.hit(NO_RULE, 64);
        assert_eq!(c.get(RuleId(3)), FlowCount { packets: 2, bytes: 160 });
        assert_eq!(c.get(RuleId(5000)), FlowCount { packets: 1, bytes: 1500 });
        assert_eq!(c.get(RuleId(4)), FlowCount::default());
        assert_eq!(c.get(RuleId(1 << 30)), FlowCount::default());
        assert_eq!(c.pages(), 2);
        let t = c.take(&[RuleId(5000), RuleId(77_777)]);
        assert_eq!(t[0].packets, 1);
        assert_eq!(t[1], FlowCount::default());
        assert_eq!(c.get(RuleId(5000)), FlowCount::default());
        assert_eq!(c.pages(), 1, "the emptied page is freed");
        assert_eq!(c.pages.len(), 1, "and the directory shrinks");
        c.take(&[RuleId(3)]);
        assert_eq!(c.pages(), 0);
    }

    #[test]
    fn counts_add_up_over_pmds() {
        let mut a = FlowCount { packets: 2, bytes: 100 };
        a.add(&FlowCount { packets: 3, bytes: 7 });
        assert_eq!(a, FlowCount { packets: 5, bytes: 107 });
    }
}
