//! The ports' OpenFlow configuration bits that PORT_MOD keeps in the switch
//! ([`crate::openflow`]'s `port_mod`): `NO_RECV`, `NO_FLOOD`, `NO_FWD`, `NO_PACKET_IN`
//! (`PORT_DOWN` lives in the interface itself). One atomic word per port (by datapath index),
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

use std::sync::atomic::{AtomicU32, Ordering};

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

/// Each port's bits (module docs), by datapath index.
#[derive(Debug, Default)]
pub struct PortFlags {
    bits: Vec<AtomicU32>,
}

impl PortFlags {
    /// `ports` ports, every bit clear.
    pub fn new(ports: usize) -> PortFlags {
        PortFlags { bits: (0..ports).map(|_| AtomicU32::new(0)).collect() }
    }

    /// Port `i`'s bits (0 for an index past the ports).
    #[inline]
    pub fn get(&self, i: usize) -> u32 {
        self.bits.get(i).map_or(0, |b| b.load(Ordering::Relaxed))
    }

    /// Flips `bits` of port `i` (nothing for an index past the ports).
    pub fn toggle(&self, i: usize, bits: u32) {
        if let Some(b) = self.bits.get(i) {
            b.fetch_xor(bits, Ordering::Relaxed);
        }
    }

    /// Is any port's bit in `bits` set? (The executor's quick check: with none set, no frame
    /// needs a look at the per-port words.)
    pub fn any(&self, bits: u32) -> bool {
        self.bits.iter().any(|b| b.load(Ordering::Relaxed) & bits != 0)
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
        self.port_flags.get(i) | if self.port(i).admin_up() == Some(false) { PORT_DOWN } else { 0 }
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
        let f = PortFlags::new(3);
        assert!(!f.any(NO_FWD | NO_FLOOD));
        f.toggle(1, NO_FWD | NO_FLOOD);
        assert_eq!((f.get(0), f.get(1), f.get(2), f.get(9)), (0, NO_FWD | NO_FLOOD, 0, 0));
        assert!(f.any(NO_FWD) && !f.any(NO_RECV));
        f.toggle(1, NO_FLOOD);
        assert_eq!(f.get(1), NO_FWD);
        assert_eq!(names(f.get(1) | NO_RECV), "NO_RECV NO_FWD");
        assert_eq!(names(0), "0");
        assert_eq!(names(1 | 0x100), "PORT_DOWN 0x100");
    }
}
