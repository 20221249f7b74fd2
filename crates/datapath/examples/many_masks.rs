//! Writes many-mask traffic for a rule file: a Tuple Space Explosion of the kind the defences'
//! tests use (`tests/common/mod.rs`: one bit of a matched field flipped at a time, a key kept
//! when the slow path's wildcard tracking gives it a megaflow mask not seen before), as a pcap
//! for `rqvs replay --attack` or `--trace`.
//!
//! ```text
//! cargo run --release -p rqvs-datapath --example many_masks -- RULES OUT.pcap KEYS [SEED] [drop-only]
//! ```
//!
//! The keys are the distinct masks; the pcap repeats them in order (the mixed replay replays the
//! attack file in a loop: after the first pass every key's megaflow is installed again only if
//! a defence deleted it).

#[path = "../tests/common/mod.rs"]
mod common;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        eprintln!("usage: many_masks RULES OUT.pcap KEYS [SEED] [drop-only]");
        std::process::exit(2);
    }
    let fail = |e: String| -> ! {
        eprintln!("many_masks: {e}");
        std::process::exit(1)
    };
    let mut rules =
        rqvs_flow::formats::read_rules(std::path::Path::new(&args[0])).unwrap_or_else(|e| fail(e.to_string()));
    rqvs_datapath::assign_rule_outputs(&mut rules);
    let n: usize = args[2].parse().unwrap_or_else(|_| fail(format!("KEYS: expected a count, found '{}'", args[2])));
    let seed: u64 = args.get(3).map_or(Ok(1), |s| s.parse()).unwrap_or_else(|_| fail("SEED: expected a number".into()));
    let drop_only = args.get(4).is_some_and(|s| s == "drop-only");
    let keys = common::many_mask_keys(&rules, seed, n, drop_only);
    let (pcap, _) = rqvs_flow::formats::pcap::write_pcap(&keys, None);
    std::fs::write(&args[1], pcap).unwrap_or_else(|e| fail(format!("{}: {e}", args[1])));
    eprintln!("many_masks: {} keys with distinct megaflow masks ({} rules) -> {}", keys.len(), rules.len(), args[1]);
}
