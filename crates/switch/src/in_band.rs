//! In-band control, as Open vSwitch 3.1's `ofproto/in-band.c` does it: when a bridge's
//! controller is reached through the bridge itself (its `connection_mode` is `in-band`, OVS's
//! default), the switch keeps a few hidden table-0 rules that send the control traffic
//! `NORMAL`, whatever the controller's flows say — so a bridge in `fail_mode=secure` with an
//! empty table still lets its own OpenFlow connection through its local port.
//!
//! The rules ([`rules`]), each `actions=NORMAL` at a priority above OpenFlow's 16 bits (OVS's
//! 180000–180008, one per kind, so `ovs-appctl bridge/dump-flows` tells them apart):
//!
//! | priority | kind | match |
//! |---|---|---|
//! | 180000 | (a) DHCP from the local port | `udp,in_port=LOCAL,dl_src=LOCAL_MAC,tp_src=68,tp_dst=67` |
//! | 180001 | (b) ARP replies to the local port | `arp,dl_dst=LOCAL_MAC,arp_op=2` |
//! | 180002 | (c) ARP requests from the local port | `arp,dl_src=LOCAL_MAC,arp_op=1` |
//! | 180003 | (d) ARP replies to the next hop | `arp,dl_dst=NEXT_HOP_MAC,arp_op=2` |
//! | 180004 | (e) ARP requests from the next hop | `arp,dl_src=NEXT_HOP_MAC,arp_op=1` |
//! | 180005 | (f) ARP replies for the controller | `arp,arp_tpa=IP,arp_op=2` |
//! | 180006 | (g) ARP requests from the controller | `arp,arp_spa=IP,arp_op=1` |
//! | 180007 | (h) TCP to the controller | `tcp,nw_dst=IP,tp_dst=PORT` |
//! | 180008 | (i) TCP from the controller | `tcp,nw_src=IP,tp_src=PORT` |
//!
//! (a)–(c) need the local port's MAC (the bridge's internal device, read every second); (d)
//! and (e) each controller's next-hop MAC — the gateway the kernel's main routing table
//! (`/proc/net/route`) gives for the controller's address, or the address itself on a
//! directly connected network, looked up in the neighbour table (`/proc/net/arp`, complete
//! entries only), every 10 s, every second while unknown — as OVS's `netdev_get_next_hop` and
//! `netdev_arp_lookup` do on Linux. The controllers are the bridge's `tcp:`/`ssl:` targets
//! (IPv4 only, as OVS's in-band) whose `connection_mode` is unset or `in-band`, unless the
//! bridge's `other_config:disable-in-band` is true ([`Remotes`], read by `vswitchd`).
//!
//! The rules are installed and replaced through [`crate::Control::set_in_band`] (hidden from
//! OpenFlow like the fail-open rule: no flow-mod selects them, `ovs-ofctl dump-flows` does not
//! show them). Not done: OVS's `in-band-queue` (rqvs has no `set_queue`; the option is
//! reported and the rules carry no queue), and OVS's rule that also sends a DHCP reply to the
//! local port whatever the table does (`in_band_must_output_to_local_port`).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use rqvs_flow::formats::ofctl;
use rqvs_flow::key::fmt_mac;
use rqvs_flow::Rule;

/// The priority of the first kind of in-band rule (OVS's `IBR_FROM_LOCAL_DHCP`); the others
/// follow it (module docs).
pub const IN_BAND_PRIORITY: u32 = 180_000;

/// The in-band rules (module docs) for the local port's MAC (if known) and each controller's
/// address with its next hop's MAC (if known); none without controllers. Each (priority,
/// match) once, in priority order.
pub fn rules(local_mac: Option<[u8; 6]>, remotes: &[(SocketAddrV4, Option<[u8; 6]>)]) -> Vec<Rule> {
    let mut text: Vec<(u32, String)> = Vec::new();
    if remotes.is_empty() {
        return Vec::new();
    }
    if let Some(m) = local_mac.filter(|m| *m != [0; 6]) {
        let m = fmt_mac(&m);
        text.push((0, format!("udp,in_port=LOCAL,dl_src={m},tp_src=68,tp_dst=67")));
        text.push((1, format!("arp,dl_dst={m},arp_op=2")));
        text.push((2, format!("arp,dl_src={m},arp_op=1")));
    }
    for hop in remotes.iter().filter_map(|(_, m)| m.filter(|m| *m != [0; 6])) {
        let m = fmt_mac(&hop);
        text.push((3, format!("arp,dl_dst={m},arp_op=2")));
        text.push((4, format!("arp,dl_src={m},arp_op=1")));
    }
    for (a, _) in remotes {
        let (ip, port) = (a.ip(), a.port());
        text.push((5, format!("arp,arp_tpa={ip},arp_op=2")));
        text.push((6, format!("arp,arp_spa={ip},arp_op=1")));
        text.push((7, format!("tcp,nw_dst={ip},tp_dst={port}")));
        text.push((8, format!("tcp,nw_src={ip},tp_src={port}")));
    }
    let mut out: Vec<Rule> = Vec::new();
    for (kind, m) in text {
        // Written by this module from addresses: always a valid flow.
        let Ok(mut r) = ofctl::parse_flow("in-band", 1, &format!("{m},actions=NORMAL"), 0) else { continue };
        r.priority = IN_BAND_PRIORITY + kind;
        if !out.iter().any(|o| o.priority == r.priority && o.matches == r.matches) {
            out.push(r);
        }
    }
    out.sort_by_key(|r| r.priority);
    for (i, r) in out.iter_mut().enumerate() {
        r.id = rqvs_flow::RuleId(i as u32);
    }
    out
}

/// Parses a hexadecimal IPv4 address of `/proc/net/route` (host byte order of a
/// little-endian machine: the first octet in the low byte).
fn route_addr(hex: &str) -> Option<Ipv4Addr> {
    u32::from_str_radix(hex, 16).ok().map(|v| Ipv4Addr::from(v.to_le_bytes()))
}

/// The next hop to `ip` in `/proc/net/route`'s text: the gateway of the most specific route
/// that is up (lowest metric among equals), or `ip` itself on a directly connected network;
/// with the route's device. `None` without a route.
pub fn next_hop(ip: Ipv4Addr, route: &str) -> Option<(Ipv4Addr, String)> {
    const RTF_UP: u32 = 0x1;
    const RTF_GATEWAY: u32 = 0x2;
    let mut best: Option<(u32, u32, Ipv4Addr, String)> = None; // (prefix length, metric, hop, dev)
    for line in route.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 {
            continue;
        }
        let (Some(dst), Some(gw), Ok(flags), Ok(metric), Some(mask)) =
            (route_addr(f[1]), route_addr(f[2]), u32::from_str_radix(f[3], 16), f[6].parse::<u32>(), route_addr(f[7]))
        else {
            continue;
        };
        if flags & RTF_UP == 0 || u32::from(ip) & u32::from(mask) != u32::from(dst) {
            continue;
        }
        let len = u32::from(mask).count_ones();
        let hop = if flags & RTF_GATEWAY != 0 { gw } else { ip };
        let better = best.as_ref().is_none_or(|(l, m, _, _)| len > *l || (len == *l && metric < *m));
        if better {
            best = Some((len, metric, hop, f[0].to_string()));
        }
    }
    best.map(|(_, _, hop, dev)| (hop, dev))
}

/// `ip`'s MAC on `dev` in `/proc/net/arp`'s text, when the entry is complete (`ATF_COM`).
pub fn arp_lookup(ip: Ipv4Addr, dev: &str, arp: &str) -> Option<[u8; 6]> {
    const ATF_COM: u32 = 0x2;
    for line in arp.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || f[0].parse::<Ipv4Addr>().ok() != Some(ip) || f[5] != dev {
            continue;
        }
        let flags = u32::from_str_radix(f[2].trim_start_matches("0x"), 16).unwrap_or(0);
        if flags & ATF_COM == 0 {
            continue;
        }
        if let Some(m) = parse_mac(f[3]) {
            return Some(m);
        }
    }
    None
}

/// A bridge's in-band controllers: their addresses (`tcp:`/`ssl:` IPv4 targets whose
/// `connection_mode` is unset or `in-band`, none when the bridge's
/// `other_config:disable-in-band` is true).
pub type Remotes = Vec<SocketAddrV4>;

/// One bridge's in-band state (OVS's `struct in_band`): its controllers, the MACs last found
/// and when to look again.
#[derive(Default)]
pub struct InBand {
    local_mac: Option<[u8; 6]>,
    next_local: Option<Instant>,
    remotes: Vec<(SocketAddrV4, Option<[u8; 6]>)>,
    next_remote: Option<Instant>,
    /// [`rules`] of the MACs and controllers above, made again only when one of them changes.
    rules: Vec<Rule>,
}

impl InBand {
    /// In-band state without controllers.
    pub fn new() -> InBand {
        InBand::default()
    }

    /// Sets the controllers (a change looks their next hops up at the next [`InBand::run`]).
    pub fn set_remotes(&mut self, remotes: &[SocketAddrV4]) {
        if self.remotes.iter().map(|(a, _)| *a).ne(remotes.iter().copied()) {
            self.remotes = remotes.iter().map(|a| (*a, None)).collect();
            self.next_remote = None;
            self.rules = rules(self.local_mac, &self.remotes);
        }
    }

    /// Has it any controller?
    pub fn is_active(&self) -> bool {
        !self.remotes.is_empty()
    }

    /// Refreshes what is due (the MAC of the local port's device `local`, the bridge's
    /// name, every second; the next hops every 10 s, every second while one is unknown) and
    /// returns the rules for what it knows now, with a note for each controller without a
    /// route (to be logged once).
    pub fn run(&mut self, local: &str, now: Instant) -> (&[Rule], Vec<String>) {
        let mut notes = Vec::new();
        if self.remotes.is_empty() {
            return (&[], notes);
        }
        let mut changed = false;
        if self.next_local.is_none_or(|t| now >= t) {
            self.next_local = Some(now + Duration::from_secs(1));
            // A device name has no '/' (a bridge's name with one has no device).
            let mac = (!local.contains('/') && !local.starts_with('.'))
                .then(|| std::fs::read_to_string(format!("/sys/class/net/{local}/address")).ok())
                .flatten()
                .and_then(|s| parse_mac(s.trim()));
            changed |= mac != self.local_mac;
            self.local_mac = mac;
        }
        if self.next_remote.is_none_or(|t| now >= t) {
            let route = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
            let arp = std::fs::read_to_string("/proc/net/arp").unwrap_or_default();
            let mut known = true;
            for (a, m) in self.remotes.iter_mut() {
                let hop_mac = match next_hop(*a.ip(), &route) {
                    Some((hop, dev)) => arp_lookup(hop, &dev, &arp),
                    None => {
                        notes.push(format!("in-band: cannot find route for controller ({})", a.ip()));
                        None
                    }
                };
                changed |= hop_mac != *m;
                *m = hop_mac;
                known &= m.is_some();
            }
            self.next_remote = Some(now + Duration::from_secs(if known { 10 } else { 1 }));
        }
        if changed {
            self.rules = rules(self.local_mac, &self.remotes);
        }
        (&self.rules, notes)
    }
}

/// A MAC address written `aa:bb:cc:dd:ee:ff`.
fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let bytes: Vec<u8> = s.split(':').map(|b| u8::from_str_radix(b, 16)).collect::<Result<_, _>>().ok()?;
    <[u8; 6]>::try_from(bytes.as_slice()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTE: &str = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0
br0\t00004D0A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
br0\t00204D0A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
br0\t00214D0A\t0100A8C0\t0003\t0\t0\t0\t00FFFFFF\t0\t0\t0
";

    #[test]
    fn the_next_hop_is_the_most_specific_routes() {
        // 10.77.0.2: directly on br0; 10.77.33.5: through 192.168.0.1; elsewhere the default.
        assert_eq!(next_hop("10.77.0.2".parse().unwrap(), ROUTE), Some(("10.77.0.2".parse().unwrap(), "br0".into())));
        assert_eq!(
            next_hop("10.77.33.5".parse().unwrap(), ROUTE),
            Some(("192.168.0.1".parse().unwrap(), "br0".into()))
        );
        assert_eq!(next_hop("8.8.8.8".parse().unwrap(), ROUTE), Some(("192.168.0.1".parse().unwrap(), "eth0".into())));
        let no_default: String = ROUTE.lines().filter(|l| !l.starts_with("eth0")).map(|l| format!("{l}\n")).collect();
        assert_eq!(next_hop("8.8.8.8".parse().unwrap(), &no_default), None);
    }

    #[test]
    fn only_complete_neighbours_on_the_device_are_found() {
        let arp = "IP address       HW type     Flags       HW address            Mask     Device
10.77.0.2        0x1         0x2         3a:11:22:33:44:55     *        br0
10.77.0.3        0x1         0x0         00:00:00:00:00:00     *        br0
10.77.0.4        0x1         0x2         3a:11:22:33:44:66     *        eth1
";
        let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        assert_eq!(arp_lookup(ip("10.77.0.2"), "br0", arp), Some([0x3a, 0x11, 0x22, 0x33, 0x44, 0x55]));
        assert_eq!(arp_lookup(ip("10.77.0.3"), "br0", arp), None, "incomplete");
        assert_eq!(arp_lookup(ip("10.77.0.4"), "br0", arp), None, "another device");
    }

    #[test]
    fn the_rules_are_ovs_in_band_rules() {
        let remote: SocketAddrV4 = "10.77.0.2:6653".parse().unwrap();
        let local = [0x5e, 0, 0, 0, 0, 1];
        let hop = [0x3a, 0x11, 0x22, 0x33, 0x44, 0x55];
        let text = |rs: &[Rule]| rs.iter().map(crate::flow_line).collect::<Vec<_>>();
        assert!(rules(Some(local), &[]).is_empty(), "no controller, no rules");
        assert_eq!(
            text(&rules(Some(local), &[(remote, Some(hop))])),
            vec![
                "priority=180000,udp,in_port=LOCAL,dl_src=5e:00:00:00:00:01,tp_src=68,tp_dst=67,actions=NORMAL",
                "priority=180001,arp,dl_dst=5e:00:00:00:00:01,arp_op=2,actions=NORMAL",
                "priority=180002,arp,dl_src=5e:00:00:00:00:01,arp_op=1,actions=NORMAL",
                "priority=180003,arp,dl_dst=3a:11:22:33:44:55,arp_op=2,actions=NORMAL",
                "priority=180004,arp,dl_src=3a:11:22:33:44:55,arp_op=1,actions=NORMAL",
                "priority=180005,arp,arp_tpa=10.77.0.2,arp_op=2,actions=NORMAL",
                "priority=180006,arp,arp_spa=10.77.0.2,arp_op=1,actions=NORMAL",
                "priority=180007,tcp,nw_dst=10.77.0.2,tp_dst=6653,actions=NORMAL",
                "priority=180008,tcp,nw_src=10.77.0.2,tp_src=6653,actions=NORMAL",
            ]
        );
        // Unknown MACs: only the controller's rules; two controllers on one address and one
        // next hop: each rule once.
        assert_eq!(rules(None, &[(remote, None)]).len(), 4);
        let other: SocketAddrV4 = "10.77.0.2:6654".parse().unwrap();
        let two = rules(Some(local), &[(remote, Some(hop)), (other, Some(hop))]);
        assert_eq!(two.len(), 3 + 2 + 2 + 4, "{:?}", text(&two));
    }
}
