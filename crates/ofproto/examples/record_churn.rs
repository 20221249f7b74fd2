//! The table of record under a stream of single flow-mods, as `rqvs bench openflow` sends them:
//! a ClassBench set with a tenth of its rules held out, then adds of held-out rules and strict
//! deletes of present ones in turn, in runs of 256 flow-mods a transaction (each kept with its
//! net change, as the connection keeps a run). Prints the time per flow-mod of each round.
//! docs/openflow-bench.md, "The table of record's index by hash" and "The connection's share".
//! MODE: `ahead` (default) applies each run as the switch does
//! ([`Txn::apply_run`](rqvs_ofproto::record::Txn::apply_run)), `plain` with
//! [`Txn::apply`](rqvs_ofproto::record::Txn::apply) alone, `both` alternates pairs of rounds.
//!
//!     cargo run --release -p rqvs-ofproto --example record_churn -- RULES [FLOW_MODS] [ROUNDS] [MODE]
use rqvs_flow::{Actions, Rule};
use rqvs_ofproto::record::{FlowFilter, FlowOp, FlowTable};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).ok_or("usage: record_churn RULES [FLOW_MODS] [ROUNDS]")?;
    let n_ops: usize = args.get(2).map_or(Ok(100_000), |a| a.parse())?;
    let rounds: usize = args.get(3).map_or(Ok(3), |a| a.parse())?;
    let mode = args.get(4).map_or("ahead", String::as_str);
    if !["ahead", "plain", "both"].contains(&mode) {
        return Err(format!("MODE {mode}: expected ahead, plain or both").into());
    }
    let mut rules = rqvs_flow::formats::read_rules(std::path::Path::new(path))?;
    for r in &mut rules {
        r.actions = Actions::output(2);
    }
    let (mut present, mut held): (Vec<Rule>, Vec<Rule>) = (Vec::new(), Vec::new());
    for (i, r) in rules.into_iter().enumerate() {
        if i % 10 == 0 {
            held.push(r)
        } else {
            present.push(r)
        }
    }
    let mut t = FlowTable::new(present.clone());
    let strict = |r: &Rule| {
        FlowOp::Delete(FlowFilter {
            matches: Some(r.matches),
            strict: Some(r.priority),
            table: Some(0),
            ..FlowFilter::all()
        })
    };
    let (mut a, mut d) = (0usize, 0usize);
    for round in 0..rounds {
        let ops: Vec<FlowOp> = (0..n_ops)
            .map(|i| {
                if i % 2 == 0 {
                    a += 1;
                    FlowOp::add(held[(a - 1) % held.len()].clone())
                } else {
                    d += 1;
                    strict(&present[(d - 1) % present.len()])
                }
            })
            .collect();
        // `both`: rounds alternate between the table's two sizes, so the modes alternate by pairs.
        let ahead = mode == "ahead" || (mode == "both" && (round / 2) % 2 == 1);
        let t0 = std::time::Instant::now();
        let mut applied = 0usize;
        for run in ops.chunks(256) {
            let mut x = t.txn(0);
            if ahead {
                x.apply_run(run, |e| {
                    applied += usize::from(e.is_ok());
                    true
                });
            } else {
                for op in run {
                    applied += usize::from(x.apply(op).is_ok());
                }
            }
            std::hint::black_box(x.keep_undoable_net());
        }
        let ns = t0.elapsed().as_secs_f64() * 1e9 / n_ops as f64;
        let how = if ahead { "ahead" } else { "plain" };
        println!("round {round} ({how}): {n_ops} flow-mods ({applied} applied) on {} flows: {ns:.0} ns each", t.len());
        // The next round adds back what this one deleted and deletes what it added.
        std::mem::swap(&mut present, &mut held);
        (a, d) = (0, 0);
    }
    Ok(())
}
