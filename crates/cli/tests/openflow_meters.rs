//! Meters through the OpenFlow channel, driven by the real `ovs-ofctl -O OpenFlow13`
//! (`add-meter`, `mod-meter`, `del-meter(s)`, `dump-meters`, `meter-stats`, `meter-features`),
//! with Open vSwitch 3.1's errors, and — as root, on veths — enforced by the PMDs:
//!
//! - a 100 pps drop meter on a flow holds a flood of 2000 frames sent as fast as a raw socket
//!   sends them to about its bucket (one second of its rate), and a flood paced at about 1000
//!   pps for a second to the bucket plus its rate over the flood's duration, in ORIG and CFLOWS; `meter-stats` counts the packets in and the band's drops,
//!   which are what did not come out, and `pmd-stats-show`'s `metered` drops are the same;
//! - the controller meter (`meter=controller`) holds the packet-ins of a flood to a
//!   `controller` flow to its rate;
//! - deleting a meter deletes the flows that name it.
//!
//! Skipped when `ovs-ofctl` is missing, unless `RQVS_REQUIRE_OVS=1`; the traffic part when the
//! test cannot make namespaces, unless `RQVS_REQUIRE_NETNS=1`.

mod common;
mod ofswitch;
use common::{ctl, TempDir};
use ofswitch::OfSwitch;

use std::time::{Duration, Instant};

use rqvs_flow::frame::build_frame;
use rqvs_flow::key::{ETH_TYPE_IP, IPPROTO_UDP};
use rqvs_flow::FlowKey;

const V: &str = "OpenFlow13";
/// The flood's UDP destination port (no other traffic has it).
const PORT: u16 = 7777;

fn flood_frame(i: u32) -> Vec<u8> {
    let mut k = FlowKey::ipv4(0x0a00_0001, 0x0a00_0002, IPPROTO_UDP, (i % 60000) as u16 + 1024, PORT);
    k.dl_type = ETH_TYPE_IP;
    k.nw_ttl = 64;
    k.dl_src = [2, 0, 0, 0, 0, 1];
    k.dl_dst = [2, 0, 0, 0, 0, 2];
    build_frame(&k.wire())
}

fn is_flood(f: &[u8]) -> bool {
    f.len() >= 38 && f[6..12] == [2, 0, 0, 0, 0, 1] && f[36..38] == PORT.to_be_bytes()
}

/// `name:N` in `text` (the first).
fn number(text: &str, name: &str) -> u64 {
    text.split(name)
        .nth(1)
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

/// The ovs-ofctl error of a command that must fail.
fn refused(sw: &OfSwitch, args: &[&str]) -> String {
    let out = sw.ofctl(V, args);
    assert!(!out.status.success(), "ovs-ofctl {args:?} succeeded: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn meters(design: &str) {
    if !rqvs_testkit::ovs::ofctl_available() {
        return;
    }
    let _one = ofswitch::serial();
    let tmp = TempDir::new(&format!("cli-openflow-meters-{design}"));
    let rules = tmp.join("rules.txt");
    std::fs::write(&rules, "priority=0,actions=drop\n").unwrap();
    let sw = OfSwitch::start(&tmp.0, &format!("mt{design}"), &rules, design, true);
    let target = sw.target();
    let t = target.as_str();

    let f = sw.ofctl_ok(V, &["meter-features", t]);
    assert!(f.contains("max_meter:262144 max_bands:8 max_color:0"), "{f}");
    assert!(f.contains("band_types: drop") && f.contains("capabilities: kbps pktps burst stats"), "{f}");

    // OVS's errors.
    let flow = format!("priority=10,udp,tp_dst={PORT},actions=meter:1,output:2");
    assert!(refused(&sw, &["add-flow", t, &flow]).contains("OFPMMFC_INVALID_METER"));
    sw.ofctl_ok(V, &["add-meter", t, "meter=1,pktps,stats,bands=type=drop,rate=100"]);
    assert!(refused(&sw, &["add-meter", t, "meter=1,pktps,bands=type=drop,rate=5"]).contains("OFPMMFC_METER_EXISTS"));
    assert!(refused(&sw, &["add-meter", t, "meter=2,kbps,bands=type=dscp_remark,rate=100,prec_level=1"])
        .contains("OFPMMFC_BAD_BAND"));
    assert!(refused(&sw, &["mod-meter", t, "meter=9,kbps,bands=type=drop,rate=100"]).contains("OFPMMFC_UNKNOWN_METER"));
    sw.ofctl_ok(V, &["add-meter", t, "meter=2,kbps,burst,bands=type=drop,rate=1000,burst_size=64"]);
    sw.ofctl_ok(V, &["mod-meter", t, "meter=2,kbps,bands=type=drop,rate=2000"]);
    let dump = sw.ofctl_ok(V, &["dump-meters", t]);
    assert!(dump.contains("meter=1 pktps stats bands=\ntype=drop rate=100"), "{dump}");
    assert!(dump.contains("meter=2 kbps bands=\ntype=drop rate=2000"), "{dump}");
    sw.ofctl_ok(V, &["add-flow", t, &flow]);
    sw.ofctl_ok(V, &["add-flow", t, "priority=9,udp,actions=meter:2,output:3"]);
    let stats = sw.ofctl_ok(V, &["meter-stats", t, "meter=1"]);
    assert!(stats.contains("meter:1 flow_count:1 packet_in_count:0 byte_in_count:0"), "{stats}");

    if sw.has_traffic() {
        // The flood: as fast as the raw socket sends.
        let n = 2000u32;
        let t0 = Instant::now();
        for i in 0..n {
            sw.send_from(1, &flood_frame(i));
        }
        let took = t0.elapsed();
        let out = sw.received_on(2, Duration::from_millis(500)).into_iter().filter(|f| is_flood(f)).count() as u64;
        // The bucket starts with one second of the rate (100); the rate adds 100/s.
        let most = 100 + (100.0 * took.as_secs_f64()).ceil() as u64 + 10;
        assert!((90..=most).contains(&out), "{out} of {n} frames passed a 100 pps meter in {took:?} ({design})");
        eprintln!("{design}: {out} of {n} frames sent in {took:?} passed a 100 pps drop meter");
        // A paced flood (about 1000 pps for about a second) after the bucket filled again: the
        // bucket plus the rate over the flood's duration.
        std::thread::sleep(Duration::from_millis(1100));
        let m = 1000u32;
        let t0 = Instant::now();
        for i in 0..m {
            sw.send_from(1, &flood_frame(i));
            while t0.elapsed() < Duration::from_micros(1000 * u64::from(i + 1)) {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        let took = t0.elapsed();
        let paced = sw.received_on(2, Duration::from_millis(500)).into_iter().filter(|f| is_flood(f)).count() as u64;
        let rate = 100.0 * took.as_secs_f64();
        assert!(
            (90 + (rate * 0.8) as u64..=100 + rate.ceil() as u64 + 10).contains(&paced),
            "{paced} of {m} frames paced over {took:?} passed a 100 pps meter ({design})"
        );
        eprintln!("{design}: {paced} of {m} frames paced over {took:?} passed a 100 pps drop meter");
        let out = out + paced;
        let n = n + m;
        std::thread::sleep(Duration::from_millis(200));
        let stats = sw.ofctl_ok(V, &["meter-stats", t, "meter=1"]);
        let (inp, dropped) = (number(&stats, "packet_in_count:"), number(&stats, "0: packet_count:"));
        assert_eq!(inp, u64::from(n), "every frame went through the meter: {stats}");
        assert_eq!(inp - dropped, out, "what the band did not drop came out: {stats}");
        let pmd = ctl(&sw.sock, &["pmd-stats-show"]);
        let metered: u64 =
            pmd.lines().filter(|l| l.trim_start().starts_with("dropped:")).map(|l| number(l, "metered: ")).sum();
        assert_eq!(metered, dropped, "{pmd}");

        // The controller meter holds the packet-ins of a flood to a controller flow.
        sw.ofctl_ok(V, &["add-meter", t, "meter=controller,pktps,bands=type=drop,rate=10"]);
        sw.ofctl_ok(V, &["add-flow", t, "priority=20,udp,tp_dst=7777,actions=controller"]);
        std::thread::sleep(Duration::from_millis(300));
        let before = ctl(&sw.sock, &["pmd-stats-show"]);
        let t0 = Instant::now();
        for i in 0..500 {
            sw.send_from(1, &flood_frame(i));
        }
        let took = t0.elapsed();
        std::thread::sleep(Duration::from_millis(500));
        let after = ctl(&sw.sock, &["pmd-stats-show"]);
        let sum = |text: &str, name: &str| -> u64 {
            text.lines().filter(|l| l.contains("to controller:")).map(|l| number(l, name)).sum()
        };
        let pins = sum(&after, "packet-ins sent: ") + sum(&after, "dropped: ")
            - sum(&before, "packet-ins sent: ")
            - sum(&before, "dropped: ");
        let held = sum(&after, "metered: ") - sum(&before, "metered: ");
        let most = 10 + (10.0 * took.as_secs_f64()).ceil() as u64 + 2;
        assert!((8..=most).contains(&pins), "{pins} packet-ins through a 10 pps controller meter: {after}");
        assert_eq!(pins + held, 500, "every packet-in passed the meter or was dropped by it: {after}");
        eprintln!("{design}: {pins} of 500 packet-ins sent in {took:?} passed a 10 pps controller meter");
    }

    // Deleting a meter deletes the flows that name it; del-meters deletes them all.
    sw.ofctl_ok(V, &["del-meter", t, "meter=1"]);
    let flows = sw.ofctl_ok(V, &["dump-flows", t]);
    assert!(!flows.contains("meter:1") && flows.contains("meter:2"), "{flows}");
    sw.ofctl_ok(V, &["del-meters", t]);
    let flows = sw.ofctl_ok(V, &["dump-flows", t]);
    assert!(!flows.contains("meter:"), "{flows}");
    let dump = sw.ofctl_ok(V, &["dump-meters", t]);
    assert!(!dump.contains("meter="), "{dump}");
}

#[test]
fn meters_orig() {
    meters("orig");
}

#[test]
fn meters_cflows() {
    meters("cflows");
}
