//! Many-mask traffic for the defences' tests (and `examples/tse_mix.rs`): keys crafted, as a
//! Tuple Space Explosion attacker with knowledge of the rules would, so that each makes the slow
//! path install a megaflow with a mask no earlier key made.
//!
//! Starting from one key per rule (its match's value, ports at the low end of its ranges), a key
//! of the pool gets one bit of a matched field flipped (source or destination address, source or
//! destination port) or its protocol swapped (TCP/UDP); the result is kept when the OpenFlow
//! table's wildcard tracking ([`OfprotoTable`]'s classification, the datapath's own slow path)
//! gives it a megaflow mask not seen yet, and joins the pool. With `drop_only`, only keys the
//! table drops are kept (TSE against an "allow a few, drop the rest" policy: the masks MFCGuard
//! deletes).

#![allow(dead_code)]

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rqvs_flow::{FlowKey, Rule};
use rqvs_ofproto::{DpAction, OfprotoTable};
use std::collections::HashSet;

/// Up to `n` keys, each with a megaflow mask of its own (fewer when the search runs dry).
pub fn many_mask_keys(rules: &[Rule], seed: u64, n: usize, drop_only: bool) -> Vec<FlowKey> {
    let table = OfprotoTable::build(rules).expect("rules the table takes");
    let t = table.read();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut pool: Vec<FlowKey> = rules
        .iter()
        .map(|r| {
            let m = &r.matches;
            let mut k = *m.value();
            k.dl_type = 0x0800;
            if k.nw_proto != 6 && k.nw_proto != 17 {
                k.nw_proto = 6;
            }
            k.tp_src = m.tp_src_range().lo;
            k.tp_dst = m.tp_dst_range().lo;
            k.in_port = 1;
            k
        })
        .collect();
    if pool.is_empty() {
        pool.push(FlowKey::ipv4(0x0a00_0001, 0x0b00_0001, 6, 1, 1));
    }
    let mut seen: HashSet<FlowKey> = HashSet::new();
    let mut out = Vec::new();
    let mut tries = 0;
    while out.len() < n && tries < 400 * n + 10_000 {
        tries += 1;
        let mut k = pool[rng.random_range(0..pool.len())];
        match rng.random_range(0..9) {
            0..=2 => k.nw_src ^= 1 << rng.random_range(0..32),
            3..=5 => k.nw_dst ^= 1 << rng.random_range(0..32),
            6 => k.tp_src ^= 1 << rng.random_range(0..16),
            7 => k.tp_dst ^= 1 << rng.random_range(0..16),
            _ => k.nw_proto = if k.nw_proto == 6 { 17 } else { 6 },
        }
        let v = t.classify(&k.wire());
        if drop_only && v.action != DpAction::Drop {
            pool.push(k);
            continue;
        }
        if seen.insert(v.megaflow.mask) {
            out.push(k);
            pool.push(k);
        }
    }
    out
}

/// `benign` with `attack` interleaved: one attack key after every `every` benign keys (the
/// attack's left-overs at the end are dropped).
pub fn interleave(benign: &[FlowKey], attack: &[FlowKey], every: usize) -> Vec<FlowKey> {
    let mut a = attack.iter();
    let mut out = Vec::with_capacity(benign.len() + attack.len());
    for (i, k) in benign.iter().enumerate() {
        out.push(*k);
        if (i + 1) % every.max(1) == 0 {
            if let Some(x) = a.next() {
                out.push(*x);
            }
        }
    }
    out
}

/// `n` random rules over a few address blocks, ports and protocols (prefixes and port ranges of
/// several lengths, so lookups examine varied bits), a third of them dropping, no catch-all
/// (unmatched packets drop too).
pub fn random_rules(rng: &mut StdRng, n: usize) -> Vec<Rule> {
    use rqvs_flow::matching::PortRange;
    use rqvs_flow::{Actions, Match};
    const BASES: [u32; 4] = [0x0a00_0000, 0x0a01_0200, 0xc0a8_0000, 0xc0a8_0180];
    const PLENS: [u32; 6] = [0, 8, 16, 24, 28, 32];
    let prefix = |p: u32| if p == 0 { 0 } else { u32::MAX << (32 - p) };
    let ranges =
        [PortRange::ANY, PortRange::exact(80), PortRange::new(1024, 65535).unwrap(), PortRange::new(80, 90).unwrap()];
    let mut rules: Vec<Rule> = (0..n)
        .map(|i| {
            let (mut v, mut m) = (FlowKey::default(), FlowKey::default());
            v.dl_type = 0x0800;
            m.dl_type = 0xffff;
            m.nw_src = prefix(PLENS[rng.random_range(0..PLENS.len())]);
            v.nw_src = BASES[rng.random_range(0..BASES.len())] & m.nw_src;
            m.nw_dst = prefix(PLENS[rng.random_range(0..PLENS.len())]);
            v.nw_dst = BASES[rng.random_range(0..BASES.len())] & m.nw_dst;
            let (mut src, mut dst) = (PortRange::ANY, PortRange::ANY);
            if rng.random_bool(0.7) {
                v.nw_proto = [6, 17][rng.random_range(0..2)];
                m.nw_proto = 0xff;
                src = ranges[rng.random_range(0..ranges.len())];
                dst = ranges[rng.random_range(0..ranges.len())];
            }
            let matches = Match::new(v, m, src, dst).unwrap();
            Rule::new(i as u32, rng.random_range(0..20), matches, Actions::drop())
        })
        .collect();
    rqvs_datapath::assign_rule_outputs(&mut rules);
    for r in rules.iter_mut().filter(|r| r.id.0 % 3 == 0) {
        r.actions = Actions::drop();
    }
    rules
}

/// `n` packets drawn from a pool of `pool` random flows near the rules' address blocks.
pub fn random_packets(rng: &mut StdRng, pool: usize, n: usize) -> Vec<FlowKey> {
    const BASES: [u32; 4] = [0x0a00_0000, 0x0a01_0200, 0xc0a8_0000, 0xc0a8_0180];
    const PORTS: [u16; 5] = [53, 80, 85, 443, 40000];
    let pool: Vec<FlowKey> = (0..pool)
        .map(|_| {
            let mut k = FlowKey::ipv4(
                BASES[rng.random_range(0..BASES.len())] | (rng.random::<u32>() >> rng.random_range(8..32)),
                BASES[rng.random_range(0..BASES.len())] | (rng.random::<u32>() >> rng.random_range(8..32)),
                [6, 17][rng.random_range(0..2)],
                PORTS[rng.random_range(0..PORTS.len())],
                PORTS[rng.random_range(0..PORTS.len())],
            );
            k.in_port = 1;
            k
        })
        .collect();
    (0..n).map(|_| pool[rng.random_range(0..pool.len())]).collect()
}
