#!/usr/bin/env bash
# RSS of an idle `rqvs switch --design D` (one veth port between two private namespaces, no
# traffic) while `ovs-ofctl add-flow` replaces one flow N times, each with an action list no
# flow had before — the soak's flow-mod churn alone (docs/soak.md, "RSS"). Prints RSS after
# 200 warm-up flow-mods and every 1,000 after. As root; needs ovs-ofctl.
#
#   scripts/soak_idle_rss.sh orig 5000
set -u
d=${1:?design: orig, ccache, cflows or auto}; n=${2:-5000}
rqvs="$(cd "$(dirname "$0")/.." && pwd)/target/release/rqvs"
[ -x "$rqvs" ] || { echo "soak_idle_rss.sh: build first: cargo build --release -p rqvs" >&2; exit 2; }
ns=idlerss-$d-$$; h=idlerss-h-$$
dir=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; sleep 0.5; ip netns del "$ns" 2>/dev/null; ip netns del "$h" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
ip netns add "$ns" && ip netns add "$h" || exit 2
ip -n "$ns" link set lo up
ip -n "$ns" link add p1 type veth peer name e1 netns "$h"
ip -n "$ns" link set p1 up; ip -n "$h" link set e1 up
printf 'priority=0,actions=drop\n' > "$dir/flows"
ip netns exec "$ns" "$rqvs" switch --design "$d" --rules "$dir/flows" --openflow ptcp:6653 --port p1:afpacket > "$dir/out" 2>&1 &
pid=$!
sleep 2
rss() { awk '/VmRSS/ {print $2}' "/proc/$pid/status"; }
flow() { # a list no flow had: the count in mod_dl_src
    ip netns exec "$ns" ovs-ofctl -O OpenFlow13 add-flow tcp:127.0.0.1:6653 \
        "priority=300,tcp,nw_dst=10.77.0.1,tp_dst=7,actions=mod_dl_src:02:00:$(($1/65536%256)):$(($1/256%256)):$(($1%256)):01,output:1"
}
for i in $(seq 1 200); do flow "$i"; done
echo "$d: after 200 warm-up flow-mods: $(rss) KiB"
for i in $(seq 1 "$n"); do
    flow $((i + 1000))
    [ $((i % 1000)) = 0 ] && echo "$d: +$i flow-mods: $(rss) KiB"
done
