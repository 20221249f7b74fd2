//! Records where this build came from, for every report's provenance (`crate::report::BUILD`):
//! the git revision and dirty flag of the checkout the crate is built from, and the cargo profile.
//!
//! The revision is looked for, in order:
//! 1. `RQVS_GIT_REV` in the build's environment (a packager building from a tarball; `RQVS_GIT_DIRTY`
//!    = `true`/`false` may go with it);
//! 2. the git checkout this crate is part of — only when the repository's top level is this
//!    workspace's root, so a copy of the crate vendored into another repository does not record
//!    that repository's commit;
//! 3. `.cargo_vcs_info.json`, which `cargo package` writes into a published crate (a build from
//!    crates.io);
//!
//! and otherwise is `unknown`, with the reason in `RQVS_GIT_REV_SOURCE`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let profile = std::env::var("PROFILE").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rerun-if-env-changed=RQVS_GIT_REV");
    println!("cargo:rerun-if-env-changed=RQVS_GIT_DIRTY");
    let (rev, dirty, source) = revision(&manifest);
    println!("cargo:rustc-env=RQVS_GIT_REV={rev}");
    println!("cargo:rustc-env=RQVS_GIT_DIRTY={}", dirty.map_or("unknown", |d| if d { "true" } else { "false" }));
    println!("cargo:rustc-env=RQVS_GIT_REV_SOURCE={source}");
    println!("cargo:rustc-env=RQVS_BUILD_PROFILE={profile}");
}

/// (revision, dirty, where it came from).
fn revision(manifest: &Path) -> (String, Option<bool>, String) {
    if let Ok(rev) = std::env::var("RQVS_GIT_REV") {
        let dirty = std::env::var("RQVS_GIT_DIRTY").ok().and_then(|d| d.parse().ok());
        return (rev.trim().to_string(), dirty, "RQVS_GIT_REV at build time".into());
    }
    let git_reason = match from_git(manifest) {
        Ok((rev, dirty)) => return (rev, Some(dirty), "git checkout at build time".into()),
        Err(why) => why,
    };
    if let Some((rev, dirty)) = from_vcs_info(&manifest.join(".cargo_vcs_info.json")) {
        return (rev, dirty, ".cargo_vcs_info.json (a packaged crate)".into());
    }
    ("unknown".into(), None, format!("unknown: {git_reason}, and no .cargo_vcs_info.json"))
}

fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .map_err(|e| format!("git could not be run ({e})"))?;
    if !out.status.success() {
        return Err("not built from a git checkout".into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The revision and dirty flag of the checkout whose top level is this workspace's root; the
/// files that change with them are watched.
fn from_git(manifest: &Path) -> Result<(String, bool), String> {
    let root = manifest.join("../..").canonicalize().map_err(|e| format!("no workspace root ({e})"))?;
    let top = git(manifest, &["rev-parse", "--show-toplevel"])?;
    if Path::new(&top).canonicalize().ok().as_deref() != Some(root.as_path()) {
        return Err(format!("the enclosing git repository ({top}) is not rqvs's checkout"));
    }
    let rev = git(manifest, &["rev-parse", "--short=12", "HEAD"])?;
    // `--no-optional-locks`: a status refreshes the index's stat cache when it may, which would
    // make the next cargo run see the index changed and build again.
    let status = git(&root, &["--no-optional-locks", "status", "--porcelain", "--untracked-files=no"])?;
    // Rerun when HEAD moves, a branch moves, or any source changes (the dirty flag): the git
    // directory's files and the workspace's sources, never the target directory. Not the index:
    // any `git status` may rewrite it (its stat cache) with nothing changed, and each rewrite
    // rebuilt every crate above this one (a CI run's `cargo run` steps took minutes each);
    // staging changes no source, and a commit moves the branch. Only paths that exist: cargo
    // takes a missing one as changed on every build (a checkout without `packed-refs` rebuilt
    // everything above this crate on every `cargo run`). A branch whose loose ref goes into
    // `packed-refs` deletes the watched file, which reruns this; a branch held only in
    // `packed-refs` gets its loose ref back at the next commit, in the directory watched in its
    // stead (`refs/heads`: cargo looks at every file under it).
    let watch = |name: &str, or_its_directory: bool| {
        let Ok(f) = git(manifest, &["rev-parse", "--git-path", name]) else { return };
        let f = abs(manifest, &f);
        let watched = if f.exists() || !or_its_directory { Some(f.as_path()) } else { f.parent() };
        if let Some(w) = watched.filter(|w| w.exists()) {
            println!("cargo:rerun-if-changed={}", w.display());
        }
    };
    watch("HEAD", false);
    if let Ok(refname) = git(manifest, &["symbolic-ref", "-q", "HEAD"]) {
        watch(&refname, true);
        watch("packed-refs", false);
    }
    // What makes up the binaries: each crate's sources and manifest, the embedded data (a test
    // edited does not rerun this; the flag says whether what was built differs from the commit).
    let mut watch: Vec<PathBuf> =
        ["python/src", "Cargo.toml", "Cargo.lock", "data"].iter().map(|d| root.join(d)).collect();
    if let Ok(crates) = std::fs::read_dir(root.join("crates")) {
        for c in crates.flatten() {
            watch.extend([c.path().join("src"), c.path().join("Cargo.toml"), c.path().join("build.rs")]);
        }
    }
    for p in watch.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    Ok((rev, !status.is_empty()))
}

fn abs(base: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// The `sha1` and `dirty` of `cargo package`'s `.cargo_vcs_info.json`.
fn from_vcs_info(path: &Path) -> Option<(String, Option<bool>)> {
    println!("cargo:rerun-if-changed={}", path.display());
    let text = std::fs::read_to_string(path).ok()?;
    let field = |name: &str| {
        let at = text.find(&format!("\"{name}\""))? + name.len() + 2;
        let rest = text[at..].trim_start().strip_prefix(':')?.trim_start();
        Some(rest.split([',', '}', '\n']).next()?.trim().trim_matches('"').to_string())
    };
    let sha = field("sha1")?;
    let short: String = sha.chars().take(12).collect();
    Some((short, field("dirty").and_then(|d| d.parse().ok()).or(Some(false))))
}
