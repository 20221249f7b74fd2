//! Mapping a real capture onto a rule-set (the method of NSDI'22 §7.1).
//!
//! Each distinct IPv4 5-tuple (source, destination, protocol, ports) of the capture, in order of
//! first appearance, is assigned a rule chosen uniformly at random and rewritten to a header
//! drawn uniformly inside that rule ([`crate::trace::header_inside`]). Up to `attempts` headers
//! are drawn until one's true winner *is* that rule; a flow for which none is found keeps the last
//! header and counts as **unplaced** (its packets still exist, their winner is another rule). Every
//! packet of the flow gets the flow's new 5-tuple, so the capture's packet order, count and
//! timestamps — its temporal locality — are kept.
//!
//! Per packet: the 5-tuple is replaced; the TCP flag byte is the packet's own (0 if it was not
//! TCP) with the bits the rule matches forced to the rule's value; with `syn`, SYN is set on TCP
//! packets (as the paper did) unless the rule requires it clear (counted as `syn_refused`);
//! fragment bits are cleared; L2 fields, `in_port` and TOS are kept. Non-IPv4 frames are copied
//! unchanged. The output is rebuilt as minimal frames ([`build_frame`], no payload): the paper's
//! method rewrites headers only, and rqvs reads nothing past them.
//!
//! Winners are computed on what the frames carry ([`FlowKey::wire`]); `packets_off_target` counts
//! packets whose true winner is not their flow's rule (unplaced flows, and TCP flag bytes that let a
//! higher-priority flag-matching rule win for some packets of a flow).
//!
//! [`build_frame`]: rqvs_flow::frame::build_frame

use hashbrown::HashMap;
use rqvs_classify::{Classifier, TupleMerge};
use rqvs_flow::formats::pcap::Capture;
use rqvs_flow::key::{ETH_TYPE_IP, IPPROTO_TCP};
use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::rng::Rng;
use crate::trace::header_inside;

/// TCP SYN in the flag byte.
pub const TCP_SYN: u16 = 0x02;

/// How to map.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub rng_seed: u64,
    /// Set SYN on every TCP packet.
    pub syn: bool,
    /// Headers tried per flow before it counts as unplaced.
    pub attempts: usize,
}

impl Params {
    pub fn new(rng_seed: u64) -> Params {
        Params { rng_seed, syn: false, attempts: 16 }
    }
}

/// What the mapping did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub packets: usize,
    /// IPv4 packets rewritten.
    pub rewritten: usize,
    /// Non-IPv4 packets copied unchanged.
    pub copied: usize,
    /// Distinct IPv4 5-tuples.
    pub flows: usize,
    /// Flows whose header's true winner is their rule.
    pub placed: usize,
    pub unplaced: usize,
    /// Rewritten packets whose true winner is not their flow's rule.
    pub packets_off_target: usize,
    /// TCP packets left without SYN because their rule requires it clear (with `syn`).
    pub syn_refused: usize,
}

/// One packet of the output: its key and the rule its flow was mapped to (None: copied).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapped {
    pub key: FlowKey,
    pub rule: Option<RuleId>,
}

type FiveTuple = (u32, u32, u8, u16, u16);

/// Maps `capture` onto `rules`; the output has one key per captured key, in order.
pub fn map_capture(rules: &[Rule], capture: &Capture, params: &Params) -> Result<(Vec<Mapped>, Report), String> {
    let mut m = Mapper::new(rules, params)?;
    let out = capture.keys.iter().map(|k| m.map(k)).collect();
    Ok((out, m.report()))
}

/// The mapping packet by packet, for a capture read as a stream: memory grows with the
/// capture's distinct flows (each keeps its header and rule: every packet of a flow must get the
/// same), not with its packets.
pub struct Mapper<'r> {
    rules: &'r [Rule],
    params: Params,
    tm: TupleMerge,
    by_id: HashMap<RuleId, &'r Rule>,
    rng: Rng,
    flows: HashMap<FiveTuple, (FlowKey, RuleId)>,
    report: Report,
}

impl<'r> Mapper<'r> {
    pub fn new(rules: &'r [Rule], params: &Params) -> Result<Mapper<'r>, String> {
        if rules.is_empty() {
            return Err("expected at least one rule to map flows onto".into());
        }
        let tm = TupleMerge::build(rules).map_err(|e| format!("cannot build the classifier: {e}"))?;
        let by_id: HashMap<RuleId, &Rule> = rules.iter().map(|r| (r.id, r)).collect();
        Ok(Mapper {
            rules,
            params: *params,
            tm,
            by_id,
            rng: Rng::new(params.rng_seed),
            flows: HashMap::new(),
            report: Report::default(),
        })
    }

    /// The next packet of the capture, mapped.
    pub fn map(&mut self, orig: &FlowKey) -> Mapped {
        let (rules, params, report) = (self.rules, self.params, &mut self.report);
        report.packets += 1;
        if orig.dl_type != ETH_TYPE_IP {
            report.copied += 1;
            return Mapped { key: *orig, rule: None };
        }
        let tuple = (orig.nw_src, orig.nw_dst, orig.nw_proto, orig.tp_src, orig.tp_dst);
        let (header, rule_id) = match self.flows.get(&tuple) {
            Some(&f) => f,
            None => {
                let rule = &rules[self.rng.below(rules.len() as u64) as usize];
                let mut chosen = None;
                let mut last = None;
                for _ in 0..params.attempts.max(1) {
                    let h = header_inside(&rule.matches, &mut self.rng);
                    let probe = rewrite(orig, &h, rule, params.syn, &mut 0).wire();
                    last = Some(h);
                    if self.tm.lookup(&probe) == Some(rule.id) {
                        chosen = Some(h);
                        break;
                    }
                }
                match chosen {
                    Some(_) => report.placed += 1,
                    None => report.unplaced += 1,
                }
                let h = chosen.or(last).expect("at least one attempt");
                self.flows.insert(tuple, (h, rule.id));
                (h, rule.id)
            }
        };
        let rule = self.by_id[&rule_id];
        let key = rewrite(orig, &header, rule, params.syn, &mut report.syn_refused).wire();
        report.rewritten += 1;
        if self.tm.lookup(&key) != Some(rule_id) {
            report.packets_off_target += 1;
        }
        Mapped { key, rule: Some(rule_id) }
    }

    /// What the mapping did so far.
    pub fn report(&self) -> Report {
        Report { flows: self.flows.len(), ..self.report.clone() }
    }
}

fn rewrite(orig: &FlowKey, h: &FlowKey, rule: &Rule, syn: bool, syn_refused: &mut usize) -> FlowKey {
    let mut k = *orig;
    k.nw_src = h.nw_src;
    k.nw_dst = h.nw_dst;
    k.nw_proto = h.nw_proto;
    k.tp_src = h.tp_src;
    k.tp_dst = h.tp_dst;
    k.nw_frag = 0;
    if h.nw_proto == IPPROTO_TCP {
        let (v, m) = (rule.matches.value().tcp_flags, rule.matches.mask().tcp_flags);
        let own = if orig.nw_proto == IPPROTO_TCP { orig.tcp_flags } else { 0 };
        k.tcp_flags = (own & !m) | (v & m);
        if syn {
            if m & TCP_SYN != 0 && v & TCP_SYN == 0 {
                *syn_refused += 1;
            } else {
                k.tcp_flags |= TCP_SYN;
            }
        }
    } else {
        k.tcp_flags = 0;
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_flow::formats::classbench::parse_rules;

    #[test]
    fn order_count_and_flows_are_kept() {
        let rules = parse_rules(
            "t",
            "@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0000/0x0000\t\n\
             @0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x11/0xFF\t0x0000/0x0000\t\n\
             @0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x06/0xFF\t0x0000/0x1200\t\n",
        )
        .unwrap();
        let a = FlowKey::ipv4(1, 2, 6, 1000, 80);
        let b = FlowKey::ipv4(3, 4, 17, 53, 53);
        let mut arp = FlowKey::default();
        arp.dl_type = 0x0806;
        let cap =
            Capture { keys: vec![a, b, a, arp, b, a], timestamps_ns: vec![1, 2, 3, 4, 5, 6], ..Capture::default() };
        let mut p = Params::new(1);
        p.syn = true;
        let (out, rep) = map_capture(&rules, &cap, &p).unwrap();
        assert_eq!(out.len(), 6);
        assert_eq!((rep.flows, rep.copied, rep.rewritten), (2, 1, 5));
        assert_eq!(out[3].key, arp);
        assert_eq!(out[0], out[2]);
        assert_eq!(out[0], out[5]);
        assert_eq!(out[1], out[4]);
        for m in &out {
            if let Some(id) = m.rule {
                assert!(rules[id.0 as usize].matches.matches(&m.key));
            }
        }
        // rule 2 requires SYN and ACK clear: SYN is refused there, set elsewhere
        for m in &out {
            if m.key.nw_proto == IPPROTO_TCP {
                let want_syn = m.rule != Some(RuleId(2));
                assert_eq!(m.key.tcp_flags & TCP_SYN != 0, want_syn, "{m:?}");
            }
        }
    }
}
