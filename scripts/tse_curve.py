#!/usr/bin/env python3
"""The Tuple Space Explosion curve (Csikor et al., CoNEXT'19, Fig. 5-style): benign throughput vs
attack rate, per datapath variant and rule-set size, from `rqvs replay --attack`'s mixed replay
(README: "Mixed replay"; crates/experiment/src/mixed.rs).

    scripts/tse_curve.py [--set acl1] [--sizes 1k,10k,100k] [--rates 0,1e3,1e4,1e5,1e6]
                         [--variant NAME=ARGS ...] [--attack-kind tse] [--attack FILE]
                         [--duration 2] [--reps 1] [--pair X,Y] [--compare DESIGNS] [--out target/tse] [--md OUT.md] [--plot OUT.svg]
                         [--rqvs target/release/rqvs]

For each size: the attack is `rqvs gen attack --rules SET --kind KIND --packets N` (kept in
--out), or --attack FILE for every size; then for each variant and attack rate one `rqvs replay
--rules SET --trace SET_trace --attack A --attack-rate R --duration D --json …` (rate 0: the
clean run, no attack). A variant is a name and the replay options that make it, e.g.
`orig=--design orig`, `orig+limit=--design orig --mask-limit 64`, `cflows=--design cflows`,
`auto=--design auto`; the default variants are orig, ccache and cflows. A variant with
`--attack-policing KPPS` (the attack's queue policed) runs its clean run without it (no attack to
police).

The figure per (variant, size, rate) is the benign throughput: benign packets per second of all
PMD time (the attack's share of the PMD is what it takes from benign traffic). The table gives
it in Mpps and as a share of the variant's clean throughput; every run's mismatches (benign and
attack packets) must be 0, or the script fails. JSON of every run kept in --out (reused when
present: delete it to measure again). Python 3.11 standard library only.

With --compare DESIGNS (e.g. orig,ccache,cflows,auto) the script runs one `rqvs compare --designs
DESIGNS --attack …` per size, rate and repetition instead: the designs one after the other in one
process, so their ratios are paired, and the table gives each design's median benign Mpps and auto
against the best fixed design and against ORIG (medians of the per-process ratios).
"""

import argparse
import html
import json
import math
import os
import statistics
import subprocess
import sys

from kept import kept_json

DEFAULT_VARIANTS = ["orig=--design orig", "ccache=--design ccache", "cflows=--design cflows"]
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise SystemExit(f"`{' '.join(cmd)}` failed ({r.returncode}): {r.stderr.strip()[-800:]}")
    return r


def attack_for(a, size):
    if a.attack:
        return a.attack
    path = os.path.join(a.out, f"attack_{a.set}_{size}_{a.attack_kind}.pcap")
    if not os.path.exists(path):
        rules = os.path.join(a.data, "rules", f"{a.set}_{size}.xz")
        cmd = [a.rqvs, "gen", "attack", "--rules", rules, "--kind", a.attack_kind, "--packets", str(a.attack_packets),
               "-o", path]
        log(" ".join(cmd))
        r = run(cmd)
        if r.returncode != 0:
            raise SystemExit(f"`{' '.join(cmd)}` failed: {r.stderr.strip()[-800:]}")
    return path


def kept_report(a, size, rate, path, head):
    """The JSON report at `path`, made first (unless kept) by `rqvs HEAD… --rules SET --trace SET
    --duration D --json PATH`, with the attack at `rate` when it is above 0."""
    rules = os.path.join(a.data, "rules", f"{a.set}_{size}.xz")
    trace = os.path.join(a.data, "traces", f"{a.set}_{size}_trace.xz")
    cmd = [a.rqvs, *head, "--rules", rules, "--trace", trace, "--duration", str(a.duration)]
    if rate > 0:
        cmd += ["--attack", attack_for(a, size), "--attack-rate", f"{rate:g}"]
    # Exit 1 with a report: mismatches, which the callers name.
    report = kept_json(path, cmd, ok_codes=(0, 1))
    if report is None:
        raise SystemExit(f"{path}: no report")
    return report


def measure(a, size, name, args, rate, rep=0):
    tag = f"_r{rep}" if rep else ""
    path = os.path.join(a.out, f"{a.set}_{size}_{name}_{rate:g}{tag}.json".replace("+", "_"))
    words = args.split()
    if rate == 0 and "--attack-policing" in words:
        # The clean run has no attack to police: the variant's clean rate is the design's.
        i = words.index("--attack-policing")
        words = words[:i] + words[i + 2:]
    rep = kept_report(a, size, rate, path, ["replay", *words])
    att = rep.get("attack")
    benign = att["benign"]["mpps"] if att else rep["mpps"]
    mism = rep["mismatches"]
    if mism:
        raise SystemExit(f"{path}: {mism} mismatches ({rep.get('first_mismatch', '')})")
    return {
        "benign_mpps": benign,
        "attack_share_pmd": att["attack"]["share_pmd"] if att else 0.0,
        "masks": rep["counters"]["masks"],
        "megaflows": rep["counters"]["megaflows"],
        "benign_subtables_per_hit": att["benign"]["subtables_per_hit"] if att else rep["avg_subtables_per_hit"],
        "attack_upcalls": att["attack"]["upcalls"] if att else 0,
        "attack_policed": att.get("policed", 0) if att else 0,
        "verified": rep["verified"],
        "mismatches": mism,
        "git_rev": rep.get("git_rev"),
        "cpu": rep.get("cpu"),
    }


def measure_compare(a, size, rate, rep):
    """One `rqvs compare --designs a.compare` (the designs one after the other in one process,
    on the same loaded rules, trace and attack): each design's benign Mpps and auto's report."""
    path = os.path.join(a.out, f"{a.set}_{size}_compare_{rate:g}_r{rep}.json")
    rep = kept_report(a, size, rate, path, ["compare", "--designs", a.compare])
    out = {"verified": 0}
    for d in rep["runs"]:
        if d["mismatches"]:
            raise SystemExit(f"{path}: {d['design']}: {d['mismatches']} mismatches")
        out[d["design"]] = d["attack"]["benign"]["mpps"] if d.get("attack") else d["mpps"]
        out["verified"] += d["verified"]
        if d.get("auto"):
            out["auto_ran"] = sorted(k[len("time_"):-len("_s")] for k, v in d["auto"].items()
                                     if k.startswith("time_") and v > 0)
            out["auto_switches"] = d["auto"]["design_switches"]
    return out


def compare_table(a, sizes, rates):
    """--compare: per size and rate, each design's median benign Mpps, and auto against the best
    fixed design and against ORIG as the median of the per-process ratios (paired runs)."""
    designs = a.compare.split(",")
    fixed = [d for d in designs if d != "auto"]
    lines = [f"Benign Mpps per design, `rqvs compare --designs {a.compare}` (paired: one process per cell and "
             f"repetition), median of {a.reps}; set {a.set}, attack {a.attack or a.attack_kind}, "
             f"{a.duration:g} s of PMD time per design.", ""]
    cells = {}
    for rep in range(a.reps):
        for s in sizes:
            for r in rates:
                cells.setdefault((s, r), []).append(measure_compare(a, s, r, rep))
    head = "| rules | attack pps | " + " | ".join(designs)
    if "auto" in designs:
        head += " | auto/best fixed | auto/orig | auto ran (switches) |"
    lines += [head, "|---" * (head.count("|") - 1) + "|"]
    verified = 0
    summary = {}
    for s in sizes:
        for r in rates:
            runs = cells[(s, r)]
            verified += sum(x["verified"] for x in runs)
            med = {d: statistics.median(x[d] for x in runs) for d in designs}
            row = f"| {s} | {'clean' if r == 0 else f'{r:.0e}'} | " + " | ".join(f"{med[d]:.3f}" for d in designs)
            if "auto" in designs:
                best = statistics.median(x["auto"] / max(x[d] for d in fixed) for x in runs)
                over_orig = statistics.median(x["auto"] / x["orig"] for x in runs) if "orig" in designs else None
                ran = sorted({d for x in runs for d in x.get("auto_ran", [])})
                sw = sum(x.get("auto_switches", 0) for x in runs)
                row += f" | {best:.2f} | {over_orig:.1f} | {', '.join(ran)} ({sw}) |"
                summary[f"{s} {r:g}"] = {"median_mpps": med, "auto_over_best": best, "auto_over_orig": over_orig}
            lines.append(row)
    lines += ["", f"0 mismatches in every run ({verified:,} packets checked)."]
    with open(os.path.join(a.out, "compare.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return "\n".join(lines) + "\n"


def plot(results, variants, sizes, rates, path):
    w_panel, h, pad = 330, 260, 48
    w = w_panel * len(sizes) + 20
    xs = [r for r in rates if r > 0]
    lo, hi = math.log10(min(xs)), math.log10(max(xs))
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h + 40}" font-family="sans-serif" font-size="11">',
         '<rect width="100%" height="100%" fill="white"/>']
    for si, size in enumerate(sizes):
        x0 = si * w_panel + pad
        pw, ph = w_panel - pad - 12, h - 2 * pad + 10
        y0 = pad - 10
        o.append(f'<text x="{x0 + pw / 2}" y="16" text-anchor="middle" font-weight="bold">{html.escape(size)} rules</text>')
        o.append(f'<rect x="{x0}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
        for frac in (0, 0.2, 0.5, 0.8, 1.0):
            y = y0 + ph * (1 - frac)
            o.append(f'<line x1="{x0}" x2="{x0 + pw}" y1="{y}" y2="{y}" stroke="#eee"/>')
            o.append(f'<text x="{x0 - 4}" y="{y + 4}" text-anchor="end">{int(frac * 100)}%</text>')
        def px(r):
            return x0 + (0 if hi == lo else (math.log10(r) - lo) / (hi - lo)) * pw
        for r in xs:
            o.append(f'<text x="{px(r)}" y="{y0 + ph + 14}" text-anchor="middle">{r:.0e}</text>')
        for vi, (name, _) in enumerate(variants):
            clean = results[size][name][0]["benign_mpps"]
            pts = []
            for r in xs:
                m = results[size][name][r]["benign_mpps"]
                frac = min(m / clean, 1.2) if clean > 0 else 0
                pts.append(f"{px(r):.1f},{y0 + ph * (1 - frac):.1f}")
            colour = COLOURS[vi % len(COLOURS)]
            o.append(f'<polyline points="{" ".join(pts)}" fill="none" stroke="{colour}" stroke-width="2"/>')
        if si == 0:
            o.append(f'<text x="{x0 - 36}" y="{y0 + ph / 2}" transform="rotate(-90 {x0 - 36} {y0 + ph / 2})" '
                     'text-anchor="middle">benign throughput, % of clean</text>')
        o.append(f'<text x="{x0 + pw / 2}" y="{y0 + ph + 30}" text-anchor="middle">attack rate, packets/s of PMD time</text>')
    for vi, (name, _) in enumerate(variants):
        x = 20 + vi * 120
        colour = COLOURS[vi % len(COLOURS)]
        o.append(f'<line x1="{x}" x2="{x + 20}" y1="{h + 25}" y2="{h + 25}" stroke="{colour}" stroke-width="2"/>')
        o.append(f'<text x="{x + 24}" y="{h + 29}">{html.escape(name)}</text>')
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", default="acl1")
    ap.add_argument("--sizes", default="1k,10k,100k")
    ap.add_argument("--rates", default="0,1e3,1e4,1e5,1e6")
    ap.add_argument("--variant", action="append", default=None, help="NAME=REPLAY ARGS (repeatable)")
    ap.add_argument("--attack-kind", default="tse")
    ap.add_argument("--attack-packets", type=int, default=100000)
    ap.add_argument("--attack", default=None, help="one attack file for every size (instead of rqvs gen attack)")
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument("--reps", type=int, default=1, help="runs per cell (the median is shown)")
    ap.add_argument("--compare", default=None,
                    help="DESIGNS (e.g. orig,ccache,cflows,auto): one `rqvs compare` per size, rate and repetition "
                         "instead of the variants' replays; the table gives auto against the best fixed design")
    ap.add_argument("--pair", action="append", default=None,
                    help="X,Y: also the table of Y/X from paired runs (repeatable), e.g. cflows,auto")
    ap.add_argument("--data", default=os.environ.get("RQVS_CLASSBENCH_DIR", "../shared/data/classbench"))
    ap.add_argument("--out", default="target/tse")
    ap.add_argument("--md", default=None)
    ap.add_argument("--plot", default=None)
    ap.add_argument("--rqvs", default="target/release/rqvs")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.compare:
        sizes = a.sizes.split(",")
        rates = sorted({float(r) for r in a.rates.split(",")} | {0.0})
        text = compare_table(a, sizes, rates)
        print(text)
        if a.md:
            with open(a.md, "w") as f:
                f.write(text)
        return
    variants = [v.split("=", 1) for v in (a.variant or DEFAULT_VARIANTS)]
    if any(len(v) != 2 for v in variants):
        raise SystemExit("--variant: expected NAME=REPLAY ARGS, e.g. 'orig=--design orig'")
    sizes = a.sizes.split(",")
    rates = sorted({float(r) for r in a.rates.split(",")} | {0.0})
    # Repetitions interleave the variants (rep, size, rate, variant: a slow spell of a shared
    # machine falls on every variant alike); each cell is the median run by benign Mpps.
    runs = {}
    for rep in range(a.reps):
        for s in sizes:
            for r in rates:
                for n, args in variants:
                    runs.setdefault((s, n, r), []).append(measure(a, s, n, args, r, rep))

    def median(vs):
        return sorted(vs, key=lambda v: v["benign_mpps"])[len(vs) // 2]

    results = {s: {n: {r: median(runs[(s, n, r)]) for r in rates} for n, _ in variants} for s in sizes}
    lines = [f"Benign throughput (Mpps of PMD time, and % of the variant's clean rate) vs attack rate; "
             f"set {a.set}, attack {a.attack or a.attack_kind}, {a.duration:g} s of PMD time per run, "
             f"median of {a.reps} run{'s' if a.reps > 1 else ''}.", ""]
    for s in sizes:
        lines.append(f"**{s} rules**")
        lines.append("")
        lines.append("| variant | " + " | ".join("clean" if r == 0 else f"{r:.0e} pps" for r in rates) + " | masks at max |")
        lines.append("|---" * (len(rates) + 2) + "|")
        for n, _ in variants:
            row = results[s][n]
            clean = row[0]["benign_mpps"]
            cells = []
            for r in rates:
                m = row[r]["benign_mpps"]
                cells.append(f"{m:.3f}" if r == 0 else f"{m:.3f} ({100 * m / clean:.0f}%)" if clean else f"{m:.3f}")
            lines.append(f"| {n} | " + " | ".join(cells) + f" | {row[rates[-1]]['masks']} |")
        lines.append("")
    for pair in a.pair or []:
        x, y = pair.split(",")
        if x not in dict(variants) or y not in dict(variants):
            raise SystemExit(f"--pair {pair}: expected two variant names, of {', '.join(n for n, _ in variants)}")
        # The runs of x and y made one after the other (same repetition, size and rate), so the
        # ratio of each pair sees the same spell of the machine; the median of the pairs' ratios.
        lines.append(f"**{y}/{x}**, benign Mpps, median of the {a.reps} paired runs' ratios (each pair run one after the other)")
        lines.append("")
        lines.append("| rules | " + " | ".join("clean" if r == 0 else f"{r:.0e} pps" for r in rates) + " |")
        lines.append("|---" * (len(rates) + 1) + "|")
        for s_ in sizes:
            cells = []
            for r in rates:
                ratios = sorted(b["benign_mpps"] / max(c["benign_mpps"], 1e-12)
                                for c, b in zip(runs[(s_, x, r)], runs[(s_, y, r)]))
                cells.append(f"{statistics.median(ratios):.2f}")
            lines.append(f"| {s_} | " + " | ".join(cells) + " |")
        lines.append("")
    first = results[sizes[0]][variants[0][0]][0]
    revs = sorted({v["git_rev"] for vs in runs.values() for v in vs})
    lines.append(f"0 mismatches in every run. CPU: {first.get('cpu')}; commit {', '.join(revs)}.")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.md:
        with open(a.md, "w") as f:
            f.write(text)
    with open(os.path.join(a.out, "curve.json"), "w") as f:
        json.dump({s: {n: {f"{r:g}": v for r, v in row.items()} for n, row in rs.items()} for s, rs in results.items()},
                  f, indent=1)
    if a.plot and len([r for r in rates if r > 0]) > 0:
        plot(results, variants, sizes, rates, a.plot)


if __name__ == "__main__":
    main()
