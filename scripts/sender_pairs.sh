#!/bin/bash
# Paired sender rates into a plain veth: tcpreplay --topspeed and `rqvs send`, alternating, each
# pinned to the same CPU, each for SECONDS; the rate is what the peer's interface received.
#   sudo scripts/sender_pairs.sh SECONDS PCAP RQVS [PAIRS] [CPU] [xdp]
# With `xdp`, r0 gets GRO (what a veth needs to take XDP frames) for every sender, and each round
# runs `rqvs send --engine xdp` as well.
# The two namespaces and their veth are made here and removed on exit (also on failure).
set -u
D=${1:?seconds}; P=${2:?pcap}; R=${3:?rqvs binary}; N=${4:-3}; CPU=${5:-1}; XDP=${6:-}
A=sndA$$; B=sndB$$
cleanup() { ip netns del "$A" 2>/dev/null; ip netns del "$B" 2>/dev/null; }
trap cleanup EXIT
ip netns add "$A" && ip netns add "$B" || exit 1
ip -n "$A" link add s0 type veth peer name r0 netns "$B" || exit 1
for n in "$A" "$B"; do ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1; done
ip -n "$A" link set s0 up && ip -n "$B" link set r0 up && sleep 1
if [ "$XDP" = xdp ]; then ip netns exec "$B" ethtool -K r0 gro on || exit 1; fi
rx() { ip netns exec "$B" cat /sys/class/net/r0/statistics/rx_packets; }
one() {
    local name=$1; shift
    local r0 t0 t1 r1
    r0=$(rx); t0=$(date +%s.%N)
    "$@" >/dev/null 2>&1
    t1=$(date +%s.%N); r1=$(rx)
    python3 -c "print(f'$name: {($r1 - $r0)} frames at r0 in {$t1 - $t0:.3f} s: {($r1 - $r0) / ($t1 - $t0) / 1e3:.1f} Kpps')"
}
for _ in $(seq "$N"); do
    one tcpreplay taskset -c "$CPU" ip netns exec "$A" tcpreplay -i s0 -K --loop=0 --duration="$D" --no-flow-stats --topspeed "$P"
    one "rqvs send" taskset -c "$CPU" ip netns exec "$A" "$R" send --iface s0 --pcap "$P" --duration "$D"
    if [ "$XDP" = xdp ]; then
        one "rqvs send --engine xdp" taskset -c "$CPU" ip netns exec "$A" "$R" send --iface s0 --pcap "$P" --duration "$D" --engine xdp
    fi
done
