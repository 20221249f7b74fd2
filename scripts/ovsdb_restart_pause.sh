#!/usr/bin/env bash
# Run as root from the checkout after `cargo build --release -p rqvs` (RQVS=path overrides the binary).
# Everything runs in four private network namespaces and a temporary directory, removed at exit.
# Measures: ovs-vsctl add-port (with its wait) latency against rqvs switch --ovsdb, and frames lost
# by a ping flood (-i 0.002) across add-port/del-port of another port (attached and removed live;
# before, each restarted the datapath).
set -e
RQVS=$(realpath "${RQVS:-target/release/rqvs}")
D=$(mktemp -d /tmp/rqvs-measure-XXXX); S=rqvs-ms-$$; A=rqvs-ma-$$; B=rqvs-mb-$$; C=rqvs-mc-$$
cleanup() { [ -n "$SWPID" ] && kill $SWPID 2>/dev/null; [ -n "$DBPID" ] && kill $DBPID 2>/dev/null; wait 2>/dev/null; ip netns del $S; ip netns del $A; ip netns del $B; ip netns del $C; rm -rf $D; }
trap cleanup EXIT
for n in $S $A $B $C; do ip netns add $n; done
ip -n $S link add p1 type veth peer name e1 netns $A
ip -n $S link add p2 type veth peer name e2 netns $B
ip -n $S link add p3 type veth peer name e3 netns $C
for p in p1 p2 p3; do ip -n $S link set $p up; done
ip -n $A link set e1 up; ip -n $B link set e2 up; ip -n $C link set e3 up
ip -n $A addr add 10.79.0.1/24 dev e1; ip -n $B addr add 10.79.0.2/24 dev e2
ovsdb-tool create $D/conf.db /usr/share/openvswitch/vswitch.ovsschema
OVS_RUNDIR=$D ovsdb-server $D/conf.db --remote=punix:$D/db.sock --unixctl=$D/s.ctl --log-file=$D/s.log & DBPID=$!
sleep 0.5
V="ovs-vsctl --db=unix:$D/db.sock --timeout=30"
$V --no-wait init
OVS_RUNDIR=$D ip netns exec $S "$RQVS" switch --ovsdb unix:$D/db.sock > $D/sw.out 2> $D/sw.err & SWPID=$!
sleep 0.5
for cmd in "add-br br0 -- set bridge br0 datapath_type=netdev" "add-port br0 p1" "add-port br0 p2"; do
  s=$(date +%s%N); $V $cmd; e=$(date +%s%N); echo "ovs-vsctl $cmd: $(( (e-s)/1000000 )) ms"
done
ip netns exec $A ping -c 3 -i 0.2 -W 1 10.79.0.2 | grep received
ip netns exec $A ping -q -c 1500 -i 0.002 -W 1 10.79.0.2 > $D/flood.txt & FP=$!
sleep 1
for i in 1 2 3; do
  s=$(date +%s%N); $V add-port br0 p3; e=$(date +%s%N); echo "ovs-vsctl add-port br0 p3 (live): $(( (e-s)/1000000 )) ms"
  sleep 0.5
  s=$(date +%s%N); $V del-port br0 p3; e=$(date +%s%N); echo "ovs-vsctl del-port br0 p3 (live): $(( (e-s)/1000000 )) ms"
  sleep 0.5
done
wait $FP || true
grep -E "transmitted" $D/flood.txt
