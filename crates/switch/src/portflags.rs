//! The ports' OpenFlow configuration bits that PORT_MOD keeps in the switch
//! ([`crate::openflow`]'s `port_mod`): `NO_RECV`, `NO_FLOOD`, `NO_FWD`, `NO_PACKET_IN`
//! (`PORT_DOWN` lives in the interface itself). One word per port (by OpenFlow port number),
//! shared by the OpenFlow channel, which writes it, and every PMD's executor, which reads it for
//! each frame ([`crate::execute`]).
//!
//! **Why the executor and not the translation.** In Open vSwitch these bits change the
//! translation (`ofproto-dpif-xlate.c`: `may_receive`, `flood_packets`, `xlate_normal_flood`,
//! `compose_output_action__`), so a PORT_MOD revalidates every datapath flow. In rqvs `FLOOD`,
//! `ALL` and `NORMAL` are not expanded by the translation: the executor resolves them per frame
//! (the MAC table and the port list are its), so the port set they reach cannot live in a
//! megaflow's actions. The executor therefore applies all of them where the ports are chosen —
//! `output:P`, `in_port`, `FLOOD`, `ALL`, `NORMAL`'s learned port and its flooding — which makes
//! a PORT_MOD exact for the very next frame, in every design (ORIG, CCACHE, CFLOWS, auto), with
//! nothing cached to revalidate: the megaflows' actions are the same with or without the bits.
//! What OVS's semantics ask, and what this keeps (checked against OVS 3.1 with `ofproto/trace`
//! and `netdev-dummy/receive` after `ovs-ofctl mod-port`; see the README, *PORT_MOD*):
//!
//! - `NO_RECV`: a frame received on the port is dropped after its flow was looked up (OVS
//!   credits the rule: its `n_packets` grows) and before any action (so `NORMAL` learns
//!   nothing from it); counted in the port's `no_receive` (of `dropped`). OVS keeps BPDUs when
//!   STP runs (`NO_RECV_STP`); rqvs has no STP: every frame is dropped.
//! - `NO_FWD`: an output to the port is dropped — `output:P`, `in_port`, `ALL`, `FLOOD`,
//!   `NORMAL` (learned or flooding); counted as a skipped output (`no_forward_outputs`), and a
//!   frame that ends with no copy because of it in its input port's `no_forward` (of `dropped`).
//! - `NO_FLOOD` (OpenFlow 1.0 only; 1.3 and 1.4 have no such bit): `FLOOD` and `NORMAL`'s
//!   flooding leave the port out, silently; `ALL` and outputs to it still reach it.
//! - `NO_PACKET_IN`: kept and reported; it changes nothing in forwarding (OVS sends a flow's
//!   explicit `controller` packet-ins from such a port too).

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

/// `OFPPC_PORT_DOWN` (the interface's own state, not kept here).
pub const PORT_DOWN: u32 = 1;

/// `OFPPC_NO_RECV`.
pub const NO_RECV: u32 = 4;
/// OpenFlow 1.0's `OFPPC_NO_FLOOD`.
pub const NO_FLOOD: u32 = 16;
/// `OFPPC_NO_FWD`.
pub const NO_FWD: u32 = 32;
/// `OFPPC_NO_PACKET_IN`.
pub const NO_PACKET_IN: u32 = 64;

/// `(ofport, bits)` of the ports whose bits are not all 0.
type List = Vec<(u32, u32)>;

/// Each port's bits (module docs), by OpenFlow port number: a port attached while running
/// ([`crate::attach`]) needs nothing grown, and a removed port's number, given again to a new
/// port, starts with no bits ([`PortFlags::forget`]). Copy-on-write: the PMDs read the current
/// list without a lock (the ports whose bits are not all 0: a short list, usually empty);
/// PORT_MOD, rare, writes a new one.
#[derive(Debug, Default)]
pub struct PortFlags {
    bits: ArcSwap<List>,
    write: Mutex<()>,
}

impl PortFlags {
    /// Every bit clear.
    pub fn new() -> PortFlags {
        PortFlags::default()
    }

    /// Port `ofport`'s bits.
    pub fn get(&self, ofport: u32) -> u32 {
        self.read().get(ofport)
    }

    /// Every port's bits as they are now: one load for all the lookups of a frame.
    #[inline]
    pub fn read(&self) -> Bits {
        let v = self.bits.load();
        Bits(if v.is_empty() { None } else { Some(v) })
    }

    /// Flips `bits` of port `ofport`.
    pub fn toggle(&self, ofport: u32, bits: u32) {
        self.update(ofport, |b| b ^ bits);
    }

    /// Port `ofport` was removed: its number starts again with no bits.
    pub fn forget(&self, ofport: u32) {
        self.update(ofport, |_| 0);
    }

    fn update(&self, ofport: u32, f: impl Fn(u32) -> u32) {
        let _w = self.write.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<(u32, u32)> = self.bits.load().iter().copied().filter(|(p, _)| *p != ofport).collect();
        let b = f(self.get(ofport));
        if b != 0 {
            v.push((ofport, b));
        }
        self.bits.store(Arc::new(v));
    }

    /// Is any port's bit in `bits` set? (The executor's quick check: with none set, no frame
    /// needs a look at the per-port words.)
    pub fn any(&self, bits: u32) -> bool {
        self.bits.load().iter().any(|(_, b)| b & bits != 0)
    }
}

/// One reading of the ports' bits ([`PortFlags::read`]); `Bits::NONE` when no port has any.
pub struct Bits(Option<arc_swap::Guard<Arc<List>>>);

impl Bits {
    /// No port has a bit set (also: the executor has no [`PortFlags`]).
    pub const NONE: Bits = Bits(None);

    /// Port `ofport`'s bits in this reading.
    #[inline]
    pub fn get(&self, ofport: u32) -> u32 {
        self.0.as_ref().and_then(|v| v.iter().find(|(p, _)| *p == ofport)).map_or(0, |(_, b)| *b)
    }
}

impl crate::Control {
    /// The ports' PORT_MOD bits.
    pub(crate) fn port_flags(&self) -> &PortFlags {
        &self.port_flags
    }

    /// Port `i`'s OpenFlow `config` as PORT_DESC reports it: PORT_MOD's bits, plus
    /// `PORT_DOWN` while the interface is administratively down (however it got there).
    pub(crate) fn port_config_bits(&self, i: usize) -> u32 {
        self.port_flags.get(self.ofports().ofport(i))
            | if self.port(i).admin_up() == Some(false) { PORT_DOWN } else { 0 }
    }
}

/// `show`'s line for each port whose `config` is not 0 (PORT_MOD's bits, `PORT_DOWN`), with
/// the frames it received that `NO_RECV` dropped.
pub(crate) fn show_lines(s: &mut String, ports: &[crate::PortReport]) {
    use std::fmt::Write as _;
    for p in ports.iter().filter(|p| p.config != "0") {
        let _ = write!(s, "  port {} ({}): config {}", p.port, p.name, p.config);
        let _ = if p.frames.no_receive > 0 {
            writeln!(s, " ({} received frames dropped: no_receive)", p.frames.no_receive)
        } else {
            writeln!(s)
        };
    }
}

/// The names of `OFPPC_*` bits as `ovs-ofctl show` prints them (`PORT_DOWN NO_FLOOD ...`),
/// `0` for none.
pub fn names(bits: u32) -> String {
    const NAMES: [(u32, &str); 7] = [
        (1, "PORT_DOWN"),
        (2, "NO_STP"),
        (4, "NO_RECV"),
        (8, "NO_RECV_STP"),
        (16, "NO_FLOOD"),
        (32, "NO_FWD"),
        (64, "NO_PACKET_IN"),
    ];
    let mut v: Vec<String> = NAMES.iter().filter(|(b, _)| bits & b != 0).map(|(_, n)| (*n).to_string()).collect();
    let rest = bits & !0x7f;
    if rest != 0 {
        v.push(format!("{rest:#x}"));
    }
    if v.is_empty() {
        "0".to_string()
    } else {
        v.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_toggle_per_port_and_print_as_ovs_ofctl() {
        let f = PortFlags::new();
        assert!(!f.any(NO_FWD | NO_FLOOD));
        f.toggle(7, NO_FWD | NO_FLOOD);
        assert_eq!((f.get(1), f.get(7), f.get(9)), (0, NO_FWD | NO_FLOOD, 0));
        assert!(f.any(NO_FWD) && !f.any(NO_RECV));
        f.toggle(7, NO_FLOOD);
        f.toggle(65534, NO_RECV);
        assert_eq!((f.get(7), f.get(65534)), (NO_FWD, NO_RECV));
        assert_eq!(names(f.get(7) | NO_RECV), "NO_RECV NO_FWD");
        // A removed port's number starts clean.
        f.forget(7);
        assert_eq!(f.get(7), 0);
        assert!(!f.any(NO_FWD) && f.any(NO_RECV));
        assert_eq!(names(0), "0");
        assert_eq!(names(1 | 0x100), "PORT_DOWN 0x100");
    }
}
