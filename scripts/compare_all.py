#!/usr/bin/env python3
"""Runs `rqvs compare` over ClassBench seeds and sizes and prints one markdown table.

    scripts/compare_all.py [--sizes 1k,10k,100k,500k] [--seeds acl1,...] [--designs orig,ccache,cflows]
                           [--out DIR] [--rqvs target/release/rqvs] [-- EXTRA rqvs compare ARGS]

Each (seed, size) is one `rqvs compare` process, so the designs' speedups are ratios measured in
one run on the same packets. "all passes" counts every pass, the first included (every flow's
first packet meets empty caches: ORIG and CCACHE upcall); "warm" is the later passes when `--passes 2` (or
more) is given after `--`: caches full, models trained — the steady state the paper measures. The JSON of every run is kept in --out (default target/compare);
an existing JSON is reused, so an interrupted sweep resumes. The table gives Mpps per design, the
speedup of each design over the first, mismatches (which must be 0), and the geometric mean of
the speedups per size.
"""

import argparse
import json
import math
import os

from kept import kept_json

SEEDS = ["acl1", "acl2", "acl3", "acl4", "acl5", "fw1", "fw2", "fw3", "fw4", "fw5", "ipc1", "ipc2"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1k,10k,100k,500k")
    ap.add_argument("--seeds", default=",".join(SEEDS))
    ap.add_argument("--designs", default="orig,ccache,cflows")
    ap.add_argument("--data", default=os.environ.get("RQVS_CLASSBENCH_DIR", "../shared/data/classbench"))
    ap.add_argument("--out", default="target/compare")
    ap.add_argument("--rqvs", default="target/release/rqvs")
    ap.add_argument("--json", default=None,
                    help="write every cell (Mpps per design, all passes and warm; mismatches; auto's designs) here")
    ap.add_argument("extra", nargs="*", help="more `rqvs compare` arguments (after --)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    designs = a.designs.split(",")
    rows = []
    for size in a.sizes.split(","):
        for seed in a.seeds.split(","):
            cmd = [
                a.rqvs, "compare", "--designs", a.designs,
                "--rules", f"{a.data}/rules/{seed}_{size}.xz",
                "--trace", f"{a.data}/traces/{seed}_{size}_trace.xz", *a.extra,
            ]
            report = kept_json(os.path.join(a.out, f"{seed}_{size}.json"), cmd)
            if report is not None:
                rows.append((seed, size, report))
    warm = any(r.get("mpps_after_first_pass") for _, _, j in rows for r in j["runs"])
    head = "| seed | size | " + " | ".join(f"{d} Mpps" for d in designs)
    head += " | " + " | ".join(f"{d}/{designs[0]}" for d in designs[1:])
    if warm:
        head += " | " + " | ".join(f"{d} warm Mpps" for d in designs)
        head += " | " + " | ".join(f"{d}/{designs[0]} warm" for d in designs[1:])
    head += " | mismatches |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    speedups = {}
    cells_json = []
    for seed, size, j in rows:
        runs = {r["design"]: r for r in j["runs"]}
        cells = [f"{runs[d]['mpps']:.3f}" for d in designs]
        for d in designs[1:]:
            speedups.setdefault((size, d, "all passes"), []).append(runs[d]["speedup"])
            cells.append(f"{runs[d]['speedup']:.2f}x")
        if warm:
            w = [runs[d].get("mpps_after_first_pass") for d in designs]
            cells += [f"{x:.3f}" if x else "-" for x in w]
            for d, x in zip(designs[1:], w[1:]):
                if x and w[0]:
                    speedups.setdefault((size, d, "warm"), []).append(x / w[0])
                    cells.append(f"{x / w[0]:.2f}x")
                else:
                    cells.append("-")
        bad = sum(runs[d]["mismatches"] for d in designs)
        checked = sum(runs[d]["verified"] for d in designs)
        au = runs["auto"].get("auto") if "auto" in runs else None
        cells_json.append({
            "seed": seed, "size": size,
            "mpps": {d: runs[d]["mpps"] for d in designs},
            "mpps_warm": {d: runs[d].get("mpps_after_first_pass") for d in designs},
            "auto": {"current": au["current"], "design_switches": au["design_switches"],
                     "time_s": {k[len("time_"):-len("_s")]: v for k, v in au.items() if k.startswith("time_")}} if au else None,
            "mismatches": bad, "verified": checked,
        })
        print(f"| {seed} | {size} | " + " | ".join(cells) + f" | {bad} of {checked} |")
    print()
    kinds = ["all passes", "warm"] if warm else ["all passes"]
    cols = [(d, k) for k in kinds for d in designs[1:]]
    print("| size | " + " | ".join(f"{d}/{designs[0]} {k} geomean" for d, k in cols) + " | seeds |")
    print("|---|" + "---|" * (len(cols) + 1))
    for size in a.sizes.split(","):
        gm = []
        n = 0
        for d, k in cols:
            v = speedups.get((size, d, k), [])
            n = max(n, len(v))
            gm.append(f"{math.exp(sum(map(math.log, v)) / len(v)):.2f}x" if v else "-")
        print(f"| {size} | " + " | ".join(gm) + f" | {n} |")

    if a.json:
        first = rows[0][2] if rows else {}
        with open(a.json, "w") as f:
            json.dump({"cpu": first.get("cpu"), "kernel": first.get("kernel"), "git_rev": first.get("git_rev"),
                       "compare_args": a.extra, "cells": cells_json}, f, indent=1)


if __name__ == "__main__":
    main()
