//! The C side of librqvs, driven from `cargo test`: the C test suite (`examples/c/test_rqvs.c`)
//! built with the system `cc` under AddressSanitizer with leak detection and run on the shared
//! ClassBench data, the example programs (`classify.c` linked with the static library,
//! `bench.c`) and the README's C example built and run.
//!
//! The suite checks, through the C API, that every kind gives the reference's rule ids on every
//! packet of the 1K and 10K sets of all 12 seeds and on a sample of three 100K sets, also after
//! removing 10% of the rules and inserting them back (text and struct
//! form), and the live
//! NuevoMatchUP with lookups from two threads during the updates; then bad input. Its error
//! messages are compared here with the ones the `rqvs` command prints (the library crates').
//!
//! Without a C compiler the tests skip with a message, unless `RQVS_REQUIRE_NETNS=1` or `CI` is
//! set (`.ci/run`), where that is a failure. Without the ClassBench data the suite skips (a
//! failure under `RQVS_REQUIRE_DATA=1`).
//!
//! cargo builds `librqvs.so` and `librqvs.a` with these tests, beside the test binary
//! (`target/<profile>/deps`, wherever `CARGO_TARGET_DIR` puts it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rqvs_testkit::data;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The directory holding `librqvs.so` and `librqvs.a` of this build.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("deps dir").to_path_buf();
    let up = deps.parent().expect("profile dir").to_path_buf();
    [deps, up]
        .into_iter()
        .find(|d| d.join("librqvs.so").is_file() && d.join("librqvs.a").is_file())
        .unwrap_or_else(|| panic!("librqvs.so/librqvs.a not found beside {}", exe.display()))
}

/// True when `cc` runs; otherwise prints why the test is skipped (or fails, when CI requires it).
fn have_cc(test: &str) -> bool {
    match Command::new("cc").arg("--version").output() {
        Ok(o) if o.status.success() => true,
        other => {
            let reason = format!("no C compiler (cc: {:?})", other.map(|o| o.status));
            let required =
                std::env::var("RQVS_REQUIRE_NETNS").as_deref() == Ok("1") || std::env::var_os("CI").is_some();
            assert!(!required, "{test}: a C compiler is required here (RQVS_REQUIRE_NETNS=1 or CI) but: {reason}");
            eprintln!("skipping {test}: {reason}");
            false
        }
    }
}

/// A fresh directory for one test's files, removed when the test ends (also on failure).
fn work_dir(name: &str) -> rqvs_testkit::TempDir {
    rqvs_testkit::TempDir::new(&format!("capi-{name}"))
}

/// Compiles `examples/c/<src>` into `out` with `cc` and `flags`, linked with `link`.
fn compile(src: &str, out: &Path, flags: &[&str], link: &[String]) {
    let o = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-g"])
        .args(flags)
        .arg("-I")
        .arg(repo().join("include"))
        .arg(repo().join("examples/c").join(src))
        .args(link)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "cc {src} failed:\n{}", String::from_utf8_lossy(&o.stderr));
}

/// Links with the shared library, found at run time through an rpath.
fn shared_link() -> Vec<String> {
    let dir = lib_dir().display().to_string();
    vec![format!("-L{dir}"), "-lrqvs".into(), "-lpthread".into(), format!("-Wl,-rpath,{dir}")]
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// The message the suite printed as `message NAME: TEXT`.
fn message<'a>(stdout: &'a str, name: &str) -> &'a str {
    let tag = format!("message {name}: ");
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(tag.as_str()))
        .unwrap_or_else(|| panic!("the suite printed no message {name}:\n{stdout}"))
}

/// Runs the suite on `sets`, under AddressSanitizer with leak detection.
fn run_suite(test: &str, sets: &[String]) {
    if !have_cc(test) {
        return;
    }
    let Some(data) = data::classbench_dir() else { return };
    let work = work_dir(test);
    // The suite re-inserts rule lines as text: it reads them uncompressed.
    for set in sets {
        let name = set.split('@').next().unwrap();
        let (seed, size) = name.split_once('_').unwrap();
        let rules = rqvs_flow::io::read_text(&data::rules_path(&data, seed, size)).unwrap();
        std::fs::write(work.join(format!("{name}.rules")), rules).unwrap();
    }
    let exe = work.join("test_rqvs");
    compile("test_rqvs.c", &exe, &["-O1", "-fsanitize=address", "-fno-omit-frame-pointer"], &shared_link());
    let o = Command::new(&exe)
        .arg(work.path())
        .arg(&data)
        .args(sets)
        .env("ASAN_OPTIONS", "detect_leaks=1:halt_on_error=1:abort_on_error=0")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&o);
    println!("{stdout}");
    assert!(
        o.status.success() && stdout.trim_end().ends_with(" 0 failed"),
        "the C suite failed ({}):\n{stdout}\n{stderr}",
        o.status
    );
    assert!(!stderr.contains("Sanitizer"), "AddressSanitizer reported:\n{stderr}");
    for set in sets {
        assert!(stdout.contains(&format!("ok {set}:")), "no result for {set}:\n{stdout}");
    }
    assert!(stdout.contains("ok bad input"));

    // The messages are the rqvs command's, word for word.
    let cli = |path: &Path| rqvs_flow::formats::read_rules(path).unwrap_err().to_string();
    assert_eq!(message(&stdout, "missing_file"), cli(Path::new("/nonexistent/rules.txt")));
    assert_eq!(message(&stdout, "malformed_file"), cli(&work.join("bad.rules")));
    assert_eq!(message(&stdout, "malformed_file_live"), cli(&work.join("bad.rules")));
    assert!(message(&stdout, "malformed_file").contains("bad.rules:2:35: expected ':'"));
    assert_eq!(message(&stdout, "unknown_kind"), rqvs_classify::build_by_name("bogus", &[]).err().unwrap());
    let trace = work.join("bad.trace");
    assert_eq!(
        message(&stdout, "malformed_trace"),
        rqvs_experiment::inputs::load_packets(Some(&trace), 1).err().unwrap().to_string()
    );
    assert!(message(&stdout, "malformed_insert").starts_with("rule:1:"));
    assert!(message(&stdout, "corrupt_model").contains("corrupt.nmu: model file is truncated"));
    assert_eq!(message(&stdout, "null_path"), "rules_path is NULL");
}

/// Bad input, the 1K sets of all 12 seeds, and a sample of about 5,000 packets of three 100K sets.
#[test]
fn c_suite_1k_and_100k_sample_under_asan() {
    let mut sets: Vec<String> = data::SEEDS.iter().map(|s| format!("{s}_1k")).collect();
    sets.extend(["acl1_100k@5000", "fw1_100k@5000", "ipc1_100k@5000"].map(String::from));
    run_suite("c_suite_1k", &sets);
}

/// The 10K sets of all 12 seeds, about 20,000 packets of each trace (and bad input again).
/// Every packet of these traces is checked against the reference on the Rust side
/// (`crates/classify/tests/classbench_sets.rs`); here the sample keeps the OpenFlow kind's
/// tuple-space lookups (~35 µs a packet on fw1) from being most of CI's time.
#[test]
fn c_suite_10k_under_asan() {
    let sets: Vec<String> = data::SEEDS.iter().map(|s| format!("{s}_10k@20000")).collect();
    run_suite("c_suite_10k", &sets);
}

/// The README's C example compiles, runs from the checkout's root and prints what the README
/// says it prints.
#[test]
fn readme_example_runs() {
    if !have_cc("readme_example_runs") {
        return;
    }
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let section = &readme[readme.find("## The C library").expect("README has the C library section")..];
    let code = section.split("cat > hello.c <<'EOF'\n").nth(1).and_then(|r| r.split("\nEOF\n").next()).unwrap();
    let printed = section.split("prints\n```text\n").nth(1).and_then(|r| r.split("```").next()).unwrap();
    let work = work_dir("readme");
    std::fs::write(work.join("hello.c"), code).unwrap();
    let o = Command::new("cc")
        .arg("-I")
        .arg(repo().join("include"))
        .arg(work.join("hello.c"))
        .args(shared_link())
        .arg("-o")
        .arg(work.join("hello"))
        .output()
        .unwrap();
    assert!(o.status.success(), "the README's example does not compile:\n{}", text(&o).1);
    let o = Command::new(work.join("hello")).current_dir(repo()).output().unwrap();
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "the README's example failed:\n{stdout}\n{stderr}");
    assert_eq!(stdout, printed, "the README's example prints something else");
}

/// The example, linked with the static library, classifies the embedded acl1_1k workload as the
/// Rust classifier does; the benchmark builds and runs (once, untimed).
#[test]
fn example_and_bench_build_and_run() {
    if !have_cc("example_and_bench_build_and_run") {
        return;
    }
    let work = work_dir("example");
    let rules = repo().join("data/default/acl1_1k_rules.xz");
    let trace = repo().join("data/default/acl1_1k_trace.xz");
    let lib = lib_dir();
    // `rustc --print native-static-libs` for librqvs.a (xz2 links the system liblzma).
    let mut static_link = vec![lib.join("librqvs.a").display().to_string()];
    static_link.extend(["-llzma", "-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl"].map(String::from));
    compile("classify.c", &work.join("classify"), &["-O2"], &static_link);
    let o = Command::new(work.join("classify")).arg(&rules).arg(&trace).arg("tm").output().unwrap();
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "classify failed:\n{stdout}\n{stderr}");

    let r = rqvs_flow::formats::read_rules(&rules).unwrap();
    let keys = rqvs_experiment::inputs::load_packets(Some(&trace), 1).unwrap().entries;
    let c = rqvs_classify::build_by_name("tm", &r).unwrap();
    let matched = keys.iter().filter(|e| c.lookup(&e.key).is_some()).count();
    let first = c.lookup(&keys[0].key).map_or(-1, |id| i64::from(id.0));
    let want = format!("tm: {} rules, {} packets, {matched} matched", r.len(), keys.len());
    assert_eq!(stdout.lines().last(), Some(want.as_str()), "{stdout}");
    assert!(stdout.lines().next().unwrap().ends_with(&format!(": rule {first}")), "{stdout}");

    // A bad path: the CLI's message, exit status 1.
    let o = Command::new(work.join("classify")).arg("/nonexistent/rules").arg(&trace).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o).1.trim_end(),
        format!("error: {}", rqvs_flow::formats::read_rules(Path::new("/nonexistent/rules")).unwrap_err())
    );

    compile("bench.c", &work.join("bench"), &["-O2"], &shared_link());
    let o = Command::new(work.join("bench")).arg(&rules).arg(&trace).arg("nmu").arg("1").output().unwrap();
    let (stdout, stderr) = text(&o);
    assert!(o.status.success() && stdout.contains("Mpps through the C API"), "bench failed:\n{stdout}\n{stderr}");
}
