//! CFLOWS' pipelined commit path (`rqvs_switch::commit_pipeline`) through a raw OpenFlow 1.4
//! client: a stream of runs of FLOW_MODs and BARRIERs written at once, one run refused by the
//! CFLOWS manager (the test hook `RQVS_TEST_REFUSE_PRIORITY`, see `rqvs_switch::manager`).
//! Checked: every flow-mod of the refused run gets its error, before the reply to the barrier
//! after it; the runs after it are accepted or refused exactly as if it had never been
//! recorded (a CHECK_OVERLAP add that its flow would have refused is accepted, with nothing
//! else changed); each BARRIER_REPLY comes after the errors of everything before it and before
//! those of anything after it; and the table ends as the flow-mods say. Loopback TCP only.

mod common;
mod ofswitch;
use common::{read_msg, TempDir};
use ofswitch::OfSwitch;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use rqvs_openflow::flow_mod::{FlowMod, FlowModCommand, OFPFF_CHECK_OVERLAP};
use rqvs_openflow::{encode, Message, OFP14};

/// The priority the manager refuses (the test hook).
const REFUSED: u16 = 7777;

/// A FLOW_MOD of `command` for the flow `text` (ovs-ofctl syntax, with its priority).
fn flow_mod(xid: u32, command: FlowModCommand, text: &str, flags: u16) -> Vec<u8> {
    let rule = rqvs_flow::formats::ofctl::parse_flow("test", 1, text, 0).unwrap();
    let mut fm = FlowMod::add(rule.priority as u16, rule.matches, rule.actions);
    fm.command = command;
    fm.flags = flags;
    fm.table_id = rule.table;
    encode(OFP14, xid, &Message::FlowMod(fm)).unwrap()
}

fn barrier(xid: u32) -> Vec<u8> {
    encode(OFP14, xid, &Message::BarrierRequest).unwrap()
}

/// What the switch answered, in order: `("error", xid, type, code)` or `("barrier", xid)`,
/// until the BARRIER_REPLY of `last`.
fn answers(s: &mut TcpStream, last: u32) -> Vec<(String, u32, u16, u16)> {
    let mut v = Vec::new();
    loop {
        let m = read_msg(s).expect("an answer before the timeout");
        let xid = u32::from_be_bytes([m[4], m[5], m[6], m[7]]);
        match m[1] {
            1 => v.push(("error".into(), xid, u16::from_be_bytes([m[8], m[9]]), u16::from_be_bytes([m[10], m[11]]))),
            21 => {
                v.push(("barrier".into(), xid, 0, 0));
                if xid == last {
                    return v;
                }
            }
            _ => {} // asynchronous messages (PORT_STATUS)
        }
    }
}

#[test]
fn a_refused_run_in_a_pipelined_stream_gets_its_errors_and_the_rest_applies_as_before() {
    // The hook is read by the switch's manager thread; only this test's switch has a flow of
    // this priority.
    std::env::set_var("RQVS_TEST_REFUSE_PRIORITY", REFUSED.to_string());
    let tmp = TempDir::new("cli-openflow-pipelined");
    let rules = tmp.join("rules.txt");
    std::fs::write(&rules, "priority=5,icmp,actions=output:2\n").unwrap();
    let mut sw = OfSwitch::start(&tmp.0, "", &rules, "cflows", false);
    let port: u16 = sw.target().rsplit(':').next().unwrap().parse().unwrap();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    assert_eq!(read_msg(&mut s).expect("the switch's HELLO")[1], 0);
    let mut hello = vec![5, 0, 0, 16, 0, 0, 0, 1, 0, 1, 0, 8];
    hello.extend_from_slice(&(1u32 << 5).to_be_bytes());
    s.write_all(&hello).unwrap();

    use FlowModCommand::{Add, DeleteStrict};
    let mut w = Vec::new();
    let mut expected = Vec::new();
    // A: 2,000 adds in four runs, each ended by a BARRIER (pipelined: each run recorded while
    // the manager applies the one before).
    for i in 0..2000u32 {
        w.extend(flow_mod(100 + i, Add, &format!("priority=100,udp,tp_dst={},actions=output:2", 1000 + i), 0));
        if i % 500 == 499 {
            let b = 10 + i / 500;
            w.extend(barrier(b));
            expected.push(("barrier".to_string(), b, 0, 0));
        }
    }
    // R: refused by the manager as a whole (the flow of priority REFUSED), every flow-mod
    // with its error: an add Y, the refused add, a strict delete of one of A's flows.
    w.extend(flow_mod(5000, Add, "priority=200,udp,tp_dst=7,actions=output:2", 0));
    w.extend(flow_mod(5001, Add, &format!("priority={REFUSED},udp,tp_dst=8,actions=output:2"), 0));
    w.extend(flow_mod(5002, DeleteStrict, "priority=100,udp,tp_dst=1000,actions=drop", 0));
    w.extend(barrier(20));
    for xid in 5000..5003 {
        expected.push(("error".into(), xid, 5, 0)); // FLOW_MOD_FAILED / UNKNOWN
    }
    expected.push(("barrier".into(), 20, 0, 0));
    // C, recorded while R is in flight: an add with CHECK_OVERLAP that Y would refuse
    // (accepted: R never happened), an add naming a missing group (BAD_OUT_GROUP), a strict delete of
    // one of A's flows, and an add.
    w.extend(flow_mod(6000, Add, "priority=200,udp,actions=output:3", OFPFF_CHECK_OVERLAP));
    w.extend(flow_mod(6001, Add, "priority=9,tcp,actions=group:77", 0));
    w.extend(flow_mod(6002, DeleteStrict, "priority=100,udp,tp_dst=1001,actions=drop", 0));
    w.extend(flow_mod(6003, Add, "priority=300,tcp,tp_dst=3000,actions=output:3", 0));
    w.extend(barrier(30));
    expected.push(("error".into(), 6001, 2, 9)); // BAD_ACTION / BAD_OUT_GROUP
    expected.push(("barrier".into(), 30, 0, 0));
    s.write_all(&w).unwrap();
    assert_eq!(answers(&mut s, 30), expected);

    // After the refusal, a lone run: a flow-mod and a barrier, answered at once.
    s.write_all(&[flow_mod(7000, Add, "priority=400,tcp,tp_dst=4000,actions=output:2", 0), barrier(40)].concat())
        .unwrap();
    assert_eq!(answers(&mut s, 40), vec![("barrier".to_string(), 40, 0, 0)]);

    let dumped = ofswitch::normal(&common::ctl(&sw.sock, &["dump-rules"]));
    let has = |needle: &str| dumped.iter().any(|l| l.contains(needle));
    let udp100 = dumped.iter().filter(|l| l.contains("priority=100,udp")).count();
    assert_eq!(udp100, 1999, "A's 2,000 flows but tp_dst=1001: {dumped:?}");
    assert!(has("tp_dst=1000,"), "R's delete was refused: {dumped:?}");
    assert!(!has("tp_dst=1001,"), "C's delete applied: {dumped:?}");
    assert!(!has("tp_dst=7,") && !has("tp_dst=8,"), "R's adds were refused: {dumped:?}");
    assert!(has("priority=200,udp,actions=output:3"), "C's overlap-checked add applied: {dumped:?}");
    assert!(has("tp_dst=3000") && has("tp_dst=4000"), "{dumped:?}");
    assert_eq!(dumped.len(), 1 + 1999 + 3, "{dumped:?}");
    let (status, stderr) = sw.exit();
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("test hook: a flow of priority 7777 refused"), "{stderr}");
}
