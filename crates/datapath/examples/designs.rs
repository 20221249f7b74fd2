//! The three datapath designs (ORIG, CCACHE, CFLOWS) over the same rules and packets, each
//! packet's action checked against the winning rule's; prints where the packets were served.
//!
//! `cargo run --release -p rqvs-datapath --example designs`

use rqvs_classify::{Classifier, Reference};
use rqvs_datapath::design::DesignKind;
use rqvs_datapath::{pmd, Ccache, Cflows, DatapathConfig, Design, Orig};
use rqvs_flow::{formats, FlowKey};
use rqvs_ofproto::DpAction;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1,000 rules: TCP to one port of one destination /24 each, then a default route.
    let mut text = String::new();
    for i in 0..1000u32 {
        let (net, port) = (i / 10, 1000 + i % 10);
        text += &format!("priority=10,tcp,nw_dst=10.0.{net}.0/24,tp_dst={port},actions=output:{}\n", 2 + i % 8);
    }
    text += "priority=1,ip,actions=output:1\n";
    let rules = formats::parse_rules("generated", &text)?;

    // 20,000 packets of 2,000 flows.
    let keys: Vec<FlowKey> = (0..20_000u32)
        .map(|i| {
            let f = (i * 7919) % 2000;
            FlowKey::ipv4(
                0xc0a8_0000 | f,
                0x0a00_0000 | ((f % 100) << 8) | (f % 250),
                6,
                5000 + (f % 3) as u16,
                1000 + (f % 12) as u16,
            )
        })
        .collect();
    let reference = Reference::build(&rules)?;

    for kind in [DesignKind::Orig, DesignKind::Ccache, DesignKind::Cflows] {
        let cfg = DatapathConfig::default();
        let mut dp: Box<dyn Design> = match kind {
            DesignKind::Orig => Box::new(Orig::new(&rules, cfg, Default::default())?),
            DesignKind::Ccache => Box::new(Ccache::new(&rules, cfg, Default::default(), Default::default())?),
            DesignKind::Cflows => Box::new(Cflows::new(&rules, cfg, Default::default())?),
            DesignKind::Auto => continue,
        };
        let actions = pmd::run_keys(dp.as_mut(), &keys);
        let wrong = keys
            .iter()
            .zip(&actions)
            .filter(|(k, a)| **a != DpAction::of_rule(reference.lookup(k).and_then(|id| rules.get(id.0 as usize))))
            .count();
        let c = dp.counters();
        println!(
            "{:7} packets {} emc {} megaflow {} model {} remainder {} upcalls {} mismatches {wrong}",
            dp.name(),
            c.received,
            c.emc_hit,
            c.megaflow_hit,
            c.model_hit,
            c.remainder_hit,
            c.upcall
        );
        assert_eq!(wrong, 0);
    }
    Ok(())
}
