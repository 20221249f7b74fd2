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
//! comparisons keep working on `DpAction`). It is append-only: an id stays valid for the life of
//! the process, and [`ops`] reads it without a lock (segments of slots that are written once).
//! Interning takes a mutex, on the slow path only. The table grows with the number of distinct
//! action lists ever seen (never with packets or megaflows).
//!
//! **Accounting and the limit.** Nothing is freed yet, so a controller that keeps inventing new
//! lists would grow the table without bound; instead the table has a **limit** ([`set_limit`],
//! default [`DEFAULT_LIMIT`], the switch's `--max-action-lists`) that the switch enforces where
//! lists come in: a flow-mod whose rule would add a new list to a full table is refused
//! ([`admit_rule`] → [`TableFull`], OpenFlow's `OFPFMFC_TABLE_FULL`) rather than grown. Lists
//! interned by the slow path ([`intern`]) are the lists of rules already admitted, so they do
//! not pass the limit (except the rules a switch starts with, which are not refused). [`stats`]
//! says how many lists the table holds, their approximate bytes, the limit and the refusals.
//!
//! **Not done (issue 40): freeing.** A list no flow uses any more stays in the table, so a
//! controller that installs and deletes distinct lists fills the table and is then refused until
//! the switch restarts. Freeing needs every holder of an id to be known: the rules of the table
//! of record (reference counts taken at commit, dropped at delete), the megaflows (counts taken
//! at install, dropped at removal or revalidation), and the ids in transit with no count (a PMD's
//! batch, an upcall verdict on its way from the handler, the revalidator between translating and
//! updating a megaflow, the CFLOWS publications a batch reads): those need an epoch per reader
//! thread (quiescent at its batch boundary, and not quiescent past an upcall it still waits for),
//! an id being reused only once every reader has passed the epoch at which its count reached
//! zero. Reads would then go through a per-slot atomic pointer (so [`ops`] returns a guard, not a
//! `&'static`), with a generation in the id so that a stale one reads as "gone", never as another
//! list.

// foldhash: a bundle of 125K flows with distinct action lists interns each.
use hashbrown::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use rqvs_flow::field::Field;
use rqvs_flow::{Action, Match, Rule};

/// One datapath action, applied in order to the frame (see [`rqvs_flow::Action`] for each
/// one's meaning). `all` and `flood` are one op: rqvs has no per-port no-flood flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Output(u32),
    InPort,
    Flood,
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
    /// (OVS's "stop processing for current table"); the executor only counts it.
    TtlExpired,
    /// Run the interned op list on a copy of the frame (an ALL group's bucket that rewrites it);
    /// the ops after it see the frame as it was.
    Clone(ActionsId),
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
            Action::All | Action::Flood => Op::Flood,
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
            // The pipeline's own: only the translation (`crate::xlate`) executes them, as it
            // needs the tables and the groups; outside it (a list with no pipeline) they are
            // nothing.
            Action::Drop
            | Action::Other(_)
            | Action::Resubmit { .. }
            | Action::Group(_)
            | Action::Meter(_)
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
            Op::Output(_) | Op::InPort | Op::Flood | Op::Controller(_) | Op::Normal | Op::Clone(_) | Op::TtlExpired
        )
    }
}

/// Can the switch's executor write field `f` into a frame? ([`rqvs_flow::rule::SET_FIELD_WRITABLE`]:
/// the L2 addresses, the VLAN's VID and PCP, IPv4's addresses, DSCP, ECN and TTL, the TCP/UDP
/// ports, IPv6's addresses; `metadata` and `in_port` change only the pipeline's key.) Not yet:
/// SCTP ports, the ARP, ND, ICMP and flow-label fields.
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
            Op::TtlExpired => f.write_str("ttl_expired"),
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
        }
    }
}

/// An action list's index in the action table (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActionsId(pub u32);

/// Slots in the first segment; segment `s` has `FIRST << s`.
const FIRST: usize = 1024;
const SEGMENTS: usize = 32;

type Slots = Box<[OnceLock<Box<[Op]>>]>;

struct Table {
    segments: [OnceLock<Slots>; SEGMENTS],
    index: Mutex<HashMap<Box<[Op]>, u32>>,
    /// Lists and ops held (the index's, readable without its lock).
    lists: AtomicUsize,
    ops: AtomicUsize,
    limit: AtomicUsize,
    /// New lists [`try_intern`] refused.
    refused: AtomicU64,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| Table {
        segments: std::array::from_fn(|_| OnceLock::new()),
        index: Mutex::new(HashMap::new()),
        lists: AtomicUsize::new(0),
        ops: AtomicUsize::new(0),
        limit: AtomicUsize::new(DEFAULT_LIMIT),
        refused: AtomicU64::new(0),
    })
}

/// The default [`limit`]: 2^20 distinct lists (some 200 MB of lists of three ops; a bundle of
/// 125K flows with distinct lists fits eight times).
pub const DEFAULT_LIMIT: usize = 1 << 20;

/// Sets the most distinct lists [`try_intern`] lets the table hold (module docs). Process-wide;
/// a limit below the lists already held refuses every new one.
pub fn set_limit(n: usize) {
    table().limit.store(n, Ordering::Relaxed);
}

/// The most distinct lists [`try_intern`] lets the table hold.
pub fn limit() -> usize {
    table().limit.load(Ordering::Relaxed)
}

/// The action table now ([`stats`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stats {
    /// Distinct lists held (none is freed yet: module docs).
    pub lists: usize,
    /// Ops in them, all lists together.
    pub ops: usize,
    /// Approximate bytes the table takes: each list twice (its slot and the index's key), its
    /// slot and its index entry. The segments' unused slots are not counted.
    pub bytes: usize,
    /// [`limit`].
    pub limit: usize,
    /// New lists refused since the process started, the table being full.
    pub refused: u64,
}

/// The action table's counts (lock-free).
pub fn stats() -> Stats {
    let t = table();
    let (lists, ops) = (t.lists.load(Ordering::Relaxed), t.ops.load(Ordering::Relaxed));
    let per_list = std::mem::size_of::<OnceLock<Box<[Op]>>>() + 2 * std::mem::size_of::<Box<[Op]>>() + 8;
    Stats {
        lists,
        ops,
        bytes: lists * per_list + 2 * ops * std::mem::size_of::<Op>(),
        limit: limit(),
        refused: t.refused.load(Ordering::Relaxed),
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
            "the action table is full: it holds {} distinct action lists, its limit (--max-action-lists), \
             and frees none yet (lists of deleted flows included); reuse action lists, or restart the switch",
            self.limit
        )
    }
}

impl std::error::Error for TableFull {}

/// (segment, offset) of id `i`.
fn slot_of(i: u32) -> (usize, usize) {
    let x = i as usize + FIRST;
    let seg = (usize::BITS - 1 - x.leading_zeros()) as usize - FIRST.trailing_zeros() as usize;
    (seg, x - (FIRST << seg))
}

/// The id of `ops` in the action table, added if new, whatever the [`limit`] (the slow path's
/// interning of lists already admitted: module docs).
///
/// # Panics
/// Past 2^32 distinct lists (the ids' range) — unreachable in practice.
pub fn intern(ops: &[Op]) -> ActionsId {
    intern_within(ops, usize::MAX).expect("no limit")
}

/// The id of `ops` in the action table, added if new and the table holds fewer than [`limit`]
/// lists; a list already held is always found.
pub fn try_intern(ops: &[Op]) -> Result<ActionsId, TableFull> {
    intern_within(ops, limit())
}

/// Admits rule `r`'s actions: interns the list [`crate::DpAction::from_rule`] makes of them, if
/// it is one the table holds (two ops or more, or one that is not an `output`); refused when
/// the list is new and the table full.
pub fn admit_rule(r: &Rule) -> Result<(), TableFull> {
    let ops: Vec<Op> = r.actions.0.iter().filter_map(|a| Op::of_rule(a, r)).collect();
    if is_listed(&ops) {
        try_intern(&ops)?;
    }
    Ok(())
}

/// Is `ops` a list the table holds ([`crate::DpAction::Apply`]), rather than `Drop` (none) or
/// `Output` (one `output`)?
pub fn is_listed(ops: &[Op]) -> bool {
    !matches!(ops, [] | [Op::Output(_)])
}

fn intern_within(ops: &[Op], limit: usize) -> Result<ActionsId, TableFull> {
    let t = table();
    // A poisoned lock only means another thread panicked while holding it; the map is still a
    // consistent map (insertion is its last step).
    let mut index = t.index.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&i) = index.get(ops) {
        return Ok(ActionsId(i));
    }
    if index.len() >= limit {
        t.refused.fetch_add(1, Ordering::Relaxed);
        return Err(TableFull { limit });
    }
    let i = u32::try_from(index.len()).expect("action table full (2^32 distinct action lists)");
    let (seg, off) = slot_of(i);
    let slots = t.segments[seg].get_or_init(|| (0..FIRST << seg).map(|_| OnceLock::new()).collect());
    // The slot is fresh: ids are handed out once, under the lock.
    let _ = slots[off].set(ops.into());
    index.insert(ops.into(), i);
    t.lists.store(index.len(), Ordering::Relaxed);
    t.ops.fetch_add(ops.len(), Ordering::Relaxed);
    Ok(ActionsId(i))
}

/// The ops of an interned list. Lock-free. An id that was never handed out gives an empty list
/// (drop) rather than a panic.
pub fn ops(id: ActionsId) -> &'static [Op] {
    let (seg, off) = slot_of(id.0);
    table()
        .segments
        .get(seg)
        .and_then(OnceLock::get)
        .and_then(|s| s.get(off))
        .and_then(OnceLock::get)
        .map_or(&[], |b| b)
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
        assert_eq!(ops(ia), &a);
        assert_eq!(ops(ib), &b);
        assert_eq!(ops(ActionsId(u32::MAX - 1)), &[] as &[Op], "unknown id: empty, no panic");
        // Many lists, across segment boundaries, from two threads at once.
        let lists =
            |t: u32| (0..3000u32).map(move |i| vec![Op::Output(i), Op::Controller(ToController::new(t as u16))]);
        let h = std::thread::spawn(move || lists(1).map(|l| (intern(&l), l)).collect::<Vec<_>>());
        let mine: Vec<_> = lists(2).map(|l| (intern(&l), l)).collect();
        for (id, l) in mine.into_iter().chain(h.join().unwrap()) {
            assert_eq!(ops(id), &l[..]);
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

    fn index_has(ops: &[Op]) -> bool {
        table().index.lock().unwrap().contains_key(ops)
    }
}
