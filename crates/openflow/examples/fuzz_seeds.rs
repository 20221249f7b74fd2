//! Writes a seed corpus for the `openflow_messages` fuzz target: one file per message, every
//! message type the codec decodes, in OpenFlow 1.3 and 1.4, with matches on every field and
//! every action — so the fuzzer starts from whole, valid messages instead of growing them from
//! nothing (see README.md, "Fuzzing").
//!
//! ```sh
//! cargo run --release -p rqvs-openflow --example fuzz_seeds -- fuzz/corpus/openflow_messages
//! ```

use rqvs_flow::formats::ofctl;
use rqvs_openflow::bundle::{self, BundleAdd, BundleControl};
use rqvs_openflow::flow_mod::{
    AggregateStats, FlowMod, FlowModCommand, FlowRemoved, FlowStats, FlowStatsRequest, PacketIn, PacketOut,
};
use rqvs_openflow::message::{ErrorMsg, Features, Hello, PortStatus, Role, SwitchConfig};
use rqvs_openflow::multipart::{
    Desc, MultipartReply, MultipartReplyBody, MultipartRequest, MultipartRequestBody, PortStats, TableStats, OFPP_ANY,
};
use rqvs_openflow::port::Port;
use rqvs_openflow::table_features::TableFeatures;
use rqvs_openflow::{encode, Message, OfError, OFP13, OFP14};

/// Flows with every match field and every action the codec maps.
const FLOWS: &str = "\
priority=10,in_port=1,dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:00/ff:ff:ff:00:00:00,actions=output:2
priority=11,tcp,nw_src=10.0.0.0/8,nw_dst=192.168.1.7,tp_src=1024,tp_dst=0x1000/0xf000,tcp_flags=+syn-ack,actions=mod_dl_dst:02:00:00:00:00:bb,output:3
priority=12,udp,nw_tos=32,tp_dst=53,actions=mod_vlan_vid:7,output:2
priority=13,dl_vlan=5,dl_vlan_pcp=3,ip,actions=strip_vlan,mod_nw_tos:8,dec_ttl,in_port
priority=14,icmp,icmp_type=8,icmp_code=0,nw_frag=no,actions=controller,all,flood
priority=15,arp,arp_op=1,arp_spa=10.0.0.1,arp_tpa=10.0.0.0/24,actions=controller:128
priority=16,sctp,tp_src=9,actions=drop
priority=17,vlan_tci=0,ip,nw_frag=later,actions=mod_dl_src:02:00:00:00:00:aa,output:1
cookie=0x1234,priority=18,ip,nw_proto=47,actions=output:4
";

fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "fuzz/corpus/openflow_messages".into());
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{dir}: {e}"));
    let rules = ofctl::parse_flows("seeds", FLOWS).expect("the seed flows parse");
    let mut n = 0;
    for v in [OFP13, OFP14] {
        let mut msgs = vec![
            Message::Hello(Hello::with_versions(&[OFP13, OFP14])),
            Message::Error(ErrorMsg::new(OfError::BAD_REQUEST_BAD_TYPE, &[v, 200, 0, 8, 0, 0, 0, 1])),
            Message::EchoRequest(b"ping".to_vec()),
            Message::FeaturesRequest,
            Message::FeaturesReply(Features {
                datapath_id: 1,
                n_buffers: 0,
                n_tables: 1,
                auxiliary_id: 0,
                capabilities: 7,
            }),
            Message::GetConfigRequest,
            Message::SetConfig(SwitchConfig { flags: 0, miss_send_len: 128 }),
            Message::BarrierRequest,
            Message::RoleRequest(Role { role: 2, generation_id: 9 }),
            Message::PortStatus(PortStatus { reason: 2, port: port(v, 1) }),
        ];
        for body in [
            MultipartRequestBody::Desc,
            MultipartRequestBody::Table,
            MultipartRequestBody::PortDesc,
            MultipartRequestBody::PortStats { port_no: OFPP_ANY },
            MultipartRequestBody::Flow(FlowStatsRequest::all()),
            MultipartRequestBody::Aggregate(FlowStatsRequest { matches: rules[1].matches, ..FlowStatsRequest::all() }),
            MultipartRequestBody::TableFeatures(Vec::new()),
            MultipartRequestBody::TableFeatures(vec![TableFeatures::rqvs()]),
        ] {
            msgs.push(Message::MultipartRequest(MultipartRequest { flags: 0, body }));
        }
        let mut fms = Vec::new();
        let mut stats = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            let command = [
                FlowModCommand::Add,
                FlowModCommand::Modify,
                FlowModCommand::ModifyStrict,
                FlowModCommand::Delete,
                FlowModCommand::DeleteStrict,
            ][i % 5];
            for fm in FlowMod::from_rule(r, command).expect("the seed flows encode") {
                stats.push(FlowStats {
                    table_id: 0,
                    duration_sec: 3,
                    duration_nsec: 0,
                    priority: fm.priority,
                    idle_timeout: 0,
                    hard_timeout: 0,
                    flags: 0,
                    importance: 0,
                    cookie: fm.cookie,
                    packet_count: 5,
                    byte_count: 320,
                    matches: fm.matches,
                    actions: fm.actions.clone(),
                });
                fms.push(fm);
            }
        }
        for body in [
            MultipartReplyBody::Desc(Desc { mfr_desc: "rqvs".into(), ..Desc::default() }),
            MultipartReplyBody::Table(vec![TableStats { table_id: 0, active_count: 9, ..TableStats::default() }]),
            MultipartReplyBody::PortDesc(vec![port(v, 1), port(v, 2)]),
            MultipartReplyBody::PortStats(vec![PortStats { port_no: 1, rx_packets: 3, ..PortStats::default() }]),
            MultipartReplyBody::Flow(stats.clone()),
            MultipartReplyBody::Aggregate(AggregateStats { packet_count: 1, byte_count: 64, flow_count: 9 }),
            MultipartReplyBody::TableFeatures(vec![TableFeatures::rqvs()]),
        ] {
            msgs.push(Message::MultipartReply(MultipartReply { flags: 0, body }));
        }
        let r = &rules[1];
        msgs.push(Message::FlowRemoved(FlowRemoved {
            cookie: 1,
            priority: 11,
            reason: 0,
            table_id: 0,
            duration_sec: 1,
            duration_nsec: 0,
            idle_timeout: 0,
            hard_timeout: 0,
            packet_count: 1,
            byte_count: 64,
            matches: FlowMod::from_rule(r, FlowModCommand::Add).unwrap()[0].matches,
        }));
        let frame = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0, 0x45, 0, 0, 20, 0, 0, 0, 0, 64, 6, 0, 0];
        msgs.push(Message::PacketIn(PacketIn {
            buffer_id: u32::MAX,
            total_len: frame.len() as u16,
            reason: 1,
            table_id: 0,
            cookie: 0,
            matches: rqvs_flow::Match::ANY,
            data: frame.clone(),
        }));
        msgs.push(Message::PacketOut(PacketOut {
            buffer_id: u32::MAX,
            in_port: 1,
            actions: rules[3].actions.clone(),
            data: frame,
        }));
        for fm in &fms {
            msgs.push(Message::FlowMod(fm.clone()));
            // A bundled message carries its bundle add's xid: the index it is written with.
            let inner = encode(v, msgs.len() as u32, &Message::FlowMod(fm.clone())).unwrap();
            msgs.push(Message::BundleAdd(BundleAdd {
                bundle_id: 1,
                flags: bundle::ATOMIC,
                message: inner,
                properties: Vec::new(),
            }));
        }
        for kind in [bundle::OPEN_REQUEST, bundle::CLOSE_REQUEST, bundle::COMMIT_REQUEST, bundle::DISCARD_REQUEST] {
            msgs.push(Message::BundleControl(BundleControl {
                bundle_id: 1,
                kind,
                flags: bundle::ATOMIC,
                properties: Vec::new(),
            }));
        }
        for (i, m) in msgs.iter().enumerate() {
            let bytes = encode(v, i as u32, m).unwrap_or_else(|e| panic!("seed {i} ({m:?}): {e}"));
            std::fs::write(format!("{dir}/v{v}-{i:03}"), bytes).unwrap();
            n += 1;
        }
    }
    println!("{n} seeds in {dir}");
}

fn port(v: u8, n: u32) -> Port {
    Port {
        port_no: n,
        hw_addr: [2, 0, 0, 0, 0, n as u8],
        name: format!("p{n}"),
        config: 0,
        state: 4,
        ethernet: (v == OFP13).then_some(Default::default()),
        properties: Vec::new(),
    }
}
