#!/usr/bin/env python3
"""Paired runs of `rqvs bench classifiers` (or, with --compare, `rqvs compare` of ORIG, CCACHE
and CFLOWS) with two rqvs binaries, in ABBA order, on a list of ClassBench sets: the Mpps of
each classifier (batches and one key at a time) or design per run, and per set the geometric
mean of the new/old ratios of each pair.

    scripts/classifier_pairs.py OLD NEW --data ../shared/data/classbench --sets acl1_100k,fw1_100k \
        --pairs 4 --out DIR

Each run's JSON is kept in DIR (old-SET-K.json, new-SET-K.json) with a summary.json.
With --fifo PRIO (root), every run is under SCHED_FIFO at that priority (`chrt -f PRIO`): the
PMD thread is not preempted by the machine's other processes, which on a shared 2-core machine
otherwise move single runs by up to 2x.
"""
import argparse, json, math, os, subprocess, sys, time

PREFIX = []
BENCH_ARGS = []
CLASSIFIERS = ["tm,nmu"]


def run(binary, rules, trace, out):
    cmd = PREFIX + [binary, "bench", "classifiers", "--rules", rules, "--trace", trace, "--classifiers", CLASSIFIERS[0], "--json", out] + BENCH_ARGS
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    d = json.load(open(out))
    res = {}
    for c in d["classifiers"]:
        if c["mismatches"] or c.get("cross_mismatches") or c.get("update_mismatches"):
            sys.exit(f"{out}: {c['name']} has mismatches")
        res[c["name"]] = (c["mpps"], c["mpps_single"])
    return res


def run_compare(binary, rules, trace, out):
    cmd = PREFIX + [binary, "compare", "--rules", rules, "--trace", trace, "--designs", "orig,ccache,cflows", "--json", out]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    res = {}
    for r in json.load(open(out))["runs"]:
        if r["mismatches"]:
            sys.exit(f"{out}: {r['design']} has mismatches")
        # One figure per design: a pair of equal entries keeps the table's shape.
        res[r["design"]] = (r["mpps"], r["mpps"])
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--data", required=True)
    ap.add_argument("--sets", required=True)
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--out", required=True)
    ap.add_argument("--compare", action="store_true")
    ap.add_argument("--min-ms", type=int, help="bench classifiers' --min-ms (time per lookup measurement)")
    ap.add_argument("--fifo", type=int, metavar="PRIO", help="run each measurement under chrt -f PRIO")
    ap.add_argument("--classifiers", default="tm,nmu",
                    help="bench classifiers' --classifiers (default tm,nmu; `nmu` alone measures it without "
                         "TupleMerge built in the same process first)")
    a = ap.parse_args()
    if a.fifo:
        PREFIX.extend(["chrt", "-f", str(a.fifo)])
    CLASSIFIERS[0] = a.classifiers
    if a.min_ms is not None:
        BENCH_ARGS.extend(["--min-ms", str(a.min_ms)])
    summary_prefix = PREFIX[:]
    bench = run_compare if a.compare else run
    os.makedirs(a.out, exist_ok=True)
    summary = {"old": a.old, "new": a.new, "prefix": summary_prefix, "bench_args": BENCH_ARGS,
               "classifiers": a.classifiers, "sets": {}}
    for s in a.sets.split(","):
        rules = os.path.join(a.data, "rules", f"{s}.xz")
        trace = os.path.join(a.data, "traces", f"{s}_trace.xz")
        runs = []
        for k in range(a.pairs):
            order = ["old", "new"] if k % 2 == 0 else ["new", "old"]
            pair = {}
            for who in order:
                load = os.getloadavg()[0]
                pair[who] = bench(a.old if who == "old" else a.new, rules, trace, os.path.join(a.out, f"{who}-{s}-{k}.json"))
                pair[who + "_load"] = load
            runs.append(pair)
            print(s, k, order, {w: pair[w] for w in ("old", "new")}, f"load {pair['old_load']:.1f}/{pair['new_load']:.1f}", flush=True)
        out = {}
        for c in runs[0]["old"]:
            for i, what in ((0, "batch"), (1, "one_key")) if not a.compare else ((0, "mpps"),):
                ratios = [p["new"][c][i] / p["old"][c][i] for p in runs]
                out[f"{c}_{what}"] = {
                    "old": [p["old"][c][i] for p in runs],
                    "new": [p["new"][c][i] for p in runs],
                    "ratios": ratios,
                    "geomean": math.exp(sum(map(math.log, ratios)) / len(ratios)),
                }
        summary["sets"][s] = out
        for key, v in out.items():
            print(f"{s} {key}: new/old geomean {v['geomean']:.3f} (pairs {', '.join(f'{r:.2f}' for r in v['ratios'])})", flush=True)
    json.dump(summary, open(os.path.join(a.out, "summary.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
