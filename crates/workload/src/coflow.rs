//! Coflow workloads (the flow-prediction study, `../shared/seeds/004`): pods in address groups,
//! services behind load-balancer rules, and *coflows* — a **base flow** (UDP to port
//! [`BASE_PORT`] = 2100) followed by **associated flows** — with a **coflowiness** knob and the
//! ground truth an oracle needs.
//!
//! ## Addresses and rules
//! - `groups` pod groups (default 16), group `g` = `10.1.g.0/24`, pod `h` = `10.1.g.(h+1)`
//!   (`pods_per_group`, default 254), each pod on its own OpenFlow port `2 + g·pods + h`.
//! - `services` (default 16) service VIPs `172.30.0.(s+1)`, each load-balanced on the nine UDP
//!   ports 2100, 2110, …, 2180 (the study's setup).
//! - Rules ([`rules`]), highest priority first (each class in a band of distinct priorities:
//!   its rules are disjoint, so this is the same table as one priority per class):
//!   1. **per-pod network policy**: `udp,nw_src=POD,tp_dst=9100 → drop`. Every pod
//!      has one, as OVN installs per-port flows; what matters here is that the slow path must look
//!      at the whole source address, so a megaflow is per source pod (checked by a test) — as in
//!      the study, where every new 5-tuple needed its own upcall.
//!   2. **service load balancing**: one rule per VIP, port and source pod group,
//!      `udp,nw_src=10.1.g.0/24,nw_dst=VIP,tp_dst=P → output:BACKEND` (a backend pod of the
//!      service's group, chosen per rule by a fixed hash).
//!   3. **pod delivery**: `ip,nw_dst=POD → output:POD_PORT`.
//!   4. a default route (priority 1): `ip → output:1`.
//!
//!   The megaflow of a flow to a service is then `nw_src=POD, nw_dst=VIP, udp, tp_dst=P` (plus
//!   what the datapath always matches): one megaflow per (source pod, service, port).
//!
//! ## Coflows
//! Each coflow picks a source pod `S` and a service `s`. Its base flow is `S → VIP_s:2100`; then
//! `k` associated flows (`k` uniform in `1..=max_associated`, default 8), flow `j` to port
//! `2100 + 10·j`. Every service has a fixed *profile*: associated flow `j` goes to `VIP_s`, except
//! `j = 3, 6`, which go to the next service's VIP (the application calls a second service). So
//! associated flow `j` appears in a coflow with probability `(9 − j)/8`.
//!
//! **Coflowiness** `x ∈ [0, 1]` = the share of associated flows that share endpoints with their
//! base flow (the study's definition: a shared source or destination). Exactly `round(x · A)` of
//! the `A` associated flows — a prefix of one fixed random permutation, so the coupled set at a
//! higher `x` contains the one at a lower `x` — are **coupled**: they follow the profile (source
//! `S`). The others go between **unrelated endpoints**: a random other source pod and a random
//! VIP other than the base's and the profile's, same port. Everything else (sizes, times, ports)
//! does not depend on `x`: the traces of one seed differ only in the endpoints of uncoupled flows.
//!
//! ## Sizes and times
//! - Flow sizes (bytes) from the study's two flow-size distributions, the empirical CDFs of the
//!   Homa workloads it uses: **FB Hadoop** (W4; mean 121.7 KB as sampled here — the study says
//!   122,182 B — with a tail to 10 MB) and **Google Search RPC** (W2; mean 423 B here, 426 B in the
//!   study). Within a CDF step the size is log-uniform (that is what gives those means; linear
//!   interpolation would give 135 KB for Hadoop). Packets: `ceil(bytes / 1458)` (the study's
//!   maximum UDP payload; 1500-byte packets), at least one.
//! - Coflows start in bursts: burst sizes are geometric with mean `burst` (1 = a Poisson process;
//!   the default is 1 for Hadoop and 16 for the bursty RPC workload), burst start times uniform
//!   over the span that gives `rate_pps` on average (default 1 Mpps, the study's rate), coflows of
//!   a burst within microseconds (exponential gaps, mean 2 µs).
//! - Associated flows start `20 µs + Exp(follow_us)` (default mean 200 µs) after their coflow's
//!   base flow. Each flow sends its packets back to back at `flow_gbps` (default 1 Gbit/s: a
//!   1500-byte packet every 12 µs).
//!
//! Everything is a function of the parameters and `rng_seed` ([`crate::rng::Rng`] streams forked
//! per purpose).

use rqvs_flow::key::{ETH_TYPE_IP, IPPROTO_UDP};
use rqvs_flow::{Actions, FlowKey, Match, Rule};

use crate::rng::Rng;

/// Destination port of every base flow.
pub const BASE_PORT: u16 = 2100;
/// Associated flow `j` goes to `BASE_PORT + j · PORT_STEP`.
pub const PORT_STEP: u16 = 10;
/// Ports per service (2100..=2180).
pub const SERVICE_PORTS: u16 = 9;
/// Most associated flows per coflow (ports 2110..=2180).
pub const MAX_ASSOCIATED: u32 = 8;
/// UDP payload per packet, bytes (1500-byte IP packets, as in the study).
pub const PAYLOAD: u64 = 1458;
/// Bytes on the wire per packet, for the per-flow sending rate.
pub const PACKET_BYTES: u64 = 1500;
/// The port the per-pod policy rules deny.
pub const POLICY_PORT: u16 = 9100;
/// Fixed part of the delay between a base flow and an associated flow, ns.
pub const FOLLOW_MIN_NS: u64 = 20_000;

/// FB Hadoop (Homa W4, `Facebook_HadoopDist_All.txt`): (bytes, CDF).
const HADOOP_CDF: &[(f64, f64)] = &[
    (92.0, 0.0074),
    (217.0, 0.0149),
    (271.0, 0.0409),
    (300.0, 0.0520),
    (326.0, 0.1375),
    (376.0, 0.2026),
    (425.0, 0.2230),
    (480.0, 0.2639),
    (600.0, 0.4591),
    (679.0, 0.5167),
    (737.0, 0.5520),
    (800.0, 0.5762),
    (885.0, 0.5912),
    (1042.0, 0.6097),
    (1277.0, 0.6282),
    (1413.0, 0.6394),
    (1534.0, 0.6468),
    (1664.0, 0.6673),
    (2214.0, 0.6747),
    (3396.0, 0.6840),
    (5210.0, 0.6933),
    (7830.0, 0.7082),
    (31946.0, 0.7212),
    (36844.0, 0.7305),
    (39973.0, 0.7398),
    (44260.0, 0.7584),
    (47050.0, 0.7788),
    (51046.0, 0.8160),
    (62583.0, 0.8234),
    (70722.0, 0.8327),
    (75180.0, 0.8420),
    (81565.0, 0.8717),
    (102058.0, 0.8885),
    (115331.0, 0.8978),
    (133013.0, 0.9070),
    (156563.0, 0.9164),
    (184284.0, 0.9257),
    (212546.0, 0.9349),
    (240177.0, 0.9442),
    (288520.0, 0.9535),
    (470507.0, 0.9628),
    (736642.0, 0.9684),
    (940700.0, 0.9721),
    (1769244.0, 0.9814),
    (2169118.0, 0.9870),
    (10000000.0, 1.0),
];

/// Google Search RPC (Homa W2, `Google_SearchRPC.txt`): (bytes, CDF).
const RPC_CDF: &[(f64, f64)] = &[
    (1.0, 0.0),
    (2.0, 0.0756033901818394),
    (3.0, 0.132305932818219),
    (4.0, 0.151206780363679),
    (8.0, 0.170107627909139),
    (32.0, 0.189008475454599),
    (34.0, 0.202751220734426),
    (36.0, 0.216493966014254),
    (38.0, 0.230236711294082),
    (40.0, 0.24397945657391),
    (43.0, 0.257722201853738),
    (46.0, 0.271464947133566),
    (49.0, 0.285207692413394),
    (53.0, 0.298950437693222),
    (58.0, 0.31269318297305),
    (64.0, 0.326435928252878),
    (67.0, 0.327962652787335),
    (71.0, 0.329489377321793),
    (75.0, 0.331016101856251),
    (80.0, 0.332542826390709),
    (85.0, 0.334069550925166),
    (91.0, 0.335596275459624),
    (98.0, 0.337122999994082),
    (107.0, 0.338649724528539),
    (116.0, 0.340176449062997),
    (128.0, 0.341703173597455),
    (135.0, 0.353916810301949),
    (142.0, 0.366130447006443),
    (151.0, 0.378344083710937),
    (160.0, 0.390557720415431),
    (171.0, 0.402771357119925),
    (183.0, 0.414984993824419),
    (197.0, 0.427198630528913),
    (213.0, 0.439412267233407),
    (233.0, 0.451625903937901),
    (256.0, 0.463839540642395),
    (269.0, 0.508495648577945),
    (284.0, 0.553151756513495),
    (301.0, 0.597807864449045),
    (320.0, 0.642463972384595),
    (341.0, 0.687120080320145),
    (366.0, 0.731776188255695),
    (394.0, 0.776432296191245),
    (427.0, 0.821088404126795),
    (465.0, 0.865744512062345),
    (512.0, 0.910400619997895),
    (539.0, 0.915171571649521),
    (569.0, 0.919942523301147),
    (602.0, 0.924713474952773),
    (640.0, 0.929484426604399),
    (683.0, 0.934255378256025),
    (731.0, 0.939026329907651),
    (788.0, 0.943797281559276),
    (853.0, 0.948568233210902),
    (931.0, 0.953339184862528),
    (1024.0, 0.958110136514154),
    (1078.0, 0.960400194140515),
    (1138.0, 0.962690251766876),
    (1205.0, 0.964980309393238),
    (1280.0, 0.967270367019599),
    (1365.0, 0.96956042464596),
    (1463.0, 0.971850482272321),
    (1575.0, 0.974140539898682),
    (1707.0, 0.976430597525043),
    (1862.0, 0.978720655151404),
    (2048.0, 0.981010712777766),
    (2156.0, 0.982441997677838),
    (2276.0, 0.983873282577911),
    (2409.0, 0.985304567477984),
    (2560.0, 0.986735852378057),
    (2731.0, 0.98816713727813),
    (2926.0, 0.989598422178203),
    (3151.0, 0.991029707078276),
    (3413.0, 0.992460991978349),
    (3724.0, 0.993892276878422),
    (4096.0, 0.995323561778495),
    (4312.0, 0.995633673903787),
    (4551.0, 0.99594378602908),
    (4819.0, 0.996253898154372),
    (5120.0, 0.996564010279664),
    (5461.0, 0.996874122404957),
    (5851.0, 0.997184234530249),
    (6302.0, 0.997494346655541),
    (6827.0, 0.997804458780834),
    (7447.0, 0.998114570906126),
    (8192.0, 0.998424683031419),
    (8623.0, 0.998472392503279),
    (9102.0, 0.998520101975139),
    (9638.0, 0.998567811446999),
    (10240.0, 0.998615520918859),
    (10923.0, 0.998663230390719),
    (11703.0, 0.998710939862579),
    (12603.0, 0.99875864933444),
    (13653.0, 0.9988063588063),
    (14895.0, 0.99885406827816),
    (16384.0, 0.99890177775002),
    (17246.0, 0.99892563248595),
    (18204.0, 0.99894948722188),
    (19275.0, 0.99897334195781),
    (20480.0, 0.99899719669374),
    (21845.0, 0.99902105142967),
    (23406.0, 0.9990449061656),
    (25206.0, 0.999068760901531),
    (27307.0, 0.999092615637461),
    (29789.0, 0.999116470373391),
    (32768.0, 0.999140325109321),
    (34493.0, 0.999161198026518),
    (36409.0, 0.999182070943715),
    (38551.0, 0.999202943860912),
    (40960.0, 0.99922381677811),
    (43691.0, 0.999244689695307),
    (46811.0, 0.999265562612504),
    (50412.0, 0.999286435529701),
    (54613.0, 0.999307308446898),
    (59578.0, 0.999328181364096),
    (65536.0, 0.999349054281293),
    (68985.0, 0.999401236574286),
    (72818.0, 0.999453418867279),
    (77101.0, 0.999505601160272),
    (81920.0, 0.999557783453265),
    (87381.0, 0.999609965746258),
    (93623.0, 0.999662148039251),
    (100825.0, 0.999714330332244),
    (109227.0, 0.999766512625237),
    (119156.0, 0.99981869491823),
    (131072.0, 0.999870877211223),
    (137971.0, 0.999881313669821),
    (145636.0, 0.99989175012842),
    (154202.0, 0.999902186587019),
    (163840.0, 0.999912623045617),
    (174763.0, 0.999923059504216),
    (187246.0, 0.999933495962815),
    (201649.0, 0.999943932421413),
    (218453.0, 0.999954368880012),
    (238313.0, 0.99996480533861),
    (262144.0, 0.999975241797209),
    (275941.0, 0.999975987263521),
    (291271.0, 0.999976732729834),
    (308405.0, 0.999977478196146),
    (327680.0, 0.999978223662459),
    (349525.0, 0.999978969128771),
    (374491.0, 0.999979714595084),
    (403298.0, 0.999980460061396),
    (436907.0, 0.999981205527708),
    (476625.0, 0.999981950994021),
    (524288.0, 0.999982696460333),
    (573085.0, 0.9999844268143),
    (631896.0, 0.999986157168266),
    (704160.0, 0.999987887522233),
    (795085.0, 0.9999896178762),
    (912974.0, 0.999991348230167),
    (1071908.0, 0.999993078584133),
    (1297841.0, 0.9999948089381),
    (1644453.0, 0.999996539292067),
    (2243665.0, 0.999998269646033),
    (3529904.0, 1.0),
];

/// The study's two flow-size distributions (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SizeDist {
    /// FB Hadoop: long-lived flows, mean ~122 KB, tail to 10 MB.
    Hadoop,
    /// Google Search RPC: short flows, mean ~426 B.
    Rpc,
}

impl SizeDist {
    /// `hadoop` or `rpc`.
    pub fn parse(s: &str) -> Result<SizeDist, String> {
        match s {
            "hadoop" => Ok(SizeDist::Hadoop),
            "rpc" => Ok(SizeDist::Rpc),
            _ => Err(format!("expected a flow-size distribution 'hadoop' or 'rpc', found '{s}'")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SizeDist::Hadoop => "hadoop",
            SizeDist::Rpc => "rpc",
        }
    }

    fn cdf(self) -> &'static [(f64, f64)] {
        match self {
            SizeDist::Hadoop => HADOOP_CDF,
            SizeDist::Rpc => RPC_CDF,
        }
    }

    /// Mean coflows per burst by default: 1 (Poisson) for Hadoop, 16 for the bursty RPC workload.
    pub fn default_burst(self) -> f64 {
        match self {
            SizeDist::Hadoop => 1.0,
            SizeDist::Rpc => 16.0,
        }
    }

    /// The mean of the distribution as [`SizeDist::sample`] draws it (before rounding), bytes.
    pub fn mean_bytes(self) -> f64 {
        let cdf = self.cdf();
        let (x0, c0) = cdf[0];
        let mut mean = x0 * c0;
        for w in cdf.windows(2) {
            let ((a, ca), (b, cb)) = (w[0], w[1]);
            mean += (cb - ca) * (b - a) / (b / a).ln();
        }
        mean
    }

    /// A flow size in bytes: a CDF step chosen by a uniform draw, then a log-uniform size inside
    /// it (the first point is a point mass of its CDF value).
    pub fn sample(self, rng: &mut Rng) -> u64 {
        let cdf = self.cdf();
        let u = rng.f64();
        let i = cdf.partition_point(|&(_, c)| c < u).min(cdf.len() - 1);
        let bytes = if i == 0 {
            cdf[0].0
        } else {
            let ((a, ca), (b, cb)) = (cdf[i - 1], cdf[i]);
            let f = ((u - ca) / (cb - ca)).clamp(0.0, 1.0);
            a * (b / a).powf(f)
        };
        (bytes.round() as u64).max(1)
    }
}

/// Packets of a flow of `bytes` bytes.
pub fn packets_for(bytes: u64) -> u32 {
    u32::try_from(bytes.div_ceil(PAYLOAD).max(1)).unwrap_or(u32::MAX)
}

/// Workload parameters (module docs for their meaning).
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    pub dist: SizeDist,
    pub coflows: usize,
    pub coflowiness: f64,
    pub rng_seed: u64,
    pub groups: u32,
    pub pods_per_group: u32,
    pub services: u32,
    pub max_associated: u32,
    /// Average offered packet rate, packets per second.
    pub rate_pps: f64,
    /// Sending rate of one flow, Gbit/s.
    pub flow_gbps: f64,
    /// Mean of the exponential part of the base → associated delay, µs.
    pub follow_us: f64,
    /// Mean coflows per burst (1 = Poisson arrivals).
    pub burst: f64,
}

impl Params {
    /// The defaults of the module docs.
    pub fn new(dist: SizeDist, coflows: usize, coflowiness: f64, rng_seed: u64) -> Params {
        Params {
            dist,
            coflows,
            coflowiness,
            rng_seed,
            groups: 16,
            pods_per_group: 254,
            services: 16,
            max_associated: MAX_ASSOCIATED,
            rate_pps: 1e6,
            flow_gbps: 1.0,
            follow_us: 200.0,
            burst: dist.default_burst(),
        }
    }

    /// Checks every parameter; the message names the parameter as the command line does.
    pub fn validate(&self) -> Result<(), String> {
        let finite_pos = |v: f64| v.is_finite() && v > 0.0;
        if !(self.coflowiness.is_finite() && (0.0..=1.0).contains(&self.coflowiness)) {
            return Err(format!("expected --coflowiness in 0..1, found {}", self.coflowiness));
        }
        if !(1..=10_000_000).contains(&self.coflows) {
            return Err(format!("expected --coflows in 1..=10000000, found {}", self.coflows));
        }
        if !(1..=256).contains(&self.groups) {
            return Err(format!("expected --groups in 1..=256, found {}", self.groups));
        }
        if !(1..=254).contains(&self.pods_per_group) {
            return Err(format!("expected --pods in 1..=254, found {}", self.pods_per_group));
        }
        if self.groups * self.pods_per_group < 2 {
            return Err("expected at least 2 pods in all (uncoupled flows need another source)".into());
        }
        // Rule `i` of a band has priority `band − i` (global index): all must stay above 1.
        let rules = 2 * u64::from(self.groups * self.pods_per_group)
            + u64::from(self.services) * u64::from(SERVICE_PORTS) * u64::from(self.groups);
        if rules >= u64::from(PRIORITY_DELIVERY) - 1 {
            return Err(format!(
                "expected fewer than {} rules (2 per pod, 9 per service and group), found {rules}: fewer --groups, --pods or --services",
                PRIORITY_DELIVERY - 1
            ));
        }
        if !(3..=254).contains(&self.services) {
            return Err(format!(
                "expected --services in 3..=254 (uncoupled flows need a VIP other than two), found {}",
                self.services
            ));
        }
        if self.max_associated > MAX_ASSOCIATED {
            return Err(format!("expected --max-associated in 0..={MAX_ASSOCIATED}, found {}", self.max_associated));
        }
        if !finite_pos(self.rate_pps) {
            return Err(format!("expected --rate in packets per second > 0, found {}", self.rate_pps));
        }
        if !finite_pos(self.flow_gbps) {
            return Err(format!("expected --flow-gbps > 0, found {}", self.flow_gbps));
        }
        if !(self.follow_us.is_finite() && self.follow_us >= 0.0) {
            return Err(format!("expected --follow-us >= 0, found {}", self.follow_us));
        }
        if !(self.burst.is_finite() && self.burst >= 1.0) {
            return Err(format!("expected --burst >= 1 (mean coflows per burst), found {}", self.burst));
        }
        Ok(())
    }
}

/// A flow's part in its coflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    Base,
    /// `coupled`: shares endpoints with the base flow (what coflowiness counts).
    Associated {
        coupled: bool,
    },
}

/// One flow: a 5-tuple sending `packets` packets from `start_ns`, one every `gap_ns`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Flow {
    pub coflow: u32,
    pub role: Role,
    pub key: FlowKey,
    pub bytes: u64,
    pub packets: u32,
    pub start_ns: u64,
    pub gap_ns: u64,
}

/// One coflow: indexes into [`Workload::flows`].
#[derive(Clone, Debug, PartialEq)]
pub struct Coflow {
    pub base: u32,
    pub associated: Vec<u32>,
    pub start_ns: u64,
}

/// One packet of the trace: its arrival time and flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    pub t_ns: u64,
    pub flow: u32,
}

/// A generated workload: rules, flows with their ground truth, and the time-ordered packets.
#[derive(Clone, Debug)]
pub struct Workload {
    pub params: Params,
    pub rules: Vec<Rule>,
    pub flows: Vec<Flow>,
    pub coflows: Vec<Coflow>,
    /// Sorted by time (ties: flow index).
    pub packets: Vec<Packet>,
}

/// Counts describing a workload.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    pub coflows: usize,
    pub flows: usize,
    pub associated: usize,
    pub coupled: usize,
    pub packets: usize,
    pub rules: usize,
    pub span_ns: u64,
    pub mean_flow_bytes: f64,
    pub mean_flow_packets: f64,
    /// Offered rate over the span, packets per second.
    pub rate_pps: f64,
}

impl Workload {
    /// Each packet's key, in time order.
    pub fn keys(&self) -> Vec<FlowKey> {
        self.packets.iter().map(|p| self.flows[p.flow as usize].key).collect()
    }

    /// Each packet's arrival time, ns, in time order.
    pub fn timestamps(&self) -> Vec<u64> {
        self.packets.iter().map(|p| p.t_ns).collect()
    }

    /// The ground truth an oracle preloads: each base flow's key with the keys of its coupled
    /// associated flows (those that share endpoints with it; coflows without any are left out),
    /// in coflow order.
    pub fn oracle(&self) -> Vec<(FlowKey, Vec<FlowKey>)> {
        let flows: Vec<TruthFlow> =
            self.flows.iter().map(|f| TruthFlow { coflow: f.coflow, role: f.role, key: f.key }).collect();
        truth_oracle(&flows).expect("every generated coflow has a base flow")
    }

    pub fn summary(&self) -> Summary {
        let associated = self.flows.iter().filter(|f| matches!(f.role, Role::Associated { .. })).count();
        let coupled = self.flows.iter().filter(|f| f.role == Role::Associated { coupled: true }).count();
        let span_ns = match (self.packets.first(), self.packets.last()) {
            (Some(a), Some(b)) => b.t_ns - a.t_ns,
            _ => 0,
        };
        let n = self.flows.len().max(1) as f64;
        Summary {
            coflows: self.coflows.len(),
            flows: self.flows.len(),
            associated,
            coupled,
            packets: self.packets.len(),
            rules: self.rules.len(),
            span_ns,
            mean_flow_bytes: self.flows.iter().map(|f| f.bytes as f64).sum::<f64>() / n,
            mean_flow_packets: self.flows.iter().map(|f| f64::from(f.packets)).sum::<f64>() / n,
            rate_pps: self.packets.len() as f64 / (span_ns.max(1) as f64 / 1e9),
        }
    }
}

/// The address of pod `h` of group `g`.
pub fn pod_ip(g: u32, h: u32) -> u32 {
    0x0a01_0000 | (g << 8) | (h + 1)
}

/// The OpenFlow port of pod `h` of group `g`.
pub fn pod_port(p: &Params, g: u32, h: u32) -> u32 {
    2 + g * p.pods_per_group + h
}

/// The VIP of service `s`.
pub fn vip(s: u32) -> u32 {
    0xac1e_0000 | (s + 1)
}

/// Destination service of associated flow `j` (1-based) of a coflow to service `s`.
fn profile_service(p: &Params, s: u32, j: u32) -> u32 {
    if matches!(j, 3 | 6) {
        (s + 1) % p.services
    } else {
        s
    }
}

fn mix(a: u64) -> u64 {
    let mut z = a.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Top of the priority band of the policy rules (rule `i` has priority `band − i`).
pub const PRIORITY_POLICY: u32 = 65_000;
/// Top of the band of the service rules.
pub const PRIORITY_SERVICE: u32 = 50_000;
/// Top of the band of the delivery rules.
pub const PRIORITY_DELIVERY: u32 = 35_000;

/// The rules of the module docs for these address parameters, ids in order; each class in its
/// own priority band (policy, service, delivery, default 1; [`Params::validate`] bounds the rule
/// count so the bands stay apart).
pub fn rules(p: &Params) -> Vec<Rule> {
    let mut out = Vec::new();
    // Each class in its own band, one priority per rule (the rules of a class are disjoint, so
    // this changes no winner; it spares the slow path's check of equal-priority overlaps).
    let mut push = |band: u32, value: FlowKey, mask: FlowKey, actions: Actions| {
        let id = out.len() as u32;
        let priority = if band == 0 { 1 } else { band - id };
        out.push(Rule::new(id, priority, Match::from_masked(value, mask), actions));
    };
    let ip = FlowKey { dl_type: ETH_TYPE_IP, ..FlowKey::default() };
    let ip_mask = FlowKey { dl_type: u16::MAX, ..FlowKey::default() };
    let udp = FlowKey { nw_proto: IPPROTO_UDP, ..ip };
    let udp_mask = FlowKey { nw_proto: u8::MAX, ..ip_mask };
    for g in 0..p.groups {
        for h in 0..p.pods_per_group {
            push(
                PRIORITY_POLICY,
                FlowKey { nw_src: pod_ip(g, h), tp_dst: POLICY_PORT, ..udp },
                FlowKey { nw_src: u32::MAX, tp_dst: u16::MAX, ..udp_mask },
                Actions::drop(),
            );
        }
    }
    for s in 0..p.services {
        let backend_group = s % p.groups;
        for j in 0..SERVICE_PORTS {
            for g in 0..p.groups {
                let h =
                    (mix(u64::from(s) << 40 | u64::from(j) << 20 | u64::from(g)) % u64::from(p.pods_per_group)) as u32;
                push(
                    PRIORITY_SERVICE,
                    FlowKey {
                        nw_src: pod_ip(g, 0) & 0xffff_ff00,
                        nw_dst: vip(s),
                        tp_dst: BASE_PORT + j * PORT_STEP,
                        ..udp
                    },
                    FlowKey { nw_src: 0xffff_ff00, nw_dst: u32::MAX, tp_dst: u16::MAX, ..udp_mask },
                    Actions::output(pod_port(p, backend_group, h)),
                );
            }
        }
    }
    for g in 0..p.groups {
        for h in 0..p.pods_per_group {
            push(
                PRIORITY_DELIVERY,
                FlowKey { nw_dst: pod_ip(g, h), ..ip },
                FlowKey { nw_dst: u32::MAX, ..ip_mask },
                Actions::output(pod_port(p, g, h)),
            );
        }
    }
    push(0, ip, ip_mask, Actions::output(1));
    out
}

/// Exponential with this mean.
fn exp(rng: &mut Rng, mean: f64) -> f64 {
    -mean * (1.0 - rng.f64()).ln()
}

/// Geometric on 1, 2, … with this mean (≥ 1).
fn geometric(rng: &mut Rng, mean: f64) -> u64 {
    if mean <= 1.0 {
        return 1;
    }
    let q = 1.0 - 1.0 / mean;
    1 + ((1.0 - rng.f64()).ln() / q.ln()).floor() as u64
}

fn random_pod(p: &Params, rng: &mut Rng) -> u32 {
    let n = p.groups * p.pods_per_group;
    let i = rng.below(u64::from(n)) as u32;
    pod_ip(i / p.pods_per_group, i % p.pods_per_group)
}

fn ephemeral(rng: &mut Rng) -> u16 {
    rng.range_u32(32768, 60999) as u16
}

/// A flow's key as a frame carries it (`wire`: TTL 64 among others).
fn udp_key(src: u32, dst: u32, sport: u16, dport: u16) -> FlowKey {
    FlowKey::ipv4(src, dst, IPPROTO_UDP, sport, dport).wire()
}

/// The most packets a workload may have ([`generate`] holds them all, with their times).
pub const MAX_PACKETS: u64 = 100_000_000;

/// The most flows a workload may have: coflows × (1 + most associated flows per coflow).
pub const MAX_FLOWS: u64 = 20_000_000;

/// Generates the workload (module docs).
pub fn generate(p: &Params) -> Result<Workload, String> {
    p.validate()?;
    let most_flows = (p.coflows as u64).saturating_mul(1 + u64::from(p.max_associated));
    if most_flows > MAX_FLOWS {
        return Err(format!(
            "{} coflows of up to {} flows each may make more than the limit of {MAX_FLOWS} flows (every flow is held in memory): give fewer --coflows or a lower --max-associated",
            p.coflows,
            1 + p.max_associated
        ));
    }
    let mut structure = Rng::fork(p.rng_seed, 1);
    let mut sizes = Rng::fork(p.rng_seed, 2);
    let mut coupling = Rng::fork(p.rng_seed, 3);
    let mut timing = Rng::fork(p.rng_seed, 4);
    let mut unrelated = Rng::fork(p.rng_seed, 5);

    // Structure: who talks to whom, for both fates of every associated flow.
    let mut flows: Vec<Flow> = Vec::new();
    let mut coflows: Vec<Coflow> = Vec::with_capacity(p.coflows);
    // For each associated flow (in order): its flow index and its uncoupled key.
    let mut assoc: Vec<(u32, FlowKey)> = Vec::new();
    let flow = |coflow: usize, role, key, bytes: u64| Flow {
        coflow: coflow as u32,
        role,
        key,
        bytes,
        packets: packets_for(bytes),
        start_ns: 0,
        gap_ns: 0,
    };
    for c in 0..p.coflows {
        let src = random_pod(p, &mut structure);
        let s = structure.below(u64::from(p.services)) as u32;
        let base = flows.len() as u32;
        flows.push(flow(
            c,
            Role::Base,
            udp_key(src, vip(s), ephemeral(&mut structure), BASE_PORT),
            p.dist.sample(&mut sizes),
        ));
        let k = if p.max_associated == 0 { 0 } else { structure.range_u32(1, p.max_associated) };
        let mut associated = Vec::with_capacity(k as usize);
        for j in 1..=k {
            let port = BASE_PORT + j as u16 * PORT_STEP;
            let ps = profile_service(p, s, j);
            let sport = ephemeral(&mut structure);
            let coupled = udp_key(src, vip(ps), sport, port);
            // Unrelated endpoints: another source pod, a VIP neither the base's nor the profile's.
            let mut usrc = random_pod(p, &mut unrelated);
            while usrc == src {
                usrc = random_pod(p, &mut unrelated);
            }
            let mut us = unrelated.below(u64::from(p.services)) as u32;
            while us == s || us == ps {
                us = unrelated.below(u64::from(p.services)) as u32;
            }
            let i = flows.len() as u32;
            assoc.push((i, udp_key(usrc, vip(us), sport, port)));
            associated.push(i);
            flows.push(flow(c, Role::Associated { coupled: true }, coupled, p.dist.sample(&mut sizes)));
        }
        coflows.push(Coflow { base, associated, start_ns: 0 });
    }

    // Coupling: exactly round(x · A) associated flows, a prefix of one fixed permutation.
    let a = assoc.len();
    let n_coupled = ((p.coflowiness * a as f64).round() as usize).min(a);
    let mut order: Vec<usize> = (0..a).collect();
    for i in (1..a).rev() {
        let j = coupling.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    for &i in &order[n_coupled..] {
        let (f, key) = assoc[i];
        flows[f as usize].role = Role::Associated { coupled: false };
        flows[f as usize].key = key;
    }

    // Times: bursts of coflows over the span that gives the offered rate.
    let total_packets: u64 = flows.iter().map(|f| u64::from(f.packets)).sum();
    if total_packets > MAX_PACKETS {
        return Err(format!(
            "{} coflows make {total_packets} packets, more than the limit of {MAX_PACKETS} (every packet is held in memory): give fewer --coflows",
            p.coflows
        ));
    }
    let span_ns = total_packets as f64 / p.rate_pps * 1e9;
    let gap_ns = ((PACKET_BYTES * 8) as f64 / p.flow_gbps).round().max(1.0) as u64;
    let mut c = 0;
    let mut burst_sizes = Vec::new();
    while c < p.coflows {
        let n = (geometric(&mut timing, p.burst) as usize).min(p.coflows - c);
        burst_sizes.push(n);
        c += n;
    }
    let mut starts: Vec<f64> = burst_sizes.iter().map(|_| timing.f64() * span_ns).collect();
    starts.sort_by(f64::total_cmp);
    let mut c = 0;
    for (&n, &t0) in burst_sizes.iter().zip(&starts) {
        let mut t = t0;
        for _ in 0..n {
            coflows[c].start_ns = t as u64;
            t += exp(&mut timing, 2_000.0);
            c += 1;
        }
    }
    for co in &coflows {
        let b = &mut flows[co.base as usize];
        b.start_ns = co.start_ns;
        b.gap_ns = gap_ns;
        for &f in &co.associated {
            let delay = FOLLOW_MIN_NS + exp(&mut timing, p.follow_us * 1e3) as u64;
            let f = &mut flows[f as usize];
            f.start_ns = co.start_ns + delay;
            f.gap_ns = gap_ns;
        }
    }

    let mut packets = Vec::with_capacity(total_packets as usize);
    for (i, f) in flows.iter().enumerate() {
        for k in 0..u64::from(f.packets) {
            packets.push(Packet { t_ns: f.start_ns + k * f.gap_ns, flow: i as u32 });
        }
    }
    packets.sort_unstable_by_key(|x| (x.t_ns, x.flow));
    Ok(Workload { params: p.clone(), rules: rules(p), flows, coflows, packets })
}

/// The flows as tab-separated text (the ground truth `rqvs gen coflows --truth-out` writes):
/// one line per flow with its coflow, role, whether it is coupled, 5-tuple, size and start.
pub fn write_truth(w: &Workload) -> String {
    use rqvs_flow::key::fmt_ipv4;
    let mut s = String::from(
        "# flow\tcoflow\trole\tcoupled\tnw_src\tnw_dst\tnw_proto\ttp_src\ttp_dst\tbytes\tpackets\tstart_ns\n",
    );
    for (i, f) in w.flows.iter().enumerate() {
        let (role, coupled) = match f.role {
            Role::Base => ("base", "-"),
            Role::Associated { coupled } => ("associated", if coupled { "yes" } else { "no" }),
        };
        s.push_str(&format!(
            "{i}\t{}\t{role}\t{coupled}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
            f.coflow,
            fmt_ipv4(f.key.nw_src),
            fmt_ipv4(f.key.nw_dst),
            f.key.nw_proto,
            f.key.tp_src,
            f.key.tp_dst,
            f.bytes,
            f.packets,
            f.start_ns
        ));
    }
    s
}

/// One flow of a ground truth ([`write_truth`], [`parse_truth`]): its coflow, role and key
/// (UDP/TCP 5-tuple on in_port 1, as [`FlowKey::ipv4`] makes it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TruthFlow {
    pub coflow: u32,
    pub role: Role,
    pub key: FlowKey,
}

/// Reads the ground truth [`write_truth`] writes (`#` lines are comments). Errors name
/// `name:line:column` and what was expected there.
pub fn parse_truth(name: &str, text: &str) -> Result<Vec<TruthFlow>, String> {
    const COLUMNS: usize = 12;
    let mut out = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = Vec::with_capacity(COLUMNS);
        let mut col = 1;
        for f in line.split('\t') {
            fields.push((col, f));
            col += f.chars().count() + 1;
        }
        let err = |i: usize, what: &str| {
            let (c, f) = fields.get(i).copied().unwrap_or((col, ""));
            format!("{name}:{}:{c}: expected {what}, found '{f}'", ln + 1)
        };
        if fields.len() != COLUMNS {
            return Err(format!(
                "{name}:{}:1: expected {COLUMNS} tab-separated columns (flow, coflow, role, coupled, nw_src, nw_dst, nw_proto, tp_src, tp_dst, bytes, packets, start_ns), found {}",
                ln + 1,
                fields.len()
            ));
        }
        fn num<T: std::str::FromStr>(s: &str) -> Option<T> {
            if s.bytes().all(|b| b.is_ascii_digit()) {
                s.parse().ok()
            } else {
                None
            }
        }
        let ip =
            |i: usize| fields[i].1.parse::<std::net::Ipv4Addr>().map(u32::from).map_err(|_| err(i, "an IPv4 address"));
        let coflow: u32 = num(fields[1].1).ok_or_else(|| err(1, "a coflow number"))?;
        let role = match (fields[2].1, fields[3].1) {
            ("base", "-") => Role::Base,
            ("associated", "yes") => Role::Associated { coupled: true },
            ("associated", "no") => Role::Associated { coupled: false },
            ("base", _) => return Err(err(3, "'-' (a base flow is not coupled)")),
            ("associated", _) => return Err(err(3, "'yes' or 'no'")),
            _ => return Err(err(2, "'base' or 'associated'")),
        };
        let (src, dst) = (ip(4)?, ip(5)?);
        let proto: u8 = num(fields[6].1).ok_or_else(|| err(6, "an IP protocol number 0..255"))?;
        let sport: u16 = num(fields[7].1).ok_or_else(|| err(7, "a port 0..65535"))?;
        let dport: u16 = num(fields[8].1).ok_or_else(|| err(8, "a port 0..65535"))?;
        for i in [0, 9, 10, 11] {
            num::<u64>(fields[i].1).ok_or_else(|| err(i, "a number"))?;
        }
        out.push(TruthFlow { coflow, role, key: FlowKey::ipv4(src, dst, proto, sport, dport).wire() });
    }
    if out.is_empty() {
        return Err(format!("{name}: no flows (expected the ground truth `rqvs gen coflows --truth-out` writes)"));
    }
    Ok(out)
}

/// The oracle's table from a ground truth: per coflow (ascending), its base flow's key and the
/// keys of its coupled associated flows in the order given; coflows without coupled flows are
/// left out. Fails when a coflow has no base flow or two.
pub fn truth_oracle(flows: &[TruthFlow]) -> Result<Vec<(FlowKey, Vec<FlowKey>)>, String> {
    let mut by_coflow: std::collections::BTreeMap<u32, (Option<FlowKey>, Vec<FlowKey>)> = Default::default();
    for f in flows {
        let e = by_coflow.entry(f.coflow).or_default();
        match f.role {
            Role::Base if e.0.is_some() => return Err(format!("coflow {} has two base flows", f.coflow)),
            Role::Base => e.0 = Some(f.key),
            Role::Associated { coupled: true } => e.1.push(f.key),
            Role::Associated { coupled: false } => {}
        }
    }
    let mut out = Vec::new();
    for (c, (base, coupled)) in by_coflow {
        let base = base.ok_or_else(|| format!("coflow {c} has no base flow"))?;
        if !coupled.is_empty() {
            out.push((base, coupled));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(dist: SizeDist, x: f64, seed: u64) -> Workload {
        generate(&Params::new(dist, 300, x, seed)).unwrap()
    }

    fn shares_endpoint(a: &FlowKey, b: &FlowKey) -> bool {
        [a.nw_src, a.nw_dst].iter().any(|e| *e == b.nw_src || *e == b.nw_dst)
    }

    #[test]
    fn coflowiness_zero_and_one_hold_exactly() {
        for dist in [SizeDist::Hadoop, SizeDist::Rpc] {
            for x in [0.0, 1.0] {
                let w = small(dist, x, 3);
                let mut n = 0;
                for c in &w.coflows {
                    let base = w.flows[c.base as usize].key;
                    assert_eq!(base.tp_dst, BASE_PORT);
                    for &f in &c.associated {
                        let f = &w.flows[f as usize];
                        n += 1;
                        assert_eq!(f.role, Role::Associated { coupled: x == 1.0 });
                        assert_eq!(shares_endpoint(&f.key, &base), x == 1.0, "{:?} vs {:?}", f.key, base);
                        if x == 1.0 {
                            assert_eq!(f.key.nw_src, base.nw_src, "coupled flows come from the base's pod");
                        }
                        assert_ne!(f.key.tp_dst, BASE_PORT);
                    }
                }
                assert!(n > 300, "{n} associated flows");
                let s = w.summary();
                assert_eq!(s.coupled, if x == 1.0 { s.associated } else { 0 });
            }
        }
    }

    #[test]
    fn intermediate_coflowiness_is_exact_and_nested() {
        let lo = small(SizeDist::Rpc, 0.25, 9);
        let hi = small(SizeDist::Rpc, 0.75, 9);
        let (sl, sh) = (lo.summary(), hi.summary());
        assert_eq!(sl.associated, sh.associated);
        assert_eq!(sl.coupled, (0.25 * sl.associated as f64).round() as usize);
        assert_eq!(sh.coupled, (0.75 * sh.associated as f64).round() as usize);
        for (a, b) in lo.flows.iter().zip(&hi.flows) {
            assert_eq!(
                (a.bytes, a.start_ns, a.key.tp_dst, a.key.tp_src),
                (b.bytes, b.start_ns, b.key.tp_dst, b.key.tp_src)
            );
            if a.role == (Role::Associated { coupled: true }) {
                assert_eq!(b.role, Role::Associated { coupled: true }, "coupled sets are nested");
                assert_eq!(a.key, b.key);
            }
        }
        // The oracle lists exactly the coupled flows, under their base.
        let listed: usize = hi.oracle().iter().map(|(_, v)| v.len()).sum();
        assert_eq!(listed, sh.coupled);
    }

    #[test]
    fn sizes_have_the_study_means() {
        // The distributions as sampled: Hadoop 122,182 B and RPC 426 B in the study.
        assert!((SizeDist::Hadoop.mean_bytes() / 122_182.0 - 1.0).abs() < 0.01, "{}", SizeDist::Hadoop.mean_bytes());
        assert!((SizeDist::Rpc.mean_bytes() / 426.0 - 1.0).abs() < 0.01, "{}", SizeDist::Rpc.mean_bytes());
        for (dist, want, tol) in [(SizeDist::Hadoop, 122_182.0, 0.05), (SizeDist::Rpc, 426.0, 0.03)] {
            let mut rng = Rng::new(11);
            let n = 400_000;
            let mean = (0..n).map(|_| dist.sample(&mut rng) as f64).sum::<f64>() / f64::from(n);
            assert!((mean / want - 1.0).abs() < tol, "{dist:?}: sampled mean {mean}, study {want}");
        }
        // Hadoop's tail reaches megabytes; RPC stays small.
        let mut rng = Rng::new(5);
        let h: Vec<u64> = (0..100_000).map(|_| SizeDist::Hadoop.sample(&mut rng)).collect();
        assert!(h.iter().any(|&b| b > 5_000_000) && h.iter().all(|&b| (92..=10_000_000).contains(&b)));
        let r: Vec<u64> = (0..100_000).map(|_| SizeDist::Rpc.sample(&mut rng)).collect();
        assert!(r.iter().all(|&b| (1..=3_529_904).contains(&b)));
        assert!(r.iter().filter(|&&b| b <= PAYLOAD).count() > 96_000, "most RPC flows are one packet");
        assert_eq!((packets_for(1), packets_for(1458), packets_for(1459)), (1, 1, 2));
    }

    #[test]
    fn deterministic_for_a_seed() {
        let a = small(SizeDist::Hadoop, 0.5, 21);
        let b = small(SizeDist::Hadoop, 0.5, 21);
        assert_eq!(a.flows, b.flows);
        assert_eq!(a.packets, b.packets);
        assert_eq!(a.rules, b.rules);
        let c = small(SizeDist::Hadoop, 0.5, 22);
        assert_ne!(a.flows, c.flows);
    }

    #[test]
    fn packets_are_in_time_order_and_complete() {
        let w = small(SizeDist::Hadoop, 0.5, 4);
        assert!(w.packets.windows(2).all(|p| p[0].t_ns <= p[1].t_ns));
        let total: u64 = w.flows.iter().map(|f| u64::from(f.packets)).sum();
        assert_eq!(w.packets.len() as u64, total);
        for c in &w.coflows {
            let b = &w.flows[c.base as usize];
            assert_eq!(b.start_ns, c.start_ns);
            for &f in &c.associated {
                assert!(w.flows[f as usize].start_ns >= c.start_ns + FOLLOW_MIN_NS);
            }
        }
        let s = w.summary();
        assert!((s.rate_pps / 1e6 - 1.0).abs() < 0.5, "offered rate {}", s.rate_pps);
        // Keys are what the wire carries (the datapath's keys).
        for f in &w.flows {
            assert_eq!(f.key.wire(), f.key);
        }
    }

    #[test]
    fn rules_give_per_pod_service_megaflows() {
        let p = Params::new(SizeDist::Rpc, 10, 1.0, 1);
        let rules = rules(&p);
        assert_eq!(rules.len(), (2 * p.groups * p.pods_per_group + p.services * 9 * p.groups + 1) as usize);
        let slow = rqvs_classify::OfprotoClassifier::build(&rules).unwrap();
        let k = udp_key(pod_ip(3, 7), vip(2), 40000, 2110);
        let l = slow.lookup_wc(&k);
        let r = slow.rule(l.rule.unwrap()).unwrap();
        assert!((PRIORITY_DELIVERY..=PRIORITY_SERVICE).contains(&r.priority), "a service rule wins");
        assert_eq!(r.actions.0.len(), 1);
        let mf = l.megaflow(&k);
        assert_eq!(mf.mask.nw_src, u32::MAX, "megaflows are per source pod");
        assert_eq!(mf.mask.nw_dst, u32::MAX);
        assert_eq!(mf.mask.tp_dst, u16::MAX);
        assert_eq!(mf.mask.tp_src, 0, "source ports are wildcarded");
        // Written as ofctl and read back, the same rules.
        let text = rqvs_flow::formats::ofctl::write_flows(&rules).unwrap();
        let back = rqvs_flow::formats::ofctl::parse_flows("t", &text).unwrap();
        assert_eq!(back.len(), rules.len());
        for (a, b) in rules.iter().zip(&back) {
            assert_eq!((a.priority, a.matches, &a.actions), (b.priority, b.matches, &b.actions));
        }
    }

    #[test]
    fn the_ground_truth_reads_back_as_the_oracle() {
        for x in [0.0, 0.5, 1.0] {
            let w = small(SizeDist::Rpc, x, 6);
            let flows = parse_truth("t.tsv", &write_truth(&w)).unwrap();
            assert_eq!(flows.len(), w.flows.len());
            for (t, f) in flows.iter().zip(&w.flows) {
                assert_eq!((t.coflow, t.role, t.key), (f.coflow, f.role, f.key));
            }
            assert_eq!(truth_oracle(&flows).unwrap(), w.oracle());
        }
    }

    #[test]
    fn bad_ground_truth_is_an_error_naming_line_and_column() {
        let w = small(SizeDist::Rpc, 0.5, 6);
        let text = write_truth(&w);
        let line2 = text.lines().nth(1).unwrap().to_string();
        for (bad, want) in [
            (line2.replacen("\tbase\t", "\tbass\t", 1), "t.tsv:1:"),
            (line2.replacen("10.1.", "10.1.300.", 1), "expected an IPv4 address"),
            (line2.replacen("\t17\t", "\t999\t", 1), "expected an IP protocol number"),
            (line2.replacen("\t2100\t", "\t70000\t", 1), "expected a port"),
            ("0\t1\tbase".to_string(), "expected 12 tab-separated columns"),
            ("# only a comment".to_string(), "no flows"),
        ] {
            let e = parse_truth("t.tsv", &bad).unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
        }
        let e = parse_truth("t.tsv", &line2.replacen("\tbase\t", "\tbass\t", 1)).unwrap_err();
        assert!(e.starts_with("t.tsv:1:") && e.contains("'base' or 'associated', found 'bass'"), "{e}");
        // Structure: a coflow without its base flow.
        let assoc: Vec<TruthFlow> = parse_truth("t.tsv", &text).unwrap().into_iter().skip(1).collect();
        assert!(truth_oracle(&assoc).unwrap_err().contains("coflow 0 has no base flow"));
    }

    #[test]
    fn bad_parameters_are_errors() {
        for (f, what) in [
            (Params { coflowiness: 1.5, ..Params::new(SizeDist::Rpc, 1, 0.0, 1) }, "--coflowiness"),
            (Params { coflowiness: f64::NAN, ..Params::new(SizeDist::Rpc, 1, 0.0, 1) }, "--coflowiness"),
            (Params::new(SizeDist::Rpc, 0, 0.0, 1), "--coflows"),
            (Params { services: 2, ..Params::new(SizeDist::Rpc, 1, 0.0, 1) }, "--services"),
            (Params { rate_pps: 0.0, ..Params::new(SizeDist::Rpc, 1, 0.0, 1) }, "--rate"),
            (Params { burst: 0.5, ..Params::new(SizeDist::Rpc, 1, 0.0, 1) }, "--burst"),
            (Params { max_associated: 9, ..Params::new(SizeDist::Rpc, 1, 0.0, 1) }, "--max-associated"),
            (Params { groups: 100, ..Params::new(SizeDist::Rpc, 1, 0.0, 1) }, "fewer than"),
        ] {
            let e = generate(&f).unwrap_err();
            assert!(e.contains(what), "{e}");
        }
        assert!(SizeDist::parse("web").unwrap_err().contains("'hadoop' or 'rpc'"));
    }
}
