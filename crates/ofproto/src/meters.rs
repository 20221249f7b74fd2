//! The meter table: OpenFlow meters as Open vSwitch 3.1's userspace datapath has them
//! (`ovs-ofctl -O OpenFlow13 add-meter/mod-meter/del-meters/dump-meters/meter-stats/
//! meter-features`), enforced by the PMDs.
//!
//! **What a meter is here.** An id (1..=`OFPM_MAX`, or OVS's `slowpath` and `controller`), rates
//! in kbps or pktps (`OFPMF_KBPS`/`OFPMF_PKTPS`, one of them), optional burst sizes
//! (`OFPMF_BURST`), statistics, and up to [`MAX_BANDS`] **drop** bands (the only band type OVS's
//! userspace datapath has; `dscp_remark` and experimenter bands are `OFPMMFC_BAD_BAND`, as OVS
//! answers). METER_FEATURES says exactly that ([`rqvs_openflow::group::MeterFeatures::rqvs`]).
//!
//! **Errors, as OVS 3.1 answers them** (checked against a real OVS): an add of an existing
//! meter `METER_EXISTS`; a modify of a missing one `UNKNOWN_METER`; a delete of a missing one
//! nothing; id 0, `OFPM_ALL` in an add or modify, or an id above `OFPM_MAX` other than
//! `slowpath`/`controller` `INVALID_METER`; both kbps and pktps, or an unknown flag,
//! `BAD_FLAGS`; a band of rate 0 `BAD_RATE`; more than [`MAX_BANDS`] bands `OUT_OF_BANDS`; a
//! band type other than drop `BAD_BAND`; more than [`MAX_METERS`] meters `OUT_OF_METERS`. A
//! flow whose `meter:N` names a missing meter is refused with `INVALID_METER`
//! ([`check_flow_meters`], at FLOW_MOD time, as OVS). Deleting a meter deletes the flows that
//! name it (OVS's semantics; their FLOW_REMOVED says `DELETE`: OpenFlow 1.4's `METER_DELETE`
//! reason is not sent).
//!
//! **Enforcement.** A flow's `meter:N` instruction is an op of the composed action list
//! (`crate::actions::Op::Meter`, first in its rule's ops); the executor of each PMD
//! (`rqvs_switch::execute`) asks [`MeterTable::admit`] for every frame that reaches it. Each meter
//! has a token bucket per band, shared by the PMDs (a mutex held for the refill and the take:
//! tens of nanoseconds; contention only between PMDs metering through the same meter). A
//! bucket holds at most `(burst + rate) × 1000` units — milli-packets for pktps, bits for kbps —
//! (`burst` only with `OFPMF_BURST`; so one second of the rate plus the burst, as the Linux
//! datapath's meters do) and starts full; it gains `rate` units per millisecond of wall clock; a
//! packet costs 1000 units (pktps) or its length in bits (kbps). A band whose bucket lacks the
//! packet's cost applies to it (its bucket is left as it was); of the bands that apply, the one
//! with the highest rate is the one counted and that drops the packet (OpenFlow: the band with
//! the highest rate below the measured rate). A dropped frame ends there — the ops after the
//! meter are not run — and is counted in the PMD's `metered` drops (`rqvs ctl pmd-stats-show`,
//! part of `dropped`), so every frame stays accounted.
//!
//! **The controller meter** (`meter=controller`, `OFPM_CONTROLLER`, Faucet's `packetin_pps`):
//! when it exists, every packet-in the PMDs would send (`controller` actions, INVALID_TTL) goes
//! through it first; one it drops is not sent (counted in the PMD's `packet_in_metered`). The
//! `slowpath` meter is accepted and kept, but nothing goes through it (rqvs's upcalls are not
//! metered).
//!
//! **Statistics.** Per meter: the packets and bytes that went through it, per band the packets
//! and bytes it dropped, its flow count (flows of the table of record naming it, counted when
//! asked), its age. A modify replaces the bands and starts the counters again (the meter's age is
//! kept).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arc_swap::ArcSwap;
use rqvs_flow::{Action, Rule};
use rqvs_openflow::group::{MAX_BANDS, MAX_METERS};
use rqvs_openflow::meter::{
    Meter, MeterMod, MeterModCommand, MeterStats, OFPMBT_DROP, OFPMF_BURST, OFPMF_KBPS, OFPMF_PKTPS, OFPMF_STATS,
    OFPM_ALL, OFPM_CONTROLLER, OFPM_MAX, OFPM_SLOWPATH,
};
use rqvs_openflow::OfError;

/// One meter: its configuration, buckets and counters.
pub struct MeterState {
    pub config: Meter,
    created: Instant,
    buckets: Mutex<Buckets>,
    packets: AtomicU64,
    bytes: AtomicU64,
    band_packets: Vec<AtomicU64>,
    band_bytes: Vec<AtomicU64>,
}

struct Buckets {
    /// Nanoseconds of the table's clock at the last refill.
    last_ns: u64,
    /// Per band: units held (module docs).
    tokens: Vec<u64>,
}

fn capacity(flags: u16, rate: u32, burst: u32) -> u64 {
    let burst = if flags & OFPMF_BURST != 0 { u64::from(burst) } else { 0 };
    (burst + u64::from(rate)) * 1000
}

impl MeterState {
    fn new(config: Meter, created: Instant, now_ns: u64) -> MeterState {
        let tokens = config.bands.iter().map(|b| capacity(config.flags, b.rate, b.burst_size)).collect();
        let n = config.bands.len();
        MeterState {
            config,
            created,
            buckets: Mutex::new(Buckets { last_ns: now_ns, tokens }),
            packets: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            band_packets: (0..n).map(|_| AtomicU64::new(0)).collect(),
            band_bytes: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// One packet of `len` bytes at `now_ns`: does it pass?
    fn admit(&self, len: usize, now_ns: u64) -> bool {
        self.packets.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(len as u64, Ordering::Relaxed);
        let kbps = self.config.flags & OFPMF_PKTPS == 0;
        let cost = if kbps { len as u64 * 8 } else { 1000 };
        let mut applies: Option<usize> = None;
        {
            let mut b = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
            let elapsed = now_ns.saturating_sub(b.last_ns);
            b.last_ns = b.last_ns.max(now_ns);
            for (i, band) in self.config.bands.iter().enumerate() {
                let cap = capacity(self.config.flags, band.rate, band.burst_size);
                // `rate` units per millisecond (module docs).
                let gained = (u128::from(elapsed) * u128::from(band.rate) / 1_000_000).min(u128::from(cap)) as u64;
                let t = &mut b.tokens[i];
                *t = (*t + gained).min(cap);
                if *t >= cost {
                    *t -= cost;
                } else if applies.is_none_or(|j| self.config.bands[j].rate < band.rate) {
                    applies = Some(i);
                }
            }
        }
        match applies {
            Some(i) if self.config.bands[i].kind == OFPMBT_DROP => {
                self.band_packets[i].fetch_add(1, Ordering::Relaxed);
                self.band_bytes[i].fetch_add(len as u64, Ordering::Relaxed);
                false
            }
            _ => true,
        }
    }
}

/// The switch's meters (module docs). The PMDs read it without a lock; changes are serialised.
pub struct MeterTable {
    meters: ArcSwap<HashMap<u32, Arc<MeterState>>>,
    change: Mutex<()>,
    clock: Instant,
}

impl Default for MeterTable {
    fn default() -> Self {
        MeterTable::new()
    }
}

/// Why a METER_MOD (or a flow naming a meter) is refused: the error and what to log.
pub type Refusal = (OfError, String);

impl MeterTable {
    pub fn new() -> MeterTable {
        MeterTable { meters: ArcSwap::from_pointee(HashMap::new()), change: Mutex::new(()), clock: Instant::now() }
    }

    fn now_ns(&self) -> u64 {
        self.clock.elapsed().as_nanos() as u64
    }

    /// Does meter `id` exist?
    pub fn contains(&self, id: u32) -> bool {
        self.meters.load().contains_key(&id)
    }

    /// No meter at all (the executor's fast check).
    pub fn is_empty(&self) -> bool {
        self.meters.load().is_empty()
    }

    /// A packet of `len` bytes through meter `id`: true when it passes (a missing meter lets
    /// every packet through).
    pub fn admit(&self, id: u32, len: usize) -> bool {
        let meters = self.meters.load();
        match meters.get(&id) {
            Some(m) => m.admit(len, self.now_ns()),
            None => true,
        }
    }

    /// A packet-in of `len` bytes through the controller meter, if there is one.
    pub fn admit_packet_in(&self, len: usize) -> bool {
        self.admit(OFPM_CONTROLLER, len)
    }

    /// Applies a METER_MOD (module docs: OVS's errors). Returns the ids of the meters a delete
    /// removed (their flows are to be deleted by the caller).
    pub fn apply(&self, mm: &MeterMod) -> Result<Vec<u32>, Refusal> {
        let _serial = self.change.lock().unwrap_or_else(|e| e.into_inner());
        let m = &mm.meter;
        let id_ok = m.id != 0 && (m.id <= OFPM_MAX || m.id == OFPM_SLOWPATH || m.id == OFPM_CONTROLLER);
        let current = self.meters.load_full();
        match mm.command {
            MeterModCommand::Delete => {
                let gone: Vec<u32> = if m.id == OFPM_ALL {
                    current.keys().copied().collect()
                } else if current.contains_key(&m.id) {
                    vec![m.id]
                } else {
                    Vec::new()
                };
                if !gone.is_empty() {
                    let mut next = (*current).clone();
                    for id in &gone {
                        next.remove(id);
                    }
                    self.meters.store(Arc::new(next));
                }
                Ok(gone)
            }
            MeterModCommand::Add | MeterModCommand::Modify => {
                if !id_ok {
                    return Err((OfError::METER_MOD_FAILED_INVALID_METER, format!("meter id {:#x}", m.id)));
                }
                check_config(m)?;
                let old = current.get(&m.id);
                let created = match (mm.command, old) {
                    (MeterModCommand::Add, Some(_)) => {
                        return Err((OfError::METER_MOD_FAILED_METER_EXISTS, format!("meter {} exists", m.id)))
                    }
                    (MeterModCommand::Modify, None) => {
                        return Err((OfError::METER_MOD_FAILED_UNKNOWN_METER, format!("no meter {}", m.id)))
                    }
                    (_, Some(o)) => o.created,
                    (_, None) => Instant::now(),
                };
                if old.is_none() && current.len() >= MAX_METERS as usize {
                    return Err((OfError::METER_MOD_FAILED_OUT_OF_METERS, format!("{MAX_METERS} meters exist")));
                }
                let mut next = (*current).clone();
                next.insert(m.id, Arc::new(MeterState::new(m.clone(), created, self.now_ns())));
                self.meters.store(Arc::new(next));
                Ok(Vec::new())
            }
        }
    }

    /// The configurations of meter `id` (or all, [`OFPM_ALL`]), by id.
    pub fn configs(&self, id: u32) -> Vec<Meter> {
        self.selected(id).into_iter().map(|m| m.config.clone()).collect()
    }

    fn selected(&self, id: u32) -> Vec<Arc<MeterState>> {
        let meters = self.meters.load();
        let sorted: BTreeMap<u32, Arc<MeterState>> =
            meters.iter().filter(|(k, _)| id == OFPM_ALL || **k == id).map(|(k, v)| (*k, v.clone())).collect();
        sorted.into_values().collect()
    }

    /// The statistics of meter `id` (or all), with `flows`: the rules of the table of record
    /// (each meter's flow count).
    pub fn stats<'a>(&self, id: u32, flows: impl Iterator<Item = &'a Rule>) -> Vec<MeterStats> {
        let mut count: HashMap<u32, u32> = HashMap::new();
        for r in flows {
            for m in meters_named(r) {
                *count.entry(m).or_default() += 1;
            }
        }
        self.selected(id)
            .into_iter()
            .map(|m| {
                let age = m.created.elapsed();
                MeterStats {
                    meter_id: m.config.id,
                    flow_count: count.get(&m.config.id).copied().unwrap_or(0),
                    packet_in_count: m.packets.load(Ordering::Relaxed),
                    byte_in_count: m.bytes.load(Ordering::Relaxed),
                    duration_sec: age.as_secs().min(u64::from(u32::MAX)) as u32,
                    duration_nsec: age.subsec_nanos(),
                    bands: m
                        .band_packets
                        .iter()
                        .zip(&m.band_bytes)
                        .map(|(p, b)| (p.load(Ordering::Relaxed), b.load(Ordering::Relaxed)))
                        .collect(),
                }
            })
            .collect()
    }
}

/// A meter's flags and bands, as OVS's userspace datapath checks them (module docs).
fn check_config(m: &Meter) -> Result<(), Refusal> {
    let known = OFPMF_KBPS | OFPMF_PKTPS | OFPMF_BURST | OFPMF_STATS;
    if m.flags & !known != 0 || m.flags & (OFPMF_KBPS | OFPMF_PKTPS) == OFPMF_KBPS | OFPMF_PKTPS {
        return Err((OfError::METER_MOD_FAILED_BAD_FLAGS, format!("meter {}: flags {:#x}", m.id, m.flags)));
    }
    if m.bands.len() > usize::from(MAX_BANDS) {
        return Err((
            OfError::METER_MOD_FAILED_OUT_OF_BANDS,
            format!("meter {}: {} bands (at most {MAX_BANDS})", m.id, m.bands.len()),
        ));
    }
    for b in &m.bands {
        if b.rate == 0 {
            return Err((OfError::METER_MOD_FAILED_BAD_RATE, format!("meter {}: a band of rate 0", m.id)));
        }
        if b.kind != OFPMBT_DROP {
            return Err((
                OfError::METER_MOD_FAILED_BAD_BAND,
                format!("meter {}: band type {} (only drop bands are supported)", m.id, b.kind),
            ));
        }
    }
    Ok(())
}

/// The meters rule `r` names (its `meter` instruction).
pub fn meters_named(r: &Rule) -> impl Iterator<Item = u32> + '_ {
    r.actions.0.iter().filter_map(|a| match a {
        Action::Meter(m) => Some(*m),
        _ => None,
    })
}

/// A flow's `meter:N` must name an existing meter (OVS: `OFPMMFC_INVALID_METER` at FLOW_MOD
/// time).
pub fn check_flow_meters(actions: &[Action], meters: &MeterTable) -> Result<(), Refusal> {
    for a in actions {
        if let Action::Meter(m) = a {
            if !meters.contains(*m) {
                return Err((OfError::METER_MOD_FAILED_INVALID_METER, format!("meter:{m}: no such meter")));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rqvs_openflow::meter::{Band, OFPMBT_DSCP_REMARK};

    fn add(id: u32, flags: u16, bands: Vec<Band>) -> MeterMod {
        MeterMod { command: MeterModCommand::Add, meter: Meter { id, flags, bands } }
    }

    #[test]
    fn errors_as_ovs() {
        let t = MeterTable::new();
        let e = |r: Result<Vec<u32>, Refusal>| r.unwrap_err().0;
        t.apply(&add(1, OFPMF_PKTPS, vec![Band::drop(100, 0)])).unwrap();
        assert_eq!(e(t.apply(&add(1, OFPMF_PKTPS, vec![Band::drop(100, 0)]))), OfError::METER_MOD_FAILED_METER_EXISTS);
        let dscp = Band { kind: OFPMBT_DSCP_REMARK, rate: 5, burst_size: 0, prec_level: 1, experimenter: 0 };
        assert_eq!(e(t.apply(&add(2, OFPMF_KBPS, vec![dscp]))), OfError::METER_MOD_FAILED_BAD_BAND);
        assert_eq!(e(t.apply(&add(2, OFPMF_KBPS | OFPMF_PKTPS, vec![]))), OfError::METER_MOD_FAILED_BAD_FLAGS);
        assert_eq!(e(t.apply(&add(2, 0x10, vec![]))), OfError::METER_MOD_FAILED_BAD_FLAGS);
        assert_eq!(e(t.apply(&add(2, OFPMF_KBPS, vec![Band::drop(0, 0)]))), OfError::METER_MOD_FAILED_BAD_RATE);
        assert_eq!(e(t.apply(&add(2, OFPMF_KBPS, vec![Band::drop(1, 0); 9]))), OfError::METER_MOD_FAILED_OUT_OF_BANDS);
        assert_eq!(e(t.apply(&add(0, OFPMF_KBPS, vec![]))), OfError::METER_MOD_FAILED_INVALID_METER);
        assert_eq!(e(t.apply(&add(OFPM_ALL, OFPMF_KBPS, vec![]))), OfError::METER_MOD_FAILED_INVALID_METER);
        assert_eq!(e(t.apply(&add(OFPM_MAX + 1, OFPMF_KBPS, vec![]))), OfError::METER_MOD_FAILED_INVALID_METER);
        let modify = MeterMod { command: MeterModCommand::Modify, ..add(9, OFPMF_KBPS, vec![Band::drop(1, 0)]) };
        assert_eq!(e(t.apply(&modify)), OfError::METER_MOD_FAILED_UNKNOWN_METER);
        t.apply(&add(OFPM_CONTROLLER, OFPMF_PKTPS, vec![Band::drop(10, 0)])).unwrap();
        // Nothing of that changed the table.
        assert_eq!(t.configs(OFPM_ALL).iter().map(|m| m.id).collect::<Vec<_>>(), [1, OFPM_CONTROLLER]);
        let del = |id| MeterMod { command: MeterModCommand::Delete, meter: Meter { id, flags: 0, bands: vec![] } };
        assert_eq!(t.apply(&del(77)).unwrap(), Vec::<u32>::new());
        assert_eq!(t.apply(&del(OFPM_ALL)).unwrap().len(), 2);
        assert!(t.is_empty());
        assert!(check_flow_meters(&[Action::Meter(1)], &t).is_err());
    }

    #[test]
    fn a_pktps_drop_band_holds_a_flood_to_its_burst_then_its_rate() {
        let t = MeterTable::new();
        t.apply(&add(1, OFPMF_PKTPS | OFPMF_BURST, vec![Band::drop(100, 10)])).unwrap();
        let m = t.meters.load().get(&1).unwrap().clone();
        let t0 = m.buckets.lock().unwrap().last_ns;
        // At one instant: the full bucket (burst 10 + one second of rate, 100) passes 110.
        let passed = (0..1000).filter(|_| m.admit(60, t0)).count();
        assert_eq!(passed, 110);
        // 50 ms later: 5 more.
        let passed = (0..1000).filter(|_| m.admit(60, t0 + 50_000_000)).count();
        assert_eq!(passed, 5);
        let s = t.stats(1, std::iter::empty());
        assert_eq!(s[0].packet_in_count, 2000);
        assert_eq!(s[0].bands, vec![(2000 - 115, (2000 - 115) * 60)]);
    }

    #[test]
    fn a_kbps_band_counts_bits_and_the_highest_rate_band_that_applies_drops() {
        let t = MeterTable::new();
        t.apply(&add(1, OFPMF_KBPS, vec![Band::drop(8, 0), Band::drop(16, 0)])).unwrap();
        let m = t.meters.load().get(&1).unwrap().clone();
        // Band 0 holds 8000 bits (8 packets of 125 bytes), band 1 16000 (16 packets).
        let passed = (0..20).filter(|_| m.admit(125, 0)).count();
        // Packets 9..16 exceed band 0 only: it drops them; 17.. exceed both: band 1 drops.
        assert_eq!(passed, 8);
        let s = t.stats(1, std::iter::empty());
        assert_eq!(s[0].bands, vec![(8, 1000), (4, 500)]);
    }
}
