//! The datapath's form of a rule's actions: a compact list of [`Op`]s that the fast path holds
//! as a `Copy` handle ([`crate::DpAction`]) and applies without allocating.
//!
//! A rule's OpenFlow actions ([`rqvs_flow::Actions`]) become ops once, when the slow path (or
//! CFLOWS' classifier) hands out the rule's action: `drop` and actions rqvs does not execute
//! ([`Action::Other`]) are left out; what remains is
//! - nothing → [`crate::DpAction::Drop`],
//! - exactly one `output:N` → [`crate::DpAction::Output`] (the common case: no lookup at all),
//! - anything else → [`crate::DpAction::Apply`] with an [`ActionsId`]: the list's index in the
//!   process-wide **action table**.
//!
//! The action table interns lists: equal lists get the same id, so two actions compare equal
//! exactly when their op lists are equal (the revalidator's "same action" and verification's
//! comparisons keep working on `DpAction`). [`ops`] reads a list without a lock (a slot is an
//! atomic pointer; the read is a guard that keeps the list readable even if it is freed
//! meanwhile); interning, holding and releasing take a mutex, on the slow path only.
//!
//! **Accounting and the limit.** The table has a **limit** ([`set_limit`], default
//! [`DEFAULT_LIMIT`], the switch's `--max-action-lists`) that the switch enforces where lists
//! come in: a flow-mod whose rule would add a new list to a full table is refused
//! ([`admit_rule`] → [`TableFull`], OpenFlow's `OFPFMFC_TABLE_FULL`) rather than grown. Lists
//! interned by the slow path ([`intern`]) are the lists of rules already admitted, so they do
//! not pass the limit (except the rules a switch starts with, which are not refused). [`stats`]
//! says how many lists the table holds, their approximate bytes, the limit, the refusals, the
//! lists freed and the reads of freed ones.
//!
//! **Freeing.** A list lives while something counts it — a **hold** ([`hold`], [`release`]):
//! the flows of the switch's table of record ([`hold_rule`], [`release_held`]: taken when a flow
//! enters the table, dropped when it leaves), the megaflows (`rqvs_datapath::dpcls::Dpcls`: at install
//! and removal), the CFLOWS action tables each publication carries (while a PMD may read it),
//! and a list that clones another (a group's bucket) holds that one. An id in transit has no
//! hold: a PMD's batch (the actions it read from megaflows, the EMC and a publication), an upcall
//! verdict on its way from the handler, a translation the revalidator compares, a packet-out's
//! actions. Those are covered two ways:
//! - **epochs**: a thread that reads ids it does not hold registers a [`Reader`] and says, at its
//!   batch boundary, that it holds none ([`Reader::quiescent`]); a list that lost its last hold
//!   (or was handed out by [`intern`] while it had none) at epoch *e* is freed only once every
//!   reader has passed a quiescent point after *e* (each collection advances the epoch);
//! - **a grace period** ([`GRACE`], 1 s): the threads that are not readers (the handler, the
//!   control thread, the revalidator) have that long between interning a list and handing it to
//!   a holder — what they do in micro- to milliseconds.
//!
//! The readers collect ([`collect`]) now and then at their quiescent points (the switch's PMDs
//! are its readers), and so do interning and releasing once [`enable_freeing`] was called (the
//! switch does, when it makes its table of record); a process with neither (`rqvs replay`, the
//! library's users) collects nothing and its table only grows, as before, with the distinct
//! lists it sees. An id carries
//! its slot's **generation**: a freed slot is reused for another list under another id, and the
//! old id reads as gone (an empty list: a drop, counted `stale`), never as the new list. So the
//! table holds the lists in use plus those unused for about a second: a controller that installs
//! and deletes distinct lists keeps it at about a second's worth of its flow-mods
//! (`crates/switch/tests/action_table.rs`).
//!
//! Not covered: a thread that is not a reader and holds an uncounted id longer than the grace
//! (descheduled for a second between interning and holding: the list may be freed, its frames
//! dropped and counted `stale`).

// foldhash: a bundle of 125K flows with distinct action lists interns each.
use arc_swap::ArcSwapOption;
use hashbrown::HashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use rqvs_flow::field::Field;
use rqvs_flow::{Action, Match, Rule};

/// One datapath action, applied in order to the frame (see [`rqvs_flow::Action`] for each
/// one's meaning).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Output(u32),
    InPort,
    /// Every port but the input port, except those PORT_MOD made `NO_FLOOD`.
    Flood,
    /// Every port but the input port (`NO_FLOOD` ports too).
    All,
    /// To the controller: a packet-in ([`ToController`] says what it carries besides the frame).
    Controller(ToController),
    /// OpenFlow's `NORMAL`: the switch's MAC-learning forwarding (learn the source address on
    /// the input port; send to the port the destination was learned on, or flood).
    Normal,
    SetDlSrc([u8; 6]),
    SetDlDst([u8; 6]),
    SetVlanVid(u16),
    StripVlan,
    SetNwTos(u8),
    /// Decrement the IPv4 TTL; when it reaches 0 the remaining ops are skipped (OVS's
    /// `compose_dec_ttl`: outputs already done stay done).
    DecTtl,
    /// `set_field`: the field's bits under `mask` take `value`'s (both shifted to the field,
    /// as in [`rqvs_flow::Action::SetField`]). The executor writes the fields a frame view can
    /// rewrite ([`set_field_executable`]); the translation emits none for `metadata` and
    /// `in_port`, which live only in the pipeline's key.
    SetField {
        field: &'static Field,
        value: u128,
        mask: u128,
    },
    /// Push a fresh 802.1Q (0x8100) or 802.1ad (0x88a8) tag: VID 0, PCP 0 (as OVS 3.1).
    PushVlan(u16),
    /// The translation met `dec_ttl` with a TTL of 0 or 1 and stopped that rule's actions
    /// (OVS's "stop processing for current table"); the executor counts it and sends the
    /// packet to the controller with reason `INVALID_TTL` (OVS's `compose_dec_ttl`: the whole
    /// frame, the cookie and table of the rule whose `dec_ttl` it was; the channel passes it to
    /// the connections whose asynchronous configuration asks for that reason).
    TtlExpired(ToController),
    /// OpenFlow's `meter` instruction: the packet goes through meter N (the switch's meter
    /// table: a band that applies drops it, and the ops after it are not run). A meter that does
    /// not exist lets the packet through (as OVS's datapath does).
    Meter(u32),
    /// Run the interned op list on a copy of the frame (an ALL group's bucket that rewrites it);
    /// the ops after it see the frame as it was.
    Clone(ActionsId),
    /// An output to a patch port whose crossing the translation followed ([`crate::crossing`]):
    /// the frame as it is at this point enters the peer bridge on its port `in_port`, where
    /// the interned list `ops` (the peer bridge's translation, in the peer's port numbers) runs
    /// on a copy of it; the ops after this one see the frame as it was.
    Patch(PatchOp),
    /// `flood` (`all: false`) or `all` on a bridge whose patch ports the translation crossed
    /// ([`crate::crossing`]): the frame goes to every port but the input port as [`Op::Flood`]
    /// / [`Op::All`] would send it, except the patch ports of the interned list `patches`
    /// (each an [`Op::Patch`], in port order), which it crosses instead — subject to the same
    /// port bits (`NO_FLOOD` for `flood`, `NO_FWD` for both), read when the frame is sent. A
    /// crossing whose peer drops the packet is in the list with no ops: the port is skipped.
    FloodCrossing {
        all: bool,
        patches: ActionsId,
    },
    /// `NORMAL` on a bridge whose patch ports the translation crossed ([`crate::crossing`]):
    /// the executor decides it per frame as [`Op::Normal`] (learning, the MAC table, the ports'
    /// VLANs), and where that sends the frame to a patch port of the interned list `patches`
    /// (each an [`Op::Patch`], in port order) it crosses instead — when the frame leaves for
    /// that port with the crossing's `vlan_tci`; otherwise (the ports' VLANs changed since) it
    /// sends to the patch port, the datapath hop. A crossing whose peer drops the packet is in
    /// the list with no ops: nothing is sent there.
    NormalCrossing {
        patches: ActionsId,
    },
}

/// What an [`Op::Patch`] carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PatchOp {
    /// The patch port crossed, on the bridge whose op this is (its PORT_MOD bits apply).
    pub port: u32,
    /// That bridge ([`crate::crossing::bridge_id`]): the crossing is counted as sent by
    /// (`from`, `port`) and received by (`bridge`, `in_port`).
    pub from: u16,
    /// The peer bridge ([`crate::crossing::bridge_id`]).
    pub bridge: u16,
    /// The peer port: the packet's `in_port` on the peer bridge.
    pub in_port: u32,
    /// The peer bridge's ops.
    pub ops: ActionsId,
    /// The peer bridge's rules the packet passed, as one attribution id ([`crate::chain`];
    /// [`crate::NO_RULE`]: none): the peer's flow counters count the crossing packets.
    pub rule: rqvs_flow::RuleId,
    /// The packet's `vlan_tci` as it crossed (the peer's translation saw this one). A crossing
    /// of [`Op::NormalCrossing`] is taken only by a frame that leaves with this TCI (`NORMAL`
    /// retags per port, per packet); the others cross the frame as the ops leave it.
    pub vlan_tci: u16,
}

/// What a `controller` op's packet-in says besides the frame. Open vSwitch's datapath carries
/// the same in the cookie of its `userspace(controller(...))` action: which rule sent the packet
/// is not known once a megaflow or the EMC decides, so the op itself says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ToController {
    /// The action's max_len (`u16::MAX`: `OFPCML_NO_BUFFER`, what `controller` without a length
    /// means).
    pub max_len: u16,
    /// The cookie of the rule whose action it is; all ones when no rule is known (a
    /// packet-out's own actions: OpenFlow's "no cookie").
    pub cookie: u64,
    /// The rule is a table-miss flow (priority 0, matching every packet): its packet-ins say
    /// `NO_MATCH` (OpenFlow 1.3) / `TABLE_MISS` (1.4) rather than `ACTION`.
    pub table_miss: bool,
    /// The table of the rule whose action it is (the packet-in's table_id).
    pub table_id: u8,
}

impl ToController {
    /// A `controller:max_len` op outside any rule.
    pub fn new(max_len: u16) -> ToController {
        ToController { max_len, cookie: u64::MAX, table_miss: false, table_id: 0 }
    }
}

/// Is `r` a table-miss flow: priority 0, matching every packet (OpenFlow 1.3 §5.4)?
pub fn is_table_miss(r: &Rule) -> bool {
    let m = &r.matches;
    r.priority == 0 && m.mask() == Match::ANY.mask() && m.tp_src_range().is_any() && m.tp_dst_range().is_any()
}

impl Op {
    /// The op of one OpenFlow action (`None` for `drop` and actions rqvs does not execute),
    /// outside any rule (see [`Op::of_rule`]).
    pub fn of(a: &Action) -> Option<Op> {
        Some(match a {
            Action::Output(p) => Op::Output(*p),
            Action::InPort => Op::InPort,
            Action::All => Op::All,
            Action::Flood => Op::Flood,
            Action::Controller(n) => Op::Controller(ToController::new(n.unwrap_or(u16::MAX))),
            Action::Normal => Op::Normal,
            Action::SetDlSrc(m) => Op::SetDlSrc(*m),
            Action::SetDlDst(m) => Op::SetDlDst(*m),
            Action::SetVlanVid(v) => Op::SetVlanVid(*v),
            Action::StripVlan => Op::StripVlan,
            Action::SetNwTos(t) => Op::SetNwTos(*t),
            Action::DecTtl => Op::DecTtl,
            Action::SetField { field, value, mask } => Op::SetField { field, value: *value, mask: *mask },
            Action::PushVlan(t) => Op::PushVlan(*t),
            Action::Meter(m) => Op::Meter(*m),
            // The pipeline's own: only the translation (`crate::xlate`) executes them, as it
            // needs the tables and the groups; outside it (a list with no pipeline) they are
            // nothing.
            Action::Drop
            | Action::Other(_)
            | Action::Resubmit { .. }
            | Action::Group(_)
            | Action::ClearActions
            | Action::WriteActions(_)
            | Action::WriteMetadata { .. }
            | Action::GotoTable(_) => return None,
        })
    }

    /// The op of one of rule `r`'s actions: a `controller` op says `r`'s cookie and whether
    /// `r` is a table-miss flow.
    pub fn of_rule(a: &Action, r: &Rule) -> Option<Op> {
        Some(match Op::of(a)? {
            Op::Controller(c) => {
                Op::Controller(ToController { cookie: r.cookie, table_miss: is_table_miss(r), table_id: r.table, ..c })
            }
            op => op,
        })
    }

    /// Does the op change the frame (rather than send it somewhere)?
    pub fn rewrites(&self) -> bool {
        !matches!(
            self,
            Op::Output(_)
                | Op::InPort
                | Op::Flood
                | Op::All
                | Op::Controller(_)
                | Op::Normal
                | Op::Clone(_)
                | Op::Patch(_)
                | Op::FloodCrossing { .. }
                | Op::NormalCrossing { .. }
                | Op::TtlExpired(_)
                | Op::Meter(_)
        )
    }
}

/// Can the switch's executor write field `f` into a frame? ([`rqvs_flow::rule::SET_FIELD_WRITABLE`]:
/// the L2 addresses, the VLAN's VID and PCP, IPv4's addresses, DSCP, ECN and TTL, the TCP, UDP
/// and SCTP ports, IPv6's addresses and flow label, ICMPv4/ICMPv6 type and code, the ARP
/// fields, the ND target and link-layer addresses; `metadata` and `in_port` change only the
/// pipeline's key.)
pub fn set_field_executable(f: &Field) -> bool {
    rqvs_flow::rule::SET_FIELD_WRITABLE.contains(&f.name)
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mac =
            |m: &[u8; 6]| format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]);
        match self {
            Op::Output(p) => write!(f, "{p}"),
            Op::InPort => f.write_str("in_port"),
            Op::Flood => f.write_str("flood"),
            Op::All => f.write_str("all"),
            Op::Controller(ToController { max_len: u16::MAX, .. }) => f.write_str("controller"),
            Op::Controller(c) => write!(f, "controller:{}", c.max_len),
            Op::Normal => f.write_str("NORMAL"),
            Op::SetDlSrc(m) => write!(f, "set(eth(src={}))", mac(m)),
            Op::SetDlDst(m) => write!(f, "set(eth(dst={}))", mac(m)),
            Op::SetVlanVid(v) => write!(f, "set_vlan(vid={v})"),
            Op::StripVlan => f.write_str("pop_vlan"),
            Op::SetNwTos(t) => write!(f, "set(ipv4(tos={t:#x}/0xfc))"),
            Op::DecTtl => f.write_str("dec_ttl"),
            Op::SetField { field, value, mask } if *mask == field.all_ones() => {
                write!(f, "set({}={})", field.name, field.format_value(*value))
            }
            Op::SetField { field, value, mask } => {
                write!(f, "set({}={}/{})", field.name, field.format_value(*value), field.format_value(*mask))
            }
            Op::PushVlan(t) => write!(f, "push_vlan(tpid={t:#06x})"),
            Op::TtlExpired(_) => f.write_str("ttl_expired"),
            Op::Meter(m) => write!(f, "meter({m})"),
            Op::Clone(id) => {
                f.write_str("clone(")?;
                for (i, op) in ops(*id).iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{op}")?;
                }
                f.write_str(")")
            }
            Op::Patch(p) => {
                write!(f, "patch({}:{}:", crate::crossing::bridge_name(p.bridge), p.in_port)?;
                for (i, op) in ops(p.ops).iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{op}")?;
                }
                if ops(p.ops).is_empty() {
                    f.write_str("drop")?;
                }
                f.write_str(")")
            }
            // `flood` with its crossings: `flood(patch(br1:2:3),patch(br2:1:drop))`; `NORMAL`'s
            // so: `NORMAL(patch(br1:2:NORMAL))`.
            Op::FloodCrossing { patches, .. } | Op::NormalCrossing { patches } => {
                f.write_str(match self {
                    Op::FloodCrossing { all: true, .. } => "all(",
                    Op::FloodCrossing { all: false, .. } => "flood(",
                    _ => "NORMAL(",
                })?;
                for (i, op) in ops(*patches).iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{op}")?;
                }
                f.write_str(")")
            }
        }
    }
}

impl Op {
    /// The interned list this op runs (a clone's, a crossing's), which a list holding it holds.
    fn inner_list(&self) -> Option<ActionsId> {
        match self {
            Op::Clone(c)
            | Op::Patch(PatchOp { ops: c, .. })
            | Op::FloodCrossing { patches: c, .. }
            | Op::NormalCrossing { patches: c } => Some(*c),
            _ => None,
        }
    }
}

/// An action list's handle in the action table (module docs): its slot (the low [`INDEX_BITS`]
/// bits) and the slot's generation (the high bits), so that the id of a list that was freed
/// reads as gone, never as the list that took its slot since.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActionsId(pub u32);

/// Bits of an [`ActionsId`] that name its slot.
pub const INDEX_BITS: u32 = 22;
const INDEX_MASK: u32 = (1 << INDEX_BITS) - 1;
const GEN_MASK: u32 = u32::MAX >> INDEX_BITS;
/// The most lists the table holds at once (the slots an [`ActionsId`] can name).
pub const MAX_LISTS: usize = 1 << INDEX_BITS;

impl ActionsId {
    fn index(self) -> u32 {
        self.0 & INDEX_MASK
    }

    fn of(index: u32, gen: u32) -> ActionsId {
        ActionsId((gen & GEN_MASK) << INDEX_BITS | index)
    }
}

/// How long a list no holder counts stays in the table at least (module docs, *Freeing*): the
/// time a thread that is not a [`Reader`] (the handler, the control thread, the revalidator)
/// has between interning a list and handing it to a holder.
pub const GRACE: Duration = Duration::from_secs(1);

/// A [`Reader`] collects at most once per this many quiescent points (a power of two).
const COLLECT_EVERY: u32 = 256;

/// Slots in the first segment; segment `s` has `FIRST << s`.
const FIRST: usize = 1024;
const SEGMENTS: usize = 32;

/// A list in its slot, with the id it was given (a slot's list and its id change together).
struct Listed {
    id: ActionsId,
    ops: Box<[Op]>,
}

type Slots = Box<[ArcSwapOption<Listed>]>;

/// A slot's bookkeeping (under the table's lock).
#[derive(Clone, Copy, Default)]
struct Meta {
    /// The generation of the slot's list, or of the next one while it is free.
    gen: u32,
    live: bool,
    /// Holds ([`hold`]) not yet released.
    count: u32,
    /// When the list was last without holds: the epoch and the time at which its count went to
    /// zero, or at which it was handed out ([`intern`]) while at zero. `None` while held.
    unheld: Option<(u64, Instant)>,
    /// In [`Inner::unheld`].
    queued: bool,
}

struct Inner {
    /// List → slot.
    index: HashMap<Box<[Op]>, u32>,
    meta: Vec<Meta>,
    free: Vec<u32>,
    /// Slots whose list was unheld when queued, by the time and epoch it was queued at, oldest
    /// first; one entry per slot at most. An entry whose list was held or freed since is dropped
    /// when it comes up, one whose list was handed out again since goes back with that time.
    unheld: BinaryHeap<Reverse<(Instant, u64, u32)>>,
    /// Each [`Reader`]'s last quiescent epoch (dropped readers' are gone).
    readers: Vec<Weak<AtomicU64>>,
    /// When [`Inner::collect`] last ran.
    collected: Option<Instant>,
}

struct Table {
    segments: [OnceLock<Slots>; SEGMENTS],
    inner: Mutex<Inner>,
    /// Lists and ops held (readable without the lock).
    lists: AtomicUsize,
    ops: AtomicUsize,
    limit: AtomicUsize,
    /// New lists [`try_intern`] refused.
    refused: AtomicU64,
    /// Lists freed.
    freed: AtomicU64,
    /// Reads ([`ops`]) and holds of an id whose list is gone.
    stale: AtomicU64,
    /// Releases of a list without a hold (a holder's bug; the count stays at zero).
    unbalanced: AtomicU64,
    /// The reclamation epoch: advanced by every collection.
    epoch: AtomicU64,
    /// `Inner::unheld.len()`, readable without the lock.
    queued: AtomicUsize,
    /// [`enable_freeing`] was called: interning and releasing collect too.
    freeing: AtomicBool,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| Table {
        segments: std::array::from_fn(|_| OnceLock::new()),
        inner: Mutex::new(Inner {
            index: HashMap::new(),
            meta: Vec::new(),
            free: Vec::new(),
            unheld: BinaryHeap::new(),
            readers: Vec::new(),
            collected: None,
        }),
        lists: AtomicUsize::new(0),
        ops: AtomicUsize::new(0),
        limit: AtomicUsize::new(DEFAULT_LIMIT),
        refused: AtomicU64::new(0),
        freed: AtomicU64::new(0),
        stale: AtomicU64::new(0),
        unbalanced: AtomicU64::new(0),
        epoch: AtomicU64::new(0),
        queued: AtomicUsize::new(0),
        freeing: AtomicBool::new(false),
    })
}

fn lock(t: &Table) -> MutexGuard<'_, Inner> {
    // A poisoned lock only means another thread panicked while holding it; every change to the
    // bookkeeping that can panic (an allocation) comes before the ones that must go together.
    t.inner.lock().unwrap_or_else(|e| e.into_inner())
}

/// The default [`limit`]: 2^20 distinct lists (some 200 MB of lists of three ops; a bundle of
/// 125K flows with distinct lists fits eight times).
pub const DEFAULT_LIMIT: usize = 1 << 20;

/// Sets the most distinct lists [`try_intern`] lets the table hold (module docs), at most
/// [`MAX_LISTS`]. Process-wide; a limit below the lists held refuses every new one.
pub fn set_limit(n: usize) {
    table().limit.store(n.min(MAX_LISTS), Ordering::Relaxed);
}

/// The most distinct lists [`try_intern`] lets the table hold.
pub fn limit() -> usize {
    table().limit.load(Ordering::Relaxed)
}

/// The action table now ([`stats`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stats {
    /// Distinct lists held: used by a flow or a megaflow, or unused for less than about
    /// [`GRACE`] (module docs).
    pub lists: usize,
    /// Ops in them, all lists together.
    pub ops: usize,
    /// Approximate bytes the table takes: each list twice (its slot and the index's key), its
    /// slot, bookkeeping and index entry. The segments' unused slots are not counted.
    pub bytes: usize,
    /// [`limit`].
    pub limit: usize,
    /// New lists refused since the process started, the table being full.
    pub refused: u64,
    /// Lists freed since the process started.
    pub freed: u64,
    /// Reads and holds of an id whose list was freed (module docs: 0 unless a holder kept an id
    /// uncounted past [`GRACE`]; such a read is an empty list, a drop).
    pub stale: u64,
    /// Releases without a hold (a holder's bug; 0).
    pub unbalanced: u64,
}

/// The action table's counts (lock-free).
pub fn stats() -> Stats {
    let t = table();
    let (lists, ops) = (t.lists.load(Ordering::Relaxed), t.ops.load(Ordering::Relaxed));
    let per_list = std::mem::size_of::<ArcSwapOption<Listed>>()
        + std::mem::size_of::<Meta>()
        + std::mem::size_of::<Listed>()
        + 16
        + std::mem::size_of::<Box<[Op]>>()
        + 12;
    Stats {
        lists,
        ops,
        bytes: lists * per_list + 2 * ops * std::mem::size_of::<Op>(),
        limit: limit(),
        refused: t.refused.load(Ordering::Relaxed),
        freed: t.freed.load(Ordering::Relaxed),
        stale: t.stale.load(Ordering::Relaxed),
        unbalanced: t.unbalanced.load(Ordering::Relaxed),
    }
}

/// A new list refused: the table holds [`limit`] lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableFull {
    pub limit: usize,
}

impl fmt::Display for TableFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the action table is full: it holds {} distinct action lists, its limit (--max-action-lists); \
             a list no flow or megaflow uses is freed about a second after its last use",
            self.limit
        )
    }
}

impl std::error::Error for TableFull {}

/// (segment, offset) of slot `i`.
fn slot_of(i: u32) -> (usize, usize) {
    let x = i as usize + FIRST;
    let seg = (usize::BITS - 1 - x.leading_zeros()) as usize - FIRST.trailing_zeros() as usize;
    (seg, x - (FIRST << seg))
}

/// Slot `i`, if its segment exists.
fn slot(t: &Table, i: u32) -> Option<&ArcSwapOption<Listed>> {
    let (seg, off) = slot_of(i);
    t.segments.get(seg).and_then(OnceLock::get).and_then(|s| s.get(off))
}

impl Inner {
    fn id(&self, i: u32) -> ActionsId {
        ActionsId::of(i, self.meta[i as usize].gen)
    }

    /// The live slot of `id`, if its list is still there.
    fn live(&self, id: ActionsId) -> Option<u32> {
        let i = id.index();
        self.meta.get(i as usize).filter(|m| m.live && m.gen == id.0 >> INDEX_BITS).map(|_| i)
    }

    /// Slot `i`'s list has no holds as of now.
    fn mark_unheld(&mut self, t: &Table, i: u32) {
        let stamp = (t.epoch.load(Ordering::SeqCst), Instant::now());
        let m = &mut self.meta[i as usize];
        m.unheld = Some(stamp);
        if !m.queued {
            m.queued = true;
            self.unheld.push(Reverse((stamp.1, stamp.0, i)));
            t.queued.store(self.unheld.len(), Ordering::Relaxed);
        }
    }

    fn hold(&mut self, i: u32) {
        let m = &mut self.meta[i as usize];
        m.count += 1;
        m.unheld = None;
    }

    fn release(&mut self, t: &Table, i: u32) {
        let m = &mut self.meta[i as usize];
        if m.count == 0 {
            t.unbalanced.fetch_add(1, Ordering::Relaxed);
            return;
        }
        m.count -= 1;
        if m.count == 0 {
            self.mark_unheld(t, i);
        }
    }

    /// The slot of `ops`, added if new and the table holds fewer than `limit` lists.
    fn get_or_insert(&mut self, t: &Table, ops: &[Op], limit: usize) -> Result<u32, TableFull> {
        if let Some(&i) = self.index.get(ops) {
            if self.meta[i as usize].count == 0 {
                // Handed out again: it is in transit again (module docs).
                self.mark_unheld(t, i);
            }
            return Ok(i);
        }
        if self.index.len() >= limit.min(MAX_LISTS) {
            t.refused.fetch_add(1, Ordering::Relaxed);
            return Err(TableFull { limit });
        }
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.meta.push(Meta::default());
                (self.meta.len() - 1) as u32
            }
        };
        // The lists it runs (a group's clone) live as long as it does.
        for op in ops {
            if let Some(c) = op.inner_list() {
                match self.live(c) {
                    Some(ci) => self.hold(ci),
                    None => {
                        t.stale.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        let id = self.id(i);
        let (seg, off) = slot_of(i);
        let slots = t.segments[seg].get_or_init(|| (0..FIRST << seg).map(|_| ArcSwapOption::empty()).collect());
        slots[off].store(Some(Arc::new(Listed { id, ops: ops.into() })));
        self.index.insert(ops.into(), i);
        self.meta[i as usize].live = true;
        t.lists.store(self.index.len(), Ordering::Relaxed);
        t.ops.fetch_add(ops.len(), Ordering::Relaxed);
        self.mark_unheld(t, i);
        Ok(i)
    }

    /// Frees slot `i`'s list.
    fn free(&mut self, t: &Table, i: u32) {
        let Some(listed) = slot(t, i).and_then(|s| s.swap(None)) else { return };
        self.index.remove(&listed.ops);
        let m = &mut self.meta[i as usize];
        m.live = false;
        m.gen = (m.gen + 1) & GEN_MASK;
        m.unheld = None;
        self.free.push(i);
        t.lists.store(self.index.len(), Ordering::Relaxed);
        t.ops.fetch_sub(listed.ops.len(), Ordering::Relaxed);
        t.freed.fetch_add(1, Ordering::Relaxed);
        for op in listed.ops.iter() {
            if let Some(c) = op.inner_list() {
                if let Some(ci) = self.live(c) {
                    self.release(t, ci);
                }
            }
        }
    }

    /// Frees the lists unheld since an epoch every reader has passed and for [`GRACE`] at least
    /// (module docs); returns how many.
    fn collect(&mut self, t: &Table) -> usize {
        self.readers.retain(|r| r.strong_count() > 0);
        let oldest = self.readers.iter().filter_map(Weak::upgrade).map(|r| r.load(Ordering::SeqCst)).min();
        let passed = oldest.unwrap_or(u64::MAX);
        let now = Instant::now();
        let ready = |epoch: u64, at: Instant| epoch < passed && now.saturating_duration_since(at) >= GRACE;
        let mut freed = 0;
        while let Some(&Reverse((at, epoch, i))) = self.unheld.peek() {
            if !ready(epoch, at) {
                break;
            }
            self.unheld.pop();
            let m = self.meta[i as usize];
            match m.unheld {
                Some((e, a)) if m.live && m.count == 0 => {
                    if (e, a) == (epoch, at) {
                        self.meta[i as usize].queued = false;
                        self.free(t, i);
                        freed += 1;
                    } else {
                        // Handed out again since it was queued: it waits from then.
                        self.unheld.push(Reverse((a, e, i)));
                    }
                }
                _ => self.meta[i as usize].queued = false,
            }
        }
        t.queued.store(self.unheld.len(), Ordering::Relaxed);
        t.epoch.fetch_add(1, Ordering::SeqCst);
        self.collected = Some(now);
        freed
    }

    /// [`Inner::collect`] if freeing is enabled and the last collection is [`COLLECT_PERIOD`]
    /// old.
    fn collect_if_due(&mut self, t: &Table) {
        if t.freeing.load(Ordering::Relaxed) && self.collected.is_none_or(|c| c.elapsed() >= COLLECT_PERIOD) {
            self.collect(t);
        }
    }
}

/// Interning and releasing collect at most this often ([`enable_freeing`]).
const COLLECT_PERIOD: Duration = Duration::from_millis(100);

/// Makes interning and releasing collect too (at most every 100 ms), beside the [`Reader`]s:
/// the switch's choice, so that a switch without PMDs (no ports) or whose PMDs are busy frees
/// the lists of deleted flows. A process that never calls it frees only through its readers.
pub fn enable_freeing() {
    table().freeing.store(true, Ordering::Relaxed);
}

/// The id of `ops` in the action table, added if new, whatever the [`limit`] (the slow path's
/// interning of lists already admitted: module docs). The id is the caller's to use for
/// [`GRACE`] (and, on a [`Reader`], until its next quiescent point); to keep it longer, hold it
/// ([`hold`]).
///
/// # Panics
/// Past [`MAX_LISTS`] lists held at once — out of reach of the flow-mods a switch admits (its
/// limit is at most that) but for translations combining lists.
pub fn intern(ops: &[Op]) -> ActionsId {
    intern_within(ops, MAX_LISTS).expect("action table full (MAX_LISTS distinct action lists held at once)")
}

/// The id of `ops` in the action table, added if new and the table holds fewer than [`limit`]
/// lists; a list already held is always found.
pub fn try_intern(ops: &[Op]) -> Result<ActionsId, TableFull> {
    intern_within(ops, limit())
}

fn intern_within(ops: &[Op], limit: usize) -> Result<ActionsId, TableFull> {
    let t = table();
    let mut inner = lock(t);
    inner.collect_if_due(t);
    let i = inner.get_or_insert(t, ops, limit)?;
    Ok(inner.id(i))
}

/// Admits rule `r`'s actions: interns the list [`crate::DpAction::from_rule`] makes of them, if
/// it is one the table holds (two ops or more, or one that is not an `output`); refused when
/// the list is new and the table full.
/// Its id (`None`: the actions are no such list) is for [`hold_admitted`].
pub fn admit_rule(r: &Rule) -> Result<Option<ActionsId>, TableFull> {
    let ops = rule_ops(r);
    if is_listed(&ops) {
        return try_intern(&ops).map(Some);
    }
    Ok(None)
}

fn rule_ops(r: &Rule) -> Vec<Op> {
    r.actions.0.iter().filter_map(|a| Op::of_rule(a, r)).collect()
}

/// Is `ops` a list the table holds ([`crate::DpAction::Apply`]), rather than `Drop` (none) or
/// `Output` (one `output`)?
pub fn is_listed(ops: &[Op]) -> bool {
    !matches!(ops, [] | [Op::Output(_)])
}

/// Counts a holder of `id` (a flow, a megaflow, a published action table): its list stays until
/// every hold is released ([`release`]). False (and counted `stale`) when the list is gone
/// already.
pub fn hold(id: ActionsId) -> bool {
    let t = table();
    let mut inner = lock(t);
    match inner.live(id) {
        Some(i) => {
            inner.hold(i);
            true
        }
        None => {
            t.stale.fetch_add(1, Ordering::Relaxed);
            false
        }
    }
}

/// Drops a hold taken with [`hold`] (the list may be freed from then on: module docs).
pub fn release(id: ActionsId) {
    let t = table();
    let mut inner = lock(t);
    if let Some(i) = inner.live(id) {
        inner.release(t, i);
    }
    inner.collect_if_due(t);
}

/// [`hold`]s the list of action `a`, if it has one (`Apply`).
pub fn hold_action(a: crate::DpAction) -> bool {
    match a {
        crate::DpAction::Apply(id) => hold(id),
        _ => true,
    }
}

/// [`release`]s the list of action `a`, if it has one.
pub fn release_action(a: crate::DpAction) {
    if let crate::DpAction::Apply(id) = a {
        release(id);
    }
}

/// [`hold_action`] for many actions, under one lock.
pub fn hold_actions(all: impl IntoIterator<Item = crate::DpAction>) {
    let t = table();
    let mut inner: Option<MutexGuard<'_, Inner>> = None;
    for a in all {
        if let crate::DpAction::Apply(id) = a {
            let inner = inner.get_or_insert_with(|| lock(t));
            match inner.live(id) {
                Some(i) => inner.hold(i),
                None => {
                    t.stale.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

/// [`release_action`] for many actions, under one lock.
pub fn release_actions(all: impl IntoIterator<Item = crate::DpAction>) {
    let t = table();
    let mut inner: Option<MutexGuard<'_, Inner>> = None;
    for a in all {
        if let crate::DpAction::Apply(id) = a {
            let inner = inner.get_or_insert_with(|| lock(t));
            if let Some(i) = inner.live(id) {
                inner.release(t, i);
            }
        }
    }
}

/// Holds rule `r`'s list, interned if missing (whatever the limit: the rule was admitted) — a
/// flow of the table of record. The id held (`None`: the rule's actions are no list the table
/// holds), for [`release_held`]: the flow keeps it, so that its release is by id, not by a
/// search for its list (the list stays in its slot while held).
pub fn hold_rule(r: &Rule) -> Option<ActionsId> {
    let ops = rule_ops(r);
    if !is_listed(&ops) {
        return None;
    }
    let t = table();
    let mut inner = lock(t);
    inner.collect_if_due(t);
    let i = inner.get_or_insert(t, &ops, MAX_LISTS).ok()?;
    inner.hold(i);
    Some(inner.id(i))
}

/// [`hold_rule`] for a rule [`admit_rule`] just admitted, given the id it returned: held by that
/// id — no list made from the rule and searched for again — while its slot still holds that
/// list (within the grace period it does); else as [`hold_rule`].
pub fn hold_admitted(r: &Rule, admitted: Option<ActionsId>) -> Option<ActionsId> {
    // Not a list: the rule holds none (what `hold_rule` finds too).
    let id = admitted?;
    let t = table();
    let mut inner = lock(t);
    match inner.live(id) {
        Some(i) => {
            inner.hold(i);
            Some(id)
        }
        None => {
            drop(inner);
            hold_rule(r)
        }
    }
}

/// Releases a hold [`hold_rule`] took, by the id it returned (`None`: it held nothing) — no
/// list made from the rule and searched for again. An id whose list is gone is counted
/// `unbalanced` (a release without a hold).
pub fn release_held(held: Option<ActionsId>) {
    let Some(id) = held else { return };
    let t = table();
    let mut inner = lock(t);
    match inner.live(id) {
        Some(i) => inner.release(t, i),
        None => {
            t.unbalanced.fetch_add(1, Ordering::Relaxed);
        }
    }
    inner.collect_if_due(t);
}

/// A thread that reads ids without holding them — a PMD, whose batch uses the actions of
/// megaflows, the EMC and published tables that may be released meanwhile. It says when it
/// holds none ([`Reader::quiescent`], its batch boundary); a list is freed only once every
/// reader has passed such a point after the list lost its last hold (module docs). Dropping the
/// reader unregisters it.
pub struct Reader {
    seen: Arc<AtomicU64>,
    calls: std::cell::Cell<u32>,
}

impl Reader {
    /// Registers the calling thread's reader.
    pub fn register() -> Reader {
        let t = table();
        let seen = Arc::new(AtomicU64::new(t.epoch.load(Ordering::SeqCst)));
        lock(t).readers.push(Arc::downgrade(&seen));
        Reader { seen, calls: std::cell::Cell::new(0) }
    }

    /// The thread holds no id it has not [`hold`]: lists unheld before now may be freed as far
    /// as it is concerned. Now and then (every 256th call, when lists wait) it also collects
    /// them, unless another thread is at it.
    #[inline]
    pub fn quiescent(&self) {
        let t = table();
        self.seen.store(t.epoch.load(Ordering::SeqCst), Ordering::SeqCst);
        let n = self.calls.get().wrapping_add(1);
        self.calls.set(n);
        if n & (COLLECT_EVERY - 1) == 0 && t.queued.load(Ordering::Relaxed) > 0 {
            let inner = match t.inner.try_lock() {
                Ok(g) => Some(g),
                Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            };
            if let Some(mut inner) = inner {
                inner.collect(t);
            }
        }
    }
}

/// Frees what can be freed now (what a [`Reader`] does now and then); returns how many lists.
pub fn collect() -> usize {
    let t = table();
    lock(t).collect(t)
}

/// The ops of an interned list, read without a lock: an empty list (drop) for an id that was
/// never handed out or whose list was freed (counted `stale` in [`stats`]).
pub fn ops(id: ActionsId) -> OpsRef {
    let t = table();
    if let Some(s) = slot(t, id.index()) {
        let g = s.load();
        if g.as_ref().is_some_and(|l| l.id == id) {
            return OpsRef(Some(g));
        }
    }
    t.stale.fetch_add(1, Ordering::Relaxed);
    OpsRef(None)
}

/// An interned list as [`ops`] read it: derefs to its ops, which stay readable while it lives
/// (even when the list is freed meanwhile).
pub struct OpsRef(Option<arc_swap::Guard<Option<Arc<Listed>>>>);

impl std::ops::Deref for OpsRef {
    type Target = [Op];

    fn deref(&self) -> &[Op] {
        match &self.0 {
            Some(g) => match &**g {
                Some(l) => &l.ops,
                None => &[],
            },
            None => &[],
        }
    }
}

impl fmt::Debug for OpsRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_cover_ids_without_gaps() {
        let mut next = (0, 0);
        for i in 0..(FIRST as u32 * 7) {
            assert_eq!(slot_of(i), next, "id {i}");
            next = if next.1 + 1 == FIRST << next.0 { (next.0 + 1, 0) } else { (next.0, next.1 + 1) };
        }
    }

    #[test]
    fn equal_lists_share_an_id_and_read_back() {
        let a = [Op::SetVlanVid(5), Op::Output(2), Op::Output(3)];
        let b = [Op::DecTtl, Op::Flood];
        let (ia, ib) = (intern(&a), intern(&b));
        assert_ne!(ia, ib);
        assert_eq!(intern(&a), ia);
        assert_eq!(&*ops(ia), &a);
        assert_eq!(&*ops(ib), &b);
        assert_eq!(&*ops(ActionsId(u32::MAX - 1)), &[] as &[Op], "unknown id: empty, no panic");
        // Many lists, across segment boundaries, from two threads at once.
        let lists =
            |t: u32| (0..3000u32).map(move |i| vec![Op::Output(i), Op::Controller(ToController::new(t as u16))]);
        let h = std::thread::spawn(move || lists(1).map(|l| (intern(&l), l)).collect::<Vec<_>>());
        let mine: Vec<_> = lists(2).map(|l| (intern(&l), l)).collect();
        for (id, l) in mine.into_iter().chain(h.join().unwrap()) {
            assert_eq!(&*ops(id), &l[..]);
        }
    }

    #[test]
    fn a_full_table_refuses_new_lists_and_finds_held_ones() {
        let held = [Op::SetNwTos(8), Op::Output(1), Op::Output(2)];
        let id = intern(&held);
        let before = stats();
        assert!(before.lists >= 1 && before.ops >= 3 && before.bytes > 0);
        // A limit the table is at or past: a held list is found, a new one refused.
        assert_eq!(intern_within(&held, 0), Ok(id));
        let new = [Op::SetNwTos(12), Op::Output(u32::MAX - 7), Op::Flood];
        assert_eq!(intern_within(&new, 0), Err(TableFull { limit: 0 }));
        assert!(stats().refused > before.refused);
        assert!(index_has(&held) && !index_has(&new), "a refused list is not added");
        assert!(TableFull { limit: 5 }.to_string().contains("holds 5 distinct action lists"));
        // Which lists a rule admits: one output and drop are not lists.
        assert!(!is_listed(&[]) && !is_listed(&[Op::Output(3)]));
        assert!(is_listed(&[Op::Flood]) && is_listed(&[Op::Output(1), Op::Output(2)]));
    }

    /// A rule held by the id admitting it gave is held as [`hold_rule`] holds it: the same id,
    /// one hold more (each released by [`release_held`]); an id no longer live falls back to
    /// the rule's list; a rule whose actions are no list holds none.
    #[test]
    fn holding_by_the_admitted_id_is_holding_the_rule() {
        use rqvs_flow::{Action, Actions};
        let count = |id: Option<ActionsId>| {
            let inner = lock(table());
            inner.live(id.unwrap()).map(|i| inner.meta[i as usize].count)
        };
        let acts = vec![Action::SetNwTos(44), Action::Output(9), Action::Output(u32::MAX - 11)];
        let r = Rule::new(1, 5, Match::ANY, Actions(acts));
        let admitted = admit_rule(&r).unwrap();
        assert!(admitted.is_some());
        assert_eq!(count(admitted), Some(0), "admitted, not held");
        let held = hold_admitted(&r, admitted);
        assert_eq!(held, admitted);
        assert_eq!(count(held), Some(1));
        assert_eq!(hold_rule(&r), held);
        assert_eq!(count(held), Some(2));
        // An id that is not live: the rule's own list is held.
        assert_eq!(hold_admitted(&r, Some(ActionsId(u32::MAX - 1))), held);
        assert_eq!(count(held), Some(3));
        for _ in 0..3 {
            release_held(held);
        }
        assert_eq!(count(held), Some(0));
        let one = Rule::new(2, 5, Match::ANY, Actions(vec![Action::Output(2)]));
        assert_eq!(admit_rule(&one).unwrap(), None);
        assert_eq!(hold_admitted(&one, None), None);
    }

    fn index_has(ops: &[Op]) -> bool {
        lock(table()).index.contains_key(ops)
    }
}
