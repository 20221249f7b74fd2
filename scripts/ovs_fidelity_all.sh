#!/usr/bin/env bash
# The measurements of docs/ovs-fidelity.md: real OVS 3.1 (scripts/ovs_dpdk_replay.sh) and
# `rqvs replay --design orig` on the same .ofctl rules and the same 64-byte pcap, for
# acl1/fw1/ipc1 10K, plus the all-EMC-hit runs. JSON reports go to OUT; a table is printed at the
# end (scripts/ovs_fidelity_table.py). About 5 minutes of one core for OVS, 2 for rqvs.
#
#   scripts/ovs_fidelity_all.sh OUT [SETS="acl1 fw1 ipc1"]
#
# RQVS=path/to/rqvs (default target/release/rqvs), DATA=ClassBench dir
# (default ../shared/data/classbench), SECS (10), WARM (6), PMD_CPU (1, also rqvs's core).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd); sets=${2:-acl1 fw1 ipc1}
rqvs=${RQVS:-$here/../target/release/rqvs}
data=${DATA:-$here/../../shared/data/classbench}
secs=${SECS:-10}; warm=${WARM:-6}; cpu=${PMD_CPU:-1}
ovs=$here/ovs_dpdk_replay.sh

for s in $sets; do
    [ -s "$out/$s.ofctl" ] || "$rqvs" convert rules --to ofctl --actions output:2 \
        "$data/rules/${s}_10k.xz" -o "$out/$s.ofctl"
    [ -s "$out/$s.pcap" ] || "$rqvs" convert trace --to pcap \
        "$data/traces/${s}_10k_trace.xz" -o "$out/$s.pcap"
done
# One flow: the first packet of acl1's pcap, 1024 times (every packet an EMC hit).
first=$(set -- $sets; echo "$1")
[ -s "$out/one_flow.pcap" ] || python3 - "$out/$first.pcap" "$out/one_flow.pcap" <<'EOF'
import struct, sys
data = open(sys.argv[1], "rb").read()
incl = struct.unpack("<I", data[32:36])[0]
open(sys.argv[2], "wb").write(data[:24] + data[24:24 + 16 + incl] * 1024)
EOF

run_ovs() {  # name, then env assignments, then the script's arguments
    local name=$1; shift
    echo "== OVS $name" >&2
    env JSON="$out/ovs_$name.json" PMD_CPU="$cpu" "$@" > "$out/ovs_$name.txt" 2>&1 \
        || { echo "failed: see $out/ovs_$name.txt" >&2; return 1; }
}
run_rqvs() {  # name, then rqvs replay's arguments; on the PMD's core with the PMD's priority
    # (ovs_dpdk_replay.sh renices the PMD to -20); .time: wall, user, system seconds
    local name=$1; shift
    echo "== rqvs $name" >&2
    # Own session (so its own autogroup) at nice -20, like the OVS daemon's.
    /usr/bin/time -f "%e %U %S" -o "$out/rqvs_$name.time" setsid --wait bash -c \
        'echo -20 > /proc/$$/autogroup 2>/dev/null; exec nice -n -20 "$@"' _ \
        taskset -c "$cpu" "$rqvs" replay --design orig "$@" \
        --json "$out/rqvs_$name.json" > "$out/rqvs_$name.txt" 2>&1 \
        || { echo "failed: see $out/rqvs_$name.txt" >&2; return 1; }
}

f=$first
run_ovs allemc "$ovs" "$out/$f.ofctl" "$out/one_flow.pcap" "$secs" 0.2
run_rqvs allemc --rules "$out/$f.ofctl" --trace "$out/one_flow.pcap" --emc-prob 0.2 --duration "$secs"
for s in $sets; do
    r=$out/$s.ofctl; p=$out/$s.pcap
    # From the first packet (cold caches), as rqvs replay runs.
    run_ovs "${s}_cold" "$ovs" "$r" "$p" "$secs" 0.2
    run_rqvs "${s}_cold" --rules "$r" --trace "$p" --emc-prob 0.2 --duration "$secs"
    # After WARM seconds of replay (megaflows installed, dynamic flow limit grown).
    run_ovs "${s}_warm" WARMUP="$warm" "$ovs" "$r" "$p" "$secs" 0.2
    # EMC off, warm: every packet a megaflow hit.
    run_ovs "${s}_noemc" WARMUP="$warm" "$ovs" "$r" "$p" "$secs" 0
    run_rqvs "${s}_noemc" --rules "$r" --trace "$p" --no-emc --duration "$secs"
    # Cold again with pmd-perf-metrics: the time of each upcall.
    run_ovs "${s}_metrics" PERF_METRICS=1 "$ovs" "$r" "$p" "$secs" 0.2
done
python3 "$here/ovs_fidelity_table.py" "$out" $sets
