//! NuevoMatchUP's updates alone, as the CFLOWS manager makes them under a flow-mod stream:
//! builds over a rule file with an eighth of its rules held out (a fixed pseudo-random choice),
//! then in each round inserts the held-out rules and removes them again, and prints the time
//! per update and the remainder's tables. With `openflow` the rules are first converted to
//! OpenFlow flows as `rqvs bench openflow` does (port ranges expanded, each flow its own
//! `mod_dl_dst`); the held-out rules go in a fixed shuffled order, or with `grouped` in the
//! file's order (one ClassBench rule's flows one after another, as a controller pushes one ACL
//! entry). What `rqvs bench openflow --design cflows` asks of the classifier, without the
//! channel, the table of record or the twin (docs/openflow-bench.md). With `ahead` the updates
//! go in runs of 670 (the manager's change sets at acl1_500k) asking for their memory ahead as
//! the manager does (`NuevoMatchUp::prefetch_inserts`, `prefetch_removals`); with `both` the
//! rounds alternate, plain first. With `twin` the updates go ahead and a copy (the CFLOWS
//! manager's twin) then takes each round's inserts too, timed: in alternate rounds placed where
//! the first put them (`insert_placed` with `placement`, `prefetch_placed`: the twin's way) and
//! looked up by the model (`insert_placed` with none, `prefetch_inserts`), model first.
//!
//! ```sh
//! cargo run --release -p rqvs-classify --example nmu_churn -- RULES [ROUNDS=3] [openflow|classbench] [shuffled|grouped] [plain|ahead|both|twin]
//! ```

use std::time::Instant;

use rqvs_classify::{Classifier, NuevoMatchUp};
use rqvs_flow::rule::{Action, Actions};
use rqvs_flow::RuleId;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if !(2..=6).contains(&args.len()) {
        return Err(
            "usage: nmu_churn RULES [ROUNDS] [openflow|classbench] [shuffled|grouped] [plain|ahead|both|twin]".into()
        );
    }
    let mode = args.get(5).map_or("plain", String::as_str);
    if !["plain", "ahead", "both", "twin"].contains(&mode) {
        return Err(format!("nmu_churn: {mode}: expected plain, ahead, both or twin").into());
    }
    let mut rules = rqvs_flow::formats::read_rules(std::path::Path::new(&args[1]))?;
    let rounds: usize = args.get(2).map_or(Ok(3), |s| s.parse())?;
    if args.get(3).is_some_and(|a| a == "openflow") {
        rules = rqvs_flow::convert::classbench_to_openflow(&rules, &Actions(Vec::new()))?.flows;
        for (i, r) in rules.iter_mut().enumerate() {
            r.id = RuleId(i as u32);
            r.actions =
                Actions(vec![Action::SetDlDst([2, 0, 0, (i >> 16) as u8, (i >> 8) as u8, i as u8]), Action::Output(2)]);
        }
    }
    let (held, kept): (Vec<_>, Vec<_>) =
        rules.into_iter().enumerate().partition(|(i, _)| (*i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 60 < 2);
    let mut held: Vec<_> = held.into_iter().map(|(_, r)| r).collect();
    // In a fixed pseudo-random order, as the benchmark streams them (xorshift64), or in the
    // file's order (`grouped`: a ClassBench rule's flows one after another, as a controller
    // pushes one ACL entry).
    if args.get(4).is_none_or(|a| a != "grouped") {
        let mut s: u64 = 0x2545_f491_4f6c_dd1d;
        for i in (1..held.len()).rev() {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            held.swap(i, (s % (i as u64 + 1)) as usize);
        }
    }
    let kept: Vec<_> = kept.into_iter().map(|(_, r)| r).collect();
    let t = Instant::now();
    let mut nmu = NuevoMatchUp::build(&kept)?;
    println!(
        "{} rules kept, {} held out; build {:.0} ms; coverage {:.4}; remainder {} rules in {} tables",
        kept.len(),
        held.len(),
        t.elapsed().as_secs_f64() * 1e3,
        nmu.coverage(),
        nmu.remainder().len(),
        nmu.remainder().tables()
    );
    let ids: Vec<RuleId> = held.iter().map(|r| r.id).collect();
    let mut twin = (mode == "twin").then(|| nmu.clone());
    for round in 1..=rounds {
        let ahead = mode == "ahead" || mode == "twin" || (mode == "both" && round % 2 == 0);
        let t = Instant::now();
        for (run, rules) in held.chunks(RUN).enumerate() {
            for i in 0..rules.len() {
                if ahead {
                    nmu.prefetch_inserts(rules, i, |r| r);
                }
                nmu.insert(held[run * RUN + i].clone())?;
            }
        }
        let ins = t.elapsed().as_secs_f64() * 1e6 / held.len() as f64;
        let (remainder_in, tables_in) = (nmu.remainder().len(), nmu.remainder().tables());
        if let Some(twin) = twin.as_mut() {
            let placed = round % 2 == 0;
            let items: Vec<_> = held.iter().map(|r| (r, nmu.placement(r.id).filter(|_| placed))).collect();
            let t = Instant::now();
            for run in items.chunks(RUN) {
                for (i, &(r, at)) in run.iter().enumerate() {
                    if placed {
                        twin.prefetch_placed(run, i, |(r, _)| r, |&(_, at)| at);
                    } else {
                        twin.prefetch_inserts(run, i, |(r, _)| r);
                    }
                    twin.insert_placed(r, None, at)?;
                }
            }
            let us = t.elapsed().as_secs_f64() * 1e6 / held.len() as f64;
            println!(
                "round {round}: the twin's inserts ({}): {us:.2} us per rule",
                if placed { "placed" } else { "model" }
            );
            for &id in &ids {
                twin.remove_id(id);
            }
        }
        let t = Instant::now();
        for ids in ids.chunks(RUN) {
            for (i, &id) in ids.iter().enumerate() {
                if ahead {
                    nmu.prefetch_removals(ids, i);
                }
                if !nmu.remove_id(id) {
                    return Err("a held-out rule went missing".into());
                }
            }
        }
        let rem = t.elapsed().as_secs_f64() * 1e6 / held.len() as f64;
        println!(
            "round {round} ({}): insert {ins:.2} us, remove {rem:.2} us per rule; remainder {remainder_in} rules in \
             {tables_in} tables after the inserts, {} tables after the removals",
            if ahead { "ahead" } else { "plain" },
            nmu.remainder().tables()
        );
    }
    Ok(())
}

/// Updates in a run: the CFLOWS manager's change sets at acl1_500k average ~670 flows.
const RUN: usize = 670;
