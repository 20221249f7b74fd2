//! OpenFlow port numbers apart from datapath port indices.
//!
//! The datapath keeps its ports in a vector (index 0..N: receive and transmit queues, counters,
//! policers); OpenFlow names them by their **ofport**, any number 1..=0xfeff or `LOCAL`
//! (0xfffe, the bridge's own internal port, as OVS numbers it). The two meet at the
//! translation's edges and nowhere else: a received frame's key carries its port's ofport
//! (`in_port`), so the OpenFlow table, the megaflows, the MAC table, packet-ins and traces all
//! speak ofports; the executor maps an output's ofport back to the transmit queue
//! ([`OfPorts::index`]); port descriptions, statistics and PORT_STATUS name each port by its
//! ofport. `rqvs switch --port ...` numbers its ports 1..N in order (the identity map, looked up
//! without a search); `rqvs switch --ovsdb` gives each interface its `ofport_request` or the
//! lowest free number, and the bridge's own port `LOCAL`.
//!
//! **Ports attached and removed live** (`--ovsdb`): a new port gets the next index (indices
//! only grow: a removed port's index is retired, never reused, since a PMD or an upcall in
//! flight may still name it); a removed index keeps its place with no ofport ([`NONE`]), so
//! [`OfPorts::index`] no longer finds it and its ofport is free for another port (or for the
//! same interface added again, at a new index).

/// OpenFlow's `LOCAL` port (1.0 numbering, as rqvs numbers ports).
pub const LOCAL: u32 = 0xfffe;

/// The largest ofport of an ordinary port (above are OpenFlow's reserved ports).
pub const MAX_OFPORT: u32 = 0xfeff;

/// The ofport of a removed (retired) index: no port.
pub const NONE: u32 = 0;

/// Each datapath port's ofport, and the way back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OfPorts {
    /// `numbers[i]`: port `i`'s ofport ([`NONE`]: index `i` was removed).
    numbers: Vec<u32>,
    /// `(ofport, index)` of the live ports, sorted by ofport; empty when `identity`.
    sorted: Vec<(u32, usize)>,
    /// `numbers` is 1..N (no port removed): looked up without a search.
    identity: bool,
}

impl OfPorts {
    /// Ports numbered 1..=n in order.
    pub fn identity(n: usize) -> OfPorts {
        OfPorts { numbers: (1..=n as u32).collect(), sorted: Vec::new(), identity: true }
    }

    /// Ports numbered `numbers` (by index); an error names a number out of range or given twice.
    pub fn new(numbers: Vec<u32>) -> Result<OfPorts, String> {
        OfPorts::with_removed(numbers.into_iter().map(Some).collect())
    }

    /// Ports numbered `numbers` (by index), `None` for an index removed.
    fn with_removed(numbers: Vec<Option<u32>>) -> Result<OfPorts, String> {
        let mut sorted: Vec<(u32, usize)> = numbers.iter().zip(0..).filter_map(|(n, i)| n.map(|n| (n, i))).collect();
        let numbers: Vec<u32> = numbers.into_iter().map(|n| n.unwrap_or(NONE)).collect();
        sorted.sort_unstable();
        for (i, &(n, _)) in sorted.iter().enumerate() {
            if !(1..=MAX_OFPORT).contains(&n) && n != LOCAL {
                return Err(format!("OpenFlow port number {n}: expected 1..={MAX_OFPORT} or LOCAL ({LOCAL})"));
            }
            if i > 0 && sorted[i - 1].0 == n {
                return Err(format!("OpenFlow port number {} is given to two ports", ofport_name(n)));
            }
        }
        let identity = numbers.iter().zip(1..).all(|(&n, i)| n == i);
        if identity {
            sorted.clear();
        }
        Ok(OfPorts { numbers, sorted, identity })
    }

    /// These ports and one more, numbered `ofport`, at the next index (returned); an error
    /// names a number out of range or taken.
    pub fn with_port(&self, ofport: u32) -> Result<(OfPorts, usize), String> {
        let mut n: Vec<Option<u32>> = self.numbers.iter().map(|&p| (p != NONE).then_some(p)).collect();
        n.push(Some(ofport));
        Ok((OfPorts::with_removed(n)?, self.numbers.len()))
    }

    /// These ports without index `i` (retired: it keeps its place, numbered [`NONE`]).
    pub fn without(&self, i: usize) -> OfPorts {
        let n: Vec<Option<u32>> =
            self.numbers.iter().enumerate().map(|(k, &p)| (p != NONE && k != i).then_some(p)).collect();
        OfPorts::with_removed(n).expect("a subset of valid numbers is valid")
    }

    /// Is index `i` a port (not removed, not past the end)?
    pub fn is_live(&self, i: usize) -> bool {
        self.numbers.get(i).is_some_and(|&p| p != NONE)
    }

    /// The live ports' indices, in order.
    pub fn live(&self) -> impl Iterator<Item = usize> + '_ {
        self.numbers.iter().enumerate().filter(|e| *e.1 != NONE).map(|e| e.0)
    }

    /// How many indices (removed ones included).
    pub fn len(&self) -> usize {
        self.numbers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.numbers.is_empty()
    }

    /// Port `i`'s ofport (`i` past the end: `i + 1`, which no port has then; removed:
    /// [`NONE`]).
    #[inline]
    pub fn ofport(&self, i: usize) -> u32 {
        self.numbers.get(i).copied().unwrap_or(i as u32 + 1)
    }

    /// The index of the port numbered `ofport`, if there is one.
    #[inline]
    pub fn index(&self, ofport: u32) -> Option<usize> {
        if self.identity {
            return (ofport as usize).checked_sub(1).filter(|&i| i < self.numbers.len());
        }
        self.sorted.binary_search_by_key(&ofport, |e| e.0).ok().map(|k| self.sorted[k].1)
    }

    /// Every ofport, by index ([`NONE`] for a removed one).
    pub fn numbers(&self) -> &[u32] {
        &self.numbers
    }
}

/// `LOCAL` or the number, as `ovs-ofctl` writes a port.
pub fn ofport_name(p: u32) -> String {
    if p == LOCAL {
        "LOCAL".into()
    } else {
        p.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_and_sparse_maps_agree_both_ways() {
        let id = OfPorts::identity(3);
        assert_eq!((id.ofport(0), id.ofport(2)), (1, 3));
        assert_eq!((id.index(1), id.index(3), id.index(0), id.index(4)), (Some(0), Some(2), None, None));
        assert_eq!(OfPorts::new(vec![1, 2, 3]).unwrap(), id);
        let m = OfPorts::new(vec![7, LOCAL, 2]).unwrap();
        assert_eq!((m.ofport(0), m.ofport(1), m.ofport(2)), (7, LOCAL, 2));
        assert_eq!((m.index(7), m.index(LOCAL), m.index(2)), (Some(0), Some(1), Some(2)));
        assert_eq!((m.index(1), m.index(3), m.index(0xffff)), (None, None, None));
    }

    #[test]
    fn ports_come_and_go_without_reusing_an_index() {
        let (m, i) = OfPorts::identity(2).with_port(5).unwrap();
        assert_eq!((i, m.index(5), m.index(2)), (2, Some(2), Some(1)));
        let m = m.without(1);
        assert_eq!((m.index(2), m.ofport(1), m.is_live(1), m.len()), (None, NONE, false, 3));
        assert_eq!(m.live().collect::<Vec<_>>(), vec![0, 2]);
        // The number is free again; the port comes back at a new index.
        let (m, i) = m.with_port(2).unwrap();
        assert_eq!((i, m.index(2), m.index(1), m.index(5)), (3, Some(3), Some(0), Some(2)));
        assert!(m.with_port(5).unwrap_err().contains("given to two ports"));
        // Every port removed: nothing is found, not the identity map.
        let m = OfPorts::identity(1).without(0);
        assert_eq!((m.index(1), m.index(0)), (None, None));
        assert_eq!(OfPorts::new(Vec::new()).unwrap().index(1), None);
    }

    #[test]
    fn bad_numbers_are_named() {
        assert!(OfPorts::new(vec![1, 1]).unwrap_err().contains("port number 1 is given to two ports"));
        assert!(OfPorts::new(vec![LOCAL, LOCAL]).unwrap_err().contains("LOCAL is given to two"));
        assert!(OfPorts::new(vec![0]).unwrap_err().contains("port number 0"));
        assert!(OfPorts::new(vec![0xff00]).unwrap_err().contains("expected 1..=65279 or LOCAL"));
    }
}
