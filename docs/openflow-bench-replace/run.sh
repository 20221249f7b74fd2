#!/bin/bash
# A/B pairs, old/new alternating (order flips per round); per-thread CPU from perf cpu-clock samples.
# /tmp/rqvs-fm-old: main@7b76ef7 as built for the session; /tmp/rqvs-fm-new: 7b76ef7 with replace-stale-megaflows.patch applied (fb8861d).
D=/work/shared/data/classbench
out=/tmp/fm-ab
for design in orig ccache; do
for round in 1 2 3; do
  if [ $((round % 2)) -eq 1 ]; then order="old new"; else order="new old"; fi
  for tag in $order; do
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    perf record -q -F 499 -e cpu-clock -o $out/$tag-$design-$round.data /tmp/rqvs-fm-$tag bench openflow --rules $D/rules/acl1_100k.xz --trace $D/traces/acl1_100k_trace.xz --design $design --flux 0.1 --flow-mods 30000 --bundle 0 --json $out/$tag-$design-$round.json > $out/$tag-$design-$round.log 2>&1
    counts=$(perf report -i $out/$tag-$design-$round.data --sort comm --stdio -n 2>/dev/null | grep -v "^#" | awk 'NF>=3 {printf "%s=%s ", $3, $2}')
    echo "$design $round $tag load[$load] $(grep 'flow-mods/s' $out/$tag-$design-$round.log | sed 's/.*in \([0-9.]* s\): \([0-9]*\) flow-mods.*checked \([0-9]*\) exact + \([0-9]*\) during.*: \([0-9]*\) mismatches.*/stream \1 rate \2 exact \3 during \4 mism \5/') $counts"
  done
done
done
