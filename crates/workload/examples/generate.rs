//! A ClassBench-compatible rule-set from the embedded acl1 seed, a Zipf trace over it, and
//! their statistics. No data directory needed: the 12 seeds are built in.
//!
//! `cargo run --release -p rqvs-workload --example generate [SEED] [RULES]`

use rqvs_workload::rules::{self, Params};
use rqvs_workload::seedfile;
use rqvs_workload::stats::RuleStats;
use rqvs_workload::trace::{self, Locality};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let seed_name = args.next().unwrap_or_else(|| "acl1".into());
    let count: usize = args.next().as_deref().unwrap_or("1000").parse()?;

    let seed = seedfile::load(&seed_name)?;
    let set = rules::generate(&seed, &Params::new(count, 1))?;
    let s = RuleStats::of(&set.rules)?;
    println!(
        "{seed_name}: {} rules ({} asked), {} distinct tuples, {} source and {} destination prefixes",
        set.rules.len(),
        count,
        s.tuples,
        s.src_prefixes,
        s.dst_prefixes
    );

    let (packets, t) = trace::generate(&set.rules, &trace::Params::new(10_000, Locality::parse("zipf:1.1")?, 1))?;
    println!(
        "trace: {} packets, {} flows, top flow {:.1}% of packets, {} rules hit, true winner ≠ intended for {}",
        t.packets,
        t.flows,
        t.top_share * 100.0,
        t.rules_hit,
        t.intended_differs
    );
    assert_eq!(packets.len(), t.packets);
    Ok(())
}
