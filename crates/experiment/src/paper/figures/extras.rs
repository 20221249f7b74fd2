//! Tables beyond the NSDI'22 paper's figures: seed 004's coflowiness table (flow prediction for
//! coflows, `rqvs coflows`), and rqvs's fidelity against real Open vSwitch.

use std::path::{Path, PathBuf};
use std::process::Command;

use rqvs_classify::Reference;
use rqvs_datapath::Clock;
use rqvs_workload::coflow::{self, Params, SizeDist};

use serde::{Deserialize, Serialize};

use super::{claim, cols, pct};
use crate::coflows::{self as study, PredictMode, RunResult, StudyConfig};
use crate::paper::cells::Unit;
use crate::paper::{Claim, Ctx, Figure, Mode, Panel};
use crate::Error;

/// Seed 004's coflowiness table: for each flow-size distribution and coflowiness, the coflow
/// workload replayed in time order with no prediction, the online predictor, the oracle and
/// the study's preloading; the study's finding (preloading 25% of the flows) checked.
pub fn coflows(ctx: &Ctx) -> Result<Figure, Error> {
    let mut f = ctx.figure("coflows");
    let xs: Vec<f64> = match ctx.cfg.mode {
        Mode::Quick => vec![0.0, 0.25, 1.0],
        Mode::Full => vec![0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0],
    };
    f.header = cols(
        "workload | coflowiness | predict | upcalls | first assoc. packet mean (µs) | handler CPU \
         | mean latency (µs) | p99 (µs) | predicted | used | wasted ratio",
    );
    let cfg = StudyConfig { emc_prob: 0.01, seed: 1, verify: 10_000, predictor: Default::default() };
    let xs_arg = xs.iter().map(f64::to_string).collect::<Vec<_>>().join(",");
    for dist in [SizeDist::Hadoop, SizeDist::Rpc] {
        let key = format!("rqvs coflows --dist {} --coflowiness {xs_arg} (calibrated)", dist.name());
        let c: CoflowsCell = ctx.cell("coflows", dist.name(), &key, || coflows_dist(dist, &xs, &cfg))?;
        f.rows.extend(c.rows);
        f.panels.extend(c.panel);
        f.commands.extend(c.commands);
        f.claims.extend(c.claims);
        f.verified += c.verified;
        f.mismatches += c.mismatches;
    }
    f.notes.push(
        "The coflow workload of docs/coflows.md (FB Hadoop: 1,000 coflows; Google Search RPC: 20,000), replayed \
         in time order through the two-core latency model with calibrated costs (one timed replay without \
         prediction; every run then uses those fixed costs); 10,000 packets per run checked against the \
         reference. The study preloaded the megaflows and measured on a real host (mean latency, total CPU); \
         rqvs reports the modelled latency and the handler's CPU. docs/coflows.md discusses the differences."
            .into(),
    );
    Ok(f)
}

/// One workload's rows of [`coflows`] (a cell): calibrated, then replayed at every
/// coflowiness `xs` with each prediction mode.
fn coflows_dist(dist: SizeDist, xs: &[f64], cfg: &StudyConfig) -> Result<CoflowsCell, Error> {
    let mut f = CoflowsCell::default();
    let xs_arg = xs.iter().map(f64::to_string).collect::<Vec<_>>().join(",");
    let modes = [PredictMode::Off, PredictMode::Online, PredictMode::Oracle, PredictMode::Preload];
    let coflows = match dist {
        SizeDist::Hadoop => 1_000,
        SizeDist::Rpc => 20_000,
    };
    let params = |x: f64| Params::new(dist, coflows, x, 1);
    let reference = Reference::build(&coflow::rules(&params(xs[0])))?;
    let first = coflow::generate(&params(xs[0])).map_err(Error)?;
    let (clock, _, _) = study::calibrate(&study::prepare(&first, &reference, cfg), cfg)?;
    let mut runs: Vec<RunResult> = Vec::new();
    for &x in xs {
        let w = coflow::generate(&params(x)).map_err(Error)?;
        let p = study::prepare(&w, &reference, cfg);
        for m in modes {
            runs.push(study::run(&p, m, cfg, clock, None)?);
        }
    }
    let mut panel = Panel::new("coflowiness", &format!("{}: mean latency (µs)", dist.name()));
    for r in &runs {
        f.verified += r.verified as u64;
        f.mismatches += r.mismatches as u64;
        let (made, used, _) = r.made_used_wasted();
        panel.point(r.mode.name(), r.x, r.all.mean_us);
        f.rows.push(vec![
            dist.name().into(),
            r.x.to_string(),
            r.mode.name().into(),
            r.upcalls.to_string(),
            format!("{:.2}", r.first_assoc.mean_us),
            pct(r.handler_share()),
            format!("{:.3}", r.all.mean_us),
            format!("{:.1}", r.p99_us),
            made.to_string(),
            used.to_string(),
            if made == 0 { "–".into() } else { pct(r.wasted_ratio()) },
        ]);
    }
    f.panel = Some(panel);
    let cost = match clock {
        Clock::Virtual { packet_ns, upcall_ns } => format!(" --cost virtual:{packet_ns},{upcall_ns}"),
        _ => String::new(),
    };
    f.commands.push(format!("rqvs coflows --dist {} --coflowiness {xs_arg}", dist.name()));
    f.commands.push(format!(
        "rqvs coflows --dist {} --coflowiness {xs_arg}{cost}   # the same table exactly: the costs this run calibrated",
        dist.name()
    ));
    if dist == SizeDist::Hadoop {
        let find = |m: PredictMode| runs.iter().find(|r| r.x == 0.25 && r.mode == m);
        if let (Some(off), Some(pre)) = (find(PredictMode::Off), find(PredictMode::Preload)) {
            let (dl, dc) = study::change(off, pre);
            f.claims.push(claim(
                "preloading 25% of the flows (FB Hadoop, coflowiness 0.25) cuts mean latency (holds: at least half the study's cut)",
                "−24%",
                format!("{dl:+.1}%"),
                Some(dl <= -12.0),
            ));
            f.claims.push(claim(
                "and CPU (the study's: the machine's; rqvs's: the handler's; holds: at least half the study's cut)",
                "−12%",
                format!("{dc:+.1}%"),
                Some(dc <= -6.0),
            ));
        }
        if let (Some(off), Some(on)) = (
            runs.iter().find(|r| r.x == 1.0 && r.mode == PredictMode::Off),
            runs.iter().find(|r| r.x == 1.0 && r.mode == PredictMode::Online),
        ) {
            f.claims.push(claim(
                "an online predictor in the datapath removes upcalls at full coflowiness (FB Hadoop, x = 1; the study measured only an oracle)",
                "— (not measured)",
                format!("{} → {} upcalls", off.upcalls, on.upcalls),
                None,
            ));
        }
    }
    Ok(f)
}

/// A workload's part of [`coflows`]: its rows, plot panel, commands, claims and checks.
#[derive(Default, Serialize, Deserialize)]
struct CoflowsCell {
    rows: Vec<Vec<String>>,
    panel: Option<Panel>,
    commands: Vec<String>,
    claims: Vec<Claim>,
    verified: u64,
    mismatches: u64,
}

pub fn plan_coflows(mode: Mode) -> Vec<Unit> {
    let est = match mode {
        Mode::Quick => 10.0,
        Mode::Full => 60.0,
    };
    [SizeDist::Hadoop, SizeDist::Rpc].iter().map(|d| Unit::new("coflows", d.name(), est)).collect()
}

/// `name` on the `PATH`.
fn on_path(name: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
}

/// The checkout's `scripts/` (from the working directory, else where this crate was built).
fn scripts_dir() -> Option<PathBuf> {
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts");
    [PathBuf::from("scripts"), built].into_iter().find(|d| d.join("ovs_megaflows.py").is_file())
}

/// Runs `cmd`, its stdout on success; the error names `what` and carries stderr's end.
fn output(what: &str, cmd: &mut Command) -> Result<String, Error> {
    let o = cmd.output().map_err(|e| Error(format!("{what}: cannot run: {e}")))?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        return Err(Error(format!(
            "{what}: {} ({})",
            o.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        )));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// The fidelity against real Open vSwitch 3.1 (docs/ovs-fidelity.md). Where OVS's userspace
/// daemons are installed: the megaflows and masks real OVS installs for a set's whole trace
/// (`scripts/ovs_megaflows.py`) beside `rqvs trace`'s, which must be equal. Where Debian's
/// `openvswitch-switch-dpdk` is also installed: the speed table (`scripts/ovs_fidelity_all.sh`,
/// short runs in quick mode). Where OVS is absent the figure is skipped with a message.
pub fn ovs_fidelity(ctx: &Ctx) -> Result<Figure, Error> {
    let mut f = ctx.figure("ovs");
    let missing: Vec<&str> = ["ovs-vswitchd", "ovsdb-server", "ovs-ofctl", "ovs-appctl", "python3"]
        .into_iter()
        .filter(|n| !on_path(n) && !Path::new("/usr/sbin").join(n).is_file())
        .collect();
    let Some(scripts) = scripts_dir() else {
        f.skipped =
            Some("the checkout's scripts/ (ovs_megaflows.py) are not here: run `rqvs paper` from the checkout".into());
        return Ok(f);
    };
    if !missing.is_empty() {
        f.skipped = Some(format!(
            "Open vSwitch is not installed here ({} not found; apt-get install openvswitch-switch)",
            missing.join(", ")
        ));
        return Ok(f);
    }
    let Some(rqvs) = ctx.cfg.rqvs.clone() else {
        f.skipped = Some("no rqvs binary to run the scripts with (the library was called without one)".into());
        return Ok(f);
    };
    let sets = ovs_sets(ctx.cfg.mode);
    let dpdk = std::env::var_os("VSWITCHD")
        .map_or_else(|| PathBuf::from("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"), PathBuf::from);
    let key =
        format!("scripts/ovs_megaflows.py against rqvs trace on {} at 10k; speed: {}", sets.join(","), dpdk.is_file());
    ctx.cell("ovs", "fidelity", &key, || ovs_measure(ctx, f, &sets, &scripts, &rqvs))
}

/// The OVS fidelity figure's sets.
fn ovs_sets(mode: Mode) -> Vec<&'static str> {
    match mode {
        Mode::Quick => vec!["acl1"],
        Mode::Full => vec!["acl1", "fw1", "ipc1"],
    }
}

pub fn plan_ovs_fidelity(mode: Mode) -> Vec<Unit> {
    // Planned only where it runs (the figure is skipped without Open vSwitch).
    let here = ["ovs-vswitchd", "ovsdb-server", "ovs-ofctl", "ovs-appctl", "python3"]
        .into_iter()
        .all(|n| on_path(n) || Path::new("/usr/sbin").join(n).is_file());
    let est = 30.0 * ovs_sets(mode).len() as f64;
    if here && scripts_dir().is_some() {
        vec![Unit::new("ovs", "fidelity", est)]
    } else {
        Vec::new()
    }
}

/// A directory removed with everything in it when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// [`ovs_fidelity`]'s measurement (one cell: the scripts run as a whole).
fn ovs_measure(ctx: &Ctx, mut f: Figure, sets: &[&str], scripts: &Path, rqvs: &Path) -> Result<Figure, Error> {
    // The converted flows and pcaps (tens of MB, regenerable) go to a scratch directory that is
    // removed when the figure is done, also on failure; only the figure is kept.
    let scratch = Scratch(std::env::temp_dir().join(format!("rqvs-paper-ovs-{}", std::process::id())));
    let tmp = &scratch.0;
    std::fs::create_dir_all(tmp).map_err(|e| Error(format!("{}: cannot create: {e}", tmp.display())))?;
    f.header = cols("set | OVS megaflows | rqvs megaflows | OVS masks | rqvs masks | packets");
    let mut equal = true;
    for s in sets {
        let (flows, pcap) = (tmp.join(format!("{s}.ofctl")), tmp.join(format!("{s}.pcap")));
        let (rules, trace) = (ctx.rules(s, "10k"), ctx.trace(s, "10k"));
        output(
            "rqvs convert rules",
            Command::new(rqvs).args(["convert", "rules"]).arg(&rules).args(["--to", "ofctl", "-o"]).arg(&flows),
        )?;
        output(
            "rqvs convert trace",
            Command::new(rqvs).args(["convert", "trace"]).arg(&trace).args(["--to", "pcap", "-o"]).arg(&pcap),
        )?;
        let ovs: serde_json::Value = serde_json::from_str(&output(
            "scripts/ovs_megaflows.py",
            Command::new("python3").arg(scripts.join("ovs_megaflows.py")).arg(&flows).arg(&pcap),
        )?)?;
        let ours: serde_json::Value = serde_json::from_str(&output(
            "rqvs trace",
            Command::new(rqvs).args(["trace", "--rules"]).arg(&flows).arg("--trace").arg(&pcap).args(["--json", "-"]),
        )?)?;
        let n = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or(u64::MAX);
        equal &= n(&ovs, "megaflows") == n(&ours, "megaflows") && n(&ovs, "masks") == n(&ours, "masks");
        equal &= n(&ovs, "lost") == 0;
        f.verified += n(&ours, "packets");
        f.mismatches += n(&ours, "mismatches");
        f.rows.push(vec![
            format!("{s}_10k"),
            n(&ovs, "megaflows").to_string(),
            n(&ours, "megaflows").to_string(),
            n(&ovs, "masks").to_string(),
            n(&ours, "masks").to_string(),
            n(&ours, "packets").to_string(),
        ]);
        f.commands.push(format!(
            "rqvs convert rules {} --to ofctl -o {s}.ofctl && rqvs convert trace {} --to pcap -o {s}.pcap",
            rules.display(),
            trace.display()
        ));
        f.commands.push(format!(
            "scripts/ovs_megaflows.py {s}.ofctl {s}.pcap; rqvs trace --rules {s}.ofctl --trace {s}.pcap --json -"
        ));
    }
    f.claims.push(claim(
        "rqvs's ORIG installs the megaflows and masks real OVS 3.1 installs for the same rules and packets",
        "— (rqvs's own fidelity check)",
        if equal { "equal on every set" } else { "**differ**: see the table" },
        Some(equal),
    ));
    f.notes.push(
        "Real OVS in userspace (netdev-dummy, no kernel module) fed every packet of the trace in order; rqvs \
         trace checks every megaflow hit against the slow path's own verdict (the packets and mismatches \
         counted here)."
            .into(),
    );
    let dpdk = std::env::var_os("VSWITCHD")
        .map_or_else(|| PathBuf::from("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"), PathBuf::from);
    if !dpdk.is_file() {
        f.notes.push(format!(
            "The speed comparison (OVS's DPDK datapath against rqvs replay, docs/ovs-fidelity.md) is skipped: {} is \
             not installed (apt-get install openvswitch-switch-dpdk; then scripts/ovs_fidelity_all.sh).",
            dpdk.display()
        ));
        return Ok(f);
    }
    let (secs, warm) = match ctx.cfg.mode {
        Mode::Quick => ("2", "1"),
        Mode::Full => ("10", "6"),
    };
    let speed = tmp.join("speed");
    let table = output(
        "scripts/ovs_fidelity_all.sh",
        Command::new("bash")
            .arg(scripts.join("ovs_fidelity_all.sh"))
            .arg(&speed)
            .arg(sets.join(" "))
            .env("RQVS", rqvs)
            .env("DATA", &ctx.cfg.data)
            .env("SECS", secs)
            .env("WARM", warm)
            .env("OVS_NICE", "0"),
    )?;
    f.notes
        .push(format!("Speed against OVS's DPDK datapath ({secs} s runs, scripts/ovs_fidelity_table.py):\n\n{table}"));
    f.commands.push(format!("SECS={secs} WARM={warm} scripts/ovs_fidelity_all.sh OUT '{}'", sets.join(" ")));
    Ok(f)
}
