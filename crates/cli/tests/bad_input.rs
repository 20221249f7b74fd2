//! Bad input against every command (issue 22): each case runs the `rqvs` binary under an address
//! space limit and checks its exit code, its one-line message, that it did not panic or die of a
//! signal, and its peak memory (the child's `ru_maxrss`, from `wait4`). The table holds every
//! fault the bad-input campaign found and their neighbours (other commands with the same
//! pattern); further tests check a full and a closed stdout on every command, `--json -` on every
//! command, updates a run does not reach, and long runs saying so.

mod common;

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The address space each child gets: past it an allocation fails (an abort, which the checks
/// below report) instead of the machine swapping or the OOM killer choosing a victim.
const ADDRESS_SPACE: u64 = 6 << 30;
/// The peak resident memory a case may reach unless it says otherwise.
const PEAK_MB: u64 = 400;

/// Where the child's stdout goes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Stdout {
    /// A pipe we read.
    Pipe,
    /// `/dev/full`: every write fails with `ENOSPC`.
    Full,
    /// A pipe whose read end is closed before the child writes: `EPIPE`.
    Closed,
}

struct Outcome {
    code: Option<i32>,
    signal: Option<i32>,
    stdout: String,
    stderr: String,
    peak_mb: u64,
}

impl Outcome {
    fn describe(&self) -> String {
        format!(
            "exit {:?}, signal {:?}, peak {} MB\nstderr: {}\nstdout (start): {}",
            self.code,
            self.signal,
            self.peak_mb,
            self.stderr,
            &self.stdout[..self.stdout.len().min(600)]
        )
    }
}

/// Runs `rqvs args` with `stdout` and the address-space limit; waits with `wait4` for its
/// resource usage.
// The child is reaped by `wait4` (which gives its resource usage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn run(args: &[String], stdout: Stdout) -> Outcome {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rqvs"));
    cmd.args(args).stdin(Stdio::null()).stderr(Stdio::piped());
    match stdout {
        Stdout::Pipe | Stdout::Closed => cmd.stdout(Stdio::piped()),
        Stdout::Full => cmd.stdout(std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full")),
    };
    // SAFETY: between fork and exec the closure only calls setrlimit, which is async-signal-safe
    // and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit { rlim_cur: ADDRESS_SPACE, rlim_max: ADDRESS_SPACE };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("spawn rqvs");
    let out = child.stdout.take();
    let out_reader = match stdout {
        Stdout::Closed => {
            drop(out);
            None
        }
        _ => out.map(|mut o| {
            std::thread::spawn(move || {
                let mut s = Vec::new();
                let _ = o.read_to_end(&mut s);
                s
            })
        }),
    };
    let mut err = child.stderr.take().expect("stderr piped");
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let (mut status, mut usage) = (0i32, std::mem::MaybeUninit::<libc::rusage>::zeroed());
    // SAFETY: waits for our own child, writing into the two locals; `usage` is a plain C struct
    // that wait4 fills (zeroed before, so it is initialised either way).
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, usage.as_mut_ptr()) };
    assert_eq!(pid, child.id() as libc::pid_t, "wait4: {}", std::io::Error::last_os_error());
    // SAFETY: zero-initialised above and filled by wait4.
    let usage = unsafe { usage.assume_init() };
    let stdout = out_reader.map(|h| h.join().unwrap()).unwrap_or_default();
    let stderr = err_reader.join().unwrap();
    Outcome {
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        peak_mb: usage.ru_maxrss as u64 / 1024,
    }
}

/// The inputs the cases use, written once into one directory (in cargo's temporary directory
/// for integration tests, under the target directory: the tests of this binary share it, so
/// it outlives each of them and is rewritten by the next run).
struct Files {
    dir: PathBuf,
}

fn data(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/default").join(name).display().to_string()
}

const RULES: &str = "@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0000/0x0000\t\n\
@10.1.0.0/16\t192.168.0.0/16\t1024 : 65535\t0 : 65535\t0x11/0xFF\t0x0000/0x0000\t\n\
@0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000\t\n";
const TRACE: &str = "167772161\t1\t1000\t80\t6\t0\t0\n167837697\t3232235521\t2000\t53\t17\t0\t1\n";

fn files() -> &'static Files {
    static FILES: OnceLock<Files> = OnceLock::new();
    FILES.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bad_input");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let w = |name: &str, bytes: &[u8]| std::fs::write(dir.join(name), bytes).unwrap();
        w("rules.cb", RULES.as_bytes());
        w("trace.cb", TRACE.as_bytes());
        w("hash.cb", format!("# rules exported by hand\n{RULES}").as_bytes());
        w("bom.cb", [&b"\xef\xbb\xbf"[..], RULES.as_bytes()].concat().as_slice());
        w("hash_trace.cb", format!("# a comment\n{TRACE}").as_bytes());
        w("bom_trace.cb", [&b"\xef\xbb\xbf"[..], TRACE.as_bytes()].concat().as_slice());
        w("frobnicate.of", b"priority=1,tcp,actions=frobnicate:1\n");
        w("big_output.of", b"priority=1,tcp,actions=output:99999999999\n");
        w("bare_port.of", b"priority=1,tcp,actions=99999999999\n");
        w("exact_ports.of", b"priority=5,tcp,nw_src=10.0.0.0/8,tp_src=80,tp_dst=0x400/0xfc00,actions=drop\n");
        // 3,000 rules of two wide port ranges: 30 × 30 prefixes each, 2.7M OpenFlow flows.
        let wide: String = (0..3000)
            .map(|i| {
                format!(
                    "@{}.{}.0.0/16\t0.0.0.0/0\t1 : 65534\t1 : 65534\t0x06/0xFF\t0x0000/0x0000\t\n",
                    i / 256 + 1,
                    i % 256
                )
            })
            .collect();
        w("wide.cb", wide.as_bytes());
        // A model, cut inside its header, and with a byte after its checksum.
        let model = dir.join("model.nmu");
        let out = run(&s(&["train", "--out", model.to_str().unwrap()]), Stdout::Pipe);
        assert_eq!(out.code, Some(0), "train: {}", out.describe());
        let bytes = std::fs::read(&model).unwrap();
        w("model_12.nmu", &bytes[..12]);
        w("model_19.nmu", &bytes[..19]);
        w("model_trailing.nmu", &[&bytes[..], b"\0"].concat());
        // 260 MiB of zeros as xz (about 40 KB): past the input limit once decompressed.
        let mut enc = liblzma::write::XzEncoder::new(Vec::new(), 1);
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..260 {
            std::io::Write::write_all(&mut enc, &zeros).unwrap();
        }
        w("bomb.xz", &enc.finish().unwrap());
        // Captures of each link type rqvs reads, cut inside the data of their second record, and
        // one of a link type it does not read (147, USER0).
        use rqvs_flow::formats::pcap::{LinkType, PcapWriter};
        for (name, link) in [
            ("eth", LinkType::Ethernet),
            ("raw", LinkType::Raw),
            ("ipv4", LinkType::Ipv4),
            ("null", LinkType::Null),
            ("loop", LinkType::Loop),
            ("sll", LinkType::LinuxSll),
            ("sll2", LinkType::LinuxSll2),
        ] {
            let mut pw = PcapWriter::new(Vec::new(), link).unwrap();
            for k in [rqvs_flow::FlowKey::ipv4(0x0a00_0001, 1, 6, 1000, 80); 2] {
                pw.write_key(&k, None).unwrap();
            }
            let (bytes, _) = pw.finish().unwrap();
            w(&format!("cut_{name}.pcap"), &bytes[..bytes.len() - 5]);
            if link == LinkType::Ethernet {
                let mut user = bytes.clone();
                user[20] = 147;
                w("user.pcap", &user);
            }
        }
        Files { dir }
    })
}

fn s(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// `@name` is a file of [`files`], `%name` one of the repository's data/default.
fn expand(args: &[&str]) -> Vec<String> {
    let f = files();
    args.iter()
        .map(|a| match (a.strip_prefix('@'), a.strip_prefix('%')) {
            (Some(n), _) => f.dir.join(n).display().to_string(),
            (_, Some(n)) => data(n),
            _ => a.to_string(),
        })
        .collect()
}

/// One bad input: the command, the exit code, what its one-line message says (for exit 0, what
/// its output says), and the most memory it may take.
struct Case {
    name: &'static str,
    args: &'static [&'static str],
    code: i32,
    says: &'static str,
    peak_mb: u64,
}

const fn case(name: &'static str, args: &'static [&'static str], code: i32, says: &'static str) -> Case {
    Case { name, args, code, says, peak_mb: PEAK_MB }
}

/// The checks every outcome gets: no panic, no signal, the exit code, the message on one line.
fn check(name: &str, out: &Outcome, code: i32, says: &str) -> Result<(), String> {
    let fail = |why: &str| Err(format!("{name}: {why}\n{}", out.describe()));
    if out.stderr.contains("panicked") || out.code == Some(101) {
        return fail("panicked");
    }
    if out.signal.is_some() {
        return fail("killed by a signal (an abort: memory?)");
    }
    if out.code != Some(code) {
        return fail(&format!("expected exit code {code}"));
    }
    match code {
        0 => {
            if !(out.stdout.contains(says) || out.stderr.contains(says)) {
                return fail(&format!("expected the output to say {says:?}"));
            }
        }
        // clap's usage errors: one `error:` line, then a hint.
        2 => {
            let first = out.stderr.lines().next().unwrap_or_default();
            if !first.starts_with("error: ") || !first.contains(says) {
                return fail(&format!("expected a first line 'error: …{says}…'"));
            }
            if out.stderr.lines().filter(|l| l.contains("error")).count() != 1 {
                return fail("expected one error line");
            }
        }
        _ => {
            let errors: Vec<&str> = out.stderr.lines().filter(|l| l.starts_with("rqvs: error:")).collect();
            if errors.len() != 1 || !errors[0].contains(says) {
                return fail(&format!("expected one line 'rqvs: error: …{says}…'"));
            }
            if out.stderr.lines().any(|l| !l.starts_with("rqvs")) {
                return fail("expected nothing on stderr but rqvs's own lines");
            }
        }
    }
    Ok(())
}

const RANGE: &str = "is out of the range";
/// An EMC size that is not a power of two from 2 to 2^21.
const EMC_ENTRIES: &str = "expected a power of two from 2 to 2097152 (2^21), found";

/// Every case of issue 22 and its neighbours.
const CASES: &[Case] = &[
    // Panics (exit 101 before).
    case("bench with no rules", &["bench", "classifiers", "--rules", "/dev/null", "--min-ms", "1"], 0, "0 rules"),
    case("classify with no rules", &["classify", "--rules", "/dev/null"], 0, "0 rules"),
    case("replay with no rules", &["replay", "--rules", "/dev/null"], 0, "0 rules"),
    case(
        "gen rules count u64::MAX",
        &["gen", "rules", "--seed-file", "acl1", "--count", "18446744073709551615"],
        2,
        RANGE,
    ),
    case(
        "gen trace packets u64::MAX",
        &["gen", "trace", "--rules", "@rules.cb", "--packets", "18446744073709551615"],
        2,
        RANGE,
    ),
    case(
        "gen updates ops u64::MAX",
        &["gen", "updates", "--rules", "@rules.cb", "--fraction", "0.5", "--ops", "18446744073709551615"],
        2,
        RANGE,
    ),
    // Aborts for memory (counts and inputs get limits).
    case(
        "gen rules count 1e9",
        &["gen", "rules", "--seed-file", "acl1", "--count", "1000000000"],
        2,
        "1 ≤ x ≤ 10000000",
    ),
    case(
        "gen trace packets 1e9",
        &["gen", "trace", "--rules", "@rules.cb", "--packets", "1000000000"],
        2,
        "1 ≤ x ≤ 10000000",
    ),
    case(
        "gen updates ops 1e9",
        &["gen", "updates", "--rules", "@rules.cb", "--fraction", "0.5", "--ops", "1000000000"],
        2,
        "1 ≤ x ≤ 10000000",
    ),
    case(
        "gen coflows 1e9",
        &["gen", "coflows", "--dist", "rpc", "--coflowiness", "0.5", "--coflows", "1000000000", "--out", "/dev/null"],
        2,
        RANGE,
    ),
    case(
        "gen coflows 1e6 + 1",
        &["gen", "coflows", "--dist", "rpc", "--coflowiness", "0.5", "--coflows", "1000001", "--out", "/dev/null"],
        2,
        "1 ≤ x ≤ 1000000",
    ),
    case("max associated 9", &["coflows", "--dist", "rpc", "--max-associated", "9"], 2, "1 ≤ x ≤ 8"),
    Case {
        peak_mb: 700,
        ..case(
            "xz bomb as rules",
            &["classify", "--rules", "@bomb.xz"],
            1,
            "decompresses to more than the input limit of 256 MiB",
        )
    },
    Case {
        peak_mb: 700,
        ..case(
            "xz bomb as trace (streamed: no size limit, a line limit)",
            &["replay", "--trace", "@bomb.xz"],
            1,
            "bomb.xz:1:1: expected a trace line, found a line longer than 65536 bytes",
        )
    },
    Case {
        peak_mb: 700,
        ..case("xz bomb to convert", &["convert", "rules", "@bomb.xz", "--to", "ofctl"], 1, "input limit of 256 MiB")
    },
    case(
        "cut Ethernet capture",
        &["replay", "--trace", "@cut_eth.pcap"],
        1,
        "cut_eth.pcap: packet 2 (byte 100): capture ends inside the packet data",
    ),
    case(
        "cut raw capture",
        &["replay", "--trace", "@cut_raw.pcap"],
        1,
        "cut_raw.pcap: packet 2 (byte 86): capture ends inside the packet data",
    ),
    case(
        "cut ipv4 capture",
        &["classify", "--trace", "@cut_ipv4.pcap"],
        1,
        "cut_ipv4.pcap: packet 2 (byte 86): capture ends inside the packet data",
    ),
    case(
        "cut null capture",
        &["convert", "trace", "@cut_null.pcap", "--to", "classbench"],
        1,
        "cut_null.pcap: packet 2 (byte 90): capture ends",
    ),
    case(
        "cut loop capture",
        &["trace", "--rules", "@rules.cb", "--trace", "@cut_loop.pcap"],
        1,
        "cut_loop.pcap: packet 2 (byte 90): capture ends",
    ),
    case(
        "cut sll capture",
        &["gen", "map", "--rules", "@rules.cb", "--pcap", "@cut_sll.pcap", "--out", "/dev/null"],
        1,
        "cut_sll.pcap: packet 2 (byte 102): capture ends",
    ),
    case(
        "cut sll2 capture",
        &["replay", "--trace", "@cut_sll2.pcap"],
        1,
        "cut_sll2.pcap: packet 2 (byte 106): capture ends",
    ),
    case(
        "unknown link type",
        &["replay", "--trace", "@user.pcap"],
        1,
        "user.pcap: link type 147 (USER) is not one rqvs reads (it reads ETHERNET (1), RAW (101)",
    ),
    case("/dev/zero as rules", &["classify", "--rules", "/dev/zero"], 1, "holds more than the input limit of 256 MiB"),
    case(
        "/dev/zero as trace",
        &["classify", "--trace", "/dev/zero"],
        1,
        "/dev/zero:1:1: expected a trace line, found a line longer than 65536 bytes",
    ),
    case("/dev/zero as model", &["classify", "--model", "/dev/zero"], 1, "input limit of 256 MiB"),
    case(
        "/dev/zero as pcap",
        &["gen", "map", "--rules", "@rules.cb", "--pcap", "/dev/zero", "--out", "/dev/null"],
        1,
        "/dev/zero: not a pcap or pcapng capture: the file starts with 00 00 00 00",
    ),
    case("/dev/zero to trace", &["trace", "--rules", "/dev/zero", "tcp"], 1, "input limit of 256 MiB"),
    Case {
        // Streamed, not read whole (issue 40): the header says it is no capture.
        peak_mb: 256,
        ..case(
            "/dev/zero as a switch's pcap-in",
            &["switch", "--port", "pcap-in:/dev/zero", "--port", "pcap-out:/dev/null"],
            1,
            "/dev/zero: not a pcap or pcapng capture",
        )
    },
    Case {
        peak_mb: 1200,
        ..case(
            "wide ranges: trace --trace",
            &["trace", "--rules", "@wide.cb", "--trace", "@trace.cb"],
            1,
            "limit of 2000000 OpenFlow flows",
        )
    },
    Case {
        peak_mb: 1200,
        ..case(
            "wide ranges: convert",
            &["convert", "rules", "@wide.cb", "--to", "ofctl", "-o", "/dev/null"],
            1,
            "limit of 2000000 OpenFlow flows",
        )
    },
    Case {
        // The slow path's table holds 2M expanded entries when the limit stops it: 1.5 GB here
        // with 40-byte keys, 2.4 GB since the wide key (112-byte keys in each part's value, mask
        // and peer index; the subtables' hash keys stay 40 bytes for 5-tuple masks).
        peak_mb: 2600,
        ..case(
            "wide ranges: replay orig",
            &["replay", "--design", "orig", "--rules", "@wide.cb", "--trace", "@trace.cb"],
            1,
            "wide.cb: orig: rule",
        )
    },
    Case {
        peak_mb: 1200,
        ..case(
            "wide ranges: tss",
            &["classify", "--rules", "@wide.cb", "--trace", "@trace.cb", "--classifier", "tss"],
            1,
            "limit of 2000000 expanded entries",
        )
    },
    // Silent or wrong results.
    case("update not reached", &["replay", "--updates", "add:60@7s"], 0, "add 60 rules at 7 s: NOT REACHED"),
    case(
        "update not reached, compare",
        &["compare", "--designs", "orig,cflows", "--updates", "add:60@7s"],
        0,
        "NOT REACHED",
    ),
    case("held-out rules in the header", &["replay", "--updates", "add:60@7s"], 0, "867 at the start, 60 held out"),
    case(
        "deleting more than the table",
        &["replay", "--updates", "del:100000@0s"],
        1,
        "deletes 100000 rules, but the table holds 927",
    ),
    case(
        "deleting more after adds",
        &["compare", "--updates", "add:10@0s,del:1000@1ms"],
        1,
        "deletes 1000 rules, but the table holds 927",
    ),
    case("duration 0", &["replay", "--duration", "0"], 2, RANGE),
    case("duration NaN", &["replay", "--duration", "NaN"], 2, RANGE),
    case("duration NaN, compare", &["compare", "--duration", "NaN"], 2, RANGE),
    case("duration inf", &["replay", "--duration", "inf"], 2, RANGE),
    case("threshold NaN", &["replay", "--retrain-threshold", "NaN"], 2, RANGE),
    case("threshold 2", &["replay", "--retrain-threshold", "2"], 2, RANGE),
    case("bench updates threshold 2", &["bench", "updates", "--threshold", "2"], 2, RANGE),
    case("bench updates seconds NaN", &["bench", "updates", "--seconds", "NaN"], 2, RANGE),
    case("update fraction NaN", &["bench", "classifiers", "--update-fraction", "NaN"], 2, RANGE),
    case("update fraction 2", &["bench", "classifiers", "--update-fraction", "2"], 2, RANGE),
    case("gen updates fraction NaN", &["gen", "updates", "--rules", "@rules.cb", "--fraction", "NaN"], 2, RANGE),
    case("emc prob -1", &["replay", "--emc-prob=-1"], 2, RANGE),
    case("emc prob NaN, coflows", &["coflows", "--dist", "rpc", "--emc-prob", "NaN"], 2, RANGE),
    case("emc prob 2, switch", &["switch", "--emc-prob", "2"], 2, RANGE),
    case("emc entries 1000", &["replay", "--emc-entries", "1000"], 2, EMC_ENTRIES),
    case("emc entries 1", &["compare", "--emc-entries", "1"], 2, EMC_ENTRIES),
    case("emc entries 2^22, switch", &["switch", "--emc-entries", "4194304"], 2, EMC_ENTRIES),
    case("emc entries x", &["replay", "--emc-entries", "x"], 2, "a power of two from 2 to 2097152"),
    case("rate NaN", &["replay", "--rate", "NaN"], 2, RANGE),
    case("passes 0", &["replay", "--passes", "0"], 2, RANGE),
    case("pmds 0", &["replay", "--pmds", "0"], 2, RANGE),
    case("max share 2", &["gen", "trace", "--rules", "@rules.cb", "--packets", "10", "--max-share", "2"], 2, RANGE),
    case("addr scope -2", &["gen", "rules", "--seed-file", "acl1", "--count", "10", "--addr-scope", "-2"], 2, RANGE),
    case(
        "coflowiness 1.5",
        &["gen", "coflows", "--dist", "rpc", "--coflowiness", "1.5", "--out", "/dev/null"],
        2,
        RANGE,
    ),
    case("unknown action", &["convert", "rules", "@frobnicate.of", "--to", "ofctl"], 1, "unknown action 'frobnicate'"),
    case(
        "unknown action, --actions",
        &["convert", "rules", "@rules.cb", "--to", "ofctl", "--actions", "frobnicate:1"],
        1,
        "unknown action 'frobnicate'",
    ),
    case("unknown action, trace", &["trace", "--rules", "@frobnicate.of", "tcp"], 1, "unknown action 'frobnicate'"),
    case("unknown action, replay", &["replay", "--rules", "@frobnicate.of"], 1, "unknown action 'frobnicate'"),
    case(
        "output port too big",
        &["convert", "rules", "@big_output.of", "--to", "ofctl"],
        1,
        "expected a port number 1..0xffffff00 or LOCAL, found '99999999999'",
    ),
    case(
        "bare port too big",
        &["convert", "rules", "@bare_port.of", "--to", "ofctl"],
        1,
        "expected a port number 1..0xffffff00, found '99999999999'",
    ),
    case(
        "exact ports to classbench",
        &["convert", "rules", "@exact_ports.of", "--to", "classbench"],
        0,
        "80 : 80\t1024 : 2047",
    ),
    case("'#' line in ClassBench rules", &["convert", "rules", "@hash.cb", "--to", "ofctl"], 0, "3 rules → 8 flows"),
    case("BOM in ClassBench rules", &["convert", "rules", "@bom.cb", "--to", "ofctl"], 0, "3 rules → 8 flows"),
    case("'#' line, classify", &["classify", "--rules", "@hash.cb", "--trace", "@trace.cb"], 0, "3 rules"),
    case("'#' line in a trace", &["classify", "--rules", "@rules.cb", "--trace", "@hash_trace.cb"], 0, "2 packets"),
    case("BOM in a trace", &["classify", "--rules", "@rules.cb", "--trace", "@bom_trace.cb"], 0, "2 packets"),
    case(
        "model of 12 bytes",
        &["classify", "--model", "@model_12.nmu"],
        1,
        "model file is truncated: 8 more bytes needed at byte 12",
    ),
    case("model of 19 bytes", &["classify", "--model", "@model_19.nmu"], 1, "model file is truncated"),
    case(
        "model with a trailing byte",
        &["classify", "--model", "@model_trailing.nmu"],
        1,
        "1 bytes after the checksum",
    ),
    case("not a model", &["classify", "--model", "@rules.cb"], 1, "bad magic"),
    // Usage errors: exit code 2.
    case("unknown classifier", &["classify", "--classifier", "foo"], 2, "invalid value 'foo' for '--classifier"),
    case("unknown classifier, bench", &["bench", "classifiers", "--classifiers", "ref,foo"], 2, "invalid value 'foo'"),
    case("unknown dist", &["coflows", "--dist", "foo"], 2, "invalid value 'foo' for '--dist"),
    case(
        "unknown dist, gen",
        &["gen", "coflows", "--dist", "foo", "--coflowiness", "0.5", "--out", "/dev/null"],
        2,
        "invalid value 'foo'",
    ),
    case("unknown design", &["replay", "--design", "foo"], 2, "invalid value 'foo'"),
    case(
        "trace with no packet",
        &["trace", "--rules", "@rules.cb"],
        2,
        "the following required arguments were not provided",
    ),
];

#[test]
fn every_bad_input_is_a_clear_error_in_bounded_memory() {
    let mut failures = Vec::new();
    for c in CASES {
        let out = run(&expand(c.args), Stdout::Pipe);
        if let Err(e) = check(c.name, &out, c.code, c.says) {
            failures.push(e);
        } else if out.peak_mb > c.peak_mb {
            failures.push(format!("{}: peak {} MB, more than {} MB", c.name, out.peak_mb, c.peak_mb));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n\n{}", failures.len(), CASES.len(), failures.join("\n\n"));
}

/// Every command that prints a report, with arguments that make it quick.
const COMMANDS: &[&[&str]] = &[
    &[],
    &["classify"],
    &["replay"],
    &["compare", "--designs", "orig,cflows"],
    &["trace", "--rules", "@rules.cb", "tcp,nw_src=10.1.2.3,tp_dst=80"],
    &["trace", "--rules", "@rules.cb", "--trace", "@trace.cb"],
    &["train", "--out", "@out.nmu"],
    &["bench", "classifiers", "--min-ms", "1"],
    &["bench", "updates", "--seconds", "0.2"],
    &["gen", "rules", "--seed-file", "acl1", "--count", "200"],
    &["gen", "trace", "--rules", "@rules.cb", "--packets", "100"],
    &["gen", "updates", "--rules", "%acl1_1k_rules.xz", "--fraction", "0.1"],
    &["gen", "coflows", "--dist", "rpc", "--coflowiness", "0.5", "--coflows", "20", "--out", "@out.pcap"],
    &["coflows", "--dist", "rpc", "--coflows", "20", "--coflowiness", "0.5", "--predict", "off,online"],
    &["convert", "rules", "%acl1_1k_rules.xz", "--to", "ofctl"],
    &["convert", "rules", "%acl1_1k_rules.xz", "--to", "classbench"],
    &["convert", "trace", "%acl1_1k_trace.xz", "--to", "classbench"],
    &["--help"],
];

#[test]
fn a_full_stdout_is_a_one_line_error_on_every_command() {
    let mut failures = Vec::new();
    for args in COMMANDS {
        let out = run(&expand(args), Stdout::Full);
        if let Err(e) = check(&format!("{args:?} > /dev/full"), &out, 1, "stdout: No space left on device") {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let mut failures = Vec::new();
    for args in COMMANDS {
        let out = run(&expand(args), Stdout::Closed);
        let noise: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| l.contains("error") || l.contains("panicked") || l.contains("Broken pipe"))
            .collect();
        if out.code != Some(0) || out.signal.is_some() || !noise.is_empty() {
            failures.push(format!("{args:?} | (closed): {}", out.describe()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn json_to_stdout_parses_on_every_command() {
    let f = files();
    let mut failures = Vec::new();
    for args in COMMANDS.iter().filter(|a| !a.is_empty() && a[0] != "--help") {
        let mut a = expand(args);
        // Commands whose data would go to stdout write it to a file.
        if matches!(a[0].as_str(), "gen" | "convert") && !a.iter().any(|x| x == "--out") {
            a.extend(["-o".to_string(), f.dir.join("data.out").display().to_string()]);
        }
        a.extend(["--json".to_string(), "-".to_string()]);
        let out = run(&a, Stdout::Pipe);
        match serde_json::from_str::<serde_json::Value>(&out.stdout) {
            Ok(v) if out.code == Some(0) && v["command"].is_string() => {}
            r => failures.push(format!("{args:?} --json -: {:?}\n{}", r.err(), out.describe())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_scheduled_update_happens_or_is_reported_not_reached() {
    let args = [
        "replay",
        "--design",
        "cflows",
        "--duration",
        "0.05",
        "--updates",
        "add:60@1ms,del:5@2ms,add:30@7s",
        "--json",
        "-",
    ];
    let out = run(&s(&args), Stdout::Pipe);
    assert_eq!(out.code, Some(0), "{}", out.describe());
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let log = v["updates"].as_array().unwrap();
    assert_eq!(log.len(), 3, "every scheduled update is in the log: {log:?}");
    let reached: Vec<bool> = log.iter().map(|u| u["reached"].as_bool().unwrap()).collect();
    assert_eq!(reached, [true, true, false]);
    assert_eq!(v["updates_not_reached"], 1);
    assert!(out.stderr.contains("add 30 rules at 7 s: NOT REACHED"), "{}", out.stderr);
}

/// Starts `rqvs args`, waits for the line saying `says` on stderr (at most 60 s), then stops it.
fn says_on_stderr(args: &[&str], says: &str) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rqvs"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        let mut seen = String::new();
        while let Ok(n) = err.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
            let _ = tx.send(seen.clone());
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut seen = String::new();
    let line_done = |seen: &str| seen.find(says).is_some_and(|at| seen[at..].contains('\n'));
    while !line_done(&seen) && std::time::Instant::now() < deadline {
        if let Ok(s) = rx.recv_timeout(std::time::Duration::from_millis(200)) {
            seen = s;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    seen
}

#[test]
fn unbounded_runs_say_so() {
    let seen = says_on_stderr(&["replay", "--duration", "1e12"], "is a long run");
    assert!(seen.contains("--duration 1000000000000 s of PMD time is a long run"), "{seen}");
    let seen = says_on_stderr(&["replay", "--passes", "4294967295"], "progress every 10 s");
    assert!(seen.contains("--passes 4294967295 over 9328 packets"), "{seen}");
}

#[test]
fn long_runs_show_their_progress() {
    // 10 minutes of PMD time is long; the first progress line comes after 10 s of wall time.
    let seen = says_on_stderr(&["replay", "--duration", "601"], "rqvs: progress:");
    assert!(seen.contains("rqvs: progress: orig:") && seen.contains("s of PMD time"), "{seen}");
}

#[test]
fn every_number_option_documents_its_range() {
    // Each option that takes a number says in --help which numbers it accepts.
    for (cmd, opts) in [
        (
            &["replay"][..],
            &["--duration", "--passes", "--emc-prob", "--emc-entries", "--retrain-threshold", "--rate", "--pmds"][..],
        ),
        (&["bench", "classifiers"], &["--update-fraction", "--min-ms"]),
        (&["bench", "updates"], &["--retrain-threshold", "--seconds", "--rate"]),
        (&["gen", "rules"], &["--count", "--addr-scope", "--smoothing"]),
        (&["gen", "trace"], &["--packets", "--max-share"]),
        (&["gen", "updates"], &["--fraction", "--ops"]),
        (&["coflows"], &["--coflows", "--emc-prob", "--min-confidence"]),
        (&["switch"], &["--pmds", "--emc-prob", "--emc-entries", "--duration"]),
    ] {
        let mut a: Vec<&str> = cmd.to_vec();
        a.push("--help");
        let out = run(&s(&a), Stdout::Pipe);
        let help = out.stdout.replace('\n', " ");
        for o in opts {
            // The last mention: the option's own entry, after the usage line.
            let at = help.rfind(&format!("{o} <")).unwrap_or_else(|| panic!("{cmd:?}: {o} in --help"));
            let next = help[at + 2..].find("  --").map_or(help.len(), |n| at + 2 + n);
            assert!(help[at..next].contains("[range:"), "{cmd:?} {o}: no range in {:?}", &help[at..next]);
        }
    }
}

/// The file names the table uses exist (a typo would make a case test the wrong thing).
#[test]
fn the_table_names_real_files() {
    let f = files();
    for c in CASES {
        for a in c.args.iter().filter_map(|a| a.strip_prefix('@')) {
            assert!(Path::new(&f.dir.join(a)).exists(), "{}: @{a}", c.name);
        }
    }
}
