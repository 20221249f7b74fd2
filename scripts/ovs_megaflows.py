#!/usr/bin/env python3
"""Megaflows and masks real Open vSwitch 3.1 installs for a packet sequence, to set beside
`rqvs trace --rules FLOWS --trace PCAP` (the same flows, the same packets, the same order).

Usage: scripts/ovs_megaflows.py FLOWS.ofctl PACKETS.pcap [--packets N]

It starts a private userspace OVS (no kernel, as in shared/ovs-oracle.md) in a temporary
directory, loads FLOWS with `ovs-ofctl add-flows`, raises max-idle so nothing expires, injects
every frame of PACKETS.pcap in order on port 1 with `netdev-dummy/receive` (JSON-RPC over the
control socket, pipelined on one connection, so the order is kept), then counts the megaflows of
`dpctl/dump-flows` and their distinct masks (a flow's fields with values removed). The temporary
directory is removed at the end (OVS_KEEP_DIR=1 keeps it, with OVS's logs; OVS_DUMP=FILE writes
the dump-flows text).
Make the inputs with rqvs:
  rqvs convert rules RULES --to ofctl -o FLOWS.ofctl
  rqvs convert trace TRACE --to pcap -o PACKETS.pcap
"""
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile


def frames(path, limit):
    b = open(path, "rb").read()
    if b[:4] != b"\xd4\xc3\xb2\xa1":
        sys.exit(f"{path}: expected a little-endian microsecond pcap (as rqvs writes)")
    o, n = 24, 0
    while o + 16 <= len(b) and n < limit:
        incl = struct.unpack("<I", b[o + 8:o + 12])[0]
        yield b[o + 16:o + 16 + incl].hex()
        o += 16 + incl
        n += 1


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def main():
    args = sys.argv[1:]
    limit = 10**12
    if "--packets" in args:
        i = args.index("--packets")
        limit = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    flows, pcap = args
    d = tempfile.mkdtemp(prefix="rqvs-ovs-")
    env = dict(os.environ, OVS_RUNDIR=d, OVS_DBDIR=d, OVS_LOGDIR=d)
    db = f"unix:{d}/db.sock"
    run(["ovsdb-tool", "create", f"{d}/conf.db", "/usr/share/openvswitch/vswitch.ovsschema"], env=env)
    run(["ovsdb-server", f"{d}/conf.db", f"--remote=punix:{d}/db.sock", f"--pidfile={d}/ovsdb-server.pid",
         f"--log-file={d}/ovsdb-server.log", "--detach"], env=env)
    try:
        run(["ovs-vsctl", f"--db={db}", "--no-wait", "init"], env=env)
        run(["ovs-vswitchd", db, "--enable-dummy=override", "--disable-system", f"--pidfile={d}/ovs-vswitchd.pid",
             f"--log-file={d}/ovs-vswitchd.log", "--detach"], env=env)
        run(["ovs-vsctl", f"--db={db}", "add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev",
             "--", "add-port", "br0", "p1", "--", "set", "interface", "p1", "type=dummy", "ofport_request=1",
             "--", "add-port", "br0", "p2", "--", "set", "interface", "p2", "type=dummy", "ofport_request=2",
             "--", "set", "Open_vSwitch", ".", "other_config:max-idle=3600000"], env=env)
        run(["ovs-ofctl", "-O", "OpenFlow14", "--bundle", "add-flows", f"unix:{d}/br0.mgmt", flows], env=env)
        pid = open(f"{d}/ovs-vswitchd.pid").read().strip()
        ctl = f"{d}/ovs-vswitchd.{pid}.ctl"
        s = socket.socket(socket.AF_UNIX)
        s.connect(ctl)
        f = s.makefile("rwb")
        sent = done = 0
        pending = []
        buf = b""

        def read_one():
            nonlocal buf
            dec = json.JSONDecoder()
            while True:
                txt = buf.decode("utf-8", "replace").lstrip()
                try:
                    obj, end = dec.raw_decode(txt)
                    buf = txt[end:].encode()
                    return obj
                except ValueError:
                    chunk = s.recv(65536)
                    if not chunk:
                        sys.exit("vswitchd closed the control socket")
                    buf += chunk

        def call(method, params):
            nonlocal sent
            s.sendall(json.dumps({"method": method, "params": params, "id": sent}).encode())
            sent += 1

        def processed():
            call("dpctl/show", [])
            r = read_one()
            m = re.search(r"lookups: hit:(\d+) missed:(\d+) lost:(\d+)", r.get("result") or "")
            return sum(int(x) for x in m.groups()) if m else 0

        # netdev-dummy queues at most 100 received packets per port and drops the rest silently,
        # so packets go in groups of 50, each group waited for before the next.
        group = []
        for hexframe in frames(pcap, limit):
            group.append(hexframe)
            if len(group) == 50:
                for h in group:
                    call("netdev-dummy/receive", ["p1", h])
                for _ in group:
                    r = read_one()
                    if r.get("error"):
                        sys.exit(f"netdev-dummy/receive: {r['error']}")
                done += len(group)
                group = []
                while processed() < done:
                    pass
        for h in group:
            call("netdev-dummy/receive", ["p1", h])
        for _ in group:
            read_one()
        done += len(group)
        while processed() < done:
            pass
        show = run(["ovs-appctl", "-t", ctl, "dpctl/show"], env=env)
        looked = re.search(r"lookups: hit:(\d+) missed:(\d+) lost:(\d+)", show)
        out = run(["ovs-appctl", "-t", ctl, "dpctl/dump-flows"], env=env)
        lines = [l for l in out.splitlines() if l.startswith("recirc_id")]
        if os.environ.get("OVS_DUMP"):
            open(os.environ["OVS_DUMP"], "w").write(out)
        masks = set()
        for l in lines:
            key = l.split(", packets:")[0]
            # Keep field names and masks; drop values: "dst=10.1.2.3/255.0.0.0" -> "dst=/255.0.0.0".
            sig = re.sub(r"=([^,()/]*)(/[^,()]*)?", lambda m: "=" + (m.group(2) or "*"), key)
            # tcp_flags(+syn-ack) or tcp_flags(VALUE/MASK): the mask is the set of flags named.
            def flags_mask(m):
                body = m.group(1)
                if "/" in body:
                    return "tcp_flags(" + body.split("/", 1)[1] + ")"
                return "tcp_flags(" + ",".join(sorted(re.findall(r"[+-]([a-z0-9\[\]]+)", body))) + ")"
            sig = re.sub(r"tcp_flags\(([^)]*)\)", flags_mask, sig)
            # A datapath mask is bits, not protocol names: tcp/udp/sctp ports are the same bits.
            sig = re.sub(r"\b(tcp|udp|sctp)\(", "l4(", sig)
            masks.add(sig)
        hit, missed, lost = (int(x) for x in looked.groups()) if looked else (-1, -1, -1)
        print(json.dumps({"packets": done, "hit": hit, "missed": missed, "lost": lost,
                          "megaflows": len(lines), "masks": len(masks)}))
    finally:
        for name in ("ovs-vswitchd", "ovsdb-server"):
            try:
                pid = open(f"{d}/{name}.pid").read().strip()
                subprocess.run(["ovs-appctl", "-t", f"{d}/{name}.{pid}.ctl", "exit"], capture_output=True, env=env)
            except OSError:
                pass
        # The private OVS's directory (database, logs) goes too, unless asked to keep it.
        if os.environ.get("OVS_KEEP_DIR"):
            print(f"OVS directory kept: {d}", file=sys.stderr)
        else:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
