#!/usr/bin/env python3
"""Throughput drop and recovery when a bundle of OpenFlow rules is added (NSDI'22 Fig. 17).

    scripts/bundles.py --rules FILE --trace FILE [--bundles 100,1000,10000] [--design cflows]
                       [--at 1.0] [--duration 3.0] [--rqvs target/release/rqvs] [-- EXTRA ARGS]

For each bundle size N, one `rqvs replay --design D --updates add:N@AT --duration DUR` run (the
N rules are held out of the file at random and added at AT seconds of PMD time). From its 100 ms
series: the mean throughput before the update, the lowest sample after it, the drop (1 - low /
before), when (seconds after the update; 100 ms resolution) the first sample after the lowest is
back at >= 90% of before, the lowest coverage, the update's
`visible_ms`, and the mismatch count (must be 0). Extra arguments after `--` go to rqvs (e.g.
`--policy delayed`, `--emc-prob 0.2`).
"""

import argparse
import json
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rules", required=True)
    ap.add_argument("--trace", required=True)
    ap.add_argument("--bundles", default="100,1000,10000")
    ap.add_argument("--design", default="cflows")
    ap.add_argument("--at", type=float, default=1.0)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--rqvs", default="target/release/rqvs")
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    print("| bundle | before Mpps | lowest Mpps | drop | back to 90% after | min coverage | visible_ms | mismatches |")
    print("|---|---|---|---|---|---|---|---|")
    for n in map(int, a.bundles.split(",")):
        cmd = [a.rqvs, "replay", "--design", a.design, "--rules", a.rules, "--trace", a.trace,
               "--duration", str(a.duration), "--updates", f"add:{n}@{a.at}s", "--json", "-", *a.extra]
        print("+", " ".join(cmd), file=sys.stderr, flush=True)
        out = subprocess.run(cmd, capture_output=True, text=True)
        text = out.stdout
        start = 0 if text.startswith("{") else text.index("\n{") + 1
        j, _ = json.JSONDecoder().raw_decode(text[start:])
        s = j["series"]
        before = [p["mpps"] for p in s if a.at - 0.5 <= p["t_s"] <= a.at]
        after = [p for p in s if p["t_s"] > a.at]
        base = sum(before) / max(len(before), 1)
        low_at = min(range(len(after)), key=lambda i: after[i]["mpps"]) if after else None
        low = after[low_at]["mpps"] if after else float("nan")
        # Recovery: the first sample at >= 90% of before, after the lowest one.
        back = next((p["t_s"] - a.at for p in after[low_at:] if p["mpps"] >= 0.9 * base), None) if after else None
        cov = min((p["coverage"] for p in after), default=float("nan"))
        u = j["updates"][0]
        vis = u.get("visible_ms")
        print(f"| {n} | {base:.3f} | {low:.3f} | {100 * (1 - low / base):.1f}% | "
              f"{'%.1f s' % back if back is not None else 'not within the run'} | {cov:.3f} | "
              f"{'%.1f' % vis if vis is not None else '-'} | {j['mismatches']} of {j['verified']} |")


if __name__ == "__main__":
    main()
