#!/usr/bin/env python3
"""Runs `rqvs compare` over ClassBench seeds and sizes and prints one markdown table.

    scripts/compare_all.py [--sizes 1k,10k,100k,500k] [--seeds acl1,...] [--designs orig,ccache,cflows]
                           [--out DIR] [--rqvs target/release/rqvs] [-- EXTRA rqvs compare ARGS]

Each (seed, size) is one `rqvs compare` process, so the designs' speedups are ratios measured in
one run on the same packets. The JSON of every run is kept in --out (default target/compare);
an existing JSON is reused, so an interrupted sweep resumes. The table gives Mpps per design, the
speedup of each design over the first, mismatches (which must be 0), and the geometric mean of
the speedups per size.
"""

import argparse
import json
import math
import os
import subprocess
import sys

SEEDS = ["acl1", "acl2", "acl3", "acl4", "acl5", "fw1", "fw2", "fw3", "fw4", "fw5", "ipc1", "ipc2"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1k,10k,100k,500k")
    ap.add_argument("--seeds", default=",".join(SEEDS))
    ap.add_argument("--designs", default="orig,ccache,cflows")
    ap.add_argument("--data", default=os.environ.get("RQVS_CLASSBENCH_DIR", "../shared/data/classbench"))
    ap.add_argument("--out", default="target/compare")
    ap.add_argument("--rqvs", default="target/release/rqvs")
    ap.add_argument("extra", nargs="*", help="more `rqvs compare` arguments (after --)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    designs = a.designs.split(",")
    rows = []
    for size in a.sizes.split(","):
        for seed in a.seeds.split(","):
            out = os.path.join(a.out, f"{seed}_{size}.json")
            if not os.path.exists(out):
                cmd = [
                    a.rqvs, "compare", "--designs", a.designs,
                    "--rules", f"{a.data}/rules/{seed}_{size}.xz",
                    "--trace", f"{a.data}/traces/{seed}_{size}_trace.xz",
                    "--json", out + ".tmp", *a.extra,
                ]
                print("+", " ".join(cmd), file=sys.stderr, flush=True)
                r = subprocess.run(cmd, stdout=subprocess.DEVNULL)
                if r.returncode != 0:
                    print(f"{seed}_{size}: rqvs compare failed (exit {r.returncode})", file=sys.stderr)
                    continue
                os.replace(out + ".tmp", out)
            with open(out) as f:
                rows.append((seed, size, json.load(f)))
    head = "| seed | size | " + " | ".join(f"{d} Mpps" for d in designs)
    head += " | " + " | ".join(f"{d}/{designs[0]}" for d in designs[1:]) + " | mismatches |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    speedups = {}
    for seed, size, j in rows:
        runs = {r["design"]: r for r in j["runs"]}
        mpps = [runs[d]["mpps"] for d in designs]
        sp = [runs[d]["speedup"] for d in designs[1:]]
        bad = sum(runs[d]["mismatches"] for d in designs)
        checked = sum(runs[d]["verified"] for d in designs)
        for d, s in zip(designs[1:], sp):
            speedups.setdefault((size, d), []).append(s)
        print(
            f"| {seed} | {size} | " + " | ".join(f"{m:.3f}" for m in mpps) + " | "
            + " | ".join(f"{s:.2f}x" for s in sp) + f" | {bad} of {checked} |"
        )
    print()
    print("| size | " + " | ".join(f"{d}/{designs[0]} geomean" for d in designs[1:]) + " | seeds |")
    print("|---|" + "---|" * len(designs))
    for size in a.sizes.split(","):
        gm = []
        n = 0
        for d in designs[1:]:
            v = speedups.get((size, d), [])
            n = len(v)
            gm.append(math.exp(sum(map(math.log, v)) / len(v)) if v else float("nan"))
        print(f"| {size} | " + " | ".join(f"{g:.2f}x" for g in gm) + f" | {n} |")


if __name__ == "__main__":
    main()
