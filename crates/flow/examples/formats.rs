//! Reads rules in both formats rqvs knows (ovs-ofctl flows and ClassBench lines), writes each in
//! the other, and builds the frame of a packet and reads its key back.
//!
//! `cargo run -p rqvs-flow --example formats`

use rqvs_flow::formats::{self, classbench, ofctl};
use rqvs_flow::frame::{build_frame, extract_datapath};
use rqvs_flow::{FlowKey, RuleId};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // An ovs-ofctl flow file: the format is detected by content.
    let flows = formats::parse_rules(
        "flows.txt",
        "priority=200,tcp,nw_src=10.0.0.0/8,tp_dst=443,actions=output:2\n\
         priority=100,udp,nw_dst=192.168.1.0/24,actions=drop\n",
    )?;
    println!("{} ofctl flows, as ClassBench lines:", flows.len());
    print!("{}", classbench::write_rules(&flows)?);

    // A ClassBench rule line (tab-separated; priorities from the line order).
    let cb = formats::parse_rules(
        "rules.txt",
        "@10.1.0.0/16\t0.0.0.0/0\t0 : 65535\t1024 : 65535\t0x06/0xFF\t0x0000/0x0000\t\n",
    )?;
    println!("ClassBench line as ovs-ofctl flows:");
    print!("{}", ofctl::write_flows(&cb)?);

    // A packet's key, its Ethernet frame and the key read back from the frame.
    let key = FlowKey::ipv4(0x0a01_0203, 0xc0a8_0107, 6, 40000, 443);
    let frame = build_frame(&key);
    let back = extract_datapath(&frame, 0).ok_or("frame not parsed")?;
    println!("frame of {} bytes, key read back: nw_src {:#x} tp_dst {}", frame.len(), back.nw_src, back.tp_dst);
    let winner = flows.iter().filter(|r| r.matches.matches(&back)).min_by_key(|r| r.rank()).map(|r| r.id);
    println!("winning flow: {winner:?}");
    assert_eq!(winner, Some(RuleId(0)));
    Ok(())
}
