//! Patch ports across the bridges of one process (`rqvs switch --ovsdb`, issue 37). Two ways
//! across: with ORIG and CCACHE an `output:N`, a group bucket, `flood`, `all` or `NORMAL`
//! reaching a patch port crosses inside the translation ([`rqvs_ofproto::crossing`], run by
//! [`crate::crossing`]: one megaflow, the peer's ops run on the peer's ports by the same PMD
//! thread); what the translation does not cross (CFLOWS bridges, the fallbacks listed there)
//! takes the hop of [`rqvs_ports::patch`] (a
//! frame sent on one end is received on the other, by the peer's bridge, and classified there;
//! a frame crosses at most [`MAX_CROSSINGS`] patch ports either way: [`crate::crossing`], *Loops*).
//! This module is what the unixctl socket shows of a crossing — `ofproto/trace BRIDGE FLOW` ([`trace`]) follows the packet into the peer bridge
//! and prints that bridge's translation nested under the output that crossed, headed
//! `bridge("PEER_BRIDGE")`, as OVS's trace does.
//!
//! The crossings of a translation: its `output:N` to a patch port, and its `NORMAL`, `flood`
//! and `all` when they would send to one (`NORMAL`: the port the destination was learned on,
//! else every port but the input port, as the executor floods). The packet enters the peer
//! bridge as the translation leaves it (its final key; OVS uses the key as it is at the output
//! — the same unless the actions rewrite after the output) with `in_port` the peer port and
//! metadata 0. `Megaflow:` and `Datapath actions:` are the composed translation's when the
//! bridge's table crosses ([`rqvs_ofproto::crossing::compose`]: `patch(BRIDGE:PORT:OPS)` for a
//! crossing, one line; a patch loop said before `Final flow:`), else the ingress bridge's own
//! (the hop: its megaflow sends to its patch port). Crossings nest [`MAX_CROSSINGS`] deep.

use rqvs_datapath::DesignKind;
use rqvs_flow::formats::ofctl;
use rqvs_flow::FlowKey;
use rqvs_ofproto::actions::{self, Op};
use rqvs_ofproto::xlate::{trace_text, xlate_traced, Xlate};
use rqvs_ports::PortType;

use crate::bridges::Bridges;
use crate::{err, Control, Error};

/// Patch crossings one trace follows, nested (a loop of patch ports ends there): the
/// translation's own bound ([`rqvs_ofproto::crossing::MAX_CROSSINGS`]).
pub const MAX_CROSSINGS: usize = rqvs_ofproto::crossing::MAX_CROSSINGS as usize;

impl Control {
    /// This bridge's live patch ports with a peer: (OpenFlow number, peer interface name).
    pub fn patch_ports(&self) -> Vec<(u32, String)> {
        self.lock_ports()
            .iter()
            .filter(|p| !p.removed)
            .filter_map(|p| match spec_of(p).map(|s| s.port_type) {
                Some(PortType::Patch(peer)) if !peer.is_empty() => Some((p.ofport, peer)),
                _ => None,
            })
            .collect()
    }

    /// The OpenFlow number of this bridge's live port named `name` (its interface's name).
    pub fn ofport_named(&self, name: &str) -> Option<u32> {
        self.lock_ports().iter().find(|p| !p.removed && spec_of(p).is_some_and(|s| s.name == name)).map(|p| p.ofport)
    }

    /// This bridge's live ports: (OpenFlow number, interface name, type as `dpctl/show` names
    /// it: empty for a system interface, `afxdp`, `tap`, `patch`, `file`).
    pub fn port_list(&self) -> Vec<(u32, String, &'static str)> {
        self.lock_ports()
            .iter()
            .filter(|p| !p.removed)
            .map(|p| match spec_of(p) {
                Some(s) => {
                    let kind = match s.port_type {
                        PortType::AfPacket => "",
                        PortType::AfXdp => "afxdp",
                        PortType::Tap => "tap",
                        PortType::Patch(_) => "patch",
                        PortType::PcapIn(_) | PortType::PcapOut(_) => "file",
                    };
                    (p.ofport, s.name, kind)
                }
                None => (p.ofport, p.name.clone(), "file"),
            })
            .collect()
    }

    /// This bridge's live patch ports' counters, by interface name: (rx_packets, rx_bytes,
    /// rx_dropped, tx_packets, tx_bytes, tx_dropped) — `Interface.statistics` of a patch port
    /// (no kernel counters to read: the port's own, as OVS counts its patch ports'): the frames
    /// of the hop ([`rqvs_ports::patch`]) and the packets crossed inside the translation
    /// (`crossed`: tx on this end, rx on the peer's, as OVS credits a crossing).
    pub fn patch_port_counters(&self) -> Vec<(String, [u64; 6])> {
        let me = crate::crossing::bridge_of(&self.macs);
        let handles = self.ports.read().unwrap_or_else(|e| e.into_inner());
        self.lock_ports()
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.removed)
            .filter_map(|(i, p)| {
                let s = spec_of(p)?;
                if !matches!(s.port_type, PortType::Patch(_)) {
                    return None;
                }
                let t = handles.get(i)?.stats().total;
                // The crossings through it too (OVS's `patch_port_output` credits them so).
                let c = me.map(|b| crossed::get(b, p.ofport)).unwrap_or_default();
                Some((
                    s.name,
                    [
                        t.rx_packets + c.rx.0,
                        t.rx_bytes + c.rx.1,
                        t.rx_lost,
                        t.tx_packets + c.tx.0,
                        t.tx_bytes + c.tx.1,
                        t.tx_dropped,
                    ],
                ))
            })
            .collect()
    }

    /// The slow path's traced translation of `key` (the table `trace` reads: the shared one, or
    /// in CFLOWS the whole pipeline built from the record).
    fn traced(&self, key: &FlowKey) -> Result<(Xlate, Vec<String>), Error> {
        let run = |t: &rqvs_ofproto::OfprotoTable| {
            let r = t.read();
            xlate_traced(r.classifier(), r.groups(), key)
        };
        if self.design != DesignKind::Cflows {
            return Ok(run(&self.table));
        }
        let mut cached = self.trace_table.lock().unwrap_or_else(|e| e.into_inner());
        if cached.is_none() {
            *cached = Some(self.whole_table()?);
        }
        Ok(run(cached.as_ref().expect("built above")))
    }

    /// The ports a translation's ops send to (module docs), each once, in order.
    fn sends_to(&self, x: &Xlate, in_port: u32) -> Vec<u32> {
        let all: Vec<u32> = {
            let map = self.ofports();
            map.live().map(|i| map.ofport(i)).filter(|&p| p != in_port).collect()
        };
        let mut out = Vec::new();
        let add = |p: u32, out: &mut Vec<u32>| {
            if p != in_port && !out.contains(&p) {
                out.push(p);
            }
        };
        let mut stack: Vec<Vec<Op>> = vec![x.ops.clone()];
        let mut lists = 0;
        while let Some(ops) = stack.pop() {
            for op in ops {
                match op {
                    Op::Output(p) => add(p, &mut out),
                    Op::Flood | Op::All | Op::FloodCrossing { .. } => all.iter().for_each(|&p| add(p, &mut out)),
                    Op::Normal | Op::NormalCrossing { .. } => {
                        let k = &x.final_key;
                        let vlan = if k.vlan_tci & 0x1000 != 0 { k.vlan_tci & 0x0fff } else { 0 };
                        let learned = if k.dl_dst[0] & 1 == 0 { self.macs.lookup(vlan, &k.dl_dst) } else { None };
                        match learned {
                            Some(p) => add(p, &mut out),
                            None => all.iter().for_each(|&p| add(p, &mut out)),
                        }
                    }
                    Op::Clone(id) if lists < 64 => {
                        lists += 1;
                        stack.push(actions::ops(id).to_vec());
                    }
                    _ => {}
                }
            }
        }
        out
    }
}

/// A port's spec: kept for interfaces, else read back from its name (`PortSource::name`: a
/// patch port's is its spec).
pub(crate) fn spec_of(p: &crate::PortInfo) -> Option<rqvs_ports::PortSpec> {
    p.spec.clone().or_else(|| p.name.parse().ok())
}

/// `ofproto/trace BRIDGE FLOW` over the bridges (module docs).
pub fn trace(bridges: &Bridges, bridge: &str, flow: &str) -> Result<String, String> {
    let control = bridges.get(bridge).ok_or_else(|| format!("no bridge named {bridge}"))?;
    let key = parse_flow(flow).map_err(|e| e.0)?;
    let (x, lines) = control.traced(&key).map_err(|e| e.0)?;
    let mut lines = annotate(&control, &key, &lines);
    lines.extend(crossings(bridges, &control, &key, &x, 0).map_err(|e| e.0)?);
    let text = trace_text(bridge, &key, &x, &lines);
    // The crossings the translation follows (ORIG, CCACHE): one megaflow, composed.
    let text = match control.table.patch_resolver() {
        Some(_) => composed(&text, &key, &control.table.read().xlate_crossing(&key)),
        None => text,
    };
    Ok(header(bridge, &text))
}

/// `text` (a trace's) with its `Megaflow:` and `Datapath actions:` those of the composed
/// translation `x` ([`rqvs_ofproto::crossing`]), and a patch loop said before `Final flow:`.
fn composed(text: &str, key: &FlowKey, x: &Xlate) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        if line.starts_with("Final flow: ") {
            if let Some(e) = x.error {
                out.push_str(&format!("{e}: the packet is dropped\n\n"));
            }
            out.push_str(line);
        } else if line.starts_with("Megaflow: ") {
            out.push_str(&format!("Megaflow: {}\n", x.megaflow));
        } else if line.starts_with("Datapath actions: ") {
            out.push_str(&format!("Datapath actions: {}\n", rqvs_ofproto::xlate::datapath_actions(&x.ops, key)));
        } else {
            out.push_str(line);
        }
    }
    out
}

/// A trace made under rqvs's own title (`bridge("rqvs")`, `rqvs ctl trace`) titled with the
/// bridge's name, as `ovs-appctl ofproto/trace BRIDGE` prints it.
pub(crate) fn retitle(text: &str, bridge: &str) -> String {
    header(bridge, &text.replacen("bridge(\"rqvs\")\n", &format!("bridge(\"{bridge}\")\n"), 1))
}

/// `trace_text`'s `-------------` under `bridge("NAME")` as long as that line (OVS's).
fn header(bridge: &str, text: &str) -> String {
    let head = format!("bridge(\"{bridge}\")\n");
    match text.find(&head) {
        Some(at) => {
            let rest = &text[at + head.len()..];
            let rest = rest.trim_start_matches('-');
            format!("{}{head}{}{rest}", &text[..at], "-".repeat(head.len() - 1))
        }
        None => text.to_string(),
    }
}

/// The packet's key from a trace's FLOW, an ovs-ofctl match (`Control::trace` and the
/// crossing's trace read it so). The TTL is as written (0 when not, as in OVS's trace), not the
/// wire's default.
pub(crate) fn parse_flow(flow: &str) -> Result<FlowKey, Error> {
    let line = format!("{},actions=drop", flow.trim().trim_end_matches(','));
    let rule = ofctl::parse_flows("ofproto/trace", &line).map_err(|e| err(e.to_string()))?.pop();
    let Some(rule) = rule else { return Err(err("ofproto/trace: expected a flow, found nothing")) };
    if rule.matches.has_port_ranges() {
        return Err(err("ofproto/trace: a packet has single port values, not masks"));
    }
    let packet = *rule.matches.value();
    Ok(FlowKey { nw_ttl: packet.nw_ttl, ..packet.wire() })
}

/// The trace's lines with `NORMAL` annotated from the bridge's MAC table.
fn annotate(control: &Control, key: &FlowKey, lines: &[String]) -> Vec<String> {
    let text = format!("Flow: {}\n{}", rqvs_classify::ofproto::format_flow(key), lines.join("\n"));
    let macs = control.mac_entries();
    let text = crate::normal::annotate_trace(&text, |vlan, mac| {
        macs.iter().find(|e| e.vlan == vlan && &e.mac == mac).map(|e| e.port)
    });
    text.lines().skip(1).map(str::to_string).collect()
}

/// The nested sections of the crossings of `x` (`key` on `control`'s bridge), indented one level
/// per crossing.
fn crossings(
    bridges: &Bridges,
    control: &Control,
    key: &FlowKey,
    x: &Xlate,
    depth: usize,
) -> Result<Vec<String>, Error> {
    let patches = control.patch_ports();
    if patches.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for port in control.sends_to(x, key.in_port) {
        let Some((_, peer)) = patches.iter().find(|(p, _)| *p == port) else { continue };
        let found = bridges.all().into_iter().find_map(|(name, c)| c.ofport_named(peer).map(|p| (name, c, p)));
        // One level in from the section it crosses from (the caller's lines are padded again
        // by each section around them).
        let pad = "    ";
        let Some((name, peer_control, peer_port)) = found else {
            out.push(String::new());
            out.push(format!("{pad}>> output to patch port {port}: its peer {peer} is not a port of any bridge"));
            continue;
        };
        let head = format!("bridge(\"{name}\")");
        out.push(String::new());
        out.push(format!("{pad}{head}"));
        out.push(format!("{pad}{}", "-".repeat(head.len())));
        if depth + 1 >= MAX_CROSSINGS {
            out.push(format!("{pad} >> over {MAX_CROSSINGS} patch crossings: not followed"));
            continue;
        }
        let k2 = FlowKey { in_port: peer_port, metadata: 0, ..x.final_key };
        let (x2, lines) = peer_control.traced(&k2)?;
        let mut nested = annotate(&peer_control, &k2, &lines);
        nested.extend(crossings(bridges, &peer_control, &k2, &x2, depth + 1)?);
        out.extend(nested.into_iter().map(|l| if l.is_empty() { l } else { format!("{pad}{l}") }));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn retitled_with_the_bridge_name() {
        let t = "Flow: x\n\nbridge(\"rqvs\")\n-------------\n 0. priority 0\n";
        assert_eq!(super::retitle(t, "br0"), "Flow: x\n\nbridge(\"br0\")\n-------------\n 0. priority 0\n");
        assert!(super::retitle(t, "br-ex").contains("bridge(\"br-ex\")\n---------------\n 0."));
    }

    #[test]
    fn the_header_is_underlined_to_its_length() {
        let t = "Flow: x\n\nbridge(\"br-int\")\n-------------\n 0. priority 0\n";
        assert_eq!(super::header("br-int", t), "Flow: x\n\nbridge(\"br-int\")\n----------------\n 0. priority 0\n");
    }
}

/// The packets crossed inside the translation ([`crate::crossing`]), as the patch ports'
/// counters see them: OVS credits a crossing to the patch port's `tx` and its peer's `rx`
/// (`patch_port_output`: `netdev_vport_inc_tx`/`inc_rx`). A crossing is counted once, under
/// its receiving end — (peer bridge, peer port) — which is both the sending end's `tx` and
/// the receiving end's `rx`. Each PMD thread adds up its crossings of a step and adds them to
/// the totals once per hand-over ([`flush`]), so a crossing costs no lock.
pub(crate) mod crossed {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};

    use rqvs_ofproto::actions::PatchOp;

    /// What crossed through one patch port: packets and bytes received, packets and bytes sent.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub(crate) struct PortCrossings {
        pub rx: (u64, u64),
        pub tx: (u64, u64),
    }

    /// (bridge, port) → its counts.
    type Counts = HashMap<(u16, u32), PortCrossings>;

    /// One step's crossings through a port: (bridge, port), its counts. A step meets a few
    /// ports: a short list searched in order, no hashing per packet.
    type StepCount = ((u16, u32), PortCrossings);

    thread_local! {
        static STEP: RefCell<Vec<StepCount>> = const { RefCell::new(Vec::new()) };
    }

    /// The step's counts of port `key`, added at zero if new.
    fn step_entry(s: &mut Vec<StepCount>, key: (u16, u32)) -> &mut PortCrossings {
        let i = match s.iter().position(|e| e.0 == key) {
            Some(i) => i,
            None => {
                s.push((key, PortCrossings::default()));
                s.len() - 1
            }
        };
        &mut s[i].1
    }

    fn totals() -> &'static Mutex<Counts> {
        static T: OnceLock<Mutex<Counts>> = OnceLock::new();
        T.get_or_init(Mutex::default)
    }

    /// A packet of `len` bytes crosses: sent by the op's patch port (`from`, `port`), received
    /// by its peer (`bridge`, `in_port`).
    pub(crate) fn count(p: &PatchOp, len: usize) {
        let len = len as u64;
        STEP.with(|s| {
            let mut s = s.borrow_mut();
            let rx = &mut step_entry(&mut s, (p.bridge, p.in_port)).rx;
            *rx = (rx.0 + 1, rx.1 + len);
            let tx = &mut step_entry(&mut s, (p.from, p.port)).tx;
            *tx = (tx.0 + 1, tx.1 + len);
        });
    }

    /// This thread's crossings since the last call, added to the totals.
    pub(crate) fn flush() {
        STEP.with(|s| {
            let mut s = s.borrow_mut();
            if s.is_empty() {
                return;
            }
            let mut t = totals().lock().unwrap_or_else(|e| e.into_inner());
            for (key, c) in s.drain(..) {
                let e = t.entry(key).or_default();
                e.rx = (e.rx.0 + c.rx.0, e.rx.1 + c.rx.1);
                e.tx = (e.tx.0 + c.tx.0, e.tx.1 + c.tx.1);
            }
        });
    }

    /// What crossed through port `port` of bridge `bridge` so far.
    pub(crate) fn get(bridge: u16, port: u32) -> PortCrossings {
        totals().lock().unwrap_or_else(|e| e.into_inner()).get(&(bridge, port)).copied().unwrap_or_default()
    }

    /// Port `port` of bridge `bridge` (every port of it: `None`) starts from zero: a port
    /// attached with a number a removed one had, or a bridge (re)started — as its hop
    /// counters do (the port's own, new with it).
    pub(crate) fn forget(bridge: u16, port: Option<u32>) {
        let mut t = totals().lock().unwrap_or_else(|e| e.into_inner());
        t.retain(|&(b, p), _| b != bridge || port.is_some_and(|port| port != p));
    }

    #[cfg(test)]
    mod tests {
        use super::PortCrossings;
        use rqvs_ofproto::actions::{ActionsId, PatchOp};

        /// A crossing from port `port` of bridge `from` into port `in_port` of bridge `bridge`.
        fn op(from: u16, port: u32, bridge: u16, in_port: u32) -> PatchOp {
            PatchOp { port, from, bridge, in_port, ops: ActionsId(0), rule: rqvs_ofproto::NO_RULE, vlan_tci: 0 }
        }

        #[test]
        fn crossings_count_on_the_sending_and_the_receiving_port() {
            // Bridge numbers no other test uses.
            let (a, b) = (u16::MAX - 7, u16::MAX - 8);
            super::count(&op(a, 2, b, 3), 100);
            super::count(&op(a, 2, b, 3), 60);
            super::count(&op(b, 3, a, 2), 10);
            assert_eq!(super::get(b, 3), PortCrossings::default(), "not before the thread's hand-over");
            super::flush();
            assert_eq!(super::get(b, 3), PortCrossings { rx: (2, 160), tx: (1, 10) });
            assert_eq!(super::get(a, 2), PortCrossings { rx: (1, 10), tx: (2, 160) });
            std::thread::spawn(move || {
                super::count(&op(a, 2, b, 3), 40);
                super::flush();
            })
            .join()
            .unwrap();
            assert_eq!(super::get(b, 3).rx, (3, 200));
            super::forget(b, Some(3));
            assert_eq!((super::get(b, 3), super::get(a, 2).tx), (PortCrossings::default(), (3, 200)), "port 3 only");
            super::count(&op(a, 4, b, 5), 7);
            super::flush();
            super::forget(b, None);
            assert_eq!((super::get(b, 5), super::get(a, 4).tx), (PortCrossings::default(), (1, 7)), "bridge b only");
        }
    }
}
