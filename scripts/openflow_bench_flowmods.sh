#!/bin/bash
# Paired runs of `rqvs bench openflow` for docs/openflow-bench.md ("Flow-mods per second"): an
# old and a new binary alternating (the order flips every round), ROUNDS rounds (3 unless
# set) of CFLOWS at acl1_500k (--flux 0.1 --flow-mods 500000) and ORIG and CCACHE at acl1_100k
# (--flux 0.1 --flow-mods 30000). Every run's JSON lands in OUT; each run's line and the load
# average go to stdout; the medians at the end (python3).
#
#   scripts/openflow_bench_flowmods.sh OLD_RQVS NEW_RQVS OUT
#
# Needs the shared ClassBench data (../shared/data/classbench, or $D).
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: $0 OLD_RQVS NEW_RQVS OUT" >&2
  exit 2
fi
old=$1 new=$2 out=$3
D=${D:-$(dirname "$0")/../../shared/data/classbench}
rounds=${ROUNDS:-3}
for f in "$old" "$new"; do
  [ -x "$f" ] || { echo "$0: $f: not an executable" >&2; exit 2; }
done
[ -d "$D/rules" ] || { echo "$0: $D/rules: no ClassBench rules there (set D)" >&2; exit 2; }
mkdir -p "$out"
run() { # tag round binary set design flux flow-mods
  local tag=$1 round=$2 bin=$3 set=$4 d=$5 flux=$6 mods=$7
  echo "== $tag round $round $set $d flux=$flux flow-mods=$mods load $(cut -d' ' -f1-3 /proc/loadavg)"
  "$bin" bench openflow --rules "$D/rules/$set.xz" --trace "$D/traces/${set}_trace.xz" --design "$d" \
    --flux "$flux" --flow-mods "$mods" --bundle 0 --json "$out/$tag-$round-$set-$d.json" 2>&1 | grep "flow-mods/s" || true
}
for round in $(seq 1 "$rounds"); do
  if [ $((round % 2)) -eq 1 ]; then order="old new"; else order="new old"; fi
  for spec in "acl1_500k cflows 0.1 500000" "acl1_100k orig 0.1 30000" "acl1_100k ccache 0.1 30000"; do
    for tag in $order; do
      if [ "$tag" = old ]; then bin=$old; else bin=$new; fi
      # shellcheck disable=SC2086
      run "$tag" "$round" "$bin" $spec
    done
  done
done
python3 - "$out" <<'PY'
import json, pathlib, statistics, sys
rows = {}
for p in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    tag, _, rest = p.stem.split("-", 2)
    for d in json.loads(p.read_text())["designs"]:
        rows.setdefault((rest, tag), []).append((d["flow_mods_per_s"], d["mismatches"], d["errors"]))
for (what, tag), v in sorted(rows.items()):
    rates = [r for r, _, _ in v]
    print(f"{what} {tag}: median {statistics.median(rates):.0f} flow-mods/s of {[round(r) for r in rates]}, "
          f"mismatches {sum(m for _, m, _ in v)}, errors {sum(e for _, _, e in v)}")
PY
