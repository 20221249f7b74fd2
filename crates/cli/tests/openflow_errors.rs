//! `rqvs switch --openflow` against a raw client sending what no good client sends: unknown
//! types, malformed, truncated and oversize messages, wrong versions before and after
//! negotiation, a HELLO with no common version, bad bundles; several connections at once. Each
//! gets the OpenFlow ERROR the spec names (or a closed connection where the stream cannot be
//! framed or no version is common), the other connections are unaffected, and the table never
//! changes. Loopback TCP only.

mod common;
mod ofswitch;
use common::{ctl, read_msg, TempDir};
use ofswitch::{normal, OfSwitch};

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use rqvs_openflow::flow_mod::FlowMod;
use rqvs_openflow::{encode, Message, OFP13, OFP14};

/// The table the switch starts with, and must still hold at the end.
const BASE: &str = "priority=5,icmp,actions=output:2\n";

/// A HELLO of `version` with a version bitmap of `bitmap`.
fn hello(version: u8, bitmap: u32) -> Vec<u8> {
    let mut m = vec![version, 0, 0, 16, 0, 0, 0, 1];
    m.extend_from_slice(&[0, 1, 0, 8]);
    m.extend_from_slice(&bitmap.to_be_bytes());
    m
}

/// `OFPBRC_BAD_VERSION`.
const BAD_VERSION: (u16, u16) = (1, 0);
/// `OFPBRC_BAD_LEN`.
const BAD_LEN: (u16, u16) = (1, 6);

/// A well-formed FLOW_MOD of `version`: add `priority=9,udp,tp_dst=9,actions=output:2`.
fn flow_mod(version: u8, xid: u32) -> Vec<u8> {
    let rule = rqvs_flow::formats::ofctl::parse_flow("test", 1, "priority=9,udp,tp_dst=9,actions=output:2", 0).unwrap();
    let fm = FlowMod::add(9, rule.matches, rule.actions);
    encode(version, xid, &Message::FlowMod(fm)).unwrap()
}

/// A BUNDLE_ADD_MESSAGE (1.4) to `bundle` carrying `inner` as it is, however wrong.
fn bundle_add(version: u8, xid: u32, bundle: u32, inner: &[u8]) -> Vec<u8> {
    let mut m = vec![version, 34, 0, 0];
    m.extend_from_slice(&xid.to_be_bytes());
    m.extend_from_slice(&bundle.to_be_bytes());
    m.extend_from_slice(&[0, 0, 0, 1]); // pad, flags ATOMIC
    m.extend_from_slice(inner);
    let n = m.len() as u16;
    m[2..4].copy_from_slice(&n.to_be_bytes());
    m
}

/// The next message, which must be an ERROR: its xid and (type, code).
fn error(s: &mut TcpStream) -> (u32, (u16, u16)) {
    let e = read_msg(s).expect("an error");
    assert_eq!(e[1], 1, "an ERROR: {e:?}");
    let u16_at = |i: usize| u16::from_be_bytes([e[i], e[i + 1]]);
    (u32::from_be_bytes([e[4], e[5], e[6], e[7]]), (u16_at(8), u16_at(10)))
}

#[test]
fn bad_messages_get_errors_and_connections_are_independent() {
    let tmp = TempDir::new("cli-openflow-raw");
    let rules = tmp.join("rules.txt");
    std::fs::write(&rules, BASE).unwrap();
    let mut sw = OfSwitch::start(&tmp.0, "", &rules, "orig", false);
    let port: u16 = sw.target().rsplit(':').next().unwrap().parse().unwrap();
    let sock = sw.sock.clone();
    let connect = || {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let h = read_msg(&mut s).expect("the switch's HELLO");
        assert_eq!(h[1], 0, "HELLO first");
        s
    };
    // Two connections at once, 1.3 and 1.4.
    let mut a = connect();
    let mut b = connect();
    a.write_all(&hello(4, 1 << 4)).unwrap();
    b.write_all(&hello(5, (1 << 4) | (1 << 5))).unwrap();
    // An unknown type on `a`: BAD_REQUEST/BAD_TYPE, quoting it; the connection stays.
    a.write_all(&[4, 200, 0, 8, 0, 0, 0, 7]).unwrap();
    let e = read_msg(&mut a).expect("an error");
    assert_eq!((e[0], e[1], &e[4..8], &e[8..12]), (4, 1, &[0, 0, 0, 7][..], &[0, 1, 0, 1][..]), "{e:?}");
    // A truncated FEATURES_REQUEST (length says 12, body of 4 junk bytes): BAD_LEN.
    a.write_all(&[4, 5, 0, 12, 0, 0, 0, 8, 1, 2, 3, 4]).unwrap();
    let e = read_msg(&mut a).expect("an error");
    assert_eq!((e[1], &e[8..12]), (1, &[0, 1, 0, 6][..]), "{e:?}");
    // A message of the other version on `a`: BAD_VERSION.
    a.write_all(&[5, 2, 0, 8, 0, 0, 0, 9]).unwrap();
    let e = read_msg(&mut a).expect("an error");
    assert_eq!((e[1], &e[8..12]), (1, &[0, 1, 0, 0][..]), "{e:?}");
    // `b` is unaffected: ECHO in 1.4.
    b.write_all(&[5, 2, 0, 12, 0, 0, 0, 3, 9, 9, 9, 9]).unwrap();
    let r = read_msg(&mut b).expect("an echo reply");
    assert_eq!(r, vec![5, 3, 0, 12, 0, 0, 0, 3, 9, 9, 9, 9]);
    // A TABLE_MOD (type 17): BAD_TYPE; BARRIER then answers.
    let mut gm = vec![5, 17, 0, 16, 0, 0, 0, 4];
    gm.extend_from_slice(&[0; 8]);
    b.write_all(&gm).unwrap();
    let e = read_msg(&mut b).expect("an error");
    assert_eq!((e[1], &e[8..12]), (1, &[0, 1, 0, 1][..]), "{e:?}");
    b.write_all(&[5, 20, 0, 8, 0, 0, 0, 5]).unwrap();
    assert_eq!(read_msg(&mut b).expect("a barrier reply")[1], 21);
    // Open bundles are limited per connection (64): the 65th gets BUNDLE_FAILED/OUT_OF_BUNDLES.
    for id in 0..65u32 {
        let mut open = vec![5, 33, 0, 16, 0, 0, 0, 6];
        open.extend_from_slice(&id.to_be_bytes());
        open.extend_from_slice(&[0, 0, 0, 1]); // OPEN_REQUEST, ATOMIC
        b.write_all(&open).unwrap();
        let r = read_msg(&mut b).expect("a reply");
        if id < 64 {
            assert_eq!((r[1], &r[12..14]), (33, &[0, 1][..]), "bundle {id} opened: {r:?}");
        } else {
            assert_eq!((r[1], &r[8..12]), (1, &[0, 17, 0, 1][..]), "65th bundle refused: {r:?}");
        }
    }
    // No common version: HELLO_FAILED, then the switch closes.
    let mut c = connect();
    c.write_all(&hello(3, 1 << 3 | 1 << 2)).unwrap();
    let e = read_msg(&mut c).expect("an error");
    assert_eq!((e[1], &e[8..12]), (1, &[0, 0, 0, 0][..]), "{e:?}");
    // Its data is the text the specification asks for, not the offending HELLO.
    assert_eq!(
        String::from_utf8_lossy(&e[12..]),
        "We support versions 0x01 and 0x04 to 0x05, you support no later than version 0x03."
    );
    assert!(read_msg(&mut c).is_none(), "closed after HELLO_FAILED");
    // A header whose length is below 8 cannot be framed: an error and a close.
    let mut d = connect();
    d.write_all(&hello(4, 1 << 4)).unwrap();
    d.write_all(&[4, 2, 0, 3, 0, 0, 0, 1]).unwrap();
    let e = read_msg(&mut d).expect("an error");
    assert_eq!(&e[8..12], &[0, 1, 0, 6], "{e:?}");
    assert!(read_msg(&mut d).is_none());
    // Flow-mods that must not change the table. Wrong versions after negotiation: a
    // well-formed 1.4 FLOW_MOD on the 1.3 connection, an OpenFlow 1.0 and a 1.5 message.
    for (msg, xid) in
        [(flow_mod(OFP14, 20), 20), (vec![1, 14, 0, 8, 0, 0, 0, 21], 21), (vec![6, 2, 0, 8, 0, 0, 0, 22], 22)]
    {
        a.write_all(&msg).unwrap();
        assert_eq!(error(&mut a), (xid, BAD_VERSION), "message {xid}");
    }
    // Malformed: the match's length past the message; an OXM field rqvs does not have
    // (ipv6_exthdr); an output action 12 bytes long.
    let good = flow_mod(OFP13, 23);
    let mut x = good.clone();
    x[50..52].copy_from_slice(&1024u16.to_be_bytes());
    a.write_all(&x).unwrap();
    assert_eq!(error(&mut a), (23, BAD_LEN));
    let mut x = good.clone();
    assert_eq!(x[54] >> 1, 5, "the first OXM is eth_type");
    x[54] = 39 << 1;
    a.write_all(&x).unwrap();
    assert_eq!(error(&mut a), (23, (4, 6)), "BAD_MATCH/BAD_FIELD");
    let mut x = good.clone();
    let action = x.len() - 16;
    assert_eq!(&x[action..action + 4], &[0, 0, 0, 16], "the output action ends the message");
    x[action + 3] = 12;
    a.write_all(&x).unwrap();
    assert_eq!(error(&mut a), (23, (2, 1)), "BAD_ACTION/BAD_LEN");
    // Truncated: cut inside its instructions (the length field says what arrived): BAD_LEN.
    let mut x = good[..good.len() - 8].to_vec();
    let n = x.len() as u16;
    x[2..4].copy_from_slice(&n.to_be_bytes());
    a.write_all(&x).unwrap();
    assert_eq!(error(&mut a), (23, BAD_LEN));
    // A length field larger than the message: the next message (a BARRIER) is read as its
    // tail, the whole fails with an ERROR for the flow-mod, the BARRIER is never answered, and
    // the stream is in step again after it (an ECHO is).
    let mut x = flow_mod(OFP13, 30);
    let n = x.len() as u16 + 8;
    x[2..4].copy_from_slice(&n.to_be_bytes());
    x.extend_from_slice(&[4, 20, 0, 8, 0, 0, 0, 31]);
    a.write_all(&x).unwrap();
    assert_eq!(error(&mut a).0, 30);
    a.write_all(&[4, 2, 0, 8, 0, 0, 0, 32]).unwrap();
    assert_eq!(read_msg(&mut a).expect("an echo reply"), vec![4, 3, 0, 8, 0, 0, 0, 32], "in step, no barrier reply");
    // The largest message (64 KiB - 1): a FLOW_MOD of junk instructions gets an ERROR quoting
    // its first 64 bytes; an ECHO that size is answered whole.
    let mut x = flow_mod(OFP13, 40);
    x.resize(65535, 0xff);
    x[2..4].copy_from_slice(&[0xff, 0xff]);
    a.write_all(&x).unwrap();
    let e = read_msg(&mut a).expect("an error");
    assert_eq!((e[1], &e[4..8], e.len()), (1, &[0, 0, 0, 40][..], 12 + 64), "{:?}", &e[..12]);
    let mut echo = vec![0x5a; 65535];
    echo[..8].copy_from_slice(&[4, 2, 0xff, 0xff, 0, 0, 0, 41]);
    a.write_all(&echo).unwrap();
    let r = read_msg(&mut a).expect("an echo reply");
    assert_eq!((r[1], r.len(), &r[8..]), (3, 65535, &echo[8..]));
    // Bundles on `b` (1.4, bundle 0 open): a BUNDLE_ADD whose inner message claims more bytes
    // than it carries (MSG_BAD_LEN); one carrying a 1.3 FLOW_MOD (BAD_VERSION); the commit then
    // changes nothing.
    let mut inner = flow_mod(OFP14, 50);
    let n = inner.len() as u16 + 8;
    inner[2..4].copy_from_slice(&n.to_be_bytes());
    b.write_all(&bundle_add(OFP14, 50, 0, &inner)).unwrap();
    assert_eq!(error(&mut b), (50, (17, 8)), "BUNDLE_FAILED/MSG_BAD_LEN");
    let mut inner = flow_mod(OFP13, 51);
    inner[0] = OFP13;
    b.write_all(&bundle_add(OFP14, 51, 0, &inner)).unwrap();
    assert_eq!(error(&mut b), (51, BAD_VERSION));
    b.write_all(&[5, 33, 0, 16, 0, 0, 0, 52, 0, 0, 0, 0, 0, 4, 0, 1]).unwrap(); // COMMIT_REQUEST
    let r = read_msg(&mut b).expect("a reply");
    assert_eq!((r[1], &r[12..14]), (33, &[0, 5][..]), "COMMIT_REPLY of the empty bundle: {r:?}");
    assert_eq!(normal(&ctl(&sock, &["dump-rules"])), normal(BASE), "nothing of it applied");
    // A length field larger than what arrives, then the connection ends: nothing is applied.
    let mut e = connect();
    e.write_all(&hello(4, 1 << 4)).unwrap();
    let mut x = flow_mod(OFP13, 60);
    let n = x.len() as u16 + 100;
    x[2..4].copy_from_slice(&n.to_be_bytes());
    e.write_all(&x).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    drop(e);

    // The table is what it was; the switch stops cleanly with connections open.
    assert_eq!(normal(&ctl(&sock, &["dump-rules"])), normal(BASE));
    let (status, err) = sw.exit();
    assert!(status.success(), "{err}");
    assert!(read_msg(&mut a).is_none() && read_msg(&mut b).is_none(), "connections closed at stop");
}
