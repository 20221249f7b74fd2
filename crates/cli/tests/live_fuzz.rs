//! A stateful fuzzer of the live switch (issue 40 item 5; docs/fuzz.md). `rqvs switch` runs on
//! veths between private namespaces (the churn test's topology) with frames flowing in on port 1
//! all along, and the fuzzer connects to its OpenFlow listener and plays sequences of messages,
//! each drawn from a seeded generator:
//!
//! - **valid ones**, built with the openflow crate's encoder: the handshake (HELLO, FEATURES,
//!   echo), flow-mods (add, modify and delete, strict or not, in tables 0 and 1, with action
//!   lists no flow had before, with a `group:` action, and ill-formed in meaning: table 255, a
//!   missing group), bundles (opened, flow-mods added, committed or discarded), group-mods (add,
//!   delete), packet-outs, multipart requests (desc, flows, ports, groups, tables) and barriers;
//! - **then garbage**, on a connection of its own: a valid message mutated (bytes flipped, the
//!   length or type changed, truncated with a consistent length, junk appended, or random
//!   bytes).
//!
//! After each sequence the switch must be alive (a new connection gets a HELLO and an echo
//! reply) and its table (a FLOW multipart dump) must equal a **model** of the accepted messages:
//! the initial dump, changed by every message no ERROR answered (by xid) before the barrier that
//! ends its sequence; a garbage message the switch took (its barrier answered, no error) changes
//! the model by what it decodes to, if it decodes. At the end the switch stops at SIGTERM with
//! "every frame accounted for" and exit 0. Deterministic: `RQVS_FUZZ_SEED` (default 1);
//! `RQVS_FUZZ_SEQUENCES` (default 120, the CI run) or `RQVS_FUZZ_SECONDS` (a long run). It
//! prints its executions: sequences, messages, errors received, garbage sent, crashes (0).
//!
//! As root only (skipped otherwise, a failure with `RQVS_REQUIRE_NETNS=1`).

#[path = "../../switch/tests/churn/mod.rs"]
mod churn;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rqvs_flow::formats::ofctl;
use rqvs_flow::group::{Bucket, Group, GroupType};
use rqvs_flow::{Action, Actions, Match};
use rqvs_openflow::bundle::{self, BundleAdd, BundleControl};
use rqvs_openflow::flow_mod::{FlowMod, FlowModCommand, FlowStatsRequest, PacketOut};
use rqvs_openflow::group::{GroupMod, GroupModCommand};
use rqvs_openflow::message::Hello;
use rqvs_openflow::multipart::{MultipartReplyBody, MultipartRequest, MultipartRequestBody};
use rqvs_openflow::{decode, encode, Message, OFP14};
use rqvs_ports::testnet::{self, Netns};

const RQVS: &str = env!("CARGO_BIN_EXE_rqvs");
const OF_PORT: u16 = 6653;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// xorshift64*: the fuzzer's only source of choices.
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

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// A connection to the switch's listener, after the handshake.
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
    xid: u32,
}

impl Conn {
    fn open(ns: &Netns) -> std::io::Result<Conn> {
        let s = ns.run(|| TcpStream::connect(("127.0.0.1", OF_PORT)))??;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut c = Conn { s, buf: Vec::new(), xid: 1 };
        let hello = c.encode(&Message::Hello(Hello::with_versions(&[rqvs_openflow::OFP13, OFP14])));
        c.send(&hello.1)?;
        match c.recv()? {
            Some((_, Message::Hello(_))) => Ok(c),
            other => Err(std::io::Error::other(format!("no HELLO: {other:?}"))),
        }
    }

    /// (xid, bytes) of `m` with the next xid.
    fn encode(&mut self, m: &Message) -> (u32, Vec<u8>) {
        self.xid += 1;
        (self.xid, encode(OFP14, self.xid, m).expect("the fuzzer's valid messages encode"))
    }

    fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.s.write_all(bytes)
    }

    /// The next message, echo requests answered; `None` at EOF.
    fn recv(&mut self) -> std::io::Result<Option<(u32, Message)>> {
        loop {
            if self.buf.len() >= 8 {
                let len = usize::from(u16::from_be_bytes([self.buf[2], self.buf[3]]));
                if len < 8 {
                    return Err(std::io::Error::other(format!("the switch sent a length of {len}")));
                }
                if self.buf.len() >= len {
                    let m: Vec<u8> = self.buf.drain(..len).collect();
                    let xid = u32::from_be_bytes([m[4], m[5], m[6], m[7]]);
                    let (_, msg) = decode(&m)
                        .map_err(|e| std::io::Error::other(format!("the switch sent an undecodable message: {e}")))?;
                    if let Message::EchoRequest(data) = &msg {
                        let reply = encode(m[0], xid, &Message::EchoReply(data.clone())).unwrap();
                        self.send(&reply)?;
                        continue;
                    }
                    return Ok(Some((xid, msg)));
                }
            }
            let mut chunk = [0u8; 65536];
            match self.s.read(&mut chunk)? {
                0 => return Ok(None),
                n => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Sends a barrier and reads up to its reply: the xids that got an ERROR meanwhile (and the
    /// replies' count).
    fn barrier(&mut self) -> std::io::Result<(Vec<u32>, u64)> {
        let (b, bytes) = self.encode(&Message::BarrierRequest);
        self.send(&bytes)?;
        let (mut errors, mut replies) = (Vec::new(), 0);
        loop {
            match self.recv()? {
                Some((x, Message::BarrierReply)) if x == b => return Ok((errors, replies)),
                Some((x, Message::Error(_))) => errors.push(x),
                Some(_) => replies += 1,
                None => return Err(std::io::Error::other("EOF before the barrier reply")),
            }
        }
    }

    /// The switch's flows: a FLOW multipart of every table.
    fn dump(&mut self) -> std::io::Result<Table> {
        let req = Message::MultipartRequest(MultipartRequest {
            flags: 0,
            body: MultipartRequestBody::Flow(FlowStatsRequest::all()),
        });
        let (x, bytes) = self.encode(&req);
        self.send(&bytes)?;
        let mut t = Table::new();
        loop {
            match self.recv()? {
                Some((y, Message::MultipartReply(r))) if y == x => {
                    if let MultipartReplyBody::Flow(flows) = r.body {
                        for f in flows {
                            t.insert((f.table_id, f.priority, key(&f.matches)), (f.cookie, f.actions));
                        }
                    }
                    if r.flags & rqvs_openflow::multipart::MORE == 0 {
                        return Ok(t);
                    }
                }
                Some((y, Message::Error(e))) if y == x => {
                    return Err(std::io::Error::other(format!("the flow dump was refused: {e:?}")))
                }
                Some(_) => {}
                None => return Err(std::io::Error::other("EOF during the flow dump")),
            }
        }
    }
}

/// The flows: (table, priority, match) → (cookie, actions).
type Table = BTreeMap<(u8, u16, MatchKey), (u64, Actions)>;

/// A match as the model's key (its ovs-ofctl text: `Match` has no order).
type MatchKey = String;

fn key(m: &Match) -> MatchKey {
    ofctl::format_match(m).unwrap_or_else(|e| format!("?{e}"))
}

/// Is a flow of the fuzzer's space (nw_dst 10.99.0.0/16)? The others are the traffic's.
fn fuzz_flow(k: &MatchKey) -> bool {
    k.contains("nw_dst=10.99.")
}

/// What a message does to the model if the switch accepts it.
#[derive(Clone, Debug)]
enum Effect {
    None,
    Flow(Box<FlowMod>),
    /// A bundle's flow-mods: (xid of each add, flow-mod); applied at the commit.
    Commit(Vec<(u32, FlowMod)>),
    DeleteGroup(u32),
}

fn apply(model: &mut Table, e: &Effect) {
    match e {
        Effect::None => {}
        Effect::Flow(fm) => apply_flow_mod(model, fm),
        Effect::Commit(mods) => {
            for (_, fm) in mods {
                apply_flow_mod(model, fm);
            }
        }
        Effect::DeleteGroup(g) => model.retain(|_, (_, a)| !a.0.contains(&Action::Group(*g))),
    }
}

fn apply_flow_mod(model: &mut Table, fm: &FlowMod) {
    let k = (fm.table_id, fm.priority, key(&fm.matches));
    let in_table = |t: u8| fm.table_id == rqvs_openflow::flow_mod::OFPTT_ALL || t == fm.table_id;
    match fm.command {
        // 0xff: "the switch chooses" — table 0, as OVS.
        FlowModCommand::Add => {
            let t = if fm.table_id == rqvs_openflow::flow_mod::OFPTT_ALL { 0 } else { fm.table_id };
            model.insert((t, k.1, k.2), (fm.cookie, fm.actions.clone()));
        }
        FlowModCommand::ModifyStrict => {
            if let Some(v) = model.get_mut(&k) {
                v.1 = fm.actions.clone();
            }
        }
        FlowModCommand::DeleteStrict => {
            model.remove(&k);
        }
        // The fuzzer's non-strict ones select its whole space (nw_dst=10.99.0.0/16).
        FlowModCommand::Modify => {
            for (kk, v) in model.iter_mut() {
                if in_table(kk.0) && fuzz_flow(&kk.2) {
                    v.1 = fm.actions.clone();
                }
            }
        }
        FlowModCommand::Delete => model.retain(|kk, _| !(in_table(kk.0) && fuzz_flow(&kk.2))),
    }
}

/// The fuzzer's state between messages: its counter for new action lists.
struct Gen {
    rng: Rng,
    lists: u32,
}

impl Gen {
    fn flow(&mut self, table: u8) -> (u16, String) {
        let p = 200 + self.rng.below(4) as u16;
        let m = match self.rng.below(3) {
            0 => format!("ip,nw_dst=10.99.0.{}", self.rng.below(8)),
            1 => format!("tcp,nw_dst=10.99.0.{},tp_dst={}", self.rng.below(8), 1 + self.rng.below(3)),
            _ => format!("udp,nw_dst=10.99.1.{}", self.rng.below(4)),
        };
        (p, format!("table={table},priority={p},{m}"))
    }

    fn actions(&mut self) -> String {
        match self.rng.below(7) {
            0 => "output:2".into(),
            1 => "drop".into(),
            2 => "dec_ttl,output:3".into(),
            3 => format!("group:{}", 1 + self.rng.below(3)),
            4 => "mod_nw_tos:16,output:2,output:3".into(),
            _ => {
                // A list no flow had before (the action table's freeing under fuzzing).
                self.lists += 1;
                let b = self.lists.to_be_bytes();
                format!("mod_dl_src:02:{:02x}:{:02x}:{:02x}:{:02x}:99,output:2", b[0], b[1], b[2], b[3])
            }
        }
    }

    fn flow_mod(&mut self) -> FlowMod {
        let table = if self.rng.chance(15) { 1 } else { 0 };
        let (_, text) = self.flow(table);
        let acts = self.actions();
        let rule = ofctl::parse_flows("fuzz", &format!("{text},cookie={},actions={acts}", self.rng.below(4)))
            .unwrap_or_else(|e| panic!("the fuzzer's flow {text},actions={acts}: {e}"))
            .remove(0);
        let command = match self.rng.below(10) {
            0..=4 => FlowModCommand::Add,
            5 => FlowModCommand::ModifyStrict,
            6 => FlowModCommand::DeleteStrict,
            7 => FlowModCommand::Modify,
            8 => FlowModCommand::Delete,
            _ => FlowModCommand::Add,
        };
        let mut fm = FlowMod::from_rule(&rule, command).unwrap().remove(0);
        if matches!(command, FlowModCommand::Modify | FlowModCommand::Delete) {
            fm.matches = ofctl::parse_flows("fuzz", "ip,nw_dst=10.99.0.0/16,actions=drop").unwrap()[0].matches;
            fm.priority = 0;
        }
        if matches!(command, FlowModCommand::Delete) && self.rng.chance(30) {
            fm.table_id = rqvs_openflow::flow_mod::OFPTT_ALL;
        }
        // Ill-formed in meaning: refused with an error, the model unchanged.
        if command == FlowModCommand::Add && self.rng.chance(5) {
            fm.table_id = 255;
        }
        if command != FlowModCommand::Add {
            fm.cookie = 0;
        }
        fm
    }

    fn group_mod(&mut self) -> (Message, Effect) {
        let id = 1 + self.rng.below(3) as u32;
        if self.rng.chance(60) {
            let bucket = |p: u32| Bucket {
                weight: 0,
                watch_port: rqvs_flow::group::OFPP_ANY,
                watch_group: rqvs_flow::group::OFPG_ANY,
                actions: Actions(vec![Action::Output(p)]),
            };
            let g = Group { id, kind: GroupType::All, buckets: vec![bucket(2), bucket(3)] };
            (Message::GroupMod(GroupMod { command: GroupModCommand::Add, group: g }), Effect::None)
        } else {
            let g = Group { id, kind: GroupType::All, buckets: Vec::new() };
            (Message::GroupMod(GroupMod { command: GroupModCommand::Delete, group: g }), Effect::DeleteGroup(id))
        }
    }

    fn packet_out(&mut self) -> Message {
        // A frame of the traffic's kind (UDP to 10.1.0.9), sent out of port 2 or flooded.
        let mut frame = vec![0u8; 60];
        frame[..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 0x77]);
        frame[12..14].copy_from_slice(&[0x08, 0x00]);
        frame[14] = 0x45;
        frame[16..18].copy_from_slice(&46u16.to_be_bytes());
        frame[22] = 64;
        frame[23] = 17;
        frame[26..30].copy_from_slice(&[10, 0, 0, 9]);
        frame[30..34].copy_from_slice(&[10, 1, 0, 9]);
        frame[34..38].copy_from_slice(&[0x30, 0x39, 0x00, 0x35]);
        frame[38..40].copy_from_slice(&26u16.to_be_bytes());
        let action = if self.rng.chance(50) { Action::Output(2) } else { Action::Flood };
        Message::PacketOut(PacketOut {
            buffer_id: rqvs_openflow::flow_mod::OFP_NO_BUFFER,
            in_port: rqvs_openflow::action::OFPP_CONTROLLER,
            actions: Actions(vec![action]),
            data: frame,
        })
    }

    fn multipart(&mut self) -> Message {
        let body = match self.rng.below(6) {
            0 => MultipartRequestBody::Desc,
            1 => MultipartRequestBody::Flow(FlowStatsRequest::all()),
            2 => MultipartRequestBody::PortStats { port_no: rqvs_openflow::multipart::OFPP_ANY },
            3 => MultipartRequestBody::GroupDesc,
            4 => MultipartRequestBody::Table,
            _ => MultipartRequestBody::PortDesc,
        };
        Message::MultipartRequest(MultipartRequest { flags: 0, body })
    }

    /// A valid message mutated (or random bytes).
    fn garbage(&mut self, valid: Vec<u8>) -> Vec<u8> {
        let mut m = valid;
        let set_len = |m: &mut Vec<u8>, n: usize| {
            let n = n.min(65535) as u16;
            m[2..4].copy_from_slice(&n.to_be_bytes());
        };
        match self.rng.below(6) {
            0 => {
                for _ in 0..1 + self.rng.below(4) {
                    let i = self.rng.below(m.len() as u64) as usize;
                    m[i] ^= 1 << self.rng.below(8);
                }
            }
            1 => {
                let n = self.rng.below(65536) as usize;
                set_len(&mut m, n);
            }
            2 => {
                let cut = 8 + self.rng.below(m.len().saturating_sub(8) as u64 + 1) as usize;
                m.truncate(cut);
                let n = m.len();
                set_len(&mut m, n);
            }
            3 => m[1] = self.rng.below(256) as u8,
            4 => {
                for _ in 0..1 + self.rng.below(64) {
                    m.push(self.rng.below(256) as u8);
                }
                let n = m.len();
                set_len(&mut m, n);
            }
            _ => {
                let n = 8 + self.rng.below(200) as usize;
                m = (0..n).map(|_| self.rng.below(256) as u8).collect();
                m[0] = if self.rng.chance(50) { OFP14 } else { m[0] };
                if self.rng.chance(50) {
                    set_len(&mut m, n);
                }
            }
        }
        m
    }
}

/// Counts of a run.
#[derive(Debug, Default)]
struct Counts {
    sequences: u64,
    messages: u64,
    errors: u64,
    garbage: u64,
    garbage_taken: u64,
    garbage_closed: u64,
    /// Garbage taken as a flow-mod the model does not compute (non-strict, filtered): the
    /// model took the switch's table after it.
    resynced: u64,
    replies: u64,
}

/// One sequence of valid messages on `c`, then the barrier: the model updated by what was
/// accepted.
fn valid_sequence(c: &mut Conn, g: &mut Gen, model: &mut Table, n: &mut Counts) -> std::io::Result<()> {
    let mut sent: Vec<(u32, Effect)> = Vec::new();
    let len = 1 + g.rng.below(12);
    for _ in 0..len {
        match g.rng.below(10) {
            0..=3 => {
                let fm = g.flow_mod();
                let (x, b) = c.encode(&Message::FlowMod(fm.clone()));
                c.send(&b)?;
                sent.push((x, Effect::Flow(Box::new(fm))));
            }
            4 => {
                // A bundle: open, flow-mods, commit or discard.
                let id = g.rng.below(1000) as u32;
                let ctl = |kind| {
                    Message::BundleControl(BundleControl {
                        bundle_id: id,
                        kind,
                        flags: bundle::ATOMIC,
                        properties: vec![],
                    })
                };
                let (xo, b) = c.encode(&ctl(bundle::OPEN_REQUEST));
                c.send(&b)?;
                let mut mods = Vec::new();
                for _ in 0..1 + g.rng.below(5) {
                    let fm = g.flow_mod();
                    c.xid += 1;
                    let x = c.xid;
                    let inner = encode(OFP14, x, &Message::FlowMod(fm.clone())).unwrap();
                    let add = Message::BundleAdd(BundleAdd {
                        bundle_id: id,
                        flags: bundle::ATOMIC,
                        message: inner,
                        properties: vec![],
                    });
                    let b = encode(OFP14, x, &add).unwrap();
                    c.send(&b)?;
                    mods.push((x, fm));
                }
                let commit = g.rng.chance(75);
                let (xc, b) = c.encode(&ctl(if commit { bundle::COMMIT_REQUEST } else { bundle::DISCARD_REQUEST }));
                c.send(&b)?;
                sent.push((xo, Effect::None));
                sent.push((xc, if commit { Effect::Commit(mods) } else { Effect::None }));
            }
            5 => {
                let (m, e) = g.group_mod();
                let (x, b) = c.encode(&m);
                c.send(&b)?;
                sent.push((x, e));
            }
            6 => {
                let m = g.packet_out();
                let (x, b) = c.encode(&m);
                c.send(&b)?;
                sent.push((x, Effect::None));
            }
            7 => {
                let m = g.multipart();
                let (x, b) = c.encode(&m);
                c.send(&b)?;
                sent.push((x, Effect::None));
            }
            8 => {
                let m = if g.rng.chance(50) { Message::EchoRequest(vec![7; 4]) } else { Message::FeaturesRequest };
                let (x, b) = c.encode(&m);
                c.send(&b)?;
                sent.push((x, Effect::None));
            }
            _ => {
                // A barrier in the middle: the messages before it are applied first anyway.
                let (x, b) = c.encode(&Message::BarrierRequest);
                c.send(&b)?;
                sent.push((x, Effect::None));
            }
        }
        n.messages += 1;
    }
    let (errors, replies) = c.barrier()?;
    n.errors += errors.len() as u64;
    n.replies += replies;
    for (x, e) in &sent {
        if errors.contains(x) {
            continue;
        }
        match e {
            // A bundle's flow-mod refused when added is not in it (OVS); one refused at the
            // commit fails the commit (its xid errors).
            Effect::Commit(mods) => {
                let kept: Vec<_> = mods.iter().filter(|(x, _)| !errors.contains(x)).cloned().collect();
                apply(model, &Effect::Commit(kept));
            }
            e => apply(model, e),
        }
    }
    n.sequences += 1;
    Ok(())
}

/// One garbage message on a connection of its own; what the switch took changes the model.
fn garbage(ns: &Netns, g: &mut Gen, model: &mut Table, n: &mut Counts) -> Result<(), String> {
    let mut c = Conn::open(ns).map_err(|e| format!("connect for garbage: {e}"))?;
    // A valid message to mutate.
    let m = match g.rng.below(5) {
        0 => Message::FlowMod(g.flow_mod()),
        1 => g.group_mod().0,
        2 => g.packet_out(),
        3 => g.multipart(),
        _ => Message::BundleControl(BundleControl {
            bundle_id: 5,
            kind: bundle::OPEN_REQUEST,
            flags: bundle::ATOMIC,
            properties: vec![],
        }),
    };
    let (x, valid) = c.encode(&m);
    let bad = g.garbage(valid);
    n.garbage += 1;
    if c.send(&bad).is_err() {
        n.garbage_closed += 1;
        return Ok(());
    }
    c.s.set_read_timeout(Some(Duration::from_secs(2))).map_err(|e| e.to_string())?;
    match c.barrier() {
        Ok((errors, _)) => {
            if !errors.contains(&x) && bad.len() >= 8 {
                // Taken: the model follows what it decodes to.
                n.garbage_taken += 1;
                let claimed = usize::from(u16::from_be_bytes([bad[2], bad[3]]));
                if claimed == bad.len() {
                    if let Ok((_, msg)) = decode(&bad) {
                        match msg {
                            // What the model follows exactly: an add, a strict modify or
                            // delete without filters. Anything else selects by containment or
                            // filters the model does not compute: the model takes the table.
                            Message::FlowMod(fm)
                                if fm.command == FlowModCommand::Add
                                    || (matches!(
                                        fm.command,
                                        FlowModCommand::ModifyStrict | FlowModCommand::DeleteStrict
                                    ) && fm.cookie_mask == 0
                                        && fm.out_port == rqvs_openflow::multipart::OFPP_ANY
                                        && fm.out_group == rqvs_openflow::flow_mod::OFPG_ANY
                                        && fm.table_id != rqvs_openflow::flow_mod::OFPTT_ALL) =>
                            {
                                apply(model, &Effect::Flow(Box::new(fm)))
                            }
                            Message::FlowMod(_) => {
                                n.resynced += 1;
                                *model = Conn::open(ns).and_then(|mut c| c.dump()).map_err(|e| e.to_string())?;
                            }
                            Message::GroupMod(gm) if gm.command == GroupModCommand::Delete => {
                                apply(model, &Effect::DeleteGroup(gm.group.id))
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
        Err(_) => n.garbage_closed += 1,
    }
    Ok(())
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn collect(r: impl Read + Send + 'static, into: Arc<Mutex<String>>) {
    std::thread::spawn(move || {
        let mut r = std::io::BufReader::new(r);
        let mut line = String::new();
        while std::io::BufRead::read_line(&mut r, &mut line).is_ok_and(|n| n > 0) {
            into.lock().unwrap().push_str(&line);
            line.clear();
        }
    });
}

fn diff(model: &Table, got: &Table) -> String {
    let mut s = String::new();
    for (k, v) in model {
        if got.get(k) != Some(v) {
            s += &format!("  model has {k:?} → {} (switch: {:?})\n", v.1, got.get(k).map(|v| v.1.to_string()));
        }
    }
    for (k, v) in got {
        if !model.contains_key(k) {
            s += &format!("  switch has {k:?} → {} (not in the model)\n", v.1);
        }
    }
    s
}

fn fuzz(design: &str) {
    let seed: u64 = env_or("RQVS_FUZZ_SEED", 1);
    let sequences: u64 = env_or("RQVS_FUZZ_SEQUENCES", 120);
    let seconds: f64 = env_or("RQVS_FUZZ_SECONDS", 0.0);
    let what = format!("live fuzz {design} seed {seed}");
    let dir = rqvs_testkit::TempDir::new("live-fuzz");
    let base = dir.path().join("base.txt");
    std::fs::write(&base, churn::BASE).unwrap();
    let topo = churn::Topo::new(&format!("fz{}", &design[..2]), 1);
    topo.sw.ip(&["link", "set", "lo", "up"]).unwrap();
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", topo.sw.name(), RQVS, "switch", "--design", design, "--pmds", "2"]);
    cmd.args(["--rules", base.to_str().unwrap(), "--openflow", &format!("ptcp:{OF_PORT}")]);
    for p in 1..=3 {
        cmd.args(["--port", &format!("p{p}:afpacket")]);
    }
    let mut guard = Killed(cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
    let child = &mut guard.0;
    let (out, err) = (Arc::new(Mutex::new(String::new())), Arc::new(Mutex::new(String::new())));
    collect(child.stdout.take().unwrap(), out.clone());
    collect(child.stderr.take().unwrap(), err.clone());
    let t0 = Instant::now();
    while !err.lock().unwrap().contains("rqvs switch: ready") {
        assert!(child.try_wait().unwrap().is_none(), "{what}: ended: {}", err.lock().unwrap());
        assert!(t0.elapsed() < Duration::from_secs(30), "{what}: not ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    let traffic = churn::Traffic::start_every(&topo, Duration::from_millis(10));
    let mut c = Conn::open(&topo.sw).unwrap();
    let mut model = c.dump().unwrap();
    let mut g = Gen { rng: Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1), lists: 0 };
    let mut n = Counts::default();
    let start = Instant::now();
    let mut i = 0u64;
    let crashed = |child: &mut Child, i: u64, err: &Mutex<String>| {
        if let Some(s) = child.try_wait().unwrap() {
            panic!("{what}: CRASH after sequence {i} (seed {seed}): the switch exited {s}\n{}", err.lock().unwrap());
        }
    };
    while if seconds > 0.0 { start.elapsed().as_secs_f64() < seconds } else { i < sequences } {
        if let Err(e) = valid_sequence(&mut c, &mut g, &mut model, &mut n) {
            crashed(child, i, &err);
            panic!("{what}: sequence {i}: {e}\n{}", err.lock().unwrap());
        }
        if g.rng.chance(50) {
            if let Err(e) = garbage(&topo.sw, &mut g, &mut model, &mut n) {
                crashed(child, i, &err);
                panic!("{what}: garbage after sequence {i}: {e}");
            }
        }
        crashed(child, i, &err);
        // Alive: a new connection is greeted and answers an echo.
        let mut probe = Conn::open(&topo.sw).unwrap_or_else(|e| panic!("{what}: after sequence {i}: {e}"));
        probe.barrier().unwrap_or_else(|e| panic!("{what}: after sequence {i}: {e}"));
        drop(probe);
        let got = c.dump().unwrap_or_else(|e| panic!("{what}: dump after sequence {i}: {e}"));
        assert!(
            got == model,
            "{what}: after sequence {i} the table differs from the model of the accepted messages:\n{}",
            diff(&model, &got)
        );
        i += 1;
    }
    let took = start.elapsed();
    let (sent, captured) = traffic.finish();
    drop(c);
    // SAFETY: kill(2) has no memory effects; the pid is our child's, not yet reaped.
    assert_eq!(unsafe { libc::kill(libc::pid_t::try_from(child.id()).unwrap(), libc::SIGTERM) }, 0);
    let t1 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(t1.elapsed() < Duration::from_secs(30), "{what}: did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(300));
    let (stdout, stderr) = (out.lock().unwrap().clone(), err.lock().unwrap().clone());
    assert!(status.success(), "{what}: exit {status}\n{stdout}\n{stderr}");
    assert!(stdout.contains("every frame accounted for"), "{what}: {stdout}");
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    println!(
        "FUZZ {design} seed {seed}: {} sequences, {} messages ({} errors answered, {} other replies), {} garbage \
         ({} taken, {} of them flow-mods the model took the table after, {} connections closed or silent), crashes 0, model mismatches 0; {} frames sent, {} captured, \
         {:.1} s; {} flows at the end",
        n.sequences,
        n.messages,
        n.errors,
        n.replies,
        n.garbage,
        n.garbage_taken,
        n.resynced,
        n.garbage_closed,
        sent.len(),
        captured.iter().map(Vec::len).sum::<usize>(),
        took.as_secs_f64(),
        model.len()
    );
    assert!(n.errors > 0, "{what}: no message was refused: the fuzzer did not reach the error paths");
    assert!(!sent.is_empty());
}

#[test]
fn live_fuzz_orig() {
    if testnet::available("live_fuzz_orig") {
        fuzz("orig");
    }
}

#[test]
fn live_fuzz_cflows() {
    if testnet::available("live_fuzz_cflows") {
        fuzz("cflows");
    }
}
