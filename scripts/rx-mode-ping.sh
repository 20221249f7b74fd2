#!/bin/bash
# The afpacket receive modes (docs/switch-bench.md, "Receive modes"): ping RTT through
# `rqvs switch` (two veths to two private namespaces, two output flows), and a UDP blast's
# forwarded share and the switch's CPU time. Run as root from the repository:
#   scripts/rx-mode-ping.sh throughput|latency [switch options, e.g. --busy-poll]
# Creates namespaces rxm-sw, rxm-h1, rxm-h2 (removed on exit) and touches nothing else.
set -eu
MODE=$1; shift
R=${RQVS:-target/release/rqvs}
D=$(mktemp -d)
SW=
cleanup() {
    [ -n "$SW" ] && kill "$SW" 2>/dev/null && wait "$SW" 2>/dev/null
    for n in rxm-sw rxm-h1 rxm-h2; do ip netns del $n 2>/dev/null || true; done
    rm -rf "$D"
}
trap cleanup EXIT
for n in rxm-sw rxm-h1 rxm-h2; do ip netns add $n; done
for i in 1 2; do
    ip link add p$i netns rxm-sw type veth peer name e$i netns rxm-h$i
    ip -n rxm-sw link set p$i up; ip -n rxm-h$i link set e$i up
    ip -n rxm-h$i addr add 10.99.0.$i/24 dev e$i
done
printf 'priority=10,in_port=1,actions=output:2\npriority=10,in_port=2,actions=output:1\n' > "$D/rules"
ip netns exec rxm-sw "$R" switch --port p1:afpacket --port p2:afpacket --rules "$D/rules" \
    --ctl "$D/ctl.sock" --rx-mode "$MODE" "$@" > "$D/switch.log" 2>&1 &
SW=$!
sleep 1.5
ip netns exec rxm-h1 ping -c 3 -q 10.99.0.2 > /dev/null
ip netns exec rxm-h1 ping -c 300 -i 0.01 10.99.0.2 | grep -o 'time=[0-9.]*' | cut -d= -f2 | sort -n |
    awk '{a[NR]=$1} END {printf "ping: n=%d min=%.3f median=%.3f p90=%.3f ms\n", NR, a[1], a[int(NR/2)], a[int(NR*0.9)]}'
cat > "$D/blast.py" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); s.bind(("e1", 0))
f = bytes.fromhex("0200000000020200000000010800") + bytes(46)
t = time.time()
for _ in range(int(sys.argv[1])):
    try: s.send(f)
    except OSError: pass
print("%.3f" % (time.time() - t))
PY
cpu0=$(awk '{print $14+$15}' /proc/$SW/stat)
rx0=$(ip netns exec rxm-h2 cat /sys/class/net/e2/statistics/rx_packets)
tx0=$(ip netns exec rxm-h1 cat /sys/class/net/e1/statistics/tx_packets)
secs=$(ip netns exec rxm-h1 python3 "$D/blast.py" 300000)
sleep 0.5
cpu1=$(awk '{print $14+$15}' /proc/$SW/stat)
rx1=$(ip netns exec rxm-h2 cat /sys/class/net/e2/statistics/rx_packets)
tx1=$(ip netns exec rxm-h1 cat /sys/class/net/e1/statistics/tx_packets)
echo "blast: offered $((tx1-tx0)) in ${secs} s, forwarded $((rx1-rx0)), switch CPU $(( (cpu1-cpu0) * 1000 / $(getconf CLK_TCK) )) ms"
