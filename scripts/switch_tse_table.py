#!/usr/bin/env python3
"""The real-switch TSE curve of docs/switch-bench.md from the JSON of `scripts/bench_switch.py
--attack` runs: one Markdown table (stdout) and one plot per rule count.

    scripts/switch_tse_table.py docs/switch-tse/tse-1k.json docs/switch-tse/police-1k.json:+policing ... \
        [--plot-prefix docs/switch-tse/curve]

FILE:SUFFIX appends SUFFIX to the design of every row of FILE (a run made with other
`--rqvs-args`, e.g. `--ingress-policing`). Columns:

- benign Kpps: the highest benign rate with < 1% benign loss while the attack ran; "≥" when the
  search's top-speed probe passed, i.e. the switch forwarded all the benign sender could push;
- % of clean: that rate over the same design's rate with the attacker idle (attack 0; for a
  SUFFIX variant, its design's unsuffixed clean rate). A rate the sender bounded is a floor, so
  the share is then a bound: "≥" when the row's rate is a floor, "≤" when the clean rate is,
  "–" when both are;
- % of offered top: that rate over what the benign sender pushed into the switch at top speed in
  the same search (with the attack running: the two senders share a core);
- attack delivered: the attack's rate out of the switch at the best probe;
- megaflows, masks, subtables/hit: the switch's, sampled at 90% of the best probe (of the
  top-speed probe when no probe passed).
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_switch  # noqa: E402  (plot_attack, row_label)


def load(spec):
    path, _, suffix = spec.partition(":")
    d = json.load(open(path, encoding="utf-8"))
    rows = []
    for r in d["rows"]:
        r = dict(r)
        if suffix and r.get("design"):
            r["design"] += suffix
        r["file"] = path
        rows.append(r)
    return rows


def share_of_clean(rows, r):
    """The row's rate over the same design's clean rate (attack 0, without the SUFFIX). A rate
    the sender bounded is a floor, so the share is a bound: "≥" when only the row's rate is a
    floor, "≤" when only the clean one is, "–" when both are."""
    if r["best_pps"] is None:
        return "–"
    if r["attack_pps"] == 0:
        return "100%"
    base = dict(r, design=(r["design"] or "").split("+")[0] or None)
    for c in rows:
        same = (c["rules"], bench_switch.row_label(c), c.get("attack_pps")) == (r["rules"], bench_switch.row_label(base), 0)
        if same and c["best_pps"]:
            floor = (r["bound_by"] == "sender", c["bound_by"] == "sender")
            mark = {(False, False): "", (True, False): "≥ ", (False, True): "≤ "}.get(floor)
            return "–" if mark is None else f"{mark}{100 * r['best_pps'] / c['best_pps']:.0f}%"
    return "–"


def kpps(x):
    return f"{x / 1e3:.1f}"


def pct(a, b):
    return f"{100 * a / b:.0f}%" if a is not None and b else "–"


def cells(rows, r):
    sample = r.get("switch_sample_at_best") or r.get("switch_sample_top") or {}
    best = r["best_pps"]
    best_s = "–" if best is None else ("≥ " if r["bound_by"] == "sender" else "") + kpps(best)
    top = r.get("sender_top_into_switch_pps")
    atk = r.get("attack_at_best")
    sub = sample.get("subtable_lookups_per_megaflow_hit",
                     sample.get("avg_subtable_lookups_per_megaflow_hit"))
    return [
        f"{r['rules']:,}",
        bench_switch.row_label(r),
        f"{r['attack_pps'] / 1e3:g}",
        best_s,
        share_of_clean(rows, r),
        "–" if top is None else kpps(top),
        pct(best, top),
        "–" if not atk else kpps(atk["delivered_pps"]),
        f"{sample['megaflows']:,}" if "megaflows" in sample else "–",
        f"{sample['masks']:,}" if "masks" in sample else "–",
        "–" if sub is None or not sample.get("megaflows") else f"{sub:.1f}",
    ]


HEADER = ["rules", "switch", "attack Kpps", "benign Kpps", "% of clean", "benign top→switch",
          "% of offered top", "attack delivered Kpps", "megaflows", "masks", "subtables/hit"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", help="bench_switch.py --json files, each FILE or FILE:DESIGN-SUFFIX")
    ap.add_argument("--plot-prefix", help="draw PREFIX-RULES.svg per rule count")
    a = ap.parse_args()
    rows = [r for spec in a.runs for r in load(spec) if r.get("attack_pps") is not None]
    order = {v: i for i, v in enumerate(dict.fromkeys(bench_switch.row_label(r) for r in rows))}
    rows.sort(key=lambda r: (r["rules"], order[bench_switch.row_label(r)], r["attack_pps"]))
    print("| " + " | ".join(HEADER) + " |")
    print("|" + "---|" * len(HEADER))
    for r in rows:
        print("| " + " | ".join(cells(rows, r)) + " |")
    if a.plot_prefix:
        for n in sorted({r["rules"] for r in rows}):
            bench_switch.plot_attack([r for r in rows if r["rules"] == n], f"{a.plot_prefix}-{n}.svg")


if __name__ == "__main__":
    main()
