#!/usr/bin/env bash
# Replays a pcap through real Open vSwitch's userspace (DPDK) datapath, one PMD core, and prints
# its PMD counters: the peer measurement for `rqvs replay --design orig` (issue #6 fidelity).
#
#   scripts/ovs_dpdk_replay.sh RULES.ofctl PACKETS.pcap [SECONDS=10] [EMC_INV_PROB=5]
#
# Needs `apt-get install openvswitch-switch-dpdk` (DPDK's net_pcap driver replays the file in a
# loop, no hugepages, no NIC). The flows' output ports must exist: port 1 is the pcap port, port 2 a
# second pcap port writing to /dev/null. Everything runs in a private directory; the OVS processes
# are stopped by pid file on exit, whatever happens.
set -euo pipefail
rules=$(realpath "$1"); pcap=$(realpath "$2"); secs=${3:-10}; inv=${4:-5}
dir=$(mktemp -d /tmp/rqvs-ovsdpdk.XXXXXX)
export OVS_RUNDIR=$dir OVS_DBDIR=$dir OVS_LOGDIR=$dir
db=unix:$dir/db.sock
vswitchd=/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk
pmds=$(ls -d /usr/lib/x86_64-linux-gnu/dpdk/pmds-*/ | head -1)
stop() {
    for p in ovs-vswitchd ovsdb-server; do
        if [ -f "$dir/$p.pid" ]; then
            kill "$(cat "$dir/$p.pid")" 2>/dev/null || true
        fi
    done
    sleep 1
}
trap stop EXIT
ovsdb-tool create "$dir/conf.db" /usr/share/openvswitch/vswitch.ovsschema
ovsdb-server "$dir/conf.db" --remote=punix:"$dir/db.sock" --pidfile="$dir/ovsdb-server.pid" \
    --log-file="$dir/ovsdb-server.log" --detach
ovs-vsctl --db="$db" --no-wait init
ovs-vsctl --db="$db" --no-wait set Open_vSwitch . other_config:dpdk-init=true \
    other_config:pmd-cpu-mask=0x2 other_config:emc-insert-inv-prob="$inv" \
    other_config:dpdk-extra="--no-huge --legacy-mem -m 1024 --no-pci --iova-mode=va --file-prefix=rqvs$$ -d $pmds/librte_net_pcap.so.23"
"$vswitchd" "$db" --pidfile="$dir/ovs-vswitchd.pid" --log-file="$dir/ovs-vswitchd.log" --detach
ovs-vsctl --db="$db" add-br br0 -- set bridge br0 datapath_type=netdev \
    -- add-port br0 p1 -- set interface p1 type=dpdk ofport_request=1 \
       options:dpdk-devargs="net_pcap0,rx_pcap=$pcap,infinite_rx=1" \
    -- add-port br0 p2 -- set interface p2 type=dpdk ofport_request=2 \
       options:dpdk-devargs="net_pcap1,tx_pcap=/dev/null"
ctl=$(ls "$dir"/ovs-vswitchd*.ctl | head -1)  # the DPDK binary names it ovs-vswitchd-dpdk.PID.ctl
ovs-ofctl del-flows br0
ovs-ofctl -O OpenFlow14 --bundle add-flows br0 "$rules"
ovs-appctl -t "$ctl" dpif-netdev/pmd-stats-clear
ovs-appctl -t "$ctl" dpif-netdev/pmd-perf-show > /dev/null
sleep "$secs"
echo "== pmd-stats-show"
ovs-appctl -t "$ctl" dpif-netdev/pmd-stats-show
echo "== pmd-perf-show"
ovs-appctl -t "$ctl" dpif-netdev/pmd-perf-show | head -40
echo "== megaflows"
ovs-appctl -t "$ctl" dpctl/dump-flows | wc -l
echo "== dpctl/show"
ovs-appctl -t "$ctl" dpctl/show 2>/dev/null | grep -iE "lookups|flows|masks" || true
