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
//! **The MAC table** is shared by every PMD thread (the two directions of a conversation may
//! be on different PMDs) without a lock: [`SLOTS`] 64-bit atomic slots, 4-way buckets chosen by
//! a hash of the address, each slot holding a 48-bit address and a 16-bit port in one word (so a
//! reader never sees half of an entry). Learning writes a slot only when the entry is new or its
//! port changed. A full bucket evicts one of its entries (chosen by the address); two PMDs
//! learning into one empty slot at once keep one of the two, and the other is learned again by
//! its next frame. Differences from OVS: entries do not age out (OVS: 300 s idle) — a moved
//! station is relearned by its next frame, an evicted one is flooded to until then; and the
//! table is keyed by address only, not by (VLAN, address): rqvs ports have no VLAN
//! configuration, and frames keep their tags.

use std::sync::atomic::{AtomicU64, Ordering};

/// Entries the MAC table holds at most.
pub const SLOTS: usize = 8192;
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

/// The shared MAC-learning table (module docs).
pub struct MacTable {
    slots: Box<[AtomicU64]>,
}

impl Default for MacTable {
    fn default() -> Self {
        MacTable::new()
    }
}

fn mac48(mac: &[u8; 6]) -> u64 {
    mac.iter().fold(0u64, |a, &b| a << 8 | u64::from(b))
}

fn bucket(m: u64) -> usize {
    let h = m.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    ((h >> 32) as usize % (SLOTS / WAYS)) * WAYS
}

fn is_multicast(mac: &[u8; 6]) -> bool {
    mac[0] & 1 != 0
}

/// 01:80:c2:00:00:00 through 01:80:c2:00:00:0f (IEEE 802.1D's reserved group addresses).
fn is_reserved(mac: &[u8; 6]) -> bool {
    mac[..5] == [0x01, 0x80, 0xc2, 0x00, 0x00] && mac[5] & 0xf0 == 0
}

impl MacTable {
    pub fn new() -> MacTable {
        MacTable { slots: (0..SLOTS).map(|_| AtomicU64::new(0)).collect() }
    }

    /// Learns `mac` on `port` (1..=0xfeff; anything else, and multicast addresses, are not
    /// learned).
    pub fn learn(&self, mac: &[u8; 6], port: u32) {
        if is_multicast(mac) || !(1..=0xfeff).contains(&port) {
            return;
        }
        let m = mac48(mac);
        let entry = m << 16 | u64::from(port);
        let b = bucket(m);
        let mut empty = None;
        for s in &self.slots[b..b + WAYS] {
            let e = s.load(Ordering::Relaxed);
            if e != 0 && e >> 16 == m {
                if e != entry {
                    s.store(entry, Ordering::Relaxed);
                }
                return;
            }
            if e == 0 && empty.is_none() {
                empty = Some(s);
            }
        }
        let victim = empty.unwrap_or(&self.slots[b + (m as usize >> 7) % WAYS]);
        victim.store(entry, Ordering::Relaxed);
    }

    /// The port `mac` was learned on.
    pub fn lookup(&self, mac: &[u8; 6]) -> Option<u32> {
        let m = mac48(mac);
        let b = bucket(m);
        self.slots[b..b + WAYS]
            .iter()
            .map(|s| s.load(Ordering::Relaxed))
            .find(|&e| e != 0 && e >> 16 == m)
            .map(|e| (e & 0xffff) as u32)
    }

    /// Learned entries, `(address, port)` (for `fdb/show`).
    pub fn entries(&self) -> Vec<([u8; 6], u32)> {
        let mut v: Vec<([u8; 6], u32)> = self
            .slots
            .iter()
            .map(|s| s.load(Ordering::Relaxed))
            .filter(|&e| e != 0)
            .map(|e| {
                let b = (e >> 16).to_be_bytes();
                ([b[2], b[3], b[4], b[5], b[6], b[7]], (e & 0xffff) as u32)
            })
            .collect();
        v.sort_unstable();
        v
    }

    /// `NORMAL` for a frame from `in_port` (module docs): learns its source, says where it goes.
    /// A frame shorter than two addresses is dropped.
    pub fn forward(&self, frame: &[u8], in_port: u32) -> Forward {
        let (Some(dst), Some(src)) = (frame.first_chunk::<6>(), frame.get(6..12).and_then(|s| s.first_chunk::<6>()))
        else {
            return Forward::Drop;
        };
        self.learn(src, in_port);
        if is_reserved(dst) {
            return Forward::Drop;
        }
        if is_multicast(dst) {
            return Forward::Flood;
        }
        match self.lookup(dst) {
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
    fn learns_floods_forwards_and_follows_moves() {
        let t = MacTable::new();
        assert_eq!(t.forward(&frame(B, A), 1), Forward::Flood, "B unknown");
        assert_eq!(t.lookup(&A), Some(1));
        assert_eq!(t.forward(&frame(A, B), 2), Forward::Port(1), "A learned on 1");
        assert_eq!(t.forward(&frame(B, A), 1), Forward::Port(2));
        assert_eq!(t.forward(&frame(BCAST, A), 1), Forward::Flood, "broadcast");
        assert_eq!(t.forward(&frame([0x01, 0x80, 0xc2, 0, 0, 0], A), 1), Forward::Drop, "STP");
        assert_eq!(t.forward(&frame(B, A), 2), Forward::Drop, "B is on the input port");
        assert_eq!(t.lookup(&A), Some(2), "A moved to 2");
        assert_eq!(t.forward(&frame(A, BCAST), 3), Forward::Port(2), "a multicast source is not learned");
        assert_eq!(t.lookup(&BCAST), None);
        assert_eq!(t.forward(&frame(A, B), 0xfffd), Forward::Port(2), "from the controller: nothing learned");
        assert_eq!(t.lookup(&B), Some(2));
        assert_eq!(t.forward(&[1, 2, 3], 1), Forward::Drop, "too short");
        assert_eq!(t.entries(), vec![(A, 2), (B, 2)]);
    }

    #[test]
    fn a_full_bucket_evicts_and_every_entry_reads_back_whole() {
        let t = MacTable::new();
        let macs: Vec<[u8; 6]> =
            (0..3 * SLOTS as u32).map(|i| [2, 0, 0, (i >> 16) as u8, (i >> 8) as u8, i as u8]).collect();
        std::thread::scope(|s| {
            for part in macs.chunks(macs.len() / 2) {
                s.spawn(|| {
                    for (i, m) in part.iter().enumerate() {
                        t.learn(m, 1 + (i as u32 % 7));
                    }
                });
            }
        });
        let got = t.entries();
        assert!(got.len() <= SLOTS && got.len() > SLOTS / 2, "{}", got.len());
        for (m, p) in got {
            let i = macs.iter().position(|x| *x == m).expect("an address that was learned");
            let part = i % (macs.len() / 2);
            assert_eq!(p, 1 + (part as u32 % 7), "entry {m:?} kept its own port");
        }
    }
}
