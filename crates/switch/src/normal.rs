//! OpenFlow's `NORMAL` action: the switch's own MAC-learning forwarding, as Open vSwitch's
//! `xlate_normal` does it for ports that carry every VLAN (OVS's default port configuration).
//! For a frame from port *i* with source *S* and destination *D*:
//!
//! 1. *S* is learned on *i* (not a multicast *S*; not when the frame comes from no port, e.g.
//!    a packet-out whose in_port is `CONTROLLER`); a station that moves is learned on its new
//!    port by its next frame.
//! 2. *D* reserved for bridges (01:80:c2:00:00:00..0f: STP, LACP, ...) — dropped, as OVS does
//!    unless `forward-bpdu` is set;
//!    *D* multicast or broadcast, or not learned — flooded to every port but *i*;
//!    *D* learned on *i* — dropped (never back out of its own port);
//!    *D* learned on *j* — sent to *j*.
//!
//! `NORMAL` is what the fail-open rule of `--fail-mode standalone` runs
//! ([`crate::openflow`]), and flows may use it (`actions=NORMAL`).
//!
//! **The MAC table** (OVS's `mac_learning`) is keyed by (VLAN, address), as OVS learns per VLAN:
//! the VLAN is the frame's first 802.1Q/802.1ad tag's VID, 0 when untagged, and a destination
//! is looked up in the frame's own VLAN (the same address on two VLANs is two stations). It is
//! shared by every PMD thread (the two directions of a conversation may be on different PMDs):
//! [`MacTable::capacity`] entries (`--mac-table-size`, OVS's `mac-table-size`, default
//! [`DEFAULT_SIZE`]) in 4-way buckets chosen by a hash of the key, each bucket behind its own
//! small lock (held for a few loads and stores). An entry ages out after
//! [`MacTable::aging`] without a frame from its station (`--mac-aging-time`, OVS's
//! `mac-aging-time`, default [`DEFAULT_AGING`]): an aged station is flooded to again until it
//! sends. A full bucket replaces its least recently seen entry (OVS evicts the least recently
//! used). Differences from OVS: aging is checked when an entry is read (a lookup, `fdb/show`),
//! not by a periodic sweep — the forwarding is the same; and OVS clamps the aging time to at
//! least 15 s, rqvs takes 1 s.
//!
//! **VLANs of ports** ([`PortVlan`], OVS's `Port.tag`, `trunks`, `vlan_mode`; given with
//! [`MacTable::with_vlans`], `rqvs switch --ovsdb` reads them from the `Port` table). A port
//! without any carries every VLAN and frames pass unchanged (OVS's default, and the only
//! behaviour without `--ovsdb`). Otherwise, as OVS's `xlate_normal`:
//!
//! - **input**: the frame's VLAN is decided by its port — `access` (OVS's default when `tag` is
//!   set): untagged (or priority-tagged, VID 0) frames are in VLAN `tag`, tagged ones are
//!   dropped; `trunk` (the default without `tag`): the frame's own VID (0 untagged), dropped
//!   unless `trunks` is empty (every VLAN) or lists it; `native-tagged`/`native-untagged`:
//!   untagged frames are in the native VLAN `tag`, tagged ones as for a trunk (`tag` counts as
//!   listed). Dropped frames are not learned from.
//! - **output** (the learned port, or every port but the input one when flooding): only ports
//!   that carry the frame's VLAN; it leaves untagged from an `access` port, from a
//!   `native-untagged` port in its native VLAN, and in VLAN 0; tagged with the VID otherwise.
//!
//! Ports are named by their OpenFlow numbers ([`crate::ofports`]; `LOCAL` is learned on too). Differences from OVS:
//! `other_config:priority-tags`, `dot1q-tunnel` and 802.1ad (`cvlans`, `qinq-ethtype`) are not
//! read (a `dot1q-tunnel` port is refused where the configuration is read).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// OVS's default `mac-table-size`.
pub const DEFAULT_SIZE: usize = 8192;
/// OVS's default `mac-aging-time`.
pub const DEFAULT_AGING: Duration = Duration::from_secs(300);
const WAYS: usize = 4;

/// What `NORMAL` does with one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forward {
    /// Not sent anywhere (reserved destination, or learned on the input port).
    Drop,
    /// To the port the destination was learned on.
    Port(u32),
    /// To every port but the input port.
    Flood,
}

/// How a port carries VLANs (module docs; OVS's `vlan_mode`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PortVlan {
    /// Every VLAN, frames unchanged (OVS's trunk port with `trunks` empty).
    #[default]
    All,
    /// `vlan_mode=access` with `tag`.
    Access(u16),
    /// `vlan_mode=trunk`: the listed VIDs (sorted; 0 is untagged).
    Trunk(Vec<u16>),
    /// `native-tagged` (`tagged: true`) or `native-untagged`: native VLAN `native` (untagged on
    /// input), and the listed VIDs (empty: every VLAN).
    Native { native: u16, tagged: bool, trunks: Vec<u16> },
}

impl PortVlan {
    /// The VLAN a frame tagged `vid` (`None`: untagged or priority-tagged) is in, or `None`
    /// when this port drops it.
    pub fn input(&self, vid: Option<u16>) -> Option<u16> {
        match (self, vid) {
            (PortVlan::All, v) => Some(v.unwrap_or(0)),
            (PortVlan::Access(tag), None) => Some(*tag),
            (PortVlan::Access(_), Some(_)) => None,
            (PortVlan::Trunk(_), v) => Some(v.unwrap_or(0)).filter(|v| self.carries(*v)),
            (PortVlan::Native { native, .. }, None) => Some(*native),
            (PortVlan::Native { .. }, Some(v)) => Some(v).filter(|v| self.carries(*v)),
        }
    }

    /// Does this port carry VLAN `vlan`?
    pub fn carries(&self, vlan: u16) -> bool {
        match self {
            PortVlan::All => true,
            PortVlan::Access(tag) => vlan == *tag,
            PortVlan::Trunk(t) => t.is_empty() || t.binary_search(&vlan).is_ok(),
            PortVlan::Native { native, trunks, .. } => {
                vlan == *native || trunks.is_empty() || trunks.binary_search(&vlan).is_ok()
            }
        }
    }

    /// How a frame of VLAN `vlan` leaves this port: `None` not at all, `Some(None)` untagged,
    /// `Some(Some(vid))` tagged.
    pub fn output(&self, vlan: u16) -> Option<Option<u16>> {
        if !self.carries(vlan) {
            return None;
        }
        Some(match self {
            PortVlan::Access(_) => None,
            PortVlan::Native { native, tagged: false, .. } if vlan == *native => None,
            _ if vlan == 0 => None,
            _ => Some(vlan),
        })
    }
}

/// The VID of the frame's first 802.1Q tag, `None` when untagged or priority-tagged (VID 0).
pub fn vid_of(frame: &[u8]) -> Option<u16> {
    match frame.get(12..16) {
        Some([0x81, 0x00, hi, lo]) => Some(u16::from_be_bytes([*hi, *lo]) & 0x0fff).filter(|v| *v != 0),
        _ => None,
    }
}

/// What `NORMAL` decided for a frame on ports with VLANs ([`MacTable::forward_vlan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VlanForward {
    /// The frame's VLAN.
    pub vlan: u16,
    pub to: Forward,
}

/// One learned station.
#[derive(Clone, Copy, Default)]
struct Entry {
    /// `vlan << 48 | address`; 0: empty (the all-zero address is never learned: not unicast
    /// from a real station, and multicast sources are not learned either).
    key: u64,
    port: u32,
    /// Milliseconds since the table's start when its station was last seen.
    seen_ms: u64,
}

/// One learned entry as [`MacTable::entries`] lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct MacEntry {
    pub vlan: u16,
    pub mac: [u8; 6],
    pub port: u32,
    /// Seconds since its station was last seen.
    pub age_s: u64,
}

/// The shared MAC-learning table (module docs).
pub struct MacTable {
    buckets: Box<[Mutex<[Entry; WAYS]>]>,
    aging: Duration,
    start: Instant,
    /// The ports' VLANs: `(ofport, its VLANs)`, sorted by ofport; empty when every port carries
    /// every VLAN. Replaced whole when a port's VLANs change while running
    /// ([`MacTable::set_port_vlan`]); a reader holds one version for a frame ([`MacTable::vlans`]).
    vlans: arc_swap::ArcSwap<Vec<(u32, PortVlan)>>,
}

/// The ports' VLANs as one reader sees them ([`MacTable::vlans`]).
pub struct PortVlans(arc_swap::Guard<std::sync::Arc<Vec<(u32, PortVlan)>>>);

impl PortVlans {
    /// Port `port`'s VLANs.
    pub fn port(&self, port: u32) -> &PortVlan {
        static ALL: PortVlan = PortVlan::All;
        match self.0.binary_search_by_key(&port, |v| v.0) {
            Ok(k) => &self.0[k].1,
            Err(_) => &ALL,
        }
    }
}

/// The `vlan_tci` a frame from `in_port` whose key's `vlan_tci` is `tci` leaves port `port`
/// with when `NORMAL` sends it there by `vlans` (as the executor tags it), `None` when it never
/// does (its input port drops it, or `port` does not carry its VLAN).
pub fn output_tci(vlans: &PortVlans, in_port: u32, tci: u16, port: u32) -> Option<u16> {
    const CFI: u16 = 0x1000;
    const PCP: u16 = 0xe000;
    if vlans.0.is_empty() {
        return Some(tci);
    }
    let tagged = tci & CFI != 0;
    let vid = Some(tci & 0x0fff).filter(|v| tagged && *v != 0);
    let vlan = vlans.port(in_port).input(vid)?;
    Some(match vlans.port(port).output(vlan)? {
        None => 0,
        Some(v) if vid == Some(v) => tci,
        Some(v) if tagged => (tci & PCP) | CFI | v,
        Some(v) => CFI | v,
    })
}

/// `vlans` sorted by ofport, or empty when every one is [`PortVlan::All`].
fn normalized(mut vlans: Vec<(u32, PortVlan)>) -> Vec<(u32, PortVlan)> {
    vlans.sort_by_key(|v| v.0);
    if vlans.iter().all(|v| v.1 == PortVlan::All) {
        Vec::new()
    } else {
        vlans
    }
}

impl Default for MacTable {
    fn default() -> Self {
        MacTable::new()
    }
}

fn mac48(mac: &[u8; 6]) -> u64 {
    mac.iter().fold(0u64, |a, &b| a << 8 | u64::from(b))
}

fn is_multicast(mac: &[u8; 6]) -> bool {
    mac[0] & 1 != 0
}

/// 01:80:c2:00:00:00 through 01:80:c2:00:00:0f (IEEE 802.1D's reserved group addresses).
fn is_reserved(mac: &[u8; 6]) -> bool {
    mac[..5] == [0x01, 0x80, 0xc2, 0x00, 0x00] && mac[5] & 0xf0 == 0
}

/// The VID of the frame's first VLAN tag (802.1Q 0x8100 or 802.1ad 0x88a8), 0 when untagged.
pub fn vlan_of(frame: &[u8]) -> u16 {
    match frame.get(12..16) {
        Some([0x81, 0x00, hi, lo]) | Some([0x88, 0xa8, hi, lo]) => u16::from_be_bytes([*hi, *lo]) & 0x0fff,
        _ => 0,
    }
}

impl MacTable {
    /// OVS's defaults: 8,192 entries, 300 s aging.
    pub fn new() -> MacTable {
        MacTable::with(DEFAULT_SIZE, DEFAULT_AGING)
    }

    /// A table of at least `size` entries (rounded up to whole buckets of 4; at least one) whose
    /// entries age out after `aging`.
    pub fn with(size: usize, aging: Duration) -> MacTable {
        let buckets = size.div_ceil(WAYS).max(1);
        MacTable {
            buckets: (0..buckets).map(|_| Mutex::new([Entry::default(); WAYS])).collect(),
            aging,
            start: Instant::now(),
            vlans: arc_swap::ArcSwap::from_pointee(Vec::new()),
        }
    }

    /// This table for ports whose VLANs are `vlans` (by port − 1; a port beyond it carries
    /// every VLAN). All [`PortVlan::All`] is the same as none.
    pub fn with_vlans(self, vlans: Vec<PortVlan>) -> MacTable {
        self.with_port_vlans(vlans.into_iter().zip(1..).map(|(v, p)| (p, v)).collect())
    }

    /// This table for ports whose VLANs are `vlans` (`(ofport, VLANs)`; a port not in it
    /// carries every VLAN).
    pub fn with_port_vlans(self, vlans: Vec<(u32, PortVlan)>) -> MacTable {
        self.vlans.store(std::sync::Arc::new(normalized(vlans)));
        self
    }

    /// Port `port`'s VLANs become `vlan`, while running (a port attached, or its `Port.tag`,
    /// `trunks` or `vlan_mode` changed); the stations learned on it are forgotten (they were
    /// learned in its old VLANs).
    pub fn set_port_vlan(&self, port: u32, vlan: PortVlan) {
        self.vlans.rcu(|now| {
            let mut v: Vec<(u32, PortVlan)> = now.iter().filter(|e| e.0 != port).cloned().collect();
            v.push((port, vlan.clone()));
            normalized(v)
        });
        self.forget_port(port);
    }

    /// Do the ports have VLAN settings ([`MacTable::forward_vlan`] must be used)?
    pub fn has_vlans(&self) -> bool {
        !self.vlans.load().is_empty()
    }

    /// The ports' VLANs now (one version, for one frame).
    pub fn vlans(&self) -> PortVlans {
        PortVlans(self.vlans.load())
    }

    /// Port `port`'s VLANs now.
    pub fn port_vlan(&self, port: u32) -> PortVlan {
        self.vlans().port(port).clone()
    }

    /// Entries the table holds at most.
    pub fn capacity(&self) -> usize {
        self.buckets.len() * WAYS
    }

    /// How long an entry lives without a frame from its station.
    pub fn aging(&self) -> Duration {
        self.aging
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn live(&self, e: &Entry, now: u64) -> bool {
        e.key != 0 && u128::from(now.saturating_sub(e.seen_ms)) < self.aging.as_millis()
    }

    fn bucket(&self, key: u64) -> std::sync::MutexGuard<'_, [Entry; WAYS]> {
        let h = key.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let b = &self.buckets[(h >> 32) as usize % self.buckets.len()];
        b.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Learns `mac` on `port` in `vlan` (ports 1..=0xfeff and `LOCAL`; anything else, and multicast
    /// addresses, are not learned); refreshes its age.
    pub fn learn(&self, vlan: u16, mac: &[u8; 6], port: u32) {
        if is_multicast(mac) || !((1..=0xfeff).contains(&port) || port == crate::ofports::LOCAL) || *mac == [0; 6] {
            return;
        }
        let key = u64::from(vlan & 0x0fff) << 48 | mac48(mac);
        let now = self.now_ms();
        let mut b = self.bucket(key);
        if let Some(e) = b.iter_mut().find(|e| e.key == key) {
            (e.port, e.seen_ms) = (port, now);
            return;
        }
        // An empty or aged slot, else the least recently seen.
        let slot = match b.iter().position(|e| !self.live(e, now)) {
            Some(i) => i,
            None => (0..WAYS).min_by_key(|&i| b[i].seen_ms).unwrap_or(0),
        };
        b[slot] = Entry { key, port, seen_ms: now };
    }

    /// Forgets every station learned on `port` (the port was removed); returns how many.
    pub fn forget_port(&self, port: u32) -> usize {
        let mut n = 0;
        for b in self.buckets.iter() {
            let mut b = b.lock().unwrap_or_else(|e| e.into_inner());
            for e in b.iter_mut().filter(|e| e.key != 0 && e.port == port) {
                *e = Entry::default();
                n += 1;
            }
        }
        n
    }

    /// The port `mac` was learned on in `vlan`, unless it aged out.
    pub fn lookup(&self, vlan: u16, mac: &[u8; 6]) -> Option<u32> {
        let key = u64::from(vlan & 0x0fff) << 48 | mac48(mac);
        let now = self.now_ms();
        let b = self.bucket(key);
        b.iter().find(|e| e.key == key && self.live(e, now)).map(|e| e.port)
    }

    /// The live entries, sorted by VLAN and address (for `fdb/show`).
    pub fn entries(&self) -> Vec<MacEntry> {
        let now = self.now_ms();
        let mut v = Vec::new();
        for b in self.buckets.iter() {
            let b = b.lock().unwrap_or_else(|e| e.into_inner());
            for e in b.iter().filter(|e| self.live(e, now)) {
                let m = e.key.to_be_bytes();
                v.push(MacEntry {
                    vlan: (e.key >> 48) as u16,
                    mac: [m[2], m[3], m[4], m[5], m[6], m[7]],
                    port: e.port,
                    age_s: now.saturating_sub(e.seen_ms) / 1000,
                });
            }
        }
        v.sort_unstable_by_key(|e| (e.vlan, e.mac));
        v
    }

    /// `NORMAL` for a frame from `in_port` (module docs): learns its source in its VLAN, says
    /// where it goes. A frame shorter than two addresses is dropped.
    pub fn forward(&self, frame: &[u8], in_port: u32) -> Forward {
        self.forward_in(frame, in_port, vlan_of(frame))
    }

    /// `NORMAL` on ports with VLANs (module docs): the frame's VLAN as its input port decides
    /// (`None`: the port drops it, nothing learned), and where it goes in that VLAN. Which
    /// output ports carry the VLAN, and with which tag, is [`PortVlan::output`]'s to say.
    pub fn forward_vlan(&self, frame: &[u8], in_port: u32) -> Option<VlanForward> {
        if frame.len() < 14 {
            return None;
        }
        let vlan = self.vlans().port(in_port).input(vid_of(frame))?;
        Some(VlanForward { vlan, to: self.forward_in(frame, in_port, vlan) })
    }

    fn forward_in(&self, frame: &[u8], in_port: u32, vlan: u16) -> Forward {
        let (Some(dst), Some(src)) = (frame.first_chunk::<6>(), frame.get(6..12).and_then(|s| s.first_chunk::<6>()))
        else {
            return Forward::Drop;
        };
        self.learn(vlan, src, in_port);
        if is_reserved(dst) {
            return Forward::Drop;
        }
        if is_multicast(dst) {
            return Forward::Flood;
        }
        match self.lookup(vlan, dst) {
            Some(p) if p == in_port => Forward::Drop,
            Some(p) => Forward::Port(p),
            None => Forward::Flood,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(dst: [u8; 6], src: [u8; 6]) -> Vec<u8> {
        let mut f = dst.to_vec();
        f.extend_from_slice(&src);
        f.extend_from_slice(&[0x08, 0x00]);
        f
    }

    const A: [u8; 6] = [0x02, 0, 0, 0, 0, 0xa];
    const B: [u8; 6] = [0x02, 0, 0, 0, 0, 0xb];
    const BCAST: [u8; 6] = [0xff; 6];

    #[test]
    fn port_vlans_decide_input_and_output_as_ovs() {
        // access 10; trunk of 10 and 20; native-untagged 30 carrying 10; every VLAN.
        let access = PortVlan::Access(10);
        let trunk = PortVlan::Trunk(vec![10, 20]);
        let native = PortVlan::Native { native: 30, tagged: false, trunks: vec![10] };
        let native_tagged = PortVlan::Native { native: 30, tagged: true, trunks: vec![10] };
        assert_eq!(access.input(None), Some(10));
        assert_eq!(access.input(Some(10)), None, "tagged frames are dropped on access ports");
        assert_eq!(trunk.input(Some(20)), Some(20));
        assert_eq!(trunk.input(Some(30)), None, "not a listed VLAN");
        assert_eq!(trunk.input(None), None, "VLAN 0 is not listed");
        assert_eq!(PortVlan::Trunk(vec![]).input(None), Some(0), "empty trunks: every VLAN");
        assert_eq!(native.input(None), Some(30));
        assert_eq!(native.input(Some(10)), Some(10));
        assert_eq!(native.input(Some(20)), None);
        assert_eq!(access.output(10), Some(None));
        assert_eq!(access.output(20), None);
        assert_eq!(trunk.output(10), Some(Some(10)));
        assert_eq!(trunk.output(30), None);
        assert_eq!(native.output(30), Some(None), "native-untagged: untagged in its VLAN");
        assert_eq!(native_tagged.output(30), Some(Some(30)));
        assert_eq!(native.output(10), Some(Some(10)));
        assert_eq!(PortVlan::All.output(0), Some(None));
        assert_eq!(PortVlan::All.output(7), Some(Some(7)));
    }

    #[test]
    fn forward_vlan_learns_in_the_port_vlan() {
        let t = MacTable::new().with_vlans(vec![PortVlan::Access(10), PortVlan::Trunk(vec![10]), PortVlan::Access(20)]);
        assert!(t.has_vlans());
        let f = t.forward_vlan(&frame(B, A), 1).unwrap();
        assert_eq!(f, VlanForward { vlan: 10, to: Forward::Flood });
        assert_eq!(t.lookup(10, &A), Some(1), "learned in the access port's VLAN");
        assert_eq!(t.lookup(0, &A), None);
        assert_eq!(t.forward_vlan(&tagged(A, B, 10), 2).unwrap(), VlanForward { vlan: 10, to: Forward::Port(1) });
        assert_eq!(t.forward_vlan(&tagged(A, B, 10), 1), None, "tagged on an access port");
        assert_eq!(t.forward_vlan(&tagged(A, B, 20), 2), None, "VLAN 20 is not on the trunk");
        // Port 3 is in VLAN 20: A (VLAN 10) is unknown there.
        assert_eq!(t.forward_vlan(&frame(A, B), 3).unwrap(), VlanForward { vlan: 20, to: Forward::Flood });
        assert!(!MacTable::new().with_vlans(vec![PortVlan::All; 3]).has_vlans());
    }

    #[test]
    fn learns_floods_forwards_and_follows_moves() {
        let t = MacTable::new();
        assert_eq!(t.forward(&frame(B, A), 1), Forward::Flood, "B unknown");
        assert_eq!(t.lookup(0, &A), Some(1));
        assert_eq!(t.forward(&frame(A, B), 2), Forward::Port(1), "A learned on 1");
        assert_eq!(t.forward(&frame(B, A), 1), Forward::Port(2));
        assert_eq!(t.forward(&frame(BCAST, A), 1), Forward::Flood, "broadcast");
        assert_eq!(t.forward(&frame([0x01, 0x80, 0xc2, 0, 0, 0], A), 1), Forward::Drop, "STP");
        assert_eq!(t.forward(&frame(B, A), 2), Forward::Drop, "B is on the input port");
        assert_eq!(t.lookup(0, &A), Some(2), "A moved to 2");
        assert_eq!(t.forward(&frame(A, BCAST), 3), Forward::Port(2), "a multicast source is not learned");
        assert_eq!(t.lookup(0, &BCAST), None);
        assert_eq!(t.forward(&frame(A, B), 0xfffd), Forward::Port(2), "from the controller: nothing learned");
        assert_eq!(t.lookup(0, &B), Some(2));
        assert_eq!(t.forward(&[1, 2, 3], 1), Forward::Drop, "too short");
        let e: Vec<(u16, [u8; 6], u32)> = t.entries().iter().map(|e| (e.vlan, e.mac, e.port)).collect();
        assert_eq!(e, vec![(0, A, 2), (0, B, 2)]);
    }

    #[test]
    fn a_full_table_keeps_its_size_and_every_entry_reads_back_whole() {
        let t = MacTable::new();
        let n = 3 * t.capacity() as u32;
        let macs: Vec<[u8; 6]> = (0..n).map(|i| [2, 0, 0, (i >> 16) as u8, (i >> 8) as u8, i as u8]).collect();
        std::thread::scope(|s| {
            for part in macs.chunks(macs.len() / 2) {
                s.spawn(|| {
                    for (i, m) in part.iter().enumerate() {
                        t.learn(0, m, 1 + (i as u32 % 7));
                    }
                });
            }
        });
        let got = t.entries();
        assert!(got.len() <= DEFAULT_SIZE && got.len() > DEFAULT_SIZE / 2, "{}", got.len());
        for e in got {
            let i = macs.iter().position(|x| *x == e.mac).expect("an address that was learned");
            let part = i % (macs.len() / 2);
            assert_eq!(e.port, 1 + (part as u32 % 7), "entry {:?} kept its own port", e.mac);
        }
        assert_eq!(MacTable::with(10, DEFAULT_AGING).capacity(), 12, "whole buckets");
    }

    fn tagged(dst: [u8; 6], src: [u8; 6], vid: u16) -> Vec<u8> {
        let mut f = dst.to_vec();
        f.extend_from_slice(&src);
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&vid.to_be_bytes());
        f.extend_from_slice(&[0x08, 0x00]);
        f
    }

    #[test]
    fn one_address_on_two_vlans_is_two_stations() {
        let t = MacTable::new();
        assert_eq!(vlan_of(&tagged(B, A, 10)), 10);
        assert_eq!(vlan_of(&frame(B, A)), 0);
        // A on VLAN 10 at port 1, on VLAN 20 at port 3.
        assert_eq!(t.forward(&tagged(B, A, 10), 1), Forward::Flood);
        assert_eq!(t.forward(&tagged(B, A, 20), 3), Forward::Flood);
        assert_eq!(t.lookup(10, &A), Some(1));
        assert_eq!(t.lookup(20, &A), Some(3));
        assert_eq!(t.lookup(0, &A), None, "not learned untagged");
        assert_eq!(t.forward(&tagged(A, B, 10), 2), Forward::Port(1));
        assert_eq!(t.forward(&tagged(A, B, 20), 2), Forward::Port(3));
        assert_eq!(t.forward(&tagged(A, B, 30), 2), Forward::Flood, "unknown in VLAN 30");
        let vlans: Vec<(u16, [u8; 6])> = t.entries().iter().map(|e| (e.vlan, e.mac)).collect();
        assert_eq!(vlans, vec![(10, A), (10, B), (20, A), (20, B), (30, B)]);
    }

    #[test]
    fn an_idle_station_ages_out_and_is_flooded_to_again() {
        let t = MacTable::with(DEFAULT_SIZE, Duration::from_millis(300));
        assert_eq!(t.forward(&frame(B, A), 1), Forward::Flood);
        assert_eq!(t.forward(&frame(A, B), 2), Forward::Port(1));
        // B keeps sending, A stays silent past the aging time.
        for _ in 0..4 {
            std::thread::sleep(Duration::from_millis(100));
            assert_eq!(t.forward(&frame(BCAST, B), 2), Forward::Flood);
        }
        assert_eq!(t.lookup(0, &A), None, "A aged out");
        assert_eq!(t.lookup(0, &B), Some(2), "B refreshed by its frames");
        assert_eq!(t.forward(&frame(A, B), 2), Forward::Flood, "A flooded to again");
        assert!(t.entries().iter().all(|e| e.mac != A), "fdb/show no longer lists A");
        // A speaks: learned again.
        assert_eq!(t.forward(&frame(B, A), 1), Forward::Port(2));
        assert_eq!(t.forward(&frame(A, B), 2), Forward::Port(1));
    }

    #[test]
    fn a_full_bucket_replaces_its_least_recently_seen() {
        // One bucket of 4.
        let t = MacTable::with(4, DEFAULT_AGING);
        let m = |i: u8| [2, 0, 0, 0, 0, i];
        for i in 1..=4 {
            t.learn(0, &m(i), u32::from(i));
            std::thread::sleep(Duration::from_millis(2));
        }
        t.learn(0, &m(1), 1); // 1 seen again: 2 is now the least recent
        std::thread::sleep(Duration::from_millis(2));
        t.learn(0, &m(5), 5);
        assert_eq!(t.lookup(0, &m(2)), None);
        for i in [1, 3, 4, 5] {
            assert_eq!(t.lookup(0, &m(i)), Some(u32::from(i)));
        }
    }
}

/// `ofproto/trace`'s note under each `NORMAL` action, as OVS prints it: `-> forwarding to
/// learned port`, `-> learned port is input port, dropping`, or `-> no learned MAC for
/// destination, flooding` (also for group addresses, which are never learned). The packet is
/// the trace's `Flow:` line (`in_port`, `dl_dst`, `vlan_tci`); `lookup(vlan, mac)` is the MAC
/// table's answer. A `NORMAL` after a rewrite of `dl_dst` or the VLAN is annotated from the
/// packet as it came in (the trace text does not carry the rewritten key at that point).
pub fn annotate_trace(text: &str, lookup: impl Fn(u16, &[u8; 6]) -> Option<u32>) -> String {
    let flow = text.lines().find_map(|l| l.strip_prefix("Flow: ")).unwrap_or("");
    let field = |name: &str| flow.split(',').find_map(|f| f.strip_prefix(name).and_then(|v| v.strip_prefix('=')));
    let in_port = field("in_port").and_then(|p| p.parse::<u32>().ok());
    let tci = field("vlan_tci").and_then(|t| u16::from_str_radix(t.trim_start_matches("0x"), 16).ok()).unwrap_or(0);
    let vlan = if tci & 0x1000 != 0 { tci & 0x0fff } else { 0 };
    let dst: Option<[u8; 6]> = field("dl_dst").and_then(|m| {
        let b: Vec<u8> = m.split(':').filter_map(|x| u8::from_str_radix(x, 16).ok()).collect();
        b.try_into().ok()
    });
    let note = match dst {
        Some(d) if d[0] & 1 == 0 => match lookup(vlan, &d) {
            Some(p) if Some(p) == in_port => "-> learned port is input port, dropping",
            Some(_) => "-> forwarding to learned port",
            None => "-> no learned MAC for destination, flooding",
        },
        _ => "-> no learned MAC for destination, flooding",
    };
    let mut out = String::with_capacity(text.len() + 64);
    for l in text.split_inclusive('\n') {
        out.push_str(l);
        if l.trim() == "NORMAL" {
            let indent = l.len() - l.trim_start().len();
            if !l.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&format!("{}{note}\n", " ".repeat(indent + 1)));
        }
    }
    out
}

#[cfg(test)]
mod trace_tests {
    use super::annotate_trace;

    const TRACE: &str = "Flow: tcp,in_port=2,vlan_tci=0x0000,dl_src=00:00:00:00:00:00,dl_dst=00:00:00:00:00:09,nw_src=0.0.0.0\n\nbridge(\"rqvs\")\n-------------\n 0. priority 5\n    NORMAL\n\nFinal flow: unchanged\n";

    #[test]
    fn normal_is_annotated_as_ovs_does() {
        let flood = annotate_trace(TRACE, |_, _| None);
        assert!(
            flood.contains("    NORMAL\n     -> no learned MAC for destination, flooding\n\nFinal flow"),
            "{flood}"
        );
        let learned = annotate_trace(TRACE, |v, m| (v == 0 && m[5] == 9).then_some(3));
        assert!(learned.contains("    NORMAL\n     -> forwarding to learned port\n"), "{learned}");
        let back = annotate_trace(TRACE, |_, _| Some(2));
        assert!(back.contains("     -> learned port is input port, dropping\n"), "{back}");
        let bcast = annotate_trace(&TRACE.replace("00:00:00:00:00:09", "ff:ff:ff:ff:ff:ff"), |_, _| Some(3));
        assert!(bcast.contains("flooding"), "{bcast}");
    }
}
