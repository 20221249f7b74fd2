#!/bin/bash
# CPU time per flow-mod of the switch's two update threads — the OpenFlow connection (`of1`)
# and the CFLOWS manager (`cflows-manager`) — in one `rqvs bench openflow` run of CFLOWS at
# acl1_500k (--flux 0.1 --flow-mods 500000), for docs/openflow-bench.md ("The allocator"):
# perf samples each thread at 999 Hz; a sample is 1/999 s of that thread's CPU. Only samples
# between the connection's first and last are counted: the manager's after that are the
# switch's teardown (dropping the publisher), which before 2026-12-03 (fifth session) were
# counted whenever the call chain did not name it — ~0.5-1 µs of the manager's figure.
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
perf script -i "$data" -F comm,time,ip,sym 2>/dev/null | python3 -c '
import sys
mods = int(sys.argv[1])
samples, comm, t, frames = [], None, 0.0, []
def sample():
    if comm in ("of1", "cflows-manager"):
        samples.append((comm, t, any("drop_in_place" in f and "CflowsPublisher>" in f for f in frames)))
for line in sys.stdin:
    if not line.strip():
        sample()
        comm, frames = None, []
    elif not line.startswith(("\t", " " * 8)):
        head = line.split()
        comm, t, frames = head[0], float(head[1].rstrip(":")), []
    else:
        frames.append(line.strip())
sample()
# The stream: the connection'"'"'s longest stretch of samples without a gap of 0.3 s (its stray
# samples of the handshake, ~1 s before, and the close, ~0.5 s after, are outside). The manager'"'"'s samples after it are the
# switch'"'"'s teardown (dropping the publisher, ~0.4 s), which a frame-pointer call chain does not
# always name.
of1 = sorted(t for c, t, _ in samples if c == "of1")
stretches, first = [], 0
for i in range(1, len(of1) + 1):
    if i == len(of1) or of1[i] - of1[i - 1] > 0.3:
        stretches.append((i - first, of1[first], of1[i - 1]))
        first = i
_, lo, hi = max(stretches)
count = {}
for c, t, teardown in samples:
    if lo <= t <= hi and not teardown:
        count[c] = count.get(c, 0) + 1
us = {k: v / 999 / mods * 1e6 for k, v in count.items()}
share = sum(count.values()) / 999 / (hi - lo)
print(" ".join(f"{k} {v:.2f} us" for k, v in sorted(us.items())), f"total {sum(us.values()):.2f} us per flow-mod;",
      f"both threads {share:.2f} cores over the {hi - lo:.2f} s stream")
' "$mods"
