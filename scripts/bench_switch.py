#!/usr/bin/env python3
"""Forwarding rate of a software switch on veth pairs: real Open vSwitch 3.1 (userspace datapath)
and `rqvs switch`, measured the same way (docs/switch-bench.md).

For each rule count (--sizes) and each switch under test it finds the highest offered rate with
less than 1% loss (--loss) after a 5% warm-up (--warmup), the method of the NSDI'22 paper, with
the switch on one core. Run as root; Python 3.11 standard library only.

Topology (built from scratch for every measurement, removed afterwards, also on failure and
Ctrl-C; frames only ever travel over veth pairs whose both ends are in namespaces made here):

    PREFIX-src              PREFIX-sw                     PREFIX-sink
    src0  <== veth ==>  swp1 [switch] swp2  <== veth ==>  sink0
    src1  <================ veth (no switch) ==========>  sink1   (the sender's own ceiling)

The sender is `tcpreplay` (preloaded pcap, looped, --pps or --topspeed), or with --sender rqvs
`rqvs send` (the same pcap in an AF_PACKET TX ring, looped, --pps or top speed), pinned to --sender-cpu;
the switch is pinned to --switch-cpu (its only PMD core). Frames are the ClassBench trace of the
set (`rqvs convert trace --to pcap`), rules are the set converted to OpenFlow with every action
`output:2` plus a priority-0 catch-all `output:2` (`rqvs convert rules --to ofctl`). Offered =
src0's tx_packets + tx_dropped, received = sink0's rx_packets (the kernel's interface counters,
read from /proc/PID/net/dev of a process inside each namespace: the same dev_get_stats() figures
as /sys/class/net/IF/statistics, read without spawning a process so both sides are read within
microseconds of each other).

Attack mode (--attack PCAP --attack-pps R[,R2,...]): a fourth namespace PREFIX-atk whose `atk0`
is the peer of the switch's port 3 (`swp3`); during every probe a second tcpreplay, pinned to the
sender's CPU too, loops the attack pcap into it at R packets/s, starting --attack-lead seconds
before the benign sender. The attack frames get their own destination MAC (rewritten here) and
are counted apart from the benign ones at the sink by two AF_PACKET sockets with classic BPF
filters (PACKET_STATISTICS); the search finds the highest benign rate with < 1% benign loss
while the attack runs, one row per (switch, rules, R), with the attack's delivered rate and the
switch's megaflows and masks sampled during the probe. --plot draws benign rate vs attack rate.

Examples:
  sudo scripts/bench_switch.py --switches ovs --sizes 1,1000,100000 --json ovs.json --plot ovs.svg
  sudo scripts/bench_switch.py --switches ovs,rqvs --ovs-ports afxdp --rqvs-ports afxdp --designs orig,cflows
      --sizes 1000 --attack atk.pcap --attack-pps 0,20000,50000 --json atk.json --plot atk.svg
  sudo scripts/bench_switch.py --switches rqvs --rqvs target/release/rqvs --designs orig,cflows
"""
import argparse
import atexit
import ctypes
import datetime
import html
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SIZE_LABEL = {1000: "1k", 10000: "10k", 100000: "100k", 500000: "500k"}
CATCH_ALL = "priority=0,actions=output:2"
OVS_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
APT_PACKAGES = {"ovs-vswitchd": "openvswitch-switch", "tcpreplay": "tcpreplay", "ethtool": "ethtool"}

_LIBC = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Skip(Exception):
    """A switch variant that cannot run here (feature missing, port type refused): reported in
    the results with its reason, not fatal."""


# --------------------------------------------------------------------------------------------
# Processes: every process this script starts is recorded here by pid and stopped by pid.


def _child_setup(parent_pid):
    def setup():
        # Die with the script even if it is killed with SIGKILL (no cleanup can run then).
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(1)

    return setup


def wrap(cmd, ns=None, cpu=None):
    """`ip netns exec NS taskset -c CPU cmd...`: both exec, so the pid is the command's own."""
    full = []
    if ns:
        full += ["ip", "netns", "exec", ns]
    if cpu is not None:
        full += ["taskset", "-c", str(cpu)]
    return full + list(cmd)


class Procs:
    def __init__(self):
        self.live = {}  # pid -> (Popen, name)

    def start(self, cmd, name, ns=None, cpu=None, stdout=None, stderr=None, env=None):
        full = wrap(cmd, ns, cpu)
        p = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=stdout or subprocess.DEVNULL,
                             stderr=stderr or subprocess.DEVNULL, env=env, start_new_session=True,
                             preexec_fn=_child_setup(os.getpid()))
        self.live[p.pid] = (p, name)
        return p

    def stop(self, p, sig=signal.SIGTERM, timeout=10.0):
        """Signal one process we started (by its pid, only while it has not been reaped), wait,
        then SIGKILL it if it is still there."""
        if p.poll() is None:
            try:
                p.send_signal(sig)
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                log(f"pid {p.pid} ({self.live.get(p.pid, (None, '?'))[1]}) ignored signal {sig}: SIGKILL")
                p.kill()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    log(f"pid {p.pid} did not die after SIGKILL")
                    return None
            except ProcessLookupError:
                pass
        self.live.pop(p.pid, None)
        return p.returncode

    def stop_all(self):
        for pid, (p, name) in reversed(list(self.live.items())):
            self.stop(p, timeout=5)


def run(cmd, ns=None, cpu=None, timeout=120, check=True, env=None):
    """A short command; killed if it outlives `timeout`."""
    full = wrap(cmd, ns, cpu)
    r = subprocess.run(full, capture_output=True, text=True, timeout=timeout, env=env,
                       start_new_session=True, stdin=subprocess.DEVNULL)
    if check and r.returncode != 0:
        raise RuntimeError(f"`{' '.join(full)}` failed ({r.returncode}): {(r.stderr or r.stdout).strip()[-800:]}")
    return r


def netns_list():
    r = run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


class Cleanup:
    """Stops every process we started and removes every namespace we created; idempotent, run
    from `finally`, atexit and the signal handlers' SystemExit."""

    def __init__(self, procs):
        self.procs = procs
        self.namespaces = []
        self.dirs = []

    def run(self):
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
        try:
            self.procs.stop_all()
            for ns in list(self.namespaces):
                delete_namespace(ns, self.procs)
                self.namespaces.remove(ns)
            for d in list(self.dirs):
                shutil.rmtree(d, ignore_errors=True)
                self.dirs.remove(d)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


def delete_namespace(ns, procs):
    r = run(["ip", "netns", "pids", ns], check=False)
    left = [int(x) for x in r.stdout.split() if x.isdigit()]
    ours = [procs.live[p][0] for p in left if p in procs.live]
    strangers = [p for p in left if p not in procs.live]
    for p in ours:
        procs.stop(p, timeout=5)
    if strangers:
        log(f"warning: processes not started by this script are inside {ns}: {strangers} "
            f"(left alone; the namespace disappears when they exit)")
    r = run(["ip", "netns", "del", ns], check=False)
    if r.returncode != 0:
        log(f"warning: ip netns del {ns}: {r.stderr.strip()}")


# --------------------------------------------------------------------------------------------
# Topology


class Topology:
    PAIRS = [("src", "src0", "sw", "swp1"), ("sw", "swp2", "sink", "sink0"), ("src", "src1", "sink", "sink1")]
    # Attack mode: a fourth namespace whose veth is the switch's port 3.
    ATTACK_PAIR = ("atk", "atk0", "sw", "swp3")

    def __init__(self, prefix, procs, cleanup, attack=False, gro_on_receivers=False):
        self.PAIRS = list(self.PAIRS) + ([self.ATTACK_PAIR] if attack else [])
        self.attack = attack
        self.ns = {k: f"{prefix}-{k}" for k in ("src", "sw", "sink") + (("atk",) if attack else ())}
        self.procs = procs
        self.cleanup = cleanup
        self.holders = {}
        self.remove_stale = False
        # GRO on the sender's peers (swp1, sink1): a veth hands XDP frames (`rqvs send --engine
        # xdp`) only to a peer with NAPI, which an XDP program in driver mode or GRO gives it.
        self.gro_on_receivers = gro_on_receivers

    def __enter__(self):
        clash = [n for n in self.ns.values() if n in netns_list()]
        if clash and self.remove_stale:
            for n in list(clash):
                pids = run(["ip", "netns", "pids", n], check=False).stdout.split()
                if pids:
                    log(f"{n} is stale but processes {pids} are inside it: left alone")
                    continue
                log(f"removing stale, empty namespace {n} (--remove-stale)")
                run(["ip", "netns", "del", n])
                clash.remove(n)
        if clash:
            raise SystemExit(f"namespace(s) {', '.join(clash)} already exist: another run, or one killed "
                             f"hard. Check `ip netns pids NAME`, remove with `ip netns del NAME`, or use --prefix.")
        for n in self.ns.values():
            run(["ip", "netns", "add", n])
            self.cleanup.namespaces.append(n)
            for key in ("all", "default"):
                run(["sysctl", "-qw", f"net.ipv6.conf.{key}.disable_ipv6=1"], ns=n)
            run(["sysctl", "-qw", "net.ipv4.ip_forward=0"], ns=n)
        for a, ia, b, ib in self.PAIRS:
            # Created from inside namespace a: nothing ever appears in the host's namespace.
            run(["ip", "link", "add", ia, "type", "veth", "peer", "name", ib, "netns", self.ns[b]], ns=self.ns[a])
        for a, ia, b, ib in self.PAIRS:
            for side, dev in ((a, ia), (b, ib)):
                run(["sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1"], ns=self.ns[side])
                run(["ip", "link", "set", dev, "up"], ns=self.ns[side])
            if self.gro_on_receivers and a == "src":
                run(["ethtool", "-K", ib, "gro", "on"], ns=self.ns[b])
        for side, n in self.ns.items():
            # A process that lives in the namespace: its /proc/PID/net/dev are the namespace's counters.
            p = self.holders[side] = self.procs.start(["sleep", "infinity"], f"holder-{side}", ns=n)
            want = f"net:[{os.stat(f'/run/netns/{n}').st_ino}]"

            def inside(p=p, want=want):
                try:
                    return os.readlink(f"/proc/{p.pid}/ns/net") == want and \
                        Path(f"/proc/{p.pid}/comm").read_text().strip() == "sleep"
                except OSError:
                    return False

            wait_for(inside, 10, f"holder process in {n}", p, step=0.005)
        # Every veth end operationally up (carrier on) before a switch is started on it: a
        # switch started earlier sees, and logs, the fresh link's carrier settle.
        for a, ia, b, ib in self.PAIRS:
            for side, dev in ((a, ia), (b, ib)):
                def up(side=side, dev=dev):
                    r = run(["cat", f"/sys/class/net/{dev}/operstate"], ns=self.ns[side], check=False)
                    return r.stdout.strip() == "up"

                wait_for(up, 10, f"{dev} up in {self.ns[side]}")
        return self

    def __exit__(self, *exc):
        for p in self.holders.values():
            self.procs.stop(p, timeout=5)
        for n in self.ns.values():
            if n in self.cleanup.namespaces:
                delete_namespace(n, self.procs)
                self.cleanup.namespaces.remove(n)
        return False

    def counters(self, side):
        """{dev: (rx_packets, rx_dropped, tx_packets, tx_dropped)} of namespace `side`."""
        out = {}
        with open(f"/proc/{self.holders[side].pid}/net/dev") as f:
            for line in f.readlines()[2:]:
                name, rest = line.split(":", 1)
                v = [int(x) for x in rest.split()]
                out[name.strip()] = (v[1], v[3], v[9], v[11])
        return out

    def sysfs(self, side, dev, stat):
        return int(run(["cat", f"/sys/class/net/{dev}/statistics/{stat}"], ns=self.ns[side]).stdout)

    def ifindex(self, side, dev):
        return int(run(["cat", f"/sys/class/net/{dev}/ifindex"], ns=self.ns[side]).stdout)

    def switch_ports(self):
        """The switch's interfaces in port-number order: swp1, swp2 (and swp3 in attack mode)."""
        return ["swp1", "swp2"] + (["swp3"] if self.attack else [])


# --------------------------------------------------------------------------------------------
# Attack mode: frames told apart at the sink by destination MAC


# A megaflow that matches the destination MAC, in OVS's datapath notation or ovs-ofctl's (rqvs).
DL_DST = re.compile(r"\beth\([^)]*\bdst=|\bdl_dst=")
ATTACK_DMAC = bytes.fromhex("02a77a000001")  # locally administered, unicast; benign frames carry 00:00:00:00:00:00
_CLONE_NEWNET = 0x40000000
_SOL_PACKET, _PACKET_STATISTICS, _SO_ATTACH_FILTER = 263, 6, 26
_ETH_P_ALL = 0x0003


def dmac_filter(mac, equal):
    """A classic BPF program for an AF_PACKET socket: accept (4 bytes: the count is all we need)
    the frames whose destination MAC is (`equal`) or is not `mac`, drop the rest."""
    hi = int.from_bytes(mac[:4], "big")
    lo = int.from_bytes(mac[4:6], "big")
    accept, drop = (4, 0) if equal else (0, 4)
    # (code, jt, jf, k): ldw [0]; jeq hi ? next : miss; ldh [4]; jeq lo ? hit : miss; hit: ret; miss: ret
    return [(0x20, 0, 0, 0), (0x15, 0, 3, hi), (0x28, 0, 0, 4), (0x15, 0, 1, lo),
            (0x06, 0, 0, accept), (0x06, 0, 0, drop)]


class SinkClasses:
    """Exact per-class frame counts at the sink: one AF_PACKET socket per class on `sink0`, each
    with a classic BPF filter on the destination MAC, read with PACKET_STATISTICS. The kernel
    counts in tp_packets every frame the filter accepted, whether or not it fitted the socket's
    (tiny) receive buffer (getsockopt adds tp_drops to it), and resets both on every read. The
    sockets are made inside the sink's namespace (setns there and back; this script is
    single-threaded) and never read: the count is all that is used."""

    def __init__(self, topo, dev="sink0", mac=ATTACK_DMAC):
        import socket
        self.socks = {}
        own = os.open("/proc/self/ns/net", os.O_RDONLY)
        target = os.open(f"/run/netns/{topo.ns['sink']}", os.O_RDONLY)
        try:
            if _LIBC.setns(target, _CLONE_NEWNET) != 0:
                raise RuntimeError(f"setns into {topo.ns['sink']}: errno {ctypes.get_errno()}")
            try:
                for name, equal in (("benign", False), ("attack", True)):
                    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(_ETH_P_ALL))
                    prog = dmac_filter(mac, equal)
                    insns = b"".join(int(c).to_bytes(2, "little") + bytes([jt, jf]) + int(k).to_bytes(4, "little")
                                     for c, jt, jf, k in prog)
                    buf = ctypes.create_string_buffer(insns)
                    # struct sock_fprog { unsigned short len; struct sock_filter *filter; } (native
                    # alignment); the kernel copies the program during the call.
                    fprog = struct.pack("@HP", len(prog), ctypes.addressof(buf))
                    s.setsockopt(socket.SOL_SOCKET, _SO_ATTACH_FILTER, fprog)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                    s.bind((dev, _ETH_P_ALL))
                    self.socks[name] = s
            finally:
                if _LIBC.setns(own, _CLONE_NEWNET) != 0:
                    raise SystemExit(f"setns back to the script's own namespace failed: errno {ctypes.get_errno()}")
        finally:
            os.close(own)
            os.close(target)
        self.read()  # reset: frames before this moment are not counted

    def read(self):
        """{class: frames accepted since the previous read}."""
        out = {}
        for name, s in self.socks.items():
            raw = s.getsockopt(_SOL_PACKET, _PACKET_STATISTICS, 8)
            out[name] = int.from_bytes(raw[:4], sys.byteorder)  # tp_packets (tp_drops included)
        return out

    def close(self):
        for s in self.socks.values():
            s.close()
        self.socks = {}


# --------------------------------------------------------------------------------------------
# Sender and probes


def sender_cmd(iface, pcap, pps, seconds, pacing=(), rqvs=None, engine="ring"):
    """The sender's command: tcpreplay, or with `rqvs` (the binary) `rqvs send` (`engine`: a TX
    ring, or XDP live frames)."""
    if rqvs is not None:
        cmd = [rqvs, "send", "--iface", iface, "--pcap", str(pcap), "--duration", str(seconds), "--engine", engine]
        return cmd if pps is None else cmd + ["--pps", str(int(pps))]
    cmd = ["tcpreplay", "-i", iface, "-K", "--loop=0", f"--duration={seconds}", "--no-flow-stats"]
    cmd += ["--topspeed"] if pps is None else [f"--pps={int(pps)}", *pacing]
    return cmd + [str(pcap)]


def attack_pacing(args, pps):
    """How the attack's tcpreplay keeps its rate. `gtod` (tcpreplay's default) busy-waits between
    frames, so even a slow attacker takes its whole share of the senders' core from the benign
    sender; `nano` sleeps, sending bursts of --attack-burst frames (default: rate/1000, i.e. a
    thousand bursts a second) so that the sleeps stay long enough to be kept."""
    if args.attack_timer == "gtod":
        return ()
    burst = args.attack_burst or max(1, int(pps) // 1000)
    return ("--timer=nano", f"--pps-multi={burst}")


def probe_seconds(args, frames, pps):
    """At least --probe-seconds, and long enough for --passes passes over the trace at `pps`, at most
    --max-probe-seconds; whole seconds (tcpreplay --duration)."""
    want = args.passes * frames / max(pps, 1.0)
    return int(math.ceil(max(args.probe_seconds, min(args.max_probe_seconds, want))))


class Attack:
    """Attack mode for one probe: `pps` frames/s of `pcap` (dst MAC rewritten) sent from `atk0`
    into the switch's port 3 by a second tcpreplay, counted apart at the sink by `classes`;
    `sample()` reads the switch's megaflows/masks while both streams run."""

    def __init__(self, pcap, pps, classes, sample=None):
        self.pcap, self.pps, self.classes, self.sample = pcap, pps, classes, sample


def probe(topo, procs, args, pcap, pps, seconds, tx_dev="src0", rx_dev="sink0", logdir=None, attack=None):
    """Offer `pps` (None: as fast as the sender goes) for `seconds`; count over the window after
    the warm-up (--warmup of the probe). With `attack`: the attacker starts --attack-lead seconds
    before the benign sender, runs through the whole probe and stops with it; benign and attack
    frames are counted apart at the sink. Returns the probe's record."""
    atk_on = attack is not None and attack.pps > 0

    def snap(classes=False):
        """(time, src offered, sink received, src tx_dropped, attack offered[, class counts]); the
        class counts (since their previous read) are read right after the sink's counters, so
        their windows differ by microseconds."""
        t = time.monotonic()
        tx = topo.counters("src")[tx_dev]
        rx = topo.counters("sink")[rx_dev]
        cls = attack.classes.read() if classes else None
        atx = topo.counters("atk")["atk0"] if atk_on else (0, 0, 0, 0)
        return t, tx[2] + tx[3], rx[0], tx[3], atx[2] + atx[3], cls

    def wait_sending(p, idx, dev, what, out):
        base = snap()[idx]
        deadline = time.monotonic() + 120  # preloading a large pcap takes a moment
        while True:
            now = snap()
            if now[idx] > base:
                return now[0]
            if p.poll() is not None or now[0] > deadline:
                text = ""
                if out is not subprocess.DEVNULL:
                    out.seek(0)
                    text = out.read()[-500:]
                raise RuntimeError(f"{what} sent nothing on {dev} (exit {p.poll()}): {text.strip()}")
            time.sleep(0.001)

    out = open(Path(logdir) / "tcpreplay.out", "w+") if logdir else subprocess.DEVNULL
    aout = open(Path(logdir) / "tcpreplay-attack.out", "w+") if logdir and atk_on else subprocess.DEVNULL
    ap = p = None
    sample = None
    try:
        if atk_on:
            # Runs longer than the benign probe could; stopped by pid as soon as the benign sender ends.
            atk_seconds = int(math.ceil(args.attack_lead + seconds + 130))
            ap = procs.start(sender_cmd("atk0", attack.pcap, attack.pps, atk_seconds, attack_pacing(args, attack.pps)),
                             "tcpreplay-attack",
                             ns=topo.ns["atk"], cpu=args.sender_cpu, stdout=aout, stderr=subprocess.STDOUT)
            wait_sending(ap, 4, "atk0", "the attack's tcpreplay", aout)
            time.sleep(args.attack_lead)
        rqvs_sender = args.rqvs if args.sender == "rqvs" else None
        p = procs.start(sender_cmd(tx_dev, pcap, pps, seconds, rqvs=rqvs_sender, engine=args.sender_engine),
                        args.sender, ns=topo.ns["src"],
                        cpu=args.sender_cpu, stdout=out, stderr=subprocess.STDOUT)
        t_start = wait_sending(p, 1, tx_dev, args.sender, out)
        time.sleep(max(0.0, t_start + args.warmup * seconds - time.monotonic()))
        a = snap(classes=attack is not None)  # the class counts restart here
        while p.poll() is None:
            time.sleep(0.002)
            now = time.monotonic()
            if attack is not None and attack.sample and sample is None and now - t_start > 0.9 * seconds:
                sample = attack.sample()  # megaflows/masks with both streams running
            if atk_on and ap.poll() is not None:
                raise RuntimeError(f"the attack's tcpreplay stopped early (exit {ap.returncode})")
            if now - t_start > seconds + 60:
                raise RuntimeError(f"{args.sender} did not stop after --duration")
        t_end = time.monotonic()
    finally:
        for q in (p, ap):
            if q is not None:
                procs.stop(q)
    time.sleep(args.drain)
    b = snap(classes=attack is not None)
    classes = b[5]
    # Nothing moves any more: the sysfs counters, read inside the namespaces, must equal ours.
    sys_rx = topo.sysfs("sink", rx_dev, "rx_packets")
    sys_tx = topo.sysfs("src", tx_dev, "tx_packets")
    if (sys_rx, sys_tx) != (b[2], b[1] - b[3]):
        log(f"    warning: sysfs {rx_dev} rx_packets {sys_rx} / {tx_dev} tx_packets {sys_tx} differ from "
            f"/proc/PID/net/dev {b[2]} / {b[1] - b[3]} (stray frames?)")
    offered = b[1] - a[1]
    received = b[2] - a[2]
    dur = max(t_end - a[0], 1e-9)
    rec = {"nominal_pps": None if pps is None else int(pps)}
    if classes is not None:
        # Benign frames are the ones without the attack's destination MAC, counted at the sink.
        rec["sink_rx"] = received
        rec["sink_unclassified"] = received - classes["benign"] - classes["attack"]
        # Frames reaching the sink between its counters' read and the class sockets' read at the
        # window's start (microseconds apart, traffic running) make a few either way.
        if abs(rec["sink_unclassified"]) > max(10, received // 10000):
            log(f"    warning: {rx_dev} received {received} frames in the window, the class sockets counted "
                f"{classes['benign']} benign + {classes['attack']} attack")
        received = classes["benign"]
        a_off = b[4] - a[4]
        rec["attack"] = {"nominal_pps": attack.pps, "offered": a_off, "delivered": classes["attack"],
                         "offered_pps": round(a_off / dur), "delivered_pps": round(classes["attack"] / dur),
                         "loss": (1 - classes["attack"] / a_off) if a_off > 0 else None}
        rec["switch_sample"] = sample
    rec.update({
        "offered_pps": round(offered / dur),
        "received_pps": round(received / dur),
        "offered": offered,
        "received": received,
        "tx_dropped": b[3] - a[3],
        "seconds": round(dur, 3),
        "probe_seconds": seconds,
        "loss": (1 - received / offered) if offered > 0 else None,
    })
    if aout is not subprocess.DEVNULL:
        aout.close()  # stopped by SIGTERM: no summary; its interface's counters are what counts
    if logdir:
        out.seek(0)
        txt = out.read()
        out.close()
        m = re.search(r"Actual: (\d+) packets", txt)
        rec["tcpreplay_sent"] = int(m.group(1)) if m else None
        m = re.search(r"Failed packets:\s+(\d+)", txt)
        rec["tcpreplay_failed"] = int(m.group(1)) if m else None
        # `rqvs send`'s one line: "IFACE: N frames (B bytes) of PCAP ...".
        m = re.search(r": (\d+) frames \(\d+ bytes\)", txt)
        rec["rqvs_send_sent"] = int(m.group(1)) if m else None
    rec["pass"] = rec["loss"] is not None and rec["loss"] < args.loss
    return rec


def fmt_probe(r):
    nom = "top" if r["nominal_pps"] is None else f"{r['nominal_pps'] / 1e3:.0f}K"
    loss = "n/a" if r["loss"] is None else f"{max(0.0, 100 * r['loss']):.2f}%"
    return (f"offered {nom:>6} pps -> {r['offered_pps'] / 1e3:8.1f} Kpps, received {r['received_pps'] / 1e3:8.1f} "
            f"Kpps, loss {loss:>7} {'PASS' if r['pass'] else 'fail'} ({r['probe_seconds']} s)"
            + (f"; attack {r['attack']['offered_pps'] / 1e3:.1f} -> {r['attack']['delivered_pps'] / 1e3:.1f} Kpps"
               if r.get("attack") else ""))


def search(topo, procs, args, pcap, frames, ceiling, logdir, attack=None):
    """The probe at the sender's top speed into the switch first: if it passes, the sender set the
    rate. Otherwise bisection on the offered rate between 0 and what the sender reached, whose
    first cut is the rate the switch delivered while overloaded (usually near the answer, which
    may lie on either side of it) rather than the midpoint."""
    probes = []
    top = probe(topo, procs, args, pcap, None, probe_seconds(args, frames, ceiling), logdir=logdir,
                attack=attack)
    probes.append(top)
    log(f"    {fmt_probe(top)}")
    best = top if top["pass"] else None
    if not top["pass"]:
        lo, hi = 0.0, float(min(top["offered_pps"], ceiling))
        for i in range(args.probes - 1):
            mid = (lo + hi) / 2
            # Also when the switch delivered only a few percent of a fast sender's rate (OVS at
            # 500K rules: ~20 of 1,600 Kpps): halving from the top would need ten probes.
            if i == 0 and 0 < top["received_pps"] < 0.98 * hi:
                mid = float(top["received_pps"])
            if args.gap > 0:
                time.sleep(args.gap)  # idle: the switch's caches expire (10 s in OVS and rqvs)
            r = probe(topo, procs, args, pcap, mid, probe_seconds(args, frames, mid), logdir=logdir,
                      attack=attack)
            probes.append(r)
            log(f"    {fmt_probe(r)}")
            if r["pass"]:
                lo = mid
                if best is None or r["offered_pps"] > best["offered_pps"]:
                    best = r
            else:
                hi = mid
    return best, probes


# --------------------------------------------------------------------------------------------
# Switches under test


def wait_for(pred, timeout, what, proc=None, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: the process exited ({proc.returncode})")
        time.sleep(step)
    raise RuntimeError(f"{what}: not after {timeout} s")


def tail(path, n=8):
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


class Ovs:
    """A private ovsdb-server + ovs-vswitchd (own run directory, database and sockets) inside the
    switch namespace; bridge br0, datapath_type=netdev, one PMD core."""

    def __init__(self, port_type, args, topo, procs, logdir):
        self.port_type, self.args, self.topo, self.procs = port_type, args, topo, procs
        self.d = Path(tempfile.mkdtemp(prefix="ovs-", dir=logdir))
        self.env = dict(os.environ, OVS_RUNDIR=str(self.d), OVS_DBDIR=str(self.d), OVS_LOGDIR=str(self.d),
                        OVS_SYSCONFDIR=str(self.d))
        self.db = self.vs = None
        self.info = {"xdp_mode": None}

    name = property(lambda self: "ovs")

    def vsctl(self, *a, timeout=120):
        return run(["ovs-vsctl", f"--db=unix:{self.d}/db.sock", f"--timeout={timeout}", *a],
                   ns=self.topo.ns["sw"], env=self.env, timeout=timeout + 10).stdout.strip()

    def appctl(self, *a, target="ovs-vswitchd", timeout=60, check=True):
        return run(["ovs-appctl", "-t", f"{self.d}/{target}.ctl", f"--timeout={timeout}", *a],
                   ns=self.topo.ns["sw"], env=self.env, timeout=timeout + 10, check=check).stdout

    def start(self):
        d, sw, cpu = self.d, self.topo.ns["sw"], self.args.switch_cpu
        run(["ovsdb-tool", "create", f"{d}/conf.db", OVS_SCHEMA], env=self.env)
        self.db = self.procs.start(
            ["ovsdb-server", f"{d}/conf.db", f"--remote=punix:{d}/db.sock", f"--pidfile={d}/ovsdb-server.pid",
             f"--log-file={d}/ovsdb-server.log", f"--unixctl={d}/ovsdb-server.ctl", "--no-chdir"],
            "ovsdb-server", ns=sw, cpu=cpu, env=self.env)
        wait_for(lambda: (d / "db.sock").exists(), 20, "ovsdb-server socket", self.db)
        self.vsctl("--no-wait", "init")
        self.vsctl("--no-wait", "set", "Open_vSwitch", ".", f"other_config:pmd-cpu-mask={1 << cpu:#x}")
        self.vs = self.procs.start(
            ["ovs-vswitchd", f"unix:{d}/db.sock", "--disable-system", f"--pidfile={d}/ovs-vswitchd.pid",
             f"--log-file={d}/ovs-vswitchd.log", f"--unixctl={d}/ovs-vswitchd.ctl", "--no-chdir"],
            "ovs-vswitchd", ns=sw, cpu=cpu, env=self.env)
        wait_for(lambda: (d / "ovs-vswitchd.ctl").exists(), 30, "ovs-vswitchd control socket", self.vs)
        self.info["ovs_version"] = self.appctl("version").splitlines()[0].strip()
        types = self.vsctl("get", "Open_vSwitch", ".", "iface_types")
        cmd = ["add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev", "fail-mode=secure"]
        for ofp, port in enumerate(self.topo.switch_ports(), 1):
            cmd += ["--", "add-port", "br0", port, "--", "set", "interface", port, f"ofport_request={ofp}"]
            if self.port_type == "afxdp":
                if "afxdp" not in types:
                    raise Skip(f"this OVS build has no afxdp port type (iface_types: {types})")
                cmd += ["type=afxdp", f"options:xdp-mode={self.args.ovs_xdp_mode}"]
            elif self.port_type == "system":
                cmd += ["type=system"]
            else:
                raise Skip(f"unknown OVS port type {self.port_type}")
        self.vsctl(*cmd)
        for ofp, port in enumerate(self.topo.switch_ports(), 1):
            err = self.vsctl("get", "interface", port, "error").strip('"')
            got = self.vsctl("get", "interface", port, "ofport")
            if err not in ("[]", "") or got != str(ofp):
                raise Skip(f"OVS refused {self.port_type} port {port} (ofport {got}): {err}; "
                           f"log: {tail(d / 'ovs-vswitchd.log', 4)}")
        if self.port_type == "afxdp":
            show = self.appctl("dpctl/show", check=False)
            modes = set(re.findall(r"xdp-mode-in-use=([\w-]+)", show))
            self.info["xdp_mode"] = ",".join(sorted(modes)) or None

    def load(self, flows, n_flows):
        t = time.monotonic()
        run(["ovs-ofctl", "-O", "OpenFlow14", "--bundle", "add-flows", f"unix:{self.d}/br0.mgmt", str(flows)],
            ns=self.topo.ns["sw"], env=self.env, timeout=3600)
        self.info["load_s"] = round(time.monotonic() - t, 2)
        agg = run(["ovs-ofctl", "-O", "OpenFlow14", "dump-aggregate", f"unix:{self.d}/br0.mgmt"],
                  ns=self.topo.ns["sw"], env=self.env, timeout=600).stdout
        m = re.search(r"flow_count=(\d+)", agg)
        got = int(m.group(1)) if m else -1
        if got != n_flows:
            raise RuntimeError(f"OVS holds {got} flows after loading {n_flows}")
        self.appctl("dpif-netdev/pmd-stats-clear")

    def stats(self):
        txt = self.appctl("dpif-netdev/pmd-stats-show", check=False)
        s = {}
        for key, pat in (("emc_hits", r"emc hits: (\d+)"), ("smc_hits", r"smc hits: (\d+)"),
                         ("megaflow_hits", r"megaflow hits: (\d+)"),
                         ("upcalls", r"miss with success upcall: (\d+)"),
                         ("failed_upcalls", r"miss with failed upcall: (\d+)"),
                         ("packets", r"packets received: (\d+)")):
            s[key] = sum(int(x) for x in re.findall(pat, txt))
        m = re.search(r"flows: (\d+)", self.appctl("dpctl/show", check=False))
        s["megaflows_now"] = int(m.group(1)) if m else None
        return s

    def sample(self):
        """Megaflows and their distinct masks now (`dpctl/dump-flows`), the PMD's average subtable
        lookups per megaflow hit (`pmd-stats-show`), and how many megaflows match dl_dst."""
        flows = [line for line in self.appctl("dpctl/dump-flows", check=False).splitlines() if "actions:" in line]
        txt = self.appctl("dpif-netdev/pmd-stats-show", check=False)
        m = re.search(r"avg\. subtable lookups per megaflow hit: ([\d.]+)", txt)
        return {"megaflows": len(flows), "masks": len({megaflow_mask(f) for f in flows}),
                "subtable_lookups_per_megaflow_hit": float(m.group(1)) if m else None,
                "megaflows_matching_dl_dst": sum(1 for f in flows if DL_DST.search(f)),
                "first_megaflows": flows[:2]}

    def stop(self):
        for p, target in ((self.vs, "ovs-vswitchd"), (self.db, "ovsdb-server")):
            if p is None or p.poll() is not None:
                continue
            try:
                self.appctl("exit", target=target, timeout=20, check=False)
                p.wait(20)
            except (subprocess.TimeoutExpired, RuntimeError, OSError):
                pass
            self.procs.stop(p)


def megaflow_mask(line):
    """The mask of a `dpctl/dump-flows` megaflow: its match with the values taken out (fields
    shown without a mask are exact, fields not shown are wildcarded)."""
    match = line.split(", packets:", 1)[0].split(" actions:", 1)[0]
    # tcp_flags(+syn-ack): the flags named are the mask, their signs the value
    match = re.sub(r"tcp_flags\(([^()]*)\)",
                   lambda m: "tcp_flags(" + "".join(sorted(re.findall(r"[a-z]+", m.group(1)))) + ")", match)
    match = re.sub(r"\b(in_port|eth_type|recirc_id)\(([^()=,]*)\)", r"\1(*)", match)
    return re.sub(r"(\w+)=[^,()/]*(/[^,()]*)?", lambda m: m.group(1) + (m.group(2) or ""), match)


class Rqvs:
    """`rqvs switch` (the interface it will have): foreground until SIGINT/SIGTERM, ports numbered
    1, 2, ... in the order given."""

    def __init__(self, port_type, design, args, topo, procs, logdir):
        self.port_type, self.design, self.args, self.topo, self.procs = port_type, design, args, topo, procs
        self.d = Path(tempfile.mkdtemp(prefix=f"rqvs-{port_type}-{design}-", dir=logdir))
        self.p = None
        self.ctl = None
        self.info = {"xdp_mode": None, "ovs_version": None}

    name = property(lambda self: "rqvs")

    @staticmethod
    def available(binary):
        if not Path(binary).is_file():
            return f"{binary} does not exist (cargo build --release -p rqvs)"
        try:
            r = run([binary, "switch", "--help"], check=False, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{binary} switch --help: {e}"
        if r.returncode != 0:
            first = (r.stderr or r.stdout).strip().splitlines()
            return f"{binary} has no `switch` subcommand yet ({first[0] if first else 'exit ' + str(r.returncode)})"
        missing = [f for f in ("--port", "--rules", "--design") if f not in r.stdout]
        if missing:
            return f"`{binary} switch --help` names no {', '.join(missing)}: not the interface this script drives"
        return None

    @staticmethod
    def optional_flags(binary):
        """The optional flags `rqvs switch --help` mentions (--pmds, --pmd-cpus, --json)."""
        out = run([binary, "switch", "--help"], check=False, timeout=30).stdout
        return {f for f in ("--pmds", "--pmd-cpus", "--json", "--ctl") if re.search(re.escape(f) + r"\b", out)}

    def log_text(self):
        return "".join(Path(self.d / f).read_text(errors="replace") for f in ("stdout", "stderr")
                       if (self.d / f).exists())

    def ports_attached(self):
        sw = self.topo.ns["sw"]
        if self.port_type == "afxdp":
            for dev in self.topo.switch_ports():
                out = run(["ip", "-d", "link", "show", "dev", dev], ns=sw, check=False).stdout
                if not re.search(r"\bxdp(generic|drv)?\b|prog/xdp", out):
                    return False
            return True
        # afpacket: packet sockets of this process bound to both interfaces
        want = {self.topo.ifindex("sw", dev) for dev in self.topo.switch_ports()}
        try:
            inodes = set()
            for fd in os.listdir(f"/proc/{self.p.pid}/fd"):
                try:
                    m = re.match(r"socket:\[(\d+)\]", os.readlink(f"/proc/{self.p.pid}/fd/{fd}"))
                except OSError:
                    continue
                if m:
                    inodes.add(m.group(1))
            bound = set()
            with open(f"/proc/{self.p.pid}/net/packet") as f:
                for line in f.readlines()[1:]:
                    c = line.split()
                    if len(c) >= 9 and c[8] in inodes:
                        bound.add(int(c[4]))
            return want <= bound
        except OSError:
            return False

    def start(self):
        a = self.args
        have = self.optional_flags(a.rqvs)
        self.cmd = [a.rqvs, "switch"]
        for dev in self.topo.switch_ports():
            self.cmd += ["--port", f"{dev}:{self.port_type}"]
        self.cmd += ["--rules", "RULES", "--design", self.design]
        if "--pmds" in have:
            self.cmd += ["--pmds", "1"]
        if "--pmd-cpus" in have:
            self.cmd += ["--pmd-cpus", str(a.switch_cpu)]
        if "--json" in have:
            self.cmd += ["--json", str(self.d / "report.json")]
        if "--ctl" in have:
            self.ctl = self.d / "ctl.sock"
            self.cmd += ["--ctl", str(self.ctl)]
        self.cmd += shlex.split(a.rqvs_args)

    def load(self, flows, n_flows):
        # rqvs takes its rules on the command line: start it here, once the rule file is known.
        cmd = [str(flows) if x == "RULES" else x for x in self.cmd]
        self.info["command"] = " ".join(cmd)
        t0 = time.monotonic()
        self.p = self.procs.start(cmd, f"rqvs-{self.design}", ns=self.topo.ns["sw"], cpu=self.args.switch_cpu,
                                  stdout=open(self.d / "stdout", "w"), stderr=open(self.d / "stderr", "w"))
        ports_since = None
        while True:
            if any(re.search(r"\bready\b", line, re.I) and not re.search(r"\bnot ready\b", line, re.I)
                   for line in self.log_text().splitlines()):
                self.info["ready_by"] = "ready line"
                break
            if self.p.poll() is not None:
                raise RuntimeError(f"rqvs switch exited ({self.p.returncode}) before it was ready: "
                                   f"{self.log_text().strip()[-600:]}")
            now = time.monotonic()
            if self.args.ready_grace > 0 and now - t0 >= 1.0 and self.ports_attached():
                ports_since = ports_since or now
                if now - ports_since >= self.args.ready_grace:
                    self.info["ready_by"] = f"ports attached, no ready line within {self.args.ready_grace} s"
                    log("    warning: rqvs printed no `ready` line; going on because its ports are attached")
                    break
            if now - t0 > self.args.ready_timeout:
                raise RuntimeError(f"rqvs switch not ready after {self.args.ready_timeout} s")
            time.sleep(0.1)
        self.info["load_s"] = round(time.monotonic() - t0, 2)

    def stats(self):
        return {}

    def sample(self):
        """Megaflows and masks now, summed over the PMDs, and the average subtable lookups per
        megaflow hit (`rqvs ctl pmd-stats-show --json`); None without --ctl."""
        if self.ctl is None:
            return None
        r = run([self.args.rqvs, "ctl", "--socket", str(self.ctl), "--json", "pmd-stats-show"], check=False,
                timeout=30)
        try:
            pmds = json.loads(r.stdout)
        except ValueError:
            return {"error": (r.stderr or r.stdout).strip()[-300:]}
        dps = [p["datapath"] for p in pmds]
        hits = [d.get("avg_subtable_lookups_per_megaflow_hit") for d in dps]
        out = {"megaflows": sum(d["megaflows"] for d in dps), "masks": sum(d["masks"] for d in dps),
               "subtable_lookups_per_megaflow_hit": max((h for h in hits if h is not None), default=None)}
        if self.args.attack:
            # Does any megaflow match the destination MAC (which tells the attack apart at the sink)?
            r = run([self.args.rqvs, "ctl", "--socket", str(self.ctl), "dump-flows"], check=False, timeout=60)
            flows = [line for line in r.stdout.splitlines() if "actions:" in line]
            out["megaflows_matching_dl_dst"] = sum(1 for f in flows if DL_DST.search(f))
            out["first_megaflows"] = flows[:2]
        return out

    def stop(self):
        if self.p is None:
            return
        if self.p.poll() is None:
            self.procs.stop(self.p, sig=signal.SIGINT, timeout=20)
        self.procs.stop(self.p)
        self.info["exit_code"] = self.p.returncode
        self.info["final_output"] = self.log_text().strip()[-2000:]
        try:
            self.info["report"] = json.loads((self.d / "report.json").read_text())
        except (OSError, ValueError):
            pass


# --------------------------------------------------------------------------------------------
# Data


def parse_size(s):
    s = s.strip().lower()
    mult = 1
    if s.endswith("k"):
        s, mult = s[:-1], 1000
    n = int(float(s) * mult)
    if n != 1 and n not in SIZE_LABEL:
        raise argparse.ArgumentTypeError(f"size {n}: expected 1 or one of {sorted(SIZE_LABEL)}")
    return n


def parse_rate(s):
    s = s.strip().lower()
    mult = {"k": 1000, "m": 1000000}.get(s[-1:], 1)
    v = float(s[:-1] if mult > 1 else s) * mult
    if not (0 <= v <= 1e8) or v != int(v):
        raise ValueError(f"'{s}': a whole number of packets per second, 0 to 1e8")
    return int(v)


def pcap_records(path):
    """(byte order, link type, [(offset of the frame, captured length)]) of a classic pcap file."""
    data = Path(path).read_bytes()
    if len(data) < 24:
        raise SystemExit(f"{path}: not a pcap file (too short)")
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        bo = "little"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        bo = "big"
    else:
        raise SystemExit(f"{path}: not a classic pcap file (magic {magic.hex()}; convert pcapng with editcap -F pcap)")
    linktype = int.from_bytes(data[20:24], bo) & 0x0FFFFFFF
    recs, o = [], 24
    while o + 16 <= len(data):
        incl = int.from_bytes(data[o + 8:o + 12], bo)
        if o + 16 + incl > len(data):
            raise SystemExit(f"{path}: truncated record at byte {o}")
        recs.append((o + 16, incl))
        o += 16 + incl
    return data, linktype, recs


def pcap_frames_to(path, mac):
    data, _, recs = pcap_records(path)
    return sum(1 for off, n in recs if n >= 6 and data[off:off + 6] == mac)


def prepare_attack(path, cache):
    """The attack pcap with every frame's destination MAC set to ATTACK_DMAC, so the sink tells
    attack and benign frames apart (the rules match no MAC, so no megaflow mask changes)."""
    data, linktype, recs = pcap_records(path)
    if linktype != 1:
        raise SystemExit(f"{path}: link type {linktype}, expected Ethernet (1)")
    if not recs or any(n < 14 for _, n in recs):
        raise SystemExit(f"{path}: no frames, or a frame shorter than an Ethernet header")
    buf = bytearray(data)
    for off, _ in recs:
        buf[off:off + 6] = ATTACK_DMAC
    st = path.stat()
    out = cache / f"attack-{path.stem}-{st.st_size}-{int(st.st_mtime)}.pcap"
    if not out.exists() or out.read_bytes() != bytes(buf):
        out.write_bytes(bytes(buf))
    return out, len(recs)


def find_data(base, stem):
    for cand in (base / stem, base / f"{stem}.xz"):
        if cand.exists():
            return cand
    raise SystemExit(f"missing ClassBench file {base / stem}[.xz]")


def count_pcap(path):
    n, o = 0, 24
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        magic = f.read(4)
        endian = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        while o + 16 <= size:
            f.seek(o + 8)
            incl = int.from_bytes(f.read(4), "little" if endian == "<" else "big")
            o += 16 + incl
            n += 1
    return n


def prepare(size, args, cache):
    """(flow file, number of flows, number of ClassBench rules, pcap, frames), cached."""
    data = Path(args.data)
    label = SIZE_LABEL.get(size, "1k")
    pcap = cache / f"{args.set}_{label}.pcap"
    if not pcap.exists():
        trace = find_data(data / "traces", f"{args.set}_{label}_trace")
        log(f"  pcap from {trace}")
        run([args.rqvs, "convert", "trace", str(trace), "--to", "pcap", "-o", str(pcap) + ".tmp"], timeout=3600)
        os.replace(str(pcap) + ".tmp", pcap)
    if size == 1:
        flows = cache / "catch_all.ofctl"
        flows.write_text(CATCH_ALL + "\n")
        rules = 1
    else:
        flows = cache / f"{args.set}_{label}.output2.ofctl"
        src = find_data(data / "rules", f"{args.set}_{label}")
        if not flows.exists():
            log(f"  flows from {src} (rqvs convert rules --actions output:2)")
            tmp = Path(str(flows) + ".tmp")
            rep = Path(str(flows) + ".json")
            run([args.rqvs, "convert", "rules", str(src), "--to", "ofctl", "--actions", "output:2", "-o", str(tmp),
                 "--json", str(rep)], timeout=7200)
            with open(tmp, "a") as f:
                f.write(CATCH_ALL + "\n")
            os.replace(tmp, flows)
        rules = json.loads(Path(str(flows) + ".json").read_text())["rules"]
    with open(flows) as f:
        n_flows = sum(1 for line in f if line.strip() and not line.lstrip().startswith("#"))
    return flows, n_flows, rules, pcap, count_pcap(pcap)


# --------------------------------------------------------------------------------------------
# Output


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def tool_version(cmd):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        return ((r.stdout or r.stderr).strip().splitlines() or [""])[0]
    except OSError:
        return None


def row_label(r):
    d = f"/{r['design']}" if r.get("design") else ""
    return f"{r['switch']}-{r['port_type']}{d}"


def print_table(rows, out=sys.stdout):
    hdr = (f"{'switch':<22} {'rules':>7} {'flows':>7} {'best Kpps':>10} {'loss':>7} {'top->sw':>8} {'ceiling':>8} "
           f"{'bound_by':>8}  note")
    print(hdr, file=out)
    print("-" * len(hdr), file=out)
    for r in rows:
        best = "-" if r["best_pps"] is None else f"{r['best_pps'] / 1e3:.1f}"
        loss = "-" if r["loss_at_best"] is None else f"{max(0.0, 100 * r['loss_at_best']):.2f}%"
        ceil = "-" if r["sender_ceiling_pps"] is None else f"{r['sender_ceiling_pps'] / 1e3:.1f}"
        notes = []
        if r["status"] == "ok" and r.get("xdp_mode"):
            notes.append(f"xdp-mode {r['xdp_mode']}")
        if r["status"] == "ok" and r.get("load_s") is not None:
            notes.append(f"load {r['load_s']} s")
        if r.get("attack_pps") is not None:
            ab = r.get("attack_at_best") or {}
            smp = r.get("switch_sample_at_best") or r.get("switch_sample_top") or {}
            notes.append(f"attack {r['attack_pps'] / 1e3:g} Kpps: offered "
                         + ("-" if not ab else f"{ab['offered_pps'] / 1e3:.1f}, delivered {ab['delivered_pps'] / 1e3:.1f}")
                         + f"; megaflows {smp.get('megaflows', '-')}, masks {smp.get('masks', '-')}")
        if r.get("reason"):
            notes.append(r["reason"])
        note = "; ".join(notes)
        top = r.get("sender_top_into_switch_pps")
        top = "-" if top is None else f"{top / 1e3:.1f}"
        print(f"{row_label(r):<22} {r['rules']:>7} {r['flows']:>7} {best:>10} {loss:>7} {top:>8} {ceil:>8} "
              f"{r['bound_by'] or r['status']:>8}  {note}", file=out)
    if rows:
        print(f"CPU: {rows[0]['cpu']}; rates in Kpps (thousand frames/s), loss over the window after the "
              f"warm-up; top->sw = what the sender reached into the switch's port at top speed; "
              f"ceiling = the sender's top rate straight into a sink (no switch)."
              + (" Attack mode: best = benign frames only, with the attack at the given rate (Kpps, offered and "
                 "delivered at the best probe); megaflows/masks sampled at 90% of that probe."
                 if any(r.get("attack_pps") is not None for r in rows) else ""), file=out)


def plot(rows, path):
    series = {}
    for r in rows:
        if r["status"] == "ok" and r["best_pps"] is not None:
            series.setdefault(row_label(r), []).append((r["rules"], r["best_pps"]))
    ceil = {}
    for r in rows:
        if r["sender_ceiling_pps"]:
            ceil[r["rules"]] = r["sender_ceiling_pps"]
    if ceil:
        series["sender ceiling"] = sorted(ceil.items())
    title = f"forwarding rate, <1% loss, 1 core ({rows[0]['cpu'] if rows else ''})"
    draw(series, path, title, "rules", xlog=True)


def plot_attack(rows, path):
    """Benign rate (< 1% benign loss) against the attack's offered rate, one line per (switch
    variant, rule count): the curve of the Tuple Space Explosion paper."""
    series = {}
    sizes = {r["rules"] for r in rows}
    for r in rows:
        if r["status"] == "ok" and r["best_pps"] is not None and r.get("attack_pps") is not None:
            name = row_label(r) + (f", {r['rules']} rules" if len(sizes) > 1 else "")
            series.setdefault(name, []).append((r["attack_pps"] / 1e3, r["best_pps"]))
    title = (f"benign rate (<1% benign loss) under attack, {'/'.join(str(x) for x in sorted(sizes))} rules, "
             f"1 core ({rows[0]['cpu'] if rows else ''})")
    draw(series, path, title, "attack rate offered (Kpps)", xlog=False)


def draw(series, path, title, xlabel, xlog):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7.5, 4.5))
        for name, pts in series.items():
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] / 1e3 for p in pts], "--" if name == "sender ceiling" else "-o",
                    label=name)
        if xlog:
            ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("Kpps")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path)
        return
    except ImportError:
        pass
    w, h, ml, mr, mt, mb = 760, 460, 70, 190, 40, 50
    allx = [p[0] for s in series.values() for p in s] or [1]
    ally = [p[1] / 1e3 for s in series.values() for p in s] or [1]
    xmax = math.log10(max(max(allx), 10)) + 0.3 if xlog else (max(allx) * 1.05 or 1)
    ymax = max(ally) * 1.1 or 1

    def X(v):
        return ml + (w - ml - mr) * ((math.log10(max(v, 1)) if xlog else v) / xmax)

    def Y(v):
        return h - mb - (h - mt - mb) * (v / ymax)

    colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"]
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
         f'<rect width="{w}" height="{h}" fill="white"/>',
         f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="12">{html.escape(title)}</text>',
         f'<line x1="{ml}" y1="{h - mb}" x2="{w - mr}" y2="{h - mb}" stroke="black"/>',
         f'<line x1="{ml}" y1="{mt}" x2="{ml}" y2="{h - mb}" stroke="black"/>',
         f'<text x="{(ml + w - mr) / 2}" y="{h - 12}" text-anchor="middle">'
         f'{html.escape(xlabel)}{" (log scale)" if xlog else ""}</text>',
         f'<text x="16" y="{(mt + h - mb) / 2}" text-anchor="middle" transform="rotate(-90 16 {(mt + h - mb) / 2})">Kpps</text>']
    if xlog:
        xticks = [(10 ** e, {0: "1", 1: "10", 2: "100", 3: "1K", 4: "10K", 5: "100K", 6: "1M"}.get(e, f"1e{e}"))
                  for e in range(0, int(xmax) + 1)]
    else:
        xticks = [(v, f"{v:g}") for v in ticks(xmax)]
    for xv, lab in xticks:
        x = X(xv)
        o.append(f'<line x1="{x}" y1="{h - mb}" x2="{x}" y2="{h - mb + 5}" stroke="black"/>')
        o.append(f'<text x="{x}" y="{h - mb + 18}" text-anchor="middle">{lab}</text>')
    for v in ticks(ymax):
        y = Y(v)
        o.append(f'<line x1="{ml - 5}" y1="{y}" x2="{w - mr}" y2="{y}" stroke="#ddd"/>')
        o.append(f'<text x="{ml - 8}" y="{y + 4}" text-anchor="end">{v:g}</text>')
    for i, (name, pts) in enumerate(series.items()):
        c = colors[i % len(colors)]
        pts.sort()
        dash = ' stroke-dasharray="5,4"' if name == "sender ceiling" else ""
        path_d = " ".join(f"{X(x):.1f},{Y(y / 1e3):.1f}" for x, y in pts)
        o.append(f'<polyline points="{path_d}" fill="none" stroke="{c}" stroke-width="2"{dash}/>')
        for x, y in pts:
            o.append(f'<circle cx="{X(x):.1f}" cy="{Y(y / 1e3):.1f}" r="3" fill="{c}"/>')
        ly = mt + 10 + 18 * i
        o.append(f'<line x1="{w - mr + 12}" y1="{ly}" x2="{w - mr + 34}" y2="{ly}" stroke="{c}" stroke-width="2"{dash}/>')
        o.append(f'<text x="{w - mr + 40}" y="{ly + 4}">{html.escape(name)}</text>')
    o.append("</svg>")
    Path(path).write_text("\n".join(o) + "\n")


# --------------------------------------------------------------------------------------------


def ticks(vmax):
    """Round tick values from 0 to vmax, at most about 8 of them."""
    step = 10 ** math.floor(math.log10(vmax / 2)) if vmax > 0 else 1
    while vmax / step > 8:
        step *= 2
    out, v = [], 0.0
    while v <= vmax:
        out.append(round(v, 10))
        v += step
    return out


def ensure_tools(args):
    missing = [pkg for tool, pkg in APT_PACKAGES.items() if shutil.which(tool) is None
               and (tool != "ovs-vswitchd" or "ovs" in args.switches)]
    if missing and not args.no_install:
        log(f"installing {' '.join(missing)} (apt-get; the Debian OVS service is not started here)")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        run(["apt-get", "update", "-qq"], env=env, timeout=900)
        run(["apt-get", "install", "-y", "-qq", *missing], env=env, timeout=1800)
    for tool in ("ip", "taskset", "tcpreplay") + (("ethtool",) if args.sender_engine == "xdp" else ()):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} not found")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1,1000,100000,500000",
                    help="rule counts: 1 (the catch-all alone) or ClassBench sizes 1000,10000,100000,500000")
    ap.add_argument("--set", default="acl1", help="ClassBench seed (default acl1)")
    data = os.environ.get("RQVS_CLASSBENCH_DIR") or next(
        (str(d / "shared/data/classbench") for d in (REPO.parent, REPO.parent.parent)
         if (d / "shared/data/classbench").is_dir()), str(REPO.parent / "shared/data/classbench"))
    ap.add_argument("--data", default=data,
                    help="ClassBench directory with rules/ and traces/")
    ap.add_argument("--switches", default="ovs,rqvs", help="ovs, rqvs or both")
    ap.add_argument("--ovs-ports", default="afxdp,system", help="OVS port types: afxdp, system")
    ap.add_argument("--ovs-xdp-mode", default="generic",
                    help="options:xdp-mode of OVS afxdp ports: generic (the default, as rqvs's afxdp ports), "
                         "native (veth has it), best-effort")
    ap.add_argument("--rqvs-ports", default="afxdp,afpacket", help="rqvs port types: afxdp, afpacket")
    ap.add_argument("--designs", default="orig,ccache,cflows", help="rqvs designs")
    ap.add_argument("--rqvs-args", default="", help="more arguments for `rqvs switch`, e.g. --rqvs-args=--busy-poll")
    target = os.environ.get("CARGO_TARGET_DIR", str(REPO / "target"))
    ap.add_argument("--rqvs", default=str(Path(target) / "release/rqvs"),
                    help="rqvs binary (also used to convert the rules and traces); default $CARGO_TARGET_DIR "
                         "or target/, release/rqvs")
    ap.add_argument("--probe-seconds", type=float, default=5.0, help="shortest probe, seconds (default 5)")
    ap.add_argument("--passes", type=float, default=1.0,
                    help="a probe lasts long enough to replay the trace this many times at its rate (default 1)")
    ap.add_argument("--max-probe-seconds", type=float, default=60.0, help="longest probe (default 60)")
    ap.add_argument("--gap", type=float, default=12.0,
                    help="idle seconds before each probe after the first, longer than the 10 s idle expiry of "
                         "OVS and rqvs so every probe starts with empty caches (0: back to back, caches warm)")
    ap.add_argument("--probes", type=int, default=6, help="probes per search, the top-speed one included")
    ap.add_argument("--warmup", type=float, default=0.05, help="warm-up, fraction of a probe (default 0.05)")
    ap.add_argument("--loss", type=float, default=0.01, help="a probe passes below this loss (default 0.01)")
    ap.add_argument("--drain", type=float, default=0.5, help="seconds to wait after the sender stops")
    ap.add_argument("--sender-cpu", type=int, default=0, help="CPU of the sender (default 0)")
    ap.add_argument("--sender", choices=["tcpreplay", "rqvs"], default="tcpreplay",
                    help="the benign traffic's sender: tcpreplay, or `rqvs send` (an AF_PACKET TX ring; "
                         "the attack's sender stays tcpreplay)")
    ap.add_argument("--sender-engine", choices=["ring", "xdp"], default="ring",
                    help="with --sender rqvs: `rqvs send --engine` (xdp: frames made by an XDP program, "
                         "no skb on the sending side; the sender's peers get GRO on, which a veth needs "
                         "to take them)")
    ap.add_argument("--switch-cpu", type=int, default=1, help="CPU of the switch and its one PMD (default 1)")
    ap.add_argument("--prefix", default="rqvsb", help="namespace prefix: PREFIX-src, PREFIX-sw, PREFIX-sink")
    ap.add_argument("--cache", default=str(REPO / "target/bench-switch"), help="converted flows and pcaps")
    ap.add_argument("--ready-timeout", type=float, default=1800,
                    help="seconds for rqvs to print `ready` (default 1800; since main@ab5230e it is ready "
                         "in ~1 s with 136K flows, ~7 s with 677K)")
    ap.add_argument("--ready-grace", type=float, default=0,
                    help="for a switch that prints no `ready` line: go on this many seconds after it has "
                         "lived 1 s and its ports are attached (default 0: wait for the line)")
    ap.add_argument("--attack", help="attack mode: this pcap (any Ethernet pcap; its destination MAC is rewritten) "
                    "is sent in a loop from a fourth namespace into the switch's port 3 during every probe")
    ap.add_argument("--attack-pps", help="attack rates, packets/s, e.g. 0,20000,50000 (0: the attacker is idle); "
                    "one row per (switch, rules, rate)")
    ap.add_argument("--attack-lead", type=float, default=2.0,
                    help="seconds the attack runs before each probe's benign sender starts (default 2)")
    ap.add_argument("--attack-timer", choices=["nano", "gtod"], default="nano",
                    help="the attack's tcpreplay timer: nano (sleeps; default) or gtod (busy-waits, tcpreplay's default)")
    ap.add_argument("--attack-burst", type=int, default=0,
                    help="with --attack-timer nano: frames per burst (default: rate/1000)")
    ap.add_argument("--json", help="write the results here (rewritten after every row)")
    ap.add_argument("--plot", help="draw rate vs rules to this SVG")
    ap.add_argument("--remove-stale", action="store_true",
                    help="remove PREFIX-src/sw/sink left by a run that was killed hard, if no process is inside")
    ap.add_argument("--keep-logs", action="store_true", help="keep the run directory (OVS logs, rqvs output)")
    ap.add_argument("--no-install", action="store_true", help="do not apt-get missing tools")
    a = ap.parse_args(argv)
    if a.probe_seconds < 1 or a.probe_seconds != round(a.probe_seconds):
        ap.error("--probe-seconds: a whole number of seconds, at least 1 (tcpreplay --duration)")
    a.sizes = [parse_size(s) for s in a.sizes.split(",") if s.strip()]
    a.switches = [s.strip() for s in a.switches.split(",") if s.strip()]
    a.ovs_ports = [s.strip() for s in a.ovs_ports.split(",") if s.strip()]
    a.rqvs_ports = [s.strip() for s in a.rqvs_ports.split(",") if s.strip()]
    a.designs = [s.strip() for s in a.designs.split(",") if s.strip()]
    if bool(a.attack) != bool(a.attack_pps):
        ap.error("--attack PCAP and --attack-pps R[,R2...] go together")
    if a.attack:
        try:
            a.attack_pps = [parse_rate(r) for r in a.attack_pps.split(",") if r.strip()]
        except ValueError as e:
            ap.error(f"--attack-pps: {e}")
        if not Path(a.attack).is_file():
            ap.error(f"--attack {a.attack}: no such file")
    for s in a.switches:
        if s not in ("ovs", "rqvs"):
            ap.error(f"unknown switch {s}")
    if a.sender_engine != "ring" and a.sender != "rqvs":
        ap.error("--sender-engine is an option of --sender rqvs")
    a.rqvs = str(Path(a.rqvs).resolve()) if Path(a.rqvs).exists() else a.rqvs
    return a


def main(argv=None):
    args = parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("run as root: it makes network namespaces and veth pairs")
    n_cpus = os.cpu_count() or 1
    for c in (args.sender_cpu, args.switch_cpu):
        if c >= n_cpus:
            raise SystemExit(f"CPU {c} does not exist ({n_cpus} CPUs)")
    if args.sender_cpu == args.switch_cpu:
        log("warning: sender and switch share a CPU")
    ensure_tools(args)
    if not Path(args.rqvs).is_file():
        raise SystemExit(f"{args.rqvs}: no rqvs binary (needed to convert rules and traces): "
                         f"cargo build --release -p rqvs, or --rqvs PATH")

    procs = Procs()
    cleanup = Cleanup(procs)
    atexit.register(cleanup.run)

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with SIGINT ignored
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    logroot = tempfile.mkdtemp(prefix="rqvsb-run-")
    failed = False
    meta = {
        "command": "bench switch",
        "argv": sys.argv,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "cpus": n_cpus,
        "kernel": platform.release(),
        "tcpreplay": tool_version(["tcpreplay", "-V"]),
        "ovs": tool_version(["ovs-vswitchd", "--version"]) if shutil.which("ovs-vswitchd") else None,
        "rqvs": args.rqvs,
        "method": {"probe_seconds": args.probe_seconds, "max_probe_seconds": args.max_probe_seconds,
                   "passes": args.passes, "gap": args.gap, "probes": args.probes, "warmup": args.warmup,
                   "loss": args.loss, "sender": args.sender, "sender_engine": args.sender_engine, "sender_cpu": args.sender_cpu,
                   "switch_cpu": args.switch_cpu, "set": args.set},
    }
    rows = []

    def save():
        if args.json:
            Path(args.json).write_text(json.dumps(dict(meta, rows=rows), indent=1) + "\n")

    variants = []
    if "ovs" in args.switches:
        if shutil.which("ovs-vswitchd") is None:
            log("OVS not installed: skipping it")
        else:
            variants += [("ovs", pt, None) for pt in args.ovs_ports]
    rqvs_missing = None
    if "rqvs" in args.switches:
        rqvs_missing = Rqvs.available(args.rqvs)
        if rqvs_missing:
            log(f"SKIPPING rqvs: {rqvs_missing}")
        variants += [("rqvs", pt, d) for pt in args.rqvs_ports for d in args.designs]

    atk_pcap = atk_frames = None
    if args.attack:
        atk_pcap, atk_frames = prepare_attack(Path(args.attack), cache)
        meta["attack"] = {"pcap": str(args.attack), "frames": atk_frames, "rates_pps": args.attack_pps,
                          "dst_mac": ATTACK_DMAC.hex(":"), "lead_s": args.attack_lead, "sender_cpu": args.sender_cpu,
                          "timer": args.attack_timer, "burst": args.attack_burst or "rate/1000"}
        log(f"attack: {atk_frames} frames of {args.attack}, dst MAC {ATTACK_DMAC.hex(':')} ({atk_pcap.name}), "
            f"at {', '.join(str(r) for r in args.attack_pps)} pps")
    try:
        for size in args.sizes:
            log(f"== {size} rule(s)")
            flows, n_flows, n_rules, pcap, frames = prepare(size, args, cache)
            if args.attack and pcap_frames_to(pcap, ATTACK_DMAC):
                raise SystemExit(f"{pcap} has frames to the attack's MAC {ATTACK_DMAC.hex(':')}: cannot tell them apart")
            log(f"  {n_rules} rules -> {n_flows} flows ({flows.name}), {frames} frames ({pcap.name})")
            ceiling_topo = Topology(args.prefix, procs, cleanup, gro_on_receivers=args.sender_engine == "xdp")
            ceiling_topo.remove_stale = args.remove_stale
            with ceiling_topo as topo:
                c = probe(topo, procs, args, pcap, None, int(args.probe_seconds), tx_dev="src1", rx_dev="sink1",
                          logdir=logroot)
                ceiling = c["received_pps"]
                log(f"  sender ceiling ({args.sender} at top speed, no switch): {ceiling / 1e3:.1f} Kpps")
            for (sw, pt, design), rate in ((v, r) for v in variants for r in (args.attack_pps or [None])):
                row = {"switch": sw, "port_type": pt, "design": design, "rules": n_rules, "flows": n_flows,
                       "set": args.set, "trace_frames": frames, "best_pps": None, "loss_at_best": None,
                       "sender_ceiling_pps": ceiling, "bound_by": None, "status": "ok", "reason": None,
                       "cpu": meta["cpu"],
                       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                       "switch_cpu": args.switch_cpu, "sender_cpu": args.sender_cpu,
                       "loadavg_before": open("/proc/loadavg").read().split()[:3]}
                if rate is not None:
                    row.update(attack_pps=rate, attack_pcap=str(args.attack), attack_frames=atk_frames)
                log(f"  -- {row_label(row)}" + (f", attack {rate / 1e3:g} Kpps" if rate is not None else ""))
                if sw == "rqvs" and rqvs_missing:
                    row.update(status="skipped", reason=rqvs_missing)
                    rows.append(row)
                    save()
                    continue
                with Topology(args.prefix, procs, cleanup, attack=rate is not None,
                              gro_on_receivers=args.sender_engine == "xdp") as topo:
                    vdir = tempfile.mkdtemp(prefix=f"{sw}-{pt}-{size}-", dir=logroot)
                    s = Ovs(pt, args, topo, procs, vdir) if sw == "ovs" else Rqvs(pt, design, args, topo, procs, vdir)
                    attack = None
                    try:
                        s.start()
                        s.load(flows, n_flows)
                        log(f"    loaded {n_flows} flows in {s.info.get('load_s')} s"
                            + (f", xdp-mode {s.info['xdp_mode']}" if s.info.get("xdp_mode") else ""))
                        if rate is not None:
                            attack = Attack(atk_pcap, rate, SinkClasses(topo), s.sample)
                        best, probes = search(topo, procs, args, pcap, frames, ceiling, vdir, attack=attack)
                        row["stats"] = s.stats()
                        row["probes"] = probes
                        row["sender_top_into_switch_pps"] = probes[0]["offered_pps"]
                        if best is not None:
                            row["best_pps"] = best["offered_pps"]
                            row["received_pps_at_best"] = best["received_pps"]
                            row["loss_at_best"] = best["loss"]
                            sender = probes[0]["pass"] or best["offered_pps"] >= 0.95 * ceiling
                            row["bound_by"] = "sender" if sender else "switch"
                            if attack is not None:
                                row["attack_at_best"] = best["attack"]
                                row["switch_sample_at_best"] = best["switch_sample"]
                        else:
                            row["bound_by"] = "switch"
                            row["reason"] = (f"no probe had < {100 * args.loss:g}% loss (lowest offered "
                                             f"{min(p['offered_pps'] for p in probes) / 1e3:.1f} Kpps)")
                        if attack is not None:
                            row["switch_sample_top"] = probes[0]["switch_sample"]
                    except Skip as e:
                        row.update(status="skipped", reason=str(e))
                        log(f"    skipped: {e}")
                    except (RuntimeError, subprocess.TimeoutExpired) as e:
                        row.update(status="failed", reason=str(e))
                        log(f"    FAILED: {e}")
                        failed = True
                    finally:
                        if attack is not None:
                            attack.classes.close()
                        s.stop()
                    row.update({k: v for k, v in s.info.items() if k not in row or row[k] is None})
                rows.append(row)
                save()
                if row["best_pps"] is not None:
                    log(f"    best {row['best_pps'] / 1e3:.1f} Kpps (loss {100 * row['loss_at_best']:.2f}%), "
                        f"ceiling {ceiling / 1e3:.1f} Kpps, bound by {row['bound_by']}")
    except BaseException:
        failed = True
        raise
    finally:
        cleanup.run()
        if rows:
            print()
            print_table(rows)
            save()
            if args.plot:
                (plot_attack if args.attack else plot)(rows, args.plot)
        if args.keep_logs or failed:
            log(f"logs kept in {logroot}")
        else:
            shutil.rmtree(logroot, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
