//! `--prefixes` (the slow path's prefix-trie fields, OVS's `Flow_Table:prefixes`) on the command
//! line: `rqvs trace` prints the megaflow the chosen tries make, and bad fields are usage errors
//! naming the field.

mod common;
use common::{rqvs, TempDir};

fn megaflow(prefixes: Option<&str>, rules: &str) -> String {
    let mut args = vec!["trace", "--rules", rules, "in_port=1,tcp6,ipv6_src=3000::1,ipv6_dst=::1,tp_dst=80"];
    if let Some(p) = prefixes {
        args.extend(["--prefixes", p]);
    }
    let o = rqvs(&args);
    assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    out.lines().find_map(|l| l.strip_prefix("Megaflow: ")).unwrap().to_string()
}

#[test]
fn prefixes_set_the_tries_of_rqvs_trace() {
    let dir = TempDir::new("prefixes");
    let rules = dir.join("r.ofctl");
    std::fs::write(&rules, "priority=10,tcp6,ipv6_src=2001:db8::/32,tp_dst=80,actions=drop\npriority=0,actions=drop\n")
        .unwrap();
    let rules = rules.to_str().unwrap();
    // 3000::1 leaves 2001:db8::/32 at bit 3: the ipv6_src trie examines 4 bits, no trie all 32.
    let narrow = "ipv6_src=3000::/4";
    assert!(megaflow(Some("ipv6_src,ipv6_dst"), rules).contains(narrow), "{}", megaflow(Some("ipv6_src"), rules));
    assert!(megaflow(Some("ipv6_src"), rules).contains(narrow));
    for p in [None, Some("none"), Some("ipv6_dst"), Some("nw_src,nw_dst")] {
        let m = megaflow(p, rules);
        assert!(m.contains("ipv6_src=3000::/32"), "{p:?}: {m}");
    }
}

#[test]
fn bad_prefix_fields_are_usage_errors_naming_them() {
    for (cmd, value, what) in [
        ("trace", "tun_src", "tun_src: OVS allows it, but rqvs keys carry no tunnel fields"),
        ("trace", "nw_proto", "nw_proto: not a field a prefix trie can be built on"),
        ("compare", "nw_src,nw_dst,ipv6_src,ipv6_dst", "at most 3"),
        ("switch", "bogus", "bogus: no such field"),
        ("trace", "none,nw_src", "'none' cannot be combined"),
    ] {
        // The value is refused as it is parsed, before clap looks for the required options.
        let o = rqvs(&[cmd, "--prefixes", value]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{cmd} --prefixes {value}: {err}");
        assert!(err.contains("--prefixes") && err.contains(what), "{cmd} --prefixes {value}: {err}");
    }
}
