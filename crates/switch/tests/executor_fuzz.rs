//! The frame parsers' fuzz inputs through the switch's executor (issue 40 item 5; docs/fuzz.md):
//! frames of every kind the wide-key parser reads (IPv4 and IPv6 over TCP, UDP, ICMP, ICMPv6
//! and SCTP, ARP, tagged, fragments), built with `rqvs_flow::frame::build_frame` from keys with
//! random fields as the parser's property tests do, then cut anywhere, bytes flipped, junk
//! appended, or replaced by random bytes — each parsed (`extract_datapath`) and run through
//! [`Executor`] with op lists that write every field the executor writes (`set_field` on each
//! of `SET_FIELD_WRITABLE`, the MAC and TOS rewrites, push/pop VLAN, dec_ttl, a clone), output,
//! flood, in_port and NORMAL. Never a panic; a key exactly when the frame has an Ethernet
//! header; at most a few copies out per list. Deterministic (`RQVS_FUZZ_SEED`,
//! `RQVS_FUZZ_FRAMES`, default 20,000 frames). Not checked here: what the rewritten bytes are
//! (the exact-forwarding tests do that on well-formed frames).

use std::sync::Arc;

use rqvs_flow::field::Field;
use rqvs_flow::frame::{build_frame, extract_datapath};
use rqvs_flow::FlowKey;
use rqvs_ofproto::actions::{Op, ToController};
use rqvs_ofproto::DpAction;
use rqvs_ports::{open_frames, PortConfig, TxQueue};
use rqvs_switch::execute::Executor;
use rqvs_switch::normal::MacTable;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn key(r: &mut Rng) -> FlowKey {
    let proto = [6u8, 17, 1, 58, 132, 47, r.below(256) as u8][r.below(7) as usize];
    let mut k = if r.below(2) == 0 {
        FlowKey::ipv4(r.next() as u32, r.next() as u32, proto, r.next() as u16, r.next() as u16)
    } else {
        let a = u128::from(r.next()) << 64 | u128::from(r.next());
        FlowKey::ipv6(a, a.rotate_left(17), proto, r.next() as u16, r.next() as u16)
    };
    match r.below(8) {
        0 => k.dl_type = 0x0806,
        1 => k.dl_type = r.next() as u16,
        _ => {}
    }
    if r.below(3) == 0 {
        k.vlan_tci = 0x1000 | (r.next() as u16 & 0xefff);
    }
    if r.below(6) == 0 {
        k.nw_frag = 1 + r.below(3) as u8;
    }
    k.nw_ttl = r.below(4) as u8;
    k.nw_tos = r.next() as u8;
    k.tcp_flags = r.next() as u16 & 0x0fff;
    k.dl_src = [2, 0, 0, 0, 0, r.below(8) as u8];
    k.dl_dst = [r.below(2) as u8, 0, 0, 0, 0, r.below(8) as u8];
    k
}

/// A frame of `k`, mutated.
fn frame(r: &mut Rng) -> Vec<u8> {
    let mut f = build_frame(&key(r));
    match r.below(6) {
        0 => {}
        1 => {
            let cut = r.below(f.len() as u64 + 1) as usize;
            f.truncate(cut);
        }
        2 => {
            for _ in 0..1 + r.below(6) {
                if !f.is_empty() {
                    let i = r.below(f.len() as u64) as usize;
                    f[i] ^= 1 << r.below(8);
                }
            }
        }
        3 => f.extend((0..r.below(64)).map(|_| r.next() as u8)),
        4 => f = (0..r.below(128)).map(|_| r.next() as u8).collect(),
        _ => {
            // A header length or type field in the first 60 bytes set to anything.
            if f.len() > 2 {
                let i = 12 + r.below((f.len() - 12).min(48) as u64) as usize;
                if i < f.len() {
                    f[i] = r.next() as u8;
                }
            }
        }
    }
    f
}

fn op_lists() -> Vec<Vec<Op>> {
    let set = |name: &str, value: u128| {
        let field = Field::by_name(name).unwrap_or_else(|| panic!("field {name}"));
        Op::SetField { field, value: value & field.all_ones(), mask: field.all_ones() }
    };
    let mut lists: Vec<Vec<Op>> = rqvs_flow::rule::SET_FIELD_WRITABLE
        .iter()
        .filter(|n| !matches!(**n, "metadata" | "in_port"))
        .map(|n| vec![set(n, 0x1234_5678_9abc_def0_0fed_cba9_8765_4321), Op::Output(2)])
        .collect();
    let clone = rqvs_ofproto::actions::intern(&[Op::PushVlan(0x8100), Op::SetVlanVid(9), Op::Output(3)]);
    // A flood that crosses port 3 (here, outside the shared PMD threads: the crossing is
    // dropped and counted; the flood still sends to the other ports).
    let crossing = rqvs_ofproto::actions::PatchOp {
        port: 3,
        from: 0,
        bridge: rqvs_ofproto::crossing::bridge_id("fuzz-peer"),
        in_port: 1,
        ops: rqvs_ofproto::actions::intern(&[Op::SetNwTos(0x20), Op::Output(2)]),
        rule: rqvs_ofproto::NO_RULE,
        vlan_tci: 0,
    };
    let patches = rqvs_ofproto::actions::intern(&[Op::Patch(crossing)]);
    lists.extend([
        vec![Op::FloodCrossing { all: false, patches }, Op::Output(2)],
        vec![Op::FloodCrossing { all: true, patches }],
        vec![Op::NormalCrossing { patches }, Op::Output(2)],
        vec![Op::SetDlSrc([2, 9, 9, 9, 9, 9]), Op::SetDlDst([2, 8, 8, 8, 8, 8]), Op::Output(2), Op::Output(3)],
        vec![Op::SetVlanVid(100), Op::Output(2), Op::StripVlan, Op::Output(3)],
        vec![Op::PushVlan(0x88a8), Op::PushVlan(0x8100), Op::Output(2)],
        vec![Op::SetNwTos(0xfc), Op::DecTtl, Op::Output(3), Op::DecTtl, Op::Output(2)],
        vec![Op::Clone(clone), Op::StripVlan, Op::Output(2)],
        vec![Op::Flood],
        vec![Op::InPort, Op::Output(1)],
        vec![Op::Normal],
        vec![Op::Controller(ToController::new(64)), Op::Output(7)],
        vec![Op::TtlExpired(ToController::new(u16::MAX)), Op::Output(2)],
        vec![Op::Meter(1), Op::Output(2)],
    ]);
    lists
}

#[test]
fn parser_fuzz_inputs_through_the_executor() {
    let seed: u64 = std::env::var("RQVS_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let frames: u64 = std::env::var("RQVS_FUZZ_FRAMES").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut tx: Vec<TxQueue> = (1..=3)
        .map(|p| {
            let (_, _, mut t) = open_frames(&format!("p{p}"), &[], &PortConfig::default()).split();
            t.remove(0)
        })
        .collect();
    let mut exec = Executor::new(Arc::new(MacTable::new()), None);
    let lists: Vec<DpAction> = op_lists().iter().map(|l| DpAction::of_op_list(l)).collect();
    let (mut executions, mut keyed, mut outputs) = (0u64, 0u64, 0u64);
    for i in 0..frames {
        let f = frame(&mut r);
        let in_port = 1 + r.below(3) as u32;
        let k = extract_datapath(&f, in_port);
        keyed += u64::from(k.is_some());
        assert_eq!(k.is_some(), f.len() >= 14, "frame {i}: a key exactly when there is an Ethernet header");
        for &a in &lists {
            let out = exec.execute(&f, in_port, a, &mut tx);
            executions += 1;
            outputs += u64::from(out.outputs);
            // At most one copy per output op (flood: one per other port).
            assert!(out.outputs <= 8, "frame {i}: {} outputs of {a}", out.outputs);
        }
        for q in tx.iter_mut() {
            q.flush();
        }
    }
    println!(
        "EXECUTOR FUZZ seed {seed}: {frames} frames ({keyed} with a key), {} op lists, {executions} executions, {outputs} copies out, crashes 0",
        lists.len()
    );
    assert!(outputs > 0);
}
