//! Ports attached and removed while the switch runs (`crates/switch/src/attach.rs`), without
//! namespaces: an in-memory port delivering frames in a loop, flooded to `pcap-out` ports (of
//! files that are `/dev/null`) that come and go. The PMDs keep forwarding, a removed port's index is retired (never reused) and
//! its counts stay in the report, its ofport is free again, the megaflows of a removed input
//! port are revalidated away, and every frame is accounted for.

use std::time::{Duration, Instant};

use rqvs_datapath::DesignKind;
use rqvs_flow::frame::build_frame;
use rqvs_flow::{Action, Actions, FlowKey, Match, Rule};
use rqvs_ports::PortSpec;
use rqvs_switch::{Control, PortSource, Switch, SwitchConfig};
use rqvs_testkit::temp::TempDir;

fn tx_of(c: &Control, name: &str) -> u64 {
    c.show().ports.iter().filter(|p| p.name == name).map(|p| p.tx_packets).sum()
}

fn rx_in(c: &Control) -> u64 {
    c.show().ports.iter().find(|p| p.name == "pcap-in:in").map_or(0, |p| p.rx_packets)
}

/// Polls `f` until it holds (5 s at most).
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(5), "{what}: not within 5 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn run(design: DesignKind, pmds: usize) {
    let dir = TempDir::new("live-ports");
    let frames: Vec<Vec<u8>> =
        (0..64).map(|i| build_frame(&FlowKey::ipv4(0x0a00_0001, 0x0a00_0100 + i, 17, 1000, 53).wire())).collect();
    let flood = Rule::new(0, 1, Match::ANY, Actions(vec![Action::Flood]));
    let mut cfg = SwitchConfig::new(vec![PortSource::Frames { name: "in".into(), frames }], vec![flood], design);
    cfg.live_ports = true;
    cfg.pmds = pmds;
    cfg.input_loops = u64::MAX;
    let switch = Switch::start(cfg).unwrap();
    let c = switch.control();
    // Files that are /dev/null: the flood at full speed writes nothing to disk.
    let spec = |n: &str| -> PortSpec {
        let path = dir.join(n);
        std::os::unix::fs::symlink("/dev/null", &path).unwrap();
        format!("pcap-out:{}", path.display()).parse().unwrap()
    };
    let a = spec("a.pcap");
    assert_eq!(c.add_port(&a, 7).unwrap(), 1);
    assert_eq!(c.ofports().index(7), Some(1));
    let a_name = a.to_string();
    eventually("the attached port is sent frames", || tx_of(&c, &a_name) > 100);
    // Two ports cannot hold one number.
    assert!(c.add_port(&spec("x.pcap"), 7).unwrap_err().0.contains("given to two ports"));
    c.remove_port(7).unwrap();
    assert_eq!(c.ofports().index(7), None);
    assert!(c.remove_port(7).unwrap_err().0.contains("no such port"));
    let after = tx_of(&c, &a_name);
    let rx = rx_in(&c);
    eventually("the input port keeps being read", || rx_in(&c) > rx + 100);
    assert_eq!(tx_of(&c, &a_name), after, "a removed port is sent nothing");
    let show = c.show();
    let removed: Vec<_> = show.ports.iter().filter(|p| p.link == "removed").collect();
    assert_eq!(removed.len(), 1);
    assert_eq!((removed[0].port, removed[0].name.as_str()), (7, a_name.as_str()), "named as it was");
    // The number again, at a new index.
    let b = spec("b.pcap");
    assert_eq!(c.add_port(&b, 7).unwrap(), 2, "indices are never reused");
    let b_name = b.to_string();
    eventually("the port added again is sent frames", || tx_of(&c, &b_name) > 100);
    assert_eq!(c.port_names(), vec!["pcap-in:in".to_string(), b_name.clone()]);
    // The input port removed: its megaflows are revalidated away (ORIG, CCACHE keep them).
    let megaflows = |c: &Control| c.dump_flows().iter().map(|(_, l)| l.len()).sum::<usize>();
    let cached = matches!(design, DesignKind::Orig | DesignKind::Ccache);
    if cached {
        assert!(megaflows(&c) > 0);
    }
    c.remove_port(1).unwrap();
    eventually("the removed in_port's megaflows are deleted", || megaflows(&c) == 0);
    assert!(c.port_names() == vec![b_name.clone()]);
    c.request_stop();
    let report = switch.stop().unwrap();
    assert!(report.balanced(), "{}", report.format());
    assert_eq!(report.ports.len(), 3);
    assert_eq!(report.ports.iter().filter(|p| p.link == "removed").count(), 2);
    assert!(report.format().contains("every frame accounted for"));
}

#[test]
fn ports_come_and_go_while_frames_flow_orig() {
    run(DesignKind::Orig, 2);
}

#[test]
fn ports_come_and_go_while_frames_flow_cflows() {
    run(DesignKind::Cflows, 1);
}

#[test]
fn ports_come_and_go_while_frames_flow_ccache_and_auto() {
    run(DesignKind::Ccache, 1);
    run(DesignKind::Auto, 1);
}

#[test]
fn a_switch_of_fixed_ports_refuses_live_changes() {
    let frames = vec![build_frame(&FlowKey::ipv4(1, 2, 17, 1, 2).wire())];
    let cfg = SwitchConfig::new(vec![PortSource::Frames { name: "in".into(), frames }], Vec::new(), DesignKind::Orig);
    let switch = Switch::start(cfg).unwrap();
    let c = switch.control();
    let e = c.add_port(&"pcap-out:/dev/null".parse().unwrap(), 2).unwrap_err();
    assert!(e.0.contains("fixed set of ports"), "{e}");
    assert!(c.remove_port(1).is_err());
    c.request_stop();
    assert!(switch.stop().unwrap().balanced());
}
