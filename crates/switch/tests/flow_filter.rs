//! `Control`'s OpenFlow-shaped rule changes (the channel's flow-mods): strict and non-strict
//! delete with cookie and out_port filters, modify (strict or not) keeping match, priority and
//! cookie, and the table of record and the slow path agreeing after each, for every design.

use rqvs_datapath::DesignKind;
use rqvs_flow::formats::ofctl;
use rqvs_flow::{Action, Actions, Rule};
use rqvs_ofproto::record::FlowFilter;
use rqvs_switch::{Control, PortSource, Switch, SwitchConfig};

const FLOWS: &str = "\
cookie=0x1,priority=10,udp,tp_dst=53,actions=output:2
cookie=0x2,priority=20,udp,tp_dst=53,actions=output:3
cookie=0x1,priority=10,udp,nw_src=10.0.0.1,tp_dst=53,actions=output:2
cookie=0x3,priority=5,tcp,actions=output:3
cookie=0x3,priority=5,tcp,nw_dst=10.0.0.0/8,actions=output:2
";

fn parse(text: &str) -> Vec<Rule> {
    ofctl::parse_flows("test", text).unwrap()
}

fn one(text: &str) -> Rule {
    parse(text).pop().unwrap()
}

fn lines(c: &Control) -> Vec<String> {
    let mut v = c.flows();
    v.sort();
    v
}

fn start(design: DesignKind) -> Switch {
    let ports = (1..=3).map(|p| PortSource::Frames { name: format!("p{p}"), frames: Vec::new() }).collect();
    Switch::start(SwitchConfig::new(ports, parse(FLOWS), design)).unwrap()
}

#[test]
fn delete_and_modify_select_as_openflow_does() {
    for design in [DesignKind::Orig, DesignKind::Ccache, DesignKind::Cflows] {
        let sw = start(design);
        let c = sw.control();
        assert_eq!(c.rules().len(), 5);
        // Non-strict selection: every flow at least as specific as udp,tp_dst=53.
        let udp53 = FlowFilter { matches: Some(one("udp,tp_dst=53,actions=drop").matches), ..FlowFilter::all() };
        assert_eq!(c.select(&udp53).len(), 3, "{design:?}");
        // Cookie filter: only cookie 1 of those.
        let cookie1 = FlowFilter { cookie: (1, u64::MAX), ..udp53.clone() };
        assert_eq!(c.select(&cookie1).len(), 2);
        // out_port filter.
        let to3 = FlowFilter { out_port: Some(3), ..FlowFilter::all() };
        assert_eq!(c.select(&to3).len(), 2);
        // Strict modify: only the priority-20 flow; cookie and match kept.
        let strict20 = FlowFilter { strict: Some(20), ..udp53.clone() };
        assert_eq!(c.modify_selected(&strict20, &Actions(vec![Action::Output(1)])).unwrap(), 1);
        assert!(lines(&c)
            .iter()
            .any(|l| l.contains("cookie=0x2") && l.contains("priority=20") && l.ends_with("actions=output:1")));
        // The slow path sees it.
        let trace = c.trace("in_port=2,udp,nw_src=10.0.0.9,tp_dst=53").unwrap();
        assert!(trace.contains("Datapath actions: 1"), "{design:?}: {trace}");
        // A modify matching nothing adds nothing.
        let none = FlowFilter { matches: Some(one("udp,tp_dst=99,actions=drop").matches), ..FlowFilter::all() };
        assert_eq!(c.modify_selected(&none, &Actions(vec![Action::Output(1)])).unwrap(), 0);
        assert_eq!(c.rules().len(), 5);
        // A modify to an action the switch does not execute is refused, the table unchanged.
        let before = lines(&c);
        assert!(c.modify_selected(&udp53, &Actions(vec![Action::Other("learn(foo)".into())])).is_err());
        assert_eq!(lines(&c), before);
        // Strict delete: exact match and priority only.
        let strict10 = FlowFilter { strict: Some(10), ..udp53.clone() };
        assert_eq!(c.del_selected(&strict10).unwrap(), 1);
        assert_eq!(c.rules().len(), 4);
        // Non-strict delete with a cookie filter.
        let tcp3 =
            FlowFilter { matches: Some(one("tcp,actions=drop").matches), cookie: (3, 0xff), ..FlowFilter::all() };
        assert_eq!(c.del_selected(&tcp3).unwrap(), 2);
        assert_eq!(c.rules().len(), 2);
        assert_eq!(c.del_selected(&FlowFilter::all()).unwrap(), 2);
        assert!(c.rules().is_empty());
        c.request_stop();
        sw.stop().unwrap();
    }
}

#[test]
fn a_bundle_of_ops_is_one_commit_or_none() {
    use rqvs_ofproto::record::FlowOp;
    for design in [DesignKind::Orig, DesignKind::Cflows] {
        let sw = start(design);
        let c = sw.control();
        let before = lines(&c);
        let udp53 = FlowFilter { matches: Some(one("udp,tp_dst=53,actions=drop").matches), ..FlowFilter::all() };
        // Delete, add, modify the added flow, replace an existing one: in order, one commit.
        let ops = vec![
            FlowOp::Delete(udp53.clone()),
            FlowOp::add(one("priority=30,udp,tp_dst=53,actions=output:2")),
            FlowOp::modify(udp53.clone(), Actions(vec![Action::Output(3)])),
            FlowOp::add(one("priority=5,tcp,actions=drop")),
        ];
        assert_eq!(c.apply_ops(&ops).unwrap(), (2, 4), "{design:?}");
        assert_eq!(
            lines(&c),
            vec![
                "priority=30,udp,tp_dst=53,actions=output:3".to_string(),
                "priority=5,cookie=0x3,tcp,nw_dst=10.0.0.0/8,actions=output:2".to_string(),
                "priority=5,tcp,actions=drop".to_string(),
            ]
        );
        let trace = c.trace("in_port=1,udp,nw_src=10.0.0.1,tp_dst=53").unwrap();
        assert!(trace.contains("Datapath actions: 3"), "{trace}");
        // One refused op: nothing changes.
        let now = lines(&c);
        let ops = vec![FlowOp::Delete(FlowFilter::all()), FlowOp::add(one("priority=1,udp,actions=learn(x)"))];
        assert!(c.apply_ops(&ops).is_err());
        assert_eq!(lines(&c), now);
        assert_ne!(now, before);
        c.request_stop();
        sw.stop().unwrap();
    }
}
