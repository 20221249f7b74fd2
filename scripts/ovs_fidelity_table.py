#!/usr/bin/env python3
"""Markdown tables from the JSON reports of scripts/ovs_fidelity_all.sh (docs/ovs-fidelity.md).

    scripts/ovs_fidelity_table.py OUT[,OUT2,...] [SETS...]

With several OUT directories (repetitions), each row is the run with the median ns/packet and
the last column gives the range of ns/packet over the repetitions.
"""
import json
import os
import sys


def load(outs, name):
    """The run with the median ns/packet over the directories (None if none has it), with
    'ns_all': every run's ns/packet."""
    runs = [r for r in (load1(o, name) for o in outs) if r]
    if not runs:
        return None
    runs.sort(key=ns_of)
    best = runs[(len(runs) - 1) // 2]
    best["ns_all"] = [ns_of(r) for r in runs]
    best["ns_whole_all"] = [r["ns_per_packet"] for r in runs]
    return best


def ns_of(r):
    if "counters" in r:  # rqvs; its steady state is the after-first-pass rate
        return 1000 / r["mpps_after_first_pass"]
    return r["ns_per_packet"]


def spread(r, key="ns_all"):
    a = r[key]
    return f"{min(a):.0f}–{max(a):.0f} (n={len(a)})" if len(a) > 1 else "-"


def load1(out, name):
    p = os.path.join(out, name + ".json")
    if not os.path.exists(p):
        return None
    d = json.load(open(p))
    t = os.path.join(out, name + ".time")  # rqvs: /usr/bin/time's wall, user, system seconds
    if os.path.exists(t):
        d["time"] = [float(x) for x in open(t).read().split()[-3:]]
    return d


def pct(a, n):
    return f"{100 * a / n:.1f}%" if n else "-"


def ovs_row(label, o):
    n = o["packets"]
    return (f"| {label} | {o['kpps'] / 1000:.3f} | {o['ns_per_packet']:.0f} | {o['cycles_per_packet']:.0f} | "
            f"{pct(o['emc_hits'], n)} | {pct(o['megaflow_hits'], n)} | {o['subtables_per_megaflow_hit']:.2f} | "
            f"{o['upcalls']:,} (+{o['lost_upcalls']:,} lost) | {o['megaflows']:,} | {o['masks']} | "
            f"{o['pmd_on_cpu_share']:.3f} | {spread(o)} |")


def rqvs_row(label, r, tsc_ghz, steady=False):
    c = r["counters"]
    t = r.get("time")
    share = f"{(t[1] + t[2]) / t[0]:.3f}" if t else "-"
    n = c["received"]
    ns = 1000 / r["mpps_after_first_pass"] if steady else r["ns_per_packet"]
    mpps = r["mpps_after_first_pass"] if steady else r["mpps"]
    return (f"| {label} | {mpps:.3f} | {ns:.0f} | {ns * tsc_ghz:.0f} | {pct(c['emc_hit'], n)} | "
            f"{pct(c['megaflow_hit'], n)} | {r['avg_subtables_per_hit']:.2f} | "
            f"{c['upcall']:,} (+{c['lost']:,} lost) | {c['megaflows']:,} | {c['masks']} | {share} | "
            f"{spread(r, 'ns_all' if steady else 'ns_whole_all')} |")


HEAD = ("| run | Mpps | ns/packet | cycles/packet | EMC hits | megaflow hits | subtables/hit | "
        "upcalls | megaflows | masks | PMD on-CPU | ns range |\n|---|---|---|---|---|---|---|---|---|---|---|---|")


def main():
    out = sys.argv[1].split(",")
    sets = sys.argv[2:] or ["acl1", "fw1", "ipc1"]
    tsc = None
    a_o, a_r = load(out, "ovs_allemc"), load(out, "rqvs_allemc")
    if a_o:
        tsc = a_o["tsc_ghz"]
    for s in sets:
        o = load(out, f"ovs_{s}_cold")
        if o:
            tsc = o["tsc_ghz"]
    tsc = tsc or 2.6
    print(f"TSC {tsc:.4f} GHz (from pmd-perf-show: used cycles / share / duration)\n")
    if a_o and a_r:
        print("### All-EMC-hit (one flow)\n")
        print(HEAD)
        print(ovs_row("OVS", a_o))
        print(rqvs_row("rqvs", a_r, tsc))
        print()
    for s in sets:
        rows = []
        for name, label in [("cold", "cold, EMC 1/5"), ("warm", "warm, EMC 1/5"), ("noemc", "warm, EMC off")]:
            o = load(out, f"ovs_{s}_{name}")
            if o:
                rows.append(ovs_row(f"OVS {label}", o))
            r = load(out, f"rqvs_{s}_{'noemc' if name == 'noemc' else 'cold'}")
            if r and name != "noemc":
                rows.append(rqvs_row(f"rqvs {label}" + (" (after 1st pass)" if name == "warm" else ""),
                                     r, tsc, steady=name == "warm"))
            elif r:
                rows.append(rqvs_row(f"rqvs {label} (after 1st pass)", r, tsc, steady=True))
        print(f"### {s} 10K\n")
        print(HEAD)
        print("\n".join(rows))
        m = load(out, f"ovs_{s}_metrics")
        r = load(out, f"rqvs_{s}_cold")
        extra = []
        if m:
            extra.append(f"OVS with pmd-perf-metrics (cold): {m['ns_per_packet']:.0f} ns/packet, "
                         f"{m['upcalls']:,} upcalls at {m['us_per_upcall']:.1f} us, "
                         f"{m['lost_upcalls']:,} lost")
        if r:
            c = r["counters"]
            up = c["upcall_ns"] / c["upcall"] / 1000 if c["upcall"] else 0
            extra.append(f"rqvs (cold): {c['upcall']:,} upcalls at {up:.1f} us; PMD time shares "
                         f"EMC {r['share_emc']:.1%}, megaflow {r['share_megaflow']:.1%}, "
                         f"upcalls {r['share_upcall']:.1%}")
        if extra:
            print("\n" + "; ".join(extra) + ".")
        print()


if __name__ == "__main__":
    main()
