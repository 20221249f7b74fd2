"""Wide header fields through the binding: IPv6 addresses (16 bytes in network order), MACs,
metadata, TTL and the rest of ``rqvs.FIELDS`` in structured arrays.

A ClassBench-ng IPv6 set (acl1 seed, ``--ipv6-prefixes spread``: prefixes up to /128) and an of1
OpenFlow set are generated with the ``rqvs`` command line, with a pcap trace each; the trace is
read with ``rqvs.read_trace`` and every classifier kind must give the reference's winners, whose
match count must equal ``rqvs classify``'s on the same files. The same headers assembled by hand
(``ipaddress``' packed addresses) must classify the same, and zeroing the IPv6 addresses must
change the answers (the fields are read, not ignored).
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

import rqvs

KINDS = [k for k in rqvs.CLASSIFIERS if k != "ref"]


def run(cli: Path, *args: str) -> str:
    r = subprocess.run([str(cli), *args], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"rqvs {' '.join(args)}: {r.stderr}"
    return r.stdout


def generate(cli: Path, d: Path, name: str, *gen: str) -> tuple[Path, Path]:
    rules, trace = d / f"{name}.ofctl", d / f"{name}.pcap"
    run(cli, "gen", "rules", *gen, "--count", "2000", "-o", str(rules))
    run(cli, "gen", "trace", "--rules", str(rules), "--packets", "5000", "--format", "pcap", "-o", str(trace))
    return rules, trace


def cli_matched(cli: Path, rules: Path, trace: Path) -> int:
    report = json.loads(run(cli, "classify", "--rules", str(rules), "--trace", str(trace), "--json", "-"))
    assert report["mismatches"] == 0
    return int(report["matched"])


def test_fields_and_dtype():
    assert list(rqvs.FIELDS[:13]) == [
        "nw_src", "nw_dst", "tp_src", "tp_dst", "nw_proto", "tcp_flags", "in_port",
        "dl_type", "vlan_tci", "nw_tos", "nw_frag", "dl_src", "dl_dst",
    ]  # fmt: skip
    assert set(rqvs.FIELDS) >= {"ipv6_src", "ipv6_dst", "metadata", "nw_ttl", "nd_target", "arp_sha", "arp_tha"}
    assert tuple(rqvs.HEADER_DTYPE.names) == tuple(rqvs.FIELDS)
    assert rqvs.HEADER_DTYPE["ipv6_src"].shape == (16,)


@pytest.mark.parametrize("name,gen", [
    ("acl1v6", ("--seed-file", "acl1", "--ipv6", "--ipv6-prefixes", "spread")),
    ("acl1v6top", ("--seed-file", "acl1", "--ipv6")),
    ("of1", ("--seed-file", "of1")),
])  # fmt: skip
def test_wide_sets_classify_as_the_cli(cli, tmp_path, name, gen):
    rules, trace = generate(cli, tmp_path, name, *gen)
    headers = rqvs.read_trace(trace)
    assert headers.dtype == rqvs.HEADER_DTYPE and len(headers) == 5000
    want = rqvs.Classifier.from_file(rules, kind="ref").classify(headers)
    assert int((want >= 0).sum()) == cli_matched(cli, rules, trace)
    for kind in KINDS:
        got = rqvs.Classifier.from_file(rules, kind=kind).classify(headers)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, f"{kind}: {bad.size} mismatches; first at {bad[0]}: {got[bad[0]]} != {want[bad[0]]}"
    if "--ipv6" in gen:
        assert (headers["dl_type"] == 0x86DD).all()
        # The addresses as ipaddress packs them, in a structured array of only the fields used.
        dtype = np.dtype([
            ("ipv6_src", np.uint8, (16,)), ("ipv6_dst", np.uint8, (16,)), ("dl_type", np.uint16),
            ("nw_proto", np.uint8), ("tp_src", np.uint16), ("tp_dst", np.uint16), ("tcp_flags", np.uint16),
            ("nw_ttl", np.uint8), ("dl_src", np.uint64), ("dl_dst", np.uint64),
        ])  # fmt: skip
        own = np.zeros(len(headers), dtype=dtype)
        for f in dtype.names:
            own[f] = headers[f]
        for i in range(0, len(headers), 997):
            a = ipaddress.IPv6Address(bytes(headers["ipv6_src"][i]))
            own["ipv6_src"][i] = np.frombuffer(a.packed, dtype=np.uint8)
        c = rqvs.Classifier.from_file(rules, kind="nmu")
        assert (c.classify(own) == want).all()
        # Without the addresses the answers change: the binding reads them.
        blind = own.copy()
        blind["ipv6_src"] = 0
        blind["ipv6_dst"] = 0
        assert (c.classify(blind) != want).any()
        if "spread" in gen:
            # Spread prefixes reach beyond the top 32 bits of the address.
            lens = [ipaddress.IPv6Network(line.split("ipv6_dst=")[1].split(",")[0]).prefixlen
                    for line in rules.read_text().splitlines() if "ipv6_dst=" in line and "/" in line.split("ipv6_dst=")[1].split(",")[0]]  # fmt: skip
            assert max(lens) > 32


def test_wide_values_are_checked():
    h = np.zeros(2, dtype=[("ipv6_src", np.uint64), ("ipv6_label", np.uint32), ("metadata", np.uint64)])
    h["ipv6_label"][1] = 1 << 20
    c = rqvs.Classifier.from_rules(["@0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000\t"], kind="ref")
    with pytest.raises(ValueError, match=r"headers\[1\]: ipv6_label 1048576 is out of range 0..1048575"):
        c.classify(h)
    bad = np.zeros(2, dtype=[("ipv6_src", np.uint16, (8,))])
    with pytest.raises(TypeError, match="or a \\(16,\\) subarray of uint8"):
        c.classify(bad)
    h["ipv6_label"][1] = 0
    h["metadata"] = np.uint64(2**64 - 1)
    assert (c.classify(h) == 0).all()
