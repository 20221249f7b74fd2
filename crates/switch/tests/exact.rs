//! The switch forwards exactly what its rules say, byte for byte, for every design, port type
//! and PMD count.
//!
//! Rules with every action the switch executes (outputs, in_port, flood, VLAN push/rewrite/strip,
//! MAC and TOS rewrites, dec_ttl with expiring TTLs, controller, drop) and overlapping matches;
//! frames of every kind (TCP, UDP, ICMP, GRE, protocol 0, ARP, tagged, TTL 1, a damaged IPv4
//! header, one shorter than an Ethernet header) enter on port 1. The
//! expected frames on every port come from the reference classifier's winner and an independent
//! interpreter of the OpenFlow action list (`common::outputs`, shared with `tests/updates.rs`);
//! the frames that leave each port are compared
//! as multisets (PMDs may interleave flows). Every frame is accounted for. Every flow's
//! counters (`Control::flow_stats`, what FLOW multipart replies report) count exactly the
//! frames whose reference winner it is, and their lengths.
//!
//! Offline (pcap ports) always; on veth pairs between private namespaces (afpacket, afxdp) as
//! root, skipped otherwise (a failure with `RQVS_REQUIRE_NETNS=1`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rqvs_classify::Reference;
use rqvs_datapath::DesignKind;
use rqvs_flow::frame::{build_frame, extract_datapath, Frame};
use rqvs_flow::key::{ETH_TYPE_ARP, ETH_TYPE_IP, IPPROTO_ICMP, IPPROTO_TCP, IPPROTO_UDP, VLAN_CFI};
use rqvs_flow::{Action, Actions, FlowKey, Match, Rule, RuleId};
use rqvs_ofproto::record::FlowFilter;
use rqvs_ports::testnet::{self, RawSocket};
use rqvs_switch::{Control, FinalReport, PortSource, Switch, SwitchConfig, UpcallMode};

mod common;
mod pcap_out;
use common::{Rng, Topo, PORTS};

/// The action lists rules draw from: every executed action, alone and in combination.
fn palette() -> Vec<Vec<Action>> {
    use Action::*;
    vec![
        vec![Output(2)],
        vec![Output(3)],
        vec![Output(2), Output(3)],
        vec![Drop],
        vec![],
        vec![Flood],
        vec![All],
        vec![InPort],
        vec![Output(1)], // to the input port: skipped, so dropped
        vec![Output(9)], // no such port: skipped
        vec![SetDlSrc([2, 0, 0, 0, 0, 0xaa]), Output(2)],
        vec![Output(3), SetDlDst([2, 0, 0, 0, 0, 0xbb]), Output(2)],
        vec![SetVlanVid(77), Output(3)],
        vec![StripVlan, Output(2)],
        vec![SetNwTos(0xb8), Output(3)],
        vec![Output(2), DecTtl, Output(3)],
        vec![DecTtl, SetVlanVid(5), Output(2), StripVlan, Output(3)],
        vec![Controller(None), Output(2)],
        vec![Controller(Some(128))],
    ]
}

/// Overlapping rules: /24 and /16 destinations, TCP/UDP port ranges and exact ports, some on
/// VLAN-tagged frames only, ARP, a few broad low-priority ones; no catch-all (misses are
/// dropped).
fn rules(rng: &mut Rng) -> Vec<Rule> {
    let pal = palette();
    let mut out = Vec::new();
    let mut add = |m: Match, prio: u32, rng: &mut Rng| {
        let id = out.len() as u32;
        let acts = pal[rng.below(pal.len() as u64) as usize].clone();
        out.push(Rule::new(id, prio, m, Actions(acts)));
    };
    for i in 0..120u32 {
        let mut v = FlowKey::default();
        let mut k = FlowKey::default();
        v.dl_type = ETH_TYPE_IP;
        k.dl_type = u16::MAX;
        v.nw_dst = 0x0a00_0000 | ((i % 40) << 16) | ((i % 8) << 8);
        k.nw_dst = if i % 3 == 0 { 0xffff_0000 } else { 0xffff_ff00 };
        v.nw_dst &= k.nw_dst;
        let (mut sp, mut dp) = (rqvs_flow::PortRange::ANY, rqvs_flow::PortRange::ANY);
        match i % 4 {
            0 => {
                v.nw_proto = IPPROTO_TCP;
                k.nw_proto = u8::MAX;
                dp = rqvs_flow::PortRange::new(1000 * (i as u16 % 5), 1000 * (i as u16 % 5) + 1500).unwrap();
            }
            1 => {
                v.nw_proto = IPPROTO_UDP;
                k.nw_proto = u8::MAX;
                sp = rqvs_flow::PortRange::exact(53 + i as u16 % 3);
            }
            2 => {
                v.vlan_tci = VLAN_CFI;
                k.vlan_tci = VLAN_CFI;
            }
            _ => {}
        }
        add(Match::new(v, k, sp, dp).unwrap(), 100 + rng.below(400) as u32, rng);
    }
    let mut v = FlowKey::default();
    let mut k = FlowKey::default();
    v.dl_type = ETH_TYPE_ARP;
    k.dl_type = u16::MAX;
    add(Match::new(v, k, rqvs_flow::PortRange::ANY, rqvs_flow::PortRange::ANY).unwrap(), 50, rng);
    v.dl_type = ETH_TYPE_IP;
    v.nw_proto = IPPROTO_ICMP;
    k.nw_proto = u8::MAX;
    add(Match::new(v, k, rqvs_flow::PortRange::ANY, rqvs_flow::PortRange::ANY).unwrap(), 40, rng);
    // A later flow of an equal (priority, match) replaces an earlier one (OpenFlow's add; the
    // switch's table of record keeps only the last): the reference gets what the switch holds.
    let mut seen = std::collections::HashSet::new();
    let mut kept: Vec<Rule> = out.into_iter().rev().filter(|r| seen.insert((r.priority, r.matches))).collect();
    kept.reverse();
    kept
}

/// Frames of every kind, each a distinct flow now and then repeated (EMC and megaflow hits).
fn frames(rng: &mut Rng, n: usize) -> Vec<Vec<u8>> {
    let mut flows = Vec::new();
    for i in 0..n / 4 {
        let mut k = FlowKey::ipv4(
            0xc0a8_0000 | rng.below(65536) as u32,
            0x0a00_0000 | (rng.below(48) as u32) << 16 | (rng.below(8) as u32) << 8 | rng.below(256) as u32,
            [IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMP, 47, 0][rng.below(5) as usize],
            [53, 54, 80, 1234, 4000][rng.below(5) as usize],
            rng.below(6000) as u16,
        );
        k.dl_src = [2, 0, 0, 0, 1, (i % 250) as u8];
        k.dl_dst = [2, 0, 0, 0, 2, 1];
        k.nw_tos = (rng.below(64) as u8) << 2 | 1;
        if k.nw_proto == IPPROTO_ICMP {
            k.tp_src &= 0xff;
            k.tp_dst &= 0xff;
        }
        if rng.below(4) == 0 {
            k.vlan_tci = VLAN_CFI | (rng.below(4096) as u16);
        }
        if rng.below(20) == 0 {
            k = FlowKey { dl_type: ETH_TYPE_ARP, nw_proto: 1, nw_src: 0x0a00_0001, nw_dst: 0x0a00_0002, ..k };
            k.tp_src = 0;
            k.tp_dst = 0;
            k.nw_tos = 0;
        }
        let mut f = build_frame(&k.wire());
        if rng.below(5) == 0 {
            set_ttl(&mut f, rng.below(2) as u8); // TTL 0 or 1: dec_ttl expires it
        }
        flows.push(f);
    }
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(flows[rng.below(flows.len() as u64) as usize].clone());
    }
    // An IPv4 frame that ends inside its IP header: classified with no IPv4 fields (no rule
    // matches it); and one shorter than an Ethernet header: malformed.
    out.push(vec![2, 0, 0, 0, 2, 1, 2, 0, 0, 0, 1, 1, 0x08, 0x00, 0x45, 0x00]);
    out.push(vec![2, 0, 0, 0, 2, 1, 2, 0, 0, 0, 1, 1, 0x08]);
    out
}

fn set_ttl(f: &mut [u8], ttl: u8) {
    let Ok(fr) = Frame::new_checked(&f[..]) else { return };
    let Some(ip) = fr.layout().ipv4 else { return };
    f[ip + 8] = ttl;
    f[ip + 10] = 0;
    f[ip + 11] = 0;
    let ihl = usize::from(f[ip] & 0x0f) * 4;
    let mut sum: u32 = f[ip..ip + ihl].chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[ip + 10..ip + 12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

/// The expected frames per output port (1-based index into the map), sorted: each frame's
/// copies under its reference winner's actions, by the shared interpreter.
fn expected(rules: &[Rule], frames: &[Vec<u8>]) -> BTreeMap<u32, Vec<Vec<u8>>> {
    let reference = Reference::build(rules).unwrap();
    let mut out: BTreeMap<u32, Vec<Vec<u8>>> = BTreeMap::new();
    for f in frames {
        let Some(key) = extract_datapath(f, 1) else { continue };
        if let Some(r) = reference.lookup_rule(&key) {
            for (p, copy) in common::outputs(f, 1, &r.actions.0) {
                out.entry(p).or_default().push(copy);
            }
        }
    }
    for v in out.values_mut() {
        v.sort();
    }
    out
}

/// Every flow's packets and bytes are those of the frames (entering on port 1) whose reference
/// winner it is — whichever PMD, cache level or upcall path served them.
fn check_flow_counts(control: &Control, rules: &[Rule], frames: &[Vec<u8>], what: &str) {
    let reference = Reference::build(rules).unwrap();
    let mut want: BTreeMap<RuleId, (u64, u64)> = BTreeMap::new();
    for f in frames {
        let Some(key) = extract_datapath(f, 1) else { continue };
        if let Some(r) = reference.lookup_rule(&key) {
            let e = want.entry(r.id).or_default();
            e.0 += 1;
            e.1 += f.len() as u64;
        }
    }
    let stats = control.flow_stats(&FlowFilter::all());
    assert_eq!(stats.len(), rules.len(), "{what}: every flow reported");
    let got: BTreeMap<RuleId, (u64, u64)> = stats
        .iter()
        .filter(|s| s.counts.packets > 0)
        .map(|s| (s.rule.id, (s.counts.packets, s.counts.bytes)))
        .collect();
    assert!(want.len() > 20, "{what}: a weak workload ({} flows hit)", want.len());
    assert_eq!(got, want, "{what}: per-flow (packets, bytes)");
}

fn check(
    report: &FinalReport,
    sent: usize,
    short: u64,
    got: &BTreeMap<u32, Vec<Vec<u8>>>,
    want: &BTreeMap<u32, Vec<Vec<u8>>>,
    what: &str,
) {
    // The workload exercises what it claims to: many frames out of ports 2 and 3, drops,
    // expired TTLs, controller actions.
    eprintln!("{what}: want {:?}", want.iter().map(|(p, v)| (*p, v.len())).collect::<Vec<_>>());
    assert!(
        want.get(&2).map_or(0, Vec::len) > 300 && want.get(&3).map_or(0, Vec::len) > 300,
        "{what}: a weak workload"
    );
    assert!(
        report.total.dropped > 100
            && report.total.ttl_expired > 0
            && report.pmds.iter().map(|p| p.controller).sum::<u64>() > 0,
        "{what}: a weak workload\n{}",
        report.format()
    );
    assert!(report.balanced(), "{what}: every frame accounted for\n{}", report.format());
    assert_eq!(report.ports[0].rx_packets, sent as u64, "{what}: every frame sent was received\n{}", report.format());
    assert_eq!(report.total.lost, 0, "{what}: nothing lost below capacity");
    assert_eq!(report.total.malformed, short, "{what}: the frames shorter than an Ethernet header");
    for p in 1..=PORTS {
        let (g, w) = (got.get(&p).map_or(0, Vec::len), want.get(&p).map_or(0, Vec::len));
        assert_eq!(g, w, "{what}: frames out of port {p}\n{}", report.format());
        assert!(got.get(&p) == want.get(&p) || w == 0, "{what}: port {p}: the bytes differ");
    }
}

fn config(ports: Vec<PortSource>, rules: Vec<Rule>, design: DesignKind, pmds: usize) -> SwitchConfig {
    let mut cfg = SwitchConfig::new(ports, rules, design);
    cfg.pmds = pmds;
    cfg.datapath.emc_insert_prob = 0.2;
    cfg
}

/// How the slow path runs in a test: the handler thread (the default; `cap` packets in flight
/// per PMD) or inline.
#[derive(Clone, Copy)]
enum Up {
    Handler(usize),
    Inline,
}

fn with_upcalls(mut cfg: SwitchConfig, up: Up) -> SwitchConfig {
    match up {
        Up::Handler(cap) => {
            cfg.upcalls = UpcallMode::Handler;
            cfg.orig.upcall_queue = cap;
        }
        Up::Inline => cfg.upcalls = UpcallMode::Inline,
    }
    cfg
}

fn offline(design: DesignKind, pmds: usize) {
    offline_with(design, pmds, Up::Handler(4096));
}

/// Offline: port 1 a pcap-in of the frames, ports 2 and 3 pcap-out files. With the handler
/// thread, a PMD reading files waits for room instead of losing packets, however small its cap.
fn offline_with(design: DesignKind, pmds: usize, up: Up) {
    offline_tweaked(design, pmds, up, "", |_| {});
}

/// Port 1 a pcap-in port of `frames`, ports 2 and 3 pcap-out files at `out(2)`, `out(3)`.
fn pcap_ports(frames: &[Vec<u8>], out: impl Fn(u32) -> std::path::PathBuf) -> Vec<PortSource> {
    vec![
        PortSource::Frames { name: "in".into(), frames: frames.to_vec() },
        PortSource::Spec(format!("pcap-out:{}", out(2).display()).parse().unwrap()),
        PortSource::Spec(format!("pcap-out:{}", out(3).display()).parse().unwrap()),
    ]
}

/// [`offline_with`], the switch's configuration changed by `tweak` (named `tag` in paths).
fn offline_tweaked(design: DesignKind, pmds: usize, up: Up, tag: &str, tweak: impl FnOnce(&mut SwitchConfig)) {
    let mut rng = Rng(0x5eed_0000 + pmds as u64);
    let (rules, frames) = (rules(&mut rng), frames(&mut rng, 3000));
    let want = expected(&rules, &frames);
    let rules_kept = rules.clone();
    let mode = match up {
        Up::Handler(cap) => format!("handler{cap}"),
        Up::Inline => "inline".into(),
    };
    let dir = rqvs_testkit::TempDir::new(&format!("switch-exact-{}{tag}-{pmds}-{mode}", design.name()));
    let out = |p: u32| dir.join(format!("p{p}.pcap"));
    let mut cfg = with_upcalls(config(pcap_ports(&frames, out), rules, design, pmds), up);
    tweak(&mut cfg);
    let tuplemerge = cfg.cflows.classifier == rqvs_datapath::CflowsClassifier::TupleMerge;
    let sw = Switch::start(cfg).unwrap();
    let rules = rules_kept;
    let t0 = Instant::now();
    while !sw.is_finished() && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let what = format!("pcap {} {pmds} PMDs {mode}", design.name());
    check_flow_counts(&sw.control(), &rules, &frames, &what);
    let report = sw.stop().unwrap();
    let mut got = BTreeMap::new();
    for p in [2, 3] {
        got.insert(p, pcap_out::read_pcap(&out(p)));
    }
    // Port 1 is a pcap-in port: what the rules send back there is counted as dropped by it.
    let mut want = want;
    let back = want.remove(&1).map_or(0, |v| v.len() as u64);
    assert_eq!(report.ports[0].tx_dropped, back, "in_port/flood copies to the offline input port\n{}", report.format());
    drop(dir);
    check(&report, frames.len(), 1, &got, &want, &format!("pcap {} {pmds} PMDs", design.name()));
    if design != DesignKind::Cflows {
        let upcalls: u64 = report.pmds.iter().map(|p| p.datapath.miss_with_success_upcall).sum();
        assert!(upcalls > 100, "the workload exercises the slow path ({upcalls} upcalls)");
    }
    if tuplemerge {
        // No learned index: every classifier answer from TupleMerge.
        assert!(report.pmds.iter().all(|p| p.datapath.model_hits == 0 && p.datapath.coverage == Some(0.0)));
        assert!(report.pmds.iter().map(|p| p.datapath.remainder_hits).sum::<u64>() > 100);
    }
}

/// Ingress policing on port 1 (`SwitchConfig::policing`): of a pcap-in port's frames, read as
/// fast as the PMD takes them, the burst and what the rate adds pass and are forwarded exactly
/// as the rules say; the rest are dropped before they are parsed, counted as `dropped` and
/// `policed` on that port, so every frame is still accounted for.
#[test]
fn pcap_policed_port_passes_its_burst_and_rate() {
    for (design, pmds) in [(DesignKind::Orig, 1), (DesignKind::Cflows, 2)] {
        let mut rng = Rng(0x5eed_1000 + pmds as u64);
        let (rules, frames) = (rules(&mut rng), frames(&mut rng, 3000));
        let dir = rqvs_testkit::TempDir::new(&format!("switch-policed-{}-{pmds}", design.name()));
        let out = |p: u32| dir.join(format!("p{p}.pcap"));
        let mut cfg = config(pcap_ports(&frames, out), rules.clone(), design, pmds);
        // 1 kpps, a burst of 400 frames (200 per PMD).
        cfg.policing = vec![Some("1/0.4".parse().unwrap())];
        let sw = Switch::start(cfg).unwrap();
        let t0 = Instant::now();
        while !sw.is_finished() && t0.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let report = sw.stop().unwrap();
        let what = format!("{} {pmds} PMDs\n{}", design.name(), report.format());
        assert!(report.balanced(), "{what}");
        let p1 = report.ports[0].frames;
        assert_eq!(p1.rx, frames.len() as u64, "{what}");
        let passed = p1.rx - p1.policed;
        let most = 400 + (report.uptime_s * 1e3) as u64 + pmds as u64;
        assert!(passed >= 400 && passed <= most, "{what}: {passed} passed, at most {most}");
        assert!(p1.policed > 0 && p1.dropped >= p1.policed, "{what}");
        assert!(report.ports[1..].iter().all(|p| p.frames.policed == 0), "{what}");
        // What left is what the rules make of some of the frames: never more copies of a frame
        // than the reference gives all of them.
        let want = expected(&rules, &frames);
        for p in [2, 3] {
            let mut left = want.get(&p).cloned().unwrap_or_default();
            let got = pcap_out::read_pcap(&out(p));
            for f in &got {
                let i = left.iter().position(|w| w == f);
                assert!(i.is_some(), "{what}: port {p} sent a frame the rules do not make");
                left.swap_remove(i.unwrap());
            }
        }
    }
}

/// CFLOWS with TupleMerge alone (`--classifier tm`), two PMDs.
#[test]
fn pcap_cflows_tuplemerge_2() {
    offline_tweaked(DesignKind::Cflows, 2, Up::Handler(4096), "-tm", |c| {
        c.cflows.classifier = rqvs_datapath::CflowsClassifier::TupleMerge;
    });
}

fn on_veths(ty: &str, design: DesignKind, pmds: usize) {
    on_veths_with(ty, design, pmds, Up::Handler(4096));
}

/// On veths (the common [`Topo`]: `sw` holds p1..p3, `hN` holds eN): frames are injected on e1
/// and captured on e1..e3.
fn on_veths_with(ty: &str, design: DesignKind, pmds: usize, up: Up) {
    let mut rng = Rng(0x5eed_1000 + pmds as u64);
    let (rules, mut frames) = (rules(&mut rng), frames(&mut rng, 3000));
    // A frame shorter than an Ethernet header cannot be sent on a veth (the kernel says EINVAL).
    frames.retain(|f| f.len() >= 14);
    let want = expected(&rules, &frames);
    let rules_kept = rules.clone();
    let topo = Topo::new("exact", pmds);
    let socks: Vec<RawSocket> = (1..=PORTS as usize).map(|p| topo.host_socket(p)).collect();
    let ports: Vec<PortSource> = (1..=PORTS).map(|p| PortSource::Spec(format!("p{p}:{ty}").parse().unwrap())).collect();
    let cfg = with_upcalls(config(ports, rules, design, pmds), up);
    let sw = topo.sw.run(move || Switch::start(cfg)).unwrap().unwrap();
    for (i, f) in frames.iter().enumerate() {
        socks[0].send(f).unwrap();
        if i % 32 == 31 {
            // Below capacity: this test checks exactness, not speed.
            std::thread::sleep(Duration::from_micros(300));
        }
    }
    // Wait until the switch has taken every frame and each has its fate (a starved switch on a
    // loaded machine is still working when the hosts' sockets have been quiet for 400 ms).
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(30) {
        let r = sw.control().show();
        if r.total.rx >= frames.len() as u64 && r.balanced() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut got = BTreeMap::new();
    for (i, s) in socks.iter().enumerate() {
        let mut v = s.drain(Duration::from_millis(400)).unwrap();
        v.sort();
        got.insert(i as u32 + 1, v);
    }
    let what = format!("{ty} {} {pmds} PMDs", design.name());
    check_flow_counts(&sw.control(), &rules_kept, &frames, &what);
    let report = sw.stop().unwrap();
    check(&report, frames.len(), 0, &got, &want, &what);
}

macro_rules! offline_tests {
    ($($name:ident => ($d:expr, $p:expr)),* $(,)?) => {
        $( #[test] fn $name() { offline($d, $p); } )*
    };
}

offline_tests!(
    pcap_orig_1 => (DesignKind::Orig, 1),
    pcap_orig_2 => (DesignKind::Orig, 2),
    pcap_ccache_1 => (DesignKind::Ccache, 1),
    pcap_ccache_2 => (DesignKind::Ccache, 2),
    pcap_cflows_1 => (DesignKind::Cflows, 1),
    pcap_cflows_4 => (DesignKind::Cflows, 4),
    pcap_orig_4 => (DesignKind::Orig, 4),
);

#[test]
fn pcap_orig_inline_2() {
    offline_with(DesignKind::Orig, 2, Up::Inline);
}

#[test]
fn pcap_ccache_inline_1() {
    offline_with(DesignKind::Ccache, 1, Up::Inline);
}

/// Four packets in flight per PMD: a file's PMD waits for the handler and loses nothing.
#[test]
fn pcap_orig_handler_cap_4() {
    offline_with(DesignKind::Orig, 2, Up::Handler(4));
}

#[test]
fn afpacket_orig_inline_2() {
    if testnet::available("afpacket_orig_inline_2") {
        on_veths_with("afpacket", DesignKind::Orig, 2, Up::Inline);
    }
}

macro_rules! veth_tests {
    ($($name:ident => ($ty:literal, $d:expr, $p:expr)),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                if testnet::available(stringify!($name)) {
                    on_veths($ty, $d, $p);
                }
            }
        )*
    };
}

veth_tests!(
    afpacket_orig_1 => ("afpacket", DesignKind::Orig, 1),
    afpacket_orig_2 => ("afpacket", DesignKind::Orig, 2),
    afpacket_ccache_2 => ("afpacket", DesignKind::Ccache, 2),
    afpacket_cflows_1 => ("afpacket", DesignKind::Cflows, 1),
    afpacket_cflows_4 => ("afpacket", DesignKind::Cflows, 4),
    afxdp_orig_1 => ("afxdp", DesignKind::Orig, 1),
    afxdp_ccache_1 => ("afxdp", DesignKind::Ccache, 1),
    afxdp_cflows_2 => ("afxdp", DesignKind::Cflows, 2),
    afxdp_orig_4 => ("afxdp", DesignKind::Orig, 4),
);

/// A handler queue with no room (cap 0) on a live port: every upcall is lost — counted on its
/// port and in `pmd-stats-show`'s `lost` — and every frame is still accounted for.
#[test]
fn afpacket_orig_handler_full_loses_and_counts() {
    if !testnet::available("afpacket_orig_handler_full_loses_and_counts") {
        return;
    }
    let mut rng = Rng(0x5eed_2000);
    let (rules, mut frames) = (rules(&mut rng), frames(&mut rng, 500));
    frames.retain(|f| f.len() >= 14); // the kernel refuses to send shorter ones
    let topo = Topo::new("exactf", 1);
    let sock = topo.host_socket(1);
    let ports: Vec<PortSource> =
        (1..=PORTS).map(|p| PortSource::Spec(format!("p{p}:afpacket").parse().unwrap())).collect();
    let cfg = with_upcalls(config(ports, rules, DesignKind::Orig, 1), Up::Handler(0));
    let sw = topo.sw.run(move || Switch::start(cfg)).unwrap().unwrap();
    for f in &frames {
        sock.send(f).unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    let stats = sw.control().pmd_stats();
    let report = sw.stop().unwrap();
    assert!(report.balanced(), "{}", report.format());
    assert_eq!(report.ports[0].rx_packets, frames.len() as u64);
    assert_eq!(report.total.lost, frames.len() as u64, "{}", report.format());
    let mut text = String::new();
    stats[0].format(&mut text);
    assert!(text.contains(&format!("  lost: {}\n", report.total.lost)), "{text}");
    assert_eq!(stats[0].datapath.miss_with_success_upcall, 0, "{text}");
}
