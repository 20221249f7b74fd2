#!/usr/bin/env python3
"""Update rates through the OpenFlow channel: `rqvs bench openflow` on acl1 100K and 500K (CFLOWS;
ORIG and CCACHE beside it at 100K), and a bundle of 125K flows into the 500K CFLOWS switch; writes the JSON of
every run, a Markdown table and an SVG of the traffic through the switch around the bundle's
commit.

  scripts/openflow_bench.py --rqvs target/release/rqvs --out docs/openflow-bench

Needs the shared ClassBench data (../shared/data/classbench). Run it on a quiet machine: the
switch's PMD, the manager thread and the client share the cores.
"""

import argparse
import json
import os
import subprocess
import sys

D = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "classbench")

RUNS = [
    # (name, set, design, flux, flow-mods, bundle). ORIG and CCACHE hold out fewer flows and stream
    # fewer flow-mods: each commit waits for a revalidation of every megaflow (seconds at 100K).
    ("acl1_100k_cflows", "acl1_100k", "cflows", 0.1, 300000, 0),
    ("acl1_100k_orig", "acl1_100k", "orig", 0.01, 2000, 0),
    ("acl1_100k_ccache", "acl1_100k", "ccache", 0.01, 2000, 0),
    ("acl1_500k_cflows", "acl1_500k", "cflows", 0.1, 500000, 0),
    ("acl1_500k_bundle", "acl1_500k", "cflows", 0.1, 250000, 125000),
]


def run(rqvs, name, size, designs, flux, flow_mods, bundle, out):
    path = f"{out}-{name}.json"
    cmd = [
        rqvs, "bench", "openflow",
        "--rules", os.path.join(D, "rules", f"{size}.xz"),
        "--trace", os.path.join(D, "traces", f"{size}_trace.xz"),
        "--design", designs, "--flux", str(flux), "--flow-mods", str(flow_mods), "--bundle", str(bundle),
        "--json", path,
    ]
    print("+", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)
    with open(path) as f:
        return " ".join(cmd[1:]).replace(D, "$D"), json.load(f)


def timeline_svg(b, path):
    """Frames per 10 ms from 1 s before the commit; the commit at x = 100."""
    t = b["timeline_10ms"]
    w, h, left, bottom = 640, 260, 50, 30
    top = max(t) or 1
    def x(i):
        return left + i * (w - left - 10) / max(len(t) - 1, 1)
    def y(v):
        return h - bottom - v * (h - bottom - 20) / top
    pts = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(t))
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
         f'<rect width="{w}" height="{h}" fill="white"/>',
         f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.2" points="{pts}"/>',
         f'<line x1="{x(100):.1f}" y1="15" x2="{x(100):.1f}" y2="{h - bottom}" stroke="#d62728" stroke-dasharray="4,3"/>',
         f'<text x="{x(100) + 4:.1f}" y="26" fill="#d62728">COMMIT_REQUEST sent</text>']
    if b.get("visible_s") is not None:
        vx = x(100 + b["visible_s"] * 100)
        o.append(f'<line x1="{vx:.1f}" y1="15" x2="{vx:.1f}" y2="{h - bottom}" stroke="#2ca02c" stroke-dasharray="2,2"/>')
        o.append(f'<text x="{vx + 4:.1f}" y="40" fill="#2ca02c">first frame by a bundled flow (+{b["visible_s"]:.3f} s)</text>')
    for s in range(0, 4):
        xs = x(s * 100)
        o.append(f'<text x="{xs:.1f}" y="{h - 12}" text-anchor="middle">{s - 1} s</text>')
    o.append(f'<text x="8" y="{y(top):.1f}">{top * 100 / 1e6:.2f} Mpps</text>')
    o.append(f'<text x="8" y="{h - bottom:.1f}">0</text>')
    o.append(f'<line x1="{left}" y1="{h - bottom}" x2="{w - 10}" y2="{h - bottom}" stroke="black"/>')
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rqvs", default="target/release/rqvs")
    ap.add_argument("--out", default="docs/openflow-bench")
    a = ap.parse_args()
    rows = []
    for r in RUNS:
        cmd, j = run(a.rqvs, *r, a.out)
        for d in j["designs"]:
            rows.append((r[1], cmd, j, d))
    lines = ["| set | design | flows | held out | flow-mods | flow-mods/s | traffic during (Mpps) | coverage after | frames checked | mismatches | bundle: commit / visible |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for size, cmd, j, d in rows:
        b = d.get("bundle")
        bundle = f"{b['flows']}: {b['commit_s']:.3f} s / {b['visible_s']:.3f} s" if b and b.get("visible_s") is not None else "-"
        cov = f"{d['coverage_after_stream'] * 100:.1f}%" if d.get("coverage_after_stream") is not None else "-"
        lines.append(f"| {size} | {d['design']} | {d['flows']} | {d['held_out']} | {d['flow_mods']} | {d['flow_mods_per_s']:.0f} | "
                     f"{d['pps_during_stream'] / 1e6:.3f} | {cov} | {d['frames_exact'] + d['frames_during']} | {d['mismatches']} | {bundle} |")
        if b:
            timeline_svg(b, f"{a.out}-bundle.svg")
    print("\n".join(lines))
    print()
    for size, cmd, j, d in rows:
        print(f"- {size} {d['design']}: `rqvs {cmd}` — commit {j.get('git_rev', '?')}, CPU {j.get('cpu', '?')}")


if __name__ == "__main__":
    main()
