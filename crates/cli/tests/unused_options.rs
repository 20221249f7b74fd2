//! An option a command accepts but would not use with the others given is a usage error (exit
//! code 2, one line naming the option and why), never silently ignored — and the same option
//! where it is used is accepted. One case per rule of each command's `unused` function.

mod common;
use common::{rqvs, TempDir};

fn data(name: &str) -> String {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/default").join(name).display().to_string()
}

/// `args` fails as a usage error whose message starts with `--option: …` and contains `what`.
fn refused(args: &[&str], what: &str) {
    let out = rqvs(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
    assert!(err.starts_with("rqvs: error: --") && err.contains(what), "{args:?}: {err}");
}

/// `args` is accepted (it may still fail for other reasons, but not as a usage error).
fn accepted(args: &[&str]) {
    let out = rqvs(args);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn replay_and_compare_refuse_what_the_designs_do_not_use() {
    let short = ["--verify", "100"];
    for (args, what) in [
        (
            &["replay", "--design", "cflows", "--cd"][..],
            "--cd: the cuckoo distributor is ORIG's and CCACHE's; not used by --design cflows",
        ),
        (&["replay", "--design", "cflows", "--flow-limit", "10"], "--flow-limit: the megaflow flow limit"),
        (&["replay", "--design", "cflows", "--idle", "1"], "--idle: megaflows' idle expiry"),
        (&["replay", "--design", "cflows", "--revalidator", "inline"], "--revalidator: megaflow revalidation"),
        (
            &["replay", "--design", "orig", "--policy", "delayed"],
            "--policy: CFLOWS' update policy; not used by --design orig",
        ),
        (
            &["replay", "--design", "ccache", "--classifier", "nmu"],
            "--classifier: CFLOWS' classifier; not used by --design ccache",
        ),
        (
            &["replay", "--design", "orig", "--retrain-threshold", "0.2"],
            "--retrain-threshold: the learned designs' setting",
        ),
        (&["replay", "--design", "cflows", "--train-interval", "0.1"], "--train-interval: CCACHE's setting"),
        (
            &["replay", "--no-emc", "--emc-prob", "0.2"],
            "--emc-prob: the EMC's insertion probability; not used with --no-emc",
        ),
        (&["replay", "--no-emc", "--emc-entries", "1024"], "--emc-entries: the EMC's size; not used with --no-emc"),
        (&["compare", "--no-emc", "--emc-entries", "1024"], "--emc-entries: the EMC's size; not used with --no-emc"),
        (&["replay", "--rx-ring", "64"], "--rx-ring: the receive ring of --rate, --rate-search and --attack"),
        (&["replay", "--min-support", "4"], "--min-support: the online predictor's setting"),
        (&["replay", "--predict", "oracle", "--window-ms", "3"], "--window-ms: the online predictor's setting"),
        (&["replay", "--coflow-truth", "t.tsv"], "--coflow-truth: the oracle's ground truth"),
        (&["replay", "--pmds", "2", "--plot", "x.svg"], "--plot: draws one run's time series; not with --pmds"),
        (
            &["compare", "--designs", "orig,ccache", "--classifier", "tm"],
            "--classifier: CFLOWS' classifier; not used by --designs orig,ccache",
        ),
        (&["compare", "--designs", "cflows", "--cd"], "not used by --designs cflows"),
        (&["compare", "--pmds", "1"], "--pmds: rqvs replay only"),
        (&["replay", "--auto", "initial=orig"], "--auto: auto's settings; not used by --design orig"),
        (
            &["compare", "--designs", "orig,cflows", "--auto", "window-ms=5"],
            "--auto: auto's settings; not used by --designs orig,cflows",
        ),
    ] {
        refused(&[args, &short[..]].concat(), what);
    }
    // Where something run uses them, the same options are accepted.
    for args in [
        &["replay", "--design", "orig", "--cd", "--flow-limit", "5000", "--idle", "2", "--revalidator", "inline"][..],
        &["replay", "--design", "cflows", "--policy", "delayed", "--classifier", "nmu", "--retrain-threshold", "0.2"],
        &["replay", "--design", "ccache", "--train-interval", "0.02", "--emc-prob", "0.1"],
        &["replay", "--design", "cflows", "--emc-entries", "65536"],
        &["compare", "--designs", "orig,cflows", "--emc-entries", "1024"],
        &["replay", "--rate", "1e6", "--rx-ring", "512"],
        &["replay", "--predict", "online", "--min-support", "4", "--window-ms", "3"],
        &["compare", "--designs", "orig,cflows", "--cd", "--policy", "delayed", "--classifier", "nmu"],
        &["replay", "--design", "auto", "--auto", "initial=orig", "--auto", "window-ms=5,ccache=false"],
        &["compare", "--designs", "orig,auto", "--auto", "initial=orig"],
    ] {
        accepted(&[args, &short[..]].concat());
    }
}

#[test]
fn other_commands_refuse_what_they_would_not_use() {
    let rules = data("acl1_1k_rules.xz");
    let trace = data("acl1_1k_trace.xz");
    let dir = TempDir::new("unused-options");
    let out = dir.join("x").display().to_string();
    for (args, what) in [
        (vec!["trace", "--rules", &rules, "tcp", "--packets", "5"], "--packets: how many packets of --trace"),
        (vec!["trace", "--rules", &rules, "tcp", "--in-port", "2"], "--in-port: the in_port of --trace's packets"),
        (
            vec!["switch", "--design", "orig", "--classifier", "tm"],
            "--classifier: CFLOWS' classifier; not used by --design orig",
        ),
        (
            vec!["switch", "--design", "cflows", "--upcalls", "inline"],
            "--upcalls: where ORIG and CCACHE run the slow path",
        ),
        (vec!["switch", "--fail-mode", "secure"], "--fail-mode: a controller connection's setting"),
        (
            vec!["switch", "--design", "cflows", "--auto", "window-ms=5"],
            "--auto: auto's settings; not used by --design cflows",
        ),
        (vec!["switch", "--design", "auto", "--auto", "window-ms=5,window-ms=6"], "--auto: window-ms: given twice"),
        (vec!["switch", "--inactivity-probe", "2"], "--inactivity-probe: a controller connection's setting"),
        (vec!["switch", "--datapath-id", "0xabc"], "--datapath-id: the OpenFlow channel's setting"),
        (
            vec!["switch", "--ovsdb", "unix:/nonexistent.sock", "--port", "p1"],
            "with --ovsdb the ports are the bridge's interfaces",
        ),
        (vec!["switch", "--ovsdb", "--openflow", "ptcp:6653"], "--openflow: with --ovsdb the OpenFlow channel"),
        (
            vec!["switch", "--bridge", "br1"],
            "--bridge: the bridge ovs-appctl's commands name; used only with --unixctl",
        ),
        // A policer on a port that does not exist polices nothing.
        (vec!["switch", "--ingress-policing", "4=100"], "--ingress-policing 4=100/16: no port 4: the ports are 1..3"),
        (vec!["switch", "--ingress-policing", "veth9=100"], "--ingress-policing veth9=100/16: no port named 'veth9'"),
        (
            vec!["switch", "--ingress-policing", "1=100", "--ingress-policing", "pcap-in:embedded=5"],
            "port 1 is policed twice",
        ),
        // A capture port's argument is TYPE:FILE: its type names no port.
        (vec!["switch", "--ingress-policing", "pcap-in=100"], "no port named 'pcap-in'"),
        (
            vec!["coflows", "--dist", "rpc", "--predict", "off,oracle", "--min-confidence", "0.4"],
            "--min-confidence: the online predictor's setting",
        ),
        (
            vec!["convert", "rules", &rules, "--to", "classbench", "--actions", "drop"],
            "--actions: the actions of OpenFlow flows",
        ),
        (vec!["convert", "trace", &trace, "--to", "classbench", "--link", "raw"], "--link: the link type of a pcap"),
    ] {
        refused(&args, what);
    }
    let model = dir.join("m.model").display().to_string();
    accepted(&["train", "--out", &model]);
    refused(&["classify", "--model", &model, "--classifier", "tm"], "--classifier: a saved model is a NuevoMatchUP");
    accepted(&["classify", "--model", &model, "--verify", "100"]);
    accepted(&["trace", "--rules", &rules, "--trace", &trace, "--packets", "50", "--in-port", "2"]);
    accepted(&["convert", "trace", &trace, "--to", "pcap", "--link", "raw", "-o", &out]);
    accepted(&["convert", "rules", &rules, "--to", "ofctl", "--actions", "drop", "-o", &out]);
    accepted(&["switch", "--design", "cflows", "--classifier", "tm"]);
    accepted(&["switch", "--design", "orig", "--emc-entries", "16384"]);
    // Auto runs all three designs: every design's options are its own.
    accepted(&["switch", "--design", "auto", "--classifier", "tm", "--upcalls", "inline", "--mask-limit", "64"]);
    accepted(&["switch", "--design", "auto", "--auto", "initial=orig,warm-keys=0"]);
    accepted(&["switch", "--ingress-policing", "1=100/0.5", "--ingress-policing", "pcap-out:port3=7"]);
}
