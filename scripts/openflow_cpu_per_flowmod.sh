#!/bin/bash
# CPU time per flow-mod of the switch's two update threads — the OpenFlow connection (`of1`)
# and the CFLOWS manager (`cflows-manager`) — in one `rqvs bench openflow` run of CFLOWS at
# acl1_500k (--flux 0.1 --flow-mods 500000), for docs/openflow-bench.md ("The allocator"):
# perf samples each thread at 999 Hz; a sample is 1/999 s of that thread's CPU. The manager's
# samples in dropping the publisher (the switch's teardown, after the stream) are left out.
# Wall-clock rates on a shared machine swing ×1.5 between runs of one binary; this splits
# them into what each thread spent.
#
#   scripts/openflow_cpu_per_flowmod.sh RQVS
#
# Needs perf, python3 and the shared ClassBench data (../shared/data/classbench, or $D).
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 RQVS" >&2
  exit 2
fi
bin=$1
D=${D:-$(dirname "$0")/../../shared/data/classbench}
[ -x "$bin" ] || { echo "$0: $bin: not an executable" >&2; exit 2; }
[ -d "$D/rules" ] || { echo "$0: $D/rules: no ClassBench rules there (set D)" >&2; exit 2; }
data=$(mktemp /tmp/openflow-cpu.XXXXXX.perf)
trap 'rm -f "$data"' EXIT
line=$(perf record -q -F 999 -g -o "$data" "$bin" bench openflow --rules "$D/rules/acl1_500k.xz" \
  --trace "$D/traces/acl1_500k_trace.xz" --design cflows --flux 0.1 --flow-mods 500000 --bundle 0 2>&1 | grep "flow-mods/s")
echo "$line"
mods=$(echo "$line" | awk '{print $2}')
perf script -i "$data" -F comm,ip,sym 2>/dev/null | python3 -c '
import sys
mods = int(sys.argv[1])
count, comm, frames = {}, None, []
def sample():
    teardown = any("drop_in_place" in f and "CflowsPublisher>" in f for f in frames)
    if comm in ("of1", "cflows-manager") and not teardown:
        count[comm] = count.get(comm, 0) + 1
for line in sys.stdin:
    if not line.strip():
        sample()
        comm, frames = None, []
    elif not line.startswith(("\t", " " * 8)):
        comm, frames = line.split()[0], []
    else:
        frames.append(line.strip())
sample()
us = {k: v / 999 / mods * 1e6 for k, v in count.items()}
print(" ".join(f"{k} {v:.2f} us" for k, v in sorted(us.items())), f"total {sum(us.values()):.2f} us per flow-mod")
' "$mods"
