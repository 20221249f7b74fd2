//! The cuckoo distributor (CD, seed 002: Intel's OVS-DPDK patch): a small cuckoo hash table keyed
//! by the flow hash that remembers **which megaflow subtable a flow hit**, consulted before the
//! subtable walk so a hit costs one subtable probe instead of a walk.
//!
//! - [`CD_BUCKETS`] buckets × [`CD_WAYS`] entries (8192 in all); an entry is a 16-bit signature
//!   (upper hash bits, never 0) and a subtable index. A key's two buckets are `h` and
//!   `h ^ hash(sig)` (partial-key cuckoo hashing), so an entry can move to its alternate bucket
//!   knowing only its signature.
//! - **A hint, never an answer**: the hinted subtable is probed with the packet's own masked key;
//!   a wrong or stale hint (signature collision, subtable deleted or reused) only costs a probe,
//!   then the normal walk runs. Correctness never depends on the CD.
//! - **Insertion** after a walk hit: update the entry with the same signature, else an empty
//!   slot in either bucket, else move one entry of the first bucket to its alternate bucket if
//!   that has room, else overwrite (it is a cache).
//! - **Auto-off**: at every subtable re-ranking (each second of PMD time) the CD is active for
//!   the next interval only if there is more than one subtable and the top-ranked subtable took
//!   less than [`CD_OFF_SHARE`] of the hits; when one subtable dominates, the walk's first probe
//!   is as good as the CD's and the CD would be pure overhead (seed 002).

pub const CD_BUCKETS: usize = 1024;
pub const CD_WAYS: usize = 8;
/// Above this share of hits in the top subtable, the CD turns itself off.
pub const CD_OFF_SHARE: f64 = 0.8;

const BMASK: u32 = CD_BUCKETS as u32 - 1;

#[derive(Clone, Copy, Default)]
struct Entry {
    sig: u16,
    subtable: u32,
}

pub struct CuckooDistributor {
    buckets: Vec<[Entry; CD_WAYS]>,
    /// Active in the current interval (auto-off decides).
    pub active: bool,
    /// Intervals decided active / inactive.
    pub intervals_on: u64,
    pub intervals_off: u64,
}

#[inline]
fn sig_of(hash: u32) -> u16 {
    ((hash >> 16) as u16) | 1
}

#[inline]
fn alt(bucket: u32, sig: u16) -> u32 {
    (bucket ^ (u32::from(sig).wrapping_mul(0x5bd1_e995) >> 7)) & BMASK
}

impl Default for CuckooDistributor {
    fn default() -> Self {
        Self::new()
    }
}

impl CuckooDistributor {
    pub fn new() -> CuckooDistributor {
        CuckooDistributor {
            buckets: vec![[Entry::default(); CD_WAYS]; CD_BUCKETS],
            active: true,
            intervals_on: 0,
            intervals_off: 0,
        }
    }

    /// The subtable this flow hash last hit, if remembered.
    #[inline]
    pub fn lookup(&self, hash: u32) -> Option<u32> {
        let sig = sig_of(hash);
        let b1 = hash & BMASK;
        for b in [b1, alt(b1, sig)] {
            for e in &self.buckets[b as usize] {
                if e.sig == sig {
                    return Some(e.subtable);
                }
            }
        }
        None
    }

    /// Remembers that this flow hash hit `subtable`.
    #[inline]
    pub fn insert(&mut self, hash: u32, subtable: u32) {
        let sig = sig_of(hash);
        let b1 = hash & BMASK;
        let b2 = alt(b1, sig);
        for b in [b1, b2] {
            for e in &mut self.buckets[b as usize] {
                if e.sig == sig {
                    e.subtable = subtable;
                    return;
                }
            }
        }
        for b in [b1, b2] {
            for e in &mut self.buckets[b as usize] {
                if e.sig == 0 {
                    *e = Entry { sig, subtable };
                    return;
                }
            }
        }
        // Both full: move one entry of b1 to its alternate bucket if there is room there.
        for w in 0..CD_WAYS {
            let moving = self.buckets[b1 as usize][w];
            let to = alt(b1, moving.sig);
            if let Some(slot) = self.buckets[to as usize].iter_mut().find(|e| e.sig == 0) {
                *slot = moving;
                self.buckets[b1 as usize][w] = Entry { sig, subtable };
                return;
            }
        }
        let w = (hash as usize >> 10) % CD_WAYS;
        self.buckets[b1 as usize][w] = Entry { sig, subtable };
    }

    /// Decides whether the CD is active for the next interval (module docs).
    pub fn decide(&mut self, masks: usize, top_share: f64) {
        self.active = masks > 1 && top_share < CD_OFF_SHARE;
        if self.active {
            self.intervals_on += 1;
        } else {
            self.intervals_off += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_many_flows() {
        let mut cd = CuckooDistributor::new();
        let hashes: Vec<u32> = (0..6000u32).map(|i| i.wrapping_mul(0x9e37_79b9) ^ (i << 7)).collect();
        for (i, &h) in hashes.iter().enumerate() {
            cd.insert(h, i as u32 % 50);
        }
        let found = hashes.iter().enumerate().filter(|(i, &h)| cd.lookup(h) == Some(*i as u32 % 50)).count();
        assert!(found > 5_500, "{found} of 6000 remembered");
    }

    #[test]
    fn auto_off_when_one_subtable_dominates() {
        let mut cd = CuckooDistributor::new();
        cd.decide(20, 0.3);
        assert!(cd.active);
        cd.decide(20, 0.95);
        assert!(!cd.active);
        cd.decide(1, 0.1);
        assert!(!cd.active);
        assert_eq!((cd.intervals_on, cd.intervals_off), (1, 2));
    }
}
