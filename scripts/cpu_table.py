#!/usr/bin/env python3
"""Puts the classifier sweeps of this machine beside the AMD EPYC figures of docs/nuevomatch.md:
reads the kept JSON of two or more `scripts/bench_all.py` runs (one directory each), takes the
AMD ratio of each (seed, size) from the lookup-rate table of docs/nuevomatch.md, and writes one
JSON (what docs_numbers checks the page against) and the Markdown table.

    scripts/cpu_table.py --runs target/bench-intel-small1,target/bench-intel-small2 \
        --sizes 1k,10k --classifiers tm,nmu-isets,nmu --json docs/nmu-tm-intel-small.json

Ratios are of each classifier over the first (`tm`), as `bench_all.py` prints them; the geometric
means are over the seeds of a size. Every run must have 0 mismatches (exit 1 otherwise).
"""

import argparse
import json
import math
import os
import sys

from bench_all import SEEDS


def amd_table(doc, classifiers):
    """(seed, size) -> {classifier: Mpps} from the lookup-rate table (the first whose header
    names every classifier's Mpps column)."""
    want = [f"{c} Mpps" for c in classifiers]
    out, cols = {}, None
    for line in open(doc, encoding="utf-8"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cols is None:
            if line.startswith("| seed | size |") and all(w in cells for w in want):
                cols = {c: cells.index(f"{c} Mpps") for c in classifiers}
            continue
        if not line.startswith("|"):
            break
        if cells[0].startswith("---"):
            continue
        out[(cells[0], cells[1])] = {c: float(cells[i]) for c, i in cols.items()}
    if not out:
        sys.exit(f"{doc}: no table with columns {want}")
    return out


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", required=True, help="bench_all.py --out directories, comma-separated")
    ap.add_argument("--sizes", default="1k,10k")
    ap.add_argument("--seeds", default=",".join(SEEDS))
    ap.add_argument("--classifiers", default="tm,nmu-isets,nmu")
    ap.add_argument("--amd-doc", default="docs/nuevomatch.md")
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    names = a.classifiers.split(",")
    base, others = names[0], names[1:]
    amd = amd_table(a.amd_doc, names)
    runs = a.runs.split(",")
    doc = {
        "command": f"scripts/bench_all.py --sizes {a.sizes} --classifiers {a.classifiers} --out DIR "
                   f"-- --min-ms 300 --update-fraction 0.01 (DIR = {', '.join(runs)})",
        "note": "each run: rqvs bench classifiers per set, the classifiers' timed passes taking turns; "
                "amd_*: the AMD EPYC table of docs/nuevomatch.md",
        "classifiers": names,
        "sizes": {},
    }
    bad = []
    header = ["seed", "size"]
    for o in others:
        header += [f"{o}/{base}, run {i + 1}" for i in range(len(runs))] + [f"{o}/{base} on the AMD EPYC"]
    lines = ["| " + " | ".join(header + ["mismatches"]) + " |", "|" + "---|" * (len(header) + 1)]
    for size in a.sizes.split(","):
        rows = []
        for seed in a.seeds.split(","):
            row = {"seed": seed, "runs": []}
            for o in others:
                row[f"amd_{o}_over_{base}"] = round(amd[(seed, size)][o] / amd[(seed, size)][base], 2)
            for d in runs:
                j = json.load(open(os.path.join(d, f"{seed}_{size}.json"), encoding="utf-8"))
                by = {c["name"]: c for c in j["classifiers"]}
                r = {"git_rev": j.get("git_rev"), "cpu": j.get("cpu"), "kernel": j.get("kernel")}
                for n in names:
                    r[f"{n}_mpps"] = by[n]["mpps"]
                for o in others:
                    r[f"{o}_over_{base}"] = by[o]["mpps"] / by[base]["mpps"]
                r["mismatches"] = sum(by[n]["mismatches"] + by[n]["cross_mismatches"]
                                      + by[n]["update_mismatches"] for n in names)
                r["verified"] = j["verified"]
                if r["mismatches"]:
                    bad.append(f"{d}: {seed}_{size}: {r['mismatches']} mismatches")
                row["runs"].append(r)
            rows.append(row)
            cells = [seed, size]
            for o in others:
                cells += [f"{r[f'{o}_over_{base}']:.2f}x" for r in row["runs"]]
                cells.append(f"{row[f'amd_{o}_over_{base}']:.2f}x")
            lines.append("| " + " | ".join(cells + [str(sum(r["mismatches"] for r in row["runs"]))]) + " |")
        s = {"rows": rows}
        for o in others:
            s[f"geomean_{o}_over_{base}_runs"] = [geomean([row["runs"][i][f"{o}_over_{base}"] for row in rows])
                                                 for i in range(len(runs))]
            s[f"geomean_{o}_over_{base}_amd"] = geomean([row[f"amd_{o}_over_{base}"] for row in rows])
        doc["sizes"][size] = s
    for size, s in doc["sizes"].items():
        cells = ["geomean", size]
        for o in others:
            cells += [f"{g:.2f}x" for g in s[f"geomean_{o}_over_{base}_runs"]]
            cells.append(f"{s[f'geomean_{o}_over_{base}_amd']:.2f}x")
        lines.append("| " + " | ".join(cells + [""]) + " |")
    with open(a.json, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("\n".join(lines))
    if bad:
        sys.exit("\n".join(bad))


if __name__ == "__main__":
    main()
