//! `xlate`: the one translation of a packet through the OpenFlow pipeline, after Open vSwitch
//! 3.1's `ofproto-dpif-xlate.c` (semantics read there, code written here). The upcall handler
//! (ORIG, CCACHE), the revalidator, `rqvs trace` and the switch's `ofproto/trace` all call
//! [`xlate`]; nothing else turns rules into datapath ops for a packet.
//!
//! Given a [`Pipeline`] (per table: "the best rule of table T for this key, adding the bits
//! examined to the wildcards"), the [`Groups`] (group table and port liveness) and a packet key,
//! [`xlate`] walks table 0 and the `goto_table`s and `resubmit`s from there and returns an
//! [`Xlate`]: the datapath ops (every table's, composed in order), the megaflow (the wildcards
//! of every lookup, misses included, plus what the actions read or write and OVS's
//! always-examined bits), the rule chain (every rule the packet passed, with its table), the
//! final key (after every rewrite) and whether the walk ended in a table miss.
//!
//! **Why in the ofproto crate.** The translation produces [`Op`]s, the datapath actions, which
//! live here with the table that interns them (the crate docs give the layering); its callers —
//! the datapath's handler, revalidator and CFLOWS walk, the switch, `rqvs trace`, the replay's
//! reference walk — all depend on this crate; the lookup itself stays behind the [`Pipeline`] trait, which
//! [`OfprotoClassifier`] implements with wildcard tracking and which a classifier without
//! wildcards (CFLOWS' per-table classifiers, the reference walk of the tests) can implement by
//! adding nothing to the wildcards.
//!
//! # Semantics (OpenFlow 1.3 as OVS 3.1 runs it)
//!
//! - **Tables.** A table miss with no miss flow drops (OpenFlow 1.3's default): nothing more of
//!   that table; `resubmit` callers go on after the resubmit. `goto_table` only goes forward (the
//!   parser refuses others). `resubmit(PORT,TABLE)` is a nested lookup, as if the packet had
//!   come in on `PORT` (restored afterwards), in `TABLE` (the current table when absent); the
//!   actions after it go on. Depth limit 64 nested lookups, 4096 lookups in all ([`MAX_DEPTH`],
//!   [`MAX_RESUBMITS`]): past either the whole translation drops the packet and says so
//!   ([`XlateError`]).
//! - **Instructions.** `write_metadata` sets the metadata bits under its mask; `clear_actions`
//!   empties the action set; `write_actions` adds to it; the action set runs when the pipeline
//!   ends (even after a miss, as OVS does), in the specification's order: pop (strip_vlan),
//!   push_vlan, dec_ttl, every set_field in order, then a group if any, else the output if any,
//!   else a resubmit — of each kind only the last written ([`action_set_order`]). `meter:N`
//!   becomes [`Op::Meter`] where it stands (the instruction comes first in a rule's list): the
//!   switch's executor runs the packet through the meter, which may drop it.
//! - **Rewrites** change the key the next lookup sees; `set_field` on a field whose
//!   prerequisites the packet lacks is skipped (OVS: "unmet prerequisites"); `vlan_vid` and
//!   `vlan_pcp` need a tag. `push_vlan` pushes a fresh tag, VID 0 and PCP 0 (OVS 3.1 does not
//!   copy the outer tag's, whatever OpenFlow 1.3 suggests); rqvs keys hold one tag (QinQ is not modelled: after a push on a tagged frame,
//!   lookups see the new outer tag; a pop after that leaves the key untagged). `dec_ttl` on a TTL
//!   of 0 or 1 stops the current action list (OVS's "stop processing for current table") and
//!   sends the packet to the controller with reason INVALID_TTL, the rule's cookie and table
//!   ([`Op::TtlExpired`]).
//! - **Outputs.** `output:P` to the packet's in_port is dropped (the executor skips an output to
//!   the ingress port; the translation drops one to a port the pipeline made the in_port);
//!   `in_port` sends there. Outputs to the port a frame came in on when `set_field:...->in_port`
//!   or `resubmit(PORT,...)` made the key's in_port another one are sent (as OVS does).
//! - **Groups.** ALL: every bucket, each on its own copy ([`Op::Clone`] when the bucket
//!   rewrites the frame); INDIRECT: the bucket; SELECT: one live bucket chosen by a weighted
//!   hash of the flow's symmetric L4 fields (OVS's default selection method's *fields*: dl_src,
//!   dl_dst, VLAN VID, nw_src/nw_dst or ipv6_src/ipv6_dst, nw_proto, tp_src, tp_dst — all
//!   un-wildcarded; the hash function is rqvs's own, so which bucket a given flow takes differs
//!   from OVS's); FAST_FAILOVER: the first live bucket (liveness from [`Groups::port_live`] and
//!   watched groups). A bucket's actions are an action set, run on a copy of the key: the
//!   actions after a group see the packet as it was before it (OVS's rollback). A group that is
//!   not in the table drops (nothing).
//!
//! # Wildcards added by actions (OVS's)
//!
//! A set_field, `mod_dl_*`, `mod_vlan_vid`, `mod_nw_tos` un-wildcard the bits they overwrite
//! (OVS does, as its datapath actions are the difference between the packet and the rewritten
//! flow; rqvs's ops are unconditional, so for rqvs this only keeps the megaflows OVS's: the
//! soundness test of `tests/xlate_pipeline.rs` holds either way); `dec_ttl` reads `nw_ttl` (and `dl_type`);
//! `NORMAL` reads `dl_src`, `dl_dst` and, on a tagged packet, the VLAN (VID and CFI; OVS 3.1's
//! megaflow for an untagged packet has no VLAN bits); `push_vlan` reads nothing; `strip_vlan` reads whether there is a tag (CFI); a SELECT group the hashed fields;
//! set_field's prerequisite check reads the prerequisite fields. Output to `in_port` reads
//! `in_port`, which every megaflow matches exactly anyway. `metadata` is never in a megaflow:
//! packets enter the pipeline with metadata 0 (OVS's datapath keys have none).

use std::collections::HashMap;

use rqvs_classify::ofproto::{Megaflow, OfprotoClassifier};
use rqvs_flow::field::{Field, Member};
use rqvs_flow::group::{Group, GroupType, OFPG_ANY, OFPP_ANY};
use rqvs_flow::key::*;
use rqvs_flow::{Action, FlowKey, Rule, RuleId};

use crate::actions::{self, is_table_miss, Op, ToController};
use crate::DpAction;

/// Nested lookups (resubmit, goto_table, groups) allowed (OVS's `MAX_DEPTH`).
pub const MAX_DEPTH: u32 = 64;
/// Lookups allowed in one translation (OVS's `MAX_RESUBMITS`).
pub const MAX_RESUBMITS: u32 = 4096;

/// The pipeline's lookup: the best rule of a table for a key, adding the bits the lookup
/// examined to `wc`. A classifier without wildcard tracking adds nothing (its callers then do
/// not use the megaflow). The rule is returned owned: a classifier that stores rules in another
/// form (NuevoMatchUP's stored rules, for CFLOWS' table 0) makes one.
pub trait Pipeline {
    fn lookup(&self, table: u8, key: &FlowKey, wc: &mut FlowKey) -> Option<Rule>;
}

impl Pipeline for OfprotoClassifier {
    fn lookup(&self, table: u8, key: &FlowKey, wc: &mut FlowKey) -> Option<Rule> {
        let l = self.lookup_wc_in_table(table, key);
        *wc = wc.union(&l.wildcards);
        l.rule.and_then(|id| self.rule_in_table(table, id)).cloned()
    }
}

/// The group table and the liveness of ports (fast-failover groups).
pub trait Groups {
    fn group(&self, id: u32) -> Option<&Group>;
    /// Is port `port`'s link up? (All ports are, by default.)
    fn port_live(&self, _port: u32) -> bool {
        true
    }
}

/// No groups at all.
pub struct NoGroups;

impl Groups for NoGroups {
    fn group(&self, _id: u32) -> Option<&Group> {
        None
    }
}

impl Groups for HashMap<u32, Group> {
    fn group(&self, id: u32) -> Option<&Group> {
        self.get(&id)
    }
}

impl Groups for std::collections::BTreeMap<u32, Group> {
    fn group(&self, id: u32) -> Option<&Group> {
        self.get(&id)
    }
}

/// Why a translation dropped the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XlateError {
    /// More than [`MAX_DEPTH`] nested lookups.
    TooDeep,
    /// More than [`MAX_RESUBMITS`] lookups.
    TooManyResubmits,
    /// Patch crossings nested more than [`crate::crossing::MAX_CROSSINGS`] deep (a patch loop).
    PatchLoop,
}

impl std::fmt::Display for XlateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            XlateError::TooDeep => write!(f, "over max translation depth {MAX_DEPTH}"),
            XlateError::TooManyResubmits => write!(f, "over {MAX_RESUBMITS} resubmit actions"),
            XlateError::PatchLoop => {
                write!(f, "over max translation depth: patch loop (over {} crossings)", crate::crossing::MAX_CROSSINGS)
            }
        }
    }
}

/// One step of the rule chain: a lookup in `table` and the rule it found (`None`: a miss).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    pub table: u8,
    pub rule: Option<RuleId>,
    /// Nesting depth (0: table 0 of the packet; each goto_table, resubmit or group bucket
    /// adds one), for printing the chain as OVS's trace indents it.
    pub depth: u32,
}

/// A translation's result (module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Xlate {
    /// The datapath ops, in order (empty: drop).
    pub ops: Vec<Op>,
    /// The bits examined: every lookup's wildcards and what the actions read or wrote, before
    /// OVS's always-examined bits ([`Xlate::megaflow`] has those).
    pub wildcards: FlowKey,
    /// The megaflow to install for the packet.
    pub megaflow: Megaflow,
    /// Every lookup, in order.
    pub chain: Vec<Link>,
    /// The key after every rewrite.
    pub final_key: FlowKey,
    /// The last lookup of the pipeline (table 0's or a goto_table's) missed.
    pub table_miss: bool,
    pub error: Option<XlateError>,
    /// Each group the packet went through, in order, with the buckets it took (their indices).
    /// Empty when the translation failed (the packet is dropped).
    pub groups: Vec<(u32, Vec<u32>)>,
}

impl Xlate {
    /// The ops as one datapath action.
    pub fn action(&self) -> DpAction {
        DpAction::of_op_list(&self.ops)
    }

    /// The rules of the chain (misses left out), in order, each once.
    pub fn rules(&self) -> Vec<RuleId> {
        let mut out: Vec<RuleId> = Vec::with_capacity(self.chain.len());
        for r in self.chain.iter().filter_map(|l| l.rule) {
            if !out.contains(&r) {
                out.push(r);
            }
        }
        out
    }

    /// The rule of table 0's lookup (the first rule of the chain), if it matched.
    pub fn first_rule(&self) -> Option<RuleId> {
        self.chain.first().and_then(|l| l.rule)
    }
}

struct Ctx<'a> {
    pipeline: &'a dyn Pipeline,
    groups: &'a dyn Groups,
    /// The port the frame came in on (the key's in_port may be rewritten).
    ingress: u32,
    key: FlowKey,
    wc: FlowKey,
    action_set: Vec<Action>,
    chain: Vec<Link>,
    depth: u32,
    resubmits: u32,
    table_miss: bool,
    error: Option<XlateError>,
    /// The last rule matched and its table (the action set's `controller` says its cookie).
    last_rule: Option<(u8, Rule)>,
    /// `ofproto/trace`'s lines, when tracing ([`xlate_traced`]).
    trace: Option<Vec<String>>,
    /// Nesting level of the trace (a lookup that is not a tail call is one deeper).
    level: u32,
    /// The outer tag is one `push_vlan` made: what is read or written of it says nothing about
    /// the packet, so it adds no VLAN bits to the wildcards (OVS shifts its VLAN wildcards on a
    /// push).
    vlan_pushed: bool,
    /// `dec_ttl` expired the packet: the current action list stops.
    stop: bool,
    /// The groups executed and their buckets ([`Xlate::groups`]).
    visits: Vec<(u32, Vec<u32>)>,
}

/// Translates `key` through the pipeline (module docs).
pub fn xlate(pipeline: &dyn Pipeline, groups: &dyn Groups, key: &FlowKey) -> Xlate {
    run(pipeline, groups, key, false).0
}

/// [`xlate`], with the lines `ovs-appctl ofproto/trace` prints between `bridge(...)` and
/// `Final flow:` — each lookup (`T. MATCH, priority P[, cookie C]` or `T. No match.`), each
/// action under it; a lookup that is the last thing its rule does (goto_table, a final
/// resubmit, with no action set pending) at the same level, any other nested one level deeper
/// (OVS's layout: tables at 4 spaces per level, actions at 8 per level + 4); group buckets
/// (`bucket N`); the action set (`--. Executing action set:`).
pub fn xlate_traced(pipeline: &dyn Pipeline, groups: &dyn Groups, key: &FlowKey) -> (Xlate, Vec<String>) {
    let (x, lines) = run(pipeline, groups, key, true);
    (x, lines.unwrap_or_default())
}

fn run(pipeline: &dyn Pipeline, groups: &dyn Groups, key: &FlowKey, trace: bool) -> (Xlate, Option<Vec<String>>) {
    let mut ctx = Ctx {
        pipeline,
        groups,
        ingress: key.in_port,
        key: *key,
        wc: FlowKey::ZERO,
        action_set: Vec::new(),
        chain: Vec::new(),
        depth: 0,
        resubmits: 0,
        table_miss: false,
        error: None,
        last_rule: None,
        trace: trace.then(Vec::new),
        level: 0,
        vlan_pushed: false,
        stop: false,
        visits: Vec::new(),
    };
    let mut ops = Vec::new();
    ctx.table(0, None, true, true, &mut ops);
    if ctx.error.is_none() && !ctx.action_set.is_empty() {
        let set = action_set_order(&std::mem::take(&mut ctx.action_set));
        ctx.level = 0;
        ctx.line(0, "--. Executing action set:".to_string());
        let (table, rule) = ctx.last_rule.take().map_or((0, None), |(t, r)| (t, Some(r)));
        ctx.actions(&set, table, rule.as_ref(), &mut ops);
    }
    if ctx.error.is_some() {
        ops.clear();
        ctx.visits.clear();
    }
    let mut wc = ctx.wc;
    // Packets enter with metadata 0: it is never part of a datapath key.
    wc.metadata = 0;
    let mut megaflow = Megaflow::from_wildcards(key, &wc);
    megaflow.mask.metadata = 0;
    megaflow.value = key.masked(&megaflow.mask);
    if let Some(e) = ctx.error {
        ctx.line(0, format!("\n{e}: the packet is dropped"));
    }
    let x = Xlate {
        ops,
        wildcards: wc,
        megaflow,
        chain: ctx.chain,
        final_key: ctx.key,
        table_miss: ctx.table_miss,
        error: ctx.error,
        groups: ctx.visits,
    };
    (x, ctx.trace)
}

/// The translation's ops as `Datapath actions:` (OVS's notation where rqvs's ops have one): a
/// header change that leaves the packet as it is at that point adds nothing (OVS commits a change
/// only when the field differs; rqvs's ops carry them all), an output to the input port is
/// skipped (as the switch's executor skips it), `in_port` is the input port's number, a TTL
/// expiry adds nothing.
pub fn datapath_actions(ops: &[Op], key: &FlowKey) -> String {
    let mut k = *key;
    let mut emitted: Vec<String> = Vec::new();
    for op in ops {
        let before = k;
        match *op {
            Op::SetDlSrc(m) => k.dl_src = m,
            Op::SetDlDst(m) => k.dl_dst = m,
            Op::SetVlanVid(v) => k.vlan_tci = (k.vlan_tci & VLAN_PCP_MASK) | VLAN_CFI | v,
            Op::StripVlan => k.vlan_tci = 0,
            Op::SetNwTos(t) if k.dl_type == ETH_TYPE_IP => k.nw_tos = (k.nw_tos & 3) | (t & 0xfc),
            Op::SetNwTos(_) => {}
            Op::SetField { field, value, mask } => {
                let v = (field.get(&k) & !mask) | (value & mask);
                field.set(&mut k, v);
            }
            Op::Output(p) if p == key.in_port => continue,
            Op::InPort => {
                emitted.push(key.in_port.to_string());
                continue;
            }
            Op::TtlExpired(_) => continue,
            _ => {
                emitted.push(op.to_string());
                continue;
            }
        }
        if k != before {
            emitted.push(op.to_string());
        }
    }
    if emitted.is_empty() {
        "drop".to_string()
    } else {
        emitted.join(",")
    }
}

/// `ofproto/trace`'s whole text for a translation of `key` on bridge `bridge`: `Flow:`, the
/// lines of [`xlate_traced`], `Final flow:` (`unchanged` or the rewritten packet), `Megaflow:`
/// and `Datapath actions:` ([`datapath_actions`]).
pub fn trace_text(bridge: &str, key: &FlowKey, x: &Xlate, lines: &[String]) -> String {
    use rqvs_classify::ofproto::format_flow;
    let mut s = format!("Flow: {}\n\nbridge(\"{bridge}\")\n-------------\n", format_flow(key));
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    let final_text = if x.final_key == *key { "unchanged".to_string() } else { format_flow(&x.final_key) };
    s.push_str(&format!(
        "\nFinal flow: {final_text}\nMegaflow: {}\nDatapath actions: {}\n",
        x.megaflow,
        datapath_actions(&x.ops, key)
    ));
    s
}

/// A rule as `ofproto/trace` names it: its match as ovs-ofctl writes it, TCP flags by name,
/// then `priority P` and the cookie when not 0.
pub fn format_rule(r: &Rule) -> String {
    use rqvs_classify::ofproto::format_tcp_flags;
    let (v, w) = (r.matches.value(), r.matches.mask());
    let m = rqvs_flow::formats::ofctl::format_match(&r.matches)
        .unwrap_or_else(|e| format!("({e})"))
        .split(',')
        .map(|item| match item.starts_with("tcp_flags=") {
            true => format!("tcp_flags={}", format_tcp_flags(v.tcp_flags, w.tcp_flags)),
            false => item.to_string(),
        })
        .collect::<Vec<_>>()
        .join(",");
    let mut line =
        if m.is_empty() { format!("priority {}", r.priority) } else { format!("{m}, priority {}", r.priority) };
    if r.cookie != 0 {
        line.push_str(&format!(", cookie {:#x}", r.cookie));
    }
    line
}

/// The action set as the list it runs as (OpenFlow 1.3 §5.10, OVS's
/// `ofpacts_execute_action_set`): the last strip_vlan, the last push_vlan, the last dec_ttl,
/// every set action in order, then the last group, or else the last output, or else the last
/// resubmit.
pub fn action_set_order(set: &[Action]) -> Vec<Action> {
    let last = |f: &dyn Fn(&Action) -> bool| set.iter().rev().find(|a| f(a)).cloned();
    let mut out = Vec::new();
    out.extend(last(&|a| matches!(a, Action::StripVlan)));
    out.extend(last(&|a| matches!(a, Action::PushVlan(_))));
    out.extend(last(&|a| matches!(a, Action::DecTtl)));
    out.extend(
        set.iter()
            .filter(|a| {
                matches!(
                    a,
                    Action::SetField { .. }
                        | Action::SetDlSrc(_)
                        | Action::SetDlDst(_)
                        | Action::SetVlanVid(_)
                        | Action::SetNwTos(_)
                )
            })
            .cloned(),
    );
    let output = |a: &Action| {
        matches!(
            a,
            Action::Output(_) | Action::InPort | Action::All | Action::Flood | Action::Controller(_) | Action::Normal
        )
    };
    if let Some(g) = last(&|a| matches!(a, Action::Group(_))) {
        out.push(g);
    } else if let Some(o) = last(&output) {
        out.push(o);
    } else if let Some(r) = last(&|a| matches!(a, Action::Resubmit { .. })) {
        out.push(r);
    }
    out
}

/// Does `key` carry the headers field `f` belongs to (its prerequisites)? Reads them into `wc`
/// (as OVS's `mf_are_prereqs_ok` with wildcards does).
fn prereqs_ok(f: &Field, key: &FlowKey, wc: &mut FlowKey) -> bool {
    use rqvs_flow::field::Prereq;
    wc.dl_type = u16::MAX;
    let proto = |wc: &mut FlowKey, p: u8| {
        wc.nw_proto = u8::MAX;
        key.nw_proto == p
    };
    let ip_any = key.dl_type == ETH_TYPE_IP || key.dl_type == ETH_TYPE_IPV6;
    match f.prereq {
        Prereq::None => {
            if f.member == Member::VlanTci {
                wc.vlan_tci |= VLAN_CFI;
                key.vlan_tci & VLAN_CFI != 0
            } else {
                true
            }
        }
        Prereq::Vlan => {
            wc.vlan_tci |= VLAN_CFI;
            key.vlan_tci & VLAN_CFI != 0
        }
        Prereq::Arp => key.dl_type == ETH_TYPE_ARP || key.dl_type == rqvs_flow::field::ETH_TYPE_RARP,
        Prereq::Ipv4 => key.dl_type == ETH_TYPE_IP,
        Prereq::Ipv6 => key.dl_type == ETH_TYPE_IPV6,
        Prereq::IpAny => ip_any,
        Prereq::Tcp => ip_any && proto(wc, IPPROTO_TCP),
        Prereq::Udp => ip_any && proto(wc, IPPROTO_UDP),
        Prereq::Sctp => ip_any && proto(wc, IPPROTO_SCTP),
        Prereq::Icmpv4 => key.dl_type == ETH_TYPE_IP && proto(wc, IPPROTO_ICMP),
        Prereq::Icmpv6 | Prereq::Nd | Prereq::NdSolicit | Prereq::NdAdvert => {
            key.dl_type == ETH_TYPE_IPV6 && proto(wc, IPPROTO_ICMPV6) && {
                wc.tp_src |= 0xff;
                wc.tp_dst |= 0xff;
                let t = key.tp_src;
                match f.prereq {
                    Prereq::Nd => key.tp_dst == 0 && (t == 135 || t == 136),
                    Prereq::NdSolicit => key.tp_dst == 0 && t == 135,
                    Prereq::NdAdvert => key.tp_dst == 0 && t == 136,
                    _ => true,
                }
            }
        }
    }
}

/// A 32-bit mix (for SELECT groups: rqvs's own hash, see the module docs).
fn mix(h: u64, x: u64) -> u64 {
    let h = (h ^ x).wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 32)
}

impl Ctx<'_> {
    /// One lookup in `table` (as if from `in_port` when given) and the matched rule's actions.
    /// `pipeline`: a lookup of the pipeline proper (table 0, goto_table), whose miss ends it.
    /// A trace line at `indent` spaces (nothing when not tracing).
    fn line(&mut self, indent: u32, text: String) {
        if let Some(t) = &mut self.trace {
            t.push(format!("{}{text}", " ".repeat(indent as usize)));
        }
    }

    fn action_indent(&self) -> u32 {
        8 * self.level + 4
    }

    fn table(&mut self, table: u8, in_port: Option<u32>, pipeline: bool, tail: bool, ops: &mut Vec<Op>) {
        if self.error.is_some() {
            return;
        }
        if self.depth >= MAX_DEPTH {
            self.error = Some(XlateError::TooDeep);
            return;
        }
        if self.resubmits >= MAX_RESUBMITS {
            self.error = Some(XlateError::TooManyResubmits);
            return;
        }
        self.resubmits += 1;
        let saved = self.key.in_port;
        if let Some(p) = in_port {
            self.key.in_port = p;
        }
        let rule = self.pipeline.lookup(table, &self.key, &mut self.wc);
        self.chain.push(Link { table, rule: rule.as_ref().map(|r| r.id), depth: self.depth });
        if pipeline {
            self.table_miss = rule.is_none();
        }
        let level = self.level;
        if !tail {
            self.level += 1;
        }
        if self.trace.is_some() {
            let text = rule.as_ref().map_or_else(|| "No match.".to_string(), format_rule);
            self.line(4 * self.level, format!("{table:2}. {text}"));
            if rule.is_none() {
                self.line(self.action_indent(), "drop".to_string());
            }
        }
        if let Some(r) = rule {
            self.last_rule = Some((table, r.clone()));
            self.depth += 1;
            self.actions_at(&r.actions.0, table, Some(&r), true, ops);
            self.depth -= 1;
        }
        self.level = level;
        if in_port.is_some() {
            self.key.in_port = saved;
        }
    }

    /// One action list (a rule's, the action set's, a bucket's), executed on `self.key`.
    fn actions(&mut self, list: &[Action], table: u8, rule: Option<&Rule>, ops: &mut Vec<Op>) {
        self.actions_at(list, table, rule, false, ops)
    }

    /// [`Ctx::actions`]; `tail`: the list's last action is the last thing the translation does
    /// at this level (for the trace's layout).
    fn actions_at(&mut self, list: &[Action], table: u8, rule: Option<&Rule>, tail: bool, ops: &mut Vec<Op>) {
        for (i, a) in list.iter().enumerate() {
            if self.error.is_some() {
                return;
            }
            let last = tail && i + 1 == list.len() && self.action_set.is_empty();
            if self.trace.is_some() {
                let indent = self.action_indent();
                self.line(indent, a.to_string());
            }
            let vlan_wc = self.wc.vlan_tci;
            if matches!(a, Action::Output(p) if *p == self.key.in_port && *p == self.ingress) {
                // As OVS: an output to the input port sends nothing (only `in_port` does).
                let indent = self.action_indent() + 1;
                self.line(indent, ">> skipping output to input port".into());
            }
            self.action(a, table, rule, last, ops);
            // Writing a pushed tag reads nothing of the packet.
            let writes_tag = matches!(a, Action::SetVlanVid(_))
                || matches!(a, Action::SetField { field, .. } if field.member == Member::VlanTci);
            if self.vlan_pushed && writes_tag {
                self.wc.vlan_tci = vlan_wc;
            }
            if matches!(a, Action::PushVlan(_)) {
                self.vlan_pushed = true;
            } else if matches!(a, Action::StripVlan) {
                self.vlan_pushed = false;
            }
            if self.stop {
                self.stop = false;
                return;
            }
        }
    }

    /// One action of a list (see [`Ctx::actions_at`]).
    fn action(&mut self, a: &Action, table: u8, rule: Option<&Rule>, last: bool, ops: &mut Vec<Op>) {
        {
            match a {
                Action::Output(p) => {
                    if *p == self.key.in_port && *p != self.ingress {
                        // OpenFlow: only `in_port` sends a packet back (to the port the
                        // pipeline says it came from).
                    } else if *p == self.ingress && self.key.in_port != self.ingress {
                        ops.push(Op::InPort);
                    } else {
                        ops.push(Op::Output(*p));
                    }
                }
                Action::InPort => {
                    self.wc.in_port = u32::MAX;
                    if self.key.in_port == self.ingress {
                        ops.push(Op::InPort);
                    } else {
                        ops.push(Op::Output(self.key.in_port));
                    }
                }
                Action::All => ops.push(Op::All),
                Action::Flood => ops.push(Op::Flood),
                Action::Drop | Action::Other(_) => {}
                Action::Meter(m) => ops.push(Op::Meter(*m)),
                Action::Controller(n) => {
                    let (cookie, table_miss) = rule.map_or((u64::MAX, false), |r| (r.cookie, is_table_miss(r)));
                    ops.push(Op::Controller(ToController {
                        max_len: n.unwrap_or(u16::MAX),
                        cookie,
                        table_miss,
                        table_id: table,
                    }));
                }
                Action::Normal => {
                    // OVS 3.1's megaflow of an untagged packet under NORMAL (ofproto/trace):
                    // both MACs, no VLAN bits; a tagged packet's VID is read too.
                    self.wc.dl_src = [0xff; 6];
                    self.wc.dl_dst = [0xff; 6];
                    if self.key.vlan_tci & VLAN_CFI != 0 {
                        self.wc.vlan_tci |= VLAN_VID_MASK | VLAN_CFI;
                    }
                    ops.push(Op::Normal);
                }
                Action::SetDlSrc(m) => {
                    self.wc.dl_src = [0xff; 6];
                    self.key.dl_src = *m;
                    ops.push(Op::SetDlSrc(*m));
                }
                Action::SetDlDst(m) => {
                    self.wc.dl_dst = [0xff; 6];
                    self.key.dl_dst = *m;
                    ops.push(Op::SetDlDst(*m));
                }
                Action::SetVlanVid(v) => {
                    self.wc.vlan_tci |= VLAN_VID_MASK | VLAN_CFI;
                    self.key.vlan_tci = (self.key.vlan_tci & !VLAN_VID_MASK) | (v & VLAN_VID_MASK) | VLAN_CFI;
                    ops.push(Op::SetVlanVid(*v));
                }
                Action::StripVlan => {
                    self.wc.vlan_tci |= VLAN_CFI;
                    if self.key.vlan_tci & VLAN_CFI != 0 {
                        self.key.vlan_tci = 0;
                        ops.push(Op::StripVlan);
                    }
                }
                Action::SetNwTos(t) => {
                    self.wc.dl_type = u16::MAX;
                    if self.key.is_ip() || self.key.dl_type == ETH_TYPE_IPV6 {
                        self.wc.nw_tos |= 0xfc;
                        self.key.nw_tos = (self.key.nw_tos & 0x03) | (t & 0xfc);
                        ops.push(Op::SetNwTos(*t));
                    }
                }
                Action::DecTtl => {
                    self.wc.dl_type = u16::MAX;
                    if self.key.is_ip() || self.key.dl_type == ETH_TYPE_IPV6 {
                        self.wc.nw_ttl = u8::MAX;
                        if self.key.nw_ttl > 1 {
                            self.key.nw_ttl -= 1;
                            ops.push(Op::DecTtl);
                        } else {
                            // Stop processing for the current table (OVS's compose_dec_ttl);
                            // the executor counts the expiry.
                            ops.push(Op::TtlExpired(ToController {
                                max_len: u16::MAX,
                                cookie: rule.map_or(u64::MAX, |r| r.cookie),
                                table_miss: false,
                                table_id: table,
                            }));
                            self.stop = true;
                        }
                    }
                }
                Action::SetField { field, value, mask } => {
                    if prereqs_ok(field, &self.key, &mut self.wc) {
                        let ones = field.all_ones();
                        let mut m = FlowKey::ZERO;
                        field.set(&mut m, *mask & ones);
                        self.wc = self.wc.union(&m);
                        let old = field.get(&self.key);
                        let mut new = (old & !mask) | (value & mask);
                        if field.member == Member::VlanTci && field.shift == 0 {
                            // vlan_vid: the tag stays (its CFI bit is OFPVID_PRESENT).
                            new |= u128::from(VLAN_CFI);
                        }
                        field.set(&mut self.key, new);
                        if !matches!(field.member, Member::Metadata | Member::InPort) {
                            ops.push(Op::SetField { field, value: value & mask & ones, mask: mask & ones });
                        }
                    }
                }
                Action::PushVlan(tpid) => {
                    // OVS 3.1 pushes a fresh tag (VID 0, PCP 0) and reads nothing of the packet.
                    self.key.vlan_tci = VLAN_CFI;
                    ops.push(Op::PushVlan(*tpid));
                }
                Action::Resubmit { in_port, table: t } => {
                    self.table(t.unwrap_or(table), *in_port, false, last, ops);
                }
                Action::GotoTable(t) => self.table(*t, None, true, last, ops),
                Action::WriteMetadata { value, mask } => {
                    self.key.metadata = (self.key.metadata & !mask) | (value & mask);
                }
                Action::ClearActions => self.action_set.clear(),
                Action::WriteActions(list) => self.action_set.extend(list.iter().cloned()),
                Action::Group(id) => self.group(*id, table, rule, ops),
            }
        }
    }

    /// Is bucket `b` live (fast failover)? Watched ports by the callback, watched groups by
    /// having a live bucket.
    fn bucket_live(&self, b: &rqvs_flow::group::Bucket, depth: u32) -> bool {
        if b.watch_port == OFPP_ANY && b.watch_group == OFPG_ANY {
            return true;
        }
        (b.watch_port != OFPP_ANY && self.groups.port_live(b.watch_port))
            || (b.watch_group != OFPG_ANY && depth < MAX_DEPTH && self.group_live(b.watch_group, depth + 1))
    }

    fn group_live(&self, id: u32, depth: u32) -> bool {
        self.groups.group(id).is_some_and(|g| g.buckets.iter().any(|b| self.bucket_live(b, depth)))
    }

    fn group(&mut self, id: u32, table: u8, rule: Option<&Rule>, ops: &mut Vec<Op>) {
        let Some(g) = self.groups.group(id).cloned() else { return };
        if self.depth >= MAX_DEPTH {
            self.error = Some(XlateError::TooDeep);
            return;
        }
        let chosen: Vec<&rqvs_flow::group::Bucket> = match g.kind {
            GroupType::All => g.buckets.iter().collect(),
            GroupType::Indirect => g.buckets.first().into_iter().collect(),
            GroupType::FastFailover => g.buckets.iter().find(|b| self.bucket_live(b, self.depth)).into_iter().collect(),
            GroupType::Select => {
                let basis = self.select_hash();
                g.buckets
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b.weight > 0 && self.bucket_live(b, self.depth))
                    .max_by_key(|(i, b)| ((mix(basis, *i as u64) & 0xffff) * u64::from(b.weight), usize::MAX - i))
                    .map(|(_, b)| b)
                    .into_iter()
                    .collect()
            }
        };
        self.depth += 1;
        let taken: Vec<u32> =
            chosen.iter().map(|b| g.buckets.iter().position(|x| std::ptr::eq(x, *b)).unwrap_or(0) as u32).collect();
        self.visits.push((id, taken));
        for b in chosen {
            if self.trace.is_some() {
                let i = g.buckets.iter().position(|x| std::ptr::eq(x, b)).unwrap_or(0);
                let indent = self.action_indent();
                self.line(indent, format!("bucket {i}"));
            }
            self.level += 1;
            let saved_key = self.key;
            let saved_pushed = self.vlan_pushed;
            let saved_set = std::mem::take(&mut self.action_set);
            let list = action_set_order(&b.actions.0);
            let mut bucket_ops = Vec::new();
            self.actions(&list, table, rule, &mut bucket_ops);
            self.level -= 1;
            self.key = saved_key;
            self.vlan_pushed = saved_pushed;
            self.action_set = saved_set;
            if bucket_ops.iter().any(Op::rewrites) {
                ops.push(Op::Clone(actions::intern(&bucket_ops)));
            } else {
                ops.extend(bucket_ops);
            }
        }
        self.depth -= 1;
    }

    /// The SELECT group's hash of the flow's symmetric L4 fields, un-wildcarding them.
    fn select_hash(&mut self) -> u64 {
        let k = self.key;
        let wc = &mut self.wc;
        wc.dl_src = [0xff; 6];
        wc.dl_dst = [0xff; 6];
        wc.dl_type = u16::MAX;
        wc.vlan_tci |= VLAN_VID_MASK | VLAN_CFI;
        let mac = |m: [u8; 6]| m.iter().fold(0u64, |a, &b| a << 8 | u64::from(b));
        // Symmetric: the two directions of a flow hash alike.
        let mut h = mix(0x9e37_79b9_7f4a_7c15, mac(k.dl_src) ^ mac(k.dl_dst));
        h = mix(h, u64::from(k.vlan_tci & VLAN_VID_MASK));
        if k.dl_type == ETH_TYPE_IP {
            wc.nw_src = u32::MAX;
            wc.nw_dst = u32::MAX;
            h = mix(h, u64::from(k.nw_src ^ k.nw_dst));
        } else if k.dl_type == ETH_TYPE_IPV6 {
            wc.ipv6_src = u128::MAX;
            wc.ipv6_dst = u128::MAX;
            let x = k.ipv6_src ^ k.ipv6_dst;
            h = mix(h, (x >> 64) as u64 ^ x as u64);
        }
        if k.is_ip() || k.dl_type == ETH_TYPE_IPV6 {
            wc.nw_proto = u8::MAX;
            h = mix(h, u64::from(k.nw_proto));
            if matches!(k.nw_proto, IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP) {
                wc.tp_src = u16::MAX;
                wc.tp_dst = u16::MAX;
                h = mix(h, u64::from(k.tp_src ^ k.tp_dst));
            }
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_flow::formats::ofctl;
    use rqvs_flow::group::Bucket;
    use rqvs_flow::Actions;

    fn pipeline(text: &str) -> OfprotoClassifier {
        OfprotoClassifier::build(&ofctl::parse_flows("p.ofctl", text).unwrap()).unwrap()
    }

    fn tcp(in_port: u32, src: u32, dst: u32, sport: u16, dport: u16) -> FlowKey {
        let mut k = FlowKey::ipv4(src, dst, IPPROTO_TCP, sport, dport);
        k.dl_type = ETH_TYPE_IP;
        k.in_port = in_port;
        k.nw_ttl = 64;
        k
    }

    fn ops(x: &Xlate) -> String {
        x.ops.iter().map(|o| o.to_string()).collect::<Vec<_>>().join(",")
    }

    #[test]
    fn goto_metadata_and_a_rewrite_seen_by_the_next_table() {
        let p = pipeline(
            "table=0,priority=10,tcp,tp_dst=80,actions=set_field:10.9.9.9->nw_dst,write_metadata:0x5/0xf,goto_table:1\n\
             table=0,priority=0,actions=drop\n\
             table=1,priority=20,ip,metadata=0x5/0xf,nw_dst=10.9.0.0/16,actions=output:2\n\
             table=1,priority=10,ip,actions=output:3\n",
        );
        let x = xlate(&p, &NoGroups, &tcp(1, 0x0a00_0001, 0x0b00_0001, 1000, 80));
        assert_eq!(ops(&x), "set(nw_dst=10.9.9.9),2");
        assert_eq!(
            x.chain.iter().map(|l| (l.table, l.rule.map(|r| r.0), l.depth)).collect::<Vec<_>>(),
            vec![(0, Some(0), 0), (1, Some(2), 1)]
        );
        assert_eq!(x.final_key.nw_dst, 0x0a09_0909);
        assert_eq!(x.final_key.metadata, 5);
        assert!(!x.table_miss);
        // The rewritten field is exact in the megaflow (the set_field un-wildcarded it), metadata
        // is never there.
        assert_eq!(x.megaflow.mask.nw_dst, u32::MAX);
        assert_eq!(x.megaflow.mask.metadata, 0);
        assert_eq!(x.megaflow.mask.tp_dst, u16::MAX);
        assert_eq!(x.rules(), vec![RuleId(0), RuleId(2)]);
    }

    #[test]
    fn a_miss_drops_and_resubmit_goes_on() {
        let p = pipeline(
            "table=0,priority=10,tcp,actions=resubmit(,1),output:4,resubmit(,2),goto_table:3\n\
             table=1,priority=10,udp,actions=output:9\n\
             table=2,priority=10,tcp,actions=output:5\n",
        );
        let x = xlate(&p, &NoGroups, &tcp(1, 1, 2, 3, 4));
        assert_eq!(ops(&x), "4,5");
        assert!(x.table_miss, "table 3 missed");
        assert_eq!(
            x.chain.iter().map(|l| (l.table, l.rule.is_some())).collect::<Vec<_>>(),
            vec![(0, true), (1, false), (2, true), (3, false)]
        );
        // No rule at all: drop, table miss.
        let x = xlate(&p, &NoGroups, &FlowKey::default());
        assert!(x.ops.is_empty() && x.table_miss && x.action() == DpAction::Drop);
    }

    #[test]
    fn the_action_set_runs_at_the_end_in_the_specs_order() {
        let p = pipeline(
            "table=0,priority=10,ip,actions=write_actions(output:7,set_field:10.0.0.9->nw_dst,push_vlan:0x8100,output:8),goto_table:1\n\
             table=1,priority=10,ip,actions=output:2,write_actions(dec_ttl,strip_vlan)\n\
             table=2,priority=10,ip,actions=clear_actions\n",
        );
        let x = xlate(&p, &NoGroups, &tcp(1, 1, 2, 3, 4));
        // strip_vlan: the packet has no tag yet (the set's pop comes before its push).
        assert_eq!(ops(&x), "2,push_vlan(tpid=0x8100),dec_ttl,set(nw_dst=10.0.0.9),8");
        assert_eq!(x.final_key.nw_ttl, 63);
        assert_eq!(x.final_key.vlan_tci, VLAN_CFI);
        let p = pipeline(
            "table=0,priority=10,ip,actions=write_actions(output:7),goto_table:2\n\
             table=2,priority=10,ip,actions=clear_actions\n",
        );
        assert_eq!(ops(&xlate(&p, &NoGroups, &tcp(1, 1, 2, 3, 4))), "");
        // A group in the set wins over an output.
        let order = action_set_order(&[Action::Output(1), Action::Group(3), Action::Output(2)]);
        assert_eq!(order, vec![Action::Group(3)]);
    }

    #[test]
    fn actions_add_the_wildcards_ovs_adds() {
        let p = pipeline("priority=10,ip,actions=NORMAL,dec_ttl,output:1,in_port");
        let x = xlate(&p, &NoGroups, &tcp(1, 1, 2, 3, 4));
        let m = x.megaflow.mask;
        assert_eq!((m.dl_src, m.dl_dst, m.vlan_tci), ([0xff; 6], [0xff; 6], 0), "untagged: no VLAN bits (OVS 3.1)");
        assert_eq!(m.nw_ttl, u8::MAX);
        assert_eq!((m.nw_src, m.tp_dst), (0, 0), "nothing else");
        // output to the input port stays an op, which the executor skips (the action the
        // single-table datapath always gave); in_port sends back.
        assert_eq!(ops(&x), "NORMAL,dec_ttl,1,in_port");
        // dec_ttl at TTL 1 stops the rule's actions (not a resubmit's caller).
        let p = pipeline("table=0,priority=10,ip,actions=resubmit(,1),output:3\ntable=1,priority=1,ip,actions=output:2,dec_ttl,output:4");
        let mut k = tcp(1, 1, 2, 3, 4);
        k.nw_ttl = 1;
        assert_eq!(ops(&xlate(&p, &NoGroups, &k)), "2,ttl_expired,3");
    }

    #[test]
    fn set_field_without_its_header_is_skipped() {
        let p = pipeline("priority=10,actions=resubmit(,1)\ntable=1,priority=5,tcp,actions=output:1\ntable=1,priority=1,actions=output:2");
        let _ = p;
        // A set_field whose prerequisites the packet lacks (the parser checks the match; a
        // resubmit can bring any packet): nothing set, its header fields read.
        let mut c = OfprotoClassifier::new();
        use rqvs_classify::Classifier;
        let f = Field::by_name("tcp_dst").unwrap();
        c.insert(Rule::new(
            0,
            1,
            rqvs_flow::Match::ANY,
            Actions(vec![Action::SetField { field: f, value: 9, mask: 0xffff }, Action::Output(2)]),
        ))
        .unwrap();
        let mut k = tcp(1, 1, 2, 3, 4);
        k.nw_proto = IPPROTO_UDP;
        let x = xlate(&c, &NoGroups, &k);
        assert_eq!(ops(&x), "2");
        assert_eq!(x.final_key, k);
        assert_eq!(x.megaflow.mask.nw_proto, u8::MAX);
        k.nw_proto = IPPROTO_TCP;
        let x = xlate(&c, &NoGroups, &k);
        assert_eq!(ops(&x), "set(tcp_dst=9),2");
        assert_eq!(x.final_key.tp_dst, 9);
    }

    #[test]
    fn groups_all_indirect_select_fast_failover() {
        let g = |id: u32, kind: GroupType, buckets: Vec<Bucket>| (id, Group { id, kind, buckets });
        let b =
            |text: &str| Bucket::new(ofctl::parse_flows("b", &format!("ip,actions={text}")).unwrap().remove(0).actions);
        let mut groups: HashMap<u32, Group> = [
            g(1, GroupType::All, vec![b("set_field:00:00:00:00:00:09->eth_dst,output:2"), b("output:3")]),
            g(2, GroupType::Indirect, vec![b("output:4")]),
            g(3, GroupType::Select, vec![b("output:5"), b("output:6")]),
            g(
                4,
                GroupType::FastFailover,
                vec![Bucket { watch_port: 7, ..b("output:7") }, Bucket { watch_port: 8, ..b("output:8") }],
            ),
            g(5, GroupType::Indirect, vec![b("group:5")]),
        ]
        .into_iter()
        .collect();
        let p = pipeline("table=0,priority=10,ip,actions=group:1,output:9\ntable=0,priority=5,actions=drop");
        let x = xlate(&p, &groups, &tcp(1, 1, 2, 3, 4));
        // The rewriting bucket runs on a copy; the actions after the group see the packet as it was.
        assert_eq!(ops(&x), "clone(set(eth(dst=00:00:00:00:00:09)),2),3,9");
        assert_eq!(x.final_key.dl_dst, tcp(1, 1, 2, 3, 4).dl_dst);
        let p = pipeline("priority=10,ip,actions=group:2");
        assert_eq!(ops(&xlate(&p, &groups, &tcp(1, 1, 2, 3, 4))), "4");
        // SELECT: one bucket, the same for the same flow, both buckets over many flows; the
        // hashed fields are exact.
        let p = pipeline("priority=10,ip,actions=group:3");
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..64 {
            let x = xlate(&p, &groups, &tcp(1, i, 2, 3, 4));
            assert_eq!(x.ops.len(), 1);
            assert_eq!(x.ops, xlate(&p, &groups, &tcp(1, i, 2, 3, 4)).ops);
            seen.insert(ops(&x));
            let m = x.megaflow.mask;
            assert_eq!(
                (m.nw_src, m.nw_dst, m.tp_src, m.tp_dst, m.nw_proto),
                (u32::MAX, u32::MAX, u16::MAX, u16::MAX, u8::MAX)
            );
        }
        assert_eq!(seen.len(), 2, "{seen:?}");
        // FAST_FAILOVER: the first live bucket.
        struct Down<'a>(&'a HashMap<u32, Group>, u32);
        impl Groups for Down<'_> {
            fn group(&self, id: u32) -> Option<&Group> {
                self.0.get(&id)
            }
            fn port_live(&self, p: u32) -> bool {
                p != self.1
            }
        }
        let p = pipeline("priority=10,ip,actions=group:4");
        assert_eq!(ops(&xlate(&p, &Down(&groups, 0), &tcp(1, 1, 2, 3, 4))), "7");
        assert_eq!(ops(&xlate(&p, &Down(&groups, 7), &tcp(1, 1, 2, 3, 4))), "8");
        // A group loop: too deep, dropped and said.
        let p = pipeline("priority=10,ip,actions=output:1,group:5");
        let x = xlate(&p, &groups, &tcp(2, 1, 2, 3, 4));
        assert_eq!((x.ops.len(), x.error), (0, Some(XlateError::TooDeep)));
        groups.clear();
        assert_eq!(ops(&xlate(&p, &groups, &tcp(2, 1, 2, 3, 4))), "1", "a missing group: nothing");
    }

    #[test]
    fn resubmit_limits_drop_and_say_why() {
        // Depth: a table resubmitting to itself.
        let p = pipeline("priority=10,actions=output:1,resubmit(,0)");
        let x = xlate(&p, &NoGroups, &tcp(2, 1, 2, 3, 4));
        assert_eq!((x.ops.len(), x.error), (0, Some(XlateError::TooDeep)));
        assert_eq!(x.chain.len(), MAX_DEPTH as usize);
        // Breadth: 2^12 lookups without going deep (each rule resubmits to the next table twice).
        let text: String = (0..13)
            .map(|t| format!("table={t},priority=1,actions=resubmit(,{n}),resubmit(,{n})\n", n = t + 1))
            .collect();
        let x = xlate(&pipeline(&text), &NoGroups, &tcp(2, 1, 2, 3, 4));
        assert_eq!(x.error, Some(XlateError::TooManyResubmits));
        assert_eq!(x.chain.len(), MAX_RESUBMITS as usize);
        assert!(x.ops.is_empty());
    }

    #[test]
    fn in_port_rewrites_and_outputs() {
        let p = pipeline("table=0,priority=10,in_port=1,actions=resubmit(3,1)\ntable=1,priority=10,in_port=3,actions=output:3,output:1,in_port");
        let x = xlate(&p, &NoGroups, &tcp(1, 1, 2, 3, 4));
        // In table 1 the packet is "from port 3": output:3 dropped, output:1 goes to the real
        // ingress port (in_port), in_port to 3.
        assert_eq!(ops(&x), "in_port,3");
        assert_eq!(x.final_key.in_port, 1, "restored after the resubmit");
    }
}
