//! `rqvs replay`: a trace through a datapath design, as fast as the PMD takes it.
//!
//! ```text
//! rqvs replay --rules FILE --trace FILE --design orig [--cd] [--emc-prob P | --no-emc]
//!             [--duration S] [--updates SPEC] [--verify N] [--json OUT] [--plot OUT.svg]
//! ```
//!
//! - **Rules.** ClassBench files go to the slow path as they are (the OpenFlow classifier expands
//!   port ranges itself, with u32 priorities, so 100K/500K sets need no 16-bit priority layering),
//!   and every rule gets the action `output:(id+1)` ([`rqvs_datapath::assign_rule_outputs`]), so
//!   an action mismatch always means a wrong rule. ovs-ofctl files keep their actions.
//! - **Time** is PMD time: the measured time of the PMD's batches and of the upcalls it handles
//!   (OVS-DPDK's PMD handles its own upcalls); revalidation after rule updates and periodic sweeps
//!   are not PMD time (another core in OVS). Throughput is packets / PMD time. The trace is
//!   replayed in a loop until `--duration` seconds of PMD time (default: one pass).
//! - **Time series**: a sample every 100 ms of PMD time: throughput, upcalls/s, deletions/s,
//!   megaflows, masks.
//! - **Updates** (`--updates add:60@7s,del:10@9s`): `add:N@Ts` holds N rules out of the initial
//!   table — chosen at random (seed `--seed`) among all rules, so they interleave in priority with
//!   the rest — and inserts them when the PMD clock reaches T; `del:N@Ts` removes N random
//!   installed rules at T. Each update is followed by revalidation of every megaflow.
//! - **Verification**: `--verify N` trace positions are sampled (seed `--seed`); the action each
//!   gets is recorded once per table version (between updates) and compared, after the run, with
//!   the reference classifier's winning rule for that table. Mismatches are printed next to the
//!   throughput; any makes the exit code 1.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rqvs_classify::ofproto::wire_key;
use rqvs_classify::Reference;
use rqvs_datapath::pmd::{Clock, Config};
use rqvs_datapath::{assign_rule_outputs, Counters, Datapath, DpAction, BATCH};
use rqvs_flow::formats::{self, RuleFormat};
use rqvs_flow::{FlowKey, Rule, RuleId};

use crate::{inputs, Failure};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Rule file: ClassBench or ovs-ofctl flows, plain or .xz.
    #[arg(long)]
    pub rules: PathBuf,
    /// ClassBench trace or pcap/pcapng capture, plain or .xz.
    #[arg(long)]
    pub trace: PathBuf,
    /// Datapath design.
    #[arg(long, default_value = "orig", value_parser = ["orig"])]
    pub design: String,
    /// Enable the cuckoo distributor.
    #[arg(long)]
    pub cd: bool,
    /// EMC insertion probability (OVS default 0.01; the paper used 0.2).
    #[arg(long, default_value_t = 0.01)]
    pub emc_prob: f64,
    /// Disable the EMC.
    #[arg(long)]
    pub no_emc: bool,
    /// Replay the trace in a loop until this many seconds of PMD time (default: one pass).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Rule updates, e.g. 'add:60@7s' or 'add:60@7s,del:10@9s'.
    #[arg(long)]
    pub updates: Option<String>,
    /// Trace positions whose actions are checked against the reference (default 10,000; 2,000
    /// above 100,000 rules).
    #[arg(long)]
    pub verify: Option<usize>,
    /// Seed for held-out rules, verification sample and EMC insertion draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Megaflow flow limit.
    #[arg(long, default_value_t = 200_000)]
    pub flow_limit: usize,
    /// Idle expiry of megaflows, seconds of PMD time.
    #[arg(long, default_value_t = 10.0)]
    pub idle: f64,
    /// in_port given to trace packets.
    #[arg(long, default_value_t = 1)]
    pub in_port: u32,
    /// Write a JSON report here ('-' = stdout).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write an SVG plot of the time series here.
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum UpdateOp {
    Add,
    Del,
}

#[derive(Clone, Debug)]
struct Update {
    op: UpdateOp,
    n: usize,
    at_ns: u64,
    rules: Vec<Rule>,
}

/// Parses `add:60@7s,del:10@9.5s` (seconds; `ms` also accepted).
fn parse_updates(spec: &str) -> Result<Vec<Update>, Failure> {
    let mut out = Vec::new();
    for (i, part) in spec.split(',').enumerate() {
        let err =
            |what: &str| Failure(format!("--updates: item {} '{part}': expected {what} (e.g. 'add:60@7s')", i + 1));
        let (op, rest) = part.split_once(':').ok_or_else(|| err("OP:N@TIME"))?;
        let op = match op.trim() {
            "add" => UpdateOp::Add,
            "del" => UpdateOp::Del,
            _ => return Err(err("operation 'add' or 'del'")),
        };
        let (n, t) = rest.split_once('@').ok_or_else(|| err("N@TIME"))?;
        let n: usize = n.trim().parse().map_err(|_| err("a rule count"))?;
        let t = t.trim();
        let secs: f64 = if let Some(ms) = t.strip_suffix("ms") {
            ms.parse::<f64>().map_err(|_| err("a time like 7s or 500ms"))? / 1e3
        } else {
            t.strip_suffix('s').unwrap_or(t).parse().map_err(|_| err("a time like 7s or 500ms"))?
        };
        if !(secs >= 0.0 && secs.is_finite()) {
            return Err(err("a non-negative time"));
        }
        out.push(Update { op, n, at_ns: (secs * 1e9) as u64, rules: Vec::new() });
    }
    out.sort_by_key(|u| u.at_ns);
    Ok(out)
}

/// Rules from a ClassBench file (with `output:(id+1)` actions) or an ofctl file.
fn load_rules(path: &Path) -> Result<(Vec<Rule>, &'static str), Failure> {
    let text = rqvs_flow::io::read_text(path)?;
    let name = path.display().to_string();
    match formats::sniff_rule_format(&text) {
        RuleFormat::Ofctl => Ok((formats::ofctl::parse_flows(&name, &text)?, "ofctl")),
        RuleFormat::ClassBench => {
            let mut rules = formats::classbench::parse_rules(&name, &text)?;
            assign_rule_outputs(&mut rules);
            Ok((rules, "classbench"))
        }
    }
}

#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
struct Sample {
    t_s: f64,
    mpps: f64,
    upcalls_per_s: f64,
    deletions_per_s: f64,
    lost: u64,
    megaflows: u64,
    masks: u64,
}

pub fn run(args: &Args) -> Result<(), Failure> {
    if !(0.0..=1.0).contains(&args.emc_prob) {
        return Err(Failure(format!("--emc-prob: expected a probability 0..1, found '{}'", args.emc_prob)));
    }
    let (all_rules, rules_format) = load_rules(&args.rules)?;
    let packets = inputs::load_packets(Some(&args.trace), args.in_port)?;
    let keys: Vec<FlowKey> = packets.entries.iter().map(|e| e.key).collect();
    if keys.is_empty() {
        return Err(Failure(format!("{}: no packets", args.trace.display())));
    }
    let mut rng = StdRng::seed_from_u64(args.seed);

    // Updates: held-out rules for additions.
    let mut updates = match &args.updates {
        Some(s) => parse_updates(s)?,
        None => Vec::new(),
    };
    let mut order: Vec<usize> = (0..all_rules.len()).collect();
    order.shuffle(&mut rng);
    let mut held: HashSet<usize> = HashSet::new();
    let mut next = 0;
    for u in updates.iter_mut().filter(|u| u.op == UpdateOp::Add) {
        if next + u.n > order.len() {
            return Err(Failure(format!("--updates: cannot hold out {} more rules of {}", u.n, all_rules.len())));
        }
        for &i in &order[next..next + u.n] {
            held.insert(i);
            u.rules.push(all_rules[i].clone());
        }
        next += u.n;
    }
    let initial: Vec<Rule> =
        all_rules.iter().enumerate().filter(|(i, _)| !held.contains(i)).map(|(_, r)| r.clone()).collect();

    let cfg = Config {
        emc: !args.no_emc,
        emc_insert_prob: args.emc_prob,
        cd: args.cd,
        flow_limit: args.flow_limit,
        idle_ns: (args.idle * 1e9) as u64,
        clock: Clock::Measured,
        seed: args.seed,
        ..Config::default()
    };
    let build_start = std::time::Instant::now();
    let mut dp = Datapath::new(&initial, cfg)?;
    let build_ms = build_start.elapsed().as_secs_f64() * 1e3;
    let masks_of_table = dp.slow_path().classifier().subtables(0);

    // Verification sample: trace positions; each recorded once per table version.
    let n_verify = args.verify.unwrap_or(if all_rules.len() > 100_000 { 2_000 } else { 10_000 }).min(keys.len());
    let mut positions: Vec<usize> = (0..keys.len()).collect();
    positions.shuffle(&mut rng);
    let mut sampled = vec![false; keys.len()];
    for &p in &positions[..n_verify] {
        sampled[p] = true;
    }
    let mut recorded = vec![false; keys.len()];
    // (version, position, action)
    let mut checks: Vec<(usize, usize, DpAction)> = Vec::with_capacity(n_verify * (updates.len() + 1));
    let mut versions: Vec<Vec<Rule>> = vec![initial.clone()];
    let mut table = initial;

    let duration_ns = args.duration.map(|s| (s * 1e9) as u64);
    let mut out = [DpAction::Drop; BATCH];
    let mut seq: u64 = 0;
    let mut series: Vec<Sample> = Vec::new();
    let interval_ns = 100_000_000u64;
    let mut next_sample = interval_ns;
    let mut last = Counters::default();
    let mut last_t = 0u64;
    let mut reval_ms = 0.0;
    let mut update_log = Vec::new();
    let mut pending_updates = updates.into_iter().peekable();
    let wall = std::time::Instant::now();
    let mut pos = 0usize;
    // Counters at the end of the first pass: later passes meet a warm cache (steady state).
    let mut first_pass: Option<Counters> = None;
    loop {
        let end = (pos + BATCH).min(keys.len());
        let chunk = &keys[pos..end];
        dp.process_batch(chunk, seq, &mut out);
        for (i, a) in out[..chunk.len()].iter().enumerate() {
            let p = pos + i;
            if sampled[p] && !recorded[p] && !matches!(a, DpAction::Pending | DpAction::Lost) {
                recorded[p] = true;
                checks.push((versions.len() - 1, p, *a));
            }
        }
        for &(s, a) in dp.handle_upcalls() {
            let p = (s % keys.len() as u64) as usize;
            if sampled[p] && !recorded[p] {
                recorded[p] = true;
                checks.push((versions.len() - 1, p, a));
            }
        }
        dp.maintain();
        seq += chunk.len() as u64;
        pos = if end == keys.len() { 0 } else { end };
        if pos == 0 && first_pass.is_none() {
            first_pass = Some(dp.counters());
        }
        let now = dp.now_ns();
        while now >= next_sample {
            let c = dp.counters();
            let dt = (now - last_t) as f64 / 1e9;
            series.push(Sample {
                t_s: now as f64 / 1e9,
                mpps: (c.received - last.received) as f64 / dt / 1e6,
                upcalls_per_s: (c.upcall - last.upcall) as f64 / dt,
                deletions_per_s: (c.deleted() - last.deleted()) as f64 / dt,
                lost: c.lost - last.lost,
                megaflows: c.megaflows,
                masks: c.masks,
            });
            last = c;
            last_t = now;
            next_sample = now - now % interval_ns + interval_ns;
        }
        while pending_updates.peek().is_some_and(|u| u.at_ns <= now) {
            let u = pending_updates.next().expect("peeked");
            let t = std::time::Instant::now();
            let deleted = match u.op {
                UpdateOp::Add => {
                    table.extend(u.rules.iter().cloned());
                    dp.add_rules(u.rules.clone())?
                }
                UpdateOp::Del => {
                    let mut ids: Vec<RuleId> = table.iter().map(|r| r.id).collect();
                    ids.shuffle(&mut rng);
                    ids.truncate(u.n);
                    table.retain(|r| !ids.contains(&r.id));
                    dp.remove_rules(&ids)
                }
            };
            let ms = t.elapsed().as_secs_f64() * 1e3;
            reval_ms += ms;
            update_log.push(serde_json::json!({
                "op": if u.op == UpdateOp::Add { "add" } else { "del" },
                "rules": u.n, "at_s": now as f64 / 1e9, "megaflows_deleted": deleted, "revalidation_ms": ms,
            }));
            versions.push(table.clone());
            recorded.iter_mut().for_each(|r| *r = false);
        }
        let done = match duration_ns {
            Some(d) => now >= d && pending_updates.peek().is_none(),
            None => pos == 0,
        };
        if done {
            break;
        }
    }
    let wall_s = wall.elapsed().as_secs_f64();
    let c = dp.counters();
    if !c.outcome_sum_ok() {
        return Err(Failure(format!("internal error: counters do not sum to packets received: {c:?}")));
    }

    // Verification against the reference of each table version.
    let mut mismatches = 0usize;
    let mut first_mismatch = None;
    for (v, rules) in versions.iter().enumerate() {
        let these: Vec<_> = checks.iter().filter(|c| c.0 == v).collect();
        if these.is_empty() {
            continue;
        }
        let reference = Reference::build(rules)?;
        for &&(_, p, a) in &these {
            let want = DpAction::of_rule(reference.lookup_rule(&wire_key(&keys[p])));
            if want != a {
                mismatches += 1;
                first_mismatch.get_or_insert(format!("packet {p}: datapath {a:?}, reference {want:?}"));
            }
        }
    }

    let pmd_s = c.pmd_ns as f64 / 1e9;
    let mpps = c.received as f64 / pmd_s.max(1e-12) / 1e6;
    let steady = first_pass.filter(|f| f.pmd_ns < c.pmd_ns).map(|f| {
        let ns = c.pmd_ns - f.pmd_ns;
        let pk = c.received - f.received;
        (pk as f64 / (ns as f64 / 1e9) / 1e6, (c.dpcls_ns - f.dpcls_ns) as f64 / ns as f64)
    });
    let share = |ns: u64| ns as f64 / c.pmd_ns.max(1) as f64;
    println!("rules file          {} ({} rules, {rules_format})", args.rules.display(), all_rules.len());
    println!("trace               {} ({} packets)", args.trace.display(), keys.len());
    println!(
        "design              orig (EMC {}, CD {})",
        if args.no_emc { "off".to_string() } else { format!("insert p={}", args.emc_prob) },
        if args.cd { "on" } else { "off" }
    );
    println!("slow path build     {build_ms:.0} ms ({masks_of_table} OpenFlow subtables)");
    println!("packets             {}", c.received);
    println!(
        "throughput          {mpps:.3} Mpps of PMD time ({:.1} ns/packet)   mismatches {mismatches} of {} checked",
        c.pmd_ns as f64 / c.received as f64,
        checks.len()
    );
    if let Some((m, sh)) = steady {
        println!("after first pass    {m:.3} Mpps (megaflow cache {:.1}% of PMD time)", 100.0 * sh);
    }
    println!("PMD time            {pmd_s:.3} s (wall {wall_s:.3} s; revalidation {reval_ms:.0} ms off the PMD)");
    println!(
        "PMD time shares     EMC {:.1}%  megaflow cache {:.1}%  upcalls {:.1}%  other {:.1}%",
        100.0 * share(c.emc_ns),
        100.0 * share(c.dpcls_ns),
        100.0 * share(c.upcall_ns),
        100.0 * (1.0 - share(c.emc_ns) - share(c.dpcls_ns) - share(c.upcall_ns))
    );
    println!(
        "outcomes            emc_hit {}  cd_hit {}  megaflow_hit {}  upcall {}  lost {}  (sum {} = received)",
        c.emc_hit,
        c.cd_hit,
        c.megaflow_hit,
        c.upcall,
        c.lost,
        c.outcome_sum()
    );
    println!(
        "avg subtables/hit   {:.2}   upcall cost {:.1} us   megaflows {}  masks {}",
        c.avg_subtables_per_hit(),
        c.upcall_ns as f64 / c.upcall.max(1) as f64 / 1e3,
        c.megaflows,
        c.masks
    );
    if let Some((on, off)) = dp.cd_intervals() {
        println!(
            "cd                  wrong hints {}  no hint {}  active intervals {on}, off {off}",
            c.cd_wrong_hint, c.cd_no_hint
        );
    }
    println!(
        "deleted             revalidated {}  idle {}  flow limit {}   installs refused {}",
        c.deleted_revalidated, c.deleted_idle, c.deleted_limit, c.install_refused
    );
    for u in &update_log {
        println!("update              {u}");
    }
    if let Some(m) = &first_mismatch {
        println!("first mismatch      {m}");
    }

    if let Some(path) = &args.plot {
        crate::plot::time_series(path, &plot_title(args), &series, &update_log)?;
    }
    if let Some(out) = &args.json {
        let counters: serde_json::Map<String, serde_json::Value> =
            c.fields().into_iter().map(|(k, v)| (k.to_string(), v.into())).collect();
        let mut o = serde_json::Map::new();
        for (k, val) in [
            ("rules_file", serde_json::json!(args.rules.display().to_string())),
            ("trace_file", serde_json::json!(args.trace.display().to_string())),
            ("design", serde_json::json!(args.design)),
            ("cd", serde_json::json!(args.cd)),
            ("emc", serde_json::json!(!args.no_emc)),
            ("emc_prob", serde_json::json!(args.emc_prob)),
            ("rules", serde_json::json!(all_rules.len())),
            ("trace_packets", serde_json::json!(keys.len())),
            ("packets", serde_json::json!(c.received)),
            ("pmd_s", serde_json::json!(pmd_s)),
            ("mpps", serde_json::json!(mpps)),
            ("ns_per_packet", serde_json::json!(c.pmd_ns as f64 / c.received as f64)),
            ("mpps_after_first_pass", serde_json::json!(steady.map(|s| s.0))),
            ("share_megaflow_after_first_pass", serde_json::json!(steady.map(|s| s.1))),
            ("share_emc", serde_json::json!(share(c.emc_ns))),
            ("share_megaflow", serde_json::json!(share(c.dpcls_ns))),
            ("share_upcall", serde_json::json!(share(c.upcall_ns))),
            ("avg_subtables_per_hit", serde_json::json!(c.avg_subtables_per_hit())),
            ("verified", serde_json::json!(checks.len())),
            ("mismatches", serde_json::json!(mismatches)),
            ("counters", serde_json::Value::Object(counters)),
            ("updates", serde_json::json!(update_log)),
            ("series", serde_json::to_value(&series)?),
            ("seed", serde_json::json!(args.seed)),
        ] {
            o.insert(k.to_string(), val);
        }
        crate::report::write_json(out, "replay", o)?;
    }
    if mismatches > 0 {
        return Err(Failure(format!("{mismatches} packets got an action other than the reference's")));
    }
    Ok(())
}

impl crate::plot::Point for Sample {
    fn t(&self) -> f64 {
        self.t_s
    }
    fn values(&self) -> [f64; 6] {
        [
            self.mpps,
            self.upcalls_per_s,
            self.deletions_per_s,
            self.megaflows as f64,
            self.masks as f64,
            self.lost as f64,
        ]
    }
}

fn plot_title(args: &Args) -> String {
    let name = |p: &Path| p.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    format!(
        "rqvs replay orig: {} / {}{}{}",
        name(&args.rules),
        name(&args.trace),
        if args.cd { ", CD" } else { "" },
        args.updates.as_ref().map_or(String::new(), |u| format!(", updates {u}"))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_specs() {
        let u = parse_updates("del:3@500ms, add:60@7s").unwrap();
        assert_eq!((u[0].op, u[0].n, u[0].at_ns), (UpdateOp::Del, 3, 500_000_000));
        assert_eq!((u[1].op, u[1].n, u[1].at_ns), (UpdateOp::Add, 60, 7_000_000_000));
        assert!(parse_updates("mod:1@1s").is_err());
        assert!(parse_updates("add:x@1s").is_err());
        assert!(parse_updates("add:1@-1s").is_err());
    }
}
