//! Patch-port crossings inside the translation (issue 37), after OVS's `patch_port_output` in
//! `ofproto-dpif-xlate.c` (semantics read there, code written here): an `output:N` to a patch
//! port continues the translation in the peer bridge — its table 0, `in_port` the peer port,
//! metadata 0, the packet's key as it is at the output — so one megaflow of the ingress bridge
//! carries the composed datapath ops and the union of both bridges' wildcards.
//!
//! # What crosses
//!
//! A table ([`OfprotoTable`]) crosses only when the switch gave it a **resolver**
//! ([`OfprotoTable::set_patch_resolver`]: "is my OpenFlow port N a patch port, and which
//! bridge, table and port is its peer?"). Then [`crate::table::TableRead::classify`] (the
//! upcall handler's and the revalidator's one call) runs [`compose`]: the ingress translation,
//! then for each op that sends to a patch port — `output:N` (not to the input port), and
//! `in_port` when the packet came in on a patch port — the peer's translation of the packet as
//! it is at that op; the op becomes [`Op::Patch`] (the peer bridge, the peer port and the peer's
//! ops, in the peer's port numbers; the executor runs them with the peer bridge's ports,
//! `rqvs_switch::patch`). Crossings nest: the peer's ops may cross again. A group's bucket is
//! crossed as the translation gives it: inline when it rewrites nothing (its outputs are ops
//! of the list), else an [`Op::Clone`] whose list is walked the same way, with the key as the
//! bucket's copy is at each op (a new interned list when something in it crossed). A `flood` or
//! `all` crosses every patch port of the bridge but the input port ([`PatchPorts::patch_ports`])
//! with the key as it is at that op, and becomes [`Op::FloodCrossing`]: the executor floods the
//! other ports as before and runs these crossings instead of sending to their patch ports,
//! applying the ports' `NO_FLOOD`/`NO_FWD` bits to them when the frame is sent (so a PORT_MOD
//! needs no new translation); a crossing whose peer drops the packet stays in the list, empty,
//! so the flood skips its port.
//!
//! `NORMAL` crosses too ([`Op::NormalCrossing`]; see *NORMAL*).
//!
//! Not crossed here, left to the datapath hop of `rqvs_ports::patch` (the frame is received on
//! the peer port and classified by the peer bridge): a peer whose table is not available (see
//! *Locks*); a peer bridge the switch gives no resolver answer for (CFLOWS bridges: their
//! pipeline is not the shared table); a `NORMAL` crossing deeper than [`MAX_CROSSINGS`]. The
//! switch bounds those hops as this module bounds its crossings: a frame carries the crossings
//! it has made, both kinds, and is dropped past [`MAX_CROSSINGS`] (`rqvs_switch::crossing`,
//! *Loops*).
//!
//! # NORMAL
//!
//! rqvs decides `NORMAL` in the executor, per frame, from the MAC table (`rqvs_switch::normal`):
//! its megaflows do not match `dl_dst` and need no revalidation when a station is learned,
//! moves or ages out (OVS decides it in the translation, and its megaflows do). So the
//! translation does not know which port a `NORMAL` sends to — but it knows every port it may
//! send to, and crosses them all, as a `flood` does: for each patch port of the bridge but the
//! input port that the ports' VLAN settings let the packet leave by
//! ([`PatchPorts::normal_output`]: with the VLAN TCI it would leave with), the peer's
//! translation of the packet as it leaves there. The executor decides as before and, where
//! the decision sends to one of those patch ports with that TCI, runs the crossing instead of
//! sending; a frame that would leave with another TCI (the ports' VLANs changed since the
//! translation) takes the hop, so the crossing is exact for every frame the megaflow serves.
//! The megaflow matches the whole `vlan_tci` (what `NORMAL` does to the tag depends on it)
//! and the union of the peers' wildcards: more specific than OVS's where a peer examines a
//! field the packet's destination never reaches, never less exact.
//!
//! A `NORMAL` crossing past [`MAX_CROSSINGS`] is not followed, not an error: two bridges
//! joined by two patch pairs, both `NORMAL`, nest crossings at every level (each bridge's
//! `NORMAL` crosses the other pair), and the translation of a unicast frame to a local port
//! must still succeed. The hop the executor makes there (if its decision ever goes there) is
//! bounded by the datapath's count.
//!
//! # Wildcards
//!
//! The megaflow's wildcards are the union of every translation's: the peer's bits are bits of
//! the packet as it crossed, which for a field the ingress actions rewrote is more than needed
//! (the rewrite already examined them: OVS does the same), never less. The peer's `in_port`
//! and `metadata` are the crossing's own (fixed by it), not the packet's: they add nothing.
//!
//! # Locks
//!
//! Each bridge's table is behind a writer-preferring `RwLock`; a translation that crosses holds
//! its own table's read while it needs the peer's. Blocking on the peer's read while holding
//! ours can deadlock: a handler of bridge A holds A and waits for B behind B's waiting
//! commit, which waits for B's readers — one of them a handler of B waiting for A behind A's
//! waiting commit. The rule here: **no thread holding a table's read ever blocks on another
//! table's lock.** The peer's read is taken with `try_read`; when it would block (a commit on
//! the peer is running or waiting), that crossing is not followed: the op stays an output to
//! the patch port, the datapath hop, which forwards the same packet the same way (the peer
//! bridge classifies it) — correct, only not one megaflow. Such a megaflow does not stay: the
//! peer's commit, once it has released its write lock, marks every table that crossed into it
//! changed ([`OfprotoTable::mark_changed`]: "anything may have changed"), so the ingress
//! bridge's revalidation translates its megaflows again — the one that fell back included, as
//! it was made from a read older than that mark. Commits never hold two tables either: the
//! mark is taken after the commit's own write lock is released. So every wait in a cycle would
//! need a thread blocking on a second table while holding one, and none does
//! (`crossing_and_commits_on_both_tables_never_deadlock`).
//!
//! # Revalidation
//!
//! A crossing's translation depends on the peer's table: a commit on the peer (rules, groups,
//! port liveness, a removed port) marks each table that crossed into it — the origin of every
//! crossing, also the ones reached through another bridge — changed, with "anything may have
//! changed" in its change log, and calls that table's hook ([`OfprotoTable::set_on_marked`]:
//! the switch tells the bridge's PMDs to revalidate, as after a commit of its own).
//!
//! # Loops
//!
//! Crossings nest at most [`MAX_CROSSINGS`] deep (a loop of patch pairs, or flows that send a
//! packet back through the patch port it came in on). Past that the whole translation drops the
//! packet (as OVS's translation error does) with [`XlateError::PatchLoop`]; each such
//! translation is counted ([`loops`]) and the first one is reported once ([`loop_to_log`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rqvs_classify::ofproto::Megaflow;
use rqvs_flow::key::*;
use rqvs_flow::{FlowKey, RuleId};

use crate::actions::{self, Op, PatchOp};
use crate::table::{OfprotoTable, TableRead};
use crate::xlate::{Xlate, XlateError};
use crate::NO_RULE;

/// Crossings one translation nests at most (module docs, *Loops*).
pub const MAX_CROSSINGS: u32 = 8;

/// A patch port's peer, as a resolver answers it.
#[derive(Clone)]
pub struct Peer {
    /// The bridge the crossing leaves: the resolver's own ([`bridge_id`]).
    pub from: u16,
    /// The peer bridge ([`bridge_id`]).
    pub bridge: u16,
    /// Its table (a handle of the shared one).
    pub table: OfprotoTable,
    /// The peer port's OpenFlow number on its bridge.
    pub port: u32,
}

/// What a bridge's table asks the switch about its patch ports. Called with the table's read
/// held: neither call may block on any lock a commit may hold (module docs, *Locks*).
pub trait PatchPorts: Send + Sync {
    /// "Is OpenFlow port N of this bridge a patch port whose crossing is followed, and to what?"
    fn peer(&self, port: u32) -> Option<Peer>;
    /// The bridge's patch ports, the ones a `flood` or `all` may cross (any order). A port it
    /// cannot tell about now may be left out: a flood then reaches it by the datapath hop.
    fn patch_ports(&self) -> Vec<u32>;
    /// The `vlan_tci` with which `NORMAL` sends a packet that came in on `in_port` with
    /// `vlan_tci` out of patch port `port` by the ports' VLAN settings now (`None`: it never
    /// sends it there). The executor checks the answer on every frame (a crossing of
    /// [`Op::NormalCrossing`] is taken only with it), so a stale one costs a hop, never a wrong
    /// crossing. By default every port carries every VLAN, frames unchanged.
    fn normal_output(&self, in_port: u32, vlan_tci: u16, port: u32) -> Option<u16> {
        let _ = (in_port, port);
        Some(vlan_tci)
    }
}

/// The switch's answers for one bridge ([`PatchPorts`]).
pub type Resolver = Arc<dyn PatchPorts>;

/// Called with the new version when [`OfprotoTable::mark_changed`] marked a table.
pub type OnMarked = Arc<dyn Fn(u64) + Send + Sync>;

static LOOPS: AtomicU64 = AtomicU64::new(0);
static LOOP_UNLOGGED: AtomicBool = AtomicBool::new(false);
static LOOP_LOGGED_ONCE: AtomicBool = AtomicBool::new(false);
static FALLBACKS: AtomicU64 = AtomicU64::new(0);

/// Translations dropped as patch loops, in this process.
pub fn loops() -> u64 {
    LOOPS.load(Ordering::Relaxed)
}

/// Crossings not followed because the peer's table was being committed to (the hop took them).
pub fn fallbacks() -> u64 {
    FALLBACKS.load(Ordering::Relaxed)
}

/// The message to log for the first patch loop, once per process (`None` afterwards, and before
/// any loop).
pub fn loop_to_log() -> Option<String> {
    if LOOP_UNLOGGED.load(Ordering::Relaxed) && LOOP_UNLOGGED.swap(false, Ordering::Relaxed) {
        return Some(format!(
            "patch loop: a translation crossed patch ports more than {MAX_CROSSINGS} deep; its packet is dropped \
             (each counted; logged once)"
        ));
    }
    None
}

fn bridges() -> &'static Mutex<Vec<String>> {
    static B: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    B.get_or_init(Mutex::default)
}

/// The process-wide number of bridge `name` in [`Op::Patch`] (given at first ask, kept).
pub fn bridge_id(name: &str) -> u16 {
    let mut b = bridges().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = b.iter().position(|n| n == name) {
        return i as u16;
    }
    b.push(name.to_string());
    (b.len() - 1).min(u16::MAX as usize) as u16
}

/// The name of bridge number `id` ([`bridge_id`]); `?` for a number never given.
pub fn bridge_name(id: u16) -> String {
    bridges().lock().unwrap_or_else(|e| e.into_inner()).get(id as usize).cloned().unwrap_or_else(|| "?".into())
}

/// The translation of `key` through `read` (of `origin`) with its patch crossings followed
/// (module docs): ops with [`Op::Patch`] where a crossing was, wildcards and megaflow over every
/// bridge crossed, `error` [`XlateError::PatchLoop`] (and no ops) past [`MAX_CROSSINGS`]. The
/// chain, final key and groups are the ingress bridge's.
pub fn compose(origin: &OfprotoTable, read: &TableRead<'_>, resolver: &Resolver, key: &FlowKey) -> Xlate {
    let mut x = read.xlate(key);
    if x.error.is_some() {
        return x;
    }
    let mut w = Walk { origin, wc: x.wildcards, looped: false, error: None };
    let ops = w.cross_ops(&x.ops, resolver, key, 0);
    let mut wc = w.wc;
    wc.metadata = 0;
    let mut megaflow = Megaflow::from_wildcards(key, &wc);
    megaflow.mask.metadata = 0;
    megaflow.value = key.masked(&megaflow.mask);
    x.wildcards = wc;
    x.megaflow = megaflow;
    if w.looped {
        LOOPS.fetch_add(1, Ordering::Relaxed);
        if !LOOP_LOGGED_ONCE.swap(true, Ordering::Relaxed) {
            LOOP_UNLOGGED.store(true, Ordering::Relaxed);
        }
        x.error = Some(XlateError::PatchLoop);
    } else if let Some(e) = w.error {
        x.error = Some(e);
    }
    if x.error.is_some() {
        x.ops.clear();
        x.groups.clear();
    } else {
        x.ops = ops;
    }
    x
}

struct Walk<'a> {
    origin: &'a OfprotoTable,
    wc: FlowKey,
    looped: bool,
    error: Option<XlateError>,
}

impl Walk<'_> {
    /// `ops` (a translation of `key` on a bridge with `resolver`, `depth` crossings in) with
    /// their crossings followed.
    fn cross_ops(&mut self, ops: &[Op], resolver: &Resolver, key: &FlowKey, depth: u32) -> Vec<Op> {
        let mut k = *key;
        let mut out = Vec::with_capacity(ops.len());
        for op in ops {
            if self.looped || self.error.is_some() {
                return Vec::new();
            }
            if let Op::Clone(id) = *op {
                // A group's bucket that rewrites the frame runs on a copy: its outputs cross
                // too, with the copy as the bucket leaves it (same depth: a copy is no crossing).
                let inner: Vec<Op> = actions::ops(id).to_vec();
                let crossed = self.cross_ops(&inner, resolver, &k, depth);
                if self.looped || self.error.is_some() {
                    return Vec::new();
                }
                if crossed == inner {
                    out.push(*op);
                } else if !crossed.is_empty() {
                    out.push(Op::Clone(actions::intern(&crossed)));
                }
                continue;
            }
            if let Op::Normal | Op::Flood | Op::All = *op {
                let normal = *op == Op::Normal;
                let patches = self.cross_patch_ports(resolver, key, &k, depth, normal);
                if self.looped || self.error.is_some() {
                    return Vec::new();
                }
                out.push(match *op {
                    _ if patches.is_empty() => *op,
                    Op::Normal => {
                        // What NORMAL does to the VLAN depends on the packet's tag: one
                        // megaflow per tag.
                        self.wc.vlan_tci = u16::MAX;
                        Op::NormalCrossing { patches: actions::intern(&patches) }
                    }
                    _ => Op::FloodCrossing { all: *op == Op::All, patches: actions::intern(&patches) },
                });
                continue;
            }
            let target = match *op {
                Op::Output(p) if p != key.in_port => Some(p),
                Op::InPort => Some(key.in_port),
                _ => None,
            };
            let peer = target.and_then(|p| resolver.peer(p));
            let Some(peer) = peer else {
                apply_to_key(op, &mut k);
                out.push(*op);
                continue;
            };
            if depth + 1 > MAX_CROSSINGS {
                self.looped = true;
                return Vec::new();
            }
            match self.cross(&peer, &k, depth + 1) {
                Some((peer_ops, _)) if peer_ops.is_empty() => {}
                Some((peer_ops, rule)) => {
                    out.push(patch_op(target.unwrap_or_default(), &peer, &peer_ops, rule, k.vlan_tci))
                }
                // Not followed: the hop (module docs, *Locks*).
                None => out.push(*op),
            }
        }
        out
    }

    /// The crossings of a `flood`/`all` (`normal` false) or a `NORMAL` (of a packet that came in
    /// as `key` and is `k` now): for every patch port of the bridge but the input port, the
    /// peer's translation of the packet as it leaves there — a `NORMAL` only for the ports it
    /// may send `k` to, with the VLAN it would leave with (module docs, *NORMAL*). A crossing
    /// not followed (the peer's table would block) is left out: the op reaches that port by
    /// the hop. Past [`MAX_CROSSINGS`] a flood is a loop (`looped`, nothing returned); a
    /// `NORMAL` leaves that port to the hop, which the datapath bounds (the unicast forwarding
    /// of this translation must not fail for a loop its flood would meet).
    fn cross_patch_ports(
        &mut self,
        resolver: &Resolver,
        key: &FlowKey,
        k: &FlowKey,
        depth: u32,
        normal: bool,
    ) -> Vec<Op> {
        let mut ports = resolver.patch_ports();
        ports.sort_unstable();
        let mut patches = Vec::new();
        for p in ports.into_iter().filter(|&p| p != key.in_port) {
            let tci = match normal {
                true => match resolver.normal_output(key.in_port, k.vlan_tci, p) {
                    Some(tci) => tci,
                    None => continue,
                },
                false => k.vlan_tci,
            };
            let Some(peer) = resolver.peer(p) else { continue };
            if depth + 1 > MAX_CROSSINGS {
                if normal {
                    continue;
                }
                self.looped = true;
                return Vec::new();
            }
            if let Some((peer_ops, rule)) = self.cross(&peer, &FlowKey { vlan_tci: tci, ..*k }, depth + 1) {
                patches.push(patch_op(p, &peer, &peer_ops, rule, tci));
            }
            if self.looped || self.error.is_some() {
                return Vec::new();
            }
        }
        patches
    }

    /// The peer's ops for the packet `k` crossing into it, and the attribution of the peer's
    /// rules it passed; `None` when its table would block.
    fn cross(&mut self, peer: &Peer, k: &FlowKey, depth: u32) -> Option<(Vec<Op>, RuleId)> {
        let Some(read) = peer.table.try_read() else {
            FALLBACKS.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        peer.table.add_dependent(self.origin);
        let key = FlowKey { in_port: peer.port, metadata: 0, ..*k };
        let x = read.xlate(&key);
        let mut wc = x.wildcards;
        wc.in_port = 0;
        wc.metadata = 0;
        self.wc = self.wc.union(&wc);
        if let Some(e) = x.error {
            self.error = Some(e);
            return Some((Vec::new(), NO_RULE));
        }
        if read.is_removed(peer.port) {
            // A removed port's packets are dropped (as the peer's own classify does).
            return Some((Vec::new(), NO_RULE));
        }
        let rule = crate::chain::attribution_of(&x).unwrap_or(NO_RULE);
        match peer.table.patch_resolver() {
            Some(r) => Some((self.cross_ops(&x.ops, &r, &key, depth), rule)),
            None => Some((x.ops, rule)),
        }
    }
}

/// The crossing of patch port `port` into `peer`, whose translation gave `ops` and `rule`.
fn patch_op(port: u32, peer: &Peer, ops: &[Op], rule: RuleId, vlan_tci: u16) -> Op {
    Op::Patch(PatchOp {
        port,
        from: peer.from,
        bridge: peer.bridge,
        in_port: peer.port,
        ops: actions::intern(ops),
        rule,
        vlan_tci,
    })
}

/// The key as `op` leaves it (the rewrites the translation's ops make; others leave it).
fn apply_to_key(op: &Op, k: &mut FlowKey) {
    match *op {
        Op::SetDlSrc(m) => k.dl_src = m,
        Op::SetDlDst(m) => k.dl_dst = m,
        Op::SetVlanVid(v) => k.vlan_tci = (k.vlan_tci & VLAN_PCP_MASK) | VLAN_CFI | v,
        Op::StripVlan => k.vlan_tci = 0,
        Op::PushVlan(_) => k.vlan_tci = VLAN_CFI,
        Op::SetNwTos(t) if k.dl_type == ETH_TYPE_IP => k.nw_tos = (k.nw_tos & 3) | (t & 0xfc),
        Op::DecTtl => k.nw_ttl = k.nw_ttl.saturating_sub(1),
        Op::SetField { field, value, mask } => {
            let v = (field.get(k) & !mask) | (value & mask);
            field.set(k, v);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_flow::formats::ofctl;
    use rqvs_flow::Rule;
    use std::sync::atomic::AtomicUsize;

    use crate::table::{Changes, RuleChange};

    fn table(text: &str) -> OfprotoTable {
        OfprotoTable::build(&ofctl::parse_flows("t", text).unwrap()).unwrap()
    }

    fn rule(text: &str, id: u32) -> Rule {
        let mut r = ofctl::parse_flows("t", text).unwrap().remove(0);
        r.id = RuleId(id);
        r
    }

    /// `from`'s port `port` is a patch port whose peer is `to`'s port `peer_port`.
    fn link(from: &OfprotoTable, links: Vec<(u32, &OfprotoTable, &str, u32)>) {
        let links: Vec<(u32, Peer)> = links
            .into_iter()
            .map(|(port, to, name, peer_port)| {
                (port, Peer { from: 0, bridge: bridge_id(name), table: to.clone(), port: peer_port })
            })
            .collect();
        from.set_patch_resolver(Some(Arc::new(Links(links))));
    }

    /// A test's patch ports: (port, its peer).
    struct Links(Vec<(u32, Peer)>);

    impl PatchPorts for Links {
        fn peer(&self, port: u32) -> Option<Peer> {
            self.0.iter().find(|(q, _)| *q == port).map(|(_, x)| x.clone())
        }

        fn patch_ports(&self) -> Vec<u32> {
            self.0.iter().map(|(p, _)| *p).collect()
        }
    }

    /// A crossing from bridge 0's `port` into `bridge`'s `in_port` with the peer's `ops`.
    fn crossing(port: u32, bridge: &str, in_port: u32, ops: &[Op], rule: RuleId, vlan_tci: u16) -> Op {
        Op::Patch(PatchOp {
            port,
            from: 0,
            bridge: bridge_id(bridge),
            in_port,
            ops: actions::intern(ops),
            rule,
            vlan_tci,
        })
    }

    /// The attribution of `t`'s rules for `key` (what a crossing into `t` credits).
    fn rule_at(t: &OfprotoTable, key: &FlowKey) -> RuleId {
        let r = crate::chain::attribution_of(&t.read().xlate(key)).unwrap();
        assert_ne!(r, NO_RULE);
        r
    }

    fn tcp(in_port: u32, tp_dst: u16) -> FlowKey {
        FlowKey {
            in_port,
            dl_type: ETH_TYPE_IP,
            nw_proto: 6,
            nw_src: 0x0a00_0001,
            nw_dst: 0x0a00_0002,
            tp_dst,
            nw_ttl: 64,
            dl_dst: [2, 0, 0, 0, 0, 2],
            ..FlowKey::ZERO
        }
    }

    #[test]
    fn an_output_to_a_patch_port_crosses_into_the_peer() {
        let a = table("priority=1,in_port=1,actions=mod_dl_dst:02:00:00:00:00:09,output:2\n");
        let b = table(
            "priority=20,in_port=5,dl_dst=02:00:00:00:00:09,tcp,tp_dst=80,actions=output:7\n\
             priority=10,in_port=5,actions=output:8\n",
        );
        link(&a, vec![(2, &b, "cross-b", 5)]);
        let v = a.classify(&tcp(1, 80));
        let want_peer = actions::intern(&[Op::Output(7)]);
        assert_eq!(
            v.action.to_ops(),
            vec![
                Op::SetDlDst([2, 0, 0, 0, 0, 9]),
                Op::Patch(PatchOp {
                    port: 2,
                    from: 0,
                    bridge: bridge_id("cross-b"),
                    in_port: 5,
                    ops: want_peer,
                    rule: rule_at(&b, &FlowKey { in_port: 5, dl_dst: [2, 0, 0, 0, 0, 9], ..tcp(1, 80) }),
                    vlan_tci: 0,
                })
            ],
            "the peer saw the rewritten dl_dst and the packet's tp_dst"
        );
        // The peer's lookup examined tp_dst: it is in the one megaflow, which is the ingress
        // bridge's (its in_port).
        assert_eq!(v.megaflow.mask.tp_dst, u16::MAX);
        assert_eq!(v.megaflow.value.in_port, 1);
        assert_eq!(a.classify(&tcp(1, 81)).action.to_string(), "set(eth(dst=02:00:00:00:00:09)),patch(cross-b:5:8)");
        // Without the resolver the output stays an output (the datapath hop).
        a.set_patch_resolver(None);
        assert_eq!(a.classify(&tcp(1, 80)).action.to_ops(), vec![Op::SetDlDst([2, 0, 0, 0, 0, 9]), Op::Output(2)]);
    }

    #[test]
    fn a_group_bucket_that_rewrites_crosses_on_its_copy() {
        use rqvs_flow::group::{Bucket, Group, GroupType};
        let a = table("priority=1,in_port=1,actions=group:1\n");
        let b = table(
            "priority=20,in_port=5,dl_dst=02:00:00:00:00:09,actions=output:7\n\
             priority=10,in_port=5,actions=output:8\n",
        );
        let bucket = |acts: &str| Bucket::new(rule(&format!("actions={acts}"), 0).actions);
        let g = Group {
            id: 1,
            kind: GroupType::All,
            buckets: vec![bucket("mod_dl_dst:02:00:00:00:00:09,output:2"), bucket("output:2"), bucket("output:3")],
        };
        a.commit(vec![RuleChange::Group(g)]).unwrap();
        link(&a, vec![(2, &b, "group-b", 5)]);
        let v = a.classify(&tcp(1, 80));
        let crossing = |ops: &[Op], dl_dst: [u8; 6]| {
            Op::Patch(PatchOp {
                port: 2,
                from: 0,
                bridge: bridge_id("group-b"),
                in_port: 5,
                ops: actions::intern(ops),
                rule: rule_at(&b, &FlowKey { in_port: 5, dl_dst, ..tcp(1, 80) }),
                vlan_tci: 0,
            })
        };
        let rewritten = [2, 0, 0, 0, 0, 9];
        let first = actions::intern(&[Op::SetDlDst(rewritten), crossing(&[Op::Output(7)], rewritten)]);
        assert_eq!(
            v.action.to_ops(),
            vec![Op::Clone(first), crossing(&[Op::Output(8)], tcp(1, 80).dl_dst), Op::Output(3)],
            "the first bucket's copy crosses as rewritten, the second (inline) as it came: {}",
            v.action
        );
        assert_eq!(v.megaflow.mask.dl_dst, [0xff; 6], "the peer examined dl_dst");
        // Without the resolver: the bucket's output stays an output inside the copy (the hop).
        a.set_patch_resolver(None);
        assert_eq!(a.classify(&tcp(1, 80)).action.to_string(), "clone(set(eth(dst=02:00:00:00:00:09)),2),2,3");
    }

    #[test]
    fn a_peer_that_drops_adds_nothing_and_in_port_crosses_back() {
        let a = table("priority=1,in_port=1,actions=output:2,output:3\npriority=1,in_port=2,actions=output:3\n");
        let b = table("priority=1,in_port=5,tcp,tp_dst=80,actions=in_port\n");
        link(&a, vec![(2, &b, "back-b", 5)]);
        link(&b, vec![(5, &a, "back-a", 2)]);
        // tp_dst 81: the peer drops; only output:3 remains.
        assert_eq!(a.classify(&tcp(1, 81)).action.to_ops(), vec![Op::Output(3)]);
        // tp_dst 80: br-b sends it back through the patch port: br-a gets it on port 2.
        let v = a.classify(&tcp(1, 80));
        let inner_a = actions::intern(&[Op::Output(3)]);
        let inner_b = actions::intern(&[Op::Patch(PatchOp {
            port: 5,
            from: 0,
            bridge: bridge_id("back-a"),
            in_port: 2,
            ops: inner_a,
            rule: rule_at(&a, &tcp(2, 80)),
            vlan_tci: 0,
        })]);
        assert_eq!(
            v.action.to_ops(),
            vec![
                Op::Patch(PatchOp {
                    port: 2,
                    from: 0,
                    bridge: bridge_id("back-b"),
                    in_port: 5,
                    ops: inner_b,
                    rule: rule_at(&b, &tcp(5, 80)),
                    vlan_tci: 0,
                }),
                Op::Output(3)
            ]
        );
    }

    #[test]
    fn flood_and_all_cross_their_patch_ports_and_leave_the_rest_to_the_executor() {
        let a = table("priority=1,in_port=1,actions=flood\npriority=1,in_port=4,actions=all\npriority=1,in_port=2,actions=flood\n");
        let b = table("priority=5,in_port=5,tcp,tp_dst=80,actions=output:7\npriority=1,in_port=5,actions=drop\n");
        let c = table("priority=1,in_port=9,actions=mod_dl_src:02:00:00:00:00:0c,output:10\n");
        // Every other port (not a patch port that crosses) is left to the executor's flood.
        link(&a, vec![(2, &b, "flood-b", 5), (6, &c, "flood-c", 9)]);
        let v = a.classify(&tcp(1, 80));
        let into_b = crossing(2, "flood-b", 5, &[Op::Output(7)], rule_at(&b, &tcp(5, 80)), 0);
        let into_c = crossing(
            6,
            "flood-c",
            9,
            &[Op::SetDlSrc([2, 0, 0, 0, 0, 0xc]), Op::Output(10)],
            rule_at(&c, &tcp(9, 80)),
            0,
        );
        assert_eq!(
            v.action.to_ops(),
            vec![Op::FloodCrossing { all: false, patches: actions::intern(&[into_b, into_c]) }]
        );
        assert_eq!(
            v.action.to_string(),
            "flood(patch(flood-b:5:7),patch(flood-c:9:set(eth(src=02:00:00:00:00:0c)),10))"
        );
        // The peer's lookup examined tp_dst: one megaflow over both bridges' wildcards.
        assert_eq!(v.megaflow.mask.tp_dst, u16::MAX);
        // tp_dst 81: b drops it — the crossing stays in the list with no ops (the port is skipped).
        let v = a.classify(&tcp(1, 81));
        let into_b = crossing(2, "flood-b", 5, &[], rule_at(&b, &tcp(5, 81)), 0);
        assert_eq!(
            v.action.to_ops(),
            vec![Op::FloodCrossing { all: false, patches: actions::intern(&[into_b, into_c]) }]
        );
        assert_eq!(
            v.action.to_string(),
            "flood(patch(flood-b:5:drop),patch(flood-c:9:set(eth(src=02:00:00:00:00:0c)),10))"
        );
        // `all` the same; a flood from a patch port does not cross back through it.
        let v = a.classify(&tcp(4, 80));
        assert!(matches!(v.action.to_ops()[..], [Op::FloodCrossing { all: true, .. }]), "{}", v.action);
        assert_eq!(
            a.classify(&tcp(2, 80)).action.to_string(),
            "flood(patch(flood-c:9:set(eth(src=02:00:00:00:00:0c)),10))"
        );
        // Without the resolver: the plain flood.
        a.set_patch_resolver(None);
        assert_eq!(a.classify(&tcp(1, 80)).action.to_ops(), vec![Op::Flood]);
    }

    /// [`Links`] whose `NORMAL` leaves port `p` with `out(in_port, tci, p)`.
    struct Tagging(Links, fn(u32, u16, u32) -> Option<u16>);

    impl PatchPorts for Tagging {
        fn peer(&self, port: u32) -> Option<Peer> {
            self.0.peer(port)
        }

        fn patch_ports(&self) -> Vec<u32> {
            self.0.patch_ports()
        }

        fn normal_output(&self, in_port: u32, vlan_tci: u16, port: u32) -> Option<u16> {
            (self.1)(in_port, vlan_tci, port)
        }
    }

    #[test]
    fn normal_crosses_every_patch_port_it_may_send_to() {
        let a = table("priority=1,actions=NORMAL\n");
        let b = table(
            "priority=9,in_port=5,dl_vlan=10,actions=output:8\n\
             priority=5,in_port=5,tcp,tp_dst=80,actions=output:7\n\
             priority=1,in_port=5,actions=NORMAL\n",
        );
        let c = table("priority=1,in_port=9,actions=drop\n");
        link(&a, vec![(2, &b, "normal-b", 5), (6, &c, "normal-c", 9)]);
        let v = a.classify(&tcp(1, 80));
        let into_b = crossing(2, "normal-b", 5, &[Op::Output(7)], rule_at(&b, &tcp(5, 80)), 0);
        let into_c = crossing(6, "normal-c", 9, &[], rule_at(&c, &tcp(9, 80)), 0);
        assert_eq!(v.action.to_ops(), vec![Op::NormalCrossing { patches: actions::intern(&[into_b, into_c]) }]);
        assert_eq!(v.action.to_string(), "NORMAL(patch(normal-b:5:7),patch(normal-c:9:drop))");
        // One megaflow over both bridges' wildcards, and the whole tag (NORMAL retags by it).
        assert_eq!(v.megaflow.mask.tp_dst, u16::MAX);
        assert_eq!(v.megaflow.mask.vlan_tci, u16::MAX);
        // b's NORMAL for another port: a crossing whose ops are NORMAL (b has no resolver).
        assert_eq!(
            a.classify(&tcp(1, 81)).action.to_string(),
            "NORMAL(patch(normal-b:5:NORMAL),patch(normal-c:9:drop))"
        );
        // From a patch port: never back through it.
        assert_eq!(a.classify(&tcp(2, 80)).action.to_string(), "NORMAL(patch(normal-c:9:drop))");
        // The ports' VLANs: port 6 never carries it, port 2 tags it 10 — b sees the tag.
        let links = vec![(2, Peer { from: 0, bridge: bridge_id("normal-b"), table: b.clone(), port: 5 })];
        let out: fn(u32, u16, u32) -> Option<u16> = |_, _, p| (p != 6).then_some(0x1000 | 10);
        a.set_patch_resolver(Some(Arc::new(Tagging(Links(links), out))));
        let v = a.classify(&tcp(1, 80));
        let tagged = FlowKey { vlan_tci: 0x1000 | 10, ..tcp(5, 80) };
        let into_b = crossing(2, "normal-b", 5, &[Op::Output(8)], rule_at(&b, &tagged), 0x1000 | 10);
        assert_eq!(v.action.to_ops(), vec![Op::NormalCrossing { patches: actions::intern(&[into_b]) }]);
        // No patch port it may send to: plain NORMAL, the tag left as the rules need it.
        let none: fn(u32, u16, u32) -> Option<u16> = |_, _, _| None;
        let links = vec![(2, Peer { from: 0, bridge: bridge_id("normal-b"), table: b.clone(), port: 5 })];
        a.set_patch_resolver(Some(Arc::new(Tagging(Links(links), none))));
        let v = a.classify(&tcp(1, 80));
        assert_eq!(v.action.to_ops(), vec![Op::Normal]);
        assert_eq!(v.megaflow.mask.vlan_tci, 0);
    }

    #[test]
    fn normal_through_a_loop_of_patch_pairs_stops_crossing_at_the_bound() {
        // a:2 <-> b:5 and a:3 <-> b:6, both NORMAL: each NORMAL crosses the other pair.
        let a = table("priority=1,actions=NORMAL\n");
        let b = table("priority=1,actions=NORMAL\n");
        link(&a, vec![(2, &b, "nloop-b", 5), (3, &b, "nloop-b", 6)]);
        link(&b, vec![(5, &a, "nloop-a", 2), (6, &a, "nloop-a", 3)]);
        let x = a.read().xlate_crossing(&tcp(1, 80));
        assert_eq!(x.error, None, "a loop the flood would meet does not fail the translation");
        // Two chains (one per pair) of MAX_CROSSINGS crossings each; the last NORMAL plain.
        let text = a.classify(&tcp(1, 80)).action.to_string();
        assert_eq!(text.matches("patch(").count(), 2 * MAX_CROSSINGS as usize, "{text}");
        assert!(text.contains("NORMAL))))"), "{text}");
    }

    #[test]
    fn a_commit_on_the_peer_marks_the_origin_changed() {
        let a = table("priority=1,in_port=1,actions=output:2\n");
        let b = table("priority=1,in_port=5,actions=output:7\n");
        link(&a, vec![(2, &b, "mark-b", 5)]);
        let marked = Arc::new(AtomicU64::new(0));
        let m = marked.clone();
        a.set_on_marked(Some(Arc::new(move |v| m.store(v, Ordering::Relaxed))));
        let before = a.version();
        b.commit(vec![RuleChange::Add(rule("priority=9,in_port=5,actions=output:8", 100))]).unwrap();
        assert_eq!(a.version(), before, "a never crossed into b yet: nothing to mark");
        let v = a.classify(&tcp(1, 80));
        assert!(v.action.to_string().ends_with("patch(mark-b:5:8)"), "{}", v.action);
        b.commit(vec![RuleChange::Remove(RuleId(100))]).unwrap();
        assert_eq!(a.version(), before + 1);
        assert_eq!(marked.load(Ordering::Relaxed), before + 1, "the hook heard of it");
        assert_eq!(a.read().changes_since(before), Changes::Any);
        assert!(a.classify(&tcp(1, 80)).action.to_string().ends_with("patch(mark-b:5:7)"));
        // b's own version moved by its commits only.
        assert_eq!(b.version(), 2);
    }

    #[test]
    fn a_patch_loop_is_dropped_and_counted() {
        // a:2 <-> b:5 and b:6 <-> a:3; a sends 1 and 3 to 2, b sends 5 to 6: a loop.
        let a = table("priority=1,in_port=1,actions=output:2\npriority=1,in_port=3,actions=output:2\n");
        let b = table("priority=1,in_port=5,actions=output:6\n");
        link(&a, vec![(2, &b, "loop-b", 5), (3, &b, "loop-b", 6)]);
        link(&b, vec![(5, &a, "loop-a", 2), (6, &a, "loop-a", 3)]);
        let before = loops();
        let x = a.read().xlate_crossing(&tcp(1, 80));
        assert_eq!(x.error, Some(XlateError::PatchLoop));
        assert!(x.ops.is_empty());
        assert_eq!(a.classify(&tcp(1, 80)).action, crate::DpAction::Drop);
        assert!(loops() >= before + 2);
        assert!(x.error.unwrap().to_string().contains("patch loop"));
    }

    /// Two bridges crossing into each other, commits on both, upcalls crossing both ways in a
    /// loop: it finishes (module docs, *Locks*). Many rounds.
    #[test]
    fn crossing_and_commits_on_both_tables_never_deadlock() {
        for round in 0..20 {
            let a = table("priority=1,in_port=1,actions=output:2\npriority=1,in_port=2,actions=output:1\n");
            let b = table("priority=1,in_port=5,actions=output:7\npriority=1,in_port=7,actions=output:5\n");
            link(&a, vec![(2, &b, "dl-b", 5)]);
            link(&b, vec![(5, &a, "dl-a", 2)]);
            // Each has crossed into the other once: every commit on one marks the other.
            assert!(a.classify(&tcp(1, 1)).action.to_string().contains("patch("));
            assert!(b.classify(&tcp(7, 1)).action.to_string().contains("patch("));
            let (done, finished) = std::sync::mpsc::channel();
            let crossed = Arc::new(AtomicUsize::new(0));
            let mut threads = Vec::new();
            for (t, port) in [(a.clone(), 1), (b.clone(), 7), (a.clone(), 1), (b.clone(), 7)] {
                let done = done.clone();
                let crossed = crossed.clone();
                threads.push(std::thread::spawn(move || {
                    for i in 0..300u16 {
                        let read = t.read();
                        for j in 0..8 {
                            let v = read.classify(&tcp(port, i * 8 + j));
                            if v.action.to_string().contains("patch(") {
                                crossed.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    let _ = done.send(());
                }));
            }
            for (k, t) in [a.clone(), b.clone()].into_iter().enumerate() {
                let done = done.clone();
                threads.push(std::thread::spawn(move || {
                    for i in 0..300u32 {
                        let id = 1000 + k as u32 * 10_000 + i;
                        let r = rule(&format!("priority=5,in_port=9,tcp,tp_dst={i},actions=output:1"), id);
                        t.commit(vec![RuleChange::Add(r)]).unwrap();
                        t.commit(vec![RuleChange::Remove(RuleId(id))]).unwrap();
                    }
                    let _ = done.send(());
                }));
            }
            drop(done);
            for n in 0..threads.len() {
                let r = finished.recv_timeout(std::time::Duration::from_secs(60));
                assert!(r.is_ok(), "round {round}: deadlock: {n} of {} threads finished in 60 s", threads.len());
            }
            for t in threads {
                t.join().unwrap();
            }
            assert!(crossed.load(Ordering::Relaxed) > 0, "round {round}: some upcalls crossed");
            // 600 commits of its own, 600 marks of the other's.
            assert!(a.version() >= 1200 && b.version() >= 1200, "{} {}", a.version(), b.version());
        }
    }
}
