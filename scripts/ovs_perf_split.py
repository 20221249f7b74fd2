#!/usr/bin/env python3
"""Splits a perf profile of OVS's PMD thread (scripts/ovs_dpdk_replay.sh with PERF=FILE and an
ovs-vswitchd that has symbols, VSWITCHD=...) into the parts docs/ovs-fidelity.md compares.

    scripts/ovs_perf_split.py PERF.data [NS_PER_PACKET]

Prints each part's share of the PMD's samples (and ns/packet when NS_PER_PACKET is given) and
the symbols above 0.5% in each. Parts, by symbol (OVS 3.1 names; inlined code counts in its
caller):
  dpcls     dpcls_lookup and the subtable lookup: netdev_flow_key_flatten, the generic or
            specialized dpcls_subtable_lookup_*, cmap_find_batch
  emc+input dp_netdev_input__ (where dfc_processing, emc_lookup and the flow-batching are
            inlined), emc_probabilistic_insert, fast_path_processing, miniflow_hash_5tuple,
            memcmp (the EMC's key compare)
  parse     miniflow_extract
  actions   dp_netdev_execute_actions, odp_execute_actions, dp_execute_cb, dp_execute_output_action,
            packet_batch_per_flow_execute
  io        the net_pcap driver, libpcap, libc's stdio and the kernel (the tx pcap's writes),
            DPDK's mbuf/mempool/ring, netdev_dpdk_*, netdev_send/rxq_recv, output-batch flushing
  upcall    everything else in ovs-vswitchd: the slow path (xlate, classifier, ukeys, flow put)
"""
import collections
import re
import subprocess
import sys

DPCLS = re.compile(r"^(dpcls_|netdev_flow_key_flatten|cmap_find_batch|lookup_generic)")
EMC = re.compile(r"^(dp_netdev_input__|dp_netdev_input$|emc_|dfc_|smc_|fast_path_processing|"
                 r"miniflow_hash_5tuple|__memcmp)")
PARSE = re.compile(r"^(miniflow_extract|parse_)")
ACTIONS = re.compile(r"^(dp_netdev_execute_actions|odp_execute_|dp_execute_|packet_batch_per_flow)")
IO = re.compile(r"^(netdev_dpdk_|netdev_send|netdev_rxq_recv|dp_netdev_pmd_flush|"
                r"dp_netdev_process_rxq_port|dp_packet_|rte_|pmd_thread_main|"
                r"dp_netdev_rxq_|netdev_rxq_|cycles_counter)")
IO_DSO = re.compile(r"(librte_|libpcap|libc\.so|kernel|vdso)")


def part(dso, sym):
    if sym.startswith("__memcmp"):  # libc's memcmp: the EMC's key compare
        return "emc+input"
    if "ovs-vswitchd" not in dso:
        return "io" if IO_DSO.search(dso) else "other"
    for name, rx in [("dpcls", DPCLS), ("emc+input", EMC), ("parse", PARSE),
                     ("actions", ACTIONS), ("io", IO)]:
        if rx.search(sym):
            return name
    return "upcall"


def main():
    data = sys.argv[1]
    ns = float(sys.argv[2]) if len(sys.argv) > 2 else None
    rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "--sort", "dso,sym",
                          "--percent-limit", "0"], capture_output=True, text=True).stdout
    parts = collections.Counter()
    syms = collections.defaultdict(list)
    for line in rep.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[[.k]\]\s+(.*)", line)
        if not m:
            continue
        pct, dso, sym = float(m.group(1)), m.group(2), m.group(3).strip()
        p = part(dso, sym)
        parts[p] += pct
        if pct >= 0.5:
            syms[p].append(f"{sym if not sym.startswith('0x') else dso} {pct:.1f}%")
    for p, pct in parts.most_common():
        extra = f"  {ns * pct / 100:6.0f} ns/packet" if ns else ""
        print(f"{p:10s} {pct:5.1f}%{extra}   {', '.join(syms[p][:6])}")


if __name__ == "__main__":
    main()
