#!/usr/bin/env python3
"""What `--design auto`'s move out of a cold ORIG costs (docs/designs.md, "Auto out of a cold
ORIG"): auto started in ORIG (`--auto initial=orig`) on acl1_10k and acl1_100k, clean and under
the TSE attack, with the default dwell and with `min-dwell-ms=100`, and the fixed designs it moves
to beside it.

    scripts/auto_cold_orig.py [--data ../shared/data/classbench] [--rqvs target/release/rqvs]
                              [--out docs/auto-cold-orig] [--attacks target/tse]
                              [--duration 3] [--rate 1e5]

Each run is one `rqvs replay --design auto --auto SETTINGS --emc-prob 0.2 --duration D --json
OUT/RUN.json` (the fixed designs: `--design cflows|ccache`) (with `--attack A --attack-rate R` for the attack runs); a kept JSON is reused
(delete it to measure again). The attack files are `rqvs gen attack --rules SET --kind tse
--packets 100000 -o ATTACKS/attack_SET_tse.pcap`, made when absent. Prints the Markdown table:
per run the first switch (when auto decided, PMD s; its logged reason; the design it moved to;
how long the candidate took to be ready, ms of PMD time) and the benign throughput of the
replay's 100 ms samples around it — the mean of the last five samples before the decision
(ORIG), the lowest sample from the decision to 0.3 s after the swap, and the mean of the samples
of the run's last second (a fixed design: that alone) — and the packets checked against the reference with the mismatches
(benign and attack). Fails on any mismatch. Python 3.11 standard library only.

crates/cli/tests/docs_numbers.rs checks the table in docs/designs.md against the kept JSON with
the same definitions.
"""

import argparse
import os
import subprocess
import sys

from kept import kept_json

# (rule-set size, attack rate (0: clean; None: --rate), the design's options, name suffix): auto
# from a cold ORIG, with the default dwell and a short one, and the fixed designs it moves to,
# measured beside it.
AUTO = ["--design", "auto", "--auto", "initial=orig"]
RUNS = [
    ("10k", 0, AUTO, ""),
    ("10k", None, AUTO, ""),
    ("100k", 0, AUTO, ""),
    ("100k", None, AUTO, ""),
    ("100k", 0, AUTO[:-1] + ["initial=orig,min-dwell-ms=100"], "_dwell100"),
    ("100k", None, AUTO[:-1] + ["initial=orig,min-dwell-ms=100"], "_dwell100"),
    ("10k", 0, AUTO[:-1] + ["initial=orig,to-cflows-subtables=16"], "_tocflows16"),
    ("10k", 0, ["--design", "ccache"], "_ccache"),
    ("10k", 0, ["--design", "cflows"], "_cflows"),
    ("10k", None, ["--design", "cflows"], "_cflows"),
    ("100k", 0, ["--design", "cflows"], "_cflows"),
    ("100k", None, ["--design", "cflows"], "_cflows"),
]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def name(size, rate, suffix):
    """`acl1_100k_clean`, `acl1_100k_tse_1e5_dwell100`, ..."""
    return f"acl1_{size}_clean{suffix}" if not rate else f"acl1_{size}_tse_{rate}{suffix}"


def attack_file(a, size):
    path = os.path.join(a.attacks, f"attack_acl1_{size}_tse.pcap")
    if not os.path.exists(path):
        os.makedirs(a.attacks, exist_ok=True)
        rules = os.path.join(a.data, "rules", f"acl1_{size}.xz")
        cmd = [a.rqvs, "gen", "attack", "--rules", rules, "--kind", "tse", "--packets", "100000", "-o", path]
        log(" ".join(cmd))
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return path


def report(a, size, rate, design, suffix):
    """The run's JSON report, made first unless kept (`kept_json`)."""
    path = os.path.join(a.out, name(size, rate, suffix) + ".json")
    rules = os.path.join(a.data, "rules", f"acl1_{size}.xz")
    trace = os.path.join(a.data, "traces", f"acl1_{size}_trace.xz")
    cmd = [a.rqvs, "replay", "--rules", rules, "--trace", trace, *design, "--emc-prob", "0.2",
           "--duration", str(a.duration)]
    if rate:
        cmd += ["--attack", attack_file(a, size), "--attack-rate", rate]
    # Exit 1 with a report: mismatches, which `row` names.
    rep = kept_json(path, cmd, ok_codes=(0, 1))
    if rep is None:
        raise SystemExit(f"{path}: no report")
    return rep


def row(run, rep):
    """The table's row of one run (the module docs' definitions)."""
    att = rep["attack"]
    mism = rep["mismatches"] + (att["mismatches"] if att else 0)
    checked = rep["verified"] + (att["verified"] if att else 0)
    if mism:
        raise SystemExit(f"{run}: {mism} mismatches ({rep.get('first_mismatch', '')})")
    series = rep["series"]
    benign = [(s["t_s"], s["benign_mpps"] if att else s["mpps"]) for s in series]
    auto = rep["auto"]
    design = rep["design"]
    if auto:
        design += " " + ",".join(f"{k}={v}" for k, v in auto["settings"].items())
    switches = auto["switches"] if auto else []
    cells = [f"`{run}`", f"{att['rate_pps']:.0e}".replace("e+0", "e") if att else "clean", f"`{design}`"]
    end = series[-1]["t_s"]
    last = [b for t, b in benign if t > end - 1.0]
    mean = lambda xs: f"{sum(xs) / len(xs):.2f}" if xs else "–"
    if not switches:
        return cells + ["–"] * 6 + [mean(last), f"{checked:,} (0)"]
    sw = switches[0]
    swap = sw["at_s"]
    decided = swap - sw["ready_ms"] / 1e3
    before = [b for t, b in benign if t <= decided][-5:]
    dip = [b for t, b in benign if decided < t <= swap + 0.3]
    return cells + [
        f"{decided:.3f}",
        sw["reason"],
        sw["to"],
        f"{sw['ready_ms']:.0f}",
        mean(before),
        f"{min(dip):.2f}" if dip else "–",
        mean(last),
        f"{checked:,} (0)",
    ]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p.add_argument("--data", default=os.environ.get("RQVS_CLASSBENCH_DIR",
                                                     os.path.join(here, "..", "shared", "data", "classbench")))
    p.add_argument("--rqvs", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(here, "target")),
                                                  "release", "rqvs"))
    p.add_argument("--out", default=os.path.join(here, "docs", "auto-cold-orig"))
    p.add_argument("--attacks", default=os.path.join(here, "target", "tse"))
    p.add_argument("--duration", type=float, default=3.0)
    p.add_argument("--rate", default="1e5", help="the attack's packets per second of PMD time")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    print("| run | attack pps | design | decided at (s) | reason | to | ready (ms) "
          "| ORIG before (Mpps) | lowest around the swap | last 1 s | checked (mismatches) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for size, rate, design, suffix in RUNS:
        rate = a.rate if rate is None else rate
        run = name(size, rate, suffix)
        rep = report(a, size, rate, design, suffix)
        print("| " + " | ".join(row(run, rep)) + " |")


if __name__ == "__main__":
    main()
