#!/usr/bin/env python3
"""Plots a comparison of the three datapath designs with matplotlib, from `rqvs.compare`'s report.

    python python/examples/plot_compare.py [--rules R] [--trace T] [--passes 3] [-o docs/python-compare.svg]

Without --rules/--trace: ClassBench acl1 10K and its trace from the shared data
($RQVS_CLASSBENCH_DIR or ../shared/data/classbench), or the embedded acl1_1k workload when that
is absent. Left: each design's throughput over all passes and after the first (caches warm,
models trained); right: where packets were served (EMC, megaflow cache, model, remainder,
upcalls). Every figure comes with its mismatch count against the reference, in the title.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import rqvs  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    data = Path(os.environ.get("RQVS_CLASSBENCH_DIR", REPO.parent / "shared" / "data" / "classbench"))
    have = (data / "rules" / "acl1_10k.xz").exists()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rules", type=Path, default=data / "rules" / "acl1_10k.xz" if have else None)
    ap.add_argument("--trace", type=Path, default=data / "traces" / "acl1_10k_trace.xz" if have else None)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("-o", "--output", type=Path, default=REPO / "docs" / "python-compare.svg")
    a = ap.parse_args()

    report = rqvs.compare(a.rules, a.trace, passes=a.passes)
    runs = report["runs"]
    names = [r["design"].upper() for r in runs]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))

    x = range(len(runs))
    left.bar([i - 0.2 for i in x], [r["mpps"] for r in runs], width=0.4, label="all passes")
    warm = [r["mpps_after_first_pass"] or 0.0 for r in runs]
    left.bar([i + 0.2 for i in x], warm, width=0.4, label="after the first pass")
    for i, r in enumerate(runs):
        if r["speedup_after_first_pass"]:
            left.annotate(f"{r['speedup_after_first_pass']:.2f}x", (i + 0.2, warm[i]), ha="center", va="bottom", fontsize=9)
    left.set_xticks(list(x), names)
    left.set_ylabel("Mpps (one PMD)")
    left.set_title("throughput (speedup over ORIG, warm)")
    left.legend(loc="lower right", fontsize=8)

    stages = [("EMC", ["emc_hit"]), ("megaflow cache", ["megaflow_hit", "cd_hit"]), ("model", ["model_hit"]),
              ("remainder / no match", ["remainder_hit", "no_match"]), ("upcall / lost", ["upcall", "lost"])]
    bottom = [0.0] * len(runs)
    for label, keys in stages:
        share = [sum(r["counters"].get(k, 0) for k in keys) / max(r["packets"], 1) * 100 for r in runs]
        right.bar(list(x), share, bottom=bottom, label=label)
        bottom = [b + s for b, s in zip(bottom, share)]
    right.set_xticks(list(x), names)
    right.set_ylabel("% of packets")
    right.set_title("where packets were served")
    right.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)

    rules = Path(runs[0]["rules_file"]).name
    trace = Path(runs[0]["trace_file"]).name
    mismatches = ", ".join(f"{r['design']} {r['mismatches']}/{r['verified']}" for r in runs)
    fig.suptitle(f"rqvs.compare: {rules} / {trace}, {a.passes} passes — mismatches {mismatches}\n{report['cpu']}", fontsize=10)
    fig.tight_layout()
    a.output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(a.output)
    print(f"wrote {a.output}")
    for r in runs:
        print(f"{r['design']:<7} {r['mpps']:7.3f} Mpps, after the first pass {r['mpps_after_first_pass'] or 0:7.3f} "
              f"({r['speedup_after_first_pass'] or 0:.2f}x), mismatches {r['mismatches']} of {r['verified']}")


if __name__ == "__main__":
    main()
