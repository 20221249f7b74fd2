//! `rqvs bench openflow`: rule updates through the OpenFlow channel into a running switch while
//! traffic flows — the paper's update experiments (Fig. 15–17) as a controller would make them.
//!
//! **Setup.** The OpenFlow table is a ClassBench set converted to OpenFlow flows
//! (`rqvs_flow::convert`), each flow's actions `mod_dl_dst:TAG(i), output:2`, so every frame
//! leaving the switch names the flow that decided it. A share of the flows (`flux`, at least the
//! bundle's size) is held out: the switch starts with the others (the **stable** flows). Port 1
//! is an in-memory `pcap-in` port delivering the trace's frames in a loop, as fast as the PMDs
//! take them; port 2 is a tap ([`rqvs_ports::open_tap`]) that checks every frame on the PMD thread.
//! Only frames whose key some stable flow matches are sent, so every frame must leave on port 2.
//!
//! **The stream.** A client on loopback speaks OpenFlow 1.4 to the switch's `ptcp:` listener:
//! it adds every held-out flow (FLOW_MOD add), then deletes each again (delete_strict), and so
//! on, a BARRIER_REQUEST every `barrier_every` flow-mods, pipelined (the client does not wait
//! for a barrier before sending on; TCP's flow control bounds what is in flight). The rate is the
//! flow-mods sent over the time from the first byte to the last BARRIER_REPLY: every flow-mod
//! is then applied and visible to the datapath. The stream ends with the held-out flows deleted.
//!
//! **The bundle** (`bundle > 0`): then `bundle` held-out flows in one OpenFlow 1.4 bundle
//! (OPEN, ADD_MESSAGE each, COMMIT); the commit time is from sending the COMMIT_REQUEST to its
//! reply, and the visible time from sending it to the first frame the tap sees decided by a flow
//! of the bundle (the data plane's own evidence). Frames per 10 ms are kept for the timeline.
//!
//! **Checking every frame** (mismatches, printed next to every rate). While the table is known
//! (before the stream, after it settled, after the bundle settled) a frame's flow must be the
//! reference winner of its key in that table, exactly. While flow-mods are being applied, the
//! table is one of the stable flows plus some subset of the held-out ones, so a frame's flow
//! must be the stable winner or a held-out flow that matches the key and outranks it — a
//! necessary condition (a held-out flow already deleted again is not caught in that window; the
//! exact checks before and after are). A frame dropped (the switch's `dropped` counter), an
//! untagged or unparsable frame, and a flow-mod answered with an ERROR are mismatches too.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rqvs_classify::ClassifierKind;
use rqvs_datapath::DesignKind;
use rqvs_flow::frame::{build_frame, extract_datapath};
use rqvs_flow::{Action, Actions, FlowKey, Rule, RuleId};
use rqvs_openflow::bundle::{self, BundleAdd, BundleControl};
use rqvs_openflow::flow_mod::{FlowMod, FlowModCommand};
use rqvs_openflow::message::{kind, Hello};
use rqvs_openflow::{encode, Message, OFP14};
use serde::Serialize;

use crate::openflow::{Channel, ChannelConfig, OpenflowListener};
use crate::{err, Error, PortSource, Switch, SwitchConfig};

/// What to run.
pub struct BenchSetup {
    pub design: DesignKind,
    /// The OpenFlow flows (ids 0.. in order; 16-bit priorities), actions are replaced.
    pub flows: Vec<Rule>,
    /// The traffic's keys, in order.
    pub keys: Vec<FlowKey>,
    /// Share of the flows held out and streamed.
    pub flux: f64,
    /// Flow-mods in the stream (rounded up to whole add and delete passes over the held-out
    /// flows, an even number of them).
    pub flow_mods: usize,
    pub barrier_every: usize,
    /// Flows in the bundle (0: no bundle).
    pub bundle: usize,
    pub pmds: usize,
    pub seed: u64,
}

/// What it measured.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub design: &'static str,
    pub flows: usize,
    pub held_out: usize,
    pub pmds: usize,
    pub flow_mods: usize,
    pub stream_s: f64,
    pub flow_mods_per_s: f64,
    pub errors: u64,
    /// Frames checked (and of them, mismatches) in each window.
    pub frames_exact: u64,
    pub frames_during: u64,
    pub mismatches: u64,
    pub dropped: u64,
    /// Frames per second through the switch during the stream.
    pub pps_during_stream: f64,
    /// CFLOWS/CCACHE coverage at the end of the stream (after it settled), when the design has one.
    pub coverage_after_stream: Option<f64>,
    /// CPU time per flow-mod of the switch's update threads over the stream, in µs: the
    /// OpenFlow connections' (`ofN`) and the CFLOWS manager's (`None` without one, or where
    /// `/proc` does not tell: [`threads_cpu_s`]). The rate is bounded by the two when they share
    /// a core (a busy-polling PMD on the other), and they do not swing with the host's load as
    /// the rate does.
    pub connection_cpu_us: Option<f64>,
    pub manager_cpu_us: Option<f64>,
    pub bundle: Option<BundleReport>,
}

/// The bundle's figures.
#[derive(Clone, Debug, Serialize)]
pub struct BundleReport {
    pub flows: usize,
    /// Sending the BUNDLE_ADD_MESSAGEs (before the commit).
    pub send_s: f64,
    pub commit_s: f64,
    /// From the COMMIT_REQUEST to the first frame decided by a flow of the bundle.
    pub visible_s: Option<f64>,
    /// Frames per 10 ms from 1 s before the commit to 2 s after it.
    pub timeline_10ms: Vec<u64>,
    pub coverage_after: Option<f64>,
}

/// The tag `mod_dl_dst` writes for flow `i`: a locally administered address holding `i`.
fn tag(i: u32) -> [u8; 6] {
    let b = i.to_be_bytes();
    [0x02, 0x71, b[0], b[1], b[2], b[3]]
}

fn untag(mac: [u8; 6]) -> Option<u32> {
    (mac[0] == 0x02 && mac[1] == 0x71).then(|| u32::from_be_bytes([mac[2], mac[3], mac[4], mac[5]]))
}

/// A frame's key as the tap compares it: what the switch extracts at port 1, `dl_dst` cleared.
fn tap_key(frame: &[u8]) -> Option<FlowKey> {
    let mut k = extract_datapath(frame, 1)?;
    k.dl_dst = [0; 6];
    Some(k)
}

/// Windows of the check (module docs).
const EXACT_STABLE: u8 = 0;
const DURING: u8 = 1;
const EXACT_BUNDLE: u8 = 2;

const TIMELINE: usize = 100 * 600;

/// What the tap knows and counts.
struct Oracle {
    flows: Vec<Rule>,
    held: Vec<bool>,
    in_bundle: Vec<bool>,
    /// Key → (winner among the stable flows, winner among stable + bundle).
    winners: HashMap<FlowKey, (u32, u32)>,
    window: AtomicU8,
    exact: AtomicU64,
    during: AtomicU64,
    mismatches: AtomicU64,
    /// Nanoseconds since `t0` of the first frame decided by a bundle flow (0: none yet).
    first_bundle_ns: AtomicU64,
    t0: Instant,
    timeline: Vec<AtomicU64>,
}

impl Oracle {
    fn check(&self, frame: &[u8]) {
        let ns = self.t0.elapsed().as_nanos() as u64;
        if let Some(slot) = self.timeline.get((ns / 10_000_000) as usize) {
            slot.fetch_add(1, Ordering::Relaxed);
        }
        let dst: Option<[u8; 6]> = frame.get(..6).and_then(|d| d.try_into().ok());
        let (Some(flow), Some(key)) = (dst.and_then(untag), tap_key(frame)) else {
            self.mismatches.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let Some(&(stable, with_bundle)) = self.winners.get(&key) else {
            self.mismatches.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if self.in_bundle.get(flow as usize).copied().unwrap_or(false) {
            let _ = self.first_bundle_ns.compare_exchange(0, ns.max(1), Ordering::Relaxed, Ordering::Relaxed);
        }
        let ok = match self.window.load(Ordering::Relaxed) {
            EXACT_STABLE => {
                self.exact.fetch_add(1, Ordering::Relaxed);
                flow == stable
            }
            EXACT_BUNDLE => {
                self.exact.fetch_add(1, Ordering::Relaxed);
                flow == with_bundle
            }
            _ => {
                self.during.fetch_add(1, Ordering::Relaxed);
                flow == stable
                    || (self.held.get(flow as usize).copied().unwrap_or(false)
                        && self.flows[flow as usize].matches.matches(&key)
                        && self.flows[flow as usize].rank() < self.flows[stable as usize].rank())
            }
        };
        if !ok {
            self.mismatches.fetch_add(1, Ordering::Relaxed);
            if std::env::var_os("RQVS_BENCH_DEBUG").is_some() {
                crate::diag!(
                    "mismatch window {} flow {flow} stable {stable} with_bundle {with_bundle} held {} at_ms {} key {key:?}",
                    self.window.load(Ordering::Relaxed),
                    self.held.get(flow as usize).copied().unwrap_or(false),
                    ns / 1_000_000
                );
            }
        }
    }
}

/// Runs the benchmark (module docs). `progress` hears each phase.
pub fn run(setup: &BenchSetup, progress: &mut dyn FnMut(&str)) -> Result<BenchReport, Error> {
    let n = setup.flows.len();
    if n < 2 {
        return Err(err("bench openflow: at least two flows are needed"));
    }
    let mut flows = setup.flows.clone();
    for (i, f) in flows.iter_mut().enumerate() {
        f.id = RuleId(i as u32);
        f.actions = Actions(vec![Action::SetDlDst(tag(i as u32)), Action::Output(2)]);
    }
    // The held-out flows: a seeded choice, at least the bundle's size, never all.
    let want = ((n as f64 * setup.flux).round() as usize).max(setup.bundle).clamp(1, n - 1);
    let mut order: Vec<u32> = (0..n as u32).collect();
    let mut s = setup.seed | 1;
    for i in (1..order.len()).rev() {
        order.swap(i, (crate::xorshift(&mut s) % (i as u64 + 1)) as usize);
    }
    let mut held = vec![false; n];
    let held_ids: Vec<u32> = order[..want].to_vec();
    for &i in &held_ids {
        held[i as usize] = true;
    }
    let bundle_ids: Vec<u32> = held_ids[..setup.bundle.min(want)].to_vec();
    let mut in_bundle = vec![false; n];
    for &i in &bundle_ids {
        in_bundle[i as usize] = true;
    }
    let stable: Vec<Rule> = flows.iter().filter(|f| !held[f.id.0 as usize]).cloned().collect();

    progress("reference winners");
    let with_bundle: Vec<Rule> =
        flows.iter().filter(|f| !held[f.id.0 as usize] || in_bundle[f.id.0 as usize]).cloned().collect();
    let by_stable = rqvs_classify::build(ClassifierKind::Tm, &stable).map_err(err)?;
    let by_bundle = rqvs_classify::build(ClassifierKind::Tm, &with_bundle).map_err(err)?;
    let mut winners = HashMap::new();
    let mut frames = Vec::new();
    for k in &setup.keys {
        let frame = build_frame(k);
        let Some(key) = tap_key(&frame) else { continue };
        let (Some(a), Some(b)) = (by_stable.lookup(&key), by_bundle.lookup(&key)) else { continue };
        winners.insert(key, (a.0, b.0));
        frames.push(frame);
    }
    if frames.is_empty() {
        return Err(err("bench openflow: no packet of the trace matches a stable flow"));
    }
    let oracle = Arc::new(Oracle {
        flows: flows.clone(),
        held,
        in_bundle,
        winners,
        window: AtomicU8::new(EXACT_STABLE),
        exact: AtomicU64::new(0),
        during: AtomicU64::new(0),
        mismatches: AtomicU64::new(0),
        first_bundle_ns: AtomicU64::new(0),
        t0: Instant::now(),
        timeline: (0..TIMELINE).map(|_| AtomicU64::new(0)).collect(),
    });

    progress("starting the switch");
    let tap_oracle = oracle.clone();
    let ports = vec![
        PortSource::Frames { name: "trace".into(), frames },
        PortSource::Tap { name: "check".into(), tap: Arc::new(move |f: &[u8]| tap_oracle.check(f)) },
    ];
    let mut cfg = SwitchConfig::new(ports, stable, setup.design);
    cfg.pmds = setup.pmds.max(1);
    cfg.input_loops = u64::MAX;
    let switch = Switch::start(cfg)?;
    let control = switch.control();
    let listener = OpenflowListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))?;
    let addr = listener.local_addr().ok_or_else(|| err("bench openflow: the listener has no address"))?;
    let channel = Channel::start(&control, ChannelConfig { listen: Some(listener), ..ChannelConfig::new() })?;

    let result = (|| {
        let mut c = Client::connect(addr)?;
        std::thread::sleep(Duration::from_millis(500));

        // The stream: add passes and delete passes over the held-out flows.
        let passes = setup.flow_mods.div_ceil(want).max(2).next_multiple_of(2);
        let mut msgs = Vec::with_capacity(passes * want * 96);
        let mut sent = 0usize;
        let mut barriers = 0usize;
        for p in 0..passes {
            let command = if p % 2 == 0 { FlowModCommand::Add } else { FlowModCommand::DeleteStrict };
            for &i in &held_ids {
                for fm in FlowMod::from_rule(&flows[i as usize], command).map_err(|e| err(e.to_string()))? {
                    msgs.extend(encode(OFP14, sent as u32, &Message::FlowMod(fm)).map_err(|e| err(e.to_string()))?);
                    sent += 1;
                    if sent.is_multiple_of(setup.barrier_every.max(1)) {
                        msgs.extend(encode(OFP14, u32::MAX, &Message::BarrierRequest).map_err(|e| err(e.to_string()))?);
                        barriers += 1;
                    }
                }
            }
        }
        msgs.extend(encode(OFP14, u32::MAX, &Message::BarrierRequest).map_err(|e| err(e.to_string()))?);
        barriers += 1;
        progress(&format!("streaming {sent} flow-mods"));
        let before = frames_out(&control);
        oracle.window.store(DURING, Ordering::Relaxed);
        let cpu0 = threads_cpu_s();
        let t = Instant::now();
        let errors = c.send_and_wait(&msgs, barriers)?;
        let stream_s = t.elapsed().as_secs_f64();
        let cpu = cpu0.zip(threads_cpu_s()).map(|(a, b)| (b.0 - a.0, b.1 - a.1));
        let pps = (frames_out(&control) - before) as f64 / stream_s;
        std::thread::sleep(Duration::from_millis(100));
        oracle.window.store(EXACT_STABLE, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(400));
        let coverage_after_stream = coverage(&control);

        let bundle = if bundle_ids.is_empty() {
            None
        } else {
            progress(&format!("bundle of {}", bundle_ids.len()));
            oracle.window.store(DURING, Ordering::Relaxed);
            let mut adds = Vec::new();
            let id = 7;
            let open =
                BundleControl { bundle_id: id, kind: bundle::OPEN_REQUEST, flags: bundle::ATOMIC, properties: vec![] };
            adds.extend(encode(OFP14, 1, &Message::BundleControl(open)).map_err(|e| err(e.to_string()))?);
            for &i in &bundle_ids {
                for fm in FlowMod::from_rule(&flows[i as usize], FlowModCommand::Add).map_err(|e| err(e.to_string()))? {
                    let inner = encode(OFP14, 2, &Message::FlowMod(fm)).map_err(|e| err(e.to_string()))?;
                    let add = BundleAdd { bundle_id: id, flags: bundle::ATOMIC, message: inner, properties: vec![] };
                    adds.extend(encode(OFP14, 2, &Message::BundleAdd(add)).map_err(|e| err(e.to_string()))?);
                }
            }
            adds.extend(encode(OFP14, u32::MAX, &Message::BarrierRequest).map_err(|e| err(e.to_string()))?);
            let t = Instant::now();
            let mut errors_b = c.send_and_wait(&adds, 1)?;
            let send_s = t.elapsed().as_secs_f64();
            let commit = BundleControl {
                bundle_id: id,
                kind: bundle::COMMIT_REQUEST,
                flags: bundle::ATOMIC,
                properties: vec![],
            };
            let commit = encode(OFP14, 3, &Message::BundleControl(commit)).map_err(|e| err(e.to_string()))?;
            // Held-out flows decided frames during the stream: only what follows counts.
            oracle.first_bundle_ns.store(0, Ordering::Relaxed);
            let at = oracle.t0.elapsed().as_nanos() as u64;
            let t = Instant::now();
            errors_b += c.send_and_wait_reply(&commit, kind::BUNDLE_CONTROL)?;
            let commit_s = t.elapsed().as_secs_f64();
            // Visible: wait (up to 5 s) for the data plane's evidence.
            let deadline = Instant::now() + Duration::from_secs(5);
            while oracle.first_bundle_ns.load(Ordering::Relaxed) == 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            let first = oracle.first_bundle_ns.load(Ordering::Relaxed);
            if first > 0 && first < at {
                // A bundled flow decided a frame before the commit was even sent: not atomic.
                oracle.mismatches.fetch_add(1, Ordering::Relaxed);
            }
            let visible_s = (first > 0).then(|| first.saturating_sub(at) as f64 / 1e9);
            std::thread::sleep(Duration::from_millis(100));
            oracle.window.store(EXACT_BUNDLE, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(2000));
            let from = (at / 10_000_000).saturating_sub(100) as usize;
            let timeline_10ms = oracle.timeline[from.min(TIMELINE)..(from + 300).min(TIMELINE)]
                .iter()
                .map(|a| a.load(Ordering::Relaxed))
                .collect();
            if errors_b > 0 {
                return Err(err(format!(
                    "bench openflow: the switch answered {errors_b} bundle messages with an ERROR"
                )));
            }
            Some(BundleReport {
                flows: bundle_ids.len(),
                send_s,
                commit_s,
                visible_s,
                timeline_10ms,
                coverage_after: coverage(&control),
            })
        };
        Ok((sent, stream_s, pps, errors, coverage_after_stream, bundle, cpu))
    })();
    control.request_stop();
    channel.join();
    let fin = switch.stop()?;
    let (flow_mods, stream_s, pps, errors, coverage_after_stream, bundle, cpu) = result?;
    let per_mod = |s: f64| s / flow_mods.max(1) as f64 * 1e6;
    let dropped = fin.total.dropped;
    Ok(BenchReport {
        design: setup.design.name(),
        flows: n,
        held_out: want,
        pmds: setup.pmds.max(1),
        flow_mods,
        stream_s,
        flow_mods_per_s: flow_mods as f64 / stream_s,
        errors,
        frames_exact: oracle.exact.load(Ordering::Relaxed),
        frames_during: oracle.during.load(Ordering::Relaxed),
        mismatches: oracle.mismatches.load(Ordering::Relaxed) + dropped + errors,
        dropped,
        pps_during_stream: pps,
        coverage_after_stream,
        connection_cpu_us: cpu.map(|c| per_mod(c.0)),
        manager_cpu_us: cpu.filter(|c| c.1 > 0.0).map(|c| per_mod(c.1)),
        bundle,
    })
}

/// CPU seconds (user and system) used so far by this process's OpenFlow connection threads
/// (`of1`, `of2`, …) and by its CFLOWS manager (`cflows-manager`), from
/// `/proc/self/task/*/stat` (in the kernel's 1/100 s ticks: ±0.01 s per thread); `None` where
/// there is no such file to read (not Linux). A thread that ended is no longer counted, so
/// a difference is meant for threads that live across it (the benchmark's one connection).
pub fn threads_cpu_s() -> Option<(f64, f64)> {
    let mut sums = (0u64, 0u64);
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { continue };
        let Some((name, ticks)) = thread_ticks(&stat) else { continue };
        let connection =
            name.strip_prefix("of").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if connection {
            sums.0 += ticks;
        } else if name == "cflows-manager" {
            sums.1 += ticks;
        }
    }
    Some((sums.0 as f64 / 100.0, sums.1 as f64 / 100.0))
}

/// A thread's name and its user + system time in ticks, from its `stat` line (`pid (name) state
/// ppid …`: fields 14 and 15; the name may hold spaces and parentheses, so it ends at the
/// last `)`).
fn thread_ticks(stat: &str) -> Option<(&str, u64)> {
    let (open, close) = (stat.find('(')?, stat.rfind(')')?);
    let name = stat.get(open + 1..close)?;
    let mut rest = stat.get(close + 1..)?.split_ascii_whitespace();
    let utime: u64 = rest.nth(11)?.parse().ok()?;
    let stime: u64 = rest.next()?.parse().ok()?;
    Some((name, utime + stime))
}

/// Frames the PMDs have forwarded so far.
fn frames_out(control: &crate::Control) -> u64 {
    control.pmd_stats().iter().map(|p| p.total.forwarded).sum()
}

/// The mean coverage over the PMDs, when the design has one.
fn coverage(control: &crate::Control) -> Option<f64> {
    let c: Vec<f64> = control.pmd_stats().iter().filter_map(|p| p.datapath.coverage).collect();
    (!c.is_empty()).then(|| c.iter().sum::<f64>() / c.len() as f64)
}

/// The benchmark's OpenFlow client: a blocking TCP connection, after HELLO.
struct Client {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    fn connect(addr: SocketAddr) -> Result<Client, Error> {
        let s = TcpStream::connect(addr).map_err(|e| err(format!("bench openflow: connect {addr}: {e}")))?;
        let _ = s.set_nodelay(true);
        let _ = s.set_read_timeout(Some(Duration::from_secs(60)));
        let mut c = Client { s, buf: Vec::new() };
        let hello =
            encode(OFP14, 0, &Message::Hello(Hello::with_versions(&[OFP14]))).map_err(|e| err(e.to_string()))?;
        c.s.write_all(&hello).map_err(|e| err(format!("bench openflow: {e}")))?;
        while c.next()?.1 != kind::HELLO {}
        Ok(c)
    }

    /// The next whole message: (bytes, type).
    fn next(&mut self) -> Result<(Vec<u8>, u8), Error> {
        let mut chunk = [0u8; 65536];
        loop {
            if self.buf.len() >= 8 {
                let len = usize::from(u16::from_be_bytes([self.buf[2], self.buf[3]])).max(8);
                if self.buf.len() >= len {
                    let m: Vec<u8> = self.buf.drain(..len).collect();
                    let t = m[1];
                    return Ok((m, t));
                }
            }
            match self.s.read(&mut chunk) {
                Ok(0) => return Err(err("bench openflow: the switch closed the connection")),
                Ok(k) => self.buf.extend_from_slice(&chunk[..k]),
                Err(e) => return Err(err(format!("bench openflow: reading: {e}"))),
            }
        }
    }

    /// Writes `msgs` (on a second thread, so replies are read meanwhile) and waits for
    /// `barriers` BARRIER_REPLYs; returns the ERRORs received.
    fn send_and_wait(&mut self, msgs: &[u8], barriers: usize) -> Result<u64, Error> {
        let mut w = self.s.try_clone().map_err(|e| err(format!("bench openflow: {e}")))?;
        let bytes = msgs.to_vec();
        let writer = std::thread::spawn(move || w.write_all(&bytes));
        let mut errors = 0;
        let mut seen = 0;
        while seen < barriers {
            match self.next()?.1 {
                kind::BARRIER_REPLY => seen += 1,
                kind::ERROR => errors += 1,
                _ => {}
            }
        }
        writer
            .join()
            .map_err(|_| err("bench openflow: the writer thread panicked"))?
            .map_err(|e| err(format!("bench openflow: writing: {e}")))?;
        Ok(errors)
    }

    /// Writes one message and waits for the reply of type `reply`; returns the ERRORs
    /// received (an ERROR also ends the wait).
    fn send_and_wait_reply(&mut self, msg: &[u8], reply: u8) -> Result<u64, Error> {
        self.s.write_all(msg).map_err(|e| err(format!("bench openflow: {e}")))?;
        loop {
            match self.next()?.1 {
                kind::ERROR => return Ok(1),
                t if t == reply => return Ok(0),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_its_name_and_ticks() {
        let stat = "4242 (of (1) x) S 1 4242 4242 0 -1 4194368 120 0 0 0 731 58 0 0 20 0 9 0 77 0 0";
        assert_eq!(thread_ticks(stat), Some(("of (1) x", 789)));
        assert_eq!(thread_ticks("4242 (of1) S 1"), None, "cut short: no figure, no panic");
        assert_eq!(thread_ticks("no parentheses"), None);
    }

    /// A thread named as a connection is counted, and only as one: its CPU shows in the first
    /// sum (it spins until it does, or 20 s pass), the manager's stays as it was.
    #[test]
    fn a_connection_threads_cpu_is_counted() {
        let (c0, m0) = threads_cpu_s().expect("Linux: /proc/self/task");
        let spin = std::thread::Builder::new()
            .name("of97".into())
            .spawn(move || {
                let t = Instant::now();
                let mut x = 0u64;
                while threads_cpu_s().unwrap().0 < c0 + 0.05 && t.elapsed() < Duration::from_secs(20) {
                    for i in 0..100_000u64 {
                        x = x.wrapping_mul(31).wrapping_add(i);
                    }
                    std::hint::black_box(x);
                }
                threads_cpu_s().unwrap()
            })
            .unwrap();
        let (c1, m1) = spin.join().unwrap();
        assert!(c1 >= c0 + 0.05, "{c0} -> {c1}");
        assert_eq!(m1, m0);
    }
}
