#!/usr/bin/env python3
"""Runs two rqvs binaries on the same commands and diffs their JSON reports, timings removed.

    scripts/check_outputs.py BEFORE_BIN AFTER_BIN [--data DIR]

For refactors that must not change behaviour (issue 20): `classify`, `bench classifiers`,
`replay`, `compare` and `coflows` on the embedded workload and the 1K/10K ClassBench sets
(acl1, fw1), each with --json. Exit 1 on any difference that is not a timing.

What is removed before the diff, and why:
- timings: wall/PMD/stage times, Mpps, shares of PMD time, build and training times;
- provenance: git_rev, git_dirty, git_rev_source, build_profile, schema_version, cpu, kernel,
  rqvs_version;
- fields that move from run to run of the *same* binary: anything decided by measured PMD time
  (the time series, the positions of timed updates and so the versions verification sees,
  CCACHE/CFLOWS model swaps, subtable ranking, the cuckoo distributor's intervals). The
  commands below are chosen so that most counters do not: updates only with --revalidator
  inline at time 0 of a single pass, ORIG with ranking-independent counters, CFLOWS/CCACHE on
  one pass. Run the script with the same binary twice to see that it passes.

Fields added on purpose may be listed in ADDED (they must be absent before and present after).
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

TIMING = {
    "pmd_ns", "emc_ns", "dpcls_ns", "model_ns", "reval_ns", "upcall_ns", "predict_ns",
    "build_ms", "pmd_s", "mpps", "ns_per_packet", "mpps_after_first_pass",
    "share_megaflow_after_first_pass", "share_emc", "share_megaflow", "share_model", "share_upcall",
    "share_revalidator", "series", "wall_s", "elapsed_s", "last_training_ms", "speedup",
    "speedup_after_first_pass", "git_rev", "cpu", "kernel", "rqvs_version", "avg_subtables_per_hit",
    "git_dirty", "git_rev_source", "build_profile", "schema_version", "timed_passes", "timed_passes_single",
    "megaflow_subtables", "ns_batch", "ns_single", "build_s", "insert_us", "remove_us",
    "updates", "handler_busy_s", "pmd_busy_s", "handler_cpu_share", "pmd_cpu_share",
    "upcall_cost_us", "calibration", "latency", "first_assoc_latency", "first_assoc_coupled_latency",
    "first_base_latency", "upcalls_per_s", "wall_ns", "timed_packets", "lookup_mpps", "build_ms_total",
    "preload_ms", "study_check", "model_swaps", "training_sessions", "coverage", "model_entries",
    "model_megaflows", "isets", "remainder_rules", "model_hit", "remainder_hit", "megaflow_hit",
    "emc_hit", "emc_inserts", "installed", "install_existing", "upcall", "megaflows", "masks",
    "deleted_idle", "deleted_revalidated", "verified", "stale_checks", "avg_batch",
}
# Counters that move with measured time only in the learned designs (model swaps decide which
# stage serves a packet); for ORIG they are compared (see ORIG_STABLE).
ORIG_STABLE = {"emc_hit", "megaflow_hit", "upcall", "installed", "install_existing", "megaflows",
               "masks", "emc_inserts", "verified"}
ADDED = {"no_match"}


def timing(k):
    """Rates and times named by pattern: `*_per_s`, `mpps*`, `ns_per_*`, `*_ms`, `*_us`."""
    return k.endswith(("_per_s", "_ms", "_us")) or k.startswith(("mpps", "ns_per_"))


def strip(o, keep=frozenset()):
    if isinstance(o, dict):
        return {
            k: strip(v, keep)
            for k, v in o.items()
            if ((k not in TIMING and not timing(k)) or k in keep) and k not in ADDED
        }
    if isinstance(o, list):
        return [strip(x, keep) for x in o]
    return o


def diff(a, b, path, out):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            diff(a.get(k), b.get(k), f"{path}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items before, {len(b)} after")
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path}: {a!r} before, {b!r} after")


def commands(d: Path):
    r = lambda s, n: str(d / "rules" / f"{s}_{n}.xz")
    t = lambda s, n: str(d / "traces" / f"{s}_{n}_trace.xz")
    yield "classify-default", ["classify"], set()
    for s in ["acl1", "fw1"]:
        for n in ["1k", "10k"]:
            yield f"classify-{s}_{n}-tm", ["classify", "--rules", r(s, n), "--trace", t(s, n), "--classifier", "tm"], set()
            yield f"replay-orig-{s}_{n}", ["replay", "--rules", r(s, n), "--trace", t(s, n), "--design", "orig",
                                            "--revalidator", "inline", "--emc-prob", "0.2"], ORIG_STABLE
        yield f"replay-cflows-{s}_1k", ["replay", "--rules", r(s, "1k"), "--trace", t(s, "1k"), "--design", "cflows"], set()
        yield f"compare-{s}_1k", ["compare", "--rules", r(s, "1k"), "--trace", t(s, "1k"), "--designs", "orig,cflows"], set()
    yield "bench-classifiers-default", ["bench", "classifiers", "--classifiers", "ref,tss,tm", "--min-ms", "1"], set()
    yield "coflows-rpc", ["coflows", "--dist", "rpc", "--coflows", "400", "--coflowiness", "0,0.5,1",
                          "--cost", "virtual:100,2000"], {"upcall", "megaflows", "installed", "emc_hit", "megaflow_hit"}


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    before, after = args[0], args[1]
    data = Path(args[args.index("--data") + 1]) if "--data" in args else Path(__file__).resolve().parents[2] / "shared/data/classbench"
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, cmd, keep in commands(data):
            reports = []
            for i, binary in enumerate([before, after]):
                out = Path(tmp) / f"{name}-{i}.json"
                p = subprocess.run([binary, *cmd, "--json", str(out)], capture_output=True, text=True)
                if p.returncode != 0:
                    print(f"{name}: {binary} exited {p.returncode}: {p.stderr.strip()[:300]}")
                    bad += 1
                    break
                reports.append(strip(json.loads(out.read_text()), keep))
            if len(reports) < 2:
                continue
            found = []
            diff(reports[0], reports[1], name, found)
            print(f"{name}: {'identical apart from timings' if not found else f'{len(found)} differences'}")
            for f in found[:20]:
                print(f"  {f}")
            bad += bool(found)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
