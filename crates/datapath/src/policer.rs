//! Ingress policing: a token bucket in packets on a receive queue, checked before a frame is
//! parsed or classified — Open vSwitch's `ingress_policing_kpkts_rate` and
//! `ingress_policing_kpkts_burst` on an interface.
//!
//! Why it is here: a Tuple Space Explosion attack at 10⁶ packets per second needs more PMD time
//! than any design that classifies every packet can give it and keep 80% for the benign traffic
//! (docs/tse.md): each attack packet is a new microflow, so it misses the EMC and costs a full
//! classification. A packet dropped by the policer costs a comparison, not a classification. It
//! protects the other ports when the attacker sends from its own port (a tenant's VM port, the
//! TSE paper's threat model); traffic sharing the attacker's port is policed with it.
//!
//! The bucket holds at most `burst` tokens and gains `rate` per second of the clock it is given
//! (the PMD clock in `rqvs replay`, wall time in the switch); a packet that finds a token takes it
//! and passes, the others are dropped (counted as `policed`). It starts full.

use std::fmt;
use std::str::FromStr;

/// Burst when none is given, in thousands of packets.
pub const DEFAULT_BURST_KPKTS: f64 = 16.0;

/// A policer's setting: `KPPS[/BURST]`, both in thousands of packets (OVS's units).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PolicerSpec {
    /// Packets per second admitted on average, in thousands (> 0).
    pub kpps: f64,
    /// Packets admitted at once after a quiet period, in thousands (≥ 0.001: one packet).
    pub burst_kpkts: f64,
}

impl FromStr for PolicerSpec {
    type Err = String;

    /// `KPPS` or `KPPS/BURST`, e.g. `100` or `100/16`.
    fn from_str(s: &str) -> Result<PolicerSpec, String> {
        let (rate, burst) = match s.split_once('/') {
            Some((r, b)) => (r, Some(b)),
            None => (s, None),
        };
        let number = |what: &str, t: &str, min: f64| -> Result<f64, String> {
            match t.trim().parse::<f64>() {
                Ok(v) if v.is_finite() && v >= min && v <= 1e9 => Ok(v),
                _ => Err(format!(
                    "expected KPPS[/BURST] with {what} a number in {min}..1e9 thousand packets, found '{s}'"
                )),
            }
        };
        let kpps = number("KPPS", rate, 0.001)?;
        let burst_kpkts = match burst {
            Some(b) => number("BURST", b, 0.001)?,
            None => DEFAULT_BURST_KPKTS,
        };
        Ok(PolicerSpec { kpps, burst_kpkts })
    }
}

impl PolicerSpec {
    /// The setting in words, as the switch's ready line and summary give it: "100 kpps, burst
    /// 16 kpkts".
    pub fn describe(&self) -> String {
        format!("{} kpps, burst {} kpkts", self.kpps, self.burst_kpkts)
    }
}

impl fmt::Display for PolicerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kpps, self.burst_kpkts)
    }
}

/// A token bucket in packets (module docs).
#[derive(Clone, Debug)]
pub struct Policer {
    /// Tokens per nanosecond.
    per_ns: f64,
    burst: f64,
    tokens: f64,
    last_ns: u64,
    /// Packets dropped so far.
    pub policed: u64,
    /// Packets passed so far.
    pub passed: u64,
}

impl Policer {
    /// A full bucket at clock time `now_ns`; `share` divides the rate and the burst (a port's
    /// queues polled by several PMD threads, each with its own bucket).
    pub fn new(spec: PolicerSpec, share: usize, now_ns: u64) -> Policer {
        let share = share.max(1) as f64;
        let burst = (spec.burst_kpkts * 1e3 / share).max(1.0);
        Policer { per_ns: spec.kpps * 1e3 / share / 1e9, burst, tokens: burst, last_ns: now_ns, policed: 0, passed: 0 }
    }

    /// Of `n` packets taken at clock time `now_ns`, how many pass: the first ones, while tokens
    /// last (the rest are counted in `policed`). A clock that goes back adds nothing.
    pub fn admit(&mut self, now_ns: u64, n: usize) -> usize {
        if now_ns > self.last_ns {
            self.tokens = (self.tokens + (now_ns - self.last_ns) as f64 * self.per_ns).min(self.burst);
            self.last_ns = now_ns;
        }
        let pass = (self.tokens.floor().max(0.0) as usize).min(n);
        self.tokens -= pass as f64;
        self.passed += pass as u64;
        self.policed += (n - pass) as u64;
        pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_their_units_and_refuse_the_rest() {
        assert_eq!("100".parse(), Ok(PolicerSpec { kpps: 100.0, burst_kpkts: DEFAULT_BURST_KPKTS }));
        assert_eq!("0.5/2".parse(), Ok(PolicerSpec { kpps: 0.5, burst_kpkts: 2.0 }));
        for bad in ["", "0", "-1", "x", "100/", "100/0", "100/x", "nan", "inf", "1e10", "1/2/3"] {
            let e = bad.parse::<PolicerSpec>().unwrap_err();
            assert!(e.contains("expected KPPS[/BURST]") && e.contains(&format!("'{bad}'")), "{bad}: {e}");
        }
        let s: PolicerSpec = "100/16".parse().unwrap();
        assert_eq!(s.to_string().parse::<PolicerSpec>(), Ok(s));
    }

    #[test]
    fn a_full_bucket_passes_its_burst_then_the_rate() {
        // 10 kpps, burst 0.1 kpkts = 100 packets.
        let mut p = Policer::new("10/0.1".parse().unwrap(), 1, 0);
        assert_eq!(p.admit(0, 32), 32);
        assert_eq!(p.admit(0, 100), 68, "the rest of the burst");
        assert_eq!(p.admit(0, 32), 0);
        // 1 ms later: 10 tokens.
        assert_eq!(p.admit(1_000_000, 32), 10);
        // A quiet second refills to the burst, not beyond.
        assert_eq!(p.admit(1_001_000_000, 1000), 100);
        assert_eq!(p.passed, 210);
        assert_eq!(p.policed, 32 + 32 + 22 + 900, "the second call's 32 over the burst, then 32, 22 and 900");
        // A clock going back adds nothing.
        assert_eq!(p.admit(5, 10), 0);
    }

    #[test]
    fn over_a_long_run_the_passed_rate_is_the_rate() {
        // Offered 1 Mpps in batches of 32 to a 100 kpps policer for 2 s.
        let mut p = Policer::new("100/1".parse().unwrap(), 1, 0);
        let mut passed = 0;
        let mut t = 0u64;
        while t < 2_000_000_000 {
            passed += p.admit(t, 32);
            t += 32_000; // 32 packets at 1 Mpps
        }
        let expected = 100_000.0 * 2.0 + 1000.0;
        assert!((passed as f64 - expected).abs() <= 33.0, "{passed} vs {expected}");
        assert_eq!(p.passed + p.policed, (2_000_000_000 / 32_000) * 32);
    }

    #[test]
    fn shares_split_the_rate_and_the_burst() {
        let mut p = Policer::new("10/0.1".parse().unwrap(), 4, 0);
        assert_eq!(p.admit(0, 100), 25);
        assert_eq!(p.admit(4_000_000, 100), 10, "2.5 kpps for 4 ms");
    }
}
