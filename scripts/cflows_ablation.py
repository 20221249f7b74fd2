#!/usr/bin/env python3
"""The ablation the paper does not show: CFLOWS with NuevoMatchUP (the learned index with a
TupleMerge remainder: `--classifier nmu`, the paper's CFLOWS) against CFLOWS with TupleMerge alone
(`--classifier tm`, no learned index), per ClassBench seed and size (issue 18, docs/designs.md).

    scripts/cflows_ablation.py [--sizes 1k,10k,100k] [--seeds acl1,...] [--reps 3]
                               [--out target/ablation] [--json SUMMARY.json] [--rqvs target/release/rqvs]
                               [-- EXTRA rqvs replay ARGS, default: --emc-prob 0.2 --passes 2]

Each (seed, size, classifier, repetition) is one `rqvs replay --design cflows --classifier C
--json …` process; the two classifiers alternate (nmu, tm, nmu, tm, …) so that a slow spell of a
shared machine falls on both, and the table gives the median Mpps of the repetitions: over all
passes, and warm (the passes after the first, when `--passes` ≥ 2), with tm/nmu. CFLOWS never
upcalls, so the difference is the classifier over the OpenFlow rules: how much of CFLOWS' gain
over ORIG is the learned index, and how much is classifying the rules directly with no megaflow
cache. Mismatches (every run verified against the reference classifier) must be 0: the script
fails otherwise. JSON of every run kept in --out (reused when present). Python 3.11 standard
library only. --json writes the table's cells (medians, ratios, mismatches, CPU, commit) as JSON.
"""

import argparse
import json
import math
import os
import statistics

from kept import kept_json

SEEDS = ["acl1", "acl2", "acl3", "acl4", "acl5", "fw1", "fw2", "fw3", "fw4", "fw5", "ipc1", "ipc2"]
CLASSIFIERS = ["nmu", "tm"]


def run_one(a, seed, size, clf, rep):
    out = os.path.join(a.out, f"{seed}_{size}_{clf}_{rep}.json")
    cmd = [
        a.rqvs, "replay", "--design", "cflows", "--classifier", clf,
        "--rules", f"{a.data}/rules/{seed}_{size}.xz",
        "--trace", f"{a.data}/traces/{seed}_{size}_trace.xz", *a.extra,
    ]
    report = kept_json(out, cmd)
    if report is None:
        raise SystemExit(f"{seed}_{size} {clf}: rqvs replay failed")
    return report


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1k,10k,100k")
    ap.add_argument("--seeds", default=",".join(SEEDS))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--data", default=os.environ.get("RQVS_CLASSBENCH_DIR", "../shared/data/classbench"))
    ap.add_argument("--out", default="target/ablation")
    ap.add_argument("--rqvs", default="target/release/rqvs")
    ap.add_argument("--json", default=None, help="write the table's cells here")
    ap.add_argument("extra", nargs="*", help="more `rqvs replay` arguments (after --)")
    a = ap.parse_args()
    if not a.extra:
        a.extra = ["--emc-prob", "0.2", "--passes", "2"]
    os.makedirs(a.out, exist_ok=True)
    sizes = a.sizes.split(",")
    rows = []
    for size in sizes:
        for seed in a.seeds.split(","):
            runs = {c: [] for c in CLASSIFIERS}
            for rep in range(a.reps):
                for clf in CLASSIFIERS:
                    runs[clf].append(run_one(a, seed, size, clf, rep))
            rows.append((seed, size, runs))

    bad = sum(r["mismatches"] for _, _, runs in rows for v in runs.values() for r in v)
    checked = sum(r["verified"] for _, _, runs in rows for v in runs.values() for r in v)
    first = rows[0][2]["nmu"][0]
    print(f"CPU: {first.get('cpu')} (kernel {first.get('kernel')}), rqvs {first.get('git_rev')}"
          f"{' (dirty)' if first.get('git_dirty') else ''}; median of {a.reps} runs; "
          f"replay options: {' '.join(a.extra)}\n")
    warm = any(r.get("mpps_after_first_pass") for _, _, runs in rows for r in runs["nmu"])
    head = "| seed | size | rules | nmu coverage | nmu Mpps | tm Mpps | tm/nmu |"
    if warm:
        head += " nmu warm Mpps | tm warm Mpps | tm/nmu warm |"
    head += " mismatches |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    ratios = {}
    cells_json = []
    for seed, size, runs in rows:
        med = {c: statistics.median(r["mpps"] for r in runs[c]) for c in CLASSIFIERS}
        ratio = med["tm"] / med["nmu"]
        ratios.setdefault((size, "all"), []).append(ratio)
        cov = runs["nmu"][0].get("coverage")
        cells = [str(runs["nmu"][0]["rules"]), f"{cov:.1%}" if cov is not None else "-",
                 f"{med['nmu']:.3f}", f"{med['tm']:.3f}", f"{ratio:.2f}x"]
        if warm:
            w = {c: statistics.median(r["mpps_after_first_pass"] for r in runs[c]) for c in CLASSIFIERS}
            ratios.setdefault((size, "warm"), []).append(w["tm"] / w["nmu"])
            cells += [f"{w['nmu']:.3f}", f"{w['tm']:.3f}", f"{w['tm'] / w['nmu']:.2f}x"]
        m = sum(r["mismatches"] for c in CLASSIFIERS for r in runs[c])
        v = sum(r["verified"] for c in CLASSIFIERS for r in runs[c])
        cells_json.append({"seed": seed, "size": size, "rules": runs["nmu"][0]["rules"], "nmu_coverage": cov,
                           "mpps": med, "tm_over_nmu": ratio, "mismatches": m, "verified": v,
                           "mpps_warm": w if warm else None})
        print(f"| {seed} | {size} | " + " | ".join(cells) + f" | {m} of {v} |")
    print()
    kinds = ["all", "warm"] if warm else ["all"]
    print("| size | " + " | ".join(f"tm/nmu {k} geomean" for k in kinds) + " | seeds |")
    print("|---|" + "---|" * (len(kinds) + 1))
    for size in sizes:
        cells = []
        for k in kinds:
            v = ratios.get((size, k), [])
            cells.append(f"{math.exp(sum(map(math.log, v)) / len(v)):.2f}x" if v else "-")
        print(f"| {size} | " + " | ".join(cells) + f" | {len(ratios.get((size, 'all'), []))} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"cpu": first.get("cpu"), "kernel": first.get("kernel"), "git_rev": first.get("git_rev"),
                       "reps": a.reps, "replay_args": a.extra, "cells": cells_json}, f, indent=1)
    if bad:
        raise SystemExit(f"{bad} mismatches of {checked} packets checked")


if __name__ == "__main__":
    main()
