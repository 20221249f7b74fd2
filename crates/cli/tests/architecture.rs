//! ARCHITECTURE.md's layer drawing is the crates' Cargo dependencies: every `name ← deps` line
//! of its first text block equals the `rqvs-*` entries of that crate's `[dependencies]` (dev
//! dependencies aside), and every crate of the workspace (`crates/*`, `python/`) has a line.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().and_then(Path::parent).expect("workspace root")
}

/// `crate dir name → rqvs crates it depends on` (short names, `rqvs-` dropped): the crates in
/// `crates/` and the Python package's extension in `python/`.
fn cargo_deps() -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    let crates = std::fs::read_dir(root().join("crates")).unwrap().map(|e| e.unwrap().path());
    for dir in crates.chain([root().join("python")]) {
        let Ok(toml) = std::fs::read_to_string(dir.join("Cargo.toml")) else { continue };
        let mut section = String::new();
        let mut deps = BTreeSet::new();
        for line in toml.lines().map(str::trim) {
            if line.starts_with('[') {
                section = line.to_string();
            } else if section == "[dependencies]" && line.starts_with("rqvs-") {
                let name = line.split(['.', ' ', '=']).next().unwrap();
                deps.insert(name.trim_start_matches("rqvs-").to_string());
            }
        }
        out.insert(dir.file_name().unwrap().to_string_lossy().into_owned(), deps);
    }
    out
}

/// The drawing's lines.
fn drawn() -> BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let block = text.split("```text").nth(1).and_then(|b| b.split("```").next()).expect("a text block");
    let mut out = BTreeMap::new();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let name = line.split_whitespace().next().unwrap().to_string();
        let deps: BTreeSet<String> = match line.split_once('←') {
            Some((_, rest)) => rest
                .split('(')
                .next()
                .unwrap()
                .split(',')
                .map(|d| d.trim().to_string())
                .filter(|d| !d.is_empty())
                .collect(),
            None => BTreeSet::new(),
        };
        out.insert(name, deps);
    }
    out
}

#[test]
fn the_layer_drawing_is_the_cargo_dependencies() {
    let mut cargo = cargo_deps();
    // The binary crate's directory is `cli`.
    assert!(cargo.contains_key("cli"));
    let drawn = drawn();
    cargo.retain(|k, _| k != "fuzz");
    assert_eq!(drawn, cargo, "ARCHITECTURE.md's drawing (left) differs from the Cargo.toml files (right)");
}
