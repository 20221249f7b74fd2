#!/usr/bin/env python3
"""The highest rule-update rate NuevoMatchUP sustains while keeping coverage (NSDI'22 Fig. 15).

    scripts/update_rate.py --rules FILE --trace FILE [--coverage 0.75,0.9] [--seconds 6]
                           [--policy instant] [--rqvs target/release/rqvs] [--json OUT]

For each coverage target, a bisection over the update rate R (updates/s, half inserts from a
held-out 10% of the set and half removals — `rqvs bench updates`): a rate is *sustained* when the
coverage never falls below the target after the first second (the warm-up, while the first
trainer session runs) and the run had 0 mismatches. The lookup thread runs on one core and the
trainer on the other, as in `rqvs bench updates`. The retrain threshold defaults to half the
coverage slack ((1 - target) / 2): with the default 0.1, coverage may fall to ~0.9 before any
retraining starts, so 90% could never be held. Each probe is one `rqvs bench updates` run of
--seconds; the rate reported is the largest sustained rate found, to within 10%.

A rate is also required to leave the lookups going: the lookup thread applies the updates itself
(as a PMD thread would), so at high rates lookups stall while coverage still holds. By default a
rate counts only when lookups run at >= 50% of their rate in the lowest-rate probe
(--min-lookup-share; 0 gives the coverage-only figure). The lookup rates are the thread's own:
`rqvs bench updates` checks the recorded results after the run.

--insert-slack is passed on (`none`: every insert goes to the remainder, as in the paper; a
number: inserts join a bucket whose range holds them, up to bucket size + slack rules).

Measured, not derived from the paper's formula. With the paper's inserts the limit is how fast
the remainder grows (R/2 inserts per second) against how often a model can be trained (the
trainer's session time on the second core); with in-place inserts coverage barely moves and the
limit is the lookup thread's time spent applying updates.
"""

import argparse
import json
import subprocess
import sys


def probe(a, rate, threshold):
    cmd = [a.rqvs, "bench", "updates", "--rules", a.rules, "--trace", a.trace, "--rate", str(int(rate)),
           "--seconds", str(a.seconds), "--policy", a.policy, "--retrain-threshold", str(threshold),
           "--insert-slack", a.insert_slack, "--json", "-"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    text = out.stdout
    start = 0 if text.startswith("{") else text.index("\n{") + 1
    j, _ = json.JSONDecoder().raw_decode(text[start:])
    cov = [p["coverage"] for p in j["series"] if p["t_s"] >= 1.0]
    applied = j["updates"] / max(j["seconds"], 1e-9)
    res = {"rate": int(rate), "applied_per_s": applied, "min_coverage": min(cov) if cov else None,
           "mpps": j["mpps"], "update_us": j["update_us"], "sessions": j["sessions"], "mean_train_ms": j["mean_train_ms"],
           "inserts_into_buckets": j["inserts_into_buckets"], "inserts_into_remainder": j["inserts_into_remainder"],
           "mismatches": j["mismatches"], "exit": out.returncode}
    print(json.dumps(res), file=sys.stderr, flush=True)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rules", required=True)
    ap.add_argument("--trace", required=True)
    ap.add_argument("--coverage", default="0.75,0.9")
    ap.add_argument("--seconds", type=float, default=6)
    ap.add_argument("--policy", default="instant")
    ap.add_argument("--insert-slack", default="16", help="a number, or 'none' (the paper's inserts)")
    ap.add_argument("--rqvs", default="target/release/rqvs")
    ap.add_argument("--lo", type=float, default=1000)
    ap.add_argument("--hi", type=float, default=2_000_000)
    ap.add_argument("--threshold", type=float, help="retrain threshold (default: half of 1 - target)")
    ap.add_argument("--min-lookup-share", type=float, default=0.5,
                    help="least lookup Mpps, as a share of the lowest-rate probe's (default 0.5)")
    ap.add_argument("--json")
    a = ap.parse_args()
    results = {}
    for target in map(float, a.coverage.split(",")):
        floor_mpps = 0.0
        ok = lambda r: r["exit"] == 0 and r["mismatches"] == 0 and r["min_coverage"] is not None \
            and r["min_coverage"] >= target and r["applied_per_s"] >= 0.9 * r["rate"] \
            and r["mpps"] >= floor_mpps
        lo, hi = a.lo, a.hi
        best = None
        # Retraining must start before coverage can fall below the target: by default the
        # threshold is half the slack (0.125 for 75%, 0.05 for 90%).
        threshold = a.threshold if a.threshold is not None else (1 - target) / 2
        r = probe(a, lo, threshold)
        floor_mpps = a.min_lookup_share * r["mpps"]
        if not ok(r):
            results[target] = {"sustained_rate": None, "note": f"not even {int(lo)}/s", "probe": r}
            continue
        best = r
        while hi / lo > 1.1:
            mid = (lo * hi) ** 0.5
            r = probe(a, mid, threshold)
            if ok(r):
                lo, best = mid, r
            else:
                hi = mid
        results[target] = {"sustained_rate": best["rate"], "threshold": threshold, "min_mpps": floor_mpps,
                           "probe": best}
        print(f"coverage >= {target} (retrain threshold {threshold:.3f}): {best['rate']} updates/s sustained "
              f"(min coverage {best['min_coverage']:.3f}, {best['applied_per_s']:.0f}/s applied, "
              f"{best['sessions']} training sessions of {best['mean_train_ms']:.0f} ms mean, "
              f"{best['mpps']:.2f} Mpps lookups (floor {floor_mpps:.2f}), 0 mismatches)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rules": a.rules, "trace": a.trace, "policy": a.policy, "seconds": a.seconds,
                       "insert_slack": a.insert_slack,
                       "results": {str(k): v for k, v in results.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
