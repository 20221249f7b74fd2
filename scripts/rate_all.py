#!/usr/bin/env python3
"""The paper's constant-TX comparison: for each ClassBench seed and size, the highest offered rate
each design takes with < 1% drops after a 5% warm-up (`rqvs replay --rate-search`).

    scripts/rate_all.py [--sizes 1k,100k,500k] [--seeds acl1,...] [--designs orig,ccache,cflows]
                        [--locality zipf:1.0,20000] [--out target/rate] [--rqvs target/release/rqvs]
                        [-- EXTRA rqvs replay ARGS]

--locality SPEC: instead of the shared ClassBench trace, a locality trace generated from the
rules (`rqvs gen trace --rules R --packets 1000000 --locality SPEC --rng-seed 1`, kept in --out),
the traffic of docs/orig-scaling.md — the stand-in for the paper's CAIDA trace.

One `rqvs replay --design D --rate-search --json …` per (seed, size, design); each probe of the
search replays the trace through a freshly built design at one rate. JSON kept in --out (reused
when present). Prints the max rates (Mpps), speedups against the first design, and geometric
means per size. Designs run one after the other, so on a shared machine read ratios with care.
"""

import argparse
import math
import os
import subprocess
import sys

from kept import kept_json

SEEDS = ["acl1", "acl2", "acl3", "acl4", "acl5", "fw1", "fw2", "fw3", "fw4", "fw5", "ipc1", "ipc2"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1k,100k,500k")
    ap.add_argument("--seeds", default=",".join(SEEDS))
    ap.add_argument("--designs", default="orig,ccache,cflows")
    ap.add_argument("--data", default=os.environ.get("RQVS_CLASSBENCH_DIR", "../shared/data/classbench"))
    ap.add_argument("--out", default="target/rate")
    ap.add_argument("--rqvs", default="target/release/rqvs")
    ap.add_argument("--locality", default=None)
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    designs = a.designs.split(",")
    rows = []
    for size in a.sizes.split(","):
        for seed in a.seeds.split(","):
            rates = {}
            rules = f"{a.data}/rules/{seed}_{size}.xz"
            trace = f"{a.data}/traces/{seed}_{size}_trace.xz"
            if a.locality:
                trace = os.path.join(a.out, f"{seed}_{size}_{a.locality.replace(':', '_').replace(',', '_')}.trace")
                if not os.path.exists(trace):
                    cmd = [a.rqvs, "gen", "trace", "--rules", rules, "--packets", "1000000",
                           "--locality", a.locality, "--rng-seed", "1", "-o", trace + ".tmp"]
                    print("+", " ".join(cmd), file=sys.stderr, flush=True)
                    if subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode != 0:
                        print(f"{seed}_{size}: trace generation failed", file=sys.stderr)
                        continue
                    os.replace(trace + ".tmp", trace)
            for d in designs:
                cmd = [a.rqvs, "replay", "--design", d, "--rate-search", "--rules", rules, "--trace", trace, *a.extra]
                report = kept_json(os.path.join(a.out, f"{seed}_{size}_{d}.json"), cmd)
                if report is not None:
                    rates[d] = report
            rows.append((seed, size, rates))
    print("| seed | size | " + " | ".join(f"{d} Mpps" for d in designs) + " | "
          + " | ".join(f"{d}/{designs[0]}" for d in designs[1:]) + " | mismatches |")
    print("|---|---|" + "---|" * (2 * len(designs)))
    sp = {}
    for seed, size, rates in rows:
        if len(rates) != len(designs):
            continue
        m = [rates[d]["max_rate_below_1pct_drops"] / 1e6 for d in designs]
        bad = sum(rates[d]["mismatches"] for d in designs)
        cells = [f"{x:.3f}" for x in m] + [f"{x / m[0]:.2f}x" for x in m[1:]]
        for d, x in zip(designs[1:], m[1:]):
            sp.setdefault((size, d), []).append(x / m[0])
        print(f"| {seed} | {size} | " + " | ".join(cells) + f" | {bad} |")
    print()
    print("| size | " + " | ".join(f"{d}/{designs[0]} geomean" for d in designs[1:]) + " | seeds |")
    print("|---|" + "---|" * len(designs))
    for size in a.sizes.split(","):
        v = [sp.get((size, d), []) for d in designs[1:]]
        gm = [f"{math.exp(sum(map(math.log, x)) / len(x)):.2f}x" if x else "-" for x in v]
        print(f"| {size} | " + " | ".join(gm) + f" | {len(v[0])} |")


if __name__ == "__main__":
    main()
