//! `rqvs switch --ovsdb [REMOTE]`: the switch configured by OVSDB as ovs-vswitchd is
//! (`rqvs_switch::vswitchd`; docs/ovs-dropin.md).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use rqvs_flow::formats::{self, RuleFormat};
use rqvs_flow::io::read_text;

use rqvs_ports::{EventHook, PortEvent};
use rqvs_switch::ctl::Listener;
use rqvs_switch::vswitchd::{self, Remote, VswitchdConfig, DEFAULT_REMOTE};
use rqvs_switch::SwitchConfig;

use crate::report::outln;
use crate::switch::Args;
use crate::Failure;

pub fn run(
    a: &Args,
    remote: Option<&str>,
    configure: impl Fn(&mut SwitchConfig, Vec<usize>, EventHook) -> Result<(), Failure>,
) -> Result<(), Failure> {
    // --port, --openflow, --controller, --metrics, --ingress-policing are refused with --ovsdb
    // as usage errors (`switch::unused`).
    let remote = Remote::parse(remote.unwrap_or(DEFAULT_REMOTE))?;
    let rules = match &a.rules {
        // Each bridge's table as OVS makes it (`rqvs_switch::vswitchd::VswitchdConfig::rules`).
        None => Vec::new(),
        Some(p) => {
            let text = read_text(p)?;
            if formats::sniff_rule_format(&text) == RuleFormat::ClassBench {
                return Err(Failure(format!(
                    "--rules {}: ClassBench rules have no actions; with --ovsdb give ovs-ofctl flows",
                    p.display()
                )));
            }
            formats::parse_rules(&p.display().to_string(), &text)?
        }
    };
    let pmd_cpus = a.pmd_cpus.as_deref().map(crate::switch::parse_cpus).transpose()?.unwrap_or_default();
    let ctl = a.ctl.as_deref().map(Listener::bind).transpose()?;
    let mut daemon = a.daemon.bind()?;
    let described = daemon.describe();
    let unixctl = daemon.take_unixctl();
    let hook: EventHook = Arc::new(|e: &PortEvent| eprintln!("rqvs switch: {e}"));
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [libc::SIGINT, libc::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| Failure(format!("installing a signal handler: {e}")))?;
    }
    crate::daemon::on_sighup(a.log_file.is_some(), &stop)?;
    if let Some(d) = a.duration {
        let s = Arc::clone(&stop);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs_f64(d));
            s.store(true, std::sync::atomic::Ordering::Relaxed);
        });
    }
    eprintln!(
        "rqvs switch: ready: configured by OVSDB {remote}, {} design, {} PMD thread(s){}{}",
        a.design.name(),
        a.pmds,
        a.ctl.as_ref().map_or(String::new(), |p| format!("; management socket {}", p.display())),
        described
    );
    let make = |ports, rules| {
        let mut cfg = SwitchConfig::new(ports, rules, a.design);
        configure(&mut cfg, pmd_cpus.clone(), Arc::clone(&hook)).map_err(|f| rqvs_switch::Error(f.0))?;
        Ok(cfg)
    };
    let cfg = VswitchdConfig {
        remote,
        make: Box::new(make),
        rules,
        unixctl,
        ctl,
        stats_interval: Duration::from_secs(5),
        log: Arc::new(|line: &str| eprintln!("{line}")),
        rundir: rqvs_switch::unixctl::rundir(),
        tls: a.tls.load(crate::switch::any_tls_target(a))?.map(|t| t.ovsdb_connector()),
    };
    // Ready (rqvs_switch::notify) once the database's configuration is applied: vswitchd::run.
    let generations = vswitchd::run(cfg, &stop);
    rqvs_switch::notify::stopping();
    let generations = generations?;
    drop(daemon);
    let out = crate::report::Out::new(a.json.as_deref());
    let mut balanced = true;
    for (i, g) in generations.iter().enumerate() {
        outln!(
            out,
            "datapath {} of {} (bridge {}, ports {}):",
            i + 1,
            generations.len(),
            g.bridge,
            if g.ports.is_empty() { "none".into() } else { g.ports.join(", ") }
        );
        out.line(g.report.format().trim_end_matches('\n'));
        balanced &= g.report.balanced();
    }
    if let Some(p) = &a.json {
        let list: Vec<serde_json::Value> = generations
            .iter()
            .map(|g| serde_json::json!({"bridge": g.bridge, "ports": g.ports, "report": g.report}))
            .collect();
        let mut fields = serde_json::Map::new();
        fields.insert("datapaths".into(), serde_json::Value::Array(list));
        crate::report::write_json(p, "switch", fields)?;
    }
    if !balanced {
        return Err(Failure(
            "frame accounting does not balance (a bug: please report it with the counters above)".into(),
        ));
    }
    Ok(())
}
