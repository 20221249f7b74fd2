#!/usr/bin/env bash
# Run as root from the checkout after `cargo build --release -p rqvs` (RQVS=path overrides the binary;
# DESIGN=orig|ccache|cflows, COUNT=pings per run). Everything runs in four private network
# namespaces and a temporary directory, removed at exit.
# Measures: a ping flood (ping -f) within one bridge (h1 -> h3 on br0) against one across a patch
# pair (h1 on br0 -> h2 on br1, br0 and br1 joined by type=patch ports), rqvs switch --ovsdb,
# three runs each; then the switch's report (each patch end's tx equals its peer's rx).
# ORIG and CCACHE cross the patch pair inside the translation (one megaflow per direction, no
# frame through the patch ports) by NORMAL, or with CROSS=1 by output:PATCH flows for h1 <-> h2's
# IPv4; DESIGN=cflows takes the datapath hop (each bridge classifies, the patch ports receive).
set -e
RQVS=$(realpath "${RQVS:-target/release/rqvs}")
D=$(mktemp -d /tmp/rqvs-patch-XXXX); S=rqvs-ps-$$; H1=rqvs-p1-$$; H2=rqvs-p2-$$; H3=rqvs-p3-$$
cleanup() {
  [ -n "$SWPID" ] && kill $SWPID 2>/dev/null; wait $SWPID 2>/dev/null; cat $D/sw.out 2>/dev/null
  [ -n "$DBPID" ] && kill $DBPID 2>/dev/null; wait 2>/dev/null
  for n in $S $H1 $H2 $H3; do ip netns del $n 2>/dev/null; done; rm -rf $D
}
trap cleanup EXIT
ip netns add $S
i=0
for h in $H1 $H2 $H3; do
  i=$((i + 1)); ip netns add $h
  ip -n $S link add p$i type veth peer name e0 netns $h
  ip -n $S link set p$i up; ip -n $h link set e0 up
  ip -n $h addr add 10.99.0.$i/24 dev e0
done
ovsdb-tool create $D/conf.db /usr/share/openvswitch/vswitch.ovsschema
ovsdb-server $D/conf.db --remote=punix:$D/db.sock --unixctl=$D/s.ctl --log-file=$D/s.log & DBPID=$!
sleep 0.5
V="ovs-vsctl --db=unix:$D/db.sock"
$V --no-wait init
OVS_RUNDIR=$D ip netns exec $S "$RQVS" switch --ovsdb unix:$D/db.sock --unixctl $D/rqvs.ctl \
  --design "${DESIGN:-orig}" > $D/sw.out 2> $D/sw.err & SWPID=$!
sleep 1
$V add-br br0 -- set bridge br0 datapath_type=netdev -- add-br br1 -- set bridge br1 datapath_type=netdev
$V add-port br0 p1 -- add-port br0 p3 -- add-port br1 p2
$V add-port br0 pa -- set interface pa type=patch options:peer=pb \
   -- add-port br1 pb -- set interface pb type=patch options:peer=pa
if [ "${CROSS:-0}" = 1 ]; then
  # IPv4 between h1 and h2 by output:PATCH flows: crossed inside the translation (ORIG, CCACHE),
  # one megaflow per direction (ofports: br0 p1=1 p3=2 pa=3, br1 p2=1 pb=2); the rest NORMAL.
  F="env OVS_RUNDIR=$D ovs-ofctl -O OpenFlow13"
  $F add-flow br0 "priority=10,in_port=1,ip,nw_dst=10.99.0.2,actions=output:3"
  $F add-flow br0 "priority=10,in_port=3,ip,actions=output:1"
  $F add-flow br1 "priority=10,in_port=2,ip,actions=output:1"
  $F add-flow br1 "priority=10,in_port=1,ip,actions=output:2"
fi
ip netns exec $H1 ping -c 3 -q 10.99.0.2 > /dev/null; ip netns exec $H1 ping -c 3 -q 10.99.0.3 > /dev/null
for run in 1 2 3; do
  echo "within br0 (h1 -> h3):"; ip netns exec $H1 ping -f -c "${COUNT:-5000}" -q 10.99.0.3 | tail -2
  echo "across the patch pair (h1 -> h2):"; ip netns exec $H1 ping -f -c "${COUNT:-5000}" -q 10.99.0.2 | tail -2
done
ovs-appctl -t $D/rqvs.ctl dpctl/show
ovs-appctl -t $D/rqvs.ctl dpctl/dump-flows | grep -v 'arp' || true
