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
