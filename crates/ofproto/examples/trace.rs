//! A packet through a two-table pipeline, printed as `ovs-appctl ofproto/trace` prints it:
//! `cargo run --release -p rqvs-ofproto --example trace`.

use rqvs_flow::{formats, FlowKey};
use rqvs_ofproto::xlate::{trace_text, xlate_traced};
use rqvs_ofproto::OfprotoTable;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rules = formats::parse_rules(
        "flows.txt",
        "table=0,priority=10,tcp,actions=mod_nw_tos:32,goto_table:1\n\
         table=0,priority=0,actions=drop\n\
         table=1,priority=5,ip,nw_dst=10.0.0.0/8,actions=output:2\n",
    )?;
    let table = OfprotoTable::build(&rules)?;
    let key = FlowKey::ipv4(0xc0a8_0001, 0x0a01_0203, 6, 40000, 80);
    let read = table.read();
    let (x, lines) = xlate_traced(read.classifier(), read.groups(), &key);
    print!("{}", trace_text("br0", &key, &x, &lines));
    Ok(())
}
