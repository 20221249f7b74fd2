//! CFLOWS' pipelined commit path through [`Control`] (`rqvs_switch::commit_pipeline`): a run in
//! flight is finished by whoever touches the table of record next, its outcome kept for its
//! owner; a run the manager refuses is undone under the owner's next run, which is recorded
//! again exactly as if the refused one had never been; the table ends as the accepted
//! flow-mods say. The refusal comes from the manager's test hook `RQVS_TEST_REFUSE_PRIORITY`
//! (set before the switch starts; only this file's switch sees flows of that priority).

use std::collections::BTreeSet;

use rqvs_datapath::DesignKind;
use rqvs_flow::formats::ofctl;
use rqvs_flow::Rule;
use rqvs_ofproto::record::{FlowFilter, FlowOp, FlowSpec, OpError};
use rqvs_switch::{Control, PortSource, Switch, SwitchConfig};

const REFUSED: u32 = 6543;

fn rule(text: &str) -> Rule {
    ofctl::parse_flow("test", 1, text, 0).unwrap()
}

/// The flow as the table's texts say it.
fn text(t: &str) -> String {
    ofctl::format_flows(&rule(t)).unwrap().remove(0)
}

fn add(text: &str) -> FlowOp {
    FlowOp::add(rule(text))
}

fn add_checked(text: &str) -> FlowOp {
    let spec = FlowSpec { flags: rqvs_openflow::flow_mod::OFPFF_CHECK_OVERLAP, ..FlowSpec::default() };
    FlowOp::Add(rule(text), spec)
}

fn del_strict(text: &str) -> FlowOp {
    let r = rule(text);
    FlowOp::Delete(FlowFilter { matches: Some(r.matches), strict: Some(r.priority), ..FlowFilter::all() })
}

/// The flows, as text without ids, and their ids.
fn table(c: &Control) -> (BTreeSet<String>, BTreeSet<u32>) {
    let rules = c.rules();
    (rules.iter().flat_map(|r| ofctl::format_flows(r).unwrap()).collect(), rules.iter().map(|r| r.id.0).collect())
}

#[test]
fn runs_in_flight_are_finished_by_others_and_a_refused_one_is_undone_under_the_next() {
    std::env::set_var("RQVS_TEST_REFUSE_PRIORITY", REFUSED.to_string());
    let dir = rqvs_testkit::TempDir::new("switch-pipelined");
    let ports = vec![
        PortSource::Frames { name: "in".into(), frames: Vec::new() },
        PortSource::Spec(format!("pcap-out:{}", dir.join("p2.pcap").display()).parse().unwrap()),
    ];
    let base = vec![rule("priority=5,icmp,actions=output:2")];
    let sw = Switch::start(SwitchConfig::new(ports, base, DesignKind::Cflows)).unwrap();
    let c = sw.control();

    // Owner 1's run goes in flight; owner 2's run finishes it first (its outcome kept for 1).
    let p = c.apply_each_pipelined(1, &[add("priority=10,udp,tp_dst=1,actions=output:2")]);
    assert!(p.pending && p.before.is_none() && p.effects.iter().all(Result::is_ok));
    let q = c.apply_each_pipelined(2, &[add("priority=10,udp,tp_dst=2,actions=output:2")]);
    assert!(q.pending && q.before.is_none(), "owner 2 had no run before");
    assert_eq!(c.settle_pipelined(1), Some(Ok(())), "1's outcome, kept by 2's call");
    assert_eq!(c.settle_pipelined(1), None, "told once");
    // A reader of the record finishes 2's run (its outcome kept for 2).
    let (flows, _) = table(&c);
    assert!(flows.contains(&text("priority=10,udp,tp_dst=2,actions=output:2")), "{flows:?}");
    assert_eq!(c.settle_pipelined(2), Some(Ok(())));

    // The refused run R in flight, then owner 1's next run C recorded on top of it.
    let (before_r, ids_before_r) = table(&c);
    let r = c.apply_each_pipelined(
        1,
        &[
            add("priority=20,udp,tp_dst=7,actions=output:2"),
            add(&format!("priority={REFUSED},udp,tp_dst=8,actions=output:2")),
            del_strict("priority=10,udp,tp_dst=1,actions=drop"),
        ],
    );
    assert!(r.pending, "R is in flight (its refusal not known yet)");
    assert!(r.effects.iter().all(Result::is_ok), "R passes the table of record: {:?}", r.effects);
    let c_ops = [
        // Refused with OVERLAP were R's priority-20 flow there; R never happened: accepted.
        add_checked("priority=20,udp,actions=output:2"),
        del_strict("priority=10,udp,tp_dst=2,actions=drop"),
    ];
    let after = c.apply_each_pipelined(1, &c_ops);
    match &after.before {
        Some(Err(e)) => assert!(e.contains("test hook"), "{e}"),
        other => panic!("R's refusal expected: {other:?}"),
    }
    assert!(after.effects.iter().all(Result::is_ok), "C as if R had never been: {:?}", after.effects);
    assert_eq!(c.settle_pipelined(1), Some(Ok(())));
    let (flows, ids) = table(&c);
    let mut want = before_r.clone();
    assert!(want.remove(&text("priority=10,udp,tp_dst=2,actions=output:2")), "{want:?}");
    want.insert(text("priority=20,udp,actions=output:2"));
    assert_eq!(flows, want);
    // C's flow got the first id after the flows before R (R's ids handed out again).
    let first_new = ids_before_r.iter().max().unwrap() + 1;
    assert!(ids.contains(&first_new), "{ids:?} after {ids_before_r:?}");

    // The same C on a switch where R never ran: the same effects (checked on the record here:
    // with R absent, C's overlap-checked add would be refused only if a priority-20 flow met it).
    let again = c.apply_each_pipelined(1, &[add_checked("priority=20,udp,tp_dst=9,actions=output:2")]);
    assert!(matches!(again.effects[..], [Err(OpError::Overlap(_))]), "{:?}", again.effects);
    assert_eq!(c.settle_pipelined(1), None, "nothing sent: the run changed nothing");
    drop(c);
    sw.stop().unwrap();
}
