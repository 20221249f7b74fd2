#!/usr/bin/env python3
"""Runs `rqvs bench classifiers` over ClassBench seeds and sizes and prints one markdown table
per size: Mpps of each classifier (batches of 32), the ratio of the last to the first, the
mismatches against the reference (which must be 0), NuevoMatchUP's figures, and the geometric
mean of the ratio.

    scripts/bench_all.py [--sizes 100k,500k] [--seeds acl1,...] [--classifiers tm,nmu]
                         [--out DIR] [--rqvs target/release/rqvs] [-- EXTRA rqvs bench ARGS]

Each (seed, size) is one process, so the ratio is measured in one run on the same packets. The
JSON of every run is kept in --out (default target/bench); an existing JSON is reused, so an
interrupted sweep resumes.
"""

import argparse
import math
import os
import sys

from kept import kept_json

SEEDS = ["acl1", "acl2", "acl3", "acl4", "acl5", "fw1", "fw2", "fw3", "fw4", "fw5", "ipc1", "ipc2"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100k,500k")
    ap.add_argument("--seeds", default=",".join(SEEDS))
    ap.add_argument("--classifiers", default="tm,nmu")
    ap.add_argument("--data", default=os.environ.get("RQVS_CLASSBENCH_DIR", "../shared/data/classbench"))
    ap.add_argument("--out", default="target/bench")
    ap.add_argument("--rqvs", default="target/release/rqvs")
    ap.add_argument("extra", nargs="*", help="more `rqvs bench classifiers` arguments (after --)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    names = a.classifiers.split(",")
    for size in a.sizes.split(","):
        print(f"\n| seed | size | " + " | ".join(f"{n} Mpps" for n in names)
              + f" | {names[-1]}/{names[0]} | mismatches | coverage | isets | buckets | max err | build ms |")
        print("|" + "---|" * (len(names) + 8))
        ratios = []
        for seed in a.seeds.split(","):
            cmd = [a.rqvs, "bench", "classifiers", "--rules", f"{a.data}/rules/{seed}_{size}.xz",
                   "--trace", f"{a.data}/traces/{seed}_{size}_trace.xz", "--classifiers", a.classifiers, *a.extra]
            j = kept_json(os.path.join(a.out, f"{seed}_{size}.json"), cmd)
            if j is None:
                sys.exit(f"{seed}_{size}: rqvs bench classifiers failed")
            by = {c["name"]: c for c in j["classifiers"]}
            mpps = [by[n]["mpps"] for n in names]
            ratio = mpps[-1] / mpps[0]
            ratios.append(ratio)
            mism = sum(by[n]["mismatches"] + by[n].get("cross_mismatches", 0) + by[n]["update_mismatches"]
                       for n in names)
            st = next((by[n]["stats"] for n in names if "coverage" in by[n]["stats"]), {})
            cells = " | ".join(f"{m:.2f}" for m in mpps)
            print(f"| {seed} | {size} | {cells} | {ratio:.2f}x | {mism} | {st.get('coverage', '-')} | "
                  f"{st.get('isets', '-'):.0f} | {st.get('buckets', 0):.0f} | {st.get('max_err', '-')} | "
                  f"{st.get('build_ms', '-')} |" if st else f"| {seed} | {size} | {cells} | {ratio:.2f}x | {mism} |")
        g = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"\n{size}: geometric mean {names[-1]}/{names[0]} = {g:.2f}x over {len(ratios)} seeds")


if __name__ == "__main__":
    main()
