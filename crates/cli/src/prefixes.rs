//! `--prefixes`: the fields of the slow path's prefix tries (Open vSwitch's `Flow_Table`
//! `prefixes` column), one option shared by every command that builds the slow path
//! (`rqvs compare`, `rqvs trace`, `rqvs switch`).

use rqvs_classify::ofproto::{set_default_prefix_fields, PrefixFields};

/// `--prefixes FIELD,...`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Prefixes {
    /// The slow path's prefix-trie fields, as Open vSwitch's Flow_Table `prefixes` column: up to
    /// 3 of nw_src, nw_dst, ipv6_src, ipv6_dst (aliases ip_src, ip_dst), checked in the order
    /// given, or `none` (no tries). They decide how many address bits megaflows examine, never
    /// which rule matches. Default: nw_dst,nw_src (OVS's).
    #[arg(long, value_name = "FIELD,...", value_parser = parse)]
    pub prefixes: Option<PrefixFields>,
}

fn parse(text: &str) -> Result<PrefixFields, String> {
    PrefixFields::parse(text).map_err(|e| e.to_string())
}

impl Prefixes {
    /// Makes the fields the default of every slow-path classifier this process builds
    /// afterwards (all of its tables and bridges; without the option, OVS's default stays).
    pub fn apply(&self) {
        if let Some(p) = self.prefixes {
            set_default_prefix_fields(p);
        }
    }
}
