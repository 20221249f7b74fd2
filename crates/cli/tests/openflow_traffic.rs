//! Every converted acl1_10k rule (13,394 OpenFlow flows) through the real `ovs-ofctl` into a
//! running `rqvs switch` on veths, and then `del-flows` with a match and with a cookie,
//! `mod-flows` with a match and with a cookie, `--strict mod-flows`, `--strict del-flows` (a
//! wrong priority first: nothing), `--bundle add-flows` (adds, a delete and a strict modify in
//! one bundle), `add-flow` of a flow over many, and `del-flows` of everything — each followed by
//! `dump-flows` (parsed back: the set the test says the switch holds) and the traffic check of
//! `tests/ofswitch/mod.rs`: a sample of the table's flows and the flows just changed or deleted,
//! each a frame through the switch, each frame's copies against the reference winner.
//!
//! Every rule gets its own actions (a MAC rewrite carrying its priority, to port 2, 3, both,
//! back to port 1, or drop), so a frame's copies say which rule decided it; UDP frames no rule
//! matches go out of port 3 (a priority-0 flow), TCP ones are dropped (a table miss).
//!
//! ORIG in OpenFlow 1.4, CCACHE and CFLOWS in 1.3 (`tests/openflow.rs` covers the other pairs),
//! one at a time. Needs `ovs-ofctl`, root (namespaces) and the shared ClassBench data; skipped
//! with the reason printed otherwise, unless `RQVS_REQUIRE_OVS=1`, `RQVS_REQUIRE_NETNS=1`,
//! `RQVS_REQUIRE_DATA=1`.

mod common;
mod ofswitch;
use common::TempDir;
use ofswitch::{matches_of, normal, rules_of, selected, with_actions, OfSwitch, Rng};

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Instant;

use rqvs_flow::formats::ofctl;
use rqvs_flow::{Match, Rule};
use rqvs_ports::testnet;

/// Frames from this many flows of the table in each check (and up to this many changed ones).
const SAMPLE: usize = 1200;

/// The actions of the flows of priority `p`: each rule's own (see the module documentation).
fn actions(p: u32) -> String {
    let src = format!("mod_dl_src:02:00:00:00:{:02x}:{:02x}", p >> 8, p & 0xff);
    let dst = format!("mod_dl_dst:02:00:00:01:{:02x}:{:02x}", p >> 8, p & 0xff);
    match p % 6 {
        0 => format!("{src},output:2"),
        1 => format!("{src},output:3"),
        2 => "drop".into(),
        3 => format!("{dst},output:2,output:3"),
        4 => "in_port".into(),
        _ => format!("{src},output:3,{dst},output:2"),
    }
}

/// acl1_10k as `ovs-ofctl` flows with per-rule actions: the file and its flow set.
fn acl_flows(tmp: &TempDir) -> Option<(PathBuf, BTreeSet<String>)> {
    let dir = rqvs_testkit::data::classbench_dir()?;
    let src = rqvs_testkit::data::rules_path(&dir, "acl1", "10k");
    let raw = tmp.join("raw.ofctl");
    let out = common::rqvs(&["convert", "rules", src.to_str()?, "--to", "ofctl", "-o", raw.to_str()?]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text: String = std::fs::read_to_string(&raw)
        .unwrap()
        .lines()
        .map(|l| {
            let p: u32 = l.split("priority=").nth(1).and_then(|x| x.split(',').next()).unwrap().parse().unwrap();
            with_actions(l, &actions(p)) + "\n"
        })
        .collect();
    let file = tmp.join("acl.ofctl");
    std::fs::write(&file, &text).unwrap();
    Some((file, normal(&text)))
}

/// Up to `n` of `flows`, chosen with `rng`.
fn sample(flows: &BTreeSet<String>, n: usize, rng: &mut Rng) -> Vec<Match> {
    let all = matches_of(flows);
    if all.len() <= n {
        return all;
    }
    (0..n).map(|_| all[rng.below(all.len() as u64) as usize]).collect()
}

/// The /8 of `field` (`nw_src` or `nw_dst`) that most flows of `proto` (`ip`, `tcp`) lie
/// within — a match that selects many flows.
fn busiest_slash8(flows: &BTreeSet<String>, proto: &str, field: &str) -> String {
    let mut count: BTreeMap<u32, usize> = BTreeMap::new();
    for r in rules_of(flows) {
        let (v, k) = (r.matches.value(), r.matches.mask());
        let (addr, mask) = if field == "nw_src" { (v.nw_src, k.nw_src) } else { (v.nw_dst, k.nw_dst) };
        let tcp_ok = proto != "tcp" || (k.nw_proto == 0xff && v.nw_proto == 6);
        if mask >> 24 == 0xff && tcp_ok {
            *count.entry(addr >> 24).or_default() += 1;
        }
    }
    let (a, _) = count.into_iter().max_by_key(|&(a, n)| (n, a)).unwrap();
    format!("{proto},{field}={a}.0.0.0/8")
}

/// A flow line without its cookie and actions: the match and priority a strict command names.
fn strict_of(flow: &str) -> String {
    let (m, _) = flow.split_once(",actions=").unwrap();
    m.split(',').filter(|f| !f.starts_with("cookie=")).collect::<Vec<_>>().join(",")
}

/// The rule of one flow line.
fn rule(flow: &str) -> Rule {
    ofctl::parse_flow("flow", 1, flow, 0).unwrap()
}

/// The flows of `table` with the match and priority of `flow` (what a strict command selects).
fn strictly(table: &BTreeSet<String>, flow: &str) -> BTreeSet<String> {
    let want = rule(&format!("{},actions=drop", strict_of(flow)));
    table
        .iter()
        .filter(|f| {
            let r = rule(f);
            r.priority == want.priority && r.matches == want.matches
        })
        .cloned()
        .collect()
}

/// The flows of `table`, highest priority first.
fn by_priority(table: &BTreeSet<String>) -> Vec<String> {
    let mut v: Vec<String> = table.iter().cloned().collect();
    v.sort_by_key(|f| std::cmp::Reverse(rule(f).priority));
    v
}

struct Run {
    sw: OfSwitch,
    version: &'static str,
    all: BTreeSet<String>,
    rng: Rng,
    t: String,
}

impl Run {
    fn ok(&self, args: &[&str]) -> String {
        self.sw.ofctl_ok(self.version, args)
    }

    /// `dump-flows` is the model, and the traffic check passes on a sample of it and `focus`.
    fn check(&mut self, focus: &[Match], what: &str) {
        let t0 = Instant::now();
        assert_eq!(self.sw.dump(self.version), self.all, "{what}: dump-flows");
        let mut flows = sample(&self.all, SAMPLE, &mut self.rng);
        let from_table = flows.len();
        flows.extend_from_slice(&focus[..focus.len().min(SAMPLE)]);
        let (n, hits) = self.sw.check_traffic(&self.all, &flows, 1, what);
        assert!(
            n >= from_table * 9 / 10 && hits >= from_table * 9 / 10,
            "{what}: a weak workload ({n} frames, {hits} with a winner, {from_table} from the table)"
        );
        eprintln!(
            "{what}: {} flows, {n} frames ({hits} with a winner), {:.1} s",
            self.all.len(),
            t0.elapsed().as_secs_f64()
        );
    }

    /// `del-flows MATCH` (a cookie and mask in `cookie`): the model loses what it selects.
    fn del(&mut self, by: &str, cookie: (u64, u64), arg: &str, what: &str) {
        let gone = selected(&self.all, by, cookie.0, cookie.1);
        assert!(gone.len() >= 20, "{what}: {} flows selected", gone.len());
        self.ok(&["del-flows", &self.t, arg]);
        self.all.retain(|f| !gone.contains(f));
        let focus = sample(&gone, SAMPLE / 4, &mut self.rng);
        self.check(&focus, what);
    }

    /// `mod-flows MATCH,actions=NEW`: the model's selected flows get `new`.
    fn modify(&mut self, by: &str, cookie: (u64, u64), arg: &str, new: &str, what: &str) {
        let chosen = selected(&self.all, by, cookie.0, cookie.1);
        assert!(chosen.len() >= 20, "{what}: {} flows selected", chosen.len());
        self.ok(&["mod-flows", &self.t, &format!("{arg},actions={new}")]);
        self.all = std::mem::take(&mut self.all)
            .into_iter()
            .map(|f| if chosen.contains(&f) { with_actions(&f, new) } else { f })
            .collect();
        let focus = sample(&chosen.iter().map(|f| with_actions(f, new)).collect(), SAMPLE / 4, &mut self.rng);
        self.check(&focus, what);
    }
}

fn acl(design: &str, version: &'static str) {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let tmp = TempDir::new(&format!("cli-openflow-traffic-{design}"));
    let Some((file, acl)) = acl_flows(&tmp) else { return };
    let tag = format!("oft{design}");
    if !testnet::available(&tag) {
        return;
    }
    let _one = ofswitch::serial();
    let t0 = Instant::now();
    let base = "priority=0,udp,actions=mod_dl_src:02:00:00:00:99:99,output:3\npriority=1,arp,actions=drop\n";
    let rules = tmp.join("rules.txt");
    std::fs::write(&rules, base).unwrap();
    let sw = OfSwitch::start(&tmp.0, &tag, &rules, design, true);
    let t = sw.target();
    let mut run = Run { sw, version, all: normal(base), rng: Rng(0xac1_10c0 + version.len() as u64), t };
    let t = run.t.clone();
    let show = run.ok(&["show", &t]);
    for p in ["1(p1)", "2(p2)", "3(p3)"] {
        assert!(show.contains(p), "{p} in {show}");
    }

    // Every rule of acl1_10k, one flow-mod each.
    let t1 = Instant::now();
    run.ok(&["add-flows", &t, file.to_str().unwrap()]);
    eprintln!("{design} {version}: add-flows of {} flows: {:.1} s", acl.len(), t1.elapsed().as_secs_f64());
    assert_eq!(acl.len(), 13394, "every line of the file a distinct flow");
    run.all.extend(acl.iter().cloned());
    assert_eq!(run.sw.ctl_rules(), run.all, "rqvs ctl dump-rules agrees");
    run.check(&[], "add-flows of acl1_10k");

    // Deletes with a match and with a cookie (the converted rules' cookies are their indices).
    let by = busiest_slash8(&run.all, "ip", "nw_src");
    run.del(&by, (0, 0), &by, &format!("del-flows {by}"));
    run.del("", (0x20, 0xf0), "cookie=0x20/0xf0", "del-flows cookie=0x20/0xf0");

    // Modifies with a match and with a cookie.
    let by = busiest_slash8(&run.all, "tcp", "nw_dst");
    run.modify(&by, (0, 0), &by, "mod_dl_src:02:00:00:00:ee:ee,output:3", &format!("mod-flows {by}"));
    run.modify("", (0x30, 0xf0), "cookie=0x30/0xf0", "output:2,output:3", "mod-flows cookie=0x30/0xf0");

    // --strict: one flow each (the highest-priority rule's first flow, the next rule's).
    let by_prio = by_priority(&run.all);
    let (a, b) = (by_prio[0].clone(), by_prio.iter().find(|f| strict_of(f) != strict_of(&by_prio[0])).unwrap().clone());
    let new = "mod_dl_dst:02:00:00:00:dd:dd,output:3";
    run.ok(&["--strict", "mod-flows", &t, &format!("{},actions={new}", strict_of(&a))]);
    let chosen = strictly(&run.all, &a);
    assert_eq!(chosen.len(), 1);
    run.all = std::mem::take(&mut run.all)
        .into_iter()
        .map(|f| if chosen.contains(&f) { with_actions(&f, new) } else { f })
        .collect();
    run.check(&matches_of(&chosen), "mod-flows --strict");
    let p = rule(&b).priority;
    let wrong = strict_of(&b).replace(&format!("priority={p}"), &format!("priority={}", p + 20000));
    run.ok(&["--strict", "del-flows", &t, &wrong]);
    run.check(&[], "del-flows --strict with another priority: nothing");
    let gone = strictly(&run.all, &b);
    run.ok(&["--strict", "del-flows", &t, &strict_of(&b)]);
    run.all.retain(|f| !gone.contains(f));
    run.check(&matches_of(&gone), "del-flows --strict");

    // One bundle: 50 flows over sampled ones, a delete with a match, a strict modify.
    let over: Vec<String> = sample(&run.all, 50, &mut run.rng)
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let r = rqvs_flow::Rule::new(0, 20000 + i as u32, *m, rqvs_flow::Actions::drop());
            let line = ofctl::format_flows(&r).unwrap().remove(0);
            with_actions(&line, &format!("mod_dl_src:02:00:00:00:bb:{i:02x},output:2"))
        })
        .collect();
    let del_by = busiest_slash8(&run.all, "tcp", "nw_src");
    let spared = selected(&run.all, &del_by, 0, 0);
    let modified = by_priority(&run.all).into_iter().find(|f| !spared.contains(f)).unwrap();
    let bundle = tmp.join("bundle.txt");
    let mut text: String = over.iter().map(|f| format!("add {f}\n")).collect();
    text += &format!("delete {del_by}\nmodify_strict {},actions=output:3\n", strict_of(&modified));
    std::fs::write(&bundle, &text).unwrap();
    run.ok(&["--bundle", "add-flows", &t, bundle.to_str().unwrap()]);
    run.all.extend(over.iter().flat_map(|f| normal(f)));
    let gone = selected(&run.all, &del_by, 0, 0);
    run.all.retain(|f| !gone.contains(f));
    let chosen = strictly(&run.all, &modified);
    run.all = std::mem::take(&mut run.all)
        .into_iter()
        .map(|f| if chosen.contains(&f) { with_actions(&f, "output:3") } else { f })
        .collect();
    let mut focus = matches_of(&normal(&over.join("\n")));
    focus.extend(sample(&gone, 200, &mut run.rng));
    focus.extend(matches_of(&chosen));
    run.check(&focus, "--bundle add-flows (adds, a delete, a strict modify)");

    // add-flow of one flow over many.
    let dst = busiest_slash8(&run.all, "ip", "nw_dst");
    let one = format!("priority=30000,{dst},actions=mod_dl_src:02:00:00:00:cc:cc,output:2");
    let under = selected(&run.all, &dst, 0, 0);
    run.ok(&["add-flow", &t, &one]);
    run.all.extend(normal(&one));
    let focus = sample(&under, SAMPLE / 4, &mut run.rng);
    run.check(&focus, "add-flow over many");

    // del-flows of everything: every frame misses.
    let before = sample(&run.all, SAMPLE, &mut run.rng);
    run.ok(&["del-flows", &t]);
    run.all.clear();
    assert!(run.sw.dump(version).is_empty());
    let (n, hits) = run.sw.check_traffic(&BTreeSet::new(), &before, 1, "del-flows of everything");
    assert!(n > SAMPLE / 2 && hits == 0);
    let (status, err) = run.sw.exit();
    assert!(status.success(), "{err}");
    eprintln!("{design} {version}: {:.1} s", t0.elapsed().as_secs_f64());
}

#[test]
fn acl1_10k_through_ovs_ofctl_orig_of14() {
    acl("orig", "OpenFlow14");
}

#[test]
fn acl1_10k_through_ovs_ofctl_ccache_of13() {
    acl("ccache", "OpenFlow13");
}

#[test]
fn acl1_10k_through_ovs_ofctl_cflows_of13() {
    acl("cflows", "OpenFlow13");
}
