#!/bin/bash
# Paired runs of `rqvs bench openflow`, an old and a new binary alternating, for the
# before/after rows of docs/openflow-bench.md ("Incremental revalidation"): ORIG and CCACHE at
# acl1_100k (--flux 0.01 --flow-mods 2000, the page's earlier command), the new binary's long
# ORIG/CCACHE streams (--flux 0.1 --flow-mods 100000), CFLOWS at acl1_100k and acl1_500k.
# Every run's JSON lands in OUT; each run's line and the load average go to stdout.
#
#   scripts/openflow_bench_pairs.sh OLD_RQVS NEW_RQVS OUT
#
# Needs the shared ClassBench data (../shared/data/classbench, or $D).
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: $0 OLD_RQVS NEW_RQVS OUT" >&2
  exit 2
fi
old=$1 new=$2 out=$3
D=${D:-$(dirname "$0")/../../shared/data/classbench}
for f in "$old" "$new"; do
  [ -x "$f" ] || { echo "$0: $f: not an executable" >&2; exit 2; }
done
[ -d "$D/rules" ] || { echo "$0: $D/rules: no ClassBench rules there (set D)" >&2; exit 2; }
mkdir -p "$out"
run() { # tag binary set design flux flow-mods
  local tag=$1 bin=$2 set=$3 d=$4 flux=$5 mods=$6
  echo "== $tag $set $d flux=$flux flow-mods=$mods load $(cut -d' ' -f1-3 /proc/loadavg)"
  "$bin" bench openflow --rules "$D/rules/$set.xz" --trace "$D/traces/${set}_trace.xz" --design "$d" \
    --flux "$flux" --flow-mods "$mods" --bundle 0 --json "$out/$tag-$set-$d-$mods.json" 2>&1 | grep "flow-mods/s"
}
for d in orig ccache; do
  run before "$old" acl1_100k $d 0.01 2000
  run after "$new" acl1_100k $d 0.01 2000
done
for d in orig ccache; do
  run after "$new" acl1_100k $d 0.1 100000
done
run before "$old" acl1_100k cflows 0.1 300000
run after "$new" acl1_100k cflows 0.1 300000
run before "$old" acl1_500k cflows 0.1 500000
run after "$new" acl1_500k cflows 0.1 500000
