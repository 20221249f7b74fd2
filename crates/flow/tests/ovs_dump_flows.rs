//! What `ovs-ofctl dump-flows` prints of a table loaded into real Open vSwitch reads back into
//! rqvs as the same rules: match, priority, cookie and actions, with both reply headers
//! (`NXST_FLOW` of OpenFlow 1.0 with Nicira extensions, `OFPST_FLOW` of OpenFlow 1.3).
//!
//! The table: the embedded acl1_1k set converted to OpenFlow (cookies = ClassBench rule ids,
//! output to port 2), and hand-written flows with the other fields and actions rqvs reads.
//! Skips when OVS cannot start here, unless `RQVS_REQUIRE_OVS=1` (set by `.ci/run`).

use std::path::Path;
use std::process::Command;

use rqvs_flow::formats::{classbench, ofctl};
use rqvs_flow::{Actions, Rule};

const HAND_WRITTEN: &str = "\
priority=40000,cookie=0x1,in_port=1,dl_src=00:11:22:33:44:55,dl_dst=66:77:88:99:aa:bb,ip,nw_tos=32,actions=mod_dl_dst:02:00:00:00:00:01,output:2
priority=39999,cookie=0x2,dl_vlan=5,dl_vlan_pcp=3,arp,arp_op=1,actions=strip_vlan,flood
priority=39998,cookie=0x3,tcp,nw_src=10.1.0.0/16,nw_dst=192.168.2.0/255.255.255.0,tp_src=0x400/0xfc00,tcp_flags=+syn-ack,actions=dec_ttl,output:1
priority=39997,cookie=0x4,icmp,icmp_type=8,icmp_code=0,nw_frag=no,actions=controller:128
priority=39996,cookie=0x5,udp,udp_dst=53,actions=mod_vlan_vid:7,in_port
priority=39995,cookie=0x6,sctp,sctp_src=9,actions=mod_nw_tos:8,all
priority=39994,cookie=0x7,dl_type=0x0800,nw_proto=47,actions=drop
";

/// The rules as compared: sorted by priority and cookie (OVS dumps in its own order), ids cleared.
fn canonical(mut rules: Vec<Rule>) -> Vec<(u32, u64, String, String)> {
    let mut out: Vec<(u32, u64, String, String)> = rules
        .drain(..)
        .map(|r| (r.priority, r.cookie, format!("{:?}", r.matches), format!("{:?}", r.actions)))
        .collect();
    out.sort();
    out
}

#[test]
fn dump_flows_of_a_table_loaded_into_ovs_reads_back_as_the_same_rules() {
    let Some(ovs) = rqvs_testkit::ovs::start_or_skip("dump-flows") else { return };
    let seed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/default/acl1_1k_rules.xz");
    let cb = classbench::read_rules(&seed).unwrap();
    let conv = rqvs_flow::convert::classbench_to_openflow(&cb, &Actions::output(2)).unwrap();
    let mut table = ofctl::write_flows(&conv.flows).unwrap();
    table.push_str(HAND_WRITTEN);
    let loaded = ofctl::parse_flows("table", &table).unwrap();
    ovs.replace_flows(&table).unwrap();
    for (version, header) in [(None, "NXST_FLOW reply"), (Some("OpenFlow13"), "OFPST_FLOW reply")] {
        // OpenFlow 1.3 prints `mod_vlan_vid` as `push_vlan:0x8100,set_field:4103->vlan_vid`,
        // which means something else (always a new tag): that flow is compared as OVS wrote it.
        let loaded: Vec<Rule> = match version {
            Some(_) => loaded
                .iter()
                .cloned()
                .map(|mut r| {
                    if r.priority == 39996 {
                        r.actions =
                            ofctl::parse_flow("", 1, "actions=push_vlan:0x8100,set_field:4103->vlan_vid,IN_PORT", 0)
                                .unwrap()
                                .actions;
                    }
                    r
                })
                .collect(),
            None => loaded.clone(),
        };
        let mut c = Command::new("ovs-ofctl");
        if let Some(v) = version {
            c.args(["-O", v]);
        }
        let out = c.arg("dump-flows").arg(ovs.mgmt()).output().unwrap();
        assert!(out.status.success(), "dump-flows: {}", String::from_utf8_lossy(&out.stderr));
        let dump = String::from_utf8(out.stdout).unwrap();
        assert!(dump.starts_with(header) && dump.contains("n_packets="), "{}", &dump[..dump.len().min(300)]);
        let back = ofctl::parse_flows("dump-flows", &dump)
            .unwrap_or_else(|e| panic!("{header}: {e}: {:?}", dump.lines().next()));
        assert_eq!(back.len(), loaded.len(), "{header}");
        let (want, got) = (canonical(loaded), canonical(back));
        for (w, g) in want.iter().zip(&got) {
            assert_eq!(w, g, "{header}: a rule read back differs");
        }
    }
}
