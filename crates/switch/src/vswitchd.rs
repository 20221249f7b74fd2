//! `rqvs switch --ovsdb`: the switch configured through OVSDB as `ovs-vswitchd` is, so that
//! `ovs-vsctl` drives it. What is built (issue 37, parts 1 and 2):
//!
//! - The `Open_vSwitch`, `Bridge`, `Port`, `Interface`, `Controller`, `Flow_Table` and `SSL` tables
//!   are monitored
//!   ([`rqvs_ovsdb::Client`], which reconnects when `ovsdb-server` restarts and re-reads them).
//! - **Every bridge** with `datapath_type=netdev` (another type is logged once and left alone),
//!   each a [`Switch`] of its own — its OpenFlow table, MAC table, port numbering, management
//!   socket, controllers, fail mode, datapath id — all on the one datapath's PMD threads
//!   ([`crate::shared`]: each PMD holds a design instance per bridge and classifies a frame
//!   with its receiving port's bridge's). A bridge added or deleted starts or stops its switch
//!   while the others forward. An interface on two bridges belongs to the first by name; the
//!   other gets `Interface.error` ("could not add network device NAME to bridge B: it is on
//!   bridge A"). The unixctl socket serves every bridge ([`crate::bridges::Bridges`]:
//!   `fdb/show BRIDGE`, `ofproto/trace BRIDGE`, the datapath's `pmd-stats-show` over all); the
//!   ctl socket the first running bridge by name. Each bridge has its own handler,
//!   revalidator and expiry threads (OVS has one set for the datapath).
//! - Its interfaces become ports: type `""`/`system` → AF_PACKET, `afxdp` → AF_XDP,
//!   `internal` (the bridge's own port too) → a tap device (`NAME:tap`, [`rqvs_ports::tap`]),
//!   made by the switch in its network namespace and kept by a [`TapKeeper`] while the
//!   interface stays — across datapath restarts, so the addresses an operator puts on it stay
//!   — and removed with it (or at exit), as OVS's netdev datapath does; it starts down (`ip
//!   link set br0 up`). The bridge's own port is OpenFlow's `LOCAL` (65534, as OVS numbers
//!   it: `in_port=LOCAL`, `actions=LOCAL`, `LOCAL(br0)` in `ovs-ofctl show`). `patch` → one
//!   end of an in-memory port pair ([`rqvs_ports::patch`], spec `NAME:patch=PEER`): what is
//!   sent on it is received on the peer's bridge, on the same PMD thread, and classified there
//!   (a hop through the datapath; OVS crosses inside the translation). Both ends must name
//!   each other in `options:peer` (`patch_spec`); otherwise the port is still made (its
//!   `ofport` written, as OVS does), drops what it is sent, and `Interface.error` says why.
//!   Every other type (`dpdk`, tunnels) gets
//!   `Interface.error` "... not supported by rqvs" and `ofport` -1; an interface that does not
//!   exist gets OVS's "could not open network device NAME (No such device)". A port of several
//!   interfaces (a bond) is refused the same way.
//! - `Port.tag`, `trunks`, `vlan_mode` (`port_vlan`) give each port its VLANs for `NORMAL`
//!   ([`crate::normal::PortVlan`]): OVS's defaults (a `tag` makes an access port, `trunks`
//!   ignored; otherwise a trunk of `trunks`, every VLAN when empty), `native-tagged` and
//!   `native-untagged`; `dot1q-tunnel` and unknown modes are refused in `Interface.error`.
//! - The bridge's management socket `RUNDIR/BRIDGE.mgmt` (OVS's rundir, `OVS_RUNDIR`): a
//!   passive OpenFlow listener on a unix socket, bound when the bridge appears and kept while
//!   it stays (each datapath's channel serves it), removed at exit, so `ovs-ofctl -O
//!   OpenFlow13 show br0` works unchanged. A stale socket file there is replaced; one a live
//!   process accepts on (an ovs-vswitchd still running) is left alone and logged.
//! - `ofport_request` is honoured (1..=[`MAX_OFPORT`], 65279 as in OVS); other interfaces get
//!   the lowest free number, kept while the interface stays. OpenFlow port numbers are apart
//!   from the datapath's port indices ([`crate::ofports`]): no port fills a gap.
//! - Written back, as ovs-vswitchd writes them: `Interface.ofport`, `error`, `link_state`,
//!   `admin_state`, `mtu`, `mac_in_use`, `ifindex`, and every `stats_interval` (OVS: 5 s)
//!   `statistics` (the kernel's counters of the interface, as OVS's netdev-linux reports them;
//!   a patch port's own counters with the packets crossed through it,
//!   [`Control::patch_port_counters`]);
//!   `Bridge.datapath_id` (`other_config:datapath-id`, or the smallest MAC of its interfaces
//!   as OVS derives it); `Open_vSwitch.datapath_types`/`iface_types`; and after each
//!   reconfiguration `Open_vSwitch.cur_cfg = next_cfg`, so `ovs-vsctl` (without `--no-wait`)
//!   returns. Each write compares with the replica, so after a reconnect whatever the new
//!   server lacks is written again, and nothing when nothing changed.
//! - **Ports added or removed while running** are attached and removed live, without a datapath
//!   restart (`apply_ports` over [`Control::add_port`]/[`Control::remove_port`],
//!   [`crate::attach`]): removals first, then additions; a changed `ofport_request` is both; a
//!   port that cannot be attached keeps its error in `Interface.error` (not retried until its
//!   plan changes) while the others apply. The other ports forward throughout.
//!   A port's VLANs are set in the `NORMAL` MAC table ([`Control::set_port_vlan`]: before a new
//!   port's first frame; a changed port's learned stations forgotten).
//! - **The OpenFlow channel is changed live** (`apply_channel`, over [`Channel`]'s
//!   `set_controllers`, `add_listener`, `remove_listener`, `set_fail_mode`, `set_tls`): the
//!   bridge's `Controller` rows — `tcp:IP[:PORT]`/`ssl:IP[:PORT]` connected to (the channel of
//!   `--controller`, with its datapath id), `ptcp:[PORT][:IP]`/`pssl:[PORT][:IP]`/`punix:PATH`
//!   listened on beside the management socket (`is_connected` false and `status` empty for
//!   them, as OVS writes for a listener; one that cannot be bound is logged and left out until
//!   it changes) — and its `fail_mode` (`secure`, or `standalone` when empty). A controller
//!   added gets its thread, one removed is retired (its connection closed), one kept keeps its
//!   connection. Each controller's `inactivity_probe` and `max_backoff` ([`Timing::ovs`]: OVS
//!   3.1's reading — absent 5 s and 8 s, a probe of 0 none, the probe at least 5 s, the
//!   fail-open trigger three of the configured intervals) are given to its connection live
//!   ([`Channel::set_controllers_with`]). Written back, when a connection's state changes
//!   (`controller_update`, OVS's `refresh_controller_status`): `is_connected`, `role`
//!   (`other`/`master`/`slave`: its ROLE_REQUESTs) and `status` (`state`, `last_error`,
//!   `sec_since_connect`, `sec_since_disconnect`); another target gets `status:last_error`.
//!   The fail mode is read by the channel's fail-open watch at each tick (OVS's semantics:
//!   `standalone` with controllers fails open after three probe intervals without one
//!   admitted, `secure` never, and leaving `standalone` or the last controller recovers).
//! - **Flows and the fail mode** as OVS's connmgr makes them (`apply_channel`, `flush`):
//!   a new bridge starts as OVS's ofproto (secure, no controllers, no flow) and is brought to
//!   its row; the primary controllers (`is_primary`) going from none to some or back, or the
//!   fail mode changing while there are none, flush every flow, group and meter, and a
//!   standalone bridge without controllers gets `priority=0,actions=NORMAL` in the same
//!   commit. The switch, its PMDs, megaflows and MAC table are not touched; every bridge's
//!   switch always has a channel and a packet-in queue, so a controller can come at any time.
//! - `ssl:`/`pssl:` targets use the `SSL` table (`Open_vSwitch.ssl`: `private_key`,
//!   `certificate`, `ca_cert`, `bootstrap_ca_cert`; `ovs-vsctl set-ssl`), loaded by
//!   [`crate::tls`] (`SslFiles::load`) when the row or one of its files (its modification
//!   time, looked at each reconfiguration and statistics tick) changes — and again at each
//!   reconfiguration while it fails; a new one reconnects the `ssl:` controllers and binds the
//!   `pssl:` listeners again. Without a row (or with files that do not load) an `ssl:`/`pssl:`
//!   target is not used and its `status:last_error` says why (`require_tls`), logged once.
//!   Not done: the command line's TLS options serve only an `ssl:` OVSDB remote.
//! - **What restarts a bridge's switch** (`live_change` says no): a change of its management
//!   socket (the bridge renamed). The switch stops and a new one starts in the same process
//!   with the same OpenFlow rules — those `ovs-ofctl` added included, with their cookies; their
//!   timeouts and flags restart —: forwarding pauses for the restart (~40–60 ms measured with
//!   `scripts/ovsdb_restart_pause.sh`), the flows' counters, the megaflows and the learned MACs
//!   start again from zero; every frame of each datapath is accounted for in its own report.
//!   The management socket and the tap devices stay and are served by each switch in turn. A
//!   datapath id that changes with the ports is given to the running channel
//!   ([`Channel::set_datapath_id`]).
//! - `Flow_Table:prefixes` (`Bridge.flow_tables`) are the prefix fields of the bridge's
//!   slow-path tables, each table's its row's (`flow_table_prefixes`); a change is set live
//!   ([`Control::set_prefixes`]: the tries rebuilt, nothing restarted).
//! - A controller's `enable_async_messages`, `other_config:dscp`, `controller_rate_limit`,
//!   `controller_burst_limit` and `controller_queue_size` (`controller_settings`: OVS 3.1's
//!   reading) are given to its connection live too ([`ControllerSettings`]: async masks all
//!   zero until SET_ASYNC; the socket's DSCP, a change reconnecting it; the packet-in
//!   schedulers, whose counters are the `packet-in-*` status keys; the packet-ins that may wait
//!   for its socket). A passive target's row gives them, and its inactivity probe, to the
//!   connections its listener accepts (`OpenflowListener::with_settings`; a DSCP change closes
//!   those connections, as OVS's `rconn_reconnect` of an accepted connection does).
//! - A controller's `connection_mode` (unset or `in-band`: in-band control, unless the bridge's
//!   `other_config:disable-in-band` is true) gives the bridge OVS's hidden in-band rules
//!   ([`crate::in_band`], refreshed by `run_in_band` on each pass of the loop).
//! - Not yet: the `Controller` columns other than `target`, `inactivity_probe`, `max_backoff`,
//!   `enable_async_messages`, `other_config:dscp`, the rate limits, `controller_queue_size`,
//!   `connection_mode` and `type`; `other_config:in-band-queue`; `--openflow` and `--controller` are refused with `--ovsdb`;
//!   the other `Flow_Table` columns; patch crossings by `NORMAL`/`flood`/`all` and
//!   on CFLOWS bridges are still a datapath hop (docs/ovs-dropin.md).

use std::collections::{BTreeMap, HashSet};

use rqvs_classify::ofproto::PrefixFields;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rqvs_flow::Rule;

use crate::in_band::{self, InBand};
use rqvs_ovsdb::{Client, ClientConfig, Condition, Datum, LogFn, MonitorTable, Op, Replica, Row, Uuid, Version};

pub use rqvs_ovsdb::{Remote, DEFAULT_REMOTE};

use crate::bridges::Bridges;
use crate::normal::PortVlan;
use crate::openflow::pinsched::Limits;
use crate::openflow::{
    Channel, ChannelConfig, ControllerSettings, ControllerStatus, ControllerTarget, FailMode, ListenTarget,
    OpenflowListener, Timing, Tls, DEFAULT_DSCP, DEFAULT_QUEUE_SIZE,
};
use crate::shared::SharedPmds;
use crate::unixctl::UnixctlServer;
use crate::{ctl, Control, Error, FinalReport, PortSource, Switch, SwitchConfig};
use rqvs_ports::TapKeeper;

/// The largest `ofport_request` honoured (OpenFlow's ordinary ports end there; `LOCAL`, 65534,
/// is the bridge's own port's).
pub const MAX_OFPORT: i64 = crate::ofports::MAX_OFPORT as i64;

/// Builds a datapath's configuration from its ports and rules (the CLI's other options).
pub type MakeConfig<'a> = Box<dyn Fn(Vec<PortSource>, Vec<Rule>) -> Result<SwitchConfig, Error> + 'a>;

pub struct VswitchdConfig<'a> {
    pub remote: Remote,
    pub make: MakeConfig<'a>,
    /// The OpenFlow table each new bridge starts with (`--rules`); empty: the one OVS gives a
    /// new bridge (`priority=0,actions=NORMAL` when standalone without controllers, else
    /// none: `start_datapath`).
    pub rules: Vec<Rule>,
    pub unixctl: Option<UnixctlServer>,
    pub ctl: Option<ctl::Listener>,
    /// How often `Interface.statistics` is written (OVS: `other_config:stats-update-interval`,
    /// 5 s).
    pub stats_interval: Duration,
    pub log: LogFn,
    /// Where the bridge's management socket `BRIDGE.mgmt` is made (OVS's rundir:
    /// [`crate::unixctl::rundir`]).
    pub rundir: PathBuf,
    /// The TLS configuration of an `ssl:` remote ([`crate::tls::Tls::ovsdb_connector`]).
    pub tls: Option<rqvs_ovsdb::TlsConnector>,
}

/// What one bridge's switch did (one per bridge and restart).
pub struct Generation {
    pub bridge: String,
    pub ports: Vec<String>,
    pub report: FinalReport,
}

#[derive(Clone, Debug, PartialEq)]
struct PlannedPort {
    ofport: u32,
    name: String,
    spec: String,
    /// Its `Port`'s `tag`/`trunks`/`vlan_mode` ([`port_vlan`]).
    vlan: PortVlan,
}

#[derive(Clone, Debug)]
struct IfaceStatus {
    uuid: Uuid,
    name: String,
    ofport: i64,
    error: Option<String>,
    /// A `patch` interface: no device behind it ([`patch_spec`]).
    patch: bool,
}

/// What a bridge's switch runs: its ports, channel and tables. Only a change of `mgmt` restarts
/// the switch ([`live_change`]); the rest is applied to the running one ([`apply_ports`],
/// [`apply_channel`]).
#[derive(Clone, Debug, Default, PartialEq)]
struct Identity {
    ports: Vec<PlannedPort>,
    /// Its `tcp:`/`ssl:` controller targets: connected to, each with its settings
    /// ([`controller_settings`]).
    controllers: Vec<(ControllerTarget, ControllerSettings)>,
    secure: bool,
    /// How many primary controllers the bridge has (OVS's `connmgr_has_controllers`: the
    /// `Controller` rows of an active target, `tcp:`/`ssl:`/`unix:`, whether rqvs can reach
    /// them or not; `type` says otherwise when set). A change between none and some, or of
    /// the fail mode while there are none, flushes the bridge's flows ([`apply_channel`]).
    primaries: usize,
    datapath_id: u64,
    /// The bridge's management socket (`RUNDIR/BRIDGE.mgmt`), when bound.
    mgmt: Option<PathBuf>,
    /// Its `ptcp:`/`pssl:`/`punix:` controller targets: listened on as the management socket
    /// is, each with its row's settings (given to the connections it accepts, as OVS's
    /// `ofservice` does; changed live).
    listeners: Vec<(Passive, ControllerSettings)>,
    /// The slow path's prefix fields by table (`Flow_Table:prefixes`).
    prefixes: Vec<(u8, PrefixFields)>,
    /// Its in-band controllers' addresses ([`crate::in_band`]: `tcp:`/`ssl:` IPv4 targets whose
    /// `connection_mode` is unset or `in-band`; none with `other_config:disable-in-band=true`).
    in_band: in_band::Remotes,
}

/// A passive controller target (`ptcp:`, `pssl:`, `punix:`): a listener the bridge's channel
/// serves.
#[derive(Clone, Debug, PartialEq)]
enum Passive {
    Tcp(ListenTarget),
    Unix(PathBuf),
}

impl Passive {
    /// Its key among the channel's listeners ([`Channel::add_listener`]).
    fn key(&self) -> String {
        match self {
            Passive::Tcp(t) => format!("{}:{}", if t.tls { "pssl" } else { "ptcp" }, t.addr),
            Passive::Unix(p) => format!("punix:{}", p.display()),
        }
    }
}

/// What a `Controller` row's target is to rqvs.
#[derive(Clone, Debug)]
enum Target {
    /// `tcp:IP[:PORT]`, `ssl:IP[:PORT]`: connected to.
    Active(ControllerTarget),
    /// `ptcp:`/`punix:`: listened on.
    Passive(Passive),
}

/// A `Controller` row of the bridge: its target, parsed when rqvs can connect to it.
#[derive(Clone, Debug)]
struct PlannedController {
    uuid: Uuid,
    target: String,
    addr: Result<Target, String>,
    /// Its `inactivity_probe`, `max_backoff`, `enable_async_messages`, `other_config:dscp`
    /// ([`controller_settings`]).
    settings: ControllerSettings,
    /// A primary controller (OVS's `OFCONN_PRIMARY`, [`is_primary`]).
    primary: bool,
    /// Its `connection_mode` is unset or `in-band` (OVS's `OFPROTO_IN_BAND`).
    in_band: bool,
}

/// Is a `Controller` row a primary controller, as ovs-vswitchd's
/// `get_controller_ofconn_type` says: its `type` column when set, else whether its target is
/// an active one (`tcp:`, `ssl:`, `unix:`; the passive `ptcp:`, `pssl:`, `punix:` are service
/// connections).
fn is_primary(target: &str, ty: Option<&str>) -> bool {
    match ty {
        Some(t) => t == "primary",
        None => ["tcp:", "ssl:", "unix:"].iter().any(|p| target.starts_with(p)),
    }
}

/// Is a `Controller` row's connection in-band, as ovs-vswitchd reads `connection_mode`
/// (unset or `in-band`; `out-of-band` is not)?
fn is_in_band(c: &Row) -> bool {
    c.str("connection_mode").is_none_or(|m| m == "in-band")
}

/// What the database asks for: every `netdev` bridge's plan, by name.
#[derive(Default)]
struct Plans {
    ovs: Option<(Uuid, i64)>,
    bridges: Vec<Plan>,
    notes: Vec<String>,
}

/// One bridge's plan.
#[derive(Default)]
struct Plan {
    bridge: Option<(Uuid, Row)>,
    ports: Vec<PlannedPort>,
    controllers: Vec<PlannedController>,
    ifaces: Vec<IfaceStatus>,
    /// `Flow_Table:prefixes` by table ([`flow_table_prefixes`]); a table without a row has the
    /// default.
    prefixes: Vec<(u8, PrefixFields)>,
    notes: Vec<String>,
}

/// Reads the replica into the bridges it asks for: each `netdev` bridge by name, an interface
/// that an earlier bridge (by name) has refused on the later one. `assigned` keeps each
/// bridge's interfaces' ofports from one plan to the next.
fn plans(r: &Replica, assigned: &mut BTreeMap<String, BTreeMap<String, u32>>) -> Plans {
    let mut out = Plans::default();
    let Some((ovs_uuid, ovs)) = r.rows("Open_vSwitch").next() else {
        assigned.clear();
        return out;
    };
    out.ovs = Some((ovs_uuid.clone(), ovs.int("next_cfg").unwrap_or(0)));
    let bridge_uuids = ovs.uuids("bridges");
    let mut bridges: Vec<(Uuid, &Row)> =
        bridge_uuids.iter().filter_map(|u| r.row("Bridge", u).map(|row| (u.clone(), row))).collect();
    bridges.sort_by(|a, b| a.1.str("name").cmp(&b.1.str("name")));
    // Each interface name's bridge (the first by name to have it).
    let mut claimed: BTreeMap<String, String> = BTreeMap::new();
    for (uuid, br) in bridges {
        let name = br.str("name").unwrap_or("?");
        let dp = br.str("datapath_type").unwrap_or("");
        if dp != "netdev" {
            out.notes.push(format!(
                "bridge {name}: datapath_type '{dp}' is not supported by rqvs (set datapath_type=netdev); bridge ignored"
            ));
        } else if out.bridges.iter().any(|p| p.name() == name) {
            out.notes.push(format!("bridge {name}: a second bridge of that name; ignored"));
        } else {
            let a = assigned.entry(name.to_string()).or_default();
            out.bridges.push(plan(r, uuid, br, a, &mut claimed));
        }
    }
    assigned.retain(|n, _| out.bridges.iter().any(|p| p.name() == n));
    // One `Interface` row referenced from two bridges (the schema keeps interface names
    // unique, so this is how two bridges claim one): the row has one status — its port on the
    // first bridge, with the second's refusal in `error`.
    let mut seen: Vec<(Uuid, usize, usize)> = Vec::new();
    for b in 0..out.bridges.len() {
        let mut k = 0;
        while k < out.bridges[b].ifaces.len() {
            let uuid = out.bridges[b].ifaces[k].uuid.clone();
            match seen.iter().find(|s| s.0 == uuid) {
                Some(&(_, b0, k0)) => {
                    let later = out.bridges[b].ifaces.remove(k);
                    let first = &mut out.bridges[b0].ifaces[k0];
                    if first.error.is_none() {
                        first.error = later.error;
                    }
                }
                None => {
                    seen.push((uuid, b, k));
                    k += 1;
                }
            }
        }
    }
    out
}

/// One bridge's plan: its interfaces checked (`claimed`: the interfaces of the bridges before
/// it), numbered ([`crate::ofports`]) and typed, its controllers.
fn plan(
    r: &Replica,
    uuid: Uuid,
    br: &Row,
    assigned: &mut BTreeMap<String, u32>,
    claimed: &mut BTreeMap<String, String>,
) -> Plan {
    let mut p = Plan { bridge: Some((uuid, br.clone())), ..Plan::default() };
    let bridge_name = br.str("name").unwrap_or("").to_string();
    // The interfaces, each checked.
    let mut good: Vec<(Uuid, String, String, Option<i64>, PortVlan)> = Vec::new();
    // A patch port's peer fault: the port is made (it has an ofport, as in OVS) and drops.
    let mut patch_errors: BTreeMap<String, String> = BTreeMap::new();
    for port_uuid in br.uuids("ports") {
        let Some(port) = r.row("Port", &port_uuid) else { continue };
        let ifaces = port.uuids("interfaces");
        let pname = port.str("name").unwrap_or("?");
        let vlan = port_vlan(port);
        if let Ok((_, Some(n))) = &vlan {
            p.notes.push(format!("port {pname}: {n}"));
        }
        for iu in &ifaces {
            let Some(iface) = r.row("Interface", iu) else { continue };
            let name = iface.str("name").unwrap_or("").to_string();
            let ty = iface.str("type").unwrap_or("");
            let other = claimed.get(&name).cloned();
            if other.is_none() {
                claimed.insert(name.clone(), bridge_name.clone());
            }
            let error = if let Some(other) = other {
                // One interface, one bridge.
                Some(format!("could not add network device {name} to bridge {bridge_name}: it is on bridge {other}"))
            } else if ifaces.len() > 1 {
                Some(format!("port {pname}: bonds are not supported by rqvs"))
            } else if let Err(e) = &vlan {
                Some(format!("port {pname}: {e}"))
            } else {
                match ty {
                    "" | "system" | "afxdp" => {
                        if !is_ifname(&name) {
                            Some(format!("'{name}' is not a network device name (1 to 15 bytes, no '/' or blank)"))
                        } else if Path::new("/sys/class/net").join(&name).exists() {
                            None
                        } else {
                            Some(format!("could not open network device {name} (No such device)"))
                        }
                    }
                    "internal" if !is_ifname(&name) => {
                        Some(format!("'{name}' is not a network device name (1 to 15 bytes, no '/' or blank)"))
                    }
                    // A tap device, made by the switch ([`keep_taps`]).
                    "internal" => None,
                    "patch" if name.chars().any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control()) => {
                        Some(format!("'{name}' is not a patch port name rqvs takes (no ':', '/' or blank)"))
                    }
                    "patch" => None,
                    other => Some(format!("{other} interfaces are not supported by rqvs")),
                }
            };
            match error {
                Some(e) => p.ifaces.push(IfaceStatus {
                    uuid: iu.clone(),
                    name,
                    ofport: -1,
                    error: Some(e),
                    patch: ty == "patch",
                }),
                None => {
                    let spec = match ty {
                        "afxdp" => format!("{name}:afxdp"),
                        "internal" => format!("{name}:tap"),
                        "patch" => {
                            let (spec, e) = patch_spec(r, &name, iface);
                            if let Some(e) = e {
                                patch_errors.insert(name.clone(), e);
                            }
                            spec
                        }
                        _ => name.clone(),
                    };
                    let v = vlan.as_ref().map(|v| v.0.clone()).unwrap_or_default();
                    good.push((iu.clone(), name, spec, iface.int("ofport_request"), v));
                }
            }
        }
    }
    // ofports: requests first, then the numbers already held, then the lowest free.
    assigned.retain(|n, _| good.iter().any(|g| g.1 == *n));
    let mut taken: BTreeMap<u32, String> = BTreeMap::new();
    let mut by_name: BTreeMap<String, u32> = BTreeMap::new();
    let mut sorted = good.clone();
    sorted.sort_by(|a, b| a.1.cmp(&b.1));
    // The bridge's own interface is LOCAL, whatever it asks for (as OVS numbers it).
    if sorted.iter().any(|g| g.1 == bridge_name) {
        taken.insert(crate::ofports::LOCAL, bridge_name.clone());
        by_name.insert(bridge_name.clone(), crate::ofports::LOCAL);
    }
    for (_, name, _, req, _) in &sorted {
        if by_name.contains_key(name) {
            continue;
        }
        match req {
            Some(q) if (1..=MAX_OFPORT).contains(q) && !taken.contains_key(&(*q as u32)) => {
                taken.insert(*q as u32, name.clone());
                by_name.insert(name.clone(), *q as u32);
            }
            Some(q) if !(1..=MAX_OFPORT).contains(q) => p.notes.push(format!(
                "interface {name}: ofport_request {q} not honoured (OpenFlow port numbers are 1..={MAX_OFPORT})"
            )),
            Some(q) => p.notes.push(format!("interface {name}: ofport_request {q} is taken by another interface")),
            None => {}
        }
    }
    for (_, name, _, _, _) in &sorted {
        if by_name.contains_key(name) {
            continue;
        }
        if let Some(&n) = assigned.get(name) {
            if let std::collections::btree_map::Entry::Vacant(e) = taken.entry(n) {
                e.insert(name.clone());
                by_name.insert(name.clone(), n);
            }
        }
    }
    for (_, name, _, _, _) in &sorted {
        if by_name.contains_key(name) {
            continue;
        }
        let n = (1..).find(|n| !taken.contains_key(n)).expect("a free number");
        taken.insert(n, name.clone());
        by_name.insert(name.clone(), n);
    }
    *assigned = by_name.clone();
    for (uuid, name, spec, _, vlan) in good {
        let ofport = by_name[&name];
        let patch = spec.contains(":patch");
        p.ports.push(PlannedPort { ofport, name: name.clone(), spec, vlan });
        let error = patch_errors.remove(&name);
        p.ifaces.push(IfaceStatus { uuid, name, ofport: ofport as i64, error, patch });
    }
    p.ports.sort_by_key(|x| x.ofport);
    for cu in br.uuids("controller") {
        let Some(c) = r.row("Controller", &cu) else { continue };
        let target = c.str("target").unwrap_or("").to_string();
        let addr = if target.starts_with("tcp:") || target.starts_with("ssl:") {
            crate::openflow::parse_controller(&target).map(Target::Active).map_err(|e| e.0)
        } else if target.starts_with("ptcp:") || target.starts_with("pssl:") {
            crate::openflow::parse_target(&target).map(|t| Target::Passive(Passive::Tcp(t))).map_err(|e| e.0)
        } else if let Some(path) = target.strip_prefix("punix:").filter(|p| !p.is_empty()) {
            Ok(Target::Passive(Passive::Unix(PathBuf::from(path))))
        } else {
            Err(format!(
                "controller target '{target}' is not supported by rqvs (tcp:IP[:PORT], ssl:IP[:PORT], ptcp:[PORT][:IP], pssl:[PORT][:IP] or punix:PATH only)"
            ))
        };
        let settings = controller_settings(c, br);
        let primary = is_primary(&target, c.str("type"));
        let in_band = is_in_band(c);
        p.controllers.push(PlannedController { uuid: cu, target, addr, settings, primary, in_band });
    }
    if br.map_get("other_config", "in-band-queue").is_some() {
        p.notes.push("other_config:in-band-queue is not supported by rqvs (its in-band rules set no queue)".into());
    }
    let (prefixes, notes) = flow_table_prefixes(r, br);
    p.prefixes = prefixes;
    p.notes.extend(notes);
    p
}

/// A `Controller` row's settings as ovs-vswitchd 3.1 reads them (`bridge_configure_remotes`):
/// the timers ([`Timing::ovs`]); `enable_async_messages` absent → true; `other_config:dscp`
/// an integer 0..=63, else (absent, not a number, out of range) 48; `controller_rate_limit`
/// and `controller_burst_limit` as [`Limits::ovs`] takes them (no rate: no limit);
/// `controller_queue_size` 1..=512, else its bridge's `other_config:controller-queue-size`
/// (1..=512), else 100 ([`DEFAULT_QUEUE_SIZE`]).
fn controller_settings(c: &Row, bridge: &Row) -> ControllerSettings {
    let timing = Timing::ovs(c.int("inactivity_probe"), c.int("max_backoff"));
    let dscp = c.map_get("other_config", "dscp").and_then(|d| d.parse::<u8>().ok()).filter(|d| *d <= 63);
    let queue = |q: Option<i64>| q.filter(|q| (1..=512).contains(q)).map(|q| q as usize);
    let bridge_queue = bridge.map_get("other_config", "controller-queue-size").and_then(|q| q.parse().ok());
    ControllerSettings {
        timing,
        async_enabled: c.bool("enable_async_messages").unwrap_or(true),
        dscp: dscp.unwrap_or(DEFAULT_DSCP),
        rate_limit: c.int("controller_rate_limit").map(|r| Limits::ovs(r, c.int("controller_burst_limit"))),
        queue_size: queue(c.int("controller_queue_size")).or(queue(bridge_queue)).unwrap_or(DEFAULT_QUEUE_SIZE),
    }
}

/// A `patch` interface's port spec (`NAME:patch=PEER`) and the fault to write in its `error`
/// column: `options:peer` missing or naming itself, the peer interface missing, not a patch
/// interface, or its own peer not this one. A faulty one is `NAME:patch` — a port with no peer,
/// which drops what it is sent (OVS too keeps such a port, with its ofport).
fn patch_spec(r: &Replica, name: &str, iface: &Row) -> (String, Option<String>) {
    let lonely = |e: String| (format!("{name}:patch"), Some(e));
    let Some(peer) = iface.map_get("options", "peer").filter(|p| !p.is_empty()) else {
        return lonely(format!("{name}: patch type requires valid 'peer' argument"));
    };
    if peer == name {
        return lonely(format!("{name}: patch peer must not be self"));
    }
    if peer.chars().any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control()) {
        return lonely(format!("{name}: peer '{peer}' is not a patch port name rqvs takes (no ':', '/' or blank)"));
    }
    let Some((_, row)) = r.find("Interface", "name", peer) else {
        return lonely(format!("{name}: peer interface {peer} not found"));
    };
    if row.str("type") != Some("patch") {
        return lonely(format!("{name}: peer interface {peer} is not a patch interface"));
    }
    match row.map_get("options", "peer") {
        Some(back) if back == name => (format!("{name}:patch={peer}"), None),
        Some(back) => lonely(format!("{name}: peer interface {peer} has peer {back}, not {name}")),
        None => lonely(format!("{name}: peer interface {peer} has no peer")),
    }
}

/// The prefix fields of a bridge's `flow_tables`, by table (OVS's `Flow_Table:prefixes`, read
/// as vswitchd reads it: [`PrefixFields::from_ovsdb`]), and the notes to log. A table without a
/// row keeps the default.
fn flow_table_prefixes(r: &Replica, br: &Row) -> (Vec<(u8, PrefixFields)>, Vec<String>) {
    let mut notes = Vec::new();
    let mut by_table: Vec<(u8, PrefixFields)> = Vec::new();
    for (k, v) in br.get("flow_tables").map(|d| d.pairs().to_vec()).unwrap_or_default() {
        let (Some(table), Some(u)) = (k.as_i64(), v.as_uuid()) else { continue };
        let Some(ft) = r.row("Flow_Table", u) else { continue };
        let Some(table) = u8::try_from(table).ok().filter(|t| *t != 255) else {
            notes.push(format!("flow_tables: table {table} is not a table (0 to 254); its row is not used"));
            continue;
        };
        let names: Vec<String> = ft
            .get("prefixes")
            .map(|d| d.atoms().iter().filter_map(|a| a.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        let (fields, warnings) = PrefixFields::from_ovsdb(&names);
        notes.extend(warnings.into_iter().map(|w| format!("flow table {table}: {w}")));
        by_table.push((table, fields));
    }
    by_table.sort_by_key(|(t, _)| *t);
    (by_table, notes)
}

impl Plan {
    /// The bridge's name.
    fn name(&self) -> &str {
        self.bridge.as_ref().and_then(|(_, b)| b.str("name")).unwrap_or("?")
    }

    fn identity(&self) -> Identity {
        let br = self.bridge.as_ref().map(|(_, b)| b);
        Identity {
            ports: self.ports.clone(),
            controllers: self
                .controllers
                .iter()
                .filter_map(|c| match &c.addr {
                    Ok(Target::Active(a)) => Some((*a, c.settings)),
                    _ => None,
                })
                .collect(),
            listeners: self
                .controllers
                .iter()
                .filter_map(|c| match &c.addr {
                    Ok(Target::Passive(p)) => Some((p.clone(), c.settings)),
                    _ => None,
                })
                .collect(),
            in_band: if br.and_then(|b| b.map_get("other_config", "disable-in-band")) == Some("true") {
                Vec::new()
            } else {
                self.controllers
                    .iter()
                    .filter(|c| c.in_band)
                    .filter_map(|c| match &c.addr {
                        Ok(Target::Active(t)) => match t.addr {
                            std::net::SocketAddr::V4(a) => Some(a),
                            std::net::SocketAddr::V6(_) => None,
                        },
                        _ => None,
                    })
                    .collect()
            },
            secure: br.and_then(|b| b.str("fail_mode")) == Some("secure"),
            primaries: self.controllers.iter().filter(|c| c.primary).count(),
            prefixes: self.prefixes.clone(),
            datapath_id: br.map_or(0, |b| u64::from_str_radix(&datapath_id(b, &self.ports), 16).unwrap_or(0)),
            mgmt: None,
        }
    }
}

/// A `Port` row's VLANs for `NORMAL`, as ovs-vswitchd reads `tag`, `trunks` and `vlan_mode`
/// (`vlan_mode` unset: `access` when `tag` is set — `trunks` then ignored —, else `trunk`;
/// `trunks` empty: every VLAN). With it a note to log (something ignored); an error for what
/// rqvs refuses (`dot1q-tunnel`, an unknown mode).
fn port_vlan(port: &Row) -> Result<(PortVlan, Option<String>), String> {
    let tag = port.int("tag").filter(|t| (0..4096).contains(t)).map(|t| t as u16);
    let mut trunks: Vec<u16> = port
        .get("trunks")
        .map(|d| {
            d.atoms().iter().filter_map(|a| a.as_i64()).filter(|t| (0..4096).contains(t)).map(|t| t as u16).collect()
        })
        .unwrap_or_default();
    trunks.sort_unstable();
    trunks.dedup();
    let mode = port.str("vlan_mode").unwrap_or(match tag {
        Some(_) => "access",
        None => "trunk",
    });
    let ignored = |what: &str| Some(format!("{what} ignored (vlan_mode {mode})"));
    Ok(match (mode, tag) {
        ("access", t) => (PortVlan::Access(t.unwrap_or(0)), if trunks.is_empty() { None } else { ignored("trunks") }),
        ("trunk", t) if trunks.is_empty() => (PortVlan::All, t.and_then(|_| ignored("tag"))),
        ("trunk", t) => (PortVlan::Trunk(trunks), t.and_then(|_| ignored("tag"))),
        ("native-tagged" | "native-untagged", Some(native)) => {
            (PortVlan::Native { native, tagged: mode == "native-tagged", trunks }, None)
        }
        ("native-tagged" | "native-untagged", None) => (
            if trunks.is_empty() { PortVlan::All } else { PortVlan::Trunk(trunks) },
            Some(format!("vlan_mode {mode} without a tag: a trunk port")),
        ),
        ("dot1q-tunnel", _) => return Err("vlan_mode dot1q-tunnel is not supported by rqvs".into()),
        (other, _) => {
            return Err(format!("vlan_mode '{other}' is not one of access, trunk, native-tagged, native-untagged"))
        }
    })
}

/// Makes the tap device of each `internal` interface the plan has (`NAME:tap` ports) and keeps
/// it while the interface stays, across datapath restarts, so its addresses and routes stay
/// too ([`TapKeeper`]); drops the devices of interfaces gone. An interface whose device cannot
/// be made gets the error instead of a port.
fn keep_taps(p: &mut Plan, keepers: &mut BTreeMap<String, TapKeeper>) {
    let wanted: Vec<String> = p.ports.iter().filter(|x| x.spec.ends_with(":tap")).map(|x| x.name.clone()).collect();
    keepers.retain(|n, _| wanted.contains(n));
    for name in wanted {
        if keepers.contains_key(&name) {
            continue;
        }
        match TapKeeper::open(&name) {
            Ok(k) => {
                keepers.insert(name, k);
            }
            Err(e) => {
                p.ports.retain(|x| x.name != name);
                for i in p.ifaces.iter_mut().filter(|i| i.name == name) {
                    i.error = Some(format!("could not make the tap device of internal interface {name}: {e}"));
                    i.ofport = -1;
                }
            }
        }
    }
}

/// A name Linux accepts for a network device (`dev_valid_name`).
fn is_ifname(name: &str) -> bool {
    (1..16).contains(&name.len())
        && name != "."
        && name != ".."
        && !name.bytes().any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace())
}

/// One running datapath and the threads serving its sockets.
struct Running {
    switch: Switch,
    control: Arc<Control>,
    /// What it runs: as started, then as ports were attached and removed ([`live_change`]).
    identity: Identity,
    /// Ports of `identity` that could not be attached live, by interface name: why.
    failed: BTreeMap<String, String>,
    channel: Option<Channel>,
    servers: Vec<JoinHandle<()>>,
    /// The `rqvs ctl` socket is served by this bridge's switch (`servers` has its thread).
    serves_ctl: bool,
    /// Its `punix:` controller sockets (each removed when its listener goes or the switch stops).
    sockets: Vec<(Passive, Mgmt)>,
    /// The TLS settings its `ssl:`/`pssl:` targets use (the `SSL` table's, [`SslFiles::load`]).
    tls: Option<Arc<Tls>>,
    /// Its in-band control ([`run_in_band`]).
    in_band: InBand,
}

/// Can the running datapath become `want` without a restart? Yes unless its management
/// socket changed (ports, VLANs, prefix fields, controllers, listeners and the fail mode are
/// all applied live; the datapath id may change too: derived from the ports' MACs).
fn live_change(r: &Running, want: &Identity) -> bool {
    r.identity.mgmt == want.mgmt
}

/// Brings the running switch's OpenFlow channel to `want`'s (module docs), the switch and its
/// PMDs untouched: listeners gone closed (their connections with them; a `punix:` file
/// removed), new ones bound (one that cannot be is logged and left out until it changes); the
/// fail mode set; the controllers set ([`Channel::set_controllers`]: a removed one's
/// connection closed, a kept one's kept). A standalone bridge left without `Controller` rows
/// gets OVS's `priority=0,actions=NORMAL` flow back if it lacks it (as ovs-vswitchd's
/// `bridge_configure_remotes` adds it).
fn apply_channel(r: &mut Running, want: &Identity, tls: Option<&Arc<Tls>>, log: &LogFn) {
    let Some(c) = &r.channel else { return };
    if r.tls.as_ref().map(Arc::as_ptr) != tls.map(Arc::as_ptr) {
        // The `SSL` table changed: `pssl:` listeners bound again, `ssl:` controllers
        // reconnected, with the new settings (the plain ones untouched).
        for (l, _) in r.identity.listeners.iter().filter(|(l, _)| matches!(l, Passive::Tcp(t) if t.tls)) {
            c.remove_listener(&l.key());
        }
        r.identity.listeners.retain(|(l, _)| !matches!(l, Passive::Tcp(t) if t.tls));
        if let Err(e) = c.set_tls(tls.cloned()) {
            log(&format!("rqvs switch: ovsdb: controllers: {e}"));
        }
        r.tls = tls.cloned();
        if r.identity.controllers.iter().any(|(t, _)| t.tls)
            || want.listeners.iter().any(|(l, _)| matches!(l, Passive::Tcp(t) if t.tls))
        {
            log("rqvs switch: ovsdb: SSL settings changed: ssl: controllers reconnect, pssl: listeners bound again");
        }
    }
    let now = &r.identity;
    let listens = |list: &[(Passive, ControllerSettings)], l: &Passive| list.iter().any(|(p, _)| p == l);
    for (l, _) in now.listeners.iter().filter(|(l, _)| !listens(&want.listeners, l)) {
        c.remove_listener(&l.key());
        r.sockets.retain(|(p, _)| p != l);
        log(&format!("rqvs switch: ovsdb: controller {}: no longer listened on", l.key()));
    }
    for (l, settings) in &want.listeners {
        // A kept listener: its connections take the row's settings now.
        if now.listeners.iter().any(|(p, s)| p == l && s != settings) {
            c.set_listener_settings(&l.key(), *settings);
        }
    }
    for (l, settings) in want.listeners.iter().filter(|(l, _)| !listens(&now.listeners, l)) {
        let bound = match l {
            Passive::Tcp(t) => OpenflowListener::bind_target(t, tls.cloned()),
            Passive::Unix(path) => OpenflowListener::bind_unix(path).and_then(|listener| {
                let m = Mgmt { path: path.clone(), listener };
                let bound = OpenflowListener::unix(&m.listener, &m.path)?;
                r.sockets.push((l.clone(), m));
                Ok(bound)
            }),
        };
        match bound.and_then(|b| b.with_settings(*settings)).and_then(|b| c.add_listener(l.key(), b)) {
            Ok(()) => log(&format!("rqvs switch: ovsdb: controller {}: listening", l.key())),
            Err(e) => log(&format!("rqvs switch: ovsdb: controller {}: {e}", l.key())),
        }
    }
    if now.secure != want.secure {
        c.set_fail_mode(if want.secure { FailMode::Secure } else { FailMode::Standalone });
        log(&format!("rqvs switch: ovsdb: fail mode {}", if want.secure { "secure" } else { "standalone" }));
    }
    // OVS's `connmgr_set_controllers` and `connmgr_set_fail_mode`: primary controllers coming
    // (from none) or going (to none), or the fail mode changing while there are none, flush
    // the bridge's flows, groups and meters — and a standalone bridge without controllers gets
    // `priority=0,actions=NORMAL` (`connmgr_flushed`), in the same commit. Before the
    // controllers change, so a switch failed open keeps forwarding once it recovers.
    let had = now.primaries > 0;
    let has = want.primaries > 0;
    if had != has || (now.secure != want.secure && !has) {
        flush(&r.control, !has && !want.secure, log);
    }
    if now.controllers != want.controllers {
        match c.set_controllers_with(&want.controllers) {
            Ok(()) => {
                let names: Vec<String> = want.controllers.iter().map(|(t, _)| controller_name(t)).collect();
                log(&format!(
                    "rqvs switch: ovsdb: controllers {}",
                    if names.is_empty() { "none".to_string() } else { names.join(", ") }
                ));
            }
            Err(e) => log(&format!("rqvs switch: ovsdb: controllers: {e}")),
        }
    }
    r.identity.listeners = want.listeners.clone();
    r.in_band.set_remotes(&want.in_band);
    r.identity.in_band = want.in_band.clone();
    r.identity.secure = want.secure;
    r.identity.primaries = want.primaries;
    r.identity.controllers = c.controllers_with();
}

/// OVS's `ofproto_flush_flows`: every flow of every table (the fail-open rule, hidden, stays),
/// every group and every meter removed — with `normal`, `priority=0,actions=NORMAL` added in
/// the same commit (`connmgr_flushed` for a standalone bridge without controllers), so no
/// frame meets an empty table between the two.
fn flush(control: &Control, normal: bool, log: &LogFn) {
    use rqvs_ofproto::record::{FlowFilter, FlowOp};
    let mut ops = vec![
        FlowOp::Delete(FlowFilter::all()),
        FlowOp::Group(
            rqvs_openflow::group::GroupModCommand::Delete,
            rqvs_flow::group::Group {
                id: rqvs_openflow::group::OFPG_ALL,
                kind: rqvs_flow::group::GroupType::All,
                buckets: Vec::new(),
            },
        ),
    ];
    if normal {
        let rule = Rule::new(0, 0, rqvs_flow::Match::ANY, rqvs_flow::Actions(vec![rqvs_flow::Action::Normal]));
        ops.push(FlowOp::add(rule));
    }
    use rqvs_openflow::meter::{Meter, MeterMod, MeterModCommand, OFPM_ALL};
    let all = MeterMod { command: MeterModCommand::Delete, meter: Meter { id: OFPM_ALL, flags: 0, bands: Vec::new() } };
    // Their flows go with every flow (a delete of OFPM_ALL is never refused).
    let meters = control.meters().apply(&all).map_or(0, |gone| gone.len());
    match control.apply_ops(&ops) {
        Ok((_, removed)) => log(&format!(
            "rqvs switch: ovsdb: flows flushed ({removed} removed{}{})",
            if meters > 0 { format!(", {meters} meters") } else { String::new() },
            if normal { "; standalone without controllers: priority=0,actions=NORMAL added" } else { "" }
        )),
        Err(e) => log(&format!("rqvs switch: ovsdb: flushing the flows: {e}")),
    }
}

/// A controller as [`Channel::connected_controllers`] names it (`tcp:IP:PORT`, `ssl:IP:PORT`).
fn controller_name(t: &ControllerTarget) -> String {
    format!("{}:{}", if t.tls { "ssl" } else { "tcp" }, t.addr)
}

/// Brings the running datapath's ports to `want`'s (module docs): the ports gone (or changed)
/// removed first — freeing their numbers and interfaces —, then the new ones attached; one that
/// cannot be is kept in `failed` with its error (not tried again until its plan changes).
fn apply_ports(r: &mut Running, want: &Identity, log: &LogFn) {
    if r.identity.prefixes != want.prefixes {
        // `Flow_Table:prefixes`: the tries rebuilt in place ([`Control::set_prefixes`]).
        r.control.set_prefixes(&want.prefixes);
        let text: Vec<String> = want.prefixes.iter().map(|(t, p)| format!("table {t}: {p}")).collect();
        log(&format!(
            "rqvs switch: ovsdb: prefix fields set live ({})",
            if text.is_empty() { "defaults".to_string() } else { text.join(", ") }
        ));
    }
    let old = std::mem::take(&mut r.identity.ports);
    // The same port (number, interface, type) with other VLANs: set in place.
    let same = |a: &PlannedPort, b: &PlannedPort| a.ofport == b.ofport && a.name == b.name && a.spec == b.spec;
    for p in want.ports.iter() {
        if let Some(o) = old.iter().find(|o| same(o, p) && o.vlan != p.vlan) {
            if !r.failed.contains_key(&p.name) {
                r.control.set_port_vlan(p.ofport, p.vlan.clone());
                log(&format!("rqvs switch: ovsdb: port {}={} VLANs {:?} -> {:?}", p.ofport, p.spec, o.vlan, p.vlan));
            }
        }
    }
    let kept = |p: &PlannedPort, among: &[PlannedPort]| among.iter().any(|o| same(o, p));
    for p in old.iter().filter(|p| !kept(p, &want.ports)) {
        if r.failed.remove(&p.name).is_some() {
            continue; // never attached
        }
        match r.control.remove_port(p.ofport) {
            Ok(()) => log(&format!("rqvs switch: ovsdb: port {}={} removed", p.ofport, p.spec)),
            Err(e) => log(&format!("rqvs switch: ovsdb: removing port {}: {e}", p.name)),
        }
    }
    for p in want.ports.iter().filter(|p| !kept(p, &old)) {
        // Its VLANs before its first frame.
        r.control.set_port_vlan(p.ofport, p.vlan.clone());
        let attached = p
            .spec
            .parse::<rqvs_ports::PortSpec>()
            .map_err(|e| Error(format!("interface {}: {e}", p.name)))
            .and_then(|spec| r.control.add_port(&spec, p.ofport));
        match attached {
            Ok(_) => log(&format!("rqvs switch: ovsdb: port {}={} attached", p.ofport, p.spec)),
            Err(e) => {
                log(&format!("rqvs switch: ovsdb: port {} could not be attached: {e}", p.name));
                r.failed.insert(p.name.clone(), e.to_string());
            }
        }
    }
    if let Some(c) = &r.channel {
        c.set_datapath_id(want.datapath_id);
    }
    r.identity = want.clone();
}

/// The bridge's management socket, bound (it outlives the datapaths: each one's channel serves
/// a clone of it); the file is removed when it is dropped.
struct Mgmt {
    path: PathBuf,
    listener: UnixListener,
}

impl Drop for Mgmt {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Starts a bridge's switch with `id`'s ports and its channel ([`apply_channel`]: its
/// listeners, controllers and fail mode, as they are then changed live). `fresh`: a new
/// bridge, whose table is made as OVS makes a new bridge's — from an ofproto in `secure` mode
/// without controllers, brought to the bridge's (a standalone bridge without controllers
/// gets `priority=0,actions=NORMAL`, any other none) — unless `rules` (`--rules`) are given:
/// then it starts with those. A restarted bridge keeps `rules`, its table.
fn start_datapath(
    cfg: &VswitchdConfig<'_>,
    id: &Identity,
    rules: Vec<Rule>,
    shared: &Arc<SharedPmds>,
    mgmt: Option<&Mgmt>,
    tls: Option<&Arc<Tls>>,
    fresh: bool,
) -> Result<Running, Error> {
    let ovs_start = fresh && rules.is_empty();
    let ports = &id.ports;
    // Each interface a port, with its ofport ([`crate::ofports`]: the datapath's indices are
    // its own). Ports come and go while it runs ([`apply_ports`]); it may start with none.
    let mut sources = Vec::new();
    for p in ports {
        sources.push(PortSource::Spec(p.spec.parse().map_err(|e| Error(format!("interface {}: {e}", p.name)))?));
    }
    let ofports: Vec<u32> = ports.iter().map(|p| p.ofport).collect();
    let mut scfg = (cfg.make)(sources, rules)?;
    scfg.ofports = ofports;
    scfg.live_ports = true;
    // Controllers come and go while it runs: the packet-in queue is always there (a
    // `controller` action with no connection taking it is counted as unsent).
    scfg.packet_in = true;
    scfg.port_vlans = ports.iter().map(|p| p.vlan.clone()).collect();
    scfg.shared = Some(Arc::clone(shared));
    scfg.prefixes = id.prefixes.clone();
    let switch = Switch::start(scfg)?;
    let control = switch.control();
    let listen = match mgmt.filter(|_| id.mgmt.is_some()) {
        Some(m) => Some(OpenflowListener::unix(&m.listener, &m.path)?),
        None => None,
    };
    let ccfg = ChannelConfig {
        listen,
        tls: tls.cloned(),
        fail_mode: if id.secure { FailMode::Secure } else { FailMode::Standalone },
        datapath_id: id.datapath_id,
        ..ChannelConfig::new()
    };
    let channel = match Channel::start(&control, ccfg) {
        Ok(c) => c,
        Err(e) => {
            control.request_stop();
            let _ = switch.stop();
            return Err(e);
        }
    };
    // The channel as started: no controllers or listeners yet; `apply_channel` adds them.
    // (A restarted bridge's or `--rules`'s table is kept: `primaries` and the fail mode as
    // `id`'s, nothing flushed. A fresh one starts as OVS's ofproto: secure, no controllers.)
    let mut bare = Identity { controllers: Vec::new(), listeners: Vec::new(), ..id.clone() };
    if ovs_start {
        bare.secure = true;
        bare.primaries = 0;
    }
    let mut r = Running {
        switch,
        control,
        identity: bare,
        failed: BTreeMap::new(),
        channel: Some(channel),
        servers: Vec::new(),
        serves_ctl: false,
        sockets: Vec::new(),
        tls: tls.cloned(),
        in_band: InBand::new(),
    };
    apply_channel(&mut r, id, tls, &cfg.log);
    Ok(r)
}

fn stop_datapath(bridge: &str, r: Running) -> Result<(Vec<Rule>, Generation), Error> {
    // The flows OpenFlow sees: the hidden ones (fail-open, in-band: above OpenFlow's
    // priorities) are the switch's own, which the next one makes again as it needs them.
    let rules: Vec<Rule> = r.control.rules().into_iter().filter(|x| x.priority <= 0xffff).collect();
    r.control.request_stop();
    let report = r.switch.stop()?;
    if let Some(c) = r.channel {
        c.join();
    }
    // Its punix: sockets closed and removed once no channel serves them.
    drop(r.sockets);
    for t in r.servers {
        let _ = t.join();
    }
    let ports = r.identity.ports.iter().map(|p| format!("{}:{}", p.ofport, p.spec)).collect();
    Ok((rules, Generation { bridge: bridge.to_string(), ports, report }))
}

/// What /sys says of an interface.
struct SysIface {
    link_up: bool,
    admin_up: bool,
    mtu: i64,
    mac: String,
    ifindex: i64,
    stats: Vec<(&'static str, i64)>,
}

fn sys_iface(name: &str) -> Option<SysIface> {
    let dir = Path::new("/sys/class/net").join(name);
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok().map(|s| s.trim().to_string());
    let num = |f: &str| read(f).and_then(|s| s.parse::<i64>().ok());
    let flags = read("flags").and_then(|s| i64::from_str_radix(s.trim_start_matches("0x"), 16).ok())?;
    let stats = [
        ("rx_packets", "rx_packets"),
        ("rx_bytes", "rx_bytes"),
        ("rx_dropped", "rx_dropped"),
        ("rx_errors", "rx_errors"),
        ("tx_packets", "tx_packets"),
        ("tx_bytes", "tx_bytes"),
        ("tx_dropped", "tx_dropped"),
        ("tx_errors", "tx_errors"),
        ("collisions", "collisions"),
    ]
    .into_iter()
    .filter_map(|(k, f)| num(&format!("statistics/{f}")).map(|v| (k, v)))
    .collect();
    Some(SysIface {
        link_up: read("operstate").is_some_and(|s| s == "up" || s == "unknown") && (flags & 1) != 0,
        admin_up: flags & 1 != 0,
        mtu: num("mtu")?,
        mac: read("address")?,
        ifindex: num("ifindex")?,
        stats,
    })
}

/// `Bridge.datapath_id`: `other_config:datapath-id` when it is 16 hex digits, else the smallest
/// interface MAC as 16 hex digits (OVS derives it from the bridge's MAC, which it picks as the
/// smallest of its ports' when `other_config:hwaddr` is not set).
fn datapath_id(br: &Row, ports: &[PlannedPort]) -> String {
    if let Some(d) = br.map_get("other_config", "datapath-id") {
        if d.len() == 16 && d.bytes().all(|b| b.is_ascii_hexdigit()) {
            return d.to_ascii_lowercase();
        }
    }
    let mac = ports.iter().filter_map(|p| sys_iface(&p.name)).map(|s| s.mac.replace(':', "")).min();
    format!("{:0>16}", mac.unwrap_or_else(|| "0".into()))
}

/// The columns of `row` that differ from `want` (all of `want` for a missing row).
fn changed(row: Option<&Row>, want: Row) -> Row {
    let mut out = Row::new();
    for (k, v) in want.0 {
        if row.and_then(|r| r.get(&k)) != Some(&v) {
            out.insert(&k, v);
        }
    }
    out
}

fn str_set(items: &[&str]) -> Datum {
    Datum::set(items.iter().map(|s| (*s).into()))
}

fn opt_str(s: Option<&str>) -> Datum {
    s.map_or_else(Datum::empty, Datum::one)
}

/// The writes that bring the database to what the switch is (module docs). `controllers`:
/// each bridge's controllers' state ([`Channel::controller_status`]), by bridge; `patch`: each
/// patch interface's counters ([`Control::patch_port_counters`]), by name.
fn status_ops(
    r: &Replica,
    ps: &Plans,
    stats_due: bool,
    controllers: &BTreeMap<String, Vec<(ControllerTarget, ControllerStatus)>>,
    patch: &BTreeMap<String, [u64; 6]>,
) -> Vec<Op> {
    let mut ops = Vec::new();
    for p in &ps.bridges {
        bridge_status_ops(r, p, stats_due, controllers.get(p.name()).map_or(&[], Vec::as_slice), patch, &mut ops);
    }
    if let Some((uuid, next_cfg)) = &ps.ovs {
        let want = Row::new()
            .with("cur_cfg", Datum::one(*next_cfg))
            .with("datapath_types", str_set(&["netdev"]))
            .with("iface_types", str_set(&["afxdp", "internal", "patch", "system"]));
        let upd = changed(r.row("Open_vSwitch", uuid), want);
        if !upd.0.is_empty() {
            ops.push(Op::update("Open_vSwitch", vec![Condition::uuid(uuid)], upd));
        }
    }
    ops
}

/// What a `Controller` row says, as ovs-vswitchd's `refresh_controller_status` writes it: for
/// an active target its `is_connected`, `role` and `status` (`state`, `last_error`,
/// `sec_since_connect`, `sec_since_disconnect`: [`ControllerStatus`]; before its thread has a
/// state, `BACKOFF`); for a listener `false`, no role, an empty status; for a target rqvs
/// does not take, its `last_error`. `None` when the row says it already — the seconds apart:
/// like OVS, rqvs rewrites them only with a change of the rest (its connectivity), not every
/// second.
fn controller_update(row: Option<&Row>, addr: &Result<Target, String>, st: Option<&ControllerStatus>) -> Option<Row> {
    let (connected, role, pairs): (bool, Option<&str>, Vec<(String, String)>) = match addr {
        Ok(Target::Passive(_)) => (false, None, Vec::new()),
        Err(e) => (false, None, vec![("last_error".into(), e.clone())]),
        Ok(Target::Active(_)) => match st {
            None => (false, Some("other"), vec![("state".into(), "BACKOFF".to_string())]),
            Some(st) => {
                let mut pairs = vec![("state".into(), st.state.to_string())];
                if let Some(e) = &st.last_error {
                    pairs.push(("last_error".into(), e.clone()));
                }
                if let Some(d) = st.since_connect {
                    pairs.push(("sec_since_connect".into(), d.as_secs().to_string()));
                }
                if let Some(d) = st.since_disconnect {
                    pairs.push(("sec_since_disconnect".into(), d.as_secs().to_string()));
                }
                for (kind, s) in ["miss", "action"].into_iter().zip(st.packet_in.iter().flatten()) {
                    for (what, n) in
                        [("backlog", s.backlog), ("bypassed", s.bypassed), ("queued", s.queued), ("dropped", s.dropped)]
                    {
                        pairs.push((format!("packet-in-{kind}-{what}"), n.to_string()));
                    }
                }
                (st.is_connected, Some(st.role), pairs)
            }
        },
    };
    // The status's keys without the seconds' values, as the row has them and as wanted.
    let settled = |pairs: Vec<(String, String)>| -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = pairs
            .into_iter()
            .map(|(k, v)| if k.starts_with("sec_since_") { (k, String::new()) } else { (k, v) })
            .collect();
        v.sort();
        v
    };
    let had = row.and_then(|r| r.get("status")).map(|d| {
        d.pairs().iter().filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.as_str()?.to_string()))).collect()
    });
    let same_status = had.map(settled) == Some(settled(pairs.clone()));
    let want = Row::new().with("is_connected", Datum::one(connected)).with("role", opt_str(role));
    let upd = changed(row, want);
    if upd.0.is_empty() && same_status {
        return None;
    }
    Some(
        Row::new()
            .with("is_connected", Datum::one(connected))
            .with("role", opt_str(role))
            .with("status", Datum::map(pairs)),
    )
}

/// [`status_ops`] of one bridge: its controllers, interfaces and datapath id.
fn bridge_status_ops(
    r: &Replica,
    p: &Plan,
    stats_due: bool,
    statuses: &[(ControllerTarget, ControllerStatus)],
    patch: &BTreeMap<String, [u64; 6]>,
    ops: &mut Vec<Op>,
) {
    for c in &p.controllers {
        let status = match &c.addr {
            Ok(Target::Active(a)) => statuses.iter().find(|(t, _)| t == a).map(|(_, s)| s.clone()),
            _ => None,
        };
        if let Some(upd) = controller_update(r.row("Controller", &c.uuid), &c.addr, status.as_ref()) {
            ops.push(Op::update("Controller", vec![Condition::uuid(&c.uuid)], upd));
        }
    }
    for i in &p.ifaces {
        let sys = if i.error.is_none() && !i.patch { sys_iface(&i.name) } else { None };
        let mut want = Row::new().with("ofport", Datum::one(i.ofport)).with("error", opt_str(i.error.as_deref()));
        match &sys {
            // A patch port has no device: its link is up once it is a port (as OVS reports it).
            None if i.patch && i.ofport > 0 => {
                want.insert("link_state", Datum::one("up"));
                want.insert("admin_state", Datum::one("up"));
                for c in ["mtu", "mac_in_use", "ifindex"] {
                    want.insert(c, Datum::empty());
                }
            }
            Some(s) => {
                want.insert("link_state", Datum::one(if s.link_up { "up" } else { "down" }));
                want.insert("admin_state", Datum::one(if s.admin_up { "up" } else { "down" }));
                want.insert("mtu", Datum::one(s.mtu));
                want.insert("mac_in_use", Datum::one(s.mac.as_str()));
                want.insert("ifindex", Datum::one(s.ifindex));
            }
            None => {
                for c in ["link_state", "admin_state", "mtu", "mac_in_use", "ifindex"] {
                    want.insert(c, Datum::empty());
                }
            }
        }
        let mut upd = changed(r.row("Interface", &i.uuid), want);
        if stats_due {
            if let Some(s) = &sys {
                upd.insert("statistics", Datum::map(s.stats.iter().map(|(k, v)| (*k, *v))));
            } else if let Some(c) = patch.get(&i.name).filter(|_| i.patch) {
                let names = ["rx_packets", "rx_bytes", "rx_dropped", "tx_packets", "tx_bytes", "tx_dropped"];
                upd.insert("statistics", Datum::map(names.iter().zip(c).map(|(k, v)| (*k, *v as i64))));
            }
        }
        if !upd.0.is_empty() {
            ops.push(Op::update("Interface", vec![Condition::uuid(&i.uuid)], upd));
        }
    }
    if let Some((uuid, br)) = &p.bridge {
        let want = Row::new().with("datapath_id", Datum::one(datapath_id(br, &p.ports)));
        let upd = changed(r.row("Bridge", uuid), want);
        if !upd.0.is_empty() {
            ops.push(Op::update("Bridge", vec![Condition::uuid(uuid)], upd));
        }
    }
}

/// What an `ssl:`/`pssl:` target says when the database has no `SSL` row.
const NO_SSL: &str =
    "no SSL configuration (Open_vSwitch.ssl is empty: ovs-vsctl set-ssl PRIVATE-KEY CERTIFICATE CA-CERT)";

/// The `SSL` row's files (`Open_vSwitch.ssl`), as ovs-vswitchd reads them for its `ssl:` and
/// `pssl:` connections.
#[derive(Clone, Debug, PartialEq)]
struct SslFiles {
    private_key: String,
    certificate: String,
    ca_cert: String,
    /// `bootstrap_ca_cert`: `ca_cert` is saved from the first controller when it does not
    /// exist ([`crate::tls`]).
    bootstrap: bool,
    /// The three files' modification times: a file replaced or rewritten on disk is a change
    /// too (OVS re-reads them), seen at the next reconfiguration or statistics tick (5 s).
    stamps: Vec<Option<std::time::SystemTime>>,
}

impl SslFiles {
    fn load(&self) -> Result<Arc<Tls>, String> {
        let mut s = crate::tls::TlsSettings {
            private_key: Some(self.private_key.clone().into()),
            certificate: Some(self.certificate.clone().into()),
            ..Default::default()
        };
        if self.bootstrap {
            s.bootstrap_ca_cert = Some(self.ca_cert.clone().into());
        } else {
            s.ca_cert = Some(self.ca_cert.clone().into());
        }
        Tls::load(&s).map(Arc::new).map_err(|e| format!("the SSL table's settings: {}", e.0))
    }

    fn describe(&self) -> String {
        format!(
            "private key {}, certificate {}, CA certificate {}{}",
            self.private_key,
            self.certificate,
            self.ca_cert,
            if self.bootstrap { " (bootstrapped)" } else { "" }
        )
    }
}

/// The `SSL` row `Open_vSwitch.ssl` names, if any.
fn ssl_files(r: &Replica) -> Option<SslFiles> {
    let (_, ovs) = r.rows("Open_vSwitch").next()?;
    let u = ovs.uuids("ssl").into_iter().next()?;
    let row = r.row("SSL", &u)?;
    let file = |c: &str| row.str(c).unwrap_or("").to_string();
    let (private_key, certificate, ca_cert) = (file("private_key"), file("certificate"), file("ca_cert"));
    let stamps = [&private_key, &certificate, &ca_cert]
        .iter()
        .map(|f| std::fs::metadata(f).and_then(|m| m.modified()).ok())
        .collect();
    Some(SslFiles {
        private_key,
        certificate,
        ca_cert,
        bootstrap: row.bool("bootstrap_ca_cert").unwrap_or(false),
        stamps,
    })
}

/// Without usable TLS settings (`tls`'s error) a plan's `ssl:`/`pssl:` targets are not used:
/// each says why in its `Controller.status` (`last_error`) and the log, once.
fn require_tls(p: &mut Plan, tls: &Result<Arc<Tls>, String>) {
    let Err(e) = tls else { return };
    for c in p.controllers.iter_mut() {
        let needs = match &c.addr {
            Ok(Target::Active(t)) => t.tls,
            Ok(Target::Passive(Passive::Tcp(t))) => t.tls,
            _ => false,
        };
        if needs {
            c.addr = Err(e.clone());
        }
    }
}

/// The tables monitored, the schema version required (OVS 2.x's 7.x lacks columns written here).
pub fn client_config(remote: Remote, log: LogFn) -> ClientConfig {
    let tables = ["Open_vSwitch", "Bridge", "Port", "Interface", "Controller", "Flow_Table", "SSL"]
        .iter()
        .map(|t| MonitorTable::all(t))
        .collect();
    let mut c = ClientConfig::new(remote, "Open_vSwitch", tables);
    c.min_version = Some(Version(8, 0, 0));
    c.log = log;
    c
}

/// One bridge's state across plans: its running switch (restarted when its identity changes
/// other than by ports), its management socket, its tap devices, its OpenFlow table.
struct BridgeRun {
    running: Option<Running>,
    /// The identity the switch last failed to start with, and why (not retried until it changes).
    failed_ports: Option<Identity>,
    start_error: String,
    mgmt: Option<Mgmt>,
    /// The tap devices of its internal interfaces, by name.
    taps: BTreeMap<String, TapKeeper>,
    /// Its OpenFlow table when its switch is stopped (kept across restarts).
    rules: Vec<Rule>,
    /// Its switch has never started: its table is made as OVS makes a new bridge's
    /// ([`start_datapath`]).
    fresh: bool,
    /// Its controllers' state at the last look ([`Channel::controller_status`]).
    controllers: Vec<(ControllerTarget, ControllerStatus)>,
}

/// Runs until `stop` (or an `exit` through a socket): module docs. Returns each bridge's
/// switch's report, in the order they stopped.
pub fn run(cfg: VswitchdConfig<'_>, stop: &AtomicBool) -> Result<Vec<Generation>, Error> {
    let log = Arc::clone(&cfg.log);
    let mut cfg = cfg;
    // The one datapath's PMD threads, with the CLI's options (`--pmds`, `--pmd-cpus`).
    let probe = (cfg.make)(Vec::new(), Vec::new())?;
    let shared = SharedPmds::start(probe.pmds, &probe.pmd_cpus, probe.busy_poll)?;
    drop(probe);
    let bridges = Arc::new(Bridges::new(shared.cpus().to_vec()));
    let unixctl = match cfg.unixctl.take().map(Arc::new) {
        Some(u) => {
            let b = Arc::clone(&bridges);
            Some(
                std::thread::Builder::new()
                    .name("unixctl".into())
                    .spawn(move || u.serve_bridges(&b))
                    .map_err(|e| Error(format!("unixctl thread: {e}")))?,
            )
        }
        None => None,
    };
    let mut client_cfg = client_config(cfg.remote.clone(), Arc::clone(&log));
    client_cfg.tls = cfg.tls.clone();
    let client = Client::start(client_cfg);
    let ctl_listener = cfg.ctl.take().map(Arc::new);
    let mut logged: HashSet<String> = HashSet::new();
    let mut note = |line: String| {
        if logged.insert(line.clone()) {
            log(&format!("rqvs switch: ovsdb: {line}"));
        }
    };
    let mut assigned = BTreeMap::new();
    let rules0 = std::mem::take(&mut cfg.rules);
    let mut runs: BTreeMap<String, BridgeRun> = BTreeMap::new();
    let mut generations = Vec::new();
    let mut last_stats: Option<Instant> = None;
    let mut seen = u64::MAX;
    // The `SSL` table's settings as last loaded (reloaded when they change).
    let mut ssl: Option<(SslFiles, Result<Arc<Tls>, String>)> = None;
    let result = loop {
        if stop.load(Ordering::Relaxed) || bridges.stop_requested() {
            break Ok(());
        }
        if runs.values().filter_map(|b| b.running.as_ref()).any(|r| r.control.stop_requested()) {
            break Ok(()); // `exit` through the ctl socket, or a bridge's thread failed
        }
        let now = client.wait_change(seen, Duration::from_millis(100));
        let stats_due = last_stats.is_none_or(|t| t.elapsed() >= cfg.stats_interval);
        let controllers_moved = refresh_controllers(&mut runs);
        run_in_band(&mut runs, &mut note);
        if now == seen && !stats_due && !controllers_moved {
            continue;
        }
        seen = now;
        if !client.status().connected {
            // Without a database the bridges keep forwarding as last configured.
            continue;
        }
        let (_, replica) = client.snapshot();
        let mut ps = plans(&replica, &mut assigned);
        ps.notes.iter().for_each(|n| note(n.clone()));
        let tls = reload_ssl(&replica, &mut ssl, &log);
        for p in ps.bridges.iter_mut() {
            require_tls(p, &tls);
        }
        if let Err(e) = stop_gone(&mut runs, &ps, &bridges, &mut generations, &log) {
            break Err(e);
        }
        let mut failed = None;
        for p in ps.bridges.iter_mut() {
            let name = p.name().to_string();
            let b = runs.entry(name.clone()).or_insert_with(|| BridgeRun {
                running: None,
                failed_ports: None,
                start_error: String::new(),
                mgmt: None,
                taps: BTreeMap::new(),
                rules: rules0.clone(),
                fresh: true,
                controllers: Vec::new(),
            });
            keep_taps(p, &mut b.taps);
            p.notes.iter().for_each(|n| note(format!("bridge {name}: {n}")));
            for i in &p.ifaces {
                if let Some(e) = &i.error {
                    note(format!("interface {}: {e}", i.name));
                }
            }
            for c in &p.controllers {
                if let Err(e) = &c.addr {
                    note(format!("controller {}: {e}", c.target));
                }
            }
            let tls = tls.as_ref().ok();
            if let Err(e) = apply_bridge(&cfg, &name, p, b, &shared, &bridges, &log, &mut note, &mut generations, tls) {
                failed = Some(e);
                break;
            }
        }
        if let Some(e) = failed {
            break Err(e);
        }
        if let Some(l) = &ctl_listener {
            serve_ctl(l, &mut runs, &mut note);
        }
        if stats_due {
            last_stats = Some(Instant::now());
        }
        if let Err(e) = write_back(&client, &replica, &ps, &runs, stats_due) {
            note(format!("writing the status: {e}"));
            // Try again at the next change or statistics tick.
            last_stats = None;
        }
        // The database's configuration is applied and written back: what a supervisor (systemd,
        // `--detach`'s parent) waits for. Sent once per process.
        crate::notify::ready("configured by OVSDB");
    };
    let mut end = result;
    for (name, b) in std::mem::take(&mut runs) {
        bridges.remove(&name);
        if let Some(r) = b.running {
            end = end.and(stop_datapath(&name, r).map(|(_, g)| generations.push(g)));
        }
    }
    bridges.request_stop();
    if let Some(t) = unixctl {
        let _ = t.join();
    }
    // Every bridge's loops have ended: the PMD threads end.
    drop(shared);
    end.map(|()| generations)
}

/// Each running bridge's in-band control ([`crate::in_band`]): what is due refreshed, the
/// hidden rules made what it knows now (nothing committed when they stay), a fault logged
/// once.
fn run_in_band(runs: &mut BTreeMap<String, BridgeRun>, note: &mut dyn FnMut(String)) {
    let now = Instant::now();
    for (name, b) in runs.iter_mut() {
        let Some(r) = b.running.as_mut() else { continue };
        if !r.in_band.is_active() && !r.control.has_in_band_rules() {
            continue;
        }
        let (rules, notes) = r.in_band.run(name, now);
        notes.into_iter().for_each(|n| note(format!("bridge {name}: {n}")));
        if let Err(e) = r.control.set_in_band(rules) {
            note(format!("bridge {name}: in-band rules: {e}"));
        }
    }
}

/// Reads each bridge's controllers' state ([`Channel::controller_status`]) into its run;
/// true when one's connectivity changed (the seconds apart: not every second is a change).
fn refresh_controllers(runs: &mut BTreeMap<String, BridgeRun>) -> bool {
    let settled = |v: &[(ControllerTarget, ControllerStatus)]| -> Vec<(ControllerTarget, ControllerStatus)> {
        v.iter()
            .map(|(t, s)| (*t, ControllerStatus { since_connect: None, since_disconnect: None, ..s.clone() }))
            .collect()
    };
    let mut moved = false;
    for b in runs.values_mut() {
        let now =
            b.running.as_ref().and_then(|r| r.channel.as_ref()).map(Channel::controller_status).unwrap_or_default();
        moved |= settled(&now) != settled(&b.controllers);
        b.controllers = now;
    }
    moved
}

/// The `SSL` table's TLS settings: loaded again when the row (or a file of it) changes, or
/// while it fails (a file not there yet); the error when there are none to use.
fn reload_ssl(
    replica: &Replica,
    ssl: &mut Option<(SslFiles, Result<Arc<Tls>, String>)>,
    log: &LogFn,
) -> Result<Arc<Tls>, String> {
    let files = ssl_files(replica);
    if ssl.as_ref().map(|s| &s.0) != files.as_ref() || ssl.as_ref().is_some_and(|s| s.1.is_err()) {
        *ssl = files.map(|f| {
            let loaded = f.load();
            if loaded.is_ok() {
                log(&format!("rqvs switch: ovsdb: SSL: {}", f.describe()));
            }
            (f, loaded)
        });
    }
    match ssl {
        Some((_, Ok(t))) => Ok(Arc::clone(t)),
        Some((_, Err(e))) => Err(e.clone()),
        None => Err(NO_SSL.to_string()),
    }
}

/// The bridges no longer in the plans: their switches stopped (their reports kept in
/// `generations`), their sockets and tap devices removed.
fn stop_gone(
    runs: &mut BTreeMap<String, BridgeRun>,
    ps: &Plans,
    bridges: &Bridges,
    generations: &mut Vec<Generation>,
    log: &LogFn,
) -> Result<(), Error> {
    let gone: Vec<String> = runs.keys().filter(|n| !ps.bridges.iter().any(|p| p.name() == *n)).cloned().collect();
    let mut failed = Ok(());
    for name in gone {
        bridges.remove(&name);
        if let Some(b) = runs.remove(&name) {
            if let Some(r) = b.running {
                match stop_datapath(&name, r) {
                    Ok((_, g)) => generations.push(g),
                    Err(e) => failed = Err(e),
                }
            }
            log(&format!("rqvs switch: ovsdb: bridge {name} removed"));
        }
    }
    failed
}

/// `rqvs ctl` is served by one bridge's switch: the first by name that runs (a new one when
/// the one serving it stopped).
fn serve_ctl(l: &Arc<ctl::Listener>, runs: &mut BTreeMap<String, BridgeRun>, note: &mut dyn FnMut(String)) {
    if runs.values().filter_map(|b| b.running.as_ref()).any(|r| r.serves_ctl) {
        return;
    }
    if let Some(r) = runs.values_mut().find_map(|b| b.running.as_mut()) {
        let (l, c) = (Arc::clone(l), Arc::clone(&r.control));
        match std::thread::Builder::new().name("ctl".into()).spawn(move || l.serve(&c)) {
            Ok(t) => {
                r.servers.push(t);
                r.serves_ctl = true;
            }
            Err(e) => note(format!("ctl thread: {e}")),
        }
    }
}

/// Writes back what differs from the database ([`status_ops`]; with `stats_due`, the
/// statistics too).
fn write_back(
    client: &Client,
    replica: &Replica,
    ps: &Plans,
    runs: &BTreeMap<String, BridgeRun>,
    stats_due: bool,
) -> Result<(), String> {
    let controllers: BTreeMap<String, Vec<(ControllerTarget, ControllerStatus)>> =
        runs.iter().map(|(n, b)| (n.clone(), b.controllers.clone())).collect();
    let patch: BTreeMap<String, [u64; 6]> = if stats_due {
        runs.values().filter_map(|b| b.running.as_ref()).flat_map(|r| r.control.patch_port_counters()).collect()
    } else {
        BTreeMap::new()
    };
    let ops = status_ops(replica, ps, stats_due, &controllers, &patch);
    if ops.is_empty() {
        return Ok(());
    }
    client.transact(&ops).map(|_| ()).map_err(|e| e.to_string())
}

/// Brings one bridge's switch to its plan `p`: ports attached and removed live, or the switch
/// (re)started when its controllers, fail mode or management socket changed; the plan's
/// interfaces then say what could not be done.
#[allow(clippy::too_many_arguments)]
fn apply_bridge(
    cfg: &VswitchdConfig<'_>,
    name: &str,
    p: &mut Plan,
    b: &mut BridgeRun,
    shared: &Arc<SharedPmds>,
    bridges: &Bridges,
    log: &LogFn,
    note: &mut dyn FnMut(String),
    generations: &mut Vec<Generation>,
    tls: Option<&Arc<Tls>>,
) -> Result<(), Error> {
    // The bridge's management socket follows the bridge's name.
    let mgmt_path = cfg.rundir.join(format!("{name}.mgmt"));
    if b.mgmt.as_ref().map(|m| &m.path) != Some(&mgmt_path) {
        b.mgmt = None;
        match OpenflowListener::bind_unix(&mgmt_path) {
            Ok(listener) => b.mgmt = Some(Mgmt { path: mgmt_path, listener }),
            Err(e) => note(format!("bridge {name}: the bridge's management socket: {e}")),
        }
    }
    let mut want = p.identity();
    want.mgmt = b.mgmt.as_ref().map(|m| m.path.clone());
    let current = b.running.as_ref().map(|r| r.identity.clone());
    let live = b.running.as_ref().is_some_and(|r| b.failed_ports.is_none() && live_change(r, &want));
    if current.as_ref() != Some(&want) && live {
        // Ports attached and removed, the channel changed, without stopping the datapath.
        if let Some(r) = b.running.as_mut() {
            apply_channel(r, &want, tls, log);
            apply_ports(r, &want, log);
        }
    } else if current.as_ref() != Some(&want) && b.failed_ports.as_ref() != Some(&want) {
        if let Some(r) = b.running.take() {
            let (kept, g) = stop_datapath(name, r)?;
            b.rules = kept;
            generations.push(g);
        }
        let fresh = std::mem::replace(&mut b.fresh, false);
        match start_datapath(cfg, &want, b.rules.clone(), shared, b.mgmt.as_ref(), tls, fresh) {
            Ok(r) => {
                let names: Vec<String> = p.ports.iter().map(|x| format!("{}={}", x.ofport, x.spec)).collect();
                log(&format!(
                    "rqvs switch: ovsdb: datapath ports {} (bridge {name})",
                    if names.is_empty() { "none".into() } else { names.join(", ") }
                ));
                bridges.set(name, Arc::clone(&r.control));
                b.running = Some(r);
                b.failed_ports = None;
            }
            Err(e) => {
                note(format!(
                    "bridge {name}: the datapath could not start with ports {:?}: {e}",
                    p.ports.iter().map(|x| &x.spec).collect::<Vec<_>>()
                ));
                b.failed_ports = Some(want.clone());
                b.start_error = e.to_string();
                // Keep the sockets answering on a switch without ports.
                let bare = Identity { mgmt: want.mgmt.clone(), ..Identity::default() };
                let r = start_datapath(cfg, &bare, b.rules.clone(), shared, b.mgmt.as_ref(), tls, fresh)?;
                bridges.set(name, Arc::clone(&r.control));
                b.running = Some(r);
            }
        }
    }
    if let Some(r) = &b.running {
        for i in p.ifaces.iter_mut().filter(|i| i.error.is_none()) {
            if let Some(e) = r.failed.get(&i.name) {
                i.error = Some(format!("could not attach the port: {e}"));
                i.ofport = -1;
            }
        }
    }
    if b.failed_ports.as_ref().is_some_and(|f| *f == want && !f.ports.is_empty()) {
        // Every interface the datapath was to open says why it is not forwarding.
        for i in p.ifaces.iter_mut().filter(|i| i.error.is_none()) {
            i.error = Some(format!("the datapath could not start: {}", b.start_error));
            i.ofport = -1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::pinsched::PinStats;
    use serde_json::json;

    /// Bridge br0's plan of the replica (its notes with the datapath's).
    fn plan(r: &Replica, assigned: &mut BTreeMap<String, u32>) -> (Plan, Option<(Uuid, i64)>) {
        let mut all = BTreeMap::from([("br0".to_string(), assigned.clone())]);
        let ps = plans(r, &mut all);
        let mut p = ps.bridges.into_iter().find(|p| p.name() == "br0").unwrap_or_default();
        p.notes.extend(ps.notes);
        *assigned = all.remove("br0").unwrap_or_default();
        (p, ps.ovs)
    }

    fn uuid(n: u32) -> String {
        format!("00000000-0000-0000-0000-{n:012}")
    }

    fn replica(ifaces: &[(&str, &str, Option<i64>)]) -> Replica {
        let mut r = Replica::new();
        let mut iface_rows = serde_json::Map::new();
        let mut port_rows = serde_json::Map::new();
        let mut port_refs = Vec::new();
        for (i, (name, ty, req)) in ifaces.iter().enumerate() {
            let (iu, pu) = (uuid(100 + i as u32), uuid(200 + i as u32));
            let mut row = json!({"name": name, "type": ty});
            if let Some(q) = req {
                row["ofport_request"] = json!(q);
            }
            iface_rows.insert(iu.clone(), json!({"new": row}));
            port_rows.insert(pu.clone(), json!({"new": {"name": name, "interfaces": ["uuid", iu]}}));
            port_refs.push(json!(["uuid", pu]));
        }
        r.apply(&json!({
            "Open_vSwitch": {uuid(1): {"new": {"next_cfg": 3, "bridges": ["set", [["uuid", uuid(2)], ["uuid", uuid(3)]]]}}},
            "Bridge": {
                uuid(2): {"new": {"name": "br0", "datapath_type": "netdev", "ports": ["set", port_refs]}},
                uuid(3): {"new": {"name": "br1", "datapath_type": "system", "ports": ["set", []]}},
            },
            "Port": port_rows,
            "Interface": iface_rows,
        }))
        .unwrap();
        r
    }

    #[test]
    fn ofports_honour_requests_stay_and_fill_the_lowest_gap() {
        // "lo" exists in every network namespace.
        let mut assigned = BTreeMap::new();
        let (p, ovs) =
            plan(&replica(&[("lo", "", Some(3)), ("nonexistent0", "", None), ("x", "dpdk", None)]), &mut assigned);
        assert_eq!(p.ports, vec![PlannedPort { ofport: 3, name: "lo".into(), spec: "lo".into(), vlan: PortVlan::All }]);
        let err = |n: &str| p.ifaces.iter().find(|i| i.name == n).unwrap().error.clone().unwrap();
        assert_eq!(err("nonexistent0"), "could not open network device nonexistent0 (No such device)");
        assert_eq!(err("x"), "dpdk interfaces are not supported by rqvs");
        assert!(p.notes.iter().any(|n| n.contains("bridge br1: datapath_type 'system'")), "{:?}", p.notes);
        assert_eq!(ovs.as_ref().unwrap().1, 3);
        let (p, _) = plan(&replica(&[("lo", "afxdp", None)]), &mut assigned);
        assert_eq!(p.ports[0].ofport, 3, "kept while the interface stays");
        assert_eq!(p.ports[0].spec, "lo:afxdp");
        let (p, _) = plan(
            &replica(&[("..", "", None), ("a/b", "", None), ("sixteen-bytes-xx", "", None)]),
            &mut BTreeMap::new(),
        );
        assert!(p.ports.is_empty());
        assert!(p
            .ifaces
            .iter()
            .all(|i| i.error.as_deref().is_some_and(|e| e.contains("is not a network device name"))));
        let (p, _) = plan(&replica(&[("lo", "", Some(MAX_OFPORT + 1))]), &mut BTreeMap::new());
        assert_eq!(p.ports[0].ofport, 1);
        assert!(p.notes.iter().any(|n| n.contains("not honoured")));
    }

    #[test]
    fn the_bridge_port_is_local_and_requests_need_no_gap_fillers() {
        let (p, _) = plan(&replica(&[("br0", "internal", Some(5)), ("lo", "", Some(1000))]), &mut BTreeMap::new());
        let got: Vec<(u32, &str)> = p.ports.iter().map(|x| (x.ofport, x.name.as_str())).collect();
        assert_eq!(got, vec![(1000, "lo"), (crate::ofports::LOCAL, "br0")]);
        let br0 = p.ifaces.iter().find(|i| i.name == "br0").unwrap();
        assert_eq!(br0.ofport, 65534, "Interface.ofport of the bridge's port, as OVS writes it");
        // Another interface asking for LOCAL's number is refused; the lowest free one is given.
        let (p, _) = plan(&replica(&[("br0", "internal", None), ("lo", "", Some(65534))]), &mut BTreeMap::new());
        assert_eq!(p.ports.iter().map(|x| x.ofport).collect::<Vec<_>>(), vec![1, crate::ofports::LOCAL]);
        assert!(p.notes.iter().any(|n| n.contains("ofport_request 65534 not honoured")), "{:?}", p.notes);
    }
    #[test]
    fn every_netdev_bridge_is_planned_and_an_interface_goes_to_one_bridge() {
        let mut r = Replica::new();
        r.apply(&json!({
            "Open_vSwitch": {uuid(1): {"new": {"next_cfg": 1, "bridges": ["set", [["uuid", uuid(2)], ["uuid", uuid(3)], ["uuid", uuid(4)]]]}}},
            "Bridge": {
                uuid(2): {"new": {"name": "brb", "datapath_type": "netdev", "ports": ["set", [["uuid", uuid(20)]]]}},
                uuid(3): {"new": {"name": "bra", "datapath_type": "netdev", "ports": ["set", [["uuid", uuid(30)], ["uuid", uuid(31)]]]}},
                uuid(4): {"new": {"name": "brs", "datapath_type": "", "ports": ["set", []]}},
            },
            "Port": {
                uuid(20): {"new": {"name": "lo", "interfaces": ["uuid", uuid(120)]}},
                uuid(30): {"new": {"name": "lo", "interfaces": ["uuid", uuid(130)]}},
                uuid(31): {"new": {"name": "bra", "interfaces": ["uuid", uuid(131)]}},
            },
            "Interface": {
                uuid(120): {"new": {"name": "lo", "type": ""}},
                uuid(130): {"new": {"name": "lo", "type": "", "ofport_request": 7}},
                uuid(131): {"new": {"name": "bra", "type": "internal"}},
            },
        }))
        .unwrap();
        let mut assigned = BTreeMap::new();
        let ps = plans(&r, &mut assigned);
        let names: Vec<&str> = ps.bridges.iter().map(Plan::name).collect();
        assert_eq!(names, vec!["bra", "brb"], "the netdev bridges, by name");
        assert!(ps.notes.iter().any(|n| n.contains("bridge brs: datapath_type ''")), "{:?}", ps.notes);
        // The first bridge by name has the interface; the second's is refused.
        let ports: Vec<(u32, &str)> = ps.bridges[0].ports.iter().map(|x| (x.ofport, x.name.as_str())).collect();
        assert_eq!(ports, vec![(7, "lo"), (crate::ofports::LOCAL, "bra")]);
        assert!(ps.bridges[1].ports.is_empty());
        let lo = &ps.bridges[1].ifaces[0];
        assert_eq!(lo.ofport, -1);
        assert_eq!(lo.error.as_deref(), Some("could not add network device lo to bridge brb: it is on bridge bra"));
        // Each bridge numbers its own ports.
        assert_eq!(assigned.keys().collect::<Vec<_>>(), vec!["bra", "brb"]);
        assert_eq!(assigned["bra"].get("lo"), Some(&7));
        // The status: brb's interface row gets the error.
        let ops = status_ops(&r, &ps, false, &BTreeMap::new(), &BTreeMap::new());
        let text = serde_json::to_string(&ops.iter().map(|o| o.to_json()).collect::<Vec<_>>()).unwrap();
        assert!(text.contains("it is on bridge bra"), "{text}");
    }

    #[test]
    fn the_ssl_row_is_read_and_a_file_rewritten_is_a_change() {
        let dir = std::env::temp_dir().join(format!("rqvs-ssl-row-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = dir.join("key.pem");
        std::fs::write(&key, "not a key").unwrap();
        let mut r = Replica::new();
        r.apply(&json!({
            "Open_vSwitch": {uuid(1): {"new": {"next_cfg": 1, "ssl": ["uuid", uuid(9)]}}},
            "SSL": {uuid(9): {"new": {
                "private_key": key.to_str().unwrap(), "certificate": "/nonexistent/cert.pem",
                "ca_cert": "/nonexistent/ca.pem", "bootstrap_ca_cert": true}}},
        }))
        .unwrap();
        let a = ssl_files(&r).unwrap();
        assert_eq!((a.certificate.as_str(), a.bootstrap), ("/nonexistent/cert.pem", true));
        assert_eq!(ssl_files(&r), Some(a.clone()), "nothing changed");
        let later = std::time::SystemTime::now() + Duration::from_secs(10);
        std::fs::File::options().write(true).open(&key).unwrap().set_modified(later).unwrap();
        assert_ne!(ssl_files(&r), Some(a.clone()), "the key rewritten");
        let e = a.load().unwrap_err();
        assert!(e.starts_with("the SSL table's settings: "), "{e}");
        // A plan's ssl:/pssl: targets without TLS say why; the others stay.
        let mut p = Plan::default();
        for (i, t) in ["ssl:127.0.0.1:6653", "pssl:6653", "tcp:127.0.0.1"].iter().enumerate() {
            let addr = if t.starts_with("pssl:") {
                crate::openflow::parse_target(t).map(|x| Target::Passive(Passive::Tcp(x)))
            } else {
                crate::openflow::parse_controller(t).map(Target::Active)
            };
            p.controllers.push(PlannedController {
                uuid: Uuid::parse(&uuid(20 + i as u32)).unwrap(),
                target: t.to_string(),
                addr: addr.map_err(|e| e.0),
                settings: ControllerSettings::new(Timing::ovs(None, None)),
                primary: is_primary(t, None),
                in_band: true,
            });
        }
        require_tls(&mut p, &Err(NO_SSL.to_string()));
        assert_eq!(p.controllers[0].addr.as_ref().unwrap_err(), NO_SSL);
        assert_eq!(p.controllers[1].addr.as_ref().unwrap_err(), NO_SSL);
        assert!(p.controllers[2].addr.is_ok());
        assert_eq!(ssl_files(&replica(&[])), None, "no SSL row");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn controller_timers_and_kind_as_ovs_reads_them() {
        let t = |p, b| Timing::ovs(p, b);
        let s = Duration::from_secs;
        // Absent: 5 s probe, 8 s backoff.
        assert_eq!(t(None, None), Timing { probe: s(5), interval: s(5), max_backoff: s(8) });
        // 0: no probes (and no fail-open delay from this controller).
        assert_eq!(t(Some(0), None).probe, Duration::ZERO);
        assert_eq!(t(Some(0), None).interval, Duration::ZERO);
        // Below a second: 1 s, the probe itself 5 s (rconn's minimum); the trigger 3 x 1 s.
        assert_eq!(t(Some(300), None), Timing { probe: s(5), interval: s(1), max_backoff: s(8) });
        assert_eq!(t(Some(-7), None).interval, s(1));
        assert_eq!(t(Some(12_999), Some(2500)), Timing { probe: s(12), interval: s(12), max_backoff: s(2) });
        assert_eq!(t(Some(1000), Some(1000)).max_backoff, s(1));
        assert_eq!(t(None, Some(0)).max_backoff, s(1), "at least 1 s (the schema's minimum is 1000)");
        // Primary controllers: the active targets, or as `type` says.
        assert!(is_primary("tcp:127.0.0.1:6653", None));
        assert!(is_primary("unix:/x", None));
        assert!(!is_primary("ptcp:6653", None));
        assert!(!is_primary("punix:/x", None));
        assert!(is_primary("ptcp:6653", Some("primary")));
        assert!(!is_primary("tcp:1.2.3.4", Some("service")));
    }

    #[test]
    fn in_band_controllers_as_ovs_reads_them() {
        // connection_mode unset or in-band: in-band (OVS's default); out-of-band: not; only
        // active IPv4 targets count; `other_config:disable-in-band=true` turns it off.
        let plan = |disable: Option<&str>| {
            let mut br = Row::new();
            br.insert("name", Datum::one("br0"));
            if let Some(d) = disable {
                br.insert("other_config", Datum::map([("disable-in-band", d)]));
            }
            let mut p = Plan { bridge: Some((Uuid::parse(&uuid(1)).unwrap(), br)), ..Plan::default() };
            for (i, (t, mode)) in [
                ("tcp:10.0.0.1:6653", None),
                ("tcp:10.0.0.2:6653", Some("in-band")),
                ("ssl:10.0.0.3", Some("out-of-band")),
                ("ptcp:6653", None),
                ("tcp:[::1]:6653", None),
            ]
            .iter()
            .enumerate()
            {
                let addr = if t.starts_with("ptcp:") {
                    crate::openflow::parse_target(t).map(|x| Target::Passive(Passive::Tcp(x)))
                } else {
                    crate::openflow::parse_controller(t).map(Target::Active)
                };
                let mut c = Row::new();
                if let Some(m) = mode {
                    c.insert("connection_mode", Datum::one(*m));
                }
                p.controllers.push(PlannedController {
                    uuid: Uuid::parse(&uuid(30 + i as u32)).unwrap(),
                    target: t.to_string(),
                    addr: addr.map_err(|e| e.0),
                    settings: ControllerSettings::new(Timing::ovs(None, None)),
                    primary: is_primary(t, None),
                    in_band: is_in_band(&c),
                });
            }
            p.identity().in_band
        };
        let want: Vec<std::net::SocketAddrV4> =
            vec!["10.0.0.1:6653".parse().unwrap(), "10.0.0.2:6653".parse().unwrap()];
        assert_eq!(plan(None), want);
        assert_eq!(plan(Some("false")), want);
        assert!(plan(Some("true")).is_empty());
    }

    #[test]
    fn controller_settings_as_ovs_reads_them() {
        let row = |async_col: Option<bool>, dscp: Option<&str>| {
            let mut r = Row::new();
            if let Some(b) = async_col {
                r.insert("enable_async_messages", Datum::one(b));
            }
            if let Some(d) = dscp {
                r.insert("other_config", Datum::map([("dscp", d)]));
            }
            controller_settings(&r, &Row::new())
        };
        assert_eq!(row(None, None), ControllerSettings::new(Timing::ovs(None, None)));
        assert_eq!((row(None, None).async_enabled, row(None, None).dscp), (true, 48));
        assert!(!row(Some(false), None).async_enabled);
        assert!(row(Some(true), None).async_enabled);
        assert_eq!(row(None, Some("0")).dscp, 0);
        assert_eq!(row(None, Some("63")).dscp, 63);
        for bad in ["64", "-1", "ef", ""] {
            assert_eq!(row(None, Some(bad)).dscp, 48, "{bad}: OVS's default");
        }
        let limits = |rate: Option<i64>, burst: Option<i64>| {
            let mut r = Row::new();
            if let Some(v) = rate {
                r.insert("controller_rate_limit", Datum::one(v));
            }
            if let Some(v) = burst {
                r.insert("controller_burst_limit", Datum::one(v));
            }
            controller_settings(&r, &Row::new()).rate_limit
        };
        assert_eq!(limits(None, Some(25)), None, "no rate: no limit");
        assert_eq!(limits(Some(100), Some(25)), Some(Limits { rate: 100, burst: 25 }));
        assert_eq!(limits(Some(1000), None), Some(Limits { rate: 1000, burst: 250 }));
        // controller_queue_size, else the bridge's other_config:controller-queue-size, else 100;
        // out of OVS's range (1..=512) counts as absent.
        let queue = |column: Option<i64>, bridge: Option<&str>| {
            let mut r = Row::new();
            if let Some(v) = column {
                r.insert("controller_queue_size", Datum::one(v));
            }
            let mut b = Row::new();
            if let Some(v) = bridge {
                b.insert("other_config", Datum::map([("controller-queue-size", v)]));
            }
            controller_settings(&r, &b).queue_size
        };
        assert_eq!(queue(None, None), DEFAULT_QUEUE_SIZE);
        assert_eq!(DEFAULT_QUEUE_SIZE, 100);
        assert_eq!(queue(Some(10), None), 10);
        assert_eq!(queue(Some(512), Some("20")), 512);
        assert_eq!(queue(None, Some("20")), 20);
        assert_eq!(queue(Some(0), Some("20")), 20);
        assert_eq!(queue(Some(513), None), 100);
        assert_eq!(queue(None, Some("x")), 100);
        assert_eq!(queue(None, Some("600")), 100);
    }

    #[test]
    fn controller_rows_are_rewritten_when_their_connectivity_changes() {
        let tcp = Ok(Target::Active(crate::openflow::parse_controller("tcp:127.0.0.1:6653").unwrap()));
        let st = |connected: bool, role: &'static str, secs: u64| ControllerStatus {
            is_connected: connected,
            role,
            state: if connected { "ACTIVE" } else { "BACKOFF" },
            last_error: (!connected).then(|| "Connection refused".to_string()),
            since_connect: connected.then(|| Duration::from_secs(secs)),
            since_disconnect: Some(Duration::from_secs(secs + 1)),
            packet_in: None,
        };
        let first = controller_update(None, &tcp, Some(&st(true, "master", 3))).unwrap();
        assert_eq!(first.bool("is_connected"), Some(true));
        assert_eq!(first.str("role"), Some("master"));
        assert_eq!(first.map_get("status", "state"), Some("ACTIVE"));
        assert_eq!(first.map_get("status", "sec_since_connect"), Some("3"));
        assert_eq!(first.map_get("status", "sec_since_disconnect"), Some("4"));
        assert_eq!(first.map_get("status", "last_error"), None);
        let row = Row::from_json(&first.to_json()).unwrap();
        // Only the seconds moved: nothing written.
        assert!(controller_update(Some(&row), &tcp, Some(&st(true, "master", 9))).is_none());
        // The role or the connection changed: the row, seconds and all.
        assert!(controller_update(Some(&row), &tcp, Some(&st(true, "slave", 9))).is_some());
        let down = controller_update(Some(&row), &tcp, Some(&st(false, "other", 9))).unwrap();
        assert_eq!(down.map_get("status", "last_error"), Some("Connection refused"));
        assert_eq!(down.map_get("status", "state"), Some("BACKOFF"));
        assert_eq!(down.map_get("status", "sec_since_connect"), None);
        assert_eq!(down.str("role"), Some("other"));
        // A listener: not connected, no role, an empty status.
        let passive = Ok(Target::Passive(Passive::Unix(PathBuf::from("/x"))));
        let l = controller_update(None, &passive, None).unwrap();
        assert_eq!(l.get("role"), Some(&Datum::empty()));
        // Rate-limited: the schedulers' counters, and a change of them is a rewrite.
        let pin = |dropped: u64| {
            let miss = PinStats { backlog: 25, bypassed: 25, queued: 975, dropped };
            ControllerStatus { packet_in: Some([miss, PinStats::default()]), ..st(true, "master", 3) }
        };
        let limited = controller_update(Some(&row), &tcp, Some(&pin(900))).unwrap();
        let get = |k: &str| limited.map_get("status", k).map(str::to_string);
        assert_eq!(get("packet-in-miss-backlog").as_deref(), Some("25"));
        assert_eq!(get("packet-in-miss-bypassed").as_deref(), Some("25"));
        assert_eq!(get("packet-in-miss-queued").as_deref(), Some("975"));
        assert_eq!(get("packet-in-miss-dropped").as_deref(), Some("900"));
        assert_eq!(get("packet-in-action-dropped").as_deref(), Some("0"));
        let row = Row::from_json(&limited.to_json()).unwrap();
        assert!(controller_update(Some(&row), &tcp, Some(&pin(900))).is_none());
        assert!(controller_update(Some(&row), &tcp, Some(&pin(901))).is_some());
    }

    #[test]
    fn port_vlans_follow_ovs_defaults() {
        let row = |j: serde_json::Value| Row::from_json(&j).unwrap();
        let v = |j: serde_json::Value| port_vlan(&row(j));
        assert_eq!(v(json!({})).unwrap(), (PortVlan::All, None));
        assert_eq!(v(json!({"tag": 10})).unwrap(), (PortVlan::Access(10), None));
        let (a, note) = v(json!({"tag": 10, "trunks": ["set", [20, 30]]})).unwrap();
        assert_eq!(a, PortVlan::Access(10));
        assert_eq!(note.as_deref(), Some("trunks ignored (vlan_mode access)"));
        assert_eq!(v(json!({"trunks": ["set", [30, 20, 20]]})).unwrap().0, PortVlan::Trunk(vec![20, 30]));
        assert_eq!(v(json!({"trunks": 20})).unwrap().0, PortVlan::Trunk(vec![20]));
        assert_eq!(
            v(json!({"tag": 5, "vlan_mode": "native-untagged", "trunks": ["set", [7]]})).unwrap().0,
            PortVlan::Native { native: 5, tagged: false, trunks: vec![7] }
        );
        assert_eq!(
            v(json!({"vlan_mode": "dot1q-tunnel", "tag": 5})).unwrap_err(),
            "vlan_mode dot1q-tunnel is not supported by rqvs"
        );
        assert!(v(json!({"vlan_mode": "bogus"})).unwrap_err().contains("'bogus' is not one of"));
    }
}
