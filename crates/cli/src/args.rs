//! Argument groups and enumerated options several commands share, so that an option has one
//! spelling, one meaning and one help text everywhere.

use std::path::PathBuf;

/// The workload and its verification: `--rules`, `--trace`, `--verify`, `--seed`.
#[derive(clap::Args, Debug, Clone)]
pub struct Workload {
    /// Rules: ClassBench or ovs-ofctl flows, plain or .xz (default: the embedded ClassBench
    /// acl1_1k set).
    #[arg(long)]
    pub rules: Option<PathBuf>,
    /// Packets: ClassBench trace, pcap or pcapng, plain or .xz (default: the embedded acl1_1k
    /// trace).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Packets checked against the reference (default: every packet when rules × packets ≤
    /// 4·10⁹, else 10,000 sampled; replay and compare: 10,000, or 2,000 above 100,000 rules;
    /// 0 disables verification where a command allows it).
    #[arg(long)]
    pub verify: Option<usize>,
    /// Seed of the verification sample and of the command's other random draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

impl Default for Workload {
    /// The command line's defaults: the embedded workload, seed 1.
    fn default() -> Self {
        Workload { rules: None, trace: None, verify: None, seed: 1 }
    }
}

/// `--policy`: when CFLOWS (NuevoMatchUP with live updates) makes inserted rules visible.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PolicyArg {
    /// At once (into the bucket whose range holds the rule, or the remainder).
    Instant,
    /// At the next model swap.
    Delayed,
}

impl PolicyArg {
    pub fn name(self) -> &'static str {
        self.policy().name()
    }

    pub fn policy(self) -> rqvs_classify::nuevomatch::live::Policy {
        match self {
            PolicyArg::Instant => rqvs_classify::nuevomatch::live::Policy::Instant,
            PolicyArg::Delayed => rqvs_classify::nuevomatch::live::Policy::Delayed,
        }
    }
}

/// `--classifier`: what CFLOWS classifies the OpenFlow rules with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CflowsClassifierArg {
    /// NuevoMatchUP: the learned index with a TupleMerge remainder (the paper's CFLOWS).
    Nmu,
    /// TupleMerge alone: no learned index (the ablation).
    Tm,
}

impl CflowsClassifierArg {
    pub fn classifier(self) -> rqvs_datapath::CflowsClassifier {
        match self {
            CflowsClassifierArg::Nmu => rqvs_datapath::CflowsClassifier::NuevoMatch,
            CflowsClassifierArg::Tm => rqvs_datapath::CflowsClassifier::TupleMerge,
        }
    }
}

/// The defences of the megaflow cache against Tuple Space Explosion (ORIG, CCACHE; off by
/// default, as OVS): `--mask-limit`, `--mask-eviction`, `--mfcguard`, `--mfcguard-interval`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Defences {
    /// ORIG/CCACHE: at most this many megaflow masks (subtables) per PMD; installing a
    /// megaflow with a new mask at the limit applies --mask-eviction (default: no limit, as OVS)
    /// [range: 1 ≤ x ≤ 1000000].
    #[arg(long, value_parser = crate::args::range::between(1usize, 1_000_000))]
    pub mask_limit: Option<usize>,
    /// ORIG/CCACHE, with --mask-limit (default narrow): least-hit deletes the subtable (all its megaflows) whose
    /// megaflows decided the fewest packets in the current and past second of PMD time; refuse
    /// installs nothing (the packet has its action; its flow's next packets upcall again);
    /// narrow installs the megaflow under an installed mask that examines every bit it needs, or
    /// exact-match (one subtable for all such, made once by evicting the least-hit one).
    #[arg(long, value_enum, requires = "mask_limit")]
    pub mask_eviction: Option<MaskEvictionArg>,
    /// ORIG/CCACHE: MFCGuard — every --mfcguard-interval of PMD time, delete the subtables whose
    /// megaflows all drop (masks that exist only for dropped traffic).
    #[arg(long)]
    pub mfcguard: bool,
    /// MFCGuard's interval, seconds of PMD time (default 0.5, the revalidator's sweep's)
    /// [range: 0 < x ≤ 3600].
    #[arg(long, requires = "mfcguard", value_parser = crate::args::range::above(0.0, 3600.0))]
    pub mfcguard_interval: Option<f64>,
}

/// `--mask-eviction`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MaskEvictionArg {
    LeastHit,
    Refuse,
    Narrow,
}

impl Defences {
    /// The policy at the limit.
    pub fn eviction(&self) -> rqvs_datapath::MaskEviction {
        match self.mask_eviction {
            Some(MaskEvictionArg::Refuse) => rqvs_datapath::MaskEviction::Refuse,
            Some(MaskEvictionArg::LeastHit) => rqvs_datapath::MaskEviction::LeastHit,
            Some(MaskEvictionArg::Narrow) | None => rqvs_datapath::MaskEviction::Narrow,
        }
    }

    /// MFCGuard's interval in seconds when on.
    pub fn mfcguard_s(&self) -> Option<f64> {
        self.mfcguard.then(|| self.mfcguard_interval.unwrap_or(rqvs_experiment::replay::MFCGUARD_INTERVAL_S))
    }

    /// Sets them on a replay's settings.
    pub fn apply(&self, c: &mut rqvs_experiment::ReplayConfig) {
        c.mask_limit = self.mask_limit;
        c.mask_eviction = self.eviction();
        c.mfcguard = self.mfcguard_s();
    }

    /// The datapath's settings ([`rqvs_datapath::OrigConfig::mask_limit`], `mfcguard`).
    pub fn orig(&self) -> (Option<rqvs_datapath::MaskLimit>, Option<u64>) {
        (
            self.mask_limit.map(|masks| rqvs_datapath::MaskLimit { masks, eviction: self.eviction() }),
            self.mfcguard_s().map(|s| (s * 1e9) as u64),
        )
    }

    /// A defence is set.
    pub fn any(&self) -> bool {
        self.mask_limit.is_some() || self.mfcguard
    }
}

/// `--attack-policing`, `--ingress-policing`'s `KPPS[/BURST]` ([`rqvs_datapath::policer`]).
pub fn policer(s: &str) -> Result<rqvs_datapath::policer::PolicerSpec, String> {
    s.parse()
}

/// Value parsers for numeric options: each accepts only the range its option's help documents
/// (`[range: …]`), so a value outside it (NaN, a share of 2, a count the machine cannot hold)
/// is a usage error naming the range (exit code 2) before anything runs.
pub mod range {
    use std::fmt::Display;
    use std::str::FromStr;

    /// A parser of numbers `lo ≤ x ≤ hi` (`lo < x` when `open_lo`).
    fn within<T>(lo: T, hi: T, open_lo: bool) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
    where
        T: FromStr + PartialOrd + Display + Copy + Send + Sync + 'static,
    {
        move |s: &str| {
            let range = if open_lo { format!("{lo} < x ≤ {hi}") } else { format!("{lo} ≤ x ≤ {hi}") };
            let v: T = s.trim().parse().map_err(|_| format!("expected a number in the range {range}"))?;
            let above = if open_lo { v > lo } else { v >= lo };
            // NaN compares false both ways: out of every range.
            if above && v <= hi {
                Ok(v)
            } else {
                Err(format!("{s} is out of the range {range}"))
            }
        }
    }

    /// A share or probability: 0 ≤ x ≤ 1.
    pub fn share() -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
        within(0.0, 1.0, false)
    }

    /// A share that must hold something: 0 < x ≤ 1.
    pub fn share_nonzero() -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
        within(0.0, 1.0, true)
    }

    /// A finite number `lo < x ≤ hi` (`hi` may be `f64::MAX`: any finite number above `lo`).
    pub fn above(lo: f64, hi: f64) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
        within(lo, hi, true)
    }

    /// An EMC size (`--emc-entries`): a power of two, 2 ≤ x ≤ 2097152
    /// ([`rqvs_datapath::emc::EmcEntries`]).
    pub fn emc_entries(s: &str) -> Result<usize, String> {
        let n: usize = s.trim().parse().map_err(|_| {
            format!("expected a number of entries, a power of two from 2 to {}", rqvs_datapath::emc::EmcEntries::MAX)
        })?;
        rqvs_datapath::emc::EmcEntries::new(n).map(|e| e.get())
    }

    /// A number `lo ≤ x ≤ hi` of any type (counts: `usize`, `u32`, `u64`; floats).
    pub fn between<T>(lo: T, hi: T) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
    where
        T: FromStr + PartialOrd + Display + Copy + Send + Sync + 'static,
    {
        within(lo, hi, false)
    }
}

/// The options a command line gave explicitly (clap's `ValueSource::CommandLine`), by id (the
/// field name, `emc_prob` for `--emc-prob`): what the audit of unused options reads. An option
/// a command accepts but would not use with the others given is a usage error (exit code 2),
/// never silently ignored — each command's `unused` function names its cases.
#[derive(Debug, Default)]
pub struct Given(std::collections::BTreeSet<String>);

impl Given {
    /// The explicit options of the innermost subcommand of `m`.
    pub fn of(m: &clap::ArgMatches) -> Given {
        let mut m = m;
        while let Some((_, sub)) = m.subcommand() {
            m = sub;
        }
        let explicit = |id: &&clap::Id| m.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine);
        Given(m.ids().filter(explicit).map(|id| id.to_string()).collect())
    }

    /// Whether `--ID` was given.
    pub fn has(&self, id: &str) -> bool {
        self.0.contains(id)
    }

    /// `--ID` given while `unused` holds: the error `--id-spelled: why`.
    pub fn refuse(&self, id: &str, unused: bool, why: &str) -> Result<(), String> {
        if unused && self.has(id) {
            return Err(format!("--{}: {why}", id.replace('_', "-")));
        }
        Ok(())
    }
}

/// `--auto KEY=VALUE[,...]`: `--design auto`'s thresholds, as an OVS operator sets
/// `other_config:` keys ([`rqvs_datapath::auto::settings`]: the parser the switch and the
/// Python package share). Each item is checked as it is parsed (a usage error naming the key
/// and what it expects); the items together by [`AutoArgs::check`].
#[derive(clap::Args, Debug, Clone, Default)]
pub struct AutoArgs {
    /// --design auto's thresholds: KEY=VALUE, repeatable, comma lists allowed (e.g.
    /// `--auto initial=orig,window-ms=50`); --help lists the keys with their defaults.
    #[arg(
        long = "auto",
        value_name = "KEY=VALUE[,...]",
        value_parser = parse_auto,
        action = clap::ArgAction::Append,
        long_help = auto_long_help()
    )]
    pub auto: Vec<rqvs_datapath::AutoSettings>,
}

fn parse_auto(s: &str) -> Result<rqvs_datapath::AutoSettings, String> {
    s.parse()
}

fn auto_long_help() -> String {
    format!(
        "--design auto's thresholds, as KEY=VALUE: repeatable, comma lists allowed (e.g. `--auto \
         initial=orig,window-ms=50`); a key given twice is an error. The report and the JSON's \
         auto.settings say which settings differ from the defaults. Keys, with their defaults \
         (docs/designs.md, \"Setting auto's thresholds\"):\n{}",
        rqvs_datapath::auto::settings::help()
    )
}

impl AutoArgs {
    /// The settings given, in order.
    pub fn settings(&self) -> rqvs_datapath::AutoSettings {
        rqvs_datapath::AutoSettings::concat(&self.auto)
    }

    /// The thresholds: the defaults with the settings applied (valid once [`AutoArgs::check`]
    /// passed, which every command's `unused` runs before anything else).
    pub fn config(&self) -> rqvs_datapath::AutoConfig {
        self.settings().apply(rqvs_datapath::AutoConfig::default())
    }

    /// The settings together: no key twice, thresholds that hold together
    /// ([`rqvs_datapath::AutoSettings::config`]).
    pub fn check(&self) -> Result<rqvs_datapath::AutoConfig, String> {
        self.settings().config().map_err(|e| format!("--auto: {e}"))
    }
}
