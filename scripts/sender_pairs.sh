#!/bin/bash
# Paired sender rates into a veth: tcpreplay --topspeed and `rqvs send`, alternating, each
# pinned to the same CPU, each for SECONDS; the rate is what the peer's interface received.
#   sudo scripts/sender_pairs.sh SECONDS PCAP RQVS [PAIRS] [CPU] [OPTIONS]
# OPTIONS, comma-separated:
#   xdp   each round runs `rqvs send --engine xdp` as well (r0 gets GRO, which a veth needs to
#         take XDP frames, for every sender, unless `sink` gives it an XDP program instead)
#   sink  the peer r0 drops every frame at XDP (`rqvs sink`) and its receive work runs in a
#         NAPI thread pinned to the other CPU (`/sys/class/net/r0/threaded`; s0 without TSO, so
#         skbs take that path too): the sender's CPU then does the sending side only, as with
#         a NIC; without it the peer's receive runs in the sender CPU's softirq
# The two namespaces and their veth are made here and removed on exit (also on failure).
set -u
D=${1:?seconds}; P=${2:?pcap}; R=${3:?rqvs binary}; N=${4:-3}; CPU=${5:-1}; OPT=,${6:-},
A=sndA$$; B=sndB$$; SINK=
cleanup() {
    [ -n "$SINK" ] && kill "$SINK" 2>/dev/null && wait "$SINK" 2>/dev/null
    ip netns del "$A" 2>/dev/null; ip netns del "$B" 2>/dev/null
}
trap cleanup EXIT
ip netns add "$A" && ip netns add "$B" || exit 1
ip -n "$A" link add s0 type veth peer name r0 netns "$B" || exit 1
for n in "$A" "$B"; do ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1; done
ip -n "$A" link set s0 up && ip -n "$B" link set r0 up && sleep 1
if [[ $OPT == *,sink,* ]]; then
    ip netns exec "$A" ethtool -K s0 tso off >/dev/null || exit 1
    ip netns exec "$B" "$R" sink --iface r0 2>/tmp/sink.$$ & SINK=$!
    for _ in $(seq 50); do grep -q attached /tmp/sink.$$ 2>/dev/null && break; sleep 0.1; done
    rm -f /tmp/sink.$$
    ip netns exec "$B" sh -c 'echo 1 > /sys/class/net/r0/threaded' || exit 1
    sleep 0.2
    OTHER=$(( CPU == 0 ? 1 : 0 ))
    for p in $(pgrep -x "napi/r0-[0-9]*"); do taskset -pc "$OTHER" "$p" >/dev/null || exit 1; done
    echo "r0: XDP drop, NAPI thread $(pgrep -x "napi/r0-[0-9]*" | tr '\n' ' ')on CPU $OTHER; senders on CPU $CPU"
elif [[ $OPT == *,xdp,* ]]; then
    ip netns exec "$B" ethtool -K r0 gro on || exit 1
fi
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
    if [[ $OPT == *,xdp,* ]]; then
        one "rqvs send --engine xdp" taskset -c "$CPU" ip netns exec "$A" "$R" send --iface s0 --pcap "$P" --duration "$D" --engine xdp
    fi
done
