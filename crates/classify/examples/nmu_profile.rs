//! A lookup loop to profile under `perf record`: builds TupleMerge and NuevoMatchUP over a rule
//! file, checks them against each other on every packet, then runs batched lookups of one
//! classifier for a while and prints its rate. Nothing else runs in the process, so a profile
//! of it is the lookup path alone (`docs/wide-key-bench.md`, "Where the time goes").
//!
//! ```sh
//! cargo build --release -p rqvs-classify --example nmu_profile
//! perf record -o nmu.data target/release/examples/nmu_profile RULES TRACE nmu 5
//! perf report -i nmu.data --no-children
//! ```
//!
//! Arguments: rule file (ofctl or ClassBench), packet file (pcap or ClassBench trace), the
//! classifier to loop (`tm`, `nmu`, `both`: alternating rounds, reporting each; or `pairs`: one
//! pass of each in turn, reporting the median ratio of the pairs' rates), seconds. A mode ending
//! in `1` (`tm1`, `nmu1`, `both1`, `pairs1`) looks the keys up one at a time
//! (`Classifier::lookup_narrow`, as `rqvs bench classifiers`' one-key column) instead of in
//! batches of 32.

use std::time::{Duration, Instant};

use rqvs_classify::{Classifier, NuevoMatchUp, TupleMerge, BATCH};
use rqvs_flow::formats::packets::PacketReader;
use rqvs_flow::key::NarrowKey;
use rqvs_flow::{FlowKey, RuleId};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        return Err("usage: nmu_profile RULES TRACE tm|nmu|both|pairs[1] SECONDS".into());
    }
    let rules = rqvs_flow::formats::read_rules(std::path::Path::new(&args[1]))?;
    let mut reader = PacketReader::open(std::path::Path::new(&args[2]), 0)?;
    let mut keys: Vec<FlowKey> = Vec::new();
    while let Some(p) = reader.next_packet()? {
        keys.push(p.entry.key);
    }
    let narrow: Option<Vec<NarrowKey>> = keys.iter().map(|k| k.narrow()).collect();
    let secs: f64 = args[4].parse()?;
    let t = Instant::now();
    let tm = TupleMerge::build(&rules)?;
    let tm_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let nmu = NuevoMatchUp::build(&rules)?;
    let nmu_ms = t.elapsed().as_secs_f64() * 1e3;
    println!(
        "{} rules, {} packets ({}); build tm {tm_ms:.0} ms, nmu {nmu_ms:.0} ms; nmu coverage {:.4}, fields {:?}, \
         pre-filters {:?}",
        rules.len(),
        keys.len(),
        if narrow.is_some() { "narrow" } else { "wide" },
        nmu.coverage(),
        nmu.iset_fields().iter().map(|f| f.name()).collect::<Vec<_>>(),
        nmu.iset_prefilters().iter().map(|p| [p[0].name(), p[1].name()]).collect::<Vec<_>>()
    );
    for (tuple, n, max_priority) in nmu.remainder().table_summary() {
        println!("remainder table: {n} rules, max priority {max_priority}, tuple {tuple:?}");
    }
    for (name, c) in [("tm", &tm as &dyn Classifier), ("nmu", &nmu)] {
        let parts: Vec<String> =
            c.memory_breakdown().iter().map(|(k, b)| format!("{k}={:.0}", *b as f64 / rules.len() as f64)).collect();
        println!("{name} bytes/rule {:.0}: {}", c.memory_bytes() as f64 / rules.len() as f64, parts.join(" "));
    }
    let mut a = vec![None; keys.len()];
    let mut b = vec![None; keys.len()];
    run(&tm, &keys, narrow.as_deref(), &mut a, false);
    run(&nmu, &keys, narrow.as_deref(), &mut b, false);
    let diff = a.iter().zip(&b).filter(|(x, y)| x != y).count();
    run(&nmu, &keys, narrow.as_deref(), &mut b, true);
    let diff = diff + a.iter().zip(&b).filter(|(x, y)| x != y).count();
    println!("tm vs nmu (nmu in batches and one key at a time): {diff} differences over {} packets", keys.len());
    if diff != 0 {
        return Err("the classifiers disagree".into());
    }
    let (which, single) = match args[3].strip_suffix('1') {
        Some(w) => (w, true),
        None => (args[3].as_str(), false),
    };
    let how = if single { "one key at a time" } else { "in batches" };
    if which == "pairs" {
        // One pass of each in turn; the ratio of each pair's rates, so that the machine's
        // slower and faster moments cancel (TupleMerge is the yardstick).
        let t = Instant::now();
        let mut ratios = Vec::new();
        while t.elapsed() < Duration::from_secs_f64(secs) || ratios.len() < 5 {
            let mut took = [0.0; 2];
            for (i, c) in [&tm as &dyn Classifier, &nmu].into_iter().enumerate() {
                let p = Instant::now();
                run(c, &keys, narrow.as_deref(), &mut a, single);
                took[i] = p.elapsed().as_secs_f64();
            }
            ratios.push(took[0] / took[1]);
        }
        ratios.sort_by(f64::total_cmp);
        let q = |f: f64| ratios[((ratios.len() - 1) as f64 * f).round() as usize];
        println!(
            "nmu/tm {how} over {} pairs of passes: median {:.3} (quartiles {:.3}-{:.3})",
            ratios.len(),
            q(0.5),
            q(0.25),
            q(0.75)
        );
        return Ok(());
    }
    let rounds = if which == "both" { 6 } else { 1 };
    let per = Duration::from_secs_f64(secs / rounds as f64);
    for r in 0..rounds {
        for (name, c) in [("tm", &tm as &dyn Classifier), ("nmu", &nmu)] {
            if which != "both" && which != name {
                continue;
            }
            let t = Instant::now();
            let mut passes = 0u64;
            while t.elapsed() < per || passes == 0 {
                run(c, &keys, narrow.as_deref(), &mut a, single);
                passes += 1;
            }
            let mpps = (passes * keys.len() as u64) as f64 / t.elapsed().as_secs_f64() / 1e6;
            println!("round {r} {name}: {mpps:.3} Mpps {how}");
        }
    }
    Ok(())
}

fn run(c: &dyn Classifier, keys: &[FlowKey], narrow: Option<&[NarrowKey]>, out: &mut [Option<RuleId>], single: bool) {
    match narrow {
        Some(n) if single => {
            for (k, o) in n.iter().zip(out.iter_mut()) {
                *o = c.lookup_narrow(k);
            }
        }
        None if single => {
            for (k, o) in keys.iter().zip(out.iter_mut()) {
                *o = c.lookup(k);
            }
        }
        Some(n) => {
            for (k, o) in n.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
                c.lookup_batch_narrow(k, o);
            }
        }
        None => {
            for (k, o) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
                c.lookup_batch(k, o);
            }
        }
    }
}
