//! `rqvs completions SHELL` and `rqvs man [COMMAND…]`: generated from the command line itself,
//! so they name every command and option `--help` does.

use std::process::{Command, Output};

fn rqvs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rqvs")).args(args).output().unwrap()
}

fn stdout(args: &[&str]) -> String {
    let o = rqvs(args);
    assert!(o.status.success(), "rqvs {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// The commands `rqvs --help` lists (the lines of its "Commands:" section).
fn commands() -> Vec<String> {
    let help = stdout(&["--help"]);
    let section = help.split("Commands:").nth(1).expect("a Commands section");
    let list = section.split("\n\n").next().unwrap();
    let names: Vec<String> = list.lines().filter_map(|l| l.split_whitespace().next()).map(String::from).collect();
    assert!(names.len() >= 12 && names.contains(&"replay".into()) && names.contains(&"man".into()), "{names:?}");
    names.into_iter().filter(|n| n != "help").collect()
}

#[test]
fn completions_name_every_command_and_option() {
    let cmds = commands();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout(&["completions", shell]);
        for c in &cmds {
            assert!(script.contains(c.as_str()), "{shell} completion lacks '{c}'");
        }
        // Options of a subcommand, and the values of an enumerated option.
        assert!(script.contains("--classifier") && script.contains("nmu-isets"), "{shell}: classify's options");
    }
    let o = rqvs(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2), "an unknown shell is a usage error");
}

#[test]
fn man_pages_for_rqvs_and_every_command() {
    let page = stdout(&["man"]);
    assert!(page.starts_with(".ie") || page.contains(".TH rqvs 1"), "{}", &page[..200.min(page.len())]);
    assert!(page.contains(".TH rqvs 1"));
    for c in commands() {
        assert!(page.contains(&format!("rqvs\\-{}(1)", c.replace('-', "\\-"))), "rqvs(1) lists no rqvs-{c}(1)");
        let sub = stdout(&["man", &c]);
        assert!(sub.contains(&format!(".TH rqvs-{c} 1")), "rqvs man {c}: {}", &sub[..200.min(sub.len())]);
        assert!(sub.contains(".SH SYNOPSIS") && sub.contains(&format!("\\fBrqvs {c}\\fR")), "rqvs man {c}");
    }
    let rules = stdout(&["man", "gen", "rules"]);
    assert!(rules.contains(".TH rqvs-gen-rules 1") && rules.contains("seed\\-file"), "rqvs man gen rules");
    let o = rqvs(&["man", "gen", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim(),
        "rqvs: error: man: 'rqvs-gen' has no command 'nope' (known: rules, trace, map, updates, coflows, attack, pipeline, help)"
    );
}

/// docs/designs.md's table of `--auto`'s keys is the command line's help: every key, its
/// default and its meaning, in order (the help is made from the parser's own list).
#[test]
fn the_auto_keys_table_is_the_help() {
    let help = stdout(&["replay", "--help"]);
    let from_help: Vec<String> = help
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let (key, rest) = l.split_once('=')?;
            let (default, meaning) = rest.split_once(": ")?;
            let kebab = !key.is_empty() && key.chars().all(|c| c.is_ascii_lowercase() || c == '-');
            kebab.then(|| format!("| `{key}` | {default} | {meaning} |"))
        })
        .collect();
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/designs.md")).unwrap();
    let section = page.split("### Setting auto's thresholds (`--auto`)").nth(1).expect("the section");
    let from_page: Vec<String> = section
        .lines()
        .skip_while(|l| !l.starts_with("| key |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(String::from)
        .collect();
    assert_eq!(from_help.len(), 16, "{help}");
    assert_eq!(from_page, from_help);
}
