//! `rqvs gen pipeline`: a two-table OpenFlow pipeline (an ACL from one ClassBench seed with
//! `goto_table:1`, forwarding on destination prefixes from another) and its trace
//! ([`rqvs_workload::pipeline`]).

use std::path::PathBuf;
use std::time::Instant;

use rqvs_experiment::gen::TraceFormat;
use rqvs_flow::formats::{ofctl, pcap, trace as cbtrace};
use rqvs_flow::FlowKey;
use rqvs_workload::{pipeline, seedfile, trace};
use serde_json::{json, Map};

use crate::report::{self, Out};
use crate::Failure;

#[derive(clap::Args, Debug)]
pub struct PipelineArgs {
    /// Seed of table 0's ACL: acl1..acl5, fw1..fw5, ipc1, ipc2 or a seed file's path (its
    /// ClassBench part).
    #[arg(long, default_value = "acl1")]
    pub acl_seed: String,
    /// ClassBench rules drawn for the ACL (duplicates removed, port ranges expanded to flows)
    /// [range: 1 ≤ x ≤ 1000000].
    #[arg(long, value_parser = crate::args::range::between(1usize, pipeline::MAX_RULES))]
    pub acl: usize,
    /// Seed whose destination prefixes make table 1's forwarding rules.
    #[arg(long, default_value = "ipc1")]
    pub fwd_seed: String,
    /// Forwarding prefixes in table 1 (distinct; fewer when the seed yields fewer) [range: 1 ≤ x ≤
    /// 1000000].
    #[arg(long, value_parser = crate::args::range::between(1usize, pipeline::MAX_RULES))]
    pub fwd: usize,
    /// Share of the ACL's rules that drop (the others `goto_table:1`) [range: 0 ≤ x ≤ 1].
    #[arg(long, default_value_t = 0.1, value_parser = crate::args::range::between(0.0, 1.0))]
    pub drop_share: f64,
    /// On 30% of the permits: write_metadata, push_vlan + set vlan_vid, or write_actions(output).
    #[arg(long)]
    pub extras: bool,
    /// Output ports of the forwarding rules: 2..=PORTS+1 (port 1 is left for the trace's
    /// in_port) [range: 1 ≤ x ≤ 65000].
    #[arg(long, default_value_t = 8, value_parser = crate::args::range::between(1u32, 65_000))]
    pub ports: u32,
    /// Share of the forwarding prefixes moved under the ACL's destination prefixes, so that
    /// permitted traffic spreads over table 1 (the rest keep the seed's addresses) [range: 0 ≤ x ≤ 1].
    #[arg(long, default_value_t = 0.5, value_parser = crate::args::range::between(0.0, 1.0))]
    pub overlap: f64,
    #[arg(long, default_value_t = 1)]
    pub rng_seed: u64,
    /// The pipeline's flows, ovs-ofctl text (`table=1,...`).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Also write a trace for the pipeline here.
    #[arg(long, requires = "packets")]
    pub trace: Option<PathBuf>,
    /// Packets of the trace [range: 1 ≤ x ≤ 10000000].
    #[arg(long, requires = "trace", value_parser = crate::args::range::between(1usize, trace::MAX_PACKETS))]
    pub packets: Option<usize>,
    /// pareto:A,B | zipf:S | zipf:S,FLOWS | uniform.
    #[arg(long, default_value = "pareto:1,0.1", requires = "trace")]
    pub locality: String,
    #[arg(long, value_enum, default_value = "classbench", requires = "trace")]
    pub trace_format: TraceFormat,
    /// Write a JSON report here ('-' = stdout).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

fn seed(name: &str) -> Result<seedfile::SeedFile, Failure> {
    let (n, text) = seedfile::read(name).map_err(Failure)?;
    seedfile::parse(&n, &text).map_err(|e| Failure(e.to_string()))
}

fn write(path: &PathBuf, bytes: &[u8]) -> Result<(), Failure> {
    std::fs::write(path, bytes).map_err(|e| Failure(format!("{}: cannot write: {e}", path.display())))
}

pub fn run(a: &PipelineArgs) -> Result<(), Failure> {
    let out = Out::new(a.json.as_deref());
    let t = Instant::now();
    let p = pipeline::Params {
        acl: a.acl,
        fwd: a.fwd,
        rng_seed: a.rng_seed,
        drop_share: a.drop_share,
        extras: a.extras,
        ports: a.ports,
        overlap: a.overlap,
    };
    let pl = pipeline::generate(&seed(&a.acl_seed)?, &seed(&a.fwd_seed)?, &p).map_err(Failure)?;
    let text = ofctl::write_flows(&pl.rules).map_err(Failure)?;
    write(&a.output, text.as_bytes())?;
    let mut fields = Map::new();
    out.line(format!(
        "gen pipeline: table 0: {} flows from {} {} rules ({} drop, {} write_metadata, {} push_vlan, {} write_actions; {} without an OpenFlow form left out); table 1: {} {} prefixes + a miss flow; {:.2} s",
        pl.acl_flows,
        pl.acl_rules,
        a.acl_seed,
        pl.drops,
        pl.metadata,
        pl.vlan,
        pl.action_set,
        pl.skipped,
        pl.fwd_prefixes,
        a.fwd_seed,
        t.elapsed().as_secs_f64()
    ));
    if pl.fwd_prefixes < a.fwd {
        out.line(format!(
            "gen pipeline: {} yields {} distinct destination prefixes, not {}",
            a.fwd_seed, pl.fwd_prefixes, a.fwd
        ));
    }
    fields.insert("output".into(), a.output.display().to_string().into());
    fields.insert("acl_seed".into(), a.acl_seed.clone().into());
    fields.insert("fwd_seed".into(), a.fwd_seed.clone().into());
    fields.insert("rng_seed".into(), a.rng_seed.into());
    fields.insert("acl_rules".into(), pl.acl_rules.into());
    fields.insert("acl_flows".into(), pl.acl_flows.into());
    fields.insert("drops".into(), pl.drops.into());
    fields.insert("write_metadata".into(), pl.metadata.into());
    fields.insert("push_vlan".into(), pl.vlan.into());
    fields.insert("write_actions".into(), pl.action_set.into());
    fields.insert("fwd_prefixes".into(), pl.fwd_prefixes.into());
    if let (Some(path), Some(n)) = (&a.trace, a.packets) {
        let mut tp = trace::Params::new(n, trace::Locality::parse(&a.locality).map_err(Failure)?, a.rng_seed);
        tp.wire = a.trace_format == TraceFormat::Pcap;
        let t = Instant::now();
        let (packets, st) = pipeline::trace(&pl, &tp).map_err(Failure)?;
        let bytes = match a.trace_format {
            TraceFormat::Classbench => {
                let entries: Vec<cbtrace::TraceEntry> = packets
                    .iter()
                    .map(|x| cbtrace::TraceEntry { intended: Some(x.intended), ..cbtrace::TraceEntry::from_key(x.key) })
                    .collect();
                cbtrace::write_trace(&entries).into_bytes()
            }
            TraceFormat::Pcap => {
                let keys: Vec<FlowKey> = packets.iter().map(|x| x.key).collect();
                pcap::write_pcap(&keys, None).0
            }
        };
        write(path, &bytes)?;
        out.line(format!(
            "gen pipeline: trace {}: {} packets, {} flows ({}); {} dropped in table 0, {} reach table 1 ({} by its miss flow); {} table-0 and {} table-1 rules hit; {} moved into a forwarding prefix; {:.2} s",
            path.display(),
            packets.len(),
            st.acl.flows,
            a.locality,
            st.dropped,
            st.forwarded,
            st.fwd_miss,
            st.acl_hit,
            st.fwd_hit,
            st.retargeted,
            t.elapsed().as_secs_f64()
        ));
        fields.insert(
            "trace".into(),
            json!({
                "file": path.display().to_string(), "packets": packets.len(), "flows": st.acl.flows,
                "locality": a.locality, "dropped": st.dropped, "forwarded": st.forwarded, "fwd_miss": st.fwd_miss,
                "acl_hit": st.acl_hit, "fwd_hit": st.fwd_hit, "retargeted": st.retargeted,
            }),
        );
    }
    if let Some(j) = &a.json {
        report::write_json(j, "gen pipeline", fields)?;
    }
    Ok(())
}
