//! A strict selection that names no table (OpenFlow's `OFPTT_ALL`, what `ovs-ofctl del-flows
//! --strict BR FLOW` sends without `table=`) on a table of record holding 500K flows: the time
//! of one, averaged over 100. docs/openflow-bench.md, "A strict delete in every table".
//!
//!     cargo run --release -p rqvs-ofproto --example strict_all_tables
use rqvs_flow::{Actions, Rule, RuleId};
use rqvs_ofproto::record::{FlowFilter, FlowTable};

fn main() {
    let n = 500_000u32;
    let rules: Vec<Rule> = (0..n)
        .map(|i| {
            let text =
                format!("priority=10,ip,nw_src={}.{}.{}.0/24,actions=output:2", i >> 16, (i >> 8) & 255, i & 255);
            let mut r =
                rqvs_flow::formats::ofctl::parse_flows("strict_all_tables", &text).expect("a valid flow").remove(0);
            r.id = RuleId(i);
            r.actions = Actions::output(2);
            r
        })
        .collect();
    let t = FlowTable::new(rules.clone());
    let picked: Vec<&Rule> = rules.iter().step_by(5000).collect();
    let t0 = std::time::Instant::now();
    let mut found = 0;
    for r in &picked {
        let f = FlowFilter { matches: Some(r.matches), strict: Some(r.priority), ..FlowFilter::all() };
        found += t.select(&f).len();
    }
    let each = t0.elapsed().as_secs_f64() * 1e6 / picked.len() as f64;
    println!(
        "{} flows, {} strict selections in every table, {found} flows found: {each:.1} us each",
        t.len(),
        picked.len()
    );
}
