//! The switch under a Tuple Space Explosion–style attack entering on a second port: benign
//! frames on port 1, attack frames on port 2 (each a bit flipped in a header field a rule
//! matches, so ORIG's wildcard tracking installs megaflows of many masks), both forwarded by the
//! same OpenFlow table (ClassBench acl1_1k converted, every flow `output:3`). Every frame out of
//! port 3 is the one the reference classifier's winner sends there, whichever port it came in
//! on, every frame is accounted for per port, and the attack does what it claims: in ORIG more
//! than twice the masks of the benign frames, in CCACHE upcalls and megaflows (its model takes
//! megaflows out of the subtables), in CFLOWS no megaflow at all. `--design auto`, set to leave
//! ORIG at a mask count only the attack reaches, moves every PMD to CFLOWS, says why in
//! `pmd-stats-show` and the metrics, and forwards exactly all along. Offline (in-memory input
//! ports, a pcap-out port), so it always runs; the same with real traffic on veths is
//! `scripts/bench_switch.py --attack`.

mod pcap_out;

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use rqvs_classify::Reference;
use rqvs_datapath::{AutoConfig, DesignKind, MaskEviction, MaskLimit};
use rqvs_flow::convert::classbench_to_openflow;
use rqvs_flow::frame::{build_frame, extract_datapath};
use rqvs_flow::{formats, io, Action, Actions, FlowKey, Rule};
use rqvs_ofproto::OfprotoTable;
use rqvs_switch::{PortSource, Switch, SwitchConfig};

/// The embedded acl1_1k set and trace of `rqvs-experiment`.
fn workload() -> (Vec<Rule>, Vec<FlowKey>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiment/data");
    let rules = formats::parse_rules("acl1_1k", &io::read_text(&dir.join("acl1_1k_rules.xz")).unwrap()).unwrap();
    let trace =
        formats::trace::parse_trace("acl1_1k_trace", &io::read_text(&dir.join("acl1_1k_trace.xz")).unwrap()).unwrap();
    (rules, trace.into_iter().map(|e| e.key).collect())
}

/// For each of the first rules, the key at the low corner of its match with one bit of the
/// source or destination address flipped at every position the rule matches: the slow path
/// un-wildcards each address up to the flipped bit, a new mask per position.
fn attack_keys(rules: &[Rule]) -> Vec<FlowKey> {
    let mut out = Vec::new();
    for r in rules.iter().take(60) {
        let m = &r.matches;
        let mut k = *m.value();
        k.tp_src = m.tp_src_range().lo;
        k.tp_dst = m.tp_dst_range().lo;
        for bit in 0..32 {
            if m.mask().nw_src >> bit & 1 == 1 {
                out.push(FlowKey { nw_src: k.nw_src ^ (1 << bit), ..k });
            }
            if m.mask().nw_dst >> bit & 1 == 1 {
                out.push(FlowKey { nw_dst: k.nw_dst ^ (1 << bit), ..k });
            }
        }
    }
    out
}

fn run(design: DesignKind, pmds: usize) {
    run_defended(design, pmds, None, None);
}

/// The frames of `keys`, as a port delivers them.
fn frames(keys: &[FlowKey]) -> Vec<Vec<u8>> {
    keys.iter().map(|k| build_frame(&k.wire())).collect()
}

/// The frames port 3 must send, sorted: every frame of `inputs` (frames, in_port) some flow
/// matches, `loops` times.
fn expected(flows: &[Rule], inputs: &[(&[Vec<u8>], u32)], loops: usize) -> Vec<Vec<u8>> {
    let reference = Reference::build(flows).unwrap();
    let mut want: Vec<Vec<u8>> = inputs
        .iter()
        .flat_map(|(fs, port)| {
            fs.iter().filter(|f| reference.lookup_rule(&extract_datapath(f, *port).unwrap()).is_some())
        })
        .flat_map(|f| std::iter::repeat_n(f.clone(), loops))
        .collect();
    want.sort();
    want
}

/// [`run`] with the defences against Tuple Space Explosion set (`OrigConfig::mask_limit`,
/// `mfcguard`): the frames out of port 3 are still exactly the reference's, and with a mask
/// limit no PMD ever reports more masks than it.
fn run_defended(design: DesignKind, pmds: usize, mask_limit: Option<MaskLimit>, mfcguard: Option<u64>) {
    let (classbench, benign) = workload();
    let flows = reference_flows(&classbench);
    let attack = attack_keys(&classbench);
    assert!(attack.len() > 1000, "{} attack keys", attack.len());
    let (benign, attack) = (frames(&benign), frames(&attack));
    // Port 3 sends out every frame some flow matches, whichever port it entered.
    let want = expected(&flows, &[(&benign, 1), (&attack, 2)], 1);

    let dir = rqvs_testkit::TempDir::new(&format!("switch-attack-{}-{pmds}", design.name()));
    let out = dir.join("p3.pcap");
    let ports = vec![
        PortSource::Frames { name: "benign".into(), frames: benign.clone() },
        PortSource::Frames { name: "attack".into(), frames: attack.clone() },
        PortSource::Spec(format!("pcap-out:{}", out.display()).parse().unwrap()),
    ];
    let mut cfg = SwitchConfig::new(ports, flows, design);
    cfg.pmds = pmds;
    (cfg.orig.mask_limit, cfg.orig.mfcguard) = (mask_limit, mfcguard);
    let sw = Switch::start(cfg).unwrap();
    let t0 = Instant::now();
    while !sw.is_finished() && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let report = sw.stop().unwrap();
    let what = format!("{} {pmds} PMDs", design.name());
    assert!(report.balanced(), "{what}: every frame accounted for\n{}", report.format());
    assert_eq!(report.ports[0].rx_packets, benign.len() as u64, "{what}");
    assert_eq!(report.ports[1].rx_packets, attack.len() as u64, "{what}");
    assert_eq!(report.total.lost, 0, "{what}");
    let got = pcap_out::read_pcap(&out);
    assert_eq!(got.len(), want.len(), "{what}: frames out of port 3");
    assert!(got == want, "{what}: the frames out of port 3 differ from the reference's");
    let masks: u64 = report.pmds.iter().map(|p| p.datapath.masks).max().unwrap_or(0);
    let megaflows: u64 = report.pmds.iter().map(|p| p.datapath.megaflows).sum();
    if let Some(limit) = mask_limit {
        assert!(masks as usize <= limit.masks, "{what}: {masks} masks over the limit {}", limit.masks);
        let acted: u64 = report
            .pmds
            .iter()
            .map(|p| p.datapath.masks_evicted + p.datapath.mask_limit_refused + p.datapath.mask_limit_narrowed)
            .sum();
        assert!(acted > 0, "{what}: the limit acted\n{}", report.format());
        let mut show = String::new();
        report.pmds.iter().for_each(|p| p.format(&mut show));
        assert!(
            show.contains("  mask limit: ") && show.contains("  mfcguard: "),
            "{what}: pmd-stats-show shows it\n{show}"
        );
        return;
    }
    match design {
        DesignKind::Cflows => assert_eq!(megaflows, 0, "{what}: CFLOWS has no megaflows"),
        DesignKind::Auto => unreachable!("auto_moves_to_cflows_under_attack checks auto"),
        DesignKind::Ccache => {
            // CCACHE's model takes megaflows out of the megaflow cache's subtables (their masks
            // go with them): the attack's megaflows are there, served by the model.
            let upcalls: u64 = report.pmds.iter().map(|p| p.datapath.miss_with_success_upcall).sum();
            assert!(upcalls > attack.len() as u64 / 2, "{what}: the attack's frames upcall ({upcalls})");
            assert!(megaflows > 1000, "{what}: {megaflows} megaflows");
        }
        DesignKind::Orig => {
            // The masks the slow path gives the benign frames alone, at most: the attack
            // multiplies them.
            let table = OfprotoTable::build(&reference_flows(&classbench)).unwrap();
            let benign_masks: HashSet<FlowKey> =
                benign.iter().map(|f| table.classify(&extract_datapath(f, 1).unwrap()).megaflow.mask).collect();
            assert!(
                masks as usize > 2 * benign_masks.len(),
                "{what}: the attack multiplied the masks ({masks}; the benign frames' {})",
                benign_masks.len()
            );
        }
    }
}

/// `--design auto` with 2 PMDs, starting in ORIG, set to move to CFLOWS at a mask count the
/// benign frames alone never reach (and never to leave it): the attack on port 2 makes every
/// PMD move, the log says why, `pmd-stats-show` and the metrics count the switches and the
/// time in each design, and every frame out of port 3 is the reference's through the switch.
#[test]
fn auto_moves_to_cflows_under_attack() {
    let (classbench, benign) = workload();
    let flows = reference_flows(&classbench);
    let table = OfprotoTable::build(&flows).unwrap();
    let benign_masks: HashSet<FlowKey> = benign
        .iter()
        .map(|k| table.classify(&extract_datapath(&build_frame(&k.wire()), 1).unwrap()).megaflow.mask)
        .collect();
    let (benign, attack) = (frames(&benign), frames(&attack_keys(&classbench)));
    // Enough loops for several decision windows.
    let loops = 8;
    let want = expected(&flows, &[(&benign, 1), (&attack, 2)], loops);
    let dir = rqvs_testkit::TempDir::new("switch-attack-auto");
    let out = dir.join("p3.pcap");
    let ports = vec![
        PortSource::Frames { name: "benign".into(), frames: benign.clone() },
        PortSource::Frames { name: "attack".into(), frames: attack.clone() },
        PortSource::Spec(format!("pcap-out:{}", out.display()).parse().unwrap()),
    ];
    // More masks than the benign frames can make: only the attack gets a PMD there.
    let masks = benign_masks.len() as u64 + 1;
    let mut cfg = SwitchConfig::new(ports, flows, DesignKind::Auto);
    cfg.pmds = 2;
    cfg.input_loops = loops as u64;
    cfg.auto = AutoConfig {
        initial: Some(DesignKind::Orig),
        window_ns: 1_000_000,
        min_window_packets: 16,
        min_dwell_ns: 1_000_000,
        to_cflows_upcall_share: f64::INFINITY,
        to_cflows_subtables: f64::INFINITY,
        to_cflows_masks: masks,
        ccache: false,
        leave_cflows_coverage: 0.0,
        ..AutoConfig::default()
    };
    let sw = Switch::start(cfg).unwrap();
    let t0 = Instant::now();
    while !sw.is_finished() && t0.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let report = sw.stop().unwrap();
    assert!(report.balanced(), "auto: every frame accounted for\n{}", report.format());
    assert_eq!(report.ports[0].rx_packets, (benign.len() * loops) as u64);
    assert_eq!(report.ports[1].rx_packets, (attack.len() * loops) as u64);
    assert_eq!(report.total.lost, 0);
    let got = pcap_out::read_pcap(&out);
    assert_eq!(got.len(), want.len(), "auto: frames out of port 3");
    assert!(got == want, "auto: the frames out of port 3 differ from the reference's");
    let mut show = String::new();
    for p in &report.pmds {
        p.format(&mut show);
    }
    for p in &report.pmds {
        let a = p.auto.as_ref().expect("an auto PMD reports its controller");
        assert_eq!((p.design, a.design_switches), ("cflows", 1), "pmd {}: moved to CFLOWS once\n{show}", p.pmd);
        let why = a.last_switch.as_deref().unwrap_or("");
        assert!(why.starts_with("orig -> cflows: ") && why.contains(&format!("masks >= {masks}")), "{why}");
        assert!(a.time_orig_s > 0.0 && a.time_cflows_s > 0.0 && a.time_ccache_s == 0.0, "{a:?}");
    }
    assert!(show.contains("pmd thread 0 core_id unpinned (auto: cflows):"), "{show}");
    assert!(show.contains("  design switches: 1 (time in orig "), "{show}");
    let settings = format!(
        "initial=orig,window-ms=1,min-window-packets=16,min-dwell-ms=1,to-cflows-upcall-share=inf,\
         to-cflows-subtables=inf,to-cflows-masks={masks},leave-cflows-coverage=0,ccache=false"
    );
    assert!(show.contains(&format!("  auto settings: {settings}\n")), "{show}");
    let metrics = rqvs_switch::metrics::render_report(&report, None, None, false);
    for pmd in 0..2 {
        assert!(metrics.contains(&format!("rqvs_pmd_design_switches_total{{pmd=\"{pmd}\"}} 1\n")), "{metrics}");
        assert!(metrics.contains(&format!("rqvs_pmd_design{{pmd=\"{pmd}\",design=\"cflows\"}} 1\n")), "{metrics}");
        assert!(metrics.contains(&format!("rqvs_pmd_design_seconds_total{{pmd=\"{pmd}\",design=\"orig\"}} ")));
    }
}

fn reference_flows(classbench: &[Rule]) -> Vec<Rule> {
    classbench_to_openflow(classbench, &Actions(vec![Action::Output(3)])).unwrap().flows
}

#[test]
fn orig_under_attack_forwards_exactly() {
    run(DesignKind::Orig, 1);
}

#[test]
fn orig_with_two_pmds_under_attack_forwards_exactly() {
    run(DesignKind::Orig, 2);
}

#[test]
fn ccache_under_attack_forwards_exactly() {
    run(DesignKind::Ccache, 2);
}

#[test]
fn cflows_under_attack_forwards_exactly() {
    run(DesignKind::Cflows, 2);
}

#[test]
fn orig_and_ccache_with_defences_under_attack_forward_exactly_within_the_mask_limit() {
    for (design, eviction) in [
        (DesignKind::Orig, MaskEviction::Narrow),
        (DesignKind::Orig, MaskEviction::LeastHit),
        (DesignKind::Ccache, MaskEviction::Refuse),
    ] {
        run_defended(design, 2, Some(MaskLimit { masks: 32, eviction }), Some(50_000_000));
    }
}
