//! The `serde` feature: rules, matches and keys survive a JSON round trip unchanged, and
//! deserializing refuses what the constructors refuse.
//! `cargo test -p rqvs-flow --features serde --test serde` (CI runs it).
#![cfg(feature = "serde")]

use rqvs_flow::{formats, FlowKey, Match, PortRange, Rule};

const FLOWS: &str = "\
priority=300,tcp,in_port=3,dl_src=00:11:22:33:44:55,nw_src=10.0.0.0/8,tp_dst=443,tcp_flags=+syn-ack,actions=mod_dl_dst:00:00:00:00:00:01,dec_ttl,output:2
priority=200,udp,dl_vlan=7,nw_dst=192.168.1.0/24,nw_tos=32,actions=strip_vlan,controller:128,NORMAL
priority=100,ip,nw_frag=later,actions=drop
";

#[test]
fn rules_round_trip_through_json() {
    let mut rules = formats::parse_rules("flows.txt", FLOWS).unwrap();
    // A ClassBench line: native port ranges that are not prefixes.
    rules.extend(
        formats::parse_rules(
            "rules.txt",
            "@10.1.0.0/16\t1.2.3.4/32\t20 : 21\t1024 : 65000\t0x11/0xFF\t0x0000/0x0000\t\n",
        )
        .unwrap(),
    );
    assert_eq!(rules.len(), 4);
    let json = serde_json::to_string(&rules).unwrap();
    let back: Vec<Rule> = serde_json::from_str(&json).unwrap();
    assert_eq!(back, rules);
    // Ids and action lists are written as what they are, not as wrappers.
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v[0]["id"], 0);
    assert_eq!(v[3]["matches"]["tp_src_range"], serde_json::json!({"lo": 20, "hi": 21}));
    assert!(v[2]["actions"].is_array());
    let key = FlowKey::ipv4(1, 2, 6, 3, 4);
    assert_eq!(serde_json::from_str::<FlowKey>(&serde_json::to_string(&key).unwrap()).unwrap(), key);
}

#[test]
fn deserializing_checks_the_invariants() {
    let m = Match::from_masked(
        FlowKey::ipv4(0x0a00_0000, 0, 6, 0, 0),
        FlowKey { nw_src: 0xff00_0000, ..FlowKey::default() },
    );
    let mut v = serde_json::to_value(m).unwrap();
    assert_eq!(serde_json::from_value::<Match>(v.clone()).unwrap(), m);
    // A value bit outside the mask: Match::new refuses it, so must deserializing.
    v["value"]["nw_src"] = serde_json::json!(0x0a00_0001u32);
    let e = serde_json::from_value::<Match>(v).unwrap_err().to_string();
    assert!(e.contains("nw_src: value has bits set outside its mask"), "{e}");
    let e = serde_json::from_str::<PortRange>(r#"{"lo": 9, "hi": 8}"#).unwrap_err().to_string();
    assert!(e.contains("port range 9..8 is empty"), "{e}");
    assert_eq!(serde_json::from_str::<PortRange>(r#"{"lo": 8, "hi": 9}"#).unwrap(), PortRange::new(8, 9).unwrap());
}
