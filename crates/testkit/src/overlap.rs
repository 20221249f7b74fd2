//! A rule-set whose rules overlap (a /24 source and a port range each, plus a catch-all) and
//! packets that hit it: the fixtures of the datapath's and the ofproto layer's unit tests.

use rqvs_flow::{Actions, FlowKey, Rule};

/// `n` TCP rules `10.a.b.0/24 → any, dport 1000+i..2000+i`, then a catch-all, with distinct outputs.
pub fn rules(n: usize) -> Vec<Rule> {
    let text: String = (0..n)
        .map(|i| {
            format!(
                "@10.{}.{}.0/24\t0.0.0.0/0\t0 : 65535\t{} : {}\t0x06/0xFF\t0x0000/0x0000\t\n",
                i / 250,
                i % 250,
                1000 + i,
                2000 + i
            )
        })
        .chain(std::iter::once("@0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000\t\n".into()))
        .collect();
    let mut r = rqvs_flow::formats::classbench::parse_rules("t", &text).unwrap();
    // Distinct outputs: `output:(id + 1)`, as `rqvs_datapath::assign_rule_outputs` gives.
    for x in r.iter_mut() {
        x.actions = Actions::output(x.id.0 + 1);
    }
    r
}

/// `n` packets over ~4,500 distinct flows (so caches hit), shuffled by `salt`.
pub fn keys(n: usize, salt: u32) -> Vec<FlowKey> {
    (0..n as u32)
        .map(|i| {
            let j = i.wrapping_mul(2_654_435_761).wrapping_add(salt) % 1500;
            let mut k = FlowKey::ipv4(
                0x0a00_0000 | ((j % 1000 / 250) << 16) | ((j % 250) << 8) | (i % 3),
                0x0b00_0001,
                6,
                1234,
                (1000 + j) as u16,
            );
            k.in_port = 1;
            k
        })
        .collect()
}

/// `n` packets in the manner of a Tuple Space Explosion attack: flows of [`keys`], each with one
/// bit of its source address or destination port flipped (a different bit packet by packet), so
/// that the slow path's wildcard tracking gives their megaflows many distinct masks.
pub fn attack_keys(n: usize, salt: u32) -> Vec<FlowKey> {
    keys(n, salt)
        .into_iter()
        .enumerate()
        .map(|(i, mut k)| {
            let b = (i as u32).wrapping_mul(7).wrapping_add(salt) % 48;
            if b < 32 {
                k.nw_src ^= 1 << b;
            } else {
                k.tp_dst ^= 1 << (b - 32);
            }
            k
        })
        .collect()
}
