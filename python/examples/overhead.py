#!/usr/bin/env python3
"""Overhead of the Python binding: batch classify of a whole trace through `rqvs.Classifier`
against the `rqvs classify` command line's lookup rate, same classifier, rules and trace.

    python python/examples/overhead.py [--rules R] [--trace T] [--kind nmu] [--rqvs PATH] [--runs 5]

Defaults: ClassBench acl1 100K rules and its 1,046,380-packet trace from the shared data
($RQVS_CLASSBENCH_DIR or ../shared/data/classbench). The command line times one pass over the
trace in batches of 32 on keys it built beforehand (`mpps` of `rqvs classify --json`); Python
times `c.classify(headers)` on the whole array — conversion of the numpy headers, the lookups
(in the same batches of 32) and the int64 result — for the structured array `rqvs.read_trace`
returns and for a plain uint32 (n, 6) array. Best of `--runs` for both sides (the machine may be
busy; the runs of both sides alternate). Prints each side's best rate and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

import rqvs

REPO = Path(__file__).resolve().parents[2]


def cli_mpps(rqvs_bin: str, rules: Path, trace: Path, kind: str) -> float:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "r.json"
        subprocess.run([rqvs_bin, "classify", "--rules", str(rules), "--trace", str(trace), "--classifier", kind,
                        "--verify", "0", "--json", str(out)], check=True, capture_output=True)
        return json.loads(out.read_text())["mpps"]


def python_mpps(c: rqvs.Classifier, headers: np.ndarray) -> float:
    t0 = time.perf_counter()
    c.classify(headers)
    return len(headers) / (time.perf_counter() - t0) / 1e6


def main() -> None:
    data = Path(os.environ.get("RQVS_CLASSBENCH_DIR", REPO.parent / "shared" / "data" / "classbench"))
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rules", type=Path, default=data / "rules" / "acl1_100k.xz")
    ap.add_argument("--trace", type=Path, default=data / "traces" / "acl1_100k_trace.xz")
    ap.add_argument("--kind", default="nmu")
    ap.add_argument("--rqvs", default=str(target / "release" / "rqvs"))
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()

    c = rqvs.Classifier.from_file(a.rules, kind=a.kind)
    structured = rqvs.read_trace(a.trace)
    plain = np.stack([structured[f].astype(np.uint32) for f in rqvs.FIELDS[:6]], axis=1)
    assert (c.classify(plain) == c.classify(structured)).all()
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "unknown")
    print(f"{a.kind} over {a.rules.name} ({len(c)} rules), {len(structured)} packets of {a.trace.name}; CPU {cpu}")
    # Interleaved, so that a busy spell of the machine hits both sides alike.
    cli, py = [], {"structured": [], "uint32 (n, 6)": []}
    for _ in range(a.runs):
        cli.append(cli_mpps(a.rqvs, a.rules, a.trace, a.kind))
        py["structured"].append(python_mpps(c, structured))
        py["uint32 (n, 6)"].append(python_mpps(c, plain))
    best = max(cli)
    print(f"command line         {best:8.3f} Mpps  (rqvs classify, best of {a.runs})")
    for name, rates in py.items():
        print(f"python {name:<14} {max(rates):8.3f} Mpps  = {100 * max(rates) / best:5.1f}% of the command line")


if __name__ == "__main__":
    main()
