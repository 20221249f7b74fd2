#!/usr/bin/env bash
# Replays a pcap through real Open vSwitch 3.1's userspace datapath (dpif-netdev, DPDK net_pcap
# driver, one PMD core) and prints its PMD counters: the peer measurement for
# `rqvs replay --design orig` (issue #6, fidelity against real OVS; docs/ovs-fidelity.md).
#
#   scripts/ovs_dpdk_replay.sh RULES.ofctl PACKETS.pcap [SECONDS=10] [EMC_PROB=0.2]
#
# EMC_PROB is an insertion probability, as `rqvs replay --emc-prob`: it is set as
# other_config:emc-insert-inv-prob = round(1/EMC_PROB); 0 turns the EMC off (inv-prob 0).
#
# What it does, in a private directory (mktemp), with no hugepages, no PCI, no kernel module:
#   1. ovsdb-server + ovs-vswitchd-dpdk (non-PMD threads pinned to NONPMD_CPUS, the one PMD thread
#      to PMD_CPU through pmd-cpu-mask), a netdev bridge br0 with port 2 = net_pcap writing to
#      /dev/null (the flows' `output:2`);
#   2. loads RULES with `ovs-ofctl -O OpenFlow14 --bundle add-flows` while no packet can arrive;
#   3. adds port 1 = net_pcap reading PACKETS.pcap in a loop (infinite_rx=1), clears the PMD
#      stats, optionally waits WARMUP seconds and clears them again (steady state), runs SECONDS;
#   4. prints pmd-perf-show, pmd-stats-show, the megaflows (dpctl/dump-flows | wc -l) and masks
#      (distinct wildcard masks of the dumped megaflows; dpcls subtables from
#      subtable-lookup-info-get), then one line `SUMMARY {json}`;
#   5. stops both daemons on exit, whatever happens (trap): `ovs-appctl exit`, then SIGTERM and
#      SIGKILL by pid file if they are still there; removes DPDK's runtime directory.
#
# Environment (all optional):
#   WARMUP=S           seconds of replay before the stats are cleared for the measurement (0)
#   PMD_CPU=N          the PMD's core (1);   NONPMD_CPUS=LIST  taskset list for the rest (0)
#   OVS_NICE=N         renice every ovs-vswitchd thread (-20, so that others' jobs on a shared
#                      machine do not starve the PMD or the revalidator; 0: leave them)
#   PERF_METRICS=1     other_config:pmd-perf-metrics=true (adds per-upcall time; costs a little)
#   FLOW_LIMIT=N       other_config:flow-limit (OVS default 200000; the dynamic limit starts at
#                      10000 and grows by 1000 per revalidator dump, independently of this)
#   MAX_IDLE=MS        other_config:max-idle (OVS default 10000)
#   KEEP=1             keep the private directory (logs, raw outputs) and print its path
#   JSON=FILE          also write the summary object to FILE
#   PERF=FILE          record `perf record` (flat profile) of the PMD thread during the measurement into FILE
#   APPCTL="CMD; CMD"  ovs-appctl commands run before the flows are loaded, e.g.
#                      "dpif-netdev/subtable-lookup-prio-set avx512_gather 5"
#   VSWITCHD=PATH      another ovs-vswitchd built with DPDK (e.g. OVS 3.1.0 built with -g, to
#                      give perf the symbols the Debian binary is stripped of)
#
# Needs: apt-get install openvswitch-switch-dpdk (Debian 12: OVS 3.1.0, DPDK 22.11).
set -euo pipefail

usage() { sed -n '2,10p' "$0" >&2; exit 2; }
[ $# -ge 2 ] && [ $# -le 4 ] || usage
rules=$(realpath "$1"); pcap=$(realpath "$2"); secs=${3:-10}; emc_prob=${4:-0.2}
[ -r "$rules" ] || { echo "$0: cannot read $1" >&2; exit 1; }
[ -r "$pcap" ] || { echo "$0: cannot read $2" >&2; exit 1; }
warmup=${WARMUP:-0}; pmd_cpu=${PMD_CPU:-1}; nonpmd=${NONPMD_CPUS:-0}
inv=$(python3 -c "import sys; p=float(sys.argv[1]); print(0 if p<=0 else max(1, round(1/p)))" "$emc_prob")
pmd_mask=$(printf '0x%x' $((1 << pmd_cpu)))

vswitchd=${VSWITCHD:-/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk}
pmds=$(ls -d /usr/lib/x86_64-linux-gnu/dpdk/pmds-*/ 2>/dev/null | head -1)
[ -x "$vswitchd" ] && [ -n "$pmds" ] || {
    echo "$0: needs openvswitch-switch-dpdk (apt-get install openvswitch-switch-dpdk)" >&2; exit 1; }
pcap_pmd=$(ls "$pmds"/librte_net_pcap.so.* | head -1)

dir=$(mktemp -d /tmp/rqvs-ovsdpdk.XXXXXX)
prefix=rqvs-ovs-$$
export OVS_RUNDIR=$dir OVS_DBDIR=$dir OVS_LOGDIR=$dir
db=unix:$dir/db.sock
perf_pid=; nap_pid=
# A sleep the traps can interrupt (bash runs a trap only once its foreground child is done).
nap() { sleep "$1" & nap_pid=$!; wait "$nap_pid"; nap_pid=; }

pid_of() { [ -s "$dir/$1.pid" ] && cat "$dir/$1.pid" || true; }
alive() {  # a zombie (exited, not yet reaped by init) is not alive
    [ -n "$1" ] && kill -0 "$1" 2>/dev/null && \
        [ "$(awk '{print $3}' /proc/"$1"/stat 2>/dev/null)" != Z ]
}
stop_one() {  # name of the pid file
    local pid; pid=$(pid_of "$1")
    alive "$pid" || return 0
    ovs-appctl -t "$dir/$1.$pid.ctl" exit >/dev/null 2>&1 || \
        ovs-appctl -t "$dir/$1.$pid.ctl" exit >/dev/null 2>&1 || true
    for _ in $(seq 50); do alive "$pid" || return 0; sleep 0.2; done
    echo "$0: $1 ($pid) did not exit; SIGTERM" >&2; kill "$pid" 2>/dev/null || true
    for _ in $(seq 25); do alive "$pid" || return 0; sleep 0.2; done
    echo "$0: $1 ($pid) still there; SIGKILL" >&2; kill -9 "$pid" 2>/dev/null || true
}
cleanup() {
    local rc=$?
    trap '' INT TERM  # a second signal must not cut the cleanup short
    trap - EXIT
    if alive "$nap_pid"; then kill "$nap_pid" 2>/dev/null || true; fi
    if alive "$perf_pid"; then kill -INT "$perf_pid" 2>/dev/null; wait "$perf_pid" 2>/dev/null || true; fi
    # The DPDK binary names its control socket ovs-vswitchd-dpdk.PID.ctl but its pid file is ours.
    local vpid; vpid=$(pid_of ovs-vswitchd)
    if alive "$vpid"; then
        ovs-appctl -t "$(ls "$dir"/ovs-vswitchd*."$vpid".ctl 2>/dev/null | head -1)" exit \
            >/dev/null 2>&1 || true
        for _ in $(seq 50); do alive "$vpid" || break; sleep 0.2; done
        if alive "$vpid"; then echo "$0: ovs-vswitchd ($vpid) did not exit; SIGTERM" >&2
            kill "$vpid" 2>/dev/null || true; sleep 2; fi
        if alive "$vpid"; then echo "$0: ovs-vswitchd ($vpid) still there; SIGKILL" >&2
            kill -9 "$vpid" 2>/dev/null || true; fi
    fi
    stop_one ovsdb-server
    rm -rf "/var/run/dpdk/$prefix"
    if [ -n "${KEEP:-}" ]; then echo "kept: $dir" >&2; else rm -rf "$dir"; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ovsdb-tool create "$dir/conf.db" /usr/share/openvswitch/vswitch.ovsschema
ovsdb-server "$dir/conf.db" --remote=punix:"$dir/db.sock" --pidfile="$dir/ovsdb-server.pid" \
    --log-file="$dir/ovsdb-server.log" --detach --no-chdir -vconsole:warn
vsctl() { ovs-vsctl --db="$db" --timeout=60 "$@"; }
vsctl --no-wait init
vsctl --no-wait set Open_vSwitch . other_config:dpdk-init=true \
    other_config:pmd-cpu-mask="$pmd_mask" other_config:emc-insert-inv-prob="$inv" \
    other_config:dpdk-extra="--no-huge --legacy-mem -m 1024 --no-pci --iova-mode=va --file-prefix=$prefix -d $pcap_pmd"
[ -n "${PERF_METRICS:-}" ] && vsctl --no-wait set Open_vSwitch . other_config:pmd-perf-metrics=true
[ -n "${FLOW_LIMIT:-}" ] && vsctl --no-wait set Open_vSwitch . other_config:flow-limit="$FLOW_LIMIT"
[ -n "${MAX_IDLE:-}" ] && vsctl --no-wait set Open_vSwitch . other_config:max-idle="$MAX_IDLE"

taskset -c "$nonpmd" "$vswitchd" "$db" --pidfile="$dir/ovs-vswitchd.pid" \
    --log-file="$dir/ovs-vswitchd.log" --detach --no-chdir --disable-system -vconsole:warn
vpid=$(pid_of ovs-vswitchd)
ctl=$(ls "$dir"/ovs-vswitchd*."$vpid".ctl | head -1)
appctl() { ovs-appctl -t "$ctl" --timeout=120 "$@"; }

# The output port first, then the rules, then the port that brings the packets.
vsctl add-br br0 -- set bridge br0 datapath_type=netdev \
    -- add-port br0 p2 -- set interface p2 type=dpdk ofport_request=2 \
       options:dpdk-devargs="net_pcap1,tx_pcap=/dev/null"
if [ -n "${APPCTL:-}" ]; then
    IFS=';' read -ra cmds <<< "$APPCTL"
    for c in "${cmds[@]}"; do echo "== ovs-appctl $c"; appctl $c; done
fi
ovs-ofctl del-flows br0
t0=$(date +%s.%N)
ovs-ofctl -O OpenFlow14 --bundle add-flows br0 "$rules"
t1=$(date +%s.%N)
n_of=$(ovs-ofctl dump-aggregate br0 | sed -n 's/.*flow_count=\([0-9]*\).*/\1/p')
echo "== loaded $n_of OpenFlow rules in $(python3 -c "print(f'{$t1-$t0:.1f}')") s; emc-insert-inv-prob=$inv; pmd core $pmd_cpu; other threads on $nonpmd"
vsctl add-port br0 p1 -- set interface p1 type=dpdk ofport_request=1 \
    options:dpdk-devargs="net_pcap0,rx_pcap=$pcap,infinite_rx=1"
appctl dpif-netdev/pmd-stats-clear >/dev/null
pmd_tid=$(grep -l '^pmd' /proc/"$vpid"/task/*/comm | head -1 | cut -d/ -f5)
# On a shared machine every OVS thread runs at nice -20 (as rqvs is run): the PMD wins its core,
# and the revalidator, whose dump time sets the dynamic flow limit, and the threads whose locks
# the PMD's upcalls take, are not starved on the other core. With autogroup scheduling a nice
# value only counts inside the session's group: the daemon (its own session) gets the group's too.
if [ "${OVS_NICE:--20}" != 0 ]; then
    renice -n "${OVS_NICE:--20}" -p $(ls /proc/"$vpid"/task) >/dev/null
    [ -w /proc/"$vpid"/autogroup ] && echo "${OVS_NICE:--20}" > /proc/"$vpid"/autogroup
fi
if [ "$warmup" != 0 ]; then
    nap "$warmup"
    appctl dpif-netdev/pmd-stats-clear >/dev/null
fi
# The PMD's time on its core and waiting for it (other processes on a shared machine), in ns.
read -r run0 wait0 _ < /proc/"$vpid"/task/"$pmd_tid"/schedstat; w0=$(date +%s%N)
if [ -n "${PERF:-}" ]; then
    timeout -s INT "$secs" perf record -q -t "$pmd_tid" -o "$PERF" 2>/dev/null &
    perf_pid=$!
fi
nap "$secs"
appctl dpif-netdev/pmd-perf-show > "$dir/perf-show.txt"
read -r run1 wait1 _ < /proc/"$vpid"/task/"$pmd_tid"/schedstat; w1=$(date +%s%N)
appctl dpif-netdev/pmd-stats-show > "$dir/stats-show.txt"
echo "$((run1 - run0)) $((wait1 - wait0)) $((w1 - w0)) $(cut -d' ' -f1 /proc/loadavg)" > "$dir/sched.txt"
if [ -n "$perf_pid" ]; then wait "$perf_pid" || true; perf_pid=; fi
appctl dpctl/dump-flows > "$dir/flows.txt"
appctl dpif-netdev/subtable-lookup-info-get > "$dir/subtables.txt" 2>&1 || true
appctl dpctl/show -s > "$dir/dpctl-show.txt" 2>&1 || true
appctl upcall/show > "$dir/upcall-show.txt" 2>&1 || true
appctl coverage/show > "$dir/coverage.txt" 2>&1 || true

echo "== threads (name: allowed cpus)"
for t in /proc/"$vpid"/task/*; do
    printf '%s: %s\n' "$(cat "$t/comm")" "$(awk '/Cpus_allowed_list/{print $2}' "$t/status")"
done | sort | uniq -c | sed 's/^ */  /'
echo "== dpif-netdev/pmd-perf-show"; cat "$dir/perf-show.txt"
echo "== dpif-netdev/pmd-stats-show"; cat "$dir/stats-show.txt"
echo "== dpctl/dump-flows | wc -l (one header line per PMD included)"; wc -l < "$dir/flows.txt"
echo "== dpif-netdev/subtable-lookup-info-get"; cat "$dir/subtables.txt"
echo "== dpctl/show -s"; cat "$dir/dpctl-show.txt"
echo "== upcall/show"; cat "$dir/upcall-show.txt"
echo "== coverage/show (datapath flow puts/deletes, flow limit; totals since start)"
grep -E "^(dpif_flow_put|dpif_flow_del|upcall_flow_limit|upcall_ukey|revalidate|datapath_drop)" \
    "$dir/coverage.txt" || true
grep -E "mbufs|pcap|ERR|EMER|dynamic limit|unreasonably" "$dir/ovs-vswitchd.log" | sed 's/^/log: /' | tail -20 || true

python3 - "$dir" "$secs" "$inv" "$warmup" "$rules" "$pcap" "${JSON:-}" <<'EOF'
import json, re, sys
d, secs, inv, warmup, rules, pcap, out = sys.argv[1:8]
perf = open(f"{d}/perf-show.txt").read()
stats = open(f"{d}/stats-show.txt").read()
flows = [l for l in open(f"{d}/flows.txt") if "actions:" in l]  # not "flow-dump from pmd ..."
def num(pat, text=perf, cast=float):
    m = re.search(pat, text)
    return cast(m.group(1)) if m else None
s = {"ovs": "3.1 dpif-netdev (DPDK net_pcap)", "rules_file": rules, "pcap": pcap,
     "seconds": float(secs), "warmup_s": float(warmup), "emc_insert_inv_prob": int(inv)}
s["duration_s"] = num(r"Measurement duration:\s*([\d.]+)")
s["packets"] = num(r"Rx packets:\s*(\d+)", cast=int)
s["kpps"] = num(r"Rx packets:\s*\d+\s*\(([\d.]+) Kpps")
s["cycles_per_packet"] = num(r"Rx packets:.*?([\d.]+) cycles/pkt")
used = num(r"Used TSC cycles:\s*(\d+)", cast=int)
pct = num(r"Used TSC cycles:\s*\d+\s*\(\s*([\d.]+) % of total")
s["used_tsc_cycles"] = used
s["used_share"] = pct / 100 if pct is not None else None
# TSC rate from the same report: used cycles are pct % of duration x TSC Hz.
s["tsc_ghz"] = (used / (pct / 100) / s["duration_s"] / 1e9) if used and pct and s["duration_s"] else None
s["ns_per_packet"] = 1e6 / s["kpps"] if s["kpps"] else None
s["ns_per_packet_from_cycles"] = (s["cycles_per_packet"] / s["tsc_ghz"]
                                  if s["cycles_per_packet"] and s["tsc_ghz"] else None)
s["passes_per_packet"] = num(r"Datapath passes:\s*\d+\s*\(([\d.]+) passes/pkt")
s["emc_hits"] = num(r"- EMC hits:\s*(\d+)", cast=int)
s["smc_hits"] = num(r"- SMC hits:\s*(\d+)", cast=int)
s["megaflow_hits"] = num(r"- Megaflow hits:\s*(\d+)", cast=int)
s["subtables_per_megaflow_hit"] = num(r"- Megaflow hits:.*?([\d.]+) subtbl lookups/hit")
s["upcalls"] = num(r"- Upcalls:\s*(\d+)", cast=int)
s["us_per_upcall"] = num(r"- Upcalls:.*?([\d.]+) us/upcall")
s["lost_upcalls"] = num(r"- Lost upcalls:\s*(\d+)", cast=int)
s["tx_packets"] = num(r"Tx packets:\s*(\d+)", cast=int)
run, wait, wall, load = open(f"{d}/sched.txt").read().split()
s["pmd_on_cpu_share"] = int(run) / int(wall)    # < 1: the PMD was preempted
s["pmd_runqueue_wait_s"] = int(wait) / 1e9
s["loadavg_1min"] = float(load)
s["megaflows"] = len(flows)
up = open(f"{d}/upcall-show.txt").read()
s["flow_limit"] = num(r"\(limit (\d+)\)", up, int)
s["dump_duration_ms"] = num(r"dump duration : (\d+)ms", up, int)
cov = open(f"{d}/coverage.txt").read()
for name in ["dpif_flow_put", "dpif_flow_del", "upcall_flow_limit_hit", "upcall_flow_limit_kill"]:
    s["since_start_" + name] = num(r"(?m)^" + name + r"\s.*total: (\d+)", cov, int) or 0
# Mask of a dumped megaflow: every field with its mask, values dropped (a field shown without a
# mask is exact, an absent one is wildcarded).
# tcp_flags(+ack-syn) shows value and mask at once: keep the flag names (or the /mask).
# Should equal dpcls_subtables (one dpcls per in_port; one in_port here).
def mask_of(line):
    key = line.split(", packets:")[0]
    key = re.sub(r"tcp_flags\(([^)]*)\)", lambda m: "tcp_flags(" + (
        m.group(1).split("/")[1] if "/" in m.group(1) else
        ",".join(sorted(re.findall(r"[a-z]+", m.group(1))))) + ")", key)
    key = re.sub(r"\b(tcp|udp|sctp)\(", "l4(", key)  # the same tp_src/tp_dst bits in dpcls
    return re.sub(r"=([^,()/]*)(/[^,()]*)?", lambda m: "=" + (m.group(2) or "exact"), key)
s["masks"] = len({mask_of(l) for l in flows})
m = re.findall(r"Use count:\s*(\d+)", open(f"{d}/subtables.txt").read())
s["dpcls_subtables"] = sum(map(int, m)) if m else None
impl = re.findall(r"^\s*(\S+) \(Use count:\s*(\d+)", open(f"{d}/subtables.txt").read(), re.M)
s["dpcls_lookup_impls"] = {k: int(v) for k, v in impl if int(v)}
line = json.dumps(s, sort_keys=True)
print("SUMMARY " + line)
if out:
    open(out, "w").write(line + "\n")
EOF
