//! Auto's thresholds as `KEY=VALUE` settings, the way an OVS operator sets `other_config:` keys:
//! `--auto window-ms=50,initial=orig` on `rqvs replay`, `rqvs compare` and `rqvs switch`, and
//! `auto={"window-ms": 50}` in Python — one parser for all of them.
//!
//! A key is the kebab-case name of an [`AutoConfig`] field, with its unit in the name where it
//! has one (`window-ms`, `min-dwell-ms`); [`KEYS`] lists them with their meaning, and
//! [`AutoConfig::default`] gives the defaults (shown by [`help`]). Each setting is checked on
//! its own when parsed ([`AutoSettings::from_str`]: the key known, the value of its type and
//! range); the settings together are checked by [`AutoSettings::config`] (no key given twice)
//! and [`AutoConfig::check`] (settings that contradict one another, or that the others leave
//! unused). [`AutoConfig::non_defaults`] is what a report says was in force.

use std::str::FromStr;

use super::policy::AutoConfig;
use crate::DesignKind;

/// A setting's key (module docs): its place in [`KEYS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key(usize);

impl Key {
    /// `window-ms`, ...
    pub fn name(self) -> &'static str {
        KEYS[self.0].0
    }

    fn by_name(name: &str) -> Option<Key> {
        KEYS.iter().position(|(n, _)| *n == name).map(Key)
    }

    fn field(self) -> Field {
        FIELDS[self.0]
    }
}

/// The keys, each with its meaning (units in the name; shares are 0 ≤ x ≤ 1).
pub const KEYS: [(&str, &str); 16] = [
    ("initial", "the first design: orig, ccache, cflows, or auto (cflows from cflows-rules rules up, orig below)"),
    ("cflows-rules", "with initial=auto: start in cflows from this many rules up, in orig below"),
    ("window-ms", "PMD time between decisions, ms"),
    ("min-window-packets", "a window with fewer packets decides nothing"),
    ("min-dwell-ms", "least PMD time in a design before it may be left, ms (doubled by each quick reversal)"),
    ("to-cflows-upcall-share", "orig/ccache -> cflows when the share of PMD time in upcalls reaches this"),
    ("to-cflows-subtables", "orig/ccache -> cflows when megaflow subtables probed per hit reach this"),
    ("to-cflows-masks", "orig/ccache -> cflows when the megaflow masks reach this many"),
    (
        "to-ccache-subtables",
        "orig -> ccache when subtables per hit reach this (and upcalls are below ccache-max-upcall-share)",
    ),
    ("ccache-max-upcall-share", "orig -> ccache only while the upcall share is below this"),
    (
        "to-orig-subtables",
        "ccache -> orig when subtables per hit fall to this (below to-ccache-subtables: the hysteresis)",
    ),
    (
        "leave-cflows-coverage",
        "cflows -> orig when the model's coverage of the rules is below this (and the EMC share is high)",
    ),
    ("leave-cflows-emc-share", "cflows -> orig only when the EMC's share of the packets is at least this"),
    ("cflows-tm-coverage", "cflows -> cflows with TupleMerge alone when the model's coverage is below this (0: never)"),
    ("warm-keys", "recent distinct keys whose megaflows a new orig/ccache installs before it takes over (0: none)"),
    ("ccache", "ccache is a candidate at all: true or false (false: orig <-> cflows only)"),
];

/// Longest window and dwell, ms (an hour, a day).
const MAX_WINDOW_MS: f64 = 3_600_000.0;
const MAX_DWELL_MS: f64 = 86_400_000.0;
/// Most warm-up keys (each a key and a megaflow installed on the builder thread).
const MAX_WARM_KEYS: u64 = 1 << 24;
/// Most subtables per hit a threshold may name.
const MAX_SUBTABLES: f64 = 1e9;

/// What a key sets in [`AutoConfig`]: its field, of which type, in which range.
#[derive(Clone, Copy)]
enum Field {
    /// `initial`: a fixed design, or `auto` (`None`).
    Initial,
    /// `ccache`: `true` or `false`.
    Ccache,
    /// A whole number `lo ≤ x ≤ hi`.
    Count(fn(&mut AutoConfig) -> &mut u64, u64, u64),
    /// The same, held as `usize`.
    Size(fn(&mut AutoConfig) -> &mut usize, u64, u64),
    /// Milliseconds `lo ≤ x ≤ hi`, held in ns.
    Ms(fn(&mut AutoConfig) -> &mut u64, f64, f64),
    /// A share, 0 ≤ x ≤ 1.
    Share(fn(&mut AutoConfig) -> &mut f64),
    /// Subtables per hit, 0 ≤ x ≤ [`MAX_SUBTABLES`].
    Subtables(fn(&mut AutoConfig) -> &mut f64),
}

/// Each key's field, in [`KEYS`]' order.
static FIELDS: [Field; 16] = [
    Field::Initial,
    Field::Size(|c| &mut c.cflows_rules, 0, u64::MAX),
    Field::Ms(|c| &mut c.window_ns, 0.001, MAX_WINDOW_MS),
    Field::Count(|c| &mut c.min_window_packets, 1, u64::MAX),
    Field::Ms(|c| &mut c.min_dwell_ns, 0.0, MAX_DWELL_MS),
    Field::Share(|c| &mut c.to_cflows_upcall_share),
    Field::Subtables(|c| &mut c.to_cflows_subtables),
    Field::Count(|c| &mut c.to_cflows_masks, 1, u64::MAX),
    Field::Subtables(|c| &mut c.to_ccache_subtables),
    Field::Share(|c| &mut c.ccache_max_upcall_share),
    Field::Subtables(|c| &mut c.to_orig_subtables),
    Field::Share(|c| &mut c.leave_cflows_coverage),
    Field::Share(|c| &mut c.leave_cflows_emc_share),
    Field::Share(|c| &mut c.cflows_tm_coverage),
    Field::Size(|c| &mut c.warm_keys, 0, MAX_WARM_KEYS),
    Field::Ccache,
];

/// A setting's value, parsed and in its key's range.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Value {
    Design(Option<DesignKind>),
    Bool(bool),
    /// A count, or a time in ns.
    Whole(u64),
    Real(f64),
}

/// Parses `text` as the value of `key` (module docs), or says what `key` expects.
fn parse(key: Key, text: &str) -> Result<Value, String> {
    let t = text.trim();
    let name = key.name();
    let number = |lo: f64, hi: f64, what: &str| -> Result<f64, String> {
        match t.parse::<f64>() {
            // NaN compares false both ways: out of every range.
            Ok(v) if v >= lo && v <= hi => Ok(v),
            _ => Err(format!("{name}: expected {what}, found '{text}'")),
        }
    };
    let count = |lo: u64, hi: u64| -> Result<Value, String> {
        match t.parse::<u64>() {
            Ok(v) if (lo..=hi).contains(&v) => Ok(Value::Whole(v)),
            _ => Err(format!("{name}: expected a whole number {lo} ≤ x ≤ {hi}, found '{text}'")),
        }
    };
    Ok(match key.field() {
        Field::Initial => Value::Design(match t {
            "auto" => None,
            _ => Some(
                DesignKind::from_name(t)
                    .filter(|&d| d != DesignKind::Auto)
                    .ok_or_else(|| format!("{name}: expected orig, ccache, cflows or auto, found '{text}'"))?,
            ),
        }),
        Field::Ccache => Value::Bool(match t {
            "true" => true,
            "false" => false,
            _ => return Err(format!("{name}: expected true or false, found '{text}'")),
        }),
        Field::Count(_, lo, hi) | Field::Size(_, lo, hi) => count(lo, hi)?,
        Field::Ms(_, lo, hi) => {
            Value::Whole((number(lo, hi, &format!("milliseconds {lo} ≤ x ≤ {hi}"))? * 1e6).round() as u64)
        }
        Field::Share(_) => Value::Real(number(0.0, 1.0, "a share 0 ≤ x ≤ 1")?),
        Field::Subtables(_) => {
            Value::Real(number(0.0, MAX_SUBTABLES, &format!("subtables per hit 0 ≤ x ≤ {MAX_SUBTABLES}"))?)
        }
    })
}

/// Sets `key`'s field in `c` to `v` (a value [`parse`] made for `key`).
fn assign(c: &mut AutoConfig, key: Key, v: Value) {
    match (key.field(), v) {
        (Field::Initial, Value::Design(d)) => c.initial = d,
        (Field::Ccache, Value::Bool(b)) => c.ccache = b,
        (Field::Count(f, ..) | Field::Ms(f, ..), Value::Whole(n)) => *f(c) = n,
        (Field::Size(f, ..), Value::Whole(n)) => *f(c) = usize::try_from(n).unwrap_or(usize::MAX),
        (Field::Share(f) | Field::Subtables(f), Value::Real(x)) => *f(c) = x,
        // `parse` makes each field's own kind of value.
        _ => {}
    }
}

/// `key`'s value in `c` as a setting writes it (`window-ms` in ms, `initial` by name).
fn show(c: &AutoConfig, key: Key) -> String {
    let mut c = *c;
    match key.field() {
        Field::Initial => c.initial.map_or("auto", DesignKind::name).to_string(),
        Field::Ccache => c.ccache.to_string(),
        Field::Count(f, ..) => f(&mut c).to_string(),
        Field::Size(f, ..) => f(&mut c).to_string(),
        Field::Ms(f, ..) => format!("{}", *f(&mut c) as f64 / 1e6),
        Field::Share(f) | Field::Subtables(f) => f(&mut c).to_string(),
    }
}

fn known() -> String {
    KEYS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

/// Settings as given: `KEY=VALUE` items, each checked on its own (module docs), in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AutoSettings(Vec<(Key, Value)>);

impl FromStr for AutoSettings {
    type Err = String;

    /// `KEY=VALUE[,KEY=VALUE...]`: an unknown key is refused with the list of the known ones, a
    /// value outside its key's type or range with what the key expects.
    fn from_str(s: &str) -> Result<AutoSettings, String> {
        let mut out = AutoSettings::default();
        for item in s.split(',') {
            let item = item.trim();
            let Some((k, v)) = item.split_once('=') else {
                return Err(format!("expected KEY=VALUE, found '{item}' (keys: {})", known()));
            };
            let k = k.trim();
            let key = Key::by_name(k).ok_or_else(|| format!("unknown key '{k}' (known: {})", known()))?;
            out.0.push((key, parse(key, v)?));
        }
        Ok(out)
    }
}

impl AutoSettings {
    /// All of `lists` in order (a repeated `--auto`).
    pub fn concat<'a>(lists: impl IntoIterator<Item = &'a AutoSettings>) -> AutoSettings {
        AutoSettings(lists.into_iter().flat_map(|l| l.0.iter().copied()).collect())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The keys given, in order.
    pub fn keys(&self) -> impl Iterator<Item = Key> + '_ {
        self.0.iter().map(|(k, _)| *k)
    }

    /// `base` with the settings applied in order (a key given twice: the last; [`Self::config`]
    /// refuses that).
    pub fn apply(&self, base: AutoConfig) -> AutoConfig {
        let mut c = base;
        self.0.iter().for_each(|&(k, v)| assign(&mut c, k, v));
        c
    }

    /// The thresholds: the defaults with the settings applied, checked together — no key
    /// given twice, and [`AutoConfig::check`].
    pub fn config(&self) -> Result<AutoConfig, String> {
        for (i, (k, _)) in self.0.iter().enumerate() {
            if self.0[..i].iter().any(|(e, _)| e == k) {
                return Err(format!("{}: given twice", k.name()));
            }
        }
        let c = self.apply(AutoConfig::default());
        c.check()?;
        Ok(c)
    }
}

impl AutoConfig {
    /// The thresholds hold together: the first design is a candidate (not `initial=ccache`
    /// with `ccache=false`), CCACHE's thresholds keep a gap (`to-orig-subtables` below
    /// `to-ccache-subtables`), and a threshold set away from its default is used
    /// (`cflows-rules` only with `initial=auto`, CCACHE's thresholds only with `ccache=true`).
    /// The error names the key.
    pub fn check(&self) -> Result<(), String> {
        let d = AutoConfig::default();
        if self.initial == Some(DesignKind::Auto) {
            return Err("initial: expected orig, ccache, cflows or auto, found 'auto' as a design".into());
        }
        if self.cflows_rules != d.cflows_rules && self.initial.is_some() {
            return Err(format!(
                "cflows-rules: chooses the first design; not used with initial={}",
                show(self, Key(0))
            ));
        }
        if !self.ccache {
            if self.initial == Some(DesignKind::Ccache) {
                return Err("initial: ccache is not a candidate with ccache=false".into());
            }
            for (k, set) in [
                ("to-ccache-subtables", self.to_ccache_subtables != d.to_ccache_subtables),
                ("ccache-max-upcall-share", self.ccache_max_upcall_share != d.ccache_max_upcall_share),
                ("to-orig-subtables", self.to_orig_subtables != d.to_orig_subtables),
            ] {
                if set {
                    return Err(format!("{k}: a threshold of ccache; not used with ccache=false"));
                }
            }
        } else if self.to_orig_subtables >= self.to_ccache_subtables {
            return Err(format!(
                "to-orig-subtables: expected below to-ccache-subtables ({}; the gap keeps orig <-> ccache from flapping), found {}",
                self.to_ccache_subtables, self.to_orig_subtables
            ));
        }
        Ok(())
    }

    /// The settings that differ from the defaults, as `(key, value)` (what a report says was
    /// in force; empty: the defaults).
    pub fn non_defaults(&self) -> Vec<(&'static str, String)> {
        let d = AutoConfig::default();
        (0..KEYS.len()).map(Key).filter(|&k| show(self, k) != show(&d, k)).map(|k| (k.name(), show(self, k))).collect()
    }

    /// [`Self::non_defaults`] as `key=value,...`, or `defaults` ([`line()`]).
    pub fn settings_line(&self) -> String {
        line(&self.non_defaults())
    }
}

/// Settings as `key=value,...` (what `--auto` takes), or `defaults` when there are none.
pub fn line(settings: &[(&str, String)]) -> String {
    if settings.is_empty() {
        return "defaults".into();
    }
    settings.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// The keys with their defaults and meanings, one a line (the command line's help).
pub fn help() -> String {
    let d = AutoConfig::default();
    KEYS.iter()
        .enumerate()
        .map(|(i, (name, what))| format!("  {name}={}: {what}", show(&d, Key(i))))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(s: &str) -> Result<AutoConfig, String> {
        s.parse::<AutoSettings>()?.config()
    }

    /// Every key sets its field, with units converted, and a report shows it back as given.
    #[test]
    fn every_key_sets_its_field() {
        let all = "initial=orig,window-ms=50,min-window-packets=64,min-dwell-ms=250.5,\
                   to-cflows-upcall-share=0.4,to-cflows-subtables=30,to-cflows-masks=100,to-ccache-subtables=9,\
                   ccache-max-upcall-share=0.1,to-orig-subtables=2,leave-cflows-coverage=0.2,\
                   leave-cflows-emc-share=0.8,cflows-tm-coverage=0.5,warm-keys=0";
        let c = config(all).unwrap();
        assert_eq!(c.initial, Some(DesignKind::Orig));
        assert_eq!((c.window_ns, c.min_dwell_ns, c.min_window_packets), (50_000_000, 250_500_000, 64));
        assert_eq!((c.to_cflows_upcall_share, c.to_cflows_subtables, c.to_cflows_masks), (0.4, 30.0, 100));
        assert_eq!((c.to_ccache_subtables, c.ccache_max_upcall_share, c.to_orig_subtables), (9.0, 0.1, 2.0));
        assert_eq!((c.leave_cflows_coverage, c.leave_cflows_emc_share, c.cflows_tm_coverage), (0.2, 0.8, 0.5));
        assert_eq!(c.warm_keys, 0);
        assert_eq!(c.settings_line(), all.replace(' ', ""));
        // The rest: cflows-rules (initial=auto) and ccache.
        let c = config("cflows-rules=5000, ccache=false").unwrap();
        assert_eq!((c.cflows_rules, c.ccache, c.initial), (5000, false, None));
        assert_eq!(c.non_defaults(), vec![("cflows-rules", "5000".to_string()), ("ccache", "false".to_string())]);
        assert_eq!(config("initial=cflows").unwrap().initial, Some(DesignKind::Cflows));
        assert_eq!(config("initial=auto").unwrap().initial, None);
        // The defaults as settings change nothing and are reported as such.
        assert_eq!(config("window-ms=100,ccache=true").unwrap().settings_line(), "defaults");
        assert_eq!(KEYS.len(), help().lines().count());
        assert!(help().contains("  window-ms=100: PMD time between decisions, ms"), "{}", help());
    }

    /// Repeated `--auto`s add up; a later one does not silently override an earlier one.
    #[test]
    fn lists_concatenate_and_a_key_given_twice_is_refused() {
        let a: AutoSettings = "window-ms=50".parse().unwrap();
        let b: AutoSettings = "initial=orig".parse().unwrap();
        let c = AutoSettings::concat([&a, &b]).config().unwrap();
        assert_eq!((c.window_ns, c.initial), (50_000_000, Some(DesignKind::Orig)));
        assert_eq!(AutoSettings::concat([&a, &b]).keys().map(Key::name).collect::<Vec<_>>(), ["window-ms", "initial"]);
        assert_eq!(AutoSettings::concat([&a, &a]).config().unwrap_err(), "window-ms: given twice");
        assert_eq!(AutoSettings::concat([&a, &a]).apply(AutoConfig::default()).window_ns, 50_000_000);
        assert!(AutoSettings::default().is_empty() && AutoSettings::default().config().is_ok());
    }

    /// Each error names the key (or the item) and what was expected.
    #[test]
    fn bad_settings_say_what_was_expected() {
        for (s, err) in [
            ("window", "expected KEY=VALUE, found 'window' (keys: initial, cflows-rules, window-ms,"),
            ("window-ms=50,", "expected KEY=VALUE, found ''"),
            ("window=50", "unknown key 'window' (known: initial, cflows-rules, window-ms, min-window-packets,"),
            ("initial=fast", "initial: expected orig, ccache, cflows or auto, found 'fast'"),
            ("window-ms=0", "window-ms: expected milliseconds 0.001 ≤ x ≤ 3600000, found '0'"),
            ("window-ms=NaN", "window-ms: expected milliseconds"),
            ("min-dwell-ms=-1", "min-dwell-ms: expected milliseconds 0 ≤ x ≤ 86400000, found '-1'"),
            ("min-window-packets=0", "min-window-packets: expected a whole number 1 ≤ x ≤"),
            ("cflows-rules=1.5", "cflows-rules: expected a whole number 0 ≤ x ≤"),
            ("to-cflows-masks=0", "to-cflows-masks: expected a whole number 1 ≤ x ≤"),
            ("warm-keys=99999999999", "warm-keys: expected a whole number 0 ≤ x ≤ 16777216"),
            ("to-cflows-upcall-share=1.5", "to-cflows-upcall-share: expected a share 0 ≤ x ≤ 1, found '1.5'"),
            ("ccache-max-upcall-share=-0.1", "ccache-max-upcall-share: expected a share 0 ≤ x ≤ 1"),
            ("leave-cflows-coverage=2", "leave-cflows-coverage: expected a share"),
            ("leave-cflows-emc-share=inf", "leave-cflows-emc-share: expected a share"),
            ("cflows-tm-coverage=x", "cflows-tm-coverage: expected a share"),
            ("to-cflows-subtables=-3", "to-cflows-subtables: expected subtables per hit 0 ≤ x ≤ 1000000000"),
            ("ccache=yes", "ccache: expected true or false, found 'yes'"),
        ] {
            let e = s.parse::<AutoSettings>().unwrap_err();
            assert!(e.starts_with(err), "{s}: {e}");
        }
        for (s, err) in [
            ("initial=orig,cflows-rules=1000", "cflows-rules: chooses the first design; not used with initial=orig"),
            ("initial=ccache,ccache=false", "initial: ccache is not a candidate with ccache=false"),
            (
                "ccache=false,to-ccache-subtables=9",
                "to-ccache-subtables: a threshold of ccache; not used with ccache=false",
            ),
            ("ccache=false,ccache-max-upcall-share=0.1", "ccache-max-upcall-share: a threshold of ccache"),
            ("ccache=false,to-orig-subtables=2", "to-orig-subtables: a threshold of ccache"),
            ("to-orig-subtables=8", "to-orig-subtables: expected below to-ccache-subtables (8; the gap"),
            ("to-ccache-subtables=2", "to-orig-subtables: expected below to-ccache-subtables (2;"),
        ] {
            let e = config(s).unwrap_err();
            assert!(e.starts_with(err), "{s}: {e}");
        }
        let e = AutoConfig { initial: Some(DesignKind::Auto), ..AutoConfig::default() }.check().unwrap_err();
        assert!(e.starts_with("initial: "), "{e}");
    }
}
